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
# # Transformer-XL relative attention
#
# Transformer-XL (Dai et al. 2019) reads a long text in segments and lets each segment
# attend to the cached hidden states of the previous one, its *memory*. Absolute
# positions do not survive this: the first token of every segment would get the same
# encoding. Dai et al. therefore take the attention score apart into four terms and
# rebuild it so that positions enter only as the distance $i - j$ between query and
# key, through a fixed sinusoidal encoding $R_{i-j}$ and two learned vectors $u$ and
# $v$. This chapter derives the four terms from the absolute ones, computes them with
# `posenc`, and then studies the part that is easiest to get wrong: the *relative
# shift*, a pad and two reshapes that line up the scores without an index. We derive it
# element by element, show exactly which entries it fills with numbers that are not
# scores (and that the causal mask hides them), how the memory moves them, and what
# happens when the distances run the wrong way. The last sections rebuild the code of
# Transformer-XL, XLNet and labml and compare.
#
# A note on signs. This chapter keeps Dai et al.'s letters: query position $i$, key
# position $j$, and the causal distance $i - j \ge 0$ for a key at or before its
# query, as on the [notation page](../docs/notation.md#positions). The previous
# chapter, [*Relative position representations*](04-shaw-relative.ipynb), writes
# the same pair as the offset $j - i \le 0$ (Shaw et al.): the same number with the
# opposite sign. Here $L$ is the segment length and $m$ the memory length, not the
# training length and a query position as in the rotary chapters, and $R_{i-j}$ is
# a sinusoidal vector, not a rotation.

# %% [markdown] lang="ja"
# # Transformer-XL の相対アテンション
#
# Transformer-XL（Dai ら 2019）は、長い文章をセグメントに分けて読みます。
# 各セグメントは、直前のセグメントについてキャッシュしておいた隠れ状態（これを「メモリ」と呼びます）にもアテンションできます。
# この仕組みでは、絶対位置はうまく機能しません。どのセグメントの先頭のトークンも、同じエンコーディングを受け取ってしまうからです。
# そこで Dai らはアテンションスコアを 4 つの項に分解し、位置がクエリとキーの距離 $i - j$ としてだけ入るように組み立て直しました。
# 使うのは、固定の正弦波エンコーディング $R_{i-j}$ と、学習可能な 2 つのベクトル $u$ と $v$ です。
# この章では、絶対位置の 4 項から相対位置の 4 項を導き、`posenc` で計算します。
# そのうえで、いちばん間違えやすい部分である「相対シフト」を調べます。
# パディング 1 回と形状変換 2 回で、インデックスを使わずにスコアを並べ直す工夫です。
# これを成分ごとに導き、どの成分がスコアでない数で埋まるかを正確に示します（因果マスクがそれらを隠すことも示します）。
# さらに、メモリがあるとその場所がどう動くか、距離の向きを逆にすると何が起こるかを確かめます。
# 最後の節では Transformer-XL、XLNet、labml のコードを再現して比べます。
#
# 向きについて注意しておきます。この章では Dai らの記号を使います。
# クエリの位置は $i$、キーの位置は $j$ で、クエリと同じ位置かそれより前のキーには因果的な距離 $i - j \ge 0$ を使います。
# これは[記法のページ](../docs/notation.ja.md#positions)と同じです。
# 前の[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章は、同じ組を相対位置 $j - i \le 0$ で書きます（Shaw ら）。
# 大きさは同じで、正負が逆です。
# また、ここでの $L$ はセグメントの長さ、$m$ はメモリの長さです。回転を扱う章のように学習時の長さやクエリの位置を表すのではありません。
# $R_{i-j}$ は回転ではなく正弦波のベクトルです。

# %%
import math

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from torch.testing import assert_close

from posenc import RelativePositionEmbedding, attention, sinusoidal
from posenc.transformer_xl import (
    relative_shift,
    transformer_xl_positions,
    transformer_xl_scores,
)
from posenc_lab.plotting import OKABE_ITO, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64

# %% [markdown] lang="en"
# ## Why absolute positions fail with a memory
#
# Transformer-XL splits the text into segments of $L$ tokens. When it processes segment
# $\tau + 1$, every layer also attends to the hidden states that the layer below
# produced for segment $\tau$, kept from the previous step without gradients. The
# keys are then the $m$ tokens of the memory followed by the $L$ tokens of the current
# segment. With absolute encodings added per segment, both segments would use the
# positions $0, \dots, L-1$: the token at slot $j$ of the memory and the token at slot
# $j$ of the current segment carry the same vector $U_j$, and nothing tells the model
# that one is $L$ positions older than the other.
#
# Numbering the positions across segments avoids the collision, but then the
# numbers grow without bound along the text. In the official code each column of a
# batch is one ordered stream through the corpus, with the memory carried from
# batch to batch (`LMOrderedIterator` in `data_utils.py`): at batch size 60 that is
# about 1.7M tokens of WikiText-103 per stream. The positions would run into the
# millions, and the same text would be encoded differently depending on where it
# falls in its stream. (Dai et al. argue from the collision alone.) What the model
# needs is the distance between a query and a key, which is the same in every
# segment. A check of the collision would only restate it, since the two keys carry
# the same $U_j$ by definition; the end of the next section checks the remedy.
#
# Dai et al.'s ablation on WikiText-103 (their Table 6, §4.2, models of 128M
# parameters) does not pit absolute encodings against theirs under recurrence.
# With recurrence it compares their encoding only with Shaw et al.'s: 26.77
# against 27.94 best perplexity. The absolute encodings (Vaswani et al.'s and
# Al-Rfou et al.'s) appear only in rows without recurrence, trained with the loss
# on the last half of each segment, the only setting in which the paper found them
# to work well. There theirs is lowest too: 29.02 with the full loss and 30.10 with
# the half loss, against 30.97 and 31.16. The official PyTorch code
# (`MemTransformerLM`) has two absolute variants: `attn_type=2` adds the sinusoid
# to the input, with positions counted down from the newest key,
# $m + L - 1, \dots, 0$, and adds it to the memory at the first layer;
# `attn_type=3` adds a learned table per layer to every layer's input, after
# Al-Rfou et al.

# %% [markdown] lang="ja"
# ## メモリがあると絶対位置が破綻する理由
#
# Transformer-XL は文章を $L$ トークンのセグメントに分けます。
# セグメント $\tau + 1$ を処理するとき、各層は、1 つ下の層がセグメント $\tau$ について作った隠れ状態にもアテンションします。
# この隠れ状態は前のステップから勾配なしで保持されています。
# キーは、メモリの $m$ 個のトークンに、現在のセグメントの $L$ 個のトークンが続いたものになります。
# 絶対位置のエンコーディングをセグメントごとに足すと、どちらのセグメントも位置 $0, \dots, L-1$ を使います。
# メモリの $j$ 番目のトークンと、現在のセグメントの $j$ 番目のトークンが同じベクトル $U_j$ を持ち、
# 一方が他方より $L$ 位置ぶん古いことをモデルに伝えるものが何もありません。
#
# セグメントをまたいで位置を通し番号にすれば衝突は避けられますが、番号は文章に沿ってどこまでも大きくなります。
# 公式のコードでは、バッチの各列がコーパス全体を順に通る 1 本の流れで、メモリはバッチからバッチへ引き継がれます
# （`data_utils.py` の `LMOrderedIterator`）。バッチサイズ 60 なら、WikiText-103 で 1 本あたりおよそ 170 万トークンです。
# 位置は数百万に達し、同じ文章でも流れの中のどこにあるかによって違うエンコーディングを受け取ることになります
# （Dai らが挙げている理由は衝突だけです）。
# モデルに必要なのはクエリとキーの距離で、これはどのセグメントでも同じです。
# 衝突のほうは、2 つのキーが定義上同じ $U_j$ を持つというだけのことなので、コードで確かめても言い換えにしかなりません。
# そこで、次の節の最後では解決策のほうを確かめます。
#
# Dai らの WikiText-103 でのアブレーション（論文の表 6、§4.2、パラメータ数 128M のモデル）は、
# 再帰のある設定では絶対位置のエンコーディングと比較していません。
# 再帰のあるモデルで比べているのは、Dai らのエンコーディングと Shaw らのものだけです。
# 最良のパープレキシティはそれぞれ 26.77 と 27.94 です。
# 絶対位置のエンコーディング（Vaswani らのものと Al-Rfou らのもの）は、再帰のない行にしか現れません。
# しかも、各セグメントの後半だけに損失をかけて学習しています。論文によれば、絶対位置のエンコーディングがうまく働くのはこの設定だけです。
# その比較でも、パープレキシティが最も低いのは Dai らのエンコーディングです。
# 全体に損失をかけると 29.02、後半だけなら 30.10 で、2 つの絶対位置のエンコーディング（30.97 と 31.16）を下回ります。
# 公式の PyTorch のコード（`MemTransformerLM`）には、絶対位置の版が 2 つあります。
# `attn_type=2` は正弦波を入力に足します。位置は最も新しいキーから数えた $m + L - 1, \dots, 0$ で、最初の層ではメモリにも足します。
# `attn_type=3` は Al-Rfou らにならい、層ごとの学習可能な表を各層の入力に足します。

# %% [markdown] lang="en"
# ## From absolute to relative: four terms
#
# Write $E_{x_i}$ for the embedding of the token at position $i$ and $U_i$ for its
# absolute encoding, both as column vectors. With the query and key projections $W_q$
# and $W_k$, the score of the ordinary Transformer (before the scaling) expands into
# four terms:
# $$A^{\mathrm{abs}}_{i,j} = (E_{x_i} + U_i)^\top W_q^\top W_k (E_{x_j} + U_j)$$
# $$A^{\mathrm{abs}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_k E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_k U_j}_{(b)} + \underbrace{U_i^\top W_q^\top W_k E_{x_j}}_{(c)} + \underbrace{U_i^\top W_q^\top W_k U_j}_{(d)}$$
# Term $(a)$ compares contents, $(b)$ the query's content with the key's position, $(c)$ the
# query's position with the key's content, and $(d)$ the two positions. Dai et al. (§3.3)
# change three things:
#
# 1. Every $U_j$ of the key, in $(b)$ and $(d)$, becomes $R_{i-j}$: a sinusoidal encoding
#    of the distance, with no learned parameters.
# 2. The query's position should not matter, so $U_i^\top W_q^\top$ becomes a learned
#    vector, the same for every query: $u$ in $(c)$ and $v$ in $(d)$.
# 3. The key projection is split into $W_{k,E}$ for contents and $W_{k,R}$ for distances.
#
# $$A^{\mathrm{rel}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_{k,E} E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_{k,R} R_{i-j}}_{(b)} + \underbrace{u^\top W_{k,E} E_{x_j}}_{(c)} + \underbrace{v^\top W_{k,R} R_{i-j}}_{(d)}$$
# Now $(a)$ is content against content, $(b)$ content against distance, $(c)$ a global bias
# on the key's content and $(d)$ a global bias on the distance. With the projected
# vectors $q_i = W_q E_{x_i}$, $k_j = W_{k,E} E_{x_j}$ and $r_{i-j} = W_{k,R} R_{i-j}$,
# the terms pair up as two dot products:
# $$A^{\mathrm{rel}}_{i,j} = (q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$$
# This is how the code computes it: `AC` from the queries plus `r_w_bias` ($u$) against
# the keys, and `BD` from the queries plus `r_r_bias` ($v$) against the projected
# encodings. The cell below checks the absolute expansion, builds $A^{\mathrm{rel}}$ term
# by term with Python loops, and compares it with the paired form. Both checks
# are of the algebra (two groupings of the same products), not of any
# implementation; the official code comes in later sections.

