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
# The Transformer adds to each token a fixed vector: the sines and cosines of its
# position at $n = d/2$ frequencies, spread geometrically from $1$ down to about
# $1/10000$ radian per position.
# Read each sine–cosine pair as the hand of a clock: the hands turn at different
# speeds, like the digits of a smooth binary counter, and the base $10000$ sets how
# slowly the last one turns.
# Two exact properties follow, derived and checked here: moving $k$ positions
# rotates every hand, $PE(p+k) = M_k\,PE(p)$, and the dot product of two codes
# depends only on their distance.

# %% [markdown] lang="ja"
# # 正弦波位置エンコーディング
#
# Transformer は各トークンに固定のベクトルを足します。その成分は、位置に $n = d/2$ 個の周波数を掛けた角度の正弦と余弦です。
# 周波数は位置 1 つあたり $1$ ラジアンから約 $1/10000$ ラジアンまで等比的に並びます。
# 正弦と余弦のペアは、時計の針とみなせます。針はそれぞれ違う速さで回り、滑らかな 2 進カウンタの桁のように位置を数えます。
# 最も遅い針がどれだけゆっくり回るかを決めるのが、底 $10000$ です。
# ここから、厳密に成り立つ性質が 2 つ出てきます。位置が $k$ 進むとすべての針が回ること（$PE(p+k) = M_k\,PE(p)$）と、
# 2 つの符号の内積が距離だけで決まることです。この章ではどちらも導出し、数値で確かめます。

# %% tags=["setup"]
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import SinusoidalPositionalEncoding, sinusoidal
from posenc_lab.plotting import INK, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
F64 = torch.float64

# %% [markdown] lang="en"
# ## The formula
#
# Self-attention does not see order
# ([*Why attention needs positions*](00-why-positions.ipynb)), so before the first
# layer Vaswani et al. (2017, §3.5) add to the token at position $p$ a vector
# $PE(p)$ of the model's width
# $d$ (the paper's $d_{\text{model}}$; take it even for now). Its entries come in
# $n = d/2$ pairs, one for each frequency index $i = 0, 1, \dots, n-1$:
# $$PE_{(p,2i)} = \sin\left(p/10000^{2i/d}\right), \qquad PE_{(p,2i+1)} = \cos\left(p/10000^{2i/d}\right)$$
# With the frequencies
# $$\omega_i = 10000^{-2i/d} = 10000^{-i/n}$$
# the pair reads $PE_{(p,2i)} = \sin(\omega_i p)$ and $PE_{(p,2i+1)} = \cos(\omega_i p)$:
# the sine and the cosine of the same angle side by side, the
# [interleaved layout](../docs/glossary.md#interleaved-layout). The symbols follow
# the [notation page](../docs/notation.md). `posenc.sinusoidal(positions, d)`
# computes the table; below are its first four rows for $d = 8$. Row $p = 0$ is
# $(0, 1, 0, 1, \dots)$. Column $0$ is simply $\sin p$, since $\omega_0 = 1$; the later
# columns change more and more slowly.

# %% [markdown] lang="ja"
# ## 式
#
# セルフアテンションは順序を見ていません（[「アテンションに位置が必要な理由」](00-why-positions.ipynb)の章）。
# そこで Vaswani ら（2017、§3.5）は、最初の層の前に、位置 $p$ のトークンへベクトル $PE(p)$ を足します。
# このベクトルの次元数は、モデルの次元数と同じ $d$ です（論文の $d_{\text{model}}$ で、ここではひとまず偶数とします）。成分は $n = d/2$ 個のペアになっていて、
# 周波数の番号 $i = 0, 1, \dots, n-1$ ごとに 1 つです。
# $$PE_{(p,2i)} = \sin\left(p/10000^{2i/d}\right), \qquad PE_{(p,2i+1)} = \cos\left(p/10000^{2i/d}\right)$$
# 周波数を
# $$\omega_i = 10000^{-2i/d} = 10000^{-i/n}$$
# と書くと、ペアは $PE_{(p,2i)} = \sin(\omega_i p)$ と $PE_{(p,2i+1)} = \cos(\omega_i p)$ になります。
# 同じ角度の正弦と余弦が隣り合うこの並べ方を[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)と呼びます。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。
# `posenc.sinusoidal(positions, d)` がこの表を計算します。下は $d = 8$ の最初の 4 行です。
# 行 $p = 0$ は $(0, 1, 0, 1, \dots)$ です。
# $\omega_0 = 1$ なので列 $0$ は単純に $\sin p$ で、右の列ほど変化がゆっくりになります。

# %%
sinusoidal(torch.arange(4), 8)

# %% tags=["check"] summary={"en": "posenc's table is the paper's formula, entry by entry; row 0 is (0, 1, 0, 1, ...) and column 0 is sin p", "ja": "posenc の表は成分ごとに論文の式と一致し、行 0 は (0, 1, 0, 1, ...)、列 0 は sin p です"}
d, n = 8, 4
table = sinusoidal(torch.arange(6), d, dtype=F64)  # rows p = 0..5
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
assert_close(table, torch.tensor(by_hand, dtype=F64))
assert not table[0, 0::2].any() and (table[0, 1::2] == 1).all()  # (0, 1, ...)
assert_close(table[:, 0], torch.arange(6).double().sin())  # column 0: sin p

# %% [markdown] lang="en"
# ## Each pair is the hand of a clock
#
# A pair $(\sin\omega_i p, \cos\omega_i p)$ is a point on the unit circle:
# $$PE_{(p,2i)}^2 + PE_{(p,2i+1)}^2 = 1$$
# Draw it as a clock hand, with the sine across and the cosine up. At $p = 0$ every
# hand points to twelve o'clock, and each step to the next position turns hand $i$
# clockwise by $\omega_i$ radians. The hands differ only in speed. For $d = 8$ the
# speeds are exactly $1$, $0.1$, $0.01$ and $0.001$ radian per position, because
# $10000 = 10^4$ gives
# $$\omega_i = 10000^{-i/4} = 10^{-i}$$
# each hand ten times slower than the one before, as a clock's second, minute and
# hour hands each turn more slowly than the one before.
#
# The figure reads four positions off these four clocks. The fast hand alone cannot
# tell $p = 1$ from $p = 7$: seven radians is just over one turn ($2\pi \approx 6.28$),
# so it points almost the same way. The next hand, at $0.1$ and $0.7$ radian, tells
# them apart. By $p = 100$ the two fast hands have wrapped around, the first one
# fifteen times, and only the slow ones still say roughly where the position lies. Fast hands separate neighbours,
# slow hands separate distant positions, and together they give each position its
# own reading.

# %% [markdown] lang="ja"
# ## 各ペアは時計の針
#
# ペア $(\sin\omega_i p, \cos\omega_i p)$ は単位円の上の点です。
# $$PE_{(p,2i)}^2 + PE_{(p,2i+1)}^2 = 1$$
# これを、正弦を横、余弦を縦に取って時計の針として描きます。
# $p = 0$ ではどの針も 12 時を指し、位置が 1 つ進むごとに針 $i$ は時計回りに $\omega_i$ ラジアン回ります。
# 針どうしの違いは速さだけです。
# $d = 8$ では、$10000 = 10^4$ なので
# $$\omega_i = 10000^{-i/4} = 10^{-i}$$
# となり、速さはちょうど位置 1 つあたり $1$、$0.1$、$0.01$、$0.001$ ラジアンです。
# どの針も 1 つ前の針の 10 分の 1 の速さで回ります。時計の秒針、分針、時針が順に遅くなるのと同じです。
#
# 図では、この 4 つの時計で 4 つの位置を読んでいます。
# 速い針だけでは $p = 1$ と $p = 7$ を区別できません。7 ラジアンは 1 周（$2\pi \approx 6.28$）を少し超えただけなので、
# 針はほぼ同じ向きを指します。次の針は $0.1$ と $0.7$ ラジアンの位置にあり、2 つを区別できます。
# $p = 100$ までには速い 2 本の針が 1 周以上しています（最初の針は 15 周）。位置がおおよそどこにあるかを示せるのは、遅い針だけです。
# 速い針は隣どうしを、遅い針は離れた位置どうしを見分けます。すべての針を合わせると、位置ごとに違う読みが得られます。

