"""Explorable of chapter 07: ALiBi's slopes for any head count, one head's bias.

A Vega-Lite spec (hooks/explorables.py compiles it and puts it on the
chapter's pages). The browser computes posenc.alibi_slopes's rule from the
sliders: for ``n`` heads and ``m`` the largest power of two ``<= n``, head
``h <= m`` gets ``2 ** (-8 h / m)`` and head ``m + j`` gets
``2 ** (-4 (2 j - 1) / m)`` (every other slope of ``2m`` heads), and the
bias of posenc.alibi_bias for ``T = 16`` positions: ``-m_h (i - j)`` for the
keys ``j <= i`` (causal) or ``-m_h |i - j|`` (bidirectional).
tests/site/test_explorables.py moves the controls and compares every
plotted value with posenc.
"""

from __future__ import annotations

from posenc_lab.vega import title_expression

MAX_HEADS = 128
POSITIONS = 16  # the bias of one head: T = 16 queries and keys
TEXT = {
    "en": {
        "caption": "Choose the number of heads $n$ (1 to 128) and one head $h$ "
        "(a value above $n$ shows head $n$). Left: $1/m_h$ for every head on a "
        "logarithmic axis, the chosen head ringed. Right: that head's bias for "
        "$T = 16$ positions, query $i$ down and key $j$ across; with the causal "
        "setting the keys after the query are masked out and not drawn.",
        "description": "Interactive figure of ALiBi: the slope of every head for "
        "a chosen head count, and the bias matrix of one chosen head.",
        "heads": "heads n ",
        "head": "head h ",
        "mode": "bias ",
        "causal": "causal",
        "bidirectional": "bidirectional",
        "head_axis": "head h",
        "inverse": "1/m_h",
        "query": "query i",
        "key": "key j",
        "bias": "bias",
        "title": "head {h} of {n}: m = {m}",
    },
    "ja": {
        "caption": "ヘッド数 $n$（1〜128）とヘッド $h$ を選びます"
        "（$n$ より大きい値はヘッド $n$ を表します）。"
        "左は各ヘッドの $1/m_h$ を対数軸で描いたもので、選んだヘッドを丸で囲みます。"
        "右はそのヘッドの $T = 16$ 個の位置でのバイアスで、縦がクエリ $i$、横がキー $j$ です。"
        "因果的な設定では、クエリより後ろのキーはマスクされるので描きません。",
        "description": "ALiBi の対話的な図。選んだヘッド数での各ヘッドの傾きと、"
        "選んだ 1 つのヘッドのバイアス行列を描きます。",
        "heads": "ヘッド数 n ",
        "head": "ヘッド h ",
        "mode": "バイアス ",
        "causal": "因果的",
        "bidirectional": "双方向",
        "head_axis": "ヘッド h",
        "inverse": "1/m_h",
        "query": "クエリ i",
        "key": "キー j",
        "bias": "バイアス",
        "title": "ヘッド {h}（{n} 個中）：m = {m}",
    },
}


def slope(h: str) -> str:
    """posenc.alibi_slopes's rule for head ``h`` (1-based) of ``heads``, as
    a Vega expression; ``pow2`` is the largest power of two <= heads."""
    return (
        f"({h} <= pow2 ? pow(2, -8 * {h} / pow2)"
        f" : pow(2, -4 * (2 * ({h} - pow2) - 1) / pow2))"
    )


