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
# # T5 relative position buckets
#
# T5 adds nothing to the token embeddings: every attention score gets one learned
# number per head, chosen by the [bucket](../docs/glossary.md#bucket) of the
# relative position $j - i$.
# Each small distance has a bucket of its own, larger distances share buckets that
# widen geometrically, and from 91 positions on (113 in a decoder) every distance
# shares the last bucket, well before the 128 the paper names.
# Beyond it the bias says only on which side of the query a key lies; in exchange it
# is defined at every length. Hugging Face's implementation pays for that with a bias
# tensor as large as the scores.

# %% [markdown] lang="ja"
# # T5 の相対位置バケット
#
# T5 はトークンの埋め込みに何も足しません。その代わり、すべてのアテンションスコアに、相対位置 $j - i$ の[バケット](../docs/glossary.ja.md#bucket)で決まる学習可能な数を、ヘッドごとに 1 つ足します。
# 小さな距離はそれぞれ専用のバケットを持ち、それより大きな距離は幅が等比的に広がるバケットを共有します。
# 距離が 91 以上（デコーダでは 113 以上）になると、すべて最後のバケットを共有します。論文が挙げる 128 よりかなり手前です。
# そこから先のバイアスが伝えるのは、キーがクエリのどちら側にあるかだけです。引き換えに、バイアスはどの長さでも定義されます。その分、Hugging Face の実装はスコアと同じ大きさのバイアスのテンソルを作る必要があります。

# %% tags=["setup"]
import math
import warnings
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.testing import assert_close

from posenc import T5RelativeBias, attention, t5_relative_position_bucket
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False, linewidth=76)

# %% [markdown] lang="en"
# ## Position as a bias on the scores
#
# Shaw et al. (2018) learned a vector for each clipped relative position and added it
# inside attention (the chapter
# [*Relative position representations*](04-shaw-relative.ipynb)). T5 keeps the idea
# that only the offset matters and shrinks the learned quantity to one number per
# head, added to the score before the softmax. For head $h$, a query at position $i$
# and a key at position $j$:
# $$s_h(i, j) = \frac{q_{h,i} \cdot k_{h,j}}{\sqrt{d}} + \beta_{b(j-i),\,h}$$
# The table $\beta$ has one row per bucket and one column per head, and $b$ maps the
# relative position $r = j - i$ (the key minus the query, as on the
# [notation page](../docs/notation.md#positions) and in T5's code) to a bucket. One
# table serves every layer of a stack. (T5 itself does not divide by $\sqrt{d}$: see
# [T5 in the libraries](#t5-in-the-libraries).)
#
# The bias depends on $i$ and $j$ only through $j - i$, so each head's bias matrix is
# constant along every diagonal. The buckets of ten queries against ten keys, with
# T5's defaults, show it: the diagonal is bucket $0$, the keys before the query take
# buckets $1$ to $7$ one distance at a time, the keys after it a second range from
# $17$ on, and the distances $8$ and $9$ already share a bucket ($8$ before the
# query, $24$ after it).

# %% [markdown] lang="ja"
# ## スコアへのバイアスとしての位置
#
# Shaw ら（2018）は、クリップした相対位置ごとに学習可能なベクトルを用意し、アテンションの中で足しました（[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章）。
# T5 は「相対位置だけが重要」という考え方を引き継ぎ、学習する量をヘッドごとに 1 つの数にまで減らして、softmax の前のスコアに足します。
# ヘッド $h$、位置 $i$ のクエリ、位置 $j$ のキーについて、次のようになります。
# $$s_h(i, j) = \frac{q_{h,i} \cdot k_{h,j}}{\sqrt{d}} + \beta_{b(j-i),\,h}$$
# 表 $\beta$ は、行がバケット、列がヘッドに対応します。
# $b$ は、相対位置 $r = j - i$ をバケットに写す関数です。相対位置はキーの位置からクエリの位置を引いたもので、[記法のページ](../docs/notation.ja.md#positions)や T5 のコードと同じ向きです。
# 表は 1 つで、スタックのすべての層が共有します。
# なお、T5 自体は $\sqrt{d}$ で割りません（[「ライブラリの中の T5」](#ライブラリの中の-t5)の節を参照）。
#
# バイアスは $i$ と $j$ の組ではなく $j - i$ だけで決まるので、各ヘッドのバイアス行列はどの対角線に沿っても一定です。
# T5 の既定値で、10 個のクエリと 10 個のキーのバケットを並べると、そのことがわかります。
# 対角線はバケット $0$ です。クエリより前のキーは距離ごとに別々のバケット（$1$ から $7$）に入り、クエリより後ろのキーは $17$ から始まる別の範囲に入ります。
# 距離 $8$ と $9$ は、早くも同じバケットを共有しています（クエリより前なら $8$、後ろなら $24$）。

# %%
r = torch.arange(10)[None, :] - torch.arange(10)[:, None]  # r[i, j] = j - i
t5_relative_position_bucket(r)  # 32 buckets, max_distance 128

# %% tags=["check"] summary={"en": "the grid is the buckets worked out by hand; attention with T5RelativeBias's bias is softmax(q·k/√d + β), each entry the table row of its bucket; every diagonal is constant", "ja": "格子は手で求めたバケットと一致します。T5RelativeBias のバイアスを使ったアテンションは softmax(q·k/√d + β) に等しく、バイアスの各成分はそのバケットに対応する表の値です。値はどの対角線の上でも一定です"}
# buckets by hand (E = 8, 16 a side): |r| for r <= 0, 16 + r for r > 0 while
# |r| < 8; |r| = 8, 9 share bucket 8 or 24, as ln(9/8) / ln(16) * 8 < 1
by_hand = {x: -x if x <= 0 else 16 + x for x in range(-7, 8)}
by_hand.update({-9: 8, -8: 8, 8: 24, 9: 24})
grid = [[by_hand[j - i] for j in range(10)] for i in range(10)]
assert t5_relative_position_bucket(r).tolist() == grid

H, T, d = 4, 10, 8
t5_bias = T5RelativeBias(H)  # beta: relative_attention_bias.weight, [32, H]
q, k = torch.randn(H, T, d), torch.randn(H, T, d)
with torch.no_grad():
    bias = t5_bias(T, T)  # [H, T, T]
# values = identity: attention returns softmax(q k^T / sqrt(d) + bias) itself
weights = attention(q, k, torch.eye(T).expand(H, T, T), bias=bias)
scores = q @ k.transpose(-2, -1) / math.sqrt(d) + bias
assert_close(weights, torch.softmax(scores, dim=-1))
table = t5_bias.relative_attention_bias.weight.detach()  # beta: [B, H]
expected = torch.stack([torch.stack([table[b] for b in row]) for row in grid])
assert_close(bias, expected.permute(2, 0, 1), rtol=0, atol=0)
# bias[h, i, j] depends only on j - i: shifting i and j together changes nothing
assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])

# %% [markdown] lang="en"
# ## Two ways to split the buckets
#
# With $B$ buckets in all (T5 uses $B = 32$), T5 has two settings. Both reduce $r$ to a
# distance $n \ge 0$ (here $n$ is a distance, not the key position of
# [*Rotary position embedding (RoPE)*](08-rope.ipynb)) and send it to one of $S$ buckets with a function $\hat b$, the same in
# both, which the next section derives.
#
# **Bidirectional** (the encoder, where a query sees keys on both sides): each side
# gets $S = B/2$ buckets, the distance is $n = |r|$, and keys after the query move to
# the second half:
# $$b(r) = \hat b(|r|) + S\,[r > 0]$$
# where $[r > 0]$ is $1$ if $r > 0$ and $0$ otherwise.
#
# **Causal** (the decoder, where a query sees only itself and earlier keys): all
# $S = B$ buckets serve one side, with the distance $n = \max(-r, 0)$:
# $$b(r) = \hat b(\max(-r, 0))$$
# Every key after the query gets $n = 0$ and shares bucket $0$ with $r = 0$; the
# [causal mask](../docs/glossary.md#causal-mask) removes those keys anyway.
#
# In the bidirectional setting $r = 0$ belongs to the first half, so a key after the
# query always has $n \ge 1$: bucket $S$ itself is never used, and one of the 32 is
# wasted. The figure draws $b(r)$ in both settings (left bidirectional, right
# causal). Near $r = 0$ every step is one
# position wide; further out the steps widen, and the last one begins well before the
# dotted lines at $|r| = 128$.

