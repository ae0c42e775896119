"""MkDocs hook: a search index that finds prose, one language at a time.

Material's search plugin indexes each page's HTML by sections (a heading and
what follows it). This hook changes what it indexes and how, in three steps:

1. Sections of notebook pages. A chapter's heading sits inside its Markdown
   cell, and Material's parser ends a section where the heading's element
   ends: the later cells of the section, prose and code, fell into the
   page's first section, which search ranks above every other. The plugin is
   given each notebook page with its cell wrappers taken away (headings,
   prose and code side by side), without the cells' outputs (numbers and
   figures), prompts, copy buttons and download links (``searchable``).
2. After the build (and after mkdocs-static-i18n has merged both languages'
   entries), each entry's code (``<pre>`` blocks) moves to a field of its
   own, ``code``, ranked far below the prose; the TeX of the prose and titles
   becomes plain text (``$\\theta_i$`` -> ``θ_i``), so that result snippets
   show no TeX source; and Japanese text is cut into words, with a
   zero-width space between two words (the search's separator), by the
   same segmenter that cuts the reader's query in the browser
   (docs/javascripts/japanese-words.js, ICU's dictionary through
   ``Intl.Segmenter``, in node here; docs/javascripts/search-worker.js there).
   lunr's own Japanese support is off: its segmenter would cut the words
   again.
3. The index is written once per language, ``search_index.en.json`` and
   ``search_index.ja.json``; docs/javascripts/search-lazy.js, loaded before
   Material's bundle, sends the index request of a page to its language's
   file, and only once the reader opens or focuses the search box.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from mkdocs.plugins import event_priority

#: language -> URL prefix of its pages
INDEXES = {"en": "", "ja": "ja/"}
#: lunr languages of both indexes: "ja" would load lunr's TinySegmenter,
#: which cuts the words made here into pieces again.
LUNR_LANGUAGES = ["en"]
WORD_BREAK = "\u200b"  # zero-width space, put between Japanese words
#: Splits text into search terms: white space, the zero-width space between
#: Japanese words, ASCII and Japanese punctuation (not "_", nor "." inside a
#: word: they belong to names such as rotate_half or torch.cat), and
#: HTML-escaped < >.
SEPARATOR = (
    r"[\s\u200b\-,:;!?=\[\]()\"'`/|{}*+<>]+|&[lg]t;|\.(?!\S)"
    r"|[\u3000-\u3004\u3008-\u303f\u30fb\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]+"
)
#: Field boosts: a title weighs most, code far less than prose.
FIELDS = {"title": {"boost": 1000.0}, "text": {"boost": 1.0}, "code": {"boost": 0.05}}
SEGMENTER = Path(__file__).parents[1] / "docs" / "javascripts" / "japanese-words.js"


# --------------------------------------------------------------------------
# 1. What the search plugin reads of a notebook page

# Elements whose text is not the chapter's: cell prompts, copy buttons and
# the plain copy of the code they copy, tag chips, the download and Colab
# links, and outputs other than Markdown.
_CHROME = {
    "jp-InputPrompt",
    "jp-OutputPrompt",
    "zeroclipboard-container",
    "clipboard-copy-txt",
    "celltoolbar",
    "nb-toolbar",
}
_VOID = {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


def _dropped(tag: str, attrs: dict) -> bool:
    classes = set((attrs.get("class") or "").split())
    if classes & _CHROME or tag == "clipboard-copy":
        return True
    return "jp-OutputArea-output" in classes and attrs.get("data-mime-type") != "text/markdown"


class _Flattener(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skipping = 0  # depth inside a dropped element

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if not self.skipping:
                self.out.append(self.get_starttag_text())
            return
        if self.skipping or _dropped(tag, dict(attrs)):
            self.skipping += 1
        elif tag == "summary":  # a folded solution's label reads as a paragraph
            self.out.append("<p>")
        elif tag not in ("div", "details"):
            self.out.append(self.get_starttag_text())

    def handle_startendtag(self, tag, attrs):
        if not self.skipping:
            self.out.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if self.skipping:
            self.skipping -= 1
        elif tag == "summary":
            self.out.append("</p>")
        elif tag not in ("div", "details"):
            self.out.append(f"</{tag}>")

    def handle_data(self, data):
        if not self.skipping:
            self.out.append(html.escape(data, quote=False))


def searchable(content: str) -> str:
    """A notebook page's HTML as search should read it: the cells' wrappers
    (``<div>``, ``<details>``) gone, so that a heading and the cells after
    it are siblings; prompts, copy buttons, tag chips, the toolbar and every
    output but Markdown dropped; a folded solution's summary a paragraph."""
    parser = _Flattener()
    parser.feed(content)
    parser.close()
    return "".join(parser.out)


class _SearchView:
    """A page as the search plugin sees it: its content made searchable."""

    def __init__(self, page):
        self._page = page
        self.content = searchable(page.content)

    def __getattr__(self, name):
        return getattr(self._page, name)


