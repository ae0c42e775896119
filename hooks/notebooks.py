"""MkDocs hook: repairs of the pages rendered from the per-language notebooks.

hooks/language.py splits each bilingual notebook into one notebook per
language (docs/slug.ipynb, docs/slug.ja.ipynb); mkdocs-jupyter renders
each as a page. This hook repairs what mkdocs-jupyter leaves behind on
each notebook page (every fix is checked by tests/site/):

- headings: unicode ids (nbconvert gives Japanese headings an empty id),
  the table of contents pointed at them, and Material's ``headerlink``
  class on the pilcrow so search titles carry no stray "¶";
- page weight: the ~600 KB of JupyterLab CSS inlined into every page and
  the clipboard script move to one shared, cached file each; figures
  inlined as base64 become PNG files named by their content hash
  (identical in both languages, so stored and downloaded once); the
  colouring of code past the first cells is drawn when needed;
- nbconvert's MathJax loader (a CDN address) is dropped: the math is
  typeset at build time (hooks/math.py);
- accessibility: each figure gets its cell's alternative text in the
  page's language, and scrolling code blocks become keyboard-reachable.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import posixpath
import re
import struct
from pathlib import Path

import mkdocs.utils
from pymdownx.slugs import slugify

SHARED_DIR = "assets/notebook"  # shared CSS/JS of notebook pages, relative to site/
FIGURE_DIR = "assets/figures"

_slugify = slugify(case="lower")
log = logging.getLogger("mkdocs.hooks.notebooks")  # a warning fails a strict build

# mkdocs-static-i18n rebuilds every file as a plain mkdocs File, which drops
# mkdocs-jupyter's wrapper: a notebook would then be copied verbatim, raw JSON
# as index.html, and `--strict` would still pass. Registering .ipynb as a
# documentation extension keeps notebooks pages; mkdocs-jupyter still renders
# them. tests/site/test_build.py fails if a page holds notebook JSON.
if ".ipynb" not in mkdocs.utils.markdown_extensions:
    mkdocs.utils.markdown_extensions = (*mkdocs.utils.markdown_extensions, ".ipynb")


# --------------------------------------------------------------------------
# Repairs of the rendered notebook pages


def _is_notebook(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


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
# cell's own div for code, on its rendered-Markdown div for prose.
SOLUTION_LABEL = {"en": "Solution", "ja": "解答"}
_CELL_START = re.compile(r'<div (?:id="[^"]*" )?class="jp-Cell ')
_DIV_TAG = re.compile(r"<div\b|</div>")
_SOLUTION_CLASS = re.compile(r'class="[^"]*\bcelltag_solution\b')
# mkdocs-jupyter shows a code cell's tags as chips above its code: authoring
# metadata, which the fold already says.
_TAG_CHIPS = re.compile(
    r'<div class="celltoolbar">\s*(?:<div class="button_container tags_button_container">'
    r".*?</div>\s*)*</div>\s*",
    re.DOTALL,
)
_PROSE_START = re.compile(r'<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>\s*')


def _div_end(html_text: str, start: int) -> int:
    """Index just past the ``</div>`` that closes the ``<div`` at ``start``."""
    depth = 0
    for m in _DIV_TAG.finditer(html_text, start):
        depth += 1 if m[0] == "<div" else -1
        if depth == 0:
            return m.end()
    raise ValueError(f"unbalanced <div> at offset {start}")


def _cells(html_text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level notebook cell, in order."""
    cells, pos = [], 0
    while (m := _CELL_START.search(html_text, pos)) is not None:
        end = _div_end(html_text, m.start())
        cells.append((m.start(), end))
        pos = end
    return cells


def fold_solutions(content: str, lang: str, where: str = "page") -> str:
    """Fold each worked solution into a collapsed ``<details class="solution">``.

    A fold starts at each tagged prose cell that opens with
    ``<strong>Solution N.</strong>`` (the label is moved into the
    ``<summary>``) and takes the tagged cells after it, up to the next such
    opening or the first untagged cell. Tagged cells before any opening are
    left as they are, with a warning (a strict build fails on it).
    """
    label = SOLUTION_LABEL[lang]
    opening = re.compile(
        rf"<p>\s*<strong>\s*{re.escape(label)}\s*(?P<n>[0-9A-Za-z]+)\s*[.．。:：]?\s*</strong>\s*"
    )
    pieces, pos, current = [], 0, None  # current: the open fold's number
    for start, end in _cells(content):
        cell = content[start:end]
        open_tag = cell[: cell.find(">") + 1]
        prose = _PROSE_START.search(cell) if "jp-MarkdownCell" in open_tag else None
        tagged = _SOLUTION_CLASS.search(prose[0] if prose else open_tag) is not None
        first = opening.match(cell, prose.end()) if (tagged and prose) else None
        pieces.append(content[pos:start])
        if current is not None and (not tagged or first is not None):
            pieces.append("</details>")
            current = None
        if first is not None:
            current = first["n"]
            pieces.append(f'<details class="solution"><summary>{label} {current}</summary>')
            cell = cell[: first.start()] + "<p>" + cell[first.end() :]
        elif tagged and current is None:
            log.warning(
                f"{where}: a cell tagged 'solution' comes before any opening "
                f"'**{label} N.**': start each solution with a prose cell that opens with it"
            )
        pieces.append(_TAG_CHIPS.sub("", cell) if current is not None else cell)
        pos = end
    pieces.append(content[pos:] if current is None else "</details>" + content[pos:])
    return "".join(pieces)


