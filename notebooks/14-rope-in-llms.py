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
# # Rotary in today's LLMs
#
# Today's large models change plain RoPE in four ways: they rotate only some
# pairs of a head ([partial rotation](../docs/glossary.md#partial-rotation),
# or [p-RoPE](../docs/glossary.md#p-rope), which drops the lowest frequencies),
# keep RoPE out of DeepSeek's compressed latent (only a small shared key is
# rotated), leave it out of some layers
# (Llama 4, Command A), or set it by layer type (Gemma 3 and 4).
# Each change has a reason that can be computed: a slow pair still turns over
# a long distance, a rotation between two projections keeps them from being
# merged, and a chunk or a window bounds the distances RoPE handles.
#
# The letters follow the [notation page](../docs/notation.md#positions): $m$
# and $n$ are the positions of the query and the key, $d$ the head size,
# $\theta_i = b^{-2i/d}$.

# %% [markdown] lang="ja"
# # 現在の LLM の回転位置埋め込み
#
# 現在の LLM は、通常の RoPE に 4 通りの変更を加えています。
# 1 つ目は、ヘッドの一部のペアだけを回転させることです（[部分回転](../docs/glossary.ja.md#partial-rotation)、または最も低い周波数を捨てる [p-RoPE](../docs/glossary.ja.md#p-rope)）。
# 2 つ目は DeepSeek の圧縮した潜在ベクトルから RoPE を外すことです（回転させるのは全ヘッドで共有する小さなキーだけです）。
# 3 つ目は一部の層（Llama 4、Command A）で RoPE を使わないこと、4 つ目は層の種類ごとに RoPE の設定を変えること（Gemma 3 と 4）です。
# どの変更にも、計算で確かめられる理由があります。
# 遅いペアでも距離が長ければ大きく回ること、2 つの射影のあいだに回転が入ると両者を 1 つの行列にまとめられないこと、そしてチャンクやウィンドウによって RoPE が扱う距離に上限ができることです。
#
# 記号は[記法のページ](../docs/notation.ja.md#positions)に従います。
# $m$ と $n$ はクエリとキーの位置、$d$ はヘッドの次元数で、$\theta_i = b^{-2i/d}$ です。

# %% tags=["setup"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import (
    ProportionalScaling,
    YarnScaling,
    apply_rope,
    attention,
    llama4_attention_temperature,
    rope_frequencies,
)
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64
try:  # Hugging Face's code, where transformers is installed (checks below)
    with warnings.catch_warnings():  # its import warns about tqdm
        warnings.simplefilter("ignore")
        import transformers
except ImportError:  # the downloaded notebook needs only posenc
    transformers = None

# %% [markdown] lang="en"
# ## Partial rotation against p-RoPE
#
# GPT-NeoX (`rotary_pct`, 0.25 in GPT-NeoX-20B) and Phi
# (`partial_rotary_factor`) rotate the first $r$ features of a head and pass
# the other $d - r$ through; so do current models such as Qwen3-Next and
# GLM-4 (a quarter and a half of the head in Hugging Face's defaults). The
# rotated part is an ordinary RoPE of size $r$, so its frequencies are
#
# $$\theta'_i = b^{-2i/r}, \qquad i = 0, \dots, r/2 - 1,$$
#
# which run from 1 down to $b^{-(r-2)/r}$: for large $r$ nearly the same
# span as the full head's $b^{-(d-2)/d}$, squeezed into fewer pairs.
# p-RoPE keeps only the first $k = \lfloor p\,d/2 \rfloor$ of the head's
# own frequencies $\theta_i = b^{-2i/d}$ and sets the rest to 0:
#
# $$\theta^{p}_i = \begin{cases} b^{-2i/d} & i < k \\ 0 & i \ge k \end{cases}$$
#
# So p-RoPE drops the lowest frequencies and keeps the fastest, while partial
# rotation keeps the whole range at a coarser spacing. With Hugging Face's
# [half layout](../docs/glossary.md#half-layout) the two also rotate
# different features: partial rotation the first $r$, p-RoPE the pairs
# $(i, i + d/2)$ for $i < k$. Here with $d = 16$ and a fraction of $1/4$:

# %% [markdown] lang="ja"
# ## 部分回転と p-RoPE
#
# GPT-NeoX（`rotary_pct`、GPT-NeoX-20B では 0.25）と Phi（`partial_rotary_factor`）は、
# ヘッドの先頭の $r$ 次元を回転させ、残りの $d - r$ 次元はそのまま通します。
# Qwen3-Next や GLM-4 のような現在のモデルも同じです（Hugging Face の既定値では、それぞれヘッドの 4 分の 1 と 2 分の 1）。
# 回転させる部分は次元数 $r$ の通常の RoPE なので、周波数は次のとおりです。
#
# $$\theta'_i = b^{-2i/r}, \qquad i = 0, \dots, r/2 - 1,$$
#
# これは 1 から $b^{-(r-2)/r}$ まで下がります。$r$ が大きければ、ヘッド全体の範囲（$b^{-(d-2)/d}$ まで）とほぼ同じ範囲を、より少ないペアへ詰め込むことになります。
# p-RoPE はヘッド本来の周波数 $\theta_i = b^{-2i/d}$ のうち、先頭の $k = \lfloor p\,d/2 \rfloor$ 個だけを残し、残りを 0 にします。
#
# $$\theta^{p}_i = \begin{cases} b^{-2i/d} & i < k \\ 0 & i \ge k \end{cases}$$
#
# つまり p-RoPE は最も低い側の周波数を捨てて速い側を残し、部分回転は全範囲を粗い間隔で残します。
# Hugging Face の[半分割配置](../docs/glossary.ja.md#half-layout)では、回転させる次元も違います。
# 部分回転は先頭の $r$ 次元を、p-RoPE は $i < k$ のペア $(i, i + d/2)$ を回転させます。
# $d = 16$、割合 $1/4$ の場合は次のとおりです。

# %%
d, r = 16, 4
x = torch.randn(5, d, dtype=f64)
pos = torch.arange(5)
partial = apply_rope(x, pos, rotary_dim=r)
proportional = apply_rope(x, pos, scaling=ProportionalScaling(0.25))
moved_partial = (partial != x).any(0).nonzero().flatten().tolist()
moved_p = (proportional != x).any(0).nonzero().flatten().tolist()
print("features rotated: partial", moved_partial, "p-RoPE", moved_p)

# %% tags=["check"] summary={"en": "the frequencies of partial rotation (r = 4, ending at b^(−(r−2)/r)), of Qwen3-Next's and GLM-4's defaults for a head of 16, and of p-RoPE (p = 1/4) are those of transformers 5.24.0; rotary_dim turns the first r features by n b^(−2i/r), as rebuilt by hand, and the outputs of the two schemes differ", "ja": "部分回転（r = 4、最後は b^(−(r−2)/r)）、次元数 16 のヘッドでの Qwen3-Next と GLM-4 の既定値、p-RoPE（p = 1/4）の周波数は transformers 5.24.0 と一致します。rotary_dim は先頭の r 次元を角度 n b^(−2i/r) で回転させ、手で組み立てた回転と一致します。部分回転と p-RoPE の出力は異なります"}
# transformers 5.24.0: GPTNeoXRotaryEmbedding(GPTNeoXConfig(hidden_size=64,
#   num_attention_heads=4, rotary_pct=0.25, rope_theta=1e4)).inv_freq
hf_partial = [1.0, 0.009999999776482582]
# ROPE_INIT_FUNCTIONS["proportional"](LlamaConfig(hidden_size=64,
#   num_attention_heads=4, rope_parameters={"rope_type": "proportional",
#   "rope_theta": 1e4, "partial_rotary_factor": 0.25}))
hf_proportional = [1.0, 0.3162277638912201, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
# Qwen3NextRotaryEmbedding(Qwen3NextConfig(hidden_size=64,
#   num_attention_heads=4, head_dim=16)).inv_freq (default factor 0.25), and
#   Glm4RotaryEmbedding(Glm4Config(...the same...)).inv_freq (default 0.5)
hf_qwen3_next = [1.0, 0.009999999776482582]
hf_glm4 = [1.0, 0.10000000149011612, 0.009999999776482582,
           0.0010000000474974513]  # fmt: skip
p_rope = ProportionalScaling(0.25)
if transformers is not None:  # recompute the pasted values live
    from transformers import GPTNeoXConfig, LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.glm4.modeling_glm4 import Glm4RotaryEmbedding
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        GPTNeoXRotaryEmbedding,
    )
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        Qwen3NextRotaryEmbedding,
    )

    small = dict(hidden_size=64, num_attention_heads=4)
    hf_partial = GPTNeoXRotaryEmbedding(
        GPTNeoXConfig(**small, rotary_pct=0.25, rope_theta=1e4)
    ).inv_freq.tolist()
    proportional_rope = dict(
        rope_type="proportional", rope_theta=1e4, partial_rotary_factor=0.25
    )
    hf_proportional = ROPE_INIT_FUNCTIONS["proportional"](
        LlamaConfig(**small, rope_parameters=proportional_rope)
    )[0].tolist()
    cfg = dict(small, head_dim=16)
    hf_qwen3_next = Qwen3NextRotaryEmbedding(
        transformers.Qwen3NextConfig(**cfg)
    ).inv_freq.tolist()
    hf_glm4 = Glm4RotaryEmbedding(
        transformers.Glm4Config(**cfg)
    ).inv_freq.tolist()
