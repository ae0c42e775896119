"""MkDocs hook: a file of this repository named in a chapter's prose links to
it in the repository.

The chapters name the lab's method and records as inline code
(`lab/README.md`, `tests/test_rope_triton.py`, `extrapolation-tasks.json`);
a reader should be one click from them. Inline code becomes a link when it is
a path from the repository root that exists here, or the bare name of a
stored record (lab/posenc_lab/records/). Names of other projects' files
(`modeling_llama.py`, `src/model.py`) stay text: they are not paths here.
Links, headings, code blocks and outputs are left alone, as in
hooks/api_links.py.
"""

from __future__ import annotations

import re
from pathlib import Path

try:  # imported as the package hooks (tests, tools)
    from hooks.api_links import KEPT_REGIONS
except ModuleNotFoundError:  # loaded by MkDocs from its path, with this folder on sys.path
    from api_links import KEPT_REGIONS

_REGION = re.compile(KEPT_REGIONS + r"|<code>(?P<path>[\w./-]+\.\w+)</code>", re.DOTALL)
RECORDS = Path("lab/posenc_lab/records")


def repository_target(name: str, root: Path) -> str | None:
    """The repository path that inline code ``name`` names, or None."""
    if "/" in name:
        path = Path(name)
        if ".." not in path.parts and (root / path).is_file():
            return path.as_posix()
        return None
    record = RECORDS / name
    return record.as_posix() if (root / record).is_file() else None


def link_repository_files(html: str, repo_url: str, root: Path) -> str:
    """``html`` with each inline-code repository file outside links, headings
    and code blocks linked to its page under ``repo_url``."""

    def link(m: re.Match) -> str:
        target = m["path"] and repository_target(m["path"], root)
        if target is None:
            return m[0]
        return f'<a class="repo-link" href="{repo_url}/blob/main/{target}">{m[0]}</a>'

    return _REGION.sub(link, html)


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb") or not config.get("repo_url"):
        return content
    root = Path(config.config_file_path).parent
    return link_repository_files(content, config["repo_url"].rstrip("/"), root)
