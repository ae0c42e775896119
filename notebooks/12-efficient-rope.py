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
# # Implementing RoPE efficiently
#
# RoPE does three flops per element and must read and write every query and key at
# least once, so its cost is the bytes it moves and, for a single new token, the
# kernels it launches. Hugging Face's eager formula moves five times the bytes of that
# floor; one fused kernel that reads each element once and writes it once reaches it.
# Below: the byte count, `posenc`'s Triton kernel read line by line, where vLLM,
# FlashInfer, FlashAttention and Liger Kernel fuse RoPE into neighbouring kernels,
# what a cos/sin table costs against computing cos and sin on the fly, and what the
# stored CPU record shows. There is no GPU record yet.

# %% [markdown] lang="ja"
# # RoPE を効率よく実装する
#
# RoPE の演算は要素あたり 3 flop だけですが、すべてのクエリとキーを少なくとも 1 回読み、1 回書かなければなりません。
# そのためコストを決めるのは動かすバイト数で、新しいトークン 1 つだけを処理するときは起動するカーネルの数です。
# Hugging Face の eager モードの式は、この下限の 5 倍のバイト数を動かします。
# 各要素を 1 回読んで 1 回書くだけの融合したカーネルなら、下限に届きます。
# この章では、まずバイト数を数え、`posenc` の Triton カーネルを 1 行ずつ読みます。
# 続いて、vLLM、FlashInfer、FlashAttention、Liger Kernel が RoPE をどのカーネルと融合しているかを見ます。
# さらに、cos と sin の表を使う場合とその場で計算する場合の違いを調べ、保存した CPU の計測記録が示すことをまとめます。
# GPU の計測記録はまだありません。

# %%
import itertools
import json
import os

# Triton runs a kernel in its interpreter, on CPU tensors, when this is set
# before the kernel is defined: this page is built without a GPU.
os.environ["TRITON_INTERPRET"] = "1"

import matplotlib.pyplot as plt
import torch
import triton
import triton.language as tl
from IPython.display import Markdown, display
from torch.testing import assert_close

from posenc import RotaryEmbedding, apply_rope, rope_frequencies
from posenc.rope_triton import apply_rope_triton
from posenc_lab import RECORDS, record_path
from posenc_lab.plotting import use_site_style
from posenc_lab.references import (
    hf_apply_rotary,
    hf_cos_sin,
    meta_apply_rotary,
    meta_freqs_cis,
)
from posenc_lab.traffic import count_traffic

use_site_style()
torch.manual_seed(0)
records = {
    n: json.loads(record_path(f"cpu-rope-{n}").read_text())
    for n in ("1-thread", "2-threads")
}

# %% [markdown] lang="en"
# ## Bytes, not flops
#
# At position $p$, RoPE turns each pair $(a_i, b_i)$ of a query or key by the angle
# $p\theta_i$:
# $$a_i' = a_i\cos p\theta_i - b_i\sin p\theta_i, \qquad b_i' = b_i\cos p\theta_i + a_i\sin p\theta_i$$
# That is four multiplications and two additions per pair, 3 flops per element. An
# [out-of-place](../docs/glossary.md#in-place-out-of-place) rotation must read every
# element and write its result, so with elements of $e$ bytes (4 in float32, 2 in
# bfloat16) it moves at least $2e$ bytes per element: the
# [floor](../docs/glossary.md#floor). Its
# [arithmetic intensity](../docs/glossary.md#arithmetic-intensity) is at most
# $$I = \frac{3}{2e}\ \mathrm{flop/B}$$
# 3/8 in float32 and 3/4 in bfloat16. An NVIDIA H200 (SXM) does 67 TFLOP/s of float32
# arithmetic outside its tensor cores and moves 4.8 TB/s from its memory: 14 flops in
# the time of one byte. Far below that ratio the arithmetic units wait on memory, and
# a call takes at least its bytes divided by the
# [memory bandwidth](../docs/glossary.md#memory-bandwidth) (the
# [roofline model](../docs/glossary.md#roofline-model)); a CPU core is in the same
# position. So an implementation of RoPE controls two things: the bytes it moves and,
# when there are few, the number of [kernels](../docs/glossary.md#kernel-kernel-launch)
# it launches to move them. The shapes are those of Llama 3 8B's attention: $n_q = 32$
# query heads and $n_k = 8$ key heads of $d = 128$ features, all of them rotated
# ($r = d$); the symbols follow the [notation page](../docs/notation.md).

# %% [markdown] lang="ja"
# ## flop ではなくバイトを数える
#
# RoPE は、位置 $p$ のクエリやキーのペア $(a_i, b_i)$ を、それぞれ角度 $p\theta_i$ だけ回します。
# $$a_i' = a_i\cos p\theta_i - b_i\sin p\theta_i, \qquad b_i' = b_i\cos p\theta_i + a_i\sin p\theta_i$$
# ペアあたり掛け算 4 回と足し算 2 回、要素あたり 3 flop です。
# [アウトオブプレース](../docs/glossary.ja.md#in-place-out-of-place)の回転は、すべての要素を読み、その結果を書かなければなりません。
# 要素 1 つが $e$ バイト（float32 で 4、bfloat16 で 2）なら、要素あたり少なくとも $2e$ バイトを動かします。
# これが[下限](../docs/glossary.ja.md#floor)です。
# したがって[演算強度](../docs/glossary.ja.md#arithmetic-intensity)は次の値を超えません。
# $$I = \frac{3}{2e}\ \mathrm{flop/B}$$
# float32 で 3/8、bfloat16 で 3/4 です。
# NVIDIA H200（SXM）は、テンソルコア以外の演算器で float32 の演算を毎秒 67 兆回こなし、メモリから毎秒 4.8 TB を運びます。
# 1 バイトを運ぶ間に 14 flop をこなせることになります。
# 演算強度がこの比よりずっと小さいと演算器はメモリを待つことになり、1 回の呼び出しには「バイト数 ÷ [メモリ帯域幅](../docs/glossary.ja.md#memory-bandwidth)」以上の時間がかかります（[ルーフラインモデル](../docs/glossary.ja.md#roofline-model)）。
# CPU のコアでも事情は同じです。
# つまり RoPE の実装が左右できるのは 2 つです。動かすバイト数と、バイト数が少ないときには、それを動かすために起動する[カーネル](../docs/glossary.ja.md#kernel-kernel-launch)の数です。
# 形状は Llama 3 8B のアテンションに合わせます。
# クエリのヘッドが $n_q = 32$ 個、キーのヘッドが $n_k = 8$ 個で、次元数はどれも $d = 128$、すべての次元を回します（$r = d$）。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。

