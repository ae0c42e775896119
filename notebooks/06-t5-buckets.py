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
# # T5 relative position buckets
#
# T5 (Raffel et al. 2020) adds no positional encoding to its token embeddings. Instead,
# every attention score receives a learned number that depends only on how far the key
# is from the query. The distances are sorted into buckets: each small distance has a
# bucket of its own, larger distances share buckets whose width grows geometrically,
# and every distance from a maximum on lands in one last bucket. Each head learns one
# scalar per bucket, and one table serves all the layers of a stack. This chapter
# derives the bucket function from T5's code, checks `posenc` against an independent
# reference element for element, shows where the buckets begin and end, and what the
# model can no longer tell apart.

# %% [markdown] lang="ja"
# # T5 の相対位置バケット
#
# T5 (Raffel ら 2020) は、トークンの埋め込みに位置エンコーディングを足しません。
# その代わり、すべてのアテンションスコアに、キーがクエリからどれだけ離れているかだけで決まる、学習される数を 1 つ足します。
# 距離はバケットに振り分けられます。小さな距離はそれぞれ専用のバケットを持ちます。
# それより大きな距離は、幅が等比的に広がるバケットを共有します。
# そして、ある最大距離から先はすべて最後の 1 つのバケットに入ります。
# 各ヘッドはバケットごとに 1 つのスカラーを学習し、1 つの表をスタックのすべての層で使い回します。
# この章では、T5 のコードからバケット関数を導き、独立に書いた参照実装と `posenc` を要素ごとに比べます。
# さらに、各バケットがどこから始まりどこで終わるか、そしてモデルが何を区別できなくなるかを示します。

# %%
import math
from itertools import pairwise

import matplotlib.pyplot as plt
import torch

from posenc import T5RelativeBias, attention, t5_relative_position_bucket
from posenc.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown] lang="en"
# ## The idea: position as a bias on the scores
#
# Shaw et al. (2018) gave attention a learned vector for each relative position
# $j - i$ between a query at position $i$ and a key at position $j$, clipped to a
# maximum offset, and added it inside the attention computation (the chapter
# *Relative position representations*). T5 keeps the principle
# that only the offset matters and simplifies the rest. The learned quantity is a single
# number per head, added to the score before the softmax, and instead of being clipped
# the offsets are grouped into buckets that grow with the distance. For head $h$:
# $$s_h(i, j) = \frac{q_{h,i} \cdot k_{h,j}}{\sqrt{d}} + \beta_{b(j-i),\,h}$$
# Here $\beta$ is the learned table, with one row per bucket and one column per head,
# and $b$ maps a relative position to a bucket. (`posenc.attention` divides by
# $\sqrt{d}$; T5 itself does not, see the section on libraries.) Because the bias
# depends on $i$ and $j$ only through $j - i$, each head's bias matrix is constant
# along every diagonal.
#
# The cell below passes the bias of `posenc.T5RelativeBias` to `posenc.attention`.
# With the identity matrix as values, attention returns its weights, which must be the
# softmax of the formula above. Then it checks the diagonals.

# %% [markdown] lang="ja"
# ## 考え方：位置をスコアへのバイアスとして与える
#
# Shaw ら (2018) は、位置 $i$ のクエリと位置 $j$ のキーの相対位置 $j - i$ を最大値でクリップし、
# その相対位置ごとに学習するベクトルを用意して、アテンションの計算の中で加えました（「相対位置表現（Shaw ら）」の章）。
# T5 は「相対位置だけが重要」という原則を引き継ぎ、残りを単純にしました。
# 学習するのはヘッドごとに 1 つの数で、softmax の前のスコアに足します。
# また、相対位置をクリップする代わりに、距離とともに幅が広がるバケットにまとめます。
# ヘッド $h$ では次のようになります。
# $$s_h(i, j) = \frac{q_{h,i} \cdot k_{h,j}}{\sqrt{d}} + \beta_{b(j-i),\,h}$$
# $\beta$ は学習する表で、行がバケット、列がヘッドに対応します。
# $b$ は相対位置をバケットに写す関数です。
# （`posenc.attention` は $\sqrt{d}$ で割りますが、T5 自体は割りません。ライブラリの節を参照してください。）
# バイアスは $i$ と $j$ に $j - i$ を通してしか依存しないので、各ヘッドのバイアス行列はどの対角線に沿っても一定です。
#
# 次のセルでは、`posenc.T5RelativeBias` のバイアスを `posenc.attention` に渡します。
# バリューに単位行列を使うと、アテンションは重みそのものを返します。
# それが上の式の softmax に一致することを確かめ、続いて対角線の性質を確かめます。

# %%
H, T, d = 4, 10, 8
t5_bias = T5RelativeBias(H)  # table beta: [B, H], stored as relative_attention_bias.weight
q, k = torch.randn(H, T, d), torch.randn(H, T, d)
with torch.no_grad():
    bias = t5_bias(T, T)  # [H, T, T]

# values = identity: attention returns softmax(q k^T / sqrt(d) + bias) itself
weights = attention(q, k, torch.eye(T).expand(H, T, T), bias=bias)
scores = q @ k.transpose(-2, -1) / math.sqrt(d) + bias
torch.testing.assert_close(weights, torch.softmax(scores, dim=-1))

# bias[h, i, j] depends only on j - i: shifting i and j together changes nothing
assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])

# %% [markdown] lang="en"
# ## Relative position, and two ways to split the buckets
#
# Write $r = j - i$ for the relative position: $r < 0$ for a key before the query,
# $r > 0$ for a key after it. With $B$ buckets in all (T5 uses $B = 32$), T5 has two
# settings.
#
# **Bidirectional** (the encoder, where a query sees keys on both sides): each side gets
# $S = B/2$ buckets. The distance is $n = |r|$, and keys after the query are moved to the
# second half by an offset of $S$:
# $$b(r) = \hat b(|r|) + S\,[r > 0]$$
# where $[r > 0]$ is $1$ if $r > 0$ and $0$ otherwise.
#
# **Causal** (the decoder, where a query sees only itself and earlier keys): all
# $S = B$ buckets serve one side, with the distance $n = \max(-r, 0)$:
# $$b(r) = \hat b(\max(-r, 0))$$
# Every key after the query gets $n = 0$, so it shares bucket $0$ with $r = 0$; the
# causal mask removes those keys anyway.
#
# The function $\hat b$, from a distance $n \ge 0$ to a bucket of one side, is the same
# in both settings; the next section derives it. A consequence of the split is visible
# already: in the bidirectional setting $r = 0$ belongs to the first half, so a key after
# the query always has $n \ge 1$ and bucket $S$ itself is never used. One of the 32
# buckets is wasted.

