"""posenc's modules under DistributedDataParallel, with ranks that see different lengths.

DDP broadcasts every buffer of the model from rank 0 at each step. A cache
held in a buffer that grows with the longest sequence a rank has seen
(RotaryEmbedding's cos/sin, SinusoidalPositionalEncoding's table) then
differs in size between ranks and the broadcast aborts. Two gloo processes
on the CPU train a tiny model for a few steps, each rank on its own
lengths; the gradients rank 0 sees must equal the average of the two
ranks' gradients computed in this process.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import posenc

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs torch.distributed/gloo"
)

#: sequence lengths per rank and step: every step, the two ranks' caches differ in size
LENGTHS = ((5, 300, 7, 40), (290, 9, 600, 41))
HEADS, HEAD_DIM, VOCAB = 2, 8, 32


class Tiny(nn.Module):
    """Embedding + sinusoidal encoding, one attention layer with RoPE, a scalar loss."""

    def __init__(self) -> None:
        super().__init__()
        dim = HEADS * HEAD_DIM
        self.embed = nn.Embedding(VOCAB, dim)
        self.encoding = posenc.SinusoidalPositionalEncoding(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.rope = posenc.RotaryEmbedding(HEAD_DIM)
        self.out = nn.Linear(dim, 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.encoding(self.embed(tokens))  # (b, s, dim)
        b, s, dim = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q, k, torch.arange(s))
        y = posenc.attention(q, k, v, causal=True)  # (b, h, s, hd)
        return self.out(y.transpose(1, 2).reshape(b, s, dim)).square().mean()


def _tokens(rank: int, step: int, n: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(100 * rank + step)
    return torch.randint(VOCAB, (2, n), generator=generator)


def _model() -> Tiny:
    torch.manual_seed(0)
    return Tiny()


def _worker(rank: int, world: int, store: str, out: str) -> None:
    torch.set_num_threads(1)
    # A file store, not a TCP one: no port to race for, and no rank hosts the
    # store, so the ranks can exit in any order.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        model = _model()
        ddp = DistributedDataParallel(model)  # forward_sync_buffers: True by default
        optimiser = torch.optim.SGD(ddp.parameters(), lr=0.05)
        grads = []
        for step, n in enumerate(LENGTHS[rank]):
            optimiser.zero_grad()
            ddp(_tokens(rank, step, n)).backward()
            grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
            optimiser.step()
        if rank == 0:
            torch.save({"grads": grads, "cache_rows": model.rope.rot_cached.shape[0]}, out)
        # Tear down together, with DDP's reducer (which holds the group) gone
        # first: a rank that tore down while its peer still used the group
        # aborted now and then ("terminate called without an active exception").
        dist.barrier()
        del ddp, optimiser
    finally:
        dist.destroy_process_group()


def _reference() -> list[dict[str, torch.Tensor]]:
    """The gradients DDP should give: the mean over ranks, one model, one process."""
    model = _model()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    grads = []
    for step in range(len(LENGTHS[0])):
        total: dict[str, torch.Tensor] = {}
        for rank in range(len(LENGTHS)):
            model.zero_grad()
            model(_tokens(rank, step, LENGTHS[rank][step])).backward()
            for name, p in model.named_parameters():
                total[name] = total.get(name, 0) + p.grad / len(LENGTHS)
        for name, p in model.named_parameters():
            p.grad = total[name].clone()
        grads.append(total)
        optimiser.step()
    return grads


def test_ranks_with_different_lengths_train_together(tmp_path):
    out = str(tmp_path / "rank0.pt")
    store = str(tmp_path / "store")
    mp.spawn(_worker, args=(len(LENGTHS), store, out), nprocs=len(LENGTHS), join=True)
    result = torch.load(out)
    assert result["cache_rows"] == 512  # rank 0's cache grew for its 300 tokens; rank 1's to 1024
    expected = _reference()
    assert len(result["grads"]) == len(expected)
    for got, want in zip(result["grads"], expected, strict=True):
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-7)
