"""Explorable of chapter 01: the sinusoidal encoding and its dot product.

A Vega-Lite spec (hooks/explorables.py compiles it and puts it on the
chapter's pages). Both panels compute posenc.sinusoidal's formula in the
browser from the two sliders, in float64 as posenc forms its angles:
``w_i = base ** (-i / n)`` with ``n = dim // 2``, column ``2i`` the sine and
``2i + 1`` the cosine (``layout="interleaved"``, ``endpoint=False``), and
``PE(p) . PE(p + k) = sum_i cos(k w_i)`` (the function sinusoidDot of
docs/javascripts/explorables.js). tests/site/test_explorables.py
moves the sliders and compares every plotted value with posenc.
"""

from __future__ import annotations

from posenc_lab.vega import title_expression

POSITIONS = 128  # heatmap: p = 0 .. 127, as the chapter's figure
RENDERER = (
    "canvas"  # 16 000 cells: canvas draws them several times faster than SVG
)
MAX_OFFSET = 1000  # dot product: k = 0 .. 1000
TEXT = {
    "en": {
        "caption": "Move the sliders: the base $b$ (as its logarithm) and the "
        "dimension $d$. Top: $PE_{(p,j)}$ for positions $p = 0, \\dots, 127$. "
        "Bottom: $PE(p)\\cdot PE(p+k)$, the same for every $p$.",
        "description": "Interactive heatmap of the sinusoidal encoding and its "
        "dot product against the offset, for a chosen base and dimension.",
        "logbase": "log₁₀ base ",
        "dim": "dimension d ",
        "position": "position p",
        "column": "dimension j",
        "offset": "offset k",
        "dot": "PE(p)·PE(p+k)",
        "title": "base = {b}, d = {d}",
    },
    "ja": {
        "caption": "スライダーで底 $b$（その対数）と次元数 $d$ を変えられます。"
        "上は位置 $p = 0, \\dots, 127$ の $PE_{(p,j)}$、"
        "下は $PE(p)\\cdot PE(p+k)$ で、どの $p$ でも同じ値です。",
        "description": "正弦波位置エンコーディングのヒートマップと、"
        "ずれ k に対する内積を、選んだ底と次元数で描く対話的な図。",
        "logbase": "底の log₁₀ ",
        "dim": "次元数 d ",
        "position": "位置 p",
        "column": "次元 j",
        "offset": "ずれ k",
        "dot": "PE(p)·PE(p+k)",
        "title": "底 = {b}、d = {d}",
    },
}


def spec(lang: str) -> dict:
    """The Vega-Lite spec of the explorable, labelled in ``lang``."""
    t = TEXT[lang]
    base = "pow(10, logbase)"
    n = "floor(dim / 2)"
    title = title_expression(
        t["title"], {"{b}": f"format({base}, ',.6~r')", "{d}": "dim"}
    )
    heatmap = {
        "name": "pe",
        "title": {"text": {"expr": title}},
        "width": "container",
        "height": 220,
        "data": {"sequence": {"start": 0, "stop": POSITIONS, "as": "p"}},
        "transform": [
            {"calculate": "sequence(0, dim)", "as": "j"},
            {"flatten": ["j"]},
            {"calculate": f"pow({base}, -floor(datum.j / 2) / {n})", "as": "w"},
            {
                "calculate": "datum.j % 2 == 0 ? sin(datum.p * datum.w)"
                " : cos(datum.p * datum.w)",
                "as": "value",
            },
            {"calculate": "datum.value", "as": "edge"},  # the cell's stroke
            {"calculate": "datum.p + 1", "as": "p_end"},
            {"calculate": "datum.j + 1", "as": "j_end"},
        ],
        # each cell also stroked in its colour: no hairline seams between cells
        "mark": {"type": "rect", "aria": False, "strokeWidth": 0.6},
        "encoding": {
            "x": {
                "field": "p",
                "type": "quantitative",
                "title": t["position"],
                "scale": {"domain": [0, POSITIONS], "nice": False},
            },
            "x2": {"field": "p_end"},
            "y": {
                "field": "j",
                "type": "quantitative",
                "title": t["column"],
                "scale": {"reverse": True, "nice": False, "zero": True},
            },
            "y2": {"field": "j_end"},
            "color": {
                "field": "value",
                "type": "quantitative",
                "title": "PE",
                "scale": {
                    "scheme": "redblue",
                    "reverse": True,
                    "domain": [-1, 1],
                },
                "legend": {"gradientLength": 160},
            },
            "stroke": {
                "field": "edge",
                "type": "quantitative",
                "scale": {
                    "scheme": "redblue",
                    "reverse": True,
                    "domain": [-1, 1],
                },
                "legend": None,
            },
        },
    }
    dot = {
        "name": "dot",
        "width": "container",
        "height": 180,
        "data": {"sequence": {"start": 0, "stop": MAX_OFFSET + 1, "as": "k"}},
        "transform": [
            {"calculate": f"sinusoidDot(datum.k, {base}, {n})", "as": "dot"},
        ],
        "mark": {"type": "line", "strokeWidth": 1.2, "aria": False},
        "encoding": {
            "x": {"field": "k", "type": "quantitative", "title": t["offset"]},
            "y": {"field": "dot", "type": "quantitative", "title": t["dot"]},
        },
    }
    return {
        "description": t["description"],
        "autosize": {"type": "fit-x", "contains": "padding"},
        "params": [
            {
                "name": "logbase",
                "value": 4,
                "bind": {
                    "input": "range",
                    "min": 2,
                    "max": 6,
                    "step": 0.1,
                    "name": t["logbase"],
                },
            },
            {
                "name": "dim",
                "value": 64,
                "bind": {
                    "input": "range",
                    "min": 2,
                    "max": 128,
                    "step": 2,
                    "name": t["dim"],
                },
            },
        ],
        "vconcat": [heatmap, dot],
    }