# %% [markdown] lang="ja"
# ## バケットの 2 通りの分け方
#
# バケットが全部で $B$ 個（T5 では $B = 32$）あるとき、T5 には 2 つの設定があります。
# どちらも $r$ を距離 $n \ge 0$ に直し、関数 $\hat b$ で $S$ 個のバケットのどれかに送ります（この章の $n$ は距離で、[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章のようなキーの位置ではありません）。
# この関数はどちらの設定でも同じで、次の節で導きます。
#
# **双方向**の設定はエンコーダで使い、クエリは両側のキーを見ます。片側に $S = B/2$ 個のバケットを割り当て、距離を $n = |r|$ とし、クエリより後ろのキーは後半へ移します。
# $$b(r) = \hat b(|r|) + S\,[r > 0]$$
# ここで $[r > 0]$ は、$r > 0$ なら $1$、そうでなければ $0$ です。
#
# **因果的**な設定はデコーダで使い、クエリは自分自身とそれより前のキーしか見ません。$S = B$ 個のバケットをすべて片側に使い、距離を $n = \max(-r, 0)$ とします。
# $$b(r) = \hat b(\max(-r, 0))$$
# クエリより後ろのキーはすべて $n = 0$ となり、$r = 0$ と同じバケット $0$ に入ります。
# そうしたキーは、どのみち[因果マスク](../docs/glossary.ja.md#causal-mask)が取り除きます。
#
# 双方向の設定では $r = 0$ が前半に属するので、クエリより後ろのキーは必ず $n \ge 1$ です。
# そのためバケット $S$ そのものは使われず、32 個のうち 1 個が無駄になります。
# 図に、両方の設定での $b(r)$ を示します（左が双方向、右が因果的な設定）。
# $r = 0$ の近くでは段の幅は 1 ですが、外側ほど段は広くなり、最後の段は $|r| = 128$ の点線よりかなり手前から始まります。

# %% tags=["figure"] alt={"en": ["Step plots of the T5 bucket b(r) against the relative position r from −160 to 160. Bidirectional (left): buckets 0–15 for keys before the query, 16–31 after. Causal (right): 0 for r ≥ 0, all 32 buckets before. Steps widen away from 0."], "ja": ["相対位置 r（−160〜160）に対する T5 のバケット b(r) の階段グラフ。左の双方向ではクエリより前のキーがバケット 0〜15、後ろのキーがバケット 16〜31 です。右の因果的な設定では r ≥ 0 はすべて 0 で、32 個すべてが前のキーに使われます。段は 0 から離れるほど広がります。"]}
r_plot = torch.arange(-160, 161)
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.0), sharey=True)
titles = ("$n = |r|$", r"$n = \max(-r,\, 0)$")
for ax, bidirectional, title in zip(axes, (True, False), titles, strict=True):
    b = t5_relative_position_bucket(r_plot, bidirectional=bidirectional)
    ax.step(r_plot, b, where="mid", lw=1.2)
    for x in (-128, 128):
        ax.axvline(x, color="0.5", lw=0.8, ls=":")
    ax.set(xlabel="$r = j - i$", title=title, xticks=[-128, -64, 0, 64, 128])
axes[0].set(ylabel="$b(r)$", yticks=[0, 8, 16, 24, 31])
plt.show()

# %% tags=["check"] summary={"en": "bidirectional: a key after the query gets the bucket of the same distance before it plus 16, and bucket 16 is never used; causal: every r ≥ 0 is bucket 0 and all 32 buckets are used", "ja": "双方向では、クエリより後ろのキーは同じ距離だけ前にあるキーのバケットに 16 を足したバケットに入り、バケット 16 は使われません。因果的な設定では r ≥ 0 はすべてバケット 0 で、32 個すべてが使われます"}
r = torch.arange(-300, 301)
bi = t5_relative_position_bucket(r, bidirectional=True)  # B = 32, S = 16
causal = t5_relative_position_bucket(r, bidirectional=False)  # B = 32, S = 32
# bidirectional: b(r) = b_hat(|r|) + 16 [r > 0], with b(-|r|) = b_hat(|r|)
assert torch.equal(bi[r > 0], bi[r < 0].flip(0) + 16)
# causal: every r >= 0 shares bucket 0
assert torch.equal(causal[r >= 0], torch.zeros(301, dtype=torch.long))
# bidirectional leaves bucket S = 16 unused; causal uses all 32
assert set(bi.tolist()) == set(range(32)) - {16}
assert set(causal.tolist()) == set(range(32))

# %% [markdown] lang="en"
# <!-- explorable: 06-t5-buckets -->
# *On the website, an interactive figure takes the place of this note: choose
# the number of buckets, the largest distance and the direction, and see the
# bucket of every relative position.*

# %% [markdown] lang="ja"
# <!-- explorable: 06-t5-buckets -->
# サイトでは、この注記の場所に対話的な図があります。バケット数、最大距離、設定（双方向／因果的）を選ぶと、各相対位置のバケットが表示されます。

# %% [markdown] lang="en"
# ## Inside one side: exact buckets, then logarithmic ones
#
# Of the $S$ buckets of a side, the first $E = \lfloor S/2 \rfloor$ are
# [exact](../docs/glossary.md#exact-bucket): for $n < E$ the bucket is the distance
# itself, $\hat b(n) = n$. The other $S - E$ cover the distances from $E$ to a maximum
# distance $D$ (T5: $D = 128$) on a logarithmic scale. For $n \ge E$:
# $$\hat b(n) = \min\left(E + \left\lfloor \frac{\ln(n/E)}{\ln(D/E)}\,(S - E) \right\rfloor,\ S - 1\right)$$
# The fraction $\ln(n/E) / \ln(D/E)$ runs from $0$ at $n = E$ to $1$ at $n = D$; times
# $S - E$ and rounded down, it counts the logarithmic buckets, and the minimum clips
# everything past the end into the last bucket $S - 1$. (T5's code truncates toward
# zero when it converts to an integer; for $n \ge E$ the value is not negative, so
# that is the floor.)
#
# With T5's defaults the bidirectional setting has $S = 16$ and $E = 8$: distances
# $0$ to $7$ have buckets $0$ to $7$, and distance $8$, where the logarithm is $0$,
# opens bucket $8$ (after the query, $r = 7$ is bucket $23$ and $r = 8$ bucket $24$).
# The causal setting has $S = 32$ and $E = 16$. A short float64 function written
# from this formula alone gives `posenc`'s bucket at every relative position from
# $-300$ to $300$.

# %% [markdown] lang="ja"
# ## 片側の中身：厳密バケットと対数バケット
#
# 片側の $S$ 個のバケットのうち、最初の $E = \lfloor S/2 \rfloor$ 個は[厳密バケット](../docs/glossary.ja.md#exact-bucket)です。
# $n < E$ では、距離そのものがバケットの番号になります（$\hat b(n) = n$）。
# 残りの $S - E$ 個は、$E$ から最大距離 $D$（T5 では $D = 128$）までの距離を対数スケールで受け持ちます。
# $n \ge E$ では次の式になります。
# $$\hat b(n) = \min\left(E + \left\lfloor \frac{\ln(n/E)}{\ln(D/E)}\,(S - E) \right\rfloor,\ S - 1\right)$$
# 比 $\ln(n/E) / \ln(D/E)$ は $n = E$ で $0$、$n = D$ で $1$ になります。
# これに $S - E$ を掛けて切り捨てると、何番目の対数バケットかが決まります。最後に min を取るので、範囲を超えた値はすべて最後のバケット $S - 1$ にクリップされます。
# T5 のコードは整数への変換で 0 の方向に切り捨てますが、$n \ge E$ では値が負にならないので、これは床関数と同じです。
#
# T5 の既定値の双方向の設定では、$S = 16$、$E = 8$ です。
# 距離 $0$ から $7$ はバケット $0$ から $7$ に入り、対数が $0$ になる距離 $8$ からバケット $8$ が始まります（クエリより後ろでは、$r = 7$ がバケット $23$、$r = 8$ がバケット $24$ です）。
# 因果的な設定では $S = 32$、$E = 16$ です。
# この式だけをもとに float64 で書いた短い関数は、$-300$ から $300$ までのすべての相対位置で `posenc` と同じバケットを返します。


# %% tags=["check"] summary={"en": "a float64 reference written from the formula equals posenc at all 601 relative positions in both settings; below E the bucket is the distance itself, and the edges fall at 7|8, 23|24 and, causal, 15|16", "ja": "式から書いた float64 の参照用の関数は、両方の設定の 601 個の相対位置すべてで posenc と一致します。E 未満ではバケットが距離そのもので、境目は 7|8、23|24、因果的な設定では 15|16 にあります"}
def reference_bucket(r, bidirectional, num_buckets=32, max_distance=128):
    """T5's bucket of one relative position r = j - i, in float64."""
    offset = 0
    if bidirectional:
        side = num_buckets // 2  # S = B / 2
        if r > 0:
            offset = side  # keys after the query: second half
        n = abs(r)
    else:
        side = num_buckets  # S = B
        n = max(-r, 0)  # keys after the query: distance 0
    exact = side // 2  # E
    if n < exact:
        return offset + n
    ratio = math.log(n / exact) / math.log(max_distance / exact)
    return offset + min(exact + math.floor(ratio * (side - exact)), side - 1)


for bidirectional in (True, False):
    ours = t5_relative_position_bucket(r, bidirectional=bidirectional)
    theirs = [reference_bucket(x, bidirectional) for x in r.tolist()]
    assert ours.tolist() == theirs

