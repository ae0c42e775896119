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
# # Relative position representations
#
# Shaw, Uszkoreit and Vaswani (2018) put position inside attention: the pair of a
# query at $i$ and a key at $j$ gets a learned vector for the offset $j - i$,
# clipped to at most $k$ either way, added to the key and to the value.
# Built for every pair, these vectors cost $n^2 d_z$ numbers per table; grouped by
# offset, they cost one score per query and offset, and for a causal model a
# pad and a reshape line the scores up with the keys.
# From distance $k$ on, one layer sees the keys on each side as an unordered bag.

# %% [markdown] lang="ja"
# # 相対位置表現（Shaw ら）
#
# Shaw、Uszkoreit、Vaswani（2018）は、位置をアテンションの内側に入れました。
# 位置 $i$ のクエリと位置 $j$ のキーの組ごとに、相対位置 $j - i$（前後とも $k$ でクリップ）で決まる学習可能なベクトルを、キーとバリューに足します。
# このベクトルを位置の組ごとに作ると、表 1 つあたり $n^2 d_z$ 個の数が必要です。相対位置ごとにまとめれば、必要なのはクエリと相対位置の組ごとに 1 つのスコアだけです。
# 因果的なモデルなら、パディングと形状変換でそのスコアをキーの位置にそろえられます。
# 1 つの層だけでは、クエリから $k$ 以上離れたキーは、左右それぞれ順序のない集まりにしか見えません。

# %% tags=["setup"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
from torch.nn.attention.flex_attention import flex_attention
from torch.testing import assert_close

from posenc import RelativePositionEmbedding, attention
from posenc.transformer_xl import relative_shift
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## Clipped relative positions
#
# An absolute encoding adds a vector to each token before the first layer, and
# whatever attention learns about order it must recover from those sums. Shaw et
# al. read the input of self-attention as a complete directed graph instead: one
# node per token, and an edge from each position $i$ to each position $j$. The edge
# carries two learned vectors of the head size $d_z$, $a^K_{ij}$ for the key and
# $a^V_{ij}$ for the value. They are relative: they depend on $i$ and $j$ only
# through the offset $j - i$, and only up to a distance $k$,
# $$a^K_{ij} = w^K_{\mathrm{clip}(j-i,\,k)}, \qquad a^V_{ij} = w^V_{\mathrm{clip}(j-i,\,k)}, \qquad \mathrm{clip}(x, k) = \max(-k, \min(k, x))$$
# so each table holds $2k+1$ vectors, $w^K_{-k}, \dots, w^K_{k}$, whatever the
# length of the sequence. The paper gives two reasons to clip: precise offsets are
# probably of little use far away, and every offset of a sequence longer than any
# seen in training still has a vector (a motivation; longer sequences are not
# tested). In its translation experiments, which report no variance, every $k$ from
# 2 up to 256, the largest in its Table 2, did about equally well, and the key
# vectors alone about as well as both.
#
# Offsets are key minus query, as on the [notation page](../docs/notation.md#positions):
# negative for a key before its query. The next chapter,
# [*Transformer-XL relative attention*](05-transformer-xl.ipynb), writes the
# distance $i - j$ instead, the same number with the opposite sign. $n$ is the
# number of tokens. `posenc.RelativePositionEmbedding(k, d_z)` holds one table (row
# $r$ of its `embedding.weight` is $w_{r-k}$); called with the numbers of queries
# and keys, it returns every $a_{ij}$.

# %% [markdown] lang="ja"
# ## クリップした相対位置
#
# 絶対位置のエンコーディングは、最初の層の前で各トークンにベクトルを足します。アテンションは、順序についての情報をすべてその和から取り出すしかありません。
# Shaw らは代わりに、セルフアテンションの入力を完全有向グラフとして捉えます。
# トークンごとに 1 つのノードがあり、各位置 $i$ から各位置 $j$ へ辺が張られています。
# 辺は、ヘッドの次元数 $d_z$ の学習可能なベクトルを 2 つ持ちます。キー用の $a^K_{ij}$ とバリュー用の $a^V_{ij}$ です。
# どちらも $i$ と $j$ の組ではなく、相対位置 $j - i$ だけで決まり、しかも距離 $k$ までしか区別しません。
# $$a^K_{ij} = w^K_{\mathrm{clip}(j-i,\,k)}, \qquad a^V_{ij} = w^V_{\mathrm{clip}(j-i,\,k)}, \qquad \mathrm{clip}(x, k) = \max(-k, \min(k, x))$$
# したがって、系列の長さによらず、各表は $2k+1$ 個のベクトル $w^K_{-k}, \dots, w^K_{k}$ を持つだけです。
# 論文はクリップする理由を 2 つ挙げています。遠く離れると正確な相対位置はおそらくあまり役に立たないこと、
# そして学習で見たどの系列より長い系列でも、すべての相対位置にベクトルがあることです。後者は動機として挙げているだけで、長い系列では実験していません。
# 翻訳の実験（ばらつきは報告されていません）では、$k$ を 2 から 256（表 2 の最大値）まで変えても性能はほとんど変わりませんでした。キーのベクトルだけでも、両方を使う場合とほぼ同じ性能です。
#
# 相対位置は、[記法のページ](../docs/notation.ja.md#positions)と同じく、キーの位置からクエリの位置を引いたものです。キーがクエリより前にあれば負になります。
# 次の[「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb)の章では、代わりに距離 $i - j$ を使います。大きさは同じで、正負が逆です。
# $n$ はトークンの数です。
# `posenc.RelativePositionEmbedding(k, d_z)` は、この表を 1 つ持つモジュールです（`embedding.weight` の行 $r$ が $w_{r-k}$ です）。
# クエリとキーの数を渡して呼ぶと、すべての $a_{ij}$ を返します。

# %%
n, k_clip, d_z = 8, 3, 4
rel = RelativePositionEmbedding(k_clip, d_z)  # 2k+1 rows of d_z numbers
with torch.no_grad():
    a = rel(n, n)  # a[i, j] = a_ij, for every query i and key j
print(f"table {tuple(rel.embedding.weight.shape)}, a {tuple(a.shape)}", end="")


# %% tags=["check"] summary={"en": "every a_ij is the table's row clip(j − i, k) + k; q new queries get the last q rows", "ja": "どの a_ij も表の行 clip(j − i, k) + k です。新しい q 個のクエリには rel(n, n) の最後の q 行が対応します"}
def clip(x, k):
    return max(-k, min(k, x))


w = rel.embedding.weight.detach()  # row r is w_{r-k}
assert w.shape == (2 * k_clip + 1, d_z)
for i in range(n):
    for j in range(n):  # a_ij = w_clip(j-i, k)
        assert torch.equal(a[i, j], w[clip(j - i, k_clip) + k_clip])
with torch.no_grad():  # q new queries at the end of n keys (a KV cache)
    for q_len in range(n + 1):
        assert torch.equal(rel(q_len, n), a[n - q_len :])

# %% [markdown] lang="en"
# The heatmap draws the clipped offsets for $n = 24$ and $k = 4$, query $i$ down and
# key $j$ across: from the diagonals $j - i = \pm k$ outwards the two triangles are
# flat.

# %% [markdown] lang="ja"
# 下のヒートマップは、$n = 24$、$k = 4$ でクリップした相対位置を描いたものです（縦がクエリ $i$、横がキー $j$）。
# 対角線 $j - i = \pm k$ から外側の 2 つの三角形は値が一定になります。

# %% tags=["figure"] alt={"en": ["Heatmap of the clipped offset clip(j − i, k) for n = 24 and k = 4, query i down and key j across, 0 to 23. The values change only on the 7 central diagonals, from −3 to 3; from the diagonals ±4 outwards the two triangles are flat, −4 (blue) below and 4 (red) above."], "ja": ["n = 24、k = 4 でクリップした相対位置 clip(j − i, k) のヒートマップ（縦軸はクエリ i、横軸はキー j、0〜23）。値が変わるのは中央の 7 本の対角線だけで、−3 から 3 まで並びます。対角線 ±4 から外側の 2 つの三角形は値が一定で、下が −4（青）、上が 4（赤）です。"]}
big_n, big_k = 24, 4
grid = torch.arange(big_n)
clipped = (grid[None, :] - grid[:, None]).clamp(-big_k, big_k)
fig, ax = plt.subplots(figsize=(4.8, 3.6))
im = ax.imshow(
    clipped, cmap="RdBu_r", vmin=-big_k, vmax=big_k, interpolation="nearest"
)
ax.set(xlabel="$j$", ylabel="$i$", title=f"$k = {big_k}$")
ax.grid(False)
ticks = range(-big_k, big_k + 1)
fig.colorbar(im, ax=ax, label=r"$\mathrm{clip}(j-i,\,k)$", ticks=ticks)
plt.show()

