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
# The encodings of the chapters
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb) and
# [*Learned absolute embeddings and scaled sinusoids*](03-learned-embeddings.ipynb)
# give each token a vector for its absolute position $p$ and add it to the token
# before the first layer. Whatever the attention learns
# about order, it has to recover from those sums. Shaw, Uszkoreit and Vaswani (2018) put
# the position inside the attention instead, as a property of a *pair* of tokens: the
# query at position $i$ and the key at position $j$ exchange a learned vector that
# depends only on the offset $j - i$, clipped to at most $k$ either way. This chapter
# derives their two equations, computes them directly with `posenc`, measures what the
# direct computation costs in memory, and derives two ways around that cost: the paper's
# split of the score into two terms, and a form with one score per distance that never
# builds a vector per pair. Each is checked against the direct computation. Then it
# shows what the clipping hides from the model, how Music Transformer's "skewing" turns
# the same idea into a pad and a reshape, and how tensor2tensor and Hugging Face
# implement it.
#
# Offsets here are key minus query, $j - i$, as in Shaw et al. and on the
# [notation page](../docs/notation.md#positions): negative for a key before its
# query. The next chapter, [*Transformer-XL relative attention*](05-transformer-xl.ipynb),
# writes the causal distance $i - j$ instead, the same number with the opposite
# sign, and Hugging Face's BERT indexes its table by $i - j$ too. Following the
# paper, $n$ is the number of tokens, $d_z$ the head size and $k$ the clipping
# distance.

# %% [markdown] lang="ja"
# # 相対位置表現（Shaw ら）
#
# [「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章や[「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章の位置エンコーディングは、
# 各トークンに絶対位置 $p$ のベクトルを割り当て、
# 最初の層の前でトークンに足していました。
# アテンションが順序について学ぶことはすべて、その和から読み取るしかありません。
# Shaw、Uszkoreit、Vaswani（2018）は、代わりに位置をアテンションの内側に入れました。
# 位置は、2 つのトークンの「組」が持つ性質になります。
# 位置 $i$ のクエリと位置 $j$ のキーの組には、相対位置 $j - i$ だけで決まる学習可能なベクトルが割り当てられます。
# 相対位置は、前後どちらの向きにも最大 $k$ にクリップします。
# この章では、論文の 2 つの式を導いて `posenc` でそのまま計算し、この直接計算がどれだけメモリを使うかを測ります。
# 続いて、そのコストを避ける 2 つの方法を導きます。論文によるスコアの 2 項への分解と、
# 組ごとのベクトルを一切作らず、距離ごとに 1 つのスコアを使う形です。どちらも直接計算と照合します。
# さらに、クリッピングによってモデルから何が見えなくなるかを示します。
# Music Transformer の「スキューイング」が同じ考えをパディングと形状変換でどう実現するか、
# tensor2tensor と Hugging Face がこれをどう実装しているかも見ます。
#
# この章の相対位置は、Shaw らや[記法のページ](../docs/notation.ja.md#positions)と同じく、キーからクエリを引いた $j - i$ です。
# キーがクエリより前にあれば負になります。
# 次の[「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb)の章では、代わりに因果的な距離 $i - j$ を使います。
# 大きさは同じで、正負が逆です。Hugging Face の BERT も表を $i - j$ で引きます。
# 論文に合わせて、$n$ はトークンの数、$d_z$ はヘッドの次元数、$k$ はクリッピングの距離です。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
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
# Shaw et al. describe the input of self-attention as a complete directed graph: one
# node per token, and an edge from each position $i$ to each position $j$. The edge
# carries two learned vectors of the head size $d_z$, $a^K_{ij}$ for the keys and
# $a^V_{ij}$ for the values. To make them relative, they depend on $i$ and $j$ only
# through the offset $j - i$, and only up to a maximum distance $k$:
# $$a^K_{ij} = w^K_{\mathrm{clip}(j-i,\,k)}, \qquad a^V_{ij} = w^V_{\mathrm{clip}(j-i,\,k)}, \qquad \mathrm{clip}(x, k) = \max(-k, \min(k, x))$$
# So each table holds $2k+1$ vectors, $w^K = (w^K_{-k}, \dots, w^K_{k})$, whatever the
# length of the sequence. The paper gives two reasons for the clipping: precise
# relative positions are probably not useful beyond some distance, and a model with
# clipped distances can read sequences longer than any it was trained on, since every
# offset it meets has a vector. Their base translation model used $k = 16$, their
# big model $k = 8$ (§4.1). On the base model (English-German, newstest2013, §4.3),
# varying $k$ (their Table 2) changed little from $k = 2$ on, and the key term $a^K$
# alone did about as well as both terms (Table 3). Adding sinusoidal absolute
# encodings to the relative ones brought no further improvement (the abstract).
#
# `posenc.RelativePositionEmbedding(k, d_z)` holds one such table; row $r$ of its
# `embedding.weight` is $w_{r-k}$. Called with a number of queries and keys, it returns
# the tensor of all $a_{ij}$, of shape $(n, n, d_z)$ for $n$ tokens. The cell below
# checks every entry against the formula and prints the offsets $\mathrm{clip}(j-i,\,k)$
# for $n = 8$ and $k = 3$: row $i$, column $j$. Each diagonal holds one offset, and
# from the third diagonal outwards, on either side, everything is $3$ or $-3$.

# %% [markdown] lang="ja"
# ## クリップした相対位置
#
# Shaw らは、セルフアテンションの入力を完全な有向グラフとして捉えます。
# トークンごとに 1 つのノードがあり、各位置 $i$ から各位置 $j$ へ辺が張られています。
# 辺は、ヘッドの次元数 $d_z$ の学習可能なベクトルを 2 つ持ちます。キー用の $a^K_{ij}$ とバリュー用の $a^V_{ij}$ です。
# これを相対的なものにするため、どちらも $i$ と $j$ には相対位置 $j - i$ を通してだけ依存させ、
# しかも最大距離 $k$ までしか区別しません。
# $$a^K_{ij} = w^K_{\mathrm{clip}(j-i,\,k)}, \qquad a^V_{ij} = w^V_{\mathrm{clip}(j-i,\,k)}, \qquad \mathrm{clip}(x, k) = \max(-k, \min(k, x))$$
# したがって、系列の長さによらず、各表は $2k+1$ 個のベクトル $w^K = (w^K_{-k}, \dots, w^K_{k})$ を持つだけです。
# 論文はクリッピングの理由を 2 つ挙げています。
# 1 つは、ある距離より先では正確な相対位置はおそらく役に立たないことです。
# もう 1 つは、距離をクリップしたモデルなら、どの相対位置にも対応するベクトルがあるので、
# 学習に使ったどの系列より長い系列も読めることです。
# 論文の翻訳モデルでは、base モデルが $k = 16$、big モデルが $k = 8$ を使いました（§4.1）。
# base モデル（英独翻訳、newstest2013、§4.3）で $k$ を変えても（論文の表 2）、$k = 2$ 以上ではほとんど差がありませんでした。
# また、キーの項 $a^K$ だけでも両方の項を使う場合とほぼ同じ性能でした（表 3）。
# 相対位置表現に正弦波の絶対位置エンコーディングを加えても、それ以上の改善はありませんでした（論文の要旨）。
#
# `posenc.RelativePositionEmbedding(k, d_z)` がこの表を 1 つ持ちます。
# `embedding.weight` の行 $r$ が $w_{r-k}$ です。
# クエリとキーの数を渡して呼ぶと、すべての $a_{ij}$ を並べたテンソルを返します。
# $n$ トークンなら形状は $(n, n, d_z)$ です。
# 次のセルでは、すべての成分を式と照合し、$n = 8$、$k = 3$ のときの相対位置 $\mathrm{clip}(j-i,\,k)$ を表示します。
# 行が $i$、列が $j$ です。各対角線には 1 つの相対位置だけが並び、
# 主対角線から両側へ数えて 3 本目の対角線から外側は、すべて $3$ か $-3$ になります。

# %%
n, k_clip, d_z = 8, 3, 4
rel = RelativePositionEmbedding(k_clip, d_z)  # one table: 2k+1 rows of d_z
w = rel.embedding.weight.detach()  # row r is w_{r-k}
with torch.no_grad():
    a = rel(n, n)  # [n, n, d_z]: a_ij for every query i and key j


def clip(x, k):
    return max(-k, min(k, x))


assert a.shape == (n, n, d_z) and w.shape == (2 * k_clip + 1, d_z)
for i in range(n):
    for j in range(n):  # a_ij = w_clip(j-i, k)
        assert torch.equal(a[i, j], w[clip(j - i, k_clip) + k_clip])

offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # [i, j] = j - i
offset.clamp(-k_clip, k_clip)