def spec(lang: str) -> dict:
    """The Vega-Lite spec of the explorable, labelled in ``lang``."""
    t = TEXT[lang]
    slopes = {
        "name": "slopes",
        "width": 260,
        "height": 200,
        "data": {"sequence": {"start": 1, "stop": MAX_HEADS + 1, "as": "h"}},
        "transform": [
            {"filter": "datum.h <= heads"},
            {"calculate": slope("datum.h"), "as": "m"},
            {"calculate": "1 / datum.m", "as": "inverse"},
            {"calculate": "datum.h == chosen", "as": "chosen"},
        ],
        "layer": [
            {
                "name": "slope",
                "mark": {
                    "type": "point",
                    "filled": True,
                    "size": 30,
                    "aria": False,
                },
                "encoding": {
                    "x": {
                        "field": "h",
                        "type": "quantitative",
                        "title": t["head_axis"],
                        "scale": {
                            "domainMin": 0.5,
                            "domainMax": {"expr": "heads + 0.5"},
                            "nice": False,
                            "zero": False,
                        },
                        "axis": {"tickMinStep": 1, "format": "d"},
                    },
                    "y": {
                        "field": "inverse",
                        "type": "quantitative",
                        "title": t["inverse"],
                        "scale": {"type": "log", "base": 2},
                        "axis": {"format": "~g"},
                    },
                    "tooltip": [
                        {"field": "h", "title": "h"},
                        {"field": "m", "title": "m_h", "format": ".6~g"},
                    ],
                },
            },
            {
                "name": "ring",
                "transform": [{"filter": "datum.chosen"}],
                "mark": {
                    "type": "point",
                    "size": 160,
                    "strokeWidth": 2,
                    "color": "#d95f02",
                    "aria": False,
                },
                "encoding": {
                    "x": {"field": "h", "type": "quantitative"},
                    "y": {"field": "inverse", "type": "quantitative"},
                },
            },
        ],
    }
    title = title_expression(
        t["title"],
        {
            "{h}": "chosen",
            "{n}": "heads",
            "{m}": f"format({slope('chosen')}, '.4~g')",
        },
    )
    bias = {
        "name": "bias",
        "title": {"text": {"expr": title}},
        "width": 200,
        "height": 200,
        "data": {"sequence": {"start": 0, "stop": POSITIONS, "as": "i"}},
        "transform": [
            {"calculate": f"sequence(0, {POSITIONS})", "as": "j"},
            {"flatten": ["j"]},
            {"filter": "mode == 'bidirectional' || datum.j <= datum.i"},
            {"calculate": slope("chosen"), "as": "m"},
            {
                "calculate": "mode == 'causal' ? -datum.m * (datum.i - datum.j)"
                " : -datum.m * abs(datum.i - datum.j)",
                "as": "bias",
            },
        ],
        "mark": {"type": "rect", "aria": False},
        "encoding": {
            "x": {
                "field": "j",
                "type": "ordinal",
                "title": t["key"],
                "axis": {"values": [0, 5, 10, 15], "labelAngle": 0},
            },
            "y": {
                "field": "i",
                "type": "ordinal",
                "title": t["query"],
                "axis": {"values": [0, 5, 10, 15]},
            },
            "color": {
                "field": "bias",
                "type": "quantitative",
                "title": t["bias"],
                "scale": {"scheme": "viridis", "domainMax": 0},
                "legend": {"format": ".3~g", "gradientLength": 160},
            },
            "tooltip": [
                {"field": "i", "title": "i"},
                {"field": "j", "title": "j"},
                {"field": "bias", "title": t["bias"], "format": ".6~g"},
            ],
        },
    }
    return {
        "description": t["description"],
        "params": [
            {
                "name": "heads",
                "value": 12,
                "bind": {
                    "input": "range",
                    "min": 1,
                    "max": MAX_HEADS,
                    "step": 1,
                    "name": t["heads"],
                },
            },
            {
                "name": "head",
                "value": 9,
                "bind": {
                    "input": "range",
                    "min": 1,
                    "max": MAX_HEADS,
                    "step": 1,
                    "name": t["head"],
                },
            },
            {
                "name": "mode",
                "value": "causal",
                "bind": {
                    "input": "radio",
                    "options": ["causal", "bidirectional"],
                    "labels": [t["causal"], t["bidirectional"]],
                    "name": t["mode"],
                },
            },
            {"name": "chosen", "expr": "min(head, heads)"},
            {"name": "pow2", "expr": "pow(2, floor(log(heads) / LN2 + 1e-9))"},
        ],
        "hconcat": [slopes, bias],
        "spacing": 40,
    }
