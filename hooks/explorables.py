"""MkDocs hook: interactive figures ("explorables") on the chapter pages.

Source -> site, one way:

    notebooks/explorables/NN-slug.py   spec(lang) -> a Vega-Lite spec, its
                                       labels in that language, its numbers
                                       computed from posenc at build time or
                                       by posenc's formula in the browser
      -> hooks/compile_vegalite.mjs    all specs compiled to Vega in one node
                                       process per build
      -> site/assets/explorables/NN-slug.LANG.HASH.json

A chapter shows its explorable where one of its prose cells (one per
language) holds the marker ``<!-- explorable: NN-slug -->``: the hook
replaces that cell's text (a note for readers of the notebook) with the
figure, its caption in the page's language and the path of its compiled
spec. Only such pages get docs/javascripts/explorables.js and
docs/stylesheets/explorables.css; the script loads Vega's runtime
(node_modules/vega, copied to site/assets/vendor/) and the spec once the
figure comes near the screen, so neither a page without an explorable nor
the first screen of a page with one pays for it. The static PNG figures of
the chapter stay, for readers without JavaScript and for the notebook.

tests/site/test_explorables.py moves every control and compares the
plotted numbers with posenc.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import json
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

SOURCE_DIR = "notebooks/explorables"
SPEC_DIR = "assets/explorables"  # compiled specs, relative to site/
VENDOR_DIR = "assets/vendor"
SCRIPT = "javascripts/explorables.js"  # from docs/, loaded by explorable pages only
STYLESHEET = "stylesheets/explorables.css"
COMPILER = Path(__file__).with_name("compile_vegalite.mjs")
MARKER = re.compile(r"<!--\s*explorable:\s*(?P<name>\d+-[a-z0-9-]+)\s*-->")

# Colours that read on the light page and the dark one: every one has a
# contrast ratio of at least 3:1 with white and with Material's slate
# background (#1e2129), WCAG's minimum for the parts of a graphic.
PALETTE = ["#3f88c5", "#d95f02", "#1b9e77", "#e7298a", "#7570b3", "#a6761d"]

# Shared by every explorable: a transparent background, and text, axes and
# grid in the page's own text colour. That colour is the parameter TEXT_COLOR,
# which docs/javascripts/explorables.js sets from the page and updates when
# the reader switches between the light and the dark scheme.
TEXT_COLOR = "textColor"
_TEXT = {"expr": TEXT_COLOR}
CONFIG = {
    "background": "transparent",
    "view": {"stroke": None},
    "axis": {
        "labelColor": _TEXT,
        "titleColor": _TEXT,
        "domainColor": _TEXT,
        "tickColor": _TEXT,
        "gridColor": _TEXT,
        "gridOpacity": 0.15,
        "labelFontSize": 11,
        "titleFontSize": 12,
        "titleFontWeight": "normal",
    },
    "legend": {
        "labelColor": _TEXT,
        "titleColor": _TEXT,
        "labelFontSize": 11,
        "titleFontSize": 12,
        "titleFontWeight": "normal",
    },
    "header": {"labelColor": _TEXT, "titleColor": _TEXT},
    "title": {
        "color": _TEXT,
        "subtitleColor": _TEXT,
        "fontSize": 12,
        "fontWeight": "normal",
        "anchor": "start",
    },
    "text": {"color": _TEXT},
    "range": {"category": PALETTE},
    "mark": {"color": PALETTE[0]},
}

NOSCRIPT = {
    "en": "This interactive figure needs JavaScript; the static figures of the chapter show it "
    "for the settings the text discusses.",
    "ja": "この対話的な図には JavaScript が必要です。章の静的な図は、本文で扱う設定での値を示しています。",
}


# --------------------------------------------------------------------------
# The specs


def sources(root: Path) -> dict[str, Path]:
    """``{"01-sinusoidal": path}`` for every explorable of the project."""
    return {p.stem: p for p in sorted((root / SOURCE_DIR).glob("[0-9]*.py"))}


def load(path: Path):
    """Import one explorable's module from its file (the names start with a digit)."""
    spec = importlib.util.spec_from_file_location(f"explorable_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("spec", "TEXT"):
        if not hasattr(module, name):
            raise ValueError(f"{path}: an explorable module defines spec(lang) and TEXT")
    return module


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) else value
    return out


def with_theme(spec: dict) -> dict:
    """``spec`` with the site's shared config under its own (its own wins)
    and the text colour parameter."""
    params = [{"name": TEXT_COLOR, "value": "currentColor"}, *spec.get("params", [])]
    return {**spec, "params": params, "config": _merge(CONFIG, spec.get("config", {}))}


