#!/usr/bin/python3
"""What a node loss costs a training job: the time from kill -9 of one
node to the first training step of every survivor in the smaller world
(docs/PERFORMANCE.md, docs/RECOVERY.md).

N nodes on this machine, each its own session, one worker each, an
elastic job of N-1:N nodes (N-2:N for kill2) that may restart. Once all N
train, the fault hits the last node and the bench waits for each
survivor's first step at the smaller world. Faults (--fault):

  kill   SIGKILL to every process of the last node's session and process
         tree at once; the survivors are N-1
  kill2  the same, then the same to the node before it --gap S seconds
         later (a second failure during the recovery); the survivors are
         N-2
  stop   SIGSTOP of the last node's worker process only (its agent runs
         on): a hung worker, found by the agents' --hang-timeout (default
         3s for this fault); the survivors are N-1 (or the job steps at
         N again with the stopped worker replaced on its node: said so).
         The job is N-1:N+1, so that the hung node, which joins again at
         once, waits for the last call instead of filling max_nodes.
         Needs --worker api, whose steps report progress (rdzv.progress)

Workers (--worker): api (bench/recovery_worker.py, through rdzv.elastic,
reporting each step with rdzv.progress), or plain (bench/recovery_plain.py,
an ordinary init_process_group script with no rdzv import, as existing
scripts are); both do all_reduce steps. Modes:

  agent          rdzv-agent join (workers restarted as new processes)
  agent-preload  rdzv-agent join --preload torch (new processes, forked
                 from a python that imported torch when the agent started)
  agent-inproc   rdzv-agent join --restart in-process (workers kept)
  torchrun-rdzv  torchrun with rdzv's rendezvous backend (python/rdzv)
  torchrun-c10d  torchrun with torch's c10d rendezvous (node 0 hosts it)

One line per run, exactly
  MODE at N nodes: recovery X.XX s (first survivor Y.YY s, start Z.Z s)
(start: from the first launch to every node's first step), then the
run's restart count, from rdzvctl status (agent modes) or the workers'
TORCHELASTIC_RESTART_COUNT (torchrun), how many survivors kept their
process, and for new plain workers when (from the fault) they started,
had imported torch and had joined their group; then each mode's medians
and their ratio to torchrun-c10d's.
The first line names the worker and the fault. Waits are bounded
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
WORKERS = {"api": os.path.join(HERE, "recovery_worker.py"),
           "plain": os.path.join(HERE, "recovery_plain.py")}
MODES = ("agent", "agent-preload", "agent-inproc", "torchrun-rdzv",
         "torchrun-c10d")


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


def hit_kill(args, procs, out):
    fault_kill(procs[-1])


def hit_kill2(args, procs, out):
    """The last node, then the one before it |args.gap| s later."""
    fault_kill(procs[-1])
    time.sleep(args.gap)
    fault_kill(procs[-2])


def hit_stop(args, procs, out):
    """SIGSTOP of the last node's worker (its latest process), not of its
    agent."""
    n = len(procs) - 1
    rs = records(out, n)
    if not rs:
        raise RuntimeError("node %d has no worker to stop" % n)
    os.kill(max(rs, key=lambda r: r["time"])["pid"], signal.SIGSTOP)


# Faults by name: each takes the arguments, the nodes' Popens and the
# records' folder; and how many nodes the fault takes away.
FAULTS = {"kill": (hit_kill, 1), "kill2": (hit_kill2, 2),
          "stop": (hit_stop, 1)}


def restart_count(args, endpoint, job):
    """The job's restart count from rdzvd (rdzvctl status -o json)."""
    got = subprocess.run([os.path.join(args.build, "client", "ctl",
                                       "rdzvctl"), "status", job, "-o",
                          "json", "--server", endpoint],
                         capture_output=True, text=True, timeout=30)
    if got.returncode != 0:
        raise RuntimeError("rdzvctl status %s: %s" % (job, got.stderr))
    return json.loads(got.stdout)["restart_count"]


