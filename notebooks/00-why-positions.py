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
# # Why attention needs positions
#
# Self-attention compares every token with every other token, but nothing in its
# formula says where a token sits. This chapter proves that, without positions,
# shuffling the tokens only shuffles the outputs, so that "dog bites man" and
# "man bites dog" look the same to the model; shows how a
# [causal mask](../docs/glossary.md#causal-mask) breaks the
# symmetry, but only partly; lists what a positional signal has to provide, each
# requirement backed by values that a code cell computes; checks that adding an
# encoding breaks the symmetry; and ends with a map of the encodings this site
# covers. Every claim is checked in code, mostly with `posenc.attention`. The
# symbols follow the
# [notation page](../docs/notation.md): $p$ is a position, $i$ and $j$ are the
# positions of a query and of a key.

# %% [markdown] lang="ja"
# # アテンションに位置が必要な理由
#
# セルフアテンションはすべてのトークンどうしを比べますが、
# その式のどこにも、トークンがどこにあるかは書かれていません。
# この章では、まず位置がなければトークンを並べ替えても出力が並べ替わるだけであることを証明します。
# そのため、モデルには "dog bites man" と "man bites dog" が同じに見えます。
# 次に、[因果マスク](../docs/glossary.ja.md#causal-mask)がこの対称性を壊すこと、ただし一部しか壊さないことを示します。
# さらに、位置の信号が満たすべき条件を挙げ、どの条件もコードが計算した値を示して裏付けます。
# 位置エンコーディングを足すと対称性が壊れることを確かめ、
# 最後にこのサイトで扱う位置エンコーディングの全体像を示します。
# 主張はすべてコードで確かめます。使うのはおもに `posenc.attention` です。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。$p$ は位置、$i$ と $j$ はクエリとキーの位置です。

# %%
import itertools
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from posenc import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention,
    sinusoidal,
)
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## Self-attention sees a set, not a sequence
#
# Put the $T$ token vectors in the rows of a matrix $X$ and project them to
# queries, keys and values, $Q = XW_Q$, $K = XW_K$, $V = XW_V$. With the score
# matrix $S = QK^\top/\sqrt{d}$, self-attention is
# $$\mathrm{Attn}(X) = \mathrm{softmax}(S)\,V$$
# where the softmax acts on each row. Reorder the tokens by a permutation $\pi$:
# the [permutation matrix](../docs/glossary.md#permutation-matrix) $P$ has
# $P_{i\pi(i)} = 1$ and zeros elsewhere, so that
# row $i$ of $PX$ is row $\pi(i)$ of $X$. Follow $PX$ through the formula.
#
# 1. The projections act on each row separately, so they commute with $P$:
#    $(PX)W_Q = PQ$, and likewise $PK$ and $PV$.
# 2. The scores become $PQ(PK)^\top/\sqrt{d} = PSP^\top$, whose entries are
#    $(PSP^\top)_{ij} = S_{\pi(i)\pi(j)}$: rows and columns are reordered together.
# 3. Row $i$ of the softmax divides $e^{S_{\pi(i)\pi(j)}}$ by
#    $\sum_j e^{S_{\pi(i)\pi(j)}} = \sum_l e^{S_{\pi(i)l}}$, the same sum in another order.
#    So the softmax commutes with the reordering:
#    $\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$.
# 4. A permutation matrix is orthogonal, $P^\top P = I$, so it cancels against the values.
#
# Together:
# $$\mathrm{softmax}\left(\frac{PQK^\top P^\top}{\sqrt{d}}\right)PV = P\,\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d}}\right)V, \qquad \mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# Shuffling the tokens shuffles the outputs in the same way and changes nothing
# else: self-attention is
# [permutation-equivariant](../docs/glossary.md#permutation-equivariant). The cell
# below checks each step
# for one permutation, then the result for all $6! = 720$ permutations of six tokens.
# It works in float64, so that "the same" means equal up to rounding.

# %% [markdown] lang="ja"
# ## セルフアテンションが見ているのは系列ではなく集合
#
# $T$ 個のトークンベクトルを行列 $X$ の各行に並べ、
# クエリ、キー、バリュー $Q = XW_Q$、$K = XW_K$、$V = XW_V$ に射影します。
# スコア行列を $S = QK^\top/\sqrt{d}$ とすると、セルフアテンションは次の式です。
# $$\mathrm{Attn}(X) = \mathrm{softmax}(S)\,V$$
# softmax は行ごとにかかります。ここでトークンを置換 $\pi$ で並べ替えます。
# [置換行列](../docs/glossary.ja.md#permutation-matrix) $P$ は $P_{i\pi(i)} = 1$ でそれ以外が 0 の行列で、
# $PX$ の第 $i$ 行は $X$ の第 $\pi(i)$ 行になります。$PX$ を式に通してみましょう。
#
# 1. 射影は行ごとに独立して働くので、$P$ と交換できます。
#    $(PX)W_Q = PQ$ で、$PK$ と $PV$ も同様です。
# 2. スコアは $PQ(PK)^\top/\sqrt{d} = PSP^\top$ になります。
#    成分は $(PSP^\top)_{ij} = S_{\pi(i)\pi(j)}$ で、行と列が同じように並べ替わります。
# 3. softmax の第 $i$ 行は $e^{S_{\pi(i)\pi(j)}}$ を
#    $\sum_j e^{S_{\pi(i)\pi(j)}} = \sum_l e^{S_{\pi(i)l}}$ で割ります。これは同じ和を別の順に足しただけです。
#    したがって softmax も並べ替えと交換できます。
#    $\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$ です。
# 4. 置換行列は直交行列で $P^\top P = I$ なので、softmax の右側に残った置換行列の転置は、バリューに掛かる置換行列と打ち消し合います。
#
# まとめると次のようになります。
# $$\mathrm{softmax}\left(\frac{PQK^\top P^\top}{\sqrt{d}}\right)PV = P\,\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d}}\right)V, \qquad \mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# トークンを並べ替えると、出力が同じように並べ替わるだけで、ほかは何も変わりません。
# セルフアテンションのこの性質を[置換同変](../docs/glossary.ja.md#permutation-equivariant)（permutation-equivariant）と呼びます。
# 次のセルでは、1 つの置換について各ステップを確かめ、
# 続いて 6 個のトークンの $6! = 720$ 通りすべての置換について結果を確かめます。
# 計算は float64 で行うので、「同じ」とは丸め誤差の範囲で等しいという意味です。

# %%
T, d = 6, 8
f64 = torch.float64
x = torch.randn(T, d, dtype=f64)  # rows are tokens
w_q, w_k, w_v = (torch.randn(d, d, dtype=f64) / math.sqrt(d) for _ in range(3))


def self_attention(x, **kwargs):
    """Attn(X) = softmax(X W_Q (X W_K)^T / sqrt(d) + bias) X W_V; x: [T, d]."""
    return attention(x @ w_q, x @ w_k, x @ w_v, **kwargs)


def permutation_matrix(perm):
    """P with P[i, perm[i]] = 1, so that row i of P X is row perm[i] of X."""
    return torch.eye(len(perm), dtype=f64)[perm]


perm = torch.tensor([3, 0, 5, 1, 4, 2])  # pi, 0-based; any permutation works
P = permutation_matrix(perm)
q, k, v = x @ w_q, x @ w_k, x @ w_v
s = q @ k.T / math.sqrt(d)  # S = Q K^T / sqrt(d)
close = torch.testing.assert_close

close(P @ x, x[perm])  # row i of PX is row pi(i) of X
# step 1: (PX) W_Q = PQ
close((P @ x) @ w_q, P @ q)
# step 2: PQ (PK)^T / sqrt(d) = P S P^T, entries S_pi(i)pi(j)
close((P @ q) @ (P @ k).T / math.sqrt(d), P @ s @ P.T)
close(P @ s @ P.T, s[perm][:, perm])
# step 3: softmax(P S P^T) = P softmax(S) P^T
close(torch.softmax(P @ s @ P.T, -1), P @ torch.softmax(s, -1) @ P.T)
# step 4: P^T P = I
close(P.T @ P, torch.eye(T, dtype=f64))
# the result: Attn(PX) = P Attn(X)
close(attention(P @ q, P @ k, P @ v), P @ attention(q, k, v))

# Attn(PX) = P Attn(X) for every permutation of the six tokens, in one batch
perms = torch.tensor(list(itertools.permutations(range(T))))  # [720, T]
close(self_attention(x[perms]), self_attention(x)[perms])
count = len(perms)
print(
    f"Attn(PX) = P Attn(X) for all {count} permutations of {T} tokens", end=""
)

# %% [markdown] lang="en"
# ## The attention matrix travels with its tokens
#
# The weights $A = \mathrm{softmax}(S)$ show the same thing as a picture. On the left is
# $A$ for the six tokens $x_1, \dots, x_6$ (rows: queries, columns: keys). On the right
# the same tokens come in another order, and the weights are computed afresh from
# $PX$. Every number reappears, attached to the same pair of tokens: the right panel
# is $PAP^\top$, the left one with rows and columns reordered together. Nothing in the
# weights depends on where a token is, only on which tokens meet.

# %% [markdown] lang="ja"
# ## アテンション行列はトークンと一緒に動く
#
# 重み $A = \mathrm{softmax}(S)$ を図にすると、同じことが目で見て分かります。
# 左は 6 個のトークン $x_1, \dots, x_6$ の $A$ です（行がクエリ、列がキー）。
# 右は同じトークンを別の順に並べ、$PX$ から重みを計算し直したものです。
# どの数値も、同じトークンの組に付いたまま現れます。
# 右の図は $PAP^\top$、つまり左の図の行と列を同じように並べ替えたものです。
# 重みはトークンがどこにあるかには左右されず、どのトークンどうしが出会うかだけで決まります。


# %% alt={"en": ["Two heatmaps of attention weights for six tokens, queries down and keys across, each cell labelled with its weight. The right one, for the tokens in another order, holds the same numbers with rows and columns reordered together."], "ja": ["6 個のトークンのアテンションの重みを、行をクエリ、列をキーとして数値入りで示した 2 つのヒートマップ。右はトークンを別の順に並べたもので、同じ数値が、行と列を同じように並べ替えた位置に現れます。"]}
def attention_weights(x):
    """A = softmax(X W_Q (X W_K)^T / sqrt(d)); x: [T, d] -> [T, T]."""
    return torch.softmax((x @ w_q) @ (x @ w_k).T / math.sqrt(d), dim=-1)


a = attention_weights(x)
a_perm = attention_weights(x[perm])
torch.testing.assert_close(a_perm, P @ a @ P.T)  # A(PX) = P A P^T

fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.4))
panels = [(a, torch.arange(T), "$A$"), (a_perm, perm, r"$PAP^\top$")]
for ax, (mat, order, title) in zip(axes, panels, strict=True):
    ax.imshow(
        mat.numpy(),
        cmap="viridis",
        vmin=0,
        vmax=float(a.max()),
        interpolation="nearest",
    )
    labels = [f"$x_{int(t) + 1}$" for t in order]
    ax.set_xticks(range(T), labels)
    ax.set_yticks(range(T), labels)
    ax.tick_params(length=0)
    ax.grid(False)
    for i in range(T):
        for j in range(T):
            value = float(mat[i, j])
            color = "black" if value > 0.6 * float(a.max()) else "white"
            ax.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color=color,
            )
    ax.set_xlabel("$k$")
    ax.set_ylabel("$q$")
    ax.set_title(title)
plt.show()

# %% [markdown] lang="en"
# ## Dog bites man
#
# A worked example with three token embeddings. Let $x_{\mathrm{dog}}$,
# $x_{\mathrm{bites}}$ and $x_{\mathrm{man}}$ be random vectors, and stack them in two
# orders: "dog bites man" and "man bites dog". The second sentence is $PX$ for the
# $P$ that swaps the first and the last row. Equivariance then says three things.
#
# - "bites" stays in the middle, so its output is the same vector in both sentences:
#   the verb cannot tell who bit whom.
# - "dog" gets the same output whether it is the subject or the object; it only
#   appears in another row.
# - Any summary that ignores the order of the rows is the same for both sentences.
#   Mean pooling is one: with $\mathbf{1}$ the vector of ones, each column of $P$ holds
#   a single one, so $\mathbf{1}^\top P = \mathbf{1}^\top$ and
#   $$\frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(PX) = \frac{1}{T}\mathbf{1}^\top P\,\mathrm{Attn}(X) = \frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(X)$$
#   The pooled output is
#   [permutation-invariant](../docs/glossary.md#permutation-invariant). Sums and
#   maxima over the tokens
#   are too.
#
# Reading out a classification token, as BERT does, is no escape. Put a token
# $x_{\mathrm{cls}}$ first in both sentences: the permutation keeps it in place, so its
# output is again identical. A model without positions is a bag-of-words model,
# however many layers it has: the
# [residual connections](../docs/glossary.md#residual-connection), the
# [layer norms](../docs/glossary.md#layer-normalisation) and the
# feed-forward layers act on each row separately and commute with $P$ too (the
# section [How libraries differ](#how-libraries-differ) checks a full PyTorch
# encoder layer, and exercise 1 proves it).

