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
# # Learned absolute embeddings and scaled sinusoids
#
# BERT and GPT-2 give each position its own trained vector: one row of a table,
# added to the token embedding. The table costs under 1% of the parameters but has
# nothing past its last row, and a toy model shows what training writes into it:
# what the task rewards, and nothing at all in rows no sequence reaches.
# Hua et al.'s middle way keeps the fixed sinusoids and learns one scalar, which
# sets how loud they are against the tokens.

# %% [markdown] lang="ja"
# # 学習型位置埋め込みとスケール付き正弦波
#
# BERT と GPT-2 は、位置ごとに学習で決まるベクトルを 1 つずつ持ちます。このベクトルは表の 1 行で、トークンの埋め込みに足されます。
# 表のパラメータは全体の 1% 未満ですが、最後の行より先には何もありません。
# トイモデルで学習させると、表に書き込まれるのは課題の役に立つ構造だけで、どの系列も届かない行には何も書き込まれないことがわかります。
# Hua らの中間的な方法は、固定の正弦波をそのまま使い、トークンの埋め込みと比べた正弦波の大きさを決めるスカラーを 1 つだけ学習します。

# %% tags=["setup"]
import inspect
import math
import warnings

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.testing import assert_close

import posenc
from posenc import LearnedPositionalEmbedding, SinusoidalEmbedding
from posenc_lab.plotting import use_site_style
from posenc_lab.reversal import NoPositions, Reverser, batch, train

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## A table with one row per position
#
# The encoding of the chapter
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb) is a formula: nothing in
# it is trained. The simplest alternative gives every position its own vector and
# lets training choose it. Convolutional sequence-to-sequence models (Gehring et
# al. 2017) did so, and so do BERT and GPT-2; Vaswani et al. (2017, Table 3, row
# (E)) tried it in place of their sinusoids and found nearly identical results.
#
# A [learned positional embedding](../docs/glossary.md#learned-positional-embedding)
# is a matrix $E$ with $N$ rows and $d$ columns: $N$ is the number of positions
# the model supports (its context length) and $d$ the model width. Position $p$
# gets row $p$, and the layer input is the sum
# $$x_p = e(t_p) + E_p$$
# of the token embedding $e(t_p)$ and that row. Looking up a row is multiplying a
# one-hot vector by the table, $E_p = \mathbf{1}_p^\top E$, so the table is an
# ordinary weight matrix that training adjusts like any other.
# `posenc.LearnedPositionalEmbedding(N, d)` holds such a table, its entries drawn
# from a normal distribution with standard deviation $\sigma = 0.02$, as in Hugging
# Face's BERT and GPT-2.

# %% [markdown] lang="ja"
# ## 位置ごとに 1 行を持つ表
#
# [「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の正弦波は式で決まっていて、学習するものはありません。
# いちばん素直な代案は、位置ごとに専用のベクトルを用意し、中身を学習に任せることです。畳み込みの seq2seq モデル（Gehring ら 2017）、BERT、GPT-2 がこの方法です。
# Vaswani ら（2017、表 3 の行 (E)）も正弦波の代わりにこの方法を試し、ほぼ同じ結果になったと報告しています。
#
# [学習型位置埋め込み](../docs/glossary.ja.md#learned-positional-embedding)は、$N$ 行 $d$ 列の行列 $E$ です。
# $N$ はモデルが扱える位置の数（コンテキスト長）、$d$ はモデルの次元数です。
# 位置 $p$ には行 $p$ が割り当てられ、層への入力はトークンの埋め込み $e(t_p)$ とその行の和です。
# $$x_p = e(t_p) + E_p$$
# 行を取り出す操作は、one-hot ベクトルに表を掛けることと同じです（$E_p = \mathbf{1}_p^\top E$）。つまり表は普通の重み行列で、ほかの重みと同じように学習で調整されます。
# `posenc.LearnedPositionalEmbedding(N, d)` がこの表を持ち、成分の初期値は Hugging Face の BERT や GPT-2 と同じく標準偏差 $\sigma = 0.02$ の正規分布から引きます。

# %%
N, d = 1024, 768
table = LearnedPositionalEmbedding(N, d)
positions = torch.tensor([0, 1, 5, 1023])
rows = table(positions)  # E_p for each p: [4, d]
print(
    f"rows {tuple(rows.shape)}, std of the table {table.weight.std():.4f}",
    end="",
)

# %% tags=["check"] summary={"en": "a lookup is the one-hot vector times the table, E_p = 1_pᵀ E; a fresh table's entries spread by 0.02", "ja": "表の参照（ルックアップ）は、one-hot ベクトルと表の積 E_p = 1_pᵀ E です。初期化直後の表の標準偏差は 0.02 です"}
one_hot = nn.functional.one_hot(positions, N).float()  # [4, N], the vectors 1_p
assert_close(rows, one_hot @ table.weight)  # E_p = 1_p^T E
assert abs(table.weight.std().item() - 0.02) < 0.0002

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how the original BERT and GPT-2 drew their tables.** The models'
# own code differs from Hugging Face's $\sigma = 0.02$. OpenAI's GPT-2 draws its
# position table `wpe` with $\sigma = 0.01$ and its token table with $0.02$.
# Google's BERT uses TensorFlow's `truncated_normal_initializer` with
# $\sigma = 0.02$, which redraws every value beyond $2\sigma$. Cutting a normal at
# $\pm a\sigma$ shrinks its spread: with $\varphi$ and $\Phi$ the standard normal
# density and distribution function,
# $$\mathrm{std} = \sigma\,\sqrt{1 - \frac{2a\,\varphi(a)}{2\Phi(a) - 1}}$$
# which for $a = 2$ is $0.8796\,\sigma$, so BERT's entries actually spread by about
# $0.0176$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：元の BERT と GPT-2 の表の初期化**
#
# 各モデルの元のコードは、Hugging Face の $\sigma = 0.02$ とは違います。
# OpenAI の GPT-2 は位置の表 `wpe` を $\sigma = 0.01$、トークンの表を $0.02$ で初期化します。
# Google の BERT は TensorFlow の `truncated_normal_initializer` を $\sigma = 0.02$ で使い、
# $2\sigma$ を超えた値はすべて引き直します。
# 正規分布を $\pm a\sigma$ で切ると、ばらつきは小さくなります。
# 標準正規分布の密度関数を $\varphi$、分布関数を $\Phi$ とすると、次のとおりです。
# $$\mathrm{std} = \sigma\,\sqrt{1 - \frac{2a\,\varphi(a)}{2\Phi(a) - 1}}$$
# $a = 2$ ではこれが $0.8796\,\sigma$ なので、BERT の成分の実際の標準偏差はおよそ $0.0176$ です。


