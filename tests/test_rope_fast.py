"""The fast RoPE paths of posenc.rope against a textbook rotation written here.

``apply_rope`` and ``RotaryEmbedding`` rotate with ``torch.mul(..., out=)``
and ``addcmul_`` (large inputs), or out-of-place ``addcmul`` (small inputs
and autograd). ``addcmul`` may use a fused multiply-add, so they agree with
the textbook formula, which rounds both products, within one rounding of a
product ("ulp level"), and with each other to the last bit.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.rope as rope_module
from posenc import RotaryEmbedding, YarnScaling, apply_rope, rope_frequencies

FAST = settings(max_examples=60, deadline=None)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def textbook(x, positions, *, layout="half", rotary_dim=None, base=10000.0, scale=1.0):
    """``a cos - b sin``, ``b cos + a sin`` with every product rounded, in float32 (float64).

    The angles are formed as posenc documents it: float32 ``inv_freq`` times
    float32 positions (float64 when x is float64).
    """
    dim = x.shape[-1]
    rot = dim if rotary_dim is None else rotary_dim
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv = rope_frequencies(rot, base=base).to(compute)
    angles = positions.to(compute)[..., None] * inv
    cos, sin = angles.cos() * scale, angles.sin() * scale
    xr = x[..., :rot].to(compute)
    if layout == "half":
        a, b = xr[..., : rot // 2], xr[..., rot // 2 :]
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
    out_a, out_b = a * cos - b * sin, b * cos + a * sin
    if layout == "half":
        out = torch.cat((out_a, out_b), dim=-1)
    else:
        out = torch.stack((out_a, out_b), dim=-1).flatten(-2)
    magnitude = arrange(*magnitudes(a, b, cos, sin), layout)
    out = torch.cat((out.to(x.dtype), x[..., rot:]), dim=-1)
    bound = torch.cat((magnitude, torch.zeros_like(x[..., rot:], dtype=torch.float64)), dim=-1)
    return out, bound


def magnitudes(a, b, cos, sin):
    """``|a c| + |b s|`` and ``|b c| + |a s|``: the scale of each output's rounding errors."""
    a, b, cos, sin = (t.double().abs() for t in (a, b, cos, sin))
    return a * cos + b * sin, b * cos + a * sin


def arrange(first, second, layout):
    """Place per-pair values ``(..., r/2)`` of the first and second members at their features."""
    if layout == "half":
        return torch.cat((first, second), dim=-1)
    return torch.stack((first, second), dim=-1).flatten(-2)


def assert_ulp_close(actual, expected, magnitude, dtype):
    """``|actual - expected| <= 3 u m`` (+ one ulp of the output for low precision).

    ``m`` is ``magnitude``: ``|a c| + |b s|`` for ``a c - b s``, ``|b c| + |a s|``
    for ``b c + a s``.

    ``u`` is the unit roundoff of the compute dtype. A fused multiply-add
    skips one rounding of a product (at most ``u m``), and each of the two
    results is rounded once (at most one ulp apart, ``<= 2 u m``).
    """
    assert actual.dtype == expected.dtype == dtype
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    u = torch.finfo(compute).eps / 2
    bound = 3 * u * magnitude
    if dtype in (torch.float16, torch.bfloat16):  # two float32 values may round apart
        bound = bound + torch.finfo(dtype).eps * expected.double().abs()
    err = (actual.double() - expected.double()).abs()
    assert (err <= bound).all(), f"max excess {(err - bound).max().item()}"


@pytest.fixture(params=["large", "small"])
def path(request, monkeypatch):
    """Force the in-place (``out=``) path or the out-of-place path whatever the size."""
    monkeypatch.setattr(rope_module, "_SMALL", 0 if request.param == "large" else 1 << 62)
    return request.param


def make_x(shape, dtype, memory, seed):
    """``x`` of ``shape`` in one of several memory layouts, values from a seeded normal."""
    g = torch.Generator().manual_seed(seed)
    if memory == "contiguous":
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if memory == "transposed":  # (b, s, n_h, d) projected, then .transpose(1, 2) as in HF
        *lead, h, s, d = shape
        base = torch.randn((*lead, s, h, d), generator=g, dtype=torch.float64).to(dtype)
        return base.transpose(-3, -2)
    if memory == "strided_rows":  # x = qkv[..., :d]: rows farther apart than d
        base = torch.randn((*shape[:-1], shape[-1] + 6), generator=g, dtype=torch.float64)
        return base.to(dtype)[..., : shape[-1]]
    # expanded: one row shared by every head (stride 0)
    row = torch.randn((*shape[:-3], 1, *shape[-2:]), generator=g, dtype=torch.float64).to(dtype)
    return row.expand(shape)


