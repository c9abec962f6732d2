"""rdzvctl's exit statuses (SPEC §8): 0 ok, 1 error, 2 usage, 3 not found,
4 permission denied, 5 rdzvd unavailable (within a bounded connect
timeout); errors on stderr, naming the server and the cause."""

import json
import os
import socket
import subprocess
import tempfile
import time

import pytest

import rdzvtest as rt
from rdzvnode import Control, Node

import ctlharness as h


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = rt.Daemon(tmp_path_factory.mktemp("ctl-exit"))
    nodes = [Node(d.addr, name="host-a"), Node(d.addr, name="host-b"),
             Node(d.addr, name="host-b")]
    for n in nodes:
        n.join("ex", min_nodes=3, max_nodes=3)
    nodes[0].wait_assignment(generation=1)
    yield d
    for n in nodes:
        n.close()
    d.stop()


@pytest.mark.parametrize("args,needle", [
    ([], "usage: rdzvctl"),
    (["frobnicate"], "unknown command 'frobnicate' (commands: status, close, "
     "abort, evict, events, server, wait, hosts, host; rdzvctl --help)"),
    (["help", "frobnicate"], "help: unknown command 'frobnicate' (commands: "),
    (["help", "wait", "status"], "help takes one command, not 'status'"),
    (["status", "--bogus"], "status: unknown option '--bogus'"),
    (["--bogus", "status"], "unknown option '--bogus'"),
    (["abort"], "abort: missing arguments (usage: rdzvctl abort ID)"),
    (["evict", "ex"], "evict: missing arguments"),
    (["status", "a", "b"], "status: too many arguments"),
    (["server", "x"], "server: too many arguments"),
    (["-o", "yaml", "status"], "-o yaml: the output is text or json"),
    (["status", "--events", "0", "ex"], "--events 0"),
    (["events", "ex", "--limit", "x"], "--limit x"),
    (["abort", "ex", "--reason"], "--reason needs a value"),
    (["--connect-timeout", "soon", "status"], "--connect-timeout: 'soon'"),
    (["--tls-cert", "/nonexistent.pem", "status"], "--tls-cert and --tls-key go together"),
    (["--server", "unix:", "status"], "--server unix:"),
])
def test_usage_errors_exit_2(args, needle):
    cp = h.check(h.ctl(None, *args), 2)
    assert needle in cp.stderr, cp.stderr
    assert cp.stdout == ""


def test_connect_timeout_is_a_duration_everywhere():
    """--connect-timeout takes a DURATION, as --help and the man page say
    (a plain number is seconds); a bad RDZV_CONNECT_TIMEOUT is a usage
    error naming it, not silently the default."""
    assert "--connect-timeout DURATION" in h.check(h.ctl(None, "--help")).stdout
    assert "SECONDS" not in h.check(h.ctl(None, "wait", "--help")).stdout
    cp = h.check(h.ctl(None, "status", env={"RDZV_CONNECT_TIMEOUT": "soon"}), 2)
    assert "RDZV_CONNECT_TIMEOUT=soon is not a duration above 0" in cp.stderr
    cp = h.check(h.ctl(None, "--connect-timeout", "0", "status"), 2)
    assert "--connect-timeout: '0' is not a duration above 0" in cp.stderr


def test_help_and_version_exit_0():
    cp = h.check(h.ctl(None, "--help"))
    for cmd in ("status", "close", "abort", "evict", "events", "server", "wait"):
        assert "\n  %s " % cmd in cp.stdout
    assert "\n  5      rdzvd unavailable" in cp.stdout
    cp = h.check(h.ctl(None, "abort", "--help"))
    assert "usage: rdzvctl abort ID" in cp.stdout and "--reason" in cp.stdout
    cp = h.check(h.ctl(None, "help", "evict"))
    assert "usage: rdzvctl evict ID NODE" in cp.stdout
    # help CMD is CMD --help for every command, not the general usage.
    for cmd in ("status", "close", "abort", "evict", "events", "server", "wait"):
        direct = h.check(h.ctl(None, cmd, "--help"))
        via = h.check(h.ctl(None, "help", cmd))
        assert via.stdout == direct.stdout and via.stdout.startswith(
            "usage: rdzvctl %s " % cmd), via.stdout
    assert h.check(h.ctl(None, "help")).stdout == \
        h.check(h.ctl(None, "--help")).stdout
    cp = h.check(h.ctl(None, "--version"))
    assert cp.stdout.startswith("rdzvctl ")


