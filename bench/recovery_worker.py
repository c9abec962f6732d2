#!/usr/bin/python3
"""A worker for bench/recovery.py: all_reduce steps on gloo (or NCCL with
BENCH_BACKEND=nccl), under rdzv.elastic.run, so that it restarts in its
process under `rdzv-agent --restart in-process` and runs once otherwise.
On the first step of each process group it appends a JSON line to
$BENCH_OUT/<BENCH_NODE>.jsonl: wall time, world size, generation, rank,
pid. Each step is reported to the agent (rdzv.progress), so that its
--hang-timeout finds a stopped worker (--fault stop). A failure outside in-process restart exits at once (os._exit), as a
crashed worker would, without torch's slow teardown."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import rdzv
import rdzv.elastic

OUT = os.path.join(os.environ["BENCH_OUT"], os.environ["BENCH_NODE"] + ".jsonl")
BACKEND = os.environ.get("BENCH_BACKEND", "gloo")
STEP_S = float(os.environ.get("BENCH_STEP_S", "0.02"))


def train(state):
    dev = "cpu"
    if BACKEND == "nccl":
        dev = "cuda:%d" % int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(dev)
    t = torch.ones(1024, device=dev)
    first = True
    while True:
        dist.all_reduce(t)
        if BACKEND == "nccl":
            torch.cuda.synchronize()
        if first:
            first = False
            rec = {"time": time.time(), "world": dist.get_world_size(),
                   "generation": int(os.environ.get("RDZV_GENERATION", "0")),
                   "restart": int(os.environ.get(
                       "TORCHELASTIC_RESTART_COUNT", "0")),
                   "rank": dist.get_rank(), "pid": os.getpid()}
            with open(OUT, "a") as f:
                f.write(json.dumps(rec) + "\n")
        state["step"] = state.get("step", 0) + 1
        rdzv.progress(state["step"])
        t.fill_(1.0)
        rdzv.elastic.check()
        time.sleep(STEP_S)


try:
    rdzv.elastic.run(train, {}, backend=BACKEND)
except BaseException as e:  # noqa: BLE001 - any end is a crash here
    print("recovery_worker: %s: %s" % (type(e).__name__, e), file=sys.stderr,
          flush=True)
    os._exit(1)
