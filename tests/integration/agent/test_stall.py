"""A stall of rdzvd is not the agents' fault (issue 12, defect 1): with
three jobs of two real agents each running, rdzvd is stopped (SIGSTOP) for
twice the lease, or one commit's fsync takes twice the lease (an
LD_PRELOAD shim, slowsync.c). Afterwards every node is still there, seen
alive a full lease after the stall, with the same generation and no
restart: silence counts only while rdzvd could read."""

import os
import signal
import time

import pytest

import rdzvagent
import rdzvnode
import rdzvtest as rt
from test_agent import Job

PB = rdzvnode.pb
LEASE_S = 3
JOBS = 3
SHIM = rt.build_path("tests", "integration", "agent", "libslowsync.so")


def start_jobs(tmp_path, request, daemon):
    jobs = []
    for k in range(JOBS):
        sub = tmp_path / ("job%d" % k)
        sub.mkdir()
        j = Job(sub, rdzvagent.job_name(request) + "-%d" % k, daemon=daemon)
        jobs.append(j)
        for tag in ("a", "b"):
            j.agent(tag, nnodes="2", mode="sleep",
                    args=["--lease-ttl", "%ds" % LEASE_S, "--max-restarts", "0"])
    for j in jobs:
        j.wait_world(2)
    return jobs


def check_survived(jobs, t_resume_ms):
    """Every node was seen alive a full lease after |t_resume_ms| (wall
    clock), in the first generation, with no restart and no node lost."""
    def seen_after(job):
        return all(n.last_seen_unix_ms > t_resume_ms + LEASE_S * 1000
                   for n in job.nodes)
    for j in jobs:
        job = j.wait_job(seen_after, timeout=4 * LEASE_S + 10,
                         what="every node seen a lease after the stall")
        assert job.generation == 1 and job.restart_count == 0, job
        assert [PB.types.NodeState.Name(n.state) for n in job.nodes] == \
            ["NODE_STATE_PARTICIPANT"] * 2, job
        for tag, p in j.agents.items():
            assert p.p.poll() is None, j.outputs()
        # No agent stopped its workers either: rdzvd's host acknowledged
        # their PINGs throughout, so none fenced (docs/AGENT.md).
        for d in j.files("env").values():
            assert rdzvagent.alive(d["pid"], "worker.py"), j.outputs()


def test_sigstop_for_twice_the_lease_loses_no_node(tmp_path, request):
    d = rt.Daemon(tmp_path, args=["--keepalive", "1s"])
    jobs = []
    try:
        jobs = start_jobs(tmp_path, request, d)
        d.signal(signal.SIGSTOP)
        time.sleep(2 * LEASE_S)          # the stall under test
        d.signal(signal.SIGCONT)
        check_survived(jobs, int(time.time() * 1000))
    finally:
        d.signal(signal.SIGCONT)
        for j in jobs:
            j.close(keep_daemon=True)
        d.stop()


def test_a_commit_taking_twice_the_lease_loses_no_node(tmp_path, request):
    if not os.path.exists(SHIM):
        pytest.skip("the slowsync shim was not built")
    trigger = os.path.join(str(tmp_path), "slow-now")
    env = {"LD_PRELOAD": SHIM, "SLOWSYNC_FILE": trigger,
           "SLOWSYNC_MS": str(2 * LEASE_S * 1000),
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":verify_asan_link_order=0"}
    d = rt.Daemon(tmp_path, args=["--keepalive", "1s"], env=env)
    jobs = []
    try:
        jobs = start_jobs(tmp_path, request, d)
        # The next commit is slow: a new job's join makes one.
        open(trigger, "w").close()
        with rdzvnode.Node(d.addr, name="trigger") as n:
            n.join("stall-trigger", min_nodes=1, max_nodes=1)
            n.wait_assignment(timeout=4 * LEASE_S)
        assert not os.path.exists(trigger), "no commit was slowed"
        check_survived(jobs, int(time.time() * 1000))
    finally:
        for j in jobs:
            j.close(keep_daemon=True)
        d.stop()


# -- a commit slower than the agents' keepalive (issue 21) -------------------

# What rdzvd logs after a slow commit: the commit ran beside the loop
# (issue 42), and its time counted for no lease or deadline.
HELD_LINE = r"a commit took \d+ ms; that time counts for no lease"

SLOW_S = 17         # past the agent's keepalive: a PING every 5 s, 10 s for its ACK


def slow_daemon(tmp_path, keep=False):
    if not os.path.exists(SHIM):
        pytest.skip("the slowsync shim was not built")
    trigger = os.path.join(str(tmp_path), "slow-now")
    env = {"LD_PRELOAD": SHIM, "SLOWSYNC_FILE": trigger,
           "SLOWSYNC_MS": str(SLOW_S * 1000),
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":verify_asan_link_order=0"}
    if keep:
        env["SLOWSYNC_KEEP"] = "1"
    return rt.Daemon(tmp_path, args=["--keepalive", "1s"], env=env), trigger


def node_states(job):
    return sorted(PB.types.NodeState.Name(n.state) for n in job.nodes)


