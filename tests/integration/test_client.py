"""The gRPC client of lib/ against grpcio servers and a scripted raw HTTP/2
server, through grpc-testclient (tests/integration/grpc_testclient.c):
unary and streaming replies, status codes and messages, deadlines, TLS,
mTLS, certificate failures, refused connections, HTTP status mapping,
GOAWAY, keepalive and the client's re-entrancy.

Every wait is bounded; nothing sleeps and hopes.
"""

import os
import socket
import struct
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest

import rdzvtest

P = rdzvtest.protos()
Event = P.types.Event
FAIL_MESSAGE = "café ☕ 100% échoué: nicht gefunden"


def run_client(*args, timeout=20):
    """Runs grpc-testclient; returns (stdout lines, elapsed seconds)."""
    argv = [rdzvtest.build_path("tests", "integration", "grpc_testclient")]
    argv += [str(a) for a in args]
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    elapsed = time.monotonic() - t0
    out = p.stdout.decode("utf-8")
    assert p.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (
        p.returncode, out, p.stderr.decode("utf-8", "replace"))
    return out.splitlines(), elapsed


def statuses(lines):
    return [l for l in lines if l.startswith("status=")]


def replies(lines):
    return [l for l in lines if l.startswith("seq=")]


# ------------------------------------------------------------ grpcio server

def _echo(req, ctx):
    if req.kind == "whoami":
        auth = ctx.auth_context()
        cn = auth.get("x509_common_name", [b"none"])[0].decode()
        return Event(seq=req.seq, kind="whoami", message=cn)
    return req


def _stream(req, ctx):
    for i in range(1, req.seq + 1):
        yield Event(seq=i, kind="stream", message="m%d" % i)


def _big(req, ctx):
    return Event(seq=1, kind="big", message="x" * req.seq)


def _fail(req, ctx):
    ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, FAIL_MESSAGE)


def _refuse(req, ctx):
    # What a standby rdzvd does: UNAVAILABLE, the leader in the trailers
    # (a trailers-only response, as no reply was sent).
    ctx.set_trailing_metadata((("rdzv-leader", req.message or "10.0.0.7:29400"),
                               ("x-other", "yes")))
    ctx.abort(grpc.StatusCode.UNAVAILABLE, "not the leader")


def _trailer(req, ctx):
    # A reply, then trailers with metadata: the trailers are a HEADERS
    # frame of their own after the DATA.
    ctx.set_trailing_metadata((("rdzv-leader", "after-reply:1"),
                               ("x-long", "y" * req.seq)))
    return Event(seq=1, kind="trailer")


def _slow(req, ctx):
    done = threading.Event()
    ctx.add_callback(done.set)
    done.wait(10)
    return Event(seq=1, kind="slow")


def _chat(reqs, ctx):
    """Bidi: echoes each request as it comes, then says how many came."""
    n = 0
    for req in reqs:
        n += 1
        yield req
    yield Event(seq=n, kind="end")


def _handlers():
    def uu(fn):
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=Event.FromString,
            response_serializer=Event.SerializeToString)

    def us(fn):
        return grpc.unary_stream_rpc_method_handler(
            fn, request_deserializer=Event.FromString,
            response_serializer=Event.SerializeToString)
    def ss(fn):
        return grpc.stream_stream_rpc_method_handler(
            fn, request_deserializer=Event.FromString,
            response_serializer=Event.SerializeToString)
    return grpc.method_handlers_generic_handler("rdzv.test.Test", {
        "Chat": ss(_chat),
        "Echo": uu(_echo), "Stream": us(_stream), "Big": uu(_big),
        "Fail": uu(_fail), "Slow": uu(_slow), "Refuse": uu(_refuse),
        "Trailer": uu(_trailer),
    })