# %% [markdown] lang="en"
# ## Relation-aware self-attention
#
# Ordinary self-attention over the inputs $x_1, \dots, x_n$ computes, for one head,
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top}{\sqrt{d_z}}, \qquad \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{l} \exp e_{il}}, \qquad z_i = \sum_{j} \alpha_{ij}\, x_j W^V$$
# Shaw et al. add the edge vectors in two places: query $i$ compares itself with the
# key $x_j W^K + a^K_{ij}$ and collects the value $x_j W^V + a^V_{ij}$,
# $$e_{ij} = \frac{x_i W^Q \,(x_j W^K + a^K_{ij})^\top}{\sqrt{d_z}}$$
# $$z_i = \sum_{j} \alpha_{ij}\, (x_j W^V + a^V_{ij})$$
# with the softmax unchanged. The same key now looks different to each query, by an
# amount that depends only on where the query stands relative to it. The edges
# belong to self-attention, where queries and keys are positions of one sequence:
# tensor2tensor, the paper's code, adds them there only and leaves
# [cross-attention](../docs/glossary.md#cross-attention) as it was. The key vectors
# alone are an additive bias on the scores, $x_i W^Q (a^K_{ij})^\top / \sqrt{d_z}$;
# and since $\sum_j \alpha_{ij} = 1$, the value vectors add to the ordinary output a
# weighted average of the $2k+1$ vectors $w^V_r$. In the four-term score of
# [*Transformer-XL relative attention*](05-transformer-xl.ipynb#from-absolute-to-relative-four-terms),
# Shaw's score is terms $(a)$ and $(b)$, content against content and content against
# a learned offset vector, without $(c)$ and $(d)$ (Dai et al. 2019, §3.3). With whole tensors, the
# $(n, n, d_z)$ tensors $a^K$ and $a^V$ enter through `einsum`:

# %% [markdown] lang="ja"
# ## 関係を考慮したセルフアテンション（relation-aware）
#
# 入力 $x_1, \dots, x_n$ に対する通常のセルフアテンションは、1 つのヘッドで次を計算します。
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top}{\sqrt{d_z}}, \qquad \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{l} \exp e_{il}}, \qquad z_i = \sum_{j} \alpha_{ij}\, x_j W^V$$
# Shaw らは辺のベクトルを 2 か所に足します。クエリ $i$ が比べるキーは $x_j W^K + a^K_{ij}$ に、集めるバリューは $x_j W^V + a^V_{ij}$ になります。
# $$e_{ij} = \frac{x_i W^Q \,(x_j W^K + a^K_{ij})^\top}{\sqrt{d_z}}$$
# $$z_i = \sum_{j} \alpha_{ij}\, (x_j W^V + a^V_{ij})$$
# softmax は変わりません。
# 同じキーが、クエリごとに違って見えるようになります。その違いは、クエリがキーから見てどこにいるかだけで決まります。
# 辺を持つのは、クエリとキーがどちらも同じ系列の位置であるセルフアテンションだけです。論文のコードである tensor2tensor も辺をセルフアテンションにだけ加え、[クロスアテンション](../docs/glossary.ja.md#cross-attention)はそのままにしています。
# キーのベクトルの寄与だけを取り出せば、スコアに足すバイアス $x_i W^Q (a^K_{ij})^\top / \sqrt{d_z}$ です。
# また $\sum_j \alpha_{ij} = 1$ なので、バリューのベクトルは通常の出力に、$2k+1$ 個のベクトル $w^V_r$ の重み付き平均を足すことになります。
# [「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb#絶対位置から相対位置へ4-つの項)の章ではスコアを 4 つの項に分けます。
# Shaw らのスコアは、このうち項 $(a)$（内容どうしの比較）と項 $(b)$（内容と学習可能な相対位置ベクトルの比較）だけからなり、$(c)$ と $(d)$ を持ちません（Dai ら 2019、§3.3）。
# テンソル全体で計算するときは、$(n, n, d_z)$ のテンソル $a^K$ と $a^V$ を `einsum` に渡します。


# %%
def shaw_materialised(q, key, v, a_k, a_v):
    """q, key, v [..., n, d_z]; a_k, a_v [n, n, d_z]: one vector per pair."""
    e = q @ key.transpose(-2, -1) + torch.einsum("...id,ijd->...ij", q, a_k)
    alpha = torch.softmax(e / math.sqrt(q.shape[-1]), dim=-1)  # [..., n, n]
    return alpha @ v + torch.einsum("...ij,ijd->...id", alpha, a_v)


# %% tags=["check"] summary={"en": "the tensor form is the two equations computed entry by entry; with zero tables it is ordinary attention, with a^V = 0 attention with the bias", "ja": "テンソルでの計算は 2 つの式を成分ごとに計算したものと一致し、表が 0 なら通常のアテンション、a^V = 0 ならバイアス付きのアテンションになります"}
n, d_z, k_clip = 7, 8, 2
x = torch.randn(n, d_z)
w_q, w_k, w_v = (torch.randn(d_z, d_z) / math.sqrt(d_z) for _ in range(3))
rel_k = RelativePositionEmbedding(k_clip, d_z)
rel_v = RelativePositionEmbedding(k_clip, d_z)
with torch.no_grad():  # larger than the N(0, 0.02^2) start: the terms matter
    rel_k.embedding.weight.normal_()
    rel_v.embedding.weight.normal_()
    a_k, a_v = rel_k(n, n), rel_v(n, n)  # [n, n, d_z] each


def shaw_loops(x, a_k, a_v):
    """Equations (4) and (3) of the paper, entry by entry."""
    q, key, v = x @ w_q, x @ w_k, x @ w_v
    z = torch.zeros(n, d_z)
    for i in range(n):
        e = torch.stack([q[i] @ (key[j] + a_k[i, j]) for j in range(n)])
        alpha = torch.softmax(e / math.sqrt(d_z), dim=0)
        z[i] = sum(alpha[j] * (v[j] + a_v[i, j]) for j in range(n))
    return z


q, key, v = x @ w_q, x @ w_k, x @ w_v
z = shaw_materialised(q, key, v, a_k, a_v)
assert_close(z, shaw_loops(x, a_k, a_v))

zero = torch.zeros(n, n, d_z)
assert_close(shaw_materialised(q, key, v, zero, zero), attention(q, key, v))
# x_i W^Q (a^K_ij)^T / sqrt(d_z) as an additive bias
bias = torch.einsum("id,ijd->ij", q, a_k) / math.sqrt(d_z)
with_bias = attention(q, key, v, bias=bias)
assert_close(shaw_materialised(q, key, v, a_k, zero), with_bias)

# %% [markdown] lang="en"
# ## What the direct computation costs
#
# The tensor $a^K$ holds a vector of size $d_z$ for every pair of positions: $n^2 d_z$
# numbers per table and layer, $d_z$ times as many as the scores. Shaw et al.
# propose sharing the tables across the heads and the sequences of a batch, which
# keeps it at $n^2 d_z$ instead of $h\, n^2 d_z$ for $h$ heads. Huang et al.
# (2018), building Music Transformer, counted the bill for one layer of $h = 8$
# heads of size $d_z = 64$ with one table per head, at $n = 2048$ positions, and
# compared it with one vector per distance; their 8.5 GB is 8.59 GB cut short. The
# bytes follow from the shapes alone: a tensor on PyTorch's `meta` device has a
# shape and a dtype but no storage.

# %% [markdown] lang="ja"
# ## 直接計算のコスト
#
# テンソル $a^K$ は、位置の組ごとに $d_z$ 次元のベクトルを 1 つ持ちます。表 1 つ、層 1 つあたり $n^2 d_z$ 個の数で、スコアの $d_z$ 倍です。
# Shaw らは、表をヘッド間でも、バッチ内の系列間でも共有することを提案しています。そうすれば、$h$ 個のヘッドがあっても $h\, n^2 d_z$ ではなく $n^2 d_z$ で済みます。
# Music Transformer を提案した Huang ら（2018）は、このメモリ量を見積もり、距離ごとにベクトルを 1 つ持つ場合と比べています。
# 見積もったのは、系列の長さ $n = 2048$ で、次元数 $d_z = 64$ のヘッドが $h = 8$ 個あり、ヘッドごとに表を持つ 1 層です。
# Huang らの 8.5 GB は 8.59 GB の端数を切り捨てた値です。
# バイト数は形状だけから決まります。PyTorch の `meta` デバイス上のテンソルは形状と dtype だけを持ち、データ用のメモリは確保しません。


