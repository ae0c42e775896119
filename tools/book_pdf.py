"""Print the whole book to PDF, one file per language: ``make pdf``.

Serves a built site, opens its book pages (``print/`` and ``ja/print/``,
written by hooks/book.py) in headless Chromium (Debian's binary, driven by
Playwright's Python package) and prints each to PDF with the page's own
print stylesheet (docs/stylesheets/print.css): A4, numbered pages, the
headings as the PDF's outline. Before printing, every figure is loaded,
the fonts are ready, and every formula and code block the page ships
undrawn is drawn (the page's own ``beforeprint`` handler).

Usage: ``python tools/book_pdf.py [--site DIR] [--out DIR] [--lang en ja]``;
without ``--site`` it builds the site first (``mkdocs build --strict``).
Writes ``posenc-en.pdf`` and ``posenc-ja.pdf`` into ``--out`` (the current
folder by default), then reads each back with poppler (pdfinfo, pdftotext,
pdftoppm) and checks it (:func:`check`): it exits non-zero and says why if
a chapter's title is missing or out of order, a page ends with a heading,
or a page that does not end a chapter is mostly blank.
"""

from __future__ import annotations

import argparse
import functools
import html
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/lib/chromium/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
BOOKS = {"en": "print/", "ja": "ja/print/"}
NAME = "posenc-{lang}.pdf"
WAIT_MS = 300_000  # a busy machine may take minutes to lay out a whole book

# Everything the book shows is in place: figures loaded, fonts ready, and
# (through the page's own "beforeprint" handler) every formula and code
# block the page ships undrawn drawn.
_READY = """async () => {
  for (const img of document.images) img.loading = 'eager';
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  await document.fonts.ready;
  dispatchEvent(new Event('beforeprint'));
  return {images: document.images.length,
          broken: [...document.images].filter(i => !i.naturalWidth).map(i => i.src),
          undrawn: document.querySelectorAll('mjx-container[data-svg], pre[data-html]').length};
}"""


def build() -> Path:
    out = Path(tempfile.mkdtemp(prefix="posenc-site-"))
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_books(site: Path, out: Path, langs=("en", "ja")) -> dict[str, Path]:
    """Print the book of each language in ``langs`` from the built ``site``
    into ``out``; return the PDFs' paths."""
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
            try:
                return print_with(browser, base, out, langs)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def print_with(browser, base: str, out: Path, langs=("en", "ja")) -> dict[str, Path]:
    """Print the books of ``langs`` of the site served at ``base`` with a
    running Playwright ``browser`` (the site tests pass theirs)."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for lang in langs:
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        page.emulate_media(media="print")
        page.goto(base + BOOKS[lang], wait_until="load", timeout=WAIT_MS)
        ready = page.evaluate(_READY)
        if ready["broken"] or ready["undrawn"]:
            raise RuntimeError(f"{BOOKS[lang]}: not ready to print: {ready}")
        path = out / NAME.format(lang=lang)
        page.pdf(path=str(path), prefer_css_page_size=True, print_background=True, outline=True)
        page.close()
        written[lang] = path
    return written


def page_count(pdf: Path) -> int:
    """Pages of ``pdf`` (poppler's pdfinfo)."""
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


# ---------------------------------------------------------------------------
# Reading a PDF back

_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.DOTALL)
_LINE = re.compile(
    r'<line xMin="[\d.]+" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">(.*?)</line>', re.DOTALL
)
_WORD = re.compile(r"<word [^>]*>(.*?)</word>")
FOOT = 0.955  # below this share of the height: the foot margin, with the page number


