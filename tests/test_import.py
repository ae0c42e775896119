"""``import posenc`` costs next to nothing beyond ``import torch``.

Measured by what it imports, not by the clock: in a fresh interpreter, the
modules that ``import posenc`` adds to ``sys.modules`` after ``import torch``
must be posenc's own. torch's compiler stack (``torch._dynamo``,
``torch._inductor``, triton, sympy) takes seconds to import, and plotting
libraries belong to the lab and the notebooks, not to the library.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc._checks import broadcast_shapes

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
import torch
before = set(sys.modules)
import posenc
after_import = set(sys.modules)
q = torch.randn(1, 2, 4, 8)
posenc.RotaryEmbedding(8)(q, q, torch.arange(4))
posenc.apply_rope(q, torch.arange(4))
posenc.apply_xpos(q, q, torch.arange(4))
posenc.T5RelativeBias(2)(3, 4)
posenc.SinusoidalPositionalEncoding(8)(q[0])
posenc.attention(q, q, q, bias=torch.zeros(4, 4))
after_use = set(sys.modules)
print(json.dumps({
    "import": sorted(after_import - before),
    "use": sorted(after_use - after_import),
}))
"""

# Heavy or optional packages that must never come in with posenc (numpy is left out: some
# torch versions import parts of it lazily in their own operations).
_HEAVY = (
    "torch._dynamo",
    "torch._inductor",
    "triton",
    "sympy",
    "matplotlib",
    "posenc_lab",
)


def _probe() -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in _HEAVY or m.startswith(_HEAVY)]


def test_import_posenc_adds_only_its_own_modules():
    probe = _probe()
    new = probe["import"]
    assert "posenc" in new  # the probe did import it fresh
    foreign = [m for m in new if m != "posenc" and not m.startswith("posenc.")]
    assert foreign == []


def test_eager_calls_do_not_import_the_compiler():
    # the first forward calls of the modules and functions stay in eager torch too
    assert _heavy(_probe()["use"]) == []


_SHAPES = [(), (1,), (3,), (0,), (2, 1), (1, 3), (2, 3), (4, 1, 3), (0, 1), (2, 0), (5, 2, 3)]


@pytest.mark.parametrize("a, b", list(itertools.product(_SHAPES, repeat=2)))
def test_plain_broadcast_equals_torch(a, b):
    # posenc checks shapes in plain Python: torch.broadcast_shapes imports sympy when first called
    try:
        expected = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        with pytest.raises(RuntimeError, match="do not broadcast"):
            broadcast_shapes(a, b)
    else:
        assert broadcast_shapes(a, b) == expected
