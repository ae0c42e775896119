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
# Nothing in self-attention's formula says where a token sits: shuffle the tokens
# and the outputs are only shuffled, so "dog bites man" and "man bites dog" look
# alike to the model.
# A causal mask breaks this symmetry only partly; an added positional code can
# break it if no two positions share a code, and a handful more properties make it useful.
# A map then shows where each encoding of this site lets positions in.

# %% [markdown] lang="ja"
# # アテンションに位置が必要な理由
#
# セルフアテンションの式のどこにも、トークンがどこにあるかは書かれていません。
# トークンを並べ替えても出力が並べ替わるだけなので、モデルには「dog bites man」と「man bites dog」が同じに見えます。
# 因果マスクはこの対称性を一部しか壊しません。位置ごとに異なる符号を足せば対称性は壊せます。その符号が実際に役立つには、さらにいくつかの性質が必要です。
# 最後に、このサイトで扱う位置エンコーディングが位置の情報をモデルのどこに入れるのかを、1 枚の地図にまとめます。

# %% tags=["setup"]
import itertools
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import alibi_slopes, apply_rope, attention, sinusoidal
from posenc_lab.plotting import use_site_style

torch.manual_seed(0)
use_site_style()

# %% [markdown] lang="en"
# ## Self-attention sees a set, not a sequence
#
# Put the $T$ token vectors in the rows of a matrix $X$ and project them to
# queries, keys and values, $Q = XW_Q$, $K = XW_K$, $V = XW_V$. With the score
# matrix $S = QK^\top/\sqrt{d}$, self-attention is
# $$\mathrm{Attn}(X) = \mathrm{softmax}(S)\,V$$
# where the softmax acts on each row (symbols as on the
# [notation page](../docs/notation.md)). Reorder the tokens by a permutation $\pi$:
# the [permutation matrix](../docs/glossary.md#permutation-matrix) $P$ has
# $P_{i\pi(i)} = 1$ and zeros elsewhere, so that row $i$ of $PX$ is row $\pi(i)$
# of $X$. Follow $PX$ through the formula.
#
# 1. The projections act on each row separately, so they commute with $P$:
#    $(PX)W_Q = PQ$, and likewise $PK$ and $PV$.
# 2. The scores become $PQ(PK)^\top/\sqrt{d} = PSP^\top$, whose entries are
#    $(PSP^\top)_{ij} = S_{\pi(i)\pi(j)}$: rows and columns are reordered together.
# 3. Row $i$ of the softmax divides $e^{S_{\pi(i)\pi(j)}}$ by
#    $\sum_j e^{S_{\pi(i)\pi(j)}} = \sum_l e^{S_{\pi(i)l}}$, the same sum in another order,
#    so the softmax commutes with the reordering:
#    $\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$.
# 4. A permutation matrix is orthogonal, $P^\top P = I$, so the transposed permutation
#    left on the right of the softmax cancels against the one on the values.
#
# Together:
# $$\mathrm{softmax}\left(\frac{PQK^\top P^\top}{\sqrt{d}}\right)PV = P\,\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d}}\right)V, \qquad \mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# Shuffling the tokens shuffles the outputs in the same way and changes nothing
# else: self-attention is
# [permutation-equivariant](../docs/glossary.md#permutation-equivariant).
#
# In the figure, the weights $A = \mathrm{softmax}(S)$ of six tokens reappear as
# $PAP^\top$ when the tokens come in another order: which tokens meet decides the
# weights, not where they are.

# %% [markdown] lang="ja"
# ## セルフアテンションが見ているのは系列ではなく集合
#
# $T$ 個のトークンベクトルを行列 $X$ の各行に並べ、
# クエリ、キー、バリュー $Q = XW_Q$、$K = XW_K$、$V = XW_V$ に射影します。
# スコア行列を $S = QK^\top/\sqrt{d}$ とすると、セルフアテンションは次の式で表されます。
# $$\mathrm{Attn}(X) = \mathrm{softmax}(S)\,V$$
# softmax は行ごとに適用します（記号は[記法のページ](../docs/notation.ja.md)に従います）。
# ここでトークンを置換 $\pi$ で並べ替えます。
# [置換行列](../docs/glossary.ja.md#permutation-matrix) $P$ は $P_{i\pi(i)} = 1$ でそれ以外が 0 の行列で、
# $PX$ の第 $i$ 行は $X$ の第 $\pi(i)$ 行になります。$PX$ を式に通してみましょう。
#
# 1. 射影は行ごとに独立して働くので、$P$ と交換できます。
#    $(PX)W_Q = PQ$ で、$PK$ と $PV$ も同様です。
# 2. スコアは $PQ(PK)^\top/\sqrt{d} = PSP^\top$ になります。
#    成分は $(PSP^\top)_{ij} = S_{\pi(i)\pi(j)}$ で、行と列が同じように並べ替わります。
# 3. softmax の第 $i$ 行は $e^{S_{\pi(i)\pi(j)}}$ を
#    $\sum_j e^{S_{\pi(i)\pi(j)}} = \sum_l e^{S_{\pi(i)l}}$ で割ります。これは同じ和を別の順に足しただけです。
#    したがって softmax も並べ替えと交換でき、$\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$ です。
# 4. 置換行列は直交行列なので $P^\top P = I$ です。
#    そのため、softmax の右に残った転置の置換行列は、バリューに掛かる置換行列と打ち消し合います。
#
# まとめると次のとおりです。
# $$\mathrm{softmax}\left(\frac{PQK^\top P^\top}{\sqrt{d}}\right)PV = P\,\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d}}\right)V, \qquad \mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# トークンを並べ替えると、出力が同じように並べ替わるだけで、ほかは何も変わりません。
# セルフアテンションは[置換同変](../docs/glossary.ja.md#permutation-equivariant)です。
#
# 図では、6 個のトークンの重み $A = \mathrm{softmax}(S)$ が、トークンを別の順に並べると $PAP^\top$ として現れます。
# 重みを決めるのは、トークンがどこにあるかではなく、どのトークンどうしが出会うかです。

# %%
T, d = 6, 8
f64 = torch.float64
x = torch.randn(T, d, dtype=f64)  # rows are tokens
w_q, w_k, w_v = (torch.randn(d, d, dtype=f64) / math.sqrt(d) for _ in range(3))


def self_attention(x, **kwargs):
    """Attn(X) = softmax(X W_Q (X W_K)^T / sqrt(d) + bias) X W_V; x: [T, d]."""
    return attention(x @ w_q, x @ w_k, x @ w_v, **kwargs)


perm = torch.tensor([3, 0, 5, 1, 4, 2])  # pi, 0-based; any permutation works
P = torch.eye(T, dtype=f64)[perm]  # P[i, pi(i)] = 1: row i of PX is x[pi(i)]


# %% tags=["figure"] alt={"en": ["Two heatmaps of attention weights for six tokens, queries i down and keys j across, each cell labelled with its weight. The right one, for the tokens in another order, holds the same numbers with rows and columns reordered together."], "ja": ["6 個のトークンのアテンションの重みを、行をクエリ i、列をキー j として数値入りで示した 2 つのヒートマップ。右はトークンを別の順に並べたもので、同じ数値が、行と列を同じように並べ替えた位置に現れます。"]}
def attention_weights(x):
    """A = softmax(X W_Q (X W_K)^T / sqrt(d)); x: [T, d] -> [T, T]."""
    return torch.softmax((x @ w_q) @ (x @ w_k).T / math.sqrt(d), dim=-1)


a = attention_weights(x)
a_perm = attention_weights(x[perm])

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
                fontsize=9,
                color=color,
            )
    ax.set_xlabel("$j$")
    ax.set_ylabel("$i$", rotation=0, labelpad=10)  # upright: one letter
    ax.set_title(title)
plt.show()

