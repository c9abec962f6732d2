"""rdzvctl close, abort and evict (SPEC §4 rule 9) and what the agents are
told: checked on the Join streams of simulated agents (rdzvnode.Node)."""

import rdzvtest as rt
from rdzvnode import Control, Node

import ctlharness as h

T = rt.protos().types


def test_close_lets_running_workers_finish(tmp_path):
    with rt.Daemon(tmp_path) as d, Control(d.addr) as control, \
            Node(d.addr, name="host-a") as a, Node(d.addr, name="host-b") as b:
        for n in (a, b):
            n.join("cl", min_nodes=2, max_nodes=2, nproc=2)
        g = a.wait_assignment(generation=1).generation
        b.wait_assignment(generation=1)
        marks = [a.mark(), b.mark()]
        cp = h.check(h.ctl(d.addr, "close", "cl"))
        assert cp.stdout == ("job cl: closing: closed by anonymous: no new rounds; "
                             "running workers finish\n")
        job = control.get_job("cl")
        assert job.state == T.JOB_STATE_CLOSING and job.generation == g
        assert [n.state for n in job.nodes] == [T.NODE_STATE_PARTICIPANT] * 2
        # Closing again is fine and changes nothing.
        h.check(h.ctl(d.addr, "close", "cl"))
        # The workers finish: the job closes and each agent is told.
        a.report(g, "SUCCEEDED")
        b.report(g, "SUCCEEDED")
        for n, m in zip((a, b), marks):
            n.wait_event("closed", start=m)
            # Nothing stopped the workers before they finished.
            assert "stop" not in n.kinds() and "failed" not in n.kinds()
            assert len(n.assignments()) == 1
        h.wait_job(control, "cl", lambda j: j.state == T.JOB_STATE_CLOSED)


def test_close_of_an_open_round_closes_at_once(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr, name="host-a") as a:
        a.join("clw", min_nodes=2, max_nodes=2)
        cp = h.check(h.ctl(d.addr, "close", "clw", "-o", "json"))
        assert '"state": "closed"' in cp.stdout
        a.wait_event("closed")


def test_abort_stops_every_agent_with_the_reason(tmp_path):
    with rt.Daemon(tmp_path) as d, Control(d.addr) as control, \
            Node(d.addr, name="host-a") as a, Node(d.addr, name="host-b") as b:
        for n in (a, b):
            n.join("ab", min_nodes=2, max_nodes=2)
        a.wait_assignment(generation=1)
        b.wait_assignment(generation=1)
        cp = h.check(h.ctl(d.addr, "abort", "ab", "--reason", "bad input data"))
        assert cp.stdout == "job ab: failed: aborted by anonymous: bad input data\n"
        for n in (a, b):
            assert n.wait_event("failed").reason == "aborted by anonymous: bad input data"
            assert n.end()[0].name == "OK"
        job = control.get_job("ab")
        assert job.state == T.JOB_STATE_FAILED
        assert job.reason == "aborted by anonymous: bad input data"
        out = h.check(h.ctl(d.addr, "events", "ab")).stdout
        assert "aborted by anonymous: bad input data" in out


def test_evict_stops_one_agent_and_the_job_rerounds(tmp_path):
    with rt.Daemon(tmp_path) as d, Control(d.addr) as control, \
            Node(d.addr, name="host-a") as a, Node(d.addr, name="host-b") as b, \
            Node(d.addr, name="host-c") as c:
        for n, nproc in ((a, 2), (b, 2), (c, 1)):
            n.join("ev", min_nodes=2, max_nodes=3, nproc=nproc, max_restarts=1)
        for n in (a, b, c):
            n.wait_assignment(generation=1)
        cp = h.check(h.ctl(d.addr, "evict", "ev", "host-b", "-r", "ECC errors"))
        assert cp.stdout.startswith("job ev: node %d evicted\n" % b.node_id), cp.stdout
        assert b.wait_event("evicted").reason == "evicted by anonymous: ECC errors"
        b.end()
        # The others get a new round without it; no restart is counted.
        for n in (a, c):
            asg = n.wait_assignment(generation=2)
            assert asg.world_size == 3 and asg.group_world_size == 2
            assert asg.restart_count == 0
        job = control.get_job("ev")
        node_b = [n for n in job.nodes if n.node_id == b.node_id][0]
        assert node_b.state == T.NODE_STATE_EVICTED
        # By node id too, and evicting it again says it is gone.
        cp = h.check(h.ctl(d.addr, "evict", "ev", str(b.node_id)), 1)
        assert "is already evicted" in cp.stderr
        h.check(h.ctl(d.addr, "evict", "ev", str(c.node_id)))
        c.wait_event("evicted")
