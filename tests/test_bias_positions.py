"""Explicit positions, FlexAttention score_mods and float32 biases for every attention bias.

The biases (``alibi_bias``, ``T5RelativeBias``, ``KerpleBias``, ``FireBias``)
and Shaw et al.'s ``RelativePositionEmbedding`` take ``q_positions`` and
``k_positions`` instead of lengths. Checked here against the formulas written
out one element at a time from the positions, against the length form, and
against a loop over the sequences of packed and left-padded batches; each
``score_mod`` against the dense bias on broadcast index tensors and inside
FlexAttention (eager, on the CPU); and the precision of a bfloat16 module.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from posenc import (
    FireBias,
    KerpleBias,
    RelativePositionEmbedding,
    T5RelativeBias,
    alibi_bias,
    alibi_score_mod,
    alibi_slopes,
    t5_relative_position_bucket,
)
from posenc.relative import _t5_bucket_pointwise, _t5_thresholds

H = 3


def make(name: str):
    """A bias with fixed, non-trivial parameters: ``fn(q_len, k_len, **positions)``."""
    torch.manual_seed(1)
    if name.startswith("alibi"):
        causal = name == "alibi"

        def fn(*lengths, **positions):
            return alibi_bias(H, *lengths, causal=causal, **positions)

        fn.score_mod = lambda *lengths, **positions: alibi_score_mod(
            H, *lengths, causal=causal, **positions
        )
        return fn
    if name.startswith("t5"):
        module = T5RelativeBias(H, bidirectional=name == "t5", num_buckets=8, max_distance=12)
    elif name.startswith("kerple"):
        module = KerpleBias(H, kind=name.split("-")[1])
    elif name == "fire":
        module = FireBias(H, hidden=5, threshold=3.0)
    else:
        raise ValueError(name)
    return module


BIASES = ["alibi", "alibi-symmetric", "t5", "t5-causal", "kerple-log", "kerple-power", "fire"]


def reference(name: str, bias, q_pos: list[int], k_pos: list[int]) -> torch.Tensor:
    """The bias of each pair from its two positions, element by element, in float64."""
    out = torch.zeros(H, len(q_pos), len(k_pos), dtype=torch.float64)
    if name.startswith("alibi"):
        slopes = alibi_slopes(H, dtype=torch.float64).tolist()
    elif name.startswith("t5"):
        weight = bias.relative_attention_bias.weight.detach().double()
    elif name.startswith("kerple"):
        r1, r2 = bias.r1.tolist(), bias.r2.tolist()
    else:
        first, _, last = bias.mlp
        w1 = first.weight.detach().double()[:, 0].tolist()
        b1 = first.bias.detach().double().tolist()
        w2 = last.weight.detach().double().tolist()
        b2 = last.bias.detach().double().tolist()
        c, L = abs(bias.c.item()), abs(bias.threshold.item())
    for i, p in enumerate(q_pos):
        for j, s in enumerate(k_pos):
            d = abs(p - s)
            for h in range(H):
                if name == "alibi":
                    out[h, i, j] = -slopes[h] * (p - s)
                elif name == "alibi-symmetric":
                    out[h, i, j] = -slopes[h] * d
                elif name.startswith("t5"):
                    bucket = t5_relative_position_bucket(
                        torch.tensor(s - p),
                        bidirectional=name == "t5",
                        num_buckets=8,
                        max_distance=12,
                    )
                    out[h, i, j] = weight[bucket, h]
                elif name == "kerple-log":
                    out[h, i, j] = -r1[h] * math.log1p(r2[h] * d)
                elif name == "kerple-power":
                    out[h, i, j] = -r1[h] * d ** r2[h]
                else:
                    x = math.log1p(c * d) / (math.log1p(c * max(L, p)) + 1e-6)
                    hidden = [max(0.0, w * x + b) for w, b in zip(w1, b1, strict=True)]
                    out[h, i, j] = b2[h] + sum(a * u for a, u in zip(w2[h], hidden, strict=True))
    return out


def call(bias, *lengths, **positions) -> torch.Tensor:
    with torch.no_grad():
        return bias(*lengths, **positions)


# A packed row (documents of 3, 2 and 4 tokens) and a left-padded row (two
# pads at position 0, then 7 tokens counted from 0).
PACKED = [0, 1, 2, 0, 1, 0, 1, 2, 3]
PADDED = [0, 0, 0, 1, 2, 3, 4, 5, 6]


# ---------------------------------------------------------------- positions


@pytest.mark.parametrize("name", BIASES)
def test_batched_positions_follow_the_formula_pair_by_pair(name):
    bias = make(name)
    q_positions = torch.tensor([PACKED[-4:], PADDED[-4:]])  # [2, 4]: the last 4 of each row
    k_positions = torch.tensor([PACKED, PADDED])  # [2, 9]
    out = call(bias, q_positions=q_positions, k_positions=k_positions)
    assert out.shape == (2, H, 4, 9) and out.dtype == torch.float32
    for b in range(2):
        expected = reference(name, bias, q_positions[b].tolist(), k_positions[b].tolist())
        torch.testing.assert_close(out[b], expected.float(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", BIASES)
@pytest.mark.parametrize(("q_len", "k_len"), [(5, 5), (2, 7), (0, 3), (1, 1)])
def test_arange_positions_equal_the_length_form(name, q_len, k_len):
    bias = make(name)
    q_positions = torch.arange(k_len - q_len, k_len)
    k_positions = torch.arange(k_len)
    expected = call(bias, q_len, k_len)
    assert torch.equal(call(bias, q_positions=q_positions, k_positions=k_positions), expected)
    batched = call(bias, q_positions=q_positions.expand(2, -1), k_positions=k_positions)
    assert batched.shape == (2, *expected.shape)
    assert torch.equal(batched[1], expected)


@pytest.mark.parametrize("name", BIASES)
def test_packed_documents_equal_a_loop_over_the_documents(name):
    bias = make(name)
    positions = torch.tensor(PACKED)
    out = call(bias, q_positions=positions, k_positions=positions)  # [h, 9, 9]
    start = 0
    for length in (3, 2, 4):  # the documents' own biases sit on the diagonal blocks
        block = out[:, start : start + length, start : start + length]
        torch.testing.assert_close(block, call(bias, length), rtol=1e-6, atol=1e-7)
        start += length


@pytest.mark.parametrize("name", BIASES)
def test_left_padded_batch_equals_a_loop_over_the_rows(name):
    bias = make(name)
    lengths = [6, 3, 4]
    width = max(lengths)
    # left padding: the pads take position 0, the real tokens count from 0
    positions = torch.tensor([[0] * (width - n) + list(range(n)) for n in lengths])
    out = call(bias, q_positions=positions, k_positions=positions)  # [3, h, 6, 6]
    for b, n in enumerate(lengths):
        real = out[b, :, width - n :, width - n :]
        torch.testing.assert_close(real, call(bias, n), rtol=1e-6, atol=1e-7)
    # a prefill chunk of the last 2 queries against the padded cache
    chunk = call(bias, q_positions=positions[:, -2:], k_positions=positions)
    assert torch.equal(chunk, out[:, :, -2:, :])


def test_shaw_embedding_takes_positions_too():
    emb = RelativePositionEmbedding(2, 4)
    positions = torch.tensor([PACKED, PADDED])
    out = call(emb, q_positions=positions, k_positions=positions)
    assert out.shape == (2, 9, 9, 4)
    table = emb.embedding.weight.detach()
    for b in range(2):
        for i, p in enumerate(positions[b].tolist()):
            for j, s in enumerate(positions[b].tolist()):
                assert torch.equal(out[b, i, j], table[max(-2, min(2, s - p)) + 2])
    arange = torch.arange(7)
    assert torch.equal(call(emb, q_positions=arange[4:], k_positions=arange), call(emb, 3, 7))


def test_fire_normalised_distance_uses_the_query_positions():
    fire = make("fire")
    q_positions, k_positions = torch.tensor([[5, 0]]), torch.tensor([[0, 2, 5]])
    x = fire.normalized_distance(q_positions=q_positions, k_positions=k_positions)
    c, L = abs(fire.c.item()), abs(fire.threshold.item())
    expected = [
        [math.log1p(c * abs(p - s)) / (math.log1p(c * max(L, p)) + 1e-6) for s in (0, 2, 5)]
        for p in (5, 0)
    ]
    torch.testing.assert_close(x, torch.tensor([expected]), rtol=1e-6, atol=1e-7)


def test_positions_any_integer_dtype_and_the_device_of_the_module():
    t5 = T5RelativeBias(2)
    p32 = torch.tensor([0, 1, 2], dtype=torch.int32)
    expected = t5(3)
    assert torch.equal(t5(q_positions=p32, k_positions=p32.to(torch.int16)), expected)
    meta = KerpleBias(2).to("meta")(q_positions=p32, k_positions=p32)  # moved to the module
    assert meta.is_meta and meta.shape == (2, 3, 3)
    assert alibi_bias(2, q_positions=p32, k_positions=p32, device="meta").is_meta


BAD_POSITIONS = [
    (
        {"q_len": 2, "q_positions": torch.arange(2), "k_positions": torch.arange(2)},
        "give either lengths \\(q_len, k_len\\) or positions",
    ),
    ({"q_positions": torch.arange(2)}, "given together, k_positions is None"),
    ({"k_positions": torch.arange(2)}, "given together, q_positions is None"),
    (
        {"q_positions": torch.arange(2.0), "k_positions": torch.arange(2)},
        "q_positions must be an integer tensor, got dtype torch.float32",
    ),
    (
        {"q_positions": torch.arange(2), "k_positions": torch.ones(2, dtype=torch.bool)},
        "k_positions must be an integer tensor, got dtype torch.bool",
    ),
    (
        {"q_positions": torch.tensor(1), "k_positions": torch.arange(2)},
        r"q_positions must have shape \(seq,\) or batched \(batch, seq\), got \(\)",
    ),
    (
        {"q_positions": torch.arange(2), "k_positions": torch.zeros(1, 2, 2, dtype=torch.long)},
        r"k_positions must have shape .* got \(1, 2, 2\)",
    ),
    (
        {"q_positions": torch.zeros(2, 3, dtype=torch.long), "k_positions": torch.zeros(3, 3)},
        "k_positions must be an integer tensor",
    ),
    (
        {
            "q_positions": torch.zeros(2, 3, dtype=torch.long),
            "k_positions": torch.zeros(3, 4, dtype=torch.long),
        },
        r"same batch size, got \(2, 3\) and \(3, 4\)",
    ),
    (
        {"q_positions": torch.arange(2), "k_positions": torch.arange(2, device="meta")},
        "q_positions and k_positions must be on one device, got cpu and meta",
    ),
    ({}, "q_len is required unless q_positions and k_positions are given"),
]


@pytest.mark.parametrize("name", [*BIASES, "shaw", "fire-normalized"])
@pytest.mark.parametrize(("kwargs", "match"), BAD_POSITIONS)
def test_bad_positions_are_named(name, kwargs, match):
    if name == "shaw":
        fn = RelativePositionEmbedding(2, 4)
    elif name == "fire-normalized":
        fn = make("fire").normalized_distance
    else:
        fn = make(name)
    with pytest.raises(ValueError, match=match):
        fn(**kwargs)
    if name not in ("shaw", "fire-normalized") and kwargs:  # score_mod checks the same way
        with pytest.raises(ValueError, match=match):
            fn.score_mod(**kwargs)


def test_position_arguments_must_be_tensors():
    with pytest.raises(TypeError, match=r"q_positions must be a torch\.Tensor, got list"):
        alibi_bias(2, q_positions=[0, 1], k_positions=torch.arange(2))
    with pytest.raises(TypeError, match=r"k_positions must be a torch\.Tensor, got int"):
        KerpleBias(2).score_mod(q_positions=torch.arange(2), k_positions=3)


# ---------------------------------------------------------------- score_mod


def index_grid(batch: int, q_len: int, k_len: int):
    """FlexAttention's indices as broadcast tensors: b, h, q_idx, kv_idx (int32, as it passes them)."""
    b = torch.arange(batch, dtype=torch.int32)[:, None, None, None]
    h = torch.arange(H, dtype=torch.int32)[None, :, None, None]
    q_idx = torch.arange(q_len, dtype=torch.int32)[None, None, :, None]
    kv_idx = torch.arange(k_len, dtype=torch.int32)[None, None, None, :]
    return b, h, q_idx, kv_idx


