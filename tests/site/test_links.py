"""Every internal link of the built site resolves, anchors included, in both
languages; the checker itself is shown to catch broken links."""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

_HREF = re.compile(r'<a\b[^>]*\bhref="([^"]*)"', re.IGNORECASE)
_ID = re.compile(r'\bid="([^"]*)"')


@cache
def _ids(page: Path) -> frozenset[str]:
    return frozenset(html.unescape(i) for i in _ID.findall(page.read_text(encoding="utf-8")))


def broken_links(site: Path) -> list[str]:
    """``"page -> href (reason)"`` for each internal link that does not resolve."""
    _ids.cache_clear()
    problems = []
    for page in sorted(site.rglob("*.html")):
        base = "http://site/" + page.relative_to(site).as_posix()
        for href in _HREF.findall(page.read_text(encoding="utf-8")):
            href = html.unescape(href)
            url = urlparse(urljoin(base, href))
            if url.netloc != "site" or url.scheme not in ("http", "https"):
                continue  # another host, mailto:, javascript:
            path, fragment = urldefrag(
                unquote(url.path) + ("#" + url.fragment if url.fragment else "")
            )
            target = site / path.lstrip("/")
            if path.endswith("/") or target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site)} -> {href}"
            if not target.exists():
                problems.append(f"{where} (no such file)")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in _ids(target):
                problems.append(f"{where} (no anchor #{unquote(fragment)})")
    return problems


def test_every_internal_link_and_anchor_resolves(built_site):
    assert broken_links(built_site.path) == []


def test_the_checker_catches_broken_links_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a> <a href="a/#x">ok anchor</a> <a href="#top">ok self</a>'
        '<h1 id="top">t</h1> <a href="b/">missing page</a> <a href="a/#nope">missing anchor</a>'
        '<a href="https://example.org/">elsewhere</a> <a href="#波長">日本語</a><h2 id="波長">w</h2>',
        encoding="utf-8",
    )
    (tmp_path / "a" / "index.html").write_text('<p id="x">x</p>', encoding="utf-8")
    assert broken_links(tmp_path) == [
        "index.html -> b/ (no such file)",
        "index.html -> a/#nope (no anchor #nope)",
    ]
