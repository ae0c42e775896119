"""MkDocs hook: a notebook page's inline payload moves to shared, cached files.

nbconvert inlines into every notebook page about 600 KB of JupyterLab CSS,
the copy button's script and every figure as base64. On each notebook page
this hook moves the CSS and the script to one shared file each, named by
its content hash, and every PNG figure to a file named by its hash too
(identical in both languages, so stored and downloaded once), with its
display size, ``loading="lazy"`` and the alternative text of its cell in
the page's language. nbconvert's MathJax and Mermaid loaders (CDN
addresses) go: the math is typeset at build time (hooks/math.py).
hooks/notebook_css.py later keeps only the rules of the shared CSS that
the pages use.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import posixpath
import re
import struct
from pathlib import Path

SHARED_DIR = "assets/notebook"  # shared CSS/JS of notebook pages, relative to site/
FIGURE_DIR = "assets/figures"

_STYLE = re.compile(r"<style[^>]*>(?P<css>.*?)</style>", re.DOTALL)
_INLINE_SCRIPT = re.compile(r"<script>(?P<js>(?:(?!</script>).)*?)</script>", re.DOTALL)
# nbconvert's MathJax 2 loader and its Mermaid loader both point at a CDN;
# the site typesets its math at build time, and the notebooks draw no Mermaid
# diagrams.
_CDN_LOADERS = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->"
    r"|<script type=\"module\">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*?</script>",
    re.DOTALL,
)
_DATA_IMG = re.compile(
    r'<img (?P<before>[^>]*?)src="data:image/png;base64,(?P<data>[^"]+)"(?P<after>[^>]*)>'
)


_SIZE_ATTR = re.compile(r'\s*\b(width|height)="?(\d+)"?')


def _png_size(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _relative(page, target: str) -> str:
    """URL of site-relative ``target`` as seen from ``page``."""
    return posixpath.relpath(target, posixpath.dirname("/" + page.url + "x")[1:] or ".")


def _store(site_dir: Path, rel: str, data: bytes) -> None:
    path = site_dir / rel
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _hashed_name(data: bytes, suffix: str) -> str:
    return hashlib.sha256(data).hexdigest()[:16] + suffix


def externalise(output: str, page, site_dir: Path, alts: list[str | None] = ()) -> str:
    """Lighten a notebook page: inline CSS, the clipboard script and PNG
    figures move to shared files under ``site_dir``; the CDN loaders go. The
    figures, in order, get the alternative texts ``alts``."""
    start, end = output.find("<article"), output.find("</article>")
    if start < 0 or end < 0:
        return output
    head, body, tail = output[:start], output[start:end], output[end:]

    body = _CDN_LOADERS.sub("", body)

    css = "\n".join(m["css"] for m in _STYLE.finditer(body))
    body = _STYLE.sub("", body)
    links = ""
    if css.strip():
        data = css.encode("utf-8")
        rel = f"{SHARED_DIR}/{_hashed_name(data, '.css')}"
        _store(site_dir, rel, data)
        links += f'<link rel="stylesheet" href="{_relative(page, rel)}">'

    def script(m: re.Match) -> str:
        if "clipboard" not in m["js"]:
            return m.group(0)
        data = m["js"].encode("utf-8")
        rel = f"{SHARED_DIR}/{_hashed_name(data, '.js')}"
        _store(site_dir, rel, data)
        return f'<script src="{_relative(page, rel)}"></script>'

    body = _INLINE_SCRIPT.sub(script, body)

    figures = iter(alts)

    def figure(m: re.Match) -> str:
        data = base64.b64decode(m["data"])
        rel = f"{FIGURE_DIR}/{_hashed_name(data, '.png')}"
        _store(site_dir, rel, data)
        # A figure stored at twice its size for sharp high-density screens
        # (IPython's "retina" format) carries its display size, which
        # nbconvert writes as width=/height=; otherwise the PNG's own size.
        attrs = f"{m['before']}{m['after']}"
        shown = dict(_SIZE_ATTR.findall(attrs))
        width, height = _png_size(data)
        if "width" in shown and "height" in shown:
            width, height = shown["width"], shown["height"]
        elif "width" in shown:  # keep the PNG's aspect ratio
            width, height = shown["width"], round(height * int(shown["width"]) / width)
        attrs = _SIZE_ATTR.sub("", attrs)
        # nbconvert's placeholder alt says nothing; the cell's own text replaces it
        attrs = re.sub(r'\s*alt="[^"]*"', "", attrs).strip()
        attrs = attrs.removesuffix("/").strip()  # nbconvert closes <img ... />; we add attributes
        attrs += f' alt="{html.escape(next(figures, None) or "", quote=True)}"'
        return (
            f'<img src="{_relative(page, rel)}" width="{width}" height="{height}" '
            f'loading="lazy" decoding="async" {attrs.strip()}>'
        )

    body = _DATA_IMG.sub(figure, body)
    head = head.replace("</head>", links + "</head>", 1)
    return head + body + tail


def on_post_page(output, page, config):
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    # the figures' texts in this page's language, kept by the language split
    notebook = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))
    alts = notebook["metadata"].get("figure_alt", [])
    return externalise(output, page, Path(config.site_dir), alts)
