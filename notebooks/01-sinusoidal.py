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
# # Sinusoidal positional encoding
#
# The Transformer of Vaswani et al. (2017) adds to every token embedding a fixed
# vector that depends only on the token's position: the sines and cosines of the
# position at many different [frequencies](../docs/glossary.md#frequency). This
# chapter derives the properties of that encoding that the paper states (the
# wavelengths form a geometric progression, a shift is a linear map) and one it
# does not (the dot product of two codes depends only on their offset), checks
# every formula numerically with `posenc`, and rebuilds two well-known
# implementations (labml and AllenNLP) to show where they differ. The paper's
# other hope, that the sinusoids let a model handle sequences longer than those
# seen in training, is a claim about trained models; the chapter
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb) tests it. The
# symbols follow the
# [notation page](../docs/notation.md): $p$ and $q$ are positions, $d$ the model
# width, $n = d/2$ the number of frequencies $\omega_i$.

# %% [markdown] lang="ja"
# # 正弦波位置エンコーディング
#
# Vaswani ら（2017）の Transformer は、各トークンの埋め込みに、位置だけで決まる固定のベクトルを足します。
# 中身は、位置にさまざまな[周波数](../docs/glossary.ja.md#frequency)を掛けた角度の正弦（sin）と余弦（cos）です。
# この章では、論文が述べている性質を導きます。波長が等比数列をなすことと、位置をずらす操作が線形写像であることです。
# 論文が述べていない性質として、2 つの符号の内積が相対位置だけで決まることも導きます。
# そして、すべての式を `posenc` で数値的に確かめます。
# 最後に、広く使われている 2 つの実装（labml と AllenNLP）を再現し、どこが違うのかを示します。
# 論文は正弦波を選んだ理由として、学習時より長い系列にもモデルが外挿できる可能性を挙げています。
# これは学習済みのモデルについての主張なので、「[どの位置エンコーディングが外挿できるか](11-length-generalisation.ipynb)」の章で確かめます。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。
# $p$ と $q$ は位置、$d$ はモデルの幅、$n = d/2$ は周波数 $\omega_i$ の数です。

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import SinusoidalPositionalEncoding, attention, sinusoidal
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## The problem: attention does not see order
#
# Put the $T$ token vectors of a sequence in the rows of a matrix $X$. Self-attention
# computes
# $$\mathrm{Attn}(X) = \mathrm{softmax}\left(\frac{XW_Q (XW_K)^\top}{\sqrt{d}}\right) XW_V$$
# and nothing in it refers to where a token sits. If a permutation matrix $P$
# shuffles the tokens, the scores become $P\,XW_Q (XW_K)^\top P^\top$, the row-wise
# softmax is shuffled the same way, and $P^\top P = I$ cancels against the values:
# $$\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# Attention is
# [permutation-equivariant](../docs/glossary.md#permutation-equivariant): without
# positions, "dog bites man" and
# "man bites dog" give the same output vectors in another order (the chapter
# [*Why attention needs positions*](00-why-positions.ipynb) treats this in detail).
# The remedy here is to add a vector $PE(p)$, which depends on the position $p$, to
# the token at that position before the first layer. The cell below checks the
# equation, and that with $PE(p)$ added it no longer holds for these random weights
# (for some weights it still would:
# [Adding positions breaks the symmetry](00-why-positions.ipynb#adding-positions-breaks-the-symmetry)
# gives one).

# %% [markdown] lang="ja"
# ## 問題：アテンションは順序を見ていない
#
# 系列の $T$ 個のトークンベクトルを行列 $X$ の各行に並べます。
# セルフアテンションは次を計算します。
# $$\mathrm{Attn}(X) = \mathrm{softmax}\left(\frac{XW_Q (XW_K)^\top}{\sqrt{d}}\right) XW_V$$
# この式には、トークンがどこにあるかを表す項がありません。
# 置換行列 $P$ でトークンを並べ替えると、スコアは $P\,XW_Q (XW_K)^\top P^\top$ になります。
# 行ごとの softmax も同じように並べ替わります。バリューとの積では、$P^\top P = I$ によって置換行列どうしが打ち消し合います。
# $$\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$$
# アテンションは[置換同変](../docs/glossary.ja.md#permutation-equivariant)です。位置の情報がなければ、"dog bites man" と "man bites dog" の出力は、
# 同じベクトルが並び順を変えて出てくるだけです。
# 詳しくは「[アテンションに位置が必要な理由](00-why-positions.ipynb)」の章で扱います。
# この章の解決策は、最初の層の前に、位置 $p$ のトークンへ位置で決まるベクトル $PE(p)$ を足すことです。
# 次のセルで、この等式と、このランダムな重みでは $PE(p)$ を足すと等式が成り立たなくなることを確かめます
# （重みによっては成り立ち続けます。その例は
# 「[位置を足すと対称性が壊れる](00-why-positions.ipynb#位置を足すと対称性が壊れる)」の節にあります）。

# %%
T, d = 6, 8
x = torch.randn(T, d)
w_q, w_k, w_v = (torch.randn(d, d) / math.sqrt(d) for _ in range(3))


def self_attention(x):
    return attention(x @ w_q, x @ w_k, x @ w_v)


perm = torch.randperm(T)
# Attn(PX) = P Attn(X): permuting the tokens permutes the outputs
assert_close(self_attention(x[perm]), self_attention(x)[perm])

# With PE(p) added, the tokens move but the positions stay: for these weights,
# the outputs are no longer a permutation
pe = sinusoidal(torch.arange(T), d)
moved = self_attention(x[perm] + pe)
assert not torch.allclose(moved, self_attention(x + pe)[perm], atol=1e-3)

# %% [markdown] lang="en"
# ## The formula
#
# Vaswani et al. (2017, §3.5) give position $p$ a vector $PE(p)$ of the model's width
# $d$ (the paper's $d_{\text{model}}$; take it even for now). Its entries come in $n = d/2$ pairs, one
# for each frequency index $i = 0, 1, \dots, n-1$:
# $$PE_{(p,2i)} = \sin\left(p/10000^{2i/d}\right), \qquad PE_{(p,2i+1)} = \cos\left(p/10000^{2i/d}\right)$$
# With the frequencies
# $$\omega_i = 10000^{-2i/d} = 10000^{-i/n}$$
# the pair reads $PE_{(p,2i)} = \sin(\omega_i p)$ and $PE_{(p,2i+1)} = \cos(\omega_i p)$:
# column $2i$ holds the sine and column $2i+1$ the cosine of the same angle
# $\omega_i p$. Sine and cosine alternate; this is the
# [interleaved layout](../docs/glossary.md#interleaved-layout).
# `posenc.sinusoidal(positions, d)` computes it; the cell below rebuilds the table
# from the formula, entry by entry, and compares. In the table it prints, row $p = 0$
# is $(0, 1, 0, 1, \dots)$: every sine is $0$ and every cosine is $1$. Column $0$ is
# simply $\sin p$, since $\omega_0 = 1$; the later columns change more and more slowly.

# %% [markdown] lang="ja"
# ## 式
#
# Vaswani ら（2017、§3.5）は、位置 $p$ にモデルの幅 $d$（論文の $d_{\text{model}}$ で、ここでは偶数とする）の
# ベクトル $PE(p)$ を割り当てます。成分は $n = d/2$ 組のペアになっていて、
# 周波数の番号 $i = 0, 1, \dots, n-1$ ごとに 1 組です。
# $$PE_{(p,2i)} = \sin\left(p/10000^{2i/d}\right), \qquad PE_{(p,2i+1)} = \cos\left(p/10000^{2i/d}\right)$$
# 周波数を
# $$\omega_i = 10000^{-2i/d} = 10000^{-i/n}$$
# と書くと、ペアは $PE_{(p,2i)} = \sin(\omega_i p)$ と $PE_{(p,2i+1)} = \cos(\omega_i p)$ になります。
# 列 $2i$ には角度 $\omega_i p$ の正弦が、列 $2i+1$ には同じ角度の余弦が入ります。
# 正弦と余弦が交互に並ぶこの並べ方を[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)と呼びます。
# `posenc.sinusoidal(positions, d)` がこれを計算します。
# 次のセルでは、式から表を成分ごとに作り直して比べます。
# 表示される表の行 $p = 0$ は $(0, 1, 0, 1, \dots)$ で、正弦はすべて $0$、余弦はすべて $1$ です。
# $\omega_0 = 1$ なので列 $0$ は単純に $\sin p$ で、右の列ほど変化がゆっくりになります。

# %%
d, n = 8, 4
table = sinusoidal(torch.arange(6), d, dtype=torch.float64)  # rows p = 0..5

# the paper's formula, entry by entry:
# sin(p / 10000^(2i/d)), cos(p / 10000^(2i/d)), ...
by_hand = [
    [
        f(p / 10000 ** (2 * i / d))
        for i in range(n)
        for f in (math.sin, math.cos)
    ]
    for p in range(6)
]
assert_close(table, torch.tensor(by_hand, dtype=torch.float64))

# omega_i = 10000^(-i/n): even columns sin(omega_i p), odd ones cos(omega_i p)
omega = 10000.0 ** (-torch.arange(n).double() / n)
angle = torch.arange(6).double()[:, None] * omega
assert_close(table[:, 0::2], angle.sin())
assert_close(table[:, 1::2], angle.cos())
# row p = 0: (0, 1, 0, 1, ...)
assert not table[0, 0::2].any() and (table[0, 1::2] == 1).all()
assert_close(table[:, 0], torch.arange(6).double().sin())  # column 0: sin p

sinusoidal(torch.arange(4), d)

# %% [markdown] lang="en"
# ## What the encoding looks like
#
# The heatmap shows $PE_{(p,j)}$ for $d = 64$ and positions $p = 0, \dots, 127$, with the
# dimension $j$ running down. The top rows oscillate fast; further down, the
# frequency falls and the colour changes only slowly over the whole range; there
# the rows alternate between sines near $0$ (white) and cosines near $1$ (dark red).
# Each position gets its own column of colours.

# %% [markdown] lang="ja"
# ## エンコーディングを眺める
#
# 下のヒートマップは、$d = 64$、位置 $p = 0, \dots, 127$ の $PE_{(p,j)}$ です。
# 次元 $j$ を縦軸に取っています。上の行は速く振動します。
# 下に行くほど周波数が下がり、描いた範囲全体を通しても色はゆっくりとしか変わりません。
# そこでは、$0$ に近い正弦（白）と $1$ に近い余弦（濃い赤）の行が交互に並びます。
# 位置ごとに、色の並びが異なる縦の列ができます。

# %% alt={"en": ["Heatmap of the sinusoidal encoding, d = 64: position p from 0 to 127 across, dimension j from 0 to 63 down. Top rows oscillate fast; lower rows change slowly, ending in alternating white (sine near 0) and dark red (cosine near 1) stripes."], "ja": ["d = 64 の正弦波位置エンコーディングのヒートマップ。横軸は位置 p（0〜127）、縦軸は次元 j（0〜63）。上の行は速く振動し、下の行ほどゆっくり変化して、白（0 に近い正弦）と濃い赤（1 に近い余弦）の縞が交互に並びます。"]}
big = sinusoidal(torch.arange(128), 64)  # [p, j]
fig, ax = plt.subplots(figsize=(6.4, 3.6))
im = ax.imshow(
    big.T,
    aspect="auto",
    cmap="RdBu_r",
    vmin=-1,
    vmax=1,
    interpolation="nearest",
)
ax.set(xlabel="$p$", ylabel="$j$")
ax.grid(False)
fig.colorbar(im, ax=ax, label="$PE_{(p,j)}$")
plt.show()

