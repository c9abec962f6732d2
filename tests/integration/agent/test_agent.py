"""rdzv-agent end to end (SPEC §5, §6): the real rdzvd and rdzv-agent with
small Python workers (worker.py, no torch). Every deadline is short
(last call 1 s, reconnect grace 1 s, stop timeout 2 s) and every wait is
bounded.
"""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

import rdzvagent
import rdzvtest as rt
import rdzvnode

AGENT = rdzvagent.AGENT
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
PB = rdzvnode.pb
GRACE_S = 1.0

SPEC5 = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
         "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
         "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
         "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
         "OMP_NUM_THREADS", "RDZV_GENERATION"]

# The agents' own environment must not decide what is tested.
for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]
os.environ.pop("OMP_NUM_THREADS", None)


def alive(pid):
    """Whether |pid| is a running worker.py (not reused, not a zombie)."""
    return rdzvagent.alive(pid, "worker.py")


class Job(rdzvagent.AgentJob):
    """The agents of one job with worker.py as their workers."""

    worker = WORKER

    def agent(self, tag, nproc=1, nnodes="1", args=(), env=None, mode="exit",
              log_dir=True, server=None, wrapper=()):
        argv = ["--nnodes", nnodes, "--nproc-per-node", nproc,
                "--last-call", "1s", "--reconnect-grace", "%gs" % GRACE_S,
                "--stop-timeout", "2s", "--tee"]
        if log_dir:
            argv += ["--log-dir", os.path.join(self.tmp, "logs-" + tag)]
        e = {"W_OUT": self.out, "W_TAG": tag, "W_MODE": mode,
             "W_STOP": self.stop_file, "TMPDIR": self.tmp}
        e.update(env or {})
        return self.start(tag, argv + list(args), e, server, wrapper)



@pytest.fixture
def job(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def run(argv, env=None, timeout=15):
    p = rt.Proc([AGENT] + argv, env=env)
    rc = p.wait(timeout)
    return rc, p.output()


# -- bad input (SPEC §6 exit statuses) ---------------------------------------

def test_bad_input(tmp_path):
    rc, out = run(["join", "--id", "x", "--frobnicate", "--", "true"])
    assert rc == 2 and "unknown option '--frobnicate'" in out, out
    rc, out = run(["join", "--id", "x", "--nnodes", "3:2", "--", "true"])
    assert rc == 2 and "--nnodes 3:2: MIN is larger than MAX" in out, out
    rc, out = run(["join", "--id", "x"])
    assert rc == 2 and "no command to run" in out, out
    rc, out = run(["join", "--id", "x", "--", "true"], env={"RDZV_NPROC_PER_NODE": "many"})
    assert rc == 2 and "RDZV_NPROC_PER_NODE=many" in out, out
    rc, out = run(["join", "--", "true"])
    assert rc == 2 and "no job id" in out, out
    rc, out = run(["join", "--id", "x", "--", "no-such-program-here"])
    assert rc == 2 and "cannot run no-such-program-here: not found" in out, out
    rc, out = run(["join", "--id", "x", "--advertise-addr", "nosuchhost.invalid",
                   "--", "true"])
    assert rc == 2 and "--advertise-addr nosuchhost.invalid: " in out and \
        "MASTER_ADDR" in out, out
    rc, out = run(["frob"])
    assert rc == 2 and "unknown command 'frob'" in out, out
    rc, out = run(["join", "--id", "x", "--", "true"],
                  env={"RDZV_CONNECT_TIMEOUT": "10 seconds"})
    assert rc == 2 and "RDZV_CONNECT_TIMEOUT=10 seconds is not a duration" \
        in out, out
    rc, out = run(["--version"])
    assert rc == 0 and re.match(r"rdzv-agent \d+\.\d+", out), out
    rc, out = run(["join", "--help"])
    assert rc == 0 and "--nproc-per-node" in out and "Exit status" in out, out
    assert "--connect-timeout DURATION" in out and "SECONDS" not in out, out


def test_help_command():
    """`rdzv-agent help CMD` prints that command's usage and options, as
    `CMD --help` does (not the general usage), even where an RDZV_*
    variable the command would refuse is set; `help` alone the general
    usage; an unknown command or a second word is a usage error."""
    import subprocess

    def agent(*args, env=None):
        return subprocess.run([AGENT] + list(args), capture_output=True,
                              text=True, timeout=15, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, **(env or {})))
    for cmd in ("join", "coproc", "gpucheck"):
        direct = agent(cmd, "--help")
        assert direct.returncode == 0 and direct.stdout.startswith(
            "usage: rdzv-agent %s " % cmd), direct
        h = agent("help", cmd)
        assert h.returncode == 0 and h.stdout == direct.stdout and \
            h.stderr == "", h
    h = agent("help", "join", env={"RDZV_NNODES": "many"})
    assert h.returncode == 0 and "--nproc-per-node" in h.stdout, h
    general = agent("--help")
    h = agent("help")
    assert h.returncode == 0 and h.stdout == general.stdout, h
    assert "\ncommands:\n" in h.stdout and "rdzv-agent help COMMAND" in h.stdout
    h = agent("help", "frob")
    assert h.returncode == 2 and h.stdout == "" and h.stderr == \
        "rdzv-agent: help: unknown command 'frob'; the commands are join, " \
        "coproc, gpucheck\n", h
    h = agent("help", "join", "gpucheck")
    assert h.returncode == 2 and "help takes one command" in h.stderr, h


