"""The CI workflow is valid and runs what .ci/run runs."""

from __future__ import annotations

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
