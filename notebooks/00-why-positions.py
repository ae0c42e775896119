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
# # Why attention needs positions
#
# Self-attention compares every token with every other token, but nothing in its
# formula says where a token sits. This chapter proves that, without positions,
# shuffling the tokens only shuffles the outputs, so that "dog bites man" and
# "man bites dog" look the same to the model; shows how a causal mask breaks the
# symmetry, but only partly; lists what a positional signal has to provide, each
# requirement backed by values that a code cell computes; checks that adding an
# encoding breaks the symmetry; and ends with a map of the encodings this site
# covers. Every claim is checked with `posenc.attention`.

# %% [markdown] lang="ja"
# # アテンションに位置が必要な理由
#
# セルフアテンションはすべてのトークンどうしを比べますが、
# その式のどこにも、トークンがどこにあるかは書かれていません。
# この章では、まず位置がなければトークンを並べ替えても出力が並べ替わるだけであることを証明します。
# そのため、モデルには "dog bites man" と "man bites dog" が同じに見えます。
# 次に、因果マスクがこの対称性を壊すこと、ただし一部しか壊さないことを示します。
# そのうえで、位置の信号が満たすべき条件を挙げ、それぞれをコードで計算した値で裏付けます。
# 位置エンコーディングを足すと対称性が壊れることを確かめ、
# 最後にこのサイトで扱う位置エンコーディングの全体像を示します。
# 主張はすべて `posenc.attention` で確かめます。

# %%
import itertools
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from posenc import (
    LearnedPositionalEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention,
    sinusoidal,
)
from posenc.plotting import use_site_style

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
# the permutation matrix $P$ has $P_{i\pi(i)} = 1$ and zeros elsewhere, so that
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
# else: self-attention is permutation-equivariant. The cell below checks each step
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
# 置換行列 $P$ は $P_{i\pi(i)} = 1$ でそれ以外が 0 の行列で、
# $PX$ の第 $i$ 行は $X$ の第 $\pi(i)$ 行になります。$PX$ を式に通してみましょう。
#
# 1. 射影は行ごとに独立に働くので、$P$ と交換できます。
#    $(PX)W_Q = PQ$ で、$PK$ と $PV$ も同様です。
# 2. スコアは $PQ(PK)^\top/\sqrt{d} = PSP^\top$ になります。
#    成分は $(PSP^\top)_{ij} = S_{\pi(i)\pi(j)}$ で、行と列が同じように並べ替わります。
# 3. softmax の第 $i$ 行は $e^{S_{\pi(i)\pi(j)}}$ を
#    $\sum_j e^{S_{\pi(i)\pi(j)}} = \sum_l e^{S_{\pi(i)l}}$ で割ります。これは同じ和を別の順に足しただけです。
#    したがって softmax も並べ替えと交換できます。
#    $\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$ です。
# 4. 置換行列は直交行列で $P^\top P = I$ なので、バリューとの積で打ち消し合います。
#
# まとめると次のようになります。
# $$\mathrm{softmax}\left(\frac{PQK^\top P^\top}{\sqrt{d}}\right)PV = P\,\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d}}\right)V, \qquad \mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# トークンを並べ替えると、出力が同じように並べ替わるだけで、ほかは何も変わりません。
# セルフアテンションのこの性質を置換同変（permutation-equivariant）と呼びます。
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

torch.testing.assert_close(P @ x, x[perm])  # row i of PX is row pi(i) of X
torch.testing.assert_close((P @ x) @ w_q, P @ q)  # step 1: (PX) W_Q = PQ
torch.testing.assert_close((P @ q) @ (P @ k).T / math.sqrt(d), P @ s @ P.T)  # step 2
torch.testing.assert_close((P @ s @ P.T), s[perm][:, perm])  # (P S P^T)_ij = S_pi(i)pi(j)
torch.testing.assert_close(torch.softmax(P @ s @ P.T, -1), P @ torch.softmax(s, -1) @ P.T)  # step 3
torch.testing.assert_close(P.T @ P, torch.eye(T, dtype=f64))  # step 4: P^T P = I
torch.testing.assert_close(attention(P @ q, P @ k, P @ v), P @ attention(q, k, v))  # the result

# Attn(PX) = P Attn(X) for every permutation of the six tokens
count = 0
for p in itertools.permutations(range(T)):
    p = torch.tensor(p)
    torch.testing.assert_close(self_attention(x[p]), self_attention(x)[p])
    count += 1
print(f"Attn(PX) = P Attn(X) for all {count} permutations of {T} tokens", end="")

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
    ax.imshow(mat.numpy(), cmap="viridis", vmin=0, vmax=float(a.max()), interpolation="nearest")
    labels = [f"$x_{int(t) + 1}$" for t in order]
    ax.set_xticks(range(T), labels)
    ax.set_yticks(range(T), labels)
    ax.tick_params(length=0)
    ax.grid(False)
    for i in range(T):
        for j in range(T):
            value = float(mat[i, j])
            color = "black" if value > 0.6 * float(a.max()) else "white"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=color)
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
#   The pooled output is permutation-invariant. Sums and maxima over the tokens
#   are too.
#
# Reading out a classification token, as BERT does, is no escape. Put a token
# $x_{\mathrm{cls}}$ first in both sentences: the permutation keeps it in place, so its
# output is again identical. A model without positions is a bag-of-words model,
# however many layers it has: the residual connections, the layer norms and the
# feed-forward layers act on each row separately and commute with $P$ too (the
# section on libraries checks a full PyTorch encoder layer).

