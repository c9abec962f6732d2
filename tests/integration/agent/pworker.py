#!/usr/bin/python3
"""A training loop for the progress and hang tests (no torch): it calls
rdzv.progress(step) once per step, every $P_STEP_S seconds, and leaves
JSON files in $W_OUT as worker.py does (env-gG-rR.json at start,
done-gG-rR.json when its loop ends).

  P_STEPS     steps in a run that may end (default 20); the first run
              (TORCHELASTIC_RESTART_COUNT 0) of a job with $P_HANG_RANK
              set runs until SIGTERM instead
  P_STEP_S    seconds per step (default 0.05)
  P_SLOW_RANK this rank takes $P_SLOW_S per step instead
  P_HANG_RANK in the first run this rank stops reporting at step
              $P_HANG_AT (default 5): it sleeps in the loop, after writing
              hang-gG-rR.json with the wall time just before its last
              report
  P_FOREVER   1: every rank runs until $W_STOP exists or SIGTERM comes
"""

import json
import os
import signal
import sys
import time

import rdzv

OUT = os.environ["W_OUT"]
GEN = int(os.environ["RDZV_GENERATION"])
RANK = int(os.environ["RANK"])
FIRST = os.environ["TORCHELASTIC_RESTART_COUNT"] == "0"


def write(kind, **kw):
    d = dict(kw, pid=os.getpid(), generation=GEN, rank=RANK)
    path = os.path.join(OUT, "%s-g%d-r%d.json" % (kind, GEN, RANK))
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.rename(path + ".tmp", path)


signal.signal(signal.SIGTERM, lambda s, f: os._exit(143))
write("env", env=dict(os.environ))

hang_rank = os.environ.get("P_HANG_RANK", "")
hang_at = int(os.environ.get("P_HANG_AT", "5"))
forever = os.environ.get("P_FOREVER") == "1" or (FIRST and hang_rank != "")
steps = int(os.environ.get("P_STEPS", "20"))
step_s = float(os.environ.get("P_STEP_S", "0.05"))
if os.environ.get("P_SLOW_RANK", "") == str(RANK):
    step_s = float(os.environ["P_SLOW_S"])
stop = os.environ.get("W_STOP", "")
deadline = time.monotonic() + 90

step = 0
while time.monotonic() < deadline and (forever or step < steps):
    if stop and os.path.exists(stop):
        break
    sent = time.time()
    rdzv.progress(step)
    if FIRST and hang_rank == str(RANK) and step == hang_at:
        write("hang", last_report=sent)
        time.sleep(600)         # the hang: alive, silent
    time.sleep(step_s)
    step += 1
write("done", steps=step)
sys.exit(0)