# %% tags=["check"] summary={"en": "3 flops per element, counted operation by operation; I is 3/8 and 3/4; an H200 does 14 flops per byte", "ja": "演算ごとに数えると要素あたり 3 flop、I は 3/8 と 3/4、H200 は 1 バイトあたり 14 flop です"}
x = torch.randn(1, 8, 16, 128)
a, b = x.chunk(2, dim=-1)
angle = torch.arange(16.0)[:, None] * rope_frequencies(128)  # (16, 64)
cos, sin = angle.cos(), angle.sin()
t = count_traffic(lambda: (a * cos - b * sin, b * cos + a * sin))
assert t.ops == ["mul", "mul", "sub", "mul", "mul", "add"]
flops = sum(written // 4 for _, _, written in t.details)  # 1 per value
assert flops == 3 * x.numel()
assert (3 / (2 * 4), 3 / (2 * 2)) == (0.375, 0.75)
assert round(67e12 / 4.8e12) == 14  # H200 datasheet: FP32 and bandwidth

# %% [markdown] lang="en"
# ## What eager PyTorch moves
#
# Count bytes with a simple model: every operation reads each of its inputs once and
# writes its output once, and nothing stays in a cache for the next one
# (`posenc_lab.traffic.count_traffic` counts exactly this). Hugging Face rotates a
# whole head as $x' = x \odot c + \mathrm{rotate\_half}(x) \odot s$, with tables $c$ and
# $s$ of the whole head. Per float32 element of $x$, its five operations are the
# product with $c$, the negation of one half, the concatenation that builds
# $\mathrm{rotate\_half}(x)$, the product with $s$ and the sum:
# $$\beta_{\mathrm{HF}} = (4+4) + (2+2) + (4+4) + (4+4) + (8+4) = 40$$
# five times the floor of 8. Four [temporaries](../docs/glossary.md#temporary-tensor)
# are [materialised](../docs/glossary.md#materialise) and read back. Writing straight
# into the output with `out=` and `addcmul_`, as `posenc`'s eager `apply_rope` does,
# removes them, but still takes three passes:
# $$\beta_{\mathrm{posenc}} = (4+4) + \tfrac{1}{2}(4+4+4) + \tfrac{1}{2}(4+4+4) = 20$$
# Eager code cannot go lower: each output needs two products and a sum, no single
# ATen operation computes that from $a_i$, $b_i$ and the tables, and every operation
# writes its result to memory for the next to read. Meta's Llama keeps the members of
# a pair side by side (the [interleaved layout](../docs/glossary.md#interleaved-layout))
# and reads them as complex numbers: one complex multiplication computes both products
# and the sum in registers, which moves the floor. In the half layout the partner of
# $a_i$ lies $d/2$ features away, and no view makes a pair one complex number. In bfloat16 the floor
# is 4 and the eager formula moves 20, while `posenc`'s passes, which rotate in float32
# and round once, move 22. The figure shows the counts of the stored record, at
# Llama 3 8B's shapes, with the tables included.

# %% [markdown] lang="ja"
# ## eager モードの PyTorch が動かすバイト数
#
# バイト数は単純なモデルで数えます。
# 各演算は入力をそれぞれ 1 回読み、出力を 1 回書きます。次の演算のためのものはキャッシュに何も残らないとします（`posenc_lab.traffic.count_traffic` はまさにこれを数えます）。
# Hugging Face はヘッド全体の回転を $x' = x \odot c + \mathrm{rotate\_half}(x) \odot s$ と書きます。$c$ と $s$ はヘッド全体の長さの表です。
# float32 の $x$ の要素あたりで、5 つの演算は、$c$ との積、半分の正負の反転、$\mathrm{rotate\_half}(x)$ を作る連結、$s$ との積、和です。
# $$\beta_{\mathrm{HF}} = (4+4) + (2+2) + (4+4) + (4+4) + (8+4) = 40$$
# 下限 8 の 5 倍です。
# 4 つの[一時テンソル](../docs/glossary.ja.md#temporary-tensor)を[実体化](../docs/glossary.ja.md#materialise)し、もう一度読むからです。
# `posenc` の eager モードの `apply_rope` のように、`out=` と `addcmul_` で出力に直接書けば一時テンソルはなくなりますが、それでも 3 回のパスが必要です。
# $$\beta_{\mathrm{posenc}} = (4+4) + \tfrac{1}{2}(4+4+4) + \tfrac{1}{2}(4+4+4) = 20$$
# eager モードのコードでは、これより減らせません。
# 各出力には積 2 つと和 1 つが要ります。
# ところが、$a_i$、$b_i$ と表からこれを 1 回で計算する ATen の演算はありません。
# そして、どの演算も結果をメモリに書き、次の演算はそれを読み直します。
# Meta の Llama はペアの 2 つの成分を隣り合わせに置き（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）、複素数として読みます。
# 複素数の掛け算 1 回が 2 つの積と和をレジスタの中で計算するので、動かすのは下限のバイト数です。
# 半分割配置では $a_i$ の相手が $d/2$ 次元先にあり、どんなビューでもペアを 1 つの複素数にはできません。
# bfloat16 では下限が 4 で、eager モードの式は 20 を動かします。一方 `posenc` のパスは float32 で回して 1 回だけ丸めるので、22 を動かします。
# 図は、保存した計測記録の数を Llama 3 8B の形状で示したもので、表の読み込みも含みます。

# %% tags=["check"] summary={"en": "the counts by operation, tables apart, in float32 and bfloat16; the record's counts are what the counter gives today", "ja": "float32 と bfloat16 で演算ごとに数えた値は表の分を除いて本文どおりで、記録の数はいま数え直した値と同じです"}
import posenc.rope

x = torch.randn(1, 8, 64, 128)  # large enough for the three passes
n = x.numel()
positions = torch.arange(64)
c, s = hf_cos_sin(positions, 128)  # (64, 128): each half repeated
t = count_traffic(lambda: hf_apply_rotary(x, c, s))
assert t.ops == ["mul", "neg", "cat", "mul", "add"]
assert t.total == 40 * n + 2 * c.nbytes  # c and s read once each
half_c, half_s = c[:, :64], s[:, :64]  # (64, 64): cos and sin of the pairs
t = count_traffic(lambda: posenc.rope._rotate(x, half_c, half_s, "half"))
assert t.ops == ["mul", "addcmul_", "addcmul_"]
assert t.total == 20 * n + 3 * half_c.nbytes  # cos once, sin twice
t = count_traffic(lambda: torch.mul(x, 2.0))
assert t.total == 8 * n
x16, c16, s16 = x.bfloat16(), c.bfloat16(), s.bfloat16()  # bfloat16
t = count_traffic(lambda: hf_apply_rotary(x16, c16, s16))
assert t.total == 20 * n + 2 * c16.nbytes
t = count_traffic(lambda: posenc.rope._rotate(x16, half_c, half_s, "half"))
assert t.ops == ["mul", "addcmul_", "addcmul_", "copy_"]  # copy_: round once
assert t.total == 22 * n + 3 * half_c.nbytes
freqs_cis = meta_freqs_cis(positions, 128)  # (64, 64) complex64
t = count_traffic(lambda: meta_apply_rotary(x, freqs_cis))
assert t.ops == ["mul"] and t.total == 8 * n + freqs_cis.nbytes
# the record's counts: the same counter on q and k of Llama 3 8B
case = records["1-thread"]["cases"]["prefill-float32"]
q = torch.randn(case["q_shape"])
k = torch.randn(case["k_shape"])
c, s = hf_cos_sin(torch.arange(q.shape[2]), 128)
t = count_traffic(lambda: (hf_apply_rotary(q, c, s), hf_apply_rotary(k, c, s)))
counted = case["contenders"]["hf_formula"]["bytes_per_element"]
assert t.total / (q.numel() + k.numel()) == counted
assert abs(counted - 40.4) < 0.05  # 40, and 0.4 for the tables
del q, k

# %% [markdown] lang="en"
# ## One pass: a fused kernel
#
# A GPU kernel can hold $a_i$ and $b_i$ in registers while it computes both outputs, so
# one read and one write of each element suffice. The question is how to divide the
# work. RoPE's unit is the token: its position $p$ selects one row of the cos/sin
# table, $r/2$ values of each, and every head of $q$ and of $k$ at that token uses the
# same row. So `posenc`'s kernel runs one program per token. A program loads its
# position, loads the row once, then walks over the heads of $q$ and then of $k$, a
# block of heads at a time: it loads both halves of each head, rotates them and stores
# the result. With the table in float32 and an int64 position per token, it moves per
# element
# $$\beta_{\mathrm{fused}} = 2e + \frac{4r + 8}{(n_q + n_k)\,d}$$
# The row serves the 40 heads of Llama 3 8B, so the table adds 0.1 byte: 8.1 bytes in
# float32, 4.1 in bfloat16. vLLM's CUDA kernel and Liger Kernel's Triton kernel divide
# the work the same way, one thread block or program per token. A grid over tokens
# gives thousands of programs in a prefill and one in the decode step of a single
# sequence, whose work is too small to matter; FlashAttention's stand-alone Triton
# kernel tiles heads by tokens instead, which makes more programs and loads the table
# tile once per block of heads.

# %% [markdown] lang="ja"
# ## 1 回のパスで済ませる：融合したカーネル
#
# GPU のカーネルなら、$a_i$ と $b_i$ をレジスタに置いたまま 2 つの出力を計算できるので、各要素の読み込みと書き込みは 1 回ずつで済みます。
# 問題は、仕事をどう分けるかです。
# RoPE の単位はトークンです。
# トークンの位置 $p$ が cos と sin の表の 1 行（それぞれ $r/2$ 個の値）を選び、そのトークンの $q$ と $k$ のすべてのヘッドが同じ行を使います。
# そこで `posenc` のカーネルは、トークン 1 つにプログラムを 1 つ割り当てます。
# プログラムは位置を読み、表の行を 1 回だけ読み込みます。
# そのあと $q$ のヘッド、続いて $k$ のヘッドを、いくつかずつまとめて順にたどります。
# 各ヘッドの前半と後半を読み込み、回して、結果を書き込みます。
# 表が float32、位置がトークンあたり int64 1 つなら、要素あたりに動かすバイト数は次のとおりです。
# $$\beta_{\mathrm{fused}} = 2e + \frac{4r + 8}{(n_q + n_k)\,d}$$
# Llama 3 8B では 1 行を 40 個のヘッドが使うので、表の分は 0.1 バイトだけです。
# float32 で 8.1 バイト、bfloat16 で 4.1 バイトになります。
# vLLM の CUDA カーネルと Liger Kernel の Triton カーネルも、トークン 1 つにスレッドブロックかプログラムを 1 つ割り当てる同じ分け方です。
# トークンで分けると、プリフィルではプログラムが数千になり、系列 1 つのデコードの 1 ステップでは 1 つになります。後者は仕事が小さすぎて問題になりません。
# FlashAttention の単独の Triton カーネルはヘッドとトークンの両方でタイルに分けるので、プログラムの数は増え、表のタイルはヘッドのブロックごとに 1 回読み込みます。

# %% tags=["check"] summary={"en": "the formula is the bytes of the tensors the kernel reads and writes, for Llama 3 8B's shapes", "ja": "式の値は、Llama 3 8B の形状でカーネルが読み書きするテンソルのバイト数と一致します"}
n_q, n_k, d, r, tokens = 32, 8, 128, 128, 1024


def beta_fused(e):
    """Bytes per element of the fused kernel: the formula above."""
    return 2 * e + (4 * r + 8) / ((n_q + n_k) * d)


for dtype in (torch.float32, torch.bfloat16):
    q = torch.empty(tokens, n_q, d, dtype=dtype, device="meta")
    k = torch.empty(tokens, n_k, d, dtype=dtype, device="meta")
    rows = torch.empty(tokens, r // 2, device="meta")  # one row per token
    pos = torch.empty(tokens, dtype=torch.int64, device="meta")
    moved = 2 * (q.nbytes + k.nbytes) + 2 * rows.nbytes + pos.nbytes
    beta = moved / (q.numel() + k.numel())
    assert abs(beta - beta_fused(dtype.itemsize)) < 1e-12
    assert f"{beta:.1f}" == {torch.float32: "8.1", torch.bfloat16: "4.1"}[dtype]

# %% tags=["figure"] alt={"en": ["Horizontal bar chart of bytes moved per element of q and k at Llama 3 8B's shapes, counted in the stored record, float32 and bfloat16 bars side by side for each contender. hf_formula is longest (about 40 in float32, 20 in bfloat16), hf_formula_out slightly shorter, apply_rope and rotary_embedding about 23 in float32 and 25 in bfloat16, complex and floor at about 8 (float32 only for complex), and the fused kernel's formula at 8.1 and 4.1, next to the floor's 8 and 4."], "ja": ["Llama 3 8B の形状で q と k の要素あたりに動くバイト数を、比較対象ごとに示した横棒グラフ。保存した計測記録が数えた値を、float32 と bfloat16 の棒を並べて示します。いちばん長いのは hf_formula（float32 で約 40、bfloat16 で約 20）で、hf_formula_out が少し短くなります。apply_rope と rotary_embedding は float32 で約 23、bfloat16 で約 25 です。complex（float32 のみ）と floor は約 8 です。融合したカーネルの式の値 8.1 と 4.1 は、下限の 8 や 4 とほぼ同じ長さです。"]}
names = [
    "floor",
    "hf_formula",
    "hf_formula_out",
    "complex",
    "apply_rope",
    "rotary_embedding",
]
cases = records["1-thread"]["cases"]
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for j, (dtype, e) in enumerate((("float32", 4), ("bfloat16", 2))):
    found = cases[f"prefill-{dtype}"]["contenders"]
    values = [found[m]["bytes_per_element"] if m in found else 0 for m in names]
    values.append(beta_fused(e))
    ax.barh(
        [y + 0.4 * j for y in range(len(values))],
        values,
        height=0.4,
        label=dtype,
    )
ax.set_yticks([y + 0.2 for y in range(len(names) + 1)])
ax.set_yticklabels([*names, "$\\beta_{\\mathrm{fused}}$"])
ax.invert_yaxis()
ax.set_xlabel(r"$\beta$ (B)")
ax.legend(frameon=False)
plt.show()

# %% [markdown] lang="en"
# Here is that kernel reduced to its structure: inputs of shape `(tokens, heads, d)`,
# contiguous, the half layout, float32. `rope_kernel` is one program; Triton runs it
# once per token (`grid = (tokens,)`), and `tl.program_id(0)` says which. It loads the
# position, then the table row at that position, once, and hands both halves of the
# row to `rotate_heads` for $q$ and then for $k$. `rotate_heads` takes `BLOCK_H` heads
# at a time: `tl.arange` builds the block's addresses as a `BLOCK_H` by $d/2$ tile,
# the first `tl.load` reads the $a$ half of each head and the second the $b$ half,
# $d/2$ values further on, and the mask `ok` keeps the last block inside the tensor.
# Each output is one product and one [fused multiply-add](../docs/glossary.md#fused-multiply-add)
# (`tl.fma`), as in `apply_rope`, and `tl.store` writes it.
# Nothing else touches memory.

# %% [markdown] lang="ja"
# 次のセルは、このカーネルを骨組みだけにしたものです。
# 入力は形状 `(tokens, heads, d)` の連続したテンソルで、半分割配置、float32 に限ります。
# `rope_kernel` が 1 つのプログラムです。
# Triton はこれをトークンごとに 1 回実行し（`grid = (tokens,)`）、`tl.program_id(0)` がどのトークンかを表します。
# プログラムは位置を読み、その位置の表の行を 1 回だけ読み込みます。
# そして $q$ について、続いて $k$ について、行の前半と後半を `rotate_heads` に渡します。
# `rotate_heads` はヘッドを `BLOCK_H` 個ずつ扱います。
# `tl.arange` でブロックのアドレスを `BLOCK_H` × $d/2$ のタイルとして作り、1 つ目の `tl.load` で各ヘッドの $a$ の半分を、2 つ目で $d/2$ 先にある $b$ の半分を読みます。
# マスク `ok` は、最後のブロックがテンソルの外を読まないようにします。
# 各出力は `apply_rope` と同じく積 1 回と[融合積和演算](../docs/glossary.ja.md#fused-multiply-add)（`tl.fma`）1 回で計算し、`tl.store` がそれを書きます。
# メモリに触れるのはこれだけです。


# %%
@triton.jit
def rotate_heads(
    x, out, row, n_heads, c, s, HALF: tl.constexpr, BLOCK_H: tl.constexpr
):
    """Rotate the n_heads heads of one token; row: offset of its first head."""
    cols = tl.arange(0, HALF)[None, :]  # the a half of a head
    for h0 in range(0, n_heads, BLOCK_H):  # a block of heads at a time
        heads = h0 + tl.arange(0, BLOCK_H)[:, None]
        ok = heads < n_heads  # the last block may stick out
        at = row + heads * (2 * HALF) + cols  # (BLOCK_H, HALF) addresses
        a = tl.load(x + at, mask=ok)
        b = tl.load(x + at + HALF, mask=ok)  # b: d/2 further on
        tl.store(out + at, tl.fma(-b, s, a * c), mask=ok)  # a cos - b sin
        tl.store(out + at + HALF, tl.fma(a, s, b * c), mask=ok)  # b cos + a sin


@triton.jit
def rope_kernel(q, k, q_out, k_out, positions, cos, sin, n_q, n_k,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr):  # fmt: skip
    token = tl.program_id(0)  # one program per token
    p = tl.load(positions + token)  # its position picks one row
    cols = tl.arange(0, HALF)[None, :]
    c = tl.load(cos + p * HALF + cols)  # the row, read once
    s = tl.load(sin + p * HALF + cols)
    rotate_heads(q, q_out, token * n_q * 2 * HALF, n_q, c, s, HALF, BLOCK_H)
    rotate_heads(k, k_out, token * n_k * 2 * HALF, n_k, c, s, HALF, BLOCK_H)


def rope_fused(q, k, positions, cos, sin, block_h=4):
    """q (s, n_q, d), k (s, n_k, d), positions (s,); cos, sin (n, d/2)."""
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    rope_kernel[(q.shape[0],)](  # the grid: one program per token
        q, k, q_out, k_out, positions, cos, sin, q.shape[1], k.shape[1],
        HALF=q.shape[2] // 2, BLOCK_H=block_h,
    )  # fmt: skip
    return q_out, k_out


# two packed sequences: positions restart inside the batch of tokens
positions = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7])
q, k = torch.randn(14, 6, 64), torch.randn(14, 2, 64)  # 6 and 2 heads
rope = RotaryEmbedding(64, max_positions=16)
table_cos = rope.cos_cached.contiguous()  # (16, 32): one row per position
table_sin = rope.sin_cached.contiguous()
q_rot, k_rot = rope_fused(q, k, positions, table_cos, table_sin)
print(f"{q.shape[0]} programs rotated q {tuple(q.shape)}, k {tuple(k.shape)}")

