"""One runner for both experiments: cells, resumable, in parallel, with a progress bar.

A *cell* is one trained model: an experiment (``"tasks"`` or ``"text"``),
a task (``"text"`` for the text experiment), a kind, a seed and a learning
rate. Each cell runs in one process with one thread and writes its result
to its own file in the cells directory as soon as it ends (written to a
temporary file, then renamed, so a file is whole or absent). A run that is
killed and started again with the same command skips every cell whose file
exists and runs the rest; every cell is deterministic on one machine, so
the record does not depend on where the run stopped, nor on ``jobs``.

The task experiment has two phases: the learning-rate sweep (every task
and kind at each rate of ``lr_sweep``, on ``sweep_seed``), then the
reported seeds at the rate the sweep chose for that task and kind
(:func:`posenc_lab.extrapolation.tasks.choose_lr`). A reported cell starts
as soon as the sweep of its task and kind is done.

When every cell of an experiment is done, its record is written: the
settings, the command, the versions, the corpus (text), the machine, every
session of the run (start, wall time, load average) and every cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from posenc_lab.extrapolation import tasks, text

__all__ = [
    "EXPERIMENTS",
    "Cell",
    "calibrate",
    "estimate_s",
    "plan",
    "replay",
    "run",
    "settings_sha256",
]

#: The experiments and the settings of their stored records.
EXPERIMENTS = {"tasks": tasks.SETTINGS, "text": text.SETTINGS}


@dataclass(frozen=True)
class Cell:
    """One trained model. ``sweep`` marks a cell of the learning-rate sweep."""

    experiment: str
    task: str
    kind: str
    seed: int
    lr: float
    sweep: bool = False

    @property
    def name(self) -> str:
        return f"{self.task}-{self.kind}-seed{self.seed}-lr{self.lr:g}"

    def path(self, cells: Path) -> Path:
        return cells / self.experiment / f"{self.name}.json"


def settings_sha256(settings: dict) -> str:
    """A fingerprint of ``settings``: cells made with other settings are not reused."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ design


def sweep_cells(settings: dict) -> list[Cell]:
    """The learning-rate sweep of the task experiment (none for text, nor for a single rate)."""
    if settings["experiment"] != "tasks" or len(settings["lr_sweep"]) < 2:
        return []
    return [
        Cell("tasks", task, kind, settings["sweep_seed"], lr, sweep=True)
        for task in settings["tasks"]
        for kind in settings["kinds"]
        for lr in settings["lr_sweep"]
    ]


def reported_cells(settings: dict, lr_of: Callable[[str, str], float | None]) -> list[Cell]:
    """The reported cells whose rate is known (``lr_of(task, kind)`` is not ``None``)."""
    if settings["experiment"] == "text":
        return [
            Cell("text", "text", k, s, settings["lr"])
            for k in settings["kinds"]
            for s in settings["seeds"]
        ]
    out = []
    for task in settings["tasks"]:
        for kind in settings["kinds"]:
            lr = lr_of(task, kind)
            if lr is not None:
                out += [Cell("tasks", task, kind, s, lr) for s in settings["seeds"]]
    return out


def plan(settings: dict) -> list[Cell]:
    """Every cell of an experiment, the reported task cells at the first rate of the sweep.

    (Their rates are only known after the sweep; the count and the
    estimated time do not depend on them.)
    """
    first = settings.get("lr_sweep", [None])[0]
    return sweep_cells(settings) + reported_cells(settings, lambda task, kind: first)


#: The cost model: seconds on one core of the 2-core Intel Xeon of the pilot, measured
#: on 2 December 2026 between 00:25 and 00:30 UTC with nothing else of the experiment
#: running (lab/README.md; this machine's speed varied by about 1.5x over the day).
#: Per training step at L, by experiment; the kinds that cost more per step; per
#: evaluated row; per fine-tune step at 2L. It orders the cells (longest first), drives
#: the progress bar's time left and --plan.
STEP_S = {"tasks": 0.0102, "text": 0.086}
KIND_COST = {"rope": 1.1, "rope-llm": 1.1, "random": 1.08, "cope": 1.55}
ROW_S = {"tasks": 0.15, "text": 12.0}
ROW_COST = {"cope": 4.9, "fire": 1.6, "learned": 0.03}
FINETUNE_STEP_S = {"tasks": 0.021, "text": 0.11}
#: What else a cell costs: the validation checks, the data, loading the corpus (the pilot's
#: text cells took 14 to 23 s more than their steps and rows).
CELL_S = {"tasks": 1.0, "text": 15.0}


