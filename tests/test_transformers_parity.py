"""posenc against Hugging Face transformers itself, where it is installed.

transformers is not a dependency of posenc; the test extra pins it to one
minor release (``transformers>=5.24,<5.25``), so that ``make test`` and CI run
these tests against a known version. Elsewhere (the wheel check of
``.ci/package``) they are skipped, and the other tests compare against
formulas and re-implementations written here. Last run: transformers 5.24.0,
torch 2.13.0 -- all equal (frequencies bit for bit, T5 buckets element for
element).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import posenc

pytestmark = pytest.mark.needs_torch(
    "2.6.0", "transformers 5.24, the reference these tests compare with, needs torch 2.6"
)

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
    differ = got != expected
    if differ.any():
        # Hugging Face calls torch's float32 log, which is not correctly
        # rounded on every CPU; posenc's bucket edges are. They may then
        # part by one bucket, only where this CPU's log is off.
        side = num_buckets // 2 if bidirectional else num_buckets
        max_exact = side // 2
        ratios = relative[differ].abs().float() / max_exact
        ratios = torch.cat([ratios, torch.tensor([max_distance / max_exact])])
        correctly_rounded = torch.tensor([math.log(r) for r in ratios.tolist()]).float()
        assert not torch.equal(torch.log(ratios), correctly_rounded), relative[differ]
        assert torch.equal((got - expected)[differ].abs(), torch.ones_like(got[differ]))


@pytest.mark.parametrize("n_heads", [1, 3, 8, 12, 20, 24, 112])
def test_alibi_slopes_equal_bloom(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)  # slope * key position
    torch.testing.assert_close(posenc.alibi_slopes(n_heads), alibi[:, 0, 1], rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------
# Version 0.2: dynamic NTK, LongRoPE, YaRN with DeepSeek's mscale, p-RoPE,
# M-RoPE (Qwen2-VL, Qwen3-VL) and Llama 4's attention temperature.
# Last run: transformers 5.24.0, torch 2.13.0, 350 tests -- frequencies and
# attention factors bit for bit against HF's functions; rotations (Phi-3,
# DeepSeek-V3, Gemma 4, Qwen2-VL, Qwen3-VL) within 4.8e-7 (posenc fuses a
# product and an addition); dynamic NTK through HF's module within 1.9e-6
# (its base is formed in float32, see _dynamic_close); Llama 4's
# temperature bit for bit.
# ---------------------------------------------------------------------------


def _lengths(original):
    """Sequence lengths below, at and above the original context."""
    return [1, original // 2, original - 1, original, original + 1, 2 * original, 3 * original + 5]


DYNAMIC_SETTINGS = [
    *itertools.product([16, 64, 128], [10000.0, 500000.0], [2.0, 8.0], [2048, 8192]),
    (64, 10000.0, 1.7, 3000),
    (128, 1000000.0, 3.3, 4000),
    (96, 10000.0, 0.5, 1000),
]


@pytest.mark.parametrize("dim, base, factor, original", DYNAMIC_SETTINGS)
def test_dynamic_ntk_frequencies_equal_transformers(dim, base, factor, original):
    init = rope_utils.ROPE_INIT_FUNCTIONS["dynamic"]
    config = _config(dim, base, {"rope_type": "dynamic", "factor": factor}, original)
    scaling = posenc.DynamicNTKScaling(factor, original)
    for n in _lengths(original):
        inv_freq, attention_factor = init(config, "cpu", seq_len=n)
        got = posenc.rope_frequencies(dim, base=base, scaling=scaling, seq_len=n)
        torch.testing.assert_close(got, inv_freq, rtol=1e-6, atol=0, msg=f"seq_len={n}")
        assert attention_factor == 1.0
    # at initialisation Hugging Face uses the original length: the unscaled frequencies
    inv_freq, _ = init(config, "cpu")
    torch.testing.assert_close(posenc.rope_frequencies(dim, base=base), inv_freq, rtol=1e-6, atol=0)


def _rotate_hf(rotary, apply, q, k, position_ids):
    cos, sin = rotary(q, position_ids)
    return apply(q, k, cos, sin)


def _dynamic_close(got, expected, top):
    """Within the float32 rounding of Hugging Face's module path.

    ``dynamic_rope_update`` passes the length as a tensor, so the module forms
    the new base in float32 tensor arithmetic, while its frequency function
    (given an int, as the test above does) and posenc form it in Python floats:
    the frequencies then differ by up to 3.5e-7 relative (measured over
    16..128 features, 4 factors, 4 original lengths), and the angles by that
    much of ``p * theta`` -- so the tolerance grows with the largest position.
    A wrong length moves the frequencies by percent.
    """
    torch.testing.assert_close(got, expected, rtol=1.3e-6, atol=1e-5 + 2e-6 * top)


@pytest.mark.parametrize("factor, original", [(2.0, 64), (4.0, 100), (8.0, 128)])
def test_dynamic_ntk_rotation_equals_llama(factor, original):
    """Fresh rotary modules: HF keeps the frequencies of the longest sequence it has seen."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    dim = 64
    config = _config(dim, 10000.0, {"rope_type": "dynamic", "factor": factor}, original)
    scaling = posenc.DynamicNTKScaling(factor, original)
    torch.manual_seed(0)

    def check(position_ids, heads=3):
        q, k = torch.randn(2, position_ids.shape[0], heads, position_ids.shape[1], dim).unbind(0)
        rotary = LlamaRotaryEmbedding(config)
        hf_q, hf_k = _rotate_hf(rotary, apply_rotary_pos_emb, q, k, position_ids)
        n = int(position_ids.max()) + 1
        # the module chose the same length: its frequencies are posenc's for n
        expected = posenc.rope_frequencies(dim, scaling=scaling, seq_len=n)
        torch.testing.assert_close(rotary.inv_freq, expected, rtol=1e-6, atol=0)
        positions = position_ids[:, None, :]
        got = posenc.apply_rope(q, positions, scaling=scaling)
        _dynamic_close(got, hf_q, n)
        got_q, got_k = posenc.RotaryEmbedding(dim, scaling=scaling)(q, k, positions)
        _dynamic_close(got_q, hf_q, n)
        _dynamic_close(got_k, hf_k, n)
        # an explicit length gives the same without reading the positions back
        assert torch.equal(posenc.apply_rope(q, positions, scaling=scaling, seq_len=n), got)

    for n in _lengths(original):
        check(torch.arange(n).expand(2, n))
    # a decode step: one position, the length is that position + 1
    for p in [original - 1, original, 5 * original]:
        check(torch.tensor([[p]]), heads=1)
    # a batch with different offsets: one length for the batch, the largest
    check(torch.stack([torch.arange(10), torch.arange(10) + 3 * original]))


