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
# # Extending RoPE's context
#
# A model with rotary position embedding (RoPE) is trained on sequences of some
# length $L$ and later asked to read longer ones. Past $L$, some of its rotation
# angles take values that training never produced, and such models degrade there:
# Sun et al. (2022), comparing encodings by input length, report for a RoPE model
# trained on 1024 tokens a [perplexity](../docs/glossary.md#perplexity) of 25.52 at
# 1024 tokens, 73.6 at 2048 and 294.45 at 4096, and the chapter
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb) measures the same
# on small models trained here. Every method in this chapter changes only the
# frequencies $\theta_i$
# of RoPE (YaRN and LongRoPE also multiply the queries and keys by one constant),
# so the architecture and the
# weights stay as they are; a short [fine-tuning](../docs/glossary.md#fine-tuning), or none, does the rest.
#
# We first count which frequencies are at risk. Then we derive, from the
# [wavelengths](../docs/glossary.md#wavelength), [position interpolation](../docs/glossary.md#position-interpolation), the NTK-aware change of base and its dynamic
# form, YaRN (with the variant of its attention factor that DeepSeek-V2 and V3
# use), Llama 3's scaling and Phi-3's LongRoPE, whose factors come from a search
# rather than a formula; check each against `posenc.rope_frequencies`, against
# numbers from Hugging Face transformers and, where a model ships its settings,
# against that model's configuration; and show when they keep RoPE's relative
# property and when they do not. The chapter ends with the settings of released
# models and how Hugging Face names each method.

# %% [markdown] lang="ja"
# # RoPE のコンテキスト長を伸ばす
#
# 回転位置埋め込み（RoPE）を使うモデルは、ある長さ $L$ の系列で学習されます。
# そのモデルに、あとからもっと長い系列を読ませたいとします。
# $L$ を超えると、一部の回転角が学習中には一度も現れなかった値になり、そこでモデルの性能が落ちます。
# Sun ら（2022）は位置エンコーディングを入力の長さごとに比べ、1024 トークンで学習した RoPE のモデルの[パープレキシティ](../docs/glossary.ja.md#perplexity)を報告しています。
# 1024 トークンで 25.52、2048 で 73.6、4096 で 294.45 です。
# 「[どの位置エンコーディングが外挿できるか](11-length-generalisation.ipynb)」の章は、このサイトで学習した小さなモデルを使って同じことを測ります。
# この章で扱う手法はどれも、RoPE の周波数 $\theta_i$ だけを変えます（YaRN と LongRoPE は、さらにクエリとキーに定数を 1 つ掛けます）。
# モデルの構造と重みはそのままで、あとは短い[ファインチューニング](../docs/glossary.ja.md#fine-tuning)を行うか、それすら行わないかのどちらかです。
#
# まず、どの周波数が問題になるのかを数えます。
# 次に、[波長](../docs/glossary.ja.md#wavelength)から出発していくつかの規則を導きます。
# [位置補間](../docs/glossary.ja.md#position-interpolation)、NTK-aware の底の変更とその動的版、YaRN、Llama 3 のスケーリングです。
# YaRN については、DeepSeek-V2 と V3 が使うアテンションの係数の変種も扱います。
# 続いて、式ではなく探索で係数を決める Phi-3 の LongRoPE を扱います。
# それぞれを `posenc.rope_frequencies` で確かめ、Hugging Face transformers の数値とも照らし合わせます。モデルが設定を公開している場合は、その設定とも比べます。
# さらに、RoPE の相対位置の性質がどんなときに保たれ、どんなときに崩れるかを示します。
# 最後に、公開されているモデルの設定と、Hugging Face での各手法の呼び名をまとめます。

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    YarnScaling,
    apply_rope,
    rope_frequencies,
)
from posenc_lab.plotting import INK, use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64
two_pi = 2 * math.pi

# %% [markdown] lang="en"
# ## Wavelengths against the training context
#
# RoPE (Su et al. 2021; the chapter
# [*Rotary position embedding (RoPE)*](08-rope.ipynb)) rotates pair
# $i$ of a query or key at position $m$ by the angle $m\theta_i$, with the frequencies
# $$\theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, d/2 - 1$$
# for head size $d$ and base $b$. The wavelength of pair $i$ (the number of positions
# for one full turn) and the [number of turns](../docs/glossary.md#number-of-turns) it makes over the [training context](../docs/glossary.md#training-length) $L$
# are
# $$\lambda_i = \frac{2\pi}{\theta_i} = 2\pi\, b^{2i/d}, \qquad r_i = \frac{L}{\lambda_i}$$
# The wavelengths grow geometrically with $i$, so one index separates the pairs that
# turn more than $\beta$ times within $L$ from the others. Solving $r_i = \beta$ for $i$:
# $$\frac{L}{2\pi\, b^{2i/d}} = \beta \quad\Longleftrightarrow\quad i = i_\beta = \frac{d \ln\left(L/(2\pi\beta)\right)}{2\ln b}$$
# Pair $i$ completes at least one turn within $L$ ($r_i \ge 1$) exactly when
# $i \le i_1$. Training has shown such a pair its whole circle, at steps of $\theta_i$;
# a longer input brings no angle outside the range it has seen. A pair with $r_i < 1$
# has seen only the arc from $0$ to $(L-1)\theta_i$, and beyond $L$ it moves into angles
# the model has never seen. Taken one pair at a time, then, only the slow pairs meet
# new angles past $L$. That is not the only novelty. A score sums over all pairs,
# and at a distance of $L$ or more the fast pairs together take a combination of
# angles that no trained distance produced: the cell finds, for Llama 2, that pair 0
# alone comes within $10^{-3}$ radian of an angle it took in training, while pairs 0
# to 45 together stay at least 1 radian away from every trained combination. That
# minimum of 1 radian is met only by a trained distance one position away (pair 0's
# step); against every trained distance two or more positions away, the gap is at
# least 2 radians. And a longer input spreads attention over more
# keys than training ever did. The methods below mend the slow pairs' angles; the
# chapter [*Which encodings extrapolate?*](11-length-generalisation.ipynb) shows a
# small RoPE model that fails past $L$ and recovers when the keys beyond the trained
# distances are hidden.
#
# The cell counts both kinds for head size $d = 128$ in two settings: Llama 2
# (base $10^4$, $L = 4096$) and Llama 3 (base $5 \cdot 10^5$, $L = 8192$). In
# Llama 2, 46 of the 64 pairs turn fully within the context and 18 never do; pair 45
# only just makes it, with a wavelength of 4080 positions. Llama 3's larger base
# stretches every wavelength but pair 0's ($2\pi$ for any base): although its context is twice as long, only 35 pairs
# complete a turn within it and 29 do not.

# %% [markdown] lang="ja"
# ## 学習時の長さと波長
#
# RoPE（Su ら 2021、「[回転位置埋め込み（RoPE）](08-rope.ipynb)」の章）は、位置 $m$ のクエリやキーのペア $i$ を角度 $m\theta_i$ だけ回転させます。
# ヘッドの次元数を $d$、底を $b$ とすると、周波数は次のとおりです。
# $$\theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, d/2 - 1$$
# ペア $i$ の波長（ちょうど 1 周するのに必要な位置の数）と、
# [学習時の長さ](../docs/glossary.ja.md#training-length) $L$ の間の[回転数](../docs/glossary.ja.md#number-of-turns)（何周するか）は次のとおりです。
# $$\lambda_i = \frac{2\pi}{\theta_i} = 2\pi\, b^{2i/d}, \qquad r_i = \frac{L}{\lambda_i}$$
# 波長は $i$ について等比数列をなして伸びるので、$L$ の間に $\beta$ 回より多く回るペアとそれ以外とは、
# ある 1 つの番号を境に分かれます。$r_i = \beta$ を $i$ について解くと、その境が求まります。
# $$\frac{L}{2\pi\, b^{2i/d}} = \beta \quad\Longleftrightarrow\quad i = i_\beta = \frac{d \ln\left(L/(2\pi\beta)\right)}{2\ln b}$$
# ペア $i$ が $L$ の間に少なくとも 1 周する（$r_i \ge 1$）ことと、$i \le i_1$ であることは同値です。
# そのようなペアは、学習中に円周全体を $\theta_i$ 刻みで見ています。系列が長くなっても、見たことのある範囲の外の角度は現れません。
# 一方、$r_i < 1$ のペアが見たのは $0$ から $(L-1)\theta_i$ までの弧だけです。
# $L$ を超えると、モデルが一度も見たことのない角度に入っていきます。
# つまりペアを 1 つずつ見れば、$L$ の先で新しい角度に出会うのは回転の遅いペアだけです。
# ただし、新しいのはそれだけではありません。スコアはすべてのペアの和です。
# 距離が $L$ 以上になると、速いペアが全体として取る角度の組み合わせは、学習中のどの距離でも現れなかったものになります。
# 下のセルで Llama 2 について確かめます。ペア 0 だけを見れば、調べたどの距離でも、学習中に取った角度のどれかから $10^{-3}$ ラジアン以内にあります。
# ところがペア 0 から 45 をまとめて見ると、学習中のどの組み合わせからも少なくとも 1 ラジアン離れています。
# 差が最小の 1 ラジアンになるのは、学習中の距離のうち新しい距離と 1 位置しか違わないもの（ペア 0 の 1 歩分）と比べたときだけです。
# 2 位置以上違う距離とは、少なくとも 2 ラジアン離れています。
# さらに、長い入力では、アテンションが学習中より多くのキーに分散します。
# 以下の手法が直すのは遅いペアの角度です。
# 「[どの位置エンコーディングが外挿できるか](11-length-generalisation.ipynb)」の章では、RoPE を使う小さなモデルが $L$ の先で失敗し、
# 学習した距離より遠いキーを隠すと回復する様子を示します。
#
# 下のセルでは、$d = 128$ の 2 つの設定について、1 周するペアとしないペアを数えます。
# Llama 2（底 $10^4$、$L = 4096$）と Llama 3（底 $5 \cdot 10^5$、$L = 8192$）です。
# Llama 2 では、64 組のうち 46 組がコンテキスト内で 1 周し、18 組は 1 周もしません。
# ペア 45 は波長 4080 位置で、ぎりぎり 1 周します。
# Llama 3 は底が大きいので、ペア 0 以外のすべての波長が伸びます（ペア 0 の波長は底によらず $2\pi$ です）。
# コンテキストが 2 倍長いにもかかわらず、1 周するのは 35 組だけで、29 組は 1 周しません。


# %%
def turn_index(beta, d, b, L):
    """i_beta: the (fractional) pair index that turns beta times within L."""
    return d * math.log(L / (two_pi * beta)) / (2 * math.log(b))


