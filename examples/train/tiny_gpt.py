"""A tiny GPT trained on synthetic tokens with FSDP2, for flightdeck's example job.

Runs on 1..N GPUs per node with NCCL, or on CPU with gloo, under torchrun (or
flightdeck's job runner, which sets the torchrun variables). The tokens come from a
fixed random Markov chain, so there is something to learn: the loss starts near
ln(vocab) and falls towards the chain's entropy.

Every node's first process prints one line per step in the seed format that
flightdeck's Jobs view charts:

    Step: 10 | Time: 0.41s | TFLOPs/s/GPU: 312.5 | Tokens/s/GPU: 40123 | Loss: 6.1234

Time is this node's step time; Tokens/s/GPU and TFLOPs/s/GPU are per process (model
FLOPs: 6 x parameters + attention, per token); Loss is the mean over all processes.
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def fully_shard_fn():
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # torch >= 2.6
    except ImportError:
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard  # 2.4, 2.5
    return fully_shard, MixedPrecisionPolicy


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def markov_batches(vocab, seq, batch, seed, device, branching=4):
    """Sequences from a fixed sparse Markov chain (each token has `branching` likely
    successors), the same chain on every process, different samples per process."""
    g = torch.Generator().manual_seed(1234)
    succ = torch.randint(0, vocab, (vocab, branching), generator=g)
    rng = torch.Generator().manual_seed(seed)
    while True:
        x = torch.empty(batch, seq + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, vocab, (batch,), generator=rng)
        choice = torch.randint(0, branching, (batch, seq), generator=rng)
        for i in range(seq):
            x[:, i + 1] = succ[x[:, i], choice[:, i]]
        yield x[:, :-1].to(device, non_blocking=True), x[:, 1:].to(device, non_blocking=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8, help="sequences per process and step")
    p.add_argument("--lr", type=float, default=1e-3)
    a = p.parse_args()

    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    torch.manual_seed(0)

    model = GPT(a.vocab, a.d_model, a.layers, a.heads, a.seq).to(device)
    params = sum(p.numel() for p in model.parameters())
    fully_shard, MixedPrecisionPolicy = fully_shard_fn()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if cuda else None
    kw = {"mp_policy": mp} if mp else {}
    for blk in model.blocks:
        fully_shard(blk, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))

    # Model FLOPs per token (training: forward + backward), as in the PaLM appendix.
    flops_per_token = 6 * params + 12 * a.layers * a.d_model * a.seq
    if local_rank == 0:
        print(
            f"tiny_gpt: rank {rank}/{world} backend {backend} device {device} "
            f"params {params / 1e6:.1f}M flops/token {flops_per_token / 1e9:.2f}G "
            f"batch {a.batch}x{a.seq} ln(vocab) {math.log(a.vocab):.4f}",
            flush=True,
        )
    data = markov_batches(a.vocab, a.seq, a.batch, seed=1000 + rank, device=device)
    tokens = a.batch * a.seq
    for step in range(1, a.steps + 1):
        x, y = next(data)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if local_rank == 0:
            tps = tokens / dt
            print(
                f"Step: {step} | Time: {dt:.3f}s | TFLOPs/s/GPU: {tps * flops_per_token / 1e12:.1f} "
                f"| Tokens/s/GPU: {tps:.0f} | Loss: {mean.item():.4f}",
                flush=True,
            )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
