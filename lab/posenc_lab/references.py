"""RoPE as other libraries write it, independently of ``posenc.rope``.

The contenders of :mod:`posenc_lab.cpu_bench` and :mod:`posenc_lab.gpu_bench`
and the comparisons of chapter *RoPE as a memory-bound kernel*: Hugging
Face's half layout (``rotate_half`` with ``cos`` and ``sin`` tables of the
whole head) and Meta's Llama (complex multiplication of interleaved pairs).
``tests/lab/test_traffic.py`` checks them against :func:`posenc.apply_rope`.
"""

from __future__ import annotations

import torch

__all__ = ["hf_apply_rotary", "hf_cos_sin", "meta_apply_rotary", "meta_freqs_cis", "rotate_half"]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``rotate_half``: ``[x1, x2] -> [-x2, x1]`` on the last axis."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_cos_sin(
    positions: torch.Tensor, dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's cos/sin, float32, shape ``(S, dim)``: each half repeated.

    ``inv_freq = 1 / base ** (arange(0, dim, 2) / dim)``, angles
    ``positions * inv_freq`` in float32, ``emb = cat(freqs, freqs)``.
    """
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]  # (S, dim/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (S, dim)
    return emb.cos(), emb.sin()


def hf_apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's eager ``q * cos + rotate_half(q) * sin`` (half layout)."""
    return x * cos + rotate_half(x) * sin


def meta_freqs_cis(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Meta's Llama ``precompute_freqs_cis``: ``polar(1, p * theta)``, complex64, ``(S, dim/2)``."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angles = torch.outer(positions.float(), freqs)  # (S, dim/2)
    return torch.polar(torch.ones_like(angles), angles)


def meta_apply_rotary(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Meta's Llama rotation: pairs ``(2i, 2i+1)`` as complex numbers (interleaved layout).

    (torchtune rotates the same interleaved pairs with real arithmetic instead.)
    """
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (..., dim/2)
    return torch.view_as_real(pairs * freqs_cis).flatten(-2).type_as(x)
