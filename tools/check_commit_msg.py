"""Check a commit message: the ``commit-msg`` hook of .pre-commit-config.yaml.

A subject of at most 72 characters that does not end with a period, then
(if there is a body) one blank line. Lines git strips (``#`` comments, the
scissors line and what follows it) do not count. Usage:
``python tools/check_commit_msg.py .git/COMMIT_EDITMSG``.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"


def problems(message: str) -> list[str]:
    """What is wrong with ``message``, one sentence each (empty when it is fine)."""
    lines = []
    for line in message.splitlines():
        if line.startswith(SCISSORS):
            break
        if not line.startswith("#"):
            lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    subject, found = lines[0], []
    if len(subject) > MAX_SUBJECT:
        found.append(
            f"the subject is {len(subject)} characters; keep it to {MAX_SUBJECT} "
            "and put the rest in the body"
        )
    if subject.endswith("."):
        found.append("the subject ends with a period; drop it")
    if len(lines) > 1 and lines[1]:
        found.append("the second line must be blank: it separates the subject from the body")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_commit_msg.py MESSAGE_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[1]).read_text(encoding="utf-8"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
