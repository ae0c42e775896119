"""Graph safety and host reads: every module a model calls per step, compiled whole.

``torch.compile(fullgraph=True)`` raises on the first graph break, so each
test below proves that the function or module traces into one graph (the
``eager`` backend runs the traced graph with the ordinary kernels: the
tracing is what is tested, and CI stays fast). The compiled result is
checked against the eager call.

The host-read tests run the per-step paths under a dispatch mode that
fails on the operations that read a tensor's values back to the host
(``.item()``, ``int()``/``bool()`` of a tensor, ``torch.equal``,
``aminmax`` feeding a Python branch), and with ``Tensor.item``,
``Tensor.tolist``, ``torch.equal`` and ``torch.aminmax`` patched to raise:
no CUDA needed to show that a GPU would not synchronise.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc import (
    CoPE,
    FireBias,
    KerpleBias,
    LearnedPositionalEmbedding,
    NTKScaling,
    RelativePositionEmbedding,
    RotaryEmbedding,
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    YarnScaling,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    apply_xpos,
    relative_shift,
    sinusoidal,
    t5_relative_position_bucket,
    transformer_xl_scores,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile internals

# torch 2.3.1's Dynamo cannot trace these paths whole (int.bit_length, a
# functools wrapper's __wrapped__, a scaling class built inside the graph,
# repeat_interleave's data-dependent shape); they are checked on the torch
# CI pins. `make test-oldest-torch` runs the rest of this file on 2.3.1.
OLDER_DYNAMO = pytest.mark.needs_torch(
    "2.13.0", "torch 2.3.1's Dynamo breaks the graph here; traced whole on 2.13.0"
)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="eager")


def assert_same(actual, expected) -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
        return
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# fullgraph=True: no graph break
# ---------------------------------------------------------------------------


@OLDER_DYNAMO
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    "shape", [(1, 8, 1, 64), (1, 4, 256, 64)], ids=["decode", "prefill"]
)  # the second takes the large path in eager mode
def test_apply_rope_fullgraph(layout, shape):
    x = randn(*shape)
    positions = torch.arange(shape[2]) + 7

    def fn(x, positions):
        return apply_rope(x, positions, layout=layout)

    assert_same(compiled(fn)(x, positions), fn(x, positions))


@OLDER_DYNAMO
def test_apply_rope_fullgraph_with_options():
    x = randn(2, 4, 6, 32)
    positions = torch.arange(6)[None, None, :] + torch.tensor([0, 40])[:, None, None]

    def fn(x, positions):
        return apply_rope(
            x, positions, base=500.0, scaling=NTKScaling(4.0), rotary_dim=16, layout="interleaved"
        )

    assert_same(compiled(fn)(x, positions), fn(x, positions))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("max_positions", [None, 4096])
def test_rotary_embedding_fullgraph(layout, max_positions):
    rope = RotaryEmbedding(32, layout=layout, max_positions=max_positions)
    q, k = randn(2, 8, 5, 48, seed=1), randn(2, 2, 5, 48, seed=2)  # GQA, partial rotation
    step_q, step_k = randn(2, 8, 1, 32, seed=3), randn(2, 2, 1, 32, seed=4)
    fn = compiled(rope)
    prefill, step = torch.arange(5), torch.tensor([5])
    assert_same(fn(q, k, prefill), rope(q, k, prefill))
    assert_same(fn(step_q, step_k, step), rope(step_q, step_k, step))
    expected = apply_rope(step_q, step, layout=layout)  # and both equal the function
    torch.testing.assert_close(fn(step_q, step_k, step)[0], expected, rtol=0, atol=0)


def test_rotary_embedding_fullgraph_with_scaling_and_seq_len():
    # a length-dependent scaling is graph-safe when seq_len is given
    rope = RotaryEmbedding(16, scaling=YarnScaling(4.0, 32), max_positions=128)
    q = randn(1, 2, 4, 16)
    positions = torch.arange(4) + 60
    assert_same(compiled(rope)(q, q, positions), rope(q, q, positions))


@OLDER_DYNAMO
def test_bias_modules_fullgraph():
    t5 = T5RelativeBias(4, bidirectional=False)
    assert_same(compiled(lambda: t5(3, 9))(), t5(3, 9))
    kerple, fire = KerpleBias(4), FireBias(4)
    assert_same(compiled(lambda: kerple(3, 9))(), kerple(3, 9))
    assert_same(compiled(lambda: fire(3, 9))(), fire(3, 9))
    shaw = RelativePositionEmbedding(4, 8)
    assert_same(compiled(lambda: shaw(3, 9))(), shaw(3, 9))
    assert_same(compiled(lambda: alibi_bias(12, 3, 9))(), alibi_bias(12, 3, 9))
    assert_same(compiled(lambda: alibi_slopes(12))(), alibi_slopes(12))
    relative = torch.arange(-200, 200)
    assert_same(
        compiled(t5_relative_position_bucket)(relative), t5_relative_position_bucket(relative)
    )


def test_cope_fullgraph():
    cope = CoPE(16, 2, 8)
    q, scores = randn(1, 2, 5, 16), randn(1, 2, 5, 5, seed=1)
    assert_same(compiled(cope)(q, scores), cope(q, scores))


@OLDER_DYNAMO
def test_biases_at_given_positions_and_masks_fullgraph_without_host_reads():
    # a left-padded batch: the per-step path of a padded decode or a packed prefill
    q_positions = torch.tensor([[3], [1]])
    k_positions = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 1]])
    documents = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    where = {"q_positions": q_positions, "k_positions": k_positions}
    modules = [T5RelativeBias(4), KerpleBias(4), FireBias(4), RelativePositionEmbedding(4, 8)]
    calls = [lambda: alibi_bias(4, **where)] + [lambda m=m: m(**where) for m in modules]
    calls.append(
        lambda: posenc.attention_mask(
            **where,
            q_document_ids=documents[:, -1:],
            k_document_ids=documents,
            bias=alibi_bias(4, **where),
        )
    )
    for fn in calls:
        assert_same(compiled(fn)(), fn())
        with no_host_reads():
            fn()


def test_absolute_modules_fullgraph():
    positions = torch.tensor([[0, 3, 5], [7, 1, 2]])
    learned = LearnedPositionalEmbedding(8, 16, padding_idx=0)
    table = SinusoidalEmbedding(8, 16, learnable_scale=True)
    encoding = SinusoidalPositionalEncoding(16)
    x = randn(2, 5, 16)
    assert_same(compiled(learned)(positions), learned(positions))
    assert_same(compiled(table)(positions), table(positions))
    assert_same(compiled(lambda p: sinusoidal(p, 16))(positions), sinusoidal(positions, 16))
    fn = compiled(encoding)
    for offset in (0, 3, 300):  # a decode loop: later offsets, a cache that grows
        assert_same(fn(x, offset), encoding(x, offset))


@OLDER_DYNAMO
def test_xpos_and_transformer_xl_fullgraph():
    q, k = randn(1, 2, 4, 16), randn(1, 2, 6, 16, seed=1)
    qp, kp = torch.arange(2, 6), torch.arange(6)
    assert_same(compiled(apply_xpos)(q, k, qp, kp), apply_xpos(q, k, qp, kp))
    mid = compiled(lambda *a: apply_xpos(*a, center="midpoint"))
    assert_same(mid(q, k, qp, kp), apply_xpos(q, k, qp, kp, center="midpoint"))
    scores = randn(2, 3, 5)
    assert_same(compiled(relative_shift)(scores), relative_shift(scores))
    r, u, v = randn(2, 6, 16, seed=2), randn(16, seed=3), randn(16, seed=4)
    qx, kx = randn(2, 4, 16, seed=5), randn(2, 6, 16, seed=6)
    assert_same(
        compiled(transformer_xl_scores)(qx, kx, r, u, v), transformer_xl_scores(qx, kx, r, u, v)
    )


# ---------------------------------------------------------------------------
# No host reads on the per-step path
# ---------------------------------------------------------------------------

#: the ATen operations that return a Python value read from a tensor: ``.item()``,
#: ``int()``, ``float()`` and ``bool()`` of a tensor (``_local_scalar_dense``,
#: ``is_nonzero``) and ``torch.equal``; on a GPU each one waits for the device
_HOST_READS = {"_local_scalar_dense", "equal", "is_nonzero"}


class _NoHostReads(TorchDispatchMode):
    """Fail on any operation that reads values back to the host."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name in _HOST_READS:
            raise AssertionError(f"host read on the per-step path: aten::{name}")
        return func(*args, **(kwargs or {}))


