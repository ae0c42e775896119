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
# Transformer-XL reads a long text in segments and lets each one attend to a cached
# *memory* of earlier ones, where absolute positions would collide.
# Dai et al. (2019) rebuild the attention score from four terms in which position
# enters only as the distance $i - j$, through a fixed sinusoid $R_{i-j}$ and its
# learned projection $W_{k,R}$; two learned vectors $u$ and $v$ take the place of
# the query's position.
# A pad and two reshapes, the *relative shift*, line the scores per distance up with
# the keys: exact for every key a query may see, with garbage beyond it that the mask
# must hide, and wrong for most pairs if the distances are listed in the other order.

# %% [markdown] lang="ja"
# # Transformer-XL の相対アテンション
#
# Transformer-XL は長い文章をセグメントに分けて読み、各セグメントが、それ以前のセグメントの隠れ状態をキャッシュしたもの（メモリ）にもアテンションできるようにします。
# このとき絶対位置を使うと、メモリと現在のセグメントで位置の番号が重なってしまいます。
# Dai ら（2019）は、アテンションスコアを 4 つの項から組み立て直し、位置が距離 $i - j$ としてだけ入るようにしました。
# 位置を運ぶのは固定の正弦波 $R_{i-j}$ とその学習可能な射影 $W_{k,R}$ で、学習可能な 2 つのベクトル $u$、$v$ がクエリの位置の代わりになります。
# 距離ごとのスコアをキーにそろえるのは、パディング 1 回と形状変換 2 回からなる**相対シフト**です。
# クエリが見てよいキーについては正確ですが、その先には無意味な値が残るのでマスクで隠す必要があります。また、距離を逆の順（昇順）に並べると、大半の組に誤った距離が割り当てられます。

# %% tags=["setup"]
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
from posenc_lab.plotting import INK, OKABE_ITO, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64

# %% [markdown] lang="en"
# ## Why absolute positions fail with a memory
#
# Transformer-XL splits the text into [segments](../docs/glossary.md#segment) of $L$
# tokens. When it processes segment $\tau + 1$, every layer also attends to the hidden
# states that the layer below produced for segment $\tau$, kept from the previous step
# without gradients: the keys are the $m$ tokens of the
# [memory](../docs/glossary.md#memory) followed by the $L$ tokens of the current
# segment ($m$ may exceed $L$: the published evaluation keeps $m = 640$ hidden
# states of the base model, ten segments of 64). With absolute encodings added per
# segment, both would use the positions
# $0, \dots, L-1$: the token at slot $j$ of the memory and the one at slot $j$ of the
# current segment carry the same vector $U_j$, and nothing tells the model that one is
# $L$ positions older than the other.
#
# Numbering the positions across segments avoids the collision, but then the numbers
# grow without bound. In the official code each column of a batch is one ordered
# stream through the corpus, about 1.7M tokens of WikiText-103 at batch size 60, so
# the positions would run past a million, and the same text would be encoded
# differently depending on where it falls in its stream. What the model needs is the
# distance between a query and a key, which is the same in every segment.
#
# A note on letters: this chapter keeps Dai et al.'s. The query is at position $i$,
# the key at $j$, and $i - j \ge 0$ is the causal distance of a key at or before its
# query, as on the [notation page](../docs/notation.md#positions); the previous
# chapter, [*Relative position representations*](04-shaw-relative.ipynb), writes the
# offset $j - i$. $L$ is the segment length, $m$ the memory length, and $R_{i-j}$ a
# sinusoidal vector, not a rotation.

# %% [markdown] lang="ja"
# ## メモリがあると絶対位置が破綻する理由
#
# Transformer-XL は文章を $L$ トークンの[セグメント](../docs/glossary.ja.md#segment)に分けます。
# セグメント $\tau + 1$ を処理するとき、各層は、1 つ下の層がセグメント $\tau$ について作った隠れ状態にもアテンションします。この隠れ状態は、前のステップから勾配を流さずに保持しておいたものです。
# つまりキーは、[メモリ](../docs/glossary.ja.md#memory)の $m$ 個のトークンと、それに続く現在のセグメントの $L$ 個のトークンです。
# $m$ は $L$ より大きくてもよく、公開された評価では base モデルが $m = 640$ 個（長さ 64 のセグメント 10 個分）の隠れ状態を保持します。
# 絶対位置のエンコーディングをセグメントごとに足すと、どちらのセグメントも位置 $0, \dots, L-1$ を使います。
# メモリの $j$ 番目のトークンと現在のセグメントの $j$ 番目のトークンが同じベクトル $U_j$ を持つので、一方が他方より $L$ だけ前にあることを知る手がかりが、モデルにはありません。
#
# セグメントをまたいで位置を通し番号にすれば衝突は避けられますが、番号はどこまでも大きくなります。
# 公式実装では、バッチの各列はコーパスを順に読み進めるストリームです。バッチサイズ 60 なら 1 本あたり WikiText-103 のおよそ 170 万トークンを受け持ちます。
# そのため位置は 100 万を超え、同じ文章でもストリームのどこに来るかによって違うエンコーディングを受け取ります。
# モデルに必要なのはクエリとキーの距離で、これはどのセグメントでも同じです。
#
# 記号は Dai らに合わせます。クエリの位置は $i$、キーの位置は $j$ で、クエリと同じ位置かそれより前のキーの因果的な距離は $i - j \ge 0$ です。これは[記法のページ](../docs/notation.ja.md#positions)と同じ向きです。前の[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章では、相対位置 $j - i$ で書いていました。
# $L$ はセグメントの長さ、$m$ はメモリの長さで、$R_{i-j}$ は回転ではなく正弦波のベクトルです。

# %% [markdown] lang="en"
# ## From absolute to relative: four terms
#
# Write $E_{x_i}$ for the embedding of the token at position $i$ and $U_i$ for its
# absolute encoding, both as column vectors. With the query and key projections $W_q$
# and $W_k$, the score of the ordinary Transformer (before the scaling),
# $A^{\mathrm{abs}}_{i,j} = (E_{x_i} + U_i)^\top W_q^\top W_k (E_{x_j} + U_j)$, expands into
# four terms:
# $$A^{\mathrm{abs}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_k E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_k U_j}_{(b)} + \underbrace{U_i^\top W_q^\top W_k E_{x_j}}_{(c)} + \underbrace{U_i^\top W_q^\top W_k U_j}_{(d)}$$
# Term $(a)$ compares contents, $(b)$ the query's content with the key's position,
# $(c)$ the query's position with the key's content, and $(d)$ the two positions. Dai
# et al. (§3.3) change three things:
#
# 1. Every $U_j$ of the key, in $(b)$ and $(d)$, becomes $R_{i-j}$: a sinusoidal
#    encoding of the distance, with no learned parameters.
# 2. The query's position should not matter, so $U_i^\top W_q^\top$ becomes a learned
#    vector, the same for every query: $u$ in $(c)$ and $v$ in $(d)$.
# 3. The key projection splits into $W_{k,E}$ for contents and $W_{k,R}$ for
#    distances.
#
# $$A^{\mathrm{rel}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_{k,E} E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_{k,R} R_{i-j}}_{(b)} + \underbrace{u^\top W_{k,E} E_{x_j}}_{(c)} + \underbrace{v^\top W_{k,R} R_{i-j}}_{(d)}$$
# Now $(a)$ is content against content, $(b)$ content against distance, $(c)$ a
# [global bias](../docs/glossary.md#global-bias) on the key's content and $(d)$ a
# global bias on the distance. With the projected vectors $q_i = W_q E_{x_i}$,
# $k_j = W_{k,E} E_{x_j}$ and $r_{i-j} = W_{k,R} R_{i-j}$, the terms pair up as two dot
# products,
# $$A^{\mathrm{rel}}_{i,j} = (q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$$
# which is how the code computes them: `AC` from the queries plus `r_w_bias` ($u$)
# against the keys, `BD` from the queries plus `r_r_bias` ($v$) against the projected
# encodings. The score of
# [*Relative position representations*](04-shaw-relative.ipynb) is terms $(a)$ and
# $(b)$ alone, with a learned vector per clipped offset in place of
# $W_{k,R} R_{i-j}$ (Dai et al., §3.3). One head, with random weights, and the four
# terms of one pair as written:

