"""rdzvd's journal at its default level (info): one line per job event
that matters (created, a round started with its workers and nodes, nodes
gone and how, the end and its reason), never one per node: twelve nodes
that join make one round line, and twelve leases that end in the same
instant (after a daemon restart no agent resumes) make one line with a
count. Simulated agents (rdzvnode.Node); every wait is bounded."""

import re

import rdzvtest as rt
from rdzvnode import Node


def job_lines(d, rdzv_id):
    return [l for l in d.output().splitlines()
            if "rdzvd: job %s: " % rdzv_id in l]


def test_one_line_per_job_event_not_per_node(tmp_path):
    d = rt.Daemon(tmp_path, ["--log-level", "info"])
    nodes = [Node(d.addr, name="n%02d" % i) for i in range(12)]
    d2 = None
    try:
        for i, n in enumerate(nodes):
            n.join("jl", min_nodes=12, max_nodes=12, rank_hint=i, nproc=2,
                   lease_ttl_ms=1000, max_restarts=3)
        nodes[0].wait_assignment(timeout=10)
        d.wait_line(r"job jl: round 1 started", timeout=10)
        lines = job_lines(d, "jl")
        assert len(lines) == 2, lines
        assert lines[0].endswith("job jl: created: created by anonymous: "
                                 "nodes 12:12, max_restarts 3"), lines
        assert re.search(r"job jl: round 1 started with 24 workers on 12 "
                         r"nodes \(master 127\.0\.0\.1:29500, restart 0 of "
                         r"max 3\)$", lines[1]), lines
        # rdzvd stops; no agent resumes on the one that starts again, so
        # every lease ends in the same instant.
        db, addr = d.db, d.addr
        d.kill()
        for n in nodes:
            n.close()
        d2 = rt.Daemon(tmp_path, ["--log-level", "info"], listen=addr, db=db)
        d2.wait_line(r"job jl: failed", timeout=20)
        lines = job_lines(d2, "jl")
        assert len(lines) == 2, lines
        assert re.search(r"job jl: lost: node n\d\d \(node \d+\) was lost: it "
                         r"did not reconnect within lease_ttl 1 s after rdzvd "
                         r"restarted or failed over; and 11 more nodes in the same "
                         r"instant "
                         r"\(rdzvctl events jl\)$", lines[0]), lines
        assert re.search(r"job jl: failed, attempt 1, generation 1, 0 "
                         r"restarts: every node has gone \(0 left, 12 lost, 0 "
                         r"evicted\)", lines[1]), lines
    finally:
        for n in nodes:
            n.close()
        if d.p.poll() is None:
            d.stop()
        if d2 is not None:
            d2.stop()


def test_a_failure_is_logged_once_with_what_it_did(tmp_path):
    """A node is away (rdzvd restarted and it has not resumed yet; a closed
    connection would be lost at once, SPEC §4 rule 14) and its peers
    report their workers failed, one call each: the first report is logged
    with the hold it caused; the peers' later reports of the same failure
    are not. When the away node resumes, the failure counts: one round
    line with the restart."""
    d = rt.Daemon(tmp_path)
    nodes = [Node(d.addr, name="h%d" % i) for i in range(3)]
    try:
        for i, n in enumerate(nodes):
            n.join("jh", min_nodes=3, max_nodes=3, rank_hint=i,
                   max_restarts=3, lease_ttl_ms=60000)
        gen = nodes[0].wait_assignment(timeout=10).generation
        d.wait_line(r"job jh: round 1 started", timeout=10)
        addr, db = d.addr, d.db
        d.stop()
        d = rt.Daemon(tmp_path, listen=addr, db=db)
        nodes[0].resume(gen)
        nodes[1].resume(gen)
        nodes[0].report(gen, "FAILED", message="CUDA error")
        d.wait_line(r"job jh: held: ", timeout=10)
        nodes[1].report(gen, "FAILED", message="NCCL timeout")
        nodes[2].resume(gen)
        d.wait_line(r"job jh: round 2 started with 3 workers on 3 nodes "
                    r"\(master [^)]*, restart 1 of max 3\)$", timeout=10)
        lines = job_lines(d, "jh")
        failures = [l for l in lines if "job jh: failure: " in l]
        assert len(failures) == 1, lines
        assert "node h0 (node 1) reported a worker failure in generation " \
            "1: CUDA error" in failures[0], lines
        assert len([l for l in lines if "job jh: held: " in l]) == 1, lines
    finally:
        for n in nodes:
            n.close()
        d.stop()