# %% [markdown] lang="ja"
# ## 相対位置と、バケットの 2 通りの分け方
#
# 相対位置を $r = j - i$ と書きます。キーがクエリより前なら $r < 0$、後ろなら $r > 0$ です。
# バケットが全部で $B$ 個（T5 では $B = 32$）あるとき、T5 には 2 つの設定があります。
#
# **双方向**（エンコーダ。クエリは両側のキーを見ます）では、片側に $S = B/2$ 個のバケットを割り当てます。
# 距離は $n = |r|$ で、クエリより後ろのキーは、バケットの番号に $S$ を足して後半に移します。
# $$b(r) = \hat b(|r|) + S\,[r > 0]$$
# ここで $[r > 0]$ は、$r > 0$ なら $1$、そうでなければ $0$ です。
#
# **因果的**（デコーダ。クエリは自分自身とそれより前のキーしか見ません）では、
# $S = B$ 個のバケットをすべて片側に使い、距離を $n = \max(-r, 0)$ とします。
# $$b(r) = \hat b(\max(-r, 0))$$
# クエリより後ろのキーはすべて $n = 0$ となり、$r = 0$ と同じバケット $0$ に入ります。
# そうしたキーはどのみち因果マスクで取り除かれます。
#
# 距離 $n \ge 0$ を片側のバケットに写す関数 $\hat b$ は、どちらの設定でも同じです。次の節で導きます。
# この分け方から、すでに 1 つのことが分かります。双方向の設定では $r = 0$ が前半に属するので、
# クエリより後ろのキーは必ず $n \ge 1$ となり、バケット $S$ そのものは使われません。
# 32 個のうち 1 個が無駄になっているのです。

# %%
r = torch.arange(-300, 301)
bi = t5_relative_position_bucket(r, bidirectional=True)  # B = 32, S = 16
causal = t5_relative_position_bucket(r, bidirectional=False)  # B = 32, S = 32

# bidirectional: b(r) = b_hat(|r|) + 16 [r > 0], with b(-|r|) = b_hat(|r|)
positive = r > 0
assert torch.equal(bi[positive], bi[r < 0].flip(0) + 16)
# causal: every r >= 0 shares bucket 0
assert torch.equal(causal[r >= 0], torch.zeros(301, dtype=torch.long))
# bidirectional leaves bucket S = 16 unused; causal uses all 32
assert set(bi.tolist()) == set(range(32)) - {16} and set(causal.tolist()) == set(range(32))
print(f"buckets used: bidirectional {len(set(bi.tolist()))}, causal {len(set(causal.tolist()))}")
print(
    f"r = -1, 0, 1 -> bidirectional {bi[299:302].tolist()}, causal {causal[299:302].tolist()}",
    end="",
)

# %% [markdown] lang="en"
# ## Inside one side: exact buckets, then logarithmic ones
#
# Of the $S$ buckets of a side, the first $E = \lfloor S/2 \rfloor$ are exact: for
# $n < E$ the bucket is the distance itself, $\hat b(n) = n$. The other $S - E$ buckets
# cover the distances from $E$ to a maximum distance $D$ (T5: $D = 128$) on a logarithmic
# scale. For $n \ge E$:
# $$\hat b(n) = \min\left(E + \left\lfloor \frac{\ln(n/E)}{\ln(D/E)}\,(S - E) \right\rfloor,\ S - 1\right)$$
# The fraction $\ln(n/E) / \ln(D/E)$ runs from $0$ at $n = E$ to $1$ at $n = D$; times
# $S - E$ and rounded down, it counts the logarithmic buckets, and the minimum clips
# everything past the end to the last bucket $S - 1$. (T5's code truncates toward zero
# when it converts to an integer; for $n \ge E$ the value is not negative, so that is the
# floor.)
#
# With T5's defaults, $B = 32$ and $D = 128$, the bidirectional setting has $S = 16$ and
# $E = 8$: distances $0$ to $7$ have buckets $0$ to $7$, and distance $8$, where the
# logarithm is $0$, opens bucket $8$. On the side after the query the same boundary sits
# between $r = 7$ (bucket $23$) and $r = 8$ (bucket $24$). The causal setting has
# $S = 32$ and $E = 16$.

# %% [markdown] lang="ja"
# ## 片側の中身：厳密バケットと対数バケット
#
# 片側の $S$ 個のバケットのうち、最初の $E = \lfloor S/2 \rfloor$ 個は厳密バケットです。
# $n < E$ では、バケットは距離そのもの $\hat b(n) = n$ です。
# 残りの $S - E$ 個は対数バケットで、$E$ から最大距離 $D$（T5 では $D = 128$）までの距離を対数スケールで受け持ちます。
# $n \ge E$ では次の式になります。
# $$\hat b(n) = \min\left(E + \left\lfloor \frac{\ln(n/E)}{\ln(D/E)}\,(S - E) \right\rfloor,\ S - 1\right)$$
# 比 $\ln(n/E) / \ln(D/E)$ は $n = E$ で $0$、$n = D$ で $1$ になります。
# これに $S - E$ を掛けて切り捨てると、何番目の対数バケットかが決まります。
# そして最小値を取る操作が、範囲を越えたものをすべて最後のバケット $S - 1$ に押し込みます。
# （T5 のコードは整数への変換で 0 方向に切り捨てますが、$n \ge E$ では値が負にならないので、床関数と同じです。）
#
# T5 の既定値 $B = 32$、$D = 128$ の双方向設定では、$S = 16$、$E = 8$ です。
# 距離 $0$ から $7$ はバケット $0$ から $7$ に入り、対数が $0$ になる距離 $8$ からバケット $8$ が始まります。
# クエリより後ろの側では、同じ境目が $r = 7$（バケット $23$）と $r = 8$（バケット $24$）の間にあります。
# 因果的な設定では $S = 32$、$E = 16$ です。

# %%
exact_side = t5_relative_position_bucket(-torch.arange(8))  # r = 0, -1, ..., -7
assert torch.equal(exact_side, torch.arange(8))  # b_hat(n) = n for n < E = 8
edge = t5_relative_position_bucket(torch.tensor([-7, -8, 7, 8]))
assert edge.tolist() == [7, 8, 23, 24]
causal_edge = t5_relative_position_bucket(torch.tensor([-15, -16]), bidirectional=False)
assert causal_edge.tolist() == [15, 16]  # causal: E = 16
print(f"r = -7, -8, 7, 8 -> {edge.tolist()}; causal r = -15, -16 -> {causal_edge.tolist()}", end="")

# %% [markdown] lang="en"
# ## An independent reference
#
# Before going further, the cell below writes the formulas of the last two sections as a
# short Python function of one integer, with `math.log` in Python floats, and compares it
# with `posenc.t5_relative_position_bucket` for every relative position from $-300$ to
# $300$, in both settings, with T5's defaults.

# %% [markdown] lang="ja"
# ## 独立した参照実装
#
# 先へ進む前に、前の 2 つの節の式を、整数 1 つを受け取る短い Python 関数として書きます。
# 対数には Python の浮動小数点数で `math.log` を使います。
# そして T5 の既定値で、両方の設定について、$-300$ から $300$ までのすべての相対位置で
# `posenc.t5_relative_position_bucket` と比べます。