# %% [markdown] lang="ja"
# ## 絶対位置から相対位置へ：4 つの項
#
# 位置 $i$ のトークンの埋め込みを $E_{x_i}$、その絶対位置のエンコーディングを $U_i$ と書きます。どちらも列ベクトルです。
# クエリとキーの射影を $W_q$、$W_k$ とすると、通常の Transformer のスコア（スケーリングの前）$A^{\mathrm{abs}}_{i,j} = (E_{x_i} + U_i)^\top W_q^\top W_k (E_{x_j} + U_j)$ は 4 つの項に展開できます。
# $$A^{\mathrm{abs}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_k E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_k U_j}_{(b)} + \underbrace{U_i^\top W_q^\top W_k E_{x_j}}_{(c)} + \underbrace{U_i^\top W_q^\top W_k U_j}_{(d)}$$
# 項 $(a)$ は内容どうし、$(b)$ はクエリの内容とキーの位置、$(c)$ はクエリの位置とキーの内容、$(d)$ は位置どうしを比べます。
# Dai ら（§3.3）は 3 つの点を変えます。
#
# 1. $(b)$ と $(d)$ にあるキーの $U_j$ をすべて $R_{i-j}$ に置き換えます。
#    距離の正弦波エンコーディングで、学習可能なパラメータを持ちません。
# 2. スコアはクエリの位置に左右されるべきではないので、$U_i^\top W_q^\top$ を、どのクエリでも同じ学習可能なベクトルに置き換えます。
#    $(c)$ では $u$、$(d)$ では $v$ です。
# 3. キーの射影を、内容用の $W_{k,E}$ と距離用の $W_{k,R}$ に分けます。
#
# $$A^{\mathrm{rel}}_{i,j} = \underbrace{E_{x_i}^\top W_q^\top W_{k,E} E_{x_j}}_{(a)} + \underbrace{E_{x_i}^\top W_q^\top W_{k,R} R_{i-j}}_{(b)} + \underbrace{u^\top W_{k,E} E_{x_j}}_{(c)} + \underbrace{v^\top W_{k,R} R_{i-j}}_{(d)}$$
# これで $(a)$ は内容と内容、$(b)$ は内容と距離の比較になり、$(c)$ はキーの内容に対する[全クエリ共通のバイアス](../docs/glossary.ja.md#global-bias)、
# $(d)$ は距離に対する全クエリ共通のバイアスになります。
# 射影したベクトル $q_i = W_q E_{x_i}$、$k_j = W_{k,E} E_{x_j}$、$r_{i-j} = W_{k,R} R_{i-j}$ を使うと、4 つの項は 2 つの内積にまとまります。
# $$A^{\mathrm{rel}}_{i,j} = (q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$$
# コードもこの形で計算します。クエリに `r_w_bias`（$u$）を足してキーとの内積を取ったものが `AC`、
# クエリに `r_r_bias`（$v$）を足して射影したエンコーディングとの内積を取ったものが `BD` です。
# [「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章のスコアは項 $(a)$ と $(b)$ だけからなり、$W_{k,R} R_{i-j}$ の代わりに、クリップした相対位置ごとの学習可能なベクトルを使います（Dai ら、§3.3）。
# ランダムな重みを持つヘッド 1 つを用意し、1 つの組について 4 つの項を式のとおりに計算します。

# %%
d_model, d_head = 16, 8
w_q, w_k, w_ke, w_kr = (
    torch.randn(d_head, d_model, dtype=f64) / math.sqrt(d_model)
    for _ in range(4)
)
u, v = torch.randn(d_head, dtype=f64), torch.randn(d_head, dtype=f64)


def sinusoid_row(delta):  # R_delta: the sinusoid of a distance (concat layout)
    return sinusoidal(
        torch.as_tensor(delta), d_model, layout="concat", dtype=f64
    )


def a_rel(emb, i, j):  # the four terms of Dai et al., query i and key j
    e_i, e_j, r_ij = emb[i], emb[j], sinusoid_row(i - j)
    return (
        e_i @ w_q.T @ w_ke @ e_j  # (a) content-content
        + e_i @ w_q.T @ w_kr @ r_ij  # (b) content-position
        + u @ w_ke @ e_j  # (c) global content bias
        + v @ w_kr @ r_ij  # (d) global position bias
    )


# %% [markdown] lang="en"
# Positions now appear only as $i - j$. So the same four tokens give the same scores
# among themselves whether they sit at positions $0, \dots, 3$ or, behind a memory
# of five other tokens, at $5, \dots, 8$; with absolute encodings added to the tokens
# they do not. `transformer_xl_scores` of `posenc` computes $A^{\mathrm{rel}}$ the way
# Transformer-XL does, through the shift of the next sections.

# %% [markdown] lang="ja"
# これで位置は $i - j$ としてしか現れません。
# そのため、同じ 4 つのトークンどうしのスコアは、位置 $0, \dots, 3$ に置いても、5 トークンのメモリの後ろの位置 $5, \dots, 8$ に置いても変わりません。
# トークンに絶対位置のエンコーディングを足すと、そうはなりません。
# `posenc` の `transformer_xl_scores` は、後の節で扱うシフトを使って、Transformer-XL と同じ方法で $A^{\mathrm{rel}}$ を計算します。


# %%
def scores(tokens, n_queries):  # A_rel for the last n_queries tokens
    distances = transformer_xl_positions(n_queries, len(tokens))
    r = sinusoid_row(distances) @ w_kr.T  # rows r_{i-j}, one per distance
    q = tokens[-n_queries:] @ w_q.T
    return transformer_xl_scores(q, tokens @ w_ke.T, r, u, v)


def scores_abs(tokens, positions):  # the ordinary score, with U_p added
    x = tokens + sinusoidal(positions, d_model, dtype=f64)
    return (x @ w_q.T) @ (x @ w_k.T).T


four, memory = (torch.randn(t, d_model, dtype=f64) for t in (4, 5))
alone = scores(four, 4)  # positions 0..3
behind = scores(torch.cat([memory, four]), 4)[:, 5:]  # positions 5..8
moved = scores_abs(four, torch.arange(4)) - scores_abs(four, torch.arange(5, 9))
same = torch.allclose(alone, behind, rtol=0, atol=1e-12)
print(f"relative: {'the same' if same else 'different'} scores behind a memory")
print(f"absolute: scores move by up to {moved.abs().max():.2f}", end="")

# %% tags=["check"] summary={"en": "the scores are the four terms and the same at positions 0–3 and 5–8; the absolute ones differ", "ja": "スコアは 4 つの項の和に一致し、位置 0〜3 でも 5〜8 でも同じです。絶対位置のエンコーディングでは異なります"}
assert_close(alone, behind)
causal = torch.ones(4, 4, dtype=torch.bool).tril()
by_terms = torch.tensor(
    [[a_rel(four, i, j) for j in range(4)] for i in range(4)]
)
assert_close(alone[causal], by_terms.to(f64)[causal])
assert torch.isinf(alone[~causal]).all()  # the future keys: -inf
assert moved.abs().max() > 0.1

# %% [markdown] lang="en"
# ## The relative encoding R
#
# $R$ is the sinusoidal table of the chapter
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb), evaluated at distances
# instead of positions, with the frequencies $\omega_i = 10000^{-2i/d}$ and all sines
# before all cosines: in `posenc`, `sinusoidal(distances, d, layout="concat")`. Which
# distances? The queries of a segment are the last $L$ of the $m + L$ keys, so query
# $i$ sits at position $i + m$, and the distances to its keys run from $i + m$ (the
# oldest memory token) down to $0$ (itself). Over all queries that is
# $m + L - 1, \dots, 1, 0$: one encoding per key slot, in *descending* order, the
# code's `pos_seq = torch.arange(klen - 1, -1, -1.0)`.
#
# Since $R$ has no parameters, every distance has an encoding, including distances
# longer than in training. That is why Dai et al. chose a fixed sinusoid: a model
# trained with a memory of one length should generalise to a memory several times
# longer at evaluation (§3.3). The code can also clamp: `clamp_len` gives every
# distance from `clamp_len` on the encoding of `clamp_len`.

# %% [markdown] lang="ja"
# ## 相対エンコーディング R
#
# $R$ は[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の正弦波の表を、位置ではなく距離で評価したものです。
# 周波数は $\omega_i = 10000^{-2i/d}$ で、すべての正弦のあとにすべての余弦を並べます。
# `posenc` では `sinusoidal(distances, d, layout="concat")` です。
# では、どの距離が必要でしょうか。セグメントのクエリは $m + L$ 個のキーのうち最後の $L$ 個なので、クエリ $i$ は位置 $i + m$ にあります。
# そのキーまでの距離は、$i + m$（いちばん古いメモリのトークン）から $0$（自分自身）までです。
# すべてのクエリを合わせると $m + L - 1, \dots, 1, 0$ で、キー 1 つにつき 1 つのエンコーディングになります。
# 並びは**降順**で、コードでは `pos_seq = torch.arange(klen - 1, -1, -1.0)` です。
#
# $R$ にはパラメータがないので、学習時より長い距離も含め、どんな距離にもエンコーディングがあります。
# Dai らが固定の正弦波を選んだのもこのためで、ある長さのメモリで学習したモデルを、評価時にはその数倍の長さのメモリでも使えるようにするのが狙いでした（§3.3）。
# コードでは距離を打ち切ることもでき、`clamp_len` 以上の距離にはどれも距離 `clamp_len` のエンコーディングが使われます。

