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
# # Sinusoids in the wild: pitfalls
#
# Libraries implement the encoding of [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)
# in several arrangements. This page trains a small model with the paper's table and
# runs it under the others, to show the one lesson they teach; then it gives a table
# of the variants with the `posenc` argument that reproduces each, and the one real
# bug. The first two sections are what every reader needs; the table is for when you
# load or port a checkpoint. Symbols follow the [notation page](../docs/notation.md): $n = d/2$ pairs with
# frequencies $\omega_i$, columns $j$, positions $p$.

# %% [markdown] lang="ja"
# # 実装ごとに違う正弦波位置エンコーディング：落とし穴
#
# [「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の式は、ライブラリごとに少しずつ違う形で実装されています。
# これらの違いから学べる教訓は、実は 1 つだけです。このページでは、論文の表で[トイモデル](../docs/glossary.ja.md#toy-model)を学習し、ほかの変種の表で動かしてその教訓を確かめます。
# 続いて、各変種を再現する `posenc` の引数を添えた一覧表を示します。最後に、変種ではなく本当のバグと言える唯一の例を取り上げます。
# どの読者にも必要なのは最初の 2 つの節です。一覧表は、チェックポイントを読み込んだり移植したりするときに役立ちます。
# 記号は[記法のページ](../docs/notation.ja.md)に従い、ペアは $n = d/2$ 組、その周波数は $\omega_i$、列の番号は $j$、位置は $p$ です。

# %% tags=["setup"]
import copy
import math

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.testing import assert_close

from posenc import (
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    attention,
    sinusoidal,
)
from posenc_lab.plotting import INK, use_site_style
from posenc_lab.reversal import Reverser, accuracy, batch, train

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
F64 = torch.float64

# %% [markdown] lang="en"
# ## The encoding is part of a checkpoint
#
# A model never sees the formula, only the vectors added to its token embeddings,
# and its weights are fitted to those vectors. Two libraries can implement the same
# formula and add different vectors. Below is position 3 for $d = 8$, as labml
# computes it (the paper's arrangement) and as AllenNLP does (tensor2tensor's).

# %% [markdown] lang="ja"
# ## 位置エンコーディングもチェックポイントの一部
#
# モデルが見るのは式ではなく、トークンの埋め込みに足されるベクトルだけで、重みはそのベクトルに合わせて学習されます。
# 同じ式を実装した 2 つのライブラリでも、足すベクトルは違うことがあります。
# 下に、$d = 8$ での位置 3 のベクトルを 2 通りに計算して示します。labml は論文と同じ並べ方で、AllenNLP は tensor2tensor と同じ並べ方で計算します。

# %%
three = torch.tensor([3])  # position 3, d = 8
print(sinusoidal(three, 8))  # labml, as the paper
print(sinusoidal(three, 8, layout="concat", endpoint=True))  # AllenNLP

# %% [markdown] lang="en"
# The paper puts the sine and cosine of frequency $\omega_i$ side by side, in columns
# $2i$ and $2i+1$ (the [interleaved layout](../docs/glossary.md#interleaved-layout));
# tensor2tensor, fairseq and AllenNLP write all $n$ sines first and then all cosines
# (the [concatenated layout](../docs/glossary.md#concatenated-layout)). The two hold the
# same numbers in another order: column $c$ of the concatenated table is column
# $\pi(c)$ of the interleaved one,
# $$\pi(c) = \begin{cases} 2c & c < n \\ 2(c-n)+1 & c \ge n \end{cases}$$
# With $P$ the permutation matrix with $P_{c,\pi(c)} = 1$ and zeros elsewhere,
# $PE^{\mathrm{cat}}(p) = P\, PE^{\mathrm{int}}(p)$ as column vectors; in code,
# `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]`. (AllenNLP also
# divides the exponent by $n-1$, so its numbers above differ too.) The figure shows
# both layouts for $d = 32$.

# %% [markdown] lang="ja"
# 論文は、周波数 $\omega_i$ の正弦と余弦を列 $2i$ と $2i+1$ に隣り合わせて置きます（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）。
# tensor2tensor、fairseq、AllenNLP は、$n$ 個の正弦をすべて先に並べ、そのあとに余弦をすべて並べます（[連結配置](../docs/glossary.ja.md#concatenated-layout)）。
# 2 つの表に入っている数は同じで、順番が違うだけです。連結配置の列 $c$ は、インターリーブ配置の列 $\pi(c)$ にあたります。
# $$\pi(c) = \begin{cases} 2c & c < n \\ 2(c-n)+1 & c \ge n \end{cases}$$
# $P_{c,\pi(c)} = 1$ で、それ以外の成分が 0 の置換行列を $P$ とすると、列ベクトルについて $PE^{\mathrm{cat}}(p) = P\, PE^{\mathrm{int}}(p)$ が成り立ちます。
# コードでは `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]` です（AllenNLP は指数を $n-1$ で割るので、上の数そのものも違います）。
# 図は $d = 32$ での 2 つの配置です。


# %%
def layout_permutation(d):
    """pi as an index tensor, d even: concat column c = interleaved perm[c]."""
    n = d // 2
    return torch.tensor([2 * c if c < n else 2 * (c - n) + 1 for c in range(d)])


perm8 = layout_permutation(8)
print(f"perm (d = 8): {perm8.tolist()}, inverse: {perm8.argsort().tolist()}")


# %% tags=["check"] summary={"en": "the permuted interleaved table equals the concatenated one, for both frequency conventions", "ja": "並べ替えたインターリーブ配置の表は、n で割る版と n − 1 で割る版のどちらでも、連結配置の表と一致します"}
def concat_by_formula(p, d, endpoint=False):
    """The concatenated table from the formula, in float64: the sines of
    p w_i, then their cosines, w_i = 10000^(-i/n), or 10000^(-i/(n-1)) with
    endpoint; a zero column when d is odd (tensor2tensor, fairseq, AllenNLP)."""
    n = d // 2
    i = torch.arange(n, dtype=F64)
    omega = 10000.0 ** (-i / (n - 1 if endpoint else n))
    angle = p.double()[:, None] * omega  # [p, n]
    table = torch.cat([angle.sin(), angle.cos()], dim=-1)  # [p, 2n]
    return torch.nn.functional.pad(table, (0, d - 2 * n))  # [p, d]


# (0, n, 1, n+1, ...)
assert torch.equal(perm8.argsort(), torch.tensor([0, 4, 1, 5, 2, 6, 3, 7]))
for d in (8, 16, 512):
    perm = layout_permutation(d)
    P = torch.eye(d, dtype=F64)[perm]  # P[c, pi(c)] = 1
    assert_close(P.T @ P, torch.eye(d, dtype=F64))  # a permutation
    p = torch.arange(300)
    for endpoint in (False, True):
        interleaved = sinusoidal(p, d, endpoint=endpoint, dtype=F64)
        by_formula = concat_by_formula(p, d, endpoint)
        # PE_cat(p) = P PE_int(p), with PE_cat written from the formula
        assert_close(by_formula.T, P @ interleaved.T)
        assert_close(interleaved[..., perm], by_formula)
        concat = sinusoidal(p, d, layout="concat", endpoint=endpoint, dtype=F64)
        assert_close(concat, by_formula)

# %% tags=["figure"] alt={"en": ["Two heatmaps of the d = 32 sinusoidal encoding, position p across, dimension j down. Interleaved (left): sine and cosine rows alternate, slowing gradually. Concatenated (right): sines in the top half, cosines below, each slowing down."], "ja": ["d = 32 の正弦波位置エンコーディングの 2 つのヒートマップです（横軸は位置 p、縦軸は次元 j）。左のインターリーブ配置では正弦と余弦の行が交互に並び、下の行ほどゆっくり変化します。右の連結配置では上半分が正弦、下半分が余弦で、それぞれ下の行ほどゆっくり変化します。"]}
p = torch.arange(64)
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), sharey=True)
for ax, layout, title in zip(
    axes,
    ("interleaved", "concat"),
    (r"$PE^{\mathrm{int}}$", r"$PE^{\mathrm{cat}}$"),
    strict=True,
):
    im = ax.imshow(
        sinusoidal(p, 32, layout=layout).T,
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        interpolation="nearest",
    )
    ax.set_title(title)
    ax.set_xlabel("$p$")
    ax.grid(False)
axes[0].set_ylabel("$j$")
fig.colorbar(im, ax=axes, label="$PE_{(p,j)}$")
plt.show()

# %% [markdown] lang="en"
# A model built for one layout is the same model as one built for the other, once its
# weights are permuted alike. With the token embeddings in the rows of $X$ and their
# encodings in the rows of $E$, and $P^\top P = I$,
# $$(XP^\top + E^{\mathrm{int}}P^\top)(PW_Q) = (X + E^{\mathrm{int}})W_Q$$
# and the same for keys and values. So a [checkpoint](../docs/glossary.md#checkpoint)
# converts exactly by permuting its weights; loaded as it is under the other layout,
# it receives inputs it was never trained on, and its attention scores change. That
# is the lesson of every row of the table below; the next section measures what it
# costs a trained model.

# %% [markdown] lang="ja"
# 一方の配置用に作ったモデルは、重みも同じように並べ替えれば、もう一方の配置用に作ったモデルと同じものになります。
# トークンの埋め込みを $X$ の各行に、その位置エンコーディングを $E$ の各行に並べると、$P^\top P = I$ から次が成り立ちます。
# $$(XP^\top + E^{\mathrm{int}}P^\top)(PW_Q) = (X + E^{\mathrm{int}})W_Q$$
# キーとバリューも同じです。
# したがって[チェックポイント](../docs/glossary.ja.md#checkpoint)は、重みを並べ替えれば厳密に変換できます。
# しかし、重みを並べ替えずに別の配置で読み込むと、モデルは学習で一度も見なかった入力を受け取り、アテンションスコアが変わります。
# 下の一覧表のどの行にも、これと同じ教訓が当てはまります。重みをそのままにして別の変種で読み込むと学習済みのモデルがどれだけ損をするかは、次の節で測ります。

# %% tags=["check"] summary={"en": "with the weights permuted alike, the two layouts give the same outputs; without, scores differ", "ja": "重みも並べ替えれば 2 つの配置の出力は一致し、そのままではスコアが変わります"}
T, d, d_h = 6, 16, 8
x = torch.randn(T, d)
w_q, w_k, w_v = (torch.randn(d, d_h) / math.sqrt(d) for _ in range(3))
perm = layout_permutation(d)
e_int = sinusoidal(torch.arange(T), d)
e_cat = sinusoidal(torch.arange(T), d, layout="concat")  # E_int P^T


def qkv(x, e, w_q, w_k, w_v):
    h = x + e  # [T, d]
    return h @ w_q, h @ w_k, h @ w_v  # [T, d_h] each


def scores(q, k):
    return q @ k.T / math.sqrt(q.shape[-1])  # [T, T]


q_int, k_int, v_int = qkv(x, e_int, w_q, w_k, w_v)
# X P^T and P W: permute the embedding columns and the weight rows alike
q_cat, k_cat, v_cat = qkv(x[:, perm], e_cat, w_q[perm], w_k[perm], w_v[perm])
assert_close(q_cat, q_int)
assert_close(scores(q_cat, k_cat), scores(q_int, k_int))
assert_close(attention(q_cat, k_cat, v_cat), attention(q_int, k_int, v_int))
# the other layout with the same, unpermuted weights: different scores
q_swap, k_swap, _ = qkv(x, e_cat, w_q, w_k, w_v)
assert not torch.allclose(
    scores(q_swap, k_swap), scores(q_int, k_int), atol=1e-2
)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: converting a checkpoint, and tensor2tensor's history.** In a full
# Transformer, every matrix that reads from or writes to the
# [residual stream](../docs/glossary.md#residual-stream), and every per-feature
# parameter on it such as the gains and biases of the layer norms, is permuted
# alike. The usual initialisers draw the entries independently and optimisers such
# as Adam act coordinate by coordinate, so training either layout from scratch should
# give the same distribution of models, in permuted coordinates (an argument, not
# measured here). tensor2tensor, the code that the paper's Conclusion names for its
# models, has used the concatenated layout and the $n-1$ denominator since its first
# commit with code (June 2017), so the paper's models were presumably trained with
# that variant rather than the one §3.5 writes down. A pull request that reordered
# the columns to match the paper (#177) was merged on 24 July 2017 and undone the
# next day "to make trained models work"; Łukasz Kaiser, one of the authors, wrote
# that the change "breaks all trained models". Asked whether the order matters
# (issue #391), he answered that he thought it does not, because the layer after the
# encoding can permute the coordinates: the argument above. Since 2019 a comment in
# the code says the layout "slightly differs from the published paper".

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：チェックポイントの変換と、tensor2tensor の経緯**
#
# Transformer 全体では、[残差ストリーム](../docs/glossary.ja.md#residual-stream)を読み書きするすべての行列と、層正規化のスケールやシフトのように残差ストリームの次元ごとに持つすべてのパラメータを、同じように並べ替えます。
# 通常の初期化では各成分を独立に乱数で決め、Adam のようなオプティマイザも座標ごとに更新量を計算します。
# そのため、どちらの配置で一から学習しても、得られるモデルの分布は座標の並び順を除いて同じになるはずです（理論上の議論で、ここでは測っていません）。
# 論文が結論の節でモデルのコードとして挙げる tensor2tensor は、コードが入った最初のコミット（2017 年 6 月）から連結配置を使い、指数を $n-1$ で割っています。
# そのため論文のモデルは、§3.5 に書かれた版ではなく、この変種で学習されたと考えられます。
# 列を論文どおりに並べ替えるプルリクエスト（#177）は 2017 年 7 月 24 日にマージされましたが、翌日「学習済みのモデルが動くように」元に戻されました。
# 著者の 1 人である Łukasz Kaiser は、この変更が「学習済みのモデルをすべて壊す」と書いています。
# 並び順が重要かという質問（イシュー #391）には、エンコーディングの後の層が座標を並べ替えられるので重要ではないだろう、と答えています。これは上で述べた議論そのものです。
# 2019 年からは、コードのコメントに、この配置は「公開された論文とは少し違う」と書かれています。

