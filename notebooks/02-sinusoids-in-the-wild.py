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
# # Sinusoids in the wild
#
# The paper defines the sinusoidal positional encoding in two lines, and yet the
# implementations people actually run disagree with each other in six ways: the
# order of the columns, the spacing of the frequencies, what happens to an odd
# width, where the positions start, an exponent copied wrongly, and the precision
# of the angles. This chapter takes each variant in turn, writes out its formula in
# a few lines of torch, reproduces it with `posenc` parameters, and measures how far
# it is from the paper. Some differences are harmless relabellings; others give a
# model a different input, or break the property the encoding was chosen for.
#
# The chapter [*Sinusoidal positional encoding*](01-sinusoidal.ipynb) derived the
# encoding and its rotation property, $PE(p+k) = M_k\, PE(p)$; we use both here
# without deriving them again. The symbols follow the
# [notation page](../docs/notation.md): $n = d/2$ pairs with frequencies
# $\omega_i$, columns $j$, positions $p$.

# %% [markdown] lang="ja"
# # 実装ごとに違う正弦波位置エンコーディング
#
# 論文は正弦波位置エンコーディングをわずか 2 行で定義しています。
# ところが、実際に使われている実装どうしは 6 つの点で食い違います。
# 列の並び順、周波数の刻み方、奇数の幅の扱い、位置の数え始め、書き間違えた指数、そして角度の計算精度です。
# この章では変種を 1 つずつ取り上げ、その式を数行の torch で書き起こし、
# `posenc` のパラメータで再現し、論文の定義からどれだけ離れているかを測ります。
# ラベルを付け替えただけの無害な違いもあれば、モデルへの入力を変えてしまう違いや、
# このエンコーディングが選ばれた理由である性質を壊してしまう違いもあります。
#
# 「[正弦波位置エンコーディング](01-sinusoidal.ipynb)」の章では、エンコーディングとその回転の性質
# $PE(p+k) = M_k\, PE(p)$ を導きました。ここではそれらを導き直さずに使います。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。
# ペアは $n = d/2$ 組で、その周波数を $\omega_i$、列の番号を $j$、位置を $p$ と書きます。

# %%
import math

import matplotlib.pyplot as plt
import torch

from posenc import SinusoidalEmbedding, attention, sinusoidal
from posenc_lab.plotting import INK, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## 1. Interleaved or concatenated: one fixed permutation
#
# The paper puts the sine and cosine of frequency $\omega_i$ side by side, in
# columns $2i$ and $2i+1$ (the
# [interleaved layout](../docs/glossary.md#interleaved-layout)). tensor2tensor,
# fairseq and
# AllenNLP write all $n = d/2$ sines first and then all cosines, so that column $i$
# holds the sine and column $n+i$ the cosine (the
# [concatenated layout](../docs/glossary.md#concatenated-layout)). The two tables
# hold the same numbers; only the columns are in another order. Column $c$ of the
# concatenated table is column $\pi(c)$ of the interleaved one, with
# $$\pi(c) = \begin{cases} 2c & c < n \\ 2(c-n)+1 & c \ge n \end{cases}$$
# Let $P$ be the permutation matrix with $P_{c,\pi(c)} = 1$ and every other entry
# $0$. As column vectors,
# $$PE^{\mathrm{cat}}(p) = P\, PE^{\mathrm{int}}(p)$$
# In code, where positions are rows, this is indexing the last axis with $\pi$:
# `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]`. The cell below
# builds `perm` from the case formula, prints it for $d = 8$ together with its inverse
# (which is the order $(0, n, 1, n+1, \dots)$ that turns the concatenated table back
# into the interleaved one), and checks the identity for both frequency
# conventions against a concatenated table written out from the formula. (Comparing
# `posenc`'s two layouts with each other would prove little: it builds both from
# the same sines and cosines, so they agree bit for bit by construction.)

# %% [markdown] lang="ja"
# ## 1. インターリーブ配置と連結配置：違いは列の並べ替えだけ
#
# 論文は、周波数 $\omega_i$ の正弦と余弦を列 $2i$ と $2i+1$ に隣り合わせて置きます（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）。
# tensor2tensor、fairseq、AllenNLP は、$n = d/2$ 個の正弦をすべて先に並べ、そのあとに余弦をすべて並べます。
# 列 $i$ が正弦、列 $n+i$ が余弦です（[連結配置](../docs/glossary.ja.md#concatenated-layout)）。
# 2 つの表に入っている数は同じで、列の順番が違うだけです。
# 連結配置の列 $c$ は、インターリーブ配置の列 $\pi(c)$ に当たります。
# $$\pi(c) = \begin{cases} 2c & c < n \\ 2(c-n)+1 & c \ge n \end{cases}$$
# $P_{c,\pi(c)} = 1$ で、それ以外の成分が $0$ の置換行列を $P$ とします。列ベクトルで書くと次のとおりです。
# $$PE^{\mathrm{cat}}(p) = P\, PE^{\mathrm{int}}(p)$$
# 位置を行に並べるコードでは、最後の軸を $\pi$ でインデックス指定することに当たります。
# つまり `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]` です。
# 次のセルでは、場合分けの式から `perm` を作り、$d = 8$ のときの値とその逆置換を表示します。
# 逆置換は $(0, n, 1, n+1, \dots)$ という順番で、連結配置の表をインターリーブ配置に戻します。
# そのうえで、2 つの周波数の流儀のどちらでも、式から書き出した連結配置の表とこの等式を照らし合わせます。
# `posenc` の 2 つの配置どうしを比べても、あまり意味はありません。
# どちらも同じ正弦と余弦から作るので、ビット単位で一致するのは作り方から当然だからです。


# %%
def layout_permutation(d):
    """pi as an index tensor, d even: concat column c = interleaved perm[c]."""
    n = d // 2
    return torch.tensor([2 * c if c < n else 2 * (c - n) + 1 for c in range(d)])


def concat_by_formula(p, d, endpoint=False):
    """The concatenated table from the formula, in float64: the sines of
    p w_i, then their cosines, w_i = 10000^(-i/n), or 10000^(-i/(n-1)) with
    endpoint; a zero column when d is odd (tensor2tensor, fairseq, AllenNLP)."""
    n = d // 2
    i = torch.arange(n, dtype=torch.float64)
    omega = 10000.0 ** (-i / (n - 1 if endpoint else n))
    angle = p.double()[:, None] * omega  # [p, n]
    table = torch.cat([angle.sin(), angle.cos()], dim=-1)  # [p, 2n]
    return torch.nn.functional.pad(table, (0, d - 2 * n))  # [p, d]


perm8 = layout_permutation(8)
inverse8 = torch.argsort(perm8)
# (0, n, 1, n+1, ...)
assert torch.equal(inverse8, torch.tensor([0, 4, 1, 5, 2, 6, 3, 7]))

for d in (8, 16, 512):
    perm = layout_permutation(d)
    P = torch.eye(d, dtype=torch.float64)[perm]  # P[c, pi(c)] = 1
    # a permutation
    torch.testing.assert_close(P.T @ P, torch.eye(d, dtype=torch.float64))
    p = torch.arange(300)
    for endpoint in (False, True):
        interleaved = sinusoidal(p, d, endpoint=endpoint, dtype=torch.float64)
        by_formula = concat_by_formula(p, d, endpoint)
        # PE_cat(p) = P PE_int(p), with PE_cat written from the formula
        torch.testing.assert_close(by_formula.T, P @ interleaved.T)
        torch.testing.assert_close(interleaved[..., perm], by_formula)
        torch.testing.assert_close(
            sinusoidal(
                p, d, layout="concat", endpoint=endpoint, dtype=torch.float64
            ),
            by_formula,
        )

print(
    f"perm    (d = 8): {perm8.tolist()}\ninverse (d = 8): {inverse8.tolist()}",
    end="",
)

# %% [markdown] lang="en"
# Side by side, for $d = 32$: on the left the sine and cosine rows of each frequency
# alternate, and the colours slow down gradually from top to bottom; on the right
# the same rows are sorted into two blocks, sines above, cosines below, each slowing
# down on its own.

# %% [markdown] lang="ja"
# $d = 32$ で 2 つを並べてみます。
# 左では、各周波数の正弦と余弦の行が交互に並び、上から下へ色の変化が少しずつゆっくりになります。
# 右では、同じ行が上の正弦のブロックと下の余弦のブロックに分けられ、それぞれのブロックの中でゆっくりになっていきます。

# %% alt={"en": ["Two heatmaps of the d = 32 sinusoidal encoding, position p across, dimension j down. Interleaved (left): sine and cosine rows alternate, slowing gradually. Concatenated (right): sines in the top half, cosines below, each slowing down."], "ja": ["d = 32 の正弦波位置エンコーディングの 2 つのヒートマップ（横軸は位置 p、縦軸は次元 j）。左のインターリーブ配置では正弦と余弦の行が交互に並んで徐々にゆっくりになり、右の連結配置では上半分が正弦、下半分が余弦で、それぞれの中でゆっくりになります。"]}
p = torch.arange(64)
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.2), sharey=True)
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
# A permutation of the features is invisible to a model whose weights are permuted
# the same way. Put the token embeddings of a sequence in the rows of $X$ and their
# encodings in the rows of $E$. A model built for the interleaved layout computes
# its queries as $(X + E^{\mathrm{int}})W_Q$. Give the concatenated model the
# embeddings with permuted columns, $XP^\top$, and the query weights with permuted
# rows, $PW_Q$. Its encodings are $E^{\mathrm{int}}P^\top$, so, with $P^\top P = I$,
# $$(XP^\top + E^{\mathrm{int}}P^\top)(PW_Q) = (X + E^{\mathrm{int}})W_Q$$
# The same holds for the keys and the values, so the attention scores and the
# outputs are identical. The two layouts therefore describe the same family of
# models: a [checkpoint](../docs/glossary.md#checkpoint) trained with one converts
# exactly to the other by permuting
# its embedding columns and the rows of the weights that read them. In a full
# Transformer every matrix that reads from or writes to the
# [residual stream](../docs/glossary.md#residual-stream), and
# every per-feature parameter on it such as the gains and biases of the layer
# norms, must be permuted alike; the check below covers one attention layer. Without the permuted
# weights, swapping the layout does change the scores, so a checkpoint cannot simply
# be loaded under the other layout.
#
# **What the authors said.** tensor2tensor, the code that the paper's Conclusion
# names for training and evaluating its models, has used the concatenated layout
# since its first public version (`add_timing_signal_1d`, June 2017). A pull
# request that reordered its columns to match the paper (tensor2tensor #177) was
# merged on 24 July 2017 and undone the next day "to make trained models work"
# (the commit's title). In the pull request's thread Łukasz Kaiser, one of the
# paper's authors, gave the reason: the change "breaks all trained models".
# Trained checkpoints are tied to their layout, as the last check shows. Since
# 2019 a comment above the line that concatenates the sines and the cosines
# says that this "slightly differs from the published paper" and links that
# pull request. Asked whether the order matters (issue #391), Kaiser answered
# that he thought it does not, because the fully connected layer after the
# encoding can permute the coordinates: the argument above.

# %% [markdown] lang="ja"
# 次元の並べ替えは、重みも同じように並べ替えたモデルには区別できません。
# 系列のトークンの埋め込みを $X$ の各行に、その位置エンコーディングを $E$ の各行に並べます。
# インターリーブ配置用のモデルは、クエリを $(X + E^{\mathrm{int}})W_Q$ と計算します。
# 連結配置用のモデルには、列を並べ替えた埋め込み $XP^\top$ と、行を並べ替えたクエリの重み $PW_Q$ を与えます。
# その位置エンコーディングは $E^{\mathrm{int}}P^\top$ なので、$P^\top P = I$ から次が成り立ちます。
# $$(XP^\top + E^{\mathrm{int}}P^\top)(PW_Q) = (X + E^{\mathrm{int}})W_Q$$
# キーとバリューでも同じことが成り立つので、アテンションスコアと出力はどちらも一致します。
# したがって、2 つの配置は同じモデルの集まりを表しています。
# 一方の配置で学習した[チェックポイント](../docs/glossary.ja.md#checkpoint)は、埋め込みの列と、それを読む重みの行を並べ替えれば、
# もう一方の配置へ厳密に変換できます。
# 完全な Transformer では、[残差ストリーム](../docs/glossary.ja.md#residual-stream)を読み書きするすべての行列と、層正規化のゲインやバイアスのような
# 残差ストリーム上の次元ごとのパラメータを、すべて同じように並べ替える必要があります。
# 下の確認では、アテンション層 1 つについて調べます。
# 重みを並べ替えずに配置だけを入れ替えるとスコアは変わります。
# そのため、チェックポイントをそのまま別の配置で読み込むことはできません。
#
# **著者たちの説明。** 論文は結論の節で、モデルの学習と評価に使ったコードとして tensor2tensor を挙げています。
# tensor2tensor は、最初の公開版（2017 年 6 月の `add_timing_signal_1d`）から連結配置を使っています。
# 列を論文どおりに並べ替えるプルリクエスト（tensor2tensor #177）は、2017 年 7 月 24 日にマージされました。
# しかし翌日には、「学習済みのモデルが動くように」（コミットのタイトル）元に戻されています。
# 論文の著者の 1 人である Łukasz Kaiser は、このプルリクエストのスレッドで、変更が「学習済みのモデルをすべて壊す」ことを理由に挙げています。
# 最後の確認が示すとおり、学習済みのチェックポイントは配置と切り離せません。
# 2019 年からは、正弦と余弦を連結する行の上に、「公開された論文とは少し違う」というコメントと、このプルリクエストへのリンクが付いています。
# 並び順が重要かという質問（issue #391）への Kaiser の回答は、重要ではないだろうというものです。
# エンコーディングの後の全結合層が座標を並べ替えられるから、というのが理由で、上の議論と同じです。

