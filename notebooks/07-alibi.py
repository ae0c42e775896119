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
# # ALiBi: attention with linear biases
#
# ALiBi adds no position vector: head $h$ subtracts from every score its
# [slope](../docs/glossary.md#slope) times the distance, $m_h\,(i - j)$, with slopes
# fixed in a geometric sequence.
# A bias linear in the distance is a weight that decays exponentially, so, when the
# content scores are equal, each head looks about $1/m_h$ positions back; nothing in
# the bias refers to a maximum length.
# Any bias that differs from it by a constant per row gives the same attention, which
# is why libraries write it in five forms; only in low precision do the forms differ.

# %% [markdown] lang="ja"
# # ALiBi：線形バイアスによるアテンション
#
# ALiBi は位置ベクトルを使いません。ヘッド $h$ は、すべてのスコアから、[傾き](../docs/glossary.ja.md#slope)と距離の積 $m_h\,(i - j)$ を引きます。傾きは等比数列として固定します。
# 距離に比例するバイアスは、重みで見れば指数的な減衰です。そのため、内容によるスコアが等しければ、各ヘッドはおよそ距離 $1/m_h$ だけ遡って見ます。また、バイアスのどこにも最大長は出てきません。
# これと行ごとの定数だけ違うバイアスは、どれも同じアテンションを与えます。ライブラリによってバイアスの書き方が 5 通りあるのはそのためで、違いが出るのは低精度のときだけです。

# %% tags=["setup"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import alibi_bias, alibi_slopes, attention
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False, linewidth=76)
f64 = torch.float64

# %% [markdown] lang="en"
# ## The bias
#
# A learned table has no row for a position beyond its last one (the chapter
# [*Learned absolute embeddings and scaled sinusoids*](03-learned-embeddings.ipynb)),
# and sinusoids give positions beyond the training length vectors the model never saw
# ([*Sinusoidal positional encoding*](01-sinusoidal.ipynb)). Press, Smith and Lewis
# (2022) drop the position vectors altogether. In every layer, head $h$ adds to the
# score of query $i$ and key $j$ a penalty that grows linearly with their distance:
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j), \qquad j \le i$$
# The slope $m_h > 0$ is fixed before training and never learned (the paper, §3,
# reports that trainable slopes did not extrapolate well). A key at the query's own
# position costs nothing, the previous key $m_h$, the one before $2m_h$, and so on:
# row $i$ of the bias is $-m_h \cdot (i, \dots, 2, 1, 0)$. The bias depends only on
# the distance $i - j$, so ALiBi is a relative position method, and its bias is
# constant along each diagonal.
#
# The letters are the paper's: $m_h$ is the slope of head $h$ and $n$ the number of
# heads (in [*Rotary position embedding (RoPE)*](08-rope.ipynb) $m$ and $n$ are
# positions; see the [notation page](../docs/notation.md#reused-letters)). Positions are counted from
# $0$ (the paper counts from $1$). `posenc.alibi_bias(n, T)` returns the bias of $n$
# heads for $T$ positions, shape `[n, T, T]`, here head 1 of 8 heads, whose slope is
# $m_1 = 1/2$. It holds $-m_h\,(i - j)$ for every pair, also above the diagonal
# ($j > i$), where it is positive: removing those future keys is the
# [causal mask](../docs/glossary.md#causal-mask)'s job, not the bias's.

# %% [markdown] lang="ja"
# ## バイアス
#
# 学習型位置埋め込みの表には、最後の位置より先の行がありません（[「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章）。
# 正弦波位置エンコーディングは、学習時の長さを超える位置に、モデルが見たことのないベクトルを与えます（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章）。
# Press、Smith、Lewis（2022）は、位置ベクトルを使うこと自体をやめました。
# 各層で、ヘッド $h$ はクエリ $i$ とキー $j$ のスコアに、距離に比例して大きくなるペナルティを加えます。
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j), \qquad j \le i$$
# 傾き $m_h > 0$ は学習前に決めて固定し、学習はしません（論文の §3 によれば、傾きを学習可能にすると外挿がうまくいきませんでした）。
# クエリ自身の位置にあるキーのペナルティは 0、1 つ前のキーは $m_h$、2 つ前は $2m_h$ と続きます。
# つまりバイアスの行 $i$ は $-m_h \cdot (i, \dots, 2, 1, 0)$ です。
# バイアスは距離 $i - j$ だけで決まります。したがって ALiBi は相対位置の手法であり、バイアスは各対角線に沿って一定です。
#
# 記号は論文に合わせ、$m_h$ はヘッド $h$ の傾き、$n$ はヘッドの数です（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章では $m$ と $n$ は位置を表します。[記法のページ](../docs/notation.ja.md#reused-letters)を参照）。
# 位置は $0$ から数えます（論文は $1$ から数えます）。
# `posenc.alibi_bias(n, T)` は、$n$ 個のヘッドと $T$ 個の位置についてのバイアスを形状 `[n, T, T]` で返します。下は 8 ヘッドのうちヘッド 1 のもので、傾きは $m_1 = 1/2$ です。
# すべての組に $-m_h\,(i - j)$ が入り、対角線より上（$j > i$）では正の値になります。
# こうした未来のキーを取り除くのは[因果マスク](../docs/glossary.ja.md#causal-mask)の役目で、バイアスの役目ではありません。

# %%
alibi_bias(8, 6)[0]  # head 1 of 8 heads: m = 1/2, six positions

# %% tags=["check"] summary={"en": "alibi_bias is −m_h(i − j); with causal=True, attention is the masked softmax of the formula", "ja": "alibi_bias は −m_h(i − j) です。causal=True のアテンションは、式のスコアにマスクをかけた softmax と一致します"}
n_heads, T, d = 8, 6, 16
q, k, v = torch.randn(3, n_heads, T, d).unbind(0)  # [h, T, d] each
m = alibi_slopes(n_heads)[:, None, None]  # [h, 1, 1]
i = torch.arange(T)[:, None]  # query positions
j = torch.arange(T)[None, :]  # key positions
bias = alibi_bias(n_heads, T)  # [h, i, j]
assert_close(bias, -m * (i - j))  # -m_h (i - j)
scores = q @ k.transpose(-2, -1) / math.sqrt(d) - m * (i - j)
weights = torch.softmax(scores.masked_fill(j > i, -math.inf), dim=-1)
assert_close(attention(q, k, v, bias=bias, causal=True), weights @ v)
assert_close(bias[:, 1:, 1:], bias[:, :-1, :-1])  # constant along diagonals
assert not bias.diagonal(dim1=-2, dim2=-1).any()  # zero at distance 0
assert (bias[:, j > i] > 0).all()  # positive above the diagonal
assert bias[0, -1].tolist() == [-2.5, -2.0, -1.5, -1.0, -0.5, 0.0]

# %% [markdown] lang="en"
# ## The slopes: a geometric sequence
#
# The paper (§3) chooses, for $n$ heads,
# $$m_h = 2^{-8h/n}, \qquad h = 1, \dots, n$$
# a geometric sequence that starts at $m_1 = 2^{-8/n}$ and has that same value as its
# ratio, $m_{h+1}/m_h = 2^{-8/n}$. Whatever $n$ is, the formula's last slope is
# $m_n = 2^{-8} = 1/256$. With 8 heads the slopes are
# $\frac{1}{2}, \frac{1}{4}, \dots, \frac{1}{256}$; the authors chose this set by hand
# from about ten they tried (§3, footnote 11).
#
# Doubling the heads keeps the old slopes and inserts one between each pair. With
# $2n$ heads the exponent is $-8h/(2n)$, so the even-numbered slopes are the old ones,
# $m^{(2n)}_{2h} = m^{(n)}_h$, and each odd-numbered slope is the geometric mean of
# its neighbours, $m^{(2n)}_{2h-1} = \sqrt{m^{(n)}_{h-1}\, m^{(n)}_h}$ (with
# $m^{(n)}_0 = 1$). The paper describes its 16-head slopes this way: the 8-head
# slopes, geometrically averaged pair by pair.

# %% [markdown] lang="ja"
# ## 傾き：等比数列
#
# 論文（§3）は、$n$ 個のヘッドに対して次の傾きを選びます。
# $$m_h = 2^{-8h/n}, \qquad h = 1, \dots, n$$
# これは $m_1 = 2^{-8/n}$ から始まり、同じ値を公比とする等比数列で、$m_{h+1}/m_h = 2^{-8/n}$ です。
# $n$ が何であっても、この式の最後の傾きは $m_n = 2^{-8} = 1/256$ です。
# 8 ヘッドなら傾きは $\frac{1}{2}, \frac{1}{4}, \dots, \frac{1}{256}$ です。この組は、著者らが 10 組ほど試したうちから人手で選んだものです（§3 の脚注 11）。
#
# ヘッドを 2 倍にすると、元の傾きはそのまま残り、隣り合う 2 つの間に 1 つずつ傾きが入ります。
# $2n$ ヘッドでは指数が $-8h/(2n)$ なので、偶数番目の傾きは元の傾き $m^{(2n)}_{2h} = m^{(n)}_h$ です。
# 奇数番目の傾きは両隣の幾何平均 $m^{(2n)}_{2h-1} = \sqrt{m^{(n)}_{h-1}\, m^{(n)}_h}$ になります（$m^{(n)}_0 = 1$ とします）。
# 論文は 16 ヘッドの傾きを、まさにこのように説明しています。8 ヘッドの傾きを、隣り合う組ごとに幾何平均で補ったものです。

# %%
s8 = alibi_slopes(8)
print("n = 8: " + ", ".join(f"1/{1 / x:g}" for x in s8.tolist()), end="")

# %% tags=["check"] summary={"en": "the slopes are 2^(−8h/n), from 2^(−8/n) to 1/256; doubling the heads inserts geometric means", "ja": "傾きは 2^(−8h/n)（2^(−8/n) から 1/256 まで）で、ヘッドを 2 倍にすると間に幾何平均が入ります"}
for n in (1, 2, 4, 8, 16, 32, 64, 128):
    s = alibi_slopes(n, dtype=f64)
    h = torch.arange(1, n + 1, dtype=f64)
    assert_close(s, 2.0 ** (-8 * h / n))  # m_h = 2^(-8h/n)
    ratio = torch.tensor(2.0 ** (-8 / n), dtype=f64)
    assert_close(s[0], ratio)  # starts at 2^(-8/n) ...
    assert_close(s[1:] / s[:-1], ratio.expand(n - 1))  # ... with that ratio
    assert s[-1] == 2.0**-8  # powers of two: the last slope is 1/256
    # doubling the heads: the even-numbered slopes are the old ones, the
    # odd-numbered ones the geometric means of their neighbours
    s2 = alibi_slopes(2 * n, dtype=f64)
    assert_close(s2[1::2], s)  # m^(2n)_(2h) = m^(n)_h
    prev = torch.cat([torch.ones(1, dtype=f64), s[:-1]])  # m_(h-1), m_0 = 1
    assert_close(s2[0::2], (prev * s).sqrt())
