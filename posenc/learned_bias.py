"""Attention biases that are learned functions of the distance: KERPLE and FIRE.

T5 learns one value per bucket of distances and ALiBi fixes one line per
head. The modules here learn a *function* of the distance instead, with few
parameters, so that the bias is defined at every distance, also at those
never seen in training:

* :class:`KerpleBias` (Chi et al. 2022): two learned numbers per head,
  ``-r1 * log(1 + r2 * |i - j|)`` or ``-r1 * |i - j| ** r2``, each a
  conditionally positive definite kernel of the two positions.
* :class:`FireBias` (Li et al., arXiv 2023, ICLR 2024): a small MLP of the distance divided by
  the query position, both after a learned log transform, so that one
  function on ``[0, 1]`` serves every length ("progressive interpolation").

Both return the ``(n_heads, q_len, k_len)`` bias that is added to the
attention scores, with queries aligned to the end of the keys as in
:func:`posenc.alibi_bias`: query ``i`` sits at absolute position
``i + k_len - q_len`` (the newest tokens of a cached sequence) and key ``j``
at ``j``; or at the given ``q_positions`` and ``k_positions`` (packed
documents, left-padded batches), batched ``(b, n_heads, q, k)``. Masking
future keys is the caller's business, as for ALiBi
(:func:`posenc.attention_mask`). Both form the bias in float32 whatever the
dtype of their parameters and cast it once.

Shapes use ``b`` batch rows, ``h`` heads (``n_heads``), ``q`` queries
(``q_len``) and ``k`` keys (``k_len``).

Cost with a KV cache and fused attention kernels. KERPLE's bias is a
function of the distance alone: a kernel can compute it from the two
indices (as FlashAttention does for ALiBi's slopes), and a decoding step
needs one row, ``k`` values per head, computed from the distances; nothing
of size ``q * k`` need exist. FIRE's bias depends on the distance and,
beyond the threshold, on the query position: up to the threshold it too is
a table of ``k`` values per head (a function of the distance), beyond it
each query row needs its own ``k`` evaluations of the MLP. ``forward``
returns the dense ``[h, q, k]`` tensor, which is what an unfused attention
(or SDPA's ``attn_mask``) adds, and a dense bias of that size is what rules
out the fastest kernels at long lengths; ``score_mod()`` gives the same
bias one score at a time for PyTorch's FlexAttention, which compiles it
into its kernel (FIRE's MLP then runs once per score).

References:
    Ta-Chung Chi, Ting-Han Fan, Peter J. Ramadge, Alexander I. Rudnicky,
    "KERPLE: Kernelized Relative Positional Embedding for Length
    Extrapolation", NeurIPS 2022, https://arxiv.org/abs/2205.09921, and its
    code https://github.com/chijames/KERPLE (``ParallelKerpleLog`` and
    ``ParallelKerplePower`` in ``megatron/mpu/layers.py``).

    Shanda Li, Chong You, Guru Guruganesh, Joshua Ainslie, Santiago Ontanon,
    Manzil Zaheer, Sumit Sanghai, Yiming Yang, Sanjiv Kumar, Srinadh
    Bhojanapalli, "Functional Interpolation for Relative Positions Improves
    Long Context Transformers", ICLR 2024, https://arxiv.org/abs/2310.04418
    (the pseudo-code in its appendix).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_choice, check_positive_float, check_size
from posenc._positions import bias_positions, index_positions, relative_positions

__all__ = ["FireBias", "KerpleBias"]

# The official KERPLE code clamps every kernel parameter to at least 1e-2
# (``self.eps = 1e-2``) and the power to at most 2, in place, in ``forward``
# before each use.
_KERPLE_FLOOR = 0.01
_KERPLE_MAX_POWER = 2.0
# Uniform initial ranges of the official code: ``torch.rand(...) * scale``
# with scale 2 for the exponent-like ``bias_p`` and 1 for ``bias_a``.
_KERPLE_P_SCALE = 2.0
_KERPLE_A_SCALE = 1.0
# An initial draw below the floor starts this far above it (the map below
# reaches the floor itself only in the limit).
_KERPLE_INIT_MARGIN = 1e-6


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a bias is formed in: float32, or float64 for a float64 module."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _autocast_off(device: torch.device):
    """Keep autocast from running a bias's matrix products in bfloat16 or float16."""
    available = getattr(torch.amp, "is_autocast_available", None)  # torch 2.4 and later
    if available is None:  # torch 2.3: autocast refuses a device type it lacks ("meta")
        try:
            return torch.autocast(device.type, enabled=False)
        except RuntimeError:
            return contextlib.nullcontext()
    if available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def _inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    """``x`` with ``softplus(x) = y`` for ``y > 0``, in float64."""
    y = y.double()
    return torch.where(y > 20.0, y, torch.log(torch.expm1(y)))