# %%
q_len, k_len = 4, 7  # a memory of 3
print(f"pos_seq: {transformer_xl_positions(q_len, k_len).tolist()}")
clamped = transformer_xl_positions(q_len, k_len, clamp_len=4)
print(f"with clamp_len = 4: {clamped.tolist()}", end="")


# %% tags=["check"] summary={"en": "R matches the official PositionalEmbedding; pos_seq is as stated, also in the published evaluation (the note below)", "ja": "R は公式の PositionalEmbedding と一致します。pos_seq は本文どおりの降順で、公開された評価の設定でも同じです（下の補足）"}
def txl_positional_embedding(pos_seq, demb):
    """PositionalEmbedding.forward, without the batch axis (a port)."""
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=f64) / demb))
    sinusoid_inp = torch.outer(pos_seq, inv_freq)
    return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


# printed by the official PositionalEmbedding(8) (pytorch/mem_transformer.py)
# for pos_seq = arange(5, -1, -1): its rows for 5, 2 and 0
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

pos_seq = torch.arange(k_len - 1, -1, -1.0, dtype=f64)  # MemTransformerLM
distances = transformer_xl_positions(q_len, k_len)
assert torch.equal(distances, pos_seq.long())
assert_close(sinusoid_row(distances), txl_positional_embedding(pos_seq, 16))
assert clamped.tolist() == [4, 4, 4, 3, 2, 1, 0]
# the published evaluation of the base model, memory full
q_len, m_len, mem_len = 64, 640, 640
k_len = q_len + m_len
published = transformer_xl_positions(q_len, k_len, clamp_len=400)
plain = transformer_xl_positions(q_len, k_len)
assert int(plain.max()) == 703 and (published[plain >= 400] == 400).all()
ones = torch.ones(q_len, k_len, dtype=torch.bool)
shift_len = q_len - (k_len - mem_len)  # mask_shift_len in _forward: 0
same_length = torch.triu(ones, 1 + m_len) | torch.tril(ones, -shift_len)
seen = ~same_length
distance = relative_shift(plain.expand(q_len, k_len))  # i + m - j where seen
encoded = relative_shift(published.expand(q_len, k_len))  # what R it gets
assert (seen.sum(-1) == mem_len).all()  # m keys per query
assert int(distance[seen].min()) == 0 and int(distance[seen].max()) == 639
shared = seen & (encoded == 400)
assert int(distance[shared].min()) == 400 and int(distance[shared].max()) == 639
assert torch.equal(encoded[seen & ~shared], distance[seen & ~shared])

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what the paper measured, and how it was evaluated.** Dai et al.'s ablation on WikiText-103
# (Table 6, §4.2, models of 128M parameters) compares their encoding under recurrence
# only with Shaw et al.'s: 26.77 against 27.94 best perplexity. The absolute
# encodings appear only without recurrence, where theirs is lowest too (30.10
# against 30.97 for Vaswani et al.'s, both with the loss on the last half of each
# segment). With recurrence, their encoding improves from
# 27.02 at the training attention length to 26.77 at 500, while Shaw et al.'s
# reaches its best, 27.94, at 256: a longer attention at evaluation helps only with
# their own encoding. The official scripts train and evaluate the base model with
# memories of 150 and 640, the large one with 384 and 1600 (`clamp_len` 400 and
# 1000): the evaluation memory is about four times the training one. For the base
# model, `pos_seq` runs from 703 down to 0 at evaluation, but under `--same_length`
# each query sees only the distances 0 to 639 ([the note](#deeper-the-mask-of-the-published-evaluation-scripts) in
# [where the mask must start](#with-a-memory-where-the-mask-must-start)).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：論文が測ったことと評価の設定**
#
# ここでいう再帰とは、前のセグメントの隠れ状態をメモリとして使うことです。
# Dai らは WikiText-103 でアブレーションを行いました（表 6、§4.2、パラメータ数 1 億 2800 万のモデル）。再帰のある設定で比べているのは、Dai らのエンコーディングと Shaw らのものだけです。
# 最良のパープレキシティは 26.77 対 27.94 です。
# 絶対位置のエンコーディングは再帰のない行にだけ現れ、そこでも Dai らのエンコーディングが最も低くなります。
# 各セグメントの後半だけに損失をかけた場合で比べると、Vaswani らのものの 30.97 に対して 30.10 です。
# 再帰のあるモデルでは、Dai らのエンコーディングは、学習時のアテンションの長さでの 27.02 から長さ 500 での 26.77 まで下がります。
# Shaw らのものは長さ 256 で最良の 27.94 に達します。評価時にアテンションを長くして効果があるのは、Dai らのエンコーディングだけです。
# 公式のスクリプトでは、base モデルは長さ 150 のメモリで学習して 640 で評価し、`clamp_len` は 400 です。
# large モデルは 384 で学習して 1600 で評価し、`clamp_len` は 1000 です。評価時のメモリは学習時のおよそ 4 倍です。
# base モデルの評価時の `pos_seq` は 703 から 0 までです。
# ただし評価では `--same_length` を指定するので、各クエリが見るのは距離 0〜639 だけです（[「メモリがあるとき：マスクはどこから始めるか」](#メモリがあるときマスクはどこから始めるか)の節の[補足](#deeper-公開された評価スクリプトのマスク)）。

# %% [markdown] lang="en"
# ## Lining up the distances: the relative shift
#
# Terms $(a)$ and $(c)$ are one matrix product, $(Q + u) K^\top$. Terms $(b)$ and $(d)$
# are not, since the vector $r_{i-j}$ changes with the pair, and gathering an
# $(L, m + L, d)$ tensor of them would bring back the memory cost of
# [*Relative position representations*](04-shaw-relative.ipynb#what-the-direct-computation-costs).
# Instead, Transformer-XL multiplies every query with every *distance* once,
# $$B = (Q + v)\, \tilde R^\top$$
# where row $s$ of $\tilde R$ is $r_{m + L - 1 - s}$, in the order of `pos_seq`. $B$ is
# $L \times (m+L)$ like the scores, but its column $s$ is a distance, not a key. The
# pair $(i, j)$ needs the distance $i + m - j$, which sits in column
# $$s = m + L - 1 - (i + m - j) = j + L - 1 - i$$
# so row $i$ must move left by $L - 1 - i$ places: the last row stays, the first moves
# by $L - 1$. The official code (`_rel_shift`) does it without an index:
#
# 1. pad a column of zeros on the left: $L \times (m + L + 1)$;
# 2. read the same numbers, in the same memory order, as $(m + L + 1) \times L$;
# 3. drop the first row, that is the first $L$ numbers;
# 4. read the remaining $L(m + L)$ numbers as $L \times (m + L)$.
#
# Entry $(i, j)$ of the result is number $L + i(m + L) + j$ of the padded rows laid
# end to end. Padded rows have $m + L + 1$ entries, so that is row $i$, padded column
# $L + j - i$, provided it does not run past the end of the row:
# $$L + j - i \le m + L \quad\Longleftrightarrow\quad j \le i + m$$
# Padded column $L + j - i$ is column $j + L - 1 - i$ of $B$: exactly the $s$ above.
# So the shift is exact for every key at or before its query, $j \le i + m$, which is
# every key a causal model may see. The figure labels each entry of $B$ with
# $10 i$ plus the distance of its column, for $L = 4$ and $m = 2$. Each row moves
# left: its blue entries fall off into the tail of the row above, and the dark ones
# of row 0 into the dropped row. After the shift, every entry left of the line reads
# $10 i + (i + 2 - j)$, its query's row and the pair's own distance.