# %% [markdown] lang="en"
# Like labml's figure, the next plot draws columns $4$ to $7$ for $d = 20$ against the
# position. Columns $4$ and $5$ are the sine and cosine of one frequency
# ($i = 2$); columns $6$ and $7$ share a lower one ($i = 3$). Within a pair the two
# curves are a quarter turn apart, and the point they make lies on the unit circle:
# $$PE_{(p,2i)}^2 + PE_{(p,2i+1)}^2 = 1$$

# %% [markdown] lang="ja"
# labml の図と同じように、$d = 20$ の列 $4$ から $7$ を位置に対して描きます。
# 列 $4$ と $5$ は同じ周波数（$i = 2$）の正弦と余弦で、
# 列 $6$ と $7$ はそれより低い周波数（$i = 3$）を共有します。
# ペアの 2 本の曲線は 4 分の 1 周期ずれていて、2 つを組にした点は単位円の上にあります。
# $$PE_{(p,2i)}^2 + PE_{(p,2i+1)}^2 = 1$$

# %% alt={"en": ["Columns 4 to 7 of the d = 20 encoding against position p from 0 to 99: columns 4 and 5 are a sine and cosine with a wavelength of about 40, columns 6 and 7 a slower pair of about 100; the two curves of a pair are a quarter turn apart."], "ja": ["d = 20 のエンコーディングの列 4〜7 を位置 p（0〜99）に対して描いた曲線。列 4 と 5 は波長約 40 の正弦と余弦、列 6 と 7 は波長約 100 の遅いペアで、ペアの 2 本は 4 分の 1 周期ずれています。"]}
p = torch.arange(100)
pe20 = sinusoidal(p, 20)
assert_close(pe20[:, 0::2] ** 2 + pe20[:, 1::2] ** 2, torch.ones(100, 10))

fig, ax = plt.subplots(figsize=(6.4, 3.2))
for j in range(4, 8):
    ax.plot(p, pe20[:, j], "--" if j % 2 else "-", label=f"$PE_{{(p,{j})}}$")
ax.set(xlabel="$p$", ylabel="$PE_{(p,j)}$", ylim=(-1.35, 1.1))
ax.legend(loc="lower left", ncols=4)
plt.show()

# %% [markdown] lang="en"
# ## The wavelengths form a geometric progression
#
# The [wavelength](../docs/glossary.md#wavelength) of pair $i$ is the number of
# positions its angle needs for one full
# turn:
# $$\lambda_i = \frac{2\pi}{\omega_i} = 2\pi \cdot 10000^{2i/d}$$
# The ratio of consecutive wavelengths does not depend on $i$,
# $$\frac{\lambda_{i+1}}{\lambda_i} = \frac{10000^{2(i+1)/d}}{10000^{2i/d}} = 10000^{2/d}$$
# so the wavelengths form a geometric progression starting at $\lambda_0 = 2\pi$.
# The paper says it runs "from $2\pi$ to $10000 \cdot 2\pi$". Strictly, the last index
# is $i = n-1$, so the last wavelength is
# $$\lambda_{n-1} = 2\pi \cdot 10000^{(d-2)/d}$$
# one ratio short of $10000 \cdot 2\pi$. The progression would reach
# $10000 \cdot 2\pi$ only at $i = n$, a pair that does not exist. The output below
# shows the size of the gap for $d = 512$: the ratio is 1.0366 and the last
# wavelength is about 60611 positions instead of 62832.
#
# tensor2tensor's `get_timing_signal_1d` (and likewise AllenNLP and fairseq) spaces
# its frequencies so that both ends are reached: it divides the exponent by $n-1$
# instead of $n$,
# $$\omega_i = 10000^{-i/(n-1)}, \qquad \lambda_{n-1} = 10000 \cdot 2\pi$$
# with the slightly larger ratio $10000^{1/(n-1)}$. In `posenc` this is
# `endpoint=True`, named after the argument of `numpy.linspace` that includes the last
# point. It is a different encoding, not a rounding difference; the section
# [labml and AllenNLP, rebuilt with posenc](#labml-and-allennlp-rebuilt-with-posenc)
# measures how different. tensor2tensor is the code that the paper's Conclusion
# names for training and evaluating its models, and its first public version
# (June 2017) already used this $n-1$ version (in the concatenated layout);
# [*Sinusoids in the wild*](02-sinusoids-in-the-wild.ipynb#2-dividing-by-n-or-by-n--1)
# tells that story.
#
# The check below does not trust any formula for $\omega_i$: it reads the frequencies
# back from `posenc`'s output. At $p = 1$ each pair holds $(\sin\omega_i, \cos\omega_i)$
# and every $\omega_i$ lies in $(0, 1]$, so the two-argument arctangent returns
# $\omega_i$ itself.

# %% [markdown] lang="ja"
# ## 波長は等比数列をなす
#
# ペア $i$ の[波長](../docs/glossary.ja.md#wavelength)とは、その角度がちょうど 1 周するのに必要な位置の数です。
# $$\lambda_i = \frac{2\pi}{\omega_i} = 2\pi \cdot 10000^{2i/d}$$
# 隣り合う波長の比は $i$ によりません。
# $$\frac{\lambda_{i+1}}{\lambda_i} = \frac{10000^{2(i+1)/d}}{10000^{2i/d}} = 10000^{2/d}$$
# したがって波長は $\lambda_0 = 2\pi$ から始まる等比数列です。
# 論文は「$2\pi$ から $10000 \cdot 2\pi$ まで」と書いています。
# しかし厳密には最後の番号は $i = n-1$ なので、最後の波長は次の値です。
# $$\lambda_{n-1} = 2\pi \cdot 10000^{(d-2)/d}$$
# これは $10000 \cdot 2\pi$ より公比 1 回分だけ手前です。
# 数列が $10000 \cdot 2\pi$ に届くのは $i = n$ のときですが、そのペアは存在しません。
# $d = 512$ での差を下の出力に示します。公比は 1.0366、最後の波長は 62832 ではなく約 60611 です。
#
# tensor2tensor の `get_timing_signal_1d`（AllenNLP や fairseq も同様）は、
# 両端にちょうど届くように周波数を並べます。指数を $n$ ではなく $n-1$ で割るのです。
# $$\omega_i = 10000^{-i/(n-1)}, \qquad \lambda_{n-1} = 10000 \cdot 2\pi$$
# 公比は少し大きい $10000^{1/(n-1)}$ になります。
# `posenc` では `endpoint=True` がこれに当たります。
# 名前は、終点を含めるかどうかを決める `numpy.linspace` の引数から取りました。
# これは丸め誤差ではなく、別のエンコーディングです。どれほど違うかは、
# 「[labml と AllenNLP を posenc で再現する](#labml-と-allennlp-を-posenc-で再現する)」の節で測ります。
# 論文は結論の節で、モデルの学習と評価に使ったコードとして tensor2tensor を挙げています。
# その最初の公開版（2017 年 6 月）は、すでにこの $n-1$ 版（しかも連結配置）でした。
# 詳しくは「[実装ごとに違う正弦波位置エンコーディング](02-sinusoids-in-the-wild.ipynb#2-n-で割るか-n--1-で割るか)」の章で述べます。
#
# 下の確認では $\omega_i$ の式を使わず、`posenc` の出力から周波数を読み戻します。
# $p = 1$ では各ペアが $(\sin\omega_i, \cos\omega_i)$ を持ち、$\omega_i$ はすべて $(0, 1]$ に入るので、
# 2 引数の逆正接（atan2）が $\omega_i$ そのものを返します。

# %%
two_pi = 2 * math.pi


def wavelengths(d, endpoint=False):
    """2 pi / omega_i, with omega_i read back from posenc's row p = 1."""
    row = sinusoidal(
        torch.tensor([1]), d, endpoint=endpoint, dtype=torch.float64
    )[0]
    return two_pi / torch.atan2(row[0::2], row[1::2])


for d in (16, 64, 512):
    n = d // 2
    i = torch.arange(n).double()
    lam, lam_t2t = wavelengths(d), wavelengths(d, endpoint=True)
    # n denominator: lambda_i = 2 pi 10000^(2i/d), ratio 10000^(2/d),
    # last 2 pi 10000^((d-2)/d)
    assert_close(lam, two_pi * 10000 ** (2 * i / d))
    assert torch.allclose(
        lam[1:] / lam[:-1], torch.tensor(10000 ** (2 / d)).double()
    )
    assert math.isclose(lam[-1], two_pi * 10000 ** ((d - 2) / d))
    # 10000 * 2 pi is not reached: it would be the next term, i = n
    assert lam[-1] < 10000 * two_pi and math.isclose(
        lam[-1] * 10000 ** (2 / d), 10000 * two_pi
    )
    # n-1 denominator: from 2 pi to exactly 10000 * 2 pi
    assert_close(lam_t2t, two_pi * 10000 ** (i / (n - 1)))
    assert math.isclose(lam_t2t[-1], 10000 * two_pi)

# one print call: the stored output stays identical from run to run
ratio, ratio_t2t = lam[1] / lam[0], lam_t2t[1] / lam_t2t[0]
print(
    f"d = 512, n denominator:   ratio {ratio:.4f}, last {lam[-1]:.0f}\n"
    f"d = 512, n-1 denominator: ratio {ratio_t2t:.4f}, last {lam_t2t[-1]:.0f}",
    end="",
)

# %% [markdown] lang="en"
# On a logarithmic axis a geometric progression is a straight line. The left panel
# ($d = 16$, eight pairs) makes the gap visible: the paper's frequencies stop one
# ratio below $10000 \cdot 2\pi$, the $n-1$ version ends on it. For $d = 512$ (right) the
# two lines almost coincide.

# %% [markdown] lang="ja"
# 対数軸では、等比数列は直線になります。
# 左の図（$d = 16$、8 組）では差がはっきり見えます。
# 論文の周波数は $10000 \cdot 2\pi$ の公比 1 回分手前で止まり、$n-1$ 版はちょうどそこで終わります。
# 右の $d = 512$ では、2 本の線はほとんど重なります。