# %% tags=["check"] summary={"en": "the small kernel gives posenc's kernel's bits, and apply_rope's result", "ja": "小さなカーネルの結果は posenc のカーネルとビット単位で一致し、apply_rope とも一致します"}
# posenc's kernel takes (b, n, s, d) views: (s, n, d) -> (1, n, s, d)
as_bnsd = lambda t: t.unsqueeze(0).transpose(1, 2)  # noqa: E731
rq, rk = apply_rope_triton(
    as_bnsd(q), as_bnsd(k), positions, rope.cos_cached, rope.sin_cached
)
assert torch.equal(rq, as_bnsd(q_rot)) and torch.equal(rk, as_bnsd(k_rot))
for got, x in ((q_rot, q), (k_rot, k)):
    assert_close(got, apply_rope(x.transpose(0, 1), positions).transpose(0, 1))

# %% [markdown] lang="en"
# `posenc.rope_triton.apply_rope_triton` is this kernel with what real inputs need:
# strides, so that $q$ and $k$ may be views of a projection laid out `(b, s, n, d)`;
# 64-bit offsets; the interleaved layout; a
# [partial rotation](../docs/glossary.md#partial-rotation) ($r < d$, the other
# features copied); bfloat16 and float16 inputs, rotated in float32 and rounded once;
# an [in-place](../docs/glossary.md#in-place-out-of-place) mode; a backward pass; and
# positions that are not read back to the host (`check_positions=False`; a position
# outside the table gives NaN instead of an error), which a CUDA graph needs.

# %% [markdown] lang="ja"
# `posenc.rope_triton.apply_rope_triton` は、このカーネルに実際の入力が必要とするものを加えたものです。
# ストライドを扱うので、$q$ と $k$ は `(b, s, n, d)` の並びの射影の出力のビューでもかまいません。
# オフセットは 64 ビットで計算します。
# インターリーブ配置と[部分回転](../docs/glossary.ja.md#partial-rotation)（$r < d$ のとき残りの次元はコピーします）に対応します。
# bfloat16 と float16 の入力は float32 で回して 1 回だけ丸めます。
# [インプレース](../docs/glossary.ja.md#in-place-out-of-place)で書くこともでき、逆伝播もあります。
# さらに、位置の値をホストへ読み戻さずに済ませられます（`check_positions=False`。表の外の位置はエラーではなく NaN になります）。これは CUDA Graphs の中で必要になります。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the backward pass is the same kernel.** A rotation by $p\theta_i$ is
# an orthogonal map, so its transpose, which carries the gradient back, is the
# rotation by $-p\theta_i$. `posenc`'s kernel runs its backward pass as the forward
# pass with $-\sin$ in place of $\sin$ (Liger Kernel does the same), so it costs one
# more pass over the gradients of $q$ and $k$ and nothing else. The cell compares its
# gradients with autograd's through the eager `apply_rope`.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：逆伝播も同じカーネルです**
# 角度 $p\theta_i$ の回転は直交変換なので、勾配を逆向きに運ぶその転置は、角度 $-p\theta_i$ の回転です。
# `posenc` のカーネルは、$\sin$ の代わりに $-\sin$ を使うフォワードパスとして逆伝播を計算します（Liger Kernel も同じです）。
# そのため、逆伝播のコストは $q$ と $k$ の勾配に対するパス 1 回だけです。
# 次のセルでは、その勾配を、eager モードの `apply_rope` を通した自動微分の勾配と比べます。

