"""MkDocs hook: a name of posenc's API in a chapter's prose links to its
entry in the generated reference.

The chapters write API names as inline code (`apply_rope`,
`posenc.RotaryEmbedding`, `RotaryEmbedding.reserve`, a call such as
`rope_frequencies(d)`); this hook turns each
such mention into a link to the reference page that documents the name
(docs/api/*.md, one ``::: posenc.name`` directive per entry, written by
hooks/api_reference.py), so no chapter spells out a reference URL and none
can go stale. Code cells, outputs, headings and text that is already a link
are left alone. The link checker of the site tests (tests/site/test_links.py)
checks every anchor made here.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.utils import get_relative_url

DIRECTIVE = re.compile(r"^::: posenc\.(\w+)\s*$", re.MULTILINE)
# Regions that keep their text: links, headings, code blocks and outputs
# (hooks/repo_links.py leaves the same ones alone); and the inline code that
# may be a name.
KEPT_REGIONS = r"<a\b.*?</a>|<h([1-6])\b.*?</h\1>|<pre\b.*?</pre>"
_REGION = re.compile(
    KEPT_REGIONS
    + r"|<code>(?:posenc\.)?(?P<name>[A-Za-z_]\w*)(?P<member>\.[A-Za-z_]\w*)?"
    # a call is a mention too, `rope_frequencies(d)`, when the span is that one
    # call (arguments nested one level deep at most), not an expression using it
    + r"(?:\((?:[^()<]|\([^()<]*\))*\))?</code>",
    re.DOTALL,
)

_entries: dict[str, str] = {}  # public name -> reference page, e.g. "api/rope/"


def reference_entries(docs_dir: Path) -> dict[str, str]:
    """Each name with a ``::: posenc.name`` directive -> the URL of its page."""
    found = {}
    for page in sorted((docs_dir / "api").glob("*.md")):
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found[name] = f"api/{page.stem}/"
    return found


def link_api_names(html: str, page_url: str, entries: dict[str, str], lang_prefix: str) -> str:
    """``html`` with each inline-code API name outside links, headings and
    code blocks turned into a link to its reference entry (``page_url`` is
    the site-relative URL of the page, ``lang_prefix`` "" or "ja/")."""

    def link(m: re.Match) -> str:
        name = m["name"]
        if name is None or name not in entries:
            return m[0]
        target = get_relative_url(lang_prefix + entries[name], page_url)
        # a member (RotaryEmbedding.reserve) links to its class: the reference
        # lists only members that have a docstring
        return f'<a class="api-link" href="{target}#posenc.{name}">{m[0]}</a>'

    return _REGION.sub(link, html)


def on_pre_build(config, **kwargs):
    # after hooks/api_reference.py (listed before this hook) wrote the pages
    _entries.clear()
    _entries.update(reference_entries(Path(config.docs_dir)))


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    prefix = "" if config.theme["language"] == "en" else f"{config.theme['language']}/"
    return link_api_names(content, page.url, _entries, prefix)