# %% alt={"en": ["Wavelength against pair index i on a log axis, d = 16 (left) and d = 512 (right). Both formulas give straight lines from 2π; with exponent i/n the line stops one ratio short of 10000·2π, with i/(n−1) it ends on it. For d = 512 they nearly coincide."], "ja": ["ペア番号 i に対する波長を対数軸で描いた図（左 d = 16、右 d = 512）。どちらの式も 2π から始まる直線で、指数 i/n の線は 10000·2π の公比 1 回分手前で止まり、i/(n−1) の線はちょうどそこで終わります。d = 512 では 2 本はほぼ重なります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.4), sharey=True)
for ax, d in zip(axes, (16, 512), strict=True):
    style = {"marker": "o", "ms": 4} if d == 16 else {}
    ax.plot(wavelengths(d), label=r"$2\pi \cdot 10000^{i/n}$", **style)
    ax.plot(
        wavelengths(d, endpoint=True),
        "--",
        label=r"$2\pi \cdot 10000^{i/(n-1)}$",
        **style,
    )
    ax.axhline(two_pi, color="0.5", lw=0.8, ls=":")
    ax.axhline(10000 * two_pi, color="0.5", lw=0.8, ls=":")
    ax.set(yscale="log", xlabel="$i$", title=f"$d = {d}$")
    ax.minorticks_off()
axes[0].set_yticks([two_pi * 10**e for e in range(5)])
axes[0].set_yticklabels(
    [rf"$10^{e}\cdot 2\pi$" if e else r"$2\pi$" for e in range(5)]
)
axes[0].set_ylabel(r"$\lambda_i$")
axes[0].legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# ## Why a sine and a cosine: a shift is a rotation
#
# The paper motivates the sinusoids by a property: for any fixed offset $k$, the
# encoding $PE(p+k)$ is a linear function of $PE(p)$. Let us derive that function.
# Take one pair and write $\theta = \omega_i p$ and $\phi = \omega_i k$. The
# angle-addition formulas give
# $$\sin(\theta + \phi) = \sin\theta\cos\phi + \cos\theta\sin\phi$$
# $$\cos(\theta + \phi) = \cos\theta\cos\phi - \sin\theta\sin\phi$$
# In the interleaved order, sine first, read the coefficients of
# $\sin\theta$ and $\cos\theta$ off each line: $(\cos\phi, \sin\phi)$ from the first,
# $(-\sin\phi, \cos\phi)$ from the second. They are the rows of a $2 \times 2$ matrix:
# $$\begin{pmatrix}\sin(\theta+\phi)\\ \cos(\theta+\phi)\end{pmatrix} = B(\phi)\begin{pmatrix}\sin\theta\\ \cos\theta\end{pmatrix}, \qquad B(\phi) = \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}$$
# Put one such block per frequency on the diagonal of a $d \times d$ matrix,
# $$M_k = \mathrm{diag}\big(B(k\omega_0), B(k\omega_1), \dots, B(k\omega_{n-1})\big)$$
# and every pair moves at once:
# $$PE(p+k) = M_k\, PE(p)$$
# $M_k$ contains $k$ and the frequencies, but not $p$: the same matrix shifts every
# position by $k$. This is the linear function the paper promised.
#
# $B(\phi)$ is a [rotation matrix](../docs/glossary.md#rotation-matrix). With the counter-clockwise rotation of the
# [notation page](../docs/notation.md#encodings)
# $R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta\\ \sin\theta & \cos\theta\end{pmatrix}$, it is
# $B(\phi) = R(-\phi)$: moving forward turns each (sine, cosine) point clockwise.
# The signs matter. The transpose $B(\phi)^\top = R(\phi)$, which is easy to write by
# mistake, moves the other way: it maps $PE(p)$ to $PE(p-k)$. Because the blocks are
# rotations, the shifts also compose as expected: $M_k M_l = M_{k+l}$ and
# $M_k^\top = M_{-k}$.

# %% [markdown] lang="ja"
# ## なぜ正弦と余弦の両方か：ずらすことは回転すること
#
# 論文は正弦波を選んだ理由として、次の性質を挙げています。
# ずらし量 $k$ をどんな値に固定しても、$PE(p+k)$ は $PE(p)$ の線形関数で表せる、というものです。
# その線形関数を導きましょう。
# 1 組のペアに注目し、$\theta = \omega_i p$、$\phi = \omega_i k$ と置きます。加法定理から次が成り立ちます。
# $$\sin(\theta + \phi) = \sin\theta\cos\phi + \cos\theta\sin\phi$$
# $$\cos(\theta + \phi) = \cos\theta\cos\phi - \sin\theta\sin\phi$$
# インターリーブ配置では正弦が先です。上の 2 つの式から $\sin\theta$ と $\cos\theta$ の係数を読み取ると、
# 1 つ目の式からは $(\cos\phi, \sin\phi)$、2 つ目の式からは $(-\sin\phi, \cos\phi)$ が得られます。
# これらを行に並べた $2 \times 2$ 行列を使うと、次のように書けます。
# $$\begin{pmatrix}\sin(\theta+\phi)\\ \cos(\theta+\phi)\end{pmatrix} = B(\phi)\begin{pmatrix}\sin\theta\\ \cos\theta\end{pmatrix}, \qquad B(\phi) = \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}$$
# 周波数ごとにこのブロックを 1 つずつ $d \times d$ 行列の対角に並べます。
# $$M_k = \mathrm{diag}\big(B(k\omega_0), B(k\omega_1), \dots, B(k\omega_{n-1})\big)$$
# すると、すべてのペアを一度にずらせます。
# $$PE(p+k) = M_k\, PE(p)$$
# $M_k$ に含まれるのは $k$ と周波数だけで、$p$ は含まれません。
# 同じ行列が、どの位置も $k$ だけずらします。これが論文の言う線形関数です。
#
# $B(\phi)$ は[回転行列](../docs/glossary.ja.md#rotation-matrix)です。[記法のページ](../docs/notation.ja.md#encodings)の反時計回りの回転
# $R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta\\ \sin\theta & \cos\theta\end{pmatrix}$ を使うと、
# $B(\phi) = R(-\phi)$ です。位置を先へ進めると、（正弦、余弦）の点は時計回りに回ります。
# 回転の向き（正負）が重要です。うっかり書きがちな転置 $B(\phi)^\top = R(\phi)$ は逆向きに動き、
# $PE(p)$ を $PE(p-k)$ に移します。
# ブロックが回転なので、ずらす操作どうしも期待どおりに合成できます。
# $M_k M_l = M_{k+l}$、$M_k^\top = M_{-k}$ が成り立ちます。

# %%
d = 16
n = d // 2
omega = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / n)


def block(phi):  # B(phi)
    c, s = math.cos(phi), math.sin(phi)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)


def rotation(theta):  # R(theta), counter-clockwise
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


def shift_matrix(k):  # M_k
    return torch.block_diag(*(block(k * w) for w in omega.tolist()))


def pe64(positions):  # rows PE(p)
    return sinusoidal(positions, d, dtype=torch.float64)


theta, phi = 2.0, -0.7
sc = torch.tensor(
    [[math.sin(a), math.cos(a)] for a in (theta, theta + phi)],
    dtype=torch.float64,
)
assert_close(block(phi) @ sc[0], sc[1])  # angle addition
assert_close(block(phi), rotation(-phi))  # B(phi) = R(-phi)
assert_close(block(phi).T, rotation(phi))  # B(phi)^T = R(phi)

p = torch.tensor([0, 1, 7, 100, 999])
for k in (-7, 1, 3, 50, 1000):
    m = shift_matrix(k)
    assert_close(pe64(p) @ m.T, pe64(p + k))  # PE(p+k) = M_k PE(p)
    assert_close(pe64(p) @ m, pe64(p - k))  # the transpose shifts back
    assert_close(m.T, shift_matrix(-k))  # M_k^T = M_{-k}
    assert_close(m @ shift_matrix(5), shift_matrix(k + 5))  # M_k M_l = M_{k+l}
print(
    f"PE(p+k) = M_k PE(p) for p in {p.tolist()}, k in [-7, 1, 3, 50, 1000]",
    end="",
)

# %% [markdown] lang="en"
# ### The sine alone is not enough
#
# Keep only the sines, $s(p) = (\sin\omega_0 p, \dots, \sin\omega_{n-1} p)$. No matrix
# $L$ can satisfy $s(p+k) = L\,s(p)$ for all $p$: at $p = 0$ every sine is $0$, so
# $L\,s(0) = 0$ for any $L$, while $s(k) \neq 0$ for every integer $k \neq 0$ (already
# its first entry $\sin k$ is not $0$, since $\pi$ is irrational). The derivation
# above shows what is missing: $\sin(\theta+\phi)$ needs $\cos\theta$, which only the
# second column of each pair supplies.
#
# Leaving $p = 0$ out does not rescue the sine. The cell below fits the best matrix
# in the [least-squares](../docs/glossary.md#least-squares) sense over $p = 1, \dots, 999$ for $k = 3$. With both columns the
# fit recovers $M_k$ (transposed, since positions are rows) to rounding error; with
# sines alone the relative error stays near 0.34, as printed.

# %% [markdown] lang="ja"
# ### 正弦だけでは足りない
#
# 正弦だけを残した $s(p) = (\sin\omega_0 p, \dots, \sin\omega_{n-1} p)$ を考えます。
# すべての $p$ で $s(p+k) = L\,s(p)$ を満たす行列 $L$ は存在しません。
# $p = 0$ では正弦がすべて $0$ なので、どんな $L$ でも $L\,s(0) = 0$ です。
# 一方、整数 $k \neq 0$ ならどれでも $s(k) \neq 0$ です
# （$\pi$ は無理数なので、最初の成分 $\sin k$ がすでに $0$ になりません）。
# 何が足りないかは、上の導出が教えてくれます。$\sin(\theta+\phi)$ には $\cos\theta$ が必要で、
# それを持っているのは各ペアの 2 列目だけです。
#
# $p = 0$ を除いても、正弦だけの符号ではやはりうまくいきません。
# 次のセルでは $k = 3$ について、$p = 1, \dots, 999$ の範囲で[最小二乗](../docs/glossary.ja.md#least-squares)法による最良の行列を求めます。
# 両方の列を使うと、丸め誤差の範囲で $M_k$（位置を行に並べているので転置）が復元されます。
# 正弦だけでは、出力のとおり相対誤差が 0.34 前後に残ります。

# %%
k = 3
p = torch.arange(1, 1000)
full, full_k = pe64(p), pe64(p + k)
fit = torch.linalg.lstsq(full, full_k, driver="gelsd").solution
assert_close(fit, shift_matrix(k).T, rtol=0, atol=1e-8)

sines, sines_k = full[:, 0::2], full_k[:, 0::2]
fit_sin = torch.linalg.lstsq(sines, sines_k, driver="gelsd").solution
rel_full = (full @ fit - full_k).norm() / full_k.norm()
rel_sin = (sines @ fit_sin - sines_k).norm() / sines_k.norm()
assert rel_full < 1e-9 and rel_sin > 0.1

assert not sinusoidal(torch.tensor([0]), d)[0, 0::2].any()  # s(0) = 0
ks = torch.arange(-50, 51)
# sin k != 0 for integers k != 0
assert (sinusoidal(ks[ks != 0], d)[:, 0] != 0).all()
print(
    f"relative error, sine and cosine: {rel_full:.1e}\n"
    f"relative error, sine only: {rel_sin:.2f}",
    end="",
)

