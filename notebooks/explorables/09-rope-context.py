"""Explorable of chapter 09: the wavelength of every RoPE pair under each way
of extending the context, side by side.

A Vega-Lite spec (hooks/explorables.py compiles it and puts it on the
chapter's pages). The frequencies are posenc.rope_frequencies's own,
computed at build time (float32, as posenc and Hugging Face form them; the
floors and ceilings of YaRN's correction range and Llama 3's wavelength
thresholds are decided in that precision) for every position of the
controls: ``dim = 128``, two bases, the factor ``s``, the original
length ``L`` and, for dynamic NTK, the sequence length ``T`` (as ``T/L``),
all as powers of two. The browser only picks the rows of the chosen
setting and plots ``2 pi / theta_i``. Dynamic NTK follows the chapter's
convention, Hugging Face's ``factor`` 1: at length ``T`` it is NTK-aware
scaling with the factor ``T/L`` (with Hugging Face's ``factor`` ``s`` it
would be ``s T/L - (s - 1)``, ``s**2 - s + 1`` at ``T = s L``), so it
does not depend on ``s`` and meets the NTK-aware line at ``T = s L``.
tests/site/test_explorables.py moves the controls and compares every
plotted frequency with posenc.
"""

from __future__ import annotations

import functools
import struct

from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    YarnScaling,
    rope_frequencies,
)
from posenc_lab.vega import grey_param, title_expression

DIM = 128
BASES = [10_000, 500_000]
LOG2_FACTORS = range(1, 7)  # s = 2 .. 64
LOG2_LENGTHS = range(10, 16)  # L = 1024 .. 32768
LOG2_RATIOS = range(0, 7)  # T / L = 1 .. 64, dynamic NTK only
METHODS = ["none", "pi", "ntk", "dynamic", "yarn", "llama3"]
NAMES = {
    "en": {
        "none": "no scaling",
        "pi": "PI",
        "ntk": "NTK-aware",
        "dynamic": "dynamic NTK at T",
        "yarn": "YaRN",
        "llama3": "Llama 3",
    },
    "ja": {
        "none": "スケーリングなし",
        "pi": "PI",
        "ntk": "NTK-aware",
        "dynamic": "動的 NTK（長さ T）",
        "yarn": "YaRN",
        "llama3": "Llama 3",
    },
}
TEXT = {
    "en": {
        "caption": "Choose the factor $s$ and the training length $L$ (both as "
        "powers of two) and the base, for $d = 128$. Each line is the "
        "wavelength $2\\pi/\\theta'_i$ of every pair $i$ under one method, from "
        "posenc.rope_frequencies; the dotted lines mark $L$ and $sL$. Dynamic "
        "NTK is drawn at the sequence length $T$ of its own slider, with "
        "Hugging Face's factor 1: NTK-aware scaling with the factor $T/L$, "
        "the line of NTK-aware scaling when $T = sL$. Select a method in the "
        "legend to show it alone.",
        "description": "Interactive plot of the RoPE wavelength of every pair "
        "for no scaling, position interpolation, NTK-aware scaling, dynamic "
        "NTK, YaRN and Llama 3, for a chosen factor, training length and base, "
        "with dynamic NTK at a chosen sequence length.",
        "factor": "log₂ factor s ",
        "length": "log₂ training length L ",
        "ratio": "log₂ T/L (dynamic NTK) ",
        "base": "base ",
        "pair": "pair i",
        "wavelength": "wavelength 2π/θ′ᵢ (positions)",
        "method": "method",
        "title": "s = {s}, L = {L}, T = {T}, base = {b}, d = 128",
    },
    "ja": {
        "caption": "係数 $s$ と学習時の長さ $L$（どちらも 2 のべき乗）、底を選びます"
        "（$d = 128$）。各線は、1 つの手法でのペア $i$ ごとの波長 "
        "$2\\pi/\\theta'_i$ を posenc.rope_frequencies で求めたものです。"
        "点線は $L$ と $sL$ の位置です。動的 NTK は専用のスライダーで選んだ系列長 $T$ "
        "での波長で、Hugging Face の factor は 1 です。つまり係数 $T/L$ の NTK-aware "
        "スケーリングで、$T = sL$ のとき NTK-aware スケーリングの線と重なります。"
        "凡例で手法を選ぶと、その手法だけを表示します。",
        "description": "スケーリングなし、位置補間、NTK-aware スケーリング、動的 NTK、"
        "YaRN、Llama 3 について、選んだ係数、学習時の長さ、底での RoPE の各ペアの波長を描く"
        "対話的な図です。動的 NTK は選んだ系列長での波長です。",
        "factor": "係数 s の log₂ ",
        "length": "学習時の長さ L の log₂ ",
        "ratio": "T/L の log₂（動的 NTK） ",
        "base": "底 ",
        "pair": "ペア i",
        "wavelength": "波長 2π/θ′ᵢ（位置の数）",
        "method": "手法",
        "title": "s = {s}、L = {L}、T = {T}、底 = {b}、d = 128",
    },
}


