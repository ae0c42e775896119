"""MkDocs hook: the English build's 404.html stays at the site's root.

A static host serves the root's 404.html for every missing address, in
either language. mkdocs-static-i18n builds the Japanese site after the
English one into the same folder, and the Japanese build's 404.html took
the root's place: a missing English page answered in a Japanese page. The
template (docs/overrides/404.html) says it in both languages; this hook
puts the English build's page back after the Japanese build.
"""

from __future__ import annotations

from pathlib import Path

_english: dict[str, bytes] = {}


def on_post_build(config, **kwargs):
    page = Path(config.site_dir) / "404.html"
    if not page.is_file():
        return
    if config.theme["language"] == "en":
        _english[config.site_dir] = page.read_bytes()
    elif config.site_dir in _english:
        page.write_bytes(_english[config.site_dir])