def test_unreachable(tmp_path):
    """No rdzvd: exit 5 (unavailable, as rdzvctl's) after --connect-timeout,
    saying where it looked."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now
    t0 = time.monotonic()
    rc, out = run(["join", "--id", "x", "--server", "127.0.0.1:%d" % port,
                   "--connect-timeout", "1500ms", "--", "true"],
                  env={"TMPDIR": str(tmp_path)})
    took = time.monotonic() - t0
    assert rc == 5, out
    assert "cannot reach rdzvd at 127.0.0.1:%d" % port in out, out
    assert 1.4 < took < 5, took
    # Nothing ran, so no log directory is left behind.
    assert os.listdir(str(tmp_path)) == []


def test_identity_cap_is_busy_not_refused(tmp_path):
    """With every TCP client one identity (anonymous, as under `auth none`)
    and its live jobs at the cap, a new job's agent says whose cap it hit
    and retries as for a busy rdzvd, instead of exiting 4; once a job ends
    it joins and its job runs (issue 43)."""
    d = rt.Daemon(tmp_path, ["--max-jobs-per-identity", "1"])
    a = b = None
    try:
        a = rt.Proc([AGENT, "join", "--id", "cap-a", "--server", d.addr,
                     "--nnodes", "2", "--", "true"],
                    env={"TMPDIR": str(tmp_path)})
        a.wait_line("waiting as participant", timeout=15)
        b = rt.Proc([AGENT, "join", "--id", "cap-b", "--server", d.addr,
                     "--nnodes", "1", "--connect-timeout", "60s", "--",
                     "true"], env={"TMPDIR": str(tmp_path)})
        b.wait_line(r"anonymous has 1 jobs that have not ended, the limit "
                    r"per identity .*RESOURCE_EXHAUSTED.*retrying", 15)
        assert b.p.poll() is None, b.output()
        rc = subprocess.run([rt.build_path("client", "ctl", "rdzvctl"),
                             "--server", d.addr, "abort",
                             "cap-a", "--reason", "make room"],
                            capture_output=True, text=True, timeout=15)
        assert rc.returncode == 0, rc.stderr
        assert b.wait(30) == 0, b.output()
        a.wait(15)
    finally:
        for p in (a, b):
            if p is not None and p.p.poll() is None:
                p.signal(signal.SIGKILL)
                p.wait(10)
        d.stop()


def test_refusals(job):
    """rdzvd's refusals: other --nnodes than the job's is a configuration
    error (2); a closed job refuses joins (4); an agent waiting in a job an
    operator closes exits 0."""
    a = job.agent("a", 1, "2")
    a.wait_line("waiting as participant", timeout=10)
    b = job.agent("b", 1, "3")
    assert b.wait(10) == 2, b.output()
    assert "min_nodes is 2 but this node asked for 3" in b.output(), b.output()
    job.ctl.close_job(job.id)
    assert a.wait(10) == 0, a.output()
    assert "closed" in a.output()
    c = job.agent("c", 1, "2")
    assert c.wait(10) == 4, c.output()
    assert "use a new --id" in c.output(), c.output()


def test_operator_actions(job):
    """rdzvctl evict: that agent stops its workers and exits 4, the job
    re-rounds without it; abort: every agent stops and exits 1."""
    for i, t in enumerate("ab"):
        job.agent(t, 1, "1:2", args=["--node-rank", str(i)], mode="sleep")
    g1, s1 = job.wait_world(2)
    victim = [n for n in job.job().nodes if n.group_rank == 1][0]
    job.ctl.evict_node(job.id, victim.node_id, "disk full")
    b = job.agents["b"]
    assert b.wait(10) == 4, b.output()
    assert "evicted" in b.output() and "disk full" in b.output(), b.output()
    assert 1 in job.by_rank("sigterm", g1)
    g2, s2 = job.wait_world(1, after=g1)
    assert s2[0]["tag"] == "a" and s2[0]["env"]["TORCHELASTIC_RESTART_COUNT"] == "0"
    job.ctl.abort_job(job.id, "wrong data set")
    a = job.agents["a"]
    assert a.wait(10) == 1, a.output()
    assert "wrong data set" in a.output(), a.output()
    assert 0 in job.by_rank("sigterm", g2)


# -- the workers' environment, --tee, log files -------------------------------

def test_env_tee_logs(job):
    """Three agents with 2, 1 and 1 workers: every SPEC §5 variable on
    every rank, --tee prefixes, the documented log layout; all exit 0 and
    the job closes."""
    mr = ["--max-restarts", "2"]
    job.agent("a", 2, "3", args=["--node-rank", "0"] + mr)
    job.agent("b", 1, "3", args=["--node-rank", "1", "--role", "trainer"] + mr,
              env={"NCCL_ASYNC_ERROR_HANDLING": "1"})
    job.agent("c", 1, "3", args=["--node-rank", "2"] + mr, log_dir=False)
    assert job.wait_exits() == {"a": 0, "b": 0, "c": 0}, job.outputs()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 10, "job closed")
    gen, env = job.wait_world(4)
    assert j.generation == gen and j.world_size == 4 and j.restart_count == 0
    m = re.search(r"worker logs in (\S+)", job.agents["c"].output())
    assert m and m.group(1).startswith(job.tmp), job.agents["c"].output()
    log_dirs = {"a": os.path.join(job.tmp, "logs-a"), "b": os.path.join(job.tmp, "logs-b"),
                "c": m.group(1)}
    placement = {0: ("a", 0), 1: ("a", 1), 2: ("b", 0), 3: ("c", 0)}
    ports = set()
    for rank, d in env.items():
        tag, local = placement[rank]
        assert d["tag"] == tag, d
        e = d["env"]
        nproc = 2 if tag == "a" else 1
        want = {
            "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "abc".index(tag).__str__(),
            "GROUP_WORLD_SIZE": "3", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": "4",
            "ROLE_NAME": "trainer" if tag == "b" else "default",
            "MASTER_ADDR": "127.0.0.1",
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "2",
            "TORCHELASTIC_RUN_ID": job.id, "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCHELASTIC_ERROR_FILE": os.path.join(
                log_dirs[tag], str(gen), str(local), "error.json"),
            "RDZV_GENERATION": str(gen),
        }
        if nproc > 1:
            want["OMP_NUM_THREADS"] = "1"
        got = {k: v for k, v in e.items() if k in SPEC5 and k != "MASTER_PORT"}
        assert got == want, "rank %d" % rank
        # As torchrun 2.x: NCCL's async error handling on under torch
        # 2.2's name, and the deprecated name (torch >= 2.2 warns when it
        # is set) only where the agent's environment has it (b's agent,
        # as for a torch < 2.2).
        assert e["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1", e
        if tag == "b":
            assert e["NCCL_ASYNC_ERROR_HANDLING"] == "1", e
        else:
            assert "NCCL_ASYNC_ERROR_HANDLING" not in e, e
        ports.add(e["MASTER_PORT"])
        assert e["W_TAG"] == tag        # the agent's environment is inherited
        assert d["stdin"] == "/dev/null"
        assert d["pgid"] == d["pid"]    # a process group of its own
        # The documented layout: <log-dir>/<generation>/<local_rank>/.
        wdir = os.path.join(log_dirs[tag], str(gen), str(local))
        assert rt.read(os.path.join(wdir, "stdout.log")) == \
            b"hello from rank %d\n" % rank
        assert rt.read(os.path.join(wdir, "stderr.log")) == \
            b"complaint from rank %d\n" % rank
        # --tee: each line on the agent's own stdout / stderr, prefixed.
        p = job.agents[tag]
        assert "[rank %d]: hello from rank %d" % (rank, rank) in p.out_lines, p.output()
        assert "[rank %d]: complaint from rank %d" % (rank, rank) in p.err_lines, p.output()
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536


# -- worker failure and restarts ---------------------------------------------

def test_failure_restarts_then_fails(job):
    """Rank 1 fails (--max-restarts 1): every node restarts with
    TORCHELASTIC_RESTART_COUNT=1; it fails again: the job fails and every
    agent exits 1 printing the reason, the error file's message included."""
    env = {"W_FAIL_RANKS": "1"}
    for i, t in enumerate("ab"):
        job.agent(t, 1, "2", args=["--node-rank", str(i), "--max-restarts", "1"],
                  env=env, mode="sleep")
    g1, s1 = job.wait_world(2)
    g2, s2 = job.wait_world(2, after=g1)
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "1", d
    assert {d["pid"] for d in s2.values()}.isdisjoint(d["pid"] for d in s1.values())
    # Rank 0's agent offered a fresh master port after the first round.
    assert s2[0]["env"]["MASTER_PORT"] != s1[0]["env"]["MASTER_PORT"]
    assert job.wait_exits() == {"a": 1, "b": 1}, job.outputs()
    j = job.job()
    assert j.state == PB.types.JOB_STATE_FAILED and j.restart_count == 2, j
    assert "injected failure: rank 1, restart 1" in j.reason, j.reason
    for p in job.agents.values():
        assert "exceeds max_restarts 1" in p.output(), p.output()
        assert "injected failure: rank 1, restart 1" in p.output(), p.output()
    # Rank 0 was stopped by its agent each time, never left running.
    assert sorted(job.by_rank("sigterm", g1)) == [0]
    for d in list(s1.values()) + list(s2.values()):
        rt.wait_for(lambda: not alive(d["pid"]), 5, 0.05, "worker %d gone" % d["pid"])


