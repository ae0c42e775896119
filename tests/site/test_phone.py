"""The site on a phone, 390 px wide (docs/stylesheets/site.css "Phones",
docs/javascripts/narrow.js, explorables.js): what is wider than the column
keeps its size and scrolls in its own box, and stays legible. What was
measured goes to tests/screenshots/measures.json."""

from __future__ import annotations

import re

import pytest

from tests.site.test_browser import SHOTS, record

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2}
LANGS = [("en", ""), ("ja", "ja/")]

# For each formula of the article: the size it is drawn at against its own
# size (an <svg> of width "N ex" in the formula's font), the text size it is
# drawn at, and whether its scrolling box (the formula, or Material's
# div.arithmatex around it) scrolls.
_FORMULAS = r"""() => [...document.querySelectorAll('article mjx-container')].map(c => {
  const svg = c.querySelector(':scope > svg');
  const probe = document.createElement('span');
  probe.style.cssText = 'display:inline-block;width:' + svg.getAttribute('width');
  c.appendChild(probe);
  const natural = probe.getBoundingClientRect().width;
  probe.remove();
  const scale = svg.getBoundingClientRect().width / natural;
  const box = c.parentElement.classList.contains('arithmatex') ? c.parentElement : c;
  return {display: c.getAttribute('display') === 'true', natural: Math.round(natural),
          scale: Math.round(scale * 1000) / 1000,
          glyph: Math.round(parseFloat(getComputedStyle(c).fontSize) * scale * 10) / 10,
          scrolls: box.scrollWidth > box.clientWidth + 1,
          overflow: getComputedStyle(box).overflowX, tabIndex: box.tabIndex};
})"""


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_formulas_keep_their_size_and_wide_ones_scroll(browser, served_site, lang, prefix):
    """Chapter 08 (its block-diagonal matrix), the notation tables and the
    glossary: every formula is drawn at its own size, a display formula
    wider than the column scrolls in its box (with a tab stop once laid
    out), and the page itself never scrolls sideways."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    found = {}
    for url in (f"{prefix}rope/", f"{prefix}notation/", f"{prefix}glossary/"):
        page.goto(served_site.base_url + url, wait_until="load")
        formulas = page.evaluate(_FORMULAS)
        wide = [f for f in formulas if f["display"] and f["natural"] > 360]
        if url.endswith("rope/"):
            widest = page.locator("article mjx-container").nth(
                max(
                    range(len(formulas)),
                    key=lambda k: formulas[k]["natural"] * formulas[k]["display"],
                )
            )
            widest.scroll_into_view_if_needed()
            page.wait_for_function("e => e.tabIndex === 0", arg=widest.element_handle())
            widest.screenshot(path=str(SHOTS / f"phone-widest-formula-{lang}.png"))
        found[url] = {
            "formulas": len(formulas),
            "smallest drawn at (scale)": min(f["scale"] for f in formulas),
            "smallest glyph (px)": min(f["glyph"] for f in formulas),
            "display formulas wider than the column": len(wide),
            "page width": page.evaluate("document.documentElement.scrollWidth"),
        }
        assert min(f["scale"] for f in formulas) >= 0.99, (url, found[url])
        assert all(f["scrolls"] and f["overflow"] == "auto" for f in wide), (url, wide[:3])
        assert found[url]["page width"] <= 390, (url, found[url])
    context.close()
    record(f"formulas at 390px ({lang})", found)
    assert found[f"{prefix}rope/"]["display formulas wider than the column"] >= 1


# An explorable as drawn: the size of its drawing (SVG or canvas) against
# the size Vega made it, whether it fits its view, and every text item of
# Vega's scene (axis and legend labels, titles) with its font size.
_CHART = r"""figure => {
  const view = figure.querySelector('.explorable-view');
  const marks = view.querySelector('.marks');
  const own = marks.localName === 'svg' ? parseFloat(marks.getAttribute('width'))
                                         : parseFloat(marks.style.width);
  const shown = marks.getBoundingClientRect();
  const texts = [];
  (function walk(node) {
    for (const item of node.items || []) {
      if (node.marktype === 'text' && String(item.text ?? '').trim() && item.opacity !== 0) {
        texts.push({text: String(item.text), size: item.fontSize ?? 11});
      }
      walk(item);
    }
  })(figure.vegaView.scenegraph().root);
  const controls = figure.querySelector('.vega-bindings').getBoundingClientRect();
  return {scale: shown.width / own, fits: view.scrollWidth <= view.clientWidth + 1,
          controlsUnder: controls.top >= shown.bottom - 1, stacked: 'stacked' in figure.dataset,
          texts};
}"""


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_explorables_reflow_with_legible_labels(browser, served_site, lang, prefix):
    """Every explorable: its charts fit the column without being shrunk
    (ALiBi's two charts are stacked), every label keeps the size its spec
    gives it (11 px at least: axis and legend labels, chapter 09's length
    notes), the controls come under the chart, and the colour bar's labels
    are whole numbers ("−0.05", not "−0."), also for the smallest slope."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    found = {}
    for slug in ("sinusoidal", "t5-buckets", "alibi", "rope", "rope-context"):
        page.goto(served_site.base_url + f"{prefix}{slug}/", wait_until="load")
        figure = page.locator("figure.explorable")
        figure.scroll_into_view_if_needed()
        page.wait_for_function("f => f.dataset.state === 'ready'", arg=figure.element_handle())
        if slug == "alibi":  # one head of one: m = 1/256, the colour bar's labels are small
            page.evaluate(
                """f => { for (const [i, v] of [[0, 1], [1, 1]]) {
                     const input = f.querySelectorAll('input[type=range]')[i];
                     input.value = v; input.dispatchEvent(new Event('input', {bubbles: true})); } }""",
                figure.element_handle(),
            )
            page.wait_for_function(
                "f => /m = 0\\.0039/.test(f.querySelector('svg.marks').textContent)",
                arg=figure.element_handle(),
            )
        chart = figure.evaluate(_CHART)
        figure.screenshot(path=str(SHOTS / f"phone-explorable-{slug}-{lang}.png"))
        smallest = min(t["size"] for t in chart["texts"]) * chart["scale"]
        found[slug] = {
            **{k: chart[k] for k in ("scale", "fits", "controlsUnder", "stacked")},
            "smallest label (px)": round(smallest, 1),
        }
        assert chart["scale"] >= 0.99 and chart["fits"] and chart["controlsUnder"], (
            slug,
            found[slug],
        )
        assert smallest >= 11, (slug, found[slug])  # the specs' smallest size
        if slug == "alibi":
            assert chart["stacked"], found[slug]
            numbers = [t["text"] for t in chart["texts"] if re.fullmatch(r"[−-]?[\d.]+", t["text"])]
            assert numbers and all(n[-1].isdigit() for n in numbers), numbers
    context.close()
    record(f"explorables at 390px ({lang})", found)


def _smallest_figure_text_pt() -> tuple[float, float]:
    """The smallest text of the site's figure style (pt), and its dpi."""
    import matplotlib as mpl

    from posenc_lab.plotting import use_site_style

    use_site_style()
    sizes = [mpl.rcParams["font.size"], mpl.rcParams["legend.fontsize"]]
    return min(float(s) for s in sizes if not isinstance(s, str)), mpl.rcParams["figure.dpi"]


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_figures_open_full_size_on_a_tap(browser, served_site, lang, prefix):
    """A figure is drawn 640 px wide and shown about 350 px wide on a phone,
    its smallest labels near 7 px: a tap (or Enter) opens it at its own
    size, labels at 10 pt of 100 dpi (14 px), in a dialog that scrolls and
    closes on Escape."""
    points, dpi = _smallest_figure_text_pt()
    label_px = points / 72 * dpi
    context = browser.new_context(**PHONE, has_touch=True)
    page = context.new_page()
    page.goto(served_site.base_url + f"{prefix}sinusoidal/", wait_until="load")
    img = page.locator("article .jp-RenderedImage img").nth(1)
    img.scroll_into_view_if_needed()
    page.wait_for_function("i => i.complete && i.tabIndex === 0", arg=img.element_handle())
    width = int(img.get_attribute("width"))
    shown = img.bounding_box()["width"]
    img.tap()
    dialog = page.locator("dialog.figure-zoom[open]")
    dialog.wait_for()
    opened = dialog.locator("img").bounding_box()["width"]
    scrolls = dialog.locator(".figure-zoom__view").evaluate("v => v.scrollWidth > v.clientWidth")
    page.screenshot(path=str(SHOTS / f"phone-figure-open-{lang}.png"))
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    focused = page.evaluate(
        "document.activeElement === document.querySelectorAll('article .jp-RenderedImage img')[1]"
    )
    page.keyboard.press("Enter")  # the figure has the focus back: Enter opens it again
    dialog.wait_for()
    context.close()
    record(
        f"figure at 390px ({lang})",
        {"drawn width": width, "shown": shown, "opened": opened,
         "smallest label shown (px)": round(label_px * shown / width, 1),
         "smallest label opened (px)": round(label_px * opened / width, 1)},
    )  # fmt: skip
    assert shown < width * 0.7  # the case for a tap
    assert abs(opened - width) <= 1 and scrolls and focused
    assert label_px * opened / width >= 12


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_wide_tables_keep_their_first_column_in_view(browser, served_site, lang, prefix):
    """Chapter 00's table of what an encoding must do (six columns, wider
    than a phone): scrolled to its last column, its first column (the
    requirement) is still on the screen, on top."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.goto(served_site.base_url + f"{prefix}why-positions/", wait_until="load")
    wrap = page.locator("article .md-typeset__scrollwrap").nth(0)
    wrap.scroll_into_view_if_needed()
    seen = wrap.evaluate(
        """async w => {
             w.scrollLeft = w.scrollWidth;
             await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
             const header = document.querySelector('.md-header').getBoundingClientRect().bottom;
             const cells = [...w.querySelectorAll('tr > :first-child')];
             return {scrolled: w.scrollLeft, columns: w.querySelectorAll('tr:first-child > *').length,
                     cells: cells.map(c => { const r = c.getBoundingClientRect();
                       const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
                       return {left: r.left, right: r.right, onTop: c.contains(top),
                               visible: r.top > header && r.bottom < innerHeight}; })}; }"""
    )
    wrap.screenshot(path=str(SHOTS / f"phone-table-{lang}.png"))
    context.close()
    visible = [c for c in seen["cells"] if c["visible"]]
    record(
        f"wide table at 390px ({lang})",
        {"scrolled (px)": seen["scrolled"], "first column": visible[:1]},
    )
    assert seen["scrolled"] > 50 and seen["columns"] >= 4, seen
    assert visible and all(c["left"] >= 0 and c["right"] <= 390 and c["onTop"] for c in visible), (
        visible
    )


# Each table of the article: how far its box scrolls, its columns, and its
# narrowest column against the font size of its cells.
_TABLES = """() => [...document.querySelectorAll('article .md-typeset__scrollwrap')].map(w => {
  const cells = [...w.querySelector('tr').cells];
  const em = parseFloat(getComputedStyle(cells[0]).fontSize);
  return {over: w.scrollWidth - w.clientWidth, columns: cells.length,
          narrowest: Math.min(...cells.map(c => c.getBoundingClientRect().width)) / em};
})"""


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_small_tables_fit_a_phone(browser, served_site, lang, prefix):
    """Chapter 11's table of which kinds learned each task (a name column
    and three short ones) fits a 390 px column whole: no last column under
    the shadow at the edge (reader review). Chapter 00's map of four
    columns fits too; no column is squeezed under about four Japanese
    characters; its table of six columns still scrolls."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    found = {}
    for slug in ("length-generalisation", "why-positions"):
        page.goto(served_site.base_url + f"{prefix}{slug}/", wait_until="load")
        page.add_style_tag(content="* { content-visibility: visible !important; }")
        found[slug] = page.evaluate(_TABLES)
        if slug == "length-generalisation":
            page.locator("article .md-typeset__scrollwrap").nth(1).screenshot(
                path=str(SHOTS / f"phone-small-table-{lang}.png")
            )
    context.close()
    record(f"tables at 390px ({lang})", found)
    assert found["length-generalisation"][1]["columns"] == 4
    assert found["length-generalisation"][1]["over"] <= 0, found["length-generalisation"]
    assert found["why-positions"][1]["over"] <= 0, found["why-positions"]
    assert found["why-positions"][0]["over"] > 50, found["why-positions"]
    tables = [t for ts in found.values() for t in ts]
    assert min(t["narrowest"] for t in tables) >= 5, tables  # 4.5em and padding


