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
# A text token has one position; an image patch has two coordinates, its row
# and its column, and a patch of a video has three: its time, its row and its
# column. This chapter follows how the encodings of the earlier chapters were
# carried over to grids. Vision transformers first used absolute tables: ViT
# learns one vector per patch and resamples the table for a new resolution,
# MAE fixes it to sines and cosines, half of the channels for each axis. Then
# RoPE moved to images: Heo et al. (2024) rotate some pairs of features with
# the column and the others with the row (RoPE-Axial), and add a variant with
# learned frequencies that mix both axes (RoPE-Mixed). Qwen2-VL's multimodal
# RoPE (M-RoPE) splits the frequencies of a language model's heads between
# time, height and width, so that text, images and video share one sequence;
# Qwen3-VL deals the frequencies out to the axes in turn instead of in blocks.
# Every formula is checked against transcriptions of the papers' code,
# against numbers that Hugging Face transformers or scipy print (pasted here
# with the version and the call), or against a second derivation.
#
# The letters follow the [notation page](../docs/notation.md#positions): $m$ and
# $n$ are the positions of the query and the key in the rotary chapters, now
# one per axis; $i$ numbers the pairs of features, $\theta_i = b^{-2i/d}$.
# A patch at row $r$ and column $c$ has the coordinates $(r, c)$.

# %% [markdown] lang="ja"
# # 2 次元・3 次元の RoPE
#
# テキストのトークンの位置は 1 つですが、画像のパッチには行と列の 2 つの座標があり、
# 動画のパッチには時間・行・列の 3 つの座標があります。
# この章では、これまでの章のエンコーディングが格子の上へどう持ち込まれたかをたどります。
# Vision Transformer は、当初は絶対位置の表を使っていました。
# ViT はパッチごとに 1 本のベクトルを学習し、解像度が変わると表を補間し直します。
# MAE は表を正弦と余弦で固定し、チャネルの半分ずつをそれぞれの軸に割り当てます。
# その後 RoPE が画像に持ち込まれました。
# Heo ら（2024）は、次元のペアの一部を列で、残りを行で回転させました（RoPE-Axial）。
# さらに、両方の軸を混ぜた周波数を学習する変種（RoPE-Mixed）も加えています。
# Qwen2-VL のマルチモーダル RoPE（M-RoPE）は、テキスト・画像・動画を 1 つの系列に並べて扱えるように、
# 言語モデルのヘッドの周波数を時間・高さ・幅に分けます。
# Qwen3-VL は周波数をブロックに分けず、各軸へ順番に配ります。
# どの式も、次のどれかと照らし合わせて確かめます。論文のコードを書き写したもの、
# Hugging Face transformers や scipy が出力した数値（バージョンと呼び出し方を添えて貼っています）、別の導出の 3 つです。
#
# 記号は[記法のページ](../docs/notation.ja.md#positions)に従います。
# $m$ と $n$ は回転を扱う章と同じくクエリとキーの位置で、ここでは軸ごとに 1 つずつあります。
# $i$ は次元のペアの番号で、$\theta_i = b^{-2i/d}$ です。
# 行 $r$、列 $c$ のパッチの座標を $(r, c)$ と書きます。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from torch.testing import assert_close

from posenc import (
    apply_mrope,
    apply_rope,
    grid_positions,
    rope_frequencies,
    sinusoidal,
)
from posenc.mrope import mrope_axes
from posenc_lab.plotting import use_site_style

use_site_style()
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
f64 = torch.float64

# %% [markdown] lang="en"
# ## Patches on a grid
#
# A vision transformer cuts an image into square
# [patches](../docs/glossary.md#patch) and reads them as a
# sequence, row after row, the column running fastest. `grid_positions(h, w)`
# lists the coordinates $(r, c)$ of the $hw$ patches in that order: patch
# $j$ sits at row $r = \lfloor j / w \rfloor$ and column $c = j \bmod w$.
# Heo et al.'s code computes them from the index in the same way
# (`init_t_xy`: `t % end_x` and `t // end_x`).

# %% [markdown] lang="ja"
# ## 格子の上のパッチ
#
# Vision Transformer は画像を正方形の[パッチ](../docs/glossary.ja.md#patch)に切り分け、1 つの系列として読みます。
# 読む順は行ごとで、各行の中では列の番号を 1 つずつ進めます。つまり列の番号が最も速く変わります。
# `grid_positions(h, w)` は、$hw$ 個のパッチの座標 $(r, c)$ をこの順に並べます。
# パッチ $j$ は行 $r = \lfloor j / w \rfloor$、列 $c = j \bmod w$ にあります。
# Heo らのコードも、番号から同じ式で座標を計算しています（`init_t_xy` の `t % end_x` と `t // end_x`）。

# %%
h, w = 3, 4
rc = grid_positions(h, w)
print(rc)
j = torch.arange(h * w)
assert torch.equal(rc[0], torch.div(j, w, rounding_mode="floor"))
assert torch.equal(rc[1], j % w)

# %% [markdown] lang="en"
# ## ViT's learned table and a new resolution
#
# ViT (Dosovitskiy et al. 2021) adds a
# [learned positional embedding](../docs/glossary.md#learned-positional-embedding)
# to each patch: a table of $hw + 1$ rows, one per patch and one for the
# class token, as in the chapter
# [*Learned positional embeddings*](03-learned-embeddings.ipynb). Fine-tuned at
# a higher resolution, the model sees more patches than the table has rows.
# The paper's answer is to interpolate the pretrained embeddings in 2D,
# according to their location in the original image: reshape the $hw$
# patch rows to an $h \times w$ grid of vectors and resample it to the new
# grid $h' \times w'$; the class-token row is kept apart and copied unchanged
# (`interpolate_posembed(..., has_class_token)`). The official JAX code
# resamples with `scipy.ndimage.zoom(..., order=1)`, linear interpolation
# that maps the corners onto the corners (scipy's default `grid_mode=False`),
# so new row $r'$ reads the old table at
#
# $$r = r' \, \frac{h - 1}{h' - 1}.$$
#
# Bilinear interpolation reproduces any function that is linear in the
# coordinates, so a table whose first channel holds the row and whose second
# holds the column must come out holding the mapped coordinates. PyTorch's
# `F.interpolate(..., mode="bilinear", align_corners=True)` is the same map:
# the check compares it with the numbers scipy prints for a small table,
# where `align_corners=False` gives other numbers. Hugging Face's `ViTEmbeddings.interpolate_pos_encoding` (transformers
# 5.24.0) resamples differently, bicubic with `align_corners=False`, which
# maps centres of cells rather than corners.

# %% [markdown] lang="ja"
# ## ViT の学習型の表と新しい解像度
#
# ViT（Dosovitskiy ら 2021）は、各パッチに[学習型位置埋め込み](../docs/glossary.ja.md#learned-positional-embedding)を足します。
# [「学習型位置埋め込み」](03-learned-embeddings.ipynb)の章と同じく、パッチごとに 1 行とクラストークンの 1 行、全部で $hw + 1$ 行の表です。
# 高い解像度でファインチューニングすると、モデルは表の行数より多くのパッチを見ることになります。
# 論文は、事前学習済みの位置埋め込みを、元の画像での位置に従って 2 次元で補間する方法をとります。
# パッチの $hw$ 行を形状変換して $h \times w$ の格子に並べ、新しい格子 $h' \times w'$ に合わせて補間し直します。
# クラストークンの行は別に取り分け、そのまま残します（`interpolate_posembed(..., has_class_token)`）。
# 公式の JAX コードは `scipy.ndimage.zoom(..., order=1)` で補間し直します。
# これは四隅を四隅に合わせる線形補間（scipy の既定の `grid_mode=False`）なので、新しい行 $r'$ は古い表の次の位置を読みます。
#
# $$r = r' \, \frac{h - 1}{h' - 1}.$$
#
# 双線形補間は座標の 1 次関数をそのまま再現します。
# したがって、最初のチャネルに行、2 番目のチャネルに列を入れた表を補間すると、写像後の座標が出てくるはずです。
# PyTorch の `F.interpolate(..., mode="bilinear", align_corners=True)` も同じ写像です。
# 次のセルでは、小さな表について scipy が出力した数値と比べます。`align_corners=False` では別の数値になることも確かめます。
# Hugging Face の `ViTEmbeddings.interpolate_pos_encoding`（transformers 5.24.0）は別の方法で補間します。
# `align_corners=False` の双三次補間で、四隅ではなくセルの中心どうしを対応させます。

# %%
h, hn = 14, 24  # a 224-pixel ViT-B/16 grid read at 384 pixels
coords = grid_positions(h, h).to(f64)  # (2, 196): row, column
table = coords.T.reshape(h, h, 2).permute(2, 0, 1)[None]  # (1, 2, h, h)
new = F.interpolate(table, size=(hn, hn), mode="bilinear", align_corners=True)
mapped = torch.arange(hn, dtype=f64) * (h - 1) / (hn - 1)
assert_close(new[0, 0], mapped[:, None].expand(hn, hn))  # rows
assert_close(new[0, 1], mapped[None, :].expand(hn, hn))  # columns
print("new row 1 reads old row", round(new[0, 0, 1, 0].item(), 4))

# numpy 2.4.6, scipy 1.17.1: scipy.ndimage.zoom(t[:, :, None], (4 / 3,
#   4 / 3, 1), order=1)[:, :, 0] with t = [[0, 1, 4], [9, 16, 25],
#   [36, 49, 64]] (the call of vit_jax/checkpoint.py, on a 3 x 3 grid),
#   times 3 and rounded to 9 decimals: the entries are thirds
scipy_zoom_x3 = [[0, 2, 6, 12], [18, 28, 40, 54],
                 [54, 72, 92, 114], [108, 134, 162, 192]]  # fmt: skip
