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
# # Use posenc in your model
#
# A complete decoder of about a hundred lines: RoPE from `posenc` on the queries and
# keys, PyTorch's `scaled_dot_product_attention`, a [KV cache](../docs/glossary.md#kv-cache)
# for generation, and the same model with ALiBi through FlexAttention. After
# generation, the decoder is trained on a copy task, to see that with an encoding
# it learns a task that depends on position. Then what
# a training setup asks of an encoding: packed documents, meta-device
# construction, a Hugging Face config, and distributed data parallelism.

# %% [markdown] lang="ja"
# # posenc をモデルで使う
#
# 100 行ほどで書ける完全なデコーダを作ります。クエリとキーには `posenc` の RoPE をかけ、アテンションは PyTorch の `scaled_dot_product_attention` で計算し、生成には [KV キャッシュ](../docs/glossary.ja.md#kv-cache)を使います。
# 同じモデルを、FlexAttention で ALiBi を使う形にも書き換えます。
# 生成を確かめたあと、このデコーダをコピー課題で実際に学習させ、位置エンコーディングがあれば位置に依存する課題を学習できることを見ます。
# 続いて、実際の学習で位置エンコーディングに求められることを順に見ます。1 行に詰め込んだ文書（パッキング）、meta デバイスでの構築、Hugging Face の設定、分散データ並列です。

# %% tags=["setup"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from posenc import (
    CoPE,
    FireBias,
    KerpleBias,
    LearnedPositionalEmbedding,
    RelativePositionEmbedding,
    RotaryEmbedding,
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    alibi_bias,
    alibi_score_mod,
    attention_mask,
    attention_mask_mod,
)
from posenc_lab.plotting import INK, use_site_style  # the figures only

use_site_style()
_ = torch.manual_seed(0)

# %% [markdown] lang="en"
# ## A decoder with RoPE
#
# Each block is pre-norm: attention on the normalised input, added to the
# residual stream, then an MLP the same way. RoPE belongs between the projection
# and the attention. The block rotates the queries and keys of the *new* tokens
# at their positions, then appends the rotated keys to the cache. A cached key
# never needs rotating again, because its rotation depends on its own position
# only ([*Rotary position embedding (RoPE)*](08-rope.ipynb)).
#
# `RotaryEmbedding(head_dim, max_positions=n)` builds its cos/sin table once and
# only gathers rows in `forward`: no growth and no read back to the host during
# generation. Positions go in as a tensor, not derived from the length, so
# chunked prefill, decoding and packed documents share one code path.

# %% [markdown] lang="ja"
# ## RoPE を使うデコーダ
#
# 各ブロックは pre-norm です。正規化した入力にアテンションをかけて残差ストリームに足し、MLP も同じように足します。RoPE を入れる場所は射影とアテンションの間です。
# ブロックは**新しい**トークンのクエリとキーをその位置で回転させ、回転したキーをキャッシュに追加します。キーの回転はそのキー自身の位置だけで決まるので、キャッシュしたキーを回転し直す必要はありません（[「回転位置埋め込み（RoPE）」](08-rope.ipynb)の章）。
#
# `RotaryEmbedding(head_dim, max_positions=n)` は cos と sin の表を一度だけ作り、`forward` では行を集めるだけなので、生成の途中で表が伸びることも、ホストへ値を読み戻すこともありません。
# 位置は長さから求めずテンソルで渡すので、チャンクに分けたプリフィル、デコード、詰め込んだ文書が同じコードで動きます。

# %%
MAX_POSITIONS = 512


class KVCache:
    """Keys and values of every layer, and the positions of the keys."""

    def __init__(self, n_layers):
        self.k, self.v = [None] * n_layers, [None] * n_layers
        self.positions = torch.zeros(0, dtype=torch.long)

    def append(self, layer, k, v):
        if self.k[layer] is not None:
            k = torch.cat([self.k[layer], k], dim=-2)
            v = torch.cat([self.v[layer], v], dim=-2)
        self.k[layer], self.v[layer] = k, v
        return k, v


class Block(nn.Module):
    def __init__(self, d, n_heads, encoding):
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.norm2 = nn.RMSNorm(d)
        self.mlp = nn.Sequential(
            nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)
        )
        self.rope = None
        if encoding == "rope":
            head_dim = d // n_heads
            self.rope = RotaryEmbedding(head_dim, max_positions=MAX_POSITIONS)

    def forward(self, x, positions, attend, cache, layer):
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.n_heads, -1)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (b, heads, t, head_dim)
        if self.rope is not None:  # (t,) or (b, t) -> broadcast over heads
            q, k = self.rope(q, k, positions.unsqueeze(-2))
        if cache is not None:  # rotated keys go into the cache
            k, v = cache.append(layer, k, v)
        y = attend(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(y)
        return x + self.mlp(self.norm2(x))


# %% [markdown] lang="en"
# The model computes the mask once per call and hands every block the same
# `attend` function. With SDPA, the mask is `posenc.attention_mask` built from
# the query and key positions (and document ids, for packing below). ALiBi's bias
# is folded into the same additive mask. The output layer reuses the embedding
# matrix (tied weights).

# %% [markdown] lang="ja"
# モデルは呼び出しごとにマスクを一度だけ作り、すべてのブロックに同じ `attend` 関数を渡します。
# SDPA では、マスクはクエリとキーの位置（後で扱うパッキングでは文書 ID も）から `posenc.attention_mask` で作ります。
# ALiBi のバイアスは、同じ加算マスクに入れます。
# 出力層は埋め込み行列をそのまま使います（重みの共有）。


# %%
def block_mask(rule, q_pos, k_pos):
    """FlexAttention's block mask: one per batch row for batched positions."""
    b = q_pos.shape[0] if q_pos.dim() == 2 else None
    n_q, n_k = q_pos.shape[-1], k_pos.shape[-1]
    return create_block_mask(rule, b, None, n_q, n_k, device=q_pos.device)


class Decoder(nn.Module):
    def __init__(
        self, vocab=64, d=64, n_heads=4, n_layers=2, encoding="rope",
        backend="sdpa", window=None,
    ):  # fmt: skip
        super().__init__()
        self.n_heads, self.encoding = n_heads, encoding
        self.backend, self.window = backend, window
        self.embed = nn.Embedding(vocab, d)
        self.absolute = None  # an absolute encoding, for the packing check
        if encoding == "sinusoidal":
            self.absolute = SinusoidalEmbedding(MAX_POSITIONS, d)
        self.blocks = nn.ModuleList(
            Block(d, n_heads, encoding) for _ in range(n_layers)
        )
        self.norm = nn.RMSNorm(d)

    def attend_fn(self, q_pos, k_pos, q_doc, k_doc):
        where = dict(q_positions=q_pos, k_positions=k_pos)
        docs = dict(q_document_ids=q_doc, k_document_ids=k_doc)
        if self.backend == "flex":  # ALiBi without a (heads, q, k) tensor
            rule = attention_mask_mod(**where, **docs, window=self.window)
            blocks = block_mask(rule, q_pos, k_pos)
            bias = alibi_score_mod(self.n_heads, **where)
            return lambda q, k, v: flex_attention(
                q, k, v, score_mod=bias, block_mask=blocks
            )
        bias = None
        if self.encoding == "alibi":
            bias = alibi_bias(self.n_heads, **where)
        mask = attention_mask(**where, **docs, window=self.window, bias=bias)
        return lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask
        )

    def forward(self, tokens, positions, cache=None, document_ids=None):
        k_positions = positions
        if cache is not None:  # the keys: everything cached, then the new
            k_positions = torch.cat([cache.positions, positions], dim=-1)
            cache.positions = k_positions
        k_docs = document_ids  # packing is for training: no cache then
        attend = self.attend_fn(positions, k_positions, document_ids, k_docs)
        x = self.embed(tokens)
        if self.absolute is not None:
            x = x + self.absolute(positions)
        for layer, block in enumerate(self.blocks):
            x = block(x, positions, attend, cache, layer)
        return F.linear(self.norm(x), self.embed.weight)  # tied head