@event_priority(-50)  # after the search plugin's on_config has made its index
def on_config(config, **kwargs):
    plugin = config.plugins.get("material/search") or config.plugins.get("search")
    index = getattr(plugin, "search_index", None)
    if index is None or getattr(index.add_entry_from_context, "notebook_sections", False):
        return
    add = index.add_entry_from_context

    def add_entry_from_context(page):
        add(_SearchView(page) if page.file.src_uri.endswith(".ipynb") else page)

    add_entry_from_context.notebook_sections = True
    index.add_entry_from_context = add_entry_from_context


# --------------------------------------------------------------------------
# 2. Entries: code apart, TeX as text, Japanese in words

_PRE = re.compile(r"<pre>(.*?)</pre>", re.DOTALL)
_CODE_SPAN = re.compile(r"(<code>.*?</code>)", re.DOTALL)
# What MathJax typesets (hooks/typeset_math.js): $$..$$, $..$, \(..\), \[..\]; \$ is a dollar.
_MATH = re.compile(
    r"\$\$(?P<d1>.+?)\$\$|(?<!\\)\$(?P<i1>[^$]+?)(?<!\\)\$"
    r"|\\\((?P<i2>.+?)\\\)|\\\[(?P<d2>.+?)\\\]",
    re.DOTALL,
)

_SYMBOLS = {
    # Greek
    **dict(
        zip(
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
            "omicron pi rho sigma tau upsilon phi chi psi omega".split(),
            "αβγδεζηθικλμνξοπρστυφχψω",
            strict=True,
        )
    ),
    **dict(
        zip(
            "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split(),
            "ΓΔΘΛΞΠΣΥΦΨΩ",
            strict=True,
        )
    ),
    "varepsilon": "ε",
    "vartheta": "ϑ",
    "varphi": "φ",
    "varrho": "ϱ",
    "varsigma": "ς",
    "ell": "ℓ",
    # operators and relations
    "cdot": "·",
    "times": "×",
    "div": "÷",
    "pm": "±",
    "mp": "∓",
    "circ": "∘",
    "odot": "⊙",
    "otimes": "⊗",
    "oplus": "⊕",
    "ast": "*",
    "star": "⋆",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "ll": "≪",
    "gg": "≫",
    "approx": "≈",
    "sim": "∼",
    "simeq": "≃",
    "equiv": "≡",
    "propto": "∝",
    "in": "∈",
    "notin": "∉",
    "subset": "⊂",
    "subseteq": "⊆",
    "cup": "∪",
    "cap": "∩",
    "setminus": "∖",
    "emptyset": "∅",
    "forall": "∀",
    "exists": "∃",
    "neg": "¬",
    "land": "∧",
    "lor": "∨",
    "wedge": "∧",
    "vee": "∨",
    "to": "→",
    "rightarrow": "→",
    "leftarrow": "←",
    "Rightarrow": "⇒",
    "Leftarrow": "⇐",
    "iff": "⇔",
    "implies": "⇒",
    "mapsto": "↦",
    "leftrightarrow": "↔",
    "infty": "∞",
    "partial": "∂",
    "nabla": "∇",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
    "sqrt": "√",
    "top": "⊤",
    "perp": "⊥",
    "dagger": "†",
    "prime": "′",
    "dots": "…",
    "ldots": "…",
    "cdots": "⋯",
    "vdots": "⋮",
    "ddots": "⋱",
    "langle": "⟨",
    "rangle": "⟩",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "lceil": "⌈",
    "rceil": "⌉",
    "lvert": "|",
    "rvert": "|",
    "vert": "|",
    "lVert": "‖",
    "rVert": "‖",
    "Vert": "‖",
    "mid": "|",
    "|": "‖",
    "{": "{",
    "}": "}",
    "%": "%",
    "&": "&",
    "#": "#",
    "_": "_",
    "$": "$",
    "\\": "; ",
    # spaces
    ",": " ",
    ";": " ",
    ":": " ",
    "!": "",
    " ": " ",
    "quad": " ",
    "qquad": " ",
}
# Commands that only style, size or space their argument: dropped, the
# argument kept (\mathbf{x} -> x, \left( -> ().
_DROPPED = set(
    "left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr middle displaystyle "
    "textstyle scriptstyle limits nolimits mathrm mathbf mathit mathsf mathtt mathcal "
    "mathbb mathfrak boldsymbol bm text textrm textit textbf texttt operatorname "
    "hat widehat tilde widetilde bar overline underline vec dot ddot mathring "
    "tag label nonumber notag phantom hphantom vphantom underbrace overbrace".split()
)
_COMMAND = re.compile(r"\\([A-Za-z]+|.)")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[^}]*\}(?:\{[^}]*\})?")
_FRAC = re.compile(r"\\[dt]?frac\s*(\{(?:[^{}]|\{[^{}]*\})*\}|\S)\s*(\{(?:[^{}]|\{[^{}]*\})*\}|\S)")
_BINOM = re.compile(r"\\binom\s*\{([^{}]*)\}\s*\{([^{}]*)\}")


