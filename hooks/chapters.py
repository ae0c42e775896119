"""MkDocs hook: the chapters of the site, from one list.

notebooks/chapters.yml lists the chapters in reading order, by part, with
the line the home page says about each, in English and Japanese. A
chapter's title is its notebook's own first heading in each language. From
these the hook builds, at every build:

- the chapter sections of the navigation, one per part, where mkdocs.yml's
  nav holds the item ``notebooks/chapters.yml``; the Japanese names of the
  parts join the i18n plugin's ``nav_translations``;
- the chapter table of the home page, where docs/index.md and
  docs/index.ja.md hold ``<!-- generated: chapters -->``: each chapter's
  part, title and line, with its step on the core reading path (an
  entry's ``path: N``, drawn as a circled number) and its reading time,
  from the words of its main path (prose outside folded cells) at a
  study pace of 60 a minute (a reader's measured pace on two chapters).

A notebook without an entry, or an entry without a notebook, stops the
build with a message that says which.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REGISTRY = "notebooks/chapters.yml"
PLACEHOLDER = "<!-- generated: chapters -->"
CORE_HOURS = "<!-- generated: core hours -->"  # the core path's study time, in hours
LANGUAGES = ("en", "ja")
TABLE_HEADER = {
    "en": "| Part | Chapter | What you will derive and check |",
    "ja": "| 部 | 章 | 導出して確かめること |",
}
MINUTES = {"en": "{} min", "ja": "{} 分"}
WORDS_PER_MINUTE = 40  # study pace: derivations followed, figures read (a reader review
# found 60 optimistic: about five hours announced for a core path of eight to ten)
FOLDED = {"check", "figure", "deeper", "solution"}  # cells the page folds
_CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩"
_NOTEBOOK = re.compile(r"^\d+-(?P<slug>[a-z0-9][a-z0-9-]*)\.py$")

log = logging.getLogger("mkdocs.hooks.chapters")  # a warning fails a strict build


@dataclass(frozen=True)
class Chapter:
    slug: str
    source: Path  # notebooks/NN-slug.py
    part: dict[str, str]  # language -> the name of its part
    summary: dict[str, str]  # language -> its line on the home page
    path: int | None = None  # its step on the core reading path, if it is on it


def read_registry(root: Path) -> list[Chapter]:
    """The chapters of ``REGISTRY``, in order, each matched with its notebook."""
    path = root / REGISTRY
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    sources = {
        m["slug"]: p for p in (root / "notebooks").glob("*.py") if (m := _NOTEBOOK.match(p.name))
    }
    chapters, problems = [], []
    for part in data["parts"]:
        for entry in part["chapters"]:
            slug = entry["slug"]
            missing = [lang for lang in LANGUAGES if not str(entry.get(lang) or "").strip()]
            if missing or any(not part.get(lang) for lang in LANGUAGES):
                problems.append(f"{slug}: give the part and the summary in {', '.join(LANGUAGES)}")
            if slug not in sources:
                problems.append(f"{slug}: there is no notebooks/NN-{slug}.py")
            elif any(c.slug == slug for c in chapters):
                problems.append(f"{slug}: listed twice")
            else:
                part_names = {lang: part.get(lang, "") for lang in LANGUAGES}
                summary = {lang: str(entry.get(lang, "")).strip() for lang in LANGUAGES}
                path = entry.get("path")
                chapters.append(Chapter(slug, sources[slug], part_names, summary, path))
    steps = sorted(c.path for c in chapters if c.path is not None)
    if steps != list(range(1, len(steps) + 1)) or len(steps) > len(_CIRCLED):
        problems.append(
            f"the path steps are {steps}: number the core path 1, 2, ... up to {len(_CIRCLED)}, "
            "each once"
        )
    listed = {c.slug for c in chapters}
    for slug, source in sorted(sources.items()):
        if slug not in listed and not any(p.startswith(f"{slug}:") for p in problems):
            problems.append(
                f"notebooks/{source.name} is not in {REGISTRY}: add an entry (slug, en, ja) "
                "under its part"
            )
    if problems:
        raise ValueError(f"{REGISTRY}:\n  " + "\n  ".join(problems))
    return chapters


def title(notebook: dict, lang: str) -> str:
    """The chapter's title in ``lang``: the first heading of its first prose cell
    in that language (``# Title``)."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("metadata", {}).get("lang") == lang:
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            first = source.lstrip().split("\n", 1)[0]
            if first.startswith("# "):
                return first[2:].strip()
            break
    raise ValueError(f'the first lang="{lang}" prose cell must open with the title, "# Title"')


def titles(chapter: Chapter) -> dict[str, str]:
    """Language -> the title of ``chapter``, from its executed notebook."""
    notebook = chapter.source.with_suffix(".ipynb")
    if not notebook.exists():
        raise ValueError(f"{notebook} is missing: run make notebooks NB={chapter.source}")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    try:
        return {lang: title(nb, lang) for lang in LANGUAGES}
    except ValueError as error:
        raise ValueError(f"{notebook.name}: {error}") from None


def main_path_words(notebook: dict) -> int:
    """English words of the notebook's prose outside folded cells; a formula counts one."""
    words = 0
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {})
        if cell["cell_type"] != "markdown" or meta.get("lang") != "en":
            continue
        if FOLDED & set(meta.get("tags", [])):
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " F ", text, flags=re.S)
        text = re.sub(r"<[^>]+>|\]\([^)]*\)", " ", text)
        words += len(re.findall(r"[A-Za-z0-9][\w'’.-]*", text))
    return words