# %% [markdown] lang="en"
# ## The dot product depends only on the distance
#
# Multiply two encodings entry by entry and group the pairs. By
# $\cos(a-b) = \cos a\cos b + \sin a\sin b$,
# $$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\big(\sin\omega_i p\,\sin\omega_i q + \cos\omega_i p\,\cos\omega_i q\big) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$$
# Four consequences follow at once.
#
# - The dot product is a function of the distance $p-q$ alone: the
#   [Gram matrix](../docs/glossary.md#gram-matrix) is
#   constant along each diagonal.
# - It is symmetric in $p-q$, because cosine is even: the dot product of two codes
#   cannot tell whether $q$ comes before or after $p$. (Attention can, through its
#   weights: see the next section.)
# - Its maximum is at $p = q$, where every term is $1$: $PE(p)\cdot PE(p) = n$, so every
#   encoding has the same norm $\sqrt{d/2}$.
# - It falls as the distance grows, but not monotonically: the fast pairs soon
#   oscillate out of step, and the sum ripples. For $d = 512$ it first rises from
#   distance 43 to distance 44 (output below).

# %% [markdown] lang="ja"
# ## 内積は距離だけで決まる
#
# 2 つのエンコーディングを成分ごとに掛け、ペアごとにまとめます。
# $\cos(a-b) = \cos a\cos b + \sin a\sin b$ を使うと、次のようになります。
# $$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\big(\sin\omega_i p\,\sin\omega_i q + \cos\omega_i p\,\cos\omega_i q\big) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$$
# ここから 4 つのことがすぐに分かります。
#
# - 内積は距離 $p-q$ だけの関数です。[グラム行列](../docs/glossary.ja.md#gram-matrix)は各対角線に沿って一定になります。
# - 余弦は偶関数なので、$p-q$ について対称です。2 つの符号の内積だけでは、$q$ が $p$ の前にあるのか後ろにあるのかは区別できません
#   （アテンションなら重みを通して区別できることを、次の節で見ます）。
# - 最大値は $p = q$ のときで、各項が $1$ になります。$PE(p)\cdot PE(p) = n$ なので、
#   どのエンコーディングもノルムは $\sqrt{d/2}$ で同じです。
# - 距離が大きくなると値は下がりますが、単調ではありません。
#   速いペアどうしはすぐに位相がずれ、和が波打ちます。
#   $d = 512$ では、距離 43 から 44 にかけて初めて値が増えます（下の出力）。

# %% alt={"en": ["Dot product PE(p)·PE(q) for d = 512 against the distance p − q from −1000 to 1000: a sharp symmetric peak of 256 at 0, then a fall with ripples to about 45 at ±1000. It depends only on the distance."], "ja": ["d = 512 での内積 PE(p)·PE(q) を距離 p − q（−1000〜1000）に対して描いた図。0 で 256 の鋭い左右対称のピークがあり、離れるにつれて波打ちながら ±1000 で約 45 まで下がります。値は距離だけで決まります。"]}
d, n = 512, 256
omega = 10000.0 ** (-torch.arange(n).double() / n)
pos = torch.arange(200)
enc = sinusoidal(pos, d, dtype=torch.float64)
gram = enc @ enc.T  # gram[p, q] = PE(p) . PE(q)
dist = (pos[:, None] - pos).double()  # p - q
# PE(p) . PE(q) = sum_i cos(omega_i (p - q))
assert_close(gram, torch.cos(dist[..., None] * omega).sum(-1))
assert_close(gram[1:, 1:], gram[:-1, :-1])  # constant along diagonals
assert_close(gram, gram.T)  # symmetric in p - q
# PE(p) . PE(p) = n
assert torch.allclose(gram.diagonal(), torch.tensor(n).double())
assert (gram[dist != 0] < n - 1e-6).all()  # the maximum only at p = q

# f(k) = PE(k) . PE(0) for k = -1000..1000 (negative positions are allowed)
k = torch.arange(-1000, 1001)
f = sinusoidal(k, d, dtype=torch.float64) @ enc[0]
assert_close(f, f.flip(0))  # f(k) = f(-k)
f_pos = f[1000:]  # k = 0, 1, 2, ...
first_rise = int((f_pos[1:] > f_pos[:-1]).nonzero()[0])
print(
    f"d = 512: f(k) first rises from k = {first_rise} to k = {first_rise + 1}\n"
    f"f(0) = {f[1000]:.1f}, f(1000) = {f[2000]:.1f}",
    end="",
)

fig, ax = plt.subplots(figsize=(6.4, 3.2))
ax.plot(k, f, lw=1)
ax.axhline(0, color="0.5", lw=0.8)
ax.set(
    xlabel="$p-q$",
    ylabel=r"$PE(p)\cdot PE(q)$",
    title="$d = 512$",
    xlim=(-1000, 1000),
)
plt.show()

# %% [markdown] lang="en"
# <!-- explorable: 01-sinusoidal -->
# *On the website, an interactive figure takes the place of this note: sliders
# for the base and the dimension redraw the heatmap and the dot product.*

# %% [markdown] lang="ja"
# <!-- explorable: 01-sinusoidal -->
# サイトでは、この注記の場所に対話的な図があります。底と次元数のスライダーで、ヒートマップと内積を描き直せます。

# %% [markdown] lang="en"
# This clean property holds for the encodings themselves. Inside a layer, the
# query and key of positions $p$ and $q$ are $W_Q\,(x_p + PE(p))$ and $W_K\,(x_q + PE(q))$,
# so the attention score contains $PE(p)^\top W_Q^\top W_K\, PE(q)$. For a general
# matrix between them, that term depends on $p$ and $q$ separately, not only on
# $p-q$: the check below draws random weights and shows the values along one
# diagonal spread widely.
#
# Nor does the symmetry survive the weights. With $W_Q = I$ and $W_K = M_k$, the
# shift matrix of the previous section, the term becomes
# $$PE(p)^\top M_k\, PE(q) = PE(p)\cdot PE(q+k) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q-k)\big)$$
# again a function of $p-q$ alone, but one whose peak sits at $q = p-k$: the query
# at $p$ prefers the key $k$ positions before it, and the keys $k$ before and $k$
# after get different scores. This is the paper's motivation at work: a fixed
# linear map lets a head attend by relative position, in a chosen direction.
# Rotary position embedding, the subject of the chapter
# [*Rotary position embedding (RoPE)*](08-rope.ipynb), rotates queries and keys
# instead, so that positions enter the score only through $p-q$, whatever the
# weights are.

# %% [markdown] lang="ja"
# このきれいな性質は、エンコーディングそのものについて成り立つものです。
# 層の中では、位置 $p$ のクエリと位置 $q$ のキーは $W_Q\,(x_p + PE(p))$ と $W_K\,(x_q + PE(q))$ です。
# そのためアテンションスコアには $PE(p)^\top W_Q^\top W_K\, PE(q)$ という項が含まれます。
# 間に一般の行列が入ると、この項は $p-q$ だけでなく $p$ と $q$ のそれぞれに依存します。
# 下の確認ではランダムな重みを使い、1 本の対角線に沿った値が大きくばらつくことを示します。
#
# 対称性も、重みを通すと保たれません。$W_Q = I$ とし、前の節のずらす行列を使って $W_K = M_k$ とすると、この項は次のようになります。
# $$PE(p)^\top M_k\, PE(q) = PE(p)\cdot PE(q+k) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q-k)\big)$$
# これはやはり $p-q$ だけの関数ですが、ピークは $q = p-k$ にあります。
# 位置 $p$ のクエリは $k$ 個前のキーを好み、$k$ 個前のキーと $k$ 個後ろのキーには異なるスコアが付きます。
# 論文が正弦波を選んだ理由は、まさにここにあります。固定の線形写像によって、ヘッドは相対位置で、しかも向きを区別してアテンションを向けられます。
# 「[回転位置埋め込み（RoPE）](08-rope.ipynb)」の章で扱う回転位置埋め込みは、代わりにクエリとキーを回転させます。
# そうすると、重みがどうであっても、位置は $p-q$ を通してだけスコアに入ります。

# %%
d = 64
enc = sinusoidal(torch.arange(300), d, dtype=torch.float64)
w_q, w_k = (
    torch.randn(d, d, dtype=torch.float64) / math.sqrt(d) for _ in range(2)
)
scores = (enc @ w_q.T) @ (enc @ w_k.T).T  # [p, q] = PE(p)^T W_Q^T W_K PE(q)
along = torch.diagonal(scores, 5)  # all pairs with q - p = 5
assert along.max() - along.min() > 1
# without the weights: constant
assert torch.diagonal(enc @ enc.T, 5).std() < 1e-12

