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
# # Which encodings extrapolate?
#
# The other chapters say what each encoding does to a position beyond the training
# length: a learned table has no row for it, sinusoids and rotations give it angles the
# model never saw, ALiBi penalises the far keys, T5 puts the far distances in shared
# buckets. This chapter tests what those statements mean for a trained model. It trains
# tiny causal Transformers on a CPU, one per encoding, on a task whose answer is known
# at every length; trains them at one length $L$; and measures them at $L$, $2L$, $4L$ and
# $8L$. Everything runs in a few minutes, so you can rerun it and change it. At the end
# the results are set against the two published studies that this chapter imitates,
# Press et al. (2022) and Kazemnejad et al. (2023): where they agree, and where this small
# setting says something else.

# %% [markdown] lang="ja"
# # どの位置エンコーディングが外挿できるか
#
# ほかの章では、学習時の長さを超える位置に対して各エンコーディングが何をするかを見てきました。
# 学習型位置埋め込みの表にはその位置の行がありません。
# 正弦波と回転は、モデルが見たことのない角度をその位置に与えます。
# ALiBi は遠くのキーにペナルティを課し、T5 は遠い距離をまとめて共有のバケットに入れます。
# この章では、それが学習済みのモデルにとって何を意味するのかを実験で確かめます。
# どの長さでも答えがわかっているタスクで、小さな因果的 Transformer をエンコーディングごとに CPU で学習します。
# 学習は 1 つの長さ $L$ で行い、評価は $L$、$2L$、$4L$、$8L$ で行います。
# 全体が数分で終わるので、読者も実行し直したり条件を変えたりできます。
# 最後に、この章が手本にした 2 つの研究、Press ら (2022) と Kazemnejad ら (2023) と結果を比べます。
# 一致する点と、この小さな設定では違う結果になる点の両方を示します。

# %%
import time

import matplotlib.pyplot as plt
import torch
from torch.testing import assert_close

from posenc import (
    LinearScaling,
    YarnScaling,
    alibi_bias,
    apply_rope,
    rope_frequencies,
    t5_relative_position_bucket,
)
from posenc.plotting import OKABE_ITO, use_site_style
from posenc.toy import ENCODINGS, ToyTransformer, accuracy_by_position, periodic_batch, train

use_site_style()
torch.manual_seed(0)
# tiny matrices: one thread is the fastest, and the sums come out the same on every run
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# %% [markdown] lang="en"
# ## A task whose answer is known at any length
#
# Each sequence starts with $p$ tokens drawn uniformly from a vocabulary of $V$ tokens and
# then repeats them over and over:
# $$z_t = z_{t-p}$$
# The model reads $z_0, \dots, z_t$ and predicts the next token. From $t = p - 1$ on the
# answer is exactly known, whatever the length: it is the token $p - 1$ places back (and
# $2p - 1$, $3p - 1$, ... places back, since the pattern repeats),
# $$z_{t+1} = z_{t+1-p}$$
# The first $p - 1$ targets are fresh random draws that nothing can predict; they are
# left out of the loss and of the accuracy. We take $p = 8$, $V = 16$ and train at
# $L = 32$. Guessing gives an accuracy of $1/V = 0.0625$.
#
# The task is about relative position: "copy the token $p - 1$ back" is the same rule at
# every position. A model that has learned that rule, and nothing tied to where it is,
# solves every length. A model that has learned it separately for each of the positions
# $0, \dots, L - 1$ has no rule for position $L$. The cell below checks both equations on
# a sequence of `posenc.toy.periodic_batch` and prints it (a dot marks a target that is
# not scored).

# %% [markdown] lang="ja"
# ## どの長さでも答えがわかるタスク
#
# 各系列は、$V$ 種類のトークンから一様に選んだ $p$ 個のトークンで始まり、あとはそれを繰り返します。
# $$z_t = z_{t-p}$$
# モデルは $z_0, \dots, z_t$ を読んで次のトークンを予測します。
# $t = p - 1$ 以降は、長さによらず答えが正確に決まっています。
# $p - 1$ 個前のトークンです（パターンが繰り返すので、$2p - 1$ 個前、$3p - 1$ 個前、... も同じです）。
# $$z_{t+1} = z_{t+1-p}$$
# 最初の $p - 1$ 個の正解は新しく引いた乱数で、予測できません。損失にも正解率にも含めません。
# ここでは $p = 8$、$V = 16$ とし、$L = 32$ で学習します。
# 当てずっぽうの正解率は $1/V = 0.0625$ です。
#
# これは相対位置のタスクです。「$p - 1$ 個前のトークンを写す」は、どの位置でも同じ規則です。
# この規則を、自分がどこにいるかに頼らずに身につけたモデルは、どの長さでも解けます。
# 一方、位置 $0, \dots, L - 1$ のそれぞれで別々に覚えたモデルには、位置 $L$ で使える規則がありません。
# 次のセルでは、`posenc.toy.periodic_batch` の系列で 2 つの式を確かめ、系列を表示します
# （点は採点しない正解を表します）。

# %%
L, p, V = 32, 8, 16
inputs, targets = periodic_batch(
    3, 20, period=p, vocab_size=V, generator=torch.Generator().manual_seed(0)
)
assert torch.equal(inputs[:, p:], inputs[:, :-p])  # z_t = z_{t-p}
assert torch.equal(targets[:, p - 1 :], inputs[:, : 20 - p + 1])  # z_{t+1} = z_{t+1-p}
assert (targets[:, : p - 1] == -1).all()  # the first p - 1 targets are not scored
print("t:      " + " ".join(f"{t:2d}" for t in range(20)))
print("input:  " + " ".join(f"{z:2d}" for z in inputs[0].tolist()))
print("target: " + " ".join(f"{z:2d}" if z >= 0 else " ." for z in targets[0].tolist()))
print(f"1/V = {1 / V}", end="")

# %% [markdown] lang="en"
# ## One model, six ways to give it positions
#
# `posenc.toy.ToyTransformer` is a toy for experiments, not a production model: two
# pre-norm blocks of width $64$ with $4$ heads of size $d_h = 16$, a GELU MLP, and a
# linear read-out. The encoding is a constructor argument and changes exactly one thing:
#
# | `encoding` | where it acts | `posenc` function |
# |---|---|---|
# | `"nope"` | nowhere: only the causal mask carries order | none |
# | `"sinusoidal"` | added to the token embeddings | `sinusoidal` |
# | `"learned"` | added to the token embeddings; $L$ rows | `LearnedPositionalEmbedding` |
# | `"rope"` | rotates queries and keys in every layer | `apply_rope` |
# | `"alibi"` | added to the scores of every layer | `alibi_bias` |
# | `"t5"` | added to the scores of every layer, one table shared | `T5RelativeBias` |
#
# Two more methods need no training of their own: the RoPE model evaluated with position
# interpolation (`LinearScaling`, Chen et al. 2023) or with YaRN (`YarnScaling`, Peng et
# al. 2023), passed as `rope_scaling` when the model is called. That makes eight rows in
# the results from six trained models. The tests in `tests/test_toy.py` check that each
# option calls its function; the cell below repeats two of those checks in view. It
# changes the tokens after position $t$ and asserts that no output up to $t$ moves (the
# model is causal with every encoding), and it reads the ALiBi model's first-layer
# scores and finds `alibi_bias` added to them. It also prints how many parameters each
# encoding adds to the $101648$ that all six share: $L \times 64 = 2048$ for the learned
# table and $32 \times 4 = 128$ for T5's buckets.