# %% [markdown] lang="ja"
# ## 絶対位置から相対位置へ：4 つの項
#
# 位置 $i$ のトークンの埋め込みを $E_{x_i}$、その絶対位置のエンコーディングを $U_i$ と書きます。どちらも列ベクトルです。
# クエリとキーの射影を $W_q$、$W_k$ とすると、通常の Transformer のスコア（スケーリングの前）は 4 つの項に展開できます。
# $$A^{\mathrm{abs}}_{i,j} = (E_{x_i} + U_i)^\top W_q^\top W_k (E_{x_j} + U_j)$$
# $$A^{\mathrm{abs}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_k E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_k U_j}_{(b)} + \underbrace{U_i^\top W_q^\top W_k E_{x_j}}_{(c)} + \underbrace{U_i^\top W_q^\top W_k U_j}_{(d)}$$
# 項 $(a)$ は内容どうし、$(b)$ はクエリの内容とキーの位置、$(c)$ はクエリの位置とキーの内容、$(d)$ は位置どうしを比べます。
# Dai ら（§3.3）は 3 つの点を変えます。
#
# 1. $(b)$ と $(d)$ にあるキーの $U_j$ をすべて $R_{i-j}$ に置き換えます。
#    距離の正弦波エンコーディングで、学習するパラメータはありません。
# 2. クエリの位置は関係ないはずなので、$U_i^\top W_q^\top$ を、どのクエリでも同じ学習可能なベクトルに置き換えます。
#    $(c)$ では $u$、$(d)$ では $v$ です。
# 3. キーの射影を、内容用の $W_{k,E}$ と距離用の $W_{k,R}$ に分けます。
#
# $$A^{\mathrm{rel}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_{k,E} E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_{k,R} R_{i-j}}_{(b)} + \underbrace{u^\top W_{k,E} E_{x_j}}_{(c)} + \underbrace{v^\top W_{k,R} R_{i-j}}_{(d)}$$
# これで $(a)$ は内容と内容、$(b)$ は内容と距離の比較になり、$(c)$ はキーの内容に対する全クエリ共通のバイアス、
# $(d)$ は距離に対する全クエリ共通のバイアスになります。
# 射影したベクトル $q_i = W_q E_{x_i}$、$k_j = W_{k,E} E_{x_j}$、$r_{i-j} = W_{k,R} R_{i-j}$ を使うと、
# 4 つの項は 2 つの内積にまとまります。
# $$A^{\mathrm{rel}}_{i,j} = (q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$$
# コードもこの形で計算します。クエリに `r_w_bias`（$u$）を足してキーと掛けたものが `AC`、
# クエリに `r_r_bias`（$v$）を足して射影したエンコーディングと掛けたものが `BD` です。
# 次のセルでは、絶対位置の展開を確かめ、$A^{\mathrm{rel}}$ を Python のループで項ごとに組み立てて、
# 2 つの内積の形と比べます。
# どちらも代数の確認（同じ積の 2 通りのまとめ方）で、実装の確認ではありません。公式のコードとは後の節で比べます。

# %%
n, d_model, d_head = 6, 16, 8
emb = torch.randn(n, d_model, dtype=f64)  # rows E_{x_i}
u_abs = sinusoidal(torch.arange(n), d_model, dtype=f64)  # rows U_i
w_q, w_k = (
    torch.randn(d_head, d_model, dtype=f64) / math.sqrt(d_model)
    for _ in range(2)
)

# absolute: (E_i + U_i)^T W_q^T W_k (E_j + U_j) = (a) + (b) + (c) + (d)
full = ((emb + u_abs) @ w_q.T) @ ((emb + u_abs) @ w_k.T).T
terms = [
    (x1 @ w_q.T) @ (x2 @ w_k.T).T
    for x1, x2 in [(emb, emb), (emb, u_abs), (u_abs, emb)]
]
assert_close(full, sum(terms) + (u_abs @ w_q.T) @ (u_abs @ w_k.T).T)

# relative: the four terms of Dai et al., entry by entry
w_ke, w_kr = (
    torch.randn(d_head, d_model, dtype=f64) / math.sqrt(d_model)
    for _ in range(2)
)
u, v = torch.randn(d_head, dtype=f64), torch.randn(d_head, dtype=f64)


def sinusoid_row(
    delta,
):  # R_delta, the sinusoidal encoding of a distance (concatenated layout)
    return sinusoidal(torch.tensor(delta), d_model, layout="concat", dtype=f64)


def a_rel(i, j):  # query at position i, key at position j
    e_i, e_j, r_ij = emb[i], emb[j], sinusoid_row(i - j)
    return (
        e_i @ w_q.T @ w_ke @ e_j  # (a) content-content
        + e_i @ w_q.T @ w_kr @ r_ij  # (b) content-position
        + u @ w_ke @ e_j  # (c) global content bias
        + v @ w_kr @ r_ij  # (d) global position bias
    )


loops = torch.tensor(
    [[a_rel(i, j) for j in range(n)] for i in range(n)], dtype=f64
)
q, key = emb @ w_q.T, emb @ w_ke.T  # rows q_i, k_j
paired = torch.tensor(
    [
        [
            (q[i] + u) @ key[j] + (q[i] + v) @ (w_kr @ sinusoid_row(i - j))
            for j in range(n)
        ]
        for i in range(n)
    ],
    dtype=f64,
)
assert_close(loops, paired)

# %% [markdown] lang="en"
# Positions now appear only as $i - j$. The check below confirms what that buys: the
# same four tokens give the same scores among themselves whether they sit at positions
# $0, \dots, 3$ or, behind a memory of five other tokens, at positions
# $5, \dots, 8$. Written with $R_{i-j}$ as above, that would hold by construction, so
# the check goes through the implementation instead: `transformer_xl_scores` of
# `posenc`, with the sinusoids of the distances and the shift of the next sections.
# Absolute encodings, added to the tokens, fail the same test.

# %% [markdown] lang="ja"
# これで位置は $i - j$ としてしか現れません。次の確認で、それによって何が得られるかを見ます。
# 同じ 4 つのトークンは、位置 $0, \dots, 3$ にあっても、ほかの 5 つのトークンからなるメモリの後ろの位置 $5, \dots, 8$ にあっても、
# 互いの間のスコアが同じです。
# 上のように $R_{i-j}$ で書けばこれは構成上成り立つので、確認は実装を通して行います。
# 使うのは `posenc` の `transformer_xl_scores` で、距離の正弦波と、後の節で扱うシフトを使って計算します。
# トークンに足す絶対位置のエンコーディングでは、同じ確認が通りません。


# %%
def a_rel_segment(keys, n_queries):  # the last n_queries keys are the queries
    q_len, k_len = n_queries, len(keys)
    distances = transformer_xl_positions(q_len, k_len)  # k_len - 1, ..., 0
    r = sinusoidal(distances, d_model, layout="concat", dtype=f64) @ w_kr.T
    q = keys[-q_len:] @ w_q.T
    return transformer_xl_scores(q, keys @ w_ke.T, r, u, v)  # [q_len, k_len]


four = emb[:4]
memory = torch.randn(5, d_model, dtype=f64)
alone = a_rel_segment(four, 4)  # positions 0..3
behind = a_rel_segment(torch.cat([memory, four]), 4)  # positions 5..8
assert_close(alone, behind[:, 5:])  # the four among themselves: the same


def a_abs_at(pos, tokens):
    x = tokens + sinusoidal(pos, d_model, dtype=f64)
    return (x @ w_q.T) @ (x @ w_k.T).T


assert not torch.allclose(
    a_abs_at(torch.arange(0, 4), four), a_abs_at(torch.arange(5, 9), four)
)

# %% [markdown] lang="en"
# ## The relative encoding R
#
# $R$ is the sinusoidal table of the chapter
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb), evaluated
# at distances instead of positions. Transformer-XL's `PositionalEmbedding` uses the
# frequencies `inv_freq = 1 / 10000 ** (arange(0, d, 2) / d)`, that is
# $\omega_i = 10000^{-2i/d}$, and concatenates all sines before all cosines: in
# `posenc`, `sinusoidal(distances, d, layout="concat")`. Which distances? The queries of
# a segment are the last $L$ of the $m + L$ keys, so query $i$ sits at position $i + m$,
# and the distances to its keys run from $i + m$ (the oldest memory token) down to $0$
# (itself). Over all queries that is $m + L - 1, \dots, 1, 0$: one encoding per key
# slot, `pos_seq = torch.arange(klen - 1, -1, -1.0)` in the code, in *descending* order.
# `posenc.transformer_xl.transformer_xl_positions(q_len, k_len)` returns this sequence.
# The check compares with numbers that the official `PositionalEmbedding(8)` itself
# printed (kimiyoung/transformer-xl at commit 44781ed, run in a separate
# environment), and with a port of it for $d = 16$.
#
# Since $R$ has no parameters, any distance has an encoding, including distances longer
# than in training. The official scripts evaluate with a longer memory than they train
# with: on WikiText-103, 640 against 150 (base) and 1600 against 384 (large), with
# `clamp_len` 400 and 1000 (`run_wt103_base.sh`, `run_wt103_large.sh`).
# Only $W_{k,R}$, $u$ and $v$ are learned. (Transformer-XL's `clamp_len` option caps the
# distances, so that all farther ones share one encoding.)
#
# Table 6 of the paper measures what this buys. Its "Attn Len" is the shortest
# attention length at evaluation that reaches the best perplexity. With recurrence,
# their encoding improves from 27.02 at the training length to 26.77 and needs 500
# to get there; Shaw et al.'s stays at 27.94, reached at 256. The paper notes that
# a longer attention at evaluation helps only with its own encoding. Its larger
# 151M model goes from 23.43 to 23.09 at 640. On One Billion Word, which has no
# long-range dependencies, their encoding still beats Shaw et al.'s, 25.2 against
# 25.7 perplexity (Table 7).

