"""The fused Triton kernel of posenc.rope_triton against the eager apply_rope.

The kernel runs in Triton's interpreter on CPU tensors (``TRITON_INTERPRET=1``
when the module is imported), so these tests need no GPU; they are skipped
when Triton is not installed (``pip install posenc[triton]``). The
interpreter runs every program in Python: the shapes are tiny.

The kernel rotates in float32 with one product and one fused multiply-add
per output, as ``apply_rope``'s ``addcmul`` does, and rounds once to the
input's dtype; the outputs are compared within a few units of rounding of
``|a| + |b|`` (the size of the pair's terms), the passed-through features
exactly.
"""

from __future__ import annotations

import importlib
import os

import pytest
import torch

from posenc import RotaryEmbedding, YarnScaling, apply_rope, rope_frequencies

# posenc[triton] asks for Triton 3.9 or later: an older one (torch 2.3's own
# wheel brings 2.3) lacks what the kernel uses
pytest.importorskip(
    "triton", minversion="3.9", reason="Triton is not installed (pip install posenc[triton])"
)


def _import_interpreted():
    """posenc.rope_triton with its kernels built for the interpreter.

    Triton decides at ``@triton.jit`` time (the module's import) whether a
    kernel is compiled or interpreted, reading ``TRITON_INTERPRET``; the
    variable is set for that import only, so nothing else in this process
    sees it.
    """
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        module = importlib.import_module("posenc.rope_triton")
        from triton.runtime.interpreter import InterpretedFunction

        if not isinstance(module._rope_qk_kernel, InterpretedFunction):
            module = importlib.reload(module)  # imported earlier, compiled for a GPU
        return module
    finally:
        if saved is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = saved


rope_triton = _import_interpreted()
apply_rope_triton = rope_triton.apply_rope_triton

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
LAYOUTS = ["half", "interleaved"]


def tables(rotary_dim: int, n: int, layout: str = "half", scaling=None):
    """``cos`` and ``sin`` for positions ``0 .. n-1`` as the module caches them (strided views)."""
    rope = RotaryEmbedding(rotary_dim, max_positions=n, layout=layout, scaling=scaling)
    return rope.cos_cached, rope.sin_cached


