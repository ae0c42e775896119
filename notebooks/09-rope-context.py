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
# A RoPE model degrades past its training length $L$; the common explanation
# (YaRN's, and Liu et al.'s "critical dimension", the index from which pairs no
# longer complete a turn within $L$) is that its slowest pairs turn to angles it never saw. The methods here change only RoPE's frequencies
# $\theta_i$ and differ in one choice: how much to slow each pair, given its
# wavelength. Position interpolation, NTK-aware scaling,
# dynamic NTK, YaRN, Llama 3's rule and LongRoPE become curves on that one
# axis; YaRN and LongRoPE also sharpen attention, for a reason the entropy of
# the softmax shows.

# %% [markdown] lang="ja"
# # RoPE のコンテキスト長を伸ばす
#
# RoPE を使うモデルは、学習時の長さ $L$ を超えると性能が落ちます。よく挙げられる説明によれば、回転の遅いペアが、学習中に一度も現れなかった角度まで回ってしまうことが原因です。
# YaRN の説明や、$L$ の間に 1 周しなくなるペアの境目を「臨界次元」と呼ぶ Liu らの議論がその例です。
# この章の手法はどれも RoPE の周波数 $\theta_i$ だけを変え、違うのは「各ペアを波長に応じてどれだけ遅くするか」という 1 点だけです。
# 横軸に波長、縦軸にどれだけ遅くするかをとると、位置補間、NTK-aware スケーリング、動的 NTK、YaRN、Llama 3 の規則、LongRoPE は 1 枚の図の上の曲線として比べられます。
# YaRN と LongRoPE はさらにアテンションを鋭くします。なぜそうする必要があるかは、softmax のエントロピーを見るとわかります。

# %% tags=["setup"]
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
# RoPE (Su et al. 2021; the chapter [*Rotary position embedding (RoPE)*](08-rope.ipynb)) rotates
# pair $i$ of a query or key at position $m$ by the angle $m\theta_i$, with
# $$\theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, d/2 - 1$$
# for head size $d$ and base $b$. The
# [wavelength](../docs/glossary.md#wavelength) of pair $i$ (positions per full
# turn) and its [number of turns](../docs/glossary.md#number-of-turns) within
# the [training length](../docs/glossary.md#training-length) $L$ are
# $$\lambda_i = \frac{2\pi}{\theta_i} = 2\pi\, b^{2i/d}, \qquad r_i = \frac{L}{\lambda_i}$$
# The wavelengths grow geometrically with $i$, so one index separates the pairs
# that turn more than $\beta$ times within $L$ from the others. Solving
# $r_i = \beta$ for $i$:
# $$\frac{L}{2\pi\, b^{2i/d}} = \beta \quad\Longleftrightarrow\quad i = i_\beta = \frac{d \ln\left(L/(2\pi\beta)\right)}{2\ln b}$$
# A pair with $i \le i_1$ turns at least once within $L$: training showed it
# its whole circle, and a longer input brings no new angle in that pair. A pair with
# $r_i < 1$ saw only the arc from $0$ to $(L-1)\theta_i$, and past $L$ it
# turns into angles the model never saw. These slow pairs are what the methods
# below repair.
#
# For $d = 128$, Llama 2 (base $10^4$, $L = 4096$) has
# $i_1 = 64\ln(4096/2\pi)/\ln 10^4 \approx 45.03$ (the pair whose wavelength is $L$),
# so pairs 0 to 45 (46) turn within its context and 18 never do. Llama 3's larger base
# ($5 \cdot 10^5$) stretches every wavelength but pair 0's ($2\pi$ for any
# base): on a context twice as long, only 35 pairs turn and 29 do not. In the
# figure, filled dots turn within $L$ (dotted), hollow ones never do.

# %% [markdown] lang="ja"
# ## 学習時の長さと波長
#
# RoPE（Su ら 2021、[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章）は、位置 $m$ のクエリやキーのペア $i$ を角度 $m\theta_i$ だけ回転させます。
# ヘッドの次元数を $d$、底を $b$ とすると、周波数は次のとおりです。
# $$\theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, d/2 - 1$$
# ペア $i$ の[波長](../docs/glossary.ja.md#wavelength)（1 周に要する位置の数）と、[学習時の長さ](../docs/glossary.ja.md#training-length) $L$ の間の[回転数](../docs/glossary.ja.md#number-of-turns)は次のとおりです。
# $$\lambda_i = \frac{2\pi}{\theta_i} = 2\pi\, b^{2i/d}, \qquad r_i = \frac{L}{\lambda_i}$$
# 波長は $i$ について指数関数的に伸びるので、$L$ の間に $\beta$ 周より多く回るペアとそれ以外は、1 つの番号を境目に分かれます。$r_i = \beta$ を $i$ について解くと、次のようになります。
# $$\frac{L}{2\pi\, b^{2i/d}} = \beta \quad\Longleftrightarrow\quad i = i_\beta = \frac{d \ln\left(L/(2\pi\beta)\right)}{2\ln b}$$
# $i \le i_1$ のペアは $L$ の間に少なくとも 1 周し、学習中に円周上のすべての角度が現れているので、入力が長くなってもそのペアに新しい角度は現れません。
# $r_i < 1$ のペアで学習中に現れたのは $0$ から $(L-1)\theta_i$ までの弧だけで、$L$ を超えると、モデルが一度も見たことのない角度まで回ります。以下の手法が直すのは、この遅いペアです。
#
# $d = 128$ の Llama 2（底 $10^4$、$L = 4096$）では $i_1 = 64\ln(4096/2\pi)/\ln 10^4 \approx 45.03$（波長が $L$ に等しいペア）なので、ペア 0〜45 の 46 組がコンテキスト内で 1 周以上し、18 組は 1 周もしません。
# Llama 3 は底が大きく（$5 \cdot 10^5$）、ペア 0（波長は底によらず $2\pi$）を除くすべての波長が伸びます。そのため、コンテキストは 2 倍長いのに、1 周以上するのは 35 組だけで、29 組は 1 周もしません。
# 図では、塗りつぶした点がコンテキスト内で 1 周以上するペア、白抜きの点が 1 周もしないペアで、点線は $L$ の位置です。


# %%
def turn_index(beta, d, b, L):
    """i_beta: the (fractional) pair index that turns beta times within L."""
    return d * math.log(L / (two_pi * beta)) / (2 * math.log(b))


