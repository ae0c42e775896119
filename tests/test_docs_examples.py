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


def _glossary_rows(page: str) -> list[list[str]]:
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = [r for r in text.splitlines() if r.startswith("| ") and not r.startswith("|---")]
    return [[c.strip() for c in r.strip().strip("|").split(" | ")] for r in rows[1:]]


def test_glossary_pages_pair_row_for_row():
    en, ja = _glossary_rows("docs/glossary.md"), _glossary_rows("docs/glossary.ja.md")
    assert [r[:2] for r in en] == [r[:2] for r in ja], "same terms, same order, in both pages"
    math = re.compile(r"\$[^$]+\$")
    for e, j in zip(en, ja, strict=True):
        assert sorted(math.findall(e[2])) == sorted(math.findall(j[2])), e[0]
    japanese = [r[1] for r in en]
    assert len(japanese) == len(set(japanese)), "one Japanese term per concept"