# Each printed output of the article laid out: whether it scrolls, its
# overflow, its background (its own, or the page's where it has none) and
# the scroll cue's cover colour (the first colour of its background image).
_OUTPUTS = """() => [...document.querySelectorAll('article .jp-RenderedText pre')]
  .filter(pre => pre.checkVisibility()).map(pre => {
    const cs = getComputedStyle(pre);
    let back = 'rgba(0, 0, 0, 0)';
    for (let e = pre; e && back === 'rgba(0, 0, 0, 0)'; e = e.parentElement) {
      back = getComputedStyle(e).backgroundColor;
    }
    return {over: pre.scrollWidth - pre.clientWidth, overflow: cs.overflowX, back,
            cue: cs.backgroundImage, attachment: cs.backgroundAttachment,
            text: pre.textContent.slice(0, 40)};
  })"""


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_printed_output_wider_than_a_phone_shows_the_scroll_cue(browser, served_site, lang, prefix):
    """Chapter 02's printed outputs, in both schemes: an output wider than
    the column scrolls in its box and shows code's shadow at the edge
    (reader review: cut with no cue), its cover the colour of the box."""
    found = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(**PHONE, color_scheme=scheme)
        page = context.new_page()
        page.goto(served_site.base_url + f"{prefix}sinusoids-in-the-wild/", wait_until="load")
        page.add_style_tag(content="* { content-visibility: visible !important; }")
        wide = [o for o in page.evaluate(_OUTPUTS) if o["over"] > 1]
        shown = page.locator("article .jp-RenderedText pre", has_text="longest wavelength")
        shown.scroll_into_view_if_needed()
        shown.screenshot(path=str(SHOTS / f"phone-output-{scheme}-{lang}.png"))
        context.close()
        found[scheme] = wide
        # the tensors of labml and AllenNLP, and the permutation, stay wider
        # than a phone (the lines with a quoted number are cut to fit)
        assert len(wide) >= 2, wide
        assert not [o for o in wide if "wavelength" in o["text"]], wide
        for o in wide:
            assert o["overflow"] == "auto" and o["attachment"] == "local, scroll", o
            assert o["cue"].count("linear-gradient") == 2, o
            assert o["cue"].startswith(f"linear-gradient(to left, {o['back']} 50%"), o
    record(f"printed outputs wider than 390px ({lang})", {s: len(w) for s, w in found.items()})
