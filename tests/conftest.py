"""How ``make test`` spreads the suite over two workers (``pytest -n 2``).

nbval runs a notebook's cells one after another in one kernel, so a notebook
must stay on one worker; a site test module (one browser) stays on one worker
too. The site tests of both workers share one strict build, which the
controller starts as the run begins and serves (tests/site/background.py).
Every other test is scheduled on its own.
This is pytest-xdist's documented scheduler hook; pytest-xdist's own
``--dist loadgroup`` does not work with pytest 9.2.

Each worker, and every kernel or process it starts, uses its share of the
cores: torch's default of one thread per core, in two workers on two cores,
ran small training loops up to ten times slower (chapter 16's two decoders:
22 s alone, 276 s in the suite) as the threads of both workers waited on
each other.
"""

from __future__ import annotations

import os
import re

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:  # before torch starts its thread pool; children inherit it
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

import pytest  # noqa: E402
import torch  # noqa: E402

if _WORKERS > 1:
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def work_unit(nodeid: str) -> str:
    """The tests that must share a worker share a work unit."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    if path.startswith("tests/site/"):  # one module, one browser: a unit per module
        return path
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return Scheduling(config, log)


def torch_version(text: str = torch.__version__) -> tuple[int, int, int]:
    major, minor, patch = re.match(r"(\d+)\.(\d+)\.(\d+)", text).groups()
    return int(major), int(minor), int(patch)


def pytest_configure(config):
    from tests.site import background  # the site's build, started once for the workers

    if background.wanted(config):
        background.start(config)
    config.addinivalue_line(
        "markers",
        "needs_torch(version, why): skip on a torch older than version (x.y.z), saying why. "
        "Only for what older torch cannot do: `make test-oldest-torch` runs the rest there.",
    )


def run_order(nodeid: str, first_notebooks: set[str]) -> int:
    """The library and lab tests, then the first half of the notebooks, while the
    background build runs (tests/site/background.py); then the site tests; then the
    other notebooks, small units that even out the two workers' ends."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/site/"):
        return 2
    if path.endswith(".ipynb"):
        return 1 if path in first_notebooks else 3
    return 0


def pytest_collection_modifyitems(config, items):
    notebooks = sorted({i.nodeid.split("::", 1)[0] for i in items if ".ipynb" in i.nodeid})
    first = set(notebooks[: len(notebooks) // 2])
    items.sort(key=lambda item: run_order(item.nodeid, first))  # stable within a group
    have = torch_version()
    for item in items:
        marker = item.get_closest_marker("needs_torch")
        if marker and have < torch_version(marker.args[0]):
            version, why = marker.args
            item.add_marker(
                pytest.mark.skip(
                    reason=f"needs torch >= {version}: {why} (this is {torch.__version__})"
                )
            )


def pytest_unconfigure(config):
    from tests.site import background

    background.stop(config)
