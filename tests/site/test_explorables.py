"""The interactive figures (hooks/explorables.py) in headless Chromium: each
control moves, and every value plotted in the figure is posenc's.

One test per explorable, one page load each: it moves every control through
several positions (through the page's own <input> and <select> elements),
reads what the figure draws from the Vega view's scene graph (each drawn
item's datum) and compares it with posenc for the same parameters, at the
tolerance stated in the test. It also checks that the controls carry labels
in the page's language and work with the keyboard, runs axe-core on the
figure in the light and the dark scheme, follows a scheme switch, and saves
a screenshot of the figure in tests/screenshots/ for a person to look at.

Time: the tests of this file (after the site build that all site tests
share) took 66 s on the shared two-core machine they were written on, at a
load average of about 5, and 195 s at about 10; each figure test is one
chapter page load (most of its time: parsing the chapter's typeset math)
and a second or two of checks. Idle cores should need well under half.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import torch
from test_browser import AXE, AXE_TAGS, SHOTS, Recorder, record

from hooks import explorables as hook
from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    YarnScaling,
    alibi_bias,
    alibi_slopes,
    rope_frequencies,
    sinusoidal,
    t5_relative_position_bucket,
)
from posenc_lab.vega import GREY

ROOT = Path(__file__).resolve().parents[2]
MODULES = {name: hook.load(path) for name, path in hook.sources(ROOT).items()}
F64 = torch.float64

# Every drawn item of the marks named ``name`` (Vega-Lite calls a unit's mark
# "<unit name>_marks"), in every group of the scene graph: the listed fields
# of its datum, one list per field (plain arrays travel fast).
_ITEMS = """([name, fields]) => {
  const view = document.querySelector('figure.explorable').vegaView;
  const out = fields.map(() => []);
  const walk = mark => {
    if (mark.name === name) {
      for (const item of mark.items) fields.forEach((f, k) => out[k].push(item.datum[f]));
    }
    for (const item of mark.items || []) for (const child of item.items || []) walk(child);
  };
  walk(view.scenegraph().root);
  return out;
}"""

# Moves a control as a reader does: the element's value, then its event.
_SET = """async ([name, value]) => {
  const figure = document.querySelector('figure.explorable');
  const inputs = [...figure.querySelectorAll(`[name="${name}"]`)];
  if (!inputs.length) throw new Error('no control ' + name);
  const input = inputs.find(e => e.type !== 'radio' || e.value === String(value));
  if (input.type === 'radio') input.click();
  else {
    input.value = String(value);
    input.dispatchEvent(new Event(input.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true}));
  }
  await figure.vegaView.runAsync();
  return figure.vegaView.signal(name);
}"""


class Figure:
    """The page of one explorable, its figure drawn."""

    def __init__(self, browser, site, url: str, scheme: str):
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=scheme
        )
        origin = urlparse(site.base_url).netloc
        self.context.route(
            re.compile(r"^https?://(?!" + re.escape(origin) + r")"), lambda route: route.abort()
        )
        self.page = self.context.new_page()
        self.recorder = Recorder(self.page, site.base_url)
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(urlparse(r.url).path))
        self.page.goto(site.base_url + url, wait_until="domcontentloaded")
        # nothing of the figure loads before the reader comes near it
        self.before_scroll = [p for p in self.requests if "vega" in p or "explorables/" in p]
        # Cells far from the screen are laid out lazily (content-visibility:
        # auto), so the page moves under a jump: scroll until the figure starts.
        figure = self.page.locator("figure.explorable")
        self.page.wait_for_function(
            """() => { const f = document.querySelector('figure.explorable');
                       f.scrollIntoView({block: 'center'});
                       return f.dataset.state === 'ready'; }""",
            polling=100,
        )
        # The figure is a block that the browser skips when far from the
        # screen, and it decides that a frame after the layout moves (the
        # drawn figure is taller than its placeholder): until then the
        # figure's text reads as empty. Wait for the frame.
        self.page.wait_for_function(
            """() => document.querySelector('figure.explorable .explorable-view')
                       .checkVisibility({contentVisibilityAuto: true})""",
        )
        self.figure = figure

    def set(self, name: str, value):
        return self.page.evaluate(_SET, [name, value])

    def items(self, mark: str, fields: list[str]) -> list[list]:
        """The drawn items' fields, one row per item."""
        return [list(row) for row in zip(*self.page.evaluate(_ITEMS, [mark, fields]), strict=True)]

    def columns(self, mark: str, fields: list[str]) -> list[torch.Tensor]:
        """The drawn items' fields, one float64 tensor per field."""
        return [torch.tensor(c, dtype=F64) for c in self.page.evaluate(_ITEMS, [mark, fields])]

    def check_controls(self, module, lang: str) -> None:
        """Labels in the page's language; the first slider moves with the keyboard."""
        names = self.page.locator("figure.explorable .vega-bind-name").all_inner_texts()
        spec = module.spec(lang)
        expected = [p["bind"]["name"].strip() for p in spec["params"] if "bind" in p]
        assert [n.strip() for n in names] == expected
        if lang == "ja":
            assert all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", n) for n in names), names
        controls = self.page.locator(
            "figure.explorable .vega-bind input, figure.explorable .vega-bind select"
        )
        for control in controls.all():
            label = control.evaluate("e => (e.labels.length ? e.labels[0].textContent : '')")
            assert label.strip(), "a control without a label"
        # the first control, from the keyboard: Tab reaches it, an arrow moves it
        first = controls.first
        name = first.get_attribute("name")
        signal = "n => document.querySelector('figure.explorable').vegaView.signal(n)"
        before = self.page.evaluate(signal, name)
        first.focus()
        self.page.keyboard.press("Shift+Tab")
        self.page.keyboard.press("Tab")
        assert first.evaluate("e => e === document.activeElement")
        self.page.keyboard.press(
            "ArrowRight" if first.get_attribute("type") == "range" else "ArrowDown"
        )
        self.page.wait_for_function(
            "([n, v]) => document.querySelector('figure.explorable').vegaView.signal(n) != v",
            arg=[name, before],
        )

    def check_accessibility_and_schemes(self, shot: str) -> dict:
        """axe-core on the figure in this scheme and the other; the text
        colour follows the switch; a screenshot of the figure in each.

        The chapter around the figure goes first: axe builds its tree of the
        whole document whatever part it checks, and a chapter's typeset
        math makes that take a minute on a busy machine. The figure, live,
        stays in the page's article, under the page's own styles."""
        self.page.evaluate(
            """() => { const f = document.querySelector('figure.explorable');
                       document.querySelector('article').replaceChildren(f); }"""
        )
        self.page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        found = {}
        for _ in range(2):
            self.page.wait_for_timeout(100)
            scheme = self.page.evaluate("document.body.dataset.mdColorScheme")
            found[scheme] = self.page.evaluate(
                """async tags => (await axe.run(document.querySelector('figure.explorable'),
                     {runOnly: {type: 'tag', values: tags}})).violations
                     .map(v => [v.id, v.impact, v.nodes.slice(0, 3).map(n => n.target.join(' '))])""",
                AXE_TAGS,
            )
            colour = self.page.evaluate(
                """() => { const f = document.querySelector('figure.explorable');
                           return [f.vegaView.signal('textColor'), getComputedStyle(f).color]; }"""
            )
            assert colour[0] == colour[1], f"figure text colour {colour[0]}, page {colour[1]}"
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.figure.screenshot(path=str(SHOTS / f"explorable-{shot}-{scheme}.png"))
            # the reader's toggle in the header: the label that is not hidden
            self.page.locator("form[data-palette] label:not([hidden])").click()
            self.page.wait_for_function(
                "s => document.body.dataset.mdColorScheme !== s", arg=scheme
            )
        return found

    def close(self) -> None:
        """Close the page; nothing went off the site, nothing failed."""
        if self.context is None:
            return
        errors, external = self.recorder.errors, self.recorder.external
        self.context.close()
        self.context = None
        assert external == [], external
        assert errors == [], errors
        assert self.before_scroll == [], f"loaded before the figure was near: {self.before_scroll}"