# %% [markdown] lang="ja"
# ## 犬が人をかむ
#
# 3 つのトークン埋め込みで具体的に計算してみます。
# $x_{\mathrm{dog}}$、$x_{\mathrm{bites}}$、$x_{\mathrm{man}}$ をランダムなベクトルとし、
# "dog bites man"（犬が人をかむ）と "man bites dog"（人が犬をかむ）の 2 通りの順に、行として並べます。
# 日本語では「が」と「を」が役割を示すので、「人を犬がかむ」と語順を入れ替えても意味は同じです。
# 英語では、誰が誰をかんだかを決めるのは語順だけです。
# 2 つ目の文は、最初と最後の行を入れ替える $P$ を使って $PX$ と書けます。
# 置換同変から、次の 3 つのことが言えます。
#
# - "bites" はどちらの文でも真ん中にあるので、出力は両方の文でまったく同じベクトルです。
#   動詞には、誰が誰をかんだのかが分かりません。
# - "dog" は主語でも目的語でも同じ出力になり、現れる行が違うだけです。
# - 行の順序を無視する要約は、両方の文で同じになります。平均プーリングがその例です。
#   $\mathbf{1}$ を全成分が 1 のベクトルとすると、$P$ の各列には 1 がちょうど 1 つあるので
#   $\mathbf{1}^\top P = \mathbf{1}^\top$ となり、次が成り立ちます。
#   $$\frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(PX) = \frac{1}{T}\mathbf{1}^\top P\,\mathrm{Attn}(X) = \frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(X)$$
#   プーリングした出力は置換不変（permutation-invariant）です。トークンについての和や最大値も同じです。
#
# BERT のように分類用トークンの出力を読み出しても、逃げ道にはなりません。
# 両方の文の先頭にトークン $x_{\mathrm{cls}}$ を置くと、置換はそれを動かさないので、その出力もやはり同じです。
# 位置のないモデルは、層をいくつ重ねても bag-of-words（語順を無視した単語の集まり）のモデルです。
# 残差接続、層正規化、フィードフォワード層はどれも行ごとに働くので、やはり $P$ と交換できます
# （ライブラリの節で、PyTorch のエンコーダ層全体について確かめます）。

# %%
vocab = {word: torch.randn(d, dtype=f64) for word in ("cls", "dog", "bites", "man")}


def embed(sentence):
    return torch.stack([vocab[word] for word in sentence.split()])  # [T, d]


x_dbm, x_mbd = embed("dog bites man"), embed("man bites dog")
swap = permutation_matrix(torch.tensor([2, 1, 0]))
torch.testing.assert_close(x_mbd, swap @ x_dbm)  # man bites dog = P (dog bites man)

y_dbm, y_mbd = self_attention(x_dbm), self_attention(x_mbd)
torch.testing.assert_close(y_mbd, swap @ y_dbm)  # Attn(PX) = P Attn(X)
torch.testing.assert_close(y_mbd[1], y_dbm[1])  # "bites": the same output
torch.testing.assert_close(y_mbd[2], y_dbm[0])  # "dog": the same output, another row
ones = torch.ones(3, dtype=f64)
torch.testing.assert_close(ones @ swap, ones)  # 1^T P = 1^T
torch.testing.assert_close(y_mbd.mean(0), y_dbm.mean(0))  # mean pooling: invariant
torch.testing.assert_close(y_mbd.amax(0), y_dbm.amax(0))  # max pooling: invariant

# a classification token in front stays in place: its output is identical too
cls_dbm = self_attention(embed("cls dog bites man"))[0]
cls_mbd = self_attention(embed("cls man bites dog"))[0]
torch.testing.assert_close(cls_mbd, cls_dbm)


def fmt(vec):
    return " ".join(f"{value:+.4f}" for value in vec.tolist())