def estimate_s(cell: Cell, settings: dict) -> float:
    """Estimated seconds of ``cell`` on an idle core (see :data:`STEP_S`)."""
    from posenc_lab.extrapolation.models import rope_rows

    e = cell.experiment
    steps = tasks.steps_of(cell.task, settings)
    train = steps * STEP_S[e] * KIND_COST.get(cell.kind, 1.0)
    rows = rope_rows(cell.kind, tuple(settings["rope_rows"]))
    evaluation = len(rows) * ROW_S[e] * (ROW_COST.get(cell.kind, 1.0) if e == "text" else 1.0)
    n_ft = sum(row.endswith("+ft") for row in rows)
    finetune = n_ft * settings["finetune_steps"] * FINETUNE_STEP_S[e]
    return CELL_S[e] + train + evaluation + finetune


def calibrate(steps: int = 20) -> float:
    """How much slower this machine is now than :data:`STEP_S` assumes (1.0: as assumed).

    Times ``steps`` training steps of the text experiment's ALiBi model and
    ``10 * steps`` of the task experiment's, one thread, against the model.
    """
    from posenc_lab.extrapolation.models import build_model, loss_of

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    ratios = []
    try:
        for name, vocab, n in (("text", text.VOCAB, steps), ("tasks", 17, 10 * steps)):
            settings = EXPERIMENTS[name]
            torch.manual_seed(0)
            model = build_model("alibi", vocab, settings)
            opt = torch.optim.AdamW(model.parameters())
            x = torch.randint(vocab, (settings["batch_size"], settings["L"] + 1))
            start = time.perf_counter()
            for _ in range(n):
                loss = loss_of(model(x[:, :-1]), x[:, 1:])
                opt.zero_grad()
                loss.backward()
                opt.step()
            ratios.append((time.perf_counter() - start) / n / STEP_S[name])
    finally:
        torch.set_num_threads(threads)
    return (ratios[0] * ratios[1]) ** 0.5


# --------------------------------------------------------------- one cell


def _write_json(path: Path, data) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def _run(cell: Cell, settings: dict, stop_after: int | None = None) -> dict:
    """``cell``'s experiment on ``cell``, in this process, one thread, deterministic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(settings["threads"])
    torch.use_deterministic_algorithms(True)
    try:
        if cell.experiment == "text":
            return text.run_cell(cell.kind, cell.seed, cell.lr, settings, stop_after)
        return tasks.run_cell(cell.task, cell.kind, cell.seed, cell.lr, settings, stop_after)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(False)


def run_cell(cell: Cell, settings: dict, cells: Path) -> dict:
    """Run ``cell`` in this process (one thread, deterministic) and store its file."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = _run(cell, settings)
    out = {
        **asdict(cell),
        "settings_sha256": settings_sha256(settings),
        **result,
        "wall_s": round(time.perf_counter() - wall, 2),
        "cpu_s": round(time.process_time() - cpu, 2),
    }
    _write_json(cell.path(cells), out)
    return out


def replay(cell: Cell, settings: dict, steps: int) -> dict:
    """The first ``steps`` training steps of ``cell``, as its whole run takes them.

    Same model, data, schedule and checks as :func:`run_cell`, stopped
    after ``steps`` steps (no evaluation, no file): ``{"loss": [...],
    "curve": {...}}``, the beginning of the cell's stored ``loss`` and
    ``curve``. The CI slice compares the two.
    """
    return _run(cell, settings, stop_after=steps)


def _run_in_worker(cell: Cell, settings: dict, cells: Path) -> tuple[Cell, float]:
    return cell, run_cell(cell, settings, cells)["wall_s"]


