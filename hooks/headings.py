"""MkDocs hook: the headings of a notebook page, and its table of contents.

nbconvert gives a Japanese heading an empty id and marks every heading
with its own pilcrow link; mkdocs-jupyter builds the table of contents
from the notebook's Markdown, with its own ids and without the code spans
of a title. On each notebook page this hook gives every heading a unicode
id (as the toc extension slugifies the Markdown pages), Material's
``headerlink`` pilcrow (so search titles carry no stray "¶"), and points
the table of contents at those ids with the headings' full text.
tests/site/test_build.py checks every anchor of the built pages.
"""

from __future__ import annotations

import html
import re

from pymdownx.slugs import slugify

_slugify = slugify(case="lower")

_HEADING = re.compile(r"<h([1-6])(?P<attrs>[^>]*)>(?P<inner>.*?)</h\1>", re.DOTALL)
_ANCHOR = re.compile(r'<a class="anchor-link" href="#[^"]*">.*?</a>', re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment)).strip()


def fix_headings(content: str) -> tuple[str, list[tuple[int, str, str]]]:
    """Give every heading a unicode id and a Material-style permalink.

    Returns the new HTML and ``(level, heading text, id)`` in document order.
    """
    used: set[str] = set()
    found: list[tuple[int, str, str]] = []

    def unique(base: str) -> str:
        base = base or "section"
        candidate, n = base, 1
        while candidate in used:
            candidate, n = f"{base}_{n}", n + 1
        used.add(candidate)
        return candidate

    def repl(m: re.Match) -> str:
        level, inner = m.group(1), _ANCHOR.sub("", m["inner"])
        text = _text(inner)
        hid = unique(_slugify(text, "-"))
        found.append((int(level), text, hid))
        attrs = re.sub(r'\s*id="[^"]*"', "", m["attrs"])
        link = f'<a class="headerlink" href="#{hid}" title="Permanent link">¶</a>'
        return f'<h{level} id="{hid}"{attrs}>{inner}{link}</h{level}>'

    return _HEADING.sub(repl, content), found


def fix_toc(toc, headings: list[tuple[int, str, str]]) -> None:
    """Point the table of contents at the ids given by :func:`fix_headings`.

    Entries and headings come in the same document order (the table may
    skip deep levels). An entry takes the next heading with its text, or,
    when its title lost part of the heading (mkdocs-jupyter drops code spans
    from titles), the next heading of its level; it also takes that
    heading's full text as its title.
    """
    start = 0

    def walk(items):
        nonlocal start
        for item in items:
            title = _text(item.title)
            rest = list(enumerate(headings))[start:]
            match = next((k for k, (_, text, _) in rest if text == title), None)
            if match is None:
                match = next((k for k, (level, _, _) in rest if level == item.level), None)
            if match is not None:
                _, text, item.id = headings[match]
                item.title = html.escape(text)
                start = match + 1
            walk(item.children)

    walk(toc)


# Folded solutions (CONTRIBUTING.md): a run of cells tagged "solution"
# starts with a prose cell whose first words are **Solution N.** / **解答 N.**
# nbconvert marks a tagged cell with the class celltag_solution: on the


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    content, headings = fix_headings(content)
    fix_toc(page.toc, headings)
    return content