# %% [markdown] lang="ja"
# ## 犬が人をかむ
#
# 3 つのトークンの埋め込みで具体的に計算してみます。
# $x_{\mathrm{dog}}$、$x_{\mathrm{bites}}$、$x_{\mathrm{man}}$ をランダムなベクトルとし、
# "dog bites man"（犬が人をかむ）と "man bites dog"（人が犬をかむ）の 2 通りの順に、行として並べます。
# 2 つ目の文は、最初と最後の行を入れ替える $P$ を使って $PX$ と書けます。
# 置換同変から、次の 3 つのことが言えます。
#
# - "bites" はどちらの文でも真ん中にあるので、出力は両方の文でまったく同じベクトルです。
#   動詞には、誰が誰をかんだのかが分かりません。
# - "dog" の出力は主語と目的語のどちらの場合も同じになり、現れる行が違うだけです。
# - 行の順序を無視する要約は、両方の文で同じになります。平均プーリングがその例です。
#   $\mathbf{1}$ を全成分が 1 のベクトルとすると、$P$ の各列には 1 がちょうど 1 つあるので
#   $\mathbf{1}^\top P = \mathbf{1}^\top$ となり、次が成り立ちます。
#   $$\frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(PX) = \frac{1}{T}\mathbf{1}^\top P\,\mathrm{Attn}(X) = \frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(X)$$
#   プーリングした出力は[置換不変](../docs/glossary.ja.md#permutation-invariant)（permutation-invariant）です。トークンについての和や最大値も同じです。
#
# BERT のように分類用トークンの出力を使っても、この問題は避けられません。
# 両方の文の先頭にトークン $x_{\mathrm{cls}}$ を置くと、置換はそれを動かさないので、その出力もやはり同じです。
# 位置のないモデルは、層をいくつ重ねても bag-of-words（語順を無視した単語の集まり）のモデルです。
# [残差接続](../docs/glossary.ja.md#residual-connection)、[層正規化](../docs/glossary.ja.md#layer-normalisation)、フィードフォワード層はどれも行ごとに働くので、やはり $P$ と交換できます。
# PyTorch のエンコーダ層全体については「[ライブラリによる違い](#ライブラリによる違い)」の節で確かめ、証明は演習 1 で扱います。

# %%
vocab = {
    word: torch.randn(d, dtype=f64) for word in ("cls", "dog", "bites", "man")
}


def embed(sentence):
    return torch.stack([vocab[word] for word in sentence.split()])  # [T, d]


x_dbm, x_mbd = embed("dog bites man"), embed("man bites dog")
swap = permutation_matrix(torch.tensor([2, 1, 0]))
# man bites dog = P (dog bites man)
torch.testing.assert_close(x_mbd, swap @ x_dbm)

y_dbm, y_mbd = self_attention(x_dbm), self_attention(x_mbd)
torch.testing.assert_close(y_mbd, swap @ y_dbm)  # Attn(PX) = P Attn(X)
torch.testing.assert_close(y_mbd[1], y_dbm[1])  # "bites": the same output
# "dog": the same output, another row
torch.testing.assert_close(y_mbd[2], y_dbm[0])
ones = torch.ones(3, dtype=f64)
torch.testing.assert_close(ones @ swap, ones)  # 1^T P = 1^T
# mean pooling: invariant
torch.testing.assert_close(y_mbd.mean(0), y_dbm.mean(0))
# max pooling: invariant
torch.testing.assert_close(y_mbd.amax(0), y_dbm.amax(0))

# a classification token in front stays in place: its output is identical too
cls_dbm = self_attention(embed("cls dog bites man"))[0]
cls_mbd = self_attention(embed("cls man bites dog"))[0]
torch.testing.assert_close(cls_mbd, cls_dbm)


def fmt(vec):
    return " ".join(f"{value:+.3f}" for value in vec.tolist())


print(
    f"dog bites man, mean: {fmt(y_dbm.mean(0))}\n"
    f"man bites dog, mean: {fmt(y_mbd.mean(0))}",
    end="",
)

# %% [markdown] lang="en"
# ## A causal mask breaks the symmetry, partly
#
# A decoder lets token $i$ attend only to tokens $j \le i$. It adds a mask $M$ to the
# scores, $M_{ij} = 0$ for $j \le i$ and $M_{ij} = -\infty$ for $j > i$, and computes
# $\mathrm{Attn}_M(X) = \mathrm{softmax}(S + M)\,V$. The mask is attached to the
# positions, not to the tokens, so it does not move when the tokens do. Since
# $M = P(P^\top M P)P^\top$, the steps above give
# $$\mathrm{Attn}_M(PX) = \mathrm{softmax}\big(P(S + P^\top M P)P^\top\big)PV = P\,\mathrm{Attn}_{P^\top M P}(X)$$
# The shuffled sentence behaves like the original one under a shuffled mask. If
# $P^\top M P = M$, the outputs would be a mere permutation, whatever the tokens.
# For the triangular mask that holds only for the identity: a token's set of
# visible tokens changes when it moves. This removes the guarantee, but it does
# not prove on its own that the outputs change: two different masks can give
# the same outputs for some inputs (if all tokens are equal, for instance). So
# the cell measures it. It checks the identity, counts the permutations that
# keep $M$ (one of 720), and for each of the 719 others computes how far the
# outputs of these random tokens are from a permutation; it prints the smallest
# of these gaps.
#
# The break is partial. Within one layer, the output at position $i$ is still a
# weighted sum over the set of tokens at positions $j \le i$: shuffling the tokens
# before position $i$ leaves it unchanged. Only a second layer, whose inputs at earlier
# positions now differ, sees such a shuffle.
#
# The mask is itself positional information. Let a first token (a
# [beginning-of-sequence marker](../docs/glossary.md#beginning-of-sequence-token)) carry a value feature equal to $1$, all other tokens $0$, and let the
# queries be zero, so that every visible token gets the same weight. Token $p$
# (counting from $p = 0$) sees $p + 1$ tokens, and its output feature is
# $$\frac{1}{p+1}$$
# a code of its absolute position, made by the mask alone. Haviv et al. (2022)
# found by probing that causal language models without any positional encoding
# learn absolute positions and come close to the perplexity of models with one,
# while masked language models, whose attention is
# [bidirectional](../docs/glossary.md#bidirectional), do much worse without
# positions: the mask makes the difference. Kazemnejad et al. (2023, theorem 1)
# prove that a first layer can recover absolute positions, with a construction
# that likewise rests on the causal mask and a beginning-of-sequence token; the
# chapter [*xPos and NoPE*](10-xpos-nope.ipynb) builds on this.

# %% [markdown] lang="ja"
# ## 因果マスクは対称性を壊す（ただし一部だけ）
#
# デコーダでは、トークン $i$ はトークン $j \le i$ にしかアテンションを向けられません。
# そのため、スコアにはマスク $M$ を足します。$j \le i$ なら $M_{ij} = 0$、$j > i$ なら $M_{ij} = -\infty$ で、
# $\mathrm{Attn}_M(X) = \mathrm{softmax}(S + M)\,V$ を計算します。
# マスクが結び付いているのはトークンでなく位置です。そのため、トークンが動いてもマスクは動きません。
# $M = P(P^\top M P)P^\top$ と書けるので、先ほどのステップから次が得られます。
# $$\mathrm{Attn}_M(PX) = \mathrm{softmax}\big(P(S + P^\top M P)P^\top\big)PV = P\,\mathrm{Attn}_{P^\top M P}(X)$$
# 並べ替えた文は、並べ替えたマスクのもとでの元の文と同じふるまいをします。
# もし $P^\top M P = M$ なら、トークンが何であっても出力は単なる並べ替えになります。
# しかし三角形のマスクでこれが成り立つのは恒等置換だけです。
# トークンが動くと、そのトークンから見えるトークンの集合が変わるからです。
# これで「並べ替えになる」という保証はなくなりますが、それだけで出力が変わると証明できたわけではありません。
# 異なるマスクでも、入力によっては同じ出力になることがあるからです（たとえば、すべてのトークンが等しいとき）。
# そこで実際に測ります。次のセルでは、まずこの等式を確かめ、$M$ を保つ置換を数えます（720 通りのうち 1 つ）。
# 続いて残りの 719 通りそれぞれについて、このランダムなトークンの出力が並べ替えからどれだけずれるかを計算し、
# そのずれの最小値を表示します。
#
# ただし、壊れるのは一部だけです。1 層の中では、位置 $i$ の出力は依然として
# 位置 $j \le i$ にあるトークンの集合についての重み付き和です。
# 位置 $i$ より前のトークンを並べ替えても、この出力は変わりません。
# その並べ替えに気づけるのは、前の位置の入力がすでに変わっている 2 層目からです。
#
# マスクそのものが位置の情報を持っています。先頭のトークン（系列の始まりを示す [BOS トークン](../docs/glossary.ja.md#beginning-of-sequence-token)）だけは
# バリューの特定の 1 次元が $1$ で、ほかのトークンではその次元が $0$ だとします。
# さらにクエリを 0 にして、見えるトークンすべてに同じ重みが付くようにします。
# $p = 0$ から数えてトークン $p$ には $p + 1$ 個のトークンが見えるので、出力のその次元の値は次のとおりです。
# $$\frac{1}{p+1}$$
# これはマスクだけから作られた、絶対位置の符号です。
# Haviv ら（2022）は、位置エンコーディングをまったく持たない因果的な言語モデルが絶対位置を学習していることを、
# プロービングで示しました。そうしたモデルのパープレキシティは、位置エンコーディングを持つモデルに迫ります。
# 一方、アテンションが[双方向](../docs/glossary.ja.md#bidirectional)のマスク言語モデルでは、位置がないと性能が大きく落ちます。
# 違いを生むのはマスクです。
# Kazemnejad ら（2023、定理 1）は、最初の層が絶対位置を復元できることを証明しています。
# その構成も、同じように因果マスクと系列の先頭のトークンを使います。
# 「[xPos と NoPE](10-xpos-nope.ipynb)」の章では、この結果を出発点にします。

# %%
# query i sees key j iff j <= i
allowed = torch.ones(T, T, dtype=torch.bool).tril()
mask = torch.zeros(T, T, dtype=f64).masked_fill(~allowed, -math.inf)  # M
torch.testing.assert_close(
    self_attention(x, bias=mask), self_attention(x, causal=True)
)

inv = torch.argsort(perm)  # pi^-1
finite = torch.randn(T, T, dtype=f64)
# (P^T F P)_ij = F_pi^-1(i) pi^-1(j) for a finite F;
# for M we index instead (0 * inf is nan)
torch.testing.assert_close(P.T @ finite @ P, finite[inv][:, inv])
moved = mask[inv][:, inv]  # P^T M P
assert torch.equal(moved[perm][:, perm], mask)  # M = P (P^T M P) P^T
# Attn_M(PX) = P Attn_{P^T M P}(X)
torch.testing.assert_close(
    self_attention(x[perm], causal=True), P @ self_attention(x, bias=moved)
)

# only the identity keeps the triangular mask
keep = [
    p
    for p in itertools.permutations(range(T))
    if torch.equal(allowed[list(p)][:, list(p)], allowed)
]
assert keep == [tuple(range(T))]

# the 719 other permutations all move the outputs of these tokens
others = perms[1:]  # itertools lists the identity first
assert torch.equal(perms[0], torch.arange(T))
causal_out = self_attention(x, causal=True)
moved_out = self_attention(x[others], causal=True)  # [719, T, d]
gaps = (moved_out - causal_out[others]).abs().amax(dim=(1, 2))
gap = float(gaps.min())
assert len(gaps) == 719 and gap > 1e-3

