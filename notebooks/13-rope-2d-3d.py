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
# # RoPE in two and three dimensions
#
# An image patch has two coordinates, row and column; a video patch has three,
# with time. Absolute tables came first: ViT learns one, MAE fixes it.
# RoPE carries over by turning some pairs of features with the column and the
# others with the row: the score depends on the offset along each axis, a
# larger image needs no resampling, and learned frequencies that mix the axes
# follow diagonals.
# Qwen2-VL's multimodal RoPE ties each frequency of a language model's head to
# time, height or width, so that text, images and video share one sequence;
# Qwen3-VL deals the frequencies out to the axes in turn.
#
# The letters follow the [notation page](../docs/notation.md#positions): $m$ and
# $n$ are the positions of the query and the key, now one per axis; $i$
# numbers the pairs of features, $\theta_i = b^{-2i/d}$; a patch at row $r$
# and column $c$ has the coordinates $(r, c)$.

# %% [markdown] lang="ja"
# # 2 次元・3 次元の RoPE
#
# 画像のパッチには行と列の 2 つの座標が、動画のパッチには時間を加えた 3 つの座標があります。
# 最初に使われたのは絶対位置の表で、ViT はこれを学習し、MAE は固定します。
# RoPE は、次元のペアの一部を列の座標で、残りを行の座標で回転させれば、そのまま 2 次元の格子に拡張できます。
# スコアは軸ごとの相対位置で決まり、画像を大きくしても補間し直す必要がなく、両方の軸を混ぜた周波数を学習すれば斜めの方向も表せます。
# Qwen2-VL のマルチモーダル RoPE は、言語モデルのヘッドの各周波数を時間・高さ・幅のどれかに結び付けて、
# テキスト・画像・動画が 1 つの系列を共有できるようにします。Qwen3-VL は周波数を時間・高さ・幅の軸へ巡回的に割り当てます（MRoPE-Interleave）。
#
# 記号は[記法のページ](../docs/notation.ja.md#positions)に従います。
# $m$ と $n$ はクエリとキーの位置で、ここでは軸ごとに 1 つずつあります。
# $i$ は次元のペアの番号で、$\theta_i = b^{-2i/d}$ です。行 $r$、列 $c$ にあるパッチの座標を $(r, c)$ と書きます。

# %% tags=["setup"]
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import posenc
from posenc import apply_mrope, apply_rope, grid_positions, sinusoidal
from posenc.mrope import mrope_axes
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
f64 = torch.float64

# %% [markdown] lang="en"
# ## Patches on a grid
#
# A vision transformer cuts an image into square
# [patches](../docs/glossary.md#patch) and reads them as a
# sequence, row after row, the column running fastest. `grid_positions(h, w)`
# lists the coordinates $(r, c)$ of the $hw$ patches in that order: patch
# $j$ sits at row $r = \lfloor j / w \rfloor$ and column $c = j \bmod w$.

# %% [markdown] lang="ja"
# ## 格子の上のパッチ
#
# Vision Transformer は画像を正方形の[パッチ](../docs/glossary.ja.md#patch)に切り分け、左上から右へ、1 行読み終えたら次の行へ進む順（行優先の順）で 1 つの系列として読みます。
# `grid_positions(h, w)` は $hw$ 個のパッチの座標 $(r, c)$ をこの順に並べます。
# パッチ $j$ は行 $r = \lfloor j / w \rfloor$、列 $c = j \bmod w$ にあります。

# %%
h, w = 3, 4
rc = grid_positions(h, w)
print(rc)

# %% tags=["check"] summary={"en": "patch j is at row ⌊j/w⌋ and column j mod w, as in Heo et al.'s init_t_xy", "ja": "パッチ j は行 ⌊j/w⌋、列 j mod w にあります（Heo らの init_t_xy と同じ計算）"}
j = torch.arange(h * w)
# Heo et al.'s init_t_xy computes the same: t % end_x and t // end_x
assert torch.equal(rc[0], torch.div(j, w, rounding_mode="floor"))
assert torch.equal(rc[1], j % w)

# %% [markdown] lang="en"
# ## ViT's learned table and a new resolution
#
# ViT (Dosovitskiy et al. 2021) adds a
# [learned positional embedding](../docs/glossary.md#learned-positional-embedding)
# to each patch: a table of $hw + 1$ rows, one per patch and one for the
# class token (chapter
# [*Learned absolute embeddings and scaled sinusoids*](03-learned-embeddings.ipynb)). Fine-tuned
# at a higher resolution, the model sees more patches than the table has
# rows, so the paper interpolates the pretrained embeddings in 2D by their
# location in the image: the $hw$ patch rows, as an $h \times w$ grid, are
# resampled to the new grid $h' \times w'$; the class-token row is copied
# unchanged. The official code interpolates linearly with
# `scipy.ndimage.zoom(..., order=1)`, corners onto corners, so new row $r'$
# reads the old table at
#
# $$r = r' \, \frac{h - 1}{h' - 1}.$$
#
# Bilinear interpolation reproduces any function linear in the coordinates,
# so a table holding its own row and column comes out holding the mapped
# coordinates: from a ViT-B/16's $14 \times 14$ grid at 224 pixels to
# $24 \times 24$ at 384, new row 1 reads old row $13/23 \approx 0.5652$.
# Hugging Face's `ViTEmbeddings.interpolate_pos_encoding` resamples
# differently: bicubic, centres of cells onto centres.

# %% [markdown] lang="ja"
# ## ViT の学習型の表と新しい解像度
#
# ViT（Dosovitskiy ら 2021）は、各パッチに[学習型位置埋め込み](../docs/glossary.ja.md#learned-positional-embedding)を足します。
# パッチごとに 1 行とクラストークンの 1 行、全部で $hw + 1$ 行の表です（[「学習型位置埋め込みとスケール付き正弦波」](03-learned-embeddings.ipynb)の章）。
# 高い解像度でファインチューニングするとパッチの数が表の行数を超えるので、論文は事前学習済みの埋め込みを画像での位置に従って 2 次元で補間します。
# パッチの $hw$ 行を $h \times w$ の格子として $h' \times w'$ に補間し、クラストークンの行はそのまま残します。
# 公式実装は `scipy.ndimage.zoom(..., order=1)` で四隅どうしが一致するように線形補間します。そのため新しい行 $r'$ は古い表の次の位置を読みます。
#
# $$r = r' \, \frac{h - 1}{h' - 1}.$$
#
# 双線形補間は座標の 1 次関数なら正確に再現するので、自分の行と列を値に持つ表を補間すると、写像後の座標がそのまま得られます。
# 224 ピクセルの ViT-B/16 の $14 \times 14$ の格子から 384 ピクセルの $24 \times 24$ に移ると、新しい行 1 は古い行 $13/23 \approx 0.5652$ を読みます。
# Hugging Face の `ViTEmbeddings.interpolate_pos_encoding` は別の方法で補間します。セルの中心どうしを対応させる双三次補間です。

# %%
h, hn = 14, 24  # a 224-pixel ViT-B/16 grid read at 384 pixels
coords = grid_positions(h, h).to(f64)  # (2, 196): row, column
table = coords.T.reshape(h, h, 2).permute(2, 0, 1)[None]  # (1, 2, h, h)
new = F.interpolate(table, size=(hn, hn), mode="bilinear", align_corners=True)
print("new row 1 reads old row", round(new[0, 0, 1, 0].item(), 4))

# %% tags=["check"] summary={"en": "new row r' reads r'(h − 1)/(h' − 1) on both axes", "ja": "新しい格子の座標 r' は、行でも列でも古い座標 r'(h − 1)/(h' − 1) を読みます"}
mapped = torch.arange(hn, dtype=f64) * (h - 1) / (hn - 1)
assert_close(new[0, 0], mapped[:, None].expand(hn, hn))  # rows
assert_close(new[0, 1], mapped[None, :].expand(hn, hn))  # columns
assert math.isclose(new[0, 0, 1, 0].item(), 13 / 23)


# %% [markdown] lang="en"
# ## MAE's fixed 2D table: half the channels per axis
#
# MAE (He et al. 2022) keeps the table fixed: a 1D sine–cosine code of $d/2$
# channels for each axis, the column's first. With $d/4$ frequencies
# $\omega_k = 10000^{-k/(d/4)}$, $k = 0, \dots, d/4 - 1$, the code of a
# coordinate $u$ is all sines, then all cosines (the
# [concatenated layout](../docs/glossary.md#concatenated-layout)):
#
# $$e(u) = \big(\sin(u\omega_0), \dots, \sin(u\omega_{d/4-1}), \cos(u\omega_0), \dots, \cos(u\omega_{d/4-1})\big),$$
#
# $$PE(r, c) = \big(e(c),\ e(r)\big).$$
#
# The halves are separate 1D codes, so the
# [dot product](../docs/glossary.md#dot-product) of two rows of the table is
# a sum of two 1D dot products, and by
# $\sin a \sin b + \cos a \cos b = \cos(a - b)$ each depends only on a
# difference of coordinates:
#
# $$PE(r, c) \cdot PE(r', c') = \sum_{k} \cos\big((c - c')\,\omega_k\big) + \sum_{k} \cos\big((r - r')\,\omega_k\big).$$

# %% [markdown] lang="ja"
# ## MAE の固定 2 次元表：次元の半分ずつを各軸に
#
# MAE（He ら 2022）は表を固定します。各軸について $d/2$ 次元からなる 1 次元の正弦・余弦の[符号](../docs/glossary.ja.md#code)を作り、列の符号を先にして連結します。
# $d/4$ 個の周波数 $\omega_k = 10000^{-k/(d/4)}$（$k = 0, \dots, d/4 - 1$）を使い、
# 座標 $u$ の符号は正弦をすべて並べてから余弦を並べます（[連結配置](../docs/glossary.ja.md#concatenated-layout)）。
#
# $$e(u) = \big(\sin(u\omega_0), \dots, \sin(u\omega_{d/4-1}), \cos(u\omega_0), \dots, \cos(u\omega_{d/4-1})\big),$$
#
# $$PE(r, c) = \big(e(c),\ e(r)\big).$$
#
# 前半と後半はそれぞれ独立した 1 次元の符号なので、表の 2 つの行の[内積](../docs/glossary.ja.md#dot-product)は 1 次元の内積 2 つの和です。
# $\sin a \sin b + \cos a \cos b = \cos(a - b)$ により、どちらも座標の差だけで決まります。
#
# $$PE(r, c) \cdot PE(r', c') = \sum_{k} \cos\big((c - c')\,\omega_k\big) + \sum_{k} \cos\big((r - r')\,\omega_k\big).$$


