#!/usr/bin/python3
"""The figures of several chaos runs in one Markdown table each
(docs/RELIABILITY.md): for each run its seed, configuration, collective
timeout, faults, violations by invariant and each job's stepping share;
then, over all runs, per fault kind, the time until every worker of each
job it hit steps again (median, p95, max).

    summary.py RUN_DIR/history.jsonl ..."""

import collections
import io
import sys
from contextlib import redirect_stdout

import check


def main():
    runs, rec = [], collections.defaultdict(list)
    by_job = collections.defaultdict(list)
    kinds = collections.Counter()
    for path in sys.argv[1:]:
        c = check.Checker(check.load(path))
        with redirect_stdout(io.StringIO()):
            c.report()
        r, share = c.figures()
        for k, xs in r.items():
            rec[k].extend(xs)
        for k, xs in c.by_job.items():
            by_job[k].extend(xs)
        kinds.update(f["kind"] for f in c.faults)
        by = collections.Counter(str(inv) for inv, _, _ in c.violations)
        runs.append((c.run.get("seed"), c.run.get("config"),
                     c.run.get("collective_s", 2.0), c.run.get("minutes"),
                     len(c.faults), len(c.violations), by, share))
    print("| seed | config | S | minutes | faults | violations | by "
          "invariant | elastic | plain | torchrun |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed, cfg, s, m, f, v, by, share in runs:
        print("| %s | %s | %g s | %g | %d | %d | %s | %s |" % (
            seed, cfg, s, m, f, v, ", ".join(
                "%s: %d" % kv for kv in sorted(by.items())) or "-",
            " | ".join("%.0f %%" % (100 * share.get(j, 0))
                       for j in ("elastic", "plain", "torchrun"))))
    print()
    jobs = ("elastic", "plain", "torchrun")
    print("| fault | injected | hit a job | median | p95 | max | %s |"
          % " | ".join("%s: hit, median, max" % j for j in jobs))
    print("|---|---|---|---|---|---|---|---|---|")
    for k in sorted(kinds):
        xs = sorted(rec.get(k, []))
        if xs:
            print("| %s | %d | %d | %.1f s | %.1f s | %.1f s | %s |" % (
                k, kinds[k], len(xs), check.pct(xs, 50), check.pct(xs, 95),
                xs[-1], " | ".join(per_job(by_job[(k, j)]) for j in jobs)))
        else:
            print("| %s | %d | 0 | - | - | - | - | - | - |" % (k, kinds[k]))


def per_job(xs):
    if not xs:
        return "-"
    xs = sorted(xs)
    return "%d, %.1f s, %.1f s" % (len(xs), check.pct(xs, 50), xs[-1])


if __name__ == "__main__":
    main()