# %% [markdown] lang="ja"
# ## 1 つのモデルに、位置を与える 6 つの方法
#
# `posenc.toy.ToyTransformer` は実験用のおもちゃで、実用のモデルではありません。
# 幅 $64$ の pre-norm ブロックが 2 つあり、各層は大きさ $d_h = 16$ のヘッドを $4$ つ持ちます。
# あとは GELU の MLP と線形の出力層だけです。
# エンコーディングはコンストラクタの引数で、変わるのはそれぞれ 1 か所だけです。
#
# | `encoding` | 作用する場所 | `posenc` の関数 |
# |---|---|---|
# | `"nope"` | どこにもない（順序を表すのは因果マスクだけ） | なし |
# | `"sinusoidal"` | トークンの埋め込みに足す | `sinusoidal` |
# | `"learned"` | トークンの埋め込みに足す（$L$ 行） | `LearnedPositionalEmbedding` |
# | `"rope"` | 各層でクエリとキーを回転する | `apply_rope` |
# | `"alibi"` | 各層のスコアに足す | `alibi_bias` |
# | `"t5"` | 各層のスコアに足す（表は全層で共有） | `T5RelativeBias` |
#
# ほかに、それ自体の学習がいらない方法が 2 つあります。
# RoPE のモデルを、位置補間（`LinearScaling`、Chen ら 2023）または YaRN（`YarnScaling`、Peng ら 2023）を
# かけて評価するものです。スケーリングはモデルを呼ぶときに `rope_scaling` として渡します。
# こうして、学習した 6 つのモデルから、結果の表の 8 行ができます。
# 各オプションが正しい関数を呼ぶことは `tests/test_toy.py` で確かめています。
# 次のセルでは、そのうち 2 つをここでも確かめます。
# 位置 $t$ より後のトークンを変えても、$t$ までの出力が変わらないこと（どのエンコーディングでもモデルは因果的です）。
# そして、ALiBi のモデルの 1 層目のスコアに `alibi_bias` が足されていることです。
# また、6 つに共通する $101648$ 個のパラメータに、各エンコーディングが足すパラメータの数も表示します。
# 学習型の表は $L \times 64 = 2048$ 個、T5 のバケットは $32 \times 4 = 128$ 個です。

# %%
models = {}
for encoding in ENCODINGS:
    torch.manual_seed(0)
    models[encoding] = ToyTransformer(V, encoding, dim=64, n_heads=4, n_layers=2, max_len=L)

tokens = torch.randint(V, (2, L))
with torch.no_grad():
    for model in models.values():  # causal: outputs up to t ignore the tokens after t
        for t in (0, 12, L - 2):
            changed = tokens.clone()
            changed[:, t + 1 :] = torch.randint(V, (2, L - 1 - t))
            assert_close(model(changed)[:, : t + 1], model(tokens)[:, : t + 1])

    alibi = models["alibi"]  # first layer: scores with the bias minus scores without it
    h, positions = alibi.blocks[0].ln1(alibi.embed(tokens)), torch.arange(L)
    added = alibi.blocks[0].attn.scores(h, positions, alibi.position_bias(L))
    added = added - alibi.blocks[0].attn.scores(h, positions)
    assert_close(added, alibi_bias(4, L).expand(2, -1, -1, -1))


def n_params(model):
    return sum(w.numel() for w in model.parameters())


shared = n_params(models["nope"])
extra = {name: n_params(model) - shared for name, model in models.items()}
assert shared == 101648 and extra["learned"] == L * 64 and extra["t5"] == 32 * 4
print(f"shared: {shared}\n" + "\n".join(f"{name:10s} +{n}" for name, n in extra.items()), end="")

# %% [markdown] lang="en"
# ## Training at L = 32
#
# Every model trains on the same 600 batches of 32 sequences of length $L = 32$ (the data
# generator is seeded), with AdamW at a learning rate of $0.006$ falling linearly to zero,
# from the same seed for the initial weights. The loss is the cross-entropy over the
# scored positions; a uniform guess costs $\ln V = \ln 16 \approx 2.77$. The cell prints
# the mean loss of the first and of the last 10 steps, and the time each run took (about
# ten seconds on one core of a current CPU).

# %% [markdown] lang="ja"
# ## L = 32 での学習
#
# どのモデルも、長さ $L = 32$ の系列 32 本からなる同じ 600 個のバッチで学習します（データの乱数にはシードを固定しています）。
# 最適化は AdamW で、学習率 $0.006$ から線形に 0 まで下げます。初期の重みも同じシードから作ります。
# 損失は採点する位置での交差エントロピーです。一様に当てずっぽうをすると $\ln V = \ln 16 \approx 2.77$ になります。
# セルは、最初の 10 ステップと最後の 10 ステップの損失の平均と、各学習にかかった時間を表示します。
# 現在の CPU のコア 1 つで、1 回あたり 10 秒ほどです。

# %%
losses = {}
for encoding, model in models.items():
    wall, cpu = time.perf_counter(), time.process_time()
    losses[encoding] = train(model, steps=600, batch_size=32, seq_len=L, lr=6e-3, seed=0, period=p)
    first, last = (sum(x) / len(x) for x in (losses[encoding][:10], losses[encoding][-10:]))
    print(f"{encoding:10s} loss {first:.3f} -> {last:.3f}")
    print(f"Wall time: {time.perf_counter() - wall:.1f} s")
    print(f"CPU times: {time.process_time() - cpu:.1f} s")
    assert abs(first - torch.tensor(16.0).log()) < 0.5 and last < first / 3  # from ln 16, down
assert f"{torch.tensor(16.0).log():.2f}" == "2.77"

# %% [markdown] lang="en"
# All six losses start near $\ln 16$ and fall. Five of them end near zero; NoPE stays far
# above the others (its printed final loss is 0.822): without any positional encoding this
# small model does not learn to find the token $7$ places back even at the training length.
# The same models now meet longer inputs.

# %% [markdown] lang="ja"
# 6 つの損失はどれも $\ln 16$ の近くから始まって下がります。
# 5 つはほぼ 0 まで下がりますが、NoPE だけはほかより大きく残ります（表示された最後の損失は 0.822 です）。
# 位置エンコーディングがないと、この小さなモデルは学習時の長さでさえ、$7$ 個前のトークンを見つけることを覚えきれません。
# では、これらのモデルに長い入力を与えてみます。

# %%
assert abs(sum(losses["nope"][-10:]) / 10 - 0.822) < 5e-4
assert max(sum(losses[e][-10:]) / 10 for e in ENCODINGS if e != "nope") < 0.2

