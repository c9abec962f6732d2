"""rdzvd's HTTP listener (SPEC §15): probes, /metrics in Prometheus' text
format (checked by promtool when it is installed), the status page's event
stream, and the settings that place or refuse the listener."""

import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess

import pytest

import rdzvtest as rt
from rdzvnode import Control, Node

RDZVD = rt.build_path("daemon", "rdzvd")


def http_port(d):
    """The HTTP listener's port, from rdzvd's log line."""
    m = d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):")
    return int(m.group(1))


def get(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        c.close()


def metric(text, name, labels=""):
    """The value of one sample of an exposition, or None."""
    rx = re.compile(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)),
                    re.M)
    m = rx.search(text)
    return float(m.group(1)) if m else None


@pytest.fixture
def daemon(tmp_path):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    d.http = http_port(d)
    yield d
    # A clean exit (under ASan: nothing leaked), event streams open or not.
    assert d.stop() == 0, d.output()[-3000:]


def test_probes_and_errors(daemon):
    assert get(daemon.http, "/healthz")[0] == 200
    st, _, body = get(daemon.http, "/readyz")
    assert st == 200 and body.strip() == "ready"
    assert get(daemon.http, "/nothing-here")[0] == 404
    # Read-only: nothing but GET and HEAD (evhttp says 501).
    assert get(daemon.http, "/metrics", "POST")[0] in (405, 501)
    st, h, body = get(daemon.http, "/")
    assert st == 200 and h["Content-Type"].startswith("text/html")
    # Everything the page needs is in it: no address elsewhere.
    assert "Content-Security-Policy" in h
    assert not re.search(r"(src|href)=\"(https?:)?//", body)


def test_metrics_follow_a_job(daemon):
    with Control(daemon.addr) as ctl, Node(daemon.addr, name="a") as a, \
            Node(daemon.addr, name="b") as b:
        a.join("m1", min_nodes=2, max_nodes=2, max_restarts=3)
        b.join("m1", min_nodes=2, max_nodes=2, max_restarts=3)
        g1 = a.wait_assignment().generation
        ctl.list_jobs()
        _, h, text = get(daemon.http, "/metrics")
        assert h["Content-Type"].startswith("text/plain; version=0.0.4")
        assert metric(text, "rdzvd_jobs", '{state="running"}') == 1
        assert metric(text, "rdzvd_rounds_total") == 1
        assert metric(text, "rdzvd_rendezvous_seconds_count") == 1
        assert metric(text, "rdzvd_agents_connected") == 2
        # The scrape's own connection, at least.
        assert metric(text, "rdzvd_http_connections") >= 1
        assert metric(text, "rdzvd_store_commit_seconds_count") >= 1
        assert metric(text, "rdzvd_store_transactions_total") >= 1
        assert metric(text, "rdzvd_grpc_calls_total",
                      '{method="rdzv.v1.Control/ListJobs",code="OK"}') == 1
        # A worker failure: a restart whose cause is that failure.
        a.report(g1, "FAILED", message="worker 0 exited 1")
        a.wait_assignment(after=g1)
        text = get(daemon.http, "/metrics")[2]
        assert metric(text, "rdzvd_restarts_total", '{cause="failure"}') == 1
        assert metric(text, "rdzvd_restarts_total", '{cause="lost"}') == 0
        assert metric(text, "rdzvd_rounds_total") == 2
        assert metric(text, "rdzvd_rendezvous_seconds_count") == 2
        # Both were quick: the restart's is counted from the failure, not
        # from when the job began.
        assert metric(text, "rdzvd_rendezvous_seconds_bucket",
                      '{le="2.5"}') == 2
        assert metric(text, "rdzvd_grpc_calls_total",
                      '{method="rdzv.v1.Rendezvous/Report",code="OK"}') == 1
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr


def test_lost_node_restart(daemon):
    with Node(daemon.addr, name="a") as a, Node(daemon.addr, name="b") as b:
        for n in (a, b):
            n.join("l1", min_nodes=1, max_nodes=2, max_restarts=3,
                   last_call_ms=100, lease_ttl_ms=1000,
                   reconnect_grace_ms=500)
        a.wait_assignment()
        rt.wait_for(lambda: metric(get(daemon.http, "/metrics")[2],
                                   "rdzvd_nodes", '{state="participant"}')
                    == 2, 10, what="two participants")
        b.close()      # what a crashed agent looks like
        a.wait_assignment(after=a.assignments()[-1].generation,
                          timeout=15)
        text = get(daemon.http, "/metrics")[2]
        assert metric(text, "rdzvd_leases_ended_total") == 1
        assert metric(text, "rdzvd_restarts_total", '{cause="lost"}') == 1
        assert metric(text, "rdzvd_restarts_total", '{cause="failure"}') == 0


def test_gpu_check_failures(daemon):
    bad = {"device": 1, "ok": False, "failed_step": "memtest",
           "error": "ECC uncorrectable"}
    with Node(daemon.addr, name="g") as g:
        g.join("gpu1", min_nodes=1, max_nodes=1,
               gpus=[{"device": 0}, bad])
        g.wait_assignment()
        text = get(daemon.http, "/metrics")[2]
        assert metric(text, "rdzvd_gpu_check_failures_total") == 1
        # The page's data names the device and the failed step.
        es = EventStream(daemon.http, "/events?job=gpu1")
        try:
            node = es.next()[1]["job"]["nodes"][0]
            assert node["gpus_healthy"] == 1 and node["gpus_total"] == 2
            assert [x["failed_step"] for x in node["gpus"]
                    if not x["ok"]] == ["memtest"]
        finally:
            es.close()


def test_gauges_right_after_a_restart(tmp_path):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    with Node(d.addr, name="a") as a:
        a.join("r1", min_nodes=1, max_nodes=1)
        a.wait_assignment()
    d.stop()
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    try:
        text = get(http_port(d), "/metrics")[2]
        # Counted from the database at start, not from what happened since.
        assert metric(text, "rdzvd_jobs", '{state="running"}') == 1
        assert metric(text, "rdzvd_rounds_total") == 0
    finally:
        d.stop()


class EventStream:
    """A minimal server-sent events reader over a raw socket. Every stream
    starts with the replica's role (SPEC §14), kept as .role."""

    def __init__(self, port, path):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n"
                        "Accept: text/event-stream\r\n\r\n" % path).encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"text/event-stream" in head
        name, self.role = self.next()
        assert name == "role", (name, self.role)

    def _until(self, sep):
        while sep not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the event stream closed")
            self.buf += chunk
        out, self.buf = self.buf.split(sep, 1)
        return out

    def next(self):
        """The next event as (name, data); chunk framing is skipped."""
        name, data = None, None
        while True:
            line = self._until(b"\n").rstrip(b"\r").decode()
            if re.fullmatch(r"[0-9a-fA-F]+", line) or line.startswith(":"):
                continue
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and name is not None:
                return name, data

    def close(self):
        self.s.close()


def test_event_stream_follows_changes(daemon):
    with Node(daemon.addr, name="a") as a, Node(daemon.addr, name="b") as b:
        a.join("e1", min_nodes=1, max_nodes=3, last_call_ms=200)
        a.wait_assignment()
        es = EventStream(daemon.http, "/events")
        try:
            # One rdzvd on SQLite leads, and is its own leader.
            assert es.role == {"role": "leader", "leader": daemon.addr}
            name, ev = es.next()
            j = ev["job"]
            # Control.Watch's words: the proto's field names, states as
            # rdzvctl -o json says them.
            assert name == "job" and j["rdzv_id"] == "e1"
            assert ev["removed"] is False and ev["now_unix_ms"] > 0
            assert j["state"] == "running" and j["participants"] == 1
            assert j["restart_count"] == 0 and j["created_unix_ms"] > 0
            assert j["settings"]["min_nodes"] == 1
            # Summaries carry no nodes; one job's stream does.
            assert j["nodes"] == []
            b.join("e1", min_nodes=1, max_nodes=3, last_call_ms=200,
                   hostname="<script>alert(1)</script>")
            while True:
                name, ev = es.next()
                j = ev["job"]
                if j["participants"] + j["waiting"] == 2:
                    break
        finally:
            es.close()
        es = EventStream(daemon.http, "/events?job=e1")
        try:
            name, ev = es.next()
            j = ev["job"]
            hosts = {n["hostname"] for n in j["nodes"]}
            assert hosts == {"a", "<script>alert(1)</script>"}
            assert j["events"] and j["settings"]["last_call_timeout_ms"]
        finally:
            es.close()
    es = EventStream(daemon.http, "/events?job=nope")
    try:
        assert es.next()[0] == "missing"
        assert metric(get(daemon.http, "/metrics")[2],
                      "rdzvd_http_event_streams") == 1
    finally:
        es.close()
    # A page that closes is forgotten at once.
    rt.wait_for(lambda: metric(get(daemon.http, "/metrics")[2],
                               "rdzvd_http_event_streams") == 0, 10,
                what="the closed event streams to be forgotten")


