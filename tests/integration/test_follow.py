"""Clients that take a list of servers and follow the leader (SPEC §14):
the real rdzv-agent, rdzvctl and rdzvd.

- The first server of the list is not running: the agent and rdzvctl reach
  the second. Every server down: rdzvctl names each, the agent gives up
  after --connect-timeout naming the list.
- rdzvd killed and started again on the second address of the list with the
  same state ("the same daemon, moved"; an SQLite database, and an etcd
  prefix on a real etcd when etcd-server is installed): the agents resume
  there with the same session, their workers' pids, the generation and the
  restart count unchanged, and the job then closes normally.
- A standby (a grpcio stand-in that answers as SPEC §14 says: NOT_SERVING
  in Health, UNAVAILABLE with `rdzv-leader: HOST:PORT` for Rendezvous and
  Control) in front of the real rdzvd: clients given only the standby
  follow its hint to the leader; an agent whose rdzvd moved finds it
  through the standby now on the old address, and resumes there.

Every wait is bounded; nothing sleeps and hopes.
"""

import os
import re
import signal
import socket
import subprocess
from concurrent import futures

import grpc
import pytest

import etcdtest
import rdzvagent
import rdzvnode
import rdzvtest as rt

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent",
                      "worker.py")
RDZVCTL = rt.build_path("client", "ctl", "rdzvctl")
PB = rdzvnode.pb

# The agents' own environment must not decide what is tested.
for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]


def alive(pid):
    return rdzvagent.alive(pid, "worker.py")


