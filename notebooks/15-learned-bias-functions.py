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
# # Learned distance functions and contextual positions
#
# ALiBi fixes its distance penalty by hand: what could a model learn instead, and must a distance count tokens?
# KERPLE learns two numbers of a curve, FIRE the whole curve, CoPE what the distance counts, and [randomised positions](../docs/glossary.md#randomised-positions) change the positions training shows.
# By the end you can build each with `posenc` and say what it can express and what it costs; read FIRE after KERPLE; CoPE and randomised positions stand alone.

# %% [markdown] lang="ja"
# # 学習可能な距離関数と文脈に応じた位置
#
# ALiBi は距離のペナルティを手で決めます。代わりにモデルは何を学習できるでしょうか。距離は必ずトークンの数で測らなければならないのでしょうか。
# KERPLE は曲線のパラメータを 2 つ、FIRE は曲線そのもの、CoPE は距離として数えるものを学習し、[ランダム化した位置](../docs/glossary.ja.md#randomised-positions)は学習で見せる位置を変えます。
# 読み終えるころには、それぞれを `posenc` で作り、何を表現できて、どんなコストがかかるかを説明できるようになります。FIRE の節は KERPLE の節の後に読んでください。CoPE とランダム化した位置の節は、それだけで読めます。

# %% tags=["setup"]
import math
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention

from posenc import CoPE, FireBias, KerpleBias, random_positions
from posenc_lab.plotting import INK, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
torch.set_num_threads(1)  # small tensors: one thread is quickest here

# %% [markdown] lang="en"
# ## From a table and a line to a function
#
# As on the [notation page](../docs/notation.md#positions), $i$ is the query's
# position, $j$ the key's, and $i - j \ge 0$ the causal distance. T5 adds
# $\beta_{b(j-i),\,h}$, a learned table of 32 [buckets](../docs/glossary.md#bucket)
# per head; causally, every distance from 113 on shares the last. ALiBi adds
# $-m_h\,(i - j)$, a line fixed before training.

# %% [markdown] lang="ja"
# ## 表と直線から関数へ
#
# [記法のページ](../docs/notation.ja.md#positions)と同じく、$i$ はクエリの位置、$j$ はキーの位置、$i - j \ge 0$ は因果的な距離です。
# T5 が足す $\beta_{b(j-i),\,h}$ は、ヘッドごとに 32 個の[バケット](../docs/glossary.ja.md#bucket)を持つ学習可能な表です。因果的な設定では、距離 113 以上がすべて最後のバケットを共有します。
# ALiBi が足す $-m_h\,(i - j)$ は、学習前に決めた直線です。

# %% tags=["check"] summary={"en": "one causal T5 head is constant from distance 113 on, not before; ALiBi's head 3 of 8 falls by 1/8 per step", "ja": "因果的な T5 のヘッドは距離 113 から一定になり、その手前では一定ではありません。8 ヘッドの ALiBi の 3 番目のヘッドは距離が 1 増えるごとに 1/8 下がります"}
from torch.testing import assert_close

from posenc import T5RelativeBias, alibi_bias, alibi_slopes

f64 = torch.float64
t5 = T5RelativeBias(1, bidirectional=False)
with torch.no_grad():
    row = t5(1, 400)[0, 0].flip(0)  # the last query's row, by distance 0..399
assert (row[113:] == row[113]).all() and row[112] != row[113]

