"""Tests of posenc.FireBias against the formula and pseudo-code of Li et al. (2023), FIRE."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import FireBias


def mlp_numbers(bias: FireBias):
    """The MLP's weights as Python floats: w1[k], b1[k], w2[h][k], b2[h]."""
    first, _, second = bias.mlp
    w1 = first.weight.detach().double()[:, 0].tolist()
    b1 = first.bias.detach().double().tolist()
    w2 = second.weight.detach().double().tolist()
    b2 = second.bias.detach().double().tolist()
    return w1, b1, w2, b2


def loop_reference(bias: FireBias, q_len: int, k_len: int) -> torch.Tensor:
    """The paper's formula, one element at a time, in double precision.

    b(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1), with the
    pseudo-code's |.| for keys after the query and its 1e-6 in the denominator.
    """
    w1, b1, w2, b2 = mlp_numbers(bias)
    c = abs(bias.c.item())
    threshold = abs(bias.threshold_multiplier.item() * bias.initial_threshold.item())
    out = torch.zeros(bias.n_heads, q_len, k_len, dtype=torch.float64)
    for i in range(q_len):
        p = i + k_len - q_len  # the query's position: aligned to the end of the keys
        for j in range(k_len):
            x = math.log(c * abs(p - j) + 1) / (math.log(c * max(threshold, p) + 1) + 1e-6)
            hidden = [max(0.0, w * x + b) for w, b in zip(w1, b1, strict=True)]
            for h in range(bias.n_heads):
                out[h, i, j] = sum(a * u for a, u in zip(w2[h], hidden, strict=True)) + b2[h]
    return out


def pseudo_code(bias: FireBias, seq_len: int) -> torch.Tensor:
    """A transcription of the pseudo-code in the paper's appendix (square attention).

    Its parameters map one to one: ``c``, ``init_L`` (here
    ``initial_threshold``), ``L_multiplier`` (here ``threshold_multiplier``),
    the same MLP, ``eps = 1e-6``; output ``[1, h, n, n]``.
    """
    positions = torch.arange(seq_len, dtype=torch.float)
    rel_distance = positions[:, None] - positions[None, :]
    threshold = torch.abs(bias.threshold_multiplier * bias.initial_threshold)
    pos_normalizer = torch.max(positions, threshold)[:, None]
    rel_distance = torch.log(torch.abs(bias.c * rel_distance) + 1)
    pos_normalizer = torch.log(torch.abs(bias.c * pos_normalizer) + 1)
    normalized_distance = rel_distance / (pos_normalizer + 1e-6)
    fire_bias = bias.mlp(normalized_distance.unsqueeze(-1)).unsqueeze(0)
    return fire_bias.permute(0, 3, 1, 2)


# ---------------------------------------------------------------- the formula