# %% tags=["check"] summary={"en": "every pair lies on the unit circle; for d = 8 the speeds read back from posenc are 1, 0.1, 0.01 and 0.001; its hands have turned 15, 1, 0 and 0 times by p = 100, and the fast one is just past a turn at p = 7, within 0.3 radian of p = 1", "ja": "どのペアも単位円の上にあります。d = 8 で posenc から読み戻した速さは 1、0.1、0.01、0.001 です。p = 100 までに針は 15 周、1 周、0 周、0 周し、p = 7 で最も速い針は 1 周を少し過ぎ、p = 1 の向きから 0.3 ラジアン以内にあります"}
pe20 = sinusoidal(torch.arange(1000), 20, dtype=F64)
assert_close(
    pe20[:, 0::2] ** 2 + pe20[:, 1::2] ** 2, torch.ones(1000, 10).double()
)
# at p = 1 each hand has turned by its speed, in (0, 1]: atan2 returns it
row = sinusoidal(torch.tensor([1]), 8, dtype=F64)[0]
speeds = torch.atan2(row[0::2], row[1::2])
assert_close(speeds, torch.tensor([1, 0.1, 0.01, 0.001], dtype=F64))
# the turns by p = 100, counted on posenc's hands one step at a time
hands = sinusoidal(torch.arange(101), 8, dtype=F64)
angle = torch.atan2(hands[:, 0::2], hands[:, 1::2])  # in (-pi, pi]
step = torch.remainder(angle.diff(dim=0), 2 * math.pi)  # each step below pi
assert (step.sum(0) // (2 * math.pi)).tolist() == [15, 1, 0, 0]
# p = 7: the fast hand is 7 - 2 pi radians past twelve, within 0.3 radian of
# its p = 1 angle ("almost the same way")
assert_close(angle[7, 0], torch.tensor(7 - 2 * math.pi, dtype=F64))
assert abs(angle[7, 0] - angle[1, 0]) < 0.3

# %% tags=["figure"] alt={"en": ["Sixteen clock faces in four rows, positions p = 0, 1, 7 and 100, and four columns, hand speeds 1, 0.1, 0.01 and 0.001 radian per position. At p = 0 every hand points to twelve o'clock. At p = 1 and p = 7 the fastest hand points almost the same way, while the second hand has moved from 0.1 to 0.7 radian; at p = 100 the fastest hand has wrapped around fifteen times and the second once, while the slowest has moved only 0.1 radian."], "ja": ["16 個の時計の文字盤を 4 行 4 列に並べた図。行は位置 p = 0、1、7、100、列は針の速さ 1、0.1、0.01、0.001（位置 1 つあたりのラジアン）です。p = 0 ではどの針も 12 時を指します。p = 1 と p = 7 では最も速い針がほぼ同じ向きを指し、2 番目の針は 0.1 ラジアンから 0.7 ラジアンへ進んでいます。p = 100 では最も速い針が 15 周、2 番目の針が 1 周して、最も遅い針は 0.1 ラジアンしか進んでいません。"]}
positions = [0, 1, 7, 100]
codes = sinusoidal(torch.tensor(positions), 8)  # [p, j]
rim = torch.linspace(0, 2 * math.pi, 200)
# drawn small: it is the largest file of a Japanese first visit
fig, axes = plt.subplots(4, 4, figsize=(5.6, 4.1))
for r, p in enumerate(positions):
    for i, speed in enumerate(("1", "0.1", "0.01", "0.001")):
        ax = axes[r, i]
        ax.plot(rim.sin(), rim.cos(), color=INK, lw=1)
        for h in torch.arange(12) * math.pi / 6:  # the hour marks
            ax.plot(
                [0.85 * h.sin(), h.sin()], [0.85 * h.cos(), h.cos()], color=INK
            )
        sin, cos = (
            codes[r, 2 * i].item(),
            codes[r, 2 * i + 1].item(),
        )  # the hand
        ax.annotate(
            "",
            xy=(0.8 * sin, 0.8 * cos),
            xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "lw": 2.2, "color": "C0"},
        )
        ax.set(xlim=(-1.1, 1.1), ylim=(-1.1, 1.1), aspect="equal")
        ax.axis("off")
        if r == 0:
            ax.set_title(rf"$\omega_{i} = {speed}$")
        if i == 0:
            ax.text(-1.4, 0, f"$p = {p}$", ha="right", va="center")
plt.show()

# %% [markdown] lang="en"
# ## The wavelengths form a geometric progression
#
# The [wavelength](../docs/glossary.md#wavelength) of pair $i$ is the number of
# positions its hand needs for one full turn:
# $$\lambda_i = \frac{2\pi}{\omega_i} = 2\pi \cdot 10000^{2i/d}$$
# The ratio of consecutive wavelengths does not depend on $i$,
# $$\frac{\lambda_{i+1}}{\lambda_i} = \frac{10000^{2(i+1)/d}}{10000^{2i/d}} = 10000^{2/d}$$
# so the wavelengths form a geometric progression from $\lambda_0 = 2\pi$ to
# $$\lambda_{n-1} = 2\pi \cdot 10000^{(d-2)/d}$$
# for $d = 512$ with ratio 1.0366, up to about 60611 positions.

# %% [markdown] lang="ja"
# ## 波長は等比数列をなす
#
# ペア $i$ の[波長](../docs/glossary.ja.md#wavelength)とは、その針がちょうど 1 周するのに必要な位置の数です。
# $$\lambda_i = \frac{2\pi}{\omega_i} = 2\pi \cdot 10000^{2i/d}$$
# 隣り合う波長の比は $i$ によりません。
# $$\frac{\lambda_{i+1}}{\lambda_i} = \frac{10000^{2(i+1)/d}}{10000^{2i/d}} = 10000^{2/d}$$
# したがって波長は、$\lambda_0 = 2\pi$ から次の値までの等比数列です。
# $$\lambda_{n-1} = 2\pi \cdot 10000^{(d-2)/d}$$
# $d = 512$ では公比は 1.0366 で、最後の波長は位置にして約 60611 です。

# %%
d, n = 512, 256
lam = 2 * math.pi * 10000 ** (torch.arange(n, dtype=F64) / n)  # lambda_i
print(f"ratio {lam[1] / lam[0]:.4f}, last {lam[-1]:.0f}", end="")

# %% tags=["check"] summary={"en": "the wavelengths read back from posenc are 2π·10000^(2i/d), stop one ratio short of 10000·2π, and reach it with endpoint=True", "ja": "posenc から読み戻した波長は 2π·10000^(2i/d) で、10000·2π を公比で 1 回割ったところで止まります。endpoint=True ではちょうど 10000·2π に届きます"}
two_pi = 2 * math.pi


def wavelengths(d, endpoint=False):
    """2 pi / omega_i, with omega_i read back from posenc's row p = 1."""
    row = sinusoidal(torch.tensor([1]), d, endpoint=endpoint, dtype=F64)[0]
    return two_pi / torch.atan2(row[0::2], row[1::2])


for d in (16, 64, 512):
    n = d // 2
    i = torch.arange(n).double()
    got, got_t2t = wavelengths(d), wavelengths(d, endpoint=True)
    assert_close(got, two_pi * 10000 ** (2 * i / d))
    ratio = torch.tensor(10000 ** (2 / d), dtype=F64)
    assert torch.allclose(got[1:] / got[:-1], ratio)
    assert math.isclose(got[-1], two_pi * 10000 ** ((d - 2) / d))
    # 10000 * 2 pi would be the next term, i = n
    assert got[-1] < 10000 * two_pi
    assert math.isclose(got[-1] * ratio, 10000 * two_pi)
    # n - 1 denominator: from 2 pi to exactly 10000 * 2 pi
    assert_close(got_t2t, two_pi * 10000 ** (i / (n - 1)))
    assert math.isclose(got_t2t[-1], 10000 * two_pi)
assert f"{got[1] / got[0]:.4f}" == "1.0366" and round(float(got[-1])) == 60611
assert round(10000 * two_pi) == 62832

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where the progression ends.** The paper says the wavelengths run
# "from $2\pi$ to $10000 \cdot 2\pi$". Strictly, the last index is $i = n-1$, so the
# last wavelength is one ratio short of $10000 \cdot 2\pi$: about 60611 positions
# instead of 62832 for $d = 512$. tensor2tensor, fairseq and AllenNLP divide the
# exponent by $n-1$ instead, so that the progression ends exactly on
# $10000 \cdot 2\pi$ (`endpoint=True` in `posenc`). That is a different encoding,
# not a rounding difference:
# [*Sinusoids in the wild: pitfalls*](02-sinusoids-in-the-wild.ipynb#the-variants-and-when-they-matter)
# measures how different.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：等比数列はどこで終わるか**
#
# 論文は波長が「$2\pi$ から $10000 \cdot 2\pi$ まで」と書いています。
# しかし厳密には最後の番号は $i = n-1$ なので、最後の波長は $10000 \cdot 2\pi$ には届かず、それを公比で 1 回割った値になります。$d = 512$ では 62832 ではなく約 60611 です。
# tensor2tensor、fairseq、AllenNLP は指数を $n-1$ で割り、数列がちょうど $10000 \cdot 2\pi$ で終わるようにしています（`posenc` では `endpoint=True`）。
# これは丸め誤差ではなく、別のエンコーディングです。
# どれほど違うかは[「実装ごとに違う正弦波位置エンコーディング：落とし穴」](02-sinusoids-in-the-wild.ipynb#変種とその違いが問題になる場面)の章で測ります。

