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
# # Learned absolute embeddings and scaled sinusoids
#
# The sinusoidal encoding, derived in the chapter *Sinusoidal positional encoding*,
# is a formula: nothing in it is trained. The
# simplest alternative is to give every position its own vector and let training
# choose it. Convolutional sequence-to-sequence models (Gehring et al. 2017) did so,
# and so do BERT and GPT-2: a table with one trained row per position, added to the
# token embeddings. Vaswani et al. (2017, Table 3, row (E)) tried such a table in
# place of their sinusoids and found nearly identical results.
#
# This chapter looks at what the table costs in parameters, what it cannot do (a
# position past its last row), what a small model actually writes into it, and at a
# middle way from "Transformer Quality in Linear Time" (Hua et al. 2022): fixed
# sinusoids with one learned scalar in front. Along the way it measures why the size
# of the positional signal matters, and how the padding row of a table works.

# %% [markdown] lang="ja"
# # 学習型位置埋め込みとスケール付き正弦波
#
# 「正弦波位置エンコーディング」の章で導いた正弦波位置エンコーディングは式で決まっていて、学習するものはありません。
# いちばん素直な代案は、位置ごとに専用のベクトルを用意し、その中身を学習に任せることです。
# 畳み込み系列変換モデル (Gehring ら 2017) がこの方法を使い、BERT と GPT-2 も同じです。
# 位置ごとに学習される行を 1 つずつ持つ表を作り、その行をトークンの埋め込みに足します。
# Vaswani ら (2017, 表 3 の (E) 行) も正弦波の代わりにこのような表を試し、
# ほぼ同じ結果になったと報告しています。
#
# この章では、表がパラメータをどれだけ使うか、表にできないこと（最後の行より先の位置）、
# 小さなモデルが実際に表へ何を書き込むかを調べます。
# さらに「Transformer Quality in Linear Time」(Hua ら 2022) の中間的な方法、
# つまり固定の正弦波に学習可能なスカラーを 1 つだけ掛ける方法を扱います。
# その途中で、位置の信号の大きさがなぜ重要なのかを測り、表のパディング用の行の仕組みも確かめます。

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

from posenc import LearnedPositionalEmbedding, SinusoidalEmbedding, attention, sinusoidal
from posenc.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## A table with one row per position
#
# A learned positional embedding is a matrix $E$ with $N$ rows and $d$ columns,
# where $N$ is the number of positions the model supports (its context length) and
# $d$ the model width. Position $p$ gets row $p$, and the layer input is the sum
# $$x_p = e(t_p) + E_p$$
# of the token embedding $e(t_p)$ and that row. Looking up a row is the same as
# multiplying a one-hot vector by the table, $E_p = \mathbf{1}_p^\top E$, so the table is an
# ordinary weight matrix that training adjusts like any other.
#
# `posenc.LearnedPositionalEmbedding(N, d)` holds such a table. As in BERT and in
# Hugging Face's GPT-2, its entries start from a normal distribution with standard
# deviation $\sigma = 0.02$. The cell below checks the lookup against the one-hot
# product and the spread of a fresh table.

# %% [markdown] lang="ja"
# ## 位置ごとに 1 行を持つ表
#
# 学習型位置埋め込みは、$N$ 行 $d$ 列の行列 $E$ です。
# $N$ はモデルが扱える位置の数（コンテキスト長）、$d$ はモデルの幅です。
# 位置 $p$ には行 $p$ が割り当てられ、層への入力は、トークンの埋め込み $e(t_p)$ とその行の和です。
# $$x_p = e(t_p) + E_p$$
# 行を引くことは、one-hot ベクトルに表を掛けることと同じです。$E_p = \mathbf{1}_p^\top E$ です。
# つまり表は普通の重み行列で、学習はほかの重みと同じようにこれを調整します。
#
# `posenc.LearnedPositionalEmbedding(N, d)` がこの表を持ちます。
# BERT や Hugging Face の GPT-2 と同じく、成分の初期値は標準偏差 $\sigma = 0.02$ の正規分布から引きます。
# 次のセルでは、行の参照を one-hot ベクトルとの積と比べ、作りたての表のばらつきを確かめます。

# %%
N, d = 1024, 768
table = LearnedPositionalEmbedding(N, d)
positions = torch.tensor([0, 1, 5, 1023])
one_hot = nn.functional.one_hot(positions, N).float()  # [4, N], the vectors 1_p
torch.testing.assert_close(table(positions), one_hot @ table.weight)  # E_p = 1_p^T E
assert torch.equal(table(positions), table.weight[positions])  # a plain row lookup

std = table.weight.std().item()
assert abs(std - 0.02) < 0.0002
print(f"standard deviation of a fresh {N} x {d} table: {std:.4f}", end="")

# %% [markdown] lang="en"
# ## What the table costs
#
# The table has $N d$ parameters. BERT-base supports $N = 512$ positions at width
# $d = 768$; GPT-2 small supports $N = 1024$ at the same width (its table is called
# `wpe`). The sinusoidal encoding costs nothing: `posenc.SinusoidalEmbedding` stores
# its table as a buffer computed from the formula, not as a parameter.
#
# Against the whole model the table is small. BERT's paper gives BERT-base as 110M
# parameters; GPT-2's paper gives its small model as 117M, a figure that OpenAI's
# repository later corrected to 124M. The cell below builds both models' shapes
# from torch modules on the `meta` device (shapes only, no memory), counts their
# parameters, and prints the table's share.

# %% [markdown] lang="ja"
# ## 表のコスト
#
# 表のパラメータ数は $N d$ です。BERT-base は幅 $d = 768$ で $N = 512$ 個の位置を扱います。
# GPT-2 small は同じ幅で $N = 1024$ 個です（この表は `wpe` という名前です）。
# 正弦波位置エンコーディングにはパラメータがありません。
# `posenc.SinusoidalEmbedding` は表を式から計算したバッファとして持ち、パラメータにはしません。
#
# モデル全体と比べると、表は小さなものです。BERT の論文は BERT-base のパラメータ数を 110M としています。
# GPT-2 の論文は最小のモデルを 117M としていますが、OpenAI のリポジトリが後に 124M と訂正しました。
# 次のセルでは、両モデルと同じ形のモデルを torch のモジュールで `meta` デバイス上に組み立て
# （形だけでメモリは使いません）、パラメータを数えて、表が占める割合を表示します。