d = 128
i = torch.arange(d // 2, dtype=f64)
settings = (("Llama 2", 1e4, 4096), ("Llama 3", 5e5, 8192))
for name, b, L in settings:
    lam = two_pi / rope_frequencies(d, base=b).double()  # lambda_i
    n_full = int((L / lam >= 1).sum())  # pairs with r_i >= 1
    print(
        f"{name}: i_1 = {turn_index(1, d, b, L):.2f}; {n_full} pairs turn "
        f"within L, {d // 2 - n_full} never (lambda_{n_full - 1} = "
        f"{lam[n_full - 1]:.0f})"
    )

# %% tags=["check"] summary={"en": "posenc's frequencies are b^(-2i/d); the count of pairs with r_i >= 1 is the integer part of i_1 plus one; the counts above hold", "ja": "posenc の周波数は b^(-2i/d) で、r_i ≥ 1 のペアの数は i_1 の整数部分に 1 を足したものに等しく、上に示した数もこれと一致します"}
for name, b, L in settings:
    theta = rope_frequencies(d, base=b).double()
    assert_close(theta, b ** (-2 * i / d), rtol=1e-6, atol=0)
    lam = two_pi / theta
    assert_close(lam, two_pi * b ** (2 * i / d), rtol=1e-6, atol=0)
    assert math.isclose(lam[0], two_pi)  # pair 0: 2 pi for any base
    n_full = int((L / lam >= 1).sum())
    # a second count: the pairs 0 .. floor(i_1)
    assert n_full == math.floor(turn_index(1, d, b, L)) + 1
    assert n_full == {"Llama 2": 46, "Llama 3": 35}[name]
lam_2 = two_pi / rope_frequencies(d, base=1e4).double()
assert round(lam_2[45].item()) == 4080 and lam_2[46] > 4096

# %% tags=["figure"] alt={"en": ["RoPE wavelength per pair i on a log axis for base 10^4, L = 4096 and base 5·10^5, L = 8192, dotted lines at L. Filled dots, pairs 0–45 and 0–34, turn at least once within L; the hollow dots above the line never complete a turn."], "ja": ["底 10^4、L = 4096 の場合と、底 5·10^5、L = 8192 の場合の RoPE の波長を、ペア i ごとに対数軸で描いた図です。点線は L の位置です。塗りつぶした点（ペア 0〜45 と 0〜34）は L の間に少なくとも 1 周し、点線より上の白抜きの点は 1 周もしません。"]}
fig, ax = plt.subplots(figsize=(6.4, 2.8))
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

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the slow-pair hypothesis and its cost.** That the slow pairs cause
# the failure past $L$ is a hypothesis, the one these
# methods build on: YaRN (Peng et al. 2023, §3.2) fully interpolates the pairs that never
# turn within $L$, and Liu et al. (2024) explain the same boundary by what they
# call the critical dimension for extrapolation. A longer input also spreads attention over more keys
# (the section [The attention temperature](#the-attention-temperature)). Sun et al.
# (2022, Table 2) measured the cost: a RoPE model trained on 1024 tokens has a
# [perplexity](../docs/glossary.md#perplexity) of 25.52 at 1024 tokens, 73.6 at 2048
# and 294.45 at 4096; [blockwise causal attention](../docs/glossary.md#blockwise-causal-attention)
# ([*xPos and NoPE*](10-xpos-nope.ipynb))
# brings the last two to 25.57 and 25.65 (Table 5).
# [*Which encodings extrapolate?*](11-length-generalisation.ipynb) shows a small
# RoPE model that fails past $L$ and recovers when keys beyond the trained
# distances are hidden.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：遅いペアの仮説と性能の低下**
#
# $L$ の先で失敗する原因が遅いペアにあるというのは仮説ですが、この章の手法はどれもこの仮説に基づいています。
# YaRN（Peng ら 2023、§3.2）は $L$ の間に 1 周もしないペアを完全に補間します。
# Liu ら（2024）は、同じ境目を外挿の臨界次元（critical dimension）という考え方で説明しています。
# さらに、長い入力ではアテンションがより多くのキーに分散します（[「アテンションの温度」](#アテンションの温度)の節）。
# 性能がどれだけ落ちるかは、Sun ら（2022、表 2）が測っています。1024 トークンで学習した RoPE のモデルの[パープレキシティ](../docs/glossary.ja.md#perplexity)は、1024 トークンで 25.52、2048 で 73.6、4096 で 294.45 です。
# [ブロック単位の因果的アテンション](../docs/glossary.ja.md#blockwise-causal-attention)（[「xPos と NoPE」](10-xpos-nope.ipynb)の章）を使うと、後の 2 つは 25.57 と 25.65 になります（表 5）。
# [「どの位置エンコーディングが外挿できるか」](11-length-generalisation.ipynb)の章では、RoPE を使う小さなモデルが $L$ の先で失敗し、学習した距離より遠いキーを隠すと回復する様子を示します。

# %% [markdown] lang="en"
# ## Position interpolation
#
# The simplest repair, position interpolation (PI), squeezes the positions so
# that every angle stays in the trained range. To read $sL$ positions with a model trained on $L$, Chen et
# al. (2023), and independently kaiokendev, feed position $m$ as $m/s$. The
# angle is a product, so dividing the position is dividing the frequency:
# $$\frac{m}{s}\,\theta_i = m\,\frac{\theta_i}{s}, \qquad \theta'_i = \frac{\theta_i}{s}$$
# The last position, $m = sL - 1$, then acts as $L - 1/s$: its angle
# $(L - 1/s)\theta_i$ stays below $L\theta_i$, the angle of the first position
# past the trained context. This chapter counts an angle below $L\theta_i$ as
# inside the trained range.
#
# The price is resolution: neighbouring tokens are now only $\theta_i/s$
# apart, $1/s$ radian instead of 1 for the fastest pair: an offset-1 angle
# training never produced. Chen et al. adapt the model with a
# short [fine-tuning](../docs/glossary.md#fine-tuning) (within 1000 steps); their
# Theorem 2.1 bounds how far the score at a position between two integers can stray
# from its neighbours', far below what extrapolated positions reach.
# `posenc.LinearScaling(s)` is this rule.

# %% [markdown] lang="ja"
# ## 位置補間
#
# いちばん単純な直し方である位置補間（PI）は、位置を縮めて、すべての角度を学習した範囲に収めます。
# $L$ で学習したモデルに $sL$ 個の位置を読ませるため、Chen ら（2023）は位置 $m$ を $m/s$ として与えました（kaiokendev も独立に同じことをしています）。
# 角度は積なので、位置を割ることは周波数を割ることと同じです。
# $$\frac{m}{s}\,\theta_i = m\,\frac{\theta_i}{s}, \qquad \theta'_i = \frac{\theta_i}{s}$$
# 最後の位置 $m = sL - 1$ は位置 $L - 1/s$ として働きます。その角度 $(L - 1/s)\theta_i$ は、学習したコンテキストの直後の位置の角度 $L\theta_i$ より小さいままです。
# この章では、$L\theta_i$ より小さい角度を学習した範囲の内側とみなします。
#
# その代わり、分解能が下がります。隣り合うトークンの角度の差は $\theta_i/s$ に縮み、最も速いペアでは 1 ラジアンから $1/s$ ラジアンになります。隣り合うトークンの間でこの差が生じることは、学習中には一度もありませんでした。
# Chen らは短い[ファインチューニング](../docs/glossary.ja.md#fine-tuning)（1000 ステップ以内）でモデルを新しい位置の間隔に適応させています。
# 論文の定理 2.1 は、整数と整数の間の位置でのスコアが、両隣の整数位置でのスコアからどれだけ離れうるかに上界を与えます。その上界は、外挿した位置で生じるずれよりはるかに小さい値です。
# `posenc.LinearScaling(s)` がこの規則にあたります。

# %%
b, L, s = 1e4, 4096, 4  # Llama 2's base and training length; a factor of 4
theta = rope_frequencies(d, base=b).double()

# %% tags=["check"] summary={"en": "LinearScaling divides every frequency by s, rotating m with it is rotating m/s with the original frequencies at every position up to sL", "ja": "LinearScaling はすべての周波数を s で割ります。sL までのどの位置でも、この周波数で位置 m として回転させた結果は、元の周波数で位置 m/s として回転させた結果と同じです"}
pi = LinearScaling(s)
theta_pi = rope_frequencies(d, base=b, scaling=pi).double()
assert_close(theta_pi, theta / s, rtol=1e-6, atol=0)  # theta'_i = theta_i / s
x = torch.randn(s * L, d, dtype=f64)
m = torch.arange(s * L)
assert_close(apply_rope(x, m, scaling=pi), apply_rope(x, m / s))

# %% [markdown] lang="en"
# ## NTK-aware scaling: a larger base
#
# bloc97 (2023) argued that PI compresses where it hurts: the fast pairs tell
# neighbouring tokens apart, already turn many times within $L$, and gain
# nothing from interpolation. (The name comes from neural tangent kernel
# theory, in which networks learn high frequencies poorly unless their inputs
# carry them.) A new base changes all frequencies at once. The fastest pair,
# $\theta_0 = b^0 = 1$, does not depend on the base; asking that the slowest,
# $\theta_{d/2-1} = b^{-(d-2)/d}$, be divided by $s$ fixes the base:
# $$b'^{-(d-2)/d} = \frac{b^{-(d-2)/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(d-2)}$$
# Every pair in between is divided by a power of $s$ that grows from 1 to $s$
# with $i$:
# $$\theta'_i = b'^{-2i/d} = \big(b\, s^{d/(d-2)}\big)^{-2i/d} = \theta_i\, s^{-2i/(d-2)}$$
# `posenc.NTKScaling(s)` is this change of base. It leaves slow pairs outside
# their arc, though: over the extended context pair $i$ reaches
# $sL\theta'_i = L\theta_i\, s^{1-2i/(d-2)}$, beyond the trained $L\theta_i$
# for every $i < d/2 - 1$. Peng et al. (2023) point out these out-of-bound
# angles, which is why NTK-aware scaling needs a factor larger than the
# extension it aims at. For Llama 2 and $s = 4$:

# %% [markdown] lang="ja"
# ## NTK-aware スケーリング：底を大きくする
#
# bloc97（2023）は、PI が圧縮すべきでないところまで圧縮していると主張しました。
# 速いペアは隣り合うトークンを見分ける役目を持ち、$L$ の間にすでに何周もしているので、補間しても得るものがありません。
# NTK-aware という名前は、ニューラルタンジェントカーネル（NTK）の理論に由来します。この理論によれば、入力に高い周波数が含まれていなければ、ネットワークは高い周波数をうまく学習できません。
# 底を変えると、すべての周波数が一度に変わります。
# 最も速いペアの周波数 $\theta_0 = b^0 = 1$ は底によりません。最も遅いペアの周波数 $\theta_{d/2-1} = b^{-(d-2)/d}$ が $s$ で割られるという条件から、底が決まります。
# $$b'^{-(d-2)/d} = \frac{b^{-(d-2)/d}}{s} \quad\Longleftrightarrow\quad b' = b\, s^{d/(d-2)}$$
# 間のペアは、$i$ とともに 1 から $s$ まで大きくなる $s$ のべき乗で割られます。
# $$\theta'_i = b'^{-2i/d} = \big(b\, s^{d/(d-2)}\big)^{-2i/d} = \theta_i\, s^{-2i/(d-2)}$$
# `posenc.NTKScaling(s)` がこの底の変更にあたります。
#
# ただし、この底では遅いペアが学習した弧の外に出てしまいます。
# 伸ばしたコンテキストの間に、ペア $i$ は角度 $sL\theta'_i = L\theta_i\, s^{1-2i/(d-2)}$ に達します。これは $i < d/2 - 1$ のすべてのペアで、学習時の $L\theta_i$ より大きい値です。
# Peng ら（2023）はこの範囲外の角度を指摘しています。NTK-aware スケーリングの係数を、目標とする伸び率より大きく設定しなければならないのはそのためです。
# Llama 2 と $s = 4$ では次のとおりです。

# %%
ntk = NTKScaling(s)
theta_ntk = rope_frequencies(d, base=b, scaling=ntk).double()
never = L * theta < two_pi  # r_i < 1: no full turn in training
past_arc = s * L * theta_ntk > L * theta * (1 + 1e-6)  # sL theta'_i > L theta_i
print(
    "slow pairs pushed past their trained arc: "
    f"{int((never & past_arc).sum())} of {int(never.sum())}",
    end="",
)

# %% tags=["check"] summary={"en": "NTKScaling is the change of base to b s^(d/(d-2)); pair i is divided by s^(2i/(d-2)), pair 0 not at all and the slowest pair by s; exactly the pairs before the last leave their arc", "ja": "NTKScaling は底を b s^(d/(d-2)) に変えることと同じで、ペア i は s^(2i/(d-2)) で割られ、ペア 0 はそのまま、最も遅いペアは s で割られます。弧の外に出るのは最後のペアを除くすべてのペアです"}
b_new = b * s ** (d / (d - 2))  # b' = b s^(d/(d-2))
assert_close(
    theta_ntk, rope_frequencies(d, base=b_new).double(), rtol=1e-6, atol=0
)
assert_close(theta_ntk, theta * s ** (-2 * i / (d - 2)), rtol=1e-6, atol=0)
assert_close(theta_ntk[-1], theta[-1] / s, rtol=1e-6, atol=0)  # slowest / s
assert theta_ntk[0] == theta[0] == 1  # the fastest pair is untouched
assert torch.equal(past_arc, i < d // 2 - 1)
assert (never & past_arc).sum() == 17 and never.sum() == 18

# %% [markdown] lang="en"
# ## Dynamic NTK: a factor that grows with the sequence
#
# A fixed factor changes the frequencies even for short inputs and still
# fails past $sL$. emozilla (2023), who reports both on LLaMA, takes the factor
# from the current sequence length $T$ instead: none while $T \le L$, then
# $T/L$, recomputed as the sequence grows (keys cached after their rotation
# then go stale, see [the note below](#deeper-dynamic-ntk-and-a-kv-cache)). Dynamic NTK at length $T$ is
# NTK-aware scaling with the factor $T/L$:
# $$b_T = b\left(\frac{T}{L}\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# `posenc.DynamicNTKScaling(s, L)` takes $T$ as `seq_len`. emozilla's code
# has a slope, which Hugging Face names `factor` $s$: its factor is
# $s_T = sT/L - (s-1)$ ([the note](#deeper-the-dynamic-factor-is-a-slope) derives it); $s = 1$ gives $T/L$, Peng et al.'s
# form (§3.3). **This chapter, its table and its
# interactive figure use $s = 1$.**

# %% [markdown] lang="ja"
# ## 動的 NTK：系列とともに大きくなる係数
#
# 係数を固定すると、短い入力でも周波数が変わってしまい、しかも $sL$ を超えればやはり性能が落ちます。
# emozilla（2023）は、LLaMA でこの 2 つの問題を報告したうえで、係数を固定せず、その時点の系列長 $T$ から決めます。
# $T \le L$ の間は周波数を変えず、その先は係数を $T/L$ とし、系列が伸びるたびに計算し直します。そのため、回転させてからキャッシュしたキーは、新しい周波数と合わなくなります（下の[「さらに詳しく：動的 NTK と KV キャッシュ」](#deeper-動的-ntk-と-kv-キャッシュ)）。
# 式で書くと、長さ $T$ での動的 NTK は、係数 $T/L$ の NTK-aware スケーリングです。
# $$b_T = b\left(\frac{T}{L}\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# `posenc.DynamicNTKScaling(s, L)` は $T$ を `seq_len` で受け取ります。
# emozilla のコードでは係数が系列長とともに線形に増え、その傾きを決める $s$ を Hugging Face は `factor` と呼びます。このコードでの係数は $s_T = sT/L - (s-1)$ です（導出は下の[「さらに詳しく」](#deeper-動的-ntk-の係数は傾き)）。$s = 1$ なら係数は $T/L$ で、Peng ら（§3.3）の書き方と同じです。
# **この章では、本文、表、対話的な図のすべてで $s = 1$ を使います**。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the dynamic factor is a slope.** emozilla's
# `LlamaDynamicScaledRotaryEmbedding` (argument `ntk`) and Hugging Face's
# `rope_type="dynamic"` (`factor` $s$) write the rule as
# $$b_T = b\left(\frac{sT}{L} - (s-1)\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# the NTK-aware base for the factor $s_T = sT/L - (s-1)$, which is 1 at
# $T = L$ and grows by $s/L$ per position. With $s = 1$ it is $T/L$; with
# $s = 4$ it divides the slowest pair at $T = sL$ by $s^2 - s + 1 = 13$, not
# by 4. Without `ntk` the same class interpolates dynamically instead: PI with
# $s = T/L$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：動的 NTK の係数は傾き**
#
# emozilla の `LlamaDynamicScaledRotaryEmbedding`（引数 `ntk`）と Hugging Face の `rope_type="dynamic"`（`factor` $s$）は、この規則を次のように書きます。
# $$b_T = b\left(\frac{sT}{L} - (s-1)\right)^{d/(d-2)} \quad (T > L), \qquad b_T = b \quad (T \le L)$$
# これは係数 $s_T = sT/L - (s-1)$ に対する NTK-aware の底です。この係数は $T = L$ で 1 になり、位置が 1 つ進むごとに $s/L$ ずつ増えます。
# $s = 1$ なら $T/L$ そのものです。$s = 4$ では、$T = sL$ で最も遅いペアを 4 ではなく $s^2 - s + 1 = 13$ で割ります。
# `ntk` を指定しないと、同じクラスは代わりに動的な位置補間（$s = T/L$ の PI）を行います。

# %% tags=["deeper"]
rows = []
for k in (2, 4, 8):
    factors = [s_cfg * k - (s_cfg - 1) for s_cfg in (1, 2, 4)]  # s_T at kL
    rows.append(f"T = {k}L: s_T = " + ", ".join(map(str, factors)))
print("Hugging Face's factor s = 1, 2, 4\n" + "\n".join(rows), end="")


# %% tags=["deeper", "check"] summary={"en": "DynamicNTKScaling gives Hugging Face's frequencies, is NTK-aware scaling with the factor s_T for T > L, keeps the trained frequencies for T <= L, and with factor 4 divides the slowest pair by 13 at T = 4L", "ja": "DynamicNTKScaling は Hugging Face と同じ周波数を与え、T > L では係数 s_T の NTK-aware スケーリングで、T ≤ L では学習時の周波数のままです。factor 4 の場合、T = 4L で最も遅いペアを 13 で割ります"}
def check_hf(theta, hf_values):
    """theta'_i against {i: value} computed by Hugging Face transformers."""
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
for (s_cfg, k), values in hf_dynamic.items():
    dyn = DynamicNTKScaling(s_cfg, L)
    theta_T = rope_frequencies(d, base=b, scaling=dyn, seq_len=k * L).double()
    check_hf(theta_T, dict(zip((16, 32, 63), values, strict=True)))
    s_T = s_cfg * k - (s_cfg - 1)  # the effective NTK-aware factor
    assert_close(theta_T, theta * s_T ** (-2 * i / (d - 2)), rtol=1e-6, atol=0)
    assert theta_T[0] == 1  # pair 0 kept
# T = sL with Hugging Face's factor s = 4: NTK-aware with 13, not with 4
dyn_4 = rope_frequencies(
    d, base=b, scaling=DynamicNTKScaling(4, L), seq_len=4 * L
)
assert_close(dyn_4, rope_frequencies(d, base=b, scaling=NTKScaling(13)))
assert math.isclose(theta[-1] / dyn_4[-1], 13, rel_tol=1e-6)
dyn_1 = DynamicNTKScaling(1.0, L)
dyn_1_4L = rope_frequencies(d, base=b, scaling=dyn_1, seq_len=4 * L)
assert_close(dyn_1_4L, rope_frequencies(d, base=b, scaling=NTKScaling(4)))

# %% tags=["figure"] alt={"en": ["Dynamic NTK with Hugging Face's factor 1: ratio of new to original frequency against pair i on a log axis, for sequence lengths T = L, 2L, 4L, 8L and 16L. At T = L it is 1 everywhere; longer sequences tilt the line further down, reaching L/T at the slowest pair."], "ja": ["Hugging Face の factor を 1 とした動的 NTK：系列長 T = L、2L、4L、8L、16L について、新しい周波数と元の周波数の比をペア i に対して対数軸で描いた図です。T = L ではどこでも 1 で、系列が長いほど線が下に傾き、最も遅いペアで L/T に達します。"]}
fig, ax = plt.subplots(figsize=(6.4, 2.6))
ks = (1, 2, 4, 8, 16)
colors = ("C0", "C1", "C2", "C3", "C4")  # site colours: both themes
for k, color in zip(ks, colors, strict=True):
    scaled = rope_frequencies(d, base=b, scaling=dyn_1, seq_len=k * L).double()
    label = f"$T = {k}L$" if k > 1 else "$T = L$"
    ax.plot(scaled / theta, color=color, label=label)
ax.set(yscale="log", xlabel="$i$", ylabel=r"$\theta'_i / \theta_i$")
ax.legend(loc="lower left", ncols=2)
plt.show()

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: dynamic NTK and a KV cache.** Recomputing the frequencies has a catch when keys enter the
# [KV cache](../docs/glossary.md#kv-cache) already rotated, as in Hugging
# Face's Llama: a key cached at an early length keeps that length's
# frequencies while later queries get newer ones, and the score of a query at
# $m$ and a key at $n$ is no longer a function of $m - n$. Peng et al. (2023)
# recommend caching keys before the rotation; exercise 4 measures the damage.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：動的 NTK と KV キャッシュ**
#
# 周波数を計算し直すことには落とし穴があります。Hugging Face の Llama のように、回転済みのキーを [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に入れる場合です。
# 早い時点でキャッシュしたキーはその時点の周波数で回転されたままなのに、あとのクエリは新しい周波数で回転されます。そのため、位置 $m$ のクエリと位置 $n$ のキーのスコアは、もはや $m - n$ だけの関数ではありません。
# Peng ら（2023）は、キーを回転させる前にキャッシュするよう勧めています。どれだけずれるかは演習 4 で測ります。


# %% tags=["deeper", "check"] summary={"en": "rotated at one length, a shifted query and key keep their score; the key rotated at T = L and the query at T = 2L do not", "ja": "同じ長さで回転させれば、クエリとキーを一緒にずらしてもスコアは変わりませんが、キーを T = L で、クエリを T = 2L で回転させると変わります"}
def score(m, n, len_q, len_k):
    """The query at m rotated for the length len_q, the key at n for len_k."""
    q_m = apply_rope(q, torch.tensor(m), scaling=dyn_1, seq_len=len_q)
    return q_m @ apply_rope(k, torch.tensor(n), scaling=dyn_1, seq_len=len_k)


q, k = torch.randn(2, d, dtype=f64)
ms = (100, 3000, 8000)
same = torch.stack([score(m, m - 100, 2 * L, 2 * L) for m in ms])
mixed = torch.stack([score(m, m - 100, 2 * L, L) for m in ms])
assert_close(same, same[0].expand(3))  # one set of frequencies: relative
assert (mixed - mixed[0]).abs().max() > 0.1  # two lengths: not relative

# %% [markdown] lang="en"
# ## YaRN: interpolation by parts, and a temperature
#
# Peng et al. (2023) go back to the wavelengths. A pair that turns many times
# within $L$ needs no interpolation; a pair that never completes a turn should
# be interpolated fully, as in PI, so that it stays inside its trained arc;
# the pairs in between get a blend. Their "NTK-by-parts" rule measures this
# with the number of turns $r_i$ and two thresholds $\alpha < \beta$ ($\alpha = 1$
# and $\beta = 32$ for Llama). With the
# [ramp](../docs/glossary.md#ramp-function)
# $$\gamma(r) = \begin{cases} 0, & r < \alpha \\ 1, & r > \beta \\ \dfrac{r - \alpha}{\beta - \alpha}, & \alpha \le r \le \beta \end{cases}$$
# the new frequencies are
# $$\theta'_i = \left(1 - \gamma(r_i)\right)\frac{\theta_i}{s} + \gamma(r_i)\,\theta_i$$
# In pair indices, $r_i > \beta$ means $i < i_\beta$ and $r_i < \alpha$ means
# $i > i_\alpha$. The authors' code, which Hugging Face's `"yarn"` and
# `posenc.YarnScaling` follow, draws the ramp between the same two indices,
# rounded outward, but linearly in $i$ rather than in $r$
# ([the note below](#deeper-the-ramp-in-the-code) compares the two). YaRN is this rule plus an
# [attention temperature](../docs/glossary.md#attention-temperature). For
# Llama 2 and $s = 4$:

# %% [markdown] lang="ja"
# ## YaRN：部分ごとの補間と温度
#
# Peng ら（2023）は波長に立ち返りました。$L$ の間に何周もするペアは補間する必要がありません。
# 1 周もしないペアは、学習した弧の内側にとどまるよう PI と同じく完全に補間すべきで、その間のペアには両者を混ぜたものを使います。
# Peng らの「NTK-by-parts」の規則は、この区別を回転数 $r_i$ と 2 つのしきい値 $\alpha < \beta$ で決めます（Llama では $\alpha = 1$、$\beta = 32$）。
# [ランプ関数](../docs/glossary.ja.md#ramp-function)を
# $$\gamma(r) = \begin{cases} 0, & r < \alpha \\ 1, & r > \beta \\ \dfrac{r - \alpha}{\beta - \alpha}, & \alpha \le r \le \beta \end{cases}$$
# とすると、新しい周波数は次のとおりです。
# $$\theta'_i = \left(1 - \gamma(r_i)\right)\frac{\theta_i}{s} + \gamma(r_i)\,\theta_i$$
# ペアの番号で言えば、$r_i > \beta$ は $i < i_\beta$ のこと、$r_i < \alpha$ は $i > i_\alpha$ のことです。
# 公式実装（以下、コード）は、同じ 2 つの番号を外側に丸め、その間の帯（両者を混ぜるペア）では $r$ ではなく $i$ について線形なランプ関数を使います（下の[「さらに詳しく」](#deeper-コードの中のランプ関数)で 2 つを比べます）。
# Hugging Face の `"yarn"` と `posenc.YarnScaling` はこの公式実装に従います。
# YaRN は、この規則に[アテンションの温度](../docs/glossary.ja.md#attention-temperature)を加えたものです。Llama 2 と $s = 4$ では次のとおりです。

# %%
yarn = YarnScaling(s, L)  # beta_fast = 32, beta_slow = 1
theta_yarn = rope_frequencies(d, base=b, scaling=yarn).double()
i_32, i_1 = turn_index(32, d, b, L), turn_index(1, d, b, L)
low, high = math.floor(i_32), math.ceil(i_1)  # rounded outward
print(
    f"i_32 = {i_32:.2f}, i_1 = {i_1:.2f}: pairs 0-{low} kept, "
    f"{low + 1}-{high - 1} blended, {high}-{d // 2 - 1} divided by s",
    end="",
)


# %% tags=["check"] summary={"en": "YarnScaling gives Hugging Face's frequencies, keeps pairs 0-20, divides pairs 46-63 by s, and there agrees with the paper's ramp", "ja": "YarnScaling は Hugging Face と同じ周波数を与え、ペア 0〜20 をそのまま保ち、ペア 46〜63 を s で割ります。これらのペアでは論文のランプ関数と一致します"}
def ntk_by_parts(theta, L, s, alpha, beta):
    """The paper's rule: gamma linear in the turns r_i = L theta_i / (2 pi)."""
    r = L * theta / two_pi
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)
    return (1 - gamma) * theta / s + gamma * theta


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
assert (low, high) == (20, 46)
assert_close(theta_yarn[: low + 1], theta[: low + 1], rtol=1e-6, atol=0)  # kept
assert_close(theta_yarn[high:], theta[high:] / s, rtol=1e-6, atol=0)  # / s
paper = ntk_by_parts(theta, L, s, alpha=1, beta=32)
outside = (i <= low) | (i >= high)
assert_close(theta_yarn[outside], paper[outside], rtol=1e-6, atol=0)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the ramp in the code.** The code turns the thresholds,
# `beta_fast` ($\beta$) and `beta_slow` ($\alpha$), into pair indices with the
# formula for $i_\beta$, rounds the range outward to whole indices, and ramps
# linearly in $i$; with the default thresholds,
# $$\gamma_i = 1 - \min\left(1, \max\left(0, \frac{i - \lfloor i_{32} \rfloor}{\lceil i_1 \rceil - \lfloor i_{32} \rfloor}\right)\right)$$
# Outside the band the two ramps agree. Inside, they do not: $r_i$ falls
# geometrically with $i$, so the paper's ramp, linear in $r$, turns towards
# interpolation much earlier than the code's. For the setting above the code's
# frequencies range from 0.98 to 1.73 times the paper's. `posenc` follows the
# code: it is what the paper's models were fine-tuned with and what Hugging
# Face runs. In the figure the dotted lines are pairs 20 and 46.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：コードの中のランプ関数**
#
# コードは、しきい値 `beta_fast`（$\beta$）と `beta_slow`（$\alpha$）を $i_\beta$ の式でペアの番号に直し、帯の両端を外側に丸めて整数にし、$i$ について線形なランプ関数を作ります。既定のしきい値では次の式です。
# $$\gamma_i = 1 - \min\left(1, \max\left(0, \frac{i - \lfloor i_{32} \rfloor}{\lceil i_1 \rceil - \lfloor i_{32} \rfloor}\right)\right)$$
# 2 つのランプ関数は、帯の外では一致しますが、帯の中では一致しません。
# $r_i$ は $i$ について指数関数的に減るので、$r$ について線形な論文のランプ関数は、コードのものよりずっと早く補間の側へ傾きます。
# 上の設定では、コードの周波数は論文の式の 0.98〜1.73 倍です。
# `posenc` はコードに従います。論文のモデルはこのコードでファインチューニングされ、Hugging Face もこれを実行するからです。
# 図の点線はペア 20 と 46 です。

# %% tags=["deeper"] alt={"en": ["YaRN with s = 4, dotted lines at pairs 20 and 46. Left: frequencies kept up to pair 20, divided by 4 from pair 46, blended in between. Right: ratio to the original; the code's ramp, linear in i, falls later than the paper's, linear in the turns."], "ja": ["s = 4 の YaRN の図です。点線はペア 20 と 46 の位置です。左の図では、周波数はペア 20 まではそのまま、ペア 46 からは 4 分の 1 で、その間は両者を混ぜた値です。右の図は元の周波数との比で、i について線形なコードのランプ関数は、回転数について線形な論文のランプ関数より遅れて下がります。"]}
gamma = 1 - ((i - low) / (high - low)).clamp(0, 1)  # linear in i
assert_close(theta_yarn, (1 - gamma) * theta / s + gamma * theta)
ratio = theta_yarn[~outside] / paper[~outside]
assert (ratio - 1).abs().min() > 1e-3  # different at every pair inside
print(f"code / paper inside the band: {ratio.min():.2f} to {ratio.max():.2f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3.0))
left.plot(theta, color=INK, ls="--", label=r"$\theta_i$")
left.plot(theta_yarn, color="C0", label=r"$\theta'_i$")
left.set(yscale="log", xlabel="$i$", ylabel=r"$\theta_i,\ \theta'_i$")
left.legend(loc="lower left")
right.plot(
    theta_yarn / theta, color="C0", label=r"$(1 - \gamma_i)/s + \gamma_i$"
)
right.plot(
    paper / theta,
    color="C1",
    ls="--",
    label=r"$(1 - \gamma(r_i))/s + \gamma(r_i)$",
)
right.set(yscale="log", xlabel="$i$", ylabel=r"$\theta'_i / \theta_i$")
right.set(yticks=[1, 1 / 2, 1 / 4], yticklabels=["$1$", "$1/2$", "$1/4$"])
right.set_ylim(1 / 5, 1.25)
right.minorticks_off()
right.legend(loc="lower left")
for ax in (left, right):
    for edge in (low, high):
        ax.axvline(edge, color=INK, lw=0.8, ls=":")
plt.show()

# %% [markdown] lang="en"
# ### The attention temperature
#
# Peng et al. also multiply the queries and keys by $\sqrt{1/t}$, which divides
# every logit by a temperature $t$, and fitted for Llama
# $$\sqrt{1/t} = 0.1\ln s + 1$$
# Why would a longer context need sharper attention? Suppose the long input
# were the trained one repeated $s$ times. Every attention weight $p_j$ would be
# divided by $s$, and the entropy $H = -\sum_j p_j \ln p_j$, the logarithm of
# the effective number of keys a query attends to, would grow by exactly
# $\ln s$. Fresh tokens do much the same: attention spreads thinner.
# Multiplying the logits $z_j$ by $a$ works against it. With
# $p_j \propto e^{a z_j}$, $H = \ln \sum_j e^{a z_j} - a\,\mathbb{E}_p[z]$, and
# differentiating both terms, with $\frac{d}{da}\mathbb{E}_p[z] = \mathrm{Var}_p(z)$
# (the derivative of $\ln \sum_j e^{a z_j}$ is $\mathbb{E}_p[z]$), gives
# $$\frac{dH}{da} = -a \mathrm{Var}_p(z)$$
# A factor $a > 1$ lowers the entropy, and to first order it cancels the gain
# of $\ln s$ when $a - 1 = \ln s / \mathrm{Var}_p(z)$: the factor must grow
# like $\ln s$, with a slope set by how spread out the logits are. YaRN's factor
# on the logits, $1/t = (0.1 \ln s + 1)^2 \approx 1 + 0.2 \ln s$, has that
# form, with the slope fitted to perplexity. On random logits (independent,
# normal, standard deviation 2) the figure shows both sides: without the
# temperature the entropy grows by nearly $\ln s$; with YaRN's it stays
# within 0.15 nats of its value at $L$ up to $s = 8$, and beyond that
# sharpens too much. That holds for this spread, not for YaRN's factor in
# general: for logits of standard deviation 1 it removes at most a third of
# the gain, for 3 it sharpens too much from $s = 2$ on. The slope 0.1 is
# fitted to Llama's perplexity, not derived from the entropy.
#
# Multiplying $q$ and $k$ by $\sqrt{1/t}$ scales every logit by $1/t$ without
# touching the attention code; Hugging Face scales its cos and sin tables,
# `posenc.apply_rope` the rotated vectors.
# DeepSeek-V2 and V3 use YaRN with $s = 40$ but put the whole temperature on
# the softmax scale instead ([the note below](#deeper-deepseeks-attention-factor)).

# %% [markdown] lang="ja"
# ### アテンションの温度
#
# Peng らは、クエリとキーに $\sqrt{1/t}$ も掛けます。これはすべてのスコアを温度 $t$ で割ることにあたります。Llama のパープレキシティに合わせて、次の式を決めています。
# $$\sqrt{1/t} = 0.1\ln s + 1$$
# コンテキストが長くなると、なぜアテンションを鋭くする必要があるのでしょうか。
# かりに長い入力が学習時の入力を $s$ 回繰り返したものなら、アテンションの重み $p_j$ はどれも $s$ で割られ、エントロピー $H = -\sum_j p_j \ln p_j$（クエリが実質的に見ているキーの数の対数）はちょうど $\ln s$ 増えます。
# 繰り返しではなく新しいトークンが続く場合も、ほぼ同じようにアテンションは薄く広がります。
# スコア $z_j$ に掛ける倍率 $a$ は、この広がりを打ち消す向きに働きます。
# $p_j \propto e^{a z_j}$ とすると $H = \ln \sum_j e^{a z_j} - a\,\mathbb{E}_p[z]$ です。$\ln \sum_j e^{a z_j}$ の微分は $\mathbb{E}_p[z]$ で、$\frac{d}{da}\mathbb{E}_p[z] = \mathrm{Var}_p(z)$ なので、両方の項を微分すると次が得られます。
# $$\frac{dH}{da} = -a \mathrm{Var}_p(z)$$
# $a > 1$ の倍率はエントロピーを下げ、1 次の近似では $a - 1 = \ln s / \mathrm{Var}_p(z)$ のとき $\ln s$ の増加を打ち消します。
# つまり倍率は 1 に $\ln s$ の定数倍を足した形で大きくなる必要があり、その定数（傾き）はスコアの広がりで決まります。
# YaRN がスコアに掛ける倍率 $1/t = (0.1 \ln s + 1)^2 \approx 1 + 0.2 \ln s$ はこの形をしていて、傾きはパープレキシティにあてはめて決めたものです。
# 図はランダムなスコア（独立な正規分布、標準偏差 2）で両方を示します。温度がなければエントロピーはほぼ $\ln s$ だけ増え、YaRN の温度を使うと $s = 8$ までは $L$ での値から 0.15 nat 以内にとどまり、それより先では鋭くしすぎます。
# これはこの広がりのスコアでの結果で、YaRN の倍率一般の性質ではありません。標準偏差 1 のスコアでは増加の 3 分の 1 以下しか打ち消せず、標準偏差 3 では $s = 2$ から鋭くしすぎます。
# 傾き 0.1 は Llama のパープレキシティにあてはめた値で、エントロピーから導いたものではありません。
#
# $q$ と $k$ に $\sqrt{1/t}$ を掛ければ、アテンションのコードに手を加えずに、すべてのスコアが $1/t$ 倍になります。
# Hugging Face は cos と sin の表に、`posenc.apply_rope` は回転後のベクトルに掛けます。
# DeepSeek-V2 と V3 は $s = 40$ の YaRN を使いますが、温度はすべて softmax のスケールに掛けます（下の[「さらに詳しく」](#deeper-deepseek-のアテンションの倍率)）。

# %%
c = yarn.attention_factor  # sqrt(1/t) for s = 4
print(f"s = 4: sqrt(1/t) = {c:.4f}, 1/t = {c**2:.4f}", end="")


# %% tags=["figure"] alt={"en": ["Entropy of the softmax over T = sL random logits (independent normal, standard deviation 2) against s from 1 to 32 on a log axis. Without a temperature it rises by nearly ln s, about 3.4 nats at s = 32; with YaRN's factor 1/t on the logits for this spread of logits it stays within 0.15 nats of its value at L up to s = 8 and then falls below it."], "ja": ["T = sL 個のランダムなスコア（独立な正規分布、標準偏差 2）に対する softmax のエントロピーを、s = 1〜32 に対して対数軸で描いた図です。温度がなければほぼ ln s だけ増え、s = 32 で約 3.4 nat 上がります。スコアに YaRN の倍率 1/t を掛けると、このスコアの広がりでは、s = 8 まで L での値から 0.15 nat 以内にとどまり、その先では下回ります。"]}
gen_t = torch.Generator().manual_seed(9)
logits = 2 * torch.randn(128, 32 * L, dtype=f64, generator=gen_t)  # 128 queries


def entropy(z):
    """H = -sum_j p_j ln p_j of softmax(z), averaged over the queries."""
    return -(z.softmax(-1) * z.log_softmax(-1)).sum(-1).mean().item()


extension = [2**k for k in range(6)]  # s = T / L
plain_H = [entropy(logits[:, : e * L]) for e in extension]
yarn_H = [
    entropy((0.1 * math.log(e) + 1) ** 2 * logits[:, : e * L])
    for e in extension
]
print("s        " + "".join(f"{e:7d}" for e in extension))
print("H - H(L) " + "".join(f"{h - plain_H[0]:+7.2f}" for h in plain_H))
print("with 1/t " + "".join(f"{h - plain_H[0]:+7.2f}" for h in yarn_H))

fig, ax = plt.subplots(figsize=(6.4, 2.6))
ax.plot(extension, plain_H, "o-", color="C0", label="$a = 1$")
ax.plot(extension, yarn_H, "s-", color="C1", label="$a = 1/t$")
ax.plot(
    extension,
    [plain_H[0] + math.log(e) for e in extension],
    color=INK,
    ls=":",
    label=r"$H(L) + \ln s$",
)
ax.axhline(plain_H[0], color=INK, lw=0.8)
ax.set(xscale="log", xlabel="$s = T/L$", ylabel="$H$")
ax.set_xticks(extension, [f"${e}$" for e in extension])
ax.minorticks_off()
ax.legend(loc="upper left")
plt.show()


# %% tags=["check"] summary={"en": "repeating the input s times adds ln s to the entropy; dE_p[z]/da = Var_p(z) and dH/da = -a Var_p(z); for logits of standard deviation 2 YaRN's factor keeps the entropy within 0.15 nats up to s = 8, for 1 and 3 it does not; the factor is Hugging Face's and scales logits by 1/t", "ja": "入力を s 回繰り返すとエントロピーは ln s 増え、dE_p[z]/da = Var_p(z)、dH/da = -a Var_p(z) です。標準偏差 2 のスコアでは YaRN の倍率がエントロピーを s = 8 まで 0.15 nat 以内に保ちますが、標準偏差 1 と 3 では保ちません。倍率は Hugging Face の値と一致し、スコアを 1/t 倍にします"}
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


z = logits[0, :L]
for e in (2, 4, 8):  # the input repeated e times: H grows by ln e
    assert math.isclose(entropy(z.repeat(e)) - entropy(z), math.log(e))
for a in (1.0, 1.3):  # dH/da, by a central difference and by the formula
    p = (a * z).softmax(-1)
    var = (p * z**2).sum() - (p * z).sum() ** 2
    slope = (entropy((a + 1e-5) * z) - entropy((a - 1e-5) * z)) / 2e-5
    assert math.isclose(slope, -a * var, rel_tol=1e-5)
    mean_z = [((b * z).softmax(-1) * z).sum() for b in (a + 1e-5, a - 1e-5)]
    assert math.isclose((mean_z[0] - mean_z[1]) / 2e-5, var, rel_tol=1e-5)
for e, h_plain, h_yarn in zip(extension, plain_H, yarn_H, strict=True):
    assert abs(h_plain - plain_H[0] - math.log(e)) < 0.1
    if e <= 8:
        assert abs(h_yarn - plain_H[0]) < 0.15
assert yarn_H[-1] - plain_H[0] < -0.3  # s = 32: too sharp
for spread in (1, 3):  # the same draw with standard deviation 1 and 3
    z_s = logits * spread / 2
    h_0 = entropy(z_s[:, :L])
    for e in extension[1:]:
        gain = entropy((0.1 * math.log(e) + 1) ** 2 * z_s[:, : e * L]) - h_0
        if spread == 1:  # at most a third of ln e removed
            assert gain > 2 / 3 * math.log(e)
        else:  # too sharp from s = 2
            assert gain < -0.2
# transformers 5.24.0: the attention factor of the YaRN setting above
assert math.isclose(c, 1.138629436111989, rel_tol=1e-12)
assert math.isclose(c, 0.1 * math.log(s) + 1)
qs, ks = torch.randn(2, 8, d, dtype=f64)
mq, mk = torch.randint(0, s * L, (2, 8))
q_yarn = apply_rope(qs, mq, scaling=yarn)
k_yarn = apply_rope(ks, mk, scaling=yarn)
assert_close(q_yarn.norm(dim=-1), c * qs.norm(dim=-1))  # norms x sqrt(1/t)
assert_close(q_yarn, c * rotate_half(qs, mq, theta_yarn))
plain = rotate_half(qs, mq, theta_yarn) * rotate_half(ks, mk, theta_yarn)
assert_close((q_yarn * k_yarn).sum(-1), c**2 * plain.sum(-1))  # logits x 1/t

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: DeepSeek's attention factor.** DeepSeek-V2 and DeepSeek-V3
# use YaRN with $s = 40$ (DeepSeek-AI 2024a, long-context section; 2024b,
# §4.3) in
# [multi-head latent attention](../docs/glossary.md#multi-head-latent-attention),
# where RoPE turns only $d^R_h = 64$ dimensions $q^R, k^R$ of each head, next
# to $d_h = 128$ dimensions $q^C, k^C$ that carry no position (the
# [decoupled rotary key](14-rope-in-llms.ipynb#decoupled-rope-one-small-rotary-key-for-all-heads)
# of the chapter [*Rotary in today's LLMs*](14-rope-in-llms.ipynb)). With
# $g(s, a) = 0.1\,a \ln s + 1$ and the configuration's `mscale` ($a$) and
# `mscale_all_dim` ($a_{\text{all}}$), both 0.707 in V2 (its paper's
# $0.0707 \ln s + 1$) and both 1 in V3 (YaRN's), Hugging Face's `"yarn"`
# multiplies cos and sin by $g(s, a)/g(s, a_{\text{all}})$, and the attention
# (Hugging Face's `yarn_apply_mscale`; `MLA` in DeepSeek-V3's
# `inference/model.py`) multiplies the softmax scale by
# $g(s, a_{\text{all}})^2$:
# $$\frac{q \cdot k}{\sqrt{d_h + d^R_h}} \;\to\; \frac{g(s, a_{\text{all}})^2\; q^C \cdot k^C + g(s, a)^2\; q^R \cdot k^R}{\sqrt{d_h + d^R_h}}$$
# With equal values, as released, the factor on cos and sin is exactly 1, and
# the whole temperature, $g(40, 0.707)^2 = 1.5896$ for V2 and
# $g(40, 1)^2 = 1.8739$ for V3, sits in the softmax scale, where it reaches
# the content dimensions too.
# `posenc.YarnScaling(s, L, mscale=a, mscale_all_dim=a_all)` gives the factor
# on cos and sin; the softmax scale belongs to the attention.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：DeepSeek のアテンションの倍率**
#
# DeepSeek-V2 と DeepSeek-V3 は $s = 40$ の YaRN を使います（DeepSeek-AI 2024a のコンテキスト拡張の節、2024b の §4.3）。
# そのアテンションは[マルチヘッド潜在アテンション](../docs/glossary.ja.md#multi-head-latent-attention)で、RoPE が回転させるのは各ヘッドの $d^R_h = 64$ 次元の $q^R, k^R$ だけです。
# その隣に、位置の情報を持たない $d_h = 128$ 次元の $q^C, k^C$ があります（[「現在の LLM の回転位置埋め込み」](14-rope-in-llms.ipynb)の章の[「分離した RoPE：全ヘッドで共有する小さな回転キー」](14-rope-in-llms.ipynb#分離した-rope全ヘッドで共有する小さな回転キー)の節）。
# $g(s, a) = 0.1\,a \ln s + 1$ とし、設定項目 `mscale` を $a$、`mscale_all_dim` を $a_{\text{all}}$ とします。
# V2 はどちらも 0.707（論文の $0.0707 \ln s + 1$）、V3 はどちらも 1（YaRN と同じ）です。
# Hugging Face の `"yarn"` は cos と sin に $g(s, a)/g(s, a_{\text{all}})$ を掛けます。
# アテンションの側（Hugging Face の `yarn_apply_mscale`、DeepSeek-V3 の `inference/model.py` にある `MLA`）は、softmax のスケールに $g(s, a_{\text{all}})^2$ を掛けます。
# $$\frac{q \cdot k}{\sqrt{d_h + d^R_h}} \;\to\; \frac{g(s, a_{\text{all}})^2\; q^C \cdot k^C + g(s, a)^2\; q^R \cdot k^R}{\sqrt{d_h + d^R_h}}$$
# 公開されている設定のように 2 つの設定項目の値が等しいと、cos と sin に掛かる倍率はちょうど 1 です。
# このとき温度はすべて softmax のスケールが受け持ち、内容を表す次元にも掛かります。その値は V2 で $g(40, 0.707)^2 = 1.5896$、V3 で $g(40, 1)^2 = 1.8739$ です。
# `posenc.YarnScaling(s, L, mscale=a, mscale_all_dim=a_all)` が与えるのは cos と sin に掛ける倍率で、softmax のスケールはアテンションの側で扱います。

# %% tags=["deeper"]
# DeepSeek-V2 and V3, config.json: YaRN with factor 40 from 4096 positions,
# base 1e4; qk_rope_head_dim 64, qk_nope_head_dim 128 (d_h + d^R_h = 192)
mscale_of = {"V2": 0.707, "V3": 1.0}  # mscale = mscale_all_dim in both
# the papers' factor on q and k (V2: 0.0707 ln s + 1; V3: YaRN's 0.1 ln s + 1)
paper_factor = {"V2": 0.0707 * math.log(40) + 1, "V3": 0.1 * math.log(40) + 1}
# transformers 5.24.0: DeepseekV2Attention / DeepseekV3Attention(config, 0)
# .scaling, and ROPE_INIT_FUNCTIONS["yarn"](config, "cpu"), which returns the
# attention factor 1.0 and the same frequencies for both configurations
hf_softmax_scale = {"V2": 0.1147213867929261, "V3": 0.1352337788608801}
hf_yarn_deepseek = {
    0: 1.000000000e00,
    10: 5.623412877e-02,
    16: 5.500000436e-03,
    23: 3.333803397e-05,
    31: 3.333803534e-06,
}
gen_ds = torch.Generator().manual_seed(40)
q_r, k_r = torch.randn(2, 64, dtype=f64, generator=gen_ds)  # rotary parts
m_r, n_r = torch.tensor(150_000), torch.tensor(20_000)
for name, m_ds in mscale_of.items():
    yarn_ds = YarnScaling(40, 4096, mscale=m_ds, mscale_all_dim=m_ds)
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
assert round(paper_factor["V2"] ** 2, 4) == 1.5896
assert round(paper_factor["V3"] ** 2, 4) == 1.8739

# %% [markdown] lang="en"
# ## Llama 3's scaling
#
# Llama 3.1 extends Llama 3's context from $L = 8192$ to 131072 positions with
# factor $s = 8$, `low_freq_factor` $\alpha = 1$, `high_freq_factor`
# $\beta = 4$ and base $5 \cdot 10^5$ (`rope_type="llama3"`). $s$ is half the
# 16-fold extension. The paper does not describe this scaling at all (it is in Meta's
# code and configuration); it does say that the model was pre-trained further on
# sequences of up to 128K tokens (Llama Team 2024, §3.4.2). If that stage used these
# frequencies, as the released model does, the angles beyond $sL$ were trained too. Pairs with a
# wavelength shorter than $L/\beta$ keep their frequency, pairs with one
# longer than $L/\alpha$ are divided by $s$, and in between
# $$\theta'_i = (1 - g_i)\frac{\theta_i}{s} + g_i\,\theta_i, \qquad g_i = \frac{L/\lambda_i - \alpha}{\beta - \alpha}$$
# Since $L/\lambda_i = r_i$, the two conditions read $r_i > \beta$ and
# $r_i < \alpha$, and $g_i = \gamma(r_i)$: this is YaRN's rule as the paper
# writes it, ramp linear in $r$, with $\alpha = 1$ and $\beta = 4$ and without
# a temperature. At the edges of the band $g_i$ is 1 ($\lambda_i = L/\beta$)
# and 0 ($\lambda_i = L/\alpha$), so the three pieces join continuously. For
# $d = 128$:

# %% [markdown] lang="ja"
# ## Llama 3 のスケーリング
#
# Llama 3.1 は、Llama 3 のコンテキストを $L = 8192$ から 131072 トークンまで伸ばします。
# 設定は係数 $s = 8$、`low_freq_factor` $\alpha = 1$、`high_freq_factor` $\beta = 4$、底 $5 \cdot 10^5$ です（`rope_type="llama3"`）。
# $s$ は伸び率 16 の半分です。論文はこのスケーリングについてまったく述べていません（Meta のコードと設定にあるだけです）。ただ、128K トークンまでの系列で事前学習を続けたことは書いています（Llama Team 2024、§3.4.2）。その段階でも、公開されたモデルと同じ周波数を使っていたのなら、$sL$ より先の角度も学習されたことになります。
# 波長が $L/\beta$ より短いペアは周波数をそのまま保ち、$L/\alpha$ より長いペアは $s$ で割られます。その間の帯では、次の式で両者を混ぜます。
# $$\theta'_i = (1 - g_i)\frac{\theta_i}{s} + g_i\,\theta_i, \qquad g_i = \frac{L/\lambda_i - \alpha}{\beta - \alpha}$$
# $L/\lambda_i = r_i$ なので、2 つの条件は $r_i > \beta$ と $r_i < \alpha$ で、$g_i = \gamma(r_i)$ です。
# つまり論文が書く形の YaRN の規則（$r$ について線形なランプ関数）に $\alpha = 1$、$\beta = 4$ を入れ、温度を外したものです。
# 帯の両端で $g_i$ は 1（$\lambda_i = L/\beta$）と 0（$\lambda_i = L/\alpha$）なので、3 つの部分は連続につながります。$d = 128$ では次のとおりです。

# %%
b3, L3, s3 = 5e5, 8192, 8
theta3 = rope_frequencies(d, base=b3).double()
lam3 = two_pi / theta3
theta_l3 = rope_frequencies(d, base=b3, scaling=Llama3Scaling()).double()
short, long = lam3 < L3 / 4, lam3 > L3 / 1  # kept; divided by s
print(
    f"kept {int(short.sum())}, blended {int((~short & ~long).sum())}, "
    f"divided by 8: {int(long.sum())}",
    end="",
)


# %% tags=["check"] summary={"en": "Llama3Scaling follows the rule, equals the paper's YaRN ramp with thresholds 1 and 4, gives Hugging Face's frequencies, moves without a jump across both edges, and keeps norms", "ja": "Llama3Scaling は規則どおりで、しきい値 1 と 4 の論文の YaRN のランプ関数に等しく、Hugging Face と同じ周波数を与え、帯の両端で値が跳ばずにつながり、ノルムを変えません"}
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


g = (L3 / lam3 - 1) / (4 - 1)
blend3 = (1 - g) * theta3 / s3 + g * theta3
rule = torch.where(short, theta3, torch.where(long, theta3 / s3, blend3))
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
for edge in (L3 / 4, L3 / 1):  # lambda = L / beta and lambda = L / alpha
    assert ratio_across(edge).diff().abs().max() < 1e-3  # the pieces join
x = torch.randn(6, d, dtype=f64)
rotated = apply_rope(
    x, torch.arange(6) * 20000, base=b3, scaling=Llama3Scaling()
)
assert_close(rotated.norm(dim=-1), x.norm(dim=-1))  # no temperature
assert (int(short.sum()), int(long.sum())) == (29, 29)

# %% [markdown] lang="en"
# ## LongRoPE: a searched factor per frequency
#
# LongRoPE (Ding et al. 2024) replaces the formula by a search: pair $i$ is
# divided by its own factor $\kappa_i$, and an evolutionary search picks the
# list of factors by the perplexity on long documents,
# $$\theta'_i = \frac{\theta_i}{\kappa_i}$$
# Phi-3's 128K models ship two such lists, one for sequences up to $L$ and one
# beyond, and a temperature like YaRN's: the logits grow by $1 + \ln s / \ln L$. In
# Phi-3.5-mini the long list divides the slow pairs by about $2s$, so they reach only
# half of their trained arc. The four notes below give the details, for
# readers who load such a checkpoint; the rest of the chapter does not need them.

# %% [markdown] lang="ja"
# ## LongRoPE：周波数ごとに探索した係数
#
# LongRoPE（Ding ら 2024）は、式の代わりに探索を使います。ペア $i$ をそのペア固有の係数 $\kappa_i$ で割り、係数の列は、長い文書でのパープレキシティを基準に進化的アルゴリズムで選びます。
# $$\theta'_i = \frac{\theta_i}{\kappa_i}$$
# Phi-3 の 128K 版は、長さ $L$ 以下の系列に使う列とそれより長い系列に使う列の 2 つを持ち、YaRN に似た温度も使い、スコアを $1 + \ln s / \ln L$ 倍にします。
# Phi-3.5-mini の長い入力用の列は遅いペアをおよそ $2s$ で割るので、その角度は学習した弧の半分にしか達しません。
# 詳しくは下の 4 つの「さらに詳しく」にまとめました。こうしたチェックポイントを読み込む読者向けの内容で、章の残りを読むのに必要はありません。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: LongRoPE's search, temperature and switch.** The paper
# writes the factor $\lambda_i$; this chapter keeps that letter for the
# wavelength, as the [notation page](../docs/notation.md#frequencies) does.
# An evolutionary search breeds lists of $d/2$ factors, scores each by the
# perplexity of the extended model on a few long documents, and keeps only
# lists that do not decrease with $i$: a slower pair is never interpolated less
# than a faster one.
#
# Phi-3's 128K models ship two lists, `short_factor` for sequences of length
# at most $L$ and `long_factor` beyond, and multiply $q$ and $k$ by
# $$\sqrt{1 + \frac{\ln s}{\ln L}} = \sqrt{\frac{\ln (sL)}{\ln L}}$$
# with $s$ the extended length over the original. The logits grow by
# $1 + \ln s/\ln L$, a factor that grows like $\ln s$, as
# [The attention temperature](#the-attention-temperature) derived, on short
# inputs too. In Phi-3.5-mini the long list divides the slow pairs by about
# $2s$, so at its last position their angles reach only half of their trained
# arc; and as the list switches when the sequence first exceeds $L$, keys
# cached with the short list go stale
# ([the notes below](#deeper-the-switch-in-the-middle-of-a-generation)).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：LongRoPE の探索、温度、列の切り替え**
#
# 論文はこの係数を $\lambda_i$ と書きますが、この章では[記法のページ](../docs/notation.ja.md#frequencies)と同じく、この文字を波長に使います。
# 探索では、$d/2$ 個の係数からなる列どうしを交配させ、各列でコンテキストを伸ばしたモデルにいくつかの長い文書を読ませて、そのパープレキシティで列を評価します。
# 残すのは $i$ について減らない列だけなので、遅いペアが速いペアより弱く補間されることはありません。
#
# Phi-3 の 128K 版は、長さ $L$ 以下の系列に使う `short_factor` と、それより長い系列に使う `long_factor` の 2 つの列を持ち、$q$ と $k$ に次の倍率を掛けます。
# $$\sqrt{1 + \frac{\ln s}{\ln L}} = \sqrt{\frac{\ln (sL)}{\ln L}}$$
# $s$ は伸ばした長さと元の長さの比で、スコアは $1 + \ln s/\ln L$ 倍になります。これは[「アテンションの温度」](#アテンションの温度)の節で導いたとおり、倍率の 1 からの増分が $\ln s$ に比例する形です。ただしこの倍率は、短い入力にも掛かります。
# Phi-3.5-mini の長い入力用の列は遅いペアをおよそ $2s$ で割るので、最後の位置でもその角度は学習した弧のおよそ半分にしか達しません。
# また、列は系列が初めて $L$ を超えたときに切り替わるので、短い入力用の列で回転させてからキャッシュしたキーは、その時点から長い入力用の列と合わなくなります（下の[「さらに詳しく」](#deeper-生成の途中での切り替え)）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Phi-3.5-mini's two lists.** For Phi-3.5-mini-instruct
# ($d = 96$, base $10^4$, $L = 4096$, $s = 131072/4096 = 32$) the logits grow by
# $17/12$, or $\sqrt{17/12} = 1.1902$ on $q$ and $k$, and the lists are:

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Phi-3.5-mini の 2 つの列**
#
# Phi-3.5-mini-instruct（$d = 96$、底 $10^4$、$L = 4096$、$s = 131072/4096 = 32$）ではスコアが $17/12$ 倍になり、$q$ と $k$ には $\sqrt{17/12} = 1.1902$ が掛かります。係数の列は次のとおりです。

# %% tags=["deeper", "check"] summary={"en": "LongRopeScaling gives Hugging Face's frequencies and attention factor for Phi-3.5-mini, divides by the short list up to T = 4096 and by the long one from 4097, scales every length by sqrt(17/12), and the copied lists never decrease", "ja": "LongRopeScaling は Phi-3.5-mini について Hugging Face と同じ周波数とアテンションの倍率を与え、T = 4096 までは短い入力用の列、4097 からは長い入力用の列で割り、どの長さでも q と k を √(17/12) 倍します。書き写した 2 つの列はどちらも減らない列です"}
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
kap_short = torch.tensor(phi35_short, dtype=f64)
kap_long = torch.tensor(phi35_long, dtype=f64)
theta_phi = rope_frequencies(d_phi).double()  # base 1e4
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
short_phi = rope_frequencies(d_phi, scaling=longrope, seq_len=L_phi).double()
long_phi = rope_frequencies(d_phi, scaling=longrope, seq_len=L_phi + 1)
long_phi = long_phi.double()
check_hf(short_phi, hf_short)
check_hf(long_phi, hf_long)
assert_close(short_phi, theta_phi / kap_short, rtol=1e-6, atol=0)
assert_close(long_phi, theta_phi / kap_long, rtol=1e-6, atol=0)
# the copy is non-decreasing, as every list the search keeps
assert (kap_short.diff() >= 0).all() and (kap_long.diff() >= 0).all()
assert longrope.factor == 32  # max_positions / original
assert math.isclose(longrope.attention_factor, hf_attention_factor)
assert math.isclose(longrope.attention_factor, math.sqrt(17 / 12))
gen_phi = torch.Generator().manual_seed(35)  # leaves the global stream
x_phi = torch.randn(L_phi + 1, d_phi, dtype=f64, generator=gen_phi)
for T in (10, L_phi, L_phi + 1):  # the factor applies at every length
    rotated = apply_rope(x_phi[:T], torch.arange(T), scaling=longrope)
    ratio_T = rotated.norm(dim=-1) / x_phi[:T].norm(dim=-1)
    assert_close(ratio_T, torch.full_like(ratio_T, math.sqrt(17 / 12)))

# %% tags=["deeper"]
slow_phi = L_phi * theta_phi / two_pi < 1  # no full turn within L
reach = (131071 / kap_long[slow_phi] / L_phi).tolist()  # of L theta_i
print(
    f"short: / {kap_short.min():.2f} to {kap_short.max():.2f}\n"
    f"long: pair 0 / {kap_long[0]:.2f}; the {int(slow_phi.sum())} slow pairs "
    f"/ {kap_long[slow_phi].min():.2f} to {kap_long[slow_phi].max():.2f}, "
    f"reaching {min(reach):.2f} to {max(reach):.2f} of L theta_i",
    end="",
)

# %% [markdown] lang="en" tags=["deeper"]
# The 14 slow pairs, 34 to 47, are divided by about $2s$: at position 131071
# their angles reach only half of their trained arc.

# %% [markdown] lang="ja" tags=["deeper"]
# 遅い 14 組のペア（34〜47）はおよそ $2s$ で割られ、位置 131071 でもその角度は学習した弧のおよそ半分にしか達しません。

# %% tags=["deeper", "check"] summary={"en": "the 14 slow pairs are 34-47, divided by 1.97 to 2.03 times s, and reach 0.49 to 0.51 of their trained arc", "ja": "遅いペアは 34〜47 の 14 組で、s の 1.97〜2.03 倍で割られ、学習した弧の 0.49〜0.51 倍にしか達しません"}
assert slow_phi.nonzero().flatten().tolist() == list(range(34, 48))
assert (kap_long[slow_phi] / 32 - 2).abs().max() < 0.03  # about 2s
assert 0.49 < min(reach) and max(reach) < 0.51  # about half the arc

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: what the search exploits, and what Phi-3 keeps of it.** The
# paper reports two non-uniformities for LLaMA2-7B. Over frequencies: at 8192
# positions without fine-tuning, searched factors, one per pair, give a lower
# PG19 perplexity than PI, dynamic NTK and YaRN (its Table 1). Over positions:
# the first $\hat{n}$ positions keep the original RoPE, because the first
# tokens receive large attention scores (as StreamingLLM observed); leaving
# them unscaled lowers PI's perplexity at 8192 as well (its Table 2). The full
# method also extends in stages (fine-tuning at 256k positions, then a second
# search) and searches a second set of factors at a short length to recover
# the performance on short inputs. Phi-3 ships the frequency part only: two
# lists and no $\hat{n}$. Hugging Face takes $s$ as `max_position_embeddings`
# over `original_max_position_embeddings` when the configuration has no
# `factor`, as Phi-3's has not, and an explicit `attention_factor` replaces
# the default; in `LongRopeScaling` too, one `attention_factor` serves both lists. For comparison, YaRN with $s = 32$ would keep pairs 0 to 15 and divide pairs
# 34 to 47 by exactly 32, where the long list divides pair 12 by 7.70.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：探索が利用するものと、Phi-3 に残ったもの**
#
# 論文は LLaMA2-7B で、補間を一様にしないほうがよい点を 2 つ報告しています。
#
# - 周波数：ファインチューニングなしの長さ 8192 では、ペアごとに探索した係数のほうが、PI、動的 NTK、YaRN より PG19 でのパープレキシティが低くなります（論文の表 1）。
# - 位置：先頭の $\hat{n}$ 個の位置には元の RoPE をそのまま使います。StreamingLLM が観察したように、先頭のトークンは大きなスコアを受け取るからです。先頭の位置をそのままにすると、長さ 8192 での PI のパープレキシティも下がります（論文の表 2）。
#
# 手法全体では、さらに段階的に長さを伸ばします（長さ 256k でファインチューニングしてから、もう一度探索します）。
# また、短い入力での性能を取り戻すため、短い長さでもう 1 組の係数を探索します。
# Phi-3 に残っているのは周波数の部分だけで、2 つの列があり、$\hat{n}$ はありません。
# 設定に `factor` がないとき（Phi-3 の設定にはありません）、Hugging Face は $s$ を `max_position_embeddings` と `original_max_position_embeddings` の比とし、`attention_factor` を明示すると既定の倍率がそれに置き換わります。
# `LongRopeScaling` でも、1 つの `attention_factor` を両方の列に使います。
# 比較のために挙げると、$s = 32$ の YaRN ならペア 0〜15 をそのまま保ち、ペア 34〜47 をちょうど 32 で割ります。
# 一方、長い入力用の列は、YaRN ならそのまま保つペア 12 を 7.70 で割っています。

# %% tags=["deeper"]
yarn_32 = YarnScaling(32, L_phi)
ratio_yarn = rope_frequencies(d_phi, scaling=yarn_32).double() / theta_phi
kept_yarn = int((ratio_yarn == 1).nonzero().max())
assert kept_yarn == 15 and (ratio_yarn[34:] - 1 / 32).abs().max() < 1e-7
print(
    f"YaRN(32) keeps pairs 0-{kept_yarn}; "
    f"long list: pair 12 / {kap_long[12]:.2f}"
)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the switch in the middle of a generation.** The list is
# chosen per forward pass, from the largest position. A prompt of at most
# 4096 tokens is processed with the short factors, and its keys enter the
# [KV cache](../docs/glossary.md#kv-cache) rotated with them. The
# [decode step](../docs/glossary.md#decode-step) that adds position 4096
# ($T = 4097$) switches Hugging Face's rotary module to the long factors: the
# new query is rotated with the long list, while the cached keys keep their
# short-list rotation. Within one list the score of a query at $m$ and a key
# at $n$ depends only on $n - m$; across the switch it does not. A key cached at $n$ is off in pair $i$ by the angle
# $n\,\theta_i \left\lvert 1/\kappa^{\text{short}}_i - 1/\kappa^{\text{long}}_i \right\rvert$,
# which for pair 0 is 0.074 radian per position, 303 radians for the key at
# 4095. For that key, 30 of the 48 angles are off by more than 1 radian even
# modulo $2\pi$. Against the 4096 cached keys, the query at 4096
# gets scores that differ from those against the same keys rotated with the
# long list by 15.9 on average in this random draw, about as much as the
# scores themselves vary
# (standard deviation 16.1).
#
# Hugging Face's `Phi3ForCausalLM` drops the cache at that switch and
# processes the whole sequence again
# ([transformers pull request 33129](https://github.com/huggingface/transformers/pull/33129),
# 2024). A hand-written decoding loop, or a
# model class without that cache-dropping override, keeps the stale keys. Either way, how a token is rotated depends on the length of the whole
# sequence, not only on its position.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：生成の途中での切り替え**
#
# どちらの列を使うかは、フォワードパスごとに位置の最大値から決まります。
# 4096 トークン以下のプロンプトは短い入力用の係数で処理され、そのキーはその係数で回転されてから [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に入ります。
# 位置 4096 を加える[デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)（$T = 4097$）で、Hugging Face の回転埋め込みのモジュールは長い入力用の係数に切り替わります。
# 新しいクエリは長い入力用の列で回転されますが、キャッシュしたキーは短い入力用の列で回転されたままです。
# 同じ列の中では、位置 $m$ のクエリと位置 $n$ のキーのスコアは $n - m$ だけで決まりますが、切り替わりをまたぐと、そうはなりません。
# 位置 $n$ にキャッシュしたキーは、ペア $i$ で角度 $n\,\theta_i \left\lvert 1/\kappa^{\text{short}}_i - 1/\kappa^{\text{long}}_i \right\rvert$ だけずれています。
# ペア 0 では位置 1 つあたり 0.074 ラジアンで、位置 4095 のキーでは 303 ラジアンになります。
# このキーでは、$2\pi$ の整数倍の違いを無視しても、48 組のうち 30 組の角度が 1 ラジアンより大きくずれます。
# 位置 4096 のクエリについて、キャッシュした 4096 個のキーとのスコアを、同じキーを長い入力用の列で回転し直した場合と比べます。
# この乱数の例では、差の絶対値の平均は 15.9 で、スコアそのもののばらつき（標準偏差 16.1）とほぼ同じ大きさです。
#
# Hugging Face の `Phi3ForCausalLM` は、この切り替えの時点でキャッシュを捨てて全体を処理し直します（[transformers のプルリクエスト 33129](https://github.com/huggingface/transformers/pull/33129)、2024 年）。
# デコードのループを自分で書いた場合や、切り替えの時点でキャッシュを捨てる処理を持たないモデルクラスでは、合わなくなったキーがそのまま使われます。
# いずれにしても、トークンがどう回転されるかは、その位置だけでなく系列全体の長さにもよります。

# %% tags=["deeper"]
q_phi, k_phi = torch.randn(2, d_phi, dtype=f64, generator=gen_phi).unbind()
shifts_phi = torch.tensor([0, 1, 1000, 2000, 3000, 3700])
for base_m, shifts_set in ((300, shifts_phi), (300, 5 * L_phi + shifts_phi)):
    m_phi, n_phi = base_m + shifts_set, 37 + shifts_set  # n - m = -263
    q_set = apply_rope(q_phi.expand(6, d_phi), m_phi, scaling=longrope)
    k_set = apply_rope(k_phi.expand(6, d_phi), n_phi, scaling=longrope)
    scores_set = (q_set * k_set).sum(-1)
    assert_close(scores_set, scores_set[0].expand(6))  # relative in each list

# keys 0..L-1 cached at T <= L (short list); the query at L with T = L + 1
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
# Every rule above replaces the frequencies $\theta_i$ by other constants
# $\theta'_i$ and may multiply $q$ and $k$ by a constant $c$. The argument that
# makes RoPE relative never used the values of the frequencies: with $R(\phi)$
# the $2 \times 2$ rotation by $\phi$ and $R(\phi)^\top = R(-\phi)$, each pair
# contributes
# $$\left(c\,R(m\theta'_i)\,q\right)^\top \left(c\,R(n\theta'_i)\,k\right) = c^2\, q^\top R\left((n - m)\,\theta'_i\right) k$$
# to the score, a function of $n - m$ alone. Dynamic NTK and LongRoPE are
# relative too as long as one length rotates both the query and the key; they
# break it only when keys are cached after their rotation (the notes on dynamic
# NTK and on LongRoPE's switch).

# %% [markdown] lang="ja"
# ## 相対位置の性質は保たれる
#
# ここまでの規則はどれも、周波数 $\theta_i$ を別の定数 $\theta'_i$ に置き換えるもので、$q$ と $k$ に定数 $c$ を掛けるものもあります。
# RoPE のスコアが相対位置だけで決まることを示した議論は、周波数の値をまったく使っていませんでした。
# $R(\phi)$ を角度 $\phi$ の $2 \times 2$ 回転行列とし、$R(\phi)^\top = R(-\phi)$ を使うと、各ペアがスコアに寄与する量は
# $$\left(c\,R(m\theta'_i)\,q\right)^\top \left(c\,R(n\theta'_i)\,k\right) = c^2\, q^\top R\left((n - m)\,\theta'_i\right) k$$
# となり、$n - m$ だけの関数です。
# 動的 NTK と LongRoPE でも、クエリとキーを同じ長さで回転させる限り、スコアは相対位置だけで決まります。
# この性質が崩れるのは、回転させてからキーをキャッシュする場合だけです（動的 NTK と、LongRoPE の列の切り替えについての「さらに詳しく」）。

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

# %% tags=["check"] summary={"en": "for no scaling, PI, NTK-aware, YaRN and Llama 3, a query and a key shifted together by up to 5L positions keep their score", "ja": "スケーリングなし、PI、NTK-aware、YaRN、Llama 3 のどれでも、クエリとキーを一緒に最大 5L 個の位置だけずらしてもスコアは変わりません"}
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
# The figure puts every rule on one axis: horizontally the original
# wavelength in units of the training length, $\lambda_i/L$; vertically the
# divisor $\kappa_i = \theta_i/\theta'_i$ as a power of the factor,
# $\log_s \kappa_i$, 0 for a pair kept and 1 for a pair divided by $s$. PI
# divides every pair by $s$. NTK-aware scaling rises in a straight line, slowing
# fast pairs a little and slow ones too little; dynamic NTK at $T = 2L$ rises
# half as far. YaRN keeps every pair left of
# $L/32$ (more than 32 turns within $L$) and divides by $s$ every pair right
# of $L$ (no full turn); Llama 3's rule has the same shape, with the kept
# boundary at $L/4$ instead of $L/32$. Phi-3.5-mini's
# LongRoPE lists ($s = 32$) differ: the long list already slows fast pairs,
# and slows the slow ones by about $2s$, or $s^{1.2}$; the short one divides by
# 2.84 at most. The table gives $\theta'_i/\theta_i$ in Llama 2's setting
# ($s = 4$), with dynamic NTK at $T = 2L$.
# Measured perplexities of PI and YaRN on real text are in the chapter
# [*A tiny language model on real text*](17-real-text.ipynb#rescuing-rope).

# %% [markdown] lang="ja"
# ## 並べて比べる
#
# 下の図では、すべての規則を同じ座標軸の上で比べます。
# 横軸は元の波長を学習時の長さで割った $\lambda_i/L$ です。縦軸は、そのペアを割る数 $\kappa_i = \theta_i/\theta'_i$ が係数の何乗かを表す $\log_s \kappa_i$ で、そのまま保つペアは 0、$s$ で割るペアは 1 です。
# PI はすべてのペアを $s$ で割ります。
# NTK-aware スケーリングは直線的に上がり、速いペアも少し遅くする一方で、遅いペアは十分には遅くしません。$T = 2L$ の動的 NTK は、その半分の高さまでしか上がりません。
# YaRN は $L/32$ より左のペア（$L$ の間に 32 周より多く回るペア）をすべてそのまま保ち、$L$ より右のペア（1 周もしないペア）はすべて $s$ で割ります。Llama 3 の規則も同じ形で、そのまま保つ境目が $L/32$ ではなく $L/4$ です。
# Phi-3.5-mini の LongRoPE の列（$s = 32$）は違います。長い入力用の列は速いペアもすでに遅くし、遅いペアはおよそ $2s$、つまり $s^{1.2}$ で割ります。短い入力用の列が割る数は最大でも 2.84 です。
# 表は Llama 2 の設定（$s = 4$）での $\theta'_i/\theta_i$ で、$T = 2L$ の動的 NTK も加えてあります。
# 実際のテキストで PI と YaRN のパープレキシティを測った結果は、[「実テキストで学習する小さな言語モデル」](17-real-text.ipynb#rope-を救う)の章にあります。

# %%
pairs = [0, 16, 24, 32, 40, 48, 63]
short_names = ("PI", "NTK-aware", "YaRN", "Llama 3")
ratios = {
    name: rope_frequencies(d, base=b, scaling=scalings[name]).double() / theta
    for name in list(scalings)[1:]
}
dyn_2L = rope_frequencies(
    d, base=b, scaling=DynamicNTKScaling(1.0, L), seq_len=2 * L
)
ratios["dynamic 2L"] = dyn_2L.double() / theta
table = [f"{'i':>10}" + "".join(f"{p:>7}" for p in pairs)]
for label, ratio in zip(
    (*short_names, "dynamic 2L"), ratios.values(), strict=True
):
    table.append(f"{label:>10}" + "".join(f"{ratio[p]:7.3f}" for p in pairs))
print("\n".join(table), end="")


# %% tags=["check"] summary={"en": "the four static rules divide the last pair by 4; YaRN blends pairs 21-45, Llama 3 pairs 36-45; dynamic NTK at 2L lies at half the NTK-aware line and at 4L on it; the LongRoPE exponents are as stated", "ja": "4 つの静的な規則は最後のペアを 4 で割ります。YaRN はペア 21〜45、Llama 3 はペア 36〜45 を混ぜます。動的 NTK は 2L で NTK-aware の線の半分の高さにあり、4L ではその線に重なります。LongRoPE の指数は本文のとおりです"}
def blended_pairs(ratio):
    """Indices whose ratio is neither 1 (kept) nor 1/4 (interpolated)."""
    inside = ((ratio - 1).abs() > 1e-6) & ((ratio - 1 / 4).abs() > 1e-6)
    return int(inside.nonzero().min()), int(inside.nonzero().max())


for name in list(scalings)[1:]:
    assert math.isclose(ratios[name][-1], 1 / 4, rel_tol=1e-6)
assert blended_pairs(ratios["YarnScaling(4, 4096)"]) == (21, 45)
llama3_band = blended_pairs(
    ratios["Llama3Scaling(4, original_max_positions=4096)"]
)
i_4 = turn_index(4, d, b, L)
assert llama3_band == (math.floor(i_4) + 1, math.floor(i_1)) == (36, 45)
assert math.isclose(ratios["dynamic 2L"][-1], 1 / 2, rel_tol=1e-6)
dyn_4L = rope_frequencies(d, base=b, scaling=dyn_1, seq_len=4 * L).double()
assert_close(dyn_4L / theta, ratios["NTKScaling(4)"], rtol=1e-6, atol=0)
exponent_long = kap_long.log() / math.log(32)
assert (exponent_long[slow_phi] - 1.2).abs().max() < 0.01  # about s^1.2
assert (kap_short.log() / math.log(32)).max() < 0.31  # short list, alt text
assert kap_long[12] > 7.6  # YaRN keeps pair 12
# dynamic NTK at 2L, on the s = 4 axis: half the NTK-aware line
half = ratios["dynamic 2L"].log() / ratios["NTKScaling(4)"].log()
assert_close(half[1:], torch.full_like(half[1:], 0.5), rtol=1e-4, atol=0)

# %% tags=["figure"] alt={"en": ["How much each rule slows each pair, against the pair's original wavelength in units of L (log axis), with dotted lines at L/32, L/4 and L. Vertical axis: log base s of the divisor, 0 = kept, 1 = divided by s. PI is 1 everywhere; NTK-aware rises in a straight line from 0 to 1, dynamic NTK at T = 2L (NTK-aware with factor 2) from 0 to 1/2; YaRN is 0 up to L/32 and 1 from L; the Llama 3 rule is 0 up to L/4 and 1 from L; LongRoPE's long list for Phi-3.5-mini rises from near 0 to about 1.2 for the pairs beyond L; its short list stays below 0.31."], "ja": ["各規則が各ペアをどれだけ遅くするかを、そのペアの元の波長（L を単位とし、対数軸）に対して描いた図です。点線は L/32、L/4、L の位置です。縦軸は割る数の s を底とする対数で、0 はそのまま、1 は s で割ることを表します。PI はどこでも 1、NTK-aware は 0 から 1 まで、T = 2L の動的 NTK（係数 2 の NTK-aware）は 0 から 1/2 まで直線的に上がります。YaRN は L/32 まで 0 で L から 1、Llama 3 の規則は L/4 まで 0 で L から 1 です。Phi-3.5-mini の LongRoPE の長い入力用の列は 0 近くから上がり、L より右のペアではおよそ 1.2 になります。短い入力用の列は 0.31 より下にとどまります。"]}
fig, ax = plt.subplots(figsize=(6.4, 3.6))
wave_128 = (two_pi / theta / L).numpy()  # lambda_i / L, Llama 2's setting
styles = (("C0", "--"), ("C1", "-"), ("C2", "-"), ("C3", "-."), ("C4", ":"))
labels = (*short_names, "dynamic NTK, $T = 2L$")
for ratio, label, (color, style) in zip(
    ratios.values(), labels, styles, strict=True
):
    exponent = (-ratio.log() / math.log(4)).numpy()  # log_s kappa_i, s = 4
    ax.plot(wave_128, exponent, color=color, ls=style, label=label)
wave_96 = (two_pi / theta_phi / L_phi).numpy()
for kap, style, which in ((kap_long, "-", "long"), (kap_short, ":", "short")):
    label = rf"LongRoPE $\kappa^{{\mathrm{{{which}}}}}$"
    ax.plot(
        wave_96, kap.log() / math.log(32), color="C5", ls=style, label=label
    )
for edge in (1 / 32, 1 / 4, 1):
    ax.axvline(edge, color=INK, lw=0.8, ls=":")
ax.set(xscale="log", xlabel=r"$\lambda_i / L$", ylabel=r"$\log_s \kappa_i$")
ax.set_xticks(
    [1e-3, 1 / 32, 1 / 4, 1, 10],
    ["$10^{-3}$", "$1/32$", "$1/4$", "$1$", "$10$"],
)
ax.minorticks_off()
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3)
plt.show()

# %% [markdown] lang="en"
# <!-- explorable: 09-rope-context -->
# *On the website, an interactive figure stands here: every pair's wavelength
# under each method, for a chosen factor, training length, base and, for
# dynamic NTK, sequence length.*

# %% [markdown] lang="ja"
# <!-- explorable: 09-rope-context -->
# サイトでは、この注記の場所に対話的な図があります。係数、学習時の長さ、底を選ぶと、各手法でのペアごとの波長を並べて描きます。動的 NTK は選んだ系列長での波長です。

# %% [markdown] lang="en"
# ## Which models use which
#
# Released models use every rule above: PI (Vicuna v1.5 16k), a larger base
# (Code Llama), the Llama 3 rule (Llama 3.1), YaRN (Qwen2.5, DeepSeek-V2 and
# V3, gpt-oss) and LongRoPE (Phi-3.5-mini);
# [the note below](#deeper-the-settings-model-by-model) lists their
# settings. Code Llama's new base is the NTK-aware one for the factor
# $s = 100^{(d-2)/d} = 93.06$ ($d = 128$).

# %% [markdown] lang="ja"
# ## どのモデルがどれを使うか
#
# ここまでの規則は、どれも公開されているモデルで使われています。
# PI は Vicuna v1.5 16k、大きくした底は Code Llama、Llama 3 の規則は Llama 3.1 が使います。
# YaRN は Qwen2.5、DeepSeek-V2 と V3、gpt-oss が、LongRoPE は Phi-3.5-mini が使います。各モデルの設定は下の[「さらに詳しく」](#deeper-モデルごとの設定)に表で示します。
# Code Llama の新しい底は、係数 $s = 100^{(d-2)/d} = 93.06$ に対する NTK-aware の底と同じです（$d = 128$）。

# %% tags=["check"] summary={"en": "base 10^6 is the NTK-aware base of 10^4 for s = 100^((d-2)/d) = 93.06", "ja": "底 10^6 は、底 10^4 を係数 s = 100^((d-2)/d) = 93.06 で NTK-aware スケーリングしたときの底です"}
s_code_llama = 100 ** ((d - 2) / d)  # b' = 10^4 s^(d/(d-2)) = 10^6
assert math.isclose(1e4 * s_code_llama ** (d / (d - 2)), 1e6)
assert_close(
    rope_frequencies(d, base=1e6),
    rope_frequencies(d, base=1e4, scaling=NTKScaling(s_code_llama)),
)
assert round(s_code_llama, 2) == 93.06

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the settings, model by model.** Settings published by the
# model authors (papers, model cards, `config.json` or reference code):
#
# | model | trained $L$ | extended to | rule |
# |---|---|---|---|
# | Vicuna v1.5 16k (LMSYS, from Llama 2) | 4096 | 16384 | PI, $s = 4$ |
# | Code Llama (Rozière et al. 2023) | 4096 | 16384 in fine-tuning | base $10^4 \to 10^6$ |
# | Llama 3.1 (Meta) | 8192 | 131072 | Llama 3 rule, $s = 8$, base $5 \cdot 10^5$ |
# | Qwen2.5 Instruct (Qwen team) | 32768 | 131072 | YaRN, $s = 4$, switched on by the user |
# | DeepSeek-V2 (DeepSeek-AI 2024a) | 4096 | 128K | YaRN, $s = 40$, `mscale` 0.707 |
# | DeepSeek-V3 (DeepSeek-AI 2024b) | 4096 | 128K | YaRN, $s = 40$, `mscale` 1 |
# | Phi-3.5-mini-instruct (Microsoft) | 4096 | 131072 | LongRoPE, two lists of 48 |
# | gpt-oss (OpenAI) | 4096 | 131072 | YaRN, $s = 32$, base $1.5 \cdot 10^5$, band not rounded |
#
# Vicuna v1.5 16k's `config.json` says
# `"type": "linear"`. Qwen2.5 Instruct's YaRN is switched on by adding it to
# `config.json`; its model cards advise it only when long inputs are expected,
# since a static YaRN can hurt short texts, and note that vLLM's YaRN is
# static; Hugging Face's `"yarn"` and `YarnScaling` are static as well. DeepSeek-V2 sets YaRN
# for 160K and serves 128K; DeepSeek-V3's `max_position_embeddings` is
# 163840; both set `mscale` = `mscale_all_dim`. gpt-oss sets `truncate` to
# false (the next note). The other 128K models of the Phi-3 and Phi-3.5
# families also use LongRoPE, each with its own lists: Phi-3-vision-128k-instruct's
# `config.json` has other values and the older type name `"su"`. Chen et al.
# (2023) themselves extended LLaMA models up to 32768 positions with PI. Xiong
# et al. (2023, Llama 2 Long) call a plain change of base "adjusted base
# frequency" and raise Llama 2's base from $10^4$ to $5 \cdot 10^5$ during
# continued pretraining on long sequences.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：モデルごとの設定**
#
# モデルの作者が公開している設定（論文、モデルカード、`config.json`、公式実装）です。
#
# | モデル | 学習時の $L$ | 伸ばした長さ | 規則 |
# |---|---|---|---|
# | Vicuna v1.5 16k（LMSYS、Llama 2 をファインチューニングしたモデル） | 4096 | 16384 | PI、$s = 4$ |
# | Code Llama（Rozière ら 2023） | 4096 | ファインチューニング時 16384 | 底 $10^4 \to 10^6$ |
# | Llama 3.1（Meta） | 8192 | 131072 | Llama 3 の規則、$s = 8$、底 $5 \cdot 10^5$ |
# | Qwen2.5 Instruct（Qwen チーム） | 32768 | 131072 | YaRN、$s = 4$（利用者が有効化） |
# | DeepSeek-V2（DeepSeek-AI 2024a） | 4096 | 128K | YaRN、$s = 40$、`mscale` 0.707 |
# | DeepSeek-V3（DeepSeek-AI 2024b） | 4096 | 128K | YaRN、$s = 40$、`mscale` 1 |
# | Phi-3.5-mini-instruct（Microsoft） | 4096 | 131072 | LongRoPE、48 個ずつの 2 つの列 |
# | gpt-oss（OpenAI） | 4096 | 131072 | YaRN、$s = 32$、底 $1.5 \cdot 10^5$、帯の端を丸めない |
#
# Vicuna v1.5 16k の `config.json` には `"type": "linear"` とあります。
# Qwen2.5 Instruct の YaRN は、`config.json` に設定を加えると有効になります。モデルカードは、長い入力を扱うときだけこの設定を加えるよう勧めています。静的な YaRN は短いテキストで性能を損なうおそれがあるからです。また、vLLM の YaRN が静的であることにも触れています。Hugging Face の `"yarn"` と `YarnScaling` も静的です。
# DeepSeek-V2 は YaRN を 160K 向けに設定し、128K で提供しています。DeepSeek-V3 の `max_position_embeddings` は 163840 です。どちらも `mscale` と `mscale_all_dim` を等しくしています。
# gpt-oss は `truncate` を false にしています（次の「さらに詳しく」）。
# Phi-3 と Phi-3.5 のほかの 128K のモデルも LongRoPE を使い、それぞれ固有の列を持ちます。Phi-3-vision-128k-instruct の `config.json` は値が異なり、規則の名前も古い `"su"` です。
# Chen ら（2023）自身は、PI で LLaMA のモデルを 32768 トークンまで伸ばしています。
# Xiong ら（2023、Llama 2 Long）は、底だけを変えることを「adjusted base frequency」と呼んでいます。
# Llama 2 Long では、長い系列での継続事前学習の間に Llama 2 の底を $10^4$ から $5 \cdot 10^5$ に上げています。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Hugging Face's names, and where posenc differs.**
# `posenc.RotaryEmbedding.from_hf_config` reads a Hugging Face configuration
# (`rope_type` `"linear"`, `"dynamic"`, `"yarn"`, `"llama3"`, `"longrope"` or
# `"proportional"`). The classes take Hugging Face's keys under the same names,
# with `original_max_positions` for `original_max_position_embeddings`, except:
#
# | rule | `posenc` | Hugging Face `rope_scaling` |
# |---|---|---|
# | NTK-aware, static | `NTKScaling(s)` | no type needed: set `rope_theta` to $b\, s^{d/(d-2)}$ |
# | NTK-aware, dynamic | `DynamicNTKScaling(s, L)` | `rope_type="dynamic"`, `factor`; $L$ is `max_position_embeddings` |
# | LongRoPE | `LongRopeScaling(short_factor, long_factor, L, max_positions=...)` | `factor` defaults to `max_position_embeddings` / `original_max_position_embeddings` |
# | p-RoPE (Barbero et al. 2024) | `ProportionalScaling(fraction, factor)` | `rope_type="proportional"`, `partial_rotary_factor`, `factor` |
#
# p-RoPE is no context extension: it leaves the slowest pairs unrotated (the
# chapter [*Rotary in today's LLMs*](14-rope-in-llms.ipynb#partial-rotation-against-p-rope)).
# `YarnScaling(s, L)` is Hugging Face's default YaRN: the attention factor
# $0.1\ln s + 1$ and the range rounded outward (`truncate=True`). Its
# `mscale` and `mscale_all_dim` (DeepSeek) or `attention_factor` replace the
# factor, and `truncate=False` keeps the range fractional, as Hugging Face's
# keys of those names do. So `YarnScaling(32, 4096, truncate=False)` with head
# dimension 64 and base $1.5 \cdot 10^5$ reproduces gpt-oss (`GptOssConfig`;
# reference code `gpt_oss/torch/model.py`), frequencies and attention factor
# $0.1 \ln 32 + 1 = 1.3466$ alike. The default `truncate=True` would not:
# gpt-oss blends from pair 8.09 to pair 17.40, the rounded range from pair 8 to
# pair 18, and `YarnScaling(32, 4096)`'s frequencies are up to 1.76 times
# larger (pair 17).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Hugging Face での名前と、posenc との違い**
#
# `posenc.RotaryEmbedding.from_hf_config` は Hugging Face の設定（`rope_type` が `"linear"`、`"dynamic"`、`"yarn"`、`"llama3"`、`"longrope"`、`"proportional"` のもの）を読み込みます。
# 各クラスは Hugging Face の設定項目を同じ名前で受け取ります（`original_max_position_embeddings` だけは `original_max_positions` です）。違うのは次の表の点です。
#
# | 規則 | `posenc` | Hugging Face の `rope_scaling` |
# |---|---|---|
# | NTK-aware（静的） | `NTKScaling(s)` | `rope_type` は不要（`rope_theta` を $b\, s^{d/(d-2)}$ に設定） |
# | NTK-aware（動的） | `DynamicNTKScaling(s, L)` | `rope_type="dynamic"`、`factor`。$L$ は `max_position_embeddings` |
# | LongRoPE | `LongRopeScaling(short_factor, long_factor, L, max_positions=...)` | `factor` の既定値は `max_position_embeddings` / `original_max_position_embeddings` |
# | p-RoPE（Barbero ら 2024） | `ProportionalScaling(fraction, factor)` | `rope_type="proportional"`、`partial_rotary_factor`、`factor` |
#
# p-RoPE はコンテキストを伸ばす手法ではなく、最も遅いペアを回転させずに残す規則です（[「現在の LLM の回転位置埋め込み」](14-rope-in-llms.ipynb#部分回転と-p-rope)の章）。
# `YarnScaling(s, L)` は Hugging Face の既定の YaRN で、アテンションの倍率は $0.1\ln s + 1$、帯の両端は外側に丸めます（`truncate=True`）。
# Hugging Face の同じ名前の設定項目と同じく、`mscale` と `mscale_all_dim`（DeepSeek）または `attention_factor` を与えると倍率が置き換わり、`truncate=False` とすると帯の両端を小数のまま使います。
# そのため、`YarnScaling(32, 4096, truncate=False)` をヘッドの次元数 64、底 $1.5 \cdot 10^5$ で使うと、gpt-oss（`GptOssConfig`、公式実装の `gpt_oss/torch/model.py`）を周波数もアテンションの倍率 $0.1 \ln 32 + 1 = 1.3466$ も含めて再現できます。
# 既定の `truncate=True` では再現できません。gpt-oss が混ぜるのはペア 8.09〜17.40 ですが、丸めた帯はペア 8〜18 で、`YarnScaling(32, 4096)` の周波数は最大 1.76 倍（ペア 17）大きくなります。

# %% tags=["deeper", "check"] summary={"en": "the ramp over gpt-oss's fractional range gives Hugging Face's GptOssConfig frequencies, and so does YarnScaling(32, 4096, truncate=False), with its attention factor; the default, rounded outward, is up to 1.76 times larger", "ja": "帯の両端を丸めない gpt-oss のランプ関数は、Hugging Face の GptOssConfig の周波数を与え、YarnScaling(32, 4096, truncate=False) もアテンションの倍率を含めて同じ値を与えます。外側に丸める既定の YarnScaling(32, 4096) は最大 1.76 倍大きくなります"}
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
hf_gpt_oss_factor = 1.3465735902799727  # the attention factor returned
b_oss, d_oss, L_oss = 1.5e5, 64, 4096
theta_oss = rope_frequencies(d_oss, base=b_oss).double()
i_oss = torch.arange(d_oss // 2, dtype=f64)
low_oss = turn_index(32, d_oss, b_oss, L_oss)  # not rounded
high_oss = turn_index(1, d_oss, b_oss, L_oss)
ramp_oss = ((i_oss - low_oss) / (high_oss - low_oss)).clamp(0, 1)
fractional = ramp_oss * theta_oss / 32 + (1 - ramp_oss) * theta_oss
check_hf(fractional, hf_gpt_oss)
exact_oss = YarnScaling(32, L_oss, truncate=False)  # gpt-oss's setting
theta_exact = rope_frequencies(d_oss, base=b_oss, scaling=exact_oss).double()
check_hf(theta_exact, hf_gpt_oss)
assert_close(theta_exact, fractional, rtol=1e-6, atol=0)
assert math.isclose(exact_oss.attention_factor, hf_gpt_oss_factor)
yarn_oss = YarnScaling(32, L_oss)  # the range rounded outward: 8 to 18
ratio_oss = rope_frequencies(d_oss, base=b_oss, scaling=yarn_oss) / fractional
assert (round(low_oss, 2), round(high_oss, 2)) == (8.09, 17.4)
assert round(ratio_oss.max().item(), 2) == 1.76 and ratio_oss.argmax() == 17

# %% [markdown] lang="en"
# ## What to remember
#
# - Every rule here changes the frequencies (YaRN and LongRoPE also add a
#   constant temperature) and, at a given length, is one curve: how much to
#   slow each pair, given its wavelength.
# - A pair whose wavelength exceeds the training length $L$ has seen only an
#   arc of its circle; past $L$ it meets angles never trained. Every rule here
#   repairs these slow pairs, on the hypothesis that they cause the failure.
# - With fixed frequencies the score still depends only on $n - m$.
# - PI divides every frequency by $s$ and costs resolution; NTK-aware scaling
#   raises the base to $b\, s^{d/(d-2)}$, keeps pair 0, divides the slowest by
#   $s$, and leaves most slow pairs past their trained arc.
# - YaRN and Llama 3 decide by wavelength: keep pairs shorter than $L/\beta$,
#   divide pairs longer than $L/\alpha$ by $s$, blend in between.
# - A longer input spreads attention: the entropy grows by up to $\ln s$
#   (exactly for a repeated input, nearly for random logits). A
#   factor on the logits that grows like $\ln s$ works against it: YaRN's
#   $(0.1 \ln s + 1)^2$, LongRoPE's $1 + \ln s / \ln L$. How far it pulls back
#   depends on the spread of the logits (within 0.15 nats up to $s = 8$ for
#   standard deviation 2).
# - Dynamic NTK and LongRoPE change the frequencies with the sequence length,
#   so keys cached after their rotation go stale; the dynamic `factor` is a
#   slope, $s_T = sT/L - (s-1)$, and only $s = 1$ gives $T/L$.
# - LongRoPE searches one factor per pair; Phi-3.5-mini's long list divides the
#   slow pairs by about $2s$.

# %% [markdown] lang="ja"
# ## まとめ
#
# - この章の規則はどれも周波数を変える手法で（YaRN と LongRoPE は定数の温度も加えます）、ある長さでは「各ペアを波長に応じてどれだけ遅くするか」を表す 1 本の曲線として比べられます。
# - 波長が学習時の長さ $L$ より長いペアは、学習中に円周の一部しか回っていません。$L$ を超えると、学習していない角度まで回ります。この章の規則はどれも、遅いペアが失敗の原因だという仮説に立って、この遅いペアを直します。
# - 周波数が固定されていれば、スコアは今までどおり $n - m$ だけで決まります。
# - PI はすべての周波数を $s$ で割るので、分解能が下がります。NTK-aware スケーリングは底を $b\, s^{d/(d-2)}$ に上げ、ペア 0 をそのままにして最も遅いペアを $s$ で割りますが、遅いペアの多くは学習した弧の外に出ます。
# - YaRN と Llama 3 は波長で決めます。$L/\beta$ より短いペアはそのまま、$L/\alpha$ より長いペアは $s$ で割り、その間は混ぜます。
# - 入力が長いとアテンションが広がり、エントロピーは最大で $\ln s$ 増えます（入力の繰り返しならちょうど、ランダムなスコアならほぼその値）。1 からの増分がおよそ $\ln s$ に比例する倍率をスコアに掛ければ、この増加を抑えられます。YaRN の $(0.1 \ln s + 1)^2$、LongRoPE の $1 + \ln s / \ln L$ がこの形です。どこまで引き戻せるかはスコアの広がりによります（標準偏差 2 なら $s = 8$ まで 0.15 nat 以内）。
# - 動的 NTK と LongRoPE は系列の長さに応じて周波数を変えるので、回転させてからキャッシュしたキーは、新しい周波数と合わなくなります。
#   動的 NTK の `factor` は傾きで、$s_T = sT/L - (s-1)$ です。$T/L$ になるのは $s = 1$ のときだけです。
# - LongRoPE はペアごとに係数を探索します。Phi-3.5-mini の長い入力用の列は、遅いペアをおよそ $2s$ で割ります。
# %% [markdown] lang="en"
# ## Exercises
#
# 1. Code Llama fine-tunes with base $10^6$ at 16384 positions. Count the pairs
#    of $d = 128$ that turn fully within 16384 positions and compare with Llama 2
#    at 4096. Which wavelengths does the larger base move past the context?
# 2. Derive the NTK-aware base if, instead of the last pair, the last pair that
#    still turns within $L$ (index $\lfloor i_1 \rfloor$) is to be divided by
#    $s$. Check your $b'$ with `rope_frequencies(d, base=...)`.
# 3. Choose `beta_fast` and `beta_slow` so that `YarnScaling(8, 8192, ...)` with
#    base $5 \cdot 10^5$ comes as close as possible to `Llama3Scaling()`. How
#    close, and why can the two never agree exactly (attention factor apart)?
# 4. With dynamic NTK ($s = 1$), generate positions $0$ to $3L - 1$ one at a
#    time, caching each key rotated with the frequencies of the current length.
#    Compare the last query's scores against the cached keys with those against
#    keys rotated with the final frequencies. Where do they differ most?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. Code Llama は底 $10^6$、長さ 16384 でファインチューニングされています。
#    $d = 128$ のとき、64 組のペアのうち、長さ 16384 の間に 1 周以上するものを数え、長さ 4096 の Llama 2 と比べてください。
#    底を大きくしたことで、どの波長がコンテキストの外に出たでしょうか。
# 2. 最後のペアではなく、$L$ の間にまだ 1 周以上する最後のペア（番号 $\lfloor i_1 \rfloor$）を $s$ で割るとしたら、NTK-aware の底はどうなるか導いてください。
#    求めた $b'$ を `rope_frequencies(d, base=...)` で確かめてください。
# 3. 底 $5 \cdot 10^5$ の `YarnScaling(8, 8192, ...)` が `Llama3Scaling()` にできるだけ近くなるように、`beta_fast` と `beta_slow` を選んでください。
#    どこまで近づくでしょうか。また、アテンションの倍率を別にしても、両者が完全には一致しえないのはなぜでしょうか。
# 4. 動的 NTK（$s = 1$）で、位置 $0$ から $3L - 1$ までを 1 つずつ生成してください。各キーは、その時点の長さの周波数で回転させてからキャッシュします。
#    最後のクエリとキャッシュしたキーのスコアを、最終的な周波数で回転させたキーとのスコアと比べてください。差が最も大きいのはどこでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** With base $10^6$ and $L = 16384$, the formula for $i_1$ gives 36.44:
# pairs 0 to 36 turn within the context and 27 pairs never do, against 46 and 18 for
# Llama 2 at 4096. The larger base moves pairs 37 to 45 past the context: their
# wavelengths fit within 4096 positions with base $10^4$ but exceed 16384 with base
# $10^6$. Code Llama thus has more slow pairs than Llama 2, on a context four times
# as long.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** 底 $10^6$、$L = 16384$ では、$i_1$ の式から 36.44 が得られます。
# ペア 0〜36 がコンテキスト内で 1 周以上し、27 組は 1 周もしません。長さ 4096 の Llama 2 では 46 組と 18 組でした。
# 底を大きくしたことで、ペア 37〜45 がコンテキストの外に出ます。
# これらの波長は、底 $10^4$ なら長さ 4096 に収まりますが、底 $10^6$ では 16384 を超えます。
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
# Llama 2（$k = 45$、$s = 4$）では、下のセルは $b' = 71823$ を求め、ペア 45 がちょうど 4 で割られることを確かめて、最後のペアを割る数 $4^{63/45} = 6.96$ を出力します。

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
# **解答 3.** `beta_fast` は 2〜20 を 0.5 刻みで、`beta_slow` は 0.25〜2 を 0.25 刻みで探し、2 組の周波数の比の最大値を測ります。
# 最もよい YaRN の設定（`beta_fast` が 5.5 か 6、`beta_slow` が 1）でも、`Llama3Scaling()` とはあるペアで最大 1.24 倍違います。
# Llama 3 自身のしきい値 4 と 1 にすると、そのまま保つペア（0〜28）と割るペア（35 以降）はまったく同じになりますが、その間の 6 組では最大 1.38 倍違います。
# 帯の中で両者が完全に一致することはありません。
# YaRN のランプ関数はペアの番号 $i$ について線形ですが、Llama 3 のものは回転数 $r_i$ について線形で、回転数は $i$ について指数関数的に減ります。
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
# just past $L$, whose frequencies are still nearly the trained ones (the factor is
# $(n+1)/L$, about 1.04 at $n = 266$) but whose positions are already
# large: up to 10.7 radians at $n = 266$. Past a fraction of a radian the fast
# pairs' terms are scrambled, so the scores of the last query are off almost
# everywhere: by 6.5, 8.7 and 6.0 on average over the three thirds of the keys,
# comparable to the scores themselves, whose standard deviation is 10.4. Caching the
# keys before the rotation, and rotating them with the current frequencies, avoids
# all of it.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 4.** ループを短くするため、下のセルでは $L = 256$ として生成します。
# 位置 $n$ のキーは長さ $n + 1$ のときの周波数で回転されています。
# 最終的な周波数と比べると、そのキーのペア $i$ は角度 $n\,\lvert\theta'_i(n+1) - \theta'_i(3L)\rvert$ だけずれています。
# このずれは最後のキーでは 0 で、位置の小さい最初のいくつかのキーでも小さくなります。
# 最も大きいのは $L$ を少し過ぎたところでキャッシュしたキーです。
# 周波数はわずかに変わっただけで（係数は $(n+1)/L$ で、$n = 266$ では約 1.04）学習時とほぼ同じなのに、位置はすでに大きいからです。$n = 266$ で最大 10.7 ラジアンずれます。
# 速いペアの項は、ずれが 1 ラジアンに達する前から意味のある値ではなくなります。
# そのため、最後のクエリのスコアはほぼすべてのキーでずれます。
# スコアのずれの絶対値を、キーを 3 等分したそれぞれで平均すると 6.5、8.7、6.0 で、スコアそのもののばらつき（標準偏差 10.4）と同程度の大きさです。
# キーを回転させる前にキャッシュし、使うたびに、そのときの周波数で回転させれば、このずれはすべて避けられます。

# %% tags=["solution"]
L4 = 256
dyn_4 = DynamicNTKScaling(1.0, L4)
T_end = 3 * L4
gen_4 = torch.Generator().manual_seed(4)
keys_4 = torch.randn(T_end, d, dtype=f64, generator=gen_4)
q_4 = torch.randn(d, dtype=f64, generator=gen_4)
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

# %% [markdown] lang="en"
# ## Sources and versions
#
# Hugging Face's numbers: transformers 5.24.0, torch 2.13.0, CPU. Settings of
# released models: their `config.json`. Sun et al.'s perplexities: arXiv v1, read
# through a text transcription, Tables 2 and 5. Where each rule and number comes from:
# the note after the references.
#
# ### References
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Chen, S., Wong, S., Chen, L. and Tian, Y. (2023). *Extending Context Window
#   of Large Language Models via Positional Interpolation*.
#   <https://arxiv.org/abs/2306.15595>
# - bloc97 (2023). *NTK-Aware Scaled RoPE allows LLaMA models to have extended
#   (8k+) context size without any fine-tuning and minimal perplexity
#   degradation*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/>
# - emozilla (2023). *Dynamically Scaled RoPE further increases performance of
#   long context LLaMA with zero fine-tuning*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14mrgpr/dynamically_scaled_rope_further_increases/>
# - Peng, B., Quesnelle, J., Fan, H. and Shippole, E. (2023). *YaRN: Efficient
#   Context Window Extension of Large Language Models*.
#   <https://arxiv.org/abs/2309.00071>; code: <https://github.com/jquesnelle/yarn>
# - Llama Team, AI @ Meta (2024). *The Llama 3 Herd of Models*.
#   <https://arxiv.org/abs/2407.21783>; reference code:
#   <https://github.com/meta-llama/llama-models>
# - Rozière, B. et al. (2023). *Code Llama: Open Foundation Models for Code*.
#   <https://arxiv.org/abs/2308.12950>
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - Liu, X. et al. (2024). *Scaling Laws of RoPE-based Extrapolation*. ICLR 2024.
#   <https://arxiv.org/abs/2310.05209>
# - Xiong, W. et al. (2023). *Effective Long-Context Scaling of Foundation
#   Models*. <https://arxiv.org/abs/2309.16039>
# - Ding, Y. et al. (2024). *LongRoPE: Extending LLM Context Window Beyond 2
#   Million Tokens*. <https://arxiv.org/abs/2402.13753>; code:
#   <https://github.com/microsoft/LongRoPE>
# - Abdin, M. et al. (2024). *Phi-3 Technical Report*.
#   <https://arxiv.org/abs/2404.14219>
# - DeepSeek-AI (2024a). *DeepSeek-V2*. <https://arxiv.org/abs/2405.04434>;
#   (2024b). *DeepSeek-V3 Technical Report*. <https://arxiv.org/abs/2412.19437>;
#   code: <https://github.com/deepseek-ai/DeepSeek-V3>
# - OpenAI (2025). gpt-oss reference implementation.
#   <https://github.com/openai/gpt-oss>
# - Xiao, G. et al. (2023). *Efficient Streaming Language Models with Attention
#   Sinks*. <https://arxiv.org/abs/2309.17453>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - Hugging Face transformers, `modeling_rope_utils.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>
# - Model cards and configurations: <https://huggingface.co/meta-llama/Llama-3.1-8B>,
#   <https://huggingface.co/Qwen/Qwen2.5-7B-Instruct>,
#   <https://huggingface.co/lmsys/vicuna-7b-v1.5-16k>,
#   <https://huggingface.co/microsoft/Phi-3.5-mini-instruct>,
#   <https://huggingface.co/microsoft/Phi-3-vision-128k-instruct>,
#   <https://huggingface.co/deepseek-ai/DeepSeek-V2>,
#   <https://huggingface.co/deepseek-ai/DeepSeek-V3>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# Hugging Face から引いた数値は、CPU 上の transformers 5.24.0（torch 2.13.0）で得たものです。公開されているモデルの設定は、各モデルの `config.json` によります。
# Sun らのパープレキシティ（表 2 と表 5）は、arXiv v1 をテキストに書き起こしたものから読みました。
# どの規則と数値がどこから来たかは、参考文献の後の「さらに詳しく」にまとめます。
#
# ### 参考文献
#
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Chen, S., Wong, S., Chen, L., Tian, Y. (2023). *Extending Context Window
#   of Large Language Models via Positional Interpolation*.
#   <https://arxiv.org/abs/2306.15595>
# - bloc97 (2023). *NTK-Aware Scaled RoPE allows LLaMA models to have extended
#   (8k+) context size without any fine-tuning and minimal perplexity
#   degradation*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/>
# - emozilla (2023). *Dynamically Scaled RoPE further increases performance of
#   long context LLaMA with zero fine-tuning*. r/LocalLLaMA.
#   <https://www.reddit.com/r/LocalLLaMA/comments/14mrgpr/dynamically_scaled_rope_further_increases/>
# - Peng, B., Quesnelle, J., Fan, H., Shippole, E. (2023). *YaRN: Efficient
#   Context Window Extension of Large Language Models*.
#   <https://arxiv.org/abs/2309.00071>（コード：<https://github.com/jquesnelle/yarn>）
# - Llama Team, AI @ Meta (2024). *The Llama 3 Herd of Models*.
#   <https://arxiv.org/abs/2407.21783>
#   （コード：<https://github.com/meta-llama/llama-models>）
# - Rozière, B. et al. (2023). *Code Llama: Open Foundation Models for Code*.
#   <https://arxiv.org/abs/2308.12950>
# - Sun, Y. et al. (2022). *A Length-Extrapolatable Transformer*.
#   <https://arxiv.org/abs/2212.10554>
# - Liu, X. et al. (2024). *Scaling Laws of RoPE-based Extrapolation*. ICLR 2024.
#   <https://arxiv.org/abs/2310.05209>
# - Xiong, W. et al. (2023). *Effective Long-Context Scaling of Foundation
#   Models*. <https://arxiv.org/abs/2309.16039>
# - Ding, Y. et al. (2024). *LongRoPE: Extending LLM Context Window Beyond 2
#   Million Tokens*. <https://arxiv.org/abs/2402.13753>
#   （コード：<https://github.com/microsoft/LongRoPE>）
# - Abdin, M. et al. (2024). *Phi-3 Technical Report*.
#   <https://arxiv.org/abs/2404.14219>
# - DeepSeek-AI (2024a). *DeepSeek-V2*. <https://arxiv.org/abs/2405.04434>;
#   (2024b). *DeepSeek-V3 Technical Report*. <https://arxiv.org/abs/2412.19437>
#   （コード：<https://github.com/deepseek-ai/DeepSeek-V3>）
# - OpenAI (2025). gpt-oss の公式実装。
#   <https://github.com/openai/gpt-oss>
# - Xiao, G. et al. (2023). *Efficient Streaming Language Models with Attention
#   Sinks*. <https://arxiv.org/abs/2309.17453>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - Hugging Face transformers, `modeling_rope_utils.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>
# - モデルカードと設定：<https://huggingface.co/meta-llama/Llama-3.1-8B>、
#   <https://huggingface.co/Qwen/Qwen2.5-7B-Instruct>、
#   <https://huggingface.co/lmsys/vicuna-7b-v1.5-16k>、
#   <https://huggingface.co/microsoft/Phi-3.5-mini-instruct>、
#   <https://huggingface.co/microsoft/Phi-3-vision-128k-instruct>、
#   <https://huggingface.co/deepseek-ai/DeepSeek-V2>、
#   <https://huggingface.co/deepseek-ai/DeepSeek-V3>

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: where each rule and number comes from.** Every Hugging Face
# number in a check cell was computed by the call named in the cell's comment.
# The NTK-aware
# base is bloc97's, also in the YaRN repository's
# `LlamaNTKScaledRotaryEmbedding`; reading it as "keep pair 0, divide the
# slowest pair by $s$" follows Peng et al. The dynamic rule, slope included,
# is emozilla's `LlamaDynamicScaledRotaryEmbedding` in the same repository,
# which Hugging Face implements in `_compute_dynamic_ntk_parameters`.
# YaRN's ramp follows the reference code. Llama 3's rule is in Meta's reference
# code (`apply_scaling` in llama-models) and the models' `config.json`; the
# Herd paper describes the staged long-context pretraining but does not state
# the rule. LongRoPE's attention factor is written in its first form by
# `_calc_mscale_su` in `rope/longrope.py` on the repository's main branch, the
# expression of Hugging Face's `_compute_longrope_parameters`, and in its
# second form by an older development version on the `longrope` branch; the
# search is in `evolution/`, and `evolution/algorithms/dim_mono.py` keeps only
# non-decreasing lists. Phi-3.5-mini-instruct's lists and
# Phi-3-vision-128k-instruct's configuration were each read from two public
# copies of the file, which agree. DeepSeek's softmax scale is Hugging Face's
# `yarn_apply_mscale` (`models/deepseek_v3/modeling_deepseek_v3.py`) and `MLA`
# in DeepSeek-V3's `inference/model.py`. `GptOssConfig` is in
# `models/gpt_oss/configuration_gpt_oss.py`. Pull requests and issues of
# runtimes are linked where they come up.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：各規則と数値の出どころ**
#
# 確認のセルにある Hugging Face の数値は、どれもセルのコメントに書いた呼び出しで計算したものです。
# NTK-aware の底は bloc97 のもので、YaRN のリポジトリの `LlamaNTKScaledRotaryEmbedding` にもあります。これを「ペア 0 をそのままにし、最も遅いペアを $s$ で割る」と読むのは Peng らの説明に従ったものです。
# 動的な規則は、傾きも含めて同じリポジトリにある emozilla の `LlamaDynamicScaledRotaryEmbedding` の式で、Hugging Face はこれを `_compute_dynamic_ntk_parameters` で実装しています。
# YaRN のランプ関数は公式実装に従います。
# Llama 3 の規則は Meta の公式実装（llama-models の `apply_scaling`）とモデルの `config.json` にあります。Llama 3 の論文は、段階的に長さを伸ばす長いコンテキストでの事前学習を説明していますが、この規則自体は書いていません。
# LongRoPE のアテンションの倍率を 1 つ目の形で書いているのは、リポジトリの main ブランチの `rope/longrope.py` にある `_calc_mscale_su` です（Hugging Face の `_compute_longrope_parameters` と同じ式です）。2 つ目の形は、`longrope` ブランチにある古い開発版の書き方です。
# 探索は `evolution/` にあり、`evolution/algorithms/dim_mono.py` が減らない列だけを残します。
# Phi-3.5-mini-instruct の係数の列と Phi-3-vision-128k-instruct の設定は、それぞれ公開されている 2 つのコピーから読み、両者は一致しています。
# DeepSeek の softmax のスケールは、Hugging Face の `yarn_apply_mscale`（`models/deepseek_v3/modeling_deepseek_v3.py`）と、DeepSeek-V3 の `inference/model.py` にある `MLA` によります。
# `GptOssConfig` は `models/gpt_oss/configuration_gpt_oss.py` にあります。
# 推論ライブラリのプルリクエストと issue には、話題に出る箇所でリンクしています。
