"""The chaos soak's nemesis (docs/RELIABILITY.md): a schedule of faults
drawn from a seed, printed before the run so that the run can be replayed
(`run.sh --seed S` draws the same one), and the code that injects each.

Every fault is written to the history when it starts and when it ends
(src "nemesis", phase "start" or "end"), with the hosts and jobs it hits;
the checker matches restarts and recoveries to them."""

import json
import os
import random
import signal
import subprocess
import threading
import time

import cluster as cl

NODE_KINDS = ["kill_agent", "kill_worker", "kill_host", "stop_worker",
              "link_down", "cut_rdzvd", "partition", "slow", "evict",
              "quarantine"]
SERVICE_KINDS = {"etcd": ["kill_leader", "etcd_stop"],
                 "sqlite": ["kill_leader", "slow_fsync"]}
# How often each kind is drawn, relative to the others.
WEIGHT = {"kill_agent": 2, "kill_worker": 3, "kill_host": 2,
          "stop_worker": 2, "link_down": 2, "cut_rdzvd": 2, "partition": 1,
          "slow": 2, "evict": 1, "quarantine": 1, "kill_leader": 2,
          "etcd_stop": 1, "slow_fsync": 1, "double": 2}
WARMUP_S = 20.0     # the jobs form and step before the first fault
SETTLE_S = 25.0     # no fault in the last SETTLE_S: every job steps again
GAP_S = (7.0, 15.0)


def draw(kind, rng, hosts):
    """One fault of |kind|: (kind, targets, seconds it holds, extra)."""
    if kind == "partition":
        four = rng.sample(hosts, 4)
        return dict(kind=kind, hosts=four[:2], other=four[2:],
                    hold=round(rng.uniform(3, 7), 2))
    if kind in ("kill_leader", "etcd_stop", "slow_fsync"):
        return dict(kind=kind, hosts=[], hold=round(rng.uniform(1, 4), 2))
    f = dict(kind=kind, hosts=[rng.choice(hosts)])
    if kind == "slow":
        f["hosts"] = rng.sample(hosts, rng.randint(1, 3))
        f["delay_ms"] = rng.choice([20, 50, 100, 150])
        f["loss"] = rng.choice([0.0, 0.01, 0.03])
    if kind in ("stop_worker", "link_down", "cut_rdzvd", "slow",
                "quarantine"):
        f["hold"] = round(rng.uniform(2, 6), 2)
    if kind == "kill_host":
        f["hold"] = round(rng.uniform(2, 5), 2)   # then it "reboots"
    return f


def schedule(seed, minutes, config, hosts):
    """The faults of a run: [(seconds from the start, fault)]."""
    rng = random.Random("%s/%s" % (seed, config))
    kinds = NODE_KINDS + SERVICE_KINDS[config] + ["double"]
    weights = [WEIGHT[k] for k in kinds]
    out = []
    at = WARMUP_S
    end = minutes * 60.0 - SETTLE_S
    while True:
        at += rng.uniform(*GAP_S)
        if at >= end:
            return out
        kind = rng.choices(kinds, weights)[0]
        if kind == "double":
            # Two faults close together, on different hosts where both
            # hit hosts.
            a = draw(rng.choice(kinds[:-1]), rng, hosts)
            while True:
                b = draw(rng.choice(kinds[:-1]), rng, hosts)
                if not set(a["hosts"] + a.get("other", [])) & \
                        set(b["hosts"] + b.get("other", [])):
                    break
            out.append((round(at, 2), a))
            out.append((round(at + rng.uniform(0.2, 1.5), 2), b))
        else:
            out.append((round(at, 2), draw(kind, rng, hosts)))


def describe(f):
    words = [f["kind"]] + f["hosts"]
    if "other" in f:
        words += ["|"] + f["other"]
    for k in ("hold", "delay_ms", "loss"):
        if k in f:
            words.append("%s=%s" % (k, f[k]))
    return " ".join(words)


