"""Unit tests of the site's MkDocs hooks (no build needed)."""

from __future__ import annotations

import base64
import html as htmllib
import json
import re
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from hooks import (
    alternate_links,
    api_links,
    api_reference,
    assets,
    book,
    chapters,
    code_blocks,
    folding,
    headings,
    japanese_lines,
    language,
    math,
    notebook_css,
    page_weight,
    repo_links,
    search,
)

ROOT = Path(__file__).resolve().parents[2]


def _cell(kind, source, lang=None, **extra):
    meta = {"lang": lang} if lang else {}
    return {"cell_type": kind, "source": source, "metadata": meta, **extra}


BILINGUAL = {
    "cells": [
        _cell("markdown", "# Title", "en"),
        _cell("markdown", "# 題名", "ja"),
        _cell("code", "x = 1", outputs=[], execution_count=1),
        _cell("markdown", "Text $p$", "en"),
        _cell("markdown", "本文 $p$", "ja"),
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.mark.parametrize(
    "lang, title, text", [("en", "# Title", "Text $p$"), ("ja", "# 題名", "本文 $p$")]
)
def test_split_keeps_code_and_one_language(lang, title, text):
    out = language.split_notebook(BILINGUAL, lang)
    assert [c["source"] for c in out["cells"]] == [title, "x = 1", text]
    assert all("lang" not in c["metadata"] for c in out["cells"])
    assert out["metadata"]["language"] == lang
    assert BILINGUAL["cells"][0]["metadata"] == {"lang": "en"}, "input must not be modified"


def test_split_keeps_each_language_figure_texts_in_order():
    png = {"output_type": "display_data", "data": {"image/png": "iVBO"}, "metadata": {}}
    alt = {"en": ["first", "second"], "ja": ["一つ目", "二つ目"]}
    nb = {
        "cells": [
            _cell("code", "plot()", outputs=[png, png]),
            _cell("code", "plot()", outputs=[png]),
        ],
        "metadata": {},
    }
    nb["cells"][0]["metadata"]["alt"] = alt
    assert language.split_notebook(nb, "en")["metadata"]["figure_alt"] == ["first", "second", None]
    ja = language.split_notebook(nb, "ja")
    assert ja["metadata"]["figure_alt"] == ["一つ目", "二つ目", None]
    assert "alt" not in ja["cells"][0]["metadata"]


def test_split_rejects_untagged_prose_and_unknown_language():
    nb = {"cells": [_cell("markdown", "no tag")], "metadata": {}}
    with pytest.raises(ValueError, match="has no lang tag"):
        language.split_notebook(nb, "en")
    with pytest.raises(ValueError, match="lang must be one of en, ja, got 'fr'"):
        language.split_notebook(BILINGUAL, "fr")


def test_page_slug_drops_the_chapter_number():
    assert language.page_slug(Path("notebooks/01-sinusoidal.ipynb")) == "sinusoidal"
    assert language.page_slug(Path("12-rope-scaling.ipynb")) == "rope-scaling"
    with pytest.raises(ValueError, match=r"NN-slug\.ipynb"):
        language.page_slug(Path("sinusoidal.ipynb"))


def test_split_all_writes_only_changes_and_removes_orphans(tmp_path):
    src, docs = tmp_path / "notebooks", tmp_path / "docs"
    src.mkdir()
    (src / "01-demo.ipynb").write_text(json.dumps(BILINGUAL), encoding="utf-8")
    (docs / "gone.ipynb").parent.mkdir()
    (docs / "gone.ipynb").write_text("{}", encoding="utf-8")
    written = language.split_all(src, docs)
    assert sorted(p.name for p in written) == ["demo.ipynb", "demo.ja.ipynb"]
    assert not (docs / "gone.ipynb").exists()
    before = (docs / "demo.ja.ipynb").stat().st_mtime_ns
    language.split_all(src, docs)
    assert (docs / "demo.ja.ipynb").stat().st_mtime_ns == before, (
        "unchanged copies are not rewritten"
    )
    (src / "02-demo.ipynb").write_text(json.dumps(BILINGUAL), encoding="utf-8")
    with pytest.raises(ValueError, match="share the page slug 'demo'"):
        language.split_all(src, docs)


def test_headings_get_unicode_ids_and_headerlinks():
    html = (
        '<h1 id="">正弦波位置エンコーディング<a class="anchor-link" href="#">¶</a></h1>'
        '<h2 id="Why-a-sine">Why a sine<a class="anchor-link" href="#Why-a-sine">¶</a></h2>'
        '<h2 id="">波長</h2><h2 id="">波長</h2>'
    )
    out, found = headings.fix_headings(html)
    assert [hid for _, _, hid in found] == [
        "正弦波位置エンコーディング",
        "why-a-sine",
        "波長",
        "波長_1",
    ]
    assert "anchor-link" not in out
    assert out.count('class="headerlink"') == 4
    assert '<h2 id="波長_1">波長<a class="headerlink" href="#波長_1"' in out


def test_toc_follows_the_heading_ids():
    def item(level, title, children=()):
        return SimpleNamespace(level=level, title=title, id="", children=list(children))

    toc = [item(1, "題名", [item(2, "波長"), item(2, "波長"), item(2, "The table:")])]
    found = [
        (1, "題名", "題名"),
        (2, "波長", "波長"),
        (3, "深い見出し", "深い見出し"),  # deeper than the table of contents goes
        (2, "波長", "波長_1"),
        (2, "The table: T5RelativeBias", "the-table-t5relativebias"),
    ]
    headings.fix_toc(toc, found)
    children = toc[0].children
    assert [toc[0].id, *(c.id for c in children)] == [
        "題名",
        "波長",
        "波長_1",
        "the-table-t5relativebias",
    ]
    assert children[2].title == "The table: T5RelativeBias"  # the code span mkdocs-jupyter dropped


def _png(width, height) -> bytes:
    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_externalise_moves_css_scripts_and_figures_to_shared_files(tmp_path):
    png = _png(3, 2)
    data = base64.b64encode(png).decode()
    page = SimpleNamespace(url="ja/demo/")
    output = (
        "<html><head><title>t</title></head><body><article>"
        "<style>.jp-Notebook{color:red}</style>"
        '<!-- Load mathjax -->\n<script src="https://cdn/mathjax.js"></script><!-- End of mathjax configuration -->'
        "<script>document.addEventListener('clipboard-copy', f)</script>"
        '<clipboard-copy for="cell-1">'
        '<svg aria-hidden="true" class="clipboard-copy-icon" width="20"><path d="M0"></path></svg>'
        "</clipboard-copy>"
        '<div class="highlight-ipynb hl-python"><pre><span class="n">torch</span><span class="o">.</span>'
        '<span class="n">ones</span><span class="p">(</span><span class="mi">2</span><span class="p">)</span>'
        '<span class="w"> </span><span class="o">+</span></pre></div>\n'
        '<div class="clipboard-copy-txt" id="cell-1">torch.ones(2) +</div>'
        '<div class="jupyter-wrapper"><img src="data:image/png;base64,'
        + data
        + '" alt="No description has been provided for this image" class="" /></div>'
        "</article></body></html>"
    )
    out = page_weight.externalise(output, page, tmp_path, alts=["a plot of <b> & c"])
    assert "<style" not in out and "data:image" not in out and "mathjax" not in out.lower()
    css = re.search(
        r'<link rel="stylesheet" href="\.\./\.\./(assets/notebook/[0-9a-f]{16}\.css)">', out
    )[1]
    assert (tmp_path / css).read_text() == ".jp-Notebook{color:red}"
    js = re.search(r'<script src="\.\./\.\./(assets/notebook/[0-9a-f]{16}\.js)"></script>', out)[1]
    assert "clipboard-copy" in (tmp_path / js).read_text()
    img = re.search(
        r'<img src="\.\./\.\./(assets/figures/[0-9a-f]{16}\.png)" width="3" height="2" loading="lazy"',
        out,
    )
    assert (tmp_path / img[1]).read_bytes() == png
    assert 'alt="a plot of &lt;b&gt; &amp; c">' in out and "No description" not in out
    assert " / " not in out  # the self-closing slash does not end up among the attributes
    assert '<span class="n">torch</span>' in out  # code blocks are code_blocks.py's business


def test_code_blocks_lose_plain_token_spans_and_the_copy_of_their_text():
    body = (
        '<article class="md-content__inner">'
        '<clipboard-copy ,="" for="cell-1">'
        '<svg aria-hidden="true" class="clipboard-copy-icon" width="20"><path d="M0"></path></svg>'
        "</clipboard-copy>"
        '<div class="highlight-ipynb hl-python"><pre><span class="n">torch</span><span class="o">.</span>'
        '<span class="n">ones</span><span class="p">(</span><span class="mi">2</span><span class="p">)</span>'
        '<span class="w"> </span><span class="o">+</span></pre></div>\n'
        '<div class="clipboard-copy-txt" id="cell-1">torch.ones(2) +</div>'
    )
    out = code_blocks.lighten(body)
    # plain tokens unwrapped, styled ones kept; the copy button reads the <pre>
    assert (
        '<div tabindex="0" class="highlight-ipynb hl-python">'
        '<pre id="cell-1">torch.ones(<span class="mi">2</span>) <span class="o">+</span></pre>'
        in out
    )
    assert "clipboard-copy-txt" not in out and '<clipboard-copy for="cell-1">' in out
    assert out.startswith('<article class="md-content__inner"><svg aria-hidden="true" style')
    assert out.count('<symbol id="nb-copy-icon"') == 1 and '<use href="#nb-copy-icon">' in out


def test_font_css_keeps_woff2_and_lists_its_files():
    package = ROOT / "node_modules" / assets.FONT_PACKAGE
    if not package.exists():
        pytest.fail("node_modules is missing: run `npm ci` (make setup does)", pytrace=False)
    css, files = assets.font_css(package)
    assert ".woff)" not in css and "format('woff')" not in css
    assert len(files) == css.count("@font-face") > 100
    assert all((package / "files" / f).exists() for f in files)
    assert "unicode-range" in css


def test_toolbar_links_the_notebook_and_colab():
    colab = language.colab_url("https://github.com/me/posenc/", "ja/rope/rope.ja.ipynb")
    assert colab == (
        "https://colab.research.google.com/github/me/posenc/blob/notebooks/ja/rope/rope.ja.ipynb"
    )
    bar = language.notebook_toolbar("rope.ja.ipynb", colab, "ja")
    assert 'href="rope.ja.ipynb" download>ノートブックをダウンロード (.ipynb)</a>' in bar
    assert f'href="{colab}" rel="noopener">Colab で開く</a>' in bar
    # Colab opens notebooks from GitHub only
    assert language.colab_url("https://example.org/r", "rope/rope.ipynb") is None
    elsewhere = language.notebook_toolbar("rope.ipynb", None, "en")
    assert "colab" not in elsewhere.lower() and "Download this notebook" in elsewhere


def _run_install_cell(cell: dict, installed: set[str]) -> list[list[str]]:
    """Execute ``cell`` where only the modules ``installed`` exist; return the
    commands it would run."""
    import importlib.util
    import subprocess

    calls = []
    real_find_spec = importlib.util.find_spec
    try:
        importlib.util.find_spec = lambda name: object() if name in installed else None
        subprocess.run, real_run = (lambda cmd, check: calls.append(cmd[3:])), subprocess.run
        exec(compile(cell["source"], "install-cell", "exec"), {})
    finally:
        importlib.util.find_spec, subprocess.run = real_find_spec, real_run
    return calls


def test_install_cell_installs_only_what_is_missing():
    cell = language.install_cell("https://github.com/me/posenc/", "en")
    assert cell["cell_type"] == "code" and cell["outputs"] == []
    everything = {"posenc", "posenc_lab", "matplotlib"}
    assert _run_install_cell(cell, everything) == []
    assert _run_install_cell(cell, {"matplotlib"}) == [
        [
            "install",
            "-q",
            "posenc @ git+https://github.com/me/posenc",
            "posenc-lab @ git+https://github.com/me/posenc#subdirectory=lab",
        ]
    ]
    assert _run_install_cell(cell, {"posenc", "posenc_lab"}) == [
        ["install", "-q", "matplotlib>=3.8,<4"]
    ]


def test_install_cell_asks_for_the_matplotlib_the_site_uses():
    import tomllib

    site = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = language.install_requirements("https://github.com/me/posenc")["matplotlib"]
    assert wanted in site["site"]
    lab = tomllib.loads((ROOT / "lab/pyproject.toml").read_text())["project"]
    assert lab["name"] == "posenc-lab" and lab["dependencies"] == ["posenc"]


@pytest.mark.parametrize("lang, home", [("en", "https://x.org/s/"), ("ja", "https://x.org/s/ja/")])
def test_reader_notebook_runs_anywhere(lang, home):
    nb = copy_of(BILINGUAL)
    nb["metadata"]["jupytext"] = {"formats": "ipynb,py:percent"}
    nb["cells"][3]["source"] = "See [B](02-b.ipynb#x) and [g](../docs/glossary.md)."
    nb["cells"][4]["source"] = "[B](02-b.ipynb#x) と [g](../docs/glossary.ja.md) を見ます。"
    out = language.reader_notebook(nb, lang, "https://x.org/s", "https://github.com/me/posenc")
    install, title, code, text = out["cells"]
    assert (
        install["id"] == "install-posenc"
        and "git+https://github.com/me/posenc" in install["source"]
    )
    assert [title["source"], code["source"]] == [
        nb["cells"][0 if lang == "en" else 1]["source"],
        "x = 1",
    ]
    assert f"]({home}b/#x)" in text["source"] and f"]({home}glossary/)" in text["source"]
    assert "jupytext" not in out["metadata"], "a downloaded notebook is not paired"
    assert out["metadata"]["language"] == lang
    assert nb["metadata"]["jupytext"], "input must not be modified"


def test_lab_copies_are_marked_generated_and_keep_jupyter_links(tmp_path):
    src, out = tmp_path / "notebooks", tmp_path / "notebooks-ja"
    src.mkdir()
    nb = copy_of(BILINGUAL)
    nb["metadata"]["jupytext"] = {"formats": "ipynb,py:percent"}
    nb["cells"][4]["source"] = "[B](02-demo.ipynb#x) と [g](../docs/glossary.ja.md)"
    (src / "01-demo.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    out.mkdir()
    (out / "09-gone.ipynb").write_text("{}", encoding="utf-8")
    written = language.write_lab_copies(src, out, "ja")
    assert [p.name for p in written] == ["01-demo.ipynb"] and not (out / "09-gone.ipynb").exists()
    copy = json.loads(written[0].read_text(encoding="utf-8"))
    note, title, code, text = copy["cells"]
    assert "自動生成されたコピー" in note["source"]
    assert (
        "](../notebooks/01-demo.ipynb)" in note["source"]
        and "notebooks/01-demo.py" in note["source"]
    )
    assert [title["source"], code["source"]] == ["# 題名", "x = 1"]
    assert text["source"] == "[B](02-demo.ipynb#x) と [g](../docs/glossary.ja.md)"
    assert copy["metadata"]["generated_from"] == "notebooks/01-demo.ipynb"
    assert "jupytext" not in copy["metadata"]
    assert not written[0].stat().st_mode & 0o222, "copies are read-only"
    assert 'formats = "ipynb"' in (out / "jupytext.toml").read_text(encoding="utf-8")
    language.write_lab_copies(src, out, "ja")  # again, over its read-only copies
    with pytest.raises(ValueError, match="lang must be one of en, ja, got 'fr'"):
        language.write_lab_copies(src, out, "fr")


def test_japanese_lines_join_without_a_space():
    text = "導き、\nすべての式を確かめます。\n次に $p$ を\n使います。\n\n- 項目\n- item\nEnglish line\nnext"
    assert japanese_lines.join_cjk_lines(text) == (
        "導き、すべての式を確かめます。次に $p$ を使います。\n\n- 項目\n- item\nEnglish line\nnext"
    )
    nb = {"cells": [_cell("markdown", ["本文の\n", "続きです。"], "ja")], "metadata": {}}
    assert language.split_notebook(nb, "ja")["cells"][0]["source"] == "本文の続きです。"


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        # no space after 。 or 、 or a bracket, whatever the next line starts with
        ("与えます。\nPress、Smith", "与えます。Press、Smith"),
        ("正規化し、\n`posenc.attention`", "正規化し、`posenc.attention`"),
        ("次の式（\n$p$ の関数）", "次の式（$p$ の関数）"),
        ("「ノルム」\n**太字**", "「ノルム」**太字**"),
        ("見ます。\n<https://arxiv.org/abs/1>", "見ます。<https://arxiv.org/abs/1>"),
        # nor before them; a list item's continuation loses its indentation
        ("$x$ を使います\n。", "$x$ を使います。"),
        ("1. 求めてください\n   （ヒント：対称性）。", "1. 求めてください（ヒント：対称性）。"),
        # a break between a Japanese and a Latin word stays: the house space
        ("位置\n$p$ のベクトル", "位置\n$p$ のベクトル"),
        ("これは\nPress ら", "これは\nPress ら"),
        # blocks stay blocks
        ("終わり。\n\n「次」の段落", "終わり。\n\n「次」の段落"),
        ("です。\n- 項目", "です。\n- 項目"),
        ("です。\n2. 項目", "です。\n2. 項目"),
        ("です。\n$$x = 1$$", "です。\n$$x = 1$$"),
        ("## 見出し：\n本文", "## 見出し：\n本文"),
        ("| 表。 |\n| 行 |", "| 表。 |\n| 行 |"),
        ("```python\n# コメント。\nx = 1\n```", "```python\n# コメント。\nx = 1\n```"),
    ],
)
def test_japanese_punctuation_never_meets_a_space(text, joined):
    assert japanese_lines.join_cjk_lines(text) == joined


# --------------------------------------------------------------------------
# Links between pages (CONTRIBUTING.md, "Links")


def test_links_to_chapters_and_pages_become_site_urls():
    text = (
        "See [*Sinusoidal*](01-sinusoidal.ipynb), its [table](01-sinusoidal.ipynb#the-table),\n"
        '[RoPE](08-rope.ipynb "rotary"), the [glossary](../docs/glossary.md#offset),\n'
        "[用語集](../docs/glossary.ja.md#相対位置), [home](../docs/index.ja.md),\n"
        "[ref][r] and <https://example.org/01-sinusoidal.ipynb>.\n\n"
        "[r]: 12-efficient-rope.ipynb#timing\n"
    )
    assert language.site_links(text) == (
        "See [*Sinusoidal*](../sinusoidal/), its [table](../sinusoidal/#the-table),\n"
        '[RoPE](../rope/ "rotary"), the [glossary](../glossary/#offset),\n'
        "[用語集](../glossary/#相対位置), [home](../),\n"
        "[ref][r] and <https://example.org/01-sinusoidal.ipynb>.\n\n"
        "[r]: ../efficient-rope/#timing\n"
    )
    # links elsewhere, and file names that merely contain a chapter's, stay
    for kept in (
        "[x](https://host/notebooks/01-sinusoidal.ipynb)",
        "[x](notebooks/01-sinusoidal.ipynb)",
        "[x](01-sinusoidal.ipynb.bak)",
        "[x](../docs/glossary.mdx)",
    ):
        assert language.site_links(kept) == kept


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_split_rewrites_links_in_prose_only(lang):
    nb = {
        "cells": [
            _cell("markdown", ["See [A](01-a.ipynb#x)\n", "and [g](../docs/g.md)."], "en"),
            _cell("markdown", "[A](01-a.ipynb#x) と [g](../docs/g.ja.md) を見てください。", "ja"),
            _cell("code", 'link = "[A](01-a.ipynb)"', outputs=[], execution_count=1),
        ],
        "metadata": {},
    }
    prose, code = language.split_notebook(nb, lang)["cells"]
    assert "](../a/#x)" in prose["source"] and "](../g/)" in prose["source"]
    assert ".ipynb" not in prose["source"] and ".md" not in prose["source"]
    assert code["source"] == 'link = "[A](01-a.ipynb)"'


def test_split_all_names_the_links_that_reach_nothing(tmp_path):
    src, docs = tmp_path / "notebooks", tmp_path / "docs"
    src.mkdir()
    docs.mkdir()
    (docs / "glossary.md").write_text("# g", encoding="utf-8")
    (docs / "glossary.ja.md").write_text("# g", encoding="utf-8")
    nb = copy_of(BILINGUAL)
    nb["cells"][3]["source"] = "[ok](01-demo.ipynb) [ok](../docs/glossary.md#a) [no](02-gone.ipynb)"
    nb["cells"][4]["source"] = "[ok](../docs/glossary.ja.md) [no](../docs/notation.ja.md#x)"
    (src / "01-demo.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        language.split_all(src, docs)
    assert str(err.value) == (
        "01-demo.ipynb links to 02-gone.ipynb, ../docs/notation.ja.md, which do not exist"
    )
    (docs / "notation.md").write_text("# n", encoding="utf-8")
    (docs / "notation.ja.md").write_text("# n", encoding="utf-8")
    (src / "02-gone.ipynb").write_text(json.dumps(BILINGUAL), encoding="utf-8")
    assert len(language.split_all(src, docs)) == 4


def copy_of(nb: dict) -> dict:
    return json.loads(json.dumps(nb))


# --------------------------------------------------------------------------
# Folded solutions (CONTRIBUTING.md, "Solutions"), on the HTML that
# mkdocs-jupyter renders from a real notebook


def _rendered(cells: list[dict], tmp_path) -> str:
    from mkdocs_jupyter.nbconvert2 import nb2html

    nb = {
        "cells": [{"id": f"c{k}", **c} for k, c in enumerate(cells)],
        "metadata": {
            "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return nb2html(str(path), custom_mathjax_url="")


def _tagged(kind, source, **extra):
    cell = _cell(kind, source, **extra)
    cell["metadata"]["tags"] = ["solution"]
    return cell


def _code(source, tagged=False):
    make = _tagged if tagged else _cell
    return make("code", source, outputs=[], execution_count=1)


@pytest.mark.parametrize("lang, label", [("en", "Solution"), ("ja", "解答")])
def test_solutions_fold_into_collapsed_details(tmp_path, lang, label):
    html = _rendered(
        [
            _cell("markdown", "## Exercises\n\n1. Prove it.\n2. Check it."),
            _tagged("markdown", f"**{label} 1.** The first proof."),
            _code("assert 1 + 1 == 2", tagged=True),
            _tagged("markdown", f"**{label} 2.** Second, in two steps."),
            _code("x = 2", tagged=True),
            _tagged("markdown", "Then check."),
            _code("assert x == 2", tagged=True),
            _cell("markdown", "## References"),
        ],
        tmp_path,
    )
    assert "celltag_solution" in html  # what the fold relies on
    out = folding.fold(html, folding.SOLUTIONS, lang)
    folds = re.findall(
        r'<details class="solution"><summary>(.*?)</summary>(.*?)</details>', out, re.S
    )
    assert [summary for summary, _ in folds] == [f"{label} 1", f"{label} 2"]
    first, second = (body for _, body in folds)
    assert "The first proof." in first and "1 + 1" in first and "Second" not in first
    assert "Second, in two steps." in second and "Then check." in second and "x == 2" in second
    assert f"<strong>{label}" not in out  # the label moved into the summary
    assert out.count("<details") == out.count("</details>") == 2
    assert "<details open" not in out  # collapsed by default
    outside = re.sub(r"<details.*?</details>", "", out, flags=re.S)
    assert "Exercises" in outside and "References" in outside and "proof" not in outside
    assert 'class="cell-tag"' in html and 'class="cell-tag"' not in out  # no "solution" chips
    # nothing else is lost: the page's text is the same, but for the
    # label's full stop and the chips
    expected = (
        _text_of(html).replace(f"{label} 1.", f"{label} 1").replace(f"{label} 2.", f"{label} 2")
    )
    assert _text_of(out) == expected.replace(" solution ", " ")


def _text_of(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment[fragment.find("<body") :]))


def test_a_solution_without_its_opening_is_left_and_reported(tmp_path, caplog):
    html = _rendered([_cell("markdown", "Exercise."), _code("assert True", tagged=True)], tmp_path)
    with caplog.at_level("WARNING", logger="mkdocs.hooks.folding"):
        out = folding.fold(html, folding.SOLUTIONS, "en", "demo.ipynb")
    assert out == html
    assert "demo.ipynb: a cell tagged 'solution' comes before any opening" in caplog.text


def test_pages_without_solutions_are_untouched(tmp_path):
    html = _rendered([_cell("markdown", "**Solution 1.** untagged"), _code("x = 1")], tmp_path)
    assert folding.fold(html, folding.SOLUTIONS, "en") == html


def test_a_retina_figure_keeps_its_display_size(tmp_path):
    """IPython's retina format stores a figure at twice the size it is shown
    at and says so in width=/height=, which nbconvert writes unquoted."""
    png = _png(8, 6)
    data = base64.b64encode(png).decode()
    page = SimpleNamespace(url="demo/")
    output = (
        '<html><head></head><body><article><div class="jp-RenderedImage">'
        f'<img src="data:image/png;base64,{data}"\nwidth=4\nheight=3\n'
        'alt="No description has been provided for this image" class="" />'
        f'<img src="data:image/png;base64,{data}" width=2 class="">'
        "</div></article></body></html>"
    )
    out = page_weight.externalise(output, page, tmp_path, alts=["first", "second"])
    imgs = re.findall(r"<img [^>]*>", out)
    assert [re.findall(r'\b(width|height)="(\d+)"', i) for i in imgs] == [
        [("width", "4"), ("height", "3")],
        [("width", "2"), ("height", "2")],  # the PNG's aspect ratio, rounded
    ]
    assert all(i.count("width") == 1 and i.count("height") == 1 for i in imgs)


# --------------------------------------------------------------------------
def _attribute(html: str, tag: str, name: str) -> list[str | None]:
    """The value of attribute ``name`` of each ``tag`` in ``html``, as a browser reads it."""
    from html.parser import HTMLParser

    found = []

    class Reader(HTMLParser):
        def handle_starttag(self, t, attrs):
            if t == tag:
                found.append(dict(attrs).get(name))

    Reader().feed(html)
    return found


# a code cell as nbconvert and Pygments 2.21 write it: < > & escaped, quotes
# not, so the code's own text may read like markup (class="note")
_CODE_CELL = (
    '<div tabindex="0" class="highlight-ipynb hl-python"><pre id="cell-{i}">'
    '<span class="k">if</span> a <span class="o">&lt;</span> '
    """<span class="s1">'&lt;p class="note"&gt; &amp; it's'</span>:"""
    '  <span class="c1"># subclass="x"</span>'
    '\n    <span class="k">pass</span></pre></div>'
)


def test_code_past_the_first_blocks_ships_uncoloured_with_its_colouring_aside():
    output = '<div class="jp-OutputArea-output"><pre>a &lt; b</pre></div>'
    body = "".join(_CODE_CELL.format(i=i) + output for i in range(5))
    out = code_blocks.defer_colouring(body, coloured=2)
    blocks = re.findall(r"<pre[^>]*>.*?</pre>", out, re.DOTALL)
    inputs, outputs = blocks[0::2], blocks[1::2]
    assert inputs[:2] == re.findall(r"<pre id.*?</pre>", body, re.DOTALL)[:2]  # kept as they were
    assert outputs == ["<pre>a &lt; b</pre>"] * 5  # printed output has no colouring to defer
    attributes = _attribute(out, "pre", "data-html")[0::2]  # the inputs'
    assert attributes[:2] == [None, None]
    for i, (block, markup) in enumerate(zip(inputs[2:], attributes[2:], strict=True), start=2):
        original = re.search(r"<pre[^>]*>(.*?)</pre>", _CODE_CELL.format(i=i), re.DOTALL)[1]
        # the browser reads the attribute back as the coloured markup (class
        # names unquoted), and the plain text is that markup's text, as
        # the page's script and the copy button see it
        assert re.sub(r"<span class=([\w-]+)>", r'<span class="\1">', markup) == original
        assert block.endswith(
            """>if a &lt; '&lt;p class="note"&gt; &amp; it's':  # subclass="x"\n    pass</pre>"""
        )
    assert code_blocks.defer_colouring(body, coloured=5) == body


def test_typesetting_a_page_keeps_escaped_characters_in_attributes(tmp_path):
    """MathJax writes the page out again; an attribute holding markup keeps
    its escaped characters (the browser would read &lt; back as <)."""
    (tmp_path / "index.html").write_text(
        _page(code_blocks.defer_colouring("<p>$x$</p>" + _CODE_CELL.format(i=1), coloured=0)),
        encoding="utf-8",
    )
    before = _attribute((tmp_path / "index.html").read_text(encoding="utf-8"), "pre", "data-html")
    math.typeset([tmp_path / "index.html"], ROOT)
    after = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "<mjx-container" in after
    assert _attribute(after, "pre", "data-html") == before and "&lt;" in before[0]


# Math typeset at build time (hooks/math.py, hooks/typeset_math.js)


def _page(article: str, head: str = "") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body><nav>$x$ nav</nav><article>{article}</article></body></html>"


def test_math_is_typeset_in_the_article_with_mathml_for_screen_readers(tmp_path):
    (tmp_path / "a").mkdir()
    page = tmp_path / "a" / "index.html"
    page.write_text(
        _page(
            r"<p>Inline $p_i$, \(x^2\), a dollar \$5, display $$\sin(\omega p)$$ and</p>"
            r"<pre>code $not math$</pre><code>$also not$</code>"
            r'<div class="clipboard-copy-txt">$hidden$</div>'
            r"<div>\begin{align}a &= b\end{align}</div>"
        ),
        encoding="utf-8",
    )
    (tmp_path / "plain.html").write_text(_page("<p>No math, costs 5 euros.</p>"), encoding="utf-8")
    assert math.pages_with_math(tmp_path) == [page]
    [report] = math.typeset([page], ROOT)
    assert report["formulas"] == 4 and report["errors"] == []
    out = page.read_text(encoding="utf-8")
    assert out.count("<mjx-container") == 4
    # $$...$$ and the align environment
    assert len(re.findall(r'<mjx-container[^>]*display="true"', out)) == 2
    assert out.count("<mjx-assistive-mml") == 4  # what a screen reader reads
    assert "<msub><mi>p</mi><mi>i</mi></msub>" in out and "a dollar <span>$</span>5" in out
    for raw in ("$not math$", "$also not$", "$hidden$", "<nav>$x$ nav</nav>"):
        assert raw in out  # code, the copy button's text and the navigation stay
    head = out[: out.find("</head>")]
    assert '<meta name="math-typeset-at-build">' in head and 'id="MJX-SVG-styles"' in head
    assert math.pages_with_math(tmp_path) == []  # typeset once
    assert math.typeset([page], ROOT)[0]["formulas"] == 0


def _drawn(html: str) -> str:
    """``html`` with every undrawn formula drawn, as the page's script does
    (docs/overrides/partials/deferred.html): the drawing into the <svg>, the
    <noscript> MathML hidden again."""

    def draw(m: re.Match) -> str:
        attributes, drawing, svg, mathml = m.groups()
        display = "block" if mathml.startswith('<math display="block"') else "inline"
        return (
            f"<mjx-container{attributes}>{svg}{htmllib.unescape(drawing)}</svg>"
            f'<mjx-assistive-mml unselectable="on" display="{display}">{mathml}'
            "</mjx-assistive-mml></mjx-container>"
        )

    return re.sub(
        r"<mjx-container([^>]*?) data-svg='([^']*)'>(<svg[^>]*>)</svg>"
        r"<noscript>(.*?)</noscript></mjx-container>",
        draw,
        html,
    )


def _notebook(markdown: str) -> str:
    """``markdown`` as mkdocs-jupyter renders a Markdown cell, in a notebook."""
    return (
        '<div class="jp-Notebook"><div class="jp-Cell jp-MarkdownCell jp-Notebook-cell">'
        '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput">'
        f"{markdown}</div></div></div>"
    )


def test_formulas_past_the_first_ship_undrawn_and_draw_to_the_same_svg(tmp_path):
    markdown = (
        r"<h2>About $h$</h2><p>"
        + " ".join(rf"$x_{{{i}}} + \text{{it's}}$ and" for i in range(6))
        + r" $$\begin{matrix}a&b\\c&d\end{matrix}$$ and a \$5</p>"
        + r"<table><tr><td>$t$</td></tr></table>"
    )
    pages = []
    for name, article, drawn in (
        ("some", _notebook(markdown), 3),
        ("every", _notebook(markdown), 99),
        ("plain", markdown, 0),  # a page that is not a notebook skips no block
    ):
        (tmp_path / name).mkdir()
        pages.append(tmp_path / name / "index.html")
        pages[-1].write_text(_page(article), encoding="utf-8")
        [report] = math.typeset([pages[-1]], ROOT, drawn=drawn)
        assert report["formulas"] == 9 and report["errors"] == []
    some, every, plain = (p.read_text(encoding="utf-8") for p in pages)
    assert "data-svg" not in every and "data-svg" not in plain
    # the first three drawn (the heading's and two of the paragraph's), the
    # paragraph's other five each an empty <svg> of its size; the table's
    # formula drawn (Material moves a table into a box that is never skipped)
    containers = re.findall(r"<mjx-container.*?</mjx-container>", some)
    assert [("data-svg=" in c) for c in containers] == [False] * 3 + [True] * 5 + [False]
    assert all(re.search(r'<svg [^>]*width="[\d.]+ex" [^>]*></svg>', c) for c in containers[3:8])
    # a drawn formula's MathML is hidden for screen readers; an undrawn one's
    # shows without JavaScript, and the page's script hides it again as it draws
    assert ["<mjx-assistive-mml" in c for c in containers] == [True] * 3 + [False] * 5 + [True]
    assert ["<noscript><math" in c for c in containers] == [False] * 3 + [True] * 5 + [False]
    assert some.count('<noscript><math display="block">') == 1  # the matrix
    assert _drawn(some) == every
    # what the browser makes of the attribute is the drawing, quotes and all
    assert (
        "&quot;" not in some
        and 'stroke="currentColor"' in re.findall("data-svg='([^']*)'", some)[0]
    )


def test_the_typeset_svg_carries_no_attributes_for_mathjax_s_browser_tools(tmp_path):
    page = tmp_path / "index.html"
    page.write_text(_page(r"<p>$\frac{a}{b} + \sum_i x_i$ $$\begin{matrix}a\end{matrix}$$</p>"))
    math.typeset([page], ROOT)
    out = page.read_text(encoding="utf-8")
    svg = "".join(re.findall(r"<svg.*?</svg>", out[out.find("<article") :], re.DOTALL))
    for attribute in ("data-c=", "data-mjx-texclass=", "xlink:href=", "xmlns"):
        assert attribute not in svg, attribute
    assert "<g>" not in svg  # no bare group left
    # kept only where MathJax's stylesheet selects on it
    assert set(re.findall(r'data-mml-node="(\w+)"', svg)) == {"mtable"}
    assert svg.count("<use ") == svg.count(' href="#MJX-')
    assert 'mjx-container[jax="SVG"] use { stroke-width: 3; }' in out  # glyphs as thick as before


def test_a_tex_error_is_reported_and_fails_a_strict_build(tmp_path, caplog):
    page = tmp_path / "index.html"
    page.write_text(_page(r"<p>Good $a^2$, bad $x^^2$, unknown $\nosuchmacro$.</p>"))
    config = SimpleNamespace(site_dir=str(tmp_path), config_file_path=str(ROOT / "mkdocs.yml"))
    with caplog.at_level("WARNING", logger="mkdocs.hooks.math"):
        math.on_post_build(config)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "index.html: TeX error in $x^^2$",
        "index.html: TeX error in $\\nosuchmacro$",
    ]


# --------------------------------------------------------------------------
# One search index per language (hooks/search.py)


def test_search_index_splits_by_language():
    index = {
        "config": {"lang": ["en"], "separator": "[\\s\\-]+"},
        "docs": [
            {"location": "", "title": "Home"},
            {"location": "rope/#x", "title": "RoPE"},
            {"location": "ja/", "title": "ホーム"},
            {"location": "ja/rope/#x", "title": "RoPE"},
            {"location": "japan/", "title": "a page whose name starts with ja"},
        ],
    }
    parts = search.split_index(index)
    assert [d["location"] for d in parts["en"]["docs"]] == ["", "rope/#x", "japan/"]
    assert [d["location"] for d in parts["ja"]["docs"]] == ["ja/", "ja/rope/#x"]
    assert parts["en"]["config"] == parts["ja"]["config"] == index["config"]


@pytest.mark.parametrize(
    "tex, text",
    [
        (r"\theta_i = 10000^{-2i/d}", "θ_i = 10000^-2i/d"),
        (r"\frac{1}{\sqrt{d}} q^\top k", "1/(√d) q^⊤ k"),
        (r"\tfrac{a+b}{2} \le \frac{\theta}{s}", "(a+b)/2 ≤ θ/s"),
        (r"\operatorname{softmax}(QK^\top/\sqrt{d})", "softmax(QK^⊤/√d)"),
        (r"\mathbf{R}_{\Theta,m}^d \boldsymbol{x}", "R_Θ,m^d x"),
        (r"a \in \{0, 1\}, \; \lfloor N/2 \rfloor", "a ∈ {0, 1}, ⌊ N/2 ⌋"),
        (r"\log_2 \frac{L}{2\pi} \approx 9", "log_2 L/(2π) ≈ 9"),
        (
            r"\begin{pmatrix} \cos m\theta & -\sin m\theta \\ x & y \end{pmatrix}",
            "cos mθ -sin mθ ; x y",
        ),
        (r"\newcommand \foo", "newcommand foo"),  # unknown commands lose their backslash
    ],
)
def test_search_text_shows_formulas_as_plain_text(tex, text):
    assert search.tex_to_text(tex) == text


def test_search_entry_puts_code_apart_and_prose_math_in_plain_text():
    entry = {
        "location": "rope/#x",
        "title": "Why $\\theta_i$",
        "text": "<p>angle $m\\theta$ and \\(a \\le b\\), <code>$x$</code>, \\$5</p>"
        "<pre>def rotate_half(x):\n    return x</pre><p>after</p><pre>print(1)</pre>",
    }
    out = search.separate_code(entry)
    assert out == {
        "location": "rope/#x",
        "title": "Why θ_i",
        "text": "<p>angle mθ and a ≤ b, <code>$x$</code>, $5</p> <p>after</p>",
        "code": "def rotate_half(x):\n    return x\nprint(1)",
    }
    assert search.separate_code({"location": "", "title": "t", "text": "<p>x</p>"}) == {
        "location": "",
        "title": "t",
        "text": "<p>x</p>",
    }


_NOTEBOOK_PAGE = """<style>.x{}</style><p class="nb-toolbar"><a>Download</a></p>
<div class="jp-Cell jp-MarkdownCell"><div class="jp-InputPrompt"> </div>
<div class="jp-RenderedMarkdown jp-MarkdownOutput"><h2 id="pi">Position interpolation</h2>
<p>First cell &amp; <code>a&lt;b</code>.</p></div></div>
<div class="jp-Cell jp-CodeCell"><div class="jp-InputPrompt">In [3]:</div>
<div class="zeroclipboard-container"><clipboard-copy for="cell-3"><span>Copied!</span></clipboard-copy></div>
<div class="highlight-ipynb"><pre id="cell-3"><span class="k">def</span> f(): pass</pre></div>
<div class="clipboard-copy-txt" id="cell-3">def f(): pass</div>
<div class="jp-OutputArea"><div class="jp-OutputPrompt">Out[3]:</div>
<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="text/plain"><pre>0.5</pre></div>
<div class="jp-RenderedImage jp-OutputArea-output"><img src="a.png" alt="a figure"></div>
<div class="jp-RenderedMarkdown jp-OutputArea-output" data-mime-type="text/markdown"><table><tr><td>kept</td></tr></table></div>
</div></div>
<details class="solution"><summary>Solution 1</summary><div class="jp-Cell"><p>Second cell</p></div></details>"""


def test_search_reads_a_notebook_page_without_its_cell_wrappers():
    out = search.searchable(_NOTEBOOK_PAGE)
    assert "<div" not in out and "</div>" not in out and "details" not in out
    for gone in ("Download", "In [3]", "Copied!", "Out[3]", "0.5", "a.png", "def f(): pass</div>"):
        assert gone not in out, gone
    assert out.count("def</span> f(): pass</pre>") == 1  # the cell's code, once
    assert '<h2 id="pi">Position interpolation</h2>' in out
    assert "<p>First cell &amp; <code>a&lt;b</code>.</p>" in out
    assert "<td>kept</td>" in out  # a Markdown output is prose
    assert "<p>Solution 1</p><p>Second cell</p>" in out


def test_search_sections_of_a_notebook_page_run_to_the_next_heading():
    """Material's own parser, given the page as search reads it: a section
    holds the cells after its heading's cell, and its code."""
    from material.plugins.search.plugin import Parser

    parser = Parser()
    parser.feed(search.searchable(_NOTEBOOK_PAGE))
    parser.close()
    section = next(s for s in parser.data if s.id == "pi")
    text = "".join(section.text)
    assert "First cell" in text and "Second cell" in text and "<pre>" in text


@pytest.mark.parametrize(
    "text, words",
    [
        ("位置補間", ["位置", "補間"]),
        ("回転行列を使う", ["回転", "行列", "を", "使う"]),
        # a run of katakana stays one word
        ("ファインチューニングの有無", ["ファインチューニング", "の", "有無"]),
        # only Japanese runs are cut; the rest stays as it is
        ("<p>RoPE（Su ら 2021）の角度</p>", None),
    ],
)
def test_search_cuts_japanese_into_words(text, words):
    out = search.japanese_words([text], ROOT)[0]
    if words is not None:
        assert out.strip(search.WORD_BREAK).split(search.WORD_BREAK) == words
    else:
        assert out == "<p>RoPE（Su \u200bら\u200b 2021）\u200bの\u200b角度\u200b</p>"
    assert out.replace(search.WORD_BREAK, "") == text


def test_search_separator_splits_punctuation_but_not_names():
    separator = re.compile(search.SEPARATOR)
    text = "rotate_half(x), torch.cat and 位置\u200b補間（PI）。GPT-NeoX's end. &lt;b"
    assert [t for t in separator.split(text) if t] == [
        "rotate_half",
        "x",
        "torch.cat",
        "and",
        "位置",
        "補間",
        "PI",
        "GPT",
        "NeoX",
        "s",
        "end",
        "b",
    ]


# --------------------------------------------------------------------------
# The whole book on one page (hooks/book.py)


def test_book_takes_the_navigation_without_home_and_api_reference():
    nav = ["ja/", "ja/rope/", "ja/api/", "ja/api/rope/", "ja/glossary/", "ja/rope/"]
    assert book.book_urls(nav, "ja/") == ["ja/rope/", "ja/glossary/"]
    assert book.book_urls(["", "alibi/", "apis/"], "") == ["alibi/", "apis/"]


def test_book_rehomes_ids_and_links_of_a_page():
    article = (
        '<h2 id="pi">PI</h2><a href="#pi">here</a> <a href="#">top</a>'
        '<a href="../alibi/#bias">ALiBi</a> <a href="../alibi/">ALiBi</a>'
        '<a href="../api/rope/#posenc.apply_rope">API</a> <a href="https://x.org/#a">x</a>'
        '<img src="../assets/figures/a.png"><use href="#MJX-TEX-I-1D45A"></use>'
        '<clipboard-copy for="cell-3"></clipboard-copy><pre id="cell-3"></pre>'
    )
    out = book.rehome(article, "ja/rope/", {"ja/rope/": "rope", "ja/alibi/": "alibi"})
    assert out == (
        '<h2 id="rope--pi">PI</h2><a href="#rope--pi">here</a> <a href="#">top</a>'
        '<a href="#alibi--bias">ALiBi</a> <a href="#alibi">ALiBi</a>'
        '<a href="../api/rope/#posenc.apply_rope">API</a> <a href="https://x.org/#a">x</a>'
        '<img src="../assets/figures/a.png"><use href="#MJX-TEX-I-1D45A"></use>'
        '<clipboard-copy for="rope--cell-3"></clipboard-copy><pre id="rope--cell-3"></pre>'
    )


# --------------------------------------------------------------------------
# The notebook stylesheet keeps what the pages use (hooks/notebook_css.py)


def test_notebook_css_keeps_only_rules_the_pages_can_use():
    css = """
    @charset "UTF-8";
    /* a comment { with braces } */
    pre { line-height: 125%; }
    .jupyter-wrapper .jp-Cell, .jupyter-wrapper .jp-FileBrowser { padding: 5px }
    .jupyter-wrapper .jp-Terminal { color: red }
    .jupyter-wrapper .jp-Cell:not(.jp-mod-active) .jp-InputPrompt { opacity: .5 }
    .jupyter-wrapper .md-typeset__scrollwrap { margin: 0 }
    .jupyter-wrapper :root { --jp-icon: url("data:image/svg+xml;utf8,<svg>{}</svg>") }
    .jupyter-wrapper body[data-format=mobile] .jp-Cell { flex: 0 }
    @media (max-width: 760px) { .jupyter-wrapper .jp-Cell { margin: 0 } .jp-Dialog { x: y } }
    @media print { .jp-Dialog { x: y } }
    @keyframes spin { from { opacity: 0 } to { opacity: 1 } }
    """
    out = notebook_css.purge(css, {"jupyter-wrapper", "jp-Cell", "jp-InputPrompt"})
    assert out.splitlines() == [
        '@charset "UTF-8";',
        "pre{line-height: 125%;}",
        ".jupyter-wrapper .jp-Cell{padding: 5px}",
        ".jupyter-wrapper .jp-Cell:not(.jp-mod-active) .jp-InputPrompt{opacity: .5}",
        ".jupyter-wrapper .md-typeset__scrollwrap{margin: 0}",
        "@media (max-width: 760px){.jupyter-wrapper .jp-Cell{margin: 0}}",
        "@keyframes spin{from { opacity: 0 } to { opacity: 1 }}",
    ]


def test_used_classes_reads_every_page(tmp_path):
    (tmp_path / "ja").mkdir()
    (tmp_path / "index.html").write_text('<div class="a  b"><p class="c">x</p></div>')
    (tmp_path / "ja" / "index.html").write_text('<span class="d">y</span>')
    assert notebook_css.used_classes(tmp_path) == {"a", "b", "c", "d"}


# --------------------------------------------------------------------------
# API names in the prose link to the reference (hooks/api_links.py)


def test_reference_entries_cover_every_public_name(tmp_path):
    import posenc

    reference = api_reference.read_reference(ROOT)
    api_reference.write_pages(tmp_path, reference, api_reference.chapter_titles(ROOT, "en"))
    entries = api_links.reference_entries(tmp_path)
    assert set(entries) == {n for n in posenc.__all__ if not n.startswith("_")}
    assert entries["apply_rope"] == "api/rope/"


def test_api_names_in_prose_become_links_and_nothing_else_does():
    entries = {"apply_rope": "api/rope/", "RotaryEmbedding": "api/rope/"}
    html = (
        "<p>Call <code>apply_rope</code>, <code>posenc.apply_rope()</code> or"
        " <code>RotaryEmbedding.reserve</code>, <code>apply_rope(x, torch.arange(3))</code>;"
        " not <code>rotate_half</code>, <code>apply_rope(x, p) + 1</code> or"
        ' <a href="x/"><code>apply_rope</code></a>.</p>'
        '<h2 id="h"><code>apply_rope</code></h2><pre><code>apply_rope</code></pre>'
    )
    out = api_links.link_api_names(html, "ja/rope/", entries, "ja/")
    link = '<a class="api-link" href="../api/rope/#posenc.{}"><code>{}</code></a>'
    assert out == (
        f"<p>Call {link.format('apply_rope', 'apply_rope')}, "
        f"{link.format('apply_rope', 'posenc.apply_rope()')} or "
        f"{link.format('RotaryEmbedding', 'RotaryEmbedding.reserve')}, "
        f"{link.format('apply_rope', 'apply_rope(x, torch.arange(3))')};"
        " not <code>rotate_half</code>, <code>apply_rope(x, p) + 1</code> or"
        ' <a href="x/"><code>apply_rope</code></a>.</p>'
        '<h2 id="h"><code>apply_rope</code></h2><pre><code>apply_rope</code></pre>'
    )


# --------------------------------------------------------------------------
# This repository's files named in the prose link to it (hooks/repo_links.py)


def test_repository_files_in_prose_become_links_and_other_projects_files_do_not():
    html = (
        "<p>See <code>lab/README.md</code>, <code>extrapolation-tasks.json</code> and"
        " <code>tests/test_rope_triton.py</code>; not <code>src/model.py</code>,"
        " <code>config.json</code>, <code>README.md</code>, <code>../README.md</code>"
        ' or <a href="x/"><code>lab/README.md</code></a>.</p>'
        '<h2 id="h"><code>lab/README.md</code></h2><pre><code>lab/README.md</code></pre>'
    )
    out = repo_links.link_repository_files(html, "https://example.org/r", ROOT)
    link = '<a class="repo-link" href="https://example.org/r/blob/main/{}"><code>{}</code></a>'
    assert out == (
        f"<p>See {link.format('lab/README.md', 'lab/README.md')}, "
        f"{link.format('lab/posenc_lab/records/extrapolation-tasks.json', 'extrapolation-tasks.json')}"
        f" and {link.format('tests/test_rope_triton.py', 'tests/test_rope_triton.py')};"
        " not <code>src/model.py</code>, <code>config.json</code>, <code>README.md</code>,"
        ' <code>../README.md</code> or <a href="x/"><code>lab/README.md</code></a>.</p>'
        '<h2 id="h"><code>lab/README.md</code></h2><pre><code>lab/README.md</code></pre>'
    )


# --------------------------------------------------------------------------
# Chapters from notebooks/chapters.yml (hooks/chapters.py)

REGISTRY = """parts:
  - en: First
    ja: 第一
    chapters:
      - slug: alpha
        after: beta
        en: Alpha's line.
        ja: アルファの行です。
  - en: Second
    ja: 第二
    chapters:
      - slug: beta
        path: 1
        en: Beta's line.
        ja: ベータの行です。
      - slug: gamma
        after: beta
        en: Gamma's line.
        ja: ガンマの行です。
"""


def _chapters(tmp_path, registry=REGISTRY, slugs=("alpha", "beta", "gamma")) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / chapters.REGISTRY).write_text(registry, encoding="utf-8")
    for k, slug in enumerate(slugs):
        (tmp_path / "notebooks" / f"{k:02d}-{slug}.py").touch()
        nb = copy_of(BILINGUAL)
        nb["cells"][0]["source"] = f"# The {slug} chapter\n\nIntro."
        nb["cells"][1]["source"] = [f"# {slug} の章\n", "導入。"]
        (tmp_path / "notebooks" / f"{k:02d}-{slug}.ipynb").write_text(json.dumps(nb))
    return tmp_path


def test_chapter_nav_and_home_table_follow_the_registry(tmp_path):
    found = chapters.read_registry(_chapters(tmp_path))
    assert [c.slug for c in found] == ["alpha", "beta", "gamma"]
    nav = ["index.md", chapters.REGISTRY, {"Reference": ["api.md"]}]
    assert chapters.expand(nav, chapters.REGISTRY, chapters.nav_sections(found)) == [
        "index.md",
        {"First": ["alpha.ipynb"]},
        {"Second": ["beta.ipynb", "gamma.ipynb"]},
        {"Reference": ["api.md"]},
    ]
    assert chapters.table(found, "ja").splitlines() == [
        '<div class="chapter-table" markdown>',
        "",
        chapters.TABLE_HEADER["ja"],
        "|---|---|---|",
        "| 第一 | [alpha の章](alpha.ipynb)<br>5 分 | アルファの行です。 |",
        "| 第二 | ① [beta の章](beta.ipynb)<br>5 分 | ベータの行です。 |",
        "|  | [gamma の章](gamma.ipynb)<br>5 分 | ガンマの行です。 |",  # the part once
        "",
        "</div>",
    ]
    assert chapters.core_hours(found) == 1  # one 5-minute chapter on the path, at least an hour
    assert "| First | [The alpha chapter](alpha.ipynb)<br>5 min | Alpha's line. |" in (
        chapters.table(found, "en")
    )


def test_reading_time_counts_the_main_path_at_40_words_a_minute():
    def prose(words: int, tags=()):
        cell = _cell("markdown", " ".join(["word"] * words))
        cell["metadata"] = {"lang": "en", "tags": list(tags)}
        return cell

    formula = _cell("markdown", "Two words $x^2 + y^2$ and $$\\sum_i a_i$$ [a link](x.ipynb#a-b)")
    formula["metadata"] = {"lang": "en"}
    assert chapters.main_path_words({"cells": [formula]}) == 7  # a formula counts one
    japanese = prose(999)
    japanese["metadata"]["lang"] = "ja"
    folded = [prose(999, [tag]) for tag in chapters.FOLDED]
    notebook = {"cells": [prose(2_200), japanese, *folded, _code("x = 1")]}
    assert chapters.main_path_words(notebook) == 2_200
    assert chapters.reading_minutes(notebook) == 55  # 2,200 words at 40 a minute
    assert chapters.reading_minutes({"cells": [prose(2_500)]}) == 60  # 62.5, to the nearest 5
    assert chapters.reading_minutes({"cells": [prose(10)]}) == 5  # never 0


def test_core_chapters_name_their_step_and_link_the_next(tmp_path):
    registry = REGISTRY.replace("gamma\n        after: beta\n", "gamma\n        path: 2\n")
    found = chapters.read_registry(_chapters(tmp_path, registry))
    assert chapters.core_path_lines(found, "delta", "en") is None  # no chapter
    top, end = chapters.core_path_lines(found, "beta", "en")
    assert "step 1 of 2 · next: " in top and 'href="../gamma/">② The gamma chapter</a>' in top
    assert end.endswith(
        '<p>Next on the core path: <a href="../gamma/">② The gamma chapter</a> →</p></nav>'
    )
    top, end = chapters.core_path_lines(found, "gamma", "ja")
    assert "の 2 章目（全 2 章）、最後の章" in top
    assert '<a href="../">章の一覧</a>' in end and 'href="../' + "gamma" not in end


def test_chapters_off_the_core_path_name_the_step_before_and_lead_back(tmp_path):
    registry = REGISTRY.replace("gamma\n        after: beta\n", "gamma\n        path: 2\n")
    found = chapters.read_registry(_chapters(tmp_path, registry))
    top, end = chapters.core_path_lines(found, "alpha", "en")  # after beta, step 1
    assert top.endswith(
        '<p>Off the <a href="../">core path</a>, for depth: read it after '
        '<a href="../beta/">① The beta chapter</a></p></nav>'
    )
    assert end.endswith(
        '<p>Back on the core path: <a href="../gamma/">② The gamma chapter</a> →</p></nav>'
    )
    last = registry.replace("alpha\n        after: beta\n", "alpha\n        after: gamma\n")
    (tmp_path / "b").mkdir()
    found = chapters.read_registry(_chapters(tmp_path / "b", last))
    top, end = chapters.core_path_lines(found, "alpha", "ja")
    assert '先に読む章: <a href="../gamma/">② gamma の章</a>' in top
    assert '基本の順路は <a href="../gamma/">② gamma の章</a> で終わりです。' in end


def test_a_chapters_footer_says_its_links_follow_the_list():
    def footer(direction):
        return f'<span class="md-footer__direction">\n    {direction}\n  </span>'

    html = footer("Previous") + footer("Next")
    assert chapters.name_footer_links(html, "en") == footer("Previous in the list") + footer(
        "Next in the list"
    )
    assert chapters.name_footer_links(footer("前") + footer("次"), "ja") == footer(
        "一覧で前の章"
    ) + footer("一覧で次の章")


def test_a_chapter_off_the_core_path_names_a_core_chapter_to_read_first(tmp_path):
    registry = REGISTRY.replace("alpha\n        after: beta\n", "alpha\n        after: gamma\n")
    registry = registry.replace(
        "beta\n        path: 1\n", "beta\n        path: 1\n        after: beta\n"
    )
    with pytest.raises(ValueError) as error:
        chapters.read_registry(_chapters(tmp_path, registry))
    problems = str(error.value).splitlines()[1:]
    assert [p.split(":")[0].strip() for p in problems] == ["alpha", "beta"]
    assert "names the core chapter to read first (after: one of beta)" in problems[0]


def test_the_navigation_marks_core_chapters_with_their_step(tmp_path):
    found = chapters.read_registry(_chapters(tmp_path))  # beta is step 1

    def link(href, active=""):
        return f'<a href="{href}" class="md-nav__link{active}">\n  <span class="md-ellipsis">\n T'

    nav = "".join(
        [
            link("../alpha/"),
            link("./", " md-nav__link--active"),
            '<label class="md-nav__link md-nav__link--active" for="__toc">'
            '\n <span class="md-ellipsis">\n T',
            '<label class="md-nav__link" for="__nav_2"><span class="md-ellipsis">Part',
            link("../api/beta/"),  # an API page of the same name is not the chapter
            link("#beta"),
        ]
    )
    marked = chapters.mark_core_path_in_nav(nav, "ja/beta/", found)
    assert marked.count('<span class="core-step">①</span> ') == 2  # the link and the label
    assert marked.replace('<span class="core-step">①</span> ', "") == nav
    from_home = chapters.mark_core_path_in_nav(link("beta/") + link("alpha/"), "", found)
    assert (
        from_home.count("core-step") == 1 and from_home.index("core-step") < len(link("beta/")) + 40
    )


def test_the_core_path_is_numbered_once_each_from_one(tmp_path):
    registry = REGISTRY.replace("gamma\n        after: beta\n", "gamma\n        path: 3\n")
    with pytest.raises(ValueError, match=r"the path steps are \[1, 3\]: number the core path"):
        chapters.read_registry(_chapters(tmp_path, registry))


def test_the_registry_check_names_what_is_missing(tmp_path):
    registry = REGISTRY.replace("      - slug: gamma\n", "      - slug: delta\n")
    registry = registry.replace("ja: ベータの行です。", "ja: ''")
    with pytest.raises(ValueError) as error:
        chapters.read_registry(_chapters(tmp_path, registry))
    assert str(error.value).splitlines()[1:] == [
        "  beta: give the part and the summary in en, ja",
        "  delta: there is no notebooks/NN-delta.py",
        "  notebooks/02-gamma.py is not in notebooks/chapters.yml: add an entry "
        "(slug, en, ja) under its part",
    ]


def test_a_chapter_title_is_its_first_heading():
    assert chapters.title(BILINGUAL, "ja") == "題名"
    untitled = copy_of(BILINGUAL)
    untitled["cells"][0]["source"] = "## Not a title"
    with pytest.raises(ValueError, match='first lang="en" prose cell must open with the title'):
        chapters.title(untitled, "en")


def test_a_fold_of_another_tag_takes_a_label_without_a_number(tmp_path):
    check = folding.Fold("check", {"en": "Check"})
    cell = _cell("markdown", "**Check.** The numbers agree.")
    cell["metadata"]["tags"] = ["check"]
    code = _code("assert 1 == 1")
    code["metadata"]["tags"] = ["check"]
    html = _rendered(
        [_cell("markdown", "Text."), cell, code, _cell("markdown", "After.")], tmp_path
    )
    out = folding.fold(html, check, "en")
    fold = re.search(r'<details class="check"><summary>(.*?)</summary>(.*?)</details>', out, re.S)
    assert fold[1] == "Check" and "The numbers agree." in fold[2] and "1 == 1" in fold[2]
    assert "After." not in fold[2] and folding.fold(html, folding.SOLUTIONS, "en") == html


# --------------------------------------------------------------------------
# The proof under the teaching: check cells, figure code and deep dives fold
# (hooks/folding.py; CONTRIBUTING.md, "Reader first")


def _with_tags(cell: dict, *tags: str, **metadata) -> dict:
    cell["metadata"] = {**cell.get("metadata", {}), "tags": list(tags), **metadata}
    return cell


@pytest.mark.parametrize(
    ("lang", "summary"),
    [("en", "✓ 3 checks: the bound holds"), ("ja", "✓ 確認 3 件：上界が成り立ちます")],
)
def test_a_check_cell_folds_whole_under_what_it_establishes(tmp_path, lang, summary):
    line = {"en": "the bound holds", "ja": "上界が成り立ちます"}[lang]
    cells = [
        _cell("markdown", "The bound is $|x| \\le 1$."),
        _with_tags(
            _code("x = 0.5\nassert abs(x) <= 1\nassert_close(x, 0.5)\nassert x > 0"),
            "check",
            summary=line,
        ),
        _code("print('teaching')"),
    ]
    html = _rendered(cells, tmp_path)
    out = folding.fold_cells(html, cells, lang, "demo.ipynb")
    folds = re.findall(r'<details class="check"><summary>(.*?)</summary>(.*?)</details>', out, re.S)
    assert [s for s, _ in folds] == [summary]
    assert "abs" in folds[0][1] and "teaching" not in folds[0][1]
    assert "teaching" in re.sub(r"<details.*?</details>", "", out, flags=re.S)
    assert 'class="cell-tag"' not in folds[0][1]  # the fold says what the chip said


def test_a_tool_tag_shows_no_chip_and_folds_nothing(tmp_path):
    # nbval-ignore-output is for the test runner: the reader sees the cell as it is
    cells = [_cell("markdown", "Train."), _with_tags(_code("print('loss')"), "nbval-ignore-output")]
    html = _rendered(cells, tmp_path)
    assert "nbval-ignore-output</span>" in html  # nbconvert shows the tag as a chip
    out = folding.fold_cells(html, cells, "en", "demo.ipynb")
    assert 'class="cell-tag"' not in out and "<details" not in out and "loss" in out


def test_a_check_count_and_its_grammar():
    assert folding.count_checks("assert a\n    assert b  # in a loop\nassert_close(x, y)") == 3
    assert folding.count_checks("x = 'assert'\nprint(asserted)") == 0
    assert folding.check_summary("assert a", "it holds", "en") == "✓ 1 check: it holds"
    assert folding.check_summary("assert a\nassert b", None, "en") == "✓ 2 checks"
    assert folding.check_summary("assert a", "a < b", "en") == "✓ 1 check: a &lt; b"


def test_a_figure_cell_folds_its_code_and_shows_its_figure(tmp_path):
    png = base64.b64encode(_png(4, 3)).decode()
    figure = _with_tags(_code("plt.plot([1, 2])"), "figure")
    figure["outputs"] = [
        {"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}
    ]
    cells = [_cell("markdown", "Look."), figure]
    html = _rendered(cells, tmp_path)
    out = folding.fold_cells(html, cells, "ja", "demo.ipynb")
    fold = re.search(
        r'<details class="figure-code"><summary>(.*?)</summary>(.*?)</details>', out, re.S
    )
    assert fold[1] == "コードを表示" and "plot" in fold[2] and "<img" not in fold[2]
    assert "<img" in out[: fold.start()]  # the figure in view, its code folded beneath it
    cell = out[out.index('class="jp-Cell ') :]
    assert cell.index("<img") < cell.index("figure-code") < cell.index("</details></div>")


@pytest.mark.parametrize(
    ("lang", "label"), [("en", "Imports and setup"), ("ja", "インポートと準備")]
)
def test_a_setup_cell_folds_whole_under_its_label(tmp_path, lang, label):
    cells = [
        _cell("markdown", "Intro."),
        _with_tags(_code("import math\nuse_site_style()"), "setup"),
        _code("print('teaching')"),
    ]
    html = _rendered(cells, tmp_path)
    out = folding.fold_cells(html, cells, lang, "demo.ipynb")
    folds = re.findall(r'<details class="setup"><summary>(.*?)</summary>(.*?)</details>', out, re.S)
    assert [s for s, _ in folds] == [label]
    assert "math" in folds[0][1] and "teaching" not in folds[0][1]


def test_a_deep_dive_folds_under_its_title(tmp_path):
    dive = _with_tags(
        _cell("markdown", "**Going deeper: the float32 error.** Angles lose bits."), "deeper"
    )
    cells = [
        _cell("markdown", "Main text."),
        dive,
        _with_tags(_code("x = 1"), "deeper"),
        _cell("markdown", "Back."),
    ]
    html = _rendered(cells, tmp_path)
    out = folding.fold(html, folding.DEEPER, "en")
    fold = re.search(
        r'<details class="deeper" id="deeper-the-float32-error"><summary>(.*?)</summary>'
        r"(.*?)</details>",
        out,
        re.S,
    )
    assert fold[1] == "Going deeper: the float32 error"
    assert "Angles lose bits." in fold[2] and "x = 1" in fold[2] and "Back." not in fold[2]


@pytest.mark.parametrize(
    "lang, titles, ids",
    [
        (
            "en",
            ["Going deeper: Hugging Face's names.", "Going deeper: Hugging Face's names."],
            ["deeper-hugging-faces-names", "deeper-hugging-faces-names-2"],
        ),
        ("ja", ["さらに詳しく：温度の導出。"], ["deeper-温度の導出"]),
    ],
)
def test_a_deep_dive_gets_an_id_that_prose_can_link_to(tmp_path, lang, titles, ids):
    cells = []
    for title in titles:
        cells += [_with_tags(_cell("markdown", f"**{title}** Text."), "deeper")]
        cells += [_cell("markdown", "Between.")]
    out = folding.fold(_rendered(cells, tmp_path), folding.DEEPER, lang)
    assert re.findall(r'<details class="deeper" id="([^"]*)">', out) == ids


def test_cells_and_page_out_of_step_are_reported(tmp_path, caplog):
    cells = [_cell("markdown", "One."), _with_tags(_code("assert True"), "check")]
    html = _rendered(cells, tmp_path)
    with caplog.at_level("WARNING", logger="mkdocs.hooks.folding"):
        assert folding.fold_cells(html, cells[:1], "en", "demo.ipynb") == html
    assert "demo.ipynb: 2 cells on the page, 1 in its notebook" in caplog.text


def test_the_split_keeps_a_check_summary_in_the_page_language():
    nb = copy_of(BILINGUAL)
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["metadata"] = {"tags": ["check"], "summary": {"en": "it holds", "ja": "成り立ちます"}}
    for lang, line in (("en", "it holds"), ("ja", "成り立ちます")):
        split = language.split_notebook(nb, lang)
        kept = next(c for c in split["cells"] if c["cell_type"] == "code")
        assert kept["metadata"]["summary"] == line


# --------------------------------------------------------------------------
# Language links (hooks/alternate_links.py)


@pytest.mark.parametrize(
    "href, page_url, site_path, expected",
    [
        ("/", "", "/", "./"),
        ("/ja/", "", "/", "ja/"),
        ("/", "ja/", "/", "../"),
        ("/ja/", "ja/", "/", "./"),
        ("/posenc/ja/", "", "/posenc/", "ja/"),
        ("/posenc/", "ja/", "/posenc/", "../"),
        ("/elsewhere/", "", "/posenc/", "/elsewhere/"),  # not the site's: left alone
    ],
)
def test_switcher_links_become_relative_to_the_page(href, page_url, site_path, expected):
    assert alternate_links.relative_link(href, page_url, site_path) == expected