# %% [markdown] lang="ja"
# ## 距離をそろえる：相対シフト
#
# 項 $(a)$ と $(c)$ は 1 回の行列積 $(Q + u) K^\top$ ですが、項 $(b)$ と $(d)$ はベクトル $r_{i-j}$ が組ごとに変わるので、そうはいきません。
# 組ごとに変わるこれらのベクトルを $(L, m + L, d)$ のテンソルとして gather すると、[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb#直接計算のコスト)の章で見たメモリのコストがふたたびかかります。
# Transformer-XL は代わりに、すべてのクエリとすべての**距離**の積を一度だけ計算します。
# $$B = (Q + v)\, \tilde R^\top$$
# ここで $\tilde R$ の行 $s$ は $r_{m + L - 1 - s}$ で、`pos_seq` の順に並びます。
# $B$ はスコアと同じ $L \times (m+L)$ ですが、列 $s$ はキーではなく距離です。
# 組 $(i, j)$ には距離 $i + m - j$ が必要で、それは次の列にあります。
# $$s = m + L - 1 - (i + m - j) = j + L - 1 - i$$
# したがって、行 $i$ を $L - 1 - i$ 列ぶん左へずらす必要があります。最後の行はそのままで、最初の行は $L - 1$ 列ぶんずれます。
# 公式実装（`_rel_shift`）は、これをインデックスを使わずに行います。
#
# 1. 左に 0 の列を 1 つパディングし、$L \times (m + L + 1)$ にします。
# 2. 同じ数を同じメモリ順のまま $(m + L + 1) \times L$ として読みます。
# 3. 最初の行、つまり最初の $L$ 個の数を捨てます。
# 4. 残りの $L(m + L)$ 個の数を $L \times (m + L)$ として読みます。
#
# 結果の成分 $(i, j)$ は、パディングした行をつないで並べたときの（0 から数えて）$L + i(m + L) + j$ 番目の数です。
# パディングした行の成分は $m + L + 1$ 個なので、行の終わりを越えない限り、それは行 $i$ のパディング後の列 $L + j - i$ です。
# $$L + j - i \le m + L \quad\Longleftrightarrow\quad j \le i + m$$
# パディング後の列 $L + j - i$ は $B$ の列 $j + L - 1 - i$、まさに上の $s$ です。
# つまりシフトは、クエリと同じ位置かそれより前のすべてのキー $j \le i + m$、すなわち因果的なモデルが見てよいキーのすべてで正確です。
# 図では $L = 4$、$m = 2$ とし、$B$ の各成分に、$10 i$ にその列の距離を足したラベルを付けています。
# 各行は左へずれます。青い成分は 1 つ上の行の末尾へ、行 0 の濃い灰色の成分は捨てる行へ移ります。
# シフトの後、線より左の成分はどれも $10 i + (i + 2 - j)$ です。十の位がクエリの行、一の位がその組の正しい距離を表します。

# %% tags=["figure"] alt={"en": ["Two 4 by 6 grids of numbers for L = 4 and m = 2, query i down. Left, B before the shift, column s across: row i holds 10 i plus the distances 5 down to 0, so row 0 reads 5 4 3 2 1 0 and row 3 reads 35 to 30; the first three entries of row 0 are dark (dropped), the first two of row 1 and the first of row 2 blue (they move into the row above). Right, after the shift, key j across: row 0 reads 2 1 0, then 0, 15, 14; row 1 reads 13 12 11 10, then 0, 25; row 2 reads 24 to 20, then 0; row 3 reads 35 to 30. Left of a staircase line, j ≤ i + 2, every entry is grey and carries its row's tens digit and the pair's distance; right of it the first entry is the orange pad zero and the rest are blue entries of the next row, which the causal mask hides."], "ja": ["L = 4、m = 2 の 4 行 6 列の数の格子 2 つ。縦はクエリ i です。左はシフト前の B で、横は列 s です。行 i には 10 i に距離 5〜0 を足した数が並び、行 0 は 5 4 3 2 1 0、行 3 は 35〜30 です。行 0 の最初の 3 つは濃い灰色（捨てられる）、行 1 の最初の 2 つと行 2 の最初の 1 つは青（上の行へ移る）です。右はシフト後で、横はキー j です。行 0 は 2 1 0 の後に 0、15、14、行 1 は 13 12 11 10 の後に 0、25、行 2 は 24〜20 の後に 0、行 3 は 35〜30 です。階段状の線より左（j ≤ i + 2）の成分はどれも灰色で、十の位が行、一の位がその組の距離です。線より右は、最初の 1 つがオレンジのパディングの 0、残りが次の行から来た青い成分で、因果マスクがこれらを隠します。"]}
q_len, m_len = 4, 2
k_len = q_len + m_len
distances = transformer_xl_positions(q_len, k_len)  # 5, 4, ..., 0
labels = 10 * torch.arange(q_len)[:, None] + distances  # 10 i + distance
shifted = relative_shift(labels)
i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
# before: 0 stays in row i, 1 moves into the row above, 3 is dropped
falls_off = j < q_len - 1 - i
before = torch.where(falls_off, torch.where(i == 0, 3, 1), 0)
# after: 0 the pair's own score, 2 the pad, 1 the next row
after = torch.where(j <= i + m_len, 0, torch.where(j == i + m_len + 1, 2, 1))
colors = ListedColormap(["0.85", OKABE_ITO[4], OKABE_ITO[1], "0.55"])
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.5))
for ax, kind, values, x in zip(
    axes, (before, after), (labels, shifted), ("$s$", "$j$"), strict=True
):
    ax.imshow(kind, cmap=colors, vmin=-0.5, vmax=3.5, interpolation="nearest")
    for r in range(q_len):
        for c in range(k_len):
            number = int(values[r, c])
            ax.text(c, r, number, ha="center", va="center", color="#222222")
    ax.set(xlabel=x, ylabel="$i$", xticks=range(k_len), yticks=range(q_len))
    ax.tick_params(length=0)
    ax.grid(False)
    ax.spines[:].set_visible(False)
axes[0].set_title("$B$")
axes[1].set_title(r"$\mathrm{shift}(B)$")
stairs_x, stairs_y = [], []  # the causal boundary j = i + m
for r in range(q_len - 1):
    stairs_x += [r + m_len + 0.5, r + m_len + 0.5]
    stairs_y += [r - 0.5, r + 0.5]
axes[1].plot([*stairs_x, k_len - 0.5], [*stairs_y, q_len - 1.5], color=INK)
plt.show()

# %% tags=["check"] summary={"en": "the shift matches the official _rel_shift and a gather of column j + L − 1 − i where j ≤ i + m", "ja": "シフトは公式の _rel_shift とも、j ≤ i + m で列 j + L − 1 − i を gather したものとも一致します"}
# what the official RelMultiHeadAttn._rel_shift printed for these labels,
# laid out as [qlen, klen, 1, 1]
official_shift = [
    [2, 1, 0, 0, 15, 14],
    [13, 12, 11, 10, 0, 25],
    [24, 23, 22, 21, 20, 0],
    [35, 34, 33, 32, 31, 30],
]
assert shifted.tolist() == official_shift
assert labels[0].tolist() == [5, 4, 3, 2, 1, 0]


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
# ## The entries after each query
#
# The keys after a query, $j > i + m$, have negative distances, and $B$ has no column
# for them. The shift fills those entries all the same. Continuing the count past the
# end of row $i$, the first one, $j = i + m + 1$, lands on the zero padded in front of
# row $i + 1$ (orange in the figure), and the ones after it on the start of row
# $i + 1$ of $B$ (blue):
# $$\mathrm{out}_{i,\,i+m+1} = 0, \qquad \mathrm{out}_{i,j} = B_{i+1,\; j - i - m - 2} \quad (j \ge i + m + 2)$$
# These are numbers of the *next* query against distances that have nothing to do
# with the pair: not a score of the pair, not even an approximate one. They sit
# exactly where Transformer-XL's causal mask puts $-\infty$ (its `dec_attn_mask` is
# `triu(ones(qlen, klen), diagonal=1 + mlen)`), so they never reach the softmax. Without
# the mask, they would.

# %% [markdown] lang="ja"
# ## 各クエリより後ろの成分
#
# クエリより後ろのキー $j > i + m$ は負の距離を持ち、$B$ にはそのための列がありません。それでもシフトはこれらの成分を埋めます。
# 行 $i$ の終わりを越えて数え続けると、最初の $j = i + m + 1$ は行 $i + 1$ の前にパディングした 0 に当たり（図のオレンジ）、
# その後は $B$ の行 $i + 1$ の先頭からの成分にあたります（青）。
# $$\mathrm{out}_{i,\,i+m+1} = 0, \qquad \mathrm{out}_{i,j} = B_{i+1,\; j - i - m - 2} \quad (j \ge i + m + 2)$$
# これらは**次の**クエリの値で、しかもその組とは無関係な距離に対するものです。組のスコアではなく、近似値ですらありません。
# これらの成分は、Transformer-XL の因果マスクが $-\infty$ を置く場所とちょうど一致するので、softmax には届きません
# （マスク `dec_attn_mask` は `triu(ones(qlen, klen), diagonal=1 + mlen)` です）。マスクがなければ届いてしまいます。

