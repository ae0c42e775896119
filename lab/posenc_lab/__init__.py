"""posenc_lab: the project's laboratory, kept out of the posenc wheel.

It holds the RoPE benchmarks on the CPU (:mod:`.cpu_bench`) and on a GPU
(:mod:`.gpu_bench`), with the byte counter (:mod:`.traffic`) and the other
libraries' formulas (:mod:`.references`) they use, the toy Transformer
(:mod:`.toy`) and the reversal toy (:mod:`.reversal`), the extrapolation
experiments (:mod:`.extrapolation`, with the statistics the chapters quote,
:mod:`.stats`), the site's figure style
(:mod:`.plotting`) and what its interactive figures share (:mod:`.vega`),
and the stored records they produced
(:func:`record_path`). The chapters about measurement import it.
"""

from __future__ import annotations

from pathlib import Path

#: Stored records (benchmarks, experiments), shipped with this package so a
#: chapter reads them wherever it runs.
RECORDS = Path(__file__).resolve().parent / "records"


def record_path(name: str) -> Path:
    """The stored record ``name`` (``"cpu-rope-1-thread"`` or ``"cpu-rope-1-thread.json"``)."""
    path = RECORDS / (name if name.endswith(".json") else f"{name}.json")
    if not path.is_file():
        known = sorted(p.stem for p in RECORDS.glob("*.json"))
        raise ValueError(f"name must be one of {known}, got {name!r}")
    return path
