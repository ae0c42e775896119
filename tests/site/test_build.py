"""Checks on the strictly built site: every chapter in both languages,
rendered (never raw notebook JSON), offline, light, with working anchors."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLUGS = sorted(re.sub(r"^\d+-", "", p.stem) for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
LANG_PREFIX = {"en": "", "ja": "ja/"}
# Bytes of HTML as a static host serves it (gzip). A page carries its math
# typeset as SVG (hooks/math.py), several times the TeX's size before
# compression and less than the MathJax it replaces once compressed.
MAX_MEDIAN_NOTEBOOK_PAGE = 100_000
MAX_NOTEBOOK_CSS = 100_000  # the shared notebook stylesheet, purged (hooks/notebook_css.py)

_ASSET_TAG = re.compile(r"<(?:script|link|img|source|iframe|video|audio)\b[^>]*>", re.IGNORECASE)
_ASSET_URL = re.compile(r'\b(?:src|href|srcset)="([^"]+)"')


def _html_pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_there_are_chapters():
    assert SLUGS, "no executed notebooks found in notebooks/"


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_chapter_rendered_in_each_language(built_site, slug, lang):
    html = built_site.page(f"{LANG_PREFIX[lang]}{slug}/")
    assert f'<html lang="{lang}"' in html
    assert 'class="jp-Notebook' in html, "not rendered by mkdocs-jupyter"
    # Code is shared; the prose is that language's only.
    has_kana = re.search(r"[\u3040-\u30ff]", re.sub(r"<nav.*?</nav>", "", html, flags=re.S))
    article = html[html.find("<article") : html.find("</article>")]
    if lang == "ja":
        assert has_kana
    else:
        assert not re.search(r"[\u3040-\u30ff]", article), "Japanese prose on an English page"


def test_no_page_holds_raw_notebook_json(built_site):
    # mkdocs-static-i18n can silently copy a notebook's JSON to index.html.
    for page in _html_pages(built_site.path):
        text = page.read_text(encoding="utf-8")
        assert not text.lstrip().startswith("{"), f"{page}: raw notebook JSON"
        assert '"cell_type":' not in text and '"nbformat":' not in text, (
            f"{page}: notebook JSON inside"
        )


@pytest.mark.parametrize("slug", SLUGS)
def test_language_switcher_links_the_twin(built_site, slug):
    en, ja = built_site.page(f"{slug}/"), built_site.page(f"ja/{slug}/")
    assert re.search(rf'href="[^"]*/ja/{slug}/"[^>]*hreflang="ja"', en)
    assert re.search(rf'href="[^"]*/{slug}/"[^>]*hreflang="en"', ja)


def test_no_language_link_starts_at_the_server_root(built_site):
    # a link from "/" leaves the site when it is served under a sub-path; the
    # not-found page, served at any address, is the one that must use them
    for page in _html_pages(built_site.path):
        if page.name == "404.html":
            continue
        rooted = re.findall(r'<a href="/[^"]*" hreflang="[^"]*"', page.read_text(encoding="utf-8"))
        assert not rooted, f"{page.relative_to(built_site.path)}: {rooted}"


@pytest.mark.parametrize("slug", SLUGS)
def test_chapter_in_navigation(built_site, slug):
    home = built_site.page("")
    assert re.search(
        rf'class="md-nav__link"[^>]*href="{slug}/"|href="{slug}/"[^>]*class="md-nav__link', home
    )


def test_nothing_loads_from_other_hosts(built_site):
    for page in _html_pages(built_site.path):
        html = page.read_text(encoding="utf-8")
        for tag in _ASSET_TAG.findall(html):
            if 'rel="canonical"' in tag or 'rel="alternate"' in tag:
                continue  # links, not loads
            for url in _ASSET_URL.findall(tag):
                assert not urlparse(url).netloc, f"{page}: loads {url}"
        assert "cdnjs" not in html and "cdn.jsdelivr" not in html, f"{page}: CDN address"
    for css in built_site.path.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        remote = re.findall(r"(?:url\(|@import\s+)['\"]?(https?:)?//", text)
        assert not remote, f"{css}: loads a remote resource"


def gzipped(data: bytes) -> int:
    """Bytes of ``data`` as a static host sends it (gzip -6)."""
    return len(gzip.compress(data, compresslevel=6))


def test_notebook_pages_are_light(built_site):
    sizes = {}
    for slug in SLUGS:
        for prefix in LANG_PREFIX.values():
            sizes[f"{prefix}{slug}/"] = gzipped(built_site.page(f"{prefix}{slug}/").encode("utf-8"))
    median = statistics.median(sizes.values())
    print(f"notebook page sizes (bytes, gzip -6): {sizes}; median {median:.0f}")
    assert median <= MAX_MEDIAN_NOTEBOOK_PAGE, sizes
    for url in sizes:
        html = built_site.page(url)
        assert "data:image" not in html, f"{url}: inline figure"
        assert "<style" not in html[html.find("<article") :], f"{url}: inline CSS"


def _local_target(site: Path, page: Path, url: str) -> Path:
    path = urlparse(urljoin("http://x/" + page.relative_to(site).as_posix(), url)).path
    target = site / path.lstrip("/")
    return target / "index.html" if path.endswith("/") else target


def test_every_local_asset_exists(built_site):
    site = built_site.path
    for page in _html_pages(site):
        html = page.read_text(encoding="utf-8")
        for tag in _ASSET_TAG.findall(html):
            if "rel=" in tag and "stylesheet" not in tag and "icon" not in tag:
                continue
            for url in _ASSET_URL.findall(tag):
                if urlparse(url).netloc or url.startswith(("data:", "#")):
                    continue
                assert _local_target(site, page, url).exists(), f"{page}: missing {url}"
    font_css = (site / "assets/vendor/noto-sans-jp.css").read_text(encoding="utf-8")
    fonts = re.findall(r"url\(([^)]+)\)", font_css)
    assert len(fonts) > 100  # every unicode-range subset of two weights
    for name in fonts:
        assert (site / "assets/vendor" / name).exists(), name
    assert not (site / "assets/vendor/mathjax").exists(), "MathJax is not served any more"


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_headings_have_working_anchors(built_site, slug, lang):
    html = built_site.page(f"{LANG_PREFIX[lang]}{slug}/")
    article = html[html.find("<article") : html.find("</article>")]
    ids = re.findall(r'<h[1-6] id="([^"]*)"', article)
    assert ids and all(ids), "a heading without an id"
    assert len(ids) == len(set(ids)), "duplicate heading ids"
    assert not re.search(r"<h[1-6](?![^>]*\bid=)[^>]*>", article), "a heading without an id"
    toc = html[html.find('data-md-component="toc"') :]
    toc_links = re.findall(r'<a href="#([^"]*)" class="md-nav__link"', toc)
    assert toc_links, "empty table of contents"
    assert set(toc_links) <= set(ids), set(toc_links) - set(ids)
    assert "anchor-link" not in article  # Material's headerlink keeps "¶" out of search titles


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_download_link_gives_that_language_notebook(built_site, slug, lang):
    page_dir = built_site.path / f"{LANG_PREFIX[lang]}{slug}"
    html = (page_dir / "index.html").read_text(encoding="utf-8")
    name = re.search(r'<a class="md-button" href="([^"]+\.ipynb)" download(?:="")?>', html)[1]
    nb = json.loads((page_dir / name).read_text(encoding="utf-8"))
    prose = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert nb["metadata"]["language"] == lang
    assert bool(re.search(r"[\u3040-\u30ff]", prose)) == (lang == "ja")
    assert all("lang" not in c["metadata"] for c in nb["cells"])
    # it runs anywhere: it installs posenc first, links to the site, is not paired
    assert nb["cells"][0]["id"] == "install-posenc" and "jupytext" not in nb["metadata"]
    links = re.findall(r"\]\(([^)\s]+)", prose)
    assert links and not [u for u in links if not u.startswith(("http", "#"))], links
    # Colab opens this same file, on the branch the deploy job pushes it to
    colab = re.search(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)[1]
    assert colab.endswith(f"/{LANG_PREFIX[lang]}{slug}/{name}")


def test_search_index_has_both_languages_and_clean_titles(built_site):
    index = json.loads((built_site.path / "search/search_index.json").read_text(encoding="utf-8"))
    docs = index["docs"]
    for slug in SLUGS:
        assert any(d["location"].startswith(f"ja/{slug}/") for d in docs)
    ja_text = " ".join(d["text"] for d in docs if d["location"].startswith("ja/"))
    assert re.search(r"[\u3040-\u30ff]", ja_text)
    assert not [d["title"] for d in docs if "¶" in d["title"]]


def test_footer_and_changelog_show_the_package_version(built_site):
    import posenc

    assert f"posenc {posenc.__version__}" in built_site.page("")
    assert f"posenc {posenc.__version__}" in built_site.page("ja/")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(posenc.__version__)}\b", changelog, re.M)


def test_the_not_found_page_is_english_and_points_to_both_homes(built_site):
    """A static host serves the root's 404.html for a missing address in
    either language: the English build's page, which says it in both."""
    html = (built_site.path / "404.html").read_text(encoding="utf-8")
    assert re.search(r'<html lang="en"', html), html[:200]
    assert "404 - Not found" in html and 'lang="ja"' in html
    homes = re.findall(r'<a href="([^"]*)">(?:home page|日本語のトップページ)</a>', html)
    assert homes == [built_site.base_url, built_site.base_url + "ja/"], homes


