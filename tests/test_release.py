"""The release pipeline: CI builds, checks, installs and tests the wheel; a tag publishes it.

The workflow itself is validated against GitHub's schema in
tests/test_repo_config.py; here, what the release jobs must do, and that
the citation records agree with the package's version.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import posenc

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
PACKAGE = ROOT / ".ci" / "package"


def _flow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def test_ci_builds_checks_installs_and_tests_the_wheel():
    job = _flow()["jobs"]["package"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert "bash .ci/package" in runs
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["with"]["name"] == "dist"
    script = PACKAGE.read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    for step in (
        "-m build --outdir",  # sdist and wheel
        'twine" check --strict',  # their metadata and long description
        'python3 -m venv "$work/env"',  # a clean environment
        'pip install --quiet "$DIST"/*.whl',  # the wheel, not the source tree
        'archive HEAD | tar -x -C "$src"',  # the tests in a copy of the tree ...
        'rm -rf "$src/posenc"',  # ... without the package's sources
        "site-packages",  # and a check that they import the installed copy
        "-m pytest",
    ):
        assert step in script, step
    assert '[ "$t" = tests/test_repo_config.py ] || tests+=("$t")' in script


def test_a_version_tag_publishes_with_trusted_publishing_only():
    flow = _flow()
    job = flow["jobs"]["publish"]
    assert job["if"] == "github.event_name == 'push' && startsWith(github.ref, 'refs/tags/v')"
    assert set(job["needs"]) == {"test", "package"}  # only what CI tested and checked
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert "environment" in job
    publish = [
        s for s in job["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")
    ]
    assert len(publish) == 1
    assert "with" not in publish[0] or not {"password", "user"} & set(publish[0]["with"])
    assert "secrets." not in WORKFLOW.read_text(encoding="utf-8")  # no stored token anywhere
    downloads = [
        s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@")
    ]
    assert downloads and downloads[0]["with"]["name"] == "dist"
    # the publish job builds nothing itself: it uploads the distributions that were tested
    assert not any("build" in step.get("run", "") for step in job["steps"])


def _bibtex(page: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```bibtex\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, f"{page}: expected one BibTeX block"
    return blocks[0]


def test_citation_records_agree_with_the_package():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == posenc.__version__
    assert {"message", "title", "authors", "license", "repository-code"} <= set(cff)
    en, ja = _bibtex("docs/index.md"), _bibtex("docs/index.ja.md")
    assert en == ja  # the same record on both home pages
    fields = dict(re.findall(r"^\s+(\w+)\s*=\s*\{(.*)\},$", en, re.MULTILINE))
    assert fields["title"] == cff["title"]
    assert fields["version"] == posenc.__version__
    assert fields["url"] == cff["repository-code"]
    assert fields["license"] == cff["license"]
    assert fields["author"] == "{" + cff["authors"][0]["name"] + "}"
    for page in ("docs/index.md", "docs/index.ja.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "## Cite this" in text or "## 引用" in text