t = torch.tensor([[0, 1, 4], [9, 16, 25], [36, 49, 64]], dtype=f64)
scipy_zoom = torch.tensor(scipy_zoom_x3, dtype=f64) / 3
for corners in [True, False]:
    kw = dict(size=(4, 4), mode="bilinear", align_corners=corners)
    ours = F.interpolate(t[None, None], **kw)[0, 0]
    assert torch.allclose(ours, scipy_zoom) == corners

# %% [markdown] lang="en"
# ## MAE's fixed 2D table: half the channels per axis
#
# MAE (He et al. 2022) keeps the table fixed. Its `get_2d_sincos_pos_embed`
# builds a 1D sine–cosine code of $d/2$ channels for each axis and
# concatenates the two. With $d/4$ frequencies
# $\omega_k = 10000^{-k/(d/4)}$, $k = 0, \dots, d/4 - 1$, the 1D code of a
# coordinate $u$ is all sines first, then all cosines (the
# [concatenated layout](../docs/glossary.md#concatenated-layout)):
#
# $$e(u) = \big(\sin(u\omega_0), \dots, \sin(u\omega_{d/4-1}), \cos(u\omega_0), \dots, \cos(u\omega_{d/4-1})\big),$$
#
# $$PE(r, c) = \big(e(c),\ e(r)\big).$$
#
# The column comes first. The code calls the first half `emb_h`, but it is
# computed from `np.meshgrid(grid_w, grid_h)`, whose first output varies
# along the columns; the comment "here w goes first" says so, and Hugging
# Face's ViT-MAE notes the swap and keeps it for the pretrained weights.
# The check below rebuilds the table from `posenc.sinusoidal` (concatenated,
# $d/2$ channels: the same $\omega_k$) and compares it with the numbers that
# transformers 5.24.0 prints for a $3 \times 3$ grid with $d = 8$.

# %% [markdown] lang="ja"
# ## MAE の固定 2 次元表：チャネルの半分ずつを各軸に
#
# MAE（He ら 2022）は表を固定します。
# その `get_2d_sincos_pos_embed` は、軸ごとに $d/2$ チャネルの 1 次元の正弦・余弦の符号を作り、2 つを連結します。
# $d/4$ 個の周波数を $\omega_k = 10000^{-k/(d/4)}$（$k = 0, \dots, d/4 - 1$）とすると、
# 座標 $u$ の 1 次元の符号は、正弦をすべて並べてから余弦をすべて並べたものです（[連結配置](../docs/glossary.ja.md#concatenated-layout)）。
#
# $$e(u) = \big(\sin(u\omega_0), \dots, \sin(u\omega_{d/4-1}), \cos(u\omega_0), \dots, \cos(u\omega_{d/4-1})\big),$$
#
# $$PE(r, c) = \big(e(c),\ e(r)\big).$$
#
# 先に来るのは列です。
# コードは前半を `emb_h` と呼んでいますが、前半は `np.meshgrid(grid_w, grid_h)` の最初の出力から計算され、
# この出力は列の方向に変わります。
# コメントの「here w goes first」もそう述べており、Hugging Face の ViT-MAE はこの入れ替わりを注記したうえで、
# 事前学習済みの重みに合わせてそのまま残しています。
# 次のセルでは、`posenc.sinusoidal`（連結配置、$d/2$ チャネル。周波数は同じ $\omega_k$ です）から表を作り直し、
# transformers 5.24.0 が $3 \times 3$ の格子、$d = 8$ について出力した数値と比べます。


