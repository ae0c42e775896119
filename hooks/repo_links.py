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

_REGION = re.compile(
    r"<a\b.*?</a>|<h([1-6])\b.*?</h\1>|<pre\b.*?</pre>|<code>(?P<path>[\w./-]+\.\w+)</code>",
    re.DOTALL,
)
RECORDS = Path("lab/posenc_lab/records")

_targets: dict[str, str] = {}  # name as written -> path from the repository root


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
        name = m["path"]
        if name is None:
            return m[0]
        if name not in _targets:
            _targets[name] = repository_target(name, root)
        target = _targets[name]
        if target is None:
            return m[0]
        return f'<a class="repo-link" href="{repo_url}/blob/main/{target}">{m[0]}</a>'

    return _REGION.sub(link, html)


def on_pre_build(config, **kwargs):
    _targets.clear()


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb") or not config.get("repo_url"):
        return content
    root = Path(config.config_file_path).parent
    return link_repository_files(content, config["repo_url"].rstrip("/"), root)
