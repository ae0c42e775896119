"""MkDocs hook: one bilingual notebook becomes an English and a Japanese notebook.

Source -> site, one way (ARCHITECTURE.md draws the whole flow):

    notebooks/NN-slug.ipynb  (executed; prose cells tagged lang="en"/"ja")
      -> docs/slug.ipynb     (code cells + English prose)      -> /slug/
      -> docs/slug.ja.ipynb  (code cells + Japanese prose)     -> /ja/slug/

The copies in docs/ are generated (ignored by git) and rewritten only when
their content changes, so `mkdocs serve` does not rebuild in a loop. Links
between chapters and pages become the site's URLs; Japanese lines are
joined where Markdown would show a space Japanese does not have; the links
under a chapter's title (its notebook, Open in Colab) are made here too.
The hooks of one concern each (hooks/headings.py, hooks/folding.py,
hooks/page_weight.py, hooks/code_blocks.py, ...) repair the rendered pages;
hooks/japanese_lines.py holds the line join.
"""

from __future__ import annotations

import copy
import html
import json
import posixpath
import re
import stat
from collections.abc import Callable
from pathlib import Path

import mkdocs.utils

try:  # imported as the package hooks (tests, tools)
    from hooks.japanese_lines import join_cjk_lines
except ModuleNotFoundError:  # loaded by MkDocs from its path, with this folder on sys.path
    from japanese_lines import join_cjk_lines

#: language -> file-name suffix (mkdocs-static-i18n "suffix" structure)
LANGUAGES = {"en": "", "ja": ".ja"}
NOTEBOOK_NAME = re.compile(r"^(?P<number>\d+)-(?P<slug>[a-z0-9][a-z0-9-]*)\.ipynb$")


def page_slug(notebook: Path) -> str:
    """``notebooks/01-sinusoidal.ipynb`` -> ``sinusoidal`` (URLs survive renumbering)."""
    match = NOTEBOOK_NAME.match(notebook.name)
    if match is None:
        raise ValueError(f"notebook name must look like NN-slug.ipynb, got {notebook.name!r}")
    return match["slug"]


# mkdocs-static-i18n rebuilds every file as a plain mkdocs File, which drops
# mkdocs-jupyter's wrapper: a notebook would then be copied verbatim, raw JSON
# as index.html, and `--strict` would still pass. Registering .ipynb as a
# documentation extension keeps notebooks pages; mkdocs-jupyter still renders
# them. tests/site/test_build.py fails if a page holds notebook JSON.
if ".ipynb" not in mkdocs.utils.markdown_extensions:
    mkdocs.utils.markdown_extensions = (*mkdocs.utils.markdown_extensions, ".ipynb")


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


def site_links(markdown: str, base: str = "../") -> str:
    """Rewrite links to chapters and docs pages into the site's URLs.

    ``](01-sinusoidal.ipynb#a)`` -> ``](../sinusoidal/#a)``;
    ``](../docs/glossary.ja.md#a)`` -> ``](../glossary/#a)``;
    ``../docs/index.md`` -> ``../``. Anchors and titles are kept. ``base``
    is the language's home: ``../`` seen from a page, the site's absolute
    URL in a notebook that is read elsewhere.
    """

    def repl(m: re.Match) -> str:
        if m["slug"] is not None:
            url = f"{base}{m['slug']}/"
        else:
            page = m["page"]
            url = base if page == "index" else f"{base}{page.removesuffix('/index')}/"
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