exact_side = t5_relative_position_bucket(-torch.arange(8))  # r = 0, ..., -7
assert torch.equal(exact_side, torch.arange(8))  # b_hat(n) = n for n < E = 8
edge = t5_relative_position_bucket(torch.tensor([-7, -8, 7, 8]))
assert edge.tolist() == [7, 8, 23, 24]
causal_edge = t5_relative_position_bucket(
    torch.tensor([-15, -16]), bidirectional=False
)
assert causal_edge.tolist() == [15, 16]  # causal: E = 16

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where float32 decides a bucket.** T5's own code (Mesh TensorFlow)
# and Hugging Face's compute the logarithm and the quotient in float32, not in the
# float64 of the reference. The two can part only where the quotient
# $\frac{\ln(n/E)}{\ln(D/E)}(S - E)$ is a whole number $t$, that is, where the
# integers satisfy $n^{S-E} E^{t} = D^{t} E^{S-E}$ (raise
# $n/E = (D/E)^{t/(S-E)}$ to the power $S - E$); every other quotient up to $n = 300$
# stays more than $10^{-4}$ from a whole number, far beyond what float32 rounding
# moves it (below $10^{-5}$). At the defaults this leaves three distances,
# $n = 16, 32, 64$ in the bidirectional setting, whose quotients are exactly
# $2, 4, 6$ (at $n = E$ the logarithm is $0$, and from $n = D$ on the clip decides).
# There the last bit decides: a quotient one unit in the last place (one ulp) lower
# puts each of them into the bucket before. `posenc` rounds a correctly rounded
# logarithm once to float32 and gives the buckets of exact arithmetic, $10, 12, 14$.
# PyTorch's float32 `log`, which Hugging Face calls, is accurate to about one ulp,
# but its last bit can vary from one CPU to another; Mesh TensorFlow multiplies by
# float32 reciprocals instead of dividing, and T5 was trained on TPUs. So at these
# three distances the bucket T5 itself used cannot be checked here, and another
# library's may differ by one; at every other distance they are expected to agree.
# Only `posenc` and Hugging Face's function are run here, where transformers is
# installed; Mesh TensorFlow's and flaxformer's buckets are inferred from their code.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：float32 がバケットを決める場所**
#
# 式から書いた参照用の関数は float64 で計算します。
# 一方、T5 のコード（Mesh TensorFlow）と Hugging Face のコードは、対数と商を float32 で計算します。
# 2 つの精度で結果が分かれうるのは、商 $\frac{\ln(n/E)}{\ln(D/E)}(S - E)$ が整数 $t$ になる場所、つまり整数どうしの等式 $n^{S-E} E^{t} = D^{t} E^{S-E}$ が成り立つ場所だけです
# （$n/E = (D/E)^{t/(S-E)}$ の両辺を $S - E$ 乗します）。
# $n = 300$ までのほかの商は、どれも整数から $10^{-4}$ より大きく離れています。float32 の丸めで商が動くのは $10^{-5}$ 未満なので、十分な余裕があります。
# 既定値で残るのは、双方向の設定の $n = 16, 32, 64$ の 3 つで、商はちょうど $2, 4, 6$ です（$n = E$ では対数が $0$ で、$n = D$ から先はクリップが結果を決めます）。
# この 3 つでは最後のビットが結果を決めます。商が最後の桁の 1 単位（1 ulp）だけ小さければ、それぞれ 1 つ前のバケットに入ります。
# `posenc` は正しく丸めた（correctly rounded）float32 の対数を使い、厳密な計算と同じバケット $10, 12, 14$ を返します。
# Hugging Face が呼ぶ PyTorch の float32 の `log` の誤差は 1 ulp 程度ですが、最後のビットは CPU によって変わることがあります。
# Mesh TensorFlow は割り算の代わりに float32 の逆数を掛けます。しかも T5 の学習は TPU 上で行われました。
# そのため、この 3 つの距離で T5 自身がどちらのバケットを使ったかはここでは確かめられず、ほかのライブラリのバケットは 1 つずれることがあります。
# それ以外のすべての距離では、どれも同じバケットになるはずです。
# ここで実行するのは `posenc` と、transformers がある環境での Hugging Face の関数だけです。Mesh TensorFlow と flaxformer のバケットは、コードを読んで推定したものです。


# %% tags=["deeper", "check"] summary={"en": "for n ≤ 300 only n = 16, 32, 64 (posenc: buckets 10, 12, 14) move when the quotient is one ulp lower; Hugging Face's function, where installed, agrees at every other distance", "ja": "n ≤ 300 で商を 1 ulp 小さくすると動くのは n = 16、32、64（posenc ではバケット 10、12、14）だけです。Hugging Face の関数は、transformers がある環境では、それ以外のすべての距離で一致します"}
def log32(x):  # float32 log, correctly rounded: Python's log, rounded once
    return torch.tensor([math.log(v) for v in x.tolist()]).float()


for side in (16, 32):  # bidirectional and causal, B = 32
    E, D = side // 2, 128
    n = torch.arange(E, 301)
    q64 = torch.tensor(
        [math.log(m / E) / math.log(D / E) * (side - E) for m in n.tolist()],
        dtype=torch.float64,
    )
    # whole numbers exactly where n^(S-E) E^t = D^t E^(S-E) holds in integers
    whole = [
        m
        for m in range(E, 301)
        for t in range(40)
        if m ** (side - E) * E**t == D**t * E ** (side - E)
    ]
    near = (q64 - q64.round()).abs() < 1e-9
    assert n[near].tolist() == whole
    assert whole == ([8, 16, 32, 64, 128, 256] if side == 16 else [16, 128])
    q32 = log32(n.float() / E) / math.log(D / E) * (side - E)  # as posenc
    gap = (q64 - q64.round()).abs()[~near].min()
    assert gap > 1e-4 and (q32.double() - q64).abs().max() < 1e-5
    ours = t5_relative_position_bucket(-n, bidirectional=side == 16)
    assert torch.equal(ours, (E + q32.long()).clamp_max(side - 1))
    moved = []
    for target in (-math.inf, math.inf):  # one ulp down, one ulp up
        nudged = torch.nextafter(q32, torch.full_like(q32, target))
        b = (E + nudged.long()).clamp_max(side - 1)
        moved.append(n[b != ours].tolist())
    assert moved == ([[16, 32, 64], []] if side == 16 else [[], []])
edges = t5_relative_position_bucket(-torch.tensor([16, 32, 64]))
assert edges.tolist() == [10, 12, 14]

try:  # Hugging Face's own function, where transformers is installed
    with warnings.catch_warnings():  # its import warns about tqdm
        warnings.simplefilter("ignore")
        from transformers.models.t5.modeling_t5 import T5Attention
except ImportError:  # the downloaded notebook needs only posenc
    T5Attention = None
if T5Attention is not None:
    r_wide = torch.arange(-1000, 1001)
    decided = torch.isin(r_wide.abs(), torch.tensor([16, 32, 64]))
    for bidirectional in (True, False):
        ours = t5_relative_position_bucket(r_wide, bidirectional=bidirectional)
        hf = T5Attention._relative_position_bucket(
            r_wide, bidirectional=bidirectional
        )
        assert torch.equal(hf[~decided], ours[~decided])
        assert ((ours - hf)[decided] >= 0).all()
        assert ((ours - hf)[decided] <= 1).all()

# %% [markdown] lang="en"
# ## The buckets widen geometrically
#
# Where does each logarithmic bucket begin? For a whole number $t$,
# $\lfloor x \rfloor \ge t$ exactly when $x \ge t$; so $\hat b(n) \ge E + t$ means
# $\ln(n/E) \ge \tfrac{t}{S-E} \ln(D/E)$, and since $\exp$ increases, $n \ge E\,(D/E)^{t/(S-E)}$.
# For $t = 0, 1, \dots, S - E - 1$:
# $$\hat b(n) \ge E + t \iff n \ge e_t, \qquad e_t = E\left(\frac{D}{E}\right)^{t/(S-E)}$$
# For $t < S - E - 1$, bucket $E + t$ holds the integers from $\lceil e_t \rceil$ to
# $\lceil e_{t+1} \rceil - 1$. Consecutive edges have the constant ratio
# $$\frac{e_{t+1}}{e_t} = \left(\frac{D}{E}\right)^{1/(S-E)}$$
# so the edges form a geometric progression, and so, up to rounding, do the widths.
# With the defaults the ratio is $(128/8)^{1/8} = \sqrt{2}$ in the bidirectional
# setting and $(128/16)^{1/16} = 8^{1/16} \approx 1.1388$ in the causal one.
#
# The last edge needs care. The unclipped formula would reach bucket $S$ at
# $e_{S-E} = D$, so the clip acts exactly on $n \ge D$. But the last bucket $S - 1$
# begins one ratio earlier, at
# $$e_{S-E-1} = D\left(\frac{E}{D}\right)^{1/(S-E)}$$
# which is $128/\sqrt{2} \approx 90.51$ in the bidirectional setting and about
# $112.40$ in the causal one. The table lists the distances in each logarithmic
# bucket: in the bidirectional setting the first seven hold 4, 4, 7, 9, 14, 18 and
# 27 distances, and the eighth, open-ended, starts at 91.

