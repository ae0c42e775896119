"""Check chapters against every rule of CONTRIBUTING.md, saying how to fix each failure.

    python -m tools.check_chapter notebooks/NN-slug.py [...]   (make check-chapter NB=...)

prints each rule with ``ok`` or ``FAIL`` and, under a failure, what is
wrong and how to fix it; exit status 1 if any rule fails. The rules read
the chapter's source ``NN-slug.py``, its executed ``NN-slug.ipynb`` and
the project around them (notebooks/chapters.yml, docs/, the
explorables). The tests run the same rules on every chapter
(tests/notebooks/test_notebooks.py), all but the Japanese lint, which
tests/notebooks/test_japanese_lint.py runs on all chapters at once. What
only a build shows (nbval's fresh run, the site and browser tests) is
``make test``'s.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from functools import cached_property
from pathlib import Path

import jupytext
from jupytext.compare import NotebookDifference, compare_notebooks

from hooks.chapters import read_registry, title
from hooks.folding import SOLUTIONS
from hooks.language import missing_link_targets

SOURCE_NAME = re.compile(r"\d\d-[a-z0-9]+(-[a-z0-9]+)*")
MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\n]+?\$", re.DOTALL)
KANA = re.compile(r"[\u3040-\u30ff]")
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
HEADING = re.compile(r"^#{1,6} (.*)$", re.MULTILINE)
EXPLORABLE = re.compile(r"<!--\s*explorable:\s*(?P<name>[^\s]+)\s*-->")
MAX_COLUMNS = 80  # notebooks/ruff.toml; the site's code box
REMEMBER = {"en": "## What to remember", "ja": "## まとめ"}
MIN_ALT = 20  # characters: a text that describes, not a label


def formulas(text: str) -> Counter:
    """The multiset of ``$...$`` and ``$$...$$`` segments of a prose cell."""
    return Counter(m.group(0) for m in MATH.finditer(text))


class Chapter:
    """One chapter: ``NN-slug.py`` under ``ROOT/notebooks``, read once."""

    def __init__(self, py: Path):
        self.py = Path(py).resolve()
        self.ipynb = self.py.with_suffix(".ipynb")
        self.root = self.py.parents[1]
        self.name = f"notebooks/{self.py.name}"

    @cached_property
    def cells(self) -> list:
        """The cells of the source, as jupytext reads them."""
        return jupytext.read(self.py).cells

    @cached_property
    def executed(self) -> dict | None:
        if not self.ipynb.exists():
            return None
        return json.loads(self.ipynb.read_text(encoding="utf-8"))

    def prose(self, lang: str) -> list:
        return [
            c for c in self.cells if c.cell_type == "markdown" and c.metadata.get("lang") == lang
        ]


def _problem(what: str, fix: str) -> str:
    return f"{what}\n    fix: {fix}"


# --------------------------------------------------------------------------
# The rules: each returns its problems, [] when the chapter follows it.


def file_name(ch: Chapter) -> list[str]:
    """``NN-slug.py``, a number no other chapter has."""
    out = []
    if not SOURCE_NAME.fullmatch(ch.py.stem):
        out.append(
            _problem(
                f"{ch.name}: the name is not NN-slug.py",
                "rename it: two digits, a hyphen, then lower-case words joined by hyphens",
            )
        )
    number = ch.py.stem.split("-", 1)[0]
    twins = [p.name for p in ch.py.parent.glob(f"{number}-*.py") if p != ch.py]
    if twins:
        out.append(
            _problem(f"{ch.name}: {', '.join(twins)} has the same number", "give it a free number")
        )
    return out


def registry_entry(ch: Chapter) -> list[str]:
    """An entry in notebooks/chapters.yml, and a ``# Title`` in each language."""
    slug = ch.py.stem.split("-", 1)[-1]
    out = []
    try:
        read_registry(ch.root)
    except ValueError as error:
        lines = [line.strip() for line in str(error).splitlines()[1:]]
        mine = [line for line in lines if line.startswith(f"{slug}:") or f"-{slug}.py " in line]
        out += [
            _problem(
                f"notebooks/chapters.yml: {line}",
                f"give `- slug: {slug}` its `en` and `ja` lines (what the reader derives "
                "and checks) under its part, in reading order",
            )
            for line in mine
        ]
    for lang in ("en", "ja"):
        try:
            title({"cells": ch.cells}, lang)
        except ValueError as error:
            out.append(
                _problem(f"{ch.name}: {error}", f"start the chapter with its title in {lang}")
            )
    return out