def _refuse(name):
    def fail(*args, **kwargs):
        raise AssertionError(f"host read on the per-step path: {name}")

    return fail


@contextlib.contextmanager
def no_host_reads(*, patch_aminmax: bool = True):
    """Both guards: the dispatch mode, and the Python entry points patched to raise."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "item", _refuse("Tensor.item"))
        mp.setattr(torch.Tensor, "tolist", _refuse("Tensor.tolist"))
        mp.setattr(torch, "equal", _refuse("torch.equal"))
        if patch_aminmax:  # aminmax itself stays on the device; it is patched because
            # posenc only ever used it to read the range back
            mp.setattr(torch, "aminmax", _refuse("torch.aminmax"))
            mp.setattr(torch.Tensor, "aminmax", _refuse("Tensor.aminmax"))
        with _NoHostReads():
            yield


def test_the_guard_catches_host_reads():
    # the check itself: each kind of read it is meant to catch does fail
    t = torch.tensor([3, 4])
    reads = [
        lambda: t[0].item(),
        lambda: int(t[0]),
        lambda: bool(t[0] > 1),
        lambda: t.tolist(),
        lambda: torch.equal(t, t),
        lambda: torch.aminmax(t),
        lambda: RotaryEmbedding(8)(randn(1, 1, 8), randn(1, 1, 8), torch.tensor([3])),
    ]
    for read in reads:
        with no_host_reads(), pytest.raises(AssertionError, match="host read"):
            read()
    with no_host_reads():  # and ordinary work passes
        (t * 2 + t).sum()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_step_makes_no_host_read(layout, dtype):
    rope = RotaryEmbedding(64, layout=layout, max_positions=2048)
    q, k = randn(1, 8, 1, 64).to(dtype), randn(1, 2, 1, 64, seed=1).to(dtype)
    prompt_q, prompt_k = randn(1, 8, 300, 64, seed=2), randn(1, 2, 300, 64, seed=3)
    with no_host_reads():
        rq_prompt, _ = rope(prompt_q, prompt_k, torch.arange(300))  # prefill: large path
        steps = [rope(q, k, torch.tensor([p])) for p in (300, 301)]  # two decode steps
        gqa = rope(q, k, torch.tensor([[[302]]]))  # (b, 1, s) positions: the general path
    expected_prompt = apply_rope(prompt_q, torch.arange(300), layout=layout)
    torch.testing.assert_close(rq_prompt, expected_prompt, rtol=0, atol=0)
    for (rq, rk), p in zip([*steps, gqa], (300, 301, 302), strict=True):
        torch.testing.assert_close(
            rq, apply_rope(q, torch.tensor([p]), layout=layout), rtol=0, atol=0
        )
        torch.testing.assert_close(
            rk, apply_rope(k, torch.tensor([p]), layout=layout), rtol=0, atol=0
        )


def test_other_per_step_paths_make_no_host_read():
    x = randn(1, 8, 1, 64)
    p = torch.tensor([1000])
    with no_host_reads():
        apply_rope(x, p)
        apply_rope(x, p, scaling=YarnScaling(4.0, 512))  # a length-independent scaling
        apply_rope(x, p, scaling=posenc.DynamicNTKScaling(2.0, 512), seq_len=1001)
        LearnedPositionalEmbedding(2048, 64)(p[None])
        SinusoidalEmbedding(2048, 64)(p[None])
        SinusoidalPositionalEncoding(64)(randn(1, 1, 64), 1000)
        T5RelativeBias(8)(1, 1001)
        alibi_bias(8, 1, 1001)
        KerpleBias(8)(1, 1001)
        FireBias(8)(1, 1001)
    # xPos reads the largest |p - center| back once per call in eager mode, to refuse
    # positions its scales cannot represent (see posenc.xpos); under torch.compile it skips
    # that check, and test_xpos_and_transformer_xl_fullgraph traces it without a break
    with no_host_reads(), pytest.raises(AssertionError, match="host read"):
        apply_xpos(x, x, p, p)
    with no_host_reads(patch_aminmax=False):  # without decay there is nothing to check
        apply_xpos(x, x, p, p, scale_base=math.inf)


def test_out_of_range_positions_keep_named_errors_in_eager_mode():
    rope = RotaryEmbedding(8, max_positions=16)
    q = randn(1, 3, 8)
    with pytest.raises(IndexError, match=r"max_positions\) = \[0, 16\).*\[0, 16\]"):
        rope(q, q, torch.tensor([0, 5, 16]))
    with pytest.raises(IndexError, match=r"\[-1, 5\]"):
        rope(q, q, torch.tensor([-1, 5, 2]))
    rope.reserve(32)  # the explicit place for growth
    assert rope.max_positions == 32 and rope.rot_cached.shape == (32, 2, 8)
    torch.testing.assert_close(
        rope(q, q, torch.tensor([0, 5, 16]))[0], apply_rope(q, torch.tensor([0, 5, 16]))
    )
    with pytest.raises(IndexError, match=r"\[0, n_positions\) = \[0, 4\), got 4"):
        LearnedPositionalEmbedding(4, 8)(torch.tensor([1, 4]))
    with pytest.raises(IndexError, match=r"\[0, n_positions\) = \[0, 4\), got -2"):
        SinusoidalEmbedding(4, 8)(torch.tensor([-2, 1]))


@OLDER_DYNAMO
def test_mrope_fullgraph_and_cope_without_host_reads():
    x = randn(1, 2, 6, 16)
    positions = posenc.grid_positions(2, 3)  # (2, 6)

    def fn(x, positions):
        return posenc.apply_mrope(x, positions, (4, 4))

    assert_same(compiled(fn)(x, positions), fn(x, positions))
    cope = CoPE(16, 2, 8)
    q, scores = randn(1, 2, 5, 16), randn(1, 2, 5, 5, seed=1)
    with no_host_reads():
        cope(q, scores)
        fn(x, positions)