# %% [markdown] lang="ja"
# ## バケットは等比的に広がる
#
# 各対数バケットはどこから始まるのでしょうか。
# 整数 $t$ について、$\lfloor x \rfloor \ge t$ は $x \ge t$ と同値です。
# したがって $\hat b(n) \ge E + t$ は $\ln(n/E) \ge \tfrac{t}{S-E} \ln(D/E)$ と同じで、$\exp$ は増加関数なので $n \ge E\,(D/E)^{t/(S-E)}$ となります。
# $t = 0, 1, \dots, S - E - 1$ についてまとめると、次のとおりです。
# $$\hat b(n) \ge E + t \iff n \ge e_t, \qquad e_t = E\left(\frac{D}{E}\right)^{t/(S-E)}$$
# $t < S - E - 1$ なら、バケット $E + t$ には $\lceil e_t \rceil$ から $\lceil e_{t+1} \rceil - 1$ までの整数が入ります。
# 隣り合う境目の比は一定です。
# $$\frac{e_{t+1}}{e_t} = \left(\frac{D}{E}\right)^{1/(S-E)}$$
# つまり境目は等比数列をなし、丸めを除けば幅も等比数列になります。
# 既定値では、この比は双方向の設定で $(128/8)^{1/8} = \sqrt{2}$、因果的な設定で $(128/16)^{1/16} = 8^{1/16} \approx 1.1388$ です。
#
# 最後の境目には注意が必要です。クリップしなければ、式は $e_{S-E} = D$ でバケット $S$ に達します。つまり、クリップが効くのはちょうど $n \ge D$ の距離です。
# ところが最後のバケット $S - 1$ は、境目の比 1 つ分だけ手前から始まります。
# $$e_{S-E-1} = D\left(\frac{E}{D}\right)^{1/(S-E)}$$
# これは双方向の設定で $128/\sqrt{2} \approx 90.51$、因果的な設定で約 $112.40$ です。
# 下の表は、各対数バケットに入る距離の一覧です。
# 双方向の設定では、最初の 7 個に順に 4、4、7、9、14、18、27 個の距離が入り、上限のない 8 個目は 91 から始まります。

# %%
n = torch.arange(0, 2001)
starts = {}  # the first distance of each logarithmic bucket, from posenc
for side in (16, 32):  # bidirectional, causal
    E, D = side // 2, 128
    b_hat = t5_relative_position_bucket(-n, bidirectional=side == 16)
    starts[side] = [int(n[b_hat == b].min()) for b in range(E, side)]
    ratio = (D / E) ** (1 / (side - E))
    print(f"S = {side}: ratio {ratio:.4f}, last edge {D / ratio:.2f}")
    ends = [f"{s - 1}" for s in starts[side][1:]] + [""]
    ranges = zip(starts[side], ends, strict=True)
    cells = [f"{E + t:2d}: {lo}-{hi}" for t, (lo, hi) in enumerate(ranges)]
    for row in range(0, len(cells), 4):
        line = " | ".join(f"{c:10s}" for c in cells[row : row + 4])
        print("  " + line.rstrip())


# %% tags=["check"] summary={"en": "each bucket starts at the smallest integer n with n^(S−E)·E^t ≥ D^t·E^(S−E), the edge in integers; the last ones at ⌈e_(S−E−1)⌉ = 91 and 113; the widths are 4, 4, 7, 9, 14, 18, 27", "ja": "各バケットは n^(S−E)·E^t ≥ D^t·E^(S−E) を満たす最小の整数 n（整数で書いた境目）から始まります。最後のバケットは ⌈e_(S−E−1)⌉ = 91 と 113 から始まり、双方向での幅は 4、4、7、9、14、18、27 です"}
def first_at_least(t, E, side, D):  # smallest n with n^(S-E) E^t >= D^t E^(S-E)
    n = E
    while n ** (side - E) * E**t < D**t * E ** (side - E):
        n += 1
    return n


for side in (16, 32):
    E, D = side // 2, 128
    assert starts[side] == [
        first_at_least(t, E, side, D) for t in range(side - E)
    ]
    assert starts[side][-1] == math.ceil(D * (E / D) ** (1 / (side - E)))
assert [hi - lo for lo, hi in pairwise(starts[16])] == [4, 4, 7, 9, 14, 18, 27]
assert (starts[16][-1], starts[32][-1]) == (91, 113)

# %% [markdown] lang="en"
# On a logarithmic axis the geometric edges are evenly spaced. The figure draws
# $\hat b(n)$ for both side sizes with the unrounded value
# $E + \frac{\ln(n/E)}{\ln(D/E)}(S - E)$ dashed: the steps follow the dashed line from
# below until the clip at $n = D$ holds them at $S - 1$.

# %% [markdown] lang="ja"
# 対数軸では、等比的な境目が等間隔に並びます。
# 図は、片側のバケット数が 16 と 32 の場合のそれぞれについて $\hat b(n)$ を描き、丸める前の値 $E + \frac{\ln(n/E)}{\ln(D/E)}(S - E)$ を破線で重ねたものです。
# 階段は破線のすぐ下をたどり、$n = D$ でクリップされて $S - 1$ にとどまります。

# %% tags=["figure"] alt={"en": ["Bucket of distance n, log axis from 1 to 1024, for side sizes 16 and 32, the unrounded formula dashed. Steps of one up to n = 8 or 16, then geometrically wider steps just under the dashed line, flat at bucket 15 or 31 from n = 91 or 113."], "ja": ["距離 n（1〜1024、対数軸）に対するバケットを、片側のバケット数が 16 と 32 の場合について描き、丸める前の式を破線で重ねた図。n = 8 または 16 までは幅 1 の段、その先は破線のすぐ下で等比的に広がる段となり、n = 91 または 113 から先は最後のバケット 15 または 31 で平らになります。"]}
n_plot = torch.arange(1, 1025)
fig, ax = plt.subplots(figsize=(6.4, 3.0))
for bidirectional, side in ((True, 16), (False, 32)):
    E, D = side // 2, 128
    b_hat = t5_relative_position_bucket(-n_plot, bidirectional=bidirectional)
    (line,) = ax.step(
        n_plot, b_hat, where="post", lw=1.2, label=f"$S = {side}$"
    )
    smooth = torch.arange(E, 1025).double()
    unrounded = E + torch.log(smooth / E) / math.log(D / E) * (side - E)
    ax.plot(smooth, unrounded, "--", lw=0.8, color=line.get_color())
ax.axvline(128, color="0.5", lw=0.8, ls=":")
ax.set(xscale="log", xlabel="$n$", ylabel=r"$\hat b(n)$", ylim=(0, 40))
ax.set_yticks([0, 8, 15, 31])
ax.set_xticks([1, 8, 16, 128, 1024], ["$1$", "$8$", "$16$", "$128$", "$1024$"])
ax.minorticks_off()
ax.legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# ## What the model cannot tell apart
#
# Every distance from the last edge on lands in the last bucket of its side, however
# large. A bidirectional T5 head gives the same bias to a key 91 positions away and to
# one 10000 positions away (113 in the causal setting): beyond that distance the bias
# says nothing about how far a key is, only on which side of the query it lies. The
# paper describes a later edge: 32 embeddings "with ranges that increase in size
# logarithmically up to an offset of 128" (Raffel et al., §2.1), beyond which all
# relative positions share one embedding. In the code, 128 is where the clip acts;
# the last shared range already begins one ratio earlier.
#
# There is a good side. The bias is defined at every length: there is no table of
# positions to run out of, which is the "more graceful generalization to longer
# sequences" that a comment in Mesh TensorFlow's code hopes for. A query at the end of
# 5000 keys gets a bias for each of them, but only 16 distinct values: the keys all
# lie at or before it, so only the first half of the buckets is reached, and all but
# the nearest 91 keys share one value.
#
# The price is paid in memory and time. Hugging Face's `compute_bias` gathers the bias
# for every query-key pair and [materialises](../docs/glossary.md#materialise) it as a
# tensor of shape $[h, q, k]$, which grows with the square of the length, and
# SDPA needs it in that form as a mask. A
# [fused attention kernel](../docs/glossary.md#fused-attention-kernel) such as
# FlexAttention can instead look it up per score in the small table
# (`T5RelativeBias.score_mod`; see
# [*Learned distance functions and contextual positions*](15-learned-bias-functions.ipynb#what-each-family-costs-kv-caches-and-fused-kernels)).
# Press et al. (2022, §2.2), who added T5's bias to their language model, report
# training at least twice as slow as with the sinusoidal encoding, and in their
# Figure 1 it ran out of memory on a 32 GB GPU as the inputs grew. The same figure
# shows the good side too: T5's bias was the best of their baselines past the
# training length, improving perplexity up to about twice that length (§4.1).