def node_argv(mode, args, i, endpoint, job):
    n = args.nodes
    # A hung node comes back at once as a new node once its worker is
    # stopped: with room below max_nodes (one more than run) the job takes
    # it in after the last call, and the survivors step without it
    # meanwhile, which is what the stop fault measures.
    nn = "%d:%d" % (n - FAULTS[args.fault][1],
                    n + 1 if args.fault == "stop" else n)
    worker = WORKERS[args.worker]
    if mode.startswith("agent"):
        argv = [os.path.join(args.build, "client", "agent", "rdzv-agent"),
                "join", "--server", endpoint, "--id", job, "--nnodes", nn,
                "--nproc-per-node", "1", "--node-rank", str(i),
                "--max-restarts", "3", "--last-call", "2s",
                "--stop-timeout", "5s", "--log-dir",
                os.path.join(args.tmp, "logs-%d" % i)]
        if mode == "agent-inproc":
            argv += ["--restart", "in-process"]
        if mode == "agent-preload":
            argv += ["--preload", "torch"]
        if args.hang_timeout:
            argv += ["--hang-timeout", args.hang_timeout]
        return argv + ["--", args.python, worker]
    backend = "rdzv" if mode == "torchrun-rdzv" else "c10d"
    # The agents' last call (2 s), not torchrun's 30 s default.
    return [args.python, "-m", "rdzv.torchrun", "--nnodes", nn,
            "--nproc_per_node", "1", "--rdzv_backend", backend,
            "--rdzv_endpoint", endpoint, "--rdzv_id", job,
            "--rdzv_conf", "last_call_timeout=2",
            "--max_restarts", "3", worker]


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
        if mode.startswith("agent") or mode == "torchrun-rdzv":
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
        agents = daemon is not None and mode.startswith("agent")
        before = restart_count(args, endpoint, job) if agents else \
            max(r["restart"] for i in range(n) for r in records(out, i))
        t_fault = time.time()
        FAULTS[args.fault][0](args, procs, out)
        with open(os.path.join(tmp, "fault"), "w") as f:
            f.write("%f\n" % t_fault)
        world = n - FAULTS[args.fault][1]
        survivors = range(world)
        # A stopped worker may also be replaced on its own node (a new
        # process there): the healthy nodes then step again at world N.
        worlds = (world, n) if args.fault == "stop" else (world,)

        def firsts():
            got = []
            for i in survivors:
                rs = [r for r in records(out, i)
                      if r["world"] in worlds and r["time"] > t_fault]
                if not rs:
                    return None
                got.append(min(rs, key=lambda r: r["time"]))
            return got
        wait_until(lambda: firsts() is not None, args.timeout, procs,
                   "the survivors training at world %s" %
                   " or ".join(map(str, worlds)))
        got = firsts()
        if any(r["world"] != world for r in got):
            print("  the survivors stepped again at world %d: the stopped "
                  "node's worker was replaced on it" % n, flush=True)
        after = restart_count(args, endpoint, job) if agents else \
            max(r["restart"] for r in got)
        times = [r["time"] - t_fault for r in got]
        kept = sum(1 for i, r in zip(survivors, got)
                   if any(x["pid"] == r["pid"] and x["time"] < t_fault
                          for x in records(out, i)))
        # The plain worker's phases, from the fault, of the latest survivor
        # in each: where a new process spends its recovery.
        phases = None
        if all("started" in r and r["started"] > t_fault for r in got):
            phases = [max(r[k] for r in got) - t_fault
                      for k in ("started", "imported", "joined", "time")]
        return max(times), min(times), start, kept, after - before, phases
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
    ap.add_argument("--gap", type=float, default=0.07,
                    help="kill2: seconds from the first kill to the second "
                    "(default 0.07)")
    ap.add_argument("--worker", default="api", choices=sorted(WORKERS),
                    help="api: through rdzv.elastic (default); plain: an "
                    "ordinary init_process_group script, no rdzv import")
    ap.add_argument("--hang-timeout", default=None,
                    help="the agents' --hang-timeout (default: 3s for "
                    "--fault stop, else the agents' own default)")
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
    if args.nodes - FAULTS[args.fault][1] < 1:
        ap.error("--fault %s takes %d nodes away: --nodes must be at least "
                 "%d" % (args.fault, FAULTS[args.fault][1],
                         FAULTS[args.fault][1] + 1))
    if args.fault == "stop" and args.worker != "api":
        ap.error("--fault stop needs --worker api: a plain worker reports "
                 "no progress, so no agent can tell it is stopped")
    if args.fault == "stop" and args.hang_timeout is None:
        args.hang_timeout = "3s"
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
    fault = args.fault + (" (gap %g s)" % args.gap
                          if args.fault == "kill2" else "")
    if args.hang_timeout:
        fault += ", hang timeout %s" % args.hang_timeout
    print("cpus: %d, python: %s, backend: %s, fault: %s, worker: %s (%s), "
          "load: %s" % (os.cpu_count(), args.python, args.backend, fault,
                        args.worker, os.path.basename(WORKERS[args.worker]),
                        " ".join("%.2f" % x for x in os.getloadavg())),
          flush=True)
    res = {m: [] for m in modes}
    for k in range(args.runs):
        for m in modes:
            try:
                rec, first, start, kept, restarts, phases = \
                    run_once(m, args, k)
            except RuntimeError as e:
                print("recovery.py: %s" % e, file=sys.stderr)
                return 1
            res[m].append(rec)
            print("%s at %d nodes: recovery %.2f s (first survivor %.2f s, "
                  "start %.1f s)" % (m, args.nodes, rec, first, start),
                  flush=True)
            if kept:
                print("  (%d of %d survivors kept their worker process)"
                      % (kept, args.nodes - FAULTS[args.fault][1]),
                      flush=True)
            print("  restart count %+d" % restarts, flush=True)
            if phases is not None:
                print("  new processes: started %.2f s, torch imported %.2f "
                      "s, process group joined %.2f s, first step %.2f s "
                      "(the latest survivor of each)" % tuple(phases),
                      flush=True)
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
