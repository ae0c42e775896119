"""A chapter's downloadable notebook runs where a reader runs it.

The site serves, and Colab opens, one notebook per chapter and language
(hooks/language.py, ``reader_notebook``). Here each is executed as a
reader would: in an empty folder, in a fresh kernel of a virtual
environment that holds the posenc and posenc-lab wheels built from this
tree and nothing else of the repository. Their dependencies (torch,
matplotlib, ipykernel) come from the project's environment, read-only, so
nothing is downloaded; the notebook's first cell finds posenc, posenc-lab
and matplotlib installed and installs nothing.

``make test`` runs one chapter, the one that reads stored benchmark records
(it once crashed on Colab looking for them in the working tree): 17 s on
the 2-core development machine. ``make test-notebooks-clean`` runs all of
them
(``CLEAN_CHAPTERS=all``; or a comma-separated list of ``NN-slug`` names).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hooks import language

ROOT = Path(__file__).resolve().parents[2]
ALL = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
QUICK = ["12-efficient-rope"]
_wanted = os.environ.get("CLEAN_CHAPTERS", "")
CHAPTERS = ALL if _wanted == "all" else (_wanted.split(",") if _wanted else QUICK)
# the address a reader's notebook links to and installs from; any will do here
SITE, REPO = "https://example.org/posenc/", "https://github.com/posenc/posenc"


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory) -> Path:
    """The python of a fresh virtual environment with only the two wheels installed."""
    tmp = tmp_path_factory.mktemp("clean")
    # build from a copy, so that no build/ folder is left in the tree
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("*.egg-info", "__pycache__", "build")
    shutil.copytree(ROOT / "posenc", src / "posenc", ignore=ignore)
    shutil.copytree(ROOT / "lab", src / "lab", ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp / "wheels", src, src / "lab"]
    )
    wheels = sorted((tmp / "wheels").glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["posenc", "posenc_lab"], wheels

    env = tmp / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", env])
    python = env / "bin" / "python"
    _run([*pip, "--python", python, "install", "--no-deps", "--no-index", *wheels])
    purelib = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    # torch, matplotlib, ipykernel, nbconvert: the project's, appended after
    # the environment's own packages (a plain path: the editable installs of
    # posenc and posenc-lab there are not activated)
    (purelib / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    kernel = env / "share" / "jupyter" / "kernels" / "clean"
    kernel.mkdir(parents=True)
    spec = {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]}
    (kernel / "kernel.json").write_text(
        json.dumps({**spec, "display_name": "clean", "language": "python"})
    )
    return python


def _environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER"))}
    return env


def test_both_languages_run_the_same_code():
    nb = json.loads((ROOT / "notebooks" / f"{QUICK[0]}.ipynb").read_text(encoding="utf-8"))
    en, ja = (language.reader_notebook(nb, lang, SITE, REPO) for lang in ("en", "ja"))
    code = [[c["source"] for c in n["cells"] if c["cell_type"] == "code"] for n in (en, ja)]
    assert code[0][1:] == code[1][1:] and len(code[0]) > 1  # the install cell's comment differs


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_reader_notebook_runs_top_to_bottom_in_an_empty_folder(clean_python, tmp_path, chapter):
    nb = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    reader = language.reader_notebook(nb, "en", SITE, REPO)
    where = "import posenc, posenc_lab\nprint(posenc.__file__, posenc_lab.__file__)"
    cell = {"cell_type": "code", "id": "where", "metadata": {}, "source": where}
    reader["cells"].append({**cell, "execution_count": None, "outputs": []})
    folder = tmp_path / "reader"
    folder.mkdir()
    (folder / f"{chapter}.ipynb").write_text(
        json.dumps(reader, ensure_ascii=False), encoding="utf-8"
    )
    _run(
        [
            *(clean_python, "-m", "nbconvert", "--to", "notebook", "--execute"),
            *("--ExecutePreprocessor.kernel_name=clean", "--ExecutePreprocessor.timeout=1200"),
            *("--log-level=WARN", "--output", "ran.ipynb", f"{chapter}.ipynb"),
        ],
        cwd=folder,
        env=_environment(),
    )
    ran = json.loads((folder / "ran.ipynb").read_text(encoding="utf-8"))
    install = ran["cells"][0]
    assert install["id"] == "install-posenc" and install["outputs"] == [], "it installed something"
    code = [c for c in ran["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    # the chapter imported the wheels, not the tree
    env = clean_python.parents[1]
    assert all(Path(p).is_relative_to(env) for p in "".join(code[-1]["outputs"][0]["text"]).split())
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{chapter}.ipynb", "ran.ipynb"])