def randn(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def pair_sizes(x: torch.Tensor, rotary_dim: int, layout: str) -> torch.Tensor:
    """``|a| + |b|`` of the pair each feature belongs to; 0 past ``rotary_dim``."""
    xr = x[..., :rotary_dim].double().abs()
    if layout == "half":
        a, b = xr.chunk(2, dim=-1)
        size = torch.cat((a + b, a + b), dim=-1)
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
        size = torch.stack((a + b, a + b), dim=-1).flatten(-2)
    return torch.cat((size, torch.zeros_like(x[..., rotary_dim:], dtype=torch.float64)), dim=-1)


def assert_rotation_close(actual, expected, x, rotary_dim, layout, factor=1.0):
    """Within ``3 u (|a| + |b|) factor`` (plus one ulp of a 16-bit output); the tail exactly.

    ``u`` is float32's unit roundoff: each output is a rounded product and
    one fused multiply-add of terms no larger than ``|a|`` and ``|b|``
    (``|cos|, |sin| <= factor``); two such results are at most a few
    roundings apart, and may then round to neighbouring 16-bit values.
    """
    assert actual.shape == expected.shape and actual.dtype == expected.dtype == x.dtype
    u = torch.finfo(torch.float32).eps / 2
    bound = 3 * u * factor * pair_sizes(x, rotary_dim, layout)
    if x.dtype != torch.float32:
        bound = bound + torch.finfo(x.dtype).eps * expected.double().abs()
    err = (actual.double() - expected.double()).abs()
    assert (err <= bound).all(), f"max excess {(err - bound).max().item():.3g}"
    assert torch.equal(actual[..., rotary_dim:], x[..., rotary_dim:])  # passed through


def reference(x, positions, rotary_dim, layout, scaling=None):
    """``apply_rope`` with positions ``(b, s)`` broadcast over the heads."""
    p = positions if positions.dim() == 1 else positions[:, None, :]
    return apply_rope(x, p, layout=layout, rotary_dim=rotary_dim, scaling=scaling)


# ---------------------------------------------------------------------------
# Every option against apply_rope
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [8, 6], ids=["full", "partial"])
def test_forward_equals_apply_rope(dtype, layout, rotary_dim):
    # GQA (4 query heads, 2 key heads), batched positions with a packed row
    # (two sequences in row 1: positions restart), tables read through strides
    b, n_q, n_k, s, h_d = 2, 4, 2, 5, 8
    q, k = randn((b, n_q, s, h_d), dtype, 1), randn((b, n_k, s, h_d), dtype, 2)
    positions = torch.tensor([[3, 4, 5, 6, 7], [0, 1, 2, 0, 1]])
    cos, sin = tables(rotary_dim, 16, layout)
    q_before, k_before = q.clone(), k.clone()
    rq, rk = apply_rope_triton(q, k, positions, cos, sin, layout=layout)
    assert torch.equal(q, q_before) and torch.equal(k, k_before)  # out of place
    for out, x in ((rq, q), (rk, k)):
        expected = reference(x, positions, rotary_dim, layout)
        assert_rotation_close(out, expected, x, rotary_dim, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_in_place_writes_into_q_and_k(layout):
    b, n_q, n_k, s, h_d, r = 1, 2, 1, 4, 8, 4
    q, k = randn((b, n_q, s, h_d), torch.bfloat16, 3), randn((b, n_k, s, h_d), torch.bfloat16, 4)
    positions = torch.tensor([9, 2, 0, 15])
    cos, sin = tables(r, 16, layout)
    expected_q = reference(q, positions, r, layout)
    expected_k = reference(k, positions, r, layout)
    q_in, k_in = q.clone(), k.clone()
    rq, rk = apply_rope_triton(q_in, k_in, positions, cos, sin, layout=layout, inplace=True)
    assert rq is q_in and rk is k_in
    assert_rotation_close(q_in, expected_q, q, r, layout)
    assert_rotation_close(k_in, expected_k, k, r, layout)
    # the rotation moved something, and the tail is untouched
    assert not torch.equal(q_in, q) and torch.equal(q_in[..., r:], q[..., r:])


def test_strided_views_as_hugging_face_makes_them():
    # q, k projected as (b, s, n_h, h_d) and transposed; positions (b, 1, s); a wider
    # head than the rotation; contiguous tables built directly from rope_frequencies
    b, s, n_q, n_k, h_d, r = 2, 3, 6, 3, 12, 8
    q = randn((b, s, n_q, h_d), torch.float32, 5).transpose(1, 2)
    k = randn((b, s, n_k, h_d), torch.float32, 6).transpose(1, 2)
    positions = torch.tensor([[[0, 1, 2]], [[7, 8, 9]]])  # (b, 1, s)
    angles = torch.arange(10, dtype=torch.float32)[:, None] * rope_frequencies(r)
    cos, sin = angles.cos(), angles.sin()
    rq, rk = apply_rope_triton(q, k, positions, cos, sin)
    for out, x in ((rq, q), (rk, k)):
        assert_rotation_close(out, apply_rope(x, positions, rotary_dim=r), x, r, "half")
    # in place on the views writes into the projected tensors
    q2, k2 = q.clone(), k.clone()
    apply_rope_triton(q2, k2, positions, cos, sin, inplace=True)
    assert torch.equal(q2, rq) and torch.equal(k2, rk)


def test_decode_step_and_scaling():
    # one token per row (a decode step) at different int32 positions, YaRN's attention
    # factor in the table: the kernel multiplies by what the table holds
    scaling = YarnScaling(4.0, 32)
    b, n_q, n_k, h_d = 3, 4, 4, 16
    q, k = randn((b, n_q, 1, h_d), torch.float32, 7), randn((b, n_k, 1, h_d), torch.float32, 8)
    positions = torch.tensor([[5], [100], [127]], dtype=torch.int32)
    cos, sin = tables(h_d, 128, "half", scaling)
    factor = RotaryEmbedding(h_d, scaling=scaling).attention_factor
    assert factor != 1.0
    rq, rk = apply_rope_triton(q, k, positions, cos, sin)
    for out, x in ((rq, q), (rk, k)):
        expected = reference(x, positions, h_d, "half", scaling)
        assert_rotation_close(out, expected, x, h_d, "half", factor)


def test_equals_the_module():
    # the tables of RotaryEmbedding, read by the kernel, give the module's result
    rope = RotaryEmbedding(8, max_positions=32, layout="interleaved")
    q, k = randn((1, 2, 6, 8), torch.float16, 9), randn((1, 1, 6, 8), torch.float16, 10)
    positions = torch.tensor([31, 0, 4, 4, 17, 2])
    mq, mk = rope(q, k, positions)
    rq, rk = apply_rope_triton(
        q, k, positions, rope.cos_cached, rope.sin_cached, layout="interleaved"
    )
    assert_rotation_close(rq, mq, q, 8, "interleaved")
    assert_rotation_close(rk, mk, k, 8, "interleaved")


def test_positions_outside_the_table_give_nan_without_the_check():
    cos, sin = tables(4, 8)
    q, k = randn((1, 2, 3, 4), torch.float32, 11), randn((1, 1, 3, 4), torch.float32, 12)
    positions = torch.tensor([1, 8, -1])  # 8 and -1 lie outside [0, 8)
    rq, rk = apply_rope_triton(q, k, positions, cos, sin, check_positions=False)
    assert rq[:, :, 1:].isnan().all() and rk[:, :, 1:].isnan().all()
    expected = apply_rope(q[:, :, :1], positions[:1])
    assert_rotation_close(rq[:, :, :1], expected, q[:, :, :1], 4, "half")


def test_bfloat16_rounds_to_nearest_even():
    # with q = 1 and sin = 0 the kernel's float32 results are the table's values, so the
    # output shows how they round: at, above and below midpoints between bfloat16
    # neighbours (1 + 2**-8 lies halfway between 1 and 1 + 2**-7), a carry into the
    # exponent, a subnormal, inf and nan; torch's .to(bfloat16) rounds to nearest even
    values = torch.tensor(
        [
            *(1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 1 + 2**-8 - 2**-20, 2 - 2**-23),
            *(-(2.0**-130), float("inf"), float("nan")),
        ]
    )
    ones = torch.ones(1, 1, 1, 16, dtype=torch.bfloat16)
    cos, sin = values.view(1, 8), torch.zeros(1, 8)
    rq, _ = apply_rope_triton(ones, ones.clone(), torch.tensor([0]), cos, sin)
    expected = torch.cat((values, values)).to(torch.bfloat16)  # [a'; b'] = [x; x]
    finite = ~expected.isnan()  # NaN payloads differ (torch gives 0xFFFF): compare as NaN
    assert torch.equal(rq.view(-1)[finite].view(torch.int16), expected[finite].view(torch.int16))
    assert torch.equal(rq.view(-1).isnan(), ~finite)
    assert expected[:5].tolist() == [1.0, 1 + 2**-6, 1 + 2**-7, 1.0, 2.0]  # what was checked


# ---------------------------------------------------------------------------
# Backward: the gradient rotated by -theta, as autograd finds it through apply_rope
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_equals_autograd_of_apply_rope(layout):
    b, n_q, n_k, s, h_d, r = 2, 2, 1, 3, 8, 6
    positions = torch.tensor([[0, 5, 9], [2, 0, 1]])
    cos, sin = tables(r, 10, layout)
    q0, k0 = randn((b, n_q, s, h_d), torch.float32, 13), randn((b, n_k, s, h_d), torch.float32, 14)
    gq, gk = randn(q0.shape, torch.float32, 15), randn(k0.shape, torch.float32, 16)

    q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
    rq, rk = apply_rope_triton(q, k, positions, cos, sin, layout=layout)
    ((rq * gq).sum() + (rk * gk).sum()).backward()

    qe, ke = q0.clone().requires_grad_(), k0.clone().requires_grad_()
    eq, ek = reference(qe, positions, r, layout), reference(ke, positions, r, layout)
    ((eq * gq).sum() + (ek * gk).sum()).backward()
    assert_rotation_close(q.grad, qe.grad, gq, r, layout)
    assert_rotation_close(k.grad, ke.grad, gk, r, layout)


def test_backward_through_one_output_only():
    # autograd hands a zero gradient for the unused output; k's gradient is then zero
    cos, sin = tables(4, 4)
    q = randn((1, 1, 2, 4), torch.float32, 17).requires_grad_()
    k = randn((1, 1, 2, 4), torch.float32, 18).requires_grad_()
    rq, _ = apply_rope_triton(q, k, torch.tensor([0, 3]), cos, sin)
    rq.sum().backward()
    assert torch.equal(k.grad, torch.zeros_like(k))
    expected = torch.autograd.grad(apply_rope(q, torch.tensor([0, 3])).sum(), q)[0]
    assert_rotation_close(q.grad, expected, torch.ones_like(q), 4, "half")


# ---------------------------------------------------------------------------
# Bad input: a ValueError or TypeError that names the argument
# ---------------------------------------------------------------------------


def _args(**change):
    cos, sin = tables(4, 8)
    args = {
        "q": torch.zeros(1, 2, 3, 8),
        "k": torch.zeros(1, 1, 3, 8),
        "positions": torch.arange(3),
        "cos": cos,
        "sin": sin,
    }
    args.update(change)
    return args


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"q": torch.zeros(2, 3, 8)}, "q must have 4 dimensions"),
        ({"q": torch.zeros(1, 2, 3, 8, dtype=torch.float64)}, "q must be float32, bfloat16"),
        ({"k": torch.zeros(1, 1, 3, 8, dtype=torch.float16)}, "k must have q's dtype"),
        ({"q": torch.zeros(1, 2, 3, 16)[..., ::2]}, "q must be contiguous in its last"),
        ({"k": torch.zeros(1, 1, 4, 8)}, "k must have q's batch, sequence and head size"),
        ({"k": torch.zeros(1, 3, 3, 8), "q": torch.zeros(1, 4, 3, 8)}, "key heads must divide"),
        ({"cos": torch.zeros(8, 2, dtype=torch.float64)}, "cos must be a float32 table"),
        ({"sin": torch.zeros(8)}, "sin must be a float32 table"),
        ({"sin": torch.zeros(9, 2)}, "sin must have cos's shape"),
        ({"cos": torch.zeros(8, 5), "sin": torch.zeros(8, 5)}, r"cos.shape\[1\] \(r/2\) must be"),
        ({"cos": torch.zeros(0, 2), "sin": torch.zeros(0, 2)}, "at least one row"),
        ({"positions": torch.arange(3.0)}, "positions must be an int64 or int32"),
        ({"positions": torch.arange(4)}, r"positions must have shape \(s,\)"),
        ({"positions": torch.zeros(2, 3, dtype=torch.long)}, r"positions must have shape"),
        ({"positions": torch.tensor([0, 1, 8])}, r"positions must lie in \[0, 8\)"),
        ({"positions": torch.tensor([-1, 1, 2])}, r"got values in \[-1, 2\]"),
        ({"positions": torch.arange(3, device="meta")}, "positions must be on q's device"),
        ({"cos": torch.zeros(8, 2, requires_grad=True)}, "cos must not require grad"),
    ],
)
def test_bad_input_names_the_argument(change, message):
    with pytest.raises(ValueError, match=message):
        apply_rope_triton(**_args(**change))