# %%
T, d, d_h = 6, 16, 8
x = torch.randn(T, d)
w_q, w_k, w_v = (torch.randn(d, d_h) / math.sqrt(d) for _ in range(3))
perm = layout_permutation(d)
e_int = sinusoidal(torch.arange(T), d)
e_cat = sinusoidal(torch.arange(T), d, layout="concat")
# E_cat = E_int P^T
torch.testing.assert_close(e_cat, e_int[:, perm], rtol=0, atol=0)


def qkv(x, e, w_q, w_k, w_v):
    h = x + e  # [T, d]
    return h @ w_q, h @ w_k, h @ w_v  # [T, d_h] each


def scores(q, k):
    return q @ k.T / math.sqrt(q.shape[-1])  # [T, T]


q_int, k_int, v_int = qkv(x, e_int, w_q, w_k, w_v)
# X P^T and P W: permute the embedding columns and the weight rows alike
q_cat, k_cat, v_cat = qkv(x[:, perm], e_cat, w_q[perm], w_k[perm], w_v[perm])
torch.testing.assert_close(q_cat, q_int)
torch.testing.assert_close(scores(q_cat, k_cat), scores(q_int, k_int))
torch.testing.assert_close(
    attention(q_cat, k_cat, v_cat), attention(q_int, k_int, v_int)
)

# the other layout with the same, unpermuted weights: different scores
q_swap, k_swap, _ = qkv(x, e_cat, w_q, w_k, w_v)
assert not torch.allclose(
    scores(q_swap, k_swap), scores(q_int, k_int), atol=1e-2
)

# %% [markdown] lang="en"
# ## 2. Dividing by n or by n − 1
#
# The paper's frequencies divide the exponent by $n$; tensor2tensor's
# `get_timing_signal_1d`, and after it fairseq and AllenNLP, divide by $n-1$, so that
# the timescales run from exactly $1$ to exactly $10000$. tensor2tensor's first
# commit with code, `3d9c62f` ("initial push", 15 June 2017), already did so, in
# `add_timing_signal_1d`, from which `get_timing_signal_1d` was split out in
# September 2017 (commit `466ce80`). fairseq's docstring says that its table matches tensor2tensor's
# but "differs slightly" from §3.5. As the paper's Conclusion points to this code, the
# paper's models were presumably trained with this variant rather than the one
# §3.5 writes down. Layout and denominator are independent choices: Hugging Face's
# Marian pairs the concatenated layout with the paper's $n$ (section 3). In
# `posenc` the $n-1$ version is `endpoint=True`:
# $$\omega_i = 10000^{-i/n}, \qquad \omega'_i = 10000^{-i/(n-1)}$$
# Both start at $\omega_0 = \omega'_0 = 1$; dividing,
# $$\frac{\omega_i}{\omega'_i} = 10000^{i/(n(n-1))}$$
# grows with $i$, and at the lowest frequency $i = n-1$ it reaches
# $$\frac{\omega_{n-1}}{\omega'_{n-1}} = 10000^{1/n}$$
# A small relative difference, but the entries are sines of the angles $p\,\omega_i$,
# and the angles drift apart in proportion to $p$. Since
# $|\sin a - \sin b| \le |a - b|$ (and the same for the cosine), each entry differs by
# at most the angle gap $p\,|\omega_i - \omega'_i|$, and a gap of $\pi$ turns an entry
# into the exact negative of the other. The cell below measures it for $d = 512$ over
# the positions $0$ to $2047$.

# %% [markdown] lang="ja"
# ## 2. n で割るか n − 1 で割るか
#
# 論文の周波数は指数を $n$ で割ります。
# tensor2tensor の `get_timing_signal_1d` と、それにならった fairseq と AllenNLP は $n-1$ で割ります。
# こうすると時間スケールがちょうど $1$ からちょうど $10000$ までになります。
# tensor2tensor では、コードが入った最初のコミット `3d9c62f`（"initial push"、2017 年 6 月 15 日）の `add_timing_signal_1d` が、すでにこの割り方をしていました。
# `get_timing_signal_1d` は、2017 年 9 月にこの関数から切り出されたものです（コミット `466ce80`）。
# fairseq の docstring には、表は tensor2tensor と一致するが §3.5 の記述とは「少し違う」とあります。
# 論文は結論の節でこのコードを挙げているので、論文のモデルは §3.5 に書かれた版ではなく、こちらの版で学習されたと考えられます。
# 配置と分母は独立した選択です。Hugging Face の Marian は、連結配置と論文どおりの $n$ を組み合わせています（3 節）。
# `posenc` では `endpoint=True` が $n-1$ 版に当たります。
# $$\omega_i = 10000^{-i/n}, \qquad \omega'_i = 10000^{-i/(n-1)}$$
# どちらも $\omega_0 = \omega'_0 = 1$ から始まります。比を取ると
# $$\frac{\omega_i}{\omega'_i} = 10000^{i/(n(n-1))}$$
# で、これは $i$ とともに大きくなり、最も低い周波数 $i = n-1$ で次の値になります。
# $$\frac{\omega_{n-1}}{\omega'_{n-1}} = 10000^{1/n}$$
# 相対的には小さな違いです。しかし成分は角度 $p\,\omega_i$ の正弦であり、
# 2 つの角度は $p$ に比例して離れていきます。
# $|\sin a - \sin b| \le |a - b|$（余弦も同様）なので、各成分の差は角度の差 $p\,|\omega_i - \omega'_i|$ 以下です。
# 角度の差が $\pi$ になると、一方の成分はもう一方と正負がちょうど反転した値になります。
# 次のセルでは、$d = 512$、位置 $0$ から $2047$ でこれを測ります。

# %%
d, n = 512, 256
i = torch.arange(n, dtype=torch.float64)
omega = 10000.0 ** (-i / n)
omega_t2t = 10000.0 ** (-i / (n - 1))

pos = torch.arange(2048)
paper = sinusoidal(pos, d, dtype=torch.float64)  # Vaswani et al., labml
# tensor2tensor, AllenNLP, fairseq
t2t = sinusoidal(pos, d, endpoint=True, dtype=torch.float64)
# the frequencies, read back from p = 1 (omega_i <= 1: atan2 returns them)
torch.testing.assert_close(torch.atan2(paper[1, 0::2], paper[1, 1::2]), omega)
torch.testing.assert_close(torch.atan2(t2t[1, 0::2], t2t[1, 1::2]), omega_t2t)

assert omega[0] == omega_t2t[0] == 1
ratio = omega / omega_t2t
torch.testing.assert_close(ratio, 10000.0 ** (i / (n * (n - 1))))
assert (ratio[1:] > ratio[:-1]).all()  # grows with i
rel_lowest = omega[-1] / omega_t2t[-1] - 1
torch.testing.assert_close(
    rel_lowest, torch.tensor(10000.0 ** (1 / n) - 1, dtype=torch.float64)
)

gap = (paper - t2t).abs()  # [p, column]
angle_gap = pos[:, None].double() * (omega - omega_t2t).abs()  # [p, i]
# the pair's gap for its sine and cosine columns
bound = angle_gap.repeat_interleave(2, dim=-1)
assert (gap <= bound + 1e-12).all()  # |sin a - sin b| <= |a - b|

worst_p, worst_col = divmod(int(gap.argmax()), d)
widest = angle_gap[-1]  # the angle gaps at p = 2047
# not the pair with the largest ratio
assert int(widest.argmax()) == worst_col // 2 != n - 1
first_above_1 = int((gap.amax(-1) > 1).nonzero()[0])
lines = [
    f"relative difference of the lowest frequency: {rel_lowest:.4f}",
    f"max |difference|, p = 0..2047: {gap.max():.4f}",
    f"  at p = {worst_p}, column {worst_col}, pair i = {worst_col // 2}",
    f"widest angle gap at p = 2047: {widest.max():.2f} rad, "
    f"i = {int(widest.argmax())}",
    f"first position with a difference above 1: {first_above_1}",
]
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# The lowest frequency differs by a relative 0.0366 (that is $10000^{1/256}$ minus
# one), yet the largest entry-wise difference is 1.9895, nearly the full range $2$ of
# a sine, reached at $p = 2043$ in column 56, the sine of pair $i = 28$. That is not
# the pair with the largest relative difference: the gap of the angles,
# $p\,(\omega_i - \omega'_i)$, is largest on the high-frequency side of the spectrum,
# where the frequencies are still high and already differ in relative terms. At $p = 2047$ it
# reaches 2.95 rad at $i = 28$, close to $\pi$. The first position at which some entry
# differs by more than 1 is 732. On the left the two wavelength spectra
# $\lambda_i = 2\pi/\omega_i$ look almost the same; on the right the angle gap at
# $p = 2047$ shows how far apart the encodings really are.

# %% [markdown] lang="ja"
# 最も低い周波数の相対的な違いは 0.0366（$10000^{1/256}$ から 1 を引いた値）にすぎません。
# それでも成分ごとの差の最大値は 1.9895 で、正弦の値域の幅 $2$ にほぼ等しくなります。
# これは $p = 2043$、列 56、つまりペア $i = 28$ の正弦で起きます。
# ただし、ペア 28 は相対的な違いが最も大きいペアではありません。
# 角度の差 $p\,(\omega_i - \omega'_i)$ は、周波数がまだ高く、しかも相対的な違いがすでに現れている
# スペクトルの高周波側で最大になります。
# $p = 2047$ では $i = 28$ で 2.95 rad に達します。これは $\pi$ に近い値です。
# 差が 1 を超える成分が初めて現れる位置は 732 です。
# 左の図の 2 つの波長スペクトル $\lambda_i = 2\pi/\omega_i$ はほとんど同じに見えます。
# 右の図は $p = 2047$ での角度の差で、2 つのエンコーディングが実際にどれほど離れているかを示します。

# %% alt={"en": ["Left: wavelengths of the paper's and tensor2tensor's frequencies for d = 512 against pair i on a log axis, two nearly identical lines. Right: their angle gap at p = 2047 rises to near π at i ≈ 28 and falls back to 0 for the slow pairs."], "ja": ["左は d = 512 の論文版と tensor2tensor 版の周波数の波長を、ペア i に対して対数軸で描いたもので、2 本の線はほぼ重なります。右は p = 2047 での両者の角度の差で、i ≈ 28 で π 近くまで上がり、遅いペアでは 0 に戻ります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.4))
ax = axes[0]
ax.plot(i, 2 * math.pi / omega, label=r"$2\pi/\omega_i$")
ax.plot(i, 2 * math.pi / omega_t2t, "--", label=r"$2\pi/\omega'_i$")
ax.set_yscale("log")
ax.set_xlabel("$i$")
ax.set_ylabel(r"$\lambda_i$")
ax.legend(loc="upper left")
ax = axes[1]
ax.plot(i, widest)
ax.axhline(math.pi, color="0.5", lw=0.8, ls=":")
ax.set_yticks([0, math.pi / 2, math.pi])
ax.set_yticklabels(["$0$", r"$\pi/2$", r"$\pi$"])
ax.set_xlabel("$i$")
ax.set_ylabel(r"$p\,(\omega_i - \omega'_i)$")
ax.set_title("$p = 2047$")
plt.show()

# %% [markdown] lang="en"
# ## 3. Odd widths
#
# With an odd $d$ there are $n = \lfloor d/2 \rfloor$ whole pairs and one column
# left over. Libraries disagree about that column.
#
# - tensor2tensor, fairseq and AllenNLP pad it with zeros. `posenc` does the same, so
#   its $d = 7$ table is the $d = 6$ table plus a zero column (printed below).
# - labml fails: it computes one frequency for each even column, four for $d = 7$, and
#   assigns their cosines to the three odd columns, which torch refuses (the error
#   is printed below).
# - The per-column formula of jadore801120's `attention-is-all-you-need-pytorch`,
#   angle $p/10000^{2\lfloor j/2 \rfloor/d}$ for column $j$, sine in the even columns and
#   cosine in the odd ones, fills the extra column with a sine. Its frequencies are
#   $10000^{-2i/d}$ with the odd $d$, which makes its table equal to the first $d$
#   columns of `posenc`'s $d+1$ table with the base $10000^{(d+1)/d}$. For $d = 7$ the
#   last column is $\sin(p \cdot 10000^{-6/7})$, a sine without its cosine. XLM's and
#   DistilBERT's `create_sinusoidal_embeddings` in Hugging Face transformers use
#   the same per-column formula when it is switched on
#   (`sinusoidal_embeddings=True`, `sinusoidal_pos_embds=True`); both options
#   are off by default, and the positions are then a learned table.
# - Hugging Face's Marian (`MarianSinusoidalPositionalEmbedding`) computes the same
#   per-column angles but stores them concatenated: the sines of the
#   $\lceil d/2 \rceil$ even columns first, then the cosines of the
#   $\lfloor d/2 \rfloor$ odd ones. Its lone sine therefore sits in column $n$, just
#   before the cosines: for $d = 7$, $\sin(p \cdot 10000^{-6/7})$ in column 3. The
#   cell checks these formulas against values printed by transformers 5.24.0.
#
# The zero column carries no information, which is harmless. The lone sine carries
# some, but it has no place in the rotation property: the pairs are shifted by their
# $2 \times 2$ blocks, and a $1 \times 1$ block $c$ for the lone column would need
# $c \sin 0 = \sin(k \cdot 10000^{-6/7})$ at $p = 0$, which no $c$ satisfies, since the
# left side is $0$ and the right side is not (the argument of
# [The sine alone is not enough](01-sinusoidal.ipynb#the-sine-alone-is-not-enough)
# in *Sinusoidal positional encoding*).