d = 128
i = torch.arange(d // 2, dtype=f64)
settings = (("Llama 2", 1e4, 4096), ("Llama 3", 5e5, 8192))
lines = []
for name, b, L in settings:
    theta = rope_frequencies(d, base=b).double()
    # theta_i = b^(-2i/d)
    assert_close(theta, b ** (-2 * i / d), rtol=1e-6, atol=0)
    lam = two_pi / theta  # lambda_i = 2 pi b^(2i/d)
    assert_close(lam, two_pi * b ** (2 * i / d), rtol=1e-6, atol=0)
    r = L / lam  # turns within L
    i_1 = turn_index(1, d, b, L)
    # counted on the library's frequencies; i_1 is printed next to the count
    # (turn_index is checked against Hugging Face's YaRN band in that section)
    full = r >= 1
    assert math.isclose(lam[0], two_pi)  # pair 0: 2 pi for any base
    n_full = int(full.sum())
    lines.append(
        f"{name}: i_1 = {i_1:.2f}, {n_full} pairs turn within L, "
        f"{d // 2 - n_full} never;\n"
        f"  lambda_{n_full - 1} = {lam[n_full - 1]:.0f}, "
        f"lambda_{n_full} = {lam[n_full]:.0f}"
    )

# Llama 2 beyond L: the angles of 64 distances in [L, 2L) against those of the
# trained distances 0..L-1, for pair 0 alone and for the 46 fast pairs together
b, L = settings[0][1:]
theta = rope_frequencies(d, base=b).double()
new = torch.linspace(L, 2 * L - 1, 64, dtype=f64).round()
seen = torch.arange(L, dtype=f64)


def nearest_trained(pairs):
    """For each new distance: the closest trained one, by its worst pair."""
    gap = (new[:, None, None] - seen[None, :, None]) * theta[pairs]
    wrapped = torch.remainder(gap + math.pi, two_pi) - math.pi  # in [-pi, pi)
    return wrapped.abs().amax(-1).amin(-1)  # (64,) radians


alone, together = nearest_trained([0]), nearest_trained(slice(0, 46))
# the gap as a function of the difference delta = new - trained, 1..2L-1
delta = torch.arange(1, 2 * L, dtype=f64)
wrap = torch.remainder(delta[:, None] * theta[:46] + math.pi, two_pi) - math.pi
by_delta = wrap.abs().amax(-1)
assert alone.max() < 1e-3 and together.min() > 1 - 1e-9
assert math.isclose(by_delta[0], 1.0)  # delta = 1: pair 0's step, 1 rad
assert by_delta[1:].min() > 2 - 1e-9  # delta >= 2: at least 2 rad
lines.append(
    f"Llama 2, 64 distances in [L, 2L): pair 0 within {alone.max():.1e} rad "
    f"of a trained angle;\n  pairs 0-45 together at least "
    f"{together.min():.2f} rad from every trained combination,\n"
    f"  {by_delta[1:].min():.2f} rad from every one two or more positions away"
)
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# On a logarithmic axis the wavelengths are straight lines; each dotted line marks
# the training length $L$ of its setting. Filled dots turn at least once within $L$,
# hollow ones never do.

# %% [markdown] lang="ja"
# 対数軸では、波長は直線になります。点線は、それぞれの設定の学習時の長さ $L$ です。
# 塗りつぶした点は $L$ の間に少なくとも 1 周するペア、白抜きの点は 1 周しないペアです。

# %% alt={"en": ["RoPE wavelength per pair i on a log axis for base 10^4, L = 4096 and base 5·10^5, L = 8192, dotted lines at L. Filled dots, pairs 0–45 and 0–34, turn at least once within L; the hollow dots above the line never complete a turn."], "ja": ["底 10^4、L = 4096 の場合と、底 5·10^5、L = 8192 の場合の RoPE の波長を、ペア i ごとに対数軸で描いた図。点線は L の位置です。塗りつぶした点（ペア 0〜45 と 0〜34）は L の間に少なくとも 1 周し、点線より上の白抜きの点は 1 周もしません。"]}
fig, ax = plt.subplots(figsize=(6.4, 3.4))
labels = (r"$b = 10^4,\ L = 4096$", r"$b = 5 \cdot 10^5,\ L = 8192$")
for (_, b, L), label, color in zip(settings, labels, ("C0", "C1"), strict=True):
    lam = two_pi / rope_frequencies(d, base=b).double()
    full = lam <= L
    ax.plot(i[full], lam[full], "o", ms=3.5, color=color, label=label)
    ax.plot(i[~full], lam[~full], "o", ms=3.5, mfc="none", color=color)
    ax.axhline(L, color=color, lw=1, ls=":")
ax.set(yscale="log", xlabel="$i$", ylabel=r"$\lambda_i$")
ax.legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# ## Position interpolation
#
# The simplest fix keeps every angle inside the trained range by squeezing the
# positions. To read $sL$ positions with a model trained on $L$, Chen et al. (2023),
# and independently kaiokendev, feed position $m$ as $m/s$. The angle is a product,
# so dividing the position is the same as dividing the frequency:
# $$\frac{m}{s}\,\theta_i = m\,\frac{\theta_i}{s}, \qquad \theta'_i = \frac{\theta_i}{s}$$
# Position interpolation (PI) is therefore a change of frequencies: rotating position
# $m$ with $\theta'_i$ is rotating the fractional position $m/s$ with $\theta_i$.
# Hugging Face (`rope_type="linear"`) and `posenc.LinearScaling(s)` implement it on
# the frequencies. The cell checks the equivalence with `apply_rope` for $s = 4$ at all
# positions up to $sL$. The last of them, $m = sL - 1$, therefore acts as the position
# $L - 1/s$ and reaches $(L - 1/s)\theta_i$:
# past the last trained angle $(L-1)\theta_i$ by $(1 - 1/s)\theta_i$, less than one
# step, and below $L\theta_i$, the angle of the first position past the trained
# context. In this chapter an angle counts as inside the trained range when it
# stays below $L\theta_i$, that is, less than one step past the trained arc.
#
# The price is resolution: neighbouring tokens are now only $\theta_i/s$ apart in
# angle. For the fastest pair that is $1/s$ radian instead of $1$, so the model must
# tell apart angles closer than any it was trained to separate. Chen et al. adapt it
# with a short fine-tuning (within 1000 steps). In the figure, PI moves the whole line
# of frequencies down by the same factor; the ratio $\theta'_i/\theta_i$ (right) is
# $1/s$ for every pair.

# %% [markdown] lang="ja"
# ## 位置補間
#
# いちばん単純な対策は、位置を縮めて、すべての角度を学習した範囲に収めることです。
# $L$ で学習したモデルに $sL$ 個の位置を読ませるため、Chen ら（2023）は
# 位置 $m$ を $m/s$ として与えました（kaiokendev も独立に同じことをしています）。
# 角度は積なので、位置を割ることは周波数を割ることと同じです。
# $$\frac{m}{s}\,\theta_i = m\,\frac{\theta_i}{s}, \qquad \theta'_i = \frac{\theta_i}{s}$$
# したがって位置補間（PI）は周波数の変更です。
# 位置 $m$ を $\theta'_i$ で回すことは、非整数の位置 $m/s$ を $\theta_i$ で回すことと同じです。
# Hugging Face（`rope_type="linear"`）と `posenc.LinearScaling(s)` は、どちらも周波数の側で実装しています。
# 下のセルでは、$s = 4$ として $sL$ までのすべての位置でこの等価性を `apply_rope` で確かめます。
# この等価性から、最後の位置 $m = sL - 1$ は位置 $L - 1/s$ として働き、その角度は $(L - 1/s)\theta_i$ になります。
# これは学習中の最後の角度 $(L-1)\theta_i$ を $(1 - 1/s)\theta_i$ だけ、つまり 1 歩未満だけ超えますが、
# 学習したコンテキストの直後の位置の角度 $L\theta_i$ よりは小さくなります。
# この章では、$L\theta_i$ より小さい角度（学習した弧から 1 歩未満の角度）を、学習した範囲の内側とみなします。
#
# 代償は分解能です。隣り合うトークンの角度の差は $\theta_i/s$ に縮みます。
# 最も速いペアの場合、差は $1$ ラジアンではなく $1/s$ ラジアンになり、
# モデルは学習中に区別したことのない近さの角度を見分けなければなりません。
# Chen らは短いファインチューニング（1000 ステップ以内）でモデルを慣らしています。
# 図では、PI が周波数の線全体を同じ割合で下に動かしています。比 $\theta'_i/\theta_i$（右）はどのペアでも $1/s$ です。

# %% alt={"en": ["Position interpolation with s = 4. Left: original and scaled frequencies against pair i on a log axis, the scaled line parallel and lower. Right: their ratio is 1/4 for every pair."], "ja": ["s = 4 の位置補間。左は元の周波数と補間後の周波数をペア i に対して対数軸で描いたもので、補間後の線は平行に下へずれます。右の両者の比は、どのペアでも 1/4 です。"]}
b, L, s = 1e4, 4096, 4
theta = rope_frequencies(d, base=b).double()

pi = LinearScaling(s)
theta_pi = rope_frequencies(d, base=b, scaling=pi).double()
assert_close(theta_pi, theta / s, rtol=1e-6, atol=0)  # theta'_i = theta_i / s

x = torch.randn(s * L, d, dtype=f64)
m = torch.arange(s * L)
# theta / s at m is theta at m / s
assert_close(apply_rope(x, m, scaling=pi), apply_rope(x, m / s))


def compare_figure(theta, scaled, s, marks=(), extra=None):
    """theta_i and theta'_i (left), their ratio (right); log y over pair i."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3.0))
    left.plot(theta, color=INK, ls="--", label=r"$\theta_i$")
    left.plot(scaled, color="C0", label=r"$\theta'_i$")
    left.set(yscale="log", xlabel="$i$", ylabel=r"$\theta_i,\ \theta'_i$")
    left.legend(loc="lower left")
    right.plot(scaled / theta, color="C0", label=extra and extra[0])
    if extra:
        right.plot(extra[1], color="C1", ls="--", label=extra[2])
        right.legend(loc="lower left")
    ticks = [2.0**-k for k in range(int(math.log2(s)) + 1)]
    right.set(yscale="log", xlabel="$i$", ylabel=r"$\theta'_i / \theta_i$")
    right.set(
        yticks=ticks,
        yticklabels=["$1$"] + [f"$1/{2**k}$" for k in range(1, len(ticks))],
    )
    right.set_ylim(ticks[-1] / 1.25, 1.25)
    right.minorticks_off()
    for ax in (left, right):
        for x in marks:
            ax.axvline(x, color=INK, lw=0.8, ls=":")
    return fig


compare_figure(theta, theta_pi, s)
plt.show()

# %% [markdown] lang="en"
# ## NTK-aware scaling: a larger base
#
# bloc97 (2023) argued that PI spends its compression where it hurts: the fast pairs,
# which tell neighbouring tokens apart, already turn many times within $L$ and gain
# nothing from interpolation. (The name refers to neural tangent kernel (NTK) theory,
# in which networks learn high frequencies poorly unless their inputs carry them.)
# bloc97's post gives the rule as a new base, $b' = b\,s^{d/(d-2)}$, the formula also
# in the YaRN repository's `LlamaNTKScaledRotaryEmbedding`; the reading below, which
# leaves the fastest pair alone and divides the slowest by the full factor $s$,
# follows Peng et al.'s (2023) account of it. A new base changes all frequencies at
# once rather than one by one.
# The fastest pair, $\theta_0 = b^0 = 1$, does not depend on the base at all. The
# slowest, $i = d/2 - 1$, has $\theta_{d/2-1} = b^{-(d-2)/d}$; asking that it be divided
# by $s$ fixes the base:
# $$b'^{-(d-2)/d} = \frac{b^{-(d-2)/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(d-2)}$$
# Every pair in between is divided by a power of $s$ that grows from $1$ to $s$ with $i$:
# $$\theta'_i = b'^{-2i/d} = \theta_i\, s^{-2i/(d-2)}$$
# `posenc.NTKScaling(s)` is this change of base; the cell checks both formulas against
# `rope_frequencies` for $s = 4$.
#
# NTK-aware scaling does not interpolate the slow pairs fully, though. Over the
# extended context $sL$, pair $i$ reaches the angle
# $sL\theta'_i = L\theta_i\, s^{1-2i/(d-2)}$, more than the trained $L\theta_i$ for every
# $i < d/2 - 1$. For a pair that never completed a turn in training, that is an angle
# outside its trained range. The cell counts such pairs for Llama 2 and $s = 4$: 17 of
# the 18 slow pairs; only the last pair, divided by exactly $s$, stays below
# $L\theta_i$. Against the last trained angle $(L-1)\theta_i$ it too overshoots, by
# $(1 - 1/s)\theta_i$ as in PI, less than one step. Peng et al.
# (2023) point out these "out-of-bound" values, and that in practice the factor of
# NTK-aware scaling must therefore be set higher than the intended extension.

# %% [markdown] lang="ja"
# ## NTK-aware スケーリング：底を大きくする
#
# bloc97（2023）は、PI は圧縮すべきでないところまで圧縮している、と主張しました。
# 速いペアは隣り合うトークンを見分ける役目を持ち、$L$ の間にすでに何周もしているので、補間しても得るものがありません。
# 名前はニューラルタンジェントカーネル（NTK）の理論に由来します。
# この理論では、入力が高い周波数を含まない限り、ネットワークは高い周波数をうまく学習できません。
# bloc97 の投稿は、この規則を新しい底 $b' = b\,s^{d/(d-2)}$ として示しています。
# 同じ式は YaRN のリポジトリの `LlamaNTKScaledRotaryEmbedding` にもあります。
# 最も速いペアはそのままにし、最も遅いペアをちょうど係数 $s$ で割る、という以下の解釈は、Peng ら（2023）の説明に従ったものです。
# 新しい底は、周波数を 1 つずつではなく一度にすべて変えます。
# 最も速いペアの周波数 $\theta_0 = b^0 = 1$ は、そもそも底によりません。
# 最も遅いペア $i = d/2 - 1$ は $\theta_{d/2-1} = b^{-(d-2)/d}$ です。
# これが $s$ で割られるという条件から、底が決まります。
# $$b'^{-(d-2)/d} = \frac{b^{-(d-2)/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(d-2)}$$
# 間のペアは、$i$ とともに $1$ から $s$ まで大きくなる $s$ のべきで割られます。
# $$\theta'_i = b'^{-2i/d} = \theta_i\, s^{-2i/(d-2)}$$
# `posenc.NTKScaling(s)` はこの底の変更です。下のセルで、$s = 4$ について両方の式を `rope_frequencies` と照らし合わせます。
#
# ただし、NTK-aware スケーリングは遅いペアを完全には補間しません。
# 伸ばしたコンテキスト $sL$ の間に、ペア $i$ は角度 $sL\theta'_i = L\theta_i\, s^{1-2i/(d-2)}$ に達します。
# これは $i < d/2 - 1$ のすべてのペアで、学習時の $L\theta_i$ より大きい値です。
# 学習中に 1 周もしなかったペアにとって、それは学習した弧の外の角度です。
# 下のセルで、Llama 2 と $s = 4$ についてそのようなペアを数えます。遅いペア 18 組のうち 17 組です。
# ちょうど $s$ で割られる最後のペアだけが、$L\theta_i$ より小さい範囲にとどまります。
# 一方、学習中の最後の角度 $(L-1)\theta_i$ と比べると、このペアも PI と同じく $(1 - 1/s)\theta_i$（1 歩未満）だけ超えます。
# Peng ら（2023）はこの「範囲外」の値を指摘し、そのため実際には NTK-aware スケーリングの係数を、
# 目標とする伸び率より大きく設定しなければならないと述べています。

# %% alt={"en": ["NTK-aware scaling with s = 4. Left: original and scaled frequencies against pair i, log axis, equal at pair 0 and drifting apart. Right: their ratio falls along a straight line on the log axis from 1 at pair 0 to 1/4 at pair 63."], "ja": ["s = 4 の NTK-aware スケーリング。左は元の周波数と変更後の周波数をペア i に対して対数軸で描いたもので、ペア 0 で一致し、しだいに離れます。右の比は対数軸上の直線で、ペア 0 の 1 からペア 63 の 1/4 まで下がります。"]}
ntk = NTKScaling(s)
theta_ntk = rope_frequencies(d, base=b, scaling=ntk).double()

b_new = b * s ** (d / (d - 2))  # b' = b s^(d/(d-2))
ntk_base = rope_frequencies(d, base=b_new).double()
assert_close(theta_ntk, ntk_base, rtol=1e-6, atol=0)
assert_close(theta_ntk[-1], theta[-1] / s, rtol=1e-6, atol=0)  # slowest / s
# theta'_i = theta_i s^(-2i/(d-2))
assert_close(theta_ntk, theta * s ** (-2 * i / (d - 2)), rtol=1e-6, atol=0)
assert theta_ntk[0] == theta[0] == 1  # the fastest pair is untouched

never = L * theta < two_pi  # r_i < 1: no full turn in training
past_arc = s * L * theta_ntk > L * theta * (1 + 1e-6)  # sL theta'_i > L theta_i
assert torch.equal(past_arc, i < d // 2 - 1)
print(
    "slow pairs pushed past their trained arc: "
    f"{int((never & past_arc).sum())} of {int(never.sum())}",
    end="",
)

compare_figure(theta, theta_ntk, s)
plt.show()

# %% [markdown] lang="en"
# ## Dynamic NTK: a factor that grows with the sequence
#
# A fixed factor is a compromise. It changes the frequencies even for short inputs,
# and it still fails beyond $sL$: emozilla's post reports both, a higher perplexity
# than dynamic interpolation on short sequences and a blow-up past the extended
# length (measured on LLaMA). emozilla (2023) proposed to choose the factor from the
# current sequence length $T$, and to
# recompute the frequencies as the sequence grows: no change while $T \le L$, then the
# factor $T/L$. Hugging Face's `rope_type="dynamic"` implements it with its configured
# factor $s$ as a slope (the formula of emozilla's post and of
# `_compute_dynamic_ntk_parameters` in `modeling_rope_utils.py`):
# $$b_T = b\left(\frac{sT}{L} - (s-1)\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# This is the NTK-aware base for the factor $s_T = sT/L - (s-1)$, which is $1$ at
# $T = L$ and grows by $s/L$ per position. With $s = 1$ it is exactly $T/L$. With
# $s = 2$ it grows twice as fast and is already $3$ at $T = 2L$: here Hugging Face's
# `factor` is not the extension ratio. Hugging Face takes $L$ from the model's
# `max_position_embeddings`.
#
# `posenc.DynamicNTKScaling(s, L)` is this rule; the frequencies depend on $T$, given
# as `seq_len` (`apply_rope` and `RotaryEmbedding` take it from the positions, as the
# largest position plus one). The cell checks the library, not a copy of the formula,
# in three ways. First against Hugging Face: the frequencies of pairs 16, 32 and 63
# that transformers 5.24.0 returns for $s = 1$ and $s = 2$ at $T = 2L$, $4L$ and $8L$,
# copied into the cell (a small helper, `check_hf`, makes this comparison here and in
# the later sections). Then against the derivation: for $T > L$ the rule must be the
# NTK-aware scaling of the previous section with the factor $s_T$, so pair $i$ is
# divided by $s_T^{2i/(d-2)}$: pair 0 keeps $\theta_0 = 1$ and the slowest pair is
# divided by exactly $s_T$. And for $T \le L$ the frequencies must be the trained
# ones, whatever $s$ is. The figure shows the frequencies moving down as the sequence
# grows, slow pairs first.
#
# The copied values come from calling Hugging Face's function with the length as a
# Python integer, as `posenc` takes it. Inside a model, Hugging Face passes the length
# as a tensor (the largest position plus one) and so forms the new base in float32
# rather than in Python floats. The frequencies then differ from `posenc`'s in the
# last bit or two of some pairs at some lengths, by about one part in ten million:
# at 5000 positions with $s = 1$, for instance, but not at $2L$, $4L$ or $8L$. The
# cell checks two such pairs at 5000; the difference is of no consequence.

# %% [markdown] lang="ja"
# ## 動的 NTK：系列とともに大きくなる係数
#
# 固定の係数は妥協の産物です。短い入力でも周波数が変わってしまい、しかも $sL$ を超えればやはり壊れます。
# emozilla の投稿は、LLaMA でこの両方を報告しています。短い系列では動的な補間よりパープレキシティが高く、伸ばした長さを超えると急に悪化します。
# emozilla（2023）は、係数をいまの系列長 $T$ から決め、系列が伸びるたびに周波数を計算し直すことを提案しました。
# $T \le L$ の間は何も変えず、それを超えたら係数を $T/L$ にします。
# Hugging Face の `rope_type="dynamic"` は、設定された係数 $s$ を傾きとしてこれを実装しています
# （emozilla の投稿と、`modeling_rope_utils.py` の `_compute_dynamic_ntk_parameters` の式です）。
# $$b_T = b\left(\frac{sT}{L} - (s-1)\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# これは係数 $s_T = sT/L - (s-1)$ に対する NTK-aware の底です。
# この係数は $T = L$ で $1$ になり、位置が 1 つ進むごとに $s/L$ ずつ増えます。
# $s = 1$ ならちょうど $T/L$ です。
# $s = 2$ なら 2 倍の速さで増え、$T = 2L$ ですでに $3$ になります。
# つまりここでは、Hugging Face の `factor` は伸び率そのものではありません。
# Hugging Face は $L$ をモデルの `max_position_embeddings` から取ります。
#
# `posenc.DynamicNTKScaling(s, L)` はこの規則です。周波数は $T$ によって変わり、この長さは `seq_len` で渡します
# （`apply_rope` と `RotaryEmbedding` は、位置の最大値に 1 を足した値を使います）。
# 下のセルでは、式を書き写したものではなくライブラリそのものを 3 通りに確かめます。
# 1 つ目は Hugging Face との比較です。$s = 1$ と $s = 2$、$T = 2L$、$4L$、$8L$ で transformers 5.24.0 が返すペア 16、32、63 の周波数をセルに書き写してあります
# （この比較は小さな補助関数 `check_hf` が行い、後の節でも使います）。
# 2 つ目は導出との比較です。$T > L$ では、この規則は前の節の NTK-aware スケーリングに係数 $s_T$ を入れたものでなければなりません。
# したがってペア $i$ は $s_T^{2i/(d-2)}$ で割られ、ペア 0 は $\theta_0 = 1$ のまま、最も遅いペアはちょうど $s_T$ で割られます。
# 3 つ目は、$T \le L$ では $s$ によらず学習時の周波数のままであることの確認です。
# 図には、系列が伸びるにつれて周波数が下がっていく様子を示します。先に下がるのは遅いペアです。
#
# 書き写した値は、Hugging Face の関数に長さを Python の整数として渡して得たものです（`posenc` も長さをそう受け取ります）。
# モデルの中では、Hugging Face は長さをテンソル（位置の最大値に 1 を足した値）として渡すので、新しい底を Python の浮動小数点数ではなく float32 で計算します。
# すると、いくつかの長さで、一部のペアの周波数が `posenc` と最後の 1、2 ビットだけ、およそ 1000 万分の 1 違います。
# たとえば $s = 1$ の 5000 位置では違い、$2L$、$4L$、$8L$ では違いません。
# セルでは 5000 位置でそのようなペアを 2 つ確かめます。この違いが問題になることはありません。


# %% alt={"en": ["Dynamic NTK: ratio of new to original frequency against pair i on a log axis, for sequence lengths T = L, 2L, 4L, 8L and 16L. At T = L it is 1 everywhere; longer sequences tilt the line further down, reaching L/T at the slowest pair."], "ja": ["動的 NTK：系列長 T = L、2L、4L、8L、16L について、新旧の周波数の比をペア i に対して対数軸で描いた図。T = L ではどこでも 1 で、系列が長いほど線が下に傾き、最も遅いペアで L/T に達します。"]}
def check_hf(theta, hf_values):
    """theta'_i against {i: value} copied from transformers 5.24.0."""
    pairs = list(hf_values)
    expected = torch.tensor(list(hf_values.values()), dtype=f64)
    assert_close(theta.double()[pairs], expected, rtol=1e-6, atol=0)


# transformers 5.24.0 (torch 2.13.0, CPU): ROPE_INIT_FUNCTIONS["dynamic"](
# config, "cpu", seq_len=k * 4096) for a LlamaConfig with head_dim 128,
# max_position_embeddings 4096 and rope_parameters {"rope_type": "dynamic",
# "rope_theta": 1e4, "factor": s}: theta'_16, theta'_32, theta'_63
hf_dynamic = {
    (1.0, 2): (8.385866135e-02, 7.032275666e-03, 5.773909652e-05),
    (1.0, 4): (7.032275200e-02, 4.945289809e-03, 2.886955190e-05),
    (1.0, 8): (5.897172540e-02, 3.477663966e-03, 1.443477413e-05),
    (2.0, 2): (7.565303147e-02, 5.723381881e-03, 3.849273344e-05),
    (2.0, 4): (6.100591272e-02, 3.721721470e-03, 1.649688602e-05),
    (2.0, 8): (5.027014390e-02, 2.527087694e-03, 7.698546142e-06),
}
for s_cfg in (1.0, 2.0, 8.0):
    for T in (1, L // 2, L):  # unchanged for T <= L, whatever s is
        dyn = DynamicNTKScaling(s_cfg, L)
        theta_T = rope_frequencies(d, base=b, scaling=dyn, seq_len=T)
        assert torch.equal(theta_T, rope_frequencies(d, base=b))
rows = []
for k in (2, 4, 8):
    T = k * L
    factors = []
    for s_cfg in (1.0, 2.0):
        dyn = DynamicNTKScaling(s_cfg, L)
        theta_T = rope_frequencies(d, base=b, scaling=dyn, seq_len=T).double()
        hf_T = dict(zip((16, 32, 63), hf_dynamic[s_cfg, k], strict=True))
        check_hf(theta_T, hf_T)
        s_T = s_cfg * T / L - (s_cfg - 1)  # the effective NTK-aware factor
        # NTK-aware with the factor s_T: pair i divided by s_T^(2i/(d-2))
        ntk_T = theta * s_T ** (-2 * i / (d - 2))
        assert_close(theta_T, ntk_T, rtol=1e-6, atol=0)
        assert theta_T[0] == 1  # pair 0 kept (and the slowest divided by s_T)
        factors.append(s_T)
    rows.append(
        f"T = {k}L: s_T = {factors[0]:.0f} (s = 1), {factors[1]:.0f} (s = 2)"
    )
# inside a model Hugging Face passes seq_len as a tensor: a float32 base.
# transformers 5.24.0, the call above with seq_len=torch.tensor(5000), s = 1
hf_tensor_5000 = {18: 7.083604485e-02, 21: 4.556485638e-02}
dyn_5000 = rope_frequencies(
    d, base=b, scaling=DynamicNTKScaling(1.0, L), seq_len=5000
)
check_hf(dyn_5000, hf_tensor_5000)  # within one part in a million
tensor_path = torch.tensor(list(hf_tensor_5000.values()))  # float32
assert (dyn_5000[list(hf_tensor_5000)] != tensor_path).all()  # not bit for bit
print("\n".join(rows), end="")

fig, ax = plt.subplots(figsize=(6.4, 3.0))
ks = (1, 2, 4, 8, 16)
colors = plt.cm.viridis(torch.linspace(0, 0.9, len(ks)).numpy())
dyn_1 = DynamicNTKScaling(1.0, L)
for k, color in zip(ks, colors, strict=True):
    scaled = rope_frequencies(d, base=b, scaling=dyn_1, seq_len=k * L).double()
    ratio = scaled / theta
    ax.plot(ratio, color=color, label=f"$T = {k}L$" if k > 1 else "$T = L$")
ax.set(yscale="log", xlabel="$i$", ylabel=r"$\theta'_i / \theta_i$")
ax.legend(loc="lower left", ncols=2)
plt.show()

# %% [markdown] lang="en"
# Recomputing the frequencies has a catch when keys are cached. If the keys enter the
# [KV cache](../docs/glossary.md#kv-cache) already rotated, as in Hugging Face's Llama, a key cached at an early length
# carries the frequencies of that length while a later query is rotated with newer
# ones, and the score of a query at $m$ and a key at $n$ is no longer a function of
# $m - n$. The check below rotates, with `DynamicNTKScaling`, the key at the length
# $T = L$ and the query at $T = 2L$: shifting both by the same amount changes the
# score, while the same length for both keeps it. Peng et al.
# (2023) note this and recommend caching the keys before the rotation. Exercise 4
# measures the damage over a whole generation.

# %% [markdown] lang="ja"
# 周波数を計算し直すことには、キーをキャッシュするときに落とし穴があります。
# Hugging Face の Llama のように回転済みのキーを [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に入れると、
# 早い時点でキャッシュしたキーはその時点の周波数を持ち、あとのクエリは新しい周波数で回転されます。
# すると、位置 $m$ のクエリと位置 $n$ のキーのスコアは、もはや $m - n$ だけの関数ではありません。
# 下の確認では、`DynamicNTKScaling` を使い、キーを長さ $T = L$ で、クエリを $T = 2L$ で回転させます。
# 両方を同じだけずらすと、スコアが変わります。両方を同じ長さで回転させれば、スコアは変わりません。
# Peng ら（2023）もこの点を指摘し、キーは回転させる前にキャッシュするよう勧めています。
# 生成全体でどれだけずれるかは、演習 4 で測ります。

# %%
q, k = torch.randn(2, d, dtype=f64)
dyn_kv = DynamicNTKScaling(1.0, L)


def score(m, n, len_q, len_k):
    """The query at m rotated for the length len_q, the key at n for len_k."""
    q_m = apply_rope(q, torch.tensor(m), scaling=dyn_kv, seq_len=len_q)
    return q_m @ apply_rope(k, torch.tensor(n), scaling=dyn_kv, seq_len=len_k)


ms = (100, 3000, 8000)
same = torch.stack([score(m, m - 100, 2 * L, 2 * L) for m in ms])
mixed = torch.stack([score(m, m - 100, 2 * L, L) for m in ms])
assert_close(same, same[0].expand(3))  # one set of frequencies: relative
# key and query rotated at different lengths: not relative
assert (mixed - mixed[0]).abs().max() > 0.1

# %% [markdown] lang="en"
# ## YaRN: interpolation by parts, and a temperature
#
# Peng et al. (2023) go back to the wavelengths. A pair that turns many times within
# $L$ needs no interpolation; a pair that never completes a turn should be interpolated
# fully, as in PI, so that it stays inside its trained arc; the pairs in between get a
# blend. Their "NTK-by-parts" rule measures this with the number of turns
# $r_i = L/\lambda_i$ and two thresholds $\alpha < \beta$ (for Llama they recommend
# $\alpha = 1$ and $\beta = 32$). With the [ramp](../docs/glossary.md#ramp-function)
# $$\gamma(r) = \begin{cases} 0, & r < \alpha \\ 1, & r > \beta \\ \dfrac{r - \alpha}{\beta - \alpha}, & \alpha \le r \le \beta \end{cases}$$
# the new frequencies are
# $$\theta'_i = \left(1 - \gamma(r_i)\right)\frac{\theta_i}{s} + \gamma(r_i)\,\theta_i$$
# In pair indices, $r_i > \beta$ means $i < i_\beta$ and $r_i < \alpha$ means $i > i_\alpha$.
# YaRN is this rule plus an [attention temperature](../docs/glossary.md#attention-temperature) (below).
#
# ### The ramp in the code
#
# The paper's own code, Hugging Face's `"yarn"` and `posenc.YarnScaling` compute the
# rule differently. They call the thresholds `beta_fast` ($\beta$) and `beta_slow`
# ($\alpha$), turn them into pair indices with the formula for $i_\beta$ above, round
# the range outward to whole indices, and ramp linearly in the index $i$ rather than
# in $r$; with the default thresholds,
# $$\gamma_i = 1 - \min\left(1, \max\left(0, \frac{i - \lfloor i_{32} \rfloor}{\lceil i_1 \rceil - \lfloor i_{32} \rfloor}\right)\right)$$
# For $s = 4$, $L = 4096$, $d = 128$ and base $10^4$, the cell prints $i_{32} = 20.94$ and
# $i_1 = 45.03$: pairs 0 to 20 are kept, pairs 46 to 63 are divided by $s$, and pairs 21
# to 45 are blended. Outside that band the two ramps agree. Inside, they do
# not: $r_i$ falls geometrically with $i$, so the paper's ramp, linear in $r$, turns
# towards interpolation much earlier than the code's, linear in $i$. The code's
# frequencies range from 0.98 to 1.73 times the paper's. `posenc` follows the code:
# it is what the paper's models were fine-tuned with and what Hugging Face runs.
# The cell checks `YarnScaling` against the ramp written out above and against nine
# frequencies and the attention factor that transformers 5.24.0 returns for this
# setting, copied into the cell.

# %% [markdown] lang="ja"
# ## YaRN：部分ごとの補間と温度
#
# Peng ら（2023）は波長に立ち返りました。
# $L$ の間に何周もするペアは、補間する必要がありません。
# 1 周もしないペアは、学習した弧の内側にとどまるよう、PI と同じく完全に補間すべきです。
# その間のペアには、両者を混ぜたものを使います。
# Peng らの「NTK-by-parts」の規則は、これを回転数 $r_i = L/\lambda_i$ と 2 つのしきい値 $\alpha < \beta$ で測ります
# （Llama に対しては $\alpha = 1$、$\beta = 32$ を推奨しています）。[ランプ関数](../docs/glossary.ja.md#ramp-function)を
# $$\gamma(r) = \begin{cases} 0, & r < \alpha \\ 1, & r > \beta \\ \dfrac{r - \alpha}{\beta - \alpha}, & \alpha \le r \le \beta \end{cases}$$
# とすると、新しい周波数は次のとおりです。
# $$\theta'_i = \left(1 - \gamma(r_i)\right)\frac{\theta_i}{s} + \gamma(r_i)\,\theta_i$$
# ペアの番号で言えば、$r_i > \beta$ は $i < i_\beta$ のこと、$r_i < \alpha$ は $i > i_\alpha$ のことです。
# YaRN は、この規則に[アテンションの温度](../docs/glossary.ja.md#attention-temperature)（後述）を加えたものです。
#
# ### コードの中のランプ関数
#
# 論文の著者のコード、Hugging Face の `"yarn"`、`posenc.YarnScaling` は、この規則を論文とは違う形で計算します。
# しきい値を `beta_fast`（$\beta$）と `beta_slow`（$\alpha$）と呼び、上で導いた $i_\beta$ の式でペアの番号に直します。
# その範囲を外側に丸めて整数にし、$r$ ではなく番号 $i$ について線形なランプ関数を作ります。既定のしきい値では次の式です。
# $$\gamma_i = 1 - \min\left(1, \max\left(0, \frac{i - \lfloor i_{32} \rfloor}{\lceil i_1 \rceil - \lfloor i_{32} \rfloor}\right)\right)$$
# $s = 4$、$L = 4096$、$d = 128$、底 $10^4$ では、下のセルが $i_{32} = 20.94$ と $i_1 = 45.03$ を出力します。
# ペア 0 から 20 はそのまま、ペア 46 から 63 は $s$ で割られ、ペア 21 から 45 は両者を線形に混ぜた値を取ります。
# この帯の外では、2 つのランプ関数は一致します。
# 帯の中では一致しません。$r_i$ は $i$ について等比数列的に減るので、
# $r$ について線形な論文のランプ関数は、$i$ について線形なコードのランプ関数よりずっと早く補間の側へ傾きます。
# コードの周波数は、論文の式の 0.98 倍から 1.73 倍の範囲にあります。
# `posenc` はコードに従います。論文のモデルはこのコードでファインチューニングされ、Hugging Face もこれを実行するからです。
# 下のセルでは、`YarnScaling` を上で書き下したランプ関数と比べ、
# さらに transformers 5.24.0 がこの設定で返す 9 つの周波数とアテンションの係数（セルに書き写してあります）とも比べます。


# %% alt={"en": ["YaRN with s = 4, dotted lines at pairs 20 and 46. Left: frequencies kept up to pair 20, divided by 4 from pair 46, blended in between. Right: ratio to the original; the code's ramp, linear in i, falls later than the paper's, linear in the turns."], "ja": ["s = 4 の YaRN。点線はペア 20 と 46 の位置です。左では周波数がペア 20 までそのまま、46 から 4 分の 1 になり、その間は混ぜ合わされます。右は元の周波数との比で、i について線形なコードのランプは、回転数について線形な論文のランプより遅れて下がります。"]}
def ntk_by_parts(theta, L, s, alpha, beta):
    """The paper's rule: gamma linear in the turns r_i = L theta_i / (2 pi)."""
    r = L * theta / two_pi
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)
    return (1 - gamma) * theta / s + gamma * theta


yarn = YarnScaling(s, L)  # beta_fast = 32, beta_slow = 1
theta_yarn = rope_frequencies(d, base=b, scaling=yarn).double()

i_32, i_1 = turn_index(32, d, b, L), turn_index(1, d, b, L)
low, high = math.floor(i_32), math.ceil(i_1)  # rounded outward
gamma = 1 - ((i - low) / (high - low)).clamp(0, 1)  # linear in i
blend = (1 - gamma) * theta / s + gamma * theta
assert_close(theta_yarn, blend, rtol=1e-6, atol=0)
# transformers 5.24.0 (torch 2.13.0): ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
# for a LlamaConfig with head_dim 128, rope_parameters {"rope_type": "yarn",
# "rope_theta": 1e4, "factor": 4.0, "original_max_position_embeddings": 4096}
hf_yarn = {
    0: 1.000000000e00,
    16: 1.000000015e-01,
    21: 4.729203880e-02,
    24: 2.797399648e-02,
    32: 6.538461894e-03,
    40: 1.337886788e-03,
    45: 4.294026003e-04,
    46: 3.333803616e-04,
    63: 2.886954826e-05,
}
check_hf(theta_yarn, hf_yarn)
assert math.isclose(yarn.attention_factor, 1.138629436111989, rel_tol=1e-12)
assert_close(theta_yarn[: low + 1], theta[: low + 1], rtol=1e-6, atol=0)  # kept
assert_close(theta_yarn[high:], theta[high:] / s, rtol=1e-6, atol=0)  # / s

paper = ntk_by_parts(theta, L, s, alpha=1, beta=32)
outside = (i <= low) | (i >= high)
assert_close(
    theta_yarn[outside], paper[outside], rtol=1e-6, atol=0
)  # same outside the band
ratio = theta_yarn[~outside] / paper[~outside]
assert (ratio - 1).abs().min() > 1e-3  # different at every pair inside it
print(
    f"i_32 = {i_32:.2f}, i_1 = {i_1:.2f}: kept i <= {low}, "
    f"divided by s for i >= {high}\n"
    f"code / paper inside the band: {ratio.min():.2f} to {ratio.max():.2f}",
    end="",
)

compare_figure(
    theta,
    theta_yarn,
    s,
    marks=(low, high),
    # each curve is the ratio that its ramp gives: (1 - gamma) / s + gamma
    extra=(
        r"$(1 - \gamma_i)/s + \gamma_i$",
        paper / theta,
        r"$(1 - \gamma(r_i))/s + \gamma(r_i)$",
    ),
)
plt.show()

# %% [markdown] lang="en"
# ### The attention temperature
#
# Peng et al. also found that dividing the attention logits by a temperature $t$,
# $\mathrm{softmax}\left(q_m \cdot k_n / (t\sqrt{d})\right)$, lowers the perplexity of the
# extended model, and fit for Llama
# $$\sqrt{1/t} = 0.1\ln s + 1$$
# Multiplying both $q$ and $k$ by $\sqrt{1/t}$ multiplies every logit by $1/t$ without
# touching the attention code. This is how the paper's code, Hugging Face (which scales
# its cos and sin tables) and `posenc.apply_rope` apply it. For $s = 4$ the cell prints
# $\sqrt{1/t} = 1.1386$, so the logits grow by $1/t = 1.2965$. It checks that `apply_rope`
# with `YarnScaling` multiplies the norm of every vector by $\sqrt{1/t}$ (a rotation alone
# keeps it), and the dot product of a rotated query and key by $1/t$, compared with a
# plain rotation by the same frequencies written out in the cell.

# %% [markdown] lang="ja"
# ### アテンションの温度
#
# Peng らは、アテンションスコアを温度 $t$ で割る（$\mathrm{softmax}\left(q_m \cdot k_n / (t\sqrt{d})\right)$ とする）と、
# コンテキストを伸ばしたモデルのパープレキシティが下がることも見つけました。Llama に対してあてはめた式は次のとおりです。
# $$\sqrt{1/t} = 0.1\ln s + 1$$
# $q$ と $k$ の両方に $\sqrt{1/t}$ を掛ければ、アテンションのコードに手を加えずに、すべてのスコアが $1/t$ 倍になります。
# 論文のコード、Hugging Face（cos と sin の表に掛けます）、`posenc.apply_rope` はこの方法で適用します。
# $s = 4$ では、下のセルが $\sqrt{1/t} = 1.1386$ を出力します。スコアは $1/t = 1.2965$ 倍になります。
# セルでは、`YarnScaling` を指定した `apply_rope` が各ベクトルのノルムを $\sqrt{1/t}$ 倍にすること
# （回転だけならノルムは変わりません）を確かめます。
# さらに、同じ周波数で回転だけを行う処理をセル内に書き下し、それと比べて、回転したクエリとキーの内積が $1/t$ 倍になることを確かめます。

# %%
c = yarn.attention_factor  # sqrt(1/t)
assert math.isclose(c, 0.1 * math.log(s) + 1)


def rotate_half(x, positions, theta):
    """Plain RoPE, half layout (pair j with j + d/2), given frequencies."""
    angle = positions.double()[..., None] * theta  # (..., d/2)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat(
        (
            x1 * angle.cos() - x2 * angle.sin(),
            x2 * angle.cos() + x1 * angle.sin(),
        ),
        -1,
    )