# %%
def nbytes(*shape, dtype=torch.float32):
    """Bytes of a tensor of this shape, on the meta device: no memory."""
    return torch.empty(shape, dtype=dtype, device="meta").nbytes


n, h, d_z = 2048, 8, 64
pair = nbytes(n, n, d_z)  # a^K: one d_z-vector per pair (i, j)
per_distance = nbytes(n, d_z)  # one d_z-vector per distance
report = (
    f"per pair:     {pair / 1e9:.2f} GB per head, {h * pair / 1e9:.2f} GB"
    f" per layer\nper distance: {per_distance / 1e6:.2f} MB per head,"
    f" {h * per_distance / 1e6:.2f} MB per layer"
)
print(report, end="")

# %% tags=["check"] summary={"en": "one layer's vectors per pair are 2048 × 2048 × 64 float32 numbers per head, 8.59 GB for 8 heads, Huang et al.'s 8.5 GB cut short; one vector per distance gives 4.19 MB, their 4.2 MB; the pairs cost n = 2048 times more", "ja": "1 層の組ごとのベクトルはヘッドあたり 2048 × 2048 × 64 個の float32 で、8 ヘッドで 8.59 GB、Huang らの 8.5 GB はその切り捨てです。距離ごとのベクトルなら 4.19 MB で、Huang らの 4.2 MB はその四捨五入です。組ごとのほうが n = 2048 倍大きくなります"}
assert pair == 2048 * 2048 * 64 * 4 and per_distance == 2048 * 64 * 4
layer_gb, layer_mb = h * pair / 1e9, h * per_distance / 1e6
assert 8.5 <= layer_gb < 8.6  # Huang et al.: "8.5 GB" per layer
assert round(layer_mb, 1) == 4.2  # Huang et al.: "4.2 MB" per layer
assert pair // per_distance == n

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the paper's two-term form, as tensor2tensor computes it.** The
# paper's own remedy splits the score into its content term and its position term,
# $x_i W^Q (x_j W^K)^\top + x_i W^Q (a^K_{ij})^\top$, and computes the second with
# one batched product per query position, so that no product of size
# $b\,h\,n^2 d_z$ forms for $b$ sequences of $h$ heads, as a careless broadcast of
# the second term would make; it still holds $a^K$. The paper (§3.3) reshapes.
# For a fixed query position $i$, the queries of all $b\,h$ sequences and heads form
# a $b h \times d_z$ matrix, and the edge vectors $a^K_{i1}, \dots, a^K_{in}$ a
# $d_z \times n$ one shared by all of them: the second term is $n$ independent
# products of a $b h \times d_z$ and a $d_z \times n$ matrix, one batched product
# after moving the query position axis to the front. The values work the same way,
# with the weights $\alpha_{i1}, \dots, \alpha_{in}$ in place of the query. The
# paper puts the cost of the relative representations, computed this way, at 7%
# fewer training steps per second than the model without them. Its experiments did
# not all share the tables: the base model kept one per layer and head, and only the
# big model shared across heads. tensor2tensor's `_relative_attention_inner`
# does exactly this; below is a port of it.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：論文の 2 項の形と tensor2tensor の計算**
#
# 論文が示す対策は、スコアを内容の項と位置の項の和 $x_i W^Q (x_j W^K)^\top + x_i W^Q (a^K_{ij})^\top$ に分け、位置の項をクエリの位置ごとのバッチ行列積で計算することです。
# こうすれば、系列が $b$ 個、ヘッドが $h$ 個あっても、2 つ目の項を不用意にブロードキャストしたときのような $b\,h\,n^2 d_z$ の大きさの積は作られません。ただし $a^K$ は保持したままです。
# 論文（§3.3）は、これを形状変換で実現します。
# クエリの位置 $i$ を固定すると、$b\,h$ 個の系列とヘッドのクエリは $b h \times d_z$ 行列をなし、
# 辺のベクトル $a^K_{i1}, \dots, a^K_{in}$ はそれらすべてに共通の $d_z \times n$ 行列をなします。
# したがって 2 つ目の項は、$b h \times d_z$ 行列と $d_z \times n$ 行列の独立な積 $n$ 個で、クエリの位置の軸を先頭に移せば 1 回のバッチ行列積になります。
# バリューも同じで、クエリの代わりに重み $\alpha_{i1}, \dots, \alpha_{in}$ を使います。
# 論文によると、この方法で相対位置表現を加えた代償は、1 秒あたりの学習ステップ数の 7% の低下でした。
# なお、論文の実験がすべて表を共有していたわけではありません。base モデルは層ごと、ヘッドごとに表を持ち、ヘッド間で共有したのは big モデルだけです。
# tensor2tensor の `_relative_attention_inner` がまさにこれを行います。下はその移植です。


# %% tags=["deeper", "check"] summary={"en": "the two-term form, tensor2tensor's batched products, equals the direct computation for 2 sequences of 3 heads", "ja": "2 項の形（tensor2tensor のバッチ行列積）は、2 系列・3 ヘッドで直接計算の結果と一致します"}
def relative_inner(x, y, z, transpose):
    """tensor2tensor's _relative_attention_inner.

    x [b, h, n, n or d], y [b, h, n, d], z [n, n, d].
    """
    b, h, n = x.shape[:3]
    y = y.transpose(-2, -1) if transpose else y
    z = z.transpose(-2, -1) if transpose else z
    xy = x @ y  # first term: [b, h, n, n or d]
    x_t = x.permute(2, 0, 1, 3).reshape(n, b * h, -1)  # position axis first
    x_tz = x_t @ z  # n products (bh x d)(d x n): [n, b*h, n or d]
    return xy + x_tz.reshape(n, b, h, -1).permute(1, 2, 0, 3)  # [b, h, n, *]


def shaw_two_terms(q, key, v, a_k, a_v):
    logits = relative_inner(q, key, a_k, transpose=True)
    alpha = torch.softmax(logits / math.sqrt(q.shape[-1]), dim=-1)
    return relative_inner(alpha, v, a_v, transpose=False)


b, h, n, d_z = 2, 3, 7, 8
qb, kb, vb = (torch.randn(b, h, n, d_z) for _ in range(3))
with torch.no_grad():
    a_k, a_v = rel_k(n, n), rel_v(n, n)  # shared by the batch and the heads
two_terms = shaw_two_terms(qb, kb, vb, a_k, a_v)
assert_close(two_terms, shaw_materialised(qb, kb, vb, a_k, a_v))

# %% [markdown] lang="en"
# ## Never build the pairs: one score per offset
#
# Among the $n^2$ vectors $a^K_{ij}$ at most $2k+1$ differ (exactly $2k+1$ once
# $n > k$). Write the clipped offset as a
# column index, $c_{ij} = \mathrm{clip}(j-i,\,k) + k$, with values $0, \dots, 2k$.
# Then $a^K_{ij} = w^K_{c_{ij}-k}$, and the key term only looks up a number that can
# be computed once per query and clipped offset:
# $$x_i W^Q (a^K_{ij})^\top = P_{i,\,c_{ij}}, \qquad P_{ir} = x_i W^Q\, (w^K_{r-k})^\top$$
# $P$ is the product of the $n \times d_z$ queries with the transposed
# $(2k+1) \times d_z$ table, and a gather along its last axis picks, for each pair,
# the entry in column $c_{ij}$. For the values, group the keys by their index: keys with the same
# $c_{ij}$ bring the same vector, so
# $$\sum_{j} \alpha_{ij}\, a^V_{ij} = \sum_{r=0}^{2k} \beta_{ir}\, w^V_{r-k}, \qquad \beta_{ir} = \sum_{j:\, c_{ij} = r} \alpha_{ij}$$
# $\beta_{ir}$ is the attention that query $i$ pays to the keys with $c_{ij} = r$, and
# `scatter_add` builds it from $\alpha$. This is the *offset form*. Its extra memory
# is $P$ and $\beta$,
# $n(2k+1)$ numbers per head each, and the index $c_{ij}$, $n^2$ integers shared by
# all heads (it could also be computed on the fly): nothing has a factor $n^2 d_z$
# any more.