# %% [markdown] lang="en"
# ## A trained model under another variant
#
# How much does a wrong variant cost a trained model? Take the reversal
# [toy model](../docs/glossary.md#toy-model) of
# [*Learned absolute embeddings*](03-learned-embeddings.ipynb): one attention layer
# must reverse 16 random tokens, which it can do only by position. Give it a frozen
# sinusoid table ($d = 32$) and train it (301 Adam updates, a second or two). Then,
# without retraining, swap in another variant's table and count the tokens it still
# puts in place, out of 16,000.

# %% [markdown] lang="ja"
# ## 学習済みのモデルを別の変種で動かす
#
# 変種を取り違えると、学習済みのモデルはどれだけ損をするのでしょうか。
# [「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章の、反転の課題を解くトイモデルを使います。1 層のアテンションで 16 個のランダムなトークンを逆順に並べる課題で、位置がわからなければ解けません。
# このトイモデルに固定した正弦波の表（$d = 32$）を与えて学習します（Adam で 301 回の更新、1〜2 秒です）。
# 次に、学習し直さずに表だけを別の変種のものに差し替え、16,000 個のトークンのうち、それでも正しい位置に置けるものの割合を求めます。

# %%
T, d = 16, 32
torch.set_num_threads(1)  # the same sums in the same order on every run


def frozen(offset=0, **variant):
    """A fixed sinusoid table for positions offset .. offset + T - 1."""
    table = sinusoidal(torch.arange(T) + offset, d, dtype=F64, **variant)
    return nn.Embedding.from_pretrained(table)  # looked up by position


def trained(seed, table=None, steps=300, **variant):
    """The reversal toy trained with a fixed table, a variant's by default."""
    torch.manual_seed(seed)
    pos = (
        frozen(**variant)
        if table is None
        else nn.Embedding.from_pretrained(table)
    )
    model = Reverser(pos).double()
    train(model, steps)  # steps 0 .. steps: 301 updates by default
    return model


variants = {
    "concatenated": {"layout": "concat"},
    "n - 1": {"endpoint": True},
    "both (AllenNLP)": {"layout": "concat", "endpoint": True},
    "shifted by 2": {"offset": 2},
}
model = trained(0)  # with the paper's table
print(f"under the paper's table   {accuracy(model):.3f}")
for name, variant in variants.items():
    model.pos = frozen(**variant)  # swapped in, no retraining
    print(f"under {name:20}{accuracy(model):.3f}")
model.pos = frozen()

# %% [markdown] lang="en"
# Trained from scratch with any of these tables instead, the toy puts every token in
# place too (three seeds each): from scratch the choice does not matter here. Swapped
# into the trained model, the concatenated layout and AllenNLP's variant leave it
# near [chance level](../docs/glossary.md#chance-level): 0.12 to 0.18 over five
# seeds, where a uniform guess among ten tokens scores 0.1. Dividing by $n - 1$
# costs less (0.92 to 0.998 over five seeds); over these 16 positions its entries
# stay within 0.35 of the paper's, but at $d = 32$ they first differ by more than 1
# at $p = 46$, so a model that reads longer inputs would notice. The shift by two, at
# 0.104, looks like chance and is worse: the model still reverses, perfectly, around
# the wrong centre.

# %% [markdown] lang="ja"
# 代わりにこれらの表で一から学習すると、どの表でもトイモデルはすべてのトークンを正しい位置に置きます（シードは各 3 つ）。一から学習するなら、この課題では変種の選び方は結果を変えません。
# 一方、学習済みのモデルの表を連結配置や AllenNLP の変種の表に差し替えると、正解率は 5 つのシードで 0.12〜0.18 まで落ちます。
# [チャンスレベル](../docs/glossary.ja.md#chance-level)の 0.1（10 種類のトークンから一様に選んだとき）に近い値です。
# $n - 1$ で割る変種の影響はそれより小さく、5 つのシードで 0.92〜0.998 です。この 16 個の位置では、論文の表との成分の差は 0.35 以内に収まります。しかし $d = 32$ では $p = 46$ で初めて差が 1 を超えるので、もっと長い入力を読むモデルなら違いが出るはずです。
# 位置を 2 ずらした表の 0.104 はチャンスレベル並みに見えますが、事態はそれより深刻です。モデルは反転を完璧にこなしたまま、中心だけを取り違えています。

# %%
model.pos = frozen(offset=2)
tokens, _ = batch(torch.Generator().manual_seed(2), size=1000)
with torch.no_grad():
    answer = model(tokens).argmax(-1)  # [b, T]
model.pos = frozen()
p = torch.arange(T - 4)
hits = answer[:, p] == tokens[:, T - 5 - p]
print(f"answer at p is the token at T - 5 - p: {hits.double().mean():.3f}")

# %% [markdown] lang="en"
# A query at $p$ now carries the encoding of $p + 2$, so it looks for the key whose
# encoding is that of $T - 1 - (p + 2)$, which sits at $T - 5 - p$: at the first 12 of
# the 16 positions, where that key exists, every answer is four places off, given
# with the confidence of a trained model. A mismatch of layout
# converts exactly, by permuting the weights as the equation above says. In this toy,
# which has no output projection, that is the input columns of every weight that
# reads the [residual stream](../docs/glossary.md#residual-stream), and the
# coordinates that the token table and the values write to it; in a full Transformer,
# every matrix on the stream
# ([the note above](#deeper-converting-a-checkpoint-and-tensor2tensors-history)). A
# different denominator cannot be converted: its frequencies differ.

# %% [markdown] lang="ja"
# 位置 $p$ のクエリは $p + 2$ のエンコーディングを持つので、$T - 1 - (p + 2)$ のエンコーディングを持つキーを探します。そのキーは位置 $T - 5 - p$ にあります。16 個の位置のうち、このキーが存在する最初の 12 個では、答えがすべて 4 つずれます。しかもモデルはその答えを、学習済みのモデルらしい高い確信度で返します。
# 配置が違うだけなら、上の式のとおりに重みを並べ替えれば、チェックポイントを厳密に変換できます。
# 出力の射影を持たないこのトイモデルで並べ替えるのは、[残差ストリーム](../docs/glossary.ja.md#residual-stream)を読むすべての重み行列の入力側の列と、トークンの表とバリューがストリームに書き込む座標です。
# 完全な Transformer では、ストリームに関わるすべての行列を並べ替えます（[上の「さらに詳しく」](#deeper-チェックポイントの変換とtensor2tensor-の経緯)）。
# 分母が違う場合は変換できません。周波数そのものが違うからです。

# %%
perm = layout_permutation(d)  # concatenated column c = interleaved perm[c]
converted = copy.deepcopy(model)
converted.pos = frozen(layout="concat")
with torch.no_grad():
    # the query, key, value and readout weights read the stream: their
    # input columns; the token table and the values write to it: their
    # coordinates on it
    converted.tok.weight.copy_(model.tok.weight[:, perm])
    converted.w_qkv.weight.copy_(model.w_qkv.weight[:, perm])
    converted.readout.weight.copy_(model.readout.weight[:, perm])
    values = converted.w_qkv.weight[2 * d :]
    values.copy_(values[perm])
print(f"converted, under the concatenated table: {accuracy(converted):.3f}")


# %% tags=["check"] summary={"en": "the converted model's logits are the trained one's; over five seeds the swaps score as stated; from scratch every table learns; the shifted model answers four places off", "ja": "変換したモデルのロジットは、元のモデルのロジットと一致します。5 つのシードで差し替えの結果は本文どおりで、一から学習すればどの表でも課題を解けます。ずらしたモデルの答えは 4 つずれます"}
check_tokens, _ = batch(torch.Generator().manual_seed(4), size=100)
with torch.no_grad():
    assert_close(
        converted(check_tokens), model(check_tokens), rtol=0, atol=1e-12
    )
assert accuracy(model) == 1.0 and accuracy(converted) == 1.0
assert hits.all()  # the shifted model: the token at T - 5 - p, every time
swapped = {name: [] for name in variants}  # seed -> accuracy, per variant
for seed in range(5):
    seeded = trained(seed)
    assert accuracy(seeded) == 1.0
    for name, variant in variants.items():
        seeded.pos = frozen(**variant)
        swapped[name].append(accuracy(seeded))
near_chance = swapped["concatenated"] + swapped["both (AllenNLP)"]
assert (
    f"{min(near_chance):.2f}" == "0.12" and f"{max(near_chance):.2f}" == "0.18"
)
assert 0.92 <= min(swapped["n - 1"]) < 0.93 and max(swapped["n - 1"]) < 1
assert max(swapped["shifted by 2"]) < 0.12  # near a guess: it answers elsewhere
for seed in range(3):  # from scratch, every table learns
    for variant in variants.values():
        assert accuracy(trained(seed, **variant)) == 1.0
gap = (frozen().weight - frozen(endpoint=True).weight).abs()  # [p, j], p < 16
assert 0.34 < gap.max() < 0.35
far = torch.arange(2048)
wide_gap = (
    sinusoidal(far, d, dtype=F64) - sinusoidal(far, d, endpoint=True, dtype=F64)
).abs()
first_above_1 = int((wide_gap.amax(-1) > 1).nonzero()[0])
assert first_above_1 == 46

# %% [markdown] lang="en"
# ## The variants, and when they matter
#
# Five choices separate the implementations. In exact arithmetic each keeps the
# rotation property $PE(p+k) = M_k\, PE(p)$ of [*Sinusoidal positional encoding*](01-sinusoidal.ipynb)
# on every sine–cosine pair (an odd $d$ may leave one column outside it), so from
# scratch none should matter (the toy above agrees for the layout, the denominator
# and the first position), and each breaks a
# checkpoint trained with another. Sizes are for $d = 512$.
#
# | what differs | who does what | when it matters, and how much | in `posenc` |
# |---|---|---|---|
# | layout | interleaved: the paper, labml; concatenated: tensor2tensor, fairseq, AllenNLP | loading a checkpoint, unless its weights are permuted: the same numbers in another order | `layout="interleaved"` (default) or `"concat"` |
# | exponent divided by $n$ or by $n-1$ | $n$: the paper, labml; $n-1$: tensor2tensor, fairseq, AllenNLP | loading a checkpoint: entries differ by up to 1.9895 for $p < 2048$, by more than 1 from $p = 732$ | `endpoint=False` (default) or `True` |
# | odd $d$: the leftover column | a zero column: tensor2tensor, fairseq, AllenNLP; a lone sine: XLM, Marian; labml fails | loading: one column of $d$; a lone sine is outside the rotation property | a zero column; the lone sine: width $d+1$, base $10000^{(d+1)/d}$, first $d$ columns |
# | first position | fairseq numbers real tokens from `padding_idx + 1`, so token $t$ gets $PE(t+2)$ | loading: each added vector moves by 6.95 (its norm: 16); dot products unchanged | `SinusoidalEmbedding(rows, d, padding_idx=1, layout="concat", endpoint=True)` on fairseq's positions |
# | angles in float32 | labml, AllenNLP, fairseq, tensor2tensor | mixing implementations: labml's angles off by up to 6.2e-02 near $p = 2^{20}$; from $2^{24}$ on, positions collide even within one | none: angles in float64, entries off by 3.0e-08 |
#
# The notes below rebuild each row with `posenc` and measure it.