def _factor_lists(n, seed):
    g = torch.Generator().manual_seed(seed)
    short = (1.0 + 0.1 * torch.rand(n, generator=g, dtype=torch.float64)).tolist()
    long = (1.0 + 40.0 * torch.rand(n, generator=g, dtype=torch.float64)).sort().values.tolist()
    return short, long


LONGROPE_SETTINGS = list(
    itertools.product([16, 64, 96, 128], [10000.0, 500000.0], [2048, 4096], [1, 4, 32])
)


@pytest.mark.parametrize("dim, base, original, extension", LONGROPE_SETTINGS)
def test_longrope_frequencies_equal_transformers(dim, base, original, extension):
    init = rope_utils.ROPE_INIT_FUNCTIONS["longrope"]
    short, long = _factor_lists(dim // 2, seed=dim + extension)
    params = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": original,
    }
    cases = [  # (posenc scaling, HF params, HF max_position_embeddings)
        # factor from max_position_embeddings / original (Phi-3's configs)
        (
            posenc.LongRopeScaling(short, long, original, max_positions=original * extension),
            params,
            original * extension,
        ),
        # factor given
        (
            posenc.LongRopeScaling(short, long, original, factor=float(extension)),
            {**params, "factor": float(extension)},
            original,
        ),
        # attention factor given
        (
            posenc.LongRopeScaling(short, long, original, attention_factor=1.25),
            {**params, "factor": float(extension), "attention_factor": 1.25},
            original,
        ),
    ]
    for scaling, hf_params, max_positions in cases:
        config = _config(dim, base, hf_params, max_positions)
        for n in [None, *_lengths(original)]:
            inv_freq, attention_factor = init(config, "cpu", seq_len=n)
            got = posenc.rope_frequencies(
                dim, base=base, scaling=scaling, seq_len=0 if n is None else n
            )
            torch.testing.assert_close(got, inv_freq, rtol=1e-6, atol=0, msg=f"seq_len={n}")
            assert scaling.attention_factor == pytest.approx(attention_factor, rel=1e-15)


