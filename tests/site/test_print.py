"""The printed book (hooks/book.py, docs/stylesheets/print.css): the book
page of each language holds every page of the navigation in order, as one
document whose links and formulas work, and a printed page follows the
print stylesheet's rules. Both whole books are printed to PDF from the
suite's own build and read back with tools/book_pdf.py's checks (titles,
page count, headings at page feet, blank pages): what `make pdf` does,
without a second build. test_make_pdf_checks_a_printed_book shows on a
book of two pages that those checks find a heading left at a page's foot."""

from __future__ import annotations

import html as htmllib
import posixpath
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.site import background
from tests.site.test_browser import SHOTS, record

ROOT = Path(__file__).resolve().parents[2]

LANGS = [("en", ""), ("ja", "ja/")]


def _nav_pages(built_site, prefix: str) -> list[str]:
    """The site URLs of the navigation, in order, as the home page lists them."""
    urls = []
    for href in re.findall(r'<a href="([^"#]+)" class="md-nav__link', built_site.page(prefix)):
        url = posixpath.normpath(posixpath.join(prefix or ".", href)).removeprefix(".") + "/"
        url = url.lstrip("/")
        if url not in urls:
            urls.append(url)
    return urls


def _plain(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_book_holds_every_page_in_order(built_site, lang, prefix):
    book = built_site.page(f"{prefix}print/")
    expected = [u for u in _nav_pages(built_site, prefix) if u != prefix and "api/" not in u]
    articles = re.findall(
        r'<article class="[^"]*book-page" id="([^"]+)">(.*?)</article>', book, re.S
    )
    assert len(articles) == len(expected) >= 19, ([a for a, _ in articles], expected)
    for (anchor, article), url in zip(articles, expected, strict=True):
        title = _plain(re.search(r"<h1[^>]*>(.*?)</h1>", built_site.page(url), re.S)[1])
        assert _plain(re.search(r"<h1[^>]*>(.*?)</h1>", article, re.S)[1]) == title.removesuffix(
            "¶"
        )
        assert anchor == url.removeprefix(prefix).strip("/").replace("/", "-")
    contents = re.search(r'<nav class="book-contents">(.*?)</nav>', book, re.S)[1]
    assert re.findall(r'href="#([^"]+)"', contents) == [a for a, _ in articles]
    assert f'<html lang="{lang}" class="book">' in book
    # the book's title is the site's name in its own language, as the home
    # page's title ends ("ホーム - 位置エンコーディングを導く")
    home = _plain(re.search(r"<title>(.*?)</title>", built_site.page(prefix), re.S)[1])
    site_name = home.split(" - ")[-1]
    assert _plain(re.search(r"<h1>(.*?)</h1>", book, re.S)[1]) == site_name
    record(f"book page {prefix}print/", {"pages of the site": len(articles), "bytes": len(book)})


@pytest.mark.parametrize("prefix", ["", "ja/"])
def test_book_links_ids_and_formulas_resolve(built_site, prefix):
    """One document: ids unique, every link inside the book lands, every
    glyph a formula draws (drawn now or before printing) is in the book's
    one copy of the outlines; solutions ship open; no download buttons."""
    book = built_site.page(f"{prefix}print/")
    body = book[book.find("<body") :]
    ids = re.findall(r'\bid="([^"]+)"', body)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})[:5]
    inside = [unquote(h) for h in re.findall(r'href="#([^"]+)"', body) if not h.startswith("MJX-")]
    assert len(inside) > 200 and set(inside) <= set(ids), sorted(set(inside) - set(ids))[:5]
    glyphs = set(re.findall(r'href="#(MJX-[^"]+)"', htmllib.unescape(body)))
    assert glyphs and glyphs <= set(ids), sorted(glyphs - set(ids))[:5]
    assert "<details" in body and not re.search(r"<details(?![^>]*\bopen\b)", body)
    assert "nb-toolbar" not in body and "headerlink" not in body
    assert 'class="explorable"' not in book  # interactive figures do not print
    head = book[: book.find("</head>")]
    assert re.search(r'href="[^"]*stylesheets/print\.css"', head) and "math-drawing" in head
    # relative addresses still reach their files from the book's folder
    for src in set(re.findall(r'<img src="([^"]+)"', body)):
        path = urlparse(src).path
        assert (built_site.path / prefix / "print" / path).resolve().exists(), src


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_every_page_links_to_its_language_book(built_site, lang, prefix):
    for url in (prefix, f"{prefix}rope/", f"{prefix}glossary/"):
        page = built_site.page(url)
        footer = page[page.find('class="md-copyright"') :]
        link = re.search(r'<a href="([^"]*print/)">', footer)
        assert link, url
        target = (built_site.path / url / link[1]).resolve()
        assert target == (built_site.path / prefix / "print").resolve(), (url, link[1])


