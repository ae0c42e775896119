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
# RoPE turns the query at position $m$ and the key at position $n$, pair of
# features by pair of features, by angles proportional to their positions, so that
# the attention score sees only their distance $m - n$: two hands turned alike keep
# the angle between them. The rotation is derived from that wish; libraries
# compute it without a matrix, in one of two pairings; and the paper's long-term
# decay bounds the scores without making them decay.
#
# The letters are RoFormer's ([notation page](../docs/notation.md#positions)): $m$, $n$
# are the query's and the key's positions, $i$ numbers the pairs, $\mathrm{i}$ is the
# imaginary unit; where both would meet in one formula, the pair is $j$.

# %% [markdown] lang="ja"
# # 回転位置埋め込み（RoPE）
#
# RoPE は、位置 $m$ のクエリと位置 $n$ のキーを、次元のペアごとに、位置に比例する角度だけ回転させます。
# するとアテンションスコアが受け取る位置の情報は、両者の距離 $m - n$ だけになります。2 本の針を同じだけ回しても、針どうしのなす角は変わらないからです。
# 回転はこの性質から導かれます。ライブラリは 2 通りのペアの組み方のどちらかで、行列を使わずに回転を計算します。
# 論文の長距離減衰はスコアの上界を与えますが、スコアそのものを減衰させるわけではありません。
#
# 記号は RoFormer に合わせます（[記法のページ](../docs/notation.ja.md#positions)）。$m$、$n$ はクエリとキーの位置、$i$ はペアの番号、$\mathrm{i}$ は虚数単位です。この 2 つの i が同じ式に現れるところでは、ペアの番号を $j$ と書きます。

# %% tags=["setup"]
import math
import warnings

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
# Let $q$ be the query at position $m$ and $k$ the key at position $n$, after their
# projections. With an encoding added to the input (the
# chapter [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)), the score
# $q \cdot k$ contains the term $PE(m)^\top W_Q^\top W_K\, PE(n)$, which depends on $m$
# and $n$ separately: below, the pairs $(m, n) = (5, 0)$ and $(105, 100)$, both at
# distance $5$, get different scores. RoFormer (Su et al. 2021) asks instead for a map
# $f$ that puts the position into each vector such that
# $$\langle f(q, m), f(k, n)\rangle = g(q, k, m-n)$$
# for some function $g$: the score sees the two vectors and their distance, and
# nothing else about where they are.

# %% [markdown] lang="ja"
# ## 求める性質
#
# 位置 $m$ のクエリを $q$、位置 $n$ のキーを $k$ とします（どちらも射影の後です）。
# 入力に位置エンコーディングを足す方式（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章）では、
# スコア $q \cdot k$ に $PE(m)^\top W_Q^\top W_K\, PE(n)$ という項が含まれます。
# この項は $m$ と $n$ に別々に依存し、下の例では、どちらも距離 $5$ の組 $(m, n) = (5, 0)$ と $(105, 100)$ のスコアが異なります。
# RoFormer（Su ら 2021）は代わりに、各ベクトルに位置を書き込む写像 $f$ で、ある関数 $g$ について
# $$\langle f(q, m), f(k, n)\rangle = g(q, k, m-n)$$
# を満たすものを求めます。
# つまりスコアは、2 つのベクトルとその距離のほかには、位置について何も見ません。

# %%
d = 64
x_m, x_n = torch.randn(2, d, dtype=f64)  # two token embeddings
w_q, w_k = (torch.randn(d, d, dtype=f64) / math.sqrt(d) for _ in range(2))


scores = []
for m, n in [(5, 0), (105, 100)]:  # (W_Q (x + PE(m))) . (W_K (x + PE(n)))
    pe = sinusoidal(torch.tensor([m, n]), d, dtype=f64)
    scores.append((w_q @ (x_m + pe[0])) @ (w_k @ (x_n + pe[1])))
    print(f"score({m}, {n}) = {scores[-1]:.3f}")

# %% tags=["check"] summary={"en": "with an added encoding, two pairs at distance 5 score differently, here and in 100 more draws", "ja": "足す方式では、距離 5 の 2 組のスコアが毎回異なります（100 回引き直しても）"}
assert abs(scores[0] - scores[1]) > 0.1
pe = sinusoidal(torch.tensor([5, 0, 105, 100]), d, dtype=f64)
gen = torch.Generator().manual_seed(1)  # leaves the chapter's draws alone
for _ in range(100):  # fresh embeddings and weights
    x2 = torch.randn(2, d, dtype=f64, generator=gen)
    wq, wk = torch.randn(2, d, d, dtype=f64, generator=gen) / math.sqrt(d)
    s_near = (wq @ (x2[0] + pe[0])) @ (wk @ (x2[1] + pe[1]))
    s_far = (wq @ (x2[0] + pe[2])) @ (wk @ (x2[1] + pe[3]))
    assert abs(s_near - s_far) > 1e-6

# %% [markdown] lang="en"
# ## The picture: two hands that turn together
#
# In two dimensions a query and a key are arrows in a plane. Turn the query by the
# angle $m\theta$ and the key by $n\theta$, for one fixed angle $\theta$ per position,
# and write $q_m$ and $k_n$ for the turned arrows. If $q$ and $k$ point at the angles
# $\phi_q$ and $\phi_k$, the angle between $q_m$ and $k_n$ is the one they started with
# plus $(m - n)\theta$, and the dot product is
# $$q_m \cdot k_n = |q|\,|k|\cos\big(\phi_q - \phi_k + (m-n)\theta\big)$$
# Moving both tokens along by $s$ turns both arrows by $s\theta$: the angle between
# them stays, and so does the score. In the figure (dotted: the arrows at position
# 0), $(m, n) = (2, 0)$ and $(6, 4)$ give the same score; at $(6, 0)$ the angle is
# wider.

# %% [markdown] lang="ja"
# ## 図で見る：一緒に回る 2 本の針
#
# 2 次元では、クエリとキーは平面上の矢印です。
# 位置 1 つあたりの決まった角度 $\theta$ を使って、クエリを角度 $m\theta$ だけ、キーを $n\theta$ だけ回し、
# 回した矢印を $q_m$、$k_n$ と書きます。
# $q$ と $k$ がそれぞれ角度 $\phi_q$、$\phi_k$ の向きを指しているとすると、$q_m$ と $k_n$ のなす角は、
# 最初の角度に $(m - n)\theta$ を足したものです。内積は次のようになります。
# $$q_m \cdot k_n = |q|\,|k|\cos\big(\phi_q - \phi_k + (m-n)\theta\big)$$
# 2 つのトークンを一緒に $s$ だけずらすと、どちらの矢印も $s\theta$ だけ回ります。
# 矢印どうしの角度は変わらず、スコアも変わりません。
# 図（点線は位置 0 での矢印）では、$(m, n) = (2, 0)$ と $(6, 4)$ のスコアが同じで、$(6, 0)$ では角度が開いています。

# %%
theta = 0.35  # radians per position


def rot(phi):  # R(phi), counter-clockwise
    c, s = math.cos(phi), math.sin(phi)
    return torch.tensor([[c, -s], [s, c]], dtype=f64)


q_2d = torch.tensor([math.cos(0.3), math.sin(0.3)], dtype=f64)  # phi_q = 0.3
k_2d = torch.tensor([0.8, 0.0], dtype=f64)  # phi_k = 0, |k| = 0.8
cases = [(2, 0), (6, 4), (6, 0)]  # (m, n)

# %% tags=["figure"] alt={"en": ["Three unit circles. In each, a query (blue) and a key (orange) start as dotted arrows, the query at 0.3 radian and the key along the horizontal axis, and are turned to their positions; an arc marks the angle between them. At m = 2, n = 0 and at m = 6, n = 4 both arrows have turned further in the second picture, but the angle between them is the same and the score is 0.43 in both; at m = 6, n = 0 the angle is wider and the score is −0.59."], "ja": ["3 つの単位円。どれもクエリ（青）とキー（オレンジ）が点線の矢印から出発し、クエリは 0.3 ラジアン、キーは横軸の向きで、それぞれの位置まで回されています。弧は 2 本の矢印のなす角を表します。m = 2、n = 0 と m = 6、n = 4 では、2 つ目の図のほうが両方の矢印が大きく回っていますが、なす角は同じで、スコアはどちらも 0.43 です。m = 6、n = 0 では角度が開き、スコアは −0.59 になります。"]}
rim = torch.linspace(0, 2 * math.pi, 200)
fig, axes = plt.subplots(1, 3, figsize=(6.4, 2.0))
for ax, (m, n) in zip(axes, cases, strict=True):
    q_m, k_n = rot(m * theta) @ q_2d, rot(n * theta) @ k_2d
    ax.plot(rim.cos(), rim.sin(), color=INK, lw=0.6)
    for start, end, colour, name in (
        (q_2d, q_m, "C0", "q_m"),
        (k_2d, k_n, "C1", "k_n"),
    ):
        faint = {"arrowstyle": "-|>", "lw": 1, "ls": ":", "color": colour}
        ax.annotate("", xy=start.tolist(), xytext=(0, 0), arrowprops=faint)
        solid = {"arrowstyle": "-|>", "lw": 2, "color": colour}
        ax.annotate("", xy=end.tolist(), xytext=(0, 0), arrowprops=solid)
        ax.text(
            *(1.25 * end).tolist(),
            f"${name}$",
            color=colour,
            ha="center",
            va="center",
        )
    arc = torch.linspace(n * theta, 0.3 + m * theta, 50)  # from k_n to q_m
    ax.plot(0.3 * arc.cos(), 0.3 * arc.sin(), color=INK, lw=1.5)
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal")
    ax.axis("off")
    ax.set_title(f"$m = {m},\\ n = {n}$\n$q_m \\cdot k_n = {q_m @ k_n:.2f}$")
plt.show()

# %% tags=["check"] summary={"en": "the score is |q||k|cos(φ_q − φ_k + (m − n)θ), equal at (2, 0) and (6, 4), shift-invariant", "ja": "スコアは |q||k|cos(φ_q − φ_k + (m − n)θ) で、(2, 0) と (6, 4) で等しく、ずらしても変わりません"}
scores = {}
for m, n in cases:
    scores[m, n] = (rot(m * theta) @ q_2d) @ (rot(n * theta) @ k_2d)
    expected = 1.0 * 0.8 * math.cos(0.3 - 0.0 + (m - n) * theta)
    assert math.isclose(scores[m, n], expected)
    for s in (-9, 1, 40):
        shifted = (rot((m + s) * theta) @ q_2d) @ (rot((n + s) * theta) @ k_2d)
        assert math.isclose(shifted, scores[m, n])