# %% [markdown] lang="ja"
# ## 3. 奇数の幅
#
# $d$ が奇数だと、完全なペアが $n = \lfloor d/2 \rfloor$ 組でき、列が 1 本余ります。
# この列の扱いはライブラリによって違います。
#
# - tensor2tensor、fairseq、AllenNLP は 0 で埋めます。`posenc` も同じです。
#   $d = 7$ の表は、$d = 6$ の表に 0 の列を 1 本加えたものになります（下に表示します）。
# - labml は失敗します。番号が偶数の列ごとに 1 つ、$d = 7$ なら 4 つの周波数を計算し、
#   その余弦を 3 本しかない番号が奇数の列に代入しようとして、torch に拒否されます（エラーを下に表示します）。
# - jadore801120 の `attention-is-all-you-need-pytorch` は列ごとの式を使います。
#   列 $j$ の角度を $p/10000^{2\lfloor j/2 \rfloor/d}$ とし、番号が偶数の列に正弦、番号が奇数の列に余弦を入れます。
#   この式では余った列が正弦で埋まります。周波数は奇数の $d$ のまま $10000^{-2i/d}$ なので、
#   この表は、底を $10000^{(d+1)/d}$ とした `posenc` の $d+1$ の表の先頭 $d$ 列と一致します。
#   $d = 7$ では最後の列が $\sin(p \cdot 10000^{-6/7})$ で、対になる余弦のない正弦です。
#   Hugging Face transformers の XLM と DistilBERT の `create_sinusoidal_embeddings` も、有効にしたとき
#   （`sinusoidal_embeddings=True`、`sinusoidal_pos_embds=True`）は同じ列ごとの式を使います。
#   どちらも既定では無効で、その場合の位置は学習型の表です。
# - Hugging Face の Marian（`MarianSinusoidalPositionalEmbedding`）は、同じ列ごとの角度を計算しますが、連結配置で格納します。
#   番号が偶数の $\lceil d/2 \rceil$ 本の列の正弦を先に並べ、そのあとに番号が奇数の $\lfloor d/2 \rfloor$ 本の列の余弦を並べます。
#   そのため、孤立した正弦は余弦の直前の列 $n$ に入ります。$d = 7$ なら列 3 の $\sin(p \cdot 10000^{-6/7})$ です。
#   セルでは、これらの式を transformers 5.24.0 が出力した値と照らし合わせます。
#
# 0 の列は情報を運ばないので害はありません。
# 孤立した正弦は情報を運びますが、回転の性質には加われません。
# ペアはそれぞれの $2 \times 2$ ブロックでずらせます。
# しかし孤立した列に $1 \times 1$ のブロック $c$ を割り当てると、$p = 0$ で
# $c \sin 0 = \sin(k \cdot 10000^{-6/7})$ が必要になります。左辺が $0$ なのに右辺はそうでないので、
# これを満たす $c$ はありません（「正弦波位置エンコーディング」の章の
# 「[正弦だけでは足りない](01-sinusoidal.ipynb#正弦だけでは足りない)」と同じ議論です）。

# %%
p = torch.arange(4)
table7 = sinusoidal(p, 7)
assert torch.equal(table7[:, 6], torch.zeros(4))  # the zero column
torch.testing.assert_close(table7[:, :6], sinusoidal(p, 6), rtol=0, atol=0)


def labml_frequencies(d):
    """labml's frequencies, one per even column (ceil(d/2) of them), computed
    as labml computes them: exp(2i * -(ln 10000 / d)) in float32."""
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    return torch.exp(two_i * -(math.log(10000.0) / d))


def labml_like(p, d):
    """labml's construction: one frequency per even column."""
    table = torch.zeros(len(p), d)
    angle = p.float()[:, None] * labml_frequencies(d)
    table[:, 0::2] = angle.sin()
    table[:, 1::2] = angle.cos()  # floor(d/2) columns, ceil(d/2) values
    return table