assert s8.tolist() == [2.0**-h for h in range(1, 9)]  # 1/2, ..., 1/256

# %% [markdown] lang="en"
# ## Head counts that are not a power of two
#
# The formula $2^{-8h/n}$ makes sense for any $n$, and the paper's text gives it for
# any $n$. The official code (`get_slopes` in the authors' fork of fairseq) does not
# use it when $n$ is not a power of two: its comment explains that the paper only
# trains models with $2^a$ heads and that the sequence has good properties only for
# powers of two. `posenc`, BLOOM, MPT, x-transformers and labml follow the code.
# Write $n = 2^k + r$ with $0 < r < 2^k$. The first $2^k$ heads get the slopes of $2^k$
# heads, and the remaining $r$ heads get every other slope of the sequence for
# $2^{k+1}$ heads, starting with the first:
# $$m_{2^k + i} = 2^{-8(2i-1)/2^{k+1}}, \qquad i = 1, \dots, r$$
# Every other slope, because the even-numbered slopes of $2^{k+1}$ heads repeat
# those of $2^k$ heads; the odd-numbered ones are the new geometric means. So the $n$
# slopes are $n$ of the $2^{k+1}$ slopes: all of those for $2^k$ heads, then the
# steepest $r$ of the means.
#
# For 12 heads, $k = 3$ and $r = 4$: heads 1 to 8 get $2^{-1}, \dots, 2^{-8}$, and
# heads 9 to 12 get $2^{-0.5}, 2^{-1.5}, 2^{-2.5}, 2^{-3.5}$; the four gentlest means,
# $2^{-4.5}, \dots, 2^{-7.5}$, are left out. The slopes are no longer sorted: head 9
# is steeper than head 1, and the last head has $2^{-3.5}$, though the gentlest slope
# is still $1/256$ (head 8), for any $n$. The paper's formula would give $2^{-2h/3}$ instead, twelve
# sorted slopes from $2^{-2/3}$ down to $2^{-8}$, none equal to the code's slope of
# the same head. The figure puts $1/m_h$ against the head for 8, 12 and 16 heads:
# for 12 heads the first 8 points follow the 8-head line, then heads 9 to 12 jump
# back and fill in half steps. BLOOM (176B parameters) has $112 = 64 + 48$ heads, so
# its slopes run from $2^{-8}$ (head 64) up to $2^{-1/16}$ (head 65).

# %% [markdown] lang="ja"
# ## ヘッド数が 2 のべき乗でない場合
#
# 式 $2^{-8h/n}$ はどんな $n$ でも意味を持ち、論文の本文もどの $n$ にもこの式を与えています。
# しかし公式実装（著者らによる fairseq のフォークの `get_slopes`）は、$n$ が 2 のべき乗でないときにはこの式を使いません。
# コードのコメントは理由を 2 つ挙げています。論文で学習したのは $2^a$ 個のヘッドのモデルだけであること、そしてこの数列がよい性質を持つのは 2 のべき乗のときだけであることです。
# `posenc`、BLOOM、MPT、x-transformers、labml はこのコードに従います。
# $0 < r < 2^k$ として $n = 2^k + r$ と書きます。
# 最初の $2^k$ 個のヘッドには $2^k$ ヘッドの傾きを、残りの $r$ 個には $2^{k+1}$ ヘッドの数列の傾きを最初のものから 1 つおきに使います。
# $$m_{2^k + i} = 2^{-8(2i-1)/2^{k+1}}, \qquad i = 1, \dots, r$$
# 1 つおきなのは、$2^{k+1}$ ヘッドの偶数番目の傾きが $2^k$ ヘッドの傾きの繰り返しで、奇数番目が新しい幾何平均だからです。
# したがって $n$ 個の傾きは $2^{k+1}$ 個の傾きのうちの $n$ 個で、$2^k$ ヘッドの傾きすべてと、幾何平均のうち急なものから $r$ 個です。
#
# 12 ヘッドでは $k = 3$、$r = 4$ です。ヘッド 1 から 8 は $2^{-1}, \dots, 2^{-8}$、ヘッド 9 から 12 は $2^{-0.5}, 2^{-1.5}, 2^{-2.5}, 2^{-3.5}$ で、最もゆるやかな 4 つの幾何平均 $2^{-4.5}, \dots, 2^{-7.5}$ は使われません。
# 傾きは大きさの順に並ばなくなり、ヘッド 9 はヘッド 1 より急です。最後のヘッドの傾きは $2^{-3.5}$ ですが、最もゆるやかな傾きはどの $n$ でも $1/256$ です（12 ヘッドではヘッド 8）。
# 論文の式なら $2^{-2/3}$ から $2^{-8}$ まで順に並ぶ 12 個の傾き $2^{-2h/3}$ となり、どのヘッドでもコードの傾きと一致しません。
# 図は 8、12、16 ヘッドの $1/m_h$ をヘッド番号に対して描いたものです。12 ヘッドでは最初の 8 点が 8 ヘッドの線に乗り、ヘッド 9〜12 は小さい値に戻って 8 ヘッドの点の間（半歩の位置）を埋めます。
# BLOOM（1760 億パラメータ）はヘッドが $112 = 64 + 48$ 個あるので、傾きは $2^{-8}$（ヘッド 64）から $2^{-1/16}$（ヘッド 65）までにわたります。

# %%
s12 = alibi_slopes(12, dtype=f64)
paper12 = 2.0 ** (-8 * torch.arange(1, 13, dtype=f64) / 12)  # the paper's text
print("log2 m_h, 12 heads")
for name, s in (("code", s12), ("paper", paper12)):
    print(f"  {name:6s}" + "".join(f"{math.log2(x):6.2f}" for x in s.tolist()))

# %% tags=["figure"] alt={"en": ["1/m_h against head number h for 8, 12 and 16 heads, log axis. 8 and 16 heads lie on straight lines ending at 256; 12 heads follow the 8-head line for heads 1–8, then drop back and fill half steps from about 1.4 to 11 for heads 9–12."], "ja": ["8、12、16 ヘッドについて、1/m_h をヘッド番号 h に対して対数軸で描いた図。8 と 16 ヘッドは 256 で終わる直線に並びます。12 ヘッドはヘッド 1〜8 で 8 ヘッドの線に乗り、ヘッド 9〜12 は小さい値に戻り、約 1.4〜11 の間で 8 ヘッドの点の間（半歩の位置）を埋めます。"]}
fig, ax = plt.subplots(figsize=(6.4, 2.8))
styles = {  # 8 heads: hollow circles on top, so the 12-head points show
    8: {"fmt": "o-", "ms": 8, "mfc": "none", "zorder": 3},
    12: {"fmt": "^:", "ms": 5, "zorder": 2},
    16: {"fmt": "s--", "ms": 4, "zorder": 1},
}
for n, style in styles.items():
    fmt = style.pop("fmt")
    ax.plot(
        range(1, n + 1),
        1 / alibi_slopes(n),
        fmt,
        lw=1,
        label=f"$n = {n}$",
        **style,
    )
ax.set_yscale("log", base=2)
ax.set(xlabel="$h$", ylabel="$1/m_h$", xticks=range(1, 17))
ax.legend(loc="lower right")
plt.show()


# %% tags=["check"] summary={"en": "posenc equals the official get_slopes for n = 1 to 128; the 12-head and BLOOM slopes are as stated", "ja": "posenc は n = 1〜128 で公式の get_slopes と一致し、12 ヘッドと BLOOM の傾きは本文どおりです"}
def official_slopes(n):
    """The official get_slopes (fairseq/models/transformer.py), restated."""
    p = 2 ** math.floor(math.log2(n))  # largest power of two <= n
    start = 2 ** (-(2 ** -(math.log2(p) - 3)))  # the code's start, 2^(-8/p)
    first = [start * start**i for i in range(p)]  # start, times the ratio start
    if p == n:
        return first
    return first + official_slopes(2 * p)[::2][: n - p]  # every other of 2p


for n in range(1, 129):
    s = alibi_slopes(n, dtype=f64)
    assert_close(s, torch.tensor(official_slopes(n), dtype=f64))
    k_pow = n.bit_length() - 1  # n = 2^k + r
    r = n - 2**k_pow
    assert_close(s[: 2**k_pow], alibi_slopes(2**k_pow, dtype=f64))
    i_extra = torch.arange(1, r + 1, dtype=f64)
    assert_close(
        s[2**k_pow :], 2.0 ** (-8 * (2 * i_extra - 1) / 2 ** (k_pow + 1))
    )
    # the n slopes are n of the 2^(k+1) slopes
    wider = alibi_slopes(2 ** (k_pow + 1), dtype=f64)
    assert all(torch.isclose(x, wider).any() for x in s)
    assert s.min() == 2.0**-8  # the gentlest slope is 1/256 for any n

# 12 heads: each value, as a power of two
exponents = [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]
assert_close(s12, 2.0 ** torch.tensor(exponents, dtype=f64), rtol=1e-15, atol=0)
missing = sorted(
    set(alibi_slopes(16, dtype=f64).tolist()) - set(s12.tolist()), reverse=True
)
assert_close(
    torch.tensor(missing, dtype=f64),
    2.0 ** torch.tensor([-4.5, -5.5, -6.5, -7.5], dtype=f64),
)
assert s12[8] > s12[0]  # head 9 is steeper than head 1
assert not torch.isclose(s12, paper12).any()  # no head gets the paper's slope

# BLOOM's 112 heads: 64 + 48
s112 = alibi_slopes(112, dtype=f64)
assert_close(s112[:64], alibi_slopes(64, dtype=f64))
assert_close(s112[64:], alibi_slopes(128, dtype=f64)[0::2][:48])
assert s112.argmin() == 63 and s112.argmax() == 64
assert s112[63] == 2.0**-8 and math.isclose(s112[64], 2 ** (-1 / 16))