# %% [markdown] lang="ja"
# ## 組を作らない：相対位置ごとに 1 つのスコア
#
# $n^2$ 個のベクトル $a^K_{ij}$ のうち、異なるものは多くても $2k+1$ 個です（$n > k$ ならちょうど $2k+1$ 個）。
# クリップした相対位置を、列のインデックス $c_{ij} = \mathrm{clip}(j-i,\,k) + k$ として書きます。値は $0, \dots, 2k$ です。
# すると $a^K_{ij} = w^K_{c_{ij}-k}$ です。キーの項に要る数は、クエリとクリップした相対位置の組ごとに 1 回計算しておけば、あとは表から読み出すだけです。
# $$x_i W^Q (a^K_{ij})^\top = P_{i,\,c_{ij}}, \qquad P_{ir} = x_i W^Q\, (w^K_{r-k})^\top$$
# $P$ は $n \times d_z$ のクエリと $(2k+1) \times d_z$ の表の転置との積です。組ごとに、最後の軸に沿った gather で列 $c_{ij}$ の成分を取り出します。
# バリューの項では、キーをインデックスごとにまとめます。$c_{ij}$ が同じキーはどれも同じベクトルを足すので、次のようになります。
# $$\sum_{j} \alpha_{ij}\, a^V_{ij} = \sum_{r=0}^{2k} \beta_{ir}\, w^V_{r-k}, \qquad \beta_{ir} = \sum_{j:\, c_{ij} = r} \alpha_{ij}$$
# $\beta_{ir}$ は、クエリ $i$ が $c_{ij} = r$ となるキーに向けるアテンションの重みの合計で、`scatter_add` で $\alpha$ から作れます。
# これを**相対位置ごとの形**と呼びます。追加で要るメモリは、ヘッドごとに $n(2k+1)$ 個ずつの $P$ と $\beta$、そしてすべてのヘッドで共有する $n^2$ 個の整数のインデックス $c_{ij}$ です。
# インデックスは保持せず、その場で計算してもかまいません。$n^2 d_z$ に比例するものは、もうありません。


# %%
def clipped_index(n, k):  # c_ij = clip(j - i, k) + k: [n, n]
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return offset.clamp(-k, k) + k


def shaw_by_offset(q, key, v, table_k, table_v, k):
    """Tables [2k+1, d_z]; q, key, v [..., n, d_z]. No a^K, no a^V."""
    n = q.shape[-2]
    p = q @ table_k.T  # P: [..., n, 2k+1], a score per query and offset
    c = clipped_index(n, k).expand(*p.shape[:-2], n, n)
    logits = q @ key.transpose(-2, -1) + p.gather(-1, c)
    alpha = torch.softmax(logits / math.sqrt(q.shape[-1]), dim=-1)
    beta = torch.zeros_like(p).scatter_add_(-1, c, alpha)  # per bucket
    return alpha @ v + beta @ table_v, p, alpha, beta


# %% tags=["check"] summary={"en": "the offset form equals the direct computation for 2 sequences of 3 heads; each row of β sums to 1, so the value term β w^V is a weighted average of the w^V_r", "ja": "相対位置ごとの形は 2 系列・3 ヘッドで直接計算の結果と一致します。β の各行の和は 1 なので、バリューの項 β w^V は w^V_r の重み付き平均です"}
b, h, n, d_z = 2, 3, 7, 8  # 2 sequences of 3 heads; k = 2 as above
qb, kb, vb = (torch.randn(b, h, n, d_z) for _ in range(3))
with torch.no_grad():
    a_k, a_v = rel_k(n, n), rel_v(n, n)
table_k = rel_k.embedding.weight.detach()
table_v = rel_v.embedding.weight.detach()
out, p, alpha, beta = shaw_by_offset(qb, kb, vb, table_k, table_v, k_clip)
assert_close(out, shaw_materialised(qb, kb, vb, a_k, a_v))
assert (beta >= 0).all()
assert_close(beta.sum(-1), torch.ones(b, h, n))  # each row of beta sums to 1
value_term = torch.einsum("...ij,ijd->...id", alpha, a_v)
assert_close(beta @ table_v, value_term)  # sum_r beta_ir w^V_r

# %% [markdown] lang="en"
# For one layer of $h = 8$ heads of size $d_z = 64$ with $k = 16$ in float32, and one
# $a^K$ shared by the heads (Huang et al.'s 8.5 GB counts a table per head), the
# pairs grow like $n^2 d_z$. The offset form grows linearly at first, then
# quadratically through its int64 index alone: $8 n^2$ bytes against the pairs'
# $4\, n^2 d_z$, so $4 d_z / 8 = d_z/2 = 32$ times lower; from $n = 89$ on it is smaller than the $h\,n^2$ scores that attention
# computed step by step holds. A
# [fused attention kernel](../docs/glossary.md#fused-attention-kernel) such as
# FlashAttention never holds
# those scores. The key term still fits one: it is a lookup, $P_{i,\,c_{ij}}$, which
# FlexAttention's `score_mod` can read pair by pair from the small $P$ (through
# SDPA's `attn_mask` it would have to be a full $h\,n^2$ tensor). The value term
# does not fit a `score_mod` or SDPA: it needs $\beta$, sums of the weights $\alpha$
# that these kernels never write out. A custom kernel could accumulate the $2k + 1$
# entries of $\beta_i$ as it goes, rescaled like its output.

# %% [markdown] lang="ja"
# 次元数 $d_z = 64$ のヘッドが $h = 8$ 個、$k = 16$、float32 の 1 層で、$a^K$ はヘッド間で共有する 1 つだけを数えるとします（Huang らの 8.5 GB はヘッドごとに表を持つ場合です）。
# 組ごとのベクトルは $n^2 d_z$ に比例して増えます。
# 相対位置ごとの形は初め長さに比例して増え、やがて int64 のインデックスだけが長さの 2 乗で増えるようになります。
# それでもインデックスは $8 n^2$ バイト、組ごとのベクトルは $4\, n^2 d_z$ バイトなので、インデックスは組ごとのベクトルの $4 d_z / 8 = d_z/2 = 32$ 分の 1 で済みます。
# さらに $n = 89$ 以上では、スコア行列を実体化する通常のアテンションが保持する $h\,n^2$ 個のスコアよりも小さくなります。
# FlashAttention のような[融合アテンションカーネル](../docs/glossary.ja.md#fused-attention-kernel)は、このスコアを保持しません。
# とはいえ、キーの項は融合カーネルに組み込めます。$P_{i,\,c_{ij}}$ を読み出すだけなので、FlexAttention の `score_mod` で小さな $P$ から組ごとに読み出せるからです（SDPA の `attn_mask` で渡すなら、$h\,n^2$ 個の成分を持つテンソルが必要です）。
# `score_mod` や SDPA に組み込めないのはバリューの項です。バリューの項には $\beta$ が要りますが、これは重み $\alpha$ の和で、これらのカーネルはこの重みを書き出しません。
# 独自のカーネルを書けば、$\beta_i$ の $2k + 1$ 個の成分も、出力と同じようにスケールし直しながら、計算の途中で足し込めます。


# %% tags=["check"] summary={"en": "for h = 8, d_z = 64, k = 16 the offset form's P, β and index fall below the h n² scores from n = 89 on, 32 times below the pairs at n = 32768; the key term read from P by a FlexAttention score_mod gives the output of attention with the full bias", "ja": "h = 8、d_z = 64、k = 16 では、相対位置ごとの形の P、β、インデックスは n = 89 以上でスコア h n² 個より小さく、最大の長さ n = 32768 では組ごとのベクトルの 32 分の 1 です。FlexAttention の score_mod で P から読んだキーの項は、バイアス全体を渡したアテンションと同じ出力を与えます"}
h, d_z, k_clip = 8, 64, 16
lengths = [2**e for e in range(6, 16)]
direct = [nbytes(n, n, d_z) for n in lengths]  # a^K
index = [nbytes(n, n, dtype=torch.int64) for n in lengths]  # c_ij
by_offset = [
    2 * nbytes(h, n, 2 * k_clip + 1) + c
    for n, c in zip(lengths, index, strict=True)
]
crossover = next(  # the first n at which P, beta and the index beat the scores
    n
    for n in range(1, 1024)
    if 2 * nbytes(h, n, 2 * k_clip + 1) + nbytes(n, n, dtype=torch.int64)
    < nbytes(h, n, n)
)
assert crossover == 89
assert round(direct[-1] / by_offset[-1]) == d_z // 2

# the key term as a score_mod: a lookup in P, no [h, n, n] bias
warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
b, h, n, d_z, k_clip = 1, 2, 7, 8, 2
qb, kb, vb = (torch.randn(b, h, n, d_z) for _ in range(3))
table_k = torch.randn(2 * k_clip + 1, d_z)
p = qb @ table_k.T / math.sqrt(d_z)  # [b, h, n, 2k+1]


def key_term(score, b, h, q_idx, kv_idx):
    return (
        score + p[b, h, q_idx, (kv_idx - q_idx).clamp(-k_clip, k_clip) + k_clip]
    )