# %% [markdown] lang="ja"
# ## 変種と、その違いが問題になる場面
#
# 実装の違いは 5 つの選択にまとまります。
# 丸め誤差を考えなければ、どの変種も[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の回転の性質 $PE(p+k) = M_k\, PE(p)$ を、正弦と余弦のすべてのペアで保ちます（奇数の $d$ では 1 列だけ外れることがあります）。
# そのため一から学習するなら、どれを選んでも結果は変わらないはずです（上のトイモデルでも、配置、分母、最初の位置についてはそうでした）。
# しかしどの選択も、別の変種で学習したチェックポイントを壊します。表の数値は $d = 512$ での値です。
#
# | 違い | どの実装がどうするか | 問題になる場面と影響の大きさ | `posenc` では |
# |---|---|---|---|
# | 配置 | インターリーブ配置：論文、labml。連結配置：tensor2tensor、fairseq、AllenNLP | 読み込み：重みも並べ替えれば問題なし。中身は同じ数で、違いは順番だけ | `layout="interleaved"`（既定値）か `"concat"` |
# | 指数を $n$ で割るか $n-1$ で割るか | $n$：論文、labml。$n-1$：tensor2tensor、fairseq、AllenNLP | 読み込み：$p < 2048$ で成分の差は最大 1.9895、$p = 732$ から 1 を超える | `endpoint=False`（既定値）か `True` |
# | 奇数の $d$ で余る列 | 0 の列：tensor2tensor、fairseq、AllenNLP。孤立した正弦：XLM、Marian。labml はエラー | 読み込み：$d$ 列のうち 1 列。孤立した正弦には回転の性質が成り立たない点にも注意 | 0 の列。孤立した正弦は、次元数 $d+1$、底 $10000^{(d+1)/d}$ の先頭 $d$ 列 |
# | 最初の位置 | fairseq は実トークンを `padding_idx + 1` から数えるので、トークン $t$ には $PE(t+2)$ が足される | 読み込み：足すベクトルが 6.95 の距離だけ移動（ノルムは 16）。内積は不変 | fairseq の位置に `SinusoidalEmbedding(rows, d, padding_idx=1, layout="concat", endpoint=True)` |
# | float32 の角度 | labml、AllenNLP、fairseq、tensor2tensor | 実装を混ぜるとき：$p = 2^{20}$ 付近で labml の角度に最大 6.2e-02 のずれ。$2^{24}$ からは 1 つの実装の中でも位置が重複 | なし：角度は float64 で作り、成分のずれは 3.0e-08 |
#
# 下の「さらに詳しく」で、各行を `posenc` で再現して測ります。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the libraries one by one.** labml's
# `PositionalEncoding(d_model, dropout_prob, max_len=5000)` follows the paper: in
# `posenc`, `SinusoidalPositionalEncoding(d, dropout=..., batch_first=False)`. It takes
# `[seq, batch, d]`, applies dropout to the sum (the paper's rate for the base model
# is 0.1, §5.4). The $\sqrt{d_{\text{model}}}$ scaling of the token embeddings
# (§3.4) lives in a separate module, `EmbeddingsWithPositionalEncoding`, which keeps
# its own table in the `state_dict`; `PositionalEncoding` does not. AllenNLP's
# `SinusoidalPositionalEncoding(min_timescale=1.0, max_timescale=1.0e4)` follows
# tensor2tensor: `SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)`. It
# takes `[batch, seq, d]`, rebuilds its table at every call and applies no dropout.
# `posenc` keeps no table in the `state_dict`, grows a cache as longer inputs arrive
# and forms the angles in float64. The scale of the token embeddings belongs to the
# checkpoint too: fairseq multiplies them by $\sqrt{d}$ unless `no_scale_embedding` is
# set, Hugging Face's Marian and BART when `scale_embedding` is true, and a port that
# gets it wrong changes the inputs as a wrong layout does.
#
# | implementation | layout | exponent of $10000$ | odd $d$ | first position |
# |---|---|---|---|---|
# | Vaswani et al. (2017) | interleaved | $-i/n$ | not stated | not stated |
# | tensor2tensor | concatenated | $-i/(n-1)$ | zero column | 0 (`start_index`) |
# | fairseq | concatenated | $-i/(n-1)$ | zero column | `padding_idx + 1` |
# | AllenNLP | concatenated | $-i/(n-1)$ | zero column | 0 |
# | labml; the Annotated Transformer | interleaved | $-i/n$ | shape error | 0 |
# | jadore801120; Hugging Face XLM and DistilBERT (both when set to sinusoids) | interleaved | $-2i/d$ | a lone sine | 0 |
# | jadore801120's early version | interleaved | $-2j/d$, column $j$ | a lone sine | 1 |
# | Hugging Face Marian | concatenated | $-2i/d$ | a lone sine, in column $n$ | 0 |
# | OpenAI Whisper, audio encoder (`sinusoids`) | concatenated | $-i/(n-1)$ | refused (`assert`) | 0 |
# | diffusers `get_timestep_embedding` | concatenated, cosines first if `flip_sin_to_cos=True` | $-i/(n-s)$, `downscale_freq_shift` $s = 1$ by default; angles times `scale` | zero column | a timestep $t$, may be fractional |
# | guided-diffusion, GLIDE `timestep_embedding` | concatenated, cosines first | $-i/n$ | zero column | a timestep $t$, may be fractional |
#
# For even $d$, $-2i/d = -i/n$. For odd $d$, labml computes one frequency too many
# and torch refuses to assign it; the per-column formula, angle
# $p/10000^{2\lfloor j/2 \rfloor/d}$ for column $j$, leaves a sine without its cosine,
# $\sin(p \cdot 10000^{-6/7})$ for $d = 7$. No $1 \times 1$ block $c$ shifts it: at
# $p = 0$ it would need $c \sin 0 = \sin(k \cdot 10000^{-6/7}) \ne 0$ (the argument of
# [The sine alone is not enough](01-sinusoidal.ipynb#the-sine-alone-is-not-enough)).
# jadore801120, XLM, DistilBERT and Marian form the angles in NumPy's float64; the
# others in float32. Cosines first, as in GLIDE and in diffusers with
# `flip_sin_to_cos=True`, is one more column permutation, to which a checkpoint is tied like any other.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：ライブラリを 1 つずつ見る**
#
# labml の `PositionalEncoding(d_model, dropout_prob, max_len=5000)` は論文に従っていて、
# `posenc` でいえば `SinusoidalPositionalEncoding(d, dropout=..., batch_first=False)` にあたります。
# 入力は `[seq, batch, d]` で、埋め込みと位置エンコーディングの和にドロップアウトをかけます（論文の base モデルではドロップアウト率 0.1、§5.4）。
# トークンの埋め込みに $\sqrt{d_{\text{model}}}$ を掛ける処理（§3.4）は、別のモジュール `EmbeddingsWithPositionalEncoding` にあります。
# このモジュールは独自の表を `state_dict` に保存しますが、`PositionalEncoding` は保存しません。
# AllenNLP の `SinusoidalPositionalEncoding(min_timescale=1.0, max_timescale=1.0e4)` は tensor2tensor に従っていて、
# `posenc` でいえば `SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)` にあたります。
# 入力は `[batch, seq, d]` で、表を呼び出しのたびに作り直し、ドロップアウトはかけません。
# `posenc` は `state_dict` に表を含めず、長い入力が来るとキャッシュを広げ、角度を float64 で作ります。
# トークンの埋め込みのスケールもチェックポイントの一部です。fairseq は `no_scale_embedding` を指定しない限り $\sqrt{d}$ を掛け、Hugging Face の Marian と BART は `scale_embedding` が真のときに掛けます。移植でこれを間違えると、配置を間違えたときと同じように入力が変わります。
#
# | 実装 | 配置 | $10000$ の指数 | 奇数の $d$ | 最初の位置 |
# |---|---|---|---|---|
# | Vaswani ら（2017） | インターリーブ配置 | $-i/n$ | 記述なし | 記述なし |
# | tensor2tensor | 連結配置 | $-i/(n-1)$ | 0 の列 | 0（`start_index`） |
# | fairseq | 連結配置 | $-i/(n-1)$ | 0 の列 | `padding_idx + 1` |
# | AllenNLP | 連結配置 | $-i/(n-1)$ | 0 の列 | 0 |
# | labml、The Annotated Transformer | インターリーブ配置 | $-i/n$ | 形状エラー | 0 |
# | jadore801120、Hugging Face の XLM と DistilBERT（どちらも設定で正弦波を選んだとき） | インターリーブ配置 | $-2i/d$ | 孤立した正弦 | 0 |
# | jadore801120 の初期の版 | インターリーブ配置 | $-2j/d$（列 $j$） | 孤立した正弦 | 1 |
# | Hugging Face の Marian | 連結配置 | $-2i/d$ | 孤立した正弦（列 $n$） | 0 |
# | OpenAI の Whisper の音声エンコーダ（`sinusoids`） | 連結配置 | $-i/(n-1)$ | 受け付けない（`assert`） | 0 |
# | diffusers の `get_timestep_embedding` | 連結配置（`flip_sin_to_cos=True` なら余弦が先） | $-i/(n-s)$（`downscale_freq_shift` の既定値は $s = 1$）、角度に `scale` を掛ける | 0 の列 | タイムステップ $t$（小数もある） |
# | guided-diffusion、GLIDE の `timestep_embedding` | 連結配置（余弦が先） | $-i/n$ | 0 の列 | タイムステップ $t$（小数もある） |
#
# $d$ が偶数なら $-2i/d = -i/n$ です。
# $d$ が奇数だと、labml は周波数を 1 つ多く計算し、その代入を torch が拒否します。
# 列 $j$ の角度を $p/10000^{2\lfloor j/2 \rfloor/d}$ とする列ごとの式では、対になる余弦のない正弦が残ります。$d = 7$ では $\sin(p \cdot 10000^{-6/7})$ です。
# どんな $1 \times 1$ のブロック $c$ を掛けても、この正弦を、位置を一定の幅だけ先へずらした値には移せません。$p = 0$ では $c \sin 0 = \sin(k \cdot 10000^{-6/7}) \ne 0$ が必要ですが、左辺は常に 0 だからです（[「正弦波位置エンコーディング」](01-sinusoidal.ipynb)の章の[「正弦だけでは足りない」](01-sinusoidal.ipynb#正弦だけでは足りない)の節と同じ議論です）。
# jadore801120、XLM、DistilBERT、Marian は NumPy の float64 で角度を作り、ほかは float32 で作ります。
# GLIDE や、`flip_sin_to_cos=True` を指定した diffusers のように余弦を先に置くのも列の並べ替えの一種で、チェックポイントはほかの並べ替えと同様、この並び順に縛られます。


# %% tags=["deeper", "check"] summary={"en": "labml's arithmetic in float32 equals posenc's module; dropout zeroes or scales by 1/0.9", "ja": "float32 で計算した labml の結果は posenc のモジュールと一致します。ドロップアウトは各成分を 0 にするか 1/0.9 倍にします"}
def labml_like(x):  # labml's arithmetic without dropout; x: [seq, batch, d]
    seq, _, d = x.shape
    # frequencies exp(2i * -(ln 10000 / d)), in float32 as labml computes them
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    freq = torch.exp(two_i * -(math.log(10000.0) / d))
    angle = torch.arange(seq, dtype=torch.float32)[:, None] * freq  # [seq, d/2]
    # sin, cos, sin, ...
    table = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(seq, d)
    return x + table[:, None, :]  # broadcast over the batch axis


labml = SinusoidalPositionalEncoding(16, dropout=0.1, batch_first=False)
x = torch.randn(10, 3, 16)  # [seq, batch, d]
assert_close(labml.eval()(x), labml_like(x))  # eval(): dropout off
assert len(labml.state_dict()) == 0  # like labml's non-persistent buffer
y = labml.train()(x)  # dropout on: zeroed, or scaled by 1 / (1 - 0.1)
kept = y != 0
assert_close(y[kept], labml_like(x)[kept] / 0.9)
assert 0.8 < kept.float().mean() < 0.97


# %% tags=["deeper", "check"] summary={"en": "AllenNLP's arithmetic equals posenc's concatenated n − 1 module, for even and odd widths", "ja": "AllenNLP の計算は、次元数が偶数でも奇数でも、連結配置で n − 1 で割る posenc のモジュールと一致します"}
def allennlp_like(x):  # AllenNLP's arithmetic; x: [batch, seq, d]
    _, seq, d = x.shape
    n = d // 2
    # inverse timescales exp(i * -(ln 10000 / (n - 1))), in float32
    step = math.log(10000.0) / (n - 1)
    inverse = torch.exp(torch.arange(n, dtype=torch.float32) * -step)
    position = torch.arange(seq, dtype=torch.float32)[:, None]
    angle = position * inverse  # [seq, n]
    # all sines, then all cosines; a zero column if d is odd
    table = torch.cat([angle.sin(), angle.cos()], dim=-1)
    return x + torch.nn.functional.pad(table, (0, d - 2 * n))


for d in (16, 15):  # an even and an odd d
    x = torch.randn(2, 10, d)
    module = SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)
    assert_close(module(x), allennlp_like(x))
    if d % 2:  # odd d: the last column stays zero
        assert not module(torch.zeros(2, 10, d))[..., -1].any()


# %% tags=["deeper", "check"] summary={"en": "d = 7: posenc adds a zero column, labml fails, the per-column formula adds a lone sine", "ja": "d = 7 で posenc は 0 の列を加え、labml は失敗し、列ごとの式は孤立した正弦を加えます"}
def labml_like(p, d):
    """labml's construction: one frequency per even column, ceil(d/2) of
    them, exp(2i * -(ln 10000 / d)) in float32 as labml computes them."""
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    angle = p.float()[:, None] * torch.exp(two_i * -(math.log(10000.0) / d))
    table = torch.zeros(len(p), d)
    table[:, 0::2] = angle.sin()
    table[:, 1::2] = angle.cos()  # floor(d/2) columns, ceil(d/2) values
    return table