# %% [markdown] lang="en"
# <!-- explorable: 07-alibi -->
# *On the website, an interactive figure takes the place of this note: the
# slopes for any head count from 1 to 128, and the bias of one head.*

# %% [markdown] lang="ja"
# <!-- explorable: 07-alibi -->
# サイトでは、この注記の場所に対話的な図があります。1 から 128 までの任意のヘッド数での傾きと、1 つのヘッドのバイアスを表示します。

# %% [markdown] lang="en"
# ## How far each head looks
#
# To see what the slope alone does, make every content score equal (for instance a
# zero query). Then the weights come from the bias alone. The last query of a row of
# $L$ keys gives the key at distance $k = i - j$ the weight
# $$w_h(k) = \frac{e^{-m_h k}}{\sum_{l=0}^{L-1} e^{-m_h l}} = \frac{(1 - e^{-m_h})\, e^{-m_h k}}{1 - e^{-m_h L}}$$
# (the sum is a geometric series with ratio $e^{-m_h}$). Each step back multiplies the
# weight by $e^{-m_h}$: a bias that is linear in the distance is a weight that decays
# exponentially, a straight line on a logarithmic axis. The bias reaches $-1$ at the
# distance $k = 1/m_h$, where the weight has fallen to $1/e$ of the nearest key's; it
# halves every $\ln 2 / m_h$ positions. On a long row ($e^{-m_h L} \approx 0$) the
# mean distance is
# $$\sum_{k \ge 0} k\, w_h(k) = \frac{1}{e^{m_h} - 1} \approx \frac{1}{m_h}$$
# (the mean of geometric weights with ratio $r = e^{-m_h}$ is $r/(1 - r)$). With 8 heads, $1/m_h$ is $2, 4, \dots, 256$: each head looks twice as far back as the
# one before. In the figure head 1 puts almost all its weight on the last few keys,
# while head 8 spreads it over hundreds; the dots mark $k = 1/m_h$. The table gives
# the mean distances on a row of 8192 keys, long enough for the limit; as the slope
# shrinks they approach $1/m_h - 1/2$ (head 8: 255.5), as $e^{m_h} - 1 \approx m_h + m_h^2/2$
# and $1/(1 + x) \approx 1 - x$.

# %% [markdown] lang="ja"
# ## 各ヘッドはどこまで見るか
#
# 傾きだけの働きを見るために、内容によるスコアをすべて等しくします（たとえばクエリを 0 にします）。このとき重みはバイアスだけで決まります。
# $L$ 個のキーが並ぶ行で、最後のクエリが距離 $k = i - j$ のキーに与える重みは次のとおりです。
# $$w_h(k) = \frac{e^{-m_h k}}{\sum_{l=0}^{L-1} e^{-m_h l}} = \frac{(1 - e^{-m_h})\, e^{-m_h k}}{1 - e^{-m_h L}}$$
# 分母は公比 $e^{-m_h}$ の等比級数です。1 つ遡るごとに重みは $e^{-m_h}$ 倍になります。
# 距離に比例するバイアスは重みで見れば指数的な減衰で、片対数グラフでは直線です。
# バイアスが $-1$ になるのは距離 $k = 1/m_h$ で、そこでは重みが最も近いキーの $1/e$ まで下がっています。重みは距離が $\ln 2 / m_h$ 増えるごとに半減します。
# 十分に長い行（$e^{-m_h L} \approx 0$）では、距離の平均は次のとおりです。
# $$\sum_{k \ge 0} k\, w_h(k) = \frac{1}{e^{m_h} - 1} \approx \frac{1}{m_h}$$
# 公比 $r = e^{-m_h}$ の等比数列の重みでは、距離の平均が $r/(1 - r)$ になるからです。
# 8 ヘッドでは $1/m_h$ が $2, 4, \dots, 256$ で、各ヘッドは 1 つ前のヘッドの 2 倍遠くまで遡ります。
# 図では、ヘッド 1 は重みのほとんどを直前の数個のキーに置き、ヘッド 8 は数百個に広げています。点は $k = 1/m_h$ の位置です。
# 表は十分に長い 8192 個のキーの行での平均距離です。傾きが小さくなるほど、平均距離は $1/m_h - 1/2$ に近づきます（ヘッド 8 では 255.5）。
# $e^{m_h} - 1 \approx m_h + m_h^2/2$ と $1/(1 + x) \approx 1 - x$ からわかります。

# %%
n_heads, L, d = 8, 1024, 16
m = alibi_slopes(n_heads, dtype=f64)[:, None]  # [h, 1]
q0 = torch.zeros(n_heads, 1, d, dtype=f64)  # a zero query: equal contents
keys = torch.randn(n_heads, L, d, dtype=f64)
bias_row = alibi_bias(n_heads, 1, L, dtype=f64)  # the last query of L keys
out = attention(q0, keys, torch.eye(L, dtype=f64), bias=bias_row, causal=True)
w = out[:, 0].flip(-1)  # [h, k]: values = identity, so the weights themselves

w_long = torch.softmax(alibi_bias(n_heads, 1, 8192, dtype=f64)[:, 0], dim=-1)
mean = (w_long.flip(-1) * torch.arange(8192, dtype=f64)).sum(-1)  # 8192 keys
span = (1 / m).squeeze(1)  # 1/m_h
print(" h  1/m_h  ln2/m_h   mean")
for h in range(n_heads):
    x = span[h].item()
    print(f"{h + 1:>2}  {x:>5.0f}  {x * math.log(2):7.1f}  {mean[h]:6.1f}")

# %% tags=["figure"] alt={"en": ["Attention weight of each of ALiBi's 8 heads against the distance k up to 300, log axis: straight lines of slope −m_h, steep for head 1 and nearly flat for head 8; dots mark k = 1/m_h, from 2 to 256."], "ja": ["ALiBi の 8 個のヘッドそれぞれのアテンションの重みを、距離 k（0〜300）に対して対数軸で描いた図。傾き −m_h の直線で、ヘッド 1 は急に落ち、ヘッド 8 はほぼ平らです。点は k = 1/m_h（2〜256）の位置です。"]}
dist = torch.arange(L, dtype=f64)
k_span = span.long()
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for h in range(n_heads):
    (line,) = ax.plot(dist, w[h], lw=1.2, label=f"$h = {h + 1}$")
    ax.plot(k_span[h], w[h, k_span[h]], "o", ms=4, color=line.get_color())
    # the head's number where its line leaves the plot: eight colours are
    # hard to match with a legend alone
    inside = (w[h] >= 1e-6).nonzero()[-1].item()  # last k on the plot
    end = (min(inside, 300), max(w[h, min(inside, 300)].item(), 1e-6))
    nudge = {n_heads - 2: -4, n_heads - 1: 4}.get(h, 0)  # 7 and 8 end close
    ax.annotate(
        f"${h + 1}$",
        end,
        xytext=(3, 2) if inside < 300 else (4, nudge),
        textcoords="offset points",
        fontsize=9,
        va="bottom" if inside < 300 else "center",
    )
ax.set(
    yscale="log",
    ylim=(1e-6, 1),
    xlim=(0, 300),
    xlabel="$k = i - j$",
    ylabel="$w_h(k)$",
)
ax.legend(ncols=2, loc="upper right")
plt.show()

# %% tags=["check"] summary={"en": "the weights are w_h(k), 1/e at k = 1/m_h; the long-row means are 1/(e^(m_h) − 1)", "ja": "重みは w_h(k) で、k = 1/m_h で 1/e、長い行での平均は 1/(e^(m_h) − 1) です"}
closed = (1 - torch.exp(-m)) * torch.exp(-m * dist) / (1 - torch.exp(-m * L))
assert_close(w, closed)  # w_h(k)
assert_close(w[:, 1:] / w[:, :-1], torch.exp(-m).expand(-1, L - 1))  # e^(-m_h)
assert span.tolist() == [2.0**h for h in range(1, 9)]
assert_close(
    w.gather(1, k_span[:, None])[:, 0] / w[:, 0],
    torch.full((8,), math.e**-1, dtype=f64),
)
assert_close(mean, 1 / torch.expm1(m[:, 0]))  # 1 / (e^m - 1)
assert_close(mean[-1], span[-1] - 0.5, rtol=0, atol=1e-3)  # 1/m - 1/2


# %% [markdown] lang="en"
# ## Only the differences within a row matter
#
# Adding the same number $c$ to every score of a row does not change its softmax:
# $$\mathrm{softmax}(x + c)_j = \frac{e^{x_j + c}}{\sum_l e^{x_l + c}} = \frac{e^{c}\, e^{x_j}}{e^{c} \sum_l e^{x_l}} = \mathrm{softmax}(x)_j$$
# and $-m_h\,(i - j) = m_h\, j - m_h\, i$, where $m_h\, i$ is the same for the whole
# row $i$. So every bias that differs from $-m_h\,(i - j)$ by a constant per row gives
# the same attention, and the implementations use several:
#
# - the paper and `posenc`: $-m_h\,(i - j)$;
# - the official code and BLOOM: $m_h\, j$, one row for all queries (BLOOM counts $j$
#   over the non-padding tokens only);
# - labml: $m_h\,(j + 1)$ on the visible keys, the cumulative sum of the causal mask;
# - MPT: $m_h\,(j - (T - 1))$, zero at the last key;
# - x-transformers, and `posenc` with `causal=False`: $-m_h\,|i - j|$.
#
# The last form is symmetric, which also lets an encoder use ALiBi. That is community
# practice (x-transformers, MPT when not causal, MosaicBERT), not the paper's, which
# evaluates ALiBi only in causal language models. Under the causal mask it needs no
# constant at all: for $j \le i$, $|i - j| = i - j$, so it equals the causal bias on
# every key the mask keeps, and the future keys, where the two differ, are replaced
# by $-\infty$ in both. The constant must be the same across a row: a bias that varies
# differently with $j$, such as $-m_h\, j$ (a flipped sign), changes the attention.
# The forms are equal in exact arithmetic, not once rounded. A form that grows with
# the position ($m_h\, j$, labml's) gives neighbouring keys the same bias far enough
# along a row: $m_h\, j$ with power-of-two slopes from $j = 2048$ on in float16
# (Exercise 3 finds where in bfloat16). The forms
# that are zero at the query itself (the paper's and the symmetric one) keep the nearby
# keys, which carry the weight, close to $0$, where rounding is fine
# ([the first note below](#deeper-the-forms-differ-in-low-precision)).
#
# The figure shows three of the forms for head 1 ($m_1 = 1/2$) and $T = 8$, future
# keys included; the staircase marks the causal mask, which removes everything above
# it. The paper's bias is constant along diagonals, the official code's along
# columns, and the symmetric bias is the paper's mirrored into the upper triangle.

