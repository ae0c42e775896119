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
# Below: the byte count, `posenc`'s Triton kernel line by line, where production
# systems fuse RoPE, tables against cos and sin on the fly, and what the stored CPU
# records show. No GPU was available to us, so there is no GPU record yet.

# %% [markdown] lang="ja"
# # RoPE を効率よく実装する
#
# RoPE の演算は成分あたり 3 flop だけですが、すべてのクエリとキーを少なくとも 1 回読み、1 回書かなければなりません。
# そのためコストを決めるのは動かすバイト数で、新しいトークン 1 つだけを処理するときは起動するカーネルの数です。
# Hugging Face の eager モードの式は、この下限の 5 倍のバイト数を動かします。
# 各成分を 1 回読んで 1 回書くだけの融合カーネルなら、下限に届きます。
# この章では、まずバイト数を数え、`posenc` の Triton カーネルを 1 行ずつ読みます。
# 続いて、vLLM、FlashInfer、FlashAttention、Liger Kernel が RoPE をどのカーネルと融合しているかを見ます。
# さらに、cos と sin の表を使う場合とその場で計算する場合の違いを調べ、保存した CPU の計測記録が示すことをまとめます。
# GPU を使えなかったので、GPU の計測記録はまだありません。

# %%
import itertools
import json
import os

# Triton runs a kernel in its interpreter, on CPU tensors, when this is set
# before the kernel is defined: this page is built without a GPU.
os.environ["TRITON_INTERPRET"] = "1"

import matplotlib.pyplot as plt
import numpy as np
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
# RoPE は、位置 $p$ のクエリやキーのペア $(a_i, b_i)$ を、それぞれ角度 $p\theta_i$ だけ回転させます。
# $$a_i' = a_i\cos p\theta_i - b_i\sin p\theta_i, \qquad b_i' = b_i\cos p\theta_i + a_i\sin p\theta_i$$
# ペアあたり掛け算 4 回と足し算 2 回、成分あたり 3 flop です。
# [アウトオブプレース](../docs/glossary.ja.md#in-place-out-of-place)の回転は、すべての成分を読み、その結果を書かなければなりません。
# 成分 1 つが $e$ バイト（float32 で 4、bfloat16 で 2）なら、成分あたり少なくとも $2e$ バイトを動かします。
# これが[下限](../docs/glossary.ja.md#floor)です。
# したがって[演算強度](../docs/glossary.ja.md#arithmetic-intensity)は次の値を超えません。
# $$I = \frac{3}{2e}\ \mathrm{flop/B}$$
# float32 で 3/8、bfloat16 で 3/4 です。
# NVIDIA H200（SXM）は、テンソルコア以外の演算器で float32 の演算を毎秒 67 兆回こなし、メモリから毎秒 4.8 TB を運びます。
# 1 バイトを運ぶ間に 14 flop をこなせることになります。
# 演算強度がこの比よりずっと小さいと演算器はメモリを待つことになり、1 回の呼び出しには「バイト数 ÷ [メモリ帯域幅](../docs/glossary.ja.md#memory-bandwidth)」以上の時間がかかります（[ルーフラインモデル](../docs/glossary.ja.md#roofline-model)）。
# CPU のコアでも事情は同じです。
# つまり、RoPE の実装で工夫できるのは次の 2 点です。動かすバイト数と、バイト数が少ないときには、それを動かすために起動する[カーネル](../docs/glossary.ja.md#kernel-kernel-launch)の数です。
# 形状は Llama 3 8B のアテンションに合わせます。
# クエリのヘッドが $n_q = 32$ 個、キーのヘッドが $n_k = 8$ 個で、次元数はどれも $d = 128$、すべての次元を回転させます（$r = d$）。
# 記号は[記法のページ](../docs/notation.ja.md)に従います。