def notebook_in_sync(ch: Chapter) -> list[str]:
    """The ``.ipynb`` holds the cells of the ``.py`` (the ``.py`` is the source)."""
    fix = f"make notebooks NB={ch.name}"
    if ch.executed is None:
        return [_problem(f"{ch.ipynb.name} is missing", fix)]
    try:
        compare_notebooks(jupytext.read(ch.py), jupytext.read(ch.ipynb), fmt="py:percent")
    except NotebookDifference as difference:
        first = str(difference).strip().splitlines()[0]
        return [_problem(f"{ch.ipynb.name} and {ch.py.name} differ: {first}", fix)]
    langs = [c["metadata"].get("lang") for c in ch.executed["cells"]]
    if langs != [c.metadata.get("lang") for c in ch.cells]:
        return [_problem(f"{ch.ipynb.name}: the cells' languages differ from the .py", fix)]
    return []


def executed_cleanly(ch: Chapter) -> list[str]:
    """Every code cell ran, in order, without an error, stderr or timings."""
    if ch.executed is None:
        return []  # notebook_in_sync says so
    fix = f"fix the cell, then make notebooks NB={ch.name}"
    code = [c for c in ch.executed["cells"] if c["cell_type"] == "code"]
    out = []
    if [c["execution_count"] for c in code] != list(range(1, len(code) + 1)):
        out.append(
            _problem(f"{ch.ipynb.name}: not executed top to bottom", f"make notebooks NB={ch.name}")
        )
    for k, c in enumerate(ch.executed["cells"]):
        for o in c.get("outputs", []):
            if o["output_type"] == "error":
                out.append(_problem(f"cell {k}: error {o.get('ename')}: {o.get('evalue')}", fix))
            elif o.get("name") == "stderr":
                text = "".join(o.get("text", ""))[:200]
                out.append(_problem(f"cell {k} writes to stderr: {text!r}", fix + " (no warnings)"))
        if "execution" in c.get("metadata", {}):
            out.append(_problem(f"cell {k}: timings recorded", f"make notebooks NB={ch.name}"))
    return out


def prose_pairs(ch: Chapter) -> list[str]:
    """Each English prose cell is followed by its Japanese twin, with the same formulas."""
    out, cells = [], ch.cells
    for k, cell in enumerate(cells):
        lang = cell.metadata.get("lang")
        if cell.cell_type == "markdown" and lang not in ("en", "ja"):
            out.append(
                _problem(
                    f'cell {k}: prose without lang="en" or lang="ja"',
                    'tag it: # %% [markdown] lang="en"',
                )
            )
        if cell.cell_type != "markdown" and lang is not None:
            out.append(
                _problem(f"cell {k}: a code cell with a lang tag", "remove it: code is shared")
            )
        if lang == "en":
            twin = cells[k + 1] if k + 1 < len(cells) else None
            if twin is None or twin.metadata.get("lang") != "ja":
                out.append(
                    _problem(
                        f"cell {k}: English prose without its Japanese twin right after it",
                        'add the Japanese cell after it: # %% [markdown] lang="ja"',
                    )
                )
            elif formulas(cell.source) != formulas(twin.source):
                en, ja = formulas(cell.source), formulas(twin.source)
                out.append(
                    _problem(
                        f"cells {k} and {k + 1}: the formulas differ: only in English "
                        f"{sorted((en - ja).elements())}, only in Japanese {sorted((ja - en).elements())}",
                        "write each formula the same, character for character, in both cells",
                    )
                )
        if lang == "ja":
            if k == 0 or cells[k - 1].metadata.get("lang") != "en":
                out.append(
                    _problem(
                        f"cell {k}: Japanese prose without its English cell just before",
                        "put the English cell first",
                    )
                )
            if not KANA.search(cell.source):
                out.append(
                    _problem(
                        f"cell {k}: Japanese prose without a kana: is it still the English text?",
                        "translate it (です・ます, the terms of docs/glossary.ja.md)",
                    )
                )
    return out