# %% tags=["check"] summary={"en": "row i of PX is row π(i) of X; PSPᵀ holds S_π(i)π(j); the softmax commutes with the reordering; the right panel is PAPᵀ; Attn(PX) = P Attn(X) for all 720 orders", "ja": "PX の第 i 行は X の第 π(i) 行で、PSPᵀ の成分は S_π(i)π(j) です。softmax は並べ替えと交換でき、右の図は PAPᵀ です。720 通りすべてで Attn(PX) = P Attn(X) が成り立ちます"}
s = (x @ w_q) @ (x @ w_k).T / math.sqrt(d)  # S = Q K^T / sqrt(d)
assert_close(P @ x, x[perm])  # row i of PX is row pi(i) of X
assert_close(P @ s @ P.T, s[perm][:, perm])  # step 2: entries S_pi(i)pi(j)
# step 3: softmax(P S P^T) = P softmax(S) P^T
assert_close(torch.softmax(P @ s @ P.T, -1), P @ torch.softmax(s, -1) @ P.T)
assert_close(a_perm, P @ a @ P.T)  # the figure: A(PX) = P A P^T
# Attn(PX) = P Attn(X) for every permutation of the six tokens, in one batch
perms = torch.tensor(list(itertools.permutations(range(T))))  # [720, T]
assert len(perms) == 720
assert_close(self_attention(x[perms]), self_attention(x)[perms])

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what a Transformer without positions can compute.** Yun et al.
# (2020) make this section's point exact in the language of approximation: without
# positions, Transformers can approximate every continuous permutation-equivariant
# function of compact support, and every function they compute is
# permutation-equivariant; with trainable positional
# encodings, every continuous sequence-to-sequence function on a compact domain.
# Both approximate in an $\ell^p$ norm, $1 \le p < \infty$, not uniformly.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：位置のない Transformer が計算できるもの**
#
# Yun ら（2020）は、この節の主張を近似理論の言葉で厳密に述べています。
# 位置のない Transformer は、コンパクトな台を持つ連続な置換同変関数ならどれでも近似でき、計算する関数はどれも置換同変です。
# 学習可能な位置エンコーディングがあれば、コンパクトな定義域の上で連続な、系列から系列への関数ならどれでも近似できます。
# どちらも一様な近似ではなく、$1 \le p < \infty$ の $\ell^p$ ノルムでの近似です。

# %% [markdown] lang="en"
# ## Dog bites man
#
# Stack three random token embeddings $x_{\mathrm{dog}}$, $x_{\mathrm{bites}}$ and
# $x_{\mathrm{man}}$ in two orders: "man bites dog" is $PX$ for the $P$ that swaps
# the first and last rows of "dog bites man". Equivariance says three things.
#
# - "bites" stays in the middle and gets the same output: it cannot tell who bit whom.
# - "dog" gets the same output as subject and as object, only in another row.
# - Any summary that ignores the order of the rows is the same for both sentences:
#   mean pooling, $\frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(PX) = \frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(X)$
#   since $\mathbf{1}^\top P = \mathbf{1}^\top$ ($\mathbf{1}$ the vector of ones), is
#   [permutation-invariant](../docs/glossary.md#permutation-invariant), and so are
#   sums and maxima over the tokens.
#
# A classification token $x_{\mathrm{cls}}$ put first, as in BERT, stays in place,
# so its output is identical too. However many layers it has, an encoder without
# positions (no causal mask) is a bag-of-words model: the
# [residual connections](../docs/glossary.md#residual-connection),
# [layer norms](../docs/glossary.md#layer-normalisation) and feed-forward layers
# act on each row alike and commute with $P$ too (exercise 1).

# %% [markdown] lang="ja"
# ## 犬が人をかむ
#
# ランダムな 3 つのトークンの埋め込み $x_{\mathrm{dog}}$、$x_{\mathrm{bites}}$、$x_{\mathrm{man}}$ を 2 通りの順に並べます。
# 「man bites dog」（人が犬をかむ）は、「dog bites man」（犬が人をかむ）の最初と最後の行を入れ替える $P$ で $PX$ と書けます。
# 置換同変であることから、次の 3 つが言えます。
#
# - 「bites」はどちらの文でも真ん中にあり、出力も同じです。そのため、「bites」の出力からは誰が誰をかんだのかを区別できません。
# - 「dog」の出力は主語と目的語のどちらの場合も同じで、現れる行が違うだけです。
# - 行の順序を無視する要約は、両方の文で同じです。たとえば平均プーリングは、$\mathbf{1}^\top P = \mathbf{1}^\top$（$\mathbf{1}$ は全成分が 1 のベクトル）なので
#   $\frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(PX) = \frac{1}{T}\mathbf{1}^\top\mathrm{Attn}(X)$ となり、[置換不変](../docs/glossary.ja.md#permutation-invariant)です。トークンについての和や最大値も同様です。
#
# BERT のように先頭に置く分類用トークン $x_{\mathrm{cls}}$ は動かないので、その出力も同じです。
# 因果マスクのないエンコーダは、位置がなければ、層をいくつ重ねても bag-of-words（語順を無視した単語の集まり）のモデルです。
# [残差接続](../docs/glossary.ja.md#residual-connection)、[層正規化](../docs/glossary.ja.md#layer-normalisation)、フィードフォワード層も、すべての行に同じように働くので $P$ と交換できるからです（演習 1）。

# %%
vocab = {w: torch.randn(d, dtype=f64) for w in ("cls", "dog", "bites", "man")}


def embed(sentence):  # one row per word: [T, d]
    return torch.stack([vocab[word] for word in sentence.split()])


def fmt(vec):
    return " ".join(f"{value:+.3f}" for value in vec.tolist())


x_dbm, x_mbd = embed("dog bites man"), embed("man bites dog")
y_dbm, y_mbd = self_attention(x_dbm), self_attention(x_mbd)
print(f"dog bites man, mean: {fmt(y_dbm.mean(0))}")
print(f"man bites dog, mean: {fmt(y_mbd.mean(0))}", end="")

# %% tags=["check"] summary={"en": "bites gets the same output, dog the same in another row; mean, max and a CLS token agree", "ja": "bites の出力は同じ、dog は行が違うだけで同じで、平均、最大値、分類用トークンも一致します"}
swap = torch.eye(3, dtype=f64)[[2, 1, 0]]  # swaps the first and last rows
assert_close(x_mbd, swap @ x_dbm)  # man bites dog = P (dog bites man)
assert_close(y_mbd, swap @ y_dbm)  # Attn(PX) = P Attn(X)
assert_close(y_mbd[1], y_dbm[1])  # "bites": the same output
assert_close(y_mbd[2], y_dbm[0])  # "dog": the same output, another row
ones = torch.ones(3, dtype=f64)
assert_close(ones @ swap, ones)  # 1^T P = 1^T
assert_close(y_mbd.mean(0), y_dbm.mean(0))  # mean pooling: invariant
assert_close(y_mbd.amax(0), y_dbm.amax(0))  # max pooling: invariant
# a classification token in front stays in place: its output is identical too
cls_dbm = self_attention(embed("cls dog bites man"))[0]
cls_mbd = self_attention(embed("cls man bites dog"))[0]
assert_close(cls_mbd, cls_dbm)

# %% [markdown] lang="en"
# ## A causal mask breaks the symmetry, partly
#
# A decoder lets token $i$ attend only to tokens $j \le i$: it adds a
# [causal mask](../docs/glossary.md#causal-mask) $M$ to the scores,
# $M_{ij} = 0$ for $j \le i$ and $M_{ij} = -\infty$ for $j > i$, and computes
# $\mathrm{Attn}_M(X) = \mathrm{softmax}(S + M)\,V$. The mask belongs to the
# positions, not to the tokens, so it stays put when the tokens move. Since
# $M = P(P^\top M P)P^\top$ and, by step 2 of the first section, the shuffled
# scores are $PSP^\top$,
# $$PSP^\top + M = P\,(S + P^\top M P)\,P^\top$$
# so the four steps go through with $S + P^\top M P$ in place of $S$ and give
# $$\mathrm{Attn}_M(PX) = \mathrm{softmax}\big(P(S + P^\top M P)P^\top\big)PV = P\,\mathrm{Attn}_{P^\top M P}(X)$$
# The shuffled sentence behaves like the original one under a shuffled mask. For
# the triangular mask $P^\top M P = M$ holds only for the identity: a token that
# moves sees another set of tokens. So the outputs are no longer guaranteed to
# permute, and for these random tokens, under every one of the 719 other orders,
# they are indeed no longer a mere permutation.
#
# The break is partial. Within one layer, the output at position $i$ is still a
# weighted sum over the set of tokens at positions $j \le i$, blind to their order;
# only a second layer, whose earlier inputs now differ, notices.