@FAST
@given(
    heads=st.integers(1, 3),
    seq=st.integers(1, 9),
    half_dim=st.integers(1, 12),
    rotary_frac=st.sampled_from([None, 1, 2, 3]),
    layout=st.sampled_from(["half", "interleaved"]),
    dtype=st.sampled_from(DTYPES),
    memory=st.sampled_from(["contiguous", "transposed", "strided_rows", "expanded"]),
    offset=st.integers(0, 5000),
    seed=st.integers(0, 2**16),
)
def test_fast_paths_equal_textbook_rotation(
    heads, seq, half_dim, rotary_frac, layout, dtype, memory, offset, seed
):
    dim = 2 * half_dim
    rotary_dim = None if rotary_frac is None else 2 * max(1, half_dim * rotary_frac // 3)
    x = make_x((2, heads, seq, dim), dtype, memory, seed)
    before = x.clone()
    positions = torch.arange(seq) + offset
    expected, magnitude = textbook(x, positions, layout=layout, rotary_dim=rotary_dim)
    results = []
    for small in (0, 1 << 62):  # the in-place path, then the out-of-place one
        rope_module._SMALL, saved = small, rope_module._SMALL
        try:
            out = apply_rope(x, positions, layout=layout, rotary_dim=rotary_dim)
        finally:
            rope_module._SMALL = saved
        assert out.shape == x.shape
        assert_ulp_close(out, expected, magnitude, dtype)
        results.append(out)
    assert torch.equal(results[0], results[1])  # the two paths round alike
    assert torch.equal(x, before)  # the input is never written


def test_small_and_large_inputs_agree_bitwise():
    # the threshold between the paths must not change a single bit
    x = torch.randn(4, 16, 64, 64)  # 262144 elements: the in-place path
    positions = torch.arange(64) * 3
    assert x.numel() >= rope_module._SMALL > x[:1, :1].numel()
    full = apply_rope(x, positions)
    assert torch.equal(apply_rope(x[:1, :1], positions), full[:1, :1])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_input_is_not_mutated(path, layout):
    x = torch.randn(2, 4, 8, 16)
    version, before = x._version, x.clone()
    apply_rope(x, torch.arange(8), layout=layout, rotary_dim=8)
    rope = RotaryEmbedding(16, layout=layout)
    rope(x, x, torch.arange(8))
    assert x._version == version and torch.equal(x, before)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_half_and_interleaved_permutation_on_both_paths(path, layout):
    dim, h = 32, 16
    perm = torch.stack((torch.arange(h), torch.arange(h) + h), dim=-1).flatten()
    x = torch.randn(3, 5, 7, dim)
    positions = torch.arange(7) * 13
    half = apply_rope(x, positions, layout="half")
    interleaved = apply_rope(x[..., perm], positions, layout="interleaved")
    assert torch.equal(interleaved[..., torch.argsort(perm)], half)


def test_module_equals_function_on_both_paths(path):
    rope = RotaryEmbedding(64, scaling=YarnScaling(4.0, 128))
    q, k = torch.randn(1, 8, 40, 64), torch.randn(1, 2, 40, 64)
    positions = torch.arange(40) + 300
    rq, rk = rope(q, k, positions)
    kw = {"scaling": YarnScaling(4.0, 128)}
    assert torch.equal(rq, apply_rope(q, positions, **kw))
    assert torch.equal(rk, apply_rope(k, positions, **kw))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_decode_step_positions_of_any_integer_dtype(dtype):
    # one new token: the module's single-position fast path and the gather by index_select
    rope = RotaryEmbedding(64)
    q = torch.randn(1, 8, 1, 64)
    for p in (0, 7, 200, 255):
        positions = torch.tensor([p], dtype=dtype)
        rq, _ = rope(q, q, positions)
        assert torch.equal(rq, apply_rope(q, positions))
    multi = torch.tensor([[3, 1], [0, 255]], dtype=dtype)[:, None, :]  # (B, 1, S)
    x = torch.randn(2, 4, 2, 64)
    assert torch.equal(rope(x, x, multi)[0], apply_rope(x, multi))


@pytest.mark.parametrize(
    "positions",
    [
        torch.arange(40) + 100,  # a prompt after a cached prefix: rows of the cache, no copy
        (torch.arange(40) + 7)[None, None, :],  # (1, 1, S)
        torch.tensor([2, 1, 0, 3] * 10),  # as many values as a range, but not one: gathered
        torch.arange(40).flip(0),
        torch.stack((torch.arange(40), torch.arange(40) + 40))[:, None, :],  # (B, 1, S), B = 2
    ],
    ids=["range", "range_b1s", "permuted", "reversed", "batch"],
)
def test_module_cache_lookups_equal_function(path, positions):
    rope = RotaryEmbedding(32, layout="interleaved")
    q = torch.randn(2, 3, 40, 32)
    rq, rk = rope(q, q[:, :1], positions)
    assert torch.equal(rq, apply_rope(q, positions, layout="interleaved"))
    assert torch.equal(rk, apply_rope(q[:, :1], positions, layout="interleaved"))
    assert rope.cos_cached.shape[0] == RotaryEmbedding.initial_cache_positions  # 256 rows cover it


def test_matches_hugging_face_eager_within_ulp(path):
    # Hugging Face: q * cos + rotate_half(q) * sin with cos = cat(c, c), all float32
    x = torch.randn(1, 4, 50, 128)
    positions = torch.arange(50) + 1000
    inv = 1.0 / (10000.0 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128))
    emb = torch.cat((positions.float()[:, None] * inv,) * 2, dim=-1)
    rotated = torch.cat((-x[..., 64:], x[..., :64]), dim=-1)
    expected = x * emb.cos() + rotated * emb.sin()
    _, magnitude = textbook(x, positions)
    assert_ulp_close(apply_rope(x, positions), expected, magnitude, torch.float32)
    assert_ulp_close(RotaryEmbedding(128)(x, x, positions)[0], expected, magnitude, torch.float32)


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gradients(layout):
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True)
    positions = torch.arange(5) * 7
    assert torch.autograd.gradcheck(
        lambda t: apply_rope(t, positions, layout=layout, rotary_dim=6), (x,)
    )
    # the gradient of <w, R(p) x> is R(p)^T w = R(-p) w
    w = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    (grad,) = torch.autograd.grad((apply_rope(x, positions, layout=layout) * w).sum(), x)
    torch.testing.assert_close(grad, apply_rope(w, -positions, layout=layout))