# %% [markdown] lang="en"
# The heatmap shows the same offsets for $n = 24$ and $k = 4$. The diagonals
# $j - i = \pm k$ already carry $w_{\pm k}$, the same vectors as every diagonal
# beyond them, so within one layer the relative terms tell distances apart only for
# $|j - i| \le k - 1$, on the $2k - 1$ central diagonals; from the diagonals
# $\pm k$ outwards the two triangles are flat. The check after the figure
# confirms it on the table above ($k = 3$). With several layers, position information
# may propagate beyond the clipping distance $k$, as Shaw et al. themselves note (§4.3);
# [*Beyond k, distances are indistinguishable*](#beyond-k-distances-are-indistinguishable)
# and exercise 1 come back to this.
#
# When a decoder generates with a [KV cache](../docs/glossary.md#kv-cache), the $q$
# new queries are the last $q$ of the
# $n$ tokens, so query $i$ sits at position $i + n - q$ (the alignment that `posenc` uses
# everywhere). `rel(q, n)` follows it: its rows are the last $q$ rows of `rel(n, n)`,
# as the check after the figure confirms. Hugging Face's BERT does not always (see
# [*How the libraries differ*](#how-the-libraries-differ)).

# %% [markdown] lang="ja"
# 下のヒートマップは、同じ相対位置を $n = 24$、$k = 4$ で描いたものです。
# 対角線 $j - i = \pm k$ にはすでに、それより外側のすべての対角線と同じベクトル $w_{\pm k}$ が割り当てられています。
# そのため、1 つの層の中で相対位置の項が距離を区別できるのは $|j - i| \le k - 1$、つまり中央の $2k - 1$ 本の対角線だけです。
# 対角線 $\pm k$ から外側では、2 つの三角形がどちらも一様な色になります。
# 図の後のセルで、上の表（$k = 3$）についてこれを確かめます。
# ただし層を重ねると、位置の情報はクリッピングの距離 $k$ より遠くまで伝わりえます。Shaw らも §4.3 でこの可能性を指摘しています。
# この点は、後の[「k より先の距離は区別できない」](#k-より先の距離は区別できない)の節と演習 1 で改めて取り上げます。
#
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使ってデコーダが生成するとき、新しい $q$ 個のクエリは $n$ 個のトークンの最後の $q$ 個です。
# つまりクエリ $i$ は位置 $i + n - q$ にあります（`posenc` がどこでも使う位置合わせです）。
# `rel(q, n)` もこれに従います。その行は `rel(n, n)` の最後の $q$ 行です。図の後のセルでこれを確かめます。
# ただし Hugging Face の BERT は、いつもこうなるわけではありません（[「ライブラリによる違い」](#ライブラリによる違い)の節）。

# %% alt={"en": ["Heatmap of the clipped offset clip(j \u2212 i, k) for n = 24 and k = 4, query i down and key j across, 0 to 23. The values change only on the 7 central diagonals, from \u22123 to 3; from the diagonals \u00b14 outwards the two triangles are flat, \u22124 (blue) below and 4 (red) above."], "ja": ["n = 24\u3001k = 4 \u3067\u30af\u30ea\u30c3\u30d7\u3057\u305f\u76f8\u5bfe\u4f4d\u7f6e clip(j \u2212 i, k) \u306e\u30d2\u30fc\u30c8\u30de\u30c3\u30d7\uff08\u7e26\u8ef8\u306f\u30af\u30a8\u30ea i\u3001\u6a2a\u8ef8\u306f\u30ad\u30fc j\u30010\u301c23\uff09\u3002\u5024\u304c\u5909\u308f\u308b\u306e\u306f\u4e2d\u592e\u306e 7 \u672c\u306e\u5bfe\u89d2\u7dda\u3060\u3051\u3067\u3001\u22123 \u304b\u3089 3 \u307e\u3067\u4e26\u3073\u307e\u3059\u3002\u5bfe\u89d2\u7dda \u00b14 \u304b\u3089\u5916\u5074\u306e 2 \u3064\u306e\u4e09\u89d2\u5f62\u306f\u4e00\u69d8\u3067\u3001\u4e0b\u304c \u22124\uff08\u9752\uff09\u3001\u4e0a\u304c 4\uff08\u8d64\uff09\u3067\u3059\u3002"]}
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

with torch.no_grad():  # q new queries at the end of n keys (a KV cache)
    for q_len in range(n + 1):
        assert torch.equal(rel(q_len, n), a[n - q_len :])

# the table above (n = 8, k = 3): offsets 3, 4, ... share one vector, and so
# do -3, -4, ...; only |j - i| <= k - 1 = 2 gets a vector of its own
vec = {o: a[max(0, -o), max(0, -o) + o] for o in range(-(n - 1), n)}
for o1 in vec:
    for o2 in vec:
        same_side = min(o1, o2) >= k_clip or max(o1, o2) <= -k_clip
        assert torch.equal(vec[o1], vec[o2]) == (o1 == o2 or same_side)

# %% [markdown] lang="en"
# ## Relation-aware self-attention
#
# Ordinary self-attention over the inputs $x_1, \dots, x_n$ computes, for one head,
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top}{\sqrt{d_z}}, \qquad \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{l} \exp e_{il}}, \qquad z_i = \sum_{j} \alpha_{ij}\, x_j W^V$$
# Shaw et al. add the edge vectors in two places. The key that query $i$ compares
# itself with becomes $x_j W^K + a^K_{ij}$, and the value that it collects becomes
# $x_j W^V + a^V_{ij}$:
# $$e_{ij} = \frac{x_i W^Q \,(x_j W^K + a^K_{ij})^\top}{\sqrt{d_z}}$$
# $$z_i = \sum_{j} \alpha_{ij}\, (x_j W^V + a^V_{ij})$$
# (equations 4 and 3 of the paper; the softmax is unchanged). The same key $x_j W^K$
# now looks different to each query, by an amount that depends only on where the query
# stands relative to it. Since $\sum_j \alpha_{ij} = 1$, the second equation adds to the
# ordinary output $\sum_j \alpha_{ij}\, x_j W^V$ a weighted average of the $2k+1$
# vectors $w^V_r$.
#
# The cell below computes both equations twice: once entry by entry with Python loops,
# exactly as written, and once with whole tensors, where the $(n, n, d_z)$ tensors
# $a^K$ and $a^V$ enter through `einsum`. Two special cases tie it to `posenc.attention`:
# with both tables zero it is ordinary attention, and with $a^V = 0$ the key term is
# just an additive bias, $x_i W^Q (a^K_{ij})^\top / \sqrt{d_z}$, on the scores.

# %% [markdown] lang="ja"
# ## 関係を考慮したセルフアテンション（relation-aware）
#
# 入力 $x_1, \dots, x_n$ に対する通常のセルフアテンションは、1 つのヘッドで次を計算します。
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top}{\sqrt{d_z}}, \qquad \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{l} \exp e_{il}}, \qquad z_i = \sum_{j} \alpha_{ij}\, x_j W^V$$
# Shaw らは辺のベクトルを 2 か所に足します。
# クエリ $i$ が比べるキーは $x_j W^K + a^K_{ij}$ に、集めるバリューは $x_j W^V + a^V_{ij}$ になります。
# $$e_{ij} = \frac{x_i W^Q \,(x_j W^K + a^K_{ij})^\top}{\sqrt{d_z}}$$
# $$z_i = \sum_{j} \alpha_{ij}\, (x_j W^V + a^V_{ij})$$
# これらは論文の式 4 と式 3 で、softmax は変わりません。
# 同じキー $x_j W^K$ が、クエリごとに違って見えるようになります。
# その違いは、クエリがキーから見てどこにいるかだけで決まります。
# $\sum_j \alpha_{ij} = 1$ なので、2 つ目の式は通常の出力 $\sum_j \alpha_{ij}\, x_j W^V$ に、
# $2k+1$ 個のベクトル $w^V_r$ の重み付き平均を足すことになります。
#
# 次のセルでは、両方の式を 2 通りに計算します。
# 1 つは式のとおりに Python のループで成分ごとに計算し、もう 1 つはテンソル全体で計算します。
# 後者では、$(n, n, d_z)$ のテンソル $a^K$ と $a^V$ を `einsum` に渡します。
# さらに 2 つの特別な場合を `posenc.attention` と照らし合わせます。
# 両方の表が 0 なら、通常のアテンションそのものです。
# $a^V = 0$ なら、キーの項はスコアに足すバイアス $x_i W^Q (a^K_{ij})^\top / \sqrt{d_z}$ でしかないので、
# そのバイアスを渡した `posenc.attention` の結果と一致します。

# %%
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
    """Equations (4) and (3), entry by entry."""
    q, key, v = x @ w_q, x @ w_k, x @ w_v
    z = torch.zeros(n, d_z)
    for i in range(n):
        e = torch.stack([q[i] @ (key[j] + a_k[i, j]) for j in range(n)])
        alpha = torch.softmax(e / math.sqrt(d_z), dim=0)
        z[i] = sum(alpha[j] * (v[j] + a_v[i, j]) for j in range(n))
    return z


def shaw_materialised(q, key, v, a_k, a_v):
    """Whole tensors: q, key, v [..., n, d_z]; a_k, a_v [n, n, d_z]."""
    e = q @ key.transpose(-2, -1) + torch.einsum("...id,ijd->...ij", q, a_k)
    alpha = torch.softmax(e / math.sqrt(q.shape[-1]), dim=-1)  # [..., n, n]
    return alpha @ v + torch.einsum("...ij,ijd->...id", alpha, a_v)