def test_bad_job_id_is_a_usage_error(daemon):
    cp = h.check(h.ctl(daemon.addr, "status", "no/slashes"), 2)
    assert cp.stderr.startswith("rdzvctl: %s: " % daemon.addr), cp.stderr


@pytest.mark.parametrize("args,needle", [
    (["status", "nope"], "job nope not found"),
    (["close", "nope"], "job nope not found"),
    (["abort", "nope"], "job nope not found"),
    (["evict", "nope", "1"], "job nope not found"),
    (["events", "nope"], "job nope not found"),
    (["evict", "ex", "999"], "job ex has no node 999"),
    (["evict", "ex", "host-z"], "job ex has no live node on host host-z"),
])
def test_not_found_exits_3(daemon, args, needle):
    cp = h.check(h.ctl(daemon.addr, *args), 3)
    assert cp.stderr.startswith("rdzvctl: %s: %s" % (daemon.addr, needle)), cp.stderr
    assert cp.stdout == ""


def test_ambiguous_host_is_a_usage_error(daemon):
    cp = h.check(h.ctl(daemon.addr, "evict", "ex", "host-b"), 2)
    assert "job ex runs nodes 2, 3 on host host-b; name one by its node id" in cp.stderr


def test_action_on_an_ended_job_is_an_error(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr, name="solo") as n:
        n.join("over", min_nodes=1, max_nodes=1)
        n.wait_assignment(generation=1)
        h.check(h.ctl(d.addr, "abort", "over"))
        cp = h.check(h.ctl(d.addr, "abort", "over"), 1)
        assert "job over already failed" in cp.stderr


def test_refused_connection_exits_5():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    addr = "127.0.0.1:%d" % port
    cp = h.check(h.ctl(addr, "status"), 5)
    assert cp.stderr == ("rdzvctl: %s: connection refused (is rdzvd running? --server)\n"
                         % addr), cp.stderr
    cp = h.check(h.ctl(None, "status", env={"RDZV_SERVER": addr}), 5)
    assert addr in cp.stderr


def test_missing_unix_socket_exits_5(tmp_path):
    path = os.path.join(str(tmp_path), "none.sock")
    cp = h.check(h.ctl("unix:" + path, "server"), 5)
    assert cp.stderr.startswith("rdzvctl: unix:%s: " % path), cp.stderr
    assert "(is rdzvd running? --server)" in cp.stderr


def test_connect_timeout_is_bounded():
    # A listener whose accept queue is full: SYNs are dropped, so connect()
    # hangs until rdzvctl gives up.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port = s.getsockname()[1]
    fill = []
    try:
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fill.append(c)
        t0 = time.monotonic()
        cp = h.check(h.ctl("127.0.0.1:%d" % port, "--connect-timeout", "500ms", "status"), 5)
        took = h.elapsed(t0)
        assert "connection timed out after 500 ms (is rdzvd running? --server)" in cp.stderr
        assert took < 5, took
    finally:
        for c in fill:
            c.close()
        s.close()


class Tls:
    def __init__(self, tmp_path):
        self.certs = rt.make_certs(tmp_path)
        self.alice, self.bob, self.carol = (
            h.client_cert(self.certs, tmp_path, cn) for cn in ("alice", "bob", "carol"))
        args = ["--tls-cert", self.certs["server_cert"], "--tls-key", self.certs["server_key"],
                "--tls-ca", self.certs["ca"], "--admin", "CN=carol"]
        self.d = rt.Daemon(tmp_path, args)
        self.addr = self.d.addr