# partial: one layer is blind to a shuffle of the tokens before position 4
# shuffles positions 0..3, keeps 4 and 5
prefix = torch.tensor([2, 0, 3, 1, 4, 5])
one = self_attention(x, causal=True)
one_shuffled = self_attention(x[prefix], causal=True)
torch.testing.assert_close(one_shuffled[4:], one[4:])
two = self_attention(one, causal=True)  # a second layer sees it
two_shuffled = self_attention(one_shuffled, causal=True)
assert not torch.allclose(two_shuffled[4:], two[4:], atol=1e-3)

# the mask alone counts: a marker feature on the first token, uniform weights
n = 6
values = torch.zeros(n, 1, dtype=f64)
values[0, 0] = 1.0  # only the first token carries the feature
zero_q = torch.zeros(n, d, dtype=f64)
# irrelevant: zero queries give equal scores
keys = torch.randn(n, d, dtype=f64)
counted = attention(zero_q, keys, values, causal=True)[:, 0]
# 1 / (p + 1)
torch.testing.assert_close(counted, 1 / torch.arange(1, n + 1, dtype=f64))
torch.testing.assert_close(
    attention(zero_q, keys, values)[:, 0], torch.full((n,), 1 / n, dtype=f64)
)

print(
    f"permutations that keep M: {len(keep)} of {math.factorial(T)}\n"
    f"smallest max |Attn_M(PX) - P Attn_M(X)| over 719: {gap:.4f}\n"
    f"marker feature, causal, p = 0..{n - 1}: {fmt(counted)}",
    end="",
)

# %% [markdown] lang="en"
# ## What a positional signal must give
#
# So the model needs to be told where each token is, and the simplest way is to
# add a vector $PE(p)$ to the token at position $p$. What should $PE$ look like? Each
# requirement below comes with values printed by the cell that follows it. The
# candidates are the raw index ($PE(p) = p$ in one feature), the index normalised by
# the length ($p/L$), a [one-hot vector](../docs/glossary.md#one-hot-vector) over a
# fixed maximum length, and the
# sinusoids of the chapter
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb).
#
# **Bounded values.** Token embeddings have a fixed scale: with entries drawn from
# a standard normal in $d = 64$ dimensions their norm is close to $\sqrt{d} = 8$ (8.96 and
# 7.25 for the two tokens below). The raw
# index grows without limit and swamps them. At $p = 1000$ two different tokens at the
# same position point in almost the same direction (cosine similarity 0.9999, as
# printed): the position is all the model sees. The sinusoids have norm
# $\sqrt{d/2}$ at every position.
#
# The scale $\sqrt{d}$ of these tokens is the one the Transformer's tokens have.
# Vaswani et al. (2017, §3.4) multiply the embeddings by $\sqrt{d_{\text{model}}}$;
# fairseq draws them with standard deviation $d^{-1/2}$ (`Embedding` in
# `transformer_base.py`) and multiplies by $\sqrt{d}$ (`embed_scale` in
# `transformer_encoder.py` and `transformer_decoder.py`), so the token norms are
# again about $\sqrt{d}$. labml multiplies too, and its embedding classes
# (`EmbeddingsWithPositionalEncoding` and `EmbeddingsWithLearnedPositionalEncoding`
# in `models.py`) keep PyTorch's $N(0, 1)$ start, which gives norms near $d$. Those
# of its training experiments that use these classes keep that start too, except
# the GPT experiment (below): they pass
# `c.transformer.src_embed` (by default an `EmbeddingsWithPositionalEncoding`) into
# models of their own, as `basic/autoregressive_experiment.py` and the `aft`,
# `fnet`, `glu_variants`, `mlm` and `knn` experiments do (the RoPE and ALiBi
# experiments choose `no_pos`, a plain `nn.Embedding` without the factor). The GPT
# experiment (`gpt/__init__.py`) is the exception: it redraws every embedding and
# linear weight with standard deviation $0.02$, so a row's norm is about
# $0.02\sqrt{d}$ and, times $\sqrt{d}$, the token norms are near $0.02\,d$
# ($10.2$ for its $d = 512$). Xavier initialisation comes in only when a model is
# built through the `encoder_decoder` option of `TransformerConfigs` (`configs.py`),
# which returns labml's `EncoderDecoder` (`models.py`); none of the experiments
# uses that option. `EncoderDecoder` re-initialises with `xavier_uniform_` every
# parameter with two or more axes (every matrix, for instance). For the
# $n_{\text{vocab}} \times d$ embedding table this draws each entry uniformly from
# $[-a, a]$ with $a = \sqrt{6/(n_{\text{vocab}} + d)}$, so its variance is
# $a^2/3 = 2/(n_{\text{vocab}} + d)$. A row $e_{\text{tok}}$ of the table (one
# token's embedding) has $d$ entries, and once multiplied by $\sqrt{d}$ its
# squared norm is about $d \cdot d \cdot 2/(n_{\text{vocab}} + d)$:
# $$\lVert \sqrt{d}\, e_{\text{tok}} \rVert \approx d\sqrt{\frac{2}{n_{\text{vocab}} + d}}$$
# That is $22.6 = \sqrt{d}$ for $n_{\text{vocab}} = d = 512$ and $4.0$ for
# $n_{\text{vocab}} = 32000$, $d = 512$; both far below the $d = 512$ of the
# $N(0, 1)$ start. The cell illustrates these scales on random draws and on
# PyTorch's own `xavier_uniform_`; it does not run fairseq's or labml's code, and
# the facts above come from the files named (labml's are under
# `labml_nn/transformers/`). The section
# [How loud is the positional signal?](03-learned-embeddings.ipynb#how-loud-is-the-positional-signal)
# of the chapter *Learned absolute embeddings and scaled sinusoids* measures
# these ratios.

# %% [markdown] lang="ja"
# ## 位置の信号が満たすべき条件
#
# つまりモデルには、各トークンがどこにあるかを教える必要があります。
# いちばん簡単な方法は、位置 $p$ のトークンにベクトル $PE(p)$ を足すことです。
# では $PE$ はどんな形であるべきでしょうか。以下の各条件には、直後のセルで計算した数値を添えます。
# 候補は 4 つです。位置の番号そのもの（1 つの次元に $PE(p) = p$ を入れる）、長さで正規化した番号（$p/L$）、
# あらかじめ決めた最大長を次元数とする [one-hot ベクトル](../docs/glossary.ja.md#one-hot-vector)、
# そして「[正弦波位置エンコーディング](01-sinusoidal.ipynb)」の章の正弦波です。
#
# **値が有界であること。** トークンの埋め込みには決まった大きさがあります。
# 成分を標準正規分布から引いた $d = 64$ 次元のベクトルなら、ノルムは $\sqrt{d} = 8$ に近くなります（下の 2 つのトークンでは 8.96 と 7.25）。
# 位置の番号そのものは際限なく大きくなり、埋め込みをかき消してしまいます。
# $p = 1000$ では、同じ位置にある 2 つの異なるトークンがほぼ同じ向きを指します
# （出力のとおり、コサイン類似度は 0.9999）。モデルに見えるのは位置だけになります。
# 正弦波は、どの位置でもノルムが $\sqrt{d/2}$ です。
#
# ここでのトークンのノルム $\sqrt{d}$ は、実際の Transformer のトークンと同じ大きさです。
# Vaswani ら（2017、§3.4）は埋め込みに $\sqrt{d_{\text{model}}}$ を掛けます。
# fairseq は埋め込みを標準偏差 $d^{-1/2}$ で引き、それに $\sqrt{d}$ を掛けるので、トークンのノルムはやはり $\sqrt{d}$ 前後になります。
# 初期化は `transformer_base.py` の `Embedding` に、掛け算は `transformer_encoder.py` と `transformer_decoder.py` の `embed_scale` にあります。
# labml も埋め込みに同じ係数を掛けます。
# labml の埋め込み用のクラス（`models.py` の `EmbeddingsWithPositionalEncoding` と `EmbeddingsWithLearnedPositionalEncoding`）は、PyTorch の既定の $N(0, 1)$ による初期値をそのまま使うので、ノルムは $d$ 前後になります。
# 学習用の実験でも、これらのクラスを使うものは、後で述べる GPT の実験を除いて、この初期値のまま学習を始めます。
# それらの実験は `c.transformer.src_embed`（既定では `EmbeddingsWithPositionalEncoding`）を独自のモデルに渡します。
# `basic/autoregressive_experiment.py` の実験や、`aft`、`fnet`、`glu_variants`、`mlm`、`knn` の実験がその例です
# （RoPE と ALiBi の実験は `no_pos` を選び、係数を掛けない素の `nn.Embedding` を使います）。
# 例外は GPT の実験（`gpt/__init__.py`）です。
# この実験は埋め込みと線形層の重みをすべて標準偏差 $0.02$ で引き直すので、1 行のノルムはおよそ $0.02\sqrt{d}$ になり、
# $\sqrt{d}$ を掛けたトークンのノルムは $0.02\,d$ 前後になります（この実験の $d = 512$ では $10.2$）。
# Xavier の初期化が使われるのは、`TransformerConfigs` の `encoder_decoder` オプション（`configs.py`）でモデルを組み立てたときだけです。
# このオプションは labml の `EncoderDecoder`（`models.py`）を返しますが、どの実験もこのオプションを使いません。
# `EncoderDecoder` は、組み立てのあとで、軸が 2 つ以上あるパラメータ（行列など）をすべて `xavier_uniform_` で初期化し直します。
# $n_{\text{vocab}} \times d$ の埋め込みの表では、各成分を $a = \sqrt{6/(n_{\text{vocab}} + d)}$ として $[-a, a]$ の一様分布から引くので、
# 分散は $a^2/3 = 2/(n_{\text{vocab}} + d)$ です。
# 表の 1 行 $e_{\text{tok}}$（1 つのトークンの埋め込み）には成分が $d$ 個あり、$\sqrt{d}$ を掛けたあとのノルムの 2 乗はおよそ $d \cdot d \cdot 2/(n_{\text{vocab}} + d)$ です。
# したがって、ノルムは次のようになります。
# $$\lVert \sqrt{d}\, e_{\text{tok}} \rVert \approx d\sqrt{\frac{2}{n_{\text{vocab}} + d}}$$
# $n_{\text{vocab}} = d = 512$ なら $22.6 = \sqrt{d}$ です。$d = 512$ で $n_{\text{vocab}} = 32000$ なら $4.0$ です。
# どちらも、$N(0, 1)$ から始めたときのノルム $d = 512$ を大きく下回ります。
# セルでは、これらの大きさを、ランダムに引いた値と、PyTorch の `xavier_uniform_` を実際に呼んだ結果で例示するだけです。fairseq や labml のコードは実行しません。
# ここまでの記述は、上に挙げたファイル（labml のものは `labml_nn/transformers/` の下）のコードに基づいています。
# これらの比は、「学習型位置埋め込みとスケール付き正弦波」の章の
# 「[位置の信号はどれくらい大きいか](03-learned-embeddings.ipynb#位置の信号はどれくらい大きいか)」の節で測ります。

# %%
d64 = 64
# its own generator: the quoted norms stay put
gen = torch.Generator().manual_seed(0)
tok_a, tok_b = torch.randn(2, d64, dtype=f64, generator=gen)


def raw_index(p, dim=d64):
    """The raw index as one feature: PE(p) = (p, 0, ..., 0)."""
    code = torch.zeros(dim, dtype=f64)
    code[0] = p
    return code


lines = [f"token norms: {tok_a.norm():.2f}, {tok_b.norm():.2f}"]
for p in (0, 10, 1000):
    pe = raw_index(p)
    cos = F.cosine_similarity(tok_a + pe, tok_b + pe, dim=0)
    lines.append(
        f"raw index, p = {p:4d}: |PE(p)| = {pe.norm():6.1f}, "
        f"cos(x_a + PE, x_b + PE) = {cos:.4f}"
    )
