"""Tests of posenc.relative: T5's buckets and bias (Raffel et al. 2020), Shaw et al. (2018)."""

from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from posenc import RelativePositionEmbedding, T5RelativeBias, t5_relative_position_bucket

# ---------------------------------------------------------------- references


def f32(x: float) -> float:
    """Round to float32, as every step of T5's tf.to_float / .float() arithmetic does."""
    return struct.unpack("f", struct.pack("f", x))[0]


def reference_bucket(
    relative_position: int,
    bidirectional: bool,
    num_buckets: int,
    max_distance: int,
    *,
    float32: bool = True,
) -> int:
    """T5's bucket of one relative position (key - query), from the Mesh TF formula.

    With ``float32=False`` the logarithm is taken in double precision.
    """
    rnd = f32 if float32 else float
    bucket = 0
    n = -relative_position  # distance into the past
    if bidirectional:
        num_buckets //= 2
        if n < 0:  # a later key: the second half of the buckets
            bucket += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    ratio = rnd(rnd(n) / rnd(max_exact))
    x = rnd(math.log(ratio))
    x = rnd(x / rnd(math.log(max_distance / max_exact)))
    x = rnd(x * rnd(num_buckets - max_exact))
    return bucket + min(max_exact + int(x), num_buckets - 1)


def reference_buckets(positions, bidirectional, num_buckets, max_distance, *, float32=True):
    return torch.tensor(
        [
            reference_bucket(p, bidirectional, num_buckets, max_distance, float32=float32)
            for p in positions
        ],
        dtype=torch.int64,
    )


def torch_float32_buckets(relative_position, bidirectional, num_buckets, max_distance):
    """T5's buckets computed the way PyTorch ports compute them: float32 tensor ops."""
    side = num_buckets // 2 if bidirectional else num_buckets
    if bidirectional:
        offset = torch.where(relative_position > 0, side, 0)
        n = relative_position.abs()
    else:
        offset = torch.zeros_like(relative_position)
        n = torch.clamp(-relative_position, min=0)
    max_exact = side // 2
    scaled = torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (scaled * (side - max_exact)).long()  # truncation, as T5
    large = large.clamp(max=side - 1)
    return offset + torch.where(n < max_exact, n, large)


