#!/usr/bin/python3
"""A worker for rdzvctl's tests with the real rdzv-agent (no torch).

At start it writes $W_OUT/start-gG-rR (G: RDZV_GENERATION, R: RANK), then
runs until the file $W_STOP exists (exit 0: the training finished) or
SIGTERM comes (it writes $W_OUT/sigterm-gG-rR and exits 143), at most 60 s.
"""

import os
import signal
import sys
import time

OUT = os.environ["W_OUT"]
NAME = "g%s-r%s" % (os.environ["RDZV_GENERATION"], os.environ["RANK"])


def mark(kind):
    path = os.path.join(OUT, "%s-%s" % (kind, NAME))
    with open(path + ".tmp", "w") as f:
        f.write("%d %s\n" % (os.getpid(), os.environ["WORLD_SIZE"]))
    os.rename(path + ".tmp", path)


def on_term(sig, frame):
    mark("sigterm")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
mark("start")
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not os.path.exists(os.environ["W_STOP"]):
    time.sleep(0.05)
sys.exit(0)