# %%
def reference_bucket(r, bidirectional, num_buckets=32, max_distance=128):
    """T5's bucket of one relative position r = j - i, from the formulas, in float64."""
    offset = 0
    if bidirectional:
        side = num_buckets // 2  # S = B / 2
        if r > 0:
            offset = side  # keys after the query: second half
        n = abs(r)
    else:
        side = num_buckets  # S = B
        n = max(-r, 0)  # keys after the query: distance 0
    exact = side // 2  # E
    if n < exact:
        return offset + n
    log_part = math.log(n / exact) / math.log(max_distance / exact) * (side - exact)
    return offset + min(exact + math.floor(log_part), side - 1)


for bidirectional in (True, False):
    ours = t5_relative_position_bucket(r, bidirectional=bidirectional)
    theirs = torch.tensor([reference_bucket(x, bidirectional) for x in r.tolist()])
    assert torch.equal(ours, theirs)
print(f"posenc == reference on all {r.numel()} relative positions, both settings", end="")

# %% [markdown] lang="en"
# ### float32 and float64
#
# The reference computes in float64. T5's code computes the logarithm and the quotient
# in float32: Mesh TensorFlow converts with `mtf.to_float`, Hugging Face with `.float()`.
# For the defaults this makes no difference, and the reason can be checked. The quotient
# $\frac{\ln(n/E)}{\ln(D/E)}(S - E)$ is a whole number $t$ exactly when
# $$n^{S-E} E^{t} = D^{t} E^{S-E}$$
# an equation between integers. For $n$ from $E$ to $300$ this holds in the
# bidirectional setting for $n = 8, 16, 32, 64, 128, 256$ and in the causal setting for
# $n = 16, 128$; there float32 and float64 both land on the whole number exactly. Every
# other quotient stays more than $10^{-4}$ from a whole number (the smallest gaps are
# printed below), far more than the float32 rounding, which stays below $10^{-5}$ here.
# So the floor cannot differ.
#
# For other settings it can. With $B = 72$ and $D = 50$ (bidirectional: $S = 36$,
# $E = 18$), the distance $n = 30$ gives exactly $9$, because
# $(30/18)^{18} = (5/3)^{18} = (50/18)^{9}$. Float64 rounds the quotient up to
# $9.000000000000002$ and gives bucket $27$; float32 rounds it down to $8.999999$ and
# gives bucket $26$, the bucket T5 uses. `posenc` follows T5's float32 arithmetic: the
# cell rebuilds Hugging Face's expression in float32 and compares it with `posenc`
# across a range of settings.

# %% [markdown] lang="ja"
# ### float32 と float64
#
# 参照実装は float64 で計算します。一方、T5 のコードは対数と商を float32 で計算します。
# Mesh TensorFlow は `mtf.to_float` で、Hugging Face は `.float()` で変換しています。
# 既定値ではこの違いは結果に影響せず、その理由も確かめられます。
# 商 $\frac{\ln(n/E)}{\ln(D/E)}(S - E)$ がちょうど整数 $t$ になるのは、次の整数どうしの等式が成り立つときだけです。
# $$n^{S-E} E^{t} = D^{t} E^{S-E}$$
# $E$ から $300$ までの $n$ では、これが成り立つのは双方向で $n = 8, 16, 32, 64, 128, 256$、
# 因果的で $n = 16, 128$ のときです。そこでは float32 も float64 もちょうど整数になります。
# それ以外の商は、どれも整数から $10^{-4}$ より離れています（最小の隔たりを下に表示します）。
# ここでの float32 の丸め誤差は $10^{-5}$ 未満なので、それよりずっと大きな隔たりです。
# したがって切り捨ての結果は変わりません。
#
# 既定値以外の設定では変わることがあります。
# $B = 72$、$D = 50$（双方向で $S = 36$、$E = 18$）では、距離 $n = 30$ の商がちょうど $9$ になります。
# $(30/18)^{18} = (5/3)^{18} = (50/18)^{9}$ だからです。
# float64 は商を $9.000000000000002$ に切り上げてバケット $27$ を返し、
# float32 は $8.999999$ に切り下げてバケット $26$ を返します。T5 が使うのは後者です。
# `posenc` は T5 の float32 の計算に従います。
# 次のセルでは、Hugging Face の式を float32 で作り直し、いくつもの設定で `posenc` と比べます。


# %%
def quotient(n, side, max_distance, dtype):
    """ln(n/E) / ln(D/E) * (S - E), evaluated as T5 does in dtype."""
    exact = side // 2
    x = torch.log(torch.as_tensor(n, dtype=dtype) / exact)
    return x / math.log(max_distance / exact) * (side - exact)


for side in (16, 32):  # bidirectional and causal, B = 32
    E, D = side // 2, 128
    n = torch.arange(E, 301)
    q64 = quotient(n, side, D, torch.float64)
    q32 = quotient(n, side, D, torch.float32).double()
    # whole numbers exactly where n^(S-E) E^t = D^t E^(S-E) holds in integers
    whole = [
        m
        for m in range(E, 301)
        for t in range(40)
        if m ** (side - E) * E**t == D**t * E ** (side - E)
    ]
    near = (q64 - q64.round()).abs() < 1e-9
    assert n[near].tolist() == whole and torch.equal(q32[near], q64[near].round())
    gap = (q64 - q64.round()).abs()[~near].min()
    err = (q32 - q64).abs().max()
    assert gap > 1e-4 and err < 1e-5
    print(
        f"S = {side}: whole at n = {whole}, smallest other gap {gap:.1e}, float32 error {err:.1e}"
    )

# B = 72, D = 50, r = -30: exactly 9 (30^18 18^9 == 50^9 18^18), rounded apart by the precisions
assert 30**18 * 18**9 == 50**9 * 18**18
q64, q32 = quotient(30, 36, 50, torch.float64).item(), quotient(30, 36, 50, torch.float32).item()
b64 = reference_bucket(-30, True, 72, 50)
b32 = t5_relative_position_bucket(torch.tensor(-30), num_buckets=72, max_distance=50).item()
assert (b64, b32) == (27, 26)
print(f"float64 {q64!r} -> bucket {b64}, float32 {q32:.6f} -> bucket {b32} (posenc)")


