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
# # xPos and NoPE
#
# Two opposite answers to how much positional machinery a causal language model
# needs. xPos keeps RoPE's rotation and scales each rotated pair so that the score
# gains a factor that decays with the distance; NoPE uses no encoding at all, and a
# decoder still finds positions, because the
# [causal mask](../docs/glossary.md#causal-mask) lets its first layer count the tokens
# before it. Both rely on the mask, and both reach only so far: xPos blurs far
# tokens, and NoPE counts only as far as the network's size and its number format
# allow.

# %% [markdown] lang="ja"
# # xPos と NoPE
#
# 因果的な言語モデルに、位置の仕組みはどれだけ必要でしょうか。この章では正反対の 2 つの答えを見ます。
# xPos は RoPE の回転をそのまま使い、回転したペアに倍率を掛けて、スコアに距離とともに減衰する因子が掛かるようにします。
# NoPE は位置エンコーディングをまったく使いませんが、それでもデコーダは位置を知ることができます。
# [因果マスク](../docs/glossary.ja.md#causal-mask)のおかげで、最初の層が自分より前のトークンを数えられるからです。
# どちらも因果マスクに頼り、届く範囲に限りがあります。
# xPos では遠いトークンがぼやけ、NoPE が数えられるのはネットワークの規模と数値の形式が許す範囲までです。

# %% tags=["setup"]
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import apply_rope, attention, rope_frequencies
from posenc.xpos import apply_xpos, xpos_scale, xpos_zeta
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64


def fmt(values, digits=4):
    return ", ".join(f"{v:.{digits}f}" for v in values.tolist())


# %% [markdown] lang="en"
# ## From RoPE to xPos: a decay per pair
#
# RoPE (the chapter [*Rotary position embedding (RoPE)*](08-rope.ipynb)) turns pair
# $i$ of the query at position $m$ by $m\theta_i$ and of the key at position $n$ by
# $n\theta_i$, with $\theta_i = 10000^{-2i/d}$. Write $q^{(i)} \in \mathbb{R}^2$ for pair
# $i$ of $q$ and $R(\phi)$ for the rotation by the angle $\phi$. xPos (Sun et al. 2022)
# keeps these rotations and also scales every rotated pair by a power of a number
# $\zeta_i$ between 0 and 1, with a positive exponent for the query and a negative
# one for the key:
# $$\zeta_i = \frac{2i/d + \gamma}{1 + \gamma}, \qquad i = 0, \dots, d/2 - 1$$
# $$\tilde q_m^{(i)} = \zeta_i^{m/B}\, R(m\theta_i)\, q^{(i)}, \qquad \tilde k_n^{(i)} = \zeta_i^{-n/B}\, R(n\theta_i)\, k^{(i)}$$
# The bases grow with $i$ from $\zeta_0 = \gamma/(1+\gamma)$ to just below 1: the
# fastest-turning pair gets the smallest base. The
# [scale base](../docs/glossary.md#scale-base) $B$ keeps the powers in range: with
# $B = 1$, the key's factor $\zeta_0^{-n} = 3.5^n$ would overflow float16 at $n = 9$
# and the query's $\zeta_0^n$ reach 0 at $n = 14$. The paper writes $B = 1$ and
# gives no value of $\gamma$; this chapter uses torchscale's values, $\gamma = 0.4$
# (so $\zeta_0 = 2/7$) and $B = 512$. In `posenc`, `xpos_zeta(d)`
# returns the $\zeta_i$, `xpos_scale(d, p)` returns $\zeta_i^{p/B}$, and
# `apply_xpos(q, k, m, n)` returns $(\tilde q_m, \tilde k_n)$, built on `apply_rope`,
# in either pairing.

# %% [markdown] lang="ja"
# ## RoPE から xPos へ：ペアごとの減衰
#
# RoPE（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章）は、位置 $m$ のクエリと位置 $n$ のキーのペア $i$ を、
# それぞれ $m\theta_i$ と $n\theta_i$ だけ回します（$\theta_i = 10000^{-2i/d}$）。
# $q$ のペア $i$ を $q^{(i)} \in \mathbb{R}^2$、角度 $\phi$ の回転を $R(\phi)$ と書きます。
# xPos（Sun ら 2022）はこの回転に加えて、回転した各ペアに 0 と 1 の間の数 $\zeta_i$ のべきを掛けます。指数はクエリでは正、キーでは負です。
# $$\zeta_i = \frac{2i/d + \gamma}{1 + \gamma}, \qquad i = 0, \dots, d/2 - 1$$
# $$\tilde q_m^{(i)} = \zeta_i^{m/B}\, R(m\theta_i)\, q^{(i)}, \qquad \tilde k_n^{(i)} = \zeta_i^{-n/B}\, R(n\theta_i)\, k^{(i)}$$
# べきの底は $i$ とともに $\zeta_0 = \gamma/(1+\gamma)$ から 1 のすぐ下まで大きくなり、いちばん速く回るペアの底がいちばん小さくなります。
# [スケール基数](../docs/glossary.ja.md#scale-base) $B$ はべきの値を数値で表せる範囲に収めるためのものです。
# $B = 1$ なら、キーの因子 $\zeta_0^{-n} = 3.5^n$ は $n = 9$ で float16 をオーバーフローし、クエリの $\zeta_0^n$ は $n = 14$ で 0 になります。
# 論文は $B = 1$ とし、$\gamma$ の値は示していないので、この章では torchscale の値 $\gamma = 0.4$（$\zeta_0 = 2/7$）と $B = 512$ を使います。
# `posenc` では `xpos_zeta(d)` が $\zeta_i$ を、`xpos_scale(d, p)` が $\zeta_i^{p/B}$ を返し、
# `apply_rope` の上に作った `apply_xpos(q, k, m, n)` が、どちらのペアの組み方でも $(\tilde q_m, \tilde k_n)$ を返します。

# %%
d, gamma, B = 8, 0.4, 512.0
zeta = xpos_zeta(d, dtype=f64)
print(f"zeta_i, d = 8: {fmt(zeta)}", end="")