# %% [markdown] lang="en"
# ## Evaluating at L, 2L, 4L and 8L
#
# The evaluation set is 256 fresh sequences of length $8L = 256$ from another seed; the
# shorter evaluations use their first $N$ tokens, for $N = L, 2L, 4L, 8L$. We record
# $a(t)$, the fraction of sequences whose next token is predicted correctly (greedy
# argmax) at position $t$, and average it over the scored positions of each length.
#
# For RoPE with a scaling the factor is set to the length: $s = N/L$, so that
# position interpolation maps the positions $0, \dots, N - 1$ into the trained range
# $[0, L)$. YaRN gets the same factor and the original length $L$. At $N = L$ both are the
# plain RoPE model. The learned table has $L$ rows, so the learned model is evaluated
# only at $N = L$: at $2L$ it raises an `IndexError`, checked below, and its row of
# the table shows a dash. (Clamping the positions to the last row, or recycling rows,
# would be a different model, not the one that was trained.)

# %% [markdown] lang="ja"
# ## L、2L、4L、8L での評価
#
# 評価には、別のシードで作った長さ $8L = 256$ の新しい系列を 256 本使います。
# 短い長さでの評価には、その先頭の $N$ トークンを使います（$N = L, 2L, 4L, 8L$）。
# 位置 $t$ で次のトークンを正しく予測できた（貪欲に argmax を取った）系列の割合を $a(t)$ とし、
# 各長さについて、採点する位置での平均を取ります。
#
# スケーリングをかけた RoPE では、係数を長さに合わせて $s = N/L$ とします。
# これで位置補間は、位置 $0, \dots, N - 1$ を学習した範囲 $[0, L)$ に写します。
# YaRN にも同じ係数と、もとの長さ $L$ を渡します。$N = L$ ではどちらも素の RoPE のモデルです。
# 学習型位置埋め込みの表は $L$ 行しかないので、このモデルは $N = L$ でだけ評価します。
# $2L$ では `IndexError` になり（下で確かめます）、表のその欄はダッシュにします。
# （位置を最後の行で打ち切ったり、行を使い回したりすると、学習したものとは別のモデルになります。）

# %%
eval_inputs, eval_targets = periodic_batch(
    256, 8 * L, period=p, generator=torch.Generator().manual_seed(1)
)
lengths = (L, 2 * L, 4 * L, 8 * L)
methods = {  # name: (trained model, the RoPE scaling for a factor s, or None)
    "NoPE": ("nope", None),
    "sinusoidal": ("sinusoidal", None),
    "learned": ("learned", None),
    "RoPE": ("rope", None),
    "RoPE + PI": ("rope", LinearScaling),
    "RoPE + YaRN": ("rope", lambda s: YarnScaling(s, original_max_positions=L)),
    "ALiBi": ("alibi", None),
    "T5": ("t5", None),
}
assert all((N - 1) / (N / L) < L for N in lengths)  # PI maps 0 .. N-1 into [0, L)
acc = {}  # (method, N): a(t) for t = 0 .. N-1 (nan where nothing is scored)
for name, (encoding, scaling) in methods.items():
    for N in lengths:
        if encoding == "learned" and N > L:
            continue  # no row for position L and beyond
        rope_scaling = scaling(N / L) if scaling and N > L else None
        x, y = eval_inputs[:, :N], eval_targets[:, :N]
        acc[name, N] = accuracy_by_position(models[encoding], x, y, rope_scaling=rope_scaling)

try:
    models["learned"](eval_inputs[:, : 2 * L])
    raise AssertionError("the learned table should end at L")
except IndexError:
    pass

mean = {key: a.nanmean().item() for key, a in acc.items()}
header = "".join(f"{label:>9s}" for label in ("L=32", "2L=64", "4L=128", "8L=256"))
rows = [f"{'':12s}{header}"]
for name in methods:
    cells = (f"{mean[name, N]:9.3f}" if (name, N) in mean else f"{'-':>9s}" for N in lengths)
    rows.append(f"{name:12s}" + "".join(cells))
print("\n".join(rows), end="")

# %% [markdown] lang="en"
# In a causal model the prediction at position $t$ depends only on $z_0, \dots, z_t$. On
# the first $L$ positions every model therefore makes exactly the predictions it makes at
# length $L$, and a longer input can change only the positions from $L$ on. The one
# exception is a scaling applied at evaluation: it changes the angles of every position,
# the early ones too. The cell checks both: the first $L$ values of $a(t)$ are identical
# at every length except for PI and YaRN, whose accuracy on those positions (printed
# at $2L$) already falls.

# %% [markdown] lang="ja"
# 因果的なモデルでは、位置 $t$ の予測は $z_0, \dots, z_t$ だけで決まります。
# したがって最初の $L$ 個の位置では、どのモデルも長さ $L$ のときとまったく同じ予測をします。
# 長い入力で変わりうるのは、位置 $L$ 以降だけです。
# 例外は評価時にかけるスケーリングで、これはすべての位置の角度を変えるので、前の方の位置も変わります。
# 次のセルで両方を確かめます。$a(t)$ の最初の $L$ 個の値は、PI と YaRN を除いてどの長さでも同じです。
# PI と YaRN では、それらの位置での正解率がすでに下がります（$2L$ での値を表示します）。


# %%
def same(a, b):  # equal on the scored positions t >= p - 1 (the others are nan)
    return torch.equal(a[p - 1 :], b[p - 1 :])


for name, N in acc:
    if name in ("RoPE + PI", "RoPE + YaRN") and N > L:
        assert not same(acc[name, N][:L], acc[name, L])
    else:
        assert same(acc[name, N][:L], acc[name, L])
assert same(acc["RoPE + PI", L], acc["RoPE", L]) and same(acc["RoPE + YaRN", L], acc["RoPE", L])
rope_names = ("RoPE", "RoPE + PI", "RoPE + YaRN")
early = [f"{name:12s} t < L, N = 2L: {acc[name, 2 * L][:L].nanmean():.3f}" for name in rope_names]
print("\n".join(early), end="")

# %% [markdown] lang="en"
# ## Accuracy by position
#
# The table averages over whole sequences, so at $8L$ seven eighths of what it measures
# lies beyond the training length. The figure shows where the accuracy goes: $a(t)$ at
# $N = 8L$, averaged over windows of $p = 8$ positions (one period, which also removes a
# ripple with the period), on a logarithmic axis in $t$. The dotted line is $t = L$. Left:
# the six trained models (the learned model's line ends at $L$). Right: the RoPE model as
# trained and with each of the two scalings applied at evaluation.

# %% [markdown] lang="ja"
# ## 位置ごとの正解率
#
# 表の値は系列全体での平均なので、$8L$ では測っているものの 8 分の 7 が学習時の長さの外にあります。
# 図は、正解率がどこで変わるのかを示します。$N = 8L$ での $a(t)$ を、$p = 8$ 個の位置（ちょうど 1 周期で、
# 周期に合わせた細かな揺れも消えます）ごとに平均し、$t$ を対数軸で描きました。点線は $t = L$ です。
# 左は学習した 6 つのモデルです（学習型位置埋め込みの線は $L$ で終わります）。
# 右は RoPE のモデルそのものと、評価時に 2 つのスケーリングをそれぞれかけたものです。