# %% [markdown] lang="en"
# ## Generation with a KV cache
#
# Generation starts with a [prefill](../docs/glossary.md#prefill): the whole
# prompt at positions $0, \dots, P-1$. Each [decode step](../docs/glossary.md#decode-step)
# then feeds one token at position $t$, the number of tokens so far. Its query
# attends to the $t + 1$ cached keys. The model is untrained, so the tokens
# themselves mean nothing. What matters is that the cache gives, at every step,
# the logits of a full recomputation.

# %% [markdown] lang="ja"
# ## KV キャッシュを使う生成
#
# 生成は[プリフィル](../docs/glossary.ja.md#prefill)から始まり、プロンプト全体を位置 $0, \dots, P-1$ で処理します。
# その後は[デコードの 1 ステップ](../docs/glossary.ja.md#decode-step)ごとに、それまでのトークン数 $t$ を位置として、トークンを 1 つ入力します。そのクエリは、キャッシュにある $t + 1$ 個のキーにアテンションを向けます。
# モデルは学習していないので、生成されるトークンに意味はありません。大事なのは、キャッシュを使ったロジットが、どのステップでもすべてを計算し直したロジットと一致することです。


# %%
@torch.no_grad()
def generate(model, prompt, n_new):
    """Greedy decoding: prefill the prompt, then one token per step."""
    cache = KVCache(len(model.blocks))
    logits = model(prompt, torch.arange(prompt.shape[1]), cache)
    tokens = prompt
    for _ in range(n_new):
        new = logits[:, -1:].argmax(-1)
        position = torch.tensor([tokens.shape[1]])  # explicit, from 0
        tokens = torch.cat([tokens, new], dim=1)
        logits = model(new, position, cache)
    return tokens


model = Decoder().eval()
prompt = torch.randint(64, (2, 6))  # two prompts of 6 tokens
tokens = generate(model, prompt, 10)
print(tokens.shape)  # 6 prompt tokens and 10 new ones per row


# %% tags=["check"] summary={"en": "at every decode step the cache gives the logits of one pass over the whole sequence, and greedy decoding picks their largest", "ja": "デコードのどのステップでも、キャッシュを使ったロジットは系列全体を一度に処理したときのロジットと一致し、貪欲デコードはその最大のものを選びます"}
from torch.testing import assert_close


@torch.no_grad()
def step_logits(model, tokens, n_prompt):
    """The logits of every decode step, with the cache, on given tokens."""
    cache = KVCache(len(model.blocks))
    prefix = tokens[:, :n_prompt]
    logits = [model(prefix, torch.arange(n_prompt), cache)[:, -1]]
    for t in range(n_prompt, tokens.shape[1] - 1):
        step = model(tokens[:, t : t + 1], torch.tensor([t]), cache)
        logits.append(step[:, -1])
    return torch.stack(logits, dim=1)


@torch.no_grad()
def full_logits(model, tokens, n_prompt):
    """The same logits from one pass: the causal mask hides later tokens."""
    n = tokens.shape[1] - 1
    return model(tokens[:, :-1], torch.arange(n))[:, n_prompt - 1 :]


full = full_logits(model, tokens, 6)
assert_close(step_logits(model, tokens, 6), full)
assert torch.equal(tokens[:, 6:], full.argmax(-1))

# %% [markdown] lang="en"
# ## Training on a task that needs positions
#
# Now train the decoder. The task is a [copy task](../docs/glossary.md#copy-task): eight random tokens, a separator 0,
# then the same eight again. Each copied token sits nine positions after its
# original, so the model must find the token nine positions before the one it predicts. Both runs below take 300 steps of
# AdamW on the copied half: one with RoPE, one with no positional encoding
# (`encoding="none"`), which can infer positions only through the causal mask, a
# slower route ([*xPos and NoPE*](10-xpos-nope.ipynb)). The loss starts
# high, most likely because the tied output layer reuses unit-variance embeddings.
#
# With RoPE the loss falls below 0.1. The spikes near the end are most likely the large
# constant learning rate (1e-2) at work, not forgetting: greedy decoding copies almost
# every token of new prompts.
# Without positions it is still near the [chance level](../docs/glossary.md#chance-level)
# $\ln 63 \approx 4.1$ after these 300 steps, and falling only slowly. Wired in as above, the encoding lets
# the model learn a task that depends on position.

# %% [markdown] lang="ja"
# ## 位置が必要な課題で学習する
#
# ここでデコーダを学習させます。課題は[コピー課題](../docs/glossary.ja.md#copy-task)です。ランダムな 8 トークン、区切りの 0、そして同じ 8 トークンを並べます。コピーした各トークンは元のトークンの 9 つ後ろの位置にあるので、モデルは予測するトークンの 9 つ前のトークンを見つける必要があります。
# 下では、RoPE を使うモデルと位置エンコーディングを使わないモデル（`encoding="none"`）を、コピーする後半のトークンの損失について、どちらも AdamW で 300 ステップ学習させます。後者は因果マスクを通してしか位置を推測できず、その学習はずっと遅くなります（[「xPos と NoPE」](10-xpos-nope.ipynb)の章）。
# 損失が高いところから始まるのは、出力層が分散 1 の埋め込み行列を共有しているためと考えられます。
#
# RoPE を使うと損失は 0.1 未満まで下がります。終盤に損失がところどころ跳ね上がるのは、おそらく大きな学習率（1e-2）を一定のまま使っているためで、学習した内容を忘れたわけではありません。実際、貪欲デコードでは新しいプロンプトのトークンをほぼすべてコピーできます。位置を使わないモデルの損失は、300 ステップのあとも[チャンスレベル](../docs/glossary.ja.md#chance-level)の $\ln 63 \approx 4.1$ の近くにあり、ゆっくりとしか下がりません。
# 上のように組み込んだ位置エンコーディングがあれば、モデルは位置に依存する課題を学習できます。


# %% tags=["nbval-ignore-output"]
def copy_task(n_rows, generator, n=8):
    """n random tokens from 1..63, the separator 0, the same n tokens."""
    x = torch.randint(1, 64, (n_rows, n), generator=generator)
    return torch.cat([x, torch.zeros(n_rows, 1, dtype=torch.long), x], 1)