# -- SIGTERM: a planned leave -------------------------------------------------

def start_three(job, max_restarts):
    for i, t in enumerate("abc"):
        job.agent(t, 1, "2:3", args=["--node-rank", str(i), "--max-restarts",
                                     str(max_restarts)], mode="sleep")
    return job.wait_world(3)


def test_sigterm_leaves(job):
    """SIGTERM to one agent of a 2:3 job: its worker gets SIGTERM, it exits
    143, the job re-rounds without it and no restart is counted."""
    g1, s1 = start_three(job, 0)
    c = job.agents["c"]
    c.signal(signal.SIGTERM)
    assert c.wait(10) == 143, c.output()
    term = job.by_rank("sigterm", g1)
    assert 2 in term and term[2]["pid"] == s1[2]["pid"], term
    g2, s2 = job.wait_world(2, after=g1)
    assert sorted(d["tag"] for d in s2.values()) == ["a", "b"]
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "0", d
    j = job.job()
    assert j.restart_count == 0 and j.world_size == 2 and j.generation == g2, j
    assert [n.state for n in j.nodes].count(PB.types.NODE_STATE_LEFT) == 1, j
    open(job.stop_file, "w").close()
    assert job.wait_exits(["a", "b"]) == {"a": 0, "b": 0}, job.outputs()
    assert job.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 10,
                        "job closed").restart_count == 0