qs, ks = torch.randn(2, 8, d, dtype=f64)
mq, mk = torch.randint(0, s * L, (2, 8))
q_yarn, k_yarn = (
    apply_rope(qs, mq, scaling=yarn),
    apply_rope(ks, mk, scaling=yarn),
)
assert_close(
    q_yarn.norm(dim=-1), c * qs.norm(dim=-1)
)  # each vector scaled by sqrt(1/t)
assert_close(q_yarn, c * rotate_half(qs, mq, theta_yarn))
plain = (rotate_half(qs, mq, theta_yarn) * rotate_half(ks, mk, theta_yarn)).sum(
    -1
)
assert_close((q_yarn * k_yarn).sum(-1), c**2 * plain)  # logits scaled by 1/t
print(f"sqrt(1/t) = {c:.4f}, 1/t = {c**2:.4f}", end="")

# %% [markdown] lang="en"
# ### DeepSeek's attention factor
#
# DeepSeek-V2 and DeepSeek-V3 extend a context of $L = 4096$ with YaRN at $s = 40$,
# $\alpha = 1$ and $\beta = 32$ (DeepSeek-AI 2024a, long-context section; 2024b,
# §4.3). Their attention is
# [multi-head latent attention](../docs/glossary.md#multi-head-latent-attention), in
# which RoPE turns only a small part of each query and key: per head, $d^R_h = 64$
# rotary dimensions $q^R, k^R$ next to $d_h = 128$ dimensions $q^C, k^C$ that carry no
# position (the
# [decoupled rotary key](14-rope-in-llms.ipynb#decoupled-rope-one-small-rotary-key-for-all-heads)
# of the chapter [*Rotary in today's LLMs*](14-rope-in-llms.ipynb)). YaRN's frequencies
# apply to the rotary part only, as the V3 paper states. For the temperature, the V2
# paper fits its own constant, $0.0707 \ln s + 1$ in place of YaRN's
# $0.1 \ln s + 1$ for the factor on $q$ and $k$ (the paper writes it $\sqrt{t}$; this
# chapter calls it $\sqrt{1/t}$); the V3 paper keeps YaRN's $0.1 \ln s + 1$. The
# configurations express both through
# $$g(s, m) = 0.1\, m \ln s + 1 \quad (s > 1), \qquad g(s, m) = 1 \quad (s \le 1)$$
# with two keys, `mscale` ($m$) and `mscale_all_dim` ($m_{\text{all}}$): DeepSeek-V2's
# `config.json` sets both to 0.707, which gives $0.0707 \ln s + 1$, and DeepSeek-V3's
# sets both to 1.
#
# The code puts the factor in two places. Hugging Face's `"yarn"`
# (`_compute_yarn_parameters`), when both keys are set and no `attention_factor` is
# given, multiplies cos and sin, and so $q^R$ and $k^R$ only, by
# $$\frac{g(s, m)}{g(s, m_{\text{all}})}$$
# while DeepSeek's attention (Hugging Face's `DeepseekV2Attention` and
# `DeepseekV3Attention` through `yarn_apply_mscale`, and `MLA` in DeepSeek-V3's own
# `inference/model.py`, whose single `mscale` plays the part of `mscale_all_dim`)
# multiplies the softmax scale $1/\sqrt{d_h + d^R_h}$ by
# $g(s, m_{\text{all}})^2$, which reaches every dimension of the logit. The rotary
# part of a logit is thus multiplied by
# $\left(g(s, m)/g(s, m_{\text{all}})\right)^2 g(s, m_{\text{all}})^2 = g(s, m)^2$ and
# the content part by $g(s, m_{\text{all}})^2$:
# $$\frac{q \cdot k}{\sqrt{d_h + d^R_h}} \;\to\; \frac{g(s, m_{\text{all}})^2\; q^C \cdot k^C + g(s, m)^2\; q^R \cdot k^R}{\sqrt{d_h + d^R_h}}$$
# When the two keys are equal, as in both released configurations, the factor on cos
# and sin is a number divided by itself: exactly 1 (DeepSeek-V3's own code has no
# factor on cos and sin at all). The rotation then only rotates, and
# the whole temperature sits in the softmax scale, where it multiplies the content and
# the rotary parts alike: by $g(40, 0.707)^2 = 1.5896$ for V2 and
# $g(40, 1)^2 = 1.8739$ for V3. Through cos and sin alone it could reach only the 64
# rotary dimensions. `posenc.YarnScaling(s, L, mscale=m, mscale_all_dim=m_all)` gives
# the factor on cos and sin; the softmax scale belongs to the attention, not to the
# rotation. The cell checks the factor and five frequencies against transformers
# 5.24.0, the softmax scale of its DeepSeek attention against the two papers'
# constants, and that `apply_rope` then keeps every norm.

# %% [markdown] lang="ja"
# ### DeepSeek のアテンションの係数
#
# DeepSeek-V2 と DeepSeek-V3 は、$L = 4096$ のコンテキストを YaRN で伸ばしています。設定は $s = 40$、$\alpha = 1$、$\beta = 32$ です
# （DeepSeek-AI 2024a のコンテキスト拡張の節、2024b の 4.3 節）。
# そのアテンションは[マルチヘッド潜在アテンション](../docs/glossary.ja.md#multi-head-latent-attention)で、RoPE が回転させるのはクエリとキーの一部の次元だけです。
# 各ヘッドは、位置の情報を持たない $d_h = 128$ 次元の $q^C, k^C$ に加えて、回転させる $d^R_h = 64$ 次元の $q^R, k^R$ を持ちます
# （「[現在の LLM の回転位置埋め込み](14-rope-in-llms.ipynb)」の章の[分離した回転キー](14-rope-in-llms.ipynb#分離した-rope全ヘッドで共有する小さな回転キー)）。
# V3 の論文が述べているとおり、YaRN の周波数がかかるのは回転する部分だけです。
# 温度については、V2 の論文が独自の定数をあてはめています。$q$ と $k$ に掛ける係数として、YaRN の $0.1 \ln s + 1$ の代わりに $0.0707 \ln s + 1$ を使います
# （論文はこれを $\sqrt{t}$ と書きますが、この章では $\sqrt{1/t}$ と呼んでいます）。V3 の論文は YaRN の $0.1 \ln s + 1$ のままです。
# 設定ファイルでは、どちらの定数も次の関数で表します。
# $$g(s, m) = 0.1\, m \ln s + 1 \quad (s > 1), \qquad g(s, m) = 1 \quad (s \le 1)$$
# キーは `mscale`（$m$）と `mscale_all_dim`（$m_{\text{all}}$）の 2 つです。
# DeepSeek-V2 の `config.json` は両方を 0.707 にしており、これで $0.0707 \ln s + 1$ になります。DeepSeek-V3 の `config.json` は両方を 1 にしています。
#
# コードはこの係数を 2 か所に置きます。
# Hugging Face の `"yarn"`（`_compute_yarn_parameters`）は、両方のキーがあり `attention_factor` の指定がないとき、cos と sin に、つまり $q^R$ と $k^R$ だけに次の値を掛けます。
# $$\frac{g(s, m)}{g(s, m_{\text{all}})}$$
# 一方、DeepSeek のアテンションは、softmax のスケール $1/\sqrt{d_h + d^R_h}$ に $g(s, m_{\text{all}})^2$ を掛けます。こちらはスコアのすべての次元に効きます。
# これを行うのは、Hugging Face では `DeepseekV2Attention` と `DeepseekV3Attention` が呼ぶ `yarn_apply_mscale` です。
# DeepSeek-V3 自身のコードでは `inference/model.py` の `MLA` が行います（キーは `mscale` 1 つだけで、これが `mscale_all_dim` の役割を果たします）。
# したがってスコアのうち回転する部分には $\left(g(s, m)/g(s, m_{\text{all}})\right)^2 g(s, m_{\text{all}})^2 = g(s, m)^2$ が、内容の部分には $g(s, m_{\text{all}})^2$ が掛かります。
# $$\frac{q \cdot k}{\sqrt{d_h + d^R_h}} \;\to\; \frac{g(s, m_{\text{all}})^2\; q^C \cdot k^C + g(s, m)^2\; q^R \cdot k^R}{\sqrt{d_h + d^R_h}}$$
# 公開されている 2 つの設定のように 2 つのキーが等しいとき、cos と sin に掛かる係数は同じ数をそれ自身で割ったもので、ちょうど 1 です。
# DeepSeek-V3 自身のコードは、cos と sin に係数をまったく掛けません。
# このとき cos と sin はベクトルを回転させるだけで（ノルムは変わりません）、温度はすべて softmax のスケールが受け持ちます。
# softmax のスケールは、内容の部分と回転する部分の両方に等しく掛かります。
# その値は V2 で $g(40, 0.707)^2 = 1.5896$、V3 で $g(40, 1)^2 = 1.8739$ です。cos と sin に掛けるだけでは、温度は回転する 64 次元にしか効きません。
# `posenc.YarnScaling(s, L, mscale=m, mscale_all_dim=m_all)` が与えるのは cos と sin に掛ける係数です。softmax のスケールは回転ではなくアテンションの側に属します。
# 下のセルでは、この係数と 5 つの周波数を transformers 5.24.0 と照らし合わせます。
# また、transformers の DeepSeek のアテンションが使う softmax のスケールを、2 つの論文の定数と比べます。
# さらに、このとき `apply_rope` がどのベクトルのノルムも変えないことを確かめます。