# %% alt={"en": ["Accuracy a(t) at 8L against position t, log axis, window-averaged, dotted line at L = 32. Left: ALiBi stays near 1, T5 and RoPE fade, sinusoidal collapses to near chance, NoPE sinks slowly. Right: RoPE with PI or YaRN is worse from the start."], "ja": ["8L での正解率 a(t) を位置 t に対して対数軸で描いた図（窓平均、点線は L = 32）。左では ALiBi が 1 の近くを保ち、T5 と RoPE は下がり、正弦波は当てずっぽうに近い値まで崩れ、NoPE はゆっくり下がります。右では PI や YaRN をかけた RoPE が最初から悪くなります。"]}
blue, orange, green, purple, sky, vermillion, _, black = OKABE_ITO
style = {  # name: (colour, line style, width); the learned line is wide so it shows beneath
    "NoPE": (black, ":", 1.6),
    "sinusoidal": (orange, "--", 1.6),
    "learned": (sky, "-", 4.0),
    "RoPE": (blue, "-", 1.6),
    "RoPE + PI": (vermillion, "--", 1.6),
    "RoPE + YaRN": ("0.45", "-.", 1.6),
    "ALiBi": (green, "-", 1.6),
    "T5": (purple, "-.", 1.6),
}


def windows(a):
    """a(t) averaged over t = 8k .. 8k+7 for k >= 1, and the window centres."""
    n = a.shape[0] // p
    return torch.arange(1, n) * p + (p - 1) / 2, a[p : n * p].view(n - 1, p).mean(-1)


fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.6), sharey=True)
panels = (
    ["learned", "NoPE", "sinusoidal", "RoPE", "ALiBi", "T5"],
    ["RoPE", "RoPE + PI", "RoPE + YaRN"],
)
for ax, names, where in zip(axes, panels, ("lower left", "upper right"), strict=True):
    for name in names:
        N = 8 * L if (name, 8 * L) in acc else L
        colour, line, width = style[name]
        ax.plot(*windows(acc[name, N]), line, color=colour, lw=width, label=name)
    ax.axvline(L, color="0.4", lw=0.8, ls=":")
    ax.set(xscale="log", xlabel="$t$", ylim=(0, 1.03))
    ax.set_xticks([8, 16, 32, 64, 128, 256], ["8", "16", "32", "64", "128", "256"])
    ax.minorticks_off()
    ax.legend(loc=where, fontsize=8)
axes[0].set_ylabel("$a(t)$")
plt.show()

# %% [markdown] lang="en"
# ## Reading the results
#
# **Sinusoidal** is perfect at $L$ (1.000) and collapses right after it: 0.554 at $2L$,
# 0.314 at $4L$. In the figure the accuracy falls below 0.2, not far above chance, within a
# few windows of $t = L$. The model learned the rule for the encodings of the positions it
# saw and has none for the others. (A short revival around $t \approx 200$ is visible in the figure;
# exercise 3 asks where it comes from.)
#
# **Learned** is also perfect at $L$ (1.000) and is not defined beyond it.
#
# **RoPE** holds on for a while: 1.000 at $L$, 0.965 at $2L$, then 0.718 at $4L$ and 0.565
# at $8L$. Positions enter its scores only through the distance between query and key,
# and the distance the answer needs, $7$, is the same at every length. What the model
# never saw are the distances beyond $L - 1 = 31$: keys that far back get scores from
# angles never trained, and some of them win attention they should not (the next section
# tests this). These numbers are from one seed; a later section shows how much they move
# with another.
#
# **RoPE + PI** and **RoPE + YaRN** are worse than doing nothing: 0.240 and 0.497 at
# $2L$. Both change the angles of all positions, and the model, never fine-tuned on the
# new angles, loses even the first $L$ positions (checked above). The next section shows
# why.
#
# **ALiBi** barely moves: 0.959 at $L$ and 0.985 at $8L$. Its few errors sit at the
# start of a sequence; beyond $L$ every window is near $1$. The penalties grow with the
# distance, so the keys further back than anything seen in training get even less
# weight than the far keys did in training.
#
# **T5** is perfect at $L$ (1.000) and fades slowly: 0.984, 0.879, 0.710. The next section
# finds the mechanism in its bias table.
#
# **NoPE** never learned the task well (0.777 at $L$) and loses a little more with every
# doubling, down to 0.634 at $8L$.
#
# The cell asserts each of these statements about the table.

# %% [markdown] lang="ja"
# ## 結果を読む
#
# **正弦波位置エンコーディング** は $L$ では完璧 (1.000) ですが、そのすぐ先で崩れます。
# $2L$ で 0.554、$4L$ で 0.314 です。図では、$t = L$ を越えて数区間のうちに、正解率は 0.2 を下回り、当てずっぽうに近い値まで下がります。
# モデルは、見た位置のエンコーディングに対する規則を覚えただけで、ほかの位置の規則を持っていません。
# （図では $t \approx 200$ のあたりで一時的に持ち直しています。その理由は演習 3 で考えます。）
#
# **学習型位置埋め込み** も $L$ では完璧 (1.000) ですが、その先では定義されていません。
#
# **RoPE** はしばらく持ちこたえます。$L$ で 1.000、$2L$ で 0.965、その後 $4L$ で 0.718、$8L$ で 0.565 です。
# 位置がスコアに入るのはクエリとキーの距離を通してだけで、答えに必要な距離 $7$ はどの長さでも同じです。
# モデルが見たことがないのは $L - 1 = 31$ より遠い距離です。
# それほど遠いキーは学習していない角度からスコアを受け取り、その一部が本来取るべきでない重みを奪います（次の節で確かめます）。
# これは 1 つのシードの数値です。シードを変えるとどれだけ動くかは、後の節で示します。
#
# **RoPE + PI** と **RoPE + YaRN** は、何もしないより悪くなります。$2L$ で 0.240 と 0.497 です。
# どちらもすべての位置の角度を変えます。新しい角度で微調整していないモデルは、最初の $L$ 個の位置でさえ正解できなくなります（上で確かめました）。
# 理由は次の節で示します。
#
# **ALiBi** はほとんど変わりません。$L$ で 0.959、$8L$ で 0.985 です。
# わずかな誤りは系列の先頭にあり、$L$ より先ではどの区間もほぼ $1$ です。
# ペナルティは距離とともに大きくなるので、学習中に見たどれよりも遠いキーには、学習中の遠いキーよりさらに小さな重みしかかかりません。
#
# **T5** は $L$ で完璧 (1.000) で、ゆっくりと下がります。0.984、0.879、0.710 です。
# その仕組みは、次の節でバイアスの表から探ります。
#
# **NoPE** はそもそもタスクをよく覚えられず（$L$ で 0.777）、長さが 2 倍になるたびに少しずつ下がって、$8L$ で 0.634 になります。
#
# 次のセルで、表についてのこれらの記述をそれぞれ確かめます。