SCORE_MOD_CASES = {
    "self-attention": ((), {}, (4,), {}, 4, 4),  # q_idx is the query's position
    "cached": ((4, 9), {}, (4, 9), {}, 4, 9),  # the last 4 queries of 9 keys
    "positions": (
        (),
        {"q_positions": torch.tensor(PACKED[-4:]), "k_positions": torch.tensor(PACKED)},
        (),
        None,
        4,
        9,
    ),
    "batched": (
        (),
        {
            "q_positions": torch.tensor([PACKED[-4:], PADDED[-4:]]),
            "k_positions": torch.tensor([PACKED, PADDED]),
        },
        (),
        None,
        4,
        9,
    ),
}


@pytest.mark.parametrize("name", BIASES)
@pytest.mark.parametrize("case", list(SCORE_MOD_CASES))
def test_score_mod_adds_the_dense_bias_elementwise(name, case):
    bias = make(name)
    args, kwargs, dense_args, dense_kwargs, q_len, k_len = SCORE_MOD_CASES[case]
    score_mod = bias.score_mod(*args, **kwargs)
    dense = call(bias, *dense_args, **(kwargs if dense_kwargs is None else dense_kwargs))
    score = torch.randn(2, H, q_len, k_len, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = score_mod(score, *index_grid(2, q_len, k_len))
    assert out.shape == score.shape and out.dtype == score.dtype
    torch.testing.assert_close(out, score + dense, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(
    ("num_buckets", "max_distance"), [(32, 128), (8, 12), (4, 3), (2, 2), (64, 1000), (16, 49)]
)
def test_t5_pointwise_bucket_equals_the_bucketize_form(bidirectional, num_buckets, max_distance):
    if bidirectional and num_buckets < 4:
        pytest.skip("no exact bucket")
    relative = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    side = num_buckets // 2 if bidirectional else num_buckets
    thresholds = _t5_thresholds(side, max_distance)
    pointwise = _t5_bucket_pointwise(
        relative, bidirectional=bidirectional, side=side, thresholds=thresholds
    )
    expected = t5_relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(pointwise, expected)


flex = pytest.importorskip("torch.nn.attention.flex_attention")
EAGER_FLEX = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


@EAGER_FLEX
@pytest.mark.parametrize("name", BIASES)
def test_flex_attention_with_the_score_mod_equals_sdpa_with_the_dense_bias(name):
    bias = make(name)
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, H, 3, 8, generator=gen)
    k, v = torch.randn(2, 2, H, 7, 8, generator=gen).unbind(0)
    positions = {
        "q_positions": torch.tensor([[4, 5, 6], [1, 2, 3]]),
        "k_positions": torch.tensor([[0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 1, 2, 3]]),
    }
    for args, kwargs in [((3, 7), {}), ((), positions)]:
        out = flex.flex_attention(q, k, v, score_mod=bias.score_mod(*args, **kwargs))
        with torch.no_grad():
            dense = bias(*args, **kwargs)
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)
        torch.testing.assert_close(out.detach(), expected, rtol=1e-5, atol=1e-5)


