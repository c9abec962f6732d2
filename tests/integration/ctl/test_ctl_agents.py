"""rdzvctl close, abort and evict against the real rdzv-agent (SPEC §4 rule
9, §6): close lets the running workers finish and the job closes; abort
stops every agent's workers and the agents exit 1 with `aborted by
<identity>: <reason>`; evict stops that agent's workers, it exits 4 (the
agent's status for "refused: evicted") and the job re-rounds; someone who
neither owns the job nor is an admin is refused (4) and nothing happens.
Workers are ctlworker.py; every wait is bounded."""

import os
import signal

import pytest

import rdzvtest as rt
from rdzvnode import Control

import ctlharness as h

T = rt.protos().types
WORKER = os.path.join(h.HERE, "ctlworker.py")

class Job:
    """A private rdzvd and the real agents of one job. close() ends every
    process it started."""

    def __init__(self, tmp_path, rdzv_id, daemon_args=(), tls=None):
        self.tmp = str(tmp_path)
        self.id = rdzv_id
        self.out = os.path.join(self.tmp, "out")
        self.stop_file = os.path.join(self.tmp, "stop")
        os.makedirs(self.out)
        self.tls = tls
        self.daemon = rt.Daemon(self.tmp, list(daemon_args))
        self.addr = self.daemon.addr
        self.control = Control(self.addr, tls["creds"] if tls else None)
        self.agents = []

    def agent(self, rank, nproc, nnodes, extra=(), env_=None):
        argv = [h.AGENT, "join", "--id", self.id, "--server", self.addr,
                "--nnodes", nnodes, "--nproc-per-node", nproc, "--node-rank", rank,
                "--last-call", "1s", "--stop-timeout", "2s",
                "--log-dir", os.path.join(self.tmp, "logs-%d" % rank)] + list(extra)
        if self.tls:
            argv += ["--tls-ca", self.tls["ca"], "--tls-cert", self.tls["cert"],
                     "--tls-key", self.tls["key"]]
        argv += ["--", "/usr/bin/python3", WORKER]
        env = {"W_OUT": self.out, "W_STOP": self.stop_file}
        for k in list(os.environ):
            if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
                    "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
                env[k] = ""
        env.update(env_ or {})
        p = rt.Proc(argv, env=env)
        p.rank = rank
        self.agents.append(p)
        return p

    def marks(self, kind, gen=None):
        pre = kind + "-" + ("g%d-" % gen if gen is not None else "")
        return sorted(f for f in os.listdir(self.out)
                      if f.startswith(pre) and not f.endswith(".tmp"))

    def wait_workers(self, gen, world, timeout=20):
        return rt.wait_for(lambda: len(self.marks("start", gen)) == world and
                           self.marks("start", gen), timeout, 0.05,
                           "%d workers of generation %d (have %s)\n%s" % (
                               world, gen, self.marks("start"), self.outputs()))

    def outputs(self):
        return "\n".join("--- agent %d:\n%s" % (a.rank, a.output()) for a in self.agents)

    def node_of(self, rank):
        """The node id of the agent started with --node-rank |rank|."""
        job = self.control.get_job(self.id)
        return [n.node_id for n in job.nodes if n.has_rank_hint and n.rank_hint == rank][0]

    def close(self):
        for a in self.agents:
            if a.p.poll() is None:
                a.signal(signal.SIGKILL)
                a.wait(10)
        self.control.close()
        self.daemon.stop()


@pytest.fixture
def job(request, tmp_path):
    jobs = []

    def make(*a, **kw):
        j = Job(tmp_path, *a, **kw)
        jobs.append(j)
        return j
    yield make
    for j in jobs:
        j.close()