# %% [markdown] lang="ja"
# ## 相対エンコーディング R
#
# $R$ は[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の正弦波の表を、位置ではなく距離で評価したものです。
# Transformer-XL の `PositionalEmbedding` は周波数 `inv_freq = 1 / 10000 ** (arange(0, d, 2) / d)`、
# つまり $\omega_i = 10000^{-2i/d}$ を使い、すべての正弦のあとにすべての余弦を並べます（連結配置）。
# `posenc` では `sinusoidal(distances, d, layout="concat")` です。
# では、どの距離が必要でしょうか。セグメントのクエリは $m + L$ 個のキーのうち最後の $L$ 個なので、
# クエリ $i$ は位置 $i + m$ にあり、そのキーまでの距離は $i + m$（いちばん古いメモリのトークン）から
# $0$（自分自身）までです。
# すべてのクエリを合わせると $m + L - 1, \dots, 1, 0$ で、キー 1 つにつき 1 つのエンコーディングになります。
# コードでは `pos_seq = torch.arange(klen - 1, -1, -1.0)` で、**降順**です。
# `posenc.transformer_xl.transformer_xl_positions(q_len, k_len)` がこの列を返します。
# 次の確認では、公式の `PositionalEmbedding(8)` 自身が出力した数値（kimiyoung/transformer-xl のコミット 44781ed を別の環境で実行したもの）と比べます。
# $d = 16$ では、そのコードの移植とも比べます。
#
# $R$ にはパラメータがないので、学習時より長い距離も含め、どんな距離にもエンコーディングがあります。
# 公式のスクリプトは、学習時より長いメモリで評価します。
# WikiText-103 では、base で 150 に対して 640、large で 384 に対して 1600 で、`clamp_len` はそれぞれ 400 と 1000 です（`run_wt103_base.sh`、`run_wt103_large.sh`）。
# 学習するのは $W_{k,R}$、$u$、$v$ だけです。
# Transformer-XL の `clamp_len` オプションは距離に上限を設けるもので、それより遠い距離はすべて同じエンコーディングを共有します。
#
# この性質がどれだけ効くかは、論文の表 6 から読み取れます。
# 表の「Attn Len」は、評価時に最良のパープレキシティに達する最短のアテンションの長さです。
# 再帰のあるモデルでは、Dai らのエンコーディングのパープレキシティは、学習時の長さでの 27.02 から 26.77 まで下がります。
# ただし、そこまで下げるにはアテンションの長さが 500 必要です。
# Shaw らのものは 27.94 どまりで、この値には長さ 256 で達します。
# 論文は、評価時にアテンションを長くして効果があるのは Dai らのエンコーディングを使うときだけだと述べています。
# パラメータ数 151M のより大きなモデルでは、長さ 640 で 23.43 から 23.09 まで下がります。
# 長距離の依存関係がない One Billion Word でも、Dai らのエンコーディングは Shaw らのものより良い結果を出しており、
# パープレキシティは 25.2 対 25.7 です（表 7）。


# %%
def txl_positional_embedding(
    pos_seq, demb
):  # PositionalEmbedding.forward, without the batch axis
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=f64) / demb))
    sinusoid_inp = torch.outer(pos_seq, inv_freq)
    return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


# printed by the official PositionalEmbedding(8) (pytorch/mem_transformer.py,
# commit 44781ed) for pos_seq = arange(5, -1, -1): its rows for 5, 2 and 0
official = torch.tensor(
    [
        [-0.9589243, 0.4794255, 0.0499792, 0.005,
         0.2836622, 0.8775826, 0.9987503, 0.9999875],
        [0.9092974, 0.1986693, 0.0199987, 0.002,
         -0.4161468, 0.9800666, 0.9998, 0.999998],
        [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
    ],
    dtype=f64,
)  # fmt: skip
ours8 = sinusoidal(torch.tensor([5, 2, 0]), 8, layout="concat", dtype=f64)
assert_close(ours8, official, atol=2e-7, rtol=0)

q_len, m_len = 4, 3
k_len = q_len + m_len
pos_seq = torch.arange(
    k_len - 1, -1, -1.0, dtype=f64
)  # MemTransformerLM._forward
distances = transformer_xl_positions(q_len, k_len)
assert torch.equal(distances, pos_seq.long())
r_table = sinusoidal(distances, d_model, layout="concat", dtype=f64)
assert_close(r_table, txl_positional_embedding(pos_seq, d_model))
clamped = transformer_xl_positions(q_len, k_len, clamp_len=4)
print(f"pos_seq for q_len = {q_len}, k_len = {k_len}: {distances.tolist()}")
print(f"with clamp_len = 4: {clamped.tolist()}", end="")

# %% [markdown] lang="en"
# ## Lining up the distances: the relative shift
#
# Terms $(a)$ and $(c)$ are one matrix product, $(Q + u) K^\top$. Terms $(b)$ and $(d)$ are not:
# the vector $r_{i-j}$ changes with the pair. Computing $(q_i + v)^\top r_{i-j}$ for every
# pair from a gathered $(L, m + L, d)$ tensor would bring back the memory cost of the
# direct computation in
# [*Relative position representations*](04-shaw-relative.ipynb#what-the-direct-computation-costs).
# Instead, Transformer-XL multiplies every query with every *distance* once,
# $$B = (Q + v)\, \tilde R^\top$$
# where row $s$ of $\tilde R$ is $r_{m + L - 1 - s}$ (the order of `pos_seq`). $B$ is
# $L \times (m+L)$ like the scores, but its column $s$ is a distance, not a key. The
# pair $(i, j)$ needs the distance $i + m - j$, which sits in column
# $$s = m + L - 1 - (i + m - j) = j + L - 1 - i$$
# so row $i$ must move left by $L - 1 - i$ places: the last row stays, the first moves
# by $L - 1$. Dai et al.'s Appendix B computes this product for term $(b)$, their
# $\tilde{\mathbf B} = \mathbf q \mathbf Q^\top$ with the distances in the same
# descending order (and term $(d)$ alike, with $v$), and notes that each row of the
# wanted scores is a left-shifted row of it, with zeros for the keys after the
# query. The pad and two reshapes that do the shift, and the
# entries they leave past the diagonal, come from the official code
# (`_rel_shift`), not from the appendix:
#
# 1. pad a column of zeros on the left: $L \times (m + L + 1)$;
# 2. reshape the same numbers, in the same memory order, to $(m + L + 1) \times L$;
# 3. drop the first row, that is the first $L$ numbers;
# 4. read the remaining $L(m + L)$ numbers as $L \times (m + L)$.
#
# Entry $(i, j)$ of the result is number $L + i(m + L) + j$ of the padded rows laid end
# to end. Padded rows have $m + L + 1$ entries, so that is row $i$, padded column
# $L + j - i$, provided it does not run past the end of the row:
# $$L + j - i \le m + L \quad\Longleftrightarrow\quad j \le i + m$$
# Padded column $L + j - i$ is column $j + L - 1 - i$ of $B$: exactly the $s$ above. So the
# shift is exact for every key at or before its query, $j \le i + m$, which is every key
# a causal model may see. The cell below makes this visible with a $B$ whose entries are
# labels, $10 i$ plus the distance of the column, for $L = 4$ and $m = 2$. After the shift
# the entries with $j \le i + 2$ read $10 i + (i + 2 - j)$, the query's row and the right
# distance. The result is compared with what the official `_rel_shift` printed for the
# same labels. It then checks the shift against a direct gather for random $B$, with and
# without memory.

# %% [markdown] lang="ja"
# ## 距離をそろえる：相対シフト
#
# 項 $(a)$ と $(c)$ は 1 回の行列積 $(Q + u) K^\top$ です。一方、項 $(b)$ と $(d)$ は 1 回の行列積では計算できません。
# ベクトル $r_{i-j}$ が組ごとに変わるからです。
# $(L, m + L, d)$ のテンソルを gather して組ごとに $(q_i + v)^\top r_{i-j}$ を計算すると、
# [「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb#直接計算のコスト)の章で見た直接計算と同じく、メモリを大量に使うことになります。
# Transformer-XL は代わりに、すべてのクエリとすべての**距離**の積を一度だけ計算します。
# $$B = (Q + v)\, \tilde R^\top$$
# ここで $\tilde R$ の行 $s$ は $r_{m + L - 1 - s}$ です（`pos_seq` の順）。
# $B$ はスコアと同じ $L \times (m+L)$ ですが、列 $s$ はキーではなく距離です。
# 組 $(i, j)$ には距離 $i + m - j$ が必要で、それは次の列にあります。
# $$s = m + L - 1 - (i + m - j) = j + L - 1 - i$$
# したがって、行 $i$ を $L - 1 - i$ 列ぶん左へずらす必要があります。最後の行はそのままで、最初の行は $L - 1$ 列ぶんずれます。
# Dai らの付録 B も、項 $(b)$ についてこの積を計算しています。
# 論文の $\tilde{\mathbf B} = \mathbf q \mathbf Q^\top$ がそれで、距離の並びも同じ降順です（項 $(d)$ も $v$ を使って同様です）。
# 付録には、求めるスコアの各行はこの積の行を左へずらしたもので、クエリより後ろのキーには 0 が入る、とあります。
# 一方、このずらしを行うパディング 1 回と形状変換 2 回、そしてそれが対角線より上に残す成分は、付録ではなく公式のコード（`_rel_shift`）から来ています。
# 手順は次のとおりです。
#
# 1. 左に 0 の列を 1 つパディングします：$L \times (m + L + 1)$。
# 2. 同じ数を同じメモリ順のまま $(m + L + 1) \times L$ に形状変換します。
# 3. 最初の行、つまり最初の $L$ 個の数を捨てます。
# 4. 残りの $L(m + L)$ 個の数を $L \times (m + L)$ として読みます。
#
# 結果の成分 $(i, j)$ は、パディングした行を端から端までつなげたときの、0 から数えて $L + i(m + L) + j$ 番目の数です。
# パディングした行は $m + L + 1$ 個の成分を持つので、行の終わりを越えない限り、それは行 $i$ のパディング後の列 $L + j - i$ です。
# $$L + j - i \le m + L \quad\Longleftrightarrow\quad j \le i + m$$
# パディング後の列 $L + j - i$ は $B$ の列 $j + L - 1 - i$、まさに上の $s$ です。
# つまりシフトは、クエリと同じ位置かそれより前にあるすべてのキー $j \le i + m$ について正確です。因果的なモデルが見てよいキーは、これで全部です。
# 次のセルでは、各成分に出どころの分かるラベルを入れた $B$ を使って、これを目に見える形で示します。
# $L = 4$、$m = 2$ で、ラベルは $10 i$ に列の距離を足したものです。
# シフト後、$j \le i + 2$ の成分は $10 i + (i + 2 - j)$ になります。
# ラベルの十の位はクエリの行を、一の位はその組の正しい距離を表します。
# この結果を、同じラベルに対して公式の `_rel_shift` が出力したものと比べます。
# 続いて、メモリのある場合とない場合について、ランダムな $B$ でシフトを直接の gather と照合します。

# %%
q_len, m_len = 4, 2
k_len = q_len + m_len
distances = transformer_xl_positions(q_len, k_len)
labels = 10 * torch.arange(q_len)[:, None] + distances  # 10 i + distance
print(labels)
print(relative_shift(labels))
# what the official RelMultiHeadAttn._rel_shift (commit 44781ed) printed
# for these labels, laid out as [qlen, klen, 1, 1]
official_shift = [
    [2, 1, 0, 0, 15, 14],
    [13, 12, 11, 10, 0, 25],
    [24, 23, 22, 21, 20, 0],
    [35, 34, 33, 32, 31, 30],
]
assert relative_shift(labels).tolist() == official_shift


def gather_shift(b, k_len):
    """Gather: out[i, j] = b[i, j + L - 1 - i], valid where j <= i + m."""
    q_len = b.shape[-2]
    i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
    s = j + q_len - 1 - i
    causal = j <= i + (k_len - q_len)
    return torch.gather(b, -1, s.clamp(max=k_len - 1).expand_as(b)), causal


for q_len, k_len in [(4, 4), (8, 8), (4, 6), (3, 10), (1, 5)]:
    b = torch.randn(2, q_len, k_len)
    direct, causal = gather_shift(b, k_len)
    assert torch.equal(relative_shift(b)[:, causal], direct[:, causal])

# %% [markdown] lang="en"
# ## The entries above the diagonal
#
# The keys after a query, $j > i + m$, have negative distances, and $B$ has no column for
# them. The shift still fills those entries, and the printed example shows with what.
# Continuing the count past the end of row $i$: the first one, $j = i + m + 1$, lands on
# the zero that was padded in front of row $i + 1$, and the ones after it,
# $j \ge i + m + 2$, on the start of row $i + 1$ of $B$:
# $$\mathrm{out}_{i,\,i+m+1} = 0, \qquad \mathrm{out}_{i,j} = B_{i+1,\; j - i - m - 2} \quad (j \ge i + m + 2)$$
# These are numbers of the *next* query, against distances that have nothing to do with
# the pair: not a score of the pair, and not even a clipped or approximate one. In the
# labelled example, row 0 ends with $0, 15, 14$: the pad, then query 1's labels. Since
# they sit exactly where the causal mask of Transformer-XL puts $-\infty$ (its
# `dec_attn_mask` is `triu(ones(qlen, klen), diagonal=1 + mlen)`), they never reach the
# softmax. The figure marks, for two shapes, which entries are the query's own row, the
# pad, and the next row; the cell after it checks the formula for every entry and
# shows that with the mask, the attention weights equal those of the direct four-term
# computation, and that without it they do not.

# %% [markdown] lang="ja"
# ## 対角線より上の成分
#
# クエリより後ろのキー $j > i + m$ は負の距離を持ち、$B$ にはそのための列がありません。
# それでもシフトはこれらの成分を埋めます。何で埋めるかは、表示した例に現れています。
# 行 $i$ の終わりを越えて数え続けると、最初の $j = i + m + 1$ は行 $i + 1$ の前にパディングした 0 に当たり、
# その後の $j \ge i + m + 2$ は $B$ の行 $i + 1$ の先頭からの成分に当たります。
# $$\mathrm{out}_{i,\,i+m+1} = 0, \qquad \mathrm{out}_{i,j} = B_{i+1,\; j - i - m - 2} \quad (j \ge i + m + 2)$$
# これらは次のクエリの行の値で、しかもその組とは無関係な距離に対するものです。
# 組のスコアではなく、クリップした値や近似値ですらありません。
# ラベルの例では、行 0 は $0, 15, 14$ で終わります。パディングの後に、クエリ 1 のラベルが続いています。
# これらの成分は、Transformer-XL の因果マスクが $-\infty$ を置く場所とちょうど一致するので、softmax には届きません
# （マスク `dec_attn_mask` は `triu(ones(qlen, klen), diagonal=1 + mlen)` で作られます）。
# 下の図は 2 つの形状について、各成分の出どころ（クエリ自身の行、パディング、次の行）を示します。
# その後のセルでは、すべての成分について式を確かめ、マスクをかければアテンションの重みが
# 4 項の直接計算と一致し、かけなければ一致しないことを示します。

# %% alt={"en": ["Source of each entry of the relative shift for L = 8, m = 0 (left) and L = 5, m = 3 (right), query i down, key j across: row i of B (grey) up to j = i + m, then the pad 0 (orange) and row i + 1 (blue), which the causal mask hides."], "ja": ["相対シフトの出力の各成分がどこから来るかを示す図（左は L = 8、m = 0、右は L = 5、m = 3。縦軸はクエリ i、横軸はキー j）。j ≤ i + m は B の行 i（灰色）、j = i + m + 1 はパディングの 0（橙）、その先は次の行 i + 1（青）で、後の 2 つは因果マスクが隠す位置です。"]}
colors = ListedColormap(
    ["0.85", OKABE_ITO[1], OKABE_ITO[0]]
)  # own row, pad, next row
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.3), layout="constrained")
for ax, (q_len, k_len) in zip(axes, [(8, 8), (5, 8)], strict=True):
    source = (
        (torch.arange(q_len)[:, None] + 1).expand(q_len, k_len).contiguous()
    )  # row i holds i+1
    shifted = relative_shift(source)
    kind = torch.where(shifted == 0, 1, torch.where(shifted == source, 0, 2))
    im = ax.imshow(
        kind, cmap=colors, vmin=-0.5, vmax=2.5, interpolation="nearest"
    )
    ax.set(
        xlabel="$j$",
        ylabel="$i$",
        title=f"$L = {q_len},\\ m = {k_len - q_len}$",
    )
    ax.set_xticks(range(0, k_len, 2))
    ax.set_yticks(range(0, q_len, 2))
    ax.grid(False)
