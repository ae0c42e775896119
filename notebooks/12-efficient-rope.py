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
# # RoPE as a memory-bound kernel: bytes, a fused Triton kernel, and what to measure
#
# - RoPE's cost is the bytes it moves, not its arithmetic: 3 flops per element, against
#   one read and one write of every query and key.
# - Hugging Face's eager formula requests five times that floor, as each operation
#   writes a temporary that the next reads back; one fused pass requests about the
#   floor.
# - Even one pass reads $q$ and $k$ and writes them back, so some serving systems fold
#   RoPE into a neighbouring kernel; others fuse its operations into one pass.
#
# Byte counts are counted here, exactly, in a model with no cache, and CPU times are
# measured; DRAM traffic and GPU times are not measured (GPU times are predictions).
# The folds "for kernel writers" hold the Triton kernel line by line, its PTX and
# SASS, the decode step's chain of loads, and the GPU predictions with the commands
# that test them.

# %% [markdown] lang="ja"
# # メモリ律速のカーネルとしての RoPE：バイト数、融合した Triton カーネル、計測すべきこと
#
# - RoPE のコストを決めるのは演算ではなく、動かすバイト数です。演算は成分あたり 3 flop だけですが、すべてのクエリとキーを 1 回読み、1 回書く必要があり、この量がバイト数の下限です。
# - Hugging Face の eager モードの式は、下限の 5 倍のバイト数を要求します。演算ごとに一時テンソルを書き、次の演算がそれを読み直すからです。融合した 1 回のパスなら、ほぼ下限で済みます。
# - 1 回のパスでも $q$ と $k$ を読んで書き戻すので、RoPE を前後どちらかのカーネルに融合する推論システムもあります。RoPE の演算どうしを 1 回のパスに融合するだけのシステムもあります。
#
# バイト数はキャッシュを考えないモデルで正確に数えた値、CPU での時間は計った値です。DRAM が実際に動かす量と GPU での時間は計っていません（GPU での時間は予測です）。
# 題に「カーネルを書く読者向け」と付いた「さらに詳しく」は、いくつかのブロックに分かれています。
# Triton カーネルの 1 行ずつの説明とその PTX と SASS、デコードの 1 ステップでの読み込みの連鎖、GPU での予測とそれを確かめるコマンドは、そこにまとめています。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: the GPU terms this chapter uses.**
#
# - *HBM* is the GPU's main memory (4.8 TB/s on an H200); *L2* is the cache all its
#   processors share (50 MiB on the H100 SXM; the H200's datasheet gives no size),
#   several times faster.
# - An *SM* (streaming multiprocessor) is one of the GPU's 132 processors. A Triton
#   *program* runs on one SM as a few *warps*, groups of 32 threads that execute
#   together; `num_warps` sets how many.
# - *Registers* are each thread's own storage: the more a program uses, the fewer
#   programs an SM holds at once (its *occupancy*), and the fewer loads are in flight.
# - *PTX* is NVIDIA's virtual instruction set, *SASS* the machine code the GPU runs;
#   the order of the loads in the SASS is the order the hardware issues them.
# - A *launch* asks the GPU to run a kernel: microseconds of host time, and a fixed
#   cost on the device. A *CUDA graph* records a sequence of launches and replays it
#   as one.
# - A kernel's *prologue* loads its inputs and its *epilogue* writes its results:
#   RoPE folded into a neighbour's epilogue or prologue needs no pass of its own.
# - *PDL* (programmatic dependent launch) lets a kernel start while the one before it
#   finishes.
#
# After the bytes, a kernel's speed depends on how it moves them: the width of its
# accesses, its occupancy (an SM's resident warps against its maximum) and its
# memory-level parallelism, the bytes it keeps in flight.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：この章で使う GPU の用語**
#
# - *HBM* は GPU のメインメモリ（H200 では毎秒 4.8 TB）、*L2* はすべてのプロセッサが共有するキャッシュで、HBM の数倍速く読み書きできます。容量は H100 SXM で 50 MiB です（H200 のデータシートには記載がありません）。
# - *SM*（ストリーミングマルチプロセッサ）は GPU のプロセッサで、H200 には 132 個あります。Triton の*プログラム*は 1 つの SM の上で、いくつかの*ワープ*（同じ命令を同時に実行する 32 スレッドの組）として動きます。ワープの数は `num_warps` で決めます。
# - *レジスタ*はスレッドごとの記憶領域です。プログラムが多く使うほど、1 つの SM に同時に載るプログラムは減り（*占有率*が下がり）、転送中の読み込みも減ります。
# - *PTX* は NVIDIA の仮想命令セット、*SASS* は GPU が実行する機械語です。ハードウェアは SASS に並んだ順に読み込みを発行します。
# - *起動*は、GPU にカーネルの実行を頼むことです。ホストでは数マイクロ秒かかり、デバイスにも固定コストがかかります。*CUDA グラフ*は一連の起動を記録し、まとめて 1 回で再生します。
# - カーネルの*プロローグ*は入力を読み込む部分、*エピローグ*は結果を書き出す部分です。RoPE を隣のカーネルのプロローグかエピローグに組み込めば、RoPE だけのパスは要りません。
# - *PDL*（programmatic dependent launch）を使うと、前のカーネルが終わりきる前に次のカーネルを始められます。
#
# バイト数の次にカーネルの速さを左右するのは、バイトの動かし方です。アクセスの幅、占有率（1 つの SM に同時に載っているワープの数を、載せられる上限の数で割った値）、メモリレベルの並列性（転送中に保てるバイト数）がそれにあたります。

# %% tags=["setup"]
import json
import os

# Triton runs a kernel in its interpreter, on CPU tensors, when this is set
# before the kernel is defined: this page is built without a GPU.
os.environ["TRITON_INTERPRET"] = "1"

import matplotlib.pyplot as plt
import torch
import triton
import triton.language as tl
from torch.testing import assert_close

from posenc import RotaryEmbedding, apply_rope, rope_frequencies
from posenc.rope_triton import apply_rope_triton
from posenc_lab import RECORDS, gpu_bench, record_path
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
# Llama 3 8B's attention: query heads, key heads, head size, rotated features
n_q, n_k, d, r = 32, 8, 128, 128


def beta_fused(e):
    """Bytes per element of the fused kernel, elements of e bytes."""
    return 2 * e + (4 * r + 8) / ((n_q + n_k) * d)


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
# the time of one byte. Far below that ratio a call takes at least its bytes divided by
# the [memory bandwidth](../docs/glossary.md#memory-bandwidth) (the
# [roofline model](../docs/glossary.md#roofline-model)). So an implementation controls
# first the bytes it moves, and, when they are few, the
# [kernels](../docs/glossary.md#kernel-kernel-launch) it launches. The shapes are Llama
# 3 8B's attention: $n_q = 32$ query heads and $n_k = 8$ key heads
# of $d = 128$ features, all rotated ($r = d$); the symbols follow the
# [notation page](../docs/notation.md).

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
# NVIDIA H200（SXM）はテンソルコア以外の演算器で float32 の演算を毎秒 67 兆回こなし、メモリから毎秒 4.8 TB を運びます。つまり、1 バイトを運ぶ間に 14 flop を実行できます。
# 演算強度がこの比よりずっと小さいと、1 回の呼び出しには「バイト数 ÷ [メモリ帯域幅](../docs/glossary.ja.md#memory-bandwidth)」以上の時間がかかります（[ルーフラインモデル](../docs/glossary.ja.md#roofline-model)）。
# そのため RoPE の実装がまず左右できるのは動かすバイト数で、バイト数が少ないときは起動する[カーネル](../docs/glossary.ja.md#kernel-kernel-launch)の数です。
# 形状は Llama 3 8B のアテンションのものです。クエリのヘッドが $n_q = 32$ 個、キーのヘッドが $n_k = 8$ 個、各ヘッドの次元数は $d = 128$ で、すべての次元を回転させます（$r = d$）。記号は[記法のページ](../docs/notation.ja.md)に従います。

# %% [markdown] lang="en"
# ## What eager PyTorch moves
#
# Count bytes with a simple model: every operation reads each input once and writes
# its output once, with nothing kept in a cache for the next
# (`posenc_lab.traffic.count_traffic` counts exactly this; caches change what DRAM
# moves, both ways, folded below).
# Hugging Face rotates a whole head as
# $x' = x \odot c + \mathrm{rotate\_half}(x) \odot s$, with tables $c$ and $s$ of the
# whole head. Per float32 element of $x$, its five operations are the product with $c$,
# the negation of one half, the concatenation that builds $\mathrm{rotate\_half}(x)$,
# the product with $s$ and the sum:
# $$\beta_{\mathrm{HF}} = (4+4) + (2+2) + (4+4) + (4+4) + (8+4) = 40$$
# five times the floor of 8. Four [temporaries](../docs/glossary.md#temporary-tensor)
# are [materialised](../docs/glossary.md#materialise) and read back. Writing straight
# into the output with `out=` and `addcmul_`, as `posenc`'s eager `apply_rope` does,
# removes them, but still takes three passes: a product with $c$ over the whole tensor,
# then one `addcmul_` for each half, each reading the output and $x$ and writing the
# output (the tables are counted apart):
# $$\beta_{\mathrm{posenc}} = (4+4) + \tfrac{1}{2}(4+4+4) + \tfrac{1}{2}(4+4+4) = 20$$
# In bfloat16 the floor is 4 and the eager formula moves 20, as does Meta's complex
# product; `posenc`'s passes, which rotate in float32 and round once, move 22
# ([the note below](#deeper-bfloat16-metas-complex-product-and-what-caches-do-to-the-count)).

# %% [markdown] lang="ja"
# ## eager モードの PyTorch が動かすバイト数
#
# バイト数は、次の単純なコストモデルで数えます。
# 各演算は入力をそれぞれ 1 回読んで出力を 1 回書き、次の演算に使えるものはキャッシュに何も残らない、と仮定します（`posenc_lab.traffic.count_traffic` が数えるのはまさにこの量です）。
# DRAM が実際に動かす量は、キャッシュのために増える場合と減る場合があります（[下の「さらに詳しく」](#deeper-bfloat16-と-meta-の複素数の掛け算キャッシュで変わる実際のバイト数)）。
# Hugging Face はヘッド全体を $x' = x \odot c + \mathrm{rotate\_half}(x) \odot s$ で回転させます。$c$ と $s$ は、ヘッドのすべての次元について値を並べた表です。
# 5 つの演算は、$c$ との積、半分の正負の反転、$\mathrm{rotate\_half}(x)$ を作る連結、$s$ との積、和です。float32 の $x$ の成分あたりに動かすバイト数を演算ごとに足すと、次のようになります。
# $$\beta_{\mathrm{HF}} = (4+4) + (2+2) + (4+4) + (4+4) + (8+4) = 40$$
# 下限 8 バイトの 5 倍です。
# 4 つの[一時テンソル](../docs/glossary.ja.md#temporary-tensor)を[実体化](../docs/glossary.ja.md#materialise)し、もう一度読むからです。
# `posenc` の eager モードの `apply_rope` のように、`out=` と `addcmul_` で出力に直接書けば、一時テンソルはなくなります。それでも 3 回のパスが必要です。テンソル全体に $c$ を掛けるパスと、半分ずつの `addcmul_` が 2 回で、`addcmul_` はそれぞれ出力と $x$ を読んで出力に書きます（表の分は別に数えます）。
# $$\beta_{\mathrm{posenc}} = (4+4) + \tfrac{1}{2}(4+4+4) + \tfrac{1}{2}(4+4+4) = 20$$
# bfloat16 では下限が 4 バイトで、Hugging Face の式は 20 バイトを動かします。Meta の複素数の掛け算も 20 バイトです。float32 で回転させて 1 回だけ丸める `posenc` のパスは 22 バイトを動かします（[下の「さらに詳しく」](#deeper-bfloat16-と-meta-の複素数の掛け算キャッシュで変わる実際のバイト数)）。

# %% tags=["check"] summary={"en": "the counts by operation, tables apart, in float32 and bfloat16, Meta's path included; transformers' own apply_rotary_pos_emb makes the same operations and bytes; the stored record was taken with the same counter", "ja": "表の分を除けば、演算ごとに数えた値は float32 と bfloat16 の両方で、Meta の参照実装も含めて本文どおりです。transformers の apply_rotary_pos_emb 自体も、演算とバイト数は同じです。計測記録の値は、同じカウンタで数え直した値と一致します"}
import warnings

import posenc.rope

with warnings.catch_warnings():  # transformers' tqdm warns without ipywidgets
    warnings.simplefilter("ignore")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

