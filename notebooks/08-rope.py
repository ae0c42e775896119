# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] lang="en"
# # Rotary position embedding (RoPE)
#
# An absolute encoding added to the tokens puts the position $m$ of the query and the
# position $n$ of the key into the attention score, but separately, not as their
# distance. Su et al. (2021) turned the wish around: write down the property the score
# should have, that it depends on the positions only through $m - n$, and solve for the
# encoding. The answer is to rotate the query and the key, pair of features by pair of
# features, by angles proportional to their positions. This chapter derives that
# rotation, first in two dimensions with complex numbers and then in $d$; checks the
# elementwise form that every library computes against an explicit matrix; builds the
# permutation between the two pairings in use and shows why converted Llama checkpoints
# permute their projection weights; covers partial rotation; reproduces the paper's
# long-term decay figure and says what it does and does not show; and rebuilds the Meta
# and Hugging Face code with `posenc`.
#
# The letters are RoFormer's, as on the [notation page](../docs/notation.md#positions):
# $m$ and $n$ are the positions of the query and the key, so $m - n \ge 0$ is the causal
# distance; $i$ numbers the pairs of features, and the upright $\mathrm{i}$ is the
# imaginary unit. In the chapter [*ALiBi*](07-alibi.ipynb) the letter $m$ is a slope,
# $m_h$, not a position.

# %% [markdown] lang="ja"
# # 回転位置埋め込み（RoPE）
#
# トークンに足す絶対位置のエンコーディングは、クエリの位置 $m$ とキーの位置 $n$ をアテンションスコアに持ち込みます。
# ただし、2 つは別々に入るだけで、両者の差（距離）の形では入りません。
# Su ら（2021）は発想を逆にしました。
# まずスコアが満たすべき性質（位置には $m - n$ を通してだけ依存すること）を書き下し、
# そこからエンコーディングを逆算したのです。
# 答えは、クエリとキーを次元のペアごとに、位置に比例する角度だけ回転させることでした。
# この章では、その回転をまず複素数を使って 2 次元で導き、次に $d$ 次元へ広げます。
# どのライブラリも使う成分ごとの計算式を、明示的に作った行列と照らし合わせます。
# 実際に使われている 2 通りのペアの組み方を互いに移す置換を作り、
# Llama の変換済みチェックポイントが射影の重みを並べ替えている理由を示します。
# 部分回転も扱います。
# 論文の長距離減衰の図を再現し、その図が何を示し、何を示さないかを述べます。
# 最後に、Meta と Hugging Face のコードを `posenc` で再現します。
#
# 記号は RoFormer に合わせ、[記法のページ](../docs/notation.ja.md#positions)と同じです。
# $m$ と $n$ はクエリとキーの位置なので、$m - n \ge 0$ が因果的な距離です。
# $i$ は次元のペアの番号で、立体の $\mathrm{i}$ は虚数単位です。
# なお、[「ALiBi」](07-alibi.ipynb)の章では $m$ は位置ではなく傾き $m_h$ を表します。

# %%
import cmath
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import (
    RotaryEmbedding,
    apply_rope,
    attention,
    rope_frequencies,
    sinusoidal,
)
from posenc_lab.plotting import INK, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64

# %% [markdown] lang="en"
# ## The requirement
#
# Let $q$ be the query of the token at position $m$ and $k$ the key of the token at
# position $n$, after their projections. With an encoding added to the input (the
# chapter [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)), the score $q \cdot k$ contains the term
# $PE(m)^\top W_Q^\top W_K\, PE(n)$, which depends on $m$ and $n$ separately: moving
# both tokens along the sequence changes it. RoFormer asks instead for a map $f$ that
# puts the position into each vector such that
# $$\langle f(q, m), f(k, n)\rangle = g(q, k, m-n)$$
# for some function $g$: the score sees the two vectors and their distance, and
# nothing else about where they are. The cell below shows the problem: with an
# added encoding, the pairs $(m, n) = (5, 0)$ and $(105, 100)$, both at distance $5$,
# get different scores.

# %% [markdown] lang="ja"
# ## 求める性質
#
# 位置 $m$ のトークンのクエリを $q$、位置 $n$ のトークンのキーを $k$ とします（どちらも射影の後です）。
# 入力に位置エンコーディングを足す方式（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章）では、スコア $q \cdot k$ に
# $PE(m)^\top W_Q^\top W_K\, PE(n)$ という項が含まれます。
# この項は $m$ と $n$ に別々に依存するので、2 つのトークンを系列の中で一緒にずらすと値が変わります。
# RoFormer は、そのかわりに、各ベクトルに位置を書き込む写像 $f$ であって、
# ある関数 $g$ について
# $$\langle f(q, m), f(k, n)\rangle = g(q, k, m-n)$$
# を満たすものを求めます。
# スコアが見るのは 2 つのベクトルとその距離だけで、それ以外の位置の情報は見ない、ということです。
# 次のセルで問題を確かめます。位置エンコーディングを足す方式では、
# どちらも距離 $5$ の組 $(m, n) = (5, 0)$ と $(105, 100)$ で、スコアが異なります。

# %%
d = 64
x_m, x_n = torch.randn(2, d, dtype=f64)  # two token embeddings
w_q, w_k = (torch.randn(d, d, dtype=f64) / math.sqrt(d) for _ in range(2))


def additive_score(m, n):  # (W_Q (x + PE(m))) . (W_K (x + PE(n)))
    pe = sinusoidal(torch.tensor([m, n]), d, dtype=f64)
    return (w_q @ (x_m + pe[0])) @ (w_k @ (x_n + pe[1]))


s_near, s_far = additive_score(5, 0), additive_score(105, 100)
assert abs(s_near - s_far) > 0.1
print(f"score(5, 0) = {s_near:.3f}, score(105, 100) = {s_far:.3f}", end="")

# %% [markdown] lang="en"
# ## Two dimensions: a complex number times a phase
#
# Start with $d = 2$ and identify the vector $q = (q_1, q_2)$ with the complex number
# $q_1 + \mathrm{i}\,q_2$, using the same letter for both. The dot product is the real
# part of a product with a conjugate:
# $$\langle q, k\rangle = q_1 k_1 + q_2 k_2 = \mathrm{Re}\big[q\,\overline{k}\big]$$
# RoFormer asks for slightly more than the equation above: that the whole complex
# number $f(q, m)\,\overline{f(k, n)}$, whose real part is the score, depend only on
# $q$, $k$ and $m - n$, and that position $0$ change nothing, $f(q, 0) = q$. Write
# everything in polar form, $f(q, m) = \rho(q, m)\, e^{\mathrm{i}\Phi(q, m)}$ and
# $q = |q|\, e^{\mathrm{i}\phi_q}$.
#
# - **Norms.** The modulus $\rho(q, m)\,\rho(k, n)$ may depend on the positions only
#   through $m - n$, so for $m = n$ it equals its value at $m = n = 0$:
#   $\rho(q, m)\,\rho(k, m) = |q|\,|k|$. With $k = q$ this gives $\rho(q, m) = |q|$: the
#   encoding must not change norms.
# - **Angles.** The argument $\Phi(q, m) - \Phi(k, n)$ may depend on the positions only
#   through $m - n$. For $m = n$ it equals its value at $0$, $\phi_q - \phi_k$, so
#   $\Phi(q, m) - \phi_q = \Phi(k, m) - \phi_k$: every vector, whichever it is, turns by
#   the same angle $\varphi(m)$. Then $\varphi(m) - \varphi(n)$ may depend only on
#   $m - n$; in particular $\varphi(m+1) - \varphi(m)$ is the same constant $\theta$ for
#   every $m$. Since $f(q, 0) = q$ means $\varphi(0) = 0$, the angle is $\varphi(m) = m\theta$.
#
# Hence
# $$f(q, m) = |q|\,e^{\mathrm{i}(\phi_q + m\theta)} = q\,e^{\mathrm{i}m\theta}$$
# and the score is
# $$\mathrm{Re}\big[f(q, m)\,\overline{f(k, n)}\big] = \mathrm{Re}\big[q\,\overline{k}\,e^{\mathrm{i}(m-n)\theta}\big]$$
# a function of $q$, $k$ and $m - n$, as required. Multiplying by $e^{\mathrm{i}m\theta}$
# is the rotation by the angle $m\theta$, counter-clockwise:
# $$q\,e^{\mathrm{i}m\theta} = R(m\theta)\,q, \qquad R(\phi) = \begin{pmatrix}\cos\phi & -\sin\phi\\ \sin\phi & \cos\phi\end{pmatrix}$$
# The cell below checks each step with `torch` complex tensors. It also shows that
# the linearity of the angle is forced: a quadratic angle $\varphi(m) = \theta m^2$
# gives different products at the same distance. A constant offset,
# $\varphi(m) = m\theta + \gamma$, would cancel in the product; only $f(q, 0) = q$
# rules it out.

# %% [markdown] lang="ja"
# ## 2 次元：複素数に位相を掛ける
#
# まず $d = 2$ とし、ベクトル $q = (q_1, q_2)$ を複素数 $q_1 + \mathrm{i}\,q_2$ と同一視します。
# 両者に同じ文字を使います。内積は、共役との積の実部です。
# $$\langle q, k\rangle = q_1 k_1 + q_2 k_2 = \mathrm{Re}\big[q\,\overline{k}\big]$$
# RoFormer は前節の式より少しだけ強いことを求めます。
# 求めるのは、スコアを実部に持つ複素数 $f(q, m)\,\overline{f(k, n)}$ 全体が $q$、$k$、$m - n$ だけで決まることと、
# 位置 $0$ では何も変えないこと、つまり $f(q, 0) = q$ であることです。
# すべてを極形式で $f(q, m) = \rho(q, m)\, e^{\mathrm{i}\Phi(q, m)}$、$q = |q|\, e^{\mathrm{i}\phi_q}$ と書きます。
#
# - **ノルム**：絶対値 $\rho(q, m)\,\rho(k, n)$ は、位置には $m - n$ を通してしか依存できません。
#   そのため $m = n$ なら $m = n = 0$ のときの値に等しく、$\rho(q, m)\,\rho(k, m) = |q|\,|k|$ です。
#   $k = q$ とすると $\rho(q, m) = |q|$ が得られます。エンコーディングはノルムを変えてはいけません。
# - **角度**：偏角 $\Phi(q, m) - \Phi(k, n)$ も、位置については $m - n$ を通してしか依存できません。
#   $m = n$ なら $0$ のときの値 $\phi_q - \phi_k$ に等しいので、$\Phi(q, m) - \phi_q = \Phi(k, m) - \phi_k$ です。
#   つまり、どのベクトルであっても、同じ角度 $\varphi(m)$ だけ回ります。
#   すると $\varphi(m) - \varphi(n)$ も $m - n$ にしか依存できません。
#   特に $\varphi(m+1) - \varphi(m)$ はどの $m$ でも同じ定数 $\theta$ です。
#   $f(q, 0) = q$ は $\varphi(0) = 0$ を意味するので、角度は $\varphi(m) = m\theta$ と決まります。
#
# したがって
# $$f(q, m) = |q|\,e^{\mathrm{i}(\phi_q + m\theta)} = q\,e^{\mathrm{i}m\theta}$$
# で、スコアは
# $$\mathrm{Re}\big[f(q, m)\,\overline{f(k, n)}\big] = \mathrm{Re}\big[q\,\overline{k}\,e^{\mathrm{i}(m-n)\theta}\big]$$
# となります。求めたとおり、$q$、$k$、$m - n$ の関数です。
# $e^{\mathrm{i}m\theta}$ を掛けることは、角度 $m\theta$ だけ反時計回りに回転させることです。
# $$q\,e^{\mathrm{i}m\theta} = R(m\theta)\,q, \qquad R(\phi) = \begin{pmatrix}\cos\phi & -\sin\phi\\ \sin\phi & \cos\phi\end{pmatrix}$$
# 次のセルでは、各段階を `torch` の複素数テンソルで確かめます。
# 角度が位置について線形でなければならないことも示します。
# 2 次の角度 $\varphi(m) = \theta m^2$ では、同じ距離でも積が変わってしまいます。
# 角度に定数を足した $\varphi(m) = m\theta + \gamma$ では、定数が積の中で打ち消し合います。
# これを除外するのは $f(q, 0) = q$ という条件だけです。

# %%
q, k = torch.randn(2, dtype=torch.complex128)  # two 2D vectors as numbers
q_vec, k_vec = torch.view_as_real(q), torch.view_as_real(k)  # (q_1, q_2), ...
assert_close((q * k.conj()).real, q_vec @ k_vec)  # <q, k> = Re[q conj(k)]

theta = 0.3


def rot(phi):  # R(phi), counter-clockwise
    return torch.tensor(
        [[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]],
        dtype=f64,
    )


