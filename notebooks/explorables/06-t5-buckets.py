"""Explorable of chapter 06: T5's bucket of every relative position.

A Vega-Lite spec (hooks/explorables.py compiles it and puts it on the
chapter's pages). The buckets are posenc.t5_relative_position_bucket's own,
computed at build time for every setting the selectors offer (its float32
logarithm decides the edges, which a float64 formula in the browser could
move by one position), and stored as runs: the positions ``r0 .. r1`` that
share bucket ``b``. A setting posenc refuses (too few buckets for the
distance) is stored with its number of exact buckets and shown as a message.
tests/site/test_explorables.py moves the selectors and compares every
plotted position's bucket with posenc.
"""

from __future__ import annotations

import functools
import math

import torch

from posenc import t5_relative_position_bucket

NUM_BUCKETS = [8, 16, 32, 64, 128]
MAX_DISTANCES = [16, 32, 64, 128, 256, 512, 1024]
DIRECTIONS = ["bidirectional", "causal"]
TEXT = {
    "en": {
        "caption": "Choose the number of buckets $B$, the largest distance $D$ "
        "and whether keys after the query get their own buckets. Each "
        "horizontal segment is one bucket $b(r)$: the relative positions "
        "$r = j - i$ it holds, from posenc. The dotted lines mark $|r| = D$.",
        "description": "Interactive step plot of T5's relative position "
        "buckets for a chosen number of buckets, largest distance and "
        "direction.",
        "num_buckets": "num_buckets ",
        "max_distance": "max_distance ",
        "direction": "direction ",
        "bidirectional": "bidirectional",
        "causal": "causal",
        "r": "relative position r = j − i",
        "bucket": "bucket b(r)",
        "refused": "posenc refuses this setting:\nmax_distance must exceed "
        "the {e} exact buckets",
    },
    "ja": {
        "caption": "バケット数 $B$、最大距離 $D$、"
        "クエリより後ろのキーにも別のバケットを割り当てるかどうかを選びます。"
        "水平な線分 1 本が 1 つのバケット $b(r)$ で、"
        "そのバケットに入る相対位置 $r = j - i$ を posenc で求めたものです。"
        "点線は $|r| = D$ の位置です。",
        "description": "選んだバケット数、最大距離、設定（双方向／因果的）について、"
        "T5 の相対位置バケットを描く対話的な階段グラフ。",
        "num_buckets": "バケット数 num_buckets ",
        "max_distance": "最大距離 max_distance ",
        "direction": "設定 ",
        "bidirectional": "双方向",
        "causal": "因果的",
        "r": "相対位置 r = j − i",
        "bucket": "バケット b(r)",
        "refused": "posenc はこの設定を受け付けません。\n"
        "max_distance は厳密バケットの数 {e} より大きくなければなりません",
    },
}


def half_width(max_distance: int) -> int:
    """The plot shows r = -X .. X, a quarter beyond the largest distance."""
    return math.ceil(1.25 * max_distance)


def runs(num_buckets: int, max_distance: int, direction: str) -> dict:
    """The buckets of r = -X .. X as runs, or the number of exact buckets
    when posenc refuses the setting."""
    bidirectional = direction == "bidirectional"
    x = half_width(max_distance)
    r = torch.arange(-x, x + 1)
    row = {"nb": num_buckets, "md": max_distance, "dir": direction}
    try:
        b = t5_relative_position_bucket(
            r,
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
    except ValueError:
        exact = num_buckets // 4 if bidirectional else num_buckets // 2
        return {**row, "exact": exact, "r0": [], "r1": [], "b": []}
    r, b = r.tolist(), b.tolist()
    starts = [0] + [k for k in range(1, len(r)) if b[k] != b[k - 1]]
    ends = [k - 1 for k in starts[1:]] + [len(r) - 1]
    return {
        **row,
        "exact": None,
        "r0": [r[k] for k in starts],
        "r1": [r[k] for k in ends],
        "b": [b[k] for k in starts],
    }


@functools.cache
def grid() -> list[dict]:
    """Every setting the controls offer (the same in both languages)."""
    return [
        runs(s, d, direction)
        for s in NUM_BUCKETS
        for d in MAX_DISTANCES
        for direction in DIRECTIONS
    ]


def spec(lang: str) -> dict:
    """The Vega-Lite spec of the explorable, labelled in ``lang``."""
    t = TEXT[lang]
    chosen = (
        "datum.nb == buckets && datum.md == distance && datum.dir == direction"
    )
    x_domain = {"expr": "ceil(1.25 * distance)"}
    x = {
        "field": "x0",
        "type": "quantitative",
        "title": t["r"],
        "scale": {
            "domainMin": {"expr": "-ceil(1.25 * distance)"},
            "domainMax": x_domain,
            "nice": False,
        },
    }
    y = {
        "field": "b",
        "type": "quantitative",
        "title": t["bucket"],
        "scale": {
            "domainMin": -0.5,
            "domainMax": {"expr": "buckets - 0.5"},
            "nice": False,
            "zero": False,
        },
        "axis": {"tickMinStep": 1, "format": "d"},
    }
    message = t["refused"].replace("\n", "\\n")
    refused = "'" + message.replace("{e}", "' + datum.exact + '") + "'"
    return {
        "description": t["description"],
        "width": "container",
        "height": 260,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "params": [
            {
                "name": "buckets",
                "value": 32,
                "bind": {
                    "input": "select",
                    "options": NUM_BUCKETS,
                    "name": t["num_buckets"],
                },
            },
            {
                "name": "distance",
                "value": 128,
                "bind": {
                    "input": "select",
                    "options": MAX_DISTANCES,
                    "name": t["max_distance"],
                },
            },
            {
                "name": "direction",
                "value": "bidirectional",
                "bind": {
                    "input": "radio",
                    "options": DIRECTIONS,
                    "labels": [t[d] for d in DIRECTIONS],
                    "name": t["direction"],
                },
            },
        ],
        "data": {"name": "buckets_grid", "values": grid()},
        "transform": [{"filter": chosen}],
        "layer": [
            {
                "name": "runs",
                "transform": [
                    {"flatten": ["r0", "r1", "b"]},
                    {"filter": "isValid(datum.b)"},
                    {"calculate": "datum.r0 - 0.5", "as": "x0"},
                    {"calculate": "datum.r1 + 0.5", "as": "x1"},
                ],
                "mark": {
                    "type": "rule",
                    "strokeWidth": 2.5,
                    "color": "#3f88c5",
                    "aria": False,
                },
                "encoding": {
                    "x": x,
                    "x2": {"field": "x1"},
                    "y": y,
                    "tooltip": [
                        {"field": "b", "title": "b"},
                        {"field": "r0", "title": "r ≥"},
                        {"field": "r1", "title": "r ≤"},
                    ],
                },
            },
            {
                "name": "limits",
                "transform": [
                    {"calculate": "[-distance, distance]", "as": "at"},
                    {"flatten": ["at"]},
                ],
                "mark": {
                    "type": "rule",
                    "strokeDash": [2, 3],
                    "color": {"expr": "textColor"},
                    "opacity": 0.6,
                    "aria": False,
                },
                "encoding": {"x": {"field": "at", "type": "quantitative"}},
            },
            {
                "name": "refused",
                "transform": [
                    {"filter": "isValid(datum.exact)"},
                    {"calculate": refused, "as": "message"},
                ],
                "mark": {
                    "type": "text",
                    "fontSize": 13,
                    "lineBreak": "\n",
                    "x": {"expr": "width / 2"},
                    "y": {"expr": "height / 2"},
                },
                "encoding": {"text": {"field": "message"}},
            },
        ],
    }
