"""MkDocs hook: the API reference, generated from posenc and one list.

docs/api.yml groups posenc's modules into families and gives each public
name its chapter and its summary in Japanese (its English summary is the
first line of its docstring). From it, ``posenc.__all__`` and the
docstrings, the hook builds at every build:

- one reference page per family, docs/api/PAGE.md (generated, ignored by
  git), holding a ``::: posenc.name`` entry for each public name of its
  modules, in the order of the source, which mkdocstrings expands;
- the "API reference" section of the navigation, where mkdocs.yml's nav
  holds the item ``docs/api.yml``;
- on the overview pages (docs/api.md, docs/api.ja.md), the list of those
  pages and the tables of names (signature, summary, chapter), where
  ``<!-- generated: api pages -->`` and ``<!-- generated: api names -->``
  stand.

A public name without its Japanese summary, an entry without a name, or
a chapter that does not exist stops the build with a message that says
which (tests/test_api_reference.py runs the same check). A module that no
family lists gets a page of its own, titled by its docstring's first line.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

try:  # imported as the package hooks (tests, tools)
    from hooks.chapters import REGISTRY as CHAPTERS
    from hooks.chapters import expand, read_registry, titles
except ModuleNotFoundError:  # loaded by MkDocs from its path, with this folder on sys.path
    from chapters import REGISTRY as CHAPTERS
    from chapters import expand, read_registry, titles

REGISTRY = "docs/api.yml"
PAGES_DIR = "api"  # the generated pages, under docs/
PLACEHOLDERS = {"pages": "<!-- generated: api pages -->", "names": "<!-- generated: api names -->"}
LANGUAGES = ("en", "ja")
TABLE_HEADER = {"en": "| Name | What it computes | Chapter |", "ja": "| 名前 | 計算するもの | 章 |"}
NO_CHAPTER = "No chapter yet: the docstring cites the paper."

log = logging.getLogger("mkdocs.hooks.api_reference")  # a warning fails a strict build


@dataclass(frozen=True, eq=False)  # one object per family, hashed by identity
class Family:
    page: str  # docs/api/PAGE.md
    modules: tuple[str, ...]
    title: dict[str, str]  # language -> title
    papers: str


@dataclass(frozen=True)
class Entry:
    name: str
    family: Family
    signature: str  # "apply_rope(x, positions, *, base, ...)"
    summary: dict[str, str]  # language -> one line
    chapter: str | None  # slug


def summary_line(obj) -> str:
    """The first paragraph of ``obj``'s docstring on one line, in Markdown
    (reStructuredText's ``code`` and :role:`code` become `code`)."""
    first = (inspect.getdoc(obj) or "").split("\n\n", 1)[0]
    text = " ".join(first.split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def signature(name: str, obj) -> str:
    """``name(a, b, *, c)``: the parameter names, without defaults or types."""
    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return name
    parts, star = [], False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star = True
        elif p.kind is p.KEYWORD_ONLY and not star:
            parts += ["*", p.name]
            star = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            parts.append(p.name)
    return f"{name}({', '.join(parts)})"


def own_family(module_name: str) -> Family:
    """The family of a module that docs/api.yml does not list: its page is
    named after the module, its title (in both languages) is the first
    line of the module's docstring, and it cites no papers."""
    try:
        doc = inspect.getdoc(importlib.import_module(module_name)) or module_name
    except ImportError:
        doc = module_name
    title = doc.split("\n", 1)[0].strip().rstrip(".")
    page = module_name.rsplit(".", 1)[-1].strip("_").replace("_", "-")
    return Family(page, (module_name,), {lang: title for lang in LANGUAGES}, "")


def _source_line(obj) -> int:
    try:
        return inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return 1 << 30  # no source to order by: last


def read_reference(root: Path, package=None) -> list[Entry]:
    """Every public name of ``package`` (posenc) as the reference shows it, in page order."""
    data = yaml.safe_load((root / REGISTRY).read_text(encoding="utf-8"))
    families = [
        Family(f["page"], tuple(f["modules"]), {lang: f[lang] for lang in LANGUAGES}, f["papers"])
        for f in data["families"]
    ]
    by_module = {m: f for f in families for m in f.modules}
    known = data.get("names") or {}
    module = package or importlib.import_module("posenc")
    public = [n for n in module.__all__ if not n.startswith("_")]
    chapters = {c.slug for c in read_registry(root)}
    entries, problems = [], []
    for name in public:
        obj = getattr(module, name)
        home = getattr(obj, "__module__", None) or module.__name__
        if home not in by_module:  # a module no family lists: a family of its own
            by_module[home] = own_family(home)
            families.append(by_module[home])
        family = by_module[home]
        entry = known.get(name) or {}
        if not str(entry.get("ja") or "").strip():
            problems.append(
                f"{name}: no entry under `names`: add `{name}: {{chapter: SLUG, ja: ...}}` "
                "(ja: the first line of its docstring in Japanese; chapter: the slug of "
                "the chapter that derives it, or leave it out)"
            )
        chapter = entry.get("chapter")
        if chapter is not None and chapter not in chapters:
            problems.append(f"{name}: chapter {chapter!r} is not in {CHAPTERS}")
        summary = {"en": summary_line(obj), "ja": " ".join(str(entry.get("ja", "")).split())}
        entries.append(Entry(name, family, signature(name, obj), summary, chapter))
    problems += [
        f"{name}: listed under `names`, but {module.__name__} does not export it: remove it"
        for name in known
        if name not in public
    ]
    problems += [
        f"family {f.page}: no public name comes from {', '.join(f.modules)}: remove it"
        for f in families
        if not any(e.family is f for e in entries)
    ]
    if problems:
        raise ValueError(f"{REGISTRY}:\n  " + "\n  ".join(problems))
    order = {f.page: k for k, f in enumerate(families)}

    def key(e: Entry):
        obj = getattr(module, e.name)
        return order[e.family.page], e.family.modules.index(obj.__module__), _source_line(obj)

    return sorted(entries, key=key)


def families(entries: list[Entry]) -> list[Family]:
    return list(dict.fromkeys(e.family for e in entries))


def page_markdown(family: Family, entries: list[Entry], chapter_titles: dict[str, str]) -> str:
    """The Markdown of ``family``'s reference page (English)."""
    modules = ", ".join(f"`{m}`" for m in family.modules)
    lines = [
        f"# {family.title['en']}",
        "",
        f"Generated from the docstrings of {modules} when the site is built "
        "(every name is importable from `posenc`). Back to the [overview](../api.md).",
        "",
        *([f"**Papers.** {family.papers}", ""] if family.papers else []),
        "**What is checked where**, and which calls read values back to the host: see "
        "[graph safety](../api.md#graph-safety-and-host-reads) on the overview page.",
    ]
    for e in entries:
        if e.family is not family:
            continue
        lines += ["", f"::: posenc.{e.name}", ""]
        if e.chapter is None:
            lines.append(NO_CHAPTER)
        else:
            lines.append(
                f"Derived in the chapter [{chapter_titles[e.chapter]}](../{e.chapter}.ipynb)."
            )
    return "\n".join(lines) + "\n"


def page_list(entries: list[Entry], lang: str) -> str:
    return "\n".join(f"- [{f.title[lang]}]({PAGES_DIR}/{f.page}.md)" for f in families(entries))


def name_tables(entries: list[Entry], lang: str, chapter_titles: dict[str, str]) -> str:
    """One section per family: a table of its names, summaries and chapters."""
    out = []
    for family in families(entries):
        out += [f"## {family.title[lang]}", "", TABLE_HEADER[lang], "|---|---|---|"]
        for e in entries:
            if e.family is family:
                chapter = f"[{chapter_titles[e.chapter]}]({e.chapter}.ipynb)" if e.chapter else "—"
                cells = (f"`{e.signature}`", e.summary[lang], chapter)
                out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def write_pages(docs_dir: Path, entries: list[Entry], chapter_titles: dict[str, str]) -> list[Path]:
    """Write the reference pages (only those that changed); remove stale ones."""
    folder = docs_dir / PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for family in families(entries):
        path, text = folder / f"{family.page}.md", page_markdown(family, entries, chapter_titles)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    for stale in folder.glob("*.md"):
        if stale not in written:
            stale.unlink()
    return written


def chapter_titles(root: Path, lang: str) -> dict[str, str]:
    return {c.slug: titles(c)[lang] for c in read_registry(root)}


_built: dict = {}  # this build's entries, read once in on_config


def on_config(config, **kwargs):
    root = Path(config.config_file_path).parent
    _built["entries"] = entries = read_reference(root)
    pages = [f"{PAGES_DIR}/{f.page}.md" for f in families(entries)]
    config.nav = expand(config.nav, REGISTRY, pages)
    return config


def on_pre_build(config, **kwargs):
    root = Path(config.config_file_path).parent
    write_pages(Path(config.docs_dir), _built["entries"], chapter_titles(root, "en"))


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri not in ("api.md", "api.ja.md"):
        return markdown
    lang = config.theme["language"]
    entries = _built["entries"]
    for kind, placeholder in PLACEHOLDERS.items():
        if placeholder not in markdown:
            log.warning(f"{page.file.src_uri}: no {placeholder}")
            continue
        if kind == "pages":
            text = page_list(entries, lang)
        else:
            text = name_tables(
                entries, lang, chapter_titles(Path(config.config_file_path).parent, lang)
            )
        markdown = markdown.replace(placeholder, text)
    return markdown
