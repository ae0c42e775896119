"""The CI workflow is valid and runs what .ci/run runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def _check_jsonschema(path: Path) -> subprocess.CompletedProcess:
    exe = (
        shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
        or "check-jsonschema"
    )
    cmd = [exe, "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_workflow_matches_the_github_schema(tmp_path):
    assert _check_jsonschema(WORKFLOW).returncode == 0
    broken = tmp_path / "ci.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:"), encoding="utf-8")
    assert _check_jsonschema(broken).returncode != 0, (
        "the schema check must catch a broken workflow"
    )


def test_workflow_tests_with_ci_run_and_deploys_with_least_privilege():
    flow = yaml.safe_load(WORKFLOW.read_text())
    steps = flow["jobs"]["test"]["steps"]
    assert any(step.get("run") == "bash .ci/run" for step in steps)
    assert flow["permissions"] == {"contents": "read"}
    deploy = flow["jobs"]["deploy"]
    assert deploy["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    for job in flow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:  # actions pinned to a version, never a branch
                ref = step["uses"].split("@")[1]
                assert ref[0] == "v" and ref.count(".") == 2, step["uses"]


def test_colab_branch_gets_the_notebooks_of_the_deployed_site(tmp_path):
    from hooks import language

    flow = yaml.safe_load(WORKFLOW.read_text())
    job = flow["jobs"]["colab"]
    assert job["needs"] == "deploy" and job["if"] == flow["jobs"]["deploy"]["if"]
    assert job["permissions"] == {"contents": "write"}  # the only job that writes
    download, push = job["steps"]
    assert download["uses"].startswith("actions/download-artifact@")
    assert download["with"] == {"name": "github-pages", "path": "pages"}  # what was deployed

    # run the step on a small site, pushing to a local repository
    site = tmp_path / "site"
    for page in ("index.html", "rope/index.html", "rope/rope.ipynb", "ja/rope/rope.ja.ipynb"):
        (site / page).parent.mkdir(parents=True, exist_ok=True)
        (site / page).write_text(page)
    (tmp_path / "pages").mkdir()
    subprocess.run(["tar", "-cf", tmp_path / "pages/artifact.tar", "-C", site, "."], check=True)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", remote], check=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_SHA": "abc123"}
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", push["run"]],
        cwd=tmp_path,
        env={**env, "REMOTE": str(remote)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    branch = language.NOTEBOOK_BRANCH
    git = ["git", "--git-dir", remote]
    files = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", branch], capture_output=True, text=True
    )
    assert files.stdout.split() == ["ja/rope/rope.ja.ipynb", "rope/rope.ipynb"]
    log = subprocess.run([*git, "log", "--format=%s", branch], capture_output=True, text=True)
    assert log.stdout == "Notebooks of the site built from abc123\n"
    # the toolbar's Colab link names the same branch and path
    assert language.colab_url("https://github.com/o/r", "ja/rope/rope.ja.ipynb").endswith(
        f"/github/o/r/blob/{branch}/ja/rope/rope.ja.ipynb"
    )


def test_the_repository_url_is_the_one_mkdocs_yml_gives():
    """The site derives the Colab links and the notebooks' install cell from
    mkdocs.yml's repo_url; the files read where no build runs spell it out,
    and must spell the same."""
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    default = re.search(r'^repo_url: !ENV \[REPO_URL, "([^"]+)"\]$', mkdocs, re.MULTILINE)[1]
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["repository-code"] == default
    for page in ("docs/index.md", "docs/index.ja.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"git clone {default} && cd " in text, page