def _operand(arg: str) -> str:
    """A fraction's numerator or denominator: bracketed unless one symbol or number."""
    arg = arg[1:-1].strip() if arg.startswith("{") and arg.endswith("}") else arg
    return arg if re.fullmatch(r"\\?\w+", arg) else f"({arg})"


def tex_to_text(tex: str) -> str:
    """Plain text for a formula, readable in a result snippet and findable
    by its symbols: ``\\theta_i = b^{-2i/d}`` -> ``θ_i = b^-2i/d``. Known
    commands become their characters; styling and sizing commands go, their
    argument kept; anything else loses its backslash."""
    tex = _ENVIRONMENT.sub(" ", tex).replace("\\{", "\x00").replace("\\}", "\x01")
    for _ in range(3):  # nested fractions
        tex = _FRAC.sub(lambda m: f"{_operand(m[1])}/{_operand(m[2])}", tex)
    tex = _BINOM.sub(r"C(\1, \2)", tex)

    def command(m: re.Match) -> str:
        name = m[1]
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        return "" if name in _DROPPED else name + " " if name.isalpha() else name

    text = _COMMAND.sub(command, tex)
    text = text.replace("{", "").replace("}", "").replace("&", " ").replace("~", " ")
    text = text.replace("\x00", "{").replace("\x01", "}")
    return re.sub(r"\s+(?=[_^])", "", re.sub(r"\s+", " ", text)).strip()


def _math_as_text(fragment: str) -> str:
    """``fragment`` (escaped HTML, no code) with every formula as plain text."""

    def formula(m: re.Match) -> str:
        tex = next(g for g in m.groups() if g is not None)
        return html.escape(tex_to_text(html.unescape(tex)), quote=False)

    return _MATH.sub(formula, fragment).replace("\\$", "$")


def prose_text(text: str) -> str:
    """Index text with the TeX of its formulas as plain text; inline code
    (``<code>``) is left as it is."""
    parts = _CODE_SPAN.split(text)
    return "".join(p if k % 2 else _math_as_text(p) for k, p in enumerate(parts))


def separate_code(entry: dict) -> dict:
    """The entry with its ``<pre>`` blocks moved from ``text`` to ``code``,
    and its prose and title free of TeX."""
    code = [m[1].strip() for m in _PRE.finditer(entry["text"])]
    out = {**entry, "title": prose_text(entry["title"])}
    out["text"] = re.sub(r"\s{2,}", " ", prose_text(_PRE.sub(" ", entry["text"]))).strip()
    if code:
        out["code"] = "\n".join(code)
    return out


def japanese_words(texts: list[str], root: Path) -> list[str]:
    """``texts`` with a zero-width space between two Japanese words, cut by
    docs/javascripts/japanese-words.js in node (one process for all)."""
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is needed to build the Japanese search index")
    script = (
        f"const words = require({json.dumps(str(SEGMENTER))});"
        "let input = '';"
        "process.stdin.on('data', d => input += d);"
        "process.stdin.on('end', () => process.stdout.write(JSON.stringify("
        f"JSON.parse(input).map(t => words(t, {json.dumps(WORD_BREAK)})))));"
    )
    proc = subprocess.run(
        [node, "-e", script], input=json.dumps(texts), capture_output=True, text=True, cwd=root
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cutting the Japanese search text into words failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def prepare(index: dict, root: Path) -> dict:
    """The merged index, its entries searchable as step 2 says."""
    docs = [separate_code(d) for d in index["docs"]]
    words = iter(japanese_words([s for d in docs for s in (d["title"], d["text"])], root))
    for d in docs:
        d["title"], d["text"] = next(words), next(words)
    config = {**index["config"], "lang": LUNR_LANGUAGES, "separator": SEPARATOR}
    config["fields"] = {**config.get("fields", {}), **FIELDS}
    return {**index, "config": config, "docs": docs}


# --------------------------------------------------------------------------
# 3. One index per language


def split_index(index: dict) -> dict[str, dict]:
    """The entries of each language."""
    out = {}
    others = tuple(prefix for prefix in INDEXES.values() if prefix)
    for lang, prefix in INDEXES.items():
        if prefix:
            docs = [d for d in index["docs"] if d["location"].startswith(prefix)]
        else:
            docs = [d for d in index["docs"] if not d["location"].startswith(others)]
        out[lang] = {**index, "docs": docs}
    return out


@event_priority(-200)  # after mkdocs-static-i18n (-100) has written the merged index
def on_post_build(config, **kwargs):
    folder = Path(config.site_dir) / "search"
    merged = folder / "search_index.json"
    if not merged.exists():
        return
    index = json.loads(merged.read_text(encoding="utf-8"))
    if index["config"].get("separator") == SEPARATOR:
        return  # prepared already (a language build inside mkdocs-static-i18n's)
    index = prepare(index, Path(config.config_file_path).parent)
    merged.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")), "utf-8")
    for lang, part in split_index(index).items():
        (folder / f"search_index.{lang}.json").write_text(
            json.dumps(part, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
