"""MkDocs hook: runs of tagged cells fold into a collapsed ``<details>``.

A fold is a run of cells that carry one tag (in the notebook's cell
metadata) and starts with a prose cell whose first words are its label in
bold, with or without a number: ``**Solution 2.**`` / ``**解答 2.**``. On
the page the run becomes ``<details class="TAG">`` whose summary is the
label ("Solution 2"), taken out of the prose; the tag chips that
mkdocs-jupyter shows above tagged code go, since the fold says the same.
A tagged cell before any opening is left as it is, with a warning (which
fails a strict build).

Each kind of fold is one :class:`Fold` in :data:`FOLDS`; today there is one,
the worked solutions of the exercises (CONTRIBUTING.md, "Solutions").
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Fold:
    tag: str  # the cell tag, and the class of the <details>
    label: dict[str, str]  # language -> the bold word that opens a fold


SOLUTIONS = Fold("solution", {"en": "Solution", "ja": "解答"})
FOLDS = (SOLUTIONS,)

log = logging.getLogger("mkdocs.hooks.folding")  # a warning fails a strict build

# nbconvert marks a tagged cell with the class celltag_TAG: on the cell's
# own div for code, on its rendered-Markdown div for prose.
_CELL_START = re.compile(r'<div (?:id="[^"]*" )?class="jp-Cell ')
_DIV_TAG = re.compile(r"<div\b|</div>")
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


def fold(content: str, kind: Fold, lang: str, where: str = "page") -> str:
    """Fold each run of cells tagged ``kind.tag`` into a collapsed ``<details>``.

    A fold starts at each tagged prose cell that opens with
    ``<strong>Label N.</strong>`` (the label, with its number if any, moves
    into the ``<summary>``) and takes the tagged cells after it, up to the
    next such opening or the first untagged cell.
    """
    label = kind.label[lang]
    opening = re.compile(
        rf"<p>\s*<strong>\s*(?P<label>{re.escape(label)}(?:\s*[0-9A-Za-z]+)??)"
        r"\s*[.．。:：]?\s*</strong>\s*"
    )
    tagged_class = re.compile(rf'class="[^"]*\bcelltag_{re.escape(kind.tag)}\b')
    pieces, pos, open_fold = [], 0, False
    for start, end in _cells(content):
        cell = content[start:end]
        open_tag = cell[: cell.find(">") + 1]
        prose = _PROSE_START.search(cell) if "jp-MarkdownCell" in open_tag else None
        tagged = tagged_class.search(prose[0] if prose else open_tag) is not None
        first = opening.match(cell, prose.end()) if (tagged and prose) else None
        pieces.append(content[pos:start])
        if open_fold and (not tagged or first is not None):
            pieces.append("</details>")
            open_fold = False
        if first is not None:
            summary = " ".join(first["label"].split())
            pieces.append(f'<details class="{kind.tag}"><summary>{summary}</summary>')
            open_fold = True
            cell = cell[: first.start()] + "<p>" + cell[first.end() :]
        elif tagged and not open_fold:
            log.warning(
                f"{where}: a cell tagged '{kind.tag}' comes before any opening "
                f"'**{label} N.**': start each run with a prose cell that opens with it"
            )
        pieces.append(_TAG_CHIPS.sub("", cell) if open_fold else cell)
        pos = end
    pieces.append(content[pos:] if not open_fold else "</details>" + content[pos:])
    return "".join(pieces)


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    lang = config.theme["language"]  # mkdocs-static-i18n sets it for each language's build
    for kind in FOLDS:
        content = fold(content, kind, lang, page.file.src_uri)
    return content
