"""Open the chapters in JupyterLab: ``make lab``, ``make lab-en``, ``make lab-ja``.

``make lab`` opens notebooks/: a chapter's ``.ipynb`` opens as one notebook
paired with its ``.py`` (jupytext, as jupytext.toml says), and saving writes
both. ``make lab-en`` and ``make lab-ja`` first write one-language copies of
every chapter (notebooks-en/, notebooks-ja/, ignored by git, read-only and
marked as generated) and open those.

Before the server starts, what would otherwise show up inside JupyterLab as
an error, or not at all, is said here in plain words: a chapter whose
kernel this environment lacks, and a pair whose ``.py`` and ``.ipynb``
hold different cells (a stale ``.ipynb``, or one edited on its own).

Usage: ``python -m tools.lab [--lang en|ja] [--root DIR] [JupyterLab options]``;
options it does not know (``--port=8890``, ``--no-browser``) go to JupyterLab.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: jupytext refuses to open a pair whose .ipynb is newer than its .py by more
#: than this (its outdated_text_notebook_margin) when their cells differ.
MARGIN_S = 1.0


def kernel_problems(chapters: list[Path], installed: set[str]) -> list[str]:
    """One message per chapter whose ``.py`` names a kernel not in ``installed``."""
    import jupytext

    problems = []
    for py in chapters:
        name = jupytext.read(py).metadata.get("kernelspec", {}).get("name")
        if name not in installed:
            problems.append(
                f"{py.name} names the kernel {name!r}, which this environment does not have "
                f"(it has: {', '.join(sorted(installed)) or 'none'}). "
                + (
                    "Run `make setup`, which installs ipykernel and its kernel python3."
                    if name == "python3"
                    else "Set `name: python3` under `kernelspec:` in the header of the .py."
                )
            )
    return problems


def pair_problems(chapters: list[Path]) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` about the ``.py``/``.ipynb`` pairs of ``chapters``.

    Cells that differ are an error when the ``.ipynb`` is the newer file
    (JupyterLab would refuse to open it) and a warning otherwise (it opens
    the ``.py``'s cells, without the outputs of the cells that changed).
    """
    import jupytext
    from jupytext.compare import NotebookDifference, compare_notebooks

    errors, warnings = [], []
    for py in chapters:
        ipynb = py.with_suffix(".ipynb")
        make = f"`make notebooks NB=notebooks/{py.name}`"
        if not ipynb.exists():
            warnings.append(f"{py.name} has no {ipynb.name}: it opens without outputs; {make}.")
            continue
        try:
            compare_notebooks(jupytext.read(py), jupytext.read(ipynb), fmt="py:percent")
            continue
        except NotebookDifference:
            pass
        if ipynb.stat().st_mtime > py.stat().st_mtime + MARGIN_S:
            errors.append(
                f"{ipynb.name} was changed after {py.name} and their cells differ, so "
                f"JupyterLab would refuse to open it. The .py is the source: {make} "
                f"rebuilds the .ipynb from it (the .ipynb's own edits are lost), or "
                f"`.venv/bin/jupytext --to py:percent notebooks/{ipynb.name}` keeps the "
                ".ipynb's cells in the .py."
            )
        else:
            warnings.append(
                f"{ipynb.name} is older than {py.name} and their cells differ: it opens "
                f"with the .py's cells, the changed ones without outputs; {make} "
                "re-executes it."
            )
    return errors, warnings


# A run of \uXXXX escapes after an even number of backslashes (an odd
# number would make the first one a literal backslash).
_ESCAPES = re.compile(r"(?<!\\)((?:\\\\)*)((?:\\u[0-9a-fA-F]{4})+)")


def unescape_cell_metadata(text: str) -> str:
    """``text`` with the characters of its cell-marker lines unescaped.

    jupytext writes a cell's metadata (``# %% alt={...}``) as JSON with every
    non-ASCII character escaped, so a save from JupyterLab would turn each
    Japanese alt text of the .py into ``\\u306e...``; the chapters keep
    them readable, and the JSON means the same either way.
    """
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("# %%") and "\\u" in line:
            lines[k] = _ESCAPES.sub(lambda m: m[1] + json.loads(f'"{m[2]}"'), line)
    return "\n".join(lines)


def post_save(model, os_path, contents_manager, **kwargs):
    """JupyterLab's hook after it writes a file: a paired .py as written by hand."""
    path = Path(os_path)
    if path.suffix == ".py":
        text = path.read_text(encoding="utf-8")
        kept = unescape_cell_metadata(text)
        if kept != text:
            path.write_text(kept, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", choices=["en", "ja"], help="open one-language copies")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository (default: this one)"
    )
    args, lab_args = parser.parse_known_args(argv)
    root = args.root.resolve()
    chapters = sorted((root / "notebooks").glob("[0-9]*.py"))
    if not chapters:
        print(f"make lab: no chapters in {root / 'notebooks'}", file=sys.stderr)
        return 1

    from jupyter_client.kernelspec import KernelSpecManager

    errors = kernel_problems(chapters, set(KernelSpecManager().find_kernel_specs()))
    pair_errors, warnings = pair_problems(chapters)
    for message in warnings:
        print(f"make lab: warning: {message}", file=sys.stderr)
    for message in errors + pair_errors:
        print(f"make lab: {message}", file=sys.stderr)
    if errors or pair_errors:
        return 1

    folder = "notebooks"
    if args.lang:
        from hooks import language

        folder = f"notebooks-{args.lang}"
        copies = language.write_lab_copies(root / "notebooks", root / folder, args.lang)
        print(f"make lab: wrote {len(copies)} {args.lang} copies into {folder}/", file=sys.stderr)

    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={root}",  # the root, so links to ../docs/ open
        f"--LabApp.default_url=/lab/tree/{folder}",
        "--ServerApp.ip=127.0.0.1",
        "--LabApp.news_url=None",  # no announcements fetched, nor asked about
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--FileContentsManager.post_save_hook=tools.lab.post_save",
        *lab_args,
    ]
    if os.geteuid() == 0:  # containers and CI run as root, which JupyterLab refuses unasked
        command.append("--allow-root")
    sys.stdout.flush()
    os.execv(sys.executable, command)  # Ctrl+C goes to JupyterLab itself
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
