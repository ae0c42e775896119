"""posenc_lab: the project's laboratory, kept out of the posenc wheel.

It holds the CPU benchmarks (:mod:`.bench`, which made the stored CPU
records, and :mod:`.cpu_bench`, its successor for RoPE), the GPU benchmark
of the fused RoPE kernel (:mod:`.gpu_bench`), the toy Transformer
(:mod:`.toy`), the length-generalisation experiments (:mod:`.experiments`),
the site's figure style (:mod:`.plotting`) and what its interactive figures
share (:mod:`.vega`), and the stored records they produced
(:func:`record_path`). The chapters about measurement import it.
"""

from __future__ import annotations

from pathlib import Path

#: Stored records (benchmarks, experiments), shipped with this package so a
#: chapter reads them wherever it runs.
RECORDS = Path(__file__).resolve().parent / "records"


def record_path(name: str) -> Path:
    """The stored record ``name`` (``"cpu-1-thread"`` or ``"cpu-1-thread.json"``)."""
    path = RECORDS / (name if name.endswith(".json") else f"{name}.json")
    if not path.is_file():
        known = sorted(p.stem for p in RECORDS.glob("*.json"))
        raise ValueError(f"name must be one of {known}, got {name!r}")
    return path