# %% tags=["check"] summary={"en": "entries after a query are the pad zero or the next row; only with the mask are the weights right", "ja": "クエリより後ろは 0 か次の行の値で、マスクをかけたときだけ重みが正しくなります"}
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
r = sinusoid_row(transformer_xl_positions(q_len, k_len)) @ w_kr.T
scores_txl = (q + u) @ key.T + relative_shift((q + v) @ r.T)  # AC + BD
mask = torch.triu(
    torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1 + m_len
)  # dec_attn_mask
weights = torch.softmax(
    (scores_txl / math.sqrt(d_head)).masked_fill(mask, -math.inf), dim=-1
)


def four_terms_directly(q, key, m_len):
    """AC + BD of every (query, key) pair with its true distance i + m - j,
    future keys too (their distances negative), one pair at a time."""
    return torch.tensor(
        [
            [
                (q[i] + u) @ key[j]
                + (q[i] + v) @ (w_kr @ sinusoid_row(i + m_len - j))
                for j in range(len(key))
            ]
            for i in range(len(q))
        ],
        dtype=f64,
    )


direct = four_terms_directly(q, key, m_len)
direct_weights = torch.softmax(
    (direct / math.sqrt(d_head)).masked_fill(mask, -math.inf), dim=-1
)
assert_close(weights, direct_weights)
assert_close(scores_txl[~mask], direct[~mask])
unmasked_gap = torch.softmax(scores_txl, -1) - torch.softmax(direct, -1)
assert unmasked_gap.abs().max() > 1e-2

# %% [markdown] lang="en"
# ## With a memory: where the mask must start
#
# The derivation never assumed $m = 0$: the shift works for $L$ queries against
# $m + L$ keys because the queries are the *last* $L$ tokens, which is how
# Transformer-XL slices them (`w_head_q = w_head_q[-qlen:]`). Two things move with
# $m$. The boundary between exact entries and garbage is the diagonal $j = i + m$,
# not $j = i$; and so must the mask be. The familiar
# [causal mask](../docs/glossary.md#causal-mask) of a model without memory,
# `triu(ones, diagonal=1)`, hides the keys $j > i$: with a memory that also hides the
# $m$ most recent keys of every query, $i + 1, \dots, i + m$, although they are at
# or before it and their scores are exact, $L m$ entries in all (15 for $L = 5$ and $m = 3$).
# `posenc.attention(..., causal=True)` aligns query $i$ with position $i + m$ and
# gives the same output as Transformer-XL's mask.

# %% [markdown] lang="ja"
# ## メモリがあるとき：マスクはどこから始めるか
#
# 導出では $m = 0$ を仮定していません。
# $L$ 個のクエリと $m + L$ 個のキーでシフトが成り立つのは、クエリが**最後の** $L$ 個のトークンだからです。Transformer-XL もそのように切り出しています（`w_head_q = w_head_q[-qlen:]`）。
# $m$ によって変わることが 2 つあります。正確な成分と無意味な値の境目が $j = i$ ではなく対角線 $j = i + m$ になること、そしてマスクもそれに合わせなければならないことです。
# メモリのないモデルでおなじみの[因果マスク](../docs/glossary.ja.md#causal-mask) `triu(ones, diagonal=1)` はキー $j > i$ を隠すので、メモリがあると各クエリの直近の $m$ 個のキー $i + 1, \dots, i + m$ まで隠してしまいます。
# これらはクエリ以前の位置にあり、スコアも正確です。隠れる成分は全部で $L m$ 個（$L = 5$、$m = 3$ なら 15 個）です。
# `posenc.attention(..., causal=True)` はクエリ $i$ を位置 $i + m$ に合わせ、Transformer-XL のマスクと同じ出力になります。

# %% tags=["check"] summary={"en": "the memory-less mask hides L m = 15 past keys; causal=True gives Transformer-XL's output", "ja": "メモリを考えないマスクは過去のキーを L m = 15 個隠します。causal=True では Transformer-XL と同じ出力になります"}
ones = torch.ones(q_len, k_len, dtype=torch.bool)
naive = torch.triu(ones, diagonal=1)  # ignores the memory
assert int((naive & ~mask).sum()) == q_len * m_len == 15

values = torch.randn(k_len, d_head, dtype=f64)
# everything but q_i . k_j, as an additive bias
# (posenc.attention divides q k^T by sqrt(d) itself)
bias = (u @ key.T + relative_shift((q + v) @ r.T)) / math.sqrt(d_head)
with_bias = attention(q, key, values, bias=bias, causal=True)
assert_close(with_bias, weights @ values)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the mask of the published evaluation scripts.** Both official
# evaluation scripts pass `--same_length`, which adds `tril(ones, -mask_shift_len)`
# to `dec_attn_mask` in `MemTransformerLM._forward`. Once the memory is full,
# `mask_shift_len` is 0 and every query sees exactly $m$ keys, itself and the
# $m - 1$ before it (the distances $0$ to $m - 1$), instead of $m + i + 1$:
# evaluation differs from training in its mask too.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：公開された評価スクリプトのマスク**
#
# 公式の評価スクリプトは 2 つとも `--same_length` を指定し、`MemTransformerLM._forward` で `dec_attn_mask` に `tril(ones, -mask_shift_len)` が加わります。
# メモリが埋まると `mask_shift_len` は 0 になり、どのクエリにも $m + i + 1$ 個ではなくちょうど $m$ 個のキー（自分自身とその前の $m - 1$ 個、距離 $0$ から $m - 1$）が見えます。評価はマスクの点でも学習と異なります。

# %% [markdown] lang="en"
# ## The order of the distances
#
# The shift moves row $i$ left by $L - 1 - i$ places, which is right only if the
# columns of $B$ hold the distances in *descending* order, $m + L - 1$ down to $0$.
# Build $\tilde R$ from `arange(klen)` instead, the natural order for anyone who
# thinks of $R$ as a table indexed by distance, and column $s$ holds the distance $s$.
# After the shift, the pair $(i, j)$ gets the distance $j + L - 1 - i$ instead of
# $i + m - j$: it grows with $j$ instead of shrinking. For the last query the distance
# is just $j$, the key's position, as if the encoding were absolute, and every query
# gets the largest distance, $m + L - 1$, for itself. The two distances agree only
# where $i - j = (L - 1 - m)/2$, at most one pair per row, so at most $L$ of the
# $L(L+1)/2 + Lm$ pairs the queries see are right, a share of at most
# $2/(L + 1 + 2m)$ that falls to 0 as $L$ grows. Nothing raises an
# error: the shapes agree and the scores are finite. Shifting the distances
# themselves, for $L = 4$ and $m = 2$, with the entries after each query set to
# $-1$:

# %% [markdown] lang="ja"
# ## 距離を並べる順序
#
# シフトは行 $i$ を $L - 1 - i$ 列ぶん左へずらします。これが正しいのは、$B$ の列が距離を**降順**、つまり $m + L - 1$ から $0$ の順に持つときだけです。
# $R$ を、距離をインデックスにして参照する表と考えると、`arange(klen)` で $\tilde R$ を作るのが自然に思えます。しかしそうすると、列 $s$ には距離 $s$ が入ります。
# シフトの後、組 $(i, j)$ が受け取る距離は $i + m - j$ ではなく $j + L - 1 - i$ で、$j$ とともに大きくなります。
# 最後のクエリでは距離はキーの位置 $j$ そのもので、絶対位置のエンコーディングと変わりません。どのクエリも自分自身には最大の距離 $m + L - 1$ を受け取ります。
# 2 つの距離が一致するのは $i - j = (L - 1 - m)/2$ の組だけで、1 行に多くても 1 組です。
# したがってクエリから見える $L(L+1)/2 + Lm$ 組のうち正しいのは多くても $L$ 組で、割合は $2/(L + 1 + 2m)$ 以下となり、$L$ が大きくなると 0 に近づきます。
# それでも、どこにもエラーは出ません。形状は合い、スコアは有限です。
# $L = 4$、$m = 2$ について距離そのものをシフトし、各クエリより後ろの成分を $-1$ にすると、次のようになります。

# %%
q_len, m_len = 4, 2
k_len = q_len + m_len
future = torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), 1 + m_len)
descending = transformer_xl_positions(q_len, k_len).expand(q_len, k_len)
ascending = torch.arange(k_len).expand(q_len, k_len)  # the wrong order
got_desc = relative_shift(descending).masked_fill(future, -1)
got_asc = relative_shift(ascending).masked_fill(future, -1)
print("descending:", got_desc, "ascending:", got_asc, sep="\n", end="")