# %% [markdown] lang="ja"
# ## 因果マスクは対称性を壊す（ただし一部だけ）
#
# デコーダでは、トークン $i$ はトークン $j \le i$ にしかアテンションを向けられないように、スコアに[因果マスク](../docs/glossary.ja.md#causal-mask) $M$ を足します。
# $j \le i$ なら $M_{ij} = 0$、$j > i$ なら $M_{ij} = -\infty$ で、
# $\mathrm{Attn}_M(X) = \mathrm{softmax}(S + M)\,V$ を計算します。
# マスクはトークンでなく位置に付いているので、トークンが動いても動きません。
# $M = P(P^\top M P)P^\top$ と書け、最初の節の手順 2 から並べ替えた文のスコアは $PSP^\top$ なので、
# $$PSP^\top + M = P\,(S + P^\top M P)\,P^\top$$
# です。そこで最初の節の 1〜4 の手順を $S$ の代わりに $S + P^\top M P$ でたどると、次が得られます。
# $$\mathrm{Attn}_M(PX) = \mathrm{softmax}\big(P(S + P^\top M P)P^\top\big)PV = P\,\mathrm{Attn}_{P^\top M P}(X)$$
# つまり、並べ替えた文を元のマスクで処理した出力は、元の文を並べ替えたマスクで処理した出力の行を並べ替えたものと同じです。
# 下三角のマスクで $P^\top M P = M$ が成り立つのは恒等置換だけです。
# トークンが動くと、そのトークンから見えるトークンの集合が変わるからです。
# そのため出力が並べ替えになる保証はなくなります。実際、このランダムなトークンでは残り 719 通りの順のどれでも、出力は単なる並べ替えにはなりません。
#
# ただし、壊れるのは一部だけです。1 層の中では、位置 $i$ の出力は依然として位置 $j \le i$ にあるトークンの重み付き和で、その並び順は反映されません。
# 手前のトークンの順序に気づけるのは 2 層目からです。2 層目が受け取る手前の位置の入力（1 層目の出力）は、並べ替えによってすでに変わっているからです。

# %% tags=["check"] summary={"en": "only the identity keeps M; under the 719 others the outputs are no longer permuted; one layer misses a shuffle of the first tokens, a second layer sees it", "ja": "M を保つのは恒等置換だけです。残り 719 通りでは出力が並べ替えではなくなります。先頭側の並べ替えは 1 層では見えず、2 層目で見えます"}
allowed = torch.ones(T, T, dtype=torch.bool).tril()  # query i sees j <= i
mask = torch.zeros(T, T, dtype=f64).masked_fill(~allowed, -math.inf)  # M
assert_close(self_attention(x, bias=mask), self_attention(x, causal=True))

inv = torch.argsort(perm)  # pi^-1
finite = torch.randn(T, T, dtype=f64)
# (P^T F P)_ij = F_pi^-1(i) pi^-1(j) for a finite F;
# for M we index instead (0 * inf is nan)
assert_close(P.T @ finite @ P, finite[inv][:, inv])
moved = mask[inv][:, inv]  # P^T M P
assert torch.equal(moved[perm][:, perm], mask)  # M = P (P^T M P) P^T
# P S P^T + M = P (S + P^T M P) P^T, for finite scores S
shuffled = finite[perm][:, perm] + mask
assert torch.equal(shuffled, (finite + moved)[perm][:, perm])
# Attn_M(PX) = P Attn_{P^T M P}(X)
assert_close(
    self_attention(x[perm], causal=True), P @ self_attention(x, bias=moved)
)

# only the identity keeps the triangular mask
keep = [
    p
    for p in itertools.permutations(range(T))
    if torch.equal(allowed[list(p)][:, list(p)], allowed)
]
assert keep == [tuple(range(T))]
# the 719 other orders all move the outputs of these tokens
assert torch.equal(perms[0], torch.arange(T))  # itertools lists it first
others = perms[1:]
causal_out = self_attention(x, causal=True)
moved_out = self_attention(x[others], causal=True)  # [719, T, d]
gaps = (moved_out - causal_out[others]).abs().amax(dim=(1, 2))
assert len(gaps) == 719 and gaps.min() > 1e-3

# partial: shuffle positions 0..3, keep 4 and 5
prefix = torch.tensor([2, 0, 3, 1, 4, 5])
one = self_attention(x, causal=True)
one_shuffled = self_attention(x[prefix], causal=True)
assert_close(one_shuffled[4:], one[4:])  # one layer does not see it
two = self_attention(one, causal=True)  # a second layer does
two_shuffled = self_attention(one_shuffled, causal=True)
assert not torch.allclose(two_shuffled[4:], two[4:], atol=1e-3)

# %% [markdown] lang="en"
# ## The mask can count
#
# The mask is itself positional information. Let only the first token (a
# [beginning-of-sequence marker](../docs/glossary.md#beginning-of-sequence-token))
# carry a value feature $1$, and let the queries be zero, so that every visible
# token gets the same weight. Token $p$ (from $p = 0$) sees $p + 1$ tokens, and its
# output feature is
# $$\frac{1}{p+1}$$
# a code of its absolute position, made by the mask alone. Causal language models
# trained without any positional encoding do carry absolute positions (Haviv et
# al. 2022); the chapter [*xPos and NoPE*](10-xpos-nope.ipynb) builds on this.

# %% [markdown] lang="ja"
# ## マスクは位置を数えられる
#
# マスクそのものが位置の情報を持っています。
# バリューの 1 つの次元で、先頭のトークン（系列の始まりを示す [BOS トークン](../docs/glossary.ja.md#beginning-of-sequence-token)）だけが $1$ を持ち、ほかのトークンは 0 だとします。クエリはすべて 0 とするので、見えるトークンにはすべて同じ重みが付きます。
# $p = 0$ から数えてトークン $p$ には $p + 1$ 個のトークンが見えるので、出力のその次元の値は次のとおりです。
# $$\frac{1}{p+1}$$
# これは、マスクだけから生まれた絶対位置の符号です。
# 実際、位置エンコーディングなしで学習した因果的な言語モデルも、絶対位置の情報を持っています（Haviv ら 2022）。
# [「xPos と NoPE」](10-xpos-nope.ipynb)の章は、この結果を出発点にします。

# %%
n = 6
values = torch.zeros(n, 1, dtype=f64)
values[0, 0] = 1.0  # only the first token carries the feature
zero_q = torch.zeros(n, d, dtype=f64)  # zero queries: equal scores
keys = torch.randn(n, d, dtype=f64)  # any keys
counted = attention(zero_q, keys, values, causal=True)[:, 0]
print(f"marker feature, causal, p = 0..{n - 1}: {fmt(counted)}", end="")

# %% tags=["check"] summary={"en": "the output feature is exactly 1/(p+1) with the mask, and 1/n at every position without it", "ja": "出力のその次元はマスクがあればちょうど 1/(p+1)、なければどの位置でも 1/n です"}
assert_close(counted, 1 / torch.arange(1, n + 1, dtype=f64))  # 1 / (p + 1)
assert_close(
    attention(zero_q, keys, values)[:, 0], torch.full((n,), 1 / n, dtype=f64)
)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what trained models make of the mask.** Causal language models
# without any positional encoding learn absolute positions and come close to the
# perplexity of models with one, while masked language models, whose attention is
# [bidirectional](../docs/glossary.md#bidirectional), do much worse without
# (Haviv et al. 2022, who conjecture that the causal models count their
# predecessors). Kazemnejad et al. (2023, theorem 1) prove that weights exist with
# which a first layer recovers absolute positions this way, and Chi et al. (2023)
# find another trace of the mask: the variance of the attention output shrinks
# with the position.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：学習済みのモデルはマスクから何を得るか**
#
# 位置エンコーディングをまったく持たない因果的な言語モデルは絶対位置を学習し、パープレキシティも位置エンコーディングを持つモデルに迫ります。
# 一方、アテンションが[双方向](../docs/glossary.ja.md#bidirectional)のマスク言語モデルでは、位置がないと性能が大きく落ちます。
# Haviv ら（2022）は、因果的なモデルが手前にあるトークンを数えているのだろうと推測しています。
# Kazemnejad ら（2023、定理 1）は、最初の層がこの方法で絶対位置を復元するような重みが存在することを証明しています。
# Chi ら（2023）は、マスクが残す別の手がかりも見つけています。アテンションの出力の分散が、位置とともに小さくなるのです。

# %% [markdown] lang="en"
# ## What a positional signal must give
#
# The simplest way to tell the model where each token is: add a vector $PE(p)$ to
# the token at position $p$. Four candidates show what $PE$ needs: the raw index
# ($PE(p) = p$ in one feature), $p/L$, a
# [one-hot vector](../docs/glossary.md#one-hot-vector) over a maximum length, and
# the sinusoids of [*Sinusoidal positional encoding*](01-sinusoidal.ipynb).
#
# **Bounded values.** Token embeddings have a fixed scale: with entries drawn from
# a standard normal in $d = 64$ dimensions their norm is close to $\sqrt{d} = 8$,
# and the original Transformer's tokens start at that norm too: its code draws them
# with standard deviation $d^{-1/2}$ and multiplies them by $\sqrt{d}$
# ([How loud is the positional signal?](03-learned-embeddings.ipynb#how-loud-is-the-positional-signal)).
# The raw index grows without limit
# and swamps them. At $p = 1000$ two different tokens at the same position point in
# almost the same direction (cosine similarity 0.9999): the position is all the
# model sees. The sinusoids have norm $\sqrt{d/2}$ at every position.