def train(encoding, steps=300):
    _ = torch.manual_seed(0)
    net = Decoder(encoding=encoding)
    data = torch.Generator().manual_seed(0)  # the same batches for both
    optimiser = torch.optim.AdamW(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        seq = copy_task(64, data)
        logits = net(seq[:, :-1], torch.arange(16))[:, 8:]  # the copied half
        loss = F.cross_entropy(logits.flatten(0, 1), seq[:, 9:].flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return net.eval(), torch.tensor(losses)


trained, rope_losses = train("rope")
_, nope_losses = train("none")
for name, losses in (("RoPE", rope_losses), ("none", nope_losses)):
    print(f"{name}: step 1 {losses[0]:.1f}, last 20 {losses[-20:].mean():.2f}")

# %% tags=["figure"] alt={"en": ["Training loss of the copy task against the step, 1 to 300, on a log axis. With RoPE it falls from about 59 through the chance level ln 63 ≈ 4.1 (dashed) to below 0.1. Without positions it drops to the chance level within a few dozen steps and is still near it at step 300."], "ja": ["コピー課題の学習中の損失を、ステップ（1〜300）に対して対数軸で描いた図。RoPE を使うと約 59 から下がり、チャンスレベル ln 63 ≈ 4.1（破線）を通って 0.1 未満になります。位置を使わないと数十ステップでチャンスレベルまで下がり、300 ステップ目でもその近くにあります。"]}
fig, ax = plt.subplots(figsize=(6.4, 2.4))
steps = torch.arange(1, 301)
ax.plot(steps, rope_losses, label="RoPE", lw=1.3)
ax.plot(steps, nope_losses, label="none", lw=1.3)
ax.axhline(math.log(63), color=INK, lw=0.8, ls="--")
ax.set(yscale="log", xlabel="step", ylabel="loss", xlim=(1, 300))
ax.legend(fontsize=8)
plt.show()

# %% tags=["check"] summary={"en": "with RoPE the loss of the last 20 steps is below 0.1 and greedy decoding copies at least 95% of the tokens of 64 new prompts; without positions it is still above half the chance level and over ten times RoPE's; both start between 40 and 80", "ja": "RoPE を使うと最後の 20 ステップの損失は 0.1 未満で、貪欲デコードは新しい 64 個のプロンプトのトークンの 95% 以上を正しくコピーします。位置を使わないと損失は最後もチャンスレベルの半分より上で、RoPE の 10 倍を超えます。損失はどちらも 40〜80 の値から始まります"}
chance = math.log(63)
assert rope_losses[-20:].mean() < 0.1  # the figure's "below 0.1"
assert nope_losses[-20:].mean() > 0.5 * chance
assert nope_losses[-20:].mean() > 10 * rope_losses[-20:].mean()
for losses in (rope_losses, nope_losses):
    assert 40 < losses[0] < 80
fresh = copy_task(64, torch.Generator().manual_seed(1))
copied = generate(trained, fresh[:, :9], 8)[:, 9:]
assert (copied == fresh[:, 9:]).float().mean() >= 0.95

# %% [markdown] lang="en"
# ## Chunked prefill and the causal mask
#
# A long prompt is often prefilled in chunks: the second chunk's queries see
# the keys of their own chunk and every cached key before them. The [causal mask](../docs/glossary.md#causal-mask)
# must then be aligned to the *end* of the keys: query $i$ of $n_q$ sits at
# position $i + n_k - n_q$. SDPA's `is_causal=True` aligns it to the *top left*
# instead, so the first query of the chunk would see only the first key of the
# sequence. `attention_mask(n_q, n_k)` gives the end-aligned mask; with positions,
# as in the model, it compares positions and cannot misalign. For a plain chunk
# (no positions, no documents), PyTorch's own end-aligned causal mask is
# `torch.nn.attention.bias.causal_lower_right(n_q, n_k)`: an object SDPA
# interprets rather than a tensor, so on a GPU it can run on the fused kernels.

# %% [markdown] lang="ja"
# ## チャンクに分けたプリフィルと因果マスク
#
# 長いプロンプトは、チャンクに分けてプリフィルすることがよくあります。2 つ目のチャンクのクエリは、同じチャンクのキーと、その前にキャッシュされたすべてのキーを見ます。
# このとき[因果マスク](../docs/glossary.ja.md#causal-mask)は、キーの**末尾**にそろえなければなりません。$n_q$ 個のクエリのうち $i$ 番目のものは、位置 $i + n_k - n_q$ にあります。
# SDPA の `is_causal=True` はマスクを**左上**にそろえるので、チャンクの最初のクエリは系列の最初のキーしか見られなくなります。
# `attention_mask(n_q, n_k)` は末尾にそろえたマスクを返します。モデルのように位置を渡せば、マスクは位置どうしを比べて作るので、ずれようがありません。
# 位置や文書 ID が要らない単純なチャンクなら、PyTorch の `torch.nn.attention.bias.causal_lower_right(n_q, n_k)` も末尾にそろえた因果マスクです。テンソルではなく SDPA が解釈するオブジェクトなので、GPU では融合カーネルで計算できます。

# %%
print(attention_mask(2, 6, dtype=torch.bool).int())  # posenc: end-aligned
print(torch.ones(2, 6, dtype=torch.bool).tril().int())  # is_causal=True

# %% tags=["check"] summary={"en": "prefilling in two chunks gives the logits of one prefill; causal_lower_right gives attention_mask's result, is_causal a wrong one for the second chunk", "ja": "2 つのチャンクに分けたプリフィルは一度のプリフィルと同じロジットを出します。causal_lower_right は attention_mask と同じ結果を出し、is_causal では 2 つ目のチャンクのアテンションが誤ります"}
from torch.nn.attention.bias import causal_lower_right

with torch.no_grad():
    whole = model(tokens, torch.arange(16))
    cache = KVCache(len(model.blocks))
    first = model(tokens[:, :10], torch.arange(10), cache)
    second = model(tokens[:, 10:], torch.arange(10, 16), cache)
assert_close(torch.cat([first, second], dim=1), whole)

q = torch.randn(1, 4, 6, 16)  # 6 queries and keys; the chunk: the last 2
k, v = torch.randn(2, 1, 4, 6, 16)
one_pass = F.scaled_dot_product_attention(q, k, v, is_causal=True)
chunk = q[..., -2:, :]
right = F.scaled_dot_product_attention(
    chunk, k, v, attn_mask=attention_mask(2, 6, dtype=torch.bool)
)
top_left = F.scaled_dot_product_attention(chunk, k, v, is_causal=True)
lower_right = F.scaled_dot_product_attention(
    chunk, k, v, attn_mask=causal_lower_right(2, 6)
)
assert_close(right, one_pass[..., -2:, :])
assert_close(lower_right, right)
assert not torch.allclose(top_left, one_pass[..., -2:, :])

# %% [markdown] lang="en"
# ## ALiBi through FlexAttention
#
# ALiBi adds $-m_h (p_q - p_k)$ to every score of head $h$
# ([*ALiBi: attention with linear biases*](07-alibi.ipynb)). With SDPA that bias is
# a tensor of shape (heads, queries, keys), folded into the additive mask: its
# memory grows with the square of the length, and on a GPU any `attn_mask` keeps
# SDPA off its FlashAttention kernel. FlexAttention instead calls a `score_mod` on
# each score: `alibi_score_mod(n_heads, q_positions=..., k_positions=...)` returns
# one that reads the query's and the key's positions and adds the bias. No bias
# tensor is built. The mask becomes a block mask from `attention_mask_mod`, the
# same rule as `attention_mask`. FlexAttention sorts the blocks of the score
# matrix once into those to skip, those fully visible and those to mask, and its
# compiled kernel relies on that sorting. With batched positions, give
# `create_block_mask` the batch size, as `block_mask` above does; without it,
# every row gets the first row's blocks.

# %% [markdown] lang="ja"
# ## FlexAttention で使う ALiBi
#
# ALiBi はヘッド $h$ のすべてのスコアに $-m_h (p_q - p_k)$ を足します（[「ALiBi：線形バイアスによるアテンション」](07-alibi.ipynb)の章）。
# SDPA では、このバイアスを形状 `(heads, queries, keys)` のテンソルにして、加算マスクに入れます。そのメモリは長さの 2 乗で増え、GPU では `attn_mask` を渡すだけで SDPA は FlashAttention のカーネルを使えなくなります。
# FlexAttention は代わりに各スコアに対して `score_mod` を呼びます。`alibi_score_mod(n_heads, q_positions=..., k_positions=...)` が返す関数は、スコアごとにクエリとキーの位置を読み出してバイアスを足すので、バイアスのテンソルは作りません。
# マスクは、`attention_mask` と同じ規則の `attention_mask_mod` から作るブロックマスクになります。
# FlexAttention はスコアの行列のブロックを、飛ばすもの、すべての成分が見えるもの、マスクをかけるものに一度だけ分け、コンパイルしたカーネルはこの分類に従います。
# 位置にバッチの軸があるときは、上の `block_mask` のように `create_block_mask` にバッチサイズを渡します。渡さないと、どの行にも最初の行の分類が使われます。

# %%
warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
_ = torch.manual_seed(1)
alibi_sdpa = Decoder(encoding="alibi").eval()
_ = torch.manual_seed(1)  # the same weights
alibi_flex = Decoder(encoding="alibi", backend="flex").eval()

# one score of head 0: the query at position 5, the key at 2
bias = alibi_score_mod(
    4, q_positions=torch.arange(6), k_positions=torch.arange(6)
)
score, batch, head = torch.tensor(0.0), torch.tensor(0), torch.tensor(0)
print(bias(score, batch, head, torch.tensor(5), torch.tensor(2)))  # -m_0 * 3

# %% tags=["check"] summary={"en": "FlexAttention with alibi_score_mod gives the logits of SDPA with alibi_bias in the mask, with its cache too, at every decode step; the score above is -3/4 (m_0 = 1/4 for four heads)", "ja": "alibi_score_mod を使う FlexAttention は、alibi_bias をマスクに入れた SDPA と同じロジットを出します。キャッシュを使うデコードのどのステップでも同じです。上のスコアは -3/4 です（4 ヘッドでは m_0 = 1/4）"}
with torch.no_grad():
    positions = torch.arange(tokens.shape[1])
    assert_close(alibi_flex(tokens, positions), alibi_sdpa(tokens, positions))
flex_tokens = generate(alibi_flex, prompt, 6)
full = full_logits(alibi_sdpa, flex_tokens, 6)
assert_close(step_logits(alibi_flex, flex_tokens, 6), full)
assert torch.equal(flex_tokens[:, 6:], full.argmax(-1))
assert bias(score, batch, head, torch.tensor(5), torch.tensor(2)) == -0.75

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: compiled and eager FlexAttention.** `torch.compile` turns
# `flex_attention` into one fused kernel; this page runs it eagerly on the CPU,
# which [materialises](../docs/glossary.md#materialise) the score matrix (same
# result; the warning is silenced above).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：コンパイルした FlexAttention と eager モードの FlexAttention**
#
# `torch.compile` で包んだ `flex_attention` は 1 つの融合カーネルになります。このページは CPU の eager モードで実行するので、スコアの行列を丸ごと[実体化](../docs/glossary.ja.md#materialise)します（結果は同じで、コンパイルしていないという警告は上のセルで止めています）。

# %% [markdown] lang="en"
# ## Packed sequences
#
# Training often packs several documents into one row to avoid padding. Give
# each token its document's id: `attention_mask` then lets query $i$ see key $j$
# only when both share an id and $p_j \le p_i$. For RoPE and ALiBi that mask is
# enough, because they read only differences of positions, the same within a
# document wherever it starts: the packed row gives each document's logits as if
# it were run alone, to rounding, whether the positions restart at 0 in each
# document or run on across the row. Restarting them matters wherever an absolute
# position counts: an absolute encoding (sinusoidal embeddings added to the input,
# below), FIRE for queries beyond its threshold, RoPE scalings that depend on the
# length, and the `max_positions` bound of the RoPE table. Restarting is the safe
# default.

# %% [markdown] lang="ja"
# ## 詰め込んだ系列（パッキング）
#
# 学習では、パディングを避けるために複数の文書を 1 行に詰め込む（パッキングする）ことがよくあります。各トークンに文書の ID を与えると、`attention_mask` はクエリ $i$ がキー $j$ を見るのを、文書 ID が同じで、かつ $p_j \le p_i$ のときに限ります。
# RoPE と ALiBi にはこのマスクだけで足ります。どちらも位置の差しか使わず、文書の中での位置の差は文書が行のどこから始まっても同じだからです。位置を文書ごとに 0 から数え直しても、行の先頭から通しで数えても、各文書のロジットは単独で処理したときと丸め誤差の範囲で一致します。
# 数え直しが必要なのは、絶対的な位置が効くところです。絶対位置のエンコーディング（下では入力に足す正弦波の埋め込み）、しきい値を超えたクエリでの FIRE、長さによって変わる RoPE のスケーリング、RoPE の表の上限 `max_positions` がそうです。
# 迷ったら、文書ごとに数え直しておくのが安全です。

# %%
documents = [torch.randint(64, (1, 7)), torch.randint(64, (1, 5))]
row = torch.cat(documents, dim=1)  # one row of 12 tokens
positions = torch.cat([torch.arange(7), torch.arange(5)])
document_ids = torch.tensor([0] * 7 + [1] * 5)
print(positions.tolist(), document_ids.tolist())

# %% tags=["check"] summary={"en": "the packed row gives each document's logits alone, to rounding, with RoPE and SDPA, ALiBi and SDPA, and ALiBi and FlexAttention, with restarted positions or with arange(12); with sinusoidal embeddings only the restarted positions do; for two packed rows whose blocks differ, the block mask holds each row's own blocks, as built for the row alone (with B=None both rows would get the first row's)", "ja": "RoPE と SDPA、ALiBi と SDPA、ALiBi と FlexAttention のどれでも、詰め込んだ行の各文書のロジットは、位置を数え直しても arange(12) のままでも、単独で処理したときと丸め誤差の範囲で一致します。正弦波の埋め込みで一致するのは数え直したときだけです。分類の違う 2 行のブロックマスクは各行自身の分類を持ちます（B=None ならどちらも最初の行の分類）"}
absolute = Decoder(encoding="sinusoidal").eval()
run_on = torch.arange(12)  # not restarted: 7..11 for the second document
for m in (model, alibi_sdpa, alibi_flex, absolute):
    with torch.no_grad():
        packed = m(row, positions, document_ids=document_ids)
        unrestarted = m(row, run_on, document_ids=document_ids)
        alone = [m(doc, torch.arange(doc.shape[1])) for doc in documents]
    alone = torch.cat(alone, dim=1)
    assert_close(packed, alone)
    if m is absolute:  # the second document's embeddings change
        assert (unrestarted[:, 7:] - alone[:, 7:]).abs().max() > 0.1
    else:  # relative: the document mask alone suffices
        assert_close(unrestarted, alone)


def packed_rule(pos, ids):
    where = dict(q_positions=pos, k_positions=pos)
    return attention_mask_mod(**where, q_document_ids=ids, k_document_ids=ids)


# row 0: one document of 256 tokens; row 1: two of 128 (blocks of 128)
pos = torch.stack([torch.arange(256), torch.arange(256) % 128])
ids = torch.stack(
    [torch.zeros(256, dtype=torch.long), torch.arange(256) // 128]
)
blocks = block_mask(packed_rule(pos, ids), pos, pos)
full_blocks = blocks.full_kv_num_blocks  # fully visible blocks per query block
assert not torch.equal(full_blocks[0], full_blocks[1])  # the rows differ
parts = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")
for r in range(2):
    alone = block_mask(packed_rule(pos[r], ids[r]), pos[r], pos[r])
    for part in parts:
        assert torch.equal(getattr(blocks, part)[r], getattr(alone, part)[0])
# B=None: one mask for every row, built from row 0, where query block 1 sees
# key block 0 in full; in row 1 that block is the other document (a leak)
shared = create_block_mask(packed_rule(pos, ids), None, None, 256, 256)
assert shared.full_kv_num_blocks.shape[0] == 1
shared_full = shared.full_kv_num_blocks[0, 0].tolist()
assert shared_full == [0, 1] == full_blocks[0, 0].tolist()  # row 0's
assert full_blocks[1, 0].tolist() == [0, 0]  # row 1 alone: block 0 hidden
assert blocks.kv_num_blocks[1, 0].tolist() == [1, 1]

# %% [markdown] lang="en"
# ## Meta-device construction
#
# Large models are built on the meta device (shapes, no memory) and moved with
# `to_empty`, which leaves the memory uninitialised. Who initialises it depends on
# the wrapper. FSDP1 (`FullyShardedDataParallel` without a `param_init_fn`) does
# it itself: breadth first, on each module that holds parameters or buffers of
# its own, it calls `to_empty` on that module alone, then `reset_parameters()`,
# which is expected to initialise that module's own state and nothing else. FSDP2
# (`fully_shard`) calls nothing, and neither does a model without FSDP: after
# `to_empty` you initialise, for example by calling `reset_parameters()` on every
# module, as below.
#
# Every `posenc` module has `reset_parameters()`, and each learned table
# initialises itself. The table of `T5RelativeBias` is a child embedding whose own
# `reset_parameters` draws it from $\mathcal{N}(0, 0.02^2)$, so both routes give
# it the spread of construction, `posenc`'s choice (Hugging Face's T5 draws with
# another standard deviation).

# %% [markdown] lang="ja"
# ## meta デバイスでの構築
#
# 大きなモデルは meta デバイス（形状だけでメモリを持たない）で作り、`to_empty` で実際のデバイスに移しますが、移した直後のメモリは初期化されていません。初期化の担い手はラッパごとに違います。
# FSDP1（`param_init_fn` を渡さない `FullyShardedDataParallel`）は初期化まで自分で行います。モジュールを幅優先でたどり、直下にパラメータかバッファを持つモジュールごとに、そのモジュールだけを `to_empty` で移して `reset_parameters()` を呼びます。この `reset_parameters()` は、そのモジュール自身の状態だけを初期化するものとされています。
# FSDP2（`fully_shard`）を使う場合も、FSDP を使わない場合も、何も呼ばれません。`to_empty` の後に、たとえば下のようにすべてのモジュールの `reset_parameters()` を呼んで、自分で初期化します。
#
# `posenc` のモジュールはすべて `reset_parameters()` を持ち、学習可能な表はそれぞれ自分で初期化します。
# `T5RelativeBias` の表は子モジュールの埋め込みで、その `reset_parameters` が表の値を $\mathcal{N}(0, 0.02^2)$ から引き直します。そのため、どちらの手順でも、コンストラクタで作ったときと同じばらつきになります（この値は `posenc` の選択で、Hugging Face の T5 は別の標準偏差を使います）。


# %%
def reset_every_module(model):
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()


_ = torch.manual_seed(0)
with torch.device("meta"):
    deferred = Decoder()
deferred.to_empty(device="cpu")
reset_every_module(deferred)
print(deferred.blocks[0].rope.rot_cached.device)


# %% tags=["check"] summary={"en": "the decoder built on the meta device and reset equals the one built the usual way, bit for bit (parameters and RoPE tables); a T5RelativeBias table comes out of the loop and of FSDP1's order with a spread of about 0.02 (nn.Embedding's default would give 1); after FSDP1's order the RoPE table stays on meta and the decoder still gives the usual logits", "ja": "meta デバイスで作ってリセットしたデコーダは、通常の構築とパラメータも RoPE の表もビット単位で一致します。T5RelativeBias の表はループでも FSDP1 の順序でも標準偏差は約 0.02 です（nn.Embedding の既定なら 1）。FSDP1 の順序では RoPE の表は meta に残りますが、ロジットは通常どおりです"}
def fsdp1_materialise(model):
    """FSDP1 without param_init_fn (torch 2.13, _materialize_meta_module)."""
    queue = [model]
    for module in queue:  # the list grows while it is read: breadth first
        queue.extend(module.children())
        own = [
            *module.parameters(recurse=False),
            *module.buffers(recurse=False),
        ]
        if own:
            module.to_empty(device="cpu", recurse=False)
            module.reset_parameters()


_ = torch.manual_seed(0)
eager = Decoder()
eager_state, deferred_state = eager.state_dict(), deferred.state_dict()
assert eager_state.keys() == deferred_state.keys()
for name, tensor in eager_state.items():
    assert torch.equal(tensor, deferred_state[name]), name
for a, b in zip(eager.blocks, deferred.blocks, strict=True):
    assert torch.equal(a.rope.rot_cached, b.rope.rot_cached)

for recipe in (reset_every_module, fsdp1_materialise):
    with torch.device("meta"):
        layer = nn.Sequential(nn.Linear(64, 64), T5RelativeBias(4))
    if recipe is reset_every_module:
        layer.to_empty(device="cpu")
    recipe(layer)
    table = layer[1].relative_attention_bias.weight.detach()
    assert 0.015 < table.std() < 0.025 and table.mean().abs() < 0.006

with torch.device("meta"):
    sharded = Decoder().eval()
fsdp1_materialise(sharded)
assert sharded.blocks[0].rope.rot_cached.is_meta  # no parameters of its own
sharded.load_state_dict(eager_state)
with torch.no_grad():
    positions = torch.arange(tokens.shape[1])
    assert torch.equal(
        sharded(tokens, positions), eager.eval()(tokens, positions)
    )

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: when the reset reproduces the usual build, and RoPE's table.**
# The loop matches bit for bit because each parameter is drawn once, in the
# order the constructor creates it; the tied output layer draws nothing of its
# own. Your own modules keep this if each draws in `reset_parameters` what its
# constructor draws. FSDP1 draws breadth first, which is not the constructor's
# order, and a module whose `reset_parameters` also resets its children
# (`T5RelativeBias` does, so that it can be reset alone) has them drawn twice by
# the loop: the same distributions, other numbers.
#
# `RotaryEmbedding` has no parameters: `to_empty` rebuilds its cos/sin table,
# and where FSDP1 leaves the table on the meta device, the forward rebuilds it
# on the input's device (under `torch.compile`, it computes cos and sin from the
# positions instead).

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：リセットが通常の構築を再現する条件と RoPE の表**
#
# ループがビット単位で一致するのは、各パラメータの初期値を、コンストラクタが作る順に一度ずつ乱数で引くからです。重みを共有する出力層は、自分では乱数を引きません。
# 自分で書くモジュールも、コンストラクタが引く乱数を `reset_parameters` の中で同じように引けば、この性質を保てます。
# FSDP1 は幅優先で引くので、順番がコンストラクタと変わります。また、子モジュールまで初期化し直す `reset_parameters` を持つモジュール（単独でも初期化できるようにしている `T5RelativeBias` など）では、ループがその子モジュールの値を 2 回引きます。分布は同じですが、値は変わります。
#
# パラメータを持たない `RotaryEmbedding` の cos と sin の表は `to_empty` が作り直します。FSDP1 が表を meta デバイスに残したときは、`forward` が入力のあるデバイスで作り直します（`torch.compile` の下では、代わりに位置から cos と sin を計算します）。

# %% [markdown] lang="en"
# ## A Hugging Face config
#
# To match a released model's RoPE, read its settings from its config rather than
# copying numbers. `RotaryEmbedding.from_hf_config` takes a config object or the
# plain dict of a `config.json`; nothing is downloaded. Below is the part of Llama
# 3.1 8B's config that RoPE reads, written out by hand. The module rotates
# $128 = 4096 / 32$ features per head with Llama 3's frequency scaling.

# %% [markdown] lang="ja"
# ## Hugging Face の設定
#
# 公開されたモデルの RoPE に合わせるときは、数値を書き写さず、そのモデルの設定から読みます。`RotaryEmbedding.from_hf_config` は、設定オブジェクトか `config.json` をそのまま読んだ辞書を受け取り、何もダウンロードしません。
# 下のセルには、Llama 3.1 8B の設定のうち RoPE が読む部分を手で書いています。このモジュールはヘッドあたり $128 = 4096 / 32$ 次元を回転させ、Llama 3 の周波数のスケーリングを使います。

# %%
llama_3_1 = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
rope = RotaryEmbedding.from_hf_config(llama_3_1, max_positions=8192)
print(rope)

# %% tags=["check"] summary={"en": "the frequencies are Llama 3's: the fastest unchanged, the slowest divided by 8, the six in the smooth band (wavelengths between 8192/4 and 8192) equal to Hugging Face's (pasted from transformers), and all as the hand-built scaling gives; with 8 query heads and 2 key heads, enable_gqa gives the attention of repeated keys and values", "ja": "周波数は Llama 3 のもので、最も速いものはそのまま、最も遅いものは 8 で割られます。すべて手で作ったスケーリングと一致し、波長が 8192/4〜8192 の 6 つは Hugging Face の値（transformers の出力を貼り付けたもの）とも一致します。クエリ 8 ヘッド、キー 2 ヘッドの enable_gqa は、キーとバリューを繰り返した場合と同じアテンションです"}
from posenc import Llama3Scaling, rope_frequencies

scaling = Llama3Scaling(8.0, 1.0, 4.0, 8192)
by_hand = rope_frequencies(128, base=500000.0, scaling=scaling)
assert rope.dim == 128 and rope.layout == "half"
assert torch.equal(rope.inv_freq, by_hand)
plain = rope_frequencies(128, base=500000.0)
assert rope.inv_freq[0] == plain[0] == 1.0
assert_close(rope.inv_freq[-1], plain[-1] / 8)

# the smooth band (wavelengths between 8192 / 4 and 8192): transformers 5.24.0,
# _compute_llama3_parameters for this config, inv_freq[29:35]
hugging_face = [
    0.0021665706299245358, 0.0013718936825171113, 0.0008567514596506953,
    0.0005248460220173001, 0.0003126936499029398, 0.0001785077911335975,
]  # fmt: skip
wavelength = 2 * torch.pi / plain
band = (wavelength > 8192 / 4) & (wavelength < 8192)
assert band.nonzero().flatten().tolist() == list(range(29, 35))
assert torch.equal(rope.inv_freq[band], torch.tensor(hugging_face))

q = torch.randn(1, 8, 5, 128)  # 8 query heads
k, v = torch.randn(2, 1, 2, 5, 128)  # 2 heads of keys and values
rq, rk = rope(q, k, torch.arange(5))
grouped = F.scaled_dot_product_attention(
    rq, rk, v, is_causal=True, enable_gqa=True
)
rk, v = rk.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)
assert_close(grouped, F.scaled_dot_product_attention(rq, rk, v, is_causal=True))

# %% [markdown] lang="en" tags=["deeper"]
# **Going deeper: grouped-query attention.** The config's `num_key_value_heads`
# (8 for 32 query heads) asks for
# [grouped-query attention](../docs/glossary.md#grouped-query-attention). The
# module rotates queries and keys with different head counts alike, and
# `scaled_dot_product_attention(..., enable_gqa=True)` lets each group of query
# heads share one head of keys and values.

# %% [markdown] lang="ja" tags=["deeper"]
# **さらに詳しく：グループ化クエリアテンション**
#
# 設定の `num_key_value_heads`（クエリの 32 ヘッドに対して 8）は、[グループ化クエリアテンション](../docs/glossary.ja.md#grouped-query-attention)を使うという意味です。
# このモジュールは、ヘッド数の違うクエリとキーを同じように回転させます。`scaled_dot_product_attention(..., enable_gqa=True)` を使えば、クエリのヘッドのグループごとに、キーとバリューのヘッドを 1 つずつ共有させられます。

# %% [markdown] lang="en"
# ## Distributed training
#
# No DDP run here, only what to know. `DistributedDataParallel` broadcasts every
# *buffer* from rank 0 at each step (`forward_sync_buffers`, on by default), and
# averages the gradients of the *parameters*.
#
# - `RotaryEmbedding` keeps its table in plain tensor attributes, not buffers, and
#   its `state_dict` is empty. DDP never broadcasts the table, so ranks that see
#   different sequence lengths can each grow their own (without `max_positions`),
#   and a checkpoint holds no
#   table; so does `SinusoidalPositionalEncoding`. This page's
#   `SinusoidalEmbedding` keeps its table as a non-persistent buffer: DDP
#   broadcasts it harmlessly and the `state_dict` leaves it out.
# - ALiBi's slopes and masks are computed from the settings and positions on each
#   rank: nothing to synchronise.
# - Learned encodings (`T5RelativeBias`, `KerpleBias`, `FireBias`, `CoPE`,
#   `LearnedPositionalEmbedding`) hold ordinary parameters, and DDP averages their
#   gradients like any other weight. `FireBias` also keeps its initial threshold,
#   a constant, as a buffer.
# - FSDP (built on the meta device as above) rejects 0-d (scalar) parameters.
#   No `posenc` module holds one, so FSDP wraps them all: the learned scale of
#   `SinusoidalEmbedding` (`learnable_scale=True`) and the two learned scalars
#   of `FireBias` have shape $[1]$.

# %% [markdown] lang="ja"
# ## 分散学習
#
# ここでは DDP を実行せず、知っておくべきことだけをまとめます。`DistributedDataParallel` は各ステップでランク 0 からすべての**バッファ**をブロードキャストし（`forward_sync_buffers` で制御し、既定で有効）、**パラメータ**の勾配を平均します。
#
# - `RotaryEmbedding` は表をバッファではなく通常のテンソル属性に持ち、`state_dict` は空です。DDP は表をブロードキャストしないので、長さの違う系列を見るランクは、それぞれ表を伸ばせます（`max_positions` を指定しない場合）。チェックポイントにも表は入りません。`SinusoidalPositionalEncoding` も同じです。このページの `SinusoidalEmbedding` は表を永続化しないバッファに持ちます。DDP はこれをブロードキャストしますが害はなく、表は `state_dict` に入りません。
# - ALiBi の傾きとマスクは、各ランクで設定と位置から計算します。同期するものはありません。
# - 学習可能な位置エンコーディング（`T5RelativeBias`、`KerpleBias`、`FireBias`、`CoPE`、`LearnedPositionalEmbedding`）は通常のパラメータを持ち、DDP はほかの重みと同じようにその勾配を平均します。`FireBias` は、定数であるしきい値の初期値もバッファに持ちます。
# - FSDP（上のように meta デバイスで作ります）は 0 次元（スカラー）のパラメータを受け付けません。`posenc` のモジュールはどれも 0 次元のパラメータを持たないので、どのモジュールも FSDP で包めます。`SinusoidalEmbedding` の学習可能なスケール（`learnable_scale=True`）も、`FireBias` の学習可能な 2 つのスカラーも形状 $[1]$ です。

# %% tags=["check"] summary={"en": "RotaryEmbedding and SinusoidalPositionalEncoding hold no buffer and save nothing; the only buffers are SinusoidalEmbedding's table, left out of the state_dict, and FireBias's initial threshold; no module holds a 0-d parameter", "ja": "RotaryEmbedding と SinusoidalPositionalEncoding はバッファを持たず、何も保存しません。バッファは、state_dict に入らない SinusoidalEmbedding の表と、FireBias のしきい値の初期値だけです。0 次元のパラメータを持つモジュールはありません"}
rope, added = RotaryEmbedding(16), SinusoidalPositionalEncoding(16)
x = torch.randn(1, 2, 40, 16)
rope(x, x, torch.arange(40))  # grows both tables (to 256 rows)
added(torch.randn(1, 40, 16))
assert rope.cos_cached.shape[0] >= 40 and added.cache.shape[0] >= 40
for m in (rope, added):
    assert not list(m.buffers()) and not m.state_dict()
table = SinusoidalEmbedding(MAX_POSITIONS, 16)
assert not table.state_dict()  # the table is not persistent
fire = FireBias(2)
scaled = SinusoidalEmbedding(8, 16, learnable_scale=True)
assert fire.c.shape == fire.threshold_multiplier.shape == (1,)
assert scaled.scale.shape == (1,)
modules = [rope, added, table, fire, scaled, T5RelativeBias(2), KerpleBias(2)]
modules += [CoPE(16, 2, 8), LearnedPositionalEmbedding(8, 16)]
modules += [RelativePositionEmbedding(8, 16)]
named = [(type(m).__name__, m) for m in modules]
buffers = {(k, b) for k, m in named for b, _ in m.named_buffers()}
assert buffers == {
    ("SinusoidalEmbedding", "table"),
    ("FireBias", "initial_threshold"),
}
assert "initial_threshold" in fire.state_dict()
scalars = [k for k, m in named for p in m.parameters() if p.dim() == 0]
assert scalars == []  # FSDP would reject each one

# %% [markdown] lang="en"
# ## What to remember
#
# - Rotate the new queries and keys at explicit positions, then cache the rotated
#   keys. `RotaryEmbedding(dim, max_positions=n)` serves a decode step without
#   growing or reading back.
# - SDPA's `is_causal` is aligned to the top left. For chunked prefill, pass
#   `attention_mask` (end-aligned, or built from positions).
# - ALiBi goes into SDPA as an additive mask (`attention_mask(..., bias=alibi_bias(...))`)
#   or into FlexAttention as `alibi_score_mod`, with the same result. Build
#   FlexAttention's block mask with the batch size when positions are batched.
# - Packed documents need document ids in the mask. For RoPE and ALiBi that is
#   enough; absolute encodings, FIRE beyond its threshold, length-dependent RoPE
#   scalings and `max_positions` need the positions restarted in each document.
# - Every `posenc` module has `reset_parameters()`: built on the meta device, it
#   comes out initialised right, learned tables included, and all are safe under
#   DDP by default.
# - Read a released model's RoPE with `RotaryEmbedding.from_hf_config`.
# - The decoder with RoPE wired in as above learns the copy task in 300 steps;
#   without a positional encoding the loss stays near the chance level all that time.

# %% [markdown] lang="ja"
# ## まとめ
#
# - 新しいクエリとキーを明示的に渡した位置で回転させ、回転したキーをキャッシュします。`RotaryEmbedding(dim, max_positions=n)` なら、デコードの 1 ステップで表を伸ばさず、値を読み戻すこともありません。
# - SDPA の `is_causal` は因果マスクを左上にそろえます。チャンクに分けたプリフィルには `attention_mask`（末尾にそろえたもの、または位置から作ったもの）を渡します。
# - ALiBi は SDPA には加算マスク（`attention_mask(..., bias=alibi_bias(...))`）、FlexAttention には `alibi_score_mod` として渡し、結果は同じです。位置にバッチの軸があるときは、FlexAttention のブロックマスクをバッチサイズを指定して作ります。
# - 詰め込んだ文書では、マスクに文書 ID を渡します。RoPE と ALiBi にはそれで足ります。絶対位置のエンコーディング、しきい値を超えた FIRE、長さによって変わる RoPE のスケーリング、`max_positions` には、文書ごとに数え直した位置が必要です。
# - `posenc` のモジュールはすべて `reset_parameters()` を持ち、meta デバイスで作っても学習可能な表まで正しく初期化されます。既定の設定のままで DDP でも安全です。
# - 公開されたモデルの RoPE は `RotaryEmbedding.from_hf_config` で読みます。
# - 上のように RoPE を組み込んだデコーダは、コピー課題を 300 ステップで習得します。位置エンコーディングのないモデルの損失は、この間チャンスレベルの近くにとどまります。

# %% [markdown] lang="en"
# ## Exercises
#
# 1. Give the decoder a [sliding window](../docs/glossary.md#sliding-window) of 4
#    (`window=4`). The cache still keeps every key. Check that decoding with the
#    cache still gives the logits of recomputation at every step.
# 2. Batch two prompts of different lengths by padding the shorter one on the left.
#    Which positions and document ids make each prompt's logits equal those of the
#    prompt alone?
# 3. Replace each block's RoPE with `RotaryEmbedding(16, scaling=DynamicNTKScaling(2.0, 8))`,
#    whose frequencies change once the sequence is longer than 8. Does decoding
#    with the cache still equal recomputation? Why?

# %% [markdown] lang="ja"
# ## 演習
#
# 1. デコーダに幅 4 の[スライディングウィンドウ](../docs/glossary.ja.md#sliding-window)を与えてください（`window=4`）。キャッシュはすべてのキーを保持したままです。キャッシュを使うデコードが、どのステップでも計算し直したときと同じロジットを出すことを確かめてください。
# 2. 長さの違う 2 つのプロンプトを、短いほうを左にパディングして 1 つのバッチにします。各プロンプトのロジットを単独で処理したときと一致させるには、どのような位置と文書 ID を与えればよいでしょうか。
# 3. 各ブロックの RoPE を `RotaryEmbedding(16, scaling=DynamicNTKScaling(2.0, 8))` に置き換えてください。このスケーリングでは、系列が 8 より長くなると周波数が変わります。それでも、キャッシュを使うデコードは計算し直した結果と一致するでしょうか。それはなぜでしょうか。

# %% [markdown] lang="en" tags=["solution"]
# **Solution 1.** The window is a property of the mask only, and the mask is built
# from positions: query $p$ sees keys $p - 3, \dots, p$ whether they come from the
# cache or from the same call. Keys that fall out of the window are masked, not
# removed; a real implementation would also drop them from the cache.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 1.** ウィンドウはマスクだけの性質で、マスクは位置から作ります。
# 位置 $p$ のクエリは、キーがキャッシュから来ても同じ呼び出しから来ても、キー $p - 3, \dots, p$ を見ます。
# ウィンドウから外れたキーはマスクされるだけで、取り除かれはしません。実際の実装なら、キャッシュからも捨てるところです。

# %% tags=["solution"]
_ = torch.manual_seed(0)
windowed = Decoder(window=4).eval()  # the weights of `model`
cached = generate(windowed, prompt, 10)
full = full_logits(windowed, cached, 6)
assert_close(step_logits(windowed, cached, 6), full)
assert not torch.allclose(
    full, full_logits(model, cached, 6)
)  # the window acts

# %% [markdown] lang="en" tags=["solution"]
# **Solution 2.** Count each row's positions from its first real token, and give
# the padding a document id of its own. Padding queries then attend only padding,
# so no row of the mask is empty, and real tokens never see padding. The
# positions become a (batch, tokens) tensor; the model already broadcasts them
# over the heads.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 2.** 各行の位置を最初の実トークンから数え、パディングには専用の文書 ID を与えます。
# すると、パディングのクエリはパディングだけにアテンションを向けるので、マスクに空の行はできません。実トークンがパディングを見ることもありません。
# 位置は形状 `(batch, tokens)` のテンソルになります。モデルは、もともとそれをヘッドの軸にブロードキャストするように書かれています。

# %% tags=["solution"]
short, long = torch.randint(64, (1, 4)), torch.randint(64, (1, 7))
batch = torch.cat(
    [torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), long]
)
positions = torch.stack([torch.arange(7) - 3, torch.arange(7)]).clamp(min=0)
document_ids = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1] * 7])  # 0: padding
with torch.no_grad():
    logits = model(batch, positions, document_ids=document_ids)
    assert_close(logits[0, 3:], model(short, torch.arange(4))[0])
    assert_close(logits[1], model(long, torch.arange(7))[0])

