"""MkDocs hook: lighter code blocks on the notebook pages.

mkdocs-jupyter's code cells carry far more markup than their code: a span
per token, a hidden copy of the code for the copy button, the same icon
in every button. On each notebook page this hook unwraps the tokens that
get no colour, lets the copy button read the highlighted code itself,
draws the icon once, makes scrolling code reachable with the keyboard,
and ships the colouring of the code past the first blocks aside, to be
drawn when needed (:func:`defer_colouring`).
"""

from __future__ import annotations

import re

# Pygments wraps every name, space, punctuation mark and attribute dot in a
# span. Names and spaces get no colour from the notebook CSS; punctuation
# and the dot are drawn in the text colour here, as most code viewers do.
# Unwrapped, they weigh nothing (the spans were a third of a chapter's HTML).
_PLAIN_TOKEN = re.compile(r'<span class="(?:n|w|p)">([^<]*)</span>|<span class="o">(\.)</span>')
# mkdocs-jupyter keeps a hidden plain-text copy of each cell's code for its
# copy button; the button copies the text of the element its `for` names,
# and the highlighted <pre> holds the same text.
_COPY_TEXT = re.compile(
    r'(<div class="highlight-ipynb[^"]*"><pre)(>.*?</pre></div>)\s*'
    r'<div class="clipboard-copy-txt" id="(cell-\d+)">.*?</div>',
    re.DOTALL,
)
# A code cell's colouring is an element per token (about 1,500 a chapter),
# which the browser makes as it reads the page although the cell sits in a
# block it skips until it nears the screen (docs/stylesheets/site.css). Past
# a page's first COLOURED_CELLS code blocks (at most two start on a
# 1280 x 1600 screen), a block's <pre> ships its code as plain text and its
# coloured markup in data-html, which the page's script
# (docs/overrides/partials/deferred.html) puts in place when the block nears
# the screen, when a folded solution opens, when the browser is idle after
# loading, or before printing. Without JavaScript that code shows uncoloured.
COLOURED_CELLS = 3
_CODE = re.compile(r'(<div [^>]*class="highlight-ipynb[^"]*"><pre[^>]*)>(.*?)</pre>', re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SPAN_CLASS = re.compile(r'<span class="([\w-]+)">')


def defer_colouring(body: str, coloured: int = COLOURED_CELLS) -> str:
    """``body`` with the code blocks past the first ``coloured`` uncoloured,
    their coloured markup in ``data-html``. The spans' class names go
    unquoted (they need no quotes), which leaves only the code's own quotes
    to escape in the value."""
    blocks = 0

    def plain(m: re.Match) -> str:
        nonlocal blocks
        blocks += 1
        start, markup = m.groups()
        if blocks <= coloured or "<" not in markup:
            return m[0]
        kept = _SPAN_CLASS.sub(r"<span class=\1>", markup)
        kept = kept.replace("&", "&amp;").replace('"', "&quot;")
        return f'{start} data-html="{kept}">{_TAG.sub("", markup)}</pre>'

    return _CODE.sub(plain, body)


# mkdocs-jupyter repeats the same copy-button icon in every code cell; one
# <symbol> per page and a <use> per button draw the same.
_COPY_ICON = re.compile(
    r'<svg aria-hidden="true" class="clipboard-copy-icon"[^>]*>(?P<paths>.*?)</svg>', re.DOTALL
)
_COPY_SYMBOL_ID = "nb-copy-icon"


def _share_copy_icon(body: str) -> str:
    first = _COPY_ICON.search(body)
    if first is None:
        return body
    symbol = (
        '<svg aria-hidden="true" style="display:none">'
        f'<symbol id="{_COPY_SYMBOL_ID}" viewBox="0 0 16 16">{first["paths"]}</symbol></svg>'
    )
    use = (
        '<svg aria-hidden="true" class="clipboard-copy-icon" width="20" height="20" '
        f'viewBox="0 0 16 16"><use href="#{_COPY_SYMBOL_ID}"></use></svg>'
    )
    body = _COPY_ICON.sub(use, body)
    at = body.find(">") + 1  # right inside <article ...>
    return body[:at] + symbol + body[at:]


def lighten(body: str) -> str:
    """The notebook page's ``<article>...`` HTML ``body`` with its code blocks lightened."""
    body = _PLAIN_TOKEN.sub(lambda m: m[1] if m[1] is not None else m[2], body)
    body = _COPY_TEXT.sub(r'\1 id="\3"\2', body)
    # mkdocs-jupyter's copy button carries a stray `,=""` attribute (an HTML
    # parse error, and MathJax's build-time parser stops at it)
    body = body.replace('<clipboard-copy ,="" ', "<clipboard-copy ")
    # code that scrolls sideways must be reachable with the keyboard
    body = body.replace('<div class="highlight-ipynb', '<div tabindex="0" class="highlight-ipynb')
    body = _share_copy_icon(body)
    return defer_colouring(body)


def on_post_page(output, page, config):
    start, end = output.find("<article"), output.find("</article>")
    if not page.file.src_uri.endswith(".ipynb") or start < 0 or end < 0:
        return output
    return output[:start] + lighten(output[start:end]) + output[end:]