@pytest.mark.parametrize(
    ("q_len", "k_len", "threshold"),
    [
        (0, 0, 4.0),
        (0, 5, 4.0),
        (1, 1, 4.0),
        (3, 3, 4.0),
        (4, 12, 4.0),
        (12, 12, 4.0),
        (5, 9, 512.0),
    ],
)
def test_formula_element_by_element(q_len, k_len, threshold):
    torch.manual_seed(0)
    bias = FireBias(3, hidden=8, c=0.7, threshold=threshold)
    with torch.no_grad():  # move c and L away from their initial values
        bias.c.fill_(-0.4)  # enters as |c|
        bias.threshold_multiplier.fill_(1.5)
    out = bias(q_len, k_len)
    assert out.shape == (3, q_len, k_len)
    assert out.dtype == torch.float32
    torch.testing.assert_close(
        out, loop_reference(bias, q_len, k_len).float(), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(("seq_len", "threshold"), [(1, 512.0), (9, 512.0), (20, 6.0)])
def test_equals_papers_pseudo_code(seq_len, threshold):
    torch.manual_seed(1)
    bias = FireBias(4, threshold=threshold)
    expected = pseudo_code(bias, seq_len)[0]
    torch.testing.assert_close(bias(seq_len), expected, rtol=1e-5, atol=1e-6)
    # the last rows of the square are the rows of queries aligned to the end of the keys
    torch.testing.assert_close(
        bias(3, seq_len + 2)[:, :, :seq_len], bias(seq_len + 2)[:, -3:, :seq_len]
    )


def test_keys_after_the_query_get_the_bias_of_the_absolute_distance():
    torch.manual_seed(2)
    bias = FireBias(2, threshold=4.0)
    x = bias.normalized_distance(10).detach()
    for i in range(10):
        for j in range(i + 1, 10):
            expected = math.log(0.1 * (j - i) + 1) / (math.log(0.1 * max(4, i) + 1) + 1e-6)
            assert x[i, j].item() == pytest.approx(expected, rel=1e-6)
    assert x[0, 9] > 1  # beyond the causal range, the argument can exceed 1


# ---------------------------------------------------------------- progressive interpolation


def test_argument_stays_in_unit_interval_beyond_the_threshold():
    torch.manual_seed(3)
    threshold = 16.0
    bias = FireBias(2, threshold=threshold)
    for k_len in (8, 16, 17, 64, 1000):
        x = bias.normalized_distance(k_len).detach()
        causal = torch.ones(k_len, k_len, dtype=torch.bool).tril()
        assert (x[causal] >= 0).all() and (x[causal] <= 1).all()
    x = bias.normalized_distance(1000).detach()
    psi = lambda d: math.log(0.1 * d + 1)  # noqa: E731
    for i in (17, 100, 999):  # beyond L: normalised by psi(i) itself
        # the farthest key (j = 0) sits at the end of the interval
        assert x[i, 0].item() == pytest.approx(psi(i) / (psi(i) + 1e-6), rel=1e-6)
        assert x[i, 0].item() == pytest.approx(1.0, abs=1e-5)
        # the key at half the distance: psi(i / 2) / psi(i), not 1/2 (the log transform)
        j = i - i // 2
        assert x[i, j].item() == pytest.approx(psi(i // 2) / (psi(i) + 1e-6), rel=1e-6)
    for i in (0, 5, 16):  # at or below L: normalised by the constant psi(L)
        assert x[i, 0].item() == pytest.approx(psi(i) / (psi(threshold) + 1e-6), rel=1e-6)
        assert x[i, 0].item() <= 1.0


def test_longer_inputs_reuse_the_function_on_the_same_interval():
    """Beyond L, the bias of the farthest key is f(~1) for every query: the same value."""
    torch.manual_seed(4)
    bias = FireBias(3, threshold=8.0)
    out = bias(300).detach()
    far = out[:, 8:, 0]  # queries at 8 .. 299, key 0
    torch.testing.assert_close(far, far[:, :1].expand_as(far), rtol=0, atol=1e-5)
    # half the query's position is not the argument 1/2: psi bends the fractions,
    # psi(8)/psi(16) for the query at 2L, psi(4)/psi(8) for the query at L
    x = bias.normalized_distance(300).detach()
    psi = lambda d: math.log(0.1 * d + 1)  # noqa: E731
    assert x[16, 8].item() == pytest.approx(psi(8) / (psi(16) + 1e-6), rel=1e-6)
    assert x[8, 4].item() == pytest.approx(psi(4) / (psi(8) + 1e-6), rel=1e-6)
    assert x[16, 8] > x[8, 4] > 0.5


def test_below_threshold_the_bias_is_a_function_of_the_distance():
    torch.manual_seed(5)
    bias = FireBias(2, threshold=64.0)
    out = bias(40).detach()
    for d in range(1, 40):
        diagonal = out.diagonal(offset=-d, dim1=-2, dim2=-1)  # all pairs at distance d
        torch.testing.assert_close(diagonal, diagonal[:, :1].expand_as(diagonal), rtol=0, atol=1e-6)


# ---------------------------------------------------------------- learning c and L


def test_c_and_threshold_are_learned():
    torch.manual_seed(6)
    bias = FireBias(2, threshold=8.0)
    bias(6).sum().backward()  # every query below L: L is the normaliser
    assert bias.c.grad is not None and bias.c.grad != 0
    assert bias.threshold_multiplier.grad != 0
    assert all(p.grad is not None for p in bias.mlp.parameters())
    bias.zero_grad()
    bias(1, 40).sum().backward()  # one query at 39 > L: L plays no part
    assert bias.threshold_multiplier.grad == 0
    names = {name for name, _ in bias.named_parameters()}
    assert {"c", "threshold_multiplier"} <= names
    assert "initial_threshold" in bias.state_dict()


def test_signs_of_c_and_multiplier_do_not_matter():
    torch.manual_seed(7)
    bias = FireBias(2, threshold=6.0)
    before = bias(4, 12).detach()
    with torch.no_grad():
        bias.c.neg_()
        bias.threshold_multiplier.neg_()
    assert bias.threshold.item() == 6.0
    torch.testing.assert_close(bias(4, 12), before, rtol=0, atol=0)


def test_an_optimiser_cannot_make_the_bias_undefined():
    """Huge steps in both directions: c and L stay >= 0 in effect and the bias finite."""
    torch.manual_seed(8)
    for direction in (1.0, -1.0):
        bias = FireBias(2, threshold=8.0)
        opt = torch.optim.SGD([bias.c, bias.threshold_multiplier], lr=1e6)
        for _ in range(20):
            opt.zero_grad()
            (direction * bias(12).sum()).backward()
            opt.step()
            assert bias.threshold.item() >= 0
            assert torch.isfinite(bias(12)).all()
    # exact zeros: psi vanishes, the argument is 0, the bias f(0)
    bias = FireBias(2, threshold=8.0)
    with torch.no_grad():
        bias.c.zero_()
        bias.threshold_multiplier.zero_()
        out = bias(5)
        f0 = bias.mlp(torch.zeros(1, 1))[0]
    torch.testing.assert_close(out, f0[:, None, None].expand(2, 5, 5), rtol=0, atol=1e-6)


# ---------------------------------------------------------------- FSDP and old state dicts


@pytest.fixture
def process_group(tmp_path):
    """A single-process gloo group (world size 1) on the CPU, torn down afterwards."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("needs torch.distributed with gloo")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_learned_scalars_have_shape_one():
    # FSDP1 and FSDP2 reject 0-d parameters; the two scalars are [1]
    bias = FireBias(2)
    assert bias.c.shape == bias.threshold_multiplier.shape == (1,)
    assert bias.threshold.shape == ()


def _fsdp_checks(wrapped: torch.nn.Module, eager: FireBias) -> None:
    """The wrapped module's bias and gradients equal those of ``eager``."""
    out = wrapped(3, 40)  # queries at 37..39, beyond L = 16: c, f and L all used
    torch.testing.assert_close(out, eager(3, 40), rtol=0, atol=0)
    out.square().sum().backward()
    eager(3, 40).square().sum().backward()
    grads = {name: p.grad for name, p in wrapped.named_parameters()}
    assert all(g is not None for g in grads.values())
    assert any(name.endswith("c") for name in grads)


def test_fsdp1_wraps_a_fire_bias(process_group):
    from torch.distributed.fsdp import FullyShardedDataParallel

    torch.manual_seed(11)
    eager = FireBias(2, threshold=16.0)
    torch.manual_seed(11)
    wrapped = FullyShardedDataParallel(
        FireBias(2, threshold=16.0), device_id=torch.device("cpu"), use_orig_params=True
    )
    _fsdp_checks(wrapped, eager)
    c_grad = dict(wrapped.named_parameters())["_fsdp_wrapped_module.c"].grad
    torch.testing.assert_close(c_grad, eager.c.grad, rtol=1e-6, atol=0)


class _Holder(torch.nn.Module):
    """A model holding a FireBias, as a transformer layer does."""

    def __init__(self) -> None:
        super().__init__()
        self.fire = FireBias(2, threshold=16.0)

    def forward(self, q_len: int, k_len: int) -> torch.Tensor:
        return self.fire(q_len, k_len)


def test_fully_shard_of_a_model_holding_a_fire_bias(process_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(12)
    eager = FireBias(2, threshold=16.0)
    torch.manual_seed(12)
    model = _Holder()
    mesh = init_device_mesh("cpu", (1,))
    fully_shard(model.fire, mesh=mesh)  # the per-block recipe: children first, then the root
    fully_shard(model, mesh=mesh)
    _fsdp_checks(model, eager)


def test_a_state_dict_with_0d_scalars_still_loads():
    """Earlier versions saved c and threshold_multiplier as 0-d tensors."""
    torch.manual_seed(13)
    saved = FireBias(2, threshold=16.0)
    with torch.no_grad():
        saved.c.fill_(0.37)
        saved.threshold_multiplier.fill_(1.25)
    old = {
        k: v.reshape(()) if k in ("c", "threshold_multiplier") else v
        for k, v in saved.state_dict().items()
    }
    assert old["c"].dim() == 0
    loaded = FireBias(2, threshold=16.0)
    loaded.load_state_dict(old)
    assert loaded.c.shape == (1,) and loaded.c.item() == saved.c.item()
    assert loaded.threshold_multiplier.item() == 1.25
    torch.testing.assert_close(loaded(3, 40), saved(3, 40), rtol=0, atol=0)
    torch.testing.assert_close(loaded(12), saved(12), rtol=0, atol=0)
    # with a prefix, as inside a model
    model = torch.nn.ModuleDict({"fire": FireBias(2, threshold=16.0)})
    model.load_state_dict({f"fire.{k}": v for k, v in old.items()})
    torch.testing.assert_close(model["fire"](3, 40), saved(3, 40), rtol=0, atol=0)


# ---------------------------------------------------------------- device, dtype, errors


def test_dtype_and_device_follow_the_parameters():
    torch.manual_seed(9)
    bias = FireBias(2, hidden=4, threshold=3.0).double()
    out = bias(3, 7)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, loop_reference(bias, 3, 7), rtol=1e-12, atol=1e-12)
    assert FireBias(2).to("meta")(3, 5).is_meta


def test_default_k_len_empty_outputs_and_repr():
    bias = FireBias(2, hidden=3, threshold=10.0)
    torch.testing.assert_close(bias(4), bias(4, 4), rtol=0, atol=0)
    assert bias(0, 5).shape == (2, 0, 5)
    assert "n_heads=2, hidden=3, threshold=10" in repr(bias)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_heads": 0}, ValueError, "n_heads must be a positive integer, got 0"),
        ({"n_heads": 2.5}, TypeError, "n_heads must be an integer"),
        ({"n_heads": 2, "hidden": 0}, ValueError, "hidden must be a positive integer, got 0"),
        ({"n_heads": 2, "hidden": "32"}, TypeError, "hidden must be an integer"),
        ({"n_heads": 2, "c": 0.0}, ValueError, "c must be a finite number greater than 0"),
        ({"n_heads": 2, "c": -0.1}, ValueError, "c must be a finite number greater than 0"),
        ({"n_heads": 2, "c": math.nan}, ValueError, "c must be a finite number greater than 0"),
        ({"n_heads": 2, "c": "0.1"}, TypeError, "c must be a real number"),
        (
            {"n_heads": 2, "threshold": 0},
            ValueError,
            "threshold must be a finite number greater than 0",
        ),
        (
            {"n_heads": 2, "threshold": -512.0},
            ValueError,
            "threshold must be a finite number greater than 0",
        ),
        (
            {"n_heads": 2, "threshold": math.inf},
            ValueError,
            "threshold must be a finite number greater than 0",
        ),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        FireBias(**kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((5, 3), ValueError, "q_len must not exceed k_len"),
        ((-1, 3), ValueError, "q_len must be an integer >= 0, got -1"),
        ((2, -1), ValueError, "k_len must be an integer >= 0, got -1"),
        ((2, 3.0), TypeError, "k_len must be an integer"),
    ],
)
def test_bad_lengths(args, error, match):
    with pytest.raises(error, match=match):
        FireBias(2)(*args)
