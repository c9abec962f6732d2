"""The rendezvous through gRPC (SPEC §3, §4, §9-§11): simulated agents
(rdzvnode.Node, one connection each) and an operator (rdzvnode.Control)
against a private rdzvd. Short timeouts keep the file well under 90 s; every
wait is bounded."""

import os
import re
import signal
import subprocess
import time

import grpc
import pytest

import rdzvtest as rt
from rdzvnode import Control, Node, RpcFailure, channel, rpc_code, stream_reader, wait_item

pb = rt.protos()
T = pb.types
R = pb.rendezvous

OK = grpc.StatusCode.OK
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PERMISSION_DENIED = grpc.StatusCode.PERMISSION_DENIED
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
INTERNAL = grpc.StatusCode.INTERNAL


class Cluster:
    """A daemon plus the nodes and control channels a test made, all closed
    at the end."""

    def __init__(self, tmp_path, args=(), creds=None, **kw):
        self.tmp_path = tmp_path
        self.args = list(args)
        self.creds = creds
        self.d = rt.Daemon(tmp_path, self.args, **kw)
        self.nodes = []
        self.ctls = []

    def node(self, name, creds=None):
        n = Node(self.d.addr, creds or self.creds, name=name)
        self.nodes.append(n)
        return n

    def ctl(self, creds=None):
        c = Control(self.d.addr, creds or self.creds)
        self.ctls.append(c)
        return c

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for n in self.nodes:
            n.close()
        for c in self.ctls:
            c.close()
        if self.d.p.poll() is None:
            rc = self.d.stop()
            if exc[0] is None:
                assert rc == 0, "rdzvd exited %s:\n%s" % (rc, self.d.output()[-4000:])
        else:
            self.d.wait()


def join_code(node, rdzv_id, **kw):
    """Joins and returns (code, details) of a refused join, OK when
    accepted."""
    try:
        node.join(rdzv_id, **kw)
        return OK, ""
    except RpcFailure as e:
        return e.code(), e.details()


def check_round(assignments, nprocs):
    """Assignments of one round, listed in rank-hint order with the given
    nproc each: one generation, same world and master, group ranks 0..n-1
    in that order, base ranks the prefix sums."""
    gens = {a.generation for a in assignments}
    assert len(gens) == 1, gens
    assert {(a.world_size, a.master_addr, a.master_port, a.group_world_size)
            for a in assignments} == {(sum(nprocs), assignments[0].master_addr,
                                       assignments[0].master_port, len(nprocs))}
    assert [a.group_rank for a in assignments] == list(range(len(nprocs)))
    base = 0
    for a, n in zip(assignments, nprocs):
        assert a.base_rank == base and a.local_world_size == n, (a, n)
        base += n


# ---------------------------------------------------------------- rounds

def test_three_nodes_get_one_consistent_round(tmp_path):
    with Cluster(tmp_path) as c:
        # Arrive out of rank-hint order; ranks must follow the hints.
        spec = [("n2", 2, 1, "127.0.0.12", 29502),
                ("n0", 0, 4, "127.0.0.10", 29500),
                ("n1", 1, 2, "127.0.0.11", 29501)]
        nodes = {}
        for name, hint, nproc, addr, port in spec:
            n = c.node(name)
            acc = n.join("e2e-three", min_nodes=3, max_nodes=3, last_call_ms=60000,
                         rank_hint=hint, nproc=nproc, advertise_addr=addr,
                         master_port=port)
            assert acc.node_id and len(acc.session_id) == 16 and not acc.resumed
            assert acc.settings.min_nodes == 3 and acc.settings.max_nodes == 3
            nodes[hint] = n
        a = [nodes[h].wait_assignment(timeout=10) for h in (0, 1, 2)]
        check_round(a, [4, 2, 1])
        assert [x.base_rank for x in a] == [0, 4, 6] and a[0].world_size == 7
        assert a[0].master_addr == "127.0.0.10" and a[0].master_port == 29500
        assert {x.rdzv_id for x in a} == {"e2e-three"}
        assert all(x.restart_count == 0 for x in a)
        # The first two were told they wait; nobody got a second round.
        assert nodes[2].kinds()[:2] == ["accepted", "waiting"]
        assert [len(nodes[h].assignments()) for h in (0, 1, 2)] == [1, 1, 1]
        node_ids = {nodes[h].node_id for h in nodes}
        assert len(node_ids) == 3
        assert len({nodes[h].session_id for h in nodes}) == 3

        ctl = c.ctl()
        job = ctl.get_job("e2e-three")
        assert job.state == T.JOB_STATE_RUNNING
        assert job.generation == a[0].generation and job.world_size == 7
        assert job.master_addr == "127.0.0.10" and job.master_port == 29500
        assert job.participants == 3 and job.owner == "anonymous"
        by_id = {n.node_id: n for n in job.nodes}
        assert set(by_id) == node_ids
        for h, x in zip((0, 1, 2), a):
            jn = by_id[nodes[h].node_id]
            assert (jn.group_rank, jn.base_rank, jn.state) == \
                (x.group_rank, x.base_rank, T.NODE_STATE_PARTICIPANT)
        assert "e2e-three" in [j.rdzv_id for j in ctl.list_jobs()]
        kinds = [e.kind for e in ctl.list_events("e2e-three")]
        assert "round" in kinds and kinds.count("join") >= 3, kinds