def test_actions_by_others_are_refused_under_mtls(tmp_path):
    t = Tls(tmp_path)
    nodes = [Node(t.addr, t.alice["creds"], name=n) for n in ("tls-a", "tls-b", "tls-c")]
    try:
        for n in nodes:
            n.join("owned", min_nodes=2, max_nodes=3)
        nodes[0].wait_assignment(generation=1)
        cp = h.check(h.ctl(t.addr, "server", tls=t.bob))
        assert "you are      CN=bob" in cp.stdout
        # Everyone may read.
        cp = h.check(h.ctl(t.addr, "status", "owned", tls=t.bob))
        assert "CN=alice" in cp.stdout
        for args in (["close", "owned"], ["abort", "owned", "-r", "mine"],
                     ["evict", "owned", "tls-c"], ["evict", "owned", str(nodes[2].node_id)]):
            cp = h.check(h.ctl(t.addr, *args, tls=t.bob), 4)
            assert cp.stderr.startswith("rdzvctl: %s: job owned belongs to CN=alice; "
                                        "CN=bob may not " % t.addr), cp.stderr
        ctl = Control(t.addr, t.alice["creds"])
        assert ctl.get_job("owned").state == rt.protos().types.JOB_STATE_RUNNING
        ctl.close()
        # An admin may; so may the owner.
        cp = h.check(h.ctl(t.addr, "evict", "owned", "tls-c", "-r", "bad host", tls=t.carol))
        assert "node %d evicted" % nodes[2].node_id in cp.stdout
        ev = nodes[2].wait_event("evicted")
        assert ev.reason == "evicted by CN=carol: bad host"
        cp = h.check(h.ctl(t.addr, "abort", "owned", "-r", "done", tls=t.alice))
        assert "failed: aborted by CN=alice: done" in cp.stdout
        # Without a client certificate the server refuses the handshake.
        cp = h.ctl(t.addr, "status", tls={"ca": t.certs["ca"]})
        assert cp.returncode in (4, 5), cp
        assert t.addr in cp.stderr
    finally:
        for n in nodes:
            n.close()
        t.d.stop()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another uid")
def test_actions_by_another_uid_are_refused_on_a_unix_socket():
    d = tempfile.mkdtemp(prefix="rdzv-ctl-")
    os.chmod(d, 0o755)
    sock = os.path.join(d, "rdzvd.sock")
    daemon = rt.Daemon(d, listen="unix:" + sock)
    ctl, = rt.copy_for_others(d, h.RDZVCTL)
    try:
        os.chmod(sock, 0o777)
        n = Node("unix:" + sock, name="uds-a")
        n.join("mine", min_nodes=1, max_nodes=1)
        n.wait_assignment(generation=1)

        def as_nobody(*args):
            env = dict(os.environ)
            env.pop("RDZV_SERVER", None)
            return subprocess.run([ctl, "--server", "unix:" + sock] + list(args),
                                  capture_output=True, text=True, timeout=30, env=env,
                                  preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))

        cp = as_nobody("server")
        assert cp.returncode == 0 and "uid:65534" in cp.stdout, cp
        for args in (["close", "mine"], ["abort", "mine"], ["evict", "mine", "uds-a"]):
            cp = as_nobody(*args)
            assert cp.returncode == 4, cp
            assert "job mine belongs to uid:0; uid:65534 may not" in cp.stderr, cp.stderr
        cp = h.check(h.ctl("unix:" + sock, "close", "mine"))
        assert "closing: closed by uid:0" in cp.stdout
        n.close()
    finally:
        daemon.stop()


def test_server_json_has_every_documented_key(tmp_path):
    """`rdzvctl server -o json`: the SERVER object of docs/RDZVCTL.md, with
    rdzvd's own values."""
    with rt.Daemon(tmp_path) as d:
        with Node(d.addr, name="srv-a") as n:
            n.join("srv-json", min_nodes=1, max_nodes=1)
            n.wait_assignment(generation=1)
            cp = h.check(h.ctl(d.addr, "server", "-o", "json", fixed=False))
        s = json.loads(cp.stdout)
        assert set(s) == {"server", "version", "pid", "uptime_ms", "started_unix_ms",
                          "database", "listeners", "jobs", "active_jobs", "nodes",
                          "connections", "transactions", "identity", "role",
                          "leader", "advertise", "store", "etcd_endpoints"}, s
        # SQLite: one replica, always the leader (SPEC §14).
        assert (s["role"], s["leader"], s["advertise"]) == ("leader", d.addr, d.addr), s
        assert s["store"] == "sqlite:" + d.db and s["etcd_endpoints"] == [], s
        assert s["server"] == d.addr and s["pid"] == d.pid and s["database"] == d.db
        assert s["listeners"] and any(l.startswith(d.addr) for l in s["listeners"]), s
        assert (s["jobs"], s["active_jobs"], s["nodes"]) == (1, 1, 1), s
        assert s["identity"] == "anonymous" and s["transactions"] >= 1, s
        assert s["connections"] >= 2 and s["uptime_ms"] >= 0, s
        assert abs(s["started_unix_ms"] / 1000 - time.time()) < 600, s
        assert d.stop() == 0