def test_close_lets_workers_finish_and_the_job_closes(job):
    j = job("ctl-close")
    a0, a1 = j.agent(0, 2, "2"), j.agent(1, 1, "2")
    j.wait_workers(1, 3)
    cp = h.check(h.ctl(j.addr, "close", j.id))
    assert cp.stdout.startswith("job ctl-close: closing: closed by anonymous: no new rounds")
    assert j.control.get_job(j.id).state == T.JOB_STATE_CLOSING
    # The workers keep running until they finish on their own.
    for a in (a0, a1):
        assert a.p.poll() is None, j.outputs()
    assert j.marks("sigterm") == []
    open(j.stop_file, "w").close()
    for a in (a0, a1):
        assert a.wait(20) == 0, j.outputs()
        a.wait_line(r"job ctl-close closed", timeout=1)
    assert j.marks("sigterm") == []
    assert j.control.get_job(j.id).state == T.JOB_STATE_CLOSED
    out = h.check(h.ctl(j.addr, "status", "--all")).stdout
    assert "ctl-close  closed" in out


def test_abort_stops_the_workers_and_the_agents_exit_1(job):
    j = job("ctl-abort")
    agents = [j.agent(0, 1, "2"), j.agent(1, 2, "2")]
    j.wait_workers(1, 3)
    cp = h.check(h.ctl(j.addr, "abort", j.id, "--reason", "maintenance window"))
    assert cp.stdout == "job ctl-abort: failed: aborted by anonymous: maintenance window\n"
    for a in agents:
        assert a.wait(20) == 1, j.outputs()
        a.wait_line(r"job ctl-abort failed: aborted by anonymous: maintenance window",
                    timeout=1)
    # Every worker was stopped, none finished on its own.
    assert len(j.marks("sigterm", 1)) == 3, j.marks("sigterm")


def test_evict_stops_one_agent_and_the_job_rerounds(job):
    j = job("ctl-evict")
    agents = [j.agent(r, n, "2:3") for r, n in ((0, 2), (1, 1), (2, 1))]
    j.wait_workers(1, 4)
    victim = j.node_of(2)
    cp = h.check(h.ctl(j.addr, "evict", j.id, victim, "-r", "flaky NIC"))
    assert cp.stdout.startswith("job ctl-evict: node %d evicted\n" % victim)
    # That agent stops its workers and exits 4 (refused: evicted).
    assert agents[2].wait(20) == 4, j.outputs()
    agents[2].wait_line(r"evicted from job ctl-evict: evicted by anonymous: flaky NIC",
                        timeout=1)
    assert "sigterm-g1-r3" in j.marks("sigterm", 1)
    # The others restart in a new round without it; no restart is counted.
    j.wait_workers(2, 3)
    job_ = j.control.get_job(j.id)
    assert job_.generation == 2 and job_.world_size == 3 and job_.restart_count == 0
    for a in agents[:2]:
        assert a.p.poll() is None, j.outputs()
    out = h.check(h.ctl(j.addr, "status", j.id)).stdout
    assert "evicted" in out
    h.check(h.ctl(j.addr, "abort", j.id))
    for a in agents[:2]:
        assert a.wait(20) == 1


def test_others_are_refused_and_nothing_happens(job, tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    certs = rt.make_certs(d)
    alice, bob = (h.client_cert(certs, d, cn) for cn in ("alice", "bob"))
    args = ["--tls-cert", certs["server_cert"], "--tls-key", certs["server_key"],
            "--tls-ca", certs["ca"]]
    j = job("ctl-owned", daemon_args=args, tls=alice)
    agents = [j.agent(0, 1, "2"), j.agent(1, 1, "2")]
    j.wait_workers(1, 2)
    node = j.node_of(1)
    for args in (["close", j.id], ["abort", j.id, "-r", "mine"], ["evict", j.id, node]):
        cp = h.check(h.ctl(j.addr, *args, tls=bob), 4)
        assert "job ctl-owned belongs to CN=alice; CN=bob may not" in cp.stderr, cp.stderr
    assert j.control.get_job(j.id).state == T.JOB_STATE_RUNNING
    assert j.marks("sigterm") == [] and all(a.p.poll() is None for a in agents)
    # Bob may look.
    out = h.check(h.ctl(j.addr, "status", j.id, tls=bob)).stdout
    assert "CN=alice" in out
    # Alice may act.
    h.check(h.ctl(j.addr, "abort", j.id, "-r", "done", tls=alice))
    for a in agents:
        assert a.wait(20) == 1
        a.wait_line(r"aborted by CN=alice: done", timeout=1)
