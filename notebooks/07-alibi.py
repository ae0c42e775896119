# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] lang="en"
# # ALiBi: attention with linear biases
#
# A learned table has no row for a position beyond its last one, and sinusoids
# give positions beyond the training length vectors the model never saw. Press,
# Smith and Lewis (2022) drop the position vectors altogether. Their ALiBi
# ("Attention with Linear Biases") adds to every attention score a fixed penalty
# proportional to the distance between query and key, with a different slope in
# each head. This chapter derives the bias and its slopes, including the rule
# for head counts that are not a power of two; shows how far each head looks;
# proves that the five forms of the bias found in common code give the same
# attention; checks the alignment of queries with a KV cache; and rebuilds
# the slopes of the official code, BLOOM, MPT and labml with `posenc`.

# %% [markdown] lang="ja"
# # ALiBi：線形バイアスによるアテンション
#
# 学習型位置埋め込みの表には、最後の行より先の位置がありません。
# 正弦波位置エンコーディングは、学習時の長さを超える位置に、モデルが見たことのないベクトルを与えます。
# Press、Smith、Lewis (2022) は、位置のベクトルそのものをやめました。
# 彼らの ALiBi（Attention with Linear Biases、線形バイアスによるアテンション）は、
# クエリとキーの距離に比例する固定のペナルティを、すべてのアテンションスコアに足します。
# 傾きはヘッドごとに異なります。
# この章では、バイアスとその傾きを導きます。ヘッド数が 2 のべき乗でない場合の規則も扱います。
# 続いて、各ヘッドがどこまで遠くを見るかを示し、よく使われるコードに見られる 5 つの形のバイアスが
# どれも同じアテンションを与えることを証明し、KV キャッシュでのクエリの位置合わせを確かめます。
# 最後に、公式実装、BLOOM、MPT、labml の傾きを `posenc` で再現します。

# %%
import math

import matplotlib.pyplot as plt
import torch

from posenc import alibi_bias, alibi_slopes, attention
from posenc.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64

# %% [markdown] lang="en"
# ## The bias
#
# ALiBi adds nothing to the token embeddings. In every layer, head $h$ adds to the
# score of query $i$ and key $j$ a penalty that grows linearly with their distance:
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j), \qquad j \le i$$
# The slope $m_h > 0$ is fixed before training and never learned. A key at the
# query's own position costs nothing, the previous key $m_h$, the one before $2m_h$,
# and so on: counting positions from $0$, row $i$ of the bias is
# $-m_h \cdot (i, \dots, 2, 1, 0)$. The bias depends only on the distance $i - j$, so
# it is a relative position method, and it is constant along each diagonal.
#
# `posenc.alibi_bias(n, T)` returns the bias of $n$ heads for $T$ positions, shape
# `[n, T, T]`. It holds $-m_h\,(i - j)$ for every pair, also above the diagonal
# ($j > i$), where it is positive: removing those future keys is the causal mask's
# job, not the bias's. The cell below builds the scores from the formula, masks and
# normalises them, and compares with `posenc.attention(q, k, v, bias=..., causal=True)`.
# The printed matrix is head 1 of 8 heads, whose slope is $m_1 = 1/2$.

# %% [markdown] lang="ja"
# ## バイアス
#
# ALiBi はトークンの埋め込みに何も足しません。
# そのかわり各層で、ヘッド $h$ がクエリ $i$ とキー $j$ のスコアに、距離に比例して大きくなるペナルティを加えます。
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\,(i - j), \qquad j \le i$$
# 傾き $m_h > 0$ は学習前に決めて固定し、学習はしません。
# クエリ自身の位置にあるキーのペナルティは 0、1 つ前のキーは $m_h$、2 つ前は $2m_h$ です。
# 位置を $0$ から数えると、バイアスの行 $i$ は $-m_h \cdot (i, \dots, 2, 1, 0)$ になります。
# バイアスは距離 $i - j$ だけで決まるので、ALiBi は相対位置の手法で、バイアスは各対角線に沿って一定です。
#
# `posenc.alibi_bias(n, T)` は、$n$ 個のヘッドと $T$ 個の位置についてのバイアスを、形状 `[n, T, T]` で返します。
# すべての組に $-m_h\,(i - j)$ が入り、対角より上（$j > i$）では正の値になります。
# こうした未来のキーを取り除くのは因果マスクの役目で、バイアスの役目ではありません。
# 次のセルでは、式からスコアを作り、マスクして正規化し、
# `posenc.attention(q, k, v, bias=..., causal=True)` と比べます。
# 表示する行列は 8 ヘッドのうちヘッド 1 のもので、傾きは $m_1 = 1/2$ です。

# %%
n_heads, T, d = 8, 6, 16
q, k, v = torch.randn(3, n_heads, T, d).unbind(0)  # [h, T, d] each
m = alibi_slopes(n_heads)[:, None, None]  # [h, 1, 1]
i = torch.arange(T)[:, None]  # query positions
j = torch.arange(T)[None, :]  # key positions
bias = alibi_bias(n_heads, T)  # [h, i, j]

torch.testing.assert_close(bias, -m * (i - j))  # -m_h (i - j)
scores = q @ k.transpose(-2, -1) / math.sqrt(d) - m * (i - j)
weights = torch.softmax(scores.masked_fill(j > i, -math.inf), dim=-1)  # keys j <= i only
torch.testing.assert_close(attention(q, k, v, bias=bias, causal=True), weights @ v)

torch.testing.assert_close(bias[:, 1:, 1:], bias[:, :-1, :-1])  # constant along diagonals
assert not bias.diagonal(dim1=-2, dim2=-1).any()  # zero at distance 0
assert (bias[:, j > i] > 0).all()  # positive above the diagonal
bias[0]

# %% [markdown] lang="en"
# ## The slopes: a geometric sequence
#
# The paper chooses, for $n$ heads ($n$ a power of two),
# $$m_h = 2^{-8h/n}, \qquad h = 1, \dots, n$$
# a geometric sequence that starts at $m_1 = 2^{-8/n}$ and has that same value as its
# ratio, $m_{h+1}/m_h = 2^{-8/n}$. Whatever $n$ is, the last slope is $m_n = 2^{-8} = 1/256$.
# With 8 heads the slopes are $\frac{1}{2}, \frac{1}{4}, \dots, \frac{1}{256}$, as the paper
# states. The official code writes the start as `2**(-2**-(math.log2(n)-3))`, that is
# $2^{-2^{-(\log_2 n - 3)}}$, which is the same number because
# $2^{-(\log_2 n - 3)} = 2^3 / 2^{\log_2 n} = 8/n$.
#
# Doubling the heads keeps the old slopes and inserts one between each pair. With
# $2n$ heads the exponent is $-8h/(2n)$, so the even-numbered slopes are the old ones,
# $m^{(2n)}_{2h} = m^{(n)}_h$, and each odd-numbered slope is the geometric mean of its
# neighbours, $m^{(2n)}_{2h-1} = \sqrt{m^{(n)}_{h-1}\, m^{(n)}_h}$ (with $m^{(n)}_0 = 1$). The paper
# describes its 16-head slopes this way: the 8-head slopes, geometrically averaged
# pair by pair.

