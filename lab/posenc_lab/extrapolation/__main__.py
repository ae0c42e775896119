"""Command line: ``python -m posenc_lab.extrapolation [--jobs N] [--plan] ...``.

With no arguments it makes (or, if it was stopped, completes) both stored
records, ``posenc_lab/records/extrapolation-tasks.json`` and
``extrapolation-text.json``, keeping every finished cell in
``posenc_lab/records/extrapolation.cells/`` so that a stopped run goes on
where it stopped when started again with the same command. A progress bar
goes to stderr. ``--plan`` prints the cells and their estimated time
instead (``--calibrate``: scaled by a few steps timed on this machine now). ``--kinds``, ``--seeds``, ``--tasks`` and ``--set`` run a part or a
variant (a pilot): give it ``--cells`` and ``--records`` folders of its
own, so that it does not mix with the stored design.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
from pathlib import Path

from posenc_lab import RECORDS
from posenc_lab.extrapolation.models import KINDS
from posenc_lab.extrapolation.runner import EXPERIMENTS, calibrate, estimate_s, plan, run
from posenc_lab.extrapolation.tasks import TASKS


def _setting(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE (VALUE in JSON), got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def designs_from(args: argparse.Namespace) -> list[dict]:
    """The settings of every experiment asked for, with the parts and changes asked for."""
    out = []
    for name in args.experiments:
        settings = copy.deepcopy(EXPERIMENTS[name])
        for key, value in args.set:
            experiment, _, key = key.rpartition(".")
            if experiment and experiment != name:
                continue
            if key not in settings:
                raise SystemExit(
                    f"error: --set {key}: not a setting of {name} ({sorted(settings)})"
                )
            settings[key] = value
        if args.kinds:
            settings["kinds"] = list(args.kinds)
        if args.seeds is not None:
            settings["seeds"] = list(range(args.seeds))
        if args.tasks and name == "tasks":
            settings["tasks"] = list(args.tasks)
        out.append(settings)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lab.extrapolation", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--experiments", nargs="+", choices=list(EXPERIMENTS), default=list(EXPERIMENTS)
    )
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (default 1)")
    parser.add_argument("--records", type=Path, default=RECORDS, help="folder of the records")
    parser.add_argument(
        "--cells", type=Path, help="folder of finished cells (default: RECORDS/extrapolation.cells)"
    )
    parser.add_argument("--kinds", nargs="+", choices=list(KINDS))
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS))
    parser.add_argument("--seeds", type=int, help="seeds 0 .. N-1 (default: the design's)")
    parser.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a setting (VALUE in JSON; tasks.KEY or text.KEY for one experiment)",
    )
    parser.add_argument(
        "--plan", action="store_true", help="print the cells and their estimated time"
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="with --plan: time a few steps here first and scale the estimate",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.seeds is not None and args.seeds < 1):
        parser.error("--jobs and --seeds must be positive integers")
    designs = designs_from(args)
    if args.plan:
        factor = calibrate() if args.calibrate else 1.0
        where = f"on this machine now ({factor:.2f} x the model)" if args.calibrate else "idle"
        total = 0.0
        for settings in designs:
            cells = plan(settings)
            seconds = factor * sum(estimate_s(c, settings) for c in cells)
            total += seconds
            name = settings["experiment"]
            print(f"{name}: {len(cells)} cells, ~{seconds:.0f} s on one core, {where}")
        minutes = total / args.jobs / 60
        print(f"all: ~{total:.0f} core-seconds, ~{minutes:.0f} min at --jobs {args.jobs}")
        return 0
    cells = args.cells or args.records / "extrapolation.cells"
    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "posenc_lab.extrapolation", *given])
    records = run(
        designs,
        cells=cells,
        records=args.records,
        jobs=args.jobs,
        progress=not args.quiet,
        command=command,
    )
    for name, record in records.items():
        state = f"wrote {args.records / f'extrapolation-{name}.json'}" if record else "cells left"
        print(f"{name}: {state}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