# Press et al.: for 8 heads the slopes are 1/2, 1/4, ..., 1/256
paper = [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
assert alibi_slopes(8).tolist() == paper
slope = paper[2]  # head 3 of 8: m = 1/8
line = alibi_bias(8, 1, 400)[2, 0].flip(0).double()  # by distance
assert_close(line[1:] - line[:-1], torch.full((399,), -slope, dtype=f64))
print(f"T5: last bucket from distance 113; ALiBi head 3: slope {slope:.4f}")

# %% [markdown] lang="en"
# ## KERPLE: two learned numbers per head
#
# ALiBi's line falls by the same amount per token, at a slope fixed before training;
# a head that needs far tokens would rather have one that flattens. KERPLE (Chi et
# al. 2022) lets each head learn its curve, with two numbers:
# $$b^{\mathrm{pow}}_h(i, j) = -r_1 \lvert i - j \rvert^{r_2}, \qquad r_1 > 0,\ 0 < r_2 \le 2$$
# $$b^{\mathrm{log}}_h(i, j) = -r_1 \log(1 + r_2 \lvert i - j \rvert), \qquad r_1, r_2 > 0$$
# Why these two? The paper wants score plus bias to remain a similarity, an inner
# product of some features, as $q_i \cdot k_j$ is. Curves that behave like minus a
# squared distance, called
# [*conditionally positive definite*](../docs/glossary.md#conditionally-positive-definite-kernel)
# (CPD), keep that property up to a constant (one per input length), and a constant
# leaves the softmax unchanged. Why not positive definite? A PD bias of $i - j$ alone
# never exceeds its value at distance 0 in size, so it cannot penalise far keys
# without limit; a CPD one can. A power above 2 is not CPD (exercise 1), hence
# $r_2 \le 2$.

# %% [markdown] lang="ja"
# ## KERPLE：ヘッドごとに 2 つの学習可能なパラメータ
#
# ALiBi の直線は、学習前に決めた傾きで、トークン 1 つごとに同じだけ下がります。遠くのトークンを使いたいヘッドには、遠くで平らになるペナルティが向いています。
# KERPLE（Chi ら 2022）では、各ヘッドが 2 つのパラメータで自分の曲線を学習します。
# $$b^{\mathrm{pow}}_h(i, j) = -r_1 \lvert i - j \rvert^{r_2}, \qquad r_1 > 0,\ 0 < r_2 \le 2$$
# $$b^{\mathrm{log}}_h(i, j) = -r_1 \log(1 + r_2 \lvert i - j \rvert), \qquad r_1, r_2 > 0$$
# なぜこの 2 つなのでしょうか。論文は、バイアスを足したスコアも $q_i \cdot k_j$ と同じく類似度（ある特徴ベクトルの内積）であることを求めます。
# 負の 2 乗距離のようにふるまう曲線は[条件付き正定値](../docs/glossary.ja.md#conditionally-positive-definite-kernel)（CPD）と呼ばれます。条件付き正定値の曲線なら、入力の長さごとに決まる定数を 1 つ足すだけで、この性質を保てます。定数は softmax を変えません。
# では、なぜ正定値ではないのでしょうか。$i - j$ だけで決まる正定値のバイアスは、大きさが距離 0 での値を超えないので、遠いキーにいくらでも大きなペナルティを課すことはできません。条件付き正定値のバイアスならそれができます。
# 2 より大きいべき乗は条件付き正定値ではないので（演習 1）、$r_2 \le 2$ です。

# %%
torch.manual_seed(0)
kerple = KerpleBias(2, kind="log")  # r1, r2 drawn at random, then learned
print(kerple(1, 5)[0, 0].detach())  # head 1, query 4: -r1 log(1 + r2 (4 - j))


# %% tags=["check"] summary={"en": "−|i − j|^p for p ≤ 2 and the log kernel are CPD on 32 positions, p = 2.5, 3 and −log(1 + |i − j|³) are not; the printed row is the formula", "ja": "32 個の位置で、p ≤ 2 の −|i − j|^p と対数の形のカーネルは条件付き正定値で、p = 2.5、3 と −log(1 + |i − j|³) は条件付き正定値ではありません。出力した行は式のとおりです"}
def distances(n, dtype=f64):
    """The matrix |i - j| of n positions."""
    p = torch.arange(n)
    return (p[:, None] - p[None, :]).abs().to(dtype)


def cpd_min_eig(K):
    """Smallest eigenvalue of K on the vectors whose entries sum to 0."""
    n = K.shape[0]
    centred = torch.eye(n, dtype=f64) - 1.0 / n  # projects onto sum(c) = 0
    basis, _ = torch.linalg.qr(centred[:, :-1])  # orthonormal, n - 1 columns
    return torch.linalg.eigvalsh(basis.T @ K @ basis).min().item()


D32 = distances(32)
for p in (0.5, 1.0, 1.5, 2.0):
    assert cpd_min_eig(-(D32**p)) > -1e-9  # CPD: -|i - j|^p, 0 < p <= 2
for p in (2.5, 3.0):
    assert cpd_min_eig(-(D32**p)) < -1.0  # not CPD beyond 2
for r2 in (0.01, 0.1, 1.0, 10.0):
    assert cpd_min_eig(-torch.log1p(r2 * D32)) > 0  # the log variant
assert cpd_min_eig(-torch.log1p(D32**3)) < 0  # log of a non-CPD power
assert abs(cpd_min_eig(-(D32**2))) < 1e-9  # p = 2: zero (rank one, fact 4)
with torch.no_grad():
    r1, r2 = kerple.r1[0].item(), kerple.r2[0].item()
    assert_close(kerple(5)[0].double(), -r1 * torch.log1p(r2 * distances(5)))
    assert torch.equal(kerple(1, 5)[0, 0], kerple(5)[0, -1])  # the printed row

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what CPD means, and why a constant is enough.** A symmetric
# function $k(x, x')$ is a [*positive definite*](../docs/glossary.md#positive-definite-kernel)
# (PD) kernel if every matrix $[k(x_a, x_b)]_{a,b}$ it forms on finitely many points
# is positive semidefinite: $\sum_{a,b} c_a c_b\, k(x_a, x_b) \ge 0$ for all real
# $c$. It is CPD if this holds for the $c$ with $\sum_a c_a = 0$. Inner products are
# PD kernels, and CPD kernels generalise negative squared distances: by the paper's
# Fact 1, a CPD kernel with $k \le 0$ and $k(x, x) = 0$ is minus a squared
# distance in some Hilbert space. Facts 2 to 4 of §3.2, numbered as in the paper,
# give the two biases:
#
# - **Fact 2.** Positive multiples and sums of CPD kernels are CPD.
# - **Fact 3.** If $\tilde k \le 0$ is CPD, so are $-(-\tilde k)^{\alpha}$ for
#   $0 < \alpha < 1$ and $-\log(1 - \tilde k)$ (Berg, Christensen and Ressel
#   1984; Schölkopf 2000, Prop. 4).
# - **Fact 4.** $-\lvert x - x' \rvert^2$ is CPD. For $\sum_a c_a = 0$,
#   $$\sum_{a,b} c_a c_b \left(-(x_a - x_b)^2\right) = -\sum_{a,b} c_a c_b \left(x_a^2 + x_b^2 - 2 x_a x_b\right) = 2\Big(\sum_a c_a x_a\Big)^2 \ge 0$$
#   because the terms with $x_a^2$ and $x_b^2$ carry a factor $\sum c = 0$.
#
# Fact 3 with $\alpha = p/2$ applied to fact 4 gives $-\lvert x - x'\rvert^{p}$ for
# $0 < p < 2$, and fact 4 itself covers $p = 2$. Fact 3 applied to
# $-r_2 \lvert x - x' \rvert$ (the case $p = 1$, times $r_2 > 0$) gives
# $-\log(1 + r_2 \lvert x - x' \rvert)$. Scaling by $r_1 > 0$ (fact 2) gives the
# two biases above.
# Fact 3 does not cover the logarithm of a power above 2: for example,
# $-\log(1 + \lvert i - j \rvert^3)$ is not CPD.
#
# Why CPD and not PD? The paper wants the biased score to remain a PD kernel: it
# applies the kernel to the query and key vectors, where the dot product
# $q_i \cdot k_j$ is always a PD kernel. By its
# Lemma 1, $c + \tilde k$ is PD for some constant $c \ge 0$; it is never computed,
# since adding a constant to a row's scores leaves its softmax unchanged (Eq. 2).
#
# No constant serves every length: the proof of Lemma 1 (the
# paper's Appendix A.1) works with the matrix of a finite set of points, so the
# constant depends on the set. For the line $-\lvert i - j \rvert$ on the positions
# $0, \dots, T - 1$ it cannot be less than $(T - 1)/2$: a positive semidefinite
# matrix has nonnegative $2 \times 2$ principal minors, and the minor of two
# positions at distance $d$ is $c^2 - (c - d)^2 = d(2c - d)$. So no constant can serve positions without bound,
# and we read the paper's Proposition 1 (Appendix A.2), which takes the points of
# the line, as holding on finite sets, as Lemma 1 does.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：条件付き正定値の意味と、定数で足りる理由**
#
# 対称な関数 $k(x, x')$ は、有限個の点で作るどの行列 $[k(x_a, x_b)]_{a,b}$ も半正定値、つまりすべての実ベクトル $c$ で $\sum_{a,b} c_a c_b\, k(x_a, x_b) \ge 0$ なら[正定値カーネル](../docs/glossary.ja.md#positive-definite-kernel)です。
# $\sum_a c_a = 0$ を満たすすべての $c$ について成り立てば、[条件付き正定値](../docs/glossary.ja.md#conditionally-positive-definite-kernel)カーネルです。
# 内積は正定値カーネルで、条件付き正定値カーネルは負の 2 乗距離を一般化したものです。論文の事実 1 によれば、$k \le 0$ かつ $k(x, x) = 0$ となる条件付き正定値カーネルは、あるヒルベルト空間での負の 2 乗距離として書けます。
# §3.2 の事実 2〜4（番号は論文のとおり）から、2 つのバイアスが導けます。
#
# - **事実 2.** 条件付き正定値カーネルの正の定数倍と和は、条件付き正定値です。
# - **事実 3.** $\tilde k \le 0$ が条件付き正定値なら、$0 < \alpha < 1$ での $-(-\tilde k)^{\alpha}$ と $-\log(1 - \tilde k)$ も条件付き正定値です（Berg ら 1984 と、Schölkopf 2000 の命題 4）。
# - **事実 4.** $-\lvert x - x' \rvert^2$ は条件付き正定値です。$\sum_a c_a = 0$ なら次が成り立ちます。
#   $$\sum_{a,b} c_a c_b \left(-(x_a - x_b)^2\right) = -\sum_{a,b} c_a c_b \left(x_a^2 + x_b^2 - 2 x_a x_b\right) = 2\Big(\sum_a c_a x_a\Big)^2 \ge 0$$
#   $x_a^2$ と $x_b^2$ の項には因子 $\sum c = 0$ が掛かるからです。
#
# 事実 4 に $\alpha = p/2$ として事実 3 を使うと $0 < p < 2$ での $-\lvert x - x'\rvert^{p}$ が得られ、$p = 2$ は事実 4 そのものです。
# 事実 3 を $-r_2 \lvert x - x' \rvert$（$p = 1$ の場合の $r_2 > 0$ 倍）に使うと $-\log(1 + r_2 \lvert x - x' \rvert)$ が得られます。
# $r_1 > 0$ 倍すると（事実 2）、上の 2 つのバイアスになります。
# 事実 3 は 2 を超えるべき乗の対数を扱いません。たとえば $-\log(1 + \lvert i - j \rvert^3)$ は条件付き正定値ではありません。
#
# なぜ正定値ではなく条件付き正定値なのでしょうか。論文はカーネルをクエリとキーのベクトルの関数として扱います。そこでは内積 $q_i \cdot k_j$ がいつでも正定値カーネルなので、バイアスを足したスコアも正定値カーネルのままであることを求めます。
# 論文の補題 1 によれば、ある定数 $c \ge 0$ で $c + \tilde k$ は正定値カーネルになります。この定数が実際に計算されることはありません。行のすべてのスコアに同じ定数を足しても、softmax は変わらないからです（式 2）。
#
# ただし、どの長さにも使える定数はありません。補題 1 の証明（論文の付録 A.1）は有限個の点の行列を扱うので、定数は点の集合によって変わります。
# 位置 $0, \dots, T - 1$ での直線 $-\lvert i - j \rvert$ では、定数は $(T - 1)/2$ 以上でなければなりません。
# 半正定値行列の $2 \times 2$ の主小行列式は負にならず、距離 $d$ だけ離れた 2 つの位置の主小行列式は $c^2 - (c - d)^2 = d(2c - d)$ だからです。
# したがって、いくらでも大きな位置を含む集合に使える定数はありません。
# 論文の付録 A.2 の命題 1 は直線上のすべての点を扱いますが、この章では、補題 1 と同じく有限の集合の上で成り立つ主張と解釈します。


# %% tags=["deeper", "check"] summary={"en": "the least c that makes c + K positive semidefinite is (T − 1)/2 to 1e-6 for the line at T = 4, 16, 64; for the log kernel it is at least log(T)/2 and grows with T", "ja": "c + K を半正定値にする最小の c は、T = 4、16、64 の直線では (T − 1)/2 に 1e-6 以内で一致します。対数の形のカーネルでは log(T)/2 以上で、T とともに大きくなります"}
def smallest_shift(K):
    """The least c >= 0 with K + c * ones positive semidefinite (bisection)."""
    ones = torch.ones_like(K)

    def psd(c):
        return torch.linalg.eigvalsh(K + c * ones).min() >= -1e-9 * (1 + c)

    lo, hi = 0.0, 1.0
    while not psd(hi):
        hi *= 2
    for _ in range(50):
        lo, hi = (
            (lo, (lo + hi) / 2) if psd((lo + hi) / 2) else ((lo + hi) / 2, hi)
        )
    return hi


shifts_log = []
for T in (4, 16, 64):
    c_line = smallest_shift(-distances(T))
    assert abs(c_line - (T - 1) / 2) < 1e-6  # the 2 x 2 bound, to 1e-6
    shifts_log.append(smallest_shift(-torch.log1p(distances(T))))
    assert shifts_log[-1] >= math.log(T) / 2  # the 2 x 2 bound for the log
assert shifts_log[0] < shifts_log[1] < shifts_log[2]
print(
    "log kernel, T = 4, 16, 64: c = "
    + ", ".join(f"{c:.3f}" for c in shifts_log)
)

# %% [markdown] lang="en"
# The figure compares the shapes, with parameters picked for the picture (T5's table
# is made up). With $r_2 = 1$ the power is a line, $-r_1 \lvert i - j \rvert$: ALiBi's
# bias in its symmetric form, for six of its eight slopes (the note below says why).
# With $r_2 < 1$ it bends flat, with $r_2 > 1$ the other way. The logarithm's slope
# at distance $d$ is $-r_1 r_2 / (1 + r_2 d)$: far keys are told apart less and
# less, but never merged as in T5's last bucket.

# %% [markdown] lang="ja"
# 次の図で曲線の形を比べます（パラメータは説明用に選んだもので、T5 の表は仮の値です）。
# $r_2 = 1$ のべき乗の形は直線 $-r_1 \lvert i - j \rvert$ になり、ALiBi のバイアスを対称にしたものと一致します。ただし、一致させられるのは ALiBi の 8 つの傾きのうち 6 つだけです（理由は下の「さらに詳しく」で説明します）。
# $r_2 < 1$ では平らになる向きへ、$r_2 > 1$ では逆向きへ曲がります。
# 対数の形は次第に平らになり、距離 $d$ での傾きは $-r_1 r_2 / (1 + r_2 d)$ です。遠いキーどうしの差は小さくなっていきますが、T5 の最後のバケットのように同じ値にはなりません。


# %% tags=["check"] summary={"en": "with r₂ = 1 the power variant is ALiBi's bias for the first six slopes; r₁ stays at least 0.01, above slopes 7 and 8, and r₂ at most 2; the slope of −r₁ log(1 + r₂d) is −r₁r₂/(1 + r₂d) (autograd)", "ja": "r₂ = 1 のべき乗の形は、最初の 6 つの傾きで ALiBi のバイアスと一致します。r₁ は 0.01 以上で 7、8 番目の傾きより大きく、r₂ は 2 以下です。−r₁ log(1 + r₂d) の傾きは −r₁r₂/(1 + r₂d) です（自動微分）"}
def set_kerple(module, r1, r2):
    """Give a KerpleBias the values r1, r2 (inverting its parameterisation)."""
    r1, r2 = torch.as_tensor(r1, dtype=f64), torch.as_tensor(r2, dtype=f64)
    with torch.no_grad():
        module.r1_raw.copy_(torch.log(torch.expm1(r1 - 0.01)))
        if module.kind == "log":
            module.r2_raw.copy_(torch.log(torch.expm1(r2 - 0.01)))
        else:  # r2 = 2 - 1.99 sigmoid(-raw)
            module.r2_raw.copy_(-torch.logit((2 - r2) / 1.99))


slopes = alibi_slopes(8, dtype=f64)
power = KerpleBias(6, kind="power")
set_kerple(power, slopes[:6], [1.0] * 6)
with torch.no_grad():
    assert_close(power(5, 11), alibi_bias(8, 5, 11, causal=False)[:6])

with torch.no_grad():
    power.r1_raw.fill_(-1e4)
    power.r2_raw.fill_(1e4)
    floor = power.r1.min().item()
assert floor == torch.tensor(0.01).item() > slopes[6] > slopes[7]
assert power.r2.max().item() <= 2.0
d = torch.arange(513, dtype=f64, requires_grad=True)
r1, r2 = 2.0, 0.5
log_kernel = -r1 * torch.log1p(r2 * d)
(grad,) = torch.autograd.grad(log_kernel.sum(), d)
assert_close(grad, -r1 * r2 / (1 + r2 * d.detach()))  # the slope
d, log_kernel = d.detach(), log_kernel.detach()
print(f"floor {floor:.4f}; ALiBi heads 7, 8: {slopes[6]:.4f}, {slopes[7]:.4f}")

# %% tags=["figure"] alt={"en": ["Bias against the distance d = i − j from 0 to 512 for kernels with hand-picked parameters: ALiBi's straight line, falling to −32 at 512; T5's steps, flat from distance 113 on; KERPLE's logarithm, steep near 0 and then almost flat; KERPLE's power 0.5, bending the same way; KERPLE's power 1.5, bending downwards to about −58."], "ja": ["距離 d = i − j（0〜512）に対する各手法のバイアス（パラメータは手で選んだもの）を描いた図です。ALiBi の直線は 512 で −32 まで下がり、T5 の階段は距離 113 から平らになります。KERPLE の対数の形は 0 の近くで急で、その後ほぼ平らになります。KERPLE の 0.5 乗も同じ向きに曲がり、1.5 乗は下向きに曲がって約 −58 に達します。"]}
import matplotlib.pyplot as plt

t5 = T5RelativeBias(1, bidirectional=False)
with torch.no_grad():
    t5.relative_attention_bias.weight.copy_(-0.3 * torch.arange(32.0)[:, None])
    t5_row = t5(1, 513)[0, 0].flip(0)
curves = {
    r"ALiBi, $-d/16$": -d / 16,
    "T5": t5_row,
    r"KERPLE, $-2\log(1 + 0.5\,d)$": log_kernel,
    r"KERPLE, $-0.5\,d^{0.5}$": -0.5 * d**0.5,
    r"KERPLE, $-0.005\,d^{1.5}$": -0.005 * d**1.5,
}
fig, ax = plt.subplots(figsize=(6.4, 2.6))
for label, values in curves.items():
    ax.plot(d, values, label=label, lw=1.4)
ax.set(xlabel="$d = i - j$", ylabel="$b_h(i, j)$", xlim=(0, 512))
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %% [markdown] lang="en"
# In short: KERPLE keeps ALiBi's form, a bias of the head and $i - j$ alone, and lets
# each head learn how fast its penalty flattens, for a logarithm or a power per score
# (its cost in a fused kernel is below).

# %% [markdown] lang="ja"
# 要するに、KERPLE は ALiBi と同じくヘッドと $i - j$ だけで決まるバイアスで、ペナルティが平らになる速さを各ヘッドが学習します。スコアごとに対数かべき乗を 1 回計算します（融合カーネルでのコストは後で見ます）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: KERPLE in code, and its results.** Not every ALiBi head is
# reachable: the official code keeps both parameters at least $0.01$ (the power
# variant's $r_2$ also at most $2$), and `posenc` keeps that range by its parameterisation,
# $r_1 = 0.01 + \mathrm{softplus}(\rho_1)$ and, for the power,
# $r_2 = 2 - 1.99\,\sigma(-\rho_2)$. Of the eight ALiBi slopes
# $2^{-1}, \dots, 2^{-8}$, the last two, $2^{-7} \approx 0.0078$ and $2^{-8}$, lie
# below that floor.
#
# The paper's Eq. 1 adds the kernel to
# $q_i \cdot k_j$ before the division by $\sqrt{d}$; the official code
# (`ParallelKerpleLog` and `ParallelKerplePower` in `megatron/mpu/layers.py`) adds
# it to the scores after the division, which only rescales $r_1$ by $\sqrt{d}$, and
# `posenc` follows the code. One set of parameters serves all the layers of the
# model (the code builds one module and passes it to every layer), as in T5. Fact 3
# applied to $-r_2 \lvert x - x' \rvert^{p}$ with $0 < p \le 2$ gives a log bias with
# a third number, $-r_1 \log(1 + r_2 \lvert i - j \rvert^{p})$, which the paper also
# lists; the official code and `KerpleBias` fix $p = 1$.
#
# The code clamps both parameters inside `forward`, before every use, by
# overwriting their `.data` (`self.eps = 1e-2`). The range is the same as
# `posenc`'s, the training dynamics are not: a clamped parameter that the optimiser
# pushes below the floor sits exactly on it, while $r_1$ and $r_2$ in `posenc` only
# approach the floor, and their steps are scaled by the slope of softplus or
# $\sigma$.
#
# The code builds the distance matrix as `torch.tril(m - n)`, zero above the
# diagonal, and for one cached query takes its last row; the log variant is
# `-bias_p * log(1 + bias_a * diff)` and the power variant (`kerple_power_ap_`, the
# configuration the paper trains) is `-bias_a * diff ** bias_p`. So $r_1$ is
# `bias_p` in the log variant and `bias_a` in the power variant. `posenc` is
# symmetric in $i - j$ where the official code puts $0$ after the query; the causal
# mask removes those entries either way.
#
# The code casts the distances to the scores' dtype, bfloat16 in the paper's runs,
# so distances beyond $256$ are rounded; `posenc` computes the bias in float32 and
# casts it once.
#
# On models trained with each kernel, the paper (§5.4, GitHub data) finds that
# several heads of the log variant learn almost flat kernels, which let them use
# distant tokens, while ALiBi and the power variant reach very negative values
# quickly. Its Table 3 gives perplexities on another dataset, OpenWebText2: trained
# at 512 tokens and tested at 16384 (mean of five seeds), the log variant reaches
# 21.4 and the power variant 21.6, a difference within the paper's own significance
# test, against ALiBi 22.5 and T5 31.4 (RoPE 269, sinusoidal about 30000).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：KERPLE のコードと結果**
#
# ALiBi のヘッドをすべて再現できるわけではありません。
# 公式実装は 2 つのパラメータの最小値を $0.01$ とし、べき乗の形では指数 $r_2$ の最大値を $2$ とします。`posenc` は $r_1 = 0.01 + \mathrm{softplus}(\rho_1)$、べき乗の形では $r_2 = 2 - 1.99\,\sigma(-\rho_2)$ とパラメータ化して、同じ範囲に収めます。
# 8 ヘッドの ALiBi の傾き $2^{-1}, \dots, 2^{-8}$ のうち、最後の 2 つ $2^{-7} \approx 0.0078$ と $2^{-8}$ はこの最小値より小さくなります。
#
# 論文の式 1 は、カーネルを $\sqrt{d}$ で割る前の $q_i \cdot k_j$ に足します。
# 公式実装（`megatron/mpu/layers.py` の `ParallelKerpleLog` と `ParallelKerplePower`）は割ったあとのスコアに足しますが、この違いで変わるのは $r_1$ の尺度（$\sqrt{d}$ 倍）だけです。`posenc` は公式実装に従います。
# パラメータの組は T5 と同じくモデルのすべての層で共有します（公式実装は 1 つのモジュールを作り、それをすべての層に渡します）。
# 事実 3 を $0 < p \le 2$ での $-r_2 \lvert x - x' \rvert^{p}$ に使うと、パラメータが 1 つ増えた対数のバイアス $-r_1 \log(1 + r_2 \lvert i - j \rvert^{p})$ が得られます。
# 論文はこれも挙げていますが、公式実装と `KerpleBias` は $p = 1$ に固定しています。
#
# 公式実装は `forward` の中で、使うたびに 2 つのパラメータの `.data` を書き換え、範囲の外に出た値を最小値か最大値に切り詰めます（`self.eps = 1e-2`）。
# 範囲は `posenc` と同じでも、学習の進み方は違います。
# 切り詰める方式では、オプティマイザが最小値より下に押したパラメータは、最小値ちょうどにとどまります。
# 一方、`posenc` の $r_1$ と $r_2$ は最小値に近づくだけで、その更新量には softplus や $\sigma$ の傾きが掛かります。
#
# 公式実装は距離の行列を `torch.tril(m - n)` として作り、対角より上は 0 にします。
# KV キャッシュで新しいクエリ 1 つだけを計算するときは、この行列の最後の行を取り出します。
# 対数の式は `-bias_p * log(1 + bias_a * diff)`、べき乗の式（論文が学習した設定 `kerple_power_ap_`）は `-bias_a * diff ** bias_p` です。
# したがって $r_1$ は、対数の形では `bias_p`、べき乗の形では `bias_a` にあたります。
# `posenc` は $i - j$ について対称ですが、公式実装はクエリより後ろを $0$ にします。どちらの場合も、その成分は因果マスクが取り除きます。
#
# 公式実装は距離をスコアの dtype（論文の実験では bfloat16）に変換するので、$256$ を超える距離は丸められます。`posenc` はバイアスを float32 で計算し、最後に 1 回だけ変換します。
#
# 論文（§5.4、GitHub のデータ）によると、それぞれのカーネルで学習したモデルでは、対数の形のいくつかのヘッドがほとんど平らなカーネルを学習し、遠くのトークンを使えるようになります。
# 一方、ALiBi とべき乗の形は、すぐに大きな負の値に達します。
# 論文の表 3 は、別のデータセット OpenWebText2 でのパープレキシティ（5 つのシードの平均）を示します。
# 512 トークンの系列で学習し、16384 トークンでテストすると、対数の形は 21.4、べき乗の形は 21.6 で、この差は論文自身の有意性の検定では有意ではありません。ALiBi は 22.5、T5 は 31.4 です。
# RoPE は 269、正弦波位置エンコーディングは約 30000 です。


# %% tags=["deeper", "check"] summary={"en": "the official forward pass, restated, equals KerpleBias for both kinds on the causal entries and on the row of a cached query; bfloat16 rounds the distance 257; a bfloat16 KerpleBias equals the float32 one cast once", "ja": "書き直した公式実装のフォワードパスは、どちらの形でも、因果的な成分でも、キャッシュを使うクエリの行でも、KerpleBias と一致します。bfloat16 は距離 257 を丸めます。bfloat16 の KerpleBias は、float32 のものを 1 回変換したものと一致します"}
def official_kerple(kind, bias_p, bias_a, k_len):
    """ParallelKerpleLog / ParallelKerplePower.forward, restated (no cache)."""
    m = torch.arange(k_len)
    diff = torch.tril(m[:, None] - m[None, :]).to(f64)  # m - n, 0 above
    if kind == "log":
        return -bias_p * torch.log(1 + bias_a * diff)
    return -diff.pow(bias_p) * bias_a


torch.manual_seed(1)
for kind in ("log", "power"):
    module = KerpleBias(4, kind=kind)
    r1 = module.r1.detach().double()[:, None, None]
    r2 = module.r2.detach().double()[:, None, None]
    p, a = (r1, r2) if kind == "log" else (r2, r1)  # r1 is bias_p for "log"
    ref = official_kerple(kind, p, a, 12).float()
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    with torch.no_grad():
        assert_close(module(12)[:, causal], ref[:, causal])
        assert_close(module(1, 12), ref[:, -1:])  # one cached query

d = torch.arange(258, dtype=f64)  # distances as the official code casts them
d_bf16 = d.to(torch.bfloat16).double()
assert torch.equal(d_bf16[:257], d[:257]) and d_bf16[257] == 256

# posenc: float32 inside, one cast at the end
half = KerpleBias(4, kind="power").to(torch.bfloat16)
full = KerpleBias(4, kind="power")
full.load_state_dict({k: v.float() for k, v in half.state_dict().items()})
with torch.no_grad():
    assert torch.equal(half(1, 16384), full(1, 16384).to(torch.bfloat16))

# %% [markdown] lang="en"
# ## FIRE: a small network of a normalised distance
#
# KERPLE fixes the shape of the curve. A curve of the raw distance has a second
# problem: a longer input brings distances it never met in training. FIRE (Li et al.
# 2024) learns the whole shape with a small MLP $f_\theta$ and feeds it the distance
# divided by the query's position, both through a logarithm:
# $$b(i, j) = f_\theta\!\left(\frac{\psi(i - j)}{\psi(\max(L, i))}\right), \qquad \psi(x) = \log(c\,x + 1)$$
# The MLP has one input, 32 hidden ReLU units and one output per head. FIRE learns
# $c > 0$ and the threshold $L > 0$ too, starting at $0.1$ and $512$.
#
# Why divide? For a query beyond the threshold, $i > L$, every causal key has
# $0 \le i - j \le i$, so the input lies in $[0, 1]$ at every length ($1$ at the first
# key). Trained on inputs longer than $L$, the MLP has met that whole interval: it
# [interpolates](../docs/glossary.md#interpolation) where a function of the raw
# distance would [extrapolate](../docs/glossary.md#extrapolation) (the paper's
# [progressive interpolation](../docs/glossary.md#progressive-interpolation)). The
# price: the same distance gets a smaller input as the query moves on. Below the
# threshold the divisor is the constant $\psi(L)$, so on short inputs FIRE is a plain
# function of the distance. The logarithm keeps near keys apart: without it, the keys
# one and two back from a query at 4096 would differ in input by only $1/4096$. With
# it:

# %% [markdown] lang="ja"
# ## FIRE：正規化した距離を読む小さなネットワーク
#
# KERPLE では曲線の形（対数またはべき乗）は決まっていて、学習するのは 2 つのパラメータだけです。生の距離の曲線には、もう 1 つ問題があります。長い入力には、学習で出会わなかった距離が現れることです。
# FIRE（Li ら 2024）は小さな MLP $f_\theta$ で形そのものを学習します。MLP に渡すのは、距離を対数に通したものを、クエリの位置を対数に通したもので割った値です。
# $$b(i, j) = f_\theta\!\left(\frac{\psi(i - j)}{\psi(\max(L, i))}\right), \qquad \psi(x) = \log(c\,x + 1)$$
# MLP は入力 1 つ、ReLU の隠れユニット 32 個、ヘッドごとに出力 1 つです。$c > 0$ としきい値 $L > 0$ も学習します（初期値は $0.1$ と $512$）。
#
# なぜ割るのでしょうか。しきい値を超えたクエリ $i > L$ では、因果的なキーはどれも $0 \le i - j \le i$ を満たすので、MLP の引数はどの長さでも $[0, 1]$ に収まります（最初のキーで $1$）。
# $L$ より長い入力で学習した MLP はこの区間全体を見ているので、生の距離の関数なら[外挿](../docs/glossary.ja.md#extrapolation)が必要なところを[補間](../docs/glossary.ja.md#interpolation)で済ませます（論文の言う[漸進的補間](../docs/glossary.ja.md#progressive-interpolation)）。
# その代償として、クエリが進むほど、同じ距離に対する引数は小さくなります。
# しきい値の手前では分母は定数 $\psi(L)$ なので、短い入力では FIRE は単に距離の関数です。
# 対数を通すのは、近いキーどうしの引数の差を保つためです。対数がなければ、位置 4096 のクエリから見た 1 つ前と 2 つ前のキーの引数は $1/4096$ しか違いません。対数を通すと次のようになります。

# %%
fire = FireBias(4, threshold=64.0)  # L = 64; c starts at 0.1
x = fire.normalized_distance(1, 4097)[0]  # the MLP's inputs, query at 4096
gap = (x[4094] - x[4095]).item()  # keys 1 and 2 back
print(f"keys 1 and 2 back at 4096: {gap:.4f} apart, {gap * 4096:.0f} x 1/4096")


# %% tags=["check"] summary={"en": "the pseudo-code equals FireBias; at 16L the arguments stay in the range seen at 2L; they depend on i − j alone up to L only; the gap is as stated", "ja": "論文の疑似コードは FireBias と一致します。16L での引数は 2L で見た範囲に収まり、引数が i − j だけで決まるのは L までです。差は本文の値どおりです"}
L = 64


def fire_pseudo_code(fire, seq_len):
    """The FIRE pseudo-code of the paper's appendix, restated (square case)."""
    positions = torch.arange(seq_len, dtype=torch.float)
    rel_distance = positions[:, None] - positions[None, :]
    threshold = torch.abs(fire.threshold_multiplier * fire.initial_threshold)
    pos_normalizer = torch.max(positions, threshold)[:, None]
    rel_distance = torch.log(torch.abs(fire.c * rel_distance) + 1)
    pos_normalizer = torch.log(torch.abs(fire.c * pos_normalizer) + 1)
    normalized_distance = rel_distance / (pos_normalizer + 1e-6)
    return fire.mlp(normalized_distance.unsqueeze(-1)).permute(2, 0, 1)


with torch.no_grad():
    for T in (40, 300):  # below and beyond the threshold
        assert_close(fire(T), fire_pseudo_code(fire, T))

    def args(T):  # the MLP's arguments on the causal entries
        x = fire.normalized_distance(T)
        return x[torch.ones(T, T, dtype=torch.bool).tril()]

    for T in (2 * L, 8 * L, 64 * L):
        x = fire.normalized_distance(T)
        assert_close(x[L + 1 :, 0], torch.ones(T - L - 1))  # j = 0: 1

    # trained at 2L, read at 16L: no argument outside the trained range
    # (up to the 1e-6 that the pseudo-code adds to the normaliser)
    trained, longer = args(2 * L), args(16 * L)
    assert longer.max() <= trained.max() + 1e-6
    # the price: same interval, another spread (more pairs near 1 at 16L);
    # (i - j)/i without the log would put about half below 1/2 at any length
    below = [(x < 0.5).float().mean().item() for x in (trained, longer)]
    assert below[1] < 0.5 * below[0] < 0.25
    T, D = 16 * L, 2 * L  # raw distances: share of pairs at d >= D
    d_causal = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).tril()
    far = (d_causal >= D).sum().item() / (T * (T + 1) / 2)
    assert math.isclose(far, (T - D) * (T - D + 1) / (T * (T + 1)))

    # a function of the distance up to the threshold, not beyond it
    x = fire.normalized_distance(4 * L)
    assert_close(x[1 : L + 1, 1 : L + 1], x[:L, :L])  # shift i and j
    assert not torch.allclose(x[L + 1 :, 1:], x[L:-1, :-1])


