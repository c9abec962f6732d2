"""The second thing that goes wrong, with real PyTorch (gloo) through the
real rdzvd and rdzv-agent under --restart in-process (SPEC §4 rules 14,
15 and 17, docs/RECOVERY.md):

- a node killed while the survivors meet for the first new round: no
  kept worker waits in that superseded round, the survivors keep their
  processes, go on at world 2 and reach the uninterrupted run's loss,
  and the two faults are two restarts;
- a worker stopped with SIGSTOP (a hang): its node is the culprit and is
  lost, the others keep their processes and go on without it, the hang
  is one restart; the lost node joins again as a new node and is taken
  back in (no restart), and the job closes.

The workers run deploy/demo/train_elastic.py (through elastic_worker.py);
every wait is bounded.
"""

import os
import signal
import time

import pytest

pytest.importorskip("torch")

import rdzvagent  # noqa: E402
import rdzvnode  # noqa: E402
from test_recovery import Job, kill_node, reference_loss  # noqa: E402

PB = rdzvnode.pb


class Faults(Job):
    steps = 120

    def agent(self, tag, args=(), env=None, stop_timeout="20s"):
        e = {"TRAIN_STEPS": str(self.steps)}
        e.update(env or {})
        return super().agent(tag, args, e, stop_timeout, nnodes="2:4")


@pytest.fixture
def job(tmp_path, request):
    j = Faults(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def story(j):
    """The job's events, one line each, for a failed assertion."""
    return "\n".join("%s g%d %s: %s" % (e.seq, e.generation, e.kind,
                                       e.message) for e in j.events)


def training(job, tags, args=()):
    """Nodes |tags| training their first generation, each past step 5."""
    for t in tags:
        job.agent(t, args)
    starts = job.wait_files("start", lambda f: len(f) == len(tags), 90,
                            "%d workers started" % len(tags))
    g1 = min(g for g, _ in starts)
    job.wait_files("progress", lambda f: len({
        d["tag"] for d in f.values() if d["generation"] == g1}) ==
        len(tags), 30, "every worker past step 5")
    return g1, job.by_tag("start", g1)


def started_at(job, world, after, tags, timeout, what):
    """The first generation above |after| in which |tags| started at
    |world|: its start files by tag."""
    def ok(f):
        gens = sorted({g for (g, _), d in f.items()
                       if g > after and d["world"] == world})
        return any(sorted(job.by_tag("start", g)) == sorted(tags)
                   for g in gens)
    got = job.wait_files("start", ok, timeout, what)
    g = min(g for (g, _), d in got.items() if g > after and d["world"] ==
            world and sorted(job.by_tag("start", g)) == sorted(tags))
    return g, job.by_tag("start", g)


def test_second_loss_during_recovery(job):
    """kill -9 of node d, then of node c 70 ms later, while a, b and c
    meet for the round without d: a and b keep their processes (the
    superseded round is left, not waited in), train at world 2 from
    their step, end with the uninterrupted run's loss; two faults, two
    restarts, both nodes lost."""
    g1, s1 = training(job, ("a", "b", "c", "d"))
    t0 = time.monotonic()
    kill_node(job, "d", s1["d"]["pid"])
    time.sleep(0.07)
    kill_node(job, "c", s1["c"]["pid"])
    g2, s2 = started_at(job, 2, g1, ("a", "b"), 60,
                        "a and b training at world 2")
    took = time.monotonic() - t0
    for t in ("a", "b"):
        assert s2[t]["pid"] == s1[t]["pid"], (t, s1[t], s2[t],
                                               job.outputs())
        assert "did not take its assignment" not in job.agents[t].output()
    assert job.wait_exits(["a", "b"], timeout=90) == {"a": 0, "b": 0}, \
        job.outputs()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                     "job closed")
    assert j.restart_count == 2, story(j)
    lost = sorted(n.node_id for n in j.nodes
                  if n.state == PB.types.NODE_STATE_LOST)
    assert len(lost) == 2, j
    final = job.by_tag("final", j.generation)
    want = reference_loss(job.steps)
    for t in ("a", "b"):
        assert final[t]["pid"] == s1[t]["pid"], final
        assert abs(final[t]["loss"] - want) <= 1e-9 * want, (final[t], want)
    print("kill -9 of d, then c 70 ms later, to a and b training at world "
          "2 in their own processes: %.2f s" % took)


def test_stopped_worker_node_pays(job):
    """SIGSTOP of node c's worker with a hang timeout of 2 s: c's agent
    finds its own worker stopped and reports the hang as its own; rdzvd
    loses c (rule 17) and a and b go on at world 2 in their own
    processes; one restart, not one per round. c's agent stops the worker
    and joins again as a new node, taken back in without a restart; the
    job closes with the uninterrupted run's loss."""
    g1, s1 = training(job, ("a", "b", "c"), ["--hang-timeout", "2s"])
    t0 = time.monotonic()
    os.kill(s1["c"]["pid"], signal.SIGSTOP)
    g2, s2 = started_at(job, 2, g1, ("a", "b"), 30,
                        "a and b training at world 2")
    took = time.monotonic() - t0
    for t in ("a", "b"):
        assert s2[t]["pid"] == s1[t]["pid"], (t, s1[t], s2[t],
                                               job.outputs())
    job.agents["c"].wait_line(r"hung, and the hang is this node's: .*"
                              r"is stopped \(T\)", 10)
    # The bystanders reported no hang of their own (their hang timer may
    # not even have run out before the culprit's report came).
    for t in ("a", "b"):
        out = job.agents[t].output()
        assert "generation %d: hung:" % g1 not in out, out
    assert job.wait_exits(timeout=120) == {"a": 0, "b": 0, "c": 0}, \
        job.outputs()
    assert not rdzvagent.alive(s1["c"]["pid"], "elastic_worker.py")
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                     "job closed")
    assert j.restart_count == 1, story(j)
    assert any(e.kind == "lost" and "hung in generation %d with a worker "
               "stopped" % g1 in e.message for e in j.events), j
    final = job.by_tag("final", j.generation)
    assert sorted(final) == ["a", "b", "c"], final
    want = reference_loss(job.steps)
    for t in ("a", "b"):
        assert final[t]["pid"] == s1[t]["pid"], final
    for d in final.values():
        assert abs(d["loss"] - want) <= 1e-9 * want, (d, want)
    print("SIGSTOP of c's worker (hang timeout 2 s) to a and b training at "
          "world 2 in their own processes: %.2f s" % took)