# %% tags=["check"] summary={"en": "descending gives i + m − j; ascending gives j + L − 1 − i, right for at most one pair per row", "ja": "降順なら i + m − j、昇順なら j + L − 1 − i で、正しいのは 1 行に多くても 1 組です"}
i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
assert torch.equal(
    got_desc[~future], (i + m_len - j).expand_as(future)[~future]
)
assert torch.equal(
    got_asc[~future], (j + q_len - 1 - i).expand_as(future)[~future]
)
assert torch.equal(got_asc[-1], torch.arange(k_len))  # the key's position
diagonal = got_asc[torch.arange(q_len), torch.arange(q_len) + m_len]
assert (diagonal == k_len - 1).all()  # j = i + m: itself
for q_len, m_len in [(4, 2), (3, 0), (4, 1), (6, 1), (64, 640), (64, 639)]:
    k_len = q_len + m_len
    i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
    seen = j <= i + m_len  # the causal pairs
    ascending = torch.arange(k_len).expand(q_len, k_len)
    right = (relative_shift(ascending) == i + m_len - j) & seen
    assert (right.sum(-1) <= 1).all()  # at most one per row
    pairs = q_len * (q_len + 1) // 2 + q_len * m_len
    assert int(seen.sum()) == pairs
    assert int(right.sum()) * (q_len + 1 + 2 * m_len) <= 2 * pairs

# %% [markdown] lang="en"
# ## In posenc
#
# `posenc.transformer_xl` gathers the pieces, with batch axes first, then queries,
# then keys or distances.
#
# - `transformer_xl_positions(q_len, k_len, *, bidirectional=False, clamp_len=None)`:
#   the distances, descending. With `bidirectional=True` they continue to
#   $-(L - 1)$: $m + 2L - 1$ distances, which cover the keys after each query too.
# - `relative_shift(x, k_len=None)`: the shift, for $x$ of shape $(\dots, L, r)$ whose
#   column $s$ is the distance $k_{\mathrm{len}} - 1 - s$. With $r = m + L$ it is exact
#   where $j \le i + m$. With $r = m + 2L - 1$ the condition of the derivation,
#   padded column $L + j - i \le r$, holds for every $j < m + L$: the shift is exact
#   everywhere, and the first $m + L$ columns are kept.
# - `transformer_xl_scores(q, k, r, u, v)`: the full $(\dots, L, m + L)$ matrix
#   $A^{\mathrm{rel}}$, before the scaling by $1/\sqrt{d}$. With one row of `r` per key
#   (causal), the entries after each query are $-\infty$, the mask applied at the
#   source instead of garbage; with $m + 2L - 1$ rows, every entry is a score.

# %% [markdown] lang="ja"
# ## posenc では
#
# これらは `posenc.transformer_xl` にまとまっています。軸の順は、バッチの軸、クエリ、キー（または距離）です。
#
# - `transformer_xl_positions(q_len, k_len, *, bidirectional=False, clamp_len=None)`：降順の距離です。
#   `bidirectional=True` のときは $-(L - 1)$ まで続きます。距離は全部で $m + 2L - 1$ 個になり、各クエリより後ろのキーも扱えます。
# - `relative_shift(x, k_len=None)`：シフトです。$x$ の形状は $(\dots, L, r)$ で、列 $s$ が距離 $k_{\mathrm{len}} - 1 - s$ に対応します。
#   $r = m + L$ なら、$j \le i + m$ の範囲で正確です。
#   $r = m + 2L - 1$ なら、導出の条件であるパディング後の列 $L + j - i \le r$ が、すべての $j < m + L$ で成り立ちます。
#   シフトはどこでも正確になり、最初の $m + L$ 列を残します。
# - `transformer_xl_scores(q, k, r, u, v)`：$1/\sqrt{d}$ でスケーリングする前の、$(\dots, L, m + L)$ の行列 $A^{\mathrm{rel}}$ 全体です。
#   `r` の行がキーごとに 1 つ（因果的）なら、各クエリより後ろの成分は $-\infty$ になります。無意味な値を残さず、その場でマスクをかけるわけです。
#   行が $m + 2L - 1$ 個なら、すべての成分がスコアです。

# %% tags=["check"] summary={"en": "transformer_xl_scores equals the four terms and a port of the official code's scores", "ja": "transformer_xl_scores は 4 項の直接計算とも公式実装のスコアの移植とも一致します"}
q_len, m_len = 5, 3
k_len = q_len + m_len
emb = torch.randn(k_len, d_model, dtype=f64)
q, key = emb[-q_len:] @ w_q.T, emb @ w_ke.T
true_scores = four_terms_directly(q, key, m_len)
future = torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), 1 + m_len)
for bidirectional in (False, True):
    distances = transformer_xl_positions(
        q_len, k_len, bidirectional=bidirectional
    )
    r = sinusoid_row(distances) @ w_kr.T  # [r, d_head]
    got = transformer_xl_scores(q, key, r, u, v)
    if bidirectional:
        assert r.shape[0] == k_len + q_len - 1
        assert_close(got, true_scores)  # every entry
    else:
        assert r.shape[0] == k_len and torch.isinf(got[future]).all()
        assert_close(got[~future], true_scores[~future])


def txl_rel_shift(x):  # RelMultiHeadAttn._rel_shift, [qlen, klen, bsz, n_head]
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
r_w_bias = torch.randn(n_head, d_head, dtype=f64)
r_r_bias = torch.randn(n_head, d_head, dtype=f64)
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
assert torch.isinf(ours[..., future]).all()

# %% [markdown] lang="en"
# ## How the libraries differ
#
# All three line up the scores per distance with a reshape rather than a gather, but
# not the same reshape. Transformer-XL pads on the left over the $m + L$ distances of
# `pos_seq` and leaves the garbage after each query to the mask. XLNet pads nothing:
# it encodes one extra distance, $m + L$, in front, which does the pad's job, and with
# bidirectional attention it encodes the negative distances too, so that every entry
# is exact. labml learns its relative vectors instead of using sinusoids, pads on the
# right and takes $m + 2L$ distances, so that every entry it keeps is exact.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# 3 つとも、距離ごとのスコアを gather ではなく形状変換でそろえます。ただし、形状変換の仕方はそれぞれ違います。
# Transformer-XL は `pos_seq` の $m + L$ 個の距離について左にパディングし、各クエリより後ろの無意味な値はマスクに任せます。
# XLNet は何もパディングしません。距離の列の先頭に余分な距離 $m + L$ を 1 つ加えてエンコードし、これがパディングの役目を果たします。
# 双方向のアテンションでは負の距離もエンコードするので、すべての成分が正確です。
# labml は正弦波を使わずに相対ベクトルを学習し、右にパディングして $m + 2L$ 個の距離を使うので、残す成分はすべて正確です。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Transformer-XL's and XLNet's code in detail.** Both compute
# $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$. In Transformer-XL's PyTorch code an
# optional `zero_triu` zeroes the entries after each query, which does not replace the
# mask: a score of zero still receives weight. `r_w_bias` and `r_r_bias` are shared
# by all layers there; the TensorFlow code gives each layer its own when `untie_r`
# is set, as its published scripts do.
#
# XLNet (`relative_positional_encoding` and `rel_shift`) encodes
# `tf.range(klen, -qlen, -1)` for bidirectional attention and `tf.range(klen, -1, -1)`
# for causal attention. Reshaping to $(r, L)$ and dropping the first row removes $L$
# numbers, as the pad-and-drop did, and the columns beyond $m + L$ are cut off.
# Causal, it leaves garbage like Transformer-XL, but with $B_{i+1,0}$ where the zero
# was. labml's shift, which moves each row to the right, is solution 3.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Transformer-XL と XLNet のコードの細部**
#
# どちらも $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$ を計算します。
# Transformer-XL の PyTorch 版では、オプションの `zero_triu` が各クエリより後ろの成分を 0 にしますが、マスクの代わりにはなりません。スコアが 0 でも重みは付くからです。
# このコードでは `r_w_bias` と `r_r_bias` をすべての層で共有します。TensorFlow 版のコードでは、`untie_r` を指定すると層ごとのバイアスを持ちます。公開されたスクリプトは、どれもこれを指定しています。
#
# XLNet（`relative_positional_encoding` と `rel_shift`）は、双方向のアテンションでは `tf.range(klen, -qlen, -1)`、因果的なアテンションでは `tf.range(klen, -1, -1)` をエンコードします。
# $(r, L)$ に形状変換して最初の行を捨てると、パディングして捨てたときと同じく $L$ 個の数が除かれ、$m + L$ より先の列は切り落とされます。
# 因果的な場合は Transformer-XL と同じく無意味な値が残りますが、0 があった場所には $B_{i+1,0}$ が入ります。
# 各行を右へずらす labml のシフトは解答 3 で扱います。


# %% tags=["deeper", "check"] summary={"en": "XLNet's shift is exact everywhere when bidirectional and leaves B_(i+1,0) after each query when causal", "ja": "XLNet のシフトは双方向ならどこでも正確で、因果的なら各クエリの直後に B_(i+1,0) を残します"}
def xlnet_rel_shift(x, klen):  # XLNet's rel_shift, on [qlen, rlen]
    qlen, rlen = x.shape
    x = x.reshape(rlen, qlen)[1:]  # drop the first row: qlen numbers
    return x.reshape(qlen, rlen - 1)[:, :klen]