def split_notebook(nb: dict, lang: str, links: Callable[[str], str] | None = site_links) -> dict:
    """Return the notebook a reader of ``lang`` sees.

    Keeps code cells (with their outputs) and the prose cells whose
    ``metadata.lang`` is ``lang``; prose cells of the other languages are
    dropped. The ``lang`` tag itself is removed from the kept cells, and the
    notebook's metadata records the language. ``links`` rewrites the links
    of the prose (``None`` keeps them as written, for Jupyter).

    A code cell that draws figures carries their alternative texts as
    ``metadata.alt = {"en": [...], "ja": [...]}``, one per figure in
    order; the split keeps that language's texts, in document order, as
    ``metadata.figure_alt`` (``None`` where a figure has none). A cell
    tagged ``check`` carries ``metadata.summary = {"en": ..., "ja": ...}``;
    the split keeps that language's line (hooks/folding.py shows it).
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
        if cell["cell_type"] == "markdown" and links is not None:
            cell["source"] = links(_source(cell))
        summary = cell.get("metadata", {}).pop("summary", None)
        if isinstance(summary, dict):  # a check cell's summary line, in both languages
            cell["metadata"]["summary"] = summary.get(lang)
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
# The notebook a reader downloads or opens in Colab


def home_url(site_url: str, lang: str) -> str:
    """The site's home in ``lang``: ``https://site/`` or ``https://site/ja/``."""
    return site_url.rstrip("/") + "/" + ("" if lang == "en" else f"{lang}/")


def install_requirements(repo_url: str) -> dict[str, str]:
    """Module -> what pip installs when it is missing: posenc and its lab from
    the repository, matplotlib within the range of pyproject's site extra."""
    repo = repo_url.rstrip("/")
    return {
        "posenc": f"posenc @ git+{repo}",
        "posenc_lab": f"posenc-lab @ git+{repo}#subdirectory=lab",
        "matplotlib": "matplotlib>=3.8,<4",
    }


INSTALL_COMMENT = {
    "en": "# On Colab or in a fresh environment: install what this notebook imports.",
    "ja": "# Colab や新しい環境では、このノートブックが使うパッケージを入れます。",
}


def install_cell(repo_url: str, lang: str) -> dict:
    """A code cell that pip-installs posenc, its lab and matplotlib where they
    are missing, and does nothing where they are installed."""
    needed = "".join(
        f"    {json.dumps(m)}: {json.dumps(r)},\n"
        for m, r in install_requirements(repo_url).items()
    )
    source = (
        f"{INSTALL_COMMENT[lang]}\n"
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n\n"
        f"_needed = {{\n{needed}}}\n"
        "_missing = [r for m, r in _needed.items() if importlib.util.find_spec(m) is None]\n"
        "if _missing:\n"
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *_missing], check=True)\n'
        "    importlib.invalidate_caches()"
    )
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": "install-posenc",
        "metadata": {},
        "outputs": [],
        "source": source,
    }


def reader_notebook(nb: dict, lang: str, site_url: str, repo_url: str) -> dict:
    """``lang``'s notebook as a reader runs it anywhere: links to the site's
    pages (absolute), no jupytext pairing, and :func:`install_cell` first."""
    base = home_url(site_url, lang)
    out = split_notebook(nb, lang, links=lambda text: site_links(text, base))
    out["metadata"].pop("jupytext", None)
    for cell in out["cells"]:  # JupyterLab shows the proof collapsed, as the site does
        tags = cell.get("metadata", {}).get("tags", [])
        if "check" in tags:
            cell["metadata"]["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
        elif "figure" in tags:
            cell["metadata"]["jupyter"] = {"source_hidden": True}
    out["cells"].insert(0, install_cell(repo_url, lang))
    return out


#: The branch that holds the notebooks the site serves, at their paths on
#: the site (the deploy job of .github/workflows/ci.yml pushes it): Colab
#: opens a notebook from a GitHub branch, never from a web page.
NOTEBOOK_BRANCH = "notebooks"


def colab_url(repo_url: str | None, path: str) -> str | None:
    """Colab's address of the notebook at site-relative ``path`` on the
    branch :data:`NOTEBOOK_BRANCH`; ``None`` unless the repository is on GitHub."""
    repo = (repo_url or "").rstrip("/")
    if not repo.startswith("https://github.com/"):
        return None
    owner_name = repo.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_name}/blob/{NOTEBOOK_BRANCH}/{path}"


TOOLBAR_TEXT = {
    "en": {"download": "Download this notebook (.ipynb)", "colab": "Open in Colab"},
    "ja": {"download": "ノートブックをダウンロード (.ipynb)", "colab": "Colab で開く"},
}