def hf_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Hugging Face's T5Attention._relative_position_bucket, rewritten (float32 quotient)."""
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets
        relative_position = relative_position.abs()
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    if_large = (
        max_exact
        + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    if_large = torch.min(if_large, torch.full_like(if_large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, if_large)


r_wide = torch.arange(-1000, 1001)
settings = 0
for num_buckets in (8, 16, 32, 72):
    for max_distance in (50, 64, 100, 128, 200, 300):
        for bidirectional in (True, False):
            ours = t5_relative_position_bucket(
                r_wide,
                bidirectional=bidirectional,
                num_buckets=num_buckets,
                max_distance=max_distance,
            )
            assert torch.equal(ours, hf_bucket(r_wide, bidirectional, num_buckets, max_distance))
            settings += 1
print(
    f"posenc == Hugging Face's float32 expression in {settings} settings, r = -1000..1000", end=""
)

# %% [markdown] lang="en"
# ## What the buckets look like
#
# The step plots show $b(r)$ for T5's defaults. In the bidirectional setting (left) the
# two sides rise from the centre, the keys after the query shifted up by $16$. In the
# causal setting (right) everything at $r \ge 0$ is bucket $0$, and the 32 buckets all
# serve the keys before the query, so the exact part reaches twice as far. Near $r = 0$
# every step is one position wide; further out the steps widen, and the last step begins
# well before the dotted lines at $|r| = D = 128$. The next section finds where.

# %% [markdown] lang="ja"
# ## バケットの形
#
# 下の階段グラフは、T5 の既定値での $b(r)$ です。
# 双方向（左）では、中央から両側へ階段が上がり、クエリより後ろのキーの側は $16$ だけ上にずれています。
# 因果的（右）では、$r \ge 0$ はすべてバケット $0$ で、32 個のバケットがすべてクエリより前のキーに使われます。
# そのため厳密バケットが 2 倍遠くまで届きます。
# $r = 0$ の近くでは段の幅は 1 位置ですが、外側ほど段は広くなります。
# そして最後の段は、$|r| = D = 128$ の点線よりかなり手前から始まります。その位置は次の節で求めます。

# %% alt={"en": ["Step plots of the T5 bucket b(r) against the relative position r from −160 to 160. Bidirectional (left): buckets 0–15 for keys before the query, 16–31 after. Causal (right): 0 for r ≥ 0, all 32 buckets before. Steps widen away from 0."], "ja": ["相対位置 r（−160〜160）に対する T5 のバケット b(r) の階段グラフ。左の双方向ではクエリより前のキーがバケット 0〜15、後ろが 16〜31。右の因果的な設定では r ≥ 0 はすべて 0 で、32 個すべてが前のキーに使われます。段は 0 から離れるほど広がります。"]}
r_plot = torch.arange(-160, 161)
fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.2), sharey=True)
for ax, bidirectional, title in zip(
    axes, (True, False), ("$n = |r|$", r"$n = \max(-r,\, 0)$"), strict=True
):
    b = t5_relative_position_bucket(r_plot, bidirectional=bidirectional)
    ax.step(r_plot, b, where="mid", lw=1.2)
    for x in (-128, 128):
        ax.axvline(x, color="0.5", lw=0.8, ls=":")
    ax.set(xlabel="$r = j - i$", title=title, xticks=[-128, -64, 0, 64, 128])
axes[0].set(ylabel="$b(r)$", yticks=[0, 8, 16, 24, 31])
plt.show()

# %% [markdown] lang="en"
# ## The buckets widen geometrically
#
# Where does each logarithmic bucket begin? The floor of a number is at least $t$ exactly
# when the number is at least $t$, and the logarithm is increasing, so for
# $t = 0, 1, \dots, S - E - 1$:
# $$\hat b(n) \ge E + t \iff n \ge e_t, \qquad e_t = E\left(\frac{D}{E}\right)^{t/(S-E)}$$
# For $t < S - E - 1$, bucket $E + t$ holds the integers from $\lceil e_t \rceil$ to
# $\lceil e_{t+1} \rceil - 1$.
# Consecutive edges have the constant ratio
# $$\frac{e_{t+1}}{e_t} = \left(\frac{D}{E}\right)^{1/(S-E)}$$
# so the edges form a geometric progression, and so, up to rounding, do the widths. With
# the defaults, the bidirectional ratio is $(128/8)^{1/8} = \sqrt{2}$, that is
# $e_t = 8 \cdot 2^{t/2}$, and the causal ratio is $(128/16)^{1/16} = 8^{1/16}$, about
# $1.1388$.
#
# The last edge is worth a look. At $e_{S-E} = D$ the unclipped formula would reach bucket
# $S$, so the clip acts exactly on $n \ge D$. But the last bucket $S - 1$ begins one ratio
# earlier, at
# $$e_{S-E-1} = D\left(\frac{E}{D}\right)^{1/(S-E)}$$
# which is $128/\sqrt{2} \approx 90.51$ in the bidirectional setting and about $112.40$ in
# the causal one. The table printed below lists the distances in each bucket; the check
# compares the first distance of every bucket with $\lceil e_t \rceil$.

# %% [markdown] lang="ja"
# ## バケットは等比的に広がる
#
# 各対数バケットはどこから始まるのでしょうか。
# 床関数の値が $t$ 以上になるのは、元の数が $t$ 以上のときだけです。また対数は増加関数です。
# したがって $t = 0, 1, \dots, S - E - 1$ について次が成り立ちます。
# $$\hat b(n) \ge E + t \iff n \ge e_t, \qquad e_t = E\left(\frac{D}{E}\right)^{t/(S-E)}$$
# $t < S - E - 1$ なら、バケット $E + t$ には $\lceil e_t \rceil$ から $\lceil e_{t+1} \rceil - 1$ までの整数が入ります。
# 隣り合う境目の比は一定です。
# $$\frac{e_{t+1}}{e_t} = \left(\frac{D}{E}\right)^{1/(S-E)}$$
# 境目は等比数列をなし、丸めを除けば幅も等比数列になります。
# 既定値では、双方向の比は $(128/8)^{1/8} = \sqrt{2}$、つまり $e_t = 8 \cdot 2^{t/2}$ です。
# 因果的な設定の比は $(128/16)^{1/16} = 8^{1/16}$ で、約 $1.1388$ です。
#
# 最後の境目は詳しく見ておく価値があります。$e_{S-E} = D$ で、クリップしなければ式はバケット $S$ に達します。
# つまりクリップが効くのはちょうど $n \ge D$ です。
# ところが最後のバケット $S - 1$ は、公比 1 回分手前の
# $$e_{S-E-1} = D\left(\frac{E}{D}\right)^{1/(S-E)}$$
# から始まります。双方向では $128/\sqrt{2} \approx 90.51$、因果的では約 $112.40$ です。
# 下の表は各バケットに入る距離の一覧です。
# 確認のコードでは、各バケットの最初の距離を $\lceil e_t \rceil$ と比べます。

# %%
n = torch.arange(0, 2001)
for bidirectional, side in ((True, 16), (False, 32)):
    E, D = side // 2, 128
    b_hat = t5_relative_position_bucket(-n, bidirectional=bidirectional)  # keys before the query
    starts = [int(n[b_hat == bucket].min()) for bucket in range(E, side)]
    edges = [math.ceil(E * (D / E) ** (t / (side - E))) for t in range(side - E)]
    assert starts == edges
    last_edge = D * (E / D) ** (1 / (side - E))  # e_(S-E-1), where the last bucket starts
    assert int(n[b_hat == side - 1].min()) == math.ceil(last_edge)
    cells = [f"{E + t:2d}: {lo}-{hi - 1}" for t, (lo, hi) in enumerate(pairwise(starts))]
    cells.append(f"{side - 1:2d}: {starts[-1]}-")
    widths = [hi - lo for lo, hi in pairwise(starts)]
    print(f"S = {side}: ratio {(D / E) ** (1 / (side - E)):.4f}, last edge {last_edge:.2f}")
    print(f"  widths {widths}, then the open last bucket")
    for row in range(0, len(cells), 4):
        print("  " + " | ".join(f"{c:13s}" for c in cells[row : row + 4]).rstrip())

