"""The commit-msg hook (tools/check_commit_msg.py) and its place in pre-commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "check_commit_msg.py"


def run(message: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "message",
    [
        "Add YaRN's truncate option\n",
        "x" * 72 + "\n\nA body line that is longer than the subject may be, which is fine.\n",
        "Fix the bias dtype\n\nWhy.\n# Please enter the commit message\n# " + "y" * 90 + "\n",
        "\nFix a typo\n",  # git drops leading blank lines
    ],
)
def test_good_messages_pass(message, tmp_path):
    result = run(message, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("x" * 73 + "\n", "the subject is 73 characters; keep it to 72"),
        ("Fix the bias dtype.\n", "ends with a period"),
        ("Fix the bias dtype\nno blank line before the body\n", "second line must be blank"),
        ("# only a comment\n", "the message is empty"),
    ],
)
def test_bad_messages_fail_with_the_reason(message, said, tmp_path):
    result = run(message, tmp_path)
    assert result.returncode == 1
    assert said in result.stderr


def test_text_below_the_scissors_line_is_ignored(tmp_path):
    cut = "# ------------------------ >8 ------------------------\n"
    assert run("Fix it\n" + cut + "z" * 200 + "\n", tmp_path).returncode == 0


def test_pre_commit_runs_it_at_the_commit_msg_stage():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "tools/check_commit_msg.py" in config
    assert "stages: [commit-msg]" in config
    assert "commit-msg" in config.split("default_install_hook_types:", 1)[1].splitlines()[0]