# %%
def mae_table(rc, d):
    """MAE's fixed table: (column code, row code), each of d/2 channels."""
    col = sinusoidal(rc[1], d // 2, layout="concat", dtype=f64)
    row = sinusoidal(rc[0], d // 2, layout="concat", dtype=f64)
    return torch.cat([col, row], dim=-1)


pe = mae_table(grid_positions(3, 3), 8)
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
print("patch 5 = (row 1, column 2):", pe[5, :2].tolist(), "= sin 2, sin 0.02")

# %% [markdown] lang="en"
# Because the two halves are separate 1D codes, the
# [dot product](../docs/glossary.md#dot-product) of two entries of the table
# is a sum of two 1D dot products, and by
# $\sin a \sin b + \cos a \cos b = \cos(a - b)$ each depends only on a
# difference of coordinates:
#
# $$PE(r, c) \cdot PE(r', c') = \sum_{k} \cos\big((c - c')\,\omega_k\big) + \sum_{k} \cos\big((r - r')\,\omega_k\big).$$
#
# The check evaluates the right-hand side from the frequencies alone and
# compares it with the Gram matrix of the table on an $8 \times 8$ grid with
# $d = 64$.

# %% [markdown] lang="ja"
# 前半と後半はそれぞれ独立した 1 次元の符号なので、表から取った 2 つのパッチのベクトルの
# [内積](../docs/glossary.ja.md#dot-product)は、1 次元の内積 2 つの和になります。
# $\sin a \sin b + \cos a \cos b = \cos(a - b)$ により、それぞれは座標の差だけで決まります。
#
# $$PE(r, c) \cdot PE(r', c') = \sum_{k} \cos\big((c - c')\,\omega_k\big) + \sum_{k} \cos\big((r - r')\,\omega_k\big).$$
#
# 次のセルでは右辺を周波数だけから計算し、$8 \times 8$ の格子、$d = 64$ での表のグラム行列と比べます。

# %%
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

# %% [markdown] lang="en"
# ## Axial 2D RoPE
#
# RoPE (chapter [*Rotary position embedding*](08-rope.ipynb)) rotates pair $i$
# of a query at position $m$ by $m\theta_i$ and of a key at $n$ by $n\theta_i$;
# the score of the pair depends on $m - n$ only. On a grid, Heo et al.'s
# RoPE-Axial, an [axial RoPE](../docs/glossary.md#axial-rope), gives half of the pairs to each axis: pairs $0, \dots, d/4 - 1$
# turn with the column, pairs $d/4, \dots, d/2 - 1$ with the row, both halves
# with the same $d/4$ frequencies. Their code (`compute_axial_cis`) takes
# $\theta_k = 100^{-4k/d}$, $k < d/4$: a base of 100 rather than 10000.
# The code does not say why, and we could not check whether the paper does;
# a plausible reason is that an image has far fewer positions per axis than
# a text has tokens. These are
# exactly the frequencies of 1D RoPE of size $d/2$ with base 100, since
# $100^{-2k/(d/2)} = 100^{-4k/d}$. So RoPE-Axial is two 1D RoPEs side by side:
#
# $$\mathrm{Axial}(x, r, c) = \big(\mathrm{RoPE}_{100}(x_{:d/2}, c),\ \mathrm{RoPE}_{100}(x_{d/2:}, r)\big),$$
#
# with pairs of neighbouring features (the
# [interleaved layout](../docs/glossary.md#interleaved-layout): their code
# views the features as complex numbers). The check rebuilds their
# complex-number code from its definition and compares.

# %% [markdown] lang="ja"
# ## 軸ごとの 2 次元 RoPE
#
# RoPE（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章）は、位置 $m$ のクエリのペア $i$ を $m\theta_i$、
# 位置 $n$ のキーのペアを $n\theta_i$ だけ回転させます。ペアのスコアは $m - n$ だけで決まります。
# 格子の上では、Heo らの RoPE-Axial（[軸ごとの RoPE](../docs/glossary.ja.md#axial-rope)）がペアの半分ずつを各軸に割り当てます。
# ペア $0, \dots, d/4 - 1$ は列で、ペア $d/4, \dots, d/2 - 1$ は行で回り、どちらの半分も同じ $d/4$ 個の周波数を使います。
# Heo らのコード（`compute_axial_cis`）は $\theta_k = 100^{-4k/d}$（$k < d/4$）を使います。
# 底は 10000 ではなく 100 です。コードには理由が書かれておらず、論文が理由を述べているかどうかは確認できていません。
# 画像の 1 軸あたりの位置の数はテキストのトークン数よりずっと少ないことが、理由として考えられます。
# $100^{-2k/(d/2)} = 100^{-4k/d}$ なので、これは次元数 $d/2$、底 100 の 1 次元 RoPE の周波数とちょうど同じです。
# したがって RoPE-Axial は 1 次元の RoPE を 2 つ並べたものです。
#
# $$\mathrm{Axial}(x, r, c) = \big(\mathrm{RoPE}_{100}(x_{:d/2}, c),\ \mathrm{RoPE}_{100}(x_{d/2:}, r)\big),$$
#
# ペアは隣り合う次元どうしです（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)。Heo らのコードは次元を複素数として扱います）。
# 次のセルでは、Heo らの複素数を使ったコードを定義どおりに作り直して比べます。


# %%
def heo_axial(x, r, c, base=100.0):
    """Heo et al.'s compute_axial_cis and apply_rotary_emb, rebuilt."""
    d = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, d, 4)[: d // 4].to(f64) / d)
    angles = torch.cat([c[:, None] * freqs, r[:, None] * freqs], dim=-1)
    z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return out.flatten(-2)


def axial(x, r, c, base=100.0):
    half = x.shape[-1] // 2
    kw = dict(base=base, layout="interleaved")
    return torch.cat(
        [
            apply_rope(x[..., :half], c, **kw),
            apply_rope(x[..., half:], r, **kw),
        ],
        dim=-1,
    )


d = 64
rc = grid_positions(6, 6)
x = torch.randn(36, d, dtype=f64)
assert_close(axial(x, rc[0], rc[1]), heo_axial(x, rc[0], rc[1]))

# %% [markdown] lang="en"
# Each half is a 1D RoPE, so the score of a rotated query and key is a sum of
# one term that depends on the column offset and one that depends on the row
# offset:
#
# $$s(\Delta r, \Delta c) = f(\Delta c) + g(\Delta r), \qquad \Delta r = r_n - r_m,\ \Delta c = c_n - c_m.$$
#
# Two things follow and are checked below. First, the
# [relative property](../docs/glossary.md#relative-position) holds in each
# axis separately: moving both tokens by the same number of rows, or of
# columns, leaves the score unchanged, while moving only one axis of the key
# changes it. Second, a sum $f(\Delta c) + g(\Delta r)$ has a vanishing mixed
# difference,
#
# $$s(\Delta r + 1, \Delta c + 1) - s(\Delta r + 1, \Delta c) - s(\Delta r, \Delta c + 1) + s(\Delta r, \Delta c) = 0,$$
#
# because the $f$ terms and the $g$ terms cancel in pairs. The check computes
# the scores from rotated vectors, not from $f$ and $g$.

# %% [markdown] lang="ja"
# それぞれの半分は 1 次元の RoPE なので、回転したクエリとキーのスコアは、列の差だけで決まる項と行の差だけで決まる項の和になります。
#
# $$s(\Delta r, \Delta c) = f(\Delta c) + g(\Delta r), \qquad \Delta r = r_n - r_m,\ \Delta c = c_n - c_m.$$
#
# ここから 2 つのことが言え、次のセルで確かめます。
# まず、[相対位置](../docs/glossary.ja.md#relative-position)だけで決まる性質が軸ごとに別々に成り立ちます。
# 2 つのトークンを同じ行数だけ、あるいは同じ列数だけ動かしてもスコアは変わりません。
# 一方、キーの 1 つの軸だけを動かすとスコアは変わります。
# 次に、和 $f(\Delta c) + g(\Delta r)$ の混合差分は 0 になります。
#
# $$s(\Delta r + 1, \Delta c + 1) - s(\Delta r + 1, \Delta c) - s(\Delta r, \Delta c + 1) + s(\Delta r, \Delta c) = 0,$$
#
# $f$ の項どうしと $g$ の項どうしが打ち消し合うからです。
# 次のセルは $f$ と $g$ からではなく、回転したベクトルからスコアを計算します。

# %%
q, k = torch.randn(2, d, dtype=f64)


def axial_score(qr, qc, kr, kc):
    def rot(v, r, c):
        return axial(v[None], torch.tensor([r]), torch.tensor([c]))[0]

    return (rot(q, qr, qc) @ rot(k, kr, kc)).item()


s = axial_score(2, 3, 5, 1)
assert math.isclose(s, axial_score(2 + 7, 3, 5 + 7, 1), abs_tol=1e-9)
assert math.isclose(s, axial_score(2, 3 - 4, 5, 1 - 4), abs_tol=1e-9)
assert abs(s - axial_score(2, 3, 5 + 1, 1)) > 1e-3  # one axis of the key
mixed = (
    axial_score(0, 0, 3, 2)
    - axial_score(0, 0, 3, 1)
    - axial_score(0, 0, 2, 2)
    + axial_score(0, 0, 2, 1)
)
assert abs(mixed) < 1e-9
print(f"score {s:.4f}; |mixed difference| < 1e-12: {abs(mixed) < 1e-12}")

# %% [markdown] lang="en"
# ## Diagonals: RoPE-Mixed
#
# In RoPE-Axial every pair turns along one axis only: the phase of pair $i$ is
# $\theta_i c$ or $\theta_i r$. Heo et al. point out that such frequencies
# cannot represent diagonal directions, and their mixed variant gives every
# pair a frequency for each axis,
#
# $$\phi_i(r, c) = \theta^{x}_i\, c + \theta^{y}_i\, r,$$
#
# a plane wave whose direction $(\theta^{x}_i, \theta^{y}_i)$ can point
# anywhere. The frequencies are learned, separately for each head and each
# layer. Their code initialises them (`init_random_2d_freqs`) with magnitudes
# $10^{-4k/d}$ and, per head, a random direction $\alpha$: the first half of
# the pairs along $\alpha$, the second half along $\alpha + \pi/2$.
#
# The rotations still commute, so the score still depends only on
# $(\Delta r, \Delta c)$: the relative property survives. What changes is
# the form of that dependence: a pair with both $\theta^{x}_i$ and
# $\theta^{y}_i$ nonzero contributes
# $\cos(\theta^{x}_i \Delta c + \theta^{y}_i \Delta r + \ldots)$, which is not a sum of a function of
# $\Delta c$ and a function of $\Delta r$, so the mixed difference is no
# longer 0. In the Fourier domain, the axial frequency vectors
# $(\theta_i, 0)$ and $(0, \theta_i)$ all lie on the two axes of the 2D
# spectrum. The paper illustrates the point with a 2D Fourier reconstruction
# that keeps only the RoPE frequencies (we know that figure from its caption
# as quoted in third-party summaries of the paper, and do not reproduce it).

# %% [markdown] lang="ja"
# ## 斜めの方向：RoPE-Mixed
#
# RoPE-Axial では、どのペアも 1 つの軸に沿ってしか回りません。ペア $i$ の位相は $\theta_i c$ か $\theta_i r$ です。
# Heo らは、このような周波数では斜めの方向を表せないと指摘しています。
# その混合版（RoPE-Mixed）では、ペアごとに両方の軸の周波数を持たせます。
#
# $$\phi_i(r, c) = \theta^{x}_i\, c + \theta^{y}_i\, r,$$
#
# これは平面波で、その向き $(\theta^{x}_i, \theta^{y}_i)$ に制約はありません。
# 周波数はヘッドごと、層ごとに学習します。
# Heo らのコード（`init_random_2d_freqs`）は、大きさを $10^{-4k/d}$ とし、ヘッドごとにランダムな向き $\alpha$ を選んで初期化します。
# ペアの前半は $\alpha$ の向き、後半は $\alpha + \pi/2$ の向きです。
#
# 回転どうしは可換なままなので、スコアはやはり $(\Delta r, \Delta c)$ だけで決まり、相対位置の性質は保たれます。
# 変わるのは依存の形です。$\theta^{x}_i$ と $\theta^{y}_i$ がどちらも 0 でないペアからは、
# $\cos(\theta^{x}_i \Delta c + \theta^{y}_i \Delta r + \ldots)$ という項が加わります。
# これは $\Delta c$ の関数と $\Delta r$ の関数の和にはならないので、混合差分はもう 0 になりません。
# フーリエ領域で見ると、軸ごとの周波数ベクトル $(\theta_i, 0)$ と $(0, \theta_i)$ は、どれも 2 次元のスペクトルの 2 本の軸の上にあります。
# 論文は、RoPE の周波数だけを残した 2 次元のフーリエ再構成の図でこの点を示しています。
# ただし、この図は論文を紹介する第三者の記事に引用されたキャプションでしか確認できていないので、ここでは再現していません。


# %%
def heo_mixed_freqs(d, theta=10.0, generator=None):
    """init_random_2d_freqs of Heo et al. for one head: (theta_x, theta_y)."""
    mag = 1.0 / theta ** (torch.arange(0, d, 4)[: d // 4].to(f64) / d)
    a = torch.rand(1, generator=generator, dtype=f64) * 2 * math.pi
    fx = torch.cat([mag * torch.cos(a), mag * torch.cos(math.pi / 2 + a)])
    fy = torch.cat([mag * torch.sin(a), mag * torch.sin(math.pi / 2 + a)])
    return fx, fy


def mixed(x, r, c, fx, fy):
    angles = c[:, None].to(f64) * fx + r[:, None].to(f64) * fy
    z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return out.flatten(-2)


fx, fy = heo_mixed_freqs(d, generator=torch.Generator().manual_seed(1))


def mixed_score(qr, qc, kr, kc):
    def rot(v, r, c):
        return mixed(v[None], torch.tensor([r]), torch.tensor([c]), fx, fy)[0]

    return (rot(q, qr, qc) @ rot(k, kr, kc)).item()


s = mixed_score(2, 3, 5, 1)
assert math.isclose(s, mixed_score(2 + 7, 3 - 4, 5 + 7, 1 - 4), abs_tol=1e-9)
mixed_diff = (
    mixed_score(0, 0, 3, 2)
    - mixed_score(0, 0, 3, 1)
    - mixed_score(0, 0, 2, 2)
    + mixed_score(0, 0, 2, 1)
)
assert abs(mixed_diff) > 1e-3
print(f"RoPE-Mixed: mixed difference {mixed_diff:.4f} (axial: 0)")

# %% [markdown] lang="en"
# The figure shows the score of one query and key as a function of the
# offset $(\Delta r, \Delta c)$ for both variants, with $q = k$ so that the
# score peaks at $(0, 0)$. The axial score is a sum of a row profile and a
# column profile, so its level lines run in a grid pattern along the axes;
# the mixed score has ridges along oblique directions.

# %% [markdown] lang="ja"
# 図は、両方の変種について、1 組のクエリとキーのスコアを差 $(\Delta r, \Delta c)$ の関数として描いたものです。
# $q = k$ としたので、スコアは $(0, 0)$ で最大になります。
# 軸ごとのスコアは行の差の関数と列の差の関数の和なので、等高線は軸の向きにそろった格子模様を描きます。
# RoPE-Mixed のスコアには、斜めの向きに伸びる尾根が現れます。

# %% alt={"en": ["Two heatmaps of the score of q = k against the offset: rows Δr from −15 to 15 down, columns Δc across, d = 64. Left, RoPE-Axial: a cross-shaped pattern aligned with the axes, peak at the centre. Right, RoPE-Mixed with Heo et al.'s initial frequencies: ridges along oblique lines through the centre."], "ja": ["d = 64 で q = k としたスコアを差に対して描いた 2 枚のヒートマップ（縦は Δr、横は Δc、どちらも −15〜15）。左の RoPE-Axial は軸にそろった十字形の模様で、中央が最大です。右は Heo らの初期値の周波数による RoPE-Mixed で、中央を通る斜めの線に沿った尾根が見えます。"]}
span = torch.arange(-15, 16)
dr_grid, dc_grid = torch.meshgrid(span, span, indexing="ij")
dr_flat, dc_flat = dr_grid.reshape(-1), dc_grid.reshape(-1)
zeros = torch.zeros_like(dr_flat)
v = torch.randn(d, dtype=f64).expand(len(dr_flat), d)
ax_q = axial(v, zeros, zeros)
ax_k = axial(v, dr_flat, dc_flat)
mx_q = mixed(v, zeros, zeros, fx, fy)
mx_k = mixed(v, dr_flat, dc_flat, fx, fy)
maps = [
    (ax_q * ax_k).sum(-1).reshape(31, 31),
    (mx_q * mx_k).sum(-1).reshape(31, 31),
]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
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
# Heo et al.'s code rotates only the patch tokens: the class token, at index
# 0, has no place on the grid and is left unrotated (`q[:, :, 1:]` in
# `RoPEAttention`). At a new resolution nothing is resampled: the code
# recomputes the angles for the larger grid
# (`compute_axial_cis(end_x=W // patch_size, ...)`), so the patches keep
# integer coordinates and the model meets offsets it never saw in training
# (with 16-pixel patches, a 14 × 14 grid at 224 pixels and 24 × 24 at 384).
# This is the RoPE counterpart of resampling ViT's table, and the setting of
# the result that the paper's abstract puts first: RoPE keeps its accuracy
# as the inference resolution grows. In the repository's "DeiT-III (400
# epochs)" table for DeiT-III Base (ImageNet-1k top-1, %), the learned
# table loses accuracy at 384 pixels and both RoPE variants gain:
#
# | position encoding | 224 pixels | 384 pixels |
# |---|---|---|
# | learned table | 83.4 | 82.8 |
# | RoPE-Axial | 83.6 | 83.9 |
# | RoPE-Mixed | 83.8 | 84.4 |
#
# These numbers are reported there, not reproduced here. The same table
# gives the same picture for DeiT-III Large, but not for every model: on
# DeiT-III Small, RoPE-Axial drops from 80.9 to 80.0 at 384 pixels (RoPE-Mixed
# gains), and in the repository's Swin Transformer table every variant loses
# about 2 points at 384 pixels (Swin-T RoPE-Axial 81.3 to 79.2).

# %% [markdown] lang="ja"
# ## 解像度を上げても補間し直さない
#
# Heo らのコードは、パッチのトークンだけを回転させます。
# 番号 0 のクラストークンは格子の上に位置を持たないので、回転させません（`RoPEAttention` の `q[:, :, 1:]`）。
# 解像度が変わっても何も補間し直さず、大きくなった格子について角度を計算し直すだけです
# （`compute_axial_cis(end_x=W // patch_size, ...)`）。
# そのためパッチの座標は整数のままで、モデルは学習時には現れなかった大きな座標の差に出会います。
# 16 ピクセルのパッチでは、格子は 224 ピクセルで 14 × 14、384 ピクセルで 24 × 24 です。
# これが、ViT の表の補間に相当する RoPE での扱い方です。
# 論文の要旨が最初に挙げる、推論時の解像度を上げても RoPE は精度を保つという結果は、この扱い方で解像度を上げたときのものです。
# 次の表は、リポジトリの「DeiT-III (400 epochs)」の表にある、DeiT-III Base の ImageNet-1k での top-1 正解率（%）です。
# 384 ピクセルでは、学習型の表は正解率を落とし、RoPE の 2 つの変種はどちらも正解率を上げています。
#
# | 位置エンコーディング | 224 ピクセル | 384 ピクセル |
# |---|---|---|
# | 学習型の表 | 83.4 | 82.8 |
# | RoPE-Axial | 83.6 | 83.9 |
# | RoPE-Mixed | 83.8 | 84.4 |
#
# これらはリポジトリが報告する数値で、ここでは再現していません。
# 同じ表の DeiT-III Large でも傾向は同じですが、どのモデルでもそうなるわけではありません。
# DeiT-III Small では、RoPE-Axial は 384 ピクセルで 80.9 から 80.0 に下がります（RoPE-Mixed は上がります）。
# また、リポジトリの Swin Transformer の表では、どの変種も 384 ピクセルで約 2 ポイント下がります（Swin-T の RoPE-Axial は 81.3 から 79.2）。

# %% [markdown] lang="en"
# ## Axial RoPE with posenc
#
# `posenc.apply_mrope` rotates frequency $i$ of `rope_frequencies(d)` with
# the coordinate of one axis. With two equal sections and
# `grid_positions(h, w)` it gives axial RoPE in structure, half of the pairs
# per axis, but not Heo et al.'s frequencies: with consecutive blocks the row
# takes $\theta_0, \dots, \theta_{d/4-1}$ (the fast half of a base-$b$
# spectrum over $d$) and the column $\theta_{d/4}, \dots, \theta_{d/2-1}$,
# whereas RoPE-Axial gives both axes the set $b^{-4k/d}$. They differ even
# on the row, since $\theta_k = b^{-2k/d}$ is not $b^{-4k/d}$. The exact
# relation is per frequency: `apply_mrope` with sections
# $(d/4, d/4)$ rotates pair $i$ by $r\theta_i$ for $i < d/4$ and $c\theta_i$
# for $i \ge d/4$, which is `apply_rope` with the row for the first block and
# the column for the second, both using the full-size frequencies. The check
# builds that from two calls of `apply_rope` on the whole vector.

# %% [markdown] lang="ja"
# ## posenc での軸ごとの RoPE
#
# `posenc.apply_mrope` は `rope_frequencies(d)` の周波数 $i$ を、どれか 1 つの軸の座標で回します。
# 2 つの等しいセクションと `grid_positions(h, w)` を渡すと、構造としては軸ごとの RoPE になります
# （ペアの半分ずつが各軸に対応します）。ただし周波数は Heo らのものではありません。
# 連続したブロックでは、行が $\theta_0, \dots, \theta_{d/4-1}$（$d$ 次元・底 $b$ のスペクトルの速い半分）を、
# 列が $\theta_{d/4}, \dots, \theta_{d/2-1}$ を受け持ちます。
# 一方 RoPE-Axial は、どちらの軸にも同じ集合 $b^{-4k/d}$ を使います。
# 行についても $\theta_k = b^{-2k/d}$ は $b^{-4k/d}$ とは違うので、両者は一致しません。
# 正確な関係は周波数ごとに書けます。セクション $(d/4, d/4)$ の `apply_mrope` は、
# $i < d/4$ のペア $i$ を $r\theta_i$、$i \ge d/4$ のペアを $c\theta_i$ だけ回します。
# これは、最初のブロックを行で、2 番目のブロックを列で回した `apply_rope` の結果と等しくなります。
# どちらのブロックも、ベクトル全体の次元数から決まる周波数を使います。
# 次のセルでは、ベクトル全体に `apply_rope` を行と列で 1 回ずつ適用し、その結果からこれを組み立てて確かめます。

# %%
x = torch.randn(36, d, dtype=f64)
rc = grid_positions(6, 6)
out = apply_mrope(x, rc, [d // 4, d // 4])
by_row = apply_rope(x, rc[0])  # every pair turned by the row
by_col = apply_rope(x, rc[1])  # every pair turned by the column
first = torch.zeros(d, dtype=torch.bool)  # half layout: pair i is (i, i + d/2)
first[: d // 4] = True
first[d // 2 : d // 2 + d // 4] = True
assert_close(out, torch.where(first, by_row, by_col))
assert not torch.allclose(out, axial(x, rc[0], rc[1]))

# %% [markdown] lang="en"
# ## Axial RoPE in today's vision encoders
#
# The vision encoders of current multimodal models use axial 2D RoPE
# themselves, each with its own layout. Qwen2-VL's encoder
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
# image, next to its 2D RoPE. The check builds both rotations from
# `apply_rope` and compares them with the outputs that transformers 5.24.0
# prints for two patches and a head of $d = 8$.

# %% [markdown] lang="ja"
# ## 現在の画像エンコーダでの軸ごとの RoPE
#
# 現在のマルチモーダルモデルでは、画像エンコーダ自身も軸ごとの 2 次元 RoPE を使っています。次元の並べ方はモデルごとに違います。
# Qwen2-VL のエンコーダ（transformers 5.24.0 の `Qwen2VLVisionRotaryEmbedding`）は、底 $b = 10^4$ で、
# 両方の軸に同じ $d/4$ 個の周波数 $\theta_k = b^{-4k/d}$ を使い、行を先に置きます。
# 回転はヘッド全体に半分割配置で 1 回掛けるだけで、ペア $(j, j + d/2)$ は $j < d/4$ なら行で、$d/4 \le j < d/2$ なら列で回転します。
# つまり次元 $0, \dots, d/4 - 1$ と $d/2, \dots, 3d/4 - 1$ が行についての次元数 $d/2$ の 1 次元 RoPE になり、残りの次元が列についての 1 次元 RoPE になります。
# Gemma 4 のエンコーダ（`Gemma4VisionRotaryEmbedding`、`rope_type="axial"`）は Heo らと同じ底 100 を使います。
# ヘッドの前半は `pixel_position_ids` の最初の座標で、後半は行で回転させます。
# 画像の前処理はこの最初の座標に列を入れるので、これは半分割配置の RoPE-Axial です。
# 学習型の表を併用するエンコーダもあります。Gemma 4 は軸ごとの表を 1 つずつ持って足し合わせます。
# Qwen3-VL のエンコーダは 2 次元 RoPE に加えて $48 \times 48$ の表を持ち、画像ごとに双線形補間して使います。
# 次のセルでは両方の回転を `apply_rope` から組み立て、2 つのパッチと $d = 8$ のヘッドについて transformers 5.24.0 が出力した値と比べます。

# %%
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
# [multimodal RoPE](../docs/glossary.md#multimodal-rope) gives every token three
# coordinates, $(t, h, w)$, and splits the $d/2$ frequencies of a head into
# three consecutive sections, `mrope_section`; for a head of $d = 128$ it is
# $[16, 24, 24]$: frequencies $0$–$15$ turn with $t$, $16$–$39$ with $h$,
# $40$–$63$ with $w$. With $a(i)$ the axis of frequency $i$, pair $i$ of a
# token with coordinates $p$ is rotated by
#
# $$\phi_i = p_{a(i)}\, \theta_i .$$
#
# Hugging Face builds this by computing the angles once per axis and then
# keeping, section by section, the rows of the axis that owns it
# (`Qwen2VLRotaryEmbedding.recomposition_frequencies`). Fed with angles that
# encode their own axis (axis $a$ gets $100a + i$), its output names the axis
# of every frequency; the check compares that output, pasted, with
# `mrope_axes`.

# %% [markdown] lang="ja"
# ## M-RoPE：言語モデルの中の時間・高さ・幅
#
# Qwen2-VL（Wang ら 2024）は、画像や動画のパッチをテキストと一緒に言語モデルへ入力します。
# その[マルチモーダル RoPE](../docs/glossary.ja.md#multimodal-rope) は、各トークンに 3 つの座標 $(t, h, w)$ を持たせ、ヘッドの $d/2$ 個の周波数を
# 連続した 3 つのセクション `mrope_section` に分けます。
# $d = 128$ のヘッドでは $[16, 24, 24]$ で、周波数 $0$〜$15$ が $t$ で、$16$〜$39$ が $h$ で、$40$〜$63$ が $w$ で回ります。
# 周波数 $i$ の軸を $a(i)$ と書くと、座標 $p$ のトークンのペア $i$ は次の角度だけ回転します。
#
# $$\phi_i = p_{a(i)}\, \theta_i .$$
#
# Hugging Face はこれを次の手順で作ります。まず軸ごとに角度を計算し、セクションごとに、
# そのセクションを受け持つ軸の行だけを残します（`Qwen2VLRotaryEmbedding.recomposition_frequencies`）。
# 自分の軸を表す角度（軸 $a$ には $100a + i$）を入力すると、出力から各周波数の軸が読み取れます。
# 次のセルでは、貼り付けたその出力を `mrope_axes` と比べます。

# %%
# transformers 5.24.0: Qwen2VLRotaryEmbedding.recomposition_frequencies with
# mrope_section=[16, 24, 24] on freq[a, ..., i] = 100 a + i, output // 100
hf_qwen2_axes = [0] * 16 + [1] * 24 + [2] * 24
assert mrope_axes([16, 24, 24]).tolist() == hf_qwen2_axes

# %% [markdown] lang="en"
# A text token gets three equal coordinates, $t = h = w = p$. Then
# $p_{a(i)} = p$ for every $i$, the angle is $p\theta_i$ whatever the axis,
# and M-RoPE is exactly 1D RoPE. The Qwen2-VL paper says the same: for text
# the three components use identical position IDs, which makes M-RoPE
# equivalent to 1D RoPE. So on text a model initialised from a text model
# starts with the rotations it was trained with.

# %% [markdown] lang="ja"
# テキストのトークンには 3 つの等しい座標 $t = h = w = p$ を与えます。
# するとどの $i$ でも $p_{a(i)} = p$ なので、軸にかかわらず角度は $p\theta_i$ になり、M-RoPE は 1 次元の RoPE と一致します。
# Qwen2-VL の論文もそう述べています。テキストでは 3 つの成分が同じ位置 ID を使うので、
# M-RoPE は機能的に 1 次元の RoPE と等価になります。
# そのため、テキストのモデルから初期化したモデルは、テキストについては学習時と同じ回転から出発します。

# %%
x = torch.randn(10, 128, dtype=f64)
p = torch.arange(10)
text = apply_mrope(x, p.expand(3, -1), [16, 24, 24], base=1e6)
assert_close(text, apply_rope(x, p, base=1e6))

# %% [markdown] lang="en"
# ## Where the positions continue after an image
#
# In a sequence of text, image and text, Qwen2-VL's vision encoder merges
# $2 \times 2$ patches into one token (`spatial_merge_size = 2`), so an image
# of $H \times W$ patches becomes $H/2 \times W/2$ tokens. `get_rope_index`
# numbers them as follows. Text runs $0, 1, 2, \dots$ on all three axes.
# An image that starts at position $s$ takes $t = s$ for every token and
# $h = s + \text{row}$, $w = s + \text{column}$. The text after it continues
# from the largest coordinate of the image plus one (the paper: each
# modality's numbering starts from the largest position ID of the preceding
# modality plus one). For an image that is
#
# $$s' = s + \max(H/2,\ W/2).$$
#
# The position then grows more slowly than the token count: a square image
# of $N$ tokens advances it by $\sqrt{N}$, and any image by
# $\max(H/2, W/2) \ge \sqrt{N}$ (3 for the $2 \times 3$ tokens below).
# The Qwen3-VL documentation draws a practical consequence for context
# extension (see
# [*Extending RoPE's context*](09-rope-context.ipynb#yarn-interpolation-by-parts-and-a-temperature)):
# since these positions grow more slowly than the token count, it advises a
# smaller YaRN factor, 2 or 3 rather than 4 to go from 256K to 1M tokens.
# Hugging Face stores the
# difference as `rope_deltas`, the largest position plus one minus the
# sequence length, and adds it to the positions of generated tokens. The
# check rebuilds the positions with `grid_positions` and compares them with
# those that transformers 5.24.0 returns for 3 text tokens, an image of
# $4 \times 6$ patches (2 × 3 tokens) and 2 text tokens. The function also
# takes videos, and the rule that the next section needs.

# %% [markdown] lang="ja"
# ## 画像のあとの位置の続き方
#
# テキスト、画像、テキストと並ぶ系列では、Qwen2-VL の画像エンコーダが $2 \times 2$ のパッチを 1 つのトークンにまとめます
# （`spatial_merge_size = 2`）。したがって $H \times W$ パッチの画像は $H/2 \times W/2$ 個のトークンになります。
# `get_rope_index` はこれらに次のように番号を振ります。
# テキストは 3 つの軸とも $0, 1, 2, \dots$ と進みます。
# 位置 $s$ から始まる画像では、どのトークンも $t = s$ で、$h = s + \text{row}$、$w = s + \text{column}$ です。
# そのあとのテキストは、画像の座標の最大値に 1 を足したところから続きます。
# 論文も、各モダリティの位置の番号は直前のモダリティの最大の位置 ID に 1 を足した値から始める、と述べています。
# 画像の場合、それは次の値です。
#
# $$s' = s + \max(H/2,\ W/2).$$
#
# このため、位置はトークンの数よりゆっくり進みます。
# $N$ トークンの正方形の画像なら位置は $\sqrt{N}$ だけ進み、一般の画像では $\max(H/2, W/2) \ge \sqrt{N}$ だけ進みます
# （下の $2 \times 3$ トークンの例では 3 です）。
# Qwen3-VL のドキュメントは、ここからコンテキストを伸ばすときの実用上の注意を導いています（[「RoPE のコンテキスト長を伸ばす」](09-rope-context.ipynb#yarn部分ごとの補間と温度)の章を参照）。
# 位置がトークンの数よりゆっくり増えるので、YaRN の係数は小さめにするよう勧めています。256K から 1M トークンに伸ばすなら、4 ではなく 2 か 3 です。
# Hugging Face はこの差を `rope_deltas`（位置の最大値に 1 を足し、系列長を引いたもの）として保持し、生成するトークンの位置に足します。
# 次のセルでは、`grid_positions` で位置を組み立て直し、transformers 5.24.0 が返す位置と比べます。
# 系列はテキスト 3 トークン、$4 \times 6$ パッチ（2 × 3 トークン）の画像、テキスト 2 トークンです。
# この関数は動画も受け付け、次の節で使う規則も選べます。


# %%
def qwen_positions(segments, merge=2, rule="paper", interval=1.0):
    """segments: ("text", n) or ("vision", T, H, W), T temporal patches of
    H x W patches; returns (3, L). After a vision segment the position goes
    on at its largest coordinate plus one (rule "paper") or advances by
    max(H, W) // merge (rule "hf", transformers 5.24.0)."""
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
        if rule == "paper":
            start = int(parts[-1].max()) + 1
        else:
            start += max(h, w)
    return torch.cat(parts, dim=1)


image = [("text", 3), ("vision", 1, 4, 6), ("text", 2)]
pos = qwen_positions(image)
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
print(pos)

# %% [markdown] lang="en"
# For a video, `get_rope_index` of transformers 5.24.0 advances the position
# by $\max(H/2, W/2)$ as well, not by the largest coordinate plus one. One
# temporal step is one temporal patch: the vision encoder merges
# `temporal_patch_size` $= 2$ consecutive frames into one patch
# (`Qwen2VLVisionConfig`). With more temporal patches than rows or columns
# of tokens, the next text position falls below the video's last temporal
# coordinate: after one text token, 4 temporal patches (8 frames) of one
# token each get the temporal coordinates $1, \dots, 4$, and the next text
# token gets 2 where the paper's rule gives 5. Earlier copies of the function
# (`st_idx = llm_pos_ids_list[-1].max() + 1`) follow the paper's rule. For
# images, the case checked above, both agree.

# %% [markdown] lang="ja"
# 動画の場合も、transformers 5.24.0 の `get_rope_index` は $\max(H/2, W/2)$ だけ位置を進め、
# 座標の最大値に 1 を足した値にはしません。
# ここで時間の 1 ステップは、時間方向のパッチ 1 つです。
# 画像エンコーダは、連続する `temporal_patch_size` $= 2$ 枚のフレームを 1 つのパッチにまとめます（`Qwen2VLVisionConfig`）。
# 時間方向のパッチの数がトークンの行数や列数より多いと、次のテキストの位置が動画の最後の時間座標より小さくなります。
# たとえばテキスト 1 トークンのあとに、1 トークンずつの時間方向のパッチを 4 つ（8 フレーム）置くと、時間座標は $1, \dots, 4$ になります。
# 次のテキストのトークンの位置は、論文の規則なら 5 ですが、transformers 5.24.0 では 2 です。
# この関数の以前の版（`st_idx = llm_pos_ids_list[-1].max() + 1`）は論文の規則どおりです。
# 上で確かめた画像の場合は、2 つの規則は同じ位置を与えます。

# %%
# transformers 5.24.0: Qwen2VLModel.get_rope_index(..., mm_token_type_ids=
#   [[0, 2, 2, 2, 2, 0, 0]], video_grid_thw=[[4, 2, 2]]): temporal row of
#   position_ids[:, 0], rope_deltas
hf_video_t, hf_video_delta = [0, 1, 2, 3, 4, 2, 3], -2
video = [("text", 1), ("vision", 4, 2, 2), ("text", 2)]
by_hf, by_paper = qwen_positions(video, rule="hf"), qwen_positions(video)
assert by_hf[0].tolist() == hf_video_t
assert int(by_hf.max()) + 1 - by_hf.shape[1] == hf_video_delta
assert by_paper[0, 5] == 5  # the paper's rule: largest coordinate plus one

# %% [markdown] lang="en"
# The relative property holds in each axis separately, as for axial RoPE:
# shifting the query and the key by the same amount along each axis (the
# amount may differ from one axis to another) leaves the score unchanged,
# while changing one coordinate of the key alone changes it.

# %% [markdown] lang="ja"
# 相対位置の性質は、軸ごとの RoPE と同じく、各軸で別々に成り立ちます。
# 各軸についてクエリとキーを同じ量だけずらしても（ずらす量は軸ごとに違ってかまいません）、スコアは変わりません。
# キーの座標を 1 つだけ変えると、スコアは変わります。

# %%
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
# ## Time in Qwen2.5-VL and Qwen3-VL
#
# In Qwen2-VL the temporal coordinate counts temporal patches, pairs of
# sampled frames, whatever the frame rate. Qwen2.5-VL (Bai et al. 2025) ties
# it to time instead: Hugging Face's `get_rope_index` multiplies the index
# $k$ of a temporal patch by `tokens_per_second` and by `second_per_grid_t`,
# the seconds that one temporal patch spans (`temporal_patch_size / fps`),
# and rounds down:
#
# $$t_k = s + \lfloor k\, \rho\, \tau \rfloor,$$
#
# where $\rho$ is `tokens_per_second` and $\tau$ is `second_per_grid_t`.
# With `tokens_per_second` $= 2$ (the value of this example; Hugging Face's
# default configuration has 4), a video sampled at 2 frames per second (one
# temporal patch per second) and one sampled at 4 (two per second) give the
# same temporal coordinate to the same second. Qwen3-VL drops temporal
# coordinates tied to frames or seconds (its report's abstract: from T-RoPE
# to explicit textual timestamp alignment). Hugging Face splits a video into
# one grid per temporal patch, each laid out like an image with a constant
# $t$, and the processor writes a timestamp such as `<1.5 seconds>` in the
# text before each. The temporal coordinate of a patch then only says where
# it starts in the sequence. The check compares the rule above and this
# layout with the positions that transformers 5.24.0 returns (two text
# tokens stand for each timestamp).

# %% [markdown] lang="ja"
# ## Qwen2.5-VL と Qwen3-VL での時間
#
# Qwen2-VL の時間座標は、フレームレートにかかわらず時間方向のパッチ、つまりサンプルしたフレームの 2 枚組を数えます。
# Qwen2.5-VL（Bai ら 2025）は、代わりに時間座標を時刻に結び付けます。
# Hugging Face の `get_rope_index` は、時間方向のパッチの番号 $k$ に `tokens_per_second` と `second_per_grid_t`
# （時間方向のパッチ 1 つが占める秒数で、`temporal_patch_size / fps`）を掛け、小数点以下を切り捨てます。
#
# $$t_k = s + \lfloor k\, \rho\, \tau \rfloor,$$
#
# ここで $\rho$ は `tokens_per_second`、$\tau$ は `second_per_grid_t` です。
# この例では `tokens_per_second` $= 2$ とします（Hugging Face の既定の設定では 4 です）。
# すると、毎秒 2 フレームでサンプルした動画（1 秒に時間方向のパッチ 1 つ）と、毎秒 4 フレームでサンプルした動画（1 秒に 2 つ）で、
# 同じ時刻に同じ時間座標が付きます。
# Qwen3-VL は、フレームや秒に結び付いた時間座標をやめました
# （技術報告の要旨によれば、T-RoPE から、テキストのタイムスタンプで時刻を明示する方式への移行です）。
# Hugging Face は動画を時間方向のパッチごとの格子に分け、どの格子も画像と同じく $t$ を一定にして並べます。
# 前処理は、各格子の前のテキストに `<1.5 seconds>` のようなタイムスタンプを書き込みます。
# そのためパッチの時間座標は、そのパッチが系列のどこから始まるかを表すだけになります。
# 次のセルでは、上の規則とこの並べ方を、transformers 5.24.0 が返す位置と比べます（各タイムスタンプは 2 トークンのテキストで代用します）。

# %%
# transformers 5.24.0: Qwen2_5_VLModel.get_rope_index with Qwen2_5_VLConfig(
#   vision_config={"tokens_per_second": 2}), 1 text token, a video, 1 text
#   token: video_grid_thw [[4, 2, 2]] with second_per_grid_ts [1.0] (2 frames
#   per second), [[8, 2, 2]] with [0.5] (4 per second); temporal rows
hf_2fps = [0, 1, 3, 5, 7, 2]
hf_4fps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 2]
at_2fps = qwen_positions(
    [("text", 1), ("vision", 4, 2, 2), ("text", 1)], rule="hf", interval=2 * 1.0
)
at_4fps = qwen_positions(
    [("text", 1), ("vision", 8, 2, 2), ("text", 1)], rule="hf", interval=2 * 0.5
)
assert at_2fps[0].tolist() == hf_2fps and at_4fps[0].tolist() == hf_4fps
assert at_2fps[0, 1:5].tolist() == at_4fps[0, 1:9:2].tolist()  # same seconds
# Qwen3VLModel.get_rope_index(..., video_grid_thw=[[2, 4, 4]]): 1 text
#   token, per temporal patch 2 text tokens (a timestamp) and 2 x 2 video
#   tokens, then 1 text token; position_ids[:, 0]
hf_qwen3 = [[0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 7, 7, 7, 9],
            [0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 7, 8, 8, 9],
            [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 7, 8, 9]]  # fmt: skip
stamp, patch = ("text", 2), ("vision", 1, 4, 4)
qwen3 = qwen_positions(
    [("text", 1), stamp, patch, stamp, patch, ("text", 1)], rule="hf"
)
assert qwen3.tolist() == hf_qwen3
print("temporal coordinates of the two patches:", qwen3[0, [3, 9]].tolist())

# %% [markdown] lang="en"
# ## Qwen3-VL: dealing the frequencies out in turn
#
# With consecutive blocks each axis sees only one band of the spectrum.
# Frequencies fall with $i$, so in Qwen2-VL's $[16, 24, 24]$ the temporal
# axis takes the 16 fastest and the width the 24 slowest; no axis has both
# fast pairs (fine differences) and slow pairs (long ranges). Third-party
# summaries of the Qwen3-VL report say that the report calls this an
# imbalanced frequency spectrum that weakens long-video understanding (the
# report's abstract says only that the interleaved M-RoPE gives stronger
# spatial-temporal modelling).
# Qwen3-VL interleaves instead, which Qwen's documentation calls
# full-frequency allocation over time, height and width. With three axes,
# frequency $i$ goes to axis $i \bmod 3$, $t\,h\,w\,t\,h\,w \dots$, for as
# long as the sections allow; Hugging Face's
# `Qwen3VLTextRotaryEmbedding` with `mrope_section = [24, 20, 20]` gives $h$
# frequencies $1, 4, \dots, 58$ and $w$ frequencies $2, 5, \dots, 59$, and
# $t$ everything else, including the last four. The check compares
# `mrope_axes(..., interleave=True)` with the axis list that transformers
# 5.24.0 prints, obtained as for Qwen2-VL above.

# %% [markdown] lang="ja"
# ## Qwen3-VL：周波数を順番に配る
#
# 連続したブロックでは、各軸はスペクトルの 1 つの帯域しか使えません。
# 周波数は $i$ とともに小さくなるので、Qwen2-VL の $[16, 24, 24]$ では、時間の軸が最も速い 16 個を、
# 幅の軸が最も遅い 24 個を受け持ちます。速いペア（細かい差）と遅いペア（長い範囲）の両方を持つ軸はありません。
# Qwen3-VL の技術報告を紹介する第三者の記事によれば、報告はこれを周波数スペクトルの偏りと呼び、長い動画の理解を弱める原因としています。
# ただし、報告の要旨そのものは、交互の M-RoPE によって時間と空間のモデル化が強くなる、と述べているだけです。
# Qwen3-VL は代わりに、周波数を各軸へ 1 つずつ順番に配ります。
# Qwen のドキュメントは、これを時間・高さ・幅への全周波数の割り当てと説明しています。
# 3 つの軸では、セクションが許す限り周波数 $i$ を軸 $i \bmod 3$ に割り当て、$t\,h\,w\,t\,h\,w \dots$ と並べます。
# Hugging Face の `Qwen3VLTextRotaryEmbedding` に `mrope_section = [24, 20, 20]` を与えた場合、
# $h$ は周波数 $1, 4, \dots, 58$ を、$w$ は $2, 5, \dots, 59$ を受け持ちます。最後の 4 つを含む残りは、すべて $t$ です。
# 次のセルでは、`mrope_axes(..., interleave=True)` を、上の Qwen2-VL と同じ方法で transformers 5.24.0 から得た軸の一覧と比べます。

# %%
# transformers 5.24.0: Qwen3VLTextRotaryEmbedding.recomposition_frequencies
# with mrope_section=[24, 20, 20] on freq[a, ..., i] = 100 a + i, // 100
hf_qwen3_axes = [0, 1, 2] * 20 + [0] * 4
assert mrope_axes([24, 20, 20], interleave=True).tolist() == hf_qwen3_axes

# %% [markdown] lang="en"
# The wavelength $2\pi/\theta_i$ of each pair says which distances it
# resolves. The table gives, per axis, the shortest and the longest
# wavelength it owns, for $d = 128$ and Qwen2-VL's base $10^6$ (Hugging
# Face's default `rope_theta` for Qwen2-VL; its default for Qwen3-VL is
# $5 \cdot 10^5$, and the table keeps $10^6$ for both so that only the
# assignment differs). With blocks, the temporal axis stops at a wavelength
# of about 160 positions and the width starts at about 35,000; interleaved,
# every axis spans nearly the whole range. The check compares each end with
# $2\pi\, b^{2i/d}$ at the pair $i$ that the axis lists above give.

# %% [markdown] lang="ja"
# 各ペアの波長 $2\pi/\theta_i$ は、そのペアがどの距離を見分けられるかを表します。
# 下の表は、$d = 128$、Qwen2-VL の底 $10^6$（Hugging Face の Qwen2-VL の `rope_theta` の既定値）について、
# 各軸が受け持つ最短と最長の波長を示します。
# Hugging Face の Qwen3-VL の既定値は $5 \cdot 10^5$ ですが、割り当て方だけを比べるために、表ではどちらも $10^6$ にしています。
# ブロックに分けると、時間の軸の波長は最長でも約 160 位置です。幅の軸の波長は約 35,000 位置から始まります。
# 順番に配ると、どの軸もほぼ全範囲にわたります。
# 次のセルでは、両端の波長を、上の軸の一覧から決まるペア $i$ での $2\pi\, b^{2i/d}$ と比べます。

# %%
wavelength = 2 * math.pi / rope_frequencies(128, base=1e6).double()
rows = ["| assignment | axis | shortest | longest |", "|---|---|---|---|"]
spans = {}
for name, sections, inter in [
    ("blocks [16, 24, 24]", [16, 24, 24], False),
    ("interleaved [24, 20, 20]", [24, 20, 20], True),
]:
    axis = mrope_axes(sections, interleave=inter)
    for a, label in enumerate("thw"):
        wl = wavelength[axis == a]
        spans[name, label] = (wl.min().item(), wl.max().item())
        rows.append(f"| {name} | {label} | {wl.min():,.1f} | {wl.max():,.0f} |")
display(Markdown("\n".join(rows)))


def wavelength_of(i):  # 2 pi b^(2i/d), d = 128, b = 10^6
    return 2 * math.pi * 10 ** (6 * 2 * i / 128)


ends = {  # (first, last) pair of each axis, from the axis lists above
    ("blocks [16, 24, 24]", "t"): (0, 15),
    ("blocks [16, 24, 24]", "h"): (16, 39),
    ("blocks [16, 24, 24]", "w"): (40, 63),
    ("interleaved [24, 20, 20]", "t"): (0, 63),
    ("interleaved [24, 20, 20]", "h"): (1, 58),
    ("interleaved [24, 20, 20]", "w"): (2, 59),
}
for key, (first, last) in ends.items():
    assert math.isclose(spans[key][0], wavelength_of(first), rel_tol=1e-5)
    assert math.isclose(spans[key][1], wavelength_of(last), rel_tol=1e-5)

# %% [markdown] lang="en"
# The figure draws the same thing pair by pair: each frequency index $i$ is
# a dot at its wavelength, coloured by its axis.

# %% [markdown] lang="ja"
# 図は同じことをペアごとに描いたものです。番号 $i$ ごとに、その波長の高さに点を打ち、受け持つ軸で色分けしています。

# %% alt={"en": ["Wavelength 2π/θ_i on a log axis against the frequency index i from 0 to 63, d = 128, base 10^6, two panels. Top, Qwen2-VL's blocks [16, 24, 24]: t holds indices 0–15 (wavelengths 6 to about 160), h 16–39, w 40–63 (about 35,000 to 5.1 million). Bottom, Qwen3-VL's interleaved [24, 20, 20]: t, h and w alternate along the whole curve."], "ja": ["d = 128、底 10^6 での波長 2π/θ_i（対数軸）を、周波数の番号 i（0〜63）に対して描いた 2 段の図。上は Qwen2-VL のブロック（セクションは 16、24、24）です。軸 t が番号 0〜15（波長 6〜約 160）、h が 16〜39、w が 40〜63（約 35,000〜510 万）を受け持ちます。下は Qwen3-VL の交互の割り当て（セクションは 24、20、20）で、3 つの軸が曲線全体にわたって交互に並びます。"]}
colours = plt.get_cmap("viridis")([0.0, 0.5, 0.85])
fig, axes = plt.subplots(2, 1, figsize=(7, 4.4), sharex=True)
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

# %% [markdown] lang="en"
# Interleaving does not touch the relative property, which depends only on
# each frequency being tied to one axis: the same shifts as before leave the
# score unchanged.

# %% [markdown] lang="ja"
# 交互の割り当ても相対位置の性質を損ないません。この性質は、各周波数が 1 つの軸に結び付いていることだけに依存するからです。
# 先ほどと同じようにずらしても、スコアは変わりません。

# %%
kw = dict(interleave=True, sections=(24, 20, 20))
s = mrope_score([5, 7, 2], [5, 9, 4], **kw)
shifted = mrope_score([5 + 3, 7 - 2, 2 + 11], [5 + 3, 9 - 2, 4 + 11], **kw)
assert math.isclose(s, shifted, abs_tol=1e-9)
assert abs(s - mrope_score([5, 7, 2], [6, 9, 4], **kw)) > 1e-4

# %% [markdown] lang="en"
# ## What to remember
#
# - ViT learns one vector per patch (and one for the class token) and, at a
#   new resolution, resamples the patch rows as an image (linear in the
#   official code, bicubic in Hugging Face); MAE fixes the table to a 1D
#   sine–cosine code of the column in the first half of the channels and of
#   the row in the second.
# - Axial 2D RoPE rotates half of the pairs with the column and half with
#   the row; the score is a sum of a function of $\Delta c$ and a function
#   of $\Delta r$, relative in each axis. At a new resolution it needs no
#   resampling; in Heo et al.'s DeiT-III table, for the Base and Large
#   models, it keeps or gains accuracy at 384 pixels where the learned table
#   loses it (not on every model they list).
# - A sum of that form cannot follow a diagonal; RoPE-Mixed gives each pair a
#   learned frequency on both axes, and stays relative.
# - M-RoPE ties each frequency to time, height or width; text tokens have
#   three equal coordinates and get plain RoPE; after an image the position
#   continues at its largest coordinate plus one (Hugging Face advances it by
#   $\max(H/2, W/2)$, after a video too).
# - One temporal step is a temporal patch of 2 frames in Qwen2-VL and a
#   fixed span of time in Qwen2.5-VL; Qwen3-VL gives each temporal patch its
#   own grid and marks the time with textual timestamps.
# - Blocks give each axis one band of frequencies; Qwen3-VL deals them out in
#   turn so that every axis has fast and slow pairs.

# %% [markdown] lang="ja"
# ## まとめ
#
# - ViT はパッチごとに 1 本のベクトルと、クラストークンの 1 本を学習します。
#   解像度が変わると、パッチの行を画像として補間し直します（公式のコードは線形補間、Hugging Face は双三次補間です）。
#   MAE は表を固定し、チャネルの前半に列の、後半に行の 1 次元の正弦・余弦の符号を入れます。
# - 軸ごとの 2 次元 RoPE は、ペアの半分を列で、半分を行で回転させます。
#   スコアは $\Delta c$ の関数と $\Delta r$ の関数の和で、軸ごとに相対位置だけで決まります。
#   解像度が変わっても補間し直す必要はありません。
#   Heo らの DeiT-III の表の Base と Large では、学習型の表が正解率を落とす 384 ピクセルでも、正解率を保つか上げています。
#   ただし、表に載っているすべてのモデルでそうなるわけではありません。
# - その形の和では斜めの方向を表せません。RoPE-Mixed は各ペアに両方の軸の学習可能な周波数を持たせ、相対位置の性質も保ちます。
# - M-RoPE は各周波数を時間・高さ・幅のどれかに結び付けます。
#   テキストのトークンは 3 つの等しい座標を持つので、通常の RoPE になります。
#   画像のあとの位置は座標の最大値に 1 を足したところから続きます（Hugging Face は、動画のあとも含めて $\max(H/2, W/2)$ だけ進めます）。
# - 時間の 1 ステップは、Qwen2-VL では 2 フレームからなる時間方向のパッチ、Qwen2.5-VL では決まった長さの時間です。
#   Qwen3-VL は時間方向のパッチごとに別の格子を作り、時刻はテキストのタイムスタンプで示します。
# - ブロックでは各軸が 1 つの帯域の周波数しか持てません。Qwen3-VL は周波数を順番に配り、どの軸にも速いペアと遅いペアがあるようにします。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. In Qwen2-VL ($d = 128$, base $10^6$, blocks $[16, 24, 24]$), after how
#    many temporal positions does the slowest temporal pair complete one
#    turn, and how many sampled frames is that? Answer the first question
#    for Qwen3-VL's interleaved $[24, 20, 20]$ with the same base (a
#    hypothetical one: Hugging Face's default for Qwen3-VL is
#    $5 \cdot 10^5$), and say why the second has no answer there.
# 2. A prompt has 5 text tokens, an image of $16 \times 16$ patches (merged
#    $2 \times 2$) and 1 text token. What are the coordinates of the last
#    token, and what is `rope_deltas`?
# 3. Show that in MAE's table the patches at $(r, c)$ and $(r, c + \Delta)$
#    have the dot product $d/4 + \sum_k \cos(\Delta\,\omega_k)$, whatever
#    $r$ and $c$; check it for $d = 64$ and $\Delta = 3$.

# %% [markdown] lang="ja"
# ## 演習
#
# 1. Qwen2-VL（$d = 128$、底 $10^6$、ブロック $[16, 24, 24]$）で、時間の軸の最も遅いペアが 1 回転するのは、時間座標がいくつ進んだときでしょうか。
#    それは、サンプルしたフレームの何枚分でしょうか。
#    Qwen3-VL の交互の割り当て $[24, 20, 20]$ について、同じ底で 1 つ目の問いに答えてください（底は仮定の値で、Hugging Face の Qwen3-VL の既定値は $5 \cdot 10^5$ です）。
#    また、そこでは 2 つ目の問いに答えがない理由を説明してください。
# 2. プロンプトが、テキスト 5 トークン、$16 \times 16$ パッチの画像（$2 \times 2$ ずつまとめます）、テキスト 1 トークンからなるとします。
#    最後のトークンの座標と `rope_deltas` はいくつでしょうか。
# 3. MAE の表で、$(r, c)$ と $(r, c + \Delta)$ のパッチの内積は、$r$ と $c$ の値と関係なく
#    $d/4 + \sum_k \cos(\Delta\,\omega_k)$ と等しいことを示してください。$d = 64$、$\Delta = 3$ で確かめてください。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** The slowest temporal pair of the blocks is $i = 15$, with
# wavelength $2\pi \cdot 10^{6 \cdot 30/128}$, about 160 temporal positions.
# One temporal position of a Qwen2-VL video is one temporal patch of
# `temporal_patch_size` $= 2$ frames, so that is about 320 sampled frames,
# whatever the frame rate. Interleaved, the temporal axis owns $i = 63$,
# wavelength $2\pi \cdot 10^{6 \cdot 126/128}$, about 5.1 million positions.
# In Qwen3-VL that is no number of frames: each temporal patch is a grid of
# its own, and from one patch to the next the position advances by the
# tokens of a timestamp and by $\max(H/2, W/2)$. The check computes both
# wavelengths from the powers of the base, compares them with
# `rope_frequencies`, and converts to frames with the frames per temporal
# patch of the Hugging Face configuration (a constant copied from it).

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** ブロックでの時間の軸の最も遅いペアは $i = 15$ で、波長は $2\pi \cdot 10^{6 \cdot 30/128}$、時間座標で約 160 です。
# Qwen2-VL の動画では、時間座標の 1 が、`temporal_patch_size` $= 2$ 枚のフレームからなる時間方向のパッチ 1 つにあたります。
# したがってフレームレートにかかわらず、サンプルしたフレームの約 320 枚分です。
# 交互の割り当てでは時間の軸が $i = 63$ を受け持ち、波長は $2\pi \cdot 10^{6 \cdot 126/128}$、位置で約 510 万です。
# Qwen3-VL では、これをフレームの枚数には換算できません。
# 時間方向のパッチはそれぞれ別の格子になり、次のパッチまでに位置はタイムスタンプのトークンの数と $\max(H/2, W/2)$ だけ進むからです。
# 次のセルでは、両方の波長を底のべき乗から計算して `rope_frequencies` と比べます。
# フレーム数への換算には、時間方向のパッチ 1 つあたりのフレーム数として、Hugging Face の設定から写した定数を使います。

# %% tags=["solution"]
blocks_t = 2 * math.pi * 10 ** (6 * 30 / 128)
inter_t = 2 * math.pi * 10 ** (6 * 126 / 128)
theta = rope_frequencies(128, base=1e6).double()
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

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** The row halves are equal, so their dot product is
# $\sum_k (\sin^2 + \cos^2) = d/4$. The column halves give
# $\sum_k \sin(c\omega_k)\sin((c+\Delta)\omega_k) + \cos(c\omega_k)\cos((c+\Delta)\omega_k) = \sum_k \cos(\Delta\,\omega_k)$.
# The check takes every pair of patches three columns apart on a
# $6 \times 8$ grid.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 行の符号を入れた後半どうしは等しいので、その内積は $\sum_k (\sin^2 + \cos^2) = d/4$ です。
# 列の符号を入れた前半どうしの内積は $\sum_k \sin(c\omega_k)\sin((c+\Delta)\omega_k) + \cos(c\omega_k)\cos((c+\Delta)\omega_k) = \sum_k \cos(\Delta\,\omega_k)$ になります。
# 次のセルでは、$6 \times 8$ の格子で 3 列離れたすべてのパッチの組を調べます。

# %% tags=["solution"]
d, delta = 64, 3
rc = grid_positions(6, 8)
pe = mae_table(rc, d)
omega = 10000.0 ** (-torch.arange(d // 4, dtype=f64) / (d // 4))
expected = d / 4 + torch.cos(delta * omega).sum()
left = rc[1] < 8 - delta
dots = (pe[left] * pe[left.nonzero()[:, 0] + delta]).sum(-1)
assert_close(dots, expected.expand_as(dots))
print(f"{expected.item():.4f} for all {len(dots)} pairs")

# %% [markdown] lang="en"
# ## References
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
#   <https://arxiv.org/abs/2403.13298>; code, `deit/models_v2_rope.py`,
#   and the accuracy table of its README:
#   <https://github.com/naver-ai/rope-vit>
# - Wang, P. et al. (2024). *Qwen2-VL: Enhancing Vision-Language Model's
#   Perception of the World at Any Resolution*.
#   <https://arxiv.org/abs/2409.12191>
# - Bai, S. et al. (2025). *Qwen2.5-VL Technical Report*.
#   <https://arxiv.org/abs/2502.13923>
# - Qwen Team (2025). *Qwen3-VL Technical Report*.
#   <https://arxiv.org/abs/2511.21631>
# - Qwen3-VL repository and documentation.
#   <https://github.com/QwenLM/Qwen3-VL>
# - Hugging Face transformers 5.24.0: `models/vit/modeling_vit.py`,
#   `models/vit_mae/modeling_vit_mae.py`,
#   `models/qwen2_vl/modeling_qwen2_vl.py` (`get_rope_index`,
#   `Qwen2VLRotaryEmbedding`, `Qwen2VLVisionRotaryEmbedding`),
#   `models/qwen2_5_vl/modeling_qwen2_5_vl.py`,
#   `models/qwen3_vl/modeling_qwen3_vl.py` and `processing_qwen3_vl.py`,
#   `models/gemma4/modeling_gemma4.py` (`Gemma4VisionRotaryEmbedding`).
#   <https://github.com/huggingface/transformers>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary
#   Position Embedding*. <https://arxiv.org/abs/2104.09864>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Dosovitskiy, A. et al. (2021). *An Image is Worth 16x16 Words:
#   Transformers for Image Recognition at Scale*.
#   <https://arxiv.org/abs/2010.11929>
#   公式コード：`vit_jax/checkpoint.py`（`scipy.ndimage.zoom(..., order=1)`）。<https://github.com/google-research/vision_transformer>
# - He, K. et al. (2022). *Masked Autoencoders Are Scalable Vision
#   Learners*. <https://arxiv.org/abs/2111.06377>
#   公式コード：`util/pos_embed.py`。<https://github.com/facebookresearch/mae>
# - Heo, B., Park, S., Han, D. and Yun, S. (2024). *Rotary Position
#   Embedding for Vision Transformer*. ECCV 2024.
#   <https://arxiv.org/abs/2403.13298>
#   公式コード：`deit/models_v2_rope.py`。README に正解率の表があります。<https://github.com/naver-ai/rope-vit>
# - Wang, P. et al. (2024). *Qwen2-VL: Enhancing Vision-Language Model's
#   Perception of the World at Any Resolution*.
#   <https://arxiv.org/abs/2409.12191>
# - Bai, S. et al. (2025). *Qwen2.5-VL Technical Report*.
#   <https://arxiv.org/abs/2502.13923>
# - Qwen Team (2025). *Qwen3-VL Technical Report*.
#   <https://arxiv.org/abs/2511.21631>
# - Qwen3-VL のリポジトリとドキュメント。
#   <https://github.com/QwenLM/Qwen3-VL>
# - Hugging Face transformers 5.24.0：`models/vit/modeling_vit.py`、
#   `models/vit_mae/modeling_vit_mae.py`、
#   `models/qwen2_vl/modeling_qwen2_vl.py`（`get_rope_index`、
#   `Qwen2VLRotaryEmbedding`、`Qwen2VLVisionRotaryEmbedding`）、
#   `models/qwen2_5_vl/modeling_qwen2_5_vl.py`、
#   `models/qwen3_vl/modeling_qwen3_vl.py` と `processing_qwen3_vl.py`、
#   `models/gemma4/modeling_gemma4.py`（`Gemma4VisionRotaryEmbedding`）。
#   <https://github.com/huggingface/transformers>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary
#   Position Embedding*. <https://arxiv.org/abs/2104.09864>
