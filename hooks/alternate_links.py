"""MkDocs hook: language links that work wherever the site is served.

- No ``<link rel="alternate" hreflang>`` in a page's head. Material turns
  every such link into a fetch of "sitemap.xml" next to the linked page.
  mkdocs-static-i18n points those links at the page's twin, where no
  sitemap exists: a 404 and a console error on every page. The language
  switcher (``<a hreflang>`` in the header) and the sitemap
  (``xhtml:link hreflang`` for every page) already link the twins.
- The switcher's links relative to the page. mkdocs-static-i18n writes
  the home pages' switcher links from the server's root (``/``,
  ``/ja/``), which leads off the site when it is served under a sub-path
  (a project's pages, a folder opened from disk); other pages' links are
  already relative.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

_HEAD_ALTERNATE = re.compile(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">')
_SWITCHER = re.compile(r'<a href="(/[^"]*)" hreflang="')


def relative_link(href: str, page_url: str, site_path: str) -> str:
    """``href``, a path from the server's root under ``site_path``, as seen
    from the page at site-relative ``page_url`` (``""``, ``"ja/"``)."""
    if not href.startswith(site_path):
        return href
    target = href[len(site_path) :]
    link = posixpath.relpath(target or ".", page_url or ".")
    if link == ".":
        return "./"
    return link + "/" if href.endswith("/") else link


def on_post_page(output, page, config):
    head_end = output.find("</head>")
    output = _HEAD_ALTERNATE.sub("", output[:head_end]) + output[head_end:]
    site_path = urlsplit(config.site_url or "/").path or "/"
    site_path = site_path if site_path.endswith("/") else site_path + "/"
    return _SWITCHER.sub(
        lambda m: f'<a href="{relative_link(m[1], page.url, site_path)}" hreflang="', output
    )
