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

- on each chapter of the core path, a line under its title and one at its
  end that say which step it is and link the next step (the footer's
  "Next" follows the navigation, which leaves the path after most steps),
  and the step's circled number before its title in the navigation.

A notebook without an entry, or an entry without a notebook, stops the
build with a message that says which.
"""

from __future__ import annotations

import html
import json
import logging
import posixpath
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
CORE_PATH_TEXT = {  # {home}: the chapter list; {n}, {of}: the step; {next}: a link
    "en": {
        "top": '<a href="{home}">Core path</a>, step {n} of {of} · next: {next}',
        "top_last": '<a href="{home}">Core path</a>, step {n} of {of}, the last',
        "end": "Next on the core path: {next}",
        "end_last": 'This is the end of the core path. The other chapters in the <a href="{home}">'
        "chapter list</a> go deeper into one family or one implementation.",
        "label": "Core path",
        "footer": {"Previous": "Previous in the list", "Next": "Next in the list"},
        "aside_top": 'Off the <a href="{home}">core path</a>, for depth: read it after {after}',
        "aside_end": "Back on the core path: {next}",
        "aside_end_last": 'The core path ends with {after}; the <a href="{home}">chapter list</a> '
        "has the other chapters.",
    },
    "ja": {
        "top": '<a href="{home}">基本の順路</a>の {n} 章目（全 {of} 章）・次は {next}',
        "top_last": '<a href="{home}">基本の順路</a>の {n} 章目（全 {of} 章）、最後の章',
        "end": "基本の順路の次の章: {next}",
        "end_last": '基本の順路はここまでです。<a href="{home}">章の一覧</a>にあるほかの章は、'
        "1 つの手法や 1 つの実装をさらに深く扱います。",
        "label": "基本の順路",
        "footer": {"前": "一覧で前の章", "次": "一覧で次の章"},
        "aside_top": '<a href="{home}">基本の順路</a>には含まれない、1 つのテーマを深く扱う章です。'
        "先に読む章: {after}",
        "aside_end": "基本の順路に戻る: {next}",
        "aside_end_last": '基本の順路は {after} で終わりです。ほかの章は<a href="{home}">章の一覧</a>'
        "にあります。",
    },
}
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
    after: str | None = None  # off the path: the core chapter to read first


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
                path, after = entry.get("path"), entry.get("after")
                chapters.append(Chapter(slug, sources[slug], part_names, summary, path, after))
    steps = sorted(c.path for c in chapters if c.path is not None)
    if steps != list(range(1, len(steps) + 1)) or len(steps) > len(_CIRCLED):
        problems.append(
            f"the path steps are {steps}: number the core path 1, 2, ... up to {len(_CIRCLED)}, "
            "each once"
        )
    core = {c.slug for c in chapters if c.path is not None}
    for c in chapters:
        on_path = c.path is not None
        if (on_path and c.after is not None) or (not on_path and c.after not in core):
            problems.append(
                f"{c.slug}: a chapter off the core path names the core chapter to read "
                f"first (after: one of {', '.join(sorted(core))}); one on it names none"
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


def core_path_lines(chapters: list[Chapter], slug: str, lang: str) -> tuple[str, str] | None:
    """The lines that open and close the page of ``slug``: its step on the core
    path and the next, or, off the path, the step to read first and the way
    back (``None`` for a page that is no chapter); links are relative to the
    chapter's page."""
    steps = sorted((c for c in chapters if c.path), key=lambda c: c.path)
    here = next((c for c in chapters if c.slug == slug), None)
    if here is None:
        return None
    if here.path is None:
        return _aside_lines(steps, here, lang)
    text = CORE_PATH_TEXT[lang]
    fields = {"home": "../", "n": here.path, "of": len(steps)}
    if here.path == len(steps):
        top, end = text["top_last"].format(**fields), text["end_last"].format(**fields)
    else:
        link = _step_link(steps[here.path], lang)
        top = text["top"].format(next=link, **fields)
        end = text["end"].format(next=f"{link} →", **fields)
    return _nav_lines(top, end, text["label"])


def _step_link(chapter: Chapter, lang: str) -> str:
    name = html.escape(f"{_CIRCLED[chapter.path - 1]} {titles(chapter)[lang]}")
    return f'<a href="../{chapter.slug}/">{name}</a>'