x = torch.randn(1, 8, 64, 128)  # large enough for the three passes
n = x.numel()
positions = torch.arange(64)
c, s = hf_cos_sin(positions, 128)  # (64, 128): each half repeated
t = count_traffic(lambda: hf_apply_rotary(x, c, s))
assert t.ops == ["mul", "neg", "cat", "mul", "add"]
assert t.total == 40 * n + 2 * c.nbytes  # c and s read once each
# Hugging Face's function itself, on q and k (cos, sin: (b, s, d), unsqueezed)
x_k = x.clone()
t_hf = count_traffic(lambda: apply_rotary_pos_emb(x, x_k, c[None], s[None]))
assert t_hf.ops == 2 * t.ops and t_hf.total == 2 * t.total
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

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: bfloat16, Meta's complex product, and what caches do to the count.**
#
# **bfloat16 and Meta's complex product.** In bfloat16 the floor is 4 and the eager
# formula moves 20, while `posenc`'s passes, which rotate in float32 and round once,
# move 22. Meta's reference code keeps the members of a pair side by side (the
# [interleaved layout](../docs/glossary.md#interleaved-layout)) and multiplies them as
# complex numbers in registers: the floor in float32 (`complex` in the figure and the
# CPU records below), but 20 bytes in bfloat16, which it converts to float32 and back.
#
# **What caches do to the count.** A CPU store to an uncached line usually
# first reads it (write-allocate), so a pass from main memory often moves about $3e$
# bytes per element, the floor's included (some x86 server processors skip that read
# for stores that fill whole lines). A cache larger than a temporary keeps it for the
# next operation: a 50 MiB L2 (the H100 SXM's; the H200's datasheet gives none) can
# hold $k$'s (8 MiB in bfloat16 for 4096 tokens).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：bfloat16 と Meta の複素数の掛け算、キャッシュで変わる実際のバイト数**
#
# **bfloat16 と Meta の複素数の掛け算**
#
# bfloat16 では下限が 4 バイトで、Hugging Face の式は 20 バイトを動かします。一方、`posenc` のパスは float32 で回転させて 1 回だけ丸めるので、22 バイトを動かします。
# Meta の参照実装は、ペアの 2 つの成分を隣り合わせに置き（[インターリーブ配置](../docs/glossary.ja.md#interleaved-layout)）、複素数としてレジスタの中で掛け算します。float32 なら下限と同じバイト数で済みます（後の図と CPU の計測記録の `complex`）。bfloat16 では float32 に変換して戻すので 20 バイトです。
#
# **キャッシュで変わる実際のバイト数**
#
# CPU は、キャッシュにないキャッシュラインへ書き込むとき、ふつうまずそのラインをメモリから読み込みます（ライトアロケート、write-allocate）。
# そのため、メインメモリからのパスは、下限のパスも含めて成分あたり約 $3e$ バイトを動かすことがよくあります。
# ただし、ライン全体を埋める書き込みではこの読み込みを省く x86 のサーバ向けプロセッサもあります。
# 逆に、一時テンソルより大きなキャッシュは、それを次の演算まで保持します。
# 50 MiB の L2（H100 SXM のもの。H200 のデータシートには記載がありません）は、$k$ の一時テンソル（4096 トークンの bfloat16 で 8 MiB）を保持できます。

# %% [markdown] lang="en"
# ## One pass: a fused kernel
#
# A GPU kernel can hold $a_i$ and $b_i$ in registers while it computes both outputs:
# one read and one write per element, the floor. What remains is the table. A token's
# position $p$ selects one row of the cos/sin table, $r/2$ values of each, and every
# head of $q$ and of $k$ at that token uses the same row. So `posenc`'s kernel runs one
# program per token: it loads its position and the row once, then rotates all the
# token's heads. With the table in float32 and an int64 position per token, it moves
# per element
# $$\beta_{\mathrm{fused}} = 2e + \frac{4r + 8}{(n_q + n_k)\,d}$$
# The row serves the 40 heads of Llama 3 8B, so the table adds 0.1 byte: 8.1 bytes in
# float32, 4.1 in bfloat16, against 40 and 20 for Hugging Face's formula. vLLM's CUDA
# kernel and Liger Kernel divide the work the same way
# ([Where production systems fuse RoPE](#where-production-systems-fuse-rope)).

# %% [markdown] lang="ja"
# ## 1 回のパスで済ませる：融合カーネル
#
# GPU のカーネルなら、$a_i$ と $b_i$ をレジスタに置いたまま 2 つの出力を計算できるので、各成分の読み込みと書き込みは 1 回ずつ、つまり下限で済みます。
# 残るのは表の分です。
# トークンの位置 $p$ が cos と sin の表の 1 行（それぞれ $r/2$ 個の値）を選び、そのトークンの $q$ と $k$ のすべてのヘッドが同じ行を使います。
# そこで `posenc` のカーネルは、トークン 1 つにプログラム（Triton の並列実行の単位）を 1 つ割り当てます。
# プログラムは位置と表の行を 1 回だけ読み込み、そのトークンのすべてのヘッドを回転させます。
# 表が float32、位置がトークンあたり int64 1 つなら、成分あたりに動かすバイト数は次のとおりです。
# $$\beta_{\mathrm{fused}} = 2e + \frac{4r + 8}{(n_q + n_k)\,d}$$
# Llama 3 8B では 1 行を 40 個のヘッドが使うので、表の分は 0.1 バイトだけです。
# float32 で 8.1 バイト、bfloat16 で 4.1 バイトで、Hugging Face の式の 40 バイトと 20 バイトに比べてずっと少なくなります。
# vLLM の CUDA カーネルと Liger Kernel も同じ分け方をしています（[「実際のシステムは RoPE をどこで融合しているか」](#実際のシステムは-rope-をどこで融合しているか)の節）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: each contender's bytes, from the record.** The figure draws the byte
# counts of the stored CPU record beside $\beta_{\mathrm{fused}}$. `apply_rope` lies
# above 20 and 22 because its blocks re-read the tables.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：計測記録による比較対象ごとのバイト数**
#
# 次の図に、保存した CPU の計測記録のバイト数を $\beta_{\mathrm{fused}}$ と並べて示します。
# `apply_rope` が float32 で 20、bfloat16 で 22 を上回るのは、ブロックごとに表を読み直すからです。

# %% tags=["deeper", "figure"] alt={"en": ["Horizontal bar chart of bytes moved per element of q and k at Llama 3 8B's shapes, as counted in the stored record, float32 and bfloat16 bars side by side for each contender. hf_formula is longest (about 40 in float32, 20 in bfloat16), apply_rope and rotary_embedding about 23 in float32 and 25 in bfloat16, complex (float32 only) about 8, and the floor 8 in float32 and 4 in bfloat16; the fused kernel's formula gives 8.1 and 4.1, next to the floor's 8 and 4."], "ja": ["Llama 3 8B の形状で q と k の成分あたりに動かすバイト数（保存した計測記録で数えた値）を、比較対象ごとに float32 と bfloat16 の棒を並べて示した横棒グラフです。いちばん長いのは hf_formula（float32 で約 40、bfloat16 で約 20）です。apply_rope と rotary_embedding は float32 で約 23、bfloat16 で約 25 です。complex（float32 のみ）は約 8、下限（floor）は float32 で 8、bfloat16 で 4 です。融合カーネルの式の値 8.1 と 4.1 は、それぞれ下限の 8、4 とほぼ同じ長さです。"]}
names = ["floor", "hf_formula", "complex", "apply_rope", "rotary_embedding"]
cases = records["1-thread"]["cases"]
fig, ax = plt.subplots(figsize=(6.4, 2.3))
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
# Here is that kernel in Triton, reduced to its structure: inputs `(tokens, heads, d)`,
# contiguous, half layout, float32.
# [The note below](#deeper-for-kernel-writers-the-kernel-line-by-line) reads it line by
# line.

# %% [markdown] lang="ja"
# 次のセルは、このカーネルを Triton で書き、骨組みだけを残したものです。入力は形状 `(tokens, heads, d)` の連続したテンソルで、半分割配置、float32 に限ります。
# 1 行ずつの説明は[下の「さらに詳しく」](#deeper-カーネルを-1-行ずつ読むカーネルを書く読者向け)にあります。


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

# %% tags=["check"] summary={"en": "the small kernel rotates as apply_rope does, within tolerance, packed sequences included; counted lane by lane (a lane: one value of a block) and tensor by tensor in Triton's interpreter, it requests β_fused bytes per element at Llama 3 8B's shapes: q and k once each way, the table row once per token (lanes, not instructions, 32-byte sectors of a memory transfer or what DRAM moves)", "ja": "小さなカーネルは、複数の系列を詰めた入力（位置が途中で 0 に戻る）も含めて、apply_rope と許容誤差の範囲で同じ回転をします。Triton のインタプリタでレーン（ブロックの中の値 1 つ）ごと、テンソルごとに数えると、Llama 3 8B の形状で要求するバイト数は成分あたり β_fused です。q と k は読み書きそれぞれ 1 回、表の行はトークンごとに 1 回だけです（数えたのはレーンです。命令や、メモリ転送の 32 バイトの単位であるセクタ、DRAM が動かす量ではありません）"}
import numpy as np
from triton.runtime.interpreter import InterpreterBuilder

# posenc's kernel takes (b, n, s, d) views: (s, n, d) -> (1, n, s, d)
as_bnsd = lambda t: t.unsqueeze(0).transpose(1, 2)  # noqa: E731
for got, x in ((q_rot, q), (k_rot, k)):
    assert_close(got, apply_rope(x.transpose(0, 1), positions).transpose(0, 1))