def compile_specs(specs: dict[str, dict], root: Path) -> dict[str, dict]:
    """Vega-Lite -> Vega, all in one node process."""
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is needed to compile the explorables: install Node.js")
    if not (root / "node_modules" / "vega-lite").exists():
        raise FileNotFoundError(
            f"{root / 'node_modules' / 'vega-lite'} is missing: run `npm ci` (or `make setup`)"
        )
    proc = subprocess.run(
        [node, str(COMPILER)], cwd=root, input=json.dumps(specs), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the explorables failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


class Explorables:
    """Every explorable in both languages, built and compiled once per process."""

    def __init__(self, root: Path, languages=("en", "ja")):
        self.root = root
        self.modules = {name: load(path) for name, path in sources(root).items()}
        lite = {
            f"{name}.{lang}": with_theme(module.spec(lang))
            for name, module in self.modules.items()
            for lang in languages
        }
        self.compiled = {}  # "name.lang" -> (file name, JSON text)
        for key, vega in compile_specs(lite, root).items():
            text = json.dumps(vega, ensure_ascii=False, separators=(",", ":"))
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            self.compiled[key] = (f"{key}.{digest}.json", text)

    def caption(self, name: str, lang: str) -> str:
        return self.modules[name].TEXT[lang]["caption"]

    def renderer(self, name: str) -> str:
        """ "svg" (the default), or "canvas" for a figure of many thousand marks."""
        return getattr(self.modules[name], "RENDERER", "svg")


_BUILT: Explorables | None = None


def explorables(root: Path) -> Explorables:
    global _BUILT
    if _BUILT is None or _BUILT.root != root:
        _BUILT = Explorables(root)
    return _BUILT


# --------------------------------------------------------------------------
# The pages

_PROSE_OPEN = re.compile(r'<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>')
_DIV_TAG = re.compile(r"<div\b|</div>")


def _div_end(text: str, start: int) -> int:
    depth = 0
    for m in _DIV_TAG.finditer(text, start):
        depth += 1 if m[0] == "<div" else -1
        if depth == 0:
            return m.end()
    raise ValueError(f"unbalanced <div> at offset {start}")


def _relative(page, target: str) -> str:
    """URL of site-relative ``target`` as seen from ``page``."""
    return posixpath.relpath(target, posixpath.dirname("/" + page.url + "x")[1:] or ".")


def figure_html(spec_url: str, caption: str, lang: str, renderer: str = "svg") -> str:
    return (
        f'<figure class="explorable" data-spec="{html.escape(spec_url)}" '
        f'data-renderer="{renderer}">'
        '<div class="explorable-view"></div>'
        f"<noscript><p>{html.escape(NOSCRIPT[lang])}</p></noscript>"
        f"<figcaption>{html.escape(caption, quote=False)}</figcaption></figure>"
    )


def place(content: str, page, ex: Explorables, lang: str) -> tuple[str, list[str]]:
    """Replace each marked prose cell's text with its explorable.

    Returns the new HTML and the compiled spec files the page uses.
    """
    used = []
    while (m := MARKER.search(content)) is not None:
        name = m["name"]
        if name not in ex.modules:
            raise ValueError(
                f"{page.file.src_uri}: no explorable {name!r} in {SOURCE_DIR}/ "
                f"(there are: {', '.join(ex.modules) or 'none'})"
            )
        openings = list(_PROSE_OPEN.finditer(content, 0, m.start()))
        if not openings:
            raise ValueError(f"{page.file.src_uri}: the explorable marker is not in a prose cell")
        opening = openings[-1]
        end = _div_end(content, opening.start())
        file_name, _ = ex.compiled[f"{name}.{lang}"]
        url = _relative(page, f"{SPEC_DIR}/{file_name}")
        inner = figure_html(url, ex.caption(name, lang), lang, ex.renderer(name))
        content = content[: opening.end()] + inner + "</div>" + content[end:]
        used.append(file_name)
    return content, used


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb") or MARKER.search(content) is None:
        return content
    root = Path(config.config_file_path).parent
    lang = config.theme["language"]
    content, page.explorable_specs = place(content, page, explorables(root), lang)
    return content


def vega_file(root: Path) -> tuple[Path, str]:
    """Vega's runtime in node_modules, and its site path (versioned, so a new
    release is never served from a reader's cache under the old name)."""
    package = root / "node_modules" / "vega"
    if not package.exists():
        raise FileNotFoundError(f"{package} is missing: run `npm ci` (or `make setup`)")
    version = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    return package / "build" / "vega.min.js", f"{VENDOR_DIR}/vega-{version}.min.js"


def on_post_page(output, page, config):
    specs = getattr(page, "explorable_specs", None)
    if not specs:
        return output
    root, site = Path(config.config_file_path).parent, Path(config.site_dir)
    ex = explorables(root)
    for file_name in specs:
        key = file_name.rsplit(".", 2)[0]
        target = site / SPEC_DIR / file_name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(ex.compiled[key][1], encoding="utf-8")
    source, vega_rel = vega_file(root)
    target = site / vega_rel
    if not target.exists() or target.stat().st_size != source.stat().st_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    head = (
        f'<link rel="stylesheet" href="{_relative(page, STYLESHEET)}">'
        f'<script src="{_relative(page, SCRIPT)}" data-vega="{_relative(page, vega_rel)}" defer>'
        "</script>"
    )
    return output.replace("</head>", head + "</head>", 1)
