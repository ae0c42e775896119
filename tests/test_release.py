"""The release pipeline: CI builds, checks, installs and tests the wheel; a tag publishes it.

The workflow itself is validated against GitHub's schema in
tests/test_repo_config.py; here, what the release jobs must do, and that
the citation records agree with the package's version.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
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


# ---------------------------------------------------------------------------
# What the distributions hold: built here from a copy of the working tree
# (tracked and untracked files, not the ignored ones), with setuptools'
# build backend, as `python -m build` would call it
# ---------------------------------------------------------------------------

#: the lab (benchmark, toy model, experiments, plotting) lives in lab/, outside the wheel
_LAB = re.compile(r"(^|/)(posenc_lab|lab|bench|toy|experiments?|plotting|records)(/|\.py$)")


@pytest.fixture(scope="module")
def distributions(tmp_path_factory) -> dict[str, list[str]]:
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("building needs setuptools>=77 (license-files)")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to know the working tree's files")
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in listed:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = {}
    for kind in ("wheel", "sdist"):
        code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
        run = subprocess.run(
            [sys.executable, "-c", code], cwd=src, check=True, capture_output=True, text=True
        )
        built[kind] = out / run.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(built["wheel"]) as wheel:
        files = {"wheel": wheel.namelist()}
    with tarfile.open(built["sdist"]) as sdist:
        files["sdist"] = sdist.getnames()
    files["names"] = [built["wheel"].name, built["sdist"].name]
    return files


def test_distributions_hold_the_license_and_the_library_only(distributions):
    version = posenc.__version__
    assert distributions["names"] == [
        f"posenc-{version}-py3-none-any.whl",
        f"posenc-{version}.tar.gz",
    ]
    wheel = distributions["wheel"]
    assert f"posenc-{version}.dist-info/licenses/LICENSE" in wheel
    assert all(n.startswith(("posenc/", f"posenc-{version}.dist-info/")) for n in wheel), wheel
    assert [n for n in wheel if _LAB.search(n)] == []
    assert "posenc/__init__.py" in wheel and "posenc/py.typed" in wheel
    sdist = distributions["sdist"]
    assert f"posenc-{version}/LICENSE" in sdist
    package = [n for n in sdist if n.startswith(f"posenc-{version}/posenc/")]
    assert f"posenc-{version}/posenc/rope.py" in package
    assert [n for n in sdist if _LAB.search(n.split("/", 1)[-1])] == []


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_license_is_mit_for_the_posenc_authors():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The posenc authors\n")
    project = _pyproject()
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]


def test_project_urls_follow_mkdocs_repo_url():
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    # repo_url: !ENV [REPO_URL, "<default>"]: the default is the repository's address
    repo = re.search(r'^repo_url: !ENV \[REPO_URL, "([^"]+)"\]$', mkdocs, re.MULTILINE).group(1)
    owner, name = repo.removeprefix("https://github.com/").split("/")
    urls = _pyproject()["urls"]
    assert urls == {
        "Homepage": f"https://{owner}.github.io/{name}/",  # the site, on its GitHub Pages
        "Repository": repo,
        "Changelog": f"{repo}/blob/main/CHANGELOG.md",
        "Issues": f"{repo}/issues",
    }