class KerpleBias(nn.Module):
    """KERPLE's learned kernel bias (Chi et al. 2022).

    For a query at position ``p_i = i + k_len - q_len`` and a key at ``j``,
    head ``h`` adds::

        kind="log":    out[h, i, j] = -r1[h] * log(1 + r2[h] * |p_i - j|)
        kind="power":  out[h, i, j] = -r1[h] * |p_i - j| ** r2[h]

    with ``r1, r2 > 0`` and, for ``"power"``, ``r2 <= 2``: the ranges in
    which the paper derives both biases, as functions of the positions ``m``
    and ``n``, as conditionally positive definite kernels (for the power,
    ``-|m - n| ** p`` is one exactly when ``0 < p <= 2``). The paper shows
    that a constant offset turns such a kernel into a positive definite one
    on the positions of a sequence, and the softmax ignores that constant.
    The bias is symmetric in ``p_i - j``; the official code, which is
    causal, puts 0 at future keys instead, which the causal mask removes
    either way.

    Parameterisation. The official code keeps the constraints by clamping
    the parameters in place (their ``.data``) inside ``forward``, before
    each use (to ``>= 0.01``, and ``<= 2`` for the power). Here the
    constraints hold by construction, whatever an optimiser does to the raw
    parameters ``r1_raw`` and ``r2_raw``::

        r1 = 0.01 + softplus(r1_raw)                       (both kinds)
        r2 = 0.01 + softplus(r2_raw)                       (kind="log")
        r2 = 2 - (2 - 0.01) * sigmoid(-r2_raw)             (kind="power")

    so ``r1 >= 0.01`` and ``r2`` lies in ``[0.01, 2]`` (``"power"``) or
    ``[0.01, inf)`` (``"log"``): the official code's range, with the same
    floor. The power's map is written as ``2`` minus a non-negative number
    so that rounding can never carry it above 2. The range is the same, the
    training dynamics are not: a clamped parameter pushed below the floor
    sits exactly on it, while here the floor is reached only in the limit
    and every step is scaled by the slope of softplus or sigmoid.

    Precision. The official code casts its distance matrix to the dtype of
    the scores (``diff.to(x.dtype)``), bfloat16 in the paper's runs, which
    rounds integer distances above 256 (to multiples of 64 between 8192 and
    16384). Here the bias is formed in float32 (float64 for a float64
    module) whatever the dtype of the parameters, and cast to it once at the
    end: after ``.to(torch.bfloat16)`` it equals the float32 bias of the same
    (rounded) parameters cast to bfloat16.

    Initialisation, as the official code: per head, the parameter that the
    code calls ``bias_p`` is drawn from ``U(0, 2)`` and ``bias_a`` from
    ``U(0, 1)``, then raised to the floor 0.01. For ``"log"`` the code's
    kernel is ``-bias_p * log(1 + bias_a * d)``, so ``r1 ~ U(0, 2)`` and
    ``r2 ~ U(0, 1)``; for ``"power"`` it is ``-bias_a * d ** bias_p``, so
    ``r1 ~ U(0, 1)`` and ``r2 ~ U(0, 2)``. A draw below the floor starts
    ``1e-6`` above it, where the official code would start exactly on it.

    Args:
        n_heads (int): number of attention heads, a positive integer.
        kind (str): ``"log"`` or ``"power"``, the kernel.

    Attributes:
        r1_raw (nn.Parameter): shape ``[h]``, the unconstrained parameter
            behind ``r1``.
        r2_raw (nn.Parameter): shape ``[h]``, the unconstrained parameter
            behind ``r2``.

    Raises:
        TypeError: if ``n_heads`` is not an integer.
        ValueError: if ``n_heads < 1`` or ``kind`` is not ``"log"`` or
            ``"power"``.

    Cost: the bias is a function of the distance alone (see the module
    docstring): one row of ``k`` values per head and decoding step with a
    KV cache, and computable inside a fused kernel from the indices.

    Example:
        >>> bias = KerpleBias(8, kind="power")
        >>> bias(4, 6).shape
        torch.Size([8, 4, 6])
    """

    def __init__(self, n_heads: int, *, kind: str = "log") -> None:
        super().__init__()
        self.n_heads = check_size("n_heads", n_heads)
        self.kind = check_choice("kind", kind, ("log", "power"))
        self.r1_raw = nn.Parameter(torch.empty(self.n_heads))
        self.r2_raw = nn.Parameter(torch.empty(self.n_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw ``r1`` and ``r2`` as the official code does (see the class docstring)."""
        p = torch.rand(self.n_heads, dtype=torch.float64) * _KERPLE_P_SCALE
        a = torch.rand(self.n_heads, dtype=torch.float64) * _KERPLE_A_SCALE
        r1, r2 = (p, a) if self.kind == "log" else (a, p)
        low = _KERPLE_FLOOR + _KERPLE_INIT_MARGIN
        r1 = r1.clamp_min(low)
        r2 = r2.clamp_min(low)
        raw1 = _inverse_softplus(r1 - _KERPLE_FLOOR)
        if self.kind == "log":
            raw2 = _inverse_softplus(r2 - _KERPLE_FLOOR)
        else:
            # r2 = 2 - (2 - floor) * sigmoid(-raw)  <=>  raw = -logit((2 - r2) / (2 - floor))
            r2 = r2.clamp_max(_KERPLE_MAX_POWER - _KERPLE_INIT_MARGIN)
            raw2 = -torch.logit((_KERPLE_MAX_POWER - r2) / (_KERPLE_MAX_POWER - _KERPLE_FLOOR))
        with torch.no_grad():
            self.r1_raw.copy_(raw1)
            self.r2_raw.copy_(raw2)

    def _r1_r2(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``r1`` and ``r2`` formed in ``dtype`` from the raw parameters, shape ``[h]`` each."""
        r1 = _KERPLE_FLOOR + F.softplus(self.r1_raw.to(dtype))
        r2_raw = self.r2_raw.to(dtype)
        if self.kind == "log":
            r2 = _KERPLE_FLOOR + F.softplus(r2_raw)
        else:
            r2 = _KERPLE_MAX_POWER - (_KERPLE_MAX_POWER - _KERPLE_FLOOR) * torch.sigmoid(-r2_raw)
        return r1, r2

    @property
    def r1(self) -> torch.Tensor:
        """The scale ``r1 >= 0.01`` of each head, shape ``[h]``."""
        return self._r1_r2(self.r1_raw.dtype)[0]

    @property
    def r2(self) -> torch.Tensor:
        """The kernel's inner parameter, shape ``[h]``: ``>= 0.01``, and ``<= 2`` for ``"power"``."""
        return self._r1_r2(self.r2_raw.dtype)[1]

    def _bias(self, r1: torch.Tensor, r2: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
        """``-r1 * log(1 + r2 d)`` or ``-r1 * d ** r2``, elementwise on broadcasting tensors."""
        if self.kind == "log":
            kernel = r1 * torch.log1p(r2 * distance)
        else:
            kernel = r1 * distance.pow(r2)
        return 0.0 - kernel  # not -kernel: distance 0 gives +0.0, not -0.0

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys, or at given positions.

        With positions, ``|p_i - j|`` is ``|q_positions[..., i] -
        k_positions[..., j]|``: packed documents (positions restarting at 0
        in each) and left-padded batches (each row counting from its first
        real token). With ``arange`` positions the result equals the length
        form. Formed in float32 (float64 for a float64 module), cast once to
        the dtype of the parameters.

        Args:
            q_len (int | None): number of queries, ``>= 0``; required unless
                the positions are given.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions of the queries, ``[q]`` or batched
                ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: integer positions of the keys, ``[k]`` or
                ``[b, k]``.

        Returns:
            torch.Tensor: bias of shape ``[h, q, k]`` (``[b, h, q, k]`` for
            batched positions) on the device and in the dtype of the
            parameters, to be broadcast against scores ``[b, h, q, k]``.

        Raises:
            TypeError: if a length is not an integer or a position argument
                not a tensor.
            ValueError: if a length is negative or ``q_len > k_len``; lengths
                and positions mixed or only one position tensor given; a
                position tensor not an integer tensor of one or two axes, or
                the two of different batch sizes.
        """
        dtype = self.r1_raw.dtype
        q_pos, k_pos = bias_positions(
            q_len, k_len, q_positions, k_positions, device=self.r1_raw.device
        )
        r1, r2 = self._r1_r2(_work_dtype(dtype))  # [h] each
        distance = relative_positions(q_pos, k_pos).abs().to(r1.dtype)  # [q, k] or [b, q, k]
        bias = self._bias(r1[:, None, None], r2[:, None, None], distance.unsqueeze(-3))
        return bias.to(dtype)  # [..., h, q, k]

    def score_mod(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> Callable[..., torch.Tensor]:
        """This bias as a FlexAttention ``score_mod``, one score at a time.

        Returns ``score_mod(score, b, h, q_idx, kv_idx) -> score + bias``, the
        function ``torch.nn.attention.flex_attention.flex_attention`` applies
        to each score, with the bias of :meth:`forward` (formed in float32,
        cast to the score's dtype). Query ``q_idx`` sits at
        ``q_idx + k_len - q_len`` (``q_idx`` when no lengths are given) and
        key ``kv_idx`` at ``kv_idx``, or at ``q_positions[b, q_idx]`` and
        ``k_positions[b, kv_idx]`` (``[q_idx]``, ``[kv_idx]`` unbatched).

        ``r1`` and ``r2`` are formed when ``score_mod()`` is called (with
        their autograd graph): call it once per forward pass.

        Args:
            q_len (int | None): number of queries, ``>= 0``; ``None`` with
                ``k_len=None`` for self-attention (``q_len == k_len``).
            k_len (int | None): number of keys, ``>= q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions ``[q]`` or ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: ``[k]`` or ``[b, k]``.

        Returns:
            Callable: ``score_mod(score, b, h, q_idx, kv_idx)`` on tensors that
            broadcast together; ``score + bias`` in the dtype of ``score``.

        Raises:
            TypeError: as :meth:`forward`.
            ValueError: as :meth:`forward`.

        Example:
            >>> bias = KerpleBias(4)
            >>> q = k = v = torch.randn(1, 4, 6, 8)
            >>> from torch.nn.attention.flex_attention import flex_attention
            >>> out = flex_attention(q, k, v, score_mod=bias.score_mod())
        """
        query_position, key_position = index_positions(
            q_len, k_len, q_positions, k_positions, device=self.r1_raw.device
        )
        r1, r2 = self._r1_r2(_work_dtype(self.r1_raw.dtype))  # [h] each

        def score_mod(score, b, h, q_idx, kv_idx):
            distance = (key_position(b, kv_idx) - query_position(b, q_idx)).abs().to(r1.dtype)
            return score + self._bias(r1[h], r2[h], distance).to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, kind={self.kind!r}"


# FIRE's pseudo-code adds this to the log-normaliser so that a normaliser of
# 0 (threshold and query position both 0) gives 0 rather than 0 / 0.
_FIRE_EPS = 1e-6


class FireBias(nn.Module):
    """FIRE: functional interpolation for relative positions (Li et al., arXiv 2023, ICLR 2024).

    For a query at position ``p_i = i + k_len - q_len`` and a key at ``j``,
    head ``h`` adds::

        out[h, i, j] = f(psi(|p_i - j|) / (psi(max(L, p_i)) + 1e-6))[h]
        psi(x) = log(|c| * x + 1)

    where ``f`` is a small MLP from one input to one output per head
    (``Linear(1, hidden) -> ReLU -> Linear(hidden, n_heads)``), ``c`` scales
    the log transform and ``L`` is the threshold. For the causal entries
    (``j <= p_i``) this is the paper's ``f(psi(i - j) / psi(max(L, i)))``:

    * a query beyond the threshold (``p_i > L``) divides by ``psi(p_i)``,
      so its argument runs over ``[0, 1]`` whatever the length: the distance
      as a fraction of the query's position, which is the "progressive
      interpolation" that lets one function serve every length;
    * a query at or below the threshold divides by the constant
      ``psi(L)``, so on short inputs the bias is a function of the distance
      alone and nearby tokens are not squeezed together (the paper's
      threshold for short sequences);
    * the log transform ``psi`` spreads the small distances apart before
      the division, so that nearby keys stay distinguishable.

    Keys after the query (``j > p_i``) get the bias of the distance
    ``|p_i - j|``, as the paper's pseudo-code computes it (its
    ``torch.abs(self.c * rel_distance)``); their argument can exceed 1.
    The paper defines FIRE for causal attention; the causal mask, which is
    the caller's business as for :func:`posenc.alibi_bias`, removes them.

    Learned ``c`` and ``L``, kept positive as in the paper's pseudo-code:
    the parameter ``c`` (initialised to ``c``) enters as ``|c|``, and
    ``L = |threshold_multiplier * initial_threshold|`` with the learned
    ``threshold_multiplier`` (initialised to 1) and the fixed
    ``initial_threshold`` (a buffer, ``threshold``). A learned multiplier
    rather than ``L`` itself lets an ordinary learning rate move a
    threshold of hundreds. Neither can become negative; if an optimiser
    drives one to exactly 0 the bias stays finite (``psi = 0`` gives the
    argument 0, thanks to the ``1e-6``). The MLP has PyTorch's default
    ``nn.Linear`` initialisation, as in the pseudo-code.

    Args:
        n_heads (int): number of attention heads, a positive integer.
        hidden (int): width of the MLP's hidden layer, a positive integer
            (the paper uses 32).
        c (float): initial value of ``c``, finite and > 0 (the paper: 0.1).
        threshold (float): initial threshold ``L``, finite and > 0 (the
            paper: 512, for training on 512 or more tokens).

    Attributes:
        mlp (nn.Sequential): the function ``f``.
        c (nn.Parameter): shape ``[1]``, the log transform's scale (used as
            ``|c|``).
        threshold_multiplier (nn.Parameter): shape ``[1]``, initialised to 1.
        initial_threshold (torch.Tensor): scalar buffer, ``threshold``.

    The two learned scalars are held as ``[1]`` tensors, not 0-d ones:
    FSDP (``FullyShardedDataParallel`` and ``fully_shard``) rejects scalar
    parameters. A state dict saved with 0-d ``c`` and
    ``threshold_multiplier`` (as saved by earlier versions) still loads.

    Raises:
        TypeError: if a size is not an integer or ``c``, ``threshold`` not a
            real number.
        ValueError: if a size is less than 1, or ``c`` or ``threshold`` is
            not a finite number greater than 0.

    Cost: up to the threshold the bias is a function of the distance (one
    table of ``k`` values per head serves every query); beyond it each query
    row has its own normaliser, so with a KV cache every decoding step
    evaluates the MLP at ``k`` new arguments, and a fused kernel must either
    evaluate ``f`` per pair or read a dense ``[h, q, k]`` bias.

    Example:
        >>> bias = FireBias(8, threshold=16.0)
        >>> bias(4, 6).shape
        torch.Size([8, 4, 6])
    """

    def __init__(
        self,
        n_heads: int,
        *,
        hidden: int = 32,
        c: float = 0.1,
        threshold: float = 512.0,
    ) -> None:
        super().__init__()
        self.n_heads = check_size("n_heads", n_heads)
        self.hidden = check_size("hidden", hidden)
        # the initial values, for reset_parameters
        self._c_init = check_positive_float("c", c)
        self._threshold_init = check_positive_float("threshold", threshold)
        self.mlp = nn.Sequential(
            nn.Linear(1, self.hidden), nn.ReLU(), nn.Linear(self.hidden, self.n_heads)
        )
        # [1], not 0-d: FSDP1 and FSDP2 reject scalar parameters
        self.c = nn.Parameter(torch.tensor([self._c_init]))
        self.threshold_multiplier = nn.Parameter(torch.tensor([1.0]))
        self.register_buffer("initial_threshold", torch.tensor(self._threshold_init))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # older state dicts hold the two learned scalars as 0-d tensors
        for name in ("c", "threshold_multiplier"):
            value = state_dict.get(prefix + name)
            if isinstance(value, torch.Tensor) and value.dim() == 0:
                state_dict[prefix + name] = value.reshape(1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as construction does: the MLP's layers in order, ``c``, the threshold.

        The two ``nn.Linear`` layers draw their weights in the order
        construction draws them, so that under the same
        ``torch.manual_seed`` a module reset after ``to_empty`` holds the
        values of one built directly on that device. The layers initialise
        themselves too, so a loop that resets every module draws them again
        (the same distribution), and FSDP1, which resets this module while
        its MLP is still on the meta device and then each layer, gives the
        values of construction.
        """
        for layer in self.mlp:
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()
        self.c.fill_(self._c_init)
        self.threshold_multiplier.fill_(1.0)
        self.initial_threshold.fill_(self._threshold_init)

    @property
    def threshold(self) -> torch.Tensor:
        """The current threshold ``L = |threshold_multiplier * initial_threshold|`` (scalar)."""
        return (self.threshold_multiplier * self.initial_threshold).abs().reshape(())

    def _settings(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``|c|`` and ``L`` formed in ``dtype`` (scalars)."""
        c = self.c.to(dtype).abs().reshape(())
        multiplier = self.threshold_multiplier.to(dtype).reshape(())
        threshold = (multiplier * self.initial_threshold.to(dtype)).abs()
        return c, threshold

    @staticmethod
    def _argument(
        c: torch.Tensor,
        threshold: torch.Tensor,
        distance: torch.Tensor,
        query_pos: torch.Tensor,
    ) -> torch.Tensor:
        """``psi(d) / (psi(max(L, p)) + 1e-6)``, elementwise on broadcasting float tensors."""
        log_distance = torch.log1p(c * distance)  # psi(|p_i - j|)
        log_normaliser = torch.log1p(c * torch.maximum(query_pos, threshold)) + _FIRE_EPS
        return log_distance / log_normaliser

    def _normalized_distance(
        self, q_len, k_len, q_positions, k_positions, dtype: torch.dtype
    ) -> torch.Tensor:
        c, threshold = self._settings(dtype)
        q_pos, k_pos = bias_positions(q_len, k_len, q_positions, k_positions, device=c.device)
        distance = relative_positions(q_pos, k_pos).abs().to(dtype)  # [q, k] or [b, q, k]
        query_pos = q_pos.to(dtype).unsqueeze(-1)  # [q, 1] or [b, q, 1]
        return self._argument(c, threshold, distance, query_pos)  # [..., q, k]

    def normalized_distance(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The MLP's argument ``psi(|p_i - j|) / (psi(max(L, p_i)) + 1e-6)``.

        Args:
            q_len (int | None): number of queries, ``>= 0``; required unless
                the positions are given.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions of the queries (``p_i``), ``[q]``
                or batched ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: integer positions of the keys, ``[k]`` or
                ``[b, k]``.

        Returns:
            torch.Tensor: shape ``[q, k]`` (``[b, q, k]`` for batched
            positions), formed in float32 (float64 for a float64 module) and
            returned on the device and in the dtype of the parameters; in
            ``[0, 1]`` on the causal entries.

        Raises:
            TypeError: if a length is not an integer or a position argument
                not a tensor.
            ValueError: as :meth:`forward`.
        """
        dtype = self.c.dtype
        x = self._normalized_distance(q_len, k_len, q_positions, k_positions, _work_dtype(dtype))
        return x.to(dtype)

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys, or at given positions.

        With positions, ``p_i = q_positions[..., i]`` (the normaliser's query
        position too) and the key sits at ``k_positions[..., j]``: packed
        documents (positions restarting at 0 in each) and left-padded
        batches (each row counting from its first real token). With
        ``arange`` positions the result equals the length form.

        Precision: the argument and the MLP are computed in float32 (float64
        for a float64 module), with autocast off, whatever the dtype of the
        parameters, and the bias is cast to that dtype once at the end.

        Args:
            q_len (int | None): number of queries, ``>= 0``; required unless
                the positions are given.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions of the queries, ``[q]`` or batched
                ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: integer positions of the keys, ``[k]`` or
                ``[b, k]``.

        Returns:
            torch.Tensor: bias of shape ``[h, q, k]`` (``[b, h, q, k]`` for
            batched positions) on the device and in the dtype of the
            parameters, to be broadcast against scores ``[b, h, q, k]``.

        Raises:
            TypeError: if a length is not an integer or a position argument
                not a tensor.
            ValueError: if a length is negative or ``q_len > k_len``; lengths
                and positions mixed or only one position tensor given; a
                position tensor not an integer tensor of one or two axes, or
                the two of different batch sizes.
        """
        dtype = self.c.dtype
        work = _work_dtype(dtype)
        first, activation, last = self.mlp
        with _autocast_off(self.c.device):
            x = self._normalized_distance(q_len, k_len, q_positions, k_positions, work)
            hidden = activation(
                F.linear(x.unsqueeze(-1), first.weight.to(work), first.bias.to(work))
            )
            out = F.linear(hidden, last.weight.to(work), last.bias.to(work))  # [..., q, k, h]
        return out.movedim(-1, -3).to(dtype)  # [..., h, q, k]

    def score_mod(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> Callable[..., torch.Tensor]:
        """This bias as a FlexAttention ``score_mod``, one score at a time.

        Returns ``score_mod(score, b, h, q_idx, kv_idx) -> score + bias``, the
        function ``torch.nn.attention.flex_attention.flex_attention`` applies
        to each score, with the bias of :meth:`forward` formed in float32 and
        cast to the score's dtype. The MLP is evaluated per score as a sum
        over its ``hidden`` units written out term by term (a ``score_mod``
        must be pointwise to compile into FlexAttention's kernel), so it
        agrees with :meth:`forward` to float32 rounding, not bit for bit.
        Query ``q_idx`` sits at ``q_idx + k_len - q_len`` (``q_idx`` when no
        lengths are given) and key ``kv_idx`` at ``kv_idx``, or at
        ``q_positions[b, q_idx]`` and ``k_positions[b, kv_idx]``
        (``[q_idx]``, ``[kv_idx]`` unbatched).

        The parameters are read when ``score_mod()`` is called (with their
        autograd graph): call it once per forward pass.

        Args:
            q_len (int | None): number of queries, ``>= 0``; ``None`` with
                ``k_len=None`` for self-attention (``q_len == k_len``).
            k_len (int | None): number of keys, ``>= q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions ``[q]`` or ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: ``[k]`` or ``[b, k]``.

        Returns:
            Callable: ``score_mod(score, b, h, q_idx, kv_idx)`` on tensors that
            broadcast together; ``score + bias`` in the dtype of ``score``.

        Raises:
            TypeError: as :meth:`forward`.
            ValueError: as :meth:`forward`.

        Example:
            >>> bias = FireBias(4, threshold=16.0)
            >>> q = k = v = torch.randn(1, 4, 6, 8)
            >>> from torch.nn.attention.flex_attention import flex_attention
            >>> out = flex_attention(q, k, v, score_mod=bias.score_mod())
        """
        query_position, key_position = index_positions(
            q_len, k_len, q_positions, k_positions, device=self.c.device
        )
        work = _work_dtype(self.c.dtype)
        # [1]-shaped, read as [0] below: eager FlexAttention's backward cannot
        # return the gradient of a 0-d tensor captured by a score_mod
        c, threshold = (t.reshape(1) for t in self._settings(work))
        first, activation, last = self.mlp
        w1, b1 = first.weight.to(work)[:, 0], first.bias.to(work)  # [hidden] each
        w2, b2 = last.weight.to(work), last.bias.to(work)  # [h, hidden], [h]
        argument = self._argument

        def score_mod(score, b, h, q_idx, kv_idx):
            query_pos = query_position(b, q_idx)
            distance = (key_position(b, kv_idx) - query_pos).abs().to(work)
            x = argument(c[0], threshold[0], distance, query_pos.to(work))
            bias = b2[h]
            for unit in range(
                w1.shape[0]
            ):  # f(x)[h] = b2[h] + sum_u w2[h, u] relu(w1[u] x + b1[u])
                bias = bias + w2[h, unit] * activation(w1[unit] * x + b1[unit])
            return score + bias.to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        threshold = self.initial_threshold
        value = self._threshold_init if threshold.is_meta else threshold.item()
        return f"n_heads={self.n_heads}, hidden={self.hidden}, threshold={value:g}"
