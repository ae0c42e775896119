"""Absolute positional encodings: fixed sinusoids and learned tables.

* :func:`sinusoidal` is the encoding of Vaswani et al. (2017) as a pure
  function of explicit positions, in the two feature layouts and the two
  frequency conventions found in the wild.
* :class:`SinusoidalPositionalEncoding` adds it to a sequence of features
  (labml, The Annotated Transformer, AllenNLP), with a cache that grows on
  demand instead of a fixed ``max_len``.
* :class:`SinusoidalEmbedding` is a frozen lookup table of it, optionally
  scaled by one learned scalar (Hua et al. 2022).
* :class:`LearnedPositionalEmbedding` is a trained table (BERT, GPT-2).

Shapes use ``b`` batch, ``s`` sequence, ``d`` features (``dim``) and
``n = d // 2`` frequencies.
"""

from __future__ import annotations

from numbers import Integral, Real

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import (
    check_base,
    check_bool,
    check_choice,
    check_dtype,
    check_float_tensor,
    check_positions,
    check_size,
)

__all__ = [
    "LearnedPositionalEmbedding",
    "SinusoidalEmbedding",
    "SinusoidalPositionalEncoding",
    "sinusoidal",
]

LAYOUTS = ("interleaved", "concat")

# A cache grows to cover a request only when the request starts at most this
# many rows past its end; anything farther (offset 2**40, say) is computed
# directly, so memory follows what was asked for.
_MAX_CACHE_GAP = 2**16
# The smallest cache worth building; later growth doubles the cache, but by
# no more than _MAX_CACHE_GAP rows at a time.
_MIN_CACHE_ROWS = 256


def _check_probability(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:  # also rejects nan
        raise ValueError(f"{name} must be a probability in [0, 1], got {value}")
    return value


def _check_encoding(
    dim: object, base: object, layout: object, endpoint: object
) -> tuple[int, float, str, bool]:
    """Validate the settings shared by every sinusoidal encoding."""
    dim = check_size("dim", dim)
    base = check_base(base)
    layout = check_choice("layout", layout, LAYOUTS)
    endpoint = check_bool("endpoint", endpoint)
    if endpoint and dim < 4:
        raise ValueError(
            f"dim must be >= 4 when endpoint=True (frequencies divide by dim // 2 - 1), got {dim}"
        )
    return dim, base, layout, endpoint


def _check_padding_idx(padding_idx: object, n_positions: int) -> int | None:
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, Integral):
        raise TypeError(
            f"padding_idx must be None or an integer, got {type(padding_idx).__name__} "
            f"{padding_idx!r}"
        )
    padding_idx = int(padding_idx)
    if not 0 <= padding_idx < n_positions:
        raise ValueError(
            f"padding_idx must be in [0, n_positions) = [0, {n_positions}), got {padding_idx}"
        )
    return padding_idx


def _check_lookup(positions: object) -> torch.Tensor:
    """Return ``positions`` as indices into a table: checks of the metadata only.

    The range of the values is checked by the lookup itself (see
    :func:`_lookup`), so that this runs without reading the values back.
    """
    positions = check_positions("positions", positions)
    if positions.is_floating_point():
        raise ValueError(
            f"positions must be an integer tensor to index a table, got dtype {positions.dtype}"
        )
    if positions.dtype not in (torch.int32, torch.int64):
        positions = positions.long()  # F.embedding takes only int32/int64 indices
    return positions


def _lookup(
    positions: torch.Tensor, table: torch.Tensor, padding_idx: int | None = None
) -> torch.Tensor:
    """``F.embedding(positions, table)``, with a named ``IndexError`` for positions out of range.

    No host read on the way: ``F.embedding`` checks the range itself. On
    the CPU its error is caught and re-raised with the bound and the
    offending value (computed only then); on an accelerator an out-of-range
    position trips the kernel's device-side assertion instead, since
    checking on the host would synchronise every call.
    """
    try:
        return F.embedding(positions, table, padding_idx=padding_idx)  # (*, d)
    except IndexError:
        n_positions = table.shape[0]
        low, high = (int(v) for v in torch.aminmax(positions))
        bad = low if low < 0 else high
        raise IndexError(
            f"positions must lie in [0, n_positions) = [0, {n_positions}), got {bad}"
        ) from None


def _float64_device(device: torch.device) -> torch.device:
    """Where float64 angles can be formed: ``device`` unless it has no float64 (MPS)."""
    return torch.device("cpu") if device.type == "mps" else device