def imports_and_style(ch: Chapter) -> list[str]:
    """The installed posenc, no ``sys.path`` edit, the site's figure style."""
    source, out = ch.py.read_text(encoding="utf-8"), []
    if "sys.path" in source:
        out.append(
            _problem(
                f"{ch.name} edits sys.path", "import the installed posenc (make setup installs it)"
            )
        )
    if not re.search(r"^(from posenc|import posenc)", source, re.M):
        out.append(
            _problem(
                f"{ch.name} does not import posenc",
                "import posenc and check the formulas against it",
            )
        )
    if "use_site_style()" not in source:
        out.append(
            _problem(
                f"{ch.name} never calls use_site_style()",
                "from posenc_lab.plotting import use_site_style; call it once at the top",
            )
        )
    return out


def figure_alt(ch: Chapter) -> list[str]:
    """Every figure has its alternative text in both languages."""
    out = []
    for k, cell in enumerate((ch.executed or {}).get("cells", [])):
        figures = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if not figures:
            continue
        alt = cell["metadata"].get("alt", {})
        fix = f'put alt={{"en": [...], "ja": [...]}} on its "# %%" line, one text of {MIN_ALT}+ characters per figure'
        for lang in ("en", "ja"):
            texts = alt.get(lang, [])
            if len(texts) != figures or not all(
                isinstance(t, str) and len(t.strip()) >= MIN_ALT for t in texts
            ):
                out.append(
                    _problem(f"cell {k}: {figures} figure(s), {len(texts)} {lang} alt text(s)", fix)
                )
        if not all(JAPANESE.search(t) for t in alt.get("ja", []) if isinstance(t, str)):
            out.append(_problem(f"cell {k}: an alt text under ja is not Japanese", fix))
    return out


def folded_cells(ch: Chapter) -> list[str]:
    """A ``check`` cell checks something and says what, in both languages; a
    ``figure`` cell shows what it makes (a figure, a table) under its folded
    code (CONTRIBUTING.md, "Reader first")."""
    out = []
    for k, cell in enumerate(ch.cells):
        tags = cell.metadata.get("tags", [])
        if "check" in tags:
            summary = cell.metadata.get("summary")
            fix = (
                'put summary={"en": "...", "ja": "..."} on its "# %%" line: one line each, '
                "what the checks establish"
            )
            if cell.cell_type != "code":
                out.append(_problem(f"cell {k}: tagged check but not code", "tag prose deeper"))
            elif not (
                isinstance(summary, dict)
                and all(
                    isinstance(summary.get(lang), str) and summary[lang].strip()
                    for lang in ("en", "ja")
                )
            ):
                out.append(
                    _problem(f"cell {k}: a check without its summary in both languages", fix)
                )
            elif not JAPANESE.search(summary["ja"]):
                out.append(_problem(f"cell {k}: the ja summary is not Japanese", fix))
            if cell.cell_type == "code" and not re.search(
                r"^\s*assert\b|\bassert_\w+\(", cell.source, re.M
            ):
                out.append(
                    _problem(
                        f"cell {k}: tagged check but makes no assert", "assert what the prose says"
                    )
                )
        executed = (ch.executed or {}).get("cells", [])
        outputs = executed[k].get("outputs", []) if k < len(executed) else []
        if "figure" in tags and not outputs:
            out.append(_problem(f"cell {k}: tagged figure but shows nothing", "remove the tag"))
    return out


def long_lines(py: Path, limit: int = MAX_COLUMNS) -> list[str]:
    """``"cell K line L (N chars): text"`` for each code line over ``limit``."""
    found = []
    for k, cell in enumerate(jupytext.read(py).cells):
        if cell.cell_type != "code":
            continue
        for n, line in enumerate(cell.source.splitlines(), 1):
            if len(line) > limit:
                found.append(f"cell {k} line {n} ({len(line)} chars): {line.strip()[:60]}")
    return found


def code_width(ch: Chapter) -> list[str]:
    """Code fits the page: at most 80 characters a line, comments included."""
    return [
        _problem(line, f"ruff format {ch.name}; shorten comments by hand")
        for line in long_lines(ch.py)
    ]


