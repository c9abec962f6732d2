"""SPEC §4 rule 13 with the real rdzv-agent: a 3:3 job whose node leaves
cleanly (SIGTERM of its agent: what scancel of one step or a strict GPU
check does) or is evicted (`rdzvctl evict`). With --rejoin-timeout 0 (a
fixed allocation) rdzvd fails the job within 2 s, naming the node and how
it went, and the other agents exit 1 with that reason instead of idling for
the join timeout; with a rejoin window the job waits exactly that window.
Times are rdzvd's own (the job's ended_unix_ms, its events' instants, its
reported deadline), so a loaded machine does not make the test lie; every
wait is bounded."""

import re
import signal
import time

import pytest

import rdzvtest as rt

import ctlharness as h
# The job fixture is test_ctl_agents' (a private rdzvd and its agents).
from test_ctl_agents import job  # noqa: F401

T = rt.protos().types


def three(j, rejoin):
    """Three agents of a 3:3 job with --rejoin-timeout |rejoin|, running."""
    agents = [j.agent(r, 1, "3", extra=["--rejoin-timeout", rejoin])
              for r in range(3)]
    j.wait_workers(1, 3)
    return agents


def ended(j, what, timeout=20):
    """The job once it has ended (bounded wait)."""
    return rt.wait_for(lambda: (lambda g: g if g.ended_unix_ms else None)(
        j.control.get_job(j.id, events=50)), timeout, 0.05, what)


def event(job_, kind):
    evs = [e for e in job_.events if e.kind == kind]
    assert evs, (kind, job_.events)
    return evs[-1]


def test_leave_fails_a_fixed_job_at_once(job):
    j = job("dep-leave")
    agents = three(j, "0")
    victim = j.node_of(2)
    # The agent's log tells its node id (rdzvd's) from its node rank.
    agents[2].wait_line(r"joined job dep-leave as node id %d \(attempt "
                        % victim, timeout=1)
    agents[2].wait_line(r"generation 1: node rank 2 of 3 nodes, worker ranks "
                        r"2 to 2 of 3, master ", timeout=1)
    t_kill = time.time() * 1000
    agents[2].signal(signal.SIGTERM)
    g = ended(j, "the job failed after a clean leave")
    assert g.state == T.JOB_STATE_FAILED, g
    assert g.ended_unix_ms - t_kill < 2000, (g.ended_unix_ms - t_kill, g)
    assert "(node %d) left (" % victim in g.reason, g.reason
    assert "2 of min 3 nodes remain and rejoin_timeout is 0" in g.reason
    assert g.restart_count == 0
    assert agents[2].wait(20) == 128 + signal.SIGTERM, j.outputs()
    for a in agents[:2]:
        assert a.wait(20) == 1, j.outputs()
        a.wait_line(r"job dep-leave failed: node \S+ \(node %d\) left" %
                    victim, timeout=1)
    # rdzvd's journal: a line for the leave, one for the open round, one
    # for the end with its reason.
    j.daemon.wait_line(r"rdzvd: job dep-leave: left: node \S+ \(node %d\) "
                       r"left: " % victim, timeout=5)
    j.daemon.wait_line(r"rdzvd: job dep-leave: round 2 is open: 2 of min 3 "
                       r"nodes \(node \S+ \(node %d\) left \(" % victim,
                       timeout=5)
    j.daemon.wait_line(r"rdzvd: job dep-leave: failed, attempt 1, generation "
                       r"1, 0 restarts: node \S+ \(node %d\) left \(.*; 2 of "
                       r"min 3 nodes remain" % victim, timeout=5)


