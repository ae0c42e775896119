"""Every ``nn.Module`` of posenc, built on the meta device and initialised later.

Large models are built under ``with torch.device("meta"):`` (no memory, no
initialisation), materialised with ``to_empty(device=...)`` (uninitialised
memory) and initialised by calling ``reset_parameters()`` on every module
(torchtitan, FSDP2). Here each module of ``posenc.__all__``, found by its
type so that a new module is covered without editing this file, must come
out of that path in the state eager construction gives under the same
``torch.manual_seed``: parameters, buffers and tensor attributes (caches)
equal to the last bit, on the CPU. What holds on other devices is in the
docstrings: a reset on another device draws from that device's generator.
"""

from __future__ import annotations

import inspect

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