# %% [markdown] lang="ja"
# ## 位置の信号が満たすべき条件
#
# トークンの位置をモデルに教えるいちばん簡単な方法は、位置 $p$ のトークンにベクトル $PE(p)$ を足すことです。
# 候補は、位置の番号そのもの（1 つの次元に $PE(p) = p$）、長さで割った番号 $p/L$、最大長までの [one-hot ベクトル](../docs/glossary.ja.md#one-hot-vector)、
# [「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の正弦波の 4 つです。
# これらを比べて、$PE$ に何が必要かを見ていきます。
#
# **値が有界であること**。トークンの埋め込みには決まった大きさがあります。
# 成分を標準正規分布から引いた $d = 64$ 次元のベクトルならノルムは $\sqrt{d} = 8$ に近く、元の Transformer のトークンも学習開始時はこの大きさです。
# 著者らのコードは埋め込みを標準偏差 $d^{-1/2}$ の正規分布から初期化し、$\sqrt{d}$ を掛けます（[「位置の信号はどれくらい大きいか」](03-learned-embeddings.ipynb#位置の信号はどれくらい大きいか)の節）。
# 位置の番号そのものは際限なく大きくなり、埋め込みをかき消してしまいます。
# $p = 1000$ では、同じ位置にある 2 つの異なるトークンがほぼ同じ向きを指し（コサイン類似度 0.9999）、モデルには位置しか見えません。
# 正弦波は、どの位置でもノルムが $\sqrt{d/2}$ です。

# %% tags=["figure"]
import torch.nn.functional as F

d64 = 64
gen = torch.Generator().manual_seed(0)  # its own generator
tok_a, tok_b = torch.randn(2, d64, dtype=f64, generator=gen)


def raw_index(p, dim=d64):
    """The raw index as one feature: PE(p) = (p, 0, ..., 0)."""
    code = torch.zeros(dim, dtype=f64)
    code[0] = p
    return code


print(f"token norms: {tok_a.norm():.2f}, {tok_b.norm():.2f}")
cosines = [
    F.cosine_similarity(tok_a + raw_index(p), tok_b + raw_index(p), dim=0)
    for p in (0, 10, 1000)
]
print("raw index, p = 0, 10, 1000: cos(x_a + PE, x_b + PE) =", end=" ")
print(" ".join(f"{float(cos):.4f}" for cos in cosines))
sin_norms = sinusoidal(torch.tensor([0, 10, 1000, 10**6]), d64).norm(dim=-1)
norms = ", ".join(f"{float(v):.3f}" for v in sin_norms)
print(f"sinusoidal, p = 0, 10, 1000, 10**6: |PE(p)| = {norms}", end="")

# %% tags=["check"] summary={"en": "the token norms are within 15% of √d = 8; ‖PE(p)‖ = √(d/2) up to p = 10⁶; with the raw index at p = 1000 the tokens' cosine exceeds 0.9999", "ja": "トークンのノルムは √d = 8 から 15% 以内です。p = 10⁶ まで ‖PE(p)‖ は √(d/2) で一定です。番号をそのまま足すと、p = 1000 で 2 つのトークンのコサイン類似度が 0.9999 を超えます"}
for token in (tok_a, tok_b):  # "close to sqrt(d) = 8": printed 8.96 and 7.25
    assert abs(float(token.norm()) / math.sqrt(d64) - 1) < 0.15
assert_close(
    sinusoidal(torch.tensor([0, 10, 1000, 10**6]), d64, dtype=f64).norm(dim=-1),
    torch.full((4,), math.sqrt(d64 / 2), dtype=f64),
)
cos_1000 = F.cosine_similarity(
    tok_a + raw_index(1000), tok_b + raw_index(1000), dim=0
)
assert cos_1000 > 0.9999

# %% [markdown] lang="en"
# **The same meaning at every length.** Dividing by the length $L$ bounds the
# values, but then a code means different things in different sequences: $0.5$ is
# position 10 when $L = 20$ and position 500 when $L = 1000$, and neighbours are
# only $1/L$ apart. The sinusoids take the position itself, not the length:
# $PE(10)$ is the same vector in every sequence.
#
# **A unique code per position.** Two positions with the same code are the same
# position to the model. One sinusoid alone repeats: with wavelength 8, positions 0
# and 8 collide. The first pair of the sinusoidal encoding never does at integer
# positions: its frequency is $\omega_0 = 1$, so two positions $p \ne q$ with the
# same pair would need $p - q$ to be a multiple of $2\pi$, impossible since $\pi$ is
# irrational. The raw index, $p/L$ and one-hot codes are unique too.

# %% [markdown] lang="ja"
# **どの長さでも同じ意味を持つこと**。長さ $L$ で割れば値は有界になりますが、同じ符号が系列によって違う意味になります。
# $0.5$ は、$L = 20$ なら位置 10、$L = 1000$ なら位置 500 で、隣どうしの間隔も $1/L$ しかありません。
# 正弦波は長さではなく位置そのものを受け取るので、$PE(10)$ はどの系列でも同じベクトルです。
#
# **位置ごとに一意な符号であること**。同じ符号を持つ 2 つの位置は、モデルにとって同じ位置です。
# 正弦波 1 本だけでは、同じ値が周期的に繰り返されます。波長が 8 なら、位置 0 と 8 が同じ符号になります。
# 正弦波位置エンコーディングの最初のペアは、整数の位置でこうした重なりを起こしません。
# その周波数は $\omega_0 = 1$ なので、2 つの位置 $p \ne q$ でペアが一致するには $p - q$ が $2\pi$ の整数倍でなければならず、
# $\pi$ は無理数なのでそれは起こりえません。
# 位置の番号そのもの、$p/L$、one-hot ベクトルも一意です。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how close two sinusoidal codes come.** Pair 0 alone separates
# some positions only barely: for positions 710 apart (710 is close to $226\pi$)
# its two points lie only 0.00006 apart. Together with the other pairs, whose
# wavelengths reach $2\pi \cdot 10000^{(d-2)/d}$, the closest two of the first 2048
# positions are 1.4718 apart for $d = 64$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：2 つの正弦波の符号はどこまで近づくか**
#
# ペア 0 だけでは、ほとんど区別できない位置もあります。
# 710 だけ離れた 2 つの位置では、710 が $226\pi$ に近いので、このペアの 2 点は 0.00006 しか離れていません。
# 波長が $2\pi \cdot 10000^{(d-2)/d}$ までのほかのペアと合わせると、$d = 64$ では、最初の 2048 個の位置のうち最も近い 2 つでも距離は 1.4718 になります。


# %% tags=["deeper", "check"] summary={"en": "the slowest wavelength is 2π·10000^(62/64); pair 0 alone keeps the first 2048 positions apart, closest at 710 positions apart (0.00006); all pairs keep them 1.4718 apart", "ja": "最も長い波長は 2π·10000^(62/64) です。ペア 0 だけでも最初の 2048 個の位置はすべて異なり、最も近いのは距離 710 の組（0.00006）です。すべてのペアでは最も近い組でも 1.4718 離れます"}
codes = sinusoidal(torch.arange(2048), d64, dtype=f64)
# the slowest pair's frequency, read back from row p = 1 (atan2 of sin, cos)
slowest = torch.atan2(codes[1, -2], codes[1, -1])
longest = 2 * math.pi / float(slowest)  # its wavelength
assert math.isclose(longest, 2 * math.pi * 10000 ** (62 / 64))
# pair 0 (omega_0 = 1): distinct at every integer position, and the closest
# two are 710 apart, where 710 - 226 pi is 6e-5 (chord 2|sin(355)|)
pair0 = torch.cdist(codes[:, :2], codes[:, :2])
pair0.fill_diagonal_(math.inf)
p_near, q_near = divmod(int(pair0.argmin()), 2048)
assert pair0.min() > 0 and abs(p_near - q_near) == 710
assert_close(pair0.min(), torch.tensor(710 - 226 * math.pi, dtype=f64))
assert f"{pair0.min():.5f}" == "0.00006"
dist = torch.cdist(codes, codes)
dist.fill_diagonal_(math.inf)
assert f"{dist.min():.4f}" == "1.4718"

