"""How ``make test`` spreads the suite over two workers (``pytest -n 2``).

nbval runs a notebook's cells one after another in one kernel, so a notebook
must stay on one worker; the site tests share one strict build and one local
server, so they stay together too. Every other test is scheduled on its own.
This is pytest-xdist's documented scheduler hook; pytest-xdist's own
``--dist loadgroup`` does not work with pytest 9.2.
"""

from __future__ import annotations

import pytest


def work_unit(nodeid: str) -> str:
    """The tests that must share a worker share a work unit."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    if path.startswith("tests/site/"):
        return "tests/site"
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return Scheduling(config, log)
