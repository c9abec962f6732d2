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