# W_Q = I, W_K = M_k: PE(p)^T M_k PE(q) = sum_i cos(w_i (p - q - k))
k = 3
omega64 = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / (d // 2))
m_k = torch.block_diag(*(block(k * w) for w in omega64.tolist()))
shifted = enc @ m_k @ enc.T  # [p, q]
offset = (torch.arange(300)[:, None] - torch.arange(300)).double()  # p - q
expected = torch.cos((offset - k)[..., None] * omega64).sum(-1)
assert_close(shifted, expected)
assert (shifted.argmax(dim=1)[k:] == torch.arange(300 - k)).all()  # q = p - k
row = shifted[100]
assert row[100 - k] - row[100 + k] > 1  # k before and k after differ
print(
    f"q - p = 5, p = 0..294: min {along.min():.1f}, max {along.max():.1f}\n"
    f"W_K = M_3, query 100: key 97 {row[97]:.1f}, key 103 {row[103]:.1f}",
    end="",
)

# %% [markdown] lang="en"
# ## labml and AllenNLP, rebuilt with posenc
#
# Two widely read PyTorch modules add this encoding to their input, and they do not
# compute the same thing. Below, each one's arithmetic is transcribed in a few
# lines of torch, with the same operations in the same precision (frequencies
# through `exp` in float32, as both compute them), and compared with the `posenc`
# module configured to match it (the chapter
# [*Sinusoids in the wild*](02-sinusoids-in-the-wild.ipynb) compares more
# implementations). The transcriptions are ours, not the libraries' code; what
# lives in a module rather than in the arithmetic (buffers, dropout) is checked on
# `posenc`'s module, which copies it.
#
# **Around the formula.** The paper adds the encoding to token embeddings that it
# multiplies by $\sqrt{d_{\text{model}}}$ (§3.4), and applies dropout to the sum, at
# rate 0.1 for the base model (§5.4). labml splits this between two classes.
# `PositionalEncoding` applies this dropout (`dropout_prob`) and does not scale.
# `EmbeddingsWithPositionalEncoding` (in `models.py`) embeds the tokens,
# multiplies them by `math.sqrt(d_model)` and adds the same table, with no
# dropout, and registers the table as an ordinary buffer, so its table is saved
# in the `state_dict`. The
# paper also trained learned positional embeddings instead (Table 3, row (E)):
# 4.92 perplexity and 25.7 BLEU on the development set, against 4.92 and 25.8 for
# the sinusoids, "nearly identical results" in the words of §3.5.
#
# **labml** (`PositionalEncoding(d_model, dropout_prob, max_len=5000)`) precomputes a
# table of shape `[max_len, 1, d_model]` in the interleaved layout with the paper's
# frequencies $\omega_i = 10000^{-i/n}$, stores it as a non-persistent buffer (so it is
# not in the `state_dict`), and in `forward` adds its first `seq_len` rows to an input of
# shape `[seq_len, batch, d_model]`, then applies dropout. An odd `d_model` fails with a
# shape error: labml computes one cosine for each even column, one more than there
# are odd columns to hold them. In `posenc`:
# `SinusoidalPositionalEncoding(d, dropout=..., batch_first=False)`.

# %% [markdown] lang="ja"
# ## labml と AllenNLP を posenc で再現する
#
# よく読まれている 2 つの PyTorch モジュールが、この位置エンコーディングを入力に足しています。
# ただし、両者が計算しているものは一致しません。
# 以下では、それぞれの計算を数行の torch で書き起こします。
# 演算と精度はライブラリにそろえます（どちらも周波数を float32 の `exp` で計算するので、そのとおりにします）。
# それを、同じ計算をするように設定した `posenc` のモジュールと比べます
# （ほかの実装との比較は「[実装ごとに違う正弦波位置エンコーディング](02-sinusoids-in-the-wild.ipynb)」の章で扱います）。
# 書き起こしはこのサイトで書いたもので、ライブラリのコードをそのまま使ったものではありません。
# 計算ではなくモジュールの側にあるもの（バッファやドロップアウト）は、それを再現した `posenc` のモジュールで確かめます。
#
# **式の外側の処理。** 論文は、$\sqrt{d_{\text{model}}}$ を掛けたトークンの埋め込みにこのエンコーディングを足し（§3.4）、
# その和にドロップアウトをかけます。ドロップアウト率は base モデルで 0.1 です（§5.4）。
# labml はこの処理を 2 つのクラスに分けています。
# `PositionalEncoding` はこのドロップアウト（`dropout_prob`）をかけますが、スケールはしません。
# `models.py` の `EmbeddingsWithPositionalEncoding` は、トークンを埋め込んで `math.sqrt(d_model)` を掛け、同じ表を足します。
# こちらはドロップアウトをかけず、表を通常のバッファとして登録するので、表は `state_dict` に保存されます。
# 論文では、正弦波の代わりに学習型位置埋め込みを使ったモデルも学習しています（表 3 の行 (E)）。
# 開発セットでパープレキシティ 4.92、BLEU 25.7 で、正弦波の 4.92 と 25.8 とほとんど変わりません。
# §3.5 はこれを「ほぼ同一の結果」と述べています。
#
# **labml**（`PositionalEncoding(d_model, dropout_prob, max_len=5000)`）は、
# 形状 `[max_len, 1, d_model]` の表をあらかじめ作ります。
# 配置はインターリーブ配置、周波数は論文どおりの $\omega_i = 10000^{-i/n}$ です。
# 表は永続化しないバッファとして登録されるので、`state_dict` には入りません。
# `forward` では、形状 `[seq_len, batch, d_model]` の入力に表の先頭 `seq_len` 行を足し、
# ドロップアウトをかけます。
# `d_model` が奇数だと形状エラーで止まります。labml は番号が偶数の列の数だけ余弦を計算しますが、
# それを入れる番号が奇数の列は 1 本少ないからです。
# `posenc` では `SinusoidalPositionalEncoding(d, dropout=..., batch_first=False)` です。

# %%
seq, batch, d = 10, 3, 16


def labml_like(x):  # labml's arithmetic without dropout; x: [seq, batch, d]
    seq, _, d = x.shape
    # frequencies exp(2i * -(ln 10000 / d)), in float32 as labml computes them
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    freq = torch.exp(two_i * -(math.log(10000.0) / d))
    angle = torch.arange(seq, dtype=torch.float32)[:, None] * freq  # [seq, d/2]
    # sin, cos, sin, ...
    table = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(seq, d)
    return x + table[:, None, :]  # broadcast over the batch axis


x = torch.randn(seq, batch, d)
# posenc's module, set up as labml's
module = SinusoidalPositionalEncoding(d, dropout=0.1, batch_first=False)
assert_close(module.eval()(x), labml_like(x))  # eval(): dropout off
# posenc, like labml (register_buffer(..., False)), keeps no table in the
# state_dict
assert len(module.state_dict()) == 0

# dropout on: each entry is zeroed or scaled by 1 / (1 - 0.1)
y = module.train()(x)
kept = y != 0
assert_close(y[kept], labml_like(x)[kept] / 0.9)
print(f"dropped {(~kept).float().mean():.2f} of the entries", end="")

# %% [markdown] lang="en"
# **AllenNLP** (`SinusoidalPositionalEncoding(min_timescale=1.0, max_timescale=1.0e4)`)
# takes `(batch_size, timesteps, hidden_dim)`, builds the table anew on every call (no
# maximum length, no cache, no dropout), uses the
# [concatenated layout](../docs/glossary.md#concatenated-layout) (all sines,
# then all cosines), spaces the timescales from 1 to 10000 with both ends included
# (the $n-1$ denominator, $\omega_i = 10000^{-i/(n-1)}$), and appends a zero column when
# `hidden_dim` is odd. In `posenc`:
# `SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)`.

# %% [markdown] lang="ja"
# **AllenNLP**（`SinusoidalPositionalEncoding(min_timescale=1.0, max_timescale=1.0e4)`）は、
# `(batch_size, timesteps, hidden_dim)` の入力を受け取り、呼び出しのたびに表を作り直します。
# 最大長、キャッシュ、ドロップアウトはいずれもありません。
# 配置は[連結配置](../docs/glossary.ja.md#concatenated-layout)（正弦をすべて並べてから余弦をすべて並べる）です。
# 時間スケールは 1 から 10000 まで、両端を含めて並べます。
# つまり $n-1$ で割る周波数 $\omega_i = 10000^{-i/(n-1)}$ です。
# `hidden_dim` が奇数なら、最後に値が 0 の列を 1 本加えます。
# `posenc` では `SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)` です。

# %%
sizes = (16, 15)  # an even and an odd d


def allennlp_like(x):  # AllenNLP's arithmetic; x: [batch, seq, d]
    _, seq, d = x.shape
    n = d // 2
    # inverse timescales exp(i * -(ln 10000 / (n - 1))), in float32
    step = math.log(10000.0) / (n - 1)
    inverse = torch.exp(torch.arange(n, dtype=torch.float32) * -step)
    position = torch.arange(seq, dtype=torch.float32)[:, None]
    angle = position * inverse  # [seq, n]
    # all sines, then all cosines
    table = torch.cat([angle.sin(), angle.cos()], dim=-1)
    # zero column if d is odd
    return x + torch.nn.functional.pad(table, (0, d - 2 * n))


for d in sizes:
    x = torch.randn(2, 10, d)
    allennlp = SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)
    assert_close(allennlp(x), allennlp_like(x))
    if d % 2:  # odd d: the last column stays zero
        assert not allennlp(torch.zeros(2, 10, d))[..., -1].any()

# %% [markdown] lang="en"
# How far apart are they? The layouts differ only by a fixed permutation of the
# columns: reordering the concatenated columns as $(0, n, 1, n+1, \dots)$ gives the
# interleaved table. (`posenc` builds both layouts from the same sines and
# cosines, so comparing its two layouts would hold by construction; the cell
# compares the reordered table with one written out entry by entry from the
# formula instead.) What remains is the denominator. The largest gap between
# the $n$ and $n-1$ versions, printed below for $d = 512$, grows with the position,
# because their angles $\omega_i p$ drift apart in proportion to $p$. Within the first
# 1024 positions it exceeds the whole amplitude of an entry: a model trained with one
# encoding gets a clearly different input from the other.

# %% [markdown] lang="ja"
# 両者はどれほど違うのでしょうか。配置の違いは列の固定の並べ替えだけで、
# 連結配置の列を $(0, n, 1, n+1, \dots)$ の順に並べ直すとインターリーブ配置の表に一致します。
# `posenc` は 2 つの配置を同じ正弦と余弦から作るので、その 2 つを比べても一致は作り方から当然です。
# そこでセルでは、並べ直した表を、式から成分ごとに書き出した表と比べます。
# 残る違いは分母です。$d = 512$ での $n$ 版と $n-1$ 版の差の最大値を下に示します。
# 角度 $\omega_i p$ が $p$ に比例して離れていくので、差は位置とともに大きくなり、
# 最初の 1024 位置のうちに成分の振幅を上回る大きさになります。
# 片方で学習したモデルにもう片方を与えると、入力ははっきり違うものになります。

# %%
d, n = 512, 256
pos = torch.arange(1024)
concat = sinusoidal(pos, d, layout="concat", endpoint=True)
# 0, n, 1, n+1, ...
order = torch.stack([torch.arange(n), torch.arange(n) + n], dim=-1).reshape(d)
# the interleaved n-1 table, entry by entry: sin, cos of p / 10000^(i/(n-1))
trig = (math.sin, math.cos)
by_formula = torch.tensor(
    [
        [f(p / 10000 ** (i / (n - 1))) for i in range(n) for f in trig]
        for p in range(0, 1024, 97)
    ]
)
assert_close(concat[::97, order], by_formula)

paper = sinusoidal(pos, d)  # n denominator (Vaswani et al., labml)
# n-1 denominator (tensor2tensor, AllenNLP, fairseq)
t2t = sinusoidal(pos, d, endpoint=True)
gap = (paper - t2t).abs()
lines = [
    f"max |difference| over p < {upto:4d}: {gap[:upto].max():.4f}"
    for upto in (64, 256, 1024)
]
print("\n".join(lines), end="")
assert gap.max() > 1

# %% [markdown] lang="en"
# | | labml | AllenNLP | `posenc` |
# |---|---|---|---|
# | layout | interleaved | concatenated | `layout="interleaved"` or `"concat"` |
# | frequencies | $\omega_i = 10000^{-i/n}$ | $\omega_i = 10000^{-i/(n-1)}$ | `endpoint=False` or `True` |
# | odd $d$ | shape error | zero last column | zero last column |
# | input axes | `[seq, batch, d]` | `[batch, seq, d]` | `batch_first=True` or `False` |
# | dropout | yes | no | `dropout=` |
# | maximum length | `max_len` (default 5000), table precomputed | none, recomputed every call | none, cache grows on demand |
# | table in `state_dict` | no | no (no table kept) | no |
# | angles computed in | float32 | float32 | float64 |
#
# The labml column is its `PositionalEncoding`. labml's
# `EmbeddingsWithPositionalEncoding` adds the same table to token embeddings
# multiplied by $\sqrt{d_{\text{model}}}$, with no dropout, and keeps the table
# in the `state_dict`.

