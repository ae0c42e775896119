"""Every chapter follows the rules of CONTRIBUTING.md.

The rules live in tools/check_chapter.py, which `make check-chapter
NB=notebooks/NN-slug.py` runs on one chapter, with how to fix each
failure; here they run on every chapter, and on a chapter broken in every
way, to show that each rule catches what it should and says so.
"""

from __future__ import annotations

import functools
import json
import shutil
from collections import Counter
from pathlib import Path

import jupytext
import pytest

from tools import check_chapter
from tools.check_chapter import Chapter, formulas, long_lines

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


@functools.cache
def chapter(py: Path) -> Chapter:
    return Chapter(py)  # each file read once for all the rules


def test_every_source_has_its_notebook_and_back():
    assert SOURCES, "no chapters in notebooks/"
    assert [p.stem for p in SOURCES] == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("rule", check_chapter.RULES, ids=lambda rule: rule.__name__)
@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_chapter_follows_the_rule(py, rule):
    problems = rule(chapter(py))
    assert problems == [], "\n".join(problems)


def test_formula_extraction():
    text = r"Let $p$ be a position and $$PE(p) = \sin(p)$$ with $\omega_i$, costing \$5."
    assert formulas(text) == Counter(["$p$", r"$$PE(p) = \sin(p)$$", r"$\omega_i$"])
    # the seed translation's corruption is caught: the formula differs
    assert formulas(r"$10000^{2i/d}$") != formulas(r"$1000 0^{2i/d}$")


def test_code_width_counts_characters_not_bytes(tmp_path):
    py = tmp_path / "01-demo.py"
    py.write_text(
        "# %% [markdown]\n# " + "prose is not code " * 10 + "\n\n"
        "# %%\nx = 1  # " + "é" * 70 + "\n"  # 80 characters, 150 bytes
        "y = 2  # " + "a" * 72 + "\n",  # 81 characters
        encoding="utf-8",
    )
    assert long_lines(py) == [f"cell 1 line 2 (81 chars): y = 2  # {'a' * 51}"]


# A chapter that breaks every rule: its own number taken, no registry entry,
# no title, a formula and a kana missing from its Japanese twin, a heading
# with math, a dead link, sys.path edited, no posenc, no site style, a code
# line of 89 characters, a solution without its opening, an explorable that
# does not exist, no "What to remember", a check that checks nothing and
# says nothing, a figure cell that shows nothing; its .ipynb out of date, run
# out of order, with an error, stderr and a figure without alternative text.
BROKEN = """\
# %% [markdown] lang="en"
# ## Broken: $x$ in a heading
#
# See [gone](02-gone.ipynb) and $a$.

# %% [markdown] lang="ja"
# Not translated, formula $b$.

# %%
import sys

sys.path.insert(0, "..")
x = 1  # {long}

# %% [markdown] lang="en" tags=["solution"]
# The answer.

# %% [markdown] lang="ja" tags=["solution"]
# 答えです。

# %% [markdown] lang="en"
# <!-- explorable: 01-broken -->

# %% [markdown] lang="ja"
# <!-- explorable: 01-broken --> 図です。

# %% tags=["check", "figure"]
x == 1
""".format(long="z" * 80)


def _broken_project(tmp_path) -> Path:
    notebooks = tmp_path / "notebooks"
    (tmp_path / "docs").mkdir()
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / "01-sinusoidal.py", notebooks / "01-sinusoidal.py")
    (notebooks / "chapters.yml").write_text(
        "parts:\n  - en: Part\n    ja: 部\n    chapters:\n"
        "      - {slug: sinusoidal, path: 1, en: Its line., ja: その行です。}\n",
        encoding="utf-8",
    )
    py = notebooks / "01-broken.py"
    py.write_text(BROKEN, encoding="utf-8")
    nb = json.loads(jupytext.writes(jupytext.read(py), fmt="ipynb"))
    code = nb["cells"][2]
    code["execution_count"] = 2
    code["outputs"] = [
        {"output_type": "stream", "name": "stderr", "text": "a warning\n"},
        {"output_type": "display_data", "data": {"image/png": "iVBO"}, "metadata": {}},
        {"output_type": "error", "ename": "NameError", "evalue": "y", "traceback": []},
    ]
    nb["cells"][5]["source"] = "答えです（古い版）。"
    py.with_suffix(".ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return py


def test_a_broken_chapter_gets_what_is_wrong_and_how_to_fix_it(tmp_path):
    found = check_chapter.check(_broken_project(tmp_path), rules=check_chapter.RULES)
    assert [rule for rule, problems in found.items() if not problems] == []
    assert all("\n    fix: " in p for problems in found.values() for p in problems)
    what = {rule: [p.split("\n")[0] for p in problems] for rule, problems in found.items()}
    assert what["file_name"] == ["notebooks/01-broken.py: 01-sinusoidal.py has the same number"]
    assert what["registry_entry"] == [
        "notebooks/chapters.yml: notebooks/01-broken.py is not in notebooks/chapters.yml: "
        "add an entry (slug, en, ja) under its part",
        'notebooks/01-broken.py: the first lang="en" prose cell must open with the title, "# Title"',
        'notebooks/01-broken.py: the first lang="ja" prose cell must open with the title, "# Title"',
    ]
    assert what["notebook_in_sync"][0].startswith("01-broken.ipynb and 01-broken.py differ")
    assert what["executed_cleanly"] == [
        "01-broken.ipynb: not executed top to bottom",
        "cell 2 writes to stderr: 'a warning\\n'",
        "cell 2: error NameError: y",
    ]
    assert what["prose_pairs"] == [
        "cells 0 and 1: the formulas differ: only in English ['$a$', '$x$'], "
        "only in Japanese ['$b$']",
        "cell 1: Japanese prose without a kana: is it still the English text?",
    ]
    assert what["imports_and_style"] == [
        "notebooks/01-broken.py edits sys.path",
        "notebooks/01-broken.py does not import posenc",
        "notebooks/01-broken.py never calls use_site_style()",
    ]
    assert what["figure_alt"] == [
        "cell 2: 1 figure(s), 0 en alt text(s)",
        "cell 2: 1 figure(s), 0 ja alt text(s)",
    ]
    assert what["code_width"] == [f"cell 2 line 4 (89 chars): x = 1  # {'z' * 51}"]
    assert what["plain_headings"] == [
        "cell 0: heading 'Broken: $x$ in a heading' holds math or code"
    ]
    assert what["links"] == ["a link to 02-gone.ipynb, which does not exist"]
    assert what["what_to_remember"] == [
        'no "## What to remember" section (en)',
        'no "## まとめ" section (ja)',
    ]
    assert what["solutions"] == [
        "cell 3: a run of cells tagged solution that does not open with **Solution N.**"
    ]
    assert what["folded_cells"] == [
        "cell 7: a check without its summary in both languages",
        "cell 7: tagged check but makes no assert",
        "cell 7: tagged figure but shows nothing",
    ]
    assert what["explorables"] == [
        "cell 5: no notebooks/explorables/01-broken.py for its marker",
        "cell 6: no notebooks/explorables/01-broken.py for its marker",
    ]