# %% [markdown] lang="ja"
# ## 効くのは行の中の差だけ
#
# 行のすべてのスコアに同じ数 $c$ を足しても、softmax は変わりません。
# $$\mathrm{softmax}(x + c)_j = \frac{e^{x_j + c}}{\sum_l e^{x_l + c}} = \frac{e^{c}\, e^{x_j}}{e^{c} \sum_l e^{x_l}} = \mathrm{softmax}(x)_j$$
# そして $-m_h\,(i - j) = m_h\, j - m_h\, i$ で、$m_h\, i$ は行 $i$ 全体で同じ値です。
# したがって、$-m_h\,(i - j)$ と行ごとの定数だけ違うバイアスは、どれも同じアテンションになります。実装によって使う形はさまざまです。
#
# - 論文と `posenc`：$-m_h\,(i - j)$。
# - 公式実装と BLOOM：$m_h\, j$。すべてのクエリで同じ 1 行を使います（BLOOM はパディングでないトークンだけを数えて $j$ とします）。
# - labml：見えるキーについて $m_h\,(j + 1)$。因果マスクの累積和から作ります。
# - MPT：$m_h\,(j - (T - 1))$。最後のキーで 0 になります。
# - x-transformers と、`causal=False` の `posenc`：$-m_h\,|i - j|$。
#
# 最後の形は対称なので、エンコーダでも ALiBi を使えます。
# これはコミュニティで広まった使い方（x-transformers、因果的でないときの MPT、MosaicBERT）で、論文は因果的な言語モデルでしか評価していません。
# 因果マスクの下では、この形には定数すら要りません。$j \le i$ では $|i - j| = i - j$ なので、マスクが残すキーではすべて因果的なバイアスと一致し、両者が異なる未来のキーはどちらも $-\infty$ に置き換えられます。
# ただし定数は行の中で同じでなければなりません。$j$ に対する変わり方が違うバイアス、たとえば正負を取り違えた $-m_h\, j$ は、アテンションを変えてしまいます。
# これらの形は、厳密な計算では等しくても、丸めると等しくなりません。
# 位置とともに大きくなる形（$m_h\, j$ や labml の形）では、行の先のほうで、隣り合うキーにやがて同じバイアスが付きます。傾きが 2 のべき乗の $m_h\, j$ なら、float16 では $j = 2048$ 以降でそうなります（bfloat16 でどこからそうなるかは演習 3 で求めます）。
# クエリ自身の位置で 0 になる形（論文の形と、左右対称な形）では、重みの大部分を受け持つ近くのキーのバイアスが $0$ の近くにとどまるので、丸めても問題ありません（下の最初の[「さらに詳しく」](#deeper-低精度では形によって結果が変わる)）。
#
# 図はヘッド 1（$m_1 = 1/2$）、$T = 8$ の 3 つの形を、未来のキーも含めて描いたものです。階段状の線は因果マスクで、その上側はすべて取り除かれます。
# 論文のバイアスは対角線に沿って、公式実装のバイアスは列に沿って一定で、対称なバイアスは論文のバイアスを上三角に折り返したものです。

# %% tags=["figure"] alt={"en": ["Three 8 × 8 heatmaps of ALiBi biases for head 1, query i down, key j across, a staircase marking the causal mask: −m(i−j) is constant along diagonals, m·j along columns, and −m|i−j| mirrors the first above the diagonal."], "ja": ["ヘッド 1 の ALiBi バイアスの 3 つの 8 × 8 ヒートマップ（縦はクエリ i、横はキー j）。階段状の線が因果マスクの境界です。−m(i−j) は対角線に沿って、m·j は列に沿って一定で、−m|i−j| は最初のものを対角線の上側に折り返した形です。"]}
T8 = 8
panels = {
    "$-m(i-j)$": alibi_bias(8, T8)[0],  # head 1 of 8: m = 1/2
    "$mj$": alibi_slopes(8)[0] * torch.arange(T8).float().expand(T8, T8),
    "$-m|i-j|$": alibi_bias(8, T8, causal=False)[0],
}
fig, axes = plt.subplots(1, 3, figsize=(6.4, 2.6), sharey=True)
stairs_x = [x for c in range(T8) for x in (c - 0.5, c + 0.5)]
stairs_y = [y for c in range(T8) for y in (c - 0.5, c - 0.5)]
for ax, (title, b) in zip(axes, panels.items(), strict=True):
    im = ax.imshow(b, cmap="RdBu_r", vmin=-4, vmax=4, interpolation="nearest")
    ax.plot(stairs_x, stairs_y, color="black", lw=1.5)
    ax.set(
        title=title,
        xlabel="$j$",
        xticks=range(0, T8, 2),
        yticks=range(0, T8, 2),
    )
    ax.grid(False)
axes[0].set_ylabel("$i$")
fig.colorbar(im, ax=axes, shrink=0.8)
plt.show()

# %% tags=["check"] summary={"en": "the five forms differ by a row constant on the visible keys and give one output; −m_h·j does not", "ja": "5 つの形は見えるキーで行ごとの定数だけ違い、出力は同じです。−m_h·j は出力を変えます"}
n_heads, T, d = 8, 10, 16
q, k, v = torch.randn(3, n_heads, T, d).unbind(0)
m = alibi_slopes(n_heads)[:, None, None]
i = torch.arange(T)[:, None]
j = torch.arange(T)[None, :]
visible = j <= i  # what the causal mask keeps
forms = {
    "paper, posenc": alibi_bias(n_heads, T),  # -m (i - j)
    "official, BLOOM": m * j,  # one row for every query
    "labml": m * visible.cumsum(-1),  # m (j + 1) on the visible keys
    "MPT": m * (j - (T - 1)),
    "x-transformers": -m * (i - j).abs(),
    "posenc causal=False": alibi_bias(n_heads, T, causal=False),
}
reference = attention(q, k, v, bias=forms["paper, posenc"], causal=True)
for name, b in forms.items():
    # a constant per row on the visible keys ...
    gap = (b - forms["paper, posenc"]).expand(n_heads, T, T)
    row_const = torch.where(visible, gap, gap[..., :1])
    assert_close(row_const, gap[..., :1].expand(n_heads, T, T), msg=name)
    # ... so the same attention
    assert_close(attention(q, k, v, bias=b, causal=True), reference, msg=name)

# the symmetric and causal biases agree on the visible keys, differ on the rest
sym, causal_bias = forms["posenc causal=False"], forms["paper, posenc"]
assert torch.equal(sym[:, visible], causal_bias[:, visible])
assert (sym[:, ~visible] != causal_bias[:, ~visible]).all()
# a bias that is not a row constant away changes the attention
flipped = attention(q, k, v, bias=-m * j, causal=True)
assert not torch.allclose(flipped, reference, atol=1e-3)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the forms differ in low precision.** Equal in exact arithmetic, the
# forms are not equal once rounded. The official form $m_h\, j$ grows with the
# position: at $j = 2047$ and $m = 1/2$ it is about 1024, where bfloat16 numbers are 4
# or 8 apart, so neighbouring keys, which differ by $m = 1/2$, get the same rounded
# bias. The paper's form keeps the nearby keys, which carry the weight, close to $0$,
# where bfloat16 is fine, and so does the symmetric form, equal to it on every key the
# mask keeps. Hugging Face's `build_alibi_tensor` casts its $m_h\, j$ bias
# to the dtype it is given. Rounding both forms to bfloat16 for one head and
# $T = 2048$, the largest error in the attention weights against float64 is 4.0e-57
# for the paper's form and 0.49 for $m_h\, j$.
#
# The problem is not BLOOM's alone: the official README trains with `--fp16`, and
# fairseq's `buffered_future_mask` casts the bias $m_h\, j$ to the activations'
# float16 (`self._future_mask.to(tensor)`). With 11 significant bits and the paper's
# power-of-two slopes (8 heads), $m_h\, j$ is exact up to $j = 2047$; from $j = 2048$
# on, neighbouring keys get the same bias in every head, so the README's 3072-token
# setting, which keeps `--fp16`, trained its last 1024 positions with this rounding.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：低精度では形によって結果が変わる**
#
# これらの形は、厳密な計算では等しくても、丸めると等しくなりません。
# 公式実装の形 $m_h\, j$ は位置とともに大きくなります。$j = 2047$、$m = 1/2$ では約 1024 で、そのあたりの bfloat16 の数は 4 や 8 の間隔でしか並んでいません。
# そのため、$m = 1/2$ しか違わない隣り合うキーに、丸めると同じバイアスが付きます。
# 論文の形では、重みを担う近くのキーのバイアスが $0$ の近くにとどまり、bfloat16 でも問題ありません。対称な形も、マスクが残すキーでは論文の形と等しいので、同じく問題ありません。
# Hugging Face の `build_alibi_tensor` は、$m_h\, j$ のバイアスを渡された dtype に変換します。
# 1 ヘッド、$T = 2048$ について両方の形を bfloat16 に丸めると、アテンションの重みの float64 に対する最大誤差は、論文の形では 4.0e-57、$m_h\, j$ では 0.49 です。
#
# これは BLOOM だけの問題ではありません。公式実装の README は `--fp16` で学習し、fairseq の `buffered_future_mask` はバイアス $m_h\, j$ を活性値の float16 に変換します（`self._future_mask.to(tensor)`）。
# 傾きが 2 のべき乗（8 ヘッド）なら、有効桁 11 ビットの float16 でも $m_h\, j$ は $j = 2047$ まで正確です。
# しかし $j = 2048$ から先は、どのヘッドでも隣り合うキーに同じバイアスが付きます。
# README の 3072 トークンの設定も `--fp16` を指定したままなので、最後の 1024 個の位置はこの丸めを受けたまま学習されています。

# %% tags=["deeper"]
T_long = 2048
visible_long = torch.ones(T_long, T_long, dtype=torch.bool).tril()


def weights_of(b):  # softmax over the visible keys, in float64
    return torch.softmax(
        b.to(f64).masked_fill(~visible_long, -math.inf), dim=-1
    )


