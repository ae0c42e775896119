"""Argument checks shared by every module.

Each check raises with a one-line message that names the argument and what
was expected, so a caller never has to decode a shape error from deep
inside torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

import torch

__all__ = [
    "broadcast_shapes",
    "check_base",
    "check_bool",
    "check_choice",
    "check_dtype",
    "check_even",
    "check_float_tensor",
    "check_positions",
    "check_positive_float",
    "check_size",
    "check_tensor",
]


def check_size(name: str, value: object, *, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``.

    ``bool`` is rejected although it is an ``int`` subclass: ``dim=True``
    is always a mistake.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value}")
    return value


def check_even(name: str, value: object, *, minimum: int = 2) -> int:
    """Return ``value`` if it is an even integer ``>= minimum``."""
    value = check_size(name, value, minimum=minimum)
    if value % 2:
        raise ValueError(f"{name} must be even, got {value}")
    return value


def check_positive_float(name: str, value: object, *, greater_than: float = 0.0) -> float:
    """Return ``value`` as a ``float`` if it is finite and ``> greater_than``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= greater_than:
        raise ValueError(
            f"{name} must be a finite number greater than {greater_than:g}, got {value}"
        )
    return value


def check_base(base: object) -> float:
    """The frequency base of sinusoids and RoPE: finite and greater than 1."""
    return check_positive_float("base", base, greater_than=1.0)


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool`` (``0``/``1`` and strings are mistakes)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value


def check_dtype(dtype: object) -> torch.dtype:
    """Return ``dtype`` if it is a floating-point ``torch.dtype``."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {type(dtype).__name__}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype}")
    return dtype


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value  # type: ignore[return-value]


def check_tensor(name: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is a tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def check_float_tensor(name: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is a floating-point tensor."""
    value = check_tensor(name, value)
    if not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    return value


def check_positions(name: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is an integer or floating-point tensor of positions."""
    value = check_tensor(name, value)
    if value.dtype == torch.bool or value.dtype.is_complex:
        raise ValueError(
            f"{name} must be an integer or floating-point tensor, got dtype {value.dtype}"
        )
    return value


def broadcast_shapes(*shapes: Iterable[int]) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` in plain Python, raising ``RuntimeError`` as it does.

    The torch function imports sympy on its first call (seconds, and hundreds
    of modules); the checks here run on every call and only compare sizes.
    """
    shapes = [tuple(shape) for shape in shapes]
    ndim = 0
    for shape in shapes:  # a loop, not max(genexpr): torch.compile traces it
        ndim = max(ndim, len(shape))
    out = []
    for axis in range(-ndim, 0):
        size = 1
        for shape in shapes:
            n = shape[axis] if len(shape) >= -axis else 1
            if n != 1:
                if size not in (1, n):
                    raise RuntimeError(f"shapes {shapes} do not broadcast")
                size = n
        out.append(size)
    return tuple(out)