def notebook_toolbar(download: str, colab: str | None, lang: str) -> str:
    """The links under a chapter's title: its notebook, and Colab where
    there is a Colab address."""
    text = TOOLBAR_TEXT[lang]
    links = [f'<a class="md-button" href="{download}" download>{text["download"]}</a>']
    if colab:
        href = html.escape(colab, quote=True)
        links.append(f'<a class="md-button" href="{href}" rel="noopener">{text["colab"]}</a>')
    return f'<p class="nb-toolbar">{" ".join(links)}</p>'


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    download = posixpath.basename(page.file.src_uri)
    toolbar = notebook_toolbar(
        download,
        colab_url(config.repo_url, page.url + download),
        config.theme["language"],  # mkdocs-static-i18n sets it for each language's build
    )
    # Right under the title, where a reader looks for it.
    h1_end = content.find("</h1>")
    if h1_end < 0:
        return toolbar + content
    return content[: h1_end + 5] + toolbar + content[h1_end + 5 :]


def on_post_page(output, page, config):
    """Next to each chapter's page, the notebook of its download link."""
    if page.file.src_uri.endswith(".ipynb"):
        root = Path(config.config_file_path).parent
        source = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))
        nb = json.loads((root / source["metadata"]["source"]).read_text(encoding="utf-8"))
        lang = source["metadata"]["language"]
        reader = reader_notebook(nb, lang, config.site_url, config.repo_url)
        target = Path(page.file.abs_dest_path).parent / posixpath.basename(page.file.src_uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(reader, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return output


# --------------------------------------------------------------------------
# Single-language copies to open in JupyterLab (make lab-en, make lab-ja)

GENERATED_NOTE = {
    "en": (
        "> **A generated copy: edits made here are not kept.** `make lab-{lang}` made "
        "this English-only copy of [`notebooks/{name}`](../notebooks/{name}), which is "
        "paired with `notebooks/{py}`, the chapter's source. To change the chapter, "
        "edit it there."
    ),
    "ja": (
        "> **自動生成されたコピーです。ここでの編集は保存されません。** "
        "[`notebooks/{name}`](../notebooks/{name}) の日本語だけのコピーで、"
        "`make lab-{lang}` が作りました。章の元は、このノートブックと対になった "
        "`notebooks/{py}` です。章を直すときは、そちらを編集してください。"
    ),
}


def lab_notebook(nb: dict, lang: str, name: str) -> dict:
    """``lang``'s copy of the chapter ``notebooks/name``, links kept for
    Jupyter, marked as generated by a first prose cell and its metadata."""
    out = split_notebook(nb, lang, links=None)
    out["metadata"].pop("jupytext", None)  # no pairing: the source is the chapter
    out["metadata"]["generated_from"] = f"notebooks/{name}"
    py = name.removesuffix(".ipynb") + ".py"
    note = GENERATED_NOTE[lang].format(lang=lang, name=name, py=py)
    out["cells"].insert(
        0, {"cell_type": "markdown", "id": "generated-copy", "metadata": {}, "source": note}
    )
    return out


#: Pairing is off in a folder of copies (the repository's jupytext.toml pairs
#: every notebook under it with a .py).
COPIES_JUPYTEXT_TOML = (
    '# Generated copies (make lab-en, make lab-ja): no pairing.\nformats = "ipynb"\n'
)


def write_lab_copies(source_dir: Path, out_dir: Path, lang: str) -> list[Path]:
    """Write ``lang``'s read-only copy of every chapter of ``source_dir`` into
    ``out_dir`` (same file names, so links between chapters work), remove
    copies whose chapter is gone; return the paths written."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "jupytext.toml").write_text(COPIES_JUPYTEXT_TOML, encoding="utf-8")
    written = []
    for src in sorted(source_dir.glob("[0-9]*.ipynb")):
        page_slug(src)  # the name check
        nb = json.loads(src.read_text(encoding="utf-8"))
        target = out_dir / src.name
        target.unlink(missing_ok=True)  # read-only from the last run
        copy_ = lab_notebook(nb, lang, src.name)
        target.write_text(json.dumps(copy_, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # JupyterLab opens it read-only
        written.append(target)
    for stale in out_dir.glob("*.ipynb"):
        if stale not in written:
            stale.unlink()
    return written
