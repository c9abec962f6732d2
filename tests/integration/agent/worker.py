#!/usr/bin/python3
"""A worker for rdzv-agent's end-to-end tests (no torch).

It leaves JSON files in $W_OUT, named after its generation and rank:

  env-gG-rR.json      its whole environment and pid, written at start
  sigterm-gG-rR.json  written when SIGTERM arrived (then it exits 143)

and prints one line on stdout and one on stderr. Then, by $W_MODE:

  exit      exit 0 at once (default)
  sleep     run until $W_STOP exists or SIGTERM comes (at most 60 s)

A worker whose RANK is in $W_FAIL_RANKS waits until every rank of its
generation has started (left its env file, so it handles SIGTERM), then
writes a torch elastic error file (TORCHELASTIC_ERROR_FILE) saying
"injected failure: rank R, restart C" and exits 1.
"""

import sys

# Never imported here: found imported only in a worker forked from the
# agent's preloaded python (rdzv-agent join --preload torch).
PRELOADED = "torch" in sys.modules

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

OUT = os.environ["W_OUT"]
GEN = int(os.environ["RDZV_GENERATION"])
RANK = int(os.environ["RANK"])


def write(kind, **kw):
    d = dict(kw, pid=os.getpid(), generation=GEN, rank=RANK,
             tag=os.environ.get("W_TAG", ""), preloaded=PRELOADED)
    path = os.path.join(OUT, "%s-g%d-r%d.json" % (kind, GEN, RANK))
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.rename(path + ".tmp", path)


def on_term(sig, frame):
    write("sigterm")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
write("env", env=dict(os.environ), stdin=os.readlink("/proc/self/fd/0"),
      pgid=os.getpgid(0))
print("hello from rank %d" % RANK, flush=True)
print("complaint from rank %d" % RANK, file=sys.stderr, flush=True)

fail = [int(r) for r in os.environ.get("W_FAIL_RANKS", "").split(",") if r]
if RANK in fail:
    world = int(os.environ["WORLD_SIZE"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(
            [f for f in os.listdir(OUT)
             if f.startswith("env-g%d-" % GEN) and f.endswith(".json")]) < world:
        time.sleep(0.01)
    msg = "injected failure: rank %d, restart %s" % (
        RANK, os.environ["TORCHELASTIC_RESTART_COUNT"])
    with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
        json.dump({"message": {"message": msg,
                               "extraInfo": {"timestamp": str(int(time.time()))}}}, f)
    sys.exit(1)

if os.environ.get("W_MODE", "exit") == "sleep":
    stop = os.environ.get("W_STOP", "")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
        time.sleep(0.05)
sys.exit(0)