# %% tags=["deeper", "check"] summary={"en": "the kernel's gradients are autograd's through apply_rope", "ja": "カーネルの勾配は apply_rope を通した自動微分の勾配と一致します"}
qg = as_bnsd(q).detach().requires_grad_()
kg = as_bnsd(k).detach().requires_grad_()
out_q, out_k = apply_rope_triton(
    qg, kg, positions, rope.cos_cached, rope.sin_cached
)
gq, gk = torch.randn_like(out_q), torch.randn_like(out_k)
dq, dk = torch.autograd.grad((out_q, out_k), (qg, kg), (gq, gk))
qe = as_bnsd(q).detach().requires_grad_()
ke = as_bnsd(k).detach().requires_grad_()
eager = (apply_rope(qe, positions), apply_rope(ke, positions))
eq, ek = torch.autograd.grad(eager, (qe, ke), (gq, gk))
assert_close(dq, eq)
assert_close(dk, ek)

# %% [markdown] lang="en"
# ## Where production systems fuse RoPE
#
# A fused RoPE kernel still reads $q$ and $k$ from memory and writes them back, and
# the next kernel reads them again. Production systems therefore fold RoPE into the
# kernel before it or after it:
#
# | system | where RoPE runs | cos and sin |
# |---|---|---|
# | vLLM | `rotary_embedding`, in place on $q$ and $k$, one thread block per token; then a separate kernel writes $k$ and $v$ into the [KV cache](../docs/glossary.md#kv-cache). Where the attention backend supports it, a compilation pass replaces the two by one fused operation for small batches (decode steps), and keeps two kernels for prefill | a table of (positions, $r$), cos then sin, in $q$'s dtype, read at each token's position |
# | FlashInfer | `apply_rope_with_cos_sin_cache_inplace` (vLLM's interface) or `apply_rope_pos_ids_inplace`, in place on $q$ and $k$ | a float32 table, or computed on the fly from `rope_theta` |
# | FlashAttention 2 | inside the attention kernel: `flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` rotates the new keys as it appends them to the KV cache, and the queries as it loads them | tables of (positions, $r/2$) in $q$'s dtype; interleaved pairs unless `rotary_interleaved=False` |
# | Liger Kernel | one program per token, in place; the backward pass with $-\sin$ | Hugging Face's cos and sin, gathered per token |
# | `posenc` | `apply_rope_triton`, out of place or in place | a float32 table, read at each token's position |
#
# Qwen3 normalises every head of $q$ and $k$ with an RMSNorm, which has a learned
# weight per feature, before RoPE. The norm needs the sum of squares over the whole
# head, so the unit of work is a head: vLLM's `fusedQKNormRopeKernel`, adapted from
# TensorRT-LLM, gives each head of each token to one warp, which reads it once,
# normalises it, rotates it in registers and writes it back. Llama 4, where its configuration enables QK-norm, goes the other
# way round on its RoPE layers: RoPE first, then a norm without weights,
# $\mathrm{norm}(x) = x / \sqrt{\mathrm{mean}(x^2) + \epsilon}$. A rotation $R_p$
# keeps the length of a head, so
# $$\lVert R_p x \rVert = \lVert x \rVert \quad\Rightarrow\quad \mathrm{norm}(R_p x) = R_p\, \mathrm{norm}(x)$$
# and the weightless norm gives the same result before RoPE or after it. Qwen3's
# weighted norm commutes with RoPE only when the two features of every pair carry the
# same weight, so there the order is fixed by the checkpoint.

# %% [markdown] lang="ja"
# ## 実際のシステムは RoPE をどこで融合しているか
#
# 融合した RoPE のカーネルでも、$q$ と $k$ をメモリから読んで書き戻すことに変わりはなく、次のカーネルがそれをもう一度読みます。
# そのため実際のシステムは、RoPE を前か後ろのカーネルに組み込みます。
#
# | システム | RoPE を実行する場所 | cos と sin |
# |---|---|---|
# | vLLM | `rotary_embedding`。$q$ と $k$ をインプレースで回し、トークン 1 つにスレッドブロックを 1 つ割り当てます。そのあと別のカーネルが $k$ と $v$ を [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に書きます。アテンションのバックエンドが対応していれば、コンパイル時のパスが、小さなバッチ（デコードの 1 ステップ）ではこの 2 つを 1 つの融合した演算に置き換え、プリフィルでは 2 つのカーネルのままにします | 形状（位置の数、$r$）の表。cos、sin の順に並び、$q$ の dtype で、各トークンの位置の行を読みます |
# | FlashInfer | `apply_rope_with_cos_sin_cache_inplace`（vLLM と同じインターフェース）か `apply_rope_pos_ids_inplace`。$q$ と $k$ をインプレースで回します | float32 の表か、`rope_theta` からその場で計算 |
# | FlashAttention 2 | アテンションのカーネルの中です。`flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` は、新しいキーは KV キャッシュに追加するときに、クエリは読み込むときに回します | 形状（位置の数、$r/2$）の表で、$q$ の dtype。`rotary_interleaved=False` でなければインターリーブ配置のペア |
# | Liger Kernel | トークン 1 つにプログラム 1 つ、インプレース。逆伝播は $-\sin$ を使います | Hugging Face の cos と sin をトークンごとに集めたもの |
# | `posenc` | `apply_rope_triton`。アウトオブプレースかインプレース | float32 の表で、各トークンの位置の行を読みます |
#
# Qwen3 は RoPE の前に、$q$ と $k$ の各ヘッドを RMSNorm で正規化します。RMSNorm は次元ごとに学習した重みを持ちます。
# この正規化にはヘッド全体の 2 乗和が必要なので、仕事の単位はヘッドです。
# vLLM の `fusedQKNormRopeKernel`（TensorRT-LLM のものを改変したもの）は、各トークンの各ヘッドをワープ 1 つに割り当てます。
# ワープはヘッドを 1 回読み、正規化し、レジスタの中で回して書き戻します。
# Llama 4 は、設定で QK-norm を使う場合、RoPE の層で逆の順序をとります。
# 先に RoPE、その後に重みのない正規化 $\mathrm{norm}(x) = x / \sqrt{\mathrm{mean}(x^2) + \epsilon}$ です。
# 回転 $R_p$ はヘッドの長さを変えないので、次の式が成り立ちます。
# $$\lVert R_p x \rVert = \lVert x \rVert \quad\Rightarrow\quad \mathrm{norm}(R_p x) = R_p\, \mathrm{norm}(x)$$
# つまり重みのない正規化は、RoPE の前後どちらに置いても同じ結果になります。
# Qwen3 の重み付きの正規化が RoPE と交換できるのは、すべてのペアで 2 つの次元の重みが等しいときだけです。そのため順序はチェックポイントで決まっています。

# %% tags=["check"] summary={"en": "a weightless norm commutes with RoPE; a weighted one only with equal weights within each pair", "ja": "重みのない正規化は RoPE と交換でき、重み付きの正規化はペアの中で重みが等しいときだけ交換できます"}
x = torch.randn(4, 128, dtype=torch.float64)
pos = torch.tensor([0, 5, 700, 4095])


def l2norm(v):
    """Llama 4's weightless norm: v / sqrt(mean(v^2) + eps)."""
    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6)


def rot(v):
    return apply_rope(v, pos)


assert_close(l2norm(rot(x)), rot(l2norm(x)))  # Llama 4: either order
w = 1 + 0.1 * torch.randn(128, dtype=torch.float64)  # RMSNorm's weight
assert not torch.allclose(w * l2norm(rot(x)), rot(w * l2norm(x)))
w_pairs = torch.cat((w[:64], w[:64]))  # half layout: i pairs with i + 64
assert_close(w_pairs * l2norm(rot(x)), rot(w_pairs * l2norm(x)))

# %% [markdown] lang="en"
# ## A table, or cos and sin on the fly
#
# A float32 table of $n$ positions holds $4rn$ bytes: 64 MiB for the 131,072 positions
# of Llama 3.1 with $r = 128$. Reading its row costs 0.1 byte per element, as counted
# above. Computing cos and sin on the fly instead costs at least $r/2$ of each per
# token (more if every head recomputes them) and no memory; in a memory-bound kernel
# both are cheap. The difference
# that matters is numerical, and it lies in the angle, not in where the cosine is
# taken. In float32 the angle is the product of a rounded frequency
# $\hat\theta_i = \theta_i(1 + \varepsilon_i)$ and an exact integer position, rounded
# once more; with $|\varepsilon_i| \le \varepsilon$ and the unit roundoff $u = 2^{-24}$,
# $$\lvert \mathrm{fl}(p\,\hat\theta_i) - p\,\theta_i \rvert \le (\varepsilon + u + \varepsilon u)\, p\,\theta_i$$
# an error that grows with the position, to about a hundredth of a radian at
# $p = 131071$. A table built from float64 angles and stored in float32 is within
# $2^{-24}$ of the true cosine at every position; stored in bfloat16, within about
# $2^{-9}$. The figure compares the three. Hugging Face, vLLM and `posenc`'s module all
# form the angle in float32 before they take its cosine; Hugging Face's Qwen3 then
# casts cos and sin to the model's dtype, and FlashAttention takes its tables only in
# $q$'s dtype. A model trained
# with such code has seen float32 angles, often rounded to bfloat16: a more exact table
# gives it numbers it has not seen. FlashInfer's on-the-fly kernels also form a
# float32 product of position and frequency, and take `__sincosf` of it, CUDA's fast
# approximation, whose error bound the CUDA C++ Programming Guide gives only for
# arguments in $[-\pi, \pi]$.

