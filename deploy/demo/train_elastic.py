#!/usr/bin/python3
"""A training loop that survives the loss of a node in its own process:
rdzv-agent's in-process restart (docs/RECOVERY.md).

Run it as every worker of

    rdzv-agent join --id JOB --nnodes 2:3 --max-restarts 3 \\
        --restart in-process -- python3 train_elastic.py

It fits a linear model to a fixed synthetic data set by full-batch
gradient descent in float64: each rank sums the gradient of its share of
the samples (every world-th sample from its rank on), an all_reduce adds
the shares, and every rank takes the same step. The result does not depend
on how many ranks there are, so a run that loses a node half-way reaches
the same final loss as an uninterrupted one (to rounding).

What makes it restartable in-process:

- rdzv.elastic.run(train, state) calls train again after every new round,
  with a new process group; train keeps nothing in globals, only in the
  ``state`` dict it is given (weights and step), which lives on;
- each call begins with sync(): the ranks agree on the furthest step any
  of them reached and take its weights from the lowest rank that holds it,
  so a new process (a spare, or a worker that was restarted) catches up
  from the survivors, and a step half-done when the node died is redone;
- the step is applied only after its all_reduce succeeded;
- rdzv.elastic.check() between steps leaves for a new round that came
  while nothing failed (a node taken in).

Every rank prints its final loss. With TRAIN_OUT set, each call of train
leaves start-gG-rR.json and the end final-gG-rR.json there (generation,
rank, world size, pid, step, loss), and every fifth step
progress-gG-rR.json, for the tests. TRAIN_COLLECTIVE_TIMEOUT (seconds)
bounds a collective whose peer vanished in silence.
"""

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import rdzv
import rdzv.elastic

STEPS = int(os.environ.get("TRAIN_STEPS", "60"))
STEP_SECONDS = float(os.environ.get("TRAIN_STEP_SECONDS", "0.05"))
LR = 0.02
SAMPLES = 240


def data():
    """The same samples on every rank: 8 features, a known linear map."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 8, generator=g, dtype=torch.float64)
    w_true = torch.arange(1, 9, dtype=torch.float64) / 4
    y = x @ w_true + 0.1 * torch.randn(SAMPLES, generator=g,
                                       dtype=torch.float64)
    return x, y


def loss_of(w, x, y):
    return float(((x @ w - y) ** 2).mean())


def note(kind, state, **more):
    out = os.environ.get("TRAIN_OUT")
    if not out:
        return
    gen = rdzv.elastic.generation()
    rec = dict(kind=kind, generation=gen, rank=dist.get_rank(),
               world=dist.get_world_size(), pid=os.getpid(),
               step=state["step"], tag=os.environ.get("TRAIN_TAG", ""),
               restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
               **more)
    path = os.path.join(out, "%s-g%d-r%d.json" % (kind, gen, dist.get_rank()))
    with open(path + ".tmp", "w") as f:
        json.dump(rec, f)
    os.rename(path + ".tmp", path)


def sync(state):
    """Every rank takes the weights of the furthest step reached."""
    world = dist.get_world_size()
    step = torch.tensor([state["step"]], dtype=torch.int64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    src = torch.tensor([dist.get_rank() if state["step"] == step.item()
                        else world], dtype=torch.int64)
    dist.all_reduce(src, op=dist.ReduceOp.MIN)
    dist.broadcast(state["w"], src=int(src.item()))
    state["step"] = int(step.item())


def one_step(state, x, y):
    rank, world = dist.get_rank(), dist.get_world_size()
    xs, ys = x[rank::world], y[rank::world]
    w = state["w"]
    grad = 2 * xs.T @ (xs @ w - ys)
    dist.all_reduce(grad)
    w -= LR * grad / SAMPLES        # only once every share arrived
    state["step"] += 1


def train(state):
    x, y = data()
    state.setdefault("w", torch.zeros(8, dtype=torch.float64))
    state.setdefault("step", 0)
    sync(state)
    note("start", state)
    while state["step"] < STEPS:
        rdzv.elastic.check()
        one_step(state, x, y)
        rdzv.progress(state["step"])
        if state["step"] % 5 == 0:
            note("progress", state)
        time.sleep(STEP_SECONDS)
    loss = loss_of(state["w"], x, y)
    note("final", state, loss=loss)
    dist.barrier()
    return loss


def main():
    # A collective whose peer vanished without a word (its host or link
    # gone: no connection closes) fails after this timeout, and the round
    # rdzvd forms meanwhile takes over; torch's default is 30 minutes.
    kw = {}
    if os.environ.get("TRAIN_COLLECTIVE_TIMEOUT"):
        kw["timeout"] = datetime.timedelta(
            seconds=float(os.environ["TRAIN_COLLECTIVE_TIMEOUT"]))
    loss = rdzv.elastic.run(train, {}, backend="gloo", init_kwargs=kw)
    print("rank %s: final loss %.12f" % (os.environ.get("RANK"), loss),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