m1 = float(alibi_slopes(8)[0])  # head 1 of 8 heads: m = 1/2
pos = torch.arange(T_long, dtype=f64)
paper_form = -m1 * (pos[:, None] - pos[None, :])  # as alibi_bias(8, T)[0]
assert_close(paper_form[:64, :64].float(), alibi_bias(8, 64)[0])
official_form = m1 * pos.expand(T_long, T_long)  # m j
exact = weights_of(paper_form)
assert_close(weights_of(official_form), exact)  # equal in float64
err_paper = (weights_of(paper_form.bfloat16()) - exact).abs().max()
sym_form = -m1 * (pos[:, None] - pos[None, :]).abs()  # -m |i - j|
sym_weights = weights_of(sym_form.bfloat16())
assert torch.equal(sym_weights, weights_of(paper_form.bfloat16()))
err_official = (weights_of(official_form.bfloat16()) - exact).abs().max()
assert err_paper < 1e-6 < 0.1 < err_official
print(f"bfloat16 bias -m(i-j): max error {err_paper:.1e}")
print(f"bfloat16 bias m j:     max error {err_official:.2f}")

# the official code with --fp16: m_h j built in float32, cast to float16
j16 = torch.arange(4096)
bias16 = (alibi_slopes(8)[:, None] * j16).half()  # slopes 2^-1 .. 2^-8
same16 = bias16[:, 1:] == bias16[:, :-1]  # [h, j]: equal neighbours
first16 = [int(row.nonzero()[0]) for row in same16]
assert first16 == [2048] * 8
exact16 = alibi_slopes(8, dtype=f64)[:, None] * j16[:2048]
assert (bias16[:, :2048].double() == exact16).all()  # exact up to 2047
bias_bf = (alibi_slopes(8)[:, None] * j16).bfloat16()  # 8 significant bits
same_bf = bias_bf[:, 1:] == bias_bf[:, :-1]
assert [int(row.nonzero()[0]) for row in same_bf] == [256] * 8
print(f"float16 bias m j: equal neighbours from j = {first16[0]}", end="")

# %% [markdown] lang="en"
# ## Queries at the end of the keys: a KV cache
#
# When a decoder generates with a [KV cache](../docs/glossary.md#kv-cache), the $L_q$
# new queries are the last tokens of a sequence of $L_k$ keys: query $i$ sits at
# position $i + L_k - L_q$, and its bias is
# $$-m_h\,(i + L_k - L_q - j)$$
# `alibi_bias(n, L_q, L_k)` uses this alignment, and so does `posenc.attention` with
# `causal=True`: the last 4 queries against 12 keys give the last 4 rows of the full
# computation, and generating one token at a time gives every row.
#
# Placing the new queries at positions $0, \dots, L_q - 1$ instead is a tempting slip.
# For the causal bias it happens to do no harm: the wrong bias $-m_h\,(i - j)$ exceeds
# the right one by $m_h\,(L_k - L_q)$, the same for every key of a row, and the
# previous section showed that such a constant changes nothing. This is why BLOOM and
# MPT can use one bias row for all queries. The slip does harm elsewhere: a causal
# mask placed that way hides keys the queries should see, and the rows of the
# symmetric bias $-m_h\,|i - j|$ change shape, not only level.

# %% [markdown] lang="ja"
# ## キーの末尾に並ぶクエリ：KV キャッシュ
#
# デコーダが [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使って生成するとき、$L_q$ 個の新しいクエリは、$L_k$ 個のキーからなる系列の最後のトークンです。
# クエリ $i$ は位置 $i + L_k - L_q$ にあり、そのバイアスは次のようになります。
# $$-m_h\,(i + L_k - L_q - j)$$
# `alibi_bias(n, L_q, L_k)` はこの位置合わせを使い、`causal=True` の `posenc.attention` も同じです。
# 12 個のキーに対する最後の 4 個のクエリは全体を計算したときの最後の 4 行に一致し、1 トークンずつ生成すればすべての行に一致します。
#
# 新しいクエリを位置 $0, \dots, L_q - 1$ に置いてしまうのは、ありがちな誤りです。
# 因果的なバイアスでは、たまたま害がありません。
# 誤ったバイアス $-m_h\,(i - j)$ は正しいバイアスより $m_h\,(L_k - L_q)$ だけ大きく、この差は行のどのキーでも同じです。前の節で示したとおり、このような定数は何も変えません。
# BLOOM や MPT がすべてのクエリに同じ 1 行のバイアスを使えるのは、このためです。
# ただし、ほかの箇所ではこの誤りが問題になります。因果マスクを同じようにずらして置くと、クエリが見るべきキーまで隠してしまいます。
# また対称なバイアス $-m_h\,|i - j|$ の場合、行の値が一律にずれるのではなく、行の形そのものが変わります。

# %% tags=["check"] summary={"en": "queries at the end of the keys match the full pass; misplaced, only the causal bias is harmless", "ja": "末尾に置いたクエリは全体の計算と一致し、置き違えて無害なのは因果的なバイアスだけです"}
n_heads, L_k, L_q, d = 8, 12, 4, 16
q, k, v = torch.randn(3, n_heads, L_k, d).unbind(0)
m = alibi_slopes(n_heads)[:, None, None]
full = attention(q, k, v, bias=alibi_bias(n_heads, L_k), causal=True)

i = torch.arange(L_q)[:, None]
j = torch.arange(L_k)[None, :]
cached_bias = alibi_bias(n_heads, L_q, L_k)
assert_close(cached_bias, -m * (i + L_k - L_q - j))  # -m_h (i + L_k - L_q - j)
assert_close(cached_bias, alibi_bias(n_heads, L_k)[:, -L_q:])
last4 = attention(q[:, -L_q:], k, v, bias=cached_bias, causal=True)
assert_close(last4, full[:, -L_q:])
for t in range(L_k):  # one token at a time: query t against keys 0..t
    kv = k[:, : t + 1], v[:, : t + 1]
    bias_t = alibi_bias(n_heads, 1, t + 1)
    step = attention(q[:, t : t + 1], *kv, bias=bias_t, causal=True)
    assert_close(step, full[:, t : t + 1])

# queries wrongly placed at positions 0..L_q-1
wrong_bias = -m * (i - j)
gap = wrong_bias - cached_bias
assert_close(gap, (m * (L_k - L_q)).expand_as(gap))  # a row constant ...
wrong = attention(q[:, -L_q:], k, v, bias=wrong_bias, causal=True)
assert_close(wrong, last4)  # ... harmless
wrong_mask = cached_bias.masked_fill(j > i, -math.inf)  # mask at 0..L_q-1
masked = attention(q[:, -L_q:], k, v, bias=wrong_mask)
assert not torch.allclose(masked, last4, atol=1e-3)
full_sym = attention(q, k, v, bias=alibi_bias(n_heads, L_k, causal=False))
right_sym = alibi_bias(n_heads, L_q, L_k, causal=False)
sym_out = attention(q[:, -L_q:], k, v, bias=right_sym)
assert_close(sym_out, full_sym[:, -L_q:])
wrong_sym = attention(q[:, -L_q:], k, v, bias=-m * (i - j).abs())
assert not torch.allclose(wrong_sym, full_sym[:, -L_q:], atol=1e-3)

# %% [markdown] lang="en"
# ## Extrapolation: train short, test long
#
# Nothing in the bias refers to a maximum length. The bias for a longer sequence
# contains the bias for a shorter one as its top-left block, and the row of the last
# query, read by distance, is the same at any length. A query deep inside a long input
# sees, in every head, the same penalties by distance as during training. Keys
# further back than any training distance get larger penalties than any seen in
# training, and so little weight in all but the gentlest heads. With uniform content,
# a row of 2048 keys after training on 512 puts at most 0.0183 of its weight (head 7)
# at distances of 512 or more in heads 1 to 7, and 0.1350 in head 8 ($m_8 = 1/256$).
#
# This is the paper's title. Its Figure 1 shows models trained on WikiText-103 with
# inputs of $L = 512$ or $1024$ tokens and evaluated on longer inputs: the perplexity
# of the sinusoidal, rotary and [T5-bias](06-t5-buckets.ipynb) models degrades as the
# inputs grow past the training length, and ALiBi's does not. The abstract reports a
# 1.3-billion-parameter model trained on 1024 tokens that, tested on 2048, matches
# the perplexity of a sinusoidal model trained on 2048, while training 11% faster and
# using 11% less memory.
#
# The paper's own analysis (its Appendix B, in [the note below](#deeper-where-the-gain-beyond-the-training-length-comes-from)) attributes most of the
# gain at $L_{\mathrm{valid}} > L$ to nonoverlapping evaluation, in which longer
# segments leave fewer tokens with little context. The chapter
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb) puts
# [extrapolation](../docs/glossary.md#extrapolation) to the test on small models.
# Models that use ALiBi include BLOOM (its 176B model has 112 heads, so the official
# rule for other head counts is at work) and MPT (MPT-7B: 32 heads, with the
# paper's slopes).

# %% [markdown] lang="ja"
# ## 外挿：短く学習し、長い入力で評価する
#
# バイアスのどこにも最大長は出てきません。
# 長い系列のバイアスは短い系列のバイアスを左上のブロックとして含み、最後のクエリの行を距離で読むと長さによらず同じです。
# 長い入力の後ろのほうにあるクエリも、どのヘッドでも学習中と同じ距離ごとのペナルティを受けます。
# 学習中のどの距離よりも遠いキーには学習中より大きなペナルティが付くので、最もゆるやかなヘッド以外ではほとんど重みがかかりません。
# 長さ 512 で学習したモデルが 2048 個のキーの行を読むとします。
# 内容によるスコアが一様なら、距離 512 以上にかかる重みはヘッド 1〜7 で最大 0.0183（ヘッド 7）、ヘッド 8（$m_8 = 1/256$）で 0.1350 です。
#
# これが論文の題名（Train Short, Test Long）の意味です。
# 論文の図 1 は、WikiText-103 で長さ $L = 512$ または $1024$ の入力で学習し、より長い入力で評価したモデルを示しています。
# 正弦波位置エンコーディング、回転位置埋め込み（RoPE）、T5 のバイアス（[「T5 の相対位置バケット」](06-t5-buckets.ipynb)の章）のモデルは、学習時より長い入力でパープレキシティが悪化します。ALiBi のモデルは悪化しません。
# 要旨によれば、1024 トークンで学習した 13 億パラメータのモデルは、2048 トークンで評価すると 2048 トークンで学習した正弦波のモデルと同じパープレキシティに達します。
# しかも学習は 11% 速く、メモリは 11% 少なく済みます。
#
# ただし論文自身の分析（付録 B、下の[「さらに詳しく」](#deeper-学習時の長さを超えたときの改善はどこから来るか)）は、$L_{\mathrm{valid}} > L$ での改善の大部分を、重ならない窓での評価によるものとしています。窓が長いほど、文脈の乏しいトークンが減るからです。
# [外挿](../docs/glossary.ja.md#extrapolation)は、[「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章で小さなモデルを使って確かめます。
# ALiBi を使うモデルには BLOOM と MPT があります。
# BLOOM の 1760 億パラメータのモデルは 112 ヘッドなので、公式実装の、2 のべき乗でないヘッド数の規則が使われます。MPT-7B は 32 ヘッドで、論文と同じ傾きです。