# -- losing rdzvd, losing an agent --------------------------------------------

def test_rdzvd_killed(job):
    """kill -9 of rdzvd, then a restart on the same database and port: the
    same workers keep running and the agents resume."""
    job.agent("a", 1, "2", args=["--node-rank", "0"], mode="sleep")
    job.agent("b", 1, "2", args=["--node-rank", "1"], mode="sleep")
    g1, s1 = job.wait_world(2)
    pids = sorted(d["pid"] for d in s1.values())
    addr, db = job.daemon.addr, job.daemon.db
    job.daemon.kill()
    job.ctl.close()
    for t in "ab":
        job.agents[t].wait_line("lost rdzvd", timeout=10)
    job.daemon = rt.Daemon(job.tmp, listen=addr, db=db)
    job.ctl = rdzvnode.Control(job.daemon.addr)
    j = job.wait_job(lambda x: len(x.nodes) == 2 and all(n.connected for n in x.nodes),
                     15, "both agents resumed")
    assert j.generation == g1 and j.restart_count == 0, j
    assert all(alive(p) for p in pids)
    for t in "ab":
        job.agents[t].wait_line("resumed as node id", timeout=5)
    job.finish(g1)


def test_rdzvd_restart_with_a_third_node_joining(job):
    """rdzvd is killed under a running 2:3 job and restarted while a third
    node joins: the scale-up round may form before the two running nodes
    resume. They resume with generation 1 and are told generation 2 at
    once (SPEC §4 rule 4): the generations go 1 -> 2 and no further, no
    node leaves, no restart is counted."""
    for t in "ab":
        job.agent(t, 1, "2:3", mode="sleep")
    g1, _ = job.wait_world(2)
    addr, db = job.daemon.addr, job.daemon.db
    job.daemon.kill()
    job.ctl.close()
    for t in "ab":
        job.agents[t].wait_line("lost rdzvd", timeout=10)
    # Let the agents' reconnect backoff grow (100 ms doubling to 5 s), so
    # the third node is likely to join before they are back.
    time.sleep(5)
    job.daemon = rt.Daemon(job.tmp, listen=addr, db=db)
    job.ctl = rdzvnode.Control(job.daemon.addr)
    job.agent("c", 1, "2:3", mode="sleep")
    g2, _ = job.wait_world(3, after=g1, timeout=40)
    assert g2 == g1 + 1, job.outputs()
    j = job.wait_job(lambda x: len(x.nodes) == 3 and
                     all(n.connected for n in x.nodes), 15,
                     "three nodes connected")
    assert j.generation == g2 and j.restart_count == 0, j
    assert [n.state for n in j.nodes] == [PB.types.NODE_STATE_PARTICIPANT] * 3, j
    assert sorted({g for g, _ in job.files("env")}) == [g1, g2]
    for t in "abc":
        assert job.agents[t].p.poll() is None, job.outputs()