def test_bad_options():
    with pytest.raises(ValueError, match="layout must be one of 'half', 'interleaved'"):
        apply_rope_triton(**_args(), layout="neox")
    with pytest.raises(TypeError, match="inplace must be a bool"):
        apply_rope_triton(**_args(), inplace=1)
    with pytest.raises(TypeError, match="check_positions must be a bool"):
        apply_rope_triton(**_args(), check_positions="no")
    with pytest.raises(TypeError, match=r"q must be a torch\.Tensor"):
        apply_rope_triton(**_args(q=[1.0]))
    q = torch.zeros(1, 2, 3, 8)
    with pytest.raises(ValueError, match="inplace=True needs distinct q and k"):
        apply_rope_triton(**_args(q=q, k=q), inplace=True)
    with pytest.raises(ValueError, match="inplace=True cannot be used while autograd"):
        apply_rope_triton(**_args(q=q.requires_grad_()), inplace=True)


# ---------------------------------------------------------------------------
# The same kernel through Triton's compiler for NVIDIA GPUs (no GPU needed)
# ---------------------------------------------------------------------------

_COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from posenc import rope_triton

fn = rope_triton._rope_qk_kernel
element = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
found = {}
for arch, dtype, layout, tail, backward in json.loads(sys.argv[1]):
    signature = {}
    for name in fn.arg_names:
        if name in ("q", "k", "q_out", "k_out"):
            signature[name] = "*" + element[dtype]
        elif name == "positions":
            signature[name] = "*i64"
        elif name in ("cos", "sin"):
            signature[name] = "*fp32"
        elif name.isupper():
            signature[name] = "constexpr"
        else:
            signature[name] = "i64"
    constants = dict(
        HALF=64, HALF_P2=64, TAIL=tail, TAIL_P2=max(tail, 1), BLOCK_H=16,
        INTERLEAVED=layout == "interleaved", COPY_TAIL=tail > 0, BACKWARD=backward,
    )
    source = ASTSource(
        fn=fn,
        signature=signature,
        constexprs={(fn.arg_names.index(k),): v for k, v in constants.items()},
    )
    kernel = triton.compile(
        source, target=GPUTarget("cuda", arch, 32), options={"enable_fp_fusion": False}
    )
    ptx = kernel.asm["ptx"]
    found[f"{arch}-{dtype}-{layout}-{tail}-{backward}"] = {
        "cubin": len(kernel.asm["cubin"]),
        "fma_f32": len(re.findall(r"\bfma\.rn\.f32\b", ptx)),
        "f64": len(re.findall(r"\.f64\b", ptx)),
    }