# %% [markdown] lang="ja"
# ## モデルが区別できないもの
#
# 最後の境目から先の距離は、どれほど大きくても、その側の最後のバケットに入ります。
# 双方向の T5 のヘッドは、距離 91 のキーと距離 10000 のキーに同じバイアスを与えます（因果的な設定では 113）。
# この距離より先では、バイアスはキーがどれだけ遠いかを何も伝えず、クエリのどちら側にあるかだけを伝えます。
# 論文（Raffel ら、§2.1）の説明では、境目はもっと先にあります。
# 32 個の埋め込みの範囲は「相対位置 128 まで対数的に大きくなる」（increase in size logarithmically up to an offset of 128）とあります。
# それより先の相対位置は、すべて 1 つの埋め込みを共有します。
# コードでは、128 はクリップが効き始める距離です。すべての距離が 1 つの値を共有する最後の範囲は、境目の比 1 つ分だけ手前からすでに始まっています。
#
# 良い面もあります。バイアスはどんな長さでも定義されます。表の範囲を超える位置というものがないからです。
# これが、Mesh TensorFlow のコメントが期待する「長い系列へのより無理のない汎化」（more graceful generalization to longer sequences）です。
# 5000 個のキーの末尾にあるクエリは、そのすべてに対してバイアスを受け取りますが、値は 16 通りしかありません。
# キーはすべてクエリの位置かそれより前にあるのでバケットの前半にしか届かず、近い 91 個を除くすべてのキーが 1 つの値を共有するからです。
#
# 代償はメモリと時間です。
# Hugging Face の `compute_bias` は、クエリとキーの組ごとに表からバイアスを取り出し、形状 $[h, q, k]$ のテンソルとして[実体化](../docs/glossary.ja.md#materialise)します。このテンソルは長さの 2 乗で大きくなり、SDPA にマスクとして渡すときもこの形が必要です。
# FlexAttention のような[融合アテンションカーネル](../docs/glossary.ja.md#fused-attention-kernel)なら、テンソルを作らず、スコアごとに小さな表を引けます
# （`T5RelativeBias.score_mod`。[「学習可能な距離関数と文脈に応じた位置」](15-learned-bias-functions.ipynb#手法ごとのコストkv-キャッシュと融合カーネル)の章を参照）。
# T5 のバイアスを自分たちの言語モデルに組み込んだ Press ら（2022、§2.2）は、正弦波位置エンコーディングと比べて学習が 2 倍以上遅かったと報告しています。
# 同じ論文の図 1 によると、入力を長くしていくと、32 GB の GPU ではメモリが足りなくなりました。
# 一方で同じ図は良い面も示しています。学習時の長さを超えた入力では、T5 のバイアスはベースラインの中で最も良く、学習時の長さの約 2 倍までパープレキシティが改善し続けました（§4.1）。

# %%
long_bias = T5RelativeBias(2)
with torch.no_grad():
    row = long_bias(1, 5000)[:, 0]  # [H, 5000]: the query at position 4999
distinct = row[0].unique().numel()
print(
    f"distinct bias values in one head's row of 5000 keys: {distinct}", end=""
)

# %% tags=["check"] summary={"en": "every distance from 128 to 10⁶ is in the last bucket, and so is every one from 91 (causal: 113); in the 5000-key row all but the nearest 91 keys get the last bucket's value", "ja": "128 から 10⁶ までのすべての距離は最後のバケットに入り、91 以上（因果的な設定では 113 以上）のすべての距離も同じです。5000 個のキーの行では、近い 91 個を除くすべてのキーが最後のバケットの値を受け取ります"}
far = torch.cat([torch.arange(128, 2000), torch.tensor([10**4, 10**5, 10**6])])
assert (t5_relative_position_bucket(-far) == 15).all()
assert (t5_relative_position_bucket(far) == 31).all()
assert (t5_relative_position_bucket(-far, bidirectional=False) == 31).all()
# the last bucket already starts at 91 (bidirectional) and 113 (causal)
assert (t5_relative_position_bucket(-torch.arange(91, 128)) == 15).all()
assert (t5_relative_position_bucket(torch.arange(91, 128)) == 31).all()
assert t5_relative_position_bucket(torch.tensor(-90)) == 14
before = -torch.arange(113, 128)
assert (t5_relative_position_bucket(before, bidirectional=False) == 31).all()
assert (
    t5_relative_position_bucket(torch.tensor(-112), bidirectional=False) == 30
)
weight = long_bias.relative_attention_bias.weight.detach()
assert torch.equal(
    row[:, : 5000 - 91], weight[15, :, None].expand(2, 5000 - 91)
)
assert not torch.equal(row[:, 5000 - 91], row[:, 5000 - 92])
assert distinct == 16

# %% [markdown] lang="en"
# ## The table, and queries at the end of the keys
#
# `posenc.T5RelativeBias(n_heads)` holds $\beta$ as `relative_attention_bias`, an
# `nn.Embedding(num_buckets, n_heads)` named and shaped as in Hugging Face's
# `T5Attention`, so the weight of a Hugging Face T5 checkpoint copies in as it is.
# `forward(q_len, k_len)` returns a tensor of shape `(n_heads, q_len, k_len)` with
# entry $\beta_{b(j-i),\,h}$ at $(h, i, j)$. It places query $i$ of `q_len` at
# position $i + k_{\mathrm{len}} - q_{\mathrm{len}}$, the end of the keys, as a decoder
# that generates with a [KV cache](../docs/glossary.md#kv-cache) needs: the bias of the
# queries of a step is the last rows of the full bias. Hugging Face's T5 places them
# the same way. A single [decode step](../docs/glossary.md#decode-step) needs no mask:
# its only query is the newest token, and every cached key lies at or before it.
#
# To see a head's bias, the figure sets the table to a made-up profile that falls by
# one per bucket, $\beta_{b,h} = -(b \bmod 16)$, the same on both sides, and draws
# head $0$ for 160 positions, so that each colour is one bucket on each side of the
# diagonal. The diagonal
# ($r = 0$, bucket $0$) is $0$; bands of constant colour run parallel to it, one
# position wide near it and wider further out; beyond $|j - i| = 90$ the colour no
# longer changes.

# %% [markdown] lang="ja"
# ## バイアスの表と、キーの末尾に並ぶクエリ
#
# `posenc.T5RelativeBias(n_heads)` は、表 $\beta$ を `relative_attention_bias` として持ちます。
# これは `nn.Embedding(num_buckets, n_heads)` で、名前と形状は Hugging Face の `T5Attention` と同じなので、Hugging Face の T5 のチェックポイントの重みをそのままコピーできます。
# `forward(q_len, k_len)` は形状 `(n_heads, q_len, k_len)` のテンソルを返し、その $(h, i, j)$ 成分は $\beta_{b(j-i),\,h}$ です。
# `q_len` 個のうちのクエリ $i$ は、位置 $i + k_{\mathrm{len}} - q_{\mathrm{len}}$、つまりキーの末尾に置かれます。
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使って生成するデコーダには、この置き方が必要です。各ステップのクエリのバイアスは、全体のバイアスの末尾の `q_len` 行になります。
# Hugging Face の T5 も同じ位置にクエリを置きます。
# [デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)ではマスクは要りません。クエリは最新のトークン 1 つだけで、キャッシュされたキーはすべてその位置かそれより前にあるからです。
#
# ヘッドのバイアスを見るために、図では表を、バケットごとに 1 ずつ下がる仮の値 $\beta_{b,h} = -(b \bmod 16)$（両側で同じ）に設定し、長さ 160 の系列でヘッド $0$ を描きます。
# すると、対角線の片側ごとに、1 つの色が 1 つのバケットに対応します。
# 対角線（$r = 0$、バケット $0$）は $0$ です。対角線に平行に同じ色の帯が並び、近くでは幅が 1 で、離れるほど広くなります。
# $|j - i| = 90$ より先では、色はもう変わりません。

# %% tags=["figure"] alt={"en": ["Heatmap of head 0's T5 bias, queries i down and keys j across, 160 positions, with the table set to −(b mod 16): bands of constant colour parallel to the diagonal, thin near it, wider further out, uniform beyond a distance of 90."], "ja": ["表を −(b mod 16) に設定したときの、ヘッド 0 の T5 バイアスのヒートマップ（縦はクエリ i、横はキー j、長さ 160）。対角線に平行な一定色の帯が並び、対角線の近くでは細く、離れるほど広がり、距離 90 を超えると一様になります。"]}
H = 3
module = T5RelativeBias(H)
profile = -(torch.arange(32) % 16).float()  # beta_{b,h} = -(b mod 16)
with torch.no_grad():
    module.relative_attention_bias.weight.copy_(profile[:, None].expand(32, H))
    picture = module(160, 160)[0]  # head 0: [160, 160]

fig, ax = plt.subplots(figsize=(4.6, 3.6))
im = ax.imshow(picture.numpy(), cmap="viridis", interpolation="nearest")
ax.set(
    xlabel="$j$", ylabel="$i$", title=r"$\beta_{b,0} = -(b \ \mathrm{mod}\ 16)$"
)
ax.grid(False)
fig.colorbar(im, ax=ax, label=r"$\beta_{b(j-i),\,0}$")
plt.show()