@pytest.fixture
def open_figure(browser, served_site):
    opened = []

    def _open(url: str, scheme: str = "light") -> Figure:
        opened.append(Figure(browser, served_site, url, scheme))
        return opened[-1]

    yield _open
    for figure in opened:  # a test that failed before closing its page
        if figure.context is not None:
            figure.context.close()


def _serious(violations: dict) -> dict:
    return {
        s: [v for v in found if v[1] in ("serious", "critical")] for s, found in violations.items()
    }


# --------------------------------------------------------------------------
# One test per explorable


def test_sinusoidal_explorable_plots_posencs_encoding(open_figure):
    """Heatmap: every cell equals posenc.sinusoidal (float64 output; the
    browser forms the same float64 angles) within 1e-9. Dot product:
    PE(37) . PE(37 + k) from posenc, k = 0..1000, within 1e-9."""
    fig = open_figure("sinusoidal/", "dark")
    fig.check_controls(MODULES["01-sinusoidal"], "en")
    p0 = 37  # any position: the dot product depends on k alone
    for logbase, dim in [(5.7, 128), (2, 6), (3.3, 2), (6, 100)]:
        assert fig.set("logbase", logbase) == logbase
        assert fig.set("dim", dim) == dim
        base = 10.0**logbase
        p, j, value = fig.columns("pe_marks", ["p", "j", "value"])
        assert len(value) == 128 * dim
        got = torch.full((128, dim), math.nan, dtype=F64)
        got[p.long(), j.long()] = value
        pe = sinusoidal(torch.arange(128), dim, base=base, dtype=F64)
        torch.testing.assert_close(got, pe, rtol=0, atol=1e-9)  # every cell drawn, once
        k, dot = fig.columns("dot_marks", ["k", "dot"])
        assert torch.equal(k, torch.arange(1001, dtype=F64))
        codes = sinusoidal(torch.arange(p0, p0 + 1001), dim, base=base, dtype=F64)
        torch.testing.assert_close(dot, codes @ codes[0], rtol=0, atol=1e-9)
    assert _serious(fig.check_accessibility_and_schemes("sinusoidal")) == {
        "slate": [],
        "default": [],
    }
    fig.close()


