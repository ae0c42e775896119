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
at ``j``. Masking future keys is the caller's business, as for ALiBi.

Shapes use ``h`` heads (``n_heads``), ``q`` queries (``q_len``) and ``k``
keys (``k_len``).

Cost with a KV cache and fused attention kernels. KERPLE's bias is a
function of the distance alone: a kernel can compute it from the two
indices (as FlashAttention does for ALiBi's slopes, or through a
``score_mod`` of PyTorch's FlexAttention), and a decoding step needs one
row, ``k`` values per head, computed from the distances; nothing of size
``q * k`` need exist. FIRE's bias depends on the distance and, beyond the
threshold, on the query position: up to the threshold it too is a table of
``k`` values per head (a function of the distance), beyond it each query
row needs its own ``k`` evaluations of the MLP. These modules return the
dense ``[h, q, k]`` tensor, which is what an unfused attention adds; a dense
bias of that size is what rules out the fastest kernels at long lengths.

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

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_choice, check_positive_float, check_size
from posenc.alibi import _check_lengths, _relative_positions

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
    16384). Here the distances take the dtype of the parameters.

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

    @property
    def r1(self) -> torch.Tensor:
        """The scale ``r1 >= 0.01`` of each head, shape ``[h]``."""
        return _KERPLE_FLOOR + F.softplus(self.r1_raw)

    @property
    def r2(self) -> torch.Tensor:
        """The kernel's inner parameter, shape ``[h]``: ``>= 0.01``, and ``<= 2`` for ``"power"``."""
        if self.kind == "log":
            return _KERPLE_FLOOR + F.softplus(self.r2_raw)
        return _KERPLE_MAX_POWER - (_KERPLE_MAX_POWER - _KERPLE_FLOOR) * torch.sigmoid(-self.r2_raw)

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys.

        Args:
            q_len (int): number of queries, ``>= 0``.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.

        Returns:
            torch.Tensor: bias of shape ``[h, q, k]`` on the device and in the
            dtype of the parameters, to be broadcast against scores
            ``[b, h, q, k]``.

        Raises:
            TypeError: if a length is not an integer.
            ValueError: if a length is negative or ``q_len > k_len``.
        """
        q_len, k_len = _check_lengths(q_len, k_len)
        r1 = self.r1[:, None, None]  # [h, 1, 1]
        r2 = self.r2[:, None, None]  # [h, 1, 1]
        distance = _relative_positions(q_len, k_len, r1.device).abs().to(r1.dtype)  # [q, k]
        if self.kind == "log":
            kernel = r1 * torch.log1p(r2 * distance)  # [h, q, k]
        else:
            kernel = r1 * distance.pow(r2)  # [h, q, k]
        return 0.0 - kernel  # not -kernel: distance 0 gives +0.0, not -0.0

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
        c (nn.Parameter): scalar, the log transform's scale (used as ``|c|``).
        threshold_multiplier (nn.Parameter): scalar, initialised to 1.
        initial_threshold (torch.Tensor): scalar buffer, ``threshold``.

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
        self.c = nn.Parameter(torch.tensor(self._c_init))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("initial_threshold", torch.tensor(self._threshold_init))

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as construction does: the MLP's layers in order, ``c``, the threshold.

        The two ``nn.Linear`` layers draw their weights in the order
        construction draws them, so that under the same
        ``torch.manual_seed`` a module reset after ``to_empty`` holds the
        values of one built directly on that device.
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
        return (self.threshold_multiplier * self.initial_threshold).abs()

    def normalized_distance(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """The MLP's argument ``psi(|p_i - j|) / (psi(max(L, p_i)) + 1e-6)``.

        Args:
            q_len (int): number of queries, ``>= 0``.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.

        Returns:
            torch.Tensor: shape ``[q, k]``, on the device and in the dtype of
            the parameters; in ``[0, 1]`` on the causal entries.

        Raises:
            TypeError: if a length is not an integer.
            ValueError: if a length is negative or ``q_len > k_len``.
        """
        q_len, k_len = _check_lengths(q_len, k_len)
        c = self.c.abs()
        device, dtype = c.device, c.dtype
        distance = _relative_positions(q_len, k_len, device).abs().to(dtype)  # [q, k]
        query_pos = torch.arange(k_len - q_len, k_len, device=device).to(dtype)  # [q]
        normaliser = torch.maximum(query_pos, self.threshold.to(dtype))  # [q]
        log_distance = torch.log1p(c * distance)  # psi(|p_i - j|), [q, k]
        log_normaliser = torch.log1p(c * normaliser) + _FIRE_EPS  # [q]
        return log_distance / log_normaliser[:, None]  # [q, k]

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys.

        Args:
            q_len (int): number of queries, ``>= 0``.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.

        Returns:
            torch.Tensor: bias of shape ``[h, q, k]`` on the device and in the
            dtype of the parameters, to be broadcast against scores
            ``[b, h, q, k]``.

        Raises:
            TypeError: if a length is not an integer.
            ValueError: if a length is negative or ``q_len > k_len``.
        """
        x = self.normalized_distance(q_len, k_len)  # [q, k]
        return self.mlp(x.unsqueeze(-1)).permute(2, 0, 1)  # [q, k, 1] -> [q, k, h] -> [h, q, k]

    def extra_repr(self) -> str:
        threshold = self.initial_threshold
        value = self._threshold_init if threshold.is_meta else threshold.item()
        return f"n_heads={self.n_heads}, hidden={self.hidden}, threshold={value:g}"
