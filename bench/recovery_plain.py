#!/usr/bin/python3
"""A plain worker for bench/recovery.py --worker plain: what every existing
training script is, an ordinary init_process_group(env://) and all_reduce
steps, with no rdzv import at all. On its first step it appends a JSON
line to $BENCH_OUT/<BENCH_NODE>.jsonl (wall time, world size, generation,
restart count, rank, pid, and when the process started, had imported
torch and had joined its process group), as recovery_worker.py does. Any failure exits
at once (os._exit), as a crashed worker would, without torch's slow
teardown; the agent restarts it as a new process."""

import json
import os
import sys
import time

T_START = time.time()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

OUT = os.path.join(os.environ["BENCH_OUT"], os.environ["BENCH_NODE"] + ".jsonl")
BACKEND = os.environ.get("BENCH_BACKEND", "gloo")
STEP_S = float(os.environ.get("BENCH_STEP_S", "0.02"))

try:
    t_import = time.time()
    dist.init_process_group(BACKEND)
    t_init = time.time()
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
                   "rank": dist.get_rank(), "pid": os.getpid(),
                   "started": T_START, "imported": t_import,
                   "joined": t_init}
            with open(OUT, "a") as f:
                f.write(json.dumps(rec) + "\n")
        t.fill_(1.0)
        time.sleep(STEP_S)
except BaseException as e:  # noqa: BLE001 - any end is a crash here
    print("recovery_plain: %s: %s" % (type(e).__name__, e), file=sys.stderr,
          flush=True)
    os._exit(1)
