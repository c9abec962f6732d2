#!/usr/bin/python3
"""torchrun with torch's c10d rendezvous against torchrun with rdzv's
(`--rdzv-backend rdzv`, python/rdzv), on this machine, in one run.

For each node count and each backend, N torchruns (`PY -m
rdzv.torchrun`, which is torch.distributed.run with the backend registered
and torch 1.13's flag quirks repaired, for both backends alike; PY is
--python, by default the interpreter running this script) start at once on loopback, one worker each (bench/torchrun_worker.py). Measured from
just before the first torchrun starts:

  spawned   the last worker started (before it imports torch): torchrun's
            start, the rendezvous and the agents' rank exchange
  running   the last worker past init_process_group and a barrier

and the phases before them, each the last node's: started (the python
of `-m rdzv.torchrun` running), imported (torch and torch.distributed.run
imported); with rdzv also rendezvous (torch's agent asks the handler),
coproc (`rdzv-agent coproc` started), joined, assigned (its events read),
store (the round's store hosted or reached).

c10d: the first torchrun hosts the store (--rdzv-endpoint 127.0.0.1:PORT),
as on a cluster. rdzv: a private rdzvd (the build's) with a fresh database.
The backends alternate (c10d first at the first count and run, rdzv first
at the next) so that neither always runs on a machine warmed by the other;
with --runs R each runs R times per count and the ratios are of the
medians. Prints
"name: value" lines and the ratios c10d/rdzv; exits 1 when a run fails or
passes --timeout.
"""

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import free_port, start_rdzvd

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def run_once(backend, n, build, timeout, python):
    tmp = tempfile.mkdtemp(prefix="torchrun-bench-")
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    daemon = None
    procs = []
    try:
        if backend == "rdzv":
            daemon, endpoint = start_rdzvd(build, tmp)
        else:
            endpoint = "127.0.0.1:%d" % free_port()
        env = dict(os.environ, BENCH_OUT=out, RDZV_BENCH_PHASES="1",
                   RDZV_AGENT=os.path.join(build, "client", "agent", "rdzv-agent"),
                   PYTHONPATH=os.path.join(SOURCE, "python"),
                   OMP_NUM_THREADS="1")
        argv = [python, "-m", "rdzv.torchrun", "--nnodes", str(n),
                "--nproc_per_node", "1", "--rdzv_backend", backend,
                "--rdzv_endpoint", endpoint, "--rdzv_id", "bench-%s-%d" % (backend, n),
                os.path.join(HERE, "torchrun_worker.py")]
        logs = [open(os.path.join(tmp, "torchrun-%d.log" % i), "w") for i in range(n)]
        t0 = time.time()
        for i in range(n):
            procs.append(subprocess.Popen(argv, env=env, stdout=logs[i],
                                          stderr=subprocess.STDOUT,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout
        while len(glob.glob(os.path.join(out, "*.json"))) < n:
            if time.monotonic() > deadline:
                raise RuntimeError("%s, %d nodes: %d of %d workers running after %d s"
                                   % (backend, n, len(glob.glob(os.path.join(out, "*.json"))),
                                      n, timeout))
            bad = [p.returncode for p in procs if p.poll() not in (None, 0)]
            if bad:
                with open(os.path.join(tmp, "torchrun-0.log")) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError("%s, %d nodes: a torchrun exited %s\n%s"
                                   % (backend, n, bad, tail))
            time.sleep(0.1)
        got = []
        for f in glob.glob(os.path.join(out, "*.json")):
            with open(f) as h:
                got.append(json.load(h))
        assert all(g["world"] == n for g in got), got
        for p in procs:
            try:
                p.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        phases = {}
        for g in got:
            for k, v in dict(g.get("phases", {}), spawned=g["spawned"],
                             running=g["running"]).items():
                phases[k] = max(phases.get(k, 0), v - t0)
        return (max(g["spawned"] for g in got) - t0,
                max(g["running"] for g in got) - t0, phases)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        # Workers of a killed torchrun are in its session.
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="8,32",
                    help="comma-separated node counts (default 8,32)")
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"),
                    help="the meson build folder (rdzvd, rdzv-agent)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds per run before giving up (default 600)")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each backend per count; the ratios are "
                    "of the medians (default 1)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter with torch that runs torchrun and "
                    "its workers (default: the one running this script)")
    args = ap.parse_args()
    counts = [int(x) for x in args.nodes.split(",") if x]
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    p = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("torchrun_bench.py: %s cannot import torch "
              "(Debian: python3-torch)" % args.python, file=sys.stderr)
        return 3
    print("cpus: %d" % os.cpu_count())
    print("torch: %s (%s)" % (p.stdout.strip(), args.python))
    for k, n in enumerate(counts):
        res = {"c10d": [], "rdzv": []}
        for i in range(args.runs):
            # Alternate which goes first, from run to run and count to
            # count, so that neither always runs on a machine the other
            # has just warmed (or loaded).
            order = ["c10d", "rdzv"] if (k + i) % 2 == 0 else ["rdzv", "c10d"]
            for backend in order:
                try:
                    s, r, phases = run_once(backend, n, args.build,
                                            args.timeout, args.python)
                except RuntimeError as e:
                    print("torchrun_bench.py: %s" % e, file=sys.stderr)
                    return 1
                res[backend].append((s, r))
                print("torchrun+%s at %d nodes: last worker spawned %.1f s, "
                      "all running %.1f s" % (backend, n, s, r), flush=True)
                print("  phases, the last node's (s): %s" % ", ".join(
                    "%s %.2f" % (name, v) for name, v in
                    sorted(phases.items(), key=lambda kv: kv[1])), flush=True)
        med = {b: (statistics.median(x[0] for x in v),
                   statistics.median(x[1] for x in v)) for b, v in res.items()}
        (cs, cr), (rs, rr) = med["c10d"], med["rdzv"]
        if args.runs > 1:
            print("medians of %d runs at %d nodes: c10d %.1f s / %.1f s, "
                  "rdzv %.1f s / %.1f s" % (args.runs, n, cs, cr, rs, rr))
        print("c10d/rdzv at %d nodes: spawned %.2fx, running %.2fx"
              % (n, cs / rs, cr / rr), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
