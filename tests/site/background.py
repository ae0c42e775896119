"""The site's build and the whole printed book, made once per test run in the background.

Under pytest-xdist (``make test``) the controller, the process that hands tests
to the workers, starts one job as the run begins: ``mkdocs build --strict``,
then, on that build, ``tools/book_pdf.py`` (both books printed and checked). It
serves the build on the loopback port the build was made for. The site tests
wait for the build (``built_site`` in tests/site/conftest.py) and the print test
for the book, while the workers run notebooks and library tests meanwhile: the
build and the print no longer hold a worker for minutes, and the site tests can
spread over both workers. A run in one process (``WORKERS=0``), or one that
selects tests with ``-k`` or ``-m`` or names no site test, builds in the fixture
as before, and only if a site test asks for it.

Run as ``python tests/site/background.py DIR URL``, it is the job itself: it
writes ``build.log`` and ``build.rc``, then ``book.log`` and ``book.rc``, into
``DIR`` (the site goes to ``DIR/site``).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Where the job is, for the workers: {"dir": ..., "url": ...} in JSON.
ENV = "POSENC_SITE_JOB"
#: How long a worker waits for a step before it fails the test (a loaded machine is slow).
WAIT_S = 45 * 60


def wanted(config) -> bool:
    """Whether this process should start the job: an xdist controller whose run
    includes the site tests, unfiltered, with no prebuilt site."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return False
    if (
        os.environ.get("SITE_PREBUILT")
        or config.getoption("keyword")
        or config.getoption("markexpr")
    ):
        return False
    args = [a.split("::")[0].rstrip("/") for a in config.args] or ["tests"]
    return any(a in ("tests", ".", str(ROOT)) or "tests/site" in a for a in args)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


def start(config) -> None:
    """Start the job into a new temporary folder, serve its site, and tell the workers
    (``ENV``)."""
    tmp = Path(tempfile.mkdtemp(prefix="posenc-site-job-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    site = tmp / "site"
    site.mkdir(parents=True)
    job = subprocess.Popen(
        [sys.executable, str(Path(__file__)), str(tmp), url],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config._posenc_site_job = (job, server, tmp)
    os.environ[ENV] = json.dumps({"dir": str(tmp), "url": url})  # the workers inherit it


def stop(config) -> None:
    job, server, tmp = getattr(config, "_posenc_site_job", (None, None, None))
    if job is None:
        return
    if job.poll() is None:  # a run that ended early, or was interrupted
        job.terminate()
        job.wait(timeout=60)
    server.shutdown()
    server.server_close()
    shutil.rmtree(tmp, ignore_errors=True)


def job() -> dict | None:
    """The job this worker was told about, or ``None``."""
    found = os.environ.get(ENV)
    return json.loads(found) if found else None


def wait(step: str) -> tuple[int, str, float]:
    """Wait for ``step`` (``"build"`` or ``"book"``) of the job: its exit status, its
    output, and how long it ran."""
    folder = Path(job()["dir"])
    rc = folder / f"{step}.rc"
    deadline = time.monotonic() + WAIT_S
    while not rc.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the background {step} did not finish in {WAIT_S} s")
        time.sleep(0.5)
    status, seconds = rc.read_text().split()
    return int(status), (folder / f"{step}.log").read_text(encoding="utf-8"), float(seconds)


def _step(folder: Path, name: str, cmd: list[str], env: dict) -> int:
    """Run one step, writing its output, then its status and time (the rc file last)."""
    start = time.perf_counter()
    with open(folder / f"{name}.log", "w", encoding="utf-8") as log:
        status = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    tmp = folder / f"{name}.rc.tmp"
    tmp.write_text(f"{status.returncode} {seconds:.1f}\n")
    tmp.replace(folder / f"{name}.rc")  # atomic: a reader never sees half a file
    return status.returncode


def _run(folder: Path, url: str) -> int:
    env = {**os.environ, "SITE_URL": url, "NO_MKDOCS_2_WARNING": "1"}
    site = folder / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    if _step(folder, "build", build, env) != 0:
        _step(folder, "book", [sys.executable, "-c", "raise SystemExit('the build failed')"], env)
        return 1
    book = [sys.executable, "tools/book_pdf.py", "--site", str(site), "--out", str(folder)]
    return _step(folder, "book", book, env)


if __name__ == "__main__":
    sys.exit(_run(Path(sys.argv[1]), sys.argv[2]))