# %%
def mae_table(rc, d):  # (column code, row code), each of d/2 channels
    col = sinusoidal(rc[1], d // 2, layout="concat", dtype=f64)
    row = sinusoidal(rc[0], d // 2, layout="concat", dtype=f64)
    return torch.cat([col, row], dim=-1)


pe = mae_table(grid_positions(3, 3), 8)
print("patch 5 = (row 1, column 2):", pe[5, :2].tolist(), "= sin 2, sin 0.02")

# %% tags=["check"] summary={"en": "the table matches transformers 5.24.0 (3 × 3, d = 8), and its dot products are the sums of cosines", "ja": "表は transformers 5.24.0 と一致し（3 × 3、d = 8）、内積は余弦の和です"}
# transformers 5.24.0, torch 2.13.0: ViTMAEEmbeddings(ViTMAEConfig(
#   hidden_size=8, image_size=6, patch_size=2)), initialize_weights(),
#   position_embeddings[0, 1:] (the CLS row dropped), rows 5 and 7
hf_patch5 = [0.9092974066734314, 0.019998665899038315, -0.416146844625473,
             0.9998000264167786, 0.8414709568023682, 0.009999833069741726,
             0.5403022766113281, 0.9999499917030334]  # fmt: skip
hf_patch7 = [0.8414709568023682, 0.009999833069741726, 0.5403022766113281,
             0.9999499917030334, 0.9092974066734314, 0.019998665899038315,
             -0.416146844625473, 0.9998000264167786]  # fmt: skip
assert_close(pe[5], torch.tensor(hf_patch5, dtype=f64), atol=1e-7, rtol=0)
assert_close(pe[7], torch.tensor(hf_patch7, dtype=f64), atol=1e-7, rtol=0)

d, side = 64, 8
rc = grid_positions(side, side)
pe = mae_table(rc, d)
omega = 10000.0 ** (-torch.arange(d // 4, dtype=f64) / (d // 4))
dr = (rc[0][:, None] - rc[0][None, :]).to(f64)
dc = (rc[1][:, None] - rc[1][None, :]).to(f64)
rhs = (dc[..., None] * omega).cos().sum(-1) + (dr[..., None] * omega).cos().sum(
    -1
)
assert_close(pe @ pe.T, rhs)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: why the column comes first.** MAE's
# `get_2d_sincos_pos_embed` calls the first half `emb_h`, but computes it from
# `np.meshgrid(grid_w, grid_h)`, whose first output varies along the columns;
# the comment "here w goes first" says so, and Hugging Face's ViT-MAE notes
# the swap and keeps it for the pretrained weights.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：列が先に来る理由**
#
# MAE の `get_2d_sincos_pos_embed` は前半を `emb_h` と呼んでいますが、前半は `np.meshgrid(grid_w, grid_h)` の最初の出力から計算され、
# この出力は列番号とともに（横方向に）変わります。
# コメントの「here w goes first」もそう述べており、Hugging Face の ViT-MAE はこの入れ替わりを注記したうえで、
# 事前学習済みの重みに合わせてそのまま残しています。

# %% [markdown] lang="en"
# ## Axial 2D RoPE
#
# RoPE (chapter [*Rotary position embedding*](08-rope.ipynb)) rotates pair $i$
# of a query at position $m$ by $m\theta_i$ and of a key at $n$ by
# $n\theta_i$, so that the score depends on $m - n$ only. Heo et al.'s
# RoPE-Axial, an [axial RoPE](../docs/glossary.md#axial-rope), gives half of
# the pairs to each axis: pairs $0, \dots, d/4 - 1$ turn with the column,
# pairs $d/4, \dots, d/2 - 1$ with the row, both with the frequencies
# $\theta_k = 100^{-4k/d}$, $k < d/4$: base 100, not 10000. Since $100^{-2k/(d/2)} = 100^{-4k/d}$, RoPE-Axial is two 1D RoPEs
# of size $d/2$ and base 100 side by side, on neighbouring pairs of features
# (the [interleaved layout](../docs/glossary.md#interleaved-layout)):
#
# $$\mathrm{Axial}(x, r, c) = \big(\mathrm{RoPE}_{100}(x_{:d/2}, c),\ \mathrm{RoPE}_{100}(x_{d/2:}, r)\big).$$
#
# Each half is a 1D RoPE, so the score is a term of the column offset plus a
# term of the row offset:
#
# $$s(\Delta r, \Delta c) = f(\Delta c) + g(\Delta r), \qquad \Delta r = r_n - r_m,\ \Delta c = c_n - c_m.$$
#
# The [relative property](../docs/glossary.md#relative-position) therefore
# holds in each axis: moving both tokens by the same number of rows, or of
# columns, keeps the score, while moving one axis of the key alone changes
# it. And in the mixed difference the $f$ terms and the $g$ terms cancel in
# pairs:
#
# $$s(\Delta r + 1, \Delta c + 1) - s(\Delta r + 1, \Delta c) - s(\Delta r, \Delta c + 1) + s(\Delta r, \Delta c) = 0.$$

# %% [markdown] lang="ja"
# ## 軸ごとの 2 次元 RoPE
#
# RoPE（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章）は、位置 $m$ のクエリと位置 $n$ のキーのペア $i$ を $m\theta_i$ と $n\theta_i$ だけ回し、スコアが $m - n$ だけで決まるようにします。
# Heo らの RoPE-Axial（[軸ごとの RoPE](../docs/glossary.ja.md#axial-rope)）は、ペアの半分ずつを各軸に割り当てます。
# ペア $0, \dots, d/4 - 1$ は列で、ペア $d/4, \dots, d/2 - 1$ は行で回り、どちらも周波数 $\theta_k = 100^{-4k/d}$（$k < d/4$）を使います。底は 10000 ではなく 100 です。
# $100^{-2k/(d/2)} = 100^{-4k/d}$ なので、RoPE-Axial は次元数 $d/2$、底 100 の 1 次元 RoPE を 2 つ並べたもので、
# 隣り合う次元をペアにします（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）。
#
# $$\mathrm{Axial}(x, r, c) = \big(\mathrm{RoPE}_{100}(x_{:d/2}, c),\ \mathrm{RoPE}_{100}(x_{d/2:}, r)\big).$$
#
# それぞれの半分は 1 次元の RoPE なので、スコアは列方向の相対位置で決まる項と行方向の相対位置で決まる項の和です。
#
# $$s(\Delta r, \Delta c) = f(\Delta c) + g(\Delta r), \qquad \Delta r = r_n - r_m,\ \Delta c = c_n - c_m.$$
#
# したがって[相対位置](../docs/glossary.ja.md#relative-position)の性質が軸ごとに成り立ち、2 つのトークンを同じ行数、または同じ列数だけ動かしてもスコアは変わりませんが、キーの 1 つの軸だけを動かすと変わります。
# 混合差分では、$f$ の項どうしと $g$ の項どうしが打ち消し合います。
#
# $$s(\Delta r + 1, \Delta c + 1) - s(\Delta r + 1, \Delta c) - s(\Delta r, \Delta c + 1) + s(\Delta r, \Delta c) = 0.$$


# %%
def axial(x, r, c, base=100.0):  # the column turns x[:d/2], the row x[d/2:]
    kw = dict(base=base, layout="interleaved")
    half = x.shape[-1] // 2
    by_col = apply_rope(x[..., :half], c, **kw)
    return torch.cat([by_col, apply_rope(x[..., half:], r, **kw)], dim=-1)


d = 64  # features per head
q, k = torch.randn(2, d, dtype=f64)


def score(rotate, at_q, at_k):  # q . k, turned at (r, c) = at_q and at_k
    def turn(v, r, c):
        return rotate(v[None], torch.tensor([r]), torch.tensor([c]))[0]

    return (turn(q, *at_q) @ turn(k, *at_k)).item()


def mixed_difference(rotate):  # the query at (0, 0), the key near (2, 1)
    s = [score(rotate, (0, 0), at) for at in [(3, 2), (3, 1), (2, 2), (2, 1)]]
    return s[0] - s[1] - s[2] + s[3]


# %% tags=["check"] summary={"en": "axial equals Heo et al.'s code; the score is relative per axis, with mixed difference 0", "ja": "axial は Heo らのコードと一致し、スコアは軸ごとの相対位置だけで決まり、混合差分は 0 です"}
def heo_axial(x, r, c, base=100.0):
    """Heo et al.'s compute_axial_cis and apply_rotary_emb, rebuilt."""
    d = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, d, 4)[: d // 4].to(f64) / d)
    angles = torch.cat([c[:, None] * freqs, r[:, None] * freqs], dim=-1)
    z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return out.flatten(-2)


rc = grid_positions(6, 6)
x = torch.randn(36, d, dtype=f64)
assert_close(axial(x, rc[0], rc[1]), heo_axial(x, rc[0], rc[1]))

s = score(axial, (2, 3), (5, 1))
assert math.isclose(s, score(axial, (2 + 7, 3), (5 + 7, 1)), abs_tol=1e-9)
assert math.isclose(s, score(axial, (2, 3 - 4), (5, 1 - 4)), abs_tol=1e-9)
assert abs(s - score(axial, (2, 3), (5 + 1, 1))) > 1e-3  # one axis of the key
assert abs(mixed_difference(axial)) < 1e-9

# %% [markdown] lang="en"
# ## Diagonals: RoPE-Mixed
#
# In RoPE-Axial every pair turns along one axis: its phase is $\theta_i c$ or
# $\theta_i r$. Heo et al. point out that such frequencies cannot represent
# diagonal directions; their mixed variant gives every pair a frequency for
# each axis,
#
# $$\phi_i(r, c) = \theta^{x}_i\, c + \theta^{y}_i\, r,$$
#
# a plane wave whose direction $(\theta^{x}_i, \theta^{y}_i)$ can point
# anywhere, learned per head and per layer. Their code initialises the
# magnitudes to $10^{-4k/d}$ and picks, per head, a random direction
# $\alpha$: the first half of the pairs along $\alpha$, the second along
# $\alpha + \pi/2$.
#
# The rotations still commute, so the score still depends only on
# $(\Delta r, \Delta c)$: the relative property survives. But a pair with
# both $\theta^{x}_i$ and $\theta^{y}_i$ nonzero contributes
# $\cos(\theta^{x}_i \Delta c + \theta^{y}_i \Delta r + \ldots)$, not a sum
# of a function of $\Delta c$ and one of $\Delta r$, so the mixed difference
# is no longer 0.
#
# At initialisation, though, nothing diagonal is learned yet: pairs
# $k < d/4$ turn with $u = c\cos\alpha + r\sin\alpha$, the others with
# $v = -c\sin\alpha + r\cos\alpha$, so RoPE-Mixed starts as RoPE-Axial of
# base 10 in coordinates rotated by $\alpha$. In the figure ($q = k$, so the
# score peaks at $(0, 0)$) the axial score is a cross aligned with the axes;
# the mixed one is the same kind of cross, turned by $\alpha$, with a
# different spectrum. What "mixed" adds is that training may move each
# pair's direction.

# %% [markdown] lang="ja"
# ## 斜めの方向：RoPE-Mixed
#
# RoPE-Axial では、どのペアも 1 つの軸に沿ってしか回らず、位相は $\theta_i c$ か $\theta_i r$ です。
# Heo らはこれでは斜めの方向を表せないと指摘し、混合版（RoPE-Mixed）ではペアごとに両方の軸の周波数を持たせます。
#
# $$\phi_i(r, c) = \theta^{x}_i\, c + \theta^{y}_i\, r,$$
#
# これは向き $(\theta^{x}_i, \theta^{y}_i)$ が自由な平面波で、周波数はヘッドごと、層ごとに学習します。
# Heo らのコードは大きさを $10^{-4k/d}$ とし、ヘッドごとにランダムな向き $\alpha$ を選んで、ペアの前半を $\alpha$、後半を $\alpha + \pi/2$ の向きに初期化します。
#
# 回転どうしは可換なので、スコアはやはり $(\Delta r, \Delta c)$ だけで決まり、相対位置の性質は保たれます。
# ただし $\theta^{x}_i$ と $\theta^{y}_i$ がどちらも 0 でないペアの項 $\cos(\theta^{x}_i \Delta c + \theta^{y}_i \Delta r + \ldots)$ は
# $\Delta c$ の関数と $\Delta r$ の関数の和にならず、混合差分は 0 になりません。
#
# もっとも、初期化の時点では斜めの構造はまだ学習されていません。
# ペア $k < d/4$ は $u = c\cos\alpha + r\sin\alpha$ で、残りは $v = -c\sin\alpha + r\cos\alpha$ で回るので、初期の RoPE-Mixed は座標を $\alpha$ だけ回した底 10 の RoPE-Axial です。
# 図では（$q = k$ なので $(0, 0)$ で最大）、RoPE-Axial のスコアは軸にそろった十字形を描き、RoPE-Mixed のスコアはそれを $\alpha$ だけ回した十字形を描きます。底が 100 ではなく 10 なので、周波数の並びも異なります。
# RoPE-Mixed が加えるのは、学習で各ペアの向きを動かせることです。


# %%
# Heo et al.'s init_random_2d_freqs for one head: magnitudes 10^(-4k/d), the
# first half of the pairs along a random angle a, the second along a + pi/2
mag = 1.0 / 10.0 ** (torch.arange(0, d, 4)[: d // 4].to(f64) / d)
gen = torch.Generator().manual_seed(1)
a = torch.rand(1, generator=gen, dtype=f64) * 2 * math.pi
fx = torch.cat([mag * torch.cos(a), mag * torch.cos(math.pi / 2 + a)])
fy = torch.cat([mag * torch.sin(a), mag * torch.sin(math.pi / 2 + a)])


def mixed(x, r, c):  # pair i turned by theta_x c + theta_y r
    angles = c[:, None].to(f64) * fx + r[:, None].to(f64) * fy
    z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return out.flatten(-2)


print(f"mixed difference: axial {abs(mixed_difference(axial)):.4f}", end=", ")
print(f"RoPE-Mixed {mixed_difference(mixed):.4f}")


# %% tags=["check"] summary={"en": "mixed() equals Heo et al.'s compute_mixed_cis; at initialisation it is RoPE-Axial of base 10 at coordinates rotated by α; its mixed difference is not 0", "ja": "mixed() は Heo らの compute_mixed_cis と一致し、初期化の時点では座標を α だけ回した底 10 の RoPE-Axial で、混合差分は 0 ではありません"}
def heo_mixed(x, r, c):
    """Heo et al.'s compute_mixed_cis, one head: t_x the column, t_y the row."""
    freqs = torch.stack([fx, fy])  # (2, d/2)
    phase = (
        c.to(f64)[:, None] @ freqs[0][None]
        + r.to(f64)[:, None] @ freqs[1][None]
    )
    z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(
        z * torch.polar(torch.ones_like(phase), phase)
    ).flatten(-2)


rc = grid_positions(5, 7)
x = torch.randn(35, d, dtype=f64)
assert_close(mixed(x, rc[0], rc[1]), heo_mixed(x, rc[0], rc[1]))
u = rc[1] * torch.cos(a) + rc[0] * torch.sin(a)
v = -rc[1] * torch.sin(a) + rc[0] * torch.cos(a)
rotated = axial(x, v, u, base=10.0)  # float32 angles inside apply_rope
assert_close(mixed(x, rc[0], rc[1]), rotated, atol=1e-6, rtol=0)
assert abs(mixed_difference(mixed)) > 1e-3


# %% tags=["figure"] alt={"en": ["Two heatmaps of the score of q = k against the offset: rows Δr from −15 to 15 down, columns Δc across, d = 64. Left, RoPE-Axial: a cross-shaped pattern aligned with the axes, peak at the centre. Right, RoPE-Mixed with Heo et al.'s initial frequencies: the same kind of cross, turned by the random angle α, with oblique ridges through the centre."], "ja": ["d = 64 で q = k としたスコアを相対位置に対して描いた 2 枚のヒートマップです（縦は Δr、横は Δc、どちらも −15〜15）。左の RoPE-Axial は軸にそろった十字形の模様で、中央が最大です。右は Heo らの初期値の周波数による RoPE-Mixed で、同じ種類の十字形がランダムな角度 α だけ回っていて、中央を通る斜めの尾根が見えます。"]}
span = torch.arange(-15, 16)
dr_grid, dc_grid = torch.meshgrid(span, span, indexing="ij")
dr_flat, dc_flat = dr_grid.reshape(-1), dc_grid.reshape(-1)
zeros = torch.zeros_like(dr_flat)
v = torch.randn(d, dtype=f64).expand(len(dr_flat), d)
ax_q = axial(v, zeros, zeros)
ax_k = axial(v, dr_flat, dc_flat)
mx_q = mixed(v, zeros, zeros)
mx_k = mixed(v, dr_flat, dc_flat)
maps = [
    (ax_q * ax_k).sum(-1).reshape(31, 31),
    (mx_q * mx_k).sum(-1).reshape(31, 31),
]
fig, axes = plt.subplots(1, 2, figsize=(8, 2.5))
for ax, m, title in zip(axes, maps, ["RoPE-Axial", "RoPE-Mixed"], strict=True):
    im = ax.imshow(m, cmap="RdBu_r", extent=(-15.5, 15.5, 15.5, -15.5))
    ax.set_title(title)
    ax.set_xlabel(r"$\Delta c$")
    ax.set_ylabel(r"$\Delta r$")
    fig.colorbar(im, ax=ax, shrink=0.85)
plt.show()

# %% [markdown] lang="en"
# ## A larger image without resampling
#
# Heo et al.'s code rotates only the patch tokens; the class token, with no
# place on the grid, is left unrotated. At a new resolution nothing is
# resampled: the angles are recomputed for the larger grid, so the patches
# keep integer coordinates and the model meets offsets it never saw in
# training (with 16-pixel patches, 14 × 14 at 224 pixels, 24 × 24 at 384).
# This is the setting of the result the paper's abstract puts first: RoPE
# keeps its accuracy as the inference resolution grows, though not in every
# model ([the note below](#deeper-the-accuracy-table)).

# %% [markdown] lang="ja"
# ## 解像度を上げても補間し直さない
#
# Heo らのコードはパッチのトークンだけを回転させ、格子の上に位置を持たないクラストークンは回転させません。
# 解像度が変わっても何も補間し直さず、大きくなった格子について角度を計算し直します。
# パッチの座標は整数のままで、モデルは学習時に現れなかった大きな相対位置を扱います（16 ピクセルのパッチなら 224 ピクセルで 14 × 14、384 ピクセルで 24 × 24）。
# 論文の要旨が最初に挙げる「推論時の解像度を上げても RoPE は精度を保つ」という趣旨の結果は、この設定で得られたものです。ただし、すべてのモデルでそうなるわけではありません（下の[「さらに詳しく」](#deeper-正解率の表)）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the accuracy table.** For DeiT-III Base in
# the repository's "DeiT-III (400 epochs)" table (ImageNet-1k top-1, %),
# from 224 to 384 pixels the learned
# table loses accuracy, 83.4 to 82.8, while RoPE-Axial gains, 83.6 to 83.9,
# and RoPE-Mixed too, 83.8 to 84.4. DeiT-III Large agrees, but not every
# model does: on DeiT-III Small, RoPE-Axial drops from 80.9 to 80.0 at 384
# pixels (RoPE-Mixed gains).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：正解率の表**
#
# リポジトリの「DeiT-III (400 epochs)」の表（ImageNet-1k の top-1 正解率、%）で DeiT-III Base を見ます。
# 解像度を 224 ピクセルから 384 ピクセルに上げると、学習型の表は 83.4 から 82.8 に下がります。一方、RoPE-Axial は 83.6 から 83.9、RoPE-Mixed は 83.8 から 84.4 へ上がります。
# DeiT-III Large でも同じ傾向ですが、すべてのモデルがそうなるわけではありません。
# DeiT-III Small では 384 ピクセルで RoPE-Axial が 80.9 から 80.0 に下がります（RoPE-Mixed は上がります）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: axial RoPE in today's vision encoders.**
# Several vision encoders of current multimodal models use axial 2D RoPE,
# each with its own layout; others, such as SigLIP's, keep a learned table. Qwen2-VL's encoder
# (`Qwen2VLVisionRotaryEmbedding`, transformers 5.24.0) takes the base
# $b = 10^4$ and the same $d/4$ frequencies $\theta_k = b^{-4k/d}$ for both
# axes, row first, and applies one rotation in the half layout to the whole
# head: pair $(j, j + d/2)$ turns with the row for $j < d/4$ and with the
# column for $d/4 \le j < d/2$. So the features $0, \dots, d/4 - 1$ and
# $d/2, \dots, 3d/4 - 1$ form a 1D RoPE of size $d/2$ over the row, and the
# others one over the column. Gemma 4's encoder
# (`Gemma4VisionRotaryEmbedding`, `rope_type="axial"`) takes Heo et al.'s
# base 100 and rotates the first half of the head with the first coordinate
# of `pixel_position_ids`, which its image processor fills with the column,
# and the second half with the row: RoPE-Axial in the half layout. Some
# encoders keep a learned table as well: Gemma 4 sums one table per axis,
# and Qwen3-VL's encoder resamples a $48 \times 48$ table bilinearly to each
# image, next to its 2D RoPE.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：現在の画像エンコーダでの軸ごとの RoPE**
#
# 現在のマルチモーダルモデルでは、いくつかの画像エンコーダが軸ごとの 2 次元 RoPE を使っています。次元の並べ方はモデルごとに違います。SigLIP のエンコーダのように、学習型の表を使うものもあります。
# Qwen2-VL のエンコーダ（transformers 5.24.0 の `Qwen2VLVisionRotaryEmbedding`）は、底 $b = 10^4$ で、
# 両方の軸に同じ $d/4$ 個の周波数 $\theta_k = b^{-4k/d}$ を使い、行を先に置きます。
# 回転はヘッド全体に半分割配置で 1 回掛けるだけで、ペア $(j, j + d/2)$ は $j < d/4$ なら行で、$d/4 \le j < d/2$ なら列で回転します。
# つまり次元 $0, \dots, d/4 - 1$ と $d/2, \dots, 3d/4 - 1$ が行についての次元数 $d/2$ の 1 次元 RoPE になり、残りの次元が列についての 1 次元 RoPE になります。
# Gemma 4 のエンコーダ（`Gemma4VisionRotaryEmbedding`、`rope_type="axial"`）は Heo らと同じ底 100 を使います。
# ヘッドの前半は `pixel_position_ids` の最初の座標で、後半は行で回転させます。
# 画像の前処理はこの最初の座標に列を入れるので、これは半分割配置の RoPE-Axial です。
# 学習型の表を併用するエンコーダもあります。Gemma 4 は軸ごとの表を 1 つずつ持って足し合わせます。
# Qwen3-VL のエンコーダは 2 次元 RoPE に加えて $48 \times 48$ の表を持ち、画像ごとに双線形補間して使います。

# %% tags=["deeper", "check"] summary={"en": "both rotations, built from apply_rope, give the outputs that transformers 5.24.0 prints for two patches and a head of d = 8", "ja": "apply_rope から組み立てた両方の回転は、2 つのパッチと d = 8 のヘッドについて transformers 5.24.0 が出力する値と一致します"}
# transformers 5.24.0: Qwen2VLVisionRotaryEmbedding(Qwen2VLVisionConfig(
#   embed_dim=16, num_heads=2)) at position_ids [[2, 5], [3, 1]] ((row,
#   column) per patch), then apply_rotary_pos_emb_vision on
#   q = torch.linspace(-1, 1, 8); rounded to 6 decimals
hf_qwen2_vit = [
    [0.286247, -0.722714, 0.563376, -0.192658,
     -0.968747, 0.414201, 0.613583, 0.991610],
    [0.969832, -0.726820, -0.832609, -0.152850,
     -0.282547, 0.406953, 0.025300, 0.998521]]  # fmt: skip
# Gemma4VisionRotaryEmbedding(Gemma4VisionConfig(hidden_size=16,
#   num_attention_heads=2, head_dim=8)) at pixel_position_ids [[[5, 2],
#   [1, 3]]] ((column, row)), then apply_multidimensional_rope on the same q
hf_gemma4_vit = [
    [-0.694630, -0.558355, 0.837355, -0.467816,
     -0.708948, 0.221359, -0.167348, 1.065211],
    [-0.179672, -0.696455, -1.073029, -0.213453,
     -0.242227, 0.113910, -0.686978, 1.081988]]  # fmt: skip
d_vit, half = 8, 4
v = torch.linspace(-1, 1, d_vit, dtype=f64).expand(2, d_vit)
r, c = torch.tensor([2, 3]), torch.tensor([5, 1])
quarter = torch.arange(d_vit // 4)
row_feats = torch.cat([quarter, quarter + half])  # pairs (j, j + d/2), j < d/4
col_feats = row_feats + d_vit // 4
qwen2_vit = torch.empty_like(v)
qwen2_vit[:, row_feats] = apply_rope(v[:, row_feats], r, base=1e4)
qwen2_vit[:, col_feats] = apply_rope(v[:, col_feats], c, base=1e4)
gemma4_vit = torch.cat(
    [
        apply_rope(v[:, :half], c, base=100.0),
        apply_rope(v[:, half:], r, base=100.0),
    ],
    dim=-1,
)
for ours, hf in [(qwen2_vit, hf_qwen2_vit), (gemma4_vit, hf_gemma4_vit)]:
    assert_close(ours, torch.tensor(hf, dtype=f64), atol=1e-6, rtol=0)

# %% [markdown] lang="en"
# ## M-RoPE: time, height and width in a language model
#
# Qwen2-VL (Wang et al. 2024) feeds image and video patches into a language
# model together with text. Its
# [multimodal RoPE](../docs/glossary.md#multimodal-rope) gives every token
# three coordinates $(t, h, w)$ and splits the $d/2$ frequencies of a head
# into three consecutive sections, `mrope_section`: for $d = 128$,
# $[16, 24, 24]$, so frequencies $0$–$15$ turn with $t$, $16$–$39$ with $h$,
# $40$–$63$ with $w$. With $a(i)$ the axis of frequency $i$, pair $i$ of a
# token with coordinates $p$ turns by
#
# $$\phi_i = p_{a(i)}\, \theta_i .$$
#
# A text token gets three equal coordinates, $t = h = w = p$; then
# $p_{a(i)} = p$ for every $i$, and M-RoPE is exactly 1D RoPE, as the
# Qwen2-VL paper says: on text, a model initialised from a text model starts
# with the rotations it was trained with. As for axial RoPE, the relative
# property holds in each axis: shifting the query and the key by the same
# amount along each axis (possibly a different amount per axis) keeps the
# score.

# %% [markdown] lang="ja"
# ## M-RoPE：言語モデルの中の時間・高さ・幅
#
# Qwen2-VL（Wang ら 2024）は、画像や動画のパッチをテキストと一緒に言語モデルへ入力します。
# その[マルチモーダル RoPE](../docs/glossary.ja.md#multimodal-rope) は各トークンに 3 つの座標 $(t, h, w)$ を持たせ、
# ヘッドの $d/2$ 個の周波数を連続した 3 つのセクション `mrope_section` に分けます。
# $d = 128$ では $[16, 24, 24]$ で、周波数 $0$〜$15$ が $t$、$16$〜$39$ が $h$、$40$〜$63$ が $w$ で回ります。
# 周波数 $i$ の軸を $a(i)$ と書くと、座標 $p$ のトークンのペア $i$ の角度は次のとおりです。
#
# $$\phi_i = p_{a(i)}\, \theta_i .$$
#
# テキストのトークンには等しい座標 $t = h = w = p$ を与えるので、どの $i$ でも $p_{a(i)} = p$ となり、M-RoPE は 1 次元の RoPE に一致します（Qwen2-VL の論文のとおり）。
# テキストのモデルから初期化すれば、テキストでは学習時と同じ回転から出発できます。
# 軸ごとの RoPE と同じく、相対位置の性質は各軸で成り立ちます。クエリとキーを各軸に沿って同じ量だけずらせば（量は軸ごとに違ってよい）、スコアは変わりません。

# %%
x = torch.randn(10, 128, dtype=f64)
p = torch.arange(10)
text = apply_mrope(x, p.expand(3, -1), [16, 24, 24], base=1e6)  # t = h = w = p

# %% tags=["check"] summary={"en": "the axes match transformers 5.24.0; on text M-RoPE is 1D RoPE; the score is relative per axis", "ja": "周波数と軸の対応は transformers 5.24.0 と同じで、テキストでは 1 次元の RoPE に一致し、スコアは軸ごとの相対位置だけで決まります"}
# transformers 5.24.0: Qwen2VLRotaryEmbedding.recomposition_frequencies with
#   mrope_section=[16, 24, 24] on freq[a, ..., i] = 100 a + i, output // 100:
#   the angles of axis a kept, section by section, name the axis
hf_qwen2_axes = [0] * 16 + [1] * 24 + [2] * 24
assert mrope_axes([16, 24, 24]).tolist() == hf_qwen2_axes
assert_close(text, apply_rope(x, p, base=1e6))

q, k = torch.randn(2, 128, dtype=f64)


def mrope_score(pq, pk, interleave=False, sections=(16, 24, 24)):
    pos = torch.tensor([pq, pk]).T  # (3, 2)
    qk = torch.stack([q, k])
    out = apply_mrope(qk, pos, list(sections), base=1e6, interleave=interleave)
    return (out[0] @ out[1]).item()


s = mrope_score([5, 7, 2], [5, 9, 4])
shifted = mrope_score([5 + 3, 7 - 2, 2 + 11], [5 + 3, 9 - 2, 4 + 11])
assert math.isclose(s, shifted, abs_tol=1e-9)
for axis in range(3):
    moved = [5, 9, 4]
    moved[axis] += 1
    assert abs(s - mrope_score([5, 7, 2], moved)) > 1e-4

# %% [markdown] lang="en"
# ## Where the positions continue after an image
#
# Qwen2-VL's vision encoder merges $2 \times 2$ patches into one token, so an
# image of $H \times W$ patches becomes $H/2 \times W/2$ tokens. In Qwen's
# reference code (`get_rope_index_2` in `rope2d.py`), text runs
# $0, 1, 2, \dots$ on all three axes; an image that starts at $s$ takes
# $t = s$, $h = s + \text{row}$ and $w = s + \text{column}$; whatever follows
# goes on at the largest position so far plus one, the paper's rule after any
# modality. After an image:
#
# $$s' = s + \max(H/2,\ W/2).$$
#
# So an image advances the position by $\sqrt{N}$ if it is a square of $N$
# tokens, by $\max(H/2, W/2) \ge \sqrt{N}$ in general, not by $N$. When much
# of a long context is visual, the position stays far below the token count;
# the Qwen3-VL documentation therefore advises a smaller YaRN factor
# ([*Extending RoPE's context*](09-rope-context.ipynb#yarn-interpolation-by-parts-and-a-temperature)),
# 2 or 3 rather than 4 to go from 256K to 1M tokens. A text-only prompt still
# advances one position per token, and the slow growth comes from this rule,
# which Qwen2-VL already has, not from how Qwen3-VL assigns frequencies.
# Hugging Face stores the difference, the largest position plus one minus the
# sequence length, as `rope_deltas` and adds it to the positions of generated
# tokens. For 3 text tokens, an image of $4 \times 6$ patches ($2 \times 3$
# tokens, so the text goes on at $3 + 3 = 6$) and 2 text tokens:

# %% [markdown] lang="ja"
# ## 画像のあとの位置の続き方
#
# Qwen2-VL の画像エンコーダは $2 \times 2$ のパッチを 1 つのトークンにまとめるので、$H \times W$ パッチの画像は $H/2 \times W/2$ 個のトークンになります。
# Qwen の参照実装（`rope2d.py` の `get_rope_index_2`）では、テキストは 3 つの軸とも $0, 1, 2, \dots$ と進みます。
# 画像が位置 $s$ から始まるとき、各トークンの座標は $t = s$、$h = s + \text{row}$、$w = s + \text{column}$ です。
# そのあとは、それまでの位置の最大値に 1 を足したところから続きます（論文はどのモダリティのあとでもこの規則を使います）。画像のあとでは次のとおりです。
#
# $$s' = s + \max(H/2,\ W/2).$$
#
# 画像 1 枚で位置が進む量はトークン数 $N$ ではなく、$N$ トークンの正方形の画像なら $\sqrt{N}$、一般には $\max(H/2, W/2) \ge \sqrt{N}$ です。
# 長いコンテキストの多くが画像なら、位置はトークンの数よりずっと小さいままです。
# そのため Qwen3-VL のドキュメントは、256K から 1M トークンへ伸ばすなら YaRN（[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb)の章）の係数に 4 でなく 2 か 3 を勧めています。
# テキストだけのプロンプトなら、位置は従来どおり 1 トークンにつき 1 ずつ進みます。位置がゆっくり進むのは Qwen2-VL から変わらないこの規則のためで、Qwen3-VL の周波数の割り当て方によるものではありません。
# Hugging Face はこの差（位置の最大値に 1 を足して系列長を引いた値）を `rope_deltas` に保持し、生成するトークンの位置に足します。
# 例として、テキスト 3 トークン、$4 \times 6$ パッチの画像（$2 \times 3$ トークンなので、テキストは $3 + 3 = 6$ から続きます）、テキスト 2 トークンを並べます。


# %% tags=["figure"]
def qwen_positions(segments, merge=2, rule="paper", interval=1.0):
    # ("text", n) or ("vision", T, H, W): T temporal patches of H x W; after
    # vision, "paper" (and Qwen's code) goes on at the largest coordinate plus
    # one, "hf" (transformers 5.24.0) advances by max(H, W) // merge
    parts, start = [], 0
    for seg in segments:
        if seg[0] == "text":
            parts.append(torch.arange(start, start + seg[1]).expand(3, -1))
            start += seg[1]
            continue
        h, w = seg[2] // merge, seg[3] // merge
        grid = grid_positions(seg[1], h, w)
        grid[0] = (grid[0] * interval).long()  # Qwen2.5-VL: time steps
        parts.append(grid + start)  # t, h and w offset by start
        last = int(parts[-1].max())
        start = last + 1 if rule == "paper" else start + max(h, w)
    return torch.cat(parts, dim=1)


image = [("text", 3), ("vision", 1, 4, 6), ("text", 2)]
pos = qwen_positions(image)
print(pos)
print("rope_deltas:", int(pos.max()) + 1 - pos.shape[1])

# %% tags=["check"] summary={"en": "both rules give the positions and rope_deltas of transformers 5.24.0 for this prompt", "ja": "2 つの規則はどちらも transformers 5.24.0 と同じ位置と rope_deltas を与えます"}
assert torch.equal(pos, qwen_positions(image, rule="hf"))
# transformers 5.24.0: Qwen2VLModel.get_rope_index(input_ids, mm_token_type_ids
#   = [[0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0]], image_grid_thw=[[1, 4, 6]]),
#   vision_config.spatial_merge_size = 2; position_ids[:, 0], rope_deltas
hf_pos = [[0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7],
          [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7],
          [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]]  # fmt: skip
hf_delta = -3
assert pos.tolist() == hf_pos
assert int(pos.max()) + 1 - pos.shape[1] == hf_delta

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: Hugging Face's departure after a video.** Qwen's reference
# code applies the largest-plus-one rule after a video too, and so did
# transformers up to 5.2. Since the version 5 rewrite of `get_rope_index`
# (5.3), Hugging Face advances the position after a video by
# $\max(H/2, W/2)$, as after an image; issue #45381 reported Qwen2.5-VL's
# video positions wrong, and PR #45400 restored the temporal spacing but kept
# that advance, which 5.24.0 still has. A temporal step is one temporal
# patch of `temporal_patch_size` $= 2$ frames, so with more temporal patches
# than rows or columns of tokens the text after a video starts below the
# video's last temporal coordinate and reuses positions the video took:
# inputs that Qwen2-VL and Qwen2.5-VL did not see in training. In the issue's
# example, 15 text tokens, a Qwen2.5-VL video of 84 temporal patches of
# $12 \times 16$ tokens, 2 seconds each, then 10 text tokens, transformers
# 5.2 starts the last text at 348 (the largest position, 347, plus one) and
# 5.24.0 at 31. After an image, and after each of Qwen3-VL's frames (a grid
# with one $t$), both rules agree.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：動画のあとで Hugging Face が参照実装から外れる点**
#
# Qwen の参照実装は動画のあとでも「最大値に 1 を足す」規則を使い、transformers も 5.2 まではそうでした。
# バージョン 5 で `get_rope_index` が書き直されてから（5.3 以降）、Hugging Face は動画のあとも画像と同じく $\max(H/2, W/2)$ だけ位置を進めます。
# issue #45381 は Qwen2.5-VL の動画の位置の誤りを報告し、PR #45400 は時間方向の間隔を元に戻しました。ただし、この進め方は残り、5.24.0 でも同じです。
# 時間の 1 ステップは `temporal_patch_size` $= 2$ 枚のフレームからなる時間方向のパッチ 1 つです。
# 時間方向のパッチの数がトークンの行数や列数より多いと、動画のあとのテキストは動画の最後の時間座標より小さい位置から始まり、動画が使った位置を再び使います。
# これは Qwen2-VL と Qwen2.5-VL が学習で見ていない入力です。
# issue の例は、テキスト 15 トークン、Qwen2.5-VL の動画、テキスト 10 トークンです。動画は $12 \times 16$ トークンの時間方向のパッチを 2 秒ずつ 84 個並べたものです。
# 最後のテキストは transformers 5.2 では 348（位置の最大値 347 に 1 を足したもの）から、5.24.0 では 31 から始まります。
# 画像のあとと、Qwen3-VL の各フレーム（$t$ が 1 つの格子）のあとでは、2 つの規則は同じ位置を与えます。

# %% tags=["deeper", "check"] summary={"en": "\"hf\" gives transformers 5.24.0's positions after a video, the paper's rule those that transformers 5.2 printed in issue #45381", "ja": "規則 \"hf\" は動画のあとで transformers 5.24.0 と同じ位置を、論文の規則は issue #45381 に貼られた transformers 5.2 の出力と同じ位置を与えます"}
# transformers 5.24.0: Qwen2VLModel.get_rope_index(..., mm_token_type_ids=
#   [[0, 2, 2, 2, 2, 0, 0]], video_grid_thw=[[4, 2, 2]]): temporal row of
#   position_ids[:, 0], rope_deltas
hf_video_t, hf_video_delta = [0, 1, 2, 3, 4, 2, 3], -2
video = [("text", 1), ("vision", 4, 2, 2), ("text", 2)]
by_hf = qwen_positions(video, rule="hf")
assert by_hf[0].tolist() == hf_video_t
assert int(by_hf.max()) + 1 - by_hf.shape[1] == hf_video_delta
# issue #45381: Qwen2.5-VL (tokens_per_second 2), 15 text tokens, video_grid_thw
#   [[84, 24, 32]] at second_per_grid_ts [2.0], 10 text tokens; transformers
#   5.2.0 prints the video rows t 15 ... 347, h 15 ... 26, w 15 ... 30 and the
#   text after at 348 ... 357; 5.24.0 starts that text at 31 (run here)
clip = [("text", 15), ("vision", 84, 24, 32), ("text", 10)]
by_paper = qwen_positions(clip, interval=4)
video_rows = by_paper[:, 15:-10]
assert video_rows.amin(1).tolist() == [15, 15, 15]
assert video_rows.amax(1).tolist() == [347, 26, 30]
assert by_paper[:, -10:].tolist() == [list(range(348, 358))] * 3
assert qwen_positions(clip, rule="hf", interval=4)[0, -10].item() == 31

# %% [markdown] lang="en"
# ## Time in Qwen2.5-VL and Qwen3-VL
#
# In Qwen2-VL a temporal step is a temporal patch, a pair of sampled frames,
# whatever the frame rate. Qwen2.5-VL (Bai et al. 2025) ties it to time:
# Hugging Face's `get_rope_index` gives temporal patch $k$ the coordinate
#
# $$t_k = s + \lfloor k\, \rho\, \tau \rfloor,$$
#
# where $\rho$ is `tokens_per_second` and $\tau$ is `second_per_grid_t`, the
# seconds one temporal patch spans (`temporal_patch_size / fps`). With
# $\rho = 2$ (Qwen's reference code multiplies by 2; Hugging Face's default
# configuration has 4), videos sampled at 2 and at 4 frames per second give the same second the
# same coordinate. Qwen3-VL drops temporal coordinates tied to frames or
# seconds: Hugging Face lays out each temporal patch as a grid of its own
# with a constant $t$, after a timestamp such as `<1.5 seconds>` that the
# processor writes in the text, so the temporal coordinate of a patch only
# says where it starts in the sequence.

# %% [markdown] lang="ja"
# ## Qwen2.5-VL と Qwen3-VL での時間
#
# Qwen2-VL の時間の 1 ステップは、フレームレートにかかわらず時間方向のパッチ、つまりサンプルしたフレームの 2 枚組です。
# Qwen2.5-VL（Bai ら 2025）はこれを時刻に結び付けます。Hugging Face の `get_rope_index` は、時間方向のパッチ $k$ に次の座標を与えます。
#
# $$t_k = s + \lfloor k\, \rho\, \tau \rfloor,$$
#
# ここで $\rho$ は `tokens_per_second`、$\tau$ は時間方向のパッチ 1 つが占める秒数 `second_per_grid_t`（`temporal_patch_size / fps`）です。
# Qwen の参照実装は `tokens_per_second` の代わりに 2 を掛けます（Hugging Face の既定の設定では 4 です）。$\rho = 2$ なら、毎秒 2 フレームと 4 フレームのどちらでサンプルした動画でも、同じ秒には同じ座標が付きます。
# Qwen3-VL は、フレームや秒に結び付いた時間座標をやめました。
# Hugging Face は時間方向のパッチごとに $t$ が一定の格子を並べ、その前に前処理がテキストの中へ `<1.5 seconds>` のようなタイムスタンプを書き込みます。
# そのため、パッチの時間座標は、系列のどこから始まるかを表すだけです。


# %% tags=["figure"]
def video_at(fps):  # 4 s: 2 fps temporal patches of 2 frames, rho tau = 4 / fps
    clip = [("text", 1), ("vision", 2 * fps, 2, 2), ("text", 1)]
    return qwen_positions(clip, rule="hf", interval=2 * 2 / fps)


at_2fps, at_4fps = video_at(2), video_at(4)
print("temporal patches at 2 frames/s:", at_2fps[0, 1:5].tolist())
print("temporal patches at 4 frames/s:", at_4fps[0, 1:9].tolist())

# %% tags=["check"] summary={"en": "the positions match transformers 5.24.0 at both frame rates, with the floor at ρτ = 4/3, and for Qwen3-VL under both rules; same second, same coordinate", "ja": "2 つのフレームレート（ρτ = 4/3 での切り捨てを含む）でも、両方の規則での Qwen3-VL でも、位置は transformers 5.24.0 と一致し、同じ秒には同じ座標が付きます"}
# transformers 5.24.0: Qwen2_5_VLModel.get_rope_index with Qwen2_5_VLConfig(
#   vision_config={"tokens_per_second": 2}), 1 text token, a video, 1 text
#   token: video_grid_thw [[4, 2, 2]] with second_per_grid_ts [1.0] (2 frames
#   per second), [[8, 2, 2]] with [0.5] (4 per second); temporal rows
hf_2fps = [0, 1, 3, 5, 7, 2]
hf_4fps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 2]
assert at_2fps[0].tolist() == hf_2fps and at_4fps[0].tolist() == hf_4fps
assert at_2fps[0, 1:5].tolist() == at_4fps[0, 1:9:2].tolist()  # same seconds
# second_per_grid_ts [2 / 3], video_grid_thw [[7, 2, 2]]: floor(4k / 3) + 1
hf_floor = [0, 1, 2, 3, 5, 6, 7, 9, 2]
clip = [("text", 1), ("vision", 7, 2, 2), ("text", 1)]
assert qwen_positions(clip, rule="hf", interval=4 / 3)[0].tolist() == hf_floor
# Qwen3VLModel.get_rope_index(..., video_grid_thw=[[2, 4, 4]]): 1 text
#   token, per temporal patch 2 text tokens (a timestamp) and 2 x 2 video
#   tokens, then 1 text token; position_ids[:, 0]
hf_qwen3 = [[0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 7, 7, 7, 9],
            [0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 7, 8, 8, 9],
            [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 7, 8, 9]]  # fmt: skip
stamp, patch = ("text", 2), ("vision", 1, 4, 4)
frames = [("text", 1), stamp, patch, stamp, patch, ("text", 1)]
for rule in ["paper", "hf"]:
    assert qwen_positions(frames, rule=rule).tolist() == hf_qwen3

# %% [markdown] lang="en"
# ## Qwen3-VL: dealing the frequencies out in turn
#
# With blocks each axis sees one band of the spectrum: frequencies fall with
# $i$, so in Qwen2-VL's $[16, 24, 24]$ time takes the 16 fastest and width
# the 24 slowest, and no axis has both fast pairs (fine differences) and
# slow pairs (long ranges): within an image the width axis is nearly blind
# ([the note below](#deeper-the-numbers-and-qwen3-vls-base) gives the numbers). Qwen3-VL
# interleaves instead, the MRoPE-Interleave of Huang et al. (2025), from the
# Qwen team, whose guidelines ask every axis to use the full spectrum:
# frequency $i$ goes to axis $i \bmod 3$, $t\,h\,w\,t\,h\,w \dots$, as long
# as the sections allow. With `mrope_section = [24, 20, 20]`, $h$ gets
# $1, 4, \dots, 58$, $w$ gets $2, 5, \dots, 59$ and $t$ the rest, including
# the last four. Each frequency is still tied to one axis, so the relative
# property is untouched.
#
# The wavelength $2\pi/\theta_i$ of a pair says which distances it resolves.
# For $d = 128$ and base $10^6$ (Hugging Face's default `rope_theta` for
# Qwen2-VL), blocks stop the temporal axis at a wavelength of about 160
# positions and start the width at about 35,000; interleaved, every axis
# spans nearly the whole range. The figure keeps $10^6$ for both, so that only
# the assignment differs (Qwen3-VL itself uses $5 \cdot 10^6$, see
# [the note below](#deeper-the-numbers-and-qwen3-vls-base)).

# %% [markdown] lang="ja"
# ## Qwen3-VL：周波数の巡回割り当て
#
# 連続したブロックに分ける方式では、各軸はスペクトルの 1 つの帯域しか使えません。
# 周波数は $i$ とともに小さくなるので、Qwen2-VL の $[16, 24, 24]$ では時間が最も速い 16 個を、幅が最も遅い 24 個を受け持ち、速いペア（細かい差）と遅いペア（長い範囲）の両方を持つ軸はありません。
# 画像の中で幅の軸はほとんど何も見分けられません（数値は下の[「さらに詳しく」](#deeper-数値と-qwen3-vl-の底)）。
# Qwen3-VL は代わりに、周波数を時間・高さ・幅の軸へ巡回的に割り当てます。これは Qwen チームの Huang ら（2025）が提案した MRoPE-Interleave で、「どの軸にも周波数の全範囲を使わせる」という同論文の設計指針に沿っています。
# セクションが許す限り、周波数 $i$ を軸 $i \bmod 3$ に割り当て、$t\,h\,w\,t\,h\,w \dots$ と並べます。
# `mrope_section = [24, 20, 20]` では $h$ が $1, 4, \dots, 58$、$w$ が $2, 5, \dots, 59$ を受け持ち、最後の 4 つを含む残りは $t$ です。
# 各周波数は 1 つの軸に結び付いたままなので、相対位置の性質は損なわれません。
#
# ペアの波長 $2\pi/\theta_i$ は、そのペアが見分けられる距離の目安です。
# $d = 128$、底 $10^6$（Hugging Face の Qwen2-VL の `rope_theta` の既定値）で見ると、
# ブロックでは時間の軸の波長は最長でも約 160 で、幅の軸の波長は約 35,000 から始まります。巡回割り当てでは、どの軸もほぼ全範囲にわたります。
# 図では割り当て方だけを比べるため、どちらも底を $10^6$ とします（Qwen3-VL 自体は $5 \cdot 10^6$ です。下の[「さらに詳しく」](#deeper-数値と-qwen3-vl-の底)）。

# %% tags=["check"] summary={"en": "the interleaved axes match transformers 5.24.0, and the score stays relative per axis", "ja": "巡回割り当ても transformers 5.24.0 と一致し、スコアは軸ごとの相対位置だけで決まります"}
# transformers 5.24.0: Qwen3VLTextRotaryEmbedding.recomposition_frequencies
#   with mrope_section=[24, 20, 20] on freq[a, ..., i] = 100 a + i, // 100
hf_qwen3_axes = [0, 1, 2] * 20 + [0] * 4
assert mrope_axes([24, 20, 20], interleave=True).tolist() == hf_qwen3_axes
kw = dict(interleave=True, sections=(24, 20, 20))
s = mrope_score([5, 7, 2], [5, 9, 4], **kw)
shifted = mrope_score([5 + 3, 7 - 2, 2 + 11], [5 + 3, 9 - 2, 4 + 11], **kw)
assert math.isclose(s, shifted, abs_tol=1e-9)
assert abs(s - mrope_score([5, 7, 2], [6, 9, 4], **kw)) > 1e-4

# %% tags=["figure"] alt={"en": ["Wavelength 2π/θ_i on a log axis against the frequency index i from 0 to 63, d = 128, base 10^6, two panels. Top, Qwen2-VL's blocks [16, 24, 24]: t holds indices 0–15 (wavelengths 6 to about 160), h 16–39, w 40–63 (about 35,000 to 5.1 million). Bottom, Qwen3-VL's interleaved [24, 20, 20]: t, h and w alternate along the whole curve."], "ja": ["d = 128、底 10^6 での波長 2π/θ_i（対数軸）を、周波数の番号 i（0〜63）に対して描いた 2 段の図です。上は Qwen2-VL のブロック（セクションは 16、24、24）です。軸 t が番号 0〜15（波長 6〜約 160）、h が 16〜39、w が 40〜63（約 35,000〜510 万）を受け持ちます。下は Qwen3-VL の巡回割り当て（セクションは 24、20、20）で、3 つの軸が曲線全体にわたって順番に並びます。"]}
wavelength = 2 * math.pi / posenc.rope_frequencies(128, base=1e6).double()
blocks = mrope_axes([16, 24, 24])
longest_t = wavelength[blocks == 0].max().item()
shortest_w = wavelength[blocks == 2].min().item()
print(f"blocks: t up to {longest_t:.0f}, w from {shortest_w:,.0f}")
colours = plt.get_cmap("viridis")([0.0, 0.5, 0.85])
fig, axes = plt.subplots(2, 1, figsize=(7, 2.7), sharex=True)
idx = torch.arange(64)
for ax, (sections, inter, title) in zip(
    axes,
    [
        ([16, 24, 24], False, "[16, 24, 24]"),
        ([24, 20, 20], True, "[24, 20, 20]"),
    ],
    strict=True,
):
    axis = mrope_axes(sections, interleave=inter)
    for a, label in enumerate("thw"):
        sel = axis == a
        ax.scatter(
            idx[sel], wavelength[sel], s=10, color=colours[a], label=label
        )
    ax.set_yscale("log")
    ax.set_ylabel(r"$2\pi/\theta_i$")
    ax.set_title(title)
axes[0].legend(loc="upper left", ncol=3)
axes[1].set_xlabel(r"$i$")
plt.show()


# %% tags=["check"] summary={"en": "each end is 2π b^(2i/d) at the pair that the axis lists give; θ_40, θ_16 and the wavelengths at 5 · 10^6 are as quoted", "ja": "各軸の両端の波長は、軸の割り当てが示すペアでの 2π b^(2i/d) に等しく、θ_40、θ_16 と底 5 · 10^6 での波長は本文のとおりです"}
def wavelength_of(i):  # 2 pi b^(2i/d), d = 128, b = 10^6
    return 2 * math.pi * 10 ** (6 * 2 * i / 128)


ends = {  # (first, last) pair of each axis, from the axis lists above
    (False, 0): (0, 15),
    (False, 1): (16, 39),
    (False, 2): (40, 63),
    (True, 0): (0, 63),
    (True, 1): (1, 58),
    (True, 2): (2, 59),
}
for (inter, a), (first, last) in ends.items():
    sections = [24, 20, 20] if inter else [16, 24, 24]
    wl = wavelength[mrope_axes(sections, interleave=inter) == a]
    assert math.isclose(wl.min(), wavelength_of(first), rel_tol=1e-5)
    assert math.isclose(wl.max(), wavelength_of(last), rel_tol=1e-5)
theta = 1 / 10 ** (6 * 2 * torch.arange(64, dtype=f64) / 128)
assert (
    math.isclose(theta[40].item(), 10**-3.75)
    and round(30 * theta[40].item(), 3) == 0.005
)
assert round(30 * theta[16].item(), 2) == 0.95
slowest_t = 2 * math.pi * 5e6 ** (126 / 128)  # base 5 * 10^6
assert (
    round(slowest_t / 1e7, 1) == 2.5
    and round(wavelength_of(63) / 1e6, 1) == 5.1
)

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the numbers, and Qwen3-VL's base.** In Qwen2-VL's blocks the
# fastest width pair, $\theta_{40} = 10^{-6 \cdot 80/128} = 10^{-3.75} \approx 1.8 \cdot 10^{-4}$
# radians per position, turns by about 0.005 radians across 30 columns, while the
# fastest height pair, $\theta_{16}$, turns by about 0.95 radians across 30 rows.
# Qwen3-VL's released checkpoints
# (`config.json` of Qwen3-VL-4B-Instruct) use base $5 \cdot 10^6$, where Hugging
# Face's configuration class defaults to $5 \cdot 10^5$. At $5 \cdot 10^6$ every
# wavelength $2\pi b^{2i/d}$ grows, the slowest temporal one to about
# $2.5 \cdot 10^7$ positions instead of $5.1 \cdot 10^6$.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：数値と Qwen3-VL の底**
#
# Qwen2-VL のブロックでは、幅の軸で最も速いペアは、周波数が $\theta_{40} = 10^{-6 \cdot 80/128} = 10^{-3.75} \approx 1.8 \cdot 10^{-4}$（位置 1 つあたりのラジアン）で、30 列でも約 0.005 ラジアンしか回りません。
# 高さの最も速いペア $\theta_{16}$ は 30 行で約 0.95 ラジアン回ります。
# Qwen3-VL の公開されたチェックポイント（Qwen3-VL-4B-Instruct の `config.json`）の底は $5 \cdot 10^6$ で、Hugging Face の設定クラスの既定値 $5 \cdot 10^5$ とは違います。
# 底が $5 \cdot 10^6$ ならどの波長 $2\pi b^{2i/d}$ も伸び、時間の軸の最も遅い波長は $5.1 \cdot 10^6$ ではなく約 $2.5 \cdot 10^7$ になります。

# %% [markdown] lang="en"
# ## What to remember
#
# - ViT learns a table and resamples its patch rows as an image at a new
#   resolution; MAE fixes it: the column's 1D sine–cosine code, then the
#   row's.
# - Axial 2D RoPE turns half of the pairs with the column, half with the row:
#   the score is a function of $\Delta c$ plus one of $\Delta r$, and a larger
#   image needs no resampling.
# - RoPE-Mixed learns a frequency on both axes for each pair: it starts as
#   axial RoPE in rotated coordinates, can learn diagonals, and stays
#   relative.
# - M-RoPE ties each frequency to time, height or width; text gets three
#   equal coordinates, hence plain RoPE. After an image or a video the
#   position goes on at the largest coordinate plus one (Hugging Face 5.24
#   departs from this after a video).
# - A temporal step is 2 frames in Qwen2-VL, a fixed span of time in
#   Qwen2.5-VL; Qwen3-VL gives each temporal patch its own grid after a
#   textual timestamp.
# - Blocks give each axis one band of frequencies; Qwen3-VL deals them out in
#   turn, so that every axis has fast and slow pairs.

# %% [markdown] lang="ja"
# ## まとめ
#
# - ViT は表を学習し、解像度が変わるとパッチの行を画像として補間します。MAE は表を固定し、列の 1 次元の正弦・余弦の符号に行の符号を続けます。
# - 軸ごとの 2 次元 RoPE はペアの半分を列で、半分を行で回します。スコアは $\Delta c$ の関数と $\Delta r$ の関数の和です。
#   画像を大きくしても補間は不要です。
# - RoPE-Mixed は各ペアに両方の軸の周波数を学習させます。初期化の時点では座標を回した軸ごとの RoPE と同じで、学習によって斜めの方向を表せるようになり、相対位置の性質も保ちます。
# - M-RoPE は各周波数を時間・高さ・幅のどれかに結び付け、3 つの座標が等しいテキストでは通常の RoPE になります。
#   画像や動画のあとの位置は座標の最大値に 1 を足したところから続きます（Hugging Face 5.24 は動画のあとでこの規則から外れます）。
# - 時間の 1 ステップは、Qwen2-VL では 2 フレーム、Qwen2.5-VL では決まった長さの時間です。Qwen3-VL は時間方向のパッチごとに格子を分け、その前にテキストのタイムスタンプを置きます。
# - ブロックでは各軸が 1 つの帯域しか持てません。Qwen3-VL は周波数を巡回的に割り当て、どの軸にも速いペアと遅いペアを持たせます。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. In Qwen2-VL ($d = 128$, base $10^6$, blocks $[16, 24, 24]$), after how
#    many temporal positions does the slowest temporal pair complete one
#    turn, and how many sampled frames is that? Answer the first question
#    for Qwen3-VL's interleaved $[24, 20, 20]$ with the same base (a
#    hypothetical one: Qwen3-VL's released checkpoints use $5 \cdot 10^6$),
#    and say why the second has no answer there.
# 2. A prompt has 5 text tokens, an image of $16 \times 16$ patches (merged
#    $2 \times 2$) and 1 text token. What are the coordinates of the last
#    token, and what is `rope_deltas`?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. Qwen2-VL（$d = 128$、底 $10^6$、ブロック $[16, 24, 24]$）で、時間の軸の最も遅いペアが 1 周するのは時間座標がいくつ進んだときで、
#    それはサンプルしたフレームの何枚分でしょうか。
#    次に、Qwen3-VL の巡回割り当て $[24, 20, 20]$ について、同じ底を仮定して 1 つ目の問いに答えてください（Qwen3-VL の公開されたチェックポイントの底は $5 \cdot 10^6$ です）。
#    また、この場合 2 つ目の問いに答えがない理由を説明してください。
# 2. プロンプトが、テキスト 5 トークン、$16 \times 16$ パッチの画像（$2 \times 2$ ずつまとめます）、テキスト 1 トークンからなるとします。
#    最後のトークンの座標と `rope_deltas` はいくつでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** The slowest temporal pair of the blocks is $i = 15$, with
# wavelength $2\pi \cdot 10^{6 \cdot 30/128}$, about 160 temporal positions.
# One temporal position of a Qwen2-VL video is one temporal patch of
# `temporal_patch_size` $= 2$ frames, so that is about 320 sampled frames,
# whatever the frame rate. Interleaved, the temporal axis owns $i = 63$,
# wavelength $2\pi \cdot 10^{6 \cdot 126/128}$, about 5.1 million positions.
# In Qwen3-VL that is no number of frames: each temporal patch is a grid of
# its own, and from one patch to the next the position advances by the
# tokens of a timestamp and by $\max(H/2, W/2)$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** ブロックでの時間の軸の最も遅いペアは $i = 15$ で、波長は $2\pi \cdot 10^{6 \cdot 30/128}$、時間座標で約 160 です。
# Qwen2-VL の動画では、時間座標の 1 が、`temporal_patch_size` $= 2$ 枚のフレームからなる時間方向のパッチ 1 つにあたります。
# したがってフレームレートにかかわらず、サンプルしたフレームの約 320 枚分です。
# 巡回割り当てでは時間の軸が $i = 63$ を受け持ち、波長は $2\pi \cdot 10^{6 \cdot 126/128}$、位置で約 510 万です。
# Qwen3-VL では、これをフレームの枚数には換算できません。
# 時間方向のパッチはそれぞれ別の格子になり、次のパッチまでに位置はタイムスタンプのトークンの数と $\max(H/2, W/2)$ だけ進むからです。

# %% tags=["solution"]
blocks_t = 2 * math.pi * 10 ** (6 * 30 / 128)
inter_t = 2 * math.pi * 10 ** (6 * 126 / 128)
theta = posenc.rope_frequencies(128, base=1e6).double()
t_blocks = mrope_axes([16, 24, 24]) == 0
t_inter = mrope_axes([24, 20, 20], interleave=True) == 0
assert math.isclose(
    (2 * math.pi / theta[t_blocks]).max(), blocks_t, rel_tol=1e-5
)
assert math.isclose((2 * math.pi / theta[t_inter]).max(), inter_t, rel_tol=1e-5)
temporal_patch_size = 2  # transformers 5.24.0: Qwen2VLConfig().vision_config
frames = blocks_t * temporal_patch_size
assert round(blocks_t) == 160 and round(frames, -1) == 320
assert round(inter_t / 1e6, 1) == 5.1  # the prose's 160, 320 and 5.1 million
print(f"blocks: {blocks_t:.1f} positions, {frames:.1f} frames")
print(f"interleaved: {inter_t:,.0f} positions")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The text takes $0, \dots, 4$; the image starts at $s = 5$
# and has $8 \times 8$ tokens, coordinates $t = 5$, $h, w \in 5, \dots, 12$;
# the last token continues at $12 + 1 = 13$ on all three axes. The sequence
# has $5 + 64 + 1 = 70$ tokens and largest position 13, so `rope_deltas` is
# $13 + 1 - 70 = -56$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** テキストは $0, \dots, 4$ を使います。画像は $s = 5$ から始まる $8 \times 8$ トークンで、
# 座標は $t = 5$、$h, w \in 5, \dots, 12$ です。
# 最後のトークンの座標は、3 つの軸とも $12 + 1 = 13$ です。
# 系列は $5 + 64 + 1 = 70$ トークンで位置の最大値は 13 なので、`rope_deltas` は $13 + 1 - 70 = -56$ です。

# %% tags=["solution"]
# transformers 5.24.0: Qwen2VLModel.get_rope_index(..., image_grid_thw=
#   [[1, 16, 16]]) on this prompt: last token [13, 13, 13], rope_deltas -56
prompt = [("text", 5), ("vision", 1, 16, 16), ("text", 1)]
for rule in ["paper", "hf"]:
    pos = qwen_positions(prompt, rule=rule)
    assert pos[:, -1].tolist() == [13, 13, 13]
    assert int(pos.max()) + 1 - pos.shape[1] == -56

# %% [markdown] lang="en"
# ## Sources and versions
#
# Formulas are checked against transcriptions of the papers' code, against
# numbers printed by Hugging Face transformers 5.24.0 (torch 2.13.0),
# pasted into the checks with the call, or
# against a second derivation. Transformers 5.2's positions after a video
# are those pasted in issue #45381. The accuracies of Heo et al.'s tables
# are quoted from their repository, not reproduced.
#
# ### References
#
# - Dosovitskiy, A. et al. (2021). *An Image is Worth 16x16 Words:
#   Transformers for Image Recognition at Scale*.
#   <https://arxiv.org/abs/2010.11929>; code, `vit_jax/checkpoint.py`
#   (`scipy.ndimage.zoom(..., order=1)`):
#   <https://github.com/google-research/vision_transformer>
# - He, K. et al. (2022). *Masked Autoencoders Are Scalable Vision
#   Learners*. <https://arxiv.org/abs/2111.06377>; code,
#   `util/pos_embed.py`: <https://github.com/facebookresearch/mae>
# - Heo, B., Park, S., Han, D. and Yun, S. (2024). *Rotary Position
#   Embedding for Vision Transformer*. ECCV 2024.
#   <https://arxiv.org/abs/2403.13298>; code, `deit/models_v2_rope.py`
#   (`RoPEAttention` rotates `q[:, :, 1:]`; `compute_axial_cis` runs per
#   grid), and the accuracy tables of its README:
#   <https://github.com/naver-ai/rope-vit>
# - Wang, P. et al. (2024). *Qwen2-VL: Enhancing Vision-Language Model's
#   Perception of the World at Any Resolution*.
#   <https://arxiv.org/abs/2409.12191>
# - Bai, S. et al. (2025). *Qwen2.5-VL Technical Report*.
#   <https://arxiv.org/abs/2502.13923>
# - Qwen Team (2025). *Qwen3-VL Technical Report*.
#   <https://arxiv.org/abs/2511.21631>
# - Huang, J., Liu, X., Song, S., Hou, R., Chang, H., Lin, J. and Bai, S.
#   (2025). *Revisiting Multimodal Positional Encoding in Vision–Language
#   Models*. <https://arxiv.org/abs/2510.23095>
# - Qwen3-VL repository and documentation; Qwen's reference positions in
#   `qwen-vl-finetune/qwenvl/data/rope2d.py`; released checkpoints'
#   `config.json` (Qwen3-VL-4B-Instruct: `rope_theta` 5000000).
#   <https://github.com/QwenLM/Qwen3-VL>
# - transformers issue #45381 and PR #45400 (Qwen2.5-VL video positions).
#   <https://github.com/huggingface/transformers/issues/45381>,
#   <https://github.com/huggingface/transformers/pull/45400>
# - Hugging Face transformers 5.24.0: the ViT, ViT-MAE, Qwen2-VL,
#   Qwen2.5-VL, Qwen3-VL and Gemma 4 models.
#   <https://github.com/huggingface/transformers>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary
#   Position Embedding*. <https://arxiv.org/abs/2104.09864>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# どの式も、論文のコードの書き写し、transformers 5.24.0（torch 2.13.0）の出力（呼び出し方とともに確認のセルに貼っています）、別の導出のどれかと照らし合わせています。
# 動画のあとの transformers 5.2 の位置は issue #45381 に貼られたものです。Heo らの表の正解率はリポジトリからの引用で、ここでは再現していません。
#
# ### 参考文献
#
# - Dosovitskiy, A. et al. (2021). *An Image is Worth 16x16 Words:
#   Transformers for Image Recognition at Scale*.
#   <https://arxiv.org/abs/2010.11929>
#   公式実装：`vit_jax/checkpoint.py`（`scipy.ndimage.zoom(..., order=1)`）。<https://github.com/google-research/vision_transformer>
# - He, K. et al. (2022). *Masked Autoencoders Are Scalable Vision
#   Learners*. <https://arxiv.org/abs/2111.06377>
#   公式実装：`util/pos_embed.py`。<https://github.com/facebookresearch/mae>
# - Heo, B., Park, S., Han, D., Yun, S. (2024). *Rotary Position
#   Embedding for Vision Transformer*. ECCV 2024.
#   <https://arxiv.org/abs/2403.13298>
#   公式実装：`deit/models_v2_rope.py`（`RoPEAttention` は `q[:, :, 1:]` を回転させ、`compute_axial_cis` は格子ごとに計算します）。README に正解率の表があります。<https://github.com/naver-ai/rope-vit>
# - Wang, P. et al. (2024). *Qwen2-VL: Enhancing Vision-Language Model's
#   Perception of the World at Any Resolution*.
#   <https://arxiv.org/abs/2409.12191>
# - Bai, S. et al. (2025). *Qwen2.5-VL Technical Report*.
#   <https://arxiv.org/abs/2502.13923>
# - Qwen Team (2025). *Qwen3-VL Technical Report*.
#   <https://arxiv.org/abs/2511.21631>
# - Huang, J. et al. (2025). *Revisiting Multimodal Positional Encoding in Vision–Language
#   Models*. <https://arxiv.org/abs/2510.23095>
# - Qwen3-VL のリポジトリとドキュメント。Qwen の参照実装の位置は `qwen-vl-finetune/qwenvl/data/rope2d.py`、公開されたチェックポイントの `config.json`（Qwen3-VL-4B-Instruct の `rope_theta` は 5000000）。
#   <https://github.com/QwenLM/Qwen3-VL>
# - Hugging Face transformers：イシュー #45381 とプルリクエスト #45400（Qwen2.5-VL の動画の位置）。
#   <https://github.com/huggingface/transformers/issues/45381>、
#   <https://github.com/huggingface/transformers/pull/45400>
# - Hugging Face transformers 5.24.0：ViT、ViT-MAE、Qwen2-VL、Qwen2.5-VL、Qwen3-VL、Gemma 4 のモデル。
#   <https://github.com/huggingface/transformers>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary
#   Position Embedding*. <https://arxiv.org/abs/2104.09864>