# %% tags=["check"] summary={"en": "every entry of T5RelativeBias(5, 7) is the table at the reference bucket of j − (i + 2); the picture is −(b mod 16) entry by entry; the last query rows are the full bias's last rows, and decoding one token at a time equals the full causal pass", "ja": "T5RelativeBias(5, 7) の各成分は、参照用の関数で求めた j − (i + 2) のバケットの表の値で、図は成分ごとに −(b mod 16) です。最後のクエリの行は全体のバイアスの最後の行で、1 トークンずつのデコードは一括の因果的な計算と一致します"}
fresh = T5RelativeBias(H)
table = fresh.relative_attention_bias.weight  # [32, H]
assert table.shape == (32, H)
with torch.no_grad():
    out = fresh(5, 7)  # queries at positions 2..6 of 7 keys
assert out.shape == (H, 5, 7)
for h in range(H):
    for i in range(5):
        for j in range(7):
            assert out[h, i, j] == table[reference_bucket(j - (i + 2), True), h]
expected = [
    [-(reference_bucket(j - i, True) % 16) for j in range(160)]
    for i in range(160)
]
assert_close(picture, torch.tensor(expected).float(), rtol=0, atol=0)

decoder_bias = T5RelativeBias(H, bidirectional=False)
with torch.no_grad():
    full = decoder_bias(10, 10)  # [H, 10, 10]
    assert_close(decoder_bias(3, 10), full[:, -3:], rtol=0, atol=0)
    T = 12
    q, k, v = torch.randn(3, H, T, d).unbind(0)
    at_once = attention(q, k, v, bias=decoder_bias(T, T), causal=True)
    for t in range(T):  # step t: one query, keys 0..t from the cache, no mask
        kv = k[:, : t + 1], v[:, : t + 1]
        step = attention(q[:, t : t + 1], *kv, bias=decoder_bias(1, t + 1))
        assert_close(step, at_once[:, t : t + 1])

# %% [markdown] lang="en"
# ## T5 in the libraries
#
# **No $1/\sqrt{d}$.** T5 computes the score as
# $q_{h,i} \cdot k_{h,j} + \beta_{b(j-i),\,h}$ without dividing by $\sqrt{d}$: the
# factor $d_{kv}^{-1/2}$ sits in the initial query weights instead, and training is
# then free to change it. To run T5 weights through `posenc.attention`, which divides
# by $\sqrt{d}$, multiply the queries by $\sqrt{d}$.

# %% [markdown] lang="ja"
# ## ライブラリの中の T5
#
# **$1/\sqrt{d}$ がありません**。T5 はスコアを $q_{h,i} \cdot k_{h,j} + \beta_{b(j-i),\,h}$ として計算し、$\sqrt{d}$ で割りません。
# 係数 $d_{kv}^{-1/2}$ はアテンションの中ではなく、クエリの重みの初期値に入っており、その後は学習で自由に変わります。
# $\sqrt{d}$ で割る `posenc.attention` に T5 の重みを通すときは、クエリに $\sqrt{d}$ を掛けてください。

# %% tags=["check"] summary={"en": "T5's unscaled softmax(q·k + β)v equals posenc.attention with the queries multiplied by √d", "ja": "T5 のスケーリングなしの softmax(q·k + β)v は、クエリに √d を掛けた posenc.attention と一致します"}
q, k, v = torch.randn(3, H, T, d).unbind(0)
with torch.no_grad():
    beta = fresh(T, T)
t5_style = torch.softmax(q @ k.transpose(-2, -1) + beta, dim=-1) @ v
t5_through_posenc = attention(q * math.sqrt(d), k, v, bias=beta)
assert_close(t5_through_posenc, t5_style)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: tables, initialisation, signs, layout and precision across libraries.**
# One table per stack. The T5 paper shares the position parameters across all
# layers, with a different bias for each head. In Hugging Face's `T5Stack` only the
# first block is built with `has_relative_attention_bias=True`; it computes the bias,
# and every later layer of the stack reuses it. The encoder (bidirectional) and the
# decoder's self-attention (causal) have a table each; the decoder's cross-attention
# has none. With 32 buckets and 12 heads, as in T5-base, a table holds
# $32 \cdot 12 = 384$ numbers. Hugging Face's UMT5 differs: each of its self-attention
# layers builds its own table. `posenc.T5RelativeBias` is one table; sharing it is the
# caller's choice.
#
# T5 v1.1, Flan-T5 and mT5 load into the same classes in Hugging Face (mT5's
# `MT5Attention` is a copy of `T5Attention`) with 32 buckets and $D = 128$, so all
# of them use the buckets of this chapter.
#
# Hugging Face's T5 draws $W_Q$ with standard deviation
# $(d_{\mathrm{model}}\, d_{kv})^{-1/2}$ and $W_K$ with $d_{\mathrm{model}}^{-1/2}$
# ("Mesh TensorFlow attention initialization to avoid scaling before softmax", says
# the comment in transformers 4). The same function draws the bias table with
# standard
# deviation $d_{\mathrm{model}}^{-1/2}$ (times `initializer_factor`, 1 by default),
# about 0.044 for $d_{\mathrm{model}} = 512$; `posenc.T5RelativeBias` draws it with
# 0.02 (re-draw the weight with `nn.init.normal_` to initialise it as Hugging
# Face does).
#
# | | relative position in the code | logarithm and quotient |
# |---|---|---|
# | Mesh TensorFlow (T5) | `n = -relative_position`, the query minus the key | float32 (`mtf.to_float`), in the model's graph: on TPUs for T5 |
# | Hugging Face `T5Attention` | `memory_position - context_position`, the key minus the query | float32 (`.float()`), PyTorch's `log` |
# | flaxformer (T5X) | `n = -relative_position` | NumPy on the host by default (`on_device_computation=False`): float32 `log` of $n/E + \epsilon$, $\epsilon$ = `np.finfo(np.float32).eps`; the quotient in float32 with NumPy 1.x, in float64 with NumPy 2 |
# | `posenc` | key minus query | float32 with a correctly rounded `log`, once per setting |
#
# The sign conventions differ, but all of them send the keys after the query to the
# second half, and at the defaults the buckets agree; flaxformer's epsilon and its
# float64 quotient under NumPy 2 can move a bucket only off the defaults (checked
# against a NumPy rewrite of its function, not flaxformer itself). Mesh
# TensorFlow and flaxformer store the table as
# `(num_heads, num_buckets)`, the transpose of Hugging Face's
# `(num_buckets, n_heads)`, which `posenc` follows.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ライブラリごとの表の数、初期化、相対位置の向き、表の持ち方、精度**
#
# 表は層ごとではなくスタックごとに 1 つです。T5 の論文は、位置のパラメータをすべての層で共有し、ヘッドごとに異なるバイアスを使います。
# Hugging Face の `T5Stack` では、最初のブロックだけが `has_relative_attention_bias=True` で作られます。そのブロックがバイアスを計算し、スタックの後続の層はすべてそれを再利用します。
# エンコーダ（双方向）とデコーダのセルフアテンション（因果的）は、それぞれ自分の表を持ち、デコーダのクロスアテンションは表を持ちません。
# T5-base のようにバケットが 32 個、ヘッドが 12 個なら、表は $32 \cdot 12 = 384$ 個の数です。
# 一方、Hugging Face の UMT5 では、セルフアテンションの各層がそれぞれ自分の表を作ります。
# `posenc.T5RelativeBias` が持つ表は 1 つだけで、それを共有するかどうかは呼び出す側が決めます。
#
# Hugging Face では、T5 v1.1、Flan-T5、mT5 も同じクラスに読み込まれ（mT5 の `MT5Attention` は `T5Attention` の複製です）、どれもバケット 32 個、$D = 128$ です。
# したがって、どれもこの章のバケットを使います。
#
# Hugging Face の T5 は $W_Q$ を標準偏差 $(d_{\mathrm{model}}\, d_{kv})^{-1/2}$ で、$W_K$ を $d_{\mathrm{model}}^{-1/2}$ で初期化します。
# transformers 4 のコードには、この初期化を「softmax の前でスケーリングしないための、Mesh TensorFlow 流の初期化」と説明するコメントがあります。
# 同じ関数は、バイアスの表を標準偏差 $d_{\mathrm{model}}^{-1/2}$ に `initializer_factor`（既定値は 1）を掛けた値で初期化します。$d_{\mathrm{model}} = 512$ なら約 0.044 です。
# `posenc.T5RelativeBias` の標準偏差は 0.02 です（Hugging Face と同じ初期化にするには、`nn.init.normal_` で重みを引き直してください）。
#
# | | コード中の相対位置 | 対数と商の計算 |
# |---|---|---|
# | Mesh TensorFlow（T5） | `n = -relative_position`（クエリの位置からキーの位置を引いた値） | float32（`mtf.to_float`）、モデルの計算グラフの中で計算。T5 では TPU 上 |
# | Hugging Face の `T5Attention` | `memory_position - context_position`（キーの位置からクエリの位置を引いた値） | float32（`.float()`）、PyTorch の `log` |
# | flaxformer（T5X） | `n = -relative_position` | 既定（`on_device_computation=False`）ではホスト上の NumPy。$\epsilon$ = `np.finfo(np.float32).eps` として、float32 の `log` の引数は $n/E + \epsilon$。商は NumPy 1.x なら float32、NumPy 2 なら float64 |
# | `posenc` | キーの位置からクエリの位置を引いた値 | 正しく丸めた `log` を使う float32。設定ごとに 1 回だけ計算 |
#
# 引き算の向きは違っても、どれもクエリより後ろのキーを後半に送り、既定値ではバケットは一致します。flaxformer の epsilon と NumPy 2 での float64 の商がバケットを変えうるのは、既定値以外の設定だけです。
# ただし、確かめた相手は flaxformer そのものではなく、その関数を NumPy で書き直したものです。
# Mesh TensorFlow と flaxformer は表を `(num_heads, num_buckets)` の形状で持ちます。
# これは Hugging Face の `(num_buckets, n_heads)` の転置で、`posenc` は Hugging Face に合わせています。