# %% [markdown] lang="en"
# ## A smooth binary counter
#
# Write the positions in binary. The lowest bit of $p$ alternates, the next one changes
# every two positions, the next every four: bit $k$ is a square wave with period
# $2^{k+1}$, and the periods form a geometric progression with ratio $2$. The
# sinusoidal encoding is the same counter with the square waves made smooth, the
# periods $\lambda_i$ in place of $2^{k+1}$ and the ratio $10000^{2/d}$ in place of $2$.
#
# Smooth waves buy what bits cannot: neighbouring positions get similar codes, any
# real $p$ has a code, and, as the next section shows, moving along the sequence
# becomes one fixed rotation. The figure puts the two counters side by side.

# %% [markdown] lang="ja"
# ## 滑らかな 2 進カウンタ
#
# 位置を 2 進数で書いてみます。$p$ の最下位ビットは 1 つごとに、次のビットは 2 つごとに、その次は 4 つごとに変わります。
# ビット $k$ は周期 $2^{k+1}$ の矩形波で、周期は公比 $2$ の等比数列をなします。
# 正弦波位置エンコーディングは、同じカウンタの矩形波を滑らかな波に置き換えたものです。
# 周期は $2^{k+1}$ の代わりに $\lambda_i$、公比は $2$ の代わりに $10000^{2/d}$ です。
#
# 滑らかな波には、ビットにはない利点があります。隣どうしの位置が似た符号になり、実数の $p$ にも符号があり、
# 次の節で見るように、系列に沿って進むことを決まった 1 つの回転で表せます。
# 図では 2 つのカウンタを並べています。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: rounding the smooth wave gives the bit back.** The smoothing is
# nearly literal. A wave with the period of bit $k$,
# $$w_k(p) = \tfrac12 - \tfrac12\cos\left(\pi\,\big(p - \tfrac{2^k - 1}{2}\big)/2^k\right)$$
# reaches $1$ in the middle of each run of ones, at $p = (3 \cdot 2^k - 1)/2$, and stays
# above $\tfrac12$ within a quarter period, $2^{k-1}$, of it. The $2^k$ ones of a run lie
# within $(2^k - 1)/2$ of the middle and the zeros at least $(2^k + 1)/2$ away, so
# rounding the smooth wave gives the bit back at every integer:
# $\mathrm{round}\big(w_k(p)\big) = \mathrm{bit}_k(p)$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：滑らかな波を丸めるとビットに戻る**
#
# 「滑らかにした」はほぼ文字どおりの意味です。ビット $k$ と同じ周期の波
# $$w_k(p) = \tfrac12 - \tfrac12\cos\left(\pi\,\big(p - \tfrac{2^k - 1}{2}\big)/2^k\right)$$
# は、1 が続く区間の中央 $p = (3 \cdot 2^k - 1)/2$ で $1$ になり、そこから 4 分の 1 周期 $2^{k-1}$ 以内では $\tfrac12$ を上回ります。
# 区間の $2^k$ 個の 1 は中央から $(2^k - 1)/2$ 以内にあり、0 は少なくとも $(2^k + 1)/2$ 離れています。
# したがって、滑らかな波を丸めると、どの整数でもビットに戻ります。
# $\mathrm{round}\big(w_k(p)\big) = \mathrm{bit}_k(p)$ です。

# %% tags=["deeper", "check"] summary={"en": "rounding the smooth wave w_k gives bit k of p for every p below 4096 and k up to 9, never at a tie", "ja": "4096 未満のすべての p と 9 までの k で、滑らかな波 w_k を丸めると p のビット k になり、ちょうど 1/2 になることはありません"}
p = torch.arange(4096)
for k in range(10):
    bit = (p >> k) & 1  # from the integers, not from a wave
    w = 0.5 - 0.5 * torch.cos(math.pi * (p - (2**k - 1) / 2) / 2**k)
    assert torch.equal(w.round().long(), bit)
    assert ((w - 0.5).abs() > 1e-6).all()  # no tie to round

# %% tags=["figure"] alt={"en": ["Two heatmaps over positions p from 0 to 63. Left: the binary digits of p, bit k = 0 to 5 down, white for 0 and dark red for 1; the top row alternates at every position and each row below changes half as often. Right: the sinusoidal encoding for d = 32, dimension j down, from −1 (blue) to 1 (red); the top rows oscillate fast, lower rows ever more slowly, ending in alternating white (sine near 0) and dark red (cosine near 1) stripes."], "ja": ["位置 p（0〜63）についての 2 つのヒートマップ。左は p の 2 進数の桁で、縦にビット k = 0〜5 を並べ、0 を白、1 を濃い赤で塗っています。最上段は位置ごとに入れ替わり、1 段下がるごとに変化の頻度が半分になります。右は d = 32 の正弦波位置エンコーディングで、縦が次元 j、色は −1（青）から 1（赤）です。上の段は速く振動し、下の段ほどゆっくり変化し、下端では白（0 に近い正弦）と濃い赤（1 に近い余弦）の縞が交互に並びます。"]}
p = torch.arange(64)
bits = (p[None, :] >> torch.arange(6)[:, None]) & 1  # [k, p]
style = {"aspect": "auto", "cmap": "RdBu_r", "vmin": -1, "vmax": 1}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.7), width_ratios=[1, 1.25])
axes[0].imshow(bits, interpolation="nearest", **style)
axes[0].set(xlabel="$p$", ylabel="$k$", title=r"$\mathrm{bit}_k(p)$")
im = axes[1].imshow(sinusoidal(p, 32).T, interpolation="nearest", **style)
axes[1].set(xlabel="$p$", ylabel="$j$", title="$PE_{(p,j)}$")
for ax in axes:
    ax.grid(False)
fig.colorbar(im, ax=axes[1], ticks=[-1, 0, 1])
plt.show()

# %% [markdown] lang="en"
# ## Why a sine and a cosine: a shift is a rotation
#
# The paper motivates the sinusoids by a property: for any fixed offset $k$, the
# encoding $PE(p+k)$ is a linear function of $PE(p)$. On the clocks it is plain:
# moving $k$ positions turns hand $i$ by $k\omega_i$, whatever time it showed before.
# To write the map down, take one pair and set $\theta = \omega_i p$ and
# $\phi = \omega_i k$. The angle-addition formulas give
# $$\sin(\theta + \phi) = \sin\theta\cos\phi + \cos\theta\sin\phi$$
# $$\cos(\theta + \phi) = \cos\theta\cos\phi - \sin\theta\sin\phi$$
# Read the coefficients of $\sin\theta$ and $\cos\theta$ off each line, sine first as
# in the interleaved layout: $(\cos\phi, \sin\phi)$ from the first,
# $(-\sin\phi, \cos\phi)$ from the second. They are the rows of a $2 \times 2$ matrix:
# $$\begin{pmatrix}\sin(\theta+\phi)\\ \cos(\theta+\phi)\end{pmatrix} = B(\phi)\begin{pmatrix}\sin\theta\\ \cos\theta\end{pmatrix}, \qquad B(\phi) = \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}$$
# One such block per frequency on the diagonal of a $d \times d$ matrix,
# $$M_k = \mathrm{diag}\big(B(k\omega_0), B(k\omega_1), \dots, B(k\omega_{n-1})\big)$$
# moves every pair at once:
# $$PE(p+k) = M_k\, PE(p)$$
# $M_k$ contains $k$ and the frequencies, but not $p$: the same matrix shifts every
# position by $k$. This is the linear function the paper promised.
#
# $B(\phi)$ is a [rotation matrix](../docs/glossary.md#rotation-matrix). With the
# counter-clockwise rotation of the [notation page](../docs/notation.md#encodings),
# $R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta\\ \sin\theta & \cos\theta\end{pmatrix}$,
# it is $B(\phi) = R(-\phi)$: moving forward turns each (sine, cosine) point
# clockwise, as the clock hands do. The signs matter. The transpose
# $B(\phi)^\top = R(\phi)$, easy to write by mistake, moves the other way: it maps
# $PE(p)$ to $PE(p-k)$. Because the blocks are rotations, shifts compose as they
# should: $M_k M_l = M_{k+l}$ and $M_k^\top = M_{-k}$. Below, $M_3$ takes $PE(5)$ to
# $PE(8)$ for $d = 8$.

