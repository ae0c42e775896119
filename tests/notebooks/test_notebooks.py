"""Every chapter notebook: its .py and .ipynb agree, it was executed, and
its English and Japanese prose say the same formulas."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import jupytext
import pytest
from jupytext.compare import compare_notebooks

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\n]+?\$", re.DOTALL)
ids = {"ids": lambda p: p.stem}


def formulas(text: str) -> Counter:
    """The multiset of ``$...$`` and ``$$...$$`` segments of a prose cell."""
    return Counter(m.group(0) for m in MATH.finditer(text))


def test_formula_extraction():
    text = r"Let $p$ be a position and $$PE(p) = \sin(p)$$ with $\omega_i$, costing \$5."
    assert formulas(text) == Counter(["$p$", r"$$PE(p) = \sin(p)$$", r"$\omega_i$"])
    # the seed translation's corruption is caught: the formula differs
    assert formulas(r"$10000^{2i/d}$") != formulas(r"$1000 0^{2i/d}$")


def test_every_source_has_its_notebook_and_back():
    assert SOURCES, "no chapters in notebooks/"
    assert [p.stem for p in SOURCES] == [p.stem for p in NOTEBOOKS]
    numbers = [p.stem.split("-", 1)[0] for p in SOURCES]
    assert len(numbers) == len(set(numbers)), f"duplicate chapter numbers: {numbers}"
    for p in SOURCES:
        assert re.fullmatch(r"\d\d-[a-z0-9]+(-[a-z0-9]+)*", p.stem), f"{p.name}: name it NN-slug.py"


@pytest.mark.parametrize("py", SOURCES, **ids)
def test_py_and_ipynb_hold_the_same_inputs(py):
    nb_py, nb_ipynb = jupytext.read(py), jupytext.read(py.with_suffix(".ipynb"))
    compare_notebooks(nb_py, nb_ipynb, fmt="py:percent")
    assert [c.metadata.get("lang") for c in nb_py.cells] == [
        c.metadata.get("lang") for c in nb_ipynb.cells
    ], "cell languages differ: sync the .ipynb from the .py"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, **ids)
def test_notebook_was_executed_cleanly(nb_path):
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), (
        "execute the notebook top to bottom (make notebooks NB=...)"
    )
    for c in code:
        for out in c["outputs"]:
            assert out["output_type"] != "error", f"error output in cell {c.get('id')}"
            assert out.get("name") != "stderr", (
                f"stderr output in cell {c.get('id')}: {out.get('text')}"
            )
        assert "execution" not in c.get("metadata", {}), "timings recorded: use record_timing=False"


@pytest.mark.parametrize("py", SOURCES, **ids)
def test_prose_cells_come_in_english_japanese_pairs(py):
    cells = jupytext.read(py).cells
    for k, cell in enumerate(cells):
        lang = cell.metadata.get("lang")
        if cell.cell_type == "markdown":
            assert lang in ("en", "ja"), f'cell {k}: prose needs lang="en" or lang="ja"'
        else:
            assert lang is None, f"cell {k}: code cells are shared by both languages"
        if lang == "en":
            twin = cells[k + 1] if k + 1 < len(cells) else None
            assert twin is not None and twin.metadata.get("lang") == "ja", (
                f"cell {k}: English prose must be followed by its Japanese twin"
            )
            assert formulas(cell.source) == formulas(twin.source), (
                f"cell {k}: formulas differ between English and Japanese:\n"
                f"  only en: {sorted((formulas(cell.source) - formulas(twin.source)).elements())}\n"
                f"  only ja: {sorted((formulas(twin.source) - formulas(cell.source)).elements())}"
            )
        if lang == "ja":
            assert k > 0 and cells[k - 1].metadata.get("lang") == "en", (
                f"cell {k}: Japanese without English"
            )
            assert re.search(r"[\u3040-\u30ff]", cell.source), f"cell {k}: no Japanese text"


@pytest.mark.parametrize("py", SOURCES, **ids)
def test_notebook_uses_the_installed_package(py):
    source = py.read_text(encoding="utf-8")
    assert "sys.path" not in source, (
        "import the installed posenc (pip install -e .), no sys.path edits"
    )
    assert re.search(r"^(from posenc|import posenc)", source, re.M)
    assert "use_site_style()" in source, "figures use posenc_lab.plotting.use_site_style()"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, **ids)
def test_every_figure_has_alternative_text_in_both_languages(nb_path):
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for k, cell in enumerate(nb["cells"]):
        figures = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if not figures:
            continue
        alt = cell["metadata"].get("alt", {})
        hint = f'cell {k}: add  alt={{"en": [...], "ja": [...]}}  to its "# %%" line, one text per figure'
        for lang in ("en", "ja"):
            texts = alt.get(lang, [])
            assert len(texts) == figures, f"{hint} ({lang}: {len(texts)} texts, {figures} figures)"
            assert all(isinstance(t, str) and len(t.strip()) >= 20 for t in texts), hint
        assert all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", t) for t in alt["ja"]), hint
