"""posenc.CoPE against x-transformers' ``CoPE`` itself, where x-transformers is installed.

x-transformers is not a dependency of posenc or of its test extra; the other
CoPE tests compare against the paper's formula written out in a loop. To run
these as well, in a separate environment::

    pip install torch==2.13.0 && pip install x-transformers pytest
    python -m pytest -o addopts="" -p no:cacheprovider tests/test_xtransformers_parity.py

Last run: x-transformers 2.31.10, torch 2.13.0 (CPU): 7 shapes times 4 masks
(causal with -inf, causal with x-transformers' -finfo.max, causal with left
padding, none) = 28 cases, 24 of them bit for bit equal; largest output
difference 4.8e-07, for one cached query (shape (1, 1, 1, 9, 8, 16): einsum
and matmul sum the position logits in different orders); largest gradient
difference (q, scores, table) 5.7e-06 absolute, within rtol 1e-5. Plus the
bias inside x-transformers' own ``Attention(use_cope=True)``.
"""

from __future__ import annotations

import math

import pytest
import torch

import posenc

xt = pytest.importorskip("x_transformers.x_transformers")

# (batch, heads, q_len, k_len, dim, max_positions)
SHAPES = [
    (1, 1, 1, 1, 4, 2),
    (1, 1, 1, 9, 8, 16),  # one cached query
    (2, 4, 7, 7, 16, 8),
    (3, 2, 5, 9, 8, 4),  # fewer queries than keys, aligned to the end
    (2, 8, 16, 16, 32, 32),
    (1, 2, 12, 12, 8, 3),  # clamped for most pairs
    (2, 2, 33, 33, 64, 64),
]


def make_inputs(shape, mask: str, mask_value: float, seed: int):
    b, h, q_len, k_len, d, _ = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, q_len, d, generator=gen)
    k = torch.randn(b, h, k_len, d, generator=gen)
    scores = q @ k.transpose(-1, -2) * d**-0.5  # x-transformers' sim = q . k * scale
    masked = torch.zeros(b, 1, q_len, k_len, dtype=torch.bool)
    if mask in ("causal", "causal+padding"):
        masked |= torch.ones(q_len, k_len, dtype=torch.bool).triu(k_len - q_len + 1)
    if mask == "causal+padding" and k_len > 2:
        masked[0, ..., : k_len // 3] = True  # left padding of the first sequence
        masked[0, ..., -1] = False  # its queries still see themselves
    return q, scores.masked_fill(masked, mask_value)


def pair(shape, seed: int):
    _, h, _, _, d, max_positions = shape
    torch.manual_seed(seed)
    theirs = xt.CoPE(d, h, max_positions)  # defaults: no soft one-hot, no talking heads
    torch.nn.init.normal_(theirs.pos_emb)  # both start at zero; give the table values
    ours = posenc.CoPE(d, h, max_positions)
    with torch.no_grad():
        ours.pos_emb.copy_(theirs.pos_emb)  # the same layout: [max_positions, dim]
    return ours, theirs


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("mask", "mask_value"),
    [
        ("causal", -math.inf),
        ("causal", -torch.finfo(torch.float32).max),  # what x-transformers' Attend fills in
        ("causal+padding", -math.inf),
        ("none", -math.inf),
    ],
)
def test_cope_equals_x_transformers(shape, mask, mask_value):
    ours, theirs = pair(shape, seed=sum(shape))
    q, scores = make_inputs(shape, mask, mask_value, seed=len(mask) + sum(shape))
    q_ours, s_ours = q.clone().requires_grad_(), scores.clone().requires_grad_()
    q_theirs, s_theirs = q.clone().requires_grad_(), scores.clone().requires_grad_()
    out_ours = ours(q_ours, s_ours)
    out_theirs = theirs(q_theirs, s_theirs)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-6, atol=1e-6)
    # and the same gradients for the same upstream gradient
    upstream = torch.randn(out_ours.shape, generator=torch.Generator().manual_seed(1))
    (out_ours * upstream).sum().backward()
    (out_theirs * upstream).sum().backward()
    torch.testing.assert_close(q_ours.grad, q_theirs.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(s_ours.grad, s_theirs.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.pos_emb.grad, theirs.pos_emb.grad, rtol=1e-5, atol=1e-6)


def test_cope_inside_x_transformers_attention():
    """The bias x-transformers' Attend adds, recomputed from its own q and scores."""
    torch.manual_seed(0)
    attn = xt.Attention(dim=32, heads=4, dim_head=8, causal=True, use_cope=True, cope_max_pos=6)
    torch.nn.init.normal_(attn.attend.cope.pos_emb)
    ours = posenc.CoPE(8, 4, 6)
    with torch.no_grad():
        ours.pos_emb.copy_(attn.attend.cope.pos_emb)
    seen = {}

    def hook(module, args, output):
        seen["q"], seen["scores"] = args
        seen["bias"] = output

    attn.attend.cope.register_forward_hook(hook)
    attn(torch.randn(2, 10, 32))
    torch.testing.assert_close(ours(seen["q"], seen["scores"]), seen["bias"], rtol=1e-6, atol=1e-6)