qv = q + v
expected = true_scores - (q + u) @ key.T  # the terms (b) and (d)
for attn_type, end in (("bi", -q_len), ("uni", -1)):
    fwd_pos_seq = torch.arange(k_len, end, -1)  # tf.range(klen, end, -1)
    pos_b = qv @ (sinusoid_row(fwd_pos_seq) @ w_kr.T).T
    bd = xlnet_rel_shift(pos_b, k_len)
    if attn_type == "bi":
        assert_close(bd, expected)  # exact everywhere
    else:
        assert_close(bd[~future], expected[~future])
        assert all(
            bd[i, i + m_len + 1] == pos_b[i + 1, 0] for i in range(q_len - 1)
        )

# %% [markdown] lang="en"
# ## What to remember
#
# - With a memory, absolute encodings added per segment give the same vector to
#   slot $j$ of the memory and of the current segment; Transformer-XL uses only the
#   distance $i - j$ instead.
# - Dai et al.'s score has four terms, paired as
#   $(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$: a fixed sinusoid $R_{i-j}$ of the
#   distance, a learned projection $W_{k,R}$ and two global biases $u$, $v$.
# - The relative shift (a pad and two reshapes) lines up $B = (Q + v)\tilde R^\top$
#   with the keys, exactly for $j \le i + m$.
# - The entries after each query hold the pad zero and then the next row; the mask
#   `triu(..., diagonal=1 + m)` must hide them, and with a memory it starts $m$
#   diagonals to the right.
# - The distances must be in descending order; in ascending order nothing fails and
#   all but at most $L$ of the visible pairs get a wrong distance.