def test_longrope_factor_at_most_one_equals_transformers():
    init = rope_utils.ROPE_INIT_FUNCTIONS["longrope"]
    short, long = _factor_lists(32, seed=1)
    params = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": 4096,
    }
    for factor in [0.5, 1.0]:
        _, attention_factor = init(_config(64, 10000.0, {**params, "factor": factor}, 4096), "cpu")
        assert attention_factor == 1.0
        assert posenc.LongRopeScaling(short, long, 4096, factor=factor).attention_factor == 1.0


@pytest.mark.parametrize("partial", [1.0, 0.75])
def test_longrope_rotation_equals_phi3(partial):
    """Phi-3's rotary module (long or short set from the positions) and partial rotation (Phi-4-mini)."""
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding, apply_rotary_pos_emb

    head_dim, original, extension = 64, 64, 16
    rot = int(head_dim * partial)
    short, long = _factor_lists(rot // 2, seed=7)
    config = transformers.Phi3Config(
        hidden_size=head_dim * 4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=original * extension,
        original_max_position_embeddings=original,  # Phi-3 reads it from here, not rope_parameters
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "short_factor": short,
            "long_factor": long,
            "original_max_position_embeddings": original,
            "partial_rotary_factor": partial,
        },
    )
    scaling = posenc.LongRopeScaling(short, long, original, max_positions=original * extension)
    torch.manual_seed(0)
    for n in [original // 2, original, original + 1, 3 * original]:
        q = torch.randn(2, 4, n, head_dim)
        k = torch.randn(2, 2, n, head_dim)
        position_ids = torch.arange(n).expand(2, n)
        rotary = Phi3RotaryEmbedding(config)
        assert rotary.attention_scaling == pytest.approx(scaling.attention_factor, rel=1e-15)
        hf_q, hf_k = _rotate_hf(rotary, apply_rotary_pos_emb, q, k, position_ids)
        positions = position_ids[:, None, :]
        torch.testing.assert_close(
            posenc.apply_rope(q, positions, scaling=scaling, rotary_dim=rot), hf_q
        )
        got_q, got_k = posenc.RotaryEmbedding(rot, scaling=scaling)(q, k, positions)
        torch.testing.assert_close(got_q, hf_q)
        torch.testing.assert_close(got_k, hf_k)


MSCALE_PAIRS = [(1.0, 1.0), (0.707, 0.707), (1.0, 0.5), (0.5, 1.0), (2.0, 1.0), (1.0, 0.707)]


@pytest.mark.parametrize("mscale, mscale_all_dim", MSCALE_PAIRS)
@pytest.mark.parametrize(
    "dim, factor, original", [(64, 40.0, 4096), (128, 4.0, 2048), (64, 16.0, 8192), (64, 1.0, 4096)]
)
def test_yarn_mscale_equals_transformers(dim, factor, original, mscale, mscale_all_dim):
    init = rope_utils.ROPE_INIT_FUNCTIONS["yarn"]
    params = {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": mscale,
        "mscale_all_dim": mscale_all_dim,
    }
    config = _config(dim, 10000.0, params, int(original * factor))
    inv_freq, attention_factor = init(config, "cpu")
    scaling = posenc.YarnScaling(factor, original, mscale=mscale, mscale_all_dim=mscale_all_dim)
    torch.testing.assert_close(
        posenc.rope_frequencies(dim, scaling=scaling), inv_freq, rtol=1e-6, atol=0
    )
    assert scaling.attention_factor == attention_factor


def test_yarn_rotation_equals_deepseek_v3():
    """DeepSeek-V3's settings (factor 40, mscale = mscale_all_dim = 1) and its interleaved pairs."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3RotaryEmbedding,
        apply_rotary_pos_emb_interleave,
        yarn_apply_mscale,
    )

    rope_parameters = {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    }
    config = transformers.DeepseekV3Config(
        max_position_embeddings=163840, rope_parameters=rope_parameters, qk_rope_head_dim=64
    )
    scaling = posenc.YarnScaling(40.0, 4096, mscale=1.0, mscale_all_dim=1.0)
    assert scaling.attention_factor == 1.0
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 4, 50, 64).unbind(0)
    position_ids = torch.arange(5000, 5050).expand(2, 50)
    hf_q, hf_k = _rotate_hf(
        DeepseekV3RotaryEmbedding(config), apply_rotary_pos_emb_interleave, q, k, position_ids
    )
    torch.testing.assert_close(
        posenc.apply_rope(k, position_ids[:, None], scaling=scaling, layout="interleaved")[
            ..., torch.cat([torch.arange(0, 64, 2), torch.arange(1, 64, 2)])
        ],
        hf_k,
    )
    # DeepSeek rotates interleaved pairs and returns them de-interleaved: evens, then odds
    order = torch.cat([torch.arange(0, 64, 2), torch.arange(1, 64, 2)])
    got = posenc.apply_rope(q, position_ids[:, None], scaling=scaling, layout="interleaved")
    torch.testing.assert_close(got[..., order], hf_q)
    # the softmax scale carries get_mscale(s, mscale_all_dim) ** 2, so that the logits
    # scale by get_mscale(s, mscale) ** 2 in all
    for mscale, all_dim in MSCALE_PAIRS:
        params = {**rope_parameters, "mscale": mscale, "mscale_all_dim": all_dim}
        s = posenc.YarnScaling(40.0, 4096, mscale=mscale, mscale_all_dim=all_dim)
        total = s.attention_factor**2 * yarn_apply_mscale(params, 1.0)
        assert total == pytest.approx((0.1 * mscale * math.log(40.0) + 1) ** 2, rel=1e-12)


PROPORTIONAL_SETTINGS = list(
    itertools.product(
        [16, 64, 128, 256, 512], [0.1, 0.25, 0.3, 0.5, 0.75, 1.0], [1.0, 2.0, 8.0], [1e4, 1e6]
    )
)


@pytest.mark.parametrize("dim, fraction, factor, base", PROPORTIONAL_SETTINGS)
def test_proportional_frequencies_equal_transformers(dim, fraction, factor, base):
    init = rope_utils.ROPE_INIT_FUNCTIONS["proportional"]
    params = {"rope_type": "proportional", "partial_rotary_factor": fraction, "factor": factor}
    inv_freq, attention_factor = init(_config(dim, base, params, 4096), "cpu")
    got = posenc.rope_frequencies(
        dim, base=base, scaling=posenc.ProportionalScaling(fraction, factor)
    )
    assert torch.equal(got, inv_freq)
    assert attention_factor == 1.0


def test_proportional_rotation_equals_gemma4():
    from transformers.models.gemma4.modeling_gemma4 import (
        Gemma4TextRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = transformers.Gemma4TextConfig(
        hidden_size=256,
        num_attention_heads=2,
        head_dim=32,
        global_head_dim=128,
        num_hidden_layers=6,
        vocab_size=100,
    )
    assert config.rope_parameters["full_attention"]["rope_type"] == "proportional"
    rotary = Gemma4TextRotaryEmbedding(config)
    torch.manual_seed(0)
    x = torch.randn(2, 2, 40, 128)
    position_ids = torch.stack([torch.arange(40), torch.arange(40) + 100000])
    cos, sin = rotary(x, position_ids, "full_attention")
    expected = apply_rotary_pos_emb(x, cos, sin)
    scaling = posenc.ProportionalScaling(0.25)  # Gemma 4's partial_rotary_factor
    got = posenc.apply_rope(x, position_ids[:, None], base=1e6, scaling=scaling)
    torch.testing.assert_close(got, expected)
    # three quarters of the pairs are not rotated: features 16..63 and 80..127 pass through
    kept = torch.cat([torch.arange(16, 64), torch.arange(80, 128)])
    assert torch.equal(got[..., kept], x[..., kept])


def _vl_positions(batch):
    """Qwen-VL style coordinates: text, an image grid, text again; and random ones."""
    t, h, w = 2, 3, 4
    text = torch.arange(5).expand(3, 5)
    image = posenc.grid_positions(t, h, w) + 5  # offset: after the text
    after = torch.arange(10).expand(3, 10) + image.max() + 1  # text resumes after the image
    structured = torch.cat([text, image, after], dim=1)  # (3, 39)
    g = torch.Generator().manual_seed(batch)
    random = torch.randint(0, 50000, (3, structured.shape[1]), generator=g)
    return torch.stack([structured, random][:batch], dim=1)  # (3, batch, 39)


QWEN2_SECTIONS = [
    (128, [16, 24, 24]),
    (64, [8, 12, 12]),
    (32, [4, 6, 6]),
    (64, [10, 12, 10]),
    (16, [2, 3, 3]),
]


def _check_mrope(config_cls, rotary_cls, apply_fn, head_dim, sections, base, interleave):
    """posenc.apply_mrope against a Qwen VL model's rotary module, q and k with GQA."""
    config = config_cls(
        hidden_size=head_dim * 4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        rope_parameters={"rope_type": "default", "mrope_section": sections, "rope_theta": base},
    )
    torch.manual_seed(0)
    position_ids = _vl_positions(2)  # (3, B, S)
    q = torch.randn(2, 4, position_ids.shape[-1], head_dim)
    k = torch.randn(2, 2, position_ids.shape[-1], head_dim)
    hf_q, hf_k = _rotate_hf(rotary_cls(config), apply_fn, q, k, position_ids)
    positions = position_ids[:, :, None, :]  # (3, B, 1, S) for x of shape (B, H, S, D)
    for x, expected in ((q, hf_q), (k, hf_k)):
        got = posenc.apply_mrope(x, positions, sections, base=base, interleave=interleave)
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("head_dim, sections", QWEN2_SECTIONS)
@pytest.mark.parametrize("base", [10000.0, 1000000.0])
def test_mrope_equals_qwen2_vl(head_dim, sections, base):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import (
        Qwen2VLRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    _check_mrope(
        transformers.Qwen2VLTextConfig,
        Qwen2VLRotaryEmbedding,
        apply_rotary_pos_emb,
        head_dim,
        sections,
        base,
        interleave=False,
    )


QWEN3_SECTIONS = [
    (128, [24, 20, 20]),
    (64, [12, 10, 10]),
    (32, [6, 5, 5]),
    (48, [8, 8, 8]),
    (64, [22, 5, 5]),
]


@pytest.mark.parametrize("head_dim, sections", QWEN3_SECTIONS)
@pytest.mark.parametrize("base", [10000.0, 5000000.0])
def test_interleaved_mrope_equals_qwen3_vl(head_dim, sections, base):
    from transformers.models.qwen3_vl.modeling_qwen3_vl import (
        Qwen3VLTextRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    _check_mrope(
        transformers.Qwen3VLTextConfig,
        Qwen3VLTextRotaryEmbedding,
        apply_rotary_pos_emb,
        head_dim,
        sections,
        base,
        interleave=True,
    )


@pytest.mark.parametrize(
    "params, scaling",
    [
        ({"rope_type": "dynamic", "factor": 4.0}, posenc.DynamicNTKScaling(4.0, 1000)),
        (
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1000},
            posenc.YarnScaling(4.0, 1000),
        ),
    ],
)
def test_mrope_with_scaling_equals_qwen2_vl(params, scaling):
    """The length for dynamic NTK is the largest coordinate + 1 over all axes."""
    from transformers.models.qwen2_vl.modeling_qwen2_vl import (
        Qwen2VLRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    sections = [8, 12, 12]
    config = transformers.Qwen2VLTextConfig(
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        max_position_embeddings=1000,
        rope_parameters={**params, "mrope_section": sections, "rope_theta": 10000.0},
    )
    torch.manual_seed(0)
    for top in [500, 999, 1000, 5000]:
        position_ids = torch.randint(0, top, (3, 1, 20))
        position_ids[1, 0, 7] = top - 1  # the largest coordinate sits on the height axis
        q = torch.randn(1, 4, 20, 64)
        hf_q, _ = _rotate_hf(
            Qwen2VLRotaryEmbedding(config), apply_rotary_pos_emb, q, q, position_ids
        )
        got = posenc.apply_mrope(q, position_ids[:, :, None, :], sections, scaling=scaling)
        torch.testing.assert_close(got, hf_q)


@pytest.mark.parametrize(
    "floor_scale, attn_scale, n", [(8192, 0.1, 3 * 8192 + 5), (4, 0.5, 50), (100, 1.0, 1000)]
)
def test_llama4_attention_temperature_equals_llama4(monkeypatch, floor_scale, attn_scale, n):
    """The queries Llama4TextAttention hands to attention in a NoPE layer."""
    from transformers.models.llama4 import modeling_llama4

    config = transformers.Llama4TextConfig(
        hidden_size=16,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        num_hidden_layers=4,
        no_rope_layers=[1, 1, 1, 0],
        floor_scale=floor_scale,
        attn_scale=attn_scale,
        attn_temperature_tuning=True,
    )
    config._attn_implementation = "eager"
    attn = modeling_llama4.Llama4TextAttention(config, layer_idx=3)
    assert not attn.use_rope
    seen = {}

    def capture(module, query, key, value, attention_mask, **kwargs):
        seen["query"] = query
        return torch.zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3]), None

    monkeypatch.setattr(modeling_llama4, "eager_attention_forward", capture)
    torch.manual_seed(0)
    hidden = torch.randn(1, n, 16)
    with torch.no_grad():
        attn(hidden, position_embeddings=None, attention_mask=None)
        plain = attn.q_proj(hidden).view(1, n, 2, 8).transpose(1, 2)  # (B, H, S, D)
    temperature = posenc.llama4_attention_temperature(
        torch.arange(n), floor_scale=floor_scale, attn_scale=attn_scale
    )
    assert torch.equal(seen["query"], plain * temperature[:, None])
    assert temperature.max().item() > 1.0  # the settings reach the first step


# ---------------------------------------------------------------------------
# Version 0.3: RotaryEmbedding.from_hf_config on the configs of real models
# (tests/hf_model_configs.py), against the rotary modules of their transformers
# classes. Last run: transformers 5.24.0, torch 2.13.0 -- inverse frequencies
# bit for bit, attention factors equal as floats.
# ---------------------------------------------------------------------------

import copy  # noqa: E402
import importlib  # noqa: E402

from hf_model_configs import (  # noqa: E402
    DEEPSEEK_V3,
    GEMMA_3_4B,
    GEMMA_3_4B_V5,
    GPT_OSS_20B,
    LLAMA_3_1_8B,
    PHI_3_5_MINI,
    QWEN2_7B,
)

MODEL_CASES = [
    # (config.json, transformers config class, its module, rotary class, layer type)
    (LLAMA_3_1_8B, "LlamaConfig", "llama", "LlamaRotaryEmbedding", None),
    (QWEN2_7B, "Qwen2Config", "qwen2", "Qwen2RotaryEmbedding", None),
    (DEEPSEEK_V3, "DeepseekV3Config", "deepseek_v3", "DeepseekV3RotaryEmbedding", None),
    (PHI_3_5_MINI, "Phi3Config", "phi3", "Phi3RotaryEmbedding", None),
    (GEMMA_3_4B, "Gemma3TextConfig", "gemma3", "Gemma3RotaryEmbedding", "full_attention"),
    (GEMMA_3_4B, "Gemma3TextConfig", "gemma3", "Gemma3RotaryEmbedding", "sliding_attention"),
    (GEMMA_3_4B_V5, "Gemma3TextConfig", "gemma3", "Gemma3RotaryEmbedding", "full_attention"),
    (GEMMA_3_4B_V5, "Gemma3TextConfig", "gemma3", "Gemma3RotaryEmbedding", "sliding_attention"),
    (GPT_OSS_20B, "GptOssConfig", "gpt_oss", "GptOssRotaryEmbedding", None),
]


def _hf_config(config_dict, config_class):
    settings = {k: v for k, v in copy.deepcopy(config_dict).items() if k != "model_type"}
    return getattr(transformers, config_class)(**settings)  # transformers edits its dicts


def _hf_rotary(config, module, rotary_class, layer_type):
    """The inverse frequencies and attention factor the model's rotary module holds."""
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    rotary = getattr(modeling, rotary_class)(config)
    if layer_type is None:
        return rotary.inv_freq, rotary.attention_scaling
    return getattr(rotary, f"{layer_type}_inv_freq"), getattr(
        rotary, f"{layer_type}_attention_scaling"
    )


@pytest.mark.parametrize(
    "config_dict, config_class, module, rotary_class, layer_type",
    MODEL_CASES,
    ids=[f"{case[2]}-{case[4] or 'all'}-{i}" for i, case in enumerate(MODEL_CASES)],
)
def test_from_hf_config_equals_the_models_rotary_module(
    config_dict, config_class, module, rotary_class, layer_type
):
    config = _hf_config(config_dict, config_class)
    inv_freq, attention_factor = _hf_rotary(config, module, rotary_class, layer_type)
    for source in (config, config_dict):  # the transformers object and the plain dict
        rope = posenc.RotaryEmbedding.from_hf_config(source, layer_type=layer_type)
        assert torch.equal(rope.inv_freq, inv_freq)
        assert rope.attention_factor == attention_factor
    if module == "deepseek_v3":  # transformers' class rotates interleaved pairs
        assert posenc.RotaryEmbedding.from_hf_config(config).layout == "interleaved"


@pytest.mark.parametrize("seq_len", [1, 4096, 4097, 8192, 131072])
def test_from_hf_config_longrope_equals_transformers_at_every_length(seq_len):
    config = _hf_config(PHI_3_5_MINI, "Phi3Config")
    rope = posenc.RotaryEmbedding.from_hf_config(config)
    inv_freq, factor = rope_utils.ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)
    got = posenc.rope_frequencies(rope.dim, base=rope.base, scaling=rope.scaling, seq_len=seq_len)
    assert torch.equal(got, inv_freq) and rope.attention_factor == factor


