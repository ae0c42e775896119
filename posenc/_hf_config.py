"""The RoPE settings of a Hugging Face transformers config: ``RotaryEmbedding.from_hf_config``.

Reads a config object (anything with ``to_dict()``, such as a
``PretrainedConfig``) or a plain dict (a model's ``config.json``), in either
of transformers' layouts:

- 4.x: ``rope_theta``, ``partial_rotary_factor`` and ``rope_scaling`` (a dict
  with ``rope_type``, or the older ``type``) at the top level; Gemma 3's local
  layers take ``rope_local_base_freq``.
- 5.x: ``rope_parameters``, one dict holding ``rope_theta`` and the scaling,
  or one such dict per layer type (``{"full_attention": {...},
  "sliding_attention": {...}}``).

and mirrors what transformers' rope initialisation functions
(``modeling_rope_utils.py``) read, including their defaults: ``head_dim`` or
``hidden_size // num_attention_heads`` (``qk_rope_head_dim`` for multi-head
latent attention, as DeepSeek's config classes set ``head_dim``), rotated
features ``int(head_dim * partial_rotary_factor)``,
``original_max_position_embeddings`` from the top level when it is there
(Phi-3) else from the scaling dict else ``max_position_embeddings``, YaRN's
``factor`` from ``max_position_embeddings / original_max_position_embeddings``
when missing, ``beta_fast``/``beta_slow`` of 32 and 1 when missing or 0, and
DeepSeek's ``mscale``/``mscale_all_dim`` only when both are non-zero.
Unlike transformers, which warns, a key that the rope type does not read is an
error, as is a missing required one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posenc.scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    ProportionalScaling,
    RopeScaling,
    YarnScaling,
)

__all__ = ["rope_settings"]

_COMMON = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}

#: the keys each rope type reads besides the common ones, and which of them it needs
_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "default": (set(), set()),
    "linear": ({"factor"}, {"factor"}),
    "dynamic": ({"factor"}, {"factor"}),
    "yarn": (
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "truncate",
        },
        set(),
    ),
    "longrope": (
        {
            "short_factor",
            "long_factor",
            "factor",
            "attention_factor",
            "original_max_position_embeddings",
        },
        {"short_factor", "long_factor"},
    ),
    "llama3": (
        {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
        {"factor", "low_freq_factor", "high_freq_factor"},
    ),
    "proportional": ({"factor"}, set()),
}


def _as_dict(config: object) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    to_dict = getattr(config, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    raise TypeError(
        f"config must be a transformers config (with to_dict()) or a dict, got "
        f"{type(config).__name__}"
    )


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's language model (``text_config``), else ``config`` itself."""
    text = config.get("text_config")
    has_own = any(
        key in config
        for key in ("num_attention_heads", "head_dim", "rope_theta", "rope_parameters")
    )
    if isinstance(text, Mapping) and not has_own:
        return dict(text)
    return config


def _head_dim(config: dict[str, Any]) -> int:
    for key in ("qk_rope_head_dim", "head_dim"):
        if config.get(key) is not None:
            return config[key]
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if hidden is None or heads is None:
        raise ValueError(
            "config must give the head size: head_dim (or qk_rope_head_dim), or hidden_size "
            "and num_attention_heads; found none of them"
        )
    return hidden // heads


def _rope_dict(config: dict[str, Any], layer_type: str | None) -> tuple[dict[str, Any], str]:
    """The rope settings that apply to ``layer_type``, and where they came from (for errors)."""
    if config.get("rope_scaling"):  # transformers 4.x (5.x lets it override rope_parameters)
        params, source = dict(config["rope_scaling"]), "rope_scaling"
    elif config.get("rope_parameters"):
        params, source = dict(config["rope_parameters"]), "rope_parameters"
    else:
        params, source = {}, "config"
    nested = bool(params) and all(v is None or isinstance(v, Mapping) for v in params.values())
    if nested:  # 5.x, one dict per layer type
        if layer_type not in params:
            available = ", ".join(repr(k) for k in params)
            raise ValueError(
                f"{source} holds one set of rope settings per layer type ({available}); pass "
                f"layer_type= one of them, got {layer_type!r}"
            )
        if params[layer_type] is None:
            raise ValueError(
                f"{source}[{layer_type!r}] is None: layers of type {layer_type!r} use no RoPE"
            )
        return dict(params[layer_type]), f"{source}[{layer_type!r}]"
    layer_types = config.get("layer_types")
    if layer_type is not None and layer_types and layer_type not in layer_types:
        raise ValueError(
            f"layer_type must be one of the config's layer_types {sorted(set(layer_types))}, "
            f"got {layer_type!r}"
        )
    if "rope_local_base_freq" in config and layer_type is None:
        raise ValueError(
            "config gives rope_local_base_freq (Gemma 3: the sliding-window layers rotate with "
            "their own base, unscaled); pass layer_type='sliding_attention' or "
            "layer_type='full_attention'"
        )
    if layer_type == "sliding_attention" and "rope_local_base_freq" in config:
        # Gemma 3 (transformers 4.x): local layers rotate with their own base, unscaled
        return {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]}, "config"
    return params, source