def reading_minutes(notebook: dict) -> int:
    """Minutes to read the main path, to the nearest 5 (at least 5)."""
    return max(5, 5 * round(main_path_words(notebook) / WORDS_PER_MINUTE / 5))


def core_hours(chapters: list[Chapter]) -> int:
    """Hours to study the core path (the chapters with a ``path`` step), rounded."""
    minutes = 0
    for chapter in chapters:
        if chapter.path:
            notebook = json.loads(chapter.source.with_suffix(".ipynb").read_text(encoding="utf-8"))
            minutes += reading_minutes(notebook)
    return max(1, round(minutes / 60))


def nav_sections(chapters: list[Chapter]) -> list[dict]:
    """``[{part: [slug.ipynb, ...]}, ...]`` in the order of the registry."""
    sections: dict[str, list[str]] = {}
    for chapter in chapters:
        sections.setdefault(chapter.part["en"], []).append(f"{chapter.slug}.ipynb")
    return [{part: pages} for part, pages in sections.items()]


def expand(nav: list, placeholder: str, items: list) -> list:
    """``nav`` with each item equal to ``placeholder``, at any depth, replaced by ``items``."""
    out = []
    for item in nav:
        if item == placeholder:
            out += items
        elif isinstance(item, dict):
            out.append(
                {
                    k: expand(v, placeholder, items) if isinstance(v, list) else v
                    for k, v in item.items()
                }
            )
        else:
            out.append(item)
    return out


def table(chapters: list[Chapter], lang: str) -> str:
    """The home page's chapter table in ``lang``: a part named on its first row
    only, in a ``chapter-table`` block (site.css drops the part column on a phone)."""
    rows = ['<div class="chapter-table" markdown>', "", TABLE_HEADER[lang], "|---|---|---|"]
    part = None
    for chapter in chapters:
        notebook = json.loads(chapter.source.with_suffix(".ipynb").read_text(encoding="utf-8"))
        link = f"[{titles(chapter)[lang]}]({chapter.slug}.ipynb)"
        if chapter.path:
            link = f"{_CIRCLED[chapter.path - 1]} {link}"
        cells = (
            chapter.part[lang] if chapter.part[lang] != part else "",
            f"{link}<br>{MINUTES[lang].format(reading_minutes(notebook))}",
            chapter.summary[lang],
        )
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        part = chapter.part[lang]
    return "\n".join([*rows, "", "</div>"])


def _root(config) -> Path:
    return Path(config.config_file_path).parent


def on_config(config, **kwargs):
    chapters = read_registry(_root(config))
    config.nav = expand(config.nav, REGISTRY, nav_sections(chapters))
    i18n = config.plugins.get("i18n")
    for language in i18n.config.languages if i18n else []:
        if language.locale in LANGUAGES and language.locale != LANGUAGES[0]:
            parts = {c.part["en"]: c.part[language.locale] for c in chapters}
            language.nav_translations = {**parts, **(language.nav_translations or {})}
    return config


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri not in ("index.md", "index.ja.md"):
        return markdown
    if PLACEHOLDER not in markdown:
        log.warning(f"{page.file.src_uri}: no {PLACEHOLDER} where the chapter table goes")
        return markdown
    chapters = read_registry(_root(config))
    if CORE_HOURS not in markdown:
        log.warning(f"{page.file.src_uri}: no {CORE_HOURS} where the core path's hours go")
    markdown = markdown.replace(CORE_HOURS, str(core_hours(chapters)))
    return markdown.replace(PLACEHOLDER, table(chapters, config.theme["language"]))
