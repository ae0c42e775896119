"""MkDocs hook: runs of tagged cells fold into a collapsed ``<details>``.

A fold is a run of cells that carry one tag (in the notebook's cell
metadata) and starts with a prose cell whose first words are its label in
bold, with or without a number: ``**Solution 2.**`` / ``**解答 2.**``. On
the page the run becomes ``<details class="TAG">`` whose summary is the
label ("Solution 2"), taken out of the prose; the tag chips that
mkdocs-jupyter shows above tagged code go, since the fold says the same.
A tagged cell before any opening is left as it is, with a warning (which
fails a strict build).

Each kind of run is one :class:`Fold` in :data:`FOLDS`: the worked
solutions of the exercises (``**Solution 2.**``) and the deep dives a
reader may skip (``**Going deeper: the float32 error.**``, titled).

Three tags fold a single code cell, so that the teaching stays in front and
the proof stays one click away (CONTRIBUTING.md, "Reader first"):

- ``check``: the whole cell (its asserts and what they print) becomes
  ``<details class="check">`` whose summary counts its checks and says what
  they establish, from the cell's ``summary`` metadata in the page's
  language: "✓ 6 checks: the bound holds for every pair".
- ``figure``: the figure stays on the page, right under the prose; its
  code folds beneath it under "Show the code".
- ``setup``: a chapter's imports and settings fold whole under "Imports and
  setup" (a reader running the notebook sees them; one reading the page
  has nothing to learn from them).
"""

from __future__ import annotations

import html
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pymdownx.slugs import slugify

_slugify = slugify(case="lower")  # as the headings' ids (hooks/headings.py)


@dataclass(frozen=True)
class Fold:
    tag: str  # the cell tag, and the class of the <details>
    label: dict[str, str]  # language -> the bold word that opens a fold
    titled: bool = False  # the label is followed by a title, not a number


SOLUTIONS = Fold("solution", {"en": "Solution", "ja": "解答"})
DEEPER = Fold("deeper", {"en": "Going deeper:", "ja": "さらに詳しく："}, titled=True)
FOLDS = (SOLUTIONS, DEEPER)

#: The summary of a folded check cell, and of a figure's folded code.
CHECKS = {"en": ("check", "checks"), "ja": ("確認", "確認")}
SHOW_CODE = {"en": "Show the code", "ja": "コードを表示"}
SETUP = {"en": "Imports and setup", "ja": "インポートと準備"}
CELL_TAGS = {"check", "figure", "setup"}  # the tags that fold one code cell

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


def _fold_id(kind: Fold, summary: str, label: str, taken: set[str]) -> str:
    """`` id="deeper-<the title, slugified>"``, unique on the page: prose links
    to a titled fold ("the note below") with it, and javascripts/folds.js opens
    the fold a link lands in."""
    base = f"{kind.tag}-{_slugify(html.unescape(summary[len(label) :]).strip(), '-')}"
    anchor, n = base, 1
    while anchor in taken:
        n += 1
        anchor = f"{base}-{n}"
    taken.add(anchor)
    return f' id="{html.escape(anchor)}"'


def fold(content: str, kind: Fold, lang: str, where: str = "page") -> str:
    """Fold each run of cells tagged ``kind.tag`` into a collapsed ``<details>``.

    A fold starts at each tagged prose cell that opens with
    ``<strong>Label N.</strong>`` (the label, with its number if any, moves
    into the ``<summary>``) and takes the tagged cells after it, up to the
    next such opening or the first untagged cell.
    """
    label = kind.label[lang]
    after = r"[^<]*?" if kind.titled else r"(?:\s*[0-9A-Za-z]+)??"
    opening = re.compile(
        rf"<p>\s*<strong>\s*(?P<label>{re.escape(label)}{after})"
        r"\s*[.．。:：]?\s*</strong>\s*"
    )
    tagged_class = re.compile(rf'class="[^"]*\bcelltag_{re.escape(kind.tag)}\b')
    pieces, pos, open_fold, ids = [], 0, False, set()
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
            anchor = _fold_id(kind, summary, label, ids) if kind.titled else ""
            pieces.append(f'<details class="{kind.tag}"{anchor}><summary>{summary}</summary>')
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


_ASSERTS = re.compile(r"^\s*assert\b|\bassert_\w+\(", re.MULTILINE)
_INPUT = re.compile(r'<div class="jp-Cell-inputWrapper')


def count_checks(source: str) -> int:
    """The checks a cell makes: its ``assert`` statements and ``assert_*(...)`` calls."""
    return len(_ASSERTS.findall(source))


def check_summary(source: str, summary: str | None, lang: str) -> str:
    """ "✓ 6 checks: <summary>" (or "✓ 確認 6 件：<summary>") for a check cell."""
    n = count_checks(source)
    one, many = CHECKS[lang]
    head = f"{n} {one if n == 1 else many}" if lang == "en" else f"{one} {n} 件"
    colon = ": " if lang == "en" else "："
    return f"✓ {head}{colon}{html.escape(summary)}" if summary else f"✓ {head}"


def fold_cells(content: str, cells: list[dict], lang: str, where: str = "page") -> str:
    """Fold each code cell tagged ``check`` or ``setup`` whole, and the code of each ``figure``;
    drop the tag chips nbconvert draws on any tagged code cell (``nbval-ignore-output`` too).

    ``cells`` are the page's notebook cells, in the order the page shows
    them (one HTML cell each).
    """
    found = _cells(content)
    if len(found) != len(cells):
        log.warning(f"{where}: {len(found)} cells on the page, {len(cells)} in its notebook")
        return content
    pieces, pos = [], 0
    for (start, end), cell in zip(found, cells, strict=True):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] != "code" or not tags:
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        html_cell = _TAG_CHIPS.sub("", content[start:end])  # tags are for tools, not readers
        if "check" in tags:
            summary = check_summary(source, cell["metadata"].get("summary"), lang)
            if not count_checks(source):
                log.warning(f"{where}: a cell tagged 'check' makes no check (no assert)")
            html_cell = f'<details class="check"><summary>{summary}</summary>{html_cell}</details>'
        elif "setup" in tags:
            html_cell = (
                f'<details class="setup"><summary>{SETUP[lang]}</summary>{html_cell}</details>'
            )
        elif "figure" in tags:
            m = _INPUT.search(html_cell)
            if m is None:
                log.warning(f"{where}: a cell tagged 'figure' has no code to fold")
            else:
                # the figure first, right under the prose that speaks of it;
                # its code folds beneath it, inside the cell
                code_end = _div_end(html_cell, m.start())
                outputs = html_cell[code_end:]
                cell_end = outputs.rfind("</div>")
                html_cell = (
                    f"{html_cell[: m.start()]}{outputs[:cell_end]}"
                    f'<details class="figure-code"><summary>{SHOW_CODE[lang]}</summary>'
                    f"{html_cell[m.start() : code_end]}</details>{outputs[cell_end:]}"
                )
        pieces += [content[pos:start], html_cell]
        pos = end
    return "".join(pieces) + content[pos:]


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    lang = config.theme["language"]  # mkdocs-static-i18n sets it for each language's build
    where = page.file.src_uri
    # the cell tags and summaries come from the page's own (one-language) notebook
    cells = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))["cells"]
    content = fold_cells(content, cells, lang, where)
    for kind in FOLDS:
        content = fold(content, kind, lang, where)
    return content