def _words(text: str) -> str:
    """Text to compare: without spaces (Japanese has none), and NFKC (a PDF's
    text may give a kanji as its radical, ⽂ for 文)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def page_lines(pdf: Path) -> list[list[tuple[float, str]]]:
    """The visual lines of each page of ``pdf``, top to bottom: (bottom edge
    as a share of the page's height, text without spaces), the page number
    left out. Text that sits on one line is one line, whatever the order
    poppler reads it in (a kanji of a heading may come apart from the rest),
    so a line's characters are kept sorted: compare them as a multiset."""
    xml = subprocess.run(
        ["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    pages = []
    for page in _PAGE.finditer(xml):
        height = float(page[2])
        rows: list[list] = []  # [top, bottom, text], one per visual line
        for line in _LINE.finditer(page[3]):
            top, bottom = float(line[1]) / height, float(line[2]) / height
            text = _words("".join(html.unescape(w) for w in _WORD.findall(line[3])))
            if bottom >= FOOT or not text:
                continue
            # the same line: the two overlap by half the smaller one's height
            same = next(
                (
                    r
                    for r in rows
                    if min(r[1], bottom) - max(r[0], top) > 0.5 * min(r[1] - r[0], bottom - top)
                ),
                None,
            )
            if same is None:
                rows.append([top, bottom, text])
            else:
                same[0], same[1], same[2] = min(same[0], top), max(same[1], bottom), same[2] + text
        pages.append([(b, "".join(sorted(t))) for _, b, t in sorted(rows, key=lambda r: r[1])])
    return pages


def ink_bottoms(pdf: Path, dpi: int = 12) -> list[float]:
    """Where the lowest ink of each page is (text, formulas or figures), as
    a share of the page's height, the page number left out."""
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["pdftoppm", "-gray", "-r", str(dpi), str(pdf), f"{tmp}/p"],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        bottoms = []
        for png in sorted(Path(tmp).glob("p-*.pgm"), key=lambda f: int(f.stem.split("-")[1])):
            image = Image.open(png)
            width, height = image.size
            pixels = image.load()
            rows = [
                y
                for y in range(int(height * FOOT))
                if any(pixels[x, y] < 200 for x in range(width))
            ]
            bottoms.append((rows[-1] + 1) / height if rows else 0.0)
    return bottoms


def line_key(text: str) -> str:
    """A line's text as :func:`page_lines` keeps it: its characters, sorted."""
    return "".join(sorted(_words(text)))


def opens_with(page: list[tuple[float, str]], key: str, most: int = 3) -> bool:
    """Whether the first lines of ``page`` (rows of :func:`page_lines`) read
    ``key`` (a title's :func:`line_key`): one line, or up to ``most`` where a
    long title wraps."""
    text = ""
    for _, line in page[:most]:
        text = "".join(sorted(text + line))
        if text == key:
            return True
    return False


def check(pdf: Path, titles: list[str], headings: list[str]) -> list[str]:
    """What is wrong with the printed book ``pdf``, whose pages are titled
    ``titles`` in order and whose section headings are ``headings``: a title
    missing or out of order (each starts a page), a page that ends with a
    heading, a page mostly blank that does not end a chapter. Empty when
    nothing is."""
    lines = page_lines(pdf)
    problems = []
    starts, at = [], 0
    for title in titles:
        found = next(
            (k for k in range(at, len(lines)) if opens_with(lines[k], line_key(title))), None
        )
        if found is None:
            problems.append(f"the title {title!r} does not start a page (after page {at + 1})")
            continue
        starts.append(found)
        at = found + 1
    heads = {line_key(h): h for h in headings}
    for k, page in enumerate(lines):
        if page and page[-1][1] in heads and k + 1 < len(lines):
            problems.append(f"page {k + 1} ends with the heading {heads[page[-1][1]]!r}")
    ends = {s - 1 for s in starts} | {len(lines) - 1}
    for k, bottom in enumerate(ink_bottoms(pdf)):
        if k not in ends and bottom < 0.5:
            problems.append(
                f"page {k + 1} is mostly blank (its ink ends at {bottom:.0%} of the page)"
            )
    return problems


def book_outline(site: Path, lang: str) -> tuple[list[str], list[str]]:
    """The page titles (h1) and section headings (h2 to h4) of a built book page."""
    text = (site / BOOKS[lang] / "index.html").read_text(encoding="utf-8")
    plain = lambda h: html.unescape(re.sub(r"<[^>]+>", "", h)).strip()  # noqa: E731
    articles = re.findall(r'<article class="[^"]*book-page".*?</article>', text, re.DOTALL)
    titles = [plain(re.search(r"<h1[^>]*>(.*?)</h1>", a, re.DOTALL)[1]) for a in articles]
    headings = [plain(h) for h in re.findall(r"<h[2-4][^>]*>(.*?)</h[2-4]>", text, re.DOTALL)]
    return titles, headings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, help="a built site (default: build one)")
    parser.add_argument("--out", type=Path, default=Path.cwd(), help="where the PDFs go")
    parser.add_argument("--lang", nargs="+", default=list(BOOKS), choices=list(BOOKS))
    args = parser.parse_args()
    site = args.site or build()
    start = time.perf_counter()
    books = print_books(site, args.out, args.lang)
    print(f"printed in {time.perf_counter() - start:.0f} s")
    failed = False
    for lang, path in books.items():
        titles, headings = book_outline(site, lang)
        problems = check(path, titles, headings)
        print(f"{path}: {page_count(path)} pages, {len(titles)} chapters and pages of the site")
        for problem in problems:
            print(f"  {problem}")
        failed |= bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