def _frequencies(n: int, base: float, endpoint: bool, device: torch.device) -> torch.Tensor:
    """The ``n`` angular frequencies ``base ** (-i / n)`` (``n - 1`` with ``endpoint``).

    Returns:
        torch.Tensor: float64, shape ``(n,)``.
    """
    denominator = n - 1 if endpoint else n
    exponent = torch.arange(n, dtype=torch.float64, device=device) / max(denominator, 1)
    return torch.pow(base, -exponent)


def sinusoidal(
    positions: torch.Tensor,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    endpoint: bool = False,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Sinusoidal positional encoding of Vaswani et al. (2017) at given positions.

    With ``n = dim // 2`` frequencies ``w_i = base ** (-i / n)``, ``i = 0 .. n-1``
    (``endpoint=False``, as in the paper and labml), or
    ``w_i = base ** (-i / (n - 1))`` (``endpoint=True``, as in tensor2tensor,
    AllenNLP and fairseq, whose lowest frequency is exactly ``1 / base``)::

        interleaved:  out[..., 2i] = sin(p w_i),  out[..., 2i+1] = cos(p w_i)
        concat:       out[..., i]  = sin(p w_i),  out[..., n+i]  = cos(p w_i)

    An odd ``dim`` leaves the last column zero, as AllenNLP and fairseq do.
    The angles ``p w_i`` are formed in float64, so a float32 result stays
    within 1e-6 of the exact value for positions up to ``2**20``; only then is
    the result cast to ``dtype``.

    Args:
        positions (torch.Tensor): integer or floating positions of any shape
            ``(*)``; negative and fractional positions are allowed. The
            result lives on their device.
        dim (int): number of features ``d``, a positive integer.
        base (float): the wavelength scale, finite and greater than 1.
            Default: 10000.0.
        layout (str): ``"interleaved"`` (sine and cosine of one frequency side
            by side) or ``"concat"`` (all sines, then all cosines).
            Default: ``"interleaved"``.
        endpoint (bool): divide the exponent by ``n - 1`` instead of ``n``;
            needs ``dim >= 4``. Default: False.
        dtype (torch.dtype): floating dtype of the result. Default: float32.

    Returns:
        torch.Tensor: the encoding, shape ``(*, d)``, dtype ``dtype``.

    Raises:
        TypeError: if ``positions`` is not a tensor, or an argument has the
            wrong type.
        ValueError: if ``positions`` is boolean or complex, ``dim`` is not
            positive, ``base`` is not finite and > 1, ``layout`` is unknown,
            ``dtype`` is not floating, or ``endpoint=True`` with ``dim < 4``.

    Example:
        >>> sinusoidal(torch.arange(3), 4).shape
        torch.Size([3, 4])
    """
    positions = check_positions("positions", positions)
    dim, base, layout, endpoint = _check_encoding(dim, base, layout, endpoint)
    dtype = check_dtype(dtype)
    n = dim // 2
    work = _float64_device(positions.device)

    freqs = _frequencies(n, base, endpoint, work)  # (n,)
    angles = positions.to(device=work, dtype=torch.float64).unsqueeze(-1) * freqs  # (*, n)
    sin, cos = angles.sin(), angles.cos()
    if layout == "interleaved":
        pe = torch.stack((sin, cos), dim=-1).flatten(-2)  # (*, n, 2) -> (*, 2n)
    else:
        pe = torch.cat((sin, cos), dim=-1)  # (*, 2n)
    if dim % 2:
        pe = F.pad(pe, (0, 1))  # (*, d): the odd column stays zero
    return pe.to(device=positions.device, dtype=dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a sequence of features, then dropout.

    ``forward(x, offset)`` returns ``dropout(x + pe)`` where ``pe`` holds
    positions ``offset .. offset + s - 1`` along the sequence axis, as in
    Vaswani et al. (2017) and labml's ``PositionalEncoding``. There is no
    fixed ``max_len``: the table is a cache that covers positions ``0 .. m-1``
    and grows (geometrically) when a longer or later sequence arrives. A
    request that starts more than ``2**16`` rows past the cache's end, such as
    ``offset=2**40``, is computed directly with :func:`sinusoidal` and leaves
    the cache alone, so memory follows what is asked for.

    The cache is a tensor attribute, derived from the settings alone and
    built lazily: not a buffer, so it is not in the ``state_dict`` and
    ``DistributedDataParallel`` does not broadcast it (a cache that grows to
    each rank's longest sequence would differ in size between ranks and abort
    the broadcast of buffers at every step). A move of the module (``to``,
    ``cuda``, ``to_empty``) empties it on the new device, and
    :meth:`reset_parameters` empties it, so the module can be constructed on
    the ``meta`` device. It is kept in float32 (float64 once a float64 input
    asks for it), and the encoding is cast to ``x``'s dtype before the
    addition.

    Args:
        dim (int): number of features ``d`` of the input.
        dropout (float): dropout probability applied to the sum, in ``[0, 1]``.
            Default: 0.0.
        base (float): the wavelength scale, finite and > 1. Default: 10000.0.
        layout (str): ``"interleaved"`` or ``"concat"``, see :func:`sinusoidal`.
            Default: ``"interleaved"``.
        endpoint (bool): the ``n - 1`` frequency denominator of tensor2tensor
            and AllenNLP, see :func:`sinusoidal`. Default: False.
        batch_first (bool): the input is ``(b, s, ..., d)`` if True, else
            ``(s, ...)`` with ``d`` last, such as labml's ``(s, b, d)``.
            Default: True.

    Raises:
        TypeError, ValueError: for invalid settings, as :func:`sinusoidal`,
            and ``dropout`` outside ``[0, 1]``.
    """

    def __init__(
        self,
        dim: int,
        *,
        dropout: float = 0.0,
        base: float = 10000.0,
        layout: str = "interleaved",
        endpoint: bool = False,
        batch_first: bool = True,
    ) -> None:
        super().__init__()
        self.dim, self.base, self.layout, self.endpoint = _check_encoding(
            dim, base, layout, endpoint
        )
        self.batch_first = check_bool("batch_first", batch_first)
        self.dropout = nn.Dropout(_check_probability("dropout", dropout))
        # (m, d) encodings of positions 0 .. m-1; empty until the first call. Not a
        # buffer (see the class docstring).
        self.cache = torch.empty(0, self.dim)

    def reset_cache(self) -> None:
        """Drop the cached table; it is rebuilt on demand."""
        self.cache = torch.empty(0, self.dim, device=self.cache.device)

    def reset_parameters(self) -> None:
        """Return to the state construction gives: an empty cache (there are no parameters)."""
        self.reset_cache()

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        """Empty the cache on the device the module moves to (``to``, ``to_empty``, ...)."""
        module = super()._apply(fn, *args, **kwargs)
        current = self.cache.device
        try:
            target = fn(torch.empty(0, device=current)).device
        except (RuntimeError, NotImplementedError):  # e.g. .to("cpu") of a meta cache
            return module  # _rows starts over on the device of the input
        if target != current:
            self.cache = torch.empty(0, self.dim, device=target)
        return module

    def _rows(self, start: int, stop: int, x: torch.Tensor) -> torch.Tensor:
        """Encodings of positions ``start .. stop-1`` for ``x``, float32 or float64.

        Grows ``self.cache`` first if the range starts close enough to its end.
        """
        need = torch.float64 if x.dtype == torch.float64 else torch.float32
        cached = self.cache
        if cached.device != x.device or cached.dtype not in (torch.float64, need):
            # Moved, cast down (``.half()``) or too coarse for float64: start over.
            cached = torch.empty(0, self.dim, dtype=need, device=x.device)
        have = cached.shape[0]
        if stop <= have or start == stop:
            return cached[start:stop]  # (0, d) when the sequence is empty
        if start > have + _MAX_CACHE_GAP:  # far from the cache: compute, do not store
            return self._encode(torch.arange(start, stop, device=x.device), need)
        size = max(stop, min(2 * have, have + _MAX_CACHE_GAP), _MIN_CACHE_ROWS)
        extra = self._encode(torch.arange(have, size, device=x.device), cached.dtype)
        self.cache = torch.cat((cached, extra))  # (size, d)
        return self.cache[start:stop]

    def _encode(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return sinusoidal(
            positions,
            self.dim,
            base=self.base,
            layout=self.layout,
            endpoint=self.endpoint,
            dtype=dtype,
        )

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Add the encodings of positions ``offset .. offset + s - 1`` to ``x``.

        Args:
            x (torch.Tensor): floating features, ``(b, s, ..., d)`` when
                ``batch_first`` else ``(s, ..., d)``.
            offset (int): position of the first element of the sequence, a
                non-negative integer (e.g. the length of a KV cache).
                Default: 0.

        Returns:
            torch.Tensor: ``dropout(x + pe)``, same shape and dtype as ``x``.

        Raises:
            ValueError: if ``x`` is not floating point, has too few axes or a
                last axis other than ``dim``, or ``offset`` is negative.
        """
        x = check_float_tensor("x", x)
        axis = 1 if self.batch_first else 0
        if x.ndim < axis + 2:
            shape = "(b, s, ..., dim)" if self.batch_first else "(s, ..., dim)"
            raise ValueError(f"x must have shape {shape}, got {tuple(x.shape)}")
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension dim={self.dim}, got {tuple(x.shape)}")
        offset = check_size("offset", offset, minimum=0)
        seq = x.shape[axis]

        pe = self._rows(offset, offset + seq, x).to(x.dtype)  # (s, d)
        pe = pe.view(seq, *([1] * (x.ndim - axis - 2)), self.dim)  # (s, 1.., d) to broadcast
        return self.dropout(x + pe)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
            f"endpoint={self.endpoint}, batch_first={self.batch_first}"
        )


class SinusoidalEmbedding(nn.Module):
    """A frozen table of sinusoidal encodings, looked up by position.

    Row ``p`` is ``sinusoidal(p, dim, ...)``; row ``padding_idx``, if given,
    is all zeros. With ``learnable_scale`` the output is multiplied by one
    learned scalar, the scaled sinusoidal embedding of "Transformer Quality
    in Linear Time" (Hua et al. 2022); that scalar is the only parameter, so
    it is the only tensor that receives gradients. Its initial value
    ``dim ** -0.5`` is this library's choice, as in x-transformers'
    ``ScaledSinusoidalEmbedding``, not a value taken from the paper
    (lucidrains' FLASH-pytorch starts it at 1).

    The table is a non-persistent buffer: it is derived from the settings
    alone, so it is left out of the ``state_dict`` (which holds only ``scale``
    when it exists), checkpoints stay small, and a checkpoint never
    disagrees with the code. :meth:`reset_parameters` rebuilds it, e.g. after
    ``to_empty`` from the ``meta`` device.

    ``scale`` has shape ``[1]``, not 0-d: FSDP (``FullyShardedDataParallel``
    and ``fully_shard``) rejects scalar parameters. It multiplies the lookup
    as a 0-d scalar would (broadcast, the table's dtype kept), and a state
    dict with a 0-d ``scale`` (as saved by earlier versions) still loads.

    Args:
        n_positions (int): number of rows, a positive integer.
        dim (int): number of features ``d``, a positive integer.
        padding_idx (int | None): a row in ``[0, n_positions)`` that is all
            zeros. Default: None.
        learnable_scale (bool): multiply by a learned scalar. Default: False.
        base (float): the wavelength scale, finite and > 1. Default: 10000.0.
        layout (str): ``"interleaved"`` or ``"concat"``, see :func:`sinusoidal`.
            Default: ``"interleaved"``.
        endpoint (bool): the ``n - 1`` frequency denominator, see
            :func:`sinusoidal`. Default: False.

    Attributes:
        scale (nn.Parameter | None): shape ``[1]``, initialised to
            ``dim ** -0.5``; None without ``learnable_scale``.

    Raises:
        TypeError, ValueError: for invalid settings, as :func:`sinusoidal`;
            ``ValueError`` if ``padding_idx`` is outside ``[0, n_positions)``.
    """

    def __init__(
        self,
        n_positions: int,
        dim: int,
        *,
        padding_idx: int | None = None,
        learnable_scale: bool = False,
        base: float = 10000.0,
        layout: str = "interleaved",
        endpoint: bool = False,
    ) -> None:
        super().__init__()
        self.n_positions = check_size("n_positions", n_positions)
        self.dim, self.base, self.layout, self.endpoint = _check_encoding(
            dim, base, layout, endpoint
        )
        self.padding_idx = _check_padding_idx(padding_idx, self.n_positions)
        self.learnable_scale = check_bool("learnable_scale", learnable_scale)
        # (n_positions, d), frozen and derived: not a parameter, not saved.
        self.register_buffer("table", torch.empty(self.n_positions, self.dim), persistent=False)
        if self.learnable_scale:
            # [1], not 0-d: FSDP1 and FSDP2 reject scalar parameters
            self.scale = nn.Parameter(torch.empty(1))
        else:
            self.register_parameter("scale", None)
        self.reset_parameters()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # older state dicts hold scale as a 0-d tensor
        value = state_dict.get(prefix + "scale")
        if isinstance(value, torch.Tensor) and value.dim() == 0:
            state_dict[prefix + "scale"] = value.reshape(1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Rebuild the table and set ``scale`` to ``dim ** -0.5``."""
        positions = torch.arange(self.n_positions, device=self.table.device)
        self.table.copy_(
            sinusoidal(
                positions,
                self.dim,
                base=self.base,
                layout=self.layout,
                endpoint=self.endpoint,
                dtype=self.table.dtype,
            )
        )
        if self.padding_idx is not None:
            self.table[self.padding_idx].zero_()
        if self.scale is not None:
            self.scale.fill_(self.dim**-0.5)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """Look up the encodings of integer ``positions``.

        Args:
            positions (torch.Tensor): integer indices of any shape ``(*)``,
                each in ``[0, n_positions)``.

        Returns:
            torch.Tensor: shape ``(*, d)``, the table's dtype.

        Raises:
            ValueError: if ``positions`` is not an integer tensor.
            IndexError: if a position lies outside ``[0, n_positions)``.
        """
        positions = _check_lookup(positions)
        out = _lookup(positions, self.table)  # (*, d)
        if self.scale is not None:
            # a 0-d view: broadcasts and keeps the table's dtype, as a scalar does
            out = out * self.scale.reshape(())
        return out

    def extra_repr(self) -> str:
        return (
            f"n_positions={self.n_positions}, dim={self.dim}, padding_idx={self.padding_idx}, "
            f"learnable_scale={self.learnable_scale}, base={self.base:g}, "
            f"layout={self.layout!r}, endpoint={self.endpoint}"
        )


class LearnedPositionalEmbedding(nn.Module):
    """A trained table of position embeddings (BERT, GPT-2), like ``nn.Embedding``.

    The weight is initialised from ``N(0, 0.02**2)``, as Hugging Face's
    BERT and GPT-2 initialise every embedding table (``_init_weights`` with
    ``initializer_range = 0.02``; ``nn.Embedding`` alone would use
    ``N(0, 1)``). The models' original code differs: OpenAI's GPT-2
    (``src/model.py``) draws its position table ``wpe`` from a normal with
    standard deviation 0.01 (its token table with 0.02), and Google's BERT
    (``modeling.py``) uses TensorFlow's ``truncated_normal_initializer`` with
    ``stddev=0.02``, which redraws values beyond two standard deviations, so
    its entries spread by about 0.0176. Call ``nn.init.normal_`` or
    ``nn.init.trunc_normal_`` on ``weight`` to start as either does. Row
    ``padding_idx``, if given, starts at zero and never receives a gradient,
    as with ``nn.Embedding``.

    Args:
        n_positions (int): number of rows (the longest sequence), positive.
        dim (int): number of features ``d``, positive.
        padding_idx (int | None): a row in ``[0, n_positions)`` kept at zero
            and excluded from gradients. Default: None.

    Raises:
        TypeError, ValueError: if a size is not a positive integer;
            ``ValueError`` if ``padding_idx`` is outside ``[0, n_positions)``.
    """

    def __init__(self, n_positions: int, dim: int, *, padding_idx: int | None = None) -> None:
        super().__init__()
        self.n_positions = check_size("n_positions", n_positions)
        self.dim = check_size("dim", dim)
        self.padding_idx = _check_padding_idx(padding_idx, self.n_positions)
        self.weight = nn.Parameter(torch.empty(self.n_positions, self.dim))  # (n_positions, d)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Draw the weight from ``N(0, 0.02**2)`` (Hugging Face's BERT, GPT-2); zero the padding row."""
        nn.init.normal_(self.weight, mean=0.0, std=0.02)
        if self.padding_idx is not None:
            self.weight[self.padding_idx].zero_()

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """Look up the embeddings of integer ``positions``.

        Args:
            positions (torch.Tensor): integer indices of any shape ``(*)``,
                each in ``[0, n_positions)``.

        Returns:
            torch.Tensor: shape ``(*, d)``.

        Raises:
            ValueError: if ``positions`` is not an integer tensor.
            IndexError: if a position lies outside ``[0, n_positions)``.
        """
        positions = _check_lookup(positions)
        return _lookup(positions, self.weight, self.padding_idx)  # (*, d)

    def extra_repr(self) -> str:
        return f"n_positions={self.n_positions}, dim={self.dim}, padding_idx={self.padding_idx}"
