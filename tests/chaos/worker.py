#!/usr/bin/python3
"""The chaos soak's worker (tests/chaos, docs/RELIABILITY.md): full-batch
gradient descent of a tiny linear model on gloo, one all_reduce a step,
paced by CHAOS_STEP_S. Every step appends a JSON line to its own file,
$CHAOS_OUT/w-JOB-HOST-PID.jsonl: time, job, host, generation, rank, world,
step, pid, restart count, and every CHAOS_HASH_EVERY steps the hash of
the weights. The checker (check.py) reads nothing else of it.

CHAOS_MODE=elastic runs under rdzv.elastic.run (in-process restart: the
weights and step live on in the process, and every round begins by taking
the furthest step any rank reached, so the survivors' weights agree);
CHAOS_MODE=plain is an ordinary init_process_group script that starts
from step 0 in each process and exits at once on any failure (the agent,
or torchrun, starts it again). Both give collectives CHAOS_COLLECTIVE_S to
finish, so a peer gone in silence fails a step in seconds."""

import datetime
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist

MODE = os.environ.get("CHAOS_MODE", "plain")
JOB = os.environ["CHAOS_JOB"]
HOST = os.environ["CHAOS_HOST"]
STEP_S = float(os.environ.get("CHAOS_STEP_S", "0.05"))
HASH_EVERY = int(os.environ.get("CHAOS_HASH_EVERY", "5"))
TIMEOUT = datetime.timedelta(
    seconds=float(os.environ.get("CHAOS_COLLECTIVE_S", "2")))
SAMPLES = 64
LR = 0.02
OUT = open(os.path.join(os.environ["CHAOS_OUT"], "w-%s-%s-%d.jsonl"
                        % (JOB, HOST, os.getpid())), "a", buffering=1)


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 8, generator=g, dtype=torch.float64)
    y = x @ (torch.arange(1, 9, dtype=torch.float64) / 4)
    return x, y


def generation():
    if MODE == "elastic":
        import rdzv.elastic
        return rdzv.elastic.generation()
    return int(os.environ.get("RDZV_GENERATION", "0") or 0)


def sync(state):
    """Every rank takes the weights of the furthest step any reached."""
    world = dist.get_world_size()
    step = torch.tensor([state["step"]], dtype=torch.int64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    src = torch.tensor([dist.get_rank() if state["step"] == step.item()
                        else world], dtype=torch.int64)
    dist.all_reduce(src, op=dist.ReduceOp.MIN)
    dist.broadcast(state["w"], src=int(src.item()))
    state["step"] = int(step.item())


def train(state):
    x, y = data()
    state.setdefault("w", torch.zeros(8, dtype=torch.float64))
    state.setdefault("step", 0)
    sync(state)
    gen, rank, world = generation(), dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
    while True:
        if MODE == "elastic":
            import rdzv.elastic
            rdzv.elastic.check()
        xs, ys = x[rank::world], y[rank::world]
        grad = 2 * xs.T @ (xs @ state["w"] - ys)
        dist.all_reduce(grad)
        state["w"] -= LR * grad / SAMPLES
        state["step"] += 1
        rec = {"t": time.time(), "src": "step", "job": JOB, "host": HOST,
               "gen": gen, "rank": rank, "world": world,
               "step": state["step"], "pid": os.getpid(), "restart": restart}
        if state["step"] % HASH_EVERY == 0:
            rec["hash"] = hashlib.sha1(
                state["w"].numpy().tobytes()).hexdigest()[:16]
        OUT.write(json.dumps(rec) + "\n")
        if MODE == "elastic":
            import rdzv
            rdzv.progress(state["step"])
        time.sleep(STEP_S)


def main():
    if MODE == "elastic":
        import rdzv.elastic
        rdzv.elastic.run(train, {}, backend="gloo",
                         init_kwargs={"timeout": TIMEOUT})
        return
    dist.init_process_group("gloo", timeout=TIMEOUT)
    train({})


if __name__ == "__main__":
    try:
        main()
    except BaseException as e:  # noqa: BLE001 - any end is a crash here
        print("chaos worker: %s: %s" % (type(e).__name__, e),
              file=sys.stderr, flush=True)
        os._exit(1)