bar = fig.colorbar(im, ax=axes, ticks=[0, 1, 2], shrink=0.8)
bar.ax.set_yticklabels([r"$B_{i,\cdot}$", "$0$", r"$B_{i+1,\cdot}$"])
plt.show()

# %%
for q_len, k_len in [(4, 4), (8, 8), (4, 6), (3, 10)]:
    m_len = k_len - q_len
    b = torch.randn(q_len, k_len)
    out = relative_shift(b)
    for i in range(q_len):
        for j in range(i + m_len + 1, k_len):
            expected = (
                0.0 if j == i + m_len + 1 else b[i + 1, j - i - m_len - 2]
            )
            assert out[i, j] == expected

# the whole attention, Transformer-XL's way, against the four terms directly
q_len, m_len = 5, 3
k_len = q_len + m_len
emb = torch.randn(k_len, d_model, dtype=f64)  # memory, then current segment
q, key = emb[-q_len:] @ w_q.T, emb @ w_ke.T  # queries: the last q_len tokens
r = (
    sinusoidal(
        transformer_xl_positions(q_len, k_len),
        d_model,
        layout="concat",
        dtype=f64,
    )
    @ w_kr.T
)
scores = (q + u) @ key.T + relative_shift((q + v) @ r.T)  # AC + BD
mask = torch.triu(
    torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1 + m_len
)  # dec_attn_mask
weights = torch.softmax(
    (scores / math.sqrt(d_head)).masked_fill(mask, -math.inf), dim=-1
)

direct = torch.tensor(
    [
        [
            (q[i] + u) @ key[j]
            + (q[i] + v) @ (w_kr @ sinusoid_row(i + m_len - j))
            for j in range(k_len)
        ]
        for i in range(q_len)
    ],
    dtype=f64,
)  # every pair, future keys too, with their true (negative) distances
direct_weights = torch.softmax(
    (direct / math.sqrt(d_head)).masked_fill(mask, -math.inf), dim=-1
)
assert_close(weights, direct_weights)
assert_close(scores[~mask], direct[~mask])
unmasked_gap = (
    (torch.softmax(scores, -1) - torch.softmax(direct, -1)).abs().max()
)
assert unmasked_gap > 1e-2
print(f"without the mask: max |weight difference| {unmasked_gap:.3f}", end="")

# %% [markdown] lang="en"
# ## With a memory: where the mask must start
#
# Everything above already had $m > 0$, and the derivation never assumed $m = 0$: the
# shift works for $L$ queries against $m + L$ keys because the queries are the *last*
# $L$ tokens, which is how Transformer-XL slices them (`w_head_q = w_head_q[-qlen:]`).
# Two things move with $m$. The boundary between exact entries and garbage is the
# diagonal $j = i + m$, not $j = i$; and so must the mask be. The familiar causal mask
# `triu(ones, diagonal=1)` of a model without memory hides the keys $j > i$: with a
# memory, that hides the $m$ most recent keys $i + 1, \dots, i + m$ of every query,
# although they are in its past, and the scores there are exact. The check counts them
# for $L = 5$ and $m = 3$: $L m = 15$ entries. `posenc.attention(..., causal=True)` uses
# the right alignment, query $i$ at position $i + m$, and gives the same output as
# Transformer-XL's mask.
#
# The published evaluation uses yet another mask. Both official evaluation
# scripts (`run_wt103_base.sh` and `run_wt103_large.sh`) pass `--same_length`, and
# `MemTransformerLM._forward` then adds `tril(ones, -mask_shift_len)` to
# `dec_attn_mask`. Once the memory is full ($m$ = `mem_len`), `mask_shift_len` is
# $0$, so query $i$ also loses the keys $0, \dots, i$: every query sees exactly $m$ keys,
# itself and the $m - 1$ before it, instead of $m + i + 1$. The cell rebuilds that
# mask and counts.

# %% [markdown] lang="ja"
# ## メモリがあるとき：マスクはどこから始めるか
#
# ここまでの例はすでに $m > 0$ で、導出でも $m = 0$ は仮定していません。
# $L$ 個のクエリと $m + L$ 個のキーでシフトが成り立つのは、クエリが**最後の** $L$ 個のトークンだからです。
# Transformer-XL もそのように切り出しています（`w_head_q = w_head_q[-qlen:]`）。
# $m$ とともに動くものが 2 つあります。正確な成分と無意味な値の境目は、$j = i$ ではなく対角線 $j = i + m$ です。
# そして、マスクもそれに合わせなければなりません。
# メモリのないモデルでおなじみの因果マスク `triu(ones, diagonal=1)` は、キー $j > i$ を隠します。
# メモリがあると、このマスクは各クエリの直近の $m$ 個のキー $i + 1, \dots, i + m$ まで隠してしまいます。
# これらのキーはクエリより過去にあり、スコアも正確です。
# 次の確認では $L = 5$、$m = 3$ についてその数を数えます。$L m = 15$ 個です。
# `posenc.attention(..., causal=True)` は正しい位置合わせ（クエリ $i$ は位置 $i + m$）を使い、
# Transformer-XL のマスクと同じ出力を与えます。
#
# 論文の評価では、さらに別のマスクを使っています。
# 公式の評価スクリプトは 2 つとも（`run_wt103_base.sh` と `run_wt103_large.sh`）`--same_length` を指定します。
# このとき `MemTransformerLM._forward` は、`dec_attn_mask` に `tril(ones, -mask_shift_len)` を加えます。
# メモリが埋まると（$m$ = `mem_len`）`mask_shift_len` は $0$ になるので、クエリ $i$ からはキー $0, \dots, i$ も隠されます。
# どのクエリにも、$m + i + 1$ 個ではなく、ちょうど $m$ 個のキー（自分自身とその前の $m - 1$ 個）が見えることになります。
# セルでは、このマスクを作り直して数えます。