def psi(v):
    return math.log(0.1 * v + 1)


assert math.isclose(gap, (psi(2) - psi(1)) / (psi(4096) + 1e-6), rel_tol=1e-4)
print(f"raw distances beyond the trained 2L at 16L: {far:.1%} of the pairs")

# %% [markdown] lang="en"
# The figure shows the input for $L = 64$. Left, against $(i - j)/i$: the queries at
# $64$, $256$ and $1024$ each run from $0$ to $1$, more bent as $i$ grows. The query
# at $16$, below the threshold, stops at $\psi(16)/\psi(64) \approx 0.48$. Right: the
# distance $8$ gets $0.294$ up to $L$, then less, down to $0.127$ at $i = 1024$.

# %% [markdown] lang="ja"
# 図は $L = 64$ での MLP の引数を描いたものです。左は $(i - j)/i$ を横軸にとり、位置 $64$、$256$、$1024$ のクエリの引数はどれも $0$ から $1$ まで続き、$i$ が大きいほど曲がります。しきい値の手前の位置 $16$ のクエリは $\psi(16)/\psi(64) \approx 0.48$ で止まります。
# 右は距離 $8$ の引数で、$L$ までは $0.294$、その先は下がって $i = 1024$ で $0.127$ です。

# %% tags=["figure"] alt={"en": ["Left: the argument of FIRE's MLP for L = 64 against the fraction (i − j)/i, for queries at 16, 64, 256 and 1024; the last three each rise from 0 to 1, more steeply near 0 the larger i is; the query at 16 ends near 0.48. Right: the argument of the distance 8 against the query position i from 8 to 1024 on a log axis: flat at 0.294 up to i = 64 (dashed line), then falling to 0.127."], "ja": ["左：L = 64 での FIRE の MLP の引数を、割合 (i − j)/i に対して、位置 16、64、256、1024 のクエリについて描いた図です。後の 3 つはどれも 0 から 1 まで上がり、i が大きいほど 0 の近くで急に立ち上がります。位置 16 のクエリは約 0.48 で終わります。右：距離 8 の引数を、クエリの位置 i（8〜1024、対数軸）に対して描いた図です。i = 64（破線）までは 0.294 で一定で、その後は 0.127 まで下がります。"]}
with torch.no_grad():
    x_all = fire.normalized_distance(1025)  # queries 0..1024
fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 2.5))
for i in (16, 64, 256, 1024):
    dist = torch.arange(i + 1)
    left.plot(dist / i, x_all[i, i - dist], label=f"$i = {i}$", lw=1.3)
left.set(xlabel="$(i - j)/i$", ylabel=r"$\psi(i-j)/\psi(\max(L,i))$")
left.legend(fontsize=8, ncol=2, loc="lower right")
queries = torch.arange(8, 1025)
right.plot(queries, x_all[queries, queries - 8], color="C5", lw=1.3)
right.axvline(L, color="C7", lw=0.8, ls="--")
right.set(xscale="log", xlabel="$i$", title="$i - j = 8$", ylim=(0, 0.35))
plt.show()

