"""MkDocs hook: copy the third-party browser assets into the built site.

The Noto Sans JP webfont is installed from the npm registry (package.json,
pinned by package-lock.json) into node_modules/; nothing of it is
committed. After each build this hook copies what the Japanese pages load
into site/assets/vendor/, so the site needs no network at view time. (The
math needs nothing in the browser: hooks/math.py typesets it at build time.)
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

VENDOR = "assets/vendor"
FONT_PACKAGE = "@fontsource/noto-sans-jp"
FONT_WEIGHTS = (400, 700)


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


def on_post_build(config, **kwargs):
    node_modules = _node_modules(config)
    vendor = Path(config.site_dir) / VENDOR
    vendor.mkdir(parents=True, exist_ok=True)

    package_dir = node_modules / FONT_PACKAGE
    css, files = font_css(package_dir)
    (vendor / "noto-sans-jp.css").write_text(css, encoding="utf-8")
    for name in files:
        _copy(package_dir / "files" / name, vendor / "noto-sans-jp" / name)