def exact_buckets(bidirectional: bool, num_buckets: int) -> int:
    return (num_buckets // 2 if bidirectional else num_buckets) // 2


SETTINGS = [
    # (bidirectional, num_buckets, max_distance)
    (True, 32, 128),  # T5, mT5, LongT5
    (False, 32, 128),
    (True, 64, 256),
    (False, 64, 256),
    (True, 16, 64),
    (False, 16, 64),
    (True, 320, 800),  # WavLM
    (True, 4, 2),  # one exact and one logarithmic bucket per side
    (False, 2, 2),
    (True, 33, 50),  # odd: the last bucket stays unused
    (False, 7, 100),
]


# ---------------------------------------------------------------- T5 buckets


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), SETTINGS)
def test_bucket_matches_mesh_tf_formula(bidirectional, num_buckets, max_distance):
    positions = [*range(-300, 301), -(2**40), -1000, 1000, 2**40]
    got = t5_relative_position_bucket(
        torch.tensor(positions),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert got.dtype == torch.int64
    for float32 in (True, False):  # these settings have no float32 edge case
        expected = reference_buckets(
            positions, bidirectional, num_buckets, max_distance, float32=float32
        )
        assert torch.equal(got, expected)


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), SETTINGS)
def test_bucket_matches_torch_float32_port(bidirectional, num_buckets, max_distance):
    positions = torch.arange(-3 * max_distance - 10, 3 * max_distance + 10)
    expected = torch_float32_buckets(positions, bidirectional, num_buckets, max_distance)
    got = t5_relative_position_bucket(
        positions,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert torch.equal(got, expected)


@settings(max_examples=60, deadline=None)
@given(
    bidirectional=st.booleans(),
    num_buckets=st.integers(2, 160),
    max_distance=st.integers(2, 400),
)
def test_bucket_matches_reference_for_any_settings(bidirectional, num_buckets, max_distance):
    assume(1 <= exact_buckets(bidirectional, num_buckets) < max_distance)
    positions = list(range(-2 * max_distance - 3, 2 * max_distance + 4))
    got = t5_relative_position_bucket(
        torch.tensor(positions),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    expected = reference_buckets(positions, bidirectional, num_buckets, max_distance)
    assert torch.equal(got, expected)


@settings(max_examples=40, deadline=None)
@given(
    bidirectional=st.booleans(),
    num_buckets=st.integers(4, 1024),
    max_distance=st.integers(2**10, 2**34),
    data=st.data(),
)
def test_bucket_matches_reference_for_long_ranges(bidirectional, num_buckets, max_distance, data):
    # Distances beyond 2**24 are rounded when T5 converts them to float32.
    limit = 4 * max_distance
    positions = data.draw(st.lists(st.integers(-limit, limit), min_size=1, max_size=200))
    got = t5_relative_position_bucket(
        torch.tensor(positions),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    expected = reference_buckets(positions, bidirectional, num_buckets, max_distance)
    assert torch.equal(got, expected)
    torch_port = torch_float32_buckets(
        torch.tensor(positions), bidirectional, num_buckets, max_distance
    )
    assert torch.equal(got, torch_port)


@pytest.mark.parametrize(
    ("bidirectional", "num_buckets", "max_distance", "relative_position", "bucket"),
    [
        # log(18/8) / log(27/8) * 9 is exactly 6, but 5.99999... in float32:
        # T5 puts distance 18 in bucket 8 + 5, not 8 + 6.
        (False, 17, 27, -18, 13),
        (False, 17, 27, -19, 14),
        # log(8/4) / log(128/4) * 5 is exactly 1 and stays 1 in float32
        # (double precision would give 0.99999...).
        (False, 9, 128, -8, 5),
        (False, 9, 128, -7, 4),
    ],
)
def test_bucket_follows_t5_float32_at_bucket_edges(
    bidirectional, num_buckets, max_distance, relative_position, bucket
):
    got = t5_relative_position_bucket(
        torch.tensor([relative_position]),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert got.tolist() == [bucket]
    expected = torch_float32_buckets(
        torch.tensor([relative_position]), bidirectional, num_buckets, max_distance
    )
    assert expected.tolist() == [bucket]


def test_bucket_exact_log_boundary_defaults():
    # Bidirectional: 16 buckets per side, 8 exact (distances 0..7).
    rp = torch.tensor([-7, -8, 7, 8, 0, 1])
    assert t5_relative_position_bucket(rp).tolist() == [7, 8, 16 + 7, 16 + 8, 0, 16 + 1]
    # Causal: 32 buckets, 16 exact (distances 0..15).
    rp = torch.tensor([-15, -16, -17])
    assert t5_relative_position_bucket(rp, bidirectional=False).tolist() == [15, 16, 16]


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), SETTINGS)
def test_bucket_at_and_beyond_max_distance_is_last(bidirectional, num_buckets, max_distance):
    side = num_buckets // 2 if bidirectional else num_buckets
    far = torch.tensor([max_distance, max_distance + 1, 2 * max_distance, 10**6, 2**40])
    past = t5_relative_position_bucket(
        -far, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert (past == side - 1).all()
    if bidirectional:
        future = t5_relative_position_bucket(
            far, bidirectional=True, num_buckets=num_buckets, max_distance=max_distance
        )
        assert (future == 2 * side - 1).all()


def test_bucket_causal_future_keys_share_bucket_zero():
    rp = torch.arange(0, 500)
    assert (t5_relative_position_bucket(rp, bidirectional=False) == 0).all()
    assert (t5_relative_position_bucket(rp[1:], bidirectional=True) >= 16).all()


@settings(max_examples=60, deadline=None)
@given(
    bidirectional=st.booleans(),
    num_buckets=st.integers(2, 300),
    max_distance=st.integers(2, 3000),
)
def test_bucket_monotone_on_each_side_and_in_range(bidirectional, num_buckets, max_distance):
    assume(1 <= exact_buckets(bidirectional, num_buckets) < max_distance)
    distance = torch.arange(0, 2 * max_distance + 2)
    kw = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    past = t5_relative_position_bucket(-distance, **kw)
    future = t5_relative_position_bucket(distance, **kw)
    for side in (past, future):
        assert (side.diff() >= 0).all()
        assert side.min() >= 0 and side.max() < num_buckets
    max_exact = exact_buckets(bidirectional, num_buckets)
    assert torch.equal(past[:max_exact], distance[:max_exact])  # exact buckets
    if bidirectional:
        half = num_buckets // 2
        assert past.max() < half and (future[1:] >= half).all()
        assert torch.equal(future[1:max_exact], distance[1:max_exact] + half)
    else:
        assert (future == 0).all()


def test_bucket_keeps_shape_device_and_accepts_integer_dtypes():
    rp = torch.arange(-40, 40).reshape(2, 4, 10)
    expected = t5_relative_position_bucket(rp)
    assert expected.shape == (2, 4, 10)
    for dtype in (torch.int8, torch.int16, torch.int32):
        assert torch.equal(t5_relative_position_bucket(rp.to(dtype)), expected)
    unsigned = torch.arange(0, 200, dtype=torch.uint8)
    assert torch.equal(
        t5_relative_position_bucket(unsigned), t5_relative_position_bucket(unsigned.long())
    )
    assert t5_relative_position_bucket(torch.tensor(-3)).shape == ()
    assert t5_relative_position_bucket(torch.tensor(-3)).item() == 3
    assert t5_relative_position_bucket(torch.zeros(0, 5, dtype=torch.long)).shape == (0, 5)


# ---------------------------------------------------------------- T5RelativeBias


def relative_position_matrix(q_len: int, k_len: int) -> torch.Tensor:
    return torch.tensor(
        [[j - (i + k_len - q_len) for j in range(k_len)] for i in range(q_len)],
        dtype=torch.int64,
    )


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("q_len", "k_len"), [(7, 7), (3, 9), (1, 20), (0, 4), (150, 150)])
def test_t5_bias_is_embedding_of_bucket(bidirectional, q_len, k_len):
    torch.manual_seed(0)
    module = T5RelativeBias(6, bidirectional=bidirectional, num_buckets=16, max_distance=40)
    bias = module(q_len, k_len)
    assert bias.shape == (6, q_len, k_len)
    weight = module.relative_attention_bias.weight.detach()  # [num_buckets, h]
    expected = torch.empty(6, q_len, k_len)
    for i in range(q_len):
        for j in range(k_len):
            rp = j - (i + k_len - q_len)
            expected[:, i, j] = weight[reference_bucket(rp, bidirectional, 16, 40)]
    assert torch.equal(bias.detach(), expected)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_kv_cache_alignment(bidirectional):
    module = T5RelativeBias(4, bidirectional=bidirectional)
    full = module(50)
    assert torch.equal(module(50, 50), full)
    for q_len in (0, 1, 7, 50):
        assert torch.equal(module(q_len, 50), full[:, 50 - q_len :, :])


def test_t5_bias_gradients_count_bucket_uses():
    module = T5RelativeBias(3, num_buckets=8, max_distance=20)
    module(5, 12).sum().backward()
    bucket = t5_relative_position_bucket(
        relative_position_matrix(5, 12), num_buckets=8, max_distance=20
    )
    counts = torch.bincount(bucket.flatten(), minlength=8).float()
    grad = module.relative_attention_bias.weight.grad
    assert torch.equal(grad, counts[:, None].expand(8, 3))


def test_t5_bias_state_dict_matches_hugging_face_layout():
    module = T5RelativeBias(12, num_buckets=32)
    state = module.state_dict()
    assert list(state) == ["relative_attention_bias.weight"]
    assert state["relative_attention_bias.weight"].shape == (32, 12)


def test_t5_bias_init_is_small_normal():
    torch.manual_seed(0)
    weight = T5RelativeBias(64, num_buckets=512, max_distance=1024).relative_attention_bias.weight
    assert abs(weight.mean().item()) < 0.002
    assert 0.018 < weight.std().item() < 0.022


def test_t5_bias_on_meta_device():
    with torch.device("meta"):
        module = T5RelativeBias(8, bidirectional=False)
    assert module.relative_attention_bias.weight.is_meta
    module.to_empty(device="cpu")
    module.reset_parameters()
    assert torch.isfinite(module(3, 5)).all()


def test_t5_bias_follows_table_dtype():
    module = T5RelativeBias(2).to(torch.float64)
    assert module(3).dtype == torch.float64


# ---------------------------------------------------------------- Shaw et al.


@pytest.mark.parametrize(("q_len", "k_len"), [(6, 6), (2, 9), (1, 1), (0, 3), (12, 12)])
@pytest.mark.parametrize("max_distance", [1, 3, 50])
def test_shaw_embedding_is_table_of_clipped_relative_position(q_len, k_len, max_distance):
    torch.manual_seed(0)
    module = RelativePositionEmbedding(max_distance, 5)
    out = module(q_len, k_len)
    assert out.shape == (q_len, k_len, 5)
    table = module.embedding.weight.detach()
    assert table.shape == (2 * max_distance + 1, 5)
    for i in range(q_len):
        for j in range(k_len):
            rp = j - (i + k_len - q_len)
            clipped = max(-max_distance, min(max_distance, rp))
            assert torch.equal(out[i, j].detach(), table[clipped + max_distance])


def test_shaw_square_uses_plain_indices_and_cache_alignment():
    module = RelativePositionEmbedding(4, 3)
    full = module(10)
    table = module.embedding.weight
    assert torch.equal(full[2, 5], table[4 + 3])  # key 5 - query 2
    assert torch.equal(full[9, 0], table[0])  # -9 clipped to -4
    assert torch.equal(full[0, 9], table[8])  # +9 clipped to +4
    assert torch.equal(module(3, 10), full[7:])


def test_shaw_gradients_reach_the_table():
    module = RelativePositionEmbedding(2, 4)
    module(4).sum().backward()
    # Relative positions of a 4x4 grid: -3..3, clipped to -2..2.
    counts = torch.tensor([3.0, 3.0, 4.0, 3.0, 3.0])  # -2 (incl. -3), -1, 0, 1, 2 (incl. 3)
    assert torch.equal(module.embedding.weight.grad, counts[:, None].expand(5, 4))


def test_shaw_on_meta_device():
    with torch.device("meta"):
        module = RelativePositionEmbedding(16, 64)
    assert module.embedding.weight.is_meta
    module.to_empty(device="cpu")
    module.reset_parameters()
    assert module(4, 6).shape == (4, 6, 64)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_bucket_rejects_non_integer_positions(dtype):
    with pytest.raises(ValueError, match=rf"relative_position must be an integer tensor.*{dtype}"):
        t5_relative_position_bucket(torch.zeros(3, dtype=dtype))


def test_bucket_rejects_non_tensor():
    with pytest.raises(TypeError, match=r"relative_position must be a torch\.Tensor"):
        t5_relative_position_bucket([1, 2, 3])


@pytest.mark.parametrize(
    ("bidirectional", "num_buckets"), [(True, 3), (True, 2), (True, 1), (False, 1)]
)
def test_too_few_buckets_for_an_exact_one(bidirectional, num_buckets):
    message = (
        rf"num_buckets must leave at least one exact bucket .*"
        rf"got num_buckets={num_buckets} with bidirectional={bidirectional}"
    )
    with pytest.raises(ValueError, match=message):
        t5_relative_position_bucket(
            torch.tensor([0]), bidirectional=bidirectional, num_buckets=num_buckets
        )
    with pytest.raises(ValueError, match=message):
        T5RelativeBias(4, bidirectional=bidirectional, num_buckets=num_buckets)


@pytest.mark.parametrize(
    ("bidirectional", "num_buckets", "max_distance", "max_exact"),
    [(True, 32, 8, 8), (True, 32, 3, 8), (False, 32, 16, 16), (True, 4, 1, 1)],
)
def test_max_distance_inside_exact_buckets(bidirectional, num_buckets, max_distance, max_exact):
    message = (
        rf"max_distance must be greater than the number of exact buckets "
        rf"\(.* = {max_exact} for num_buckets={num_buckets}\), got max_distance={max_distance}"
    )
    kw = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    with pytest.raises(ValueError, match=message):
        t5_relative_position_bucket(torch.tensor([0]), **kw)
    with pytest.raises(ValueError, match=message):
        T5RelativeBias(4, **kw)
    # One more is enough.
    T5RelativeBias(4, **{**kw, "max_distance": max_exact + 1})


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_buckets": 0}, ValueError, r"num_buckets must be a positive integer, got 0"),
        ({"max_distance": -5}, ValueError, r"max_distance must be a positive integer, got -5"),
        ({"num_buckets": 32.0}, TypeError, r"num_buckets must be an integer"),
        ({"bidirectional": 1}, TypeError, r"bidirectional must be a bool"),
    ],
)
def test_bad_bucket_settings(kwargs, error, message):
    with pytest.raises(error, match=message):
        t5_relative_position_bucket(torch.tensor([0]), **kwargs)
    with pytest.raises(error, match=message):
        T5RelativeBias(4, **kwargs)


