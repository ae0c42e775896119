"""Fixtures of the site tests: one strict build per test session, a local
HTTP server and a headless Chromium for the browser tests."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.site import background

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/lib/chromium/chromium")  # the real binary; /usr/bin/chromium is a wrapper
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Every wait in the browser tests is for an event or a condition, never a
# fixed time, and none may fail only because the machine is busy: another
# test worker, or anything else, can hold both cores for a long while. Two
# minutes is what a wait may take before it counts as a hang.
WAIT_MS = 120_000


def _chromium() -> str:
    for candidate in (CHROMIUM, shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    pytest.fail(
        "Chromium is needed for the browser tests and was not found at "
        f"{CHROMIUM}. Install it with: sudo apt-get install chromium fonts-noto-cjk",
        pytrace=False,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BuiltSite:
    def __init__(self, path: Path, base_url: str, seconds: float, log: str):
        self.path, self.base_url, self.seconds, self.log = path, base_url, seconds, log

    def page(self, url: str) -> str:
        """HTML of the page at site-relative ``url`` (``"ja/sinusoidal/"``)."""
        return (self.path / url / "index.html").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> BuiltSite:
    """``mkdocs build --strict`` into a temporary folder.

    ``site_url`` points at the port the browser tests will serve on, because
    Material's language switcher reads ``<site_url>/sitemap.xml``.
    ``SITE_PREBUILT=/path/to/site`` reuses a site built earlier (with
    ``SITE_URL=http://127.0.0.1:PORT/``) instead of building.
    """
    if background.job():  # built by the run's controller, in the background
        status, log, seconds = background.wait("build")
        assert status == 0, f"mkdocs build --strict failed:\n{log}"
        found = background.job()
        return BuiltSite(Path(found["dir"]) / "site", found["url"], seconds, log)
    prebuilt = os.environ.get("SITE_PREBUILT")
    if prebuilt:  # a site built before, to rerun the checks on it quickly
        path = Path(prebuilt)
        base_url = re.search(r"<loc>(http://[^<]*?/)</loc>", (path / "sitemap.xml").read_text())[1]
        return BuiltSite(path, base_url, 0.0, "")
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/"
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "SITE_URL": base_url, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return BuiltSite(out, base_url, seconds, proc.stdout + proc.stderr)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="session")
def served_site(built_site):
    """Serve the built site on the loopback address it was built for (the
    controller serves a background build)."""
    if background.job():
        yield built_site
        return
    port = int(built_site.base_url.rstrip("/").rsplit(":", 1)[1])
    handler = functools.partial(_QuietHandler, directory=str(built_site.path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield built_site
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(served_site):
    from playwright.sync_api import sync_playwright  # a test dependency: never skip silently

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=_chromium(), args=LAUNCH_ARGS)
        new_context = browser.new_context

        def patient_context(**options):
            context = new_context(**options)
            context.set_default_timeout(WAIT_MS)
            context.set_default_navigation_timeout(WAIT_MS)
            return context

        browser.new_context = patient_context  # every context waits as long as WAIT_MS
        yield browser
        browser.close()