# %% [markdown] lang="ja"
# ## なぜ正弦と余弦の両方か：ずらすことは回転すること
#
# 論文は正弦波を選んだ理由として、次の性質を挙げています。
# ずらし量 $k$ をどんな値に固定しても、$PE(p+k)$ は $PE(p)$ の線形関数で表せる、というものです。
# 時計で考えれば明らかです。位置が $k$ 進むと、それまで何時を指していたかにかかわらず、針 $i$ は $k\omega_i$ だけ回ります。
# この写像を式で書くため、1 つのペアに注目して $\theta = \omega_i p$、$\phi = \omega_i k$ と置きます。加法定理から次が成り立ちます。
# $$\sin(\theta + \phi) = \sin\theta\cos\phi + \cos\theta\sin\phi$$
# $$\cos(\theta + \phi) = \cos\theta\cos\phi - \sin\theta\sin\phi$$
# インターリーブ配置と同じく正弦を先にして、それぞれの式から $\sin\theta$ と $\cos\theta$ の係数を読み取ります。
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
# $B(\phi) = R(-\phi)$ です。位置を先へ進めると、（正弦、余弦）の点は時計の針と同じく時計回りに回ります。
# 回転の向き（正負）が重要です。うっかり書きがちな転置 $B(\phi)^\top = R(\phi)$ は逆向きに動き、
# $PE(p)$ を $PE(p-k)$ に移します。
# ブロックが回転なので、ずらす操作どうしも期待どおりに合成できます。
# $M_k M_l = M_{k+l}$、$M_k^\top = M_{-k}$ が成り立ちます。
# 下では、$d = 8$ で $M_3$ が $PE(5)$ を $PE(8)$ に移します。


# %%
def block(phi):  # B(phi)
    c, s = math.cos(phi), math.sin(phi)
    return torch.tensor([[c, s], [-s, c]], dtype=F64)


def shift_matrix(k, d):  # M_k
    omega = 10000.0 ** (-torch.arange(d // 2, dtype=F64) / (d // 2))
    return torch.block_diag(*(block(k * w) for w in omega.tolist()))


def pe(positions, d):  # the rows PE(p), in float64
    return sinusoidal(torch.as_tensor(positions), d, dtype=F64)


print(shift_matrix(3, 8) @ pe([5], 8)[0])
print(pe([8], 8)[0])


# %% tags=["check"] summary={"en": "B(φ) is angle addition and equals R(−φ); PE(p+k) = M_k PE(p), the transpose shifts back, M_k M_l = M_{k+l}", "ja": "B(φ) は加法定理を行列にしたもので、R(−φ) に等しくなります。PE(p+k) = M_k PE(p) が成り立ち、転置は逆向きにずらします。M_k M_l = M_{k+l} です"}
def rotation(theta):  # R(theta), counter-clockwise, as on the notation page
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, -s], [s, c]], dtype=F64)


theta, phi = 2.0, -0.7
sc = torch.tensor(
    [[math.sin(a), math.cos(a)] for a in (theta, theta + phi)], dtype=F64
)
assert_close(block(phi) @ sc[0], sc[1])  # angle addition
assert_close(block(phi), rotation(-phi))  # B(phi) = R(-phi)
assert_close(block(phi).T, rotation(phi))  # B(phi)^T = R(phi)

d = 16
p = torch.tensor([0, 1, 7, 100, 999])
for k in (-7, 1, 3, 50, 1000):
    m = shift_matrix(k, d)
    assert_close(pe(p, d) @ m.T, pe(p + k, d))  # PE(p+k) = M_k PE(p)
    assert_close(pe(p, d) @ m, pe(p - k, d))  # the transpose shifts back
    assert_close(m.T, shift_matrix(-k, d))  # M_k^T = M_{-k}
    assert_close(m @ shift_matrix(5, d), shift_matrix(k + 5, d))  # M_k M_l

# %% [markdown] lang="en"
# ### The sine alone is not enough
#
# Keep only the sines, $s(p) = (\sin\omega_0 p, \dots, \sin\omega_{n-1} p)$. No matrix
# $L$ can satisfy $s(p+k) = L\,s(p)$ for all $p$: at $p = 0$ every sine is $0$, so
# $L\,s(0) = 0$ for any $L$, while $s(k) \neq 0$ for every integer $k \neq 0$ (already
# its first entry $\sin k$ is not $0$, since $\pi$ is irrational). The derivation
# above shows what is missing: $\sin(\theta+\phi)$ needs $\cos\theta$, which only the
# second column of each pair supplies. A clock hand needs both of its coordinates.

# %% [markdown] lang="ja"
# ### 正弦だけでは足りない
#
# 正弦だけを残した $s(p) = (\sin\omega_0 p, \dots, \sin\omega_{n-1} p)$ を考えます。
# すべての $p$ で $s(p+k) = L\,s(p)$ を満たす行列 $L$ は存在しません。
# $p = 0$ では正弦がすべて $0$ なので、どんな $L$ でも $L\,s(0) = 0$ です。
# 一方、整数 $k \neq 0$ ならどれでも $s(k) \neq 0$ です
# （$\pi$ は無理数なので、最初の成分 $\sin k$ だけを見ても $0$ ではありません）。
# 足りないものは上の導出からわかります。$\sin(\theta+\phi)$ には $\cos\theta$ が必要で、
# それを持っているのは各ペアの 2 列目だけです。時計の針には、2 つの座標の両方が必要なのです。

# %% tags=["check"] summary={"en": "s(0) = 0 while sin k ≠ 0", "ja": "s(0) = 0 ですが sin k ≠ 0 です"}
assert not sinusoidal(torch.tensor([0]), 16)[0, 0::2].any()  # s(0) = 0
ks = torch.arange(-50, 51)
assert (sinusoidal(ks[ks != 0], 16)[:, 0] != 0).all()  # sin k != 0

# %% [markdown] lang="en"
# ## The dot product depends only on the distance
#
# Multiply two encodings entry by entry and group the pairs. By
# $\cos(a-b) = \cos a\cos b + \sin a\sin b$,
# $$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\big(\sin\omega_i p\,\sin\omega_i q + \cos\omega_i p\,\cos\omega_i q\big) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$$
# On the clocks, each term is the cosine of the angle between hand $i$ at $p$ and
# the same hand at $q$. Four consequences follow at once.
#
# - The dot product is a function of the distance $p-q$ alone: the
#   [Gram matrix](../docs/glossary.md#gram-matrix) is constant along each diagonal.
# - It is symmetric in $p-q$, because cosine is even: the dot product of two codes
#   cannot tell whether $q$ comes before or after $p$. (Attention can, through its
#   weights: see below.)
# - Its maximum is at $p = q$, where every term is $1$: $PE(p)\cdot PE(p) = n$, so every
#   encoding has the same norm $\sqrt{d/2}$.
# - It falls as the distance grows, but not monotonically: the fast pairs soon
#   oscillate out of step, and the sum ripples. For $d = 512$ it first rises from
#   distance 43 to distance 44.

# %% [markdown] lang="ja"
# ## 内積は距離だけで決まる
#
# 2 つの符号を成分ごとに掛け、ペアごとにまとめます。
# $\cos(a-b) = \cos a\cos b + \sin a\sin b$ を使うと、次のようになります。
# $$PE(p)\cdot PE(q) = \sum_{i=0}^{n-1}\big(\sin\omega_i p\,\sin\omega_i q + \cos\omega_i p\,\cos\omega_i q\big) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q)\big)$$
# 時計で言えば、各項は、位置 $p$ と位置 $q$ での針 $i$ の向きの差（角度）の余弦です。
# ここから 4 つのことがすぐにわかります。
#
# - 内積は距離 $p-q$ だけの関数です。[グラム行列](../docs/glossary.ja.md#gram-matrix)は各対角線に沿って一定になります。
# - 余弦は偶関数なので、内積は $p-q$ について対称です。2 つの符号の内積だけでは、$q$ が $p$ の前にあるのか後ろにあるのかは区別できません
#   （アテンションなら重みを通して区別できることを、下で見ます）。
# - 最大値は $p = q$ のときで、各項が $1$ になります。$PE(p)\cdot PE(p) = n$ なので、
#   どの符号もノルムは $\sqrt{d/2}$ で同じです。
# - 距離が大きくなると値は下がりますが、単調ではありません。
#   速いペアどうしはすぐに位相がずれ、和が波打ちます。
#   $d = 512$ では、距離 43 から 44 にかけて初めて値が増えます。