full_bias = p.gather(-1, clipped_index(n, k_clip).expand(b, h, n, n))
assert_close(
    flex_attention(qb, kb, vb, score_mod=key_term),
    attention(qb, kb, vb, bias=full_bias),
)

# %% [markdown] lang="en"
# ## From distance k on, distances are indistinguishable
#
# For query $i$, every key with $j - i \ge k$
# receives the same $w^K_{k}$ and $w^V_{k}$, and every key with $j - i \le -k$ the same
# $w^K_{-k}$ and $w^V_{-k}$. Within each of these two groups nothing in $e_{ij}$ or
# $z_i$ depends on where a key sits: the group is a bag of tokens. Take $n = 12$,
# $k = 2$ and the query at $i = 6$: shuffling the tokens of the bag $j \le 4$ and of
# the bag $j \ge 8$ leaves $z_6$ as it was, up to rounding, while swapping the two
# tokens at offsets $-1$ and $+1$, inside the band, moves it.

# %% [markdown] lang="ja"
# ## 距離 k 以上は区別できない
#
# クエリ $i$ から見て、$j - i \ge k$ のキーはどれも同じ $w^K_{k}$ と $w^V_{k}$ を受け取り、$j - i \le -k$ のキーはどれも同じ $w^K_{-k}$ と $w^V_{-k}$ を受け取ります。
# この 2 つのグループの中では、$e_{ij}$ と $z_i$ のどちらにも、キーがどの位置にあるかで変わる部分がありません。各グループは、順序を持たないトークンの集まり（bag）です。
# $n = 12$、$k = 2$ とし、位置 $i = 6$ のクエリを見ます。
# グループ $j \le 4$ とグループ $j \ge 8$ の中でトークンを並べ替えても、$z_6$ は丸め誤差を除いて変わりません。
# 一方、クリップされない中央の帯にある相対位置 $-1$ と $+1$ のトークンを入れ替えると、出力は変わります。

# %%
n, d_z, k_clip, i = 12, 8, 2, 6
x = torch.randn(n, d_z)
w_q, w_k, w_v = (torch.randn(d_z, d_z) / math.sqrt(d_z) for _ in range(3))
table_k = torch.randn(2 * k_clip + 1, d_z)
table_v = torch.randn(2 * k_clip + 1, d_z)


def output_of(x):  # z_i, the output of query i
    q, key, v = x @ w_q, x @ w_k, x @ w_v
    return shaw_by_offset(q, key, v, table_k, table_v, k_clip)[0][i]


shuffled = torch.arange(n)
shuffled[:5] = torch.randperm(5)  # the bag j <= 4
shuffled[8:] = 8 + torch.randperm(4)  # the bag j >= 8
swapped = torch.arange(n)
swapped[[5, 7]] = swapped[[7, 5]]  # offsets -1 and +1: in the band
bags = (output_of(x[shuffled]) - output_of(x)).abs().max()
band = (output_of(x[swapped]) - output_of(x)).abs().max()
still = "stays within 1e-6" if bags < 1e-6 else f"moves by {bags:.3f}"
print(f"order {shuffled.tolist()}: z_6 {still}")
print(f"swap j = 5 and 7: z_6 moves by {band:.3f}", end="")

# %% tags=["check"] summary={"en": "the shuffle moves tokens within both bags and leaves z_6 unchanged; the swap inside the band changes it", "ja": "両方のグループの中でトークンを並べ替えても z_6 は変わらず、帯の中で入れ替えると変わります"}
assert not torch.equal(shuffled[:5], torch.arange(5))
assert not torch.equal(shuffled[8:], torch.arange(8, 12))
assert_close(output_of(x[shuffled]), output_of(x))
assert band > 1e-2

# %% [markdown] lang="en"
# This holds per layer. The first layer's output $z_i$ mixes in the neighbours of
# position $i$, so a second layer can recover some order among far tokens from what
# their neighbourhoods looked like (exercise 1), as Shaw et al. note themselves. The
# edges of the sequence show through as well: query 0 has no keys at negative
# offsets, query 1 only one, and $\beta$ records it (exercise 4).

# %% [markdown] lang="ja"
# これが成り立つのは 1 つの層の中だけです。1 層目の出力 $z_i$ には位置 $i$ の近傍が混ざるので、
# 2 層目は、遠いトークンの近傍の様子から、それらの間の順序をある程度取り戻せます（演習 1）。Shaw ら自身もこの点を指摘しています。
# 系列の端も見えます。クエリ 0 には相対位置が負のキーがなく、クエリ 1 には 1 つしかありません。それが $\beta$ に現れます（演習 4）。

# %% [markdown] lang="en"
# ## Music Transformer's skewing
#
# For a causal model the index $c_{ij}$ can go too. Huang et al. (2018) keep one
# embedding per offset, the rows of an $n \times d_z$ matrix $E^r$: row $m$ belongs
# to the offset $m - (n - 1)$, from $-(n-1)$ to $0$ (a clipped table is $E^r$ with
# repeated rows). In $S = Q (E^r)^\top$, column $m$ of row $i$ scores query $i$
# against an offset, not a key; the key $j \le i$ needs column $m = j - i + n - 1$,
# so row $i$ must move left by $n - 1 - i$ places. Their *skewing* does it without
# an index: pad a column of zeros on the left, read the numbers as $(n+1) \times n$,
# drop the first row and read the rest as $n \times n$. Every entry on and below the
# diagonal then holds its pair's score; the entries above it do not, and the causal
# mask hides them. This is Transformer-XL's relative shift without a memory: the
# chapter [*Transformer-XL relative attention*](05-transformer-xl.ipynb#lining-up-the-distances-the-relative-shift)
# derives it and draws the grids before and after.

# %% [markdown] lang="ja"
# ## Music Transformer のスキューイング
#
# 因果的なモデルなら、インデックス $c_{ij}$ もなくせます。
# Huang ら（2018）は、相対位置ごとに 1 つの埋め込みを $n \times d_z$ 行列 $E^r$ の行として持ちます。
# 行 $m$ は相対位置 $m - (n - 1)$、つまり $-(n-1)$ から $0$ に対応します（クリップした表は、行が繰り返された $E^r$ にすぎません）。
# $S = Q (E^r)^\top$ の行 $i$ の列 $m$ は、クエリ $i$ をキーではなく相対位置と比べたスコアです。
# キー $j \le i$ には列 $m = j - i + n - 1$ が必要なので、行 $i$ を $n - 1 - i$ 列ぶん左へずらさなければなりません。
# Huang らの**スキューイング**は、これをインデックスを使わずに行います。
# 左に 0 の列を 1 つパディングし、同じ数の並びを $(n+1) \times n$ として読み、最初の行を捨てて残りを $n \times n$ として読みます。
# すると対角線上とその下の成分はどれもその組のスコアになります。対角線より上の成分には正しい組のスコアが入りませんが、因果マスクがそれを隠します。
# これはメモリのない場合の Transformer-XL の相対シフトです。
# [「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb#距離をそろえる相対シフト)の章で、これを導き、ずらす前と後の格子を図で示します。

# %%
n, d_z, k_clip = 10, 8, 3
q = torch.randn(n, d_z)
table_k = torch.randn(2 * k_clip + 1, d_z)
offsets = torch.arange(-(n - 1), 1)  # row m of E^r: offset m - (n - 1)
e_r = table_k[offsets.clamp(-k_clip, k_clip) + k_clip]  # [n, d_z]
s = q @ e_r.T  # [n, n]: column m is an offset, not a key
padded = torch.cat([torch.zeros(n, 1), s], dim=1)  # pad: [n, n + 1]
skewed = padded.reshape(n + 1, n)[1:].reshape(n, n)  # reshape, drop, reshape