def per_column(p, d):
    """jadore801120: angle p / 10000^(2 floor(j/2) / d) for column j."""
    j = torch.arange(d, dtype=F64)
    angle = p.double()[:, None] / 10000.0 ** (2 * (j // 2) / d)  # [p, d]
    table = angle.clone()
    table[:, 0::2] = angle[:, 0::2].sin()  # the last one too when d is odd
    table[:, 1::2] = angle[:, 1::2].cos()
    return table


p = torch.arange(4)
table7 = sinusoidal(p, 7)
assert torch.equal(table7[:, 6], torch.zeros(4))  # the zero column
assert_close(table7[:, :6], sinusoidal(p, 6), rtol=0, atol=0)
q = torch.arange(50)
for d in (6, 7, 9, 512, 513):
    assert_close(
        sinusoidal(q, d, layout="concat", endpoint=True, dtype=F64),
        concat_by_formula(q, d, endpoint=True),
    )
    if d % 2 == 0:  # even d: labml and the per-column formula are the paper's
        assert_close(labml_like(q, d), sinusoidal(q, d), rtol=0, atol=1e-5)
        assert_close(per_column(q, d), sinusoidal(q, d, dtype=F64))
    else:  # odd d: labml's assignment fails
        try:
            labml_like(q, d)
            raise AssertionError("labml's construction accepted an odd d")
        except RuntimeError as err:
            assert str(err).startswith("The expanded size")
lone = per_column(q, 7)[:, 6]
assert_close(lone, torch.sin(q * 10000.0 ** (-6 / 7)).double())
assert lone[0] == 0 and (lone[1:] != 0).all()  # c sin 0 = 0, sin(k ...) != 0


# %% tags=["deeper", "check"] summary={"en": "for odd d the per-column and Marian tables are posenc's d + 1 tables, cut; both match rows that transformers printed (pasted here, 9 digits)", "ja": "奇数の d では、列ごとの表と Marian の表は、次元数 d + 1 の posenc の表の先頭 d 列です。どちらも transformers が出力した行（9 桁で貼り付けたもの）と一致します"}
def marian_like(p, d):
    """Hugging Face's Marian: the per-column angles, stored concatenated:
    sines of the even columns, then cosines of the odd ones."""
    j = torch.arange(d, dtype=F64)
    angle = p.double()[:, None] / 10000.0 ** (2 * (j // 2) / d)  # [p, d]
    return torch.cat([angle[:, 0::2].sin(), angle[:, 1::2].cos()], dim=-1)


q = torch.arange(50)
for d in (6, 7, 9, 513):
    if d % 2 == 0:  # even d: Marian is posenc's concatenated table
        concat = sinusoidal(q, d, layout="concat", dtype=F64)
        assert_close(marian_like(q, d), concat)
        continue
    base = 10000.0 ** ((d + 1) / d)
    wider = sinusoidal(q, d + 1, base=base, dtype=F64)
    assert_close(per_column(q, d), wider[:, :d])
    wider_cat = sinusoidal(q, d + 1, layout="concat", base=base, dtype=F64)
    assert_close(marian_like(q, d), wider_cat[:, :d])
# row p = 3 as printed by transformers (9 digits):
# MarianSinusoidalPositionalEmbedding(5, d).create_weight()[3], d = 6 and 7,
# and create_sinusoidal_embeddings(5, 7, out) of XLM, out[3]
hf_rows = {
    "marian, d = 6": [
        0.141120002, 0.138798103, 0.00646325899,
        -0.989992499, 0.990320683, 0.999979138,
    ],
    "marian, d = 7": [
        0.141120002, 0.214232191, 0.0155377984, 0.0011182779,
        -0.989992499, 0.976782739, 0.999879301,
    ],
    "xlm, d = 7": [
        0.141120002, -0.989992499, 0.214232191, 0.976782739,
        0.0155377984, 0.999879301, 0.0011182779,
    ],
}  # fmt: skip
three = torch.tensor([3])
ours = {
    "marian, d = 6": marian_like(three, 6)[0],
    "marian, d = 7": marian_like(three, 7)[0],
    "xlm, d = 7": per_column(three, 7)[0],
}
for name, row in hf_rows.items():
    assert_close(ours[name].float(), torch.tensor(row), rtol=0, atol=1e-7)
# Marian's lone sine sits in column n = 3, before the cosines
assert_close(
    marian_like(q, 7)[:, 3], torch.sin(q * 10000.0 ** (-6 / 7)).double()
)


# %% tags=["deeper", "check"] summary={"en": "transcribed, diffusers' default and GLIDE's function match posenc at fractional timesteps, GLIDE's with the cosines moved first", "ja": "書き直した diffusers の関数（既定の設定）と GLIDE の関数は、小数のタイムステップでも posenc と一致します。GLIDE は余弦を先に移した表と一致します"}
def timestep_embedding(t, d, shift=1.0, cos_first=False):
    """diffusers' get_timestep_embedding, transcribed: exp in float32,
    exponent / (n - shift), a zero column for odd d.
    GLIDE: shift=0, cos_first."""
    n = d // 2
    exponent = -math.log(10000) * torch.arange(n, dtype=torch.float32)
    angle = t[:, None].float() * torch.exp(exponent / (n - shift))
    emb = torch.cat([angle.sin(), angle.cos()], dim=-1)
    if cos_first:
        emb = torch.cat([emb[:, n:], emb[:, :n]], dim=-1)
    return torch.nn.functional.pad(emb, (0, d % 2))


t = torch.tensor([0.0, 0.5, 17.25, 999.0])  # fractional timesteps too
diffusers = sinusoidal(t, 7, layout="concat", endpoint=True)  # s = 1, odd d
assert_close(timestep_embedding(t, 7), diffusers, rtol=0, atol=1e-4)
glide = sinusoidal(t, 8, layout="concat")  # s = 0, then cosines first
glide = torch.cat([glide[:, 4:], glide[:, :4]], dim=-1)
assert_close(timestep_embedding(t, 8, 0.0, True), glide, rtol=0, atol=1e-4)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how far the two denominators drift apart.**
# $$\omega_i = 10000^{-i/n}, \qquad \omega'_i = 10000^{-i/(n-1)}$$
# Both start at $\omega_0 = \omega'_0 = 1$; their ratio
# $\omega_i/\omega'_i = 10000^{i/(n(n-1))}$ grows with $i$ and reaches $10000^{1/n}$ at
# $i = n-1$. A small relative difference, but the angles $p\,\omega_i$ drift apart in
# proportion to $p$. Since $|\sin a - \sin b| \le |a - b|$, each entry differs by at
# most the angle gap $p\,|\omega_i - \omega'_i|$, and a gap of $\pi$ turns an entry into
# the negative of the other. For $d = 512$ (printed below) the lowest frequency
# differs by a relative 0.0366, yet entries differ by up to 1.9895, nearly the full
# range of a sine. The gap is widest not at the slowest pair but at $i = 28$: 2.95
# radians at $p = 2047$. The two spectra look alike (left); the angle gap (right)
# shows how far apart the encodings are.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：2 つの分母の違いはどこまで広がるか**
#
# $$\omega_i = 10000^{-i/n}, \qquad \omega'_i = 10000^{-i/(n-1)}$$
# どちらも $\omega_0 = \omega'_0 = 1$ から始まり、比 $\omega_i/\omega'_i = 10000^{i/(n(n-1))}$ は $i$ とともに大きくなって、$i = n-1$ で $10000^{1/n}$ になります。
# 相対的には小さな違いですが、両者の角度 $p\,\omega_i$ の差は $p$ に比例して広がります。
# $|\sin a - \sin b| \le |a - b|$ なので、各成分の差は角度の差 $p\,|\omega_i - \omega'_i|$ 以下です。角度の差が $\pi$ に達すると、一方の成分はもう一方の正負を反転した値になります。
# $d = 512$ では、最も低い周波数の相対的な違いは 0.0366 にすぎないのに、成分の差は最大 1.9895 と、正弦の値域の幅にほぼ等しくなります（下の出力）。
# 角度の差が最も大きいのは最も遅いペアではなく $i = 28$ で、$p = 2047$ では 2.95 ラジアンです。
# 左の 2 つのスペクトルはほとんど同じに見えますが、右の角度の差は、2 つのエンコーディングがどれほど離れているかを示します。

# %% tags=["deeper"]
d, n = 512, 256
i = torch.arange(n, dtype=F64)
omega = 10000.0 ** (-i / n)  # the paper, labml
omega_t2t = 10000.0 ** (-i / (n - 1))  # tensor2tensor, fairseq, AllenNLP
pos = torch.arange(2048)
paper = sinusoidal(pos, d, dtype=F64)
t2t = sinusoidal(pos, d, endpoint=True, dtype=F64)
gap = (paper - t2t).abs()  # [p, column]
widest = 2047 * (omega - omega_t2t)  # the angle gaps at p = 2047
print(
    f"lowest frequency, relative gap: {omega[-1] / omega_t2t[-1] - 1:.4f}\n"
    f"largest entry difference: {gap.max():.4f}\n"
    f"  above 1 from p = {int((gap.amax(-1) > 1).nonzero()[0])}\n"
    f"widest angle gap at p = 2047\n"
    f"  {widest.max():.2f} rad, at i = {int(widest.argmax())}",
    end="",
)

# %% tags=["deeper", "check"] summary={"en": "the frequencies and their ratio are as stated; every entry gap stays within the angle gap", "ja": "周波数と比は本文どおりで、どの成分の差も角度の差以下です"}
# the frequencies, read back from p = 1 (omega_i <= 1: atan2 returns them)
assert_close(torch.atan2(paper[1, 0::2], paper[1, 1::2]), omega)
assert_close(torch.atan2(t2t[1, 0::2], t2t[1, 1::2]), omega_t2t)
assert omega[0] == omega_t2t[0] == 1
ratio = omega / omega_t2t
assert_close(ratio, 10000.0 ** (i / (n * (n - 1))))
assert (ratio[1:] > ratio[:-1]).all()  # grows with i
assert_close(ratio[-1], torch.tensor(10000.0 ** (1 / n), dtype=F64))
angle_gap = pos[:, None].double() * (omega - omega_t2t).abs()  # [p, i]
assert_close(angle_gap[-1], widest)
bound = angle_gap.repeat_interleave(2, dim=-1)  # a pair's sine and cosine
assert (gap <= bound + 1e-12).all()  # |sin a - sin b| <= |a - b|
# the worst entry: pair 28's sine, not the pair with the largest ratio
worst_p, worst_col = divmod(int(gap.argmax()), d)
assert worst_col == 56 and int(widest.argmax()) == 28 != n - 1
assert f"{gap.max():.4f}" == "1.9895" and f"{widest.max():.2f}" == "2.95"
assert int((gap.amax(-1) > 1).nonzero()[0]) == 732

# %% tags=["deeper", "figure"] alt={"en": ["Left: wavelengths of the paper's and tensor2tensor's frequencies for d = 512 against pair i on a log axis, two nearly identical lines. Right: their angle gap at p = 2047 rises to near π at i ≈ 28 and falls back to 0 for the slow pairs."], "ja": ["左は d = 512 の論文版と tensor2tensor 版の周波数に対応する波長を、ペア i に対して対数軸で描いたもので、2 本の線はほぼ重なります。右は p = 2047 での両者の角度の差で、i ≈ 28 で π 近くまで上がり、遅いペアでは 0 に戻ります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.8))
ax = axes[0]
ax.plot(i, 2 * math.pi / omega, label=r"$2\pi/\omega_i$")
ax.plot(i, 2 * math.pi / omega_t2t, "--", label=r"$2\pi/\omega'_i$")
ax.set_yscale("log")
ax.set_xlabel("$i$")
ax.set_ylabel(r"$\lambda_i$")
ax.legend(loc="upper left")
ax = axes[1]
ax.plot(i, widest)
ax.axhline(math.pi, color=INK, lw=0.8, ls=":")
ax.set_yticks([0, math.pi / 2, math.pi])
ax.set_yticklabels(["$0$", r"$\pi/2$", r"$\pi$"])
ax.set_xlabel("$i$")
ax.set_ylabel(r"$p\,(\omega_i - \omega'_i)$")
ax.set_title("$p = 2047$")
plt.show()

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: fairseq's padding offset.** fairseq's `utils.make_positions` marks the
# tokens that are not padding and counts them along the sequence with a
# [cumulative sum](../docs/glossary.md#cumulative-sum):
# $$\mathrm{pos}_t = \mathrm{padding\_idx} + m_t \sum_{s \le t} m_s, \qquad m_t = [\text{token}_t \ne \text{pad}]$$
# Its table (`SinusoidalPositionalEmbedding.get_embedding`) is concatenated, divides by
# $n-1$ and sets row $\mathrm{padding\_idx}$ to zero, so
# [padding](../docs/glossary.md#padding) adds nothing. With the usual
# `padding_idx = 1` the first [real token](../docs/glossary.md#real-token) gets row $2$,
# with left padding too. By the rotation property the shift by 2 is one fixed
# rotation, in the concatenated table $PE^{\mathrm{cat}}(t+2) = P M_2 P^\top\, PE^{\mathrm{cat}}(t)$,
# so dot products between positions are unchanged. But each pair moves along a chord
# of its circle, of length $2|\sin(k\omega_i/2)|$, so
# $$\|PE(t+k) - PE(t)\|^2 = \sum_{i=0}^{n-1} 4\sin^2(k\omega_i/2)$$
# the same for every $t$: 6.95 for $d = 512$ and $k = 2$, against the norm
# $\sqrt{n} = 16$ of every encoding (printed below). RoBERTa keeps this offset for its
# learned positions (see [The padding row](03-learned-embeddings.ipynb#the-padding-row)).
# Hugging Face's `generate` counts the same way for many decoder models,
# `position_ids = attention_mask.cumsum(-1) - 1`, but from 0: under left padding the
# first real token gets position 0.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：fairseq のパディングによる位置のずれ**
#
# fairseq の `utils.make_positions` は、パディングでないトークンに印を付け、[累積和](../docs/glossary.ja.md#cumulative-sum)で系列に沿って数えます。
# $$\mathrm{pos}_t = \mathrm{padding\_idx} + m_t \sum_{s \le t} m_s, \qquad m_t = [\text{token}_t \ne \text{pad}]$$
# 表（`SinusoidalPositionalEmbedding.get_embedding`）は連結配置で、分母は $n-1$ です。
# 行 $\mathrm{padding\_idx}$ を 0 にするので、[パディング](../docs/glossary.ja.md#padding)には何も足されません。
# よく使われる `padding_idx = 1` では、最初の[実トークン](../docs/glossary.ja.md#real-token)は行 $2$ を使います。左側にパディングがあっても同じです。
# 回転の性質により、位置を 2 だけずらす操作は 1 つの決まった回転になり、連結配置の表では $PE^{\mathrm{cat}}(t+2) = P M_2 P^\top\, PE^{\mathrm{cat}}(t)$ です。
# そのため位置どうしの内積は変わりません。
# しかし各ペアは単位円上を、長さ $2|\sin(k\omega_i/2)|$ の弦の分だけ移動します。そのため、ずらす前後の距離の 2 乗は $t$ によらず次の値になります。
# $$\|PE(t+k) - PE(t)\|^2 = \sum_{i=0}^{n-1} 4\sin^2(k\omega_i/2)$$
# $d = 512$、$k = 2$ では距離（この式の平方根）は 6.95 で、エンコーディングのノルムはどれも $\sqrt{n} = 16$ です（下の出力）。
# 学習型位置埋め込みを使う RoBERTa も、このずれを引き継いでいます（[「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章の[「パディング用の行」](03-learned-embeddings.ipynb#パディング用の行)の節）。
# Hugging Face の `generate` も、多くのデコーダモデルで `position_ids = attention_mask.cumsum(-1) - 1` として同じように数えますが、数え始めは 0 です。左側にパディングがあっても、最初の実トークンの位置は 0 です。

# %% tags=["deeper"]
padding_idx, d = 1, 16
tokens = torch.tensor(
    [
        [5, 8, 3, 9, 2],  # no padding
        [7, 4, 2, 1, 1],  # padded on the right
        [1, 1, 6, 4, 2],  # padded on the left
    ]
)
mask = tokens.ne(padding_idx).long()
positions = torch.cumsum(mask, dim=1) * mask + padding_idx  # make_positions
print(positions)


# %% tags=["deeper", "check"] summary={"en": "the positions and the table are fairseq's, rebuilt in float32; padding adds nothing", "ja": "位置と表は float32 で作り直した fairseq のものと一致し、パディングには何も足されません"}
def fairseq_frequencies(d):
    """fairseq's frequencies as get_embedding computes them:
    exp(i * -(ln 10000 / (n - 1))) in float32 (AllenNLP: the same)."""
    n = d // 2
    step = math.log(10000) / (n - 1)
    return torch.exp(torch.arange(n, dtype=torch.float32) * -step)


def fairseq_like(rows, d, padding_idx):
    """fairseq's get_embedding, as it computes: float32 angles, all sines
    then all cosines, a zero column if d is odd, a zero padding row."""
    position = torch.arange(rows, dtype=torch.float32)[:, None]
    angle = position * fairseq_frequencies(d)  # [rows, n]
    table = torch.cat([angle.sin(), angle.cos()], dim=1)
    table = torch.nn.functional.pad(table, (0, d % 2))
    table[padding_idx] = 0
    return table


expected = torch.tensor([[2, 3, 4, 5, 6], [2, 3, 4, 1, 1], [1, 1, 2, 3, 4]])
assert torch.equal(positions, expected)
# fairseq needs at least this many rows (1024 is its class default)
rows = padding_idx + 1 + tokens.shape[1]
fairseq = SinusoidalEmbedding(
    rows, d, padding_idx=padding_idx, layout="concat", endpoint=True
)
out = fairseq(positions)  # [batch, seq, d]
assert_close(out, fairseq_like(rows, d, padding_idx)[positions])
padding = mask == 0
assert torch.equal(out[padding], torch.zeros(int(padding.sum()), d))

# %% tags=["deeper"]
d, n, shift = 512, 256, padding_idx + 1
omega_t2t = 10000.0 ** (-torch.arange(n, dtype=F64) / (n - 1))
chord = torch.sqrt((4 * torch.sin(shift * omega_t2t / 2) ** 2).sum())
print(
    f"d = 512\n  |PE(t+2) - PE(t)| = {chord:.2f}\n"
    f"  |PE(t)| = {math.sqrt(n):.0f}"
)


# %% tags=["deeper", "check"] summary={"en": "real tokens are shifted by 2; P M_2 Pᵀ maps the concatenated table's PE(t) to PE(t + 2); the distance is 6.95 for every t", "ja": "実トークンは 2 ずれ、P M_2 Pᵀ が連結配置の表の PE(t) を PE(t + 2) に移し、距離はどの t でも 6.95 です"}
def shift_matrix(k, omega):
    """M_k, interleaved: diag(B(k w_0), ...), B(phi) = [[c, s], [-s, c]]."""
    blocks = []
    for w in omega.tolist():
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=F64))
    return torch.block_diag(*blocks)


def concat_table(positions, d):  # fairseq's encoding, in float64
    return sinusoidal(positions, d, layout="concat", endpoint=True, dtype=F64)


real = mask.bool()
t = torch.cumsum(mask, dim=1) - 1  # the real tokens numbered from 0
assert torch.equal(positions[real], t[real] + shift)
assert positions[real].min() == shift  # rows 0 and 1: no real token
assert_close(out[real], concat_table(t[real] + shift, 16).float())

omega16 = 10000.0 ** (-torch.arange(8, dtype=F64) / 7)  # d = 16
P = torch.eye(16, dtype=F64)[layout_permutation(16)]
m_cat = P @ shift_matrix(shift, omega16) @ P.T
pe_t, pe_shifted = (
    concat_table(torch.arange(100), 16),
    concat_table(torch.arange(100) + shift, 16),
)
assert_close(pe_t @ m_cat.T, pe_shifted)  # PE_cat(t+2) = P M_2 P^T PE_cat(t)
assert_close(pe_shifted @ pe_shifted.T, pe_t @ pe_t.T)  # dot products kept

pe_t = concat_table(torch.arange(1000), d)
distance = (concat_table(torch.arange(1000) + shift, d) - pe_t).norm(dim=-1)
assert_close(distance, chord.expand(1000))  # the same for every t
assert f"{chord:.2f}" == "6.95"  # the distance, not its square
norms = torch.full((1000,), math.sqrt(n), dtype=F64)
assert_close(pe_t.norm(dim=-1), norms)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: float32 angles at large positions.** Write $\mathrm{fl}_{32}(x)$ for $x$
# rounded to the nearest float32 number. Its 24-bit significand leaves the numbers in
# $[2^e, 2^{e+1})$ $2^{e-23}$ apart. A float32 angle is rounded twice: the frequency
# becomes $\hat\omega_i$, and the product $p\,\hat\omega_i$ is rounded again, so
# $$|\mathrm{fl}_{32}(p\,\hat\omega_i) - p\,\omega_i| \le 2^{e-24} + p\,|\hat\omega_i - \omega_i|$$
# for an angle in $[2^e, 2^{e+1})$ ($p$ itself is exact below $2^{24}$), and
# $|\sin a - \sin b| \le |a - b|$ passes the error on at most unchanged. Pair 0
# escapes both roundings: $\omega_0 = 1$ and $p \cdot 1$ are exact. For labml and $d = 512$ (printed below) the largest
# angle error near $p = 2^{14}$, $2^{17}$ and $2^{20}$ is 9.7e-04, 7.8e-03 and 6.2e-02,
# about half from each rounding, along the staircase $2^{\lfloor \log_2 p \rfloor - 24}$
# of the figure; `posenc` rounds only the result, 3.0e-08. Below $2^{24}$ the errors
# are the same at every call, so they matter mainly when implementations are mixed,
# and, within one library, for the rotation property at large positions:
# $PE(p+k) = M_k\, PE(p)$ then holds only up to these errors, so dot products no
# longer depend on the distance alone. From $2^{24}$ on,
# $\mathrm{fl}_{32}(2^{24} + 1) = 2^{24}$ and positions collide.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：大きな位置での float32 の角度**
#
# $x$ を最も近い float32 の数に丸めたものを $\mathrm{fl}_{32}(x)$ と書きます。仮数の精度は（暗黙の 1 ビットを含めて）24 ビットなので、区間 $[2^e, 2^{e+1})$ の数の間隔は $2^{e-23}$ です。
# float32 の角度は 2 回丸められます。まず周波数が $\hat\omega_i$ に丸められ、次に積 $p\,\hat\omega_i$ がもう一度丸められます。
# そのため角度が $[2^e, 2^{e+1})$ に入るとき、次が成り立ちます（$p$ そのものは $2^{24}$ 未満なら厳密です）。
# $$|\mathrm{fl}_{32}(p\,\hat\omega_i) - p\,\omega_i| \le 2^{e-24} + p\,|\hat\omega_i - \omega_i|$$
# $|\sin a - \sin b| \le |a - b|$ なので、エンコーディングの誤差は角度の誤差を超えません。なお、ペア 0 では $\omega_0 = 1$ と積 $p \cdot 1$ が厳密に表せるので、2 つの丸めをどちらも受けません。
# 下の出力は、labml と同じく float32 で計算した $d = 512$ の場合です。$p = 2^{14}$、$2^{17}$、$2^{20}$ 付近での角度の誤差の最大値は 9.7e-04、7.8e-03、6.2e-02 です。
# 誤差は 2 つの丸めからおよそ半分ずつ生じ、図の階段 $2^{\lfloor \log_2 p \rfloor - 24}$ に沿って増えていきます。
# `posenc` は最後の結果を 1 回丸めるだけなので、成分の誤差は 3.0e-08 にとどまります。
# $2^{24}$ 未満では誤差は毎回同じなので、問題になるのはおもに実装を混ぜるときです。
# 1 つのライブラリの中でも、大きな位置では回転の性質 $PE(p+k) = M_k\, PE(p)$ がこの誤差の範囲でしか成り立たず、内積は距離だけでは決まらなくなります。$2^{24}$ から先では $\mathrm{fl}_{32}(2^{24} + 1) = 2^{24}$ となり、位置が重なります。

# %% tags=["deeper"]
d, n = 512, 256
omega = 10000.0 ** (-torch.arange(n, dtype=F64) / n)  # the paper's


def labml_frequencies(d):
    """labml's frequencies, as labml computes them: exp(2i * -(ln 10000 / d))
    in float32, one per even column."""
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    return torch.exp(two_i * -(math.log(10000.0) / d))


def paper_table(p):
    """The paper's encoding with float64 angles, as a reference."""
    exact = p.double()[:, None] * omega
    return torch.stack([exact.sin(), exact.cos()], -1).flatten(-2)


lines = [
    "labml, d = 512: the largest errors",
    "p near     angle  encoding    posenc",
]
for e in (14, 17, 20):
    p = torch.arange(2**e - 64, 2**e + 64)
    angle32 = p.float()[:, None] * labml_frequencies(d)  # as labml computes
    angle_err = (angle32.double() - p.double()[:, None] * omega).abs().max()
    enc32 = torch.stack([angle32.sin(), angle32.cos()], -1).flatten(-2)
    enc_err = (enc32.double() - paper_table(p)).abs().max()
    posenc_err = (sinusoidal(p, d).double() - paper_table(p)).abs().max()
    parts = (angle_err, enc_err, posenc_err)
    lines.append(f"2^{e:<4d} " + " ".join(f"{x:9.1e}" for x in parts))
print("\n".join(lines), end="")


# %% tags=["deeper", "check"] summary={"en": "every float32 angle error is within the two-term bound, the largest split about evenly; posenc within 2^−25", "ja": "float32 の角度の誤差はどれも 2 項の上界以内で、最大の誤差では、2 つの丸めがほぼ半分ずつを占めます。posenc の誤差は 2^−25 以内です"}
def worst_angle(p, w_hat, w):
    """The largest error of fl32(p w_hat) against p w, split in two:
    (pair, angle, error, the product's rounding, the frequency's)."""
    angle32 = p.float()[:, None] * w_hat
    product = p.double()[:, None] * w_hat.double()  # exact in float64
    exact = p.double()[:, None] * w
    row, pair = divmod(int((angle32.double() - exact).abs().argmax()), len(w))
    a32, prod, ex = (float(t[row, pair]) for t in (angle32, product, exact))
    return pair, a32, abs(a32 - ex), abs(a32 - prod), abs(prod - ex)


def float32_errors(p, w_hat, w):
    """At positions p: the angle error |fl32(p w_hat) - p w| and the two
    terms of its bound, [p, n] each, and the encoding's largest error, [p]."""
    angle32 = p.float()[:, None] * w_hat
    exact = p.double()[:, None] * w
    angle_err = (angle32.double() - exact).abs()
    rounding = 2.0 ** (torch.floor(torch.log2(angle32.double())) - 24)
    drift = p.double()[:, None] * (w_hat.double() - w).abs()
    enc32 = torch.stack([angle32.sin(), angle32.cos()], -1).flatten(-2)
    exact_enc = torch.stack([exact.sin(), exact.cos()], -1).flatten(-2)
    enc_err = (enc32.double() - exact_enc).abs().amax(-1)
    return angle_err, rounding, drift, enc_err


omega_t2t = 10000.0 ** (-torch.arange(n, dtype=F64) / (n - 1))
libraries = {  # name: (float32 frequencies as computed, exact ones)
    "w rounded once": (omega.float(), omega),
    "labml": (labml_frequencies(d), omega),
    "fairseq, AllenNLP": (fairseq_frequencies(d), omega_t2t),
}
up = torch.tensor(math.inf)
for e in (14, 17, 20):
    two_e = torch.tensor(float(2**e))
    assert torch.nextafter(two_e, up) - two_e == 2.0 ** (e - 23)  # spacing
    p = torch.arange(2**e - 64, 2**e + 64)
    for name, (w_hat, w) in libraries.items():
        angle_err, rounding, drift, enc_err = float32_errors(p, w_hat, w)
        assert (angle_err <= rounding + drift + 1e-9).all()  # two terms
        assert angle_err[:, 0].max() == 0  # pair 0: w_0 = 1, p exact
        # |sin a - sin b| <= |a - b|, plus the float32 sine's own rounding
        assert enc_err.max() <= angle_err.max() + 2**-23
        # the worst angle: one range below p, two roughly equal parts
        pair, angle, err, from_product, from_omega = worst_angle(p, w_hat, w)
        assert pair > 0 and 2 ** (e - 1) <= angle < 2**e
        assert from_product <= 2.0 ** (e - 1 - 24)  # half the spacing there
        assert 0.4 < from_product / err < 0.6 and 0.4 < from_omega / err < 0.6
        if e == 20 and name == "w rounded once":
            assert 0.05 < err < 0.07  # about 0.06 radian
    posenc_err = (sinusoidal(p, d).double() - paper_table(p)).abs()
    assert posenc_err.max() <= 2**-25 + 1e-9  # the result's rounding
two_24 = torch.tensor(float(2**24))
assert torch.nextafter(two_24, up) - two_24 == 2
assert torch.tensor(2**24 + 1).float() == two_24

# %% tags=["deeper", "figure"] alt={"en": ["Largest encoding error per position against p from 8 to 2^20, log–log. labml's float32 angles follow the staircase 2^(floor(log2 p) − 24), growing from about 2·10^-7 to 5·10^-2; posenc's float64 angles stay flat near 3·10^-8."], "ja": ["位置ごとのエンコーディングの最大誤差を p（8〜2^20）に対して両対数で描いた図です。角度を float32 で作る labml の誤差は、階段 2^(floor(log2 p) − 24) に沿って約 2·10^-7 から 5·10^-2 まで増えます。角度を float64 で作る posenc の誤差は約 3·10^-8 で一定です。"]}
samples = torch.unique(torch.round(2.0 ** torch.linspace(3, 20, 400)).long())
_, rounding, drift, enc_err = float32_errors(samples, *libraries["labml"])
posenc_err = (sinusoidal(samples, d).double() - paper_table(samples)).abs()
staircase = 2.0 ** (torch.floor(torch.log2(samples.double())) - 24)

fig, ax = plt.subplots(figsize=(6.4, 2.8))
ax.plot(
    samples,
    enc_err.clamp(min=1e-9),
    lw=1,
    label=r"$\mathrm{fl}_{32}(p\,\hat\omega_i)$, labml",
)
ax.plot(
    samples,
    posenc_err.amax(-1).clamp(min=1e-9),
    lw=1,
    label=r"$\mathrm{fl}_{64}(p\,\omega_i)$",
)
ax.plot(
    samples,
    staircase,
    color=INK,
    lw=1,
    ls="--",
    zorder=3,
    label=r"$2^{\lfloor \log_2 p \rfloor - 24}$",
)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("$p$")
ax.set_ylabel(r"$\max_j |PE_{(p,j)} - PE^{\mathrm{exact}}_{(p,j)}|$")
ax.legend(loc="upper left")
plt.show()

# %% tags=["deeper", "check"] summary={"en": "at every plotted position labml's error stays within the bound and posenc's within 2^−25", "ja": "描いたどの位置でも、labml の誤差は上界以内、posenc は 2^−25 以内です"}
assert posenc_err.max() <= 2**-25 + 1e-9
assert (enc_err <= (rounding + drift).amax(-1) + 2**-23).all()
assert 1e-7 < enc_err[0] < 3e-7 and 4e-2 < enc_err.max() < 6e-2

# %% [markdown] lang="en"
# ## The one real bug: the column index in the exponent
#
# The early versions of jadore801120's `attention-is-all-you-need-pytorch` (fixed in
# November 2017, alive in copies elsewhere) computed the angle of column $j$ as
# $p/10000^{2j/d}$, with the column index $j$ where the paper has the pair index
# $\lfloor j/2 \rfloor$. Each column gets its own frequency,
# $$\tilde\omega_j = 10000^{-2j/d}, \qquad j = 0, \dots, d-1$$
# and two things go wrong. The spectrum is stretched: from column $d/2$ on, every
# column turns more slowly than any of the paper's (the figure), and for $d = 512$,
# 351 of the 512 columns never complete a turn in 2048 positions, against 190. Worse,
# the sine and cosine of a pair no longer share a frequency, so the pair leaves its
# circle: its squared norm $\sin^2(\tilde\omega_{2i} p) + \cos^2(\tilde\omega_{2i+1} p)$
# wanders between nearly 0 and nearly 2. No rotation moves $PE(p)$ to $PE(p+k)$, nor
# any other linear map: for $d = 16$ the best
# [least-squares](../docs/glossary.md#least-squares) fit from $PE(p)$ to $PE(p+3)$
# leaves a relative error of 0.22, against less than 1e-12 for the paper's encoding.
# This breaks the property the encoding was built on, and it shows from scratch: the
# reversal toy trained with the buggy table puts 0.944 of the tokens in place after
# the same 301 updates (0.94 to 0.97 over five seeds), where every variant above
# reaches 1.000: it learns more slowly (seed 0 reaches 1.000 after 600 updates). A
# table whose frequencies span the same stretched range but whose pairs keep their
# sine and cosine (base $10^8$) learns in 301 on three seeds, so here the broken
# pairs, not the range of frequencies, slow it.
# `posenc` reproduces the bug for tests: the
# columns $2j + (j \bmod 2)$ of `sinusoidal(p, 2 * d, base=10000.0**2)`, and the early
# version's zero padding row with `padding_idx=0`.

# %% [markdown] lang="ja"
# ## ただ 1 つの本当のバグ：指数に入った列の番号
#
# jadore801120 の `attention-is-all-you-need-pytorch` の初期の版は、列 $j$ の角度を $p/10000^{2j/d}$ と計算していました。2017 年 11 月に修正されましたが、このコードのコピーはほかにも残っています。
# 論文ではペアの番号 $\lfloor j/2 \rfloor$ が入るところに、列の番号 $j$ が入っています。
# その結果、列ごとに周波数が異なります。
# $$\tilde\omega_j = 10000^{-2j/d}, \qquad j = 0, \dots, d-1$$
# 問題は 2 つです。まず、スペクトルが引き伸ばされます。列 $d/2$ 以降はどの列も論文のどの列よりもゆっくり回り（図）、$d = 512$ では 2048 個の位置の間に 1 周もしない列が 512 列中 351 列あります（論文では 190 列）。
# もう 1 つの問題のほうが深刻です。ペアの正弦と余弦が同じ周波数を使わなくなるので、ペアは単位円から外れます。ノルムの 2 乗 $\sin^2(\tilde\omega_{2i} p) + \cos^2(\tilde\omega_{2i+1} p)$ は、ほぼ 0 からほぼ 2 の間で揺れ動きます。
# $PE(p)$ を $PE(p+k)$ に移す回転はなく、回転以外の線形写像もありません。
# $d = 16$ で $PE(p)$ から $PE(p+3)$ への線形写像を[最小二乗](../docs/glossary.ja.md#least-squares)であてはめると、最良のものでも相対誤差は 0.22 残ります。論文のエンコーディングでは 1e-12 未満です。
# 壊れるのはこのエンコーディングの土台の性質なので、一から学習する場合にも差が出ます。
# バグのある表で反転の課題を学習すると、同じ 301 回の更新のあとで正しい位置に置けるトークンの割合は 0.944 です（5 つのシードで 0.94〜0.97）。上の変種はどれも 1.000 に達します。バグのある表では学習が遅いのです（シード 0 は 600 回の更新で 1.000 に達します）。
# 周波数の範囲は同じように引き伸ばしたまま、ペアの正弦と余弦をそろえた表（底 $10^8$）は、3 つのシードのどれでも 301 回で学習できます。ここで学習を遅らせているのは周波数の範囲ではなく、壊れたペアです。
# `posenc` はテスト用にこのバグを再現できます。`sinusoidal(p, 2 * d, base=10000.0**2)` の列 $2j + (j \bmod 2)$ を取り出し、初期の版のパディング用の 0 の行は `padding_idx=0` で作ります。


# %%
def per_column_bug(p, d):
    """The early formula: angle p / 10000^(2 j / d) for column j;
    sine in the even columns, cosine in the odd ones."""
    j = torch.arange(d, dtype=F64)
    angle = p.double()[:, None] / 10000.0 ** (2 * j / d)  # [p, d]
    table = angle.clone()
    table[:, 0::2] = angle[:, 0::2].sin()
    table[:, 1::2] = angle[:, 1::2].cos()
    return table


d = 512
j = torch.arange(d, dtype=F64)
lam_bug = 2 * math.pi * 10000.0 ** (2 * j / d)  # 2 pi / omega~_j
lam_paper = 2 * math.pi * 10000.0 ** (2 * (j // 2) / d)
print(
    f"longest wavelength\n"
    f"  paper {lam_paper.max():.0f}, bug {lam_bug[-1]:.3e}\n"
    f"columns above 2048\n"
    f"  paper {int((lam_paper > 2048).sum())}, "
    f"bug {int((lam_bug > 2048).sum())}",
    end="",
)

# %%
bug_table = per_column_bug(torch.arange(16), 32)  # the toy's T = 16, d = 32
buggy = trained(0, bug_table)
print(f"buggy table, trained from scratch: {accuracy(buggy):.3f}")


# %% tags=["check"] summary={"en": "from scratch the buggy table stays below the variants' 1.000 on five seeds, reaches it after 600 updates on seed 0; a paired table with its spectrum learns in 301", "ja": "バグのある表は、5 つのシードのどれでも一から学習して 1.000 に届かず、シード 0 では 600 回の更新で届きます。同じスペクトルでペアをそろえた表は 301 回で学習できます"}
seeds = [accuracy(trained(seed, bug_table)) for seed in range(5)]
assert all(0.94 <= a < 0.97 for a in seeds), seeds
assert f"{seeds[0]:.3f}" == "0.944"
# more updates: seed 0 gets there (steps 0 to 599: 600 updates)
assert accuracy(trained(0, bug_table, steps=599)) == 1.0
paired = sinusoidal(torch.arange(16), 32, base=1e8, dtype=F64)  # pairs kept
for seed in range(3):
    assert accuracy(trained(seed, paired)) == 1.0


# %% tags=["check"] summary={"en": "posenc with width 2d and base 10000² reproduces the bug; the second half of its spectrum is too slow", "ja": "次元数 2d、底 10000² の posenc でバグを再現でき、スペクトルの後半は論文のどの波長より長くなります"}
def bug_columns(d):
    j = torch.arange(d)
    return 2 * j + j % 2  # sine 2j for even j, cosine 2j + 1 for odd j


p = torch.arange(1000)
for width in (16, 64, 512):
    wide = sinusoidal(p, 2 * width, base=10000.0**2, dtype=F64)
    assert_close(wide[:, bug_columns(width)], per_column_bug(p, width))
# an odd d ends on an even column: a sine, here sin(p 10000^(-12/7))
assert_close(
    per_column_bug(p, 7)[:, 6], torch.sin(p * 10000.0 ** (-12 / 7)).double()
)
assert_close(
    2 * math.pi / lam_bug[-1],
    torch.tensor(10000.0 ** (-2 * (d - 1) / d), dtype=F64),
)
assert_close(lam_bug[d // 2], torch.tensor(10000 * 2 * math.pi, dtype=F64))
too_slow = (
    lam_bug > lam_paper.max()
)  # the paper's longest, 2 pi 10000^(510/512)
assert torch.equal(too_slow, j >= d // 2)  # the whole second half
assert round(float(lam_paper.max())) == 60611
assert int((lam_paper > 2048).sum()) == 190
assert int((lam_bug > 2048).sum()) == 351

# %% tags=["figure"] alt={"en": ["Wavelength per column j on a log axis, d = 16 (left) and d = 512 (right): the paper's spectrum is a staircase, each pair sharing one wavelength; the buggy per-column one is a straight line of twice the slope that passes 10000·2π halfway."], "ja": ["列 j ごとの波長を対数軸で描いた図です（左は d = 16、右は d = 512）。論文のスペクトルはペアの 2 列が波長を共有する階段状です。列ごとの指数を使うバグ版は傾きが 2 倍の直線で、j = d/2 で 10000·2π に達し、その後の列の波長はすべてこれより長くなります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.8), sharey=True)
for ax, d in zip(axes, (16, 512), strict=True):
    j = torch.arange(d, dtype=F64)
    marker = "o" if d == 16 else None
    ax.plot(
        j,
        2 * math.pi * 10000.0 ** (2 * (j // 2) / d),
        marker=marker,
        ms=4,
        label=r"$2\pi/\omega_{\lfloor j/2 \rfloor}$",
    )
    ax.plot(
        j,
        2 * math.pi * 10000.0 ** (2 * j / d),
        "--",
        marker=marker,
        ms=4,
        label=r"$2\pi/\tilde\omega_j$",
    )
    ax.axhline(10000 * 2 * math.pi, color=INK, lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("$j$")
    ax.set_title(f"$d = {d}$")
axes[0].set_ylabel(r"$\lambda$")
axes[0].legend(loc="upper left")
plt.show()

# %%
d, n, k = 16, 8, 3
p = torch.arange(1000)
bug, bug_k = per_column_bug(p, d), per_column_bug(p + k, d)
pair_sq_norm = bug[:, 0::2] ** 2 + bug[:, 1::2] ** 2  # [p, n]
fit = torch.linalg.lstsq(bug, bug_k, driver="gelsd").solution  # best linear map
err_bug = float((bug @ fit - bug_k).norm() / bug_k.norm())
print(
    f"squared pair norms\n"
    f"  min {pair_sq_norm.min():.4f}, max {pair_sq_norm.max():.4f}\n"
    f"best linear map PE(p) -> PE(p+3)\n"
    f"  relative error, bug: {err_bug:.2f}",
    end="",
)


# %% tags=["check"] summary={"en": "the paper's pairs stay on the circle and shift linearly, the buggy ones do not; its Gram matrix varies", "ja": "論文のペアは単位円上にとどまり、線形にずらせます。バグ版はどちらも成り立たず、グラム行列も対角線に沿って一定になりません"}
def fit_error(x, y):
    """Relative error of the best linear map L with x L = y (least squares)."""
    fit = torch.linalg.lstsq(x, y, driver="gelsd").solution
    return float((x @ fit - y).norm() / y.norm())


good, good_k = sinusoidal(p, d, dtype=F64), sinusoidal(p + k, d, dtype=F64)
err_good = fit_error(good, good_k)
assert_close(pair_sq_norm[0], torch.ones(n, dtype=F64))  # 1 at p = 0
good_sq_norm = good[:, 0::2] ** 2 + good[:, 1::2] ** 2
assert_close(good_sq_norm, torch.ones(1000, n, dtype=F64))
assert pair_sq_norm.min() < 0.01 and pair_sq_norm.max() > 1.99
assert err_good < 1e-12 and round(err_bug, 2) == 0.22

j = torch.arange(d, dtype=F64)
a, b = 10000.0 ** (-2 * j[0::2] / d), 10000.0 ** (-2 * j[1::2] / d)  # a_i, b_i
pq = torch.arange(300)
diff = (pq[:, None] - pq[None, :]).double()[..., None]  # p - q
summ = (pq[:, None] + pq[None, :]).double()[..., None]  # p + q
formula = 0.5 * (
    torch.cos(a * diff)
    - torch.cos(a * summ)
    + torch.cos(b * diff)
    + torch.cos(b * summ)
).sum(-1)
gram = per_column_bug(pq, d) @ per_column_bug(pq, d).T
assert_close(gram, formula)
assert (gram[1:, 1:] - gram[:-1, :-1]).abs().max() > 1  # not along diagonals
gram_good = sinusoidal(pq, d, dtype=F64) @ sinusoidal(pq, d, dtype=F64).T
assert_close(gram_good[1:, 1:], gram_good[:-1, :-1])

# %% tags=["check"] summary={"en": "padding_idx = 0 on the wide table reproduces the early version with its zero row", "ja": "次元数 2d の表に padding_idx = 0 を指定すると、0 の行も含めて初期の版を再現します"}
d, rows = 16, 12
padded = torch.tensor([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6]])  # 0: padding
reference = per_column_bug(torch.arange(rows), d)
reference[0] = 0  # the zero row 0
wide = SinusoidalEmbedding(rows, 2 * d, padding_idx=0, base=10000.0**2)
assert_close(wide(padded)[..., bug_columns(d)], reference[padded].float())

# %% [markdown] lang="en"
# ## What to remember
#
# - The encoding is part of a checkpoint: load one only under the variant it was
#   trained with (layout, denominator, leftover column, first position). A toy
#   trained with the paper's table falls from 1.000 to near a guess under the
#   concatenated layout, and answers four places off when shifted by two; from
#   scratch every variant learns.
# - The two layouts differ by one fixed permutation; a checkpoint converts exactly by
#   permuting its weights alike.
# - Dividing by $n - 1$ instead of $n$ gives a different encoding, entries up to 1.99
#   apart for $d = 512$ and $p < 2048$, though the spectra look alike.
# - fairseq's positions from `padding_idx + 1` are those from 0 shifted by 2: the same
#   dot products, different inputs.
# - Float32 angles drift with the position (about 0.06 radian near $2^{20}$) and
#   collide from $2^{24}$; `posenc` forms them in float64.
# - The column index in the exponent, $2j/d$, is a bug: it breaks the rotation
#   property, and the toy learns more slowly with it, from scratch too.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 位置エンコーディングもチェックポイントの一部です。チェックポイントは、学習に使ったのと同じ変種（配置、分母、余る列、最初の位置）で読み込む必要があります。論文の表で学習したトイモデルは、連結配置に差し替えると正解率が 1.000 からチャンスレベル近くまで落ち、2 だけずらすと 4 つずれた答えを返します。一から学習すれば、どの変種でも課題を解けます。
# - 2 つの配置の違いは 1 つの固定した並べ替えで、重みも同じように並べ替えればチェックポイントを厳密に変換できます。
# - $n$ ではなく $n - 1$ で割ると別のエンコーディングになり、スペクトルはほとんど同じに見えても、$d = 512$、$p < 2048$ で成分の差は最大 1.99 になります。
# - fairseq の `padding_idx + 1` から数える位置は、0 から数える位置を 2 ずらしたものです。内積は同じですが、入力は違います。
# - float32 の角度は位置とともにずれ（$2^{20}$ 付近で約 0.06 ラジアン）、$2^{24}$ からは位置が重なります。`posenc` は角度を float64 で作ります。
# - 指数に列の番号を入れて $2j/d$ とするのはバグです。回転の性質を壊し、一から学習してもトイモデルの学習が遅くなります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Extend `layout_permutation` to odd $d$ so that
#    `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]` still holds
#    exactly. Where does the zero column go?
# 2. For $d = 128$, $512$ and $2048$, find the first position at which the $n$ and
#    $n-1$ encodings differ by more than $0.1$ in some entry. How does it change with
#    $d$? (Hint: look at the largest $\omega_i - \omega'_i$.)
# 3. For the per-column exponent, plot $PE(p)\cdot PE(p)$ against $p$ for $d = 64$.
#    Use the product-to-sum formulas to explain why it is not constant,
#    and find the value it oscillates around.
# 4. bfloat16 has an 8-bit significand. From the spacing $2^{e-7}$ of its numbers in
#    $[2^e, 2^{e+1})$, predict the position beyond which a bfloat16 angle can be off by
#    more than half a radian, then check it by forming the angles in `torch.bfloat16`.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 奇数の $d$ でも `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]` が
#    厳密に成り立つよう、`layout_permutation` を拡張してください。0 の列はどこに行くでしょうか。
# 2. $d = 128$、$512$、$2048$ のそれぞれで、$n$ で割る版と $n-1$ で割る版のエンコーディングが、
#    どこかの成分で $0.1$ より大きく異なる最初の位置を求めてください。$d$ によってどう変わるでしょうか
#    （ヒント：$\omega_i - \omega'_i$ の最大値を見てください）。
# 3. 列ごとの指数を使った表について、$d = 64$ で $PE(p)\cdot PE(p)$ を $p$ に対して描いてください。
#    積和の公式を使って、これが一定にならない理由を説明し、値がどのあたりを中心に振動するかを求めてください。
# 4. bfloat16 の仮数の精度は（暗黙の 1 ビットを含めて）8 ビットです。区間 $[2^e, 2^{e+1})$ での数の間隔 $2^{e-7}$ から、
#    bfloat16 の角度が 0.5 ラジアンを超えてずれうるようになる位置を予想し、
#    `torch.bfloat16` で角度を作って確かめてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With an odd $d$ both layouts hold the same $n = \lfloor d/2 \rfloor$
# pairs and end with the zero column, column $2n = d - 1$. The case formula of
# the layout permutation $\pi$ covers the first $2n$ columns unchanged, and the zero column maps to
# itself: $\pi(2n) = 2n$. The zero column stays last in both layouts.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $d$ が奇数でも、2 つの配置は同じ $n = \lfloor d/2 \rfloor$ 組のペアを持ち、
# どちらも最後が 0 の列（列 $2n = d - 1$）です。
# 配置の置換 $\pi$ の場合分けの式は最初の $2n$ 列にそのまま当てはまり、0 の列は自分自身に写ります（$\pi(2n) = 2n$）。
# 0 の列は、どちらの配置でも最後に残ります。


# %% tags=["solution"]
def layout_permutation_any(d):
    """pi for any d: concat column c is interleaved column perm[c]."""
    n = d // 2
    pairs = [2 * c if c < n else 2 * (c - n) + 1 for c in range(2 * n)]
    return torch.tensor(pairs + [2 * n] * (d % 2))  # the zero column stays


p = torch.arange(300)
for d in (7, 9, 16, 513):
    perm = layout_permutation_any(d)
    for endpoint in (False, True):
        interleaved = sinusoidal(p, d, endpoint=endpoint, dtype=F64)
        concat = sinusoidal(p, d, layout="concat", endpoint=endpoint, dtype=F64)
        # posenc's own layouts agree bit for bit (built from the same tensors)
        assert_close(concat, interleaved[..., perm], rtol=0, atol=0)
        # the permuted table against the one written from the formula
        assert_close(interleaved[..., perm], concat_by_formula(p, d, endpoint))
    if d % 2:
        assert perm[-1] == d - 1  # the zero column maps to itself
    else:
        assert torch.equal(perm, layout_permutation(d))

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** An entry differs by at most the angle gap $p\,(\omega_i - \omega'_i)$,
# and by about that much where the sine or cosine is steep, so the first entry above
# $0.1$ appears near $p = 0.1/\max_i(\omega_i - \omega'_i)$. To find the largest gap,
# write $x = i \ln(10000)/n$: then $\omega_i = e^{-x}$ and
# $\omega'_i = e^{-x n/(n-1)} = e^{-x}\,e^{-x/(n-1)}$, so
# $$\omega_i - \omega'_i \approx \frac{x\,e^{-x}}{n-1}$$
# which is largest at $x = 1$, that is at $i \approx n/\ln 10000 \approx 0.11\,n$, with
# the value $1/(e\,(n-1))$. The prediction is $p \approx 0.1\,e\,(n-1)$: 17.1, 69.3 and
# 278.1 for $d = 128$, $512$ and $2048$, and the measured first positions are 18, 71
# and 279. It grows in proportion to $d$: a wider model meets the difference later.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 各成分の差は角度の差 $p\,(\omega_i - \omega'_i)$ 以下で、正弦や余弦の傾きが急なところではほぼその大きさになります。
# したがって $0.1$ を超える最初の成分は、$p = 0.1/\max_i(\omega_i - \omega'_i)$ 付近に現れます。
# 最大の差を求めるため、$x = i \ln(10000)/n$ と置きます。
# すると $\omega_i = e^{-x}$、$\omega'_i = e^{-x n/(n-1)} = e^{-x}\,e^{-x/(n-1)}$ なので、次のようになります。
# $$\omega_i - \omega'_i \approx \frac{x\,e^{-x}}{n-1}$$
# これは $x = 1$、つまり $i \approx n/\ln 10000 \approx 0.11\,n$ で最大になり、その値は $1/(e\,(n-1))$ です。
# 予想は $p \approx 0.1\,e\,(n-1)$ で、$d = 128$、$512$、$2048$ に対して 17.1、69.3、278.1 です。
# 実際に測った最初の位置は 18、71、279 です。
# この位置は $d$ に比例して大きくなります。次元数の大きいモデルほど、差が現れる位置は後ろになります。

# %% tags=["solution"]
lines = []
firsts = {}
for d in (128, 512, 2048, 4096, 8192):
    n = d // 2
    i = torch.arange(n, dtype=F64)
    gap_w = 10000.0 ** (-i / n) - 10000.0 ** (-i / (n - 1))
    predicted = 0.1 * math.e * (n - 1)
    assert math.isclose(0.1 / gap_w.max(), predicted, rel_tol=0.02)
    assert abs(int(gap_w.argmax()) - n / math.log(10000)) < 1
    pos = torch.arange(1200)
    paper = sinusoidal(pos, d, dtype=F64)
    t2t = sinusoidal(pos, d, endpoint=True, dtype=F64)
    first = int(((paper - t2t).abs().amax(-1) > 0.1).nonzero()[0])
    assert predicted <= first <= 1.1 * predicted + 1
    firsts[d] = first
    lines.append(f"d = {d:4d}: predicted {predicted:6.1f}, first {first}")
# within 300 positions for d <= 2048, but past 1000 for d = 8192
assert max(firsts[d] for d in (128, 512, 2048)) < 300 < firsts[4096]
assert firsts[8192] > 1000
print("\n".join(lines), end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** With $a_i = \tilde\omega_{2i}$ and $b_i = \tilde\omega_{2i+1}$, the
# product-to-sum formulas give
# $$PE(p)\cdot PE(q) = \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos a_i(p-q) - \cos a_i(p+q) + \cos b_i(p-q) + \cos b_i(p+q)\big)$$
# (for the paper's encoding $a_i = b_i$ and the two $p+q$ terms cancel). Set $q = p$:
# $\cos a_i(p-q) = \cos b_i(p-q) = 1$, and
# $$PE(p)\cdot PE(p) = n + \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos 2b_i p - \cos 2a_i p\big)$$
# With $a_i = b_i$ the sum would vanish and the norm would be $\sqrt{n}$ at every
# position; with $a_i \ne b_i$ it does not, so the squared norm wanders, between 24.1
# and 40.7 for $d = 64$ over the first 100,000 positions. It oscillates around
# $n = 32$: the terms of the fast pairs average out. The slowest pairs have not yet
# turned, and for them $b_i < a_i$ gives $\cos 2b_i p - \cos 2a_i p \ge 0$, which keeps
# the average a little above $n$: 32.3 over those positions.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** $a_i = \tilde\omega_{2i}$、$b_i = \tilde\omega_{2i+1}$ と置くと、積和の公式から次のようになります。
# $$PE(p)\cdot PE(q) = \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos a_i(p-q) - \cos a_i(p+q) + \cos b_i(p-q) + \cos b_i(p+q)\big)$$
# 論文のエンコーディングでは $a_i = b_i$ なので、2 つの $p+q$ の項は打ち消し合います。
# ここで $q = p$ と置くと、$\cos a_i(p-q) = \cos b_i(p-q) = 1$ なので次のようになります。
# $$PE(p)\cdot PE(p) = n + \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos 2b_i p - \cos 2a_i p\big)$$
# $a_i = b_i$ なら和は消え、ノルムはどの位置でも $\sqrt{n}$ です。
# $a_i \ne b_i$ では和が残るので、ノルムの 2 乗は一定にならず、揺れ動きます。$d = 64$ では、最初の 100,000 個の位置で 24.1 から 40.7 の間です。
# 値は $n = 32$ のまわりで振動します。速いペアの項は平均すると消えるからです。
# 最も遅いペアはまだ 1 周もしておらず、しかも $b_i < a_i$ なので $\cos 2b_i p - \cos 2a_i p \ge 0$ です。
# これが平均を $n$ より少し上に押し上げ、この範囲の平均は 32.3 になります。

# %% alt={"en": ["Squared norm PE(p)·PE(p) of the per-column-exponent table for d = 64 against p from 0 to 2000: it starts at 32, wanders between about 27 and 37, and is not constant, unlike the paper's encoding, whose squared norm is 32 everywhere."], "ja": ["d = 64 の列ごとの指数を使った表について、ノルムの 2 乗 PE(p)·PE(p) を p（0〜2000）に対して描いた図です。32 から始まり、およそ 27 から 37 の間で揺れ動き、一定になりません。論文のエンコーディングのノルムの 2 乗はどこでも 32 です。"]} tags=["solution"]
d, n = 64, 32
p = torch.arange(100000)
bug = per_column_bug(p, d)
sq_norm = (bug * bug).sum(-1)  # PE(p) . PE(p)
j = torch.arange(d, dtype=F64)
a, b = 10000.0 ** (-2 * j[0::2] / d), 10000.0 ** (-2 * j[1::2] / d)
formula = n + 0.5 * (
    torch.cos(2 * b * p[:, None]) - torch.cos(2 * a * p[:, None])
).sum(-1)
assert_close(sq_norm, formula)
assert (b < a).all() and 32 < sq_norm.mean() < 33
assert sq_norm.min() < 25 and sq_norm.max() > 40
shown = sq_norm[:2001]  # the plotted range, quoted in the alt text
assert 27 < shown.min() < 28 and 37 < shown.max() < 38
good = sinusoidal(p[:2001], d, dtype=F64)
assert_close((good * good).sum(-1), torch.full((2001,), 32.0).double())
print(
    f"d = 64, p < 100000\n"
    f"  min {sq_norm.min():.1f}, max {sq_norm.max():.1f}, "
    f"mean {sq_norm.mean():.1f}",
    end="",
)

fig, ax = plt.subplots(figsize=(6.4, 3.0))
ax.plot(p[:2001], sq_norm[:2001], lw=0.8)
ax.axhline(n, color="0.5", lw=0.8, ls=":")
ax.set(xlabel="$p$", ylabel=r"$PE(p)\cdot PE(p)$", xlim=(0, 2000))
plt.show()

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** bfloat16's unit roundoff is $u = 2^{-8}$: a number in
# $[2^e, 2^{e+1})$ moves by at most $2^{e-8}$ when rounded. The product's rounding
# alone exceeds half a radian only for angles of $2^8 = 256$ and more, where the
# spacing is $2$; pair 0, whose $\omega_0 = 1$ is exact, goes wrong first at
# $p = 257$, which bfloat16 cannot even hold. But $\omega_i$ is rounded to bfloat16
# too, and the bound for one rounding of each factor becomes $(2u + u^2)\,p\,\omega_i \approx 2^{-7}\,p\,\omega_i$
# (as long as $p$ itself is exact, up to 256): it guarantees less than half a
# radian only for $p < 64$. In between the outcome depends on
# the actual rounding of each $\omega_i$, so measure it: the first angle
# off by more than half a radian is at $p = 150$, in pair 2. Either way a bfloat16
# angle is useless for positions in the hundreds, which is why implementations
# form the angles in float32 or float64 even when the model runs in bfloat16.
# Casting the finished table to bfloat16 costs far less: its entries lie in
# $[-1, 1]$, where bfloat16 numbers are at most $2^{-8}$ apart, so each entry moves
# by at most $2^{-9}$, at any position.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** bfloat16 の単位丸め誤差は $u = 2^{-8}$ で、$[2^e, 2^{e+1})$ の数は丸めで最大 $2^{e-8}$ だけ動きます。
# 積の丸めだけで 0.5 ラジアンを超えるのは、間隔が $2$ になる $2^8 = 256$ 以上の角度だけです。
# ペア 0 では $\omega_0 = 1$ が厳密なので、最初に問題が起きるのは $p = 257$ です。257 という数自体、bfloat16 では表せません。
# しかし $\omega_i$ も bfloat16 に丸められるので、それぞれを 1 回ずつ丸めるときの上界は $(2u + u^2)\,p\,\omega_i \approx 2^{-7}\,p\,\omega_i$ になります（$p$ 自体を bfloat16 で厳密に表せる 256 までの話です）。
# この上界で 0.5 ラジアン未満が保証されるのは $p < 64$ だけです。
# 位置が 64 以上 257 未満のときに何が起きるかは各 $\omega_i$ の実際の丸め方によるので、測って確かめます。
# 0.5 ラジアンを超えてずれる最初の角度は $p = 150$、ペア 2 にあります。
# どちらにしても、bfloat16 の角度は数百の位置ではもう使えません。
# そのため、モデルを bfloat16 で動かす場合でも、実装は角度を float32 か float64 で作ります。
# でき上がった表を bfloat16 に変換するだけなら、影響ははるかに小さくなります。
# 成分は $[-1, 1]$ にあり、そこでの bfloat16 の数の間隔は $2^{-8}$ 以下なので、どの位置でも各成分のずれは $2^{-9}$ 以下です。

# %% tags=["solution"]
d, n = 512, 256
omega = 10000.0 ** (-torch.arange(n, dtype=F64) / n)
p = torch.arange(1000)
angle16 = p.to(torch.bfloat16)[:, None] * omega.to(torch.bfloat16)
angle_err = (angle16.double() - p.double()[:, None] * omega).abs()  # [p, n]
first = int((angle_err.amax(-1) > 0.5).nonzero()[0])
first_pair0 = int((angle_err[:, 0] > 0.5).nonzero()[0])
u16 = 2.0**-8
bound = (2 * u16 + u16**2) * p.double()[:, None] * omega
# (2u + u^2) p w_i with u = 2^-8, while p itself is exact (up to 256)
assert (angle_err[:257] <= bound[:257] + 1e-9).all()
assert bound[:64].max() < 0.5 and 64 <= first == 150 < 256
assert first_pair0 == 257 and float(torch.tensor(257.0).bfloat16()) == 256
# the finished table cast to bfloat16: at most 2^-9 off, at any position
far = torch.tensor([0, 1000, 10**6, 2**24])
table = sinusoidal(far, d, dtype=F64)
assert (table.bfloat16().double() - table).abs().max() <= 2**-9
print(
    f"bfloat16 angles, d = 512\n"
    f"  first error above 0.5: p = {first},\n"
    f"  pair {int(angle_err[first].argmax())}\n"
    f"pair 0 (w_0 = 1)\n"
    f"  first error above 0.5: p = {first_pair0}",
    end="",
)

# %% [markdown] lang="en"
# ## Sources and versions
#
# Each library is described from its code at the commits and versions named in the
# references; the rows printed by Hugging Face transformers (checked under
# [the note on the libraries](#deeper-the-libraries-one-by-one)) come from version
# 5.24.0. tensor2tensor's TensorFlow code is
# transcribed here, not run. The paper is read in its arXiv version.
#
# ### References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - tensor2tensor, `get_timing_signal_1d` in `tensor2tensor/layers/common_attention.py`,
#   split out in commit `466ce80` (13 September 2017) from `add_timing_signal_1d`
#   in `tensor2tensor/models/common_attention.py` of `3d9c62f` ("initial push",
#   15 June 2017, the first commit with code; the repository's first commit,
#   `cedf0e2`, holds only `README.md`); the comment on the paper since
#   commit `ffe4cf4` (2019).
#   <https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/common_attention.py>
# - tensor2tensor pull request #177 ("fix positional embedding", merged on
#   24 July 2017 by commit `62a0ee7`, US Pacific time, undone by commit `ca08ad9`
#   the next day; Ł. Kaiser's comment
#   of 26 July 2017 that it "breaks all trained models") and issue #391
#   ("Mismatch position encoding with paper", Ł. Kaiser's answer).
#   <https://github.com/tensorflow/tensor2tensor/pull/177>,
#   <https://github.com/tensorflow/tensor2tensor/issues/391>
# - fairseq, `SinusoidalPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - fairseq, `make_positions` in `fairseq/utils.py`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/utils.py>
# - AllenNLP, `allennlp.modules.transformer.positional_encoding.SinusoidalPositionalEncoding`.
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - labml.ai, annotated implementation of fixed positional encodings.
#   <https://nn.labml.ai/transformers/positional_encoding.html>
# - labml.ai, `EmbeddingsWithPositionalEncoding` in `labml_nn/transformers/models.py`.
#   <https://github.com/labmlai/annotated_deep_learning_paper_implementations>
# - Huang, Y.-H., `attention-is-all-you-need-pytorch` (`transformer/Models.py`; the
#   versions before commit `7fa8c63`, November 2017, use the exponent $2j/d$).
#   <https://github.com/jadore801120/attention-is-all-you-need-pytorch>
# - Hugging Face transformers 5.24.0: `MarianSinusoidalPositionalEmbedding`,
#   XLM's `create_sinusoidal_embeddings`, RoBERTa's
#   `create_position_ids_from_input_ids`, and the XLM, DistilBERT and RoBERTa
#   configurations. <https://github.com/huggingface/transformers>
# - Hugging Face diffusers, `get_timestep_embedding` in
#   `src/diffusers/models/embeddings.py`.
#   <https://github.com/huggingface/diffusers>
# - OpenAI, guided-diffusion and GLIDE, `timestep_embedding` in
#   `guided_diffusion/nn.py` and `glide_text2im/nn.py`.
#   <https://github.com/openai/guided-diffusion>,
#   <https://github.com/openai/glide-text2im>
# - OpenAI, Whisper, `sinusoids` in `whisper/model.py`.
#   <https://github.com/openai/whisper>
# - Rush, A. (2018). *The Annotated Transformer* (`PositionalEncoding`).
#   <https://nlp.seas.harvard.edu/annotated-transformer/>
# - IEEE (2019). *IEEE Standard for Floating-Point Arithmetic* (IEEE 754-2019).
#   <https://doi.org/10.1109/IEEESTD.2019.8766229>
# - Goldberg, D. (1991). *What Every Computer Scientist Should Know About
#   Floating-Point Arithmetic*. ACM Computing Surveys 23(1).
#   <https://doi.org/10.1145/103162.103163>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# 各ライブラリの説明は、参考文献に挙げたコミットとバージョンのコードに基づきます。
# [「さらに詳しく：ライブラリを 1 つずつ見る」](#deeper-ライブラリを-1-つずつ見る)で照合した Hugging Face transformers の出力は、バージョン 5.24.0 で得たものです。
# tensor2tensor の TensorFlow のコードは、ここで書き直しただけで、実行はしていません。
# 参照した論文は arXiv 版です。
#
# ### 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - tensor2tensor：`get_timing_signal_1d`（`tensor2tensor/layers/common_attention.py`）。
#   2017 年 9 月 13 日のコミット `466ce80` で、`tensor2tensor/models/common_attention.py` の
#   `add_timing_signal_1d` から分離。その元は、コードを含む最初のコミット `3d9c62f`
#   （"initial push"、2017 年 6 月 15 日）。リポジトリの最初のコミット `cedf0e2` は `README.md` のみ。
#   論文についてのコメントはコミット `ffe4cf4`（2019 年）から。
#   <https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/layers/common_attention.py>
# - tensor2tensor のプルリクエスト #177（"fix positional embedding"）。2017 年 7 月 24 日（米国太平洋時間）に
#   コミット `62a0ee7` でマージされ、翌日コミット `ca08ad9` で取り消し。
#   2017 年 7 月 26 日の Ł. Kaiser のコメント（"breaks all trained models"）を含む。
#   イシュー #391（"Mismatch position encoding with paper"）と Ł. Kaiser の回答。
#   <https://github.com/tensorflow/tensor2tensor/pull/177>、
#   <https://github.com/tensorflow/tensor2tensor/issues/391>
# - fairseq：`SinusoidalPositionalEmbedding`。
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - fairseq：`fairseq/utils.py` の `make_positions`。
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/utils.py>
# - AllenNLP：`allennlp.modules.transformer.positional_encoding.SinusoidalPositionalEncoding`。
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - labml.ai：固定の位置エンコーディングの注釈付き実装。
#   <https://nn.labml.ai/transformers/positional_encoding.html>
# - labml.ai：`labml_nn/transformers/models.py` の `EmbeddingsWithPositionalEncoding`。
#   <https://github.com/labmlai/annotated_deep_learning_paper_implementations>
# - Huang, Y.-H.：`attention-is-all-you-need-pytorch`（`transformer/Models.py`。
#   2017 年 11 月のコミット `7fa8c63` より前の版は指数に $2j/d$ を使用）。
#   <https://github.com/jadore801120/attention-is-all-you-need-pytorch>
# - Hugging Face transformers 5.24.0：`MarianSinusoidalPositionalEmbedding`、
#   XLM の `create_sinusoidal_embeddings`、RoBERTa の
#   `create_position_ids_from_input_ids`、XLM、DistilBERT、RoBERTa の設定。
#   <https://github.com/huggingface/transformers>
# - Hugging Face diffusers：`src/diffusers/models/embeddings.py` の `get_timestep_embedding`。
#   <https://github.com/huggingface/diffusers>
# - OpenAI：guided-diffusion と GLIDE。`guided_diffusion/nn.py` と `glide_text2im/nn.py` の `timestep_embedding`。
#   <https://github.com/openai/guided-diffusion>、
#   <https://github.com/openai/glide-text2im>
# - OpenAI：Whisper。`whisper/model.py` の `sinusoids`。
#   <https://github.com/openai/whisper>
# - Rush, A. (2018). *The Annotated Transformer*（`PositionalEncoding`）。
#   <https://nlp.seas.harvard.edu/annotated-transformer/>
# - IEEE (2019). *IEEE Standard for Floating-Point Arithmetic* (IEEE 754-2019).
#   <https://doi.org/10.1109/IEEESTD.2019.8766229>
# - Goldberg, D. (1991). *What Every Computer Scientist Should Know About
#   Floating-Point Arithmetic*. ACM Computing Surveys 23(1).
#   <https://doi.org/10.1145/103162.103163>