class GrpcioServer:
    def __init__(self, creds=None, addr="127.0.0.1:0"):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((_handlers(),))
        if creds is None:
            port = self.server.add_insecure_port(addr)
        else:
            port = self.server.add_secure_port(addr, creds)
        assert port != 0 or addr.startswith("unix:")
        self.addr = addr if addr.startswith("unix:") else "127.0.0.1:%d" % port
        self.server.start()

    def stop(self):
        self.server.stop(None).wait(10)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return rdzvtest.make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def plain():
    s = GrpcioServer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tls_server(certs):
    creds = grpc.ssl_server_credentials(
        [(rdzvtest.read(certs["server_key"]), rdzvtest.read(certs["server_cert"]))])
    s = GrpcioServer(creds)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mtls_server(certs):
    creds = grpc.ssl_server_credentials(
        [(rdzvtest.read(certs["server_key"]), rdzvtest.read(certs["server_cert"]))],
        root_certificates=rdzvtest.read(certs["ca"]), require_client_auth=True)
    s = GrpcioServer(creds)
    yield s
    s.stop()


# ---------------------------------------------------------------- basics

@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_unary_echo(plain, mode):
    lines, _ = run_client("--server", plain.addr, mode, "/rdzv.test.Test/Echo",
                          "seq=7", "kind=hello", "message=wörld")
    assert replies(lines) == ["seq=7 kind=hello message=wörld"]
    assert statuses(lines) == ["status=OK message="]


def test_stream_in_order(plain):
    lines, _ = run_client("--server", plain.addr, "stream",
                          "/rdzv.test.Test/Stream", "seq=25")
    assert replies(lines) == ["seq=%d kind=stream message=m%d" % (i, i)
                              for i in range(1, 26)]
    assert lines[-1] == "status=OK message="


@pytest.mark.parametrize("n", [0, 1, 40])
def test_bidi_sends_on_open_call(plain, n):
    """grpc_client_stream without a first message, then grpc_ccall_send one
    message at a time, each after the echo of the one before (so sends
    happen before the connection is up and on a stream long open), then
    grpc_ccall_close_send: the server sees every message in order and the
    end of the request side."""
    lines, _ = run_client("--server", plain.addr, "--timeout", "10000", "bidi",
                          "/rdzv.test.Test/Chat", "seq=%d" % n, "kind=chat",
                          "message=hé")
    assert replies(lines) == ["seq=%d kind=chat message=hé" % i
                              for i in range(1, n + 1)] + ["seq=%d kind=end message=" % n]
    assert lines[-1] == "status=OK message=", lines


def test_bidi_messages_past_the_flow_control_window(plain):
    """Messages larger than HTTP/2's initial window (64 KiB) on an open
    request side: sent in pieces as the server opens its window."""
    big = "é" * 60000                      # 120,000 bytes
    lines, _ = run_client("--server", plain.addr, "--timeout", "10000", "bidi",
                          "/rdzv.test.Test/Chat", "seq=3", "kind=big",
                          "message=" + big)
    assert replies(lines) == ["seq=%d kind=big message=%s" % (i, big)
                              for i in (1, 2, 3)] + ["seq=3 kind=end message="]
    assert lines[-1] == "status=OK message="


def test_bidi_server_ends_call_early(plain):
    """A stream the server ends (here: a method that does not exist) ends
    with its status; sends after that say EPIPE, not a crash."""
    lines, _ = run_client("--server", plain.addr, "bidi", "/rdzv.test.Test/Nope",
                          "seq=3")
    assert statuses(lines) == ["status=UNIMPLEMENTED message=Method not found!"]


def test_stream_zero_messages(plain):
    lines, _ = run_client("--server", plain.addr, "stream",
                          "/rdzv.test.Test/Stream", "seq=0")
    assert replies(lines) == []
    assert statuses(lines) == ["status=OK message="]