# %% tags=["check"] summary={"en": "on and below the diagonal the skewed scores are the gather P_(i, c_ij) of the offset form; above it they are not; Transformer-XL's relative_shift gives the same matrix", "ja": "対角線上とその下では、スキューイングの結果が相対位置ごとの形の gather P_(i, c_ij) と一致し、対角線より上では一致しません。Transformer-XL の relative_shift も同じ行列を返します"}
gathered = (q @ table_k.T).gather(-1, clipped_index(n, k_clip))
causal = torch.ones(n, n, dtype=torch.bool).tril()
assert_close(skewed[causal], gathered[causal])  # j <= i: the right scores
assert not torch.allclose(skewed[~causal], gathered[~causal])
assert torch.equal(skewed, relative_shift(s))  # Transformer-XL's shift

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how the libraries differ.** tensor2tensor, the paper's
# reference implementation, follows the paper: offsets $j - i$ clipped to `max_relative_position`, one $(n, n, d_z)$ tensor per table
# shared by the heads, and the two-term product; it also has Music Transformer's
# skewing. Hugging Face's BERT-style `relative_key` keeps only the key term, clips
# nothing, and indexes its table by the offset the other way round, $i - j$: a
# table trained there reads reversed here. `posenc` follows the paper.
#
# tensor2tensor's `dot_product_attention_relative` gathers one $(n, n, d_z)$ tensor for the keys
# and one for the values; with unequal lengths the queries are the last ones, as
# in `posenc`. `dot_product_self_attention_relative_v2`
# (causal only) skews with `_relative_position_to_absolute_position_masked`. Its
# table (`get_relative_embeddings_left`) has `max_relative_position` rows for the
# distances looking back, and for a longer sequence it pads zero vectors in front
# instead of clipping, so that keys farther back get no relative term at all; the
# bidirectional `..._unmasked_..._v2` skews too (solution 3). `posenc`'s tables
# start from $N(0, 0.02^2)$, as Hugging Face's do.
#
# Hugging Face's `distance_embedding` has $2M - 1$ rows for `max_position_embeddings`
# $M$, indexed by $i - j + M - 1$ (`position_ids_l - position_ids_r`). With a
# cache every query gets the position $k_{\mathrm{len}} - 1$, right only for a
# decode step of one token. `"relative_key_query"` adds a third term, the key against
# the same edge vector, $x_j W^K (a_{ij})^\top$ (Huang et al. 2020). DeBERTa (He et
# al. 2021) goes further: its relative position vectors get their own query and key
# projections, giving a content-to-position and a position-to-content term.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ライブラリによる違い**
#
# 論文の参照実装である tensor2tensor は論文どおりです。相対位置 $j - i$ を `max_relative_position` でクリップし、
# 表ごとに、ヘッド間で共有する $(n, n, d_z)$ のテンソルを 1 つ作り、2 項の形で計算します。Music Transformer のスキューイングも実装しています。
# Hugging Face の BERT 系モデルの `relative_key` は、キーの項だけを持ち、クリップせず、逆向きの相対位置 $i - j$ をインデックスにして表を参照します。
# そのため、そこで学習済みの表を `posenc` で使うと、行が逆順に読まれます。
# `posenc` は論文に従います。
#
# tensor2tensor の `dot_product_attention_relative` は、キー用とバリュー用に $(n, n, d_z)$ のテンソルを 1 つずつ gather します。長さが異なるときは、`posenc` と同じく、クエリは末尾側のトークンです。
# `dot_product_self_attention_relative_v2`（因果的な場合のみ）は `_relative_position_to_absolute_position_masked` でスキューイングします。
# その表（`get_relative_embeddings_left`）は、クエリより前の距離について `max_relative_position` 行を持ちます。
# 系列がそれより長いとクリップはせず、表の先頭に 0 のベクトルをパディングします。そのため、それより遠いキーには相対位置の項がまったく付きません。
# 双方向の `..._unmasked_..._v2` もスキューイングします（解答 3）。
# `posenc` の表は、Hugging Face と同じく $N(0, 0.02^2)$ から初期化します。
#
# Hugging Face の `distance_embedding` は、`max_position_embeddings` を $M$ として $2M - 1$ 行あり、$i - j + M - 1$（`position_ids_l - position_ids_r`）をインデックスにして参照します。
# キャッシュがあると、どのクエリの位置も $k_{\mathrm{len}} - 1$ になります。これが正しいのは、[デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)だけです。
# `"relative_key_query"` は 3 つ目の項として、同じ辺のベクトルとキーとの内積 $x_j W^K (a_{ij})^\top$ を加えます（Huang ら 2020）。
# DeBERTa（He ら 2021）では、相対位置のベクトルにも専用のクエリとキーの射影を持たせ、内容から位置への項と、位置から内容への項を加えます。


# %% tags=["deeper", "check"] summary={"en": "a port of tensor2tensor's index gives posenc's rows; the rows Hugging Face's BertSelfAttention looked up for n = M = 6 are i − j + M − 1, posenc's table with its rows reversed", "ja": "tensor2tensor のインデックスを移植すると、posenc と同じ行を参照します。Hugging Face の BertSelfAttention が n = M = 6 で参照した行は i − j + M − 1 で、posenc の表の行を逆順にしたものです"}
def t2t_index(length_q, length_k, max_relative_position):
    """tensor2tensor's _generate_relative_positions_matrix (no cache)."""
    range_vec_k = torch.arange(length_k)
    range_vec_q = range_vec_k[-length_q:]
    distance_mat = range_vec_k[None, :] - range_vec_q[:, None]
    k = max_relative_position
    return distance_mat.clamp(-k, k) + k


n, d_z = 6, 4
max_pos = n  # Hugging Face's max_position_embeddings M; no clip for n <= M
rel = RelativePositionEmbedding(max_pos - 1, d_z)  # k = M - 1: 2M - 1 rows
with torch.no_grad():
    ours = rel(n, n)  # [n, n, d_z]
# the rows BertSelfAttention (relative_key, M = 6) looked up in
# distance_embedding for 6 tokens, captured with a hook in transformers 4.57.6
hf_rows = torch.tensor(
    [
        [5, 4, 3, 2, 1, 0],
        [6, 5, 4, 3, 2, 1],
        [7, 6, 5, 4, 3, 2],
        [8, 7, 6, 5, 4, 3],
        [9, 8, 7, 6, 5, 4],
        [10, 9, 8, 7, 6, 5],
    ]
)

for q_len in (1, 3, n):  # tensor2tensor's index is posenc's
    rows = rel.embedding.weight[t2t_index(q_len, n, max_pos - 1)]
    assert torch.equal(rows, rel(q_len, n))
i_pos, j_pos = torch.arange(n)[:, None], torch.arange(n)
assert torch.equal(hf_rows, i_pos - j_pos + max_pos - 1)  # i - j + M - 1
hf_table = rel.embedding.weight.detach().flip(0)  # rows reversed
assert torch.equal(hf_table[hf_rows], ours)  # HF's lookup of the reversed table
assert not torch.equal(rel.embedding.weight.detach()[hf_rows], ours)

# %% [markdown] lang="en"
# ## What to remember
#
# - Shaw et al. add learned vectors for the clipped offset $j - i$ to the keys and to
#   the values inside attention: $2k + 1$ vectors per table, whatever the length.
# - Built for every pair, the vectors cost $n^2 d_z$ numbers per table, $d_z$ times
#   the scores: 8.59 GB for one layer of 8 heads at $n = 2048$.
# - The offset form never builds the pairs: a score per query and clipped offset,
#   $P$, read through the index $c_{ij}$, and the attention per clipped offset,
#   $\beta$.
# - From distance $k$ on, one layer sees the keys on each side as an unordered bag;
#   a second layer, and the edges of the sequence, give some order back.
# - For a causal model, Music Transformer's skewing (a pad, a reshape and a slice)
#   lines the scores per offset up with the keys without an index; Transformer-XL
#   shifts the same way.

