"""The generated API reference (docs/api/*.md, rendered by mkdocstrings) covers the package.

Each page holds ``::: posenc.name`` directives that mkdocstrings expands from
the docstrings when the site is built; these tests fail when a public name
has no entry, when an entry names something posenc does not export, when a
page is missing from the navigation, or when a docstring lacks the sections
the reference promises (arguments, errors, and what a call returns).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml

import posenc
from hooks import api_links

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))
PUBLIC = sorted(name for name in posenc.__all__ if not name.startswith("_"))
DIRECTIVE = api_links.DIRECTIVE  # the site reads the entries the same way


def _entries() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(page.name)
    return found


def test_every_public_name_has_exactly_one_reference_entry():
    entries = _entries()
    assert PAGES, "no pages under docs/api/"
    missing = [name for name in PUBLIC if name not in entries]
    assert missing == [], f"public names without a reference entry: {missing}"
    twice = {name: pages for name, pages in entries.items() if len(pages) > 1}
    assert twice == {}, f"names documented on more than one page: {twice}"
    unknown = sorted(set(entries) - set(PUBLIC))
    assert unknown == [], f"entries for names posenc does not export: {unknown}"


def test_every_entry_names_its_chapter_or_says_there_is_none():
    for page in PAGES:
        blocks = DIRECTIVE.split(page.read_text(encoding="utf-8"))[1:]  # name, text, name, ...
        for name, text in zip(blocks[::2], blocks[1::2], strict=True):
            chapter = re.search(r"Derived in the chapter \[[^]]+\]\(\.\./([\w-]+)\.ipynb\)", text)
            if chapter:
                assert (ROOT / "docs" / f"{chapter.group(1)}.ipynb").exists() or any(
                    (ROOT / "notebooks").glob(f"*-{chapter.group(1)}.py")
                ), f"{page.name}: {name} links to a chapter that does not exist"
            else:
                assert "No chapter yet" in text, f"{page.name}: {name} names no chapter"


def test_every_page_is_in_the_navigation_and_links_back():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    nav = str(config["nav"])
    for page in PAGES:
        assert f"api/{page.name}" in nav, f"docs/api/{page.name} is not in mkdocs.yml's nav"
        assert "](../api.md)" in page.read_text(encoding="utf-8"), f"{page.name}: no overview link"
    for overview in ("docs/api.md", "docs/api.ja.md"):
        text = (ROOT / overview).read_text(encoding="utf-8")
        for page in PAGES:
            assert f"(api/{page.name})" in text, f"{overview} does not link to api/{page.name}"


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