# %%
r = {key: round(v, 3) for key, v in mean.items()}
assert r["sinusoidal", L] == 1.0 and (r["sinusoidal", 2 * L], r["sinusoidal", 4 * L]) == (
    0.554,
    0.314,
)
t, a = windows(acc["sinusoidal", 8 * L])
assert a[(t > 48) & (t < 150)].max() < 0.2  # about chance soon after L
assert a[(t > 180) & (t < 220)].max() > 0.5  # the revival
assert r["learned", L] == 1.0
assert [r["RoPE", N] for N in lengths] == [1.0, 0.965, 0.718, 0.565]
assert (r["RoPE + PI", 2 * L], r["RoPE + YaRN", 2 * L]) == (0.24, 0.497)
assert all(mean[m, N] < mean["RoPE", N] for m in ("RoPE + PI", "RoPE + YaRN") for N in lengths[1:])
assert (r["ALiBi", L], r["ALiBi", 8 * L]) == (0.959, 0.985)
t, a = windows(acc["ALiBi", 8 * L])
assert a[t > L].min() > 0.97 and a[0] < a[t > L].min()  # the errors are at the start
assert [r["T5", N] for N in lengths] == [1.0, 0.984, 0.879, 0.71]
assert (r["NoPE", L], r["NoPE", 8 * L]) == (0.777, 0.634)
nope = [mean["NoPE", N] for N in lengths]
assert nope == sorted(set(nope), reverse=True)  # falls with every doubling

# %% [markdown] lang="en"
# ## Why: what each encoding shows a model at 8L
#
# **Far keys or far positions?** If RoPE and T5 fail beyond $L$ because of the keys further
# back than any distance seen in training, hiding those keys should cure them. The cell
# evaluates at $8L$ with a sliding window: every query sees only the keys at distances
# $0$ to $L - 1$ (a bias of $-\infty$ on the others, added in every layer). RoPE and T5
# become perfect again (1.000 both), so their only trouble was the far keys. The
# sinusoidal model improves but stays far from perfect (0.784): for it the positions
# themselves are new, whichever keys it sees.

# %% [markdown] lang="ja"
# ## なぜ：8L で各エンコーディングがモデルに見せるもの
#
# **遠いキーか、遠い位置か。** RoPE と T5 が $L$ より先で失敗する原因が、学習中に見たどの距離よりも遠いキーにあるなら、
# そのキーを隠せば直るはずです。
# 次のセルでは、スライディングウィンドウをかけて $8L$ で評価します。
# 各クエリには距離 $0$ から $L - 1$ のキーだけを見せます（それ以外には $-\infty$ のバイアスを全層で足します）。
# RoPE と T5 はふたたび完璧になります（どちらも 1.000）。問題は遠いキーだけだったのです。
# 正弦波のモデルは改善しますが、完璧からはほど遠いままです (0.784)。
# このモデルにとっては、どのキーを見るかにかかわらず、位置そのものが未知だからです。


# %%
def accuracy_in_window(model, inputs, targets, window):
    """Mean accuracy when each query sees only the keys less than `window` back."""
    n = inputs.shape[-1]
    positions = torch.arange(n)
    far = positions[:, None] - positions[None, :] >= window  # [query, key]
    hide = torch.zeros(n, n).masked_fill(far, float("-inf"))
    bias = model.position_bias(n)
    bias = hide if bias is None else bias + hide
    with torch.no_grad():
        x = model.embed(inputs)
        for block in model.blocks:
            x = block(x, positions, bias)
        correct = model.head(model.ln(x)).argmax(-1) == targets
    return correct[targets >= 0].float().mean().item()


windowed = {
    name: accuracy_in_window(models[encoding], eval_inputs, eval_targets, window=L)
    for name, encoding in (("RoPE", "rope"), ("T5", "t5"), ("sinusoidal", "sinusoidal"))
}
assert windowed["RoPE"] == windowed["T5"] == 1.0 and 0.5 < windowed["sinusoidal"] < 0.9
assert all(windowed[name] > mean[name, 8 * L] for name in windowed)
print("\n".join(f"{name:12s} 8L, window L: {v:.3f}" for name, v in windowed.items()), end="")

# %% [markdown] lang="en"
# **Position interpolation** divides every position by $s$. RoPE's score for a query at
# $m$ and a key at $n$ depends on the angles $(m - n)\theta_i$, so the distance $7$ that
# the model learned to look for is now shown to it as $7/s$, a distance it never saw; and
# the distances that look like $7$ hold the wrong tokens. Chen et al. (2023) fine-tune
# after interpolating; this experiment, on purpose, does not. The cell checks that
# `LinearScaling(s)` is RoPE at the positions divided by $s$.
#
# **YaRN** interpolates only the frequencies that turn less than $\beta_{\text{slow}} = 1$
# times over the original length and keeps those that turn more than
# $\beta_{\text{fast}} = 32$ times. The number of turns of frequency $i$ over $L$ is
# $$r_i = \frac{L\,\theta_i}{2\pi}, \qquad \theta_i = 10000^{-2i/d_h}$$
# With $L = 32$ and $d_h = 16$ the fastest frequency turns only about $5$ times (printed
# below), so by the rule no frequency would be kept. The rounding of the correction
# range keeps the first one; the second is partly interpolated, and the remaining six are
# divided by $s$ as in PI. The printed ratios $\theta_i'/\theta_i$ for $s = 2$ show it.
# The defaults were chosen for models trained on thousands of positions, whose fastest
# frequencies turn hundreds of times ($652$ for $L = 4096$ and $d_h = 128$); at this scale
# YaRN is mostly PI, and the model pays for it.

# %% [markdown] lang="ja"
# **位置補間** は、すべての位置を $s$ で割ります。
# 位置 $m$ のクエリと位置 $n$ のキーに対する RoPE のスコアは、角度 $(m - n)\theta_i$ で決まります。
# そのため、モデルが探すように学習した距離 $7$ は、いまや $7/s$ という、見たことのない距離として見えます。
# そして $7$ に見える距離には、違うトークンがあります。
# Chen ら (2023) は補間のあとで微調整を行いますが、この実験ではあえて行いません。
# 次のセルで、`LinearScaling(s)` が、位置を $s$ で割った RoPE であることを確かめます。
#
# **YaRN** が補間するのは、もとの長さのあいだに回る回数が $\beta_{\text{slow}} = 1$ より少ない周波数だけで、
# $\beta_{\text{fast}} = 32$ 回より多く回る周波数はそのまま残します。周波数 $i$ が $L$ のあいだに回る回数は次のとおりです。
# $$r_i = \frac{L\,\theta_i}{2\pi}, \qquad \theta_i = 10000^{-2i/d_h}$$
# $L = 32$、$d_h = 16$ では、最も速い周波数でも約 $5$ 回しか回りません（下に表示します）。
# したがって規則どおりなら、そのまま残る周波数はありません。
# 補正範囲の丸めによって 1 番目だけは残り、2 番目は一部だけ補間され、残りの 6 つは PI と同じく $s$ で割られます。
# $s = 2$ での比 $\theta_i'/\theta_i$ を表示すると、それがわかります。
# 既定値は、数千の位置で学習したモデル、つまり最も速い周波数が数百回も回るモデルに合わせて選ばれています
# （$L = 4096$、$d_h = 128$ なら $652$ 回です）。
# この規模では YaRN はほとんど PI と同じで、モデルはその代償を払います。