# %% tags=["check"] summary={"en": "posenc's Gram matrix is the sum of cosines, constant along diagonals, symmetric, n on the diagonal and lower elsewhere; for d = 512 the first rise is from 43 to 44", "ja": "posenc のグラム行列は余弦の和で、対角線に沿って一定で対称です。対角は n で、ほかの成分はそれより小さくなります。d = 512 で初めて値が増えるのは距離 43 から 44 です"}
d, n = 512, 256
omega = 10000.0 ** (-torch.arange(n, dtype=F64) / n)
enc = pe(torch.arange(200), d)
gram = enc @ enc.T  # gram[p, q] = PE(p) . PE(q)
dist = (torch.arange(200)[:, None] - torch.arange(200)).double()  # p - q
assert_close(gram, torch.cos(dist[..., None] * omega).sum(-1))  # sum of cos
assert_close(gram[1:, 1:], gram[:-1, :-1])  # constant along diagonals
assert_close(gram, gram.T)  # symmetric in p - q
assert torch.allclose(gram.diagonal(), torch.tensor(n).double())  # n
assert (gram[dist != 0] < n - 1e-6).all()  # the maximum only at p = q
f = pe(torch.arange(1000), d) @ enc[0]  # PE(k) . PE(0), k = 0, 1, ...
first_rise = int((f[1:] > f[:-1]).nonzero()[0])
assert first_rise == 43

# %% tags=["figure"] alt={"en": ["Dot product PE(p)·PE(q) for d = 512 against the distance p − q from −1000 to 1000: a sharp symmetric peak of 256 at 0, then a fall with ripples to about 45 at ±1000. It depends only on the distance."], "ja": ["d = 512 での内積 PE(p)·PE(q) を距離 p − q（−1000〜1000）に対して描いた図。0 で 256 の鋭い左右対称のピークがあり、離れるにつれて波打ちながら ±1000 で約 45 まで下がります。値は距離だけで決まります。"]}
k = torch.arange(-1000, 1001)  # negative positions are allowed
f = pe(k, 512) @ pe([0], 512)[0]  # PE(k) . PE(0) = PE(p + k) . PE(p)
fig, ax = plt.subplots(figsize=(6.4, 2.7))
ax.plot(k, f, lw=1)
ax.axhline(0, color=INK, lw=0.8)
ax.set(xlabel="$p-q$", ylabel=r"$PE(p)\cdot PE(q)$", xlim=(-1000, 1000))
plt.show()

# %% [markdown] lang="en"
# ### Inside attention
#
# This clean property holds for the encodings themselves. Inside a layer, with
# vectors as columns as in $PE(p+k) = M_k\,PE(p)$, the query and key of positions
# $p$ and $q$ are $W_Q\,(x_p + PE(p))$ and $W_K\,(x_q + PE(q))$, so the attention score contains
# $PE(p)^\top W_Q^\top W_K\, PE(q)$, besides a content term and two cross terms that
# mix content with position (Ke et al. 2021 remove the cross terms). For a general
# matrix between them, that term depends on $p$ and $q$ separately, not only on
# $p-q$: for one draw of random weights and $d = 64$, its values along one diagonal
# spread widely (printed below).
#
# Nor does the symmetry survive the weights. With $W_Q = I$ and $W_K = M_k$, the
# shift matrix of the previous section, the term becomes
# $$PE(p)^\top M_k\, PE(q) = PE(p)\cdot PE(q+k) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q-k)\big)$$
# again a function of $p-q$ alone, but not symmetric: the query at $p$ scores highest
# on the key $k$ positions before it, at $q = p-k$, and the key $k$ after it scores
# lower. Yan et al. (2019) made both observations: the dot product of two
# codes cannot tell before from after, and the projections blur its dependence on
# the distance. This is the paper's motivation at work: a fixed
# linear map lets a head attend by relative position, in a chosen direction.
# Rotary position embedding, the subject of the chapter
# [*Rotary position embedding (RoPE)*](08-rope.ipynb), rotates the queries and keys
# instead, so that positions enter the score only through $p-q$, whatever the
# weights are.

# %% [markdown] lang="ja"
# ### アテンションの中では
#
# このきれいな性質は、符号どうしの内積についての話です。
# では、層の中ではどうでしょうか。$PE(p+k) = M_k\,PE(p)$ と同じくベクトルを列ベクトルとして書くと、位置 $p$ のクエリと位置 $q$ のキーは $W_Q\,(x_p + PE(p))$ と $W_K\,(x_q + PE(q))$ です。
# そのためアテンションスコアには、内容どうしの項と、内容と位置を混ぜる 2 つの交差項のほかに、
# $PE(p)^\top W_Q^\top W_K\, PE(q)$ という項が含まれます（Ke ら 2021 は交差項を取り除いています）。
# 間に一般の行列が入ると、この項は $p-q$ だけでなく $p$ と $q$ のそれぞれに依存します。
# $d = 64$ でランダムな重みを 1 組引いてみると、1 本の対角線に沿った値が大きくばらつきます（下の出力）。
#
# 対称性も、重みを通すと保たれません。$W_Q = I$ とし、前の節のずらす行列を使って $W_K = M_k$ とすると、この項は次のようになります。
# $$PE(p)^\top M_k\, PE(q) = PE(p)\cdot PE(q+k) = \sum_{i=0}^{n-1}\cos\big(\omega_i (p-q-k)\big)$$
# これはやはり $p-q$ だけの関数ですが、対称ではありません。
# 位置 $p$ のクエリのスコアは $k$ 個前のキー（$q = p-k$）で最大になり、$k$ 個後のキーのスコアはそれより低くなります。
# Yan ら（2019）は、この 2 つをどちらも指摘しています。2 つの符号の内積は前後を区別できず、射影を通すと距離への依存がぼやけます。
# ここで、論文の挙げた動機が実際に効いてきます。固定の線形写像を 1 つ挟むだけで、ヘッドは相対位置に応じて、しかも選んだ向きにアテンションを向けられます。
# [「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章で扱う RoPE は、符号を足す代わりにクエリとキーを回転させます。
# そうすると、重みがどうであっても、位置は $p-q$ を通してだけスコアに入ります。

# %%
d = 64
enc = pe(torch.arange(300), d)
w_q, w_k = (torch.randn(d, d, dtype=F64) / math.sqrt(d) for _ in range(2))
scores = (enc @ w_q.T) @ (enc @ w_k.T).T  # [p, q] = PE(p)^T W_Q^T W_K PE(q)
along = torch.diagonal(scores, 5)  # all pairs with q - p = 5
shifted = enc @ shift_matrix(3, d) @ enc.T  # W_Q = I, W_K = M_3
row = shifted[100]  # the query at 100
print(
    f"random weights, q - p = 5: from {along.min():.1f} to {along.max():.1f}\n"
    f"W_K = M_3, query 100: key 97 {row[97]:.1f}, key 103 {row[103]:.1f}",
    end="",
)