def test_unary_sync_without_reply_is_internal(plain):
    lines, _ = run_client("--server", plain.addr, "unary",
                          "/rdzv.test.Test/Stream", "seq=0")
    assert statuses(lines)[0].startswith("status=INTERNAL message=")
    assert "no reply" in statuses(lines)[0]


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_status_and_percent_decoded_message(plain, mode):
    lines, _ = run_client("--server", plain.addr, mode, "/rdzv.test.Test/Fail")
    assert statuses(lines) == ["status=FAILED_PRECONDITION message=" + FAIL_MESSAGE]


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_trailer_of_a_refused_call(plain, mode):
    lines, _ = run_client("--server", plain.addr, "--trailer", "rdzv-leader",
                          mode, "/rdzv.test.Test/Refuse", "message=b.example:29401")
    assert lines[-2:] == ["trailer rdzv-leader=b.example:29401",
                          "status=UNAVAILABLE message=not the leader"], lines
    lines, _ = run_client("--server", plain.addr, "--trailer", "x-other", mode,
                          "/rdzv.test.Test/Refuse")
    assert "trailer x-other=yes" in lines
    # The reserved headers are not metadata.
    lines, _ = run_client("--server", plain.addr, "--trailer", "grpc-status",
                          mode, "/rdzv.test.Test/Refuse")
    assert "trailer grpc-status absent" in lines


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_trailer_after_a_reply(plain, mode):
    lines, _ = run_client("--server", plain.addr, "--trailer", "rdzv-leader",
                          mode, "/rdzv.test.Test/Trailer", "seq=10")
    assert lines[-3:] == ["seq=1 kind=trailer message=",
                          "trailer rdzv-leader=after-reply:1",
                          "status=OK message="], lines
    # A value over the client's bound is dropped; the call is unharmed.
    lines, _ = run_client("--server", plain.addr, "--trailer", "x-long",
                          mode, "/rdzv.test.Test/Trailer", "seq=5000")
    assert lines[-2:] == ["trailer x-long absent", "status=OK message="], lines
    lines, _ = run_client("--server", plain.addr, "--trailer", "x-long",
                          mode, "/rdzv.test.Test/Trailer", "seq=1024")
    assert "trailer x-long=" + "y" * 1024 in lines


def test_no_trailer_without_a_server(plain):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for mode in ("unary", "stream"):
        lines, _ = run_client("--server", "127.0.0.1:%d" % port, "--trailer",
                              "rdzv-leader", mode, "/rdzv.test.Test/Refuse")
        assert "trailer rdzv-leader absent" in lines
    # Calls without trailers have none either.
    lines, _ = run_client("--server", plain.addr, "--trailer", "rdzv-leader",
                          "unary", "/rdzv.test.Test/Echo")
    assert "trailer rdzv-leader absent" in lines


def test_unknown_method(plain):
    lines, _ = run_client("--server", plain.addr, "unary", "/rdzv.test.Test/Nope")
    assert statuses(lines)[0].startswith("status=UNIMPLEMENTED")


@pytest.mark.parametrize("mode", ["unary", "stream"])
def test_deadline_exceeded(plain, mode):
    lines, elapsed = run_client("--server", plain.addr, "--timeout", "300",
                                mode, "/rdzv.test.Test/Slow")
    assert statuses(lines)[0].startswith("status=DEADLINE_EXCEEDED"), lines
    assert 0.25 < elapsed < 5


def test_reply_over_max_message(plain):
    lines, _ = run_client("--server", plain.addr, "--max-message", "1000",
                          "stream", "/rdzv.test.Test/Big", "seq=5000")
    assert replies(lines) == []
    assert statuses(lines)[0].startswith("status=RESOURCE_EXHAUSTED"), lines
    lines, _ = run_client("--server", plain.addr, "--max-message", "10000",
                          "stream", "/rdzv.test.Test/Big", "seq=5000")
    assert len(replies(lines)) == 1 and lines[-1] == "status=OK message="


def test_connection_reused_across_calls(plain):
    lines, _ = run_client("--server", plain.addr, "--repeat", "3", "stream",
                          "/rdzv.test.Test/Stream", "seq=2")
    assert statuses(lines) == ["status=OK message="] * 3
    assert [l for l in lines if l.startswith("local=")] == ["local=127.0.0.1"] * 2