assert math.isclose(scores[2, 0], scores[6, 4])
assert f"{scores[2, 0]:.2f}" == "0.43" and f"{scores[6, 0]:.2f}" == "-0.59"

# %% [markdown] lang="en"
# ## Why a rotation: two dimensions as complex numbers
#
# Identify the vector $q = (q_1, q_2)$ with the complex number $q_1 + \mathrm{i}\,q_2$,
# using the same letter for both. The dot product is the real part of a product with
# a conjugate:
# $$\langle q, k\rangle = q_1 k_1 + q_2 k_2 = \mathrm{Re}\big[q\,\overline{k}\big]$$
# RoFormer asks for slightly more than the requirement: that the whole complex
# number $f(q, m)\,\overline{f(k, n)}$, whose real part is the score, depend only on
# $q$, $k$ and $m - n$, and that position $0$ change nothing, $f(q, 0) = q$. (The
# score alone would also let through a reflection, which sees only whether the
# distance is even or odd: [the note below](#deeper-the-reflection-that-the-score-alone-admits).) Write
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
# Multiplying by $e^{\mathrm{i}m\theta}$ is the counter-clockwise rotation by $m\theta$:
# $$q\,e^{\mathrm{i}m\theta} = R(m\theta)\,q$$
# $$R(\phi) = \begin{pmatrix}\cos\phi & -\sin\phi\\ \sin\phi & \cos\phi\end{pmatrix}$$

# %% [markdown] lang="ja"
# ## なぜ回転なのか：2 次元を複素数で考える
#
# ベクトル $q = (q_1, q_2)$ を複素数 $q_1 + \mathrm{i}\,q_2$ と同一視し、両者に同じ文字を使います。
# 内積は、共役との積の実部です。
# $$\langle q, k\rangle = q_1 k_1 + q_2 k_2 = \mathrm{Re}\big[q\,\overline{k}\big]$$
# RoFormer は、この性質より少し強い条件を課します。
# スコアを実部に持つ複素数 $f(q, m)\,\overline{f(k, n)}$ 全体が $q$、$k$、$m - n$ だけで決まることと、
# 位置 $0$ では何も変えないこと、つまり $f(q, 0) = q$ であることです。
# スコアだけの条件では距離の偶奇しか見ない鏡映も通ってしまうので、この強い条件が必要です（下の[「さらに詳しく」](#deeper-スコアだけの条件が許す鏡映)を参照）。
# すべてを極形式で $f(q, m) = \rho(q, m)\, e^{\mathrm{i}\Phi(q, m)}$、$q = |q|\, e^{\mathrm{i}\phi_q}$ と書きます。
#
# - **ノルム**：絶対値 $\rho(q, m)\,\rho(k, n)$ は、位置については $m - n$ だけで決まらなければなりません。
#   そのため $m = n$ なら $m = n = 0$ のときの値に等しく、$\rho(q, m)\,\rho(k, m) = |q|\,|k|$ です。
#   $k = q$ とすると $\rho(q, m) = |q|$ です。つまり、エンコーディングはノルムを変えてはならないのです。
# - **角度**：偏角 $\Phi(q, m) - \Phi(k, n)$ も、位置については $m - n$ だけで決まらなければなりません。
#   $m = n$ なら $0$ のときの値 $\phi_q - \phi_k$ に等しいので、$\Phi(q, m) - \phi_q = \Phi(k, m) - \phi_k$ です。
#   つまり、どのベクトルも同じ角度 $\varphi(m)$ だけ回ります。
#   すると $\varphi(m) - \varphi(n)$ も $m - n$ だけで決まり、特に $\varphi(m+1) - \varphi(m)$ はどの $m$ でも同じ定数 $\theta$ です。
#   $f(q, 0) = q$ は $\varphi(0) = 0$ を意味するので、角度は $\varphi(m) = m\theta$ と決まります。
#
# したがって
# $$f(q, m) = |q|\,e^{\mathrm{i}(\phi_q + m\theta)} = q\,e^{\mathrm{i}m\theta}$$
# で、スコアは
# $$\mathrm{Re}\big[f(q, m)\,\overline{f(k, n)}\big] = \mathrm{Re}\big[q\,\overline{k}\,e^{\mathrm{i}(m-n)\theta}\big]$$
# となります。$e^{\mathrm{i}m\theta}$ を掛けることは、角度 $m\theta$ だけ反時計回りに回転させることです。
# $$q\,e^{\mathrm{i}m\theta} = R(m\theta)\,q$$
# $$R(\phi) = \begin{pmatrix}\cos\phi & -\sin\phi\\ \sin\phi & \cos\phi\end{pmatrix}$$

# %% tags=["check"] summary={"en": "⟨q, k⟩ = Re[q k̄]; q e^{imθ} keeps norms and depends on m − n; m², C^m (C = diag(1, −1)) and mθ + 0.4 fail", "ja": "⟨q, k⟩ = Re[q k̄] です。q e^{imθ} はノルムを保ち m − n だけで決まり、m²、C^m（C = diag(1, −1)）、mθ + 0.4 は条件を破ります"}
q, k = torch.randn(2, dtype=torch.complex128)  # two 2D vectors as numbers
q_vec, k_vec = torch.view_as_real(q), torch.view_as_real(k)  # (q_1, q_2), ...
assert_close((q * k.conj()).real, q_vec @ k_vec)  # <q, k> = Re[q conj(k)]


def f(x, m, phase=lambda m: m * theta):  # x e^{i phase(m)}
    angle = torch.tensor(phase(m), dtype=f64)
    return x * torch.polar(torch.ones_like(angle), angle)


for m, n in [(0, 0), (3, 1), (7, 10), (100, -4)]:
    assert_close(f(q, m) * f(k, n).conj(), q * k.conj() * f(1, m - n))
    for s in (1, 25, -60):  # same distance, same complex product
        assert_close(f(q, m + s) * f(k, n + s).conj(), f(q, m) * f(k, n).conj())
    assert_close(torch.view_as_real(f(q, m)), rot(m * theta) @ q_vec)
    assert_close(f(q, m).abs(), q.abs())  # norms unchanged: rho(q, m) = |q|
assert_close(f(q, 0), q)  # f(q, 0) = q


def quadratic(m):  # an angle that is not linear in m
    return theta * m**2


assert not torch.allclose(
    f(q, 3, quadratic) * f(k, 1, quadratic).conj(),
    f(q, 5, quadratic) * f(k, 3, quadratic).conj(),
)

reflect = torch.diag(torch.tensor([1.0, -1.0], dtype=f64))  # C = diag(1, -1)


def c_power(m):  # C^m
    return torch.linalg.matrix_power(reflect, m)


for m, n in [(0, 0), (1, 1), (4, 1), (9, 6), (5, 2)]:
    score = (c_power(m) @ q_vec) @ (c_power(n) @ k_vec)
    assert_close(score, q_vec @ c_power(m + n) @ k_vec)  # q^T C^(m+n) k
    assert_close(score, q_vec @ c_power((m - n) % 2) @ k_vec)  # parity only
c_q, c_k = torch.view_as_complex(reflect @ q_vec), k.conj()  # C q, C k
assert_close(c_q, q.conj())  # C is complex conjugation
assert_close(c_q * c_k.conj(), (q * k.conj()).conj())  # m = n = 1
assert not torch.allclose(c_q * c_k.conj(), q * k.conj())  # m = n = 0 differs


def offset(m):  # a constant offset cancels in the product...
    return m * theta + 0.4


assert_close(f(q, 3, offset) * f(k, 1, offset).conj(), f(q, 5) * f(k, 3).conj())
assert not torch.allclose(f(q, 0, offset), q)  # ...but breaks f(q, 0) = q

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the reflection that the score alone admits.** With
# $C = \mathrm{diag}(1, -1)$ and $f(q, m) = C^m q$, the score
# $\langle C^m q, C^n k\rangle = q^\top C^{m+n} k$ depends only on whether $m + n$, and so
# $m - n$, is even: a relative encoding that sees only the parity of the distance.
# The complex product rules it out: at $m = n = 1$ it is $\overline{q\,\overline{k}}$,
# not $q\,\overline{k}$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：スコアだけの条件が許す鏡映**
#
# $C = \mathrm{diag}(1, -1)$ として $f(q, m) = C^m q$ とすると、スコア $\langle C^m q, C^n k\rangle = q^\top C^{m+n} k$ は、$m + n$、つまり $m - n$ が偶数かどうかだけで決まります。
# これは距離の偶奇しか見ない相対位置のエンコーディングです。
# 複素数の積の条件はこれを除外します。$m = n = 1$ での積は $q\,\overline{k}$ ではなく $\overline{q\,\overline{k}}$ になるからです。

# %% [markdown] lang="en"
# ## Many dimensions: one rotation per pair
#
# For $d$ features (even), RoFormer splits the vector into $d/2$ pairs, pair $i$ being
# the features $2i$ and $2i+1$, and rotates each pair as in two dimensions, with its
# own angle per position $\theta_i$:
# $$R_m = \mathrm{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big), \qquad \theta_i = 10000^{-2i/d}$$
# for $i = 0, 1, \dots, d/2-1$, and $f(q, m) = R_m\, q$. These are the frequencies of
# the [sinusoidal encoding](01-sinusoidal.ipynb), and `rope_frequencies(d)` returns
# the $\theta_i$ (`base` replaces $10000$). The wavelengths run from $2\pi$ up to
# $2\pi \cdot 10000^{(d-2)/d}$ positions: 13% below $10000 \cdot 2\pi$ for $d = 128$,
# but a factor $10000^{2/d} \approx 3.2$ below it for the $d = 16$ used next.
#
# The score needs care with the transposition. Each block satisfies
# $R(\alpha)^\top = R(-\alpha)$ and $R(\alpha)\,R(\beta) = R(\alpha+\beta)$, so
# $R_m^\top = R_{-m}$, $R_m^\top R_n = R_{n-m}$ and
# $\langle R_m q, R_n k\rangle = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k$. The matrix in the middle is $R_{n-m}$, not $R_{m-n}$. Both depend only on the
# distance, but they give different numbers: $q^\top R_{m-n}\, k$ is the score of the
# query at $n$ with the key at $m$. Pair by pair, with the complex view of the last
# section,
# $$q^\top R_{n-m}\, k = \mathrm{Re}\Big[\sum_{j=0}^{d/2-1} q^{(j)}\,\overline{k^{(j)}}\,e^{\mathrm{i}(m-n)\theta_j}\Big], \qquad q^{(j)} = q_{2j} + \mathrm{i}\,q_{2j+1}$$
# Each pair is one hand of the picture, turning at its own speed.