# %% [markdown] lang="en"
# In the bidirectional setting the first seven of the eight logarithmic buckets hold 4,
# 4, 7, 9, 14, 18 and 27 distances; the eighth, open-ended, starts at 91. In the causal
# setting the last bucket starts at 113. On a logarithmic axis the geometric edges
# become evenly spaced: the figure draws $\hat b(n)$ for both side sizes together with
# the unrounded value $E + \frac{\ln(n/E)}{\ln(D/E)}(S - E)$ (dashed). The steps follow
# the dashed line from below until the clip at $n = D$ holds them at $S - 1$.

# %% [markdown] lang="ja"
# 双方向の設定では、8 個の対数バケットのうち最初の 7 個に、順に 4、4、7、9、14、18、27 個の距離が入ります。
# 最後のバケットは 91 から始まり、そこから先の距離をすべて受け持ちます。因果的な設定では、最後のバケットは 113 から始まります。
# 対数軸では、等比的な境目が等間隔に並びます。
# 下の図は、両方の片側の大きさについて $\hat b(n)$ を描き、
# 丸める前の値 $E + \frac{\ln(n/E)}{\ln(D/E)}(S - E)$ を破線で重ねたものです。
# 階段は破線のすぐ下をたどり、$n = D$ でクリップされて $S - 1$ にとどまります。

# %% alt={"en": ["Bucket of distance n, log axis from 1 to 1024, for side sizes 16 and 32, the unrounded formula dashed. Steps of one up to n = 8 or 16, then geometrically wider steps just under the dashed line, flat at bucket 15 or 31 from n = 91 or 113."], "ja": ["距離 n（1〜1024、対数軸）に対するバケットを、片側の大きさ 16 と 32 について描き、丸める前の式を破線で重ねた図。n = 8 または 16 までは幅 1 の段、その先は破線のすぐ下で等比的に広がる段となり、n = 91 または 113 から先は最後のバケット 15 または 31 で平らになります。"]}
n_plot = torch.arange(1, 1025)
fig, ax = plt.subplots(figsize=(6.4, 3.4))
for bidirectional, side in ((True, 16), (False, 32)):
    E, D = side // 2, 128
    b_hat = t5_relative_position_bucket(-n_plot, bidirectional=bidirectional)
    (line,) = ax.step(n_plot, b_hat, where="post", lw=1.2, label=f"$S = {side}$")
    smooth = torch.arange(E, 1025).double()
    ax.plot(
        smooth,
        E + torch.log(smooth / E) / math.log(D / E) * (side - E),
        "--",
        lw=0.8,
        color=line.get_color(),
    )
ax.axvline(128, color="0.5", lw=0.8, ls=":")
ax.set(xscale="log", xlabel="$n$", ylabel=r"$\hat b(n)$", ylim=(0, 40), yticks=[0, 8, 15, 31])
ax.set_xticks([1, 8, 16, 128, 1024], ["$1$", "$8$", "$16$", "$128$", "$1024$"])
ax.minorticks_off()
ax.legend(loc="upper left")
plt.show()

# %% [markdown] lang="en"
# ## What the model cannot tell apart
#
# Every distance $n \ge D$ lands in the last bucket of its side, however large: the clip
# guarantees it, and the cell checks it for distances up to $10^6$. The previous section
# showed more: the last bucket starts below $D$, so a bidirectional T5 head gives the
# same bias to a key 91 positions away and to one 10000 positions away (113 in the
# causal setting). Beyond that distance the bias carries no information about how far a
# key is, only on which side of the query it lies.
#
# There is a good side too. The bias is defined at every length: there is no table of
# positions to run out of, which is the "more graceful generalization to longer
# sequences" that the comment in Mesh TensorFlow's code hopes for. A query at the end of
# 5000 keys gets a bias for each of them, and all but the nearest 91 share one value.

# %% [markdown] lang="ja"
# ## モデルが区別できないもの
#
# $n \ge D$ の距離は、どれほど大きくても、その側の最後のバケットに入ります。
# クリップがそれを保証しており、次のセルでは $10^6$ までの距離で確かめます。
# 前の節で見たことは、これよりさらに踏み込んでいます。最後のバケットは $D$ より手前から始まるので、
# 双方向の T5 のヘッドは、91 位置先のキーにも 10000 位置先のキーにも同じバイアスを与えます
# （因果的な設定では 113）。この距離より先では、バイアスはキーがどれだけ遠いかを何も伝えず、
# クエリのどちら側にあるかだけを伝えます。
#
# 良い面もあります。バイアスはどんな長さでも定義されます。使い切ってしまう位置の表がないからです。
# Mesh TensorFlow のコードのコメントが期待している「more graceful generalization to longer sequences」（より長い系列へのより穏やかな汎化）とは、このことです。
# 5000 個のキーの末尾にあるクエリは、そのすべてに対してバイアスを受け取りますが、
# 近い 91 個を除いて値はすべて同じです。

# %%
far = torch.cat([torch.arange(128, 2000), torch.tensor([10**4, 10**5, 10**6])])
assert (t5_relative_position_bucket(-far) == 15).all() and (
    t5_relative_position_bucket(far) == 31
).all()
assert (t5_relative_position_bucket(-far, bidirectional=False) == 31).all()
# the last bucket already starts at 91 (bidirectional) and 113 (causal)
assert (t5_relative_position_bucket(-torch.arange(91, 128)) == 15).all()
assert (t5_relative_position_bucket(torch.arange(91, 128)) == 31).all()
assert t5_relative_position_bucket(torch.tensor(-90)) == 14
assert (t5_relative_position_bucket(-torch.arange(113, 128), bidirectional=False) == 31).all()
assert t5_relative_position_bucket(torch.tensor(-112), bidirectional=False) == 30

long_bias = T5RelativeBias(2)
weight = long_bias.relative_attention_bias.weight
with torch.no_grad():
    row = long_bias(1, 5000)[:, 0]  # [H, 5000]: the query at position 4999
assert torch.equal(row[:, : 5000 - 91], weight[15, :, None].detach().expand(2, 5000 - 91))
assert not torch.equal(row[:, 5000 - 91], row[:, 5000 - 92])
print(f"distinct bias values in one head's row of 5000 keys: {row[0].unique().numel()}", end="")