def on_page_content(content, page, config, files):
    if not _is_notebook(page):
        return content
    content, headings = fix_headings(content)
    fix_toc(page.toc, headings)
    lang = config.theme["language"]  # mkdocs-static-i18n sets it for each language's build
    content = fold_solutions(content, lang, page.file.src_uri)
    # on_post_page needs the figures' texts
    page.notebook_metadata = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))[
        "metadata"
    ]
    return content


_STYLE = re.compile(r"<style[^>]*>(?P<css>.*?)</style>", re.DOTALL)
_INLINE_SCRIPT = re.compile(r"<script>(?P<js>(?:(?!</script>).)*?)</script>", re.DOTALL)
# nbconvert's MathJax 2 loader and its Mermaid loader both point at a CDN;
# the site typesets its math at build time, and the notebooks draw no Mermaid
# diagrams.
_CDN_LOADERS = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->"
    r"|<script type=\"module\">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*?</script>",
    re.DOTALL,
)
_DATA_IMG = re.compile(
    r'<img (?P<before>[^>]*?)src="data:image/png;base64,(?P<data>[^"]+)"(?P<after>[^>]*)>'
)


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


_SIZE_ATTR = re.compile(r'\s*\b(width|height)="?(\d+)"?')


def _png_size(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _relative(page, target: str) -> str:
    """URL of site-relative ``target`` as seen from ``page``."""
    return posixpath.relpath(target, posixpath.dirname("/" + page.url + "x")[1:] or ".")


def _store(site_dir: Path, rel: str, data: bytes) -> None:
    path = site_dir / rel
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _hashed_name(data: bytes, suffix: str) -> str:
    return hashlib.sha256(data).hexdigest()[:16] + suffix


def externalise(output: str, page, site_dir: Path, alts: list[str | None] = ()) -> str:
    """Lighten a notebook page: inline CSS, the clipboard script and PNG
    figures move to shared files; dead markup goes. The figures, in order,
    get the alternative texts ``alts``."""
    start, end = output.find("<article"), output.find("</article>")
    if start < 0 or end < 0:
        return output
    head, body, tail = output[:start], output[start:end], output[end:]

    body = _CDN_LOADERS.sub("", body)

    css = "\n".join(m["css"] for m in _STYLE.finditer(body))
    body = _STYLE.sub("", body)
    links = ""
    if css.strip():
        data = css.encode("utf-8")
        rel = f"{SHARED_DIR}/{_hashed_name(data, '.css')}"
        _store(site_dir, rel, data)
        links += f'<link rel="stylesheet" href="{_relative(page, rel)}">'

    def script(m: re.Match) -> str:
        if "clipboard" not in m["js"]:
            return m.group(0)
        data = m["js"].encode("utf-8")
        rel = f"{SHARED_DIR}/{_hashed_name(data, '.js')}"
        _store(site_dir, rel, data)
        return f'<script src="{_relative(page, rel)}"></script>'

    body = _INLINE_SCRIPT.sub(script, body)

    figures = iter(alts)

    def figure(m: re.Match) -> str:
        data = base64.b64decode(m["data"])
        rel = f"{FIGURE_DIR}/{_hashed_name(data, '.png')}"
        _store(site_dir, rel, data)
        # A figure stored at twice its size for sharp high-density screens
        # (IPython's "retina" format) carries its display size, which
        # nbconvert writes as width=/height=; otherwise the PNG's own size.
        attrs = f"{m['before']}{m['after']}"
        shown = dict(_SIZE_ATTR.findall(attrs))
        width, height = _png_size(data)
        if "width" in shown and "height" in shown:
            width, height = shown["width"], shown["height"]
        elif "width" in shown:  # keep the PNG's aspect ratio
            width, height = shown["width"], round(height * int(shown["width"]) / width)
        attrs = _SIZE_ATTR.sub("", attrs)
        # nbconvert's placeholder alt says nothing; the cell's own text replaces it
        attrs = re.sub(r'\s*alt="[^"]*"', "", attrs).strip()
        attrs = attrs.removesuffix("/").strip()  # nbconvert closes <img ... />; we add attributes
        attrs += f' alt="{html.escape(next(figures, None) or "", quote=True)}"'
        return (
            f'<img src="{_relative(page, rel)}" width="{width}" height="{height}" '
            f'loading="lazy" decoding="async" {attrs.strip()}>'
        )

    body = _DATA_IMG.sub(figure, body)
    body = _PLAIN_TOKEN.sub(lambda m: m[1] if m[1] is not None else m[2], body)
    body = _COPY_TEXT.sub(r'\1 id="\3"\2', body)
    # mkdocs-jupyter's copy button carries a stray `,=""` attribute (an HTML
    # parse error, and MathJax's build-time parser stops at it)
    body = body.replace('<clipboard-copy ,="" ', "<clipboard-copy ")
    # code that scrolls sideways must be reachable with the keyboard
    body = body.replace('<div class="highlight-ipynb', '<div tabindex="0" class="highlight-ipynb')
    body = _share_copy_icon(body)
    body = defer_colouring(body)
    head = head.replace("</head>", links + "</head>", 1)
    return head + body + tail


# Material turns every <link rel="alternate" hreflang> in a page's head into
# a fetch of "sitemap.xml" next to the linked page. mkdocs-static-i18n points
# those links at the page's twin, where no sitemap exists: a 404 and a console
# error on every page. The language switcher (<a hreflang> in the header) and
# the sitemap (xhtml:link hreflang for every page) already link the twins.
_HEAD_ALTERNATE = re.compile(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">')


def on_post_page(output, page, config):
    head_end = output.find("</head>")
    output = _HEAD_ALTERNATE.sub("", output[:head_end]) + output[head_end:]
    if not _is_notebook(page):
        return output
    alts = page.notebook_metadata.get("figure_alt", [])
    return externalise(output, page, Path(config.site_dir), alts)
