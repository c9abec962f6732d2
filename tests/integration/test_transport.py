"""The gRPC server of lib/ against grpcio and raw sockets, through
grpc-testserver (tests/integration/grpc_testserver.c): status codes, size
limits, deadlines, backpressure, TLS, unix sockets, graceful shutdown.

Every wait is bounded; nothing sleeps and hopes.
"""

import os
import signal
import shutil
import socket
import ssl
import struct
import subprocess
import time

import grpc
import pytest

import rdzvtest
from h2raw import (PREFACE, DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY,
                   WINDOW_UPDATE, END_STREAM, END_HEADERS, frame, hpack_literal,
                   grpc_request, raw_connect, read_frames, wait_closed, h2_open,
                   has_grpc_status, read_until_closed, goaway_error,
                   ENHANCE_YOUR_CALM)

P = rdzvtest.protos()
Event = P.types.Event
OUT_CAP = 1 << 20


def server(tmp_path, *args, listen="127.0.0.1:0"):
    argv = [rdzvtest.build_path("tests", "integration", "grpc_testserver"),
            "--listen", listen] + list(args)
    proc = rdzvtest.Proc(argv)
    proc.addr = rdzvtest.listening(proc)
    return proc


@pytest.fixture
def srv(tmp_path):
    with server(tmp_path, "--out-cap", str(OUT_CAP)) as p:
        yield p
        assert p.stop(15) == 0, p.output()


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def method(ch, name, stream=False):
    make = ch.unary_stream if stream else ch.unary_unary
    return make("/rdzv.test.Test/" + name,
                request_serializer=Event.SerializeToString,
                response_deserializer=Event.FromString)


def rpc_error(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as ei:
        fn(*args, **kw)
    return ei.value


# ------------------------------------------------------------------ tests

def test_echo_and_health(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        rep = method(ch, "Echo")(Event(seq=7, kind="whoami"), timeout=5)
        assert rep.seq == 7
        assert rep.message == "identity=anonymous"
        assert rep.kind == "127.0.0.1"
        check = ch.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=P.health.HealthCheckRequest.SerializeToString,
            response_deserializer=P.health.HealthCheckResponse.FromString)
        assert check(P.health.HealthCheckRequest(), timeout=5).status == 1


def test_unknown_method(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        err = rpc_error(ch.unary_unary("/rdzv.test.Test/Nope"), b"", timeout=5)
        assert err.code() == grpc.StatusCode.UNIMPLEMENTED


def test_immediate_error_is_trailers_only(srv):
    """An error decided before any reply (here: an unknown method) is one
    HEADERS frame that ends the stream and carries grpc-status itself
    (gRPC's Trailers-Only), with no DATA frame."""
    s = raw_connect(srv.addr)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
              grpc_request("/rdzv.test.Test/Nope", Event()))
    frames, _ = read_frames(
        s, lambda fs: any(f[0] == HEADERS and f[2] == 1 and f[1] & END_STREAM
                          for f in fs))
    s.close()
    mine = [f for f in frames if f[2] == 1]
    assert [f[0] for f in mine] == [HEADERS], mine
    assert has_grpc_status(mine[0][3], 12), mine     # UNIMPLEMENTED
    # Answered before the request ended: RST_STREAM NO_ERROR tells the
    # client to stop sending (RFC 9113 §8.1).
    s = raw_connect(srv.addr)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
              grpc_request("/rdzv.test.Test/Nope", Event(), whole=False))
    frames, _ = read_frames(s, lambda fs: any(f[0] == RST_STREAM for f in fs))
    s.close()
    mine = [f for f in frames if f[2] == 1]
    assert [f[0] for f in mine] == [HEADERS, RST_STREAM], mine
    assert mine[0][1] & END_STREAM and mine[1][3] == b"\0\0\0\0", mine