def scaling(method: str, factor: int, length: int, ratio: int = 1):
    """The posenc scaling of ``method``, and the sequence length it needs.

    Dynamic NTK takes Hugging Face's factor 1 (the chapter's convention) and
    the sequence length ``ratio * length``; ``factor`` does not enter it."""
    return {
        "none": (None, None),
        "pi": (LinearScaling(factor), None),
        "ntk": (NTKScaling(factor), None),
        "dynamic": (DynamicNTKScaling(1.0, length), ratio * length),
        "yarn": (YarnScaling(factor, length), None),
        "llama3": (Llama3Scaling(factor, original_max_positions=length), None),
    }[method]


def as_float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def shortest_float32(x: float) -> float:
    """The shortest decimal that reads back as the float32 number ``x``."""
    for digits in range(1, 10):
        short = float(f"{x:.{digits}g}")
        if as_float32(short) == x:
            return short
    return x


def frequencies(
    method: str, base: int, factor: int, length: int, ratio: int = 1
) -> list[float]:
    """posenc's float32 frequencies, written so that they read back as the
    same float32 numbers (the shortest decimal that round-trips)."""
    s, seq_len = scaling(method, factor, length, ratio)
    theta = rope_frequencies(DIM, base=float(base), scaling=s, seq_len=seq_len)
    return [shortest_float32(v) for v in theta.tolist()]


@functools.cache
def grid() -> list[dict]:
    """One row per method and setting; None where a method does not depend
    on the factor, the length or the ratio T/L."""
    rows = []
    for method in METHODS:
        uses_factor = method not in ("none", "dynamic")
        uses_length = method in ("dynamic", "yarn", "llama3")
        uses_ratio = method == "dynamic"
        for base in BASES:
            for log2_s in LOG2_FACTORS if uses_factor else [None]:
                for log2_l in LOG2_LENGTHS if uses_length else [None]:
                    for log2_t in LOG2_RATIOS if uses_ratio else [None]:
                        factor = 2**log2_s if log2_s else 1
                        length = 2**log2_l if log2_l else 4096
                        ratio = 2**log2_t if log2_t is not None else 1
                        theta = frequencies(method, base, factor, length, ratio)
                        rows.append(
                            {
                                "method": method,
                                "base": base,
                                "s": log2_s,
                                "L": log2_l,
                                "t": log2_t,
                                "theta": theta,
                            }
                        )
    return rows


