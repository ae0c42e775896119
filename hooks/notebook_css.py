"""MkDocs hook: the notebook pages' shared stylesheet keeps only what they use.

mkdocs-jupyter ships all of JupyterLab's CSS (~600 KB: file browser,
widgets, terminals, ...); hooks/page_weight.py moves it to one shared file
under assets/notebook/. Once every page of every language is built, this
hook drops the rules whose selectors name a class that no built page
carries: a tenth of the bytes to download, and far less for the browser to
parse on each page.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.plugins import event_priority

SHARED_DIR = "assets/notebook"  # where hooks/page_weight.py puts the shared CSS

_CLASS_ATTR = re.compile(r'\bclass="([^"]*)"')
_CLASS_NAME = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
# mkdocs-jupyter scopes every rule under .jupyter-wrapper, which leaves some
# that can never match: `.jupyter-wrapper :root`, `.jupyter-wrapper body`
# A class inside :not(...) need not be on the page for the rule to match.
_NOT = re.compile(r":not\((?:[^()]|\([^()]*\))*\)")
# Material's script adds classes to the page after loading (the scroll box
# around wide tables, md-typeset__scrollwrap, ...): rules about them stay.
_RUNTIME_CLASS = re.compile(r"^md-")
_NEVER_MATCHES = re.compile(r"\S\s+(?::root|html|body)\b")
# at-rules whose block holds rules; others (@font-face, @keyframes, ...) are kept whole
_NESTING = ("@media", "@supports", "@layer", "@container", "@document")


def used_classes(site_dir: Path) -> set[str]:
    """Every class name that a built page carries."""
    found: set[str] = set()
    for page in site_dir.rglob("*.html"):
        for value in _CLASS_ATTR.findall(page.read_text(encoding="utf-8")):
            found.update(value.split())
    return found


def _split_selectors(prelude: str) -> list[str]:
    """Split a selector list at its top-level commas (not inside :is(...))."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(prelude):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(prelude[start:k])
            start = k + 1
    parts.append(prelude[start:])
    return [p.strip() for p in parts if p.strip()]


def _block_end(css: str, open_at: int) -> int:
    """Index just past the ``}`` that closes the ``{`` at ``open_at``."""
    depth, k, quote = 0, open_at, None
    while k < len(css):
        ch = css[k]
        if quote:
            if ch == "\\":
                k += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    raise ValueError("unbalanced braces in the notebook stylesheet")


def _may_match(selector: str, classes: set[str]) -> bool:
    needed = set(_CLASS_NAME.findall(_NOT.sub("", selector)))
    missing = {c for c in needed - classes if not _RUNTIME_CLASS.match(c)}
    return not missing and not _NEVER_MATCHES.search(selector)


def purge(css: str, classes: set[str]) -> str:
    """Keep the rules of ``css`` that can match a page with ``classes``.

    A selector is kept unless it needs a class outside ``classes`` (one
    inside ``:not()`` is not needed; Material's ``md-`` classes, added by its
    script, count as present), or puts ``:root``, ``html`` or ``body``
    inside another element; a rule
    keeps its kept selectors, and goes when none is left. Rules inside
    @media and @supports are purged in the same way; other at-rules stay.
    """
    css = _COMMENT.sub("", css)
    out, k = [], 0
    while k < len(css):
        brace, semi = css.find("{", k), css.find(";", k)
        if brace < 0:
            break
        prelude = css[k:brace].strip()
        if prelude.startswith("@") and 0 <= semi < brace:  # @charset, @import
            out.append(css[k : semi + 1].strip())
            k = semi + 1
            continue
        end = _block_end(css, brace)
        block = css[brace + 1 : end - 1]
        if prelude.startswith(_NESTING):
            inner = purge(block, classes)
            if inner:
                out.append(f"{prelude}{{{inner}}}")
        elif prelude.startswith("@"):
            out.append(f"{prelude}{{{block.strip()}}}")
        else:
            kept = [s for s in _split_selectors(prelude) if _may_match(s, classes)]
            if kept:
                out.append(f"{','.join(kept)}{{{block.strip()}}}")
        k = end
    return "\n".join(out)


@event_priority(-200)  # after mkdocs-static-i18n (-100) has built every language
def on_post_build(config, **kwargs):
    site_dir = Path(config.site_dir)
    sheets = sorted((site_dir / SHARED_DIR).glob("*.css"))
    if not sheets:
        return
    classes = used_classes(site_dir)
    for sheet in sheets:
        sheet.write_text(purge(sheet.read_text(encoding="utf-8"), classes), encoding="utf-8")