# %%
# DeepSeek-V2 and V3, config.json: YaRN with factor 40 from 4096 positions,
# base 1e4; qk_rope_head_dim 64, qk_nope_head_dim 128 (d_h + d^R_h = 192)
mscale_of = {"V2": 0.707, "V3": 1.0}  # mscale = mscale_all_dim in both
# the papers' factor on q and k (V2: 0.0707 ln s + 1; V3: YaRN's 0.1 ln s + 1)
paper_factor = {"V2": 0.0707 * math.log(40) + 1, "V3": 0.1 * math.log(40) + 1}
# transformers 5.24.0: DeepseekV2Attention / DeepseekV3Attention(config, 0)
# .scaling, and ROPE_INIT_FUNCTIONS["yarn"](config, "cpu"), which returns the
# attention factor 1.0 and the same frequencies for both configurations
hf_softmax_scale = {"V2": 0.1147213867929261, "V3": 0.1352337788608801}
hf_factor_ds = 1.0  # the attention factor ROPE_INIT_FUNCTIONS["yarn"] returns
hf_yarn_deepseek = {
    0: 1.000000000e00,
    10: 5.623412877e-02,
    16: 5.500000436e-03,
    23: 3.333803397e-05,
    31: 3.333803534e-06,
}
# own generator: the later cells keep their random numbers
gen_ds = torch.Generator().manual_seed(40)
q_r, k_r = torch.randn(2, 64, dtype=f64, generator=gen_ds)  # rotary parts
m_r, n_r = torch.tensor(150_000), torch.tensor(20_000)
lines = []
for name, m_ds in mscale_of.items():
    yarn_ds = YarnScaling(40, 4096, mscale=m_ds, mscale_all_dim=m_ds)
    assert yarn_ds.attention_factor == hf_factor_ds  # g(s, m) / g(s, m)
    theta_ds = rope_frequencies(64, scaling=yarn_ds).double()
    check_hf(theta_ds, hf_yarn_deepseek)
    # the temperature is in the softmax scale: (sqrt(1/t))^2 / sqrt(192)
    logit_factor = paper_factor[name] ** 2
    scale = hf_softmax_scale[name]
    assert math.isclose(scale, logit_factor / math.sqrt(192), rel_tol=1e-12)
    q_rot = apply_rope(q_r, m_r, scaling=yarn_ds)
    k_rot = apply_rope(k_r, n_r, scaling=yarn_ds)
    assert_close(q_rot.norm(), q_r.norm())  # the rotation only rotates
    plain = rotate_half(q_r, m_r, theta_ds) @ rotate_half(k_r, n_r, theta_ds)
    assert_close(q_rot @ k_rot, plain)
    lines.append(
        f"{name}, mscale = mscale_all_dim = {m_ds}: cos and sin x "
        f"{yarn_ds.attention_factor}, logits x {logit_factor:.4f}"
    )
print("\n".join(lines), end="")

# %% [markdown] lang="en"
# ## Llama 3's scaling
#
# Llama 3.1 extends Llama 3's context from $L = 8192$ to 131072 positions with a rule
# published in Meta's reference code (llama-models' `apply_scaling`); the Herd paper
# (Llama Team 2024) describes the staged long-context pretraining that went with it
# but does not state the rule itself. It is also in the models' `config.json`
# (`rope_type="llama3"`): factor $s = 8$, `low_freq_factor` $\alpha = 1$,
# `high_freq_factor` $\beta = 4$, base $5 \cdot 10^5$. Pairs with a wavelength shorter than
# $L/\beta$ keep their frequency, pairs with one longer than $L/\alpha$ are divided by $s$,
# and in between
# $$\theta'_i = (1 - g_i)\frac{\theta_i}{s} + g_i\,\theta_i, \qquad g_i = \frac{L/\lambda_i - \alpha}{\beta - \alpha}$$
# Since $L/\lambda_i = r_i$, the two conditions read $r_i > \beta$ and $r_i < \alpha$, and
# $g_i = \gamma(r_i)$. This is exactly the paper's NTK-by-parts rule of the section
# [YaRN](#yarn-interpolation-by-parts-and-a-temperature), with its
# ramp linear in $r$, for $\alpha = 1$ and $\beta = 4$, and without a temperature. At the
# edges of the band $g_i$ is $1$ ($\lambda_i = L/\beta$) and $0$ ($\lambda_i = L/\alpha$),
# so the three pieces join continuously. For $d = 128$ the cell counts 29 kept pairs,
# 6 blended and 29 divided by 8. It checks `Llama3Scaling()` against the rule and
# against `ntk_by_parts`; against eight frequencies that transformers 5.24.0 returns
# for Llama 3.1's settings, copied into the cell; that the ratio
# $\theta'_i/\theta_i$ of one pair moves without a jump as a change of base carries
# its wavelength across either edge; and that the rotation keeps the norm. In the
# figure the dotted lines are $i_4$ and $i_1$.

# %% [markdown] lang="ja"
# ## Llama 3 のスケーリング
#
# Llama 3.1 は、Llama 3 のコンテキストを $L = 8192$ から 131072 まで伸ばしています。
# その規則は Meta の参照実装（llama-models の `apply_scaling`）とモデルの `config.json`（`rope_type="llama3"`）で公開されています。
# Llama 3 の論文（Llama Team 2024）は、コンテキスト長を段階的に伸ばす長いコンテキストでの事前学習を説明していますが、この規則自体は書いていません。
# `config.json` の値は、係数 $s = 8$、`low_freq_factor` $\alpha = 1$、`high_freq_factor` $\beta = 4$、底 $5 \cdot 10^5$ です。
# 波長が $L/\beta$ より短いペアは周波数をそのまま保ち、$L/\alpha$ より長いペアは $s$ で割られます。
# その間は次の式です。
# $$\theta'_i = (1 - g_i)\frac{\theta_i}{s} + g_i\,\theta_i, \qquad g_i = \frac{L/\lambda_i - \alpha}{\beta - \alpha}$$
# $L/\lambda_i = r_i$ なので、2 つの条件はそれぞれ $r_i > \beta$、$r_i < \alpha$ と書き直せ、$g_i = \gamma(r_i)$ となります。
# これは「[YaRN](#yarn部分ごとの補間と温度)」の節で見た論文の NTK-by-parts の規則（$r$ について線形なランプ関数）に $\alpha = 1$ と $\beta = 4$ を入れ、温度を外したものにほかなりません。
# 帯の両端で $g_i$ は $1$（$\lambda_i = L/\beta$）と $0$（$\lambda_i = L/\alpha$）になるので、3 つの部分は連続につながります。
# $d = 128$ では、下のセルが、そのまま保つペア 29 組、混ぜるペア 6 組、8 で割るペア 29 組を数えます。
# セルでは、`Llama3Scaling()` をこの規則と `ntk_by_parts` の両方と照らし合わせ、transformers 5.24.0 が Llama 3.1 の設定で返す 8 つの周波数（セルに書き写してあります）とも比べます。
# さらに、底を少しずつ変えて 1 つのペアの波長を帯のどちらかの端の外へ動かしたとき、そのペアの比 $\theta'_i/\theta_i$ が跳ばずに変わること、そして回転がノルムを保つことも確かめます。
# 図の点線は $i_4$ と $i_1$ です。

# %% alt={"en": ["Llama 3.1 scaling with s = 8, dotted lines near pairs 28 and 35. Left: frequencies kept up to pair 28, divided by 8 from pair 35, with a short blend between. Right: the ratio drops steeply from 1 to 1/8 over those six pairs."], "ja": ["s = 8 の Llama 3.1 のスケーリング。点線はペア 28 と 35 の付近にあります。左では周波数がペア 28 までそのまま、35 から 8 分の 1 になり、その間の短い区間で混ぜ合わされます。右の比はこの 6 ペアの間に 1 から 1/8 へ急に下がります。"]}
b3, L3, s3 = 5e5, 8192, 8
theta3 = rope_frequencies(d, base=b3).double()
lam3 = two_pi / theta3
# Llama3Scaling(): the Llama 3.1 defaults
theta_l3 = rope_frequencies(d, base=b3, scaling=Llama3Scaling()).double()

# lambda < L / beta: kept; lambda > L / alpha: divided by s
short, long = lam3 < L3 / 4, lam3 > L3 / 1
g = (L3 / lam3 - 1) / (4 - 1)
rule = torch.where(
    short,
    theta3,
    torch.where(long, theta3 / s3, (1 - g) * theta3 / s3 + g * theta3),
)
assert_close(theta_l3, rule, rtol=1e-6, atol=0)
by_parts = ntk_by_parts(theta3, L3, s3, alpha=1, beta=4)
assert_close(theta_l3, by_parts, rtol=1e-6, atol=0)
# transformers 5.24.0 (torch 2.13.0): ROPE_INIT_FUNCTIONS["llama3"](config,
# "cpu") for a LlamaConfig with head_dim 128, rope_parameters {"rope_type":
# "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0,
# "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
hf_llama3 = {
    0: 1.000000000e00,
    16: 3.760603070e-02,
    28: 3.211446106e-03,
    29: 2.166570630e-03,
    31: 8.567514597e-04,
    34: 1.785077911e-04,
    35: 9.556212171e-05,
    63: 3.068925878e-07,
}
check_hf(theta_l3, hf_llama3)


def ratio_across(edge, pair=30):
    """theta'/theta of one pair as the base moves its wavelength across edge."""
    b_edge = (edge / two_pi) ** (d / (2 * pair))  # lambda_pair = edge
    bases = b_edge * torch.linspace(0.999, 1.001, 201, dtype=f64)
    return torch.stack(
        [
            rope_frequencies(d, base=bb, scaling=Llama3Scaling())[pair]
            / rope_frequencies(d, base=bb)[pair]
            for bb in bases.tolist()
        ]
    )


for edge in (L3 / 4, L3 / 1):  # lambda = L / beta and lambda = L / alpha
    across = ratio_across(edge)
    assert across.diff().abs().max() < 1e-3  # no jump: the pieces join

x = torch.randn(6, d, dtype=f64)
far_away = torch.arange(6) * 20000
rotated = apply_rope(x, far_away, base=b3, scaling=Llama3Scaling())
assert_close(rotated.norm(dim=-1), x.norm(dim=-1))  # no temperature
blended = ~short & ~long
print(
    f"kept {int(short.sum())}, blended {int(blended.sum())}, "
    f"divided by 8: {int(long.sum())}",
    end="",
)

compare_figure(
    theta3,
    theta_l3,
    s3,
    marks=(turn_index(4, d, b3, L3), turn_index(1, d, b3, L3)),
)
plt.show()

# %% [markdown] lang="en"
# ## LongRoPE: a searched factor per frequency
#
# The rules so far compute every $\theta'_i$ from a formula with one or two knobs.
# LongRoPE (Ding et al. 2024) lets a search choose. Pair $i$ is divided by its own
# rescale factor $\kappa_i$ (the paper writes $\lambda_i$, a letter this chapter keeps
# for the wavelength, as the [notation page](../docs/notation.md#frequencies) does),
# $$\theta'_i = \frac{\theta_i}{\kappa_i}$$
# and the $d/2$ factors are found by an evolutionary search: a population of factor
# lists, each scored by the perplexity of the extended model on a few long validation
# documents (PG19 in the paper), is bred by mutation and crossover. The authors' code
# keeps only lists that do not decrease with $i$ ($\kappa_i \le \kappa_{i+1}$), so a
# slower pair is never interpolated less than a faster one. The search exploits two
# non-uniformities that the paper reports for LLaMA2-7B. Over frequencies: at 8192
# positions without fine-tuning, searched factors, one per pair, give a lower PG19
# perplexity than PI, dynamic NTK and YaRN (the paper's Table 1). Over positions: the
# first $\hat{n}$ positions keep the original RoPE, because the first tokens receive
# large attention scores (as StreamingLLM observed); leaving the first positions
# unscaled lowers PI's perplexity at 8192 as well (the paper's Table 2). The full
# method also extends in stages (fine-tuning at 256k positions, then a second search)
# and searches a second set of factors at a short length to recover the performance
# on short inputs.
#
# What Phi-3 ships is the frequency part, in two sets. The `rope_scaling` of the 128K
# Phi-3 and Phi-3.5 models holds two lists of $d/2$ factors, `short_factor` and
# `long_factor`, and no $\hat{n}$; the configuration also gives
# `original_max_position_embeddings`, $L$ (4096 for Phi-3.5-mini), and
# `max_position_embeddings` (131072). Hugging Face's `"longrope"`
# and `posenc.LongRopeScaling` divide by the short list when the sequence length $T$
# (the largest position plus one) is at most $L$, and by the long list when $T > L$.
# The queries and keys are also multiplied by an attention factor. With
# $s = 131072 / 4096 = 32$ (Hugging Face takes this ratio of
# `max_position_embeddings` to `original_max_position_embeddings` when the
# configuration has no `factor`, and Phi-3's has none), the default is
# $$\sqrt{1 + \frac{\ln s}{\ln L}} = \sqrt{\frac{\ln (sL)}{\ln L}}$$
# (1 when $s \le 1$; an explicit `attention_factor` replaces it). The first form is
# the one the LongRoPE code writes (`_calc_mscale_su` in `rope/longrope.py` on the
# repository's main branch, the same expression as Hugging Face's
# `_compute_longrope_parameters`); an older development version, on the
# repository's `longrope` branch, wrote the second. The second form shows what the
# factor does: the logits grow by the ratio of the logarithms of the extended and the
# original length, here $\ln 2^{17} / \ln 2^{12} = 17/12$, so the factor is
# $\sqrt{17/12} = 1.1902$. For Phi-3.5-mini, whose configuration gives no other
# factor, Hugging Face computes it once, when the rotary module is built, and
# multiplies cos and sin by it for short and long inputs alike: a prompt of ten tokens
# has its queries and keys scaled by 1.19 too. Some other members of the family give
# one attention factor per set, `short_mscale` and `long_mscale`: Hugging Face's
# PhiMoE (Phi-3.5-MoE) reads both and picks one per forward pass by the length.
# In transformers 5.24.0 it does not pick the list the same way: its forward
# recomputes the frequencies without the length, so it rotates with the short list
# at every length while scaling by `long_mscale` past the switch (a bug of that
# version, found by a review of this chapter, not checked in a cell here).
# `LongRopeScaling` has a single `attention_factor` and cannot express two.
#
# The cell uses the two lists of Phi-3.5-mini-instruct ($d = 96$, base $10^4$),
# copied from its `config.json` (read from two public copies of the file, which
# agree). It checks `LongRopeScaling` against five frequencies of each set and the
# attention factor that transformers 5.24.0 returns for this configuration, against
# $\theta_i / \kappa_i$ computed from the lists, at the switch ($T = 4096$: short,
# $T = 4097$: long), and against $\sqrt{17/12}$. It also checks that both copied lists
# are non-decreasing: a check of the copy, since the authors' search code
# (`evolution/algorithms/dim_mono.py`) keeps no other kind. The short factors range
# from 1.00 to 2.84. The long ones are 1.08 for pair 0 and 63.14 to 64.84 for the 14
# pairs that never complete a turn within $L$ (34 to 47), about twice $s$: at position
# 131071 their angles reach only about half of their trained arc $L\theta_i$. YaRN
# with $s = 32$, for comparison, would keep pairs 0 to 15 and divide pairs 34 to 47 by
# exactly 32 (the figure of the section [Side by side](#side-by-side) shows both).