# %%
w_2048 = torch.softmax(alibi_bias(8, 1, 2048, dtype=f64)[:, 0], dim=-1)
beyond = w_2048.flip(-1)[:, 512:].sum(-1)  # distances 512 .. 2047, per head
print("weight at distance >= 512:\n" + " ".join(f"{x:.4f}" for x in beyond))

# %% tags=["check"] summary={"en": "a short bias is the top-left block of a long one; weights beyond 512 are below 0.02 in heads 1–7", "ja": "短いバイアスは長いバイアスの左上のブロックで、距離 512 以上にかかる重みはヘッド 1〜7 で 0.02 未満です"}
short, long_ = alibi_bias(8, 64), alibi_bias(8, 512)
assert_close(long_[:, :64, :64], short)  # the short bias is the top-left block
# the last query's row, by distance, is the same at any length
assert_close(alibi_bias(8, 1, 512)[..., -64:], alibi_bias(8, 1, 64))
m = alibi_slopes(8, dtype=f64)
tail = torch.exp(-m * 512) * (1 - torch.exp(-m * 1536))
assert_close(beyond, tail / (1 - torch.exp(-m * 2048)))
assert beyond[:7].max() < 0.02 < 0.1 < beyond[7]
assert int(beyond[:7].argmax()) == 6
assert [round(float(x), 4) for x in beyond[6:]] == [0.0183, 0.135]

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where the gain beyond the training length comes from.** The
# paper's perplexities use nonoverlapping evaluation, in which the first tokens of
# every segment have little context (the "early token curse"), and longer segments
# leave fewer such tokens. With sliding-window evaluation, which gives every
# prediction a full window, the perplexity of the ALiBi models stays roughly flat as
# $L_{\mathrm{valid}}$ grows past $L$ (Appendix B); the authors conclude that the gain
# comes mostly from easing the early token curse, not from using contexts longer than
# those of training.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：学習時の長さを超えたときの改善はどこから来るか**
#
# 論文のパープレキシティは重ならない窓での評価で測っており、各窓の最初のほうのトークンにはわずかな文脈しかありません。これが先頭トークンの呪い（early token curse）です。
# 窓が長くなれば、そうしたトークンの割合は減ります。
# すべての予測に窓いっぱいの文脈を与えるスライディングウィンドウ評価では、$L_{\mathrm{valid}}$ が $L$ を超えても ALiBi のモデルのパープレキシティはほぼ横ばいです（付録 B）。
# 著者らは、改善の大部分は先頭トークンの呪いが和らぐことによるもので、学習時より長い文脈を使えるからではないと結論しています。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the implementations, rebuilt with posenc.** All the implementations
# read here use the same slopes up to float32 rounding, but they compute them in
# different ways, and so round differently. The official code writes the first slope
# as `2**(-2**-(math.log2(n)-3))`, that is $2^{-2^{-(\log_2 n - 3)}}$, which is
# $2^{-8/n}$ because $2^{-(\log_2 n - 3)} = 2^3 / 2^{\log_2 n} = 8/n$.
#
# Hugging Face's BLOOM (`build_alibi_tensor`) rounds the base $2^{-8/2^k}$ to float32
# and raises it to the integer powers $1, \dots, 2^k$; the remaining heads get odd
# powers of the rounded base for $2^{k+1}$ heads. Raising the base to the power $p$
# multiplies its relative rounding error by about $p$, so for every $n \ge 11$ some of its slopes
# differ from those of `alibi_slopes`, which rounds each slope once, by up to a
# relative $6.6 \times 10^{-7}$.
#
# MPT, labml and x-transformers reach the official rule by other routes (table below);
# all of them, restated here, agree with `posenc` for $n = 1, \dots, 128$ within a
# relative $10^{-6}$ and no absolute tolerance.
#
# | | bias added (causal) | slopes, $n$ not a power of two | queries with a cache |
# |---|---|---|---|
# | paper (§3) | $-m_h\,(i - j)$ | $2^{-8h/n}$, the same formula for every $n$ | not discussed |
# | `posenc` | $-m_h\,(i - j)$ | the official code's rule | aligned to the end of the keys |
# | official code (fairseq fork) | $m_h\, j$, cast to the activations' dtype (float16 with the README's `--fp16`) | `get_slopes`, the rule's source | no bias: it lives in the future mask, not built when decoding incrementally |
# | BLOOM (Hugging Face) | $m_h\, j$, $j$ over non-padding tokens, cast to the model's dtype | same values to a relative $7 \times 10^{-7}$ (float32 powers of a rounded base) | one row for all queries |
# | MPT (llm-foundry) | $m_h\,(j - (T - 1))$; $-m_h\,\lvert i - j\rvert$ when not causal | same values to float32 rounding for `alibi_bias_max=8` | one row for all queries |
# | labml | $m_h\,(j + 1)$, from the causal mask | the official rule since July 2022, same values to float32 rounding (before: the paper's $2^{-8h/n}$) | not handled |
# | x-transformers | $-m_h\,\lvert i - j\rvert$ | the official `get_slopes`, copied; ALiBi can be limited to some heads | aligned to the end of the keys |

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：各実装を posenc で再現する**
#
# ここで読んだ実装は、float32 の丸めの範囲で同じ傾きを使いますが、計算の仕方が違うので、丸め方も違います。
# 公式実装は最初の傾きを `2**(-2**-(math.log2(n)-3))`、つまり $2^{-2^{-(\log_2 n - 3)}}$ と書いています。
# $2^{-(\log_2 n - 3)} = 2^3 / 2^{\log_2 n} = 8/n$ なので、これは $2^{-8/n}$ です。
#
# Hugging Face の BLOOM（`build_alibi_tensor`）は、底 $2^{-8/2^k}$ を float32 に丸め、それを $1, \dots, 2^k$ 乗します。
# 残りのヘッドには、$2^{k+1}$ ヘッドの丸めた底の奇数乗を使います。
# 底を $p$ 乗すると、底の相対的な丸め誤差はおよそ $p$ 倍になります。
# そのため $n \ge 11$ では必ず、いくつかの傾きが `alibi_slopes` の値（各傾きを 1 回だけ丸めたもの）からずれます。ずれは相対誤差で最大 $6.6 \times 10^{-7}$ です。
#
# MPT、labml、x-transformers は、別の道筋で公式実装の規則にたどり着きます（下の表）。
# ここで書き直したどの実装も、$n = 1, \dots, 128$ について、相対許容誤差 $10^{-6}$、絶対許容誤差なしで `posenc` と一致します。
#
# | | 足すバイアス（因果的） | 2 のべき乗でない $n$ の傾き | キャッシュ時のクエリ |
# |---|---|---|---|
# | 論文（§3） | $-m_h\,(i - j)$ | $2^{-8h/n}$（どの $n$ でも同じ式） | 記述なし |
# | `posenc` | $-m_h\,(i - j)$ | 公式実装の規則 | キーの末尾に合わせた位置 |
# | 公式実装（fairseq のフォーク） | $m_h\, j$（活性値の dtype に変換。README の `--fp16` では float16） | `get_slopes`（規則の出典） | バイアスなし（バイアスは未来を隠すマスクの中にあり、逐次デコードではそのマスクを作らないため） |
# | BLOOM（Hugging Face） | $m_h\, j$（$j$ はパディング以外のトークンだけで数えた位置。モデルの dtype に変換） | 相対誤差 $7 \times 10^{-7}$ 以内で同じ値（丸めた底の float32 でのべき乗） | すべてのクエリで同じ 1 行 |
# | MPT（llm-foundry） | $m_h\,(j - (T - 1))$、因果的でないときは $-m_h\,\lvert i - j\rvert$ | `alibi_bias_max=8` なら float32 の丸めの範囲で同じ値 | すべてのクエリで同じ 1 行 |
# | labml | $m_h\,(j + 1)$（因果マスクから作成） | 2022 年 7 月から公式実装の規則で、float32 の丸めの範囲で同じ値（それ以前は論文の $2^{-8h/n}$） | 未対応 |
# | x-transformers | $-m_h\,\lvert i - j\rvert$ | 公式実装の `get_slopes` をそのままコピーしたもの。ALiBi を一部のヘッドだけに使うことも可能 | キーの末尾に合わせた位置 |


# %% tags=["deeper", "check"] summary={"en": "the official start is 2^(−8/n); BLOOM's, MPT's and labml's slopes, restated, equal posenc's for n = 1 to 128 within a relative 10⁻⁶; BLOOM's float32 powers differ for every n ≥ 11, by at most 6.6 × 10⁻⁷; where transformers is installed, build_alibi_tensor gives the restated BLOOM slopes bit for bit", "ja": "公式実装の最初の傾きは 2^(−8/n) です。書き直した BLOOM、MPT、labml の傾きは、n = 1 から 128 で相対誤差 10⁻⁶ 以内で posenc と一致します。BLOOM の float32 のべき乗では、n ≥ 11 ならどの n でも一部の傾きがずれ、そのずれは相対誤差で最大 6.6 × 10⁻⁷ です。transformers がある環境では、build_alibi_tensor は書き直した BLOOM の傾きとビット単位で一致します"}
def bloom_slopes(n):  # Hugging Face's build_alibi_tensor slopes, restated
    p = 2 ** math.floor(math.log2(n))
    start = 2 ** (-(2 ** -(math.log2(p) - 3)))  # 2^(-8/p), in float64
    base = torch.tensor(start, dtype=torch.float32)  # rounded once
    slopes = torch.pow(base, torch.arange(1, p + 1, dtype=torch.int32))
    if p < n:  # odd powers of the float32 base for 2p heads
        start_2p = 2 ** (-(2 ** -(math.log2(2 * p) - 3)))
        base_2p = torch.tensor(start_2p, dtype=torch.float32)
        odd = torch.arange(1, 2 * (n - p), 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(base_2p, odd)])
    return slopes