# %% tags=["check"] summary={"en": "ζ_i is the formula and torchscale's; with B = 1 the key's 3.5^n overflows float16 at n = 9 and the query's ζ_0^n is subnormal from 8 and 0 from 14; apply_xpos as stated", "ja": "ζ_i は式とも torchscale とも一致します。B = 1 ではキーの 3.5^n が n = 9 で float16 をオーバーフローし、クエリの ζ_0^n は 8 から非正規化数、14 から 0 になります。apply_xpos は式どおりです"}
i = torch.arange(d // 2, dtype=f64)
assert_close(zeta, (2 * i / d + gamma) / (1 + gamma))
assert math.isclose(zeta[0], 2 / 7) and math.isclose(
    zeta[-1], (1 - 2 / d + gamma) / (1 + gamma)
)
assert (zeta[1:] > zeta[:-1]).all() and zeta[-1] < 1
torchscale = (torch.arange(0, d, 2) + 0.4 * d) / (1.4 * d)  # XPOS.scale
assert_close(xpos_zeta(d), torchscale)  # float32, as torchscale stores it
# B = 1 in float16: the key's 3.5^n overflows at 9, the query's zeta_0^n
# is subnormal from 8 (below 2^-14) and rounds to 0 from 14
assert math.isclose(1 / zeta[0], 3.5)
assert (zeta[0] ** -8).half().isfinite() and (zeta[0] ** -9).half().isinf()
tiny16 = torch.finfo(torch.float16).tiny  # 2^-14
assert (zeta[0] ** 7).half() >= tiny16 > (zeta[0] ** 8).half() > 0
assert (zeta[0] ** 13).half() > 0 and (zeta[0] ** 14).half() == 0

p = torch.tensor([-3.0, 0.0, 1.0, 100.0, 1000.0], dtype=f64)
assert_close(xpos_scale(d, p), zeta ** (p[:, None] / B))  # zeta_i^(p/B)

q, k = torch.randn(2, d, dtype=f64)
m, n = torch.tensor(700), torch.tensor(200)
for layout in ("half", "interleaved"):
    q_x, k_x = apply_xpos(q, k, m, n, layout=layout, center=0.0)
    # half: pair i is features (i, i + d/2); interleaved: (2i, 2i + 1)
    spread = (
        torch.cat((zeta, zeta))
        if layout == "half"
        else zeta.repeat_interleave(2)
    )
    assert_close(q_x, spread ** (700 / B) * apply_rope(q, m, layout=layout))
    assert_close(k_x, spread ** (-200 / B) * apply_rope(k, n, layout=layout))

# %% [markdown] lang="en"
# ### The score gains a factor that depends only on the distance
#
# A number times a rotation is the same rotation times the number, and rotations
# compose as $R(a)^\top R(b) = R(b-a)$. Summing the pairs,
# $$\tilde q_m \cdot \tilde k_n = \sum_{i=0}^{d/2-1} \zeta_i^{m/B}\zeta_i^{-n/B}\, q^{(i)\top} R(m\theta_i)^\top R(n\theta_i)\, k^{(i)} = \sum_{i=0}^{d/2-1} \zeta_i^{(m-n)/B}\, q^{(i)\top} R\big((n-m)\theta_i\big)\, k^{(i)}$$
# Without the powers of $\zeta_i$ this is RoPE's score. xPos multiplies the term of
# pair $i$ by
# $$\zeta_i^{(m-n)/B}$$
# so the score still depends on the positions only through $m - n$; and since
# $0 < \zeta_i < 1$, for $m > n$ every factor is below 1 and falls as the key recedes
# into the past, fastest for the fast pairs.

# %% [markdown] lang="ja"
# ### スコアには距離だけで決まる因子が掛かる
#
# スカラー倍と回転は順序を入れ替えられ、回転は $R(a)^\top R(b) = R(b-a)$ と合成されます。ペアについて和を取ると、
# $$\tilde q_m \cdot \tilde k_n = \sum_{i=0}^{d/2-1} \zeta_i^{m/B}\zeta_i^{-n/B}\, q^{(i)\top} R(m\theta_i)^\top R(n\theta_i)\, k^{(i)} = \sum_{i=0}^{d/2-1} \zeta_i^{(m-n)/B}\, q^{(i)\top} R\big((n-m)\theta_i\big)\, k^{(i)}$$
# $\zeta_i$ のべきを除けば RoPE のスコアで、xPos はペア $i$ の項に次の因子を掛けます。
# $$\zeta_i^{(m-n)/B}$$
# そのため、スコアは今までどおり $m - n$ だけで決まります。また $0 < \zeta_i < 1$ なので、$m > n$ ではどの因子も 1 未満で、
# キーが過去へ遠ざかるにつれて小さくなります。速く回るペアほど速く減衰します。

# %% tags=["check"] summary={"en": "the score is the sum of RoPE's terms times ζ_i^((m−n)/B), unchanged by a shift of 5000", "ja": "スコアは RoPE の項に ζ_i^((m−n)/B) を掛けた和で、5000 ずらしても変わりません"}
theta = rope_frequencies(d).double()


def rotation(phi):  # R(phi)
    c, s = math.cos(phi), math.sin(phi)
    return torch.tensor([[c, -s], [s, c]], dtype=f64)


def pairs(x):  # interleaved layout: pair i is features (2i, 2i + 1)
    return x.unflatten(-1, (-1, 2))


q_x, k_x = apply_xpos(q, k, m, n, layout="interleaved")
rhs = sum(
    zeta[j] ** ((700 - 200) / B)
    * pairs(q)[j]
    @ rotation((200 - 700) * theta[j].item())
    @ pairs(k)[j]
    for j in range(d // 2)
)
assert_close(q_x @ k_x, rhs)

pos = torch.arange(16)
qs, ks = torch.randn(2, 16, d, dtype=f64)
a_q, a_k = apply_xpos(qs, ks, pos)
b_q, b_k = apply_xpos(qs, ks, pos + 5000)
assert_close(a_q @ a_k.T, b_q @ b_k.T)  # a function of m - n only

# %% [markdown] lang="en"
# ## How fast each pair decays
#
# On a logarithmic axis, $\zeta_i^{r/B}$ against the distance $r = m - n$ is a straight
# line of slope $\ln\zeta_i / B$. A pair loses half its weight at the distance
# $$r_{1/2,i} = \frac{B \ln 2}{\ln(1/\zeta_i)}$$
# For $d = 128$ and $B = 512$ these [half-distances](../docs/glossary.md#half-distance)
# run from 283 positions for pair $0$ to 31620 for pair $63$: the fast pairs, which
# resolve small differences of position, fade within a few hundred tokens, while the
# slow pairs keep almost their full weight over thousands.

# %% [markdown] lang="ja"
# ## 各ペアはどれだけ速く減衰するか
#
# 対数軸で $\zeta_i^{r/B}$ を距離 $r = m - n$ に対して描くと、傾き $\ln\zeta_i / B$ の直線になります。
# ペアの重みが半分になる距離は次のとおりです。
# $$r_{1/2,i} = \frac{B \ln 2}{\ln(1/\zeta_i)}$$
# $d = 128$、$B = 512$ では、この[半減距離](../docs/glossary.ja.md#half-distance)はペア $0$ の 283 からペア $63$ の 31620 まで広がります。
# 位置の小さな違いを見分ける速いペアは数百トークンで薄れ、遅いペアは数千トークンにわたってほぼ元の重みを保ちます。

# %% tags=["figure"] alt={"en": ["xPos decay factor against the distance m − n up to 4096 on a log axis, d = 128, B = 512, for pairs 0, 16, 32, 48 and 63: straight lines, pair 0 falling below 10^-4, pair 63 staying near 1."], "ja": ["d = 128、B = 512 での xPos の減衰因子を、距離 m − n（0〜4096）に対して対数軸で描いた図です（ペア 0、16、32、48、63）。どれも直線で、ペア 0 は 10^-4 より下まで落ち、ペア 63 は 1 の近くにとどまります。"]}
d = 128
zeta = xpos_zeta(d, dtype=f64)
half_dist = B * math.log(2) / torch.log(1 / zeta)  # r_{1/2, i}
shown = [0, 16, 32, 48, 63]
print(f"half-distance, pairs {shown}: {fmt(half_dist[shown], 0)}")

dist = torch.arange(0, 4097, dtype=f64)
factor = xpos_scale(d, dist)  # (4097, 64): zeta_i^(r/B)
fig, ax = plt.subplots(figsize=(6.4, 2.3))
for j in shown:
    ax.plot(dist, factor[:, j], label=f"$i = {j}$")
ax.set(
    yscale="log", xlabel="$m-n$", ylabel=r"$\zeta_i^{(m-n)/B}$", xlim=(0, 4096)
)
ax.set_title("$d = 128,\\ B = 512$")
ax.legend(loc="lower left", ncols=5, fontsize="small")
plt.show()

# %% tags=["check"] summary={"en": "each log-factor falls by ln(ζ_i)/B per position; the half-distances are 283 to 31620", "ja": "因子の対数は位置 1 つあたり ln(ζ_i)/B ずつ下がり、半減距離は 283 から 31620 です"}
log_slope = factor.log().diff(dim=0)  # constant in r: ln(zeta_i) / B
assert_close(log_slope, (zeta.log() / B).expand(4096, d // 2))
assert_close(
    xpos_scale(d, half_dist).diagonal(), torch.full((d // 2,), 0.5, dtype=f64)
)
assert (
    round(float(half_dist[0])) == 283 and round(float(half_dist[63])) == 31620
)

# %% [markdown] lang="en"
# ## The score of aligned queries and keys, with and without the decay
#
# RoPE's long-term decay is a property of an
# [upper bound](../docs/glossary.md#upper-bound), not of the scores (the chapter
# *Rotary position embedding (RoPE)*, section
# [Long-term decay](08-rope.ipynb#long-term-decay-what-the-papers-bound-shows)): for
# $q = k = \mathbf{1}$ the score $2\sum_i \cos(r\theta_i)$ falls from 128 but keeps
# rippling. With xPos each cosine is weighted by its factor:
# $$\tilde q_r \cdot \tilde k_0 = 2\sum_{i=0}^{d/2-1} \zeta_i^{r/B}\cos(r\theta_i)$$
# Both start at 128. Between distances 2048 and 4096, RoPE's score still swings
# between $-16.73$ and 33.19, while xPos's stays between 5.36 and 12.96. The decay damps
# the far ripples but does not remove them, because the slow pairs, which decay
# least, also turn the least.

# %% [markdown] lang="ja"
# ## 向きのそろったクエリとキーのスコア：減衰がある場合とない場合
#
# RoPE の長距離減衰は[上界](../docs/glossary.ja.md#upper-bound)についての性質で、スコアそのものの性質ではありません
# （[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章の[「長距離減衰」](08-rope.ipynb#長距離減衰論文の上界が示すもの)の節）。
# $q = k = \mathbf{1}$ ならスコア $2\sum_i \cos(r\theta_i)$ は 128 から下がりますが、波打ち続けます。
# xPos では、それぞれの cos の項にそのペアの因子が掛かります。
# $$\tilde q_r \cdot \tilde k_0 = 2\sum_{i=0}^{d/2-1} \zeta_i^{r/B}\cos(r\theta_i)$$
# どちらも 128 から始まります。距離 2048 から 4096 の間では、RoPE のスコアが $-16.73$ から 33.19 まで振れ続けるのに対し、xPos のスコアは 5.36 から 12.96 に収まります。
# 減衰は遠くの波打ちを弱めますが、消しません。最も減衰しない遅いペアは、回転も最も遅いからです。

# %% tags=["figure"] alt={"en": ["Score of q = k = 1 against the distance m − n up to 4096, d = 128. Plain RoPE (B = ∞) falls from 128 but keeps swinging widely, as low as −17; xPos (B = 512) follows it near 0 and settles smoothly between about 5 and 13."], "ja": ["d = 128、q = k = 1 のスコアを距離 m − n（0〜4096）に対して描いた図です。素の RoPE（B = ∞）は 128 から下がりますが大きく振れ続け、−17 まで下がります。xPos（B = 512）は近い距離ではそれに沿い、遠くでは約 5〜13 の間になめらかに落ち着きます。"]}
theta = rope_frequencies(d).double()
r = torch.arange(0, 4097)
ones = torch.ones(d, dtype=f64)
many = ones.expand(len(r), d)
rope_scores = apply_rope(many, r) @ ones  # the key 1 at n = 0
q_x, _ = apply_xpos(many, many, r, center=0.0)
_, k_0 = apply_xpos(ones, ones, torch.tensor(0), center=0.0)  # same centre
xpos_scores = q_x @ k_0
far = slice(2048, None)
print(
    f"r = 2048..4096, RoPE: min {rope_scores[far].min():.2f}, "
    f"max {rope_scores[far].max():.2f}\n"
    f"r = 2048..4096, xPos: min {xpos_scores[far].min():.2f}, "
    f"max {xpos_scores[far].max():.2f}"
)

fig, ax = plt.subplots(figsize=(6.4, 2.3))
ax.plot(r, rope_scores, lw=0.8, label=r"$B = \infty$")
ax.plot(r, xpos_scores, lw=1.2, label="$B = 512$")
ax.axhline(0, color="0.5", lw=0.8)
ax.set(xlabel="$m-n$", ylabel=r"$\tilde q_m \cdot \tilde k_n$", xlim=(0, 4096))
ax.set_title(r"$d = 128,\ q = k = \mathbf{1}$")
ax.legend(loc="upper right")
plt.show()

# %% tags=["check"] summary={"en": "RoPE's score is 2Σcos(rθ_i) and xPos's 2Σζ_i^(r/B)cos(rθ_i); both start at 128; the quoted extremes hold", "ja": "RoPE のスコアは 2Σcos(rθ_i)、xPos のスコアは 2Σζ_i^(r/B)cos(rθ_i) で、どちらも 128 から始まり、本文の最小値と最大値はそのとおりです"}
cosines = torch.cos(r.double()[:, None] * theta)  # (4097, 64)
assert_close(rope_scores, 2 * cosines.sum(-1))
assert_close(xpos_scores, 2 * (xpos_scale(d, r.double()) * cosines).sum(-1))
assert rope_scores[0] == xpos_scores[0] == 128
extremes = [(s[far].min(), s[far].max()) for s in (rope_scores, xpos_scores)]
quoted = [f"{x:.2f}" for pair in extremes for x in pair]
assert quoted == ["-16.73", "33.19", "5.36", "12.96"]  # as in the prose
assert round(float(rope_scores.min())) == -17  # the figure's "as low as -17"

# %% [markdown] lang="en"
# ### A cap that RoPE does not have
#
# The decay does bound what any query and key can do: for $m \ge n$,
# $$|\tilde q_m \cdot \tilde k_n| \le \zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$$
# with the factor of the last pair; a query and key reach it when they lie in that
# pair alone and the key is aligned with the rotated query. RoPE has no such cap:
# the same key gives the score $|q|\,|k|$ at every distance. For
# unit vectors and $d = 128$ the cap is 0.9888 at distance 512, 0.9141 at 4096 and
# 0.4876 at 32768: a far token can still score high, but only through the slowest
# pairs, which say least about where it is.

# %% [markdown] lang="ja"
# ### RoPE にはない上限
#
# それでも減衰は、どんなクエリとキーでも超えられない上限を決めます。$m \ge n$ では次が成り立ちます。
# $$|\tilde q_m \cdot \tilde k_n| \le \zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$$
# 因子は最後のペアのもので、上限に届くのは、クエリとキーがこのペアだけに成分を持ち、キーが回転後のクエリと同じ向きを向く場合です。
# RoPE にはこのような上限はなく、同じキーならどの距離でもスコアは $|q|\,|k|$ です。
# $d = 128$ の単位ベクトルでの上限は、距離 512 で 0.9888、4096 で 0.9141、32768 で 0.4876 です。
# 遠いトークンも高いスコアを得られますが、それを担えるのは、位置について最も情報の少ない遅いペアだけです。


# %% tags=["check"] summary={"en": "2000 random unit pairs stay within the cap; the last pair reaches it; without decay it scores 1", "ja": "2000 組のランダムな単位ベクトルは上限以内で、最後のペアは上限に届き、減衰がなければスコアは 1 です"}
def score(q, k, m, n, **kwargs):
    q_x, k_x = apply_xpos(
        q, k, torch.tensor(m), torch.tensor(n), layout="interleaved", **kwargs
    )
    return q_x @ k_x


distances = (512, 4096, 32768)
caps = xpos_scale(d, torch.tensor(distances, dtype=f64))[:, -1]  # last pair
unit = torch.nn.functional.normalize(torch.randn(2, 2000, d, dtype=f64), dim=-1)
for r_far, cap in zip(distances, caps, strict=True):
    q_x, k_x = apply_xpos(
        unit[0], unit[1], torch.tensor(r_far), torch.tensor(0)
    )
    assert ((q_x * k_x).sum(-1).abs() <= cap + 1e-12).all()
    last = torch.zeros(d, dtype=f64)
    last[-2:] = torch.tensor([0.6, 0.8])  # a unit q in the last pair
    # k = R((m-n) theta) q, in the interleaved layout
    k_best = apply_rope(last, torch.tensor(r_far), layout="interleaved")
    assert_close(score(last, k_best, r_far, 0), cap)  # the cap is reached
    assert_close(
        score(last, k_best, r_far, 0, scale_base=math.inf),
        torch.tensor(1.0, dtype=f64),
    )
assert fmt(caps) == "0.9888, 0.9141, 0.4876"

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: proof of the cap.** For $m \ge n$,
# $$|\tilde q_m \cdot \tilde k_n| \le \sum_{i=0}^{d/2-1} \zeta_i^{(m-n)/B}\,|q^{(i)}|\,|k^{(i)}| \le \zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$$
# The first step is the triangle inequality with the Cauchy-Schwarz inequality on
# each pair (a rotation keeps norms); the second takes out the largest factor, that
# of the last pair, and applies the Cauchy-Schwarz inequality across the pairs. With
# $q$ and $k$ in the last pair only and $k^{(i)} = R\big((m-n)\theta_i\big)\, q^{(i)}$,
# both steps are equalities.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：上限の証明**
#
# $m \ge n$ では次が成り立ちます。
# $$|\tilde q_m \cdot \tilde k_n| \le \sum_{i=0}^{d/2-1} \zeta_i^{(m-n)/B}\,|q^{(i)}|\,|k^{(i)}| \le \zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$$
# 1 つ目の不等号は、三角不等式とペアごとのコーシー・シュワルツの不等式から従います（回転はノルムを変えません）。
# 2 つ目は、いちばん大きい因子（最後のペアの因子）を和の外にくくり出し、ペア全体にコーシー・シュワルツの不等式を使えば得られます。
# $q$ と $k$ を最後のペアだけに置き、$k^{(i)} = R\big((m-n)\theta_i\big)\, q^{(i)}$ とすれば、どちらの不等号も等号になります。

# %% [markdown] lang="en"
# ## What xPos trades
#
# The scale base stretches every decay alike: each half-distance $r_{1/2,i}$ is
# proportional to $B$, and as $B \to \infty$ every factor tends to 1 and xPos becomes
# RoPE (`scale_base=math.inf` gives exactly `apply_rope`'s output). Whatever $B$,
# the decay costs something.
#
# - **The fast pairs are gone at long range.** At distance 2048, 3 of the 64 pairs of
#   $d = 128$ keep less than 1% of their weight; at 8192, 42. Beyond, a score sees only
#   the slow pairs, which change little from one position to the next; the
#   projections cannot undo it, since they scale a pair alike at every distance.
# - **Far tokens do not disappear; they blur.** The decay multiplies the score, so far
#   scores shrink towards 0, not $-\infty$, and the softmax gives far keys nearly
#   equal weights instead of none. For one random draw of a query and 4096 keys, the
#   spread of the xPos scores falls from 10.73 over the nearest 64 keys to 3.32 beyond
#   distance 3000, while RoPE's is 10.92 and 12.53.
# - **It only works causally.** For $m < n$ the factor exceeds 1: a key 2048 positions
#   in the future has pair $0$ multiplied by 150.06. xPos is a design for decoders;
#   the paper leaves bidirectional attention to future work. Its own numbers past
#   the training length also use a blockwise causal window ([the note below](#deeper-the-blockwise-window)).

# %% [markdown] lang="ja"
# ## xPos のトレードオフ
#
# スケール基数はすべての減衰を同じ割合で引き伸ばします（半減距離 $r_{1/2,i}$ は $B$ に比例します）。$B \to \infty$ ではどの因子も 1 に近づき、xPos は RoPE になります
# （`scale_base=math.inf` なら `apply_rope` とまったく同じ値です）。$B$ がいくつでも、減衰には代償があります。
#
# - **遠くでは速いペアが消えます**。$d = 128$ の 64 組のうち、重みが 1% 未満になるのは距離 2048 で 3 組、8192 で 42 組です。
#   その先でスコアに効くのは、位置が 1 つずれてもほとんど回らない遅いペアだけです。
#   射影はどの距離でも同じ倍率を掛けるだけなので、これを打ち消せません。
# - **遠いトークンは消えずに、ぼやけます**。減衰はスコアに掛かるので、遠いスコアは $-\infty$ ではなく 0 に近づき、
#   softmax は遠いキーに重みを与えないのではなく、ほぼ等しい重みを与えます。
#   クエリ 1 つと 4096 個のキーを 1 回ランダムに引くと、xPos のスコアの標準偏差は最も近い 64 個のキーで 10.73、距離 3000 より先で 3.32 です。
#   RoPE では 10.92 と 12.53 です。
# - **因果的な場合にしか働きません**。$m < n$ では因子が 1 を超え、2048 個先（未来）のキーではペア $0$ に 150.06 が掛かります。
#   xPos はデコーダのための設計で、論文も双方向のアテンションへの適用は今後の課題としています。
#   学習時の長さを超えた論文の xPos の数値も、ブロック単位の因果的なウィンドウを使って測ったものです（下の[「さらに詳しく」](#deeper-ブロック単位のウィンドウ)）。

# %% tags=["check"] summary={"en": "B = ∞ is RoPE; half-distances scale with B; the quoted counts, spreads and factor hold, and the far spread of xPos stays below half the near one in 10 further draws", "ja": "B = ∞ は RoPE で、半減距離は B に比例し、本文の個数、ばらつき、因子はそのとおりです。さらに 10 回引き直しても、xPos の遠くのばらつきは近くの半分未満です"}
q, k = torch.randn(2, 3, 50, 32)
pos = torch.arange(50) * 100
q_inf, k_inf = apply_xpos(q, k, pos, scale_base=math.inf)  # B = infinity: RoPE

faded = {
    r_far: int((xpos_scale(d, torch.tensor(float(r_far))) < 0.01).sum())
    for r_far in (2048, 8192)
}
query = torch.randn(d, dtype=f64)  # one random query at position 4095
keys = torch.randn(4096, d, dtype=f64)  # random keys at 0..4095
key_pos = torch.arange(4096)
q_x, k_x = apply_xpos(query[None], keys, torch.tensor([4095]), key_pos)
xpos_s = k_x @ q_x[0]
rope_s = apply_rope(keys, key_pos) @ apply_rope(query, torch.tensor(4095))
near, far = (4095 - key_pos) < 64, (4095 - key_pos) >= 3000
growth = xpos_scale(d, torch.tensor(-2048.0, dtype=f64))  # a future key
assert torch.equal(q_inf, apply_rope(q, pos))
assert torch.equal(k_inf, apply_rope(k, pos))
r_grid = torch.arange(0, 3000, dtype=f64)
for b in (128.0, 512.0, 2048.0):
    f_0 = xpos_scale(d, r_grid, scale_base=b)[:, 0]  # pair 0, r = 0..2999
    first = int((f_0 <= 0.5).nonzero()[0])  # the first whole r at or below 1/2
    assert first == math.ceil(b * math.log(2) / math.log(1 / zeta[0].item()))
for r_far in (2048, 8192):
    below = xpos_scale(d, torch.tensor(float(r_far))) < 0.01
    assert torch.equal(below, r_far > B * math.log(100) / torch.log(1 / zeta))
assert faded == {2048: 3, 8192: 42}
assert xpos_s[far].std() < 0.5 * xpos_s[near].std()
assert rope_s[far].std() > 0.8 * rope_s[near].std()
assert (growth > 1).all() and f"{growth[0]:.2f}" == "150.06"
spreads = [f"{s.std():.2f}" for s in (xpos_s[near], xpos_s[far])]
spreads += [f"{s.std():.2f}" for s in (rope_s[near], rope_s[far])]
assert spreads == ["10.73", "3.32", "10.92", "12.53"]
gen = torch.Generator().manual_seed(
    1
)  # further draws, apart from the chapter's
for _ in range(10):
    query_g = torch.randn(d, dtype=f64, generator=gen)
    keys_g = torch.randn(4096, d, dtype=f64, generator=gen)
    q_g, k_g = apply_xpos(query_g[None], keys_g, torch.tensor([4095]), key_pos)
    scores_g = k_g @ q_g[0]
    assert scores_g[far].std() < 0.5 * scores_g[near].std()

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the blockwise window.** Trained on $l = 1024$ tokens, Sun et al.
# read longer inputs with
# [blockwise causal attention](../docs/glossary.md#blockwise-causal-attention), so
# every distance stays below $l$. In their Table 2, xPos's perplexities at 2048 and
# 4096 tokens are read with this window, those of RoPE and ALiBi without it (their
# Table 5 gives both). Sun et al. chose xPos's design by
# *attention resolution*, their measure of how sharply attention scores separate
# nearer from farther keys: with $s_i$ the expected score at distance $i$,
# $$R(s) = \frac{\sum_i e^{s_i}\,(e^{s_i} - e^{s_{i+1}})}{\left(\sum_i e^{s_i}\right)^2}$$
# which is 0 when the scores do not depend on the distance and positive when they fall
# with it. They train with ordinary causal attention and switch to the window at
# inference only (§3.3). The queries are cut into
# blocks of $l/2$; each query attends to the keys of its own block, up to itself, and
# of the block before. A query at offset $u$ in its block reaches back at most
# $u + l/2 \le l - 1$ positions, so every distance stays inside the range seen in
# training, while each query after the first block still sees between $l/2 + 1$ and
# $l$ keys. Blocks of the full length $l$ would let distances reach $2l - 1$, which
# training never showed. Sun et al. report the window's share in an ablation at 4096
# tokens (their Table 5): xPos alone reaches a
# [perplexity](../docs/glossary.md#perplexity) of 28.43, xPos with the window 20.73
# (RoPE: 294.45 and 25.65). torchscale implements xPos but not the window, so this
# rests on the paper's text.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ブロック単位のウィンドウ**
#
# Sun らは $l = 1024$ トークンで学習し、それより長い入力は[ブロック単位の因果的アテンション](../docs/glossary.ja.md#blockwise-causal-attention)で読むので、どの距離も $l$ より短いままです。
# 論文の表 2 の 2048 と 4096 トークンでのパープレキシティは、xPos ではこのウィンドウを使い、RoPE と ALiBi では使わずに測ったものです（表 5 に両方があります）。
# xPos の設計は、Sun らが定義した指標「attention resolution（アテンションの分解能）」をもとに選ばれています。
# これは、アテンションスコアが近いキーと遠いキーをどれだけはっきり分けるかを測る指標です。
# 距離 $i$ でのスコアの期待値を $s_i$ とすると、次のとおりです。
# $$R(s) = \frac{\sum_i e^{s_i}\,(e^{s_i} - e^{s_{i+1}})}{\left(\sum_i e^{s_i}\right)^2}$$
# スコアが距離によらなければ 0 で、距離とともに下がれば正になります。
# 学習は通常の因果的アテンションで行い、推論のときだけウィンドウに切り替えます（§3.3）。
# クエリを長さ $l/2$ のブロックで区切り、各クエリは、自分のブロックの自分までのキーと、1 つ前のブロックのキーにアテンションを向けます。
# ブロックの先頭から $u$ 番目（0 から数えます）のクエリが見る最も遠いキーは、$u + l/2 \le l - 1$ 個前にあります。
# そのため、どの距離も学習中に現れた範囲を出ません。それでいて、最初のブロックより後のクエリは $l/2 + 1$ 個から $l$ 個のキーを見ます。
# ブロックを学習時の長さ $l$ そのものにすると、距離は $2l - 1$ まで伸び、学習中に現れなかった距離が入ってしまいます。
# Sun らは 4096 トークンでのアブレーションでウィンドウの寄与を報告しています（論文の表 5）。
# [パープレキシティ](../docs/glossary.ja.md#perplexity)は、xPos だけでは 28.43、ウィンドウと組み合わせると 20.73 です（RoPE ではそれぞれ 294.45 と 25.65）。
# torchscale には xPos はありますが、このウィンドウはないので、この「さらに詳しく」は論文の記述だけに基づいています。


# %% tags=["deeper", "check"] summary={"en": "with l = 1024 and 4096 tokens, blocks of l/2 keep every distance below l and give each query after the first block between l/2 + 1 and l keys; blocks of l reach 2l − 1; R(s) is 0 for flat scores and positive for falling ones", "ja": "l = 1024、4096 トークンでは、長さ l/2 のブロックならどの距離も l 未満で、最初のブロックより後のクエリは l/2 + 1 個から l 個のキーを見ます。長さ l のブロックでは距離が 2l − 1 に達します。R(s) は平らなスコアで 0、下がるスコアで正です"}
def blockwise_causal(length, block):
    """Sun et al.'s blockwise causal mask: own (causal) and last block."""
    p = torch.arange(length)
    m_, n_ = p[:, None], p[None, :]  # query m, key n
    return (n_ <= m_) & (n_ // block >= m_ // block - 1)  # (length, length)


def farthest(visible):
    """The largest distance m - n of a visible key, and keys per query."""
    first = visible.to(torch.uint8).argmax(-1)  # the first visible key n
    m_ = torch.arange(len(visible))
    keys = visible.sum(-1)
    assert torch.equal(keys, m_ - first + 1)  # visible keys: one contiguous run
    return int((m_ - first).max()), keys


l_train = 1024  # the paper's training length l
longest, keys_per_query = farthest(blockwise_causal(4096, l_train // 2))
assert longest == l_train - 1  # every distance < l
after_first = keys_per_query[l_train // 2 :]  # after the first block
assert (after_first.min(), after_first.max()) == (l_train // 2 + 1, l_train)
too_far, _ = farthest(blockwise_causal(4096, l_train))  # blocks of l instead
assert too_far == 2 * l_train - 1


def resolution(s):
    """Sun et al.'s attention resolution of expected scores s_0, s_1, ..."""
    e = s.exp()
    return (e[:-1] * (e[:-1] - e[1:])).sum() / e.sum() ** 2


assert resolution(torch.zeros(100, dtype=f64)) == 0  # flat: no resolution
assert resolution(-torch.arange(100, dtype=f64) / 10) > 0  # falling scores

# %% [markdown] lang="en"
# ## Large positions: centring the exponent
#
# The factor $\zeta_i^{p/B}$ grows or shrinks exponentially with the position itself,
# not with a distance: for pair $0$, $\zeta_0^{p/B} = e^{-p \ln(7/2)/B}$. In float32 the
# key's factor overflows and the query's rounds to 0 past a few tens of thousands of
# positions, so at $m = n = 65535$, where the true factor is $\zeta_0^0 = 1$, the
# score of the two vectors is NaN. The derivation gives
# the remedy: only $(m - c) - (n - c) = m - n$ enters the score, so a common shift $c$
# of the exponents cancels,
# $$\zeta_i^{(m-c)/B}\,\zeta_i^{-(n-c)/B} = \zeta_i^{(m-n)/B}$$
# while the rotation keeps the true positions. `apply_xpos` takes `center=c`: 0 by
# default (the formula as written), a number, or `"midpoint"` of the call's
# positions, as in torchscale. In float32 it refuses positions too far from the
# centre with a `ValueError` that names `center`, rather than return NaN.
#
# The vectors depend on $c$, so with a [KV cache](../docs/glossary.md#kv-cache) the
# centre must stay the same for the cached keys and each new query: the default, or
# one number in every call. A centre per call does not: one query encoded alone with
# its own midpoint gets scores off by up to 1.80 here.

# %% [markdown] lang="ja"
# ## 大きな位置：指数の中心をずらす
#
# 因子 $\zeta_i^{p/B}$ は、距離ではなく位置そのものについて指数的に増減します（ペア $0$ では $\zeta_0^{p/B} = e^{-p \ln(7/2)/B}$）。
# float32 では位置が数万を超えるとキーの因子がオーバーフローし、クエリの因子は 0 に丸められるので、
# $m = n = 65535$ では真の因子が $\zeta_0^0 = 1$ なのに、スコアは NaN になります。
# 対策は導出からわかります。スコアに入るのは $(m - c) - (n - c) = m - n$ だけなので、指数を共通の $c$ だけずらしても、そのずれは打ち消し合います。
# $$\zeta_i^{(m-c)/B}\,\zeta_i^{-(n-c)/B} = \zeta_i^{(m-n)/B}$$
# 回転には実際の位置を使います。
# `apply_xpos` は中心を `center=c` で受け取ります。既定の 0（書いたとおりの式）、任意の数、または torchscale と同じく呼び出しの位置の中点を使う `"midpoint"` のいずれかです。
# float32 で中心から遠すぎる位置は、NaN を返す代わりに `center` を名指しする `ValueError` で拒みます。
#
# ベクトルは $c$ に依存するので、[KV キャッシュ](../docs/glossary.ja.md#kv-cache)ではキャッシュしたキーと新しいクエリで中心を同じにしなければなりません（既定のまま、または毎回同じ数）。
# 呼び出しごとに中心を決めると、これが守れません。クエリ 1 つだけを自分の中点でエンコードすると、スコアはここでは最大 1.80 ずれます。

# %%
q, k = torch.randn(2, d)
top = torch.tensor(65535)  # m = n = 65535, the formula as written
q_0 = apply_rope(q, top) * torch.cat([xpos_scale(d, top)] * 2)
k_0 = apply_rope(k, top) * torch.cat([xpos_scale(d, -top)] * 2)
q_c, k_c = apply_xpos(q, k, top, center="midpoint")  # c = 65535
print(f"as written: {q_0 @ k_0}; centred: {q_c @ k_c:.4f}; RoPE: {q @ k:.4f}")

# %% tags=["check"] summary={"en": "float32 runs out at 36261, 35695 and 42494 and apply_xpos refuses past 35694 (the note below); a cache needs a fixed centre", "ja": "float32 は 36261、35695、42494 で限界に達し、apply_xpos は 35694 を超えると拒みます（下の「さらに詳しく」）。キャッシュには固定の中心が必要です"}
p_scan = torch.arange(-50000, 50001)
scan = xpos_scale(d, p_scan)[:, 0]  # float32, pair 0
tiny = torch.finfo(torch.float32).tiny  # the smallest normal float32
first_inf = -int(p_scan[torch.isinf(scan)].max())  # key factor at p = -n
first_subnormal = int(p_scan[(scan > 0) & (scan < tiny)].min())
first_zero = int(p_scan[scan == 0].min())
assert (first_inf, first_subnormal, first_zero) == (36261, 35695, 42494)
f32 = torch.finfo(torch.float32)
# overflow, end of the normal numbers, rounding to 0 (below 2^-150)
limits = (math.log(f32.max), math.log(tiny), -150 * math.log(2))
per_position = math.log(7 / 2) / B  # -ln(zeta_0) / B
edges = (first_inf, first_subnormal, first_zero)
for p_edge, limit in zip(edges, limits, strict=True):
    assert abs(p_edge * per_position - abs(limit)) < 0.01  # edge = limit

assert torch.isinf(k_0).any() and (q_0 == 0).any() and torch.isnan(q_0 @ k_0)
assert_close(q_c @ k_c, q @ k)  # m = n: the score is RoPE's, q . k
refused = None
try:
    apply_xpos(q, k, top)  # the default centre, 0: |p - c| = 65535 is too far
except ValueError as error:
    refused = str(error)
assert refused.startswith("center=0.0 cannot give exact xPos scores")
refuse_at = int(refused.split("|p - center| > ")[1].split(" ")[0])
assert refuse_at == 35694 == first_subnormal - 1
assert refuse_at == math.floor(B * -math.log(tiny) / math.log(7 / 2))

qs, ks = torch.randn(2, 20, d, dtype=f64)  # the centre: vectors, not scores
pos = torch.arange(20) * 50
a_q, a_k = apply_xpos(qs, ks, pos, center=0.0)
b_q, b_k = apply_xpos(qs, ks, pos, center=777.0)
assert_close(a_q @ a_k.T, b_q @ b_k.T) and not torch.allclose(a_q, b_q)

pos = torch.cat([torch.tensor([0, 65535]), torch.randint(0, 2**16, (62,))])
pos = pos.sort().values.double()  # kept for the fold below

mid = "midpoint"  # a KV cache: keys encoded once (midpoint 49.5), one query
all_q, all_k, all_p = q.expand(100, d), k.expand(100, d), torch.arange(100)
keys_x = apply_xpos(all_q, all_k, all_p, center=mid)[1]
last_q = torch.tensor([99])
query_alone = apply_xpos(q[None], k[None], last_q, center=mid)[0]  # c = 99
query_fixed = apply_xpos(q[None], k[None], last_q, center=49.5)[0]  # same c
full_q = apply_xpos(all_q, all_k, all_p, center=mid)[0]
assert_close(query_fixed @ keys_x.T, full_q[99:] @ keys_x.T)
cache_err = (query_alone @ keys_x.T - full_q[99:] @ keys_x.T).abs().max()
assert f"{cache_err:.2f}" == "1.80"
keys_0 = apply_xpos(all_q, all_k, all_p)[1]  # the default centre, every call
query_0 = apply_xpos(q[None], k[None], last_q)[0]
full_0 = apply_xpos(all_q, all_k, all_p)[0]
assert (query_0 @ keys_0.T - full_0[99:] @ keys_0.T).abs().max() == 0

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the midpoint centre in float32.** For pair $0$ in float32, the
# key's factor $\zeta_0^{-n/B}$ is infinite from $n = 36261$ on, the query's
# $\zeta_0^{m/B}$ is subnormal from $m = 35695$ and exactly 0 from $m = 42494$ on;
# `apply_xpos` refuses positions farther than 35694 from the centre. With `center="midpoint"`,
# $|p - c|$ never exceeds half the span of the call's positions, so 64 positions
# spread over $[0, 2^{16})$ keep every scale a normal float32 number, and their
# float32 scores match a float64 evaluation of the formula to within $10^{-4}$ (the
# exact error depends on how the matrix product is split across threads).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：中点を中心にしたときの float32**
#
# float32 では、ペア $0$ のキーの因子 $\zeta_0^{-n/B}$ は $n = 36261$ から無限大になり、クエリの $\zeta_0^{m/B}$ は $m = 35695$ から非正規化数、$m = 42494$ からちょうど 0 になります。
# `apply_xpos` は中心から 35694 より遠い位置を拒みます。
# `center="midpoint"` では、$|p - c|$ が呼び出しの位置の広がりの半分を超えません。
# そのため $[0, 2^{16})$ に散らばる 64 個の位置でも、どの倍率も float32 の正規化数に収まります。
# その float32 のスコアは、float64 で評価した式と $10^{-4}$ 以内で一致します（正確な誤差は、行列積をスレッドにどう分割するかで変わります）。

# %% tags=["deeper", "check"] summary={"en": "64 positions over [0, 2^16), encoded in float32 with the midpoint centre, give finite causal scores within 1e-4 of the formula in float64", "ja": "[0, 2^16) に散らばる 64 個の位置を中点を中心として float32 でエンコードすると、因果的なスコアは有限で、float64 で評価した式と 1e-4 以内で一致します"}
q_x, k_x = apply_xpos(
    q.expand(64, d), k.expand(64, d), pos, center="midpoint"
)  # float32 vectors
scores = (q_x @ k_x.T).double()
delta = pos[:, None] - pos[None, :]  # m - n
half = d // 2  # half layout: pair i is features (i, i + d/2)
qc = torch.complex(q.double()[:half], q.double()[half:])
kc = torch.complex(k.double()[:half], k.double()[half:])
angle = delta[..., None] * theta  # (m - n) theta_i
phase = torch.polar(torch.ones_like(angle), angle)
exact = (zeta ** (delta[..., None] / B) * (qc * kc.conj() * phase).real).sum(-1)
causal = delta >= 0
err = (scores - exact)[causal].abs().max()
assert torch.isfinite(scores[causal]).all() and err < 1e-4

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: torchscale and lucidrains, rebuilt with posenc.**
#
# | | pairing | $\zeta_i$ | centre $c$ of the exponents | KV cache |
# |---|---|---|---|---|
# | torchscale (`XPOS`, `xpos_relative_position.py`) | interleaved (`rotate_every_two`) | `(arange(0, d, 2) + 0.4 d) / (1.4 d)`, $B$ = `scale_base` = 512 | $\lceil N/2 \rceil$ for $N$ keys; the query shares it through `offset` | keys cached before xPos and encoded again at every step |
# | lucidrains `rotary-embedding-torch` (`use_xpos=True`) | interleaved (its `rotate_half` pairs $2i$ with $2i+1$) | the same; `xpos_scale_base` = 512 | $\lfloor N/2 \rfloor$ for $N$ positions | since mid-2024, all keys encoded again with each query (`rotate_queries_with_cached_keys`) |
# | `posenc` (`apply_xpos`) | `layout="half"` or `"interleaved"` | `xpos_zeta(d, gamma=0.4)`, `scale_base=512` | `center=`: 0 by default, a number, or `"midpoint"` of the call's positions | a fixed `center` (the default), or keys encoded again |
#
# torchscale's formula, restated in a few lines of torch, gives the scores of
# `apply_xpos(..., layout="interleaved")`: the centres differ ($\lceil N/2 \rceil$
# against 0), the scores agree; lucidrains' scales, paired as its rotation pairs the
# features, give those of `posenc`'s interleaved xPos.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：torchscale と lucidrains を posenc で再現する**
#
# | | ペアの組み方 | $\zeta_i$ | 指数の中心 $c$ | KV キャッシュ |
# |---|---|---|---|---|
# | torchscale（`XPOS`、`xpos_relative_position.py`） | インターリーブ配置（`rotate_every_two`） | `(arange(0, d, 2) + 0.4 d) / (1.4 d)`、$B$ = `scale_base` = 512 | $N$ 個のキーに対して $\lceil N/2 \rceil$（クエリも `offset` で同じ中心を共有） | xPos 適用前のキーをキャッシュし、ステップごとに再エンコード |
# | lucidrains `rotary-embedding-torch`（`use_xpos=True`） | インターリーブ配置（名前は `rotate_half` ですが、組にするのは $2i$ と $2i+1$） | 同じ。`xpos_scale_base` = 512 | $N$ 個の位置に対して $\lfloor N/2 \rfloor$ | 2024 年半ばから、クエリごとに全キーを再エンコード（`rotate_queries_with_cached_keys`） |
# | `posenc`（`apply_xpos`） | `layout="half"` または `"interleaved"` | `xpos_zeta(d, gamma=0.4)`、`scale_base=512` | `center=`。既定は 0。数、またはその呼び出しの位置の中点（`"midpoint"`） | 固定の `center`（既定）、またはキーの再エンコード |
#
# torchscale の式を数行の torch で書き直すと、`apply_xpos(..., layout="interleaved")` と同じスコアになります。
# 中心は違います（$\lceil N/2 \rceil$ と 0）が、スコアは一致します。
# lucidrains の倍率も、回転と同じ組み方でペアに割り当てれば、`posenc` のインターリーブ配置の xPos と同じスコアを与えます。


# %% tags=["deeper", "check"] summary={"en": "torchscale's xPos and lucidrains' scales, restated, give apply_xpos's interleaved scores, one score along m − n = 256", "ja": "書き直した torchscale の xPos と lucidrains の倍率は、apply_xpos のインターリーブ配置と同じスコアを与え、m − n = 256 の対角線上ではスコアがすべて等しくなります"}
def rotate_every_two(x):  # pairs (2i, 2i + 1) -> (-x_{2i+1}, x_{2i})
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def torchscale_like(q, k):
    """torchscale's XPOS: exponents at p - ceil(N/2), rotations at p."""
    n, d = k.shape[-2:]
    zeta = (torch.arange(0, d, 2) + 0.4 * d) / (1.4 * d)
    expo = torch.arange(n) - math.ceil(n / 2)
    scale = (zeta ** (expo[:, None] / 512)).repeat_interleave(2, -1)  # (N, d)
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d // 2) / (d // 2))
    angle = torch.arange(n)[:, None] * inv_freq  # (N, d/2)
    angle = angle.repeat_interleave(2, -1)  # (N, d)

    def rope(x):
        return x * angle.cos() + rotate_every_two(x) * angle.sin()

    return rope(q) * scale, rope(k) / scale


q, k = torch.randn(2, 4, 255, 64)
q_t, k_t = torchscale_like(q, k)
q_x, k_x = apply_xpos(q, k, torch.arange(255), layout="interleaved")
assert_close(q_t @ k_t.mT, q_x @ k_x.mT, rtol=1e-4, atol=1e-4)


def lucidrains_like(q, k, positions):
    """use_xpos: scale ** ((t - N // 2) / 512), q * scale and k / scale."""
    d = q.shape[-1]
    zeta = (torch.arange(0, d, 2) + 0.4 * d) / (1.4 * d)
    s = zeta ** ((positions - len(positions) // 2)[:, None] / 512)  # (N, d/2)
    s = s.repeat_interleave(2, -1)  # scales paired as the rotation: (2i, 2i+1)
    angle = (positions[:, None] * rope_frequencies(d)).repeat_interleave(2, -1)

    def rope(x):
        return x * angle.cos() + rotate_every_two(x) * angle.sin()

    return rope(q) * s, rope(k) / s


q, k = torch.randn(2, 64, dtype=f64)
pos = torch.arange(1024, dtype=f64)  # the same q and k at every position
q_all, k_all = q.expand(1024, 64), k.expand(1024, 64)
q_l, k_l = lucidrains_like(q_all, k_all, pos)
q_x, k_x = apply_xpos(q_all, k_all, pos, layout="interleaved")
assert_close(q_l @ k_l.T, q_x @ k_x.T, rtol=1e-4, atol=1e-4)  # posenc's
along = torch.diagonal(q_l @ k_l.T, -256)  # every m - n = 256: one score
assert along.max() - along.min() < 1e-9

# %% [markdown] lang="en"
# ## NoPE: no positional encoding at all
#
# Now the opposite extreme. A decoder without any positional encoding, NoPE,
# computes attention from the token embeddings alone. Without a mask, attention is
# permutation-equivariant, $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$ (the chapter
# [*Why attention needs positions*](00-why-positions.ipynb)): such a model sees a set,
# not a sequence. A causal mask breaks this symmetry: the token at position $t$
# (counting from $t = 0$) sees exactly the $t + 1$ tokens up to itself, and that
# number is a position. Kazemnejad et al. (2023) proved that weights exist that
# recover positions from the mask alone; the next sections build them with
# `posenc.attention`.

# %% [markdown] lang="ja"
# ## NoPE：位置エンコーディングをまったく使わない
#
# 次は、もう一方の極にある答えです。位置エンコーディングを持たないデコーダ（NoPE）は、トークンの埋め込みだけからアテンションを計算します。
# マスクのないアテンションは置換同変で、$\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$ です
# （[「アテンションに位置が必要な理由」](00-why-positions.ipynb)の章）。そのようなモデルにとって、入力は系列ではなく集合です。
# 因果マスクはこの対称性を壊します。位置 $t$ のトークン（$t = 0$ から数えます）には自分までのちょうど $t + 1$ 個のトークンが見え、この個数が位置になります。
# Kazemnejad ら（2023）は、マスクだけから位置を取り出す重みが存在することを証明しました。以下の節では、その重みを `posenc.attention` で組み立てます。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: NoPE in trained models.** Haviv et al. (2022) found that causal
# language models trained without positional encodings (125M to 1.3B parameters)
# reach perplexities competitive with models that have them, and that probes recover
# absolute positions from their hidden states. Kazemnejad et al. (2023) found NoPE
# generalising to longer inputs better than explicit encodings on their decoder-only
# reasoning and arithmetic tasks. Their theorems (next sections) say what weights
# exist, not what training finds; the attention of their trained NoPE models most
# resembled T5's relative bias.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：学習済みの NoPE モデル**
#
# Haviv ら（2022）によれば、位置エンコーディングなしで学習した 1.25 億〜13 億パラメータの因果的な言語モデルも、それを持つモデルと同程度のパープレキシティに達します。
# その隠れ状態からは、プローブで絶対位置を読み取れます。
# Kazemnejad ら（2023）によれば、デコーダのみのモデルでの推論と算術のタスクでは、NoPE が明示的な位置エンコーディングより長い入力にうまく汎化しました。
# 彼らの定理（以下の節）が示すのは、マスクから位置を取り出せる重みが存在することまでで、学習がその重みを見つけるとは言っていません。学習済みの NoPE モデルのアテンションは、T5 の相対バイアスに最もよく似ていました。

# %% [markdown] lang="en"
# ## The causal mask counts
#
# Put a [beginning-of-sequence token](../docs/glossary.md#beginning-of-sequence-token)
# first, and give it a feature that no other token has: $1$ in the marker feature, $0$
# for every other token. Let the first layer's queries be zero. Every visible key then
# gets the same score, the causal softmax spreads the weight evenly over the $t + 1$
# visible tokens, and the marker feature of the output at position $t$ is the marker's
# share,
# $$h_t = \frac{1}{t+1}$$
# whatever the other tokens are: an absolute position, written by the mask alone.
# Without the mask every position sees all $T$ tokens and gets $1/T$. More generally,
# without the mask two tokens with the same content get the same output in every
# layer of a NoPE model, wherever they stand.

# %% [markdown] lang="ja"
# ## 因果マスクは数を数える
#
# 系列の先頭に [BOS トークン](../docs/glossary.ja.md#beginning-of-sequence-token)を置き、ほかのどのトークンも持たない目印を与えます（目印の次元は BOS で $1$、ほかはすべて $0$）。
# 最初の層のクエリを 0 にすると、見えるキーはすべて同じスコアになり、因果的な softmax は見えている $t + 1$ 個のトークンに重みを等しく配ります。
# 位置 $t$ の出力の目印の次元は BOS の取り分になります。
# $$h_t = \frac{1}{t+1}$$
# この値はほかのトークンが何であっても変わりません。マスクだけで絶対位置が書き込まれたわけです。
# マスクがなければ、どの位置からも $T$ 個すべてのトークンが見え、値は $1/T$ です。
# 一般に、マスクのない NoPE モデルでは、同じ内容の 2 つのトークンはどこにあってもどの層でも同じ出力になります。

# %%
T, d = 64, 8
x = torch.randn(T, d, dtype=f64)
x[:, 0] = 0.0  # feature 0 is the marker: 0 for ordinary tokens ...
x[0] = 0.0
x[0, 0] = 1.0  # ... and 1 for the beginning-of-sequence token at t = 0
w_k, w_v = torch.randn(d, d, dtype=f64), torch.zeros(d, 1, dtype=f64)
w_v[0, 0] = 1.0  # the value reads the marker
zero_q = torch.zeros(T, d, dtype=f64)
h = attention(zero_q, x @ w_k, x @ w_v, causal=True)[:, 0]
print(f"h_t, t = 0..5: {fmt(h[:6])}", end="")

# %% tags=["check"] summary={"en": "h_t = 1/(t+1) exactly, 1/T without the mask; without it, a repeated token gets one output", "ja": "h_t はちょうど 1/(t+1) です。マスクがなければ h_t は 1/T になり、繰り返したトークンはどの層でも同じ出力になります"}
t = torch.arange(T, dtype=f64)
assert torch.equal(h, 1 / (t + 1))  # h_t = 1/(t+1), exactly
assert torch.equal(
    attention(zero_q, x @ w_k, x @ w_v)[:, 0],
    torch.full((T,), 1 / T, dtype=f64),
)

xs = torch.randn(12, d, dtype=f64)  # two layers, a token repeated at 3 and 8
xs[8] = xs[3]
layers = [
    [torch.randn(d, d, dtype=f64) / math.sqrt(d) for _ in range(3)]
    for _ in range(2)
]


def nope(x, causal):
    for w_q1, w_k1, w_v1 in layers:
        x = x + attention(x @ w_q1, x @ w_k1, x @ w_v1, causal=causal)
    return x


no_mask = nope(xs, causal=False)
assert torch.equal(no_mask[3], no_mask[8])  # identical outputs
assert not torch.allclose(nope(xs, causal=True)[3], nope(xs, causal=True)[8])

# %% [markdown] lang="en"
# ## Reading the position back
#
# The feature $h_t = 1/(t+1)$ is monotone in $t$, but it is not $t$: a linear
# [readout](../docs/glossary.md#readout) $a h_t + b$ cannot follow a hyperbola, and
# the best least-squares fit over $t = 0, \dots, 63$ is off by up to 33.84 positions. A
# layer's feed-forward part can invert it. One hidden layer of ReLU units computes any
# continuous piecewise-linear function of $h$, one unit per bend; with the $K - 1$
# units $\max(0, 1/(j+1) - h)$, $j = 0, \dots, K-2$, and suitable output weights, it
# passes through the $K$ points $(1/(t+1), t)$ for $t = 0, \dots, K-1$ exactly. Beyond
# them it continues the last segment, whose slope in $h$ is $-K(K-1)$, so for
# $t \ge K - 1$ it returns
# $$\hat t = 2(K-1) - \frac{K(K-1)}{t+1}$$
# which never exceeds $2(K-1)$. For $K = 16$ the readout is exact up to $t = 15$ and
# stays below 30 forever (left panel of the next figure): a fixed ReLU layer resolves
# positions only up to a length set by its size. The number format limits $h_t$
# too: in bfloat16 two positions share a value from $t = 189$.

# %% [markdown] lang="ja"
# ## 位置を読み戻す
#
# この次元の値 $h_t = 1/(t+1)$ は $t$ について単調ですが、$t$ そのものではありません。
# 線形の[読み出し](../docs/glossary.ja.md#readout) $a h_t + b$ では双曲線をなぞれず、$t = 0, \dots, 63$ での最小二乗の最良のあてはめでも最大で位置にして 33.84 ずれます。
# 逆関数は層のフィードフォワード部分で計算できます。ReLU の隠れ層 1 つで、$h$ の任意の連続な区分線形関数を計算できるからです（折れ目 1 つにユニット 1 つ）。
# $j = 0, \dots, K-2$ について $K - 1$ 個のユニット $\max(0, 1/(j+1) - h)$ を置き、出力の重みを適切に選ぶと、
# $t = 0, \dots, K-1$ の $K$ 個の点 $(1/(t+1), t)$ をちょうど通ります。
# その先では最後の線分を延長します。その傾きは $h$ について $-K(K-1)$ なので、$t \ge K - 1$ では次の値を返します。
# $$\hat t = 2(K-1) - \frac{K(K-1)}{t+1}$$
# これは決して $2(K-1)$ を超えません。$K = 16$ では、読み出しは $t = 15$ まで厳密で、いつまでも 30 未満にとどまります（次の図の左）。
# 決まった大きさの ReLU の層が見分けられる位置は、その大きさで決まる長さまでです。
# 数値の形式も $h_t$ を制限し、bfloat16 では $t = 189$ から 2 つの位置が同じ値になります。

# %%
K = 16
knots = 1 / torch.arange(1, K + 1, dtype=f64)  # h at t = 0..K-1


def readout(h, values):
    """One hidden ReLU layer through (1/(t+1), values[t]), t = 0..K-1."""
    slope = (values[1:] - values[:-1]) / (knots[:-1] - knots[1:])  # in -h
    w_out = torch.cat([slope[:1], slope.diff()])  # (K-1,)
    hidden = torch.relu(knots[:-1] - h[..., None])  # max(0, 1/(j+1) - h)
    return values[0] + hidden @ w_out


t_hat = readout(h, torch.arange(K, dtype=f64))
print(f"t = 15, 31, 63 -> {fmt(t_hat[[15, 31, 63]], 2)}", end="")

# %% tags=["check"] summary={"en": "the linear fit is off by 33.84; the ReLU readout is as derived", "ja": "線形のあてはめは 33.84 ずれ、ReLU の読み出しは導出どおりです"}
linear = torch.stack([h, torch.ones_like(h)], dim=-1)
fit = torch.linalg.lstsq(linear, t[:, None]).solution
assert f"{(linear @ fit - t[:, None]).abs().max():.2f}" == "33.84"
assert_close(t_hat[:K], t[:K], rtol=0, atol=1e-12)  # exact for t < K
beyond = t[K - 1 :]
continued = 2 * (K - 1) - K * (K - 1) / (beyond + 1)  # the last segment
assert_close(t_hat[K - 1 :], continued)
assert (t_hat < 2 * (K - 1)).all()

# %% tags=["check"] summary={"en": "neighbours differ by 1/((t+1)(t+2)); values clash from 11864337 in float32 and 189 in bfloat16", "ja": "隣どうしの差は 1/((t+1)(t+2)) で、値が重なるのは float32 では 11864337、bfloat16 では 189 からです"}
assert_close(h[:-1] - h[1:], 1 / ((t[:-1] + 1) * (t[:-1] + 2)))
t_long = torch.arange(2**24)
h_f32 = (1 / (t_long + 1.0).double()).float()  # 1/(t+1), rounded once
h_bf16 = h_f32[:4096].bfloat16()
clash_f32 = int((h_f32[1:] == h_f32[:-1]).nonzero()[0])  # h_t = h_{t+1}
clash_bf16 = int((h_bf16[1:] == h_bf16[:-1]).nonzero()[0])
assert (clash_f32, clash_bf16) == (11864337, 189)
assert torch.finfo(torch.bfloat16).eps == 2**-7  # spacing in (2^-8, 2^-7]

# %% [markdown] lang="en"
# ## From absolute to relative: a second layer
#
# Kazemnejad et al. prove two results for a decoder-only Transformer whose input
# starts with a beginning-of-sequence token: the first layer can write each token's
# absolute position into the hidden state (their Theorem 1), and if later layers keep
# it, their attention can implement a relative encoding, a dot product of the form
# $$\langle q_n, k_m \rangle = f_{\mathrm{cnt}}(q, k) + f_{\mathrm{rel}}(n - m)$$
# with $f_{\mathrm{cnt}}$ depending on the contents and $f_{\mathrm{rel}}$ on the
# distance (Theorem 2). Both say what weights exist, not what training finds.
#
# Here is such a second layer, built on the readout above. As in Kazemnejad et al.,
# the query now sits at $n$ and the key at $m$, the reverse of the xPos sections and
# of the [notation page](../docs/notation.md). The hidden state of token $t$ holds
# $(1, \hat t, \widehat{t^2})$, a second readout passing through $(1/(t+1), t^2)$.
# Choose the query $q_n = (2\lambda(n-1), -\lambda)$ and the key $k_m = (m, m^2)$, both
# linear in the hidden state. Then
# $$q_n \cdot k_m = -\lambda (n - 1 - m)^2 + \lambda (n-1)^2$$
# a function of $n - m$ plus a term of the query alone, which the softmax ignores.
# With $\lambda = 8$ the head attends to the previous token: for $n = 1, \dots, 15$ its
# weight on $m = n - 1$ is at least 0.9993, and it copies the previous token's value
# to within 0.01. From $n = 16$ on the readouts saturate and the head attends to the
# token itself instead (right panel): the relative pattern reaches only as far as the
# absolute positions it is built on.

# %% [markdown] lang="ja"
# ## 絶対位置から相対位置へ：2 層目
#
# Kazemnejad らは、入力が BOS トークンで始まるデコーダのみの Transformer について、2 つの結果を証明しました。1 つは、最初の層が各トークンの絶対位置を隠れ状態に書き込めることです（定理 1）。
# もう 1 つは、後の層がそれを保っていれば、そのアテンションが相対位置のエンコーディング、つまり次の形の内積を実現できることです（定理 2）。
# $$\langle q_n, k_m \rangle = f_{\mathrm{cnt}}(q, k) + f_{\mathrm{rel}}(n - m)$$
# $f_{\mathrm{cnt}}$ は内容に、$f_{\mathrm{rel}}$ は距離に依存します。どちらの定理も重みの存在を言うもので、学習がそれを見つけるとは言っていません。
#
# 上の読み出しを土台に、そのような 2 層目を作ります。
# Kazemnejad らに合わせてクエリの位置を $n$、キーの位置を $m$ とします（xPos の節や[記法のページ](../docs/notation.ja.md)とは逆です）。
# トークン $t$ の隠れ状態には $(1, \hat t, \widehat{t^2})$ が入っています（最後の成分は、点 $(1/(t+1), t^2)$ を通るもう 1 つの読み出しです）。
# 隠れ状態の線形関数としてクエリ $q_n = (2\lambda(n-1), -\lambda)$ とキー $k_m = (m, m^2)$ を選ぶと、
# $$q_n \cdot k_m = -\lambda (n - 1 - m)^2 + \lambda (n-1)^2$$
# となり、$n - m$ の関数と、softmax が無視するクエリだけの項の和になります。
# $\lambda = 8$ では、このヘッドは 1 つ前のトークンを見ます。$n = 1, \dots, 15$ では $m = n - 1$ への重みが 0.9993 以上あり、1 つ前のトークンのバリューを誤差 0.01 以内でコピーします。
# $n = 16$ 以降は読み出しが飽和し、ヘッドはトークン自身を見るようになります（右の図）。相対位置のパターンが届くのは、土台の絶対位置が届く範囲までです。

# %% tags=["figure"] alt={"en": ["Left: NoPE's ReLU readout of the position against the true t, exact up to t = 15, then bending below the diagonal toward 30. Right: second-layer attention weights, queries n down, keys m across: the previous token up to n = 15, itself from 16."], "ja": ["左は NoPE の ReLU による位置の読み出しを真の t に対して描いたもので、t = 15 までは正確、その先は対角線の下へ曲がり、30 に向かって平らになります。右は 2 層目のアテンションの重み（縦はクエリ n、横はキー m）で、n = 15 までは直前のトークン、16 からはトークン自身に集中します。"]}
knots_t = torch.arange(K, dtype=f64)
hidden = torch.stack(  # (T, 3): (1, t_hat, t2_hat)
    [torch.ones_like(h), readout(h, knots_t), readout(h, knots_t**2)], dim=-1
)
lam = 8.0
# q = (2 lam (t-1), -lam) and k = (t, t^2), linear in the hidden state
w_q2 = torch.tensor([[-2 * lam, -lam], [2 * lam, 0.0], [0.0, 0.0]], dtype=f64)
w_k2 = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=f64)
q2, k2 = hidden @ w_q2, hidden @ w_k2
values = torch.randn(T, 4, dtype=f64)
scaled_q = q2 * math.sqrt(2)  # attention divides by sqrt(2): undo it
out = attention(scaled_q, k2, values, causal=True)
n_, m_ = t[:, None], t[None, :]
weights = torch.softmax(
    (q2 @ k2.T).masked_fill(m_ > n_, -math.inf), dim=-1
)  # the weights attention used
prev = weights[torch.arange(1, T), torch.arange(T - 1)]  # on m = n - 1
print(f"weight on the previous token, n = 1..15: min {prev[: K - 1].min():.4f}")

fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(6.4, 2.6))
ax_l.plot(t, t, color="0.6", lw=0.8, ls=":")
ax_l.plot(t, t_hat, lw=1.5)
ax_l.axhline(2 * (K - 1), color="0.5", lw=0.8, ls="--")
ax_l.set(
    xlabel="$t$",
    ylabel=r"$\hat t$",
    title="$K = 16$",
    xlim=(0, 63),
    ylim=(0, 63),
)
shown_n = 32
im = ax_r.imshow(
    weights[:shown_n, :shown_n].numpy(),
    cmap="viridis",
    vmin=0,
    vmax=1,
    interpolation="nearest",
)
ax_r.set(xlabel="$m$", ylabel="$n$", title=r"$\lambda = 8$")
ax_r.grid(False)
fig.colorbar(im, ax=ax_r, fraction=0.046)
plt.show()

# %% tags=["check"] summary={"en": "the dot product is as derived; the head copies the previous token up to n = 15, then itself", "ja": "内積は導出どおりで、ヘッドは n = 15 まで直前のトークンをコピーし、その先はトークン自身を見ます"}
exact = slice(0, K)
assert_close(
    (q2 @ k2.T)[exact, exact],
    (-lam * (n_ - 1 - m_) ** 2 + lam * (n_ - 1) ** 2)[exact, exact],
)
assert_close(out, weights @ values)
assert (
    prev[: K - 1] > 0.999
).all() and f"{prev[: K - 1].min():.4f}" == "0.9993"
assert_close(out[1:K], values[: K - 1], rtol=0, atol=0.01)  # copies
assert (prev[K:] < 0.5).all()
assert (weights.argmax(-1)[K:] == t[K:]).all()  # beyond K: the token itself

# %% [markdown] lang="en"
# ## Both lean on the causal mask
#
# xPos needs causal attention because its factor $\zeta_i^{(m-n)/B}$ decays only for
# $m \ge n$; NoPE needs it because the mask is its only source of position. They
# differ in what they give for free. xPos hands every layer the distance through the
# rotation and fixes in advance how fast each pair forgets; NoPE hands nothing and
# leaves every positional computation to the weights, which can count, as built
# here, but only as far as the network's size and the precision of its numbers
# allow.

# %% [markdown] lang="ja"
# ## どちらも因果マスクに頼っている
#
# xPos に因果的アテンションが必要なのは因子 $\zeta_i^{(m-n)/B}$ が $m \ge n$ でしか減衰しないからで、NoPE に必要なのはマスクが位置の唯一の情報源だからです。
# 違うのは最初から何を与えるかです。xPos は回転で距離をすべての層に渡し、各ペアが忘れる速さをあらかじめ決めます。
# NoPE は何も渡さず、位置の計算をすべて重みに任せます。重みはここで組み立てたように数を数えられますが、ネットワークの規模と数値の精度が許す範囲までです。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: beyond this chapter.** RetNet (Sun et al. 2023) keeps a decay per distance and
# drops the softmax; Wang et al. (2024) find that NoPE fails past some length as its
# attention spreads, and mend it with a temperature per head; Llama 4 interleaves
# NoPE layers with RoPE layers
# ([*Rotary in today's LLMs*](14-rope-in-llms.ipynb#llama-4-nope-layers-with-a-temperature-chunked-rope-layers)).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：この章の先の話題**
#
# RetNet（Sun ら 2023）は距離ごとの減衰を残して softmax をやめています。
# Wang ら（2024）によると、NoPE はある長さを超えるとアテンションが広がって失敗し、ヘッドごとに温度を調整すると直ります。
# Llama 4 は NoPE の層と RoPE の層を交互に置いています。
# [「現在の LLM の回転位置埋め込み」](14-rope-in-llms.ipynb)の章の[「Llama 4：温度付きの NoPE の層と、チャンクに分けた RoPE の層」](14-rope-in-llms.ipynb#llama-4温度付きの-nope-の層とチャンクに分けた-rope-の層)の節を見てください。

# %% [markdown] lang="en"
# ## What to remember
#
# - xPos is RoPE with a factor per pair: the term of pair $i$ in the score is
#   multiplied by $\zeta_i^{(m-n)/B}$, so the score still depends only on $m - n$, and
#   for $m \ge n$ the fastest-turning pairs decay first.
# - The decay caps every score at $\zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$, but far keys are
#   blurred rather than removed.
# - The factors grow and shrink exponentially with the position itself: shift the
#   exponents by a common centre, which cancels in every score, and keep it fixed
#   when keys are cached.
# - The paper's extrapolation also relies on blockwise causal attention at inference.
# - NoPE: with a beginning-of-sequence token, the causal mask alone writes $1/(t+1)$
#   into the first layer; a feed-forward part can turn it into $t$ and a second layer
#   into a relative pattern, up to a length that the network's size and its number
#   format set.
# - Both lean on the causal mask: for a future key xPos's decay becomes a growth,
#   and the mask is NoPE's only source of position.

# %% [markdown] lang="ja"
# ## まとめ
#
# - xPos はペアごとの因子を掛けた RoPE で、スコアのペア $i$ の項に $\zeta_i^{(m-n)/B}$ が掛かります。
#   スコアはやはり $m - n$ だけで決まり、$m \ge n$ では速く回るペアから先に減衰します。
# - 減衰は、どのスコアにも $\zeta_{d/2-1}^{(m-n)/B}\,|q|\,|k|$ という上限を課します。
#   ただし遠いキーは消えずにぼやけるだけです。
# - 因子は位置そのものについて指数的に増減するので、指数を共通の中心だけずらします（どのスコアでも打ち消されます）。
#   キーをキャッシュするときは中心を固定します。
# - 論文の外挿は、推論時のブロック単位の因果的アテンションにも頼っています。
# - NoPE では、BOS トークンがあれば、因果マスクだけで最初の層に $1/(t+1)$ が書き込まれます。
#   フィードフォワード部分でこれを $t$ に、2 層目で相対位置のパターンにできますが、
#   届くのはネットワークの規模と数値の形式で決まる長さまでです。
# - xPos と NoPE はどちらも因果マスクに頼ります。xPos では未来のキーに対して減衰が増幅に変わり、NoPE ではマスクが位置の唯一の情報源だからです。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Show that $\zeta_i^{(m-n)/B}$ with $\gamma \to \infty$ tends to 1 for every pair, and
#    compare with $B \to \infty$. Which of the two changes the ratio between the
#    decay rates of the fastest and the slowest pair?
# 2. For $d = 64$, find the distance at which xPos's cap $\zeta_{d/2-1}^{r/B}$ falls to
#    $1/2$, and the distance at which every pair keeps less than 1% of its weight.
# 3. Encode queries and keys in float16 with xPos's formula and the centre in the
#    middle of the positions (torchscale's choice; `center="midpoint"` in
#    `apply_xpos`), and find the largest span of positions for which the scores stay
#    finite. Compare with the range of float16 and with the span beyond which
#    `apply_xpos` refuses the call.
# 4. Replace the BOS marker in the NoPE construction by a feature equal to 1 on every
#    token. What does the first layer compute now, and why can no choice of the
#    second layer recover the position from it?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $\gamma \to \infty$ のとき、$\zeta_i^{(m-n)/B}$ がどのペアでも 1 に近づくことを示し、
#    $B \to \infty$ の場合と比べてください。
#    いちばん速いペアといちばん遅いペアの減衰の速さの比を変えるのは、どちらでしょうか。
# 2. $d = 64$ について、xPos の上限 $\zeta_{d/2-1}^{r/B}$ が $1/2$ まで下がる距離と、
#    すべてのペアの重みが 1% 未満になる距離を求めてください。
# 3. xPos の式で、指数の中心を位置の真ん中に置いて、クエリとキーを float16 でエンコードしてください
#    （torchscale と同じ考え方で、`apply_xpos` では `center="midpoint"` にあたります）。
#    スコアが有限のままでいられる位置の広がりの最大値を求めてください。
#    float16 の範囲や、`apply_xpos` が呼び出しを受け付けなくなる広がりと比べてください。
# 4. NoPE の構成で、BOS の目印の代わりに、すべてのトークンで 1 になる次元を使ってみてください。
#    最初の層は何を計算するでしょうか。2 層目をどう選んでもそこから位置を復元できないのはなぜでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Since $\zeta_i = 1 - (1 - 2i/d)/(1+\gamma)$, every $\zeta_i$ tends to 1
# as $\gamma \to \infty$, and with it every factor $\zeta_i^{(m-n)/B}$ at a fixed
# distance; $B \to \infty$ sends the exponent $(m-n)/B$ to 0, with the same result.
# The two differ in the rates. Pair $i$ decays at the rate $\ln(1/\zeta_i)/B$ per
# position, so the ratio of the fastest rate to the slowest,
# $\ln(1/\zeta_0)/\ln(1/\zeta_{d/2-1})$, does not contain $B$: the scale base stretches
# every decay alike. $\gamma$ changes it: measured from `xpos_scale` for $d = 128$, the
# ratio is the same at three bases and is 167.6, 111.6 and 77.6 for
# $\gamma = 0.1$, $0.4$ and $2$. As $\gamma \to \infty$,
# $\ln(1/\zeta_i) \approx (1 - 2i/d)/(1+\gamma)$ and the ratio tends to $d/2 = 64$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $\zeta_i = 1 - (1 - 2i/d)/(1+\gamma)$ なので、$\gamma \to \infty$ ではどの $\zeta_i$ も 1 に近づき、
# 距離を固定すればどの因子 $\zeta_i^{(m-n)/B}$ も 1 に近づきます。
# $B \to \infty$ では指数 $(m-n)/B$ が 0 に近づくので、結果は同じです。
# 違いは減衰の速さに出ます。ペア $i$ は位置 1 つあたり $\ln(1/\zeta_i)/B$ の速さで減衰します。
# したがって、いちばん速いペアといちばん遅いペアの速さの比 $\ln(1/\zeta_0)/\ln(1/\zeta_{d/2-1})$ には $B$ が入りません。
# スケール基数はすべての減衰を同じ割合で引き伸ばすだけです。比を変えるのは $\gamma$ です。
# $d = 128$ について `xpos_scale` からこの比を測ると、3 通りのスケール基数で同じで、
# $\gamma = 0.1$、$0.4$、$2$ に対してそれぞれ 167.6、111.6、77.6 になります。
# $\gamma \to \infty$ では $\ln(1/\zeta_i) \approx (1 - 2i/d)/(1+\gamma)$ となり、比は $d/2 = 64$ に近づきます。

# %% tags=["solution"]
d1, r_1 = 128, torch.tensor(1000.0, dtype=f64)
ratio = {}
for g in (0.1, 0.4, 2.0):
    for b in (128.0, 512.0, 2048.0):
        rate = -xpos_scale(d1, r_1, gamma=g, scale_base=b).log() / 1000
        ratio[g, b] = (rate[0] / rate[-1]).item()  # fastest / slowest
    # B cancels in the ratio by the form zeta^(r/B): a consistency check
    assert math.isclose(ratio[g, 128.0], ratio[g, 2048.0], rel_tol=1e-9)
near_1 = xpos_scale(d1, torch.tensor(4096.0, dtype=f64), gamma=1e6)
assert ((1 - near_1) < 1e-4).all()  # gamma -> infinity: every factor -> 1
z = xpos_zeta(d1, gamma=1e6, dtype=f64)
assert math.isclose(z[0].log() / z[-1].log(), d1 / 2, rel_tol=1e-4)
rows = ", ".join(f"{ratio[g, B]:.1f}" for g in (0.1, 0.4, 2.0))
print(f"fastest / slowest rate, gamma = 0.1, 0.4, 2: {rows}", end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The cap is the factor of the last pair, with
# $\zeta_{31} = (62/64 + 0.4)/1.4 = 0.97768$ for $d = 64$. It falls to $1/2$ at
# $r = B\ln 2/\ln(1/\zeta_{31})$, about 15721 positions. Every pair keeps less than 1%
# of its weight once the largest factor does, that is beyond
# $r = B\ln 100/\ln(1/\zeta_{31})$, about 104448 positions.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 上限は最後のペアの因子で、$d = 64$ では $\zeta_{31} = (62/64 + 0.4)/1.4 = 0.97768$ です。
# これが $1/2$ まで下がるのは $r = B\ln 2/\ln(1/\zeta_{31})$、距離にして約 15721 です。
# いちばん大きい因子が 1% を下回れば、すべてのペアの重みが 1% 未満になります。
# それは $r = B\ln 100/\ln(1/\zeta_{31})$、距離にして約 104448 より先です。

# %% tags=["solution"]
d2 = 64
z_last = xpos_zeta(d2, dtype=f64)[-1].item()
assert math.isclose(z_last, (62 / 64 + 0.4) / 1.4)
r_half = B * math.log(2) / math.log(1 / z_last)
r_gone = B * math.log(100) / math.log(1 / z_last)
around = torch.tensor([math.floor(r_half), math.ceil(r_half)], dtype=f64)
cap = xpos_scale(d2, around)[:, -1]
assert cap[0] > 0.5 > cap[1]
around = torch.tensor([math.floor(r_gone), math.ceil(r_gone)], dtype=f64)
top = xpos_scale(d2, around).max(-1).values  # the largest factor of any pair
assert top[0] >= 0.01 > top[1]
print(
    f"d = 64: cap 1/2 at r = {r_half:.0f}, all < 1% beyond {r_gone:.0f}", end=""
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With the centre in the middle, positions $0$ to $S$ get $c = S/2$, and the
# largest scale anywhere is that of pair 0 at $|p - c| = S/2$, namely
# $(7/2)^{S/(2B)}$, carried by the key at $S$ and the query at 0. float16 ends at
# 65504, so the vectors stay finite, and with them every causal score, as long as
# $(7/2)^{S/(2B)}\rho \le 65504$, where $\rho$ is the larger of the lengths of pair 0
# of $q$ and of $k$:
# $$S \le \frac{2B\ln(65504/\rho)}{\ln(7/2)}$$
# The condition is sufficient, not necessary: a rotated feature is usually shorter
# than its pair, and float16 rounds values between 65504 and 65520 down to 65504, so
# the largest span can be somewhat longer. For $\rho = 1$ the guaranteed span is 9064
# positions; for one random $q$ and $k$ ($d = 128$), bisection finds a largest span at
# least the guaranteed one and less than 2% longer, and with `center=0.0`, where the
# key at $S$ carries $(7/2)^{S/B}$, about half as long (printed below).
# `apply_xpos` refuses $|p - c| > 3966$ in float16, that is, with
# `center="midpoint"`, spans beyond 7932 (printed): the guarantee above with a margin.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 中心を真ん中に置くと、位置 $0$ から $S$ に対して $c = S/2$ となります。
# 計算全体でいちばん大きい倍率は $|p - c| = S/2$ でのペア 0 の倍率 $(7/2)^{S/(2B)}$ で、位置 $S$ のキーと位置 0 のクエリがこれを持ちます。
# float16 の最大値は 65504 です。$q$ と $k$ のペア 0 の長さの大きいほうを $\rho$ とすると、
# $(7/2)^{S/(2B)}\rho \le 65504$ である限りベクトルは有限で、因果的なスコアもすべて有限です。
# $$S \le \frac{2B\ln(65504/\rho)}{\ln(7/2)}$$
# この条件は十分条件で、必要条件ではありません。
# 回転した次元の値はたいていペアの長さより小さく、float16 では 65504 を超えていても 65520 未満の値は 65504 に丸められるので、実際の最大の広がりはそれより少し長くなりえます。
# $\rho = 1$ なら、保証される広がりは 9064 トークンです。
# ランダムな $q$ と $k$（$d = 128$）を 1 組選んで二分法で求めると、最大の広がりは保証される広がり以上で、その 2% 増しより短くなります。
# `center=0.0` では位置 $S$ のキーが $(7/2)^{S/B}$ を持つので、広がりはほぼ半分です（どちらも下の出力）。
# `apply_xpos` は float16 では $|p - c| > 3966$ を受け付けません。
# `center="midpoint"` でいえば、これは広がりが 7932（出力の値）を超える呼び出しを拒むことにあたります。上の保証に余裕を持たせた制限です。

# %% tags=["solution"]
q16, k16 = torch.randn(2, 128).half()


def encode16(x, p, c, sign):
    """xPos by its formula: float32, rounded to float16 as apply_xpos rounds."""
    scale = xpos_scale(128, sign * (p - c))  # (65, 64)
    rotated = apply_rope(x.float().expand(len(p), 128), p)
    return (rotated * torch.cat([scale, scale], -1)).half()


def finite_span(span, middle):
    """Are all causal scores finite for 65 positions spread over 0..span?"""
    p = torch.linspace(0, span, 65).round()
    c = span / 2 if middle else 0.0
    q_x, k_x = encode16(q16, p, c, 1.0), encode16(k16, p, c, -1.0)
    scores = q_x.float() @ k_x.float().T
    return bool(scores[p[:, None] >= p[None, :]].isfinite().all())


def accepted(span, center):
    """Does apply_xpos accept 65 positions spread over 0..span?"""
    p = torch.linspace(0, span, 65).round()
    try:
        apply_xpos(q16.expand(65, 128), k16.expand(65, 128), p, center=center)
    except ValueError:
        return False
    return True


def largest_span(ok):
    low, high = 0, 20000  # ok at low, not at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if ok(mid) else (low, mid)
    return low


assert math.floor(2 * B * math.log(65504) / math.log(7 / 2)) == 9064  # rho = 1
rho_q, rho_k = (x.float()[[0, 64]].norm().item() for x in (q16, k16))
# the spans the condition guarantees (sufficient, not necessary)
sure = 2 * B * math.log(65504 / max(rho_q, rho_k)) / math.log(7 / 2)
sure_plain = B * math.log(65504 / rho_k) / math.log(7 / 2)  # (7/2)^(S/B)
centred = largest_span(lambda span: finite_span(span, middle=True))
plain = largest_span(lambda span: finite_span(span, middle=False))
assert sure <= centred < 1.02 * sure  # guaranteed, and nearly the largest
assert sure_plain <= plain < 1.02 * sure_plain and 8192 < centred
by_mid = largest_span(lambda span: accepted(span, "midpoint"))
by_zero = largest_span(lambda span: accepted(span, 0.0))
# refused before anything overflows
assert by_mid <= centred and by_zero <= plain
print(
    f"float16: largest span {centred} (guaranteed {sure:.0f}), "
    f"{plain} with center=0.0 (guaranteed {sure_plain:.0f})\n"
    f"apply_xpos accepts spans up to {by_mid} with center='midpoint', "
    f"{by_zero} with center=0.0",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With the marker equal to 1 on every token, the zero queries still
# spread the weight evenly, and the marker feature of the output is
# $\sum_{m=0}^{t} \frac{1}{t+1} = 1$ at every position: a constant, with no position
# in it. No second layer can help, because the information is already gone for some
# inputs. In a sequence of identical tokens, every position of a causal layer sees
# identical keys and values and computes the same output, and by induction so does
# every later layer. The beginning-of-sequence token worked because its content
# differs from the rest: the two-layer model above gives the same output at all 12
# positions of a repeated token, and different ones once the first token differs. Chi et al.
# (2023) note a related leak in trained causal models without an encoding: the
# variance of an average over more tokens shrinks with the position, which itself
# tells later layers roughly where they are.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** すべてのトークンで目印が 1 なら、クエリが 0 なので重みはやはり均等に配られます。
# 出力の目印の次元は、どの位置でも $\sum_{m=0}^{t} \frac{1}{t+1} = 1$ です。
# これは定数で、位置の情報を含みません。
# 2 層目をどう選んでも助けにはなりません。入力によっては、情報がすでに失われているからです。
# 同じトークンだけが並ぶ系列では、因果的な層のどの位置にも同じキーとバリューが見えるので、どの位置も同じ出力を計算します。
# 帰納法により、後のどの層でも同じです。
# BOS トークンがうまくいったのは、その内容がほかのトークンと違うからです。
# 上の 2 層のモデルは、同じトークンを 12 個並べた系列では、どの位置にも同じ出力を返します。
# 先頭のトークンだけを変えると、位置ごとに違う出力を返します。
# Chi ら（2023）は、位置エンコーディングのない学習済みの因果的なモデルで、これと関連した位置情報の漏れを指摘しています。
# 位置が進むほど平均を取るトークンが増えるので、その平均の分散は縮みます。そのため分散を見るだけで、後の層にはおおよその位置がわかります。

# %% tags=["solution"]
marked = torch.randn(T, d, dtype=f64)
marked[:, 0] = 1.0  # the marker on every token
h_const = attention(zero_q, marked @ w_k, marked @ w_v, causal=True)[:, 0]
assert_close(h_const, torch.ones(T, dtype=f64))  # 1 at every t

repeated = torch.randn(d, dtype=f64).expand(12, d).clone()  # one token
out = nope(repeated, causal=True)
assert_close(out, out[:1].expand(12, d))  # the same output everywhere
repeated[0] = torch.randn(d, dtype=f64)  # a different first token
out = nope(repeated, causal=True)
assert not torch.allclose(out[5], out[6])


# %% [markdown] lang="en"
# ## Sources and versions
#
# Sun et al. is read in arXiv v1 (through a text transcription): $\zeta_i$ is written
# with $i/(d/2)$ for $2i/d$ (eq. 9), raised to the position itself ($B = 1$,
# Algorithm 1), and no value of $\gamma$ is printed (§3.2 says it was set by hand);
# the window of blocks of $l/2$ is §3.3, the perplexities Tables 2 and 5.
# $\gamma = 0.4$ and $B = 512$ are torchscale's `XPOS` (on which the paper's code is
# based) and lucidrains'; lucidrains' KV cache is described from its source.
#
# ### References
#
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - Code: torchscale's `XPOS` (<https://github.com/microsoft/torchscale>); lucidrains'
#   `rotary-embedding-torch` (<https://github.com/lucidrains/rotary-embedding-torch>).
# - Sun, Y. et al. (2023). *Retentive Network: A Successor to Transformer for Large
#   Language Models*. <https://arxiv.org/abs/2307.08621>
# - Wang, J. et al. (2024). *Length Generalization of Causal Transformers without
#   Position Encoding*. <https://arxiv.org/abs/2404.12224>
# - Chi, T.-C. et al. (2023). *Latent Positional Information is in the Self-Attention
#   Variance of Transformer Language Models Without Positional Embeddings*.
#   <https://arxiv.org/abs/2305.13571>
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional Encodings
#   Still Learn Positional Information*. <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. <https://arxiv.org/abs/2305.19466>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# Sun らの論文は arXiv v1 をテキストに起こしたもので読みました。論文は $\zeta_i$ を $2i/d$ の代わりに $i/(d/2)$ で書き（式 9）、位置そのものを指数にしています（$B = 1$、アルゴリズム 1）。$\gamma$ の値は載っていません（§3.2 は人手で決めたとしています）。
# 長さ $l/2$ のブロックのウィンドウは §3.3、パープレキシティは表 2 と表 5 です。
# $\gamma = 0.4$ と $B = 512$ は torchscale の `XPOS`（論文のコードのもと）と lucidrains の値で、lucidrains の KV キャッシュの扱いはソースから読み取りました。
#
# ### 参考文献
#
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - コード：torchscale の `XPOS`（<https://github.com/microsoft/torchscale>）、lucidrains の
#   `rotary-embedding-torch`（<https://github.com/lucidrains/rotary-embedding-torch>）。
# - Sun, Y. et al. (2023). *Retentive Network: A Successor to Transformer for Large
#   Language Models*. <https://arxiv.org/abs/2307.08621>
# - Wang, J. et al. (2024). *Length Generalization of Causal Transformers without
#   Position Encoding*. <https://arxiv.org/abs/2404.12224>
# - Chi, T.-C. et al. (2023). *Latent Positional Information is in the Self-Attention
#   Variance of Transformer Language Models Without Positional Embeddings*.
#   <https://arxiv.org/abs/2305.13571>
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional Encodings
#   Still Learn Positional Information*. <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. <https://arxiv.org/abs/2305.19466>