def test_evict_fails_a_fixed_job_at_once(job):
    j = job("dep-evict")
    agents = three(j, "0")
    victim = j.node_of(1)
    t_evict = time.time() * 1000
    r = h.check(h.ctl(j.addr, "evict", j.id, victim, "-r", "flaky NIC"))
    # What rdzvctl and the agents say is what happens: the job fails in a
    # second, not "waiting for 1 more".
    assert "; the job fails in 1 s unless a node joins: rejoin_timeout is " \
        "0" in r.stdout, r.stdout
    g = ended(j, "the job failed after an eviction")
    assert g.state == T.JOB_STATE_FAILED, g
    assert g.ended_unix_ms - t_evict < 2000, (g.ended_unix_ms - t_evict, g)
    assert "(node %d) was evicted (evicted by anonymous: flaky NIC); 2 of " \
        "min 3 nodes remain" % victim in g.reason, g.reason
    assert agents[1].wait(20) == 4, j.outputs()
    for a in (agents[0], agents[2]):
        assert a.wait(20) == 1, j.outputs()
        a.wait_line(r"round 2: 2 of min 3 nodes; the job fails in 1 s: node "
                    r"\S+ \(node %d\) was evicted" % victim, timeout=1)
        assert not re.search(r"round 2: .*waiting for 1 more", a.output()), \
            a.output()


@pytest.mark.parametrize("how", ["leave", "evict"])
def test_a_rejoin_window_is_waited_exactly(job, how):
    """--rejoin-timeout 3s: the survivors stop and wait; rdzvd reports the
    deadline; the job fails 3 s after the departure, naming it."""
    j = job("dep-win-" + how)
    agents = three(j, "3s")
    victim = j.node_of(2)
    if how == "leave":
        agents[2].signal(signal.SIGTERM)
    else:
        h.check(h.ctl(j.addr, "evict", j.id, victim))
    waiting = rt.wait_for(lambda: (lambda g: g if g.state ==
                                   T.JOB_STATE_WAITING else None)(
        j.control.get_job(j.id, events=50)), 20, 0.05, "the round waits")
    gone = event(waiting, "left" if how == "leave" else "evicted")
    # The deadline rdzvd reports is the window, less the time since.
    assert 0 < waiting.join_timeout_in_ms <= 3000, waiting
    assert waiting.join_timeout_in_ms > 3000 - (
        waiting.updated_unix_ms - gone.time_unix_ms) - 1000, waiting
    g = ended(j, "the window ran out")
    assert g.state == T.JOB_STATE_FAILED, g
    took = g.ended_unix_ms - gone.time_unix_ms
    assert 3000 <= took < 3000 + 1000, (took, g)
    assert g.reason.startswith("rejoin timeout: node "), g.reason
    assert "(node %d) %s" % (victim, "left" if how == "leave" else
                             "was evicted") in g.reason, g.reason
    assert "no node replaced it within 3 s (2 of min 3 nodes)" in g.reason
    for a in agents[:2]:
        assert a.wait(20) == 1, j.outputs()


def test_the_spare_is_the_node_past_max_nodes_in_node_order(job):
    """A Slurm allocation of three nodes for a 2-node job (what
    train-spare.sbatch does): the node ranked 2 (SLURM_NODEID, here
    --node-rank) is the spare although its agent starts first. It waits
    (Control/Watch) until the others formed the round, joins as the spare,
    and takes the place of a node that leaves, without a failure."""
    j = job("spare-order")
    slow = ["--last-call", "30s"]
    alloc = {"SLURM_JOB_ID": "4711", "SLURM_JOB_NUM_NODES": "3"}
    spare = j.agent(2, 1, "2", extra=slow, env_=alloc)
    spare.wait_line(r"this node is the spare by node order", timeout=10)
    others = [j.agent(r, 1, "2", extra=slow, env_=alloc) for r in (0, 1)]
    j.wait_workers(1, 2)
    spare.wait_line(r"joining as the spare by node order after the others "
                    r"formed the round", timeout=10)
    g = rt.wait_for(lambda: (lambda g: g if len(g.nodes) == 3 else None)(
        j.control.get_job(j.id)), 10, 0.05, "the spare joined")
    assert {n.rank_hint: n.state for n in g.nodes} == {
        0: T.NODE_STATE_PARTICIPANT, 1: T.NODE_STATE_PARTICIPANT,
        2: T.NODE_STATE_SPARE}, g
    others[1].signal(signal.SIGTERM)
    j.wait_workers(2, 2)
    g = j.control.get_job(j.id)
    assert g.state == T.JOB_STATE_RUNNING and g.restart_count == 0, g
    assert sorted(n.rank_hint for n in g.nodes
                  if n.state == T.NODE_STATE_PARTICIPANT) == [0, 2], g