# %%
def n_params(module):
    return sum(p.numel() for p in module.parameters())


def blocks(n_layers=12, d=768, n_heads=12, d_ff=3072):
    """n_layers Transformer layers: Q, K, V, output projections, MLP, two LayerNorms."""
    return nn.ModuleList(nn.TransformerEncoderLayer(d, n_heads, d_ff) for _ in range(n_layers))


with torch.device("meta"):
    bert_pos = LearnedPositionalEmbedding(512, 768)
    bert = nn.ModuleList(
        [
            nn.Embedding(30522, 768),  # word pieces
            bert_pos,
            nn.Embedding(2, 768),  # segment A / B
            nn.LayerNorm(768),
            blocks(),
            nn.Linear(768, 768),  # pooler
        ]
    )
    gpt2_wpe = LearnedPositionalEmbedding(1024, 768)
    gpt2 = nn.ModuleList(
        [nn.Embedding(50257, 768), gpt2_wpe, blocks(), nn.LayerNorm(768)]  # output tied to wte
    )

assert n_params(bert_pos) == 512 * 768 == 393_216
assert n_params(gpt2_wpe) == 1024 * 768 == 786_432
assert n_params(SinusoidalEmbedding(1024, 768)) == 0
assert abs(n_params(bert) - 110e6) < 1e6  # "110M" (Devlin et al. 2019)
assert round(n_params(gpt2) / 1e6) == 124  # "124M" (openai/gpt-2 README)
lines = []
for name, pos, model in [("BERT-base", bert_pos, bert), ("GPT-2 small", gpt2_wpe, gpt2)]:
    share = n_params(pos) / n_params(model)
    lines.append(
        f"{name:11s}: table {n_params(pos):,} of {n_params(model):,} parameters ({share:.2%})"
    )
lines.append(f"sinusoid   : {n_params(SinusoidalEmbedding(1024, 768))} parameters")
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# Less than one percent in both. The cost of a learned table is not its size: it is
# what the next section shows.

# %% [markdown] lang="ja"
# どちらも 1% 未満です。学習型の表の本当のコストは大きさではありません。それは次の節で分かります。

# %% [markdown] lang="en"
# ## Past the last row
#
# A table has $N$ rows and nothing more. Position $N$ has no row, and no rule says
# what it should be: a learned table cannot extrapolate. `posenc` raises an
# `IndexError` that names the limit. (Plain `nn.Embedding` also raises on the CPU,
# with the message "index out of range in self"; on a GPU it fails with a device-side
# assertion.) BERT can read at most 512 tokens and GPT-2 at most 1024 for this reason.
#
# The sinusoid is a function, defined at every position: `sinusoidal` computes
# $PE(512)$ or $PE(10^6)$ as readily as $PE(0)$, each of the same norm. (Whether a model
# trained on short sequences makes good use of those far positions is a different
# question, the subject of later chapters, *Which encodings extrapolate?* in
# particular.) A `SinusoidalEmbedding`, being a table,
# does have a last row, but it can be rebuilt with more rows at no cost, since
# nothing in it was trained.

# %% [markdown] lang="ja"
# ## 最後の行より先
#
# 表には $N$ 行しかありません。位置 $N$ には行がなく、それをどう決めるかの規則もありません。
# 学習型の表は外挿できないのです。
# `posenc` は上限を示した `IndexError` を送出します。
# （素の `nn.Embedding` も CPU では「index out of range in self」というメッセージで例外を出します。
# GPU ではデバイス側のアサーションで失敗します。）
# BERT が最大 512 トークン、GPT-2 が最大 1024 トークンしか読めないのはこのためです。
#
# 正弦波は関数なので、どの位置でも定義されています。
# `sinusoidal` は $PE(0)$ と同じように $PE(512)$ も $PE(10^6)$ も計算し、ノルムもすべて同じです。
# （短い系列で学習したモデルがその遠い位置をうまく使えるかは別の問題で、
# 後の章、特に「どの位置エンコーディングが外挿できるか」の章で扱います。）
# `SinusoidalEmbedding` は表なので最後の行がありますが、学習したものが何もないので、
# 行を増やして作り直せば済みます。

# %%
bert_table = LearnedPositionalEmbedding(512, 768)
bert_table(torch.arange(512))  # positions 0..511: fine
lines = []
try:
    bert_table(torch.arange(513))  # one position too many
except IndexError as err:
    lines.append(f"posenc: IndexError: {err}")
    assert "512" in str(err)
else:
    raise AssertionError("position 512 must not have a row")

try:
    nn.Embedding(512, 768)(torch.tensor([512]))
except IndexError as err:
    lines.append(f"nn.Embedding: IndexError: {err}")
else:
    raise AssertionError("nn.Embedding raises too")

far = sinusoidal(torch.tensor([0, 512, 10**6]), 768)  # a function: any position
torch.testing.assert_close(far.norm(dim=-1), torch.full((3,), math.sqrt(384)))
sin_table = SinusoidalEmbedding(512, 768)
try:
    sin_table(torch.tensor([512]))
except IndexError:
    pass
else:
    raise AssertionError("a SinusoidalEmbedding is a table with a last row too")
longer = SinusoidalEmbedding(2048, 768)  # rebuilt longer: rows 0..511 are unchanged
assert torch.equal(longer(torch.arange(512)), sin_table(torch.arange(512)))
lines.append(
    "norms of PE(0), PE(512), PE(10^6): " + ", ".join(f"{x:.4f}" for x in far.norm(dim=-1))
)
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# ## Training a table on a toy task
#
# What does training write into the table? To see it on a CPU in a few seconds, take a
# task that cannot be solved without absolute positions: **reverse a sequence**. The
# input is $T = 16$ random tokens out of $V = 10$; the target at position $p$ is the
# input token at position $T - 1 - p$. Every token appears in the input, so the only
# question is where to look, and that depends on $p$ alone.
#
# The model is as small as it can be: token embedding plus positional embedding
# (width $d = 32$), one attention layer through `posenc.attention` with a residual
# connection, and a linear readout to the $V$ tokens. The learned table gets $2T = 32$
# rows although training only ever uses the first $T$: that will show something
# about the rows a model never sees. Training uses Adam with a learning rate of
# $0.01$ for the steps $0$ to $300$, each on $64$ fresh sequences, in float64 on one
# thread, so that the printed losses are the same on every run.