# %% [markdown] lang="ja"
# ## 表を使うか、cos と sin をその場で計算するか
#
# $n$ 個の位置の float32 の表は $4rn$ バイトです。
# Llama 3.1 の 131,072 個の位置、$r = 128$ なら 64 MiB になります。
# 行を読むコストは、上で数えたとおり要素あたり 0.1 バイトです。
# 代わりに cos と sin をその場で計算すると、トークンあたりそれぞれ少なくとも $r/2$ 回の計算がかかります（ヘッドごとに計算し直せばもっとかかります）が、メモリは要りません。
# メモリ律速のカーネルでは、どちらも安いものです。
# 問題になる違いは数値の精度で、それは cos をどこで計算するかではなく、角度にあります。
# float32 の角度は、丸めた周波数 $\hat\theta_i = \theta_i(1 + \varepsilon_i)$ と厳密な整数の位置の積を、もう一度丸めたものです。
# $|\varepsilon_i| \le \varepsilon$、単位丸め誤差を $u = 2^{-24}$ とすると、次の式が成り立ちます。
# $$\lvert \mathrm{fl}(p\,\hat\theta_i) - p\,\theta_i \rvert \le (\varepsilon + u + \varepsilon u)\, p\,\theta_i$$
# この誤差は位置とともに大きくなり、$p = 131071$ では約 0.01 ラジアンに達します。
# float64 の角度から作って float32 で保存した表は、どの位置でも真の cos との差が $2^{-24}$ 以内です。bfloat16 で保存すると約 $2^{-9}$ 以内です。
# 図はこの 3 つを比べたものです。
# Hugging Face、vLLM、`posenc` のモジュールは、どれも角度を float32 で作ってから cos をとります。
# さらに Hugging Face の Qwen3 は cos と sin をモデルの dtype に変換し、FlashAttention は $q$ の dtype の表しか受け付けません。
# このようなコードで学習したモデルが見てきたのは float32 の角度で、多くは bfloat16 に丸めたものです。より正確な表は、モデルが見たことのない数値を与えることになります。
# FlashInfer のその場で計算するカーネルも位置と周波数の float32 の積を作り、その `__sincosf` をとります。
# これは CUDA の高速な近似関数で、CUDA C++ Programming Guide は誤差の上界を $[-\pi, \pi]$ の引数についてしか示していません。

# %% tags=["check"] summary={"en": "the bound holds for Llama 3's frequencies at every position; the table errors are as stated", "ja": "Llama 3 の周波数で、すべての位置について上界が成り立ち、表の誤差も本文どおりです"}
u = 2.0**-24
assert 131072 * 4 * 128 == 64 * 2**20  # 4 r n bytes
i = torch.arange(64, dtype=torch.float64)
theta = 500000.0 ** (-2 * i / 128)  # Llama 3's frequencies, exact
theta32 = rope_frequencies(128, base=500000.0)  # float32, as HF forms them
eps = ((theta32.double() - theta) / theta).abs().max().item()
p = torch.arange(131072)
exact = p.double()[:, None] * theta  # (131072, 64)
angle32 = (p.float()[:, None] * theta32).double()
err = (angle32 - exact).abs()
assert (err <= (eps + u + eps * u) * exact).all()
assert 0.005 < err.max() < 0.02  # about a hundredth of a radian
cos_exact = exact.cos()
cos_from32 = angle32.cos()  # any cos of the float32 angle
cos_table32 = cos_exact.float().double()
cos_table16 = cos_exact.float().bfloat16().double()  # through float32, as HF
assert (cos_table32 - cos_exact).abs().max() <= u
assert (cos_table16 - cos_exact).abs().max() <= 2.0**-9 + u

# %% tags=["figure"] alt={"en": ["Log-log plot of the largest error of cos against the position p, from 1 to 131,072, over the 64 frequencies of Llama 3. The curve for cos of the float32 angle rises roughly in proportion to p, from about 1e-7 to about 1e-2; the bfloat16 table stays flat near 2e-3; the float32 table stays flat near 3e-8. The float32 angle crosses the bfloat16 table's level at a few tens of thousands of positions."], "ja": ["位置 p（1 から 131,072）に対して、Llama 3 の 64 個の周波数での cos の最大誤差を描いた両対数グラフ。float32 の角度の cos の曲線はほぼ p に比例して、約 1e-7 から約 1e-2 まで上がります。bfloat16 の表は 2e-3 付近で平らなまま、float32 の表は 3e-8 付近で平らなままです。float32 の角度の曲線は、数万の位置で bfloat16 の表の水準を超えます。"]}
edges = torch.unique(torch.logspace(0, 17, 60, base=2).long())
curves = {
    r"$\cos \mathrm{fl}(p\hat\theta_i)$": cos_from32,
    r"$\mathrm{fl}_{\mathrm{bf16}}(\cos p\theta_i)$": cos_table16,
    r"$\mathrm{fl}_{32}(\cos p\theta_i)$": cos_table32,
}
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for label, values in curves.items():
    worst = (values - cos_exact).abs().amax(dim=1)  # over the frequencies
    peaks = [worst[lo:hi].max() for lo, hi in itertools.pairwise(edges)]
    ax.loglog(edges[1:], peaks, label=label)
ax.set_xlabel("$p$")
ax.set_ylabel(r"$\max_i\, |\Delta \cos|$")
ax.legend(frameon=False)
plt.show()

# %% [markdown] lang="en"
# ## The decode step: launches, not bytes
#
# A [decode step](../docs/glossary.md#decode-step) rotates one token: $(n_q + n_k)d = 5120$
# elements, 10 KiB of $q$ and $k$ in bfloat16, read once and written once. At 4.8 TB/s
# that is about 4 nanoseconds of memory traffic, against microseconds to launch one
# kernel. Hugging Face's eager formula launches five kernels per tensor, ten per layer;
# the fused kernel launches one. The time goes to launching, and on the CPU to
# dispatching each call into torch: in the stored record the time of a decode call
# grows with the number of ATen operations it dispatches, views included, and not
# with its bytes (the figure). The floor and Meta's complex multiplication move the
# same bytes, yet the second dispatches five times as many operations and takes more
# than twice as long.
#
# On a GPU the remedy is to stop launching kernel by kernel: capture the whole decode
# step, every layer, once in a CUDA graph, and replay it with one launch per step.
# vLLM captures such graphs for a set of padded batch sizes. A graph replays fixed addresses and shapes,
# which constrains RoPE three ways: the table must exist before capture
# (`RotaryEmbedding(d, max_positions=n)`, or `reserve(n)`), the positions live in a
# device tensor updated in place, and nothing may read a value back to the host,
# which is why `apply_rope_triton` takes `check_positions=False`.

# %% [markdown] lang="ja"
# ## デコードの 1 ステップ：バイト数ではなく起動の数
#
# [デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)で回すのはトークン 1 つです。
# 要素は $(n_q + n_k)d = 5120$ 個で、bfloat16 の $q$ と $k$ は 10 KiB です。これを 1 回読んで 1 回書きます。
# 毎秒 4.8 TB なら、このメモリトラフィックは約 4 ナノ秒で済みますが、カーネルの起動には 1 回でマイクロ秒単位の時間がかかります。
# Hugging Face の eager モードの式はテンソルあたり 5 つ、層あたり 10 のカーネルを起動し、融合したカーネルは 1 つだけです。
# 時間は起動に、CPU では torch の呼び出しごとのディスパッチに費やされます。
# 保存した計測記録では、デコードの呼び出しの時間は、バイト数ではなく、ディスパッチする ATen の演算の数（ビューを作る演算も含みます）とともに増えます（図）。
# 下限と Meta の複素数の掛け算は同じバイト数を動かしますが、後者はディスパッチする演算が 5 倍あり、時間も 2 倍以上かかります。
#
# GPU での対策は、カーネルを 1 つずつ起動するのをやめることです。
# すべての層を含むデコードの 1 ステップ全体を一度 CUDA Graphs で記録し、ステップごとに 1 回の起動で再生します。
# vLLM は、パディングしたいくつかのバッチサイズについてこのようなグラフを記録します。
# グラフは決まったアドレスと形状を再生するので、RoPE には 3 つの制約がかかります。
# 表は記録の前に用意しておかなければなりません（`RotaryEmbedding(d, max_positions=n)` か `reserve(n)`）。
# 位置はデバイス上のテンソルに置いてインプレースで更新します。
# そして値をホストに読み戻してはなりません。`apply_rope_triton` に `check_positions=False` があるのはこのためです。


# %% tags=["figure"] alt={"en": ["Scatter plot from the stored one-thread CPU record: time per decode call in microseconds against the number of ATen operations dispatched per call, views included, one point per eager contender, in float32 and bfloat16. The floor (2 operations) is lowest, at a few microseconds; complex (10), rotary_embedding (8 or 10), hf_formula (14) and hf_formula_out (18) form a middle band; the two apply_rope contenders (24 to 30 operations) take the longest, several times the middle band."], "ja": ["保存した 1 スレッドの CPU の計測記録から描いた散布図。eager モードの比較対象ごとに、デコードの呼び出し 1 回あたりの時間（マイクロ秒）を示します。横軸は 1 回の呼び出しがディスパッチする ATen の演算の数（ビューを作る演算も含みます）で、float32 と bfloat16 の点があります。下限（演算 2 つ）がいちばん下で数マイクロ秒です。complex（10）、rotary_embedding（8 か 10）、hf_formula（14）、hf_formula_out（18）は中ほどに集まります。2 つの apply_rope（演算 24 から 30）は最も時間がかかり、中ほどの数倍です。"]}
def dispatched(v):
    """ATen operations a call dispatches: those that move data, and views."""
    return v["ops_per_call"] + v["views_per_call"]