# %% tags=["check"] summary={"en": "the quoted values are ψ(16)/ψ(64), ψ(8)/ψ(1024) and the printed ones", "ja": "本文の値は ψ(16)/ψ(64)、ψ(8)/ψ(1024) で、出力どおりです"}
assert math.isclose(x_all[16, 0], psi(16) / (psi(64) + 1e-6), rel_tol=1e-5)
assert math.isclose(
    x_all[1024, 1016], psi(8) / (psi(1024) + 1e-6), rel_tol=1e-5
)
assert f"{x_all[16, 0]:.2f}" == "0.48"
print(f"d = 8: {x_all[64, 56]:.3f} at i = 64, {x_all[1024, 1016]:.3f} at 1024")

# %% [markdown] lang="en"
# In short: FIRE learns the curve itself; by the paper, it can represent T5's bias,
# ALiBi and KERPLE (exercise 2 builds ALiBi). Once trained past $L$ it meets no input
# outside the trained range. The price: its bias depends on the distance *as a
# fraction of the context*.

# %% [markdown] lang="ja"
# 要するに、FIRE は曲線そのものを学習します（論文によれば T5 のバイアス、ALiBi、KERPLE も表現でき、演習 2 で ALiBi を作ります）。$L$ より長い入力で学習すれば、学習で見た範囲の外の引数には出会いません。
# 代償として、バイアスは**文脈の長さに対する距離の割合**で決まります。

# %% [markdown] lang="en"
# ## CoPE: positions the model counts
#
# So far the distance counts tokens, but "the third sentence back" lies a different
# number of tokens back in every input. CoPE (Golovneva et al. 2024) lets each head
# count what it chooses. A [gate](../docs/glossary.md#gate) says how much key $j$ counts for
# query $i$, and the [contextual position](../docs/glossary.md#contextual-position) of
# key $j$ is the sum of the gates from $j$ up to the query:
# $$g_{ij} = \sigma(q_i \cdot k_j / \sqrt{d}), \qquad p_{ij} = \sum_{t=j}^{i} g_{it}$$
# A head whose gates are all $1$ counts tokens, $p_{ij} = i - j + 1$; a head whose
# gates open only on full stops counts sentences. Positions are fractional, so the
# head interpolates between the embeddings of the two neighbouring integers,
# $$e[p] = (p - \lfloor p \rfloor)\, e[\lceil p \rceil] + (1 - p + \lfloor p \rfloor)\, e[\lfloor p \rfloor]$$
# and adds $q_i \cdot e[p_{ij}]$ to the score. Positions above $P - 1$ are clamped to
# $P - 1$.

# %% [markdown] lang="ja"
# ## CoPE：モデルが数える位置
#
# ここまでの距離はトークンを数えたものでした。しかし「3 つ前の文」が何トークン前にあるかは、入力ごとに違います。
# CoPE（Golovneva ら 2024）では、何を数えるかを各ヘッドが選びます。
# [ゲート](../docs/glossary.ja.md#gate)はクエリ $i$ にとってキー $j$ をどれだけ数えるかを表し、キー $j$ の[文脈に応じた位置](../docs/glossary.ja.md#contextual-position)は $j$ からクエリまでのゲートの和です。
# $$g_{ij} = \sigma(q_i \cdot k_j / \sqrt{d}), \qquad p_{ij} = \sum_{t=j}^{i} g_{it}$$
# ゲートがすべて $1$ のヘッドはトークンを数え（$p_{ij} = i - j + 1$）、ピリオドでだけ開くヘッドは文を数えます。
# 位置は小数になるので、隣り合う 2 つの整数位置の埋め込みを、次のように線形補間します。
# $$e[p] = (p - \lfloor p \rfloor)\, e[\lceil p \rceil] + (1 - p + \lfloor p \rfloor)\, e[\lfloor p \rfloor]$$
# そして $q_i \cdot e[p_{ij}]$ をスコアに足します。$P - 1$ を超える位置は $P - 1$ にクリップします。

# %%
cope = CoPE(8, 2, max_positions=6)  # head dimension 8, 2 heads, P = 6
causal = torch.ones(12, 12).tril()  # 12 positions
open_gates = torch.full((12, 12), 40.0).masked_fill(causal == 0, -math.inf)
cope.positions(open_gates)[-1]  # sigmoid(40) = 1: tokens, clamped at P - 1


# %% tags=["check"] summary={"en": "CoPE equals the paper's equations; with open gates the positions are i − j + 1, clamped at P − 1", "ja": "CoPE は論文の式どおりで、ゲートが全開なら位置は i − j + 1（最大 P − 1）です"}
def cope_by_vectors(q, scores, table):
    """The paper's equations: q_i . e[p_ij], with e[p] interpolated."""
    p = torch.sigmoid(scores).flip(-1).cumsum(-1).flip(-1)
    p = p.clamp(max=table.shape[0] - 1)
    lo, hi = p.floor(), p.ceil()
    e = (p - lo)[..., None] * table[hi.long()] + (1 - p + lo)[..., None] * (
        table[lo.long()]
    )  # [..., q, k, d]
    return (q[..., None, :] * e).sum(-1)


torch.manual_seed(4)
dim, heads, T, P = 8, 2, 12, 6
torch.nn.init.normal_(cope.pos_emb)  # the table starts at zero
q, k = torch.randn(2, 1, heads, T, dim).unbind(0)
scores = (q @ k.transpose(-1, -2) / math.sqrt(dim)).masked_fill(
    causal == 0, -math.inf
)
with torch.no_grad():
    bias = cope(q, scores)
    assert_close(bias, cope_by_vectors(q, scores, cope.pos_emb))
p = cope.positions(open_gates)
i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
counted = (i - j + 1).clamp(max=P - 1).float()  # tokens, clamped
assert torch.equal(p[causal == 1], counted[causal == 1])

# %% [markdown] lang="en"
# ### Counting sentences: the third sentence back
#
# An input is five complete sentences and the start of a sixth; a sentence is one to
# seven words `w` and an end mark, `.`, `!` or `?`. The last token asks how the third
# sentence back ended. That sentence's keys have three end marks from themselves to
# the query. So a head whose gates open on end marks, and only there, finds them at
# $p_{ij} = 3$ whatever the sentence lengths. Such a head, set by hand, answers all of
# 1000 random inputs; here it is on two, A and B (the note below explains its
# numbers).

# %% [markdown] lang="ja"
# ### 文を数える：3 つ前の文
#
# 入力は、完結した 5 つの文と 6 つ目の文の書き出しです。1 つの文は、1〜7 個の単語 `w` と、文末の記号 1 つ（`.`、`!`、`?` のどれか）からなります。
# 最後のトークンで問うのは、「3 つ前の文はどの記号で終わったか」です。
# その文のキーからクエリまでには、文末の記号がちょうど 3 つあります（その文自身の記号を含みます）。そのため、文末の記号でだけゲートが開くヘッドは、文の長さによらず、その文のキーを $p_{ij} = 3$ の位置に見つけます。
# 手で設定したこのヘッドは、ランダムな入力 1000 個すべてに正しく答えます。次は 2 つの入力 A と B での例です（数値は下の「さらに詳しく」で説明します）。

# %%
MARKS, N_KEYS = "w.!?", 6 * 7 + 5  # a word, 3 end marks; the longest input
texts = ["w w . w ? w ! w . w . w", "w . w . w ! w ? w w . w w"]  # A and B
rows = [[MARKS.index(t) for t in text.split()] for text in texts]
pair = torch.tensor([[-1] * (N_KEYS - len(r)) + r for r in rows])  # padded
gate_scores = torch.where(pair > 0, 20.0, -20.0)  # q . k / sqrt(d) per key
gate_scores = gate_scores.masked_fill(pair < 0, -math.inf)[:, None, None]
head = CoPE(4, 1, max_positions=8)  # d = 4, one head, P = 8
query = torch.tensor([1.0, 0.0, 1.0, 0.0])
with torch.no_grad():
    head.pos_emb[3, 2] = 40.0  # e[3] = (0, 0, 40, 0), so q . e[3] = 40
    count_bias = head(query.expand(2, 1, 1, 4), gate_scores)
pair_logits = (gate_scores + count_bias)[:, 0, 0]
pair_positions = head.positions(gate_scores)[:, 0, 0]
print(pair_positions[0, -12:].round().int().tolist())  # A: marks from j on
print("answers:", [MARKS[t] for t in pair[[0, 1], pair_logits.argmax(-1)]])

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the counting head in numbers, and CoPE in code.** The
# counting head has dimension $d = 4$ and $P = 8$.
# Each key is $k_j = (\pm 40, 0, 0, 0)$, $+$ for an end mark, and the query is
# $q = (1, 0, 1, 0)$, so the scaled score $q \cdot k_j / 2$ is $+20$ on end marks and
# $-20$ on words. The table's only nonzero entry is $e[3] = (0, 0, 40, 0)$, so
# $q \cdot e[3] = 40$ and $q \cdot e[n] = 0$ otherwise: the other marks score $20$,
# the target sentence's words $-20 + 40 = 20$, the other words $-20$. The values are one-hot
# vectors of the three marks (zero for words), and the answer is the mark with
# strictly the most weight (a tie is no answer).
#
# A masked key has score $-\infty$ and gate $0$, so the sum of gates stops at the
# query. Only
# $q_i \cdot e[p_{ij}]$ is needed, and it is linear in $e$, so CoPE computes
# $z_i[n] = q_i \cdot e[n]$ for $n = 0, \dots, P - 1$ once per query and interpolates
# those scalars:
# $q_i \cdot e[p] = (p - \lfloor p \rfloor)\, z_i[\lceil p \rceil] + (1 - p + \lfloor p \rfloor)\, z_i[\lfloor p \rfloor]$.
#
# Whether the position logits $q_i \cdot e$ are also divided by $\sqrt{d}$ differs
# between the sources. All gate on the scaled logits $q_i \cdot k_j / \sqrt{d}$ (the
# paper's text writes $\sigma(q_i \cdot k_j)$). The paper's appendix code and
# x-transformers' `x_transformers.x_transformers.CoPE` add the unscaled $q_i \cdot e$, as `posenc.CoPE` does. The
# training code of the official repository (`facebookresearch/RAM`, `projects/cope`), by
# default divides the position logits by $\sqrt{d}$ together with $q_i \cdot k_j$
# (`--cope-nodiv` turns this off); a learned table absorbs the factor, so a table
# multiplied by $\sqrt{d}$ gives `posenc`'s scores.
#
# x-transformers also offers a
# bias of FIRE's kind, `DynamicPositionBias`: an MLP reads the signed relative
# position (or $\mathrm{sign}(x) \log(\lvert x \rvert + 1)$ with `log_distance=True`)
# once per relative position, so, like FIRE below its threshold, it is a function of
# the distance alone. What FIRE adds is the division by the query's position beyond
# $L$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：文を数えるヘッドの数値と、CoPE のコード**
#
# 文を数えるヘッドは、次元数が $d = 4$ で、$P = 8$ です。
# 各キーは $k_j = (\pm 40, 0, 0, 0)$（文末の記号なら $+$）、クエリは $q = (1, 0, 1, 0)$ なので、スケーリングしたスコア $q \cdot k_j / 2$ は文末の記号で $+20$、単語で $-20$ です。
# 表のうち 0 でない行は $e[3] = (0, 0, 40, 0)$ だけなので、$q \cdot e[3] = 40$ で、ほかの位置では $q \cdot e[n] = 0$ です。
# ほかの記号のスコアは $20$、答えの文の単語は $-20 + 40 = 20$、それ以外の単語は $-20$ になります。
# バリューは 3 種類の記号の one-hot ベクトルで、単語では 0 ベクトルです。重みの合計がほかのどの記号より大きい記号を答えとし、最大が同点なら答えなしとします。
#
# マスクしたキーのスコアは $-\infty$、ゲートは $0$ なので、ゲートの和はクエリで止まります。
# 必要なのは $q_i \cdot e[p_{ij}]$ だけで、これは $e$ について線形なので、CoPE は $n = 0, \dots, P - 1$ の $z_i[n] = q_i \cdot e[n]$ をクエリごとに 1 回計算し、そのスカラーを補間します。
# 補間の式は $q_i \cdot e[p] = (p - \lfloor p \rfloor)\, z_i[\lceil p \rceil] + (1 - p + \lfloor p \rfloor)\, z_i[\lfloor p \rfloor]$ です。
#
# 位置のスコア $q_i \cdot e$ を $\sqrt{d}$ で割るかどうかは、出典によって違います。
# ゲートは、どの出典でもスケーリングしたスコア $q_i \cdot k_j / \sqrt{d}$ から作ります（論文の本文は $\sigma(q_i \cdot k_j)$ と書いています）。
# 論文の付録のコードと x-transformers の `x_transformers.x_transformers.CoPE` は、スケーリングしない $q_i \cdot e$ を足します。`posenc.CoPE` も同じです。
# 公式リポジトリの学習コード（`facebookresearch/RAM` の `projects/cope`）は、既定では位置のスコアも $q_i \cdot k_j$ と一緒に $\sqrt{d}$ で割ります（`--cope-nodiv` で無効にできます）。
# この因子は学習可能な表が吸収するので、RAM の表を `posenc` の表の $\sqrt{d}$ 倍にすれば、同じスコアになります。
#
# x-transformers には、FIRE と同じ種類のバイアスとして、動的位置バイアス（`DynamicPositionBias`）もあります。その MLP は、正負の区別を残した相対位置（`log_distance=True` のときは $\mathrm{sign}(x) \log(\lvert x \rvert + 1)$）を入力とし、相対位置ごとに 1 回だけ評価されます。
# そのため、しきい値の手前の FIRE と同じく、距離だけの関数です。
# FIRE が付け加えるのは、$L$ を超えたところでのクエリの位置による割り算です。