# What print.css does to a chapter, read from the browser with the print
# media emulated.
_PRINTED = r"""() => {
  const style = (selector, property) => {
    const e = document.querySelector(selector);
    return e && getComputedStyle(e).getPropertyValue(property);
  };
  const closed = document.querySelector('article details.solution:not([open])');
  const inside = closed && closed.querySelector('.jp-Cell, p');
  return {
    headingBreakAfter: style('article h2', 'break-after'),
    solutionShown: !!inside && inside.getBoundingClientRect().height > 0,
    solutionLinesKept: [style('article details.solution p', 'orphans'), style('article details.solution p', 'widows')],
    solutionOutputBreakInside: style('article details.solution .jp-OutputArea', 'break-inside'),
    codeFontPt: parseFloat(style('article .jp-InputArea-editor .highlight-ipynb pre', 'font-size')) * 0.75,
    codeWraps: style('article .jp-InputArea-editor .highlight-ipynb pre', 'white-space'),
    cellSkipped: style('article .jp-Notebook > .jp-CodeCell', 'content-visibility'),
    glyphStroke: style('article mjx-container[jax="SVG"] use', 'stroke-width'),
    hidden: ['.md-header', '.md-sidebar--primary', '.md-footer', 'figure.explorable',
             '.jp-InputPrompt', '.nb-toolbar'].map(s => [s, style(s, 'display')]),
  };
}"""


@pytest.mark.parametrize("lang, prefix", LANGS)
def test_a_printed_chapter_follows_the_print_rules(browser, served_site, lang, prefix):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(served_site.base_url + f"{prefix}alibi/", wait_until="load")
    screen_stroke = page.evaluate(
        "getComputedStyle(document.querySelector('article mjx-container use')).strokeWidth"
    )
    page.emulate_media(media="print")
    printed = page.evaluate(_PRINTED)
    page.close()
    record(f"printed chapter {prefix}alibi/", printed)
    assert screen_stroke == "3px"  # on the screen MathJax darkens the glyphs
    assert printed["glyphStroke"] in ("0", "0px"), printed
    assert printed["headingBreakAfter"] == "avoid-page", printed
    # a long paragraph of a fold may break (three lines kept at either end),
    # an output may not
    assert printed["solutionShown"] and printed["solutionLinesKept"] == ["3", "3"], printed
    assert printed["solutionOutputBreakInside"] == "avoid", printed
    assert (
        printed["codeFontPt"] == pytest.approx(8, abs=0.01) and printed["codeWraps"] == "pre-wrap"
    )
    assert printed["cellSkipped"] == "visible", printed
    assert all(display == "none" for _, display in printed["hidden"]), printed["hidden"]


def test_a_title_may_wrap_over_the_first_lines_of_its_page():
    from tools.book_pdf import line_key as key
    from tools.book_pdf import opens_with

    title = "RoPE as a memory-bound kernel: bytes, and what to measure"
    wrapped = [
        (0.1, key("RoPE as a memory-bound kernel:")),
        (0.15, key("bytes, and what to measure")),
    ]
    assert opens_with(wrapped, key(title))
    assert opens_with([(0.1, key(title)), (0.2, key("Text."))], key(title))
    assert not opens_with(wrapped[:1], key(title))  # the first line alone is not the title
    assert not opens_with([(0.1, key("Text.")), *wrapped], key(title))  # not at the top