sin_norms = sinusoidal(torch.tensor([0, 10, 1000, 10**6]), d64, dtype=f64).norm(
    dim=-1
)
# sqrt(d/2)
torch.testing.assert_close(
    sin_norms, torch.full((4,), math.sqrt(d64 / 2), dtype=f64)
)
lines.append(f"sinusoidal, p = 0, 10, 1000, 10**6: |PE(p)| = {fmt(sin_norms)}")
assert (
    F.cosine_similarity(tok_a + raw_index(1000), tok_b + raw_index(1000), dim=0)
    > 0.9999
)
# an illustration, not a check of either library: the norms of
# N(0, 1/d) * sqrt(d) draws (as in fairseq) and of N(0, 1) * sqrt(d)
# (labml's embedding classes, kept by its experiments other than GPT)
gen_scale = torch.Generator().manual_seed(1)
draws = torch.randn(2, 1000, d64, generator=gen_scale, dtype=f64)
fairseq_tok = draws[0] * d64**-0.5 * math.sqrt(d64)
labml_tok = draws[1] * math.sqrt(d64)
assert abs(fairseq_tok.norm(dim=-1).mean() - math.sqrt(d64)) < 0.5
assert abs(labml_tok.norm(dim=-1).mean() - d64) < 2
# labml's EncoderDecoder (the encoder_decoder option): PyTorch's
# xavier_uniform_ on the n_vocab x d table, times sqrt(d), against the
# formula d * sqrt(2 / (n_vocab + d))
d512 = 512
lines.append(f"xavier_uniform_ table * sqrt(d), d = {d512}:")
for n_vocab in (512, 32000):
    table = torch.empty(n_vocab, d512)
    torch.nn.init.xavier_uniform_(table, generator=gen_scale)
    xavier_norm = (table * math.sqrt(d512)).norm(dim=-1).mean().item()
    formula = d512 * math.sqrt(2 / (n_vocab + d512))
    assert abs(xavier_norm / formula - 1) < 0.005
    lines.append(
        f"  n_vocab = {n_vocab:5d}: mean |row| = {xavier_norm:.2f}, "
        f"formula {formula:.2f}"
    )
# labml's GPT experiment: normal_ with std 0.02 on the table, times sqrt(d),
# against the formula 0.02 * d
gen_gpt = torch.Generator().manual_seed(2)
gpt_table = torch.empty(1000, d512).normal_(0.0, 0.02, generator=gen_gpt)
gpt_norm = (gpt_table * math.sqrt(d512)).norm(dim=-1).mean().item()
assert abs(gpt_norm / (0.02 * d512) - 1) < 0.005
lines.append(
    f"std 0.02 table * sqrt(d), d = {d512}: mean |row| = {gpt_norm:.2f}, "
    f"formula {0.02 * d512:.2f}"
)
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# **The same meaning at every length.** Dividing by the length $L$ bounds the
# values, but then a code means different things in different sequences: $0.5$ is
# position 10 when $L = 20$ and position 500 when $L = 1000$, and neighbours are $1/L$ apart, a
# gap that shrinks as sequences grow. The sinusoids take the position itself, not
# the length: $PE(10)$ is the same vector in every sequence.

# %% [markdown] lang="ja"
# **どの長さでも同じ意味を持つこと。** 長さ $L$ で割れば値は有界になりますが、
# 同じ符号が系列によって違う意味を持つようになります。
# $0.5$ は、$L = 20$ なら位置 10、$L = 1000$ なら位置 500 です。
# 隣どうしの間隔は $1/L$ で、系列が長くなるほど狭まります。
# 正弦波は長さではなく位置そのものを受け取るので、$PE(10)$ はどの系列でも同じベクトルです。

# %%
lines = []
for L in (20, 1000):
    positions = torch.arange(L)
    normalised = positions / L
    half = int((normalised == 0.5).nonzero())
    assert half == L // 2
    lines.append(
        f"L = {L:4d}: code 0.5 is position {half}, "
        f"neighbour gap 1/L = {1 / L:.3f}"
    )
torch.testing.assert_close(
    sinusoidal(torch.arange(20), d64)[10],
    sinusoidal(torch.arange(1000), d64)[10],
)
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# **A unique code per position.** Two positions with the same code are the same
# position to the model. One sinusoid alone repeats: with wavelength 8, positions 0
# and 8 collide. The sinusoidal encoding pairs many frequencies with wavelengths from
# $2\pi$ up to $2\pi \cdot 10000^{(d-2)/d}$, just under $10000 \cdot 2\pi$ (for the
# $d = 64$ used here about $7499 \cdot 2\pi$, printed below), and the closest two of
# the first 2048 positions are still clearly apart: their distance is 1.4718. The
# raw index, $p/L$ and one-hot codes are unique too.

# %% [markdown] lang="ja"
# **位置ごとに一意な符号であること。** 同じ符号を持つ 2 つの位置は、モデルにとって同じ位置です。
# 正弦波 1 本だけでは繰り返してしまいます。波長が 8 なら、位置 0 と 8 が同じ符号になります。
# 正弦波位置エンコーディングは、波長が $2\pi$ から $2\pi \cdot 10000^{(d-2)/d}$ までの多くの周波数を組み合わせます。
# 最後の波長は $10000 \cdot 2\pi$ の少し手前で、ここで使う $d = 64$ ではおよそ $7499 \cdot 2\pi$ です（下の出力）。
# 最初の 2048 個の位置のうち最も近い 2 つでも、距離は 1.4718 で、はっきり離れています。
# 位置の番号そのもの、$p/L$、one-hot ベクトルも一意です。


# %%
def one_wave(p, wavelength=8):
    angle = 2 * math.pi * p / wavelength
    return torch.tensor([math.sin(angle), math.cos(angle)])


# wavelength 8: positions 0 and 8 collide
torch.testing.assert_close(one_wave(0), one_wave(8))

codes = sinusoidal(torch.arange(2048), d64, dtype=f64)
# the slowest pair's frequency, read back from row p = 1 (atan2 of sin, cos)
slowest = torch.atan2(codes[1, -2], codes[1, -1])
longest = 2 * math.pi / float(slowest)  # its wavelength
assert math.isclose(longest, 2 * math.pi * 10000 ** (62 / 64))
assert longest < 10000 * 2 * math.pi
dist = torch.cdist(codes, codes)
dist.fill_diagonal_(math.inf)
closest = dist.min()
assert closest > 0.1
print(
    f"sinusoidal, d = 64: longest wavelength "
    f"{longest / (2 * math.pi):.0f} * 2 pi\n"
    f"p < 2048: min |PE(p) - PE(q)| over p != q = {closest:.4f}",
    end="",
)

# %% [markdown] lang="en"
# **A way to express offsets.** Language depends on relative positions ("the word
# before"), so "$k$ positions apart" should look the same wherever it occurs.
# Compare the similarity $PE(p)\cdot PE(q)$ of two codes. For the raw index it is $pq$:
# positions 100 and 150 are more similar than 100 and 101, and a pair at distance 1
# looks different at every $p$. One-hot codes give $0$ for every pair of distinct
# positions, so nothing is near anything. For the sinusoids the similarity is
# $\sum_i \cos\big(\omega_i (p-q)\big)$, a function of the offset alone that is
# largest at $p = q$, and $PE(p+k)$ is a fixed linear map of $PE(p)$, both derived
# in the chapter *Sinusoidal positional encoding* (sections
# [The dot product depends only on the distance](01-sinusoidal.ipynb#the-dot-product-depends-only-on-the-distance)
# and [Why a sine and a cosine](01-sinusoidal.ipynb#why-a-sine-and-a-cosine-a-shift-is-a-rotation)).

# %% [markdown] lang="ja"
# **相対位置を表せること。** 言語は相対位置（「直前の単語」など）に依存します。
# そのため「$k$ 位置離れている」という関係は、系列のどこに現れても同じに見えるべきです。
# 2 つの符号の類似度 $PE(p)\cdot PE(q)$ を比べてみます。
# 位置の番号そのものでは、これは $pq$ です。位置 100 と 150 のほうが 100 と 101 より似ていることになり、
# 距離 1 の組も $p$ ごとに違って見えます。
# one-hot ベクトルでは、異なる位置の組はすべて $0$ になり、どの位置もほかのどの位置とも近くありません。
# 正弦波では類似度は $\sum_i \cos\big(\omega_i (p-q)\big)$ で、相対位置だけの関数であり、$p = q$ で最大になります。
# また $PE(p+k)$ は $PE(p)$ に固定の線形写像を施したものです（どちらも「正弦波位置エンコーディング」の章の
# 「[内積は距離だけで決まる](01-sinusoidal.ipynb#内積は距離だけで決まる)」と
# 「[なぜ正弦と余弦の両方か](01-sinusoidal.ipynb#なぜ正弦と余弦の両方かずらすことは回転すること)」の節で導きます）。