# %% [markdown] lang="ja"
# ## LongRoPE：周波数ごとに探索した係数
#
# ここまでの規則は、1 つか 2 つのつまみを持つ式からすべての $\theta'_i$ を計算していました。
# LongRoPE（Ding ら 2024）は、この値を探索で決めます。ペア $i$ の周波数を、ペアごとの係数 $\kappa_i$ で割ります
# （論文はこの係数を $\lambda_i$ と書きますが、この章では[記法のページ](../docs/notation.ja.md#frequencies)と同じく、この文字を波長に使います）。
# $$\theta'_i = \frac{\theta_i}{\kappa_i}$$
# $d/2$ 個の係数は進化的な探索で見つけます。係数の列を個体とする集団を用意し、各個体を評価します。
# 評価には長い検証用の文書を数本（論文では PG19）使い、伸ばしたモデルのパープレキシティを測ります。
# 突然変異と交叉によって次の世代を作ります。著者のコードは、$i$ について減らない列（$\kappa_i \le \kappa_{i+1}$）だけを残します。
# そのため、遅いペアが速いペアより弱く補間されることはありません。
# この探索は、論文が LLaMA2-7B について報告している 2 つの非一様性を利用します。
# 1 つ目は周波数についての非一様性です。ファインチューニングなしの 8192 位置では、ペアごとに探索した係数のほうが、PI、動的 NTK、YaRN より PG19 でのパープレキシティが低くなります（論文の表 1）。
# 2 つ目は位置についての非一様性で、先頭の $\hat{n}$ 個の位置には元の RoPE をそのまま使います。
# StreamingLLM が観察したように、先頭のトークンは大きなアテンションスコアを受け取るからです。
# 先頭の位置を元の RoPE のままにすると、8192 位置での PI のパープレキシティも下がります（論文の表 2）。
# 手法全体では、さらに段階的に長さを伸ばします（256k 位置でファインチューニングしてから、もう一度探索します）。
# また、短い入力での性能を取り戻すため、短い長さでもう 1 組の係数を探索します。
#
# Phi-3 が実際に使うのは周波数の部分で、係数は 2 組あります。
# 128K 版の Phi-3 や Phi-3.5 の `rope_scaling` には、$d/2$ 個ずつの係数の列 `short_factor` と `long_factor` が入っていて、$\hat{n}$ はありません。
# 設定にはそのほかに `original_max_position_embeddings`、つまり $L$（Phi-3.5-mini では 4096）と、`max_position_embeddings`（131072）があります。
# Hugging Face の `"longrope"` と `posenc.LongRopeScaling` は、系列長 $T$（位置の最大値に 1 を足した値）が $L$ 以下なら短い入力用の列で割り、$T > L$ なら長い入力用の列で割ります。
# クエリとキーには、さらにアテンションの係数が掛かります。
# 設定に `factor` がないとき（Phi-3 の設定にはありません）、Hugging Face は `max_position_embeddings` と `original_max_position_embeddings` の比 $s = 131072 / 4096 = 32$ を使います。
# 既定の係数は次のとおりです。
# $$\sqrt{1 + \frac{\ln s}{\ln L}} = \sqrt{\frac{\ln (sL)}{\ln L}}$$
# $s \le 1$ なら係数は 1 で、`attention_factor` を明示するとそれに置き換わります。
# LongRoPE のコードが書いているのは 1 つ目の形です（リポジトリの main ブランチの `rope/longrope.py` にある `_calc_mscale_su` で、Hugging Face の `_compute_longrope_parameters` と同じ式です）。
# 2 つ目の形は、リポジトリの `longrope` ブランチにある古い開発版のコードの書き方です。
# 2 つ目の形を見ると、係数の働きがわかります。スコアに掛かる倍率は、伸ばした長さと元の長さの対数の比です。
# ここでは $\ln 2^{17} / \ln 2^{12} = 17/12$ なので、係数は $\sqrt{17/12} = 1.1902$ です。
# Phi-3.5-mini の設定にはほかの係数がないので、Hugging Face はこの係数を回転埋め込みのモジュールを作るときに一度だけ計算し、入力の長さによらず cos と sin に掛けます。
# 10 トークンのプロンプトでも、クエリとキーは 1.19 倍になります。
# 同じファミリーのほかのモデルには、組ごとにアテンションの係数 `short_mscale` と `long_mscale` を持つものもあります。
# Hugging Face の PhiMoE（Phi-3.5-MoE）は両方を読み、フォワードパスごとに長さからどちらかを選びます。
# ただし transformers 5.24.0 では、係数の列は同じようには選ばれません。フォワードパスが長さを渡さずに周波数を計算し直すので、どの長さでも短い入力用の列で回転させ、切り替えの長さを超えると `long_mscale` だけを掛けます。
# これはこのバージョンのバグで、この章のレビューで見つかったものです（ここのセルでは確かめていません）。
# `LongRopeScaling` のアテンションの係数は `attention_factor` 1 つだけなので、組ごとの 2 つの係数は表せません。
#
# 下のセルでは、Phi-3.5-mini-instruct（$d = 96$、底 $10^4$）の 2 つの列を使います。
# 列はこのモデルの `config.json` から書き写したものです（公開されている 2 つのコピーから読み、両者は一致しています）。
# まず、transformers 5.24.0 がこの設定で返す値（各組 5 つの周波数とアテンションの係数）と `LongRopeScaling` を照らし合わせます。
# 次に、列から計算した $\theta_i / \kappa_i$ と比べます。
# 切り替わりの前後（$T = 4096$ では短い入力用、$T = 4097$ では長い入力用）と、係数が $\sqrt{17/12}$ であることも確かめます。
# さらに、書き写した 2 つの列がどちらも減らないことを確かめます。
# これは書き写しの確認です。著者の探索のコード（`evolution/algorithms/dim_mono.py`）は、そのような列しか残しません。
# 短い入力用の係数は 1.00 から 2.84 です。
# 長い入力用の係数は、ペア 0 では 1.08、$L$ の間に 1 周もしない 14 組（34 から 47）では 63.14 から 64.84 で、$s$ のおよそ 2 倍です。
# 位置 131071 でも、これらのペアの角度は学習した弧 $L\theta_i$ のおよそ半分にしか達しません。
# 比較のために挙げると、$s = 32$ の YaRN ならペア 0 から 15 をそのまま保ち、ペア 34 から 47 をちょうど 32 で割ります
# （「[並べて比べる](#並べて比べる)」の節の図に両方を示します）。

# %%
# microsoft/Phi-3.5-mini-instruct, config.json "rope_scaling" (read from two
# public copies of the file, which agree): float32 numbers written in full
phi35_short = [
    float(v)
    for v in """
1.0 1.0199999809265137 1.0299999713897705 1.0299999713897705
1.0499999523162842 1.0499999523162842 1.0499999523162842 1.0499999523162842
1.0499999523162842 1.0699999332427979 1.0999999046325684 1.1099998950958252
1.1599998474121094 1.1599998474121094 1.1699998378753662 1.2899998426437378
1.339999794960022 1.679999828338623 1.7899998426437378 1.8199998140335083
1.8499997854232788 1.8799997568130493 1.9099997282028198 1.9399996995925903
1.9899996519088745 2.0199997425079346 2.0199997425079346 2.0199997425079346
2.0199997425079346 2.0199997425079346 2.0199997425079346 2.0299997329711914
2.0299997329711914 2.0299997329711914 2.0299997329711914 2.0299997329711914
2.0299997329711914 2.0299997329711914 2.0299997329711914 2.0299997329711914
2.0799996852874756 2.0899996757507324 2.189999580383301 2.2199995517730713
2.5899994373321533 2.729999542236328 2.749999523162842 2.8399994373321533
""".split()
]
phi35_long = [
    float(v)
    for v in """
1.0800000429153442 1.1100000143051147 1.1399999856948853 1.340000033378601
1.5899999141693115 1.600000023841858 1.6200000047683716 2.620000123977661
3.2300000190734863 3.2300000190734863 4.789999961853027 7.400000095367432
7.700000286102295 9.09000015258789 12.199999809265137 17.670000076293945
24.46000099182129 28.57000160217285 30.420001983642578 30.840002059936523
32.590003967285156 32.93000411987305 42.320003509521484 44.96000289916992
50.340003967285156 50.45000457763672 57.55000305175781 57.93000411987305
58.21000289916992 60.1400032043457 62.61000442504883 62.62000274658203
62.71000289916992 63.1400032043457 63.1400032043457 63.77000427246094
63.93000411987305 63.96000289916992 63.970001220703125 64.02999877929688
64.06999969482422 64.08000183105469 64.12000274658203 64.41000366210938
64.4800033569336 64.51000213623047 64.52999877929688 64.83999633789062
""".split()
]
d_phi, L_phi = 96, 4096  # head_dim 3072 / 32, original_max_position_embeddings
longrope = LongRopeScaling(phi35_short, phi35_long, L_phi, max_positions=131072)
# transformers 5.24.0 (torch 2.13.0): ROPE_INIT_FUNCTIONS["longrope"](config,
# "cpu", seq_len=T) for a Phi3Config with these lists, rope_theta 1e4,
# max_position_embeddings 131072, original_max_position_embeddings 4096
hf_short = {
    0: 1.000000000e00,
    12: 8.620690554e-02,
    24: 5.025126506e-03,
    36: 4.926109104e-04,
    47: 4.265942698e-05,
}  # T = 4096 (and T = None)
hf_long = {
    0: 9.259259105e-01,
    12: 1.298701297e-02,
    24: 1.986491698e-04,
    36: 1.564210834e-05,
    47: 1.868487857e-06,
}  # T = 4097 (and T = 131072)
hf_attention_factor = 1.1902380714238083  # the same for every T

theta_phi = rope_frequencies(d_phi).double()  # base 1e4
short_phi = rope_frequencies(d_phi, scaling=longrope, seq_len=L_phi).double()
long_phi = rope_frequencies(d_phi, scaling=longrope, seq_len=L_phi + 1)
long_phi = long_phi.double()
check_hf(short_phi, hf_short)
check_hf(long_phi, hf_long)
# theta'_i = theta_i / kappa_i, in float64 from the lists
kap_short = torch.tensor(phi35_short, dtype=f64)
kap_long = torch.tensor(phi35_long, dtype=f64)
assert_close(short_phi, theta_phi / kap_short, rtol=1e-6, atol=0)
assert_close(long_phi, theta_phi / kap_long, rtol=1e-6, atol=0)
# the copy is non-decreasing, as every list the search keeps
assert (kap_short.diff() >= 0).all() and (kap_long.diff() >= 0).all()
# the attention factor: s from max_position_embeddings / original
assert longrope.factor == 32
assert math.isclose(longrope.attention_factor, hf_attention_factor)
assert math.isclose(longrope.attention_factor, math.sqrt(17 / 12))
gen_phi = torch.Generator().manual_seed(35)  # leaves the global stream
x_phi = torch.randn(L_phi + 1, d_phi, dtype=f64, generator=gen_phi)
for T in (10, L_phi, L_phi + 1):  # the factor applies at every length
    rotated = apply_rope(x_phi[:T], torch.arange(T), scaling=longrope)
    ratio_T = rotated.norm(dim=-1) / x_phi[:T].norm(dim=-1)
    assert_close(ratio_T, torch.full_like(ratio_T, math.sqrt(17 / 12)))

r_phi = L_phi * theta_phi / two_pi  # turns within L
slow_phi = r_phi < 1
reach = (131071 * long_phi / (L_phi * theta_phi))[slow_phi]
yarn_32 = YarnScaling(32, L_phi)
ratio_yarn = rope_frequencies(d_phi, scaling=yarn_32).double() / theta_phi
kept_yarn = (ratio_yarn == 1).nonzero().max().item()
print(
    f"short: / {kap_short.min():.2f} to {kap_short.max():.2f}; long: pair 0 "
    f"/ {kap_long[0]:.2f}, slow pairs {slow_phi.nonzero().min().item()}-"
    f"{d_phi // 2 - 1} / {kap_long[slow_phi].min():.2f} to "
    f"{kap_long[slow_phi].max():.2f}\n"
    f"at position 131071 the slow pairs reach {reach.min():.2f} to "
    f"{reach.max():.2f} of L theta_i\nYaRN(32) keeps pairs 0-{kept_yarn}; "
    f"attention factor {longrope.attention_factor:.4f} = sqrt(17/12)",
    end="",
)

# %% [markdown] lang="en"
# ### The switch in the middle of a generation
#
# The set is chosen per forward pass, from the largest position. A prompt of at most
# 4096 tokens is processed with the short factors, and its keys enter the
# [KV cache](../docs/glossary.md#kv-cache) rotated with them. The
# [decode step](../docs/glossary.md#decode-step) that adds position 4096 ($T = 4097$)
# switches Hugging Face's rotary module to the long factors: the new query is rotated
# with the long set, while the cached keys keep their short-set rotation. Within one
# set the score of a query at $m$ and a key at $n$ depends only on $n - m$ (the cell
# checks it for both sets, shifting a query and a key together by up to 3700
# positions, all below 4096 or all beyond $5L$); across the switch it does not. A
# key cached at $n$ is off in pair $i$ by the angle
# $n\,\theta_i \left\lvert 1/\kappa^{\text{short}}_i - 1/\kappa^{\text{long}}_i \right\rvert$,
# which for pair 0 is 0.074 radian per position, 303 radians for the key at 4095. For
# that key, pairs 0 to 39 are off by more than 1 radian and pairs 40 to 47 by 0.17 to
# 0.88 radian; taken modulo $2\pi$, 30 of the 48 angles are still off by more than 1
# radian. The cell reads these angles back from the rotated keys. In this example the
# damage is as large as the scores: against the 4096 cached keys, the query at 4096
# gets scores that differ from its scores against the same keys rotated with the long
# set by 15.9 on average, about as much as the scores themselves vary (standard
# deviation 16.1). Hugging Face's `Phi3ForCausalLM` works around it
# in `generate`: when the input first reaches $L + 1$ tokens while the cache holds at
# most $L$, its `prepare_inputs_for_generation` drops the cache, so the whole sequence
# is processed again with the long set (transformers pull request 33129, 2024), at the
# cost of one slow step. A hand-written decoding loop, or a model class without that
# override, keeps the stale keys. Other runtimes handle the switch in their own way.
# onnxruntime-genai rewinds and recomputes the sequence when it crosses $L$, for a
# batch of one and a single beam (pull request 1161, 2024). llama.cpp has chosen the
# set from the context size allocated when a model is loaded, not from the current
# length, so that every input, however short, gets the long factors once the context
# is configured past $L$ (issue 8995, 2024; issue 24823, 2026). The stale cache is the
# problem of [dynamic NTK](#dynamic-ntk-a-factor-that-grows-with-the-sequence) with a cache of
# rotated keys, in one jump instead of at every step. Either way, how a token is
# rotated depends on the length of the whole sequence, not only on its position.

# %% [markdown] lang="ja"
# ### 生成の途中での切り替え
#
# どちらの組を使うかは、フォワードパスごとに位置の最大値から決まります。
# 4096 トークン以下のプロンプトは短い入力用の係数で処理され、そのキーはその係数で回転されてから [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に入ります。
# 位置 4096 を加える[デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)（$T = 4097$）で、Hugging Face の回転埋め込みのモジュールは長い入力用の係数に切り替わります。
# 新しいクエリは長い入力用の組で回転されますが、キャッシュしたキーは短い入力用の組で回転されたままです。
# 同じ組の中では、位置 $m$ のクエリと位置 $n$ のキーのスコアは $n - m$ だけで決まります。
# 下のセルでは両方の組について、クエリとキーを一緒に最大 3700 位置ずらしてこれを確かめます（位置はすべて 4096 未満か、すべて $5L$ より先です）。
# 切り替わりをまたぐと、そうはなりません。
# 位置 $n$ にキャッシュしたキーは、ペア $i$ で角度 $n\,\theta_i \left\lvert 1/\kappa^{\text{short}}_i - 1/\kappa^{\text{long}}_i \right\rvert$ だけずれています。
# ペア 0 では 1 位置あたり 0.074 ラジアンで、位置 4095 のキーでは 303 ラジアンになります。
# このキーでは、ペア 0 から 39 が 1 ラジアンより大きく、ペア 40 から 47 が 0.17 から 0.88 ラジアンずれます。
# $2\pi$ の整数倍を除いても、48 組のうち 30 組の角度が 1 ラジアンより大きくずれています。
# セルでは、これらの角度を回転後のキーから読み取って確かめます。
# この例では、ずれはスコアそのものと同じくらいの大きさです。
# 位置 4096 のクエリについて、キャッシュした 4096 個のキーとのスコアを、同じキーを長い入力用の組で回転し直した場合のスコアと比べます。
# 差は平均 15.9 で、スコアそのもののばらつき（標準偏差 16.1）とほぼ同じ大きさです。
# Hugging Face の `Phi3ForCausalLM` は、`generate` の中でこれを回避します。
# キャッシュが $L$ 個以下のキーしか持たないまま入力が初めて $L + 1$ トークンに達すると、`prepare_inputs_for_generation` がキャッシュを捨てます。
# そのため系列全体が長い入力用の組で処理し直されます（transformers のプルリクエスト 33129、2024 年）。その 1 ステップだけは遅くなります。
# 自分で書いたデコードのループや、このメソッドを上書きしていないモデルのクラスでは、古いキーが残ります。
# ほかの実行環境は、この切り替えをそれぞれ別の方法で扱います。
# onnxruntime-genai は、系列が $L$ を超えた時点で巻き戻し、系列全体を計算し直します（バッチの大きさ 1、ビーム 1 本の場合に限ります。プルリクエスト 1161、2024 年）。
# llama.cpp は、組を現在の長さではなくモデルを読み込むときに確保したコンテキストの大きさから選んできました。
# そのため、コンテキストを $L$ より大きく設定すると、どんなに短い入力にも長い入力用の係数が使われます（issue 8995、2024 年、issue 24823、2026 年）。
# 古いキーが残る問題は、回転済みのキーをキャッシュするときの[動的 NTK](#動的-ntk系列とともに大きくなる係数) の問題と同じで、毎ステップではなく一度にまとめて起こるものです。
# いずれにしても、トークンがどう回転されるかは、その位置だけでなく系列全体の長さにもよります。

# %%
q_phi, k_phi = torch.randn(2, d_phi, dtype=f64, generator=gen_phi).unbind()
shifts_phi = torch.tensor([0, 1, 1000, 2000, 3000, 3700])
for base_m, shifts_set in ((300, shifts_phi), (300, 5 * L_phi + shifts_phi)):
    m_phi, n_phi = base_m + shifts_set, 37 + shifts_set  # n - m = -263
    T_set = int(m_phi.max()) + 1  # <= L: the short set; > L: the long set
    q_set = apply_rope(q_phi.expand(6, d_phi), m_phi, scaling=longrope)
    k_set = apply_rope(k_phi.expand(6, d_phi), n_phi, scaling=longrope)
    scores_set = (q_set * k_set).sum(-1)
    assert_close(scores_set, scores_set[0].expand(6))  # relative in each set

# keys 0..L-1 cached at T <= L (short set); the query at L with T = L + 1
positions_phi = torch.arange(L_phi + 1)
keys_phi = torch.randn(L_phi, d_phi, dtype=f64, generator=gen_phi)
cached_phi = apply_rope(keys_phi, positions_phi[:L_phi], scaling=longrope)
fresh_phi = apply_rope(
    keys_phi, positions_phi[:L_phi], scaling=longrope, seq_len=L_phi + 1
)
query_phi = apply_rope(q_phi, positions_phi[-1], scaling=longrope)
error_phi = (cached_phi - fresh_phi) @ query_phi
scores_phi = fresh_phi @ query_phi
# every pair i (features i and 48 + i) of the key at 4095, read back from
# the rotated keys: cached angle minus fresh angle
h_phi = d_phi // 2
key_c, key_f = cached_phi[-1], fresh_phi[-1]
turned = torch.atan2(key_c[h_phi:], key_c[:h_phi])
turned = turned - torch.atan2(key_f[h_phi:], key_f[:h_phi])
# the formula: n theta_i (1 / kappa_short_i - 1 / kappa_long_i), n = 4095
off_phi = (L_phi - 1) * theta_phi * (1 / kap_short - 1 / kap_long)
gap_phi = torch.remainder(turned - off_phi + math.pi, two_pi) - math.pi
assert gap_phi.abs().max() < 1e-3  # the same angles, modulo 2 pi
wrapped = (torch.remainder(off_phi + math.pi, two_pi) - math.pi).abs()
assert (off_phi[:40] > 1).all() and (off_phi[40:] < 0.9).all()
assert int((wrapped > 1).sum()) == 30  # modulo 2 pi, 30 pairs off by > 1
assert error_phi.abs().mean() > 0.9 * scores_phi.std()  # as large as scores
print(
    f"pair 0 off by {1 / kap_short[0] - 1 / kap_long[0]:.3f} rad per position, "
    f"{off_phi[0]:.0f} rad at position {L_phi - 1}\n  pairs 0-39 by "
    f"{off_phi[:40].min():.2f} rad or more, 40-47 by {off_phi[40:].min():.2f}"
    f" to {off_phi[40:].max():.2f}\n  modulo 2 pi, "
    f"{int((wrapped > 1).sum())} pairs by more than 1 rad\n"
    f"score error {error_phi.abs().mean():.1f} on average "
    f"(scores: standard deviation {scores_phi.std():.1f})",
    end="",
)

# %% [markdown] lang="en"
# ## Still relative
#
# Every rule above replaces the frequencies $\theta_i$ by other constants $\theta'_i$ and,
# for YaRN and LongRoPE, multiplies $q$ and $k$ by a constant $c$ ($\sqrt{1/t}$ for
# YaRN). The argument that makes
# RoPE relative never used the values of the frequencies. With $R(\phi)$ the
# $2 \times 2$ rotation by $\phi$ and $R(\phi)^\top = R(-\phi)$, each pair contributes
# $$\left(c\,R(m\theta'_i)\,q\right)^\top \left(c\,R(n\theta'_i)\,k\right) = c^2\, q^\top R\left((n - m)\,\theta'_i\right) k$$
# to the score, which depends on $m$ and $n$ only through $n - m$. The cell checks it
# with `apply_rope` for each static scaling (none, PI, NTK-aware, YaRN and Llama 3): a
# query and a key shifted together by up to $5L$ positions give the same score. The two
# rules whose frequencies depend on the length of the sequence are relative too as
# long as one length rotates both the query and the key; the section
# [Dynamic NTK](#dynamic-ntk-a-factor-that-grows-with-the-sequence) checks it for
# dynamic NTK, the section
# [The switch in the middle of a generation](#the-switch-in-the-middle-of-a-generation)
# for both of LongRoPE's sets. They are the exceptions when keys are cached after
# their rotation, as those two sections show: there the frequencies of a key depend
# on when it was rotated.

