#!/usr/bin/python3
"""The start of a job with and without rdzv-agent join --preload torch
(docs/AGENT.md "Warm starts", docs/RECOVERY.md): N agents started --gap
seconds apart (as a scheduler starts nodes), each with one plain
init_process_group worker (bench/recovery_plain.py), a fixed job of N nodes.
Measured: from the start of the last agent to the first training step of
the last worker. Without --preload the workers start python and import
torch after the rendezvous; with it the import ran in each agent's fork
server while it waited for the others.

One line per run, exactly
  MODE at N nodes, agents G s apart: start X.XX s (import Y.YY s)
(import: the last worker's own `import torch`, from its records; 0 when
preloaded), then each mode's median and the difference. Waits are
bounded (--timeout); every process is stopped and every file removed on
exit. Exits 1 when a run fails.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import start_rdzvd
import recovery

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
MODES = ("agent", "agent-preload")


def run_once(mode, args, k):
    n = args.nodes
    tmp = tempfile.mkdtemp(prefix="preload-start-")
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    daemon, procs, logs = None, [], []
    agent = os.path.join(args.build, "client", "agent", "rdzv-agent")
    try:
        daemon, endpoint = start_rdzvd(args.build, tmp, new_session=True)
        job = "start-%s-%d" % (mode, k)
        env = dict(os.environ, BENCH_OUT=out, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(SOURCE, "python"))
        t_last = 0.0
        for i in range(n):
            if i > 0:
                time.sleep(args.gap)    # the schedule under test
            argv = [agent, "join", "--server", endpoint, "--id", job,
                    "--nnodes", str(n), "--nproc-per-node", "1",
                    "--node-rank", str(i), "--stop-timeout", "5s",
                    "--log-dir", os.path.join(tmp, "logs-%d" % i)]
            if mode == "agent-preload":
                argv += ["--preload", "torch"]
            argv += ["--", args.python, recovery.WORKERS["plain"]]
            log = open(os.path.join(tmp, "node-%d.log" % i), "w")
            logs.append(log)
            t_last = time.time()
            procs.append(subprocess.Popen(
                argv, env=dict(env, BENCH_NODE=str(i)), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True))

        def firsts():
            got = [recovery.records(out, i) for i in range(n)]
            return got if all(got) else None
        recovery.wait_until(lambda: firsts() is not None or
                            recovery.failed(procs), args.timeout, procs,
                            "%d nodes training" % n)
        if recovery.failed(procs):
            raise RuntimeError("a node exited %s" % recovery.failed(procs))
        last = max((min(rs, key=lambda r: r["time"]) for rs in firsts()),
                   key=lambda r: r["time"])
        return last["time"] - t_last, last["imported"] - last["started"]
    except RuntimeError as e:
        tail = ""
        for i in range(n):
            try:
                with open(os.path.join(tmp, "node-%d.log" % i)) as f:
                    tail += "--- node %d:\n%s" % (i, f.read()[-1500:])
            except OSError:
                pass
        raise RuntimeError("%s at %d nodes: %s\n%s" % (mode, n, e, tail))
    finally:
        for p in procs:
            recovery.fault_kill(p)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if daemon is not None:
            daemon.terminate()
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        for log in logs:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=3,
                    help="nodes, one worker each (default 3)")
    ap.add_argument("--gap", type=float, default=2.0,
                    help="seconds between the agents' starts (default 2)")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per mode (default 3)")
    ap.add_argument("--python", default=sys.executable,
                    help="the workers' interpreter, with torch (default: "
                    "this one)")
    ap.add_argument("--build", default=os.environ.get(
                        "RDZV_BUILD_ROOT", os.path.join(SOURCE, "build")),
                    help="the meson build folder (default $RDZV_BUILD_ROOT, "
                    "else build)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds per wait before a run fails (default 120)")
    args = ap.parse_args()
    if args.nodes < 1 or args.runs < 1 or args.gap < 0:
        ap.error("nodes and runs at least 1, gap not negative")
    print("cpus: %d, python: %s, %d nodes %g s apart, load: %s"
          % (os.cpu_count(), args.python, args.nodes, args.gap,
             " ".join("%.2f" % x for x in os.getloadavg())), flush=True)
    res = {m: [] for m in MODES}
    imports = []
    for k in range(args.runs):
        for m in MODES:
            try:
                start, imp = run_once(m, args, k)
            except RuntimeError as e:
                print("preload_start.py: %s" % e, file=sys.stderr)
                return 1
            res[m].append(start)
            if m == "agent":
                imports.append(imp)
            print("%s at %d nodes, agents %g s apart: start %.2f s (import "
                  "%.2f s)" % (m, args.nodes, args.gap, start, imp),
                  flush=True)
    med = {m: statistics.median(res[m]) for m in MODES}
    for m in MODES:
        print("median %s: start %.2f s" % (m, med[m]), flush=True)
    print("agent-preload faster by %.2f s; the workers' import of torch "
          "without it: median %.2f s" % (med["agent"] - med["agent-preload"],
                                         statistics.median(imports)),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