def load_cell(cell: Cell, settings: dict, cells: Path) -> dict | None:
    """The stored result of ``cell``, or ``None`` if it has not run.

    Raises:
        ValueError: if the file was made with other settings.
    """
    path = cell.path(cells)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data["settings_sha256"] != settings_sha256(settings):
        raise ValueError(
            f"{path} was made with other settings than this run's; remove {cells} "
            f"(or pass another --cells folder) to start afresh"
        )
    return data


# ---------------------------------------------------------------- progress


class Progress:
    """A one-line progress bar on ``stream``; the time left from the estimated cost."""

    def __init__(self, total_s: float, cells: int, stream=sys.stderr) -> None:
        self.total_s, self.cells, self.stream = total_s, cells, stream
        self.done_s, self.done = 0.0, 0
        self.start = time.perf_counter()

    def step(self, label: str, estimate: float) -> None:
        self.done += 1
        self.done_s += estimate
        elapsed = time.perf_counter() - self.start
        left = elapsed * (self.total_s - self.done_s) / self.done_s if self.done_s else 0.0
        filled = round(30 * self.done / self.cells)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.cells} "
            f"{elapsed:6.0f} s, ~{left:6.0f} s left  {label:40.40s}"
        )
        if self.done == self.cells:
            self.stream.write("\n")
        self.stream.flush()


# --------------------------------------------------------------- the run


def _machine() -> dict:
    processor = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "machine": platform.machine(),
        "processor": processor,
        "isa": _vector_extensions(),
        "cpus": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()}",
    }


