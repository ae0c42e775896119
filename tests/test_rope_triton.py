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
import re

import numpy as np
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


def test_several_head_blocks_with_a_partial_last_one():
    # at head size 128 a block holds at most 64 heads (_TILE = 4096 elements per half), so
    # 96 query heads take two steps of the head loop, the second with 32 of its 64 rows
    # masked; the 32 key heads take one block of their own, and the second step's k block
    # is masked whole
    b, n_q, n_k, s, h_d = 1, 96, 32, 2, 128
    q, k = randn((b, n_q, s, h_d), torch.bfloat16, 19), randn((b, n_k, s, h_d), torch.bfloat16, 20)
    positions = torch.tensor([7, 300])
    cos, sin = tables(h_d, 512)
    grid, _, options = rope_triton._kernel_args(
        q, k, q, k, positions, cos, sin, "half", inplace=False, backward=False
    )
    assert grid == (b * s,) and (options["BLOCK_Q"], options["BLOCK_K"]) == (64, 32)
    rq, rk = apply_rope_triton(q, k, positions, cos, sin)
    for out, x in ((rq, q), (rk, k)):
        assert_rotation_close(out, reference(x, positions, h_d, "half"), x, h_d, "half")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_llama_3_8b_heads_in_their_blocks_equal_apply_rope(dtype):
    # the setting the compile test and the byte count examine: 32 query heads in one block
    # of 32, 8 key heads in one block of 8, head size 128, packed positions
    b, n_q, n_k, s, h_d = 1, 32, 8, 3, 128
    q, k = randn((b, n_q, s, h_d), dtype, 27), randn((b, n_k, s, h_d), dtype, 28)
    positions = torch.tensor([4095, 0, 17])
    cos, sin = tables(h_d, 4096)
    _, _, options = rope_triton._kernel_args(
        q, k, q, k, positions, cos, sin, "half", inplace=False, backward=False
    )
    assert (options["BLOCK_Q"], options["BLOCK_K"]) == (32, 8)
    rq, rk = apply_rope_triton(q, k, positions, cos, sin)
    for out, x in ((rq, q), (rk, k)):
        assert_rotation_close(out, reference(x, positions, h_d, "half"), x, h_d, "half")