# %% [markdown] lang="en"
# Only 16 distinct values appear in that row: the keys all lie at or before the query, so
# only the first half of the buckets is reached.
#
# ## The learned table of biases
#
# `posenc.T5RelativeBias(n_heads)` holds the table $\beta$ as
# `relative_attention_bias`, an `nn.Embedding(num_buckets, n_heads)` named and shaped as
# in Hugging Face's `T5Attention`, so the weight of a Hugging Face T5 checkpoint can be
# copied in as it is. Its
# `forward(q_len, k_len)` returns a tensor of shape `(n_heads, q_len, k_len)` with entry
# $\beta_{b(j-i),\,h}$ at $(h, i, j)$: the table gathered at the bucket of every
# query-key pair, moved so that the heads come first. The check rebuilds it entry by entry
# with the reference function above.
#
# To see a head's bias, the figure sets the table to a made-up profile that falls by one
# per bucket, $\beta_{b,h} = -(b \bmod 16)$, the same on both sides, and draws head $0$
# for 160 positions. Each colour is then one bucket. The diagonal ($r = 0$, bucket $0$)
# is $0$; bands of constant colour run parallel to it, one position wide near it and wider
# and wider away from it; beyond $|j - i| = 90$ the colour no longer changes.

# %% [markdown] lang="ja"
# この行に現れる値は 16 通りだけです。キーはすべてクエリの位置かそれより前にあるので、
# バケットの前半にしか届かないからです。
#
# ## 学習するバイアスの表
#
# `posenc.T5RelativeBias(n_heads)` は、表 $\beta$ を `relative_attention_bias` として持ちます。
# これは `nn.Embedding(num_buckets, n_heads)` で、名前も形も Hugging Face の `T5Attention` と同じです。
# そのため Hugging Face の T5 のチェックポイントの重みを、そのままコピーできます。
# `forward(q_len, k_len)` は形 `(n_heads, q_len, k_len)` のテンソルを返し、
# その $(h, i, j)$ 成分は $\beta_{b(j-i),\,h}$ です。
# つまり、クエリとキーの各組のバケットで表を引き、ヘッドの軸を先頭に移したものです。
# 確認のコードでは、前に書いた参照関数を使って成分ごとに作り直します。
#
# ヘッドのバイアスを見るために、下の図では表を、バケットごとに 1 ずつ下がる仮の値
# $\beta_{b,h} = -(b \bmod 16)$（両側で同じ）に設定し、160 位置についてヘッド $0$ を描きます。
# すると 1 つの色が 1 つのバケットに対応します。対角線（$r = 0$、バケット $0$）は $0$ です。
# 対角線に平行に同じ色の帯が並び、近くでは幅 1 位置、離れるほど広くなります。
# $|j - i| = 90$ より先では、色はもう変わりません。

# %% alt={"en": ["Heatmap of head 0's T5 bias, queries i down and keys j across, 160 positions, with the table set to −(b mod 16): bands of constant colour parallel to the diagonal, thin near it, wider further out, uniform beyond a distance of 90."], "ja": ["表を −(b mod 16) に設定したときの、ヘッド 0 の T5 バイアスのヒートマップ（縦はクエリ i、横はキー j、160 位置）。対角線に平行な一定色の帯が並び、対角線の近くでは細く、離れるほど広がり、距離 90 を超えると一様になります。"]}
H = 3
module = T5RelativeBias(H)
table = module.relative_attention_bias.weight  # [32, H]
assert table.shape == (32, H)
with torch.no_grad():
    out = module(5, 7)  # queries at positions 2..6 of 7 keys
assert out.shape == (H, 5, 7)
for h in range(H):
    for i in range(5):
        for j in range(7):
            assert out[h, i, j] == table[reference_bucket(j - (i + 2), True), h]

with torch.no_grad():
    table.copy_(-(torch.arange(32) % 16).float()[:, None].expand(32, H))  # beta_{b,h} = -(b mod 16)
    picture = module(160, 160)[0]  # head 0: [160, 160]
expected = [[-(reference_bucket(j - i, True) % 16) for j in range(160)] for i in range(160)]
torch.testing.assert_close(picture, torch.tensor(expected, dtype=torch.float32), rtol=0, atol=0)

fig, ax = plt.subplots(figsize=(4.6, 3.6))
im = ax.imshow(picture.numpy(), cmap="viridis", interpolation="nearest")
ax.set(xlabel="$j$", ylabel="$i$", title=r"$\beta_{b,0} = -(b \ \mathrm{mod}\ 16)$")
ax.grid(False)
fig.colorbar(im, ax=ax, label=r"$\beta_{b(j-i),\,0}$")
plt.show()

# %% [markdown] lang="en"
# ## Queries at the end of the keys: a KV cache
#
# A decoder that generates with a KV cache computes one new query at a time, against all
# the keys so far. `T5RelativeBias` places query $i$ of `q_len` at position
# $i + k_{\mathrm{len}} - q_{\mathrm{len}}$, the end of the keys, so the bias for the
# queries of a step is the last rows of the full bias. Hugging Face's T5 does the same:
# it computes the bias for the whole length and keeps the last rows
# (`position_bias[:, :, -hidden_states.size(1):, :]`). The cell checks the slicing, then
# decodes a causal sequence one token at a time with `posenc.attention` and compares each
# step with the full causal pass.

# %% [markdown] lang="ja"
# ## キーの末尾に並ぶクエリ：KV キャッシュ
#
# KV キャッシュを使って生成するデコーダは、新しいクエリを 1 つずつ、それまでのすべてのキーに対して計算します。
# `T5RelativeBias` は `q_len` 個のうちのクエリ $i$ を位置 $i + k_{\mathrm{len}} - q_{\mathrm{len}}$、
# つまりキーの末尾に置きます。したがって各ステップのクエリのバイアスは、全体のバイアスの最後の行です。
# Hugging Face の T5 も同じことをしています。全長についてバイアスを計算し、最後の行だけを残します
# （`position_bias[:, :, -hidden_states.size(1):, :]`）。
# 次のセルでは、この切り出しを確かめ、続いて `posenc.attention` で因果的な系列を 1 トークンずつ処理し、
# 各ステップを一括の因果的な計算と比べます。

# %%
decoder_bias = T5RelativeBias(H, bidirectional=False)
with torch.no_grad():
    full = decoder_bias(10, 10)  # [H, 10, 10]
    torch.testing.assert_close(decoder_bias(3, 10), full[:, -3:, :], rtol=0, atol=0)

    T = 12
    q, k, v = torch.randn(H, T, d), torch.randn(H, T, d), torch.randn(H, T, d)
    at_once = attention(q, k, v, bias=decoder_bias(T, T), causal=True)  # [H, T, d]
    for t in range(T):  # step t: one query, keys 0..t from the cache
        step = attention(q[:, t : t + 1], k[:, : t + 1], v[:, : t + 1], bias=decoder_bias(1, t + 1))
        torch.testing.assert_close(step, at_once[:, t : t + 1])