def test_page_that_does_not_read_is_dropped(daemon):
    """A page that stops reading is dropped once 1 MiB waits for it,
    rather than buffered without limit; rdzvd serves on."""
    s = socket.socket()
    # A small window: rdzvd's side fills instead of the kernel's.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", daemon.http))
    s.sendall(b"GET /events?job=slow HTTP/1.1\r\nHost: x\r\n\r\n")
    with Node(daemon.addr, name="s" * 200) as a:
        a.join("slow", min_nodes=1, max_nodes=1)
        gen = a.wait_assignment().generation
        streams = lambda: metric(get(daemon.http, "/metrics")[2],
                                 "rdzvd_http_event_streams")
        # Each UPDATE of the worker count is a new round: a change of the
        # job, its nodes and events sent to the page that does not read.
        for i in range(2000):
            if streams() == 0:
                break
            a.report(gen, "UPDATE", nproc=2 - i % 2)
            gen = a.wait_assignment(after=gen).generation
        assert streams() == 0
        daemon.wait_line(r"status page does not keep up")
        assert get(daemon.http, "/healthz")[0] == 200
    s.close()


def run(*args):
    return subprocess.run([RDZVD] + list(args), capture_output=True,
                          text=True, timeout=30)


def test_settings(tmp_path):
    r = run("--check-config", "--db", str(tmp_path / "x.db"))
    assert "http-listen = 127.0.0.1:29401" in r.stdout
    assert "http-max-connections = 1024" in r.stdout
    assert "http-request-timeout = 10000ms" in r.stdout
    r = run("--check-config", "--http-max-connections", "64",
            "--http-request-timeout", "2s")
    assert "http-max-connections = 64" in r.stdout
    assert "http-request-timeout = 2000ms" in r.stdout
    r = run("--check-config", "--http-request-timeout", "1ms")
    assert r.returncode == 2 and "http-request-timeout" in r.stderr
    r = run("--check-config", "--http-listen", "none")
    assert "http-listen = none" in r.stdout
    # Off loopback the page and metrics would go out in cleartext.
    r = run("--check-config", "--http-listen", "0.0.0.0:29401")
    assert r.returncode == 2 and "--insecure" in r.stderr
    r = run("--check-config", "--http-listen", "0.0.0.0:29401", "--insecure")
    assert r.returncode == 0
    r = run("--check-config", "--http-listen", "0.0.0.0:29401",
            "--tls-cert", "c.pem", "--tls-key", "k.pem")
    assert r.returncode == 0, r.stderr
    r = run("--check-config", "--http-listen", "unix:/tmp/x")
    assert r.returncode == 2 and "http-listen" in r.stderr
    conf = tmp_path / "rdzvd.conf"
    conf.write_text("http-listen = 127.0.0.1:7777\n")
    r = run("--config", str(conf), "--check-config")
    assert "http-listen = 127.0.0.1:7777" in r.stdout


def test_none_and_taken(tmp_path):
    d = rt.Daemon(tmp_path, ["--http-listen", "none"])
    try:
        d.wait_line(r"ready \(")
        assert "serving HTTP" not in d.output()
    finally:
        d.stop()
    # An address asked for that cannot be had stops rdzvd.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = run("--db", str(tmp_path / "y.db"), "--listen", "127.0.0.1:0",
                "--http-listen", "127.0.0.1:%d" % port)
        assert r.returncode != 0
        assert "cannot listen for HTTP on 127.0.0.1:%d" % port in r.stderr
    finally:
        s.close()


