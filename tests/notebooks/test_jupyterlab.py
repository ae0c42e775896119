"""`make lab` for real: JupyterLab on 127.0.0.1, driven in headless Chromium.

The server is started the way `make lab-ja` starts it (tools/lab.py), on a
copy of one chapter's pair in a temporary folder, so nothing in notebooks/
changes. The test runs the chapter's first code cells through JupyterLab's
interface, checks their outputs, saves, and checks that the paired .py is
unchanged, then that an edit made in JupyterLab lands in both files. It
opens the generated Japanese copy too (its code is the chapter's, run by
test_clean_run.py). Screenshots go to tests/screenshots/.
The preflight's messages (a missing kernel, a stale .ipynb) are tested
without a server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.site.conftest import LAUNCH_ARGS, WAIT_MS, _chromium, _free_port
from tools import lab

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "tests" / "screenshots"
CHAPTER = "00-why-positions"
EDIT = "# edited in JupyterLab"


def _copy_chapter(root: Path, name: str = CHAPTER) -> Path:
    """A repository with one chapter: notebooks/NAME.{py,ipynb} and jupytext.toml."""
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(ROOT / "jupytext.toml", root / "jupytext.toml")
    for suffix in (".py", ".ipynb"):
        shutil.copy2(ROOT / "notebooks" / f"{name}{suffix}", root / "notebooks" / f"{name}{suffix}")
    return root / "notebooks" / f"{name}.py"


def _wait_for_server(url: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}", pytrace=False)
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)  # polling for the server, not timing it
    pytest.fail(f"JupyterLab did not answer {url}", pytrace=False)


def _stop(server: subprocess.Popen, base: str, token: str) -> None:
    try:  # JupyterLab's own shutdown also stops the kernels it started
        request = urllib.request.Request(f"{base}api/shutdown?token={token}", method="POST")
        urllib.request.urlopen(request, timeout=10).close()
        server.wait(timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        server.kill()
        server.wait(timeout=60)


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab started by tools/lab.py --lang ja on a one-chapter copy."""
    py = _copy_chapter(tmp_path / "repo")
    port, token = _free_port(), "posenc-test-token"
    env = {
        **os.environ,
        # nothing from the user's own Jupyter set-up, no state left behind
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    env.pop("PYTHONPATH", None)
    # every cell in the page, not only those near the screen, so that the
    # test can count and read them
    tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    news = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)  # and no question about news over the screenshots
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "tools.lab", "--root", str(py.parents[1]), "--lang", "ja"),
            *("--no-browser", f"--port={port}", f"--IdentityProvider.token={token}"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_server(f"{base}api/status?token={token}", server)
        yield base, token, py
    finally:
        _stop(server, base, token)
        log.close()


@pytest.fixture
def chromium():
    from playwright.sync_api import sync_playwright  # a test dependency: never skip silently

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=_chromium(), args=LAUNCH_ARGS)
        yield browser
        browser.close()


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    return context, page


def _code_cells(page):
    return page.locator(".jp-Notebook .jp-CodeCell")


def _run_first_code_cells(page, count: int) -> None:
    """Select the first cell and press Shift+Enter until ``count`` code cells ran."""
    cells = page.locator(".jp-Notebook .jp-Cell")
    kinds = cells.evaluate_all("cs => cs.map(c => c.classList.contains('jp-CodeCell'))")
    presses = [k for k, code in enumerate(kinds) if code][count - 1] + 1
    cells.first.locator(".jp-InputPrompt").click()  # command mode on the first cell
    for _ in range(presses):
        page.keyboard.press("Shift+Enter")
    last = _code_cells(page).nth(count - 1).locator(".jp-InputPrompt")
    page.wait_for_function(
        "el => el.textContent.trim() === `[${n}]:`".replace("${n}", str(count)),
        arg=last.element_handle(),
        timeout=WAIT_MS,
    )