q, key, v = x @ w_q, x @ w_k, x @ w_v
z = shaw_materialised(q, key, v, a_k, a_v)
assert_close(z, shaw_loops(x, a_k, a_v))

zero = torch.zeros(n, n, d_z)
assert_close(shaw_materialised(q, key, v, zero, zero), attention(q, key, v))
# x_i W^Q (a^K_ij)^T / sqrt(d_z) as an additive bias
bias = torch.einsum("id,ijd->ij", q, a_k) / math.sqrt(d_z)
with_bias = attention(q, key, v, bias=bias)
assert_close(shaw_materialised(q, key, v, a_k, zero), with_bias)

# the value term is a weighted average of the 2k+1 vectors w^V_r
e = q @ key.T + torch.einsum("id,ijd->ij", q, a_k)
alpha = torch.softmax(e / math.sqrt(d_z), -1)
assert_close(z - alpha @ v, torch.einsum("ij,ijd->id", alpha, a_v))

# %% [markdown] lang="en"
# ## What the direct computation costs
#
# The tensor $a^K$ has one vector of size $d_z$ for every pair of positions: $n^2 d_z$
# numbers, per table and per layer. Shaw et al. (§3.3) propose to share the tables
# across the heads and across the sequences of a batch, which keeps it at
# $n^2 d_z$ instead of $h\, n^2 d_z$ for $h$ heads, and tensor2tensor's
# `dot_product_attention_relative` shares them so. Their own experiments did not
# all share: the base model (§4.1) kept one table per layer and head, $h\, n^2 d_z$
# per layer, the count below; only the big model shared across heads. Either way
# it is quadratic in $n$ with a factor $d_z$ that the score matrix
# does not have. Huang et al. (2018, Music Transformer) count it for one layer with
# $n = 2048$, $h = 8$ heads of size $d_z = 64$ (a model width of 512), and a table per
# head. The cell below computes the bytes from the shapes alone, with tensors on
# PyTorch's `meta` device, which have a shape and a dtype but no storage: nothing is
# allocated. In float32, one table of $n^2 d_z$ numbers is 1073741824 bytes, 1.1 GB, as
# Huang et al. say per head; one per head makes 8589934592 bytes, 8.6 GB, which they give
# as 8.5 GB per layer. Their alternative, one vector per distance and per head, needs
# $n\, d_z$ numbers: 524288 bytes (0.52 MB) per head and 4194304 bytes (4.2 MB) for the
# layer, their figures.

# %% [markdown] lang="ja"
# ## 直接計算のコスト
#
# テンソル $a^K$ は、位置の組ごとに $d_z$ 次元のベクトルを 1 つ持ちます。
# 表 1 つ、層 1 つあたり $n^2 d_z$ 個の数です。
# Shaw ら（§3.3）は、表をヘッド間でも、バッチ内の系列間でも共有することを提案しています。
# そうすれば、$h$ 個のヘッドがあっても $h\, n^2 d_z$ ではなく $n^2 d_z$ で済みます。
# tensor2tensor の `dot_product_attention_relative` も、このように共有します。
# ただし、論文の実験がすべて共有していたわけではありません。
# base モデル（§4.1）は層ごと、ヘッドごとに表を持ち、層あたり $h\, n^2 d_z$ 個で、これは下で数える量です。
# ヘッド間で共有したのは big モデルだけです。
# どちらにしても $n$ の 2 乗に比例し、しかもスコア行列にはない $d_z$ 倍がかかります。
# Huang ら（2018、Music Transformer）は、$n = 2048$、次元数 $d_z = 64$ のヘッドが $h = 8$ 個
# （モデルの幅は 512）で、ヘッドごとに表を持つ 1 層についてこの量を見積もっています。
# 次のセルでは、形状だけからバイト数を計算します。
# PyTorch の `meta` デバイス上のテンソルは、形状と dtype を持ちますが、データの領域を持ちません。メモリは何も確保されません。
# float32 では、$n^2 d_z$ 個の数からなる表 1 つが 1073741824 バイト、つまり 1.1 GB で、
# Huang らがヘッドあたりとして挙げる値と同じです。
# ヘッドごとに 1 つなら 8589934592 バイト、8.6 GB で、論文はこれを層あたり 8.5 GB としています。
# Huang らの代案は、距離ごと、ヘッドごとにベクトルを 1 つ持つもので、必要なのは $n\, d_z$ 個の数です。
# ヘッドあたり 524288 バイト（0.52 MB）、層全体で 4194304 バイト（4.2 MB）となり、論文の値と一致します。


# %%
def nbytes(*shape, dtype=torch.float32):
    """Bytes of a tensor of this shape, on the meta device: no memory."""
    return torch.empty(shape, dtype=dtype, device="meta").nbytes


n, h, d_z = 2048, 8, 64
table = nbytes(n, n, d_z)  # a^K: one d_z-vector per pair (i, j)
per_head = nbytes(h, n, n, d_z)  # one such table per head
linear = nbytes(n, d_z)  # one d_z-vector per distance
# Huang et al.'s printed figures: 1.1 GB per head, 8.5 GB per layer,
# 0.52 MB per head and 4.2 MB per layer (decimal units)
assert round(table / 1e9, 1) == 1.1 and 8.5 <= per_head / 1e9 < 8.6
assert round(linear / 1e6, 2) == 0.52 and round(h * linear / 1e6, 1) == 4.2
print(
    f"a^K [n, n, d_z]:         {table:>10d} B = {table / 1e9:.1f} GB\n"
    f"per head [h, n, n, d_z]: {per_head:>10d} B = {per_head / 1e9:.1f} GB\n"
    f"per distance [n, d_z]:   {linear:>10d} B = {linear / 1e6:.2f} MB,"
    f" per layer {h * linear} B = {h * linear / 1e6:.1f} MB",
    end="",
)

# %% [markdown] lang="en"
# ## The paper's efficient form: two terms
#
# Shaw et al. (§3.3) avoid the worst of it by splitting the score. Expanding the product
# in the numerator,
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top + x_i W^Q (a^K_{ij})^\top}{\sqrt{d_z}}$$
# The first term is ordinary attention, one matrix product per head. The second needs
# care: with batch size $b$ and $h$ heads, a careless broadcast would multiply
# $b\,h$ queries by $n^2$ edge vectors and form a $(b, h, n, n, d_z)$ product. The paper
# instead reshapes. For a fixed query position $i$, the queries of all $b\,h$ sequences
# and heads form a $b h \times d_z$ matrix, and the edge vectors
# $a^K_{i1}, \dots, a^K_{in}$ a $d_z \times n$ one, shared by all of them. So the second term is $n$
# independent products of a $b h \times d_z$ and a $d_z \times n$ matrix: one batched
# matrix product after moving the position axis of the queries to the front, then a
# move back to add it to the first term. The values work the same way, with the weights
# $\alpha_{i1}, \dots, \alpha_{in}$ in place of the query and $a^V_{i1}, \dots, a^V_{in}$
# as an $n \times d_z$ matrix. The paper puts the price of this form, in its
# translation experiments, at a 7 % drop in training steps per second, with the
# model and batch sizes of Vaswani et al. still fitting on P100 GPUs (§3.3).
#
# The cell below is a line-by-line port of tensor2tensor's `_relative_attention_inner`
# (TensorFlow code, so a port is what can run here), which does exactly this,
# checked against the direct computation for a batch of 2
# sequences with 3 heads. Nothing of size $b\,h\,n^2 d_z$ is formed. The
# intermediates are $a^K$ itself, $n^2 d_z$ numbers once for the whole batch,
# products of $b\,h\,n^2$ numbers (the scores and `x_tz`) and tensors of the size
# of the queries, $b\,h\,n\,d_z$. Which is largest depends on $b\,h$, $n$ and
# $d_z$: $a^K$ is the largest when $b\,h < \min(n, d_z)$, since $n^2 d_z$ must beat
# both $b\,h\,n^2$ and $b\,h\,n\,d_z$. Here $b\,h = 6$, $n = 7$ and $d_z = 8$, so it is
# $a^K$; with 4 sequences instead of 2 it is the others. The cell records the size
# of every tensor formed and checks both cases.