def test_agent_killed(job):
    """kill -9 of one agent of a 2:3 job (--max-restarts 1): its worker dies
    with it, the others get a new generation within reconnect_grace + 2 s."""
    g1, s1 = start_three(job, 1)
    t0 = time.monotonic()
    job.agents["c"].kill()
    rt.wait_for(lambda: not alive(s1[2]["pid"]), 5, 0.02, "the lost agent's worker gone")
    j = job.wait_job(lambda x: x.generation > g1, GRACE_S + 2,
                     "a new generation within reconnect_grace + 2 s")
    assert time.monotonic() - t0 < GRACE_S + 2
    assert j.restart_count == 1 and j.world_size == 2, j
    g2, s2 = job.wait_world(2, after=g1)
    assert sorted(d["tag"] for d in s2.values()) == ["a", "b"]
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "1", d


def slurm_env(job, i, nodes=3):
    return {"SLURM_JOB_ID": job.id, "SLURM_JOB_NUM_NODES": str(nodes),
            "SLURM_NODEID": str(i)}


def test_fixed_allocation_lost_node_fails_at_once(job):
    """Rule 13 under Slurm: three agents of a fixed 3-node allocation (no
    elastic --nnodes) ask for rejoin_timeout 0. kill -9 of one fails the
    job within seconds, naming the lost node, and the other agents exit 1
    with that reason; srun would never send a replacement."""
    for i, t in enumerate("abc"):
        job.agent(t, 1, "3", args=["--max-restarts", "3"], mode="sleep",
                  env=slurm_env(job, i))
    g1, s1 = job.wait_world(3)
    assert job.job().settings.rejoin_timeout_ms == 0
    assert "rejoin timeout 0" in job.agents["a"].output(), job.outputs()
    c_node = [n.node_id for n in job.job().nodes if n.rank_hint == 2][0]
    t0 = time.monotonic()
    job.agents["c"].kill()
    assert job.wait_exits(["a", "b"], timeout=GRACE_S + 5) == {"a": 1, "b": 1}
    assert time.monotonic() - t0 < GRACE_S + 5
    j = job.job()
    assert j.state == PB.types.JOB_STATE_FAILED, j
    assert "(node %d) was lost" % c_node in j.reason, j.reason
    assert "rejoin_timeout is 0" in j.reason, j.reason
    for t in "ab":
        out = job.agents[t].output()
        assert "(node %d) was lost" % c_node in out, out
    for d in s1.values():
        rt.wait_for(lambda: not alive(d["pid"]), 5, 0.02, "workers gone")


