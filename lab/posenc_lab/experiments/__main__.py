"""Command line: ``python -m posenc_lab.experiments [--out PATH] [--jobs N] ...``.

With no arguments it regenerates the stored record,
``posenc_lab/records/length-generalisation.json``: every task, kind and seed of
:data:`posenc_lab.experiments.SETTINGS`. A progress bar goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from posenc_lab.experiments import KINDS, RECORD, TASKS, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc_lab.experiments", description=__doc__)
    parser.add_argument("--out", type=Path, default=RECORD, help="JSON record to write")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 (default 5)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be positive integers")
    record = run(args.tasks, args.kinds, range(args.seeds), jobs=args.jobs, progress=not args.quiet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({len(record['runs'])} runs, {record['wall_s']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
