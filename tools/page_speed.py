"""Time how long heavy chapter pages take to render: ``make bench-pages``.

A reader who has visited the site (the first chapter in each language, so
the browser holds the site's CSS, scripts and fonts) goes on to five heavy
chapters, each fetched from the server; the time is the load event (parsed,
every formula on the screen drawn, the theme's scripts run), in ms from
navigation start. Each round runs in a fresh browser profile; each chapter's
fastest round counts, since the machine may be doing something else. The
numbers depend on the machine and on what else runs: compare runs made one
after the other on the same machine, never against a fixed limit.

Usage: ``python tools/page_speed.py [--site DIR] [--rounds N] [--json PATH]``;
without ``--site`` it builds the site first (``mkdocs build --strict``).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/lib/chromium/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
FIRST = ("sinusoidal/", "ja/sinusoidal/")
LATER = ("rope/", "alibi/", "ja/rope/", "sinusoids-in-the-wild/", "t5-buckets/")
TIMING = """() => { const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  return {load: Math.round(nav.loadEventEnd), firstPaint: Math.round(fcp.startTime),
          fetched: nav.transferSize > 0}; }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(port: int) -> Path:
    out = Path(tempfile.mkdtemp(prefix="posenc-site-"))
    env = {**os.environ, "SITE_URL": f"http://127.0.0.1:{port}/", "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return out


def measure(base: str, rounds: int) -> dict:
    from playwright.sync_api import sync_playwright

    loads: dict[str, list[dict]] = {url: [] for url in LATER}
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        for _ in range(rounds):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            for url in FIRST:
                page.goto(base + url, wait_until="networkidle")
            for url in LATER:
                page.goto(base + url, wait_until="load")
                loads[url].append(page.evaluate(TIMING))
            context.close()
        browser.close()
    if not all(t["fetched"] for v in loads.values() for t in v):
        raise RuntimeError("a timed page came from the browser's cache")
    fastest = {url: min(t["load"] for t in v) for url, v in loads.items()}
    ordered = sorted(fastest.values())
    return {
        "median of the fastest (ms)": ordered[len(ordered) // 2],
        "fastest (ms)": fastest,
        "every round (ms)": {url: [t["load"] for t in v] for url, v in loads.items()},
        "load average before": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, help="a site built with SITE_URL at --port")
    parser.add_argument("--port", type=int, default=0, help="the port the site was built for")
    parser.add_argument("--rounds", type=int, default=5, help="fresh profiles (default 5)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.site and not args.port:
        parser.error("--site needs --port: the port the site was built for (its SITE_URL)")
    port = args.port or _free_port()
    site = args.site or build(port)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = measure(f"http://127.0.0.1:{port}/", args.rounds)
    finally:
        server.shutdown()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