# %% [markdown] lang="ja"
# ## まとめ
#
# - Shaw らは、クリップした相対位置 $j - i$ ごとの学習可能なベクトルを、アテンションの内側でキーとバリューに足します。
#   表 1 つあたりのベクトルは、長さによらず $2k + 1$ 個です。
# - 組ごとにベクトルを作ると、表 1 つあたり $n^2 d_z$ 個の数が必要で、スコアの $d_z$ 倍です。
#   $n = 2048$、8 ヘッドの 1 層で 8.59 GB になります。
# - 相対位置ごとの形は組をまったく作りません。クエリとクリップした相対位置の組ごとのスコア $P$ をインデックス $c_{ij}$ で読み出し、クリップした相対位置ごとに合計したアテンションの重み $\beta$ を使います。
# - 1 つの層だけでは、クエリから $k$ 以上離れたキーは、左右それぞれ順序のない集まりにしか見えません。
#   2 層目や系列の端からは、順序の手がかりがある程度戻ってきます。
# - 因果的なモデルなら、Music Transformer のスキューイング（パディング、形状変換、切り出し）で、
#   相対位置ごとのスコアをインデックスなしでキーにそろえられます。Transformer-XL も同じ方法でずらします。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Build a two-layer model with $k = 1$ and random weights. Find two inputs that differ
#    only in the order of the tokens beyond distance $1$ from query $i$ and give the same
#    $z_i$ after the first layer but different outputs after the second. Explain where the
#    order information came from.
# 2. Hugging Face's `relative_key_query` adds $x_j W^K (a_{ij})^\top$. Write it in the
#    offset form: which product replaces $P$, and which index replaces $c_{ij}$?
#    Check against the $(n, n, d_z)$ computation.
# 3. Skewing needs the offsets $-(n-1), \dots, 0$ only. For a bidirectional encoder the
#    offsets run from $-(n-1)$ to $n-1$. Extend $E^r$ to $2n - 1$ rows and find the pad
#    and reshape that give every entry exactly. (The chapter
#    [*Transformer-XL relative attention*](05-transformer-xl.ipynb) does this for
#    Transformer-XL.)
# 4. Relative attention still sees the edges of the sequence. With $k = 2$, compute
#    $\beta$ for every query of a sequence of length 10 and constant $\alpha$ (uniform
#    attention). Which queries does $\beta$ alone tell apart?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $k = 1$、ランダムな重みで 2 層のモデルを作ってください。
#    クエリ $i$ から距離 $1$ より遠いトークンの順序だけが違う 2 つの入力で、1 層目の出力 $z_i$ は同じなのに
#    2 層目の出力が異なるものを見つけてください。順序の情報がどこから来たのかを説明してください。
# 2. Hugging Face の `relative_key_query` は $x_j W^K (a_{ij})^\top$ を加えます。
#    これを相対位置ごとの形で書いてください。どの積が $P$ の代わりになり、どのインデックスが $c_{ij}$ の代わりになるでしょうか。
#    $(n, n, d_z)$ のテンソルを使う計算と照合してください。
# 3. スキューイングに必要なのは、相対位置 $-(n-1), \dots, 0$ だけです。
#    双方向のエンコーダでは、相対位置は $-(n-1)$ から $n-1$ まであります。
#    $E^r$ を $2n - 1$ 行に広げ、すべての成分を正確に与えるパディングと形状変換を見つけてください。
#    [「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb)の章では、Transformer-XL についてこれを行います。
# 4. 相対アテンションにも、系列の端は見えます。$k = 2$ とし、長さ 10 の系列で $\alpha$ が一定
#    （一様なアテンション）のとき、すべてのクエリについて $\beta$ を計算してください。
#    $\beta$ だけでどのクエリを区別できるでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With $k = 1$ every key at offset $+1$ or more from query $i = 2$
# receives $w_{+1}$, so swapping the tokens at $j = 5$ and $j = 6$ (offsets $+3$ and
# $+4$) leaves the first layer's $z_2$ unchanged. The first layer's outputs at
# positions 5 and 6 do not simply trade places, though: each of them depends on
# which token sat at offset $0$ and which at $\pm 1$ around it, and the swap changes
# that. The second layer's query 2 still sees its far keys as a bag, but now a bag
# of different vectors, so its output moves (by up to 0.095 here; how much depends
# on the weights). The order came in through the
# neighbourhoods that the first layer wrote into each position.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $k = 1$ では、クエリ $i = 2$ から見て相対位置が $+1$ 以上のキーはどれも $w_{+1}$ を受け取ります。
# そのため、$j = 5$ と $j = 6$（相対位置 $+3$ と $+4$）のトークンを入れ替えても、1 層目の $z_2$ は変わりません。
# しかし、位置 5 と 6 での 1 層目の出力は、単に入れ替わるわけではありません。
# それぞれの出力は、自分の周りの相対位置 $0$ と $\pm 1$ にどのトークンがあったかに依存し、入れ替えによってそれが変わるからです。
# 2 層目のクエリ 2 から見ても、遠いキーは順序のない集まりのままです。ところが集まりに入っているベクトルが変わったので、出力は変わります
# （この例では最大 0.095 で、変わる大きさは重みによります）。
# 順序の情報は、1 層目が各位置に書き込んだ近傍の様子を経由して入ってきます。

# %% tags=["solution"]
n, d_z, k_clip, i = 8, 8, 1, 2
gen = torch.Generator().manual_seed(13)


def layer_weights():  # W^Q, W^K, W^V and the two tables of one layer
    w = [
        torch.randn(d_z, d_z, generator=gen) / math.sqrt(d_z) for _ in range(3)
    ]
    tables = [torch.randn(2 * k_clip + 1, d_z, generator=gen) for _ in range(2)]
    return w, tables


def shaw_layer(x, weights):
    (wq, wk, wv), (tk, tv) = weights
    z, *_ = shaw_by_offset(x @ wq, x @ wk, x @ wv, tk, tv, k_clip)
    return z


