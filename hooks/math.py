"""MkDocs hook: the math is typeset once, at build time.

After each language's build, every built page that holds math goes through
MathJax in node (hooks/typeset_math.js, one node process per build, never one
per page): the page ships its formulas as SVG, with hidden MathML for screen
readers, so a reader sees them at first paint and no page loads MathJax.
Past a page's first 40 formulas, a formula in a block the page skips until
it nears the screen ships its SVG undrawn, to be drawn by
docs/overrides/partials/deferred.html (see hooks/typeset_math.js).
A TeX error fails a strict build, naming the page and the formula.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).with_name("typeset_math.js")
MARK = "math-typeset-at-build"  # the script leaves <meta name=MARK> in a page it typeset
PACKAGE = "mathjax-full"
log = logging.getLogger("mkdocs.hooks.math")

# What MathJax would pick up: $...$, $$...$$, \(...\), \[...\], \begin{...}.
_CANDIDATE = re.compile(r"\$|\\\(|\\\[|\\begin\{")


def pages_with_math(site_dir: Path) -> list[Path]:
    """Built pages whose article may hold math and that are not typeset yet."""
    found = []
    for page in sorted(site_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        article = text[text.find("<article") : text.rfind("</article>")]
        if article and MARK not in text and _CANDIDATE.search(article):
            found.append(page)
    return found


def typeset(pages: list[Path], root: Path, drawn: int | None = None) -> list[dict]:
    """Typeset ``pages`` in place; return the script's report for each.

    ``drawn``: how many formulas of a page are drawn in its HTML (the script's
    default, 40, when None); the rest are drawn by the browser when needed."""
    if not pages:
        return []
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is needed to typeset the site's math: install Node.js")
    if not (root / "node_modules" / PACKAGE).exists():
        raise FileNotFoundError(
            f"{root / 'node_modules' / PACKAGE} is missing: run `npm ci` (or `make setup`)"
        )
    option = [] if drawn is None else [f"--drawn={drawn}"]
    proc = subprocess.run(
        [node, str(SCRIPT), *option, *map(str, pages)], cwd=root, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"typesetting the math failed:\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def on_post_build(config, **kwargs):
    site_dir = Path(config.site_dir)
    reports = typeset(pages_with_math(site_dir), Path(config.config_file_path).parent)
    for report in reports:
        page = Path(report["page"]).relative_to(site_dir)
        for formula in report["errors"]:
            log.warning(f"{page}: TeX error in ${formula}$")
    n = sum(r["formulas"] for r in reports)
    log.info(f"typeset {n} formulas on {len(reports)} pages")