# %% tags=["deeper", "check"] summary={"en": "RAM's ContextPosSelfAttn.forward with its default flags, restated, equals posenc's scores plus CoPE's bias when its table is posenc's times √d", "ja": "既定のフラグで書き直した RAM の ContextPosSelfAttn.forward は、表を posenc の √d 倍にすると、posenc のスコアと CoPE のバイアスの和に一致します"}
def ram_cope_logits(q, k, table_ram, causal):
    """facebookresearch/RAM, ContextPosSelfAttn.forward, default flags."""
    dim = q.shape[-1]
    gate_logits = q @ k.transpose(-1, -2)
    gates = torch.sigmoid(gate_logits / math.sqrt(dim)) * causal
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1)
    positions = positions.clamp(max=table_ram.shape[-1] - 1)
    pos_logits_fixed = q @ table_ram  # table: [d, npos]
    ceil, floor = positions.ceil().long(), positions.floor().long()
    w = positions - floor
    pos_logits = pos_logits_fixed.gather(-1, ceil) * w + (
        pos_logits_fixed.gather(-1, floor) * (1 - w)
    )
    attn_logits = gate_logits + pos_logits
    attn_logits = attn_logits / math.sqrt(dim)
    return attn_logits + causal.log()  # masked keys: -inf


with torch.no_grad():
    table_ram = cope.pos_emb.T * math.sqrt(dim)  # RAM's [d, P] layout
    assert_close(scores + bias, ram_cope_logits(q, k, table_ram, causal))


# %% tags=["check"] summary={"en": "the positions count end marks, and the hand-set head answers all 1000 random inputs", "ja": "位置は文末の記号の数で、手で設定したヘッドはランダムな入力 1000 個すべてに正しく答えます"}
def make_inputs(n, gen):
    """n inputs, left-padded with -1: five sentences and a sixth begun."""
    lens = torch.randint(1, 8, (n, 6), generator=gen).tolist()
    marks = torch.randint(1, 4, (n, 5), generator=gen).tolist()
    tokens = torch.full((n, N_KEYS), -1)
    for b in range(n):
        seq = []
        for s in range(5):
            seq += [0] * lens[b][s] + [marks[b][s]]
        seq += [0] * lens[b][5]
        tokens[b, N_KEYS - len(seq) :] = torch.tensor(seq)
    return tokens


def answers(tokens):
    """The end mark of the third sentence back, by counting from the end."""
    out = []
    for row in tokens.tolist():
        ends = [t for t in row if t > 0]
        out.append(ends[-3])
    return torch.tensor(out)


def content(tokens):  # q . k / sqrt(d): +20 on end marks, -20 on words
    return torch.where(tokens > 0, 20.0, -20.0).masked_fill(
        tokens < 0, -math.inf
    )


def read_out(tokens, logits):
    """Weights, and the weight each end mark gets (values: one-hot marks)."""
    weights = torch.softmax(logits, dim=-1)
    onehot = torch.stack([(tokens == m).float() for m in (1, 2, 3)], -1)
    return weights, (weights[..., None] * onehot).sum(-2)  # [n, k], [n, 3]


def answer(mark_weight):
    """The mark (1..3) with strictly the most weight; 0 on a tie."""
    top = mark_weight.topk(2, dim=-1).values
    best = mark_weight.argmax(-1) + 1
    return torch.where(top[..., 0] > top[..., 1], best, 0)


def cope_logits(tokens):  # the counting head, its query and content, above
    scores = content(tokens)[:, None, None, :]  # [n, h=1, q=1, k]
    with torch.no_grad():
        bias = head(query.expand(len(tokens), 1, 1, 4), scores)
    return (scores + bias)[:, 0, 0], head.positions(scores)[:, 0, 0]


gen = torch.Generator().manual_seed(0)
test = make_inputs(1000, gen)
logits, positions = cope_logits(test)
for row, p in zip(test[:20].tolist(), positions[:20], strict=True):
    for j, t in enumerate(row):
        if t >= 0:
            marks_from_j = sum(1 for u in row[j:] if u > 0)
            assert abs(p[j].item() - marks_from_j) < 1e-6
cope_pred = answer(read_out(test, logits)[1])
cope_accuracy = (cope_pred == answers(test)).float().mean().item()
assert cope_accuracy == 1.0
print(f"CoPE head: {cope_accuracy:.0%} of 1000 inputs")

# %% [markdown] lang="en"
# One head with a bias by token distance, whose content scores treat all end marks
# alike, cannot do this, whatever its values. In A the target `!`
# is 5 tokens back and a `?` 7; in B it is the other way round. With content scores
# that treat all end marks alike, A needs $b(5) > b(7)$ and B needs $b(7) > b(5)$.
# A table of 47 values, one per distance, was trained with the same content scores
# (Adam, 200 steps on 512 random inputs). It answers 68.4% of the 1000 test inputs,
# above the [chance level](../docs/glossary.md#chance-level) of one in three; from one
# run with one seed, that is a lower bound on what such a table can reach.

# %% [markdown] lang="ja"
# 内容のスコアがどの文末の記号も同じに扱うなら、トークンの距離によるバイアスを持つヘッド 1 つでは、値をどう選んでもこれはできません。
# A では答えの `!` が 5 トークン前、`?` が 7 トークン前にあり、B ではその逆です。
# 文末の記号を区別しない内容のスコアでは、A には $b(5) > b(7)$、B には $b(7) > b(5)$ が必要です。
# 距離ごとに 1 つ、計 47 個の値を持つバイアスの表を、内容のスコアは同じにしてランダムな入力で学習しました（Adam、512 個の入力、200 ステップ）。
# テスト用の 1000 個の入力での正解率は 68.4% で、[チャンスレベル](../docs/glossary.ja.md#chance-level)の 3 分の 1 を上回ります。
# シード 1 つで 1 回学習しただけなので、この値は、距離ごとの表で達成できる正解率の下界にすぎません。


# %% tags=["check"] summary={"en": "no bias answers both A and B (2000 random ones, a tie, one favouring A); with one seed, the trained table answers 68.4%, above chance and below the CoPE head; the printed positions of A count its end marks and the head answers ! twice", "ja": "A と B の両方に正しく答えるバイアスはありません（試したのは、ランダムな 2000 個、同点になるもの、A に有利なもの）。シード 1 つで学習した表の正解率は 68.4% で、チャンスレベルより高く、CoPE のヘッドより低い値です。出力した A の位置は文末の記号の数で、ヘッドは 2 回とも ! と答えます"}
back = N_KEYS - 1 - torch.arange(N_KEYS)  # distance from the query
for row, (at_bang, at_query) in zip(pair, ((5, 7), (7, 5)), strict=True):
    assert MARKS[row[N_KEYS - 1 - at_bang]] == "!"
    assert MARKS[row[N_KEYS - 1 - at_query]] == "?"
assert (answers(pair) == 2).all()  # "!" in both
assert (answer(read_out(pair, cope_logits(pair)[0])[1]) == 2).all()
assert torch.equal(cope_logits(pair)[0], pair_logits)  # the printed cell
assert torch.equal(cope_logits(pair)[1], pair_positions)
assert torch.equal(content(pair), gate_scores[:, 0, 0])
for row, p in zip(pair.tolist(), pair_positions, strict=True):  # printed
    for j, t in enumerate(row):
        if t >= 0:
            assert abs(p[j].item() - sum(u > 0 for u in row[j:])) < 1e-6

tie = torch.full((N_KEYS,), -100.0)
tie[[5, 7]] = 0.0  # b(5) = b(7): "!" and "?" weigh 0.5 each
favour_a = torch.full((N_KEYS,), -100.0)
favour_a[5] = 0.0  # b(5) > b(7): answers A
torch.manual_seed(5)
for b in (tie, favour_a, *(4 * torch.randn(2000, N_KEYS))):
    right = answer(read_out(pair, content(pair) + b[back])[1]) == 2
    assert not right[0] or b[5] > b[7]  # A right only if b(5) > b(7)
    assert not right[1] or b[7] > b[5]  # B right only if b(7) > b(5)
    assert not right.all()
tie_weight = read_out(pair, content(pair) + tie[back])[1]
assert (tie_weight.argmax(-1) == 1).all()  # argmax alone would say "!" twice
assert (answer(tie_weight) == 0).all()
assert answer(read_out(pair, content(pair) + favour_a[back])[1])[0] == 2

train = make_inputs(512, gen)
table = torch.zeros(N_KEYS, requires_grad=True)  # b(d), d = 0..46
optimiser = torch.optim.Adam([table], lr=0.5)
target = answers(train) - 1
for _ in range(200):
    mark_weight = read_out(train, content(train) + table[back])[1]
    loss = -torch.log(mark_weight.gather(1, target[:, None]) + 1e-9).mean()
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
with torch.no_grad():
    table_weights, mark_weight = read_out(test, content(test) + table[back])
    table_accuracy = (answer(mark_weight) == answers(test)).float().mean()
print(f"table by distance: {table_accuracy:.1%} of the same 1000 inputs")
assert 1 / 3 < table_accuracy < cope_accuracy  # one seed: chance < it < CoPE

# %% [markdown] lang="en"
# The figure shows A and B. Top: the contextual positions $p_{ij}$ of the last query,
# a staircase that steps up at each end mark. Bottom: where each head puts its weight.
# The trained table answers `.` twice, wrong both times. Most of its weight goes to the end mark
# furthest back: 0.788 to the one 9 tokens back in A, 0.649 to the one 11 back in B.
# It learned on longer sentences, where the third mark back lies 14.1 tokens back on
# average.

# %% [markdown] lang="ja"
# 次の図に A と B を示します。
# 上は最後のクエリから見た文脈に応じた位置 $p_{ij}$ で、文末の記号ごとに 1 段上がる階段です。下は各ヘッドの重みです。
# 学習済みの表は、A でも B でも `.` と誤答します。重みの大半を最も遠い文末の記号に置くからで、A では 9 トークン前の記号に 0.788、B では 11 トークン前の記号に 0.649 の重みがかかります。
# この表は A や B より文の長い入力で学習しており、そこでは 3 つ前の記号が平均 14.1 トークン前にありました。

# %% tags=["figure"] alt={"en": ["Two columns, inputs A and B, each token on the horizontal axis. Top: the contextual position p of the last query, a staircase from 0 at the query up to 5 at the first sentence, one step at each end mark. Bottom: attention weights; the CoPE head puts all its weight on the end mark at p = 3, the exclamation mark, in both inputs; the trained distance table puts most of its weight (0.79 in A, 0.65 in B) on the full stop furthest back, 9 tokens back in A and 11 in B."], "ja": ["入力 A と B の 2 列で、横軸は各トークンです。上は最後のクエリから見た文脈に応じた位置 p です。クエリでの 0 から最初の文での 5 まで、文末の記号ごとに 1 段上がる階段です。下はアテンションの重みです。CoPE のヘッドはどちらの入力でも p = 3 の文末の記号、つまり感嘆符にすべての重みを置きます。学習済みの距離の表は、最も遠いピリオド（A では 9 トークン前、B では 11 トークン前）に重みの大半（A では 0.79、B では 0.65）を置きます。"]}
with torch.no_grad():
    pair_table = read_out(pair, gate_scores[:, 0, 0] + table[back])[0]
pair_cope = read_out(pair, pair_logits)[0]
fig, axes = plt.subplots(2, 2, figsize=(6.4, 2.8), sharey="row")
for col, name in enumerate("AB"):
    real = pair[col] >= 0
    labels = [MARKS[t] for t in pair[col][real].tolist()]
    x = torch.arange(len(labels))
    axes[0, col].step(x, pair_positions[col][real], where="mid", lw=1.3)
    axes[0, col].set(title=name, ylabel="$p_{ij}$" if col == 0 else None)
    axes[1, col].bar(x - 0.2, pair_cope[col][real], width=0.4, label="CoPE")
    axes[1, col].bar(
        x + 0.2, pair_table[col][real], width=0.4, label="$b(i - j)$"
    )
    axes[1, col].set(ylabel="$a_{ij}$" if col == 0 else None)
    for ax in axes[:, col]:
        ax.set_xticks(x, labels)
axes[1, 0].legend(fontsize=8, loc="upper right")
plt.show()

# %% tags=["check"] summary={"en": "the table's heaviest keys are the full stops 9 and 11 back (0.788, 0.649); the third mark back averages 14.1 back", "ja": "表の重みが最も大きいのは 9 トークン前と 11 トークン前のピリオド（0.788、0.649）で、3 つ前の記号は平均 14.1 トークン前です"}
# the table's heaviest key: the "." furthest back, in both inputs
assert back[pair_table.argmax(-1)].tolist() == [9, 11]
assert [MARKS[t] for t in pair[[0, 1], pair_table.argmax(-1)]] == [".", "."]
heaviest = pair_table.max(-1).values
assert (heaviest > 0.5).all()  # most of the weight, not just the largest
shown = [f"{w:.3f}" for w in heaviest.tolist()]
assert shown == ["0.788", "0.649"]  # the numbers in the text
is_target = (train > 0) & ((train > 0).flip(-1).cumsum(-1).flip(-1) == 3)
mean_back = back.expand_as(train)[is_target].float().mean().item()
assert 13.5 < mean_back < 14.5  # 4 + 5 + 5 expected: sentence lengths
assert f"{mean_back:.1f}" == "14.1"  # the number in the text
print("table's weight on that mark:", ", ".join(shown))
print(f"training inputs: the third mark back is {mean_back:.1f} tokens back")

# %% [markdown] lang="en"
# In short: a CoPE head measures distance in units it chooses, such as sentences,
# which no single head with a bias by token distance can imitate when its content
# scores treat all end marks alike.

# %% [markdown] lang="ja"
# 要するに、CoPE のヘッドは文のように自分が選んだ単位を使って距離を測ります。内容のスコアがどの文末の記号も同じに扱うなら、トークンの距離によるバイアスを持つヘッド 1 つでは、これをまねできません。