def test_waiting_then_last_call(tmp_path):
    # 2:3 with a short last call: two nodes form a round after it passes.
    with Cluster(tmp_path) as c:
        a, b = c.node("a"), c.node("b")
        a.join("e2e-lastcall", min_nodes=2, max_nodes=3, last_call_ms=300)
        w = a.wait_event("waiting")
        assert (w.participants, w.min_nodes, w.max_nodes) == (1, 2, 3)
        t0 = time.monotonic()
        b.join("e2e-lastcall", min_nodes=2, max_nodes=3)
        x, y = a.wait_assignment(timeout=5), b.wait_assignment(timeout=5)
        assert time.monotonic() - t0 >= 0.25
        assert x.generation == y.generation and x.world_size == 2


def lost_node_setup(c, rdzv_id, max_restarts):
    nodes = [c.node("host-%d" % i) for i in range(3)]
    for i, n in enumerate(nodes):
        n.join(rdzv_id, min_nodes=2, max_nodes=3, last_call_ms=200,
               max_restarts=max_restarts, reconnect_grace_ms=500,
               lease_ttl_ms=5000, rank_hint=i)
    first = [n.wait_assignment(timeout=10) for n in nodes]
    check_round(first, [1, 1, 1])
    return nodes, first[0].generation


def test_lost_node_restarts_the_job(tmp_path):
    with Cluster(tmp_path) as c:
        nodes, g = lost_node_setup(c, "e2e-lost", max_restarts=1)
        t0 = time.monotonic()
        nodes[2].close()
        new = [n.wait_assignment(after=g, timeout=2.5) for n in nodes[:2]]
        assert time.monotonic() - t0 < 2.5
        check_round(new, [1, 1])
        assert all(x.restart_count == 1 for x in new)
        job = c.ctl().get_job("e2e-lost")
        assert job.restart_count == 1 and job.generation == new[0].generation
        lost = [n for n in job.nodes if n.node_id == nodes[2].node_id]
        assert lost == [] or lost[0].state == T.NODE_STATE_LOST


def test_failure_while_a_node_is_away_loses_it_at_once(tmp_path):
    """A FAILED report while a member of the round is away (its connection
    closed, its reconnect grace running) makes its loss certain (SPEC §4
    rule 14): it is lost at once, the new round comes without waiting out
    the grace, and the failure counts once."""
    with Cluster(tmp_path) as c:
        nodes = [c.node("host-%d" % i) for i in range(3)]
        for i, n in enumerate(nodes):
            n.join("e2e-held", min_nodes=2, max_nodes=3, last_call_ms=200,
                   max_restarts=2, reconnect_grace_ms=3000, rank_hint=i)
        g = [n.wait_assignment(timeout=10) for n in nodes][0].generation
        ctl = c.ctl()

        def away():
            return [n for n in ctl.get_job("e2e-held").nodes
                    if n.node_id == nodes[2].node_id and not n.connected]
        nodes[2].close()
        rt.wait_for(away, timeout=5, what="host-2 seen away")
        t0 = time.monotonic()
        nodes[0].report(g, "FAILED", exits=[(0, 1, 0)], message="peer gone")
        new = [n.wait_assignment(after=g, timeout=10) for n in nodes[:2]]
        assert time.monotonic() - t0 < 2.0      # not the 3 s grace
        check_round(new, [1, 1])
        job = ctl.get_job("e2e-held")
        assert (job.held_failure, job.restart_count) == ("", 1), job
        assert all(x.restart_count == 1 for x in new)


