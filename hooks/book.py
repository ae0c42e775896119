"""MkDocs hook: the whole book on one page per language, to print or save as PDF.

After each language's build (its chapters typeset by hooks/math.py), this
hook writes ``print/index.html`` (``ja/print/index.html``): a title page,
the contents, then the article of every page of the navigation in its
order, except the home page and the API reference (generated from the
docstrings, and on the site), each starting a new printed page, without
their interactive figures (the static figures show the same). The book
page is built from the built pages, so it shows what they show: the same
stylesheets, typeset formulas, figures and colouring; it uses the chapters'
own drawing script (docs/overrides/partials/deferred.html), which draws the
formulas and code a chapter ships undrawn before printing.
docs/stylesheets/print.css sets the book in pages. ``make pdf`` prints both
books with headless Chromium (tools/book_pdf.py).

Inside the book every id of a page gets the page's prefix, and the links
between pages of the book become links inside it, so that the contents,
the cross-references and a PDF's links work.
"""

from __future__ import annotations

import html
import logging
import posixpath
import re
from pathlib import Path

from mkdocs.plugins import event_priority

BOOK_DIR = "print"  # the book page's folder in each language's part of the site
LANGUAGE_PREFIX = {"en": "", "ja": "ja/"}
TEXT = {
    "en": {"contents": "Contents", "note": "The whole book on one page, for printing."},
    "ja": {"contents": "目次", "note": "印刷用に、本全体を 1 ページにまとめたものです。"},
}
log = logging.getLogger("mkdocs.hooks.book")

# The languages whose builds are under way, innermost last: mkdocs-static-i18n
# builds each other language inside the default language's post-build
# step, so that the theme's language is the last one built by then.
# The site name is kept too: by the time the default language's post-build
# step runs, the other languages' builds have left theirs in the config.
_building: list[tuple[str, str, list[str]]] = []  # (language, site name, its book's URLs)


def book_urls(urls: list[str], prefix: str) -> list[str]:
    """The pages of a book: the navigation's, without the home page and the
    API reference (``api/``, ``api/...``)."""
    out = []
    for url in urls:
        rest = url.removeprefix(prefix)
        if rest and rest != "api/" and not rest.startswith("api/") and url not in out:
            out.append(url)
    return out


def on_nav(nav, config, files, **kwargs):
    lang = config.theme["language"]  # mkdocs-static-i18n sets it for each language's build
    urls = book_urls([p.url for p in nav.pages], LANGUAGE_PREFIX.get(lang, ""))
    _building.append((lang, config.site_name, urls))
    return nav


# --------------------------------------------------------------------------
# Reading a built page

_ARTICLE = re.compile(r'<article class="md-content__inner md-typeset">(.*?)</article>', re.DOTALL)
_CACHE = re.compile(
    r'<svg style="display: none;" id="MJX-SVG-global-cache"><defs>(.*?)</defs></svg>', re.DOTALL
)
_GLYPH = re.compile(r'<path id="(?P<id>[^"]+)"[^>]*></path>|<path id="(?P<id2>[^"]+)"[^>]*/>')
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_HEAD_KEEP = re.compile(
    r'<link rel="stylesheet"[^>]*>|<style id="MJX-SVG-styles">.*?</style>'
    r"|<script>\s*\(function \(\) \{\s*document\.documentElement\.classList\.add\(\"math-drawing\"\).*?</script>",
    re.DOTALL,
)
# A chapter's toolbar (download, Colab) and the headings' pilcrows do not print.
_TOOLBAR = re.compile(r'<p class="nb-toolbar">.*?</p>', re.DOTALL)
_PERMALINK = re.compile(r'<a class="headerlink" href="#[^"]*" title="[^"]*">¶</a>')
_CLOSED = re.compile(r"<details(?![^>]*\bopen\b)")
# An interactive figure does not print (the chapter's static figures show
# the same): the book leaves it out, and its script and stylesheet.
_EXPLORABLE = re.compile(r'<figure class="explorable".*?</figure>', re.DOTALL)


def page_title(article: str) -> str:
    match = _H1.search(article)
    return html.unescape(_TAG.sub("", _PERMALINK.sub("", match[1]))).strip() if match else ""


def glyphs(page: str) -> dict[str, str]:
    """The glyph outlines of a page's formulas: MathJax keeps one copy of
    each in a hidden <svg> after the article, which every formula uses."""
    match = _CACHE.search(page)
    if not match:
        return {}
    return {m["id"] or m["id2"]: m[0] for m in _GLYPH.finditer(match[1])}


def _anchor(page_url: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "-", page_url.strip("/")).strip("-") or "home"


_ID = re.compile(r'\bid="([^"]*)"')
_HREF = re.compile(r'\b(href|for)="([^"]*)"')