# %% [markdown] lang="en" tags=["solution"]
# **Solution 3.** No. The cached keys were rotated with the frequencies of the
# length at their own step; recomputation rotates every key with the frequencies
# of the final length. Past position 8 the two differ, so the logits do too. A
# length-dependent scaling and a KV cache do not mix unless the cached keys are
# re-rotated.

# %% [markdown] lang="ja" tags=["solution"]
# **解答 3.** 一致しません。キャッシュしたキーは、それぞれを追加したステップの時点の長さに応じた周波数で回転されています。
# 計算し直すと、すべてのキーが最終的な長さの周波数で回転します。
# 位置 8 を過ぎると両者は違ってくるので、ロジットも違ってきます。
# 長さに依存するスケーリングと KV キャッシュは、キャッシュしたキーを回転し直さない限り一緒には使えません。

# %% tags=["solution"]
from posenc import DynamicNTKScaling

_ = torch.manual_seed(0)
dynamic = Decoder().eval()
for block in dynamic.blocks:
    block.rope = RotaryEmbedding(16, scaling=DynamicNTKScaling(2.0, 8))
with torch.no_grad():
    cache = KVCache(len(dynamic.blocks))
    dynamic(tokens[:, :-1], torch.arange(15), cache)
    step = dynamic(tokens[:, -1:], torch.tensor([15]), cache)[:, 0]
    full = dynamic(tokens, torch.arange(16))[:, -1]