def test_lost_node_fails_the_job_without_restarts(tmp_path):
    with Cluster(tmp_path) as c:
        nodes, g = lost_node_setup(c, "e2e-lostfail", max_restarts=0)
        lost_id = nodes[2].node_id
        nodes[2].close()
        for n in nodes[:2]:
            f = n.wait_event("failed", timeout=2.5)
            assert "host-2" in f.reason and str(lost_id) in f.reason, f.reason
            assert n.end(timeout=5)[0] == OK
        job = c.ctl().get_job("e2e-lostfail")
        assert job.state == T.JOB_STATE_FAILED and "host-2" in job.reason
        # A failed job may be reopened by a new join (a requeue): attempt 2,
        # the generation keeps counting.
        n = c.node("requeue")
        acc = n.join("e2e-lostfail", min_nodes=2, max_nodes=3)
        assert acc.attempt == 2


def fixed_three(c, rdzv_id, rejoin_timeout_ms, nodes=3):
    """Three nodes of a fixed allocation (min = max = 3) and, with nodes=4,
    a hot spare; a lost node counts after 300 ms away."""
    ns = [c.node("slot-%d" % i) for i in range(nodes)]
    for i, n in enumerate(ns):
        n.join(rdzv_id, min_nodes=3, max_nodes=3, max_restarts=3,
               reconnect_grace_ms=300, lease_ttl_ms=5000, rank_hint=i,
               rejoin_timeout_ms=rejoin_timeout_ms)
    g = [n.wait_assignment(timeout=10) for n in ns[:3]][0].generation
    return ns, g


def test_rejoin_timeout_zero_fails_at_once_naming_the_node(tmp_path):
    """Rule 13 in a fixed allocation (what rdzv-agent asks for under Slurm
    and PBS): a lost node fails the job at once, naming it, and both
    survivors are told; the settings show rejoin_timeout 0."""
    with Cluster(tmp_path) as c:
        ns, g = fixed_three(c, "e2e-rejoin0", 0)
        ctl = c.ctl()
        assert ctl.get_job("e2e-rejoin0").settings.rejoin_timeout_ms == 0
        lost_id = ns[1].node_id
        t0 = time.monotonic()
        ns[1].close()
        for n in (ns[0], ns[2]):
            f = n.wait_event("failed", timeout=5)
            assert "slot-1 (node %d) was lost" % lost_id in f.reason, f.reason
            assert "rejoin_timeout is 0" in f.reason, f.reason
            assert n.end(timeout=5)[0] == OK
        assert time.monotonic() - t0 < 3
        job = ctl.get_job("e2e-rejoin0")
        assert job.state == T.JOB_STATE_FAILED and "slot-1" in job.reason, job


def test_rejoin_timeout_waits_then_names_the_node(tmp_path):
    """With a rejoin timeout the survivors wait that long (not the join
    timeout) and the failure names the lost node; GetJob counts the wait
    down meanwhile."""
    with Cluster(tmp_path) as c:
        ns, g = fixed_three(c, "e2e-rejoin", 1500)
        ctl = c.ctl()
        ns[2].close()
        s = ns[0].wait_event("stop", timeout=5)
        assert s.generation == g
        job = ctl.get_job("e2e-rejoin")
        assert job.state == T.JOB_STATE_WAITING, job
        assert 0 <= job.join_timeout_in_ms <= 1500, job
        assert job.settings.join_timeout_ms == 600000, job
        f = ns[0].wait_event("failed", timeout=5)
        assert f.reason.startswith("rejoin timeout: node slot-2"), f.reason
        assert "within 1.5 s" in f.reason, f.reason


