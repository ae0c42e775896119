"""The glossary pages: a stable anchor on every row, the same in both languages.

A chapter links a term as ``../docs/glossary.md#anchor`` (English cells) or
``../docs/glossary.ja.md#anchor`` (Japanese cells). The anchor is the English
term, lower-case, without its parenthesised part, other characters turned
into hyphens: ``fine-tuning``, ``query-key-value``, ``code`` (for "code (of a
position)"). The row pairing itself is tested in test_docs_examples.py; the
使わない表記 list of CONTRIBUTING.md, which feeds the Japanese lint, in
tests/notebooks/test_japanese_lint.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/glossary.md", "docs/glossary.ja.md"]
_ROW = re.compile(r'^\| <span id="(?P<id>[^"]+)"></span>(?P<term>[^|]+?) \| (?P<ja>[^|]+?) \|')


def anchor(term: str) -> str:
    """The anchor of a glossary row, from its English term."""
    without_parentheses = re.sub(r"\([^)]*\)", "", term).lower()
    return re.sub(r"[^a-z0-9]+", "-", without_parentheses).strip("-")


def _rows(page: str) -> list[re.Match]:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    body = [line for line in lines if line.startswith("| ") and not line.startswith("| English")]
    rows = [_ROW.match(line) for line in body]
    assert all(rows), f"{page}: a row without its anchor: {body[rows.index(None)]!r}"
    return rows


def test_anchor_scheme():
    assert anchor("fine-tuning") == "fine-tuning"
    assert anchor("query / key / value") == "query-key-value"
    assert anchor("code (of a position)") == "code"
    assert anchor("beginning-of-sequence (BOS) token") == "beginning-of-sequence-token"


@pytest.mark.parametrize("page", PAGES)
def test_every_row_has_its_stable_anchor(page):
    rows = _rows(page)
    assert [r["id"] for r in rows] == [anchor(r["term"]) for r in rows]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "anchors are unique"


def test_both_pages_use_the_same_anchors():
    en, ja = (_rows(page) for page in PAGES)
    assert [r["id"] for r in en] == [r["id"] for r in ja]


@pytest.mark.parametrize(
    ("anchor_id", "term"),
    [
        ("fine-tuning", "ファインチューニング"),
        ("shape", "形状"),
        ("sign", "正負"),
        ("code", "符号"),
        ("copy-task", "コピー課題"),
        ("toy-model", "トイモデル"),
        ("chance-level", "チャンスレベル"),
        ("pairing", "ペアの組み方"),
        ("reference-implementation", "参照実装"),
    ],
)
def test_terms_the_reviews_asked_for(anchor_id, term):
    for page in PAGES:
        assert {r["id"]: r["ja"] for r in _rows(page)}[anchor_id] == term, page