def test_training_and_inference_give_the_same_bits():
    x = torch.randn(2, 16, 64, 64)  # large enough for the in-place path without grad
    positions = torch.arange(64)
    with torch.no_grad():
        inference = apply_rope(x, positions)
    training = apply_rope(x.requires_grad_(), positions)
    assert training.requires_grad and not inference.requires_grad
    assert torch.equal(training.detach(), inference)
    with torch.inference_mode():
        assert torch.equal(apply_rope(x.detach(), positions), inference)


# ---------------------------------------------------------------------------
# Caches and checks
# ---------------------------------------------------------------------------


def test_cached_frequencies_are_not_exposed():
    x = torch.randn(3, 8)
    expected = apply_rope(x, torch.arange(3))
    inv = rope_frequencies(8)
    inv.mul_(0.0)  # a user's copy: must not reach apply_rope's cache
    assert torch.equal(apply_rope(x, torch.arange(3)), expected)
    assert torch.equal(rope_frequencies(8), 1.0 / (10000.0 ** (torch.arange(0, 8, 2).float() / 8)))


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)


@FAST
@given(positions_shape=shapes, target=shapes)
def test_broadcast_check_agrees_with_torch(positions_shape, target):
    x = torch.empty((*target, 2))
    try:
        ok = tuple(torch.broadcast_shapes(positions_shape, target)) == target
    except RuntimeError:
        ok = False
    if ok:
        rope_module._check_broadcast(torch.empty(positions_shape), x, "x")
    else:
        with pytest.raises(ValueError, match=r"must broadcast to x\.shape\[:-1\]"):
            rope_module._check_broadcast(torch.empty(positions_shape), x, "x")


# ---------------------------------------------------------------------------
# The optional fused path
# ---------------------------------------------------------------------------