def per_column(p, d):
    """jadore801120: angle p / 10000^(2 floor(j/2) / d) for column j."""
    j = torch.arange(d, dtype=torch.float64)
    angle = p.double()[:, None] / 10000.0 ** (2 * (j // 2) / d)  # [p, d]
    table = angle.clone()
    table[:, 0::2] = angle[
        :, 0::2
    ].sin()  # even columns: sine (the last one too when d is odd)
    table[:, 1::2] = angle[:, 1::2].cos()
    return table


def marian_like(p, d):
    """Hugging Face's Marian: the per-column angles, stored concatenated:
    sines of the even columns, then cosines of the odd ones."""
    j = torch.arange(d, dtype=torch.float64)
    angle = p.double()[:, None] / 10000.0 ** (2 * (j // 2) / d)  # [p, d]
    return torch.cat([angle[:, 0::2].sin(), angle[:, 1::2].cos()], dim=-1)


q = torch.arange(50)
for d in (6, 7, 9, 512, 513):
    torch.testing.assert_close(
        sinusoidal(q, d, layout="concat", endpoint=True, dtype=torch.float64),
        concat_by_formula(q, d, endpoint=True),
    )
    # even d: labml and the per-column formula are the paper's encoding
    if d % 2 == 0:
        torch.testing.assert_close(
            labml_like(q, d), sinusoidal(q, d), rtol=0, atol=1e-5
        )
        torch.testing.assert_close(
            per_column(q, d), sinusoidal(q, d, dtype=torch.float64)
        )
    # odd d: the per-column table is posenc's d + 1 table with the base
    # 10000^((d+1)/d), cut to d columns
    else:
        wider = sinusoidal(
            q, d + 1, base=10000.0 ** ((d + 1) / d), dtype=torch.float64
        )
        torch.testing.assert_close(per_column(q, d), wider[:, :d])
        # Marian: the first d columns of the same width, concatenated
        wider_cat = sinusoidal(
            q,
            d + 1,
            layout="concat",
            base=10000.0 ** ((d + 1) / d),
            dtype=torch.float64,
        )
        torch.testing.assert_close(marian_like(q, d), wider_cat[:, :d])
    if d % 2 == 0:  # even d: Marian is posenc's concatenated table
        torch.testing.assert_close(
            marian_like(q, d),
            sinusoidal(q, d, layout="concat", dtype=torch.float64),
        )
# row p = 3 as printed by transformers 5.24.0 (9 digits):
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
    torch.testing.assert_close(
        ours[name].float(), torch.tensor(row), rtol=0, atol=1e-7
    )
# Marian's lone sine sits in column n = 3, before the cosines
torch.testing.assert_close(
    marian_like(q, 7)[:, 3], torch.sin(q * 10000.0 ** (-6 / 7)).double()
)
lone = per_column(q, 7)[:, 6]
torch.testing.assert_close(lone, torch.sin(q * 10000.0 ** (-6 / 7)).double())
# c sin 0 = 0, but sin(k 10000^(-6/7)) != 0
assert lone[0] == 0 and (lone[1:] != 0).all()

try:
    labml_like(p, 7)
    labml_message = "no error"
except RuntimeError as err:
    labml_message = str(err).split(".")[0]
assert labml_message.startswith("The expanded size")
print(
    f"posenc, d = 7:\n{table7}\nlabml, d = 7: RuntimeError:\n  "
    + labml_message.replace(" at non-", "\n  at non-"),
    end="",
)

# %% [markdown] lang="en"
# ## 4. fairseq's positions start after the padding index
#
# fairseq does not number positions from $0$. Its `utils.make_positions` takes the
# batch of token ids, marks the tokens that are not padding, and counts them along the
# sequence with a [cumulative sum](../docs/glossary.md#cumulative-sum); non-padding
# tokens get
# $\mathrm{padding\_idx} + 1, \mathrm{padding\_idx} + 2, \dots$ and padding tokens get
# $\mathrm{padding\_idx}$ itself:
# $$\mathrm{pos}_t = \mathrm{padding\_idx} + m_t \sum_{s \le t} m_s, \qquad m_t = [\text{token}_t \ne \text{pad}]$$
# Its table (`SinusoidalPositionalEmbedding.get_embedding`) uses the concatenated
# layout and the $n-1$ denominator, and sets row $\mathrm{padding\_idx}$ to zero, so
# [padding](../docs/glossary.md#padding) adds nothing. With fairseq's usual
# `padding_idx = 1`, the first [real token](../docs/glossary.md#real-token)
# gets row $2$. Because the cumulative sum counts only real tokens, the first real
# token gets row $2$ with left padding too. In `posenc` the table is
# `SinusoidalEmbedding(rows, d, padding_idx=1, layout="concat", endpoint=True)`, and the
# positions are computed in one line. The cell below rebuilds fairseq's table as
# `get_embedding` computes it (frequencies through `exp`, angles and sines in
# float32) and compares.
#
# The offset outlived the sinusoids. RoBERTa's learned positions go through the
# same `make_positions` with `padding_idx = 1`, so 512 real tokens use rows 2 to
# 513 of a 514-row table: hence `max_position_embeddings = 514` in the
# configuration of the released checkpoints (the default of Hugging Face's
# `RobertaConfig` is 512), and `create_position_ids_from_input_ids` there (see
# [The padding row](03-learned-embeddings.ipynb#the-padding-row) in the chapter
# *Learned absolute embeddings and scaled sinusoids*).

# %% [markdown] lang="ja"
# ## 4. fairseq の位置はパディングのインデックスの次から始まる
#
# fairseq は位置を $0$ から数えません。
# `utils.make_positions` はトークン ID のバッチを受け取り、パディングでないトークンに印を付け、
# [累積和](../docs/glossary.ja.md#cumulative-sum)で系列に沿って数えます。
# パディングでないトークンには $\mathrm{padding\_idx} + 1, \mathrm{padding\_idx} + 2, \dots$ が、
# パディングのトークンには $\mathrm{padding\_idx}$ そのものが割り当てられます。
# $$\mathrm{pos}_t = \mathrm{padding\_idx} + m_t \sum_{s \le t} m_s, \qquad m_t = [\text{token}_t \ne \text{pad}]$$
# 表（`SinusoidalPositionalEmbedding.get_embedding`）は連結配置で、分母は $n-1$ です。
# さらに行 $\mathrm{padding\_idx}$ を 0 にするので、パディングには何も足されません。
# fairseq でよく使われる `padding_idx = 1` では、最初の[実トークン](../docs/glossary.ja.md#real-token)（[パディング](../docs/glossary.ja.md#padding)でないトークン）は行 $2$ を受け取ります。
# 累積和は実トークンだけを数えるので、左側にパディングがあっても最初の実トークンは行 $2$ です。
# `posenc` では、表は `SinusoidalEmbedding(rows, d, padding_idx=1, layout="concat", endpoint=True)` で、
# 位置は 1 行で計算できます。
# 次のセルでは、fairseq の表を `get_embedding` と同じ計算（周波数は `exp` で、角度と正弦は float32 で）で作り直して比べます。
#
# このずれは、正弦波を使わなくなったモデルにも引き継がれています。
# 学習型位置埋め込みを使う RoBERTa でも、位置は同じ `make_positions` で `padding_idx = 1` として計算されます。
# そのため 512 個の実トークンは 514 行の表の行 2 から 513 を使います。
# 公開されたチェックポイントの設定が `max_position_embeddings = 514` なのはこのためです（Hugging Face の `RobertaConfig` の既定値は 512）。
# Hugging Face の RoBERTa が `create_position_ids_from_input_ids` を持つのも同じ理由です
# （「学習型位置埋め込みとスケール付き正弦波」の章の「[パディング用の行](03-learned-embeddings.ipynb#パディング用の行)」を参照してください）。

# %%
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
assert torch.equal(
    positions, torch.tensor([[2, 3, 4, 5, 6], [2, 3, 4, 1, 1], [1, 1, 2, 3, 4]])
)


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


# fairseq needs at least this many rows (it builds 1024 at first)
rows = padding_idx + 1 + tokens.shape[1]
table = fairseq_like(rows, d, padding_idx)
fairseq = SinusoidalEmbedding(
    rows, d, padding_idx=padding_idx, layout="concat", endpoint=True
)
out = fairseq(positions)  # [batch, seq, d]
torch.testing.assert_close(out, table[positions])  # float32 tolerance
# padding adds nothing
assert torch.equal(out[mask == 0], torch.zeros(int((mask == 0).sum()), d))
# RoBERTa: 512 real tokens, padding_idx = 1, use rows 2 .. 513 of 514
full = torch.full((1, 512), 7)  # any non-padding id
roberta_positions = torch.cumsum(full.ne(1).long(), dim=1) + 1
assert roberta_positions.min() == 2 and roberta_positions.max() + 1 == 514
print(positions)

# %% [markdown] lang="en"
# Compared with numbering the real tokens $t = 0, 1, 2, \dots$, every real token is
# shifted by $\mathrm{padding\_idx} + 1 = 2$: it receives $PE(t+2)$ instead of $PE(t)$.
# By the rotation property this is one fixed linear map for all positions,
# $PE(t+2) = M_2\, PE(t)$, with the block-diagonal rotation
# $M_k = \mathrm{diag}\big(B(k\omega_0), \dots, B(k\omega_{n-1})\big)$ of
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb#why-a-sine-and-a-cosine-a-shift-is-a-rotation),
# in the interleaved layout, where
# $B(\phi) = \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}$. fairseq's table is concatenated, so its matrix
# is the same rotation with rows and columns permuted by section 1's $P$:
# $$PE^{\mathrm{cat}}(t+2) = P M_2 P^\top\, PE^{\mathrm{cat}}(t)$$
# A rotation preserves norms and dot products, so the geometry among the real
# tokens is exactly that of positions $0, 1, 2, \dots$: all $PE(t)\cdot PE(u)$ are
# unchanged. What does change is the vector added to each token. Each pair moves
# along a chord of its unit circle, a displacement of norm $2|\sin(k\omega_i/2)|$, so
# the distance
# $$\|PE(t+k) - PE(t)\|^2 = \sum_{i=0}^{n-1} 4\sin^2(k\omega_i/2)$$
# is the same for every $t$. For $d = 512$ and $k = 2$ the distance is 6.95 (printed
# below), against the norm $\sqrt{n} = 16$ of every encoding: a model trained with fairseq's
# numbering and fed positions from $0$ (or the reverse) gets a clearly different
# input, even though the two numberings give the real tokens the same geometry.
# The rows $0$ and $1$ are never used by a real token; row $1$ is the zero vector, not
# an encoding (its norm is $0$, every encoding has norm $\sqrt{n}$).

# %% [markdown] lang="ja"
# 実トークンを $t = 0, 1, 2, \dots$ と数える場合に比べて、すべての実トークンが
# $\mathrm{padding\_idx} + 1 = 2$ だけずれています。$PE(t)$ の代わりに $PE(t+2)$ を受け取るのです。
# 回転の性質から、このずれはすべての位置に共通の 1 つの線形写像 $PE(t+2) = M_2\, PE(t)$ で表せます。
# ここで $M_k = \mathrm{diag}\big(B(k\omega_0), \dots, B(k\omega_{n-1})\big)$ は、
# 「[正弦波位置エンコーディング](01-sinusoidal.ipynb#なぜ正弦と余弦の両方かずらすことは回転すること)」の章で導いたインターリーブ配置のブロック対角の回転で、
# $B(\phi) = \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}$ です。
# fairseq の表は連結配置なので、その行列は同じ回転の行と列を 1 節の $P$ で並べ替えたものです。
# $$PE^{\mathrm{cat}}(t+2) = P M_2 P^\top\, PE^{\mathrm{cat}}(t)$$
# 回転はノルムと内積を保つので、実トークンどうしの幾何的な関係（内積やノルム）は位置 $0, 1, 2, \dots$ の場合とまったく同じです。
# $PE(t)\cdot PE(u)$ はどれも変わりません。
# 変わるのは、各トークンに足されるベクトルそのものです。
# 各ペアは単位円の弦に沿って動き、その変位のノルムは $2|\sin(k\omega_i/2)|$ です。
# したがって、次の距離はどの $t$ でも同じです。
# $$\|PE(t+k) - PE(t)\|^2 = \sum_{i=0}^{n-1} 4\sin^2(k\omega_i/2)$$
# $d = 512$、$k = 2$ ではこの距離は 6.95 です（下の出力）。これに対して、エンコーディングのノルムはどれも $\sqrt{n} = 16$ です。
# 2 つの数え方は実トークンどうしの幾何的な関係こそ同じですが、fairseq の数え方で学習したモデルに $0$ から数えた位置を与えると（逆も同じ）、入力ははっきり変わります。
# 行 $0$ と $1$ を実トークンが使うことはありません。
# 行 $1$ は零ベクトルで、エンコーディングではありません（ノルムは $0$ で、エンコーディングのノルムはどれも $\sqrt{n}$ です）。


# %%
def shift_matrix(k, omega):
    """M_k, interleaved: diag(B(k w_0), ...), B(phi) = [[c, s], [-s, c]]."""
    blocks = []
    for w in omega.tolist():
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


real = mask.bool()
t = torch.cumsum(mask, dim=1) - 1  # the real tokens numbered from 0
shift = padding_idx + 1
assert torch.equal(positions[real], t[real] + shift)
# rows 0 and 1 are never used by a real token
assert positions[real].min() == shift
torch.testing.assert_close(
    out[real], sinusoidal(t[real] + shift, d, layout="concat", endpoint=True)
)

n = d // 2
omega_t2t = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / (n - 1))
P = torch.eye(d, dtype=torch.float64)[layout_permutation(d)]
m_cat = P @ shift_matrix(shift, omega_t2t) @ P.T
pe_t = sinusoidal(
    torch.arange(100), d, layout="concat", endpoint=True, dtype=torch.float64
)
pe_shifted = sinusoidal(
    torch.arange(100) + shift,
    d,
    layout="concat",
    endpoint=True,
    dtype=torch.float64,
)
# PE_cat(t+2) = P M_2 P^T PE_cat(t), as rows
torch.testing.assert_close(pe_t @ m_cat.T, pe_shifted)
# dot products unchanged
torch.testing.assert_close(pe_shifted @ pe_shifted.T, pe_t @ pe_t.T)

d, n = 512, 256
omega_t2t = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / (n - 1))
pe_t = sinusoidal(
    torch.arange(1000), d, layout="concat", endpoint=True, dtype=torch.float64
)
pe_shifted = sinusoidal(
    torch.arange(1000) + shift,
    d,
    layout="concat",
    endpoint=True,
    dtype=torch.float64,
)
distance = (pe_shifted - pe_t).norm(dim=-1)  # one value per t
chord = torch.sqrt((4 * torch.sin(shift * omega_t2t / 2) ** 2).sum())
torch.testing.assert_close(distance, chord.expand(1000))  # the same for every t
torch.testing.assert_close(
    pe_t.norm(dim=-1), torch.full((1000,), math.sqrt(n), dtype=torch.float64)
)
print(
    f"d = 512: |PE(t+2) - PE(t)| = {chord:.2f} for every t, "
    f"|PE(t)| = {math.sqrt(n):.0f}",
    end="",
)

# %% [markdown] lang="en"
# ## 5. The column index in the exponent
#
# The early versions of jadore801120's `attention-is-all-you-need-pytorch` computed
# the angle of column $j$ as $p/10000^{2j/d}$, with the column index $j$ where the
# paper has the pair index $\lfloor j/2 \rfloor$. The repository changed it to
# $2\lfloor j/2 \rfloor/d$ in November 2017 (commit `7fa8c63`, "fix position encoding
# in #32"), but copies of the early version are still around in other projects.
# (The early version also keeps row $0$ of its table as an all-zero padding row;
# that is reproduced below too.) Column $j$ then has its own frequency,
# $$\tilde\omega_j = 10000^{-2j/d}, \qquad j = 0, \dots, d-1$$
# instead of the paper's $\omega_{\lfloor j/2 \rfloor} = 10000^{-2\lfloor j/2 \rfloor/d}$.
# Two things go wrong.
#
# - **The spectrum is stretched.** The exponent runs up to $2(d-1)/d$, almost $2$,
#   so the lowest frequency is about $10000^{-2} = 10^{-8}$ instead of about
#   $10^{-4}$. From $j = d/2$ on, every column has a wavelength of at least
#   $10000 \cdot 2\pi$, longer than any in the paper's spectrum: half of the
#   features hardly change over any realistic sequence.
# - **The pairs no longer share a frequency.** Column $2i$ holds $\sin(\tilde\omega_{2i} p)$
#   and column $2i+1$ holds $\cos(\tilde\omega_{2i+1} p)$, two different frequencies.
#
# `posenc` does not offer this bug as an option, but its parameters reproduce it
# exactly: with width $2d$ and base $10000^2$ the frequencies are
# $(10000^2)^{-j/d} = \tilde\omega_j$, and taking column $2j$ (a sine) for even $j$ and
# column $2j+1$ (a cosine) for odd $j$ picks out the buggy table.

# %% [markdown] lang="ja"
# ## 5. 指数に入った列の番号
#
# jadore801120 の `attention-is-all-you-need-pytorch` の初期の版は、列 $j$ の角度を $p/10000^{2j/d}$ と計算していました。
# 論文ではペアの番号 $\lfloor j/2 \rfloor$ が入るところに、列の番号 $j$ が入っています。
# リポジトリは 2017 年 11 月にこれを $2\lfloor j/2 \rfloor/d$ に直しました（コミット `7fa8c63`、"fix position encoding in #32"）。
# しかし、初期の版をコピーしたコードは今もほかのプロジェクトに出回っています。
# 初期の版は、表の行 $0$ をすべて 0 のパディング行にもしています。これも後で再現します。
# 指数に列の番号が入るので、列 $j$ はそれぞれ自分だけの周波数を持ちます。
# $$\tilde\omega_j = 10000^{-2j/d}, \qquad j = 0, \dots, d-1$$
# 論文の $\omega_{\lfloor j/2 \rfloor} = 10000^{-2\lfloor j/2 \rfloor/d}$ とは違います。問題は 2 つです。
#
# - **スペクトルが引き伸ばされます。** 指数は $2(d-1)/d$、ほぼ $2$ まで進むので、
#   最も低い周波数は約 $10^{-4}$ ではなく約 $10000^{-2} = 10^{-8}$ になります。
#   $j = d/2$ 以降のすべての列の波長は $10000 \cdot 2\pi$ 以上で、論文のスペクトルのどの波長よりも長くなります。
#   現実的な長さの系列では、次元の半分がほとんど変化しません。
# - **ペアが周波数を共有しなくなります。** 列 $2i$ には $\sin(\tilde\omega_{2i} p)$ が、
#   列 $2i+1$ には $\cos(\tilde\omega_{2i+1} p)$ が入り、2 つの周波数は異なります。
#
# `posenc` はこのバグをオプションとしては用意していませんが、パラメータを選べば厳密に再現できます。
# 幅を $2d$、底を $10000^2$ にすると周波数は $(10000^2)^{-j/d} = \tilde\omega_j$ になります。
# そこで、偶数の $j$ では列 $2j$（正弦）を、奇数の $j$ では列 $2j+1$（余弦）を取り出すと、バグのある表が得られます。


# %%
def per_column_bug(p, d):
    """The early formula: angle p / 10000^(2 j / d) for column j;
    sine in the even columns, cosine in the odd ones."""
    j = torch.arange(d, dtype=torch.float64)
    angle = p.double()[:, None] / 10000.0 ** (2 * j / d)  # [p, d]
    table = angle.clone()
    table[:, 0::2] = angle[:, 0::2].sin()
    table[:, 1::2] = angle[:, 1::2].cos()
    return table


def bug_columns(d):
    j = torch.arange(d)
    return 2 * j + j % 2  # sine 2j for even j, cosine 2j + 1 for odd j


p = torch.arange(1000)
for d in (16, 64, 512):
    # frequencies 10000^(-2j/d)
    wide = sinusoidal(p, 2 * d, base=10000.0**2, dtype=torch.float64)
    torch.testing.assert_close(wide[:, bug_columns(d)], per_column_bug(p, d))
# an odd d ends on an even column: a sine, here sin(p 10000^(-12/7)) for d = 7
torch.testing.assert_close(
    per_column_bug(p, 7)[:, 6], torch.sin(p * 10000.0 ** (-12 / 7)).double()
)

d = 512
j = torch.arange(d, dtype=torch.float64)
lam_bug = 2 * math.pi / 10000.0 ** (-2 * j / d)
lam_paper = 2 * math.pi / 10000.0 ** (-2 * (j // 2) / d)
torch.testing.assert_close(
    2 * math.pi / lam_bug[-1],
    torch.tensor(10000.0 ** (-2 * (d - 1) / d)).double(),
)
# j = d/2
torch.testing.assert_close(
    lam_bug[d // 2], torch.tensor(10000 * 2 * math.pi).double()
)
longest_paper = lam_paper.max()  # 2 pi 10000^((d-2)/d)
too_slow = lam_bug > longest_paper
assert torch.equal(too_slow, j >= d // 2)  # the whole second half
over_2048 = int((lam_paper > 2048).sum()), int((lam_bug > 2048).sum())
lines = [
    f"d = 512, longest wavelength: paper {longest_paper:.0f}, "
    f"bug {lam_bug[-1]:.3e}",
    f"columns longer than the paper's longest: bug {int(too_slow.sum())}/{d}",
    f"columns with wavelength above 2048: paper {over_2048[0]}, "
    f"bug {over_2048[1]}",
]
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# For $d = 512$ the buggy spectrum ends at a wavelength of 6.061e+08 positions, ten
# thousand times the paper's 60611. Column $j = 256$ has wavelength
# exactly $10000 \cdot 2\pi$, and all 256 columns of the second half are longer than the
# paper's longest. Over a context of 2048 positions, 351 of the 512 columns never
# complete a turn, against 190 in the paper's encoding. The figure shows the two spectra per column: the
# paper's is a staircase (the two columns of a pair share a wavelength), the buggy
# one a straight line with twice the slope.

# %% [markdown] lang="ja"
# $d = 512$ では、バグのあるスペクトルは 6.061e+08 位置の波長で終わります。
# 論文の 60611 の 1 万倍です。
# 列 $j = 256$ の波長はちょうど $10000 \cdot 2\pi$ で、後半の 256 列はすべて論文の最長の波長より長くなります。
# 2048 位置のコンテキストでは、512 列のうち 351 列が 1 周もしません。論文のエンコーディングでは 190 列です。
# 図には、2 つのスペクトルを列ごとに描いています。論文のものは階段状で（ペアの 2 列が波長を共有するため）、
# バグのあるものは傾きが 2 倍の直線です。

# %% alt={"en": ["Wavelength per column j on a log axis, d = 16 (left) and d = 512 (right): the paper's spectrum is a staircase, each pair sharing one wavelength; the buggy per-column one is a straight line of twice the slope that passes 10000·2π halfway."], "ja": ["列 j ごとの波長を対数軸で描いた図（左 d = 16、右 d = 512）。論文のスペクトルはペアの 2 列が波長を共有する階段状です。列ごとの指数を使うバグ版は傾きが 2 倍の直線で、j = d/2 で 10000·2π に達し、後半の列はすべてそれより長くなります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.4), sharey=True)
for ax, d in zip(axes, (16, 512), strict=True):
    j = torch.arange(d, dtype=torch.float64)
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
    ax.axhline(10000 * 2 * math.pi, color="0.5", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("$j$")
    ax.set_title(f"$d = {d}$")
axes[0].set_ylabel(r"$\lambda$")
axes[0].legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# The second failure is worse. The rotation property needs the sine and cosine of a
# pair to turn at the same speed. Here, a block rotation would keep the squared norm
# of each pair, $\sin^2(\tilde\omega_{2i} p) + \cos^2(\tilde\omega_{2i+1} p)$, fixed at its
# value $1$ at $p = 0$; in the buggy table that squared norm wanders between nearly $0$
# and nearly $2$ (printed below), so no rotation maps $PE(p)$ to $PE(p+k)$. Nor does any
# other linear map: the best [least-squares](../docs/glossary.md#least-squares) fit from $PE(p)$ to $PE(p+3)$ over
# $p = 0, \dots, 999$ for $d = 16$ leaves a relative error of 0.22, against less than
# 1e-12 for the paper's encoding. And the dot product is no longer a function of the distance:
# with $a_i = \tilde\omega_{2i}$, $b_i = \tilde\omega_{2i+1}$, the product-to-sum
# formulas give
# $$PE(p)\cdot PE(q) = \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos a_i(p-q) - \cos a_i(p+q) + \cos b_i(p-q) + \cos b_i(p+q)\big)$$
# For the paper's encoding $a_i = b_i$ and the two $p+q$ terms cancel, leaving
# $\sum_i \cos\omega_i(p-q)$. With $a_i \ne b_i$ they remain, so the
# [Gram matrix](../docs/glossary.md#gram-matrix) is no
# longer constant along its diagonals.

# %% [markdown] lang="ja"
# 2 つ目の問題のほうが深刻です。回転の性質が成り立つには、ペアの正弦と余弦が同じ速さで回る必要があります。
# ブロックごとの回転なら、各ペアのノルムの 2 乗 $\sin^2(\tilde\omega_{2i} p) + \cos^2(\tilde\omega_{2i+1} p)$ は
# $p = 0$ での値 $1$ のまま変わらないはずです。
# ところがバグのある表では、この値がほぼ $0$ からほぼ $2$ の間をさまよいます（下に表示します）。
# したがって、$PE(p)$ を $PE(p+k)$ に移す回転は存在しません。回転以外の線形写像もありません。
# $d = 16$ で、$p = 0, \dots, 999$ にわたって $PE(p)$ から $PE(p+3)$ への最良の[最小二乗](../docs/glossary.ja.md#least-squares)近似を求めると、
# 相対誤差は 0.22 残ります。論文のエンコーディングでは 1e-12 未満です。
# さらに、内積も距離だけの関数ではなくなります。$a_i = \tilde\omega_{2i}$、$b_i = \tilde\omega_{2i+1}$ と置くと、
# 積和の公式から次のようになります。
# $$PE(p)\cdot PE(q) = \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos a_i(p-q) - \cos a_i(p+q) + \cos b_i(p-q) + \cos b_i(p+q)\big)$$
# 論文のエンコーディングでは $a_i = b_i$ なので 2 つの $p+q$ の項が打ち消し合い、
# $\sum_i \cos\omega_i(p-q)$ が残ります。
# $a_i \ne b_i$ ではこれらの項が残るので、[グラム行列](../docs/glossary.ja.md#gram-matrix)は対角線に沿って一定ではなくなります。

# %%
d, n, k = 16, 8, 3
p = torch.arange(1000)
bug, bug_k = per_column_bug(p, d), per_column_bug(p + k, d)
good, good_k = (
    sinusoidal(p, d, dtype=torch.float64),
    sinusoidal(p + k, d, dtype=torch.float64),
)

# [p, n]; 1 at p = 0, kept by any rotation
pair_sq_norm = bug[:, 0::2] ** 2 + bug[:, 1::2] ** 2
torch.testing.assert_close(pair_sq_norm[0], torch.ones(n, dtype=torch.float64))
torch.testing.assert_close(
    good[:, 0::2] ** 2 + good[:, 1::2] ** 2,
    torch.ones(1000, n, dtype=torch.float64),
)


def fit_error(x, y):
    """Relative error of the best linear map L with x L = y (least squares)."""
    fit = torch.linalg.lstsq(x, y, driver="gelsd").solution
    return float((x @ fit - y).norm() / y.norm())


err_bug, err_good = fit_error(bug, bug_k), fit_error(good, good_k)
assert err_good < 1e-12 and err_bug > 0.1

j = torch.arange(d, dtype=torch.float64)
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
torch.testing.assert_close(gram, formula)
# 0 for a function of p - q
spread = float((gram[1:, 1:] - gram[:-1, :-1]).abs().max())
gram_good = (
    sinusoidal(pq, d, dtype=torch.float64)
    @ sinusoidal(pq, d, dtype=torch.float64).T
)
torch.testing.assert_close(gram_good[1:, 1:], gram_good[:-1, :-1])
assert spread > 1
lines = [
    f"squared pair norms, p = 0..999: min {pair_sq_norm.min():.4f}, "
    f"max {pair_sq_norm.max():.4f}",
    "best linear map PE(p) -> PE(p+3), relative error: "
    f"paper < 1e-12, bug {err_bug:.2f}",
    f"largest change along a diagonal of the Gram matrix: bug {spread:.2f}",
]
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# The early version keeps row $0$ of its table all zeros, "for padding": its data
# loader (`DataLoader.py`) numbers the real tokens from $1$ and gives padding the
# position $0$. That is fairseq's scheme with `padding_idx = 0`; with `posenc` it is
# `SinusoidalEmbedding(rows, d, padding_idx=0)`, which we also apply to the wide table
# that reproduces the buggy exponent. Note that an all-zero row is not the encoding of
# position $0$, which is $(0, 1, 0, 1, \dots)$.
#
# The same `posenc` table also offers the
# [learned scale](../docs/glossary.md#learned-scale) of Hua et al. (2022), which the
# chapter
# [*Learned absolute embeddings and scaled sinusoids*](03-learned-embeddings.ipynb)
# discusses: the looked-up encoding is multiplied by one trainable scalar. In
# `posenc` this is `learnable_scale=True`; the table stays frozen and the scalar
# is the only parameter. Its starting value is `posenc`'s choice, not taken from
# the paper: $d^{-1/2}$, as in x-transformers' `ScaledSinusoidalEmbedding`, while
# lucidrains' FLASH-pytorch starts it at $1$. The cell checks `posenc`'s default
# and that the output is that scalar times the table.

# %% [markdown] lang="ja"
# 初期の版は、表の行 $0$ を「パディング用に」すべて 0 にしています。
# そのデータローダー（`DataLoader.py`）は、実トークンを $1$ から数え、パディングに位置 $0$ を与えるからです。
# これは `padding_idx = 0` とした fairseq の方式と同じで、
# `posenc` では `SinusoidalEmbedding(rows, d, padding_idx=0)` です。
# 下では、バグのある指数を再現する幅の広い表にもこれを適用します。
# すべて 0 の行は位置 $0$ のエンコーディング $(0, 1, 0, 1, \dots)$ ではないことに注意してください。
#
# 同じ `posenc` の表には、Hua ら（2022）の[学習可能なスケール](../docs/glossary.ja.md#learned-scale)もあります。
# 「[学習型位置埋め込みとスケール付き正弦波](03-learned-embeddings.ipynb)」の章で扱うもので、
# 表から引いたエンコーディングに、学習可能なスカラーを 1 つ掛けます。
# `posenc` では `learnable_scale=True` です。表は固定されたままで、パラメータはこのスカラーだけです。
# 初期値は、x-transformers の `ScaledSinusoidalEmbedding` にならって $d^{-1/2}$ にしています。
# これは `posenc` の選択で、論文から取ったものではありません。lucidrains の FLASH-pytorch は $1$ から始めます。
# セルでは、`posenc` の既定値と、出力がこのスカラーと表の積であることを確かめます。

# %%
d, rows = 16, 12
# positions from 1, padding at 0
padded = torch.tensor([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6]])
reference = per_column_bug(torch.arange(rows), d)
reference[0] = 0  # the zero row 0
wide = SinusoidalEmbedding(rows, 2 * d, padding_idx=0, base=10000.0**2)
torch.testing.assert_close(
    wide(padded)[..., bug_columns(d)], reference[padded].float()
)
# PE(0) is not zero
assert not torch.equal(sinusoidal(torch.tensor([0]), d)[0], torch.zeros(d))

scaled = SinusoidalEmbedding(rows, d, learnable_scale=True)
assert [name for name, _ in scaled.named_parameters()] == ["scale"]
# posenc's default starting value (x-transformers' too), not the paper's
torch.testing.assert_close(scaled.scale, torch.tensor(d**-0.5))
out = scaled(padded)
torch.testing.assert_close(out, d**-0.5 * sinusoidal(padded, d))
out.sum().backward()
assert scaled.scale.grad is not None and not scaled.table.requires_grad

# %% [markdown] lang="en"
# ## 6. Float32 angles at large positions
#
# Most implementations form the angle $p\,\omega_i$ in float32 and take its sine
# there: labml, AllenNLP, fairseq and tensor2tensor all do. Write $\mathrm{fl}_{32}(x)$
# for $x$ rounded to the nearest float32 number. A float32 number has a 24-bit
# significand (IEEE 754 single precision), so in $[2^e, 2^{e+1})$ the representable
# numbers are $2^{e-23}$ apart, and rounding can move a number there by up to
# $$|\mathrm{fl}_{32}(x) - x| \le 2^{e-24}$$
# Near $2^{20}$ the spacing is $2^{-3} = 0.125$ radians. It is the angle itself, not
# the sine, that gets rounded, and $|\sin a - \sin b| \le |a - b|$ passes the angle
# error on to the encoding at most unchanged.
#
# The angle carries a second error, from its frequency. None of these libraries
# rounds $\omega_i$ just once: each computes it in float32 through `exp`, labml as
# $\exp\big(2i \cdot (-\ln 10000/d)\big)$, fairseq, AllenNLP and tensor2tensor as
# $\exp\big(i \cdot (-\ln 10000/(n-1))\big)$, the frequencies $\omega'_i$ of the
# $n-1$ encoding. An error $\delta$ relative to the argument $x$ of `exp` becomes a
# relative error $x\,\delta$ in $e^x$, and $|x|$ reaches $\ln 10000 \approx 9.2$: the
# libraries' $\hat\omega_i$ are up to about $9.5u$ (labml) and $8.7u$ ($n-1$) off,
# as measured below, with $u = 2^{-24}$, where one rounding would leave at most $u$.
# For an angle in $[2^e, 2^{e+1})$ the error of pair $i$ is therefore at most
# $$2^{e-24} + p\,|\hat\omega_i - \omega_i|$$
# with each library's own $\hat\omega_i$ (and $\omega'_i$ in place of $\omega_i$ for
# the $n-1$ libraries), the bound of
# [*Sinusoidal positional encoding*](01-sinusoidal.ipynb#in-practice). The shorter
# bound $(2u + u^2)\,p\,\omega_i$ derived there assumes $\omega_i$ rounded once. Pair 0
# escapes both errors: $\omega_0 = 1$ and an integer $p$ below $2^{24}$ are exact, so
# its angle has no error at all.
#
# The cell below rebuilds each library's float32 frequencies as the library
# computes them (tensor2tensor performs the same operations in TensorFlow, whose
# last bits can differ) and measures, for $d = 512$ around
# $p = 2^{14}, 2^{17}, 2^{20}$, the error of the float32 angles against float64
# angles of the encoding each library means. It checks every angle against the
# two-term bound, counts the angles that break the one-rounding bound, and
# compares each error with the step $\omega_i$ by which the pair's angle moves from
# one position to the next.

# %% [markdown] lang="ja"
# ## 6. 大きな位置での float32 の角度
#
# ほとんどの実装は、角度 $p\,\omega_i$ を float32 で作り、そのまま float32 で正弦を取ります。
# labml、AllenNLP、fairseq、tensor2tensor はいずれもそうです。
# $x$ を最も近い float32 の数に丸めたものを $\mathrm{fl}_{32}(x)$ と書きます。
# float32（IEEE 754 の単精度）の仮数部は 24 ビットなので、区間 $[2^e, 2^{e+1})$ で表せる数の間隔は $2^{e-23}$ です。
# そこで数を丸めると、最大で次の量だけずれます。
# $$|\mathrm{fl}_{32}(x) - x| \le 2^{e-24}$$
# $2^{20}$ 付近では間隔が $2^{-3} = 0.125$ ラジアンです。
# 丸められるのは正弦ではなく角度そのものです。そして $|\sin a - \sin b| \le |a - b|$ により、
# 角度の誤差は大きくなることなくエンコーディングに伝わります。
#
# 角度には、周波数から来る誤差もあります。
# これらのライブラリの $\omega_i$ は、どれも正確な値を 1 回丸めただけのものではありません。
# どれも float32 の `exp` で計算します。labml は $\exp\big(2i \cdot (-\ln 10000/d)\big)$ で、
# fairseq、AllenNLP、tensor2tensor は $\exp\big(i \cdot (-\ln 10000/(n-1))\big)$ です。後者は $n-1$ 版のエンコーディングの周波数 $\omega'_i$ です。
# `exp` の引数 $x$ に対する相対誤差 $\delta$ は、$e^x$ の相対誤差 $x\,\delta$ になります。$|x|$ は $\ln 10000 \approx 9.2$ に達します。
# そのため、下で測るとおり、ライブラリの $\hat\omega_i$ の相対誤差は $u = 2^{-24}$ として最大で約 $9.5u$（labml）と $8.7u$（$n-1$ 版）です。
# 1 回の丸めなら $u$ 以下で済みます。
# したがって、角度が $[2^e, 2^{e+1})$ に入るとき、ペア $i$ の誤差は最大で次の値です。
# $$2^{e-24} + p\,|\hat\omega_i - \omega_i|$$
# $\hat\omega_i$ には各ライブラリ自身の値を使います（$n-1$ 版のライブラリでは $\omega_i$ の代わりに $\omega'_i$ を使います）。
# これは「[正弦波位置エンコーディング](01-sinusoidal.ipynb#実際に使うときの注意)」の章と同じ上界です。
# そこで導いた短い上界 $(2u + u^2)\,p\,\omega_i$ は、$\omega_i$ を 1 回だけ丸めることを前提にしています。
# ペア 0 はどちらの誤差も受けません。$\omega_0 = 1$ と $2^{24}$ 未満の整数 $p$ は厳密なので、その角度には誤差がまったくありません。
#
# 次のセルでは、各ライブラリの float32 の周波数を、ライブラリと同じ計算で作り直します。
# tensor2tensor は同じ演算を TensorFlow で行うので、最後の数ビットは一致しないこともあります。
# そのうえで $d = 512$ について、$p = 2^{14}, 2^{17}, 2^{20}$ の付近で float32 の角度の誤差を測ります。
# 比べる相手は、各ライブラリが表そうとしているエンコーディングの float64 の角度です。
# すべての角度を 2 項の上界と照らし合わせ、1 回の丸めを前提にした上界を破る角度を数えます。
# さらに各誤差を、そのペアの角度が隣の位置へ進むときの 1 歩 $\omega_i$ と比べます。

# %%
d, n = 512, 256
u = 2.0**-24  # float32: |fl(x) - x| <= u |x|
i = torch.arange(n, dtype=torch.float64)
omega = 10000.0 ** (-i / n)  # the paper's frequencies
omega_t2t = 10000.0 ** (-i / (n - 1))  # those of the n - 1 encoding
up = torch.tensor(math.inf)
# name: (float32 frequencies as the library computes them, exact ones)
libraries = {
    "w rounded once": (omega.float(), omega),
    "labml": (labml_frequencies(d), omega),
    "fairseq, AllenNLP": (fairseq_frequencies(d), omega_t2t),
}


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


def paper_table(p):
    """The paper's encoding with float64 angles, as a reference."""
    exact = p.double()[:, None] * omega
    return torch.stack([exact.sin(), exact.cos()], -1).flatten(-2)


off = {  # largest relative error of each library's w_hat, in units of u
    name: float(((w_hat.double() - w) / w).abs().max() / u)
    for name, (w_hat, w) in libraries.items()
}
assert off["w rounded once"] <= 1 and 9 < off["labml"] < 10
assert 8 < off["fairseq, AllenNLP"] < 9

lines = ["labml, d = 512", "p near  2^(e-24)  angle error  encoding  posenc"]
per_step = {name: [] for name in libraries}  # error / w_i, pairs 1..n-1
to_2e24 = {name: [] for name in libraries}  # largest angle error / 2^(e-24)
for e in (14, 17, 20):
    two_e = torch.tensor(float(2**e))
    # spacing in [2^e, 2^(e+1))
    assert torch.nextafter(two_e, up) - two_e == 2.0 ** (e - 23)
    p = torch.arange(2**e - 64, 2**e + 64)
    for name, (w_hat, w) in libraries.items():
        angle_err, rounding, drift, enc_err = float32_errors(p, w_hat, w)
        assert (angle_err <= rounding + drift + 1e-9).all()  # two terms
        assert angle_err[:, 0].max() == 0  # pair 0: w_0 = 1, p exact
        # |sin a - sin b| <= |a - b|, plus the float32 sine's own rounding
        assert enc_err.max() <= angle_err.max() + 2**-23
        per_step[name].append((angle_err.amax(0) / w)[1:])
        to_2e24[name].append(float(angle_err.max()) / 2.0 ** (e - 24))
        if name == "labml":
            posenc_err = (sinusoidal(p, d).double() - paper_table(p)).abs()
            assert posenc_err.max() <= 2**-25 + 1e-9  # the result's rounding
            lines.append(
                f"2^{e}    {2.0 ** (e - 24):.1e}   {angle_err.max():.1e}      "
                f"{enc_err.max():.1e}   {posenc_err.max():.1e}"
            )

# the largest angle error is about 2^(e-24) whichever the frequencies
assert all(0.9 < x < 1.1 for xs in to_2e24.values() for x in xs)
lines.append("largest angle error / 2^(e-24), near 2^14, 2^17, 2^20")
for name, xs in to_2e24.items():
    lines.append(f"{name:18s} " + "  ".join(f"{x:.3f}" for x in xs))
# near 2^20 (p still holds those positions): the one-rounding bound, per step
lines.append(
    "near 2^20          w off  > (2u + u^2)pw  by up to  error/step  "
    "drift  rounding"
)
for name, (w_hat, w) in libraries.items():
    angle_err, rounding, drift, _ = float32_errors(p, w_hat, w)
    ratio = angle_err[:, 1:] / ((2 * u + u**2) * p.double()[:, None] * w[1:])
    share = float((ratio > 1 + 1e-9).double().mean())
    error_step = float(per_step[name][-1].max())
    drift_step = float((drift.amax(0) / w)[1:].max())
    rounding_step = float((rounding.amax(0) / w)[1:].max())
    # the product's rounding: at most p u of a step, 1/16 near 2^20
    assert rounding_step <= float(p.max()) * u * (1 + 1e-5)
    if name == "w rounded once":  # the bound holds, and stays under 1/8
        assert share == 0 and error_step < 1 / 8
    else:  # it fails for a large share; the error passes half a step
        assert share > 0.3 and ratio.max() > 4
        assert error_step > 1 / 2 and drift_step > 1 / 2
    lines.append(
        f"{name:18s} {off[name]:4.1f}u  {share:11.0%}  {ratio.max():8.2f}  "
        f"{error_step:10.3f}  {drift_step:5.3f}  {rounding_step:8.3f}"
    )
# per pair, the error in steps grows about eightfold per factor 8 in p
growth = [per_step["labml"][k + 1] / per_step["labml"][k] for k in (0, 1)]
medians = [float(g.median()) for g in growth]
assert all(7.5 < m < 8.5 for m in medians)
lines.append(
    f"labml, error/step, p times 8: median {medians[0]:.1f}, {medians[1]:.1f}; "
    f"pairs {min(g.min() for g in growth):.1f} to "
    f"{max(g.max() for g in growth):.1f}"
)
# from 2^24 on, float32 cannot even hold consecutive integers
two_24 = torch.tensor(float(2**24))
assert torch.nextafter(two_24, up) - two_24 == 2
assert torch.tensor(2**24 + 1).float() == two_24
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# The largest angle error is close to $2^{e-24}$ whichever way the frequencies
# are computed: 0.99 to 1.03 times it for all three in every range (printed
# and asserted; for labml 9.7e-04 near $2^{14}$, 7.8e-03 near $2^{17}$ and
# 6.2e-02 near $2^{20}$), and
# the encoding inherits it (6.1e-02 near $2^{20}$): the fast pairs set that maximum,
# and in them the product's rounding dominates. The frequencies' error shows in the
# slower pairs. The one-rounding bound $(2u + u^2)\,p\,\omega_i$ holds for
# frequencies rounded once, but labml's angles exceed it in 37% of the entries, by
# up to 5.2 times, and those of fairseq and AllenNLP in 44%, by up to 4.7 times;
# the two-term bound holds for every angle.
#
# Measured in steps $\omega_i$, the distance from one position's angle to the next,
# the two errors differ in kind. The product's rounding changes from one position
# to the next, so it blurs neighbours, but by at most $p\,u$ of a step, a sixteenth
# near $2^{20}$ (0.062). The frequency's error $p\,|\hat\omega_i - \omega_i|$ is
# larger, 0.59 of a step for labml and 0.54 for fairseq and AllenNLP near $2^{20}$,
# but it is no blur: without the product's rounding the angles would be
# $p\,\hat\omega_i$, the exact encoding of slightly different frequencies, in which
# neighbours stay one step $\hat\omega_i$ apart. It matters when angles computed one
# way meet a model trained on angles computed another way (a checkpoint moved
# between implementations, a float64 or fused kernel). Float32 errors are
# deterministic, so a model trained and run with the same code sees the same
# vectors. Per pair, the error in steps grows about in proportion to $p$:
# eightfold when $p$ grows eightfold (median over the pairs; single pairs 3 to
# 12.5), while pair 0 stays exact. From $2^{24}$ on, float32 cannot even hold consecutive integers:
# $\mathrm{fl}_{32}(2^{24} + 1) = 2^{24}$, and two positions get the same encoding.
#
# `posenc` forms the angles in float64, whose 53-bit significand leaves a spacing of
# $2^{-32}$ near $2^{20}$, and rounds only the final sine and cosine to float32. Its
# error, 3.0e-08 in all three ranges, is the rounding of the result. The figure
# plots the largest error of each position against $p$ on logarithmic axes:
# labml's float32 angles, $\mathrm{fl}_{32}(p\,\hat\omega_i)$, follow the staircase
# $2^{\lfloor \log_2 p \rfloor - 24}$ and stay within twice it at every sample (the
# cell also checks the two-term bound there); float64 angles,
# $\mathrm{fl}_{64}(p\,\omega_i)$, stay flat.

# %% [markdown] lang="ja"
# 周波数をどう計算しても、角度の誤差の最大値は $2^{e-24}$ とほぼ等しくなります。
# 3 つの計算方法のどれでも、どの範囲でもその 0.99 倍から 1.03 倍です（セルで表示して確かめています）。
# labml では $2^{14}$ 付近で 9.7e-04、$2^{17}$ 付近で 7.8e-03、$2^{20}$ 付近で 6.2e-02 です。
# エンコーディングもこの誤差を受け継ぎます（$2^{20}$ 付近で 6.1e-02）。
# この最大値を決めるのは速いペアで、そこでは積の丸めが支配的です。
# 周波数の誤差が表れるのは、より遅いペアです。
# 1 回の丸めを前提にした上界 $(2u + u^2)\,p\,\omega_i$ は、1 回だけ丸めた周波数なら成り立ちます。
# しかし labml の角度は成分の 37% でこれを超え、超える幅は最大で 5.2 倍です。fairseq と AllenNLP の角度は 44% で超え、最大で 4.7 倍です。
# 2 項の上界は、どの角度でも成り立ちます。
#
# 1 歩 $\omega_i$、つまり隣り合う位置の角度の差を単位にして測ると、2 つの誤差は性質がまったく異なります。
# 積の丸めは位置ごとに変わるので隣どうしをぼやけさせますが、その量は最大で 1 歩の $p\,u$ 倍で、$2^{20}$ 付近では 16 分の 1（0.062）です。
# 周波数の誤差 $p\,|\hat\omega_i - \omega_i|$ はもっと大きく、$2^{20}$ 付近では labml で 1 歩の 0.59、fairseq と AllenNLP で 0.54 に達します。
# しかし、これはぼやけではありません。積の丸めがなければ角度は $p\,\hat\omega_i$ で、少しだけ違う周波数の厳密なエンコーディングになります。
# そこでは隣どうしがちょうど 1 歩 $\hat\omega_i$ だけ離れたままです。
# この誤差が問題になるのは、ある計算方法の角度を使って学習したモデルが、別の計算方法の角度に出会うときです。
# たとえば、別の実装へチェックポイントを移すときや、角度を float64 や融合カーネルで計算する実装に切り替えるときです。
# float32 の誤差は決定的なので、同じコードで学習して動かすモデルは、いつも同じベクトルを見ます。
# ペアごとに見ると、1 歩を単位にした誤差はほぼ $p$ に比例して大きくなり、$p$ が 8 倍になると約 8 倍になります
# （ペアについての中央値で、個々のペアでは 3 倍から 12.5 倍）。ペア 0 は厳密なままです。
# $2^{24}$ から先では、float32 は連続する整数さえ表せません。
# $\mathrm{fl}_{32}(2^{24} + 1) = 2^{24}$ となり、2 つの位置が同じエンコーディングを受け取ります。
#
# `posenc` は角度を float64 で作ります。float64 の仮数部は 53 ビットで、$2^{20}$ 付近の間隔は $2^{-32}$ です。
# 最後の正弦と余弦だけを float32 に丸めるので、誤差は 3 つの範囲のどれでも 3.0e-08 で、これは結果の丸めの分です。
# 図は、位置ごとの最大の誤差を $p$ に対して両対数軸で描いたものです。
# labml の float32 の角度 $\mathrm{fl}_{32}(p\,\hat\omega_i)$ の誤差は、階段状の線 $2^{\lfloor \log_2 p \rfloor - 24}$ に沿って増え、
# どの標本でもその 2 倍以内に収まります（セルでは、そこでも 2 項の上界を確かめます）。
# float64 の角度 $\mathrm{fl}_{64}(p\,\omega_i)$ の誤差は平らなままです。

# %% alt={"en": ["Largest encoding error per position against p from 8 to 2^20, log–log. labml's float32 angles follow the staircase 2^(floor(log2 p) − 24), growing from about 2·10^-7 to 5·10^-2; posenc's float64 angles stay flat near 3·10^-8."], "ja": ["位置ごとの最大誤差を p（8〜2^20）に対して両対数で描いた図。labml の float32 の角度の誤差は階段 2^(floor(log2 p) − 24) に沿って約 2·10^-7 から 5·10^-2 まで増えます。float64 で角度を作る posenc は約 3·10^-8 で一定です。"]}
samples = torch.unique(torch.round(2.0 ** torch.linspace(3, 20, 400)).long())
_, rounding, drift, enc_err = float32_errors(samples, *libraries["labml"])
posenc_err = (sinusoidal(samples, d).double() - paper_table(samples)).abs()
posenc_err = posenc_err.amax(-1)
staircase = 2.0 ** (torch.floor(torch.log2(samples.double())) - 24)
assert posenc_err.max() <= 2**-25 + 1e-9
# the two-term bound, largest over the pairs, plus the sine's own rounding
assert (enc_err <= (rounding + drift).amax(-1) + 2**-23).all()
assert (enc_err / staircase).max() < 2  # measured: within twice the staircase
# the ends quoted in the alt text
assert 1e-7 < enc_err[0] < 3e-7 and 4e-2 < enc_err.max() < 6e-2

fig, ax = plt.subplots(figsize=(6.4, 3.4))
ax.plot(
    samples,
    enc_err.clamp(min=1e-9),
    lw=1,
    label=r"$\mathrm{fl}_{32}(p\,\hat\omega_i)$, labml",
)
ax.plot(
    samples,
    posenc_err.clamp(min=1e-9),
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

# %% [markdown] lang="en"
# ## The variants side by side
#
# | implementation | layout | exponent of $10000$ | odd $d$ | first position |
# |---|---|---|---|---|
# | Vaswani et al. (2017) | interleaved | $-i/n$ | not stated | not stated |
# | tensor2tensor | concatenated | $-i/(n-1)$ | zero column | 0 (`start_index`) |
# | fairseq | concatenated | $-i/(n-1)$ | zero column | `padding_idx + 1` |
# | AllenNLP | concatenated | $-i/(n-1)$ | zero column | 0 |
# | labml | interleaved | $-i/n$ | shape error | 0 |
# | jadore801120; Hugging Face XLM, DistilBERT (opt-in) | interleaved | $-2i/d$ | a sine | 0 |
# | its early version | interleaved | $-2j/d$, column $j$ | a sine | 1 |
# | Hugging Face Marian | concatenated | $-2i/d$ | a sine, in column $n$ | 0 |
# | diffusers `get_timestep_embedding` | concatenated, cosines first if `flip_sin_to_cos=True` | $-i/(n-s)$, `downscale_freq_shift` $s = 1$ by default | zero column | a timestep $t$, may be fractional |
# | guided-diffusion, GLIDE `timestep_embedding` | concatenated, cosines first | $-i/n$ | zero column | a timestep $t$, may be fractional |
# | `posenc` | `layout=` | `endpoint=` | zero column | explicit |
#
# The odd-$d$ column says what is left over when $d$ is odd (for even $d$,
# $-2i/d = -i/n$). fairseq and the early jadore801120 also keep an all-zero row
# for padding (`posenc`: `padding_idx=`). tensor2tensor, fairseq, AllenNLP and
# labml form the angles $p\,\omega_i$ in float32, with frequencies computed
# through `exp`; jadore801120, XLM and Marian use NumPy's default float64, and
# `posenc` float64.
#
# The same choices reappear in diffusion models, which encode the timestep $t$
# of the noise schedule instead of a token position, and where $t$ may be
# fractional. diffusers' `get_timestep_embedding` exposes them as arguments:
# `downscale_freq_shift` $s$ divides the exponent by $n - s$ ($s = 1$, the
# default, gives tensor2tensor's $n-1$, and $s = 0$ the paper's $n$),
# `flip_sin_to_cos=True` puts the cosines first, an odd $d$ gets a zero column,
# and the frequencies go through `exp` in float32. OpenAI's guided-diffusion and
# GLIDE (`timestep_embedding`) put the cosines first and divide by $n$. Cosines
# first is one more column permutation: a relabelling, as in section 1, to
# which a checkpoint is nevertheless tied. The cell below checks transcriptions
# of both functions against `posenc` at fractional timesteps.

# %% [markdown] lang="ja"
# ## 変種の比較
#
# | 実装 | 配置 | $10000$ の指数 | 奇数の $d$ | 最初の位置 |
# |---|---|---|---|---|
# | Vaswani ら（2017） | インターリーブ配置 | $-i/n$ | 記述なし | 記述なし |
# | tensor2tensor | 連結配置 | $-i/(n-1)$ | 0 の列 | 0（`start_index`） |
# | fairseq | 連結配置 | $-i/(n-1)$ | 0 の列 | `padding_idx + 1` |
# | AllenNLP | 連結配置 | $-i/(n-1)$ | 0 の列 | 0 |
# | labml | インターリーブ配置 | $-i/n$ | 形状エラー | 0 |
# | jadore801120、Hugging Face の XLM と DistilBERT（有効にしたとき） | インターリーブ配置 | $-2i/d$ | 正弦 | 0 |
# | その初期の版 | インターリーブ配置 | $-2j/d$（列 $j$） | 正弦 | 1 |
# | Hugging Face の Marian | 連結配置 | $-2i/d$ | 正弦（列 $n$） | 0 |
# | diffusers の `get_timestep_embedding` | 連結配置（`flip_sin_to_cos=True` なら余弦が先） | $-i/(n-s)$（`downscale_freq_shift` の既定値は $s = 1$） | 0 の列 | タイムステップ $t$（小数もある） |
# | guided-diffusion、GLIDE の `timestep_embedding` | 連結配置（余弦が先） | $-i/n$ | 0 の列 | タイムステップ $t$（小数もある） |
# | `posenc` | `layout=` | `endpoint=` | 0 の列 | 明示的に渡す |
#
# 「奇数の $d$」の列は、$d$ が奇数のときに余る列が何になるかを示します（$d$ が偶数なら $-2i/d = -i/n$ です）。
# fairseq と jadore801120 の初期の版は、パディング用にすべて 0 の行も持ちます（`posenc` では `padding_idx=`）。
# tensor2tensor、fairseq、AllenNLP、labml は、周波数を `exp` で計算し、角度 $p\,\omega_i$ を float32 で作ります。
# jadore801120、XLM、Marian は NumPy の既定の float64 を使い、`posenc` も float64 を使います。
#
# 同じ選択肢は拡散モデルにも現れます。拡散モデルはトークンの位置ではなくノイズスケジュールのタイムステップ $t$ を符号化し、$t$ は小数のこともあります。
# diffusers の `get_timestep_embedding` は、これらを引数として持っています。
# `downscale_freq_shift` の $s$ で指数を $n - s$ で割ります（既定値の $s = 1$ は tensor2tensor の $n-1$、$s = 0$ は論文の $n$ です）。
# `flip_sin_to_cos=True` なら余弦が先になり、奇数の $d$ では 0 の列が付き、周波数は float32 の `exp` で計算します。
# OpenAI の guided-diffusion と GLIDE（`timestep_embedding`）は、余弦を先にして $n$ で割ります。
# 余弦を先にするのも列の並べ替えの 1 つで、1 節と同じくラベルの付け替えですが、チェックポイントはやはりその並びと切り離せません。
# 次のセルでは、両方の関数を書き起こしたものを、小数のタイムステップで `posenc` と比べます。


# %%
def timestep_embedding(t, d, shift=1.0, cos_first=False):
    """diffusers' get_timestep_embedding, transcribed: exp in float32,
    exponent / (n - shift), [sin, cos] (or [cos, sin]), a zero column
    for odd d. guided-diffusion/GLIDE: shift=0, cos_first=True."""
    n = d // 2
    exponent = -math.log(10000) * torch.arange(n, dtype=torch.float32)
    angle = t[:, None].float() * torch.exp(exponent / (n - shift))
    emb = torch.cat([angle.sin(), angle.cos()], dim=-1)
    if cos_first:
        emb = torch.cat([emb[:, n:], emb[:, :n]], dim=-1)
    return torch.nn.functional.pad(emb, (0, d % 2))


t = torch.tensor([0.0, 0.5, 17.25, 999.0])  # fractional timesteps too
for d in (7, 8):
    n = d // 2
    for shift, endpoint in ((1.0, True), (0.0, False)):
        ref = sinusoidal(t, d, layout="concat", endpoint=endpoint)
        flip = torch.cat([ref[:, n : 2 * n], ref[:, :n], ref[:, 2 * n :]], -1)
        for cos_first, want in ((False, ref), (True, flip)):
            got = timestep_embedding(t, d, shift, cos_first)
            # float32 angles up to t = 999: a few 1e-5 apart at most
            torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    # cosines first is a different table, not a rounding difference
    assert (timestep_embedding(t, d, 0.0, True) - ref).abs().max() > 0.5
print("diffusers (s = 1, 0; sin or cos first), GLIDE: match posenc", end="")

# %% [markdown] lang="en"
# ## What to remember
#
# - The layout is a relabelling: the concatenated table is the interleaved one with
#   its columns permuted, and a checkpoint converts exactly
#   ([section 1](#1-interleaved-or-concatenated-one-fixed-permutation)).
# - Dividing the exponent by $n - 1$ instead of $n$ gives a genuinely different
#   encoding, apart by more than 1 within the first 1024 positions for $d = 512$:
#   run a checkpoint with the convention it was trained with
#   ([section 2](#2-dividing-by-n-or-by-n--1)).
# - A zero column for odd $d$ is harmless; a lone sine has no place in the rotation
#   property ([section 3](#3-odd-widths)). fairseq's positions from
#   `padding_idx + 1` are a fixed rotation of those from 0
#   ([section 4](#4-fairseqs-positions-start-after-the-padding-index)).
# - The column index in the exponent breaks the shared frequency of each pair, and
#   with it the rotation property and the dependence on the offset alone
#   ([section 5](#5-the-column-index-in-the-exponent)).
# - Float32 angles carry the product's rounding, at most $2^{e-24}$ (blurring
#   neighbours by up to a sixteenth of a step near $2^{20}$), plus
#   $p\,|\hat\omega_i - \omega_i|$ from the libraries' `exp`-computed frequencies (up
#   to about 0.6 of a step there, a consistent change of frequency rather than a
#   blur); the one-rounding bound $(2u + u^2)\,p\,\omega_i$ does not hold for them.
#   Pair 0 is exact. The errors are deterministic and matter when implementations
#   are mixed ([section 6](#6-float32-angles-at-large-positions)).

# %% [markdown] lang="ja"
# ## まとめ
#
# - 配置の違いはラベルの付け替えです。連結配置の表はインターリーブ配置の表の列を並べ替えたもので、
#   チェックポイントも厳密に変換できます（[1 節](#1-インターリーブ配置と連結配置違いは列の並べ替えだけ)）。
# - 指数を $n$ ではなく $n - 1$ で割ると、丸め誤差では済まない、まったく別のエンコーディングになります。
#   $d = 512$ では最初の 1024 位置のうちに差が 1 を超えます。
#   チェックポイントは学習時と同じ流儀で動かしてください（[2 節](#2-n-で割るか-n--1-で割るか)）。
# - 奇数の $d$ での 0 の列は無害ですが、孤立した正弦は回転の性質に加われません（[3 節](#3-奇数の幅)）。
#   fairseq の `padding_idx + 1` から数える位置は、0 から数える位置を固定の回転で移したものです
#   （[4 節](#4-fairseq-の位置はパディングのインデックスの次から始まる)）。
# - 指数に列の番号を入れると、各ペアが周波数を共有しなくなり、回転の性質も、内積が相対位置だけで決まる性質も壊れます
#   （[5 節](#5-指数に入った列の番号)）。
# - float32 の角度には、最大 $2^{e-24}$ の積の丸めが乗ります（$2^{20}$ 付近では、隣どうしを最大で 1 歩の 16 分の 1 だけぼやけさせます）。
#   さらに、ライブラリが `exp` で計算した周波数から $p\,|\hat\omega_i - \omega_i|$ が加わります
#   （そこでは最大で 1 歩の約 0.6 ですが、ぼやけではなく、周波数が一様に変わるだけです）。
#   そのため、1 回の丸めを前提にした上界 $(2u + u^2)\,p\,\omega_i$ は成り立ちません。ペア 0 は厳密です。
#   誤差は決定的で、問題になるのは実装を混ぜるときです（[6 節](#6-大きな位置での-float32-の角度)）。

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
#    Use the product-to-sum formula of section 5 to explain why it is not constant,
#    and find the value it oscillates around.
# 4. bfloat16 has an 8-bit significand. From the spacing $2^{e-7}$ of its numbers in
#    $[2^e, 2^{e+1})$, predict the position beyond which a bfloat16 angle can be off by
#    more than half a radian, then check it by forming the angles in `torch.bfloat16`.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 奇数の $d$ でも `sinusoidal(p, d, layout="concat") == sinusoidal(p, d)[..., perm]` が
#    厳密に成り立つよう、`layout_permutation` を拡張してください。0 の列はどこに行くでしょうか。
# 2. $d = 128$、$512$、$2048$ のそれぞれで、$n$ 版と $n-1$ 版のエンコーディングが、
#    どこかの成分で $0.1$ より大きく異なる最初の位置を求めてください。$d$ によってどう変わるでしょうか
#    （ヒント：$\omega_i - \omega'_i$ の最大値を見てください）。
# 3. 列ごとの指数を使った表について、$d = 64$ で $PE(p)\cdot PE(p)$ を $p$ に対して描いてください。
#    5 節の積和の公式を使って、これが一定にならない理由を説明し、値がどのあたりを中心に振動するかを求めてください。
# 4. bfloat16 の仮数部は 8 ビットです。区間 $[2^e, 2^{e+1})$ での数の間隔 $2^{e-7}$ から、
#    bfloat16 の角度が半ラジアンを超えてずれうるようになる位置を予想し、
#    `torch.bfloat16` で角度を作って確かめてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With an odd $d$ both layouts hold the same $n = \lfloor d/2 \rfloor$
# pairs and end with the zero column, column $2n = d - 1$. The case formula of
# section 1 covers the first $2n$ columns unchanged, and the zero column maps to
# itself: $\pi(2n) = 2n$. The zero column stays last in both layouts. The cell
# checks the permuted interleaved table against the concatenated one written from
# the formula (`concat_by_formula` of section 1).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** $d$ が奇数でも、2 つの配置は同じ $n = \lfloor d/2 \rfloor$ 組のペアを持ち、
# どちらも最後が 0 の列（列 $2n = d - 1$）です。
# 1 節の場合分けの式は最初の $2n$ 列にそのまま当てはまり、0 の列は自分自身に写ります（$\pi(2n) = 2n$）。
# 0 の列は、どちらの配置でも最後に残ります。
# セルでは、並べ替えたインターリーブ配置の表を、式から書き出した連結配置の表（1 節の `concat_by_formula`）と照らし合わせます。


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
        interleaved = sinusoidal(p, d, endpoint=endpoint, dtype=torch.float64)
        concat = sinusoidal(
            p, d, layout="concat", endpoint=endpoint, dtype=torch.float64
        )
        # posenc's own layouts agree bit for bit (built from the same tensors)
        torch.testing.assert_close(
            concat, interleaved[..., perm], rtol=0, atol=0
        )
        # the permuted table against the one written from the formula
        torch.testing.assert_close(
            interleaved[..., perm], concat_by_formula(p, d, endpoint)
        )
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
# For these three widths it comes within 300 positions, but not for every width:
# the prediction is 556.4 for $d = 4096$ and 1113.1 for $d = 8192$, and the cell
# measures 557 and 1115.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 各成分の差は角度の差 $p\,(\omega_i - \omega'_i)$ 以下で、正弦や余弦の傾きが急なところではほぼその大きさになります。
# したがって $0.1$ を超える最初の成分は、$p = 0.1/\max_i(\omega_i - \omega'_i)$ 付近に現れます。
# 最大の差を求めるため、$x = i \ln(10000)/n$ と置きます。
# すると $\omega_i = e^{-x}$、$\omega'_i = e^{-x n/(n-1)} = e^{-x}\,e^{-x/(n-1)}$ なので、次のようになります。
# $$\omega_i - \omega'_i \approx \frac{x\,e^{-x}}{n-1}$$
# これは $x = 1$、つまり $i \approx n/\ln 10000 \approx 0.11\,n$ で最大になり、その値は $1/(e\,(n-1))$ です。
# 予想は $p \approx 0.1\,e\,(n-1)$ で、$d = 128$、$512$、$2048$ に対して 17.1、69.3、278.1 です。
# 実際に測った最初の位置は 18、71、279 です。
# この位置は $d$ に比例して伸びます。幅の広いモデルほど差が現れるのは遅くなります。
# この 3 つの幅では 300 位置以内に差が現れますが、どの幅でもそうとは限りません。
# $d = 4096$ と $d = 8192$ では予想が 556.4 と 1113.1 で、セルで測ると 557 と 1115 です。

# %% tags=["solution"]
lines = []
firsts = {}
for d in (128, 512, 2048, 4096, 8192):
    n = d // 2
    i = torch.arange(n, dtype=torch.float64)
    gap_w = 10000.0 ** (-i / n) - 10000.0 ** (-i / (n - 1))
    predicted = 0.1 * math.e * (n - 1)
    assert math.isclose(0.1 / gap_w.max(), predicted, rel_tol=0.02)
    assert abs(int(gap_w.argmax()) - n / math.log(10000)) < 1
    pos = torch.arange(1200)
    paper = sinusoidal(pos, d, dtype=torch.float64)
    t2t = sinusoidal(pos, d, endpoint=True, dtype=torch.float64)
    first = int(((paper - t2t).abs().amax(-1) > 0.1).nonzero()[0])
    assert predicted <= first <= 1.1 * predicted + 1
    firsts[d] = first
    lines.append(f"d = {d:4d}: predicted {predicted:6.1f}, first {first}")
# within 300 positions for d <= 2048, but past 1000 for d = 8192
assert max(firsts[d] for d in (128, 512, 2048)) < 300 < firsts[4096]
assert firsts[8192] > 1000
print("\n".join(lines), end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** Set $q = p$ in the product-to-sum formula of section 5:
# $\cos a_i(p-q) = \cos b_i(p-q) = 1$, and
# $$PE(p)\cdot PE(p) = n + \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos 2b_i p - \cos 2a_i p\big)$$
# With $a_i = b_i$ the sum would vanish and the norm would be $\sqrt{n}$ at every
# position; with $a_i \ne b_i$ it does not, so the squared norm wanders, between 24.1
# and 40.7 for $d = 64$ over the first 100000 positions. It oscillates around
# $n = 32$: the terms of the fast pairs average out. The slowest pairs have not yet
# turned, and for them $b_i < a_i$ gives $\cos 2b_i p - \cos 2a_i p \ge 0$, which keeps
# the average a little above $n$: 32.3 over those positions.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 5 節の積和の公式で $q = p$ と置くと、$\cos a_i(p-q) = \cos b_i(p-q) = 1$ なので次のようになります。
# $$PE(p)\cdot PE(p) = n + \frac{1}{2}\sum_{i=0}^{n-1}\big(\cos 2b_i p - \cos 2a_i p\big)$$
# $a_i = b_i$ なら和は消え、ノルムはどの位置でも $\sqrt{n}$ です。
# $a_i \ne b_i$ では和が残るので、ノルムの 2 乗はさまよいます。$d = 64$ では、最初の 100000 位置で 24.1 から 40.7 の間です。
# 値は $n = 32$ のまわりで振動します。速いペアの項は平均すると消えるからです。
# 最も遅いペアはまだ 1 周もしておらず、しかも $b_i < a_i$ なので $\cos 2b_i p - \cos 2a_i p \ge 0$ です。
# これが平均を $n$ より少し上に押し上げ、この範囲の平均は 32.3 になります。

# %% alt={"en": ["Squared norm PE(p)·PE(p) of the per-column-exponent table for d = 64 against p from 0 to 2000: it starts at 32, wanders between about 27 and 37, and is not constant, unlike the paper's encoding, whose squared norm is 32 everywhere."], "ja": ["d = 64 の列ごとの指数を使った表について、ノルムの 2 乗 PE(p)·PE(p) を p（0〜2000）に対して描いた図。32 から始まり、およそ 27 から 37 の間をさまよって一定になりません。論文のエンコーディングのノルムの 2 乗はどこでも 32 です。"]} tags=["solution"]
d, n = 64, 32
p = torch.arange(100000)
bug = per_column_bug(p, d)
sq_norm = (bug * bug).sum(-1)  # PE(p) . PE(p)
j = torch.arange(d, dtype=torch.float64)
a, b = 10000.0 ** (-2 * j[0::2] / d), 10000.0 ** (-2 * j[1::2] / d)
formula = n + 0.5 * (
    torch.cos(2 * b * p[:, None]) - torch.cos(2 * a * p[:, None])
).sum(-1)
torch.testing.assert_close(sq_norm, formula)
assert (b < a).all() and 32 < sq_norm.mean() < 33
assert sq_norm.min() < 25 and sq_norm.max() > 40
shown = sq_norm[:2001]  # the plotted range, quoted in the alt text
assert 27 < shown.min() < 28 and 37 < shown.max() < 38
good = sinusoidal(p[:2001], d, dtype=torch.float64)
torch.testing.assert_close(
    (good * good).sum(-1), torch.full((2001,), 32.0).double()
)
print(
    f"d = 64, p < 100000: min {sq_norm.min():.1f}, max {sq_norm.max():.1f}, "
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
# too, and the bound of section 6 becomes $(2u + u^2)\,p\,\omega_i \approx 2^{-7}\,p\,\omega_i$
# (as long as $p$ itself is exact, up to 256): it stays below half a radian only
# for $p < 64$. In between the outcome depends on
# the actual rounding of each $\omega_i$, so the cell measures it: the first angle
# off by more than half a radian is at $p = 150$, in pair 2. Either way a bfloat16
# angle is useless for positions in the hundreds, which is why implementations
# form the angles in float32 or float64 even when the model runs in bfloat16.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** bfloat16 の単位丸め誤差は $u = 2^{-8}$ で、$[2^e, 2^{e+1})$ の数は丸めで最大 $2^{e-8}$ だけ動きます。
# 積の丸めだけで半ラジアンを超えるのは、間隔が $2$ になる $2^8 = 256$ 以上の角度だけです。
# $\omega_0 = 1$ が厳密なペア 0 で最初に問題が起きるのは $p = 257$ で、この数は bfloat16 では表せもしません。
# しかし $\omega_i$ も bfloat16 に丸められるので、6 節の上界は $(2u + u^2)\,p\,\omega_i \approx 2^{-7}\,p\,\omega_i$ になり
# （$p$ そのものが厳密な 256 まで）、半ラジアン未満が保証されるのは $p < 64$ だけです。
# その間で何が起きるかは各 $\omega_i$ の実際の丸め方によるので、セルで測ります。
# 半ラジアンを超えてずれる最初の角度は $p = 150$、ペア 2 にあります。
# どちらにしても、bfloat16 の角度は数百の位置ではもう使えません。
# そのため、モデルを bfloat16 で動かす場合でも、実装は角度を float32 か float64 で作ります。

# %% tags=["solution"]
d, n = 512, 256
omega = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / n)
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
print(
    f"bfloat16 angles, d = 512: first error above 0.5 at p = {first}, "
    f"pair {int(angle_err[first].argmax())}\n"
    f"pair 0 (w_0 = 1): first error above 0.5 at p = {first_pair0}",
    end="",
)

# %% [markdown] lang="en"
# ## References
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
#   24 July 2017, undone by commit `ca08ad9` the next day; Ł. Kaiser's comment
#   of 26 July 2017 that it "breaks all trained models") and issue #391
#   ("Mismatch position encoding with paper", Ł. Kaiser's answer).
#   <https://github.com/tensorflow/tensor2tensor/pull/177>,
#   <https://github.com/tensorflow/tensor2tensor/issues/391>
# - fairseq, `SinusoidalPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - fairseq, `make_positions` in `fairseq/utils.py`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/utils.py>
# - AllenNLP, `SinusoidalPositionalEncoding`.
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - labml.ai, annotated implementation of fixed positional encodings.
#   <https://nn.labml.ai/transformers/positional_encoding.html>
# - Huang, Y.-H., `attention-is-all-you-need-pytorch` (`transformer/Models.py`; the
#   versions before commit `7fa8c63`, November 2017, use the exponent $2j/d$).
#   <https://github.com/jadore801120/attention-is-all-you-need-pytorch>
# - Hugging Face transformers 5.24.0, `MarianSinusoidalPositionalEmbedding`
#   (`models/marian/modeling_marian.py`), `create_sinusoidal_embeddings`
#   (`models/xlm/modeling_xlm.py`) and RoBERTa's
#   `create_position_ids_from_input_ids`; `sinusoidal_embeddings` in
#   `configuration_xlm.py`, `sinusoidal_pos_embds` in
#   `configuration_distilbert.py`, `max_position_embeddings` in
#   `configuration_roberta.py`.
#   <https://github.com/huggingface/transformers>
# - Hugging Face diffusers, `get_timestep_embedding` in
#   `src/diffusers/models/embeddings.py`.
#   <https://github.com/huggingface/diffusers>
# - OpenAI, guided-diffusion and GLIDE, `timestep_embedding` in
#   `guided_diffusion/nn.py` and `glide_text2im/nn.py`.
#   <https://github.com/openai/guided-diffusion>,
#   <https://github.com/openai/glide-text2im>
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022 (scaled
#   sinusoidal position embedding). <https://arxiv.org/abs/2202.10447>
# - lucidrains, x-transformers (`ScaledSinusoidalEmbedding`) and FLASH-pytorch
#   (`ScaledSinuEmbedding`). <https://github.com/lucidrains/x-transformers>,
#   <https://github.com/lucidrains/FLASH-pytorch>
# - IEEE (2019). *IEEE Standard for Floating-Point Arithmetic* (IEEE 754-2019).
#   <https://doi.org/10.1109/IEEESTD.2019.8766229>
# - Goldberg, D. (1991). *What Every Computer Scientist Should Know About
#   Floating-Point Arithmetic*. ACM Computing Surveys 23(1).
#   <https://doi.org/10.1145/103162.103163>

# %% [markdown] lang="ja"
# ## 参考文献
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
#   （コードが入った最初のコミット `3d9c62f` での関数名は `add_timing_signal_1d`。）
# - tensor2tensor pull request #177 ("fix positional embedding", merged on
#   24 July 2017, undone by commit `ca08ad9` the next day; Ł. Kaiser's comment
#   of 26 July 2017 that it "breaks all trained models") and issue #391
#   ("Mismatch position encoding with paper", Ł. Kaiser's answer).
#   <https://github.com/tensorflow/tensor2tensor/pull/177>,
#   <https://github.com/tensorflow/tensor2tensor/issues/391>
#   （プルリクエストのマージと取り消し、Kaiser のコメントと回答。）
# - fairseq, `SinusoidalPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - fairseq, `make_positions` in `fairseq/utils.py`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/utils.py>
# - AllenNLP, `SinusoidalPositionalEncoding`.
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - labml.ai, annotated implementation of fixed positional encodings.
#   <https://nn.labml.ai/transformers/positional_encoding.html>
# - Huang, Y.-H., `attention-is-all-you-need-pytorch` (`transformer/Models.py`; the
#   versions before commit `7fa8c63`, November 2017, use the exponent $2j/d$).
#   <https://github.com/jadore801120/attention-is-all-you-need-pytorch>
#   （指数に列の番号を使う、2017 年 11 月のコミット `7fa8c63` より前の版。）
# - Hugging Face transformers 5.24.0, `MarianSinusoidalPositionalEmbedding`
#   (`models/marian/modeling_marian.py`), `create_sinusoidal_embeddings`
#   (`models/xlm/modeling_xlm.py`) and RoBERTa's
#   `create_position_ids_from_input_ids`; `sinusoidal_embeddings` in
#   `configuration_xlm.py`, `sinusoidal_pos_embds` in
#   `configuration_distilbert.py`, `max_position_embeddings` in
#   `configuration_roberta.py`.
#   <https://github.com/huggingface/transformers>
# - Hugging Face diffusers, `get_timestep_embedding` in
#   `src/diffusers/models/embeddings.py`.
#   <https://github.com/huggingface/diffusers>
# - OpenAI, guided-diffusion and GLIDE, `timestep_embedding` in
#   `guided_diffusion/nn.py` and `glide_text2im/nn.py`.
#   <https://github.com/openai/guided-diffusion>,
#   <https://github.com/openai/glide-text2im>
#   （拡散モデルのタイムステップの埋め込み。）
# - Hua, W. et al. (2022). *Transformer Quality in Linear Time*. ICML 2022 (scaled
#   sinusoidal position embedding). <https://arxiv.org/abs/2202.10447>
# - lucidrains, x-transformers (`ScaledSinusoidalEmbedding`) and FLASH-pytorch
#   (`ScaledSinuEmbedding`). <https://github.com/lucidrains/x-transformers>,
#   <https://github.com/lucidrains/FLASH-pytorch>
# - IEEE (2019). *IEEE Standard for Floating-Point Arithmetic* (IEEE 754-2019).
#   <https://doi.org/10.1109/IEEESTD.2019.8766229>
# - Goldberg, D. (1991). *What Every Computer Scientist Should Know About
#   Floating-Point Arithmetic*. ACM Computing Surveys 23(1).
#   <https://doi.org/10.1145/103162.103163>