# %% [markdown] lang="en"
# **A way to express offsets.** Language depends on relative positions ("the word
# before"), so "$k$ positions apart" should look the same wherever it occurs.
# Compare the similarity $PE(p)\cdot PE(q)$ of two codes, printed below. For the raw
# index it is $pq$: positions 100 and 150 look more alike than 100 and 101. One-hot
# codes give $0$ for every pair of distinct positions: nothing is near anything. For the sinusoids the
# similarity is $\sum_i \cos\big(\omega_i (p-q)\big)$, a function of the offset alone,
# largest at $p = q$, as
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb#the-dot-product-depends-only-on-the-distance)
# derives. Wang et al. (2021) call this property translation invariance and add two
# more for the similarity: monotonicity (farther means less alike) and symmetry.
# The sinusoids are symmetric and, as that derivation shows, only roughly
# monotone.

# %% [markdown] lang="ja"
# **相対位置を表せること**。言語は相対位置（「直前の単語」など）に依存します。
# 「距離が $k$ である」という関係は、系列のどこでも同じに見えるべきです。2 つの符号の類似度 $PE(p)\cdot PE(q)$ を比べます（下の出力）。
# 位置の番号そのものでは、これは $pq$ で、位置 100 と 150 のほうが 100 と 101 より似ていることになります。
# one-hot ベクトルでは異なる位置の組はすべて $0$ で、近い位置と遠い位置の区別がありません。
# 正弦波では類似度は $\sum_i \cos\big(\omega_i (p-q)\big)$ で、相対位置だけの関数であり、$p = q$ で最大になります。
# 導出は[「正弦波位置エンコーディング」](01-sinusoidal.ipynb#内積は距離だけで決まる)の章にあります。
# Wang ら（2021）はこの性質を「平行移動に対する不変性」と呼び、さらに単調性（離れるほど似なくなること）と対称性を挙げています。
# 正弦波は対称ですが、その導出で見るとおり、単調性はおおよそしか成り立ちません。

# %% tags=["figure"]
L = 200
codes_by_name = {
    "raw index p": lambda p: raw_index(p),
    "p / L, L = 200": lambda p: raw_index(p / L),
    "one-hot, L = 200": lambda p: torch.eye(L, dtype=f64)[p],
    "sinusoidal, d = 64": lambda p: sinusoidal(torch.tensor(p), d64, dtype=f64),
}
pairs = [(0, 1), (100, 101), (100, 150)]
similarity = {
    name: [float(code(p) @ code(q)) for p, q in pairs]
    for name, code in codes_by_name.items()
}
print(f"{'':20s}" + "".join(f"  PE({p})·PE({q})" for p, q in pairs))
for name, sims in similarity.items():
    print(f"{name:20s}" + "".join(f"{sim:>15.4f}" for sim in sims))