# %% [markdown] lang="en"
# In a single decoding step no mask is needed: the only query is the newest token, and
# every cached key lies at or before it.
#
# ## How the libraries differ
#
# **One table per stack, not per layer.** The T5 paper shares the position parameters
# across all layers, with a different bias for each head. In Hugging Face's `T5Stack`,
# only the first block is built with `has_relative_attention_bias=True`; it computes the
# bias (with the attention mask added) and passes it to every later layer. The encoder
# (bidirectional) and the decoder's self-attention (causal) each have their own table; the
# decoder's cross-attention has none. With 32 buckets and 12 heads, as in T5-base, a table
# holds $32 \cdot 12 = 384$ numbers. Hugging Face's UMT5 differs: every self-attention
# layer builds its own table (`UMT5Attention(config, has_relative_attention_bias=True)`).
# `posenc.T5RelativeBias` is one table; sharing it is the caller's choice.
#
# **No $1/\sqrt{d}$.** T5 computes the score as $q_{h,i} \cdot k_{h,j} + \beta_{b(j-i),\,h}$
# without dividing by $\sqrt{d}$. Hugging Face's code says "Mesh TensorFlow initialization to
# avoid scaling before softmax": it draws $W_Q$ with standard deviation
# $(d_{\mathrm{model}}\, d_{kv})^{-1/2}$ and $W_K$ with $d_{\mathrm{model}}^{-1/2}$, so the
# factor $d_{kv}^{-1/2}$ sits in the initial queries instead of in the attention; training
# is then free to change it. To run T5 weights through `posenc.attention`, which divides by
# $\sqrt{d}$, multiply the queries by $\sqrt{d}$. The cell checks that, and that the two
# initialisations give scores of the same size.
#
# **Same buckets, different bookkeeping.**
#
# | | relative position in the code | quotient computed in |
# |---|---|---|
# | Mesh TensorFlow (T5) | `n = -relative_position`, the query minus the key | float32 (`mtf.to_float`) |
# | Hugging Face `T5Attention` | `memory_position - context_position`, the key minus the query | float32 (`.float()`) |
# | flaxformer (T5X) | `n = -relative_position` | float32, with `np.finfo(np.float32).eps` added inside the logarithm |
# | `posenc` | key minus query | float32, reproduced exactly |
#
# The sign conventions differ but the buckets agree: all of them send the keys after the
# query to the second half. Flaxformer's epsilon is a real difference, though a small one.
# It lifts a quotient that float32 rounds to just below a whole number back over the edge:
# with the defaults this changes no bucket from $r = -300$ to $300$, but with $B = 72$ and
# $D = 50$ flaxformer puts $r = -30$ into bucket $27$, where Mesh TensorFlow and Hugging
# Face put it into $26$ (the cell below rebuilds flaxformer's expression in float32 and
# checks both statements). Flaxformer also stores the table as `(num_heads, num_buckets)`,
# the transpose of Hugging Face's `(num_buckets, n_heads)`, which `posenc` follows.
#
# In Hugging Face, T5 v1.1 and Flan-T5 checkpoints load into the same T5 classes, and
# mT5's `MT5Attention` is a copy of `T5Attention`. Their configurations use 32 buckets
# and a maximum distance of 128 (`relative_attention_num_buckets`,
# `relative_attention_max_distance`, the defaults of `T5Config`), so all of them use the
# buckets of this chapter.

# %% [markdown] lang="ja"
# 1 ステップの処理ではマスクはいりません。クエリは最新のトークン 1 つだけで、
# キャッシュされたキーはすべてその位置かそれより前にあるからです。
#
# ## ライブラリによる違い
#
# **表は層ごとではなくスタックごとに 1 つです。** T5 の論文は、位置のパラメータをすべての層で共有し、
# ヘッドごとに異なるバイアスを使います。
# Hugging Face の `T5Stack` では、最初のブロックだけが `has_relative_attention_bias=True` で作られます。
# そのブロックがバイアスを計算し（アテンションマスクを足したうえで）、後続のすべての層に渡します。
# エンコーダ（双方向）とデコーダのセルフアテンション（因果的）はそれぞれ自分の表を持ち、
# デコーダのクロスアテンションは表を持ちません。
# T5-base のようにバケットが 32 個、ヘッドが 12 個なら、表は $32 \cdot 12 = 384$ 個の数です。
# Hugging Face の UMT5 は異なり、セルフアテンションの層がそれぞれ自分の表を作ります
# （`UMT5Attention(config, has_relative_attention_bias=True)`）。
# `posenc.T5RelativeBias` は表 1 つであり、それを共有するかどうかは呼び出す側が決めます。
#
# **$1/\sqrt{d}$ がありません。** T5 はスコアを $q_{h,i} \cdot k_{h,j} + \beta_{b(j-i),\,h}$ として計算し、
# $\sqrt{d}$ で割りません。Hugging Face のコードには
# 「Mesh TensorFlow initialization to avoid scaling before softmax」とあります。
# $W_Q$ を標準偏差 $(d_{\mathrm{model}}\, d_{kv})^{-1/2}$ で、$W_K$ を $d_{\mathrm{model}}^{-1/2}$ で初期化するので、
# 係数 $d_{kv}^{-1/2}$ はアテンションの中ではなく初期のクエリに入っています。その後は学習で自由に変わります。
# $\sqrt{d}$ で割る `posenc.attention` に T5 の重みを通すときは、クエリに $\sqrt{d}$ を掛けてください。
# 次のセルでは、このことと、2 通りの初期化が同じ大きさのスコアを与えることを確かめます。
#
# **バケットは同じで、書き方が違います。**
#
# | | コード中の相対位置 | 商の計算精度 |
# |---|---|---|
# | Mesh TensorFlow (T5) | `n = -relative_position`（クエリの位置からキーの位置を引いた値） | float32（`mtf.to_float`） |
# | Hugging Face の `T5Attention` | `memory_position - context_position`（キーの位置からクエリの位置を引いた値） | float32（`.float()`） |
# | flaxformer (T5X) | `n = -relative_position` | float32、対数の中に `np.finfo(np.float32).eps` を加える |
# | `posenc` | キーの位置からクエリの位置を引いた値 | float32 を正確に再現 |
#
# 符号の取り方は違っても、バケットは一致します。どれも、クエリより後ろのキーを後半に送ります。
# ただし flaxformer の epsilon は、小さいながら本当の違いです。
# float32 で整数のわずかに下に丸められた商を、境目の向こうへ押し戻すからです。
# 既定値では $r = -300$ から $300$ までのどのバケットも変わりません。
# しかし $B = 72$、$D = 50$ では、flaxformer は $r = -30$ をバケット $27$ に入れ、
# Mesh TensorFlow と Hugging Face は $26$ に入れます
# （次のセルで flaxformer の式を float32 で作り直し、両方を確かめます）。
# また flaxformer は表を `(num_heads, num_buckets)` の形で持ちます。
# これは Hugging Face の `(num_buckets, n_heads)` の転置で、`posenc` は Hugging Face に合わせています。
#
# Hugging Face では、T5 v1.1 と Flan-T5 のチェックポイントは同じ T5 のクラスに読み込まれ、
# mT5 の `MT5Attention` は `T5Attention` の複製です。
# それらの設定はバケット 32 個、最大距離 128 です
# （`relative_attention_num_buckets` と `relative_attention_max_distance`、`T5Config` の既定値）。
# したがって、どれもこの章のバケットを使います。