def test_t5_explorable_plots_posencs_buckets(open_figure):
    """Every relative position in view, expanded from the drawn runs, has
    posenc.t5_relative_position_bucket's bucket, exactly; a setting posenc
    refuses shows its rule and no buckets."""
    fig = open_figure("ja/t5-buckets/")
    fig.check_controls(MODULES["06-t5-buckets"], "ja")
    settings = [
        (32, 128, "bidirectional"),
        (8, 1024, "causal"),
        (128, 256, "bidirectional"),
        (16, 16, "causal"),
        (128, 16, "causal"),  # refused: 64 exact buckets, D = 16
    ]
    for buckets, distance, direction in settings:
        assert fig.set("buckets", buckets) == buckets
        assert fig.set("distance", distance) == distance
        assert fig.set("direction", direction) == direction
        runs = fig.items("runs_marks", ["r0", "r1", "b"])
        message = fig.items("refused_marks", ["message", "exact"])
        x = math.ceil(1.25 * distance)
        r = torch.arange(-x, x + 1)
        kwargs = dict(
            bidirectional=direction == "bidirectional",
            num_buckets=buckets,
            max_distance=distance,
        )
        try:
            expected = t5_relative_position_bucket(r, **kwargs)
        except ValueError as error:
            assert runs == [] and len(message) == 1, (runs, message)
            exact = message[0][1]
            assert f"({exact} for num_buckets={buckets})" in str(error) or f"= {exact} " in str(
                error
            )
            continue
        assert message == []
        got = torch.full_like(r, -1)
        for r0, r1, b in runs:
            assert (got[r0 + x : r1 + x + 1] == -1).all(), "runs overlap"
            got[r0 + x : r1 + x + 1] = b
        assert torch.equal(got, expected), (buckets, distance, direction)
    assert _serious(fig.check_accessibility_and_schemes("t5-buckets")) == {
        "default": [],
        "slate": [],
    }
    fig.close()