# %% tags=["check"] summary={"en": "sinusoids: the sum of cosines of the offset, largest at p = q; the raw index: farther looks closer", "ja": "正弦波の類似度は相対位置の余弦の和で、p = q で最大になります。番号そのものでは、遠いほど類似度が大きくなります"}
sims = similarity["sinusoidal, d = 64"]
sin_code = codes_by_name["sinusoidal, d = 64"]
assert math.isclose(sims[0], sims[1])  # the offset alone
assert sims[2] < sims[1] < float(sin_code(100) @ sin_code(100))  # max at p = q
omega = 10000.0 ** (-torch.arange(d64 // 2, dtype=f64) / (d64 // 2))
assert math.isclose(sims[2], float(torch.cos(omega * 50).sum()))  # sum of cos
raw = similarity["raw index p"]
assert raw[2] > raw[1] > raw[0]  # pq: farther looks more similar

# %% [markdown] lang="en"
# **Deterministic.** Position $p$ must get the same vector in every sequence, batch
# and call: a random code drawn afresh for each sequence is unique but
# meaningless. The sinusoids are a fixed function; a learned table is fixed once
# trained.
#
# **Behaviour beyond the training length.** A one-hot code, like a learned table of
# $L$ rows, has no code at all for position $L$: on the CPU `posenc`'s table raises
# an `IndexError` (on a GPU, as its code documents, the lookup fails with a
# device-side assertion instead; not run here). The
# sinusoids are defined, and bounded, at every position; whether
# a model makes sense of codes it never saw in training is measured in
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb).
#
# | requirement | sinusoidal | index $p$ | $p/L$ | one-hot | random |
# |---|---|---|---|---|---|
# | bounded | yes | no | yes | yes | yes |
# | same meaning at every length | yes | yes | no | yes | no |
# | unique | yes | yes | yes | yes | yes (almost surely) |
# | similarity set by the offset $p-q$ | yes | no | no | only $1$ (same) or $0$ | no |
# | deterministic | yes | yes | yes | yes | no |
# | beyond the training length | defined, bounded | defined, unbounded | meaning shifts | no code | defined, meaningless |

# %% [markdown] lang="ja"
# **毎回同じ符号であること**。位置 $p$ には、どの系列、どのバッチ、どの呼び出しでも同じベクトルが付かなければなりません。
# 系列ごとに引き直すランダムな符号は、一意でも意味を持ちません。正弦波は固定の関数で、学習型の表も学習を終えれば固定されます。
#
# **学習時の長さを超えたときのふるまい**。one-hot ベクトルには、$L$ 行の学習型の表と同じく、位置 $L$ の符号がそもそもありません。
# CPU では `posenc` の表は `IndexError` を送出します（GPU では、コードのコメントにあるとおり、表の参照がデバイス側のアサーションで失敗します。ここでは実行していません）。
# 正弦波はどの位置でも定義されていて、有界です。学習で見たことのない符号をモデルがうまく扱えるかどうかは、[「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章で測ります。
#
# | 条件 | 正弦波 | 番号 $p$ | $p/L$ | one-hot | ランダム |
# |---|---|---|---|---|---|
# | 有界 | はい | いいえ | はい | はい | はい |
# | どの長さでも同じ意味 | はい | はい | いいえ | はい | いいえ |
# | 一意 | はい | はい | はい | はい | はい（確率 1 で） |
# | 類似度が相対位置 $p-q$ で決まる | はい | いいえ | いいえ | $1$（同じ）か $0$ だけ | いいえ |
# | 毎回同じ符号 | はい | はい | はい | はい | いいえ |
# | 学習時の長さを超えたとき | 定義され、有界 | 定義されるが有界でない | 意味がずれる | 符号がない | 定義されるが意味がない |

# %% tags=["check"] summary={"en": "position 3 gets the paper's vector alone, in a sequence and through the module's offset; on the CPU 512-row tables raise an IndexError for row 512; the sinusoids stay bounded", "ja": "位置 3 には、単独でも、系列の中でも、モジュールのオフセット経由でも論文の式のベクトルが付きます。CPU では、512 行の表で行 512 を参照すると IndexError になります。正弦波は有界です"}
from posenc import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

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
    assert_close(code, paper_3, rtol=0, atol=1e-6)

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

# %% [markdown] lang="en"
# ## Adding positions breaks the symmetry
#
# Add the sinusoidal codes, the matrix $E$ with rows $PE(0), \dots, PE(T-1)$, to
# the inputs. A permutation moves the tokens but the codes stay with the
# positions, so the shuffled input is $PX + E$. Shuffling the encoded input instead
# would give $P(X + E) = PX + P\,E$. If the two were equal, the first section would
# make the outputs a mere permutation. They are equal only if $P\,E = E$, that is if
# row $\pi(i)$ of $E$ equals row $i$ for every $i$, and unique codes rule that out
# for every $\pi$ other than the identity.
#
# Whether the outputs then actually change depends on the weights. With
# $W_Q = 0$ every score is $0$ and every output row is the mean of the rows of
# $(PX + E)\,W_V$, which equals the mean of the rows of $(X + E)\,W_V$: the outputs
# stay permuted whatever $E$ is. With this chapter's random weights, under all 719
# other orders the outputs are no longer a mere permutation, and the two sentences
# pool to different vectors:

# %% [markdown] lang="ja"
# ## 位置を足すと対称性が壊れる
#
# 入力に正弦波の符号、つまり各行が $PE(0), \dots, PE(T-1)$ の行列 $E$ を足します。
# 置換でトークンは動きますが、符号は位置にとどまるので、並べ替えた入力は $PX + E$ です。
# 符号を足した入力そのものを並べ替えると $P(X + E) = PX + P\,E$ です。
# 2 つが等しければ、最初の節の結果から、出力は単なる並べ替えになります。
# 2 つが等しいのは $P\,E = E$（すべての $i$ で $E$ の第 $\pi(i)$ 行が第 $i$ 行に等しい）のときだけで、符号が一意なら、恒等置換以外の $\pi$ では起こりません。
#
# ただし、出力が実際に変わるかどうかは重みによります。
# $W_Q = 0$ ならスコアはすべて $0$ で、出力の各行は $(PX + E)\,W_V$ の行の平均です。
# これは $(X + E)\,W_V$ の行の平均に等しいので、$E$ が何であっても出力は並べ替えのままです。
# 一方、この章のランダムな重みでは、残り 719 通りのどの順でも、出力は単なる並べ替えになりません。
# 2 つの文も、プーリングすると別々のベクトルになります。

# %%
e = sinusoidal(torch.arange(T), d, dtype=f64)  # E, one row per position
pos_dbm, pos_mbd = self_attention(x_dbm + e[:3]), self_attention(x_mbd + e[:3])
print(f"dog bites man, mean: {fmt(pos_dbm.mean(0))}")
print(f"man bites dog, mean: {fmt(pos_mbd.mean(0))}", end="")


# %% tags=["check"] summary={"en": "for the 719 other orders P E ≠ E and the outputs are no longer permuted; W_Q = 0 keeps all 720 permuted; the two sentences pool differently", "ja": "残り 719 通りでは P E ≠ E で、出力も並べ替えではなくなります。W_Q = 0 なら 720 通りすべてで並べ替えのままです。2 つの文のプーリングは異なります"}
# P E != E for the 719 other permutations: some row of E moves
assert not (e[others] == e).all(dim=(1, 2)).any()
moved_out = self_attention(x[others] + e)  # the codes stay with the positions
broken = (moved_out - self_attention(x + e)[others]).abs().amax(dim=(1, 2))
assert len(broken) == 719 and broken.min() > 1e-3
flat = torch.zeros(d, d, dtype=f64)  # W_Q = 0: every score is 0


def flat_attention(x):
    return attention(x @ flat, x @ w_k, x @ w_v)


assert_close(flat_attention(x[perms] + e), flat_attention(x + e)[perms])
assert not torch.allclose(pos_mbd, swap @ pos_dbm, atol=1e-3)
assert not torch.allclose(pos_mbd.mean(0), pos_dbm.mean(0), atol=1e-3)

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
#   relative (derived in [*Rotary position embedding (RoPE)*](08-rope.ipynb), checked
#   after the figure below).
#
# A relative scheme ignores a common shift of all positions; the absolute code
# does not. The figure measures, over 200 random orders $P$ of eight tokens, how far
# each one's outputs $f$ are from a mere permutation, as the mean of
# $\lVert f(PX) - P f(X)\rVert / \lVert f(X)\rVert$: plain attention $S$, the causal
# mask $S+M$, the sinusoidal input $X+E$, a symmetric ALiBi-style bias $S+B$ (slope
# $1/2$, no mask) and RoPE's rotation $R$. Only plain attention sits at zero.

# %% [markdown] lang="ja"
# ## 位置が入る場所：このサイトの地図
#
# 入力に符号を足すのは、位置の情報がアテンションに入るおもな 3 つの場所のうちの 1 つです。
# クエリの位置を $i$、キーの位置を $j$ と書きます。
#
# - **入力に足す**：最初の層の前に、各トークンを $x_i + PE(i)$ にします。
#   スコアには内容と絶対位置が混ざります。
# - **スコアにバイアスを足す**：スコアを $q_i^\top k_j/\sqrt{d} + B_{ij}$ にします。
#   $B_{ij}$ は学習可能か固定で、位置には相対位置 $j - i$ を通してだけ依存します。
#   ALiBi のバイアスを左右対称にした $-m_h\,\lvert i - j\rvert$ がその例です
#   （ALiBi そのものは因果的で、$j \le i$ に対する $-m_h\,(i - j)$ です）。
# - **$q$ と $k$ を回転する**：$(R_i q_i)^\top (R_j k_j) = q_i^\top R_{j-i} k_j$ で、これも相対位置だけに依存します（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章で導出します。図のあとのセルで確かめます）。
#
# 相対位置を使う方法では、すべての位置を同じだけずらしても出力は変わりません。絶対位置の符号では変わります。
# 図は、8 個のトークンをランダムに並べ替えた 200 通りの $P$ について、出力 $f$ が単なる並べ替えからどれだけ離れるかを、$\lVert f(PX) - P f(X)\rVert / \lVert f(X)\rVert$ の平均で測ったものです。
# 素のアテンション $S$、因果マスク $S+M$、正弦波を足した入力 $X+E$、
# 左右対称の ALiBi 風のバイアス $S+B$（傾き $1/2$、マスクなし）、RoPE の回転 $R$ を比べます。
# ずれがゼロなのは素のアテンションだけです。

# %% tags=["figure"] alt={"en": ["Bar chart of the distance from permutation equivariance for five variants on eight tokens, for one seeded random draw: plain attention S is 0, the causal mask S+M 1.35, sinusoidal input X+E 0.57, symmetric ALiBi-style bias S+B 0.73, RoPE rotation R 0.69."], "ja": ["8 個のトークンで、5 つの方法が置換同変からどれだけ離れるかを、シードを固定した 1 回のランダムな抽出で示す棒グラフ。素のアテンション S は 0、因果マスク S+M は 1.35、正弦波の入力 X+E は 0.57、左右対称の ALiBi 風バイアス S+B は 0.73、RoPE の回転 R は 0.69 です。"]}
T8 = 8
gen8 = torch.Generator().manual_seed(8)  # its own draw, whatever ran before
x8 = torch.randn(T8, d, dtype=f64, generator=gen8)
pos8 = torch.arange(T8)
slope = float(alibi_slopes(8)[0])  # the steepest of ALiBi's 8 heads, 1/2


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


# distance from equivariance, ||f(PX) - P f(X)|| / ||f(X)||, mean over perms
n_perms = 200
p8 = torch.stack([torch.randperm(T8, generator=gen8) for _ in range(n_perms)])
here = variants(x8, pos8)
moved_out = variants(x8[p8], pos8)  # every permutation in one batch
distance = {
    name: float(
        ((moved_out[name] - out[p8]).norm(dim=(1, 2)) / out.norm()).mean()
    )
    for name, out in here.items()
}

fig, ax = plt.subplots(figsize=(6.4, 2.4))
bars = ax.bar(
    range(len(distance)), list(distance.values()), color="#0072B2", width=0.6
)
ax.bar_label(bars, fmt="%.3f", padding=2)
ax.set_ylim(0, 1.15 * max(distance.values()))
ax.set_xticks(range(len(distance)), list(distance))
ax.set_ylabel(r"$\|f(PX) - P f(X)\| \,/\, \|f(X)\|$")
ax.grid(axis="x", visible=False)
plt.show()

# %% tags=["check"] summary={"en": "the bias is −|i − j|/2; shifting all positions by 100 leaves the bias and rotation outputs unchanged, not the sinusoidal input's; (R_i q)^T (R_j k) = q^T R_{j−i} k; only S is at 0; the alt text's values are the computed ones", "ja": "バイアスは −|i − j|/2 です。すべての位置を 100 ずらしても、バイアスと回転の出力は変わらず、正弦波を足した入力の出力は変わります。(R_i q)^T (R_j k) = q^T R_{j−i} k が成り立ちます。0 になるのは S だけで、代替テキストの値は計算どおりです"}
from posenc import alibi_bias

assert slope == 0.5
bias = alibi_bias(8, T8, causal=False)[0].to(f64)  # posenc, symmetric
assert_close(bias, -slope * (pos8[:, None] - pos8[None, :]).abs().to(f64))

# relative schemes ignore a common shift of all positions; absolute does not
shifted = variants(x8, pos8 + 100)
for name in ("$S+B$", "$R$"):
    assert_close(shifted[name], here[name])
assert not torch.allclose(shifted["$X+E$"], here["$X+E$"], atol=1e-3)

# (R_i q)^T (R_j k) = q^T R_{j-i} k: the rotated score depends on j - i only
qr, kr = x8 @ w_q, x8 @ w_k
i_pos, j_pos = torch.tensor(5), torch.tensor(2)
lhs = apply_rope(qr[0], i_pos) @ apply_rope(kr[1], j_pos)
rhs = qr[0] @ apply_rope(kr[1], j_pos - i_pos)
assert_close(lhs, rhs)

assert distance["$S$"] < 1e-12
assert min(value for name, value in distance.items() if name != "$S$") > 0.05
# the values quoted in the figure's alt text, to 2 decimals
alt_values = {
    "$S$": 0.0,
    "$S+M$": 1.35,
    "$X+E$": 0.57,
    "$S+B$": 0.73,
    "$R$": 0.69,
}
assert {name: round(value, 2) for name, value in distance.items()} == alt_values

# %% [markdown] lang="en"
# Not every scheme fits one box (Shaw et al. and Transformer-XL add terms that
# depend on the content as well as on $j - i$; CoPE counts with gates on the
# content). The families the site covers (Dufter et al. 2022 survey many more):
#
# | family | encoding | where it enters | used in |
# |---|---|---|---|
# | absolute | [sinusoidal](01-sinusoidal.ipynb) | added to the input | the Transformer |
# | absolute | [learned](03-learned-embeddings.ipynb) | added to the input | BERT, GPT-2 |
# | absolute | [scaled sinusoidal](03-learned-embeddings.ipynb) | added, times a learned scalar | FLASH |
# | relative | [Shaw et al.](04-shaw-relative.ipynb) | learned vectors per offset, on keys and values | Music Transformer (keys only) |
# | relative | [Transformer-XL](05-transformer-xl.ipynb) | terms from a sinusoidal offset code | Transformer-XL, XLNet |
# | relative | [T5 buckets](06-t5-buckets.ipynb) | a learned bias per offset bucket | T5 |
# | relative | [ALiBi](07-alibi.ipynb) | a fixed bias, linear in distance | BLOOM, MPT |
# | rotary | [RoPE](08-rope.ipynb) | a rotation of $q$ and $k$ | Llama, GPT-NeoX |
# | rotary | [RoPE context extensions](09-rope-context.ipynb) | rotation, rescaled frequencies | Llama 3.1 |
# | rotary | [2-D and 3-D RoPE](13-rope-2d-3d.ipynb), [M-RoPE](13-rope-2d-3d.ipynb#m-rope-time-height-and-width-in-a-language-model) | rotation, frequencies per axis | Qwen2-VL, Qwen3-VL |
# | rotary | [xPos](10-xpos-nope.ipynb) | rotation and exponential scaling | LEX Transformer |
# | none | [NoPE](10-xpos-nope.ipynb) | nothing but the causal mask | Llama 4, one layer in four ([with a query temperature](14-rope-in-llms.ipynb#llama-4-nope-layers-with-a-temperature-chunked-rope-layers)) |
# | relative | [KERPLE](15-learned-bias-functions.ipynb#kerple-two-learned-numbers-per-head), [FIRE](15-learned-bias-functions.ipynb#fire-a-small-network-of-a-normalised-distance) | a learned function of distance (FIRE's, beyond a threshold, also of the query position) | research models |
# | contextual | [CoPE](15-learned-bias-functions.ipynb#cope-positions-the-model-counts) | gates on $q_i^\top k_j$ count; $q_i^\top e[p_{ij}]$ added | research models |
# | training scheme | [randomised positions](15-learned-bias-functions.ipynb#randomised-positions-no-new-formula) | random sorted positions | research models |

# %% [markdown] lang="ja"
# どれか 1 つに収まらない方法もあります（Shaw らと Transformer-XL は $j - i$ だけでなく内容にも依存する項を足し、CoPE は内容に基づくゲートで数えます）。
# このサイトで扱う手法を、系統ごとの表にまとめます（Dufter ら 2022 はさらに多くを概観しています）。
#
# | 系統 | 位置エンコーディング | 入る場所 | 採用例 |
# |---|---|---|---|
# | 絶対位置 | [正弦波](01-sinusoidal.ipynb) | 入力に足す | 元の Transformer |
# | 絶対位置 | [学習型](03-learned-embeddings.ipynb) | 入力に足す | BERT、GPT-2 |
# | 絶対位置 | [スケール付き正弦波](03-learned-embeddings.ipynb) | 学習可能なスカラーを掛けて足す | FLASH |
# | 相対位置 | [Shaw ら](04-shaw-relative.ipynb) | 相対位置ごとの学習可能なベクトルをキーとバリューに足す | Music Transformer（キー側のみ） |
# | 相対位置 | [Transformer-XL](05-transformer-xl.ipynb) | 相対位置の正弦波符号による項 | Transformer-XL、XLNet |
# | 相対位置 | [T5 のバケット](06-t5-buckets.ipynb) | バケットごとの学習可能なバイアス | T5 |
# | 相対位置 | [ALiBi](07-alibi.ipynb) | 距離に比例する固定のバイアス | BLOOM、MPT |
# | 回転 | [RoPE](08-rope.ipynb) | $q$ と $k$ を回転する | Llama、GPT-NeoX |
# | 回転 | [RoPE のコンテキスト長の拡張](09-rope-context.ipynb) | 周波数を調整して回転する | Llama 3.1 |
# | 回転 | [2 次元・3 次元の RoPE](13-rope-2d-3d.ipynb)、[M-RoPE](13-rope-2d-3d.ipynb#m-rope言語モデルの中の時間高さ幅) | 周波数を軸に分けて回転する | Qwen2-VL、Qwen3-VL |
# | 回転 | [xPos](10-xpos-nope.ipynb) | 回転と指数的なスケール | LEX Transformer |
# | なし | [NoPE](10-xpos-nope.ipynb) | 因果マスクのみ | Llama 4 の 4 層に 1 層（[クエリの温度付き](14-rope-in-llms.ipynb#llama-4温度付きの-nope-の層とチャンクに分けた-rope-の層)） |
# | 相対位置 | [KERPLE](15-learned-bias-functions.ipynb#kerpleヘッドごとに-2-つの学習可能なパラメータ)、[FIRE](15-learned-bias-functions.ipynb#fire正規化した距離を読む小さなネットワーク) | 距離の学習可能な関数（FIRE はしきい値を超えるとクエリの位置にも依存する） | 研究用のモデル |
# | 文脈に応じた位置 | [CoPE](15-learned-bias-functions.ipynb#copeモデルが数える位置) | $q_i^\top k_j$ のゲートで数え、$q_i^\top e[p_{ij}]$ を足す | 研究用のモデル |
# | 学習の方法 | [ランダム化した位置](15-learned-bias-functions.ipynb#ランダム化した位置式は変えない) | ランダムに選んで昇順に並べた位置 | 研究用のモデル |

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what PyTorch's attention modules assume.** PyTorch's
# `nn.MultiheadAttention` and `nn.TransformerEncoderLayer` add no positional
# encoding; the caller must add one. A full encoder layer (attention, residual
# connections, layer norms, feed-forward layer) is therefore
# permutation-equivariant, and so is a stack of them, in evaluation mode (dropout
# draws a different mask for every row) and with any padding mask permuted along
# with the tokens. Where a
# causal mask puts fewer queries than keys (a KV cache) is a question for
# [*Use posenc in your model*](16-use-posenc.ipynb).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：PyTorch のアテンションのモジュールが前提にしていること**
#
# PyTorch の `nn.MultiheadAttention` と `nn.TransformerEncoderLayer` は位置エンコーディングを足しません。
# 位置エンコーディングは呼び出す側で足す必要があります。
# そのため、エンコーダ層全体（アテンション、残差接続、層正規化、フィードフォワード層）は置換同変で、
# それを積み重ねたものも置換同変です。ただしこれは、ドロップアウトを切った評価モードで動かし、パディングマスクを使うならトークンと一緒に並べ替える場合の話です
# （学習モードでは、ドロップアウトが行ごとに別のマスクを引きます）。
# クエリがキーより少ないとき（KV キャッシュ）に因果マスクをどうそろえるかは、[「posenc をモデルで使う」](16-use-posenc.ipynb)の章で扱います。

# %% tags=["deeper", "check"] summary={"en": "two PyTorch encoder layers in eval mode are permutation-equivariant", "ja": "評価モードの PyTorch のエンコーダ層 2 つは置換同変です"}
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
assert_close(out_perm, out[:, pb])  # two encoder layers: equivariant

# %% [markdown] lang="en"
# ## What to remember
#
# - Without positions, self-attention is permutation-equivariant,
#   $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$, and so is a whole encoder:
#   "dog bites man" and "man bites dog" pool to the same vector.
# - A causal mask breaks the symmetry only partly (one layer misses a shuffle of
#   earlier tokens), but it can count positions, $1/(p+1)$, and causal language
#   models without an encoding do learn absolute positions.
# - A positional code should be bounded, mean the same at every length, be unique,
#   let offsets be expressed and be deterministic; the sinusoids pass all five, and
#   stay defined and bounded beyond the training length.
# - Unique codes remove the guarantee that the outputs only permute; whether they
#   actually change depends on the weights ($W_Q = 0$ keeps them permuted).
# - Positions enter in three main places: added to the input (absolute), a bias
#   on the scores or a rotation of $q$ and $k$ (both relative); NoPE relies on the
#   causal mask alone.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 位置がなければ、セルフアテンションは置換同変 $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$ です。
#   エンコーダ全体も同じで、「dog bites man」と「man bites dog」はプーリングすると同じベクトルになります。
# - 因果マスクが壊す対称性は一部だけです（1 層だけでは、手前のトークンの並べ替えに気づけません）。
#   それでもマスクは位置を $1/(p+1)$ として数えられ、位置エンコーディングのない因果的な言語モデルも絶対位置を学習します。
# - 位置の符号に求められるのは、有界であること、どの長さでも同じ意味を持つこと、一意であること、相対位置を表せること、毎回同じ符号になることの 5 つです。
#   正弦波はこの 5 つをすべて満たし、学習時の長さを超えても定義され、有界なままです。
# - 一意な符号を足すと「出力は並べ替えになるだけ」という保証はなくなりますが、実際に変わるかどうかは重みによります（$W_Q = 0$ なら並べ替えのままです）。
# - 位置が入るおもな場所は、入力（絶対位置）、スコアへのバイアス、$q$ と $k$ の回転（後の 2 つは相対位置）の 3 つです。
#   NoPE は因果マスクだけに頼ります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Prove that a residual connection, layer normalisation and a position-wise
#    feed-forward layer each satisfy $f(PX) = P f(X)$, hence a whole encoder without
#    positions. Where does the proof use that the same weights act on every row?
# 2. In "the dog saw the cat" without positions, show that the two "the" get
#    identical outputs in every layer, and that adding `posenc.sinusoidal` separates
#    them.
# 3. Which permutations keep a sliding-window mask (token $i$ sees $j$ with $|i-j| \le w$)?
#    And a causal mask restricted to a window? Count them for $T = 6$ and compare with
#    the lower-triangular mask.
# 4. Use the binary digits of $p$ as a positional code. Which rows of the table of
#    requirements does it satisfy? Compute $PE(p)\cdot PE(q)$ for pairs at distance 1.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 残差接続、層正規化、位置ごとのフィードフォワード層のそれぞれが $f(PX) = P f(X)$ を満たすことを証明してください。
#    そこから、位置のないエンコーダ全体も同じ性質を満たすことを導いてください。
#    証明のどこで、すべての行に同じ重みが働くことを使いましたか。
# 2. 位置のない「the dog saw the cat」で、2 つの「the」がどの層でも同じ出力になること、
#    そして `posenc.sinusoidal` を足すと 2 つが分かれることを示してください。
# 3. スライディングウィンドウのマスク（トークン $i$ からは $|i-j| \le w$ の $j$ が見える）を保つ置換はどれでしょうか。
#    ウィンドウに制限した因果マスクではどうでしょうか。$T = 6$ で数え、下三角のマスクと比べてください。
# 4. $p$ の 2 進数の各桁を位置の符号として使います。条件の表のどの行を満たすでしょうか。
#    距離 1 の組について $PE(p)\cdot PE(q)$ を計算してください。

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
# $X$. A layer with its own weights $h_i$ per row breaks this, and adding row $i$ of
# $E$ to row $i$ is such a layer.

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
# 行ごとに別の重み $h_i$ を持つ層ではこれが崩れます。第 $i$ 行に $E$ の第 $i$ 行を足すのも、そうした層の 1 つです。

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
# したがって 2 つの「the」は 1 層目の後も等しく、2 層目の後も等しく、帰納法によってどの層でも等しいままです。
# 1 つ目に $PE(0)$、2 つ目に $PE(3)$ を足すと、入力の行が異なるので、出力も異なります。
# 因果マスクでも 2 つは分かれます。2 つの「the」から見える手前のトークンの範囲が違うからです。
# 因果マスクの節で見たとおり、マスクは位置の情報です。

# %% tags=["solution"]
import torch.nn.functional as F

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
# A causal window with $w \ge 1$ is kept only by the identity, like the lower-triangular
# mask. Every position $i > 0$ sees $i - 1$, so chaining "sees" gives the full order
# $j \le i$ of the positions; a permutation that keeps the relation keeps that order,
# and the only permutation that keeps an order is the identity. With $w = 0$ the
# window is the diagonal again (720).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 置換がマスクを保つのは $P^\top M P = M$ のとき、つまり「$\pi(i)$ が $\pi(j)$ を見る」ことと
# 「$i$ が $j$ を見る」ことが同値なときです。
# スライディングウィンドウは対称なので、反転 $i \mapsto T-1-i$ は必ずこれを保ち、置換の数は 2 以上です。
# ウィンドウ幅が両極端の値のときは、すべての置換がマスクを保ちます。$w = 0$ では対角だけが残り、$w \ge T-1$ ではどのトークンもすべてのトークンを見るので、
# $T = 6$ ではどちらも $720$ です。
# その間では数は $w$ によって変わり、$T = 6$ では $w = 1, \dots, 4$ に対して 2、2、4、48 です。
# $w = 4$ で互いに見えない組は $\{0, 5\}$ だけなので、置換はこの組を組のまま保たなければならず（2 通り）、
# 残りの 4 個は自由に並べ替えられます（$4! = 24$ 通り）。
#
# $w \ge 1$ の因果的なウィンドウを保つのは、下三角のマスクと同じく恒等置換だけです。
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
# $p < 2^B$ では一意で、毎回同じ符号になります。表の 4 つの行を満たします。
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
assert torch.equal(binary(2**B), binary(0))  # illustration: 2^B wraps to 0
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
# ## Sources and versions
#
# PyTorch: torch 2.13.0, run here. Llama 4's query temperature was read in Meta's
# `models/llama4/model.py` and `args.py`. The map's papers are in their chapters.
#
# ### References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020. <https://arxiv.org/abs/1912.10077>
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional
#   Encodings Still Learn Positional Information*. Findings of EMNLP 2022.
#   <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. NeurIPS 2023. <https://arxiv.org/abs/2305.19466>
# - Chi, T.-C. et al. (2023). *Latent Positional Information is in the Self-Attention
#   Variance of Transformer Language Models Without Positional Embeddings*. ACL 2023.
#   <https://arxiv.org/abs/2305.13571>
# - Wang, B. et al. (2021). *On Position Embeddings in BERT*. ICLR 2021.
#   <https://openreview.net/forum?id=onxoVA9FxMw>
# - Dufter, P., Schmitt, M., Schütze, H. (2022). *Position Information in
#   Transformers: An Overview*. Computational Linguistics 48(3).
#   <https://arxiv.org/abs/2102.11090>
# - Code: Meta, llama-models <https://github.com/meta-llama/llama-models>.

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# 実行に使った PyTorch は torch 2.13.0 です。
# Llama 4 のクエリの温度は、Meta の `models/llama4/model.py` と `args.py` のコードで確認しました。地図の論文は、それぞれの章で挙げています。
#
# ### 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017.
#   <https://arxiv.org/abs/1706.03762>
# - Yun, C. et al. (2020). *Are Transformers universal approximators of
#   sequence-to-sequence functions?* ICLR 2020. <https://arxiv.org/abs/1912.10077>
# - Haviv, A. et al. (2022). *Transformer Language Models without Positional
#   Encodings Still Learn Positional Information*. Findings of EMNLP 2022.
#   <https://arxiv.org/abs/2203.16634>
# - Kazemnejad, A. et al. (2023). *The Impact of Positional Encoding on Length
#   Generalization in Transformers*. NeurIPS 2023. <https://arxiv.org/abs/2305.19466>
# - Chi, T.-C. et al. (2023). *Latent Positional Information is in the Self-Attention
#   Variance of Transformer Language Models Without Positional Embeddings*. ACL 2023.
#   <https://arxiv.org/abs/2305.13571>
# - Wang, B. et al. (2021). *On Position Embeddings in BERT*. ICLR 2021.
#   <https://openreview.net/forum?id=onxoVA9FxMw>
# - Dufter, P., Schmitt, M., Schütze, H. (2022). *Position Information in
#   Transformers: An Overview*. Computational Linguistics 48(3).
#   <https://arxiv.org/abs/2102.11090>
# - コード：Meta の llama-models <https://github.com/meta-llama/llama-models>。