# %% [markdown] lang="ja"
# ## まとめ
#
# - メモリがあると、セグメントごとに足す絶対位置のエンコーディングは、メモリと現在のセグメントのそれぞれ $j$ 番目のトークンに同じベクトルを与えます。
#   Transformer-XL は代わりに距離 $i - j$ だけを使います。
# - Dai らのスコアは 4 つの項からなり、$(q_i + u)^\top k_j + (q_i + v)^\top r_{i-j}$ とまとめられます。
#   距離の固定の正弦波 $R_{i-j}$、学習可能な射影 $W_{k,R}$、全クエリ共通の 2 つのバイアス $u$、$v$ を使います。
# - 相対シフト（パディング 1 回と形状変換 2 回）は、$B = (Q + v)\tilde R^\top$ を $j \le i + m$ の範囲で正確にキーにそろえます。
# - 各クエリより後ろの成分には、パディングの 0 と次の行の値が入ります。マスク `triu(..., diagonal=1 + m)` でこれらを隠す必要があり、メモリがあるとマスクの境目は $m$ 本右の対角線になります。
# - 距離は降順に並べなければなりません。昇順に並べてもエラーにはなりませんが、見える組のうち正しい距離を受け取るのは多くても $L$ 組で、残りはすべて誤ります。

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
#    and compute it with the offset form of that chapter.
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
# 1. 項 $(d)$ の $v^\top W_{k,R} R_{i-j}$ は、T5 や ALiBi のバイアスと同じく、$i - j$ だけで決まります。
#    $d = 64$ として、ランダムな $v$ と $W_{k,R}$ についてこれを $i - j$ に対して描き、
#    [「ALiBi：線形バイアスによるアテンション」](07-alibi.ipynb)の章のバイアスと形を比べてください。
# 2. Transformer-XL の `attn_type=1` は、$W_{k,R} R_{i-j}$ の代わりに距離とヘッドごとのベクトルを学習し、
#    項 $(d)$ には距離とヘッドごとのスカラーを使います。
#    このとき項 $(b)$ が、[「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章で見た
#    Shaw らのキーの項からクリッピングを除いたものであることを示し、
#    その章の相対位置ごとの形で計算してください。
# 3. labml は右にパディングし、最後の行を捨てます。
#    この章で Transformer-XL について導いたのと同じ方法で成分の式を導き、
#    Transformer-XL が $m + L$ 個の距離で済むのに labml は $m + 2L$ 個を必要とする理由を説明してください。
# 4. `clamp_len` を使うと、それより遠い距離はすべて 1 つのエンコーディングを共有します。
#    $m = 100$、`clamp_len=20` のとき、クエリが項 $(b)$ と $(d)$ で区別できなくなるのはどのキーの組でしょうか。
#    [「相対位置表現（Shaw ら）」](04-shaw-relative.ipynb)の章のクリッピングと比べてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Write $f(\delta) = v^\top W_{k,R} R_\delta = w^\top R_\delta$ with
# $w = W_{k,R}^\top v$. By Cauchy–Schwarz and $\lVert R_\delta \rVert = \sqrt{d/2}$
# (the norm of every sinusoidal [code](../docs/glossary.md#code)), $|f(\delta)| \le \lVert w \rVert \sqrt{d/2}$
# at every distance: the bias stays bounded and, with random $v$ and $W_{k,R}$,
# goes up and down with $\delta$ as a sum of cosines and sines of the angles
# $\omega_i \delta$. ALiBi's bias $-m_h\,\delta$ is the opposite: monotone and
# unbounded, a penalty that grows with the distance. For $\delta = 0, \dots, 1023$
# the bound holds and $f$ changes direction more than 200 times (printed below); a
# straight line never does. (A learned $v$ and $W_{k,R}$ could make $f$ decrease over
# a range of distances, but never beyond the bound.)

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $w = W_{k,R}^\top v$ とすると $f(\delta) = v^\top W_{k,R} R_\delta = w^\top R_\delta$ です。
# コーシー・シュワルツの不等式と、どの距離の正弦波のベクトル（[符号](../docs/glossary.ja.md#code)）でも成り立つ $\lVert R_\delta \rVert = \sqrt{d/2}$ から、
# すべての距離で $|f(\delta)| \le \lVert w \rVert \sqrt{d/2}$ となります。
# バイアスは有界で、ランダムな $v$ と $W_{k,R}$ では、角度 $\omega_i \delta$ の余弦と正弦の和として $\delta$ とともに上下します。
# ALiBi のバイアス $-m_h\,\delta$ はその逆で、単調で有界でなく、距離とともに大きくなるペナルティです。
# $\delta = 0, \dots, 1023$ ではこの上界が成り立ち、$f$ の増減は 200 回以上入れ替わります（回数は下に出力します）。直線なら一度も入れ替わりません。
# 学習済みの $v$ と $W_{k,R}$ なら、ある範囲の距離で $f$ が減少することはありえますが、上界を超えることはありません。

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
assert turns > 200  # up and down, unlike ALiBi's straight line
print(f"|f| <= {bound:.2f}, max |f| = {f.abs().max():.2f}, turns: {turns}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** With `attn_type=1` the vector $W_{k,R} R_{i-j}$ becomes a learned
# $e_\delta$ per distance $\delta = i - j$ (and head), so term $(b)$ is
# $q_i^\top e_{i-j}$: a learned vector per relative position dotted with the query,
# which is Shaw et al.'s $x_i W^Q (a^K_{ij})^\top$ with
# $a^K_{ij} = e_{i-j} = w^K_{j-i}$, unclipped as long as the table has a row for
# every distance. In the offset form it is `posenc`'s `RelativePositionEmbedding`
# with $k = m + L - 1$ and row $r$ holding $e_{k-r}$; on every past key
# $j \le i + m$ it equals the relative shift of $B = Q \tilde E^\top$, the rows of
# $\tilde E$ in the descending order of `pos_seq`.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** `attn_type=1` では、ベクトル $W_{k,R} R_{i-j}$ が、距離 $\delta = i - j$（とヘッド）ごとの学習可能な $e_\delta$ になります。
# 項 $(b)$ は $q_i^\top e_{i-j}$、つまり相対位置ごとの学習可能なベクトルとクエリの内積です。
# これは $a^K_{ij} = e_{i-j} = w^K_{j-i}$ とした Shaw らの $x_i W^Q (a^K_{ij})^\top$ で、
# 表にすべての距離の行がある限りクリップはありません。
# 相対位置ごとの形では、`posenc` の `RelativePositionEmbedding` を $k = m + L - 1$ とし、行 $r$ に $e_{k-r}$ を入れたものです。
# 過去のキー $j \le i + m$ ではどれも、$\tilde E$ の行を `pos_seq` の降順に並べた $B = Q \tilde E^\top$ の相対シフトに等しくなります。

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

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** labml learns one vector per key position minus query position,
# row $P + j - i$ of a table with $P = 2^{12}$, and scores the queries against its
# $m + 2L$ rows from $P - (m + L)$ up to, not including, $P + L$: an $L \times r$
# matrix $x$ with $r = m + 2L$. It pads one zero column on the right of $x$ and
# reads the padded rows, $r + 1$ numbers each, as $(r + 1) \times L$, drops
# the last row and reads the rest as $L \times r$. Dropping the last row does not
# move anything before it, so entry $(i, j)$ of the result is number $i r + j$ of
# the padded rows laid end to end, and $i r + j = i(r + 1) + (j - i)$: for
# $j \ge i$ it is $x_{i,\,j - i}$, row $i$ moved right by $i$. labml then keeps the
# last $m + L$ columns, $j \ge r - (m + L)$; all of them are exact when
# $r - (m + L) \ge L - 1$, that is $r \ge m + 2L - 1$, which $r = m + 2L$ satisfies.
# Kept column $j'$ of row $i$ is $x_{i,\,j' + r - (m + L) - i}$, the table row
# $P - (m + L) + j' + L - i = P + j' - (i + m)$: key position minus query position,
# as it should be. Transformer-XL gets away with $m + L$ because it needs only
# $j \le i + m$ exact and masks the rest; labml wants every entry exact, so each
# row needs $L - 1$ extra columns for the shift.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** labml は、キーの位置からクエリの位置を引いた値ごとにベクトルを学習します。$P = 2^{12}$ として、表の行 $P + j - i$ です。
# クエリとの積を取るのは、$P - (m + L)$ から $P + L$ の手前までの $m + 2L$ 行で、これが $r = m + 2L$ の $L \times r$ 行列 $x$ になります。
# labml は $x$ の右に 0 の列を 1 つパディングし（各行は $r + 1$ 個の数になります）、同じ数を $(r + 1) \times L$ として読みます。
# 最後の行を捨て、残りを $L \times r$ として読みます。
# 最後の行を捨てても、それより前の数は動きません。
# したがって結果の成分 $(i, j)$ は、パディングした行を順につないで 1 列に並べたときの $i r + j$ 番目の数で、
# $i r + j = i(r + 1) + (j - i)$ です。$j \ge i$ ならそれは $x_{i,\,j - i}$、つまり行 $i$ を右へ $i$ 列ずらしたものです。
# labml はそのあと最後の $m + L$ 列（$j \ge r - (m + L)$）を残します。
# $r - (m + L) \ge L - 1$、すなわち $r \ge m + 2L - 1$ なら、残す列はすべて正確で、$r = m + 2L$ はこれを満たします。
# 行 $i$ の残した列 $j'$ は $x_{i,\,j' + r - (m + L) - i}$ で、表の行 $P - (m + L) + j' + L - i = P + j' - (i + m)$ です。
# キーの位置からクエリの位置を引いたもので、正しい行です。
# Transformer-XL で $m + L$ 個で済むのは、$j \le i + m$ だけを正確にすればよく、残りはマスクするからです。
# labml はすべての成分を正確にしたいので、各行をずらすために $L - 1$ 列の余分が必要になります。


# %% tags=["solution"]
def labml_shift_right(x):  # labml's shift_right, on [qlen, rlen]
    zero_pad = x.new_zeros(x.shape[0], 1)
    x_padded = torch.cat([x, zero_pad], dim=1)
    x_padded = x_padded.view(x.shape[1] + 1, x.shape[0])
    return x_padded[:-1].view_as(x)


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
big_p = 2**12  # labml's P: kept entry (i, j') reads table row P + j' - (i + m)
table_rows = big_p - k_len + rows  # column c of x is table row P - (m + L) + c
i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
assert torch.equal(table_rows, big_p + j - (i + m_len))

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With `clamp_len=20` every distance of 20 or more uses $R_{20}$,
# so terms $(b)$ and $(d)$ are the same for all keys at distance $\ge 20$. The query
# at position $i + m$ (slot $i$ of the segment) has the keys $j \le i + m - 20$ in
# that group, $i + m - 19$ of them: 81 for the first query of a segment after a
# memory of $m = 100$. Among them only the content terms $(a)$ and $(c)$ differ: they
# form one bag, as the keys from distance $k$ on do in Shaw et al.'s clipping, except that
# Transformer-XL clips the past side only (a causal model has no future keys) and
# the encoding is a fixed sinusoid rather than a learned vector.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** `clamp_len=20` では 20 以上の距離はすべて $R_{20}$ を使うので、
# 距離が $\ge 20$ のキーについて、項 $(b)$ と $(d)$ はどれも同じです。
# 位置 $i + m$（セグメントの $i$ 番目）のクエリでは、$j \le i + m - 20$ のキー $i + m - 19$ 個がこのグループに入ります。
# $m = 100$ のメモリの後のセグメントの最初のクエリなら 81 個です。
# この中でキーごとに違いが出るのは内容の項 $(a)$ と $(c)$ だけです。
# そのため、これらのキーは順序のない 1 つの集まりになります。
# Shaw らのクリッピングで距離 $k$ 以上のキーがそうなるのと同じです。
# 違いは 2 つです。Transformer-XL がクリップするのは過去の側だけで（因果的なモデルに未来のキーはありません）、
# エンコーディングは学習可能なベクトルではなく固定の正弦波です。

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
# ## Sources and versions
#
# The four terms are §3.3 of Dai et al. (2019), whose Appendix B computes the
# product $B$ for term $(b)$, with the distances in the same descending order, and
# notes that each row of the wanted scores is a left-shifted row of it; the pad and
# two reshapes, and the entries they leave past the diagonal, come from the official
# code, not from the appendix. The official code is kimiyoung/transformer-xl,
# `pytorch/mem_transformer.py` at commit 44781ed (`PositionalEmbedding`,
# `RelPartialLearnableMultiHeadAttn`, `_rel_shift`, `MemTransformerLM._forward`),
# with `data_utils.py` (`LMOrderedIterator`) and the scripts `run_wt103_base.sh` and
# `run_wt103_large.sh`; the numbers that `PositionalEmbedding(8)` and `_rel_shift`
# printed were produced by running it in a separate environment. XLNet's
# functions are in `modeling.py` of zihangdai/xlnet. Hugging Face transformers
# deprecated its port, `TransfoXL`, in 2023 (pull request 27607); version 5.24.0
# no longer has it.
#
# ### References
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
# ## 出典とバージョン
#
# 4 つの項は Dai ら（2019）の §3.3 によります。
# 付録 B は項 $(b)$ について同じ降順の距離で積 $B$ を計算し、求めるスコアの各行はこの積の行を左へずらしたものだと述べています。
# 一方、パディング 1 回と形状変換 2 回という手順も、それによって対角線より上に残る成分も、付録にはありません。どちらも公式実装によるものです。
# 公式実装は kimiyoung/transformer-xl（コミット 44781ed）の `pytorch/mem_transformer.py`（`PositionalEmbedding`、`RelPartialLearnableMultiHeadAttn`、`_rel_shift`、`MemTransformerLM._forward`）、`data_utils.py`（`LMOrderedIterator`）、`run_wt103_base.sh`、`run_wt103_large.sh` です。
# `PositionalEmbedding(8)` と `_rel_shift` が出力した数値は、これを別の環境で実行して得たものです。
# XLNet の関数は zihangdai/xlnet の `modeling.py` にあります。
# Hugging Face transformers は、その移植 `TransfoXL` を 2023 年に非推奨とし（プルリクエスト 27607）、バージョン 5.24.0 にはもうありません。
#
# ### 参考文献
#
# - Dai, Z. et al. (2019). *Transformer-XL: Attentive Language Models Beyond a
#   Fixed-Length Context*. ACL 2019, §3.3. <https://arxiv.org/abs/1901.02860>
# - kimiyoung/transformer-xl：`pytorch/mem_transformer.py`（`PositionalEmbedding`、
#   `RelPartialLearnableMultiHeadAttn`、`_rel_shift`）。<https://github.com/kimiyoung/transformer-xl>
# - Huang, C.-Z. A. et al. (2018). *Music Transformer*. ICLR 2019, §3.4.
#   <https://arxiv.org/abs/1809.04281>（スキューイング）
# - Yang, Z. et al. (2019). *XLNet: Generalized Autoregressive Pretraining for Language
#   Understanding*. NeurIPS 2019. <https://arxiv.org/abs/1906.08237>
#   （コード：<https://github.com/zihangdai/xlnet> の `modeling.py`）
# - labml.ai：*Relative multi-headed attention (Transformer-XL)*。
#   <https://nn.labml.ai/transformers/xl/relative_mha.html>
#   （コード：<https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/labml_nn/transformers/xl/relative_mha.py>）