def _aside_lines(steps: list[Chapter], here: Chapter, lang: str) -> tuple[str, str]:
    """The lines of a chapter off the core path: which step to read first,
    and the way back to the path after it."""
    text = CORE_PATH_TEXT[lang]
    first = next(c for c in steps if c.slug == here.after)
    after = _step_link(first, lang)
    top = text["aside_top"].format(home="../", after=after)
    if first.path == len(steps):
        end = text["aside_end_last"].format(home="../", after=after)
    else:
        end = text["aside_end"].format(next=f"{_step_link(steps[first.path], lang)} →")
    return _nav_lines(top, end, text["label"])


def _nav_lines(top: str, end: str, label: str) -> tuple[str, str]:
    label = html.escape(label, quote=True)
    return tuple(
        f'<nav class="core-path core-path--{where}" aria-label="{label}"><p>{line}</p></nav>'
        for where, line in (("top", top), ("end", end))
    )


_NAV_TITLE = re.compile(
    r'(<(?:a href="(?P<href>[^"]*)" class="md-nav__link[^"]*"'
    r'|label class="md-nav__link md-nav__link--active" for="__toc")>\s*'
    r'<span class="md-ellipsis">\s*)'
)


def mark_core_path_in_nav(output: str, page_url: str, chapters: list[Chapter]) -> str:
    """The navigation's links to core chapters with the step's circled number
    in front of the title; ``page_url`` is the page's own (``ja/alibi/``)."""
    step = {c.slug: c.path for c in chapters if c.path}

    def mark(m: re.Match) -> str:
        href = m["href"] if m["href"] is not None else "./"  # the page's own entry
        if "#" in href or ":" in href or href.startswith("/"):
            return m[0]
        target = posixpath.normpath(posixpath.join(page_url, href))
        target = target.removeprefix(f"{LANGUAGES[1]}/")  # a chapter is /slug/ or /ja/slug/
        if target not in step:
            return m[0]
        return f'{m[1]}<span class="core-step">{_CIRCLED[step[target] - 1]}</span> '

    return _NAV_TITLE.sub(mark, output)


def _root(config) -> Path:
    return Path(config.config_file_path).parent


_chapters: list[Chapter] = []  # the registry of this build, read once in on_config


def on_config(config, **kwargs):
    global _chapters
    chapters = _chapters = read_registry(_root(config))
    config.nav = expand(config.nav, REGISTRY, nav_sections(chapters))
    i18n = config.plugins.get("i18n")
    for language in i18n.config.languages if i18n else []:
        if language.locale in LANGUAGES and language.locale != LANGUAGES[0]:
            parts = {c.part["en"]: c.part[language.locale] for c in chapters}
            language.nav_translations = {**parts, **(language.nav_translations or {})}
    return config


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    slug = page.file.src_uri.rsplit("/", 1)[-1].split(".")[0]  # alibi.ipynb, alibi.ja.ipynb
    lines = core_path_lines(_chapters, slug, config.theme["language"])
    if lines is None:
        return content
    top, end = lines
    # under the title and the notebook's toolbar (hooks/language.py puts it there)
    anchor = content.find('<p class="nb-toolbar">')
    cut = content.find("</p>", anchor) + 4 if anchor >= 0 else content.find("</h1>") + 5
    if cut < 5:
        cut = 0
    return content[:cut] + top + content[cut:] + end


_FOOTER_DIRECTION = re.compile(r'(<span class="md-footer__direction">\s*)([^<\s]+)(\s*</span>)')


def name_footer_links(output: str, lang: str) -> str:
    """The footer's Previous and Next of a chapter renamed "... in the list":
    they follow the chapter list, and the core-path line may name another
    next step (a reader found two different "Next" at a page's end)."""
    names = CORE_PATH_TEXT[lang]["footer"]
    return _FOOTER_DIRECTION.sub(lambda m: m[1] + names.get(m[2], m[2]) + m[3], output)


def on_post_page(output, page, config):
    if page.file.src_uri.endswith(".ipynb"):
        output = name_footer_links(output, config.theme["language"])
    return mark_core_path_in_nav(output, page.url, _chapters)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri not in ("index.md", "index.ja.md"):
        return markdown
    if PLACEHOLDER not in markdown:
        log.warning(f"{page.file.src_uri}: no {PLACEHOLDER} where the chapter table goes")
        return markdown
    chapters = _chapters
    if CORE_HOURS not in markdown:
        log.warning(f"{page.file.src_uri}: no {CORE_HOURS} where the core path's hours go")
    markdown = markdown.replace(CORE_HOURS, str(core_hours(chapters)))
    return markdown.replace(PLACEHOLDER, table(chapters, config.theme["language"]))