print(f"largest logit difference: {(step - full).abs().max():.3f}")
assert not torch.allclose(step, full)

# %% [markdown] lang="en"
# ## Sources and versions
#
# Run with torch 2.13.0 on the CPU and `posenc` 0.3.0. FlexAttention runs eagerly
# here; the Llama 3.1 8B settings are those of its published `config.json`, and
# the frequencies compared with Hugging Face's come from transformers 5.24.0.
# FSDP1's initialisation order is that of `_materialize_meta_module` in torch
# 2.13's `torch/distributed/fsdp/_init_utils.py`, replayed without processes.
#
# - PyTorch, `torch.nn.functional.scaled_dot_product_attention` (`is_causal`
#   aligned to the top left).
#   <https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html>
# - PyTorch, `torch.nn.attention.bias.causal_lower_right` (the end-aligned mask).
#   <https://pytorch.org/docs/stable/nn.attention.bias.html>
# - Dong, J. et al. (2024). *Flex Attention: A Programming Model for Generating
#   Optimized Attention Kernels*.
#   <https://arxiv.org/abs/2412.05496>
# - Press, O., Smith, N. A. and Lewis, M. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*.
#   <https://arxiv.org/abs/2104.09864>
# - PyTorch, `DistributedDataParallel` (`forward_sync_buffers`).
#   <https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html>
# - PyTorch, the meta device. <https://pytorch.org/docs/stable/meta.html>
# - PyTorch, FSDP1 (`FullyShardedDataParallel`, `param_init_fn`).
#   <https://pytorch.org/docs/stable/fsdp.html>
# - PyTorch, FSDP2 (`fully_shard`).
#   <https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html>
# - Hugging Face transformers, `modeling_rope_utils.py` (`_compute_llama3_parameters`).
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>
# - Meta, Llama 3.1 8B, `config.json`.
#   <https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json>

