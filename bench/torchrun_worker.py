#!/usr/bin/python3
"""A worker for bench/torchrun_bench.py: notes when it started (before
importing torch) and when it was running (past init_process_group and a
barrier), in $BENCH_OUT/<rank>.json, then exits."""

import json
import os
import time

SPAWNED = time.time()

import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", init_method="env://")
dist.barrier()
RUNNING = time.time()
rank = int(os.environ["RANK"])
with open(os.path.join(os.environ["BENCH_OUT"], "%d.json.tmp" % rank), "w") as f:
    json.dump({"spawned": SPAWNED, "running": RUNNING,
               "world": dist.get_world_size(),
               # the torchrun's own phases (rdzv.torchrun, RDZV_BENCH_PHASES)
               "phases": {k[len("RDZV_PHASE_"):]: float(v)
                          for k, v in os.environ.items()
                          if k.startswith("RDZV_PHASE_")}}, f)
os.rename(os.path.join(os.environ["BENCH_OUT"], "%d.json.tmp" % rank),
          os.path.join(os.environ["BENCH_OUT"], "%d.json" % rank))
dist.barrier()
# Skips freeing gloo's process group at exit (a rare deadlock in torch
# 1.13's destructor, tests/integration/torch/train_ddp.py says more).
os._exit(0)