# %% [markdown] lang="ja"
# | | labml | AllenNLP | `posenc` |
# |---|---|---|---|
# | 配置 | インターリーブ配置 | 連結配置 | `layout="interleaved"` または `"concat"` |
# | 周波数 | $\omega_i = 10000^{-i/n}$ | $\omega_i = 10000^{-i/(n-1)}$ | `endpoint=False` または `True` |
# | 奇数の $d$ | 形状エラー | 最後の列が 0 | 最後の列が 0 |
# | 入力の軸 | `[seq, batch, d]` | `[batch, seq, d]` | `batch_first=True` または `False` |
# | ドロップアウト | あり | なし | `dropout=` |
# | 最大長 | `max_len`（既定値 5000、表を事前計算） | なし（毎回計算し直す） | なし（キャッシュを必要に応じて拡張） |
# | `state_dict` に表を含むか | 含まない | 含まない（表を保持しない） | 含まない |
# | 角度の計算精度 | float32 | float32 | float64 |
#
# labml の列は `PositionalEncoding` のものです。
# labml の `EmbeddingsWithPositionalEncoding` は、$\sqrt{d_{\text{model}}}$ を掛けたトークンの埋め込みに同じ表を足し、
# ドロップアウトはかけず、表を `state_dict` に保存します。

# %% [markdown] lang="en"
# ## In practice
#
# **Positions are explicit.** `sinusoidal` takes a tensor of positions, not a length,
# so offsets need no special case. When a decoder generates with a
# [KV cache](../docs/glossary.md#kv-cache), the new
# token at position $t$ must get $PE(t)$, not $PE(0)$; the module takes an `offset` for
# this. The check below encodes a sequence one token at a time and compares with
# encoding it whole.
#
# **Angles in float64.** The angle $\omega_i p$ is large when $p$ is, and float32
# keeps 24 significant bits: rounding a number $x$ to float32, $\mathrm{fl}(x)$,
# moves it by at most half the spacing of float32 numbers there, which is at most
# $u\,|x|$ with $u = 2^{-24}$ (near $2^{20}$ the spacing is $2^{-3}$). A float32
# angle is rounded twice: the frequency becomes $\hat\omega_i = \mathrm{fl}(\omega_i)$,
# and the product $p\,\hat\omega_i$ is rounded again ($p$ itself is exact below
# $2^{24}$). With $\hat\omega_i = \omega_i(1+\delta_1)$ and
# $\mathrm{fl}(p\,\hat\omega_i) = p\,\hat\omega_i(1+\delta_2)$, where
# $|\delta_1|, |\delta_2| \le u$,
# $$\big|\mathrm{fl}(p\,\hat\omega_i) - p\,\omega_i\big| = p\,\omega_i\,|\delta_1 + \delta_2 + \delta_1\delta_2| \le (2u + u^2)\,p\,\omega_i$$
# about $2^{-3}$ near $p = 2^{20}$ for the fastest pairs. The sine passes the
# angle error on at most unchanged, since $|\sin a - \sin b| \le |a - b|$ (to first
# order it scales it by $|\cos a|$), and adds its own float32 rounding. Pair 0 is
# the exception: $\omega_0 = 1$ and $p$ are exact, so its angle has no error at all.
#
# That bound assumes $\omega_i$ rounded once. The two terms can also be bounded
# one by one, with half the actual spacing at the rounded angle plus
# $p\,|\hat\omega_i - \omega_i|$ for the actual $\hat\omega_i$; this also covers
# labml, which computes its frequencies in float32 through `exp` and gets them
# less accurately than one rounding (up to about $9.5u$ relative for $d = 512$).
# With those frequencies the one-rounding bound fails: near $2^{20}$ labml's
# angles exceed $(2u + u^2)\,p\,\omega_i$ in more than a third of the entries (37%,
# printed below), and what holds instead is about $10.5u\,p\,\omega_i$ ($9.5u$ for the
# frequency, $u$ for the product). `posenc` forms the angles in float64 and rounds
# only the result, an error of at most half a float32 spacing below 1, that is
# $2^{-25}$. The cell below measures all of this around $p = 2^{20}$ against
# float64 angles and checks every entry against its bound.
#
# **The errors are deterministic.** A float32 table is off, but the same every
# time: a model trained and run with one implementation sees the same vectors
# and learns them as they are. The errors matter when implementations are mixed
# (a checkpoint moved to a library that forms its angles differently, a fused
# kernel), and for the exactness of $PE(p+k) = M_k\,PE(p)$.

# %% [markdown] lang="ja"
# ## 実際に使うときの注意
#
# **位置は明示的に渡します。** `sinusoidal` は長さではなく位置のテンソルを受け取るので、
# 位置が 0 から始まらない場合（オフセット）にも特別な扱いは要りません。
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使ってデコーダが 1 トークンずつ生成するとき、位置 $t$ の新しいトークンには
# $PE(0)$ ではなく $PE(t)$ を足す必要があります。モジュールはそのために引数 `offset` を受け取ります。
# 下の確認では、系列を 1 トークンずつエンコードした結果と、まとめてエンコードした結果を比べます。
#
# **角度は float64 で計算します。** $p$ が大きいと角度 $\omega_i p$ も大きくなります。一方、float32 の有効桁は 24 ビットしかありません。
# 数 $x$ を float32 に丸めて $\mathrm{fl}(x)$ にしても、値が動くのはその付近の float32 の数の間隔の半分までで、
# これは $u = 2^{-24}$ として $u\,|x|$ 以下です（$2^{20}$ 付近では間隔は $2^{-3}$ です）。
# float32 の角度は 2 回丸められます。まず周波数が $\hat\omega_i = \mathrm{fl}(\omega_i)$ になり、
# 次に積 $p\,\hat\omega_i$ が丸められます（$p$ そのものは $2^{24}$ 未満なら厳密です）。
# $|\delta_1|, |\delta_2| \le u$ として $\hat\omega_i = \omega_i(1+\delta_1)$、
# $\mathrm{fl}(p\,\hat\omega_i) = p\,\hat\omega_i(1+\delta_2)$ と書くと、次が成り立ちます。
# $$\big|\mathrm{fl}(p\,\hat\omega_i) - p\,\omega_i\big| = p\,\omega_i\,|\delta_1 + \delta_2 + \delta_1\delta_2| \le (2u + u^2)\,p\,\omega_i$$
# $p = 2^{20}$ 付近の速いペアでは、これは約 $2^{-3}$ です。
# $|\sin a - \sin b| \le |a - b|$ なので、角度の誤差は正弦を通しても大きくなりません（1 次の近似では $|\cos a|$ 倍になります）。
# ただし、正弦の計算そのものにも float32 の丸めが加わります。
# 例外はペア 0 です。$\omega_0 = 1$ と $p$ は厳密なので、その角度には誤差がまったくありません。
#
# この上界は、$\omega_i$ を 1 回だけ丸めることを前提にしています。
# 2 つの項を別々に抑えることもできます。丸めた角度での実際の間隔の半分と、
# 実際の $\hat\omega_i$ を使った $p\,|\hat\omega_i - \omega_i|$ の和を上界にするのです。
# この形なら labml にも当てはまります。labml は周波数を float32 の `exp` で計算するので、
# 1 回の丸めより精度が落ちます（$d = 512$ では相対誤差が最大で約 $9.5u$）。
# この周波数では、1 回の丸めを前提にした上界は成り立ちません。
# $2^{20}$ 付近では、labml の角度は成分の 37%（3 分の 1 強）で $(2u + u^2)\,p\,\omega_i$ を上回ります（下の出力）。
# 代わりに成り立つのは約 $10.5u\,p\,\omega_i$ です（周波数の分が $9.5u$、積の分が $u$）。
# `posenc` は角度を float64 で作り、最後の結果だけを丸めます。その誤差は、絶対値が 1 未満の範囲での float32 の間隔の半分、
# つまり $2^{-25}$ 以下です。
# 下のセルでは、$p = 2^{20}$ 付近でこれらを float64 の角度と比べて測り、すべての成分をその上界と照らし合わせます。
#
# **誤差は決定的です。** float32 の表はずれていますが、毎回同じだけずれます。
# 1 つの実装で学習して動かすモデルはいつも同じベクトルを見るので、それをそのまま学習します。
# 誤差が問題になるのは、実装を混ぜるとき（角度の作り方が違うライブラリへチェックポイントを移すときや、融合カーネルを使うとき）と、
# $PE(p+k) = M_k\,PE(p)$ を厳密に成り立たせたいときです。

# %%
module = SinusoidalPositionalEncoding(32)
x = torch.randn(2, 7, 32)
for t in range(7):  # one token at a time at offset t, as with a KV cache
    assert_close(module(x[:, t : t + 1], offset=t), module(x)[:, t : t + 1])

big = torch.tensor(2.0**20)  # float32 numbers in [2^20, 2^21) are 2^-3 apart
assert torch.nextafter(big, torch.tensor(math.inf)) - big == 2**-3

u = 2.0**-24  # float32: |fl(x) - x| <= u |x|
p = torch.arange(2**20 - 64, 2**20 + 64)  # exact in float32 (below 2^24)
omega = 10000.0 ** (-torch.arange(256).double() / 256)  # d = 512
labml_omega = torch.exp(  # labml's frequencies, computed in float32
    torch.arange(0, 512, 2, dtype=torch.float32) * -(math.log(10000.0) / 512)
)
reference = torch.sin(p.double()[:, None] * omega)  # float64 angles


def float32_error(omega_hat):
    """|sin(fl(p w_hat)) - sin(p w)|, the angle error |fl(p w_hat) - p w|
    and the two rounding terms, each [p, i]."""
    angle = p.float()[:, None] * omega_hat  # fl(p w_hat), as labml, AllenNLP
    err = (torch.sin(angle).double() - reference).abs()
    angle_err = (angle.double() - p.double()[:, None] * omega).abs()
    half_spacing = 2.0 ** (torch.floor(torch.log2(angle.double())) - 24)
    drift = p.double()[:, None] * (omega_hat.double() - omega).abs()
    return err, angle_err, half_spacing + drift


slack = 2**-23 + 1e-9  # the float32 sine's own rounding; float64's
err_fl, angle_fl, terms_fl = float32_error(omega.float())  # rounded once
err_lab, angle_lab, terms_lab = float32_error(labml_omega)
general = (2 * u + u**2) * p.double()[:, None] * omega  # (2u + u^2) p w_i
assert (err_fl <= general + slack).all()
assert (err_fl <= terms_fl + slack).all() and (
    err_lab <= terms_lab + slack
).all()
# labml's angles break the one-rounding bound, but stay below 10.5u p w_i
assert (angle_fl <= general + 1e-9).all()
above = float((angle_lab > general + 1e-9).double().mean())
assert 1 / 3 < above < 0.4  # more than a third
assert (angle_lab <= 10.5 * u * p.double()[:, None] * omega + 1e-9).all()
assert err_fl[:, 0].max() <= slack  # pair 0: no angle error
labml_off = float(((labml_omega.double() - omega) / omega).abs().max() / u)
assert 9 < labml_off < 10  # labml's w_i: up to about 9.5u relative
posenc_sin = sinusoidal(p, 512)[:, 0::2].double()
err_posenc = (posenc_sin - reference).abs().max()
assert err_posenc <= 2**-25 + 1e-9  # half a float32 spacing below 1
print(
    f"float32, w rounded once: error {err_fl.max():.1e}\n"
    f"  bounds: two terms {terms_fl.max():.1e}, "
    f"(2u + u^2) p w {general.max():.1e}\n"
    f"float32, labml's w ({labml_off:.1f}u off): error {err_lab.max():.1e}, "
    f"bound {terms_lab.max():.1e}\n"
    f"  angles above (2u + u^2) p w: {above:.0%} of the entries\n"
    f"float32, pair 0 (w_0 = 1): error {err_fl[:, 0].max():.1e}\n"
    f"posenc, float64 angles: error {err_posenc:.1e}, bound {2**-25:.1e}",
    end="",
)