def test_hot_spare_replaces_a_lost_node_at_once(tmp_path):
    """A fourth node of a 3-node job is a spare; with rejoin_timeout 0 it
    still takes the lost node's place at once (a new generation)."""
    with Cluster(tmp_path) as c:
        ns, g = fixed_three(c, "e2e-spare", 0, nodes=4)
        ns[3].wait_event("waiting", timeout=5)
        ns[0].close()
        new = [n.wait_assignment(after=g, timeout=5) for n in ns[1:]]
        check_round(new, [1, 1, 1])
        assert c.ctl().get_job("e2e-spare").state == T.JOB_STATE_RUNNING


def test_scancel_ends_the_job_at_once_with_a_current_reason(tmp_path):
    """Rule 13: every node leaves (scancel sends SIGTERM to every agent)
    and the job fails at once, 'cancelled: every node left', instead of
    waiting with a stale 'round 2 is open' reason beside 0 participants;
    each leaver's Join stream ends with OK."""
    with Cluster(tmp_path) as c:
        ns, g = fixed_three(c, "e2e-scancel", None)
        ctl = c.ctl()
        ns[0].leave("sigterm")
        assert ns[0].end(timeout=5)[0] == OK
        job = ctl.get_job("e2e-scancel")
        assert job.state == T.JOB_STATE_WAITING, job
        assert "2 of min 3 nodes" in job.reason and "slot-0" in job.reason, job
        for n in ns[1:]:
            n.leave("sigterm")
            assert n.end(timeout=5)[0] == OK
        job = ctl.get_job("e2e-scancel")
        assert job.state == T.JOB_STATE_FAILED, job
        assert job.reason == "cancelled: every node left", job
        assert job.join_timeout_in_ms == -1, job


def test_worker_failure_report_and_stale_generation(tmp_path):
    with Cluster(tmp_path) as c:
        a, b = c.node("a"), c.node("b")
        for n in (a, b):
            n.join("e2e-report", min_nodes=2, max_nodes=2, max_restarts=1)
        g = a.wait_assignment().generation
        b.wait_assignment(generation=g)
        r = a.report(g, "FAILED", exits=[(0, 1, 0)], message="boom")
        assert r.restart_count == 1
        g2 = a.wait_assignment(after=g).generation
        assert b.wait_assignment(after=g).generation == g2 > g
        # b reports the old generation: stale, refused, ignored.
        code, details, _ = rpc_code(b.report, g, "FAILED", exits=[(0, 1, 0)])
        assert code == FAILED_PRECONDITION, (code, details)
        assert str(g2) in details, details
        assert c.ctl().get_job("e2e-report").restart_count == 1
        # Unknown sessions are NOT_FOUND, for every call.
        bogus = os.urandom(16)
        code, details, _ = rpc_code(a.report, g2, "FAILED", session_id=bogus)
        assert code == NOT_FOUND, (code, details)
        code, details, _ = rpc_code(a.leave, session_id=bogus)
        assert code == NOT_FOUND, (code, details)
        x = c.node("x")
        x.rdzv_id, x.session_id = "e2e-report", bogus
        with pytest.raises(RpcFailure) as e:
            x.resume(1)
        assert e.value.code() == NOT_FOUND
        # A session id of the wrong length is an unknown session too.
        for short in (b"x", b"short"):
            code, details, _ = rpc_code(a.report, g2, "FAILED", session_id=short)
            assert code == NOT_FOUND, (code, details)
            code, details, _ = rpc_code(a.leave, session_id=short)
            assert code == NOT_FOUND, (code, details)
        x.session_id = b"short"
        with pytest.raises(RpcFailure) as e:
            x.resume(1)
        assert e.value.code() == NOT_FOUND
        # A planned leave re-rounds without a restart... but here min=2,
        # so the survivor is told to stop and wait. The leaver's Join
        # stream ends (OK) once the leave is committed.
        a.leave("sigterm")
        assert a.end(timeout=5)[0] == OK
        s = b.wait_event("stop", timeout=5)
        assert s.generation == g2
        assert c.ctl().get_job("e2e-report").restart_count == 1