# %% [markdown] lang="en"
# ## Randomised positions: no new formula
#
# A model trained on up to $N$ tokens never sees the positions beyond $N - 1$ (for
# relative encodings, the distances). Ruoss et al. (2023) tie the failure on longer
# inputs to those unseen positions, and change the data, not the formula. A sequence
# of $n$ tokens gets as positions a sorted random subset of $n$ distinct numbers from
# $[0, L)$, with $L$ above any test length, in training and at test time alike.
# Every position below $L$ then eventually turns up in training. On 15 algorithmic
# tasks, the paper reports test accuracy on unseen lengths 12.0% higher on average
# (6000 encoder-only models). Small models on this site are in
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb).

# %% [markdown] lang="ja"
# ## ランダム化した位置：式は変えない
#
# 最長 $N$ トークンで学習したモデルは、$N - 1$ を超える位置（相対位置の手法では距離）を見ていません。
# Ruoss ら（2023）は、長い入力で失敗する原因をこうした未知の位置に求め、式ではなくデータを変えます。
# $n$ トークンの系列に、$[0, L)$ からランダムに選んだ互いに異なる $n$ 個の数を昇順に並べて位置として与えます。$L$ はどのテストの長さよりも大きくし、学習時とテスト時の両方でこの方法を使います。
# すると $L$ 未満の位置はどれも、いずれ学習に現れます。
# 論文は 15 のアルゴリズム系タスク（エンコーダのみのモデル 6000 個）で、未知の長さでの正解率が平均 12.0% 上がったと報告しています。
# 小さなモデルでの結果は[「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章にあります。

# %%
gen = torch.Generator().manual_seed(6)
random_positions(8, 2048, generator=gen)  # sorted, distinct, in [0, 2048)

# %% [markdown] lang="en"
# In short: the encoding stays as it is, only the positions it is given change; the
# one new choice is $L$, above every length the model will meet.

# %% [markdown] lang="ja"
# 要するに、エンコーディングはそのままで、与える位置だけが変わります。新たに決めるのは $L$ だけで、モデルが出会うどの長さよりも大きくします。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the law of the draws, and what the official code
# draws.** All subsets are equally
# likely, so the law follows by counting: the smallest position is at least $m$ when
# all $n$ lie in $[m, L)$,
# $$\Pr(\min \ge m) = \binom{L - m}{n} \Big/ \binom{L}{n}$$
# and the $k$-th smallest has mean $k(L + 1)/(n + 1) - 1$. The largest has mean
# $n(L + 1)/(n + 1) - 1$, $1998.02$ for $n = 40$ and $L = 2048$, and the mean gap
# between neighbours is $(L + 1)/(n + 1)$. With $L = 2048$ it is about $50$ for $n = 40$ and
# $20$ for $n = 100$, so the distances a relative encoding sees shift with the length.
#
# The paper gives each training example its own subset (its Figure 1); the
# official code draws anew at every forward call, at
# evaluation too, and shares each draw across the batch: one set per call for the
# absolute encodings (drawn at the embedding), one per attention layer for the
# relative, ALiBi and rotary variants (each layer takes its own
# `hk.next_rng_key()`). It draws with
# `jax.random.choice` without replacement and sorts, but what it draws depends on
# the encoding. For the sinusoidal, learned and rotary encodings
# (`noisy_fixed_positional_encodings` in `models/positional_encodings.py`) it draws
# $n$ positions from $[0, L)$. For the relative encoding of Transformer-XL
# (`compute_attention_with_noisy_relative_encodings`) and for ALiBi
# (`compute_noisy_alibi_encodings_biases`) it draws $n - 1$ distances from $[1, L)$,
# sorts them and puts them in place of the offsets $1, 2, \dots, n - 1$: the bias of
# a pair is still a function of its index offset $i - j$, not of a difference
# $p_i - p_j$ of random positions. The cited example script
# (`experiments/example.py`) uses the relative variant (`NOISY_RELATIVE` with
# `noise_max_length` 2048): an encoder trained on lengths 1 to 40, in batches of 128
# for 10 000 steps, and tested on lengths up to 100.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：選ばれる位置の分布と、公式実装が選ぶもの**
#
# どの部分集合も同じ確率なので、分布は数え上げで求まります。最小の位置が $m$ 以上になるのは、$n$ 個すべてが $[m, L)$ に入るときです。
# $$\Pr(\min \ge m) = \binom{L - m}{n} \Big/ \binom{L}{n}$$
# $k$ 番目に小さい位置の期待値は $k(L + 1)/(n + 1) - 1$ です。最大の位置の期待値は $n(L + 1)/(n + 1) - 1$ で、$n = 40$、$L = 2048$ なら $1998.02$ です。隣どうしの間隔の期待値は $(L + 1)/(n + 1)$ です。$L = 2048$ なら、$n = 40$ で約 $50$、$n = 100$ で約 $20$ なので、相対位置の手法が見る距離は長さとともに変わります。
#
# 論文は図 1 の説明で、学習用の例ごとに部分集合を与えるとしています。一方、公式実装はフォワードパスの呼び出しのたびに選び直し（評価のときも同じです）、選んだものをバッチ全体で共有します。
# 絶対位置のエンコーディングでは、埋め込みの段階で呼び出しごとに 1 組を選びます。相対位置、ALiBi、RoPE の版では、アテンションの層ごとに 1 組を選びます（各層が自分の `hk.next_rng_key()` を使います）。
# 公式実装は `jax.random.choice` で重複なしに選んで昇順に並べますが、何を選ぶかはエンコーディングによって違います。
# 正弦波位置エンコーディング、学習型位置埋め込み、RoPE（`models/positional_encodings.py` の `noisy_fixed_positional_encodings`）では、$[0, L)$ から $n$ 個の位置を選びます。
# Transformer-XL の相対位置のエンコーディング（`compute_attention_with_noisy_relative_encodings`）と ALiBi（`compute_noisy_alibi_encodings_biases`）では、$[1, L)$ から $n - 1$ 個の距離を選んで昇順に並べ、トークンの番号の差 $1, 2, \dots, n - 1$ の代わりに使います。
# そのため、クエリとキーの組のバイアスはやはり番号の差 $i - j$ の関数で、ランダムな位置の差 $p_i - p_j$ の関数ではありません。
# 引用した例のスクリプト（`experiments/example.py`）は相対位置の版（`NOISY_RELATIVE`、`noise_max_length` は 2048）を使います。
# エンコーダを長さ 1〜40 の系列で、バッチサイズ 128、10000 ステップ学習し、長さ 100 までの系列でテストします。

# %% tags=["deeper", "check"] summary={"en": "enumeration gives the laws exactly; random_positions(2, 6) draws the 15 subsets about equally often; the mean largest is 1998.02", "ja": "数え上げで分布が厳密に求まり、random_positions(2, 6) は 15 通りの部分集合をほぼ均等に選びます。最大の位置の期待値は 1998.02 です"}
import itertools
from collections import Counter
from fractions import Fraction

for n, L in ((2, 6), (3, 7), (4, 9)):  # every subset, exact fractions
    subsets = list(itertools.combinations(range(L), n))
    for m in range(L + 1):
        count = sum(min(s) >= m for s in subsets)
        law = Fraction(math.comb(L - m, n), math.comb(L, n))
        assert Fraction(count, len(subsets)) == law
    for k in range(1, n + 1):
        mean = Fraction(sum(s[k - 1] for s in subsets), len(subsets))
        assert mean == Fraction(k * (L + 1), n + 1) - 1
    gap = Fraction(sum(s[-1] - s[0] for s in subsets), len(subsets) * (n - 1))
    assert gap == Fraction(L + 1, n + 1)  # mean gap between neighbours

counts = Counter(
    tuple(random_positions(2, 6, generator=gen).tolist()) for _ in range(6000)
)
assert set(counts) == set(itertools.combinations(range(6), 2))
assert all(abs(c - 400) < 100 for c in counts.values())  # sd about 19

n, L = 40, 2048
largest = torch.tensor(
    [random_positions(n, L, generator=gen)[-1].item() for _ in range(2000)],
    dtype=f64,
)
mean_max = n * (L + 1) / (n + 1) - 1
assert f"{mean_max:.2f}" == "1998.02"  # the number in the text
example = random_positions(8, 2048, generator=gen)
assert (example.diff() > 0).all() and 0 <= example.min() < example.max() < 2048
se = largest.std() / math.sqrt(2000)  # an illustration, not a check
print(f"mean largest of 40 from 2048, 2000 draws: {largest.mean():.1f}", end="")
print(f" +- {se:.1f} (exact {mean_max:.2f})")


# %% tags=["deeper", "check"] summary={"en": "the official ALiBi variant, restated with one head of slope 1, is a function of i − j whose offsets 1 to 7 get the drawn distances, all in [1, L); a bias −|p_i − p_j| of random positions is not a function of i − j", "ja": "傾き 1 のヘッド 1 つで書き直した公式実装の ALiBi の版は i − j の関数で、番号の差 1〜7 には [1, L) から選んだ距離が入ります。ランダムな位置によるバイアス −|p_i − p_j| は i − j の関数ではありません"}
def rel_shift(row, n):
    """_rel_shift_inner of a row of 2n tiled to [n, 2n], restated."""
    x = row.expand(n, 2 * n).reshape(2 * n, n)[1:].reshape(n, 2 * n - 1)
    return x[:, :n]


def noisy_alibi(n, L, gen):
    """compute_noisy_alibi_encodings_biases, one head of slope 1, restated."""
    d = (torch.randperm(L - 1, generator=gen)[: n - 1] + 1).sort().values
    right = -d.double()  # choice from arange(1, L), sorted, negated
    left = right.flip(0) + 0.5  # the code's 0.5 tells left from right
    zero = torch.zeros(1, dtype=f64)  # (the first entry is a dummy)
    return rel_shift(torch.cat([zero, left, zero, right]), n), d