# %% tags=["check"] summary={"en": "without weights the diagonal is constant, with this draw of random weights it spreads; with W_K = M_3 the scores are the shifted sum of cosines, highest at q = p − 3", "ja": "重みがなければ対角線は一定で、このランダムな重みではばらつきます。W_K = M_3 ではスコアがずらした余弦の和になり、q = p − 3 で最大です"}
assert along.max() - along.min() > 1
assert torch.diagonal(enc @ enc.T, 5).std() < 1e-12  # without the weights
omega64 = 10000.0 ** (-torch.arange(d // 2, dtype=F64) / (d // 2))
offset = (torch.arange(300)[:, None] - torch.arange(300)).double()  # p - q
expected = torch.cos((offset - 3)[..., None] * omega64).sum(-1)
assert_close(shifted, expected)  # sum_i cos(w_i (p - q - k)), k = 3
assert (shifted.argmax(dim=1)[3:] == torch.arange(297)).all()  # q = p - 3
assert row[97] - row[103] > 1  # the key 3 before beats the key 3 after
# M_3 PE(q) = PE(q + 3): the score of key q is PE(p) . PE(q + 3)
assert_close(enc @ shift_matrix(3, d).T, pe(torch.arange(300) + 3, d))

# %% [markdown] lang="en"
# ## What base 10000 buys
#
# The paper gives no reason for $10000$. What the number controls is the slow end of
# the clock. Whatever the base $b$ (`base=` in `posenc`), the fastest hand turns once
# every $\lambda_0 = 2\pi$ positions; the slowest turns once every
# $\lambda_{n-1} = 2\pi\,b^{(n-1)/n}$ positions. The figure compares $b = 100$, $10^4$
# and $10^6$ for $d = 512$ over a context of 2048 positions: on the left the
# wavelengths, straight lines on a logarithmic axis, against a grey line at 2048;
# on the right the similarity $PE(p)\cdot PE(q)$ against the distance, with a dotted
# line at half its peak.
#
# - **$b = 100$ is too small.** Every hand completes a turn within 618 positions.
#   Past a few hundred positions no hand is in step any more, and the similarity
#   only ripples around zero: positions 154 apart look less alike (−26.7) than
#   positions 1000 apart (7.4). The dot product no longer says how far apart two
#   distant positions are, although each code stays unique ($\omega_0 = 1$ still).
# - **$b = 10^6$ resolves distances only coarsely in such a context.** 123 of the 256
#   hands turn less than a quarter turn over the whole 2048 positions, so nearly
#   half of the dimensions barely change with position, and the similarity never
#   falls below 91. Such slow dimensions are not wasted: Barbero et al. (2024) find
#   that a trained rotary model (Gemma 7B) uses its slowest pairs to carry content
#   rather than position.
# - **$b = 10^4$ lies between.** The similarity halves by distance 54 (by 5 for
#   $b = 100$, by 361 for $b = 10^6$) and keeps falling, with ripples, over the whole
#   context; 56 hands turn less than a quarter turn.
#
# The base thus sets the range of distances the code resolves, and $10000$ spreads
# the hands' wavelengths from a few positions to tens of thousands. Whether the sinusoids let
# a model read longer sequences than in training, as the paper hoped, is tested in
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb); rotary
# embeddings reuse these frequencies and change them, the base among them, to
# stretch a context ([*Extending RoPE's context*](09-rope-context.ipynb)).

# %% [markdown] lang="ja"
# ## 底 10000 で何が得られるか
#
# 論文は $10000$ を選んだ理由を述べていません。この数が決めるのは、最も遅い針の速さです。
# 底 $b$（`posenc` では `base=`）がいくつでも、最も速い針は位置が $\lambda_0 = 2\pi$ 進むごとに 1 周します。
# 最も遅い針が 1 周するのは位置が $\lambda_{n-1} = 2\pi\,b^{(n-1)/n}$ 進むごとです。
# 図では、$d = 512$ で $b = 100$、$10^4$、$10^6$ を、長さ 2048 のコンテキストで比べています。
# 左は波長で、対数軸では直線になります。灰色の線が 2048 です。
# 右は類似度 $PE(p)\cdot PE(q)$ を距離に対して描いたもので、点線がピークの半分です。
#
# - **$b = 100$ は小さすぎます**。どの針も位置にして 618 以内に 1 周します。
#   距離が数百を過ぎると位相のそろった針はもうなく、類似度はゼロのまわりで波打つだけです。
#   距離 154 の 2 つの位置（−26.7）のほうが、距離 1000 の 2 つの位置（7.4）より似ていないことになります。
#   離れた 2 つの位置については、内積からその距離を読み取れなくなります（$\omega_0 = 1$ なので、符号そのものは一意なままです）。
# - **$b = 10^6$ では、長さ 2048 ほどのコンテキストでは距離を粗くしか見分けられません**。256 本の針のうち 123 本は、2048 トークン全体でも 4 分の 1 周も回りません。
#   次元の半分近くは位置によってほとんど変わらず、類似度は 91 を下回りません。
#   こうした遅い次元が無駄になるわけではありません。Barbero ら（2024）は、回転位置埋め込みを使う学習済みのモデル（Gemma 7B）が、
#   最も遅いペアを位置ではなく内容を運ぶのに使っていることを示しています。
# - **$b = 10^4$ はその間です**。類似度は距離 54 までに半分になり（$b = 100$ では 5、$b = 10^6$ では 361）、
#   波打ちながらコンテキスト全体にわたって下がり続けます。4 分の 1 周も回らない針は 56 本です。
#
# つまり、底は符号が見分けられる距離の範囲を決めます。$10000$ では、針の波長は位置にして数から数万までに広がります。
# 正弦波を使うモデルが、論文の期待どおり学習時より長い系列も読めるかどうかは、[「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章で確かめます。
# 回転位置埋め込みも同じ周波数を使い、コンテキストを伸ばすときは底を含めてこれを変えます（[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb)の章）。

# %%
d, n, context = 512, 256, 2048
similarity = {}
print("base   slowest wavelength  half at  < 1/4 turn    min")
for b in (100.0, 1e4, 1e6):
    omega = b ** (-torch.arange(n, dtype=F64) / n)
    code = sinusoidal(torch.arange(context + 1), d, base=b, dtype=F64)
    similarity[b] = f = code @ code[0]  # PE(r) . PE(0), r = 0..2048
    half = int((f < n / 2).nonzero()[0])
    still = int((omega * context < math.pi / 2).sum())  # hands of < 1/4 turn
    slowest = 2 * math.pi / omega[-1]
    print(f"{b:<6.0e} {slowest:18.0f} {half:8d} {still:11d} {f.min():6.1f}")

# %% tags=["figure"] alt={"en": ["Left: wavelength against pair index i on a log axis for d = 512 and bases 10^2, 10^4 and 10^6, three straight lines from 2π, with a grey line at 2048 positions; base 10^2 stays below it, base 10^4 crosses it about two thirds of the way along, base 10^6 a little before halfway. Right: PE(p)·PE(q) against the distance p − q from 1 to 2048 on a log axis: base 10^2 falls below half the peak (dotted) by distance 5 and then ripples around zero; base 10^4 halves by 54 and keeps falling; base 10^6 halves only at 361 and stays above 90."], "ja": ["左は d = 512 で底 10^2、10^4、10^6 の波長をペア番号 i に対して対数軸で描いたもので、どれも 2π から始まる直線です。灰色の線はコンテキスト長 2048 で、底 10^2 はその下にとどまり、底 10^4 は全体の 3 分の 2 ほどのところで、底 10^6 は半分より少し手前で上へ抜けます。右は PE(p)·PE(q) を距離 p − q（1〜2048、対数軸）に対して描いたものです。底 10^2 は距離 5 までにピークの半分（点線）を下回り、その後はゼロのまわりで波打ちます。底 10^4 は 54 で半分になり、さらに下がり続けます。底 10^6 は 361 でようやく半分になり、90 より上にとどまります。"]}
fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.9))
r = torch.arange(1, context + 1)
for b, style in zip(similarity, ("-", "--", ":"), strict=True):
    label = f"$b = 10^{round(math.log10(b))}$"
    lam = 2 * math.pi * b ** (torch.arange(n, dtype=F64) / n)
    axes[0].plot(lam, style, label=label)
    axes[1].plot(r, similarity[b][1:], lw=1, label=label)
axes[0].axhline(context, color=INK, lw=0.8)
axes[0].set(yscale="log", xlabel="$i$", ylabel=r"$\lambda_i$")
axes[0].minorticks_off()
axes[0].legend(loc="upper left")
axes[1].axhline(0, color=INK, lw=0.8)
axes[1].axhline(n / 2, color=INK, lw=0.8, ls=":")
axes[1].set(xscale="log", xlim=(1, context), xlabel="$p-q$")
axes[1].set_ylabel(r"$PE(p)\cdot PE(q)$")
plt.show()

# %% tags=["check"] summary={"en": "each curve is the sum of cos(2πr/λ_i); the slowest wavelengths, half-peak distances, hands under a quarter turn and lows are the quoted ones, the hands read back from posenc", "ja": "各曲線は cos(2πr/λ_i) の和で、最も遅い波長、半分になる距離、4 分の 1 周も回らない針の数、最小値は本文の値どおりです（針は posenc から読み戻しています）"}
r = torch.arange(context + 1, dtype=F64)
for b, f in similarity.items():
    lam = 2 * math.pi * b ** (torch.arange(n, dtype=F64) / n)
    assert_close(f, torch.cos(2 * math.pi * r[:, None] / lam).sum(-1))
# the hands' speeds read back from posenc at p = 1 (all below 1: atan2)
read = {}
for b in similarity:
    row = sinusoidal(torch.tensor([1]), d, base=b, dtype=F64)[0]
    speeds = torch.atan2(row[0::2], row[1::2])
    read[b] = int((speeds * context < math.pi / 2).sum())
assert read == {100.0: 0, 1e4: 56, 1e6: 123}
half = {b: int((f < n / 2).nonzero()[0]) for b, f in similarity.items()}
assert half == {100.0: 5, 1e4: 54, 1e6: 361}
low = similarity[100.0]
assert 2 * math.pi * 100 ** ((n - 1) / n) < 618  # every turn within 618
assert int(low.argmin()) == 154 and round(float(low.min()), 1) == -26.7
assert round(float(low[1000]), 1) == 7.4
assert similarity[1e6].min() > 91 and similarity[1e4].min() > 0

# %% [markdown] lang="en"
# <!-- explorable: 01-sinusoidal -->
# *On the website, an interactive figure takes the place of this note: sliders
# for the base and the dimension redraw the heatmap and the dot product.*

