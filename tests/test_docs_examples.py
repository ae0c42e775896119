"""The Python examples of the README and the home pages run as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/index.md", "docs/index.ja.md"]


def _examples():
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for k, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.DOTALL)):
            yield pytest.param(block, id=f"{page}-{k}")


@pytest.mark.parametrize("code", list(_examples()))
def test_example_runs(code):
    exec(compile(code, "<example>", "exec"), {})


@pytest.mark.parametrize("page", ["docs/api.md", "docs/api.ja.md"])
def test_api_page_lists_every_public_name(page):
    import posenc

    text = (ROOT / page).read_text(encoding="utf-8")
    first_cells = [row.split("|")[1] for row in text.splitlines() if row.startswith("| `")]
    documented = {name for cell in first_cells for name in re.findall(r"`(\w+)\(", cell)}
    public = {name for name in posenc.__all__ if not name.startswith("_")}
    assert public - documented == set(), f"missing from {page}"
    assert documented - public == set(), f"{page} lists names posenc does not export"
