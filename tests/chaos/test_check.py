"""The chaos checker (check.py) catches what it should: a clean history
passes, and histories doctored to break invariant 1 (two hosts step with
one rank), 3 (a generation seen going down; rdzvd answering an older
generation than a worker already stepped in) and 4 (a restart no fault
explains, two restarts for one fault) are each flagged, the violation
printed with the lines that prove it. Fast: no cluster, just check.py on
files written here."""

import copy
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check.py")
T0 = 1_000_000.0
LAST = re.compile(r"^chaos: (\d+) faults, (\d+) violations, (\d+) jobs, "
                  r"seed (\d+)$")


def clean():
    """Job j on hosts a and b, generation 1 at world 2; at 10 s a worker
    of b is killed (one fault), generation 2 at world 2 from 12 s, one
    restart. The observer and the events say the same."""
    h = [dict(src="meta", kind="run", seed=5, config="sqlite", minutes=1,
              t=T0),
         dict(src="meta", kind="job", job="j", jobkind="plain",
              hosts=["a", "b"], nnodes="1:2", stop_s=2.0, lease_s=3.0,
              max_restarts=10, t=T0)]
    step = {1: 0, 2: 0}
    t = T0 + 1
    while t < T0 + 30:
        gen = 1 if t < T0 + 10 else 2
        if not (T0 + 10 <= t < T0 + 12):    # the restart
            step[gen] += 1
            for rank, host in enumerate(["a", "b"]):
                h.append(dict(src="step", job="j", host=host, gen=gen,
                              rank=rank, world=2, step=step[gen],
                              pid=100 + rank + 10 * gen, restart=gen - 1,
                              t=t, hash="h%d-%d" % (gen, step[gen])))
        t += 0.1
    for k in range(60):
        t = T0 + 0.5 * k
        gen = 1 if t < T0 + 11 else 2
        h.append(dict(src="observer", job="j", gen=gen, restarts=gen - 1,
                      state=2, replica="rdzvd", final=False, t_req=t,
                      t=t + 0.01))
    h.append(dict(src="agent", kind="line", job="j", host="b", pid=7,
                  line="10:00:01.000 rdzv-agent: generation 1: node rank 1 "
                  "of 2 nodes, worker ranks 1 to 1 of 2", t=T0 + 0.9))
    h.append(dict(src="agent", kind="line", job="j", host="b", pid=7,
                  line="10:00:11.000 rdzv-agent: generation 2: node rank 1 "
                  "of 2 nodes, worker ranks 1 to 1 of 2", t=T0 + 11.5))
    h.append(dict(src="nemesis", id=1, kind="kill_worker", phase="start",
                  hosts=["b"], jobs=["j"], what="kill_worker b", t=T0 + 10))
    h.append(dict(src="nemesis", id=1, kind="kill_worker", phase="end",
                  hosts=["b"], jobs=["j"], what="kill_worker b",
                  t=T0 + 10.01))
    evs = [dict(seq=1, gen=1, ekind="round", msg="generation 1"),
           dict(seq=2, gen=2, ekind="round", msg="generation 2")]
    for e in evs:
        h.append(dict(src="event", job="j", replica="rdzvd", t=T0 + 11, **e))
    h.append(dict(src="meta", kind="end", t=T0 + 30))
    h.append(dict(src="final_events", job="j", replica="rdzvd", events=evs,
                  t=T0 + 30.1))
    h.append(dict(src="meta", kind="cleanup", namespaces=[], processes=[],
                  t=T0 + 31))
    return h


def check(tmp_path, hist):
    path = os.path.join(str(tmp_path), "history.jsonl")
    with open(path, "w") as f:
        for r in hist:
            f.write(json.dumps(r) + "\n")
    r = subprocess.run([sys.executable, CHECK, path], capture_output=True,
                       text=True, timeout=60)
    lines = r.stdout.splitlines()
    m = LAST.match(lines[-1]) if lines else None
    assert m, r.stdout + r.stderr
    return r.returncode, int(m.group(2)), r.stdout


def flagged(out, inv):
    return [line for line in out.splitlines()
            if line.startswith("VIOLATION of invariant %d:" % inv)]


def test_clean_history_passes(tmp_path):
    rc, v, out = check(tmp_path, clean())
    assert (rc, v) == (0, 0), out
    assert re.search(r"^kill_worker\s+1\s+1\s", out, re.M), out
    assert out.splitlines()[-1] == "chaos: 1 faults, 0 violations, 1 jobs, " \
        "seed 5"


def test_two_hosts_one_rank_is_invariant_1(tmp_path):
    h = clean()
    steps = [r for r in h if r["src"] == "step" and r["gen"] == 2 and
             r["host"] == "a"]
    bad = copy.deepcopy(steps[20])
    bad.update(host="c", pid=999, t=bad["t"] + 0.01)
    h.append(bad)
    rc, v, out = check(tmp_path, h)
    assert rc == 1 and v >= 1, out
    lines = flagged(out, 1)
    assert len(lines) == 1 and "rank 0 stepped on 2 hosts: a, c" in lines[0], out
    assert '"pid": 999' in out     # the line that proves it is printed


def test_generation_going_down_is_invariant_3(tmp_path):
    # A worker process that stepped in generation 2 says 1 again.
    h = clean()
    last = [r for r in h if r["src"] == "step" and r["host"] == "b"][-1]
    bad = copy.deepcopy(last)
    bad.update(gen=1, t=last["t"] + 0.05)
    h.append(bad)
    rc, _, out = check(tmp_path, h)
    lines = flagged(out, 3)
    assert rc == 1 and any("down to 1" in x for x in lines), out


def test_rdzvd_forgetting_a_generation_is_invariant_3(tmp_path):
    # After a failover rdzvd answers generation 1, though a worker had
    # stepped in generation 2 before the question: a lost round.
    h = clean()
    h.append(dict(src="observer", job="j", gen=1, restarts=0, state=2,
                  replica="r1", final=False, t_req=T0 + 20, t=T0 + 20.01))
    rc, _, out = check(tmp_path, h)
    lines = flagged(out, 3)
    assert rc == 1 and any("rdzvd said job j is in generation 1 after a "
                           "worker stepped in generation 2" in x
                           for x in lines), out


def test_restart_without_fault_is_invariant_4(tmp_path):
    h = clean()
    for r in h:
        if r["src"] == "observer" and r["t"] > T0 + 25:
            r["restarts"] = 2
    rc, _, out = check(tmp_path, h)
    lines = flagged(out, 4)
    assert rc == 1 and len(lines) == 1 and "from 1 to 2" in lines[0], out


def test_two_restarts_for_one_fault_is_invariant_4(tmp_path):
    h = clean()
    for r in h:
        if r["src"] == "observer" and r["t"] > T0 + 13:
            r["restarts"] = 2
    rc, _, out = check(tmp_path, h)
    assert rc == 1 and len(flagged(out, 4)) == 1, out


def test_restart_of_another_job_fault_is_invariant_4(tmp_path):
    # The only fault hit another job: this job's restart is unexplained.
    h = clean()
    for r in h:
        if r["src"] == "nemesis":
            r["jobs"] = ["other"]
    rc, _, out = check(tmp_path, h)
    assert rc == 1 and len(flagged(out, 4)) == 1, out
