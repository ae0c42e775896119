"""MkDocs hook: one bilingual notebook becomes an English and a Japanese page.

Source -> site, one way (ARCHITECTURE.md draws the whole flow):

    notebooks/NN-slug.ipynb  (executed; prose cells tagged lang="en"/"ja")
      -> docs/slug.ipynb     (code cells + English prose)      -> /slug/
      -> docs/slug.ja.ipynb  (code cells + Japanese prose)     -> /ja/slug/

The copies in docs/ are generated (ignored by git) and rewritten only when
their content changes, so `mkdocs serve` does not rebuild in a loop. Each
chapter page gets, under its title, a link to its notebook (copied next to
the page) and one to Colab.

What mkdocs-jupyter leaves behind on a notebook page is repaired by hooks
of one concern each (every repair is checked by tests/site/):
hooks/headings.py (heading ids, table of contents), hooks/folding.py
(folded solutions), hooks/page_weight.py (shared CSS, script and figure
files, figures' alternative text), hooks/code_blocks.py (lighter code
blocks, deferred colouring), hooks/alternate_links.py (head links that
made Material fetch a missing sitemap); hooks/japanese_lines.py joins the
lines of Japanese text.
"""

from __future__ import annotations

import copy
import html
import json
import posixpath
import re
from pathlib import Path

import mkdocs.utils

try:  # imported as the package hooks (tests, tools)
    from hooks.japanese_lines import join_cjk_lines
except ModuleNotFoundError:  # loaded by MkDocs from its path, with this folder on sys.path
    from japanese_lines import join_cjk_lines

#: language -> file-name suffix (mkdocs-static-i18n "suffix" structure)
LANGUAGES = {"en": "", "ja": ".ja"}
NOTEBOOK_NAME = re.compile(r"^(?P<number>\d+)-(?P<slug>[a-z0-9][a-z0-9-]*)\.ipynb$")

# mkdocs-static-i18n rebuilds every file as a plain mkdocs File, which drops
# mkdocs-jupyter's wrapper: a notebook would then be copied verbatim, raw JSON
# as index.html, and `--strict` would still pass. Registering .ipynb as a
# documentation extension keeps notebooks pages; mkdocs-jupyter still renders
# them. tests/site/test_build.py fails if a page holds notebook JSON.
if ".ipynb" not in mkdocs.utils.markdown_extensions:
    mkdocs.utils.markdown_extensions = (*mkdocs.utils.markdown_extensions, ".ipynb")


# --------------------------------------------------------------------------
# The language split


def page_slug(notebook: Path) -> str:
    """``notebooks/01-sinusoidal.ipynb`` -> ``sinusoidal`` (URLs survive renumbering)."""
    match = NOTEBOOK_NAME.match(notebook.name)
    if match is None:
        raise ValueError(f"notebook name must look like NN-slug.ipynb, got {notebook.name!r}")
    return match["slug"]


# Links between pages are written so that they also work in Jupyter (see
# CONTRIBUTING.md): a chapter is its notebook, `01-sinusoidal.ipynb#anchor`;
# a hand-written page is its source, `../docs/glossary.md#anchor` (or
# `glossary.ja.md` in Japanese cells). On the site a chapter lives at
# /slug/ and a page at /page/, each language under its own prefix, so the
# relative `../slug/` reaches the twin in the reader's language.
_LINK = re.compile(
    r"(?P<open>\]\(\s*<?|^[ \t]*\[[^\]\n]+\]:[ \t]*<?)"
    r"(?P<path>\d+-(?P<slug>[a-z0-9][a-z0-9-]*)\.ipynb"
    r"|\.\./docs/(?P<page>[^\s)#\"<>]+?)(?:\.ja)?\.md)"
    r"(?=[#)\s>\"]|$)",
    re.MULTILINE,
)


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def link_targets(markdown: str) -> list[str]:
    """The chapter notebooks and docs pages that ``markdown`` links to, as written."""
    return [m["path"] for m in _LINK.finditer(markdown)]


def site_links(markdown: str) -> str:
    """Rewrite links to chapters and docs pages into the site's URLs.

    ``](01-sinusoidal.ipynb#a)`` -> ``](../sinusoidal/#a)``;
    ``](../docs/glossary.ja.md#a)`` -> ``](../glossary/#a)``;
    ``../docs/index.md`` -> ``../``. Anchors and titles are kept.
    """

    def repl(m: re.Match) -> str:
        if m["slug"] is not None:
            url = f"../{m['slug']}/"
        else:
            page = m["page"]
            url = "../" if page == "index" else f"../{page.removesuffix('/index')}/"
        return m["open"] + url

    return _LINK.sub(repl, markdown)


def missing_link_targets(nb: dict, source_dir: Path, docs_dir: Path) -> list[str]:
    """The link targets of ``nb``'s prose that name no notebook or page.

    Targets are resolved as Jupyter resolves them, from ``source_dir``: a
    chapter link names a notebook there, ``../docs/x.md`` a page in
    ``docs_dir``.
    """
    missing = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for path in link_targets(_source(cell)):
            target = docs_dir / path.removeprefix("../docs/") if path.startswith("../") else None
            exists = (source_dir / path).exists() if target is None else target.exists()
            if not exists and path not in missing:
                missing.append(path)
    return missing