def test_oversized_request_keeps_connection(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        before = echo(Event(kind="whoami"), timeout=5).generation
        err = rpc_error(echo, Event(message="x" * (6 << 20)), timeout=20)
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit" in err.details()
        # The same connection (the server names it) still serves.
        after = echo(Event(kind="whoami"), timeout=5)
        assert after.generation == before
        # Twice, and a big-but-allowed request too.
        assert echo(Event(message="y" * (3 << 20)), timeout=20).message == "y" * (3 << 20)
        err = rpc_error(echo, Event(message="x" * (6 << 20)), timeout=20)
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert echo(Event(kind="whoami"), timeout=5).generation == before


def test_garbage_preface_closes_only_that_connection(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        echo(Event(seq=1), timeout=5)
        s = raw_connect(srv.addr)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 64)
        assert wait_closed(s), "server kept a connection that sent garbage"
        s.close()
        assert echo(Event(seq=2), timeout=5).seq == 2
    with grpc.insecure_channel(srv.addr) as ch2:
        assert method(ch2, "Echo")(Event(seq=3), timeout=5).seq == 3


def test_deadline(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        t0 = time.monotonic()
        err = rpc_error(method(ch, "Sleep"), Event(), timeout=0.3)
        took = time.monotonic() - t0
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert took < 3, took
        assert method(ch, "Echo")(Event(seq=4), timeout=5).seq == 4


def test_server_side_deadline_raw(srv):
    """The server itself ends the call at grpc-timeout (not only the client)."""
    s = raw_connect(srv.addr)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    hdrs = hpack_literal([(":method", "POST"), (":scheme", "http"),
                          (":path", "/rdzv.test.Test/Sleep"),
                          (":authority", "x"), ("content-type", "application/grpc"),
                          ("grpc-timeout", "200m")])
    body = Event().SerializeToString()
    s.sendall(frame(HEADERS, END_HEADERS, 1, hdrs) +
              frame(DATA, END_STREAM, 1, struct.pack(">BI", 0, len(body)) + body))
    t0 = time.monotonic()
    frames, closed = read_frames(
        s, lambda fs: any(f[0] == HEADERS and f[2] == 1 and f[1] & END_STREAM
                          for f in fs), timeout=5)
    assert not closed
    assert time.monotonic() - t0 < 3
    s.close()


def test_fail_message_round_trip(srv):
    text = "ünïcödé ✓ 100% done\ttab"
    with grpc.insecure_channel(srv.addr) as ch:
        err = rpc_error(method(ch, "Fail"), Event(seq=9, message=text), timeout=5)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert err.details() == text


def test_custom_trailers(srv):
    """grpc_call_set_trailer: metadata beside grpc-status (rdzvd's
    rdzv-leader), in a Trailers-Only answer; bad keys and values refused."""
    with grpc.insecure_channel(srv.addr) as ch:
        fail = method(ch, "Fail")
        err = rpc_error(fail, Event(seq=14, message="not the leader",
                                    kind="rdzv-leader=10.0.0.7:29400;x-b=2;x-b=3"),
                        timeout=5)
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert err.details() == "not the leader"
        md = dict(err.trailing_metadata())
        assert md["rdzv-leader"] == "10.0.0.7:29400"
        assert md["x-b"] == "3"   # set again: replaced
        for bad in ("grpc-status=0", "Upper=1", "x-bin=1", "x=\x01"):
            err = rpc_error(fail, Event(seq=14, kind=bad), timeout=5)
            assert err.code() == grpc.StatusCode.INTERNAL
            assert "Invalid argument" in err.details()
        err = rpc_error(fail, Event(seq=14, kind="a=1;b=2;c=3;d=4;e=5"), timeout=5)
        assert err.code() == grpc.StatusCode.INTERNAL
        assert "trailer e:" in err.details()
        assert method(ch, "Echo")(Event(seq=1), timeout=5).seq == 1


def test_reply_from_timer_and_cancel_before(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        later = method(ch, "Later")
        t0 = time.monotonic()
        assert later(Event(seq=200, message="late"), timeout=5).message == "late"
        assert time.monotonic() - t0 >= 0.19
        # Cancelled or timed out before the timer: the handler's on-close
        # frees its state (the sanitizer build checks for leaks at exit).
        f = later.future(Event(seq=5000), timeout=30)
        f.cancel()
        err = rpc_error(later, Event(seq=5000), timeout=0.2)
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        futs = [later.future(Event(seq=i % 50, message=str(i)), timeout=10)
                for i in range(100)]
        assert [f.result(timeout=10).message for f in futs] == [str(i) for i in range(100)]


def test_undecodable_request_is_internal(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        raw = ch.unary_unary("/rdzv.test.Test/Echo")
        err = rpc_error(raw, b"\xff\xff\xff\xff", timeout=5)
        assert err.code() == grpc.StatusCode.INTERNAL
        assert method(ch, "Echo")(Event(seq=1), timeout=5).seq == 1


def test_compressed_request_is_refused(srv):
    with grpc.insecure_channel(srv.addr, compression=grpc.Compression.Gzip) as ch:
        err = rpc_error(method(ch, "Echo"), Event(message="z" * 1000), timeout=5)
        assert err.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL)
        assert "compress" in err.details()


def test_stream_in_order(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        call = method(ch, "Stream", stream=True)(Event(seq=500), timeout=10)
        assert [m.seq for m in call] == list(range(1, 501))
        assert call.code() == grpc.StatusCode.OK
        empty = method(ch, "Stream", stream=True)(Event(seq=0), timeout=10)
        assert list(empty) == []


def test_non_grpc_content_type_is_415(srv):
    path = "/rdzv.test.Test/Echo"
    if shutil.which("curl"):
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
             "--http2-prior-knowledge", "-X", "POST", "-H",
             "content-type: application/json", "--data", "{}", "-m", "10",
             "http://%s%s" % (srv.addr, path)],
            capture_output=True, text=True, timeout=20)
        assert out.stdout == "415", out
    # The raw way as well: the response HEADERS ends the stream and is not
    # a gRPC 200 (nghttp2 encodes :status 415 as a literal, not index 8).
    s = raw_connect(srv.addr)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
              grpc_request(path, Event(), content_type="text/plain"))
    frames, _ = read_frames(s, lambda fs: any(f[0] == HEADERS for f in fs))
    h = [f for f in frames if f[0] == HEADERS][0]
    assert h[1] & END_STREAM
    assert h[3][:1] != b"\x88", "got :status 200"
    s.close()


def test_many_concurrent_unary(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        futs = [echo.future(Event(seq=i, message="m%d" % i), timeout=30)
                for i in range(400)]
        for i, f in enumerate(futs):
            rep = f.result(timeout=30)
            assert rep.seq == i and rep.message == "m%d" % i


def asan_build():
    """Whether the test server carries AddressSanitizer, whose quarantine
    (up to 256 MiB of freed blocks) makes RSS say nothing of the server's
    own use: the memory bound is checked in the default build, the rest in
    both (as test_http_limits does)."""
    with open(rdzvtest.build_path("tests", "integration", "grpc_testserver"),
              "rb") as f:
        return b"__asan_init" in f.read()


def rss_bound(proc, baseline_kib):
    # out_cap of packed messages, nghttp2's frame and our 64 KiB output
    # threshold, plus allocator slack: far below what an unbounded queue
    # reaches in the seconds measured (hundreds of MiB).
    if asan_build():
        return float("inf")
    return baseline_kib + (3 * OUT_CAP) // 1024 + 24 * 1024


def watch_rss(proc, seconds, bound_kib, alive):
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rss = proc.rss_kib()
        peak = max(peak, rss)
        assert rss < bound_kib, "RSS %d KiB over bound %d KiB" % (rss, bound_kib)
        alive()
        time.sleep(0.1)
    return peak


def test_flood_raw_reader_stops(srv):
    """A client that opens a huge window and then never reads."""
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        echo(Event(seq=1), timeout=5)
        baseline = srv.rss_kib()
        s = raw_connect(srv.addr, rcvbuf=65536)
        big = 0x7FFFFFFF
        s.sendall(PREFACE +
                  frame(SETTINGS, 0, 0, struct.pack(">HI", 4, big)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", big - 65535)) +
                  grpc_request("/rdzv.test.Test/Flood", Event(seq=65536)))
        peak = watch_rss(srv, 4, rss_bound(srv, baseline),
                         lambda: echo(Event(seq=2), timeout=5))
        # The server is alive and the stream was really flowing.
        assert echo(Event(seq=3), timeout=5).seq == 3
        s.close()
        print("baseline %d KiB, peak %d KiB" % (baseline, peak))


def test_flood_grpcio_reader_stops(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        echo(Event(seq=1), timeout=5)
        baseline = srv.rss_kib()
        it = method(ch, "Flood", stream=True)(Event(seq=65536), timeout=60)
        first = next(it)
        assert len(first.message) == 65536
        with grpc.insecure_channel(srv.addr) as ch2:
            echo2 = method(ch2, "Echo")
            watch_rss(srv, 3, rss_bound(srv, baseline),
                      lambda: echo2(Event(seq=2), timeout=5))
        it.cancel()
        assert echo(Event(seq=3), timeout=5).seq == 3


def test_flood_completes_with_limit(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        call = method(ch, "Flood", stream=True)(Event(seq=100000, generation=300),
                                                 timeout=60)
        n = 0
        for m in call:
            n += 1
            assert m.seq == n and len(m.message) == 100000
        assert n == 300


def test_cancel_then_serve(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        for _ in range(20):
            f = method(ch, "Sleep").future(Event(), timeout=30)
            f.cancel()
        it = method(ch, "Flood", stream=True)(Event(seq=1000), timeout=30)
        next(it)
        it.cancel()
        assert method(ch, "Echo")(Event(seq=5), timeout=5).seq == 5


def test_unix_socket_identity(tmp_path):
    path = os.path.join(str(tmp_path), "t.sock")
    # A stale socket file from an earlier run is replaced.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()
    with server(tmp_path, listen="unix:" + path) as p:
        assert p.addr == "unix:" + path
        with grpc.insecure_channel("unix:" + path) as ch:
            rep = method(ch, "Echo")(Event(kind="whoami"), timeout=5)
            assert rep.message == "identity=uid:%d" % os.getuid()
            assert rep.kind == "unix"
        assert p.stop(15) == 0
    assert not os.path.exists(path), "socket file left behind"


def test_ipv6_and_two_listeners(tmp_path):
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    argv = [rdzvtest.build_path("tests", "integration", "grpc_testserver"),
            "--listen", "[::1]:0", "--listen", "127.0.0.1:0"]
    with rdzvtest.Proc(argv) as p:
        a6 = p.wait_line(r"listening on (\[::1\]:\d+)").group(1)
        a4 = p.wait_line(r"listening on (127\.0\.0\.1:\d+)").group(1)
        for addr, peer in ((a6, "::1"), (a4, "127.0.0.1")):
            with grpc.insecure_channel(addr) as ch:
                rep = method(ch, "Echo")(Event(kind="whoami"), timeout=5)
                assert rep.kind == peer
        assert p.stop(15) == 0


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return rdzvtest.make_certs(tmp_path_factory.mktemp("certs"))


def test_tls_and_mtls_identity(tmp_path, certs):
    c = certs
    with server(tmp_path, "--tls-cert", c["server_cert"], "--tls-key",
                c["server_key"]) as p:
        creds = grpc.ssl_channel_credentials(rdzvtest.read(c["ca"]))
        with grpc.secure_channel("localhost:%d" % port_of(p.addr), creds) as ch:
            rep = method(ch, "Echo")(Event(kind="whoami"), timeout=10)
            assert rep.message == "identity=anonymous"
        assert p.stop(15) == 0
    with server(tmp_path, "--tls-cert", c["server_cert"], "--tls-key",
                c["server_key"], "--tls-ca", c["ca"]) as p:
        creds = grpc.ssl_channel_credentials(
            rdzvtest.read(c["ca"]), rdzvtest.read(c["client_key"]),
            rdzvtest.read(c["client_cert"]))
        with grpc.secure_channel("localhost:%d" % port_of(p.addr), creds) as ch:
            rep = method(ch, "Echo")(Event(kind="whoami"), timeout=10)
            assert rep.message.startswith("identity=")
            assert "CN=node-7" in rep.message and "O=rdzv-test" in rep.message
            err = rpc_error(method(ch, "Echo"), Event(message="x" * (5 << 20)),
                            timeout=20)
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # Without a client certificate the handshake fails.
        creds = grpc.ssl_channel_credentials(rdzvtest.read(c["ca"]))
        with grpc.secure_channel("localhost:%d" % port_of(p.addr), creds) as ch:
            err = rpc_error(method(ch, "Echo"), Event(), timeout=5)
            assert err.code() in (grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED)
        assert p.stop(15) == 0


def test_tls_without_h2_alpn_is_refused(tmp_path, certs):
    c = certs
    with server(tmp_path, "--tls-cert", c["server_cert"], "--tls-key",
                c["server_key"]) as p:
        ctx = ssl.create_default_context(cafile=c["ca"])
        ctx.set_alpn_protocols(["http/1.1"])
        raw = raw_connect(p.addr)
        refused = False
        try:
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            refused = wait_closed(s)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            refused = True
        assert refused
        raw.close()
        assert p.stop(15) == 0


def test_graceful_shutdown(tmp_path):
    with server(tmp_path) as p:
        with grpc.insecure_channel(p.addr) as ch:
            echo = method(ch, "Echo")
            echo(Event(seq=1), timeout=5)
            # An in-flight call with its own deadline ends by it, not by the
            # shutdown; one without a deadline is forced at the timeout (5 s).
            short = method(ch, "Sleep").future(Event(), timeout=1.5)
            forever = method(ch, "Sleep").future(Event())
            # Streams of a connection are read in order: once this answer
            # is back, the server holds both Sleep calls.
            echo(Event(seq=2), timeout=5)
            t0 = time.monotonic()
            p.signal(signal.SIGTERM)
            # New connections are refused once the listener is gone.
            def refused():
                try:
                    socket.create_connection(("127.0.0.1", port_of(p.addr)), 1).close()
                    return False
                except ConnectionRefusedError:
                    return True
            rdzvtest.wait_for(refused, 5, what="listener closed")
            with pytest.raises(grpc.RpcError) as ei:
                short.result(timeout=10)
            assert ei.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            with pytest.raises(grpc.RpcError) as ei:
                forever.result(timeout=15)
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
            assert p.wait(15) == 0
            took = time.monotonic() - t0
            assert 4 < took < 12, took


def test_shutdown_idle_exits_fast(tmp_path):
    with server(tmp_path) as p:
        with grpc.insecure_channel(p.addr) as ch:
            method(ch, "Echo")(Event(seq=1), timeout=5)
            t0 = time.monotonic()
            p.signal(signal.SIGTERM)
            assert p.wait(10) == 0
            assert time.monotonic() - t0 < 3


# ------------------------------------------------------------ limits, liveness

def sleep_request(stream):
    hdrs = hpack_literal([(":method", "POST"), (":scheme", "http"),
                          (":path", "/rdzv.test.Test/Sleep"), (":authority", "x"),
                          ("content-type", "application/grpc")])
    body = Event().SerializeToString()
    return (frame(HEADERS, END_HEADERS, stream, hdrs) +
            frame(DATA, END_STREAM, stream, struct.pack(">BI", 0, len(body)) + body))


def test_max_streams(tmp_path):
    """Streams over SETTINGS_MAX_CONCURRENT_STREAMS: refused while our
    SETTINGS are unacknowledged; afterwards nghttp2 treats the excess as the
    protocol error it is (RFC 9113 §5.1.2 allows either) and ends that
    connection only."""
    with server(tmp_path, "--max-streams", "2") as p:
        s = raw_connect(p.addr)
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  sleep_request(1) + sleep_request(3) + sleep_request(5))
        frames, closed = read_frames(s, lambda fs: any(f[0] == RST_STREAM for f in fs))
        rst = [f for f in frames if f[0] == RST_STREAM]
        assert rst[0][2] == 5
        assert struct.unpack(">I", rst[0][3])[0] == 7   # REFUSED_STREAM
        s.close()

        s = h2_open(p.addr)
        s.sendall(sleep_request(1) + sleep_request(3) + sleep_request(5))
        frames, closed = read_frames(s, lambda fs: any(f[0] == GOAWAY for f in fs))
        assert struct.unpack(">II", [f for f in frames if f[0] == GOAWAY][0][3][:8])[1] == 1
        assert wait_closed(s)
        s.close()
        with grpc.insecure_channel(p.addr) as ch:
            assert method(ch, "Echo")(Event(seq=1), timeout=5).seq == 1
        assert p.stop(15) == 0


def serves(addr):
    """Whether an Echo on a new connection to |addr| is answered."""
    with grpc.insecure_channel(addr) as ch:
        try:
            return method(ch, "Echo")(Event(seq=1), timeout=2).seq == 1
        except grpc.RpcError:
            return False


def test_max_conns(tmp_path):
    """At max_conns a new connection closes the oldest that has made no
    call to make room; when every one has, the new one is refused with a
    GOAWAY saying so, and served again once one has gone."""
    with server(tmp_path, "--max-conns", "2") as p:
        idle = [h2_open(p.addr), h2_open(p.addr)]
        assert serves(p.addr)
        assert wait_closed(idle[0]), "the oldest idle connection was kept"
        for s in idle:
            s.close()
        a, b = h2_open(p.addr), h2_open(p.addr)
        for s in (a, b):
            s.sendall(grpc_request("/rdzv.test.Test/Echo", Event(seq=1)))
            read_frames(s, lambda fs: any(f[0] == HEADERS for f in fs))
        c = raw_connect(p.addr)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0))
        frames = read_until_closed(c)
        assert goaway_error(frames) == ENHANCE_YOUR_CALM, frames
        c.close()
        a.close()
        # Room again once one has gone.
        rdzvtest.wait_for(lambda: serves(p.addr), 10, interval=0.2,
                          what="a free connection slot")
        b.close()
        assert p.stop(15) == 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_pauses_accept(tmp_path):
    """With the descriptor limit reached the server neither spins on its
    listener nor dies, and accepts again once descriptors are free."""
    binary = rdzvtest.build_path("tests", "integration", "grpc_testserver")
    p = rdzvtest.Proc(["/bin/sh", "-c", 'ulimit -n 48 && exec "$0" "$@"', binary,
                       "--listen", "127.0.0.1:0"])
    with p:
        p.addr = rdzvtest.listening(p)
        socks = [raw_connect(p.addr) for _ in range(80)]
        # Let it hit the limit, then measure its CPU time over a while.
        with grpc.insecure_channel(p.addr) as ch:
            err = rpc_error(method(ch, "Echo"), Event(), timeout=1)
        cpu0, t0 = cpu_seconds(p.pid), time.monotonic()
        rdzvtest.wait_for(lambda: time.monotonic() - t0 > 1.5, 3)
        used = cpu_seconds(p.pid) - cpu0
        assert used < 0.5, "server used %.2f s of CPU in 1.5 s" % used
        for s in socks:
            s.close()
        rdzvtest.wait_for(lambda: serves(p.addr), 15, interval=0.2,
                          what="accepting again")
        assert p.stop(15) == 0


def test_keepalive_pings_silent_peer(tmp_path):
    with server(tmp_path, "--keepalive-ms", "300") as p:
        s = h2_open(p.addr)
        t0 = time.monotonic()
        frames, closed = read_frames(
            s, lambda fs: sum(1 for f in fs if f[0] == PING and not f[1] & 1) >= 3,
            timeout=5)
        assert not closed
        assert time.monotonic() - t0 < 3
        s.close()
        # A client slow to answer PINGs keeps its connection: grpcio answers
        # only while it polls, i.e. during calls (dead peers are left to
        # TCP_USER_TIMEOUT instead).
        with grpc.insecure_channel(p.addr) as ch:
            echo = method(ch, "Echo")
            conn = echo(Event(kind="whoami"), timeout=5).generation
            t1 = time.monotonic()
            rdzvtest.wait_for(lambda: time.monotonic() - t1 > 1.5, 3)
            assert echo(Event(kind="whoami"), timeout=5).generation == conn
        assert p.stop(15) == 0


def test_frequent_client_pings_are_answered(srv):
    s = h2_open(srv.addr)
    n = 300
    s.sendall(b"".join(frame(PING, 0, 0, struct.pack(">Q", i)) for i in range(n)))
    frames, closed = read_frames(
        s, lambda fs: sum(1 for f in fs if f[0] == PING and f[1] & 1) >= n)
    assert not closed
    assert not any(f[0] == GOAWAY for f in frames)
    s.sendall(sleep_request(1))
    s.close()


def test_goaway_on_shutdown(tmp_path):
    with server(tmp_path) as p:
        s = h2_open(p.addr)
        p.signal(signal.SIGTERM)
        frames, closed = read_frames(
            s, lambda fs: any(f[0] == GOAWAY for f in fs), timeout=5)
        goaway = [f for f in frames if f[0] == GOAWAY]
        assert goaway, "no GOAWAY before close"
        assert wait_closed(s, 10)
        assert p.wait(10) == 0


# ------------------------------------------- client and bidi streaming

def chat(ch):
    return ch.stream_stream("/rdzv.test.Test/Chat",
                            request_serializer=Event.SerializeToString,
                            response_deserializer=Event.FromString)


def test_bidi_answers_each_message_as_it_arrives(srv):
    """Each request message of a bidirectional call reaches the handler
    while the client's side is still open: the client waits for the answer
    to one message before it sends the next."""
    import queue
    q = queue.Queue()

    def requests():
        while True:
            ev = q.get(timeout=10)
            if ev is None:
                return
            yield ev

    with grpc.insecure_channel(srv.addr) as ch:
        call = chat(ch)(requests(), timeout=10)
        for i in range(1, 6):
            q.put(Event(seq=i, message="m%d" % i))
            rep = next(call)
            assert (rep.seq, rep.message) == (i, "m%d" % i)
        q.put(None)
        end = next(call)
        assert (end.kind, end.seq) == ("end", 5)
        assert list(call) == []
        assert call.code() == grpc.StatusCode.OK
        # No message at all is a request stream too.
        assert [(m.kind, m.seq) for m in chat(ch)(iter([]), timeout=5)] == \
            [("end", 0)]


def test_bidi_errors_end_the_call_not_the_connection(srv):
    with grpc.insecure_channel(srv.addr) as ch:
        echo = method(ch, "Echo")
        conn = echo(Event(kind="whoami"), timeout=5).generation
        # The handler ends the call while the client still sends.
        call = chat(ch)(iter([Event(seq=1), Event(kind="fail", seq=9,
                                                     message="stop"),
                             Event(seq=3)]), timeout=5)
        with pytest.raises(grpc.RpcError) as ei:
            list(call)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ei.value.details() == "stop"
        # An undecodable message ends it with INTERNAL.
        raw = ch.stream_stream("/rdzv.test.Test/Chat")
        with pytest.raises(grpc.RpcError) as ei:
            list(raw(iter([Event(seq=1).SerializeToString(),
                           b"\xff\xff\xff\xff"]), timeout=5))
        assert ei.value.code() == grpc.StatusCode.INTERNAL
        assert "decode" in ei.value.details()
        # Too big for the limit: RESOURCE_EXHAUSTED.
        call = chat(ch)(iter([Event(message="x" * (6 << 20))]), timeout=20)
        with pytest.raises(grpc.RpcError) as ei:
            list(call)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert echo(Event(kind="whoami"), timeout=5).generation == conn


def test_two_messages_in_one_data_frame(srv):
    """Several messages in one DATA frame: each answered on a bidi call;
    a unary call still refuses a second message with INTERNAL."""
    def body(*evs):
        out = b""
        for ev in evs:
            b = ev.SerializeToString()
            out += struct.pack(">BI", 0, len(b)) + b
        return out

    for path, want in (("/rdzv.test.Test/Chat", 0), ("/rdzv.test.Test/Echo", 13)):
        s = h2_open(srv.addr)
        req = grpc_request(path, Event(), whole=False)
        s.sendall(req + frame(DATA, END_STREAM, 1,
                              body(Event(seq=1), Event(seq=2))))
        frames, _ = read_frames(
            s, lambda fs: any(f[0] == HEADERS and f[2] == 1 and
                              f[1] & END_STREAM for f in fs))
        s.close()
        mine = [f for f in frames if f[2] == 1]
        assert has_grpc_status(mine[-1][3], want), mine
        data = b"".join(f[3] for f in mine if f[0] == DATA)
        seqs = []
        while data:
            n = struct.unpack(">I", data[1:5])[0]
            seqs.append(Event.FromString(data[5:5 + n]).seq)
            data = data[5 + n:]
        assert seqs == ([1, 2, 2] if want == 0 else []), seqs