# %% tags=["deeper"]
# the bias table: posenc draws it with std 0.02, Hugging Face with d_model^-1/2
d_model = 512
big_table = T5RelativeBias(1024).relative_attention_bias.weight.detach()
assert abs(big_table.std() / 0.02 - 1) < 0.02
assert round(d_model**-0.5, 3) == 0.044
print(f"bias table std: posenc {big_table.std():.4f}, ", end="")
print(f"Hugging Face d_model^-1/2 = {d_model**-0.5:.4f}")


# %% tags=["deeper", "check"] summary={"en": "flaxformer's bucket, rewritten in NumPy from its code, equals posenc's at the defaults under NumPy 1.x and 2; off the defaults its epsilon (B = 72, D = 50: r = −30 in bucket 27, posenc 26) and NumPy 2's float64 quotient (32 causal buckets, D = 289: r = −68 in 23, NumPy 1.x 24) move a bucket", "ja": "書き直した flaxformer のバケットは、既定値では NumPy 1.x でも 2 でも posenc と一致します。既定値以外では、epsilon（B = 72、D = 50 で r = −30 がバケット 27、posenc は 26）と NumPy 2 の float64 の商（因果的な 32 個、D = 289 で r = −68 が 23、NumPy 1.x は 24）がバケットを動かします"}
def flax_bucket(
    r, bidirectional=True, num_buckets=32, max_distance=128, v1=False
):
    """flaxformer's bucket rewritten in NumPy, with a correctly rounded log."""
    n = -np.asarray(r)  # flaxformer: n = -relative_position
    offset = 0
    if bidirectional:
        num_buckets //= 2
        offset = (n < 0) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    exact = num_buckets // 2
    x = n.astype(np.float32) / exact + np.finfo(np.float32).eps  # float32
    log_x = np.float32([math.log(v) for v in x.tolist()])
    divisor = np.log(max_distance / exact)  # a float64 NumPy scalar
    if v1:  # NumPy 1.x: the scalar takes the array's float32
        divisor = np.float32(divisor)
    q = log_x / divisor * (num_buckets - exact)
    large = np.minimum(exact + q.astype(np.int32), num_buckets - 1)
    return offset + np.where(n < exact, n, large)


r = torch.arange(-300, 301)
for bidirectional in (True, False):  # defaults: the same buckets
    ours = t5_relative_position_bucket(r, bidirectional=bidirectional).numpy()
    for v1 in (True, False):
        assert (flax_bucket(r.numpy(), bidirectional, v1=v1) == ours).all()
flax30 = [flax_bucket([-30], True, 72, 50, v1=v1)[0] for v1 in (True, False)]
flax68 = [flax_bucket([-68], False, 32, 289, v1=v1)[0] for v1 in (True, False)]
ours68 = t5_relative_position_bucket(
    torch.tensor(-68), bidirectional=False, num_buckets=32, max_distance=289
)
ours30 = t5_relative_position_bucket(
    torch.tensor(-30), num_buckets=72, max_distance=50
)
assert flax30 == [27, 27] and ours30 == 26
assert flax68 == [24, 23] and ours68 == 24

# %% [markdown] lang="en"
# ## What to remember
#
# - T5 adds to every attention score one learned scalar per head and bucket of the
#   relative position $j - i$. One table serves a whole stack.
# - Bidirectional: $S = 16$ buckets a side, keys after the query shifted by 16, and
#   bucket 16 never used. Causal: all 32 buckets for the keys before the query.
# - In a side, the first $E = \lfloor S/2 \rfloor$ buckets hold one distance each;
#   the rest widen by the constant ratio $(D/E)^{1/(S-E)}$, $\sqrt{2}$ at the
#   bidirectional defaults.
# - The last bucket starts one ratio before $D$: at 91 (bidirectional) or 113
#   (causal), not at the paper's 128. Beyond it the bias tells only the side.
# - The bias exists at every length. Hugging Face materialises it as $[h, q, k]$,
#   memory growing with the square of the length; a FlexAttention `score_mod` looks
#   it up per score instead.
# - T5 does not divide the scores by $\sqrt{d}$: multiply the queries by $\sqrt{d}$
#   to run its weights through a scaled attention.

# %% [markdown] lang="ja"
# ## まとめ
#
# - T5 は、すべてのアテンションスコアに、ヘッドと相対位置 $j - i$ のバケットの組ごとに決まる、学習可能なスカラーを 1 つ足します。
#   表はスタック全体で 1 つです。
# - 双方向では片側に $S = 16$ 個のバケットを使います。クエリより後ろのキーのバケットは 16 だけずれ、バケット 16 は使われません。
#   因果的な設定では、32 個すべてをクエリより前のキーに使います。
# - 片側では、最初の $E = \lfloor S/2 \rfloor$ 個のバケットが距離を 1 つずつ受け持ちます。
#   残りは一定の比 $(D/E)^{1/(S-E)}$ で広がり、既定値の双方向では $\sqrt{2}$ です。
# - 最後のバケットは、論文のいう 128 からではなく、$D$ を境目の比で 1 回割った位置、つまり 91（双方向）または 113（因果的）から始まります。
#   そこから先では、バイアスはどちら側かしか伝えません。
# - バイアスはどの長さでも定義されます。Hugging Face はこれを $[h, q, k]$ として実体化するので、メモリは長さの 2 乗で増えます。FlexAttention の `score_mod` なら、実体化せずスコアごとに表を引きます。
# - T5 はスコアを $\sqrt{d}$ で割りません。スケーリングするアテンションで T5 の重みを使うときは、クエリに $\sqrt{d}$ を掛けます。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Where does the last bucket of a side begin for $B = 64$ and $D = 256$, in both
#    settings? Use the edge $\lceil D(E/D)^{1/(S-E)} \rceil$ and check it with
#    `t5_relative_position_bucket`.
# 2. A bidirectional T5 encoder reads 512 tokens. How many different bias values can
#    one head give to the keys of the query at position 256? And of the query at
#    position 0? Count them with `T5RelativeBias(1)(512, 512)`.
# 3. Shaw et al. (2018) clip the relative position to $[-k, k]$. With the same 31
#    used buckets as T5 (so $k = 15$), which distances can each scheme tell apart?
#    Plot both bucket functions over $r = -150, \dots, 150$.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $B = 64$、$D = 256$ のとき、片側の最後のバケットは双方向と因果的な設定でそれぞれどこから始まるでしょうか。
#    境目 $\lceil D(E/D)^{1/(S-E)} \rceil$ を使って求め、`t5_relative_position_bucket` で確かめてください。
# 2. 双方向の T5 エンコーダが 512 トークンを読みます。位置 256 のクエリに対して、1 つのヘッドはキーに何通りのバイアスの値を与えられるでしょうか。
#    位置 0 のクエリではどうでしょうか。`T5RelativeBias(1)(512, 512)` で数えてください。
# 3. Shaw ら（2018）は相対位置を $[-k, k]$ にクリップします。
#    T5 が実際に使う 31 個と同じ数のバケット（つまり $k = 15$）で、それぞれの方式はどの距離を区別できるでしょうか。
#    $r = -150, \dots, 150$ の範囲で両方のバケット関数を描いてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** For $B = 64$ and $D = 256$: bidirectional, $S = 32$ and $E = 16$, so the edge is
# $256 \cdot 16^{-1/16} = 256 \cdot 2^{-1/4} \approx 215.3$ and the last bucket starts
# at 216; causal, $S = 64$ and $E = 32$, so it is $256 \cdot 8^{-1/32} \approx 239.9$
# and the last bucket starts at 240. `posenc` agrees, and so does the edge written
# in integers.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $B = 64$、$D = 256$ の双方向では $S = 32$、$E = 16$ なので、境目は $256 \cdot 16^{-1/16} = 256 \cdot 2^{-1/4} \approx 215.3$ で、最後のバケットは 216 から始まります。
# 因果的な設定では $S = 64$、$E = 32$ なので $256 \cdot 8^{-1/32} \approx 239.9$ で、最後のバケットは 240 から始まります。
# `posenc` の結果も、整数で書いた境目も、これと一致します。

