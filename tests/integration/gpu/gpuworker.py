#!/usr/bin/python3
"""A worker for the GPU tests (no torch, no CUDA): writes its environment
and pid to $W_OUT/env-gG-rR.json, then runs until $W_STOP exists or
SIGTERM comes (at most 60 s), or exits 0 at once when W_MODE=exit."""

import json
import os
import signal
import sys
import time

OUT = os.environ["W_OUT"]
GEN = int(os.environ["RDZV_GENERATION"])
RANK = int(os.environ["RANK"])

signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
path = os.path.join(OUT, "env-g%d-r%d.json" % (GEN, RANK))
with open(path + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "generation": GEN, "rank": RANK,
               "tag": os.environ.get("W_TAG", ""), "env": dict(os.environ)}, f)
os.rename(path + ".tmp", path)

if os.environ.get("W_MODE", "sleep") == "sleep":
    stop = os.environ.get("W_STOP", "")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
        time.sleep(0.05)
sys.exit(0)
