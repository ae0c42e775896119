"""Search finds prose (hooks/search.py, docs/javascripts/search-*.js,
japanese-words.js): the built indexes, and Material's search box in
headless Chromium, in both languages. The results of each query are
recorded in tests/screenshots/measures.json."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

import pytest

from tests.site.test_browser import SHOTS, SLUGS, Recorder, record

BACKSLASH_COMMAND = re.compile(r"\\[A-Za-z]+")


def _index(built_site, lang):
    path = built_site.path / "search" / f"search_index.{lang}.json"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_index_holds_prose_with_code_apart_and_no_tex(built_site, lang):
    index = _index(built_site, lang)
    docs = index["docs"]
    assert index["config"]["lang"] == ["en"]  # lunr's segmenter would cut the words again
    assert index["config"]["fields"]["code"]["boost"] < index["config"]["fields"]["text"]["boost"]
    assert [d["location"] for d in docs if "<pre>" in d["text"]] == []
    tex = [
        (d["location"], m[0])
        for d in docs
        for m in BACKSLASH_COMMAND.finditer(d["title"] + d["text"])
    ]
    assert tex == [], tex[:5]
    assert sum("code" in d for d in docs) > 100
    # a chapter's cells fall in the section of the heading above them, not
    # in the page's first section (which search ranks above the others)
    prefix = "" if lang == "en" else "ja/"
    for slug in SLUGS:
        sections = [d for d in docs if d["location"].startswith(f"{prefix}{slug}/")]
        first, rest = sections[0], sections[1:]
        assert len(rest) >= 3 and "code" not in first, slug
        assert len(first["text"]) < max(len(d["text"]) for d in rest), slug
    yarn_cell = "def rotate_half(x, positions, theta):"
    holders = [d["location"] for d in docs if yarn_cell in d.get("code", "")]
    assert len(holders) == 1 and holders[0].startswith(f"{prefix}rope-context/#"), holders
    assert not [d["location"] for d in docs if yarn_cell in d["text"]]


def test_japanese_index_is_cut_into_words(built_site):
    docs = _index(built_site, "ja")["docs"]
    pi = next(d for d in docs if d["location"] == "ja/rope-context/#位置補間")
    assert pi["title"].strip("\u200b").split("\u200b") == ["位置", "補間"]
    assert "\u200bファインチューニング\u200b" in "".join(d["text"] for d in docs)


def _search(browser, served_site, prefix, query):
    """Type ``query`` into the search box of the home page in the language
    of ``prefix``; return the results, one list per page: (site-relative
    URL, text shown) of the page and of each section listed under it."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    recorder = Recorder(page, served_site.base_url)
    page.goto(served_site.base_url + prefix, wait_until="networkidle")
    page.locator("label.md-header__button[for='__search']").first.evaluate("e => e.click()")
    box = page.locator("input[data-md-component='search-query']")
    # the whole query at once: typed key by key, a slow machine could show the
    # results of a prefix ("rot") when the count first appears
    box.fill(query)
    box.press("End")  # Material searches on keyup
    page.wait_for_function(
        """() => /\\d|No matching|一致する/.test(
             document.querySelector('.md-search-result__meta').textContent)"""
    )
    groups = page.evaluate(
        """() => [...document.querySelectorAll('.md-search-result__item')].map(item =>
             [...item.querySelectorAll('a.md-search-result__link')].map(a =>
               [a.href, a.querySelector('article').textContent]))"""
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"search-{prefix.strip('/') or 'en'}-{query}.png"))
    page.close()
    assert recorder.errors == [] and recorder.external == [], (recorder.errors, recorder.external)
    return [[(_site_url(href, served_site), text) for href, text in group] for group in groups]


def _site_url(href, served_site):
    """``http://host/ja/rope-context/?h=...#%E4%BD%8D...`` -> ``ja/rope-context/#位置...``
    (Material adds the query, to highlight it on the page)."""
    return unquote(re.sub(r"\?[^#]*", "", href.removeprefix(served_site.base_url)))


def _best_section(group):
    """The best section of a result: the first one listed under its page
    (Material lists the page first), or the page itself."""
    sections = [url for url, _ in group if "#" in url]
    return sections[0] if sections else group[0][0]


@pytest.mark.parametrize(
    "prefix, query, expected",
    [
        ("ja/", "位置補間", "ja/rope-context/#位置補間"),
        ("", "position interpolation", "rope-context/#position-interpolation"),
    ],
)
def test_search_finds_the_section_about_the_query_first(
    browser, served_site, prefix, query, expected
):
    """位置補間 is searched as its two words (not 位置 alone, which is on
    every page), and the section titled by the query comes first."""
    groups = _search(browser, served_site, prefix, query)
    best = [_best_section(g) for g in groups]
    record(f"search {query!r}: best section of the first results", best[:5])
    assert best and best[0] == expected, best[:5]


def test_code_ranks_below_prose(browser, served_site):
    """rotate_half is named in the prose of several chapters and defined in
    code cells of others (a YaRN helper in chapter 09): every result whose
    name is in prose comes before a result whose name is only in code, and
    chapter 08's section on the two pairings, which explains it, is first."""
    groups = _search(browser, served_site, "", "rotate_half")
    shown = [(_best_section(g), g) for g in groups]
    record("search 'rotate_half': best section of each result", [url for url, _ in shown])
    in_prose = ["rotate_half" in " ".join(text for _, text in g) for _, g in shown]
    assert in_prose[0], shown[0]
    assert in_prose == sorted(in_prose, reverse=True), [u for u, _ in shown]
    assert shown[0][0] == "rope/#two-pairings-interleaved-and-half", shown[:3]
    code_only = [u for (u, _), prose in zip(shown, in_prose, strict=True) if not prose]
    assert any(u.startswith("rope-context/") for u in code_only), code_only


@pytest.mark.parametrize(
    "prefix, queries",
    [("", ["rotation", "frequency", "softmax"]), ("ja/", ["回転", "周波数", "角度"])],
)
def test_search_snippets_show_no_tex(browser, served_site, prefix, queries):
    for query in queries:
        groups = _search(browser, served_site, prefix, query)
        texts = [text for group in groups for _, text in group]
        assert len(texts) >= 5, (query, texts)
        tex = [m[0] for text in texts for m in BACKSLASH_COMMAND.finditer(text)]
        assert tex == [], (query, tex[:5])