def plain_headings(ch: Chapter) -> list[str]:
    """Headings are words: no math, no code (the table of contents would drop them)."""
    out = []
    for k, cell in enumerate(ch.cells):
        if cell.cell_type != "markdown":
            continue
        for heading in HEADING.findall(cell.source):
            if "$" in heading or "`" in heading:
                out.append(
                    _problem(
                        f"cell {k}: heading {heading!r} holds math or code",
                        "say it in words; the formula goes in the text",
                    )
                )
    return out


def links(ch: Chapter) -> list[str]:
    """Links to chapters and pages name files that exist."""
    missing = missing_link_targets({"cells": ch.cells}, ch.py.parent, ch.root / "docs")
    return [
        _problem(
            f"a link to {target}, which does not exist",
            "link a chapter as NN-slug.ipynb, a page as ../docs/page.md (English) or "
            "../docs/page.ja.md (Japanese), as CONTRIBUTING.md says",
        )
        for target in missing
    ]


def what_to_remember(ch: Chapter) -> list[str]:
    """The chapter ends, before its exercises, with what to remember."""
    out = []
    for lang, heading in REMEMBER.items():
        if not any(heading in c.source.splitlines() for c in ch.prose(lang)):
            out.append(
                _problem(
                    f'no "{heading}" section ({lang})',
                    "add it before the exercises: three to six points",
                )
            )
    return out


def solutions(ch: Chapter) -> list[str]:
    """Each run of cells tagged ``solution`` opens with **Solution N.** / **解答 N.**"""
    out, cells = [], ch.cells
    opening = {lang: f"**{label} " for lang, label in SOLUTIONS.label.items()}
    for k, cell in enumerate(cells):
        tagged = SOLUTIONS.tag in cell.metadata.get("tags", [])
        before = k > 0 and SOLUTIONS.tag in cells[k - 1].metadata.get("tags", [])
        starts = cell.cell_type == "markdown" and cell.source.lstrip().startswith(opening["en"])
        if tagged and not before and not starts:
            out.append(
                _problem(
                    f"cell {k}: a run of cells tagged solution that does not open with "
                    f"{opening['en']}N.**",
                    "open it with a prose pair: **Solution N.** ... / **解答 N.** ...",
                )
            )
        if tagged and starts:
            twin = cells[k + 1] if k + 1 < len(cells) else None
            if twin is None or not twin.source.lstrip().startswith(opening["ja"]):
                out.append(
                    _problem(
                        f"cell {k + 1}: the Japanese twin does not open with {opening['ja']}N.**",
                        "open it so",
                    )
                )
    return out


def explorables(ch: Chapter) -> list[str]:
    """An explorable marker names an explorable that exists."""
    folder = ch.root / "notebooks" / "explorables"
    return [
        _problem(
            f"cell {k}: no notebooks/explorables/{m['name']}.py for its marker",
            "write the explorable (CONTRIBUTING.md, Interactive figures) or fix the name",
        )
        for k, c in enumerate(ch.cells)
        if c.cell_type == "markdown"
        for m in EXPLORABLE.finditer(c.source)
        if not (folder / f"{m['name']}.py").exists()
    ]


RULES = (
    file_name,
    registry_entry,
    notebook_in_sync,
    executed_cleanly,
    prose_pairs,
    imports_and_style,
    figure_alt,
    folded_cells,
    code_width,
    plain_headings,
    links,
    what_to_remember,
    solutions,
    explorables,
)


def japanese_lint(ch: Chapter) -> list[str]:
    """textlint on the Japanese prose and alt texts (make lint-ja)."""
    from tools import lint_ja

    return [
        _problem(str(m), "rewrite the sentence (the rule's reason is in .textlintrc.yml)")
        for m in lint_ja.lint([ch.py])
    ]


def check(py: Path, rules=(*RULES, japanese_lint)) -> dict[str, list[str]]:
    """Rule name -> its problems, for the chapter ``py``."""
    ch = Chapter(py)
    return {rule.__name__: rule(ch) for rule in rules}


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tools.check_chapter notebooks/NN-slug.py [...]", file=sys.stderr)
        return 2
    failed = 0
    for path in argv:
        print(path)
        for rule, problems in check(Path(path)).items():
            print(f"  {'ok  ' if not problems else 'FAIL'} {rule}")
            for problem in problems:
                print("       " + problem.replace("\n", "\n       "))
            failed += bool(problems)
    print(f"{failed} rule(s) failed" if failed else "every rule passes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