def rehome(article: str, page_url: str, in_book: dict[str, str]) -> str:
    """``article`` of the page at ``page_url`` as a part of the book page,
    which sits next to it (``print/`` beside ``rope/``): its ids prefixed
    with the page's anchor, its links to itself and to other pages of the
    book turned into links inside the book (``in_book``: page URL ->
    anchor). Relative links elsewhere stay as they are."""
    anchor = in_book[page_url]
    article = _ID.sub(lambda m: f'id="{anchor}--{m[1]}"', article)  # (glyph ids sit outside)

    def link(m: re.Match) -> str:
        attr, target = m[1], m[2]
        if attr == "for":  # a copy button names its code block's id
            return f'for="{anchor}--{target}"'
        path, _, fragment = target.partition("#")
        if fragment.startswith("MJX-"):  # a glyph of the formulas' shared outlines
            return m[0]
        if not path:
            return f'href="#{anchor}--{fragment}"' if fragment else m[0]
        if re.match(r"^[a-z]+:|^/", path):
            return m[0]
        resolved = posixpath.normpath(posixpath.join(page_url, path))  # page URLs end in "/"
        resolved = "" if resolved == "." else resolved.strip("/") + "/"
        if resolved in in_book:
            target_anchor = in_book[resolved]
            return (
                f'href="#{target_anchor}--{fragment}"' if fragment else f'href="#{target_anchor}"'
            )
        return m[0]

    return _HREF.sub(link, article)


def book(lang: str, site_dir: Path, urls: list[str], site_name: str) -> str:
    """The book page of language ``lang``: its pages (site URLs) read from
    ``site_dir``, in order."""
    prefix = LANGUAGE_PREFIX.get(lang, "")
    pages = {url: (site_dir / url / "index.html").read_text(encoding="utf-8") for url in urls}
    head = []  # every stylesheet the pages link, the formulas' styles, the drawing script
    for page in pages.values():
        for m in _HEAD_KEEP.finditer(page[: page.find("</head>")]):
            if m[0] not in head and "explorables.css" not in m[0]:
                head.append(m[0])
    # the print stylesheet, for the screen too, next to the site's own
    site_css = next(re.search(r'href="([^"]*)site\.css"', h) for h in head if "site.css" in h)
    head.append(f'<link rel="stylesheet" href="{site_css[1]}print.css">')
    in_book = {url: _anchor(url.removeprefix(prefix)) for url in urls}
    chapters, contents, cache = [], [], {}
    for url, page in pages.items():
        match = _ARTICLE.search(page)
        if match is None:
            raise ValueError(f"{url}: no article in the built page")
        article = _PERMALINK.sub("", _TOOLBAR.sub("", match[1]))
        article = _CLOSED.sub("<details open", article)  # solutions print open
        article = _EXPLORABLE.sub("", article)
        title = page_title(article) or url
        contents.append(f'<li><a href="#{in_book[url]}">{html.escape(title)}</a></li>')
        chapters.append(
            f'<article class="md-content__inner md-typeset book-page" id="{in_book[url]}">'
            f"{rehome(article, url, in_book)}</article>"
        )
        cache.update(glyphs(page))
    text = TEXT.get(lang, TEXT["en"])
    return (
        f'<!doctype html>\n<html lang="{lang}" class="book">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">\n'
        f"<title>{html.escape(site_name)}</title>\n{chr(10).join(head)}\n"
        "</head>\n"
        '<body dir="ltr" data-md-color-scheme="default" data-md-color-primary="indigo" '
        'data-md-color-accent="indigo">\n<div class="md-container"><main class="md-main">'
        '<div class="md-main__inner md-grid"><div class="md-content">\n'
        '<section class="md-content__inner md-typeset book-cover">'
        f"<h1>{html.escape(site_name)}</h1><p>{text['note']}</p>"
        f'<nav class="book-contents"><h2>{text["contents"]}</h2><ol>{"".join(contents)}</ol></nav>'
        "</section>\n" + "\n".join(chapters) + "\n</div></div></main></div>\n"
        '<svg style="display: none;" id="MJX-SVG-global-cache"><defs>'
        + "".join(cache.values())
        + "</defs></svg>\n</body>\n</html>\n"
    )


@event_priority(-300)  # last: after the math is typeset (hooks/math.py) and the index split
def on_post_build(config, **kwargs):
    if not _building:
        return
    lang, site_name, urls = _building.pop()
    if not urls:
        return
    site_dir = Path(config.site_dir)
    prefix = LANGUAGE_PREFIX.get(lang, "")
    target = site_dir / prefix / BOOK_DIR / "index.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(book(lang, site_dir, urls, site_name), encoding="utf-8")
    log.info(f"wrote the book of {len(urls)} pages: {target.relative_to(site_dir)}")


def on_build_error(error, **kwargs):
    _building.clear()  # a failed build leaves its languages behind