# %% [markdown] lang="en"
# ## What to remember
#
# - $PE(p)$ holds $\sin(\omega_i p)$ and $\cos(\omega_i p)$ for $n = d/2$
#   frequencies $\omega_i = 10000^{-i/n}$; the wavelengths grow geometrically from
#   $2\pi$ and stop one ratio short of $10000 \cdot 2\pi$. Dividing by $n - 1$
#   (tensor2tensor, fairseq, AllenNLP) gives a different encoding.
# - A shift is a rotation: $PE(p+k) = M_k\,PE(p)$ with blocks $B(k\omega_i) = R(-k\omega_i)$.
#   It needs both the sine and the cosine of each pair.
# - $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ depends only on the offset
#   and is symmetric. Inside attention the weights can undo both: random weights
#   mix in the absolute positions, $W_K = M_k$ tells before from after.
# - Float32 angles with $\omega_i$ rounded once carry an error up to
#   $(2u + u^2)\,p\,\omega_i$, about $2^{-3}$ near $p = 2^{20}$ (none for pair 0);
#   with labml's `exp`-computed $\omega_i$, up to about $10.5u\,p\,\omega_i$. The
#   errors are deterministic; they matter when implementations are mixed.
#   `posenc` forms the angles in float64.

# %% [markdown] lang="ja"
# ## まとめ
#
# - $PE(p)$ は、$n = d/2$ 個の周波数 $\omega_i = 10000^{-i/n}$ について $\sin(\omega_i p)$ と $\cos(\omega_i p)$ を並べたものです。
#   波長は $2\pi$ から等比数列で伸び、$10000 \cdot 2\pi$ の公比 1 回分手前で止まります。
#   $n - 1$ で割る流儀（tensor2tensor、fairseq、AllenNLP）は別のエンコーディングになります。
# - ずらすことは回転することです。$PE(p+k) = M_k\,PE(p)$ で、ブロックは $B(k\omega_i) = R(-k\omega_i)$ です。
#   これには各ペアの正弦と余弦の両方が必要です。
# - $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ は相対位置だけで決まり、対称です。
#   アテンションの中では、重みによってはこの両方が崩れます。ランダムな重みでは絶対位置が混ざり、$W_K = M_k$ なら前後を区別できます。
# - $\omega_i$ を 1 回だけ丸めた float32 の角度には最大 $(2u + u^2)\,p\,\omega_i$ の誤差が乗り、
#   $p = 2^{20}$ 付近では約 $2^{-3}$ です（ペア 0 には誤差がありません）。
#   labml のように $\omega_i$ を `exp` で計算すると、最大で約 $10.5u\,p\,\omega_i$ になります。
#   誤差は決定的で、問題になるのは実装を混ぜるときです。`posenc` は角度を float64 で作ります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Write the matrix that maps $PE(p)$ to $PE(p+k)$ in the concatenated layout. (It is
#    $M_k$ with rows and columns permuted.) Check it against
#    `sinusoidal(..., layout="concat")` for a few $p$ and $k$.
# 2. Plot $PE(p)\cdot PE(q)$ against $p-q$ for `base=100`, `base=10000` and `base=1e6`.
#    Explain, from the wavelengths, how the base moves the ripples.
# 3. labml computes its table in float32 up to `max_len=5000`. For $d = 512$, find the
#    smallest position at which float32 angles make an error above `1e-3` in some
#    entry. Is labml's default table affected?
# 4. Section 3.5 of the paper also reports that learned positional embeddings gave
#    nearly identical results (Table 3, row (E): 4.92 perplexity and 25.7 BLEU on
#    the development set, against 4.92 and 25.8). Using the dot-product formula,
#    name one property that
#    the sinusoidal encoding has for free and a learned table has only if training
#    produces it.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 連結配置で $PE(p)$ を $PE(p+k)$ に移す行列を書いてください
#    （$M_k$ の行と列を並べ替えたものです）。
#    いくつかの $p$ と $k$ について `sinusoidal(..., layout="concat")` で確かめてください。
# 2. `base=100`、`base=10000`、`base=1e6` のそれぞれで、$PE(p)\cdot PE(q)$ を $p-q$ に対して描いてください。
#    底によって波打ちの位置がどう動くかを、波長から説明してください。
# 3. labml は `max_len=5000` までの表を float32 で計算します。
#    $d = 512$ のとき、float32 の角度がどこかの成分で `1e-3` を超える誤差を生む最小の位置を求めてください。
#    labml の既定の表は影響を受けるでしょうか。
# 4. 論文の 3.5 節は、学習型位置埋め込みでもほぼ同じ結果になったと報告しています。
#    表 3 の行 (E) では、開発セットでパープレキシティ 4.92、BLEU 25.7 で、正弦波では 4.92 と 25.8 です。
#    内積の式を使って、正弦波位置エンコーディングには最初から備わっていて、
#    学習型の表では学習がそう仕上げた場合にしか成り立たない性質を 1 つ挙げてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** In the concatenated layout the sines of all pairs come first and
# the cosines after them. Write $C_k = \mathrm{diag}\big(\cos(k\omega_0), \dots, \cos(k\omega_{n-1})\big)$
# and $S_k = \mathrm{diag}\big(\sin(k\omega_0), \dots, \sin(k\omega_{n-1})\big)$. The two
# angle-addition formulas, applied to every pair at once, read
# $$PE^{\mathrm{cat}}(p+k) = \begin{pmatrix} C_k & S_k \\ -S_k & C_k \end{pmatrix} PE^{\mathrm{cat}}(p)$$
# The top half gives $\sin(\theta+\phi) = \cos\phi\,\sin\theta + \sin\phi\,\cos\theta$ for
# each pair, the bottom half $\cos(\theta+\phi) = -\sin\phi\,\sin\theta + \cos\phi\,\cos\theta$.
# It is $M_k$ with its rows and columns reordered by the layout permutation $P$ of
# [*Sinusoids in the wild*](02-sinusoids-in-the-wild.ipynb#1-interleaved-or-concatenated-one-fixed-permutation):
# $P M_k P^\top$. The cell checks both against `posenc`.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 連結配置では、すべてのペアの正弦が先に並び、そのあとに余弦が並びます。
# $C_k = \mathrm{diag}\big(\cos(k\omega_0), \dots, \cos(k\omega_{n-1})\big)$、
# $S_k = \mathrm{diag}\big(\sin(k\omega_0), \dots, \sin(k\omega_{n-1})\big)$ と置きます。
# 2 つの加法定理をすべてのペアへ一度に当てはめると、次のようになります。
# $$PE^{\mathrm{cat}}(p+k) = \begin{pmatrix} C_k & S_k \\ -S_k & C_k \end{pmatrix} PE^{\mathrm{cat}}(p)$$
# 上半分が各ペアの $\sin(\theta+\phi) = \cos\phi\,\sin\theta + \sin\phi\,\cos\theta$、
# 下半分が $\cos(\theta+\phi) = -\sin\phi\,\sin\theta + \cos\phi\,\cos\theta$ です。
# これは $M_k$ の行と列を、「[実装ごとに違う正弦波位置エンコーディング](02-sinusoids-in-the-wild.ipynb#1-インターリーブ配置と連結配置違いは列の並べ替えだけ)」の
# 配置の置換 $P$ で並べ替えた $P M_k P^\top$ です。次のセルで、両方を `posenc` と照らし合わせます。

# %% tags=["solution"]
d, n = 16, 8
omega = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / n)
perm = torch.tensor([2 * c if c < n else 2 * (c - n) + 1 for c in range(d)])
P = torch.eye(d, dtype=torch.float64)[
    perm
]  # concat column c = int. column perm[c]
p = torch.tensor([0, 1, 7, 100, 999])
for k in (-7, 1, 3, 50, 1000):
    c, s = torch.diag(torch.cos(k * omega)), torch.diag(torch.sin(k * omega))
    m_cat = torch.cat([torch.cat([c, s], 1), torch.cat([-s, c], 1)], 0)
    pe_cat = sinusoidal(p, d, layout="concat", dtype=torch.float64)
    pe_cat_k = sinusoidal(p + k, d, layout="concat", dtype=torch.float64)
    assert_close(pe_cat @ m_cat.T, pe_cat_k)  # PE_cat(p+k) = M_cat PE_cat(p)
    assert_close(m_cat, P @ shift_matrix(k) @ P.T)  # M_cat = P M_k P^T

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The dot product at distance $r = p - q$ is
# $\sum_i \cos(2\pi r/\lambda_i)$: a pair whose wavelength $\lambda_i$ is much longer
# than $r$ still contributes nearly $1$, a pair whose wavelength is shorter has
# turned many times and contributes a value that averages out. The fastest pair
# always has $\lambda_0 = 2\pi$, whatever the base; the base sets the slow end,
# $\lambda_{n-1} = 2\pi\,b^{(n-1)/n}$, and with it how many pairs stay in step at a
# given distance. A larger base therefore keeps the curve high for longer, and its
# fall, with the ripples the fast pairs add, spreads over a wider range of
# distances: for $d = 512$ the curve first drops below half its peak at distance 5
# for base 100, 54 for base 10000 and 361 for base $10^6$. For base 100 every
# wavelength is below 618 positions, so past a few hundred positions no pair is in
# step any more and the curve only ripples around zero: within the plotted
# distances it goes down to −26.7, and over the first 20000 to −34.5, at distance
# 18803 (printed); for
# base $10^6$ it stays above 38 up to distance 20000.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 距離 $r = p - q$ での内積は $\sum_i \cos(2\pi r/\lambda_i)$ です。
# 波長 $\lambda_i$ が $r$ よりずっと長いペアの項はまだほぼ $1$ です。波長が短いペアはすでに何周もしているので、その項は平均すると打ち消し合います。
# 最も速いペアは、底によらずいつも $\lambda_0 = 2\pi$ です。
# 底が決めるのは遅い側の端 $\lambda_{n-1} = 2\pi\,b^{(n-1)/n}$ で、それによって、ある距離で位相がそろったままのペアの数が決まります。
# したがって底が大きいほど、曲線は遠い距離まで高い値を保ち、速いペアによる波打ちを伴いながら、より広い距離にわたってゆっくり下がります。
# $d = 512$ では、曲線が初めてピークの半分を下回る距離は、底 100 で 5、底 10000 で 54、底 $10^6$ で 361 です。
# 底 100 ではすべての波長が 618 位置未満なので、数百位置を過ぎると位相のそろったペアはもうありません。
# 曲線はゼロのまわりで波打つだけになります。描いた範囲の中での最小値は −26.7 で、
# 最初の 20000 位置まで広げると距離 18803 で −34.5 まで下がります（下の出力）。
# 底 $10^6$ では、距離 20000 まで 38 より上にとどまります。