def _original_max_positions(config: dict[str, Any], params: dict[str, Any]) -> int:
    """transformers' order: the top level (Phi-3), the rope dict, ``max_position_embeddings``."""
    for value in (
        config.get("original_max_position_embeddings"),
        params.get("original_max_position_embeddings"),
        config.get("max_position_embeddings"),
    ):
        if value is not None:
            return value
    raise ValueError(
        "config must give original_max_position_embeddings or max_position_embeddings for "
        f"rope_type {params.get('rope_type', params.get('type'))!r}"
    )


def _max_positions(config: dict[str, Any], rope_type: str) -> int:
    value = config.get("max_position_embeddings")
    if value is None:
        raise ValueError(f"config must give max_position_embeddings for rope_type {rope_type!r}")
    return value


def _scaling(
    rope_type: str, params: dict[str, Any], config: dict[str, Any], fraction: float
) -> RopeScaling | None:
    if rope_type == "default":
        return None
    if rope_type == "linear":
        return LinearScaling(params["factor"])
    if rope_type == "dynamic":
        return DynamicNTKScaling(params["factor"], _max_positions(config, rope_type))
    if rope_type == "llama3":
        return Llama3Scaling(
            params["factor"],
            params["low_freq_factor"],
            params["high_freq_factor"],
            _original_max_positions(config, params),
        )
    if rope_type == "yarn":
        original = _original_max_positions(config, params)
        factor = params.get("factor")
        if factor is None:
            factor = _max_positions(config, rope_type) / original
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        both = bool(mscale) and bool(mscale_all_dim)  # transformers: `if mscale and mscale_all_dim`
        return YarnScaling(
            factor,
            original,
            beta_fast=params.get("beta_fast") or 32.0,
            beta_slow=params.get("beta_slow") or 1.0,
            mscale=mscale if both else None,
            mscale_all_dim=mscale_all_dim if both else None,
            truncate=params.get("truncate", True),
            attention_factor=params.get("attention_factor"),
        )
    if rope_type == "longrope":
        factor = params.get("factor")
        return LongRopeScaling(
            params["short_factor"],
            params["long_factor"],
            _original_max_positions(config, params),
            factor=factor,
            attention_factor=params.get("attention_factor"),
            max_positions=_max_positions(config, rope_type) if factor is None else None,
        )
    assert rope_type == "proportional"
    return ProportionalScaling(fraction, params.get("factor", 1.0))


def rope_settings(
    config: object, layer_type: str | None = None
) -> tuple[int, float, RopeScaling | None, bool]:
    """``(dim, base, scaling, interleaved)`` for :class:`posenc.RotaryEmbedding`.

    See :meth:`posenc.RotaryEmbedding.from_hf_config`.
    """
    config = _text_config(_as_dict(config))
    params, source = _rope_dict(config, layer_type)
    if "mrope_section" in params or params.get("type") == "mrope":
        raise ValueError(
            f"{source} describes multimodal RoPE (mrope_section): its frequencies take their "
            f"angles from several position axes, which posenc.apply_mrope computes; "
            f"RotaryEmbedding has one position per token"
        )
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in _KEYS:
        raise ValueError(
            f"{source} has rope_type {rope_type!r}, which posenc does not support; supported: "
            f"{', '.join(_KEYS)}"
        )
    allowed, required = _KEYS[rope_type]
    unknown = sorted(set(params) - _COMMON - allowed)
    if unknown:
        raise ValueError(
            f"{source} has keys that rope_type {rope_type!r} does not read: {unknown}; it "
            f"reads {sorted((_COMMON | allowed) - {'type'})}"
        )
    missing = sorted(required - set(params))
    if missing:
        raise ValueError(f"{source} lacks keys that rope_type {rope_type!r} needs: {missing}")

    base = params.get("rope_theta", config.get("rope_theta"))
    if base is None:
        raise ValueError(
            f"config must give rope_theta (in {source} or at its top level); transformers "
            f"falls back to a model-specific default, which a config dict does not name"
        )
    fraction = params.get("partial_rotary_factor", config.get("partial_rotary_factor"))
    fraction = 1.0 if fraction is None else fraction
    head_dim = _head_dim(config)
    # p-RoPE keeps the whole head and zeroes frequencies; the others rotate a prefix
    dim = head_dim if rope_type == "proportional" else int(head_dim * fraction)
    try:
        scaling = _scaling(rope_type, params, config, fraction)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{source} (rope_type {rope_type!r}): {error}") from None
    return dim, base, scaling, bool(config.get("rope_interleave", False))
