#!/usr/bin/python3
"""The chaos soak (docs/RELIABILITY.md): a cluster of network namespaces
(cluster.py), three jobs at once, a seeded nemesis (nemesis.py) and an
observer that reads every job from rdzvd twice a second; all of it goes
into one history of JSON lines, which check.py judges at the end.

    chaos.py --minutes M --seed S [--config etcd|sqlite] [--out DIR]

Needs root (network namespaces); exits 77 (a skip) with the reason when
they cannot be made here. The last line is check.py's:
`chaos: F faults, V violations, J jobs, seed S`; the exit status is 0 only
with no violation, and every namespace and process the run made is gone
when it ends (a left-over is a violation too)."""

import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "netns"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import cluster as cl  # noqa: E402
import nemesis as nm  # noqa: E402
import netns  # noqa: E402


class Observer(threading.Thread):
    """Reads each job (generation, restart count, state) and its new
    events from whichever replica answers, every 0.5 s: what an operator
    sees, kept in the history (src "observer" and "event")."""

    def __init__(self, c, hist):
        super().__init__(daemon=True)
        self.c, self.hist = c, hist
        self.stop = threading.Event()
        self.seq = {j: 0 for j in c.jobs}
        self.ctls = {}

    def ctl(self, r):
        import rdzvnode
        d = self.c.daemons.get(r)
        if d is None:
            return None
        key = (r, d.pid)
        if key not in self.ctls:
            self.ctls[key] = rdzvnode.Control(d.sock)
        return self.ctls[key]

    def read(self, job, final=False):
        for r in self.c.replicas:
            ctl = self.ctl(r)
            if ctl is None:
                continue
            t_req = time.time()
            try:
                j = ctl.get_job(job, events=0, timeout=2)
                # ListEvents answers a page at a time (100 by default).
                evs, after = [], 0 if final else self.seq[job]
                while True:
                    page = ctl.list_events(job, after_seq=after, timeout=2)
                    evs.extend(page)
                    if not page or not final:
                        break
                    after = page[-1].seq
            except Exception:   # noqa: BLE001 - a standby, a dead replica
                continue
            self.hist.write(dict(src="observer", job=job, t_req=t_req,
                                 gen=j.generation, restarts=j.restart_count,
                                 state=int(j.state), replica=r,
                                 final=final))
            got = [dict(seq=e.seq, gen=e.generation, ekind=e.kind,
                        msg=e.message) for e in evs]
            if final:
                self.hist.write(dict(src="final_events", job=job,
                                     replica=r, events=got))
            else:
                for e in got:
                    self.hist.write(dict(src="event", job=job, replica=r,
                                         **e))
                    self.seq[job] = max(self.seq[job], e["seq"])
            return True
        return False

    def run(self):
        while not self.stop.is_set():
            for job in self.c.jobs:
                self.read(job)
            self.stop.wait(0.5)


def leftovers(net, out):
    """Namespaces of |net| and processes of this run still there."""
    procs = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if ("CHAOS_OUT=" + out).encode() in env.split(b"\0"):
            procs.append(int(d[6:]))
    return net.left_over(), procs


def main():
    ap = argparse.ArgumentParser(description="rdzv's chaos soak")
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--config", choices=("etcd", "sqlite"), default="etcd")
    ap.add_argument("--out", help="keep the run's files here")
    o = ap.parse_args()
    why = netns.usable()
    if why is None and o.config == "etcd" and not os.path.exists(cl.ETCD):
        why = "etcd is not installed (deploy/install-deps.sh test)"
    if why:
        print("chaos: skipped: %s" % why)
        return 77
    tmp = o.out or tempfile.mkdtemp(prefix="rdzv-chaos-")
    os.makedirs(tmp, exist_ok=True)
    hist_path = os.path.join(tmp, "history.jsonl")
    hist = cl.History(hist_path)
    net = netns.Net()
    hosts = sorted({h for _, _, hs, _, _ in cl.JOBS for h in hs})
    plan = nm.schedule(o.seed, o.minutes, o.config, hosts)
    collective = os.environ.get("CHAOS_COLLECTIVE_S", "2")
    print("chaos: seed %d, config %s, %.1f minutes, collective timeout %s s, "
          "%d faults planned:" % (o.seed, o.config, o.minutes, collective,
                                  len(plan)))
    for at, f in plan:
        print("  %7.2f s  %s" % (at, nm.describe(f)))
    sys.stdout.flush()
    rng = random.Random(o.seed)
    c = None
    try:
        hist.write(dict(src="meta", kind="run", seed=o.seed,
                        config=o.config, minutes=o.minutes,
                        collective_s=float(collective),
                        faults_planned=len(plan)))
        c = cl.Cluster(net, tmp, hist, o.config, rng)
        c.start_all()
        obs = Observer(c, hist)
        obs.start()
        t0 = time.monotonic()
        stop = threading.Event()
        nem = nm.Nemesis(c, hist, rng)
        nt = threading.Thread(target=nem.run, args=(plan, t0, stop),
                              daemon=True)
        nt.start()
        end = t0 + o.minutes * 60.0
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        stop.set()
        nt.join(30)
        for t in nem.threads:
            t.join(60)
        obs.stop.set()
        obs.join(10)
        hist.write(dict(src="meta", kind="end"))
        for job in c.jobs:
            obs.read(job, final=True)
    finally:
        if c is not None:
            c.close()
        net.close()
    ns_left, procs_left = leftovers(net, tmp)
    hist.write(dict(src="meta", kind="cleanup", namespaces=ns_left,
                    processes=procs_left))
    # The workers' own files join the history.
    for f in sorted(glob.glob(os.path.join(c.out, "w-*.jsonl"))):
        with open(f) as fp:
            for line in fp:
                if line.endswith("\n"):
                    hist.f.write(line)
    hist.close()
    print("chaos: history %s" % hist_path, flush=True)
    r = subprocess.run([sys.executable, os.path.join(HERE, "check.py"),
                        hist_path])
    if not o.out and r.returncode == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
