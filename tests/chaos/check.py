#!/usr/bin/python3
"""The chaos soak's checker (docs/RELIABILITY.md): reads a history of JSON
lines (chaos.py's, or any built by hand) and judges it. Standard library
only, so that it runs anywhere:

    check.py HISTORY.jsonl

Invariants (each violation is printed with the history lines proving it):
  1. in every job and generation each rank is held by one node: no two
     hosts step with the same (job, generation, rank);
  2. a node whose ranks were given away steps no longer than the fence
     bound (lease + stop timeout + 1 s) after the first step of a newer
     generation of its job;
  3. each job's generations only grow, as every client saw them: each
     worker process, each agent process and the observer see them grow,
     and no answer of rdzvd read after a worker stepped in generation g
     says less than g (across failovers and restarts);
  4. one fault costs at most one counted restart (rule 13): every rise of
     a job's restart count is matched to a fault that hit the job, at most
     one restart per fault and job;
  5. every job ends in the state its faults imply (failed only with its
     restarts spent) or is still stepping at the end, every rank of one
     generation; none hangs;
  6. the workers of a generation agree on the weights' hash at each step
     (so the survivors of an in-process recovery hold the same state);
  7. nothing rdzvd acknowledged is missing: every event the observer read
     is in the final event list, the same, after every restart and
     failover.
Then the figures: per fault kind, the time until every worker of each job
it hit steps again (median, p95, max), each job's stepping share of the
wall time. The last line: `chaos: F faults, V violations, J jobs, seed S`;
exit 1 with any violation."""

import collections
import json
import sys

JOB_RUNNING, JOB_FAILED = 2, 4      # rdzv.v1.JobState
BUCKET_S = 1.0
HIT_WINDOW_S = 5.0      # a job hit by a fault stalls within this after it
RESTART_WINDOW_S = 25.0  # a fault's restart is counted within this of its end
END_STEP_S = 10.0       # every rank steps within this of the end