def test_slow_commit_while_a_third_node_joins_makes_no_ghost(tmp_path,
                                                              request):
    """A third node joins a running 2:3 job while the commit of its join
    takes longer than the agent waits: its agent sends the join again
    (same token) and gets the node its first attempt made; the running
    nodes resume with generation 1 and are given generation 2 at once. One
    round for the scale-up, no ghost, no restart."""
    d, trigger = slow_daemon(tmp_path)
    j = Job(tmp_path, rdzvagent.job_name(request), daemon=d)
    try:
        args = ["--max-restarts", "0"]
        for tag in ("a", "b"):
            j.agent(tag, nnodes="2:3", mode="sleep", args=args)
        g1, _ = j.wait_world(2)
        assert g1 == 1
        open(trigger, "w").close()
        j.agent("c", nnodes="2:3", mode="sleep", args=args)
        g2, _ = j.wait_world(3, after=g1, timeout=SLOW_S + 60)
        assert not os.path.exists(trigger), "no commit was slowed"
        assert g2 == 2, j.outputs()
        # Settled: every node seen after the stall, nobody lost or added.
        t = int(time.time() * 1000)
        job = j.wait_job(lambda x: all(n.last_seen_unix_ms > t + 2000
                                       for n in x.nodes),
                         timeout=30, what="every node seen after the stall")
        assert job.generation == 2 and job.restart_count == 0, job
        assert node_states(job) == ["NODE_STATE_PARTICIPANT"] * 3, job
        assert not [e for e in job.events if e.kind == "lost"], job
        assert sorted({g for g, _ in j.files("env")}) == [1, 2]
        for tag, p in j.agents.items():
            assert p.p.poll() is None, j.outputs()
    finally:
        j.close(keep_daemon=True)
        d.stop()


def test_new_job_forms_while_the_disk_is_slow(tmp_path, request):
    """Every fsync takes SLOW_S for a while, two commits at least (the
    joins' commits among them): the agents' joins outlast their keepalive
    twice, before they ever joined. They keep retrying with their join
    tokens (rdzvd answered them once, so the reconnect bound applies, not
    the connect one), and a new 2:2 job forms, in one generation, with its
    two nodes and no other."""
    d, trigger = slow_daemon(tmp_path, keep=True)
    j = Job(tmp_path, rdzvagent.job_name(request), daemon=d)
    try:
        open(trigger, "w").close()
        for tag in ("a", "b"):
            j.agent(tag, nnodes="2", mode="sleep",
                    args=["--max-restarts", "0"])
        # The disk stays slow until rdzvd has been held by it twice.
        m = d.wait_line(HELD_LINE, timeout=SLOW_S + 30)
        d.wait_line(HELD_LINE, timeout=SLOW_S + 30,
                    start=d.lines.index(m.string) + 1)
        os.unlink(trigger)
        try:
            g, _ = j.wait_world(2, timeout=4 * SLOW_S + 60)
        except TimeoutError as e:
            raise AssertionError("%s\n---- rdzvd\n%s" % (e, d.output()[-6000:]))
        assert g == 1, j.outputs()
        # A read of the job waits for the commit that holds it, which the
        # slow disk may still be finishing.
        job = j.wait_job(lambda x: x.state == PB.types.JOB_STATE_RUNNING,
                         timeout=2 * SLOW_S + 30, what="running")
        assert job.generation == 1 and job.restart_count == 0, job
        assert node_states(job) == ["NODE_STATE_PARTICIPANT"] * 2, job
        for tag, p in j.agents.items():
            assert p.p.poll() is None, j.outputs()
    finally:
        j.close(keep_daemon=True)
        d.stop()


def test_a_slow_commit_fires_no_deadline(tmp_path):
    """A job's join timeout (8 s) would pass during a 17 s commit of
    another job's join; the clock of the rules stops while the commit
    holds rdzvd, so the job is still waiting afterwards, and forms when
    its second node comes."""
    d, trigger = slow_daemon(tmp_path)
    try:
        with rdzvnode.Node(d.addr, name="a") as a, \
                rdzvnode.Node(d.addr, name="b") as b, \
                rdzvnode.Node(d.addr, name="t") as t:
            a.join("deadline", min_nodes=2, max_nodes=2, join_timeout_ms=8000,
                   lease_ttl_ms=60000, reconnect_grace_ms=60000)
            open(trigger, "w").close()
            t.join("stall-trigger", min_nodes=1, max_nodes=1,
                   timeout=4 * SLOW_S)
            t.wait_assignment(timeout=4 * SLOW_S)
            assert not os.path.exists(trigger), "no commit was slowed"
            d.wait_line(HELD_LINE, timeout=10)
            with rdzvnode.Control(d.addr) as c:
                job = c.get_job("deadline")
                assert job.state == PB.types.JOB_STATE_WAITING, job
            b.join("deadline", min_nodes=2, max_nodes=2, timeout=20)
            assert b.wait_assignment(timeout=20).generation == 1
    finally:
        d.stop()
