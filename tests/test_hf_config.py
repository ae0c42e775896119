"""``RotaryEmbedding.from_hf_config`` on plain config dicts: no transformers needed.

The settings each real model's config asks for, written out independently
(tests/hf_model_configs.py holds the configs); tests/test_transformers_parity.py
compares the same configs with transformers itself where it is installed.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from hf_model_configs import (
    DEEPSEEK_V3,
    GEMMA_3_4B,
    GEMMA_3_4B_V5,
    GPT_OSS_20B,
    LLAMA_3_1_8B,
    PHI_3_5_MINI,
    QWEN2_7B,
)

from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    ProportionalScaling,
    RotaryEmbedding,
    YarnScaling,
    rope_frequencies,
)

from_hf = RotaryEmbedding.from_hf_config


def _check(rope, dim, base, scaling, attention_factor=1.0, layout="half"):
    assert (rope.dim, rope.base, rope.layout) == (dim, base, layout)
    assert rope.scaling == scaling
    assert rope.attention_factor == pytest.approx(attention_factor, rel=1e-15)
    seq_len = None if scaling is None else getattr(scaling, "original_max_positions", None)
    expected = rope_frequencies(dim, base=base, scaling=scaling, seq_len=seq_len)
    assert torch.equal(rope.inv_freq, expected)


def test_llama_3_1():
    _check(from_hf(LLAMA_3_1_8B), 128, 500000.0, Llama3Scaling(8.0, 1.0, 4.0, 8192))


def test_qwen2_plain_rope():
    _check(from_hf(QWEN2_7B), 128, 1000000.0, None)  # 3584 / 28 features per head


def test_deepseek_v3_yarn_with_mscale():
    scaling = YarnScaling(40.0, 4096, 32.0, 1.0, mscale=1.0, mscale_all_dim=1.0)
    _check(from_hf(DEEPSEEK_V3), 64, 10000.0, scaling)  # mscale / mscale_all_dim = 1
    # transformers' DeepSeek-V3 class pairs features 2i, 2i+1 (rope_interleave=True)
    interleaved = from_hf({**DEEPSEEK_V3, "rope_interleave": True})
    _check(interleaved, 64, 10000.0, scaling, layout="interleaved")
    assert from_hf(DEEPSEEK_V3, layout="interleaved").layout == "interleaved"
    # one of the two mscales zero: transformers falls back to 0.1 ln(s) + 1, as here
    lone = copy.deepcopy(DEEPSEEK_V3)
    lone["rope_scaling"]["mscale_all_dim"] = 0
    _check(from_hf(lone), 64, 10000.0, YarnScaling(40.0, 4096), 0.1 * math.log(40) + 1)


def test_phi_3_5_longrope():
    params = PHI_3_5_MINI["rope_scaling"]
    scaling = LongRopeScaling(
        params["short_factor"], params["long_factor"], 4096, max_positions=131072
    )
    factor = math.sqrt(1 + math.log(32) / math.log(4096))  # 131072 / 4096 = 32
    rope = from_hf(PHI_3_5_MINI)
    _check(rope, 96, 10000.0, scaling, factor)
    assert scaling.factor == 32.0
    # the long divisors take over beyond 4096 positions
    long = rope_frequencies(96, scaling=scaling, seq_len=4097)
    torch.testing.assert_close(long * torch.tensor(params["long_factor"]), rope_frequencies(96))


def test_gemma_3_layer_types():
    for config in (GEMMA_3_4B, GEMMA_3_4B_V5):
        _check(from_hf(config, layer_type="full_attention"), 256, 1e6, LinearScaling(8.0))
        _check(from_hf(config, layer_type="sliding_attention"), 256, 1e4, None)
    with pytest.raises(ValueError, match=r"rope_local_base_freq .* pass layer_type="):
        from_hf(GEMMA_3_4B)
    with pytest.raises(
        ValueError,
        match=r"^rope_parameters holds one set of rope settings per layer type "
        r"\('full_attention', 'sliding_attention'\); pass layer_type= one of them, got None",
    ):
        from_hf(GEMMA_3_4B_V5)
    with pytest.raises(ValueError, match=r"got 'chunked_attention'$"):
        from_hf(GEMMA_3_4B_V5, layer_type="chunked_attention")


def test_gpt_oss_yarn_without_truncation():
    scaling = YarnScaling(32.0, 4096, 32.0, 1.0, truncate=False)
    _check(from_hf(GPT_OSS_20B), 64, 150000.0, scaling, 0.1 * math.log(32) + 1)
    assert not torch.equal(
        from_hf(GPT_OSS_20B).inv_freq,
        rope_frequencies(64, base=150000.0, scaling=YarnScaling(32.0, 4096)),
    )


def test_other_rope_types_and_defaults():
    base = {"hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 4096}
    dynamic = from_hf({**base, "rope_theta": 1e4, "rope_scaling": {"type": "dynamic", "factor": 2}})
    _check(dynamic, 64, 1e4, DynamicNTKScaling(2.0, 4096))
    linear = {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5, "partial_rotary_factor": 0.5}
    _check(from_hf({**base, "rope_parameters": linear}), 32, 5e5, LinearScaling(4.0))
    p_rope = {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}
    _check(from_hf({**base, "rope_parameters": p_rope}), 64, 1e6, ProportionalScaling(0.25))
    # YaRN without factor: max_position_embeddings / original_max_position_embeddings
    yarn = {"rope_type": "yarn", "original_max_position_embeddings": 1024}
    _check(
        from_hf({**base, "rope_theta": 1e4, "rope_scaling": yarn}),
        64,
        1e4,
        YarnScaling(4.0, 1024),
        0.1 * math.log(4) + 1,
    )
    # an explicit attention factor, and 0 for the betas reads as their defaults
    yarn = {**yarn, "factor": 2.0, "attention_factor": 1.5, "beta_fast": 0, "beta_slow": None}
    scaling = YarnScaling(2.0, 1024, attention_factor=1.5)
    _check(from_hf({**base, "rope_theta": 1e4, "rope_scaling": yarn}), 64, 1e4, scaling, 1.5)
    # partial rotation at the top level (transformers 4.x) and max_positions passed on
    rope = from_hf({**base, "rope_theta": 1e4, "partial_rotary_factor": 0.75}, max_positions=16)
    assert rope.dim == 48 and rope.max_positions == 16 and rope.rot_cached.shape == (16, 2, 48)


def test_config_objects_and_multimodal_configs():
    class Config(SimpleNamespace):  # stands in for a PretrainedConfig
        def to_dict(self):
            return dict(vars(self))

    _check(from_hf(Config(**QWEN2_7B)), 128, 1e6, None)
    multimodal = {"model_type": "gemma3", "text_config": GEMMA_3_4B, "vision_config": {}}
    _check(from_hf(multimodal, layer_type="full_attention"), 256, 1e6, LinearScaling(8.0))


@pytest.mark.parametrize(
    ("config", "error", "pattern", "layer_type"),
    [
        (
            ["rope_theta"],
            TypeError,
            r"^config must be a transformers config \(with to_dict\(\)\) or a dict, got list",
            None,
        ),
        ({"rope_theta": 1e4}, ValueError, r"^config must give the head size: head_dim", None),
        (
            {**QWEN2_7B, "rope_theta": None},
            ValueError,
            r"^config must give rope_theta \(in config or at its top level\)",
            None,
        ),
        (
            {
                **LLAMA_3_1_8B,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0},
            },
            ValueError,
            r"^rope_scaling lacks keys that rope_type 'llama3' needs: \['high_freq_factor'\]$",
            None,
        ),
        (
            {
                **QWEN2_7B,
                "rope_scaling": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0},
            },
            ValueError,
            r"^rope_scaling has keys that rope_type 'linear' does not read: \['low_freq_factor'\]; "
            r"it reads \['factor', 'partial_rotary_factor', 'rope_theta', 'rope_type'\]$",
            None,
        ),
        (
            {**QWEN2_7B, "rope_scaling": {"type": "su", "short_factor": [1.0]}},
            ValueError,
            r"^rope_scaling has rope_type 'su', which posenc does not support; supported: "
            r"default, linear, dynamic, yarn, longrope, llama3, proportional$",
            None,
        ),
        (
            {**QWEN2_7B, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}},
            ValueError,
            r"^rope_scaling describes multimodal RoPE \(mrope_section\).*posenc.apply_mrope",
            None,
        ),
        (
            {**QWEN2_7B, "rope_scaling": {"rope_type": "linear", "factor": -2.0}},
            ValueError,
            r"^rope_scaling \(rope_type 'linear'\): factor must be a finite number greater than 0",
            None,
        ),
        (
            {**GPT_OSS_20B, "rope_scaling": {**GPT_OSS_20B["rope_scaling"], "truncate": "no"}},
            TypeError,
            r"^rope_scaling \(rope_type 'yarn'\): truncate must be a bool, got str 'no'",
            None,
        ),
        (
            {
                "head_dim": 64,
                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
                "rope_theta": 1e4,
            },
            ValueError,
            r"max_position_embeddings for rope_type 'dynamic'",
            None,
        ),
        (
            {**QWEN2_7B, "layer_types": ["full_attention"]},
            ValueError,
            r"^layer_type must be one of the config's layer_types \['full_attention'\], got 'sliding'",
            "sliding",
        ),
        (
            {**GEMMA_3_4B_V5, "rope_parameters": {"full_attention": None, "sliding_attention": {}}},
            ValueError,
            r"^rope_parameters\['full_attention'\] is None: layers of type 'full_attention' use no RoPE",
            "full_attention",
        ),
    ],
)
def test_bad_configs_name_the_key(config, error, pattern, layer_type):
    with pytest.raises(error, match=pattern):
        from_hf(config, layer_type=layer_type)


def test_docstring_example():
    config = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    assert repr(RotaryEmbedding.from_hf_config(config)) == (
        "RotaryEmbedding(dim=128, base=500000.0, layout='half', scaling=Llama3Scaling("
        "factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192))"
    )
