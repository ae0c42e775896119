"""The API reference covers the package.

The reference is generated at every site build (hooks/api_reference.py):
from ``posenc.__all__``, the docstrings and docs/api.yml, which gives each
name its family, chapter and Japanese summary. These tests fail when a
public name has no entry there, when an entry names something posenc does
not export, when a name's module belongs to no family, when an entry names
a chapter that does not exist, or when a docstring lacks the sections the
reference promises (arguments, errors, and what a call returns).
"""

from __future__ import annotations

import inspect
import shutil
import types
from pathlib import Path

import pytest

import posenc
from hooks import api_reference

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = sorted(name for name in posenc.__all__ if not name.startswith("_"))


def test_every_public_name_has_its_entry_family_and_chapter():
    entries = api_reference.read_reference(ROOT)  # raises, naming what is missing
    assert sorted(e.name for e in entries) == PUBLIC
    by_name = {e.name: e for e in entries}
    assert by_name["apply_rope"].family.page == "rope"
    assert by_name["apply_rope"].chapter == "rope"
    assert by_name["apply_rope"].signature.startswith("apply_rope(x, positions, *, base,")
    assert by_name["apply_rope"].summary["en"].startswith("Rotate the last axis of `x`")


def _fake_package() -> types.ModuleType:
    """A package exporting ``sinusoidal`` and ``apply_rope`` from posenc, and
    ``stray``, from posenc.absolute, with no entry."""

    def stray():
        """Nothing."""

    stray.__module__ = "posenc.absolute"
    package = types.ModuleType("fakepkg")
    package.__all__ = ["apply_rope", "sinusoidal", "stray"]
    package.sinusoidal, package.apply_rope, package.stray = (
        posenc.sinusoidal,
        posenc.apply_rope,
        stray,
    )
    return package


def _project(tmp_path, registry: str) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "chapters.yml", tmp_path / "notebooks")
    for source in (ROOT / "notebooks").glob("[0-9]*.py"):  # the chapters exist
        (tmp_path / "notebooks" / source.name).touch()
    (tmp_path / api_reference.REGISTRY).write_text(registry, encoding="utf-8")
    return tmp_path


def test_the_check_says_what_to_add_or_remove(tmp_path):
    registry = (
        "families:\n"
        "  - {page: absolute, modules: [posenc.absolute], en: A, ja: A, papers: P}\n"
        "  - {page: cope, modules: [posenc.cope], en: C, ja: C, papers: P}\n"
        "names:\n"
        "  sinusoidal: {chapter: no-such-chapter, ja: 正弦波。}\n"
        "  apply_rope: {chapter: rope, ja: 回転。}\n"
        "  CoPE: {ja: 文脈。}\n"
    )
    with pytest.raises(ValueError) as error:
        api_reference.read_reference(_project(tmp_path, registry), _fake_package())
    problems = [p.strip() for p in str(error.value).splitlines()[1:]]
    assert problems == [
        "sinusoidal: chapter 'no-such-chapter' is not in notebooks/chapters.yml",
        "stray: no entry under `names`: add `stray: {chapter: SLUG, ja: ...}` (ja: the first "
        "line of its docstring in Japanese; chapter: the slug of the chapter that derives "
        "it, or leave it out)",
        "CoPE: listed under `names`, but fakepkg does not export it: remove it",
        "family cope: no public name comes from posenc.cope: remove it",
    ]


def test_a_module_no_family_lists_gets_a_page_of_its_own(tmp_path):
    registry = "families: []\nnames:\n  apply_rope: {chapter: rope, ja: 回転します。}\n"
    package = types.ModuleType("fakepkg")
    package.__all__, package.apply_rope = ["apply_rope"], posenc.apply_rope
    (entry,) = api_reference.read_reference(_project(tmp_path, registry), package)
    assert entry.family.page == "rope" and entry.family.modules == ("posenc.rope",)
    assert entry.family.title == {"en": "Rotary position embedding (RoPE)"} | {
        "ja": "Rotary position embedding (RoPE)"
    }
    text = api_reference.page_markdown(entry.family, [entry], {"rope": "RoPE"})
    assert text.startswith("# Rotary position embedding (RoPE)\n") and "Papers" not in text


def test_pages_list_names_in_source_order_with_their_chapter():
    entries = api_reference.read_reference(ROOT)
    titles = api_reference.chapter_titles(ROOT, "en")
    scaling = next(e.family for e in entries if e.name == "LinearScaling")
    text = api_reference.page_markdown(scaling, entries, titles)
    names = [
        line.removeprefix("::: posenc.") for line in text.splitlines() if line.startswith(":::")
    ]
    assert names[:3] == ["LinearScaling", "NTKScaling", "YarnScaling"]
    assert "::: posenc.LinearScaling\n\nDerived in the chapter [Extending RoPE's context]" in text
    assert "(../rope-context.ipynb)" in text and "[overview](../api.md)" in text


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_overview_tables_give_each_name_its_summary_in_that_language(lang):
    entries = api_reference.read_reference(ROOT)
    tables = api_reference.name_tables(entries, lang, api_reference.chapter_titles(ROOT, lang))
    rows = [line for line in tables.splitlines() if line.startswith("| `")]
    assert len(rows) == len(PUBLIC)
    row = next(r for r in rows if r.startswith("| `alibi_slopes("))
    summary = {"en": "The per-head slopes `m_h` of ALiBi", "ja": "ALiBi のヘッドごとの傾き `m_h`"}
    chapter = {"en": "[ALiBi: attention with linear biases](alibi.ipynb)", "ja": "(alibi.ipynb)"}
    assert summary[lang] in row and chapter[lang] in row


def test_signatures_name_the_parameters_and_mark_keyword_only_ones():
    def f(a, b=1, *rest, c, **kw): ...

    def g(a, *, b=2): ...

    assert api_reference.signature("f", f) == "f(a, b, *rest, c, **kw)"
    assert api_reference.signature("g", g) == "g(a, *, b)"
    assert api_reference.summary_line(posenc.NTKScaling).endswith(
        "a larger base, `base * factor ** (dim / (dim - 2))`."
    )


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_has_the_sections_the_reference_shows(name):
    obj = getattr(posenc, name)
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{name} has no docstring"
    needed = ["Args:", "Raises:"]
    if inspect.isfunction(obj):
        needed.append("Returns:")
    elif hasattr(obj, "forward"):  # a module: forward says what it returns
        assert "Returns:" in (inspect.getdoc(obj.forward) or ""), f"{name}.forward: no Returns"
    for section in needed:
        assert section in doc, f"{name}: no {section} section"