def test_cancel_inside_on_msg(plain):
    lines, _ = run_client("--server", plain.addr, "--cancel-after", "3",
                          "stream", "/rdzv.test.Test/Stream", "seq=1000")
    assert len(replies(lines)) == 3
    assert statuses(lines) == ["status=CANCELLED message=cancelled by the client"]


def test_free_client_inside_on_msg(plain):
    lines, _ = run_client("--server", plain.addr, "--free-after", "2",
                          "stream", "/rdzv.test.Test/Stream", "seq=1000")
    assert len(replies(lines)) == 2
    assert statuses(lines) == ["status=CANCELLED message=the client was closed"]


def test_unix_socket(tmp_path):
    path = str(tmp_path / "g.sock")
    s = GrpcioServer(addr="unix:" + path)
    try:
        lines, _ = run_client("--server", "unix:" + path, "--repeat", "2",
                              "stream", "/rdzv.test.Test/Echo", "seq=3")
        assert replies(lines) == ["seq=3 kind= message="] * 2
        assert "local=unix" in lines
    finally:
        s.stop()


def test_connection_refused_quickly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for mode in ("unary", "stream"):
        lines, elapsed = run_client("--server", "127.0.0.1:%d" % port, mode,
                                    "/rdzv.test.Test/Echo")
        assert statuses(lines) == [
            "status=UNAVAILABLE message=127.0.0.1:%d: connection refused" % port]
        assert elapsed < 3
    assert ("closed err=-111 reason=127.0.0.1:%d: connection refused" % port
            in lines), lines


def test_free_client_inside_on_closed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines, _ = run_client("--server", "127.0.0.1:%d" % port, "--free-on-close",
                          "--repeat", "3", "stream", "/rdzv.test.Test/Echo")
    assert lines == ["status=UNAVAILABLE message=127.0.0.1:%d: connection refused"
                     % port, "closed err=-111 reason=127.0.0.1:%d: "
                     "connection refused" % port]


def test_unresolvable_host():
    lines, _ = run_client("--server", "no-such-host.invalid:1", "unary",
                          "/rdzv.test.Test/Echo")
    assert statuses(lines)[0].startswith(
        "status=UNAVAILABLE message=no-such-host.invalid:1: cannot resolve")


# ------------------------------------------------------------------- TLS

def test_tls_verifies_ca(certs, tls_server):
    lines, _ = run_client("--server", tls_server.addr, "--tls-ca", certs["ca"],
                          "unary", "/rdzv.test.Test/Echo", "seq=1")
    assert statuses(lines) == ["status=OK message="]
    # By name (SNI and host check on "localhost").
    port = tls_server.addr.rsplit(":", 1)[1]
    lines, _ = run_client("--server", "localhost:" + port, "--tls-ca", certs["ca"],
                          "stream", "/rdzv.test.Test/Stream", "seq=3")
    assert len(replies(lines)) == 3 and lines[-1] == "status=OK message="


def test_tls_wrong_ca(certs, tls_server):
    lines, _ = run_client("--server", tls_server.addr, "--tls-ca", certs["other_ca"],
                          "unary", "/rdzv.test.Test/Echo")
    st = statuses(lines)[0]
    assert st.startswith("status=UNAVAILABLE message="), st
    assert "certificate verification failed" in st


def test_tls_wrong_server_name(certs, tls_server):
    lines, _ = run_client("--server", tls_server.addr, "--tls-ca", certs["ca"],
                          "--server-name", "wrong.example", "unary",
                          "/rdzv.test.Test/Echo")
    st = statuses(lines)[0]
    assert st.startswith("status=UNAVAILABLE") and "certificate verification" in st


def test_cleartext_client_against_tls_server(tls_server):
    lines, elapsed = run_client("--server", tls_server.addr, "unary",
                                "/rdzv.test.Test/Echo")
    assert statuses(lines)[0].startswith("status=UNAVAILABLE"), lines
    assert "expect TLS?" in statuses(lines)[0]
    assert elapsed < 10