# %% tags=["check"] summary={"en": "3 flops per element, counted operation by operation", "ja": "演算ごとに数えると成分あたり 3 flop です"}
x = torch.randn(1, 8, 16, 128)
a, b = x.chunk(2, dim=-1)
angle = torch.arange(16.0)[:, None] * rope_frequencies(128)  # (16, 64)
cos, sin = angle.cos(), angle.sin()
t = count_traffic(lambda: (a * cos - b * sin, b * cos + a * sin))
assert t.ops == ["mul", "mul", "sub", "mul", "mul", "add"]
flops = sum(written // 4 for _, _, written in t.details)  # 1 per value
assert flops == 3 * x.numel()

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
# We know of no eager real-valued formula that goes lower: we found no single ATen
# operation that computes two products and a sum from $a_i$, $b_i$ and the tables,
# and every operation writes its result to memory for the next to read. Meta's Llama
# keeps the members of a pair side by side (the
# [interleaved layout](../docs/glossary.md#interleaved-layout)) and reads them as
# complex numbers: one complex multiplication computes both products and the sum in
# registers, which moves the floor in float32. In the half layout the partner of
# $a_i$ lies $d/2$ features away, and no view makes a pair one complex number. In
# bfloat16 the floor is 4 and the eager formula moves 20, while `posenc`'s passes,
# which rotate in float32 and round once, move 22. Meta's path moves 20 as well: it
# converts $x$ to float32 (2 + 4), multiplies (4 + 4) and converts back (4 + 2), so in
# bfloat16, the usual dtype of inference, its one complex product no longer helps.
# The figure shows the counts of the stored record, at Llama 3 8B's shapes, with the
# tables included.

# %% [markdown] lang="ja"
# ## eager モードの PyTorch が動かすバイト数
#
# バイト数は単純なモデルで数えます。
# 各演算は入力をそれぞれ 1 回読んで出力を 1 回書き、次の演算に使えるものはキャッシュに何も残らない、と仮定します（`posenc_lab.traffic.count_traffic` が数えるのはまさにこの量です）。
# Hugging Face はヘッド全体を $x' = x \odot c + \mathrm{rotate\_half}(x) \odot s$ で回転させます。$c$ と $s$ はヘッドの全次元ぶんの表です。
# 5 つの演算は、$c$ との積、半分の正負の反転、$\mathrm{rotate\_half}(x)$ を作る連結、$s$ との積、和です。float32 の $x$ の成分あたりに動かすバイト数を演算ごとに足すと、次のようになります。
# $$\beta_{\mathrm{HF}} = (4+4) + (2+2) + (4+4) + (4+4) + (8+4) = 40$$
# 下限 8 の 5 倍です。
# 4 つの[一時テンソル](../docs/glossary.ja.md#temporary-tensor)を[実体化](../docs/glossary.ja.md#materialise)し、もう一度読むからです。
# `posenc` の `apply_rope` のように、`out=` と `addcmul_` で出力に直接書けば一時テンソルはなくなりますが、それでも 3 回のパスが必要です。
# $$\beta_{\mathrm{posenc}} = (4+4) + \tfrac{1}{2}(4+4+4) + \tfrac{1}{2}(4+4+4) = 20$$
# 実数の演算だけを使う eager モードの式で、これより少なく済むものを私たちは知りません。
# $a_i$、$b_i$ と表から積 2 つと和 1 つを 1 回で計算する ATen の演算は見つかりませんでした。
# しかも、どの演算も結果をメモリに書き、次の演算はそれを読み直します。
# Meta の Llama はペアの 2 つの成分を隣り合わせに置き（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）、複素数として読みます。
# 複素数の掛け算 1 回が 2 つの積と和をレジスタの中で計算するので、float32 では動かすのは下限のバイト数です。
# 半分割配置では $a_i$ の相手が $d/2$ 次元先にあり、どんなビューでもペアを 1 つの複素数にはできません。
# bfloat16 では下限が 4 バイトで、Hugging Face の式は 20 バイトを動かします。一方、`posenc` のパスは float32 で回転させて 1 回だけ丸めるので、22 バイトを動かします。
# Meta の方法も 20 バイトです。$x$ を float32 に変換し（2 + 4）、掛け算し（4 + 4）、元に戻す（4 + 2）ので、推論でふつう使う bfloat16 では、複素数の掛け算 1 回の利点がなくなります。
# 図は、保存した計測記録にあるバイト数を Llama 3 8B の形状で示したもので、表の読み込みも含みます。

# %% tags=["check"] summary={"en": "the counts by operation, tables apart, in float32 and bfloat16, Meta's path included; the stored record was taken with the same counter", "ja": "float32 と bfloat16 で演算ごとに数えた値は、Meta の方法も含めて表の分を除いて本文どおりです。計測記録の値は、いま数え直した値と一致します"}
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
t = count_traffic(lambda: meta_apply_rotary(x16, freqs_cis))  # bfloat16
assert t.ops == ["_to_copy", "mul", "_to_copy"]
assert t.total == 20 * n + freqs_cis.nbytes
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
# float32, 4.1 in bfloat16. vLLM and Liger Kernel divide the work the same way. A grid
# over tokens
# gives thousands of programs in a prefill and one in the decode step of a single
# sequence.

# %% [markdown] lang="ja"
# ## 1 回のパスで済ませる：融合カーネル
#
# GPU のカーネルなら、$a_i$ と $b_i$ をレジスタに置いたまま 2 つの出力を計算できるので、各成分の読み込みと書き込みは 1 回ずつで済みます。
# 問題は、処理をどう分割するかです。
# RoPE の単位はトークンです。
# トークンの位置 $p$ が cos と sin の表の 1 行（それぞれ $r/2$ 個の値）を選び、そのトークンの $q$ と $k$ のすべてのヘッドが同じ行を使います。
# そこで `posenc` のカーネルは、トークン 1 つにプログラム（Triton の並列実行の単位）を 1 つ割り当てます。
# プログラムは位置を読み、表の行を 1 回だけ読み込みます。
# そのあと $q$ のヘッド、続いて $k$ のヘッドを、いくつかずつまとめて順にたどります。
# 各ヘッドの前半と後半を読み込み、回転させて、結果を書き込みます。
# 表が float32、位置がトークンあたり int64 1 つなら、成分あたりに動かすバイト数は次のとおりです。
# $$\beta_{\mathrm{fused}} = 2e + \frac{4r + 8}{(n_q + n_k)\,d}$$
# Llama 3 8B では 1 行を 40 個のヘッドが使うので、表の分は 0.1 バイトだけです。
# float32 で 8.1 バイト、bfloat16 で 4.1 バイトになります。
# vLLM と Liger Kernel も同じ分け方です。
# トークンで分けると、プリフィルではプログラムが数千になり、系列 1 つのデコードの 1 ステップでは 1 つになります。

# %% tags=["figure"] alt={"en": ["Horizontal bar chart of bytes moved per element of q and k at Llama 3 8B's shapes, as counted in the stored record, float32 and bfloat16 bars side by side for each contender. hf_formula is longest (about 40 in float32, 20 in bfloat16), apply_rope and rotary_embedding about 23 in float32 and 25 in bfloat16, complex (float32 only) about 8, and the floor 8 in float32 and 4 in bfloat16; the fused kernel's formula gives 8.1 and 4.1, next to the floor's 8 and 4."], "ja": ["Llama 3 8B の形状で q と k の成分あたりに動かすバイト数を、比較対象ごとに float32 と bfloat16 の棒を並べて示した横棒グラフ。いちばん長いのは hf_formula（float32 で約 40、bfloat16 で約 20）です。apply_rope と rotary_embedding は float32 で約 23、bfloat16 で約 25 です。complex（float32 のみ）は約 8、下限（floor）は float32 で 8、bfloat16 で 4 です。融合カーネルの式の値 8.1 と 4.1 は、下限の 8 や 4 とほぼ同じ長さです。"]}
n_q, n_k, d, r = 32, 8, 128, 128


def beta_fused(e):
    """Bytes per element of the fused kernel: the formula above."""
    return 2 * e + (4 * r + 8) / ((n_q + n_k) * d)


names = ["floor", "hf_formula", "complex", "apply_rope", "rotary_embedding"]
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
# position, then the table row at that position, once, and hands its cos and sin to
# `rotate_heads` for $q$ and then for $k$. `rotate_heads` takes `BLOCK_H` heads
# at a time: `tl.arange` builds the block's addresses as a `BLOCK_H` by $d/2$ tile,
# the first `tl.load` reads the $a$ half of each head and the second the $b$ half,
# $d/2$ values further on, and the mask `ok` keeps the last block's loads and stores inside the tensor.
# Each output is one product and one [fused multiply-add](../docs/glossary.md#fused-multiply-add)
# (`tl.fma`), as in `apply_rope`, and `tl.store` writes it.
# Nothing else touches memory.

# %% [markdown] lang="ja"
# 次のセルは、このカーネルを骨組みだけにしたものです。
# 入力は形状 `(tokens, heads, d)` の連続したテンソルで、半分割配置、float32 に限ります。
# `rope_kernel` は、1 つのプログラムが実行するコードです。
# Triton はこれをトークンごとに 1 回実行し（`grid = (tokens,)`）、`tl.program_id(0)` がどのトークンかを表します。
# プログラムは位置を読み、その位置の表の行を 1 回だけ読み込みます。
# そして $q$ について、続いて $k$ について、その行の cos と sin を `rotate_heads` に渡します。
# `rotate_heads` はヘッドを `BLOCK_H` 個ずつ扱います。
# `tl.arange` でブロックのアドレスを `BLOCK_H` × $d/2$ のタイルとして作り、1 つ目の `tl.load` で各ヘッドの $a$ の半分を、2 つ目で $d/2$ 先にある $b$ の半分を読みます。
# マスク `ok` は、最後のブロックがテンソルの外を読み書きしないようにします。
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

# %% tags=["check"] summary={"en": "the small kernel gives posenc's kernel's bits, and apply_rope's result within tolerance", "ja": "小さなカーネルの結果は posenc のカーネルとビット単位で一致し、apply_rope の結果とも許容誤差の範囲で一致します"}
# posenc's kernel takes (b, n, s, d) views: (s, n, d) -> (1, n, s, d)
as_bnsd = lambda t: t.unsqueeze(0).transpose(1, 2)  # noqa: E731
rq, rk = apply_rope_triton(
    as_bnsd(q), as_bnsd(k), positions, rope.cos_cached, rope.sin_cached
)
assert torch.equal(rq, as_bnsd(q_rot)) and torch.equal(rk, as_bnsd(k_rot))
for got, x in ((q_rot, q), (k_rot, k)):
    assert_close(got, apply_rope(x.transpose(0, 1), positions).transpose(0, 1))

# %% tags=["check"] summary={"en": "counted lane by lane in the interpreter, the small kernel and posenc's kernel load and store the bytes of the formula, in float32 and bfloat16", "ja": "インタプリタで 1 レーンずつ数えると、小さなカーネルも posenc のカーネルも、float32 と bfloat16 で式どおりのバイト数を読み書きします"}
from functools import partial

from triton.runtime.interpreter import InterpreterBuilder


def bytes_moved(launch):
    """Bytes loaded and stored while launch() runs, unmasked lanes only."""
    load = InterpreterBuilder.create_masked_load
    store = InterpreterBuilder.create_masked_store
    moved = [0]

    def lanes(ptrs, mask):
        on = np.broadcast_to(mask.data, ptrs.data.shape).sum()
        return int(on) * ptrs.get_element_ty().primitive_bitwidth // 8

    def counted_load(self, ptrs, mask, *rest):
        moved[0] += lanes(ptrs, mask)
        return load(self, ptrs, mask, *rest)

    def counted_store(self, ptrs, value, mask, *rest):
        moved[0] += lanes(ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    InterpreterBuilder.create_masked_load = counted_load
    InterpreterBuilder.create_masked_store = counted_store
    try:
        launch()
    finally:
        InterpreterBuilder.create_masked_load = load
        InterpreterBuilder.create_masked_store = store
    return moved[0]


big = RotaryEmbedding(d, max_positions=16)
tables = (big.cos_cached, big.sin_cached)
pos4 = torch.tensor([3, 0, 9, 15])  # 4 tokens
for dtype in (torch.float32, torch.bfloat16):
    q4 = torch.randn(4, n_q, d, dtype=dtype)
    k4 = torch.randn(4, n_k, d, dtype=dtype)
    per = q4.numel() + k4.numel()
    counted = bytes_moved(
        partial(apply_rope_triton, as_bnsd(q4), as_bnsd(k4), pos4, *tables)
    )
    assert counted / per == beta_fused(dtype.itemsize), (dtype, counted / per)
    if dtype == torch.float32:  # the small kernel, k's 8 heads in a block of 16
        rows = (big.cos_cached.contiguous(), big.sin_cached.contiguous())
        counted = bytes_moved(partial(rope_fused, q4, k4, pos4, *rows, 16))
        assert counted / per == beta_fused(4), counted / per

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
# `posenc.rope_triton.apply_rope_triton` は、このカーネルに、実際の入力を扱うための機能を加えたものです。
# ストライドを扱うので、$q$ と $k$ は `(b, s, n, d)` の順に並んだ射影の出力から取ったビューでもかまいません。
# オフセットは 64 ビットで計算します。
# インターリーブ配置と[部分回転](../docs/glossary.ja.md#partial-rotation)（$r < d$ のとき残りの次元はコピーします）に対応します。
# bfloat16 と float16 の入力は float32 で回転させて 1 回だけ丸めます。
# [インプレース](../docs/glossary.ja.md#in-place-out-of-place)で書くこともでき、逆伝播にも対応しています。
# さらに、位置の値をホストへ読み戻さずに済ませられます（`check_positions=False`。表の外の位置はエラーではなく NaN になります）。これは CUDA グラフの中で必要になります。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: keeping the memory busy, and the knobs.** Bandwidth needs bytes in
# flight. By Little's law, the bytes a memory system must have requested and not yet
# received equal its bandwidth times its latency: at 4.8 TB/s and a latency of about
# 600 ns (our assumption for HBM; NVIDIA does not publish the H200's), about 3 MB,
# some 22 KB for each of the H200's 132 SMs. One program holds at most its token's
# $q$ and $k$, 10 KiB in bfloat16, and only a block of heads of it at a time. A
# prefill of thousands of tokens fills the GPU with programs; a decode step of one
# sequence runs one program on one SM, and a batch of 64 sequences runs 64 programs
# holding under a quarter of the 3 MB, on half the SMs: small-batch decode cannot
# reach the bandwidth whatever the kernel does, which is one more reason it is
# measured in launches. FlashAttention's stand-alone Triton kernel divides the work
# otherwise, tiling heads by tokens: more programs, and the table tile loaded once per
# block of heads. The knobs a kernel writer turns are few. `num_warps` sets the
# threads of a program (Triton's default is 4), `BLOCK_H` the heads in flight per
# iteration: more heads give more loads in flight and more registers, and a block
# that does not divide the head count wastes masked lanes (`BLOCK_H = 32` covers
# $k$'s 8 heads with 24 masked rows). `triton.autotune` can pick both per shape. The
# half layout loads each half as a contiguous run, which the compiler turns into
# 128-bit loads when it can prove the alignment; the interleaved layout, as
# `posenc`'s kernel writes it, loads $a$ and $b$ with a stride of 2, so each load
# touches the cache lines of both; loading the pairs contiguously and splitting them
# in registers (`tl.reshape` then `tl.split`, as FlashAttention's rotary kernel does)
# avoids that. Finally the host: `apply_rope_triton`'s Python wrapper (argument
# checks, strides, Triton's launcher) costs microseconds per call, more than the
# kernel in a decode step. A CUDA graph removes it at replay; registering the wrapper
# as a custom operator (`torch.library.custom_op` with a fake implementation, or
# `torch.library.triton_op`) lets `torch.compile` keep it in one graph instead of
# breaking the graph at an unknown Python call.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：メモリを忙しく保つことと、調整できるパラメータ。**
# 帯域幅を使い切るには、転送中のバイトが必要です。
# リトルの法則によれば、メモリに要求してまだ届いていないバイト数は、帯域幅とレイテンシの積に等しくなります。
# レイテンシを約 600 ns とします（HBM についての私たちの仮定で、NVIDIA は H200 の値を公表していません）。
# 毎秒 4.8 TB なら約 3 MB で、H200 の 132 個の SM それぞれに約 22 KB です。
# 1 つのプログラムが持つのは、せいぜいそのトークンの $q$ と $k$、bfloat16 で 10 KiB で、一度に扱うのはそのうちヘッド 1 ブロック分だけです。
# 数千トークンのプリフィルなら GPU はプログラムで埋まります。
# 系列 1 つのデコードの 1 ステップでは、1 つのプログラムが 1 つの SM で動くだけです。64 系列のバッチでも、64 個のプログラムが持つのは 3 MB の 4 分の 1 未満で、使う SM も半分です。
# したがって、小さなバッチのデコードは、カーネルをどう書いても帯域幅に届きません。デコードを起動の数で測るもう 1 つの理由です。
# FlashAttention が単体で提供する Triton カーネルは、処理を別の形で分け、ヘッドとトークンの 2 方向でタイルに分けます。プログラムの数は増え、表のタイルはヘッドのブロックごとに 1 回ずつ読み込みます。
# カーネルを書く人が調整できるパラメータは多くありません。
# `num_warps` はプログラムのスレッド数（Triton の既定値は 4）、`BLOCK_H` は 1 回の反復で扱うヘッドの数です。
# ヘッドを増やすと、転送中の読み込みとレジスタの両方が増えます。また、ヘッドの数を割り切れないブロックはマスクされたレーンを無駄にします（`BLOCK_H = 32` では、$k$ の 8 ヘッドに対して 24 行がマスクされます）。
# `triton.autotune` を使えば、形状ごとに両方を選べます。
# 半分割配置では各半分を連続した領域として読むので、アラインメントを証明できればコンパイラは 128 ビットの読み込みにします。
# インターリーブ配置では、`posenc` のカーネルは $a$ と $b$ をストライド 2 で読むので、どちらの読み込みも両方のキャッシュラインに触れます。
# ペアを連続して読み込み、レジスタの中で分ければ（FlashAttention の回転のカーネルのように `tl.reshape` のあと `tl.split`）、これを避けられます。
# 最後にホスト側です。`apply_rope_triton` の Python のラッパー（引数のチェック、ストライド、Triton のランチャー）は、呼び出しごとにマイクロ秒単位の時間がかかります。
# デコードの 1 ステップでは、カーネルそのものより長くなります。
# CUDA グラフなら再生のときにこのコストはなくなります。
# ラッパーをカスタム演算子として登録すれば（fake 実装を付けた `torch.library.custom_op`、または `torch.library.triton_op`）、`torch.compile` は未知の Python の呼び出しでグラフを分割せず、1 つのグラフに収められます。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the backward pass is the same kernel.** A rotation by $p\theta_i$ is
# an orthogonal map, so its transpose, which carries the gradient back, is the
# rotation by $-p\theta_i$. `posenc`'s kernel runs its backward pass as the forward
# pass with $-\sin$ in place of $\sin$ (Liger Kernel does the same), so it costs one
# more pass over the gradients of $q$ and $k$ and nothing else.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：逆伝播も同じカーネルです。**
# 角度 $p\theta_i$ の回転は直交変換なので、勾配を逆向きに運ぶその転置は、角度 $-p\theta_i$ の回転です。
# `posenc` のカーネルは、$\sin$ の代わりに $-\sin$ を使うフォワードパスとして逆伝播を計算します（Liger Kernel も同じです）。
# そのため、逆伝播のコストは $q$ と $k$ の勾配に対するパス 1 回だけです。

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
# | vLLM | `rotary_embedding`, in place on $q$ and $k$, one thread block per token; a separate kernel writes $k$ and $v$ into the [KV cache](../docs/glossary.md#kv-cache). For decode steps, a compilation pass fuses the two where the attention backend allows | a table of positions × $r$, cos then sin, in $q$'s dtype, read at each token's position |
# | FlashInfer | in place: `apply_rope_with_cos_sin_cache_inplace` (vLLM's interface) or `apply_rope_pos_ids_inplace`; fused: `rope_quantize_fp8_append_paged_kv_cache` rotates, quantises to FP8 and appends to a paged KV cache (DeepSeek's MLA included); and inside its attention kernels with `pos_encoding_mode="ROPE_LLAMA"` | a float32 table, or computed on the fly from `rope_theta` |
# | FlashAttention 2 | inside the attention kernel: `flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` rotates the new keys as it appends them to the KV cache, and the queries as it loads them | tables of positions × $r/2$ in $q$'s dtype; interleaved pairs unless `rotary_interleaved=False` |
# | Liger Kernel | one program per token, in place; the backward pass with $-\sin$ | Hugging Face's cos and sin, gathered per token |
# | `posenc` | `apply_rope_triton`, out of place or in place | a float32 table, read at each token's position |
#
# Qwen3 normalises every head of $q$ and $k$ with an RMSNorm, which has a learned
# weight per feature, before RoPE; vLLM fuses the two, giving each head to one warp,
# which reads it once, normalises it, rotates it in registers and writes it back.
# Llama 4, where its configuration enables QK-norm, goes the other
# way round on its RoPE layers: RoPE first, then a norm without weights,
# $\mathrm{norm}(x) = x / \sqrt{\mathrm{mean}(x^2) + \epsilon}$. A rotation $R_p$
# keeps the norm of a head's vector, so
# $$\lVert R_p x \rVert = \lVert x \rVert \quad\Rightarrow\quad \mathrm{norm}(R_p x) = R_p\, \mathrm{norm}(x)$$
# and the weightless norm gives the same result before RoPE or after it. Qwen3's
# weighted norm commutes with RoPE only when the two features of every pair carry the
# same weight, so Qwen3 must keep the order it was trained with.

# %% [markdown] lang="ja"
# ## 実際のシステムは RoPE をどこで融合しているか
#
# RoPE の融合カーネルでも、$q$ と $k$ をメモリから読んで書き戻すことに変わりはなく、次のカーネルがそれをもう一度読みます。
# そのため実際のシステムは、RoPE を前か後ろのカーネルに組み込みます。
#
# | システム | RoPE を実行する場所 | cos と sin |
# |---|---|---|
# | vLLM | `rotary_embedding`。$q$ と $k$ をインプレースで回転させ、トークン 1 つにスレッドブロックを 1 つ割り当てます。そのあと別のカーネルが $k$ と $v$ を [KV キャッシュ](../docs/glossary.ja.md#kv-cache)に書きます。デコードの 1 ステップでは、アテンションのバックエンドが対応していれば、コンパイル時の変換パスがこの 2 つを融合します | 位置の数 × $r$ の表。cos、sin の順に並び、$q$ の dtype で、各トークンの位置の行を読みます |
# | FlashInfer | インプレースでは `apply_rope_with_cos_sin_cache_inplace`（vLLM と同じインターフェース）か `apply_rope_pos_ids_inplace` です。融合したものでは、`rope_quantize_fp8_append_paged_kv_cache` が回転、FP8 への量子化、ページ化した KV キャッシュへの追加を行います（DeepSeek の MLA にも対応）。さらにアテンションのカーネルの中でも、`pos_encoding_mode="ROPE_LLAMA"` で回転させます | float32 の表か、`rope_theta` からその場で計算 |
# | FlashAttention 2 | アテンションのカーネルの中です。`flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` は、新しいキーは KV キャッシュに追加するときに、クエリは読み込むときに回転させます | 位置の数 × $r/2$ の表で、$q$ の dtype。`rotary_interleaved=False` でなければインターリーブ配置のペア |
# | Liger Kernel | トークン 1 つにプログラム 1 つ、インプレース。逆伝播は $-\sin$ を使います | Hugging Face の cos と sin をトークンごとに集めたもの |
# | `posenc` | `apply_rope_triton`。アウトオブプレースかインプレース | float32 の表で、各トークンの位置の行を読みます |
#
# Qwen3 は RoPE の前に、$q$ と $k$ の各ヘッドを RMSNorm で正規化します。RMSNorm は次元ごとに学習可能な重みを持ちます。
# vLLM はこの 2 つを融合し、ヘッド 1 つをワープ 1 つに割り当てます。ワープはヘッドを 1 回読み、正規化し、レジスタの中で回転させて書き戻します。
# Llama 4 は、設定で QK-norm を使う場合、RoPE の層で逆の順序をとります。
# 先に RoPE、その後に重みのない正規化 $\mathrm{norm}(x) = x / \sqrt{\mathrm{mean}(x^2) + \epsilon}$ です。
# 回転 $R_p$ はヘッドのベクトルのノルムを変えないので、次の式が成り立ちます。
# $$\lVert R_p x \rVert = \lVert x \rVert \quad\Rightarrow\quad \mathrm{norm}(R_p x) = R_p\, \mathrm{norm}(x)$$
# つまり重みのない正規化は、RoPE の前後どちらに置いても同じ結果になります。
# Qwen3 の重み付きの正規化が RoPE と交換できるのは、すべてのペアで 2 つの次元の重みが等しいときだけです。そのため Qwen3 は、学習したときの順序を守る必要があります。

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

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the QK-norm kernels, and MLA's decoupled RoPE.** The norm needs
# the sum of squares over the whole head, so the unit of work is a head: vLLM's
# `fusedQKNormRopeKernel`, adapted from TensorRT-LLM, gives each head of each token to
# one warp; a second kernel, `fusedQKNormRopeKernelNTokenHeads`, gives several heads
# to a warp and shares their cos and sin through shared memory. DeepSeek's multi-head
# latent attention (MLA) keeps RoPE out of its compressed keys: it rotates a separate
# part of each query head and one small key head, `k_pe`, shared by all heads (the
# "decoupled" RoPE), which FlashInfer's fused append writes next to the latent cache.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：QK-norm のカーネルと、MLA の分離した RoPE。**
# 正規化にはヘッド全体の 2 乗和が必要なので、処理の単位はヘッドです。
# vLLM の `fusedQKNormRopeKernel`（TensorRT-LLM のものを改変したもの）は、各トークンの各ヘッドをワープ 1 つに割り当てます。
# もう 1 つのカーネル `fusedQKNormRopeKernelNTokenHeads` は、1 つのワープに複数のヘッドを割り当て、その cos と sin を共有メモリで共有します。
# DeepSeek の multi-head latent attention（MLA）は、圧縮したキーに RoPE をかけません。
# 各クエリのヘッドの別の部分と、すべてのヘッドが共有する小さなキーのヘッド `k_pe` を回転させます（「分離した」RoPE）。FlashInfer の融合した追加は、これを潜在表現のキャッシュの隣に書きます。

# %% [markdown] lang="en"
# ## A table, or cos and sin on the fly
#
# A float32 table of $n$ positions with $r/2$ cosines and $r/2$ sines per position
# holds $4rn$ bytes: 64 MiB for the 131,072 positions of Llama 3.1 with $r = 128$, as in
# vLLM (`posenc`'s `RotaryEmbedding` keeps $8rn$ bytes: its `rot_cached`, $(n, 2, r)$,
# holds signed multipliers for the whole head). Reading a row costs 0.1 byte per
# element, as counted above. Computing cos and sin on the fly instead costs at least
# $r/2$ of each per token (more if every head recomputes them) and no memory; in a
# memory-bound kernel both costs are small. The difference that matters is numerical,
# and most of it comes from the angle. In float32 the angle is the product of a
# rounded frequency $\hat\theta_i = \theta_i(1 + \varepsilon_i)$ and an exact integer
# position, rounded once more; with $|\varepsilon_i| \le \varepsilon$ and the unit
# roundoff $u = 2^{-24}$,
# $$\lvert \mathrm{fl}(p\,\hat\theta_i) - p\,\theta_i \rvert \le (\varepsilon + u + \varepsilon u)\, p\,\theta_i$$
# an error that grows with the position, to about a hundredth of a radian at
# $p = 131071$. A table built from float64 angles and stored in float32 is within
# $2^{-24}$ of the true cosine at every position; stored in bfloat16, within about
# $2^{-9}$. The figure compares the three.

# %% [markdown] lang="ja"
# ## 表を使うか、cos と sin をその場で計算するか
#
# 位置ごとに $r/2$ 個の cos と $r/2$ 個の sin を持つ、$n$ 個の位置の float32 の表は $4rn$ バイトです。
# vLLM と同じく Llama 3.1 の 131,072 個の位置、$r = 128$ なら 64 MiB になります。
# `posenc` の `RotaryEmbedding` は $8rn$ バイトを持ちます（形状 $(n, 2, r)$ の `rot_cached` がヘッド全体の符号付きの係数を持つからです）。
# 行を読むコストは、上で数えたとおり成分あたり 0.1 バイトです。
# 代わりに cos と sin をその場で計算すると、トークンあたりそれぞれ少なくとも $r/2$ 回の計算がかかります（ヘッドごとに計算し直せばもっとかかります）が、メモリは要りません。
# メモリ律速のカーネルでは、どちらのコストもわずかです。
# 効いてくるのは数値の違いで、その大部分は角度をどう作るかから生じます。
# float32 の角度は、丸めた周波数 $\hat\theta_i = \theta_i(1 + \varepsilon_i)$ と厳密な整数の位置の積を、もう一度丸めたものです。
# $|\varepsilon_i| \le \varepsilon$ とし、単位丸め誤差を $u = 2^{-24}$ とすると、次の式が成り立ちます。
# $$\lvert \mathrm{fl}(p\,\hat\theta_i) - p\,\theta_i \rvert \le (\varepsilon + u + \varepsilon u)\, p\,\theta_i$$
# この誤差は位置とともに大きくなり、$p = 131071$ では約 0.01 ラジアンに達します。
# float64 の角度から作って float32 で保存した表は、どの位置でも真の cos との差が $2^{-24}$ 以内です。bfloat16 で保存すると約 $2^{-9}$ 以内です。
# 図はこの 3 つを比べたものです。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: which numbers a model expects, and kernels that compute cos on the
# fly.**
# Hugging Face, vLLM and `posenc`'s module all form the angle in float32 before they
# take its cosine; Hugging Face's Qwen3 then casts cos and sin to the model's dtype,
# and FlashAttention takes its tables only in $q$'s dtype.
# A model trained with code like Hugging Face's has seen float32 angles, often rounded
# to bfloat16; a more exact table gives it numbers it has not seen, and whether that
# helps or hurts we have not measured. What is documented is damage from the other
# direction: angles formed in float16 or bfloat16 give cosines that are plainly wrong
# at large positions (GPT-NeoX issue #1003), and Hugging Face's float32 angle product,
# written as a matrix product, can run in TF32 under
# `torch.set_float32_matmul_precision("high")` and lose positions above 2048
# (transformers issue #48428). Where the cosine is taken matters for kernels that
# compute it on the fly. FlashInfer's form a float32 product of position and a
# frequency computed with `__powf`, CUDA's fast power, so $\varepsilon$ there is not
# that of a correctly rounded frequency and the bound above does not apply as
# stated; they then take `__sincosf` of the angle, CUDA's fast approximation, whose
# error bound the CUDA C++ Programming Guide gives only for arguments in
# $[-\pi, \pi]$, while the angle reaches $p$ radians.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：モデルが期待する数値と、cos をその場で計算するカーネル。**
# Hugging Face、vLLM、`posenc` のモジュールは、どれも float32 で作った角度の cos をとります。
# さらに Hugging Face の Qwen3 は cos と sin をモデルの dtype に変換し、FlashAttention は $q$ の dtype の表しか受け付けません。
# Hugging Face のようなコードで学習したモデルは、float32 で作った角度から求めた値を見てきました。
# 多くの場合、その値はさらに bfloat16 に丸められています。
# より正確な表を使うと、モデルが学習中に見たことのない数値を与えることになります。それが良いか悪いかは、私たちは測っていません。
# 報告されているのは逆向きの問題です。float16 や bfloat16 で作った角度は、大きな位置で明らかに誤った cos を与えます（GPT-NeoX の issue #1003）。
# また、Hugging Face の float32 の角度の積は行列積として書かれています。
# そのため `torch.set_float32_matmul_precision("high")` のもとでは TF32 で計算され、2048 を超える位置の情報を失うことがあります（transformers の issue #48428）。
# cos をどこで計算するかは、その場で計算するカーネルでは問題になります。
# FlashInfer のカーネルは、CUDA の高速なべき乗 `__powf` で求めた周波数と位置の float32 の積を作ります。
# そこでの $\varepsilon$ は正しく丸めた周波数のものではないので、上の上界をそのまま当てはめられません。
# そのうえで角度の `__sincosf` をとります。これは CUDA の高速な近似関数です。
# CUDA C++ Programming Guide はその誤差の上界を $[-\pi, \pi]$ の引数についてしか示していませんが、角度は $p$ ラジアンにまで達します。

# %% tags=["check"] summary={"en": "the bound holds for Llama 3's frequencies at every position; the table errors are as stated", "ja": "Llama 3 の周波数で、すべての位置について上界が成り立ち、表の誤差も本文どおりです"}
u = 2.0**-24
big_table = RotaryEmbedding(128, max_positions=1024).rot_cached
assert big_table.nbytes == 8 * 128 * 1024  # posenc's cache: 8 r n bytes
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

# %% tags=["figure"] alt={"en": ["Log-log plot of the largest error of cos against the position p, from 1 to 131,072, over the 64 frequencies of Llama 3. The curve for cos of the float32 angle rises roughly in proportion to p, from about 3e-8 at p = 2 to about 1e-2; the bfloat16 table stays flat near 2e-3; the float32 table stays flat near 3e-8. The float32 angle first crosses the bfloat16 table's level near p = 25,000."], "ja": ["位置 p（1 から 131,072）に対して、Llama 3 の 64 個の周波数のうち最大の cos の誤差を描いた両対数グラフ。float32 の角度の cos の曲線はほぼ p に比例して、p = 2 での約 3e-8 から約 1e-2 まで上がります。bfloat16 の表は 2e-3 付近で平らなまま、float32 の表は 3e-8 付近で平らなままです。float32 の角度の曲線は、位置が約 2 万 5 千に達したところで初めて bfloat16 の表の水準を超えます。"]}
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
# dispatching each call into torch: in the stored records the floor, with 2 ATen
# operations, takes 5 to 6 µs, and the two `apply_rope` contenders, which dispatch
# the most (24 to 30, views included), are the slowest eager ones (the figure). In
# between the count is no clock: `rotary_embedding` dispatches fewer operations than
# Meta's complex multiplication and takes longer, since what each operation costs
# depends on its Python wrapper and its argument checks too. The floor and Meta's
# complex multiplication move the same bytes, yet the second dispatches five times as
# many operations and takes 2.7 to 2.9 times as long.
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
# [デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)で回転させるのはトークン 1 つです。
# 成分は $(n_q + n_k)d = 5120$ 個で、bfloat16 の $q$ と $k$ は 10 KiB です。これを 1 回読んで 1 回書きます。
# 毎秒 4.8 TB なら、このメモリトラフィックは約 4 ナノ秒で済みますが、カーネルの起動には 1 回でマイクロ秒単位の時間がかかります。
# Hugging Face の eager モードの式はテンソルあたり 5 つ、層あたり 10 のカーネルを起動し、融合カーネルは 1 つだけです。
# 時間を使うのはカーネルの起動で、CPU では torch への呼び出しを 1 つずつディスパッチする処理です。
# 保存した計測記録では、ATen の演算が 2 つの下限は 5 から 6 µs です。
# ディスパッチする演算がいちばん多い（ビューを作る演算も含めて 24 から 30）2 つの `apply_rope` が、eager モードの比較対象のうちで最も遅くなります（図）。
# その間では、演算の数は時間を決めません。`rotary_embedding` は Meta の複素数の掛け算より演算が少ないのに、時間は長くかかります。演算 1 つのコストは、Python のラッパーや引数のチェックにもよるからです。
# 下限と Meta の複素数の掛け算は同じバイト数を動かしますが、後者はディスパッチする演算が 5 倍あり、時間は 2.7 から 2.9 倍かかります。
#
# GPU での対策は、カーネルを 1 つずつ起動するのをやめることです。
# すべての層を含むデコードの 1 ステップ全体を一度 CUDA グラフとしてキャプチャし、ステップごとに 1 回の起動で再生します。
# vLLM は、パディングしたいくつかのバッチサイズについてこのようなグラフをキャプチャします。
# グラフはキャプチャしたときのアドレスと形状のまま再生されるので、RoPE には 3 つの制約がかかります。
# 表はキャプチャの前に用意しておかなければなりません（`RotaryEmbedding(d, max_positions=n)` か `reserve(n)`）。
# 位置はデバイス上のテンソルに置いてインプレースで更新します。
# そして値をホストに読み戻してはなりません。`apply_rope_triton` に `check_positions=False` があるのはこのためです。


# %% tags=["figure"] alt={"en": ["Scatter plot from the stored one-thread CPU record: time per decode call in microseconds against the number of ATen operations dispatched per call, views included, one point per eager contender, in float32 and bfloat16. The floor (2 operations) is lowest, at about 5 microseconds; complex (10), rotary_embedding (8 or 10) and hf_formula (14) form a middle band between about 15 and 32 microseconds; the two apply_rope contenders (24 to 30 operations) take the longest, about 55 to 90 microseconds, two to three times the slowest of the middle band."], "ja": ["保存した 1 スレッドの CPU の計測記録から描いた散布図。eager モードの比較対象ごとに、デコードの呼び出し 1 回あたりの時間（マイクロ秒）を示します。横軸は 1 回の呼び出しがディスパッチする ATen の演算の数（ビューを作る演算も含みます）で、float32 と bfloat16 の点があります。下限（演算 2 つ）がいちばん下で約 5 マイクロ秒です。complex（10）、rotary_embedding（8 か 10）、hf_formula（14）は約 15 から 32 マイクロ秒の中ほどに集まります。2 つの apply_rope（演算 24 から 30）は最も時間がかかり、約 55 から 90 マイクロ秒で、中ほどのうち最も遅いものの 2 から 3 倍です。"]}
def dispatched(v):
    """ATen operations a call dispatches: those that move data, and views."""
    return v["ops_per_call"] + v["views_per_call"]


# hf_formula_out (Hugging Face's arithmetic into given buffers) stays in the
# records, but no claim of this page rests on it
SHOWN = {
    "floor",
    "hf_formula",
    "complex",
    "apply_rope",
    "apply_rope_interleaved",
    "rotary_embedding",
    "compiled_module",
}


fig, ax = plt.subplots(figsize=(6.4, 3.4))
for dtype in ("float32", "bfloat16"):
    found = records["1-thread"]["cases"][f"decode-{dtype}"]["contenders"]
    eager = {m: v for m, v in found.items() if v["ops_per_call"] and m in SHOWN}
    ax.scatter(
        [dispatched(v) for v in eager.values()],
        [v["median_ms"] * 1e3 for v in eager.values()],
        label=dtype,
    )
    if dtype == "float32":
        for m, v in eager.items():
            xy = (dispatched(v), v["median_ms"] * 1e3)
            below = m in ("floor", "rotary_embedding")
            ax.annotate(m, xy, fontsize=7, xytext=(5, -9 if below else 2),
                        textcoords="offset points")  # fmt: skip
ax.set_xlabel(r"$n_{\mathrm{ops}}$")
ax.set_ylabel(r"$t$ ($\mu$s)")
ax.xaxis.get_major_locator().set_params(integer=True)
ax.legend(frameon=False)
plt.show()


# %% tags=["check"] summary={"en": "in every decode case of both records the floor is fastest and the two apply_rope contenders dispatch the most and are the slowest eager ones; rotary_embedding dispatches fewer operations than complex yet is slower; complex moves the floor's bytes with five times its operations in 2.7 to 2.9 times its time; the floor takes 5 to 6 µs", "ja": "両方の計測記録のすべてのデコードで、下限が最も速く、2 つの apply_rope はディスパッチする演算が最も多く、eager モードの比較対象のうち最も遅くなります。rotary_embedding は complex より演算が少ないのに遅く、complex は下限と同じバイト数を 5 倍の演算と 2.7 から 2.9 倍の時間で動かします。下限は 5 から 6 µs です"}
def slowest_in_decode(rec):
    """The two slowest eager contenders, if the same in every decode case."""
    found = set()
    for dtype in ("float32", "bfloat16"):
        case = rec["cases"][f"decode-{dtype}"]["contenders"]
        eager = {m: v for m, v in case.items() if v["ops_per_call"]}
        eager = {m: v for m, v in eager.items() if m in SHOWN}
        assert min(eager, key=lambda m: eager[m]["median_ms"]) == "floor"
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
    assert same_bytes < 1.05 and 2.7 <= round(ratio, 1) <= 2.9, (DECODE, ratio)
    assert dispatched(found["complex"]) == 5 * dispatched(found["floor"])
    rotary, cplx = found["rotary_embedding"], found["complex"]
    assert dispatched(rotary) < dispatched(cplx), (DECODE, "op counts")
    assert rotary["median_ms"] > cplx["median_ms"], (DECODE, "not a clock")
    for dtype in ("float32", "bfloat16"):  # the floor: 5 to 6 µs
        floor = rec["cases"][f"decode-{dtype}"]["contenders"]["floor"]
        assert 5 <= floor["median_ms"] * 1e3 < 6, (DECODE, floor["median_ms"])

# %% [markdown] lang="en"
# ## What the records show
#
# `python -m posenc_lab.cpu_bench` times on the CPU each contender rotating $q$ and $k$
# of Llama 3 8B's shapes: a [prefill](../docs/glossary.md#prefill) of 1024 tokens and a
# decode step, in float32 and bfloat16, 40 rounds in random order (`lab/README.md`
# says how), with one thread and with two, on a 2-CPU machine running nothing else.
# The floor is `torch.mul(x, 2.0, out=...)`; `compiled_module` is
# `torch.compile(RotaryEmbedding(128, max_positions=4096))`. A cell is the median over
# rounds of the ratio to the floor's time, with one thread / with two.

# %% [markdown] lang="ja"
# ## 計測記録が示すこと
#
# `python -m posenc_lab.cpu_bench` は CPU で、Llama 3 8B の形状の $q$ と $k$ を回転させる時間を、比較対象ごとに計ります。
# 計測するのは 1024 トークンの[プリフィル](../docs/glossary.ja.md#prefill)とデコードの 1 ステップで、それぞれ float32 と bfloat16 です。
# 40 ラウンド計り、各ラウンドでは比較対象をランダムな順番で実行します（計り方は `lab/README.md` にあります）。
# 1 スレッドと 2 スレッドで、ほかに何も動いていない CPU 2 個のマシンで計りました。
# 下限は `torch.mul(x, 2.0, out=...)` で、`compiled_module` は `torch.compile(RotaryEmbedding(128, max_positions=4096))` です。
# 表の値は、同じラウンドの下限の時間との比のラウンドにわたる中央値です。「/」の左が 1 スレッド、右が 2 スレッドの値です。

# %% tags=["figure"]
order = [  # the rows; the floor's ratio is 1 by definition
    "hf_formula",
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


def cell(c, m):
    if m not in one[c]["contenders"]:
        return ""
    r1 = one[c]["contenders"][m]["ratio_to_floor"]
    r2 = two[c]["contenders"][m]["ratio_to_floor"]
    return f"{r1:.2f} / {r2:.2f}"


head = "| contender | " + " | ".join(f"`{c}`" for c in names) + " |"
lines = [head, "|---" * (len(names) + 1) + "|"]
for m in order:
    lines.append(f"| `{m}` | " + " | ".join(cell(c, m) for c in names) + " |")


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
pool = one["prefill-float32"]["pool"]
display(Markdown("\n".join(lines)))
print(f"floor, 1 thread, median [quartiles]: {floors}")
print(f"{meta['cpu']}, {meta['cpu_count']} CPUs, caches: {caches}")
print(
    f"float32 prefill: q, k and their outputs span {working} MiB; "
    f"the calls cycle through {pool} input pairs"
)
for name, rec in records.items():
    worst = max(
        (v["faults_per_call_max"], c, m)
        for c, case in rec["cases"].items()
        for m, v in case["contenders"].items()
    )
    before, after = (
        rec["meta"]["loadavg_before"][0],
        rec["meta"]["loadavg_after"][0],
    )
    print(
        f"{name}: load average {before} before, {after} after; "
        f"most page faults in one sample: {worst[0]:.0f} per call "
        f"({worst[2]}, {worst[1]})"
    )

# %% [markdown] lang="en"
# The load average stayed below 1 through both runs, and in the one-thread record
# every ratio's quartiles lie within a fifth of its median. In both records the byte
# count predicts the float32 prefill: Hugging Face's formula takes 5.0 and 5.3 times
# the floor's time, close to the 5.05 its bytes predict (40.4 against 8). Meta's
# complex multiplication, which makes one pass, and the compiled module, which we
# presume makes one pass too (Inductor should fuse the rotation into one loop; we did
# not count its passes), take 1.1 to 1.3 times; every contender that makes several
# passes takes at least 3 times. Page faults stay out of the medians: no contender
# faults in its median round, and the few samples that did (at most 4 of 40) took one
# page per call. The floor reads its inputs from main memory (the calls cycle through
# 48 input pairs, twice the 480 MiB last-level cache the system reports) and its
# outputs may stay in that cache, so a ratio to it describes this machine.
#
# No GPU was available to us, so there is no GPU record yet. On a machine with an
# NVIDIA GPU, `python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json`
# makes one (`lab/README.md` gives the setup; a dry run on the CPU checks the
# command). The byte model predicts the floor of a 4096-token bfloat16 prefill at
# 17.5 µs on an H200, and Hugging Face's formula at five times that if it ran at the
# memory's speed.

# %% [markdown] lang="ja"
# 両方の計測の間、ロードアベレージは 1 未満でした。1 スレッドの計測記録では、どの比も四分位が中央値の 5 分の 1 以内に収まっています。
# 両方の計測記録で、float32 のプリフィルの時間はバイト数から予測できます。Hugging Face の式は下限の 5.0 倍と 5.3 倍の時間がかかり、バイト数から予測される 5.05 倍（下限の 8 に対して 40.4）に近い値です。
# 1 回のパスで処理する Meta の複素数の掛け算と、コンパイルしたモジュールは、下限の 1.1 から 1.3 倍で済みます。
# 後者も 1 回のパスになっていると私たちは推測しています（Inductor は回転を 1 つのループに融合するはずですが、パスの数は数えていません）。
# 複数のパスを使う比較対象は、どれも 3 倍以上かかります。
# ページフォールトは中央値に影響していません。中央値のラウンドでフォールトを起こす比較対象はなく、フォールトを起こした少数のサンプル（40 個のうち多くて 4 個）も、呼び出しあたり 1 ページだけです。
# 下限は入力をメインメモリから読みます（呼び出しごとに 48 組の入力を順に使い、その大きさはシステムが報告するラストレベルキャッシュ（LLC）480 MiB の 2 倍です）。
# 出力はそのキャッシュに残ることがあるので、下限との比は、あくまでこのマシンでの値です。
#
# GPU を使えなかったので、GPU の計測記録はまだありません。
# NVIDIA の GPU があるマシンなら、`python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json` で作れます（準備の手順は `lab/README.md` にあり、このコマンドは CPU でのドライランで確かめてあります）。
# バイト数のモデルによる予測では、H200 で 4096 トークンの bfloat16 のプリフィルの下限は 17.5 µs、Hugging Face の式はメモリの速さで動いたとしてその 5 倍です。

# %% tags=["check"] summary={"en": "both runs at a load average below 1, the one-thread quartiles within a fifth of the median; in both records, Hugging Face's formula at 5.0 and 5.3 times the floor against the 5.05 of its bytes, the one-pass contenders at 1.1 to 1.3 times, the others at 3 or more; no page fault in a median round, at most 4 faulting samples of one page; the pool of inputs; 17.5 µs; no GPU record is stored, and the command is the benchmark's", "ja": "両方の計測でロードアベレージは 1 未満、1 スレッドの四分位は中央値の 5 分の 1 以内です。両方の計測記録で、Hugging Face の式は下限の 5.0 倍と 5.3 倍でバイト数の比 5.05 に近く、1 回のパスの比較対象は 1.1 から 1.3 倍、ほかは 3 倍以上です。中央値のラウンドにページフォールトはなく、フォールトを起こしたサンプルは多くて 4 個で 1 ページずつです。入力の組の数、17.5 µs の値も本文どおりで、GPU の計測記録はまだなく、コマンドはベンチマークのものです"}
from posenc_lab import gpu_bench


def round_ratios(case, m):
    """The ratio of m's time to the floor's, round by round, sorted."""
    found = case["contenders"]
    pairs = zip(
        found[m]["samples_ms"], found["floor"]["samples_ms"], strict=True
    )
    return sorted(t / f for t, f in pairs)


def quartiles(r):
    return r[len(r) // 4], r[(3 * len(r)) // 4]


RECORDS_TEXT = "update the claims of 'What the records show'"
hf_ratios = []
for rec in records.values():
    load = rec["meta"]["loadavg_before"][0], rec["meta"]["loadavg_after"][0]
    assert max(load) < 1 and rec["meta"]["warnings"] == [], (RECORDS_TEXT, load)
    for case in rec["cases"].values():
        for m, v in case["contenders"].items():
            faults = v["faults_per_call_median"]
            assert faults == 0, (RECORDS_TEXT, case["name"], m, faults)
            faulted = [f for f in v["faults_per_call"] if f > 0]
            assert len(faulted) <= 4 and set(faulted) <= {1.0}, (m, faulted)
    found = rec["cases"]["prefill-float32"]["contenders"]
    hf = found["hf_formula"]
    predicted = hf["bytes_per_element"] / found["floor"]["bytes_per_element"]
    assert round(predicted, 2) == 5.05  # 40.4 / 8
    assert abs(hf["ratio_to_floor"] / predicted - 1) < 0.06, RECORDS_TEXT
    hf_ratios.append(round(hf["ratio_to_floor"], 1))
    for m, v in found.items():
        ratio = round(v["ratio_to_floor"], 1)
        if m in ("complex", "compiled_module"):  # one pass
            assert 1.1 <= ratio <= 1.3, (RECORDS_TEXT, m, ratio)
        elif m != "floor":  # several passes
            assert v["ratio_to_floor"] >= 3, (RECORDS_TEXT, m, ratio)
assert hf_ratios == [5.0, 5.3], (RECORDS_TEXT, hf_ratios)
for c in names:  # one thread: quartiles within a fifth of the median
    for m, v in one[c]["contenders"].items():
        q1, q3 = quartiles(round_ratios(one[c], m))
        r = v["ratio_to_floor"]
        assert 0.8 * r <= q1 <= r <= q3 <= 1.2 * r, (RECORDS_TEXT, c, m)
case = one["prefill-float32"]
llc = records["1-thread"]["meta"]["last_level_cache_bytes"]
assert working == 2 * 20  # MiB: 20 of q and k in float32, 20 of outputs
assert pool == 48 and pool * case["bytes_moved"] // 2 == 2 * llc == 960 * 2**20
gpu_cases = {c.name: c for c in gpu_bench.build_cases()}
p = gpu_cases["prefill-bfloat16"]  # the GPU benchmark's prefill
assert (p.n_q, p.n_k, p.seq, p.head_dim) == (32, 8, 4096, 128)
prefill_bf16 = 2 * (32 + 8) * 4096 * 128 * 2  # read and write, bytes
assert round(prefill_bf16 / 4.8e12 * 1e6, 1) == 17.5
assert not list(RECORDS.glob("gpu-*.json")), "a GPU record: update the text"
assert "python -m posenc_lab.gpu_bench --json" in gpu_bench.__doc__

# %% [markdown] lang="en"
# ## What to remember
#
# - RoPE does 3 flops per element against at least $2e$ bytes moved: it is
#   [memory bound](../docs/glossary.md#memory-bound) on a CPU and on a GPU. Count bytes.
# - Per float32 element, Hugging Face's eager formula moves 40 bytes, five times the
#   floor; `posenc`'s eager passes move 20. Only a single pass reaches 8; in bfloat16
#   even Meta's complex product moves 20 against 4.
# - The fused kernel runs one program per token: the cos/sin row is loaded once and
#   serves every head of $q$ and $k$, so the table adds 0.1 byte per element at
#   Llama 3 8B's shapes.
# - Production systems fuse RoPE further: with the KV-cache write, inside attention,
#   and with Qwen3's QK-norm. A weightless norm, as in Llama 4, commutes with RoPE.
# - Angles formed in float32 lose accuracy in proportion to the position, whether
#   they feed a table or a kernel; a bfloat16 table is off by up to about $2^{-9}$.
#   Angles formed in lower precision, or through TF32, are documented to break.
# - A decode step costs launches, not bytes, and cannot fill the memory system:
#   fuse, then capture the step in a CUDA graph, with the table built beforehand and
#   no reads back to the host.

# %% [markdown] lang="ja"
# ## まとめ
#
# - RoPE の演算は成分あたり 3 flop で、動かすバイト数は少なくとも $2e$ です。CPU でも GPU でも[メモリ律速](../docs/glossary.ja.md#memory-bound)なので、バイト数を数えましょう。
# - float32 の成分あたり、Hugging Face の eager モードの式は下限の 5 倍の 40 バイトを動かし、`posenc` の eager モードのパスは 20 バイトを動かします。下限の 8 バイトに届くのは、1 回のパスで済ませる実装だけです。bfloat16 では Meta の複素数の掛け算も、下限の 4 バイトに対して 20 バイトを動かします。
# - 融合カーネルは、トークン 1 つにプログラム 1 つを割り当てます。cos と sin の表の行は 1 回だけ読み込まれ、$q$ と $k$ のすべてのヘッドで使われるので、Llama 3 8B の形状では表の分は成分あたり 0.1 バイトです。
# - 実際のシステムは RoPE をさらに融合します。KV キャッシュへの書き込みや Qwen3 の QK-norm と融合し、アテンションの中でも回転させます。Llama 4 のような重みのない正規化は RoPE と交換できます。
# - float32 で作った角度は、表に使うかカーネルで使うかにかかわらず、位置に比例して精度を失います。bfloat16 の表の誤差は、どの位置でも約 $2^{-9}$ 以下です。より低い精度や TF32 で作った角度が壊れることは、実際に報告されています。
# - デコードの 1 ステップのコストは、バイト数ではなく起動の数で、メモリを使い切ることもできません。融合したうえで、表を先に作り、ホストへの読み戻しをなくして、ステップを CUDA グラフとしてキャプチャしましょう。

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
# 1. vLLM、FlashInfer、Liger Kernel は $q$ と $k$ をインプレースで回転させます。
#    入力に書き戻すカーネルの $\beta_{\mathrm{fused}}$ はいくつでしょうか。
#    `mul_` と `addcmul_` を使って半分割配置のインプレースの回転を eager モードで書き、そのバイト数を `count_traffic` で数えてください。また、なぜ一時テンソルが必要になるのかを説明してください。
# 2. Llama 3 の周波数（$\theta_i = 500000^{-2i/128}$）について、いずれかのペアの float32 の角度の誤差が初めて $10^{-3}$ ラジアンを超える位置を求めてください。
#    また、float32 の角度の cos と真の cos との差が、bfloat16 の表の誤差の上界を初めて超える位置も求めてください。
# 3. カーネルの起動に 5 µs かかり、メモリが毎秒 4.8 TB を運ぶとします。
#    Llama 3 8B のヘッドで、bfloat16 の融合カーネルのメモリの時間が起動 1 回を超えるのは、1 回の呼び出しで何トークンからでしょうか。
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
# **解答 1.** インプレースでも、融合カーネルは各成分を 1 回読んで 1 回書くので、$\beta_{\mathrm{fused}}$ は変わりません。
# インプレースで節約できるのは出力のメモリで、トラフィックではありません。
# eager モードのコードでは一時テンソルが必要です。各出力は 2 つの入力をどちらも使うので、どちらの半分を先に上書きしても、先に上書きした半分の古い値が、もう一方の半分の出力を計算するのにまだ要るからです。
# 先に $b'$ を計算し、$a'$ のために $b$ のコピーを取っておけば、一時テンソルは $x$ の半分の大きさ 1 つで済みます。
# $x$ の成分あたりで数えると、コピー（$2+2$）、インプレースの積 2 回（$4+4$）、`addcmul_` 2 回（$6+6$）です。
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
# **Solution 2.** The check of the section
# ["A table, or cos and sin on the fly"](#a-table-or-cos-and-sin-on-the-fly) already
# holds every angle error; the cell reads the two positions off it. The second is where the float32 angle
# becomes a worse approximation of the true cosine than the rounding of a bfloat16
# table, whose error is at most about $2^{-9}$.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** [「表を使うか、cos と sin をその場で計算するか」](#表を使うかcos-と-sin-をその場で計算するか)の節のチェックで、すべての角度の誤差はすでに計算してあります。
# 次のセルは、そこから 2 つの位置を読み取ります。
# 2 つ目は、float32 の角度から求めた cos が、bfloat16 の表の丸め（誤差は約 $2^{-9}$ 以下）よりも真の cos から離れ始める位置です。

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
# **解答 3.** Llama 3 8B では、bfloat16 のトークン 1 つあたり、下限では $2 \cdot 2 \cdot 5120 = 20480$ バイトを動かします。
# 毎秒 4.8 TB で 5 µs の間に動くのは 24 MB で、約 1,170 トークン分です。
# 1 回の呼び出しのトークンがこれより少なければ、起動のコストがデータ転送の時間を上回ります。
# Hugging Face の式は $q$ と $k$ にそれぞれ 5 つの演算を使うので、層あたり 10、デコードの 1 ステップで 320 のカーネルになります。
# 融合カーネルなら 32 で、CUDA グラフを使えばグラフの再生 1 回です。

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
# `flashinfer/norm/__init__.py`, `flashinfer/prefill.py`, `flashinfer/decode.py`); FlashAttention v2.8.3
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
# - DeepSeek-AI (2024). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model* (multi-head latent attention, decoupled RoPE).
#   <https://arxiv.org/abs/2405.04434>
# - EleutherAI/gpt-neox issue #1003 (2023): RotaryEmbedding wrong for some
#   positions in fp16 and bfloat16. <https://github.com/EleutherAI/gpt-neox/issues/1003>
# - huggingface/transformers issue #48428: RoPE corruption from TF32 under
#   `torch.set_float32_matmul_precision("high")`.
#   <https://github.com/huggingface/transformers/issues/48428>
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
# FlashInfer は 0.6.18、コミット `fb28d72`（`flashinfer/rope.py`、`include/flashinfer/pos_enc.cuh`、`flashinfer/norm/__init__.py`、`flashinfer/prefill.py`、`flashinfer/decode.py`）です。
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
# - DeepSeek-AI (2024). *DeepSeek-V2: A Strong, Economical, and Efficient
#   Mixture-of-Experts Language Model* (multi-head latent attention, decoupled RoPE).
#   <https://arxiv.org/abs/2405.04434>
# - EleutherAI/gpt-neox issue #1003 (2023): RotaryEmbedding wrong for some
#   positions in fp16 and bfloat16. <https://github.com/EleutherAI/gpt-neox/issues/1003>
# - huggingface/transformers issue #48428: RoPE corruption from TF32 under
#   `torch.set_float32_matmul_precision("high")`.
#   <https://github.com/huggingface/transformers/issues/48428>
# - NVIDIA. *H200 Tensor Core GPU* (datasheet). <https://www.nvidia.com/en-us/data-center/h200/>
# - NVIDIA. *CUDA C++ Programming Guide*, intrinsic functions.
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/>
# - NVIDIA. *CUDA Graphs* (CUDA C++ Programming Guide).
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-graphs>
