"""MkDocs hook: copy the third-party browser assets into the built site.

The Noto Sans JP webfont is installed from the npm registry (package.json,
pinned by package-lock.json) into node_modules/; nothing of it is
committed. After each build this hook copies what the Japanese pages load
into site/assets/vendor/, so the site needs no network at view time. (The
math needs nothing in the browser: hooks/math.py typesets it at build time.)

English pages show one Japanese word, the language switcher's "日本語";
they load a small stylesheet, noto-sans-jp-label.css, whose rules cover
those three characters only, not the 200 kB of the whole font's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

VENDOR = "assets/vendor"
FONT_PACKAGE = "@fontsource/noto-sans-jp"
FONT_WEIGHTS = (400, 700)
LABEL = "日本語"  # the Japanese words on an English page


def _node_modules(config) -> Path:
    path = Path(config.config_file_path).parent / "node_modules"
    if not (path / FONT_PACKAGE).exists():
        raise FileNotFoundError(
            f"{path / FONT_PACKAGE} is missing: run `npm ci` (or `make setup`) to install the site's assets"
        )
    return path


def _copy(src: Path, dst: Path) -> None:
    if dst.exists() and dst.stat().st_size == src.stat().st_size:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def font_css(package_dir: Path, weights=FONT_WEIGHTS) -> tuple[str, list[str]]:
    """The @font-face rules for ``weights``, woff2 only, and the files they use.

    Fontsource splits the font into ~120 subsets by unicode-range, so a
    browser downloads only the subsets whose characters a page shows.
    """
    rules, files = [], []
    for weight in weights:
        css = (package_dir / f"{weight}.css").read_text(encoding="utf-8")
        # keep the woff2 source only: every browser that renders the site reads it
        css = re.sub(r",\s*url\(\./files/[^)]+\.woff\)\s*format\('woff'\)", "", css)
        css = css.replace("url(./files/", "url(noto-sans-jp/")
        files += re.findall(r"url\(noto-sans-jp/([^)]+\.woff2)\)", css)
        rules.append(css)
    return "\n".join(rules), files


def _covers(unicode_range: str, char: str) -> bool:
    for part in unicode_range.split(","):
        low, _, high = part.strip().removeprefix("U+").partition("-")
        if int(low, 16) <= ord(char) <= int(high or low, 16):
            return True
    return False


def label_css(css: str, text: str = LABEL, weight: int = 400) -> str:
    """The @font-face rules of ``css`` (one weight) that draw ``text``, each
    narrowed to the characters of ``text`` it covers."""
    rules = []
    for rule in re.findall(r"@font-face\s*\{[^}]*\}", css):
        if f"font-weight: {weight};" not in rule:
            continue
        unicode_range = re.search(r"unicode-range:\s*([^;]+);", rule)[1]
        chars = sorted({c for c in text if _covers(unicode_range, c)})
        if chars:
            narrowed = ",".join(f"U+{ord(c):x}" for c in chars)
            rules.append(rule.replace(unicode_range, narrowed))
    missing = set(text) - {c for r in rules for c in text if f"U+{ord(c):x}" in r}
    if missing:
        raise ValueError(f"the font has no rule for {''.join(sorted(missing))}")
    return "\n".join(rules)


def on_post_build(config, **kwargs):
    node_modules = _node_modules(config)
    vendor = Path(config.site_dir) / VENDOR
    vendor.mkdir(parents=True, exist_ok=True)

    package_dir = node_modules / FONT_PACKAGE
    css, files = font_css(package_dir)
    (vendor / "noto-sans-jp.css").write_text(css, encoding="utf-8")
    (vendor / "noto-sans-jp-label.css").write_text(label_css(css), encoding="utf-8")
    for name in files:
        _copy(package_dir / "files" / name, vendor / "noto-sans-jp" / name)
