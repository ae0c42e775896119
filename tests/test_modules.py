"""Every ``nn.Module`` of posenc, built on the meta device and initialised later.

Large models are built under ``with torch.device("meta"):`` (no memory, no
initialisation), materialised with ``to_empty(device=...)`` (uninitialised
memory) and initialised by ``reset_parameters()``. Who calls it differs:

- the module alone: ``module.reset_parameters()`` (a model's own init
  calling it on its submodules, as torchtitan's do);
- a loop over every module in ``model.modules()`` order, which a user of
  FSDP2 (``fully_shard`` calls nothing) or of a plain meta-device model
  writes;
- FSDP1 (``FullyShardedDataParallel`` without ``param_init_fn``), which
  walks the modules breadth first and calls it only on those with
  parameters or buffers of their own, after ``to_empty(recurse=False)`` on
  each of them alone, expecting each to initialise its own state only.

Here each module of ``posenc.__all__``, found by its type so that a new
module is covered without editing this file, must come out of each path
with the distributions eager construction gives, and in the state eager
construction gives under the same ``torch.manual_seed`` (parameters,
buffers and tensor attributes equal to the last bit, on the CPU) wherever
each parameter is drawn once, in construction order. What holds on other
devices is in the docstrings: a reset on another device draws from that
device's generator.
"""

from __future__ import annotations

import collections
import inspect
import itertools

import pytest
import torch
from torch import nn

import posenc

MODULES = sorted(
    (
        obj
        for name in posenc.__all__
        if isinstance(obj := getattr(posenc, name), type) and issubclass(obj, nn.Module)
    ),
    key=lambda cls: cls.__name__,
)

#: more settings per module, besides the required arguments alone (all sizes: 8)
VARIANTS = {
    "FireBias": [{"hidden": 4, "c": 0.3, "threshold": 64.0}],
    "KerpleBias": [{"kind": "power"}],
    "LearnedPositionalEmbedding": [{"padding_idx": 3}],
    "RotaryEmbedding": [
        {"max_positions": 64},
        {"layout": "interleaved", "scaling": posenc.YarnScaling(4.0, 32)},
        {"scaling": posenc.LongRopeScaling((1.0,) * 4, (2.0,) * 4, 16, factor=4.0)},
    ],
    "SinusoidalEmbedding": [{"padding_idx": 1, "learnable_scale": True}],
    "SinusoidalPositionalEncoding": [{"dropout": 0.1, "layout": "concat"}],
    "T5RelativeBias": [{"bidirectional": False, "num_buckets": 16, "max_distance": 32}],
}