# %%
q = torch.randn(4, 8 * L, 16)
s = 4.0
positions = torch.arange(8 * L)
assert_close(apply_rope(q, positions, scaling=LinearScaling(s)), apply_rope(q, positions / s))
assert all((7 * s) % p != p - 1 for s in (2, 4, 8))  # what now looks like 7 back: wrong token

theta = rope_frequencies(16)
assert_close(theta, 10000.0 ** (-2 * torch.arange(8) / 16))  # theta_i = 10000^(-2i/d_h)
turns = L * theta / (2 * torch.pi)
assert turns.max() < 32 and 5 < turns[0] < 6  # none turns beta_fast = 32 times
ratio = rope_frequencies(16, scaling=YarnScaling(2.0, original_max_positions=L)) / theta
assert ratio[0] == 1 and 0.5 < ratio[1] < 1 and torch.all(ratio[2:] == 0.5)
assert round(4096 * rope_frequencies(128)[0].item() / (2 * torch.pi)) == 652
print("r_i:             " + " ".join(f"{v:6.3f}" for v in turns.tolist()))
print("theta_i'/theta_i:" + " ".join(f"{v:6.3f}" for v in ratio.tolist()), end="")

# %% [markdown] lang="en"
# **T5** learns one bias per bucket and head. With 32 buckets and `max_distance=128`
# (unidirectional, as in a decoder), the distances $0$ to $15$ have a bucket each and the
# longer ones share logarithmic buckets. Training at $L = 32$ shows the model only the
# distances up to $31$, that is buckets $0$ to $21$; buckets $22$ to $31$ keep their
# initial values near $0$ (only weight decay touches them). The trained model has learned
# positive biases, above $0.4$, for the buckets of the answer's distance $7$ and of its
# copies at $15$, $23$ and $31$; every other trained bucket is lower, most of them below
# $-0.5$. At $8L$ the last query has more than two hundred keys in untrained buckets,
# and their bias, near $0$, is higher than that of most wrong keys seen in training. The
# cell computes, from the bias alone (as if all content scores were equal), the share of
# attention that the last query puts on the keys holding the answer: it falls with the
# length (head 1 printed), while the keys further than $34$ (buckets $22$ and beyond)
# take a growing share.

# %% [markdown] lang="ja"
# **T5** は、バケットとヘッドごとに 1 つのバイアスを学習します。
# バケット数 32、`max_distance=128`（デコーダと同じ単方向）では、距離 $0$ から $15$ はそれぞれ専用のバケットを持ち、
# それより長い距離は対数的なバケットを共有します。
# $L = 32$ で学習すると、モデルが見る距離は $31$ までで、バケットでいえば $0$ から $21$ です。
# バケット $22$ から $31$ は初期値のまま $0$ の近くに残ります（触れるのは重み減衰だけです）。
# 学習したモデルは、答えの距離 $7$ と、その写しがある $15$、$23$、$31$ のバケットに、$0.4$ を超える正のバイアスを付けています。
# 学習したほかのバケットはどれもそれより低く、ほとんどは $-0.5$ を下回ります。
# $8L$ では、最後のクエリから見て、学習していないバケットにあるキーが 200 個を超えます。
# そのバイアスは $0$ に近く、学習中に見た誤ったキーの大半よりも高いのです。
# 次のセルでは、バイアスだけから（内容によるスコアがすべて等しいとして）、最後のクエリが答えを持つキーにかけるアテンションの割合を計算します。
# この割合は長さとともに下がり（ヘッド 1 を表示します）、距離 $34$ より遠いキー（バケット $22$ 以降）が取る割合は増えていきます。

# %%
t5 = models["t5"]
weight = t5.t5_bias.relative_attention_bias.weight.detach()  # [bucket, head]
seen = t5_relative_position_bucket(-torch.arange(L), bidirectional=False).unique()
assert seen.tolist() == list(range(22))  # distances 0 .. 31: buckets 0 .. 21
assert weight[22:].abs().max() < 0.1  # untrained: still near their initial N(0, 0.02^2)
answer_buckets = t5_relative_position_bucket(-torch.tensor([7, 15, 23, 31]), bidirectional=False)
assert answer_buckets.tolist() == [7, 15, 18, 21]
wrong = weight[[b for b in range(22) if b not in answer_buckets.tolist()]]
assert weight[answer_buckets].min() > 0.4 > wrong.max()  # the answer's distances win
assert (wrong < -0.5).float().mean() > 0.75  # most wrong distances are pushed down
untrained = t5_relative_position_bucket(-torch.arange(8 * L), bidirectional=False) >= 22
assert untrained.sum() > 200  # keys of the last query at 8L in untrained buckets

share_answer, share_far = [], []
with torch.no_grad():
    for N in lengths:
        w = t5.t5_bias(1, N)[:, 0].softmax(-1)  # [head, key]: the last query, bias only
        back = torch.arange(N).flip(0)  # distance of key j from the last query
        share_answer.append(w[:, back % p == p - 1].sum(-1))
        share_far.append(w[:, back > 34].sum(-1))
answer, far = torch.stack(share_answer), torch.stack(share_far)  # [length, head]
assert torch.all(answer[1:] < answer[:-1]) and torch.all(far[1:] > far[:-1])
print("N:                   " + " ".join(f"{N:6d}" for N in lengths))
print("share on the answer: " + " ".join(f"{v:6.3f}" for v in answer[:, 0].tolist()))
print("share beyond 34:     " + " ".join(f"{v:6.3f}" for v in far[:, 0].tolist()), end="")

# %% [markdown] lang="en"
# ## How much does one run tell?
#
# Every number above comes from one model per encoding, trained from one seed. To see
# how much the seed matters, the cell trains the RoPE and the T5 models twice more, with
# seeds 1 and 2 for both the initial weights and the training batches, and evaluates
# them on the same set. These two are the interesting cases: beyond $L$ they see
# distances they were never trained on, and nothing in training constrains what they do
# there.

# %% [markdown] lang="ja"
# ## 1 回の学習からどこまで言えるか
#
# ここまでの数値は、エンコーディングごとに 1 つのシードから学習した 1 つのモデルによるものです。
# シードがどれほど効くかを見るため、次のセルでは RoPE と T5 のモデルを、初期の重みと学習のバッチの両方のシードを 1 と 2 に変えて、さらに 2 回ずつ学習し、同じ評価用の系列で評価します。
# この 2 つを選んだのは、$L$ より先で学習したことのない距離を見るからです。
# そこでモデルがどう振る舞うかは、学習では何も制約されていません。

# %%
runs = {(name, 0): [mean[name, N] for N in lengths] for name in ("RoPE", "T5")}
for name, encoding in (("RoPE", "rope"), ("T5", "t5")):
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = ToyTransformer(V, encoding, dim=64, n_heads=4, n_layers=2)
        wall, cpu = time.perf_counter(), time.process_time()
        train(model, steps=600, batch_size=32, seq_len=L, lr=6e-3, seed=seed, period=p)
        print(f"{name} seed {seed}")
        print(f"Wall time: {time.perf_counter() - wall:.1f} s")
        print(f"CPU times: {time.process_time() - cpu:.1f} s")
        runs[name, seed] = [
            accuracy_by_position(model, eval_inputs[:, :N], eval_targets[:, :N]).nanmean().item()
            for N in lengths
        ]