# the example in the docstring of _rel_shift_inner
shifted = rel_shift(torch.arange(-3.0, 3.0), 3)
assert shifted.tolist() == [[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]
bias, d = noisy_alibi(8, 2048, gen)
assert 1 <= d.min() and d.max() < 2048
assert_close(bias[1:, 1:], bias[:-1, :-1])  # a function of i - j
assert_close(bias[0, 1:], -d.double())  # offsets 1..7 -> drawn distances
p = random_positions(8, 2048, generator=gen).double()
by_positions = -(p[:, None] - p[None, :]).abs()
assert not torch.allclose(by_positions[1:, 1:], by_positions[:-1, :-1])

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the four families side by side.** Each panel shows one family's bias
# against the distance $i - j$, as built in this chapter (none trained on text).
# KERPLE draws one curve for every query; FIRE, beyond its threshold, one per query.
# CoPE's $40$ lands 5 to 6 tokens back in A and 7 to 8 in B. The last panel is one
# ALiBi head ($m = 1/16$) with distances drawn as in the official code of randomised
# positions: in training, its line spreads over distances up to $L$, so a longer test
# input meets no new one.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：4 つの手法を並べる**
#
# 各パネルは、この章で作った各手法のバイアスを距離 $i - j$ に対して描いたものです（テキストでは学習していません）。
# KERPLE はどのクエリでも同じ 1 本の曲線で、しきい値を超えた FIRE はクエリごとに違う曲線です。CoPE のヘッドが足す $40$ は、A では 5〜6 トークン前、B では 7〜8 トークン前に現れます。
# 最後のパネルは ALiBi のヘッド（$m = 1/16$）で、距離はランダム化した位置の公式実装と同じ方法で選びます。学習中に直線が $L$ までの距離で使われるので、長いテスト入力にも未知の距離は現れません。

# %% tags=["deeper", "figure"] alt={"en": ["Four panels of bias against the distance i − j. KERPLE: the log kernel and the power 0.5 both fall steeply near 0 and then flatten, one curve each for all queries. FIRE at initialisation, L = 64: three curves for the queries at 64, 256 and 1024 that differ from each other, since beyond the threshold the same distance gets another input. CoPE: the sentence-counting head adds 40 on the third sentence back, at distances 5 to 6 in input A and 7 to 8 in input B, and 0 elsewhere. Randomised positions: ALiBi's line over offsets 0 to 39, and two draws in which the same offsets get distances up to about 2000, so the bias falls to about −125."], "ja": ["距離 i − j に対するバイアスを描いた 4 つのパネルです。KERPLE：対数の形と 0.5 乗は、どちらも 0 の近くで急に下がってから平らになり、どのクエリでも同じ 1 本の曲線です。初期状態の FIRE（L = 64）：位置 64、256、1024 のクエリの 3 本の曲線は互いに違います。しきい値を超えると、同じ距離でも MLP の引数が変わるからです。CoPE：文を数えるヘッドは 3 つ前の文に 40 を足します。入力 A では距離 5〜6、入力 B では 7〜8 で、ほかでは 0 です。ランダム化した位置：番号の差 0〜39 での ALiBi の直線と、ランダムに 2 回選んだ距離で描いた曲線です。これらでは同じ番号の差に約 2000 までの距離が入るので、バイアスは約 −125 まで下がります。"]}
dist = torch.arange(129, dtype=f64)
with torch.no_grad():
    fire_rows = fire(1025)[0]  # head 0, [query, key]
    cope_bias = pair_logits - gate_scores[:, 0, 0]  # q . e[p], [2, keys]
draw_gen = torch.Generator().manual_seed(11)
fig, axes = plt.subplots(1, 4, figsize=(7.2, 2.4))
axes[0].plot(dist, -2 * torch.log1p(0.5 * dist), label="log")
axes[0].plot(dist, -0.5 * dist**0.5, label="power")
for i in (64, 256, 1024):  # FIRE: one curve per query position
    near = dist[dist <= i].long()  # the causal keys only
    axes[1].plot(near, fire_rows[i, i - near], label=f"$i = {i}$")
for row, name in enumerate("AB"):  # CoPE: the bias by token distance
    real = pair[row] >= 0
    axes[2].step(back[real], cope_bias[row][real], where="mid", label=name)
offsets = torch.arange(40)
axes[3].plot(offsets, -offsets / 16, color=INK, label="ALiBi")
for _ in range(2):  # offsets 1..39 get sorted distances drawn from [1, 2048)
    drawn = (torch.randperm(2047, generator=draw_gen)[:39] + 1).sort().values
    axes[3].plot(offsets, -torch.cat([torch.zeros(1), drawn]) / 16, lw=1)
titles = ("KERPLE", "FIRE", "CoPE", "randomised")
for ax, title in zip(axes, titles, strict=True):
    ax.set(title=title, xlabel="$i - j$")
    ax.legend(fontsize=7)
axes[0].set_ylabel("$b(i, j)$")
plt.show()

# %% tags=["deeper", "check"] summary={"en": "the CoPE head adds 40 on the third sentence back (distances 5 to 6 in A, 7 to 8 in B) and 0 at every other distance; FIRE's three rows differ at distance 8; the drawn distances lie in [1, 2048)", "ja": "CoPE のヘッドは 3 つ前の文に 40 を足し（A では距離 5〜6、B では 7〜8）、ほかのどの距離でも 0 です。FIRE の 3 つの行は距離 8 で異なり、選んだ距離は [1, 2048) にあります"}
for row, target in ((0, [5, 6]), (1, [7, 8])):  # "w !": the third sentence back
    real = pair[row].flip(0) >= 0  # the keys by distance 0, 1, ...; no padding
    at_dist = cope_bias[row].flip(0)[real]
    want = torch.zeros_like(at_dist)
    want[target] = 40.0
    assert (at_dist - want).abs().max() < 1e-3  # the whole row
at8 = fire_rows[[64, 256, 1024], [56, 248, 1016]]  # distance 8
assert (at8[1:] - at8[:-1]).abs().min() > 0
assert 1 <= drawn.min() and drawn.max() < 2048

# %% [markdown] lang="en"
# ## What each family costs: KV caches and fused kernels
#
# In a [decode step](../docs/glossary.md#decode-step) with a KV cache, one new query
# meets $k$ cached keys: what does the bias of that one row need? A fused attention
# kernel (FlashAttention and its relatives) never
# [materialises](../docs/glossary.md#materialise) the $q \times k$ scores. A bias fits
# in only if the kernel can compute each entry from what it holds, as FlexAttention's
# `score_mod(score, batch, head, q_idx, kv_idx)` makes explicit. Otherwise a dense
# $[h, q, k]$ bias must be read from memory: 64 GiB per sequence and layer call for 32
# heads and 32768 tokens in bfloat16. One value per head and distance, in both
# directions, takes 4 MiB (2 MiB for a causal decoder).
#
# | family | the bias depends on | a decode step needs | in a fused kernel |
# |---|---|---|---|
# | T5 | the bucket of $i - j$ | $k$ table lookups per head | a lookup from the indices |
# | ALiBi, KERPLE | $i - j$, in closed form | $k$ values per head | computed from the indices |
# | x-transformers' dynamic position bias (an MLP of $i - j$, like FIRE's); FIRE for $i \le L$ | $i - j$, through an MLP | one MLP evaluation (if the table is kept) | a table of $2k - 1$ values read by index |
# | FIRE for $i > L$ | $i - j$ and $i$ | $k$ new MLP evaluations | the MLP per score, or a dense bias |
# | CoPE | every score from $j$ to $i$ | $k$ gates, their sums, $P$ position logits per head | not a `score_mod`: the row's scores come first |
#
# At each decode step CoPE's cached keys move by different amounts: nothing
# positional can be cached.

# %% [markdown] lang="ja"
# ## 手法ごとのコスト：KV キャッシュと融合カーネル
#
# KV キャッシュを使う[デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)では、新しいクエリ 1 つをキャッシュ済みの $k$ 個のキーに対して計算します。この 1 行のバイアスに何が要るでしょうか。
# 融合アテンションカーネル（FlashAttention など）は $q \times k$ のスコアを[実体化](../docs/glossary.ja.md#materialise)しません。組み込めるのは、各成分を手元の情報から計算できるバイアスだけです。FlexAttention の `score_mod(score, batch, head, q_idx, kv_idx)` はこの条件を明示しています。
# そうでないバイアスは、$[h, q, k]$ の密な形でメモリから読む必要があります。32 ヘッド、32768 トークンの bfloat16 では、このバイアスは 1 系列、1 層の呼び出しあたり 64 GiB です。ヘッドと距離ごとに値を 1 つ持つだけなら、両方向で 4 MiB（因果的なデコーダなら 2 MiB）で済みます。
#
# | 手法 | バイアスが依存するもの | デコードの 1 ステップに必要なもの | 融合カーネルでは |
# |---|---|---|---|
# | T5 | $i - j$ のバケット | ヘッドごとに表引き $k$ 回 | インデックスで表引き |
# | ALiBi、KERPLE | $i - j$（閉形式） | ヘッドごとに $k$ 個の値 | インデックスから計算 |
# | x-transformers の動的位置バイアス（FIRE と同じく $i - j$ の MLP）、$i \le L$ の FIRE | $i - j$（MLP を通す） | MLP の評価 1 回（表を保持すれば） | $2k - 1$ 個の値の表を参照 |
# | $i > L$ の FIRE | $i - j$ と $i$ | MLP の新たな評価 $k$ 回 | スコアごとに MLP か、密なバイアス |
# | CoPE | $j$ から $i$ までのすべてのスコア | ヘッドごとにゲート $k$ 個とその和、位置のスコア $P$ 個 | `score_mod` では不可（行のスコアが先に必要） |
#
# CoPE では、デコードの 1 ステップごとにキャッシュ済みのキーの位置がそれぞれ違う量だけ動くので、位置に関するものは何もキャッシュできません。

# %% tags=["check"] summary={"en": "64 GiB against 4 MiB (2 MiB causal); KerpleBias.score_mod, run by flex_attention for 3 queries on 10 keys, matches the dense bias; beyond L, FIRE's next query shares only the argument 0; CoPE's bias depends on later scores", "ja": "密なバイアスは 64 GiB、距離ごとなら 4 MiB（因果的なら 2 MiB）です。KerpleBias.score_mod を flex_attention でクエリ 3 個、キー 10 個に使うと、密なバイアスと一致します。L を超えると、FIRE の次のクエリの引数のうち前のクエリと共通するのは値 0（距離 0）だけです。CoPE のバイアスは後ろのスコアに依存します"}
GiB, MiB = 2**30, 2**20
assert 32 * 32768**2 * 2 == 64 * GiB  # dense [h, q, k] bias, bfloat16
assert 32 * (2 * 32768 - 1) * 2 < 4 * MiB  # one value per head and distance
assert 32 * 32768 * 2 == 2 * MiB  # causal: the distances 0 .. 32767 only

torch.manual_seed(7)
kerple = KerpleBias(4, kind="log")
q_len, k_len = 3, 10  # 3 new queries, at positions 7..9, on 10 cached keys
q, k, v = torch.randn(2, 4, q_len, 8), *torch.randn(2, 2, 4, k_len, 8)
dense = (q @ k.transpose(-1, -2) / math.sqrt(8) + kerple(q_len, k_len)).detach()
with torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")  # eager on the CPU: unfused, same values
    # flex_attention passes q_idx = 0..q_len-1; score_mod adds k_len - q_len
    out = flex_attention(q, k, v, score_mod=kerple.score_mod(q_len, k_len))
assert_close(out, dense.softmax(-1) @ v)

L = 64
fire64 = FireBias(4, threshold=float(L)).double()  # float64 copy of fire
fire64.load_state_dict(fire.state_dict())
with torch.no_grad():  # FIRE, L = 64: which arguments reappear one step later
    x = fire64.normalized_distance(300)
before, after = set(x[40, :41].tolist()), set(x[41, :42].tolist())
assert len(after - before) == 1  # below L: one new distance
before, after = set(x[200, :201].tolist()), set(x[201, :202].tolist())
assert sorted(after & before) == [0.0]  # beyond L: only distance 0
# the first key's arguments at 200 and 201, psi(i)/(psi(i) + 1e-6), differ
# by less than 1e-9: float32 rounds both to one number, so work in float64
assert 0 < x[201, 0] - x[200, 0] < 1e-9
with torch.no_grad():
    x32 = fire.normalized_distance(300)
assert x32[201, 0] == x32[200, 0]

torch.manual_seed(8)
cope = CoPE(8, 1, max_positions=16)
torch.nn.init.normal_(cope.pos_emb)
q, k = torch.randn(2, 1, 1, 10, 8).unbind(0)
row = (q[..., -1:, :] @ k.transpose(-1, -2))[0, 0, 0] / math.sqrt(8)  # [10]
jac = torch.autograd.functional.jacobian(
    lambda s: cope(q[..., -1:, :], s[None, None, None])[0, 0, 0], row
)
above = torch.ones(10, 10, dtype=torch.bool).triu(1)
assert (jac[above].abs() > 0).all()  # bias_j depends on the scores t > j
assert (jac[~above & ~torch.eye(10, dtype=torch.bool)] == 0).all()

full = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(
    torch.ones(10, 10).triu(1) == 1, -math.inf
)
positions = cope.positions(full)[0, 0]  # [query, key]
shift = positions[9, :9] - positions[8, :9]  # step 8 -> 9, cached keys 0..8
assert shift.max() - shift.min() > 0.1  # not one common shift
print("CoPE, cached keys 0..8 move by", [round(v, 2) for v in shift.tolist()])

# %% [markdown] lang="en"
# ## What to remember
#
# - KERPLE gives each head a curve with two learned numbers in place of ALiBi's line:
#   $-r_1 \lvert i - j \rvert^{r_2}$ with $0 < r_2 \le 2$, or
#   $-r_1 \log(1 + r_2 \lvert i - j \rvert)$. Its design rule, CPD kernels, says which
#   curves it allows.
# - FIRE learns the whole curve with a small MLP of the distance divided by the
#   query's position. Trained past its threshold, it meets no new input on longer
#   inputs, but the same distance gets a different input as the query moves on.
# - CoPE counts what a head's gates let through instead of tokens. A head that counts
#   end marks finds the third sentence back on every test input; a single head with a
#   bias by token distance, whose content scores treat all end marks alike, cannot
#   answer both of two short inputs.
# - Randomised positions keep the formula and train with sorted random positions from
#   $[0, L)$, so every position below $L$ eventually turns up in training.
# - A bias computed from the head and $i - j$ alone (T5, ALiBi, KERPLE) fits a KV cache
#   and a fused kernel; FIRE beyond its threshold needs its MLP for every query-key
#   pair, and CoPE needs the whole row of scores first.

# %% [markdown] lang="ja"
# ## まとめ
#
# - KERPLE は ALiBi の直線の代わりに、2 つの学習可能なパラメータを持つ曲線 $-r_1 \lvert i - j \rvert^{r_2}$（$0 < r_2 \le 2$）または $-r_1 \log(1 + r_2 \lvert i - j \rvert)$ を各ヘッドに与えます。KERPLE の設計上の条件は、バイアスが条件付き正定値カーネルであることで、使える曲線はこの条件で決まります。
# - FIRE は、距離をクエリの位置で割った値を読む小さな MLP で、曲線そのものを学習します。しきい値より長い入力で学習すれば、長い入力でも新しい引数は現れません。ただし、同じ距離の引数はクエリとともに変わります。
# - CoPE はトークンの代わりに、ヘッドのゲートが通したものを数えます。文末の記号を数えるヘッドは、テストしたどの入力でも 3 つ前の文を見つけます。内容のスコアがどの文末の記号も同じに扱うなら、トークンの距離によるバイアスを持つヘッド 1 つでは、短い入力 A と B の両方には正しく答えられません。
# - ランダム化した位置は式を変えず、$[0, L)$ から選んだランダムな位置を昇順に並べて学習します。$L$ 未満の位置はすべて、いずれ学習中に現れます。
# - ヘッドと $i - j$ だけで決まるバイアス（T5、ALiBi、KERPLE）は KV キャッシュと融合カーネルで扱えます。しきい値を超えた FIRE はクエリとキーの組ごとに MLP を評価する必要があり、CoPE は行全体のスコアを先に求める必要があります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Show with the three positions $0, 1, 2$ and $c = (1, -2, 1)$ that
#    $-\lvert i - j \rvert^p$ is not conditionally positive definite for any
#    $p > 2$: compute $\sum_{a,b} c_a c_b (-\lvert a - b \rvert^p)$ in closed form.
# 2. Show that FIRE with a threshold $L$ at least the largest query position is
#    a function of the distance alone, and find the function $f$ on $[0, 1]$ for
#    which it is ALiBi's bias. What goes wrong for the queries beyond $L$ when
#    $L$ is smaller?
# 3. With all gates open, which table $e[n]$ makes CoPE's bias equal to ALiBi's
#    $-m_h\,(i - j)$? What must the query contain, and what happens at distances
#    beyond $P - 2$?
# 4. Training on $n = 40$ tokens with positions from $[0, 2048)$: after how many
#    training sequences does the expected number of positions never drawn fall
#    below 1?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 3 つの位置 $0, 1, 2$ と $c = (1, -2, 1)$ で $\sum_{a,b} c_a c_b (-\lvert a - b \rvert^p)$ を閉形式で求め、$p > 2$ なら $-\lvert i - j \rvert^p$ は条件付き正定値でないことを示してください。
# 2. しきい値 $L$ がクエリの最大の位置以上なら FIRE は距離だけの関数になることを示し、それが ALiBi のバイアスになる $[0, 1]$ 上の関数 $f$ を求めてください。
#    $L$ がそれより小さいと、$L$ を超えたクエリで何が起きるでしょうか。
# 3. ゲートがすべて開いているとき、CoPE のバイアスを ALiBi の $-m_h\,(i - j)$ に等しくする表 $e[n]$ は何でしょうか。
#    クエリは何を含む必要があり、距離が $P - 2$ を超えると何が起きるでしょうか。
# 4. $n = 40$ トークンの系列に $[0, 2048)$ から位置を選んで学習するとき、一度も選ばれない位置の数の期待値は、学習系列がいくつになると 1 を下回るでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Only the pairs with $a \ne b$ contribute, each twice:
# $(0, 1)$ and $(1, 2)$ with $c_a c_b = -2$ and $\lvert a - b \rvert^p = 1$, and
# $(0, 2)$ with $c_a c_b = 1$ and $\lvert a - b \rvert^p = 2^p$. So
# $$\sum_{a,b} c_a c_b \left(-\lvert a - b \rvert^p\right) = -\left(2 \cdot (-2) + 2 \cdot (-2) + 2 \cdot 2^p\right) = 8 - 2^{p+1}$$
# which is negative exactly when $p > 2$, and $0$ at $p = 2$. Since
# $\sum_a c_a = 0$, a negative value contradicts the definition, so no power
# above 2 is CPD, on any set of positions that contains three equally spaced
# ones.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 寄与するのは $a \ne b$ の組だけで、それぞれ 2 回現れます。
# $(0, 1)$ と $(1, 2)$ は $c_a c_b = -2$、$\lvert a - b \rvert^p = 1$ で、$(0, 2)$ は $c_a c_b = 1$、$\lvert a - b \rvert^p = 2^p$ です。したがって次のようになります。
# $$\sum_{a,b} c_a c_b \left(-\lvert a - b \rvert^p\right) = -\left(2 \cdot (-2) + 2 \cdot (-2) + 2 \cdot 2^p\right) = 8 - 2^{p+1}$$
# これが負になるのは $p > 2$ のとき、かつそのときに限ります。$p = 2$ では $0$ です。
# $\sum_a c_a = 0$ なので、負の値は定義に反します。
# このため、等間隔に並ぶ 3 つの位置を含む集合の上では、2 より大きいべき乗は条件付き正定値になりません。

# %% tags=["solution"]
c = torch.tensor([1.0, -2.0, 1.0], dtype=f64)
D3 = distances(3)
for p in (1.0, 1.5, 2.0, 2.1, 3.0):
    form = (c @ -(D3**p) @ c).item()
    assert math.isclose(form, 8 - 2 ** (p + 1), abs_tol=1e-12)
    assert (form < -1e-12) == (p > 2) == (cpd_min_eig(-(D3**p)) < -1e-12)
print(f"p = 3: {(c @ -(D3**3) @ c).item():g} = 8 - 2**4")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** If $L \ge i$ for every query, then $\max(L, i) = L$ and the
# argument is $x = \psi(i - j)/\psi(L)$: the same for every pair at the same
# distance, so the bias is a function of the distance. Inverting,
# $i - j = \psi^{-1}(x\,\psi(L)) = (e^{x \psi(L)} - 1)/c$, so
# $$f(x) = -\frac{m_h}{c}\left(e^{x\,\psi(L)} - 1\right)$$
# gives $-m_h\,(i - j)$. It is continuous on $[0, 1]$, so a ReLU MLP with enough
# hidden units approximates it as closely as wanted; $f$ itself (with the
# pseudo-code's $10^{-6}$ in the normaliser) reproduces `alibi_bias`. With $L$
# smaller than the query position, the queries beyond $L$ divide by $\psi(i)$
# instead, the same $f$ maps their arguments to the wrong distances, and the bias
# is no longer ALiBi's, as with $L = 16$ below.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** すべてのクエリで $L \ge i$ なら $\max(L, i) = L$ なので、引数は $x = \psi(i - j)/\psi(L)$ です。
# 同じ距離にある組ではどれも同じ値になるので、バイアスは距離の関数です。
# 逆関数を使って解くと $i - j = \psi^{-1}(x\,\psi(L)) = (e^{x \psi(L)} - 1)/c$ なので、次の関数が $-m_h\,(i - j)$ を与えます。
# $$f(x) = -\frac{m_h}{c}\left(e^{x\,\psi(L)} - 1\right)$$
# これは $[0, 1]$ 上で連続なので、隠れユニットが十分に多い ReLU の MLP で、いくらでもよく近似できます。
# $f$ そのもの（正規化の分母には疑似コードの $10^{-6}$ を含めます）は `alibi_bias` を再現します。
# $L$ がクエリの位置より小さいと、$L$ を超えたクエリは代わりに $\psi(i)$ で割ります。すると同じ $f$ が引数を誤った距離に写すので、バイアスはもう ALiBi のものではなくなります。
# 下の $L = 16$ がその例です。

# %% tags=["solution"]
T, heads = 40, 8
m = alibi_slopes(heads, dtype=f64)[:, None, None]
causal = torch.ones(T, T, dtype=torch.bool).tril()
for threshold, equal in ((float(T), True), (16.0, False)):
    fire_t = FireBias(heads, threshold=threshold)  # c = 0.1
    with torch.no_grad():
        x = fire_t.normalized_distance(T).double()
    normaliser = math.log(0.1 * threshold + 1) + 1e-6
    f_of_x = -m / 0.1 * torch.expm1(x * normaliser)  # f(x), per head
    alibi = alibi_bias(heads, T, dtype=f64)
    same = torch.allclose(f_of_x[:, causal], alibi[:, causal], atol=1e-9)
    assert same == equal
print("L = T: FIRE's f(x) gives ALiBi's bias; L = 16: it does not")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With all gates $1$, $p_{ij} = i - j + 1$ (clamped to $P - 1$), so
# the bias is $q_i \cdot e[i - j + 1]$. Take $e[n] = -m_h\,(n - 1)\, u$ for a unit
# vector $u$, and a query whose component along $u$ is $1$ for every token (a
# constant feature, which a learned projection can produce from a bias term or
# a constant direction of the input): then $q_i \cdot e[p_{ij}] = -m_h\,(i - j)$.
# Beyond distance $P - 2$, $p_{ij}$ is clamped to $P - 1$ and the bias stays at
# $-m_h\,(P - 2)$, like T5's last bucket (below with $P = 16$).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** ゲートがすべて $1$ なら $p_{ij} = i - j + 1$（$P - 1$ でクリップ）なので、バイアスは $q_i \cdot e[i - j + 1]$ です。
# 単位ベクトル $u$ を使って $e[n] = -m_h\,(n - 1)\, u$ とします。クエリの $u$ 方向の成分は、どのトークンでも $1$ とします。
# すると $q_i \cdot e[p_{ij}] = -m_h\,(i - j)$ となります。
# このような一定の成分は、学習可能な射影ならバイアス項や入力の一定の方向から作れます。
# 距離が $P - 2$ を超えると $p_{ij}$ は $P - 1$ にクリップされ、バイアスは T5 の最後のバケットのように $-m_h\,(P - 2)$ のままです。
# 下では $P = 16$ でこれを作ります。

# %% tags=["solution"]
P, T, dim, slope = 16, 24, 4, 0.25
alibi_head = CoPE(dim, 1, max_positions=P)
with torch.no_grad():
    alibi_head.pos_emb.zero_()
    alibi_head.pos_emb[:, 0] = -slope * (torch.arange(P) - 1.0)  # u = e_0
torch.manual_seed(9)
q = torch.randn(1, 1, T, dim)
q[..., 0] = 1.0  # the constant feature
causal = torch.ones(T, T, dtype=torch.bool).tril()
open_gates = torch.full((1, 1, T, T), 40.0).masked_fill(~causal, -math.inf)
with torch.no_grad():
    bias = alibi_head(q, open_gates)[0, 0]
dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
near = causal & (dist <= P - 2)
assert_close(bias[near], -slope * dist[near].float())  # ALiBi's line
assert_close(bias[causal & ~near], torch.full_like(bias[causal & ~near], -3.5))
assert_close(bias[near], alibi_bias(4, T)[0][near])  # head 1 of 4: m = 1/4
print("beyond distance 14 the bias stays at", -slope * (P - 2))

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** A given position is in one draw with probability $n/L$ (every
# subset is equally likely, and $\binom{L-1}{n-1}/\binom{L}{n} = n/L$). Draws are
# independent, so it is missing from $S$ sequences with probability
# $(1 - n/L)^S$, and by linearity of expectation the number of positions never
# drawn has mean $L\,(1 - n/L)^S$. This falls below 1 when
# $S > \ln L / (-\ln(1 - n/L)) = 386.6$, so after 387 draws of 40 positions. (The
# official example script draws a length from 1 to 40 at each step, so there the
# positions are covered later.)

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** ある位置が 1 回の選択に含まれる確率は $n/L$ です（どの部分集合も同じ確率で選ばれ、$\binom{L-1}{n-1}/\binom{L}{n} = n/L$ だからです）。
# 選択は互いに独立なので、$S$ 個の系列のどれにも含まれない確率は $(1 - n/L)^S$ です。
# 期待値の線形性から、一度も選ばれない位置の数の期待値は $L\,(1 - n/L)^S$ になります。
# これが 1 を下回るのは $S > \ln L / (-\ln(1 - n/L)) = 386.6$ のときです。つまり、40 個の位置を 387 回選んだところで、この期待値が 1 を下回ります。
# なお、公式実装の例のスクリプトはステップごとに長さを 1〜40 から選ぶので、そこではすべての位置がそろうのはもっと後になります。

# %% tags=["solution"]
n, L = 40, 2048
assert math.isclose(math.comb(L - 1, n - 1) / math.comb(L, n), n / L)
S = math.ceil(math.log(L) / -math.log(1 - n / L))
assert S == 387 and L * (1 - n / L) ** S < 1 <= L * (1 - n / L) ** (S - 1)
expected = L * (1 - n / L) ** S
gen = torch.Generator().manual_seed(10)
unseen = []
for _ in range(20):
    seen = torch.zeros(L, dtype=torch.bool)
    for _draw in range(S):
        seen[random_positions(n, L, generator=gen)] = True
    unseen.append((~seen).sum().item())
mean_unseen = sum(unseen) / len(unseen)
for n_, L_, S_ in ((2, 4, 2), (2, 5, 3), (1, 3, 3)):  # every draw sequence
    subsets = list(itertools.combinations(range(L_), n_))
    runs = list(itertools.product(subsets, repeat=S_))
    total = sum(L_ - len(set().union(*run)) for run in runs)
    assert Fraction(total, len(runs)) == L_ * Fraction(L_ - n_, L_) ** S_
se = torch.tensor(unseen, dtype=f64).std().item() / math.sqrt(20)
print(f"S = {S}: expected {expected:.3f} unseen, ", end="")
print(f"simulated {mean_unseen:.2f} +- {se:.2f} (20 runs)")

# %% [markdown] lang="en"
# ## Sources and versions
#
# Each formula is checked against a transcription of the official code (named in the
# fold where it is used), a number or statement of the paper, or a second
# derivation. x-transformers is read in version 2.26.4. FlashAttention's CUDA kernels
# take ALiBi and no other bias; PyTorch's memory-efficient SDPA and xFormers read a
# dense one.
#
# ### References
#
# - Chi, T.-C. et al. (2022). *KERPLE: Kernelized Relative Positional Embedding for
#   Length Extrapolation*. NeurIPS 2022. <https://arxiv.org/abs/2205.09921>; code
#   <https://github.com/chijames/KERPLE>
# - Schölkopf, B. (2000). *The Kernel Trick for Distances*. NeurIPS 13.
#   <https://proceedings.neurips.cc/paper/2000/hash/4e87337f366f72daa424dae11df0538c-Abstract.html>
# - Berg, C., Christensen, J. P. R., Ressel, P. (1984). *Harmonic Analysis on
#   Semigroups*. Springer.
# - Li, S. et al. (2024). *Functional Interpolation for Relative Positions Improves
#   Long Context Transformers*. ICLR 2024 (arXiv 2023; pseudo-code in its appendix).
#   <https://arxiv.org/abs/2310.04418>
# - Golovneva, O. et al. (2024). *Contextual Position Encoding: Learning to Count
#   What's Important*. <https://arxiv.org/abs/2405.18719>; code
#   <https://github.com/facebookresearch/RAM/tree/main/projects/cope>
# - Ruoss, A. et al. (2023). *Randomized Positional Encodings Boost Length
#   Generalization of Transformers*. ACL 2023. <https://arxiv.org/abs/2305.16843>;
#   code <https://github.com/google-deepmind/randomized_positional_encodings>
# - x-transformers. <https://github.com/lucidrains/x-transformers>; FlexAttention.
#   <https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html>;
#   FlashAttention. <https://github.com/Dao-AILab/flash-attention>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# どの式も、公式実装を書き直したコード、論文の数値や記述、別の導出のいずれかと照合しています。書き直した実装の名前は、それを使う「確認」や「さらに詳しく」にあります。x-transformers はバージョン 2.26.4 を参照しました。
# FlashAttention の CUDA カーネルが受け付けるバイアスは ALiBi だけです。PyTorch の SDPA（memory-efficient attention）や xFormers は、密なバイアスをメモリから読んで使います。
#
# ### 参考文献
#
# - Chi, T.-C. et al. (2022). *KERPLE: Kernelized Relative Positional Embedding for
#   Length Extrapolation*. NeurIPS 2022. <https://arxiv.org/abs/2205.09921>
#   （コード：<https://github.com/chijames/KERPLE>）
# - Schölkopf, B. (2000). *The Kernel Trick for Distances*. NeurIPS 13.
#   <https://proceedings.neurips.cc/paper/2000/hash/4e87337f366f72daa424dae11df0538c-Abstract.html>
# - Berg, C., Christensen, J. P. R., Ressel, P. (1984). *Harmonic Analysis on
#   Semigroups*. Springer.
# - Li, S. et al. (2024). *Functional Interpolation for Relative Positions Improves
#   Long Context Transformers*. ICLR 2024（arXiv 版は 2023 年、付録に疑似コード）。
#   <https://arxiv.org/abs/2310.04418>
# - Golovneva, O. et al. (2024). *Contextual Position Encoding: Learning to Count
#   What's Important*. <https://arxiv.org/abs/2405.18719>
#   （コード：<https://github.com/facebookresearch/RAM/tree/main/projects/cope>）
# - Ruoss, A. et al. (2023). *Randomized Positional Encodings Boost Length
#   Generalization of Transformers*. ACL 2023. <https://arxiv.org/abs/2305.16843>
#   （コード：<https://github.com/google-deepmind/randomized_positional_encodings>）
# - x-transformers：<https://github.com/lucidrains/x-transformers>、FlexAttention：
#   <https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html>、
#   FlashAttention：<https://github.com/Dao-AILab/flash-attention>