fig, ax = plt.subplots(figsize=(6.4, 3.4))
for dtype in ("float32", "bfloat16"):
    found = records["1-thread"]["cases"][f"decode-{dtype}"]["contenders"]
    eager = {m: v for m, v in found.items() if v["ops_per_call"]}
    ax.scatter(
        [dispatched(v) for v in eager.values()],
        [v["median_ms"] * 1e3 for v in eager.values()],
        label=dtype,
    )
    if dtype == "float32":
        for m, v in eager.items():
            xy = (dispatched(v), v["median_ms"] * 1e3)
            below = m in ("hf_formula_out", "floor", "rotary_embedding")
            ax.annotate(m, xy, fontsize=7, xytext=(5, -9 if below else 2),
                        textcoords="offset points")  # fmt: skip
ax.set_xlabel(r"$n_{\mathrm{ops}}$")
ax.set_ylabel(r"$t$ ($\mu$s)")
ax.xaxis.get_major_locator().set_params(integer=True)
ax.legend(frameon=False)
plt.show()

# %% tags=["check"] summary={"en": "5,120 elements take nanoseconds at 4.8 TB/s; in every decode case of both records the two apply_rope contenders dispatch the most and are the slowest eager ones; complex moves the floor's bytes with five times its operations in more than twice its time", "ja": "5,120 要素は毎秒 4.8 TB ならナノ秒単位です。両方の記録のすべてのデコードで、2 つの apply_rope はディスパッチする演算が最も多く、eager モードの比較対象のうち最も遅くなります。complex は下限と同じバイト数を、5 倍の演算と 2 倍以上の時間で動かします"}
assert (n_q + n_k) * d == 5120 and 5120 * 2 == 10 * 2**10
assert 3e-9 < 2 * 10 * 2**10 / 4.8e12 < 5e-9  # about 4 ns


def slowest_in_decode(rec):
    """The two slowest eager contenders, if the same in every decode case."""
    found = set()
    for dtype in ("float32", "bfloat16"):
        case = rec["cases"][f"decode-{dtype}"]["contenders"]
        eager = {m: v for m, v in case.items() if v["ops_per_call"]}
        slow = sorted(eager, key=lambda m: eager[m]["median_ms"])[-2:]
        most = sorted(dispatched(v) for v in eager.values())[-2:]
        assert sorted(dispatched(eager[m]) for m in slow) == most, slow
        found.add(frozenset(slow))
    return set(found.pop()) if len(found) == 1 else found


DECODE = "the text of the decode section no longer matches the record"
for rec in records.values():
    slow = slowest_in_decode(rec)
    assert slow == {"apply_rope", "apply_rope_interleaved"}, (DECODE, slow)
    found = rec["cases"]["decode-float32"]["contenders"]
    same_bytes = found["complex"]["bytes_per_element"] / 8
    ratio = found["complex"]["ratio_to_floor"]
    assert same_bytes < 1.05 and ratio > 2, (DECODE, ratio)
    assert dispatched(found["complex"]) == 5 * dispatched(found["floor"])

# %% [markdown] lang="en"
# ## What the records show
#
# `python -m posenc_lab.cpu_bench` times, on the CPU, each contender rotating distinct
# $q$ and $k$ of Llama 3 8B's shapes in one call: a [prefill](../docs/glossary.md#prefill)
# of 1024 tokens and a decode step, in float32 and bfloat16, over 40 rounds, each
# round in a random order, outputs preallocated wherever the code allows, page faults
# counted around every sample (how it measures is in `lab/README.md`). The floor is
# `torch.mul(x, 2.0, out=...)` on $q$ and $k$; `compiled_module` is
# `torch.compile(RotaryEmbedding(128, max_positions=4096))`. The table gives each
# contender's median time over the floor's, as the median of the ratios of each
# round, for the one-thread and the two-thread record.

# %% [markdown] lang="ja"
# ## 計測記録が示すこと
#
# `python -m posenc_lab.cpu_bench` は CPU で、Llama 3 8B の形状の別々の $q$ と $k$ を 1 回の呼び出しで回す時間を、比較対象ごとに計ります。
# 対象は 1024 トークンの[プリフィル](../docs/glossary.ja.md#prefill)とデコードの 1 ステップで、それぞれ float32 と bfloat16 です。
# 40 ラウンド計り、各ラウンドの順番はランダムに決めます。
# コードが許す限り出力はあらかじめ確保しておき、サンプルごとにページフォールトを数えます（計り方は `lab/README.md` にあります）。
# 下限は $q$ と $k$ に対する `torch.mul(x, 2.0, out=...)` です。
# `compiled_module` は `torch.compile(RotaryEmbedding(128, max_positions=4096))` です。
# 表は、各比較対象の時間の中央値を下限の時間と比べたもので、ラウンドごとの比の中央値を、1 スレッドと 2 スレッドの計測記録について示します。

# %% tags=["figure"]
order = [
    "floor",
    "hf_formula",
    "hf_formula_out",
    "complex",
    "apply_rope",
    "apply_rope_interleaved",
    "rotary_embedding",
    "compiled_module",
]
names = [
    "prefill-float32",
    "prefill-bfloat16",
    "decode-float32",
    "decode-bfloat16",
]
one, two = (records[t]["cases"] for t in ("1-thread", "2-threads"))
head = "| contender | " + " | ".join(f"`{c}`" for c in names) + " |"
lines = [head, "|---" * (len(names) + 1) + "|"]
for m in order:
    cells = []
    for c in names:
        if m in one[c]["contenders"]:
            r1 = one[c]["contenders"][m]["ratio_to_floor"]
            r2 = two[c]["contenders"][m]["ratio_to_floor"]
            cells.append(f"{r1:.2f} / {r2:.2f}")
        else:
            cells.append("")
    lines.append(f"| `{m}` | " + " | ".join(cells) + " |")


def us(ms):
    """Milliseconds as a short count of microseconds."""
    return f"{ms * 1e3:.0f}" if ms >= 0.1 else f"{ms * 1e3:.3g}"


floors = ", ".join(
    f"{c} {us(f['median_ms'])} µs [{us(f['q1_ms'])}, {us(f['q3_ms'])}]"
    for c, f in ((c, one[c]["contenders"]["floor"]) for c in names)
)
meta = records["1-thread"]["meta"]
caches = ", ".join(
    f"L{c['level']} {c['size_bytes'] // 2**10} KiB"
    for c in meta["caches"]["sysfs"]
    if c["type"] != "Instruction" and c["size_bytes"]
)
working = one["prefill-float32"]["bytes_moved"] // 2**20  # in and out
display(Markdown("\n".join(lines)))
print(f"floor, 1 thread, median [quartiles]: {floors}")
print(f"{meta['cpu']}, caches: {caches}")
print(f"float32 prefill: q, k and their outputs span {working} MiB")
loads = [
    f"{r['meta']['loadavg_before'][0]} / {r['meta']['loadavg_after'][0]}"
    for r in records.values()
]
print(f"load average before / after: {loads[0]} (1 thread), {loads[1]} (2)")

# %% [markdown] lang="en"
# Three things hold in both records. No contender takes a page fault per call in the
# median round, so fresh pages do not decide any time here. In the float32 prefill,
# the two contenders that make a single pass over the data, Meta's complex
# multiplication and the compiled module, come nearest the floor, and every contender
# that makes several passes is further away. In the decode steps, the two `apply_rope`
# contenders, which dispatch the most operations, are the slowest eager ones.
#
# What the ratios do not carry is a verdict for another machine. The floor itself is
# a read and a write of 20 MiB of float32 data; whether that comes from main memory or
# from a last-level cache depends on the machine, whose caches the record lists. A
# ratio to this floor describes this machine.
#
# There is no GPU record: no GPU was available. The benchmark is ready and checked by
# a dry run on the CPU:
# `python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json` times
# the fused kernel against eager code, the compiled module and a copy of $q$ and $k$
# (the floor), on a prefill of 4096 tokens and on decode steps, with CUDA events
# (`lab/README.md` says how). The byte model predicts the bfloat16
# prefill floor at 17.5 µs on an H200, and Hugging Face's formula at five times that
# if it ran at the memory's speed. Whether the fused kernel reaches the
# copy is what that record will show.

# %% [markdown] lang="ja"
# 両方の計測記録で、3 つのことが成り立ちます。
# 1 つ目に、中央値のラウンドで 1 回の呼び出しあたりページフォールトを起こす比較対象はありません。新しいページがどの時間も左右していないということです。
# 2 つ目に、float32 のプリフィルで下限にいちばん近いのは、データを 1 回のパスで処理する 2 つの比較対象、つまり Meta の複素数の掛け算とコンパイルしたモジュールです。
# 複数のパスを使う比較対象は、どれもそれより離れています。
# 3 つ目に、デコードの 1 ステップでは、ディスパッチする演算がいちばん多い 2 つの `apply_rope` が、eager モードの比較対象のうちで最も遅くなります。
#
# これらの比から、ほかのマシンについての結論は引き出せません。
# 下限そのものは 20 MiB の float32 のデータを 1 回読んで 1 回書くことで、それがメインメモリから来るか最終レベルのキャッシュから来るかはマシンによって決まります。キャッシュの大きさは計測記録に書いてあります。
# この下限との比が表すのは、このマシンのことです。
#
# GPU の計測記録はありません。GPU を使えなかったからです。
# ベンチマークは用意してあり、CPU での予行演習で確かめてあります。
# コマンドは `python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json` です。
# 融合したカーネルを、eager モードのコード、コンパイルしたモジュール、そして下限である $q$ と $k$ のコピーと比べます。
# 形状は 4096 トークンのプリフィルとデコードの 1 ステップで、時間は CUDA のイベントで計ります（計り方は `lab/README.md` にあります）。
# バイト数のモデルによる予測では、H200 で bfloat16 のプリフィルの下限は 17.5 µs、Hugging Face の式はメモリの速さで動いたとしてその 5 倍です。
# 融合したカーネルがコピーに届くかどうかは、その計測記録が示すことになります。

