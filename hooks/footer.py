"""MkDocs hook: the site footer names the posenc version it documents.

The version has one home, ``posenc.__version__``; the footer and
CHANGELOG.md (checked by tests/site/test_build.py) follow it.
"""

from __future__ import annotations

import posenc


def on_config(config, **kwargs):
    config.copyright = (
        f'posenc {posenc.__version__} · <a href="{config.repo_url}/blob/main/CHANGELOG.md">'
        "changelog</a> · code MIT"
    )
    return config