def _clear_outputs(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Edit").click()
    page.locator(".lm-Menu-itemLabel", has_text="Clear Outputs of All Cells").click()
    page.locator(".jp-Notebook .jp-OutputArea-output").first.wait_for(state="detached")


def _save(page, ipynb: Path) -> None:
    before = ipynb.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + WAIT_MS / 1000
    while ipynb.stat().st_mtime_ns == before:  # the save is the event
        if time.monotonic() > deadline:
            pytest.fail(f"JupyterLab did not save {ipynb.name}", pytrace=False)
        time.sleep(0.2)
    page.locator(".lm-TabBar-tab.jp-mod-dirty").first.wait_for(state="detached")


def test_a_chapter_runs_and_saves_as_a_pair_in_jupyterlab(jupyterlab, chromium):
    base, token, py = jupyterlab
    ipynb = py.with_suffix(".ipynb")
    original_py = py.read_bytes()
    SHOTS.mkdir(parents=True, exist_ok=True)

    context, page = _open(chromium, f"{base}lab/tree/notebooks/{py.stem}.ipynb?token={token}&reset")
    try:
        # one notebook: the .py's bilingual cells, with the .ipynb's outputs
        page.get_by_role("heading", name="Why attention needs positions").wait_for()
        assert page.get_by_role("heading", name="アテンションに位置が必要な理由").count() == 1
        _clear_outputs(page)
        _run_first_code_cells(page, 4)
        code = _code_cells(page)
        code.nth(2).locator(".jp-OutputArea-output img").wait_for()  # the figure
        # the folded check: Attn(PX) = P Attn(X) over all 720 orders; a failed
        # assert would leave its traceback as the cell's output
        assert "itertools.permutations" in code.nth(3).locator(".jp-InputArea").inner_text()
        assert code.nth(3).locator(".jp-OutputArea-output").count() == 0
        assert code.nth(4).locator(".jp-InputPrompt").inner_text().strip() == "[ ]:", "ran too far"
        page.screenshot(path=str(SHOTS / "jupyterlab-paired.png"))
        assert py.read_bytes() == original_py, "running cells changed the .py"

        _save(page, ipynb)
        assert py.read_bytes() == original_py, "saving new outputs changed the .py"
        saved = [c for c in json.loads(ipynb.read_text(encoding="utf-8"))["cells"]]
        saved_code = [c for c in saved if c["cell_type"] == "code"]
        assert [c["execution_count"] for c in saved_code[:5]] == [1, 2, 3, 4, None]
        assert [c.get("metadata", {}).get("lang") for c in saved[:2]] == ["en", "ja"]

        # an edit made in JupyterLab lands in both files, and nothing else changes
        code.nth(0).locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n" + EDIT)
        page.keyboard.press("Escape")
        _save(page, ipynb)
        edited = py.read_text(encoding="utf-8")
        assert edited.count(EDIT) == 1
        assert edited.replace("\n" + EDIT, "", 1).encode() == original_py
        saved_code = [c for c in json.loads(ipynb.read_text())["cells"] if c["cell_type"] == "code"]
        assert "".join(saved_code[0]["source"]).endswith(EDIT)
    finally:
        context.close()

    copy = py.parents[1] / "notebooks-ja" / f"{py.stem}.ipynb"
    context, page = _open(chromium, f"{base}lab/tree/notebooks-ja/{copy.name}?token={token}&reset")
    try:
        page.get_by_role("heading", name="アテンションに位置が必要な理由").wait_for()
        first = page.locator(".jp-Notebook .jp-Cell").first.inner_text()
        assert "自動生成されたコピーです" in first and f"notebooks/{py.stem}.py" in first
        assert page.get_by_role("heading", name="Why attention needs positions").count() == 0
        # the code and its outputs are the chapter's (test_clean_run runs that code)
        assert "itertools.permutations" in _code_cells(page).nth(3).inner_text()
        page.screenshot(path=str(SHOTS / "jupyterlab-ja.png"))
    finally:
        context.close()
    assert not (copy.parent / f"{py.stem}.py").exists(), "a generated copy is not paired"

    # the .py opens as the same notebook (what Open With, Notebook asks the server)
    url = f"{base}api/contents/notebooks/{py.name}?type=notebook&content=1&token={token}"
    with urllib.request.urlopen(url, timeout=WAIT_MS / 1000) as response:
        model = json.load(response)
    cells = model["content"]["cells"]
    assert model["type"] == "notebook"
    assert len(cells) == len(json.loads(ipynb.read_text(encoding="utf-8"))["cells"])
    assert cells[0]["metadata"]["lang"] == "en" and any(c.get("outputs") for c in cells)


# --------------------------------------------------------------------------
# What tools/lab.py says before it starts a server


def _run_lab(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.lab", "--root", str(root), "--no-browser"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_MS / 1000,
    )


def test_a_chapter_naming_a_missing_kernel_is_refused_in_plain_words(tmp_path):
    py = _copy_chapter(tmp_path)
    assert lab.kernel_problems([py], {"python3"}) == []
    # no kernel at all: ipykernel is missing from the environment
    assert lab.kernel_problems([py], set()) == [
        f"{py.name} names the kernel 'python3', which this environment does not have "
        "(it has: none). Run `make setup`, which installs ipykernel and its kernel python3."
    ]
    # a chapter written elsewhere names that machine's kernel
    py.write_text(py.read_text().replace("name: python3", "name: my-conda-env"))
    assert lab.kernel_problems([py], {"python3"}) == [
        f"{py.name} names the kernel 'my-conda-env', which this environment does not have "
        "(it has: python3). Set `name: python3` under `kernelspec:` in the header of the .py."
    ]
    result = _run_lab(tmp_path)
    assert result.returncode == 1
    assert "names the kernel 'my-conda-env'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_stale_ipynb_is_named_with_the_command_that_fixes_it(tmp_path):
    py = _copy_chapter(tmp_path)
    ipynb = py.with_suffix(".ipynb")
    text = py.read_text(encoding="utf-8")
    # the .py moved on (a pull, an edit): JupyterLab opens it; a warning says so
    py.write_text(text.replace("T, d = 6, 8", "T, d = 5, 8", 1), encoding="utf-8")
    os.utime(ipynb, (py.stat().st_mtime - 60,) * 2)
    errors, warnings = lab.pair_problems([py])
    assert errors == []
    assert warnings == [
        f"{ipynb.name} is older than {py.name} and their cells differ: it opens with the "
        f".py's cells, the changed ones without outputs; `make notebooks NB=notebooks/{py.name}` "
        "re-executes it."
    ]
    # the .ipynb was edited on its own, after the .py: JupyterLab would refuse it
    os.utime(ipynb, (py.stat().st_mtime + 60,) * 2)
    errors, _ = lab.pair_problems([py])
    assert len(errors) == 1 and errors[0].startswith(
        f"{ipynb.name} was changed after {py.name} and their cells differ"
    )
    result = _run_lab(tmp_path)
    assert result.returncode == 1
    assert f"make notebooks NB=notebooks/{py.name}" in result.stderr
    assert "Traceback" not in result.stderr
    # the same cells in both: no message, whichever is newer
    py.write_text(text, encoding="utf-8")
    os.utime(ipynb, (py.stat().st_mtime + 60,) * 2)
    assert lab.pair_problems([py]) == ([], [])