assert_close(rope_frequencies(r), torch.tensor(hf_partial))
assert math.isclose(hf_partial[-1], 1e4 ** (-(r - 2) / r), rel_tol=1e-6)
assert_close(rope_frequencies(d, scaling=p_rope), torch.tensor(hf_proportional))
assert_close(rope_frequencies(d // 4), torch.tensor(hf_qwen3_next))
assert_close(rope_frequencies(d // 2), torch.tensor(hf_glm4))
assert moved_partial == [0, 1, 2, 3] and moved_p == [0, 1, 8, 9]
assert not torch.allclose(partial, proportional)
# by hand: half layout of size r, pairs (i, i + r/2), angle n b^(-2i/r)
angle = pos[:, None] * 1e4 ** (-2 * torch.arange(r // 2, dtype=f64) / r)
x1, x2 = x[:, : r // 2], x[:, r // 2 : r]
cos, sin = angle.cos(), angle.sin()
by_hand = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[:, r:]], -1)
assert_close(partial, by_hand)

# %% [markdown] lang="en"
# For a head of $d = 128$ with a quarter of it rotated, the figure shows the
# wavelengths $2\pi/\theta$ of the pairs each scheme rotates. Partial
# rotation spans nearly the same range as full RoPE with 16 points instead
# of 64; p-RoPE keeps the 16 shortest wavelengths, the longest
# $2\pi \cdot 10^{4 \cdot 30/128} \approx 54$ positions at $b = 10^4$.

# %% [markdown] lang="ja"
# 下の図は、$d = 128$ のヘッドの 4 分の 1 を回転させる場合に、各方式が回転させるペアの波長 $2\pi/\theta$ を描いたものです。
# 部分回転は通常の RoPE とほぼ同じ範囲を 64 点ではなく 16 点で覆います。
# p-RoPE は最も短い 16 個の波長を残します。$b = 10^4$ では、最も長いものでも $2\pi \cdot 10^{4 \cdot 30/128} \approx 54$ です。

# %% tags=["figure"] alt={"en": ["Wavelength 2π/θ on a log axis against the pair index, d = 128, base 10^4: full RoPE, 64 pairs from 6.3 to about 54,000; partial rotation with r = 32, 16 pairs spanning nearly the same range, from 6.3 to about 35,000; p-RoPE with fraction 0.25, 16 pairs from 6.3 to about 54 only."], "ja": ["d = 128、底 10^4 での波長 2π/θ（対数軸）をペアの番号に対して描いた図です。通常の RoPE は 64 ペアで 6.3〜約 54,000 を覆います。r = 32 の部分回転は 16 ペアでほぼ同じ範囲（6.3〜約 35,000）を覆い、割合 0.25 の p-RoPE は 16 ペアで 6.3〜約 54 だけを覆います。"]}
d = 128
schemes = {
    "RoPE": rope_frequencies(d),
    "partial rotation, $r = 32$": rope_frequencies(32),
    "p-RoPE, $p = 0.25$": rope_frequencies(
        d, scaling=ProportionalScaling(0.25)
    ),
}
fig, ax = plt.subplots(figsize=(6.5, 3.4))
colours = plt.get_cmap("viridis")([0.0, 0.45, 0.85])
for (name, theta), colour in zip(schemes.items(), colours, strict=True):
    kept = theta[theta > 0].double()
    ax.scatter(torch.arange(len(kept)), 2 * math.pi / kept, s=10,
               color=colour, label=name)  # fmt: skip
ax.set_yscale("log")
ax.set_xlabel(r"$i$")
ax.set_ylabel(r"$2\pi/\theta$")
ax.legend()
plt.show()

# %% tags=["check"] summary={"en": "p-RoPE keeps 16 pairs, the longest wavelength 2π·10^(4·30/128) ≈ 54; partial rotation with r = 32 reaches 2π·10^(4·30/32)", "ja": "p-RoPE は 16 ペアを残し、最も長い波長は 2π·10^(4·30/128) ≈ 54 です。r = 32 の部分回転は 2π·10^(4·30/32) まで届きます"}
p_kept = schemes["p-RoPE, $p = 0.25$"]
assert int((p_kept > 0).sum()) == 16
p_longest = (2 * math.pi / p_kept[:16].double()).max()
r_longest = (2 * math.pi / schemes["partial rotation, $r = 32$"].double()).max()
assert math.isclose(p_longest, 2 * math.pi * 10 ** (4 * 30 / 128), rel_tol=1e-5)
assert round(p_longest.item()) == 54
assert math.isclose(r_longest, 2 * math.pi * 10 ** (4 * 30 / 32), rel_tol=1e-5)

# %% [markdown] lang="en"
# ## Why drop the lowest frequencies: semantic channels
#
# Barbero et al. (2024) looked inside Gemma 7B and report that it uses the
# highest frequencies to build sharp positional attention heads (a head that
# looks at the previous token, say) and puts much of the norm of its queries
# and keys on the lowest frequencies, which turn so slowly that they act as
# channels for content. But a slow pair still turns: over a distance
# $m - n$ the contribution of pair $i$ to the score of equal vectors is
# multiplied by $\cos((m - n)\theta_i)$. For the lowest pair of a head of 128
# with $b = 10^4$, $\theta_{63} = 10^{-4 \cdot 126/128}$, and at a distance of
# 8192 the factor is
#
# $$\cos(8192 \cdot 10^{-4 \cdot 126/128}) \approx 0.58,$$
#
# so a content match through that channel loses about 42% of its score at
# that distance. Their argument is that such channels are not robust over long
# contexts and that a larger base (500,000 in Llama 3) helps because it
# slows them further. p-RoPE removes the rotation from the lowest pairs
# altogether, which makes them exact content channels at any distance.
# Training Gemma 2B models from scratch (base $10^4$, 8k context), they
# report that truncating the lowest frequencies "not only maintains the same
# performance, but even seems to improve the validation perplexity" (their
# Table 2).

# %% [markdown] lang="ja"
# ## なぜ最も低い周波数を捨てるのか：意味のチャネル
#
# Barbero ら（2024）は Gemma 7B を分析し、次のように報告しています。
# Gemma は最も高い周波数で位置に基づく鋭いアテンションヘッド（たとえば直前のトークンを見るヘッド）を作り、クエリとキーのノルムの多くを最も低い周波数に載せます。
# 低い周波数はとてもゆっくり回るので、内容を運ぶチャネルとして働きます。
# とはいえ、遅いペアも回転はしています。
# クエリとキーが等しいベクトルなら、距離 $m - n$ でのスコアのうち、ペア $i$ の寄与には $\cos((m - n)\theta_i)$ が掛かります。
# ヘッドの次元数 128、$b = 10^4$ の最も低いペアでは $\theta_{63} = 10^{-4 \cdot 126/128}$ で、距離 8192 での因子は次の値です。
#
# $$\cos(8192 \cdot 10^{-4 \cdot 126/128}) \approx 0.58,$$
#
# つまり、このチャネルを通じた内容の一致は、距離 8192 ではスコアの約 42% を失います。
# Barbero らは、こうしたチャネルは長いコンテキストでは頑健でないと論じています。
# 底を大きくすると（Llama 3 では 500,000）チャネルの回転がさらに遅くなるので役に立つ、とも説明しています。
# p-RoPE は最も低いペアから回転を完全に取り除くので、これらのペアはどの距離でも内容だけを正確に運ぶチャネルになります。
# Barbero らは Gemma 2B のモデルを一から学習しました（底 $10^4$、コンテキスト長 8k）。
# 最も低い周波数を取り除いても性能は保たれ、検証データでのパープレキシティはむしろ改善するように見える、と報告しています（論文の表 2）。

# %%
lowest = torch.zeros(1, 128, dtype=f64)
lowest[0, 63] = lowest[0, 127] = 1.0  # pair 63 of the half layout
factor = {}
for name, scaling in [("RoPE", None), ("p-RoPE", ProportionalScaling(0.25))]:
    qv = apply_rope(lowest, torch.tensor([8192]), scaling=scaling)
    kv = apply_rope(lowest, torch.tensor([0]), scaling=scaling)
    factor[name] = (qv @ kv.T).item() / 2  # two unit entries
    print(f"{name}: factor at distance 8192 = {factor[name]:.4f}")

# %% tags=["check"] summary={"en": "the factor is cos(8192 θ_63) ≈ 0.58 for RoPE, a loss of 42%, and exactly 1 for p-RoPE", "ja": "因子は RoPE では cos(8192 θ_63) ≈ 0.58（42% の減少）、p-RoPE ではちょうど 1 です"}
theta_63 = 10 ** (-4 * 126 / 128)
assert math.isclose(factor["RoPE"], math.cos(8192 * theta_63), rel_tol=1e-6)
assert round(factor["RoPE"], 2) == 0.58 and round(1 - factor["RoPE"], 2) == 0.42
assert math.isclose(factor["p-RoPE"], 1.0, rel_tol=1e-12)

# %% [markdown] lang="en"
# ## Multi-head latent attention
#
# DeepSeek-V2 (DeepSeek-AI 2024), with
# [multi-head latent attention](../docs/glossary.md#multi-head-latent-attention),
# replaces the per-head keys and values in the
# [KV cache](../docs/glossary.md#kv-cache) by one small latent vector per
# token. With $h_t$ the input of token $t$, a down-projection makes the
# latent $c^{KV}_t = W^{DKV} h_t$ of size $d_c$, and per head $i$ the
# up-projections give the key and value:
#
# $$k^{C}_{t,i} = W^{UK}_i\, c^{KV}_t, \qquad v^{C}_{t,i} = W^{UV}_i\, c^{KV}_t .$$
#
# The queries go through a latent too, $c^{Q}_t = W^{DQ} h_t$ and
# $q^{C}_{t,i} = W^{UQ}_i c^{Q}_t$. Without positions, the score of head $i$
# between query $t$ and key $j$ regroups as
#
# $$q^{C\top}_{t,i}\, k^{C}_{j,i} = c^{Q\top}_t \big(W^{UQ\top}_i W^{UK}_i\big)\, c^{KV}_j ,$$
#
# so $W^{UK}_i$ can be absorbed into the query side once and for all, and
# without positions only $c^{KV}$ needs to be cached (RoPE adds a rotary key
# $k^{R}_t$ below); likewise $W^{UV}_i$ can be absorbed into the output
# projection (the regrouping is associativity of the matrix products). The
# point of MLA is the smaller cache; absorption makes decoding from it
# cheap. The paper only says that the projections can be absorbed at
# inference; serving stacks absorb at decode time and up-project in training
# and prefill. Hugging Face's code below up-projects at decode too.
# The letters follow DeepSeek-V2: $t$ and $j$ are positions, $i$ a head.

# %% [markdown] lang="ja"
# ## マルチヘッド潜在アテンション
#
# DeepSeek-V2（DeepSeek-AI 2024）は[マルチヘッド潜在アテンション](../docs/glossary.ja.md#multi-head-latent-attention)を使います。
# [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に入れるヘッドごとのキーとバリューを、トークンごとに 1 本の小さな潜在ベクトルで置き換える方式です。
# トークン $t$ の入力を $h_t$ とすると、次元を下げる射影が次元数 $d_c$ の潜在ベクトル $c^{KV}_t = W^{DKV} h_t$ を作り、
# ヘッド $i$ ごとに次元を上げる射影がキーとバリューを作ります。
#
# $$k^{C}_{t,i} = W^{UK}_i\, c^{KV}_t, \qquad v^{C}_{t,i} = W^{UV}_i\, c^{KV}_t .$$
#
# クエリも潜在ベクトル $c^{Q}_t = W^{DQ} h_t$ を通り、$q^{C}_{t,i} = W^{UQ}_i c^{Q}_t$ です。
# 位置がなければ、ヘッド $i$ のクエリ $t$ とキー $j$ のスコアは次のようにまとめ直せます。
#
# $$q^{C\top}_{t,i}\, k^{C}_{j,i} = c^{Q\top}_t \big(W^{UQ\top}_i W^{UK}_i\big)\, c^{KV}_j ,$$
#
# そのため $W^{UK}_i$ はあらかじめクエリ側に吸収でき、位置がなければ、キャッシュするのは $c^{KV}$ だけで済みます（RoPE を入れると、下で見るように回転キー $k^{R}_t$ も加わります）。
# 同じように $W^{UV}_i$ は出力の射影に吸収できます（まとめ直しは行列の積の結合法則です）。
# MLA の要点はキャッシュが小さいことです。吸収はそのキャッシュからのデコードを軽くする工夫です。
# 論文が述べるのは推論時に吸収できることだけで、推論用のシステムはデコードで吸収し、学習やプリフィルでは次元を上げる射影をそのまま計算します。下で照合する Hugging Face のコードは、デコードでも次元を上げています。
# 記号は DeepSeek-V2 に合わせ、$t$ と $j$ が位置、$i$ がヘッドです。

# %%
gen = torch.Generator().manual_seed(1)
w_uq = torch.randn(8, 16, generator=gen, dtype=f64)  # latent 16 -> head 8
w_uk = torch.randn(8, 12, generator=gen, dtype=f64)  # latent 12 -> head 8
c_q1 = torch.randn(16, generator=gen, dtype=f64)
c_kv1 = torch.randn(12, generator=gen, dtype=f64)
absorbed = w_uq.T @ w_uk  # computed once, for every query and key
print("up-projected:", ((w_uq @ c_q1) @ (w_uk @ c_kv1)).item())
print("absorbed:    ", (c_q1 @ absorbed @ c_kv1).item())

# %% [markdown] lang="en"
# ## Why RoPE cannot go into the latent
#
# Rotate the keys and queries of the latent path by their positions and the
# score becomes
#
# $$\big(R_t W^{UQ}_i c^{Q}_t\big)^\top R_j W^{UK}_i c^{KV}_j = c^{Q\top}_t \big(W^{UQ\top}_i R_{j-t} W^{UK}_i\big)\, c^{KV}_j .$$
#
# The matrix in the middle now depends on the offset $j - t$: it is a
# different matrix for every cached key, so no single product can be
# precomputed and the keys would have to be rebuilt from the latent for
# every new query; the DeepSeek-V2 paper (§2.1.3) makes the same
# argument.

# %% [markdown] lang="ja"
# ## なぜ RoPE を潜在ベクトルに入れられないのか
#
# 潜在ベクトルの経路のクエリとキーを位置で回転させると、スコアは次のようになります。
#
# $$\big(R_t W^{UQ}_i c^{Q}_t\big)^\top R_j W^{UK}_i c^{KV}_j = c^{Q\top}_t \big(W^{UQ\top}_i R_{j-t} W^{UK}_i\big)\, c^{KV}_j .$$
#
# 真ん中の行列は相対位置 $j - t$ で決まり、キャッシュしたキーごとに違います。
# 前もって計算できる 1 つの積はなく、新しいクエリのたびに潜在ベクトルからキーを作り直さなければならなくなります。
# DeepSeek-V2 の論文（§2.1.3）も同じ議論をしています。


# %% tags=["check"] summary={"en": "the middle matrix, built from rotated columns, is the same for positions (2, 5) and (0, 3), changes with the offset, is W_UQ^T W_UK at offset 0, and is W_UQ^T R_(j−t) W_UK, not R_(t−j)", "ja": "回転させた列から作る真ん中の行列は、位置 (2, 5) と (0, 3) で同じで、相対位置が違えば異なり、相対位置 0 では W_UQ^T W_UK、一般には W_UQ^T R_(j−t) W_UK です（R_(t−j) ではありません）"}
def middle(t, j):
    """W_UQ^T R_t^T R_j W_UK, from rotated columns."""
    rq = apply_rope(w_uq.T, torch.tensor([t]))  # rows: (R_t W_UQ e_a)^T
    rk = apply_rope(w_uk.T, torch.tensor([j]))
    return rq @ rk.T


assert_close(middle(2, 5), middle(0, 3))  # offset 3 both times
assert not torch.allclose(middle(0, 3), middle(0, 4))
assert_close(middle(4, 4), absorbed)  # offset 0: no rotation left


def rotated_by(offset):  # W_UQ^T R_offset W_UK
    return w_uq.T @ apply_rope(w_uk.T, torch.tensor([offset])).T


assert_close(middle(2, 5), rotated_by(5 - 2))  # R_{j-t}
assert not torch.allclose(middle(2, 5), rotated_by(2 - 5))  # not R_{t-j}

# %% [markdown] lang="en"
# ## Decoupled RoPE: one small rotary key for all heads
#
# DeepSeek's answer is to carry position on extra dimensions. Each head gets
# an additional query part $q^{R}_{t,i} = \mathrm{RoPE}(W^{QR}_i c^{Q}_t)$
# of size $d^R_h$, and all heads share one rotary key computed from the
# input, $k^{R}_t = \mathrm{RoPE}(W^{KR} h_t)$. The query and key of head $i$
# are the concatenations
#
# $$q_{t,i} = \big[q^{C}_{t,i};\ q^{R}_{t,i}\big], \qquad k_{t,i} = \big[k^{C}_{t,i};\ k^{R}_{t}\big],$$
#
# and the score divides by $\sqrt{d_h + d^R_h}$. The latent part is free of
# positions and can be absorbed as above; the rotary part is an ordinary
# RoPE score. The cache holds $c^{KV}_t$ and $k^{R}_t$: $d_c + d^R_h$
# numbers per token and layer, against $2 n_h d_h$ for multi-head attention.
# With DeepSeek-V2's $n_h = 128$, $d_h = 128$, $d_c = 512$ and $d^R_h = 64$
# that is 576 against 32,768, which the paper writes as $\tfrac{9}{2} d_h$
# ($d_c = 4 d_h$, $d^R_h = d_h/2$). DeepSeek-V3 keeps $d_c = 512$ and
# $d^R_h = 64$ (`kv_lora_rank` and `qk_rope_head_dim` in its Hugging Face
# configuration).

# %% [markdown] lang="ja"
# ## 分離した RoPE：全ヘッドで共有する小さな回転キー
#
# DeepSeek は、位置を追加の次元で表すことで、この問題を解決しました。
# 各ヘッドは、クエリに次元数 $d^R_h$ の部分 $q^{R}_{t,i} = \mathrm{RoPE}(W^{QR}_i c^{Q}_t)$ を追加で持ちます。
# キーの側は、入力から作る 1 本の回転キー $k^{R}_t = \mathrm{RoPE}(W^{KR} h_t)$ をすべてのヘッドで共有します。
# ヘッド $i$ のクエリとキーは、潜在ベクトルから作る部分と回転の部分を連結したものです。
#
# $$q_{t,i} = \big[q^{C}_{t,i};\ q^{R}_{t,i}\big], \qquad k_{t,i} = \big[k^{C}_{t,i};\ k^{R}_{t}\big],$$
#
# スコアは $\sqrt{d_h + d^R_h}$ で割ります。
# 潜在ベクトルの部分は位置を含まないので上のように吸収でき、回転の部分は通常の RoPE のスコアです。
# キャッシュするのは $c^{KV}_t$ と $k^{R}_t$ で、トークン 1 つ・層 1 つあたり $d_c + d^R_h$ 個の数です。
# マルチヘッドアテンションでは $2 n_h d_h$ 個です。
# DeepSeek-V2 の $n_h = 128$、$d_h = 128$、$d_c = 512$、$d^R_h = 64$ では 576 対 32,768 になります。
# 論文はこのうち 576 を $\tfrac{9}{2} d_h$ と書いています（$d_c = 4 d_h$、$d^R_h = d_h/2$）。
# DeepSeek-V3 も $d_c = 512$、$d^R_h = 64$ のままです（Hugging Face の設定では `kv_lora_rank` と `qk_rope_head_dim`）。

# %%
n_h, d_h = 128, 128  # DeepSeek-V2: d_c = 4 d_h, d^R_h = d_h / 2
d_c, d_hr = 4 * d_h, d_h // 2
mla, mha = d_c + d_hr, 2 * n_h * d_h  # numbers per token and layer
print(f"MLA {mla}, MHA {mha:,}: {mha / mla:.1f} times smaller")

# %% tags=["check"] summary={"en": "the four sizes are the defaults of DeepseekV3Config in transformers 5.24.0 (read from it where installed), and the cache is 576 = 9/2 d_h numbers against 32,768", "ja": "4 つの値は transformers 5.24.0 の DeepseekV3Config の既定値（インストールされていればそこから読みます）で、キャッシュは 32,768 個に対して 576 = 9/2 d_h 個です"}
# transformers 5.24.0: DeepseekV3Config() defaults (num_attention_heads,
#   qk_nope_head_dim, kv_lora_rank, qk_rope_head_dim)
hf_v3 = (128, 128, 512, 64)
if transformers is not None:
    v3 = transformers.DeepseekV3Config()
    hf_v3 = (v3.num_attention_heads, v3.qk_nope_head_dim, v3.kv_lora_rank,
             v3.qk_rope_head_dim)  # fmt: skip
assert (n_h, d_h, d_c, d_hr) == hf_v3  # V3 keeps V2's sizes
assert mla == 576 == 9 / 2 * d_h and mha == 32_768

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: a small MLA checked against DeepSeek-V3 in transformers.**
# One layer of MLA built from `posenc.apply_rope` and `posenc.attention`
# gives the output of Hugging Face's `DeepseekV3Attention` run on the same
# random weights (the numbers are pasted). Two details of the
# implementation: the latents $c^{Q}$ and $c^{KV}$ pass through an RMS
# normalisation (with weight 1 at initialisation), and DeepSeek-V3's
# checkpoints lay the rotary features out in interleaved pairs
# $(2i, 2i + 1)$ (`rope_interleave = True`), so `layout="interleaved"` here.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：小さな MLA を transformers の DeepSeek-V3 と照合する**
#
# `posenc.apply_rope` に `posenc.attention` を組み合わせて、1 層分の MLA を作ります。
# その出力は、同じランダムな重みで動かした Hugging Face の `DeepseekV3Attention` の出力（貼り付けた数値）と一致します。
# 実装について、細かな点が 2 つあります。
# 潜在ベクトル $c^{Q}$ と $c^{KV}$ は RMS 正規化（初期化時の重みは 1）を通ります。
# また DeepSeek-V3 のチェックポイントは、回転させる次元を[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)のペア $(2i, 2i + 1)$ に並べている（`rope_interleave = True`）ので、
# ここでは `layout="interleaved"` を使います。

# %% tags=["deeper"]
# the shapes of transformers 5.24.0's DeepseekV3Attention for
# DeepseekV3Config(hidden_size=32, num_attention_heads=2,
#   num_key_value_heads=2, q_lora_rank=16, kv_lora_rank=8,
#   qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
#   rope_interleave=True, rope_theta=1e4), eager attention, float32
n_h, d_nope, d_rope, d_v, d_c = 2, 8, 4, 6, 8
# seeded: both runs draw the same weights, in the same order
gen = torch.Generator().manual_seed(0)
shapes = {"q_a": (16, 32), "q_b": (24, 16), "kv_a": (12, 32),
          "kv_b": (28, 8), "o": (32, 12)}  # fmt: skip
W = {k: torch.randn(s, generator=gen) * 0.3 for k, s in shapes.items()}
h = torch.randn(1, 6, 32, generator=gen)[0]  # 6 tokens
pos = torch.arange(6)


def rms(v, eps=1e-6):
    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)


def mla(h):
    s = len(h)
    c_q = rms(h @ W["q_a"].T)
    q = (c_q @ W["q_b"].T).view(s, n_h, d_nope + d_rope).transpose(0, 1)
    q_c, q_r = q[..., :d_nope], q[..., d_nope:]
    kv_a = h @ W["kv_a"].T
    c_kv, k_r = rms(kv_a[:, :d_c]), kv_a[:, d_c:]
    kv = (c_kv @ W["kv_b"].T).view(s, n_h, d_nope + d_v).transpose(0, 1)
    k_c, v = kv[..., :d_nope], kv[..., d_nope:]
    q_r = apply_rope(q_r, pos, layout="interleaved")
    k_r = apply_rope(k_r, pos, layout="interleaved")  # one key, all heads
    q = torch.cat([q_c, q_r], dim=-1)
    k = torch.cat([k_c, k_r.expand(n_h, s, d_rope)], dim=-1)
    out = attention(q, k, v, causal=True)  # scale 1 / sqrt(8 + 4)
    return out.transpose(0, 1).reshape(s, n_h * d_v) @ W["o"].T, c_kv, k_r


out, c_kv, k_r = mla(h)
print(out[:, :4])

# %% tags=["deeper", "check"] summary={"en": "the layer built with posenc gives the output of transformers 5.24.0's DeepseekV3Attention on the same weights, to 2e-6", "ja": "posenc で組み立てた層は、同じ重みでの transformers 5.24.0 の DeepseekV3Attention と 2e-6 以内で同じ出力を返します"}
# DeepseekV3Attention(...)(x, (cos, sin), causal -inf mask)[0][0, :, :4]
hf_out = [[1.355757, -1.260383, 0.650181, -0.347249],
          [1.631431, -0.453178, 1.479988, -0.574575],
          [1.105552, -0.711953, 0.515167, 0.042537],
          [0.947041, 0.03489, 0.732043, 0.215325],
          [0.371246, -0.407632, -0.007062, 0.404188],
          [0.269107, 0.252824, -0.237305, 0.902777]]  # fmt: skip
hf_abs_sum = 116.2837905883789
assert_close(out[:, :4], torch.tensor(hf_out), atol=2e-6, rtol=0)
assert math.isclose(out.abs().sum().item(), hf_abs_sum, rel_tol=1e-5)

# %% [markdown] lang="en" tags=["deeper"]
# The same layer can run from the cache alone. Absorb $W^{UK}_i$ into the
# query ($\tilde q_{t,i} = W^{UK\top}_i q^{C}_{t,i}$, a vector in the
# latent space), score it against the cached $c^{KV}_j$, add the rotary
# score against the cached $k^{R}_j$, and apply $W^{UV}_i$ after the
# weighted sum of latents. This second derivation never forms a per-head
# key or value, and gives the same output. It is multi-query attention: every
# head scores against one shared key, $c^{KV}_j$ and $k^{R}_j$ side by side
# ($d_c + d^R_h = 576$ features in DeepSeek-V2 and V3), and averages one
# shared value, $c^{KV}_j$; the cell below implements it at toy sizes. The absorbed form is the one the
# DeepSeek-V2 paper describes for inference. Hugging Face's
# `DeepseekV3Attention` (transformers 5.24.0) caches the same two tensors,
# the latent and the rotary key, but does not absorb: at every step it
# expands them into per-head keys and values (`expand_kv`), as the first
# derivation does.

# %% [markdown] lang="ja" tags=["deeper"]
# 同じ層は、キャッシュだけからでも計算できます。
# まず $W^{UK}_i$ をクエリに吸収し、潜在空間のベクトル $\tilde q_{t,i} = W^{UK\top}_i q^{C}_{t,i}$ を作ります。
# キャッシュした $c^{KV}_j$ とのスコアに、キャッシュした $k^{R}_j$ との回転のスコアを足し、
# 潜在ベクトルの重み付き和を取ったあとで $W^{UV}_i$ を掛けます。
# この 2 つ目の導出はヘッドごとのキーとバリューを作りませんが、出力は同じになります。
# これは実質的にマルチクエリアテンションです。どのヘッドも、$c^{KV}_j$ と $k^{R}_j$ を並べた、全ヘッドで共有する 1 つのキー（DeepSeek-V2 と V3 では $d_c + d^R_h = 576$ 次元）に対してスコアを計算します。
# そして、全ヘッドで共有する 1 つのバリュー $c^{KV}_j$ の重み付き平均を取ります。下のセルは、これを小さな次元数で実装したものです。
# 吸収したこの形は、DeepSeek-V2 の論文が推論時の計算として説明しているものです。
# Hugging Face の `DeepseekV3Attention`（transformers 5.24.0）も、潜在ベクトルと回転キーの 2 つをキャッシュします。
# ただし吸収はせず、1 つ目の導出と同じく、毎ステップでヘッドごとのキーとバリューに展開します（`expand_kv`）。


# %% tags=["deeper", "check"] summary={"en": "from the cache alone (latents and rotary keys, W_UK absorbed into the query, W_UV after the weighted sum) the layer gives the same output, to 1e-5", "ja": "キャッシュ（潜在ベクトルと回転キー）だけから、W_UK をクエリに吸収し W_UV を重み付き和のあとに掛けても、層の出力は 1e-5 以内で同じです"}
def mla_from_cache(h, c_kv, k_r):
    s = len(h)
    c_q = rms(h @ W["q_a"].T)
    q = (c_q @ W["q_b"].T).view(s, n_h, d_nope + d_rope).transpose(0, 1)
    q_c, q_r = (
        q[..., :d_nope],
        apply_rope(q[..., d_nope:], pos, layout="interleaved"),
    )
    w_kv = W["kv_b"].view(n_h, d_nope + d_v, d_c)
    w_uk, w_uv = (
        w_kv[:, :d_nope],
        w_kv[:, d_nope:],
    )  # (n_h, 8, d_c), (n_h, 6, d_c)
    q_latent = q_c @ w_uk  # (n_h, s, d_c): W_UK absorbed
    scores = (q_latent @ c_kv.T + q_r @ k_r.T) / math.sqrt(d_nope + d_rope)
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
    out = (weights @ c_kv) @ w_uv.transpose(1, 2)  # W_UV after the sum
    return out.transpose(0, 1).reshape(s, n_h * d_v) @ W["o"].T


assert_close(mla_from_cache(h, c_kv, k_r), out, atol=1e-5, rtol=1e-5)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: DeepSeek-V3's YaRN scale.** DeepSeek-V3 extends its
# context with YaRN (see
# [*Extending RoPE's context*](09-rope-context.ipynb#yarn-interpolation-by-parts-and-a-temperature)),
# with `mscale = mscale_all_dim = 1`. Hugging Face then leaves the factor on
# cos and sin (`attention_factor`) at $g(s, 1)/g(s, 1) = 1$, where
# $g(s, a) = 0.1\,a \ln s + 1$, and
# multiplies the softmax scale instead by $g(s, a_{\text{all}})^2$
# ($a_{\text{all}} = $ `mscale_all_dim` $= 1$). A factor on cos and sin would
# reach only the 64 rotary features of the 192 behind each score; on the softmax
# scale it reaches the whole score:
#
# $$\text{scale} = \frac{(0.1 \ln s + 1)^2}{\sqrt{d_h + d^R_h}} .$$
#
# With DeepSeek-V3's $s = 40$ and $d_h + d^R_h = 128 + 64 = 192$ that is
# the value Hugging Face's attention stores.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：DeepSeek-V3 の YaRN のスケール**
#
# DeepSeek-V3 は YaRN でコンテキストを伸ばします（[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb)の章の[「YaRN：部分ごとの補間と温度」](09-rope-context.ipynb#yarn部分ごとの補間と温度)の節を参照）。
# 設定は `mscale = mscale_all_dim = 1` です。
# $g(s, a) = 0.1\,a \ln s + 1$ とおくと、Hugging Face は cos と sin に掛ける倍率（`attention_factor`）を $g(s, 1)/g(s, 1) = 1$ のままにし、代わりに softmax のスケールに $g(s, a_{\text{all}})^2$ を掛けます（$a_{\text{all}} = $ `mscale_all_dim` $= 1$）。
# cos と sin に掛けた倍率は、スコアの計算に使う 192 次元のうち、回転する 64 次元にしか届きませんが、softmax のスケールに掛ければスコア全体に効きます。
#
# $$\text{scale} = \frac{(0.1 \ln s + 1)^2}{\sqrt{d_h + d^R_h}} .$$
#
# DeepSeek-V3 の $s = 40$、$d_h + d^R_h = 128 + 64 = 192$ では、これは Hugging Face のアテンションが保持する値と一致します。

# %% tags=["deeper", "check"] summary={"en": "YarnScaling(40) with mscale = mscale_all_dim = 1 leaves the factor on cos and sin at 1, and (0.1 ln 40 + 1)^2 / √192 is the scale of transformers 5.24.0", "ja": "mscale = mscale_all_dim = 1 の YarnScaling(40) は cos と sin に掛ける倍率を 1 のままにし、(0.1 ln 40 + 1)^2 / √192 は transformers 5.24.0 のスケールと一致します"}
yarn = YarnScaling(40.0, 4096, mscale=1.0, mscale_all_dim=1.0)
# transformers 5.24.0: DeepseekV3Attention(DeepseekV3Config(qk_nope_head_dim
#   =128, qk_rope_head_dim=64, rope_parameters={"rope_type": "yarn",
#   "factor": 40, "original_max_position_embeddings": 4096, "mscale": 1,
#   "mscale_all_dim": 1, ...}), 0).scaling; the rotary attention_scaling: 1.0
hf_scaling, hf_rotary_factor = 0.1352337788608801, 1.0
assert yarn.attention_factor == hf_rotary_factor
assert math.isclose((0.1 * math.log(40) + 1) ** 2 / math.sqrt(192), hf_scaling)

# %% [markdown] lang="en"
# ## Llama 4: NoPE layers with a temperature, chunked RoPE layers
#
# Recent models choose RoPE layer by layer. Llama 4 and Command A take it out of
# one layer in four and confine it to chunks or windows in the others, so that
# RoPE never handles a distance of $C$ or $W$ or more; Gemma 3 and Gemma 4 keep it
# in every layer and set its parameters by layer type. In Hugging Face's
# defaults:
#
# | model | RoPE layers | the other layers |
# |---|---|---|
# | Llama 4 | 3 in 4: [chunked attention](../docs/glossary.md#chunked-attention), $C = 8192$, base $5 \cdot 10^5$ | 1 in 4: NoPE, the whole causal context, the query times $\tau(p) = 0.1 \ln(\lfloor (p + 1)/8192 \rfloor + 1) + 1$ |
# | Command A, Command R7B | 3 in 4: sliding window, $W = 4096$ | 1 in 4: NoPE, [full attention](../docs/glossary.md#full-attention) |
# | Gemma 3 | 5 in 6: sliding window, base $10^4$ | 1 in 6: full attention, base $10^6$, in the report, linear interpolation with factor 8 (4B, 12B, 27B) |
# | Gemma 4 | 5 in 6: sliding window, $d = 256$, base $10^4$ | 1 in 6: full attention, $d = 512$, base $10^6$, p-RoPE with $p = 0.25$ |

# %% [markdown] lang="ja"
# ## Llama 4：温度付きの NoPE の層と、チャンクに分けた RoPE の層
#
# 最近のモデルは、RoPE を層ごとに使い分けます。
# Llama 4 と Command A は 4 層のうち 1 層で RoPE を使わず、残りの 3 層では RoPE をチャンクやウィンドウの中だけで使います。そのため RoPE が $C$ や $W$ 以上の距離を扱うことはありません。
# Gemma 3 と Gemma 4 はすべての層に RoPE を残し、そのパラメータを層の種類で決めます。
# Hugging Face の既定値は次のとおりです。
#
# | モデル | RoPE の層 | ほかの層 |
# |---|---|---|
# | Llama 4 | 4 層に 3 層：[チャンク単位のアテンション](../docs/glossary.ja.md#chunked-attention)、$C = 8192$、底 $5 \cdot 10^5$ | 4 層に 1 層：NoPE、因果的なコンテキスト全体、クエリに $\tau(p) = 0.1 \ln(\lfloor (p + 1)/8192 \rfloor + 1) + 1$ を掛ける |
# | Command A、Command R7B | 4 層に 3 層：スライディングウィンドウ、$W = 4096$ | 4 層に 1 層：NoPE、[全体アテンション](../docs/glossary.ja.md#full-attention) |
# | Gemma 3 | 6 層に 5 層：スライディングウィンドウ、底 $10^4$ | 6 層に 1 層：全体アテンション、底 $10^6$、技術報告では係数 8 の線形補間（4B、12B、27B） |
# | Gemma 4 | 6 層に 5 層：スライディングウィンドウ、$d = 256$、底 $10^4$ | 6 層に 1 層：全体アテンション、$d = 512$、底 $10^6$、$p = 0.25$ の p-RoPE |

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Llama 4's two kinds of layer.** Llama 4 (Meta 2025)
# interleaves layers without any positional encoding among its RoPE layers,
# which Meta calls iRoPE. In Hugging Face's
# `Llama4TextConfig` the default is one NoPE layer in four
# (`no_rope_layer_interval = 4`: layers 3, 7, 11, ...), and the two kinds of
# layer differ in more than the rotation:
#
# - the RoPE layers use [chunked attention](../docs/glossary.md#chunked-attention):
#   they attend only within chunks of $C$ = `attention_chunk_size` = 8192
#   tokens: query $m$ sees key $n \le m$ only if
#   $\lfloor n/C \rfloor = \lfloor m/C \rfloor$;
# - the NoPE layers attend over the whole causal context, and multiply the
#   query at position $p$ by a temperature that grows in steps of
#   `floor_scale` $= 8192$ positions (`attn_scale` $a = 0.1$). The name is
#   Hugging Face's: unlike the
#   [attention temperature](../docs/glossary.md#attention-temperature) of
#   YaRN, which divides the scores, it multiplies the query:
#
# $$\tau(p) = a \ln\!\big(\lfloor (p + 1)/8192 \rfloor + 1\big) + 1 .$$
#
# The temperature is 1 up to position 8190, $1 + 0.1 \ln 2$ from 8191, and
# grows like $\ln p$ beyond: the scores of the long-range layers sharpen
# slowly as the context grows. For this temperature tuning, Hugging Face's
# `Llama4TextAttention` points in a comment to Nakanishi's Scalable-Softmax
# (2025).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Llama 4 の 2 種類の層**
#
# Llama 4（Meta 2025）は、RoPE の層のあいだに位置エンコーディングをまったく持たない層を挟みます。Meta はこれを iRoPE と呼んでいます。
# Hugging Face の `Llama4TextConfig` の既定値では 4 層に 1 層が NoPE です
# （`no_rope_layer_interval = 4` で、層 3、7、11、…）。2 種類の層の違いは回転だけではありません。
#
# - RoPE の層は[チャンク単位のアテンション](../docs/glossary.ja.md#chunked-attention)を使い、$C$ = `attention_chunk_size` = 8192 トークンのチャンクの中だけを見ます。
#   クエリ $m$ がキー $n \le m$ を見るのは $\lfloor n/C \rfloor = \lfloor m/C \rfloor$ のときだけです。
# - NoPE の層は因果的なコンテキスト全体を見て、位置 $p$ のクエリに温度を掛けます。
#   温度は位置が `floor_scale` $= 8192$ 進むごとに段階的に大きくなります（`attn_scale` $a = 0.1$）。
#   この「温度」は Hugging Face の呼び名で、スコアを割る YaRN の[アテンションの温度](../docs/glossary.ja.md#attention-temperature)とは違い、クエリに掛けます。
#
# $$\tau(p) = a \ln\!\big(\lfloor (p + 1)/8192 \rfloor + 1\big) + 1 .$$
#
# 温度は位置 8190 までは 1、8191 からは $1 + 0.1 \ln 2$ で、その先は $\ln p$ のように大きくなります。
# 遠くを見る層のスコアは、コンテキストが伸びるにつれてゆっくり鋭くなります。
# この温度の調整について、Hugging Face の `Llama4TextAttention` はコメントで Nakanishi（2025）の Scalable-Softmax を挙げています。

# %% tags=["deeper"]
p = torch.tensor([0, 8190, 8191, 16383, 99_999, 1_000_000])
tau = llama4_attention_temperature(p)
print(dict(zip(p.tolist(), [round(t, 4) for t in tau.tolist()], strict=True)))

# %% tags=["deeper", "check"] summary={"en": "llama4_attention_temperature is τ(p) and the query scale of transformers 5.24.0's Llama4TextAttention, 1 at 8190 and 1 + 0.1 ln 2 at 8191; one layer in four is NoPE; the chunked mask is Hugging Face's, and the largest distance in a chunked layer is 8191", "ja": "llama4_attention_temperature は τ(p) であり、transformers 5.24.0 の Llama4TextAttention がクエリに掛ける値と一致し、8190 では 1、8191 では 1 + 0.1 ln 2 です。4 層に 1 層が NoPE で、チャンクのマスクは Hugging Face のものと一致し、チャンクに分けた層での最大の距離は 8191 です"}
# transformers 5.24.0: Llama4TextAttention(Llama4TextConfig(hidden_size=4,
#   num_attention_heads=1, num_key_value_heads=1, head_dim=4,
#   num_hidden_layers=4), layer_idx=3) (a NoPE layer), q_proj set to the
#   identity, on 1,000,001 tokens of ones: the query that reaches the
#   attention function at the positions p, that is the scale it applies
hf_scales = [1.0, 1.0, 1.06931471824646, 1.1098612546920776,
             1.2564949989318848, 1.4812184572219849]  # fmt: skip
assert_close(tau, torch.tensor(hf_scales), rtol=1e-6, atol=0)
by_formula = 0.1 * torch.log(torch.floor((p + 1) / 8192) + 1) + 1  # tau(p)
assert_close(tau, by_formula.to(tau.dtype), rtol=1e-6, atol=0)
assert tau[1] == 1 and math.isclose(tau[2], 1 + 0.1 * math.log(2), rel_tol=1e-6)


def chunked_mask(s, chunk, queries=None):
    """Query m (rows; all s by default) may see key n (columns)."""
    m = torch.arange(s) if queries is None else queries
    n = torch.arange(s)
    same = (m[:, None] // chunk) == (n[None, :] // chunk)
    return same & (n[None, :] <= m[:, None])


def largest_distance(mask, queries):
    dist = queries[:, None] - torch.arange(mask.shape[1])[None, :]
    return int(dist[mask].max())


# transformers 5.24.0: Llama4TextConfig(num_hidden_layers=8).layer_types, and
# masking_utils.chunked_causal_mask_function(3, left_padding=0) on 7 x 7
hf_llama4_types = ["chunked_attention"] * 3 + ["full_attention"]
hf_llama4_types = hf_llama4_types * 2
hf_chunked = [[1, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0],
              [1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0],
              [0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0],
              [0, 0, 0, 0, 0, 0, 1]]  # fmt: skip
nope = [(layer + 1) % 4 == 0 for layer in range(8)]
types = ["full_attention" if n else "chunked_attention" for n in nope]
assert types == hf_llama4_types
assert chunked_mask(7, 3).int().tolist() == hf_chunked
queries = torch.tensor([0, 8190, 8191, 8192, 12000, 16383, 16384])
m = chunked_mask(16385, 8192, queries)
assert largest_distance(m, queries) == 8191  # never a distance of 8192

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: two more details of Llama 4's RoPE layers.** After the
# rotation they divide each query and key by its root mean square, with no
# learned weight; a rotation keeps the norm, so dividing before or after it
# gives the same result. `use_qk_norm` switches this on, by default (the code
# notes that the 128E model does not use it). Hugging Face calls this module `Llama4TextL2Norm`,
# but it does not make unit vectors: a head of 128 features comes out with
# norm $\sqrt{128} \approx 11.3$. And their RoPE has the large base
# $5 \cdot 10^5$ (Hugging Face's default `rope_theta`) although the chunks
# keep every distance below 8192. The released Llama 4 Scout also applies
# Llama 3's scaling, factor 16 on an original length of 8192 (Meta's
# llama-models, pull request 322), with `low_freq_factor` and
# `high_freq_factor` both 1: it divides by 16 only the frequencies whose
# wavelength exceeds 8192, the 29 slowest of the 64 pairs, and leaves the
# others. Hugging Face's default configuration has no scaling.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Llama 4 の RoPE の層のもう 2 つの特徴**
#
# 1 つは、回転のあとでクエリとキーをそれぞれの二乗平均の平方根（RMS）で割ることです。学習可能な重みは使いません。
# 回転はノルムを変えないので、割るのが回転の前でも後でも結果は同じです。
# この処理は `use_qk_norm` で切り替え、既定で有効です（コードの注記によれば、128E のモデルは使いません）。
# Hugging Face はこのモジュールを `Llama4TextL2Norm` と呼びますが、出力は単位ベクトルにはなりません。次元数 128 のヘッドでは、ノルムは $\sqrt{128} \approx 11.3$ になります。
# もう 1 つは、チャンクのおかげで距離は常に 8192 未満に収まるにもかかわらず、RoPE の底が $5 \cdot 10^5$ と大きいことです（Hugging Face の `rope_theta` の既定値）。
# 公開された Llama 4 Scout はさらに Llama 3 の方式のスケーリング（元の長さ 8192、係数 16）を使います。出典は Meta の llama-models のプルリクエスト 322 です。
# `low_freq_factor` と `high_freq_factor` がどちらも 1 なので、16 で割られるのは波長が 8192 を超える周波数、つまり 64 個のペアのうち最も遅い 29 個だけで、ほかは変わりません。
# Hugging Face の既定の設定にはスケーリングはありません。

# %% tags=["deeper", "check"] summary={"en": "dividing by the root mean square gives the output of transformers 5.24.0's Llama4TextL2Norm, of norm √128, not 1; Scout's scaling divides by 16 exactly the 29 pairs of wavelength above 8192, as transformers' llama3 scaling does", "ja": "RMS で割った結果は transformers 5.24.0 の Llama4TextL2Norm の出力と一致し、ノルムは 1 ではなく √128 です。Scout のスケーリングが 16 で割るのは、transformers の llama3 のスケーリングと同じく、波長が 8192 を超える 29 個のペアだけです"}
# transformers 5.24.0: Llama4TextL2Norm(1e-5)(torch.arange(1.0, 129.0)),
#   the first four entries and the norm of the output
hf_qk_norm = [0.013452846556901932, 0.026905693113803864,
              0.040358539670705795, 0.05381138622760773]  # fmt: skip
hf_qk_norm_length = 11.31370735168457
normed = rms(torch.arange(1.0, 129.0), eps=1e-5)  # the MLA cell's RMS norm
assert_close(normed[:4], torch.tensor(hf_qk_norm))
assert math.isclose(normed.norm().item(), hf_qk_norm_length, rel_tol=1e-6)
assert math.isclose(hf_qk_norm_length, math.sqrt(128), rel_tol=1e-5)  # not 1

theta = rope_frequencies(128, base=5e5)  # Llama 4's RoPE layers
slow = 2 * math.pi / theta > 8192  # wavelength above the original length
assert slow.sum() == 29 and slow[35:].all() and not slow[:35].any()
if transformers is not None:  # Scout's rope_scaling through HF's llama3
    transformers.logging.set_verbosity_error()  # low = high warns
    scout_rope = dict(
        rope_type="llama3",
        rope_theta=5e5,
        factor=16.0,
        low_freq_factor=1.0,
        high_freq_factor=1.0,
        original_max_position_embeddings=8192,
    )
    scout = transformers.LlamaConfig(
        hidden_size=128,
        num_attention_heads=1,
        max_position_embeddings=10**7,
        rope_parameters=scout_rope,
    )
    scaled = ROPE_INIT_FUNCTIONS["llama3"](scout)[0]
    assert_close(scaled[slow], theta[slow].float() / 16)
    assert torch.equal(scaled[~slow], theta[~slow].float())

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Command A, sliding-window RoPE layers and full NoPE layers.**
# Cohere's Command A (Cohere 2025) uses the same split with a sliding window
# instead of chunks: three layers of sliding-window attention with RoPE, then
# one layer of [full attention](../docs/glossary.md#full-attention) without
# positional encoding. In Hugging Face's `Cohere2` code,
# `sliding_window = 4096` and a pattern of 4 are the defaults, and the
# attention applies the rotation only when the layer has a sliding window.
# In Hugging Face's convention a window of $W$ lets query $m$ see keys
# $m - W < n \le m$: the last $W$ tokens, itself included. A window slides
# with the query, where a chunk restarts at fixed boundaries. Yang et al. (2025, *Rope to Nope and Back Again*), a
# study from Cohere, propose and test this hybrid of RoPE and NoPE layers,
# and Command R7B has the same layout (Hugging Face's Cohere2
# documentation). The figure draws, on 16 tokens, a chunk and a window of 4
# next to the full causal attention of both models' NoPE layers.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：Command A のスライディングウィンドウの RoPE の層と、全体アテンションの NoPE の層**
#
# Cohere の Command A（Cohere 2025）は、チャンクの代わりにスライディングウィンドウで同じ分け方をします。
# RoPE 付きのスライディングウィンドウのアテンションを 3 層置き、そのあとに位置エンコーディングのない[全体アテンション](../docs/glossary.ja.md#full-attention)を 1 層置きます。
# Hugging Face の `Cohere2` のコードでは `sliding_window = 4096` と周期 4 が既定値で、
# アテンションは層にスライディングウィンドウがあるときだけ RoPE を適用します。
# Hugging Face の規約では、幅 $W$ のウィンドウで、クエリ $m$ は $m - W < n \le m$ のキー、つまり自分を含む直近の $W$ 個のトークンを見ます。
# ウィンドウはクエリとともに動きますが、チャンクは決まった境界ごとに新しく始まります。
# RoPE の層と NoPE の層を組み合わせるこの方式は、Cohere の研究である Yang ら（2025、*Rope to Nope and Back Again*）が提案し、評価しています。
# Hugging Face の Cohere2 のドキュメントによれば、Command R7B も同じ構成です。
# 図は 16 トークンについて、大きさ 4 のチャンクと幅 4 のウィンドウのマスクを、両モデルの NoPE の層の因果的な全体アテンションのマスクと並べたものです。


# %% tags=["deeper", "figure"] alt={"en": ["Three 16 × 16 attention masks, queries down and keys across, allowed entries coloured, the others left blank. Left, chunked with C = 4: four lower-triangular blocks on the diagonal. Middle, sliding window with W = 4: a diagonal band four keys wide. Right, full causal: the whole lower triangle."], "ja": ["16 × 16 の 3 つのアテンションマスクです（縦はクエリ、横はキーで、アテンションが許される成分に色を付け、ほかは空白）。左は C = 4 のチャンクで、対角線上に下三角のブロックが 4 つ並びます。中央は W = 4 のスライディングウィンドウで、幅 4 のキーの帯が対角線に沿って伸びます。右は全体アテンション（因果的）で、下三角全体です。"]}
def sliding_mask(s, window, queries=None):
    m = torch.arange(s) if queries is None else queries
    n = torch.arange(s)
    return (n[None, :] <= m[:, None]) & (n[None, :] > m[:, None] - window)


s = 16
full = torch.ones(s, s, dtype=torch.bool).tril()
masks = [chunked_mask(s, 4), sliding_mask(s, 4), full]
fig, axes = plt.subplots(1, 3, figsize=(8, 2.9))
for ax, mask, title in zip(
    axes, masks, ["$C = 4$", "$W = 4$", r"$n \leq m$"], strict=True
):
    # masked-out entries are NaN, drawn transparent: the page shows through
    shown = torch.where(mask, 1.0, float("nan"))
    ax.imshow(shown, cmap="viridis_r", vmin=0, vmax=1.6)
    ax.set_title(title)
    ax.set_xlabel(r"$n$")
    ax.set_xticks([])
    ax.set_yticks([])
axes[0].set_ylabel(r"$m$")
plt.show()

# %% tags=["deeper", "check"] summary={"en": "Cohere2's layer pattern (three sliding, one full) and a window of 3 are those of transformers 5.24.0; with W = 4096 every query sees the last W tokens at most, a largest distance of W − 1", "ja": "Cohere2 の層の並び（スライディングウィンドウ 3 層、全体アテンション 1 層）と幅 3 のウィンドウは transformers 5.24.0 と一致します。W = 4096 では、どのクエリも見るのは多くても直近の W トークンで、最大の距離は W − 1 です"}
# transformers 5.24.0: Cohere2Config(num_hidden_layers=8).layer_types and
# .sliding_window; sliding_window_causal_mask_function(3) on 7 x 7
hf_cohere_types = (["sliding_attention"] * 3 + ["full_attention"]) * 2
hf_cohere_window = 4096
hf_sliding = [[1, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0],
              [1, 1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0, 0],
              [0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0],
              [0, 0, 0, 0, 1, 1, 1]]  # fmt: skip
types = [
    "full_attention" if (layer + 1) % 4 == 0 else "sliding_attention"
    for layer in range(8)
]
assert types == hf_cohere_types
assert sliding_mask(7, 3).int().tolist() == hf_sliding
queries = torch.tensor([0, 4095, 4096, 9999])
m = sliding_mask(10000, hf_cohere_window, queries)
assert largest_distance(m, queries) == hf_cohere_window - 1
assert m.sum(-1).tolist() == [1, 4096, 4096, 4096]  # the last W tokens

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: RoPE by layer type in Gemma 3 and Gemma 4.** Gemma 3 and Gemma 4 also vary RoPE by layer type, but unlike the two
# models above they take it out of no layer: the layer type sets its
# parameters. In Hugging Face's defaults five sliding-window layers come
# before each full-attention layer; the sliding layers use the base $10^4$
# and the full-attention layers $10^6$. The Gemma 3 report also applies
# [position interpolation](../docs/glossary.md#position-interpolation) with
# factor 8 to the global layers, compressing their positions, to reach 128K
# tokens (the 4B, 12B and 27B models): the layer type sets the
# scaling too. In Hugging Face's Gemma 4 defaults, the full-attention layers
# use p-RoPE with the fraction 0.25 (see
# [Partial rotation against p-RoPE](#partial-rotation-against-p-rope)), on
# heads of 512 features (256 on the sliding layers).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：層の種類ごとの RoPE（Gemma 3 と Gemma 4）**
#
# Gemma 3 と Gemma 4 も層の種類ごとに RoPE を変えますが、上の 2 つのモデルとは違い、どの層からも RoPE を外しません。
# 層の種類で決まるのは、RoPE のパラメータです。
# Hugging Face の既定値では、スライディングウィンドウの層 5 つのあとに全体アテンションの層が 1 つ来ます。
# スライディングウィンドウの層は底 $10^4$、全体アテンションの層は底 $10^6$ を使います。
# Gemma 3 の技術報告では、全体アテンションの層に係数 8 の[位置補間](../docs/glossary.ja.md#position-interpolation)をかけて位置を縮め、128K トークンに対応させています（4B、12B、27B のモデル）。
# つまりスケーリングも層の種類で決まります。
# Hugging Face の Gemma 4 の既定値では、全体アテンションの層は割合 0.25 の p-RoPE（[「部分回転と p-RoPE」](#部分回転と-p-rope)の節を参照）を、次元数 512 のヘッドに使います。
# スライディングウィンドウの層のヘッドは次元数 256 です。

# %% tags=["deeper", "check"] summary={"en": "Gemma 4's sliding layers (d = 256, b = 10^4) rotate 128 pairs and its full-attention layers (d = 512, b = 10^6, p = 0.25) 64; both sets of frequencies are those of transformers 5.24.0", "ja": "Gemma 4 のスライディングウィンドウの層（d = 256、b = 10^4）は 128 ペアを、全体アテンションの層（d = 512、b = 10^6、p = 0.25）は 64 ペアを回転させ、どちらの周波数も transformers 5.24.0 と一致します"}
# transformers 5.24.0: Gemma4TextRotaryEmbedding(Gemma4TextConfig()), the
#   buffers sliding_attention_inv_freq and full_attention_inv_freq: number
#   of nonzero frequencies, the first three, the sum
hf_gemma4 = {
    "sliding_attention": (
        128,
        [1.0, 0.9305720329284668, 0.8659643530845642],
        14.4019775390625,
    ),
    "full_attention": (
        64,
        [1.0, 0.9474635124206543, 0.8976871371269226],
        18.43247413635254,
    ),
}
gemma4 = {
    "sliding_attention": rope_frequencies(256, base=1e4),
    "full_attention": rope_frequencies(
        512, base=1e6, scaling=ProportionalScaling(0.25)
    ),
}
for kind, (nonzero, first, total) in hf_gemma4.items():
    theta = gemma4[kind]
    assert int((theta > 0).sum()) == nonzero
    assert_close(theta[:3], torch.tensor(first))
    assert math.isclose(theta.sum().item(), total, rel_tol=1e-6)


# %% [markdown] lang="en"
# ## What to remember
#
# - Partial rotation (`rotary_pct`, `partial_rotary_factor`: GPT-NeoX, Phi,
#   Qwen3-Next, GLM-4) runs a complete RoPE of size $r$ on the first $r$
#   features, whose lowest frequency $b^{-(r-2)/r}$ approaches the head's
#   only for large $r$; p-RoPE keeps the head's fastest frequencies and sets the
#   lowest to 0. They rotate different features by different angles.
# - Slow pairs still turn: at distance $m - n$, for equal query and key, a
#   pair contributes with a factor $\cos((m - n)\theta_i)$; p-RoPE makes the lowest pairs pure
#   content channels (Barbero et al.'s semantic channels).
# - MLA caches a latent $c^{KV}$ of size $d_c$ and absorbs the
#   up-projections; RoPE would put a position-dependent matrix between them.
# - So DeepSeek rotates a separate key of size $d^R_h$, shared by all heads:
#   $d_c + d^R_h$ numbers per token and layer (576 in DeepSeek-V2 and V3).
# - Llama 4 and Command A mix RoPE layers restricted to chunks or windows
#   (8192, 4096) with NoPE layers over the whole context; Llama 4 also scales
#   the NoPE queries by a temperature that grows with $\ln p$.
# - Gemma 3 and 4 keep RoPE in every layer and set its base (and, in
#   Gemma 4's Hugging Face defaults, whether it is p-RoPE) by layer type.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 部分回転（`rotary_pct` と `partial_rotary_factor`：GPT-NeoX、Phi、Qwen3-Next、GLM-4）は、先頭の $r$ 次元に、次元数 $r$ の完全な RoPE をかけます。その最も低い周波数 $b^{-(r-2)/r}$ がヘッド全体のものに近づくのは、$r$ が大きいときだけです。
#   p-RoPE はヘッドの最も速い側の周波数を残し、最も低いものを 0 にします。両者は違う次元を違う角度で回転させます。
# - 遅いペアも回ります。クエリとキーが等しければ、距離 $m - n$ ではペアの寄与に $\cos((m - n)\theta_i)$ が掛かります。
#   p-RoPE は最も低いペアを純粋な内容のチャネル（Barbero らが「意味のチャネル」と呼ぶもの）にします。
# - MLA は次元数 $d_c$ の潜在ベクトル $c^{KV}$ をキャッシュし、次元を上げる射影を吸収します。
#   RoPE を入れると、2 つの射影のあいだに、位置に依存する行列が入ってしまいます。
# - そこで DeepSeek は、全ヘッドで共有する次元数 $d^R_h$ の別のキーを回転させます。
#   キャッシュはトークン 1 つ・層 1 つあたり $d_c + d^R_h$ 個の数です（DeepSeek-V2 と V3 では 576）。
# - Llama 4 と Command A は、チャンクやウィンドウ（8192、4096）に限った RoPE の層と、全体アテンションの NoPE の層を組み合わせます。
#   Llama 4 はさらに NoPE の層のクエリに、$\ln p$ のように大きくなる温度を掛けます。
# - Gemma 3 と 4 はすべての層に RoPE を残し、その底を（Hugging Face の Gemma 4 の既定値では p-RoPE にするかどうかも）層の種類ごとに決めます。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Compare the KV cache per token of one layer for DeepSeek-V2's MLA with
#    grouped-query attention with 8 key-value heads of size 128, and with
#    multi-query attention (one head). Which is smallest?
# 2. In a head of $d = 128$ with $b = 10^4$, what is the largest number
#    $k$ of kept pairs for which p-RoPE keeps no pair whose wavelength
#    exceeds 8192? What fraction $p$ of the frequencies is that?
# 3. Llama 4 reads a context of 100,000 tokens. In a chunked RoPE layer, how
#    many keys does the last query see, and what is the temperature of the
#    last query in a NoPE layer?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. DeepSeek-V2 の MLA の、1 層・トークン 1 つあたりの KV キャッシュを 2 つの方式と比べてください。
#    1 つは次元数 128 のキーとバリューのヘッドを 8 つ持つグループ化クエリアテンション、もう 1 つはマルチクエリアテンション（ヘッド 1 つ）です。
#    どれが最も小さいですか。
# 2. $d = 128$、$b = 10^4$ のヘッドで p-RoPE を使うとき、波長が 8192 を超えるペアを 1 つも残さないようにするには、残すペアの数 $k$ を最大でいくつにできますか。
#    周波数全体に対する割合 $p$ はいくつですか。
# 3. Llama 4 が 100,000 トークンのコンテキストを読むとします。
#    チャンクに分けた RoPE の層で最後のクエリが見るキーはいくつですか。また、NoPE の層での最後のクエリの温度はいくつですか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** Grouped-query attention with 8 key-value heads caches
# $2 \cdot 8 \cdot 128 = 2048$ numbers, multi-query attention
# $2 \cdot 128 = 256$, MLA $512 + 64 = 576$. Multi-query attention is
# smallest; MLA sits between the two while keeping a separate key and value
# for every head after the up-projection (the paper's Table 1 compares the
# same formulas).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** キャッシュする数を比べます。
# キーとバリューのヘッドが 8 つのグループ化クエリアテンションでは $2 \cdot 8 \cdot 128 = 2048$ 個です。
# マルチクエリアテンションは $2 \cdot 128 = 256$ 個、MLA は $512 + 64 = 576$ 個です。
# 最も小さいのはマルチクエリアテンションです。
# MLA は両者の中間の大きさでありながら、次元を上げる射影のあとではヘッドごとに別々のキーとバリューを持ちます。
# 論文の表 1 も同じ式で比べています。

# %% tags=["solution"]
cache = {"GQA, 8 heads": 2 * 8 * 128, "MQA": 2 * 128, "MLA": 512 + 64}
assert min(cache, key=cache.get) == "MQA"
assert cache["MQA"] < cache["MLA"] < cache["GQA, 8 heads"]
print(cache)

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Pair $i$ has wavelength $2\pi\, b^{2i/d}$, which stays at
# or below 8192 while $2i/d \le \log_b(8192/2\pi)$, that is
# $i \le 64 \log_{10^4}(8192/2\pi) = 49.8$. So pairs $0, \dots, 49$ qualify,
# $k = 50$ and $p = 50/64 \approx 0.78$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** ペア $i$ の波長は $2\pi\, b^{2i/d}$ で、$2i/d \le \log_b(8192/2\pi)$、
# つまり $i \le 64 \log_{10^4}(8192/2\pi) = 49.8$ のあいだは 8192 以下です。
# したがってペア $0, \dots, 49$ が条件を満たし、$k = 50$、$p = 50/64 \approx 0.78$ です。

# %% tags=["solution"]
i_max = 64 * math.log(8192 / (2 * math.pi), 10_000)
wl = 2 * math.pi / rope_frequencies(128).double()
k = int((wl <= 8192).sum())
assert k == math.floor(i_max) + 1 == 50
kept = rope_frequencies(128, scaling=ProportionalScaling(k / 64))
assert int((kept > 0).sum()) == k and (2 * math.pi / kept[:k]).max() <= 8192
print(f"i <= {i_max:.1f}: k = {k}, p = {k / 64:.3f}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** The last query sits at $m = 99{,}999$, in the chunk that
# starts at $\lfloor 99{,}999/8192 \rfloor \cdot 8192 = 98{,}304$, so it
# sees $99{,}999 - 98{,}304 + 1 = 1696$ keys. Its temperature is
# $0.1 \ln(\lfloor 100{,}000/8192 \rfloor + 1) + 1 = 0.1 \ln 13 + 1 \approx 1.2565$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 最後のクエリは $m = 99{,}999$ にあり、$\lfloor 99{,}999/8192 \rfloor \cdot 8192 = 98{,}304$ から始まるチャンクに属します。
# したがって見るキーは $99{,}999 - 98{,}304 + 1 = 1696$ 個です。
# 温度は $0.1 \ln(\lfloor 100{,}000/8192 \rfloor + 1) + 1 = 0.1 \ln 13 + 1 \approx 1.2565$ です。

# %% tags=["solution"]
last = 99_999
row = chunked_mask(100_000, 8192, torch.tensor([last]))[0]
seen = int(row.sum())
assert seen == 1696 and int(row.nonzero().min()) == 98_304
tau = llama4_attention_temperature(torch.tensor([last])).item()
assert math.isclose(tau, 0.1 * math.log(13) + 1, rel_tol=1e-6)
print(seen, round(tau, 4))

# %% [markdown] lang="en"
# ## Sources and versions
#
# Every number pasted from Hugging Face transformers comes from version
# 5.24.0, computed outside this notebook, with the call that printed it
# written above it in the code. Where transformers is installed, the
# partial-rotation frequencies, DeepSeek-V3's sizes and Scout's scaling are
# recomputed from it instead. The code is in `modeling_rope_utils.py`
# (`_compute_proportional_rope_parameters`), `masking_utils.py` and the
# models `gpt_neox`, `qwen3_next`, `glm4`, `gemma3`, `gemma4`,
# `deepseek_v3`, `llama4` and `cohere2`. Its defaults need not be the released
# models' settings: Gemma 3's default window of 4096 is carried over from
# Gemma 2 (`Gemma2Config` has the same default), while the Gemma 3 report
# gives a window of 1024; Gemma 4's default is 512. Barbero et al.'s result,
# and its setting, are quoted from their text on Table 2.
#
# ### References
#
# - Black, S. et al. (2022). *GPT-NeoX-20B: An Open-Source Autoregressive
#   Language Model*. <https://arxiv.org/abs/2204.06745>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - DeepSeek-AI (2024). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model*. <https://arxiv.org/abs/2405.04434>
# - DeepSeek-AI (2024). *DeepSeek-V3 Technical Report*.
#   <https://arxiv.org/abs/2412.19437>
# - Meta (2025). *The Llama 4 herd*.
#   <https://ai.meta.com/blog/llama-4-multimodal-intelligence/>
# - Nakanishi, K. M. (2025). *Scalable-Softmax Is Superior for Attention*.
#   <https://arxiv.org/abs/2501.19399>
# - Cohere (2025). *Command A: An Enterprise-Ready Large Language Model*.
#   <https://arxiv.org/abs/2504.00698>
# - Yang et al. (2025). *Rope to Nope and Back Again: A New Hybrid
#   Attention Strategy*. <https://arxiv.org/abs/2501.18795>
# - Gemma Team (2025). *Gemma 3 Technical Report*.
#   <https://arxiv.org/abs/2503.19786>
# - Meta, llama-models, pull request 322: *fix: update rope scaling for
#   Llama-4-Scout*. <https://github.com/meta-llama/llama-models/pull/322>
# - Hugging Face transformers 5.24.0.
#   <https://github.com/huggingface/transformers>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# Hugging Face transformers から貼り付けた数値は、どれもバージョン 5.24.0 でこのノートブックの外で計算したものです。
# 各値を出力した呼び出しは、コードの中でその値の直前にコメントとして書いてあります。
# transformers がインストールされていれば、部分回転の周波数、DeepSeek-V3 の次元数、Scout のスケーリングは、そこから計算し直します。
# 該当するコードは `modeling_rope_utils.py`（`_compute_proportional_rope_parameters`）、`masking_utils.py`、
# モデル `gpt_neox`、`qwen3_next`、`glm4`、`gemma3`、`gemma4`、`deepseek_v3`、`llama4`、`cohere2` にあります。
# コードの既定値は、公開されたモデルの設定と同じとは限りません。
# Gemma 3 の既定のウィンドウ幅 4096 は Gemma 2 から引き継いだもので（`Gemma2Config` の既定値も同じ）、Gemma 3 の技術報告では 1024 です。Gemma 4 の既定値は 512 です。
# Barbero らの結果とその設定は、論文の表 2 についての本文から引いています。
#
# ### 参考文献
#
# - Black, S. et al. (2022). *GPT-NeoX-20B: An Open-Source Autoregressive
#   Language Model*. <https://arxiv.org/abs/2204.06745>
# - Barbero, F. et al. (2024). *Round and Round We Go! What makes Rotary
#   Positional Encodings useful?* <https://arxiv.org/abs/2410.06205>
# - DeepSeek-AI (2024). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model*. <https://arxiv.org/abs/2405.04434>
# - DeepSeek-AI (2024). *DeepSeek-V3 Technical Report*.
#   <https://arxiv.org/abs/2412.19437>
# - Meta (2025). *The Llama 4 herd*.
#   <https://ai.meta.com/blog/llama-4-multimodal-intelligence/>
# - Nakanishi, K. M. (2025). *Scalable-Softmax Is Superior for Attention*.
#   <https://arxiv.org/abs/2501.19399>
# - Cohere (2025). *Command A: An Enterprise-Ready Large Language Model*.
#   <https://arxiv.org/abs/2504.00698>
# - Yang, B. et al. (2025). *Rope to Nope and Back Again: A New Hybrid
#   Attention Strategy*. <https://arxiv.org/abs/2501.18795>
# - Gemma Team (2025). *Gemma 3 Technical Report*.
#   <https://arxiv.org/abs/2503.19786>
# - Meta：llama-models のプルリクエスト #322（*fix: update rope scaling for
#   Llama-4-Scout*）。<https://github.com/meta-llama/llama-models/pull/322>
# - Hugging Face transformers 5.24.0。
#   <https://github.com/huggingface/transformers>