# %% [markdown] lang="ja"
# ## 論文の効率的な形：2 つの項
#
# Shaw ら（§3.3）は、スコアを分解して、このコストのいちばん重い部分を避けます。分子の積を展開すると次のようになります。
# $$e_{ij} = \frac{x_i W^Q (x_j W^K)^\top + x_i W^Q (a^K_{ij})^\top}{\sqrt{d_z}}$$
# 1 つ目の項は通常のアテンションで、ヘッドごとに行列積 1 回です。2 つ目の項には注意が要ります。
# バッチサイズ $b$、ヘッド数 $h$ のとき、不用意にブロードキャストすると、
# $b\,h$ 個のクエリに $n^2$ 個の辺のベクトルを掛け、$(b, h, n, n, d_z)$ の積を作ってしまいます。
# 論文は、代わりに形状変換を使います。クエリの位置 $i$ を固定すると、
# $b\,h$ 個の系列とヘッドのクエリは $b h \times d_z$ 行列をなし、
# 辺のベクトル $a^K_{i1}, \dots, a^K_{in}$ はそれらすべてに共通の $d_z \times n$ 行列をなします。
# したがって 2 つ目の項は、$b h \times d_z$ 行列と $d_z \times n$ 行列の独立な積 $n$ 個です。
# クエリの位置の軸を先頭に移してバッチ行列積を 1 回行い、軸を戻して 1 つ目の項に足します。
# バリューも同じで、クエリの代わりに重み $\alpha_{i1}, \dots, \alpha_{in}$ を、
# $n \times d_z$ 行列として $a^V_{i1}, \dots, a^V_{in}$ を使います。
# 論文によると、翻訳の実験でこの形にかかった代償は、1 秒あたりの学習ステップ数の 7% の低下でした。
# その際も、Vaswani らと同じ大きさのモデルとバッチが P100 GPU に収まっていました（§3.3）。
#
# 次のセルは、まさにこれを行う tensor2tensor の `_relative_attention_inner` を 1 行ずつ移植したものです（TensorFlow のコードなので、ここでは移植で確かめます）。
# 2 系列・3 ヘッドのバッチで直接計算と照合します。
# $b\,h\,n^2 d_z$ の大きさのものは作りません。
# 中間結果は、バッチ全体で 1 つだけの $a^K$（$n^2 d_z$ 個の数）、$b\,h\,n^2$ 個の数からなる積（スコアと `x_tz`）、
# そしてクエリと同じ大きさ $b\,h\,n\,d_z$ のテンソルです。
# どれが最も大きいかは $b\,h$、$n$、$d_z$ で決まります。
# $n^2 d_z$ が $b\,h\,n^2$ と $b\,h\,n\,d_z$ の両方を上回る必要があるので、$a^K$ が最も大きいのは $b\,h < \min(n, d_z)$ のときです。
# ここでは $b\,h = 6$、$n = 7$、$d_z = 8$ なので $a^K$ が最も大きく、系列を 2 つから 4 つにすると、ほかのもののほうが大きくなります。
# セルでは、作られたすべてのテンソルの大きさを記録し、両方の場合を確かめます。


# %%
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
    out = xy + x_tz.reshape(n, b, h, -1).permute(1, 2, 0, 3)  # [b, h, n, *]
    formed.extend(t.numel() for t in (z, xy, x_t, x_tz, out))
    return out


def shaw_two_terms(q, key, v, a_k, a_v):
    logits = relative_inner(q, key, a_k, transpose=True)
    alpha = torch.softmax(logits / math.sqrt(q.shape[-1]), dim=-1)
    return relative_inner(alpha, v, a_v, transpose=False)


b, h, n, d_z = 2, 3, 7, 8
qb, kb, vb = (torch.randn(b, h, n, d_z) for _ in range(3))
with torch.no_grad():
    a_k, a_v = rel_k(n, n), rel_v(n, n)  # shared by the batch and the heads
formed = []  # numel of a^K and of every tensor relative_inner forms
two_terms = shaw_two_terms(qb, kb, vb, a_k, a_v)
assert_close(two_terms, shaw_materialised(qb, kb, vb, a_k, a_v))
assert b * h < min(n, d_z)  # 6 < min(7, 8): a^K is the largest
assert max(formed) == n * n * d_z < b * h * n * n * d_z

formed = []  # 4 sequences: the [b, h, n, *] tensors outgrow a^K
wide = [torch.randn(4, h, n, d_z) for _ in range(3)]  # b h = 12 > min(n, d_z)
shaw_two_terms(*wide, a_k, a_v)
assert max(formed) == 4 * h * n * max(n, d_z) > n * n * d_z

# %% [markdown] lang="en"
# ## Never build the pairs: one score per distance
#
# Both forms still hold $a^K_{ij}$ for every pair, although there are only $2k+1$
# different vectors among them. Write the clipped offset as a column index,
# $c_{ij} = \mathrm{clip}(j-i,\,k) + k$, with values $0, \dots, 2k$. Then
# $a^K_{ij} = w^K_{c_{ij}-k}$, and the second term of the score only looks up a number
# that can be computed once per query and distance:
# $$x_i W^Q (a^K_{ij})^\top = P_{i,\,c_{ij}}, \qquad P_{ir} = x_i W^Q\, (w^K_{r-k})^\top$$
# $P$ is the product of the $n \times d_z$ queries with the transposed $(2k+1) \times d_z$
# table: an $n \times (2k+1)$ matrix per head, from which a gather along the last axis
# picks entry $c_{ij}$ for each pair. For the values, group the sum over keys by their
# column index. Every key with the same $c_{ij}$ brings the same vector, so
# $$\sum_{j} \alpha_{ij}\, a^V_{ij} = \sum_{r=0}^{2k} \beta_{ir}\, w^V_{r-k}, \qquad \beta_{ir} = \sum_{j:\, c_{ij} = r} \alpha_{ij}$$
# $\beta$ holds, for each query, the total attention that falls into each of the $2k+1$
# distance buckets: `scatter_add` along the last axis builds it from $\alpha$, and a
# product with the table finishes the job. Both steps are also a product with a one-hot
# encoding of $c_{ij}$, which the cell below uses as a second check. Each row of $\beta$
# sums to 1.
#
# The extra memory is $P$ and $\beta$, $n(2k+1)$ numbers per head each, and the index
# $c_{ij}$, $n^2$ integers shared by everything (for a causal model, the section on
# Music Transformer's skewing below removes it too). Nothing has a factor $n^2 d_z$ any
# more.

# %% [markdown] lang="ja"
# ## 組を作らない：距離ごとに 1 つのスコア
#
# どちらの形も、依然としてすべての組について $a^K_{ij}$ を保持します。しかし、その中に異なるベクトルは $2k+1$ 個しかありません。
# クリップした相対位置を、列のインデックス $c_{ij} = \mathrm{clip}(j-i,\,k) + k$ として書きます。値は $0, \dots, 2k$ です。
# すると $a^K_{ij} = w^K_{c_{ij}-k}$ なので、スコアの 2 つ目の項は、
# クエリと距離の組ごとに一度だけ計算しておける数を、表から引いてくるだけになります。
# $$x_i W^Q (a^K_{ij})^\top = P_{i,\,c_{ij}}, \qquad P_{ir} = x_i W^Q\, (w^K_{r-k})^\top$$
# $P$ は $n \times d_z$ のクエリと $(2k+1) \times d_z$ の表の転置との積で、ヘッドごとに $n \times (2k+1)$ 行列です。
# そこから最後の軸に沿った gather で、組ごとに成分 $c_{ij}$ を取り出します。
# バリューでは、キーについての和を列のインデックスごとにまとめます。$c_{ij}$ が同じキーはどれも同じベクトルを持ち込むので、
# $$\sum_{j} \alpha_{ij}\, a^V_{ij} = \sum_{r=0}^{2k} \beta_{ir}\, w^V_{r-k}, \qquad \beta_{ir} = \sum_{j:\, c_{ij} = r} \alpha_{ij}$$
# となります。$\beta$ は、クエリごとに、$2k+1$ 個の距離のバケットそれぞれに入るアテンションの合計です。
# これは最後の軸に沿った `scatter_add` で $\alpha$ から作れ、あとは表との積で仕上がります。
# gather と scatter はどちらも $c_{ij}$ の one-hot ベクトルとの積として書けます。次のセルでは、これを 2 つ目の確認に使います。
# $\beta$ の各行の和は 1 です。
#
# 余分なメモリは、ヘッドごとに $n(2k+1)$ 個ずつの $P$ と $\beta$、
# そしてすべてで共有する $n^2$ 個の整数のインデックス $c_{ij}$ です。
# 因果的なモデルなら、後の Music Transformer のスキューイングの節で見るとおり、これも不要になります。
# $n^2 d_z$ に比例するものは、もうありません。


# %%
def clipped_index(n, k):  # c_ij = clip(j - i, k) + k: [n, n]
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return offset.clamp(-k, k) + k


def shaw_by_distance(q, key, v, table_k, table_v, k):
    """Without a^K or a^V: tables [2k+1, d_z], q, key, v [..., n, d_z]."""
    n = q.shape[-2]
    p = q @ table_k.T  # P: [..., n, 2k+1], x_i W^Q w_r^T for every distance
    c = clipped_index(n, k).expand(*p.shape[:-2], n, n)
    logits = q @ key.transpose(-2, -1) + p.gather(-1, c)
    alpha = torch.softmax(logits / math.sqrt(q.shape[-1]), dim=-1)
    beta = torch.zeros_like(p).scatter_add_(-1, c, alpha)  # per bucket
    return alpha @ v + beta @ table_v, p, alpha, beta


table_k = rel_k.embedding.weight.detach()
table_v = rel_v.embedding.weight.detach()
out, p, alpha, beta = shaw_by_distance(qb, kb, vb, table_k, table_v, k_clip)
assert_close(out, shaw_materialised(qb, kb, vb, a_k, a_v))