def _vector_extensions() -> str:
    """The widest x86 vector extensions the CPU reports (they decide float rounding order)."""
    try:
        flags = next(
            line.split(":", 1)[1].split()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        return "unknown"
    for name in ("avx512f", "avx2", "avx", "sse4_2"):
        if name in flags:
            return name
    return "other"


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for package in ("posenc", "posenc-lab"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    return out


def _git_commit() -> str | None:
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return f"{commit}{' (with uncommitted changes)' if dirty else ''}" if commit else None


class _Sessions:
    """The run's sessions (one per invocation), kept in ``cells/sessions.json``."""

    def __init__(self, cells: Path, command: str, jobs: int) -> None:
        self.path = cells / "sessions.json"
        self.past = json.loads(self.path.read_text()) if self.path.is_file() else []
        self.start = time.perf_counter()
        self.current = {
            "command": command,
            "jobs": jobs,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average_before": [round(x, 2) for x in os.getloadavg()],
            "cells_run": 0,
            "wall_s": 0.0,
        }
        self.update(0)

    def update(self, cells_run: int) -> None:
        self.current["cells_run"] = cells_run
        self.current["wall_s"] = round(time.perf_counter() - self.start, 1)
        self.current["load_average_now"] = [round(x, 2) for x in os.getloadavg()]
        _write_json(self.path, [*self.past, self.current])

    @property
    def all(self) -> list[dict]:
        return [*self.past, self.current]


def record_of(settings: dict, cells: Path, sessions: list[dict], command: str) -> dict | None:
    """The record of an experiment if every cell of it is done, else ``None``."""
    sweep = {c: load_cell(c, settings, cells) for c in sweep_cells(settings)}
    if any(v is None for v in sweep.values()):
        return None
    lr = _chosen(settings, sweep)
    runs = [load_cell(c, settings, cells) for c in reported_cells(settings, lr)]
    if any(r is None for r in runs):
        return None
    record = {
        "experiment": settings["experiment"],
        "settings": settings,
        "command": command,
        "versions": _versions(),
        "git_commit": _git_commit(),
        "machine": _machine(),
        "sessions": sessions,
        "wall_s": round(sum(s["wall_s"] for s in sessions), 1),
        "cell_wall_s_total": round(sum(r["wall_s"] for r in [*runs, *sweep.values()]), 1),
        "cell_cpu_s_total": round(sum(r["cpu_s"] for r in [*runs, *sweep.values()]), 1),
    }
    if settings["experiment"] == "text":
        record["corpus"] = text.corpus_for(settings).describe()
    else:
        record["lr"] = {t: {k: lr(t, k) for k in settings["kinds"]} for t in settings["tasks"]}
        record["sweep"] = list(sweep.values())
    record["runs"] = runs
    return record


def _chosen(settings: dict, sweep: dict[Cell, dict | None]) -> Callable[[str, str], float | None]:
    """``lr_of(task, kind)``: the rate the sweep chose, ``None`` while its sweep runs."""

    def lr_of(task: str, kind: str) -> float | None:
        if settings["experiment"] == "text":
            return settings["lr"]
        if len(settings["lr_sweep"]) == 1:
            return settings["lr_sweep"][0]
        done = {c.lr: r for c, r in sweep.items() if (c.task, c.kind) == (task, kind)}
        if any(r is None for r in done.values()):
            return None
        return tasks.choose_lr(done)

    return lr_of


def run(
    designs: Iterable[dict],
    *,
    cells: Path,
    records: Path | None,
    jobs: int = 1,
    progress: bool = True,
    command: str = "",
    max_cells: int | None = None,
) -> dict[str, dict | None]:
    """Run every cell of ``designs`` not done yet; write each finished experiment's record.

    ``designs`` are settings dicts (:data:`EXPERIMENTS` or parts of them);
    ``records`` is the folder of the records (``extrapolation-<experiment>.json``;
    ``None`` writes none). ``max_cells`` stops after that many cells (a
    kill, for the tests). Returns each experiment's record, ``None`` if
    cells are left.
    """
    designs = {d["experiment"]: d for d in designs}
    cells.mkdir(parents=True, exist_ok=True)
    for e, d in designs.items():  # refuse cells of other settings before running anything
        for path in sorted((cells / e).glob("*.json")):
            if json.loads(path.read_text())["settings_sha256"] != settings_sha256(d):
                raise ValueError(
                    f"{path} was made with other settings than this run's; remove {cells} "
                    f"(or pass another --cells folder) to start afresh"
                )
    sessions = _Sessions(cells, command, jobs)
    sweeps = {e: {c: load_cell(c, d, cells) for c in sweep_cells(d)} for e, d in designs.items()}
    started: set[Cell] = set()

    def ready() -> list[Cell]:
        """Cells that can start now: the sweep first, then the longest first."""
        out = []
        for e, d in designs.items():
            for c in [*sweep_cells(d), *reported_cells(d, _chosen(d, sweeps[e]))]:
                if c not in started and not c.path(cells).is_file():
                    out.append(c)
        return sorted(out, key=lambda c: (not c.sweep, -estimate_s(c, designs[c.experiment])))

    todo = [c for d in designs.values() for c in plan(d) if not c.path(cells).is_file()]
    bar = None
    if progress and todo:
        bar = Progress(sum(estimate_s(c, designs[c.experiment]) for c in todo), len(todo))
    ran = 0

    def finished(cell: Cell) -> None:
        nonlocal ran
        ran += 1
        if cell.sweep:
            sweeps[cell.experiment][cell] = load_cell(cell, designs[cell.experiment], cells)
        sessions.update(ran)
        if bar:
            bar.step(f"{cell.experiment} {cell.name}", estimate_s(cell, designs[cell.experiment]))

    def stop() -> bool:
        return max_cells is not None and ran >= max_cells

    if jobs == 1:
        while not stop() and (next_cells := ready()):
            started.add(next_cells[0])
            run_cell(next_cells[0], designs[next_cells[0].experiment], cells)
            finished(next_cells[0])
    else:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=context) as pool:
            running = set()
            while True:
                while len(running) < jobs and not stop() and (next_cells := ready()):
                    cell = next_cells[0]
                    started.add(cell)
                    running.add(pool.submit(_run_in_worker, cell, designs[cell.experiment], cells))
                if not running:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    finished(future.result()[0])
    sessions.update(ran)
    out = {}
    for e, d in designs.items():
        record = record_of(d, cells, sessions.all, command)
        out[e] = record
        if record is not None and records is not None:
            _write_json(records / f"extrapolation-{e}.json", record)
    return out