def test_success_closes_the_job_and_refuses_joins(tmp_path):
    with Cluster(tmp_path) as c:
        a = c.node("a")
        a.join("e2e-done", min_nodes=1, max_nodes=1)
        g = a.wait_assignment().generation
        a.report(g, "SUCCEEDED", exits=[(0, 0, 0)])
        a.wait_event("closed", timeout=5)
        assert a.end()[0] == OK
        job = c.ctl().get_job("e2e-done")
        assert job.state == T.JOB_STATE_CLOSED and job.ended_unix_ms > 0
        code, details = join_code(c.node("late"), "e2e-done", min_nodes=1, max_nodes=1)
        assert code == FAILED_PRECONDITION, (code, details)
        assert "use a new --id" in details and "e2e-done" in details


# ----------------------------------------------------------- validation

def test_min_max_mismatch_names_both_values(tmp_path):
    with Cluster(tmp_path) as c:
        a = c.node("a")
        a.join("e2e-mismatch", min_nodes=2, max_nodes=3, last_call_ms=1234)
        code, details = join_code(c.node("b"), "e2e-mismatch", min_nodes=2, max_nodes=5)
        assert code == INVALID_ARGUMENT, (code, details)
        assert "max_nodes" in details and re.search(r"\b3\b", details) \
            and re.search(r"\b5\b", details), details
        code, details = join_code(c.node("c"), "e2e-mismatch", min_nodes=1, max_nodes=3)
        assert code == INVALID_ARGUMENT, (code, details)
        assert "min_nodes" in details and re.search(r"\b2\b", details) \
            and re.search(r"\b1\b", details), details
        # Other settings of a later joiner are ignored; it is told the job's.
        acc = c.node("d").join("e2e-mismatch", min_nodes=2, max_nodes=3,
                               last_call_ms=99, max_restarts=7)
        assert acc.settings.last_call_timeout_ms == 1234
        assert acc.settings.max_restarts == 0


@pytest.mark.parametrize("bad", ["none", "x" * 129, "bad id", "a/b", "", "é"])
def test_bad_rdzv_id(tmp_path, bad):
    with Cluster(tmp_path) as c:
        code, details = join_code(c.node("a"), bad, min_nodes=1, max_nodes=1)
        assert code == INVALID_ARGUMENT, (bad, code, details)
        ok = c.node("b").join("x" * 128 + "", min_nodes=1, max_nodes=1)
        assert ok.node_id


def test_bad_settings(tmp_path):
    with Cluster(tmp_path) as c:
        code, details = join_code(c.node("a"), "e2e-bad", min_nodes=3, max_nodes=2)
        assert code == INVALID_ARGUMENT, (code, details)
        code, details = join_code(c.node("b"), "e2e-bad", min_nodes=1, max_nodes=1, nproc=0)
        assert code == INVALID_ARGUMENT, (code, details)


def test_oversized_and_garbage_requests(tmp_path):
    with Cluster(tmp_path) as c:
        big = c.node("big")
        code, details = join_code(big, "e2e-big", min_nodes=1, max_nodes=1,
                                  hostname="h" * (6 << 20))
        assert code == RESOURCE_EXHAUSTED, (code, details)
        # Undecodable bytes: a length-delimited field cut short.
        with channel(c.d.addr) as ch:
            raw = ch.unary_stream("/rdzv.v1.Rendezvous/Join")
            with pytest.raises(grpc.RpcError) as e:
                list(raw(b"\x0a\x40abc", timeout=5))
            assert e.value.code() == INTERNAL
            raw = ch.unary_unary("/rdzv.v1.Rendezvous/Report")
            with pytest.raises(grpc.RpcError) as e:
                raw(b"\x0a\x40abc", timeout=5)
            assert e.value.code() == INTERNAL
        # The daemon keeps serving, the big node's connection included.
        assert big.join("e2e-big", min_nodes=1, max_nodes=1).node_id
        big.wait_assignment(timeout=5)
        assert c.ctl().server_info().version


