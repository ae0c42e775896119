"""posenc against Hugging Face transformers itself, where it is installed.

transformers is not a dependency of posenc or of its test extra (it is large);
the other tests compare against formulas and re-implementations written here.
To run these as well: ``pip install transformers`` into the test environment.
Last run: transformers 5.24.0, torch 2.13.0 -- all equal (frequencies bit for
bit, T5 buckets element for element).
"""

from __future__ import annotations

import itertools

import pytest
import torch

import posenc

transformers = pytest.importorskip("transformers")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")


def _config(dim, base, params, max_positions):
    return transformers.LlamaConfig(
        hidden_size=dim * 4,
        num_attention_heads=4,
        head_dim=dim,
        max_position_embeddings=max_positions,
        rope_parameters={"rope_theta": base, **params},
    )


SETTINGS = list(itertools.product([16, 64, 128], [10000.0, 500000.0], [2.0, 8.0], [2048, 8192]))


@pytest.mark.parametrize("dim, base, factor, original", SETTINGS)
def test_scaled_frequencies_equal_transformers(dim, base, factor, original):
    init = rope_utils.ROPE_INIT_FUNCTIONS
    longer = int(original * factor)
    cases = {
        posenc.LinearScaling(factor): ("linear", {"factor": factor}),
        posenc.YarnScaling(factor, original): (
            "yarn",
            {"factor": factor, "original_max_position_embeddings": original},
        ),
        posenc.Llama3Scaling(factor, 1.0, 4.0, original): (
            "llama3",
            {
                "factor": factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": original,
            },
        ),
    }
    for scaling, (kind, params) in cases.items():
        config = _config(dim, base, {"rope_type": kind, **params}, longer)
        inv_freq, attention_factor = init[kind](config, "cpu")
        torch.testing.assert_close(
            posenc.rope_frequencies(dim, base=base, scaling=scaling), inv_freq, rtol=1e-6, atol=0
        )
        if kind == "yarn":
            assert attention_factor == pytest.approx(scaling.attention_factor, rel=1e-12)


def test_apply_rope_equals_llama_rotation():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 8, 64, 128).unbind(0)
    position_ids = torch.arange(64).expand(2, 64)
    angles = position_ids[..., None].float() * posenc.rope_frequencies(128)
    emb = torch.cat([angles, angles], dim=-1)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    positions = position_ids[:, None, :]  # (B, S) -> (B, 1, S) for x of shape (B, H, S, D)
    torch.testing.assert_close(posenc.apply_rope(q, positions), hf_q)
    torch.testing.assert_close(posenc.apply_rope(k, positions), hf_k)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(8, 16), (32, 128), (64, 256)])
def test_t5_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-1000, 1001)
    expected = T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    got = posenc.t5_relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(got, expected)


@pytest.mark.parametrize("n_heads", [1, 3, 8, 12, 20, 24, 112])
def test_alibi_slopes_equal_bloom(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)  # slope * key position
    torch.testing.assert_close(posenc.alibi_slopes(n_heads), alibi[:, 0, 1], rtol=1e-6, atol=0)