def mpt_slopes(n, alibi_bias_max=8):  # llm-foundry's gen_slopes, restated
    p = 2 ** math.ceil(math.log2(n))  # the next power of two >= n
    h = torch.arange(1, p + 1, dtype=torch.float32)
    slopes = 1.0 / 2 ** (h * (alibi_bias_max / p))  # 2^(-b h / n')
    if p > n:  # even-numbered h first (those of p/2 heads), then odd, first n
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:n]
    return slopes


def labml_slopes(n_heads):  # labml's get_slopes since July 2022, restated
    p = 2 ** math.floor(math.log2(n_heads))
    slopes = (2.0 ** (-8.0 / p)) ** torch.arange(1, p + 1)
    if p == n_heads:
        return slopes
    odd = torch.arange(1, 2 * (n_heads - p), 2)  # odd powers of 2^(-4/p)
    return torch.cat([slopes, (2.0 ** (-4.0 / p)) ** odd])


for n in (1, 2, 4, 8, 16, 32, 64, 128):  # the official start is 2^(-8/n)
    assert math.isclose(2 ** (-(2 ** -(math.log2(n) - 3))), 2 ** (-8 / n))

strict = dict(rtol=1e-6, atol=0)
for n in range(1, 129):
    for rebuilt in (bloom_slopes, mpt_slopes, labml_slopes):
        assert_close(rebuilt(n).float(), alibi_slopes(n), **strict)

# BLOOM's float32 powers against slopes rounded once
rel_max = 0.0
for n in range(1, 129):
    ours, hf = alibi_slopes(n), bloom_slopes(n)
    diff = (hf.double() - ours.double()).abs()
    assert (diff.max() > 0) == (n >= 11)  # every n >= 11, no smaller n
    rel_max = max(rel_max, (diff / ours.double()).max().item())
assert 6.5e-7 < rel_max < 6.6e-7

try:  # Hugging Face's own function, where transformers is installed
    with warnings.catch_warnings():  # its import warns about tqdm
        warnings.simplefilter("ignore")
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor
except ImportError:  # the downloaded notebook needs only posenc
    build_alibi_tensor = None
if build_alibi_tensor is not None:
    for n in range(1, 129):  # the bias at key position 1 is the slope itself
        hf = build_alibi_tensor(torch.ones(1, 2), n, torch.float32)[:, 0, 1]
        assert torch.equal(hf, bloom_slopes(n))  # bit for bit


# %% [markdown] lang="en"
# ## What to remember
#
# - ALiBi adds no position vector: head $h$ adds $-m_h\,(i - j)$ to the score of
#   query $i$ and key $j$, with a slope fixed before training.
# - The paper's slopes are $m_h = 2^{-8h/n}$: from $2^{-8/n}$ down to $1/256$, and
#   doubling the heads inserts the geometric means.
# - For a head count that is not a power of two, the official code (and `posenc`,
#   BLOOM, MPT, labml) takes the slopes of $2^k$ heads and then every other slope of
#   $2^{k+1}$ heads, so the slopes are no longer sorted.
# - A slope is a decay of the weights, $e^{-m_h}$ per step back: with equal content
#   scores head $h$ looks about $1/m_h$ positions back on average
#   ($1/(e^{m_h} - 1)$ exactly, on a long row).
# - Any bias that differs from $-m_h\,(i - j)$ by a constant per row gives the same
#   attention ($m_h\, j$, $m_h\,(j + 1)$, and under the causal mask $-m_h\,|i - j|$);
#   in bfloat16 and float16 the forms that grow with the position give the nearby keys
#   of a long row the same bias; the forms that are zero at the query round only far
#   keys, which carry little weight.
# - With a KV cache the queries sit at the end of the keys; a misplaced causal bias
#   happens to do no harm, a misplaced mask or symmetric bias does.
# - The bias has no maximum length, and far keys get little weight; by the paper's
#   own analysis, its gains past the training length come mostly from easing the
#   [early token curse](../docs/glossary.md#early-token-curse) (the first tokens of
#   each window have little context).

# %% [markdown] lang="ja"
# ## まとめ
#
# - ALiBi は位置ベクトルを使いません。ヘッド $h$ は、クエリ $i$ とキー $j$ のスコアに $-m_h\,(i - j)$ を足します。傾きは学習前に決めて固定します。
# - 論文の傾きは $m_h = 2^{-8h/n}$ で、$2^{-8/n}$ から $1/256$ まで下がります。ヘッドを 2 倍にすると幾何平均が間に入ります。
# - ヘッド数が 2 のべき乗でない場合、公式実装（と `posenc`、BLOOM、MPT、labml）は $2^k$ ヘッドの傾きを使い、続けて $2^{k+1}$ ヘッドの傾きを 1 つおきに使います。
#   そのため傾きは大きさの順に並びません。
# - 傾きは重みの減衰を表し、1 つ遡るごとに重みは $e^{-m_h}$ 倍になります。内容のスコアが等しければ、ヘッド $h$ は平均しておよそ距離 $1/m_h$ だけ遡ります（長い行では正確に $1/(e^{m_h} - 1)$ です）。
# - $-m_h\,(i - j)$ と行ごとの定数だけ違うバイアスは、どれも同じアテンションになります（$m_h\, j$、$m_h\,(j + 1)$、因果マスクの下での $-m_h\,|i - j|$）。
#   bfloat16 や float16 では、位置とともに大きくなる形だと、長い行の近くのキーどうしに同じバイアスが付いてしまいます。クエリ自身の位置で 0 になる形なら、丸めの影響を受けるのは重みの小さい遠いキーだけです。
# - KV キャッシュではクエリをキーの末尾に合わせます。因果的なバイアスの置き場所を誤ってもたまたま害はありませんが、マスクや対称なバイアスでは害があります。
# - バイアスには最大長がなく、遠いキーにはほとんど重みがかかりません。論文自身の分析によれば、学習時の長さを超えたときの改善は、主に[先頭トークンの呪い](../docs/glossary.ja.md#early-token-curse)（各窓の先頭のトークンには使える文脈が少ないこと）が和らぐことによるものです。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. For $n = 2^k + r$ heads, which slopes of the $2^{k+1}$-head sequence are left out?
#    Check your answer with `alibi_slopes` for $n = 5$, $12$, $24$ and $112$.
# 2. Use `alibi_bias(n, T, causal=False)` as the only positional signal of a
#    bidirectional attention. Show that reversing the order of the tokens reverses
#    the output rows. What can such an encoder not tell apart?
# 3. With a bias formed as $m_h\, j$ and rounded to bfloat16, find the first position
#    $j$ at which two neighbouring keys of head 1 of 8 heads ($m_1 = 1/2$) get the same
#    bias. Does the paper's form have such a position?
# 4. Show that the mean distance $1/(e^{m_h} - 1)$ lies between $1/m_h - 1$ and
#    $1/m_h$. Which of BLOOM's 112 heads looks furthest back on average?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $n = 2^k + r$ 個のヘッドでは、$2^{k+1}$ ヘッドの数列のうちどの傾きが使われないでしょうか。
#    $n = 5$、$12$、$24$、$112$ について `alibi_slopes` で答えを確かめてください。
# 2. 双方向のアテンションで、`alibi_bias(n, T, causal=False)` だけを位置の信号として使います。
#    トークンの順序を逆にすると、出力の行も逆順になることを示してください。
#    このようなエンコーダが区別できないものは何でしょうか。
# 3. $m_h\, j$ の形で作って bfloat16 に丸めたバイアスについて、8 ヘッドのヘッド 1（$m_1 = 1/2$）で、
#    隣り合う 2 つのキーに同じバイアスが付く最初の位置 $j$ を求めてください。
#    論文の形にも、そのような位置はあるでしょうか。
# 4. 平均距離 $1/(e^{m_h} - 1)$ が $1/m_h - 1$ と $1/m_h$ の間にあることを示してください。
#    BLOOM の 112 個のヘッドのうち、平均して最も遠くまで遡るのはどれでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** The $2^{k+1}$-head sequence is $2^{-8l/2^{k+1}}$, $l = 1, \dots, 2^{k+1}$.
# Its even-numbered slopes are those of $2^k$ heads, and all of them are used. Of its
# odd-numbered slopes, $l = 2i - 1$, the rule takes the first $r$. So the left-out
# slopes are the odd-numbered ones with $i = r + 1, \dots, 2^k$:
# $$2^{-8(2i-1)/2^{k+1}}, \qquad i = r + 1, \dots, 2^k$$
# the $2^k - r$ gentlest geometric means, $2^{k+1} - n$ slopes in all. For $n = 5$
# ($k = 2$, $r = 1$) they are $2^{-3}, 2^{-5}, 2^{-7}$; for $n = 12$ the four of the text;
# for $n = 24$ the eight from $2^{-4.25}$ to $2^{-7.75}$; for BLOOM's $n = 112$ the
# sixteen from $2^{-97/16}$ to $2^{-127/16}$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $2^{k+1}$ ヘッドの数列は $2^{-8l/2^{k+1}}$、$l = 1, \dots, 2^{k+1}$ です。
# 偶数番目の傾きは $2^k$ ヘッドの傾きで、これはすべて使われます。
# 奇数番目の傾き $l = 2i - 1$ については、規則が最初の $r$ 個だけを使います。
# したがって使われないのは、$i = r + 1, \dots, 2^k$ の奇数番目の傾きです。
# $$2^{-8(2i-1)/2^{k+1}}, \qquad i = r + 1, \dots, 2^k$$
# これは幾何平均のうち最もゆるやかな $2^k - r$ 個で、全部で $2^{k+1} - n$ 個です。
# $n = 5$（$k = 2$、$r = 1$）なら $2^{-3}, 2^{-5}, 2^{-7}$、$n = 12$ なら本文の 4 個、
# $n = 24$ なら $2^{-4.25}$ から $2^{-7.75}$ までの 8 個、BLOOM の $n = 112$ なら $2^{-97/16}$ から $2^{-127/16}$ までの 16 個です。