@pytest.mark.parametrize(
    ("n_heads", "error"), [(0, ValueError), (-2, ValueError), (4.0, TypeError)]
)
def test_t5_bias_bad_n_heads(n_heads, error):
    with pytest.raises(error, match="n_heads must be"):
        T5RelativeBias(n_heads)


@pytest.mark.parametrize(("max_distance", "dim"), [(0, 8), (-1, 8), (4, 0)])
def test_shaw_bad_sizes(max_distance, dim):
    name, value = ("max_distance", max_distance) if max_distance < 1 else ("dim", dim)
    with pytest.raises(ValueError, match=rf"{name} must be a positive integer, got {value}"):
        RelativePositionEmbedding(max_distance, dim)


@pytest.mark.parametrize(
    "module", [T5RelativeBias(2), RelativePositionEmbedding(3, 4)], ids=["t5", "shaw"]
)
def test_modules_reject_bad_lengths(module):
    with pytest.raises(ValueError, match=r"q_len must not exceed k_len .*q_len=4, k_len=2"):
        module(4, 2)
    with pytest.raises(ValueError, match=r"q_len must be an integer >= 0, got -1"):
        module(-1)
    with pytest.raises(ValueError, match=r"k_len must be an integer >= 0, got -2"):
        module(0, -2)
    with pytest.raises(TypeError, match=r"q_len must be an integer"):
        module(2.0)