def bytes_moved(launch):
    """(address, bytes) of each lane a mask lets through in launch()."""
    load = InterpreterBuilder.create_masked_load
    store = InterpreterBuilder.create_masked_store
    moved = []

    def count(ptrs, mask):
        size = ptrs.get_element_ty().primitive_bitwidth // 8
        through = np.broadcast_to(mask.data, ptrs.data.shape)
        moved.extend((int(a), size) for a in ptrs.data[through])

    def counted_load(self, ptrs, mask, *rest):
        count(ptrs, mask)
        return load(self, ptrs, mask, *rest)

    def counted_store(self, ptrs, value, mask, *rest):
        count(ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    InterpreterBuilder.create_masked_load = counted_load
    InterpreterBuilder.create_masked_store = counted_store
    try:
        launch()
    finally:
        InterpreterBuilder.create_masked_load = load
        InterpreterBuilder.create_masked_store = store
    return moved


def inside(moved, t):
    """Bytes of moved that fall in t's storage."""
    start = t.untyped_storage().data_ptr()
    end = start + t.untyped_storage().nbytes()
    return sum(size for a, size in moved if start <= a < end)


# Llama 3 8B's heads on four tokens, blocks of 8 heads (none masked)
ql, kl = torch.randn(4, n_q, d), torch.randn(4, n_k, d)
rope_l = RotaryEmbedding(d, max_positions=16)
cos_l, sin_l = rope_l.cos_cached.contiguous(), rope_l.sin_cached.contiguous()
pl = torch.tensor([3, 0, 9, 15])  # int64: 8 bytes per token
outs = []
moved = bytes_moved(
    lambda: outs.extend(rope_fused(ql, kl, pl, cos_l, sin_l, block_h=8))
)
per_element = sum(size for _, size in moved) / (ql.numel() + kl.numel())
assert per_element == beta_fused(4)  # 8.1 bytes requested
# by tensor: q and k read once, outputs written once, the row once per token for
# all 40 heads, the position: 8 bytes a token
for t, want in (
    (ql, ql.nbytes),
    (kl, kl.nbytes),
    (outs[0], ql.nbytes),
    (outs[1], kl.nbytes),
):
    assert inside(moved, t) == want
row = inside(moved, cos_l) + inside(
    moved, sin_l
)  # d/2 cosines, d/2 sines a token
assert row == 4 * d * 4 and inside(moved, pl) == 4 * 8

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, the kernel line by line.**
#
# `rope_kernel` is one program; Triton runs it once per token (`grid = (tokens,)`),
# and `tl.program_id(0)` says which. A grid over tokens gives thousands of programs in
# a prefill and one in the decode step of a single sequence. The program loads the
# position and that row of the table, and hands its cos and sin to `rotate_heads` for
# $q$, then $k$. `rotate_heads` walks over the heads a block at a time, `BLOCK_H` heads
# as a `BLOCK_H` by $d/2$ tile: one `tl.load` for the $a$ halves, one for the $b$ halves
# $d/2$ further on, the mask `ok` keeping the last block inside the tensor. Each output
# is one product and one
# [fused multiply-add](../docs/glossary.md#fused-multiply-add) (`tl.fma`), as in
# `apply_rope`. Nothing else touches memory.
#
# **What the real kernel adds.**
# `posenc.rope_triton.apply_rope_triton` is this kernel with what real inputs need.
# Two of these Liger's kernel already has: one block size for $q$'s heads and another
# for $k$'s (`pad_n_qh`, `pad_n_kh`), so that no lane idles at Llama 3 8B's shapes, and
# $k$'s heads loaded with $q$'s, before either is stored. The rest: strides, so that $q$
# and $k$ may be views of a projection laid out `(b, s, n, d)`; 64-bit offsets; the
# interleaved layout, each head loaded as one contiguous run and split into pairs
# in registers; a
# [partial rotation](../docs/glossary.md#partial-rotation) ($r < d$, the other
# features copied); bfloat16 and float16 inputs, rotated in float32 and rounded once;
# an [in-place](../docs/glossary.md#in-place-out-of-place) mode; a
# [backward pass](../docs/glossary.md#backward-pass); and a choice about positions: by
# default the wrapper reads their range back to raise a clear error, a synchronisation
# per call, while `check_positions=False` reads nothing and gives NaN for a position
# outside the table, as a CUDA graph needs. A graph replays fixed addresses: build the
# table before capture (`RotaryEmbedding(d, max_positions=n)` or `reserve(n)`) and keep
# the positions in a device tensor updated in place.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：カーネルを 1 行ずつ読む（カーネルを書く読者向け）**
#
# `rope_kernel` は、1 つのプログラムが実行するコードです。
# Triton はこれをトークンごとに 1 回実行し（`grid = (tokens,)`）、`tl.program_id(0)` がどのトークンかを表します。
# トークン単位のグリッドでは、プログラムの数はプリフィルで数千、1 系列だけのデコードでは 1 ステップあたり 1 つです。
# プログラムは位置とその位置の表の行を読み込み、その cos と sin を `rotate_heads` に渡して、$q$、続いて $k$ を回転させます。
# `rotate_heads` はヘッドをブロックごとに順にたどり、`BLOCK_H` 個のヘッドを `BLOCK_H` × $d/2$ のタイルとして扱います。
# 1 つ目の `tl.load` で各ヘッドの前半（$a$）を、2 つ目で $d/2$ 先にある後半（$b$）を読み込みます。
# マスク `ok` は、最後のブロックがテンソルの外を読み書きしないようにします。
# 各出力は `apply_rope` と同じく積 1 回と[融合積和演算](../docs/glossary.ja.md#fused-multiply-add)（`tl.fma`）1 回で計算します。
# メモリに触れるのはこれだけです。
#
# **実際のカーネルが加えるもの**
#
# `posenc.rope_triton.apply_rope_triton` は、このカーネルに、実際の入力を扱うための機能を加えたものです。
# そのうち 2 つは Liger のカーネルがすでに備えています。
# ブロックの大きさを $q$ のヘッドと $k$ のヘッドで別々に決める（`pad_n_qh`、`pad_n_kh`）ので、Llama 3 8B の形状ではアイドルになるレーンがありません。
# また、$k$ のヘッドを $q$ のヘッドと一緒に読み込み、どちらも書き込む前に読み終えます。
# 残りは次のとおりです。
# ストライドを扱うので、$q$ と $k$ は `(b, s, n, d)` の順に並んだ射影の出力から取ったビューでもかまいません。
# オフセットは 64 ビットで計算します。
# インターリーブ配置にも対応し、その場合は各ヘッドを連続した 1 つの範囲として読み込んで、レジスタの中でペアに分けます。
# [部分回転](../docs/glossary.ja.md#partial-rotation)（$r < d$ のとき残りの次元はコピーします）にも対応します。
# bfloat16 と float16 の入力は float32 で回転させて 1 回だけ丸めます。
# [インプレース](../docs/glossary.ja.md#in-place-out-of-place)で書くこともでき、[逆伝播](../docs/glossary.ja.md#backward-pass)にも対応しています。
# 位置の扱いも選べます。
# 既定では、ラッパが位置の範囲をホストへ読み戻し、範囲外ならわかりやすいエラーを出すので、呼び出しごとに同期が 1 回起きます。
# `check_positions=False` なら何も読み戻さず、表の外の位置に対する出力は NaN になります。CUDA グラフで使うには、この設定が必要です。
# グラフはキャプチャしたときのアドレスのまま再生されるので、表はキャプチャの前に用意しておき（`RotaryEmbedding(d, max_positions=n)` か `reserve(n)`）、位置はデバイス上のテンソルに置いてインプレースで更新します。

# %% [markdown] lang="en" tags=["deeper"]
# **The backward pass is the same kernel.** A rotation by $p\theta_i$ is
# an orthogonal map, so its transpose, which carries the gradient back, is the
# rotation by $-p\theta_i$. `posenc`'s kernel runs its backward pass as the forward
# pass with $-\sin$ in place of $\sin$ (Liger Kernel does the same), so it costs one
# more pass over the gradients of $q$ and $k$ and nothing else.

# %% [markdown] lang="ja" tags=["deeper"]
# **逆伝播も同じカーネル**
#
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


# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, bytes in flight, the settings and the loads in
# PTX and SASS.**
#
# **Keeping the memory busy.** Bandwidth needs bytes in
# flight. By Little's law, the bytes that must have been requested and not yet received
# equal the rate times the latency. Stores are posted, so only reads count: about half
# of a one-pass kernel's 4.8 TB/s, and at a latency of about 600 ns (our assumption for
# HBM, the GPU's main memory; NVIDIA does not publish the H200's) that is
# 2.4 TB/s × 600 ns ≈ 1.4 MB, some 11 KB for each of the H200's 132 SMs. Compiled
# for sm_90 as it is launched at Llama 3 8B's shapes, the kernel holds $q$'s and $k$'s
# blocks at once, in at most 64 registers a thread in bfloat16 (72 in float32), and
# spills nothing at Triton's default of `num_warps = 4` (128 threads a program): 8
# programs fit in an SM's 65,536 registers in bfloat16, 7 in float32. A program's loads
# come in phases: in bfloat16 the position, then the row with $q$, then $k$, so at most
# the row and $q$, about 8.5 KiB, are in flight at once; in float32 the position, then
# the row with $q$ and $k$, 20.5 KiB. So a few of
# an SM's 8 (or 7) resident programs in their load phase cover the 11 KB. That is a
# margin, not a fit: under load HBM's latency grows, and with it the bytes needed. One
# program per token keeps enough bytes in flight in a prefill unless most resident
# programs sit waiting on their position, which only a GPU run shows. Two designs would keep more bytes in flight: several tokens per
# program (FlashInfer's cos/sin-cache kernel does this, below), or a persistent grid in
# which each program loads its next token's position, row and heads while it rotates
# the current one. FlashAttention's stand-alone Triton
# kernel tiles heads by tokens: more programs, and the table tile loaded once per block
# of heads.
#
# **The settings.** They are fixed, untuned. `num_warps` is Triton's
# default. `BLOCK_Q` and `BLOCK_K` are the head counts rounded up to a power of two,
# capped at 4096 elements per half: 32 and 8 at Llama 3 8B's shapes, so no row is
# masked, where one block for both would leave 24 of $k$'s 32 rows masked. A rotated width that is not a power of two pads
# the other way: a head of 96 has halves of 48, padded to 64, a quarter of the lanes
# masked. `triton.autotune` can choose `num_warps` and the blocks per shape on a GPU.
#
# **The width of the loads, in PTX and SASS.** How wide the loads are depends on
# alignment and on the tile. Triton's launcher (the
# Python code that launches a kernel) marks pointers aligned to 16 bytes and integer
# arguments divisible by 16, so with strides such as 128 the compiler can prove that
# each half of a head is contiguous and starts on 16 bytes (`tl.multiple_of` tells it a
# divisibility the launcher cannot check). The 128 threads of a program share each
# `BLOCK` by $d/2$ tile, each moving a contiguous run in one access of up to 128 bits.
# In the SASS for sm_90 at Llama 3 8B's shapes (`tests/test_rope_triton.py` traces every
# load and store of the PTX to its tensor and reads the SASS back with the `cuobjdump`
# that ships with Triton), $q$'s block of 32 heads gets 128-bit loads and stores
# (`LDG.E.128`) in both dtypes; $k$'s block of 8 heads, 4 values a thread, gets 64-bit
# ones in bfloat16 (`LDG.E.64`, on a fifth of the bytes, still coalesced), set by the
# tile against `num_warps`, not by alignment. The interleaved layout loads each head's
# $r$ features as one contiguous run, splits the pairs in registers (`tl.reshape` then
# `tl.split`, as FlashAttention's rotary kernel does) and joins them back for one
# contiguous store: 128 bits for $q$ and $k$ alike, where a stride of 2 would move one
# element an access.
# Counted lane by lane in Triton's interpreter (the check of the small kernel above, and
# the tests for `posenc`'s), the kernel requests $\beta_{\mathrm{fused}}$ bytes per
# element. That count sees lanes, not instructions or sectors (the threads request the
# table row many times over, served by L1). What DRAM moves is not measured.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：転送中のバイト数、設定、PTX と SASS に見る読み込み（カーネルを書く読者向け）**
#
# **メモリを休ませない**
#
# 帯域幅を使い切るには、常に十分な量の転送中のバイト（要求してまだ届いていないバイト）が要ります。
# リトルの法則によれば、その量は転送の速さとレイテンシの積です。
# 書き込みは完了を待たずに進むので、数えるのは読み込みだけです。1 回のパスのカーネルでは、読み込みが運ぶのは毎秒 4.8 TB の約半分です。
# HBM（GPU のメインメモリ）のレイテンシは、この章では約 600 ns と仮定します（NVIDIA は H200 の値を公表していません）。
# したがって、必要な転送中のバイト数は 2.4 TB/s × 600 ns ≈ 1.4 MB で、H200 の 132 個の SM で割ると 1 つあたり約 11 KB です。
# Llama 3 8B の形状での起動と同じ条件で sm_90 向けにコンパイルすると、カーネルは $q$ と $k$ のブロックを同時にレジスタに持ちます。
# Triton の既定の `num_warps = 4`（プログラムあたり 4 ワープ、128 スレッド）で、使うレジスタはスレッドあたり bfloat16 で 64 個以下（float32 で 72 個以下）です。
# スピル（レジスタに収まらない値のメモリへの退避）もありません。
# この使用量なら、SM の 65,536 個のレジスタに、bfloat16 では 8 つ、float32 では 7 つのプログラムが同時に収まります。
# プログラムの読み込みは段階を追って進みます。bfloat16 では位置、表の行と $q$、$k$ の順なので、同時に転送中になるのは多くても行と $q$ の約 8.5 KiB です。float32 では、位置のあとに行と $q$ と $k$ をまとめて読むので、20.5 KiB になります。
# したがって、SM に常駐する 8 つ（float32 では 7 つ）のプログラムのうちいくつかが読み込みの段階にあれば、11 KB をまかなえます。
# 見積もりでは余裕があり、ぎりぎりではありません。負荷がかかると HBM のレイテンシが伸び、必要なバイト数もそれにつれて増えるので、この余裕が要ります。
# トークン 1 つにプログラム 1 つでも、プリフィルなら転送中のバイト数は足ります。ただし、常駐するプログラムの大半が位置の読み込みを待っていれば足りず、そうなるかどうかは GPU で実行しないとわかりません。
# 転送中のバイト数をさらに増やせる設計は 2 つあります。
# 1 つは、プログラムに複数のトークンを受け持たせることです（FlashInfer の cos と sin の表を使うカーネルはそうしています。後述）。
# もう 1 つは永続（persistent）グリッドで、各プログラムが今のトークンを回転させている間に、次のトークンの位置、行、ヘッドを読み込んでおきます。
# FlashAttention が単体で提供する Triton カーネルは、ヘッドとトークンの 2 方向でタイルに区切ります。その分プログラムは増え、表のタイルはヘッドのブロックごとに 1 回読み込まれます。
#
# **設定**
#
# 設定は調整せず固定しています。`num_warps` は Triton の既定値のままです。
# `BLOCK_Q` と `BLOCK_K` は、ヘッドの数を 2 のべき乗に切り上げたもので、半分あたり 4096 成分を上限とします。
# Llama 3 8B の形状では 32 と 8 で、マスクされる行はありません。両方に同じブロックを使えば、$k$ の 32 行のうち 24 行がマスクされるところです。
# 回転させる幅が 2 のべき乗でないと、今度は列の方向に切り上げが起きます。次元数 96 のヘッドでは半分が 48 列で、それを 64 列に切り上げるので、レーンの 4 分の 1 がマスクされます。
# GPU があれば、`triton.autotune` で形状ごとに `num_warps` とブロックの大きさを選べます。
#
# **PTX と SASS に見る読み込みの幅**
#
# 読み込みの幅は、アラインメントとタイルによります。
# Triton のランチャ（カーネルを起動する Python のコード）は、16 バイトにそろったポインタと 16 で割り切れる整数の引数に印を付けます。
# そのため 128 のようなストライドなら、各ヘッドの半分が 16 バイト境界から始まって連続していることを、コンパイラが証明できます。
# ランチャが確かめられない「何の倍数か」という情報は、`tl.multiple_of` でコンパイラに伝えます。
# プログラムの 128 個のスレッドは `BLOCK` × $d/2$ のタイルを分け合い、各スレッドは受け持つ連続した部分を、最大 128 ビットの 1 回のアクセスで動かします。
# `tests/test_rope_triton.py` は、PTX のすべての読み込みと書き込みについて対象のテンソルを突き止め、SASS を Triton に同梱の `cuobjdump` で読み戻します。
# Llama 3 8B の形状で sm_90 向けにコンパイルした SASS では、ヘッド 32 個の $q$ のブロックの読み込みと書き込みは、どちらの dtype でも 128 ビット（`LDG.E.128`）です。
# ヘッド 8 個の $k$ のブロックでは、スレッドあたりの値が 4 個で、bfloat16 の読み込みと書き込みは 64 ビット（`LDG.E.64`）になります。64 ビットになるのは全体のバイト数の 5 分の 1 だけで、アクセスはコアレスアクセス（隣り合うスレッドのアクセスが 1 回のメモリ転送にまとまること）のままです。
# この幅を決めているのはアラインメントではなく、タイルの大きさと `num_warps` の関係です。
# インターリーブ配置では、各ヘッドの $r$ 個の成分を連続した 1 つの範囲として読み込みます。
# それを FlashAttention の rotary カーネルと同じく `tl.reshape` と `tl.split` で、レジスタの中でペアに分けます。
# 書き込む前にまたつなげて連続した範囲に 1 回で書くので、$q$ と $k$ のどちらでもアクセスは 128 ビットです。ストライド 2 で読めば、アクセス 1 回で 1 成分しか動きません。
# Triton のインタプリタでレーンごとに数えると（上の小さなカーネルの確認のセルと、`posenc` のカーネルのテスト）、カーネルが要求するバイト数は成分あたり $\beta_{\mathrm{fused}}$ です。
# この数え方が見るのはレーンで、命令やセクタではありません（実際には、スレッドが表の行を何度も要求し、L1 キャッシュがそれに応えます）。
# DRAM が実際に動かすバイト数は計っていません。
# %% [markdown] lang="en"
# ## Where production systems fuse RoPE
#
# A fused RoPE kernel still reads $q$ and $k$ and writes them back for the next kernel
# to read again, so some production systems fold it into a neighbouring kernel;
# others fuse RoPE's own operations into one pass, by a compiler or by hand:
#
# | system | where RoPE runs |
# |---|---|
# | vLLM | compiled (the default): the PyTorch formula, fused by Inductor with its neighbours; eager: its own CUDA kernel, in place |
# | FlashInfer | its own kernel, in place; fused with quantisation and the append to a paged [KV cache](../docs/glossary.md#kv-cache); or inside attention |
# | FlashAttention 2 | with `flash_attn_with_kvcache`: inside the attention kernel, as it appends the new keys to the KV cache and loads the queries |
# | Liger Kernel | its own Triton kernel, one program per token, in place |
#
# Each system's functions, and how it stores cos and sin, are in
# [the note below](#deeper-for-kernel-writers-each-systems-entry-points-and-tables).

# %% [markdown] lang="ja"
# ## 実際のシステムは RoPE をどこで融合しているか
#
# RoPE の融合カーネルでも、$q$ と $k$ をメモリから読んで書き戻すことに変わりはなく、次のカーネルがそれをもう一度読みます。
# そのため推論システムは、できるところでは RoPE を前後どちらかのカーネルに融合するか、RoPE の演算どうしを、コンパイラか手書きのカーネルで 1 回のパスに融合するシステムもあります。
#
# | システム | RoPE を実行する場所 |
# |---|---|
# | vLLM | 既定のコンパイルモードでは PyTorch の式で、Inductor が前後の演算と融合。eager モードでは専用の CUDA カーネルがインプレースで回転 |
# | FlashInfer | 専用のカーネルでインプレース。または、量子化の処理や、ページ化した [KV キャッシュ](../docs/glossary.ja.md#kv-cache)への追加と同じカーネルで回転。または、アテンションの中で回転 |
# | FlashAttention 2 | `flash_attn_with_kvcache` では、アテンションのカーネルの中で、新しいキーを KV キャッシュに追加するときと、クエリを読み込むときに回転 |
# | Liger Kernel | 専用の Triton カーネル。トークン 1 つにプログラム 1 つ、インプレース |
#
# 各システムの関数と、cos と sin の持ち方は、[下の「さらに詳しく」](#deeper-各システムの入口の関数とcos-と-sin-の表の持ち方カーネルを書く読者向け)にまとめます。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, each system's entry points and tables.**
#
# | system | where RoPE runs | cos and sin |
# |---|---|---|
# | vLLM | compiled (the default): the PyTorch formula (`forward_native`), fused by Inductor with its neighbours; eager or with `+rotary_embedding`: the CUDA kernel `rotary_embedding`, in place, one thread block per token. A separate kernel writes $k$ and $v$ into the [KV cache](../docs/glossary.md#kv-cache) (fused with RoPE on ROCm with AITER only) | a table of positions × $r$, cos then sin, cast to $q$'s dtype, read at each token's position |
# | FlashInfer | in place: `apply_rope_with_cos_sin_cache_inplace` (vLLM's interface) or `apply_rope_pos_ids_inplace`; fused: `rope_quantize_fp8_append_paged_kv_cache` rotates, quantises to FP8 and appends to a paged KV cache; and inside attention with `pos_encoding_mode="ROPE_LLAMA"` | a float32 table, or computed on the fly from `rope_theta` |
# | FlashAttention 2 | inside the attention kernel: `flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` rotates the new keys as it appends them to the KV cache, and the queries as it loads them | tables of positions × $r/2$ in $q$'s dtype; interleaved pairs unless `rotary_interleaved=False` |
# | Liger Kernel | one program per token, in place; the backward pass with $-\sin$ | Hugging Face's per-token cos and sin, `(b or 1, s, d)`, indexed by the program's token, first half read |
# | `posenc` | `apply_rope_triton`, out of place or in place | strided views of the module's float32 table, read at each token's position |

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：各システムの入口の関数と、cos と sin の表の持ち方（カーネルを書く読者向け）**
#
# | システム | RoPE を実行する場所 | cos と sin |
# |---|---|---|
# | vLLM | 既定のコンパイルモードでは PyTorch の式（`forward_native`）で、Inductor がカーネルを生成して前後の演算と融合。eager モードか `+rotary_embedding` の指定では CUDA のカーネル `rotary_embedding` がインプレースで回転（トークン 1 つにスレッドブロック 1 つ）。[KV キャッシュ](../docs/glossary.ja.md#kv-cache)への $k$ と $v$ の書き込みは別カーネル（RoPE と融合するのは ROCm で AITER を使う場合だけ） | 位置 × $r$ の表（cos、sin の順）を $q$ の dtype に変換し、各トークンの位置の行を読む |
# | FlashInfer | インプレース：`apply_rope_with_cos_sin_cache_inplace`（vLLM と同じインターフェース）か `apply_rope_pos_ids_inplace`。融合：`rope_quantize_fp8_append_paged_kv_cache`（回転、FP8 への量子化、ページ化した KV キャッシュへの追加）。アテンションの中：`pos_encoding_mode="ROPE_LLAMA"` | float32 の表か、`rope_theta` からその場で計算 |
# | FlashAttention 2 | アテンションのカーネルの中：`flash_attn_with_kvcache(..., rotary_cos=..., rotary_sin=...)` が、新しいキーを KV キャッシュへの追加時に、クエリを読み込み時に回転 | 位置 × $r/2$ の表（$q$ の dtype）。`rotary_interleaved=False` でなければインターリーブ配置 |
# | Liger Kernel | トークン 1 つにプログラム 1 つ、インプレース。逆伝播は $-\sin$ で回転 | Hugging Face のトークンごとの cos と sin（`(b or 1, s, d)`）を、プログラムの受け持つトークンで参照し、前半だけ読む |
# | `posenc` | `apply_rope_triton`（アウトオブプレースかインプレース） | モジュールの float32 の表のストライド付きビューから、各トークンの位置の行を読む |

# %% [markdown] lang="en"
# The cache write shows what folding saves. Counted with the same model for one decode
# token in bfloat16, RoPE then a separate cache write move 28,672 bytes: $q$ and $k$
# read and written (20,480), then the rotated $k$ and $v$ read and written into the
# cache (8,192). Rotating $k$ straight into the cache skips writing the rotated $k$ and
# reading it back: 24,576 bytes, a seventh less.


# %% [markdown] lang="ja"
# キャッシュへの書き込みを例にとると、融合で何が節約できるかがわかります。
# 同じコストモデルで bfloat16 のデコードのトークン 1 つについて数えると、RoPE のあとに別のカーネルでキャッシュに書く場合は 28,672 バイトです。$q$ と $k$ を読んで書き（20,480）、回転させた $k$ と $v$ を読んでキャッシュに書きます（8,192）。
# $k$ を回転させてそのままキャッシュに書けば、回転させた $k$ を書いて読み直す分が省けるので、24,576 バイトで済みます。7 分の 1 の削減です。


# %% tags=["check"] summary={"en": "for one decode token in bfloat16 the counter gives 28,672 bytes for RoPE then the cache write, 24,576 with k rotated into the cache", "ja": "bfloat16 のデコードのトークン 1 つについて、カウンタは RoPE のあとにキャッシュへ書くと 28,672 バイト、k を回転させて直接キャッシュに書くと 24,576 バイトを数えます"}
# a fused RoPE modelled as one op that reads q (or k) once and writes once
qd = torch.randn(n_q * d, dtype=torch.bfloat16)
kd, vd = (torch.randn(n_k * d, dtype=torch.bfloat16) for _ in range(2))
q_out, k_out = torch.empty_like(qd), torch.empty_like(kd)
cache_k, cache_v = torch.empty_like(kd), torch.empty_like(vd)


def separate():
    torch.mul(qd, 1.0, out=q_out), torch.mul(kd, 1.0, out=k_out)  # RoPE
    cache_k.copy_(k_out), cache_v.copy_(vd)  # the cache write


def into_cache():
    torch.mul(qd, 1.0, out=q_out), torch.mul(kd, 1.0, out=cache_k)
    cache_v.copy_(vd)


assert count_traffic(separate).total == 28672
assert count_traffic(into_cache).total == 24576 == 28672 - 2 * kd.nbytes


# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, a norm next to RoPE.**
#
# Newer models put a norm next to RoPE. Qwen3 applies an RMSNorm with a learned scale
# to each head of $q$ and $k$ before the rotation; Llama 4, in Hugging Face's code, a
# norm without weights after it. Both read the head the rotation reads, and a head's
# sum of squares is a reduction over features a per-token program holds anyway, so one
# pass can do both. Llama 4's order does not matter, as a rotation keeps the norm;
# Qwen3's learned scale differs per feature, so a fused kernel must keep its order.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：RoPE の前後に置く正規化（カーネルを書く読者向け）**
#
# 新しいモデルには、RoPE の直前か直後に正規化を置くものがあります。Qwen3 は回転の前に、$q$ と $k$ のヘッドごとに学習可能なスケール付きの RMSNorm をかけます。Llama 4 は、Hugging Face の実装では、回転のあとに重みのない正規化をかけます。
# どちらの正規化も、回転と同じヘッドを読みます。ヘッドの 2 乗和は、トークンごとのプログラムがどのみちレジスタに読み込む成分を足し合わせるだけなので、正規化と回転を 1 回のパスで済ませられます。
# Llama 4 では、正規化と回転の順序を入れ替えても結果は変わりません。回転はノルムを変えないからです。一方、Qwen3 の学習可能なスケールは次元ごとに違うので、融合カーネルでも順序を守る必要があります。

# %% tags=["deeper", "check"] summary={"en": "a norm without weights commutes with the rotation; an RMSNorm with a learned scale per feature does not", "ja": "重みのない正規化は回転と可換ですが、次元ごとに学習可能なスケールを持つ RMSNorm は可換ではありません"}
g = torch.Generator().manual_seed(0)
x = torch.randn(1, 2, 5, 128, generator=g)
pos = torch.arange(5)
scale = torch.rand(128, generator=g) + 0.5  # a learned scale, one per feature


def l2_norm(t):
    return t / t.norm(dim=-1, keepdim=True)


def rms_norm(t):
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * scale


torch.testing.assert_close(
    l2_norm(apply_rope(x, pos)), apply_rope(l2_norm(x), pos)
)
gap = (rms_norm(apply_rope(x, pos)) - apply_rope(rms_norm(x), pos)).abs().max()
assert gap > 0.1, gap
# %% [markdown] lang="en"
# ## A table, or cos and sin on the fly
#
# The fused kernel reads cos and sin from a table; a kernel can also compute them from
# the position. A float32 table for the 131,072 positions of Llama 3.1 takes 64 MiB,
# but a row costs only 0.1 byte per element, and computing costs arithmetic and no
# memory: in a prefill both are small. In a decode step the table adds a round trip
# that waits on the position, which computing cos and sin removes, provided the kernel
# computes them right
# ([the note below](#deeper-for-kernel-writers-the-tables-size-and-the-numerics-of-cos-and-sin-on-the-fly)).

# %% [markdown] lang="ja"
# ## 表を使うか、cos と sin をその場で計算するか
#
# 融合カーネルは cos と sin を表から読みますが、位置から計算するカーネルもあります。
# Llama 3.1 の 131,072 個の位置の float32 の表は 64 MiB になりますが、行を読むコストは成分あたり 0.1 バイトだけです。その場で計算すれば演算は増えますが、メモリは要りません。プリフィルでは、どちらのコストもわずかです。
# デコードの 1 ステップでは、表を使うと、位置の読み込みを待ってから始まる往復が 1 回加わります。cos と sin を位置から計算すればこの往復はなくなりますが、その計算を正しく行う必要があります（[下の「さらに詳しく」](#deeper-表の大きさとcos-と-sin-をその場で計算するときの数値誤差カーネルを書く読者向け)）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, the table's size and the numerics of cos and sin
# on the fly.**
#
# A float32 table of $n$ positions with $r/2$ cosines and $r/2$ sines per position
# holds $4rn$ bytes: 64 MiB for the 131,072 positions of Llama 3.1 with $r = 128$.
# vLLM casts its table to the model's dtype (32 MiB in bfloat16); `posenc`'s module
# keeps cos and $\pm\sin$ over the whole head, 128 MiB, read by the kernel as views.
# Reading a row costs 0.1 byte per element, computing cos and sin on the fly $r/2$ of
# each per token and no memory: in a prefill both are small. In a decode step they
# differ in latency: the row's address depends on the position just loaded, so the
# table adds a dependent round trip, one of the decode step's chain below, which cos
# and sin computed from the position remove, at the price of computing them right
# (next).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：表の大きさと、cos と sin をその場で計算するときの数値誤差（カーネルを書く読者向け）**
#
# 位置ごとに $r/2$ 個の cos と $r/2$ 個の sin を持つ、$n$ 個の位置の float32 の表は $4rn$ バイトです。
# Llama 3.1 の 131,072 個の位置、$r = 128$ なら 64 MiB になります。
# vLLM は表をモデルの dtype に変換するので、bfloat16 のモデルなら 32 MiB です。
# `posenc` のモジュールは cos と $\pm\sin$ をヘッド全体について並べた 128 MiB の表を持ち、カーネルはそのビューを読みます。
# 行を読むコストは成分あたり 0.1 バイトです。cos と sin をその場で計算すると、トークンあたりそれぞれ $r/2$ 回の計算がかかりますが、メモリは要りません。
# プリフィルでは、どちらのコストもわずかです。
# デコードの 1 ステップでは、レイテンシが違います。
# 行のアドレスは直前に読んだ位置で決まるので、表を使うと、位置の読み込みを待ってから始まる往復が 1 回加わります。
# これは後で見るデコードの往復の連鎖の 1 つで、cos と sin を位置から計算すればなくなります。ただし、その計算を正しく行う必要があります（次の「表を使う場合とその場で計算する場合の数値誤差」）。

# %% tags=["deeper", "check"] summary={"en": "posenc's table takes 8rn bytes, cos and sin being strided views of it; rounded to bfloat16 its values move by at most 2^-9", "ja": "posenc の表は 8rn バイトで、cos と sin はそのストライド付きのビューです。bfloat16 に丸めると、値のずれは最大 2^-9 です"}
llama = RotaryEmbedding(128, base=500000.0, max_positions=4096)
assert llama.rot_cached.nbytes == 8 * 128 * 4096  # (n, 2, d) float32: 8rn bytes
assert llama.cos_cached.stride(0) == llama.sin_cached.stride(0) == 2 * 128
assert llama.cos_cached.data_ptr() == llama.rot_cached.data_ptr()  # a view
rounded = (llama.cos_cached.bfloat16().float() - llama.cos_cached).abs().max()
assert 0.5 * 2.0**-9 < rounded <= 2.0**-9  # half a bfloat16 ulp on [0.5, 1)

# %% [markdown] lang="en" tags=["deeper"]
# **The numerics of a table and of cos and sin on the fly.** Table or
# not, a float32 angle loses accuracy in proportion to the position, as the chapter
# [*Rotary position embedding (RoPE)*](08-rope.ipynb#in-practice-float32-angles-and-the-shape-of-the-positions)
# shows; a bfloat16 table adds up to $2^{-9}$. A kernel that computes cos and sin must
# get three things right itself. Llama 3.1's scaling, which a table carries for free,
# FlashInfer's `apply_llama31_rope` computes. FlashInfer forms the frequency with
# `__powf`, CUDA's fast power, so its angle is not that of a correctly rounded
# frequency. And it takes `__sincosf`, CUDA's fast approximation, whose error bound the
# CUDA C++ Programming Guide gives only on $[-\pi, \pi]$, while the angle reaches $p$
# radians.

# %% [markdown] lang="ja" tags=["deeper"]
# **表を使う場合とその場で計算する場合の数値誤差**
#
# 表の有無によらず、float32 の角度は位置に比例して精度を失います。
# 詳しくは[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章の[「実際に使うときの注意：float32 の角度と位置の形状」](08-rope.ipynb#実際に使うときの注意float32-の角度と位置の形状)の節を参照してください。
# bfloat16 の表は、さらに $2^{-9}$ までの誤差を加えます。
# cos と sin を計算するカーネルは、次の 3 つを自分で正しく扱わなければなりません。
# 1 つ目は Llama 3.1 のスケーリングで、表なら何もしなくても反映されますが、カーネルでは計算が必要です（FlashInfer の `apply_llama31_rope` は計算しています）。
# 2 つ目は周波数で、FlashInfer は CUDA の高速なべき乗 `__powf` で求めるので、その角度は正しく丸めた周波数から作った角度ではありません。
# 3 つ目は cos と sin そのもので、FlashInfer は CUDA の高速な近似関数 `__sincosf` を使います。CUDA C++ Programming Guide はその誤差の上界を $[-\pi, \pi]$ の引数についてしか示していませんが、角度は $p$ ラジアンにまで達します。

# %% [markdown] lang="en"
# ## The decode step: latency, not bandwidth
#
# A [decode step](../docs/glossary.md#decode-step) rotates one token: 20 KiB of $q$ and
# $k$ in bfloat16, read and written, 4 ns at 4.8 TB/s. Its time is latency instead: the
# kernel must load the position before it can load the table row at that position, two
# trips to memory in a row, and Hugging Face's eager formula launches about ten small
# kernels a layer for RoPE alone. So capture the step in a CUDA graph or compile it first;
# folding RoPE into the cache write or into attention, as FlashInfer and
# FlashAttention do, removes its kernel altogether
# ([the note below](#deeper-for-kernel-writers-the-decode-chain-and-the-launches)).

# %% [markdown] lang="ja"
# ## デコードの 1 ステップ：帯域幅ではなくレイテンシ
#
# [デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)で回転させるのはトークン 1 つです。bfloat16 の $q$ と $k$ を読んで書いても 20 KiB で、毎秒 4.8 TB なら 4 ns です。
# 時間を決めるのはレイテンシです。カーネルは位置を読み込むまで、その位置の表の行を読み込めないので、メモリとの往復が 2 回続きます。さらに Hugging Face の eager モードの式は、RoPE だけで層あたり約 10 個の小さなカーネルを起動します。
# したがって、最初に打つ手は、ステップを CUDA グラフでキャプチャするか、コンパイルすることです。FlashInfer や FlashAttention のように RoPE をキャッシュへの書き込みかアテンションに融合すれば、RoPE のカーネルそのものがなくなります（[下の「さらに詳しく」](#deeper-デコードでの読み込みの連鎖とカーネルの起動カーネルを書く読者向け)）。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, the decode chain and the launches.**
#
# A [decode step](../docs/glossary.md#decode-step) rotates one token:
# $(n_q + n_k)d = 5120$ elements, 10 KiB of $q$ and $k$ in bfloat16, read and written:
# 20 KiB, 4 ns at 4.8 TB/s.
# A kernel this small never approaches the bandwidth: its time is the latency of loads
# that wait on each other. A program loads the position, then the table row at that
# position; in the sm_90 SASS at Triton's default of 4 warps, $q$'s loads issue with
# the row and, in bfloat16, $k$'s only after the first multiply that uses it: three round
# trips in a row, the first two set by the data (the row's address is the position), the
# third, $k$'s, by this build's schedule (in float32 it issues $k$'s loads with the row:
# two). In this model the position and the row come from HBM, the GPU's main
# memory, as 436 MB of weights have streamed through a 50 MiB L2 since the last
# layer read them; $k$, just written by the projection, likely from L2.
#
# Launches may cost more. Eager, a Hugging Face Llama layer runs 40 ATen operations, ten
# of them RoPE's, about a kernel each on a GPU (count them with `torch.profiler`), and at an assumed 5 µs of host time each the host paces the step; the
# fused kernel's Python wrapper alone costs the host as much as several small eager
# operations (`lab/README.md`). So capture the step in a CUDA graph, or compile it,
# first ([what the real kernel adds](#deeper-for-kernel-writers-the-kernel-line-by-line),
# above). Then, in this model, each kernel
# costs a fixed amount plus its round trips. Programmatic dependent launch can hide part
# of the chain (the position and the row do not depend on the kernel before); fusion
# into the QKV projection's epilogue (where a matrix product writes its result), which
# none of the systems above does, or attention's prologue (where it loads its inputs),
# as FlashAttention does, removes the kernel altogether.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：デコードでの読み込みの連鎖とカーネルの起動（カーネルを書く読者向け）**
#
# [デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)で回転させるのはトークン 1 つです。
# 成分は $(n_q + n_k)d = 5120$ 個で、bfloat16 の $q$ と $k$ は 10 KiB です。読んで書くと 20 KiB で、毎秒 4.8 TB なら 4 ns です。
# しかし、これほど小さなカーネルは帯域幅の限界に遠く及びません。時間を決めるのはレイテンシで、前の読み込みの結果を待つ読み込みが続くと、その往復の時間が積み重なります。
# プログラムはまず位置を、次にその位置の表の行を読み込みます。
# Triton の既定の 4 ワープで sm_90 向けにコンパイルした SASS では、$q$ の読み込みは行と一緒に発行されます。bfloat16 では、$k$ の読み込みは行を使う最初の乗算のあとです。
# そのため bfloat16 では、メモリとの往復が 3 回続きます（float32 では $k$ も行と一緒に読み込まれ、2 回です）。最初の 2 回は、位置を読むまで行のアドレスが決まらないので、データの依存関係で順番が決まります。3 回目（$k$ の読み込み）の順番を決めているのは、データではなく、このビルドの命令の並べ方です。
# このモデルでは、位置と行は HBM（GPU のメインメモリ）から読み込まれるとします。前の層が読んだあと、436 MB の重みが 50 MiB の L2 を通り抜け、これらを追い出しているからです。$k$ は射影が書いたばかりなので、おそらく L2 から読み込まれます。
#
# 起動のコストは、さらに大きくなりえます。
# eager モードでは、Hugging Face の Llama の 1 層が ATen の演算を 40 個実行し、そのうち 10 個が RoPE のものです。GPU では、それぞれがほぼカーネル 1 つです（実際の数は `torch.profiler` で数えられます）。起動 1 回にホストで 5 µs かかると仮定すると、ステップの速さを決めるのはホストです。融合カーネルにしても、Python で書かれたラッパだけで、小さな eager モードの演算数個分のホスト時間がかかります（`lab/README.md`）。
# したがって、最初に打つ手は、ステップを CUDA グラフでキャプチャするか、コンパイルすることです（[上の「実際のカーネルが加えるもの」](#deeper-カーネルを-1-行ずつ読むカーネルを書く読者向け)）。
# そうすると、このコストモデルでの各カーネルのコストは、固定コストと、そのカーネル自身の往復の時間の和になります。
# 連鎖の一部は CUDA の programmatic dependent launch（PDL）で隠せます（位置と表の行は、前のカーネルの結果を待たずに読めます）。カーネルそのものをなくすには、QKV の射影のエピローグ（行列積の結果を書き出す処理）か、アテンションのプロローグ（入力を読み込む処理）へ融合します。前者を行っているシステムは上の表にはなく、後者は FlashAttention が行っています。

# %% [markdown] lang="en" tags=["deeper"]
# **Shortening the chain on the device.** At an assumed 200 ns for an L2
# round trip and 600 ns for HBM (NVIDIA publishes neither), the chain takes
# $2 \cdot 600 + 200$ ns $= 1.4$ µs. `posenc`'s kernel loads $k$ with $q$, as Liger's
# does: the compiler may not move a load above a store that might
# reach the same memory ($q$'s output could alias $k$), so the kernel loads both
# tiles, then stores both, and in the SASS for sm_90 every load of a block of heads
# comes before its first store. Five changes would shorten the chain:
#
# 1. Issue $k$'s loads with the row: in bfloat16 at `num_warps = 8` (40 registers) the
#    SASS issues every load before the first multiply, two round trips (1.2 µs), but
#    $k$'s accesses become 32-bit (in float32, 8 warps move $k$ after it instead).
# 2. Compute cos and sin from the position, loading $q$ and $k$ alongside: no row trip
#    (1.4 µs becomes about 0.6, the position alone); but CUDA's `sincosf` takes a slow
#    path above about $10^5$ radians, and the fastest pair's angle is the position
#    itself, so positions past about $10^5$ take it.
# 3. When tokens are fewer than SMs, a grid of tokens by blocks of heads. FlashInfer's
#    cos/sin-cache launcher asks `cudaOccupancyMaxActiveBlocksPerMultiprocessor` how
#    many blocks fit: if the tokens fill them it runs 8 tokens a block ($d = 128$ in
#    bfloat16, 128-bit accesses, a loop over the heads), else token groups by heads.
# 4. Keep the position and the row in L2 across the layer's weights:
#    `eviction_policy="evict_last"` (the weights `evict_first`), or an L2 persisting
#    window (`cudaAccessPolicyWindow`), so that all three trips go to L2. Not measured.
# 5. Gather each token's cos/sin row once per step for all the layers, as Hugging Face
#    does and Liger Kernel's kernel takes: every layer's kernel then finds its token's
#    row by the token's index, not its position, so no load waits for another: one trip
#    fewer for the same 0.1 byte per element (512 bytes a token, from memory all the
#    same unless kept in L2 against the weights, as item 4 says).
#
# Programmatic dependent launch (PDL) then lets the kernel start while the
# one before it drains (FlashInfer's fused RoPE kernels take `enable_pdl`), so the chain
# is an upper bound where something overlaps it.
#
# Folding RoPE into the epilogue of the QKV projection depends on the layout. In the
# half layout feature $i$ pairs with $i + r/2$, so the GEMM's output tile must hold both
# halves of each head (a tile a multiple of $d$ wide, aligned to heads) or exchange
# values across tiles; in the interleaved layout a pair sits in adjacent columns,
# usually in one thread's accumulators, and the fusion is almost free. The cell below counts
# the kernels of a Hugging Face Llama layer and computes the shares in the table of
# GPU predictions below.

# %% [markdown] lang="ja" tags=["deeper"]
# **デバイスの側で連鎖を短くする**
#
# L2 への往復を 200 ns、HBM への往復を 600 ns と仮定すると（NVIDIA はどちらも公表していません）、連鎖は $2 \cdot 600 + 200$ ns $= 1.4$ µs です。
# `posenc` のカーネルは、Liger のカーネルと同じく $k$ を $q$ と一緒に読み込みます。
# コンパイラは、同じアドレスに書く可能性のある書き込みを追い越して、読み込みを前に移すことはできません（$q$ の出力と $k$ が重なりうるからです）。
# そこでカーネルは 2 つのタイルを読み込んでから 2 つとも書き込みます。sm_90 向けの SASS でも、ヘッドのブロックごとに、すべての読み込みが最初の書き込みより前にあります。
# 連鎖は、次の 5 つの変更で短くできるはずです。
#
# 1. $k$ の読み込みを行と一緒に発行させます。bfloat16 で `num_warps = 8`（レジスタ 40 個）にすると、SASS はすべての読み込みを最初の乗算より前に発行し、往復は 2 回（1.2 µs）になります。ただし $k$ のアクセスは 32 ビットになります（float32 では逆に、8 ワープにすると $k$ の読み込みが最初の乗算のあとに移ります）。
# 2. cos と sin を位置から計算し、$q$ と $k$ を位置と同時に読み込みます。行の往復がなくなり、1.4 µs が約 0.6 µs（位置の読み込みだけ）になります。ただし CUDA の `sincosf` は約 $10^5$ ラジアンを超える引数で遅い経路に入ります。周波数がいちばん高いペアの角度は位置そのものなので、位置が約 $10^5$ を超えると、この遅い経路を通ります。
# 3. トークンが SM より少ないときは、トークンとヘッドのブロックの 2 次元のグリッドにします。FlashInfer の cos と sin の表を使うカーネルのランチャは、`cudaOccupancyMaxActiveBlocksPerMultiprocessor` で同時に置けるブロックの数を調べます。
#    トークンでそれが埋まるならブロック 1 つに 8 トークン（bfloat16 で $d = 128$ のとき。128 ビットのアクセスで、ヘッドはループ）、埋まらないならトークンのグループとヘッドのグリッドにします。
# 4. 位置と表の行を、層の重みが通る間も L2 に残します。`eviction_policy="evict_last"`（重みは `evict_first`）か、L2 の永続化ウィンドウ（`cudaAccessPolicyWindow`）を使えば、3 回の往復がすべて L2 への往復になるはずです。計測はしていません。
# 5. 各トークンの cos と sin の行をステップごとに 1 回だけ集め、全層で使います（Hugging Face のやり方で、Liger Kernel のカーネルもこの形で受け取ります）。各層のカーネルは行を位置ではなくトークンのインデックスで見つけるので、どの読み込みもほかの読み込みを待ちません。成分あたり同じ 0.1 バイトのまま、往復が 1 回減ります（行はトークンあたり 512 バイトですが、項目 4 のように重みに対して L2 に残さない限り、メモリから読むことに変わりはありません）。
#
# さらに、CUDA の programmatic dependent launch（PDL、カーネルの前倒し起動）を使えば、前のカーネルが終わりきる前にこのカーネルを始められます。FlashInfer の RoPE の融合カーネルも、`enable_pdl` で PDL を使えます。そのため、ほかの処理が連鎖の待ち時間と重なる場合、連鎖から見積もった時間は、RoPE が実際に加える時間の上界になります。
#
# RoPE を QKV の射影のエピローグに組み込む手間は、配置によって違います。
# 半分割配置では次元 $i$ が $i + r/2$ とペアになるので、GEMM の出力タイルが各ヘッドの前半と後半を両方含む（幅が $d$ の倍数でヘッドの境界にそろう）か、タイルの間で値をやり取りする必要があります。
# インターリーブ配置ではペアが隣り合う列にあり、たいてい同じスレッドのアキュムレータ（積和の結果をためるレジスタ）に入るので、融合にはほとんどコストがかかりません。
# 次のセルは、Hugging Face の Llama の層が起動するカーネルを数え、後で示す GPU での予測の表に載せた割合を計算します。

# %% tags=["deeper"]
from transformers import LlamaConfig
from transformers.cache_utils import DynamicCache
from transformers.models.llama import modeling_llama

# RoPE's share of a Llama 3 8B layer in bfloat16, at the H200's datasheet peaks
hidden, inter, seq = 4096, 14336, 4096
weights = (
    hidden * (2 * n_q + 2 * n_k) * d + 3 * hidden * inter
)  # attention, MLP
bandwidth, flops = 4.8e12, 989e12  # B/s; dense bfloat16 flop/s (no sparsity)
layer_flops = (
    2 * weights * seq + 2 * seq * seq * d * n_q
)  # with causal attention
prefill, decode = layer_flops / flops, 2 * weights / bandwidth


def rope_s(tokens, beta):
    """Seconds to move beta bytes per element of q and k at peak bandwidth."""
    return beta * (n_q + n_k) * d * tokens / bandwidth


l2, hbm = 200e-9, 600e-9  # round trips, assumed (NVIDIA publishes neither)
# position and row from HBM (evicted by the layer's weights), q and k from L2
chain = 2 * hbm + l2
# the kernels of one eager decode step through a small Hugging Face Llama
# layer in bfloat16, by ATen op: each one kernel on a GPU

config = LlamaConfig(
    hidden_size=256, intermediate_size=512, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64,
)  # fmt: skip
config._attn_implementation = "sdpa"
layer = modeling_llama.LlamaDecoderLayer(config, 0).to(torch.bfloat16).eval()
rotary, kv_cache = modeling_llama.LlamaRotaryEmbedding(config), DynamicCache()


def decode_layer(x, at):
    """One call of the layer on x at positions at, appending to kv_cache."""
    ids = at[None]
    cos_sin = rotary(x, ids)  # made once a step for all the layers: not counted
    return lambda: layer(
        x, position_embeddings=cos_sin, cache=kv_cache,
        position_ids=ids, cache_position=at, use_cache=True,
    )  # fmt: skip


with torch.no_grad():
    four, one = (torch.randn(1, n, 256, dtype=torch.bfloat16) for n in (4, 1))
    decode_layer(four, torch.arange(4))()  # four tokens in the cache
    layer_ops = count_traffic(decode_layer(one, torch.tensor([4]))).ops
assert "_unsafe_view" not in layer_ops  # a view: the counter skips it
layer_kernels = layer_ops
launch = 5e-6  # host time a launch (Exercise 2)
launches = 10 * launch  # Hugging Face's ten RoPE launches a layer
# their share of the host's step
host_paced = launches / (len(layer_kernels) * launch)
# a kernel's fixed cost on the device (launch, ramp, drain), without its
# memory: assumed, no published figure
fixed = (1e-6, 2e-6, 4e-6)
# under a graph every kernel costs f plus its own round trips: the fused
# kernel its chain, every other kernel at least one L2 trip (a lower bound);
# 40 kernels with Hugging Face's formula, 31 with the fused kernel
n_eager = len(layer_kernels)
eager_share = [10 * (f + l2) / (decode + n_eager * (f + l2)) for f in fixed]
fused_share = [
    (f + chain) / (decode + (n_eager - 10) * (f + l2) + f + chain)
    for f in fixed
]
print(
    f"prefill: {layer_flops / 1e12:.2f} TFLOP, {prefill * 1e3:.2f} ms a layer; "
    f"RoPE fused {rope_s(seq, 4.1) / prefill:.1%}, "
    f"eager {rope_s(seq, 20.2) / prefill:.1%}"
)
print(
    f"decode: {2 * weights / 1e6:.0f} MB, {decode * 1e6:.0f} µs a layer; "
    f"RoPE bytes {rope_s(1, 4.1) / decode:.3%}, "
    f"chain {chain * 1e6:.1f} µs ({chain / decode:.1%}); eager: "
    f"{len(layer_kernels)} kernels a layer, "
    f"{len(layer_kernels) * launch * 1e6:.0f} µs of host time, RoPE's ten "
    f"{host_paced:.0%} of it; device-paced, of the layer at f = 1, 2, 4 µs: "
    f"fused {', '.join(f'{x:.1%}' for x in fused_share)}; "
    f"eager {', '.join(f'{x:.0%}' for x in eager_share)}"
)

# %% [markdown] lang="en"
# ## What the CPU records show
#
# `python -m posenc_lab.cpu_bench` times each contender on a CPU at Llama 3 8B's shapes
# (a float32 [prefill](../docs/glossary.md#prefill) of 1024 tokens), as a ratio to a
# one-pass floor, `torch.mul(x, 2.0, out=...)`; one thread / two. `complex` is Meta's
# code, `hf_formula_out` Hugging Face's arithmetic written into preallocated buffers,
# `compiled_module` `RotaryEmbedding` under `torch.compile`.
#
# | contender | ratio to the floor |
# |---|---|
# | `hf_formula` | 5.04 / 5.34 |
# | `hf_formula_out` | 3.84 / 3.81 |
# | `complex` | 1.12 / 1.21 |
# | `apply_rope` | 3.45 / 3.19 |
# | `apply_rope_interleaved` | 5.31 / 5.01 |
# | `rotary_embedding` | 3.63 / 3.37 |
# | `compiled_module` | 1.32 / 1.27 |
#
# Only Meta's complex product and the compiled module come near the floor. The byte
# model itself is not tested here: this machine's 480 MiB L3 can hold every temporary, so
# the records compare passes, not DRAM bytes
# ([the note below](#deeper-how-the-cpu-records-were-taken-and-what-else-they-show)).

# %% [markdown] lang="ja"
# ## CPU の計測記録が示すこと
#
# `python -m posenc_lab.cpu_bench` は、Llama 3 8B で 1024 トークンを float32 で[プリフィル](../docs/glossary.ja.md#prefill)するときの形状について、比較対象ごとに RoPE の時間を CPU で計ります。
# 表の値は、その時間を 1 回のパスの下限 `torch.mul(x, 2.0, out=...)` の時間で割った比です。
# 「/」の左が 1 スレッド、右が 2 スレッドです。
# `complex` は Meta の実装、`hf_formula_out` は Hugging Face と同じ計算を確保済みのバッファへ書くもの、`compiled_module` は `torch.compile` した `RotaryEmbedding` です。
#
# | 比較対象 | 下限に対する比 |
# |---|---|
# | `hf_formula` | 5.04 / 5.34 |
# | `hf_formula_out` | 3.84 / 3.81 |
# | `complex` | 1.12 / 1.21 |
# | `apply_rope` | 3.45 / 3.19 |
# | `apply_rope_interleaved` | 5.31 / 5.01 |
# | `rotary_embedding` | 3.63 / 3.37 |
# | `compiled_module` | 1.32 / 1.27 |
#
# 下限に近いのは、Meta の複素数の掛け算とコンパイルしたモジュールだけです。
# ただし、この計測記録ではバイト数のモデルそのものは検証できません。このマシンの 480 MiB の L3 にはすべての一時テンソルが収まりうるので、記録が比べているのはパスの回数で、DRAM のバイト数ではありません（[下の「さらに詳しく」](#deeper-cpu-の計測記録の取り方とほかにわかること)）。

# %% tags=["figure"]
order = [  # the rows; the floor's ratio is 1 by definition
    "hf_formula",
    "hf_formula_out",
    "complex",
    "apply_rope",
    "apply_rope_interleaved",
    "rotary_embedding",
    "compiled_module",
]
one, two = (records[t]["cases"] for t in ("1-thread", "2-threads"))


def ratio_cell(m, c="prefill-float32"):
    r1 = one[c]["contenders"][m]["ratio_to_floor"]
    r2 = two[c]["contenders"][m]["ratio_to_floor"]
    return f"{r1:.2f} / {r2:.2f}"


quoted_table = {  # the table in the text
    "hf_formula": "5.04 / 5.34",
    "hf_formula_out": "3.84 / 3.81",
    "complex": "1.12 / 1.21",
    "apply_rope": "3.45 / 3.19",
    "apply_rope_interleaved": "5.31 / 5.01",
    "rotary_embedding": "3.63 / 3.37",
    "compiled_module": "1.32 / 1.27",
}
assert {m: ratio_cell(m) for m in order} == quoted_table
meta = records["1-thread"]["meta"]
caches = ", ".join(
    f"L{c['level']} {c['size_bytes'] // 2**10} KiB"
    for c in meta["caches"]["sysfs"]
    if c["type"] != "Instruction" and c["size_bytes"]
)
print(f"{meta['cpu']}, {meta['cpu_count']} CPUs, caches: {caches}")

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: how the CPU records were taken, and what else they show.**
#
# Each cell of the table is the median over 40 rounds of the ratio to the floor in the
# same round (`lab/README.md` gives the method and how far to trust it).
# These records cannot test the byte model: this machine's 480 MiB L3 holds every
# temporary of a 20 MiB call, so they compare passes and per-operation costs, not DRAM
# bytes. Only Meta's complex product (8.2 bytes per element) and the compiled module
# come near the floor; Hugging Face's ratios match its byte ratio by chance.
# `apply_rope_interleaved` requests as many bytes per element as `apply_rope` and takes
# about 1.5 times as long. Page faults per call: 0 for every contender, as a median over
# rounds. Decode and bfloat16: `lab/README.md`.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：CPU の計測記録の取り方と、ほかにわかること**
#
# 表の値は、同じラウンドで計った下限に対する比の、40 ラウンドの中央値です（計り方と、結果をどこまで信頼できるかは `lab/README.md` にあります）。
# この計測記録では、バイト数のモデルは検証できません。このマシンの 480 MiB の L3 には、入力が 20 MiB の呼び出しで作られる一時テンソルがすべて収まるからです。この記録が比べているのは、パスの回数と演算ごとのコストで、DRAM のバイト数ではありません。
# 下限に近いのは、Meta の複素数の掛け算（成分あたり 8.2 バイト）とコンパイルしたモジュールだけです。Hugging Face の式の比がバイト数の比に合うのは偶然です。
# `apply_rope_interleaved` が要求するバイト数は成分あたり `apply_rope` と同じですが、時間は約 1.5 倍かかります。
# 呼び出しあたりのページフォールトは、どの比較対象でもラウンドの中央値で 0 回です。
# デコードと bfloat16 の結果は `lab/README.md` にあります。

# %% [markdown] lang="en"
# ## Predicted on a GPU, and how to measure it
#
# Nothing here was measured on a GPU: GPU times are predictions of the byte model and
# of assumed latencies. For Llama 3 8B in bfloat16 on an H200, a cold 4096-token
# prefill (q and k read from memory, not from L2) should take the fused kernel at
# least 15.3 µs, and RoPE should be 0.9% of a layer (from datasheet peaks)
# fused against 4.5% with Hugging Face's formula. `posenc_lab.gpu_bench` is written to
# measure them, and has not yet run on a GPU;
# [the note below](#deeper-for-kernel-writers-the-gpu-predictions-and-the-commands-that-test-them)
# gives each prediction, its basis and how to test it.

# %% [markdown] lang="ja"
# ## GPU での予測と、その計り方
#
# この章では GPU で何も計っていません。GPU での時間は、バイト数のモデルと仮定したレイテンシからの予測です。
# 対象は H200 上の bfloat16 の Llama 3 8B です。q と k を L2 ではなくメモリから読む状態（コールド）で 4096 トークンをプリフィルすると、融合カーネルは 15.3 µs 以上かかるはずです。
# そのとき RoPE が層の時間に占める割合は、データシートの最大性能から見積もると、融合カーネルで 0.9%、Hugging Face の式で 4.5% のはずです。
# `posenc_lab.gpu_bench` は、これらを計るために書いたベンチマークで、まだ GPU で実行していません。予測ごとの根拠と確かめ方は、[下の「さらに詳しく」](#deeper-gpu-での予測とそれを確かめるコマンドカーネルを書く読者向け)にまとめます。

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: for kernel writers, the GPU predictions and the commands that test
# them.**
#
# For Llama 3 8B in bfloat16 on an H200, this chapter's model predicts:
#
# | prediction | basis | measure |
# |---|---|---|
# | cold 4096-token prefill: the fused kernel takes at least 15.3 µs, and about 1.03 times the Triton copy's time | at least 73.4 MB of a call's 83.9 MB from memory at 4.8 TB/s; 4.1 bytes per element against the copy's 4 | `triton`'s time and `ratio_to_triton_copy` in `prefill-4096-bfloat16` |
# | there RoPE is 0.9% of a layer fused, 4.5% with Hugging Face's formula | 4.1 and 20.2 bytes per element at 4.8 TB/s; the layer's flops at 989 TFLOP/s | `triton`, `eager_formula`; the layer from a profile |
# | one decode token in a model: the fused kernel takes about 1.2 µs longer than the Triton copy | position and row from HBM then $k$ from L2 ($2 \cdot 600 + 200$ ns) against the copy's one L2 trip; latencies assumed | `single_launch`'s `cold_table_us` in `decode-1-bfloat16`, `triton`'s minus `triton_copy`'s |
# | eager decode: a layer's 40 operations, about a kernel each, take 200 µs of host time against 91 µs of device time; RoPE's ten are a quarter | 5 µs of host time a launch, assumed; 436 MB of weights at 4.8 TB/s | `eager_formula`'s `host_median_us` |
# | under a CUDA graph: RoPE is 9 to 16% of a layer with Hugging Face's ten kernels, 1.9 to 2.4% fused | 1 to 4 µs a kernel, assumed, plus its round trips | device times of `eager_graph` and `triton_graph` (warm; add `single_launch`'s cold-table difference for the in-model chain), against a layer's time from a profile |
#
# `python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json` runs these
# cases and more, 1 to 32,768 tokens a call (`lab/README.md`, with a checklist for the
# first run). Beside `copy_`, which on CUDA is a `cudaMemcpyAsync`, not a kernel, it
# times a Triton kernel that copies the same bytes (`triton_copy`): the fused kernel's
# distance from it is what the table row, the arithmetic and the per-token grid cost.
# The record's floor for the fused kernel divides its bytes by the faster of the two
# copies: a run below it moves fewer bytes than modelled or outruns both copies, and
# Nsight Compute's DRAM counters tell which. Only the floors can be refuted by a run;
# the ratios and the 1.2 µs, near the half microsecond CUDA events resolve, are
# expectations.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：GPU での予測と、それを確かめるコマンド（カーネルを書く読者向け）**
#
# H200 上の bfloat16 の Llama 3 8B について、この章のコストモデルは次のように予測します。
#
# | 予測 | 根拠 | 計り方 |
# |---|---|---|
# | コールドの 4096 トークンのプリフィル：融合カーネルの時間は 15.3 µs 以上で、Triton のコピーの約 1.03 倍 | 呼び出しあたり 83.9 MB のうち少なくとも 73.4 MB をメモリから毎秒 4.8 TB で動かす。成分あたり 4.1 バイト（コピーは 4 バイト） | `prefill-4096-bfloat16` の `triton` の時間と `ratio_to_triton_copy` |
# | そのとき RoPE は層の時間の 0.9%（融合）、4.5%（Hugging Face の式） | 成分あたり 4.1 バイトと 20.2 バイトを毎秒 4.8 TB で動かす。層の演算は毎秒 989 兆 flop | `triton` と `eager_formula`。層の時間はプロファイルから |
# | 実際のモデルの中でのデコード（トークン 1 つ）：融合カーネルは Triton のコピーより約 1.2 µs 長くかかる | 位置と行を HBM から、$k$ を L2 から読む（$2 \cdot 600 + 200$ ns）。コピーは L2 への往復 1 回（レイテンシは仮定） | `decode-1-bfloat16` の `single_launch` の `cold_table_us` で、`triton` から `triton_copy` を引いた値 |
# | eager モードのデコード：層の 40 個の演算（それぞれほぼカーネル 1 つ）の起動にホストで 200 µs かかり、デバイスの 91 µs より長い。RoPE の 10 個はその 4 分の 1 | 起動 1 回にホストで 5 µs（仮定）。436 MB の重みを毎秒 4.8 TB で読む | `eager_formula` の `host_median_us` |
# | CUDA グラフのもとで：RoPE は層の 9〜16%（Hugging Face の 10 個のカーネル）、1.9〜2.4%（融合） | カーネルあたり 1〜4 µs（仮定）と、そのカーネルの往復 | `eager_graph` と `triton_graph` のデバイス時間。どちらも L2 に載った状態の値なので、モデルの中での連鎖には、cos と sin の表が L2 にないときに `single_launch` の `cold_table_us` で増える分を足す。層の時間はプロファイルから |
#
# `python -m posenc_lab.gpu_bench --json lab/posenc_lab/records/gpu-NAME.json` は、これらを含むケースを、呼び出しあたり 1〜32,768 トークンで実行します（`lab/README.md` に、最初の実行で確かめる手順があります）。
# CUDA では `copy_` はカーネルではなく `cudaMemcpyAsync` なので、同じバイトをコピーする Triton のカーネル（`triton_copy`）も計ります。融合カーネルとこのカーネルの差が、表の行の読み込み、演算、トークンごとのグリッドにかかるコストです。
# 計測記録にある融合カーネルの下限は、そのバイト数を 2 つのコピーのうち速いほうの速さで割った値です。これを下回る実行は、モデルより少ないバイトしか動かしていないか、どちらのコピーよりも速く動かしているかのどちらかで、Nsight Compute の DRAM のカウンタで見分けられます。
# 実行で否定できるのは下限だけです。比と 1.2 µs（CUDA のイベントが分解できる約 0.5 µs に近い値）は見込みです。

# %% tags=["deeper", "check"] summary={"en": "a guard, not evidence: the numbers in the text match the two measurement records and the GPU benchmark's settings", "ja": "証拠ではなく、数値のずれを防ぐための確認です。本文の数値が 2 つの計測記録と GPU ベンチマークの設定に一致することを確かめます"}
RECORDS_TEXT = "update the claims of 'What the CPU records show'"


def ratio(case, m, digits=2):
    return round(case["contenders"][m]["ratio_to_floor"], digits)


def bytes_ratio(case, m):
    found = case["contenders"]
    return found[m]["bytes_per_element"] / found["floor"]["bytes_per_element"]


quoted = {  # contender: the ratios the text quotes, one thread / two
    "complex": ([1.1, 1.2], 1),
    "compiled_module": ([1.32, 1.27], 2),
    "hf_formula": ([5.0, 5.3], 1),
}
f32 = {t: rec["cases"]["prefill-float32"] for t, rec in records.items()}
for m, (values, digits) in quoted.items():
    got = [ratio(f32[t], m, digits) for t in ("1-thread", "2-threads")]
    assert got == values, (RECORDS_TEXT, m, got)
for case in f32.values():
    others = ("hf_formula_out", "rotary_embedding", "apply_rope")
    for m in (*others, "apply_rope_interleaved"):  # the others: 3.2 to 5.3
        assert 3.15 <= ratio(case, m) < 5.35, (RECORDS_TEXT, m)
    assert round(case["contenders"]["complex"]["bytes_per_element"], 1) == 8.2
    assert case["contenders"]["compiled_module"]["bytes_per_element"] is None
    assert round(bytes_ratio(case, "hf_formula"), 2) == 5.05  # 40.4 / 8
    # interleaved: apply_rope's bytes, about 1.5 times its time
    inter, eager = "apply_rope_interleaved", "apply_rope"
    same = bytes_ratio(case, inter) == bytes_ratio(case, eager)
    slower = ratio(case, inter, 3) / ratio(case, eager, 3)
    assert same and 1.45 <= slower < 1.6, (RECORDS_TEXT, slower)
for (
    rec
) in records.values():  # lab/README.md relies on it: no fault in a median round
    for c in rec["cases"].values():
        for m, v in c["contenders"].items():
            assert v["faults_per_call_median"] == 0, (RECORDS_TEXT, m)
for (
    rec
) in records.values():  # decode: the compiled module is slower than the formula
    for dtype in ("float32", "bfloat16"):
        found = rec["cases"][f"decode-{dtype}"]["contenders"]
        assert (
            found["compiled_module"]["median_ms"]
            > found["hf_formula"]["median_ms"]
        )
per_op = [  # lab/README.md: decode, microseconds per ATen call, views included
    v["median_ms"] * 1e3 / (v["ops_per_call"] + v["views_per_call"])
    for rec in records.values()
    for c in ("decode-float32", "decode-bfloat16")
    for v in rec["cases"][c]["contenders"].values()
    if v["ops_per_call"] is not None
]
span = (round(min(per_op), 1), round(max(per_op), 1))
assert span == (1.3, 3.4), RECORDS_TEXT
# the GPU benchmark's cold prefill, on a 50 MiB L2 (the H100 SXM's)
gpu_cases = {c.name: c for c in gpu_bench.build_cases(l2_bytes=50 * 2**20)}
p = gpu_cases["prefill-4096-bfloat16"]
assert (p.n_q, p.n_k, p.seq, p.head_dim, p.number) == (32, 8, 4096, 128, 5)
assert gpu_bench.pool_size(p, 50 * 2**20) == 5  # five distinct pairs
assert round(p.bytes_per_call() / 1e6, 1) == 83.9
beta_bf16 = 2 * 2 + (4 * p.head_dim + 8) / ((p.n_q + p.n_k) * p.head_dim)
assert round(beta_bf16, 1) == 4.1 and round(beta_bf16 / 4, 2) == 1.03
assert beta_bf16 == beta_fused(2)  # the benchmark's shapes are the chapter's
at_least = gpu_bench.dram_bytes_at_least(p, 50 * 2**20)
assert (
    round(at_least / 1e6, 1) == 73.4
    and round(at_least / 4.8e12 * 1e6, 1) == 15.3
)
assert {c.tokens() for c in gpu_cases.values()} == {
    1,
    8,
    64,
    256,
    1024,
    4096,
    32768,
}
assert not list(RECORDS.glob("gpu-*.json")), "a GPU record: update the text"
# the decode step's shares (cell of "The decode step"), the harness's floors
assert round(chain * 1e6, 1) == 1.4 and round(chain / decode, 3) == 0.015
assert round((chain - l2) * 1e6, 1) == 1.2  # triton minus triton_copy's trip
assert round(decode * 1e6) == 91
# eager: 40 ATen ops a layer, two RMSNorms of 8, RoPE's 10; 200 µs of host time
assert len(layer_kernels) == 40 and layer_kernels.count("rsqrt") == 2
assert layer_kernels[11:21] == 2 * ["mul", "neg", "cat", "mul", "add"]
assert round(len(layer_kernels) * launch * 1e6) == 200 and host_paced == 0.25
assert [round(x, 2) for x in eager_share] == [0.09, 0.12, 0.16]
assert [round(x, 3) for x in fused_share] == [0.019, 0.021, 0.024]
# 8 warps: the row with q and k (two trips); cos and sin computed, q and k
# loaded with the position: the position alone
assert round((hbm + hbm) * 1e6, 1) == 1.2 and round(hbm * 1e6, 1) == 0.6
d1 = gpu_bench.predicted_floor(
    gpu_cases["decode-1-bfloat16"], 4800.0, 50 * 2**20
)
assert d1["chain_cold_table_us"] == chain * 1e6
for c in gpu_cases.values():  # warm: in L2, so memory's rate bounds nothing
    f = gpu_bench.predicted_floor(c, 4800.0, 50 * 2**20)
    assert (f["memory_us"] is None) == c.warm
    if c.warm:
        assert f["lower_bound_us"] == f["chain_us"]

# %% [markdown] lang="en"
# ## What to remember
#
# - RoPE does 3 flops per element against at least $2e$ bytes: on a GPU it is
#   [memory bound](../docs/glossary.md#memory-bound). Count bytes first; then measure whether the count explains the time.
# - Per float32 element, Hugging Face's eager formula requests 40 bytes, five times the
#   floor of 8: each operation writes a temporary that the next reads back.
# - A fused kernel reads the cos/sin row once per token for all its heads: 8.1 bytes in
#   float32, 4.1 in bfloat16.
# - Some serving systems fold RoPE into the cache write or attention (FlashInfer,
#   FlashAttention) to save even that one pass; others make RoPE one pass of its own,
#   by a compiler (vLLM's default) or by hand (Liger).
# - A decode step costs latency: dependent loads and kernel launches. Capture it in a
#   CUDA graph or compile it first (the Triton kernel with `check_positions=False`: its
#   default check reads the positions back to the host).
# - On a CPU the byte count separates one pass from several but does not predict time.
# - Times on a GPU are predictions until `posenc_lab.gpu_bench` has run on one.

# %% [markdown] lang="ja"
# ## まとめ
#
# - RoPE の演算は成分あたり 3 flop で、動かすバイト数は少なくとも $2e$ です。GPU では[メモリ律速](../docs/glossary.ja.md#memory-bound)です。まずバイト数を数え、その数で時間が説明できるかを計測で確かめます。
# - float32 の成分あたり、Hugging Face の eager モードの式は 40 バイトを要求します。下限 8 バイトの 5 倍で、演算ごとに一時テンソルを書き、次の演算がそれを読み直すからです。
# - 融合カーネルは cos と sin の表の行をトークンごとに 1 回だけ読み、すべてのヘッドに使います。float32 で 8.1 バイト、bfloat16 で 4.1 バイトです。
# - RoPE をキャッシュへの書き込みかアテンションに融合して、その 1 回のパスさえ省く推論システムもあります（FlashInfer、FlashAttention）。RoPE だけで 1 回のパスにするものもあり、コンパイラ（vLLM の既定）か手書き（Liger）で融合します。
# - デコードの 1 ステップで時間を決めるのは帯域幅ではなくレイテンシ、つまり前の読み込みを待つ読み込みとカーネルの起動です。最初に打つ手は、ステップを CUDA グラフでキャプチャするか、コンパイルすることです（既定の範囲チェックは位置をホストに読み戻すので、Triton カーネルは `check_positions=False` で呼びます）。
# - CPU では、バイト数で 1 回のパスと複数回のパスは見分けられても、時間は予測できません。
# - GPU での時間は、`posenc_lab.gpu_bench` を GPU で実行するまでは予測です。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. vLLM, FlashInfer and Liger Kernel rotate $q$ and $k$ in place. What is
#    $\beta_{\mathrm{fused}}$ for a kernel that writes back into its inputs? Write an
#    eager in-place rotation of the half layout from `mul_` and `addcmul_`, count its
#    bytes with `count_traffic`, and explain why it needs a temporary.
# 2. Suppose a kernel launch costs 5 µs and memory moves 4.8 TB/s. From how many
#    tokens per call does the fused kernel's memory time in bfloat16 exceed one
#    launch, for Llama 3 8B's heads? How many kernels does Hugging Face's formula
#    launch for RoPE in one decode step of Llama 3 8B's 32 layers?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. vLLM、FlashInfer、Liger Kernel は $q$ と $k$ をインプレースで回転させます。
#    入力に書き戻すカーネルの $\beta_{\mathrm{fused}}$ はいくつでしょうか。
#    `mul_` と `addcmul_` を使って半分割配置のインプレースの回転を eager モードで書き、そのバイト数を `count_traffic` で数えてください。また、なぜ一時テンソルが必要になるのかを説明してください。
# 2. カーネル起動に 5 µs かかり、メモリが毎秒 4.8 TB を運ぶとします。
#    Llama 3 8B のヘッドで、bfloat16 の融合カーネルのメモリ転送の時間が起動 1 回の時間を超えるのは、1 回の呼び出しが何トークン以上のときでしょうか。
#    また、Llama 3 8B の 32 層のデコードの 1 ステップで、Hugging Face の式は RoPE のために何個のカーネルを起動するでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** In place, a fused kernel still reads every element once and writes
# it once, so the bytes it requests, $\beta_{\mathrm{fused}}$, are unchanged. What
# memory moves depends on the machine. A GPU's L2 takes a store without first reading
# the line from DRAM (no read-for-ownership), so there in place saves the output's
# memory, not traffic. An x86 CPU usually reads a line before storing to it
# (write-allocate, above): out of place a pass then moves about $3e$ bytes per element
# from memory, in place $2e$, so there in place also saves that read. Eager code needs a temporary because each output
# needs both inputs: whichever half is overwritten first, the other half's output still
# needs its old value. Computing $b'$ first and keeping a copy of $b$ for $a'$ takes
# one temporary of half the size of $x$. Counted per element of $x$: the copy
# ($2+2$), the two products in place ($4+4$), and the two `addcmul_` ($6+6$):
# $$\beta_{\mathrm{in\ place}} = (2+2) + (4+4) + (6+6) = 24$$

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** インプレースでも、融合カーネルは各成分を 1 回読んで 1 回書くので、要求するバイト数 $\beta_{\mathrm{fused}}$ は変わりません。
# メモリが実際に動かす量はマシンによります。
# GPU の L2 は、書き込みの前にそのラインを DRAM から読みません（read-for-ownership がありません）。そのため GPU では、インプレースで節約できるのはメモリの容量で、メモリトラフィックではありません。
# x86 の CPU は、ふつう書き込む前にそのラインを読み込みます（前述のライトアロケート）。この場合、アウトオブプレースのパスはメインメモリから成分あたり約 $3e$ バイトを、インプレースなら $2e$ バイトを動かすので、CPU ではインプレースにするとこの読み込みも省けます。
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
# **Solution 2.** One token of Llama 3 8B moves $2 \cdot 2 \cdot 5120 = 20480$ bytes of
# $q$ and $k$ in bfloat16, and the fused kernel reads its table row too, $4r = 512$ bytes:
# 20,992 bytes. 5 µs at 4.8 TB/s moves 24 MB, about 1,143 tokens. Below that
# many tokens per call, the host spends longer launching than the device moving the
# data. But launches are asynchronous and overlap the device's work, so on the device
# the comparison is with its own fixed cost per kernel, launch latency and ramp: at an
# assumed 1 to 4 µs, memory time exceeds it from about 230 to 910 tokens. Hugging
# Face's formula runs
# five operations on $q$ and five on $k$: ten kernels per layer, 50 µs of launches
# against a layer's 91 µs, 320 per decode step, against 32 for the fused kernel and
# one graph replay with CUDA graphs.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** Llama 3 8B では、bfloat16 のトークン 1 つあたり、$q$ と $k$ で $2 \cdot 2 \cdot 5120 = 20480$ バイトを動かし、融合カーネルはさらに表の行 $4r = 512$ バイトを読みます。合わせて 20,992 バイトです。
# 毎秒 4.8 TB で 5 µs の間に動くのは 24 MB で、約 1,143 トークン分です。
# 1 回の呼び出しのトークンがこれより少なければ、ホストが起動にかける時間が、デバイスがデータを動かす時間を上回ります。
# ただし起動は非同期で、デバイスの仕事と重なります。デバイスの側で比べるべきは、カーネルごとのデバイス自身の固定コスト（起動のレイテンシと立ち上がり）です。この固定コストを 1〜4 µs と仮定すると、メモリ転送の時間がそれを上回るのは約 230〜910 トークンからです。
# Hugging Face の式は $q$ と $k$ にそれぞれ 5 つの演算を使うので、層あたり 10 個、デコードの 1 ステップで 320 個のカーネルになります。
# 層あたりの起動だけで 50 µs かかり、層のデバイス時間 91 µs の半分を超えます。
# 融合カーネルなら 32 個で、CUDA グラフを使えばグラフの再生 1 回です。

# %% tags=["solution"]
per_token = 2 * 2 * (n_q + n_k) * d  # bytes, bfloat16, read and write
row = 4 * d  # the token's cos and sin row, r/2 float32 values each, r = d
tokens = 5e-6 * 4.8e12 / (per_token + row)
x = torch.randn(1, n_q, 1, d, dtype=torch.bfloat16)
c, s = (t.bfloat16() for t in hf_cos_sin(torch.tensor([1000]), d))
t = count_traffic(lambda: hf_apply_rotary(x, c, s))
kernels = 32 * 2 * len(t.ops)  # 32 layers, q and k
assert per_token == 20480 and row == 512 and kernels == 320
assert round(tokens) == 1143
launch_cost = gpu_bench.LAUNCH_COST_S
device_fixed = [round(t * 4.8e12 / (per_token + row), -1) for t in launch_cost]
assert device_fixed == [230, 910], device_fixed
print(f"{tokens:.0f} tokens; {kernels} kernels per decode step")

# %% [markdown] lang="en"
# ## Sources and versions
#
# Library code read for this chapter, by version: vLLM at commit `0f5257e`
# (`pos_encoding_kernels.cu`), `072d10a` (`rotary_embedding/base.py`) and `428a71c`
# (`rope_kvcache_fusion.py`); FlashInfer
# 0.6.18, commit `fb28d72` (`rope.py`, `pos_enc.cuh`, `prefill.py`, `decode.py`);
# FlashAttention v2.8.3 (`flash_attn_interface.py`, `flash_api.cpp`,
# `flash_fwd_kernel.h`, `ops/triton/rotary.py`); Liger Kernel 0.8.2
# (`liger_kernel/ops/rope.py`). The kernels
# of this page run in the interpreter of the installed Triton (3.9 when this page was
# built), with torch 2.13. The H200's figures are NVIDIA's datasheet: 67 TFLOPS in
# FP32, 989 TFLOPS in dense BF16, 4.8 TB/s; Llama 3 8B's sizes
# (hidden 4096, MLP 14336) are its published configuration. The CPU records are
# `lab/posenc_lab/records/cpu-rope-1-thread.json` and `cpu-rope-2-threads.json`.
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
# - NVIDIA. *H200 Tensor Core GPU* (datasheet). <https://www.nvidia.com/en-us/data-center/h200/>
# - NVIDIA. *CUDA C++ Programming Guide*, intrinsic functions.
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/>
# - NVIDIA Developer Forums (2024). *CUDA trigonometric function issues* (the slow
#   path above 105,615). <https://forums.developer.nvidia.com/t/cuda-trigonometric-function-issues/304210>
# - NVIDIA. *CUDA Graphs* and *Programmatic Dependent Launch and Synchronization*
#   (CUDA C++ Programming Guide).
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-graphs>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# この章で読んだライブラリのコードとそのバージョンは次のとおりです。
# vLLM はコミット `0f5257e`（`pos_encoding_kernels.cu`）、`072d10a`（`rotary_embedding/base.py`）、`428a71c`（`rope_kvcache_fusion.py`）です。
# FlashInfer は 0.6.18、コミット `fb28d72`（`rope.py`、`pos_enc.cuh`、`prefill.py`、`decode.py`）です。
# FlashAttention は v2.8.3（`flash_attn_interface.py`、`flash_api.cpp`、`flash_fwd_kernel.h`、`ops/triton/rotary.py`）です。
# Liger Kernel は 0.8.2（`liger_kernel/ops/rope.py`）です。
# このページのカーネルは、インストールされている Triton（このページを生成したときは 3.9）のインタプリタと torch 2.13 で実行しています。
# H200 の数値は NVIDIA のデータシートによるもので、FP32 で 67 TFLOPS、密な BF16 で 989 TFLOPS、毎秒 4.8 TB です。Llama 3 8B の大きさ（隠れ層の次元 4096、MLP の中間層の次元 14336）は公開されている設定によります。
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
#   Serving with PagedAttention*. <https://arxiv.org/abs/2309.06180>（コード：<https://github.com/vllm-project/vllm>）
# - Ye, Z., et al. (2025). *FlashInfer: Efficient and Customizable Attention Engine for
#   LLM Inference Serving*. <https://arxiv.org/abs/2501.01005>（コード：<https://github.com/flashinfer-ai/flashinfer>）
# - Dao, T. (2023). *FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning*. <https://arxiv.org/abs/2307.08691>（コード：<https://github.com/Dao-AILab/flash-attention>）
# - Hsu, P.-L., et al. (2024). *Liger Kernel: Efficient Triton Kernels for LLM
#   Training*. <https://arxiv.org/abs/2410.10989>（コード：<https://github.com/linkedin/Liger-Kernel>）
# - NVIDIA. *H200 Tensor Core GPU*. <https://www.nvidia.com/en-us/data-center/h200/>（データシート）
# - NVIDIA. *CUDA C++ Programming Guide*. <https://docs.nvidia.com/cuda/cuda-c-programming-guide/>（組み込み関数の節）
# - NVIDIA Developer Forums (2024). *CUDA trigonometric function issues*.
#   <https://forums.developer.nvidia.com/t/cuda-trigonometric-function-issues/304210>（105,615 を超える引数での遅い経路）
# - NVIDIA. *CUDA Graphs* と *Programmatic Dependent Launch and Synchronization*.
#   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-graphs>（CUDA C++ Programming Guide の節）