rows = [f"{'':12s}{header}"]
for (name, seed), row in sorted(runs.items()):
    rows.append(f"{name + ' seed ' + str(seed):12s}" + "".join(f"{v:9.3f}" for v in row))
print("\n".join(rows), end="")

# %% [markdown] lang="en"
# The T5 model fades the same way from every seed: at $8L$ the three runs give 0.710,
# 0.715 and 0.703. RoPE does not: at $8L$ its runs give 0.565, 0.751 and 0.573, and at $4L$
# they range from 0.718 to 0.952. All three RoPE runs are near perfect up to $2L$; what
# happens further out depends on angles that training never constrained. So the order of
# RoPE and T5 at $4L$ and $8L$ is not settled by a single run (seed 1 puts RoPE ahead
# at both), while T5 is ahead on average over the three seeds at both lengths. A
# difference of a few hundredths between two single runs beyond $L$ is not a finding
# here.

# %% [markdown] lang="ja"
# T5 のモデルは、どのシードでも同じように下がります。$8L$ では 3 回の学習で 0.710、0.715、0.703 です。
# RoPE はそうではありません。$8L$ では 0.565、0.751、0.573 で、$4L$ では 0.718 から 0.952 まで開きます。
# RoPE の 3 回はどれも $2L$ まではほぼ完璧です。その先で何が起きるかは、学習が制約しなかった角度で決まります。
# したがって、$4L$ と $8L$ での RoPE と T5 の順位は、1 回の学習では決まりません（シード 1 では両方の長さで RoPE が上です）。
# 3 つのシードの平均では、どちらの長さでも T5 が上です。
# $L$ より先で、1 回ずつの学習どうしの差が 100 分の数ほどしかないなら、ここでは結論になりません。

# %%
rope = torch.tensor([runs["RoPE", k] for k in range(3)])  # [seed, length]
t5_runs = torch.tensor([runs["T5", k] for k in range(3)])
assert [round(v, 3) for v in t5_runs[:, 3].tolist()] == [0.71, 0.715, 0.703]
assert [round(v, 3) for v in rope[:, 3].tolist()] == [0.565, 0.751, 0.573]
assert (round(rope[:, 2].min().item(), 3), round(rope[:, 2].max().item(), 3)) == (0.718, 0.952)
assert rope[:, :2].min() > 0.96  # all three near perfect up to 2L
assert torch.all(rope[1, 2:] > t5_runs[0, 2:])  # seed 1: RoPE ahead at 4L and 8L
assert torch.all(rope.mean(0)[2:] < t5_runs.mean(0)[2:])  # on average T5 ahead

# %% [markdown] lang="en"
# ## Against the published findings
#
# The two studies that this chapter imitates differ from it in almost everything but the
# question:
#
# | | Press et al. (2022) | Kazemnejad et al. (2023) | this chapter |
# |---|---|---|---|
# | task | language modelling (WikiText-103) | synthetic reasoning and arithmetic: copying, reversal, addition, sorting, SCAN, PCFG, ... | the periodic copy above |
# | model | full-size language models | decoder-only, about 100 million parameters | 2 layers, width 64, 101648 parameters |
# | training length | 512 and 1024 tokens | set per task | 32 tokens |
# | measure | perplexity | exact-match accuracy | next-token accuracy |
# | encodings | sinusoidal, rotary, T5 bias, ALiBi | NoPE, absolute, T5 bias, ALiBi, rotary | NoPE, sinusoidal, learned, RoPE (+ PI, + YaRN), ALiBi, T5 |
#
# **Press et al. (2022), Figure 1.** Language models trained on WikiText-103 with
# $L = 512$ and $L = 1024$ tokens and evaluated on longer inputs: the perplexity of the
# sinusoidal, rotary and T5-bias models degrades as the inputs grow past $L$, and ALiBi's
# does not. This small setting agrees on every curve. Sinusoidal fails at once. RoPE holds
# a little past $L$ and then falls (in the main run the windows stay above 0.99 up to
# $t = 48$). T5 fades slowly. ALiBi stays flat and, at $8L$, is the best of all (0.985).
#
# **Kazemnejad et al. (2023).** On their tasks NoPE generalised to longer inputs as well
# as or better than the best explicit encoding, T5's bias, and ALiBi, rotary and absolute
# encodings generalised poorly. Here the agreement is partial:
#
# - *T5 over rotary and absolute: agrees.* Beyond $L$, T5 is ahead of RoPE on average over
#   three seeds, and both are far ahead of sinusoidal.
# - *NoPE: disagrees.* At this size and with 600 steps, NoPE does not even learn the task at
#   $L$ (0.777) and is the weakest model there. What it learns, it keeps comparatively
#   well: from $L$ to $8L$ it loses 0.143, less than RoPE (0.435) or T5 (0.290) in the
#   main run; but it never catches up. Their models are about a thousand times larger;
#   whether size is what NoPE lacks here, this chapter does not test.
# - *ALiBi: disagrees, and the task says why.* Here the answer is always $7$ places back, a
#   local rule, and ALiBi's recency penalty favours exactly that. Copying or reversing a
#   whole sequence, as in their suite, needs keys at distances that grow with the input,
#   which the same penalty suppresses.
#
# The lesson of the disagreement is the point of the chapter: "extrapolates" is a
# property of an encoding *and a task*. A local rule rewards ALiBi; a rule that reaches
# across the whole input does not; and learning a rule at all comes first.