# the same gather and scatter as products with a one-hot encoding of c_ij
c = clipped_index(n, k_clip)
one_hot = F.one_hot(c, 2 * k_clip + 1).float()  # [i, j, r] = [c_ij = r]
by_one_hot = torch.einsum("...ir,ijr->...ij", p, one_hot)
assert_close(by_one_hot, torch.einsum("...id,ijd->...ij", qb, a_k))
assert_close(torch.einsum("...ij,ijr->...ir", alpha, one_hot), beta)
assert_close(beta.sum(-1), torch.ones(b, h, n))  # each row of beta sums to 1
print(f"P and beta: {tuple(p.shape)}, alpha: {tuple(alpha.shape)}", end="")

# %% [markdown] lang="en"
# The figure compares the three memory bills for one layer as the length grows, with
# $h = 8$ heads of size $d_z = 64$ and $k = 16$, in float32, computed from the shapes as
# above. The materialised $a^K$ grows like $n^2 d_z$. The distance form costs $P$ and $\beta$
# for every head plus the int64 index: linear at first, then quadratic through the index
# alone, a factor $d_z / 2 = 32$ below $a^K$. For reference, the score matrix $e_{ij}$ that
# every attention over $h$ heads forms has $h\,n^2$ numbers: from $n = 128$ on (printed
# below), the distance form costs less than the scores themselves. The y axis is in
# bytes ($\mathrm{B}$).

# %% [markdown] lang="ja"
# 下の図は、1 層が使うメモリを 3 つの量について、長さを変えながら比べたものです。
# 次元数 $d_z = 64$ のヘッドが $h = 8$ 個、$k = 16$、float32 で、上と同じく形状から計算しています。
# 実体化した $a^K$ は $n^2 d_z$ に比例して増えます。
# 距離ごとの形では、ヘッドごとの $P$ と $\beta$ に、int64 のインデックスが加わります。
# 初めは長さに比例して増え、やがてインデックスの配列だけが 2 乗で効いてきますが、それでも $a^K$ の $d_z / 2 = 32$ 分の 1 にとどまります。
# 3 つ目は比較の基準で、$h$ 個のヘッドを持つアテンションならどれでも作るスコア行列 $e_{ij}$（$h\,n^2$ 個の数）です。
# $n = 128$ 以上では（下に表示）、距離ごとの形のほうがスコアそのものより小さくなります。
# 縦軸の単位はバイト（$\mathrm{B}$）です。