# %% tags=["check"] summary={"en": "no page fault per call in the median round; the one-pass contenders lead the float32 prefill in both records; 20 MiB; 17.5 µs; no GPU record is stored", "ja": "中央値のラウンドでページフォールトはなく、両方の記録で float32 のプリフィルは 1 回のパスの比較対象が先頭で、20 MiB、17.5 µs、GPU の計測記録は保存されていません"}
RECORDS_TEXT = "update the three claims of 'What the records show'"
for rec in records.values():
    for case in rec["cases"].values():
        for m, v in case["contenders"].items():
            faults = v["faults_per_call_median"]
            assert faults == 0, (RECORDS_TEXT, case["name"], m, faults)
    found = rec["cases"]["prefill-float32"]["contenders"]
    ranked = sorted(found, key=lambda m: found[m]["ratio_to_floor"])
    nearest = set(ranked[:3])
    assert nearest == {"floor", "complex", "compiled_module"}, (
        RECORDS_TEXT,
        ranked,
    )
    slow = slowest_in_decode(rec)
    assert slow == {"apply_rope", "apply_rope_interleaved"}, (
        RECORDS_TEXT,
        slow,
    )
q_bytes = 32 * 1024 * 128 * 4
assert q_bytes + q_bytes // 4 == 20 * 2**20  # q and k in float32
prefill_bf16 = 2 * (32 + 8) * 4096 * 128 * 2  # read and write, bytes
assert round(prefill_bf16 / 4.8e12 * 1e6, 1) == 17.5
assert not list(RECORDS.glob("gpu-*.json")), "a GPU record: update the text"

# %% [markdown] lang="en"
# ## What to remember
#
# - RoPE does 3 flops per element against at least $2e$ bytes moved: it is
#   [memory bound](../docs/glossary.md#memory-bound) on a CPU and on a GPU. Count bytes.
# - Per float32 element, Hugging Face's eager formula moves 40 bytes, five times the
#   floor; `posenc`'s eager passes move 20. Only one pass reaches 8.
# - The fused kernel runs one program per token: the cos/sin row is loaded once and
#   serves every head of $q$ and $k$, so the table adds 0.1 byte per element at
#   Llama 3 8B's shapes.
# - Production systems fuse further: RoPE with the KV-cache write (vLLM's decode
#   fusion, FlashAttention's `flash_attn_with_kvcache`) and with Qwen3's QK-norm. A
#   weightless norm, as in Llama 4, commutes with RoPE.
# - Angles formed in float32 lose accuracy in proportion to the position, whether
#   they feed a table or a kernel; a bfloat16 table loses $2^{-9}$ everywhere. Reproduce the numbers the model was
#   trained with rather than more exact ones.
# - A decode step costs launches, not bytes: fuse, then capture the step in a CUDA
#   graph, with the table built beforehand and no reads back to the host.
# - A ratio to a CPU floor describes that machine's caches. There is no GPU record
#   yet.

# %% [markdown] lang="ja"
# ## まとめ
#
# - RoPE の演算は要素あたり 3 flop で、動かすバイト数は少なくとも $2e$ です。CPU でも GPU でも[メモリ律速](../docs/glossary.ja.md#memory-bound)なので、バイト数を数えましょう。
# - float32 の要素あたり、Hugging Face の eager モードの式は下限の 5 倍の 40 バイトを動かし、`posenc` の eager モードのパスは 20 バイトを動かします。8 に届くのは 1 回のパスだけです。
# - 融合したカーネルは、トークン 1 つにプログラム 1 つを割り当てます。cos と sin の表の行は 1 回だけ読み込まれ、$q$ と $k$ のすべてのヘッドで使われるので、Llama 3 8B の形状では表の分は要素あたり 0.1 バイトです。
# - 実際のシステムはさらに融合を進めます。RoPE を KV キャッシュへの書き込み（vLLM のデコードでの融合、FlashAttention の `flash_attn_with_kvcache`）や、Qwen3 の QK-norm と融合します。Llama 4 のような重みのない正規化は RoPE と交換できます。
# - float32 で作った角度は、表に使うかカーネルで使うかにかかわらず、位置に比例して精度を失います。bfloat16 の表はどこでも $2^{-9}$ だけ失います。より正確な数値ではなく、モデルの学習に使われた数値を再現しましょう。
# - デコードの 1 ステップのコストは、バイト数ではなく起動の数です。融合したうえで、表を先に作り、ホストへの読み戻しをなくして、ステップを CUDA Graphs で記録しましょう。
# - CPU の下限との比が表すのは、そのマシンのキャッシュです。GPU の計測記録はまだありません。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. vLLM, FlashInfer and Liger Kernel rotate $q$ and $k$ in place. What is
#    $\beta_{\mathrm{fused}}$ for a kernel that writes back into its inputs? Write an
#    eager in-place rotation of the half layout from `mul_` and `addcmul_`, count its
#    bytes with `count_traffic`, and explain why it needs a temporary.
# 2. For Llama 3's frequencies ($\theta_i = 500000^{-2i/128}$), find the first position
#    at which the float32 angle of some pair is off by more than $10^{-3}$ radian, and
#    the first at which the cosine of the float32 angle is further from the true
#    cosine than a bfloat16 table can be.
# 3. Suppose a kernel launch costs 5 µs and memory moves 4.8 TB/s. From how many
#    tokens per call does the fused kernel's memory time in bfloat16 exceed one
#    launch, for Llama 3 8B's heads? How many kernels does Hugging Face's formula
#    launch for RoPE in one decode step of Llama 3 8B's 32 layers?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. vLLM、FlashInfer、Liger Kernel は $q$ と $k$ をインプレースで回します。
#    入力に書き戻すカーネルの $\beta_{\mathrm{fused}}$ はいくつでしょうか。
#    `mul_` と `addcmul_` を使って半分割配置のインプレースの回転を eager モードで書き、そのバイト数を `count_traffic` で数えてください。また、なぜ一時テンソルが必要になるのかを説明してください。
# 2. Llama 3 の周波数（$\theta_i = 500000^{-2i/128}$）について、いずれかのペアの float32 の角度の誤差が初めて $10^{-3}$ ラジアンを超える位置を求めてください。
#    また、float32 の角度の cos と真の cos との差が、bfloat16 の表の誤差の上限を初めて超える位置も求めてください。
# 3. カーネルの起動に 5 µs かかり、メモリが毎秒 4.8 TB を運ぶとします。
#    Llama 3 8B のヘッドで、bfloat16 の融合したカーネルのメモリの時間が起動 1 回を超えるのは、1 回の呼び出しで何トークンからでしょうか。
#    また、Llama 3 8B の 32 層のデコードの 1 ステップで、Hugging Face の式は RoPE のためにいくつのカーネルを起動するでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** In place, a fused kernel still reads every element once and writes
# it once, so $\beta_{\mathrm{fused}}$ is unchanged: writing in place saves the
# output's memory, not traffic. Eager code needs a temporary because each output
# needs both inputs: whichever half is overwritten first, the other half's output still
# needs its old value. Computing $b'$ first and keeping a copy of $b$ for $a'$ takes
# one temporary of half the size of $x$. Counted per element of $x$: the copy
# ($2+2$), the two products in place ($4+4$), and the two `addcmul_` ($6+6$):
# $$\beta_{\mathrm{in\ place}} = (2+2) + (4+4) + (6+6) = 24$$

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** インプレースでも、融合したカーネルは各要素を 1 回読んで 1 回書くので、$\beta_{\mathrm{fused}}$ は変わりません。
# インプレースで節約できるのは出力のメモリで、トラフィックではありません。
# eager モードのコードでは一時テンソルが必要です。各出力は 2 つの入力をどちらも使うので、どちらの半分を先に上書きしても、もう一方の半分の出力にはその古い値が要るからです。
# 先に $b'$ を計算し、$a'$ のために $b$ のコピーを取っておけば、一時テンソルは $x$ の半分の大きさ 1 つで済みます。
# $x$ の要素あたりで数えると、コピー（$2+2$）、インプレースの積 2 回（$4+4$）、`addcmul_` 2 回（$6+6$）です。
# $$\beta_{\mathrm{in\ place}} = (2+2) + (4+4) + (6+6) = 24$$


# %% tags=["solution"]
def rotate_in_place(x, cos, sin):
    """a' = a cos - b sin, b' = b cos + a sin, written into x (half layout)."""
    a, b = x.chunk(2, dim=-1)  # views into x
    b0 = b.clone()  # the temporary: b is overwritten before a' needs it
    b.mul_(cos).addcmul_(a, sin)  # b' = b cos + a sin, a still intact
    a.mul_(cos).addcmul_(b0, sin, value=-1.0)  # a' = a cos - b sin
    return x


x = torch.randn(1, 8, 16, 128)
angle = torch.arange(16.0)[:, None] * rope_frequencies(128)
cos, sin = angle.cos(), angle.sin()  # (16, 64)
expected = apply_rope(x, torch.arange(16))
t = count_traffic(lambda: rotate_in_place(x, cos, sin))
assert_close(x, expected)
tables = 4 * cos.nbytes  # cos twice, sin twice
assert t.total - tables == 24 * x.numel()
print(" ".join(t.ops), f"| {(t.total - tables) / x.numel():g} B per element")


# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** The check of the section on tables already holds every angle error;
# the cell reads the two positions off it. The second is where the float32 angle
# becomes a worse approximation of the true cosine than the rounding of a bfloat16
# table, whose error is at most about $2^{-9}$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 表の節のチェックで、すべての角度の誤差はすでに計算してあります。
# 次のセルは、そこから 2 つの位置を読み取ります。
# 2 つ目は、float32 の角度が、bfloat16 の表の丸め（誤差は約 $2^{-9}$ 以下）よりも真の cos から離れ始める位置です。

# %% tags=["solution"]
angle_off = err.amax(dim=1)  # the worst pair at each position
first_angle = int((angle_off > 1e-3).nonzero()[0])
cos_off = (cos_from32 - cos_exact).abs().amax(dim=1)
first_cos = int((cos_off > 2.0**-9).nonzero()[0])
print(f"angle off by > 1e-3 rad from p = {first_angle}")
print(f"cos worse than a bfloat16 table from p = {first_cos}")

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** One token of Llama 3 8B moves $2 \cdot 2 \cdot 5120 = 20480$ bytes in
# bfloat16 at the floor; 5 µs at 4.8 TB/s moves 24 MB, about 1,170 tokens. Below that
# many tokens per call, a launch costs more than the data. Hugging Face's formula runs
# five operations on $q$ and five on $k$: ten kernels per layer, 320 per decode step,
# against 32 for the fused kernel and one graph replay with CUDA graphs.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** Llama 3 8B のトークン 1 つは、bfloat16 では下限で $2 \cdot 2 \cdot 5120 = 20480$ バイトを動かします。
# 毎秒 4.8 TB で 5 µs の間に動くのは 24 MB で、約 1,170 トークン分です。
# 1 回の呼び出しのトークンがこれより少なければ、起動のほうがデータより高くつきます。
# Hugging Face の式は $q$ と $k$ にそれぞれ 5 つの演算を使うので、層あたり 10、デコードの 1 ステップで 320 のカーネルになります。
# 融合したカーネルなら 32 で、CUDA Graphs を使えばグラフの再生 1 回です。

# %% tags=["solution"]
per_token = 2 * 2 * (n_q + n_k) * d  # bytes, bfloat16, read and write
tokens = 5e-6 * 4.8e12 / per_token
x = torch.randn(1, n_q, 1, d, dtype=torch.bfloat16)
c, s = (t.bfloat16() for t in hf_cos_sin(torch.tensor([1000]), d))
t = count_traffic(lambda: hf_apply_rotary(x, c, s))
kernels = 32 * 2 * len(t.ops)  # 32 layers, q and k
assert per_token == 20480 and round(tokens, -1) == 1170 and kernels == 320
print(f"{tokens:.0f} tokens; {kernels} kernels per decode step")

# %% [markdown] lang="en"
# ## Sources and versions
#
# Library code read for this chapter, by version: vLLM at commit `0f5257e`
# (`csrc/pos_encoding_kernels.cu`, `csrc/fused_qknorm_rope_kernel.cu`), `072d10a`
# (`vllm/model_executor/layers/rotary_embedding/base.py`), `428a71c`
# (`vllm/compilation/passes/fusion/rope_kvcache_fusion.py`) and `018fe84`
# (`vllm/compilation/cuda_graph.py`); FlashInfer 0.6.18, commit
# `fb28d72` (`flashinfer/rope.py`, `include/flashinfer/pos_enc.cuh`,
# `flashinfer/norm/__init__.py`); FlashAttention v2.8.3
# (`flash_attn/flash_attn_interface.py`, `csrc/flash_attn/flash_api.cpp`,
# `csrc/flash_attn/src/flash_fwd_kernel.h`); Liger Kernel 0.8.2
# (`src/liger_kernel/ops/rope.py`); Hugging Face transformers at commit `000c33f`
# (`models/qwen3/modeling_qwen3.py`, `models/llama4/modeling_llama4.py`). The kernels
# of this page run in the interpreter of the installed Triton (3.9 when this page was
# built), with torch 2.13. The H200's figures are NVIDIA's datasheet: 67 TFLOPS in
# FP32, 4.8 TB/s. The CPU records are `lab/posenc_lab/records/cpu-rope-1-thread.json`
# and `cpu-rope-2-threads.json`.
#
# ### References
#
# - Su, J., et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Williams, S., Waterman, A., Patterson, D. (2009). *Roofline: An Insightful Visual
#   Performance Model for Multicore Architectures*. Communications of the ACM 52(4).
#   <https://doi.org/10.1145/1498765.1498785>
# - Tillet, P., Kung, H. T., Cox, D. (2019). *Triton: An Intermediate Language and
#   Compiler for Tiled Neural Network Computations*. MAPL 2019.
#   <https://doi.org/10.1145/3315508.3329973>
# - Kwon, W., et al. (2023). *Efficient Memory Management for Large Language Model
#   Serving with PagedAttention*. <https://arxiv.org/abs/2309.06180>; code:
#   <https://github.com/vllm-project/vllm>
# - Ye, Z., et al. (2025). *FlashInfer: Efficient and Customizable Attention Engine for
#   LLM Inference Serving*. <https://arxiv.org/abs/2501.01005>; code:
#   <https://github.com/flashinfer-ai/flashinfer>
# - Dao, T. (2023). *FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning*. <https://arxiv.org/abs/2307.08691>; code:
#   <https://github.com/Dao-AILab/flash-attention>
# - Hsu, P.-L., et al. (2024). *Liger Kernel: Efficient Triton Kernels for LLM
#   Training*. <https://arxiv.org/abs/2410.10989>; code:
#   <https://github.com/linkedin/Liger-Kernel>
# - Qwen Team (2025). *Qwen3 Technical Report*. <https://arxiv.org/abs/2505.09388>
# - NVIDIA. *H200 Tensor Core GPU* (datasheet). <https://www.nvidia.com/en-us/data-center/h200/>
# - NVIDIA. *CUDA C++ Programming Guide*, intrinsic functions.
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/>
# - NVIDIA. *CUDA Graphs* (CUDA C++ Programming Guide).
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-graphs>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# この章で読んだライブラリのコードとそのバージョンは次のとおりです。
# vLLM はコミット `0f5257e`（`csrc/pos_encoding_kernels.cu`、`csrc/fused_qknorm_rope_kernel.cu`）、`072d10a`（`vllm/model_executor/layers/rotary_embedding/base.py`）、`428a71c`（`vllm/compilation/passes/fusion/rope_kvcache_fusion.py`）、`018fe84`（`vllm/compilation/cuda_graph.py`）です。
# FlashInfer は 0.6.18、コミット `fb28d72`（`flashinfer/rope.py`、`include/flashinfer/pos_enc.cuh`、`flashinfer/norm/__init__.py`）です。
# FlashAttention は v2.8.3（`flash_attn/flash_attn_interface.py`、`csrc/flash_attn/flash_api.cpp`、`csrc/flash_attn/src/flash_fwd_kernel.h`）です。
# Liger Kernel は 0.8.2（`src/liger_kernel/ops/rope.py`）です。
# Hugging Face transformers はコミット `000c33f`（`models/qwen3/modeling_qwen3.py`、`models/llama4/modeling_llama4.py`）です。
# このページのカーネルは、インストールされている Triton（このページを生成したときは 3.9）のインタプリタと torch 2.13 で実行しています。
# H200 の数値は NVIDIA のデータシートによるもので、FP32 で 67 TFLOPS、毎秒 4.8 TB です。
# CPU の計測記録は `lab/posenc_lab/records/cpu-rope-1-thread.json` と `cpu-rope-2-threads.json` です。
#
# ### 参考文献
#
# - Su, J., et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Williams, S., Waterman, A., Patterson, D. (2009). *Roofline: An Insightful Visual
#   Performance Model for Multicore Architectures*. Communications of the ACM 52(4).
#   <https://doi.org/10.1145/1498765.1498785>
# - Tillet, P., Kung, H. T., Cox, D. (2019). *Triton: An Intermediate Language and
#   Compiler for Tiled Neural Network Computations*. MAPL 2019.
#   <https://doi.org/10.1145/3315508.3329973>
# - Kwon, W., et al. (2023). *Efficient Memory Management for Large Language Model
#   Serving with PagedAttention*. <https://arxiv.org/abs/2309.06180>; code:
#   <https://github.com/vllm-project/vllm>
# - Ye, Z., et al. (2025). *FlashInfer: Efficient and Customizable Attention Engine for
#   LLM Inference Serving*. <https://arxiv.org/abs/2501.01005>; code:
#   <https://github.com/flashinfer-ai/flashinfer>
# - Dao, T. (2023). *FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning*. <https://arxiv.org/abs/2307.08691>; code:
#   <https://github.com/Dao-AILab/flash-attention>
# - Hsu, P.-L., et al. (2024). *Liger Kernel: Efficient Triton Kernels for LLM
#   Training*. <https://arxiv.org/abs/2410.10989>; code:
#   <https://github.com/linkedin/Liger-Kernel>
# - Qwen Team (2025). *Qwen3 Technical Report*. <https://arxiv.org/abs/2505.09388>
# - NVIDIA. *H200 Tensor Core GPU* (datasheet). <https://www.nvidia.com/en-us/data-center/h200/>
# - NVIDIA. *CUDA C++ Programming Guide*, intrinsic functions.
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/>
# - NVIDIA. *CUDA Graphs* (CUDA C++ Programming Guide).
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-graphs>