def f(x, m, phase=lambda m: m * theta):  # x e^{i phase(m)}
    return x * torch.polar(
        torch.tensor(1.0, dtype=f64), torch.tensor(phase(m), dtype=f64)
    )


for m, n in [(0, 0), (3, 1), (7, 10), (100, -4)]:
    assert_close(
        f(q, m) * f(k, n).conj(), q * k.conj() * cmath.exp(1j * (m - n) * theta)
    )
    for s in (1, 25, -60):  # same distance, same complex product, same score
        assert_close(f(q, m + s) * f(k, n + s).conj(), f(q, m) * f(k, n).conj())
    # q e^{imθ} = R(mθ) q
    assert_close(torch.view_as_real(f(q, m)), rot(m * theta) @ q_vec)
    assert_close(f(q, m).abs(), q.abs())  # norms unchanged: rho(q, m) = |q|
assert_close(f(q, 0), q)  # f(q, 0) = q


def quadratic(m):  # an angle that is not linear in m
    return theta * m**2


assert not torch.allclose(
    f(q, 3, quadratic) * f(k, 1, quadratic).conj(),
    f(q, 5, quadratic) * f(k, 3, quadratic).conj(),
)


def offset(m):  # a constant offset cancels in the product...
    return m * theta + 0.4


assert_close(f(q, 3, offset) * f(k, 1, offset).conj(), f(q, 5) * f(k, 3).conj())
assert not torch.allclose(f(q, 0, offset), q)  # ...but breaks f(q, 0) = q

# %% [markdown] lang="en"
# ## Many dimensions: one rotation per pair
#
# For $d$ features (even), RoFormer splits the vector into $d/2$ pairs, pair $i$ being
# the features $2i$ and $2i+1$, and rotates each pair as in two dimensions, with its
# own angle per position $\theta_i$:
# $$R_m = \mathrm{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big), \qquad \theta_i = 10000^{-2i/d}$$
# for $i = 0, 1, \dots, d/2-1$, and $f(q, m) = R_m\, q$. These are the frequencies of
# the sinusoidal encoding (see [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)): wavelengths from
# $2\pi$ up to just below $10000 \cdot 2\pi$ positions (`base` replaces $10000$ in
# `posenc`). `rope_frequencies(d)` returns the $\theta_i$.
#
# The score needs care with the transposition. Each block satisfies
# $R(\alpha)^\top = R(-\alpha)$ and $R(\alpha)\,R(\beta) = R(\alpha+\beta)$, so
# $R_m^\top = R_{-m}$ and $R_m^\top R_n = R_{n-m}$:
# $$\langle R_m q, R_n k\rangle = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k$$
# The matrix in the middle is $R_{n-m}$, not $R_{m-n}$. Both give the same
# dependence on the distance, but they are different numbers: $q^\top R_{n-m}\, k$ and
# $q^\top R_{m-n}\, k$ are the scores of the query at $m$ with the key at $n$ and of the
# query at $n$ with the key at $m$. Pair by pair, with the complex view of the last
# section,
# $$q^\top R_{n-m}\, k = \mathrm{Re}\Big[\sum_{i=0}^{d/2-1} q^{(i)}\,\overline{k^{(i)}}\,e^{\mathrm{i}(m-n)\theta_i}\Big], \qquad q^{(i)} = q_{2i} + \mathrm{i}\,q_{2i+1}$$
# The cell below builds $R_m$ as an explicit block-diagonal matrix and checks each
# equation, including that the wrong sign gives a different score.

# %% [markdown] lang="ja"
# ## 多次元：ペアごとに 1 つの回転
#
# 次元が $d$ 個（偶数）のとき、RoFormer はベクトルを $d/2$ 組のペアに分けます。
# ペア $i$ は次元 $2i$ と $2i+1$ です。各ペアを 2 次元のときと同じように回転させますが、
# 1 位置あたりの角度 $\theta_i$ はペアごとに異なります。
# $$R_m = \mathrm{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big), \qquad \theta_i = 10000^{-2i/d}$$
# ここで $i = 0, 1, \dots, d/2-1$ で、$f(q, m) = R_m\, q$ です。
# これは[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の正弦波と同じ周波数で、
# 波長は $2\pi$ から $10000 \cdot 2\pi$ 位置の少し手前までです（`posenc` では `base` が $10000$ の代わりになります）。
# `rope_frequencies(d)` が $\theta_i$ を返します。
#
# スコアでは転置に注意が必要です。各ブロックは $R(\alpha)^\top = R(-\alpha)$ と
# $R(\alpha)\,R(\beta) = R(\alpha+\beta)$ を満たすので、$R_m^\top = R_{-m}$、$R_m^\top R_n = R_{n-m}$ です。
# $$\langle R_m q, R_n k\rangle = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k$$
# 真ん中の行列は $R_{m-n}$ ではなく $R_{n-m}$ です。
# どちらも距離だけに依存する点は同じですが、値は異なります。
# $q^\top R_{n-m}\, k$ は位置 $m$ のクエリと位置 $n$ のキーのスコアで、
# $q^\top R_{m-n}\, k$ は位置 $n$ のクエリと位置 $m$ のキーのスコアです。
# 前節の複素数の見方でペアごとに書くと、次のようになります。
# $$q^\top R_{n-m}\, k = \mathrm{Re}\Big[\sum_{i=0}^{d/2-1} q^{(i)}\,\overline{k^{(i)}}\,e^{\mathrm{i}(m-n)\theta_i}\Big], \qquad q^{(i)} = q_{2i} + \mathrm{i}\,q_{2i+1}$$
# 次のセルでは、$R_m$ を明示的なブロック対角行列として作り、それぞれの式を確かめます。
# 添字の正負を取り違えるとスコアが変わることも確かめます。