# %%
L = 200
codes_by_name = {
    "raw index p": lambda p: raw_index(p),
    "p / L, L = 200": lambda p: raw_index(p / L),
    "one-hot, L = 200": lambda p: torch.eye(L, dtype=f64)[p],
    "sinusoidal, d = 64": lambda p: sinusoidal(torch.tensor(p), d64, dtype=f64),
}
pairs = [(0, 1), (100, 101), (100, 150)]
lines = [f"{'':20s}" + "".join(f"  PE({p})·PE({q})" for p, q in pairs)]
for name, code in codes_by_name.items():
    sims = [float(code(p) @ code(q)) for p, q in pairs]
    lines.append(f"{name:20s}" + "".join(f"{sim:>15.4f}" for sim in sims))
    if name.startswith("sinusoidal"):
        assert math.isclose(sims[0], sims[1])  # the offset alone
        # largest at p = q, nearer is closer
        assert sims[2] < sims[1] < float(code(100) @ code(100))
        omega = 10000.0 ** (-torch.arange(d64 // 2, dtype=f64) / (d64 // 2))
        # sum_i cos(omega_i (p - q))
        assert math.isclose(sims[2], float(torch.cos(omega * 50).sum()))
    if name.startswith("raw"):
        assert sims[2] > sims[1] > sims[0]  # pq: farther looks more similar
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# **Deterministic.** Position $p$ must get the same vector in every sequence, batch
# and call, or the model cannot learn what it means: a random code drawn afresh for
# each sequence is unique but meaningless. The sinusoids are a fixed function; a
# learned table is fixed once trained. The cell below takes the code of position
# 3 from three contexts (alone, inside a sequence of 20, from the module at an
# offset in a batch) and compares each with the paper's formula evaluated in
# plain Python, outside torch. (`sinusoidal` draws no random numbers, so
# reseeding a generator could not change it; nothing needs checking there.)
#
# **Behaviour beyond the training length.** A one-hot code, like a learned table of
# $L$ rows, has no code at all for position $L$: `posenc`'s table raises an
# `IndexError`. The sinusoids are defined, and bounded, at every position. Whether a
# model trained on short sequences makes sense of codes it has never seen is another
# matter; the chapter
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb) measures it.

# %% [markdown] lang="ja"
# **決定的であること。** 位置 $p$ には、どの系列、どのバッチ、どの呼び出しでも同じベクトルが付かなければなりません。
# そうでなければ、モデルはその意味を学べません。
# 系列ごとに新しく引いたランダムな符号は、一意であっても意味を持ちません。
# 正弦波は固定の関数で、学習型の表も学習を終えれば固定されます。
# 次のセルでは、位置 3 の符号を 3 つの状況で取り出します。
# 単独で計算した場合、長さ 20 の系列の中で計算した場合、バッチの中でオフセットを付けてモジュールから取り出した場合です。
# それぞれを、torch を使わずに Python だけで計算した論文の式の値と比べます。
# なお、`sinusoidal` は乱数を使わないので、シードを設定し直しても値が変わることはなく、確かめる必要もありません。
#
# **学習時の長さを超えたときのふるまい。** one-hot ベクトルには、$L$ 行の学習型の表と同じく、位置 $L$ の符号がそもそもありません。
# `posenc` の表は `IndexError` を送出します。
# 正弦波はどの位置でも定義されていて、有界です。
# ただし、短い系列で学習したモデルが見たことのない符号をうまく扱えるかどうかは別の問題です。
# それは「[どの位置エンコーディングが外挿できるか](11-length-generalisation.ipynb)」の章で測ります。

# %%
# Vaswani et al.'s formula for p = 3 in plain Python: the independent reference
paper_3 = [
    f(3 / 10000 ** (2 * i / d64))
    for i in range(d64 // 2)
    for f in (math.sin, math.cos)
]
paper_3 = torch.tensor(paper_3)
module = SinusoidalPositionalEncoding(d64)
contexts = {
    "alone": sinusoidal(torch.tensor([3]), d64)[0],
    "in a sequence of 20": sinusoidal(torch.arange(20), d64)[3],
    "module, offset 1": module(torch.zeros(4, 5, d64), offset=1)[2, 2],
}
for code in contexts.values():
    torch.testing.assert_close(code, paper_3, rtol=0, atol=1e-6)

table = LearnedPositionalEmbedding(512, d64)
table(torch.tensor([511]))  # the last row exists
try:
    table(torch.tensor([512]))
    raised = None
except IndexError:
    raised = "IndexError"
assert raised == "IndexError"
try:  # a one-hot code over L = 512 positions has no row 512 either
    torch.eye(512)[512]
    raised_one_hot = None
except IndexError:
    raised_one_hot = "IndexError"
assert raised_one_hot == "IndexError"
far = sinusoidal(torch.tensor([512, 10**6]), d64)
assert far.abs().max() <= 1 and torch.isfinite(far).all()
print(f"learned table of 512 rows at p = 512: {raised}", end="")

# %% [markdown] lang="en"
# | requirement | raw index $p$ | $p/L$ | one-hot | sinusoidal |
# |---|---|---|---|---|
# | bounded | no | yes | yes | yes |
# | same meaning at every length | yes | no | yes | yes |
# | unique | yes | yes | yes | yes |
# | similarity set by the offset $p-q$ | no | no | only $0$ or $1$ | yes |
# | deterministic | yes | yes | yes | yes |
# | beyond the training length | defined, unbounded | meaning shifts | no code | defined, bounded |

# %% [markdown] lang="ja"
# | 条件 | 位置の番号 $p$ | $p/L$ | one-hot ベクトル | 正弦波 |
# |---|---|---|---|---|
# | 有界 | いいえ | はい | はい | はい |
# | どの長さでも同じ意味 | はい | いいえ | はい | はい |
# | 一意 | はい | はい | はい | はい |
# | 類似度が相対位置 $p-q$ で決まる | いいえ | いいえ | $0$ か $1$ だけ | はい |
# | 決定的 | はい | はい | はい | はい |
# | 学習時の長さを超えたとき | 定義されるが非有界 | 意味がずれる | 符号がない | 定義され、有界 |

# %% [markdown] lang="en"
# ## Adding positions breaks the symmetry
#
# Add the sinusoidal codes, $E$ with rows $PE(0), \dots, PE(T-1)$, to the inputs. The
# tokens move under a permutation, but the codes stay with the positions: the
# shuffled input is $PX + E$. Shuffling the encoded input instead would give
# $P(X + E) = PX + P\,E$, with $P\,E$ the product of $P$ and $E$. If the two were
# equal, the first section would make the outputs a mere permutation. They are
# equal only if $P\,E = E$, that is if $PE(\pi(i)) = PE(i)$ for every $i$, and
# unique codes rule that out for every $\pi$ other than the identity.
#
# That condition is sufficient for permuted outputs, not necessary: different
# inputs can still give permuted outputs. With $W_Q = 0$, for instance, every
# score is $0$, each token attends equally to all $T$ tokens, and every output
# row is the mean of the rows of $(PX + E)\,W_V$, which equals the mean of the
# rows of $(X + E)\,W_V$: the outputs are permuted whatever $E$ is. Whether the
# codes break the symmetry therefore depends on the weights, and the cell measures
# it. With this chapter's random weights, all 719 other permutations of the six
# tokens change the outputs (the smallest change is printed); with $W_Q = 0$ none
# does; and "dog bites man" and "man bites dog" now pool to different vectors.

# %% [markdown] lang="ja"
# ## 位置を足すと対称性が壊れる
#
# 入力に正弦波の符号、つまり各行が $PE(0), \dots, PE(T-1)$ の行列 $E$ を足します。
# 置換でトークンは動きますが、符号は位置に留まります。並べ替えた入力は $PX + E$ です。
# 一方、符号を足した入力そのものを並べ替えると $P(X + E) = PX + P\,E$ になります（$P\,E$ は $P$ と $E$ の積です）。
# 2 つが等しければ、最初の節の結果から、出力は単なる並べ替えになります。
# 2 つが等しいのは $P\,E = E$、つまりすべての $i$ で $PE(\pi(i)) = PE(i)$ のときだけです。
# 符号が一意なら、恒等置換以外の $\pi$ ではこれは起こりません。
#
# ただし、この条件は出力が並べ替えになるための十分条件であって、必要条件ではありません。
# 2 つの入力が違っていても、出力が並べ替えになることはあります。
# たとえば $W_Q = 0$ ならスコアはすべて $0$ で、どのトークンも $T$ 個のトークンすべてに同じ重みを付けます。
# 出力の各行は $(PX + E)\,W_V$ の行の平均で、これは $(X + E)\,W_V$ の行の平均に等しいので、
# $E$ が何であっても出力は並べ替えになります。
# つまり、符号が対称性を壊すかどうかは重みによります。そこで次のセルで測ります。
# この章のランダムな重みでは、6 個のトークンの残り 719 通りの置換がすべて出力を変えます（変化の最小値を表示します）。
# $W_Q = 0$ では、どの置換も出力を変えません。
# "dog bites man" と "man bites dog" も、プーリングすると別々のベクトルになります。

# %%
e = sinusoidal(torch.arange(T), d, dtype=f64)  # E, one row per position
# P E != E (the product, not the code PE(p)) for the 719 other permutations
assert not (e[others] == e).all(dim=(1, 2)).any()
moved_out = self_attention(x[others] + e)  # the codes stay with the positions
broken = (moved_out - self_attention(x + e)[others]).abs().amax(dim=(1, 2))
smallest = float(broken.min())
assert len(broken) == 719 and smallest > 1e-3

# sufficient, not necessary: with W_Q = 0 the outputs stay permuted, E or not
flat = torch.zeros(d, d, dtype=f64)  # W_Q = 0: every score is 0


def flat_attention(x):
    return attention(x @ flat, x @ w_k, x @ w_v)


torch.testing.assert_close(
    flat_attention(x[perms] + e), flat_attention(x + e)[perms]
)

pos_dbm, pos_mbd = self_attention(x_dbm + e[:3]), self_attention(x_mbd + e[:3])
assert not torch.allclose(pos_mbd, swap @ pos_dbm, atol=1e-3)
assert not torch.allclose(pos_mbd.mean(0), pos_dbm.mean(0), atol=1e-3)
print(
    f"smallest max |Attn(PX + E) - P Attn(X + E)| over {len(broken)}: "
    f"{smallest:.4f}\n"
    f"dog bites man, mean: {fmt(pos_dbm.mean(0))}\n"
    f"man bites dog, mean: {fmt(pos_mbd.mean(0))}",
    end="",
)

# %% [markdown] lang="en"
# ## Where positions can enter: a map of the site
#
# Adding a code to the input is one of three main places where position
# information can enter attention. With $i$ the position of a query and $j$ that of
# a key:
#
# - **added to the input**: each token becomes $x_i + PE(i)$ before the first layer;
#   the score then mixes content and absolute positions;
# - **a bias on the scores**: the score becomes $q_i^\top k_j/\sqrt{d} + B_{ij}$, with
#   $B_{ij}$ learned or fixed and depending on the positions only through the
#   relative position $j - i$ (a symmetric version of ALiBi's bias,
#   $-m_h\,\lvert i - j\rvert$, is one; ALiBi itself is causal,
#   $-m_h\,(i - j)$ for $j \le i$);
# - **a rotation of $q$ and $k$**: $(R_i q_i)^\top (R_j k_j) = q_i^\top R_{j-i} k_j$, again
#   relative. The rotary chapters write $m$ and $n$ for these two positions, as
#   RoFormer does (see the [notation page](../docs/notation.md#positions)).
#
# Not every scheme fits one box: Shaw et al. and Transformer-XL add terms that
# depend on the content as well as on $j - i$ (and Shaw et al. also add vectors
# to the values), and NoPE adds nothing but relies on the causal mask. CoPE
# fits none of the three places: its positions are counted by gates on the
# content, so its score term depends on the query and the keys, not on $j - i$
# alone. Randomised positions change which positions an existing encoding
# receives, not where it enters. The table after the figure places each of them.
#
# The cell below applies each one with `posenc` and checks two things: for these
# random weights every one of them breaks the equivariance, and the bias and the
# rotation are relative, so
# shifting all positions by the same amount changes nothing, while the absolute code
# does change the outputs. The figure then compares how far each variant is from a
# permutation of its outputs, averaged over random permutations of eight tokens:
# $S$ is plain attention, $S+M$ the causal mask alone, $X+E$ the sinusoidal input, $S+B$
# the symmetric ALiBi-style bias, without a mask (the slope of ALiBi's steepest
# head of eight), and $R$ the rotation of RoPE.

# %% [markdown] lang="ja"
# ## 位置が入る場所：このサイトの地図
#
# 入力に符号を足すのは、位置の情報がアテンションに入るおもな 3 つの場所のうちの 1 つです。
# クエリの位置を $i$、キーの位置を $j$ と書きます。
#
# - **入力に足す**：最初の層の前に、各トークンを $x_i + PE(i)$ にします。
#   スコアには内容と絶対位置が混ざります。
# - **スコアにバイアスを足す**：スコアを $q_i^\top k_j/\sqrt{d} + B_{ij}$ にします。
#   $B_{ij}$ には学習可能なものと固定のものがあり、どちらも位置には相対位置 $j - i$ を通してだけ依存します。
#   ALiBi のバイアスを左右対称にした $-m_h\,\lvert i - j\rvert$ がその例です
#   （ALiBi そのものは因果的で、$j \le i$ に対する $-m_h\,(i - j)$ です）。
# - **$q$ と $k$ を回転する**：$(R_i q_i)^\top (R_j k_j) = q_i^\top R_{j-i} k_j$ です。これも、位置には相対位置を通してだけ依存します。
#   回転を扱う章では、RoFormer にならってこの 2 つの位置を $m$、$n$ で表します
#   （[記法のページ](../docs/notation.ja.md#positions)を参照してください）。
#
# すべての方法がどれか 1 つに収まるわけではありません。
# Shaw らと Transformer-XL は、$j - i$ だけでなく内容にも依存する項を足します（Shaw らはバリューにもベクトルを足します）。
# NoPE は何も足さず、因果マスクに頼ります。
# CoPE は 3 つのどの場所にも収まりません。位置を内容に基づくゲートで数えるので、スコアに足す項は $j - i$ だけでなくクエリとキーにも依存します。
# ランダム化した位置は、既存のエンコーディングに渡す位置を変えるもので、位置が入る場所は変えません。
# それぞれの位置付けは、図の後の表にまとめます。
#
# 次のセルでは、それぞれを `posenc` で適用し、2 つのことを確かめます。
# このランダムな重みではどの方法も置換同変を壊すこと、そしてバイアスと回転は相対位置を使うので、
# すべての位置を同じだけずらしても何も変わらないことです。絶対位置の符号では出力が変わります。
# 続く図では、それぞれの方法の出力が並べ替えからどれだけ離れるかを、
# 8 個のトークンのランダムな置換について平均して比べます。
# $S$ は素のアテンション、$S+M$ は因果マスクだけ、$X+E$ は正弦波を足した入力、$R$ は RoPE の回転です。
# $S+B$ は、マスクなしで使う左右対称の ALiBi 風のバイアスです（傾きは、ALiBi の 8 ヘッドのうち最も急なヘッドのものです）。

# %% alt={"en": ["Bar chart of the distance from permutation equivariance for five variants on eight tokens: plain attention S is 0, the causal mask S+M 1.02, sinusoidal input X+E 0.63, symmetric ALiBi-style bias S+B 0.73, RoPE rotation R 0.44."], "ja": ["8 個のトークンで、5 つの方法が置換同変からどれだけ離れるかを示す棒グラフ。素のアテンション S は 0、因果マスク S+M は 1.02、正弦波の入力 X+E は 0.63、左右対称の ALiBi 風バイアス S+B は 0.73、RoPE の回転 R は 0.44 です。"]}
T8 = 8
x8 = torch.randn(T8, d, dtype=f64)
pos8 = torch.arange(T8)
# the steepest slope of ALiBi's 8 heads, m_1 = 1/2
slope = float(alibi_slopes(8)[0])


def variants(x, positions):
    """Each way of adding positions, as a function of x: [T, d] -> [T, d]."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    gaps = (positions[:, None] - positions[None, :]).abs().to(f64)  # |i - j|
    return {
        "$S$": attention(q, k, v),
        "$S+M$": attention(q, k, v, causal=True),
        "$X+E$": self_attention(x + sinusoidal(positions, d, dtype=f64)),
        "$S+B$": attention(q, k, v, bias=-slope * gaps),  # symmetric ALiBi
        "$R$": attention(apply_rope(q, positions), apply_rope(k, positions), v),
    }


# posenc's symmetric extension of ALiBi (causal=False): -m_1 |i - j|
assert slope == 0.5
bias = alibi_bias(8, T8, causal=False)[0].to(f64)
torch.testing.assert_close(
    bias, -slope * (pos8[:, None] - pos8[None, :]).abs().to(f64)
)

# relative schemes ignore a common shift of all positions; absolute does not
here, shifted = variants(x8, pos8), variants(x8, pos8 + 100)
for name in ("$S+B$", "$R$"):
    torch.testing.assert_close(shifted[name], here[name])
assert not torch.allclose(shifted["$X+E$"], here["$X+E$"], atol=1e-3)

# (R_i q)^T (R_j k) = q^T R_{j-i} k: the rotated score depends on j - i only
qr, kr = x8 @ w_q, x8 @ w_k
i_pos, j_pos = torch.tensor(5), torch.tensor(2)
lhs = apply_rope(qr[0], i_pos) @ apply_rope(kr[1], j_pos)
rhs = qr[0] @ apply_rope(kr[1], j_pos - i_pos)
torch.testing.assert_close(lhs, rhs)

# distance from equivariance, ||f(PX) - P f(X)|| / ||f(X)||, mean over perms
n_perms = 200
p8 = torch.stack([torch.randperm(T8) for _ in range(n_perms)])  # [200, T8]
moved_out = variants(x8[p8], pos8)  # every permutation in one batch
distance = {
    name: float(
        ((moved_out[name] - out[p8]).norm(dim=(1, 2)) / out.norm()).mean()
    )
    for name, out in here.items()
}
assert distance["$S$"] < 1e-12
assert min(value for name, value in distance.items() if name != "$S$") > 0.05
print(
    "  ".join(
        f"{name.strip('$')}: {value:.3f}" for name, value in distance.items()
    ),
    end="",
)

fig, ax = plt.subplots(figsize=(6.4, 3.0))
bars = ax.bar(
    range(len(distance)), list(distance.values()), color="#0072B2", width=0.6
)
ax.bar_label(bars, fmt="%.3f", padding=2)
ax.set_ylim(0, 1.15 * max(distance.values()))
ax.set_xticks(range(len(distance)), list(distance))
ax.set_ylabel(r"$\|f(PX) - P f(X)\| \,/\, \|f(X)\|$")
ax.grid(axis="x", visible=False)
plt.show()

# %% [markdown] lang="en"
# Plain attention sits at zero: its outputs are a permutation up to rounding (the
# cell asserts below $10^{-12}$). With these weights every other variant is far from
# one. The families the site covers, by where they enter:
#
# | family | encoding | where it enters | a model that uses it |
# |---|---|---|---|
# | absolute | [sinusoidal](01-sinusoidal.ipynb) (Vaswani et al. 2017) | added to the input | the original Transformer |
# | absolute | [learned](03-learned-embeddings.ipynb) | added to the input | BERT, GPT-2 |
# | absolute | [scaled sinusoidal](03-learned-embeddings.ipynb) (Hua et al. 2022) | added to the input, times one learned scalar | FLASH |
# | relative | [Shaw et al. (2018)](04-shaw-relative.ipynb) | a learned vector per clipped offset, added to the keys (and values) | Music Transformer |
# | relative | [Transformer-XL](05-transformer-xl.ipynb) (Dai et al. 2019) | terms in the scores from a sinusoidal code of the offset | Transformer-XL, XLNet |
# | relative | [T5 buckets](06-t5-buckets.ipynb) (Raffel et al. 2020) | a learned bias on the scores, one per bucket of offsets | T5 |
# | relative | [ALiBi](07-alibi.ipynb) (Press et al. 2022) | a fixed bias on the scores, linear in the distance | BLOOM, MPT |
# | rotary | [RoPE](08-rope.ipynb) (Su et al. 2021) | a rotation of $q$ and $k$ | Llama, GPT-NeoX |
# | rotary | [RoPE context extensions](09-rope-context.ipynb) (position interpolation, NTK, YaRN, Llama 3) | a rotation of $q$ and $k$ with rescaled frequencies | Llama 3.1 |
# | rotary | [2-D and 3-D RoPE](13-rope-2d-3d.ipynb) (RoPE-Axial, RoPE-Mixed; [M-RoPE](13-rope-2d-3d.ipynb#m-rope-time-height-and-width-in-a-language-model)) | a rotation of $q$ and $k$, the frequencies split between the axes (row and column; time) | Qwen2-VL, Qwen3-VL |
# | rotary | [xPos](10-xpos-nope.ipynb) (Sun et al. 2022) | a rotation of $q$ and $k$, plus an exponential scaling | LEX Transformer |
# | none | [NoPE](10-xpos-nope.ipynb) | nothing but the causal mask | Llama 4, one layer in four ([with a position-dependent query temperature](14-rope-in-llms.ipynb#llama-4-nope-layers-with-a-temperature-chunked-rope-layers)) |
# | relative | [KERPLE](15-learned-bias-functions.ipynb#kerple-kernels-of-the-distance) (Chi et al. 2022), [FIRE](15-learned-bias-functions.ipynb#fire-one-function-of-a-normalised-distance) (Li et al. 2024) | a bias on the scores, a learned function of the distance | the papers' models |
# | contextual | [CoPE](15-learned-bias-functions.ipynb#cope-positions-the-model-counts) (Golovneva et al. 2024) | none of the three: gates on $q_i^\top k_j$ count the positions, then $q_i^\top e[p_{ij}]$ is added to the scores | the paper's models |
# | training scheme | [randomised positions](15-learned-bias-functions.ipynb#randomised-positions-no-new-formula) (Ruoss et al. 2023) | no new place: random sorted positions fed to an existing encoding | the paper's models |
#
# Llama 4's NoPE layers are not quite free of positions: in Meta's reference code
# they multiply each query by a temperature that is 1 for the first 8191
# positions and then grows in steps, one every 8192 positions, logarithmically
# in the number of steps (when `attn_temperature_tuning` is on), as the chapter
# [*Rotary in today's LLMs*](14-rope-in-llms.ipynb#llama-4-nope-layers-with-a-temperature-chunked-rope-layers)
# shows. Dufter, Schmitt and Schütze (2022) survey many more variants along
# similar axes.

# %% [markdown] lang="ja"
# 素のアテンションではずれがゼロで、出力は丸め誤差の範囲で並べ替えになっています（セルでは $10^{-12}$ 未満であることを確かめています）。
# この重みでは、ほかの方法はどれも並べ替えから大きく離れます。
# このサイトで扱う位置エンコーディングを、入る場所ごとにまとめます。
#
# | 分類 | 位置エンコーディング | 入る場所 | 採用しているモデル |
# |---|---|---|---|
# | 絶対位置 | [正弦波](01-sinusoidal.ipynb)（Vaswani ら 2017） | 入力に足す | 元の Transformer |
# | 絶対位置 | [学習型](03-learned-embeddings.ipynb) | 入力に足す | BERT、GPT-2 |
# | 絶対位置 | [スケール付き正弦波](03-learned-embeddings.ipynb)（Hua ら 2022） | 学習可能なスカラーを 1 つ掛けて入力に足す | FLASH |
# | 相対位置 | [Shaw ら（2018）](04-shaw-relative.ipynb) | クリップした相対位置ごとの学習可能なベクトルを、キー（とバリュー）に足す | Music Transformer |
# | 相対位置 | [Transformer-XL](05-transformer-xl.ipynb)（Dai ら 2019） | 相対位置の正弦波符号から作った項をスコアに足す | Transformer-XL、XLNet |
# | 相対位置 | [T5 のバケット](06-t5-buckets.ipynb)（Raffel ら 2020） | バケットごとの学習可能なバイアスをスコアに足す | T5 |
# | 相対位置 | [ALiBi](07-alibi.ipynb)（Press ら 2022） | 距離に比例する固定のバイアスをスコアに足す | BLOOM、MPT |
# | 回転 | [RoPE](08-rope.ipynb)（Su ら 2021） | $q$ と $k$ を回転する | Llama、GPT-NeoX |
# | 回転 | [RoPE のコンテキスト長の拡張](09-rope-context.ipynb)（位置補間、NTK、YaRN、Llama 3） | 周波数を調整して $q$ と $k$ を回転する | Llama 3.1 |
# | 回転 | [2 次元・3 次元の RoPE](13-rope-2d-3d.ipynb)（RoPE-Axial、RoPE-Mixed、[M-RoPE](13-rope-2d-3d.ipynb#m-rope言語モデルの中の時間高さ幅)） | 周波数を軸（行と列、時間）に分け、$q$ と $k$ を回転する | Qwen2-VL、Qwen3-VL |
# | 回転 | [xPos](10-xpos-nope.ipynb)（Sun ら 2022） | $q$ と $k$ を回転し、さらに指数的にスケールする | LEX Transformer |
# | なし | [NoPE](10-xpos-nope.ipynb) | 因果マスクのみ | Llama 4 の 4 層に 1 層（[位置で決まるクエリの温度付き](14-rope-in-llms.ipynb#llama-4温度付きの-nope-の層とチャンクに分けた-rope-の層)） |
# | 相対位置 | [KERPLE](15-learned-bias-functions.ipynb#kerple距離のカーネル関数)（Chi ら 2022）、[FIRE](15-learned-bias-functions.ipynb#fire正規化した距離の-1-つの関数)（Li ら 2024） | 距離の学習可能な関数をバイアスとしてスコアに足す | 論文のモデル |
# | 文脈に応じた位置 | [CoPE](15-learned-bias-functions.ipynb#copeモデルが数える位置)（Golovneva ら 2024） | 3 つのどれでもない。$q_i^\top k_j$ のゲートで位置を数え、$q_i^\top e[p_{ij}]$ をスコアに足す | 論文のモデル |
# | 学習の方法 | [ランダム化した位置](15-learned-bias-functions.ipynb#ランダム化した位置式は変えない)（Ruoss ら 2023） | 新しい場所はない。ランダムに選んで並べた位置を既存のエンコーディングに渡す | 論文のモデル |
#
# Llama 4 の NoPE の層も、位置とまったく無縁なわけではありません。
# Meta の参照実装では、`attn_temperature_tuning` が有効なとき、各クエリに温度を掛けます。
# この温度は、最初の 8191 個の位置では 1 で、その先では 8192 位置ごとに 1 段ずつ、段数の対数に比例して大きくなります。
# 詳しくは「[現在の LLM の回転位置埋め込み](14-rope-in-llms.ipynb#llama-4温度付きの-nope-の層とチャンクに分けた-rope-の層)」の章で扱います。
# Dufter、Schmitt、Schütze（2022）は、似た観点でさらに多くの変種を概観しています。

# %% [markdown] lang="en"
# ## How libraries differ
#
# **No positions inside the attention modules.** PyTorch's `nn.MultiheadAttention`
# and `nn.TransformerEncoderLayer` add no positional encoding; the caller must add
# one. A full encoder layer (attention, residual connections, layer norms,
# feed-forward layer) is therefore permutation-equivariant, and so is a stack of
# them, in evaluation mode (dropout draws a different mask for every row) and
# without a padding mask.
#
# **Where the causal queries sit.** A causal mask fixes positions, and libraries do
# not agree on which. When there are fewer queries than keys (decoding with a
# [KV cache](../docs/glossary.md#kv-cache)),
# `posenc.attention` places the queries at the end of the keys, so the last query
# sees every key. `torch.nn.functional.scaled_dot_product_attention` with
# `is_causal=True` aligns them to the start instead, so its first query sees only the
# first key; `torch.nn.attention.bias.causal_lower_right` gives the end-aligned mask.
# For as many queries as keys all three agree.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# **アテンションのモジュール自体は位置を持ちません。** PyTorch の `nn.MultiheadAttention` と
# `nn.TransformerEncoderLayer` は位置エンコーディングを足しません。位置エンコーディングは呼び出す側で足す必要があります。
# そのため、エンコーダ層全体（アテンション、残差接続、層正規化、フィードフォワード層）は置換同変で、
# それを積み重ねたものも置換同変です。ただしこれは、パディングマスクを使わず、ドロップアウトを切った評価モードで動かす場合の話です
# （学習モードでは、ドロップアウトが行ごとに別のマスクを引きます）。
#
# **因果マスクでのクエリの位置。** 因果マスクはクエリとキーの位置関係を決めますが、その決め方はライブラリによって違います。
# クエリがキーより少ないとき（[KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使ったデコード）、
# `posenc.attention` はクエリをキーの末尾にそろえるので、最後のクエリはすべてのキーを見ます。
# `torch.nn.functional.scaled_dot_product_attention` は、`is_causal=True` のとき逆にクエリを先頭側へそろえるので、
# 最初のクエリは最初のキーしか見ません。
# 末尾にそろえたマスクは `torch.nn.attention.bias.causal_lower_right` で作れます。
# クエリとキーの数が同じなら、3 つとも一致します。

# %%
layers = [
    torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval()
    for _ in range(2)
]
xb = torch.randn(1, 7, 16)
pb = torch.randperm(7)
with torch.no_grad():
    out, out_perm = xb, xb[:, pb]
    for layer in layers:
        out, out_perm = layer(out), layer(out_perm)
# two encoder layers: equivariant
torch.testing.assert_close(out_perm, out[:, pb])

# 3 queries, 7 keys
qc, kc, vc = (
    torch.randn(2, 3, 8),
    torch.randn(2, 7, 8),
    torch.randn(2, 7, 8),
)
ours = attention(qc, kc, vc, causal=True)
torch.testing.assert_close(
    ours,
    F.scaled_dot_product_attention(
        qc, kc, vc, attn_mask=causal_lower_right(3, 7)
    ),
)
# last query: every key
torch.testing.assert_close(ours[:, -1], attention(qc, kc, vc)[:, -1])
theirs = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
# first query: only the first key
torch.testing.assert_close(theirs[:, 0], vc[:, 0])
assert not torch.allclose(ours, theirs, atol=1e-3)
qs = torch.randn(2, 7, 8)  # as many queries as keys
torch.testing.assert_close(
    attention(qs, kc, vc, causal=True),
    F.scaled_dot_product_attention(qs, kc, vc, is_causal=True),
)

# %% [markdown] lang="en"
# ## What to remember
#
# - Without positions, self-attention is permutation-equivariant,
#   $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$, and so is a whole encoder of
#   row-wise layers: "dog bites man" and "man bites dog" pool to the same vector.
# - A causal mask breaks the symmetry only partly: one layer cannot see a shuffle
#   of the tokens before a position, but the mask alone can count positions
#   ($1/(p+1)$).
# - A positional code should be bounded, mean the same at every length, be unique,
#   let offsets be expressed and be deterministic; the sinusoids pass all five.
# - Unique codes remove the guarantee that the outputs only permute; whether they
#   actually change depends on the weights ($W_Q = 0$ keeps them permuted).
# - Positions enter in three main places: added to the input (absolute), a bias
#   on the scores or a rotation of $q$ and $k$ (both relative); some schemes add
#   content-dependent terms instead, and NoPE relies on the causal mask alone.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 位置がなければ、セルフアテンションは置換同変 $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$ です。
#   行ごとに働く層を重ねたエンコーダ全体も同じで、"dog bites man" と "man bites dog" はプーリングすると同じベクトルになります。
# - 因果マスクが壊す対称性は一部だけです。1 層では、ある位置より前のトークンの並べ替えは見えません。
#   一方で、マスクだけでも位置を数えられます（$1/(p+1)$）。
# - 位置の符号に求められるのは、有界であること、どの長さでも同じ意味を持つこと、一意であること、相対位置を表せること、決定的であることの 5 つです。
#   正弦波はこの 5 つをすべて満たします。
# - 一意な符号を足すと「出力は並べ替えになるだけ」という保証はなくなります。
#   実際に出力が変わるかどうかは重みによります（$W_Q = 0$ なら並べ替えのままです）。
# - 位置が入るおもな場所は 3 つです。入力に足す（絶対位置）、スコアにバイアスを足す、$q$ と $k$ を回転する（どちらも相対位置）です。
#   内容に依存する項を足す方式もあり、NoPE は因果マスクだけに頼ります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Prove that a residual connection, layer normalisation and a position-wise
#    feed-forward layer each satisfy $f(PX) = P f(X)$, and conclude that a whole
#    encoder without positions does. Where does the proof use that the same weights
#    act on every row?
# 2. Repeat a token: in "the dog saw the cat" without positions, show that the two
#    "the" get identical outputs in every layer. Check it with `posenc.attention`, then
#    add `posenc.sinusoidal` and check that they no longer do.
# 3. Which permutations keep a sliding-window mask (token $i$ sees $j$ with $|i-j| \le w$)?
#    And a causal mask restricted to a window? Count them for $T = 6$ and compare with
#    the triangular mask.
# 4. Use the binary digits of $p$ as a positional code. Which rows of the table of
#    requirements does it satisfy? Compute $PE(p)\cdot PE(q)$ for a few pairs at distance 1.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 残差接続、層正規化、位置ごとのフィードフォワード層のそれぞれが $f(PX) = P f(X)$ を満たすことを証明してください。
#    そこから、位置のないエンコーダ全体も同じ性質を満たすことを導いてください。
#    証明のどこで、すべての行に同じ重みが働くことを使いましたか。
# 2. 同じトークンが 2 回現れる場合を考えます。位置のない "the dog saw the cat" で、2 つの "the" が
#    どの層でも同じ出力になることを示してください。`posenc.attention` で確かめ、
#    次に `posenc.sinusoidal` を足すと同じでなくなることを確かめてください。
# 3. スライディングウィンドウのマスク（トークン $i$ からは $|i-j| \le w$ の $j$ が見える）を保つ置換はどれでしょうか。
#    ウィンドウに制限した因果マスクではどうでしょうか。$T = 6$ で数え、三角形のマスクと比べてください。
# 4. $p$ の 2 進数の各桁を位置の符号として使います。条件の表のどの行を満たすでしょうか。
#    距離 1 のいくつかの組について $PE(p)\cdot PE(q)$ を計算してください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Each of the three layers applies one function $h$ to every row:
# $h(x) = \gamma \odot (x - \mu(x))/\sigma(x) + \beta$ for layer normalisation, with
# $\mu$ and $\sigma$ the mean and standard deviation of the row's entries, and
# $h(x) = W_2\,\phi(W_1 x + b_1) + b_2$ for the feed-forward layer. Write $F$ for the
# layer. Row $i$ of $PX$ is row $\pi(i)$ of $X$, so
# $$F(PX)_i = h\big((PX)_i\big) = h(x_{\pi(i)}) = F(X)_{\pi(i)} = \big(P\,F(X)\big)_i$$
# A residual connection around an equivariant $g$ gives
# $PX + g(PX) = PX + P\,g(X) = P\big(X + g(X)\big)$, and a composition of
# equivariant maps is equivariant: $f(g(PX)) = f(P\,g(X)) = P\,f(g(X))$. With the
# first section's result for attention, every layer of an encoder without
# positions commutes with $P$, and so does the stack.
#
# The proof uses the shared weights in the step $h(x_{\pi(i)}) = F(X)_{\pi(i)}$: the
# function applied to row $i$ of $PX$ must be the one applied to row $\pi(i)$ of
# $X$. A layer with its own weights $h_i$ per row breaks this, and adding $PE(i)$
# to row $i$ is such a layer. The cell checks each layer, one whole block, and a
# per-row linear map that fails.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 3 つの層はどれも、同じ関数 $h$ を各行に適用します。
# 層正規化では、行の成分の平均と標準偏差を $\mu$ と $\sigma$ として $h(x) = \gamma \odot (x - \mu(x))/\sigma(x) + \beta$、
# フィードフォワード層では $h(x) = W_2\,\phi(W_1 x + b_1) + b_2$ です。層を $F$ と書きます。
# $PX$ の第 $i$ 行は $X$ の第 $\pi(i)$ 行なので、次が成り立ちます。
# $$F(PX)_i = h\big((PX)_i\big) = h(x_{\pi(i)}) = F(X)_{\pi(i)} = \big(P\,F(X)\big)_i$$
# 置換同変な $g$ を残差接続で囲むと $PX + g(PX) = PX + P\,g(X) = P\big(X + g(X)\big)$ です。
# また、置換同変な写像の合成も置換同変です。実際、$f(g(PX)) = f(P\,g(X)) = P\,f(g(X))$ です。
# 最初の節で示したアテンションの結果と合わせると、位置のないエンコーダはどの層も $P$ と交換でき、それを積み重ねた全体も交換できます。
#
# 同じ重みを使うという前提は、$h(x_{\pi(i)}) = F(X)_{\pi(i)}$ のステップで使っています。
# $PX$ の第 $i$ 行にかける関数は、$X$ の第 $\pi(i)$ 行にかける関数と同じでなければなりません。
# 行ごとに別の重み $h_i$ を持つ層ではこれが崩れます。第 $i$ 行に $PE(i)$ を足すのも、そうした層の 1 つです。
# 次のセルでは、各層とブロック全体を確かめ、成り立たない例として、行ごとに別の線形写像を掛ける層も確かめます。

# %% tags=["solution"]
gen = torch.Generator().manual_seed(1)
x6 = torch.randn(T, d, dtype=f64, generator=gen)
p6 = torch.randperm(T, generator=gen)
norm = torch.nn.LayerNorm(d, dtype=f64)
ffn = torch.nn.Sequential(
    torch.nn.Linear(d, 4 * d, dtype=f64),
    torch.nn.GELU(),
    torch.nn.Linear(4 * d, d, dtype=f64),
)
with torch.no_grad():
    norm.weight.normal_(generator=gen)  # gamma and beta away from 1 and 0
    norm.bias.normal_(generator=gen)


def block(x):  # attention, residual, norm, feed-forward, residual
    h = norm(x + self_attention(x))
    return h + ffn(h)


with torch.no_grad():
    for f in (norm, ffn, lambda x: x + ffn(x), block):
        torch.testing.assert_close(f(x6[p6]), f(x6)[p6])  # F(PX) = P F(X)

    # own weights per row: F(X)_i = x_i W_i is not equivariant
    w_rows = torch.randn(T, d, d, dtype=f64, generator=gen)

    def per_row(x):
        return torch.einsum("td,tde->te", x, w_rows)

    assert not torch.allclose(per_row(x6[p6]), per_row(x6)[p6], atol=1e-3)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Let rows $a$ and $b$ of the input be equal, $x_a = x_b$. In
# attention without positions, the output of a row depends on its own query and on
# the keys and values of all rows, which every row shares; equal rows have equal
# queries and therefore equal outputs. Row-wise layers map equal rows to equal rows.
# So the two "the" stay equal after the first layer, hence after the second, and so
# on: by induction, in every layer. Adding $PE(0)$ to the first and $PE(3)$ to the
# second makes the input rows differ, and the outputs with them. A causal mask
# separates them too, since the two "the" see different prefixes: the mask is
# positional information, as the causal-mask section showed.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 入力の第 $a$ 行と第 $b$ 行が等しい（$x_a = x_b$）とします。
# 位置のないアテンションでは、ある行の出力は、その行のクエリと、全行のキーとバリューだけで決まります。
# キーとバリューはすべての行に共通なので、等しい行はクエリも等しく、出力も等しくなります。
# 行ごとに働く層も、等しい行を等しい行に写します。
# したがって 2 つの "the" は 1 層目の後も等しく、2 層目の後も等しく、帰納法によってどの層でも等しいままです。
# 1 つ目に $PE(0)$、2 つ目に $PE(3)$ を足すと、入力の行が異なるので、出力も異なります。
# 因果マスクでも 2 つは分かれます。2 つの "the" から見える手前のトークンの範囲が違うからです。
# 因果マスクの節で見たとおり、マスクは位置の情報です。

# %% tags=["solution"]
words = "the dog saw the cat".split()
extra = {
    w: torch.randn(d, dtype=f64, generator=gen) for w in ("the", "saw", "cat")
}
x_the = torch.stack([extra.get(w, vocab.get(w)) for w in words])  # [5, d]


def layers(h, n_layers=3, **kwargs):
    """Every layer's output: attention, residual, norm, a row-wise part."""
    outs = []
    for _ in range(n_layers):
        h = F.layer_norm(h + self_attention(h, **kwargs), (d,))
        h = h + torch.tanh(h @ w_v)  # a position-wise feed-forward part
        outs.append(h)
    return outs


for out in layers(x_the):  # no positions: the two "the" agree in every layer
    torch.testing.assert_close(out[0], out[3])
with_pe = layers(x_the + sinusoidal(torch.arange(5), d, dtype=f64))
causal = layers(x_the, causal=True)
for out in with_pe + causal:  # with codes, or with the mask, they differ
    assert (out[0] - out[3]).abs().max() > 1e-3

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** A permutation keeps a mask when $P^\top M P = M$, that is when
# "$\pi(i)$ sees $\pi(j)$" holds exactly when "$i$ sees $j$". The sliding window is
# symmetric, so the reversal $i \mapsto T-1-i$ always keeps it, and the count is at
# least 2. At the extremes every permutation keeps it: $w = 0$ leaves only the
# diagonal and $w \ge T-1$ lets everyone see everyone, both $720$ for $T = 6$. In
# between the count depends on $w$: for $T = 6$ it is 2, 2, 4 and 48 for
# $w = 1, \dots, 4$. At $w = 4$ the only pair that cannot see each other is
# $\{0, 5\}$, so a permutation must keep that pair (2 ways) and may shuffle the other
# four freely ($4! = 24$ ways).
#
# A causal window with $w \ge 1$ is kept only by the identity, like the triangular
# mask. Every position $i > 0$ sees $i - 1$, so chaining "sees" gives the full order
# $j \le i$ of the positions; a permutation that keeps the relation keeps that order,
# and the only permutation that keeps an order is the identity. With $w = 0$ the
# window is the diagonal again (720).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 置換がマスクを保つのは $P^\top M P = M$ のとき、つまり「$\pi(i)$ が $\pi(j)$ を見る」ことと
# 「$i$ が $j$ を見る」ことが同値なときです。
# スライディングウィンドウは対称なので、反転 $i \mapsto T-1-i$ は必ずこれを保ち、置換の数は 2 以上です。
# ウィンドウ幅が両極端の値のときは、すべての置換がマスクを保ちます。$w = 0$ では対角だけが残り、$w \ge T-1$ ではすべてのトークンがすべてを見るので、
# $T = 6$ ではどちらも $720$ です。
# その間では数は $w$ によって変わり、$T = 6$ では $w = 1, \dots, 4$ に対して 2、2、4、48 です。
# $w = 4$ で互いに見えない組は $\{0, 5\}$ だけなので、置換はこの組を保ち（2 通り）、
# 残りの 4 個は自由に並べ替えられます（$4! = 24$ 通り）。
#
# $w \ge 1$ の因果的なウィンドウを保つのは、三角形のマスクと同じく恒等置換だけです。
# 位置 $i > 0$ はどれも $i - 1$ を見るので、「見る」をたどると位置の全順序 $j \le i$ が得られます。
# この関係を保つ置換はこの順序も保ち、順序を保つ置換は恒等置換しかありません。
# $w = 0$ では、ウィンドウはやはり対角だけになります（720）。


# %% tags=["solution"]
def keepers(allowed):
    """Number of permutations p with allowed[p][:, p] == allowed."""
    count = 0
    for p in itertools.permutations(range(len(allowed))):
        count += torch.equal(allowed[list(p)][:, list(p)], allowed)
    return count


offset = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # i - j
reverse = list(range(T - 1, -1, -1))
sliding, causal_window = [], []
for w in range(T):
    band = offset.abs() <= w
    assert torch.equal(band[reverse][:, reverse], band)  # reversal keeps it
    sliding.append(keepers(band))
    causal_window.append(keepers((offset >= 0) & (offset <= w)))
assert sliding == [720, 2, 2, 4, 48, 720]
assert causal_window == [720, 1, 1, 1, 1, 1]  # w = T - 1: the triangular mask
print(
    f"w = 0..5, sliding: {sliding}\nw = 0..5, causal:  {causal_window}", end=""
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With $B$ bits, $PE(p)$ holds the digits of $p$, least significant
# first. It is bounded (entries $0$ or $1$, norm at most $\sqrt{B}$), means the same
# at every length, is unique for $p < 2^B$ and is deterministic: four rows of the
# table. It fails the offset row. $PE(p)\cdot PE(q)$ counts the ones that $p$ and $q$
# share, so pairs at distance 1 give 0 for $(7, 8)$ but 3 for $(14, 15)$; and the
# squared distance $\lVert PE(p+1) - PE(p)\rVert^2$ is the number of digits that
# change when adding one: 1 for even $p$, and $B$ at most, reached inside the
# range for $p = 2^{B-1} - 1$ ($01\dots1 \to 10\dots0$; 127 for $B = 8$). The norm
# itself, the square root of the number of ones, changes from position to position.
# Beyond the training length it behaves like the one-hot code: position $2^B$ has
# no code with $B$ digits, and keeping only the last $B$ digits would give it the
# code of position $0$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** $B$ ビットを使うと、$PE(p)$ は $p$ の各桁を下の桁から並べたものです。
# 有界で（成分は $0$ か $1$、ノルムは $\sqrt{B}$ 以下）、どの長さでも同じ意味を持ち、
# $p < 2^B$ では一意で、決定的です。表の 4 つの行を満たします。
# 満たさないのは相対位置の行です。$PE(p)\cdot PE(q)$ は $p$ と $q$ に共通する 1 の桁の数なので、
# 距離 1 の組でも $(7, 8)$ では 0、$(14, 15)$ では 3 になります。
# 2 乗距離 $\lVert PE(p+1) - PE(p)\rVert^2$ は 1 を足したときに変わる桁の数で、
# 偶数の $p$ では 1 で、最大は $B$ です。範囲の中でこの最大になるのは $p = 2^{B-1} - 1$ のときです
# （$01\dots1 \to 10\dots0$ で、$B = 8$ なら 127）。
# ノルム（1 の桁の数の平方根）も位置ごとに変わります。
# 学習時の長さを超えたときは one-hot ベクトルと同じで、$B$ 桁では位置 $2^B$ の符号がありません。
# 下の $B$ 桁だけを残すと、位置 $0$ と同じ符号になってしまいます。

# %% tags=["solution"]
B = 8


def binary(p):
    """PE(p): the B binary digits of p, least significant first."""
    return torch.tensor([(p >> b) & 1 for b in range(B)], dtype=f64)


codes = torch.stack([binary(p) for p in range(2**B)])
assert codes.abs().max() <= 1 and codes.norm(dim=-1).max() <= math.sqrt(B)
assert len(torch.unique(codes, dim=0)) == 2**B  # unique below 2^B
assert torch.equal(binary(2**B), binary(0))  # 2^B wraps onto position 0
# digits that change from p to p + 1, for p = 0 .. 2^B - 2 (inside the range):
# all B of them only once, at p = 2^(B-1) - 1
steps = (codes[1:] - codes[:-1]).abs().sum(-1)
assert steps.max() == B and (steps == B).sum() == 1
assert int(steps.argmax()) == 2 ** (B - 1) - 1
lines = ["  p  PE(p).PE(p+1)  |PE(p+1) - PE(p)|^2"]
for p in (0, 6, 7, 14, 15, 127):
    dot = float(binary(p) @ binary(p + 1))
    step = float((binary(p + 1) - binary(p)).norm() ** 2)
    assert dot == bin(p & (p + 1)).count("1")  # shared ones
    assert round(step) == bin(p ^ (p + 1)).count("1")  # digits that change
    lines.append(f"{p:3d}  {dot:14.0f}  {step:19.0f}")
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# ## References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020. Without positions, Transformers
#   can approximate every continuous permutation-equivariant function of compact
#   support, and only such functions; with trainable positional encodings, every
#   continuous sequence-to-sequence function of compact support.
#   <https://arxiv.org/abs/1912.10077>
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional
#   Encodings Still Learn Positional Information*. Findings of EMNLP 2022.
#   <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. NeurIPS 2023.
#   <https://arxiv.org/abs/2305.19466>
# - Dufter, P., Schmitt, M., Schütze, H. (2022). *Position Information in
#   Transformers: An Overview*. Computational Linguistics 48(3).
#   <https://arxiv.org/abs/2102.11090>
# - The encodings of the map: Devlin et al. (2019), BERT
#   <https://arxiv.org/abs/1810.04805>; Radford et al. (2019), GPT-2
#   <https://github.com/openai/gpt-2>; Hua et al. (2022), FLASH
#   <https://arxiv.org/abs/2202.10447>; Shaw et al. (2018)
#   <https://arxiv.org/abs/1803.02155>; Huang et al. (2018), Music Transformer
#   <https://arxiv.org/abs/1809.04281>; Dai et al. (2019), Transformer-XL
#   <https://arxiv.org/abs/1901.02860>; Raffel et al. (2020), T5
#   <https://arxiv.org/abs/1910.10683>; Press et al. (2022), ALiBi
#   <https://arxiv.org/abs/2108.12409>; Su et al. (2021), RoPE
#   <https://arxiv.org/abs/2104.09864>; Chen et al. (2023), position interpolation
#   <https://arxiv.org/abs/2306.15595>; Peng et al. (2023), YaRN
#   <https://arxiv.org/abs/2309.00071>; Sun et al. (2022), xPos
#   <https://arxiv.org/abs/2212.10554>; Heo et al. (2024), RoPE-Axial and
#   RoPE-Mixed <https://arxiv.org/abs/2403.13298>; Wang et al. (2024), Qwen2-VL
#   and M-RoPE <https://arxiv.org/abs/2409.12191>; Chi et al. (2022), KERPLE
#   <https://arxiv.org/abs/2205.09921>; Li et al. (2024), FIRE
#   <https://arxiv.org/abs/2310.04418>; Golovneva et al. (2024), CoPE
#   <https://arxiv.org/abs/2405.18719>; Ruoss et al. (2023), randomised
#   positions <https://arxiv.org/abs/2305.16843>.
# - PyTorch, `torch/nn/attention/bias.py` (`causal_lower_right`, `causal_upper_left`).
#   <https://github.com/pytorch/pytorch/blob/main/torch/nn/attention/bias.py>
# - Meta, llama-models, `models/llama4/model.py` and `args.py`
#   (`attn_temperature_tuning`). <https://github.com/meta-llama/llama-models>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020.
#   <https://arxiv.org/abs/1912.10077>
#   （位置がなければ、Transformer が近似できるのはコンパクトな台を持つ連続な置換同変関数で、そのすべてを近似できます。
#   学習可能な位置エンコーディングがあれば、コンパクトな台を持つ連続な系列から系列への関数を、どれでも近似できます。）
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional
#   Encodings Still Learn Positional Information*. Findings of EMNLP 2022.
#   <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. NeurIPS 2023.
#   <https://arxiv.org/abs/2305.19466>
# - Dufter, P., Schmitt, M., Schütze, H. (2022). *Position Information in
#   Transformers: An Overview*. Computational Linguistics 48(3).
#   <https://arxiv.org/abs/2102.11090>
# - The encodings of the map: Devlin et al. (2019), BERT
#   <https://arxiv.org/abs/1810.04805>; Radford et al. (2019), GPT-2
#   <https://github.com/openai/gpt-2>; Hua et al. (2022), FLASH
#   <https://arxiv.org/abs/2202.10447>; Shaw et al. (2018)
#   <https://arxiv.org/abs/1803.02155>; Huang et al. (2018), Music Transformer
#   <https://arxiv.org/abs/1809.04281>; Dai et al. (2019), Transformer-XL
#   <https://arxiv.org/abs/1901.02860>; Raffel et al. (2020), T5
#   <https://arxiv.org/abs/1910.10683>; Press et al. (2022), ALiBi
#   <https://arxiv.org/abs/2108.12409>; Su et al. (2021), RoPE
#   <https://arxiv.org/abs/2104.09864>; Chen et al. (2023), position interpolation
#   <https://arxiv.org/abs/2306.15595>; Peng et al. (2023), YaRN
#   <https://arxiv.org/abs/2309.00071>; Sun et al. (2022), xPos
#   <https://arxiv.org/abs/2212.10554>; Heo et al. (2024), RoPE-Axial and
#   RoPE-Mixed <https://arxiv.org/abs/2403.13298>; Wang et al. (2024), Qwen2-VL
#   and M-RoPE <https://arxiv.org/abs/2409.12191>; Chi et al. (2022), KERPLE
#   <https://arxiv.org/abs/2205.09921>; Li et al. (2024), FIRE
#   <https://arxiv.org/abs/2310.04418>; Golovneva et al. (2024), CoPE
#   <https://arxiv.org/abs/2405.18719>; Ruoss et al. (2023), randomised
#   positions <https://arxiv.org/abs/2305.16843>.
#   （地図に挙げた位置エンコーディング。）
# - PyTorch, `torch/nn/attention/bias.py` (`causal_lower_right`, `causal_upper_left`).
#   <https://github.com/pytorch/pytorch/blob/main/torch/nn/attention/bias.py>
# - Meta, llama-models, `models/llama4/model.py` and `args.py`
#   (`attn_temperature_tuning`). <https://github.com/meta-llama/llama-models>
#   （Llama 4 の NoPE の層の温度。）