def test_alibi_explorable_plots_posencs_slopes_and_bias(open_figure):
    """Slopes: posenc.alibi_slopes (float32) within a relative 1e-6 (the
    browser forms them in float64). Bias: posenc.alibi_bias for T = 16,
    the chosen head, within 1e-6; causal draws exactly the keys j <= i."""
    fig = open_figure("alibi/")
    fig.check_controls(MODULES["07-alibi"], "en")
    for heads, head, mode in [
        (12, 9, "causal"),
        (1, 1, "causal"),
        (128, 128, "bidirectional"),
        (5, 100, "bidirectional"),  # the head above n shows head n
        (96, 70, "causal"),
    ]:
        assert fig.set("heads", heads) == heads
        assert fig.set("head", head) == head
        assert fig.set("mode", mode) == mode
        slopes = sorted(fig.items("slope_marks", ["h", "m", "inverse"]))
        assert [s[0] for s in slopes] == list(range(1, heads + 1))
        expected = alibi_slopes(heads).double()
        got = torch.tensor([s[1] for s in slopes], dtype=F64)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)
        torch.testing.assert_close(
            torch.tensor([s[2] for s in slopes], dtype=F64), 1 / expected, rtol=1e-6, atol=0
        )
        chosen = min(head, heads)
        assert [r[0] for r in fig.items("ring_marks", ["h"])] == [chosen]
        cells = fig.items("bias_marks", ["i", "j", "bias"])
        causal = mode == "causal"
        bias = alibi_bias(heads, 16, 16, causal=causal)[chosen - 1].double()
        drawn = {(i, j) for i, j, _ in cells}
        assert drawn == {(i, j) for i in range(16) for j in range(16) if j <= i or not causal}
        got = torch.tensor([c[2] for c in cells], dtype=F64)
        want = torch.stack([bias[i, j] for i, j, _ in cells])
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    assert _serious(fig.check_accessibility_and_schemes("alibi")) == {"default": [], "slate": []}
    fig.close()