# %%
# one table per stack: 32 buckets x 12 heads
for bidirectional in (True, False):
    stack_table = T5RelativeBias(12, bidirectional=bidirectional)
    assert sum(p.numel() for p in stack_table.parameters()) == 32 * 12 == 384

# T5's unscaled score q.k + beta equals posenc.attention's scaled one with q * sqrt(d)
q, k, v = torch.randn(H, T, d), torch.randn(H, T, d), torch.randn(H, T, d)
with torch.no_grad():
    beta = module(T, T)
t5_style = torch.softmax(q @ k.transpose(-2, -1) + beta, dim=-1) @ v
torch.testing.assert_close(attention(q * math.sqrt(d), k, v, bias=beta), t5_style)

# T5's initialisation (1/sqrt(d_kv) folded into W_Q) vs the usual one with 1/sqrt(d_kv)
d_model, d_kv, tokens = 512, 64, 2048
x = torch.randn(tokens, d_model)
w_k = torch.randn(d_model, d_kv) * d_model**-0.5
w_q_t5 = torch.randn(d_model, d_kv) * (d_model * d_kv) ** -0.5
w_q = torch.randn(d_model, d_kv) * d_model**-0.5
std_t5 = ((x @ w_q_t5) * (x @ w_k)).sum(-1).std()
std_usual = (((x @ w_q) * (x @ w_k)).sum(-1) / math.sqrt(d_kv)).std()
assert abs(std_t5 - 1) < 0.1 and abs(std_usual - 1) < 0.1
print(f"score std at initialisation: T5 {std_t5:.2f}, scaled {std_usual:.2f}")


def flaxformer_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """flaxformer's _relative_position_bucket, rewritten in float32: epsilon inside the log."""
    buckets = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        buckets += (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp_min(0)
    max_exact = num_buckets // 2
    eps = torch.finfo(torch.float32).eps
    log_part = torch.log(n.float() / max_exact + eps) / math.log(max_distance / max_exact)
    if_large = (max_exact + (log_part * (num_buckets - max_exact)).long()).clamp_max(
        num_buckets - 1
    )
    return buckets + torch.where(n < max_exact, n, if_large)


for bidirectional in (True, False):  # defaults: the same buckets
    assert torch.equal(flaxformer_bucket(r, bidirectional), hf_bucket(r, bidirectional))
r30 = torch.tensor([-30])
flax30 = flaxformer_bucket(r30, True, 72, 50).item()
hf30 = hf_bucket(r30, True, 72, 50).item()
assert flax30 == 27 and hf30 == 26
assert t5_relative_position_bucket(r30, num_buckets=72, max_distance=50).item() == hf30
print(f"B = 72, D = 50, r = -30: flaxformer {flax30}, Hugging Face {hf30}", end="")

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Show that the last bucket of a side begins at $\lceil D(E/D)^{1/(S-E)} \rceil$ and
#    check it with `t5_relative_position_bucket` for $B = 64$ and $D = 256$, in both
#    settings.
# 2. A bidirectional T5 encoder reads 512 tokens. How many different bias values can one
#    head give to the keys of the query at position 256? And of the query at position 0?
#    Count them with `T5RelativeBias(1)(512, 512)`.
# 3. Shaw et al. (2018) clip the relative position to $[-k, k]$. With the same 31 used
#    buckets as T5 (so $k = 15$), which distances can each scheme tell apart? Plot both
#    bucket functions over $r = -150, \dots, 150$.
# 4. Search the settings $B \le 64$, $D \le 300$ for distances at which the float64
#    reference and T5's float32 buckets disagree. Using the equation
#    $n^{S-E} E^{t} = D^{t} E^{S-E}$, show that every disagreement you find is a quotient
#    that is exactly a whole number.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. 片側の最後のバケットが $\lceil D(E/D)^{1/(S-E)} \rceil$ から始まることを示してください。
#    また、$B = 64$、$D = 256$ として、双方向と因果的の両方の設定で `t5_relative_position_bucket` を使って確かめてください。
# 2. 双方向の T5 エンコーダが 512 トークンを読みます。位置 256 のクエリに対して、1 つのヘッドは
#    キーに何通りのバイアスの値を与えられるでしょうか。位置 0 のクエリではどうでしょうか。
#    `T5RelativeBias(1)(512, 512)` で数えてください。
# 3. Shaw ら (2018) は相対位置を $[-k, k]$ にクリップします。
#    T5 が実際に使う 31 個と同じ数のバケット（つまり $k = 15$）で、それぞれの方式はどの距離を区別できるでしょうか。
#    $r = -150, \dots, 150$ の範囲で両方のバケット関数を描いてください。
# 4. $B \le 64$、$D \le 300$ の設定を探し、float64 の参照実装と T5 の float32 のバケットが食い違う距離を見つけてください。
#    等式 $n^{S-E} E^{t} = D^{t} E^{S-E}$ を使い、見つかった食い違いがどれも商がちょうど整数になる場合であることを示してください。

# %% [markdown] lang="en"
# ## References
#
# - Raffel, C. et al. (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer*. JMLR 21, §2.1. <https://arxiv.org/abs/1910.10683>
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Mesh TensorFlow, `_relative_position_bucket` in `transformer_layers.py`.
#   <https://github.com/tensorflow/mesh/blob/master/mesh_tensorflow/transformer/transformer_layers.py>
# - Hugging Face transformers, `T5Attention` in `modeling_t5.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/t5/modeling_t5.py>
# - Hugging Face transformers, `UMT5Attention` in `modeling_umt5.py`.
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/umt5/modeling_umt5.py>
# - flaxformer, `RelativePositionBiases` in `relative_position_biases.py`.
#   <https://github.com/google/flaxformer/blob/main/flaxformer/components/relative_position_biases.py>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Raffel, C. et al. (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer*. JMLR 21, §2.1. <https://arxiv.org/abs/1910.10683>
# - Shaw, P., Uszkoreit, J., Vaswani, A. (2018). *Self-Attention with Relative Position
#   Representations*. NAACL 2018. <https://arxiv.org/abs/1803.02155>
# - Mesh TensorFlow、`transformer_layers.py` の `_relative_position_bucket`。
#   <https://github.com/tensorflow/mesh/blob/master/mesh_tensorflow/transformer/transformer_layers.py>
# - Hugging Face transformers、`modeling_t5.py` の `T5Attention`。
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/t5/modeling_t5.py>
# - Hugging Face transformers、`modeling_umt5.py` の `UMT5Attention`。
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/models/umt5/modeling_umt5.py>
# - flaxformer、`relative_position_biases.py` の `RelativePositionBiases`。
#   <https://github.com/google/flaxformer/blob/main/flaxformer/components/relative_position_biases.py>