# %% tags=["solution"]
n = torch.arange(0, 1001)
for bidirectional, side, expected in ((True, 32, 216), (False, 64, 240)):
    E, D = side // 2, 256
    b_hat = t5_relative_position_bucket(
        -n, bidirectional=bidirectional, num_buckets=64, max_distance=D
    )
    first_last = int(n[b_hat == side - 1].min())
    edge = D * (E / D) ** (1 / (side - E))  # e_(S-E-1)
    assert first_last == math.ceil(edge) == expected
    assert first_last == first_at_least(side - E - 1, E, side, D)  # in integers
    print(f"S = {side}: edge {edge:.2f}, last bucket from {first_last}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The query at position 256 sees relative positions
# $r = j - 256$ from $-256$ to $255$. Before it, the distances $1$ to $256$ reach
# every bucket from $1$ to $15$ (the last one starts at 91); $r = 0$ is bucket $0$;
# after it, the distances $1$ to $255$ reach buckets $17$ to $31$. That is
# $15 + 1 + 15 = 31$ buckets, so at most 31 different values, and exactly 31 when the
# head's 31 table entries differ, as they do after a random initialisation. The query
# at position 0 sees only $r = 0$ to $511$: bucket $0$ and buckets $17$ to $31$, so 16
# values.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 位置 256 のクエリが見る相対位置は $r = j - 256$ で、$-256$ から $255$ までです。
# クエリより前では、距離 $1$ 以上 $256$ 以下は、バケット $1$ から $15$ のすべてに届きます（最後のバケットは 91 から始まります）。
# $r = 0$ はバケット $0$ です。クエリより後ろでは、距離 $1$ から $255$ は、バケット $17$ から $31$ のすべてに届きます。
# 合わせて $15 + 1 + 15 = 31$ 個のバケットなので、値は多くても 31 通りです。
# ランダムに初期化した直後のように、そのヘッドの表の 31 個の値がすべて異なれば、ちょうど 31 通りになります。
# 位置 0 のクエリが見るのは $r = 0$ から $511$ だけで、バケット $0$ とバケット $17$ から $31$ なので、16 通りです。

# %% tags=["solution"]
encoder_bias = T5RelativeBias(1)
with torch.no_grad():
    rows = encoder_bias(512, 512)[0]  # [512, 512] for one head
entries = encoder_bias.relative_attention_bias.weight[:, 0]
assert entries.unique().numel() == 32  # all table entries differ
count_256, count_0 = rows[256].unique().numel(), rows[0].unique().numel()
assert (count_256, count_0) == (31, 16)
print(f"query 256: {count_256} values, query 0: {count_0} values", end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** Shaw et al.'s index is $\mathrm{clip}(r, -15, 15)$: 31 values, one per
# relative position from $-15$ to $15$, and every key further than 15 positions away on
# one side shares the value of $\pm 15$. T5 tells apart only the distances below
# $E = 8$ one by one, but its logarithmic buckets keep separating distances up to 90:
# T5 distinguishes a key 20 positions back from one 40 back, and one 50 back from one
# 80 back, which Shaw et al.'s clip cannot; Shaw et al. distinguish 9 from 10 and 12
# from 15, which T5 cannot (buckets 8 and 9 hold 8 to 11 and 12 to 15). Both use 31
# values over $-150$ to $150$. The figure shows the two index functions.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** Shaw らのインデックスは $\mathrm{clip}(r, -15, 15)$ です。
# 値は $-15$ から $15$ までの相対位置ごとに 1 つずつ、合わせて 31 通りで、片側で距離 15 より遠いキーはすべて $\pm 15$ と同じ値を共有します。
# T5 が 1 つずつ区別できるのは $E = 8$ 未満の距離だけですが、対数バケットのおかげで、距離 90 までは粗いながらも区別できます。
# T5 は 20 個前のキーと 40 個前のキー、50 個前と 80 個前のキーを区別できますが、Shaw らのクリップではできません。
# 一方、Shaw らは 9 と 10、12 と 15 を区別できますが、T5 はできません（バケット 8 と 9 はそれぞれ 8 から 11 と 12 から 15 を受け持ちます）。
# $-150$ から $150$ の範囲では、どちらも 31 通りの値を使います。図に 2 つのインデックス関数を示します。

# %% tags=["solution"] alt={"en": ["Two step functions of the relative position r from −150 to 150: Shaw et al.'s clip(r, −15, 15), a ramp that is flat beyond ±15, and T5's bucket, steps of one up to ±7 that widen and become flat from ±91 on."], "ja": ["相対位置 r（−150〜150）の 2 つの階段関数。Shaw らの clip(r, −15, 15) は幅 1 の段が斜めに並び、±15 の外側で平らになります。T5 のバケットは ±7 までは幅 1 の段、その先は広がり、±91 から先で平らになります。"]}
r150 = torch.arange(-150, 151)
shaw = r150.clamp(-15, 15)
t5 = t5_relative_position_bucket(r150)


def separates(index, a, b):  # do the keys at r = a and r = b differ?
    return index[a + 150] != index[b + 150]


assert shaw.unique().numel() == t5.unique().numel() == 31
assert separates(t5, -20, -40) and not separates(shaw, -20, -40)
assert separates(t5, -50, -80) and not separates(shaw, -50, -80)
assert separates(shaw, -9, -10) and not separates(t5, -9, -10)
assert separates(shaw, -12, -15) and not separates(t5, -12, -15)
assert not separates(t5, -91, -150) and separates(t5, -90, -91)

fig, (ax_s, ax_t) = plt.subplots(1, 2, figsize=(6.4, 3.0))
ax_s.step(r150, shaw, where="mid", lw=1.2)
ax_s.set(xlabel="$r$", title=r"$\mathrm{clip}(r, -15, 15)$")
ax_s.set_xticks([-150, -15, 0, 15, 150])
ax_t.step(r150, t5, where="mid", lw=1.2, color="C1")
ax_t.set(xlabel="$r$", title="$b(r)$", xticks=[-150, -91, 0, 91, 150])
plt.show()

# %% [markdown] lang="en"
# ## Sources and versions
#
# The bucket function is transcribed from `_relative_position_bucket` in Mesh
# TensorFlow's `transformer_layers.py`; the reciprocal form of its divisions is
# `ScalarMultiplyOperation` in `mesh_tensorflow/ops.py`. Hugging Face's `T5Attention`,
# `compute_bias` and `_init_weights` were read in transformers 4.46, 4.57.6 and
# 5.24.0 (the quoted initialisation comment is 4.57.6's), and flaxformer's
# `RelativePositionBiases` on its main branch. No printed number depends on the
# CPU's float32 `log`; where transformers is installed (5.24 here), the deep dive on
# float32 also runs Hugging Face's own `_relative_position_bucket`. The quotes on
# the offset of 128 are from §2.1 of Raffel et al.; the cost of T5's bias, and its
# extrapolation, from §2.2, §4.1 and Figure 1 of Press et al.
#
# ### References
#
# - Raffel, C. et al. (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer*. JMLR 21, §2.1. <https://arxiv.org/abs/1910.10683>
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - Mesh TensorFlow, `transformer_layers.py`.
#   <https://github.com/tensorflow/mesh/blob/master/mesh_tensorflow/transformer/transformer_layers.py>
# - Hugging Face transformers, `modeling_t5.py` and `modeling_umt5.py`.
#   <https://github.com/huggingface/transformers/tree/main/src/transformers/models>
# - flaxformer, `relative_position_biases.py`.
#   <https://github.com/google/flaxformer/blob/main/flaxformer/components/relative_position_biases.py>
# - NumPy Enhancement Proposal 50, *Promotion rules for Python scalars* (adopted in
#   NumPy 2.0). <https://numpy.org/neps/nep-0050-scalar-promotion.html>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# バケット関数は、Mesh TensorFlow の `transformer_layers.py` の `_relative_position_bucket` から書き写しました。
# 割り算を逆数の積にする処理は、`mesh_tensorflow/ops.py` の `ScalarMultiplyOperation` です。
# Hugging Face の `T5Attention`、`compute_bias`、`_init_weights` は、transformers 4.46、4.57.6、5.24.0 で読みました（引用した初期化のコメントは 4.57.6 のものです）。
# flaxformer の `RelativePositionBiases` は main ブランチで読みました。
# 表示している数値はどれも、CPU の float32 の `log` の結果に左右されません。transformers がある環境（ここでは 5.24）では、float32 についての「さらに詳しく」で Hugging Face の `_relative_position_bucket` そのものも実行します。
# 相対位置 128 についての引用は Raffel らの §2.1、T5 のバイアスのコストと外挿は Press らの §2.2、§4.1、図 1 によります。
#
# ### 参考文献
#
# - Raffel, C. et al. (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer*. JMLR 21, §2.1. <https://arxiv.org/abs/1910.10683>
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - Mesh TensorFlow：`transformer_layers.py`。
#   <https://github.com/tensorflow/mesh/blob/master/mesh_tensorflow/transformer/transformer_layers.py>
# - Hugging Face transformers：`modeling_t5.py` と `modeling_umt5.py`。
#   <https://github.com/huggingface/transformers/tree/main/src/transformers/models>
# - flaxformer：`relative_position_biases.py`。
#   <https://github.com/google/flaxformer/blob/main/flaxformer/components/relative_position_biases.py>
# - NumPy Enhancement Proposal 50：*Promotion rules for Python scalars*。
#   <https://numpy.org/neps/nep-0050-scalar-promotion.html>
#   （NumPy 2.0 で採用）