# %% [markdown] lang="ja"
# ## 多次元：ペアごとに 1 つの回転
#
# RoFormer は $d$ 次元のベクトル（次元数は偶数）を $d/2$ 組のペアに分けます。ペア $i$ は次元 $2i$ と $2i+1$ です。
# 各ペアを 2 次元のときと同じように、ペアごとに違う、位置 1 つあたりの角度 $\theta_i$ で回転させます。
# $$R_m = \mathrm{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big), \qquad \theta_i = 10000^{-2i/d}$$
# ここで $i = 0, 1, \dots, d/2-1$、$f(q, m) = R_m\, q$ です。
# [「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章と同じ周波数で、`rope_frequencies(d)` が $\theta_i$ を返します（`base` が $10000$ の代わりになります）。
# 波長は $2\pi$ から $2\pi \cdot 10000^{(d-2)/d}$ までです。
# 最長の波長は $d = 128$ なら $10000 \cdot 2\pi$ より 13% 短いだけですが、次に使う $d = 16$ では、その約 3.2 分の 1（$10000^{2/d} \approx 3.2$ で割った長さ）しかありません。
#
# スコアでは転置に注意が必要です。各ブロックは $R(\alpha)^\top = R(-\alpha)$ と
# $R(\alpha)\,R(\beta) = R(\alpha+\beta)$ を満たすので、$R_m^\top = R_{-m}$、$R_m^\top R_n = R_{n-m}$、$\langle R_m q, R_n k\rangle = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k$ です。
# 真ん中の行列は $R_{m-n}$ ではなく $R_{n-m}$ です。どちらも距離だけで決まりますが値は異なり、$q^\top R_{m-n}\, k$ は位置 $n$ のクエリと位置 $m$ のキーのスコアです。
# 前節の複素数の見方でペアごとに書くと、次のようになります。
# $$q^\top R_{n-m}\, k = \mathrm{Re}\Big[\sum_{j=0}^{d/2-1} q^{(j)}\,\overline{k^{(j)}}\,e^{\mathrm{i}(m-n)\theta_j}\Big], \qquad q^{(j)} = q_{2j} + \mathrm{i}\,q_{2j+1}$$
# 各ペアは前の図の針の 1 本で、それぞれの速さで回ります。

# %%
d = 16
thetas = rope_frequencies(d).double()  # theta_i = 10000^(-2i/d)


# %% tags=["check"] summary={"en": "θ_i are the sinusoids' frequencies, the longest wavelengths as stated; R_m^T R_n = R_{n−m}", "ja": "θ_i は正弦波の周波数で波長は本文どおり、R_m^T R_n = R_{n−m} です"}
def rope_matrix(m):  # R_m, block-diagonal, pairs (2i, 2i+1)
    return torch.block_diag(*(rot(m * t) for t in thetas.tolist()))


def to_complex(x):  # q^{(j)} = q_{2j} + i q_{2j+1}, pair j
    return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())


