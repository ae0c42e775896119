"""Code cells fit the site's code box: every line at most 80 characters,
comments included (CONTRIBUTING.md, "Code fits the page";
tests/site/test_browser.py measures the box itself)."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
MAX_COLUMNS = 80


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


def test_the_check_counts_characters_not_bytes(tmp_path):
    py = tmp_path / "01-demo.py"
    py.write_text(
        "# %% [markdown]\n# " + "prose is not code " * 10 + "\n\n"
        "# %%\nx = 1  # " + "é" * 70 + "\n"  # 80 characters, 150 bytes
        "y = 2  # " + "a" * 72 + "\n",  # 81 characters
        encoding="utf-8",
    )
    assert long_lines(py) == [f"cell 1 line 2 (81 chars): y = 2  # {'a' * 51}"]


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_code_lines_fit_in_80_columns(py):
    found = long_lines(py)
    assert not found, (
        f"{len(found)} code lines over {MAX_COLUMNS} characters "
        f"(ruff format {py.relative_to(ROOT)}; shorten comments by hand):\n" + "\n".join(found)
    )