class Nemesis:
    def __init__(self, c, hist, rng):
        self.c, self.hist, self.rng = c, hist, rng
        self.threads = []
        self.n = 0

    def jobs_of(self, f):
        if not f["hosts"]:
            return sorted(self.c.jobs)
        return sorted({self.c.host_job[h] for h in
                       f["hosts"] + f.get("other", [])})

    def run(self, plan, t0, stop):
        """Injects each fault of |plan| at its time after |t0| (a
        time.monotonic()) until |stop| is set."""
        for at, f in plan:
            while not stop.is_set() and time.monotonic() < t0 + at:
                stop.wait(min(0.2, t0 + at - time.monotonic()))
            if stop.is_set():
                return
            self.n += 1
            t = threading.Thread(target=self.inject, args=(self.n, f),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def note(self, i, f, phase, **more):
        rec = dict(src="nemesis", id=i, kind=f["kind"], phase=phase,
                   hosts=f["hosts"] + f.get("other", []),
                   jobs=self.jobs_of(f), what=describe(f))
        rec.update(more)
        self.hist.write(rec)
        if phase == "start":
            print("chaos: fault %d at %s: %s" % (i, time.strftime("%H:%M:%S"),
                                                 describe(f)), flush=True)

    def inject(self, i, f):
        try:
            self.note(i, f, "start")
            more = getattr(self, "_" + f["kind"])(f) or {}
            self.note(i, f, "end", **more)
        except Exception as e:  # noqa: BLE001 - a fault that failed is noted
            self.note(i, f, "end", error="%s: %s" % (type(e).__name__, e))

    def hold(self, f):
        time.sleep(f.get("hold", 0))

    # -- the faults

    def _kill_agent(self, f):
        p = self.c.agents.get(f["hosts"][0])
        if p is None or not p.alive():
            return {"skipped": "no agent running"}
        os.kill(p.pid, signal.SIGKILL)
        return {"pid": p.pid}

    def _kill_worker(self, f):
        pids = self.c.workers(f["hosts"][0])
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return {"pids": pids} if pids else {"skipped": "no worker running"}

    def _kill_host(self, f):
        h = f["hosts"][0]
        self.c.down(h, f["hold"] + 1.0)
        pids = self.c.host_pids(h)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.hold(f)
        return {"pids": pids}

    def _stop_worker(self, f):
        pids = self.c.workers(f["hosts"][0])
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            self.hold(f)
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        return {"pids": pids}

    def _link_down(self, f):
        h = f["hosts"][0]
        self.c.net.link_down(h)
        try:
            self.hold(f)
        finally:
            self.c.net.link_up(h)

    def _cut_rdzvd(self, f):
        h = f["hosts"][0]
        self.c.net.cut(h, self.c.replicas)
        try:
            self.hold(f)
        finally:
            self.c.net.heal(h)

    def _partition(self, f):
        for h in f["hosts"]:
            self.c.net.cut(h, f["other"])
        try:
            self.hold(f)
        finally:
            for h in f["hosts"]:
                self.c.net.heal(h)

    def _slow(self, f):
        for i, h in enumerate(f["hosts"]):
            self.c.net.slow(h, f["delay_ms"], f["loss"],
                            seed=self.rng.randrange(1 << 30))
        try:
            self.hold(f)
        finally:
            for h in f["hosts"]:
                self.c.net.fast(h)

    def _kill_leader(self, f):
        r = self.c.leader()
        if r is None:
            return {"skipped": "no leader"}
        d = self.c.daemons[r]
        d.kill()
        d.reap()
        self.hold(f)
        self.c.start_rdzvd(r)
        return {"replica": r}

    def _etcd_stop(self, f):
        self.c.etcd.kill()
        self.c.etcd.reap()
        self.hold(f)
        self.c.start_etcd()

    def _slow_fsync(self, f):
        with open(self.c.slow_file, "w"):
            pass
        try:
            self.hold(f)
        finally:
                os.unlink(self.c.slow_file)

    def ctl(self, *argv):
        socks = ",".join(d.sock for d in self.c.daemons.values())
        r = subprocess.run([cl.RDZVCTL, "--server", socks] +
                           [str(a) for a in argv], capture_output=True,
                           text=True, timeout=20)
        self.hist.write(dict(src="operator", argv=[str(a) for a in argv],
                             rc=r.returncode, out=(r.stdout + r.stderr)[-400:]))
        return r

    def _evict(self, f):
        h = f["hosts"][0]
        job = self.c.host_job[h]
        r = self.ctl("status", job, "-o", "json")
        if r.returncode != 0:
            return {"skipped": "status failed"}
        try:
            nodes = json.loads(r.stdout).get("nodes", [])
        except ValueError:
            return {"skipped": "status unreadable"}
        ids = [n["node_id"] for n in nodes if n.get("hostname") == h and
               n.get("state") not in ("lost", "left", "evicted", "LOST",
                                      "LEFT", "EVICTED")]
        if not ids:
            return {"skipped": "no node of %s in %s" % (h, job)}
        r = self.ctl("evict", job, ids[-1])
        return {"node": ids[-1], "rc": r.returncode}

    def _quarantine(self, f):
        h = f["hosts"][0]
        r = self.ctl("host", "quarantine", h)
        try:
            self.hold(f)
        finally:
            self.ctl("host", "clear", h)
        return {"rc": r.returncode}