def test_rejoin_timeout_option_and_elastic_nnodes(job, tmp_path):
    """--rejoin-timeout overrides the fixed allocation's 0; an elastic
    --nnodes MIN:MAX keeps the job's default, the join timeout."""
    job.agent("a", 1, "2", args=["--rejoin-timeout", "45s"], mode="sleep",
              env=slurm_env(job, 0, 2))
    j = job.wait_job(lambda x: True, 10, "job created")
    assert j.settings.rejoin_timeout_ms == 45000, j
    job.agents["a"].kill()
    argv = [AGENT, "join", "--id", "elastic", "--server", job.daemon.addr,
            "--nnodes", "1:2", "--join-timeout", "2m", "--last-call", "1s",
            "--", "/usr/bin/python3",
            WORKER]
    env = dict(slurm_env(job, 0, 2), W_OUT=job.out, TMPDIR=str(tmp_path))
    with rt.Proc(argv, env=env) as p:
        assert p.wait(30) == 0, p.output()
    assert job.ctl.get_job("elastic").settings.rejoin_timeout_ms == 120000
    rc, out = run(["join", "--id", "x", "--rejoin-timeout", "soon", "--",
                   "true"])
    assert rc == 2 and "--rejoin-timeout" in out, out


def test_refused_resume(tmp_path):
    """An agent frozen past its lease is lost; when it wakes its resume is
    refused: it stops its workers and joins again as a new node."""
    job = Job(tmp_path, "refused-resume")
    try:
        # rdzvd PINGs every 300 ms, so a 1 s lease can end.
        job.daemon.stop()
        job.ctl.close()
        job.daemon = rt.Daemon(job.tmp, args=["--keepalive", "300ms"])
        job.ctl = rdzvnode.Control(job.daemon.addr)
        for i, t in enumerate("ab"):
            job.agent(t, 1, "1:2", args=["--node-rank", str(i), "--lease-ttl", "1s",
                                         "--max-restarts", "3"], mode="sleep")
        g1, s1 = job.wait_world(2)
        b = job.agents["b"]
        b.signal(signal.SIGSTOP)
        job.wait_job(lambda x: any(n.state == PB.types.NODE_STATE_LOST for n in x.nodes),
                     10, "agent b lost")
        b.signal(signal.SIGCONT)
        b.wait_line("resume of node .* refused", timeout=10)
        g2, s2 = job.wait_world(2, after=g1 + 1)
        assert sorted(d["tag"] for d in s2.values()) == ["a", "b"]
        assert job.by_rank("sigterm", g1).keys() >= {1}, job.outputs()
        j = job.job()
        assert [n.state for n in j.nodes].count(PB.types.NODE_STATE_PARTICIPANT) == 2, j
        assert not alive(s1[1]["pid"])
    finally:
        job.close()


def test_tls_and_unix_socket(tmp_path):
    """mTLS through the shared client options; a unix socket, over which
    the node advertises its host name; another identity is refused (4)."""
    certs = rt.make_certs(tmp_path)
    sock = os.path.join(str(tmp_path), "rdzvd.sock")
    job = Job(tmp_path, "tls")
    try:
        job.daemon.stop()
        job.ctl.close()
        job.daemon = rt.Daemon(job.tmp, args=[
            "--tls-cert", certs["server_cert"], "--tls-key", certs["server_key"],
            "--tls-ca", certs["ca"], "--listen", "unix:" + sock])
        unix = ["--server", "unix:" + sock]
        tls = ["--tls-ca", certs["ca"], "--tls-cert", certs["client_cert"],
               "--tls-key", certs["client_key"]]
        uout = os.path.join(job.tmp, "out-unix")
        os.makedirs(uout)
        u = job.agent("u", 1, "1", args=unix + ["--id", "over-unix"], env={"W_OUT": uout})
        assert u.wait(15) == 0, u.output()
        with open(os.path.join(uout, "env-g1-r0.json")) as f:
            assert json.load(f)["env"]["MASTER_ADDR"] == socket.gethostname()
        a = job.agent("a", 1, "2", args=tls, mode="sleep")
        a.wait_line("waiting as participant", timeout=10)
        x = job.agent("x", 1, "2", args=unix)
        assert x.wait(10) == 4, x.output()
        assert "PERMISSION_DENIED" in x.output(), x.output()
        job.agent("b", 1, "2", args=tls, mode="sleep")
        job.wait_world(2)
        open(job.stop_file, "w").close()
        assert job.wait_exits(["a", "b"]) == {"a": 0, "b": 0}, job.outputs()
    finally:
        job.close()