@EAGER_FLEX
@pytest.mark.parametrize("name", ["t5", "kerple-power", "fire"])
def test_gradients_through_the_score_mod_equal_those_through_the_dense_bias(name):
    gen = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(3, 1, H, 5, 8, generator=gen).unbind(0)
    grads = []
    for use_flex in (True, False):
        bias = make(name)
        if use_flex:
            out = flex.flex_attention(q, k, v, score_mod=bias.score_mod())
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias(5))
        out.square().sum().backward()
        grads.append([p.grad for p in bias.parameters()])
    for flexed, dense in zip(*grads, strict=True):
        torch.testing.assert_close(flexed, dense, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- precision


def distinct(t: torch.Tensor) -> int:
    return torch.unique(t).numel()


@pytest.mark.parametrize("name", ["t5", "kerple-log", "kerple-power", "fire"])
def test_a_bfloat16_module_forms_its_bias_in_float32_and_casts_once(name):
    bias = make(name)
    if name == "fire":
        bias.initial_threshold.fill_(64.0)  # beyond it, the query position matters too
    half = copy.deepcopy(bias).to(torch.bfloat16)
    reference_module = copy.deepcopy(half).float()  # the same (rounded) parameters, float32
    with torch.no_grad():
        out = half(4, 2049)  # distances 0 .. 2048
        expected = reference_module(4, 2049).to(torch.bfloat16)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected)
    assert distinct(out) == distinct(expected)
    with torch.no_grad():  # the score_mod too
        b, h, q_idx, kv_idx = index_grid(1, 4, 2049)
        scored = half.score_mod(4, 2049)(torch.zeros((), dtype=torch.float32), b, h, q_idx, kv_idx)
        torch.testing.assert_close(scored[0], reference_module(4, 2049), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["log", "power"])