# %% [markdown] lang="ja"
# ## 相対位置の性質は保たれる
#
# ここまでの規則はどれも、周波数 $\theta_i$ を別の定数 $\theta'_i$ に置き換えます。
# YaRN と LongRoPE は、さらに $q$ と $k$ に定数 $c$ を掛けます（YaRN では $\sqrt{1/t}$ です）。
# RoPE のスコアが相対位置だけで決まることを示した議論では、周波数の値をまったく使っていませんでした。
# $R(\phi)$ を角度 $\phi$ の $2 \times 2$ 回転行列とし、$R(\phi)^\top = R(-\phi)$ を使うと、各ペアがスコアに寄与する量は
# $$\left(c\,R(m\theta'_i)\,q\right)^\top \left(c\,R(n\theta'_i)\,k\right) = c^2\, q^\top R\left((n - m)\,\theta'_i\right) k$$
# となり、$m$ と $n$ には $n - m$ を通してしかよりません。
# 下のセルでは、静的なスケーリング（なし、PI、NTK-aware、YaRN、Llama 3）のそれぞれについて、`apply_rope` でこれを確かめます。
# クエリとキーを一緒に最大 $5L$ だけずらしても、スコアは同じです。
# 周波数が系列の長さによって変わる 2 つの規則も、クエリとキーを同じ長さで回転させる限り、相対位置だけで決まります。
# 動的 NTK については「[動的 NTK](#動的-ntk系列とともに大きくなる係数)」の節で、LongRoPE の 2 つの組については「[生成の途中での切り替え](#生成の途中での切り替え)」の節で確かめました。
# 例外は、これらの規則で回転済みのキーをキャッシュする場合で、この 2 つの節で見たとおりです。
# そこでは、キーの周波数がそのキーを回転させた時点によって変わります。

# %%
scalings = {
    "None": None,
    "LinearScaling(4)": LinearScaling(4),
    "NTKScaling(4)": NTKScaling(4),
    "YarnScaling(4, 4096)": YarnScaling(4, 4096),
    "Llama3Scaling(4, original_max_positions=4096)": Llama3Scaling(
        4, original_max_positions=4096
    ),
}
q, k = torch.randn(2, d, dtype=f64).unbind()
shifts = torch.tensor([0, 1, 1000, 4095, 9000, 5 * 4096])
m, n = 300 + shifts, 37 + shifts  # n - m = -263 throughout
for scaling in scalings.values():
    qr = apply_rope(q.expand(len(shifts), d), m, scaling=scaling)
    kr = apply_rope(k.expand(len(shifts), d), n, scaling=scaling)
    scores = (qr * kr).sum(-1)
    assert_close(scores, scores[0].expand(len(shifts)))

# %% [markdown] lang="en"
# ## Side by side
#
# The four static rules aim at the same target below: four times Llama 2's context
# ($s = 4$, $L = 4096$, $d = 128$, base $10^4$; Llama 3's rule with its $L$ set to 4096). The
# table prints $\theta'_i/\theta_i$ at a few pairs. PI divides everything by 4. The
# other three keep pair 0 and divide the last pair by 4, and differ in between:
# NTK-aware scaling changes every pair after pair 0, by a factor that grows steadily
# with $i$, while YaRN and the Llama 3 rule keep the
# fast pairs exactly and interpolate the slow ones fully. Llama 3's band is narrower,
# pairs 36 to 45 against YaRN's 21 to 45, because it has $\beta = 4$ instead of $\beta = 32$.
# The last row is dynamic NTK with Hugging Face's factor 1 at $T = 2L$, halfway to the
# target: $s_T = 2$, so it is NTK-aware scaling for $s = 2$ and divides the last pair
# by 2; at $T = 4L$ it is NTK-aware scaling for $s = 4$ (the cell checks both).
#
# The figure shows the same ratios at every pair (left) and, on the right,
# Phi-3.5-mini's LongRoPE factors next to PI and YaRN for its own setting, $d = 96$ and
# $s = 32$. The short set interpolates gently, by at most 2.84. The long set already
# divides the fast pairs far more than YaRN would (pair 12 by 7.70, where YaRN keeps
# it) and the slow pairs by about 64, twice PI's 32.

# %% [markdown] lang="ja"
# ## 並べて比べる
#
# 4 つの静的な規則を、「Llama 2 のコンテキストを 4 倍に伸ばす」という同じ条件で比べます
# （$s = 4$、$L = 4096$、$d = 128$、底 $10^4$。Llama 3 の規則は $L$ を 4096 にしたもの）。
# 表には、いくつかのペアでの $\theta'_i/\theta_i$ を示します。
# PI はすべてを 4 で割ります。残りの 3 つはペア 0 をそのままにし、最後のペアを 4 で割りますが、間の扱いが違います。
# NTK-aware スケーリングは、ペア 0 より後のすべてのペアを、$i$ とともに単調に大きくなる係数で割ります。
# YaRN と Llama 3 の規則は、速いペアをまったく変えず、遅いペアを完全に補間します。
# Llama 3 の帯はペア 36 から 45 までで、YaRN のペア 21 から 45 までより狭くなっています。$\beta = 32$ ではなく $\beta = 4$ だからです。
# 最後の行は、Hugging Face の係数を 1 とした動的 NTK の、目標の半分の長さ $T = 2L$ での値です。
# $s_T = 2$ なので、これは $s = 2$ の NTK-aware スケーリングで、最後のペアを 2 で割ります。$T = 4L$ では $s = 4$ の NTK-aware スケーリングになります（下のセルで両方を確かめます）。
#
# 図の左は、同じ比をすべてのペアについて描いたものです。
# 右は、Phi-3.5-mini の LongRoPE の係数を、同じ設定（$d = 96$、$s = 32$）の PI や YaRN と並べたものです。
# 短い入力用の組はゆるやかに補間し、割る数は最大でも 2.84 です。
# 長い入力用の組は、速いペアでも YaRN よりずっと強く割り（YaRN がそのまま保つペア 12 を 7.70 で割ります）、遅いペアは PI の 32 の 2 倍、およそ 64 で割ります。

# %% alt={"en": ["Ratio of scaled to original frequency against pair i, log axis. Left (d = 128, s = 4): PI is 1/4 at every pair; NTK-aware falls in a straight line from 1 to 1/4; YaRN keeps pairs 0–20 and the Llama 3 rule pairs 0–35, both reaching 1/4 at pair 46; dynamic NTK at T = 2L falls in a straight line from 1 to 1/2. Right (Phi-3.5-mini, d = 96, s = 32): LongRoPE's short factors keep the ratio between 1 and 1/2.84; its long factors fall from 0.93 at pair 0 to about 1/64 from pair 30 on, below PI's 1/32; YaRN keeps pairs 0–15 and reaches 1/32 at pair 34."], "ja": ["拡張後と元の周波数の比を、ペア i に対して対数軸で描いた図。左は d = 128、s = 4 の場合です。PI はどのペアでも 1/4 で、NTK-aware は 1 から 1/4 まで直線的に下がります。YaRN はペア 0〜20、Llama 3 の規則はペア 0〜35 を保ち、どちらもペア 46 で 1/4 に達します。T = 2L の動的 NTK は 1 から 1/2 まで直線的に下がります。右は Phi-3.5-mini（d = 96、s = 32）の場合です。LongRoPE の短い入力用の係数では、比は 1 から 1/2.84 の間にとどまります。長い入力用の係数では、比はペア 0 の 0.93 からペア 30 以降のおよそ 1/64 まで下がり、PI の 1/32 を下回ります。YaRN はペア 0〜15 を保ち、ペア 34 で 1/32 に達します。"]}
pairs = [0, 16, 24, 32, 40, 48, 63]
short_names = ("PI", "NTK-aware", "YaRN", "Llama 3")
table = [f"{'i':>10}" + "".join(f"{p:>7}" for p in pairs)]
ratios = {}
for name, short_name in zip(list(scalings)[1:], short_names, strict=True):
    scaled = rope_frequencies(d, base=b, scaling=scalings[name]).double()
    ratios[name] = scaled / theta
    row = "".join(f"{ratios[name][p]:7.3f}" for p in pairs)
    table.append(f"{short_name:>10}{row}")
    # the last pair divided by s
    assert math.isclose(ratios[name][-1], 1 / 4, rel_tol=1e-6)


def blended_pairs(ratio):
    """Indices whose ratio is neither 1 (kept) nor 1/4 (interpolated)."""
    inside = ((ratio - 1).abs() > 1e-6) & ((ratio - 1 / 4).abs() > 1e-6)
    return int(inside.nonzero().min()), int(inside.nonzero().max())


assert blended_pairs(ratios["YarnScaling(4, 4096)"]) == (21, 45)
llama3_band = blended_pairs(
    ratios["Llama3Scaling(4, original_max_positions=4096)"]
)
assert llama3_band == (
    math.floor(turn_index(4, d, b, L)) + 1,
    math.floor(turn_index(1, d, b, L)),
)
assert llama3_band == (36, 45)
# dynamic NTK (Hugging Face's factor 1) at T = 2L: s_T = 2; at T = 4L: s = 4
dyn_side = DynamicNTKScaling(1.0, L)
dyn_2L = rope_frequencies(d, base=b, scaling=dyn_side, seq_len=2 * L)
dyn_2L = dyn_2L.double() / theta
dyn_4L = rope_frequencies(d, base=b, scaling=dyn_side, seq_len=4 * L)
assert math.isclose(dyn_2L[-1], 1 / 2, rel_tol=1e-6)
assert_close(
    dyn_4L.double() / theta, ratios["NTKScaling(4)"], rtol=1e-6, atol=0
)
row = "".join(f"{dyn_2L[p]:7.3f}" for p in pairs)
table.append(f"{'dynamic 2L':>10}{row}")
print("\n".join(table), end="")

fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 4.2))
lines_left = (
    ("LinearScaling(4)", "PI", "C0", "--"),
    ("NTKScaling(4)", "NTK-aware", "C1", "-"),
    ("YarnScaling(4, 4096)", "YaRN", "C2", "-"),
    ("Llama3Scaling(4, original_max_positions=4096)", "Llama 3", "C3", "-."),
)
for name, label, color, style in lines_left:
    left.plot(ratios[name], color=color, ls=style, label=label)