# %% [markdown] lang="ja"
# ## 小さな課題で表を学習する
#
# 学習は表に何を書き込むのでしょうか。CPU で数秒のうちに確かめるため、
# 絶対位置なしでは解けない課題を使います。**系列の反転**です。
# 入力は $V = 10$ 種類のトークンから無作為に選んだ $T = 16$ 個で、
# 位置 $p$ の正解は入力の位置 $T - 1 - p$ のトークンです。
# すべてのトークンは入力の中にあるので、問題はどこを見るかだけで、それは $p$ だけで決まります。
#
# モデルはできるだけ小さくします。トークンの埋め込みと位置埋め込み（幅 $d = 32$）を足し、
# `posenc.attention` による 1 層のアテンションを残差接続付きで通し、
# 線形層で $V$ 種類のトークンに読み出します。
# 学習型の表には $2T = 32$ 行を与えますが、学習で使うのは先頭の $T$ 行だけです。
# これで、モデルが一度も見ない行について分かることがあります。
# 学習には学習率 $0.01$ の Adam を使い、ステップ $0$ から $300$ まで、毎回新しい $64$ 系列で学習します。
# 表示する損失が毎回同じになるよう、float64 と 1 スレッドで計算します。

# %%
torch.set_num_threads(1)  # the same sums in the same order on every run
T, V, d = 16, 10, 32


class Reverser(nn.Module):
    """Token + position embedding, one attention layer with a residual, a linear readout."""

    def __init__(self, position_embedding):
        super().__init__()
        self.tok = nn.Embedding(V, d)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = position_embedding
        self.w_qkv = nn.Linear(d, 3 * d, bias=False)
        self.readout = nn.Linear(d, V)

    def qkv(self, tokens):  # tokens: [b, T] -> q, k, v: [b, T, d] each
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[-1]))  # [b, T, d]
        return x, *self.w_qkv(x).chunk(3, dim=-1)

    def forward(self, tokens):  # [b, T] -> logits [b, T, V]
        x, q, k, v = self.qkv(tokens)
        return self.readout(x + attention(q, k, v))


def batch(generator, size=64):
    tokens = torch.randint(V, (size, T), generator=generator)
    return tokens, tokens.flip(-1)  # target at p: the token at T - 1 - p


def train(model, steps=300, report=(0, 50, 100, 150, 200, 300)):
    generator = torch.Generator().manual_seed(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    log = [f"ln {V} = {math.log(V):.4f}"]
    for step in range(steps + 1):
        tokens, target = batch(generator)
        loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), target.flatten())
        if step in report:
            log.append(f"step {step:3d}: loss {loss.item():.4f}")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    tokens, target = batch(torch.Generator().manual_seed(2), size=1000)
    with torch.no_grad():
        accuracy = (model(tokens).argmax(-1) == target).double().mean().item()
    log.append(f"accuracy on 1000 new sequences: {accuracy:.3f}")
    return accuracy, log


torch.manual_seed(0)
learned = Reverser(LearnedPositionalEmbedding(2 * T, d)).double()
before = learned.pos.weight.detach().clone()
accuracy, log = train(learned)
assert accuracy == 1.0
print("\n".join(log), end="")

# %% [markdown] lang="en"
# The loss starts near $\ln 10 \approx 2.3026$, the loss of a uniform guess among ten
# tokens, and falls to 0.0000 (to four decimals): every token of every new sequence
# is placed correctly. To see how, feed the identity matrix as the values: the
# attention output is then the attention matrix itself,
# $\mathrm{softmax}(q k^\top / \sqrt{d})\, I$. In each of 256 random sequences, every
# query $p$ puts its largest weight on the key $T - 1 - p$, and on average almost all of
# it (the smallest average over $p$ is printed below). The positions, not the tokens,
# decide where each query looks.

# %% [markdown] lang="ja"
# 損失は、10 種類のトークンから等確率で当てずっぽうに選んだときの値 $\ln 10 \approx 2.3026$ の近くから始まり、
# （小数点以下 4 桁で）0.0000 まで下がります。新しい系列のどのトークンも正しい位置に置けています。
# どうやって解いているのかを見るため、バリューとして単位行列を与えます。
# するとアテンションの出力は、アテンション行列そのもの $\mathrm{softmax}(q k^\top / \sqrt{d})\, I$ になります。
# 無作為な 256 系列のどれでも、各クエリ $p$ は最大の重みをキー $T - 1 - p$ に置いています。
# 平均すると、重みのほとんどがそこに集まります（$p$ についての平均の最小値を下に表示します）。
# 各クエリがどこを見るかを決めているのは、トークンではなく位置です。

# %%
tokens, _ = batch(torch.Generator().manual_seed(3), size=256)
with torch.no_grad():
    _, q, k, _ = learned.qkv(tokens)
    identity = torch.eye(T, dtype=torch.float64)
    per_sequence = attention(q, k, identity.expand(len(tokens), T, T))  # [b, p, key]
    by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
torch.testing.assert_close(per_sequence, by_hand)
mirror = T - 1 - torch.arange(T)
assert torch.equal(per_sequence.argmax(-1), mirror.expand(len(tokens), T))  # every sequence
weights = per_sequence.mean(0)  # [p, key], averaged over the sequences
on_mirror = weights[torch.arange(T), mirror]  # average weight of key T - 1 - p
assert on_mirror.min() > 0.9
print(f"weight on key T-1-p, smallest over p: {on_mirror.min():.3f}", end="")

# %% [markdown] lang="en"
# ## What the trained table looks like
#
# Compare positions by the cosine of the angle between their vectors,
# $$\cos\angle(E_p, E_q) = \frac{E_p \cdot E_q}{\lVert E_p \rVert\, \lVert E_q \rVert}$$
# and do the same for the sinusoid. The chapter *Sinusoidal positional encoding*
# showed that $PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$
# and that every $PE(p)$ has the same norm, so for the sinusoid this matrix depends
# only on $p - q$: it is largest on the diagonal and falls off, with ripples, away
# from it. Neighbouring positions look alike by construction.
#
# The learned table has no such structure. Its rows began as independent random
# vectors, almost orthogonal to each other, and training moved them only as far as
# the task required. The heatmaps below show the two matrices for the $T$ trained
# positions, and the cell prints the mean cosine for neighbours ($|p - q| = 1$) and
# for distant pairs ($|p - q| \ge T/2$). In the learned table, neighbours are no more
# alike than distant positions; here they are even pushed apart (-0.273 against -0.163,
# while the sinusoid gives +0.957 against +0.651). Reversal never asks
# for positions $p$ and $p+1$ to behave alike, so nothing makes them alike.
# The sinusoid has this locality built in; a learned table has it only if the
# training data rewards it.

