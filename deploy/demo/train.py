#!/usr/bin/python3
"""The demo's training program: a small PyTorch DDP job on CPU (gloo).

rdzv-agent starts it as every worker with the environment torchrun would
give it (RANK, WORLD_SIZE, MASTER_ADDR, ...), so it is an ordinary DDP
script: init_process_group("gloo") from env://, a DistributedSampler over a
synthetic data set (two interleaved spirals, the same on every rank), a
small MLP. Rank 0 prints the loss and accuracy per epoch; every rank ends
by printing a checksum of its parameters, which DDP keeps identical.
"""

import hashlib
import math
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = int(os.environ.get("DEMO_EPOCHS", "20"))
PAUSE = float(os.environ.get("DEMO_EPOCH_SECONDS", "0.1"))


def spirals(n=512):
    """Two interleaved spirals, class 0 and 1, with a fixed seed."""
    g = torch.Generator().manual_seed(7)
    t = torch.rand(n, generator=g) * 2 * math.pi
    label = torch.arange(n) % 2
    angle = t + label * math.pi
    r = 0.2 + t / (2 * math.pi)
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1)
    x += 0.02 * torch.randn(n, 2, generator=g)
    return TensorDataset(x, label)


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    env = os.environ
    print("rank %d of %d started (node %s of %s, generation %s, "
          "restart count %s, master %s:%s)"
          % (rank, world, env["GROUP_RANK"], env["GROUP_WORLD_SIZE"],
             env.get("RDZV_GENERATION", "?"), env["TORCHELASTIC_RESTART_COUNT"],
             env["MASTER_ADDR"], env["MASTER_PORT"]), flush=True)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(2, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    ds = spirals()
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)

    for epoch in range(1, EPOCHS + 1):
        sampler.set_epoch(epoch)
        stats = torch.zeros(3, dtype=torch.float64)   # loss sum, right, seen
        for x, y in loader:
            opt.zero_grad()
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            stats += torch.tensor([loss.item() * len(y),
                                   (out.argmax(1) == y).sum().item(), len(y)],
                                  dtype=torch.float64)
        dist.all_reduce(stats)
        if rank == 0:
            print("epoch %2d/%d  loss %.4f  accuracy %5.1f%%  "
                  "(%d samples on %d ranks)"
                  % (epoch, EPOCHS, stats[0] / stats[2],
                     100 * stats[1] / stats[2], stats[2], world), flush=True)
        time.sleep(PAUSE)

    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    dist.barrier()
    print("rank %d done; parameters sha256 %s" % (rank, h.hexdigest()[:16]),
          flush=True)
    dist.destroy_process_group()
    # Leave without freeing the model. With torch 1.13 (Debian 12's), freeing
    # a DDP model frees its gloo process group, whose destructor joins gloo's
    # threads while holding the GIL; one of them may be waiting for the GIL
    # to free a tensor, and the worker then never exits (pytorch/pytorch#56297).
    os._exit(0)


if __name__ == "__main__":
    main()