# %% [markdown] lang="ja"
# ## 傾き：等比数列
#
# 論文は、$n$ 個のヘッド（$n$ は 2 のべき乗）に対して次の傾きを選びます。
# $$m_h = 2^{-8h/n}, \qquad h = 1, \dots, n$$
# これは $m_1 = 2^{-8/n}$ から始まり、同じ値を公比とする等比数列で、$m_{h+1}/m_h = 2^{-8/n}$ です。
# $n$ が何であっても、最後の傾きは $m_n = 2^{-8} = 1/256$ です。
# 8 ヘッドなら、論文にあるとおり傾きは $\frac{1}{2}, \frac{1}{4}, \dots, \frac{1}{256}$ です。
# 公式実装は初項を `2**(-2**-(math.log2(n)-3))`、つまり $2^{-2^{-(\log_2 n - 3)}}$ と書いています。
# $2^{-(\log_2 n - 3)} = 2^3 / 2^{\log_2 n} = 8/n$ なので、これは同じ数です。
#
# ヘッドを 2 倍にすると、元の傾きはそのまま残り、隣り合う 2 つの間に 1 つずつ傾きが入ります。
# $2n$ ヘッドでは指数が $-8h/(2n)$ なので、偶数番目の傾きは元の傾き $m^{(2n)}_{2h} = m^{(n)}_h$ です。
# 奇数番目の傾きは両隣の幾何平均 $m^{(2n)}_{2h-1} = \sqrt{m^{(n)}_{h-1}\, m^{(n)}_h}$ になります（$m^{(n)}_0 = 1$ とします）。
# 論文は 16 ヘッドの傾きを、まさにこのように説明しています。8 ヘッドの傾きを、隣り合う組ごとに幾何平均で補ったものです。

# %%
for n in (1, 2, 4, 8, 16, 32, 64, 128):
    s = alibi_slopes(n, dtype=f64)
    h = torch.arange(1, n + 1, dtype=f64)
    torch.testing.assert_close(s, 2.0 ** (-8 * h / n))  # m_h = 2^(-8h/n)
    ratio = torch.tensor(2.0 ** (-8 / n), dtype=f64)
    torch.testing.assert_close(s[0], ratio)  # starts at 2^(-8/n) ...
    torch.testing.assert_close(s[1:] / s[:-1], ratio.expand(n - 1))  # ... with that ratio
    assert s[-1] == 2.0**-8  # the last slope is always 1/256
    # the official code's start, 2^(-2^(-(log2 n - 3))), is 2^(-8/n)
    assert math.isclose(2 ** (-(2 ** -(math.log2(n) - 3))), 2 ** (-8 / n))
    # doubling the heads: even-numbered slopes are the old ones, odd-numbered the geometric means
    s2 = alibi_slopes(2 * n, dtype=f64)
    torch.testing.assert_close(s2[1::2], s)  # m^(2n)_(2h) = m^(n)_h
    prev = torch.cat([torch.ones(1, dtype=f64), s[:-1]])  # m^(n)_(h-1), with m^(n)_0 = 1
    torch.testing.assert_close(s2[0::2], (prev * s).sqrt())

s8 = alibi_slopes(8)
assert s8.tolist() == [2.0**-h for h in range(1, 9)]  # exactly 1/2, 1/4, ..., 1/256
print("n = 8: " + ", ".join(f"1/{1 / x:g}" for x in s8.tolist()), end="")

# %% [markdown] lang="en"
# ## Head counts that are not a power of two
#
# The formula $2^{-8h/n}$ makes sense for any $n$, but it is not what the official code
# does. Its comment explains: the paper only trains models with $2^a$ heads, and the
# sequence has good properties only for powers of two. For other counts, write
# $n = 2^k + r$ with $0 < r < 2^k$. The first $2^k$ heads get the slopes of $2^k$ heads,
# and the remaining $r$ heads get every other slope of the sequence for $2^{k+1}$ heads,
# starting with the first, until there are $n$:
# $$m_{2^k + i} = 2^{-8(2i-1)/2^{k+1}}, \qquad i = 1, \dots, r$$
# Every other slope, because the previous section showed that the even-numbered slopes
# of $2^{k+1}$ heads repeat those of $2^k$ heads; the odd-numbered ones are the new
# geometric means. So the $n$ slopes are $n$ of the $2^{k+1}$ slopes: all of those for
# $2^k$ heads, then the steepest $r$ of the means.
#
# For 12 heads, $k = 3$ and $r = 4$: heads 1 to 8 get $2^{-1}, \dots, 2^{-8}$, and heads 9
# to 12 get $2^{-0.5}, 2^{-1.5}, 2^{-2.5}, 2^{-3.5}$. These are 12 of the 16 slopes; the
# four gentlest means, $2^{-4.5}, 2^{-5.5}, 2^{-6.5}, 2^{-7.5}$, are left out. The slopes are
# no longer sorted either: head 9 is steeper than head 1. The table below prints each
# value; the cell checks each against its power of two, and checks `posenc` against a
# transcription of the official `get_slopes` for every $n$ from 1 to 128.
#
# BLOOM (176B parameters) has 112 heads, so it is an example: $112 = 64 + 48$, and its
# slopes run from $2^{-8}$ (head 64) up to $2^{-1/16}$ (head 65), printed below.

# %% [markdown] lang="ja"
# ## ヘッド数が 2 のべき乗でない場合
#
# 式 $2^{-8h/n}$ はどんな $n$ でも意味を持ちますが、公式実装はこの式を使いません。
# コードのコメントによれば、論文で学習したのは $2^a$ 個のヘッドを持つモデルだけで、
# この数列がよい性質を持つのは 2 のべき乗のときだけだからです。
# それ以外のヘッド数は、$0 < r < 2^k$ として $n = 2^k + r$ と書きます。
# 最初の $2^k$ 個のヘッドには $2^k$ ヘッドの傾きを使います。
# 残りの $r$ 個には、$2^{k+1}$ ヘッドの数列の傾きを、最初のものから 1 つおきに、$n$ 個になるまで使います。
# $$m_{2^k + i} = 2^{-8(2i-1)/2^{k+1}}, \qquad i = 1, \dots, r$$
# 1 つおきに取るのは、前の節で見たとおり、$2^{k+1}$ ヘッドの偶数番目の傾きが $2^k$ ヘッドの傾きの繰り返しだからです。
# 奇数番目が新しい幾何平均です。
# したがって $n$ 個の傾きは、$2^{k+1}$ 個の傾きのうちの $n$ 個です。
# $2^k$ ヘッドの傾きをすべて使い、そのあとに幾何平均のうち急なものから $r$ 個を使います。
#
# 12 ヘッドでは $k = 3$、$r = 4$ です。ヘッド 1 から 8 は $2^{-1}, \dots, 2^{-8}$、
# ヘッド 9 から 12 は $2^{-0.5}, 2^{-1.5}, 2^{-2.5}, 2^{-3.5}$ になります。
# これは 16 個の傾きのうちの 12 個で、最もゆるやかな 4 つの幾何平均 $2^{-4.5}, 2^{-5.5}, 2^{-6.5}, 2^{-7.5}$ は使われません。
# 傾きはもう大きさの順にも並んでいません。ヘッド 9 はヘッド 1 より急です。
# 下の表に各値を示します。セルでは各値を 2 のべき乗と照合し、
# さらに公式の `get_slopes` を書き写したものと `posenc` を、1 から 128 までのすべての $n$ について比べます。
#
# BLOOM（1760 億パラメータ）はヘッドが 112 個あるので、この規則が使われる例です。
# $112 = 64 + 48$ で、傾きは $2^{-8}$（ヘッド 64）から $2^{-1/16}$（ヘッド 65）までにわたります（下の出力）。