first, second = layer_weights(), layer_weights()
x = torch.randn(n, d_z, generator=gen)
swap = torch.arange(n)
swap[[5, 6]] = swap[[6, 5]]  # offsets +3 and +4 from query 2
z1, z1_swapped = shaw_layer(x, first), shaw_layer(x[swap], first)
assert_close(z1_swapped[i], z1[i])  # layer 1: query 2 cannot tell
assert not torch.allclose(z1_swapped[[6, 5]], z1[[5, 6]])  # not a swap
z2, z2_swapped = shaw_layer(z1, second), shaw_layer(z1_swapped, second)
moved = (z2_swapped[i] - z2[i]).abs().max()
assert moved > 1e-2
print(f"layer 2, query 2: max change {moved:.3f}", end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The third term pairs the key, not the query, with the edge vector:
# $x_j W^K (a_{ij})^\top = P'_{j,\,c_{ij}}$ with $P'_{jr} = x_j W^K\,(w_{r-k})^\top$.
# So $P' = K (w)^\top$, one row per key, replaces $P$, and the index is the same
# $c_{ij}$, but read in row $j$ instead of row $i$: a gather along the rows of
# $P'^\top$. (In Hugging Face's own convention the index is $i - j + M - 1$, the
# reversed row.) It equals the $(n, n, d_z)$ computation:

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 3 つ目の項では、辺のベクトルと組むのはクエリではなくキーです。
# $P'_{jr} = x_j W^K\,(w_{r-k})^\top$ とすると $x_j W^K (a_{ij})^\top = P'_{j,\,c_{ij}}$ です。
# したがってキーごとに 1 行を持つ $P' = K (w)^\top$ が $P$ の代わりになり、
# インデックスは同じ $c_{ij}$ ですが、行 $i$ ではなく行 $j$ から読みます。つまり $P'^\top$ の行に沿った gather です。
# Hugging Face 自身の規約では、インデックスは逆順の行 $i - j + M - 1$ になります。
# $(n, n, d_z)$ のテンソルを使う計算とも一致します。

# %% tags=["solution"]
n, d_z, k_clip = 7, 8, 2
gen = torch.Generator().manual_seed(12)
keys2 = torch.randn(n, d_z, generator=gen)  # rows x_j W^K
table = torch.randn(2 * k_clip + 1, d_z, generator=gen)  # row r: w_{r-k}
offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # [i, j] = j - i
c = offset.clamp(-k_clip, k_clip) + k_clip
a = table[c]  # [n, n, d_z]: a_ij
direct = torch.einsum("jd,ijd->ij", keys2, a)  # x_j W^K (a_ij)^T
p_key = keys2 @ table.T  # P': [n, 2k+1], one row per key
assert_close(p_key.T.gather(0, c), direct)  # [i, j] = P'[j, c_ij]

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With $E^r$ of $2n - 1$ rows (row $m$: offset $m - (n - 1)$),
# $S = Q (E^r)^\top$ is $n \times (2n - 1)$ and the pair $(i, j)$ needs column
# $m = j - i + n - 1$. Pad one column of zeros on the left, read the numbers as
# $2n \times n$, drop the first row, read the rest as $n \times (2n - 1)$ and keep
# the first $n$ columns. Entry $(i, j)$ is then padded column $n + j - i$ of row
# $i$, never past its end since $n + j - i \le 2n - 1$: column $m$ of $S$, for every
# pair. This is the bidirectional case of Transformer-XL's shift, derived in
# [*Transformer-XL relative attention*](05-transformer-xl.ipynb#in-posenc), and
# `relative_shift(S, k_len=n)` gives the same.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** $E^r$ を $2n - 1$ 行（行 $m$ は相対位置 $m - (n - 1)$）にすると、
# $S = Q (E^r)^\top$ は $n \times (2n - 1)$ で、組 $(i, j)$ には列 $m = j - i + n - 1$ が必要です。
# 左に 0 の列を 1 つパディングし、同じ数を $2n \times n$ として読み、最初の行を捨てます。
# 残りを $n \times (2n - 1)$ として読み、最初の $n$ 列を残します。
# すると成分 $(i, j)$ は行 $i$ のパディング後の列 $n + j - i$ で、$n + j - i \le 2n - 1$ なので行の終わりを越えません。
# これはどの組でも $S$ の列 $m$ です。
# この方法は、[「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb#posenc-では)の章で導くシフトの双方向の場合にあたり、`relative_shift(S, k_len=n)` も同じ結果を返します。

# %% tags=["solution"]
n, d_z = 6, 4
gen = torch.Generator().manual_seed(13)
q3 = torch.randn(n, d_z, generator=gen)
e_r = torch.randn(2 * n - 1, d_z, generator=gen)  # row m: offset m - (n - 1)
s3 = q3 @ e_r.T  # [n, 2n - 1]
padded = torch.cat([torch.zeros(n, 1), s3], dim=1)  # [n, 2n]
skewed = padded.reshape(2 * n, n)[1:].reshape(n, 2 * n - 1)[:, :n]
m_col = torch.arange(n)[None, :] - torch.arange(n)[:, None] + n - 1
want = s3.gather(1, m_col)  # column m = j - i + n - 1, every pair
assert_close(skewed, want)  # both sides of the diagonal
assert_close(relative_shift(s3, k_len=n), want)
# tensor2tensor's _relative_position_to_absolute_position_unmasked pads on
# the right instead, appends n - 1 zeros and keeps columns n - 1 on.

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With uniform weights $\alpha_{ij} = 1/n$, $\beta_{ir}$ is the
# number of keys with $c_{ij} = r$ divided by $n$. These groups are the offsets
# $\le -2$, $-1$, $0$, $+1$ and $\ge +2$; query $i$ has $\max(i - 1, 0)$ keys in the
# first and $\max(n - 2 - i, 0)$ in the last, so the first count grows and the last
# shrinks with $i$: all ten rows of $\beta$ differ, so $\beta$ tells every query
# apart; whether a second layer uses it depends on its weights. The value term $\sum_r \beta_{ir} w^V_{r-k}$ carries it into
# $z_i$: with ten identical tokens, the outputs still differ by position whenever
# the $w^V_r$ are linearly independent.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** 重みが一定 $\alpha_{ij} = 1/n$ のとき、$\beta_{ir}$ は $c_{ij} = r$ となるキーの数を $n$ で割った値です。
# キーのグループは相対位置 $\le -2$、$-1$、$0$、$+1$、$\ge +2$ の 5 つです。
# クエリ $i$ では、最初のグループに $\max(i - 1, 0)$ 個、最後のグループに $\max(n - 2 - i, 0)$ 個のキーが入ります。
# 前者は $i$ とともに増え、後者は減るので、$\beta$ の 10 行はすべて異なり、$\beta$ はどのクエリも区別します。2 層目がそれを使うかどうかは、その重みによります。
# この情報はバリューの項 $\sum_r \beta_{ir} w^V_{r-k}$ を通って $z_i$ に入ります。
# $w^V_r$ が線形独立なら、10 個のトークンがすべて同じでも、出力は位置ごとに異なります。

# %% tags=["solution"]
n, k_clip, d_z = 10, 2, 8
offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i
c = offset.clamp(-k_clip, k_clip) + k_clip
uniform = torch.full((n, n), 1 / n)
beta = torch.zeros(n, 2 * k_clip + 1).scatter_add_(-1, c, uniform)
counts = (beta * n).round().long()  # keys per bucket
by_hand = torch.tensor(
    [
        [max(i - 1, 0), int(i >= 1), 1, int(i <= n - 2), max(n - 2 - i, 0)]
        for i in range(n)
    ]
)
assert torch.equal(counts, by_hand)
assert len({tuple(row) for row in counts.tolist()}) == n  # all rows differ

gen = torch.Generator().manual_seed(14)
w_q, w_k, w_v = (torch.randn(d_z, d_z, generator=gen) for _ in range(3))
table_k = torch.zeros(2 * k_clip + 1, d_z)  # no key term: uniform weights
table_v = torch.randn(2 * k_clip + 1, d_z, generator=gen)
same = torch.randn(1, d_z, generator=gen).expand(n, d_z)  # ten equal tokens
z, _, alpha, beta_z = shaw_by_offset(
    same @ w_q, same @ w_k, same @ w_v, table_k, table_v, k_clip
)
assert_close(alpha, uniform)
assert_close(beta_z, beta)
assert len({tuple(row) for row in z.round(decimals=4).tolist()}) == n
print(counts.T)


# %% [markdown] lang="en"
# ## Sources and versions
#
# The equations, the clipping and the experiments are from Shaw et al. (2018):
# $k = 16$ (base model) and $k = 8$ (big) are §4.1, the runs varying $k$ and
# dropping $a^V$ Tables 2 and 3 (English-German newstest2013), the sharing of the
# tables and the 7% slowdown §3.3. The memory figures are from the list of
# contributions in Huang et al.'s (2018) introduction, the skewing from their §3.4.
# tensor2tensor's functions are read in `tensor2tensor/layers/common_attention.py` and ported here, since they
# are TensorFlow code. Hugging Face's `relative_key` is that of transformers
# 4.57.6 (`BertSelfAttention`, `BertEncoder.forward`), whose row lookups for
# $n = M = 6$, with and without a cache, were captured with a hook on
# `distance_embedding` in a separate environment; 5.24.0 no longer has the option.
#
# ### References
#
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019.
#   <https://arxiv.org/abs/1809.04281>
# - Dai, Z. et al. (2019). *Transformer-XL: Attentive Language Models Beyond a
#   Fixed-Length Context*. ACL 2019, §3.3. <https://arxiv.org/abs/1901.02860>
# - tensor2tensor, `dot_product_attention_relative` and `_relative_attention_inner` in
#   `tensor2tensor/layers/common_attention.py`.
#   <https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/common_attention.py>
# - Hugging Face transformers 4.57.6, `BertSelfAttention` (`position_embedding_type`)
#   in `modeling_bert.py`.
#   <https://github.com/huggingface/transformers/blob/v4.57.6/src/transformers/models/bert/modeling_bert.py>
# - Huang, Z., Liang, D., Xu, P., Xiang, B. (2020). *Improve Transformer Models with
#   Better Relative Position Embeddings*. Findings of EMNLP 2020.
#   <https://arxiv.org/abs/2009.13658>
# - He, P., Liu, X., Gao, J., Chen, W. (2021). *DeBERTa: Decoding-enhanced BERT with
#   Disentangled Attention*. ICLR 2021. <https://arxiv.org/abs/2006.03654>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# 式、クリッピング、実験の結果は Shaw ら（2018）によります。$k = 16$（base モデル）と $k = 8$（big モデル）は §4.1 にあります。
# $k$ を変えた実験と $a^V$ を除いた実験は表 2 と表 3（英独翻訳の newstest2013）、表の共有と 7% の速度低下は §3.3 です。
# メモリの値は Huang ら（2018）の序論の貢献の一覧から、スキューイングは同じ論文の §3.4 から取りました。
# tensor2tensor の関数は `tensor2tensor/layers/common_attention.py` で確認しました。TensorFlow のコードなので、ここでは PyTorch に移植しています。
# Hugging Face の `relative_key` は transformers 4.57.6 のもの（`BertSelfAttention`、`BertEncoder.forward`）です。
# $n = M = 6$ でキャッシュの有無それぞれについて参照された行は、別の環境で `distance_embedding` にフックを付けて記録しました。5.24.0 にはこのオプションはもうありません。
#
# ### 参考文献
#
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019.
#   <https://arxiv.org/abs/1809.04281>
# - Dai, Z. et al. (2019). *Transformer-XL: Attentive Language Models Beyond a
#   Fixed-Length Context*. ACL 2019, §3.3. <https://arxiv.org/abs/1901.02860>
# - tensor2tensor：`dot_product_attention_relative` と `_relative_attention_inner`（`tensor2tensor/layers/common_attention.py`）。
#   <https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/common_attention.py>
# - Hugging Face transformers 4.57.6：`modeling_bert.py` の `BertSelfAttention`（`position_embedding_type`）。
#   <https://github.com/huggingface/transformers/blob/v4.57.6/src/transformers/models/bert/modeling_bert.py>
# - Huang, Z., Liang, D., Xu, P., Xiang, B. (2020). *Improve Transformer Models with
#   Better Relative Position Embeddings*. Findings of EMNLP 2020.
#   <https://arxiv.org/abs/2009.13658>
# - He, P., Liu, X., Gao, J., Chen, W. (2021). *DeBERTa: Decoding-enhanced BERT with
#   Disentangled Attention*. ICLR 2021. <https://arxiv.org/abs/2006.03654>