# %% [markdown] lang="ja"
# <!-- explorable: 01-sinusoidal -->
# サイトでは、この注記の場所に対話的な図があります。底と次元数のスライダで、ヒートマップと内積を描き直せます。

# %% [markdown] lang="en"
# ## In practice
#
# **Positions are explicit.** `sinusoidal` takes a tensor of positions, not a length,
# so offsets need no special case. When a decoder generates with a
# [KV cache](../docs/glossary.md#kv-cache), the new token at position $t$ must get
# $PE(t)$, not $PE(0)$; the module takes an `offset` for this.
#
# **Angles in float64.** Float32 angles drift at large positions, so `posenc` forms
# them in float64; the drift is not random but the same at every call, and
# [*Sinusoids in the wild: pitfalls*](02-sinusoids-in-the-wild.ipynb#the-variants-and-when-they-matter)
# measures it in the libraries and says when it matters. That page collects the
# pitfalls of real implementations, with the one lesson: the encoding is part of a
# checkpoint.

# %% [markdown] lang="ja"
# ## 実際に使うときの注意
#
# **位置は明示的に渡します**。`sinusoidal` は長さではなく位置のテンソルを受け取るので、
# 位置が 0 から始まらない場合（オフセット）にも特別な扱いは要りません。
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使ってデコーダが 1 トークンずつ生成するとき、位置 $t$ の新しいトークンには
# $PE(0)$ ではなく $PE(t)$ を足す必要があります。モジュールはそのために引数 `offset` を受け取ります。
#
# **角度は float64 で計算します**。float32 の角度は大きな位置でずれるので、`posenc` は角度を float64 で作ります。
# このずれはランダムではなく、毎回同じです。
# ライブラリごとのずれと、それが問題になる場面は、[「実装ごとに違う正弦波位置エンコーディング：落とし穴」](02-sinusoids-in-the-wild.ipynb#変種とその違いが問題になる場面)の章で扱います。
# この章は実際の実装の落とし穴をまとめたもので、教訓は「位置エンコーディングもチェックポイントの一部」ということです。

# %% tags=["check"] summary={"en": "one token at a time with offset t equals the whole sequence", "ja": "オフセット t で 1 トークンずつ処理した結果は、系列全体を一度に処理した結果と一致します"}
module = SinusoidalPositionalEncoding(32)
x = torch.randn(2, 7, 32)
table = sinusoidal(torch.arange(7), 32)  # rows PE(0) ... PE(6), built once
for t in range(7):  # one token at a time at offset t, as with a KV cache
    step = module(x[:, t : t + 1], offset=t)
    assert_close(step, x[:, t : t + 1] + table[t])  # x_t + PE(t), not PE(0)
    assert_close(step, module(x)[:, t : t + 1])  # same as the whole sequence

# %% [markdown] lang="en"
# ## What to remember
#
# - $PE(p)$ holds $\sin(\omega_i p)$ and $\cos(\omega_i p)$ for $n = d/2$ frequencies
#   $\omega_i = 10000^{-i/n}$. Each pair is a clock hand that turns $\omega_i$ radians
#   per position; fast hands separate neighbours, slow hands distant positions.
# - The wavelengths grow geometrically from $2\pi$ and stop one ratio short of
#   $10000 \cdot 2\pi$: the smooth version of a binary counter, whose bits have
#   periods $2, 4, 8, \dots$
# - The base sets the slowest hand: $100$ wraps every hand within a few hundred
#   positions, $10^6$ leaves nearly half the hands nearly still over 2048 positions,
#   $10000$ lies between.
# - A shift is a rotation: $PE(p+k) = M_k\,PE(p)$ with blocks
#   $B(k\omega_i) = R(-k\omega_i)$, clockwise like the hands. It needs both the sine
#   and the cosine of each pair.
# - $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ depends only on the distance
#   and is symmetric. Inside attention the weights can undo both: random weights
#   mix in the absolute positions, $W_K = M_k$ tells before from after.
# - Pass positions, not lengths (an `offset` with a KV cache).

# %% [markdown] lang="ja"
# ## まとめ
#
# - $PE(p)$ は、$n = d/2$ 個の周波数 $\omega_i = 10000^{-i/n}$ について $\sin(\omega_i p)$ と $\cos(\omega_i p)$ を並べたものです。
#   各ペアは位置 1 つあたり $\omega_i$ ラジアン回る時計の針です。速い針は隣どうしを、遅い針は離れた位置どうしを見分けます。
# - 波長は $2\pi$ から等比数列で伸びます。最後の波長は $10000 \cdot 2\pi$ には届かず、それを公比で 1 回割った値です。
#   全体は、ビットの周期が $2, 4, 8, \dots$ である 2 進カウンタを滑らかにしたものです。
# - 底は最も遅い針を決めます。$100$ ではすべての針が位置にして数百以内に 1 周し、$10^6$ では長さ 2048 でも針の半分近くがほとんど動きません。
#   $10000$ はその間です。
# - ずらすことは回転することです。$PE(p+k) = M_k\,PE(p)$ で、ブロックは $B(k\omega_i) = R(-k\omega_i)$、針と同じく時計回りです。
#   これには各ペアの正弦と余弦の両方が必要です。
# - $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ は距離だけで決まり、対称です。
#   アテンションの中では、重みによってはこの両方が崩れます。ランダムな重みでは絶対位置が混ざり、$W_K = M_k$ なら前後を区別できます。
# - 長さではなく位置を渡します（KV キャッシュでは `offset`）。
# %% [markdown] lang="en"
# ## Exercises
#
# 1. Write the matrix that maps $PE(p)$ to $PE(p+k)$ in the concatenated layout. (It is
#    $M_k$ with rows and columns permuted.) Check it against
#    `sinusoidal(..., layout="concat")` for a few $p$ and $k$.
# 2. For $d = 8$ the hands turn at $1$, $0.1$, $0.01$ and $0.001$ radian per position.
#    Find the distance $r$ from $1$ to $999$ at which two codes are most alike (the
#    largest $PE(p)\cdot PE(p+r)$), and the most alike from $r = 100$ on. Explain both
#    with the clocks.
# 3. The paper's §3.5 also reports that learned positional embeddings gave
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
# 2. $d = 8$ では、針は位置 1 つあたり $1$、$0.1$、$0.01$、$0.001$ ラジアンで回ります。
#    $1$ から $999$ までの距離 $r$ のうち、2 つの符号が最も似る（$PE(p)\cdot PE(p+r)$ が最大になる）距離と、
#    $r = 100$ 以上で最も似る距離を求めてください。どちらも時計を使って説明してください。
# 3. 論文の §3.5 は、学習型位置埋め込みでもほぼ同じ結果になったと報告しています。
#    表 3 の行 (E) によれば、開発セットでのパープレキシティと BLEU は、学習型位置埋め込みで 4.92 と 25.7、正弦波で 4.92 と 25.8 です。
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
# [*Sinusoids in the wild: pitfalls*](02-sinusoids-in-the-wild.ipynb#the-encoding-is-part-of-a-checkpoint):
# $P M_k P^\top$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 連結配置では、すべてのペアの正弦が先に並び、そのあとに余弦が並びます。
# $C_k = \mathrm{diag}\big(\cos(k\omega_0), \dots, \cos(k\omega_{n-1})\big)$、
# $S_k = \mathrm{diag}\big(\sin(k\omega_0), \dots, \sin(k\omega_{n-1})\big)$ と置きます。
# 2 つの加法定理をすべてのペアへ一度に当てはめると、次のようになります。
# $$PE^{\mathrm{cat}}(p+k) = \begin{pmatrix} C_k & S_k \\ -S_k & C_k \end{pmatrix} PE^{\mathrm{cat}}(p)$$
# 上半分が各ペアの $\sin(\theta+\phi) = \cos\phi\,\sin\theta + \sin\phi\,\cos\theta$、
# 下半分が $\cos(\theta+\phi) = -\sin\phi\,\sin\theta + \cos\phi\,\cos\theta$ です。
# これは $M_k$ の行と列を、[「実装ごとに違う正弦波位置エンコーディング：落とし穴」](02-sinusoids-in-the-wild.ipynb#位置エンコーディングもチェックポイントの一部)の
# 配置の置換 $P$ で並べ替えた $P M_k P^\top$ です。