def test_mtls(certs, mtls_server):
    lines, _ = run_client("--server", mtls_server.addr, "--tls-ca", certs["ca"],
                          "--tls-cert", certs["client_cert"],
                          "--tls-key", certs["client_key"],
                          "unary", "/rdzv.test.Test/Echo", "kind=whoami")
    assert replies(lines) == ["seq=0 kind=whoami message=node-7"]
    assert statuses(lines) == ["status=OK message="]


def test_mtls_without_client_cert(certs, mtls_server):
    lines, _ = run_client("--server", mtls_server.addr, "--tls-ca", certs["ca"],
                          "unary", "/rdzv.test.Test/Echo")
    assert statuses(lines)[0].startswith("status=UNAVAILABLE"), lines
    assert "require a client certificate?" in statuses(lines)[0]


# ------------------------------------------------- scripted HTTP/2 server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, SETTINGS, PING, GOAWAY = 1, 4, 6, 7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, stream, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, ftype, flags, stream) + payload


def status_block(code):
    """HPACK ":status CODE": literal without indexing, name from the static
    table (index 8)."""
    v = str(code).encode()
    return bytes([0x08, len(v)]) + v


class RawServer:
    """Accepts connections one after another; for each HEADERS frame from the
    client calls script(conn, stream_id, count) where count numbers requests
    across connections. silent=True sends nothing at all (not even SETTINGS)."""

    def __init__(self, script=None, silent=False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.script = script
        self.silent = silent
        self.requests = 0
        self.connections = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _recv_exact(self, c, n):
        buf = b""
        while len(buf) < n and not self.stopping:
            try:
                chunk = c.recv(n - len(buf))
            except socket.timeout:
                continue
            if not chunk:
                raise EOFError
            buf += chunk
        if len(buf) < n:
            raise EOFError
        return buf

    def _serve(self, c):
        c.settimeout(0.2)
        if self.silent:
            # Read and drop everything, answer nothing: no SETTINGS, no PING
            # ACK, no TLS ServerHello.
            while not self.stopping:
                self._recv_exact(c, 1)
            return
        if self._recv_exact(c, len(PREFACE)) != PREFACE:
            return
        c.sendall(frame(SETTINGS, 0, 0))
        while not self.stopping:
            hdr = self._recv_exact(c, 9)
            n = (hdr[0] << 16) | (hdr[1] << 8) | hdr[2]
            ftype, flags = hdr[3], hdr[4]
            sid = struct.unpack(">I", hdr[5:9])[0] & 0x7FFFFFFF
            self._recv_exact(c, n)
            if ftype == SETTINGS and not flags & ACK:
                c.sendall(frame(SETTINGS, ACK, 0))
            elif ftype == HEADERS:
                self.requests += 1
                self.script(c, sid, self.requests)

    def _run(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.connections += 1
            with c:
                try:
                    self._serve(c)
                except (EOFError, OSError):
                    pass

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize("code,status", [
    (503, "UNAVAILABLE"), (404, "UNIMPLEMENTED"), (415, "INTERNAL"),
    (401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"), (500, "UNKNOWN")])
def test_http_status_mapping(code, status):
    def script(c, sid, n):
        c.sendall(frame(HEADERS, END_STREAM | END_HEADERS, sid, status_block(code)))
    srv = RawServer(script)
    try:
        lines, _ = run_client("--server", srv.addr, "unary", "/rdzv.test.Test/Echo")
        st = statuses(lines)[0]
        assert st.startswith("status=%s message=" % status), st
        assert "HTTP status %d" % code in st
    finally:
        srv.stop()


def test_missing_grpc_status_is_unknown():
    def script(c, sid, n):
        c.sendall(frame(HEADERS, END_STREAM | END_HEADERS, sid, status_block(200)))
    srv = RawServer(script)
    try:
        lines, _ = run_client("--server", srv.addr, "unary", "/rdzv.test.Test/Echo")
        assert statuses(lines)[0].startswith("status=UNKNOWN"), lines
        assert "grpc-status" in statuses(lines)[0]
    finally:
        srv.stop()


def literal(name, value):
    """HPACK literal header without indexing, new name, no Huffman."""
    name, value = name.encode(), value.encode()
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value


def test_goaway_lets_started_calls_finish():
    """GOAWAY naming the call's stream as the last one: the call still gets
    its reply and OK, the drained connection closes, and the next call
    connects anew."""
    msg = Event(seq=9, kind="drain").SerializeToString()
    def script(c, sid, n):
        c.sendall(frame(GOAWAY, 0, 0, struct.pack(">II", sid, 0)) +
                  frame(HEADERS, END_HEADERS, sid, status_block(200) +
                        literal("content-type", "application/grpc")) +
                  frame(0, 0, sid, struct.pack(">BI", 0, len(msg)) + msg) +
                  frame(HEADERS, END_STREAM | END_HEADERS, sid,
                        literal("grpc-status", "0")))
    srv = RawServer(script)
    try:
        lines, _ = run_client("--server", srv.addr, "--repeat", "2", "stream",
                              "/rdzv.test.Test/Echo")
        assert replies(lines) == ["seq=9 kind=drain message="] * 2
        assert statuses(lines) == ["status=OK message="] * 2
        # Drained after GOAWAY: nghttp2 ends the session, and the reason
        # names the server.
        assert len([l for l in lines if l.startswith(
            "closed err=-108 reason=%s: " % srv.addr)]) == 2, lines
        assert srv.connections == 2
    finally:
        srv.stop()


def test_undecodable_reply_is_internal():
    bad = b"\xff\xff\xff"
    def script(c, sid, n):
        c.sendall(frame(HEADERS, END_HEADERS, sid, status_block(200) +
                        literal("content-type", "application/grpc")) +
                  frame(0, 0, sid, struct.pack(">BI", 0, len(bad)) + bad) +
                  frame(HEADERS, END_STREAM | END_HEADERS, sid,
                        literal("grpc-status", "0")))
    srv = RawServer(script)
    try:
        for mode in ("unary", "stream"):
            lines, _ = run_client("--server", srv.addr, mode, "/rdzv.test.Test/Echo")
            assert replies(lines) == []
            st = statuses(lines)[0]
            assert st.startswith("status=INTERNAL") and "rdzv.v1.Event" in st, st
    finally:
        srv.stop()


def test_goaway_fails_unstarted_calls_and_next_call_reconnects():
    """The first request on each connection gets GOAWAY(last_stream_id=0):
    the call fails UNAVAILABLE; the next call must use a new connection."""
    def script(c, sid, n):
        c.sendall(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
    srv = RawServer(script)
    try:
        lines, _ = run_client("--server", srv.addr, "--repeat", "2", "stream",
                              "/rdzv.test.Test/Echo")
        st = statuses(lines)
        assert len(st) == 2
        assert all(s.startswith("status=UNAVAILABLE") and "GOAWAY" in s for s in st), st
        assert rdzvtest.wait_for(lambda: srv.connections >= 2, 5, what="reconnect")
    finally:
        srv.stop()


def test_keepalive_timeout_closes_connection():
    srv = RawServer(silent=True)
    try:
        lines, elapsed = run_client("--server", srv.addr, "--keepalive", "100",
                                    "--keepalive-timeout", "200", "stream",
                                    "/rdzv.test.Test/Echo")
        st = statuses(lines)[0]
        assert st.startswith("status=UNAVAILABLE") and "keepalive timeout" in st, st
        assert any(l.startswith("closed err=-110 reason=") and
                   "keepalive timeout" in l for l in lines), lines
        assert elapsed < 5
    finally:
        srv.stop()


def test_tls_handshake_timeout(certs):
    srv = RawServer(silent=True)
    try:
        lines, elapsed = run_client("--server", srv.addr, "--tls-ca", certs["ca"],
                                    "--connect-timeout", "300", "unary",
                                    "/rdzv.test.Test/Echo")
        st = statuses(lines)[0]
        assert st.startswith("status=UNAVAILABLE") and "timed out" in st, st
        assert elapsed < 5
    finally:
        srv.stop()