# %% tags=["deeper", "check"] summary={"en": "the closed form gives 0.8796 σ at a = 2 and matches the spread of PyTorch's truncated sampler, about 0.0176 for σ = 0.02", "ja": "閉形式の値は a = 2 で 0.8796 σ となり、PyTorch の切断正規分布のサンプラのばらつき（σ = 0.02 でおよそ 0.0176）と一致します"}
def truncated_std(sigma, a):  # the closed form above
    density = math.exp(-(a**2) / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(a / math.sqrt(2))  # 2 Phi(a) - 1
    return sigma * math.sqrt(1 - 2 * a * density / mass)


assert f"{truncated_std(1, 2):.4f}" == "0.8796"
bert_like = torch.empty(N, d)  # BERT: redraw beyond two sigma
nn.init.trunc_normal_(bert_like, std=0.02, a=-0.04, b=0.04)
assert_close(bert_like.std().item(), truncated_std(0.02, 2), rtol=5e-3, atol=0)
assert f"{bert_like.std():.4f}" == f"{truncated_std(0.02, 2):.4f}" == "0.0176"

# %% [markdown] lang="en"
# ## What the table costs
#
# The table has $N d$ parameters: BERT-base supports $N = 512$ positions at width
# $d = 768$, GPT-2 small $N = 1024$ at the same width (its table is called `wpe`).
# The sinusoidal encoding has none: `posenc.SinusoidalEmbedding` stores its table
# as a buffer computed from the formula, not as a parameter. Against the whole
# model the table is small; built with the same shapes from torch modules (on the
# `meta` device, which holds no memory), the two models give:

# %% [markdown] lang="ja"
# ## 表のコスト
#
# 表のパラメータ数は $N d$ です。BERT-base は次元数 $d = 768$ で $N = 512$ 個の位置を扱い、
# GPT-2 small は同じ次元数で $N = 1024$ 個です（この表は `wpe` という名前です）。
# 正弦波位置エンコーディングにはパラメータがなく、`posenc.SinusoidalEmbedding` は表を式から計算したバッファとして持ちます。
# モデル全体と比べれば、表は小さなものです。torch のモジュールで同じ形状のモデルを（メモリを使わない `meta` デバイス上に）組み立てると、パラメータ数は次のとおりです。


# %% tags=["figure"]
def n_params(module):
    return sum(p.numel() for p in module.parameters())


def blocks(n_layers=12, d=768, n_heads=12, d_ff=3072):
    """Transformer layers: Q, K, V, output, MLP, two LayerNorms."""
    return nn.ModuleList(
        nn.TransformerEncoderLayer(d, n_heads, d_ff) for _ in range(n_layers)
    )


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
    gpt2 = nn.ModuleList(  # the output layer is tied to wte
        [nn.Embedding(50257, 768), gpt2_wpe, blocks(), nn.LayerNorm(768)]
    )

for name, pos, model in [
    ("BERT-base", bert_pos, bert),
    ("GPT-2 small", gpt2_wpe, gpt2),
]:
    share = n_params(pos) / n_params(model)
    print(
        f"{name:11s}: table {n_params(pos):,} of {n_params(model):,}"
        f" ({share:.2%})"
    )
print(f"sinusoid   : {n_params(SinusoidalEmbedding(1024, 768))}", end="")

# %% tags=["check"] summary={"en": "the tables hold 393,216 and 786,432 parameters; the models built here hold exactly the 109,482,240 and 124,439,808 their parts add up to (BERT-base's 110M, GPT-2 small's 124M), so the tables are under 1%; the sinusoid has none", "ja": "表のパラメータは 393,216 個と 786,432 個です。ここで組み立てたモデルのパラメータは、部品の合計どおりちょうど 109,482,240 個と 124,439,808 個で（BERT-base の 110M、GPT-2 small の 124M）、表は 1% 未満です。正弦波は 0 個です"}
assert n_params(bert_pos) == 512 * 768 == 393_216
assert n_params(gpt2_wpe) == 1024 * 768 == 786_432
assert n_params(SinusoidalEmbedding(1024, 768)) == 0
# by hand: Q, K, V and output with biases, the MLP, two LayerNorms
layer = 4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768
# word pieces, positions, segments, a LayerNorm, 12 layers, the pooler
bert_by_hand = (30522 + 512 + 2) * 768 + 2 * 768 + 12 * layer + 768 * 769
assert n_params(bert) == bert_by_hand == 109_482_240  # "110M" (Devlin et al.)
# tokens (tied to the output), positions, 12 layers, the final LayerNorm
gpt2_by_hand = (50257 + 1024) * 768 + 12 * layer + 2 * 768
assert n_params(gpt2) == gpt2_by_hand == 124_439_808  # "124M" (OpenAI)
assert n_params(gpt2_wpe) / n_params(gpt2) < 0.01

# %% [markdown] lang="en"
# The cost of a learned table lies elsewhere. A
# table has $N$ rows and nothing more. Position $N$ has no row, and no rule says
# what it should be: a learned table cannot extrapolate, which is why BERT reads
# at most 512 tokens and GPT-2 at most 1024. On the CPU `posenc` raises an
# `IndexError` that names the limit, and plain `nn.Embedding` raises one too; on a
# GPU, as their code shows, both trip a device-side assertion instead (not run here).
#
# The sinusoid is a function, defined at every position with the same norm; a
# `SinusoidalEmbedding` table can be rebuilt with more rows at no cost, since
# nothing in it was trained. (Whether a model uses far positions well is another
# question: [*Which encodings extrapolate?*](11-length-generalisation.ipynb).) A
# learned table can only be extended by hand (see [the fold below](#deeper-extending-a-learned-table-by-hand)).

# %% [markdown] lang="ja"
# 学習型の表の代償は、大きさとは別のところにあります。
# 表には $N$ 行しかなく、位置 $N$ の行も、それを決める規則もありません。学習型の表は外挿できないのです。
# BERT が最大 512 トークン、GPT-2 が最大 1024 トークンしか読めないのはこのためです。
# CPU では `posenc` は上限を示した `IndexError` を送出し、素の `nn.Embedding` も同じく `IndexError` を送出します。GPU では、コードを見るかぎり、どちらもデバイス側のアサーションで失敗します（ここでは実行していません）。
#
# 正弦波は関数なので、どの位置でも同じノルムで定義されています。`SinusoidalEmbedding` の表も、学習したものが何もないので、行を増やして作り直せば済みます。
# モデルが遠い位置をうまく使えるかは別の問題で、[「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章で扱います。
# 学習型の表は人の手で広げるしかありません（下の[「さらに詳しく」](#deeper-学習型の表を人の手で広げる)）。

# %%
bert_table = LearnedPositionalEmbedding(512, 768)
try:
    bert_table(torch.arange(513))  # one position too many
except IndexError as err:
    print(f"IndexError: {err}", end="")

# %% tags=["check"] summary={"en": "on the CPU posenc names the limit 512 and nn.Embedding raises too; the sinusoid has norm √384 at any position; rebuilt with more rows, a sinusoid table keeps its first 512", "ja": "CPU では posenc は上限 512 を示し、nn.Embedding も同じく IndexError を送出します。正弦波のノルムはどの位置でも √384 で、行を増やして作り直しても先頭 512 行は変わりません"}
bert_table(torch.arange(512))  # positions 0..511: fine
try:
    bert_table(torch.arange(513))
except IndexError as err:
    assert "512" in str(err)
else:
    raise AssertionError("position 512 must not have a row")
try:
    nn.Embedding(512, 768)(torch.tensor([512]))
except IndexError as err:
    assert "index out of range" in str(err)
else:
    raise AssertionError("nn.Embedding raises too")

far = posenc.sinusoidal(
    torch.tensor([0, 512, 10**6]), 768
)  # a function: any position
assert_close(far.norm(dim=-1), torch.full((3,), math.sqrt(384)))
sin_table = SinusoidalEmbedding(512, 768)
try:
    sin_table(torch.tensor([512]))
except IndexError:
    pass
else:
    raise AssertionError("a SinusoidalEmbedding is a table with a last row too")
longer = SinusoidalEmbedding(2048, 768)  # rebuilt longer: rows 0..511 unchanged
assert torch.equal(longer(torch.arange(512)), sin_table(torch.arange(512)))

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: extending a learned table by hand.** Longformer (Beltagy et al.
# 2020) starts its 4096 positions from RoBERTa's 512 trained rows, copied again and
# again, and ViT (Dosovitskiy et al. 2021, §3.2) interpolates its table in 2D when
# fine-tuned on larger images.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：学習型の表を人の手で広げる**
#
# Longformer（Beltagy ら 2020）は、RoBERTa の学習済みの 512 行を繰り返しコピーして 4096 個の位置の初期値にします。
# ViT（Dosovitskiy ら 2021、§3.2）は、より大きな画像でファインチューニングするときに表を 2 次元で補間します。

# %% [markdown] lang="en"
# ## Training a table on a toy task
#
# What does training write into the table? To see it on a CPU in seconds, take a
# task the model below cannot solve without positions: **reverse a sequence**. The
# input is $T = 16$ random tokens out of $V = 10$, and the target at position $p$
# is the input token at position $T - 1 - p$. Every answer is in the input, so the
# only question is where to look, and that depends on $p$ alone.
#
# The model is as small as it can be: token embedding plus positional embedding
# (width $d = 32$), one attention layer with a residual connection, and a linear
# readout to the $V$ tokens. Its learned table gets $2T = 32$ rows although
# training only ever uses the first $T$, so that we can see what becomes of rows a
# model never sees. The model `Reverser`, the task's `batch` and the training loop
# `train` are in `lab/posenc_lab/reversal.py`, shared with the
# chapter on sinusoid variants; the cell below trains it.

# %% [markdown] lang="ja"
# ## 小さな課題で表を学習する
#
# 学習は表に何を書き込むのでしょうか。CPU で数秒で確かめるため、下のモデルが位置なしでは解けない課題、**系列の反転**を使います。
# 入力は $V = 10$ 種類のトークンから選んだ $T = 16$ 個で、位置 $p$ の正解は入力の位置 $T - 1 - p$ のトークンです。
# 正解はすべて入力の中にあるので、問題はどこを見るかだけで、それは $p$ だけで決まります。
#
# モデルはできるだけ小さくします。トークンの埋め込みと位置埋め込み（次元数 $d = 32$）を足し、1 層のアテンションを残差接続付きで通し、線形層で $V$ 種類のトークンに読み出します。
# 学習型の表には $2T = 32$ 行を与えますが、学習で使うのは先頭の $T$ 行だけなので、一度も使われない行がどうなるかもわかります。
# モデル `Reverser`、課題の `batch`、学習ループ `train` は `lab/posenc_lab/reversal.py` にあり、正弦波の変種の章でも使います。下のセルでこのモデルを学習します。

# %% [markdown] lang="en"
# Without positions this model is permutation-equivariant (chapter
# [*Why attention needs positions*](00-why-positions.ipynb)): two positions that
# hold the same token get the same output, although their targets differ in
# general: if token 3 sits at two positions whose targets are 7 and 4, one answer
# serves both, so at most one is right. In a sequence, let $n(v, t)$ count the
# positions that hold token $v$ and have target $t$; the best the model can do is
# give each token its most frequent target, so its
# [accuracy](../docs/glossary.md#accuracy) on that sequence is at most
# $$\frac{1}{T}\sum_{v} \max_t\, n(v, t)$$
# which averages 0.619 over 1000 random sequences. (The bound is for this one-layer model
# without a mask; a causal mask or a relative encoding would give it positions in
# other ways.) Training with the learned table (Adam, learning rate 0.01, steps 0 to
# 300, 301 updates of 64 fresh sequences, float64) starts near
# $\ln 10 \approx 2.3026$ (a uniform guess among ten tokens) and falls to 0.0000: every token of 1000 new
# sequences is put in its place. Each query $p$ has learned to look at the key
# $T - 1 - p$.

# %% [markdown] lang="ja"
# 位置がなければ、このモデルは置換同変です（[「アテンションに位置が必要な理由」](00-why-positions.ipynb)の章）。
# 同じトークンを持つ 2 つの位置は同じ出力になりますが、その正解は一般には異なります。
# たとえばトークン 3 が 2 か所にあり、正解がそれぞれ 7 と 4 なら、答えは 1 つしか返せないので、正しいのは多くても一方だけです。
# 1 つの系列で、トークン $v$ を持ち正解が $t$ である位置の数を $n(v, t)$ とします。
# モデルにできる最善は、各トークンに最も多い正解を返すことなので、その系列での[正解率](../docs/glossary.ja.md#accuracy)は多くても
# $$\frac{1}{T}\sum_{v} \max_t\, n(v, t)$$
# です。ランダムな 1000 系列で平均すると 0.619 になります。
# この上限はマスクのないこの 1 層のモデルでのもので、因果マスクや相対位置のエンコーディングがあれば、別の方法で位置がわかります。
# 学習型の表で学習します（Adam、学習率 0.01、float64）。ステップ 0〜300 の 301 回、毎回新しい 64 系列で更新すると、損失はチャンスレベルの $\ln 10 \approx 2.3026$ の近くから 0.0000 まで下がります。
# 新しい 1000 系列のどのトークンも正しい位置に置かれます。学習の結果、各クエリ $p$ はキー $T - 1 - p$ を見るようになります。


# %%
torch.set_num_threads(1)  # the same sums in the same order on every run
T, V, d = 16, 10, 32  # posenc_lab.reversal's T, V and D

torch.manual_seed(0)
blind = Reverser(NoPositions()).double()
tokens, target = batch(torch.Generator().manual_seed(5), size=1000)
with torch.no_grad():
    out = blind(tokens)  # [b, T, V]
# ceiling: per sequence, the best single answer for each token value
pairs = nn.functional.one_hot(tokens * V + target, V * V).sum(1)  # n(v, t)
ceiling = pairs.view(-1, V, V).amax(-1).sum(-1) / T  # [b]

torch.manual_seed(0)
learned = Reverser(LearnedPositionalEmbedding(2 * T, d)).double()
before = learned.pos.weight.detach().clone()
accuracy, log, learned_losses = train(learned)
log.insert(0, f"without positions, best possible: {ceiling.mean():.3f}")
print("\n".join(log), end="")

# %% tags=["check"] summary={"en": "no positions: equal tokens, equal outputs, no sequence reversible; with the table: 301 updates, accuracy 1", "ja": "位置がなければ同じトークンは同じ出力で、どの系列も反転できません。表では 301 回の更新で正解率 1 です"}
same = tokens[:, :, None] == tokens[:, None, :]  # [b, p, q]: same token
gap = (out[:, :, None] - out[:, None, :]).abs().amax(-1)  # [b, p, q]
assert gap[same].max() < 1e-12  # same token, same output
assert ceiling.max() < 1  # none of these sequences can be reversed exactly
# the bound holds for the blind model itself, sequence by sequence
blind_accuracy = (out.argmax(-1) == target).double().mean(-1)
assert (blind_accuracy <= ceiling + 1e-12).all()
assert f"{ceiling.mean():.3f}" == "0.619"
assert accuracy == 1.0
assert len(learned_losses) == 301  # steps 0 to 300: one Adam update each

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the model, the task and the training loop.** The three pieces of
# `lab/posenc_lab/reversal.py` that this chapter and the chapter on sinusoid variants
# run, as they are:

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：モデル、課題、学習ループ**
#
# この章と正弦波の変種の章で動かす `lab/posenc_lab/reversal.py` の 3 つの部品を、そのまま示します。

# %% tags=["deeper"]
for piece in (Reverser, batch, train):
    print(inspect.getsource(piece))

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where each query looks.** To see how the model solves the task,
# feed the identity matrix as the values: the attention output is then
# the attention matrix itself, $\mathrm{softmax}(q k^\top / \sqrt{d})\, I$. In each
# of 256 random sequences, every query $p$ puts its largest weight on the key
# $T - 1 - p$, and on average almost all of it. The positions, not the tokens,
# decide where each query looks.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：各クエリはどこを見ているか**
#
# 解き方を見るため、バリューに単位行列を与えます。アテンションの出力は、アテンション行列そのもの $\mathrm{softmax}(q k^\top / \sqrt{d})\, I$ になります。
# ランダムな 256 系列のどれでも、各クエリ $p$ は最大の重みをキー $T - 1 - p$ に置き、平均すると重みのほとんどがそこに集まります。
# 各クエリがどこを見るかを決めているのは、トークンではなく位置です。

# %% tags=["deeper"]
tokens, _ = batch(torch.Generator().manual_seed(3), size=256)
with torch.no_grad():
    _, q, k, _ = learned.qkv(tokens)
    eye = torch.eye(T, dtype=torch.float64).expand(len(tokens), T, T)
    weights = posenc.attention(q, k, eye)  # the attention matrix [b, p, key]
mirror = T - 1 - torch.arange(T)
on_mirror = weights.mean(0)[torch.arange(T), mirror]  # mean weight on T-1-p
print(f"weight on key T-1-p, smallest over p: {on_mirror.min():.3f}", end="")

# %% tags=["deeper", "check"] summary={"en": "the output is softmax(qkᵀ/√d); query p weighs key T − 1 − p most, above 0.9 on average", "ja": "出力は softmax(qkᵀ/√d) です。クエリ p の重みはキー T − 1 − p で最大になり、平均で 0.9 を超えます"}
scores = q @ k.transpose(-2, -1) / math.sqrt(d)
assert_close(weights, torch.softmax(scores, dim=-1))
assert torch.equal(weights.argmax(-1), mirror.expand(len(tokens), T))
assert on_mirror.min() > 0.9

# %% [markdown] lang="en"
# ## What the trained table looks like
#
# Compare positions by the [cosine similarity](../docs/glossary.md#cosine-similarity)
# of their vectors,
# $$\cos\angle(E_p, E_q) = \frac{E_p \cdot E_q}{\lVert E_p \rVert\, \lVert E_q \rVert}$$
# and do the same for the sinusoid. Since
# $PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$ and every $PE(p)$
# has the same norm, for the sinusoid this matrix depends only on $p - q$: largest on
# the diagonal, falling away from it with ripples. Neighbouring positions are alike
# by construction.
#
# The learned table has no such structure built in. Its rows began as independent
# random vectors, nearly orthogonal (cosines of order $1/\sqrt{d} \approx 0.18$),
# and training moved them only as the task required. In this run neighbours
# ($|p - q| = 1$) are no more alike than distant pairs ($|p - q| \ge T/2$); they are
# even pushed apart. Reversal never asks positions $p$ and $p+1$ to behave alike, so
# nothing makes them alike; it asks the opposite, since query $p$ must pick key
# $T-1-p$ over its neighbours, and that needs neighbouring rows that differ.

# %% [markdown] lang="ja"
# ## 学習後の表の姿
#
# 位置どうしを、ベクトルの[コサイン類似度](../docs/glossary.ja.md#cosine-similarity)で比べます。
# $$\cos\angle(E_p, E_q) = \frac{E_p \cdot E_q}{\lVert E_p \rVert\, \lVert E_q \rVert}$$
# 正弦波についても同じものを計算します。$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$ で、どの $PE(p)$ もノルムが等しいので、
# 正弦波のこの行列は $p - q$ だけで決まります。対角線上で最大になり、離れるにつれて波打ちながら下がります。隣り合う位置は、構成上おのずと似たベクトルになります。
#
# 学習型の表には、そのような構造は組み込まれていません。行はほぼ直交する独立な乱数ベクトルから始まり（コサイン類似度は $1/\sqrt{d} \approx 0.18$ 程度）、学習は課題が求める分だけそれを動かしました。
# この実行では、隣どうし（$|p - q| = 1$）が遠く離れた組（$|p - q| \ge T/2$）より似ているということはなく、むしろ互いに離れています。
# 反転の課題では位置 $p$ と $p+1$ が似たふるまいをする必要がないので、両者を似せる力も働きません。
# むしろ逆で、クエリ $p$ は隣のキーではなくキー $T-1-p$ を選ぶ必要があり、そのためには隣どうしの行が違っていなければなりません。


# %% tags=["figure"] alt={"en": ["Cosine similarity between positions p and q, 16 × 16 heatmaps. Learned table after the reversal task (left): 1 on the diagonal, a patchwork elsewhere, neighbours not alike. Sinusoid (right): highest on the diagonal and falling away from it with ripples, for example 0.729 at distance 4 and 0.743 at distance 6."], "ja": ["位置 p と q のコサイン類似度を示す 16 × 16 のヒートマップ。左は反転の課題で学習した位置埋め込みで、対角線上は 1、それ以外はばらばらのモザイク状で、隣どうしも似ていません。右は正弦波で、対角線上で最大となり、離れるにつれて波打ちながら下がります（たとえば距離 4 で 0.729、距離 6 で 0.743）。"]}
def cosine_matrix(rows):  # [T, d] -> [T, T], cosine of rows p and q
    unit = rows / rows.norm(dim=-1, keepdim=True)
    return unit @ unit.T


def near_far(c):
    gap = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()
    return c[gap == 1].mean().item(), c[gap >= T // 2].mean().item()


after = learned.pos.weight.detach()
cos_learned = cosine_matrix(after[:T])
pe = posenc.sinusoidal(torch.arange(T), d, dtype=torch.float64)
cos_sin = cosine_matrix(pe)
near_l, far_l = near_far(cos_learned)
near_s, far_s = near_far(cos_sin)
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

# %% tags=["check"] summary={"en": "sinusoid: rippling in p − q, neighbours alike; this table: neighbours below zero and distant pairs", "ja": "正弦波は p − q の波打つ関数で、隣どうしが似ています。この表では、隣どうしのコサイン類似度が 0 を下回り、遠い組の値よりも小さくなります"}
assert_close(cos_sin, (pe @ pe.T) / (d / 2))  # every norm is sqrt(d/2)
assert_close(cos_sin[1:, 1:], cos_sin[:-1, :-1])  # a function of p - q
# with ripples: not monotone in |p - q| (0.729 at 4, 0.743 at 6)
assert cos_sin[0, 4] < cos_sin[0, 6] < cos_sin[0, 2]
assert f"{cos_sin[0, 4]:.3f} {cos_sin[0, 6]:.3f}" == "0.729 0.743"
assert near_s > far_s + 0.3  # the sinusoid: neighbours alike
assert near_l < far_l and near_l < 0  # this learned table: not; pushed apart

# %% [markdown] lang="en"
# Four more runs (seeds 1 to 4) also push neighbours apart (negative mean cosine);
# in one, neighbours end less than 0.01 above distant pairs (see [the fold below](#deeper-four-more-seeds)).
# Tables trained on language differ: in Wang & Chen's (2020) plots of this matrix
# for pretrained BERT, RoBERTa and GPT-2, neighbouring positions do have similar
# vectors; a language model's data
# reward that locality, and reversal does not. The sinusoid has locality built in;
# a learned table has it when the training data make it pay.

# %% [markdown] lang="ja"
# シード 1〜4 の 4 回でも、隣どうしのコサイン類似度の平均は負になり、隣どうしは押し離されます。遠い組の値をわずかに（0.01 未満）上回ったのは 1 回だけです（下の[「さらに詳しく」](#deeper-ほかの-4-つのシード)）。
# 言語で学習した表は違います。Wang と Chen（2020）は学習済みの BERT、RoBERTa、GPT-2 の表について同じ行列を描いており、そこでは隣り合う位置が実際に似たベクトルを持っています。
# 言語のデータでは局所性が損失の低下につながりますが、反転の課題ではそうなりません。
# 正弦波は局所性を初めから備えています。学習型の表も、学習データで局所性が役に立てば、それを身につけます。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: four more seeds.** One run is one run, so four more models are
# trained from the seeds 1 to 4. All of them solve the task; in every run the
# neighbours' mean cosine is negative, below that of distant pairs in four runs and
# within 0.01 of it in the fifth. With reversal, training did not make neighbours
# alike in any of five runs.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ほかの 4 つのシード**
#
# 1 回の実行だけでは偶然と区別できないので、シード 1〜4 でさらに 4 つのモデルを学習します。どのモデルも課題を解きます。
# 隣どうしのコサイン類似度の平均はどの実行でも負で、4 回は遠い組の値より小さく、残りの 1 回でも差は 0.01 以内です。
# 反転の課題では、5 回のどの実行でも、学習によって隣どうしが似ることはありませんでした。

# %% tags=["deeper"]
runs = [(0, accuracy, near_l, far_l)]
for seed in range(1, 5):
    torch.manual_seed(seed)
    model = Reverser(LearnedPositionalEmbedding(2 * T, d)).double()
    acc, _, _ = train(model)
    rows = model.pos.weight.detach()[:T]
    runs.append((seed, acc, *near_far(cosine_matrix(rows))))
print(
    "\n".join(
        f"seed {s}: accuracy {a:.3f}, neighbours {n:+.3f}, distant {f:+.3f}"
        for s, a, n, f in runs
    ),
    end="",
)

# %% tags=["deeper", "check"] summary={"en": "five runs, accuracy 1 each; neighbours below zero in all, below distant pairs in four, 0.01 off in one", "ja": "5 回とも正解率 1 です。隣どうしはどれも 0 未満で、4 回は遠い組より小さく、残る 1 回も差は 0.01 以内です"}
assert all(acc == 1.0 for _, acc, _, _ in runs)
assert all(near < 0 for _, _, near, _ in runs)  # neighbours never alike
assert sum(near < far for _, _, near, far in runs) == 4
assert all(near < far + 0.01 for _, _, near, far in runs)

# %% [markdown] lang="en"
# ## Rows no sequence reaches
#
# Training changed the trained rows a great deal: their mean norm grew from
# $\sigma \sqrt{d} = 0.02\sqrt{32} \approx 0.113$ to 1.581. The rows $T$ to
# $2T - 1$, which no training sequence reached, are another story. Their gradient
# was zero at every step, and so are Adam's running averages of it, so Adam's step
# for them is $0/(0 + \epsilon) = 0$: they are still, bit for bit, the random
# vectors they started as.
#
# This is the second limit of a learned table: even inside it, a position is only
# as good as the training sequences long enough to reach it. BERT ran 90% of its
# pre-training steps on sequences of 128 tokens, for speed, and the last 10% on 512
# tokens "to learn the positional embeddings" (Devlin et al. 2019, appendix A.2).

# %% [markdown] lang="ja"
# ## どの系列も届かない行
#
# 学習は、使われた行を大きく変えました。行のノルムの平均は、初期化どおりの $\sigma \sqrt{d} = 0.02\sqrt{32} \approx 0.113$ で始まり、学習後は 1.581 まで大きくなりました。
# 一方、どの学習系列も届かなかった行 $T$ から $2T - 1$ は、勾配がどのステップでも 0 です。Adam が保持する勾配の移動平均も 0 のままなので、Adam による更新は $0/(0 + \epsilon) = 0$ です。
# そのためこれらの行は、今も初期化時の乱数ベクトルとビット単位で一致します。
#
# これが学習型の表の 2 つ目の限界です。表の中の位置であっても、その行の質は、そこまで届く長さの学習系列がどれだけあったかで決まります。
# BERT の事前学習では、速さのためにステップの 90% を 128 トークンの系列で行いました。
# 残りの 10% は、「位置埋め込みを学習するために」512 トークンの系列で行っています（Devlin ら 2019、付録 A.2）。

# %%
norm_before, norm_after = (w[:T].norm(dim=-1).mean() for w in (before, after))
same = torch.equal(after[T:], before[T:])  # the rows no sequence reached
print(
    f"trained rows, mean norm: {norm_before:.3f} before, {norm_after:.3f} after"
)
print(f"rows {T}..{2 * T - 1} unchanged: {same}", end="")

# %% tags=["check"] summary={"en": "trained rows start near σ√d and grow over tenfold; unused rows are bit for bit their start", "ja": "使われた行は σ√d 前後から 10 倍以上になり、使われない行は初期値とビット単位で同じです"}
assert abs(norm_before - 0.02 * math.sqrt(32)) < 0.01  # measured: sigma sqrt(d)
assert norm_after > 10 * norm_before
assert torch.equal(after[T:], before[T:])  # never-used rows: bit for bit

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: weight decay reaches the unused rows.** "Bit for bit" depends on
# the optimiser. PyTorch's `AdamW` (learning rate $\gamma$, decay $\lambda$) also
# multiplies each weight by $1 - \gamma\lambda$ at every step, gradient or not, so
# after $s$ steps an unused row is
# $$E_r^{(s)} = (1 - \gamma\lambda)^s\, E_r^{(0)}$$
# a shrunken copy of its noise. The paper that proposed AdamW (Loshchilov & Hutter
# 2019, Algorithm 2) writes the step as
# $$\theta_t = \theta_{t-1} - \eta_t \big(\alpha\, \hat m_t / (\sqrt{\hat v_t} + \epsilon) + \lambda\, \theta_{t-1}\big)$$
# with $\alpha$ the learning rate and $\eta_t$ a schedule multiplier: its shrink
# per step is $1 - \eta_t\lambda$, without the learning rate, so the same
# $\lambda$ decays far faster there.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：重み減衰は使われない行にも届く**
#
# 「ビット単位で同じ」かどうかはオプティマイザによります。
# PyTorch の `AdamW`（学習率 $\gamma$、減衰率 $\lambda$）では、勾配の有無にかかわらず、
# 各ステップで重みがすべて $1 - \gamma\lambda$ 倍されます。
# したがって $s$ ステップの後、使われない行は次のようになります。
# $$E_r^{(s)} = (1 - \gamma\lambda)^s\, E_r^{(0)}$$
# 初期値のノイズをそのまま縮小したものです。
# AdamW を提案した論文（Loshchilov と Hutter 2019、Algorithm 2）は、1 ステップを次のように書きます。
# $$\theta_t = \theta_{t-1} - \eta_t \big(\alpha\, \hat m_t / (\sqrt{\hat v_t} + \epsilon) + \lambda\, \theta_{t-1}\big)$$
# ここで $\alpha$ は学習率、$\eta_t$ はスケジュールの倍率です。
# 論文の形では 1 ステップあたりの縮小は $1 - \eta_t\lambda$ で、学習率は入りません。
# そのため同じ $\lambda$ でも、論文の形のほうがはるかに速く減衰します。

# %% tags=["deeper", "check"] summary={"en": "with γ = 0.01, λ = 0.1 and the 51 steps 0 to 50, AdamW leaves every unused row at (1 − γλ)⁵¹ = 0.9503 times its start, not the paper's (1 − λ)⁵¹ with η_t = 1", "ja": "γ = 0.01、λ = 0.1、ステップ 0〜50 の 51 ステップで、AdamW は使われない行をどれも初期値の (1 − γλ)⁵¹ = 0.9503 倍にし、η_t = 1 とした論文の (1 − λ)⁵¹ 倍にはしません"}
torch.manual_seed(0)
decayed = Reverser(LearnedPositionalEmbedding(2 * T, d)).double()
start = decayed.pos.weight.detach().clone()
gamma, lam, steps = 0.01, 0.1, 50
adamw = torch.optim.AdamW(decayed.parameters(), lr=gamma, weight_decay=lam)
train(decayed, steps=steps, optimizer=adamw)
shrink = (1 - gamma * lam) ** (steps + 1)  # the steps 0..50
assert f"{shrink:.4f}" == "0.9503"
unused = decayed.pos.weight.detach()[T:]
assert_close(unused, shrink * start[T:])  # PyTorch: 1 - gamma lambda
paper = (1 - lam) ** (steps + 1)  # Algorithm 2 with eta_t = 1
assert not torch.allclose(unused, paper * start[T:])

# %% [markdown] lang="en"
# ## How loud is the positional signal?
#
# The first layer's input is a sum, token plus position, and a sum informs only if
# neither term drowns the other. Each sine–cosine pair of the sinusoid contributes
# $\sin^2(\omega_i p) + \cos^2(\omega_i p) = 1$ to its squared norm, and there are
# $d/2$ pairs, so at every position
# $$\lVert PE(p) \rVert^2 = \sum_{i=0}^{d/2-1}\big(\sin^2(\omega_i p) + \cos^2(\omega_i p)\big) = \frac{d}{2}, \qquad \lVert PE(p) \rVert = \sqrt{d/2}$$
# exactly, $\sqrt{384} \approx 19.5959$ for $d = 768$. A token embedding with
# independent entries of standard deviation $\sigma$ has
# $\mathbb{E}\,\lVert e \rVert^2 = d \sigma^2$, and for large $d$ its norm
# concentrates around $\sigma\sqrt{d}$ (its square is $\sigma^2$ times a chi-squared
# variable of mean $d$ and variance $2d$, so its relative spread is about
# $1/\sqrt{2d}$): $0.02\sqrt{768} \approx 0.5543$ with BERT's $\sigma = 0.02$.
#
# Added to such tokens, the raw sinusoid would be
# $\sqrt{d/2}/(\sigma\sqrt{d}) = 1/(\sigma\sqrt{2})$, about 35 times louder. (This
# pairing is hypothetical: BERT uses a learned table.) The models that do use
# sinusoids fix the balance, each with its own initialisation:
#
# - **Vaswani et al.** (2017, §3.4) multiply the token embeddings by $\sqrt{d}$;
#   their code draws them with $\sigma = d^{-1/2}$, so the token norm becomes
#   $d^{-1/2}\sqrt{d}\cdot\sqrt{d} = \sqrt{d}$ and the ratio
#   $\sqrt{d/2}/\sqrt{d} = 1/\sqrt{2} \approx 0.7071$.
# - **Hua et al.** (2022) multiply the sinusoid by a learned scalar. Started at
#   $d^{-1/2}$, as in `posenc` and x-transformers, it makes the sinusoid's norm
#   $\sqrt{d/2} \cdot d^{-1/2} = 1/\sqrt{2}$; x-transformers' tokens, drawn with
#   $\sigma = \sqrt{2/d}$, have norm about $\sqrt{2}$: a ratio of $1/2$.
#
# Each recipe, with its own tokens, puts the ratio between 1/2 and 1 (0.71 and
# 0.50), far from the 35 of the raw sinusoid against $\sigma = 0.02$ tokens, which
# neither uses.

# %% [markdown] lang="ja"
# ## 位置の信号はどれくらい大きいか
#
# 最初の層への入力はトークンの埋め込みと位置のベクトルの和で、和が意味を持つのはどちらの項も相手をかき消さないときだけです。そこで 2 つのノルムを比べます。
# 正弦波のノルムの 2 乗には正弦と余弦のペアごとに $\sin^2(\omega_i p) + \cos^2(\omega_i p) = 1$ が寄与し、ペアは $d/2$ 組なので、どの位置でも厳密に次が成り立ちます。
# $$\lVert PE(p) \rVert^2 = \sum_{i=0}^{d/2-1}\big(\sin^2(\omega_i p) + \cos^2(\omega_i p)\big) = \frac{d}{2}, \qquad \lVert PE(p) \rVert = \sqrt{d/2}$$
# $d = 768$ なら $\sqrt{384} \approx 19.5959$ です。
# トークンの埋め込みの成分を標準偏差 $\sigma$ の独立な乱数で初期化すると、$\mathbb{E}\,\lVert e \rVert^2 = d \sigma^2$ です。
# $d$ が大きければ、ノルムは $\sigma\sqrt{d}$ の近くに集中します（ノルムの 2 乗は、平均 $d$、分散 $2d$ のカイ 2 乗変数の $\sigma^2$ 倍なので、相対的なばらつきはおよそ $1/\sqrt{2d}$ です）。
# BERT の $\sigma = 0.02$ なら $0.02\sqrt{768} \approx 0.5543$ です。
#
# このトークンに生の正弦波を足すと、正弦波のノルムはトークンの $\sqrt{d/2}/(\sigma\sqrt{d}) = 1/(\sigma\sqrt{2})$ 倍、およそ 35 倍です（これは説明のための仮の組み合わせで、BERT 自体は学習型の表を使います）。
# 正弦波を実際に使うモデルは、それぞれ自分の初期化のもとでこの釣り合いを直しています。
#
# - **Vaswani ら**（2017、§3.4）は、トークンの埋め込みに $\sqrt{d}$ を掛けます。
#   著者らのコードは埋め込みを $\sigma = d^{-1/2}$ で初期化するので、トークンのノルムは
#   $d^{-1/2}\sqrt{d}\cdot\sqrt{d} = \sqrt{d}$ となり、比は $\sqrt{d/2}/\sqrt{d} = 1/\sqrt{2} \approx 0.7071$ です。
# - **Hua ら**（2022）は、正弦波に学習可能なスカラーを掛けます。
#   `posenc` や x-transformers のように $d^{-1/2}$ から始めると、正弦波のノルムは $\sqrt{d/2} \cdot d^{-1/2} = 1/\sqrt{2}$ です。
#   x-transformers のトークンは $\sigma = \sqrt{2/d}$ で引かれ、ノルムはおよそ $\sqrt{2}$ なので、比は $1/2$ です。
#
# どちらの方式も、それぞれのトークンと組み合わせれば比は 1/2 から 1 の間に収まります（0.71 と 0.50）。35 という比は、どちらも使わない $\sigma = 0.02$ のトークンに対するもので、それとは大きく違います。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: why the paper multiplies by $\sqrt{d}$.** Vaswani et al. (§3.4)
# share one weight matrix between the two embedding layers and the pre-softmax
# projection, following Press & Wolf (2017). As an output projection the matrix
# stays small ($\sigma = d^{-1/2}$ in the authors' code); the factor $\sqrt{d}$ on the
# input side brings each token back to a norm near $\sqrt{d}$, the scale of the
# sinusoids. The paper states the factor, not this reason; it is the usual reading.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：論文が $\sqrt{d}$ を掛ける理由**
#
# Vaswani ら（§3.4）は、Press と Wolf（2017）にならい、2 つの埋め込み層と softmax の前の射影で 1 つの重み行列を共有しています。
# 出力の射影として使う行列は小さく保たれます（著者らのコードでは $\sigma = d^{-1/2}$）。
# 入力側で $\sqrt{d}$ を掛けると、トークンのノルムは $\sqrt{d}$ 程度に戻り、正弦波と同じくらいの大きさになります。
# 論文が述べているのは倍率だけで、この理由は一般的な解釈です。

# %% tags=["figure"]
d = 768
pe = posenc.sinusoidal(torch.arange(4096), d, dtype=torch.float64)
pe_norm = math.sqrt(d / 2)
gen = torch.Generator().manual_seed(0)


def token_norms(std, factor=1.0, vocab=30522):  # BERT's vocabulary size
    table = torch.randn(vocab, d, generator=gen) * std * factor
    return table.norm(dim=-1)


hf = token_norms(0.02)  # Hugging Face's BERT: N(0, 0.02^2)
t2t = token_norms(d**-0.5, factor=math.sqrt(d))  # tensor2tensor
xt_table = torch.empty(30522, d)
nn.init.kaiming_normal_(xt_table)  # x-transformers' TokenEmbedding.init_
xt = xt_table.norm(dim=-1)
scaled_pe = SinusoidalEmbedding(4096, d, learnable_scale=True)
with torch.no_grad():
    hua_norms = scaled_pe(torch.arange(4096)).norm(dim=-1)
hua_norm = hua_norms.mean().item()

rows_out = [  # name, position norm, token norm
    ("raw, sigma 0.02 (hypoth.)", pe_norm, hf.mean()),
    ("tensor2tensor (Vaswani)", pe_norm, t2t.mean()),
    ("x-transformers (scaled)", hua_norm, xt.mean()),
    ("scaled, sigma 0.02 (hypoth.)", hua_norm, hf.mean()),
]
print(f"{'':28s} |pos|    |tok|    ratio")
for name, pos, tok in rows_out:
    print(f"{name:28s} {pos:7.4f}  {tok:7.4f}  {pos / tok:6.3f}")

# %% tags=["check"] summary={"en": "‖PE(p)‖ = √(d/2) at every position; tokens drawn with σ concentrate at σ√d, with relative spread 1/√(2d); posenc's scaled sinusoid starts at norm 1/√2 and kaiming_normal_ tokens at √2 (σ = √(2/d)), hence x-transformers' 1/2", "ja": "‖PE(p)‖ はどの位置でも √(d/2) です。σ で引いたトークンのノルムは σ√d に集中し、相対的なばらつきは 1/√(2d) です。posenc のスケール付き正弦波のノルムは 1/√2 から、kaiming_normal_ のトークンは √2（σ = √(2/d)）から始まるので、x-transformers の比は 1/2 です"}
assert_close(pe.norm(dim=-1), torch.full((4096,), pe_norm, dtype=pe.dtype))
assert_close(hf.mean().item(), 0.02 * math.sqrt(d), rtol=2e-3, atol=0)
spread = (hf.std() / hf.mean()).item()
assert abs(spread - 1 / math.sqrt(2 * d)) < 0.002  # about 1/sqrt(2d)
assert_close(hua_norms, torch.full((4096,), 2**-0.5))  # sqrt(d/2) d^(-1/2)
# kaiming_normal_ on a [vocab, d] table: fan_in = d, sigma = sqrt(2/d)
assert_close(xt.mean().item(), math.sqrt(2), rtol=5e-3, atol=0)
assert_close(xt_table.std().item(), math.sqrt(2 / d), rtol=5e-3, atol=0)
# the ratios quoted: about 35 (raw), 0.71, 0.50, and 1.28 in the note below
ratios = [float(pos / tok) for _, pos, tok in rows_out]
assert round(ratios[0]) == 35
assert [round(r, 2) for r in ratios[1:]] == [0.71, 0.50, 1.28]

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where these factors come from, and why the ratios differ.** The
# paper does not give the embeddings' initialisation; tensor2tensor, the authors'
# code, draws them with $\sigma = d^{-1/2}$ (`get_weights` in `modalities.py`) and
# multiplies by $\sqrt{d}$ when `multiply_embedding_mode` is `"sqrt_depth"`, the
# default of `basic_params1` (`common_hparams.py`). The starting value of Hua et
# al.'s scalar is not taken from the paper here: `posenc` and x-transformers'
# `ScaledSinusoidalEmbedding` start it at $d^{-1/2}$, while lucidrains'
# FLASH-pytorch, another implementation of the paper, starts it at $1$.
# x-transformers draws its token embeddings with `kaiming_normal_`. Applied to the
# same tokens, multiplying the tokens by $\sqrt{d}$ and dividing the sinusoid by
# $\sqrt{d}$ would change the ratio by the same factor; the ratios differ because
# the models do not start from the same tokens. (With the $\sigma = 0.02$ tokens,
# the scaled sinusoid would give 1.28, a pairing no model here uses.) The
# computation above checks this arithmetic with the $\sigma$ and factors typed in
# from the code cited; it does not run the libraries' code.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：係数の出どころと、比が違う理由**
#
# 論文は埋め込みの初期化を書いていません。
# 著者らのコードである tensor2tensor は、埋め込みを $\sigma = d^{-1/2}$ で初期化し（`modalities.py` の `get_weights`）、
# `multiply_embedding_mode` が `"sqrt_depth"` なら $\sqrt{d}$ を掛けます。
# `"sqrt_depth"` は `basic_params1`（`common_hparams.py`）の既定値です。
# Hua らのスカラーの初期値は、ここでは論文から取っていません。
# `posenc` と x-transformers の `ScaledSinusoidalEmbedding` は $d^{-1/2}$ から始めますが、
# 論文の別の実装である lucidrains の FLASH-pytorch は $1$ から始めます。
# x-transformers はトークンの埋め込みを `kaiming_normal_` で初期化します。
# 同じトークンに対してなら、トークンに $\sqrt{d}$ を掛けることと正弦波を $\sqrt{d}$ で割ることは、比を同じ倍率だけ変えます。
# 比が違うのは、モデルどうしが同じトークンから始めていないからです。
# $\sigma = 0.02$ のトークンとスケール付き正弦波を組み合わせると比は 1.28 になりますが、ここで扱うモデルにその組み合わせはありません。
# 上のコードは、引用したコードから書き写した $\sigma$ と倍率でこの計算を確かめるだけで、ライブラリのコードそのものは実行していません。

# %% [markdown] lang="en"
# ## The learned scale of Hua et al.
#
# `SinusoidalEmbedding(N, d, learnable_scale=True)` returns $\alpha\, PE(p)$ with one
# scalar parameter $\alpha$, the
# [learned scale](../docs/glossary.md#learned-scale), initialised to $d^{-1/2}$.
# The sinusoid table stays fixed: it is a buffer, outside `parameters()`, so
# $\alpha$ is the only tensor that receives a gradient.

# %% [markdown] lang="ja"
# ## Hua らの学習可能なスケール
#
# `SinusoidalEmbedding(N, d, learnable_scale=True)` は $\alpha\, PE(p)$ を返します。スカラーのパラメータ $\alpha$（[学習可能なスケール](../docs/glossary.ja.md#learned-scale)）を 1 つだけ持ち、初期値は $d^{-1/2}$ です。
# 正弦波の表はバッファで `parameters()` に含まれないので、勾配を受け取るのは $\alpha$ だけです。

# %% tags=["check"] summary={"en": "the scale is the only parameter and starts at d^(−1/2); the table is a buffer", "ja": "パラメータはスケールだけで、初期値は d^(−1/2) です。表はバッファです"}
d = 32
scaled = SinusoidalEmbedding(64, d, learnable_scale=True)
params = dict(scaled.named_parameters())
assert list(params) == ["scale"] and params["scale"].shape == (1,)
assert_close(scaled.scale.detach(), torch.tensor([d**-0.5]))
assert not scaled.table.requires_grad and "table" not in scaled.state_dict()

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the gradient of the scale.** By the chain rule,
# $$\frac{\partial L}{\partial \alpha} = \sum_{p} \frac{\partial L}{\partial y_p} \cdot PE(p)$$
# where $y_p = \alpha\, PE(p)$ is the module's output at position $p$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：スケールの勾配**
#
# 連鎖律から、勾配は次のとおりです。
# $$\frac{\partial L}{\partial \alpha} = \sum_{p} \frac{\partial L}{\partial y_p} \cdot PE(p)$$
# ここで $y_p = \alpha\, PE(p)$ は位置 $p$ でのモジュールの出力です。

# %% tags=["deeper", "check"] summary={"en": "autograd's ∂L/∂α matches the formula; the table gets no gradient", "ja": "自動微分の ∂L/∂α は式と一致し、表には勾配が流れません"}
pos = torch.arange(10)
y = scaled(pos)
upstream = torch.randn_like(y)  # dL/dy for L = sum(upstream * y)
(upstream * y).sum().backward()
expected = (upstream * posenc.sinusoidal(pos, d)).sum()  # sum_p dL/dy_p . PE(p)
assert_close(scaled.scale.grad, expected.reshape(1))
assert scaled.table.grad is None

# %% [markdown] lang="en"
# Train the reversal model with this module in place of the learned table. It has
# one positional parameter instead of $2T d = 1024$, and in this run (one seed) it
# solves the task too, more slowly: its loss at step 100 is 0.3870, where the
# table's was 0.0003. Along the way the scale grows 5.8-fold, from
# $32^{-1/2} \approx 0.1768$ to 1.0290: the model turns the positional signal up.
# Its heatmap would be the sinusoid's above, since multiplying every vector by
# $\alpha > 0$ leaves every cosine unchanged.

# %% [markdown] lang="ja"
# 反転モデルの学習型の表を、このモジュールに置き換えて学習します。
# 位置のパラメータは $2T d = 1024$ 個ではなく 1 個ですが、この実行（シード 1 つ）ではこのモデルも課題を解きます。ただし学習は遅く、ステップ 100 での損失は 0.3870 でした（学習型の表では 0.0003）。
# 途中でスケールは $32^{-1/2} \approx 0.1768$ から 1.0290 へと 5.8 倍になり、モデルは位置の信号を大きくしました。
# ヒートマップを描けば上の正弦波の図と同じになります。すべてのベクトルに $\alpha > 0$ を掛けても、コサイン類似度は変わらないからです。

# %%
torch.manual_seed(0)
scaled_model = Reverser(
    SinusoidalEmbedding(T, d, learnable_scale=True)
).double()
alpha_0 = scaled_model.pos.scale.item()
acc_scaled, log, _ = train(scaled_model)
alpha = scaled_model.pos.scale.item()
print(log[3], log[-1], sep="\n")  # the loss at step 100, the accuracy
print(f"alpha: {alpha_0:.4f} at the start, {alpha:.4f} after training", end="")

# %% tags=["check"] summary={"en": "one positional parameter against the table's 1024; accuracy 1 on new sequences; α grows 5.8-fold", "ja": "位置のパラメータは表の 1024 個に対して 1 個で、新しい系列での正解率は 1 です。α は 5.8 倍になります"}
assert n_params(scaled_model.pos) == 1
assert n_params(learned.pos) == 2 * T * d == 1024
assert acc_scaled == 1.0
assert f"{alpha_0:.4f} {alpha:.4f}" == "0.1768 1.0290"
assert round(alpha / alpha_0, 1) == 5.8

# %% [markdown] lang="en"
# ## The padding row
#
# Batches of sequences of different lengths are filled up with
# [padding](../docs/glossary.md#padding) tokens, which must neither pick up a
# positional signal nor pass a gradient into the table. With `padding_idx=k`, row
# $k$ of the table starts at zero and is left out of the gradient. For a loss
# $L = \sum_t w_t^\top E_{p_t}$, with a vector $w_t$ for each token $t$, the gradient
# of a row is the sum of the $w_t$ of the tokens that looked it up, except at $k$:
# $$\frac{\partial L}{\partial E_r} = \sum_{t:\, p_t = r} w_t \quad (r \ne k), \qquad \frac{\partial L}{\partial E_k} = 0$$
# so a plain SGD step leaves the padding row at zero.
# `SinusoidalEmbedding(..., padding_idx=k)` also returns zeros at $k$.
# Libraries differ in how they number the positions around that row: RoBERTa
# uses its padding id $k = 1$ as a position too and numbers real tokens from
# $k + 1 = 2$, which is why its table has $514 = 512 + 2$ rows for 512 tokens
# (see [the note](#deeper-robertas-numbering-around-the-padding-row)).

# %% [markdown] lang="ja"
# ## パディング用の行
#
# 長さの違う系列をバッチにまとめるときは、足りない分を[パディング](../docs/glossary.ja.md#padding)のトークンで埋めます。パディングには位置の信号が乗ってはならず、表に勾配を流してもいけません。
# `padding_idx=k` を指定すると、表の行 $k$ は 0 から始まり、勾配の計算から外されます。
# トークン $t$ ごとのベクトル $w_t$ を使った損失 $L = \sum_t w_t^\top E_{p_t}$ では、行の勾配はその行を参照したトークンの $w_t$ の和ですが、行 $k$ だけは例外です。
# $$\frac{\partial L}{\partial E_r} = \sum_{t:\, p_t = r} w_t \quad (r \ne k), \qquad \frac{\partial L}{\partial E_k} = 0$$
# したがって素の SGD で更新しても、パディング用の行は 0 のままです。`SinusoidalEmbedding(..., padding_idx=k)` も位置 $k$ で 0 を返します。
# この行のまわりで位置をどう数えるかは、ライブラリによって違います。
# RoBERTa はパディングの ID $k = 1$ を位置にも使い、実トークンを $k + 1 = 2$ から数えるので、512 トークンに対して表が $514 = 512 + 2$ 行あります（下の[「さらに詳しく」](#deeper-パディング用の行のまわりでの-roberta-の数え方)）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: RoBERTa's numbering around the padding row.** fairseq and
# RoBERTa use this convention for their learned positions: the padding token's id
# (1 in RoBERTa) doubles as its position, and real tokens are numbered from $k + 1$
# on. For two sequences, the second padded on the right, RoBERTa's positions are:

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：パディング用の行のまわりでの RoBERTa の数え方**
#
# fairseq と RoBERTa の学習型位置埋め込みも、`padding_idx` の行を 0 にします。そのうえで、パディングのトークンにはその ID（RoBERTa では 1）をそのまま位置として割り当て、実トークンは $k + 1$ から数えます。
# 2 つの系列（2 つ目は右側をパディング）での RoBERTa の位置は次のとおりです。


# %% tags=["deeper"]
def roberta_positions(token_ids, padding_idx=1, past=0):
    """fairseq's make_positions, with HF's past length: from pad + 1."""
    real = (token_ids != padding_idx).long()
    return (torch.cumsum(real, dim=1) + past) * real + padding_idx


token_ids = torch.tensor([[0, 713, 16, 2], [0, 713, 2, 1]])  # second: padded
position_ids = roberta_positions(token_ids)
print(position_ids)

# %% tags=["deeper", "check"] summary={"en": "padding_idx keeps row k at zero, a hand-zeroed nn.Embedding does not; the positions above are RoBERTa's count, the padding token gets a zero row", "ja": "padding_idx は行 k を 0 に保ちますが、手で 0 にした表は保てません。上の位置は RoBERTa の数え方どおりで、パディングのトークンには 0 の行が付きます"}
k = 1  # RoBERTa's padding id
looked_up = torch.tensor([[1, 2, 3, 3], [1, 1, 2, 5]])  # p_t
w = torch.randn(8, 4, generator=torch.Generator().manual_seed(3))  # w_t
expected = torch.zeros(8, 4)  # row r: the sum of w_t over the t with p_t = r
for t, r in enumerate(looked_up.flatten().tolist()):
    expected[r] += w[t]
expected[k] = 0


def keeps_padding_row(table):
    """The gradient above, and row k still zero after an SGD step?"""
    assert torch.equal(table.weight[k], torch.zeros(4))
    (w * table(looked_up).flatten(0, 1)).sum().backward()  # L
    grad_ok = torch.allclose(table.weight.grad, expected)
    torch.optim.SGD(table.parameters(), lr=0.1).step()
    return grad_ok and torch.equal(table.weight[k], torch.zeros(4))


plain = nn.Embedding(8, 4)  # no padding_idx
with torch.no_grad():
    plain.weight[k] = 0  # zeroed by hand
assert keeps_padding_row(LearnedPositionalEmbedding(8, 4, padding_idx=k))
assert not keeps_padding_row(plain)  # row k got the sum of its w_t
assert_close(plain.weight.grad[k], w[[0, 4, 5]].sum(0))

padded = SinusoidalEmbedding(16, 8, padding_idx=k)
assert torch.equal(padded(torch.tensor(k)), torch.zeros(8))

assert position_ids.tolist() == [[2, 3, 4, 5], [2, 3, 4, 1]]  # by hand
roberta_pos = LearnedPositionalEmbedding(514, 8, padding_idx=1)
out = roberta_pos(position_ids)
assert torch.equal(out[1, 3], torch.zeros(8))  # the padding token: nothing
assert roberta_pos.n_positions - k - 1 == 512  # rows for real positions

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how the libraries set up their tables.** Hugging Face's OPT and
# BART keep the offset of 2 in code of their own: their tables have two extra rows
# and their positions are shifted by 2, counted over the real tokens in OPT
# (RoBERTa's numbers) and over every token in BART. Under a
# [KV cache](../docs/glossary.md#kv-cache) the numbering needs an offset, since a
# decoding step feeds only the new tokens: OpenAI's GPT-2 adds `past_length`,
# Hugging Face's RoBERTa `past_key_values_length`.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ライブラリごとの表の作り方**
#
# Hugging Face の OPT と BART も、RoBERTa と同じく位置を 2 ずらす方式を、独自のコードで残しています。
# 表には行が 2 つ余分にあります。OPT は実トークンだけを数えるので RoBERTa と同じ番号になり、BART はすべてのトークンを数えます。
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使うときは、デコードの各ステップで新しいトークンだけを入力するので、番号をずらす必要があります。
# OpenAI の GPT-2 は `past_length` を、Hugging Face の RoBERTa は `past_key_values_length` を足します。

# %% tags=["deeper", "check"] summary={"en": "RoBERTa's count holds under a cache; OPT's count, transcribed, gives RoBERTa's positions; Hugging Face's BART module numbers the padding too", "ja": "RoBERTa の番号はキャッシュを使っても同じです。書き写した OPT の数え方は RoBERTa と同じ位置を与え、Hugging Face の BART のモジュールはパディングにも番号を付けます"}
prefill = roberta_positions(token_ids[:1, :3])  # three tokens, then
step = roberta_positions(token_ids[:1, 3:], past=3)  # one with 3 cached
assert torch.cat([prefill, step], 1).equal(position_ids[:1])
assert roberta_positions(token_ids[:1, 3:]).item() == 2  # no offset: wrong
# Hugging Face's OPT, transcribed from its code: (cumsum(mask) * mask - 1) + 2
mask = (token_ids != k).long()
assert torch.equal(torch.cumsum(mask, 1) * mask - 1 + 2, position_ids)
try:  # Hugging Face's own BART module, where transformers is installed
    with warnings.catch_warnings():  # its import warns about tqdm
        warnings.simplefilter("ignore")
        from transformers.models.bart.modeling_bart import (
            BartLearnedPositionalEmbedding,
        )
except ImportError:  # the downloaded notebook needs only posenc
    BartLearnedPositionalEmbedding = None
if BartLearnedPositionalEmbedding is not None:
    hf_bart = BartLearnedPositionalEmbedding(4, 1)  # 4 positions, 2 extra rows
    with torch.no_grad():
        hf_bart.weight.copy_(torch.arange(6.0)[:, None])  # row r holds r
    bart = hf_bart(token_ids)[..., 0].long()  # the rows BART reads
    assert torch.equal(bart[0], position_ids[0])  # no padding: RoBERTa's rows
    assert bart[1].tolist() == [2, 3, 4, 5]  # the padding too, not row 1

# %% [markdown] lang="en" tags=["deeper"]
# Each fact in this table comes from the code named in it.
#
# | | table rows | initialisation | padding | scale |
# |---|---|---|---|---|
# | BERT, GPT-2 (Google's `modeling.py`, OpenAI's `src/model.py`, Hugging Face) | `max_position_embeddings` = 512, `n_ctx` = 1024 | as in [the note](#deeper-how-the-original-bert-and-gpt-2-drew-their-tables) in the first section | none | none |
# | fairseq `PositionalEmbedding` | 512 + padding id + 1 = 514 | normal, $\sigma = d^{-1/2}$ | row 1 zero, positions from 2 | none |
# | RoBERTa in fairseq | 514 | normal, $\sigma = 0.02$ (`init_bert_params` redraws every embedding) | as fairseq | none |
# | x-transformers `AbsolutePositionalEmbedding` | `max_seq_len` | `nn.Embedding`'s $N(0, 1)$ | none | constant $d^{-1/2}$ |
# | x-transformers `ScaledSinusoidalEmbedding` | none (computed) | fixed sinusoid, concatenated layout | none | learned, starts at $d^{-1/2}$ |
# | `posenc.LearnedPositionalEmbedding` | `n_positions` | normal, $\sigma = 0.02$ | `padding_idx` | none |
# | `posenc.SinusoidalEmbedding` | `n_positions` | fixed sinusoid, either layout | `padding_idx` | `learnable_scale`, starts at $d^{-1/2}$ |
#
# x-transformers scales its learned table by the constant $d^{-1/2}$: with entries
# from $N(0, 1)$, that makes each row's norm about $1$, the same idea as Hua et al.'s
# scale, applied to a table. The check below compares `posenc` with numbers that
# x-transformers itself printed: its `ScaledSinusoidalEmbedding(64)` at the
# positions 0, 1, 7 and 100, in the columns 0, 1, 31 (sines), 32, 33 and 63
# (cosines), and a table drawn and scaled as `AbsolutePositionalEmbedding` does,
# for the same seed.

# %% [markdown] lang="ja" tags=["deeper"]
# 表の各項目は、その行に挙げたコードから読み取ったものです。
#
# | | 表の行数 | 初期化 | パディング | スケール |
# |---|---|---|---|---|
# | BERT、GPT-2（Google の `modeling.py`、OpenAI の `src/model.py`、Hugging Face） | `max_position_embeddings` = 512、`n_ctx` = 1024 | 最初の節の[注](#deeper-元の-bert-と-gpt-2-の表の初期化)のとおり | なし | なし |
# | fairseq の `PositionalEmbedding` | 512 + パディング ID + 1 = 514 | 正規分布、$\sigma = d^{-1/2}$ | 行 1 が 0、位置は 2 から | なし |
# | fairseq の RoBERTa | 514 | 正規分布、$\sigma = 0.02$（`init_bert_params` による全埋め込みの引き直し） | fairseq と同じ | なし |
# | x-transformers の `AbsolutePositionalEmbedding` | `max_seq_len` | `nn.Embedding` の $N(0, 1)$ | なし | 定数 $d^{-1/2}$ |
# | x-transformers の `ScaledSinusoidalEmbedding` | なし（毎回計算） | 固定の正弦波、連結配置 | なし | 学習可能、初期値 $d^{-1/2}$ |
# | `posenc.LearnedPositionalEmbedding` | `n_positions` | 正規分布、$\sigma = 0.02$ | `padding_idx` | なし |
# | `posenc.SinusoidalEmbedding` | `n_positions` | 固定の正弦波、どちらの配置も可 | `padding_idx` | `learnable_scale`、初期値 $d^{-1/2}$ |
#
# x-transformers は学習型の表に定数 $d^{-1/2}$ を掛けます。
# 成分が $N(0, 1)$ なら各行のノルムはおよそ $1$ になります。Hua らのスケールと同じ考え方を表に当てはめたものです。
# 下の確認では、x-transformers 自身が出力した数値と `posenc` を比べます。
# 比べるのは `ScaledSinusoidalEmbedding(64)` の位置 0、1、7、100 での値（列 0、1、31 が正弦、32、33、63 が余弦）と、
# 同じシードで `AbsolutePositionalEmbedding` と同じように作ってスケールした表です。

# %% tags=["deeper", "check"] summary={"en": "posenc's scaled sinusoid in the concatenated layout matches x-transformers' printed values to 1e-6; the scaled table matches its printed rows and its mean row norm 0.9962, about 1", "ja": "連結配置の posenc のスケール付き正弦波は、x-transformers が出力した値と 1e-6 以内で一致します。スケールした表も、出力された行と、行のノルムの平均 0.9962（およそ 1）に一致します"}
# x-transformers, ScaledSinusoidalEmbedding(64)(x, pos=positions),
# run in a separate environment: rows = positions, columns = cols
positions, cols = torch.tensor([0, 1, 7, 100]), [0, 1, 31, 32, 33, 63]
x_transformers_printed = torch.tensor(  # rounded to 7 decimals
    [
        [0.0, 0.0, 0.0, 0.125, 0.125, 0.125],
        [0.1051839, 0.0851952, 0.0000167, 0.0675378, 0.0914701, 0.1250000],
        [0.0821233, -0.1074142, 0.0001167, 0.0942378, 0.0639312, 0.1250000],
        [-0.0632957, -0.0496892, 0.0016669, 0.1077899, 0.1146995, 0.1249889],
    ]
)
ours = SinusoidalEmbedding(128, 64, learnable_scale=True, layout="concat")
with torch.no_grad():
    assert_close(
        ours(positions)[:, cols], x_transformers_printed, atol=1e-6, rtol=0
    )

# x-transformers with torch.manual_seed(0), then
# AbsolutePositionalEmbedding(64, 4096) at positions 0, 1, 4095, columns 0-3
x_abs_printed = torch.tensor(
    [
        [-0.1407300, -0.1440450, -0.0313223, -0.0542349],
        [-0.0711560, 0.1149964, 0.1388520, 0.1612343],
        [0.1787705, -0.1110800, 0.2049070, -0.0025626],
    ]
)
x_abs_norm_printed = 0.9962018  # its mean row norm over the 4096 rows
d = 64
torch.manual_seed(0)
x_table = nn.Embedding(4096, d)  # N(0, 1) entries, then the constant d^-1/2
scaled_rows = x_table.weight.detach() * d**-0.5
assert_close(scaled_rows[[0, 1, 4095], :4], x_abs_printed, atol=1e-6, rtol=0)
row_norms = scaled_rows.norm(dim=-1)
assert abs(row_norms.mean().item() - x_abs_norm_printed) < 1e-6

# %% [markdown] lang="en"
# ## What to remember
#
# - A learned table has one trained row per position, $N d$ parameters (less than
#   1% of BERT-base or GPT-2 small), and nothing past row $N - 1$.
# - Rows that no training sequence reaches keep their initial noise (bit for bit
#   under Adam, shrunk under `AdamW`'s weight decay).
# - A table learns the structure its task rewards: reversal did not make neighbours
#   alike in five runs, while pretrained language models' tables do show locality.
#   The sinusoid has it by construction.
# - The balance between token and position depends on both initialisations: the
#   raw sinusoid is about 35 times louder than $\sigma = 0.02$ tokens;
#   tensor2tensor's recipe gives about 0.71, x-transformers' about 0.50, each with
#   its own tokens.
# - A scaled sinusoid has one parameter and, in one run, learned the toy task too,
#   more slowly than the table, turning its scale up 5.8-fold. `padding_idx` keeps a
#   zero row out of training.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 学習型の表は位置ごとに学習可能な行を 1 つ持ち、パラメータは $N d$ 個です（BERT-base や GPT-2 small の 1% 未満）。
#   行 $N - 1$ より先には何もありません。
# - どの学習系列も届かない行は、初期値のノイズのままです
#   （Adam ならビット単位で同じ、`AdamW` なら重み減衰で縮みます）。
# - 表が学ぶのは、その課題で損失の低下につながる構造です。反転の課題では 5 回のどの実行でも隣どうしは似ませんでしたが、
#   学習済みの言語モデルの表には局所性が見られます。正弦波は構成上、局所性を持っています。
# - トークンと位置の釣り合いは、両方の初期化で決まります。
#   生の正弦波は $\sigma = 0.02$ のトークンのおよそ 35 倍の大きさです。
#   それぞれのトークンの初期化と組み合わせると、比は tensor2tensor のやり方でおよそ 0.71、x-transformers のやり方でおよそ 0.50 です。
# - スケール付き正弦波はパラメータが 1 つだけです。1 回の実行では、表より遅いものの、スケールを 5.8 倍にしながらこの小さな課題を学習できました。
#   `padding_idx` は 0 の行を学習から外します。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Train the reversal model with $T = 16$ and then call it on sequences of length
#    $17$. What happens with the learned table, and with a `SinusoidalEmbedding` of
#    17 rows in its place? Does the sinusoidal model reverse the longer sequences?
# 2. Change the task so that neighbouring positions should behave alike, for
#    example "the target at $p$ is the most frequent token in positions $p-2$ to
#    $p+2$". Does the mean cosine of neighbours in the learned table rise above
#    that of distant pairs?
# 3. Repeat the norm comparison for GPT-2's initialisation ($\sigma = 0.02$ for
#    tokens, $0.01$ for `wpe`). Which signal is louder at the start of training, and
#    by how much?
# 4. Set `learnable_scale=True` and freeze $\alpha$ at $1$, at $d^{-1/2}$ and at
#    $d^{-1}$ (assign it and set `requires_grad_(False)`). How does the number of
#    steps the reversal model needs change?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. $T = 16$ で反転モデルを学習し、長さ $17$ の系列に適用してください。
#    学習型の表ではどうなるでしょうか。代わりに 17 行の `SinusoidalEmbedding` を使うとどうでしょうか。
#    正弦波のモデルは長い系列を反転できるでしょうか。
# 2. 隣り合う位置が似たふるまいをすべき課題に変えてください。
#    たとえば「位置 $p$ の正解は、位置 $p-2$ から $p+2$ の中で最も多いトークン」です。
#    学習型の表で、隣どうしのコサイン類似度の平均は遠い組の平均を上回るでしょうか。
# 3. GPT-2 の初期化（トークンは $\sigma = 0.02$、`wpe` は $0.01$）でノルムの比較をやり直してください。
#    学習の始めにはどちらの信号が大きく、それは何倍でしょうか。
# 4. `learnable_scale=True` にしたうえで、$\alpha$ を $1$、$d^{-1/2}$、$d^{-1}$ に固定してください
#    （値を代入し、`requires_grad_(False)` を呼びます）。
#    反転モデルが必要とするステップ数はどう変わるでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** The trained `learned` model has $2T = 32$ rows, so position 16
# has a row and nothing fails; but that row is the untrained noise of the previous
# sections. A table of exactly $T$ rows raises an `IndexError`. The scaled
# sinusoid of the previous section was built with $T$ rows and raises too; rebuilt
# with 17 rows (same $\alpha$, same weights) it runs. Neither reverses: reversal of
# 17 tokens needs query $p$ to look at key $16 - p$, while both models learned
# $15 - p$. On 1000 sequences of length 17 the accuracy is 0.105 for the table and
# 0.153 for the sinusoid, near the $1/V = 0.1$ of a guess, and for every query
# $p < 16$ of every sequence the largest weight falls on $15 - p$, the old mirror.
# A model that extrapolates in position is not enough when the rule itself depends
# on the length.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 学習済みの `learned` モデルは $2T = 32$ 行を持つので、位置 16 にも行があり、エラーにはなりません。
# しかし、その行はこれまでの節で見た、学習されていないノイズです。
# ちょうど $T$ 行の表なら `IndexError` になります。
# 前の節のスケール付き正弦波も $T$ 行で作ったので例外になります。17 行で作り直せば（$\alpha$ もほかの重みも同じまま）動きます。
# それでも、どちらも反転はできません。17 トークンの反転では、クエリ $p$ はキー $16 - p$ を見る必要がありますが、
# どちらのモデルも $15 - p$ を見るように学習しています。
# 長さ 17 の系列 1000 個での正解率は、表で 0.105、正弦波で 0.153 で、チャンスレベルの $1/V = 0.1$ に近い値です。
# そして、どの系列でも $p < 16$ のすべてのクエリで、最大の重みがかかるのは学習時の折り返しの位置 $15 - p$ です。
# 位置について外挿できるモデルであっても、規則そのものが長さに依存するなら、それだけでは足りません。

# %% tags=["solution"]
import copy

d = 32
tokens17 = torch.randint(
    V, (1000, 17), generator=torch.Generator().manual_seed(4)
)
target17 = tokens17.flip(-1)
old_mirror = (15 - torch.arange(17)).clamp(min=0)  # where they learned to look


def length17(model):
    with torch.no_grad():
        acc = (model(tokens17).argmax(-1) == target17).double().mean().item()
        _, q, k, _ = model.qkv(tokens17)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1)
    old = (w.argmax(-1)[:, :16] == old_mirror[:16]).double().mean().item()
    return acc, old


short = Reverser(LearnedPositionalEmbedding(T, d)).double()
for model in (short, scaled_model):
    try:
        model(tokens17)
    except IndexError:
        pass
    else:
        raise AssertionError("a table of 16 rows has no row 16")
sin17 = copy.deepcopy(scaled_model)
sin17.pos = SinusoidalEmbedding(17, d, learnable_scale=True).double()
sin17.pos.scale.data.copy_(scaled_model.pos.scale.data)
results = {"learned, 32 rows": length17(learned), "sinusoid": length17(sin17)}
for name, (acc, old) in results.items():
    assert acc < 0.2 and old == 1.0  # near 1/V; always the old mirror
    print(f"{name:16s}: accuracy {acc:.3f}, argmax on 15 - p: {old:.3f}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The cell trains the learned table on the new task (ties broken
# towards the smaller token id, the window cut at the ends of the sequence) with the
# same model, optimiser and steps, from the seeds 0, 1 and 2, and compares the two
# means. In all three runs the answer is yes: accuracy 0.989 or 0.990, and a mean
# cosine of +0.459 to +0.546 for neighbours against -0.329 to -0.309 for distant
# pairs. On a task that makes neighbouring positions nearly interchangeable, this
# table learned locality. That agrees with what Wang & Chen see in pretrained
# tables, but three runs of a toy cannot show why those tables look as they do.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 次のセルでは、学習型の表をシード 0、1、2 から新しい課題で学習し、2 つの平均を比べます。
# モデル、オプティマイザ、ステップ数は同じです。同数のときは ID の小さいトークンを正解とし、窓は系列の端で切ります。
# 3 回の実行のどれでも、答えは「上回る」です。正解率は 0.989 か 0.990 で、
# コサイン類似度の平均は、隣どうしが +0.459〜+0.546、遠い組が -0.329〜-0.309 です。
# 隣り合う位置をほぼ入れ替えてもよい課題では、この表は局所性を学びました。
# これは Wang と Chen が学習済みの表に見たものと合っています。
# ただし、トイモデルの 3 回の実行から、学習済みの表がなぜそうなるのかまではわかりません。

# %% tags=["solution"]
window = (
    (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() <= 2
).double()  # [p, q]: q within 2 of p


def window_mode(generator, size=64):
    tokens = torch.randint(V, (size, T), generator=generator)
    one_hot = nn.functional.one_hot(tokens, V).double()  # [b, q, V]
    counts = window @ one_hot  # [b, p, V]: tokens near p
    return tokens, counts.argmax(-1)  # first maximum: smallest id


lines = []
for seed in range(3):
    torch.manual_seed(seed)
    local = Reverser(LearnedPositionalEmbedding(2 * T, d)).double()
    acc_local, _, _ = train(local, task=window_mode)
    near_w, far_w = near_far(cosine_matrix(local.pos.weight.detach()[:T]))
    assert acc_local > 0.98 and near_w > 0.4 and far_w < -0.3
    lines.append(
        f"seed {seed}: accuracy {acc_local:.3f}, "
        f"neighbours {near_w:+.3f}, distant {far_w:+.3f}"
    )
print("\n".join(lines), end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With $\sigma = 0.02$ the token norm is about
# $0.02\sqrt{768} \approx 0.554$, with $\sigma = 0.01$ the position norm about
# $0.277$: the tokens start twice as loud, the ratio of the two $\sigma$. The cell
# draws both tables as `src/model.py` does, normal and untruncated.
#
# The $0.01$ is OpenAI's. A GPT-2 built from Hugging Face's classes and trained
# or initialised from scratch starts `wpe` at $\sigma = 0.02$, like `wte`:
# `GPT2Model` makes both tables `nn.Embedding`s, and Hugging Face's
# `_init_weights` draws every `nn.Embedding` with `initializer_range` $= 0.02$.
# There both norms start near $0.554$ and the ratio is $1$, not $2$: neither
# signal is louder. A pretrained
# [checkpoint](../docs/glossary.md#checkpoint) carries OpenAI's trained weights
# in either codebase, so the difference matters only for training from scratch.
# The cell also draws `wpe` with $0.02$ and checks both ratios.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** $\sigma = 0.02$ のトークンのノルムはおよそ $0.02\sqrt{768} \approx 0.554$、
# $\sigma = 0.01$ の位置のノルムはおよそ $0.277$ です。
# 学習の始めにはトークンのほうが 2 倍大きく、これは 2 つの $\sigma$ の比です。
# 次のセルでは、`src/model.py` と同じく切断しない正規分布で両方の表を作ります。
#
# $0.01$ は OpenAI のコードの値です。
# Hugging Face のクラスで組み立てた GPT-2 を一から初期化したり学習したりする場合は、`wpe` の初期値も `wte` と同じく $\sigma = 0.02$ で引かれます。
# `GPT2Model` は 2 つの表をどちらも `nn.Embedding` として持ち、Hugging Face の `_init_weights` はすべての `nn.Embedding` を `initializer_range` $= 0.02$ で初期化するからです。
# この場合、学習の始めの 2 つのノルムはどちらもおよそ $0.554$ で、比は $2$ ではなく $1$ です。どちらの信号も、もう一方より大きくはありません。
# 学習済みの[チェックポイント](../docs/glossary.ja.md#checkpoint)を読み込めば、OpenAI のコードでも Hugging Face のコードでも、重みは OpenAI が学習したものです。
# そのため、この違いが効くのは一から学習するときだけです。
# 次のセルでは `wpe` を標準偏差 $0.02$ でも初期化し、両方の比を確かめます。

# %% tags=["solution"]
d = 768
gen3 = torch.Generator().manual_seed(3)
wte = torch.randn(8192, d, generator=gen3) * 0.02  # a sample of GPT-2's rows
wpe = torch.randn(1024, d, generator=gen3) * 0.01
tok_norm, pos_norm = wte.norm(dim=-1).mean(), wpe.norm(dim=-1).mean()
assert_close(tok_norm.item(), 0.02 * math.sqrt(d), rtol=3e-3, atol=0)
assert_close(pos_norm.item(), 0.01 * math.sqrt(d), rtol=3e-3, atol=0)
# Hugging Face: _init_weights draws wpe with initializer_range = 0.02
wpe_hf = torch.randn(1024, d, generator=gen3) * 0.02
pos_norm_hf = wpe_hf.norm(dim=-1).mean()
ratio_openai, ratio_hf = tok_norm / pos_norm, tok_norm / pos_norm_hf
assert_close(ratio_openai.item(), 0.02 / 0.01, rtol=5e-3, atol=0)
assert_close(ratio_hf.item(), 0.02 / 0.02, rtol=5e-3, atol=0)
print(
    f"|wte| {tok_norm:.3f}, |wpe| {pos_norm:.3f}, "
    f"tokens / positions {ratio_openai:.3f} (OpenAI)\n"
    f"|wte| {tok_norm:.3f}, |wpe| {pos_norm_hf:.3f}, "
    f"tokens / positions {ratio_hf:.3f} (Hugging Face, from scratch)",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** With $d = 32$ the sinusoid has norm $\sqrt{16} = 4$ and the
# tokens start near $0.02\sqrt{32} \approx 0.11$, so $\alpha = 1$ makes the
# positions about 35 times louder, $\alpha = d^{-1/2}$ about 6 times and
# $\alpha = d^{-1}$ about 1.1 times. The cell trains each with $\alpha$ frozen
# and prints the first step whose batch loss falls below $0.1$ and the final
# accuracy. In these runs, the louder the positions, the faster: step 68 at
# $\alpha = 1$ (accuracy 1.000), step 241 at $d^{-1/2}$ (accuracy 0.978), and at
# $d^{-1}$ not within the 301 updates (accuracy 0.243). The learnable $\alpha$ of
# the previous sections, started at $d^{-1/2}$, did better than the frozen one: it
# grew to 1.0290 and reached accuracy 1.000. These are single runs of one seed:
# in these runs louder positions made learning faster, which is not yet a trend.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** $d = 32$ では正弦波のノルムは $\sqrt{16} = 4$、トークンの初期のノルムはおよそ $0.02\sqrt{32} \approx 0.11$ です。
# したがって位置の信号は、$\alpha = 1$ でおよそ 35 倍、$\alpha = d^{-1/2}$ でおよそ 6 倍、
# $\alpha = d^{-1}$ でおよそ 1.1 倍の大きさになります。
# 次のセルでは、$\alpha$ を固定してそれぞれを学習し、バッチの損失が初めて $0.1$ を下回るステップと、最後の正解率を表示します。
# これらの実行では、位置の信号が大きいほど速く学習しました。
# $\alpha = 1$ ではステップ 68（正解率 1.000）、$d^{-1/2}$ ではステップ 241（正解率 0.978）で、
# $d^{-1}$ では 301 回の更新のうちに下回りません（正解率 0.243）。
# 前の節の学習可能な $\alpha$ は、同じ $d^{-1/2}$ から始まりますが、固定した場合より良い結果になりました。
# 1.0290 まで大きくなり、正解率 1.000 に達しています。
# どれも 1 つのシードで 1 回ずつ実行した結果です。これらの実行では位置の信号が大きいほど学習が速かったものの、傾向と言えるほどの根拠ではありません。

# %% tags=["solution"]
d = 32
first_below, final_acc = {}, {}
for name, value in [("1", 1.0), ("d^(-1/2)", d**-0.5), ("d^(-1)", 1 / d)]:
    torch.manual_seed(0)
    frozen = Reverser(SinusoidalEmbedding(T, d, learnable_scale=True)).double()
    frozen.pos.scale.data.fill_(value)
    frozen.pos.scale.requires_grad_(False)
    params = [p for p in frozen.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=0.01)
    acc, _, losses = train(frozen, optimizer=opt)
    below = next((s for s, x in enumerate(losses) if x < 0.1), "none")
    assert frozen.pos.scale.item() == value  # it stayed frozen
    first_below[name], final_acc[name] = below, acc
    print(f"alpha = {name:8s}: loss < 0.1 at step {below}, accuracy {acc:.3f}")
assert (
    first_below["1"] < first_below["d^(-1/2)"]
    and first_below["d^(-1)"] == "none"
)
acc_1, acc_half, acc_d = final_acc.values()  # alpha = 1, d^(-1/2), d^(-1)
assert acc_1 == 1.0 and 0.95 < acc_half < 1.0 and acc_d < 0.3
assert acc_scaled == 1.0 > final_acc["d^(-1/2)"]  # learnable alpha

# %% [markdown] lang="en"
# ## Sources and versions
#
# Hugging Face's initialisation is that of transformers 5.24.0, its RoBERTa
# positions under a cache those of 4.57.6; x-transformers' printed values come
# from version 2.26.4 with torch 2.13.0. The toy runs use torch 2.13.0 in float64
# on one CPU thread; other CPUs, kernels or versions may round the printed losses
# differently. [The note after the references](#deeper-where-each-count-and-initialisation-was-read)
# says where each count and initialisation was read.
#
# ### References
#
# - Gehring, J. et al. (2017). *Convolutional Sequence to Sequence Learning*.
#   ICML 2017. <https://arxiv.org/abs/1705.03122>
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.4,
#   §3.5, Table 3 row (E). <https://arxiv.org/abs/1706.03762>
# - Press, O., Wolf, L. (2017). *Using the Output Embedding to Improve Language
#   Models*. EACL 2017. <https://arxiv.org/abs/1608.05859>
# - Devlin, J. et al. (2019). *BERT: Pre-training of Deep Bidirectional
#   Transformers for Language Understanding*. NAACL 2019, appendix A.2.
#   <https://arxiv.org/abs/1810.04805>
# - Radford, A. et al. (2019). *Language Models are Unsupervised Multitask
#   Learners*. <https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf>
# - Liu, Y. et al. (2019). *RoBERTa: A Robustly Optimized BERT Pretraining
#   Approach*. <https://arxiv.org/abs/1907.11692>
# - Beltagy, I., Peters, M. E., Cohan, A. (2020). *Longformer: The Long-Document
#   Transformer*. <https://arxiv.org/abs/2004.05150>
# - Dosovitskiy, A. et al. (2021). *An Image is Worth 16x16 Words: Transformers
#   for Image Recognition at Scale*. ICLR 2021, §3.2.
#   <https://arxiv.org/abs/2010.11929>
# - Wang, Y.-A. and Chen, Y.-N. (2020). *What Do Position Embeddings Learn? An
#   Empirical Study of Pre-Trained Language Model Positional Encoding*. EMNLP
#   2020. <https://arxiv.org/abs/2010.04903>
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022.
#   <https://arxiv.org/abs/2202.10447>
# - Loshchilov, I. and Hutter, F. (2019). *Decoupled Weight Decay
#   Regularization*. ICLR 2019. <https://arxiv.org/abs/1711.05101>
# - Code: tensor2tensor <https://github.com/tensorflow/tensor2tensor>; Google's
#   BERT <https://github.com/google-research/bert>; OpenAI's GPT-2
#   <https://github.com/openai/gpt-2>; Hugging Face transformers
#   <https://github.com/huggingface/transformers>; fairseq
#   <https://github.com/facebookresearch/fairseq>; x-transformers
#   <https://github.com/lucidrains/x-transformers>; FLASH-pytorch
#   <https://github.com/lucidrains/FLASH-pytorch>.


# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# Hugging Face の初期化は transformers 5.24.0、キャッシュを使うときの RoBERTa の位置は 4.57.6 のものです。
# x-transformers が出力した値は、バージョン 2.26.4 と torch 2.13.0 で得ました。
# トイモデルの学習は torch 2.13.0、float64、CPU の 1 スレッドで行っています。CPU、カーネル、バージョンの違いによる丸め誤差で、表示される損失の値が変わる場合もあります。
# 各パラメータ数と初期化をどこで読んだかは、参考文献の後の[注](#deeper-パラメータ数と初期化を読んだ場所)にまとめました。
#
# ### 参考文献
#
# - Gehring, J. et al. (2017). *Convolutional Sequence to Sequence Learning*.
#   ICML 2017. <https://arxiv.org/abs/1705.03122>
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.4,
#   §3.5, Table 3 row (E). <https://arxiv.org/abs/1706.03762>
# - Press, O., Wolf, L. (2017). *Using the Output Embedding to Improve Language
#   Models*. EACL 2017. <https://arxiv.org/abs/1608.05859>
# - Devlin, J. et al. (2019). *BERT: Pre-training of Deep Bidirectional
#   Transformers for Language Understanding*. NAACL 2019, appendix A.2.
#   <https://arxiv.org/abs/1810.04805>
# - Radford, A. et al. (2019). *Language Models are Unsupervised Multitask
#   Learners*. <https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf>
# - Liu, Y. et al. (2019). *RoBERTa: A Robustly Optimized BERT Pretraining
#   Approach*. <https://arxiv.org/abs/1907.11692>
# - Beltagy, I., Peters, M. E., Cohan, A. (2020). *Longformer: The Long-Document
#   Transformer*. <https://arxiv.org/abs/2004.05150>
# - Dosovitskiy, A. et al. (2021). *An Image is Worth 16x16 Words: Transformers
#   for Image Recognition at Scale*. ICLR 2021, §3.2.
#   <https://arxiv.org/abs/2010.11929>
# - Wang, Y.-A., Chen, Y.-N. (2020). *What Do Position Embeddings Learn? An
#   Empirical Study of Pre-Trained Language Model Positional Encoding*. EMNLP
#   2020. <https://arxiv.org/abs/2010.04903>
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022.
#   <https://arxiv.org/abs/2202.10447>
# - Loshchilov, I., Hutter, F. (2019). *Decoupled Weight Decay
#   Regularization*. ICLR 2019. <https://arxiv.org/abs/1711.05101>
# - コード：tensor2tensor <https://github.com/tensorflow/tensor2tensor>、Google の
#   BERT <https://github.com/google-research/bert>、OpenAI の GPT-2
#   <https://github.com/openai/gpt-2>、Hugging Face transformers
#   <https://github.com/huggingface/transformers>、fairseq
#   <https://github.com/facebookresearch/fairseq>、x-transformers
#   <https://github.com/lucidrains/x-transformers>、FLASH-pytorch
#   <https://github.com/lucidrains/FLASH-pytorch>。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where each count and initialisation was read.** BERT-base's 110M is Devlin et
# al.'s; GPT-2 small is the `124M` of OpenAI's `download_model.py` (the GPT-2
# paper gave 117M, a count the repository's README calls wrong). Hugging Face's
# `_init_weights` is in `modeling_bert.py` and `modeling_gpt2.py`; OpenAI's two $\sigma$ of exercise 3 are at lines 153 and 155
# of GPT-2's `src/model.py`; Google's BERT initialises through
# `create_initializer` in `modeling.py`; fairseq's tables are
# `fairseq.modules.LearnedPositionalEmbedding` and `fairseq.modules.PositionalEmbedding`, RoBERTa's redraw
# `init_bert_params`. tensor2tensor was read at commit bafdc1b: `get_weights` in
# `tensor2tensor/layers/modalities.py` (the $\sigma$ at line 478, the $\sqrt{d}$
# factor at lines 502–503) and `basic_params1` in `common_hparams.py` (line 111).
# x-transformers' classes are `AbsolutePositionalEmbedding`,
# `ScaledSinusoidalEmbedding` and `TokenEmbedding`; FLASH-pytorch's is
# `ScaledSinuEmbedding`. Hugging Face's RoBERTa counts positions in
# `create_position_ids_from_input_ids`; OPT's and BART's offsets are in
# `modeling_opt.py` and `modeling_bart.py`.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：パラメータ数と初期化を読んだ場所**
#
# BERT-base の 110M は Devlin らの値です。
# GPT-2 small の 124M は、OpenAI の `download_model.py` での名前 `124M` によります。
# GPT-2 の論文は 117M としていましたが、リポジトリの README はこの数を誤りだったとしています。
# Hugging Face の `_init_weights` は `modeling_bert.py` と `modeling_gpt2.py` にあります。
# 演習 3 の OpenAI の 2 つの $\sigma$ は、GPT-2 の `src/model.py` の 153 行目と 155 行目にあります。
# Google の BERT は `modeling.py` の `create_initializer` で初期化します。
# fairseq の表は `fairseq.modules.LearnedPositionalEmbedding` と `fairseq.modules.PositionalEmbedding` で、RoBERTa の引き直しは `init_bert_params` です。
# tensor2tensor はコミット bafdc1b を読みました。
# `tensor2tensor/layers/modalities.py` の `get_weights`（$\sigma$ は 478 行目、$\sqrt{d}$ 倍は 502〜503 行目）と、
# `common_hparams.py` の `basic_params1`（111 行目）です。
# x-transformers のクラスは `AbsolutePositionalEmbedding`、`ScaledSinusoidalEmbedding`、`TokenEmbedding` で、
# FLASH-pytorch のものは `ScaledSinuEmbedding` です。
# Hugging Face の RoBERTa は `create_position_ids_from_input_ids` で位置を数えます。
# OPT と BART のずれは `modeling_opt.py` と `modeling_bart.py` にあります。