theta_exact = 10000.0 ** (-2 * torch.arange(d // 2, dtype=f64) / d)
assert_close(thetas, theta_exact, rtol=1e-6, atol=0)  # float32 rounding
sin_at_1 = sinusoidal(torch.tensor([1]), d, dtype=f64)[0, 0::2]  # sin(w_i)
assert_close(sin_at_1.asin(), theta_exact)  # the same frequencies
shortfall = {}  # 2 pi 10000 over the longest wavelength, 10000^(2/d)
for dd in (128, 16):
    longest = 2 * math.pi / rope_frequencies(dd).double()[-1].item()
    assert math.isclose(
        longest, 2 * math.pi * 10000 ** ((dd - 2) / dd), rel_tol=1e-6
    )
    shortfall[dd] = 2 * math.pi * 10000 / longest
assert round(100 * (1 - 1 / shortfall[128])) == 13  # 13% short
assert round(shortfall[16], 1) == 3.2  # 10000^(2/16) = 3.16

q, k = torch.randn(2, d, dtype=f64)
for m, n in [(0, 3), (5, 2), (40, 41), (1000, 7)]:
    r_m, r_n = rope_matrix(m), rope_matrix(n)
    assert_close(r_m.T, rope_matrix(-m))  # R_m^T = R_{-m}
    assert_close(r_m.T @ r_n, rope_matrix(n - m))  # R_m^T R_n = R_{n-m}
    score = (r_m @ q) @ (r_n @ k)  # <R_m q, R_n k>
    assert_close(score, q @ rope_matrix(n - m) @ k)  # = q^T R_{n-m} k
    assert not torch.isclose(score, q @ rope_matrix(m - n) @ k)  # R_{m-n}
    phases = torch.exp(1j * (m - n) * thetas)
    assert_close(
        score, (to_complex(q) * to_complex(k).conj() * phases).sum().real
    )

# %% [markdown] lang="en"
# ## Without the matrix: two elementwise products
#
# $R_m$ has $d^2$ entries but at most $2d$ of them differ from $0$, so no library
# builds it. Pair $i$ maps $(x_{2i}, x_{2i+1})$ to
# $$\big(x_{2i}\cos m\theta_i - x_{2i+1}\sin m\theta_i,\ \ x_{2i+1}\cos m\theta_i + x_{2i}\sin m\theta_i\big)$$
# which for all pairs at once is (RoFormer, eq. 34)
# $$R_m x = \begin{pmatrix}x_0\\ x_1\\ x_2\\ x_3\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\cos m\theta_0\\ \cos m\theta_0\\ \cos m\theta_1\\ \cos m\theta_1\\ \vdots\end{pmatrix} + \begin{pmatrix}-x_1\\ x_0\\ -x_3\\ x_2\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\sin m\theta_0\\ \sin m\theta_0\\ \sin m\theta_1\\ \sin m\theta_1\\ \vdots\end{pmatrix}$$
# a copy of $x$ with each pair swapped and one sign flipped, and two elementwise
# products with tables of cosines and sines that depend only on the positions.
# `apply_rope(x, positions, layout="interleaved")` computes this.
#
# The figure shows the table of cosines for $d = 128$: pair $0$ turns once every 6.28
# positions, the last pair only 0.0294 radians by $m = 255$. Fast pairs tell short
# distances apart, slow pairs long ones.

# %% [markdown] lang="ja"
# ## 行列を使わずに：成分ごとの積 2 つ
#
# $R_m$ の $d^2$ 個の成分のうち $0$ でないのは多くても $2d$ 個なので、どのライブラリもこの行列を作りません。
# ペア $i$ は $(x_{2i}, x_{2i+1})$ を次のベクトルに移します。
# $$\big(x_{2i}\cos m\theta_i - x_{2i+1}\sin m\theta_i,\ \ x_{2i+1}\cos m\theta_i + x_{2i}\sin m\theta_i\big)$$
# すべてのペアをまとめて書くと次のようになります（RoFormer の式 34）。
# $$R_m x = \begin{pmatrix}x_0\\ x_1\\ x_2\\ x_3\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\cos m\theta_0\\ \cos m\theta_0\\ \cos m\theta_1\\ \cos m\theta_1\\ \vdots\end{pmatrix} + \begin{pmatrix}-x_1\\ x_0\\ -x_3\\ x_2\\ \vdots\end{pmatrix} \odot \begin{pmatrix}\sin m\theta_0\\ \sin m\theta_0\\ \sin m\theta_1\\ \sin m\theta_1\\ \vdots\end{pmatrix}$$
# 各ペアの 2 成分を入れ替えて片方の正負を反転した $x$ のコピーを作り、元のベクトルに cos の表を、コピーに sin の表を成分ごとに掛けて足すだけです。
# どちらの表も位置だけで決まります。
# `apply_rope(x, positions, layout="interleaved")` がこれを計算します。
#
# 図は $d = 128$ の cos の表です。ペア $0$ は位置が 6.28 進むごとに 1 周し、最後のペアは $m = 255$ までに 0.0294 ラジアンしか回りません。速いペアは短い距離を、遅いペアは長い距離を見分けます。

# %%
x = torch.randn(5, d, dtype=f64)  # five vectors
pos = torch.tensor([0, 1, 9, 250, 4096])  # one position per vector
angles = pos[:, None].double() * thetas  # m theta_i, shape (5, d/2)
cos = angles.cos().repeat_interleave(2, -1)  # cos m theta_0, cos m theta_0, ...
sin = angles.sin().repeat_interleave(2, -1)
swapped = torch.stack([-x[:, 1::2], x[:, 0::2]], -1).flatten(-2)  # -x1, x0, ...
by_hand = x * cos + swapped * sin
out = apply_rope(x, pos, layout="interleaved")
print(f"max |apply_rope - by hand|: {(out - by_hand).abs().max():.1e}", end="")

# %% tags=["check"] summary={"en": "apply_rope is R_m and the elementwise formula; its matrix has 2d non-zero entries", "ja": "apply_rope は R_m と成分ごとの式に一致し、0 でない成分は 2d 個です"}
by_matrix = torch.stack(
    [rope_matrix(p) @ v for p, v in zip(pos.tolist(), x, strict=True)]
)
assert_close(out, by_matrix)
assert_close(out, by_hand)
# the matrix apply_rope applies, read off the basis vectors
eye_d = torch.eye(d, dtype=f64)
r_lib = apply_rope(eye_d, torch.tensor(3), layout="interleaved").T
assert (r_lib != 0).sum() == 2 * d
r_0 = apply_rope(eye_d, torch.tensor(0), layout="interleaved").T
assert torch.equal(r_0, eye_d)

# %% tags=["figure"] alt={"en": ["Heatmap of cos(mθ_i) for a head of size 128: position m from 0 to 255 across, pair i from 0 to 63 down. The first pairs change colour rapidly; the turns slow down the rows, and the lowest third stays dark red (near 1) across the range."], "ja": ["ヘッドの次元数 128 での cos(mθ_i) のヒートマップ。横軸は位置 m（0〜255）、縦軸はペア i（0〜63）。最初のペアは色が速く入れ替わり、下の行ほど回転が遅くなって、下の 3 分の 1 ほどは範囲全体で 1 に近い濃い赤のままです。"]}
d_head = 128
theta_head = rope_frequencies(d_head).double()
m = torch.arange(256).double()
lam = 2 * math.pi / theta_head
last = d_head // 2 - 1
print(f"wavelength of pair 0: {lam[0]:.2f}, of pair {last}: {lam[-1]:.0f}")
print(f"angle of pair {last} at m = 255: {255 * theta_head[-1]:.4f}", end="")

fig, ax = plt.subplots(figsize=(6.4, 1.7))
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

# %% tags=["check"] summary={"en": "wavelengths from 2π to below 10000·2π; the quoted numbers are the printed ones", "ja": "波長は 2π から 10000·2π の手前までで、本文の数値は出力どおりです"}
assert math.isclose(lam[0], 2 * math.pi) and lam[-1] < 10000 * 2 * math.pi
assert round(float(lam[-1])) == 54410
assert f"{255 * theta_head[-1]:.4f}" == "0.0294"

# %% [markdown] lang="en"
# ## Two pairings: interleaved and half
#
# Which two features form a pair is a convention, and two are in use.
#
# - `interleaved` pairs $2i$ with $2i+1$, as above: RoFormer, GPT-J, Meta's original
#   Llama code, torchtune.
# - `half` pairs $i$ with $i + d/2$: GPT-NeoX and Hugging Face's `rotate_half`. The
#   swapped copy is then $(-x_{d/2}, \dots, -x_{d-1}, x_0, \dots, x_{d/2-1})$, which is
#   what `rotate_half` returns, and the tables are
#   $(\cos m\theta_0, \dots, \cos m\theta_{d/2-1})$ written twice: no strided access.
#
# Pair $i$ turns by $m\theta_i$ in both; only the addresses of its two features
# differ, so the two are the same rotation up to a fixed permutation of the features
# (written out in [the note below](#deeper-the-permutation-between-the-layouts-and-converted-llama-checkpoints)). On the same vector the two layouts differ, so
# converting a model permutes weights.

# %% [markdown] lang="ja"
# ## 2 通りのペアの組み方：インターリーブ配置と半分割配置
#
# どの 2 つの次元をペアにするかは取り決めの問題で、2 通りが使われています。
#
# - `interleaved` は、ここまでのように $2i$ と $2i+1$ を組にします（インターリーブ配置）。
#   RoFormer、GPT-J、Meta の元の Llama のコード、torchtune がこちらです。
# - `half` は $i$ と $i + d/2$ を組にします（半分割配置）。GPT-NeoX と Hugging Face の `rotate_half` がこちらです。
#   入れ替えたコピーは $(-x_{d/2}, \dots, -x_{d-1}, x_0, \dots, x_{d/2-1})$ で、これが `rotate_half` の返す値です。
#   表は $(\cos m\theta_0, \dots, \cos m\theta_{d/2-1})$ を 2 回並べたもので、飛び飛びの要素へのアクセス（ストライドアクセス）が要りません。
#
# どちらでもペア $i$ は $m\theta_i$ だけ回り、違うのは 2 つの次元の置き場所だけです。
# つまり 2 つは、次元の決まった並べ替えを除けば同じ回転です（式は下の[「さらに詳しく」](#deeper-配置の間の並べ替えとllama-の変換済みチェックポイント)）。
# 同じベクトルに対して 2 つの配置は異なる結果を出すので、モデルを変換するときは重みを並べ替えます。


# %%
def rotate_half(x):  # Hugging Face / GPT-NeoX: (-x2, x1)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


x = torch.randn(3, 7, d, dtype=f64)
pos = torch.arange(7) * 13
angles = pos[:, None].double() * thetas  # (7, d/2)
cos = torch.cat([angles.cos()] * 2, -1)  # the table, written twice
sin = torch.cat([angles.sin()] * 2, -1)
half = x * cos + rotate_half(x) * sin

# %% tags=["check"] summary={"en": "rotate_half is the half layout, R^half_m = Π^T R_m Π, and the two layouts differ", "ja": "rotate_half は半分割配置で、R^half_m = Π^T R_m Π です。同じベクトルに対する 2 つの配置の結果は異なります"}
assert_close(half, apply_rope(x, pos, layout="half"))
h = d // 2
perm = torch.stack([torch.arange(h), torch.arange(h) + h], -1).flatten()
inv_perm = torch.argsort(perm)  # 0, 2, 4, ..., 1, 3, 5, ...
assert perm.tolist()[:4] == [0, h, 1, h + 1]
assert inv_perm.tolist()[: h + 1] == [*range(0, d, 2), 1]
assert_close(
    half, apply_rope(x[..., perm], pos, layout="interleaved")[..., inv_perm]
)
big_pi = torch.eye(d, dtype=f64)[perm]  # (Pi x)_j = x_{pi_j}
eye = torch.eye(d, dtype=f64)
for p in (1, 5, 300):
    # columns: the images of the basis vectors e_j
    r_half = apply_rope(eye, torch.tensor(p), layout="half").T
    assert_close(r_half, big_pi.T @ rope_matrix(p) @ big_pi)
assert not torch.allclose(half, apply_rope(x, pos, layout="interleaved"))

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the permutation between the layouts, and converted Llama checkpoints.**
# Let $\Pi$ be the permutation matrix of $\pi = (0, d/2, 1, d/2+1, \dots, d/2-1, d-1)$,
# with $(\Pi x)_j = x_{\pi_j}$ (in code, `x[..., perm]`): $\Pi x$ puts the partners $i$
# and $i + d/2$ next to each other, the interleaved rotation turns them, and
# $\Pi^\top$ puts them back:
# $$R^{\text{half}}_m = \Pi^\top R_m\, \Pi$$
#
# Meta trained Llama with the interleaved pairing; Hugging Face's Llama code, which
# descends from its GPT-NeoX code, uses `rotate_half`. Rather than change the code,
# `convert_llama_weights_to_hf.py` permutes the weights: within every head it
# reorders the output rows of $W_Q$ and $W_K$ (not $W_V$) to
# $(0, 2, 4, \dots, d-2, 1, 3, \dots, d-1)$, which is $\pi^{-1}$:
# $$W_Q^{\text{HF}} = \Pi^\top W_Q, \qquad W_K^{\text{HF}} = \Pi^\top W_K$$
# per head. Then $q^{\text{HF}} = \Pi^\top q$, and since $R^{\text{half}}_m\, \Pi^\top = \Pi^\top R_m$
# and $\Pi\,\Pi^\top = I$,
# $$\big(R^{\text{half}}_m\, \Pi^\top q\big)^\top \big(R^{\text{half}}_n\, \Pi^\top k\big) = \big(\Pi^\top R_m\, q\big)^\top \big(\Pi^\top R_n\, k\big) = q^\top R_m^\top R_n\, k$$
# Every score is exactly the original one. With
# [grouped-query attention](../docs/glossary.md#grouped-query-attention), $W_K$ is
# permuted head by head over the key heads.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：配置の間の並べ替えと、Llama の変換済みチェックポイント**
#
# $\pi = (0, d/2, 1, d/2+1, \dots, d/2-1, d-1)$ の置換行列を $\Pi$ とします（$(\Pi x)_j = x_{\pi_j}$、コードでは `x[..., perm]`）。
# $\Pi x$ でペアを組む次元 $i$ と $i + d/2$ を隣どうしに並べ、インターリーブ配置の回転で回してから、$\Pi^\top$ で元の場所に戻します。
# $$R^{\text{half}}_m = \Pi^\top R_m\, \Pi$$
#
# Meta はインターリーブ配置で Llama を学習しました。
# 一方、GPT-NeoX のコードから派生した Hugging Face の Llama のコードは `rotate_half` を使います。
# `convert_llama_weights_to_hf.py` は、コードを変える代わりに重みを並べ替えます。
# 各ヘッドの中で、$W_Q$ と $W_K$ の出力側の行（$W_V$ はそのまま）を
# $(0, 2, 4, \dots, d-2, 1, 3, \dots, d-1)$ の順、つまり $\pi^{-1}$ の順に並べ直します。
# $$W_Q^{\text{HF}} = \Pi^\top W_Q, \qquad W_K^{\text{HF}} = \Pi^\top W_K$$
# これをヘッドごとに行います。すると $q^{\text{HF}} = \Pi^\top q$ で、
# $R^{\text{half}}_m\, \Pi^\top = \Pi^\top R_m$ と $\Pi\,\Pi^\top = I$ から次が成り立ちます。
# $$\big(R^{\text{half}}_m\, \Pi^\top q\big)^\top \big(R^{\text{half}}_n\, \Pi^\top k\big) = \big(\Pi^\top R_m\, q\big)^\top \big(\Pi^\top R_n\, k\big) = q^\top R_m^\top R_n\, k$$
# どのスコアも元の値とまったく同じです。
# [グループ化クエリアテンション](../docs/glossary.ja.md#grouped-query-attention)では、$W_K$ はキーのヘッドを単位として並べ替えます。

# %% tags=["deeper"]
d_model, n_heads, n_kv, d_h, seq = 32, 4, 2, 8, 6


def permute(w, n_heads, dim1=d_model, dim2=d_model):
    """The helper of convert_llama_weights_to_hf.py."""
    w = w.view(n_heads, dim1 // n_heads // 2, 2, dim2)  # (head, pair, member)
    return w.transpose(1, 2).reshape(dim1, dim2)  # all first members first


# Meta layout (rows = outputs): 4 query heads, 2 key/value heads
w_q = torch.randn(n_heads * d_h, d_model, dtype=f64)
w_k, w_v = torch.randn(2, n_kv * d_h, d_model, dtype=f64)
w_q_hf, w_k_hf = permute(w_q, n_heads), permute(w_k, n_kv, dim1=n_kv * d_h)


# %% tags=["deeper", "check"] summary={"en": "permute reorders each head's rows of W_Q to π⁻¹; with grouped-query attention, Meta's weights with the interleaved rotation and the permuted weights with rotate_half give the same scores and outputs, to 1e-12; unpermuted weights do not", "ja": "permute は各ヘッドの W_Q の行を π⁻¹ の順に並べ替えます。グループ化クエリアテンションで、Meta の重みをインターリーブ配置で回転させた場合と、並べ替えた重みを rotate_half で回転させた場合は、1e-12 以内で同じスコアと出力になります。並べ替えない重みでは一致しません"}
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
s_meta, out_meta = scores_and_output(w_q, w_k, "interleaved")  # Meta
s_hf, out_hf = scores_and_output(w_q_hf, w_k_hf, "half")  # Hugging Face
assert_close(s_hf, s_meta)
assert_close(out_hf, out_meta)
assert (s_hf - s_meta).abs().max() < 1e-12
s_wrong, _ = scores_and_output(w_q, w_k, "half")  # Meta weights, rotate_half
assert not torch.allclose(s_wrong, s_meta)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: partial rotation.** Nothing requires every feature to be rotated
# ([partial rotation](../docs/glossary.md#partial-rotation)). GPT-NeoX rotates only the
# first `rotary_pct` of each head and passes the rest through; GPT-J does the same with
# `rotary_dim`. Split a head into $x = (x_{\text{rot}}, x_{\text{pass}})$, with $r$
# rotated features. The rotated part gets the frequencies of an $r$-dimensional
# RoPE, $\theta_i = 10000^{-2i/r}$, and the score splits into a relative term and a
# term that carries no position at all:
# $$\langle f(q, m), f(k, n)\rangle = q_{\text{rot}}^\top R_{n-m}\, k_{\text{rot}} + q_{\text{pass}}^\top k_{\text{pass}}$$
# GPT-NeoX-20B has heads of 96 features and `rotary_pct = 0.25`, so it rotates 24:
# `apply_rope(x, positions, rotary_dim=24)` in `posenc`. With `half`, the pairs are
# $i$ and $i + r/2$ within the rotated part.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：部分回転**
#
# すべての次元を回転させる必要はありません（[部分回転](../docs/glossary.ja.md#partial-rotation)）。
# GPT-NeoX は各ヘッドの先頭 `rotary_pct` の割合だけを回転させ、残りはそのまま通します。GPT-J も `rotary_dim` で同じことをします。
# ヘッドを $x = (x_{\text{rot}}, x_{\text{pass}})$ に分け、回転させる次元を $r$ 個とします。
# 回転部分には $r$ 次元の RoPE の周波数 $\theta_i = 10000^{-2i/r}$ が使われ、
# スコアは相対位置の項と、位置をまったく含まない項に分かれます。
# $$\langle f(q, m), f(k, n)\rangle = q_{\text{rot}}^\top R_{n-m}\, k_{\text{rot}} + q_{\text{pass}}^\top k_{\text{pass}}$$
# GPT-NeoX-20B のヘッドは 96 次元で、`rotary_pct = 0.25` なので、回転させるのは 24 次元です。
# `posenc` では `apply_rope(x, positions, rotary_dim=24)` と書きます。
# `half` では、回転部分の中で $i$ と $i + r/2$ がペアになります。

# %% tags=["deeper", "check"] summary={"en": "with rotary_dim=24 of 96, the last 72 features pass unchanged, the first 24 get a 24-dimensional RoPE with θ_i = 10000^(−2i/r), the score splits as stated, and RotaryEmbedding(24) does the same", "ja": "96 次元のうち rotary_dim=24 では、後ろの 72 次元はそのまま通り、先頭の 24 次元には θ_i = 10000^(−2i/r) の 24 次元の RoPE がかかり、スコアは本文のとおりに分かれ、RotaryEmbedding(24) も同じです"}
head, rotary_pct = 6144 // 64, 0.25  # GPT-NeoX-20B: hidden size 6144, 64 heads
r = int(head * rotary_pct)
assert r == 24
q, k = torch.randn(2, 5, head, dtype=f64)
pos = torch.tensor([0, 3, 17, 64, 1000])
q_out = apply_rope(q, pos, rotary_dim=r)
assert torch.equal(q_out[:, r:], q[:, r:])  # the passed features: no position
assert_close(q_out[:, :r], apply_rope(q[:, :r], pos))  # an r-dimensional RoPE

theta_r = rope_frequencies(r).double()  # 10000^(-2i/r)
theta_r_exact = 10000.0 ** (-2 * torch.arange(r // 2, dtype=f64) / r)
assert_close(theta_r, theta_r_exact, rtol=1e-6, atol=0)
adjacent = torch.arange(r).view(2, -1).T.flatten()  # half pairs -> adjacent
q_rot, k_rot = q[:, :r][:, adjacent], k[:, :r][:, adjacent]
k_out = apply_rope(k, pos, rotary_dim=r)
for a in range(5):
    for b in range(5):
        rel = torch.block_diag(
            *(rot((pos[b] - pos[a]).item() * t) for t in theta_r.tolist())
        )
        expected = q_rot[a] @ rel @ k_rot[b] + q[a, r:] @ k[b, r:]
        assert_close(q_out[a] @ k_out[b], expected)  # relative + no position

module_q, module_k = RotaryEmbedding(r)(q, k, pos)  # heads larger than dim
assert_close(module_q, q_out)
assert_close(module_k, k_out)

# %% [markdown] lang="en"
# ## What the rotation guarantees
#
# - **Only the distance.** The score of a query at $m$ and a key at $n$ equals that at
#   $m + s$ and $n + s$ for every shift $s$, so shifting a whole sequence leaves
#   attention unchanged: positions 500 to 511 are attended to as 0 to 11.
# - **Norms.** Each $R(m\theta_i)$ is a rotation, so $\lVert R_m x \rVert = \lVert x \rVert$:
#   RoPE never changes the norm of a query or a key, at any position.
# - **Values and a KV cache.** Only queries and keys are rotated, never values. A
#   key's rotation depends on its own position only, so with a
#   [KV cache](../docs/glossary.md#kv-cache) each key is rotated once, when its token
#   arrives, and stored rotated; a later step rotates only its new query and key.
#
# `RotaryEmbedding(dim)(q, k, positions)`, the module form, equals `apply_rope` on
# each and accepts fewer key heads than query heads.

# %% [markdown] lang="ja"
# ## 回転が保証すること
#
# - **距離だけに依存**：位置 $m$ のクエリと位置 $n$ のキーのスコアは、どのずらし量 $s$ でも $m + s$ と $n + s$ のスコアに等しくなります。
#   系列全体をずらしてもアテンションは変わらず、位置 500〜511 は 0〜11 と同じように扱われます。
# - **ノルム**：各 $R(m\theta_i)$ は回転なので $\lVert R_m x \rVert = \lVert x \rVert$ で、RoPE はどの位置でもクエリやキーのノルムを変えません。
# - **バリューと KV キャッシュ**：回転させるのはクエリとキーだけで、バリューは回転させません。
#   キーの回転はキー自身の位置だけで決まるので、[KV キャッシュ](../docs/glossary.ja.md#kv-cache)では各キーをトークンが来たときに 1 回だけ回転させて保存し、
#   後のステップでは新しいクエリとキーだけを回転させます。
#
# モジュール版の `RotaryEmbedding(dim)(q, k, positions)` は両方に `apply_rope` を適用したものと同じで、キーのヘッドがクエリのヘッドより少なくても使えます。

# %% tags=["check"] summary={"en": "scores depend on m − n only, norms are kept, and a cache of rotated keys matches the full pass", "ja": "スコアは m − n だけで決まり、ノルムは保たれ、回転済みのキーのキャッシュは一括計算と一致します"}
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
assert_close(apply_rope(x, big_pos).norm(dim=-1), x.norm(dim=-1))

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

cache_k, cache_v = [], []  # each key rotated once; values not rotated
for t in range(12):
    cache_k.append(apply_rope(ks[:, t], torch.tensor(t)))  # stored rotated
    cache_v.append(vs[:, t])
    q_t = apply_rope(qs[:, t : t + 1], torch.tensor(t))  # the new query
    step = attention(q_t, torch.stack(cache_k, 1), torch.stack(cache_v, 1))
    assert_close(step, out_0[:, t : t + 1])

rope = RotaryEmbedding(d)
q_gqa = torch.randn(2, 8, 300, d)  # (b, n_h, s, h_d)
k_gqa = torch.randn(2, 2, 300, d)  # 2 key heads
pos_gqa = torch.arange(300)  # beyond the initial table: it grows
q_rot, k_rot = rope(q_gqa, k_gqa, pos_gqa)
assert_close(q_rot, apply_rope(q_gqa, pos_gqa))
assert_close(k_rot, apply_rope(k_gqa, pos_gqa))
assert len(rope.state_dict()) == 0

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: float32 angles at large positions.** The shift invariance holds
# exactly only in exact arithmetic; in float32 the angles $m\theta_i$ carry the errors
# of [*Sinusoids in the wild: pitfalls*](02-sinusoids-in-the-wild.ipynb#the-variants-and-when-they-matter),
# up to 0.039 radians near position $10^6$ with $d = 64$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：大きな位置での float32 の角度**
#
# ずらしても変わらないという性質が厳密に成り立つのは、誤差のない計算の場合です。
# float32 では、角度 $m\theta_i$ に[「実装ごとに違う正弦波位置エンコーディング：落とし穴」](02-sinusoids-in-the-wild.ipynb#変種とその違いが問題になる場面)の章で見た誤差が乗り、位置 $10^6$ 付近、$d = 64$ では最大 0.039 ラジアンになります。

# %% tags=["deeper", "check"] summary={"en": "near position 10^6 every float32 angle stays within (ε_i + u + ε_i u)mθ_i, with ε_i up to 1.17u; pair 0 is exact and the largest error is 0.039", "ja": "位置 10^6 付近で、float32 のどの角度も (ε_i + u + ε_i u)mθ_i 以内にあり、ε_i は最大 1.17u です。ペア 0 は厳密で、最大の誤差は 0.039 です"}
u = 2.0**-24
m_big = torch.arange(999_000, 1_001_000)
theta_64 = 10000.0 ** (-2 * torch.arange(d // 2, dtype=f64) / d)
exact_angles = m_big.double()[:, None] * theta_64
angles32 = m_big.float()[:, None] * rope_frequencies(d)  # as apply_rope forms
angle_err = (angles32.double() - exact_angles).abs()
eps = (rope_frequencies(d).double() / theta_64 - 1).abs()  # epsilon_i
assert 1.16 * u < eps.max() < 1.18 * u  # not rounded once: more than u
angle_bound = (eps + u + eps * u) * exact_angles
assert (angle_err <= angle_bound * (1 + 1e-9)).all()
assert angle_err[:, 0].max() == 0 and 0.038 < angle_err.max() < 0.040

# %% [markdown] lang="en"
# ## Long-term decay: what the paper's bound shows
#
# RoFormer (§3.4.3) argues that RoPE makes scores decay with distance
# ([long-term decay](../docs/glossary.md#long-term-decay)). Write $r = m - n$ and
# $h_j = q^{(j)}\,\overline{k^{(j)}}$ for the product of pair $j$, so that the score is
# $\mathrm{Re}\big[\sum_j h_j\, e^{\mathrm{i}r\theta_j}\big]$, and
# $S_t = \sum_{l=0}^{t-1} e^{\mathrm{i}r\theta_l}$ for the partial sums of the phases.
# As $e^{\mathrm{i}r\theta_j} = S_{j+1} - S_j$, summation by parts ([note below the figure](#deeper-where-the-bound-comes-from)) gives
# $\big|q^\top R_{n-m}\, k\big| \le \Big(\max_j |h_{j+1} - h_j|\Big) \sum_{t=1}^{d/2} |S_t|$:
# a factor that does not depend on the distance times $\sum_t |S_t|$. The paper plots the average
# $\frac{1}{d/2}\sum_{t=1}^{d/2} |S_t|$ against the distance and calls it the *relative upper bound*. At $r = 0$ every
# phase is $1$, $S_t = t$, and the average is $(d/2 + 1)/2$, 32.5 for $d = 128$. As $r$
# grows, the fast phases point in all directions and the partial sums stay small:
# the left panel, the shape of the paper's Figure 2, falls to 6.548 at $r = 250$,
# with ripples.
#
# The scores themselves need not decay. The bound is loose: for the random pair
# below it is at least 204 times the actual $|q^\top R_{n-m}\, k|$ at every distance
# up to 250. And random scores do not decay on average: for $q, k$ drawn from
# $N(0, I)$, $R_r k$ is again $N(0, I)$ because $R_r$ is orthogonal, so $q^\top R_r\, k$
# has mean $0$ and variance $d$ at every distance (right panel, blue). Decay appears
# when $q$ and $k$ are aligned pair by pair: $q = k = \mathbf{1}$ gives
# $2\sum_j \cos(r\theta_j)$, twice the sinusoids' $PE(m) \cdot PE(n)$, which falls
# from 128 (orange). Whether a trained model's scores decay depends on what it learns.

# %% [markdown] lang="ja"
# ## 長距離減衰：論文の上界が示すもの
#
# RoFormer（§3.4.3）は、RoPE によってスコアが距離とともに減衰すると論じています（[長距離減衰](../docs/glossary.ja.md#long-term-decay)）。
# $r = m - n$、ペア $j$ の積を $h_j = q^{(j)}\,\overline{k^{(j)}}$ とすると、スコアは $\mathrm{Re}\big[\sum_j h_j\, e^{\mathrm{i}r\theta_j}\big]$ です。
# 位相の部分和を $S_t = \sum_{l=0}^{t-1} e^{\mathrm{i}r\theta_l}$ とします。
# $e^{\mathrm{i}r\theta_j} = S_{j+1} - S_j$ なので、部分和分（図の下の[「さらに詳しく」](#deeper-上界の導き方)）により $\big|q^\top R_{n-m}\, k\big| \le \Big(\max_j |h_{j+1} - h_j|\Big) \sum_{t=1}^{d/2} |S_t|$ です。スコアは距離によらない因子と $\sum_t |S_t|$ の積で抑えられます。
# 論文は平均 $\frac{1}{d/2}\sum_{t=1}^{d/2} |S_t|$ を「相対的な上界」（relative upper bound）と呼び、距離に対して描いています。
# $r = 0$ ではすべての位相が $1$ なので $S_t = t$ で、平均は $(d/2 + 1)/2$、$d = 128$ なら 32.5 です。
# $r$ が大きくなると速い位相があらゆる方向を向き、部分和は小さいままです。
# 論文の図 2 の形を再現した左の図は、波打ちながら $r = 250$ で 6.548 まで下がります。
#
# ただし、スコアそのものが減衰するとは限りません。まず上界はかなり緩く、下のランダムな組では、距離 250 までのどの距離でも実際の $|q^\top R_{n-m}\, k|$ の 204 倍以上あります。
# また、ランダムなスコアは平均としては減衰しません。
# $q, k$ を $N(0, I)$ から取ると、$R_r$ は直交行列なので $R_r k$ も $N(0, I)$ に従い、$q^\top R_r\, k$ はどの距離でも平均 $0$、分散 $d$ です（右の図の青）。
# 減衰が現れるのは $q$ と $k$ がペアごとにそろっている場合です。
# $q = k = \mathbf{1}$ ならスコアは正弦波の内積 $PE(m) \cdot PE(n)$ の 2 倍、$2\sum_j \cos(r\theta_j)$ で、128 から下がります（オレンジ）。
# 学習済みのモデルのスコアが減衰するかは、学習の結果しだいです。

# %% tags=["figure"] alt={"en": ["Left: RoFormer's relative upper bound for d = 128 against the distance m − n up to 250, falling from 32.5 to about 6.5 with ripples. Right: actual scores; a random q, k oscillates around 0 without decaying, while q = k = 1 falls from 128 to about 40."], "ja": ["左は d = 128 での RoFormer の相対的な上界を距離 m − n（0〜250）に対して描いたもので、波打ちながら 32.5 から約 6.5 まで下がります。右は実際のスコアで、ランダムな q と k は減衰せずに 0 のまわりで振動し、q = k = 1 は 128 から約 40 まで下がります。"]}
d = 128
theta_d = rope_frequencies(d).double()
dist = torch.arange(251)
phases = torch.exp(1j * dist[:, None].double() * theta_d)  # e^{i r theta_l}
partial = torch.cumsum(phases, dim=-1)  # column t-1 holds S_t, t = 1..d/2
relative_bound = partial.abs().mean(dim=-1)  # (1/(d/2)) sum_t |S_t|

q, k = torch.randn(2, d, dtype=f64)
k_0 = apply_rope(k, torch.tensor(0), layout="interleaved")  # the key at n = 0
q_r = apply_rope(q.expand(251, d), dist, layout="interleaved")  # query at r
scores = q_r @ k_0
ones = torch.ones(d, dtype=f64)
ones_scores = apply_rope(ones.expand(251, d), dist, layout="interleaved") @ ones

rb, near, far = relative_bound, scores[:51].abs(), scores[200:].abs()
print(f"relative bound: r = 0: {rb[0]:.1f}, r = 250: {rb[250]:.3f}, ", end="")
print(f"min {rb.min():.3f} at r = {int(rb.argmin())}")
print(
    f"max |score|, r = 0..50: {near.max():.2f}, r = 200..250: {far.max():.2f}"
)

fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(6.4, 2.1))
ax_l.plot(dist, relative_bound, color=INK)
ax_l.set(
    xlabel="$m-n$", ylabel=r"$\frac{1}{d/2}\sum_{t} |S_t|$", title="$d = 128$"
)
ax_r.plot(dist, scores, lw=1, label=r"$q, k \sim \mathcal{N}(0, I)$")
ax_r.plot(dist, ones_scores, lw=1.5, label=r"$q = k = \mathbf{1}$")
ax_r.axhline(0, color="0.5", lw=0.8)
ax_r.set(xlabel="$m-n$", ylabel=r"$q^\top R_{n-m}\, k$", title="$d = 128$")
ax_r.legend(loc="upper right", fontsize="small")
plt.show()

# %% tags=["check"] summary={"en": "Abel's identity and the bound hold; random scores have mean 0 and variance d", "ja": "アーベルの恒等式と上界が成り立ち、ランダムなスコアは平均 0、分散 d です"}
assert_close(relative_bound[0], torch.tensor((d / 2 + 1) / 2, dtype=f64))
h_i = to_complex(q) * to_complex(k).conj()  # (d/2,)
h_ext = torch.cat([h_i, h_i.new_zeros(1)])  # h_{d/2} = 0
s_prev = torch.cat([torch.zeros(251, 1, dtype=partial.dtype), partial], -1)
assert_close(phases, s_prev[:, 1:] - s_prev[:, :-1])  # S_{i+1} - S_i
assert_close(  # Abel
    (h_i * phases).sum(-1), (partial * (h_ext[:-1] - h_ext[1:])).sum(-1)
)
assert_close(scores, (h_i * phases).sum(-1).real)  # the score, pair by pair
bound = (h_ext[1:] - h_ext[:-1]).abs().max() * partial.abs().sum(-1)
assert (scores.abs() <= bound).all() and (bound / scores.abs()).min() >= 204
zero = torch.tensor(0)
pe_dot = (  # PE(r) . PE(0), float64 frequencies against float32 theta_i
    sinusoidal(dist, d, dtype=f64) @ sinusoidal(zero[None], d, dtype=f64)[0]
)
assert_close(ones_scores, 2 * pe_dot, rtol=0, atol=1e-3)
assert ones_scores[200:].max() < ones_scores[0] / 2  # q = k = 1: it falls
gen = torch.Generator().manual_seed(1)  # 4000 random pairs from N(0, I)
q_many, k_many = torch.randn(2, 4000, d, dtype=f64, generator=gen)
for r in (0, 100, 250):
    many = (apply_rope(q_many, torch.tensor(r)) * k_many).sum(-1)
    assert abs(many.mean()) < 0.6 and abs(many.var() / d - 1) < 0.1, r
assert f"{rb[250]:.3f}" == "6.548" and f"{rb.min():.3f}" == "6.415"
assert int(rb.argmin()) == 236
assert f"{near.max():.2f}" == "15.77" and f"{far.max():.2f}" == "16.39"
assert round(ones_scores[0].item()) == 128 and 39 < ones_scores[250] < 40

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where the bound comes from.** Summation by parts (Abel's
# transformation) with the partial sums $S_t$ gives
# $$\sum_{j=0}^{d/2-1} h_j\,e^{\mathrm{i}r\theta_j} = \sum_{j=0}^{d/2-1} S_{j+1}\,(h_j - h_{j+1}), \qquad h_{d/2} = 0$$
# because $e^{\mathrm{i}r\theta_j} = S_{j+1} - S_j$ with $S_0 = 0$. Taking absolute values,
# $$\big|q^\top R_{n-m}\, k\big| \le \Big(\max_j |h_{j+1} - h_j|\Big) \sum_{t=1}^{d/2} |S_t|$$
# The first factor does not depend on the distance; the second, averaged over $t$, is
# the relative upper bound.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：上界の導き方**
#
# 位相の部分和 $S_t$ を使って部分和分（アーベル変換）を行うと、次の式が得られます。
# $$\sum_{j=0}^{d/2-1} h_j\,e^{\mathrm{i}r\theta_j} = \sum_{j=0}^{d/2-1} S_{j+1}\,(h_j - h_{j+1}), \qquad h_{d/2} = 0$$
# $S_0 = 0$ として $e^{\mathrm{i}r\theta_j} = S_{j+1} - S_j$ だからです。絶対値を取ると次のようになります。
# $$\big|q^\top R_{n-m}\, k\big| \le \Big(\max_j |h_{j+1} - h_j|\Big) \sum_{t=1}^{d/2} |S_t|$$
# 最初の因子は距離によらず、2 つ目の因子を $t$ について平均したものが相対的な上界です。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what a trained model does with the pairs.** Studying a trained
# Gemma 7B, Barbero et al. (2024) argue that decay is not the main reason RoPE
# helps: the model builds sharp positional patterns with the fastest pairs, and
# mostly uses the slowest, which barely turn over a context, for what they suspect
# is content. Their p-RoPE, which leaves the slowest pairs unrotated, is in
# [*Rotary in today's LLMs*](14-rope-in-llms.ipynb#partial-rotation-against-p-rope).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：学習済みのモデルはペアをどう使うか**
#
# Barbero ら（2024）は学習済みの Gemma 7B を調べ、RoPE が役に立つ主な理由は減衰ではないと論じています。
# このモデルは、最も速いペアで位置に基づく鋭いパターンを作ります。
# 一方で最もよく使っているのは、コンテキスト全体でもほとんど回らない最も遅いペアで、著者らはそれが内容の情報を運んでいると推測しています。
# 最も遅いペアを回転させない Barbero らの p-RoPE は、[「現在の LLM の回転位置埋め込み」](14-rope-in-llms.ipynb#部分回転と-p-rope)の章で扱います。

# %% [markdown] lang="en"
# <!-- explorable: 08-rope -->
# *On the website, an interactive figure takes the place of this note: the
# relative upper bound for any base and dimension.*

# %% [markdown] lang="ja"
# <!-- explorable: 08-rope -->
# サイトでは、この注記の場所に対話的な図があります。任意の底と次元数で、相対的な上界を描きます。

# %% [markdown] lang="en"
# ## In practice: float32 angles and the shape of the positions
#
# **Form the angles in float32.** bfloat16 keeps 8 significant bits, so position
# 1001 becomes 1000.0 and angles $m\theta_i$ formed in bfloat16 would give distinct
# tokens one rotation. `apply_rope` forms them in float32 (float64 for float64
# input) and returns the input's dtype.
#
# **Give positions the shape of the vectors.** `positions` broadcasts against
# `x.shape[:-1]`, one position per vector. For tensors of shape
# `(batch, heads, seq, head_dim)`, Hugging Face's `position_ids` of shape
# `(batch, seq)` become `position_ids[:, None, :]`. Passed as they are, they raise a
# `ValueError`, except when the batch size is 1 (then they are right) or equals the
# number of heads: then they rotate by the wrong positions, silently.

# %% [markdown] lang="ja"
# ## 実際に使うときの注意：float32 の角度と位置の形状
#
# **角度は float32 で作ります**。bfloat16 の有効桁は 8 ビットなので、位置 1001 は 1000.0 になります。
# 角度 $m\theta_i$ を bfloat16 で作ると、別々のトークンが同じ回転を受けてしまいます。
# `apply_rope` は角度を float32（float64 の入力なら float64）で作り、入力と同じ型で返します。
#
# **位置にはベクトルに合った形状を与えます**。`positions` は `x.shape[:-1]` に対してブロードキャストされ、ベクトルごとに 1 つの位置を与えます。
# 形状 `(batch, heads, seq, head_dim)` のテンソルには、Hugging Face の `(batch, seq)` の `position_ids` を `position_ids[:, None, :]` として渡します。
# そのまま渡すと `ValueError` になります。例外は 2 つあり、バッチサイズが 1 なら正しく回転しますが、バッチサイズがヘッド数に等しいと、エラーも出さずに誤った位置で回転します。

# %% tags=["check"] summary={"en": "bfloat16 merges 1000 and 1001; apply_rope rotates in float32; position shapes act as stated", "ja": "bfloat16 は 1000 と 1001 を区別できません。apply_rope は float32 で回転し、位置の形状は本文どおりに働きます"}
assert torch.tensor(1001.0).bfloat16() == torch.tensor(1000.0).bfloat16()
assert torch.tensor(4097.0).bfloat16() == torch.tensor(4096.0).bfloat16()
x_bf16 = torch.randn(2, 1024, 64).bfloat16()
pos = torch.arange(1024)
out_bf16 = apply_rope(x_bf16, pos)
assert out_bf16.dtype == torch.bfloat16
assert_close(out_bf16, apply_rope(x_bf16.float(), pos).bfloat16())
angle_bf16 = pos.bfloat16()[:, None] * rope_frequencies(64).bfloat16()
angle_f32 = pos.float()[:, None] * rope_frequencies(64)
assert torch.equal(angle_bf16[1000], angle_bf16[1001])  # one rotation
assert not torch.equal(angle_f32[1000], angle_f32[1001])

x = torch.randn(3, 4, 9, 32)  # (batch, heads, seq, head_dim)
position_ids = torch.stack([torch.arange(9) + shift for shift in (0, 5, 2)])
rotated = apply_rope(x, position_ids[:, None, :])
for b in range(3):
    assert_close(rotated[b], apply_rope(x[b], position_ids[b]))
try:
    apply_rope(x, position_ids)  # (b, s) against (b, n_h, s): no broadcast
    raise AssertionError("expected a ValueError")
except ValueError:
    pass  # the message suggests position_ids[:, None, :]
x_sq = torch.randn(4, 4, 9, 32)  # batch size = number of heads = 4
ids_sq = torch.stack([torch.arange(9) + 7 * b for b in range(4)])  # (b, s)
wrong = apply_rope(x_sq, ids_sq)  # head h gets the positions of sequence h
right = apply_rope(x_sq, ids_sq[:, None, :])
assert not torch.allclose(wrong, right)
assert_close(wrong[:, 1], apply_rope(x_sq[:, 1], ids_sq[1]))

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the libraries, rebuilt with posenc.**
#
# | | pairing | cosines and sines | angles formed in | partial rotation |
# |---|---|---|---|---|
# | Meta Llama (`llama/model.py`) | interleaved, as complex numbers | `freqs_cis` for `2 * max_seq_len` positions, built with the model | float32 (complex64); the rotation in float32, cast back | no |
# | Hugging Face (`modeling_llama.py`) | half (`rotate_half`) | recomputed from `inv_freq` in every forward pass, for the given `position_ids` | float32; cast to the input's dtype before the rotation | `partial_rotary_factor` in other models (GPT-NeoX, Phi) |
# | GPT-NeoX | half (`rotate_half`) | cached in the module as `cos_cached`, `sin_cached` | float32, the cache cast to the training dtype (`params_dtype`) | `rotary_pct` |
# | GPT-J (Hugging Face) | interleaved (`rotate_every_two`) | one table for all `max_position_embeddings` | float32 | `rotary_dim` |
# | torchtune | interleaved | `cache` of shape `[max_seq_len, dim // 2, 2]`, a non-persistent buffer | float32; the rotation in float32, cast back | no |
# | `posenc` | `layout="half"` or `"interleaved"` | `apply_rope`: computed per call; `RotaryEmbedding`: a table that grows on demand | float32, float64 for float64 input; the rotation likewise, cast back | `rotary_dim` |
#
# The chapter [*RoPE as a memory-bound kernel*](12-efficient-rope.ipynb) counts the
# bytes these forms move and times them on a CPU. The cells below rebuild Meta's: `apply_rotary_emb` views each
# pair as one complex number and multiplies it by $e^{\mathrm{i}m\theta_j}$ from
# `torch.polar`, the derivation above, literally. Its tensors are laid out
# `(batch, seq, heads, head_dim)`, so the positions have shape `(seq, 1)` to broadcast
# over the heads. Hugging Face's Llama unsqueezes its cosines at dimension 1, which
# is why `posenc` takes its positions as `position_ids[:, None, :]`; where
# transformers is installed, the cell runs its own `LlamaRotaryEmbedding` and
# `apply_rotary_pos_emb`. Both form the angles in float32, but for bfloat16 input the
# results round differently: Hugging Face rotates in bfloat16, `posenc` in float32.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：各ライブラリを posenc で再現する**
#
# | | ペアの組み方 | cos と sin | 角度の計算精度 | 部分回転 |
# |---|---|---|---|---|
# | Meta Llama（`llama/model.py`） | インターリーブ配置（複素数として） | `freqs_cis` を `2 * max_seq_len` 位置ぶん、モデルの構築時に作成 | float32（complex64）。回転も float32 で行い、元の型へ変換 | なし |
# | Hugging Face（`modeling_llama.py`） | 半分割配置（`rotate_half`） | フォワードパスのたびに `inv_freq` から、与えられた `position_ids` について再計算 | float32。回転の前に入力の型へ変換 | ほかのモデル（GPT-NeoX、Phi）では `partial_rotary_factor` |
# | GPT-NeoX | 半分割配置（`rotate_half`） | モジュールの `cos_cached` と `sin_cached` にキャッシュ | float32 で計算し、キャッシュを学習時の型（`params_dtype`）へ変換 | `rotary_pct` |
# | GPT-J（Hugging Face） | インターリーブ配置（`rotate_every_two`） | `max_position_embeddings` 位置ぶんの表を 1 つ | float32 | `rotary_dim` |
# | torchtune | インターリーブ配置 | 形状 `[max_seq_len, dim // 2, 2]` の `cache`（永続化しないバッファ） | float32。回転も float32 で行い、元の型へ変換 | なし |
# | `posenc` | `layout="half"` または `"interleaved"` | `apply_rope` は呼び出しごとに計算、`RotaryEmbedding` は必要に応じて伸びる表 | float32（float64 の入力なら float64）。回転も同じ精度で行い、元の型へ変換 | `rotary_dim` |
#
# [「メモリ律速のカーネルとしての RoPE」](12-efficient-rope.ipynb)の章では、これらの実装が動かすバイト数を数え、CPU で時間を計ります。
# 以下のセルでは Meta の実装を再現します。
# Meta の `apply_rotary_emb` は、上の導出のとおり各ペアを 1 つの複素数とみなし、`torch.polar` で作った $e^{\mathrm{i}m\theta_j}$ を掛けます。
# テンソルの軸の並びは `(batch, seq, heads, head_dim)` なので、位置の形状は、ヘッドの軸に沿ってブロードキャストされるよう `(seq, 1)` とします。
# Hugging Face の Llama は cos に `unsqueeze` で軸 1 を挿入します。`posenc` が位置を `position_ids[:, None, :]` で受け取るのはそのためです。
# transformers がある環境では、セルは Hugging Face 自身の `LlamaRotaryEmbedding` と `apply_rotary_pos_emb` も実行します。
# どちらも角度は float32 で作りますが、bfloat16 の入力では丸め方が違います。Hugging Face は bfloat16 で回転し、`posenc` は float32 で回転するからです。


# %% tags=["deeper", "check"] summary={"en": "Meta's apply_rotary_emb, restated, equals apply_rope with interleaved pairs and positions of shape (seq, 1); posenc's frequencies are Hugging Face's expression bit for bit; where transformers is installed, its own LlamaRotaryEmbedding and apply_rotary_pos_emb equal apply_rope with position_ids[:, None, :]", "ja": "書き直した Meta の apply_rotary_emb は、インターリーブ配置と形状 (seq, 1) の位置の apply_rope に等しく、posenc の周波数は Hugging Face の式とビット単位で一致します。transformers がある環境では、Hugging Face 自身の LlamaRotaryEmbedding と apply_rotary_pos_emb が position_ids[:, None, :] の apply_rope に等しくなります"}
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


exponent = torch.arange(0, 32, 2, dtype=torch.int64).float() / 32
assert torch.equal(rope_frequencies(32), 1.0 / 10000.0**exponent)  # as HF's
x = torch.randn(3, 4, 9, 32)  # (b, n_h, s, h_d)

try:  # Hugging Face's own Llama rotation, where transformers is installed
    with warnings.catch_warnings():  # its import warns about tqdm
        warnings.simplefilter("ignore")
        from transformers import LlamaConfig
        from transformers.models.llama import modeling_llama
except ImportError:  # the downloaded notebook needs only posenc
    modeling_llama = None
if modeling_llama is not None:
    config = LlamaConfig(
        hidden_size=128, num_attention_heads=4, head_dim=32
    )  # rope_theta 10000, no scaling
    rotary = modeling_llama.LlamaRotaryEmbedding(config)
    assert torch.equal(rotary.inv_freq, rope_frequencies(32))  # bitwise
    cos, sin = rotary(x, position_ids)  # position_ids: (b, s)
    hf, _ = modeling_llama.apply_rotary_pos_emb(x, x, cos, sin)
    assert_close(hf, apply_rope(x, position_ids[:, None, :]))
    cos, sin = rotary(x_sq, ids_sq)
    hf_sq, _ = modeling_llama.apply_rotary_pos_emb(x_sq, x_sq, cos, sin)
    assert_close(right, hf_sq)
    assert not torch.allclose(wrong, hf_sq)


# %% [markdown] lang="en"
# ## What to remember
#
# - RoPE turns pair $i$ of a query at $m$ and a key at $n$ by $m\theta_i$ and
#   $n\theta_i$; the score $q^\top R_{n-m}\, k$ depends only on $m - n$.
# - Rotations are forced once $f(q, m)\,\overline{f(k, n)}$ may depend only on $m - n$;
#   the score alone also admits a reflection, which sees only the distance's parity.
# - No library builds $R_m$: two elementwise products with tables of cosines and sines,
#   in the interleaved or the half pairing (`rotate_half`), a fixed permutation apart.
# - Norms are kept, a common shift changes nothing, and a KV cache stores each key
#   rotated once; values are never rotated.
# - The long-term decay is an upper bound: random scores do not decay.
# - Form the angles in float32: bfloat16 gives positions 1000 and 1001 one rotation.

# %% [markdown] lang="ja"
# ## まとめ
#
# - RoPE は、位置 $m$ のクエリと位置 $n$ のキーのペア $i$ を、$m\theta_i$ と $n\theta_i$ だけ回転させます。
#   スコア $q^\top R_{n-m}\, k$ は $m - n$ だけで決まります。
# - $f(q, m)\,\overline{f(k, n)}$ が $m - n$ だけで決まることを求めると、回転しか残りません。
#   スコアだけの条件なら鏡映も満たしますが、鏡映が見るのは距離の偶奇だけです。
# - $R_m$ を作るライブラリはありません。cos と sin の表との成分ごとの積 2 つで計算します。
#   ペアの組み方はインターリーブ配置か半分割配置（`rotate_half`）で、両者は、次元の決まった並べ替えを除けば同じです。
# - ノルムは保たれ、すべての位置を同じだけずらしてもアテンションは変わりません。回転させるのはクエリとキーだけで、KV キャッシュには各キーを 1 回だけ回転させて保存します。
# - 長距離減衰は上界の話です。ランダムなスコアは減衰しません。
# - 角度は float32 で作ります。bfloat16 では位置 1000 と 1001 が同じ回転を受けます。

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
#    `n_heads=num_key_value_heads`. In the grouped-query example of [the Llama fold](#deeper-the-permutation-between-the-layouts-and-converted-llama-checkpoints),
#    permute $W_K$ with the number of query heads instead: which scores change?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. クエリを $R_m$ で、キーを $R_n^\top$ で回転させてみてください（ありがちな間違いです）。
#    このときスコアが $m + n$ に依存することを、手計算と `apply_rope`（キーの位置は $-n$）で示し、
#    距離は同じでもスコアの異なる 2 つの位置の組を見つけてください。
# 2. $d = 8$ の `half` の回転の行列を、`apply_rope` を使わずに手で作り、$\Pi^\top R_m\, \Pi$ に等しいことを確かめてください。
#    置換によって $R_m$ のどの成分が移動するでしょうか。
# 3. Llama 3 は `base = 500000` を使います。$d = 128$ の相対的な上界（論文の図 2 の量）を、両方の底で距離 4000 まで描き直してください。
#    底を大きくすると、上界と最後のペアの波長はどうなるでしょうか。
# 4. `convert_llama_weights_to_hf.py` では、キーは `n_heads=num_key_value_heads` で並べ替えられます。
#    Llama についての[「さらに詳しく」](#deeper-配置の間の並べ替えとllama-の変換済みチェックポイント)にあるグループ化クエリアテンションの例で、$W_K$ をクエリのヘッド数で並べ替えると、
#    どのスコアが変わるでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With $R_n^\top = R_{-n}$ and $R_m^\top = R_{-m}$, the slip gives
# $$\langle R_m q, R_n^\top k\rangle = q^\top R_m^\top R_n^\top\, k = q^\top R_{-m} R_{-n}\, k = q^\top R_{-(m+n)}\, k$$
# so the score depends on $m + n$, not on $m - n$. In `apply_rope` the key gets the
# position $-n$. The pairs $(m, n) = (5, 0)$ and $(105, 100)$ are both at distance 5
# but get different scores, while $(7, 3)$ and $(4, 6)$, at different distances but with
# the same sum, get the same score.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $R_n^\top = R_{-n}$、$R_m^\top = R_{-m}$ なので、この間違いでは次のようになります。
# $$\langle R_m q, R_n^\top k\rangle = q^\top R_m^\top R_n^\top\, k = q^\top R_{-m} R_{-n}\, k = q^\top R_{-(m+n)}\, k$$
# スコアは $m - n$ ではなく $m + n$ に依存します。`apply_rope` ではキーに位置 $-n$ を与えます。
# 組 $(m, n) = (5, 0)$ と $(105, 100)$ はどちらも距離 5 ですが、スコアは異なります。
# 一方、距離は違っても和が同じ $(7, 3)$ と $(4, 6)$ は、同じスコアになります。

# %% tags=["solution"]
q, k = torch.randn(2, 16, dtype=f64)
thetas_16 = rope_frequencies(16).double()


def rope_matrix(m):  # R_m for d = 16, block-diagonal, pairs (2i, 2i+1)
    return torch.block_diag(*(rot(m * t) for t in thetas_16.tolist()))


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
# of the slower pairs stay close to each other for longer, their partial sums $S_t$ stay
# large, and the bound falls more slowly. With `base = 500000` the bound is above the
# one for 10000 at 90% of the distances from 1 to 4000 (not at all of them: both curves
# ripple), and from 1000 to 4000 it averages 7.8 against 5.0. The wavelength of the last
# pair, $2\pi \cdot b^{126/128}$, grows from 54410 positions to about 2.56 million. The
# chapter [*Extending RoPE's context*](09-rope-context.ipynb) comes back to the slow
# pairs.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 底を大きくすると、$\theta_0 = 1$ 以外のすべての周波数が下がります。
# そのため遅いペアの位相が長い距離にわたってそろったままになり、部分和 $S_t$ が大きいままで、上界はゆっくりとしか下がりません。
# `base = 500000` の上界は、距離 1 から 4000 のうち 90% で底 10000 の上界を上回ります（両方の曲線が波打つので、すべての距離ではありません）。
# 距離 1000 から 4000 での平均は、10000 の 5.0 に対して 7.8 です。
# 最後のペアの波長 $2\pi \cdot b^{126/128}$ は、位置にして 54410 から約 256 万に伸びます。
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
    xlabel="$m-n$", ylabel=r"$\frac{1}{d/2}\sum_{t} |S_t|$", title="$d = 128$"
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
# ## Sources and versions
#
# RoFormer (§3.2–3.4, eq. 34, Figure 2) is read in its arXiv version. Meta's code is
# restated; Hugging Face's was read in transformers 4.46 and 5.24, and its rotation is
# called where transformers is installed (5.24.0 here); GPT-NeoX's was read at commit
# ea7aefd8 and on both sides of commit 3bfedf47, "Pre-compute RoPE embeddings in
# fp32" (2023-09-25).
#
# ### References
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Biderman, S. et al. (2021). *Rotary Embeddings: A Relative Revolution*.
#   EleutherAI blog. <https://blog.eleuther.ai/rotary-embeddings/>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary Positional
#   Encodings useful?* ICLR 2025. <https://arxiv.org/abs/2410.06205>
# - Code: Meta's `llama/model.py` (<https://github.com/meta-llama/llama>); Hugging
#   Face's `modeling_llama.py` and `convert_llama_weights_to_hf.py`
#   (<https://github.com/huggingface/transformers>); GPT-NeoX's
#   `megatron/model/positional_embeddings.py` (<https://github.com/EleutherAI/gpt-neox>);
#   torchtune's `position_embeddings.py` (<https://github.com/pytorch/torchtune>).

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# RoFormer（§3.2–3.4、式 34、図 2）は arXiv 版によります。Meta のコードは書き直したものです。
# Hugging Face のコードは transformers 4.46 と 5.24 で読み、transformers がある環境（ここでは 5.24.0）では回転の関数そのものを呼び出します。
# GPT-NeoX のコードは、コミット ea7aefd8 と、3bfedf47（「Pre-compute RoPE embeddings in fp32」、2023-09-25）の前後で読んでいます。
#
# ### 参考文献
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Biderman, S. et al. (2021). *Rotary Embeddings: A Relative Revolution*.
#   EleutherAI blog. <https://blog.eleuther.ai/rotary-embeddings/>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary Positional
#   Encodings useful?* ICLR 2025. <https://arxiv.org/abs/2410.06205>
# - コード：Meta の `llama/model.py`（<https://github.com/meta-llama/llama>）、
#   Hugging Face の `modeling_llama.py` と `convert_llama_weights_to_hf.py`（<https://github.com/huggingface/transformers>）、
#   GPT-NeoX の `megatron/model/positional_embeddings.py`（<https://github.com/EleutherAI/gpt-neox>）、
#   torchtune の `position_embeddings.py`（<https://github.com/pytorch/torchtune>）。
