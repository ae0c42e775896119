"""MkDocs hook: Japanese text without the spaces its line breaks would make.

Markdown joins the lines of a paragraph with a space. Japanese puts no
space between words, nor after or before its punctuation (、。「」（）：),
so a line break there would show as a stray gap: join such lines
directly, dropping the next line's indentation (a list item's
continuation). A break between a Japanese word and a Latin word, a digit,
math or code stays: it renders as the half-width space the house style
puts there. Fenced code, a line that opens a block (list item, heading,
quote, table row, fence, display math, HTML tag, blank line) and the end
of a heading or table row are left alone.

The language split (hooks/language.py) joins the Japanese cells of the
chapters; this hook joins the hand-written Japanese pages (docs/*.ja.md);
tools/lint_ja.py applies the same join before linting, so the lint sees
the text as rendered.
"""

from __future__ import annotations

import re

_CJK = "\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff01-\uff60"
_CJK_PUNCT = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
_NO_BLOCK = r"(?![ \t]*(?:[-*+][ \t]|\d+[.)][ \t]|[#>|\n]|```|~~~|\$\$|<(?!https?:)[A-Za-z/!]))"
JOINABLE_BREAK = re.compile(
    r"(?P<fence>^[ \t]*(?P<mark>```|~~~).*?^[ \t]*(?P=mark)[ \t]*$)"
    rf"|(?<=[{_CJK}])\n{_NO_BLOCK}[ \t]*(?=[{_CJK}])"
    rf"|(?<=[{_CJK_PUNCT}])\n{_NO_BLOCK}[ \t]*(?=\S)"
    rf"|(?<=\S)\n{_NO_BLOCK}[ \t]*(?=[{_CJK_PUNCT}])",
    re.MULTILINE | re.DOTALL,
)


def join_break(m: re.Match) -> str:
    """The replacement of a match of :data:`JOINABLE_BREAK`: nothing, unless
    it is fenced code or the end of a heading or table row."""
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    if m["fence"] is not None or m.string[line_start : m.start()].lstrip().startswith(("#", "|")):
        return m[0]
    return ""


def join_cjk_lines(markdown: str) -> str:
    """Remove the line breaks that would render as a space Japanese does not have.

    That is a break between two Japanese characters, or after or before
    Japanese punctuation, whatever is on the other side.
    """
    return JOINABLE_BREAK.sub(join_break, markdown)


def on_page_markdown(markdown, page, config, files):
    return join_cjk_lines(markdown) if page.file.src_uri.endswith(".ja.md") else markdown