# %% [markdown] lang="ja"
# ## 学習後の表の姿
#
# 位置どうしを、ベクトルのなす角の余弦で比べます。
# $$\cos\angle(E_p, E_q) = \frac{E_p \cdot E_q}{\lVert E_p \rVert\, \lVert E_q \rVert}$$
# 正弦波についても同じものを計算します。
# 「正弦波位置エンコーディング」の章では、$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$ であること、
# そしてどの $PE(p)$ もノルムが等しいことを示しました。
# したがって正弦波のこの行列は $p - q$ だけで決まり、対角線上で最大になり、離れるにつれて波打ちながら下がります。
# 隣り合う位置は、作りからして似ています。
#
# 学習型の表にはそのような構造はありません。
# 表の行は互いにほぼ直交する独立な乱数ベクトルから始まり、学習は課題に必要な分だけそれを動かしました。
# 下のヒートマップは、学習に使った $T$ 個の位置について 2 つの行列を並べたものです。
# セルでは、隣どうし ($|p - q| = 1$) と遠く離れた組 ($|p - q| \ge T/2$) の余弦の平均を表示します。
# 学習型の表では、隣どうしが遠い組より似ているということはありません。この例ではむしろ遠ざけられています
# （-0.273 に対して -0.163。正弦波では +0.957 に対して +0.651 です）。
# 反転の課題は、位置 $p$ と $p+1$ が似た振る舞いをすることを一度も求めません。だから似る理由がないのです。
# 正弦波にはこの局所性が最初から組み込まれています。学習型の表がそれを持つのは、学習データがそれを有利にするときだけです。


# %% alt={"en": ["Cosine similarity between positions p and q, 16 × 16 heatmaps. Learned table (left): 1 on the diagonal, a random patchwork elsewhere, neighbours not alike. Sinusoid (right): highest on the diagonal and fading smoothly away from it."], "ja": ["位置 p と q のコサイン類似度を示す 16 × 16 のヒートマップ。左の学習型位置埋め込みは対角線だけが 1 で、ほかはばらばらのモザイクになり、隣どうしも似ていません。右の正弦波は対角線で最大となり、離れるにつれてなめらかに下がります。"]}
def cosine_matrix(rows):  # [T, d] -> [T, T], cos of the angle between rows p and q
    unit = rows / rows.norm(dim=-1, keepdim=True)
    return unit @ unit.T