# %%
d = 16
thetas = rope_frequencies(d)  # float32, as every library forms them
# θ_i = 10000^(-2i/d)
theta_exact = 10000.0 ** (-2 * torch.arange(d // 2, dtype=f64) / d)
# float32 rounding
assert_close(thetas.double(), theta_exact, rtol=1e-6, atol=0)
# chapter 1: sin(ω_i)
sin_at_1 = sinusoidal(torch.tensor([1]), d, dtype=f64)[0, 0::2]
assert_close(sin_at_1.asin(), theta_exact)  # the same frequencies
thetas = thetas.double()


def rope_matrix(m):  # R_m, block-diagonal, pairs (2i, 2i+1)
    return torch.block_diag(*(rot(m * t) for t in thetas.tolist()))


def to_complex(x):  # q^{(i)} = q_{2i} + i q_{2i+1}
    return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())


q, k = torch.randn(2, d, dtype=f64)
for m, n in [(0, 3), (5, 2), (40, 41), (1000, 7)]:
    r_m, r_n = rope_matrix(m), rope_matrix(n)
    assert_close(r_m.T, rope_matrix(-m))  # R_m^T = R_{-m}
    assert_close(r_m.T @ r_n, rope_matrix(n - m))  # R_m^T R_n = R_{n-m}
    score = (r_m @ q) @ (r_n @ k)  # <R_m q, R_n k>
    assert_close(score, q @ r_m.T @ r_n @ k)  # = q^T R_m^T R_n k
    assert_close(score, q @ rope_matrix(n - m) @ k)  # = q^T R_{n-m} k
    # R_{m-n}: another score
    assert not torch.isclose(score, q @ rope_matrix(m - n) @ k)
    phases = torch.exp(1j * (m - n) * thetas)
    assert_close(
        score, (to_complex(q) * to_complex(k).conj() * phases).sum().real
    )

# %% [markdown] lang="en"
# ## Without the matrix: two elementwise products
#
# $R_m$ has $d^2$ entries but at most $2d$ of them differ from $0$ (exactly $2d$ unless
# some $\cos m\theta_i$ or $\sin m\theta_i$ is $0$; at $m = 0$ only the $d$ diagonal
# ones), so no library builds it.
# Pair $i$ maps $(x_{2i}, x_{2i+1})$ to
# $(x_{2i}\cos m\theta_i - x_{2i+1}\sin m\theta_i,\ x_{2i+1}\cos m\theta_i + x_{2i}\sin m\theta_i)$,
# which for all pairs at once is (RoFormer, eq. 34)
# $$R_m x = \begin{pmatrix}x_0\\ x_1\\ x_2\\ x_3\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\cos m\theta_0\\ \cos m\theta_0\\ \cos m\theta_1\\ \cos m\theta_1\\ \vdots\end{pmatrix} + \begin{pmatrix}-x_1\\ x_0\\ -x_3\\ x_2\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\sin m\theta_0\\ \sin m\theta_0\\ \sin m\theta_1\\ \sin m\theta_1\\ \vdots\end{pmatrix}$$
# a copy of $x$ with each pair swapped and one sign flipped, and two elementwise
# products with tables of cosines and sines that depend only on the positions.
# `apply_rope(x, positions, layout="interleaved")` computes this; `positions` holds
# one position per vector and broadcasts against `x.shape[:-1]`. The cell below
# compares it with the explicit matrix of the last section and with the formula.

# %% [markdown] lang="ja"
# ## 行列を使わずに：成分ごとの積 2 つ
#
# $R_m$ の成分は $d^2$ 個ありますが、$0$ でないのは多くても $2d$ 個なので
# （$\cos m\theta_i$ と $\sin m\theta_i$ に $0$ がなければちょうど $2d$ 個、$m = 0$ では対角成分の $d$ 個だけです）、
# どのライブラリもこの行列を作りません。
# ペア $i$ は $(x_{2i}, x_{2i+1})$ を
# $(x_{2i}\cos m\theta_i - x_{2i+1}\sin m\theta_i,\ x_{2i+1}\cos m\theta_i + x_{2i}\sin m\theta_i)$ に移します。
# すべてのペアをまとめて書くと次のようになります（RoFormer の式 34）。
# $$R_m x = \begin{pmatrix}x_0\\ x_1\\ x_2\\ x_3\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\cos m\theta_0\\ \cos m\theta_0\\ \cos m\theta_1\\ \cos m\theta_1\\ \vdots\end{pmatrix} + \begin{pmatrix}-x_1\\ x_0\\ -x_3\\ x_2\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\sin m\theta_0\\ \sin m\theta_0\\ \sin m\theta_1\\ \sin m\theta_1\\ \vdots\end{pmatrix}$$
# 各ペアの 2 つの成分を入れ替え、片方の正負を反転した $x$ のコピーを用意します。
# あとは、元のベクトルには余弦の表を、このコピーには正弦の表を成分ごとに掛けて足すだけです。どちらの表も位置だけで決まります。
# `apply_rope(x, positions, layout="interleaved")` がこれを計算します。
# `positions` はベクトルごとに 1 つの位置を持ち、`x.shape[:-1]` に対してブロードキャストされます。
# 次のセルでは、これを前節の明示的な行列と比べ、上の式とも比べます。

# %%
x = torch.randn(5, d, dtype=f64)  # five vectors
pos = torch.tensor([0, 1, 9, 250, 4096])  # one position per vector
out = apply_rope(x, pos, layout="interleaved")
by_matrix = torch.stack(
    [rope_matrix(p) @ v for p, v in zip(pos.tolist(), x, strict=True)]
)
assert_close(out, by_matrix)

angles = pos[:, None].double() * thetas  # (5, d/2): m θ_i
cos, sin = (
    angles.cos().repeat_interleave(2, -1),
    angles.sin().repeat_interleave(2, -1),
)
# (-x1, x0, -x3, x2, ...)
swapped = torch.stack([-x[:, 1::2], x[:, 0::2]], dim=-1).flatten(-2)
assert_close(out, x * cos + swapped * sin)
# the matrix apply_rope applies, read off the basis vectors: at most 2d of d^2
# non-zero, and only the d diagonal ones at m = 0
eye_d = torch.eye(d, dtype=f64)
r_lib = apply_rope(eye_d, torch.tensor(3), layout="interleaved").T
assert (r_lib != 0).sum() == 2 * d
r_0 = apply_rope(eye_d, torch.tensor(0), layout="interleaved").T
assert torch.equal(r_0, eye_d)

# %% [markdown] lang="en"
# The figure shows the cosine of the angle $m\theta_i$ for a head of size $d = 128$,
# pair $i$ against position $m$. The first pairs turn fast: pair $0$ completes a turn
# every 6.28 positions. Down the rows the turns slow, and the last pair, with a
# wavelength of 54410 positions, has turned by only 0.0294 radians at $m = 255$: over
# this range it barely moves. A query and a key compare their distance through all
# these clocks at once, fast ones for short distances and slow ones for long.

# %% [markdown] lang="ja"
# 下の図は、ヘッドの次元数が $d = 128$ のときの角度 $m\theta_i$ の余弦です。縦軸がペア $i$、横軸が位置 $m$ です。
# 最初のペアは速く回り、ペア $0$ は 6.28 位置ごとに 1 周します。
# 下の行ほど回転は遅くなり、最後のペアは波長が 54410 位置あるので、
# $m = 255$ でも 0.0294 ラジアンしか回っていません。この範囲ではほとんど動きません。
# クエリとキーは、これらの時計をすべて同時に使って距離を比べます。
# 速い時計は短い距離を、遅い時計は長い距離を受け持ちます。

# %% alt={"en": ["Heatmap of cos(mθ_i) for a head of size 128: position m from 0 to 255 across, pair i from 0 to 63 down. The first pairs change colour rapidly; the turns slow down the rows, and the lowest third stays dark red (near 1) across the range."], "ja": ["ヘッドの次元数 128 での cos(mθ_i) のヒートマップ。横軸は位置 m（0〜255）、縦軸はペア i（0〜63）。最初のペアは色が速く入れ替わり、下の行ほど回転が遅くなって、下の 3 分の 1 ほどは範囲全体で 1 に近い濃い赤のままです。"]}
d_head = 128
theta_head = rope_frequencies(d_head).double()
m = torch.arange(256).double()
lam = 2 * math.pi / theta_head
assert math.isclose(lam[0], 2 * math.pi) and lam[-1] < 10000 * 2 * math.pi
last = d_head // 2 - 1
print(f"wavelength of pair 0: {lam[0]:.2f}, of pair {last}: {lam[-1]:.0f}")
print(f"angle of pair {last} at m = 255: {255 * theta_head[-1]:.4f}", end="")

fig, ax = plt.subplots(figsize=(6.4, 3.4))
im = ax.imshow(
    torch.cos(theta_head[:, None] * m),
    aspect="auto",
    cmap="RdBu_r",
    vmin=-1,
    vmax=1,
    interpolation="nearest",
)
ax.set(xlabel="$m$", ylabel="$i$")
ax.grid(False)
fig.colorbar(im, ax=ax, label=r"$\cos(m\theta_i)$")
plt.show()

# %% [markdown] lang="en"
# ## Two pairings: interleaved and half
#
# Which two features form a pair is a convention, and two are in use.
#
# - `interleaved` pairs $2i$ with $2i+1$, as above: RoFormer, GPT-J, Meta's original
#   Llama code, torchtune.
# - `half` pairs $i$ with $i + d/2$: GPT-NeoX and Hugging Face's `rotate_half`. The
#   swapped copy is then $(-x_{d/2}, \dots, -x_{d-1}, x_0, \dots, x_{d/2-1})$ and the
#   tables are $(\cos m\theta_0, \dots, \cos m\theta_{d/2-1})$ written twice, one
#   after the other: two slices and a concatenation, with no strided access.
#
# Pair $i$ turns by $m\theta_i$ in both; only the addresses of its two features
# differ. So the two are the same rotation up to a fixed permutation of the features.
# Let
# $$\pi = (0, d/2, 1, d/2+1, \dots, d/2-1, d-1)$$
# and let $\Pi$ be the permutation matrix with $(\Pi x)_j = x_{\pi_j}$ (in code,
# `x[..., perm]`). $\Pi x$ puts the partners $i$ and $i + d/2$ next to each other, the
# interleaved rotation turns them, and $\Pi^\top$ puts them back:
# $$R^{\text{half}}_m = \Pi^\top R_m\, \Pi$$
# The cell builds $\pi$ and its inverse, checks
# `apply_rope(x, layout="half") == apply_rope(x[..., perm], layout="interleaved")[..., inv_perm]`,
# reads the matrix of the `half` rotation off `apply_rope` (applied to the identity
# matrix, whose rows are the basis vectors) and compares it with $\Pi^\top R_m\, \Pi$.
# It also checks the `rotate_half` form, and that the two layouts give different
# results on the same vector: a model trained with one cannot be run with the other.

# %% [markdown] lang="ja"
# ## 2 通りのペアの組み方：インターリーブ配置と半分割配置
#
# どの 2 つの次元をペアにするかは取り決めの問題で、2 通りが使われています。
#
# - `interleaved` は、ここまでのように $2i$ と $2i+1$ を組にします（インターリーブ配置）。
#   RoFormer、GPT-J、Meta の元の Llama のコード、torchtune がこちらです。
# - `half` は $i$ と $i + d/2$ を組にします（半分割配置）。GPT-NeoX と Hugging Face の `rotate_half` がこちらです。
#   入れ替えたコピーは $(-x_{d/2}, \dots, -x_{d-1}, x_0, \dots, x_{d/2-1})$ になり、
#   表は $(\cos m\theta_0, \dots, \cos m\theta_{d/2-1})$ を 2 回続けて並べたものになります。
#   必要なのは 2 つのスライスと連結だけで、ストライドアクセス（飛び飛びの要素へのアクセス）がありません。
#
# どちらでもペア $i$ は $m\theta_i$ だけ回ります。違うのは 2 つの次元の置き場所だけです。
# したがって 2 つは、次元を決まった順に並べ替えれば一致する、同じ回転です。
# $$\pi = (0, d/2, 1, d/2+1, \dots, d/2-1, d-1)$$
# とし、$(\Pi x)_j = x_{\pi_j}$ となる置換行列を $\Pi$ とします（コードでは `x[..., perm]`）。
# $\Pi x$ はペアになる $i$ と $i + d/2$ を隣り合わせに並べ、インターリーブ配置の回転がそれを回し、
# $\Pi^\top$ が元の場所に戻します。
# $$R^{\text{half}}_m = \Pi^\top R_m\, \Pi$$
# 次のセルでは $\pi$ とその逆置換を作り、
# `apply_rope(x, layout="half") == apply_rope(x[..., perm], layout="interleaved")[..., inv_perm]`
# を確かめます。
# さらに、`apply_rope` を単位行列（各行が基底ベクトル）に適用して `half` の回転の行列を読み取り、
# $\Pi^\top R_m\, \Pi$ と比べます。
# `rotate_half` の形も検証し、同じベクトルに対して 2 つの配置が異なる結果を出すことも確かめます。
# 片方で学習したモデルを、もう片方で動かすことはできません。

# %%
h = d // 2
pairs = torch.stack([torch.arange(h), torch.arange(h) + h], dim=-1)
perm = pairs.flatten()  # 0, h, 1, h+1, ...
inv_perm = torch.argsort(perm)  # 0, 2, 4, ..., 1, 3, 5, ...
assert perm.tolist()[:4] == [0, h, 1, h + 1]
assert inv_perm.tolist()[: h + 1] == [*range(0, d, 2), 1]

x = torch.randn(3, 7, d, dtype=f64)
pos = torch.arange(7) * 13
half = apply_rope(x, pos, layout="half")
assert_close(
    half, apply_rope(x[..., perm], pos, layout="interleaved")[..., inv_perm]
)

big_pi = torch.eye(d, dtype=f64)[perm]  # (Pi x)_j = x_{pi_j}
eye = torch.eye(d, dtype=f64)
for p in (1, 5, 300):
    # columns: the images of the basis vectors e_j
    r_half = apply_rope(eye, torch.tensor(p), layout="half").T
    # R^half_m = Pi^T R_m Pi
    assert_close(r_half, big_pi.T @ rope_matrix(p) @ big_pi)


def rotate_half(x):  # Hugging Face / GPT-NeoX
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


angles = pos[:, None].double() * thetas  # (7, d/2)
cos = torch.cat([angles.cos()] * 2, -1)  # (7, d)
sin = torch.cat([angles.sin()] * 2, -1)
assert_close(half, x * cos + rotate_half(x) * sin)
assert not torch.allclose(half, apply_rope(x, pos, layout="interleaved"))

# %% [markdown] lang="en"
# ## Why converted Llama checkpoints permute the query and key weights
#
# Meta trained Llama with the interleaved pairing. Hugging Face's Llama code, which
# descends from its GPT-NeoX code, uses `rotate_half`. Rather than change the code,
# `convert_llama_weights_to_hf.py` permutes the weights: within every head it
# reorders the output rows of $W_Q$ and $W_K$ (not $W_V$) to
# $(0, 2, 4, \dots, d-2, 1, 3, \dots, d-1)$, which is $\pi^{-1}$:
# $$W_Q^{\text{HF}} = \Pi^\top W_Q, \qquad W_K^{\text{HF}} = \Pi^\top W_K$$
# per head. Then $q^{\text{HF}} = \Pi^\top q$, and since $R^{\text{half}}_m\, \Pi^\top = \Pi^\top R_m$
# and $\Pi\,\Pi^\top = I$,
# $$\big(R^{\text{half}}_m\, \Pi^\top q\big)^\top \big(R^{\text{half}}_n\, \Pi^\top k\big) = \big(\Pi^\top R_m\, q\big)^\top \big(\Pi^\top R_n\, k\big) = q^\top R_m^\top R_n\, k$$
# Every score is exactly the original one, so the converted model computes the same
# function. The script's helper is one line,
# `w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)`:
# the `view` splits each head's rows into (pair, member of the pair) and the
# `transpose` lists all first members before all second members. The cell applies
# it to random Meta-layout weights with four query heads and two key/value heads
# (grouped-query attention, where the keys are permuted with the key heads' count),
# and checks that scores and attention outputs agree to rounding error, and that
# skipping the permutation does not.

# %% [markdown] lang="ja"
# ## Llama の変換済みチェックポイントがクエリとキーの重みを並べ替える理由
#
# Meta はインターリーブ配置で Llama を学習しました。
# 一方、GPT-NeoX のコードから派生した Hugging Face の Llama のコードは `rotate_half` を使います。
# `convert_llama_weights_to_hf.py` は、コードを変えるかわりに重みを並べ替えます。
# 各ヘッドの中で、$W_Q$ と $W_K$ の出力側の行（$W_V$ はそのまま）を
# $(0, 2, 4, \dots, d-2, 1, 3, \dots, d-1)$ の順、つまり $\pi^{-1}$ の順に並べ直します。
# $$W_Q^{\text{HF}} = \Pi^\top W_Q, \qquad W_K^{\text{HF}} = \Pi^\top W_K$$
# すると $q^{\text{HF}} = \Pi^\top q$ で、
# $R^{\text{half}}_m\, \Pi^\top = \Pi^\top R_m$ と $\Pi\,\Pi^\top = I$ から次が成り立ちます。
# $$\big(R^{\text{half}}_m\, \Pi^\top q\big)^\top \big(R^{\text{half}}_n\, \Pi^\top k\big) = \big(\Pi^\top R_m\, q\big)^\top \big(\Pi^\top R_n\, k\big) = q^\top R_m^\top R_n\, k$$
# どのスコアも元の値とまったく同じなので、変換後のモデルは同じ関数を計算します。
# スクリプトの補助関数は
# `w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)` の 1 行です。
# `view` が各ヘッドの行を（ペア、ペアの何番目か）に分け、
# `transpose` がペアの 1 番目をすべて並べてから 2 番目をすべて並べます。
# 次のセルでは、Meta の配置（インターリーブ配置）のランダムな重みにこれを適用します。
# クエリのヘッドは 4 つ、キーとバリューのヘッドは 2 つです（グループ化クエリアテンションなので、キーはキーのヘッド数で並べ替えます）。
# スコアとアテンションの出力が丸め誤差の範囲で一致すること、並べ替えを省くと一致しないことを確かめます。

# %%
d_model, n_heads, n_kv, d_h, seq = 32, 4, 2, 8, 6


def permute(w, n_heads, dim1=d_model, dim2=d_model):
    """The helper of convert_llama_weights_to_hf.py."""
    w = w.view(n_heads, dim1 // n_heads // 2, 2, dim2)  # (head, pair, member)
    return w.transpose(1, 2).reshape(dim1, dim2)  # all first members first


# Meta layout (rows = outputs)
w_q = torch.randn(n_heads * d_h, d_model, dtype=f64)
w_k, w_v = torch.randn(2, n_kv * d_h, d_model, dtype=f64)
w_q_hf, w_k_hf = permute(w_q, n_heads), permute(w_k, n_kv, dim1=n_kv * d_h)

half_h = torch.arange(d_h // 2)
inv_perm_h = torch.argsort(
    torch.stack([half_h, half_h + d_h // 2], -1).flatten()
)
rows_reordered = w_q.view(n_heads, d_h, d_model)[:, inv_perm_h].reshape_as(w_q)
assert torch.equal(w_q_hf, rows_reordered)  # Pi^T W_Q, head by head


def heads(x, w, n):  # (seq, d_model) -> (n, seq, d_h)
    return (x @ w.T).view(seq, n, d_h).transpose(0, 1)


def scores_and_output(w_q, w_k, layout):
    q = apply_rope(heads(tokens, w_q, n_heads), positions, layout=layout)
    k = apply_rope(heads(tokens, w_k, n_kv), positions, layout=layout)
    # each key head serves two query heads
    k = k.repeat_interleave(n_heads // n_kv, dim=0)
    v = heads(tokens, w_v, n_kv).repeat_interleave(n_heads // n_kv, dim=0)
    return q @ k.transpose(-1, -2), attention(q, k, v, causal=True)


tokens = torch.randn(seq, d_model, dtype=f64)
positions = torch.arange(seq) + 10
# Meta: interleaved
s_meta, out_meta = scores_and_output(w_q, w_k, "interleaved")
# Hugging Face: permuted weights, half
s_hf, out_hf = scores_and_output(w_q_hf, w_k_hf, "half")
assert_close(s_hf, s_meta)
assert_close(out_hf, out_meta)
assert (s_hf - s_meta).abs().max() < 1e-12
# Meta weights with rotate_half: wrong
s_wrong, _ = scores_and_output(w_q, w_k, "half")
assert not torch.allclose(s_wrong, s_meta)
print(
    f"max |score difference|, permuted: below {1e-12:.0e}, "
    f"not permuted: {(s_wrong - s_meta).abs().max():.1f}",
    end="",
)

# %% [markdown] lang="en"
# ## Partial rotation
#
# Nothing requires every feature to be rotated
# ([partial rotation](../docs/glossary.md#partial-rotation)). GPT-NeoX rotates only the first
# `rotary_pct` of each head and passes the rest through; GPT-J does the same with
# `rotary_dim`. Split a head into $x = (x_{\text{rot}}, x_{\text{pass}})$, with $r$
# rotated features. Then the rotated part gets the frequencies of an $r$-dimensional
# RoPE, $\theta_i = 10000^{-2i/r}$, and the score splits into a relative term and a
# term that carries no position at all:
# $$\langle f(q, m), f(k, n)\rangle = q_{\text{rot}}^\top R_{n-m}\, k_{\text{rot}} + q_{\text{pass}}^\top k_{\text{pass}}$$
# GPT-NeoX-20B has heads of 96 features and `rotary_pct = 0.25`, so it rotates 24.
# In `posenc` this is `apply_rope(x, positions, rotary_dim=24)`, and `RotaryEmbedding(24)`
# applied to heads of 96. With `half`, the pairs are $i$ and $i + r/2$ within the
# rotated part. The cell checks that the last 72 features come out unchanged, that
# the first 24 are a 24-dimensional RoPE, and the split of the score.

# %% [markdown] lang="ja"
# ## 部分回転
#
# すべての次元を回転させる必要はありません（[部分回転](../docs/glossary.ja.md#partial-rotation)）。GPT-NeoX は各ヘッドの先頭 `rotary_pct` の割合だけを回転させ、
# 残りはそのまま通します。GPT-J も `rotary_dim` で同じことをします。
# ヘッドを $x = (x_{\text{rot}}, x_{\text{pass}})$ に分け、回転させる次元を $r$ 個とします。
# 回転部分には $r$ 次元の RoPE の周波数 $\theta_i = 10000^{-2i/r}$ が使われ、
# スコアは相対位置の項と、位置をまったく含まない項に分かれます。
# $$\langle f(q, m), f(k, n)\rangle = q_{\text{rot}}^\top R_{n-m}\, k_{\text{rot}} + q_{\text{pass}}^\top k_{\text{pass}}$$
# GPT-NeoX-20B のヘッドは 96 次元で、`rotary_pct = 0.25` なので、回転させるのは 24 次元です。
# `posenc` では `apply_rope(x, positions, rotary_dim=24)` で、
# 96 次元のヘッドに `RotaryEmbedding(24)` を適用しても同じです。
# `half` では、回転部分の中で $i$ と $i + r/2$ がペアになります。
# 次のセルでは、後ろの 72 次元が変わらずに出てくること、先頭の 24 次元には 24 次元の RoPE がかかっていること、
# そしてスコアの分解を確かめます。

# %%
head, rotary_pct = 6144 // 64, 0.25  # GPT-NeoX-20B: hidden size 6144, 64 heads
r = int(head * rotary_pct)
print(f"rotated features: {r} of {head}", end="")
q, k = torch.randn(2, 5, head, dtype=f64)
pos = torch.tensor([0, 3, 17, 64, 1000])
q_out = apply_rope(q, pos, rotary_dim=r)
# the passed features carry no position
assert torch.equal(q_out[:, r:], q[:, r:])
assert_close(q_out[:, :r], apply_rope(q[:, :r], pos))  # an r-dimensional RoPE

theta_r = rope_frequencies(r).double()  # 10000^(-2i/r)
assert_close(
    theta_r,
    10000.0 ** (-2 * torch.arange(r // 2, dtype=f64) / r),
    rtol=1e-6,
    atol=0,
)
# half pairs -> adjacent
q_rot = q[:, :r][:, torch.arange(r).view(2, -1).T.flatten()]
k_rot = k[:, :r][:, torch.arange(r).view(2, -1).T.flatten()]
k_out = apply_rope(k, pos, rotary_dim=r)
for a in range(5):
    for b in range(5):
        rel = torch.block_diag(
            *(rot((pos[b] - pos[a]).item() * t) for t in theta_r.tolist())
        )
        # relative + position-free
        expected = q_rot[a] @ rel @ k_rot[b] + q[a, r:] @ k[b, r:]
        assert_close(q_out[a] @ k_out[b], expected)

# heads larger than dim: partial rotation
module_q, module_k = RotaryEmbedding(r)(q, k, pos)
assert_close(module_q, q_out)
assert_close(module_k, k_out)

# %% [markdown] lang="en"
# ## What the rotation guarantees
#
# Two properties follow from the rotation and are worth checking on the library
# itself, with the default `half` layout and random vectors.
#
# - **Only the distance.** The score of a query at $m$ and a key at $n$ equals that at
#   $m + s$ and $n + s$ for every shift $s$. Put the same query $q$ at every position
#   $a$ and the same key $k$ at every position $b$: the matrix of scores
#   $\langle f(q, a), f(k, b)\rangle$ is constant along each diagonal. Shifting every
#   position of a sequence by the same amount therefore leaves the attention output
#   unchanged: a sequence placed at positions 500 to 511 is attended to as at 0 to 11,
#   exactly in exact arithmetic. In float32 each angle $m\theta_i$ is a position times a
#   float32 frequency, rounded again. If the frequency is off by the relative error
#   $\epsilon_i$, the angle is off by at most $(\epsilon_i + u + \epsilon_i u)\,m\theta_i$
#   with $u = 2^{-24}$, which is $(2u + u^2)\,m\theta_i$ for a frequency rounded once (see
#   [*Sinusoidal positional encoding*](01-sinusoidal.ipynb#in-practice)).
#   `rope_frequencies`, like Hugging Face's code, computes $1/10000^{2i/d}$ in float32,
#   and its $\epsilon_i$ reach $1.17u$. Near position $10^6$, with $d = 64$, the cell
#   measures angle errors up to 0.039 radians (pair 0, with $\theta_0 = 1$, is exact),
#   against $m \cdot 2^{-24} \approx 0.06$.
# - **Norms.** Each $R(m\theta_i)$ is a rotation, so $\lVert R_m x \rVert = \lVert x \rVert$: RoPE never
#   changes the norm of a query or a key, at any position.
#
# **Values and a KV cache.** Only the queries and the keys are rotated; the values are
# not (the Llama conversion above permutes $W_Q$ and $W_K$, not $W_V$). A key's
# rotation depends on its own position only, not on the query's, so with a
# [KV cache](../docs/glossary.md#kv-cache) each key is rotated once, when its token
# arrives, and stored rotated; a later step rotates only its new query and key. The
# cell decodes a sequence this way, one token at a time, and compares every step with
# the full causal pass.
#
# **Linear attention.** RoFormer names a third property (§3.3): the rotation also fits
# linear attention, whose cost grows linearly with the length. There the weight
# $\exp(q_m^\top k_n/\sqrt{d})$ becomes $\phi(q_m)^\top \varphi(k_n)$ with non-negative
# feature maps $\phi, \varphi$, and RoFormer rotates their outputs, using
# $\big(R_m\,\phi(q_m)\big)^\top \big(R_n\,\varphi(k_n)\big)$ in the numerator and
# keeping the denominator unrotated, since rotated terms can be negative (its eq. 19).
# The numerator is still a product of one factor per query and one per key, so the sums
# over the keys can be accumulated once, in one pass; and its weights depend on the
# positions only through $n - m$. The cell checks both with
# $\phi = \varphi = \mathrm{elu} + 1$.
#
# `RotaryEmbedding` is the module form for a model: `forward(q, k, positions)` returns
# the rotated pair, equal to `apply_rope` on each, keeps a table of cosines and sines
# that grows as larger positions arrive (not part of the `state_dict`), and accepts
# fewer key heads than query heads.

# %% [markdown] lang="ja"
# ## 回転が保証すること
#
# 回転であることから、次の 2 つの性質が導かれます。
# 既定の `half` 配置とランダムなベクトルを使って、ライブラリ自体で確かめておきましょう。
#
# - **距離だけに依存**：位置 $m$ のクエリと位置 $n$ のキーのスコアは、どんなシフト量 $s$ についても、
#   $m + s$ と $n + s$ でのスコアに等しくなります。
#   同じクエリ $q$ をすべての位置 $a$ に、同じキー $k$ をすべての位置 $b$ に置くと、
#   スコアの行列 $\langle f(q, a), f(k, b)\rangle$ は各対角線に沿って一定になります。
#   したがって、系列のすべての位置を同じだけずらしてもアテンションの出力は変わりません。
#   位置 500 から 511 に置いた系列でも、位置 0 から 11 に置いたときと同じアテンションが計算されます。
#   厳密に同じになるのは誤差のない算術での話です。
#   float32 の角度 $m\theta_i$ は、位置と float32 の周波数の積をもう一度丸めたものです。
#   周波数の相対誤差を $\epsilon_i$ とすると、角度の誤差は最大 $(\epsilon_i + u + \epsilon_i u)\,m\theta_i$ です（$u = 2^{-24}$）。
#   周波数を 1 回だけ丸めた場合は $(2u + u^2)\,m\theta_i$ になります（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb#実際に使うときの注意)の章を参照）。
#   `rope_frequencies` は Hugging Face のコードと同じく $1/10000^{2i/d}$ を float32 で計算し、その $\epsilon_i$ は $1.17u$ に達します。
#   位置 $10^6$ 付近、$d = 64$ で測ると、角度の誤差は最大 0.039 ラジアンでした（$\theta_0 = 1$ のペア 0 は誤差なし）。目安として、$m \cdot 2^{-24} \approx 0.06$ です。
# - **ノルム**：各 $R(m\theta_i)$ は回転なので $\lVert R_m x \rVert = \lVert x \rVert$ です。
#   RoPE は、どの位置でも、クエリやキーのノルムを変えません。
#
# **バリューと KV キャッシュ**：回転させるのはクエリとキーだけで、バリューは回転させません（前に見た Llama の変換でも、並べ替えるのは $W_Q$ と $W_K$ で、$W_V$ ではありません）。
# キーの回転はキー自身の位置だけで決まり、クエリの位置にはよりません。
# そのため [KV キャッシュ](../docs/glossary.ja.md#kv-cache)では、各キーをそのトークンが来たときに 1 回だけ回転させ、回転後の値を保存します。
# 後のステップで回転させるのは、新しいクエリとキーだけです。
# 次のセルでは、このやり方で系列を 1 トークンずつ処理し、各ステップを一括の因果的な計算と比べます。
#
# **線形アテンション**：RoFormer は 3 つ目の性質を挙げています（§3.3）。この回転は、計算量が長さに比例する線形アテンションにも組み込めます。
# 線形アテンションでは、重み $\exp(q_m^\top k_n/\sqrt{d})$ を、非負の特徴写像 $\phi, \varphi$ を使った $\phi(q_m)^\top \varphi(k_n)$ に置き換えます。
# RoFormer はこれらの出力を回転させ、分子では $\big(R_m\,\phi(q_m)\big)^\top \big(R_n\,\varphi(k_n)\big)$ を使います。
# 回転させた項は負になりうるので、分母は回転させません（論文の式 19）。
# 分子は依然としてクエリごとの因子とキーごとの因子の積なので、キーについての和は 1 回の走査でまとめて累積できます。
# また、分子の重みが位置に依存するのは $n - m$ を通してだけです。
# セルでは、$\phi = \varphi = \mathrm{elu} + 1$ としてこの 2 つを確かめます。
#
# `RotaryEmbedding` はモデルで使うためのモジュール版です。
# `forward(q, k, positions)` は回転させたクエリとキーを返します。結果は、それぞれに `apply_rope` を適用したものと一致します。
# `RotaryEmbedding` は、より大きな位置が渡されると伸びる余弦と正弦の表を持ちます。この表は `state_dict` には含まれません。
# また、キーのヘッドがクエリのヘッドより少ない場合も受け付けます。

# %%
d = 64
q, k = torch.randn(2, d, dtype=f64)


def rope_score(m, n, **kw):
    q_m = apply_rope(q, torch.tensor(m), **kw)
    return q_m @ apply_rope(k, torch.tensor(n), **kw)


for m, n in [(0, 0), (5, 0), (0, 5), (123, 77)]:
    for s in (1, 1000, -50, 10**6):
        assert_close(rope_score(m + s, n + s), rope_score(m, n))

all_pos = torch.arange(32)
q_all = apply_rope(q.expand(32, d), all_pos)  # q at every position a
k_all = apply_rope(k.expand(32, d), all_pos)  # k at every position b
table = q_all @ k_all.T  # [a, b]
for off in range(-31, 32):
    diagonal = torch.diagonal(table, off)  # all pairs with b - a = off
    assert_close(diagonal, diagonal[0].expand_as(diagonal))

x = torch.randn(4, 10, d, dtype=f64)
big_pos = torch.tensor([0, 1, 10, 10**3, 10**5, 10**6, 2**30, -7, 31, 1])
# ||R_m x|| = ||x||
assert_close(apply_rope(x, big_pos).norm(dim=-1), x.norm(dim=-1))

# float32 angles near position 10^6: positions times rope_frequencies(d),
# as apply_rope forms them, against the exact m theta_i
u = 2.0**-24
m_big = torch.arange(999_000, 1_001_000)
theta_exact = 10000.0 ** (-2 * torch.arange(d // 2, dtype=f64) / d)
exact_angles = m_big.double()[:, None] * theta_exact
angles32 = m_big.float()[:, None] * rope_frequencies(d)
angle_err = (angles32.double() - exact_angles).abs()
eps = (rope_frequencies(d).double() / theta_exact - 1).abs()  # epsilon_i
assert 1.16 * u < eps.max() < 1.18 * u  # not rounded once: more than u
angle_bound = (eps + u + eps * u) * exact_angles
assert (angle_err <= angle_bound * (1 + 1e-9)).all()
assert angle_err[:, 0].max() == 0 and 0.038 < angle_err.max() < 0.040
err_max = angle_err.max()
print(f"float32 angles near 10^6, d = {d}: max error {err_max:.3f},", end="")
print(f" max epsilon_i {eps.max() / u:.2f} u", end="")

qs, ks, vs = torch.randn(3, 2, 12, d, dtype=f64)  # (heads, seq, d)
seq_pos = torch.arange(12)
out_0 = attention(
    apply_rope(qs, seq_pos), apply_rope(ks, seq_pos), vs, causal=True
)
out_s = attention(
    apply_rope(qs, seq_pos + 500),
    apply_rope(ks, seq_pos + 500),
    vs,
    causal=True,
)
assert_close(out_s, out_0)  # a common shift leaves attention unchanged

# a KV cache: each key rotated once, at its own position; values not rotated
cache_k, cache_v = [], []
for t in range(12):
    cache_k.append(apply_rope(ks[:, t], torch.tensor(t)))  # stored rotated
    cache_v.append(vs[:, t])
    q_t = apply_rope(qs[:, t : t + 1], torch.tensor(t))  # the new query
    step = attention(q_t, torch.stack(cache_k, 1), torch.stack(cache_v, 1))
    assert_close(step, out_0[:, t : t + 1])

# linear attention (RoFormer eq. 19), causal, phi = elu + 1
feat = torch.nn.functional.elu(qs[0]) + 1, torch.nn.functional.elu(ks[0]) + 1
rq, rk = (apply_rope(x, seq_pos) for x in feat)  # R_m phi(q_m), R_n phi(k_n)
numerator = torch.tril(rq @ rk.T) @ vs[0]  # every (m, n) with n <= m
running = torch.cumsum(rk[:, :, None] * vs[0][:, None, :], dim=0)  # one pass
assert_close(torch.einsum("md,mde->me", rq, running), numerator)
rq_s, rk_s = (apply_rope(x, seq_pos + 700) for x in feat)  # shifted
assert_close(rq_s @ rk_s.T, rq @ rk.T)  # weights depend on n - m only

rope = RotaryEmbedding(d)
q_gqa = torch.randn(2, 8, 300, d)  # (b, n_h, s, h_d)
k_gqa = torch.randn(2, 2, 300, d)  # 2 key heads
pos_gqa = torch.arange(300)  # beyond the initial table: it grows
q_rot, k_rot = rope(q_gqa, k_gqa, pos_gqa)
assert_close(q_rot, apply_rope(q_gqa, pos_gqa))
assert_close(k_rot, apply_rope(k_gqa, pos_gqa))
assert len(rope.state_dict()) == 0

# %% [markdown] lang="en"
# ## Long-term decay: what the paper's bound shows
#
# RoFormer (§3.4.3) argues that RoPE makes scores decay with distance
# ([long-term decay](../docs/glossary.md#long-term-decay)). Write
# $r = m - n$ and $h_i = q^{(i)}\,\overline{k^{(i)}}$ for the product of pair $i$, so that
# the score is $\mathrm{Re}\big[\sum_i h_i\, e^{\mathrm{i}r\theta_i}\big]$. Summation by parts
# (Abel's transformation) with the partial sums of the phases gives
# $$\sum_{i=0}^{d/2-1} h_i\,e^{\mathrm{i}r\theta_i} = \sum_{i=0}^{d/2-1} S_{i+1}\,(h_i - h_{i+1}), \qquad S_j = \sum_{l=0}^{j-1} e^{\mathrm{i}r\theta_l}, \quad h_{d/2} = 0$$
# because $e^{\mathrm{i}r\theta_i} = S_{i+1} - S_i$ with $S_0 = 0$. Taking absolute values,
# $$\big|q^\top R_{n-m}\, k\big| \le \Big(\max_i |h_{i+1} - h_i|\Big) \sum_{j=1}^{d/2} |S_j|$$
# The first factor depends on $q$ and $k$ and not on the distance; the paper plots the
# second, averaged over $j$, against the distance and calls it the *relative upper
# bound*:
# $$\frac{1}{d/2}\sum_{j=1}^{d/2} |S_j|$$
# At $r = 0$ every phase is $1$, $S_j = j$, and the average is $(d/2 + 1)/2$, which is
# 32.5 for $d = 128$. As $r$ grows, the fast phases point in all directions and the
# partial sums stay small. The left panel reproduces the shape of the paper's Figure 2,
# here for $d = 128$: it falls to 6.548 at $r = 250$, not monotonically but with ripples
# (its smallest value in this range, 6.415, is at $r = 236$).
#
# What the figure does not show is that the scores decay. It is an upper bound, and a
# loose one: for the random pair $q, k$ below, the bound is at least 204 times the
# actual $|q^\top R_{n-m}\, k|$ at every distance up to 250. Random scores do not decay
# on average: for $q, k$ drawn from $N(0, I)$, $R_r k$ is again $N(0, I)$ because $R_r$
# is orthogonal, so $q^\top R_r\, k$ has mean $0$ and variance $d$ at every distance $r$
# (checked below on 4000 draws). For the pair below, the largest $|q^\top R_{n-m}\, k|$ at distances $0$ to $50$ is
# 15.77, and at $200$ to $250$ it is 16.39 (right panel, blue). Decay appears when $q$
# and $k$ are aligned pair by pair: for $q = k = \mathbf{1}$ every $h_i = 2$ and the
# score is $2\sum_i \cos(r\theta_i)$, twice the dot product $PE(m) \cdot PE(n)$ of the
# sinusoidal encoding with the same frequencies (see
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)).
# It falls from 128 with slow ripples (orange). Whether a trained model's scores decay
# with distance depends on the queries and keys it learns; the bound alone does not
# decide it. Studying a trained Gemma 7B, Barbero et al. (2024) argue that decay is
# unlikely to be the main reason RoPE helps: the model uses the highest frequencies to
# build sharp positional attention patterns, and mostly uses the lowest frequencies,
# which barely turn over a context and which they suspect carry semantic information.
# Their p-RoPE, which leaves the slowest pairs unrotated, appears in
# [*Extending RoPE's context*](09-rope-context.ipynb#which-models-use-which).

# %% [markdown] lang="ja"
# ## 長距離減衰：論文の上界が示すもの
#
# RoFormer（§3.4.3）は、RoPE によってスコアが距離とともに減衰すると論じています（[長距離減衰](../docs/glossary.ja.md#long-term-decay)）。
# $r = m - n$ とし、ペア $i$ の積を $h_i = q^{(i)}\,\overline{k^{(i)}}$ と書くと、
# スコアは $\mathrm{Re}\big[\sum_i h_i\, e^{\mathrm{i}r\theta_i}\big]$ です。
# 位相の部分和を使って部分和分（アーベル変換）を行うと、次の式が得られます。
# $$\sum_{i=0}^{d/2-1} h_i\,e^{\mathrm{i}r\theta_i} = \sum_{i=0}^{d/2-1} S_{i+1}\,(h_i - h_{i+1}), \qquad S_j = \sum_{l=0}^{j-1} e^{\mathrm{i}r\theta_l}, \quad h_{d/2} = 0$$
# $S_0 = 0$ として $e^{\mathrm{i}r\theta_i} = S_{i+1} - S_i$ だからです。絶対値を取ると次のようになります。
# $$\big|q^\top R_{n-m}\, k\big| \le \Big(\max_i |h_{i+1} - h_i|\Big) \sum_{j=1}^{d/2} |S_j|$$
# 最初の因子は $q$ と $k$ で決まり、距離にはよりません。
# 論文は 2 つ目の因子を $j$ について平均したものを「相対的な上界」（relative upper bound）と呼び、距離に対して描いています。
# $$\frac{1}{d/2}\sum_{j=1}^{d/2} |S_j|$$
# $r = 0$ ではすべての位相が $1$ なので $S_j = j$ で、平均は $(d/2 + 1)/2$、$d = 128$ なら 32.5 です。
# $r$ が大きくなると、速い位相はあらゆる方向を向き、部分和の絶対値は小さいままです。
# 左の図は、論文の図 2 の形をここでは $d = 128$ について再現したものです。
# $r = 250$ で 6.548 まで下がりますが、単調ではなく波打ちながら下がります
# （この範囲での最小値は $r = 236$ での 6.415 です）。
#
# ただし、この図からスコアそのものが減衰するとは言えません。これは上界で、しかも緩い上界です。
# 下のランダムな $q, k$ の組では、距離 250 までのどの距離でも、上界は実際の $|q^\top R_{n-m}\, k|$ の 204 倍以上あります。
# ランダムなスコアは平均として減衰しません。
# $q, k$ を $N(0, I)$ から取ると、$R_r$ は直交行列なので $R_r k$ も $N(0, I)$ に従い、
# $q^\top R_r\, k$ はどの距離 $r$ でも平均 $0$、分散 $d$ になります（下で 4000 組について確かめます）。
# 下の組では、距離 $0$ から $50$ での $|q^\top R_{n-m}\, k|$ の最大値は 15.77、$200$ から $250$ では 16.39 です（右の図の青）。
# 減衰が現れるのは、$q$ と $k$ がペアごとにそろっている場合です。
# $q = k = \mathbf{1}$ ならすべての $h_i = 2$ で、スコアは $2\sum_i \cos(r\theta_i)$ になります。
# これは、同じ周波数を持つ正弦波位置エンコーディングの内積 $PE(m) \cdot PE(n)$（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章）のちょうど 2 倍です。
# スコアは 128 から、ゆっくり波打ちながら下がります（オレンジ）。
# 学習済みのモデルのスコアが距離とともに減衰するかどうかは、モデルが学習で得たクエリとキーによって決まります。
# 上界だけでは決まりません。
# Barbero ら（2024）は学習済みの Gemma 7B を調べ、RoPE が役に立つ主な理由は減衰ではなさそうだと論じています。
# 著者らの分析によると、このモデルは最も高い周波数を使って、位置に基づく鋭いアテンションのパターンを作っています。
# 一方、主に使っているのは最も低い周波数で、これはコンテキスト全体を通してもほとんど回りません。
# 著者らは、この低い周波数が意味の情報を運んでいると推測しています。
# 最も遅いペアを回転させない Barbero らの p-RoPE は、[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb#どのモデルがどれを使うか)の章に出てきます。

# %% alt={"en": ["Left: RoFormer's relative upper bound for d = 128 against the distance m − n up to 250, falling from 32.5 to about 6.5 with ripples. Right: actual scores; a random q, k oscillates around 0 without decaying, while q = k = 1 falls from 128 to about 40."], "ja": ["左は d = 128 での RoFormer の相対的な上界を距離 m − n（0〜250）に対して描いたもので、波打ちながら 32.5 から約 6.5 まで下がります。右は実際のスコアで、ランダムな q, k は減衰せずに 0 のまわりで振動し、q = k = 1 は 128 から約 40 まで下がります。"]}
d = 128
theta_d = rope_frequencies(d).double()
dist = torch.arange(251)
# (251, d/2): e^{i r θ_l}
phases = torch.exp(1j * dist[:, None].double() * theta_d)
partial = torch.cumsum(phases, dim=-1)  # column j-1 holds S_j, j = 1..d/2
relative_bound = partial.abs().mean(dim=-1)  # (1/(d/2)) sum_j |S_j|
assert_close(relative_bound[0], torch.tensor((d / 2 + 1) / 2, dtype=f64))

q, k = torch.randn(2, d, dtype=f64)
h_i = to_complex(q) * to_complex(k).conj()  # (d/2,)
h_ext = torch.cat([h_i, h_i.new_zeros(1)])  # h_{d/2} = 0
# S_0 .. S_{d/2}
s_prev = torch.cat([torch.zeros(251, 1, dtype=partial.dtype), partial], dim=-1)
# e^{i r θ_i} = S_{i+1} - S_i
assert_close(phases, s_prev[:, 1:] - s_prev[:, :-1])
# Abel
assert_close(
    (h_i * phases).sum(-1), (partial * (h_ext[:-1] - h_ext[1:])).sum(-1)
)

zero = torch.tensor(0)
k_0 = apply_rope(k, zero, layout="interleaved")  # the key at n = 0
# the query at m = r
scores = apply_rope(q.expand(251, d), dist, layout="interleaved") @ k_0
assert_close(scores, (h_i * phases).sum(-1).real)  # the score, pair by pair
bound = (h_ext[1:] - h_ext[:-1]).abs().max() * partial.abs().sum(-1)
assert (scores.abs() <= bound).all()
ones = torch.ones(d, dtype=f64)
# R_0 1 = 1
ones_scores = apply_rope(ones.expand(251, d), dist, layout="interleaved") @ ones
# PE(r) . PE(0)
pe_dot = (
    sinusoidal(dist, d, dtype=f64) @ sinusoidal(zero[None], d, dtype=f64)[0]
)
# float32 θ_i against float64 ω_i
assert_close(ones_scores, 2 * pe_dot, rtol=0, atol=1e-3)
# q = k = 1: the score falls
assert ones_scores[200:].max() < ones_scores[0] / 2
# 4000 random pairs from N(0, I): mean 0 and variance d at every distance
gen = torch.Generator().manual_seed(1)
q_many, k_many = torch.randn(2, 4000, d, dtype=f64, generator=gen)
for r in (0, 100, 250):
    many = (apply_rope(q_many, torch.tensor(r)) * k_many).sum(-1)
    assert abs(many.mean()) < 0.6 and abs(many.var() / d - 1) < 0.1, r

rb, near, far = relative_bound, scores[:51].abs(), scores[200:].abs()
print(f"relative bound: r = 0: {rb[0]:.1f}, r = 250: {rb[250]:.3f}, ", end="")
print(f"min {rb.min():.3f} at r = {int(rb.argmin())}")
print(f"bound / |score| >= {(bound / scores.abs()).min():.0f}")
print(
    f"max |score|, r = 0..50: {near.max():.2f}, r = 200..250: {far.max():.2f}"
)
print(f"q = k = 1: score at r = 0: {ones_scores[0]:.0f}", end="")
# the numbers quoted in the text, to their printed precision
assert f"{rb[250]:.3f}" == "6.548" and f"{rb.min():.3f}" == "6.415"
assert int(rb.argmin()) == 236 and (bound / scores.abs()).min() >= 204
assert f"{near.max():.2f}" == "15.77" and f"{far.max():.2f}" == "16.39"
assert round(ones_scores[0].item()) == 128 and 39 < ones_scores[250] < 40

fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(6.4, 3.2))
ax_l.plot(dist, relative_bound, color=INK)
ax_l.set(
    xlabel="$m-n$", ylabel=r"$\frac{1}{d/2}\sum_{j} |S_j|$", title="$d = 128$"
)
ax_r.plot(dist, scores, lw=1, label=r"$q, k \sim \mathcal{N}(0, I)$")
ax_r.plot(dist, ones_scores, lw=1.5, label=r"$q = k = \mathbf{1}$")
ax_r.axhline(0, color="0.5", lw=0.8)
ax_r.set(xlabel="$m-n$", ylabel=r"$q^\top R_{n-m}\, k$", title="$d = 128$")
ax_r.legend(loc="upper right", fontsize="small")
plt.show()

# %% [markdown] lang="en"
# <!-- explorable: 08-rope -->
# *On the website, an interactive figure takes the place of this note: the
# relative upper bound for any base and dimension.*

# %% [markdown] lang="ja"
# <!-- explorable: 08-rope -->
# サイトでは、この注記の場所に対話的な図があります。任意の底と次元数で、相対的な上界を描きます。

# %% [markdown] lang="en"
# ## The libraries, rebuilt with posenc
#
# | | pairing | cosines and sines | angles formed in | partial rotation |
# |---|---|---|---|---|
# | Meta Llama (`llama/model.py`) | interleaved, as complex numbers | `freqs_cis` for `2 * max_seq_len` positions, built with the model | float32 (complex64); the rotation in float32, cast back | no |
# | Hugging Face (`modeling_llama.py`) | half (`rotate_half`) | recomputed from `inv_freq` in every forward pass, for the given `position_ids` | float32 (transformers 4.46: a matrix product with autocast off; 5.24: an elementwise product); cast to the input's dtype before the rotation | `partial_rotary_factor` in other models (GPT-NeoX, Phi) |
# | GPT-NeoX | half (`rotate_half`) | cached in the module as `cos_cached`, `sin_cached` | since commit 3bfedf47 (September 2023): float32, the cache cast to the training dtype (`params_dtype`); before it, the angles in the dtype of the `inv_freq` buffer (float32 only while the buffer was), cosines and sines in float32 for bf16 | `rotary_pct` |
# | GPT-J (Hugging Face) | interleaved (`rotate_every_two`) | one table for all `max_position_embeddings` | float32 | `rotary_dim` |
# | torchtune | interleaved | `cache` of shape `[max_seq_len, dim // 2, 2]`, a non-persistent buffer | float32; the rotation in float32, cast back | no |
# | `posenc` | `layout="half"` or `"interleaved"` | `apply_rope`: computed per call; `RotaryEmbedding`: a table that grows on demand | float32, float64 for float64 input; the rotation likewise, cast back | `rotary_dim` |
#
# The chapter [*Implementing RoPE efficiently*](12-efficient-rope.ipynb) measures
# how fast these forms run. The cells below rebuild two of them. Meta's `apply_rotary_emb` views each pair as
# one complex number and multiplies it by $e^{\mathrm{i}m\theta_i}$ from
# `torch.polar`: the derivation above, literally. Its tensors are laid out
# `(batch, seq, heads, head_dim)`, so the positions have shape `(seq, 1)` to broadcast
# over the heads. Hugging Face's Llama takes `position_ids` of shape `(batch, seq)` and
# unsqueezes its cosines at dimension 1 for tensors of shape `(batch, heads, seq, head_dim)`;
# with `posenc` the same positions are passed as `position_ids[:, None, :]`, of shape
# `(batch, 1, seq)`. Passed as is, `(batch, seq)` raises a `ValueError` unless the
# batch size is 1 or equals the number of heads. In the second case it broadcasts
# along the wrong axis and silently rotates by the wrong positions; the last check
# shows this. Both rebuilds restate the library's code rather than call it; against
# the real `LlamaRotaryEmbedding`
# and `apply_rotary_pos_emb` of transformers 5.24.0 (these shapes, positions up to
# 2008, run outside this notebook) `apply_rope` differs by at most
# $2.4 \times 10^{-7}$ in float32. For bfloat16 input about a third of the elements
# differ (31% to 33% in the draws we ran), because Hugging Face rotates in bfloat16 and
# `posenc` in float32. The largest difference is at most one bfloat16 unit in the last
# place of the largest values in the tensor, 0.0156 for values below 4 and 0.031 below
# 8, so it depends on the draw; we saw both.

# %% [markdown] lang="ja"
# ## 各ライブラリを posenc で再現する
#
# | | ペアの組み方 | 余弦と正弦 | 角度の計算精度 | 部分回転 |
# |---|---|---|---|---|
# | Meta Llama（`llama/model.py`） | インターリーブ配置（複素数として） | `freqs_cis` を `2 * max_seq_len` 位置ぶん、モデルの構築時に作成 | float32（complex64）。回転も float32 で行い、元の型へ変換 | なし |
# | Hugging Face（`modeling_llama.py`） | 半分割配置（`rotate_half`） | フォワードパスのたびに `inv_freq` から、与えられた `position_ids` について再計算 | float32（transformers 4.46 は autocast を無効にした行列積、5.24 は成分ごとの積）。回転の前に入力の型へ変換 | ほかのモデル（GPT-NeoX、Phi）では `partial_rotary_factor` |
# | GPT-NeoX | 半分割配置（`rotate_half`） | モジュールの `cos_cached` と `sin_cached` にキャッシュ | コミット 3bfedf47（2023 年 9 月）以降は float32 で計算し、キャッシュを学習時の型（`params_dtype`）へ変換。それ以前は、角度を `inv_freq` バッファの型で計算し（float32 になるのはバッファが float32 の間だけ）、bf16 では余弦と正弦を float32 で計算 | `rotary_pct` |
# | GPT-J（Hugging Face） | インターリーブ配置（`rotate_every_two`） | `max_position_embeddings` 位置ぶんの表を 1 つ | float32 | `rotary_dim` |
# | torchtune | インターリーブ配置 | 形状 `[max_seq_len, dim // 2, 2]` の `cache`（永続化しないバッファ） | float32。回転も float32 で行い、元の型へ変換 | なし |
# | `posenc` | `layout="half"` または `"interleaved"` | `apply_rope` は呼び出しごとに計算、`RotaryEmbedding` は必要に応じて伸びる表 | float32（float64 の入力なら float64）。回転も同じ精度で行い、元の型へ変換 | `rotary_dim` |
#
# これらの形の速さは[「RoPE を効率よく実装する」](12-efficient-rope.ipynb)の章で測ります。
# 以下のセルで、このうち 2 つを再現します。
# Meta の `apply_rotary_emb` は各ペアを 1 つの複素数とみなし、`torch.polar` で作った $e^{\mathrm{i}m\theta_i}$ を掛けます。
# 上の導出そのままです。
# テンソルの並びは `(batch, seq, heads, head_dim)` なので、位置の形状は、ヘッドの軸に沿ってブロードキャストされるよう `(seq, 1)` とします。
# Hugging Face の Llama は形状 `(batch, seq)` の `position_ids` を受け取り、
# 形状 `(batch, heads, seq, head_dim)` のテンソルに合わせて、余弦に `unsqueeze` で軸 1 を挿入します。
# `posenc` では同じ位置を `position_ids[:, None, :]`、つまり形状 `(batch, 1, seq)` で渡します。
# `(batch, seq)` のまま渡すと、バッチサイズが 1 かヘッド数に等しい場合を除いて `ValueError` になります。
# ヘッド数に等しい場合は、間違った軸に沿ってブロードキャストされ、
# エラーも出さずに、誤った位置で回転してしまいます。最後の確認でこれを示します。
# なお、この 2 つの再現はライブラリのコードを書き写したもので、ライブラリそのものは呼び出していません。
# transformers 5.24.0 の実際の `LlamaRotaryEmbedding` および `apply_rotary_pos_emb` と `apply_rope` を比べました（同じ形状、位置は 2008 まで、このノートブックの外で実行）。
# 差は float32 で最大 $2.4 \times 10^{-7}$ です。
# bfloat16 の入力では成分のおよそ 3 分の 1 が違います（試した乱数では 31% から 33%）。Hugging Face は bfloat16 で回転し、`posenc` は float32 で回転するからです。
# 差の最大値は、テンソル中で最も大きい値の、bfloat16 での最後の桁の 1 単位（ulp）以下です。値が 4 未満なら 0.0156、8 未満なら 0.031 なので、乱数によって変わります。試した範囲では両方が現れました。


# %%
def meta_rope(x, start_pos=0, base=10000.0):
    """Meta's apply_rotary_emb (llama/model.py), restated: (b, s, n_h, h_d)."""
    b, s, n_h, h_d = x.shape
    freqs = 1.0 / base ** (torch.arange(0, h_d, 2).float() / h_d)  # theta_i
    angles = torch.outer(torch.arange(start_pos, start_pos + s), freqs)
    phase = torch.polar(torch.ones_like(angles), angles)  # e^{i m theta}, c64
    pairs = torch.view_as_complex(x.float().reshape(b, s, n_h, h_d // 2, 2))
    rotated = torch.view_as_real(pairs * phase[None, :, None, :])
    return rotated.flatten(3).type_as(x)


x = torch.randn(2, 9, 4, 32)  # (b, s, n_h, h_d)
start = 100  # a KV cache: the new tokens sit at positions 100..108
cache_pos = torch.arange(start, start + 9)[:, None]  # (s, 1): over the heads
meta = meta_rope(x, start_pos=start)
assert_close(meta, apply_rope(x, cache_pos, layout="interleaved"))


def hf_llama_rope(x, position_ids, base=10000.0):
    """Hugging Face's Llama rotation, restated; x: (b, n_h, s, h_d)."""
    h_d = x.shape[-1]
    exponent = torch.arange(0, h_d, 2, dtype=torch.int64).float() / h_d
    inv_freq = 1.0 / base**exponent
    freqs = position_ids[:, :, None].float() * inv_freq  # (b, s, h_d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (b, s, h_d)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # unsqueeze_dim=1
    return x * cos + rotate_half(x) * sin


exponent = torch.arange(0, 32, 2, dtype=torch.int64).float() / 32
assert torch.equal(rope_frequencies(32), 1.0 / 10000.0**exponent)  # bitwise

x = torch.randn(3, 4, 9, 32)  # (b, n_h, s, h_d)
position_ids = torch.stack([torch.arange(9) + shift for shift in (0, 5, 2)])
hf = hf_llama_rope(x, position_ids)  # position_ids: (b, s)
assert_close(hf, apply_rope(x, position_ids[:, None, :]))
try:
    apply_rope(x, position_ids)  # (b, s) against (b, n_h, s): no broadcast
    raise AssertionError("expected a ValueError")
except ValueError:
    pass  # the message suggests position_ids[:, None, :]

x_sq = torch.randn(4, 4, 9, 32)  # batch size = number of heads = 4
ids_sq = torch.stack([torch.arange(9) + 7 * b for b in range(4)])  # (b, s)
wrong = apply_rope(x_sq, ids_sq)  # head h gets the positions of sequence h
assert not torch.allclose(wrong, hf_llama_rope(x_sq, ids_sq))
assert_close(apply_rope(x_sq, ids_sq[:, None, :]), hf_llama_rope(x_sq, ids_sq))


# %% [markdown] lang="en"
# **Why float32 angles.** The angles $m\theta_i$ are products of positions and
# frequencies, and the positions must survive the dtype they are formed in. bfloat16
# keeps 8 significant bits: between 512 and 1024 its numbers are 4 apart, so position
# 1001 becomes 1000.0, as printed below, and position 4097 becomes 4096.0. Angles formed
# in bfloat16 would give distinct tokens the same rotation. This is why Hugging Face's
# transformers 4.46 formed them, a matrix product, with autocast switched off (autocast
# would have run the product in bfloat16); transformers 5.24 forms them with an
# elementwise product in float32, which autocast leaves in float32. `apply_rope` forms them in float32 (or
# float64) for any input dtype, rotates in float32 or better, and returns the input's dtype.

# %% [markdown] lang="ja"
# **角度を float32 で作る理由**：角度 $m\theta_i$ は位置と周波数の積です。
# そのため、角度を作る型で位置が正しく表せなければなりません。
# bfloat16 の有効桁は 8 ビットで、512 から 1024 の間では表せる数の間隔が 4 です。
# そのため、下の出力のとおり位置 1001 は 1000.0 に、位置 4097 は 4096.0 になります。
# bfloat16 で角度を作ると、別々のトークンが同じ回転を受けてしまいます。
# Hugging Face の transformers 4.46 が、角度を作る行列積の間 autocast を無効にしていたのはこのためです。autocast が有効なら、行列積は bfloat16 で計算されます。
# transformers 5.24 は成分ごとの積を float32 で計算して角度を作り、autocast はこれを float32 のまま残します。
# `apply_rope` はどの型の入力でも角度を float32（または float64）で作り、回転も float32 以上の精度で行い、
# 入力と同じ型で返します。

# %%
print(
    f"1001 in bfloat16: {torch.tensor(1001.0).bfloat16().item()}\n"
    f"4097 in bfloat16: {torch.tensor(4097.0).bfloat16().item()}",
    end="",
)
assert torch.tensor(1001.0).bfloat16() == torch.tensor(1000.0).bfloat16()

x_bf16 = torch.randn(2, 1024, 64).bfloat16()
pos = torch.arange(1024)
out_bf16 = apply_rope(x_bf16, pos)
assert out_bf16.dtype == torch.bfloat16
# float32 inside
assert_close(out_bf16, apply_rope(x_bf16.float(), pos).bfloat16())
# angles in bfloat16
angle_bf16 = pos.bfloat16()[:, None] * rope_frequencies(64).bfloat16()
angle_f32 = pos.float()[:, None] * rope_frequencies(64)  # angles in float32
# two positions, one rotation
assert torch.equal(angle_bf16[1000], angle_bf16[1001])
assert not torch.equal(angle_f32[1000], angle_f32[1001])

# %% [markdown] lang="en"
# ## What to remember
#
# - RoPE rotates each pair of features of a query at position $m$ and a key at position
#   $n$ by the angles $m\theta_i$ and $n\theta_i$, $\theta_i = 10000^{-2i/d}$; the score is
#   then $q^\top R_{n-m}\, k$, a function of $m - n$ only. Rotations follow from the
#   stronger condition that $f(q, m)\,\overline{f(k, n)}$ depend only on $m - n$, with
#   position $0$ changing nothing (the score alone is also met by $f(q, m) = C^m q$
#   for a reflection $C$); the frequencies are a choice.
# - No library builds $R_m$: the rotation is two elementwise products with tables of
#   cosines and sines.
# - The interleaved and the half pairing are the same rotation up to a fixed permutation
#   $\Pi$. Converting Meta's Llama weights for Hugging Face's `rotate_half` reorders the
#   rows of $W_Q$ and $W_K$ of every head to $\pi^{-1}$ (the keys with the number of key
#   heads); the scores stay the same.
# - Rotations keep norms, a common shift of all positions leaves attention unchanged,
#   and partial rotation leaves some features without any position. Only queries and
#   keys are rotated, never values, and a KV cache stores each key rotated once, at its
#   own position.
# - RoFormer's long-term decay is an upper bound: random queries and keys do not decay,
#   and whether a trained model's scores do depends on what it learns.
# - Form the angles in float32: in bfloat16, positions such as 1000 and 1001 get the
#   same rotation.

# %% [markdown] lang="ja"
# ## まとめ
#
# - RoPE は、位置 $m$ のクエリと位置 $n$ のキーの次元のペアを、それぞれ角度 $m\theta_i$ と $n\theta_i$ だけ回転させます（$\theta_i = 10000^{-2i/d}$）。
#   するとスコアは $q^\top R_{n-m}\, k$ となり、$m - n$ だけの関数です。
#   回転しか残らなくなるのは、より強い条件を求めたときです。$f(q, m)\,\overline{f(k, n)}$ が $m - n$ だけに依存し、位置 $0$ では何も変えないという条件です。
#   スコアだけの条件なら、鏡映 $C$ を使った $f(q, m) = C^m q$ も満たします。周波数は選んで決めるものです。
# - $R_m$ を作るライブラリはありません。回転は、余弦と正弦の表との成分ごとの積 2 つで計算できます。
# - インターリーブ配置と半分割配置は、次元を決まった順（置換 $\Pi$）に並べ替えれば一致する、同じ回転です。
#   Meta の Llama の重みを Hugging Face の `rotate_half` 用に変換するときは、各ヘッドの $W_Q$ と $W_K$ の行を $\pi^{-1}$ の順に並べ直します
#   （キーはキーのヘッド数で並べ替えます）。スコアは変わりません。
# - 回転はノルムを保ちます。すべての位置を同じだけずらしてもアテンションは変わりません。部分回転では、一部の次元が位置をまったく持ちません。
#   回転させるのはクエリとキーだけでバリューは回転させず、KV キャッシュには各キーを自身の位置で 1 回だけ回転させて保存します。
# - RoFormer の長距離減衰は上界の話です。ランダムなクエリとキーのスコアは減衰せず、学習済みのモデルのスコアが減衰するかどうかは学習の結果によります。
# - 角度は float32 で作ります。bfloat16 では、1000 と 1001 のような位置が同じ回転を受けてしまいます。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Rotate the query by $R_m$ but the key by $R_n^\top$ (a plausible slip). Show on
#    paper and with `apply_rope` (positions $-n$ for the key) that the score then
#    depends on $m + n$, and find two pairs at the same distance whose scores differ.
# 2. Build the matrix of the `half` rotation for $d = 8$ by hand, without `apply_rope`,
#    and check that it equals $\Pi^\top R_m\, \Pi$. Which entries of $R_m$ does the
#    permutation move?
# 3. Llama 3 uses `base = 500000`. Redraw the relative upper bound (the quantity of the
#    paper's Figure 2) for $d = 128$ up to distance 4000 with both bases. What does a
#    larger base do to the bound, and to the wavelengths of the last pairs?
# 4. In `convert_llama_weights_to_hf.py`, the keys are permuted with
#    `n_heads=num_key_value_heads`. Permute $W_K$ with the number of query heads
#    instead, in the grouped-query example above, and find which scores change.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. クエリを $R_m$ で、キーを $R_n^\top$ で回転させてみてください（ありがちな間違いです）。
#    このときスコアが $m + n$ に依存することを、手計算と `apply_rope`（キーの位置は $-n$）で示し、
#    距離が同じなのにスコアが異なる、位置の組を 2 つ見つけてください。
# 2. $d = 8$ の `half` の回転の行列を、`apply_rope` を使わずに手で作り、$\Pi^\top R_m\, \Pi$ に等しいことを確かめてください。
#    置換によって $R_m$ のどの成分が移動するでしょうか。
# 3. Llama 3 は `base = 500000` を使います。$d = 128$ の相対的な上界（論文の図 2 の量）を、両方の底で距離 4000 まで描き直してください。
#    底を大きくすると、上界と最後のペアの波長はどうなるでしょうか。
# 4. `convert_llama_weights_to_hf.py` では、キーは `n_heads=num_key_value_heads` で並べ替えられます。
#    上のグループ化クエリアテンションの例で、$W_K$ をクエリのヘッド数で並べ替えてみて、
#    どのスコアが変わるかを調べてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With $R_n^\top = R_{-n}$ and $R_m^\top = R_{-m}$, the slip gives
# $$\langle R_m q, R_n^\top k\rangle = q^\top R_m^\top R_n^\top\, k = q^\top R_{-m} R_{-n}\, k = q^\top R_{-(m+n)}\, k$$
# so the score depends on $m + n$, not on $m - n$. In `apply_rope` the key gets the
# position $-n$. The pairs $(m, n) = (5, 0)$ and $(105, 100)$ are both at distance 5
# but get different scores, while $(7, 3)$ and $(4, 6)$, at different distances but with
# the same sum, get the same score. The cell checks all of this against the explicit
# matrices of the section [Many dimensions](#many-dimensions-one-rotation-per-pair).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $R_n^\top = R_{-n}$、$R_m^\top = R_{-m}$ なので、この間違いでは次のようになります。
# $$\langle R_m q, R_n^\top k\rangle = q^\top R_m^\top R_n^\top\, k = q^\top R_{-m} R_{-n}\, k = q^\top R_{-(m+n)}\, k$$
# スコアは $m - n$ ではなく $m + n$ に依存します。`apply_rope` ではキーに位置 $-n$ を与えます。
# 組 $(m, n) = (5, 0)$ と $(105, 100)$ はどちらも距離 5 ですが、スコアは異なります。
# 一方、距離は違っても和が同じ $(7, 3)$ と $(4, 6)$ は、同じスコアになります。
# 次のセルでは、これらを[「多次元：ペアごとに 1 つの回転」](#多次元ペアごとに-1-つの回転)の節の明示的な行列と照らし合わせます。

# %% tags=["solution"]
q, k = torch.randn(2, 16, dtype=f64)  # rope_matrix is the 16-dimensional R_m


def slip_score(m, n):  # query rotated by R_m, key by R_n^T (position -n)
    q_m = apply_rope(q, torch.tensor(m), layout="interleaved")
    return q_m @ apply_rope(k, torch.tensor(-n), layout="interleaved")


for m, n in [(5, 0), (105, 100), (3, 9), (40, 41)]:
    assert_close(slip_score(m, n), q @ rope_matrix(-(m + n)) @ k)
assert_close(slip_score(7, 3), slip_score(4, 6))  # same m + n, same score
assert not torch.isclose(slip_score(5, 0), slip_score(105, 100))
print(f"(5, 0): {slip_score(5, 0):.3f}, (105, 100): {slip_score(105, 100):.3f}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Pair $i$ of the half layout is $(i, i + 4)$ for $d = 8$, so the matrix
# has $\cos m\theta_i$ at $(i, i)$ and $(i + 4, i + 4)$, $-\sin m\theta_i$ at $(i, i + 4)$
# and $\sin m\theta_i$ at $(i + 4, i)$. Entry $(a, b)$ of $\Pi^\top R_m\, \Pi$ is
# $(R_m)_{\pi^{-1}(a), \pi^{-1}(b)}$, so entry $(c, e)$ of $R_m$ moves to
# $(\pi_c, \pi_e)$: the block of pair $i$, at rows and columns $2i, 2i + 1$, moves to
# rows and columns $i, i + 4$. The permutation
# $\pi = (0, 4, 1, 5, 2, 6, 3, 7)$ leaves only $0$ and $7$ in place, so of the 16
# non-zero entries only the first and the last diagonal entries stay where they are.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** $d = 8$ の半分割配置では、ペア $i$ は $(i, i + 4)$ です。
# したがって行列は、$(i, i)$ と $(i + 4, i + 4)$ に $\cos m\theta_i$、$(i, i + 4)$ に $-\sin m\theta_i$、
# $(i + 4, i)$ に $\sin m\theta_i$ を持ちます。
# $\Pi^\top R_m\, \Pi$ の $(a, b)$ 成分は $(R_m)_{\pi^{-1}(a), \pi^{-1}(b)}$ なので、$R_m$ の $(c, e)$ 成分は $(\pi_c, \pi_e)$ に移ります。
# つまり、行と列 $2i, 2i + 1$ にあったペア $i$ のブロックは、行と列 $i, i + 4$ に移ります。
# 置換 $\pi = (0, 4, 1, 5, 2, 6, 3, 7)$ で動かないのは $0$ と $7$ だけなので、
# 0 でない 16 個の成分のうち、元の場所にとどまるのは対角の最初と最後の成分だけです。

# %% tags=["solution"]
d8, m8 = 8, 3
theta8 = rope_frequencies(d8).double()
by_hand = torch.zeros(d8, d8, dtype=f64)
for i, t in enumerate(theta8.tolist()):  # pair i: features i and i + 4
    c, s_ = math.cos(m8 * t), math.sin(m8 * t)
    by_hand[i, i] = by_hand[i + 4, i + 4] = c
    by_hand[i, i + 4], by_hand[i + 4, i] = -s_, s_
perm8 = torch.stack([torch.arange(4), torch.arange(4) + 4], -1).flatten()
pi8 = torch.eye(d8, dtype=f64)[perm8]  # (Pi x)_j = x_{pi_j}
r8 = torch.block_diag(*(rot(m8 * t) for t in theta8.tolist()))  # R_m
assert_close(by_hand, pi8.T @ r8 @ pi8)
eye8 = torch.eye(d8, dtype=f64)
assert_close(by_hand, apply_rope(eye8, torch.tensor(m8), layout="half").T)
# (c, e) of R_m at (pi_c, pi_e)
assert torch.equal(by_hand[perm8][:, perm8], r8)
fixed = [c for c in range(d8) if perm8[c] == c]
assert fixed == [0, 7] and (r8 != 0).sum() == 16
# the non-zero entries of R_m that land on their own (row, column) in by_hand
stay = [
    (c, e)
    for c, e in r8.nonzero().tolist()
    if by_hand[c, e] != 0 and [perm8[c], perm8[e]] == [c, e]
]
assert stay == [(0, 0), (7, 7)]
print(f"pi = {perm8.tolist()}, fixed points {fixed}", end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** A larger base lowers every frequency but $\theta_0 = 1$, so the phases
# of the slower pairs stay close to each other for longer, their partial sums $S_j$ stay
# large, and the bound falls more slowly. With `base = 500000` the bound is above the
# one for 10000 at 90% of the distances from 1 to 4000 (not at all of them: both curves
# ripple), and from 1000 to 4000 it averages 7.8 against 5.0. The wavelength of the last
# pair, $2\pi \cdot b^{126/128}$, grows from 54410 positions to about 2.56 million. The
# chapter [*Extending RoPE's context*](09-rope-context.ipynb) comes back to the slow
# pairs.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 底を大きくすると、$\theta_0 = 1$ 以外のすべての周波数が下がります。
# そのため遅いペアの位相が長い距離にわたってそろったままになり、部分和 $S_j$ が大きいままで、上界はゆっくりとしか下がりません。
# `base = 500000` の上界は、距離 1 から 4000 のうち 90% で底 10000 の上界を上回ります（両方の曲線が波打つので、すべての距離ではありません）。
# 距離 1000 から 4000 での平均は、10000 の 5.0 に対して 7.8 です。
# 最後のペアの波長 $2\pi \cdot b^{126/128}$ は、54410 位置から約 256 万位置に伸びます。
# 遅いペアについては[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb)の章で改めて扱います。

# %% tags=["solution"] alt={"en": ["RoFormer's relative upper bound for d = 128 against the distance up to 4000, for base 10000 and base 500000: both fall from 32.5 with ripples; the base-500000 curve stays higher over most of the range."], "ja": ["d = 128 での RoFormer の相対的な上界を、底 10000 と底 500000 について距離 4000 まで描いた図。どちらも波打ちながら 32.5 から下がり、底 500000 の曲線は範囲の大部分で上にあります。"]}
dist4k = torch.arange(4001)
bounds, last_wavelength = {}, {}
for base in (10000.0, 500000.0):
    theta_b = rope_frequencies(128, base=base).double()
    phases_b = torch.exp(1j * dist4k[:, None].double() * theta_b)
    bounds[base] = torch.cumsum(phases_b, dim=-1).abs().mean(dim=-1)
    last_wavelength[base] = 2 * math.pi / theta_b[-1].item()
small, large = bounds[10000.0], bounds[500000.0]
above = (large[1:] > small[1:]).double().mean().item()
mean_small, mean_large = small[1000:].mean().item(), large[1000:].mean().item()
assert 0.85 < above < 1 and mean_large > 1.5 * mean_small
exact = 2 * math.pi * 5e5 ** (126 / 128)  # 2 pi b^(126/128), float32 theta
assert math.isclose(last_wavelength[500000.0], exact, rel_tol=1e-6)
print(f"base 500000 above base 10000 at {above:.0%} of distances 1..4000;")
print(f"mean over 1000..4000: {mean_small:.1f} vs {mean_large:.1f}")
print(f"last wavelength: {last_wavelength[10000.0]:.0f}", end="")
print(f" vs {last_wavelength[500000.0]:.3g}", end="")

fig, ax = plt.subplots(figsize=(6.4, 3.0))
for base, curve in bounds.items():
    ax.plot(dist4k, curve, lw=1, label=f"$b = {base:.0f}$")
ax.set(
    xlabel="$m-n$", ylabel=r"$\frac{1}{d/2}\sum_{j} |S_j|$", title="$d = 128$"
)
ax.legend(loc="upper right")
plt.show()

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With the number of query heads, `permute` views the 16 rows of $W_K$
# as four heads of four rows instead of two heads of eight, so each key head's rows come
# out as $(0, 2, 1, 3, 4, 6, 5, 7)$ instead of $(0, 2, 4, 6, 1, 3, 5, 7)$. The half
# rotation then turns together features that Meta never paired, and even at equal
# positions the dot product multiplies query features with the wrong key features. Every
# score changes: all $4 \cdot 6 \cdot 6 = 144$ of them.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** クエリのヘッド数を渡すと、`permute` は $W_K$ の 16 行を 8 行ずつの 2 ヘッドではなく、4 行ずつの 4 ヘッドとみなします。
# そのため各キーのヘッドの行は、$(0, 2, 4, 6, 1, 3, 5, 7)$ ではなく $(0, 2, 1, 3, 4, 6, 5, 7)$ の順になります。
# 半分割配置の回転は Meta がペアにしなかった次元どうしを一緒に回し、
# 位置が等しい場合でさえ、内積はクエリの次元を誤ったキーの次元と掛け合わせます。
# その結果、$4 \cdot 6 \cdot 6 = 144$ 個のスコアがすべて変わります。

# %% tags=["solution"]
w_k_wrong = permute(w_k, n_heads, dim1=n_kv * d_h)  # 4 query heads, not 2
head0 = w_k[:d_h]  # Meta's rows of key head 0
rows = [int((head0 == row).all(-1).nonzero()) for row in w_k_wrong[:d_h]]
assert rows == [0, 2, 1, 3, 4, 6, 5, 7]
s_bad, _ = scores_and_output(w_q_hf, w_k_wrong, "half")
changed = (s_bad - s_meta).abs() > 1e-6
assert changed.all() and changed.numel() == 4 * 6 * 6
print(
    f"rows of key head 0: {rows}; scores changed: {int(changed.sum())}", end=""
)

# %% [markdown] lang="en"
# ## References
#
# - Su, J., Lu, Y., Pan, S., Murtadha, A., Wen, B. and Liu, Y. (2021). *RoFormer:
#   Enhanced Transformer with Rotary Position Embedding*. §3.2–3.4, eq. 19 and 34,
#   Figure 2.
#   <https://arxiv.org/abs/2104.09864>
# - Biderman, S., Black, S., Foster, C., Gao, L., Hallahan, E., He, H., Wang, B. and
#   Wang, P. (2021). *Rotary Embeddings: A Relative Revolution*. EleutherAI blog.
#   <https://blog.eleuther.ai/rotary-embeddings/>
# - EleutherAI, GPT-NeoX (`rotate_half`, `rotary_pct`).
#   <https://github.com/EleutherAI/gpt-neox>
# - Hugging Face transformers, `models/llama/modeling_llama.py` and
#   `models/llama/convert_llama_weights_to_hf.py`.
#   <https://github.com/huggingface/transformers>
# - torchtune, `RotaryPositionalEmbeddings` in `torchtune/modules/position_embeddings.py`.
#   <https://github.com/pytorch/torchtune>
# - Meta, Llama reference code, `precompute_freqs_cis` and `apply_rotary_emb` in
#   `llama/model.py`. <https://github.com/meta-llama/llama>
# - EleutherAI, GPT-NeoX, `RotaryEmbedding` in `megatron/model/positional_embeddings.py`,
#   read at commit ea7aefd8 and before and after commit 3bfedf47 ("Pre-compute RoPE
#   embeddings in fp32", 2023-09-25).
# - Barbero, F., Vitvitskyi, A., Perivolaropoulos, C., Pascanu, R. and Veličković, P.
#   (2024). *Round and Round We Go! What makes Rotary Positional Encodings useful?*
#   ICLR 2025. <https://arxiv.org/abs/2410.06205>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Su, J., Lu, Y., Pan, S., Murtadha, A., Wen, B. and Liu, Y. (2021). *RoFormer:
#   Enhanced Transformer with Rotary Position Embedding*. §3.2–3.4, eq. 19 and 34, Figure 2.
#   <https://arxiv.org/abs/2104.09864>
# - Biderman, S., Black, S., Foster, C., Gao, L., Hallahan, E., He, H., Wang, B. and
#   Wang, P. (2021). *Rotary Embeddings: A Relative Revolution*. EleutherAI blog.
#   <https://blog.eleuther.ai/rotary-embeddings/>
# - EleutherAI、GPT-NeoX（`rotate_half`、`rotary_pct`）。
#   <https://github.com/EleutherAI/gpt-neox>
# - Hugging Face transformers、`models/llama/modeling_llama.py` と
#   `models/llama/convert_llama_weights_to_hf.py`。
#   <https://github.com/huggingface/transformers>
# - torchtune、`torchtune/modules/position_embeddings.py` の `RotaryPositionalEmbeddings`。
#   <https://github.com/pytorch/torchtune>
# - Meta、Llama の参照実装、`llama/model.py` の `precompute_freqs_cis` と `apply_rotary_emb`。
#   <https://github.com/meta-llama/llama>
# - EleutherAI、GPT-NeoX、`megatron/model/positional_embeddings.py` の `RotaryEmbedding`。
#   コミット ea7aefd8 と、コミット 3bfedf47（「Pre-compute RoPE embeddings in fp32」、2023-09-25）の前後を参照。
# - Barbero, F., Vitvitskyi, A., Perivolaropoulos, C., Pascanu, R. and Veličković, P.
#   (2024). *Round and Round We Go! What makes Rotary Positional Encodings useful?*
#   ICLR 2025. <https://arxiv.org/abs/2410.06205>