# %% alt={"en": ["Log\u2013log plot of one layer's memory in bytes against length n from 64 to 32768, h = 8, d_z = 64, k = 16. The materialised a^K is highest, about 2.7\u00b710^11 B at the end; the distance form P, \u03b2, c ends 32 times lower, below the scores e_ij from n = 128."], "ja": ["\u9577\u3055 n\uff0864\u301c32768\uff09\u306b\u5bfe\u3059\u308b 1 \u5c64\u306e\u30e1\u30e2\u30ea\uff08\u30d0\u30a4\u30c8\uff09\u306e\u4e21\u5bfe\u6570\u30b0\u30e9\u30d5\uff08h = 8\u3001d_z = 64\u3001k = 16\uff09\u3002\u5b9f\u4f53\u5316\u3057\u305f a^K \u304c\u6700\u3082\u5927\u304d\u304f\u3001\u6700\u5f8c\u306f\u7d04 2.7\u00b710^11 B \u3067\u3059\u3002\u8ddd\u96e2\u3054\u3068\u306e\u5f62\uff08P\u3001\u03b2\u3001\u30a4\u30f3\u30c7\u30c3\u30af\u30b9 c_ij\uff09\u306f\u6700\u5f8c\u306b\u305d\u306e\u7d04 32 \u5206\u306e 1 \u3068\u306a\u308a\u3001n = 128 \u4ee5\u4e0a\u3067\u306f\u30b9\u30b3\u30a2 e_ij \u3088\u308a\u5c0f\u3055\u304f\u306a\u308a\u307e\u3059\u3002"]}
h, d_z, k_clip = 8, 64, 16
lengths = [2**e for e in range(6, 16)]
direct = [nbytes(n, n, d_z) for n in lengths]  # a^K
index = [nbytes(n, n, dtype=torch.int64) for n in lengths]  # c_ij
by_distance = [
    2 * nbytes(h, n, 2 * k_clip + 1) + c
    for n, c in zip(lengths, index, strict=True)
]
scores = [nbytes(h, n, n) for n in lengths]  # e_ij of all heads
assert all(a_ == d_z // 2 * c for a_, c in zip(direct, index, strict=True))
pairs = zip(lengths, scores, by_distance, strict=True)
below = [n for n, s, m in pairs if m < s]
# below the scores from n = 128 on, and at every longer length
assert below == lengths[lengths.index(128) :]
print(f"P, beta and c below the scores e_ij from n = {below[0]} on", end="")

fig, ax = plt.subplots(figsize=(6.4, 3.6))
ax.plot(lengths, direct, "o-", ms=4, label=r"$a^K_{ij}$")
ax.plot(lengths, by_distance, "s-", ms=4, label=r"$P,\ \beta,\ c_{ij}$")
ax.plot(lengths, scores, "--", color="0.4", label=r"$e_{ij}$")
ax.set(xscale="log", yscale="log", xlabel="$n$", ylabel=r"$\mathrm{B}$")
labels = [f"$2^{{{int(math.log2(n))}}}$" for n in lengths[::3]]
ax.set_xticks(lengths[::3], labels)
ax.minorticks_off()
ax.legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# ## Beyond k, distances are indistinguishable
#
# Clipping is a choice with a visible consequence. For query $i$, every key with
# $j - i \ge k$ receives the same $a^K_{ij} = w^K_{k}$ and the same $a^V_{ij} = w^V_{k}$,
# and likewise every key with $j - i \le -k$ receives $w^K_{-k}$ and $w^V_{-k}$. Inside
# each of those two groups, nothing in $e_{ij}$ or $z_i$ depends on where a key sits:
# the group is a bag of tokens. Shuffle the tokens within one group, and $z_i$ does not
# change. Swap two tokens at different distances inside the band, and it does.
#
# The cell below takes $n = 12$, $k = 2$ and the query at position $i = 6$: the keys
# $j \le 4$ form one bag, the keys $j \ge 8$ the other. It shuffles each bag, checks
# that the output of query 6 is the same to rounding error, then swaps the tokens at
# $j = 5$ and $j = 7$ (offsets $-1$ and $+1$) and prints how far the output moves.

# %% [markdown] lang="ja"
# ## k より先の距離は区別できない
#
# クリッピングの影響は、目に見える形で現れます。クエリ $i$ から見て、$j - i \ge k$ のキーはどれも同じ
# $a^K_{ij} = w^K_{k}$ と $a^V_{ij} = w^V_{k}$ を受け取ります。
# 同じく $j - i \le -k$ のキーはどれも $w^K_{-k}$ と $w^V_{-k}$ を受け取ります。
# この 2 つのグループの中では、$e_{ij}$ と $z_i$ のどちらにも、キーの位置に依存する部分はありません。
# 各グループは、順序を持たないトークンの集まり（bag）になります。
# 1 つのグループの中でトークンを並べ替えても、$z_i$ は変わりません。
# 一方、クリップされない中央の帯の中で、距離の異なる 2 つのトークンを入れ替えると、出力は変わります。
#
# 次のセルでは $n = 12$、$k = 2$ とし、位置 $i = 6$ のクエリを見ます。
# キー $j \le 4$ が 1 つのグループ、$j \ge 8$ がもう 1 つのグループです。
# それぞれのグループの中を並べ替えても、クエリ 6 の出力が丸め誤差の範囲で変わらないことを確かめます。
# 次に $j = 5$ と $j = 7$（相対位置 $-1$ と $+1$）のトークンを入れ替えて、出力がどれだけ動くかを表示します。

# %%
n, d_z, k_clip, i = 12, 8, 2, 6
x = torch.randn(n, d_z)
w_q, w_k, w_v = (torch.randn(d_z, d_z) / math.sqrt(d_z) for _ in range(3))
table_k = torch.randn(2 * k_clip + 1, d_z)
table_v = torch.randn(2 * k_clip + 1, d_z)


def output_of(x):
    q, key, v = x @ w_q, x @ w_k, x @ w_v
    z, *_ = shaw_by_distance(q, key, v, table_k, table_v, k_clip)
    return z[i]


left = torch.arange(0, i - k_clip + 1)  # j <= 4
right = torch.arange(i + k_clip, n)  # j >= 8
shuffled = torch.arange(n)
shuffled[left] = left[torch.randperm(len(left))]
shuffled[right] = right[torch.randperm(len(right))]
assert not torch.equal(shuffled, torch.arange(n))
# within each bag, the order is invisible to query i
assert_close(output_of(x[shuffled]), output_of(x))

swapped = torch.arange(n)
swapped[[i - 1, i + 1]] = swapped[[i + 1, i - 1]]  # offsets -1, +1: in the band
moved = (output_of(x[swapped]) - output_of(x)).abs().max()
assert moved > 1e-2
print(f"shuffled order: {shuffled.tolist()}", end="\n")
print(f"swap j = 5, 7: max change {moved:.3f}", end="")

# %% [markdown] lang="en"
# This is per layer. The output $z_i$ of the first layer mixes in the neighbours of
# position $i$, so a second layer can, in principle, recover some order among far tokens
# from what their neighbourhoods looked like (exercise 1). It is also not the whole story
# for absolute positions: a query near the start of the sequence has no keys at negative
# offsets, and that asymmetry is visible in $\beta$ (exercise 4).

# %% [markdown] lang="ja"
# これは層ごとの話です。1 層目の出力 $z_i$ には位置 $i$ の近傍が混ざるので、
# 2 層目は原理的には、遠いトークンの近傍の様子から、それらの間の順序をある程度取り戻せます（演習 1）。
# また、絶対位置の手がかりがまったくなくなるわけでもありません。系列の先頭近くのクエリには、相対位置が負のキーがありません。
# この非対称性は $\beta$ に現れます（演習 4）。

# %% [markdown] lang="en"
# ## Music Transformer's skewing
#
# For a causal model the index $c_{ij}$ can go too. Huang et al. (2018) keep one
# embedding per distance, $E^r$, an $n \times d_z$ matrix whose row $m$ belongs to the
# offset $j - i = m - (n - 1)$, that is $-(n-1), \dots, 0$ (they do not clip, but a
# clipped table is simply $E^r$ with repeated rows). The product $Q (E^r)^\top$ is
# $n \times n$, and column $m$ of row $i$ is the score of query $i$ against the offset
# $m - (n - 1)$. The key $j \le i$ needs the column $m = j - i + n - 1$, so row $i$ has to
# move left by $n - 1 - i$ places. Their "skewing" does this without an index:
#
# 1. pad one column of zeros on the left: $n \times (n+1)$;
# 2. reshape the same numbers to $(n+1) \times n$;
# 3. drop the first row and read the rest as $n \times n$.
#
# Entry $(i, j)$ of the result is entry $n + i n + j$ of the padded rows laid end to
# end, which is padded column $n + j - i$ of row $i$ as long as $j \le i$: the wanted
# $m = j - i + n - 1$ of the unpadded row. Above the diagonal the entries are not scores
# of the pair, and the causal mask hides them. Transformer-XL uses the same reshape with
# a sinusoidal $E^r$, and `posenc.transformer_xl.relative_shift` implements it. The
# chapter [*Transformer-XL relative attention*](05-transformer-xl.ipynb) derives it in
# general, with the entries
# above the diagonal, memory and the direction of the distances. The cell below builds
# $E^r$ from a clipped Shaw table, skews, and compares, on the causal part, with the
# gather of the section
# [*Never build the pairs*](#never-build-the-pairs-one-score-per-distance).

# %% [markdown] lang="ja"
# ## Music Transformer のスキューイング
#
# 因果的なモデルなら、インデックス $c_{ij}$ もなくせます。
# Huang ら（2018）は、距離ごとに 1 つの埋め込みを持ちます。それが $n \times d_z$ 行列 $E^r$ で、
# 行 $m$ は相対位置 $j - i = m - (n - 1)$、つまり $-(n-1), \dots, 0$ に対応します
# （Huang らはクリップしませんが、クリップした表は行が繰り返された $E^r$ にすぎません）。
# 積 $Q (E^r)^\top$ は $n \times n$ で、行 $i$ の列 $m$ は、クエリ $i$ と相対位置 $m - (n - 1)$ のスコアです。
# キー $j \le i$ には列 $m = j - i + n - 1$ が必要なので、行 $i$ を $n - 1 - i$ 列ぶん左へずらさなければなりません。
# Huang らの「スキューイング」は、これをインデックスを使わずに行います。
#
# 1. 左に 0 の列を 1 つパディングします：$n \times (n+1)$。
# 2. 同じ数の並びを $(n+1) \times n$ に形状変換します。
# 3. 最初の行を捨て、残りを $n \times n$ として読みます。
#
# 結果の成分 $(i, j)$ は、パディングした行を端から端までつなげたときの、0 から数えて $n + i n + j$ 番目の成分です。
# $j \le i$ である限り、それは行 $i$ のパディング後の列 $n + j - i$ で、
# パディング前の行でいえば、求める列 $m = j - i + n - 1$ にあたります。
# 対角線より上の成分はその組のスコアではありませんが、因果マスクがそれを隠します。
# Transformer-XL は正弦波の $E^r$ で同じ形状変換を使い、`posenc.transformer_xl.relative_shift` がそれを実装しています。
# [「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb)の章では、対角線より上の成分、メモリ、距離の向きも含めて、一般の場合を導きます。
# 次のセルでは、クリップした Shaw の表から $E^r$ を作ってスキューイングを施し、
# 因果的な部分を[「組を作らない」](#組を作らない距離ごとに-1-つのスコア)の節の gather と比べます。

# %%
n, d_z, k_clip = 10, 8, 3
q = torch.randn(n, d_z)
table_k = torch.randn(2 * k_clip + 1, d_z)
offsets = torch.arange(-(n - 1), 1)  # row m: offset m - (n - 1)
e_r = table_k[offsets.clamp(-k_clip, k_clip) + k_clip]  # [n, d_z], O(n d_z)
s = q @ e_r.T  # [n, n]: column m is the offset m - (n - 1)

padded = torch.cat([torch.zeros(n, 1), s], dim=1)  # [n, n + 1]
skewed = padded.reshape(n + 1, n)[1:].reshape(n, n)  # drop the first row

c = clipped_index(n, k_clip)
gathered = (q @ table_k.T).gather(-1, c)  # P_{i, c_ij}: "Never build the pairs"
causal = torch.ones(n, n, dtype=torch.bool).tril()
assert_close(skewed[causal], gathered[causal])  # j <= i: the right scores
# above the diagonal: not scores
assert not torch.allclose(skewed[~causal], gathered[~causal])
assert torch.equal(skewed, relative_shift(s))  # Transformer-XL's trick

# %% [markdown] lang="en"
# ## How the libraries differ
#
# **tensor2tensor** (`dot_product_attention_relative` in `common_attention.py`) is the
# reference implementation of the paper. It builds the index with the offsets
# $j - i$ (`range_vec_k[None, :] - range_vec_q[:, None]`) clipped to
# `max_relative_position`, gathers one $(n, n, d_z)$ tensor per table (keys and values,
# shared by the heads) and multiplies with `_relative_attention_inner`, the two-term
# form above. With unequal lengths the queries are the last ones, as in `posenc`.
# The same file also has Music Transformer's form:
# `dot_product_self_attention_relative_v2` (causal only) skews with
# `_relative_position_to_absolute_position_masked`, the pad, reshape and slice of
# the previous section. Its table (`get_relative_embeddings_left`) has
# `max_relative_position` rows for the distances looking back, and for a longer
# sequence it pads zero vectors in front instead of clipping, so keys farther back
# get no relative term at all. The bidirectional
# `dot_product_unmasked_self_attention_relative_v2` skews with
# `_relative_position_to_absolute_position_unmasked`, checked in solution 3.
#
# **Hugging Face** BERT-style models of transformers 4.x
# (`position_embedding_type="relative_key"` in `BertSelfAttention`; checked with
# 4.57.6, while 5.24.0, the one 5.x release checked, no longer has the option) keep
# only the key term,
# with no value term, and clip nothing: `distance_embedding` has $2M - 1$ rows for
# `max_position_embeddings` $M$, indexed by the offset the other way round, $i - j$
# (`position_ids_l - position_ids_r`), plus $M - 1$. A table trained there reads
# reversed here. The query positions are $0, 1, \dots$ without a cache, and the
# single position $k_{\mathrm{len}} - 1$ with one. That is right for a decode step
# of one token and wrong for every other query of a longer call with a cache. A
# BERT decoder (`is_decoder=True`) called with `use_cache=True` creates an empty
# cache on its first call (`BertEncoder.forward` in 4.57.6), so already its $n$
# prompt tokens all get the query position $n - 1$. `"relative_key_query"` adds a
# third term, the key against the same edge vector, $x_j W^K (a_{ij})^\top$
# (Huang et al. 2020). Both build the $(n, n, d_z)$ tensor and contract it with
# `einsum`. DeBERTa (He et al. 2021) goes one step further: its relative position
# vectors get their own query and key projections, giving a content-to-position
# and a position-to-content term.
#
# **posenc** follows the paper: offsets $j - i$, clipped, one table per
# `RelativePositionEmbedding` (two instances for $a^K$ and $a^V$), initialised from
# $N(0, 0.02^2)$ as Hugging Face initialises its distance table. The cell below
# checks `posenc` against tensor2tensor's index rule (a port) and against the row
# indices that transformers 4.57.6 itself looked up for $n = M = 6$ (captured
# with a hook on `distance_embedding`, in a separate environment): a Hugging Face
# table is a `posenc` table with its rows reversed. With `use_cache=True` on a
# decoder, the same call looked up one row of indices, the last row of the
# uncached lookup, broadcast to all six queries; `posenc`'s `rel(1, n)` gives that
# row for the one query of a decode step.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# **tensor2tensor**（`common_attention.py` の `dot_product_attention_relative`）は論文の参照実装です。
# 相対位置 $j - i$（`range_vec_k[None, :] - range_vec_q[:, None]`）を `max_relative_position` でクリップしてインデックスを作ります。
# 表ごと（キー用とバリュー用で、どちらもヘッド間で共有）に $(n, n, d_z)$ のテンソルを 1 つ gather し、
# 上の 2 項の形である `_relative_attention_inner` で掛け合わせます。
# 長さが異なるときは、`posenc` と同じく、クエリは系列の末尾側のトークンになります。
# 同じファイルには Music Transformer の形もあります。
# `dot_product_self_attention_relative_v2`（因果的な場合のみ）は、
# `_relative_position_to_absolute_position_masked` でスキューイングします。これは前の節で見たパディング、形状変換、切り出しの組み合わせです。
# その表（`get_relative_embeddings_left`）は、クエリより前のキーへの距離について `max_relative_position` 行を持ちます。
# 系列がそれより長いと、クリップせずに先頭へ 0 のベクトルをパディングするので、それより遠いキーには相対位置の項がまったく付きません。
# 双方向の `dot_product_unmasked_self_attention_relative_v2` は、
# `_relative_position_to_absolute_position_unmasked` でスキューイングします。これは解答 3 で確かめます。
#
# **Hugging Face** の transformers 4.x では、BERT 系モデルの `BertSelfAttention` に
# `position_embedding_type="relative_key"` というオプションがあります（4.57.6 で確認しました）。
# 5.x で確認したのは 5.24.0 だけですが、そこにはこのオプションはありません。
# このオプションで加わるのはキーの項だけで、バリューの項はなく、クリップもしません。
# `distance_embedding` は、`max_position_embeddings` を $M$ として $2M - 1$ 行あり、
# 逆向きの相対位置 $i - j$（`position_ids_l - position_ids_r`）に $M - 1$ を足したインデックスで引きます。
# そのため、Hugging Face で学習した表をここで使うと、行が逆順に読まれます。
# クエリの位置は、キャッシュがなければ $0, 1, \dots$、キャッシュがあれば 1 つの位置 $k_{\mathrm{len}} - 1$ です。
# 1 トークンのデコードの 1 ステップならこれで正しいのですが、キャッシュ付きで複数のトークンを一度に渡すと、最後以外のクエリの位置は誤りになります。
# BERT をデコーダ（`is_decoder=True`）として `use_cache=True` で呼ぶと、最初の呼び出しで空のキャッシュが作られます
# （4.57.6 の `BertEncoder.forward`）。
# そのため、最初の呼び出しの時点で、プロンプトの $n$ 個のトークンのクエリの位置がすべて $n - 1$ になってしまいます。
# `"relative_key_query"` はさらに 3 つ目の項として、同じ辺のベクトルとキーとの内積
# $x_j W^K (a_{ij})^\top$ を加えます（Huang ら 2020）。
# どちらも $(n, n, d_z)$ のテンソルを作り、`einsum` で縮約します。
# DeBERTa（He ら 2021）はさらに一歩進み、相対位置のベクトルに専用のクエリとキーの射影を持たせて、
# 内容から位置への項と、位置から内容への項を加えます。
#
# **posenc** は論文に従います。相対位置は $j - i$ で、クリップします。
# `RelativePositionEmbedding` 1 つが表 1 つです（$a^K$ と $a^V$ には 2 つのインスタンスを使います）。
# 初期値は、Hugging Face が距離の表を初期化するのと同じ $N(0, 0.02^2)$ です。
# 次のセルでは、`posenc` を tensor2tensor のインデックスの規則（移植）と比べます。
# さらに、transformers 4.57.6 自身が $n = M = 6$ で引いた行のインデックスとも比べます。
# これは別の環境で `distance_embedding` にフックを付けて記録したものです。
# こうして、Hugging Face の表が行を逆順にした `posenc` の表であることを確かめます。
# デコーダで `use_cache=True` とすると、同じ呼び出しで引かれたインデックスは 1 行だけで、
# それはキャッシュなしで引いた最後の行でした。この 1 行が 6 つのクエリすべてにブロードキャストされていました。
# デコードの 1 ステップのクエリ 1 つについては、`posenc` の `rel(1, n)` がその行を与えます。

# %%
n, d_z = 6, 4
max_pos = n  # Hugging Face's max_position_embeddings M; no clip for n <= M
rel = RelativePositionEmbedding(max_pos - 1, d_z)  # k = M - 1: 2M - 1 rows
with torch.no_grad():
    ours = rel(n, n)  # [n, n, d_z]


def t2t_index(length_q, length_k, max_relative_position):
    """tensor2tensor's _generate_relative_positions_matrix (no cache)."""
    range_vec_k = torch.arange(length_k)
    range_vec_q = range_vec_k[-length_q:]
    distance_mat = range_vec_k[None, :] - range_vec_q[:, None]
    k = max_relative_position
    return distance_mat.clamp(-k, k) + k


# the rows that transformers 4.57.6's BertSelfAttention (relative_key, M = 6)
# looked up in distance_embedding for 6 tokens: [i, j] = i - j + M - 1
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

# the same call on a decoder with use_cache=True (an empty cache is created):
# one row of indices for all six queries, hook output shape [1, 6]
hf_rows_cached = torch.tensor([[10, 9, 8, 7, 6, 5]])
assert torch.equal(hf_rows_cached, hf_rows[-1:])  # every query: the last one

for q_len in (1, 3, n):  # tensor2tensor's index is posenc's
    rows = rel.embedding.weight[t2t_index(q_len, n, max_pos - 1)]
    assert torch.equal(rows, rel(q_len, n))
hf_table = rel.embedding.weight.detach().flip(0)  # rows reversed
assert torch.equal(hf_table[hf_rows], ours)  # HF's lookup of the reversed table
assert not torch.equal(rel.embedding.weight.detach()[hf_rows], ours)
cached = hf_table[hf_rows_cached].expand(n, n, d_z)  # broadcast to 6 queries
with torch.no_grad():
    assert torch.equal(cached[-1:], rel(1, n))  # right for one decode query
wrong = [i for i in range(n) if not torch.equal(cached[i], ours[i])]
assert wrong == [0, 1, 2, 3, 4]  # the prompt's other queries

# %% [markdown] lang="en"
# ## What to remember
#
# - Shaw et al. add learned vectors for the clipped offset $j - i$ to the keys and
#   to the values inside attention: $2k + 1$ vectors per table, whatever the length.
# - Computed directly, the vectors of all pairs cost $n^2 d_z$ numbers per table;
#   the paper's two-term form avoids the $b\,h\,n^2 d_z$ product, and the distance
#   form ($P$ and $\beta$) never builds the pairs at all.
# - From distance $k$ on, a single layer sees the keys on each side as an unordered bag;
#   a second layer, and the edges of the sequence, give some order and some
#   absolute position back.
# - For a causal model, Music Transformer's skewing (a pad, a reshape and a slice)
#   lines up the scores per offset with the keys without an index; Transformer-XL
#   uses the same trick.
# - Implementations differ in sign and scope: tensor2tensor follows the paper,
#   Hugging Face's `relative_key` (transformers 4.x) indexes by $i - j$, clips
#   nothing and has no value term.

# %% [markdown] lang="ja"
# ## まとめ
#
# - Shaw らは、クリップした相対位置 $j - i$ ごとの学習可能なベクトルを、アテンションの内側でキーとバリューに足します。
#   表 1 つあたりのベクトルは、長さによらず $2k + 1$ 個です。
# - すべての組のベクトルを直接計算すると、表 1 つあたり $n^2 d_z$ 個の数が必要です。
#   論文の 2 項の形は $b\,h\,n^2 d_z$ の積を避け、距離ごとの形（$P$ と $\beta$）は組をまったく作りません。
# - 距離 $k$ 以上では、1 つの層から見ると両側のキーは順序のない集まりになります。
#   2 層目や系列の端からは、順序や絶対位置の手がかりがある程度戻ってきます。
# - 因果的なモデルなら、Music Transformer のスキューイング（パディング、形状変換、切り出し）で、
#   相対位置ごとのスコアをインデックスなしでキーにそろえられます。Transformer-XL も同じ工夫を使います。
# - 実装によって、相対位置の向きや、どの項をどこまで扱うかが違います。tensor2tensor は論文どおりで、
#   Hugging Face の `relative_key`（transformers 4.x）は $i - j$ で引き、クリップせず、バリューの項もありません。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Build a two-layer model with $k = 1$ and random weights. Find two inputs that differ
#    only in the order of the tokens beyond distance $1$ from query $i$ and give the same
#    $z_i$ after the first layer but different outputs after the second. Explain where the
#    order information came from.
# 2. Hugging Face's `relative_key_query` adds $x_j W^K (a_{ij})^\top$. Write it in the
#    distance form: which product replaces $P$, and which index replaces $c_{ij}$?
#    Check against the $(n, n, d_z)$ computation.
# 3. Skewing needs the offsets $-(n-1), \dots, 0$ only. For a bidirectional encoder the
#    offsets run from $-(n-1)$ to $n-1$. Extend $E^r$ to $2n - 1$ rows and find the pad
#    and reshape that give every entry exactly. (The chapter
#    [*Transformer-XL relative attention*](05-transformer-xl.ipynb) does this for
#    Transformer-XL.)
# 4. Relative attention still sees the edges of the sequence. With $k = 2$, compute
#    $\beta$ for every query of a sequence of length 10 and constant $\alpha$ (uniform
#    attention). Which queries can a second layer tell apart from $\beta$ alone?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $k = 1$、ランダムな重みで 2 層のモデルを作ってください。
#    クエリ $i$ から距離 $1$ より遠いトークンの順序だけが違い、1 層目の後の $z_i$ は同じなのに、
#    2 層目の後の出力は異なる 2 つの入力を見つけてください。順序の情報がどこから来たのかを説明してください。
# 2. Hugging Face の `relative_key_query` は $x_j W^K (a_{ij})^\top$ を加えます。
#    これを距離ごとの形で書いてください。どの積が $P$ の代わりになり、どのインデックスが $c_{ij}$ の代わりになるでしょうか。
#    $(n, n, d_z)$ のテンソルを使う計算と照合してください。
# 3. スキューイングに必要なのは、相対位置 $-(n-1), \dots, 0$ だけです。
#    双方向のエンコーダでは、相対位置は $-(n-1)$ から $n-1$ まであります。
#    $E^r$ を $2n - 1$ 行に広げ、すべての成分を正確に与えるパディングと形状変換を見つけてください。
#    [「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb)の章では、Transformer-XL についてこれを行います。
# 4. 相対アテンションにも、系列の端は見えます。$k = 2$ とし、長さ 10 の系列で $\alpha$ が一定
#    （一様なアテンション）のとき、すべてのクエリについて $\beta$ を計算してください。
#    2 層目は $\beta$ だけからどのクエリを区別できるでしょうか。

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
# 2 層目のクエリ 2 から見ても遠いキーは順序のない集まりのままですが、集まりの中身のベクトルが違うので、出力は動きます
# （この例では最大 0.095 です。どれだけ動くかは重みによります）。
# 順序の情報は、1 層目が各位置に書き込んだ近傍の様子を通って入ってきたのです。

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
    z, *_ = shaw_by_distance(x @ wq, x @ wk, x @ wv, tk, tv, k_clip)
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
# reversed row.) The cell checks it against the $(n, n, d_z)$ computation.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 3 つ目の項では、辺のベクトルと組むのはクエリではなくキーです。
# $P'_{jr} = x_j W^K\,(w_{r-k})^\top$ とすると $x_j W^K (a_{ij})^\top = P'_{j,\,c_{ij}}$ です。
# したがってキーごとに 1 行を持つ $P' = K (w)^\top$ が $P$ の代わりになり、
# インデックスは同じ $c_{ij}$ ですが、行 $i$ ではなく行 $j$ から読みます。つまり $P'^\top$ の行に沿った gather です。
# Hugging Face 自身の規約では、インデックスは逆順の行 $i - j + M - 1$ になります。
# 次のセルで、$(n, n, d_z)$ のテンソルを使う計算と照合します。

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
# $m = j - i + n - 1$. Pad one column of zeros on the left ($n \times 2n$), read the
# numbers as $2n \times n$, drop the first row ($n$ numbers), read the remaining
# $n(2n - 1)$ as $n \times (2n - 1)$ and keep the first $n$ columns. Entry
# $(i, j)$ is number $n + i(2n - 1) + j = 2n\,i + (n + j - i)$ of the padded rows,
# that is padded column $n + j - i$ of row $i$, which never runs past the end since
# $n + j - i \le 2n - 1$. It is column $n - 1 + j - i = m$ of $S$, for every pair.
# Without a memory and with all $n$ tokens as queries, this is the bidirectional
# case of the shift in
# [*Transformer-XL relative attention*](05-transformer-xl.ipynb#in-posenc), which
# uses $2n - 1$ distances, so `relative_shift(S, k_len=n)` gives the same.
# tensor2tensor's `_relative_position_to_absolute_position_unmasked` finds another
# answer: pad the zero column on the right, append $n - 1$ zeros to the flattened
# numbers, read them as $(n + 1) \times (2n - 1)$ and keep rows $0$ to $n - 1$ and
# columns $n - 1$ on. Entry $(i, j)$ is then number
# $i(2n - 1) + n - 1 + j = 2n\,i + (n - 1 + j - i)$, column $m$ of row $i$ again; the cell checks a port of it too.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** $E^r$ を $2n - 1$ 行（行 $m$ は相対位置 $m - (n - 1)$）にすると、
# $S = Q (E^r)^\top$ は $n \times (2n - 1)$ で、組 $(i, j)$ には列 $m = j - i + n - 1$ が必要です。
# 左に 0 の列を 1 つパディングし（$n \times 2n$）、数の並びを $2n \times n$ として読み、最初の行（$n$ 個の数）を捨てます。
# 残りの $n(2n - 1)$ 個を $n \times (2n - 1)$ として読み、最初の $n$ 列を残します。
# 成分 $(i, j)$ は、パディングした行の $n + i(2n - 1) + j = 2n\,i + (n + j - i)$ 番目の数です。
# つまり行 $i$ のパディング後の列 $n + j - i$ で、$n + j - i \le 2n - 1$ なので行の終わりを越えることはありません。
# これは $S$ の列 $n - 1 + j - i = m$ で、すべての組で正しい値です。
# これは、[「Transformer-XL の相対アテンション」](05-transformer-xl.ipynb#posenc-では)の章のシフトで、
# メモリがなく $n$ 個のトークンがすべてクエリになる双方向の場合にあたります。
# そのシフトは $2n - 1$ 個の距離を使うので、`relative_shift(S, k_len=n)` も同じ結果を返します。
# tensor2tensor の `_relative_position_to_absolute_position_unmasked` は別の方法を取ります。
# 0 の列を右にパディングし、平らに並べた数の後ろに 0 を $n - 1$ 個加え、$(n + 1) \times (2n - 1)$ として読みます。
# そして行 $0$ から $n - 1$ と、列 $n - 1$ 以降を残します。
# すると成分 $(i, j)$ は $i(2n - 1) + n - 1 + j = 2n\,i + (n - 1 + j - i)$ 番目の数で、やはり行 $i$ の列 $m$ です。
# セルでは、これを移植したものも確かめます。

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

# tensor2tensor's _relative_position_to_absolute_position_unmasked (a port)
flat = torch.cat([s3, torch.zeros(n, 1)], dim=1).reshape(-1)  # pad right
flat = torch.cat([flat, torch.zeros(n - 1)])  # n - 1 more zeros
t2t_skew = flat.reshape(n + 1, 2 * n - 1)[:n, n - 1 :]
assert_close(t2t_skew, want)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With uniform weights $\alpha_{ij} = 1/n$, $\beta_{ir}$ is the
# number of keys in bucket $r$ divided by $n$. The buckets are the offsets
# $\le -2$, $-1$, $0$, $+1$ and $\ge +2$; query $i$ has $\max(i - 1, 0)$ keys in the
# first and $\max(n - 2 - i, 0)$ in the last, so the first count grows and the last
# shrinks with $i$: all ten rows of $\beta$ differ, and a second layer can tell
# every query apart. The value term $\sum_r \beta_{ir} w^V_{r-k}$ carries it into
# $z_i$: with ten identical tokens, the outputs still differ by position whenever
# the $w^V_r$ are linearly independent.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** 重みが一様 $\alpha_{ij} = 1/n$ のとき、$\beta_{ir}$ はバケット $r$ のキーの数を $n$ で割った値です。
# バケットは相対位置 $\le -2$、$-1$、$0$、$+1$、$\ge +2$ の 5 つです。
# クエリ $i$ では、最初のバケットに $\max(i - 1, 0)$ 個、最後のバケットに $\max(n - 2 - i, 0)$ 個のキーが入ります。
# 最初の数は $i$ とともに増え、最後の数は減るので、$\beta$ の 10 行はすべて異なります。2 層目はどのクエリも区別できます。
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
z, _, alpha, beta_z = shaw_by_distance(
    same @ w_q, same @ w_k, same @ w_v, table_k, table_v, k_clip
)
assert_close(alpha, uniform)
assert_close(beta_z, beta)
assert len({tuple(row) for row in z.round(decimals=4).tolist()}) == n
print(counts.T)

# %% [markdown] lang="en"
# ## References
#
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019, §3.4.
#   <https://arxiv.org/abs/1809.04281>
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
# ## 参考文献
#
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019, §3.4.
#   <https://arxiv.org/abs/1809.04281>
# - tensor2tensor, `tensor2tensor/layers/common_attention.py`.
#   <https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/common_attention.py>
#   （`dot_product_attention_relative` と `_relative_attention_inner`。）
# - Hugging Face transformers 4.57.6, `modeling_bert.py`.
#   <https://github.com/huggingface/transformers/blob/v4.57.6/src/transformers/models/bert/modeling_bert.py>
#   （`BertSelfAttention` の `position_embedding_type`。）
# - Huang, Z., Liang, D., Xu, P., Xiang, B. (2020). *Improve Transformer Models with
#   Better Relative Position Embeddings*. Findings of EMNLP 2020.
#   <https://arxiv.org/abs/2009.13658>
# - He, P., Liu, X., Gao, J., Chen, W. (2021). *DeBERTa: Decoding-enhanced BERT with
#   Disentangled Attention*. ICLR 2021. <https://arxiv.org/abs/2006.03654>