def test_make_pdf_checks_a_printed_book(browser, served_site, tmp_path):
    """tools/book_pdf.py on a small book: the glossary and the notation
    page of both languages printed through the book's stylesheet, then read
    back. Each title starts a page, and the checker finds a heading left at
    a page's foot when one is."""
    from tools.book_pdf import check, page_count

    base = served_site.base_url
    found = {}
    for lang, prefix in LANGS:
        page = browser.new_page()
        page.goto(base + f"{prefix}print/", wait_until="domcontentloaded")
        titles = page.evaluate(
            """() => { const keep = [...document.querySelectorAll('article.book-page')].slice(-2);
                 document.querySelectorAll('article.book-page').forEach(a => {
                   if (!keep.includes(a)) a.remove(); });
                 return keep.map(a => a.querySelector('h1').textContent.trim()); }"""
        )
        headings = page.evaluate(
            "[...document.querySelectorAll('article.book-page :is(h2, h3, h4)')].map(h => h.textContent.trim())"
        )
        page.evaluate(
            "() => { dispatchEvent(new Event('beforeprint')); return document.fonts.ready; }"
        )
        pdf = tmp_path / f"small-{lang}.pdf"
        page.pdf(path=str(pdf), prefer_css_page_size=True, print_background=True)
        # the same pages with a heading pushed to the foot of page 2
        page.evaluate(
            """() => { const h = document.querySelector('article.book-page h2');
                 const gap = document.createElement('div');
                 gap.style.height = '0px';
                 h.before(gap);
                 // grow the gap until the heading sits at the foot of its page
                 const page = 297 / 25.4 * 96 - (16 + 18) / 25.4 * 96;
                 gap.style.breakBefore = 'page';
                 gap.style.height = (page - 90) + 'px';
                 h.style.breakAfter = 'auto';
                 h.nextElementSibling.style.breakBefore = 'page'; }"""
        )
        bad = tmp_path / f"bad-{lang}.pdf"
        page.pdf(path=str(bad), prefer_css_page_size=True, print_background=True)
        page.close()
        found[lang] = {
            "pages": page_count(pdf),
            "problems": check(pdf, titles, headings),
            "problems, heading pushed to a foot": check(bad, titles, headings),
        }
        subprocess.run(
            [
                "pdftoppm",
                "-f",
                "2",
                "-l",
                "2",
                "-png",
                "-r",
                "50",
                str(pdf),
                str(SHOTS / f"print-small-{lang}"),
            ]
        )
    record("small printed book", found)
    for lang, f in found.items():
        assert f["problems"] == [] and f["pages"] >= 3, (lang, f)
        assert any("ends with the heading" in p for p in f["problems, heading pushed to a foot"]), (
            lang,
            f,
        )


def test_the_whole_book_prints_and_passes_its_checks(built_site, tmp_path):
    """Both books, printed by `make pdf`'s own command (tools/book_pdf.py,
    in a process of its own, from this suite's build), pass every check: a
    chapter that prints a mostly blank page or leaves a heading at a page's
    foot fails here, not only in `make pdf`."""
    import sys

    if background.job():  # printed by the run's controller after its build
        status, stdout, _ = background.wait("book")
        stderr = ""
    else:
        done = subprocess.run(
            [sys.executable, "tools/book_pdf.py", "--site", str(built_site.path),
             "--out", str(tmp_path)],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    record("whole printed book", stdout.strip().splitlines())
    assert status == 0, stdout + stderr[-2000:]
    for lang in ("en", "ja"):
        pages = re.search(rf"posenc-{lang}\.pdf: (\d+) pages", stdout)
        # a book of every chapter is hundreds of pages; a handful means a broken print
        assert pages and int(pages[1]) > 200, stdout