import torch

try:  # compiled for a GPU, the kernel refuses CPU tensors with a named error
    rope_triton.apply_rope_triton(
        torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([0]),
        torch.ones(1, 2), torch.zeros(1, 2),
    )
except ValueError as error:
    found["cpu_error"] = str(error)
print(json.dumps(found))
"""


def test_kernel_compiles_for_nvidia_gpus(tmp_path):
    # Triton's own compiler, run without a GPU, turns every variant into PTX and a cubin
    # (its bundled ptxas): the launch path the interpreter skips. The arithmetic is
    # float32 fused multiply-adds, with no float64 instruction.
    import json
    import subprocess
    import sys

    variants = [  # (arch, dtype, layout, features past r, backward)
        (90, "float32", "half", 0, False),
        (90, "bfloat16", "half", 0, False),
        (90, "float16", "interleaved", 0, False),
        (90, "bfloat16", "interleaved", 32, True),
        (80, "bfloat16", "half", 64, False),
    ]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # compile afresh
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE, json.dumps(variants)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("cpu_error").startswith("q must be on a GPU for the compiled kernel")
    assert len(found) == len(variants)
    for name, asm in found.items():
        assert asm["cubin"] > 0, name
        assert asm["fma_f32"] >= 2, name  # a' and b', unrolled over the tile
        assert asm["f64"] == 0, name