def _relative_bound(dim: int, base: float, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Chapter 08's relative upper bound from posenc.rope_frequencies, and
    how far the browser's float64 frequencies may move it: each phase r
    theta_l moves by at most r |dtheta_l|, and each |S_j| by at most the sum
    of those, so the mean by at most r sum_l |dtheta_l|."""
    theta = rope_frequencies(dim, base=base).double()
    phases = torch.exp(1j * r[:, None].double() * theta)
    bound = torch.cumsum(phases, dim=-1).abs().mean(dim=-1)
    theta64 = base ** (-2 * torch.arange(dim // 2, dtype=F64) / dim)
    slack = r.double() * (theta - theta64).abs().sum() + 1e-9
    return bound, slack


def test_rope_explorable_plots_the_chapters_bound(open_figure):
    """The curve and the base-10000 reference: chapter 08's bound from
    posenc.rope_frequencies at every distance 0..1000, within the slack
    that float32 frequencies allow (at most 3e-3 here, where the bound is
    above 1)."""
    fig = open_figure("ja/rope/", "dark")
    fig.check_controls(MODULES["08-rope"], "ja")
    worst = 0.0
    for logbase, dim in [(5.7, 128), (2, 8), (7, 256), (4.5, 64)]:
        assert fig.set("logbase", logbase) == logbase
        assert fig.set("dim", dim) == dim
        for mark, base in (("chosen_marks", 10.0**logbase), ("reference_marks", 10.0**4)):
            points = sorted(fig.items(mark, ["r", "bound"]))
            r = torch.tensor([p[0] for p in points])
            assert torch.equal(r, torch.arange(1001))
            expected, slack = _relative_bound(dim, base, r)
            got = torch.tensor([p[1] for p in points], dtype=F64)
            assert ((got - expected).abs() <= slack).all(), (mark, logbase, dim)
            worst = max(worst, float(slack.max()))
    assert worst < 3e-3
    # the reference curve is the grey of the page's scheme (dark here)
    stroke, page_colour = fig.page.evaluate(_STROKE, ["reference_marks", None])
    assert stroke == GREY["dark"] and _contrast(stroke, page_colour) >= 3, (stroke, page_colour)
    assert _serious(fig.check_accessibility_and_schemes("rope")) == {"slate": [], "default": []}
    fig.close()


METHODS = ("none", "pi", "ntk", "dynamic", "yarn", "llama3")


def _scaling(method: str, factor: int, length: int, ratio: int):
    # dynamic NTK: Hugging Face's factor 1 (the chapter's convention), at T = ratio * L
    return {
        "none": (None, None),
        "pi": (LinearScaling(factor), None),
        "ntk": (NTKScaling(factor), None),
        "dynamic": (DynamicNTKScaling(1.0, length), ratio * length),
        "yarn": (YarnScaling(factor, length), None),
        "llama3": (Llama3Scaling(factor, original_max_positions=length), None),
    }[method]


# The stroke of a mark's items (those of one method, if given), once the view
# has run, and the page's background.
_STROKE = """async ([name, method]) => {
  const view = document.querySelector('figure.explorable').vegaView;
  await view.runAsync();
  let stroke = null;
  const walk = mark => {
    if (mark.name === name) {
      for (const item of mark.items) if (!method || item.datum.method === method) stroke = item.stroke;
    }
    for (const item of mark.items || []) for (const child of item.items || []) walk(child);
  };
  walk(view.scenegraph().root);
  return [stroke, getComputedStyle(document.body).backgroundColor];
}"""


def _contrast(a: str, b: str) -> float:
    """WCAG contrast of two colours, "#rrggbb" or "rgb(r, g, b)"."""

    def luminance(colour: str) -> float:
        if colour.startswith("#"):
            rgb = [int(colour[k : k + 2], 16) for k in (1, 3, 5)]
        else:
            rgb = [float(v) for v in re.findall(r"[\d.]+", colour)[:3]]
        c = [v / 255 for v in rgb]
        c = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_rope_context_explorable_plots_posencs_frequencies(open_figure):
    """Every plotted frequency reads back as posenc.rope_frequencies's
    float32 number exactly, and its wavelength is 2 pi / theta within a
    relative 1e-7 (the shortest decimal of a float32); the dotted lines
    sit at L and sL. Dynamic NTK (Hugging Face's factor 1) at T = sL is
    NTK-aware scaling with s: its slowest pair is divided by s, not by
    s**2 - s + 1 as Hugging Face's factor s would give."""
    fig = open_figure("rope-context/")
    fig.check_controls(MODULES["09-rope-context"], "en")
    settings = [
        (2, 12, 10000, 1),
        (3, 13, 500000, 3),
        (6, 10, 10000, 0),
        (1, 15, 500000, 6),
        (2, 12, 10000, 2),
    ]
    for log2s, log2l, base, log2t in settings:
        assert fig.set("log2s", log2s) == log2s
        assert fig.set("log2l", log2l) == log2l
        assert fig.set("base", base) == base
        assert fig.set("log2t", log2t) == log2t
        factor, length, ratio = 2**log2s, 2**log2l, 2**log2t
        lines = fig.items("wavelengths_marks", ["method", "i", "theta", "wavelength"])
        assert len(lines) == 6 * 64
        for method in METHODS:
            points = sorted(p[1:] for p in lines if p[0] == method)
            assert [p[0] for p in points] == list(range(64)), method
            scaling, seq_len = _scaling(method, factor, length, ratio)
            expected = rope_frequencies(128, base=float(base), scaling=scaling, seq_len=seq_len)
            got = torch.tensor([p[1] for p in points], dtype=F64)
            assert torch.equal(got.float(), expected), (method, log2s, log2l, base)
            torch.testing.assert_close(
                torch.tensor([p[2] for p in points], dtype=F64),
                2 * math.pi / expected.double(),
                rtol=1e-7,
                atol=0,
            )
        # the convention the chapter states: dynamic NTK divides the slowest
        # pair by T/L, and at T = sL draws the NTK-aware line
        drawn = {m: [p[2] for p in sorted(p[1:] for p in lines if p[0] == m)] for m in METHODS}
        assert math.isclose(drawn["dynamic"][-1] / drawn["none"][-1], ratio, rel_tol=1e-6)
        if ratio == factor:
            torch.testing.assert_close(
                torch.tensor(drawn["dynamic"]), torch.tensor(drawn["ntk"]), rtol=1e-6, atol=0
            )
        rules = sorted(r[0] for r in fig.items("lengths_layer_0_marks", ["at"]))
        assert rules == [length, factor * length]
        labels = sorted(r[0] for r in fig.items("lengths_layer_1_marks", ["label"]))
        assert labels == [f"L = {length:,}", f"sL = {factor * length:,}"]
    # "no scaling" is grey, lighter on the dark scheme (reader review: faint
    # there), and follows a switch; at least 3:1 on the page either way
    for scheme, expected in (("default", GREY["light"]), ("slate", GREY["dark"])):
        fig.page.wait_for_function("s => document.body.dataset.mdColorScheme === s", arg=scheme)
        stroke, page_colour = fig.page.evaluate(_STROKE, ["wavelengths_marks", "none"])
        assert stroke == expected, (scheme, stroke)
        assert _contrast(stroke, page_colour) >= 3, (scheme, stroke, page_colour)
        fig.page.locator("form[data-palette] label:not([hidden])").click()
    assert _serious(fig.check_accessibility_and_schemes("rope-context")) == {
        "default": [],
        "slate": [],
    }
    fig.close()


# --------------------------------------------------------------------------
# Only where a figure is, and what it weighs

_CHART_SCRIPT = re.compile(r"vega[^\"']*\.js|explorables\.(?:js|css)")


def test_only_pages_with_an_explorable_load_its_scripts(built_site):
    """The chart scripts are referenced by the pages that show a figure, by
    no other page; and those pages are the ones whose chapter has a marker."""
    with_figure = set()
    for page in sorted(built_site.path.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        has = 'class="explorable"' in html
        refs = _CHART_SCRIPT.findall(html)
        url = page.parent.relative_to(built_site.path).as_posix()
        if has:
            with_figure.add(url)
            assert "explorables.js" in " ".join(refs) and "explorables.css" in " ".join(refs), url
        else:
            assert refs == [], f"{url}: {refs}"
    expected = set()
    for name in MODULES:
        slug = name.split("-", 1)[1]
        source = (ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8")
        if f"explorable: {name}" in source:
            expected |= {slug, f"ja/{slug}"}
    assert with_figure == expected


def test_a_page_without_an_explorable_requests_no_chart_script(browser, served_site):
    context = browser.new_context()
    page = context.new_page()
    requests = []
    page.on("request", lambda r: requests.append(urlparse(r.url).path))
    for url in ("why-positions/",):  # a chapter (static pages: the test above)
        page.goto(served_site.base_url + url, wait_until="networkidle")
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        page.wait_for_timeout(200)
    context.close()
    assert [p for p in requests if _CHART_SCRIPT.search(p) or "explorables/" in p] == []


def test_explorable_weight_is_recorded(built_site):
    """What a page with an explorable adds, compressed as a static host
    serves it (gzip -6): Vega's runtime, the loader, the stylesheet and the
    figure's compiled spec (with its data), and the figure's HTML."""
    site = built_site.path

    def gz(path: Path) -> int:
        return len(gzip.compress(path.read_bytes(), compresslevel=6))

    shared = {
        "vega": gz(next((site / "assets/vendor").glob("vega-*.min.js"))),
        "loader": gz(site / "javascripts/explorables.js"),
        "stylesheet": gz(site / "stylesheets/explorables.css"),
    }
    per_figure = {
        spec.name.split(".")[0] + "." + spec.name.split(".")[1]: gz(spec)
        for spec in sorted((site / "assets/explorables").glob("*.json"))
    }
    total = {k: sum(shared.values()) + v for k, v in per_figure.items()}
    record("explorable weight (bytes, gzip -6)", {**shared, "specs": per_figure, "total": total})
    assert shared["vega"] < 200_000
    assert max(per_figure.values()) < 60_000
    for spec in (site / "assets/explorables").glob("*.json"):  # compiled: Vega, not Vega-Lite
        assert json.loads(spec.read_text(encoding="utf-8"))["$schema"].endswith("/vega/v6.json")


# --------------------------------------------------------------------------
# The hook and the specs, without a browser

_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\n]+?\$", re.DOTALL)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_explorable_says_the_same_in_both_languages(name):
    """Both languages have the same texts, the same formulas in the caption
    (as a chapter's prose pairs do), and the same controls; the Japanese
    labels are Japanese."""
    module = MODULES[name]
    assert set(module.TEXT) == {"en", "ja"}
    assert set(module.TEXT["en"]) == set(module.TEXT["ja"])
    en, ja = module.TEXT["en"]["caption"], module.TEXT["ja"]["caption"]
    assert sorted(_MATH.findall(en)) == sorted(_MATH.findall(ja))
    specs = {lang: module.spec(lang) for lang in ("en", "ja")}
    params = {lang: [p["name"] for p in s["params"]] for lang, s in specs.items()}
    assert params["en"] == params["ja"]
    for param in specs["ja"]["params"]:
        if "bind" in param and "name" in param["bind"]:
            assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", param["bind"]["name"]), param


class _FakeExplorables:
    def __init__(self):
        self.modules = {"01-demo": None}
        self.compiled = {"01-demo.en": ("01-demo.en.0123456789abcdef.json", "{}")}

    def caption(self, name, lang):
        return "Move the slider: $b$ & more."

    def renderer(self, name):
        return "svg"


def _page(url: str):
    from types import SimpleNamespace

    return SimpleNamespace(url=url, file=SimpleNamespace(src_uri="demo.ipynb"))


def test_the_marked_cell_becomes_the_figure():
    cell = (
        '<div class="jp-Cell jp-MarkdownCell"><div class="jp-InputArea">'
        '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput" '
        'data-mime-type="text/markdown">\n<!-- explorable: 01-demo -->\n'
        "<p><em>A note for readers of the notebook.</em></p>\n</div></div></div>"
    )
    content = "<p>before</p>" + cell + "<p>after</p>"
    out, used = hook.place(content, _page("ja/demo/"), _FakeExplorables(), "en")
    assert used == ["01-demo.en.0123456789abcdef.json"]
    assert "readers of the notebook" not in out and "explorable:" not in out
    assert out.startswith("<p>before</p>") and out.endswith("</div></div></div><p>after</p>")
    assert 'data-spec="../../assets/explorables/01-demo.en.0123456789abcdef.json"' in out
    assert "<figcaption>Move the slider: $b$ &amp; more.</figcaption>" in out
    assert "<noscript>" in out
    with pytest.raises(ValueError, match=r"no explorable '02-other'.*01-demo"):
        hook.place(content.replace("01-demo", "02-other"), _page("demo/"), _FakeExplorables(), "en")


def test_the_theme_goes_under_a_specs_own_config():
    spec = hook.with_theme({"params": [{"name": "x", "value": 1}], "config": {"axis": {"grid": 0}}})
    assert [p["name"] for p in spec["params"]] == ["textColor", "x"]
    assert spec["config"]["axis"]["grid"] == 0
    assert spec["config"]["axis"]["labelColor"] == {"expr": "textColor"}
    assert spec["config"]["background"] == "transparent"