def _lanes_moved(launch):
    """Bytes that ``launch()`` loads and stores in the interpreter: ``(asked, issued)``.

    ``asked`` counts the lanes a mask lets through, ``issued`` every lane of
    every ``tl.load`` and ``tl.store``, masked or not (a masked lane moves
    nothing, but it occupies a thread). Neither sees how a GPU groups lanes
    into 32-byte sectors.
    """
    from triton.runtime.interpreter import InterpreterBuilder

    load, store = InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store
    moved = {"asked": 0, "issued": 0}
    lanes = _lanes_moved.lanes = []  # (addresses let through, bytes each), for _bytes_of

    def count(ptrs, mask):
        size = ptrs.get_element_ty().primitive_bitwidth // 8
        through = np.broadcast_to(mask.data, ptrs.data.shape)
        moved["asked"] += int(through.sum()) * size
        moved["issued"] += ptrs.data.size * size
        lanes.append((ptrs.data[through].astype(np.uint64), size))

    def counted_load(self, ptrs, mask, *rest):
        count(ptrs, mask)
        return load(self, ptrs, mask, *rest)

    def counted_store(self, ptrs, value, mask, *rest):
        count(ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    InterpreterBuilder.create_masked_load = counted_load
    InterpreterBuilder.create_masked_store = counted_store
    try:
        launch()
    finally:
        InterpreterBuilder.create_masked_load = load
        InterpreterBuilder.create_masked_store = store
    return moved["asked"], moved["issued"]


def _bytes_of(tensor: torch.Tensor) -> int:
    """Bytes the last :func:`_lanes_moved` requested inside ``tensor``'s storage."""
    start = tensor.untyped_storage().data_ptr()
    end = start + tensor.untyped_storage().nbytes()
    return sum(int(((at >= start) & (at < end)).sum()) * size for at, size in _lanes_moved.lanes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_bytes_requested_per_element_are_the_fused_formula(dtype):
    # Llama 3 8B's heads: per element of q and k, one read and one write (2e bytes) plus the
    # token's table row (r/2 cos and r/2 sin in float32) and its int64 position, shared by
    # its 40 heads: 2e + (4r + 8) / ((n_q + n_k) d). No lane is masked: the 8 key heads get
    # a block of 8, not one sized for the 32 query heads.
    n_q, n_k, d, tokens = 32, 8, 128, 4
    q, k = randn((1, n_q, tokens, d), dtype, 21), randn((1, n_k, tokens, d), dtype, 22)
    cos, sin = tables(d, 16)
    positions = torch.tensor([3, 0, 9, 15])
    out = []
    asked, issued = _lanes_moved(lambda: out.extend(apply_rope_triton(q, k, positions, cos, sin)))
    per_element = asked / (q.numel() + k.numel())
    assert per_element == 2 * dtype.itemsize + (4 * d + 8) / ((n_q + n_k) * d)
    assert issued == asked
    # by tensor (a total alone would hold for any kernel that requests each lane once):
    # q and k read once and written once, the row once per token, not once per head
    # block or per tensor (cos and sin share one storage), and the position: 8 bytes
    assert _bytes_of(q) == q.nbytes and _bytes_of(k) == k.nbytes
    assert _bytes_of(out[0]) == q.nbytes and _bytes_of(out[1]) == k.nbytes
    assert _bytes_of(cos) == tokens * d * 4  # r/2 cosines and r/2 sines, float32
    assert asked - 2 * (q.nbytes + k.nbytes) - tokens * d * 4 == tokens * 8
    # 24 query heads in a block of 32 and 6 key heads in a block of 8: 8 + 2 masked rows on
    # every load and store (each row: both halves read and written)
    q24, k6 = randn((1, 24, tokens, d), dtype, 23), randn((1, 6, tokens, d), dtype, 24)
    asked, issued = _lanes_moved(lambda: apply_rope_triton(q24, k6, positions, cos, sin))
    assert issued - asked == (8 + 2) * tokens * 2 * d * dtype.itemsize


@pytest.mark.parametrize(
    ("check_positions", "inplace", "breaks"),
    [(False, False, None), (True, False, "data-dependent"), (False, True, "Data pointer")],
)
def test_the_wrapper_traces_under_torch_compile_only_without_host_reads(
    monkeypatch, check_positions, inplace, breaks
):
    # Dynamo traces apply_rope_triton's own Python (the checks) with check_positions=False
    # out of place; the default reads the positions' range back (data-dependent) and
    # inplace=True compares data pointers: both break the graph. The launch is stood in
    # for (a copy): Triton's interpreter is not traceable, and whether Dynamo captures the
    # compiled kernel's launch needs a GPU.
    def stand_in(q, k, q_out, k_out, *args, **kwargs):
        q_out.copy_(q)
        k_out.copy_(k)

    monkeypatch.setattr(rope_triton, "_launch", stand_in)
    cos, sin = tables(8, 16)
    q, k = randn((1, 2, 3, 8), torch.float32, 25), randn((1, 1, 3, 8), torch.float32, 26)

    def rotate(q, k, p):
        return apply_rope_triton(
            q, k, p, cos, sin, check_positions=check_positions, inplace=inplace
        )

    torch._dynamo.reset()
    compiled = torch.compile(rotate, fullgraph=True, backend="eager")
    try:
        if breaks is None:
            rq, rk = compiled(q, k, torch.arange(3))
            assert torch.equal(rq, q) and torch.equal(rk, k)  # the stand-in ran
        else:
            errors = (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError)
            with pytest.raises(errors, match=breaks):
                compiled(q, k, torch.arange(3))
    finally:
        torch._dynamo.reset()


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
import json, os, re, subprocess, sys, tempfile
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend, get_ptxas, sm_arch_from_capability
from triton.compiler import ASTSource
from triton.runtime.jit import create_function_from_signature
from posenc import RotaryEmbedding, rope_triton

fn = rope_triton._rope_qk_kernel
found = {}
for arch, dtype, layout, n_q, n_k, h_d, r, inplace, backward in json.loads(sys.argv[1]):
    # apply_rope_triton's launch at these shapes, specialised as Triton's launcher does it
    # (integers divisible by 16 and 16-byte aligned pointers marked, integers equal to 1
    # made constants); CPU tensors stand in: only dtypes, strides and alignment matter
    dt = getattr(torch, dtype)
    q, k = torch.empty(1, n_q, 16, h_d, dtype=dt), torch.empty(1, n_k, 16, h_d, dtype=dt)
    rope = RotaryEmbedding(r, max_positions=64)
    positions = rope_triton._check_positions(torch.arange(16), 1, 16)
    outs = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))
    grid, args, options = rope_triton._kernel_args(
        q, k, *outs, positions, rope.cos_cached, rope.sin_cached, layout,
        inplace=inplace, backward=backward,
    )
    target = GPUTarget("cuda", arch, 32)
    backend = CUDABackend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, opts = binder(*args, **options)
    opts, signature, constexprs, attrs = fn._pack_args(backend, options, bound, specialization, opts)
    kernel = triton.compile(
        ASTSource(fn, signature, constexprs, attrs), target=target, options=opts.__dict__
    )
    ptx = kernel.asm["ptx"]
    with tempfile.TemporaryDirectory() as tmp:  # ptxas -v: registers and spills
        with open(f"{tmp}/k.ptx", "w") as f:
            f.write(ptx)
        done = subprocess.run(
            [get_ptxas(arch).path, "-v", "--fmad=false",
             f"--gpu-name={sm_arch_from_capability(arch)}", f"{tmp}/k.ptx", "-o", f"{tmp}/k.o"],
            capture_output=True, text=True,
        )
        assert done.returncode == 0, done.stderr
        # the SASS of the cubin Triton made, read with the cuobjdump its wheel ships
        with open(f"{tmp}/k.cubin", "wb") as f:
            f.write(kernel.asm["cubin"])
        cuobjdump = os.path.join(os.path.dirname(get_ptxas(arch).path), "cuobjdump")
        sass = subprocess.run(
            [cuobjdump, "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True
        )
        assert sass.returncode == 0, sass.stderr
    found[f"{arch}-{dtype}-{layout}-{n_q}/{n_k}x{h_d}-r{r}-{inplace}-{backward}"] = {
        "layout": layout,
        "dtype": dtype,
        "bits": dt.itemsize * 8,
        "options": {k: v for k, v in options.items() if isinstance(v, (int, bool))},
        "num_warps": opts.num_warps,
        "cubin": len(kernel.asm["cubin"]),
        "ptx": ptx,
        "fma_f32": len(re.findall(r"\bfma\.rn\.f32\b", ptx)),
        "mul_f32": len(re.findall(r"\bmul\.rn\.f32\b", ptx)),
        "f64": len(re.findall(r"\.f64\b", ptx)),
        "cvt_bf16": len(re.findall(r"\bcvt\.rn\.bf16", ptx)),
        "registers": int(re.search(r"Used (\d+) registers", done.stderr).group(1)),
        "spills": sum(int(n) for n in re.findall(r"(\d+) bytes spill", done.stderr)),
        "sass": sass.stdout,
    }

try:  # compiled for a GPU, the kernel refuses CPU tensors with a named error
    rope_triton.apply_rope_triton(
        torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([0]),
        torch.ones(1, 2), torch.zeros(1, 2),
    )
except ValueError as error:
    found["cpu_error"] = str(error)
print(json.dumps(found))
"""


#: The kernel's pointer arguments, in the order of its signature.
_POINTERS = ("q", "k", "q_out", "k_out", "positions", "cos", "sin")


def _memory_accesses(ptx: str) -> dict[str, dict]:
    """Every global load and store of ``ptx``, by the pointer argument its address comes from.

    A small dataflow pass over the PTX registers: ``ld.param`` of pointer
    argument ``i`` labels its register with ``_POINTERS[i]``, every other
    instruction passes the labels of its sources to its destinations, and a
    loaded register is labelled with the tensor it was loaded from (a few
    passes reach the fixed point through the loops). Returns, per tensor,
    ``ld`` and ``st``: ``{bits per instruction: count}``; ``first``: the
    index of its first access in program order; ``after``: the tensors whose
    loaded values its addresses depend on.
    """
    code = []
    for line in ptx.splitlines():
        line = line.split("//")[0].strip().rstrip(";").strip()
        if not line or line[0] in ".${}":
            continue
        line = re.sub(r"^@!?%\w+\s+", "", line)  # the predicate of a masked access
        op, _, rest = line.partition(" ")
        code.append((op, [o.strip() for o in re.split(r",(?![^{\[]*[}\]])", rest)]))
    labels: dict[str, set] = {}

    def of(operand: str) -> set:
        return set().union(*(labels.get(r, set()) for r in re.findall(r"%\w+", operand)))

    found: dict[str, dict] = {}
    for final in (False, False, False, True):
        for n, (op, ops) in enumerate(code):
            if op.startswith("ld.param"):
                i = int(re.search(r"param_(\d+)", ops[1]).group(1))
                if i < len(_POINTERS):
                    labels.setdefault(ops[0], set()).add(("pointer", _POINTERS[i]))
            elif op.startswith(("ld.global", "st.global")):
                kind = op[:2]
                address = of(ops[-1] if kind == "ld" else ops[0])
                (tensor,) = {name for how, name in address if how == "pointer"}
                if kind == "ld":
                    for r in re.findall(r"%\w+", ops[0]):
                        labels.setdefault(r, set()).add(("value", tensor))
                if final:
                    vector = re.search(r"\.v(\d)\.", op)
                    bits = int(re.search(r"(\d+)$", op).group(1)) * (
                        int(vector[1]) if vector else 1
                    )
                    entry = found.setdefault(
                        tensor, {"ld": {}, "st": {}, "first": n, "after": set()}
                    )
                    entry[kind][bits] = entry[kind].get(bits, 0) + 1
                    entry["after"] |= {name for how, name in address if how == "value"}
            elif ops[0] and not op.startswith(("bra", "ret", "bar")):
                src = set().union(*(of(o) for o in ops[1:]))
                for r in re.findall(r"%\w+", ops[0]):
                    labels.setdefault(r, set()).update(src)
    return found


def test_memory_accesses_follow_the_registers_to_the_pointer():
    # a hand-written kernel: a position loaded through argument 4, a table row whose
    # address depends on it (argument 5), then a vector load of q and a store to q_out
    ptx = """
    ld.param.b64 %rd1, [_rope_qk_kernel_param_4];
    ld.global.b64 { %rd2 }, [ %rd1 + 0 ];
    ld.param.b64 %rd3, [_rope_qk_kernel_param_5];
    shl.b64 %rd4, %rd2, 8;
    add.s64 %rd5, %rd3, %rd4;
    @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd5 + 0 ];
    ld.param.b64 %rd6, [_rope_qk_kernel_param_0];
    ld.param.b64 %rd7, [_rope_qk_kernel_param_2];
    $L__BB0_1:
    add.s64 %rd8, %rd6, %rd9;
    @%p2 ld.global.v2.b32 { %r5, %r6 }, [ %rd8 + 0 ];
    add.s64 %rd10, %rd7, %rd9;
    st.global.b16 [ %rd10 + 0 ], %rs1;
    add.s64 %rd9, %rd9, 128;
    @%p3 bra $L__BB0_1;
    """
    found = _memory_accesses(ptx)
    assert found["positions"] == {"ld": {64: 1}, "st": {}, "first": 1, "after": set()}
    assert found["cos"]["ld"] == {128: 1} and found["cos"]["after"] == {"positions"}
    assert found["q"]["ld"] == {64: 1} and found["q"]["after"] == set()
    assert found["q_out"]["st"] == {16: 1} and set(found) == {"positions", "cos", "q", "q_out"}


def _sass_accesses(sass: str) -> dict[str, dict[int, int]]:
    """Global loads and stores of ``sass`` (``cuobjdump -sass``): ``{"ld"|"st": {bits: count}}``.

    ``LDG.E.128`` moves 128 bits, ``LDG.E.64`` 64, ``LDG.E.U16`` 16, a plain
    ``LDG.E`` 32. Static instructions, as in the PTX: a loop's body counts once.
    """
    found: dict[str, dict[int, int]] = {"ld": {}, "st": {}}
    for op in re.findall(r"\b((?:LDG|STG)(?:\.[A-Z0-9_]+)*)", sass):
        kind = "ld" if op.startswith("LDG") else "st"
        widths = re.findall(r"\.(?:[US])?(8|16|32|64|128)\b", op)
        bits = int(widths[-1]) if widths else 32
        found[kind][bits] = found[kind].get(bits, 0) + 1
    return found


def test_sass_accesses_read_the_width_of_each_instruction():
    sass = """
        /*0320*/   LDG.E.64 R2, desc[UR20][R2.64] ;
        /*0680*/   @P0 LDG.E.128 R4, desc[UR20][R30.64] ;
        /*1020*/   @!P1 STG.E.128 desc[UR20][R40.64], R36 ;
        /*18c0*/   @!P0 LDG.E.U16 R10, desc[UR20][R6.64] ;
        /*18d0*/   LDG.E R16, desc[UR20][R6.64+0x80] ;
        /*1b70*/   @!P0 STG.E.U16 desc[UR20][R4.64], R8 ;
    """
    assert _sass_accesses(sass) == {"ld": {64: 1, 128: 1, 16: 1, 32: 1}, "st": {128: 1, 16: 1}}


def _expected_widths(asm: dict, block: int) -> dict[int, int]:
    """Instructions per thread, by bits, for one step of the head loop.

    The ``num_warps * 32`` threads share a ``block`` x ``HALF_P2`` tile of
    each half in the half layout, one ``block`` x ``2 * HALF_P2`` tile of the
    pairs in the interleaved one (and a tile of the copied tail), each thread a
    contiguous run of it, moved in the widest access up to 128 bits: at Llama 3
    8B's 8 key heads, 4 bfloat16 values of each half, 64 bits; 8 interleaved, 128.
    """
    o, threads = asm["options"], asm["num_warps"] * 32
    pairs = [o["HALF_P2"]] * 2 if asm["layout"] == "half" else [2 * o["HALF_P2"]]
    parts = pairs + ([o["TAIL_P2"]] if o["COPY_TAIL"] else [])
    widths: dict[int, int] = {}
    for width in parts:
        run = block * width * asm["bits"] // threads  # bits per thread
        bits = min(128, run)
        widths[bits] = widths.get(bits, 0) + run // bits
    return widths


def test_kernel_compiles_for_nvidia_gpus(tmp_path):
    # Triton's own compiler, run without a GPU, turns the kernel into PTX and a cubin (its
    # bundled ptxas) as apply_rope_triton launches it: the path the interpreter skips.
    # Every global load and store of the PTX is traced to its tensor (_memory_accesses),
    # and the SASS that ptxas made of it (cuobjdump, shipped in Triton's wheel) moves at the
    # same widths (ptxas may unroll a loop and repeat them): the half layout moves each thread's run
    # of a half-row in one access of up to 128 bits (LDG/STG.E.128), so q's block of 32
    # heads gets 128 bits and k's block of 8 heads 64 bits in bfloat16 (4 values a
    # thread), 128 in float32; the interleaved layout loads each head's pairs as one
    # contiguous run and splits them in registers: 128-bit accesses for q and k alike.
    # k's loads come before q's stores in program order, in the PTX and in the SASS. The
    # table row's address depends on the position just loaded (a dependent round trip),
    # q's and k's depend on no load. When the loads issue is the scheduler's business: at
    # 4 warps this build issues q's with the row and k's only after the first multiply that
    # uses the row (pinned below: a schedule, not a bound). The arithmetic is one float32
    # product and one fused multiply-add per output, no float64; bfloat16 is rounded by
    # the hardware's cvt.rn (the integer rounding is the interpreter's only); at 4 warps
    # nothing spills.
    import json
    import subprocess
    import sys

    variants = [  # (arch, dtype, layout, n_q, n_k, h_d, r, inplace, backward)
        (90, "bfloat16", "half", 32, 8, 128, 128, False, False),  # Llama 3 8B
        (90, "float32", "half", 32, 8, 128, 128, False, False),
        (90, "bfloat16", "interleaved", 32, 8, 128, 128, False, False),
        (90, "float32", "interleaved", 32, 8, 128, 128, False, False),
        (90, "float16", "interleaved", 32, 8, 128, 128, True, False),
        (90, "bfloat16", "interleaved", 32, 8, 128, 96, False, True),  # partial, backward
        (80, "bfloat16", "half", 32, 8, 128, 64, False, False),  # half the head rotated
        (90, "bfloat16", "half", 28, 4, 96, 96, False, False),  # r/2 = 48, padded to 64
    ]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # compile afresh
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE, json.dumps(variants)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("cpu_error").startswith("q must be on a GPU for the compiled kernel")
    assert len(found) == len(variants)
    llama = {d: found[f"90-{d}-half-32/8x128-r128-False-False"] for d in ("bfloat16", "float32")}
    assert [llama["bfloat16"]["options"][b] for b in ("BLOCK_Q", "BLOCK_K")] == [32, 8]
    for name, asm in found.items():
        o, threads = asm["options"], asm["num_warps"] * 32
        assert asm["cubin"] > 0 and asm["num_warps"] == 4, name
        # one product and one fused multiply-add per output, over both tiles' lanes
        outputs = (o["BLOCK_Q"] + o["BLOCK_K"]) * o["HALF_P2"] * 2 // threads
        assert asm["fma_f32"] == asm["mul_f32"] == outputs, name
        assert asm["f64"] == 0 and asm["spills"] == 0, name
        assert (asm["cvt_bf16"] > 0) == (asm["dtype"] == "bfloat16"), name
        acc = _memory_accesses(asm["ptx"])
        assert acc["positions"]["ld"] == {64: 1}, name  # one int64 per token
        for table in ("cos", "sin"):  # the row's address needs the position: a round trip
            assert acc[table]["after"] == {"positions"} and not acc[table]["st"], name
        for t in ("q", "k", "q_out", "k_out"):
            assert acc[t]["after"] == set(), name  # q's and k's addresses need no load
        # the SASS moves memory at the widths the PTX asks for: no access split into
        # narrower ones (ptxas may unroll a loop, repeating its accesses: counts may grow)
        sass = _sass_accesses(asm["sass"])
        for kind in ("ld", "st"):
            ptx_bits = {bits for entry in acc.values() for bits in entry[kind]}
            assert set(sass[kind]) == ptx_bits, (name, kind, sass)
        for t, kind, block in (
            ("q", "ld", "BLOCK_Q"),
            ("k", "ld", "BLOCK_K"),
            ("q_out", "st", "BLOCK_Q"),
            ("k_out", "st", "BLOCK_K"),
        ):
            if o["TAIL"] == 0 or not o["COPY_TAIL"]:
                assert acc[t][kind] == _expected_widths(asm, o[block]), (name, t)
        # k's loads are issued before q's stores (both tiles loaded, then both stored):
        # they wait for no store, which the compiler could not reorder (q_out may alias k)
        assert acc["k"]["first"] < acc["q_out"]["first"], name
        if not o["COPY_TAIL"]:  # in the SASS too: every load of the step before any store
            lines = asm["sass"].splitlines()
            loads = [i for i, line in enumerate(lines) if re.search(r"\bLDG\b", line)]
            stores = [i for i, line in enumerate(lines) if re.search(r"\bSTG\b", line)]
            assert max(loads) < min(stores), name
    # with both tiles held at once, a thread needs at most 64 registers in bfloat16 (8
    # programs of 128 threads fit an SM's 65,536), 72 in float32 (7 programs)
    for dtype, most in (("bfloat16", 64), ("float32", 72)):
        for layout in ("half", "interleaved"):
            asm = found[f"90-{dtype}-{layout}-32/8x128-r128-False-False"]
            assert asm["registers"] <= most, (dtype, layout, asm["registers"])
    # Llama 3 8B in bfloat16, in SASS: the position (64 bits), the row (3 x 128 bits of
    # cos and of sin), q (4 loads, 4 stores of 128 bits), k (2 and 2 of 64 bits)
    assert _sass_accesses(llama["bfloat16"]["sass"]) == {
        "ld": {64: 1 + 2, 128: 6 + 4},
        "st": {128: 4, 64: 2},
    }
    # the order this build issues them in (ptxas's schedule at 4 warps, not a data
    # dependence: k's addresses need no load): before the first multiply that uses the
    # row, the position and the 128-bit loads of q and of the row; k's two 64-bit loads
    # only after it, a third round trip (the chapter's decode chain)
    lines = llama["bfloat16"]["sass"].splitlines()
    first_mul = next(i for i, line in enumerate(lines) if re.search(r"\b(FMUL|FFMA)\b", line))
    before = _sass_accesses("\n".join(lines[:first_mul]))["ld"]
    after = _sass_accesses("\n".join(lines[first_mul:]))["ld"]
    assert before.get(64) == 1 and before.get(128, 0) >= 4 + 2, before  # position; q, row
    assert after.get(64) == 2, after  # k
    # in float32 (q's and k's loads all 128 bits) ptxas issues every load before the
    # first multiply: two round trips, the data's own (the position, then the row)
    lines = llama["float32"]["sass"].splitlines()
    first_mul = next(i for i, line in enumerate(lines) if re.search(r"\b(FMUL|FFMA)\b", line))
    assert _sass_accesses("\n".join(lines[first_mul:]))["ld"] == {}, "float32: a load after"
    q, k = llama["bfloat16"]["ptx"], llama["float32"]["ptx"]
    assert _memory_accesses(q)["q"]["ld"] == {128: 4} and _memory_accesses(q)["k"]["ld"] == {64: 2}
    assert _memory_accesses(k)["k"]["ld"] == {128: 2}
    # each thread loads its columns of the table row in the layouts of both tiles:
    # 128 threads x 3 x 16 bytes = 6 KiB of cos (and of sin) for a 256-byte row
    assert _memory_accesses(q)["cos"]["ld"] == _memory_accesses(q)["sin"]["ld"] == {128: 3}
    for dtype in ("bfloat16", "float32"):  # instructions per byte of q and of k
        half = _memory_accesses(llama[dtype]["ptx"])
        inter = _memory_accesses(found[f"90-{dtype}-interleaved-32/8x128-r128-False-False"]["ptx"])
        for t in ("q", "k", "q_out", "k_out"):
            kind = "ld" if t in ("q", "k") else "st"
            per_byte = {
                how: sum(n for n in acc.values()) / sum(b * n for b, n in acc.items())
                for how, acc in (("half", half[t][kind]), ("interleaved", inter[t][kind]))
            }
            # the interleaved pairs, loaded contiguously and split in registers, take no
            # more instructions per byte than the half layout (k fewer: 128 bits in bfloat16)
            assert per_byte["interleaved"] <= per_byte["half"], (dtype, t)
            assert max(inter[t][kind]) == 128, (dtype, t)