# --------------------------------------------------------- daemon restart

def test_daemon_crash_keeps_generation_and_assignments(tmp_path):
    c = Cluster(tmp_path)
    with c:
        nodes = [c.node("r%d" % i) for i in range(2)]
        for i, n in enumerate(nodes):
            n.join("e2e-crash", min_nodes=2, max_nodes=2, rank_hint=i,
                   lease_ttl_ms=10000, reconnect_grace_ms=10000,
                   advertise_addr="127.0.0.%d" % (20 + i), master_port=29600 + i)
        before = [n.wait_assignment() for n in nodes]
        job0 = c.ctl().get_job("e2e-crash")

        port, db = c.d.port, c.d.db
        c.d.kill()
        for n in nodes:
            code, _ = n.end(timeout=10)
            assert code != OK
        c.d = rt.Daemon(tmp_path, listen="127.0.0.1:%d" % port, db=db)
        ctl = Control(c.d.addr)
        c.ctls.append(ctl)
        job = ctl.get_job("e2e-crash")
        assert job.state == T.JOB_STATE_RUNNING
        assert (job.generation, job.world_size, job.master_addr, job.master_port,
                job.restart_count) == (job0.generation, job0.world_size,
                                       job0.master_addr, job0.master_port, 0)
        assert sorted((n.node_id, n.group_rank, n.base_rank) for n in job.nodes) == \
            sorted((n.node_id, n.group_rank, n.base_rank) for n in job0.nodes)

        for n, a in zip(nodes, before):
            acc = n.resume(a.generation)
            assert acc.resumed and acc.node_id == n.node_id
            again = n.wait_event("assignment", timeout=5)
            assert again == a, (again, a)
            assert "stop" not in n.kinds()
        job = ctl.get_job("e2e-crash")
        assert job.generation == job0.generation and job.restart_count == 0
        # Nothing more arrives: no new generation.
        assert all(len(n.assignments()) == 2 for n in nodes)


def test_gpu_results_and_offer_updates(tmp_path):
    """Each GPU's result is kept with its node and survives a restart; an
    UPDATE with fewer workers re-rounds a running job without a restart,
    and a fresh port offered by rank 0 is the next round's master port."""
    def gpus(req, bad=(2,)):
        for d in range(4):
            g = req.gpus.add(device=d, name="Fake GPU", uuid="GPU-%d" % d,
                             ok=d not in bad, total_mem=1 << 30)
            if d in bad:
                g.failed_step, g.error = "alloc", "CUDA_ERROR_OUT_OF_MEMORY"
    c = Cluster(tmp_path)
    with c:
        a, b = c.node("g0"), c.node("g1")
        a.join("gpus", min_nodes=2, max_nodes=2, rank_hint=0, nproc=3,
               master_port=29700, extra=gpus, lease_ttl_ms=10000,
               reconnect_grace_ms=10000)
        b.join("gpus", min_nodes=2, max_nodes=2, rank_hint=1, nproc=1)
        first = a.wait_assignment()
        assert (first.world_size, first.master_port) == (4, 29700)

        def check(job):
            node = [n for n in job.nodes if n.hostname == "g0"][0]
            assert (node.gpus_healthy, node.gpus_total) == (3, 4)
            got = [(g.device, g.ok, g.failed_step, g.error) for g in node.gpus]
            assert got == [(0, True, "", ""), (1, True, "", ""),
                           (2, False, "alloc", "CUDA_ERROR_OUT_OF_MEMORY"),
                           (3, True, "", "")]
        check(c.ctl().get_job("gpus"))

        # A fresh port first (no new round), then device 1 fails its
        # worker's check: two workers.
        report = a._unary("Report", R.ReportRequest, R.ReportResponse)
        report(R.ReportRequest(session_id=a.session_id,
                               generation=first.generation,
                               outcome=R.OUTCOME_UPDATE, master_port=29711),
               timeout=10)
        assert c.ctl().get_job("gpus").generation == first.generation
        req = R.ReportRequest(session_id=a.session_id, generation=first.generation,
                              outcome=R.OUTCOME_UPDATE, nproc=2)
        req.gpus.add(device=0, ok=True)
        report(req, timeout=10)
        second = b.wait_assignment(after=first.generation)
        assert second.world_size == 3 and second.base_rank == 2
        assert second.master_port == 29711 and second.restart_count == 0

        port, db = c.d.port, c.d.db
        c.d.kill()
        c.d = rt.Daemon(tmp_path, listen="127.0.0.1:%d" % port, db=db)
        ctl = Control(c.d.addr)
        c.ctls.append(ctl)
        job = ctl.get_job("gpus")
        node = [n for n in job.nodes if n.hostname == "g0"][0]
        assert [(g.device, g.ok) for g in node.gpus] == [(0, True)]
        assert (job.generation, job.world_size, job.restart_count) == \
            (second.generation, 3, 0)


