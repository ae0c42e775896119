"""MkDocs hook: one search index per language, fetched on demand.

Material's search fetches ``search/search_index.json`` (every page of both
languages, ~1.6 MB) on every page load. After the build (and after
mkdocs-static-i18n has merged both languages' entries), this hook writes
``search_index.en.json`` and ``search_index.ja.json``, each with one
language's pages; docs/javascripts/search-lazy.js, loaded before Material's
bundle, sends the index request of a page to its language's file, and only
once the reader opens or focuses the search box.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.plugins import event_priority

#: language -> (URL prefix of its pages, lunr languages of its index)
INDEXES = {"en": ("", ["en"]), "ja": ("ja/", ["en", "ja"])}


def split_index(index: dict) -> dict[str, dict]:
    """The entries of each language, each with its own lunr languages."""
    out = {}
    others = [prefix for prefix, _ in INDEXES.values() if prefix]
    for lang, (prefix, lunr) in INDEXES.items():
        if prefix:
            docs = [d for d in index["docs"] if d["location"].startswith(prefix)]
        else:
            docs = [d for d in index["docs"] if not d["location"].startswith(tuple(others))]
        out[lang] = {**index, "config": {**index["config"], "lang": lunr}, "docs": docs}
    return out


@event_priority(-200)  # after mkdocs-static-i18n (-100) has written the merged index
def on_post_build(config, **kwargs):
    folder = Path(config.site_dir) / "search"
    merged = folder / "search_index.json"
    if not merged.exists():
        return
    index = json.loads(merged.read_text(encoding="utf-8"))
    for lang, part in split_index(index).items():
        (folder / f"search_index.{lang}.json").write_text(
            json.dumps(part, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