def split_notebook(nb: dict, lang: str) -> dict:
    """Return the notebook a reader of ``lang`` sees.

    Keeps code cells (with their outputs) and the prose cells whose
    ``metadata.lang`` is ``lang``; prose cells of the other languages are
    dropped. The ``lang`` tag itself is removed from the kept cells, and the
    notebook's metadata records the language.

    A code cell that draws figures carries their alternative texts as
    ``metadata.alt = {"en": [...], "ja": [...]}``, one per figure in
    order; the split keeps that language's texts, in document order, as
    ``metadata.figure_alt`` (``None`` where a figure has none).
    """
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    out = copy.deepcopy(nb)
    cells, alts = [], []
    for cell in out["cells"]:
        cell_lang = cell.get("metadata", {}).get("lang")
        if cell["cell_type"] == "markdown" and cell_lang is None:
            raise ValueError(f"markdown cell {cell.get('id', '?')!r} has no lang tag")
        if cell_lang not in (None, lang):
            continue
        cell.get("metadata", {}).pop("lang", None)
        if cell["cell_type"] == "markdown" and lang == "ja":
            source = cell["source"]
            joined = join_cjk_lines(source if isinstance(source, str) else "".join(source))
            cell["source"] = joined
        if cell["cell_type"] == "markdown":
            cell["source"] = site_links(_source(cell))
        cell_alts = cell.get("metadata", {}).pop("alt", {}).get(lang, [])
        figures = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        alts += [cell_alts[k] if k < len(cell_alts) else None for k in range(len(figures))]
        cells.append(cell)
    out["cells"] = cells
    out.setdefault("metadata", {}).update(language=lang, figure_alt=alts)
    return out


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def split_all(source_dir: Path, docs_dir: Path) -> list[Path]:
    """Write every language copy of every notebook; return the paths written."""
    written = []
    seen: dict[str, Path] = {}
    for src in sorted(source_dir.glob("[0-9]*.ipynb")):
        slug = page_slug(src)
        if slug in seen:
            raise ValueError(f"{src.name} and {seen[slug].name} share the page slug {slug!r}")
        seen[slug] = src
        nb = json.loads(src.read_text(encoding="utf-8"))
        missing = missing_link_targets(nb, source_dir, docs_dir)
        if missing:
            raise ValueError(f"{src.name} links to {', '.join(missing)}, which do not exist")
        for lang, suffix in LANGUAGES.items():
            target = docs_dir / f"{slug}{suffix}.ipynb"
            split = split_notebook(nb, lang)
            split["metadata"]["source"] = f"notebooks/{src.name}"  # for the Colab link
            _write_if_changed(target, json.dumps(split, ensure_ascii=False, indent=1) + "\n")
            written.append(target)
    # Remove copies whose source notebook is gone, so no orphan page is built.
    for stale in docs_dir.glob("*.ipynb"):
        if stale not in written:
            stale.unlink()
    return written


def on_pre_build(config, **kwargs):
    root = Path(config.config_file_path).parent
    split_all(root / "notebooks", Path(config.docs_dir))


# --------------------------------------------------------------------------
# The links under a chapter's title


def _is_notebook(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


TOOLBAR_TEXT = {
    "en": {
        "download": "Download this notebook (.ipynb)",
        "colab": "Open in Colab",
        "colab_note": "On Colab, first run <code>%pip install git+{repo}</code> in a cell.",
    },
    "ja": {
        "download": "ノートブックをダウンロード (.ipynb)",
        "colab": "Colab で開く",
        "colab_note": "Colab では、最初にセルで <code>%pip install git+{repo}</code> を実行してください。",
    },
}


def notebook_toolbar(download: str, source: str | None, repo_url: str | None, lang: str) -> str:
    """The links under a chapter's title: its notebook, and Colab where the
    repository is on GitHub (Colab opens GitHub notebooks by path)."""
    text = TOOLBAR_TEXT[lang]
    links = [f'<a class="md-button" href="{download}" download>{text["download"]}</a>']
    note = ""
    repo = (repo_url or "").rstrip("/")
    if source and repo.startswith("https://github.com/"):
        colab = f"https://colab.research.google.com/github/{repo.removeprefix('https://github.com/')}/blob/main/{source}"
        links.append(f'<a class="md-button" href="{colab}" rel="noopener">{text["colab"]}</a>')
        note = f"<br><small>{text['colab_note'].format(repo=html.escape(repo))}</small>"
    return f'<p class="nb-toolbar">{" ".join(links)}{note}</p>'


def on_page_content(content, page, config, files):
    if not _is_notebook(page):
        return content
    lang = config.theme["language"]  # mkdocs-static-i18n sets it for each language's build
    # where the notebook came from, for the Colab link
    page.notebook_metadata = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))[
        "metadata"
    ]
    toolbar = notebook_toolbar(
        posixpath.basename(page.file.src_uri),
        page.notebook_metadata.get("source"),
        config.repo_url,
        lang,
    )
    # Right under the title, where a reader looks for it.
    h1_end = content.find("</h1>")
    if h1_end < 0:
        return toolbar + content
    return content[: h1_end + 5] + toolbar + content[h1_end + 5 :]


def on_post_page(output, page, config):
    if not _is_notebook(page):
        return output
    # The notebook this page was made from, for the download link.
    source = Path(page.file.abs_src_path)
    target = Path(page.file.abs_dest_path).parent / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return output
