"""The RoPE-related settings of real models' ``config.json``, written out by hand.

Shared by tests/test_hf_config.py (plain dicts, no transformers needed) and
tests/test_transformers_parity.py (against transformers' own classes).
Nothing is downloaded: the numbers are copied from each model repository's
``config.json`` on the Hugging Face Hub (named in each comment); keys that
do not concern positions (vocabulary, layers, MLP sizes) are left out.
"""

from __future__ import annotations

# meta-llama/Llama-3.1-8B, config.json (transformers 4.x layout)
LLAMA_3_1_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}

# Qwen/Qwen2-7B-Instruct, config.json: plain RoPE
QWEN2_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
}

# deepseek-ai/DeepSeek-V3, config.json: YaRN with DeepSeek's mscale, on the 64 rotated
# features of multi-head latent attention (qk_rope_head_dim)
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}

# microsoft/Phi-3.5-mini-instruct, config.json: LongRoPE, 48 divisors per set
# (original_max_position_embeddings at the top level)
PHI_3_5_MINI = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "long_factor": [
            1.0800000429153442,
            1.1100000143051147,
            1.1399999856948853,
            1.340000033378601,
            1.5899999141693115,
            1.600000023841858,
            1.6200000047683716,
            2.620000123977661,
            3.2300000190734863,
            3.2300000190734863,
            4.789999961853027,
            7.400000095367432,
            7.700000286102295,
            9.09000015258789,
            12.199999809265137,
            17.670000076293945,
            24.46000099182129,
            28.57000160217285,
            30.420001983642578,
            30.840002059936523,
            32.590003967285156,
            32.93000411987305,
            42.320003509521484,
            44.96000289916992,
            50.340003967285156,
            50.45000457763672,
            57.55000305175781,
            57.93000411987305,
            58.21000289916992,
            60.1400032043457,
            62.61000442504883,
            62.62000274658203,
            62.71000289916992,
            63.1400032043457,
            63.1400032043457,
            63.77000427246094,
            63.93000411987305,
            63.96000289916992,
            63.970001220703125,
            64.02999877929688,
            64.06999969482422,
            64.08000183105469,
            64.12000274658203,
            64.41000366210938,
            64.4800033569336,
            64.51000213623047,
            64.52999877929688,
            64.83999633789062,
        ],
        "short_factor": [
            1.0,
            1.0199999809265137,
            1.0299999713897705,
            1.0299999713897705,
            1.0499999523162842,
            1.0499999523162842,
            1.0499999523162842,
            1.0499999523162842,
            1.0499999523162842,
            1.0699999332427979,
            1.0999999046325684,
            1.1099998950958252,
            1.1599998474121094,
            1.1599998474121094,
            1.1699998378753662,
            1.2899998426437378,
            1.339999794960022,
            1.679999828338623,
            1.7899998426437378,
            1.8199998140335083,
            1.8499997854232788,
            1.8799997568130493,
            1.9099997282028198,
            1.9399996995925903,
            1.9899996519088745,
            2.0199997425079346,
            2.0199997425079346,
            2.0199997425079346,
            2.0199997425079346,
            2.0199997425079346,
            2.0199997425079346,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0299997329711914,
            2.0799996852874756,
            2.0899996757507324,
            2.189999580383301,
            2.2199995517730713,
            2.5899994373321533,
            2.729999542236328,
            2.749999523162842,
            2.8399994373321533,
        ],
        "type": "longrope",
    },
}

# google/gemma-3-4b-it, config.json's text_config: linear scaling on the global layers,
# plain RoPE with the local base on the sliding-window layers. The file gives
# rope_scaling; head_dim, num_attention_heads, rope_theta and rope_local_base_freq are
# Gemma3TextConfig's defaults, which the file leaves out.
GEMMA_3_4B = {
    "model_type": "gemma3_text",
    "head_dim": 256,
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024,
}

# The same in transformers 5.x's layout: one rope dict per layer type
GEMMA_3_4B_V5 = {
    "model_type": "gemma3_text",
    "head_dim": 256,
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
}

# openai/gpt-oss-20b, config.json: YaRN without rounding the correction range
GPT_OSS_20B = {
    "model_type": "gpt_oss",
    "head_dim": 64,
    "hidden_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 150000,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
}