@pytest.fixture
def fresh_fused_state(monkeypatch):
    monkeypatch.setattr(rope_module, "_fused_state", {"fn": None, "failed": False})
    return rope_module._fused_state


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # from torch.compile's internals
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_fused_path_equals_eager(fresh_fused_state, layout):
    # torch.compile where it works (the first call compiles: seconds); eager otherwise
    x = torch.randn(2, 3, 5, 8)
    cos, sin = torch.randn(5, 3), torch.randn(5, 3)  # rotary_dim 6: the tail passes through
    fused = rope_module._rotate_fused(x, cos, sin, layout)
    eager = rope_module._rotate(x, cos, sin, layout)
    reference = rope_module._rotate_reference(x, cos, sin, layout)
    a, b = (x[..., 0:3], x[..., 3:6]) if layout == "half" else (x[..., 0:6:2], x[..., 1:6:2])
    magnitude = arrange(*magnitudes(a, b, cos, sin), layout)
    magnitude = torch.cat((magnitude, torch.zeros(2, 3, 5, 2, dtype=torch.float64)), dim=-1)
    assert_ulp_close(fused, eager, magnitude, torch.float32)
    assert_ulp_close(reference, eager, magnitude, torch.float32)
    assert torch.equal(fused[..., 6:], x[..., 6:])


def test_fused_path_falls_back_to_eager(fresh_fused_state, monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(torch, "compile", broken_compile)
    x = torch.randn(2, 5, 8)
    cos, sin = torch.randn(5, 4), torch.randn(5, 4)
    out = rope_module._rotate_fused(x, cos, sin, "half")
    assert fresh_fused_state["failed"]
    assert torch.equal(out, rope_module._rotate(x, cos, sin, "half"))
    # and later calls go straight to eager
    assert torch.equal(
        rope_module._rotate_fused(x, cos, sin, "interleaved"),
        rope_module._rotate(x, cos, sin, "interleaved"),
    )


@pytest.mark.parametrize(("threads", "calls"), [(1, 8), (2, 8), (3, 8), (4, 4), (8, 2)])
def test_block_size_grows_with_threads_beyond_two(monkeypatch, threads, calls):
    # blocks of _BLOCK elements up to 2 threads, then _BLOCK per two threads
    monkeypatch.setattr(rope_module, "_BLOCK", 100)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    x = torch.zeros(8, 10, 10)  # 800 elements, 100 per index of the first axis
    sizes = []
    rope_module._for_blocks(lambda xb: sizes.append(xb.numel()), (x,))
    assert len(sizes) == calls and sum(sizes) == x.numel()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_blocks_change_no_bit(monkeypatch, layout, dtype):
    # the large path runs block by block; any block size gives the same bits, also when
    # cos and sin vary along a leading axis (positions per batch) and with partial rotation
    x = torch.randn(3, 4, 40, 24).to(dtype)  # 11520 elements
    positions = (torch.arange(40) + torch.tensor([0, 7, 900])[:, None])[:, None, :]  # (3, 1, 40)
    monkeypatch.setattr(rope_module, "_SMALL", 0)  # the large path
    monkeypatch.setattr(rope_module, "_BLOCK", 1 << 30)  # one block
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # blocks of exactly _BLOCK
    whole = apply_rope(x, positions, layout=layout, rotary_dim=16)
    for block in (1, 50, 1000, 5000):  # down to a block per row of a head
        monkeypatch.setattr(rope_module, "_BLOCK", block)
        blocked = apply_rope(x, positions, layout=layout, rotary_dim=16)
        assert torch.equal(blocked, whole), block
    assert torch.equal(whole[..., 16:], x[..., 16:])
    rotary = RotaryEmbedding(16, layout=layout, max_positions=1024)
    torch.testing.assert_close(rotary(x, x, positions)[0], whole, rtol=0, atol=0)


@pytest.mark.parametrize(("device", "blocked"), [("cpu", True), ("meta", False)])
def test_blocks_only_on_the_cpu(monkeypatch, device, blocked):
    # the blocks serve the CPU's caches; on another device (a GPU; here the meta device,
    # which runs no kernel) they would only multiply the launches, so x goes in one piece
    calls = []
    monkeypatch.setattr(rope_module, "_SMALL", 0)  # the large path
    monkeypatch.setattr(rope_module, "_BLOCK", 100)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(
        rope_module, "_for_blocks", lambda fn, tensors: calls.append(tensors[0].shape)
    )
    x = torch.zeros(2, 4, 10, 16, device=device)
    cos, sin = torch.zeros(10, 8, device=device), torch.zeros(10, 8, device=device)
    out = rope_module._rotate(x, cos, sin, "half")
    assert out.shape == x.shape and out.device.type == device
    assert calls == ([x.shape] if blocked else [])