# -- scheduler defaults -------------------------------------------------------

def test_slurm_and_pbs_defaults(job, tmp_path):
    """The job id, node count and rank hint come from Slurm's variables,
    else from PBS's node file (distinct hosts; this host's first place)."""
    p = job.agent("slurm", 1, "1", env={"SLURM_JOB_ID": "4711",
                                         "SLURM_JOB_NUM_NODES": "2",
                                         "SLURM_NODEID": "1"})
    # The flags the harness gives win over Slurm: drop --id and --nnodes.
    p.kill()
    argv = [AGENT, "join", "--server", job.daemon.addr, "--tee", "--",
            "/usr/bin/python3", WORKER]
    env = {"W_OUT": job.out, "TMPDIR": str(tmp_path)}
    s = rt.Proc(argv, env=dict(env, SLURM_JOB_ID="4711", SLURM_JOB_NUM_NODES="2",
                               SLURM_NODEID="1"))
    nodefile = os.path.join(str(tmp_path), "nodes")
    with open(nodefile, "w") as f:
        f.write("n1\nn1\n%s\nn2\n%s\n" % (socket.gethostname(), socket.gethostname()))
    p2 = rt.Proc(argv, env=dict(env, PBS_JOBID="77.pbs", PBS_NODEFILE=nodefile))
    try:
        for rid, nodes, hint in (("4711", 2, 1), ("77.pbs", 3, 1)):
            j = rt.wait_for(lambda: [x for x in job.ctl.list_jobs() if x.rdzv_id == rid],
                            10, 0.05, "job %s" % rid)[0]
            assert j.settings.min_nodes == nodes and j.settings.max_nodes == nodes, j
            j = job.ctl.get_job(rid)
            assert j.nodes[0].has_rank_hint and j.nodes[0].rank_hint == hint, j
    finally:
        s.kill()
        p2.kill()


def test_slurm_requeue_reopens_a_closed_job(job, tmp_path):
    """scontrol requeue of a job that finished runs it again under the same
    id with SLURM_RESTART_COUNT set: that run reopens the closed job as
    its next attempt, where a plain second run is refused (rule 12)."""
    argv = [AGENT, "join", "--server", job.daemon.addr, "--", "/usr/bin/python3",
            WORKER]
    env = {"W_OUT": job.out, "TMPDIR": str(tmp_path), "SLURM_JOB_ID": "4712",
           "SLURM_JOB_NUM_NODES": "1"}

    def run(extra):
        with rt.Proc(argv, env=dict(env, **extra)) as p:
            return p.wait(30), p.output()

    rc, out = run({})
    assert rc == 0, out
    assert job.ctl.get_job("4712").state == rdzvnode.pb.types.JOB_STATE_CLOSED
    rc, out = run({})
    assert rc == 4 and "use a new --id" in out, out
    rc, out = run({"SLURM_RESTART_COUNT": "1"})
    assert rc == 0, out
    j = job.ctl.get_job("4712", events=50)
    assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED and j.attempt == 2, j
    assert any(e.kind == "reopened" and "after a requeue" in e.message
               for e in j.events), j