left.plot(dyn_2L, color="C4", ls=":", lw=2.2, label="dynamic NTK, $T = 2L$")
left.set_title(r"$d = 128,\ s = 4$")
right.plot(torch.full((d_phi // 2,), 1 / 32), color="C0", ls="--", label="PI")
right.plot(ratio_yarn, color="C2", label="YaRN")
short_label, long_label = (
    rf"LongRoPE $1/\kappa^{{\mathrm{{{k}}}}}$" for k in ("short", "long")
)
right.plot(1 / kap_short, color="C5", ls=":", lw=2.2, label=short_label)
right.plot(1 / kap_long, color="C5", label=long_label)
right.set_title(r"$d = 96,\ s = 32$")
for ax, k_max in ((left, 2), (right, 6)):
    ticks = [2.0**-k for k in range(k_max + 1)]
    ax.set(yscale="log", xlabel="$i$", yticks=ticks)
    ax.set_yticklabels(["$1$"] + [f"$1/{2**k}$" for k in range(1, k_max + 1)])
    ax.set_ylim(ticks[-1] / 1.3, 1.3)
    ax.minorticks_off()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
left.set_ylabel(r"$\theta'_i / \theta_i$")
plt.show()

# %% [markdown] lang="en"
# <!-- explorable: 09-rope-context -->
# *On the website, an interactive figure takes the place of this note: the
# wavelength of every pair under each method, for a chosen factor, training
# length and base.*

# %% [markdown] lang="ja"
# <!-- explorable: 09-rope-context -->
# サイトでは、この注記の場所に対話的な図があります。係数、学習時の長さ、底を選ぶと、各手法でのペアごとの波長を並べて描きます。

# %% [markdown] lang="en"
# ## Which models use which
#
# Settings published by the model authors (their papers, model cards, `config.json` or
# reference code):
#
# | model | trained $L$ | extended to | rule |
# |---|---|---|---|
# | Vicuna v1.5 16k (LMSYS; a Llama 2 fine-tune) | 4096 | 16384 | PI, $s = 4$ (`config.json`: `"type": "linear"`) |
# | Code Llama (Rozière et al. 2023) | 4096 | 16384 in fine-tuning | base $10^4 \to 10^6$ |
# | Llama 3.1 (Meta) | 8192 | 131072 | Llama 3 rule, $s = 8$, base $5 \cdot 10^5$ |
# | Qwen2.5 Instruct (Qwen team) | 32768 | 131072 | YaRN, $s = 4$, switched on in `config.json` by the user |
# | DeepSeek-V2 (DeepSeek-AI 2024a) | 4096 | 128K (YaRN set for 160K) | YaRN, $s = 40$, `mscale` = `mscale_all_dim` = 0.707 |
# | DeepSeek-V3 (DeepSeek-AI 2024b) | 4096 | 128K (`max_position_embeddings` 163840) | YaRN, $s = 40$, `mscale` = `mscale_all_dim` = 1 |
# | Phi-3.5-mini-instruct (Microsoft) | 4096 | 131072 | LongRoPE, 48 `short_factor` and 48 `long_factor` values |
# | gpt-oss (OpenAI) | 4096 | 131072 | YaRN, $s = 32$, base $1.5 \cdot 10^5$, band not rounded (`truncate`: false) |
#
# The other 128K models of the Phi-3 and Phi-3.5 families also use LongRoPE, each with
# its own lists (Phi-3-vision-128k-instruct's `config.json`, as two public copies of it
# show, has other values and the older type name `"su"`). The Qwen2.5 model cards
# advise adding the YaRN setting only when long inputs are expected, because vLLM's
# YaRN is static: it applies the factor whatever the length of the input, which can
# hurt short texts. Hugging Face's `"yarn"` and `YarnScaling` are static as well. It is
# the trade-off that led to
# [dynamic NTK](#dynamic-ntk-a-factor-that-grows-with-the-sequence).
#
# Code Llama changed the base without the NTK-aware formula; for $d = 128$ its base is
# the NTK-aware one for the factor $s = 100^{(d-2)/d}$, which the cell prints as 93.06.
# Chen et al. (2023) themselves extended LLaMA models up to 32768 positions with PI.
# Xiong et al. (2023, Llama 2 Long) call such a plain change of base "adjusted base
# frequency" and raise Llama 2's base from $10^4$ to $5 \cdot 10^5$ during continued
# pretraining on long sequences. One rule in the table of the next section is not a
# context extension: p-RoPE (Barbero et al. 2024) leaves the slowest pairs unrotated;
# the chapter
# [*Rotary in today's LLMs*](14-rope-in-llms.ipynb#partial-rotation-against-p-rope)
# derives it.

# %% [markdown] lang="ja"
# ## どのモデルがどれを使うか
#
# モデルの作者が公開している設定（論文、モデルカード、`config.json`、参照実装）です。
#
# | モデル | 学習時の $L$ | 伸ばした長さ | 規則 |
# |---|---|---|---|
# | Vicuna v1.5 16k（LMSYS、Llama 2 をファインチューニングしたモデル） | 4096 | 16384 | PI、$s = 4$（`config.json` に `"type": "linear"`） |
# | Code Llama（Rozière ら 2023） | 4096 | ファインチューニング時 16384 | 底 $10^4 \to 10^6$ |
# | Llama 3.1（Meta） | 8192 | 131072 | Llama 3 の規則、$s = 8$、底 $5 \cdot 10^5$ |
# | Qwen2.5 Instruct（Qwen チーム） | 32768 | 131072 | YaRN、$s = 4$（利用者が `config.json` で有効化） |
# | DeepSeek-V2（DeepSeek-AI 2024a） | 4096 | 128K（YaRN は 160K 向けの設定） | YaRN、$s = 40$、`mscale` = `mscale_all_dim` = 0.707 |
# | DeepSeek-V3（DeepSeek-AI 2024b） | 4096 | 128K（`max_position_embeddings` は 163840） | YaRN、$s = 40$、`mscale` = `mscale_all_dim` = 1 |
# | Phi-3.5-mini-instruct（Microsoft） | 4096 | 131072 | LongRoPE、`short_factor` と `long_factor` が 48 個ずつ |
# | gpt-oss（OpenAI） | 4096 | 131072 | YaRN、$s = 32$、底 $1.5 \cdot 10^5$、帯の端を丸めない（`truncate`: false） |
#
# Phi-3 と Phi-3.5 のほかの 128K のモデルも LongRoPE を使い、それぞれ固有の係数の列を持ちます。
# たとえば Phi-3-vision-128k-instruct の `config.json` は、公開されている 2 つのコピーを見ると、別の値と、古い種類名 `"su"` を使っています。
# Qwen2.5 のモデルカードは、長い入力を扱うときだけ YaRN の設定を加えるよう勧めています。
# vLLM の YaRN は静的で、入力の長さによらず係数を適用するので、短いテキストでは性能を損なうおそれがあるからです。
# Hugging Face の `"yarn"` と `YarnScaling` も静的です。
# これは、[動的 NTK](#動的-ntk系列とともに大きくなる係数) が生まれるもとになったトレードオフと同じです。
#
# Code Llama は NTK-aware の式を使わずに底を変えました。$d = 128$ では、その底は係数 $s = 100^{(d-2)/d}$ に対する NTK-aware の底と同じで、
# 下のセルはこの係数を 93.06 と出力します。
# Chen ら（2023）自身は、PI で LLaMA のモデルを 32768 位置まで伸ばしています。
# Xiong ら（2023、Llama 2 Long）は、このように底だけを変えることを「adjusted base frequency」と呼んでいます。
# この論文では、長い系列での継続事前学習の間に、Llama 2 の底を $10^4$ から $5 \cdot 10^5$ に上げています。
# 次の節の表のうち p-RoPE（Barbero ら 2024）だけは、コンテキストを伸ばす手法ではありません。
# 最も遅いペアを回転させずに残す規則で、「[現在の LLM の回転位置埋め込み](14-rope-in-llms.ipynb#部分回転と-p-rope)」の章で導きます。

# %%
s_code_llama = 100 ** ((d - 2) / d)  # b' = 10^4 s^(d/(d-2)) = 10^6
assert math.isclose(1e4 * s_code_llama ** (d / (d - 2)), 1e6)
assert_close(
    rope_frequencies(d, base=1e6),
    rope_frequencies(d, base=1e4, scaling=NTKScaling(s_code_llama)),
)
print(f"Code Llama as an NTK-aware factor: s = {s_code_llama:.2f}", end="")

# %% [markdown] lang="en"
# ## Hugging Face and posenc
#
# | rule | `posenc` | Hugging Face `rope_scaling` |
# |---|---|---|
# | PI | `LinearScaling(s)` | `rope_type="linear"`, `factor` |
# | NTK-aware, static | `NTKScaling(s)` | no type needed: set `rope_theta` to $b\, s^{d/(d-2)}$ |
# | NTK-aware, dynamic | `DynamicNTKScaling(s, L)` | `rope_type="dynamic"`, `factor`; $L$ is `max_position_embeddings` |
# | YaRN | `YarnScaling(s, L, beta_fast, beta_slow)` | `rope_type="yarn"`, `factor`, `original_max_position_embeddings`, `beta_fast`, `beta_slow`; also `attention_factor`, `mscale`, `mscale_all_dim`, `truncate` |
# | Llama 3 | `Llama3Scaling(s, low_freq_factor, high_freq_factor, original_max_positions)` | `rope_type="llama3"`, `factor`, `low_freq_factor`, `high_freq_factor`, `original_max_position_embeddings` |
# | LongRoPE (Ding et al. 2024; Phi-3) | `LongRopeScaling(short_factor, long_factor, L, max_positions=...)` | `rope_type="longrope"`, `short_factor`, `long_factor`, `original_max_position_embeddings`; also `factor` (default `max_position_embeddings` / `original_max_position_embeddings`), `attention_factor` |
# | p-RoPE (Barbero et al. 2024) | `ProportionalScaling(fraction, factor)` | `rope_type="proportional"`, `partial_rotary_factor`, `factor` |
#
# `posenc` reproduces Hugging Face's default YaRN (checked in the section
# [YaRN](#yarn-interpolation-by-parts-and-a-temperature) against values from
# transformers 5.24.0): the attention factor
# $0.1\ln s + 1$ and the range rounded outward (`truncate=True`). Hugging Face's extra
# YaRN keys override the attention factor (`attention_factor`, or the ratio of two
# such factors from `mscale` and `mscale_all_dim`, as in DeepSeek's configurations) or
# keep the fractional range (`truncate=False`). `YarnScaling` takes `mscale` and
# `mscale_all_dim`, but neither an explicit `attention_factor` nor `truncate`; the
# other half of DeepSeek's temperature, $g(s, m_{\text{all}})^2$ on the softmax scale,
# belongs to the attention and is not part of any scaling.
#
# `YarnScaling` therefore does not reproduce gpt-oss, which keeps the range
# fractional: the default of Hugging Face's `GptOssConfig` sets `truncate` to false,
# and OpenAI's reference code (`gpt_oss/torch/model.py`) never rounds the range. With
# head dimension 64 and base $1.5 \cdot 10^5$, gpt-oss blends from pair 8.09 to pair
# 17.40, where `YarnScaling` blends from pair 8 to pair 18. The cell below writes the
# ramp over the fractional range out, checks it against six frequencies that
# transformers 5.24.0 returns for gpt-oss's configuration, and finds the frequencies
# of `YarnScaling(32, 4096)` up to 1.76 times larger, at pair 17.
#
# Older versions of transformers (4.45.2, for example) read $L$ for YaRN from
# `max_position_embeddings` rather than from `original_max_position_embeddings`, so
# the same `config.json` could give different frequencies; read the version's
# `modeling_rope_utils.py` when it matters.

# %% [markdown] lang="ja"
# ## Hugging Face と posenc
#
# | 規則 | `posenc` | Hugging Face の `rope_scaling` |
# |---|---|---|
# | PI | `LinearScaling(s)` | `rope_type="linear"`、`factor` |
# | NTK-aware（静的） | `NTKScaling(s)` | `rope_type` は不要。`rope_theta` を $b\, s^{d/(d-2)}$ にする |
# | NTK-aware（動的） | `DynamicNTKScaling(s, L)` | `rope_type="dynamic"`、`factor`。$L$ は `max_position_embeddings` |
# | YaRN | `YarnScaling(s, L, beta_fast, beta_slow)` | `rope_type="yarn"`、`factor`、`original_max_position_embeddings`、`beta_fast`、`beta_slow`。ほかに `attention_factor`、`mscale`、`mscale_all_dim`、`truncate` |
# | Llama 3 | `Llama3Scaling(s, low_freq_factor, high_freq_factor, original_max_positions)` | `rope_type="llama3"`、`factor`、`low_freq_factor`、`high_freq_factor`、`original_max_position_embeddings` |
# | LongRoPE（Ding ら 2024、Phi-3） | `LongRopeScaling(short_factor, long_factor, L, max_positions=...)` | `rope_type="longrope"`、`short_factor`、`long_factor`、`original_max_position_embeddings`。ほかに `factor`（既定値は `max_position_embeddings` / `original_max_position_embeddings`）、`attention_factor` |
# | p-RoPE（Barbero ら 2024） | `ProportionalScaling(fraction, factor)` | `rope_type="proportional"`、`partial_rotary_factor`、`factor` |
#
# `posenc` は Hugging Face の既定の YaRN を再現します（「[YaRN](#yarn部分ごとの補間と温度)」の節で transformers 5.24.0 の値と照らし合わせました）。
# 既定では、アテンションの係数は $0.1\ln s + 1$ で、範囲は外側に丸めます（`truncate=True`）。
# Hugging Face の YaRN には追加のキーもあります。
# アテンションの係数を上書きするもの（`attention_factor`、または DeepSeek の設定のように `mscale` と `mscale_all_dim` から作る 2 つの係数の比）と、
# 範囲を小数のまま使うためのもの（`truncate=False`）です。
# `YarnScaling` は `mscale` と `mscale_all_dim` を受け取りますが、`attention_factor` の直接の指定と `truncate` はありません。
# DeepSeek の温度の残り半分（softmax のスケールに掛ける $g(s, m_{\text{all}})^2$）はアテンションの側に属するもので、どのスケーリングにも含まれません。
#
# そのため、`YarnScaling` では gpt-oss を再現できません。gpt-oss は範囲を小数のまま使います。
# Hugging Face の `GptOssConfig` は既定で `truncate` を false にしており、OpenAI の参照実装（`gpt_oss/torch/model.py`）も範囲を丸めません。
# ヘッドの次元数 64、底 $1.5 \cdot 10^5$ の gpt-oss では、混ぜる範囲はペア 8.09 からペア 17.40 までです。`YarnScaling` ではペア 8 からペア 18 までになります。
# 下のセルでは、小数のままの範囲でのランプ関数を書き下し、transformers 5.24.0 が gpt-oss の設定で返す 6 つの周波数と照らし合わせます。
# そのうえで、`YarnScaling(32, 4096)` の周波数が最大 1.76 倍（ペア 17）大きいことを確かめます。
#
# 古い版の transformers（たとえば 4.45.2）は、YaRN の $L$ を `original_max_position_embeddings` ではなく
# `max_position_embeddings` から読んでいました。そのため、同じ `config.json` から違う周波数が得られる場合もあります。
# 正確さが必要なときは、使っている版の `modeling_rope_utils.py` を読んでください。

# %%
# gpt-oss (OpenAI's gpt_oss/torch/model.py; Hugging Face's GptOssConfig):
# head_dim 64, rope_theta 1.5e5, YaRN factor 32 from 4096 positions, betas
# 32 and 1, truncate false. transformers 5.24.0 (torch 2.13.0):
# ROPE_INIT_FUNCTIONS["yarn"](GptOssConfig(), "cpu"), theta'_i
hf_gpt_oss = {
    8: 5.081327260e-02,
    9: 3.170569614e-02,
    12: 6.794959307e-03,
    16: 4.564839182e-04,
    17: 1.293186942e-04,
    18: 3.830881178e-05,
}
b_oss, d_oss, L_oss = 1.5e5, 64, 4096
theta_oss = rope_frequencies(d_oss, base=b_oss).double()
i_oss = torch.arange(d_oss // 2, dtype=f64)
low_oss = turn_index(32, d_oss, b_oss, L_oss)  # not rounded
high_oss = turn_index(1, d_oss, b_oss, L_oss)
ramp_oss = ((i_oss - low_oss) / (high_oss - low_oss)).clamp(0, 1)
fractional = ramp_oss * theta_oss / 32 + (1 - ramp_oss) * theta_oss
check_hf(fractional, hf_gpt_oss)
yarn_oss = YarnScaling(32, L_oss)  # the range rounded outward: 8 to 18
ratio_oss = rope_frequencies(d_oss, base=b_oss, scaling=yarn_oss) / fractional
assert ratio_oss.max() > 1.7  # not gpt-oss's frequencies
print(
    f"gpt-oss blends pairs {low_oss:.2f} to {high_oss:.2f}; YarnScaling up to "
    f"{ratio_oss.max():.2f}x larger (pair {int(ratio_oss.argmax())})",
    end="",
)

# %% [markdown] lang="en"
# ## What to remember
#
# - A pair whose wavelength is longer than the training length $L$ has seen only an
#   arc of its circle; past $L$ it meets angles never trained. The rules of this
#   chapter act there, though a longer input also brings new combinations of the fast
#   pairs' angles and more keys to attend to.
# - Every rule here only changes the frequencies (YaRN and LongRoPE also scale $q$ and
#   $k$): PI divides all of them by $s$; NTK-aware scaling raises the base to
#   $b\, s^{d/(d-2)}$, which keeps pair 0 and divides the slowest pair by $s$; YaRN and
#   Llama 3 keep the fast pairs, divide the slow ones by $s$ and blend in between;
#   LongRoPE divides each pair by its own factor, found by a search (Phi-3.5-mini's long
#   set divides the slow pairs by about $2s$).
# - NTK-aware scaling still carries most slow pairs past their trained arc. YaRN's
#   code ramps linearly in the pair index, its paper in the number of turns; Llama 3's
#   rule is the paper's ramp with thresholds 1 and 4 and no temperature.
# - With any fixed set of frequencies the score depends only on $n - m$. Rules whose
#   frequencies follow the sequence length break this when keys are cached after their
#   rotation: dynamic NTK at every step, LongRoPE once, when $T$ first exceeds $L$ and
#   Hugging Face switches to the long set (Phi-3's `generate` then processes the whole
#   sequence again).
# - The temperature: YaRN multiplies $q$ and $k$ by $0.1 \ln s + 1$; LongRoPE, in
#   Phi-3-mini and Phi-3.5-mini, by $\sqrt{1 + \ln s / \ln L}$, on short inputs too
#   (some other Phi models give one factor per set); DeepSeek sets `mscale` =
#   `mscale_all_dim`, so cos and sin are scaled by exactly 1 and the whole temperature
#   $g(s, m_{\text{all}})^2$ multiplies the softmax scale.
# - Hugging Face's dynamic `factor` is a slope, not the extension ratio:
#   $s_T = sT/L - (s-1)$, with $L$ taken from `max_position_embeddings`.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 波長が学習時の長さ $L$ より長いペアは、円周のうち一部の弧しか見ていません。$L$ の先では、学習していない角度に出会います。
#   この章の規則が手を入れるのはそこです。ただし長い入力では、速いペアの角度の組み合わせも新しくなり、アテンションを向けるキーも増えます。
# - ここで扱った規則はどれも周波数を変えるだけです（YaRN と LongRoPE はさらに $q$ と $k$ に定数を掛けます）。
#   PI はすべての周波数を $s$ で割ります。NTK-aware スケーリングは底を $b\, s^{d/(d-2)}$ に上げ、ペア 0 をそのままにして最も遅いペアを $s$ で割ります。
#   YaRN と Llama 3 は速いペアを保ち、遅いペアを $s$ で割り、その間を混ぜます。
#   LongRoPE は、探索で見つけたペアごとの係数で各ペアを割ります（Phi-3.5-mini の長い入力用の組は、遅いペアをおよそ $2s$ で割ります）。
# - NTK-aware スケーリングでも、遅いペアの多くは学習した弧の外に出てしまいます。
#   YaRN のコードはペアの番号について線形に、論文は回転数について線形にランプ関数を作ります。
#   Llama 3 の規則は、しきい値を 1 と 4 にして温度を外した論文のランプ関数です。
# - 周波数を固定している限り、スコアは $n - m$ だけで決まります。
#   周波数が系列の長さに従って変わる規則では、キーを回転させてからキャッシュすると、この性質が崩れます。
#   動的 NTK では毎ステップ崩れます。LongRoPE で崩れるのは一度だけで、$T$ が初めて $L$ を超え、Hugging Face が長い入力用の組へ切り替えるときです
#   （そのとき Phi-3 の `generate` は系列全体を処理し直します）。
# - 温度について：YaRN は $q$ と $k$ に $0.1 \ln s + 1$ を掛けます。
#   Phi-3-mini と Phi-3.5-mini の LongRoPE は、短い入力でも $\sqrt{1 + \ln s / \ln L}$ を掛けます（ほかの Phi のモデルには、組ごとに係数を持つものもあります）。
#   DeepSeek は `mscale` と `mscale_all_dim` を等しくするので、cos と sin に掛かる係数はちょうど 1 で、温度 $g(s, m_{\text{all}})^2$ はすべて softmax のスケールに掛かります。
# - Hugging Face の動的 NTK の `factor` は伸び率ではなく傾きです。
#   $s_T = sT/L - (s-1)$ で、$L$ は `max_position_embeddings` から取ります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Code Llama fine-tunes with base $10^6$ at 16384 positions. Count the pairs of
#    $d = 128$ that complete a full turn within 16384 positions, and compare with Llama 2
#    at 4096. Which wavelengths does the larger base move past the context?
# 2. Derive the NTK-aware base if, instead of the last pair, the last pair that still
#    completes a turn within $L$ (index $\lfloor i_1 \rfloor$) is to be divided by $s$.
#    Check your $b'$ with `rope_frequencies(d, base=...)`.
# 3. Choose `beta_fast` and `beta_slow` so that `YarnScaling(8, 8192, ...)` with base
#    $5 \cdot 10^5$ comes as close as possible to `Llama3Scaling()`. How close does it get,
#    and why can the two never agree exactly (apart from the attention factor)?
# 4. Generate positions $0$ to $3L - 1$ one at a time with dynamic NTK ($s = 1$), caching
#    each key after its rotation with the frequencies of the current length. At the end,
#    compare the scores of the last query against the cached keys with those against keys
#    all rotated with the final frequencies. Where are the differences largest?
# 5. DeepSeek's configurations set `mscale` = `mscale_all_dim`. Suppose one set
#    `mscale` = 1 and `mscale_all_dim` = 0.707, with $s = 40$. By what factor are the
#    rotary part $q^R \cdot k^R$ and the content part $q^C \cdot k^C$ of a logit
#    multiplied, compared with the model before the extension? Check your answer with
#    `YarnScaling` and with the numbers transformers 5.24.0 gives for this
#    configuration: the attention factor 1.0857263992561355 and the softmax scale
#    0.1147213867929261.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. Code Llama は底 $10^6$、16384 位置でファインチューニングされています。
#    $d = 128$ のペアのうち、16384 位置の間に 1 周するものを数え、4096 位置の Llama 2 と比べてください。
#    底を大きくしたことで、どの波長がコンテキストの外に出たでしょうか。
# 2. 最後のペアではなく、$L$ の間にまだ 1 周する最後のペア（番号 $\lfloor i_1 \rfloor$）を $s$ で割るとしたら、
#    NTK-aware の底はどうなるか導いてください。
#    求めた $b'$ を `rope_frequencies(d, base=...)` で確かめてください。
# 3. 底 $5 \cdot 10^5$ の `YarnScaling(8, 8192, ...)` が `Llama3Scaling()` にできるだけ近くなるように、
#    `beta_fast` と `beta_slow` を選んでください。どこまで近づくでしょうか。
#    また、アテンションの係数の違いを別にしても、両者が完全には一致しえないのはなぜでしょうか。
# 4. 動的 NTK（$s = 1$）で、位置 $0$ から $3L - 1$ までを 1 つずつ生成してください。
#    各キーは、その時点の長さの周波数で回転させてからキャッシュします。
#    最後に、最後のクエリとキャッシュしたキーのスコアを、すべてのキーを最終的な周波数で回転させた場合のスコアと比べてください。
#    差が最も大きいのはどこでしょうか。
# 5. DeepSeek の設定は `mscale` と `mscale_all_dim` を等しくしています。
#    かりに `mscale` = 1、`mscale_all_dim` = 0.707、$s = 40$ とします。
#    スコアのうち回転する部分 $q^R \cdot k^R$ と内容の部分 $q^C \cdot k^C$ は、拡張前のモデルと比べてそれぞれ何倍になるでしょうか。
#    答えを `YarnScaling` で確かめてください。
#    この設定で transformers 5.24.0 が返す値とも比べてください。アテンションの係数は 1.0857263992561355、softmax のスケールは 0.1147213867929261 です。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With base $10^6$ and $L = 16384$, the formula for $i_1$ gives 36.44:
# pairs 0 to 36 turn within the context and 27 pairs never do, against 46 and 18 for
# Llama 2 at 4096. The larger base moves pairs 37 to 45 past the context: their
# wavelengths fit within 4096 positions with base $10^4$ but exceed 16384 with base
# $10^6$. Code Llama thus has more slow pairs than Llama 2, on a context four times
# as long.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 底 $10^6$、$L = 16384$ では、$i_1$ の式から 36.44 が得られます。
# ペア 0 から 36 がコンテキスト内で 1 周し、27 組は 1 周しません。4096 位置の Llama 2 では 46 組と 18 組でした。
# 底を大きくしたことで、ペア 37 から 45 がコンテキストの外に出ます。
# これらの波長は、底 $10^4$ なら 4096 位置に収まりますが、底 $10^6$ では 16384 を超えます。
# つまり Code Llama は、4 倍長いコンテキストで、Llama 2 より多くの遅いペアを持ちます。

# %% tags=["solution"]
lam_cl = two_pi / rope_frequencies(d, base=1e6).double()  # Code Llama
lam_l2 = two_pi / rope_frequencies(d, base=1e4).double()  # Llama 2
full_cl, full_l2 = lam_cl <= 16384, lam_l2 <= 4096
i_1_cl = turn_index(1, d, 1e6, 16384)
assert int(full_cl.sum()) == math.floor(i_1_cl) + 1 == 37
moved = (full_l2 & ~full_cl).nonzero().flatten().tolist()
assert moved == list(range(37, 46))
print(
    f"Code Llama: i_1 = {i_1_cl:.2f}, {int(full_cl.sum())} pairs turn, "
    f"{int((~full_cl).sum())} never;\n"
    f"  moved past the context: pairs {moved[0]} to {moved[-1]}",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Let $k = \lfloor i_1 \rfloor$. Asking that pair $k$ be divided by $s$,
# $$b'^{-2k/d} = \frac{b^{-2k/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(2k)}$$
# Pair $i$ is then divided by $s^{i/k}$: by less than $s$ before pair $k$ and by more
# after it, so the slow pairs are interpolated beyond what PI would do. For Llama 2
# ($k = 45$, $s = 4$) the cell finds $b' = 71823$, checks that pair 45 is divided by
# exactly 4, and prints the divisor of the last pair, $4^{63/45} = 6.96$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** $k = \lfloor i_1 \rfloor$ とします。ペア $k$ が $s$ で割られるという条件から、次が得られます。
# $$b'^{-2k/d} = \frac{b^{-2k/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(2k)}$$
# このときペア $i$ は $s^{i/k}$ で割られます。ペア $k$ より前では $s$ より小さい数で、後では大きい数で割られるので、遅いペアは PI 以上に補間されます。
# Llama 2（$k = 45$、$s = 4$）では、下のセルが $b' = 71823$ を求めます。
# ペア 45 がちょうど 4 で割られることを確かめ、最後のペアを割る数 $4^{63/45} = 6.96$ を出力します。

# %% tags=["solution"]
b2, L2, s2 = 1e4, 4096, 4
k2 = math.floor(turn_index(1, d, b2, L2))
b_k = b2 * s2 ** (d / (2 * k2))  # b' = b s^(d/(2k))
ratio_k = rope_frequencies(d, base=b_k).double() / rope_frequencies(d, base=b2)
assert k2 == 45 and math.isclose(ratio_k[k2], 1 / s2, rel_tol=1e-6)
assert_close(ratio_k, s2 ** (-i / k2), rtol=1e-6, atol=0)  # pair i: / s^(i/k)
print(f"b' = {b_k:.0f}; the last pair divided by {1 / ratio_k[-1]:.2f}", end="")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** A search over `beta_fast` from 2 to 20 and `beta_slow` from 0.25
# to 2, in steps of 0.5 and 0.25, measures the largest ratio between the two sets of
# frequencies. The best YaRN settings, `beta_fast` 5.5 or 6 with `beta_slow` 1, still
# differ from `Llama3Scaling()` by a factor of up to 1.24 at some pair; Llama 3's own
# thresholds, 4 and 1, keep and divide exactly the same pairs (0 to 28, and 35 on)
# but differ by up to 1.38 in the six pairs between. The two can never agree
# exactly in the blend: YaRN's ramp is linear in the pair index $i$, Llama 3's is
# linear in the number of turns $r_i$, which falls geometrically with $i$, and YaRN
# rounds its band to whole pairs.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** `beta_fast` を 2 から 20 まで 0.5 刻み、`beta_slow` を 0.25 から 2 まで 0.25 刻みで探し、2 組の周波数の比の最大値を測ります。
# 最もよい YaRN の設定（`beta_fast` が 5.5 か 6、`beta_slow` が 1）でも、`Llama3Scaling()` とはあるペアで最大 1.24 倍違います。
# Llama 3 自身のしきい値 4 と 1 にすると、そのまま保つペア（0 から 28）と割るペア（35 以降）はまったく同じになりますが、その間の 6 組では最大 1.38 倍違います。
# 混ぜる区間で両者が完全に一致することはありません。
# YaRN のランプ関数はペアの番号 $i$ について線形ですが、Llama 3 のものは回転数 $r_i$ について線形で、回転数は $i$ について等比数列的に減ります。
# さらに YaRN は帯の端を整数のペアに丸めます。

# %% tags=["solution"]
b3_, target = 5e5, rope_frequencies(d, base=5e5, scaling=Llama3Scaling())


def gap(beta_fast, beta_slow):
    """The largest |ln(theta'_yarn / theta'_llama3)| over the pairs."""
    yarn_3 = YarnScaling(8, 8192, beta_fast=beta_fast, beta_slow=beta_slow)
    ratio = rope_frequencies(d, base=b3_, scaling=yarn_3).double() / target
    return ratio.log().abs().max().item()


grid = [
    (gap(f / 2, sl / 4), f / 2, sl / 4)
    for f in range(4, 41)
    for sl in range(1, 9)
    if f / 2 > sl / 4
]
best = min(grid)
assert best[1:] in ((5.5, 1.0), (6.0, 1.0)) and best[0] > 0.1  # never exact
yarn_41 = YarnScaling(8, 8192, beta_fast=4, beta_slow=1)
ratio_41 = rope_frequencies(d, base=b3_, scaling=yarn_41).double() / target
differ = ((ratio_41 - 1).abs() > 1e-6).nonzero().flatten().tolist()
assert differ == list(range(29, 35))  # only the six blended pairs
print(
    f"best: beta_fast = {best[1]}, beta_slow = {best[2]}, "
    f"up to {math.exp(best[0]):.2f}x; with 4 and 1: up to "
    f"{math.exp(gap(4, 1)):.2f}x",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 4.** The cell runs the generation with $L = 256$ to keep the loop short.
# The key at $n$ was rotated with the frequencies of the length $n + 1$; compared with
# the final ones, pair $i$ of that key is off by the angle
# $n\,\lvert\theta'_i(n+1) - \theta'_i(3L)\rvert$. It is zero for the last key and
# small for the first few, whose positions are small, and largest for the keys cached
# just past $L$, whose frequencies are still nearly the trained ones (scaled only
# by the length $n + 1$, about 1.04 at $n = 266$) but whose positions are already
# large: up to 10.7 radians at $n = 266$. Past a fraction of a radian the fast
# pairs' terms are scrambled, so the scores of the last query are off almost
# everywhere: by 8.9, 10.2 and 7.8 on average over the three thirds of the keys,
# nearly as large as the scores themselves, whose standard deviation is 12.2. Caching the
# keys before the rotation, and rotating them with the current frequencies, avoids
# all of it.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** ループを短くするため、下のセルでは $L = 256$ として生成します。
# 位置 $n$ のキーは長さ $n + 1$ のときの周波数で回転されています。
# 最終的な周波数と比べると、そのキーのペア $i$ は角度 $n\,\lvert\theta'_i(n+1) - \theta'_i(3L)\rvert$ だけずれています。
# このずれは最後のキーでは 0 で、位置の小さい最初のいくつかのキーでも小さくなります。
# 最も大きいのは $L$ を少し過ぎたところでキャッシュしたキーです。
# 周波数は長さ $n + 1$ でわずかに変わっただけで（$n = 266$ では約 1.04 倍）学習時とほぼ同じなのに、位置はすでに大きいからです。$n = 266$ で最大 10.7 ラジアンずれます。
# ずれが 1 ラジアンの数分の 1 を超えると、速いペアの項はでたらめな値になります。
# そのため、最後のクエリのスコアはほぼすべてのキーでずれます。
# キーを 3 等分した区間ごとの平均は 8.9、10.2、7.8 で、スコアそのもののばらつき（標準偏差 12.2）に近い大きさです。
# キーを回転させる前にキャッシュし、その時点の周波数で回転させれば、このずれはすべて避けられます。

# %% tags=["solution"]
L4 = 256
dyn_4 = DynamicNTKScaling(1.0, L4)
T_end = 3 * L4
keys_4 = torch.randn(T_end, d, dtype=f64)
q_4 = torch.randn(d, dtype=f64)
# each key rotated when it was generated: apply_rope takes T = n + 1
cached = torch.stack(
    [
        apply_rope(keys_4[n], torch.tensor(n), scaling=dyn_4)
        for n in range(T_end)
    ]
)
positions_4 = torch.arange(T_end)
fresh = apply_rope(keys_4, positions_4, scaling=dyn_4, seq_len=T_end)
query_4 = apply_rope(q_4, positions_4[-1], scaling=dyn_4, seq_len=T_end)
error = ((cached - fresh) @ query_4).abs()
by_third = error.view(3, L4).mean(-1)

theta_end = rope_frequencies(d, scaling=dyn_4, seq_len=T_end).double()
theta_at = torch.stack(
    [rope_frequencies(d, scaling=dyn_4, seq_len=n + 1) for n in range(T_end)]
).double()  # (3L, d/2): the frequencies each key was rotated with
off = (positions_4[:, None] * (theta_at - theta_end)).abs().amax(-1)
peak = int(off.argmax())
assert off[-1] == 0 and error[-1] < 1e-9 and L4 < peak < 2 * L4
assert (by_third > 5).all()
print(
    f"largest angle error {off.max():.1f} rad at n = {peak}\n"
    f"mean score error by thirds: {', '.join(f'{e:.1f}' for e in by_third)}"
    f" (scores: standard deviation {(fresh @ query_4).std():.1f})",
    end="",
)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 5.** With $g(s, m) = 0.1\, m \ln s + 1$ at $s = 40$: $g(40, 1) = 1.3689$ and
# $g(40, 0.707) = 1.2608$. Cos and sin, and so $q^R$ and $k^R$, are multiplied by their
# ratio, 1.0857 (the number transformers gives), so the rotary part of a logit grows by
# $1.0857^2 = 1.1788$ before the softmax scale. The softmax scale multiplies every
# logit by $g(40, 0.707)^2 = 1.5896$. In all, the rotary part is multiplied by
# $1.1788 \times 1.5896 = 1.8739 = g(40, 1)^2$, the temperature of DeepSeek-V3, and the
# content part by $1.5896$, that of DeepSeek-V2: with unequal keys the two parts of a
# logit get different temperatures. The cell checks `YarnScaling`'s factor against
# transformers' number and against $g(40, 1) / g(40, 0.707)$, that `apply_rope` scales
# the norm of a rotary part by it, and that a logit built from random content and
# rotary parts with transformers' softmax scale equals
# $\left(g(40, 0.707)^2\, q^C \cdot k^C + g(40, 1)^2\, q^R \cdot k^R\right)/\sqrt{192}$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 5.** $g(s, m) = 0.1\, m \ln s + 1$ に $s = 40$ を入れると、$g(40, 1) = 1.3689$、$g(40, 0.707) = 1.2608$ です。
# cos と sin、つまり $q^R$ と $k^R$ には、その比 1.0857（transformers が返す値）が掛かります。
# そのため、スコアのうち回転する部分は、softmax のスケールを掛ける前の時点で $1.0857^2 = 1.1788$ 倍です。
# softmax のスケールは、すべてのスコアを $g(40, 0.707)^2 = 1.5896$ 倍にします。
# 合わせると、回転する部分は $1.1788 \times 1.5896 = 1.8739 = g(40, 1)^2$ 倍で、これは DeepSeek-V3 の温度です。
# 内容の部分は $1.5896$ 倍で、DeepSeek-V2 の温度です。2 つのキーが異なると、スコアの 2 つの部分に別々の温度がかかります。
# 下のセルでは、`YarnScaling` の係数を transformers の値と $g(40, 1) / g(40, 0.707)$ の両方と比べ、`apply_rope` が回転する部分のノルムをその値倍にすることを確かめます。
# さらに、ランダムな内容の部分と回転する部分から transformers の softmax のスケールで作ったスコアが、
# $\left(g(40, 0.707)^2\, q^C \cdot k^C + g(40, 1)^2\, q^R \cdot k^R\right)/\sqrt{192}$ に等しいことを確かめます。

# %% tags=["solution"]
g_v3 = 0.1 * 1.0 * math.log(40) + 1  # g(40, 1)
g_v2 = 0.1 * 0.707 * math.log(40) + 1  # g(40, 0.707)
yarn_5 = YarnScaling(40, 4096, mscale=1.0, mscale_all_dim=0.707)
# transformers 5.24.0 for this configuration: ROPE_INIT_FUNCTIONS["yarn"]
# attention factor, and DeepseekV3Attention(config, 0).scaling
hf_factor_5, hf_scale_5 = 1.0857263992561355, 0.1147213867929261
assert math.isclose(yarn_5.attention_factor, hf_factor_5, rel_tol=1e-12)
assert math.isclose(yarn_5.attention_factor, g_v3 / g_v2, rel_tol=1e-12)
assert math.isclose(hf_scale_5 * math.sqrt(192), g_v2**2, rel_tol=1e-12)
gen_5 = torch.Generator().manual_seed(5)
q_c5, k_c5 = torch.randn(2, 128, dtype=f64, generator=gen_5)  # content
q_r5, k_r5 = torch.randn(2, 64, dtype=f64, generator=gen_5)  # rotary
m_5, n_5 = torch.tensor(100_000), torch.tensor(60_000)
q_rot5 = apply_rope(q_r5, m_5, scaling=yarn_5)
k_rot5 = apply_rope(k_r5, n_5, scaling=yarn_5)
assert_close(q_rot5.norm(), hf_factor_5 * q_r5.norm())
theta_5 = rope_frequencies(64, scaling=yarn_5).double()
plain_5 = rotate_half(q_r5, m_5, theta_5) @ rotate_half(k_r5, n_5, theta_5)
logit_5 = (q_c5 @ k_c5 + q_rot5 @ k_rot5) * hf_scale_5
expected_5 = (g_v2**2 * (q_c5 @ k_c5) + g_v3**2 * plain_5) / math.sqrt(192)
assert_close(logit_5, expected_5)
print(
    f"factor on cos and sin {yarn_5.attention_factor:.4f}; rotary part "
    f"x {g_v3**2:.4f}, content part x {g_v2**2:.4f}",
    end="",
)

# %% [markdown] lang="en"
# ## References
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position Embedding*.
#   <https://arxiv.org/abs/2104.09864>
# - Chen, S., Wong, S., Chen, L. and Tian, Y. (2023). *Extending Context Window of Large
#   Language Models via Positional Interpolation*. <https://arxiv.org/abs/2306.15595>
# - bloc97 (2023). *NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+)
#   context size without any fine-tuning and minimal perplexity degradation*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/>
# - emozilla (2023). *Dynamically Scaled RoPE further increases performance of long
#   context LLaMA with zero fine-tuning*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14mrgpr/dynamically_scaled_rope_further_increases/>
# - Peng, B., Quesnelle, J., Fan, H. and Shippole, E. (2023). *YaRN: Efficient Context
#   Window Extension of Large Language Models*. <https://arxiv.org/abs/2309.00071>;
#   code: <https://github.com/jquesnelle/yarn>
# - Llama Team, AI @ Meta (2024). *The Llama 3 Herd of Models*.
#   <https://arxiv.org/abs/2407.21783>; reference code (`apply_scaling`):
#   <https://github.com/meta-llama/llama-models>
# - Rozière, B. et al. (2023). *Code Llama: Open Foundation Models for Code*.
#   <https://arxiv.org/abs/2308.12950>
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - Xiong, W. et al. (2023). *Effective Long-Context Scaling of Foundation Models*.
#   <https://arxiv.org/abs/2309.16039>
# - Ding, Y. et al. (2024). *LongRoPE: Extending LLM Context Window Beyond 2 Million
#   Tokens*. <https://arxiv.org/abs/2402.13753>; code (the evolutionary search in
#   `evolution/`, the rotary embeddings in `rope/longrope.py` on the main branch, an
#   older development version on the `longrope` branch):
#   <https://github.com/microsoft/LongRoPE>
# - Abdin, M. et al. (2024). *Phi-3 Technical Report: A Highly Capable Language Model
#   Locally on Your Phone*. <https://arxiv.org/abs/2404.14219>
# - DeepSeek-AI (2024a). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model*. <https://arxiv.org/abs/2405.04434>
# - DeepSeek-AI (2024b). *DeepSeek-V3 Technical Report*.
#   <https://arxiv.org/abs/2412.19437>; code (`MLA` in `inference/model.py`):
#   <https://github.com/deepseek-ai/DeepSeek-V3>
# - OpenAI (2025). gpt-oss reference implementation (`gpt_oss/torch/model.py`).
#   <https://github.com/openai/gpt-oss>
# - Xiao, G. et al. (2023). *Efficient Streaming Language Models with Attention Sinks*
#   (StreamingLLM). <https://arxiv.org/abs/2309.17453>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary Positional
#   Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - Hugging Face transformers, `modeling_rope_utils.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>;
#   Phi-3's `prepare_inputs_for_generation` (`models/phi3/modeling_phi3.py`), added in
#   pull request 33129, *[Phi-3] Bug on stale kv cache*:
#   <https://github.com/huggingface/transformers/pull/33129>; DeepSeek's
#   `yarn_apply_mscale` (`models/deepseek_v3/modeling_deepseek_v3.py`); PhiMoE's
#   `short_mscale` and `long_mscale` (`models/phimoe/modeling_phimoe.py`);
#   `GptOssConfig` (`models/gpt_oss/configuration_gpt_oss.py`).
# - onnxruntime-genai, pull request 1161 (2024). *Recompute KV cache for Phi3 when
#   switching from short to long factor*.
#   <https://github.com/microsoft/onnxruntime-genai/pull/1161>
# - llama.cpp, issue 8995 (2024). *Bug: Phi-3 mini 128k performance degradation with kv
#   size > 8k (server)*. <https://github.com/ggml-org/llama.cpp/issues/8995>; issue
#   24823 (2026), *Phi-3 / Phi-4 LongRoPE: short sequences silently use long-context
#   RoPE factors when the allocated context exceeds original_max_position_embeddings*.
#   <https://github.com/ggml-org/llama.cpp/issues/24823>
# - Model configurations and cards: Llama 3.1 <https://huggingface.co/meta-llama/Llama-3.1-8B>,
#   Qwen2.5 (the note on static YaRN) <https://huggingface.co/Qwen/Qwen2.5-7B-Instruct>,
#   Vicuna v1.5 16k <https://huggingface.co/lmsys/vicuna-7b-v1.5-16k>,
#   Phi-3.5-mini-instruct <https://huggingface.co/microsoft/Phi-3.5-mini-instruct>,
#   Phi-3-vision-128k-instruct <https://huggingface.co/microsoft/Phi-3-vision-128k-instruct>,
#   DeepSeek-V2 <https://huggingface.co/deepseek-ai/DeepSeek-V2>,
#   DeepSeek-V3 <https://huggingface.co/deepseek-ai/DeepSeek-V3>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position Embedding*.
#   <https://arxiv.org/abs/2104.09864>
# - Chen, S., Wong, S., Chen, L. and Tian, Y. (2023). *Extending Context Window of Large
#   Language Models via Positional Interpolation*. <https://arxiv.org/abs/2306.15595>
# - bloc97 (2023). *NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+)
#   context size without any fine-tuning and minimal perplexity degradation*. r/LocalLLaMA（英語）。
#   <https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/>
# - emozilla (2023). *Dynamically Scaled RoPE further increases performance of long
#   context LLaMA with zero fine-tuning*. r/LocalLLaMA（英語）。
#   <https://www.reddit.com/r/LocalLLaMA/comments/14mrgpr/dynamically_scaled_rope_further_increases/>
# - Peng, B., Quesnelle, J., Fan, H. and Shippole, E. (2023). *YaRN: Efficient Context
#   Window Extension of Large Language Models*. <https://arxiv.org/abs/2309.00071>。
#   コード：<https://github.com/jquesnelle/yarn>
# - Llama Team, AI @ Meta (2024). *The Llama 3 Herd of Models*.
#   <https://arxiv.org/abs/2407.21783>。参照実装（`apply_scaling`）：
#   <https://github.com/meta-llama/llama-models>
# - Rozière, B. et al. (2023). *Code Llama: Open Foundation Models for Code*.
#   <https://arxiv.org/abs/2308.12950>
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - Xiong, W. et al. (2023). *Effective Long-Context Scaling of Foundation Models*.
#   <https://arxiv.org/abs/2309.16039>
# - Ding, Y. et al. (2024). *LongRoPE: Extending LLM Context Window Beyond 2 Million
#   Tokens*. <https://arxiv.org/abs/2402.13753>。コード（進化的な探索は `evolution/`、
#   回転位置埋め込みは main ブランチの `rope/longrope.py`、古い開発版は `longrope` ブランチ）：
#   <https://github.com/microsoft/LongRoPE>
# - Abdin, M. et al. (2024). *Phi-3 Technical Report: A Highly Capable Language Model
#   Locally on Your Phone*. <https://arxiv.org/abs/2404.14219>
# - DeepSeek-AI (2024a). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model*. <https://arxiv.org/abs/2405.04434>
# - DeepSeek-AI (2024b). *DeepSeek-V3 Technical Report*.
#   <https://arxiv.org/abs/2412.19437>。コード（`inference/model.py` の `MLA`）：
#   <https://github.com/deepseek-ai/DeepSeek-V3>
# - OpenAI (2025). gpt-oss の参照実装（`gpt_oss/torch/model.py`）：
#   <https://github.com/openai/gpt-oss>
# - Xiao, G. et al. (2023). *Efficient Streaming Language Models with Attention Sinks*
#   (StreamingLLM). <https://arxiv.org/abs/2309.17453>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary Positional
#   Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - Hugging Face transformers の `modeling_rope_utils.py`：
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>。
#   Phi-3 の `prepare_inputs_for_generation`（`models/phi3/modeling_phi3.py`）を加えたプルリクエスト 33129
#   *[Phi-3] Bug on stale kv cache*：<https://github.com/huggingface/transformers/pull/33129>。
#   DeepSeek の `yarn_apply_mscale`（`models/deepseek_v3/modeling_deepseek_v3.py`）、
#   PhiMoE の `short_mscale` と `long_mscale`（`models/phimoe/modeling_phimoe.py`）、
#   `GptOssConfig`（`models/gpt_oss/configuration_gpt_oss.py`）
# - onnxruntime-genai のプルリクエスト 1161（2024 年）*Recompute KV cache for Phi3 when
#   switching from short to long factor*：<https://github.com/microsoft/onnxruntime-genai/pull/1161>
# - llama.cpp の issue 8995（2024 年）*Bug: Phi-3 mini 128k performance degradation with kv
#   size > 8k (server)*：<https://github.com/ggml-org/llama.cpp/issues/8995>。issue 24823（2026 年）
#   *Phi-3 / Phi-4 LongRoPE: short sequences silently use long-context RoPE factors when
#   the allocated context exceeds original_max_position_embeddings*：<https://github.com/ggml-org/llama.cpp/issues/24823>
# - モデルの設定とモデルカード：Llama 3.1 <https://huggingface.co/meta-llama/Llama-3.1-8B>、
#   Qwen2.5（静的な YaRN についての注意書き）<https://huggingface.co/Qwen/Qwen2.5-7B-Instruct>、
#   Vicuna v1.5 16k <https://huggingface.co/lmsys/vicuna-7b-v1.5-16k>、
#   Phi-3.5-mini-instruct <https://huggingface.co/microsoft/Phi-3.5-mini-instruct>、
#   Phi-3-vision-128k-instruct <https://huggingface.co/microsoft/Phi-3-vision-128k-instruct>、
#   DeepSeek-V2 <https://huggingface.co/deepseek-ai/DeepSeek-V2>、
#   DeepSeek-V3 <https://huggingface.co/deepseek-ai/DeepSeek-V3>