def spec(lang: str) -> dict:
    """The Vega-Lite spec of the explorable, labelled in ``lang``."""
    t, names = TEXT[lang], NAMES[lang]
    chosen = (
        "datum.base == base && (datum.s == null || datum.s == log2s)"
        " && (datum.L == null || datum.L == log2l)"
        " && (datum.t == null || datum.t == log2t)"
    )
    label = " : ".join(
        f"datum.method == '{m}' ? '{names[m]}'" for m in METHODS[:-1]
    )
    label += f" : '{names[METHODS[-1]]}'"
    title = title_expression(
        t["title"],
        {
            "{s}": "pow(2, log2s)",
            "{L}": "pow(2, log2l)",
            "{T}": "pow(2, log2l + log2t)",
            "{b}": "format(base, ',')",
        },
    )
    method_scale = {
        "domain": [names[m] for m in METHODS],
        "range": [{"expr": "noScalingColor"}, *PALETTE],
    }
    return {
        "description": t["description"],
        "title": {"text": {"expr": title}},
        "width": "container",
        "height": 300,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "params": [
            NO_SCALING_COLOR,
            {
                "name": "log2s",
                "value": 2,
                "bind": {
                    "input": "range",
                    "min": min(LOG2_FACTORS),
                    "max": max(LOG2_FACTORS),
                    "step": 1,
                    "name": t["factor"],
                },
            },
            {
                "name": "log2l",
                "value": 12,
                "bind": {
                    "input": "range",
                    "min": min(LOG2_LENGTHS),
                    "max": max(LOG2_LENGTHS),
                    "step": 1,
                    "name": t["length"],
                },
            },
            {
                "name": "log2t",
                "value": 1,
                "bind": {
                    "input": "range",
                    "min": min(LOG2_RATIOS),
                    "max": max(LOG2_RATIOS),
                    "step": 1,
                    "name": t["ratio"],
                },
            },
            {
                "name": "base",
                "value": BASES[0],
                "bind": {
                    "input": "radio",
                    "options": BASES,
                    "labels": [f"{b:,}" for b in BASES],
                    "name": t["base"],
                },
            },
        ],
        "layer": [
            {
                "name": "wavelengths",
                "data": {"name": "frequencies", "values": grid()},
                "params": [
                    {
                        "name": "pick",
                        "select": {"type": "point", "fields": ["label"]},
                        "bind": "legend",
                    }
                ],
                "transform": [
                    {"filter": chosen},
                    {"calculate": label, "as": "label"},
                    {"flatten": ["theta"]},
                    {
                        "window": [{"op": "row_number", "as": "row"}],
                        "groupby": ["method"],
                    },
                    {"calculate": "datum.row - 1", "as": "i"},
                    {"calculate": "2 * PI / datum.theta", "as": "wavelength"},
                ],
                "mark": {"type": "line", "strokeWidth": 1.6, "aria": False},
                "encoding": {
                    "x": {
                        "field": "i",
                        "type": "quantitative",
                        "title": t["pair"],
                        "scale": {"domain": [0, DIM // 2 - 1], "nice": False},
                    },
                    "y": {
                        "field": "wavelength",
                        "type": "quantitative",
                        "title": t["wavelength"],
                        "scale": {"type": "log"},
                        "axis": {
                            "format": "~s",
                            "values": [10**k for k in range(10)],
                        },
                    },
                    "color": {
                        "field": "label",
                        "type": "nominal",
                        "title": t["method"],
                        "scale": method_scale,
                        "legend": {
                            "orient": "bottom",
                            "columns": 3,
                            "symbolStrokeWidth": 2,
                        },
                    },
                    "strokeDash": {
                        "field": "label",
                        "type": "nominal",
                        "scale": {
                            "domain": method_scale["domain"],
                            "range": [
                                [1, 0],
                                [6, 3],
                                [2, 2],
                                [6, 2, 2, 2],
                                [1, 0],
                                [4, 4],
                            ],
                        },
                    },
                    "opacity": {
                        "condition": {"param": "pick", "value": 1},
                        "value": 0.08,
                    },
                    "tooltip": [
                        {"field": "label", "title": t["method"]},
                        {"field": "i", "title": "i"},
                        {
                            "field": "wavelength",
                            "title": "2π/θ′",
                            "format": ",.6~g",
                        },
                    ],
                },
            },
            {
                "name": "lengths",
                "data": {"values": [{"k": 0}]},
                "transform": [
                    {
                        "calculate": "[pow(2, log2l), pow(2, log2l + log2s)]",
                        "as": "at",
                    },
                    {"flatten": ["at"]},
                    {
                        "calculate": "(datum.at == pow(2, log2l) ? 'L = ' : 'sL = ')"
                        " + format(datum.at, ',')",
                        "as": "label",
                    },
                ],
                "encoding": {"y": {"field": "at", "type": "quantitative"}},
                "layer": [
                    {
                        "mark": {
                            "type": "rule",
                            "strokeDash": [2, 3],
                            "color": {"expr": "textColor"},
                            "opacity": 0.7,
                            "aria": False,
                        },
                    },
                    {
                        "mark": {
                            "type": "text",
                            "align": "left",
                            "baseline": "bottom",
                            "dx": 4,
                            "dy": -2,
                            "fontSize": 11,
                            "x": 0,
                            "aria": False,
                        },
                        "encoding": {"text": {"field": "label"}},
                    },
                ],
            },
        ],
    }


# "No scaling" is the grey reference line (posenc_lab.vega.GREY), the
# methods take the site's colours.
NO_SCALING_COLOR = grey_param("noScalingColor")
PALETTE = ["#3f88c5", "#d95f02", "#1b9e77", "#e7298a", "#7570b3"]