def near_far(c):
    gap = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()
    return c[gap == 1].mean().item(), c[gap >= T // 2].mean().item()


after = learned.pos.weight.detach()
cos_learned = cosine_matrix(after[:T])
pe = sinusoidal(torch.arange(T), d, dtype=torch.float64)
cos_sin = cosine_matrix(pe)
torch.testing.assert_close(cos_sin, (pe @ pe.T) / (d / 2))  # every norm is sqrt(d/2)
torch.testing.assert_close(cos_sin[1:, 1:], cos_sin[:-1, :-1])  # a function of p - q

near_l, far_l = near_far(cos_learned)
near_s, far_s = near_far(cos_sin)
assert near_s > far_s + 0.3  # the sinusoid: neighbours alike
assert near_l < far_l and near_l < 0  # the learned table: not; here pushed apart
print(
    f"learned  : neighbours {near_l:+.3f}, distant {far_l:+.3f}\n"
    f"sinusoid : neighbours {near_s:+.3f}, distant {far_s:+.3f}",
    end="",
)

fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.2), sharey=True)
for ax, c, title in [
    (axes[0], cos_learned, r"$\cos\angle(E_p, E_q)$"),
    (axes[1], cos_sin, r"$\cos\angle(PE(p), PE(q))$"),
]:
    im = ax.imshow(c, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("$q$")
    ax.grid(False)
axes[0].set_ylabel("$p$")
fig.colorbar(im, ax=axes, shrink=0.9)
plt.show()

# %% [markdown] lang="en"
# Training did change the table a great deal: the mean norm of a trained row grew
# from about $\sigma \sqrt{d} = 0.02\sqrt{32} \approx 0.113$ to 1.581. The
# rows $T$ to $2T - 1$, which no training sequence reached, are another story: they
# received no gradient at any step, so Adam never moved them, and they are still
# exactly the random vectors they started as. This is the second limit of a learned
# table. Even inside the table, a position is only as good as the training sequences
# that were long enough to reach it; a model trained on short sequences holds noise
# in its later rows.

# %% [markdown] lang="ja"
# 学習は表を大きく変えました。学習した行のノルムの平均は、
# 初期値のおよそ $\sigma \sqrt{d} = 0.02\sqrt{32} \approx 0.113$ から 1.581 まで大きくなりました。
# 一方、行 $T$ から $2T - 1$ までは、どの学習系列も届かなかった行です。
# これらはどのステップでも勾配を受け取らなかったので、Adam は一度も動かしていません。
# 今も、初期化したときの乱数ベクトルのままです。
# これが学習型の表の 2 つ目の限界です。表の中にある位置であっても、
# その位置に届くだけの長さの学習系列があったときにしか意味のある行になりません。
# 短い系列だけで学習したモデルの後ろの行には、ノイズが入っているだけです。

# %%
norm_before = before[:T].norm(dim=-1).mean().item()
norm_after = after[:T].norm(dim=-1).mean().item()
assert abs(0.02 * math.sqrt(32) - 0.113) < 5e-4
assert norm_after > 10 * norm_before
assert torch.equal(after[T:], before[T:])  # never-used rows: bit for bit unchanged
print(f"mean norm of rows 0..{T - 1}: {norm_before:.3f} before, {norm_after:.3f} after training")
print(f"rows {T}..{2 * T - 1} unchanged: {torch.equal(after[T:], before[T:])}", end="")

# %% [markdown] lang="en"
# ## How loud is the positional signal?
#
# The input of the first layer is a sum, token embedding plus positional vector, and
# a sum is only informative if neither term drowns the other. So compare their
# norms.
#
# **The sinusoid.** Each pair of entries contributes $\sin^2(\omega_i p) + \cos^2(\omega_i p) = 1$
# to the squared norm, and there are $d/2$ pairs, so for every position
# $$\lVert PE(p) \rVert^2 = \sum_{i=0}^{d/2-1}\big(\sin^2(\omega_i p) + \cos^2(\omega_i p)\big) = \frac{d}{2}, \qquad \lVert PE(p) \rVert = \sqrt{d/2}$$
# exactly, which is $\sqrt{384} \approx 19.5959$ for $d = 768$.
#
# **A token embedding** initialised with independent entries of standard deviation
# $\sigma$ has $\mathbb{E}\,\lVert e \rVert^2 = d \sigma^2$, and for large $d$ the norm
# concentrates around $\sigma\sqrt{d}$ (the relative spread of $\lVert e \rVert$ is about
# $1/\sqrt{2d}$). With BERT's $\sigma = 0.02$ that is $0.02\sqrt{768} \approx 0.5543$.
#
# Added raw, the sinusoid would be 35.37 times louder than the tokens (measured below).
# Two fixes are in use:
#
# - Vaswani et al. (2017, §3.4) multiply the token embeddings by $\sqrt{d}$.
# - Hua et al. (2022) multiply the sinusoid by a learned scalar initialised to
#   $d^{-1/2}$, which brings its norm to $\sqrt{d/2} \cdot d^{-1/2} = 1/\sqrt{2} \approx 0.7071$.
#
# Both change the ratio by the same factor $\sqrt{d}$, so they give the same ratio; they
# differ in the overall size and in that the second is learned. The cell below
# measures all of it.

# %% [markdown] lang="ja"
# ## 位置の信号はどれくらい大きいか
#
# 最初の層への入力は、トークンの埋め込みと位置のベクトルの和です。
# 和が意味を持つのは、どちらの項も相手をかき消さないときだけです。そこで 2 つのノルムを比べます。
#
# **正弦波。** 成分のペアはそれぞれ、ノルムの 2 乗に $\sin^2(\omega_i p) + \cos^2(\omega_i p) = 1$ を寄与します。
# ペアは $d/2$ 組あるので、どの位置でも次が厳密に成り立ちます。
# $$\lVert PE(p) \rVert^2 = \sum_{i=0}^{d/2-1}\big(\sin^2(\omega_i p) + \cos^2(\omega_i p)\big) = \frac{d}{2}, \qquad \lVert PE(p) \rVert = \sqrt{d/2}$$
# $d = 768$ なら $\sqrt{384} \approx 19.5959$ です。
#
# **トークンの埋め込み**の成分を、標準偏差 $\sigma$ の独立な乱数で初期化すると、
# $\mathbb{E}\,\lVert e \rVert^2 = d \sigma^2$ になります。
# $d$ が大きければノルムは $\sigma\sqrt{d}$ の近くに集中します（$\lVert e \rVert$ の相対的なばらつきはおよそ $1/\sqrt{2d}$ です）。
# BERT の $\sigma = 0.02$ なら $0.02\sqrt{768} \approx 0.5543$ です。
#
# そのまま足すと、正弦波はトークンの 35.37 倍も大きくなってしまいます（下で測ります）。使われている対策は 2 つです。
#
# - Vaswani ら (2017, §3.4) は、トークンの埋め込みに $\sqrt{d}$ を掛けます。
# - Hua ら (2022) は、$d^{-1/2}$ で初期化した学習可能なスカラーを正弦波に掛けます。
#   するとノルムは $\sqrt{d/2} \cdot d^{-1/2} = 1/\sqrt{2} \approx 0.7071$ になります。
#
# どちらも比を同じ $\sqrt{d}$ 倍だけ変えるので、比は同じになります。
# 違うのは全体の大きさと、後者は学習されるという点です。次のセルですべてを測ります。

# %%
d = 768
pe = sinusoidal(torch.arange(4096), d, dtype=torch.float64)
torch.testing.assert_close(
    pe.norm(dim=-1), torch.full((4096,), math.sqrt(d / 2), dtype=torch.float64)
)

sigma = 0.02
tokens = nn.Embedding(30522, d)  # BERT's vocabulary size
nn.init.normal_(tokens.weight, std=sigma)
token_norms = tokens.weight.detach().norm(dim=-1)
torch.testing.assert_close(token_norms.mean().item(), sigma * math.sqrt(d), rtol=2e-3, atol=0)
spread = (token_norms.std() / token_norms.mean()).item()
assert abs(spread - 1 / math.sqrt(2 * d)) < 0.002  # relative spread about 1/sqrt(2d)

pe_norm, token_norm = math.sqrt(d / 2), token_norms.mean().item()
scaled_pe = SinusoidalEmbedding(4096, d, learnable_scale=True)
hua_norm = scaled_pe(torch.arange(4096)).norm(dim=-1)
torch.testing.assert_close(hua_norm, torch.full((4096,), 2**-0.5))  # sqrt(d/2) * d^(-1/2)
hua_norm = hua_norm.mean().item()
vaswani_norm = token_norm * math.sqrt(d)
assert 30 < pe_norm / token_norm < 40
torch.testing.assert_close(pe_norm / vaswani_norm, hua_norm / token_norm, rtol=1e-6, atol=0)
rows_out = [
    ("|PE(p)| = sqrt(d/2)", f"{pe_norm:.4f}"),
    ("|e|, sigma = 0.02 (mean)", f"{token_norm:.4f}  (sigma sqrt(d) = {sigma * math.sqrt(d):.4f})"),
    ("raw sinusoid / token", f"{pe_norm / token_norm:.2f}"),
    ("Vaswani: sqrt(d) |e|", f"{vaswani_norm:.4f}, ratio {pe_norm / vaswani_norm:.3f}"),
    ("Hua: d^(-1/2) |PE(p)|", f"{hua_norm:.4f}, ratio {hua_norm / token_norm:.3f}"),
]
print("\n".join(f"{name:25s}: {value}" for name, value in rows_out), end="")

# %% [markdown] lang="en"
# ## The learned scale of Hua et al.
#
# `SinusoidalEmbedding(N, d, learnable_scale=True)` returns $\alpha\, PE(p)$ with one
# scalar parameter $\alpha$, initialised to $d^{-1/2}$ (Hua et al. 2022, appendix,
# pseudocode of the scaled sinusoidal embedding). The sinusoid table stays fixed: it
# is a buffer, outside `parameters()`, so $\alpha$ is the only tensor that receives a
# gradient. By the chain rule its gradient is
# $$\frac{\partial L}{\partial \alpha} = \sum_{p} \frac{\partial L}{\partial y_p} \cdot PE(p)$$
# where $y_p = \alpha\, PE(p)$ is the module's output at position $p$. The cell below
# checks the initial value, that nothing else is trainable, and this gradient.

# %% [markdown] lang="ja"
# ## Hua らの学習可能なスケール
#
# `SinusoidalEmbedding(N, d, learnable_scale=True)` は $\alpha\, PE(p)$ を返します。
# スカラーのパラメータ $\alpha$ を 1 つだけ持ち、その初期値は $d^{-1/2}$ です
# （Hua ら 2022 の付録にある、スケール付き正弦波埋め込みの疑似コード）。
# 正弦波の表は固定のままです。表はバッファで `parameters()` に含まれないので、
# 勾配を受け取るテンソルは $\alpha$ だけです。連鎖律から、その勾配は次のとおりです。
# $$\frac{\partial L}{\partial \alpha} = \sum_{p} \frac{\partial L}{\partial y_p} \cdot PE(p)$$
# ここで $y_p = \alpha\, PE(p)$ は位置 $p$ でのモジュールの出力です。
# 次のセルでは、初期値、ほかに学習されるものがないこと、そしてこの勾配を確かめます。

# %%
d = 32
scaled = SinusoidalEmbedding(64, d, learnable_scale=True)
params = dict(scaled.named_parameters())
assert list(params) == ["scale"] and params["scale"].shape == ()
torch.testing.assert_close(scaled.scale.detach(), torch.tensor(d**-0.5))
assert not scaled.table.requires_grad and "table" not in scaled.state_dict()

pos = torch.arange(10)
y = scaled(pos)
upstream = torch.randn_like(y)  # dL/dy for L = sum(upstream * y)
(upstream * y).sum().backward()
expected = (upstream * sinusoidal(pos, d)).sum()  # sum_p dL/dy_p . PE(p)
torch.testing.assert_close(scaled.scale.grad, expected)
assert scaled.table.grad is None
print(f"alpha = {scaled.scale.item():.4f} = 32^(-1/2); trainable: {list(params)}", end="")

# %% [markdown] lang="en"
# Train the reversal model of the previous sections with this module in place of
# the learned table. It has one positional parameter instead of $2T d = 1024$, and it
# solves the task too (accuracy 1.000). Along the way the scale grows from its initial
# value 0.1768 to 1.0290: the model turns the positional signal up. The heatmap of the scaled
# sinusoid would be the same as above: multiplying every vector by $\alpha > 0$ leaves
# every cosine unchanged.

# %% [markdown] lang="ja"
# これまでの節の反転モデルで、学習型の表の代わりにこのモジュールを使って学習します。
# 位置のパラメータは $2T d = 1024$ 個ではなく 1 個だけですが、このモデルも課題を解きます（正解率 1.000）。
# 学習の途中で、スケールは初期値の 0.1768 から 1.0290 まで大きくなります。
# モデルは位置の信号を大きくしたのです。
# スケール付き正弦波のヒートマップは、上の図と同じになります。
# すべてのベクトルに $\alpha > 0$ を掛けても、余弦は変わらないからです。

# %%
d = 32
torch.manual_seed(0)
scaled_model = Reverser(SinusoidalEmbedding(T, d, learnable_scale=True)).double()
alpha_0 = scaled_model.pos.scale.item()
assert n_params(scaled_model.pos) == 1 and n_params(learned.pos) == 2 * T * d == 1024
accuracy, log = train(scaled_model)
assert accuracy == 1.0

alpha = scaled_model.pos.scale.item()
rows = scaled_model.pos(torch.arange(T)).detach()
torch.testing.assert_close(
    scaled_model.pos.table, sinusoidal(torch.arange(T), d, dtype=torch.float64)
)  # fixed
torch.testing.assert_close(cosine_matrix(rows), cos_sin)  # the scale leaves every cosine alone
assert alpha > 3 * alpha_0
log.append(f"alpha: {alpha_0:.4f} at the start, {alpha:.4f} after training")
print("\n".join(log), end="")

# %% [markdown] lang="en"
# ## The padding row
#
# Batches of sequences of different lengths are filled up with padding tokens, and
# those must not pick up a positional signal, nor pass a gradient into the table.
# With `padding_idx=k`, row $k$ of the table starts at zero and is excluded from the
# gradient: for a loss $L$ that depends on the looked-up rows, the gradient of row $r$
# is the sum of the upstream gradients of the positions that looked it up, and for
# $r = k$ it is zero by decree. With $L = \sum_t \lVert E_{p_t} \rVert^2$, row $r$ looked up
# $c_r$ times gets
# $$\frac{\partial L}{\partial E_r} = 2\, c_r\, E_r \quad (r \ne k), \qquad \frac{\partial L}{\partial E_k} = 0$$
# so an optimiser step leaves the padding row at zero.
#
# fairseq and RoBERTa use this convention for their learned positions: the padding
# token's id (1 in RoBERTa) doubles as its position, and real tokens are numbered from
# $k + 1$ on. That is why RoBERTa's table has $514 = 512 + 2$ rows for 512 tokens: rows
# 0 and 1 are never a real position. `SinusoidalEmbedding(..., padding_idx=k)` also
# returns zeros at $k$. The cell below rebuilds RoBERTa's numbering for right-padded
# sequences.

# %% [markdown] lang="ja"
# ## パディング用の行
#
# 長さの違う系列をバッチにまとめるときは、足りない分をパディングのトークンで埋めます。
# パディングには位置の信号が乗ってはいけませんし、表に勾配を流してもいけません。
# `padding_idx=k` を指定すると、表の行 $k$ は 0 から始まり、勾配の計算から外されます。
# 参照した行に依存する損失 $L$ について、行 $r$ の勾配は、その行を参照した位置での上流の勾配の和です。
# ただし $r = k$ の勾配は、規則として 0 になります。
# $L = \sum_t \lVert E_{p_t} \rVert^2$ とし、行 $r$ が $c_r$ 回参照されたとすると、次のようになります。
# $$\frac{\partial L}{\partial E_r} = 2\, c_r\, E_r \quad (r \ne k), \qquad \frac{\partial L}{\partial E_k} = 0$$
# したがって、オプティマイザで 1 ステップ更新しても、パディング用の行は 0 のままです。
#
# fairseq と RoBERTa は、学習型の位置でこの方式を使います。
# パディングのトークンの ID（RoBERTa では 1）をそのまま位置としても使い、実トークンは $k + 1$ から数えます。
# RoBERTa の表が 512 トークンに対して $514 = 512 + 2$ 行あるのはこのためです。行 0 と行 1 が実トークンの位置になることはありません。
# `SinusoidalEmbedding(..., padding_idx=k)` も位置 $k$ で 0 を返します。
# 次のセルでは、右側をパディングした系列について RoBERTa の番号付けを再現します。

# %%
k = 1  # RoBERTa's padding id
emb = LearnedPositionalEmbedding(8, 4, padding_idx=k)
assert torch.equal(emb.weight[k], torch.zeros(4))
looked_up = torch.tensor([[1, 2, 3, 3], [1, 1, 2, 5]])
emb(looked_up).pow(2).sum().backward()  # L = sum_t |E_{p_t}|^2
counts = torch.bincount(looked_up.flatten(), minlength=8).float()[:, None]  # c_r
expected = 2 * counts * emb.weight.detach()
expected[k] = 0
torch.testing.assert_close(emb.weight.grad, expected)
torch.optim.SGD(emb.parameters(), lr=0.1).step()
assert torch.equal(emb.weight[k], torch.zeros(4))  # still zero after a step

padded = SinusoidalEmbedding(16, 8, padding_idx=k)
assert torch.equal(padded(torch.tensor(k)), torch.zeros(8))


def roberta_positions(token_ids, padding_idx=1):
    """fairseq's make_positions: real tokens count from padding_idx + 1, padding keeps padding_idx."""
    real = (token_ids != padding_idx).long()
    return torch.cumsum(real, dim=1) * real + padding_idx


token_ids = torch.tensor([[0, 713, 16, 2], [0, 713, 2, 1]])  # the second sequence is padded
position_ids = roberta_positions(token_ids)
roberta_pos = LearnedPositionalEmbedding(514, 8, padding_idx=1)
out = roberta_pos(position_ids)
assert torch.equal(out[1, 3], torch.zeros(8))  # the padding token gets nothing
assert roberta_pos.n_positions - k - 1 == 512  # rows for real positions
print(position_ids)

# %% [markdown] lang="en"
# ## How the libraries differ
#
# | | table rows | initialisation | padding | scale |
# |---|---|---|---|---|
# | BERT (Google's TensorFlow code) | `max_position_embeddings` = 512 | truncated normal, $\sigma = 0.02$ | none | none |
# | GPT-2 (OpenAI's TensorFlow code, `wpe`) | `n_ctx` = 1024 | normal, $\sigma = 0.01$ | none | none |
# | Hugging Face BERT, GPT-2 | 512, 1024 | normal, $\sigma = 0.02$ (`initializer_range`) | none | none |
# | fairseq, RoBERTa | 512 + padding id + 1 = 514 | normal, $\sigma = d^{-1/2}$ in fairseq's `PositionalEmbedding` | row 1 zero, positions from 2 | none |
# | x-transformers `AbsolutePositionalEmbedding` | `max_seq_len` | `nn.Embedding`'s $N(0, 1)$ | none | constant $d^{-1/2}$ |
# | x-transformers `ScaledSinusoidalEmbedding` | none (computed) | fixed sinusoid, concatenated layout | none | learned, starts at $d^{-1/2}$ |
# | `posenc.LearnedPositionalEmbedding` | `n_positions` | normal, $\sigma = 0.02$ | `padding_idx` | none |
# | `posenc.SinusoidalEmbedding` | `n_positions` | fixed sinusoid, either layout | `padding_idx` | `learnable_scale`, starts at $d^{-1/2}$ |
#
# x-transformers scales its learned table by the constant $d^{-1/2}$: with entries
# from $N(0, 1)$, that makes each row's norm about $1$, the same idea as Hua et al.'s
# scale, applied to a table. The cell below rebuilds x-transformers' scaled sinusoid
# (`torch.cat((sin, cos))` of the angles, times the scale) with `posenc` and checks the
# norm of its learned-table rows.

# %% [markdown] lang="ja"
# ## ライブラリによる違い
#
# | | 表の行数 | 初期化 | パディング | スケール |
# |---|---|---|---|---|
# | BERT（Google の TensorFlow 実装） | `max_position_embeddings` = 512 | 切断正規分布、$\sigma = 0.02$ | なし | なし |
# | GPT-2（OpenAI の TensorFlow 実装、`wpe`） | `n_ctx` = 1024 | 正規分布、$\sigma = 0.01$ | なし | なし |
# | Hugging Face の BERT、GPT-2 | 512、1024 | 正規分布、$\sigma = 0.02$（`initializer_range`） | なし | なし |
# | fairseq、RoBERTa | 512 + パディング ID + 1 = 514 | 正規分布、fairseq の `PositionalEmbedding` では $\sigma = d^{-1/2}$ | 行 1 が 0、位置は 2 から | なし |
# | x-transformers の `AbsolutePositionalEmbedding` | `max_seq_len` | `nn.Embedding` の $N(0, 1)$ | なし | 定数 $d^{-1/2}$ |
# | x-transformers の `ScaledSinusoidalEmbedding` | なし（毎回計算） | 固定の正弦波、連結配置 | なし | 学習可能、初期値 $d^{-1/2}$ |
# | `posenc.LearnedPositionalEmbedding` | `n_positions` | 正規分布、$\sigma = 0.02$ | `padding_idx` | なし |
# | `posenc.SinusoidalEmbedding` | `n_positions` | 固定の正弦波、どちらの配置も可 | `padding_idx` | `learnable_scale`、初期値 $d^{-1/2}$ |
#
# x-transformers は学習型の表に定数 $d^{-1/2}$ を掛けます。
# 成分が $N(0, 1)$ なら各行のノルムはおよそ $1$ になります。Hua らのスケールと同じ考え方を表に当てはめたものです。
# 次のセルでは、x-transformers のスケール付き正弦波（角度の `torch.cat((sin, cos))` にスケールを掛けたもの）を
# `posenc` で再現し、学習型の表の行のノルムを確かめます。

# %%
d, n = 64, 32


def x_transformers_scaled_sinusoid(positions, d, scale):
    inv_freq = 10000.0 ** (-torch.arange(n).float() / n)  # [n]
    angles = positions.float()[:, None] * inv_freq  # [s, n]
    return torch.cat((angles.sin(), angles.cos()), dim=-1) * scale  # [s, d]


ours = SinusoidalEmbedding(128, d, learnable_scale=True, layout="concat")
positions = torch.arange(128)
with torch.no_grad():
    torch.testing.assert_close(
        ours(positions), x_transformers_scaled_sinusoid(positions, d, d**-0.5)
    )

x_table = nn.Embedding(4096, d)  # N(0, 1) entries
row_norms = (x_table.weight.detach() * d**-0.5).norm(dim=-1)
assert abs(row_norms.mean().item() - 1) < 0.02
print(f"x-transformers learned table, mean row norm: {row_norms.mean():.3f}", end="")

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Train the reversal model with $T = 16$ and then call it on a sequence of length
#    $17$. What happens with the learned table, and with a `SinusoidalEmbedding` of 17
#    rows in its place? Does the sinusoidal model reverse the longer sequence?
# 2. Change the task so that neighbouring positions should behave alike, for example
#    "the target at $p$ is the most frequent token in positions $p-2$ to $p+2$". Does
#    the mean cosine of neighbours in the learned table rise above that of distant
#    pairs?
# 3. Repeat the norm comparison for GPT-2's initialisation ($\sigma = 0.02$ for tokens,
#    $0.01$ for `wpe`). Which signal is louder at the start of training, and by how
#    much?
# 4. Set `learnable_scale=True` and freeze $\alpha$ at $1$, at $d^{-1/2}$ and at
#    $d^{-1}$ (assign it and set `requires_grad_(False)`). How does the number of steps
#    the reversal model needs change?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $T = 16$ で反転モデルを学習し、長さ $17$ の系列に適用してください。
#    学習型の表ではどうなるでしょうか。代わりに 17 行の `SinusoidalEmbedding` を使うとどうでしょうか。
#    正弦波のモデルは長い系列を反転できるでしょうか。
# 2. 隣り合う位置が似た振る舞いをすべき課題に変えてください。
#    たとえば「位置 $p$ の正解は、位置 $p-2$ から $p+2$ の中で最も多いトークン」です。
#    学習型の表で、隣どうしの余弦の平均は遠い組の平均を上回るでしょうか。
# 3. GPT-2 の初期化（トークンは $\sigma = 0.02$、`wpe` は $0.01$）でノルムの比較をやり直してください。
#    学習の始めにはどちらの信号が大きく、それは何倍でしょうか。
# 4. `learnable_scale=True` にしたうえで、$\alpha$ を $1$、$d^{-1/2}$、$d^{-1}$ に固定してください
#    （値を代入し、`requires_grad_(False)` を呼びます）。
#    反転モデルが必要とするステップ数はどう変わるでしょうか。

# %% [markdown] lang="en"
# ## References
#
# - Gehring, J. et al. (2017). *Convolutional Sequence to Sequence Learning*. ICML 2017
#   (learned position embeddings). <https://arxiv.org/abs/1705.03122>
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.4, §3.5 and
#   Table 3, row (E). <https://arxiv.org/abs/1706.03762>
# - Devlin, J. et al. (2019). *BERT: Pre-training of Deep Bidirectional Transformers for
#   Language Understanding*. NAACL 2019. <https://arxiv.org/abs/1810.04805>
# - Google Research, BERT, `modeling.py`. <https://github.com/google-research/bert>
# - Radford, A. et al. (2019). *Language Models are Unsupervised Multitask Learners*.
#   <https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf>
# - OpenAI, GPT-2, `src/model.py` and the note on parameter counts in the README.
#   <https://github.com/openai/gpt-2>
# - Liu, Y. et al. (2019). *RoBERTa: A Robustly Optimized BERT Pretraining Approach*.
#   <https://arxiv.org/abs/1907.11692>
# - fairseq, `LearnedPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/learned_positional_embedding.py>
# - Wang, Y.-A. and Chen, Y.-N. (2020). *What Do Position Embeddings Learn? An Empirical
#   Study of Pre-Trained Language Model Positional Encoding*. EMNLP 2020.
#   <https://arxiv.org/abs/2010.04903>
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022 (appendix:
#   scaled sinusoidal position embedding). <https://arxiv.org/abs/2202.10447>
# - lucidrains, x-transformers, `AbsolutePositionalEmbedding` and
#   `ScaledSinusoidalEmbedding`. <https://github.com/lucidrains/x-transformers>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Gehring, J. et al. (2017). *Convolutional Sequence to Sequence Learning*. ICML 2017
#   （学習型の位置埋め込み）。<https://arxiv.org/abs/1705.03122>
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.4、§3.5、
#   表 3 の (E) 行。<https://arxiv.org/abs/1706.03762>
# - Devlin, J. et al. (2019). *BERT: Pre-training of Deep Bidirectional Transformers for
#   Language Understanding*. NAACL 2019. <https://arxiv.org/abs/1810.04805>
# - Google Research、BERT の `modeling.py`。<https://github.com/google-research/bert>
# - Radford, A. et al. (2019). *Language Models are Unsupervised Multitask Learners*.
#   <https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf>
# - OpenAI、GPT-2 の `src/model.py` と、README にあるパラメータ数についての注記。
#   <https://github.com/openai/gpt-2>
# - Liu, Y. et al. (2019). *RoBERTa: A Robustly Optimized BERT Pretraining Approach*.
#   <https://arxiv.org/abs/1907.11692>
# - fairseq、`LearnedPositionalEmbedding`。
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/learned_positional_embedding.py>
# - Wang, Y.-A. and Chen, Y.-N. (2020). *What Do Position Embeddings Learn? An Empirical
#   Study of Pre-Trained Language Model Positional Encoding*. EMNLP 2020.
#   <https://arxiv.org/abs/2010.04903>
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022
#   （付録：スケール付き正弦波位置埋め込み）。<https://arxiv.org/abs/2202.10447>
# - lucidrains、x-transformers の `AbsolutePositionalEmbedding` と
#   `ScaledSinusoidalEmbedding`。<https://github.com/lucidrains/x-transformers>