# ------------------------------------------------------------ operators

def test_last_seen_follows_the_connection(tmp_path):
    """A connected node answers rdzvd's keepalive PINGs, so its last_seen
    moves on without any call; once it disconnects, it is the time of the
    disconnect."""
    with Cluster(tmp_path, ["--keepalive", "100ms"]) as c:
        n = c.node("seen")
        n.join("e2e-seen", min_nodes=1, max_nodes=1)
        n.wait_assignment(timeout=10)
        ctl = c.ctl()

        def node_if(pred):
            x = ctl.get_job("e2e-seen").nodes[0]
            return x if pred(x) else None
        first = node_if(lambda x: True)
        assert first.connected and first.last_seen_unix_ms >= first.joined_unix_ms
        later = rt.wait_for(
            lambda: node_if(lambda x: x.last_seen_unix_ms >= first.last_seen_unix_ms + 500),
            timeout=10, what="last_seen to follow the keepalive PINGs")
        assert later.connected
        n.close()
        gone = rt.wait_for(lambda: node_if(lambda x: not x.connected),
                           timeout=10, what="the node to be seen disconnected")
        assert gone.last_seen_unix_ms >= later.last_seen_unix_ms


def test_control_close_abort_evict_and_watch(tmp_path):
    with Cluster(tmp_path) as c:
        ctl = c.ctl()
        nodes = [c.node("o%d" % i) for i in range(3)]
        for i, n in enumerate(nodes):
            n.join("e2e-ops", min_nodes=2, max_nodes=3, rank_hint=i, max_restarts=0)
        g = [n.wait_assignment() for n in nodes][0].generation
        # Watch the job: its current state first, then each change.
        w = ctl.watch("e2e-ops", timeout=30)
        items, cv, st = stream_reader(w)
        first = wait_item(items, cv, st, lambda e: True, timeout=3,
                          what="the current state in Watch")
        assert first.job.rdzv_id == "e2e-ops" and first.job.generation == g
        assert first.job.state == T.JOB_STATE_RUNNING

        # Evict one: it is told, the others re-round without a restart.
        job = ctl.evict_node("e2e-ops", nodes[2].node_id, reason="bad disk")
        assert job.rdzv_id == "e2e-ops"
        ev = nodes[2].wait_event("evicted", timeout=5)
        assert "bad disk" in ev.reason, ev.reason
        new = [n.wait_assignment(after=g, timeout=5) for n in nodes[:2]]
        check_round(new, [1, 1])
        assert all(x.restart_count == 0 for x in new)
        wait_item(items, cv, st, lambda e: e.job.generation == new[0].generation,
                  timeout=3, what="the new round in Watch")
        code, _, _ = rpc_code(ctl.evict_node, "e2e-ops", 999999)
        assert code == NOT_FOUND

        # Abort: every node is told, with who and why.
        ctl.abort_job("e2e-ops", reason="maintenance")
        for n in nodes[:2]:
            f = n.wait_event("failed", timeout=5)
            assert f.reason == "aborted by anonymous: maintenance", f.reason
        wait_item(items, cv, st, lambda e: e.job.state == T.JOB_STATE_FAILED,
                  timeout=3, what="the abort in Watch")
        assert ctl.get_job("e2e-ops").state == T.JOB_STATE_FAILED
        assert "e2e-ops" not in [j.rdzv_id for j in ctl.list_jobs()]
        assert "e2e-ops" in [j.rdzv_id for j in ctl.list_jobs(all=True)]

        # Close a running job: it closes once its nodes succeed.
        a, b = c.node("ca"), c.node("cb")
        for n in (a, b):
            n.join("e2e-close", min_nodes=2, max_nodes=2)
        g = a.wait_assignment().generation
        b.wait_assignment()
        assert ctl.close_job("e2e-close").state == T.JOB_STATE_CLOSING
        for n in (a, b):
            n.report(g, "SUCCEEDED")
        for n in (a, b):
            n.wait_event("closed", timeout=5)
        assert ctl.get_job("e2e-close").state == T.JOB_STATE_CLOSED

        # Close an open round: it closes at once.
        o = c.node("open")
        o.join("e2e-close-open", min_nodes=2, max_nodes=2)
        ctl.close_job("e2e-close-open")
        o.wait_event("closed", timeout=5)

        code, _, _ = rpc_code(ctl.get_job, "e2e-no-such-job")
        assert code == NOT_FOUND
        w.cancel()