# %% tags=["solution"]
d, n = 16, 8
omega = 10000.0 ** (-torch.arange(n, dtype=F64) / n)
# concat column c is interleaved column perm[c]
perm = torch.tensor([2 * c if c < n else 2 * (c - n) + 1 for c in range(d)])
P = torch.eye(d, dtype=F64)[perm]
p = torch.tensor([0, 1, 7, 100, 999])
for k in (-7, 1, 3, 50, 1000):
    c, s = torch.diag(torch.cos(k * omega)), torch.diag(torch.sin(k * omega))
    m_cat = torch.cat([torch.cat([c, s], 1), torch.cat([-s, c], 1)], 0)
    pe_cat = sinusoidal(p, d, layout="concat", dtype=F64)
    pe_cat_k = sinusoidal(p + k, d, layout="concat", dtype=F64)
    assert_close(pe_cat @ m_cat.T, pe_cat_k)  # PE_cat(p+k) = M_cat PE_cat(p)
    assert_close(m_cat, P @ shift_matrix(k, d) @ P.T)  # M_cat = P M_k P^T

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The dot product is $\sum_i \cos(\omega_i r)$, the same for every $p$:
# the sum of the cosines of the angles the four hands have turned. Two codes are most
# alike when the hands are all nearly back at twelve o'clock. That happens first at
# $r = 63$, just over $20\pi \approx 62.83$: the fast hand has made ten turns and sits
# 0.17 radian past twelve, the second hand one turn and 0.02 radian, while the slow
# hands have moved only 0.63 and 0.063 radian. The sum is 3.79 of a possible 4. From
# $r = 100$ on, the best is $r = 628$, just under $200\pi \approx 628.32$: the three
# fast hands are just short of 100, 10 and 1 turns, within 0.32 radian of twelve. The
# fastest, 0.32 radian off, accounts for about a fifth of the shortfall from 4; the
# slowest, at 0.63 radian, for nearly all the rest (3.76).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 内積は $\sum_i \cos(\omega_i r)$ で、$p$ によりません。4 本の針が回った角度の余弦の和です。
# 2 つの符号が最も似るのは、すべての針がほぼ 12 時に戻っているときです。
# それが最初に起きるのは $r = 63$ で、$20\pi \approx 62.83$ を少し超えたところです。
# 最も速い針は 10 周して 12 時から 0.17 ラジアン、2 番目の針は 1 周して 0.02 ラジアンの位置にあり、遅い針は 0.63 ラジアンと 0.063 ラジアンしか動いていません。
# 和は最大値 4 に対して 3.79 です。
# $r = 100$ 以上では $r = 628$ が最良で、$200\pi \approx 628.32$ の少し手前です。
# 速い 3 本の針はそれぞれ 100 周、10 周、1 周に少し足りず、12 時から 0.32 ラジアン以内にあります。
# 4 に届かない分のおよそ 5 分の 1 は、0.32 ラジアンずれた最も速い針によるものです。残りのほぼすべては、0.63 ラジアンの位置にある最も遅い針によるものです（3.76）。

# %% tags=["solution"]
r = torch.arange(1, 1000)
codes = sinusoidal(torch.cat([torch.tensor([0]), r]), 8, dtype=F64)
alike = codes[1:] @ codes[0]  # PE(0) . PE(r)
speeds = torch.tensor([1, 0.1, 0.01, 0.001], dtype=F64)
assert_close(alike, torch.cos(r[:, None] * speeds).sum(-1))
best = int(r[alike.argmax()])
far = r >= 100
best_far = int(r[far][alike[far].argmax()])
assert (best, best_far) == (63, 628)
assert round(float(alike[best - 1]), 2) == 3.79
assert round(float(alike[best_far - 1]), 2) == 3.76
turned = best_far * speeds  # the hands' angles at r = 628
past_twelve = (turned + math.pi) % (2 * math.pi) - math.pi  # in [-pi, pi)
assert (past_twelve[:3].abs() < 0.32).all() and 0.62 < past_twelve[3] < 0.63
assert (past_twelve[:3] < 0).all()  # just short of 100, 10 and 1 turns
shortfall = 1 - torch.cos(past_twelve)  # each hand's share of 4 - 3.76
assert 0.18 < shortfall[0] / shortfall.sum() < 0.23  # about a fifth
assert shortfall[1:3].sum() / shortfall.sum() < 0.01  # the slowest: the rest
at_63 = (best * speeds + math.pi) % (2 * math.pi) - math.pi
assert [round(float(a), 2) for a in at_63] == [0.17, 0.02, 0.63, 0.06]
print(
    f"most alike: r = {best} ({alike[best - 1]:.2f}); from 100 on: r = "
    f"{best_far} ({alike[best_far - 1]:.2f})",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** The dot product $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$
# depends only on the offset $p - q$: the Gram matrix is constant along its
# diagonals, for every pair of positions, including positions never seen in
# training. (Equivalently, $PE(p+k) = M_k\,PE(p)$ for one orthogonal matrix
# per offset; a shift map that is not orthogonal need not make the Gram matrix
# constant along its diagonals, as $PE(p) = 2^p$ shows.) A
# learned table gets this only if training shapes it so; at initialisation it has
# none of it. Compare the sinusoids with a table drawn as GPT-2 draws
# its own ($N(0, 0.01^2)$, as in the chapter
# [*Learned absolute embeddings*](03-learned-embeddings.ipynb)): along a diagonal
# its Gram matrix spreads about as much as over the whole matrix, and no linear
# map sends row $p$ to row $p + 1$ (the best one leaves most of the row
# unexplained).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 内積 $PE(p)\cdot PE(q) = \sum_i \cos\big(\omega_i(p-q)\big)$ は相対位置 $p - q$ だけで決まります。
# グラム行列は、学習で一度も見なかった位置を含むどの位置の組についても、対角線に沿って一定です。
# 同じことですが、ずらし量ごとに 1 つの直交行列で $PE(p+k) = M_k\,PE(p)$ とも書けます。
# ずらす写像が直交でなければ、グラム行列が対角線に沿って一定になるとは限りません（$PE(p) = 2^p$ がその例です）。
# 学習型の表がこの性質を持つのは、学習がそう仕上げた場合だけで、初期化の時点ではまったく持っていません。
# 正弦波と、GPT-2 と同じように引いた表
# （[「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章と同じ $N(0, 0.01^2)$）を比べてみます。
# 引いた表のグラム行列は、1 本の対角線に沿っても、行列全体とほぼ同じくらいばらつきます。
# また、行 $p$ を行 $p + 1$ に移す線形写像もありません（最良のものでも、行の大部分を説明できません）。

# %% tags=["solution"]
gen = torch.Generator().manual_seed(0)
d, rows = 64, 512
sines = sinusoidal(torch.arange(rows), d, dtype=F64)
drawn = 0.01 * torch.randn(rows, d, dtype=F64, generator=gen)


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
# ## Sources and versions
#
# The formula, the quoted range of wavelengths and the results with learned
# embeddings (Table 3, row (E)) are from §3.5 and Table 3 of Vaswani et al. (2017),
# read in its arXiv version. The binary-counter picture follows Kazemnejad (2019).
# The libraries that divide by $n-1$, with their versions, are listed in
# [*Sinusoids in the wild: pitfalls*](02-sinusoids-in-the-wild.ipynb#sources-and-versions).
#
# ### References
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - Kazemnejad, A. (2019). *Transformer Architecture: The Positional Encoding*.
#   <https://kazemnejad.com/blog/transformer_architecture_positional_encoding/>
# - Yan, H. et al. (2019). *TENER: Adapting Transformer Encoder for Named Entity
#   Recognition*. <https://arxiv.org/abs/1911.04474>
# - Ke, G., He, D., Liu, T.-Y. (2021). *Rethinking Positional Encoding in Language
#   Pre-training*. ICLR 2021. <https://arxiv.org/abs/2006.15595>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# 式、引用した波長の範囲、学習型の埋め込みでの結果（表 3 の行 (E)）は、Vaswani ら（2017）の §3.5 と表 3 によります。参照したのは arXiv 版です。
# 2 進カウンタのたとえは Kazemnejad（2019）にならいました。
# $n-1$ で割るライブラリとそのバージョンは、[「実装ごとに違う正弦波位置エンコーディング：落とし穴」](02-sinusoids-in-the-wild.ipynb#出典とバージョン)の章にまとめています。
#
# ### 参考文献
#
# - Vaswani, A. et al. (2017). *Attention Is All You Need*. NeurIPS 2017, §3.5.
#   <https://arxiv.org/abs/1706.03762>
# - Kazemnejad, A. (2019). *Transformer Architecture: The Positional Encoding*.
#   <https://kazemnejad.com/blog/transformer_architecture_positional_encoding/>
# - Yan, H. et al. (2019). *TENER: Adapting Transformer Encoder for Named Entity
#   Recognition*. <https://arxiv.org/abs/1911.04474>
# - Ke, G., He, D., Liu, T.-Y. (2021). *Rethinking Positional Encoding in Language
#   Pre-training*. ICLR 2021. <https://arxiv.org/abs/2006.15595>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>