# %% [markdown] lang="ja"
# ## 公表された結果との比較
#
# この章が手本にした 2 つの研究は、問いのほかはほとんどすべての点でこの章と異なります。
#
# | | Press ら (2022) | Kazemnejad ら (2023) | この章 |
# |---|---|---|---|
# | タスク | 言語モデリング（WikiText-103） | 推論と算術の合成タスク：コピー、反転、加算、ソート、SCAN、PCFG など | 上の周期的なコピー |
# | モデル | 実用規模の言語モデル | デコーダのみ、約 1 億パラメータ | 2 層、幅 64、101648 パラメータ |
# | 学習時の長さ | 512 と 1024 トークン | タスクごとに設定 | 32 トークン |
# | 指標 | パープレキシティ | 完全一致の正解率 | 次のトークンの正解率 |
# | エンコーディング | 正弦波、回転、T5 バイアス、ALiBi | NoPE、絶対位置、T5 バイアス、ALiBi、回転 | NoPE、正弦波、学習型、RoPE（+ PI、+ YaRN）、ALiBi、T5 |
#
# **Press ら (2022) の図 1。** WikiText-103 で $L = 512$ と $L = 1024$ トークンの入力で学習した言語モデルを、より長い入力で評価しています。
# 正弦波、回転、T5 バイアスのモデルは、入力が $L$ を超えて長くなるとパープレキシティが悪化し、ALiBi は悪化しません。
# この小さな設定は、どの曲線とも一致します。
# 正弦波はすぐに崩れます。RoPE は $L$ を少し越えるまで持ちこたえてから下がります（主な実行では $t = 48$ まで区間の値が 0.99 を上回ります）。
# T5 はゆっくり下がります。ALiBi は平らなままで、$8L$ では全体で最も良い値 (0.985) です。
#
# **Kazemnejad ら (2023)。** 彼らのタスクでは、NoPE は最も良い明示的なエンコーディングである T5 のバイアスと同等か、それ以上に長い入力へ汎化しました。
# ALiBi、回転、絶対位置のエンコーディングの汎化は不十分でした。
# ここでの一致は部分的です。
#
# - *T5 が回転や絶対位置より良い：一致します。* $L$ より先では、3 つのシードの平均で T5 が RoPE より上で、どちらも正弦波よりはるかに上です。
# - *NoPE：一致しません。* この大きさで 600 ステップの学習では、NoPE は $L$ でさえタスクを覚えきれず (0.777)、そこで最も弱いモデルです。
#   覚えた分は比較的よく保ちます。主な実行で $L$ から $8L$ までに失うのは 0.143 で、RoPE (0.435) や T5 (0.290) より小さいのです。
#   それでも追いつくことはありません。彼らのモデルは約 1000 倍の大きさです。ここで NoPE に欠けているのが大きさなのかどうかは、この章では確かめていません。
# - *ALiBi：一致しません。理由はタスクにあります。* ここでは答えは常に $7$ 個前にあり、局所的な規則です。ALiBi の近さを好むペナルティは、まさにそれを後押しします。
#   彼らのタスクにあるような系列全体のコピーや反転には、入力とともに遠くなる距離のキーが必要で、同じペナルティがそれを抑えてしまいます。
#
# この食い違いが教えることこそ、この章の要点です。「外挿できる」は、エンコーディング *とタスク* の組の性質です。
# 局所的な規則は ALiBi に有利に働き、入力全体にまたがる規則ではそうなりません。そしてまず、規則を覚えられることが先です。

# %%
assert mean["ALiBi", 8 * L] == max(mean[key] for key in mean if key[1] == 8 * L)
t, a = windows(acc["RoPE", 8 * L])
assert a[t < 48].min() > 0.99 and a[(t > 48) & (t < 56)].max() < 0.99
drop = {name: round(mean[name, L] - mean[name, 8 * L], 3) for name in ("NoPE", "RoPE", "T5")}
assert drop == {"NoPE": 0.143, "RoPE": 0.435, "T5": 0.29}
assert mean["NoPE", L] == min(mean[key] for key in mean if key[1] == L)
assert 900 < 100e6 / shared < 1100  # "about a thousand times larger"
assert all(mean["sinusoidal", N] < min(mean["RoPE", N], mean["T5", N]) - 0.2 for N in lengths[1:])
print(
    "accuracy lost from L to 8L: " + ", ".join(f"{name} {v:.3f}" for name, v in drop.items()),
    end="",
)

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Retrain every encoding from seeds 1 and 2 and extend the table with the mean and the
#    range of each entry. Which statements of "Reading the results" survive?
# 2. Fine-tune the RoPE model for 50 steps at $2L$ with `rope_scaling=LinearScaling(2.0)`
#    (`train` accepts it) and evaluate it at $2L$ with the same scaling. How much of
#    the accuracy lost to position interpolation does so little fine-tuning recover?
# 3. The sinusoidal model briefly recovers around $t \approx 200$. Find the training
#    position whose encoding is closest to $PE(t)$ for each $t$, in the dimensions that
#    matter most to the model, and explain the revival.
# 4. Change the task so that the answer lies far back: make the period $p = 24$ and train
#    at $L = 32$. Which encodings still extrapolate, and does ALiBi keep its lead?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. すべてのエンコーディングをシード 1 と 2 でも学習し直し、表の各欄に平均と範囲を加えてください。
#    「結果を読む」の記述のうち、どれが残るでしょうか。
# 2. RoPE のモデルを、$2L$ で `rope_scaling=LinearScaling(2.0)` を付けて 50 ステップだけ微調整し（`train` はこの引数を受け取ります）、
#    同じスケーリングで $2L$ で評価してください。
#    これほど少ない微調整で、位置補間で失われた正解率がどれだけ戻るでしょうか。
# 3. 正弦波のモデルは $t \approx 200$ のあたりで一時的に持ち直します。
#    各 $t$ について、モデルにとって最も重要な次元で $PE(t)$ に最も近いエンコーディングを持つ学習時の位置を探し、持ち直す理由を説明してください。
# 4. 答えが遠くにあるようにタスクを変えてください。周期を $p = 24$ にして $L = 32$ で学習します。
#    どのエンコーディングがまだ外挿できるでしょうか。ALiBi は首位を保つでしょうか。

# %% [markdown] lang="en"
# ## References
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022, Figure 1.
#   <https://arxiv.org/abs/2108.12409>
# - Kazemnejad, A., Padhi, I., Natesan Ramamurthy, K., Das, P., Reddy, S. (2023). *The
#   Impact of Positional Encoding on Length Generalization in Transformers*. NeurIPS
#   2023. <https://arxiv.org/abs/2305.19466>
# - Chen, S., Wong, S., Chen, L., Tian, Y. (2023). *Extending Context Window of Large
#   Language Models via Positional Interpolation*. <https://arxiv.org/abs/2306.15595>
# - Peng, B., Quesnelle, J., Fan, H., Shippole, E. (2023). *YaRN: Efficient Context Window
#   Extension of Large Language Models*. <https://arxiv.org/abs/2309.00071>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Raffel, C. et al. (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer* (T5). <https://arxiv.org/abs/1910.10683>
# - Vaswani, A. et al. (2017). *Attention Is All You Need*.
#   <https://arxiv.org/abs/1706.03762>

# %% [markdown] lang="ja"
# ## 参考文献
#
# - Press, O., Smith, N. A., Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022, 図 1.
#   <https://arxiv.org/abs/2108.12409>
# - Kazemnejad, A., Padhi, I., Natesan Ramamurthy, K., Das, P., Reddy, S. (2023). *The
#   Impact of Positional Encoding on Length Generalization in Transformers*. NeurIPS
#   2023. <https://arxiv.org/abs/2305.19466>
# - Chen, S., Wong, S., Chen, L., Tian, Y. (2023). *Extending Context Window of Large
#   Language Models via Positional Interpolation*. <https://arxiv.org/abs/2306.15595>
# - Peng, B., Quesnelle, J., Fan, H., Shippole, E. (2023). *YaRN: Efficient Context Window
#   Extension of Large Language Models*. <https://arxiv.org/abs/2309.00071>
# - Su, J. ら (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*. <https://arxiv.org/abs/2104.09864>
# - Raffel, C. ら (2020). *Exploring the Limits of Transfer Learning with a Unified
#   Text-to-Text Transformer*（T5）。<https://arxiv.org/abs/1910.10683>
# - Vaswani, A. ら (2017). *Attention Is All You Need*.
#   <https://arxiv.org/abs/1706.03762>
