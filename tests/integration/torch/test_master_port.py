"""The master port under a crowded ephemeral port range (issue 44,
docs/AGENT.md "The master port"): while portcrowd.py holds an outgoing
connection on every even port of net.ipv4.ip_local_port_range and renews
thousands more on odd ones every second, a job of two nodes goes through
rounds that fail on purpose until 30 restarts are counted, and every one
of them starts its store on the master port the agents offered: the job
closes with exactly 30 restarts (each after up to three rounds that
failed again at once, not counted: docs/RENDEZVOUS.md rule 18), each
round met on its own port. Once with new worker processes every round (a store made as
torch's is, without torch, so that a round takes a fraction of a
second), once with real torch kept across rounds (--restart in-process).

And when rank 0's port is taken after all (another program listens on
it), the agent offers a new one and the job re-rounds without counting
a restart.
"""

import glob
import json
import os
import re
import resource
import socket
import sys

import pytest

torch = pytest.importorskip("torch")

import portcrowd  # noqa: E402
import rdzvagent  # noqa: E402
import rdzvnode  # noqa: E402
import rdzvtest as rt  # noqa: E402

PB = rdzvnode.pb
HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = 30


class Job(rdzvagent.AgentJob):
    worker = os.path.join(HERE, "port_worker.py")
    env_kind = "round"

    def agent(self, tag, mode, rounds=ROUNDS, args=()):
        argv = ["--nnodes", "2", "--nproc-per-node", "1",
                "--max-restarts", str(rounds), "--join-timeout", "60s",
                "--stop-timeout", "5s",
                "--log-dir", os.path.join(self.tmp, "logs-" + tag)]
        if mode == "inproc":
            argv += ["--restart", "in-process"]
        env = {"PW_OUT": self.out, "PW_MODE": mode, "PW_ROUNDS": str(rounds),
               "PW_BIND_DELAY": "0.3",
               "PYTHONPATH": os.path.join(rt.SOURCE_ROOT, "python")}
        return self.start(tag, argv + list(args), env)

    def rounds(self):
        res = {}
        for f in glob.glob(os.path.join(self.out, "round-g*-r*.json")):
            with open(f) as fp:
                d = json.load(fp)
            res.setdefault(d["generation"], {})[d["rank"]] = d
        return res


@pytest.fixture
def job(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def thirty_rounds(job, mode):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < portcrowd.needed():
        pytest.skip("crowding the port range needs %d open files; the hard "
                    "limit is %d" % (portcrowd.needed(), hard))
    with portcrowd.Crowd() as crowd:
        print("crowd: %d connections held, %d of them on odd ports"
              % (crowd.held, crowd.odd))
        for t in ("a", "b"):
            job.agent(t, mode)
        assert job.wait_exits(timeout=240) == {"a": 0, "b": 0}, job.outputs()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                     "job closed")
    taken = [e.message for e in j.events if e.kind == "master_port"]
    assert not taken, "master ports taken on a crowded host: %s" % taken
    rounds = job.rounds()
    first = min(rounds)
    assert j.restart_count == ROUNDS, j
    assert sorted(rounds) == list(range(first, j.generation + 1)), \
        sorted(rounds)
    ports, restarts = [], []
    for g in sorted(rounds):
        r = rounds[g]
        assert sorted(r) == [0, 1], (g, r)
        assert r[0]["port"] == r[1]["port"], (g, r)
        assert r[0]["restart"] == r[1]["restart"], (g, r)
        ports.append(r[0]["port"])
        restarts.append(r[0]["restart"])
    assert all(a != b for a, b in zip(ports, ports[1:])), ports
    # Each round fails before any step with the nodes of the one before:
    # up to three such rounds after a counted failure are that failure
    # again (docs/RENDEZVOUS.md rule 18), the next counts.
    assert restarts[0] == 0 and restarts[-1] == ROUNDS, restarts
    assert all(b - a in (0, 1) for a, b in zip(restarts, restarts[1:])), \
        restarts
    assert max(restarts.count(r) for r in restarts) <= 4, restarts
    for t in ("a", "b"):
        assert "failed to bind" not in job.agents[t].output()
    return rounds


def test_process_rounds_crowded(job):
    """30 rounds of new worker processes, each failing on purpose."""
    thirty_rounds(job, "process")


def test_inproc_rounds_crowded(job):
    """30 rounds of the same two torch processes (in-process restart)."""
    rounds = thirty_rounds(job, "inproc")
    for rank in (0, 1):
        assert len({r[rank]["pid"] for r in rounds.values()}) == 1, rounds


def test_taken_port_new_round_without_restart(job):
    """Node a (group rank 0) has offered its port and something listens
    on it before the round forms: a's agent sees its port taken, offers a
    new one, and the job re-rounds at once without counting a restart."""
    job.agent("a", "process", rounds=0, args=["--verbose", "--node-rank",
                                               "0"])
    taken = int(job.agents["a"].wait_line(r"master port (\d+)", 15).group(1))
    squatter = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("::", taken))
    squatter.listen(1)
    try:
        job.agent("b", "process", rounds=0, args=["--node-rank", "1"])
        assert job.wait_exits(timeout=60) == {"a": 0, "b": 0}, job.outputs()
    finally:
        squatter.close()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                     "job closed")
    rounds = job.rounds()
    assert j.restart_count == 0, j
    assert list(rounds) == [2], rounds
    port = rounds[2][0]["port"]
    assert j.generation == 2 and port != taken, (j, rounds)
    ev = [e for e in j.events if e.kind == "master_port"]
    assert len(ev) == 1, j.events
    assert ("found master port %d of generation 1 taken on its host; a new "
            "round on port %d, no restart counted" % (taken, port)) in \
        ev[0].message, ev[0].message
    assert re.search(r"generation 1: master port %d is taken on this host "
                     r"\(another program listens on it\); offering port %d "
                     r"and asking rdzvd for a new round, with no restart "
                     r"counted" % (taken, port), job.agents["a"].output()), \
        job.outputs()
