"""Explorable of chapter 08: RoFormer's relative upper bound against the
base and the dimension.

A Vega-Lite spec (hooks/explorables.py compiles it and puts it on the
chapter's pages). The browser computes the quantity of chapter 08's
long-term decay figure (the function ropeBound of
docs/javascripts/explorables.js), for each distance ``r``:
``(1 / (d/2)) sum_{j=1}^{d/2} |S_j|`` with ``S_j = sum_{l<j} exp(i r theta_l)``
and ``theta_l = base ** (-2l / d)`` (posenc.rope_frequencies, which the
chapter uses, forms them in float32; the browser in float64). Next to it, a
fainter curve for base 10 000 at the same dimension, the chapter's setting.
tests/site/test_explorables.py moves the sliders and compares every
plotted value with the chapter's computation from posenc.rope_frequencies,
within the bound that the float32 rounding of the frequencies allows.
"""

from __future__ import annotations

from posenc_lab.vega import grey_param, title_expression

MAX_DISTANCE = 1000  # r = 0 .. 1000
REFERENCE = 4  # log10 of the base of the reference curve
TEXT = {
    "en": {
        "caption": "Move the sliders: the base $b$ (as its logarithm) and the "
        "dimension $d$. The curve is the relative upper bound "
        "$\\frac{1}{d/2}\\sum_{j=1}^{d/2} |S_j|$ of the section above against the "
        "distance $r = m - n$; the fainter one is the same for base 10 000.",
        "description": "Interactive plot of RoFormer's relative upper bound "
        "against the distance, for a chosen base and dimension, with the "
        "curve for base 10 000 for comparison.",
        "logbase": "log₁₀ base ",
        "dim": "dimension d ",
        "distance": "distance r = m − n",
        "bound": "relative upper bound",
        "chosen": "chosen base",
        "reference": "base 10 000",
        "title": "base = {b}, d = {d}",
    },
    "ja": {
        "caption": "スライダーで底 $b$（その対数）と次元数 $d$ を変えられます。"
        "曲線は上の節の相対的な上界 $\\frac{1}{d/2}\\sum_{j=1}^{d/2} |S_j|$ を"
        "距離 $r = m - n$ に対して描いたもので、薄い曲線は底 10000 での同じ量です。",
        "description": "RoFormer の相対的な上界を、選んだ底と次元数について"
        "距離に対して描く対話的な図。比較のため底 10000 の曲線も描きます。",
        "logbase": "底の log₁₀ ",
        "dim": "次元数 d ",
        "distance": "距離 r = m − n",
        "bound": "相対的な上界",
        "chosen": "選んだ底",
        "reference": "底 10000",
        "title": "底 = {b}、d = {d}",
    },
}


def spec(lang: str) -> dict:
    """The Vega-Lite spec of the explorable, labelled in ``lang``."""
    t = TEXT[lang]
    layer = []
    title = title_expression(
        t["title"],
        {
            "{b}": "format(pow(10, logbase), ',.6~r')",
            "{d}": "dim",
        },
    )
    for curve, logbase, style in (
        ("reference", str(REFERENCE), {"opacity": 0.45, "strokeWidth": 1}),
        ("chosen", "logbase", {"strokeWidth": 1.5}),
    ):
        layer.append(
            {
                "name": curve,
                "data": {
                    "sequence": {
                        "start": 0,
                        "stop": MAX_DISTANCE + 1,
                        "as": "r",
                    }
                },
                "transform": [
                    {"calculate": f"'{t[curve]}'", "as": "curve"},
                    {
                        "calculate": f"ropeBound(datum.r, pow(10, {logbase}), dim)",
                        "as": "bound",
                    },
                ],
                "mark": {"type": "line", "aria": False, **style},
                "encoding": {
                    "x": {
                        "field": "r",
                        "type": "quantitative",
                        "title": t["distance"],
                    },
                    "y": {
                        "field": "bound",
                        "type": "quantitative",
                        "title": t["bound"],
                    },
                    "color": {
                        "field": "curve",
                        "type": "nominal",
                        "title": None,
                        "scale": {
                            "domain": [t["chosen"], t["reference"]],
                            "range": ["#3f88c5", {"expr": "referenceColor"}],
                        },
                        "legend": {"orient": "top-right"},
                    },
                },
            }
        )
    return {
        "description": t["description"],
        "title": {"text": {"expr": title}},
        "width": "container",
        "height": 260,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "params": [
            # the base-10000 line: grey on either scheme
            grey_param("referenceColor"),
            {
                "name": "logbase",
                "value": 4,
                "bind": {
                    "input": "range",
                    "min": 2,
                    "max": 7,
                    "step": 0.1,
                    "name": t["logbase"],
                },
            },
            {
                "name": "dim",
                "value": 128,
                "bind": {
                    "input": "range",
                    "min": 8,
                    "max": 256,
                    "step": 8,
                    "name": t["dim"],
                },
            },
        ],
        "layer": layer,
    }