# %% alt={"en": ["PE(p)·PE(q) for d = 512 against the distance p − q from 0 to 2000 for bases 100, 10000 and 10^6: all start at 256; base 100 falls fastest and then ripples around zero, base 10000 falls more slowly, base 10^6 stays highest."], "ja": ["d = 512 の PE(p)·PE(q) を距離 p − q（0〜2000）に対して、底 100、10000、10^6 で描いた図。どれも 256 から始まり、底 100 は最も速く下がってゼロのまわりで波打ち、底 10000 はよりゆっくり下がり、底 10^6 は最も高いままです。"]} tags=["solution"]
d, n = 512, 256
r = torch.arange(20001, dtype=torch.float64)  # the distance p - q
curves = {}
for b in (100.0, 1e4, 1e6):
    code = sinusoidal(torch.arange(20001), d, base=b, dtype=torch.float64)
    curves[b] = code @ code[0]  # PE(r) . PE(0), a function of r only
    lam = 2 * math.pi * b ** (torch.arange(n, dtype=torch.float64) / n)
    assert_close(curves[b], torch.cos(2 * math.pi * r[:, None] / lam).sum(-1))
half = {b: int((f < n / 2).nonzero()[0]) for b, f in curves.items()}
assert list(half.values()) == [5, 54, 361]  # later for a larger base
assert 2 * math.pi * 100 ** ((n - 1) / n) < 618
low = curves[100.0]
assert abs(low[1000:].mean()) < 1 and round(float(low[:2001].min()), 1) == -26.7
assert round(float(low.min()), 1) == -34.5 and int(low.argmin()) == 18803
assert curves[1e6].min() > 38
print(
    f"base 100: min {low[:2001].min():.1f} for distances 0..2000, "
    f"{low.min():.1f} at {int(low.argmin())} (up to 20000)",
    end="",
)

fig, ax = plt.subplots(figsize=(6.4, 3.2))
for b, f in curves.items():
    ax.plot(r[:2001], f[:2001], lw=1, label=f"$b = 10^{round(math.log10(b))}$")
ax.axhline(0, color="0.5", lw=0.8)
ax.set(xlabel="$p-q$", ylabel=r"$PE(p)\cdot PE(q)$", xlim=(0, 2000))
ax.legend()
plt.show()

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** The bound of the section
# [In practice](#in-practice) answers most of it without a search. With
# $\omega_i$ rounded once, the angle error stays below $(2u + u^2)\,p\,\omega_i$, which
# is at most $2^{-23}p$ for every pair $i \ge 1$ (pair 0, with $\omega_0 = 1$, has no
# error at all), so no entry can be off by more than `1e-3` (plus the sine's own
# rounding) before $p \approx 8400$. labml's own $\hat\omega_i$ are less accurate,
# so the cell uses the
# two-term bound with its actual $|\hat\omega_i - \omega_i|$ over its 5000 rows. It
# is 3.9e-04, and the largest measured error there is 3.9e-04 too (the bound is
# nearly reached): the default table is not affected. A search over labml's
# formula in float32 finds the first entry above `1e-3` at $p = 16990$, where the
# fastest pairs' angles lie in $[2^{14}, 2^{15})$ and the half spacing alone is
# $2^{-10} \approx 9.8 \cdot 10^{-4}$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 大部分は、探索しなくても「[実際に使うときの注意](#実際に使うときの注意)」の節の上界から分かります。
# $\omega_i$ を 1 回だけ丸めた場合、角度の誤差は $(2u + u^2)\,p\,\omega_i$ 未満です。
# これは $i \ge 1$ のどのペアでも $2^{-23}p$ 以下です（$\omega_0 = 1$ のペア 0 には誤差がまったくありません）。
# そのため $p \approx 8400$ より前では、どの成分の誤差も、`1e-3` に正弦自身の丸めを加えた値を超えることはありません。
# labml の $\hat\omega_i$ はそれより精度が低いので、セルでは実際の $|\hat\omega_i - \omega_i|$ を使った 2 項の上界を、
# 既定の 5000 行で計算します。上界は 3.9e-04 で、実際に測った最大の誤差も 3.9e-04 です（上界にほぼ達しています）。
# したがって、既定の表は影響を受けません。
# labml の式を float32 で計算して探すと、`1e-3` を超える最初の成分は $p = 16990$ にあります。
# そこでは速いペアの角度が $[2^{14}, 2^{15})$ に入り、間隔の半分だけで $2^{-10} \approx 9.8 \cdot 10^{-4}$ になります。

# %% tags=["solution"]
d = 512
omega = 10000.0 ** (-torch.arange(256).double() / 256)
labml_omega = torch.exp(  # labml's div_term
    torch.arange(0, d, 2, dtype=torch.float32) * -(math.log(10000.0) / d)
)
pos = torch.arange(20000)
angle32 = pos.float()[:, None] * labml_omega  # labml: position * div_term
exact = pos.double()[:, None] * omega
table32 = torch.stack([angle32.sin(), angle32.cos()], -1).flatten(-2)
table64 = torch.stack([exact.sin(), exact.cos()], -1).flatten(-2)
err = (table32.double() - table64).abs().amax(-1)  # per position
first = int((err > 1e-3).nonzero()[0])

# the two-term bound with labml's actual frequencies, rows 1..4999
half_spacing = 2.0 ** (torch.floor(torch.log2(angle32[1:5000].double())) - 24)
drift = pos[1:5000].double()[:, None] * (labml_omega.double() - omega).abs()
bound_5000 = float((half_spacing + drift).max()) + 2**-23
assert bound_5000 < 1e-3 and err[:5000].max() <= bound_5000
assert 1e-3 / 2**-23 > 8000 and first == 16990
# (2u + u^2) w_i <= 2^-23 for i >= 1, not for pair 0 (w_0 = 1, exact angle)
u = 2.0**-24
assert ((2 * u + u**2) * omega[1:] <= 2**-23).all()
assert (2 * u + u**2) * omega[0] > 2**-23
print(
    f"labml, d = 512: first error above 1e-3 at p = {first}\n"
    f"rows below 5000: error {err[:5000].max():.1e}, bound {bound_5000:.1e}",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** The dot product $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$
# depends only on the offset $p - q$: the Gram matrix is constant along its
# diagonals, for every pair of positions, including positions never seen in
# training. (Equivalently, $PE(p+k) = M_k\,PE(p)$ for one orthogonal matrix
# per offset; a shift map that is not orthogonal does not make the Gram matrix
# constant along its diagonals, as $PE(p) = 2^p$ shows.) A
# learned table gets this only if training shapes it so; at initialisation it has
# none of it. The cell compares the sinusoids with a table drawn as GPT-2 draws
# its own ($N(0, 0.01^2)$, as in the chapter
# [*Learned absolute embeddings*](03-learned-embeddings.ipynb)): along a diagonal
# its Gram matrix spreads about as much as over the whole matrix, and no linear
# map sends row $p$ to row $p + 1$ (the best one leaves most of the row
# unexplained).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** 内積 $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ は相対位置 $p - q$ だけで決まります。
# グラム行列は、学習で一度も見なかった位置を含むどの位置の組についても、対角線に沿って一定です。
# 同じことですが、相対位置ごとに 1 つの直交行列で $PE(p+k) = M_k\,PE(p)$ とも書けます。
# 直交でない行列でずらせるだけでは、グラム行列は対角線に沿って一定になりません（$PE(p) = 2^p$ がその例です）。
# 学習型の表がこの性質を持つのは、学習がそう仕上げた場合だけで、初期化の時点ではまったく持っていません。
# 次のセルでは、正弦波と、GPT-2 と同じように引いた表
# （「[学習型位置埋め込みとスケール付き正弦波](03-learned-embeddings.ipynb)」の章と同じ $N(0, 0.01^2)$）を比べます。
# 引いた表のグラム行列は、1 本の対角線に沿っても、行列全体とほぼ同じくらいばらつきます。
# また、行 $p$ を行 $p + 1$ に移す線形写像もありません（最良のものでも、行の大部分を説明できません）。

# %% tags=["solution"]
gen = torch.Generator().manual_seed(0)
d, rows = 64, 512
sines = sinusoidal(torch.arange(rows), d, dtype=torch.float64)
drawn = 0.01 * torch.randn(rows, d, dtype=torch.float64, generator=gen)


def diagonal_spread(table):
    """Spread of the Gram matrix along diagonal 5, relative to the spread
    of all its off-diagonal entries (0: constant along diagonals)."""
    gram = table @ table.T
    off_diagonal = gram[~torch.eye(len(gram), dtype=torch.bool)]
    return float(torch.diagonal(gram, 5).std() / off_diagonal.std())


def shift_fit(table):
    """Relative error of the best linear map from row p to row p + 1."""
    fit = torch.linalg.lstsq(table[:-1], table[1:], driver="gelsd").solution
    return float((table[:-1] @ fit - table[1:]).norm() / table[1:].norm())


assert diagonal_spread(sines) < 1e-12 and shift_fit(sines) < 1e-9
assert diagonal_spread(drawn) > 0.8 and shift_fit(drawn) > 0.9
print(
    f"sinusoidal: spread {diagonal_spread(sines):.0e}, "
    f"shift fit {shift_fit(sines):.0e}\n"
    f"drawn:      spread {diagonal_spread(drawn):.2f}, "
    f"shift fit {shift_fit(drawn):.2f}",
    end="",
)

# %% [markdown] lang="en"
# ## References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - labml.ai, annotated implementation of fixed positional encodings.
#   <https://nn.labml.ai/transformers/positional_encoding.html>
# - labml.ai, `EmbeddingsWithPositionalEncoding` in `labml_nn/transformers/models.py`.
#   <https://github.com/labmlai/annotated_deep_learning_paper_implementations>
# - AllenNLP, `SinusoidalPositionalEncoding`.
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - tensor2tensor, `get_timing_signal_1d` in `tensor2tensor/layers/common_attention.py`.
#   <https://github.com/tensorflow/tensor2tensor>
# - fairseq, `SinusoidalPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - Kazemnejad, A. (2019). *Transformer Architecture: The Positional Encoding*.
#   <https://kazemnejad.com/blog/transformer_architecture_positional_encoding/>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - labml.ai, annotated implementation of fixed positional encodings.
#   <https://nn.labml.ai/transformers/positional_encoding.html>
#   （固定の位置エンコーディングの注釈付き実装。）
# - labml.ai, `EmbeddingsWithPositionalEncoding` in `labml_nn/transformers/models.py`.
#   <https://github.com/labmlai/annotated_deep_learning_paper_implementations>
# - AllenNLP, `SinusoidalPositionalEncoding`.
#   <https://github.com/allenai/allennlp/blob/main/allennlp/modules/transformer/positional_encoding.py>
# - tensor2tensor, `get_timing_signal_1d` in `tensor2tensor/layers/common_attention.py`.
#   <https://github.com/tensorflow/tensor2tensor>
# - fairseq, `SinusoidalPositionalEmbedding`.
#   <https://github.com/facebookresearch/fairseq/blob/main/fairseq/modules/sinusoidal_positional_embedding.py>
# - Kazemnejad, A. (2019). *Transformer Architecture: The Positional Encoding*.
#   <https://kazemnejad.com/blog/transformer_architecture_positional_encoding/>