# %% [markdown] lang="ja"
# ## 出典とバージョン
#
# torch 2.13.0 の CPU と `posenc` 0.3.0 で実行しました。FlexAttention はここでは eager モードで実行しています。Llama 3.1 8B の設定は公開されている `config.json` のもの、Hugging Face の周波数は transformers 5.24.0 で求めた値です。
# FSDP1 の初期化の順序は、torch 2.13 の `torch/distributed/fsdp/_init_utils.py` にある `_materialize_meta_module` のもので、プロセスを立てずに再現しています。
#
# - PyTorch：`torch.nn.functional.scaled_dot_product_attention`（左上にそろえる `is_causal`）。
#   <https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html>
# - PyTorch：`torch.nn.attention.bias.causal_lower_right`（末尾にそろえるマスク）。
#   <https://pytorch.org/docs/stable/nn.attention.bias.html>
# - Dong, J. et al. (2024). *Flex Attention: A Programming Model for Generating
#   Optimized Attention Kernels*.
#   <https://arxiv.org/abs/2412.05496>
# - Press, O. et al. (2022). *Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation*. ICLR 2022.
#   <https://arxiv.org/abs/2108.12409>
# - Su, J. et al. (2021). *RoFormer: Enhanced Transformer with Rotary Position
#   Embedding*.
#   <https://arxiv.org/abs/2104.09864>
# - PyTorch：`DistributedDataParallel`（`forward_sync_buffers`）。
#   <https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html>
# - PyTorch：meta デバイス。<https://pytorch.org/docs/stable/meta.html>
# - PyTorch：FSDP1（`FullyShardedDataParallel`、`param_init_fn`）。
#   <https://pytorch.org/docs/stable/fsdp.html>
# - PyTorch：FSDP2（`fully_shard`）。
#   <https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html>
# - Hugging Face transformers：`modeling_rope_utils.py`（`_compute_llama3_parameters`）。
#   <https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py>
# - Meta：Llama 3.1 8B の `config.json`。
#   <https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json>
