"""MkDocs hook: no ``<link rel="alternate" hreflang>`` in a page's head.

Material turns every such link into a fetch of "sitemap.xml" next to the
linked page. mkdocs-static-i18n points those links at the page's twin,
where no sitemap exists: a 404 and a console error on every page. The
language switcher (``<a hreflang>`` in the header) and the sitemap
(``xhtml:link hreflang`` for every page) already link the twins.
"""

from __future__ import annotations

import re

_HEAD_ALTERNATE = re.compile(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">')


def on_post_page(output, page, config):
    head_end = output.find("</head>")
    return _HEAD_ALTERNATE.sub("", output[:head_end]) + output[head_end:]