def test_tls(tmp_path):
    """With tls-cert the listener speaks TLS with rdzvd's certificate and
    asks for no client certificate, even when tls-ca makes gRPC mTLS."""
    c = rt.make_certs(tmp_path)
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0",
                             "--tls-cert", c["server_cert"],
                             "--tls-key", c["server_key"],
                             "--tls-ca", c["ca"]])
    try:
        m = d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+) \(TLS\): "
                        r"status page https://")
        port = int(m.group(1))
        ctx = ssl.create_default_context(cafile=c["ca"])
        ctx.set_alpn_protocols(["http/1.1"])
        conn = http.client.HTTPSConnection("localhost", port, timeout=10,
                                           context=ctx)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        assert r.status == 200 and b"rdzvd_jobs" in r.read()
        assert conn.sock.selected_alpn_protocol() == "http/1.1"
        # The request head is checked under TLS too (a bare LF: 400).
        raw = ctx.wrap_socket(socket.create_connection(
            ("127.0.0.1", port), timeout=10), server_hostname="localhost")
        raw.sendall(b"GET /metrics HTTP/1.1\nHost: x\n\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400 "), "not refused"
        raw.close()
        # An event stream left open at shutdown.
        es = http.client.HTTPSConnection("localhost", port, timeout=10,
                                         context=ctx)
        es.request("GET", "/events")
        assert es.getresponse().status == 200
        conn.close()
        # Nothing in cleartext on that port.
        with pytest.raises((http.client.HTTPException, OSError)):
            st = get(port, "/metrics")[0]
            assert st != 200
            raise OSError("answered %d in cleartext" % st)
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        d.stop()


def test_page_and_watch_say_the_same(daemon):
    """Control.Watch and /events are two sinks of one follower list: after
    each change both carry the same Job, the page's as proto3 JSON with the
    proto's field names (enums as the words rdzvctl prints)."""
    from google.protobuf.json_format import MessageToDict
    P = rt.protos()

    def same(pb, js):
        want = MessageToDict(pb, preserving_proto_field_name=True,
                             including_default_value_fields=True,
                             use_integers_for_enums=False)
        for k, v in want.items():
            if k in ("nodes", "events", "settings"):
                continue
            got = js[k]
            if k == "state":
                v = v.split("_STATE_", 1)[1].lower()
            elif isinstance(got, int) and not isinstance(got, bool):
                v = int(v)
            assert got == v, (k, got, v)
        def setting(k, v):
            # Enums as the words rdzvctl prints, numbers as numbers,
            # strings (the preload) as they are.
            for prefix in ("RANK_POLICY_", "RESTART_MODE_"):
                if isinstance(v, str) and v.startswith(prefix):
                    return v[len(prefix):].lower()
            return v if k == "preload" else int(v)
        assert js["settings"] == {k: setting(k, v) for k, v in MessageToDict(
            pb.settings, preserving_proto_field_name=True,
            including_default_value_fields=True).items()}
        return True

    with Control(daemon.addr) as ctl, Node(daemon.addr, name="a") as a:
        a.join("same", min_nodes=1, max_nodes=2, max_restarts=3,
               last_call_ms=100,
               extra=lambda r: setattr(r, "preload", "torch"))
        gen = a.wait_assignment().generation
        watch = ctl.watch("same")
        es = EventStream(daemon.http, "/events?job=same")
        try:
            first = next(watch).job
            name, ev = es.next()
            assert name == "job" and same(first, ev["job"])
            assert first.settings.preload == "torch"    # issue 45
            assert ev["job"]["settings"]["preload"] == "torch"
            # A restart: the next change of each is the same job again.
            a.report(gen, "FAILED", message="worker 0 exited 1")
            a.wait_assignment(after=gen)
            for _ in range(20):
                w = next(watch).job
                name, ev = es.next()
                while name != "job":
                    name, ev = es.next()
                assert same(w, ev["job"])
                if w.restart_count == 1 and w.state == \
                        P.types.JobState.Value("JOB_STATE_RUNNING"):
                    break
            else:
                raise AssertionError("no restart seen")
            assert ev["job"]["restart_count"] == 1
            assert [n["hostname"] for n in ev["job"]["nodes"]] == ["a"]
        finally:
            es.close()
            watch.cancel()