def free_addr():
    """A loopback address nothing listens on (the port was free a moment
    ago: connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def ctl(server, *args, env=None, timeout=30):
    argv = [RDZVCTL]
    if server is not None:
        argv += ["--server", server]
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(argv + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=e,
                          timeout=timeout)


class Job(rdzvagent.AgentJob):
    """The agents of one job, with worker.py sleeping as their workers."""

    worker = WORKER

    def agent(self, tag, server, nnodes="2", rank=0, args=()):
        argv = ["--nnodes", nnodes, "--node-rank", rank, "--last-call", "1s",
                "--reconnect-grace", "1s", "--stop-timeout", "2s",
                "--log-level", "debug",
                "--log-dir", os.path.join(self.tmp, "logs-" + tag)]
        e = {"W_OUT": self.out, "W_TAG": tag, "W_MODE": "sleep",
             "W_STOP": self.stop_file, "TMPDIR": self.tmp}
        return self.start(tag, argv + list(args), e, server)


    def use_daemon(self, daemon):
        self.ctl.close()
        self.daemon = daemon
        self.ctl = rdzvnode.Control(daemon.addr)


@pytest.fixture
def job(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    yield j
    # Shown by pytest when the test failed (or with -s).
    print(j.outputs())
    print("---- rdzvd at %s\n%s" % (j.daemon.addr, j.daemon.output()[-6000:]))
    j.close()


# ------------------------------------------------------- a stand-in standby

class Standby:
    """What a standby rdzvd answers (SPEC §14), from grpcio: Health says
    NOT_SERVING for rdzv.v1.Rendezvous and rdzv.v1.Control; every call of
    those services ends UNAVAILABLE with the trailer rdzv-leader naming
    |leader|. Counts the calls it refused."""

    def __init__(self, leader, addr="127.0.0.1:0"):
        self.leader = leader
        self.refused = []
        outer = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details):
                m = details.method
                if m == "/grpc.health.v1.Health/Check":
                    return grpc.unary_unary_rpc_method_handler(outer._health)
                if m.startswith(("/rdzv.v1.Rendezvous/", "/rdzv.v1.Control/")):
                    return grpc.unary_unary_rpc_method_handler(
                        lambda req, ctx: outer._refuse(m, ctx))
                return None

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((Handler(),))
        port = self.server.add_insecure_port(addr)
        assert port != 0, "cannot listen on %s" % addr
        self.addr = "127.0.0.1:%d" % port
        self.server.start()

    def _health(self, req, ctx):
        # HealthCheckResponse{status: NOT_SERVING (2)}, without a hint:
        # the agent must find the leader through its Join.
        return b"\x08\x02"

    def _refuse(self, method, ctx):
        self.refused.append(method)
        ctx.set_trailing_metadata((("rdzv-leader", self.leader),))
        ctx.abort(grpc.StatusCode.UNAVAILABLE, "this rdzvd is a standby")

    def stop(self):
        self.server.stop(None).wait(10)


# ------------------------------------------------------------------- tests

def test_first_server_down(job):
    """--server DEAD,LIVE: the agent and rdzvctl reach the second; so does
    RDZV_SERVER."""
    dead = free_addr()
    servers = "%s,%s" % (dead, job.daemon.addr)
    a = job.agent("a", servers, nnodes="1")
    g, started = job.wait_world(1)
    a.wait_line(r"trying rdzvd at %s next" % re.escape(job.daemon.addr), 5)
    a.wait_line(r"joined job \S+ as node id \d+ \(attempt \d+\) on rdzvd at %s"
                % re.escape(job.daemon.addr), 5)

    cp = ctl(servers, "status", job.id)
    assert cp.returncode == 0, cp.stderr
    assert "running" in cp.stdout and job.id in cp.stdout, cp.stdout
    assert cp.stderr == ""
    cp = ctl(None, "-o", "json", "server", env={"RDZV_SERVER": servers})
    assert cp.returncode == 0, cp.stderr
    assert '"server": "%s"' % job.daemon.addr in cp.stdout, cp.stdout

    # The leader first: the dead one is never needed.
    cp = ctl("%s,%s" % (job.daemon.addr, dead), "status")
    assert cp.returncode == 0 and job.id in cp.stdout, cp.stderr

    job.stop_workers()
    assert job.wait_exits() == {"a": 0}, job.outputs()
    assert sorted({gen for gen, _ in job.files("env")}) == [g]


def test_every_server_down(tmp_path):
    """Nothing answers: rdzvctl exits 5 naming each server; the agent exits
    3 after --connect-timeout naming the list."""
    dead1, dead2 = free_addr(), free_addr()
    cp = ctl("%s,%s" % (dead1, dead2), "status")
    assert cp.returncode == 5, cp
    lines = cp.stderr.splitlines()
    assert lines == ["rdzvctl: %s: connection refused (is rdzvd running? --server)"
                     % a for a in (dead1, dead2)], cp.stderr

    # A bad entry is a usage error naming it.
    cp = ctl("%s,,%s" % (dead1, dead2), "status")
    assert cp.returncode == 2 and "server 2 of the list is empty" in cp.stderr

    p = rt.Proc([rdzvagent.AGENT, "join", "--id", "nobody", "--server",
                 "%s,%s" % (dead1, dead2), "--connect-timeout", "1s",
                 "--", "/bin/true"])
    with p:
        assert p.wait(20) == 5, p.output()
    assert "cannot reach rdzvd at %s,%s" % (dead1, dead2) in p.output()
    assert "trying rdzvd at %s next" % dead2 in p.output()


@pytest.fixture(params=["sqlite", "etcd"])
def store(request, tmp_path):
    """Where rdzvd keeps its state: None (SQLite at the Daemon's db) or an
    etcd URL on a real etcd the test starts."""
    if request.param == "sqlite":
        yield None
        return
    etcdtest.skip_unless_etcd()
    e = etcdtest.Etcd(tmp_path / "etcd")
    try:
        yield "etcd://%s/rdzv" % e.endpoints
    finally:
        e.close()


def test_rdzvd_moved_to_the_second_address(tmp_path, request, store):
    """kill -9 of rdzvd, started again on the list's second address with
    the same state (SQLite database or etcd prefix): every agent resumes
    there with its session; the workers, the generation and the restart
    count are unchanged."""
    job = Job(tmp_path, rdzvagent.job_name(request),
              daemon=rt.Daemon(tmp_path, store=store))
    try:
        moved(job, store)
    finally:
        print(job.outputs())
        job.close()


def moved(job, store):
    first = job.daemon.addr
    second = free_addr()
    servers = "%s,%s" % (first, second)
    job.agent("a", servers, rank=0)
    job.agent("b", servers, rank=1)
    g1, s1 = job.wait_world(2)
    pids = sorted(d["pid"] for d in s1.values())
    nodes = {}
    for t in "ab":
        m = job.agents[t].wait_line(r"joined job \S+ as node id (\d+)", 5)
        nodes[t] = m.group(1)

    db = job.daemon.db
    job.daemon.kill()
    for t in "ab":
        job.agents[t].wait_line("lost rdzvd at %s" % re.escape(first), 10)
    job.use_daemon(rt.Daemon(job.tmp, listen=second, db=db, store=store))
    if store is not None and store.startswith("etcd://"):
        # A replica at another address: the killed one's leader key lasts
        # until its lease (leader-lease, 5 s) ends; then it leads (SPEC §14).
        job.daemon.wait_line(r"election: leading", 15)

    j = job.wait_job(lambda x: len(x.nodes) == 2 and all(n.connected for n in x.nodes),
                     20, "both agents resumed on the second address")
    assert j.generation == g1 and j.restart_count == 0, j
    for t in "ab":
        job.agents[t].wait_line(r"resumed as node id %s of job \S+ on rdzvd at %s"
                                % (nodes[t], re.escape(second)), 5)
    assert all(alive(p) for p in pids)

    # rdzvctl finds it there too, from the same list.
    cp = ctl(servers, "status", job.id)
    assert cp.returncode == 0 and "running" in cp.stdout, cp.stderr

    job.finish(g1)


def test_leader_hint(job):
    """Given only a standby, the agent and rdzvctl follow its rdzv-leader
    hint to the leader."""
    standby = Standby(job.daemon.addr)
    try:
        a = job.agent("a", standby.addr, nnodes="1")
        job.wait_world(1)
        a.wait_line(r"following leader hint %s from rdzvd at %s"
                    % (re.escape(job.daemon.addr), re.escape(standby.addr)), 5)
        a.wait_line(r"joined job \S+ as node id \d+ \(attempt \d+\) on rdzvd at %s"
                    % re.escape(job.daemon.addr), 5)
        assert "/rdzv.v1.Rendezvous/Join" in standby.refused

        n = len(standby.refused)
        cp = ctl(standby.addr, "status", job.id)
        assert cp.returncode == 0 and "running" in cp.stdout, cp.stderr
        assert cp.stderr == ""
        assert standby.refused[n:] == ["/rdzv.v1.Control/GetJob"]
        cp = ctl(standby.addr, "-o", "json", "server")
        assert cp.returncode == 0, cp.stderr
        assert '"server": "%s"' % job.daemon.addr in cp.stdout, cp.stdout

        job.stop_workers()
        assert job.wait_exits() == {"a": 0}, job.outputs()
    finally:
        standby.stop()


def test_leader_hint_after_a_move(job):
    """The agents' only server dies; a standby comes up on its address
    naming the new leader (the same database on another port): the agents
    follow the hint and resume with their sessions, their workers
    untouched."""
    old = job.daemon.addr
    job.agent("a", old, rank=0)
    job.agent("b", old, rank=1)
    g1, s1 = job.wait_world(2)
    pids = sorted(d["pid"] for d in s1.values())

    db = job.daemon.db
    job.daemon.kill()
    for t in "ab":
        job.agents[t].wait_line("lost rdzvd at %s" % re.escape(old), 10)
    job.use_daemon(rt.Daemon(job.tmp, db=db))
    standby = Standby(job.daemon.addr, addr=old)
    try:
        j = job.wait_job(lambda x: len(x.nodes) == 2 and
                         all(n.connected for n in x.nodes),
                         20, "both agents resumed on the new leader")
        assert j.generation == g1 and j.restart_count == 0, j
        for t in "ab":
            job.agents[t].wait_line(r"following leader hint %s from rdzvd at %s"
                                    % (re.escape(job.daemon.addr), re.escape(old)), 5)
            job.agents[t].wait_line(r"resumed as node id \d+ of job \S+ on rdzvd at %s"
                                    % re.escape(job.daemon.addr), 5)
        assert all(alive(p) for p in pids)
        job.finish(g1)
    finally:
        standby.stop()


def test_watch_follows(job):
    """rdzvctl status --watch on a list: it starts past a dead first server,
    and goes on, on the list's next server, after rdzvd moved there."""
    first = job.daemon.addr
    dead, second = free_addr(), free_addr()
    job.agent("a", "%s,%s" % (first, second), nnodes="1")
    g1, _ = job.wait_world(1)
    w = rt.Proc([RDZVCTL, "--server", "%s,%s,%s" % (dead, first, second),
                 "-o", "json", "status", "--watch"])
    with w:
        w.wait_line(r'"state": ?"running"', 10)
        n = len(w.lines)
        db = job.daemon.db
        job.daemon.kill()
        job.use_daemon(rt.Daemon(job.tmp, listen=second, db=db))
        job.wait_job(lambda x: all(n.connected for n in x.nodes), 20,
                     "the agent resumed on the second address")
        # The Watch on the second server begins with the job's state.
        w.wait_line(r'"state": ?"running"', 15, start=n)
        n = len(w.lines)
        job.stop_workers()
        assert job.wait_exits() == {"a": 0}, job.outputs()
        w.wait_line(r'"state": ?"closed"', 15, start=n)
        assert w.p.poll() is None, w.output()
        w.signal(signal.SIGTERM)
        assert w.wait(10) == 0, w.output()
    assert sorted({g for g, _ in job.files("env")}) == [g1]



def test_tls_list(tmp_path):
    """TLS with a list: each server is verified by its own host name; a
    unix socket in a TLS list is a usage error naming it."""
    certs = rt.make_certs(tmp_path)
    d = rt.Daemon(tmp_path, args=["--tls-cert", certs["server_cert"],
                                  "--tls-key", certs["server_key"]])
    job = Job(tmp_path, "tls-list", daemon=d)
    try:
        servers = "%s,localhost:%d" % (free_addr(), d.port)
        tls = ["--tls-ca", certs["ca"]]
        a = job.agent("a", servers, nnodes="1", args=tls)
        job.wait_world(1)
        a.wait_line(r"joined job tls-list as node id \d+ \(attempt \d+\) on "
                    r"rdzvd at localhost:%d" % d.port, 5)
        cp = ctl(servers, "--tls-ca", certs["ca"], "status", "tls-list")
        assert cp.returncode == 0 and "running" in cp.stdout, cp.stderr
        # Verified against another CA: refused, on the one that answers.
        cp = ctl(servers, "--tls-ca", certs["other_ca"], "status")
        assert cp.returncode == 5, cp
        assert "localhost:%d: " % d.port in cp.stderr, cp.stderr
        assert "certificate verification failed" in cp.stderr, cp.stderr
        cp = ctl("localhost:%d,unix:/run/x.sock" % d.port, "--tls-ca",
                 certs["ca"], "status")
        assert cp.returncode == 2, cp
        assert "a unix socket (unix:/run/x.sock) is cleartext" in cp.stderr
        job.stop_workers()
        assert job.wait_exits() == {"a": 0}, job.outputs()
    finally:
        print(job.outputs())
        job.close()