# %%
ones = torch.ones(q_len, k_len, dtype=torch.bool)
naive = torch.triu(ones, diagonal=1)  # ignores the memory
wrongly_hidden = int((naive & ~mask).sum())
assert wrongly_hidden == q_len * m_len
print(
    f"L = {q_len}, m = {m_len}: "
    f"the mask without memory hides {wrongly_hidden} past keys",
    end="",
)

values = torch.randn(k_len, d_head, dtype=f64)
# everything but q_i . k_j, as an additive bias
# (posenc.attention divides q k^T by sqrt(d) itself)
bias = (u @ key.T + relative_shift((q + v) @ r.T)) / math.sqrt(d_head)
with_bias = attention(q, key, values, bias=bias, causal=True)
assert_close(with_bias, weights @ values)

# --same_length (MemTransformerLM._forward, a port) with a full memory
mem_len = m_len
mask_len = k_len - mem_len
mask_shift_len = q_len - mask_len if mask_len > 0 else q_len
same_length = torch.triu(ones, 1 + m_len) | torch.tril(ones, -mask_shift_len)
assert (~same_length).sum(-1).tolist() == [m_len] * q_len  # m keys each
assert (~mask).sum(-1).tolist() == [m_len + i + 1 for i in range(q_len)]

# %% [markdown] lang="en"
# ## The direction of the distances
#
# The shift moves row $i$ left by $L - 1 - i$ places, and that is only right if the
# columns of $B$ hold the distances in *descending* order, $m + L - 1$ down to $0$. Build
# $\tilde R$ from `arange(klen)` instead, the natural order for anyone who thinks of
# $R$ as a table indexed by distance, and column $s$ holds the distance $s$. After the
# shift, the pair $(i, j)$ gets the distance $j + L - 1 - i$ instead of $i + m - j$: it
# grows with $j$ instead of shrinking. For the last query the distance is just $j$, the
# key's position, as if the encoding were absolute, and every query gets the largest
# distance, $m + L - 1$, for itself. Most pairs get a wrong distance: the
# two agree only where $i + m - j = j + L - 1 - i$, that is
# $i - j = (L - 1 - m)/2$, which never happens when $L - 1 - m$ is odd, as for
# $L = 4$ and $m = 2$, and otherwise for one pair in each of
# $L - (L - 1 - m)/2$ rows ($L \ge m + 1$). With at most one right pair per row,
# at most $L$ of the $L(L+1)/2 + Lm$ pairs that the queries see are right, a share
# of at most $2/(L + 1 + 2m)$, which falls to 0 as $L$ grows; in the small shapes
# below it is still up to a third. Nothing raises an error: the shapes
# agree and the scores are finite, so only a check like this one shows the mistake.
# The check applies the shift to the distances themselves, in both orders, for
# $L = 4$ and $m = 2$, and prints them with the entries above the diagonal set to
# $-1$; then it counts the right pairs for five shapes against the formula and
# checks that they are fewer than half of the pairs.

# %% [markdown] lang="ja"
# ## 距離の向き
#
# シフトは行 $i$ を $L - 1 - i$ 列ぶん左へずらします。これが正しいのは、$B$ の列が距離を**降順**、
# つまり $m + L - 1$ から $0$ の順に持つときだけです。
# $R$ を距離で引く表と考えると、`arange(klen)` で $\tilde R$ を作るのが自然に思えます。しかしそうすると、列 $s$ には距離 $s$ が入ります。
# シフトの後、組 $(i, j)$ が受け取る距離は $i + m - j$ ではなく $j + L - 1 - i$ になり、
# $j$ とともに小さくなるのではなく大きくなります。
# 最後のクエリでは距離は単に $j$、つまりキーの位置になり、まるで絶対位置のエンコーディングのようです。
# そして、どのクエリも自分自身に対していちばん大きな距離 $m + L - 1$ を受け取ります。
# 大半の組が間違った距離を受け取ります。
# 2 つの距離が一致するのは $i + m - j = j + L - 1 - i$、つまり $i - j = (L - 1 - m)/2$ のときだけです。
# $L = 4$、$m = 2$ のように $L - 1 - m$ が奇数なら一致する組はなく、
# そうでなければ $L - (L - 1 - m)/2$ 個の行で 1 組ずつ一致します（$L \ge m + 1$ のとき）。
# 正しい組は 1 行に多くても 1 つなので、クエリから見える $L(L+1)/2 + Lm$ 組のうち正しいのは多くても $L$ 組です。
# 正しい組の割合は $2/(L + 1 + 2m)$ 以下で、$L$ が大きくなると 0 に近づきます。
# とはいえ、下の小さな形状では、正しい組の割合がまだ 3 分の 1 に達するものもあります。
# それでも、どこにもエラーは出ません。形状は合い、スコアは有限なので、この誤りはこのような確認でしか分かりません。
# 次の確認では、$L = 4$、$m = 2$ について距離そのものに両方の順でシフトをかけ、
# 対角線より上の成分を $-1$ にして表示します。
# そのあと 5 つの形状について、正しい距離を受け取る組の数を式と比べ、それがクエリから見える組の半分に満たないことを確かめます。

# %%
q_len, m_len = 4, 2
k_len = q_len + m_len
causal = ~torch.triu(
    torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1 + m_len
)
true_distance = (
    torch.arange(q_len)[:, None] + m_len - torch.arange(k_len)[None, :]
)  # i + m - j

descending = (
    transformer_xl_positions(q_len, k_len).expand(q_len, k_len).contiguous()
)
ascending = (
    torch.arange(k_len).expand(q_len, k_len).contiguous()
)  # the wrong order
got_desc = relative_shift(descending).masked_fill(~causal, -1)
got_asc = relative_shift(ascending).masked_fill(~causal, -1)
assert torch.equal(got_desc[causal], true_distance[causal])
s = (
    torch.arange(k_len)[None, :] + q_len - 1 - torch.arange(q_len)[:, None]
)  # j + L - 1 - i
assert torch.equal(got_asc[causal], s[causal])
assert torch.equal(
    got_asc[-1], torch.arange(k_len)
)  # last query: the key's position
assert (
    got_asc[torch.arange(q_len), torch.arange(q_len) + m_len] == k_len - 1
).all()  # j = i + m
print(
    "descending pos_seq:\n", got_desc, "\nascending:\n", got_asc, sep="", end=""
)