def test_a_bfloat16_kerple_is_within_one_bfloat16_step_of_the_exact_bias(kind):
    bias = make(f"kerple-{kind}").to(torch.bfloat16)
    with torch.no_grad():
        out = bias(1, 4097)[:, 0]  # distances 4096 .. 0
        raw1, raw2 = bias.r1_raw.double()[:, None], bias.r2_raw.double()[:, None]
        r1 = 0.01 + torch.nn.functional.softplus(raw1)  # the parameterisation, in float64
        r2 = (
            0.01 + torch.nn.functional.softplus(raw2)
            if kind == "log"
            else 2 - 1.99 / (1 + raw2.exp())
        )
        d = torch.arange(4096, -1, -1, dtype=torch.float64)
        exact = -r1 * (torch.log1p(r2 * d) if kind == "log" else d.pow(r2))
        # the trap: the distances and the kernel in bfloat16, as the official code does
        d16 = d.to(torch.bfloat16)
        trap = 0.0 - bias.r1[:, None] * (
            torch.log1p(bias.r2[:, None] * d16) if kind == "log" else d16.pow(bias.r2[:, None])
        )
    step = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - 7)  # bfloat16 spacing
    assert ((out.double() - exact).abs() <= step).all()
    assert not ((trap.double() - exact).abs() <= step).all()


def test_fire_ignores_autocast():
    fire = make("fire")
    with torch.no_grad():
        expected = fire(3, 40)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fire(3, 40)
    assert out.dtype == torch.float32
    assert torch.equal(out, expected)


# ---------------------------------------------------------------- examples


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize(
    "name",
    [
        "alibi_bias",
        "alibi_score_mod",
        "attention_mask",
        "attention_mask_mod",
        "T5RelativeBias",
        "T5RelativeBias.score_mod",
        "KerpleBias.score_mod",
        "FireBias.score_mod",
        "RelativePositionEmbedding",
    ],
)
def test_docstring_examples_run_as_printed(name):
    import doctest

    import posenc

    obj = posenc
    for part in name.split("."):
        obj = getattr(obj, part)
    globs = {"torch": torch, **{n: getattr(posenc, n) for n in posenc.__all__}}
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs=globs)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0
