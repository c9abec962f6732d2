#!/usr/bin/python3
"""What a node loss costs a training job: the time from kill -9 of one
node to the first training step of every survivor in the smaller world
(docs/PERFORMANCE.md, docs/RECOVERY.md).

N nodes on this machine, each its own session, one worker each
(bench/recovery_worker.py: all_reduce steps), an elastic job of N-1:N
nodes that may restart. Once all N train, the last node is hit with the
fault (kill: SIGKILL to every process of its session and process tree at
once) and the bench waits for each survivor's first step at world N-1.
Modes:

  agent          rdzv-agent join (workers restarted as new processes)
  agent-inproc   rdzv-agent join --restart in-process (workers kept)
  torchrun-rdzv  torchrun with rdzv's rendezvous backend (python/rdzv)
  torchrun-c10d  torchrun with torch's c10d rendezvous (node 0 hosts it)

One line per run, exactly
  MODE at N nodes: recovery X.XX s (first survivor Y.YY s, start Z.Z s)
(start: from the first launch to every node's first step), then each
mode's medians and their ratio to torchrun-c10d's. Waits are bounded
(--timeout); every process is stopped and every file removed on exit.
Exits 1 when a run fails.
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
WORKER = os.path.join(HERE, "recovery_worker.py")
MODES = ("agent", "agent-inproc", "torchrun-rdzv", "torchrun-c10d")


def tree(pid):
    """|pid|, the processes of its session and all their descendants."""
    parent, sid = {}, {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d[6:])] = int(fields[1])
        sid[int(d[6:])] = int(fields[3])
    found = {pid} | {p for p, s in sid.items() if s == pid}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return found


def fault_kill(proc):
    """kill -9 of a node: every process of it at the same moment."""
    for p in tree(proc.pid):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


# Faults by name: each takes the node's Popen. (Issue "a real network"
# adds linkdown here.)
FAULTS = {"kill": fault_kill}


def node_argv(mode, args, i, endpoint, job):
    n = args.nodes
    nn = "%d:%d" % (n - 1, n)
    if mode.startswith("agent"):
        argv = [os.path.join(args.build, "client", "agent", "rdzv-agent"),
                "join", "--server", endpoint, "--id", job, "--nnodes", nn,
                "--nproc-per-node", "1", "--node-rank", str(i),
                "--max-restarts", "3", "--last-call", "2s",
                "--stop-timeout", "5s", "--log-dir",
                os.path.join(args.tmp, "logs-%d" % i)]
        if mode == "agent-inproc":
            argv += ["--restart", "in-process"]
        return argv + ["--", args.python, WORKER]
    backend = "rdzv" if mode == "torchrun-rdzv" else "c10d"
    # The agents' last call (2 s), not torchrun's 30 s default.
    return [args.python, "-m", "rdzv.torchrun", "--nnodes", nn,
            "--nproc_per_node", "1", "--rdzv_backend", backend,
            "--rdzv_endpoint", endpoint, "--rdzv_id", job,
            "--rdzv_conf", "last_call_timeout=2",
            "--max_restarts", "3", WORKER]


def records(out, i):
    try:
        with open(os.path.join(out, "%d.jsonl" % i)) as f:
            return [json.loads(x) for x in f if x.strip()]
    except (OSError, ValueError):
        return []


def wait_until(cond, timeout, procs, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out after %d s waiting for %s"
                               % (timeout, what))
        time.sleep(0.01)


def run_once(mode, args, k):
    n = args.nodes
    tmp = tempfile.mkdtemp(prefix="recovery-bench-")
    args.tmp = tmp
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    daemon, procs, logs = None, [], []
    try:
        if mode in ("agent", "agent-inproc", "torchrun-rdzv"):
            daemon, endpoint = start_rdzvd(args.build, tmp, new_session=True)
        else:
            endpoint = "127.0.0.1:%d" % free_port()
        job = "recovery-%s-%d-%d" % (mode, n, k)
        env = dict(os.environ, BENCH_OUT=out, BENCH_BACKEND=args.backend,
                   PYTHONPATH=os.path.join(SOURCE, "python"),
                   RDZV_AGENT=os.path.join(args.build, "client", "agent",
                                           "rdzv-agent"),
                   OMP_NUM_THREADS="1")
        t0 = time.time()
        for i in range(n):
            e = dict(env, BENCH_NODE=str(i))
            if args.backend == "nccl" and args.gpus > 1:
                e["CUDA_VISIBLE_DEVICES"] = str(i % args.gpus)
            log = open(os.path.join(tmp, "node-%d.log" % i), "w")
            logs.append(log)
            procs.append(subprocess.Popen(
                node_argv(mode, args, i, endpoint, job), env=e,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True))
            if i == 0 and mode == "torchrun-c10d":
                time.sleep(0.5)     # node 0 hosts the store, as on a cluster

        def everyone(world, after):
            return all(any(r["world"] == world and r["time"] > after
                           for r in records(out, i)) for i in range(n))
        wait_until(lambda: everyone(n, 0) or failed(procs), args.timeout,
                   procs, "%d nodes training" % n)
        if failed(procs):
            raise RuntimeError("a node exited %s" % failed(procs))
        start = max(min(r["time"] for r in records(out, i) if r["world"] == n)
                    for i in range(n)) - t0
        time.sleep(0.5)             # a few steps at full size
        t_fault = time.time()
        FAULTS[args.fault](procs[-1])
        with open(os.path.join(tmp, "fault"), "w") as f:
            f.write("%f\n" % t_fault)
        survivors = range(n - 1)

        def firsts():
            got = []
            for i in survivors:
                rs = [r for r in records(out, i)
                      if r["world"] == n - 1 and r["time"] > t_fault]
                if not rs:
                    return None
                got.append(min(rs, key=lambda r: r["time"]))
            return got
        wait_until(lambda: firsts() is not None, args.timeout, procs,
                   "the survivors training at world %d" % (n - 1))
        got = firsts()
        times = [r["time"] - t_fault for r in got]
        kept = sum(1 for i, r in zip(survivors, got)
                   if any(x["pid"] == r["pid"] and x["time"] < t_fault
                          for x in records(out, i)))
        return max(times), min(times), start, kept
    except RuntimeError as e:
        tail = ""
        for i in range(min(n, 2)):
            try:
                with open(os.path.join(tmp, "node-%d.log" % i)) as f:
                    tail += "--- node %d:\n%s" % (i, f.read()[-2000:])
            except OSError:
                pass
        raise RuntimeError("%s at %d nodes: %s\n%s" % (mode, n, e, tail))
    finally:
        for p in procs:
            fault_kill(p)
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
        if args.keep:
            print("  kept %s" % tmp, flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def failed(procs):
    return [p.returncode for p in procs if p.poll() not in (None, 0)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=3,
                    help="nodes, one worker each (default 3; at least 2)")
    ap.add_argument("--modes", default="agent-inproc,agent,torchrun-c10d",
                    help="comma-separated, of: " + ", ".join(MODES))
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per mode (default 3)")
    ap.add_argument("--python", default=sys.executable,
                    help="the workers' and torchrun's interpreter, with "
                    "torch (default: this one)")
    ap.add_argument("--fault", default="kill", choices=sorted(FAULTS),
                    help="what happens to the last node (default kill)")
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"),
                    help="the workers' process group (nccl: node i on GPU "
                    "i mod --gpus)")
    ap.add_argument("--gpus", type=int, default=1,
                    help="GPUs to spread nodes over with nccl, node i on "
                    "GPU i mod N; at least --nodes (default 1)")
    ap.add_argument("--build", default=os.environ.get(
                        "RDZV_BUILD_ROOT", os.path.join(SOURCE, "build")),
                    help="the meson build folder (rdzvd, rdzv-agent; "
                    "default $RDZV_BUILD_ROOT, else build)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds per wait before a run fails (default 120)")
    ap.add_argument("--keep", action="store_true",
                    help="keep each run's folder (logs) and say where")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or args.nodes < 2 or args.runs < 1:
        ap.error("modes must be of %s, nodes at least 2, runs at least 1"
                 % ", ".join(MODES))
    if subprocess.run([args.python, "-c", "import torch"],
                      capture_output=True).returncode != 0:
        print("recovery.py: %s cannot import torch" % args.python,
              file=sys.stderr)
        return 3
    if args.backend == "nccl":
        got = subprocess.run([args.python, "-c", "import torch; "
                              "print(torch.cuda.device_count())"],
                             capture_output=True, text=True)
        gpus = int(got.stdout.strip() or 0) if got.returncode == 0 else 0
        if args.gpus < args.nodes or gpus < args.gpus:
            print("recovery.py: --backend nccl needs a GPU per node (NCCL "
                  "refuses two ranks of one communicator on one GPU): "
                  "%d nodes, --gpus %d, %d GPUs seen" %
                  (args.nodes, args.gpus, gpus), file=sys.stderr)
            return 3
    print("cpus: %d, python: %s, backend: %s, fault: %s" %
          (os.cpu_count(), args.python, args.backend, args.fault), flush=True)
    res = {m: [] for m in modes}
    for k in range(args.runs):
        for m in modes:
            try:
                rec, first, start, kept = run_once(m, args, k)
            except RuntimeError as e:
                print("recovery.py: %s" % e, file=sys.stderr)
                return 1
            res[m].append(rec)
            print("%s at %d nodes: recovery %.2f s (first survivor %.2f s, "
                  "start %.1f s)" % (m, args.nodes, rec, first, start),
                  flush=True)
            if kept:
                print("  (%d of %d survivors kept their worker process)"
                      % (kept, args.nodes - 1), flush=True)
    ref = statistics.median(res["torchrun-c10d"]) if "torchrun-c10d" in res \
        else None
    for m in modes:
        med = statistics.median(res[m])
        ratio = " (torchrun-c10d / %s: %.1fx)" % (m, ref / med) \
            if ref is not None and m != "torchrun-c10d" else ""
        print("median %s at %d nodes: recovery %.2f s%s"
              % (m, args.nodes, med, ratio), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