def client_cert(c, d, cn):
    key, csr, crt = (os.path.join(d, cn + ext) for ext in (".key", ".csr", ".pem"))
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn],
                 ["x509", "-req", "-in", csr, "-CA", c["ca"], "-CAkey", c["ca_key"],
                  "-CAcreateserial", "-out", crt, "-days", "2",
                  "-extfile", os.path.join(d, "client.ext")]):
        subprocess.run(["openssl"] + args, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return grpc.ssl_channel_credentials(root_certificates=rt.read(c["ca"]),
                                        private_key=rt.read(key),
                                        certificate_chain=rt.read(crt))


def test_identities_and_permissions(tmp_path):
    certs = rt.make_certs(tmp_path)
    alice, bob, carol = (client_cert(certs, str(tmp_path), cn)
                         for cn in ("alice", "bob", "carol"))
    args = ["--tls-cert", certs["server_cert"], "--tls-key", certs["server_key"],
            "--tls-ca", certs["ca"], "--admin", "CN=carol"]
    with Cluster(tmp_path, args, creds=alice) as c:
        assert c.ctl().server_info().identity == "CN=alice"
        a1, a2 = c.node("a1"), c.node("a2")
        for n in (a1, a2):
            n.join("e2e-owned", min_nodes=2, max_nodes=2, max_restarts=0)
        g = a1.wait_assignment().generation
        a2.wait_assignment()
        job = c.ctl().get_job("e2e-owned")
        assert job.owner == "CN=alice"

        # Bob may not join, report, leave or operate on alice's job.
        code, details = join_code(c.node("b", creds=bob), "e2e-owned",
                                  min_nodes=2, max_nodes=2)
        assert code == PERMISSION_DENIED, (code, details)
        thief = c.node("thief", creds=bob)
        thief.rdzv_id, thief.session_id = "e2e-owned", a1.session_id
        code, _, _ = rpc_code(thief.report, g, "FAILED")
        assert code == PERMISSION_DENIED
        code, _, _ = rpc_code(thief.leave)
        assert code == PERMISSION_DENIED
        with pytest.raises(RpcFailure) as e:
            thief.resume(g)
        assert e.value.code() == PERMISSION_DENIED
        bctl = c.ctl(creds=bob)
        for fn, args in ((bctl.close_job, ("e2e-owned",)),
                         (bctl.abort_job, ("e2e-owned", "mine now")),
                         (bctl.evict_node, ("e2e-owned", a1.node_id))):
            code, details, _ = rpc_code(fn, *args)
            assert code == PERMISSION_DENIED, (fn.__name__, code, details)
        assert a1.kinds().count("assignment") == 1 and not a1.ended()

        # Carol is an admin.
        c.ctl(creds=carol).abort_job("e2e-owned", reason="drain")
        for n in (a1, a2):
            f = n.wait_event("failed", timeout=5)
            assert f.reason == "aborted by CN=carol: drain", f.reason