class Checker:
    def __init__(self, recs):
        self.recs = recs
        self.violations = []
        by = collections.defaultdict(list)
        for r in recs:
            by[r.get("src")].append(r)
        self.by = by
        self.meta = {r["job"]: r for r in by["meta"] if r.get("kind") == "job"}
        run = [r for r in by["meta"] if r.get("kind") == "run"]
        self.run = run[0] if run else {}
        ends = [r["t"] for r in by["meta"] if r.get("kind") == "end"]
        self.steps = collections.defaultdict(list)
        for r in sorted(by["step"], key=lambda r: r["t"]):
            self.steps[r["job"]].append(r)
        all_t = [r["t"] for r in recs if "t" in r]
        self.t_end = ends[0] if ends else (max(all_t) if all_t else 0)
        self.t_start = min(all_t) if all_t else 0
        self.faults = self._faults()

    def _faults(self):
        starts = {}
        for r in self.by["nemesis"]:
            f = starts.setdefault(r["id"], dict(id=r["id"], kind=r["kind"],
                                                jobs=r.get("jobs", []),
                                                start=None, end=None,
                                                lines=[]))
            f["lines"].append(r)
            if r["phase"] == "start":
                f["start"] = r["t"]
            else:
                f["end"] = r["t"]
                f["skipped"] = "skipped" in r or "error" in r
        out = [f for f in starts.values() if f["start"] is not None]
        for f in out:
            if f["end"] is None:
                f["end"] = f["start"]
        return sorted(out, key=lambda f: f["start"])

    def flag(self, inv, what, lines):
        self.violations.append((inv, what, lines))

    # -- the invariants

    def inv1(self):
        held = collections.defaultdict(dict)
        for job, steps in self.steps.items():
            for s in steps:
                held[(job, s["gen"], s["rank"])].setdefault(s["host"], s)
        for (job, gen, rank), hosts in sorted(held.items()):
            if len(hosts) > 1:
                self.flag(1, "job %s generation %d rank %d stepped on %d "
                          "hosts: %s" % (job, gen, rank, len(hosts),
                                         ", ".join(sorted(hosts))),
                          list(hosts.values()))

    def inv2(self):
        for job, steps in self.steps.items():
            m = self.meta.get(job, {})
            bound = m.get("lease_s", 3.0) + m.get("stop_s", 2.0) + 1.0
            first = {}
            for s in steps:
                first.setdefault(s["gen"], s)
            gens = sorted(first)
            # The first step of any newer generation, for each generation.
            newer = {}
            best = None
            for g in reversed(gens):
                newer[g] = best
                if best is None or first[g]["t"] < best["t"]:
                    best = first[g]
            last = {}
            for s in steps:
                last[(s["gen"], s["host"])] = s
            for (g, host), s in sorted(last.items()):
                n = newer.get(g)
                if n is not None and s["t"] > n["t"] + bound:
                    self.flag(2, "job %s: host %s stepped in generation %d "
                              "%.2f s after generation %d stepped (fence "
                              "bound %.1f s)" % (job, host, g, s["t"] - n["t"],
                                                 n["gen"], bound), [n, s])

    def inv3(self):
        seen = collections.defaultdict(list)
        for job, steps in self.steps.items():
            for s in steps:
                seen[("worker", job, s["host"], s["pid"])].append((s, s["gen"]))
        for r in self.by["agent"]:
            if r.get("kind") != "line":
                continue
            g = assigned_gen(r.get("line", ""))
            if g is not None:
                seen[("agent", r["job"], r["host"], r["pid"])].append((r, g))
        obs = [r for r in self.by["observer"]]
        for r in obs:
            seen[("observer", r["job"])].append((r, r["gen"]))
        for who, xs in sorted(seen.items(), key=lambda kv: str(kv[0])):
            top = None
            for r, g in sorted(xs, key=lambda x: x[0]["t"]):
                if top is not None and g < top[1]:
                    self.flag(3, "%s saw job %s's generation go from %d "
                              "down to %d" % (" ".join(map(str, who[:1] +
                                                           who[2:])),
                                              who[1], top[1], g),
                              [top[0], r])
                    break
                if top is None or g > top[1]:
                    top = (r, g)
        for job, steps in self.steps.items():
            first = {}
            for s in steps:
                first.setdefault(s["gen"], s)
            for r in obs:
                if r["job"] != job:
                    continue
                worse = [s for g, s in first.items()
                         if g > r["gen"] and s["t"] < r.get("t_req", r["t"])]
                if worse:
                    s = max(worse, key=lambda s: s["gen"])
                    self.flag(3, "rdzvd said job %s is in generation %d "
                              "after a worker stepped in generation %d"
                              % (job, r["gen"], s["gen"]), [s, r])
                    break

    def inv4(self):
        for job in sorted(self.meta):
            obs = sorted((r for r in self.by["observer"] if r["job"] == job),
                         key=lambda r: r["t"])
            rises = []
            for a, b in zip(obs, obs[1:]):
                if b["restarts"] > a["restarts"]:
                    for _ in range(b["restarts"] - a["restarts"]):
                        rises.append((a, b))
            hit = [f for f in self.faults if job in f["jobs"]]
            used = set()
            for a, b in rises:
                cands = [f for f in hit if f["id"] not in used and
                         f["start"] - 1.0 <= b["t"] and
                         f["end"] + RESTART_WINDOW_S >= a.get("t_req", a["t"])]
                if cands:
                    used.add(cands[0]["id"])
                    continue
                near = [f["lines"][0] for f in hit
                        if abs(f["start"] - b["t"]) < 60]
                self.flag(4, "job %s's restart count rose from %d to %d "
                          "with no fault left to count it (faults of the job "
                          "within a minute: %d)" % (job, a["restarts"],
                                                    b["restarts"], len(near)),
                          [a, b] + near)

    def inv5(self):
        for job, m in sorted(self.meta.items()):
            obs = [r for r in self.by["observer"] if r["job"] == job]
            final = max(obs, key=lambda r: r["t"]) if obs else None
            if final is not None and final["state"] == JOB_FAILED:
                if final["restarts"] > m.get("max_restarts", 0):
                    continue
                self.flag(5, "job %s failed with %d restarts of %d"
                          % (job, final["restarts"], m.get("max_restarts", 0)),
                          [final])
                continue
            tail = [s for s in self.steps.get(job, [])
                    if s["t"] > self.t_end - END_STEP_S]
            by_gen = collections.defaultdict(set)
            worlds = {}
            for s in tail:
                by_gen[s["gen"]].add(s["rank"])
                worlds[s["gen"]] = s["world"]
            ok = [g for g, ranks in by_gen.items()
                  if ranks == set(range(worlds[g]))]
            if not ok:
                last = self.steps.get(job, [])[-3:]
                self.flag(5, "job %s: no generation with every rank stepping "
                          "in the last %.0f s (a hang)" % (job, END_STEP_S),
                          last + ([final] if final else []))

    def inv6(self):
        hashes = collections.defaultdict(dict)
        for job, steps in self.steps.items():
            for s in steps:
                if "hash" in s:
                    hashes[(job, s["gen"], s["step"])].setdefault(s["hash"], s)
        for (job, gen, step), hs in sorted(hashes.items()):
            if len(hs) > 1:
                self.flag(6, "job %s generation %d step %d: %d different "
                          "weights" % (job, gen, step, len(hs)),
                          list(hs.values()))

    def inv7(self):
        finals = {}
        for r in self.by["final_events"]:
            finals[r["job"]] = ({e["seq"]: e for e in r["events"]}, r)
        for r in self.by["event"]:
            if r["job"] not in finals:
                self.flag(7, "job %s: no final event list to hold event %d"
                          % (r["job"], r["seq"]), [r])
                continue
            evs, fr = finals[r["job"]]
            e = evs.get(r["seq"])
            want = (r["gen"], r["ekind"], r["msg"])
            if e is None or (e["gen"], e["ekind"], e["msg"]) != want:
                self.flag(7, "job %s: event %d, read at %.3f, is %s in the "
                          "final list" % (r["job"], r["seq"], r["t"],
                                          "missing" if e is None else
                                          "different"),
                          [r] + ([dict(e, src="final_events")] if e else []))
        for r in self.by["meta"]:
            if r.get("kind") == "cleanup" and (r.get("namespaces") or
                                               r.get("processes")):
                self.flag("cleanup", "the run left namespaces or processes "
                          "behind", [r])

    # -- the figures

    def healthy(self, job):
        """{bucket: gen} of the buckets in which every rank of one
        generation stepped."""
        got = collections.defaultdict(lambda: collections.defaultdict(set))
        world = {}
        for s in self.steps.get(job, []):
            b = int((s["t"] - self.t_start) // BUCKET_S)
            got[b][s["gen"]].add(s["rank"])
            world[s["gen"]] = s["world"]
        res = {}
        for b, gens in got.items():
            for g, ranks in gens.items():
                if ranks == set(range(world[g])):
                    res[b] = g
        return res

    def figures(self):
        rec = collections.defaultdict(list)
        self.by_job = collections.defaultdict(list)
        share = {}
        health = {job: self.healthy(job) for job in self.meta}
        for job, h in health.items():
            if not h:
                share[job] = 0.0
                continue
            b0 = min(h)
            b1 = int((self.t_end - self.t_start) // BUCKET_S)
            share[job] = len([b for b in h if b <= b1]) / max(1, b1 - b0 + 1)
        for f in self.faults:
            if f.get("skipped"):
                continue
            for job in f["jobs"]:
                h = health.get(job, {})
                b_f = int((f["start"] - self.t_start) // BUCKET_S)
                b_hit = int((f["end"] + HIT_WINDOW_S - self.t_start) // BUCKET_S)
                bad = [b for b in range(b_f + 1, b_hit + 1) if b not in h]
                if not bad:
                    continue
                u = bad[0]
                after = [b for b in h if b > u]
                if not after:
                    continue
                g = h[min(after)]
                u_t = self.t_start + u * BUCKET_S
                first = {}
                for s in self.steps[job]:
                    if s["gen"] == g and s["t"] >= u_t:
                        first.setdefault(s["rank"], s["t"])
                if first:
                    took = max(first.values()) - f["start"]
                    rec[f["kind"]].append(took)
                    self.by_job[(f["kind"], job)].append(took)
        return rec, share

    def report(self):
        for inv in (self.inv1, self.inv2, self.inv3, self.inv4, self.inv5,
                    self.inv6, self.inv7):
            inv()
        for inv, what, lines in self.violations:
            print("VIOLATION of invariant %s: %s" % (inv, what))
            for r in lines[:8]:
                print("    %s" % json.dumps(r, sort_keys=True)[:600])
        rec, share = self.figures()
        kinds = collections.Counter(f["kind"] for f in self.faults)
        print("%-12s %6s %6s %8s %8s %8s" % ("fault", "count", "hit",
                                             "median_s", "p95_s", "max_s"))
        for kind in sorted(kinds):
            xs = sorted(rec.get(kind, []))
            if xs:
                print("%-12s %6d %6d %8.2f %8.2f %8.2f" % (
                    kind, kinds[kind], len(xs), pct(xs, 50), pct(xs, 95),
                    xs[-1]))
            else:
                print("%-12s %6d %6d %8s %8s %8s" % (kind, kinds[kind], 0,
                                                     "-", "-", "-"))
        for job in sorted(share):
            print("job %-10s stepping %5.1f %% of the wall time" % (
                job, 100 * share[job]))
        n = len(self.faults)
        print("chaos: %d faults, %d violations, %d jobs, seed %s" % (
            n, len(self.violations), len(self.meta),
            self.run.get("seed", "?")))
        return 1 if self.violations else 0


def assigned_gen(line):
    """The generation of an agent's assignment line ("generation 4: node
    rank 1 of 3 nodes, ..."), else None."""
    i = line.find("generation ")
    if i < 0 or "node rank" not in line[i:]:
        return None
    num = line[i + len("generation "):].split(":", 1)[0]
    return int(num) if num.isdigit() else None


def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def load(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except ValueError:
                sys.exit("check.py: %s:%d: not JSON: %s" % (path, n, line[:80]))
    return recs


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check.py HISTORY.jsonl")
    return Checker(load(sys.argv[1])).report()


if __name__ == "__main__":
    sys.exit(main())