def _required_args(cls: type) -> list[int]:
    """8 for each required argument: every module's required arguments are sizes."""
    params = inspect.signature(cls.__init__).parameters.values()
    return [
        8
        for p in params
        if p.name != "self"
        and p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


CASES = [
    pytest.param(cls, kwargs, id=f"{cls.__name__}-{i}")
    for cls in MODULES
    for i, kwargs in enumerate([{}, *VARIANTS.get(cls.__name__, [])])
]


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters, buffers and tensor attributes (caches) of ``module`` and its children."""
    state = {}
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor):
                state[f"{prefix}.{name}" if prefix else name] = value
    state.update(dict(module.named_parameters()))
    state.update(dict(module.named_buffers()))
    return state


def _assert_same_state(actual: nn.Module, expected: nn.Module) -> None:
    a, e = _state(actual), _state(expected)
    assert a.keys() == e.keys()
    for name in e:
        assert a[name].device == e[name].device, name
        assert a[name].dtype == e[name].dtype, name
        assert a[name].shape == e[name].shape, name
        assert torch.equal(a[name], e[name]), name


def test_every_module_of_the_package_is_covered():
    names = {cls.__name__ for cls in MODULES}
    assert names >= {"RotaryEmbedding", "CoPE", "FireBias", "T5RelativeBias"}  # discovery works
    assert set(VARIANTS) <= names  # no stale entry
    for cls in MODULES:
        assert callable(getattr(cls, "reset_parameters", None)), cls.__name__


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_no_module_holds_a_0d_parameter(cls, kwargs):
    # FSDP1 and fully_shard reject scalar parameters; learned scalars are [1]
    module = cls(*_required_args(cls), **kwargs)
    assert [name for name, p in module.named_parameters() if p.dim() == 0] == []


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_meta_then_to_empty_then_reset_equals_eager(cls, kwargs):
    args = _required_args(cls)
    torch.manual_seed(1234)
    eager = cls(*args, **kwargs)
    with torch.device("meta"):
        module = cls(*args, **kwargs)
    assert all(t.is_meta for t in _state(module).values())
    module.to_empty(device="cpu")
    torch.manual_seed(1234)
    module.reset_parameters()
    _assert_same_state(module, eager)


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_reset_parameters_undoes_training(cls, kwargs):
    args = _required_args(cls)
    torch.manual_seed(99)
    expected = cls(*args, **kwargs)
    module = cls(*args, **kwargs)
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(1e20)  # what to_empty may leave (CoPE's table once held 2.4e20)
        for b in module.buffers():
            b.fill_(1e20)
    torch.manual_seed(99)
    module.reset_parameters()
    _assert_same_state(module, expected)


def test_cope_after_to_empty_and_reset_gives_a_zero_bias():
    # the adopter's case: the table held about 2.4e20 after to_empty, and the bias with it
    with torch.device("meta"):
        cope = posenc.CoPE(16, 2, 8)
    cope.to_empty(device="cpu")
    cope.reset_parameters()
    q, scores = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 5)
    assert torch.equal(cope(q, scores), torch.zeros(1, 2, 5, 5))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile internals
@pytest.mark.parametrize("reset", [True, False])
def test_compiled_rope_built_on_meta_is_exact(reset):
    # the adopter's case: a compiled RoPE built on meta read its uninitialised cos/sin cache
    # after to_empty (an error of 9e35, no exception). The cache is rebuilt by to_empty itself,
    # and by reset_parameters.
    with torch.device("meta"):
        rope = posenc.RotaryEmbedding(32, max_positions=128)
    rope.to_empty(device="cpu")
    if reset:
        rope.reset_parameters()
    torch._dynamo.reset()
    compiled = torch.compile(rope, fullgraph=True, backend="eager")
    q, k = torch.randn(2, 4, 10, 32), torch.randn(2, 2, 10, 32)
    positions = torch.arange(100, 110)
    rq, rk = compiled(q, k, positions)
    torch.testing.assert_close(rq, posenc.apply_rope(q, positions), rtol=0, atol=0)
    torch.testing.assert_close(rk, posenc.apply_rope(k, positions), rtol=0, atol=0)


def test_rope_cache_follows_moves_and_stays_float32():
    rope = posenc.RotaryEmbedding(16, max_positions=32)
    expected = rope.rot_cached.clone()
    rope.to(torch.float16)  # a cast: the cache stays float32, untouched
    assert rope.rot_cached.dtype == torch.float32 and torch.equal(rope.rot_cached, expected)
    rope.to("meta")
    assert rope.rot_cached.is_meta and rope.inv_freq.is_meta
    rope.to_empty(device="cpu")  # from meta: rebuilt from the settings
    assert torch.equal(rope.rot_cached, expected)
    assert rope.cos_cached.data_ptr() == rope.rot_cached.data_ptr()  # views of the table


# ---------------------------------------------------------------------------
# Who calls reset_parameters: a loop over every module, and FSDP1
# ---------------------------------------------------------------------------

#: The modules whose reset_parameters also resets children that hold parameters
#: (so that a module reset alone is whole): a loop over every module draws those
#: children twice, from the same distribution.
RESETS_CHILDREN = {"FireBias", "RelativePositionEmbedding", "T5RelativeBias"}


def _reset_every_module(model: nn.Module) -> None:
    """The loop a user writes after ``to_empty`` (FSDP2 calls nothing): every module, in order."""
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()


def _materialize_like_fsdp1(model: nn.Module, device: str = "cpu") -> None:
    """FSDP1's meta-device materialisation without ``param_init_fn``, as in torch 2.13.

    ``_materialize_meta_module`` in ``torch/distributed/fsdp/_init_utils.py``:
    the modules in breadth-first order from the root, and on each one with
    parameters or buffers of its own, ``to_empty(device, recurse=False)``
    then ``reset_parameters()``. A module without any (a container, or
    ``RotaryEmbedding``, whose cache is no buffer) is neither moved nor
    reset. ``test_the_fsdp1_replica_follows_torch`` runs torch's own.
    """
    order, queue, seen = [], collections.deque([model]), {model}
    while queue:
        module = queue.popleft()
        order.append(module)
        for child in module.children():
            if child not in seen:
                seen.add(child)
                queue.append(child)
    with torch.no_grad():
        for module in order:
            own = itertools.chain(module.parameters(recurse=False), module.buffers(recurse=False))
            if next(own, None) is not None:
                module.to_empty(device=device, recurse=False)
                module.reset_parameters()


def _assert_initial_distributions(model: nn.Module) -> None:
    """The learned tables, FIRE's MLP and every ``nn.Linear`` hold what construction draws."""
    for name, module in model.named_modules():
        if isinstance(module, (posenc.T5RelativeBias, posenc.RelativePositionEmbedding)):
            table = next(module.parameters()).detach()  # N(0, 0.02^2), not nn.Embedding's N(0, 1)
            assert 0.015 < float(table.std()) < 0.025, name
            assert abs(float(table.mean())) < 0.006, name
        if isinstance(module, posenc.FireBias):
            assert torch.equal(module.c.detach(), torch.tensor([module._c_init])), name
            assert torch.equal(module.threshold.detach(), torch.tensor(module._threshold_init))
            assert sum(isinstance(layer, nn.Linear) for layer in module.mlp.modules()) == 2
        if isinstance(module, nn.Linear):  # PyTorch's default: U(-b, b), b = fan_in ** -0.5
            bound = module.in_features**-0.5
            for p in module.parameters():
                largest = float(p.detach().abs().max())
                assert bound / 4 < largest <= bound, (
                    name
                )  # drawn, not left at 0 or garbage  # drawn, not left at 0


def _built_on_meta(cls, args, kwargs) -> nn.Module:
    with torch.device("meta"):
        return cls(*args, **kwargs)


def _parameters_and_buffers(module: nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _inputs(module: nn.Module) -> tuple[tuple, dict]:
    """Fixed arguments for one call of ``module`` (built with sizes of 8)."""
    g = torch.Generator().manual_seed(0)
    name = type(module).__name__
    if name == "RotaryEmbedding":
        q, k = torch.randn(2, 4, 6, 8, generator=g), torch.randn(2, 2, 6, 8, generator=g)
        return (q, k, torch.arange(10, 16)), {"seq_len": 16}  # seq_len: graph-safe LongRoPE
    if name == "SinusoidalPositionalEncoding":
        return (torch.randn(2, 5, 8, generator=g), 3), {}
    if name in ("SinusoidalEmbedding", "LearnedPositionalEmbedding"):
        return (torch.tensor([[0, 3, 5], [7, 1, 2]]),), {}
    if name == "CoPE":
        return (torch.randn(1, 8, 5, 8, generator=g), torch.randn(1, 8, 5, 5, generator=g)), {}
    return (4, 6), {}  # the bias modules and RelativePositionEmbedding


def _forward(module: nn.Module) -> torch.Tensor | tuple[torch.Tensor, ...]:
    args, kwargs = _inputs(module)
    return module.eval()(*args, **kwargs)  # eval: no dropout


def test_the_modules_that_reset_their_children_are_listed():
    for cls, kwargs in ((c.values[0], c.values[1]) for c in CASES):
        module = cls(*_required_args(cls), **kwargs)
        children_with_parameters = any(
            next(child.parameters(), None) is not None for child in module.children()
        )
        assert children_with_parameters == (cls.__name__ in RESETS_CHILDREN), cls.__name__


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_reset_of_every_module_after_to_empty(cls, kwargs):
    # the loop over model.modules(): each parameter drawn once where no reset_parameters
    # also resets children, and so eager's values; the right distributions in any case
    # (a T5 or Shaw table was left with nn.Embedding's N(0, 1), std 1.05)
    args = _required_args(cls)
    torch.manual_seed(1234)
    eager = cls(*args, **kwargs)
    module = _built_on_meta(cls, args, kwargs)
    module.to_empty(device="cpu")
    torch.manual_seed(1234)
    _reset_every_module(module)
    _assert_initial_distributions(module)
    if cls.__name__ in RESETS_CHILDREN:
        a, e = _state(module), _state(eager)
        assert {n: (t.shape, t.dtype, t.device) for n, t in a.items()} == {
            n: (t.shape, t.dtype, t.device) for n, t in e.items()
        }
        assert torch.isfinite(_forward(module)).all()
    else:
        _assert_same_state(module, eager)
        torch.testing.assert_close(_forward(module), _forward(eager), rtol=0, atol=0)


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_fsdp1_materialisation_gives_the_eager_module(cls, kwargs):
    # breadth first, only modules with parameters or buffers of their own: for one posenc
    # module that is construction's order, so eager's values and forward (a T5 or Shaw
    # table had std 0.94 / 1.07; RoPE's cache stays on meta, which its forward must survive)
    args = _required_args(cls)
    torch.manual_seed(1234)
    eager = cls(*args, **kwargs)
    module = _built_on_meta(cls, args, kwargs)
    torch.manual_seed(1234)
    _materialize_like_fsdp1(module)
    _assert_initial_distributions(module)
    a, e = _parameters_and_buffers(module), _parameters_and_buffers(eager)
    assert a.keys() == e.keys()
    for name in e:
        assert torch.equal(a[name], e[name]), name
    torch.testing.assert_close(_forward(module), _forward(eager), rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile internals
@pytest.mark.parametrize(
    "cls, kwargs",
    [
        c
        for c in CASES
        if c.values[0].__name__ in ("RotaryEmbedding", "SinusoidalPositionalEncoding")
    ],
)
def test_compiled_forward_after_fsdp1_materialisation(cls, kwargs):
    # FSDP1 never moves a module without parameters or buffers of its own: RoPE's cos/sin
    # cache stayed on meta, and torch.compile(fullgraph=True) with max_positions failed
    # with a device mismatch between meta and cpu
    args = _required_args(cls)
    eager = cls(*args, **kwargs)
    module = _built_on_meta(cls, args, kwargs)
    _materialize_like_fsdp1(module)
    torch._dynamo.reset()
    compiled = torch.compile(module.eval(), fullgraph=True, backend="eager")
    args, kwargs = _inputs(module)
    torch.testing.assert_close(compiled(*args, **kwargs), _forward(eager), rtol=0, atol=0)


class _Attention(nn.Module):
    """A layer with every posenc module that holds a learned table, an MLP or a cache."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.t5 = posenc.T5RelativeBias(8)
        self.shaw = posenc.RelativePositionEmbedding(16, 4)
        self.fire = posenc.FireBias(8)
        self.rope = posenc.RotaryEmbedding(4, max_positions=64)
        self.out = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 8, 4).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q, k, torch.arange(t))
        shaw = torch.einsum("bhqd,qkd->bhqk", q, self.shaw(t, t))  # Shaw et al.'s q . a_ij
        bias = self.t5(t, t) + self.fire(t, t) + shaw
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.out(y.transpose(1, 2).reshape(b, t, 32))


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 32), _Attention(), nn.Linear(32, 32))


@pytest.mark.parametrize("recipe", [_reset_every_module, _materialize_like_fsdp1])
def test_a_model_built_on_meta_gets_the_eager_distributions(recipe):
    # nested modules: breadth first is not construction's order, and the loop over every
    # module resets the tables twice, so the values differ from eager; the distributions
    # and the forward must not
    with torch.device("meta"):
        model = _model()
    if recipe is _reset_every_module:
        model.to_empty(device="cpu")
    torch.manual_seed(0)
    recipe(model)
    _assert_initial_distributions(model)
    assert all(not t.is_meta for t in _parameters_and_buffers(model).values())
    x = torch.randn(2, 5, 32)
    assert torch.isfinite(model(x)).all()
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))


def test_a_model_whose_modules_reset_their_own_state_is_eager_to_the_bit():
    # the loop over every module, in construction order, each parameter drawn once
    def build():
        return nn.Sequential(
            nn.Linear(8, 8),
            posenc.KerpleBias(4),
            posenc.LearnedPositionalEmbedding(16, 8),
            posenc.RotaryEmbedding(8, max_positions=16),
            posenc.CoPE(8, 4, 8),
            nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8)),
        )

    torch.manual_seed(5)
    eager = build()
    with torch.device("meta"):
        model = build()
    model.to_empty(device="cpu")
    torch.manual_seed(5)
    _reset_every_module(model)
    _assert_same_state(model, eager)


@pytest.mark.needs_torch("2.13.0", "FSDP1's private materialisation function as in 2.13")
def test_the_fsdp1_replica_follows_torch():
    from torch.distributed.fsdp._common_utils import _FSDPDeviceHandle
    from torch.distributed.fsdp._init_utils import _materialize_meta_module

    with torch.device("meta"):
        ours, theirs = _model(), _model()
    torch.manual_seed(0)
    _materialize_like_fsdp1(ours)
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    _materialize_meta_module(theirs, cpu, set(), _FSDPDeviceHandle.from_device(cpu))
    a, e = _parameters_and_buffers(ours), _parameters_and_buffers(theirs)
    assert a.keys() == e.keys()
    for name in e:
        assert torch.equal(a[name], e[name]), name
    assert theirs[1].rope.rot_cached.is_meta  # what the RoPE fix is for