print(
    f"mean over tokens, dog bites man: {fmt(y_dbm.mean(0))}\n"
    f"mean over tokens, man bites dog: {fmt(y_mbd.mean(0))}",
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
# The shuffled sentence behaves like the original one under a shuffled mask. For
# the outputs to be a mere permutation, $P^\top M P = M$ would have to hold, and for
# the triangular mask it holds only for the identity: a token's set of
# visible tokens changes when it moves. The cell checks the identity, counts the
# permutations that keep $M$ (one of 720), and prints how far the outputs are from a
# permutation.
#
# The break is partial. Within one layer, the output at position $i$ is still a
# weighted sum over the set of tokens at positions $j \le i$: shuffling the tokens
# before position $i$ leaves it unchanged. Only a second layer, whose inputs at earlier
# positions now differ, sees such a shuffle.
#
# The mask is itself positional information. Let a first token (a beginning-of-sequence
# marker) carry a value feature equal to $1$, all other tokens $0$, and let the
# queries be zero, so that every visible token gets the same weight. Token $p$
# (counting from $p = 0$) sees $p + 1$ tokens, and its output feature is
# $$\frac{1}{p+1}$$
# a code of its absolute position, made by the mask alone. Haviv et al. (2022) found
# that causal language models without any positional encoding learn absolute
# positions, and Kazemnejad et al. (2023) prove that a first layer can recover them
# this way; the chapter *xPos and NoPE* builds on this.

# %% [markdown] lang="ja"
# ## 因果マスクは対称性を壊す（ただし一部だけ）
#
# デコーダでは、トークン $i$ はトークン $j \le i$ にしかアテンションを向けられません。
# そのためにスコアにマスク $M$ を足します。$j \le i$ なら $M_{ij} = 0$、$j > i$ なら $M_{ij} = -\infty$ で、
# $\mathrm{Attn}_M(X) = \mathrm{softmax}(S + M)\,V$ を計算します。
# マスクはトークンではなく位置に結び付いているので、トークンが動いても動きません。
# $M = P(P^\top M P)P^\top$ と書けるので、先ほどのステップから次が得られます。
# $$\mathrm{Attn}_M(PX) = \mathrm{softmax}\big(P(S + P^\top M P)P^\top\big)PV = P\,\mathrm{Attn}_{P^\top M P}(X)$$
# 並べ替えた文は、並べ替えたマスクのもとでの元の文と同じふるまいをします。
# 出力が単なる並べ替えになるには $P^\top M P = M$ が必要ですが、
# 三角形のマスクでこれが成り立つのは恒等置換だけです。
# トークンが動くと、そのトークンから見えるトークンの集合が変わるからです。
# 次のセルでこの等式を確かめ、$M$ を保つ置換を数え（720 通りのうち 1 つ）、
# 出力が並べ替えからどれだけずれるかを表示します。
#
# ただし、壊れるのは一部だけです。1 層の中では、位置 $i$ の出力は依然として
# 位置 $j \le i$ にあるトークンの集合についての重み付き和です。
# 位置 $i$ より前のトークンを並べ替えても、この出力は変わりません。
# その並べ替えに気づけるのは、前の位置の入力がすでに変わっている 2 層目からです。
#
# マスクそのものが位置の情報を持っています。先頭のトークン（系列の始まりを示す BOS トークン）だけが、
# バリューのある次元に値 $1$ を持ち、ほかのトークンではその次元が $0$ だとします。
# さらにクエリを 0 にして、見えるトークンすべてに同じ重みが付くようにします。
# $p = 0$ から数えてトークン $p$ には $p + 1$ 個のトークンが見えるので、出力のその次元の値は次のとおりです。
# $$\frac{1}{p+1}$$
# これはマスクだけから作られた、絶対位置の符号です。
# Haviv ら (2022) は、位置エンコーディングをまったく持たない因果的な言語モデルが絶対位置を学習することを示しました。
# Kazemnejad ら (2023) は、最初の層がこの方法で絶対位置を復元できることを証明しています。
# 「xPos と NoPE」の章では、この結果を出発点にします。

# %%
allowed = torch.ones(T, T, dtype=torch.bool).tril()  # query i sees key j iff j <= i
mask = torch.zeros(T, T, dtype=f64).masked_fill(~allowed, -math.inf)  # M
torch.testing.assert_close(self_attention(x, bias=mask), self_attention(x, causal=True))

inv = torch.argsort(perm)  # pi^-1
finite = torch.randn(T, T, dtype=f64)
# (P^T F P)_ij = F_pi^-1(i) pi^-1(j) for a finite F; for M we index (0 * inf is nan)
torch.testing.assert_close(P.T @ finite @ P, finite[inv][:, inv])
moved = mask[inv][:, inv]  # P^T M P
assert torch.equal(moved[perm][:, perm], mask)  # M = P (P^T M P) P^T
# Attn_M(PX) = P Attn_{P^T M P}(X)
torch.testing.assert_close(self_attention(x[perm], causal=True), P @ self_attention(x, bias=moved))

# only the identity keeps the triangular mask
keep = [
    p
    for p in itertools.permutations(range(T))
    if torch.equal(allowed[list(p)][:, list(p)], allowed)
]
assert keep == [tuple(range(T))]

gap = (self_attention(x[perm], causal=True) - self_attention(x, causal=True)[perm]).abs().max()
assert gap > 0.1

# partial: one layer is blind to a shuffle of the tokens before position i = 4 (0-based)
prefix = torch.tensor([2, 0, 3, 1, 4, 5])  # shuffles positions 0..3, keeps 4 and 5
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
keys = torch.randn(n, d, dtype=f64)  # irrelevant: zero queries give equal scores
counted = attention(zero_q, keys, values, causal=True)[:, 0]
torch.testing.assert_close(counted, 1 / torch.arange(1, n + 1, dtype=f64))  # 1 / (p + 1)
torch.testing.assert_close(
    attention(zero_q, keys, values)[:, 0], torch.full((n,), 1 / n, dtype=f64)
)

print(
    f"permutations that keep M: {len(keep)} of {math.factorial(T)}\n"
    f"max |Attn_M(PX) - P Attn_M(X)| = {gap:.4f}\n"
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
# the length ($p/L$), a one-hot vector over a fixed maximum length, and the
# sinusoids of the chapter *Sinusoidal positional encoding*.
#
# **Bounded values.** Token embeddings have a fixed scale: with entries drawn from
# a standard normal in $d = 64$ dimensions their norm is close to $\sqrt{d} = 8$ (8.96 and
# 7.25 for the two tokens below). The raw
# index grows without limit and swamps them. At $p = 1000$ two different tokens at the
# same position point in almost the same direction (cosine similarity 0.9999, as
# printed): the position is all the model sees. The sinusoids have norm
# $\sqrt{d/2}$ at every position.

# %% [markdown] lang="ja"
# ## 位置の信号が満たすべき条件
#
# つまりモデルには、各トークンがどこにあるかを教える必要があります。
# いちばん簡単な方法は、位置 $p$ のトークンにベクトル $PE(p)$ を足すことです。
# では $PE$ はどんな形であるべきでしょうか。以下の各条件には、直後のセルで計算した数値を添えます。
# 候補は、位置の番号そのもの（1 つの次元に $PE(p) = p$）、長さで正規化した番号 ($p/L$)、
# 固定の最大長にわたる one-hot ベクトル、そして「正弦波位置エンコーディング」の章の正弦波です。
#
# **値が有界であること。** トークンの埋め込みには決まった大きさがあります。
# 成分を標準正規分布から引いた $d = 64$ 次元のベクトルなら、ノルムは $\sqrt{d} = 8$ に近くなります（下の 2 つのトークンでは 8.96 と 7.25）。
# 位置の番号そのものは際限なく大きくなり、埋め込みを飲み込んでしまいます。
# $p = 1000$ では、同じ位置にある 2 つの異なるトークンがほぼ同じ向きを指します
# （出力のとおり、コサイン類似度は 0.9999）。モデルに見えるのは位置だけになります。
# 正弦波は、どの位置でもノルムが $\sqrt{d/2}$ です。

# %%
d64 = 64
gen = torch.Generator().manual_seed(0)  # its own generator: the quoted norms stay put
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
        f"raw index, p = {p:4d}: |PE(p)| = {pe.norm():6.1f}, cos(x_a + PE, x_b + PE) = {cos:.4f}"
    )
sin_norms = sinusoidal(torch.tensor([0, 10, 1000, 10**6]), d64, dtype=f64).norm(dim=-1)
torch.testing.assert_close(sin_norms, torch.full((4,), math.sqrt(d64 / 2), dtype=f64))  # sqrt(d/2)
lines.append(f"sinusoidal, p = 0, 10, 1000, 10**6: |PE(p)| = {fmt(sin_norms)}")
assert F.cosine_similarity(tok_a + raw_index(1000), tok_b + raw_index(1000), dim=0) > 0.9999
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
    lines.append(f"L = {L:4d}: code 0.5 is position {half}, neighbour gap 1/L = {1 / L:.3f}")
torch.testing.assert_close(
    sinusoidal(torch.arange(20), d64)[10], sinusoidal(torch.arange(1000), d64)[10]
)
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# **A unique code per position.** Two positions with the same code are the same
# position to the model. One sinusoid alone repeats: with wavelength 8, positions 0
# and 8 collide. The sinusoidal encoding pairs many frequencies with wavelengths from
# $2\pi$ up to about $10000 \cdot 2\pi$, and the closest two of the first 2048 positions are
# still clearly apart: their distance is 1.4718 (printed below). The raw index, $p/L$ and
# one-hot codes are unique too.

# %% [markdown] lang="ja"
# **位置ごとに一意な符号であること。** 同じ符号を持つ 2 つの位置は、モデルにとって同じ位置です。
# 正弦波 1 本だけでは繰り返してしまいます。波長が 8 なら、位置 0 と 8 がぶつかります。
# 正弦波位置エンコーディングは、波長が $2\pi$ からおよそ $10000 \cdot 2\pi$ までの多くの周波数を組み合わせます。
# 最初の 2048 個の位置のうちもっとも近い 2 つでも、距離は 1.4718 で、はっきり離れています（下の出力）。
# 位置の番号そのもの、$p/L$、one-hot ベクトルも一意です。


# %%
def one_wave(p, wavelength=8):
    angle = 2 * math.pi * p / wavelength
    return torch.tensor([math.sin(angle), math.cos(angle)])


torch.testing.assert_close(one_wave(0), one_wave(8))  # wavelength 8: positions 0 and 8 collide

codes = sinusoidal(torch.arange(2048), d64, dtype=f64)
dist = torch.cdist(codes, codes)
dist.fill_diagonal_(math.inf)
closest = dist.min()
assert closest > 0.1
print(f"sinusoidal, d = 64, p < 2048: min |PE(p) - PE(q)| over p != q = {closest:.4f}", end="")

# %% [markdown] lang="en"
# **A way to express offsets.** Language depends on relative positions ("the word
# before"), so "$k$ positions apart" should look the same wherever it occurs.
# Compare the similarity $PE(p)\cdot PE(q)$ of two codes. For the raw index it is $pq$:
# positions 100 and 150 are more similar than 100 and 101, and a pair at distance 1
# looks different at every $p$. One-hot codes give $0$ for every pair of distinct
# positions, so nothing is near anything. For the sinusoids the similarity is
# $\sum_i \cos\big(\omega_i (p-q)\big)$, a function of the offset alone that is
# largest at $p = q$, and $PE(p+k)$ is a fixed linear map of $PE(p)$ (both derived in
# *Sinusoidal positional encoding*).

# %% [markdown] lang="ja"
# **相対位置を表せること。** 言語は相対位置（「直前の単語」など）に依存します。
# ですから「$k$ だけ離れている」ことは、どこで起きても同じように見えるべきです。
# 2 つの符号の類似度 $PE(p)\cdot PE(q)$ を比べてみます。
# 位置の番号そのものでは、これは $pq$ です。位置 100 と 150 のほうが 100 と 101 より似ていることになり、
# 距離 1 の組も $p$ ごとに違って見えます。
# one-hot ベクトルでは、異なる位置の組はすべて $0$ になり、どの位置もほかのどの位置とも近くありません。
# 正弦波では類似度は $\sum_i \cos\big(\omega_i (p-q)\big)$ で、相対位置だけの関数であり、$p = q$ で最大になります。
# また $PE(p+k)$ は $PE(p)$ の固定の線形写像です（どちらも「正弦波位置エンコーディング」の章で導きます）。

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
        assert (
            sims[2] < sims[1] < float(code(100) @ code(100))
        )  # largest at p = q, nearer is closer
        omega = 10000.0 ** (-torch.arange(d64 // 2, dtype=f64) / (d64 // 2))
        assert math.isclose(
            sims[2], float(torch.cos(omega * 50).sum())
        )  # sum_i cos(omega_i (p - q))
    if name.startswith("raw"):
        assert sims[2] > sims[1] > sims[0]  # pq: farther looks more similar
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# **Deterministic.** Position $p$ must get the same vector in every sequence, batch
# and call, or the model cannot learn what it means: a random code drawn afresh for
# each sequence is unique but meaningless. The sinusoids are a fixed function; a
# learned table is fixed once trained.
#
# **Behaviour beyond the training length.** A one-hot code, like a learned table of
# $L$ rows, has no code at all for position $L$: `posenc`'s table raises an
# `IndexError`. The sinusoids are defined, and bounded, at every position. Whether a
# model trained on short sequences makes sense of codes it has never seen is another
# matter; the chapter *Which encodings extrapolate?* measures it.

# %% [markdown] lang="ja"
# **決定的であること。** 位置 $p$ には、どの系列、どのバッチ、どの呼び出しでも同じベクトルが付かなければなりません。
# そうでなければ、モデルはその意味を学べません。
# 系列ごとに新しく引いたランダムな符号は一意ではあっても、意味を持ちません。
# 正弦波は固定の関数で、学習型の表も学習を終えれば固定されます。
#
# **学習時の長さを超えたときのふるまい。** one-hot ベクトルには、$L$ 行の学習型の表と同じく、位置 $L$ の符号がそもそもありません。
# `posenc` の表は `IndexError` を送出します。
# 正弦波はどの位置でも定義されていて、有界です。
# ただし、短い系列で学習したモデルが見たことのない符号をうまく扱えるかどうかは別の問題です。
# それは「どの位置エンコーディングが外挿できるか」の章で測ります。

# %%
p = torch.arange(512)
assert torch.equal(sinusoidal(p, d64), sinusoidal(p, d64))  # the same vectors every call
draw_1, draw_2 = torch.randn(2, d64)  # a random code for position 3, drawn twice
assert not torch.equal(draw_1, draw_2)

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
# shuffled input is $PX + E$, while a mere permutation of the outputs would need
# $P(X + E) = PX + P\,E$, the product of $P$ and $E$. The two agree only if
# $P\,E = E$, that is if $PE(\pi(i)) = PE(i)$ for every $i$, and unique codes rule
# that out for every $\pi$ other than the identity. The cell checks all 719 other
# permutations of the six tokens, and "dog bites man" and "man bites dog" now pool
# to different vectors.

# %% [markdown] lang="ja"
# ## 位置を足すと対称性が壊れる
#
# 入力に正弦波の符号、つまり各行が $PE(0), \dots, PE(T-1)$ の行列 $E$ を足します。
# 置換でトークンは動きますが、符号は位置に留まります。並べ替えた入力は $PX + E$ です。
# 一方、出力が単なる並べ替えになるには $P(X + E) = PX + P\,E$（$P$ と $E$ の積）が必要です。
# 両者が一致するのは $P\,E = E$、つまりすべての $i$ で $PE(\pi(i)) = PE(i)$ のときだけです。
# 符号が一意なら、恒等置換以外の $\pi$ ではこれは起こりません。
# 次のセルで、6 個のトークンの残り 719 通りの置換をすべて確かめます。
# "dog bites man" と "man bites dog" も、プーリングすると別々のベクトルになります。

# %%
e = sinusoidal(torch.arange(T), d, dtype=f64)  # E, one row per position
smallest = math.inf
others = 0
for p in itertools.permutations(range(T)):
    if p == tuple(range(T)):
        continue
    p = torch.tensor(p)
    assert not torch.equal(e[p], e)  # P E != E (the product, not the code PE(p))
    broken = (self_attention(x[p] + e) - self_attention(x + e)[p]).abs().max()
    smallest = min(smallest, float(broken))
    others += 1
assert others == 719 and smallest > 1e-3

pos_dbm, pos_mbd = self_attention(x_dbm + e[:3]), self_attention(x_mbd + e[:3])
assert not torch.allclose(pos_mbd, swap @ pos_dbm, atol=1e-3)
assert not torch.allclose(pos_mbd.mean(0), pos_dbm.mean(0), atol=1e-3)
print(
    f"smallest max |Attn(PX + E) - P Attn(X + E)| over {others} permutations: {smallest:.4f}\n"
    f"mean over tokens, dog bites man: {fmt(pos_dbm.mean(0))}\n"
    f"mean over tokens, man bites dog: {fmt(pos_mbd.mean(0))}",
    end="",
)

# %% [markdown] lang="en"
# ## Where positions can enter: a map of the site
#
# Adding a code to the input is one of three places where position information can
# enter attention. Writing $m$ for the position of a query and $n$ for that of a key:
#
# - **added to the input**: each token becomes $x_m + PE(m)$ before the first layer;
#   the score then mixes content and absolute positions;
# - **a bias on the scores**: the score becomes $q_m^\top k_n/\sqrt{d} + b(m-n)$, with $b$
#   learned or fixed; the positions enter only through the relative position;
# - **a rotation of $q$ and $k$**: $(R_m q_m)^\top (R_n k_n) = q_m^\top R_{n-m} k_n$, again
#   relative.
#
# The cell below applies each one with `posenc` and checks two things: every one of
# them breaks the equivariance, and the bias and the rotation are relative, so
# shifting all positions by the same amount changes nothing, while the absolute code
# does change the outputs. The figure then compares how far each variant is from a
# permutation of its outputs, averaged over random permutations of eight tokens:
# $S$ is plain attention, $S+M$ the causal mask alone, $X+E$ the sinusoidal input, $S+B$
# an ALiBi bias (the steepest head of eight) and $R$ the rotation of RoPE.

# %% [markdown] lang="ja"
# ## 位置が入る場所：このサイトの地図
#
# 入力に符号を足すのは、位置の情報がアテンションに入る 3 つの場所のうちの 1 つです。
# クエリの位置を $m$、キーの位置を $n$ と書きます。
#
# - **入力に足す**：最初の層の前に、各トークンを $x_m + PE(m)$ にします。
#   スコアには内容と絶対位置が混ざります。
# - **スコアにバイアスを足す**：スコアを $q_m^\top k_n/\sqrt{d} + b(m-n)$ にします。$b$ は学習するものと固定のものがあります。
#   位置は相対位置を通してだけ入ります。
# - **$q$ と $k$ を回転する**：$(R_m q_m)^\top (R_n k_n) = q_m^\top R_{n-m} k_n$ です。これも相対位置です。
#
# 次のセルでは、それぞれを `posenc` で適用し、2 つのことを確かめます。
# どの方法も置換同変を壊すこと、そしてバイアスと回転は相対位置を使うので、
# すべての位置を同じだけずらしても何も変わらないことです。絶対位置の符号では出力が変わります。
# 続く図では、それぞれの方法の出力が並べ替えからどれだけ離れるかを、
# 8 個のトークンのランダムな置換について平均して比べます。
# $S$ は素のアテンション、$S+M$ は因果マスクだけ、$X+E$ は正弦波を足した入力、
# $S+B$ は ALiBi のバイアス（8 ヘッドのうちもっとも傾きの大きいヘッド）、$R$ は RoPE の回転です。

# %% alt={"en": ["Bar chart of the distance from permutation equivariance for five variants on eight tokens: plain attention S is 0, the causal mask S+M 1.19, sinusoidal input X+E 0.41, ALiBi bias S+B 0.46, RoPE rotation R 0.37."], "ja": ["8 個のトークンで、5 つの方法が置換同変からどれだけ離れるかを示す棒グラフ。素のアテンション S は 0、因果マスク S+M は 1.19、正弦波の入力 X+E は 0.41、ALiBi のバイアス S+B は 0.46、RoPE の回転 R は 0.37 です。"]}
T8 = 8
x8 = torch.randn(T8, d, dtype=f64)
pos8 = torch.arange(T8)
slope = float(alibi_slopes(8)[0])  # the steepest slope of ALiBi's 8 heads, m_1 = 1/2


def variants(x, positions):
    """Each way of adding positions, as a function of the tokens x: [T, d] -> [T, d]."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    gaps = (positions[:, None] - positions[None, :]).abs().to(f64)  # |m - n|
    return {
        "$S$": attention(q, k, v),
        "$S+M$": attention(q, k, v, causal=True),
        "$X+E$": self_attention(x + sinusoidal(positions, d, dtype=f64)),
        "$S+B$": attention(q, k, v, bias=-slope * gaps),  # ALiBi, bidirectional
        "$R$": attention(apply_rope(q, positions), apply_rope(k, positions), v),
    }


# the bias is ALiBi's first head of 8, bidirectional (causal=False): -m_1 |m - n|
assert slope == 0.5
bias = alibi_bias(8, T8, causal=False)[0].to(f64)
torch.testing.assert_close(bias, -slope * (pos8[:, None] - pos8[None, :]).abs().to(f64))

# relative schemes ignore a common shift of all positions; the absolute one does not
here, shifted = variants(x8, pos8), variants(x8, pos8 + 100)
for name in ("$S+B$", "$R$"):
    torch.testing.assert_close(shifted[name], here[name])
assert not torch.allclose(shifted["$X+E$"], here["$X+E$"], atol=1e-3)

# (R_m q)^T (R_n k) = q^T R_{n-m} k: the rotated score depends on n - m only
qr, kr = x8 @ w_q, x8 @ w_k
m_pos, n_pos = torch.tensor(5), torch.tensor(2)
lhs = apply_rope(qr[0], m_pos) @ apply_rope(kr[1], n_pos)
rhs = qr[0] @ apply_rope(kr[1], n_pos - m_pos)
torch.testing.assert_close(lhs, rhs)

# distance from equivariance, ||f(PX) - P f(X)|| / ||f(X)||, averaged over permutations
n_perms = 200
distance = dict.fromkeys(here, 0.0)
for _ in range(n_perms):
    p8 = torch.randperm(T8)
    moved_out = variants(x8[p8], pos8)
    for name, out in here.items():
        distance[name] += float((moved_out[name] - out[p8]).norm() / out.norm()) / n_perms
assert distance["$S$"] < 1e-12
assert min(value for name, value in distance.items() if name != "$S$") > 0.05
print("  ".join(f"{name.strip('$')}: {value:.3f}" for name, value in distance.items()), end="")

fig, ax = plt.subplots(figsize=(6.4, 3.0))
bars = ax.bar(range(len(distance)), list(distance.values()), color="#0072B2", width=0.6)
ax.bar_label(bars, fmt="%.3f", padding=2)
ax.set_ylim(0, 1.15 * max(distance.values()))
ax.set_xticks(range(len(distance)), list(distance))
ax.set_ylabel(r"$\|f(PX) - P f(X)\| \,/\, \|f(X)\|$")
ax.grid(axis="x", visible=False)
plt.show()

# %% [markdown] lang="en"
# Plain attention sits at zero: its outputs are exactly a permutation. Every other
# variant is far from one. The families the site covers, by where they enter:
#
# | family | encoding | where it enters | a model that uses it |
# |---|---|---|---|
# | absolute | sinusoidal (Vaswani et al. 2017) | added to the input | the original Transformer |
# | absolute | learned | added to the input | BERT, GPT-2 |
# | absolute | scaled sinusoidal (Hua et al. 2022) | added to the input, times one learned scalar | FLASH |
# | relative | Shaw et al. (2018) | a learned vector per clipped offset, added to the keys (and values) | Music Transformer |
# | relative | Transformer-XL (Dai et al. 2019) | terms in the scores from a sinusoidal code of the offset | Transformer-XL, XLNet |
# | relative | T5 buckets (Raffel et al. 2020) | a learned bias on the scores, one per bucket of offsets | T5 |
# | relative | ALiBi (Press et al. 2022) | a fixed bias on the scores, linear in the distance | BLOOM, MPT |
# | rotary | RoPE (Su et al. 2021) | a rotation of $q$ and $k$ | Llama, GPT-NeoX |
# | rotary | RoPE context extensions (position interpolation, NTK, YaRN, Llama 3) | a rotation of $q$ and $k$ with rescaled frequencies | Llama 3.1 |
# | rotary | xPos (Sun et al. 2022) | a rotation of $q$ and $k$, plus an exponential scaling | LEX Transformer |
# | none | NoPE | nothing but the causal mask | Llama 4 (every fourth layer) |
#
# Dufter, Schmitt and Schütze (2022) survey many more variants along similar axes.

# %% [markdown] lang="ja"
# 素のアテンションの値はゼロで、出力はちょうど並べ替えになっています。
# ほかの方法はどれも並べ替えから大きく離れます。
# このサイトで扱う位置エンコーディングを、入る場所ごとにまとめます。
#
# | 分類 | 位置エンコーディング | 入る場所 | 採用しているモデル |
# |---|---|---|---|
# | 絶対位置 | 正弦波 (Vaswani ら 2017) | 入力に足す | 元の Transformer |
# | 絶対位置 | 学習型 | 入力に足す | BERT、GPT-2 |
# | 絶対位置 | スケール付き正弦波 (Hua ら 2022) | 学習可能なスカラーを 1 つ掛けて入力に足す | FLASH |
# | 相対位置 | Shaw ら (2018) | クリップした相対位置ごとに学習したベクトルを、キー（とバリュー）に足す | Music Transformer |
# | 相対位置 | Transformer-XL (Dai ら 2019) | 相対位置の正弦波符号から作った項をスコアに足す | Transformer-XL、XLNet |
# | 相対位置 | T5 のバケット (Raffel ら 2020) | バケットごとに学習したバイアスをスコアに足す | T5 |
# | 相対位置 | ALiBi (Press ら 2022) | 距離に比例する固定のバイアスをスコアに足す | BLOOM、MPT |
# | 回転 | RoPE (Su ら 2021) | $q$ と $k$ を回転する | Llama、GPT-NeoX |
# | 回転 | RoPE のコンテキスト長の拡張（位置補間、NTK、YaRN、Llama 3） | 周波数を調整して $q$ と $k$ を回転する | Llama 3.1 |
# | 回転 | xPos (Sun ら 2022) | $q$ と $k$ を回転し、さらに指数的にスケールする | LEX Transformer |
# | なし | NoPE | 因果マスクのみ | Llama 4（4 層に 1 層） |
#
# Dufter、Schmitt、Schütze (2022) は、似た観点でさらに多くの変種を概観しています。

# %% [markdown] lang="en"
# ## How libraries differ
#
# **No positions inside the attention modules.** PyTorch's `nn.MultiheadAttention`
# and `nn.TransformerEncoderLayer` add no positional encoding; the caller must add
# one. A full encoder layer (attention, residual connections, layer norms,
# feed-forward layer) is therefore permutation-equivariant, and so is a stack of them.
#
# **Where the causal queries sit.** A causal mask fixes positions, and libraries do
# not agree on which. When there are fewer queries than keys (decoding with a KV cache),
# `posenc.attention` places the queries at the end of the keys, so the last query
# sees every key. `torch.nn.functional.scaled_dot_product_attention` with
# `is_causal=True` aligns them to the start instead, so its first query sees only the
# first key; `torch.nn.attention.bias.causal_lower_right` gives the end-aligned mask.
# For as many queries as keys all three agree.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# **アテンションのモジュール自体は位置を持ちません。** PyTorch の `nn.MultiheadAttention` と
# `nn.TransformerEncoderLayer` は位置エンコーディングを足しません。呼び出す側が足す必要があります。
# そのため、エンコーダ層全体（アテンション、残差接続、層正規化、フィードフォワード層）は置換同変で、
# それを積み重ねたものも置換同変です。
#
# **因果マスクでのクエリの位置。** 因果マスクはクエリとキーの位置関係を決めますが、その決め方はライブラリによって違います。
# クエリがキーより少ないとき（KV キャッシュを使ったデコード）、
# `posenc.attention` はクエリをキーの末尾にそろえるので、最後のクエリはすべてのキーを見ます。
# `torch.nn.functional.scaled_dot_product_attention` に `is_causal=True` を渡すと、
# 逆に先頭にそろえるので、最初のクエリは最初のキーしか見ません。
# 末尾にそろえたマスクは `torch.nn.attention.bias.causal_lower_right` で作れます。
# クエリとキーの数が同じなら、3 つとも一致します。

# %%
layers = [torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval() for _ in range(2)]
xb = torch.randn(1, 7, 16)
pb = torch.randperm(7)
with torch.no_grad():
    out, out_perm = xb, xb[:, pb]
    for layer in layers:
        out, out_perm = layer(out), layer(out_perm)
torch.testing.assert_close(out_perm, out[:, pb])  # two encoder layers: equivariant

qc, kc, vc = torch.randn(2, 3, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 8)  # 3 queries, 7 keys
ours = attention(qc, kc, vc, causal=True)
torch.testing.assert_close(
    ours, F.scaled_dot_product_attention(qc, kc, vc, attn_mask=causal_lower_right(3, 7))
)
torch.testing.assert_close(ours[:, -1], attention(qc, kc, vc)[:, -1])  # last query: every key
theirs = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
torch.testing.assert_close(theirs[:, 0], vc[:, 0])  # first query: only the first key
assert not torch.allclose(ours, theirs, atol=1e-3)
qs = torch.randn(2, 7, 8)  # as many queries as keys
torch.testing.assert_close(
    attention(qs, kc, vc, causal=True), F.scaled_dot_product_attention(qs, kc, vc, is_causal=True)
)

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
# 1. 残差接続、層正規化、位置ごとのフィードフォワード層のそれぞれが $f(PX) = P f(X)$ を満たすことを証明し、
#    位置のないエンコーダ全体も満たすと結論してください。
#    証明のどこで、すべての行に同じ重みが働くことを使いましたか。
# 2. トークンを繰り返します。位置のない "the dog saw the cat" で、2 つの "the" が
#    どの層でも同じ出力になることを示してください。`posenc.attention` で確かめ、
#    次に `posenc.sinusoidal` を足すと同じでなくなることを確かめてください。
# 3. スライディングウィンドウのマスク（トークン $i$ が $|i-j| \le w$ の $j$ を見る）を保つ置換はどれでしょうか。
#    ウィンドウに制限した因果マスクではどうでしょうか。$T = 6$ で数え、三角形のマスクと比べてください。
# 4. $p$ の 2 進数の各桁を位置の符号として使います。条件の表のどの行を満たすでしょうか。
#    距離 1 のいくつかの組について $PE(p)\cdot PE(q)$ を計算してください。

# %% [markdown] lang="en"
# ## References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020. Without positions, Transformers
#   approximate exactly the permutation-equivariant functions; with positional
#   encodings, any continuous sequence-to-sequence function.
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
#   <https://arxiv.org/abs/2212.10554>.
# - PyTorch, `torch/nn/attention/bias.py` (`causal_lower_right`, `causal_upper_left`).
#   <https://github.com/pytorch/pytorch/blob/main/torch/nn/attention/bias.py>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020.
#   位置がなければ Transformer が近似できるのはちょうど置換同変な関数であり、
#   位置エンコーディングがあれば任意の連続な系列から系列への関数を近似できることを示しています。
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
# - 地図に挙げた位置エンコーディング：Devlin ら (2019)、BERT
#   <https://arxiv.org/abs/1810.04805>、Radford ら (2019)、GPT-2
#   <https://github.com/openai/gpt-2>、Hua ら (2022)、FLASH
#   <https://arxiv.org/abs/2202.10447>、Shaw ら (2018)
#   <https://arxiv.org/abs/1803.02155>、Huang ら (2018)、Music Transformer
#   <https://arxiv.org/abs/1809.04281>、Dai ら (2019)、Transformer-XL
#   <https://arxiv.org/abs/1901.02860>、Raffel ら (2020)、T5
#   <https://arxiv.org/abs/1910.10683>、Press ら (2022)、ALiBi
#   <https://arxiv.org/abs/2108.12409>、Su ら (2021)、RoPE
#   <https://arxiv.org/abs/2104.09864>、Chen ら (2023)、位置補間
#   <https://arxiv.org/abs/2306.15595>、Peng ら (2023)、YaRN
#   <https://arxiv.org/abs/2309.00071>、Sun ら (2022)、xPos
#   <https://arxiv.org/abs/2212.10554>。
# - PyTorch、`torch/nn/attention/bias.py`（`causal_lower_right`、`causal_upper_left`）。
#   <https://github.com/pytorch/pytorch/blob/main/torch/nn/attention/bias.py>