def test_attempt_flag_and_variable(job, tmp_path):
    """--attempt N (RDZV_ATTEMPT) is the scheduler's run where none is
    exported (PBS): a later run than the job's reopens it even after it
    closed, as that attempt, and it wins over SLURM_RESTART_COUNT + 1. A
    value that is not a run from 1 is a usage error naming it."""
    argv = [AGENT, "join", "--server", job.daemon.addr, "--id", "req-pbs"]
    cmd = ["--", "/usr/bin/python3", WORKER]
    env = {"W_OUT": job.out, "TMPDIR": str(tmp_path)}

    def run(extra=(), more_env=None):
        with rt.Proc(argv + list(extra) + cmd, env=dict(env, **(more_env or {}))) as p:
            return p.wait(30), p.output()

    rc, out = run()
    assert rc == 0, out
    rc, out = run(["--attempt", "1"])
    assert rc == 4 and "use a new --id" in out, out
    rc, out = run(["--attempt", "2"])
    assert rc == 0, out
    assert job.ctl.get_job("req-pbs").attempt == 2
    rc, out = run(more_env={"RDZV_ATTEMPT": "4", "SLURM_RESTART_COUNT": "0"})
    assert rc == 0, out
    j = job.ctl.get_job("req-pbs")
    assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED and j.attempt == 4, j
    for bad in ("0", "two", "-1", "4294967296"):
        rc, out = run(["--attempt", bad])
        assert rc == 2 and "--attempt %s: expected the scheduler's run" % bad \
            in out, out
    rc, out = run(more_env={"RDZV_ATTEMPT": "0"})
    assert rc == 2 and "RDZV_ATTEMPT=0: expected" in out, out


def test_pbs_node_file_of_10000_hosts(job, tmp_path):
    """A node file of 10,000 hosts (two slots each, this host at 7,777th
    place among them): the rank hint is this host's first place, read in
    linear time (sched_pbs_nodes hashes the hosts it has seen)."""
    me = socket.gethostname()
    hosts = ["n%05d.cluster" % i for i in range(10000)]
    hosts[7777] = me
    nodefile = os.path.join(str(tmp_path), "nodes")
    with open(nodefile, "w") as f:
        for h in hosts:
            f.write("%s\n%s\n" % (h, h))
    argv = [AGENT, "join", "--server", job.daemon.addr, "--nnodes", "1",
            "--", "/usr/bin/python3", WORKER]
    with rt.Proc(argv, env={"W_OUT": job.out, "TMPDIR": str(tmp_path),
                            "PBS_JOBID": "4244.pbs01",
                            "PBS_NODEFILE": nodefile}) as p:
        assert p.wait(30) == 0, p.output()
    j = job.ctl.get_job("4244.pbs01")
    assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED, j
    assert j.nodes[0].has_rank_hint and j.nodes[0].rank_hint == 7777, j


def test_pbs_array_job_id(job, tmp_path):
    """A PBS array job's id, 4243[1].pbs01, cannot be an rdzv_id as it is:
    the agent joins as 4243-1.pbs01."""
    nodefile = os.path.join(str(tmp_path), "nodes")
    with open(nodefile, "w") as f:
        f.write("%s\n" % socket.gethostname())
    argv = [AGENT, "join", "--server", job.daemon.addr, "--", "/usr/bin/python3",
            WORKER]
    with rt.Proc(argv, env={"W_OUT": job.out, "TMPDIR": str(tmp_path),
                            "PBS_JOBID": "4243[1].pbs01",
                            "PBS_NODEFILE": nodefile}) as p:
        assert p.wait(30) == 0, p.output()
    assert job.ctl.get_job("4243-1.pbs01").state == rdzvnode.pb.types.JOB_STATE_CLOSED


def test_init_failure_says_its_last_stderr_line(job, tmp_path):
    """A worker that dies at init without torch's error file (a script
    without @record): the failure rdzvd records, and `rdzvctl status`
    shows, ends with the last line the worker wrote to stderr."""
    line = "RuntimeError: connect [127.0.1.1]:18320: Connection refused"
    script = "echo starting >&2; echo '%s' >&2; exit 1" % line
    p = rt.Proc([AGENT, "join", "--id", job.id, "--server", job.daemon.addr,
                 "--nnodes", "1", "--log-dir", str(tmp_path / "logs"), "--",
                 "/bin/sh", "-c", script])
    assert p.wait(20) == 1, p.output()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_FAILED, 10, "failed")
    assert "exited with code 1; its last line on stderr: " + line in j.reason, j.reason
    ctl = rt.Proc([rt.build_path("client", "ctl", "rdzvctl"), "--server",
                   job.daemon.addr, "status", job.id])
    assert ctl.wait(10) == 0, ctl.output()
    assert line in ctl.output(), ctl.output()