# pairs that the ascending order gets right, against L - (L - 1 - m) / 2
for q_len, m_len in [(4, 2), (3, 0), (5, 0), (4, 1), (6, 1)]:
    k_len = q_len + m_len
    i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
    seen = j <= i + m_len  # the causal pairs
    shifted = relative_shift(torch.arange(k_len).expand(q_len, k_len))
    right = int((shifted == i + m_len - j)[seen].sum())
    gap = q_len - 1 - m_len
    assert right == (0 if gap % 2 else q_len - gap // 2)
    pairs = int(seen.sum())
    assert pairs == q_len * (q_len + 1) // 2 + q_len * m_len
    assert right <= q_len and right * (q_len + 1 + 2 * m_len) <= 2 * pairs
    assert 2 * right < pairs  # 0 of 18, 2 of 6, 3 of 15, 3 of 14, 4 of 27

# %% [markdown] lang="en"
# ## In posenc
#
# `posenc.transformer_xl` gathers the pieces, with the shapes of PyTorch code: batch axes
# first, then queries, then keys or distances.
#
# - `transformer_xl_positions(q_len, k_len, *, bidirectional=False, clamp_len=None)`:
#   the distances, descending. With `bidirectional=True` they continue to
#   $-(L - 1)$: $m + 2L - 1$ distances, which cover the keys after each query too.
# - `relative_shift(x, k_len=None)`: the shift, for $x$ of shape $(\dots, L, r)$ whose
#   column $s$ is the distance $k_{\mathrm{len}} - 1 - s$. With $r = m + L$ it is exact
#   where $j \le i + m$, as derived. With $r = m + 2L - 1$, the condition of the
#   derivation, padded column $L + j - i \le r$, holds for every $j < m + L$: the shift is
#   exact everywhere, and the first $m + L$ columns are kept.
# - `transformer_xl_scores(q, k, r, u, v)`: the full $(\dots, L, m + L)$ matrix
#   $A^{\mathrm{rel}}$, before the scaling by $1/\sqrt{d}$. With one row of `r` per key
#   (causal), the entries after each query are $-\infty$, the mask applied at the source
#   instead of garbage; with $m + 2L - 1$ rows, every entry is a score.
#
# The cell checks both modes of `transformer_xl_scores` against the direct four-term
# computation, and a multi-head, batched case against a port of
# `RelPartialLearnableMultiHeadAttn`'s score in its own layout `[qlen, klen, bsz, n_head]`.

# %% [markdown] lang="ja"
# ## posenc では
#
# `posenc.transformer_xl` がこれらをまとめています。形状は PyTorch のコードの慣習どおり、
# バッチの軸が先頭で、その後にクエリ、そしてキーまたは距離が続きます。
#
# - `transformer_xl_positions(q_len, k_len, *, bidirectional=False, clamp_len=None)`：降順の距離です。
#   `bidirectional=True` のときは $-(L - 1)$ まで続きます。
#   距離は全部で $m + 2L - 1$ 個になり、各クエリより後ろのキーも扱えます。
# - `relative_shift(x, k_len=None)`：シフトです。$x$ の形状は $(\dots, L, r)$ で、
#   列 $s$ が距離 $k_{\mathrm{len}} - 1 - s$ に対応します。
#   $r = m + L$ なら、導いたとおり $j \le i + m$ の範囲で正確です。
#   $r = m + 2L - 1$ なら、導出の条件であるパディング後の列 $L + j - i \le r$ が、すべての $j < m + L$ で成り立ちます。
#   シフトはどこでも正確になり、最初の $m + L$ 列を残します。
# - `transformer_xl_scores(q, k, r, u, v)`：$1/\sqrt{d}$ でスケーリングする前の、$(\dots, L, m + L)$ の行列
#   $A^{\mathrm{rel}}$ 全体です。`r` の行がキーごとに 1 つ（因果的）なら、各クエリより後ろの成分は $-\infty$ になります。
#   無意味な値を残さず、その場でマスクをかけるわけです。行が $m + 2L - 1$ 個なら、すべての成分がスコアです。
#
# 次のセルでは、`transformer_xl_scores` の両方のモードを 4 項の直接計算と照合します。
# さらに、マルチヘッドでバッチのある場合を、`RelPartialLearnableMultiHeadAttn` のスコアを
# その形状 `[qlen, klen, bsz, n_head]` のまま移植したものと照合します。

# %%
q_len, m_len = 5, 3
k_len = q_len + m_len
emb = torch.randn(k_len, d_model, dtype=f64)
q, key = emb[-q_len:] @ w_q.T, emb @ w_ke.T


def direct_scores(
    q, key, u, v, w_kr
):  # every pair with its true distance i + m - j
    q_len, k_len = q.shape[-2], key.shape[-2]
    return torch.tensor(
        [
            [
                (q[i] + u) @ key[j]
                + (q[i] + v) @ (w_kr @ sinusoid_row(i + k_len - q_len - j))
                for j in range(k_len)
            ]
            for i in range(q_len)
        ],
        dtype=f64,
    )


true_scores = direct_scores(q, key, u, v, w_kr)
future = torch.triu(
    torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1 + m_len
)
for bidirectional in (False, True):
    distances = transformer_xl_positions(
        q_len, k_len, bidirectional=bidirectional
    )
    r = (
        sinusoidal(distances, d_model, layout="concat", dtype=f64) @ w_kr.T
    )  # [r, d_head]
    got = transformer_xl_scores(q, key, r, u, v)
    if bidirectional:
        assert r.shape[0] == k_len + q_len - 1
        assert_close(got, true_scores)  # every entry
    else:
        assert r.shape[0] == k_len and torch.isinf(got[future]).all()
        assert_close(got[~future], true_scores[~future])


def txl_rel_shift(
    x,
):  # RelMultiHeadAttn._rel_shift, layout [qlen, klen, bsz, n_head]
    zero_pad = torch.zeros(
        (x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype
    )
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


bsz, n_head = 2, 3
w_head_q = torch.randn(q_len, bsz, n_head, d_head, dtype=f64)
w_head_k = torch.randn(k_len, bsz, n_head, d_head, dtype=f64)
r_net = torch.randn(n_head * d_head, d_model, dtype=f64)  # W_{k,R} of all heads
r_w_bias, r_r_bias = (
    torch.randn(n_head, d_head, dtype=f64),
    torch.randn(n_head, d_head, dtype=f64),
)
pos_emb = txl_positional_embedding(
    torch.arange(k_len - 1, -1, -1.0, dtype=f64), d_model
)
r_head_k = (pos_emb @ r_net.T).view(k_len, n_head, d_head)
ac = torch.einsum("ibnd,jbnd->ijbn", w_head_q + r_w_bias, w_head_k)
bd = txl_rel_shift(
    torch.einsum("ibnd,jnd->ijbn", w_head_q + r_r_bias, r_head_k)
)
txl_scores = (ac + bd).permute(2, 3, 0, 1)  # [bsz, n_head, qlen, klen]

ours = transformer_xl_scores(
    w_head_q.permute(1, 2, 0, 3),  # [b, h, q, d]
    w_head_k.permute(1, 2, 0, 3),  # [b, h, k, d]
    r_head_k.permute(1, 0, 2),  # [h, k, d]: shared by the batch
    r_w_bias[:, None, :],  # u: [h, 1, d]
    r_r_bias[:, None, :],  # v: [h, 1, d]
)
assert_close(ours[..., ~future], txl_scores[..., ~future])
n_inf = int(torch.isinf(ours[0, 0]).sum())
print(f"scores {tuple(ours.shape)}, -inf entries per head: {n_inf}", end="")

# %% [markdown] lang="en"
# ## How the libraries differ
#
# All three line up the scores per distance with a reshape instead of a gather, but
# not the same reshape, and not over the same distances. Transformer-XL and XLNet
# compute $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$; labml replaces the last term,
# as described below.
#
# **Transformer-XL** (`kimiyoung/transformer-xl`, PyTorch): sinusoidal $R$ over the $m + L$
# distances of `pos_seq`, pad on the left, reshape, drop the first row; the entries
# after each query are garbage, hidden by `dec_attn_mask`. An optional `zero_triu` zeroes
# them, which does not replace the mask: a score of zero still receives weight.
# `r_w_bias` and `r_r_bias` are shared by all layers in this code (the TensorFlow
# version unties them per layer with `untie_r`).
#
# **XLNet** (`relative_positional_encoding` and `rel_shift`) pads nothing. It encodes one
# extra distance in front, $m + L$: `tf.range(klen, -qlen, -1)` for bidirectional
# attention, `tf.range(klen, -1, -1)` for causal attention. Reshaping to
# $(r, L)$ and dropping the first row removes $L$ numbers, as the pad-and-drop did,
# and the columns beyond $m + L$ are cut off. The extra distance does the job of the pad.
# Bidirectional, it is exact everywhere; causal, it leaves garbage like Transformer-XL,
# but with $B_{i+1,0}$ where the zero was.
#
# **labml** (`RelativeMultiHeadAttention` in `transformers/xl/relative_mha.py`) learns
# the relative vectors instead of using sinusoids: a table `key_pos_embeddings` of
# $2P$ rows per head ($P = 2^{12}$), indexed by $P$ plus the key position minus the
# query position, and a learned scalar `key_pos_bias` per distance and head in place of
# term $(d)$; term $(b)$ has no $v$, and a learned `query_pos_bias` plays the part of $u$.
# It takes the $m + 2L$ rows from $P - (m + L)$ to $P + L$, pads on the *right*,
# drops the *last* row, and keeps the last $m + L$ columns. Its shift moves row $i$ to
# the right by $i$, and after the slice every entry is exact. Its docstring example
# shifts `[[1, 2, 3], [4, 5, 6], [7, 8, 9]]` to a matrix ending in `[6, 0, 7]`, as
# the code does (the example read `[9, 0, 7]` until commit f42c0e9, November 2023).
#
# The cell below ports XLNet's and labml's shifts and checks each against the direct
# computation.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# 3 つとも、距離ごとのスコアを gather ではなく形状変換でそろえますが、
# 形状変換の仕方も、使う距離の範囲も同じではありません。
# Transformer-XL と XLNet は $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$ を計算し、labml は後で述べるように最後の項を置き換えます。
#
# **Transformer-XL**（`kimiyoung/transformer-xl` の PyTorch 版）：`pos_seq` の $m + L$ 個の距離について正弦波の $R$ を作り、
# 左にパディングして形状変換し、最初の行を捨てます。各クエリより後ろの成分は無意味な値で、`dec_attn_mask` が隠します。
# オプションの `zero_triu` はこれらを 0 にしますが、マスクの代わりにはなりません。スコアが 0 でも重みは付くからです。
# このコードでは `r_w_bias` と `r_r_bias` をすべての層で共有します（TensorFlow 版では `untie_r` で層ごとに分けられます）。
#
# **XLNet**（`relative_positional_encoding` と `rel_shift`）は何もパディングしません。
# その代わり、距離の列の先頭に余分な距離 $m + L$ を 1 つ加えてエンコードします。
# 双方向のアテンションでは `tf.range(klen, -qlen, -1)`、因果的なアテンションでは `tf.range(klen, -1, -1)` です。
# $(r, L)$ に形状変換して最初の行を捨てると、パディングして捨てたときと同じく $L$ 個の数が除かれ、
# $m + L$ より先の列は切り落とされます。余分な距離がパディングの役目を果たすのです。
# 双方向ではどこでも正確です。因果的な場合は Transformer-XL と同じく無意味な値が残りますが、0 があった場所には $B_{i+1,0}$ が入ります。
#
# **labml**（`transformers/xl/relative_mha.py` の `RelativeMultiHeadAttention`）は、正弦波を使わずに相対ベクトルを学習します。
# ヘッドごとに $2P$ 行（$P = 2^{12}$）の表 `key_pos_embeddings` を持ち、キーの位置からクエリの位置を引き、$P$ を足した値をインデックスにして行を取り出します。
# また項 $(d)$ の代わりに、距離とヘッドごとの学習可能なスカラー `key_pos_bias` を使います。
# 項 $(b)$ には $v$ がなく、学習可能な `query_pos_bias` が $u$ の役目を果たします。
# $P - (m + L)$ から $P + L$ までの $m + 2L$ 行を取り出し、**右**にパディングして**最後**の行を捨て、
# 最後の $m + L$ 列を残します。このシフトは行 $i$ を右へ $i$ 列ぶんずらし、切り出した後はすべての成分が正確です。
# docstring の例では、`[[1, 2, 3], [4, 5, 6], [7, 8, 9]]` をシフトした結果の最後の行が `[6, 0, 7]` で、コードの結果と同じです。
# この例は、2023 年 11 月のコミット f42c0e9 までは `[9, 0, 7]` となっていました。
#
# 次のセルでは XLNet と labml のシフトを移植し、それぞれを直接計算と照合します。


# %%
def xlnet_rel_shift(
    x, klen
):  # XLNet's rel_shift, on [qlen, rlen] (its batch axes dropped)
    qlen, rlen = x.shape
    x = x.reshape(rlen, qlen)[1:]  # drop the first row: qlen numbers
    return x.reshape(qlen, rlen - 1)[:, :klen]


def labml_shift_right(x):  # labml's shift_right, on [qlen, rlen]
    zero_pad = x.new_zeros(x.shape[0], 1)
    x_padded = torch.cat([x, zero_pad], dim=1)
    x_padded = x_padded.view(x.shape[1] + 1, x.shape[0])
    return x_padded[:-1].view_as(x)


qv = q + v
for attn_type, end in (("bi", -q_len), ("uni", -1)):
    fwd_pos_seq = torch.arange(k_len, end, -1)  # tf.range(klen, end, -1)
    r = sinusoid_row(fwd_pos_seq.tolist()) @ w_kr.T
    bd = xlnet_rel_shift(qv @ r.T, k_len)
    expected = true_scores - (q + u) @ key.T  # the terms (b) and (d)
    if attn_type == "bi":
        assert_close(bd, expected)  # exact everywhere
    else:
        assert_close(bd[~future], expected[~future])
        pos_b = qv @ r.T
        assert all(
            bd[i, i + m_len + 1] == pos_b[i + 1, 0] for i in range(q_len - 1)
        )

big_p = 2**12  # labml's P
key_pos_emb = torch.randn(
    2 * big_p, d_head, dtype=f64
)  # learned: one row per key - query
key_pos_bias = torch.randn(2 * big_p, dtype=f64)
rows = slice(big_p - k_len, big_p + q_len)
b_d = q @ key_pos_emb[rows].T + key_pos_bias[rows]  # [qlen, klen + qlen]
labml_bd = labml_shift_right(b_d)[:, -k_len:]
looped = torch.tensor(
    [
        [
            q[i] @ key_pos_emb[big_p + j - (i + m_len)]
            + key_pos_bias[big_p + j - (i + m_len)]
            for j in range(k_len)
        ]
        for i in range(q_len)
    ],
    dtype=f64,
)
assert_close(labml_bd, looped)  # every entry
example = labml_shift_right(torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
assert example[-1].tolist() == [6, 0, 7]
print(example)

# %% [markdown] lang="en"
# ## What to remember
#
# - With a memory, absolute encodings added per segment give the same vector to
#   slot $j$ of the memory and of the current segment; Transformer-XL uses only
#   the distance $i - j$ instead.
# - Dai et al.'s score has four terms, paired as
#   $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$: a fixed sinusoid $R_{i-j}$ of the
#   distance, a learned projection $W_{k,R}$ and two global biases $u$, $v$.
# - The relative shift (a pad and two reshapes) lines up $B = (Q + v)\tilde R^\top$
#   with the keys exactly for $j \le i + m$; the entries after each query hold the
#   pad zero and then the next row, which the mask `triu(..., diagonal=1 + m)` hides.
# - The distances must be in descending order; in ascending order nothing fails and
#   most pairs get a wrong distance, a share that tends to 1 as $L$ grows.
# - XLNet encodes one extra distance instead of padding; labml learns its vectors
#   and pads on the right, with $m + 2L$ rows so that every entry is exact.

# %% [markdown] lang="ja"
# ## まとめ
#
# - メモリがあると、セグメントごとに足す絶対位置のエンコーディングは、メモリと現在のセグメントのそれぞれ $j$ 番目のトークンに、同じベクトルを与えます。
#   Transformer-XL は代わりに距離 $i - j$ だけを使います。
# - Dai らのスコアは 4 つの項からなり、$(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$ とまとめられます。
#   距離の固定の正弦波 $R_{i-j}$、学習可能な射影 $W_{k,R}$、全クエリ共通の 2 つのバイアス $u$、$v$ を使います。
# - 相対シフト（パディング 1 回と形状変換 2 回）は、$B = (Q + v)\tilde R^\top$ を $j \le i + m$ の範囲で正確にキーにそろえます。
#   各行でクエリ自身の位置より右の成分には、まずパディングの 0、その先に次の行の値が入ります。マスク `triu(..., diagonal=1 + m)` はこれらを隠します。
# - 距離は降順でなければなりません。昇順にしてもエラーにはなりませんが、大半の組が間違った距離を受け取ります。
#   間違った組の割合は $L$ が大きくなると 1 に近づきます。
# - XLNet はパディングの代わりに距離を 1 つ余分にエンコードします。
#   labml はベクトルを学習し、右にパディングして $m + 2L$ 行を使うので、すべての成分が正確です。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Term $(d)$, $v^\top W_{k,R} R_{i-j}$, depends on the pair only through $i - j$, like
#    a T5 or ALiBi bias. Plot it against $i - j$ for random $v$ and $W_{k,R}$, with
#    $d = 64$, and compare its shape with the bias of
#    [*ALiBi: attention with linear biases*](07-alibi.ipynb).
# 2. Transformer-XL's `attn_type=1` learns one vector per distance and head instead of
#    $W_{k,R} R_{i-j}$, plus a scalar per distance and head for term $(d)$. Show that
#    term $(b)$ is then Shaw et al.'s key term of
#    [*Relative position representations*](04-shaw-relative.ipynb) without clipping,
#    and compute it with the distance form of that chapter.
# 3. labml pads on the right and drops the last row. Derive its element formula the way
#    this chapter derived Transformer-XL's, and explain why it needs $m + 2L$ distances
#    where Transformer-XL needs $m + L$.
# 4. With `clamp_len`, all distances beyond it share one encoding. For $m = 100$ and
#    `clamp_len=20`, which pairs of keys can a query no longer tell apart by terms $(b)$
#    and $(d)$? Compare with the clipping of
#    [*Relative position representations*](04-shaw-relative.ipynb).

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 項 $(d)$ の $v^\top W_{k,R} R_{i-j}$ は、T5 や ALiBi のバイアスと同じく、組に $i - j$ を通してだけ依存します。
#    $d = 64$ として、ランダムな $v$ と $W_{k,R}$ についてこれを $i - j$ に対して描き、
#    [「ALiBi：線形バイアスによるアテンション」](07-alibi.ipynb)の章のバイアスと形を比べてください。
# 2. Transformer-XL の `attn_type=1` は、$W_{k,R} R_{i-j}$ の代わりに距離とヘッドごとのベクトルを学習し、
#    項 $(d)$ には距離とヘッドごとのスカラーを使います。
#    このとき項 $(b)$ が、[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章で見た
#    Shaw らのキーの項からクリッピングを除いたものであることを示し、
#    その章の距離ごとの形で計算してください。
# 3. labml は右にパディングし、最後の行を捨てます。
#    この章で Transformer-XL について導いたのと同じ方法で成分の式を導き、
#    Transformer-XL が $m + L$ 個の距離で済むのに labml は $m + 2L$ 個を必要とする理由を説明してください。
# 4. `clamp_len` を使うと、それより遠い距離はすべて 1 つのエンコーディングを共有します。
#    $m = 100$、`clamp_len=20` のとき、クエリが項 $(b)$ と $(d)$ で区別できなくなるのはどのキーの組でしょうか。
#    [「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章のクリッピングと比べてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Write $f(\delta) = v^\top W_{k,R} R_\delta = w^\top R_\delta$ with
# $w = W_{k,R}^\top v$. By Cauchy–Schwarz and $\lVert R_\delta \rVert = \sqrt{d/2}$
# (the norm of every sinusoidal code), $|f(\delta)| \le \lVert w \rVert \sqrt{d/2}$
# at every distance: the bias stays bounded and, with random $v$ and $W_{k,R}$,
# goes up and down with $\delta$ as a sum of cosines and sines of the angles
# $\omega_i \delta$. ALiBi's bias $-m_h\,\delta$ is the opposite: monotone and
# unbounded, a penalty that grows with the distance. The cell checks the bound
# for $\delta = 0, \dots, 1023$ and counts how often $f$ changes direction; the
# ALiBi line never does. (A learned $v$ and $W_{k,R}$ could make $f$ decrease over
# a range of distances, but never beyond the bound.)

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $w = W_{k,R}^\top v$ とすると $f(\delta) = v^\top W_{k,R} R_\delta = w^\top R_\delta$ です。
# コーシー・シュワルツの不等式と、どの正弦波の符号でも成り立つ $\lVert R_\delta \rVert = \sqrt{d/2}$ から、
# すべての距離で $|f(\delta)| \le \lVert w \rVert \sqrt{d/2}$ となります。
# バイアスは有界で、ランダムな $v$ と $W_{k,R}$ では、角度 $\omega_i \delta$ の余弦と正弦の和として $\delta$ とともに上下します。
# ALiBi のバイアス $-m_h\,\delta$ はその逆で、単調で有界でなく、距離とともに大きくなるペナルティです。
# 次のセルでは、$\delta = 0, \dots, 1023$ でこの上界を確かめ、$f$ の増減が何回入れ替わるかを数えます。ALiBi の直線では一度も入れ替わりません。
# 学習した $v$ と $W_{k,R}$ なら、ある範囲の距離で $f$ が減少することはありえますが、上界を超えることはありません。

# %% tags=["solution"]
d = 64
gen = torch.Generator().manual_seed(21)
v1 = torch.randn(d, dtype=f64, generator=gen)
w_kr1 = torch.randn(d, d, dtype=f64, generator=gen) / math.sqrt(d)
delta = torch.arange(1024)
r_delta = sinusoidal(delta, d, layout="concat", dtype=f64)
f = r_delta @ (w_kr1.T @ v1)  # f(delta) = v^T W_{k,R} R_delta
bound = (w_kr1.T @ v1).norm() * math.sqrt(d / 2)
assert (f.abs() <= bound).all()
turns = int((torch.diff(torch.sign(torch.diff(f))) != 0).sum())
alibi = -0.5 * delta.double()  # slope 1/2, ALiBi's first head of 8
assert (torch.diff(alibi) < 0).all() and turns > 10
print(f"|f| <= {bound:.2f}, max |f| = {f.abs().max():.2f}, turns: {turns}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** With `attn_type=1` the vector $W_{k,R} R_{i-j}$ becomes a learned
# $e_\delta$ per distance $\delta = i - j$ (and head), so term $(b)$ is
# $q_i^\top e_{i-j}$: a learned vector per relative position dotted with the query,
# which is Shaw et al.'s $x_i W^Q (a^K_{ij})^\top$ with
# $a^K_{ij} = e_{i-j} = w^K_{j-i}$, unclipped as long as the table has a row for
# every distance. The official code does clip. With `attn_type=1`,
# `RelLearnableMultiHeadAttn.forward` pads the table in front with its farthest row,
# `r_emb[0]`, when there are more keys than rows, and `clamp_len` keeps only the
# last `clamp_len` rows, the distances $0$ to `clamp_len` $- 1$
# (`MemTransformerLM._forward`): distances share a vector from `clamp_len` $- 1$ on,
# not from `clamp_len` as with `attn_type=0`. The cell checks term $(b)$ against the
# loops in two ways, both on the past keys $j \le i + m$: Shaw et al.'s
# materialised form, with `posenc`'s `RelativePositionEmbedding` for
# $k = m + L - 1$ and row $r$ holding $e_{k-r}$, and the relative shift of
# $B = Q \tilde E^\top$ (rows in the descending order of `pos_seq`). Then it
# compares a port of the official clipping with `posenc`'s `clamp_len`.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** `attn_type=1` では、ベクトル $W_{k,R} R_{i-j}$ が、距離 $\delta = i - j$（とヘッド）ごとの学習可能な $e_\delta$ になります。
# 項 $(b)$ は $q_i^\top e_{i-j}$、つまり相対位置ごとの学習可能なベクトルとクエリの内積です。
# これは $a^K_{ij} = e_{i-j} = w^K_{j-i}$ とした Shaw らの $x_i W^Q (a^K_{ij})^\top$ で、
# 表にすべての距離の行がある限りクリップはありません。
# ただし公式のコードはクリップします。`attn_type=1` の `RelLearnableMultiHeadAttn.forward` は、
# キーが表の行より多いと、表の先頭に最も遠い距離の行 `r_emb[0]` をパディングします。
# また `clamp_len` を指定すると、最後の `clamp_len` 行、つまり距離 $0$ から `clamp_len` $- 1$ だけを残します（`MemTransformerLM._forward`）。
# そのため、`attn_type=0` では距離 `clamp_len` からベクトルを共有するのに対し、ここでは `clamp_len` $- 1$ から共有します。
# 次のセルでは、過去のキー $j \le i + m$ について、項 $(b)$ をループによる計算と 2 通りに照合します。
# 1 つは Shaw らの実体化した形で、`posenc` の `RelativePositionEmbedding` を $k = m + L - 1$ とし、行 $r$ に $e_{k-r}$ を入れて使います。
# もう 1 つは、`pos_seq` の降順に行を並べた $B = Q \tilde E^\top$ の相対シフトです。
# 最後に、公式のクリッピングを移植したものを `posenc` の `clamp_len` と比べます。

# %% tags=["solution"]
q_len, m_len, d_head = 5, 3, 8
k_len = q_len + m_len
gen = torch.Generator().manual_seed(22)
q2 = torch.randn(q_len, d_head, dtype=f64, generator=gen)
e = torch.randn(k_len, d_head, dtype=f64, generator=gen)  # row delta: e_delta
loops = torch.tensor(
    [[q2[i] @ e[i + m_len - j] if j <= i + m_len else 0.0 for j in range(k_len)]
     for i in range(q_len)],
    dtype=f64,
)  # fmt: skip
i_idx, j_idx = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
past = j_idx <= i_idx + m_len
shaw = RelativePositionEmbedding(k_len - 1, d_head).double()  # offsets j - i
with torch.no_grad():
    shaw.embedding.weight.zero_()  # rows k + 1, ...: future offsets, unused
    shaw.embedding.weight[:k_len] = e.flip(0)  # row r: offset r - k, e_{k-r}
    a_k = shaw(q_len, k_len)  # [q_len, k_len, d_head], queries at the end
by_shaw = torch.einsum("id,ijd->ij", q2, a_k)  # x_i W^Q (a^K_ij)^T
shifted = relative_shift(q2 @ e[transformer_xl_positions(q_len, k_len)].T)
assert_close(by_shaw[past], loops[past])
assert_close(shifted[past], loops[past])


def official_r_emb(r_emb, klen, clamp_len):
    """attn_type=1's rows for klen keys (rows: descending distances)."""
    r_emb = r_emb[-clamp_len:]  # MemTransformerLM._forward
    if klen > r_emb.size(0):  # RelLearnableMultiHeadAttn.forward
        r_emb_pad = r_emb[0:1].expand(klen - r_emb.size(0), -1)
        return torch.cat([r_emb_pad, r_emb], 0)
    return r_emb[-klen:]


clamp = 5
got = official_r_emb(e.flip(0), k_len, clamp)
shared_from = transformer_xl_positions(q_len, k_len, clamp_len=clamp - 1)
assert torch.equal(got, e[shared_from])  # shares from clamp_len - 1 on
attn0 = transformer_xl_positions(q_len, k_len, clamp_len=clamp)
assert not torch.equal(got, e[attn0])  # not attn_type=0's clamp

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** labml pads one zero column on the right of the $L \times r$ matrix
# $x$ and reads the padded rows, $r + 1$ numbers each, as $(r + 1) \times L$, drops
# the last row and reads the rest as $L \times r$. Dropping the last row does not
# move anything before it, so entry $(i, j)$ of the result is number $i r + j$ of
# the padded rows laid end to end, and $i r + j = i(r + 1) + (j - i)$: for
# $j \ge i$ it is $x_{i,\,j - i}$, row $i$ moved right by $i$. labml then keeps the
# last $m + L$ columns, $j \ge r - (m + L)$; all of them are exact when
# $r - (m + L) \ge L - 1$, that is $r \ge m + 2L - 1$, and labml takes $r = m + 2L$.
# Kept column $j'$ of row $i$ is $x_{i,\,j' + r - (m + L) - i}$, the table row
# $P - (m + L) + j' + L - i = P + j' - (i + m)$: key position minus query position,
# as found above. Transformer-XL gets away with $m + L$ because it needs only
# $j \le i + m$ exact and masks the rest; labml wants every entry exact, so each
# row needs $L - 1$ extra columns for the shift.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** labml は、$L \times r$ 行列 $x$ の右に 0 の列を 1 つパディングします。
# パディング後の行はそれぞれ $r + 1$ 個の数を持ち、これを $(r + 1) \times L$ として読みます。
# 最後の行を捨て、残りを $L \times r$ として読みます。
# 最後の行を捨てても、それより前の数は動きません。
# したがって結果の成分 $(i, j)$ は、パディングした行を端から端までつなげたときの $i r + j$ 番目の数で、
# $i r + j = i(r + 1) + (j - i)$ です。$j \ge i$ ならそれは $x_{i,\,j - i}$、つまり行 $i$ を右へ $i$ 列ずらしたものです。
# labml はそのあと最後の $m + L$ 列（$j \ge r - (m + L)$）を残します。
# $r - (m + L) \ge L - 1$、すなわち $r \ge m + 2L - 1$ なら、残す列はすべて正確で、labml は $r = m + 2L$ を使います。
# 行 $i$ の残した列 $j'$ は $x_{i,\,j' + r - (m + L) - i}$ で、表の行 $P - (m + L) + j' + L - i = P + j' - (i + m)$ です。
# 上で見たとおり、キーの位置からクエリの位置を引いたものです。
# Transformer-XL で $m + L$ 個で済むのは、$j \le i + m$ だけを正確にすればよく、残りはマスクするからです。
# labml はすべての成分を正確にしたいので、各行をずらすために $L - 1$ 列の余分が必要になります。

# %% tags=["solution"]
for q_len, r_len in [(4, 9), (5, 14)]:
    x3 = torch.randn(q_len, r_len, dtype=f64)
    out = labml_shift_right(x3)
    for i in range(q_len):
        for j in range(i, r_len):  # j >= i: row i moved right by i
            assert out[i, j] == x3[i, j - i]
m_len, q_len = 3, 5
r_len = m_len + 2 * q_len  # labml's rows: every kept entry exact
k_len = m_len + q_len
x3 = torch.randn(q_len, r_len, dtype=f64)
kept = labml_shift_right(x3)[:, -k_len:]
rows = (
    torch.arange(k_len)[None, :]
    + (r_len - k_len)
    - torch.arange(q_len)[:, None]
)
assert (rows >= 0).all()  # never a wrapped entry
assert torch.equal(kept, x3.gather(1, rows))

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With `clamp_len=20` every distance of 20 or more uses $R_{20}$,
# so terms $(b)$ and $(d)$ are the same for all keys at distance $\ge 20$. The query
# at position $i + m$ (slot $i$ of the segment) has the keys $j \le i + m - 20$ in
# that group, $i + m - 19$ of them: 81 for the first query of a segment after a
# memory of $m = 100$. Among them only the content terms $(a)$ and $(c)$ differ: they
# form one bag, as the keys beyond $k$ do in Shaw et al.'s clipping, except that
# Transformer-XL clips the past side only (a causal model has no future keys) and
# the encoding is a fixed sinusoid rather than a learned vector.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** `clamp_len=20` では 20 以上の距離はすべて $R_{20}$ を使うので、
# 距離が $\ge 20$ のキーについて、項 $(b)$ と $(d)$ はどれも同じです。
# 位置 $i + m$（セグメントの $i$ 番目）のクエリでは、$j \le i + m - 20$ のキー $i + m - 19$ 個がこのグループに入ります。
# $m = 100$ のメモリの後のセグメントの最初のクエリなら 81 個です。
# この中でキーごとに違いが出るのは内容の項 $(a)$ と $(c)$ だけです。
# そのため、これらのキーは順序のない 1 つの集まりになります。
# Shaw らのクリッピングで $k$ より先のキーがそうなるのと同じです。
# 違いは、Transformer-XL がクリップするのは過去の側だけ（因果的なモデルに未来のキーはありません）で、
# エンコーディングが学習可能なベクトルではなく固定の正弦波であることです。

# %% tags=["solution"]
q_len, m_len, clamp = 4, 100, 20
k_len = q_len + m_len
gen = torch.Generator().manual_seed(24)
q4 = torch.randn(q_len, d_head, dtype=f64, generator=gen)
v4 = torch.randn(d_head, dtype=f64, generator=gen)
w_kr4 = torch.randn(d_head, d_model, dtype=f64, generator=gen)
dist = transformer_xl_positions(q_len, k_len, clamp_len=clamp)
r4 = sinusoidal(dist, d_model, layout="concat", dtype=f64) @ w_kr4.T
bd = relative_shift((q4 + v4) @ r4.T)  # terms (b) + (d), [q_len, k_len]
for i in range(q_len):
    far = torch.arange(k_len) <= i + m_len - clamp  # distance >= 20
    assert int(far.sum()) == i + m_len - 19
    assert_close(bd[i, far], bd[i, far][0].expand(int(far.sum())))
    near = bd[i, ~far][: -(q_len - 1 - i) or None]  # up to j = i + m
    assert len(torch.unique(near.round(decimals=9))) == len(near)
print(f"query 0: {int((torch.arange(k_len) <= m_len - clamp).sum())} keys")

# %% [markdown] lang="en"
# ## References
#
# - Dai, Z. et al. (2019). *Transformer-XL: Attentive Language Models Beyond a
#   Fixed-Length Context*. ACL 2019, §3.3. <https://arxiv.org/abs/1901.02860>
# - kimiyoung/transformer-xl, `pytorch/mem_transformer.py` (`PositionalEmbedding`,
#   `RelPartialLearnableMultiHeadAttn`, `_rel_shift`).
#   <https://github.com/kimiyoung/transformer-xl>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019, §3.4 ("skewing").
#   <https://arxiv.org/abs/1809.04281>
# - Yang, Z. et al. (2019). *XLNet: Generalized Autoregressive Pretraining for Language
#   Understanding*. NeurIPS 2019. <https://arxiv.org/abs/1906.08237>, code
#   <https://github.com/zihangdai/xlnet> (`modeling.py`).
# - labml.ai, *Relative multi-headed attention (Transformer-XL)*.
#   <https://nn.labml.ai/transformers/xl/relative_mha.html>, code
#   <https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/labml_nn/transformers/xl/relative_mha.py>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Dai, Z. et al. (2019). *Transformer-XL: Attentive Language Models Beyond a
#   Fixed-Length Context*. ACL 2019. <https://arxiv.org/abs/1901.02860>（§3.3。）
# - kimiyoung/transformer-xl, `pytorch/mem_transformer.py`.
#   <https://github.com/kimiyoung/transformer-xl>
#   （`PositionalEmbedding`、`RelPartialLearnableMultiHeadAttn`、`_rel_shift`。）
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019.
#   <https://arxiv.org/abs/1809.04281>（§3.4、スキューイング。）
# - Yang, Z. et al. (2019). *XLNet: Generalized Autoregressive Pretraining for Language
#   Understanding*. NeurIPS 2019. <https://arxiv.org/abs/1906.08237>
#   （コードは <https://github.com/zihangdai/xlnet> の `modeling.py`。）
# - labml.ai, *Relative multi-headed attention (Transformer-XL)*.
#   <https://nn.labml.ai/transformers/xl/relative_mha.html>
#   （コードは <https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/labml_nn/transformers/xl/relative_mha.py>。）