# %%
def official_get_slopes(n):
    """The official code's get_slopes (fairseq/models/transformer.py), transcribed."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + official_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


for n in range(1, 129):
    s = alibi_slopes(n, dtype=f64)
    torch.testing.assert_close(s, torch.tensor(official_get_slopes(n), dtype=f64))
    k_pow = n.bit_length() - 1  # n = 2^k + r
    r = n - 2**k_pow
    torch.testing.assert_close(s[: 2**k_pow], alibi_slopes(2**k_pow, dtype=f64))
    i_extra = torch.arange(1, r + 1, dtype=f64)
    torch.testing.assert_close(s[2**k_pow :], 2.0 ** (-8 * (2 * i_extra - 1) / 2 ** (k_pow + 1)))
    # the n slopes are n of the 2^(k+1) slopes
    wider = alibi_slopes(2 ** (k_pow + 1), dtype=f64)
    assert all(torch.isclose(x, wider).any() for x in s)

# 12 heads: each value, as a power of two
s12 = alibi_slopes(12, dtype=f64)
exponents = [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]
torch.testing.assert_close(s12, 2.0 ** torch.tensor(exponents, dtype=f64), rtol=1e-15, atol=0)
missing = sorted(set(alibi_slopes(16, dtype=f64).tolist()) - set(s12.tolist()), reverse=True)
torch.testing.assert_close(
    torch.tensor(missing, dtype=f64), 2.0 ** torch.tensor([-4.5, -5.5, -6.5, -7.5], dtype=f64)
)
assert s12[8] > s12[0]  # head 9 is steeper than head 1

# BLOOM's 112 heads: 64 + 48
s112 = alibi_slopes(112, dtype=f64)
torch.testing.assert_close(s112[:64], alibi_slopes(64, dtype=f64))
torch.testing.assert_close(s112[64:], alibi_slopes(128, dtype=f64)[0::2][:48])
assert s112.argmin() == 63 and s112.argmax() == 64

rows = [f"{h:>2}  {x:.6f}  {math.log2(x):5.1f}" for h, x in enumerate(s12.tolist(), start=1)]
print(" h  m_h       log2 m_h\n" + "\n".join(rows))
print(f"112 heads: min {s112.min():.8f} (head 64), max {s112.max():.6f} (head 65)", end="")

# %% [markdown] lang="en"
# ## How far each head looks
#
# To see what the slope alone does, make every content score equal (for instance a
# zero query). Then the weights come from the bias alone. The last query of a row of
# $L$ keys gives the key at distance $k = i - j$ the weight
# $$w_h(k) = \frac{e^{-m_h k}}{\sum_{l=0}^{L-1} e^{-m_h l}} = \frac{(1 - e^{-m_h})\, e^{-m_h k}}{1 - e^{-m_h L}}$$
# (the sum is a geometric series with ratio $e^{-m_h}$). Each step back multiplies
# the weight by $e^{-m_h}$: a bias that is linear in the distance is a weight that
# decays exponentially, a straight line on a logarithmic axis. The bias reaches $-1$
# at the distance $k = 1/m_h$, where the weight has fallen to $1/e$ of the nearest
# key's; it halves every $\ln 2 / m_h$ positions. On a long row
# ($e^{-m_h L} \approx 0$) the mean distance is
# $$\sum_{k \ge 0} k\, w_h(k) = \frac{1}{e^{m_h} - 1} \approx \frac{1}{m_h}$$
# With 8 heads, $1/m_h$ is $2, 4, \dots, 256$: each head looks twice as far back as the
# one before. The cell computes the weights with `posenc.attention`, using a zero
# query and the identity matrix as values, so that the output row is the weight row.
# The mean distances below are for a row of 8192 keys, long enough for the limit.

# %% [markdown] lang="ja"
# ## 各ヘッドはどこまで見るか
#
# 傾きだけの働きを見るために、内容によるスコアをすべて等しくします（たとえばクエリを 0 にします）。
# すると重みはバイアスだけで決まります。
# $L$ 個のキーが並ぶ行の最後のクエリは、距離 $k = i - j$ のキーに次の重みを与えます。
# $$w_h(k) = \frac{e^{-m_h k}}{\sum_{l=0}^{L-1} e^{-m_h l}} = \frac{(1 - e^{-m_h})\, e^{-m_h k}}{1 - e^{-m_h L}}$$
# （分母は公比 $e^{-m_h}$ の等比級数です。）
# 1 つ遡るごとに、重みは $e^{-m_h}$ 倍になります。
# 距離に比例するバイアスは、指数的に減衰する重みと同じことで、対数軸では直線になります。
# バイアスが $-1$ に達するのは距離 $k = 1/m_h$ で、そこでは重みが最も近いキーの $1/e$ に下がっています。
# 重みは $\ln 2 / m_h$ 位置ごとに半分になります。
# 十分に長い行（$e^{-m_h L} \approx 0$）では、距離の平均は次のとおりです。
# $$\sum_{k \ge 0} k\, w_h(k) = \frac{1}{e^{m_h} - 1} \approx \frac{1}{m_h}$$
# 8 ヘッドでは $1/m_h$ が $2, 4, \dots, 256$ です。各ヘッドは、1 つ前のヘッドの 2 倍遠くまで遡ります。
# セルでは `posenc.attention` で重みを計算します。クエリを 0、バリューを単位行列にすると、出力の行がそのまま重みの行になります。
# 下の平均距離は、極限の式が使えるだけ長い 8192 個のキーの行で求めたものです。

# %%
n_heads, L, d = 8, 1024, 16
m = alibi_slopes(n_heads, dtype=f64)[:, None]  # [h, 1]
q0 = torch.zeros(n_heads, 1, d, dtype=f64)  # one zero query: all content scores equal
keys = torch.randn(n_heads, L, d, dtype=f64)
out = attention(
    q0, keys, torch.eye(L, dtype=f64), bias=alibi_bias(n_heads, 1, L, dtype=f64), causal=True
)
w = out[:, 0].flip(-1)  # [h, k], the weight at distance k = L - 1 - j

dist = torch.arange(L, dtype=f64)
closed = (1 - torch.exp(-m)) * torch.exp(-m * dist) / (1 - torch.exp(-m * L))
torch.testing.assert_close(w, closed)  # w_h(k)
torch.testing.assert_close(w[:, 1:] / w[:, :-1], torch.exp(-m).expand(-1, L - 1))  # ratio e^(-m_h)
span = (1 / m).squeeze(1)  # 1/m_h
assert span.tolist() == [2.0**h for h in range(1, 9)]
k_span = span.long()
torch.testing.assert_close(
    w.gather(1, k_span[:, None])[:, 0] / w[:, 0], torch.full((8,), math.e**-1, dtype=f64)
)

# the mean distance on a long row (one query against 8192 keys)
w_long = torch.softmax(alibi_bias(n_heads, 1, 8192, dtype=f64)[:, 0], dim=-1).flip(-1)
mean = (w_long * torch.arange(8192, dtype=f64)).sum(-1)
torch.testing.assert_close(mean, 1 / torch.expm1(m[:, 0]))  # 1 / (e^m - 1)

rows = [
    f"{h:>2}  {x:>5.0f}  {x * math.log(2):8.1f}  {y:6.1f}"
    for h, (x, y) in enumerate(zip(span.tolist(), mean.tolist(), strict=True), start=1)
]
print(" h  1/m_h  ln2/m_h   mean\n" + "\n".join(rows), end="")

# %% [markdown] lang="en"
# On the logarithmic axis below, each head's weights are a straight line of slope
# $-m_h$; the dots mark $k = 1/m_h$. Head 1 has almost all its weight on the last few
# keys, while head 8 spreads it over hundreds. The mean distance approaches
# $1/m_h - 1/2$ as the slope shrinks, as the table shows (head 8: 255.5).

# %% [markdown] lang="ja"
# 下の対数軸の図では、各ヘッドの重みが傾き $-m_h$ の直線になります。点は $k = 1/m_h$ の位置です。
# ヘッド 1 は重みのほとんどを直前の数個のキーに置き、ヘッド 8 は数百個に広げます。
# 表のとおり、傾きが小さくなるにつれて平均距離は $1/m_h - 1/2$ に近づきます（ヘッド 8 では 255.5）。

# %% alt={"en": ["Attention weight of each of ALiBi's 8 heads against the distance k up to 300, log axis: straight lines of slope −m_h, steep for head 1 and nearly flat for head 8; dots mark k = 1/m_h, from 2 to 256."], "ja": ["ALiBi の 8 個のヘッドそれぞれのアテンションの重みを、距離 k（0〜300）に対して対数軸で描いた図。傾き −m_h の直線で、ヘッド 1 は急に落ち、ヘッド 8 はほぼ平らです。点は k = 1/m_h（2〜256）の位置です。"]}
# the mean distance tends to 1/m - 1/2 for small m
torch.testing.assert_close(mean[-1], span[-1] - 0.5, rtol=0, atol=1e-3)

fig, ax = plt.subplots(figsize=(6.4, 3.4))
for h in range(n_heads):
    (line,) = ax.plot(dist, w[h], lw=1.2, label=f"$h = {h + 1}$")
    ax.plot(k_span[h], w[h, k_span[h]], "o", ms=4, color=line.get_color())
ax.set(yscale="log", ylim=(1e-6, 1), xlim=(0, 300), xlabel="$k = i - j$", ylabel="$w_h(k)$")
ax.legend(ncols=2, loc="upper right")
plt.show()


# %% [markdown] lang="en"
# The next figure puts $1/m_h$ against the head number for 8, 12 and 16 heads, on a
# logarithmic axis. For 8 and 16 heads the points lie on straight lines (geometric
# sequences) that end at $256$. For 12 heads the first 8 points follow the 8-head line;
# heads 9 to 12 then jump back to short spans and fill in half steps, and the four
# long half steps of the 16-head line are missing.

# %% [markdown] lang="ja"
# 次の図は、8、12、16 ヘッドについて、$1/m_h$ をヘッド番号に対して対数軸で描いたものです。
# 8 ヘッドと 16 ヘッドでは、点は $256$ で終わる直線（等比数列）の上に並びます。
# 12 ヘッドでは、最初の 8 点は 8 ヘッドの直線に乗ります。
# ヘッド 9 から 12 は短い範囲に戻り、8 ヘッドの点の間の半歩の位置を埋めます。
# 16 ヘッドの直線のうち、範囲の長い側にある 4 つの半歩の点は欠けています。

# %% alt={"en": ["1/m_h against head number h for 8, 12 and 16 heads, log axis. 8 and 16 heads lie on straight lines ending at 256; 12 heads follow the 8-head line for heads 1–8, then drop back and fill half steps from about 1.4 to 11 for heads 9–12."], "ja": ["8、12、16 ヘッドについて、1/m_h をヘッド番号 h に対して対数軸で描いた図。8 と 16 ヘッドは 256 で終わる直線に並びます。12 ヘッドはヘッド 1〜8 で 8 ヘッドの線に乗り、ヘッド 9〜12 は約 1.4 から 11 へ戻って半歩の位置を埋めます。"]}
fig, ax = plt.subplots(figsize=(6.4, 3.2))
styles = {  # 8: hollow circles on top, so that the 12-head points inside them stay visible
    8: {"fmt": "o-", "ms": 8, "mfc": "none", "zorder": 3},
    12: {"fmt": "^:", "ms": 5, "zorder": 2},
    16: {"fmt": "s--", "ms": 4, "zorder": 1},
}
for n, style in styles.items():
    fmt = style.pop("fmt")
    ax.plot(range(1, n + 1), 1 / alibi_slopes(n), fmt, lw=1, label=f"$n = {n}$", **style)
ax.set_yscale("log", base=2)
ax.set(xlabel="$h$", ylabel="$1/m_h$", xticks=range(1, 17))
ax.legend(loc="lower right")
plt.show()

# %% [markdown] lang="en"
# ## Only the differences within a row matter
#
# Adding the same number $c$ to every score of a row does not change its softmax:
# $$\mathrm{softmax}(x + c)_j = \frac{e^{x_j + c}}{\sum_l e^{x_l + c}} = \frac{e^{c}\, e^{x_j}}{e^{c} \sum_l e^{x_l}} = \mathrm{softmax}(x)_j$$
# and $-m_h\,(i - j) = m_h\, j - m_h\, i$, where $m_h\, i$ is the same for the whole row $i$.
# So every bias that differs from $-m_h\,(i - j)$ by a constant per row gives the same
# attention, and the implementations use several:
#
# - the paper and `posenc`: $-m_h\,(i - j)$;
# - the official code and BLOOM (Hugging Face's `build_alibi_tensor`): $m_h\, j$, one row
#   for all queries (BLOOM counts $j$ over the non-padding tokens only);
# - labml: $m_h\,(j + 1)$ on the visible keys, the cumulative sum of the causal mask;
# - MPT (llm-foundry's `build_alibi_bias`): $m_h\,(j - (T - 1))$, zero at the last key;
# - x-transformers, and `posenc` with `causal=False`: $-m_h\,|i - j|$.
#
# The symmetric form needs no constant at all: for $j \le i$, $|i - j| = i - j$, so it
# equals the causal bias on every key the mask keeps. The two differ only on future
# keys ($j > i$), $-m_h\,(j - i)$ against $+m_h\,(j - i)$, and the causal mask replaces
# those scores by $-\infty$ in both cases. The constant must be the same across a row:
# a bias that varies in a different way with $j$, such as $-m_h\, j$ (a flipped sign),
# changes the attention. The cell checks all of this through `posenc.attention` with
# `causal=True`.

# %% [markdown] lang="ja"
# ## 効くのは行の中の差だけ
#
# 行のすべてのスコアに同じ数 $c$ を足しても、softmax は変わりません。
# $$\mathrm{softmax}(x + c)_j = \frac{e^{x_j + c}}{\sum_l e^{x_l + c}} = \frac{e^{c}\, e^{x_j}}{e^{c} \sum_l e^{x_l}} = \mathrm{softmax}(x)_j$$
# そして $-m_h\,(i - j) = m_h\, j - m_h\, i$ で、$m_h\, i$ は行 $i$ 全体で同じ値です。
# したがって、$-m_h\,(i - j)$ と行ごとの定数だけ違うバイアスは、どれも同じアテンションを与えます。
# 実装によって使う形はさまざまです。
#
# - 論文と `posenc`：$-m_h\,(i - j)$
# - 公式実装と BLOOM（Hugging Face の `build_alibi_tensor`）：$m_h\, j$。すべてのクエリで同じ 1 行を使います
#   （BLOOM はパディングでないトークンだけを数えて $j$ とします）。
# - labml：見えるキーについて $m_h\,(j + 1)$。因果マスクの累積和から作ります。
# - MPT（llm-foundry の `build_alibi_bias`）：$m_h\,(j - (T - 1))$。最後のキーで 0 になります。
# - x-transformers と、`causal=False` の `posenc`：$-m_h\,|i - j|$
#
# 対称な形には定数すら要りません。$j \le i$ では $|i - j| = i - j$ なので、
# マスクが残すすべてのキーで因果的なバイアスと一致します。
# 両者が違うのは未来のキー（$j > i$）だけで、$-m_h\,(j - i)$ と $+m_h\,(j - i)$ の違いです。
# どちらの場合も、因果マスクがそのスコアを $-\infty$ に置き換えます。
# ただし定数は行の中で同じでなければなりません。
# $-m_h\, j$（符号を反転した誤り）のように $j$ に対して別の形で変わるバイアスは、アテンションを変えてしまいます。
# セルでは、これらをすべて `causal=True` の `posenc.attention` で確かめます。

# %%
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
    torch.testing.assert_close(row_const, gap[..., :1].expand(n_heads, T, T), msg=name)
    # ... so the same attention
    torch.testing.assert_close(attention(q, k, v, bias=b, causal=True), reference, msg=name)

# the symmetric and causal biases agree on the visible keys and differ on every future key
sym, causal_bias = forms["posenc causal=False"], forms["paper, posenc"]
assert torch.equal(sym[:, visible], causal_bias[:, visible])
assert (sym[:, ~visible] != causal_bias[:, ~visible]).all()

# a bias that is not a row constant away changes the attention
assert not torch.allclose(attention(q, k, v, bias=-m * j, causal=True), reference, atol=1e-3)
print(f"{len(forms)} biases, one attention output", end="")

# %% [markdown] lang="en"
# The figure shows three of the forms for head 1 ($m_1 = 1/2$) and $T = 8$, future keys
# included; the staircase marks the causal mask, which removes everything above it.
# The paper's bias is constant along diagonals, the official code's along columns,
# and the symmetric bias is the paper's mirrored into the upper triangle. Below the
# staircase, rows of the first two differ by a constant.

# %% [markdown] lang="ja"
# 図は、ヘッド 1（$m_1 = 1/2$）、$T = 8$ について、未来のキーも含めて 3 つの形を描いたものです。
# 階段状の線が因果マスクを表し、その上側はすべて取り除かれます。
# 論文のバイアスは対角線に沿って一定、公式実装のバイアスは列に沿って一定です。
# 対称なバイアスは、論文のバイアスを上三角に折り返したものです。
# 階段の下側では、最初の 2 つの形は、行ごとに定数だけ違います。

# %% alt={"en": ["Three 8 × 8 heatmaps of ALiBi biases for head 1, query i down, key j across, a staircase marking the causal mask: −m(i−j) is constant along diagonals, m·j along columns, and −m|i−j| mirrors the first above the diagonal."], "ja": ["ヘッド 1 の ALiBi バイアスの 3 つの 8 × 8 ヒートマップ（縦はクエリ i、横はキー j）。階段状の線が因果マスクの境界です。−m(i−j) は対角線に沿って、m·j は列に沿って一定で、−m|i−j| は最初のものを対角線の上側に折り返した形です。"]}
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
    ax.set(title=title, xlabel="$j$", xticks=range(0, T8, 2), yticks=range(0, T8, 2))
    ax.grid(False)
axes[0].set_ylabel("$i$")
fig.colorbar(im, ax=axes, shrink=0.8)
plt.show()

# %% [markdown] lang="en"
# Equal in exact arithmetic, the forms are not equal in low precision. The official
# form $m_h\, j$ grows with the position: at $j = 2047$ and $m = 1/2$ it is about 1024,
# where bfloat16 numbers are 4 or 8 apart, so neighbouring keys, which differ by
# $m = 1/2$, get the same rounded bias. The paper's form keeps the nearby keys, which
# carry the weight, close to $0$, where bfloat16 is fine. Hugging Face's
# `build_alibi_tensor` casts its $m_h\, j$ bias to the dtype it is given. The cell
# rounds both forms to bfloat16 for one head and $T = 2048$ and prints the largest
# error in the attention weights against float64: 4.0e-57 for the paper's form, 0.49
# for $m_h\, j$.

# %% [markdown] lang="ja"
# これらの形は、厳密な計算では等しくても、低い精度では等しくなりません。
# 公式実装の形 $m_h\, j$ は位置とともに大きくなります。$j = 2047$、$m = 1/2$ では約 1024 で、
# そのあたりの bfloat16 の数は 4 や 8 の間隔でしか並んでいません。
# そのため、$m = 1/2$ しか違わない隣り合うキーに、丸めると同じバイアスが付きます。
# 論文の形では、重みを担う近くのキーのバイアスが $0$ の近くにとどまり、bfloat16 でも問題ありません。
# Hugging Face の `build_alibi_tensor` は、$m_h\, j$ のバイアスを渡された dtype に変換します。
# セルでは、1 ヘッド、$T = 2048$ について両方の形を bfloat16 に丸め、
# アテンションの重みの float64 に対する最大誤差を表示します。論文の形では 4.0e-57、$m_h\, j$ では 0.49 です。

# %%
T_long = 2048
visible_long = torch.ones(T_long, T_long, dtype=torch.bool).tril()


def weights_of(b):  # softmax over the visible keys, in float64
    return torch.softmax(b.to(f64).masked_fill(~visible_long, -math.inf), dim=-1)


m1 = float(alibi_slopes(8)[0])  # head 1 of 8 heads: m = 1/2
pos = torch.arange(T_long, dtype=f64)
paper_form = -m1 * (pos[:, None] - pos[None, :])  # -m (i - j), as alibi_bias(8, T)[0]
torch.testing.assert_close(paper_form[:64, :64].float(), alibi_bias(8, 64)[0])
official_form = m1 * pos.expand(T_long, T_long)  # m j
exact = weights_of(paper_form)
torch.testing.assert_close(weights_of(official_form), exact)  # equal in float64
err_paper = (weights_of(paper_form.bfloat16()) - exact).abs().max()
err_official = (weights_of(official_form.bfloat16()) - exact).abs().max()
assert err_paper < 1e-6 < 0.1 < err_official
print(
    f"bfloat16 bias -m(i-j): max error {err_paper:.1e}\nbfloat16 bias m j:     max error {err_official:.2f}",
    end="",
)

# %% [markdown] lang="en"
# ## Queries aligned to the end of the keys (a KV cache)
#
# When a decoder generates with a KV cache, the $L_q$ new queries are the last tokens
# of a sequence of $L_k$ keys: query $i$ sits at position $i + L_k - L_q$, and its bias is
# $$-m_h\,(i + L_k - L_q - j)$$
# `alibi_bias(n, L_q, L_k)` uses this alignment, and so does `posenc.attention` with
# `causal=True`. The cell computes the last 4 queries against all 12 keys and
# compares with the last 4 rows of the full computation; it also generates one token
# at a time.
#
# Placing the new queries at positions $0, \dots, L_q - 1$ instead is a tempting slip.
# For the causal bias it happens to do no harm: the wrong bias $-m_h\,(i - j)$ exceeds
# the right one by $m_h\,(L_k - L_q)$, the same for every key of a row, and the
# previous section showed that such a constant changes nothing. This is why BLOOM and
# MPT can use one bias row for all queries. The slip does harm elsewhere: a causal
# mask placed that way hides keys the queries should see, and the rows of the
# symmetric bias $-m_h\,|i - j|$ change shape, not only level. The cell checks all three.

# %% [markdown] lang="ja"
# ## キーの末尾に合わせたクエリ（KV キャッシュ）
#
# デコーダが KV キャッシュを使って生成するとき、$L_q$ 個の新しいクエリは、$L_k$ 個のキーからなる系列の最後のトークンです。
# クエリ $i$ は位置 $i + L_k - L_q$ にあり、そのバイアスは次のようになります。
# $$-m_h\,(i + L_k - L_q - j)$$
# `alibi_bias(n, L_q, L_k)` はこの位置合わせを使います。`causal=True` の `posenc.attention` も同じです。
# セルでは、最後の 4 個のクエリを 12 個すべてのキーに対して計算し、全体を計算したときの最後の 4 行と比べます。
# 1 トークンずつ生成する場合も確かめます。
#
# 新しいクエリを位置 $0, \dots, L_q - 1$ に置いてしまうのは、ありがちな誤りです。
# 因果的なバイアスでは、たまたま害がありません。
# 誤ったバイアス $-m_h\,(i - j)$ は正しいバイアスより $m_h\,(L_k - L_q)$ だけ大きく、この差は行のどのキーでも同じです。
# 前の節で示したとおり、このような定数は何も変えません。
# BLOOM や MPT がすべてのクエリに同じ 1 行のバイアスを使えるのは、このためです。
# しかし、ほかの場所では害があります。同じように置いた因果マスクは、クエリが見るべきキーを隠してしまいます。
# また対称なバイアス $-m_h\,|i - j|$ では、行の高さだけでなく形が変わります。
# セルでは、この 3 つをすべて確かめます。

# %%
n_heads, L_k, L_q, d = 8, 12, 4, 16
q, k, v = torch.randn(3, n_heads, L_k, d).unbind(0)
m = alibi_slopes(n_heads)[:, None, None]
full = attention(q, k, v, bias=alibi_bias(n_heads, L_k), causal=True)

i = torch.arange(L_q)[:, None]
j = torch.arange(L_k)[None, :]
cached_bias = alibi_bias(n_heads, L_q, L_k)
torch.testing.assert_close(cached_bias, -m * (i + L_k - L_q - j))  # -m_h (i + L_k - L_q - j)
torch.testing.assert_close(cached_bias, alibi_bias(n_heads, L_k)[:, -L_q:])
last4 = attention(q[:, -L_q:], k, v, bias=cached_bias, causal=True)
torch.testing.assert_close(last4, full[:, -L_q:])

for t in range(L_k):  # one token at a time: query t against keys 0..t
    step = attention(
        q[:, t : t + 1],
        k[:, : t + 1],
        v[:, : t + 1],
        bias=alibi_bias(n_heads, 1, t + 1),
        causal=True,
    )
    torch.testing.assert_close(step, full[:, t : t + 1])

# queries wrongly placed at positions 0..L_q-1
wrong_bias = -m * (i - j)
gap = wrong_bias - cached_bias
torch.testing.assert_close(gap, (m * (L_k - L_q)).expand_as(gap))  # a row constant ...
torch.testing.assert_close(
    attention(q[:, -L_q:], k, v, bias=wrong_bias, causal=True), last4
)  # ... harmless

wrong_mask = cached_bias.masked_fill(j > i, -math.inf)  # the mask placed at 0..L_q-1
assert not torch.allclose(attention(q[:, -L_q:], k, v, bias=wrong_mask), last4, atol=1e-3)

full_sym = attention(q, k, v, bias=alibi_bias(n_heads, L_k, causal=False))  # no mask
right_sym = alibi_bias(n_heads, L_q, L_k, causal=False)
torch.testing.assert_close(attention(q[:, -L_q:], k, v, bias=right_sym), full_sym[:, -L_q:])
wrong_sym = -m * (i - j).abs()
assert not torch.allclose(
    attention(q[:, -L_q:], k, v, bias=wrong_sym), full_sym[:, -L_q:], atol=1e-3
)

# %% [markdown] lang="en"
# ## Extrapolation: train short, test long
#
# Nothing in the bias refers to a maximum length. The bias for a longer sequence
# contains the bias for a shorter one as its top-left block, and the row of the last
# query, read by distance, is the same at any length (both checked below). A query
# deep inside a long input sees, in every head, the same penalties by distance as
# during training. The keys further back than any training distance get larger
# penalties than any seen in training, and so little weight in all but the gentlest
# heads. With uniform content, a row of 2048 keys after training on 512 puts the
# weights printed below at distances of 512 or more: at most 0.0183 (head 7) in heads 1 to 7,
# and 0.1350 in head 8 ($m_8 = 1/256$).
#
# This is the paper's title. Its Figure 1 shows models trained on WikiText-103 with
# inputs of $L = 512$ or $1024$ tokens and evaluated on longer inputs: the perplexity of
# the sinusoidal, rotary and T5-bias models degrades as the inputs grow past the
# training length, and ALiBi's does not. The abstract reports a 1.3-billion-parameter
# model trained on 1024 tokens that, tested on 2048, matches the perplexity of a
# sinusoidal model trained on 2048, while training 11% faster and using 11% less
# memory. The chapter *Which encodings extrapolate?* puts extrapolation to the test
# on small models.
#
# Models that use ALiBi include BLOOM (its 176B model has 70 layers and 112 heads, the
# slope rule for a non-power of two at work) and MPT (MPT-7B: 32 heads, and
# `alibi_bias_max` 8 in its configuration, which gives the slopes of the paper).

# %% [markdown] lang="ja"
# ## 外挿：短く学習し、長く使う
#
# バイアスのどこにも最大長は出てきません。
# 長い系列のバイアスは、短い系列のバイアスを左上のブロックとして含みます。
# また最後のクエリの行を距離で読むと、長さによらず同じです（どちらも下で確かめます）。
# 長い入力の奥にあるクエリも、すべてのヘッドで、学習中と同じ距離ごとのペナルティを受けます。
# 学習中のどの距離よりも遠いキーには、学習中に見たどれよりも大きなペナルティが付くので、
# 最もゆるやかなヘッド以外ではほとんど重みがかかりません。
# 内容によるスコアが一様なら、長さ 512 で学習したあと 2048 個のキーが並ぶ行を見たとき、距離 512 以上にかかる重みは下の出力のとおりです。
# ヘッド 1 から 7 では最大でも 0.0183（ヘッド 7）、ヘッド 8（$m_8 = 1/256$）では 0.1350 です。
#
# これが論文の題名（Train Short, Test Long）の意味です。
# 論文の図 1 は、WikiText-103 で $L = 512$ または $1024$ トークンの入力で学習し、より長い入力で評価したモデルを示しています。
# 正弦波位置エンコーディング、回転位置埋め込み（RoPE）、T5 バイアスのモデルは、入力が学習時の長さを超えるとパープレキシティが悪化しますが、
# ALiBi のモデルは悪化しません。
# 論文の要旨によれば、1024 トークンで学習した 13 億パラメータのモデルは、2048 トークンで評価すると、
# 2048 トークンで学習した正弦波のモデルと同じパープレキシティに達し、しかも学習は 11% 速く、メモリは 11% 少なく済みます。
# 外挿は、「どの位置エンコーディングが外挿できるか」の章で小さなモデルを使って確かめます。
#
# ALiBi を使うモデルには、BLOOM（1760 億パラメータのモデルは 70 層、112 ヘッドで、
# 2 のべき乗でない場合の規則が使われます）と MPT（MPT-7B は 32 ヘッドで、
# 設定の `alibi_bias_max` は 8、これは論文の傾きになります）があります。

# %%
n_heads = 8
short, long_ = alibi_bias(n_heads, 64), alibi_bias(n_heads, 512)
torch.testing.assert_close(long_[:, :64, :64], short)  # the short bias is the top-left block
# the last query's row, by distance, is the same at any length
torch.testing.assert_close(alibi_bias(n_heads, 1, 512)[..., -64:], alibi_bias(n_heads, 1, 64))

# uniform content, 2048 keys: the weight at distances 512 and beyond, per head
w_2048 = torch.softmax(alibi_bias(n_heads, 1, 2048, dtype=f64)[:, 0], dim=-1).flip(-1)
beyond = w_2048[:, 512:].sum(-1)  # distances 512 .. 2047
m = alibi_slopes(n_heads, dtype=f64)
torch.testing.assert_close(
    beyond, torch.exp(-m * 512) * (1 - torch.exp(-m * 1536)) / (1 - torch.exp(-m * 2048))
)
assert beyond[:7].max() < 0.02 < 0.1 < beyond[7]
print("weight at distance >= 512: " + ", ".join(f"{x:.4f}" for x in beyond.tolist()), end="")

# %% [markdown] lang="en"
# ## The implementations, rebuilt with posenc
#
# All the implementations read here agree on the slopes, but they compute them in
# different ways. Hugging Face's BLOOM raises a float32 base to integer powers, with
# the remaining heads as odd powers of the base for $2^{k+1}$ heads. MPT generalises
# the exponent: $m_h = 2^{-b h / n'}$ with $b$ = `alibi_bias_max` (8 by default) and $n'$ the
# next power of two at or above $n$; when $n < n'$ it takes the odd-numbered slopes
# first, then the even-numbered ones, and keeps the first $n$, the same set in the
# same order as the official rule. labml uses the base $2^{-4/2^k}$ and odd powers for
# the remaining heads. Each is transcribed below and compared with `posenc` for
# $n = 1, \dots, 128$.
#
# labml's docstring, though, writes the first slope as $2^{-2^{-(\log_2 n) - 3}}$. A
# parenthesis has slipped: that is $2^{-1/(8n)}$, $0.9892$ for 8 heads instead of $0.5$
# (printed below). Its code computes $2^{-8/n}$, correctly.

# %% [markdown] lang="ja"
# ## 各実装を posenc で再現する
#
# ここで読んだ実装は、どれも同じ傾きを使いますが、計算の仕方は違います。
# Hugging Face の BLOOM は、float32 の底を整数乗し、残りのヘッドには $2^{k+1}$ ヘッドの底の奇数乗を使います。
# MPT は指数を一般化しています。$m_h = 2^{-b h / n'}$ で、$b$ は `alibi_bias_max`（既定値 8）、
# $n'$ は $n$ 以上で最小の 2 のべき乗です。
# $n < n'$ のときは、奇数番目の傾きを先に、偶数番目の傾きをあとに並べて、最初の $n$ 個を使います。
# これは公式の規則と同じ値を同じ順に与えます。
# labml は底 $2^{-4/2^k}$ の奇数乗を残りのヘッドに使います。
# それぞれを下で書き写し、$n = 1, \dots, 128$ について `posenc` と比べます。
#
# ただし labml の docstring は、最初の傾きを $2^{-2^{-(\log_2 n) - 3}}$ と書いています。
# 括弧の位置がずれていて、これは $2^{-1/(8n)}$ です。8 ヘッドなら $0.5$ ではなく $0.9892$ になります（下の出力）。
# コードのほうは正しく $2^{-8/n}$ を計算しています。


# %%
def bloom_slopes(n):  # Hugging Face's build_alibi_tensor, the slopes part
    closest = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, n - closest)
        extra = torch.pow(extra_base, torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32))
        slopes = torch.cat([slopes, extra])
    return slopes


def mpt_slopes(n, alibi_bias_max=8):  # llm-foundry's gen_slopes
    n_pow2 = 2 ** math.ceil(math.log2(n))
    m = torch.arange(1, n_pow2 + 1, dtype=torch.float32) * (alibi_bias_max / n_pow2)
    slopes = 1.0 / torch.pow(2, m)
    if n_pow2 != n:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n]
    return slopes


def labml_slopes(n_heads):  # labml's get_slopes
    n = 2 ** math.floor(math.log2(n_heads))
    m_0 = 2.0 ** (-8.0 / n)
    m = torch.pow(m_0, torch.arange(1, 1 + n))
    if n < n_heads:
        m_hat_0 = 2.0 ** (-4.0 / n)
        m_hat = torch.pow(m_hat_0, torch.arange(1, 1 + 2 * (n_heads - n), 2))
        m = torch.cat([m, m_hat])
    return m


for n in range(1, 129):
    for rebuilt in (bloom_slopes, mpt_slopes, labml_slopes):
        torch.testing.assert_close(
            rebuilt(n).float(), alibi_slopes(n), msg=f"{rebuilt.__name__}({n})"
        )

docstring_start = 2 ** (-(2 ** (-math.log2(8) - 3)))  # labml's docstring, n = 8
assert math.isclose(docstring_start, 2 ** (-1 / (8 * 8)))
print(f"labml docstring, n = 8: {docstring_start:.4f}; code: {labml_slopes(8)[0]:.4f}", end="")

# %% [markdown] lang="en"
# | | bias added (causal) | slopes, $n$ not a power of two | queries with a cache |
# |---|---|---|---|
# | paper, `posenc` | $-m_h\,(i - j)$ | official rule | aligned to the end of the keys |
# | official code (fairseq fork) | $m_h\, j$ | `get_slopes`, the rule's source | not handled |
# | BLOOM (Hugging Face) | $m_h\, j$, $j$ over non-padding tokens | same values, float32 powers | one row for all queries |
# | MPT (llm-foundry) | $m_h\,(j - (T - 1))$; $-m_h\,\lvert i - j\rvert$ when not causal | same values for `alibi_bias_max=8` | one row for all queries |
# | labml | $m_h\,(j + 1)$, from the causal mask | same values | not handled |
# | x-transformers | $-m_h\,\lvert i - j\rvert$ | same values; ALiBi can be limited to some heads | aligned to the end of the keys |

# %% [markdown] lang="ja"
# | | 足すバイアス（因果的） | 2 のべき乗でない $n$ の傾き | キャッシュ時のクエリ |
# |---|---|---|---|
# | 論文、`posenc` | $-m_h\,(i - j)$ | 公式の規則 | キーの末尾に合わせる |
# | 公式実装（fairseq のフォーク） | $m_h\, j$ | `get_slopes`（規則の出典） | 扱わない |
# | BLOOM（Hugging Face） | $m_h\, j$、$j$ はパディング以外のトークンで数える | 同じ値、float32 のべき乗 | すべてのクエリで同じ 1 行 |
# | MPT（llm-foundry） | $m_h\,(j - (T - 1))$、非因果なら $-m_h\,\lvert i - j\rvert$ | `alibi_bias_max=8` なら同じ値 | すべてのクエリで同じ 1 行 |
# | labml | $m_h\,(j + 1)$（因果マスクから作る） | 同じ値 | 扱わない |
# | x-transformers | $-m_h\,\lvert i - j\rvert$ | 同じ値。ALiBi を一部のヘッドだけに使うこともできる | キーの末尾に合わせる |

# %% [markdown] lang="en"
# ## Exercises
#
# 1. For $n = 2^k + r$ heads, which slopes of the $2^{k+1}$-head sequence are left out?
#    Check your answer with `alibi_slopes` for $n = 5$, $12$, $24$ and $112$.
# 2. Use `alibi_bias(n, T, causal=False)` as the only positional signal of a
#    bidirectional attention. Show that reversing the order of the tokens reverses the
#    output rows. What can such an encoder not tell apart?
# 3. With a bias formed as $m_h\, j$ and rounded to bfloat16, find the first position $j$
#    at which two neighbouring keys of head 1 of 8 heads ($m_1 = 1/2$) get the same bias.
#    Does the paper's form have such a position?
# 4. Derive $\sum_{k \ge 0} k\, w_h(k) = 1/(e^{m_h} - 1)$ from the geometric series, and show
#    that it lies between $1/m_h - 1$ and $1/m_h$. Which of BLOOM's 112 heads looks
#    furthest back on average?

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
# 4. 等比級数から $\sum_{k \ge 0} k\, w_h(k) = 1/(e^{m_h} - 1)$ を導き、それが $1/m_h - 1$ と $1/m_h$ の間にあることを示してください。
#    BLOOM の 112 個のヘッドのうち、平均して最も遠くまで遡るのはどれでしょうか。

# %% [markdown] lang="en"
# ## References
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - The official code, `get_slopes` and the bias in `fairseq/models/transformer.py`.
#   <https://github.com/ofirpress/attention_with_linear_biases>
# - BigScience Workshop (2022). *BLOOM: A 176B-Parameter Open-Access Multilingual
#   Language Model*. <https://arxiv.org/abs/2211.05100>
# - Hugging Face transformers, `build_alibi_tensor` in `models/bloom/modeling_bloom.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/bloom/modeling_bloom.py>
# - MosaicML llm-foundry, `gen_slopes` and `build_alibi_bias` (MPT).
#   <https://github.com/mosaicml/llm-foundry>
# - labml.ai, annotated implementation of ALiBi.
#   <https://nn.labml.ai/transformers/alibi/index.html>
# - lucidrains, x-transformers, `AlibiPositionalBias`.
#   <https://github.com/lucidrains/x-transformers>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - 公式実装。`fairseq/models/transformer.py` の `get_slopes` とバイアス。
#   <https://github.com/ofirpress/attention_with_linear_biases>
# - BigScience Workshop (2022). *BLOOM: A 176B-Parameter Open-Access Multilingual
#   Language Model*. <https://arxiv.org/abs/2211.05100>
# - Hugging Face transformers、`models/bloom/modeling_bloom.py` の `build_alibi_tensor`。
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/bloom/modeling_bloom.py>
# - MosaicML llm-foundry、`gen_slopes` と `build_alibi_bias`（MPT）。
#   <https://github.com/mosaicml/llm-foundry>
# - labml.ai、ALiBi の注釈付き実装（英語）。
#   <https://nn.labml.ai/transformers/alibi/index.html>
# - lucidrains、x-transformers の `AlibiPositionalBias`。
#   <https://github.com/lucidrains/x-transformers>