# Japanese puts no space after or before 、 and 。. On a page, one shows up
# where a line break of the source was not joined (hooks/japanese_lines.py,
# join_cjk_lines) or where the source has a space. Whitespace next to a
# block (a paragraph edge, display math) is not visible and does not count.
_INLINE_TAG = r"(?:a|code|span|strong|em|b|i|sup|sub|kbd|mark|small)"
_HIDDEN = re.compile(r"<(pre|script|style|textarea)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_SPACE_AFTER = re.compile(rf"[。、][ \t\r\n]+(?=[^<\s$\\]|<{_INLINE_TAG}\b)")
_SPACE_BEFORE = re.compile(rf"(?:[^>\s$\]]|</{_INLINE_TAG}>)[ \t\r\n]+[。、]")


def _spaces_at_japanese_punctuation(html: str) -> list[str]:
    body = _HIDDEN.sub("", html)
    hits = [*_SPACE_AFTER.finditer(body), *_SPACE_BEFORE.finditer(body)]
    return [body[max(m.start() - 20, 0) : m.end() + 20] for m in hits]


def test_the_punctuation_checker_sees_visible_spaces_only():
    seen = _spaces_at_japanese_punctuation
    assert seen("<p>与えます。\nPress、Smith</p>") and seen("<p>し、 <code>x</code></p>")
    assert seen("<p><em>距離</em> 。</p>") and seen("<p>値 、次</p>")
    assert not seen("<p>与えます。Press、Smith</p><p>次。</p>\n<p>段落</p>")
    assert not seen("<p>次の式です。\n$$x = 1$$\n。</p><pre>a。 b</pre>")


def test_no_space_after_or_before_japanese_punctuation(built_site):
    problems = {
        str(page.relative_to(built_site.path)): hits
        for page in sorted((built_site.path / "ja").rglob("index.html"))
        if (hits := _spaces_at_japanese_punctuation(page.read_text(encoding="utf-8")))
    }
    assert not problems, "spaces at 。 or 、 on Japanese pages:\n" + "\n".join(
        f"{page}: {len(hits)}, e.g. {hits[0]!r}" for page, hits in problems.items()
    )


# --------------------------------------------------------------------------
# Math typeset at build time, lighter first visits (hooks/math.py,
# hooks/search.py, hooks/notebook_css.py, docs/overrides/main.html)

_NOT_PROSE = re.compile(
    r"<(pre|code|script|style|mjx-container|textarea)\b.*?</\1>|<[^>]+>", re.DOTALL | re.IGNORECASE
)
_RAW_MATH = re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\[|\\begin\{")


def _prose(html: str) -> str:
    article = html[html.find("<article") : html.find("</article>")]
    return _NOT_PROSE.sub(" ", article)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_math_is_typeset_at_build_time(built_site, lang):
    pages = [f"{LANG_PREFIX[lang]}{slug}/" for slug in SLUGS]
    pages += [f"{LANG_PREFIX[lang]}glossary/", f"{LANG_PREFIX[lang]}notation/"]
    for url in pages:
        html = built_site.page(url)
        assert html.count("<mjx-container") >= 5, f"{url}: math not typeset"
        article = html[html.find("<article") : html.find("</article>")]
        assert "data-mjx-error" not in article, f"{url}: TeX error"
        # an undrawn formula's MathML waits in a <noscript> (hooks/typeset_math.js)
        mathml = html.count("<mjx-assistive-mml") + html.count("<noscript><math")
        assert mathml == html.count("<mjx-container"), (
            f"{url}: a formula without the MathML that screen readers read"
        )
        raw = _RAW_MATH.findall(_prose(html))
        assert raw == [], f"{url}: untypeset math {raw[:3]}"
    for page in _html_pages(built_site.path):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]*mathjax", html, re.I), f"{page}: loads MathJax"


def test_the_raw_math_check_sees_raw_math():
    assert _RAW_MATH.findall(_prose("<article><p>a $p$ and \\(x\\)</p></article>"))
    assert not _RAW_MATH.findall(
        _prose("<article><p>costs $5</p><pre>$x$</pre><mjx-container>$</mjx-container></article>")
    )


def test_japanese_webfont_only_on_japanese_pages(built_site):
    for page in _html_pages(built_site.path):
        html = page.read_text(encoding="utf-8")
        lang = re.search(r'<html lang="([a-z]+)"', html)
        if lang is None:
            continue  # a redirect stub
        links_font = "noto-sans-jp.css" in html
        assert links_font == (lang[1] == "ja"), f"{page}: lang {lang[1]}, font linked {links_font}"
        assert ("noto-sans-jp-label.css" in html) == (lang[1] != "ja"), page
    label = (built_site.path / "assets/vendor/noto-sans-jp-label.css").read_text(encoding="utf-8")
    ranges = re.findall(r"unicode-range:\s*([^;]+);", label)
    assert sorted(",".join(ranges).split(",")) == ["U+65e5", "U+672c", "U+8a9e"]  # 日, 本, 語


def test_one_search_index_per_language(built_site):
    folder = built_site.path / "search"
    en = json.loads((folder / "search_index.en.json").read_text(encoding="utf-8"))
    ja = json.loads((folder / "search_index.ja.json").read_text(encoding="utf-8"))
    assert en["docs"] and all(not d["location"].startswith("ja/") for d in en["docs"])
    assert ja["docs"] and all(d["location"].startswith("ja/") for d in ja["docs"])
    for slug in SLUGS:
        assert any(d["location"].startswith(f"{slug}/") for d in en["docs"]), slug
        assert any(d["location"].startswith(f"ja/{slug}/") for d in ja["docs"]), slug
    # Japanese is cut into words at build time (hooks/search.py), not by lunr
    assert en["config"] == ja["config"] and en["config"]["lang"] == ["en"]
    assert r"\u200b" in en["config"]["separator"]  # the break between two words
    # every page asks for it on demand, before Material's bundle does
    for url in ("", f"{SLUGS[0]}/", f"ja/{SLUGS[0]}/"):
        html = built_site.page(url)
        assert html.find("search-lazy.js") < html.find("assets/javascripts/bundle."), url


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_drawing_script_is_inline_in_the_head_of_every_chapter(built_site, lang):
    """What a chapter ships undrawn is drawn by a script in the page itself
    (docs/overrides/partials/deferred.html), in the head: one that failed to
    load would leave formulas blank."""
    for slug in SLUGS:
        html = built_site.page(f"{LANG_PREFIX[lang]}{slug}/")
        head = html[: html.find("</head>")]
        assert "data-svg" in html and "data-html" in html, slug  # something to draw
        script = re.search(r"<script>\s*\(function \(\) \{.*?</script>", head, re.DOTALL)
        assert script and "mjx-container[data-svg], pre[data-html]" in script[0], slug
        assert "{%" not in script[0] and "deferred.js" not in html, slug


def test_notebook_stylesheet_keeps_what_the_pages_use(built_site):
    sheets = list((built_site.path / "assets/notebook").glob("*.css"))
    assert len(sheets) == 1, sheets  # one file, shared by every notebook page
    css = sheets[0].read_text(encoding="utf-8")
    assert len(css.encode()) <= MAX_NOTEBOOK_CSS, len(css.encode())
    for rule in (
        ".jupyter-wrapper .jp-InputPrompt",
        ".highlight-ipynb .k",
        ".jp-OutputArea-output",
    ):
        assert rule in css, rule
    assert "jp-FileBrowser" not in css and "jp-Terminal" not in css
