"""posenc: positional encodings for transformers, exact against the papers.

Every encoding is a plain function of explicit ``positions`` plus a thin
``nn.Module`` wrapper. ARCHITECTURE.md in the repository describes the layout;
the site's API reference lists every public name.
"""

from posenc.absolute import (
    LearnedPositionalEmbedding,
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal,
)
from posenc.alibi import alibi_bias, alibi_score_mod, alibi_slopes
from posenc.attention import attention
from posenc.cope import CoPE
from posenc.learned_bias import FireBias, KerpleBias
from posenc.masks import attention_mask, attention_mask_mod
from posenc.mrope import apply_mrope, grid_positions
from posenc.randomized import random_positions
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativeBias,
    t5_relative_position_bucket,
)
from posenc.rope import RotaryEmbedding, apply_rope, rope_frequencies
from posenc.scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    YarnScaling,
    llama4_attention_temperature,
)
from posenc.transformer_xl import relative_shift, transformer_xl_positions, transformer_xl_scores
from posenc.xpos import apply_xpos, xpos_scale, xpos_zeta

__version__ = "0.3.0"

__all__ = [
    "CoPE",
    "DynamicNTKScaling",
    "FireBias",
    "KerpleBias",
    "LearnedPositionalEmbedding",
    "LinearScaling",
    "Llama3Scaling",
    "LongRopeScaling",
    "NTKScaling",
    "ProportionalScaling",
    "RelativePositionEmbedding",
    "RotaryEmbedding",
    "SinusoidalEmbedding",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "YarnScaling",
    "__version__",
    "alibi_bias",
    "alibi_score_mod",
    "alibi_slopes",
    "apply_mrope",
    "apply_rope",
    "apply_xpos",
    "attention",
    "attention_mask",
    "attention_mask_mod",
    "grid_positions",
    "llama4_attention_temperature",
    "random_positions",
    "relative_shift",
    "rope_frequencies",
    "sinusoidal",
    "t5_relative_position_bucket",
    "transformer_xl_positions",
    "transformer_xl_scores",
    "xpos_scale",
    "xpos_zeta",
]