# %% tags=["solution"]
for n in (5, 12, 24, 112):
    k_pow = n.bit_length() - 1
    r = n - 2**k_pow
    used = alibi_slopes(n, dtype=f64)
    wider = alibi_slopes(2 ** (k_pow + 1), dtype=f64)
    left_out = [x for x in wider if not torch.isclose(x, used).any()]
    i = torch.arange(r + 1, 2**k_pow + 1, dtype=f64)
    expected = 2.0 ** (-8 * (2 * i - 1) / 2 ** (k_pow + 1))
    assert_close(torch.stack(left_out), expected)
    exps = [f"{math.log2(x):.4g}" for x in left_out]
    shown = ", ".join(exps) if len(exps) <= 4 else f"{exps[0]}, ..., {exps[-1]}"
    print(f"n = {n}: {len(left_out)} left out, log2 = {shown}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Let $J$ be the matrix that reverses the order of $T$ tokens,
# $(JX)_i = X_{T-1-i}$. The symmetric bias $B_{ij} = -m_h\,|i - j|$ satisfies
# $(JBJ)_{ij} = -m_h\,|(T-1-i) - (T-1-j)| = B_{ij}$. Reversing the input reverses
# the queries, keys and values, so the scores become
# $J\,(QK^\top/\sqrt{d})\,J + B = J\,(QK^\top/\sqrt{d} + B)\,J$. A row-wise softmax commutes with reordering rows and
# columns, and $J J = I$, so the output is
# $J\,\mathrm{softmax}(QK^\top/\sqrt{d} + B)\,J\,JV = J \cdot \text{output}$: the rows
# come out reversed. Such an encoder cannot tell left from right: a key $k$ positions
# before a query gets the same bias as one $k$ positions after it. A causal
# attention, by contrast, does not reverse its output rows.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** $T$ 個のトークンの順序を逆にする行列を $J$ とします。$(JX)_i = X_{T-1-i}$ です。
# 対称なバイアス $B_{ij} = -m_h\,|i - j|$ は $(JBJ)_{ij} = -m_h\,|(T-1-i) - (T-1-j)| = B_{ij}$ を満たします。
# 入力を逆順にするとクエリ、キー、バリューも逆順になるので、スコアは $J\,(QK^\top/\sqrt{d})\,J + B = J\,(QK^\top/\sqrt{d} + B)\,J$ になります。
# 行ごとの softmax は行と列の並べ替えと可換で、$J J = I$ なので、出力は
# $J\,\mathrm{softmax}(QK^\top/\sqrt{d} + B)\,J\,JV = J \cdot \text{output}$ です。つまり行が逆順で出てきます。
# このようなエンコーダは左と右を区別できません。クエリの $k$ 個前のキーと $k$ 個後ろのキーに、同じバイアスが付くからです。
# 一方、因果的なアテンションでは、出力の行は逆順になりません。

# %% tags=["solution"]
T, d = 9, 16
x = torch.randn(4, T, d, dtype=f64)  # 4 heads, content = the token vectors
sym = alibi_bias(4, T, causal=False, dtype=f64)
out = attention(x, x, x, bias=sym)
out_reversed = attention(x.flip(1), x.flip(1), x.flip(1), bias=sym)
assert_close(out_reversed, out.flip(1))  # rows come out reversed
causal_bias = alibi_bias(4, T, dtype=f64)
causal_out = attention(*[x.flip(1)] * 3, bias=causal_bias, causal=True)
causal_fwd = attention(x, x, x, bias=causal_bias, causal=True)
assert not torch.allclose(
    causal_out, causal_fwd.flip(1)
)  # a causal one can tell

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With $m_1 = 1/2$ the bias $m_1 j = j/2$ is a multiple of $1/2$.
# bfloat16 keeps 8 significant bits, so between $2^e$ and $2^{e+1}$ its numbers are
# $2^{e-7}$ apart: every multiple of $1/2$ below $128$ is exact, and from $128$ on the
# numbers are $1$ apart. The first collision is therefore at $j/2 = 128$: key $256$ gets
# $128$ and key $257$, with $128.5$ exactly halfway, rounds to the even neighbour $128$
# as well. So $j = 256$. The paper's form $-m_1\,(i - j)$ has the same collisions, but
# at a distance of 256 from the query instead of at position 256: the keys near the
# query, which carry almost all of head 1's weight, keep exact biases at every position.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** $m_1 = 1/2$ なので、バイアス $m_1 j = j/2$ は $1/2$ の倍数です。
# bfloat16 の有効桁は 8 ビットなので、$2^e$ から $2^{e+1}$ の間では表せる数の間隔が $2^{e-7}$ です。
# $128$ 未満の $1/2$ の倍数はすべて正確に表せますが、$128$ から先は間隔が $1$ になります。
# したがって最初の衝突は $j/2 = 128$ で起きます。キー $256$ は $128$ になり、
# キー $257$ の $128.5$ はちょうど中間なので、偶数側の $128$ に丸められます。つまり $j = 256$ です。
# 論文の形 $-m_1\,(i - j)$ にも同じ衝突はありますが、起きるのは位置 256 ではなくクエリから距離 256 の場所です。
# ヘッド 1 の重みのほとんどを担うクエリ近くのキーは、どの位置でもバイアスが正確に保たれます。

# %% tags=["solution"]
m1 = float(alibi_slopes(8)[0])  # 1/2
j = torch.arange(4096, dtype=f64)
official_bf16 = (m1 * j).bfloat16()  # m j, rounded
first = int((official_bf16[1:] == official_bf16[:-1]).nonzero()[0])
assert first == 256 and official_bf16[256] == official_bf16[257] == 128
query = 4095  # the paper's form, -m (i - j), for the last query
paper_bf16 = (-m1 * (query - j)).bfloat16()
same = (paper_bf16[1:] == paper_bf16[:-1]).nonzero()[:, 0]
nearest = query - int(same.max())  # the collision nearest to the query
assert nearest == 257 and (paper_bf16[-256:] == -m1 * (query - j[-256:])).all()
print(f"m j: first equal neighbours at j = {first}; -m(i - j): nearest equal")
print(f"  neighbours {nearest - 1} and {nearest} positions before the query")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** Upper bound: $e^{m} - 1 > m$ for $m > 0$, so the mean is below $1/m$. Lower bound: for
# $m < 1$, $e^{-m} > 1 - m$ gives $e^{m} < 1/(1 - m)$, so $e^{m} - 1 < m/(1 - m)$ and the
# mean exceeds $(1 - m)/m = 1/m - 1$; for $m \ge 1$ the lower bound is not positive
# and holds trivially. Of BLOOM's 112 heads, the gentlest slope looks furthest back: head
# 64, with $m = 2^{-8}$, at a mean distance of $1/(e^{1/256} - 1) \approx 255.5$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** 上界：$m > 0$ では $e^{m} - 1 > m$ なので、平均は $1/m$ より小さくなります。
# 下界：$m < 1$ では $e^{-m} > 1 - m$ から $e^{m} < 1/(1 - m)$、つまり $e^{m} - 1 < m/(1 - m)$ となり、
# 平均は $(1 - m)/m = 1/m - 1$ より大きくなります。$m \ge 1$ では下界が正でないので自明に成り立ちます。
# BLOOM の 112 個のヘッドのうち、最も遠くまで遡るのは傾きが最もゆるやかなヘッド 64 で、
# $m = 2^{-8}$、平均距離は $1/(e^{1/256} - 1) \approx 255.5$ です。

# %% tags=["solution"]
m = alibi_slopes(112, dtype=f64)
mean = 1 / torch.expm1(m)  # 1 / (e^m - 1)
assert ((1 / m - 1 < mean) & (mean < 1 / m)).all()
k = torch.arange(20000, dtype=f64)  # a long row: the sum, term by term
w = (1 - torch.exp(-m[:, None])) * torch.exp(-m[:, None] * k)
assert_close((w * k).sum(-1), mean)
head = int(mean.argmax()) + 1
assert head == 64 and m[head - 1] == 2.0**-8
print(f"head {head}: m = 2^-8, mean distance {mean.max():.2f}", end="")


# %% [markdown] lang="en"
# ## Sources and versions
#
# The slope rule, its comment and the bias $m_h\, j$ are read from the official code,
# `get_slopes` and `buffered_future_mask` in `fairseq/models/transformer.py` of the
# authors' fork, with the training commands of its README. Hugging Face's
# `build_alibi_tensor` was read in transformers 5.24.0 and 4.57.6; labml's `get_slopes`
# at commits e06a89e2 (August 2021) and 72669d05 (July 2022); MPT's `gen_slopes` and
# `build_alibi_bias` in llm-foundry; MPT-7B's `alibi_bias_max` in its configuration.
# The results on WikiText-103 and the 1.3-billion-parameter model are from Figure 1,
# the abstract and Appendix B of Press et al.
#
# ### References
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - The official code. <https://github.com/ofirpress/attention_with_linear_biases>
# - BigScience Workshop (2022). *BLOOM: A 176B-Parameter Open-Access Multilingual
#   Language Model*. <https://arxiv.org/abs/2211.05100>
# - Hugging Face transformers, `models/bloom/modeling_bloom.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/bloom/modeling_bloom.py>
# - MosaicML llm-foundry (MPT). <https://github.com/mosaicml/llm-foundry>
# - labml.ai, annotated implementation of ALiBi.
#   <https://nn.labml.ai/transformers/alibi/index.html>
# - lucidrains, x-transformers. <https://github.com/lucidrains/x-transformers>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# 傾きの規則とそのコメント、バイアス $m_h\, j$ は、著者らの fairseq のフォークの `fairseq/models/transformer.py` にある `get_slopes` と `buffered_future_mask`、および README の学習コマンドによります。
# Hugging Face の `build_alibi_tensor` は transformers 5.24.0 と 4.57.6 で読みました。
# labml の `get_slopes` はコミット e06a89e2（2021 年 8 月）と 72669d05（2022 年 7 月）で読みました。
# MPT の `gen_slopes` と `build_alibi_bias` は llm-foundry で読みました。
# MPT-7B の `alibi_bias_max` は、その設定ファイルによります。
# WikiText-103 での結果と 13 億パラメータのモデルの結果は、Press らの図 1、要旨、付録 B によります。
#
# ### 参考文献
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - ofirpress：attention_with_linear_biases（公式実装）。
#   <https://github.com/ofirpress/attention_with_linear_biases>
# - BigScience Workshop (2022). *BLOOM: A 176B-Parameter Open-Access Multilingual
#   Language Model*. <https://arxiv.org/abs/2211.05100>
# - Hugging Face transformers：`models/bloom/modeling_bloom.py`。
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/bloom/modeling_bloom.py>
# - MosaicML：llm-foundry（MPT）。<https://github.com/mosaicml/llm-foundry>
# - labml.ai：ALiBi の注釈付き実装。
#   <https://nn.labml.ai/transformers/alibi/index.html>
# - lucidrains：x-transformers。<https://github.com/lucidrains/x-transformers>