@pytest.mark.parametrize("seq_len", [1, 2048, 4096, 5000, 12345])
def test_from_hf_config_dynamic_equals_transformers_at_every_length(seq_len):
    settings = {**QWEN2_7B, "max_position_embeddings": 4096}
    settings["rope_scaling"] = {"rope_type": "dynamic", "factor": 2.0}
    config = _hf_config(settings, "Qwen2Config")
    rope = posenc.RotaryEmbedding.from_hf_config(config)
    inv_freq, factor = rope_utils.ROPE_INIT_FUNCTIONS["dynamic"](config, "cpu", seq_len=seq_len)
    got = posenc.rope_frequencies(rope.dim, base=rope.base, scaling=rope.scaling, seq_len=seq_len)
    assert torch.equal(got, inv_freq) and rope.attention_factor == factor


@pytest.mark.parametrize(
    "params",
    [
        {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25},
        {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.5, "factor": 2},
        {"rope_type": "linear", "rope_theta": 1e4, "factor": 4.0, "partial_rotary_factor": 0.5},
        {
            "rope_type": "yarn",
            "rope_theta": 1e4,
            "factor": 4.0,
            "attention_factor": 1.25,
            "original_max_position_embeddings": 1024,
        },
    ],
)
def test_from_hf_config_other_types_equal_transformers(params):
    settings = {"hidden_size": 1024, "num_attention_heads": 8, "max_position_embeddings": 4096}
    config = _hf_config({**settings, "rope_parameters": params}, "LlamaConfig")
    init = rope_utils.ROPE_INIT_FUNCTIONS[params["rope_type"]]
    inv_freq, factor = init(config, "cpu")
    rope = posenc.RotaryEmbedding.from_hf_config(config)
    assert torch.equal(rope.inv_freq, inv_freq) and rope.attention_factor == factor
