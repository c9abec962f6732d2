"""rdzvd's side of the transport, through raw HTTP/2 (h2raw.py) and grpcio:
why it closes a connection (its debug log says), failed TLS handshakes in
its log, connections that never begin HTTP/2 or hold no stream, how it
accepts again after running out of descriptors or connection slots, rapid
reset, and what a stream that is not read costs it.

Every wait is bounded; nothing sleeps and hopes.
"""

import datetime
import math
import os
import re
import resource
import ssl
import struct
import time

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from h2raw import (PREFACE, DATA, GOAWAY, HEADERS, RST_STREAM, SETTINGS, PING,
                   WINDOW_UPDATE, END_STREAM, NO_ERROR, CANCEL,
                   ENHANCE_YOUR_CALM, frame, grpc_request, raw_connect,
                   read_frames, read_until_closed, goaway_error, wait_closed,
                   h2_open, has_grpc_status)
import rdzvnode
import rdzvtest
from test_tls_certs import issue

P = rdzvtest.protos()
R, C = P.rendezvous, P.control
# rdzvd's limit on output a connection holds unwritten (grpc_server_opts
# out_cap, lib's default): PROTOCOL.md, "slow readers".
OUT_CAP = 1 << 20
SETTINGS_HEADER_TABLE_SIZE, SETTINGS_INITIAL_WINDOW_SIZE = 1, 4
RESOURCE_EXHAUSTED = 8


def test_close_reason_is_logged(tmp_path):
    """Garbage instead of the HTTP/2 preface: rdzvd's debug log names the
    connection and what was wrong with it; a client that hangs up is
    logged as that."""
    with rdzvtest.Daemon(tmp_path) as d:
        s = raw_connect(d.addr)
        port = s.getsockname()[1]
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 64)
        assert wait_closed(s), "rdzvd kept a connection that sent garbage"
        s.close()
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: HTTP/2: "
                    r"Received bad client magic" % port)

        s = h2_open(d.addr)
        port = s.getsockname()[1]
        s.close()
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: the peer "
                    r"closed the connection" % port)
        assert d.stop() == 0, d.output()


def test_tls_close_reason_is_logged(tmp_path):
    """A client without the certificate mTLS requires: the log says so."""
    c = rdzvtest.make_certs(tmp_path)
    with rdzvtest.Daemon(tmp_path, ["--tls-cert", c["server_cert"],
                                    "--tls-key", c["server_key"],
                                    "--tls-ca", c["ca"]]) as d:
        ctx = ssl.create_default_context(cafile=c["ca"])
        ctx.set_alpn_protocols(["h2"])
        raw = raw_connect(d.addr)
        port = raw.getsockname()[1]
        # TLS 1.3: the client learns of the refusal at its first read.
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.recv(1)
        raw.close()
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: TLS: peer did "
                    r"not return a certificate" % port)
        assert d.stop() == 0, d.output()


def tls_failures(d, start):
    """(lines, failures): the lines rdzvd logged for failed TLS handshakes
    since line |start|, and how many failures they count."""
    lines = count = 0
    for line in d.lines[start:]:
        if re.search(r"TLS handshake with \S+ failed: ", line):
            lines, count = lines + 1, count + 1
        m = re.search(r"(\d+) more TLS handshakes? failed, the last with ",
                      line)
        if m:
            lines, count = lines + 1, count + int(m.group(1))
    return lines, count


def tls_attempt(addr, ctx):
    """A TLS handshake that rdzvd refuses; returns our port."""
    raw = raw_connect(addr)
    port = raw.getsockname()[1]
    try:
        # TLS 1.3: the client learns of the refusal at its first read.
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.recv(1)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass
    raw.close()
    return port


def logged_failure(port):
    """A failed handshake from |port|, on its own line or as the last of
    those a later line counts."""
    return (r"(TLS handshake with 127\.0\.0\.1:%d failed|the last with "
            r"127\.0\.0\.1:%d): " % (port, port))


def test_failed_tls_handshakes_are_logged(tmp_path):
    """Under mTLS, a client whose certificate another CA signed and a
    cleartext client at the TLS listener: each failed handshake is logged at
    info with the peer and why. A burst of 50 takes a bounded number of
    lines (one a second), which count all 50. A client that hangs up
    without sending a byte (a port probe) is no failed handshake."""
    c = rdzvtest.make_certs(tmp_path)
    now = datetime.datetime.utcnow()
    key, cert = issue(rdzvtest.read(c["other_ca"]),
                      rdzvtest.read(c["other_ca_key"]),
                      now - datetime.timedelta(days=1),
                      now + datetime.timedelta(days=1),
                      ExtendedKeyUsageOID.CLIENT_AUTH)
    (tmp_path / "bad.key").write_bytes(key)
    (tmp_path / "bad.pem").write_bytes(cert)
    ctx = ssl.create_default_context(cafile=c["ca"])
    ctx.load_cert_chain(str(tmp_path / "bad.pem"), str(tmp_path / "bad.key"))
    ctx.set_alpn_protocols(["h2"])
    with rdzvtest.Daemon(tmp_path, ["--tls-cert", c["server_cert"],
                                    "--tls-key", c["server_key"],
                                    "--tls-ca", c["ca"]]) as d:
        port = tls_attempt(d.addr, ctx)
        m = d.wait_line(logged_failure(port) + r"(.*)$")
        print(m.string)
        assert "certificate" in m.group(2), m.string

        s = raw_connect(d.addr)
        port = s.getsockname()[1]
        s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        assert wait_closed(s), "rdzvd kept a cleartext client at TLS"
        s.close()
        print(d.wait_line(logged_failure(port)).string)

        mark = len(d.lines)
        t0 = time.monotonic()
        for _ in range(50):
            tls_attempt(d.addr, ctx)
        burst = time.monotonic() - t0
        rdzvtest.wait_for(lambda: tls_failures(d, mark)[1] >= 50, 10,
                          what="50 failed handshakes in the log")
        lines, count = tls_failures(d, mark)
        print("%d failures in %.2f s: %d lines" % (count, burst, lines))
        assert count == 50
        assert lines <= math.ceil(burst) + 2, d.lines[mark:]

        # A probe: connected and gone. Then one more refused client, whose
        # failure is the only one logged after the probe's close.
        probe = raw_connect(d.addr)
        port = probe.getsockname()[1]
        probe.close()
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed" % port)
        mark = len(d.lines)
        d.wait_line(logged_failure(tls_attempt(d.addr, ctx)))
        assert tls_failures(d, mark)[1] == 1, d.lines[mark:]
        assert d.stop() == 0, d.output()


# -------------------------------------- silent and idle connections

SERVING = P.health.HealthCheckResponse.SERVING


def health(addr, timeout=5):
    """A Health check on a connection of its own: rdzvd serves new
    clients."""
    with rdzvnode.channel(addr) as ch:
        check = ch.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=P.health.HealthCheckRequest.SerializeToString,
            response_deserializer=P.health.HealthCheckResponse.FromString)
        return check(P.health.HealthCheckRequest(), timeout=timeout).status


def test_silent_and_idle_connections_are_closed(tmp_path):
    """A connection that never sends the HTTP/2 preface is closed once
    --preface-timeout has passed, and one that holds no stream once
    --idle-timeout has, with GOAWAY NO_ERROR (a gRPC client reconnects for
    its next call). A connection with an open stream is kept, and is idle
    from the moment its stream ends. New clients are served throughout."""
    with rdzvtest.Daemon(tmp_path, ["--preface-timeout", "1s",
                                    "--idle-timeout", "2s"]) as d:
        t0 = time.monotonic()
        silent = raw_connect(d.addr)
        idle = h2_open(d.addr)
        busy = h2_open(d.addr)
        busy.sendall(grpc_request("/grpc.health.v1.Health/Watch",
                                  P.health.HealthCheckRequest()))
        read_frames(busy, lambda fs: any(f[0] == DATA for f in fs))
        silent_port, idle_port = (s.getsockname()[1] for s in (silent, idle))

        assert health(d.addr) == SERVING
        assert wait_closed(silent, 5), "a silent connection was kept"
        took = time.monotonic() - t0
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: no HTTP/2 "
                    r"preface within 1000 ms" % silent_port)
        assert health(d.addr) == SERVING

        frames = read_until_closed(idle, 5)
        idle_took = time.monotonic() - t0
        print("silent closed after %.2f s, idle after %.2f s" % (
            took, idle_took))
        assert took >= 0.95 and idle_took >= 1.95, (took, idle_took)
        assert goaway_error(frames) == NO_ERROR, frames
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: no stream "
                    r"for 2000 ms and no authenticated call: sent GOAWAY" % idle_port)

        # The connection with a stream is still served: a PING is answered.
        busy.sendall(frame(PING, 0, 0, b"12345678"))
        frames, closed = read_frames(busy, lambda fs: any(
            f[0] == PING and f[1] & 1 and f[3] == b"12345678" for f in fs))
        assert not closed
        # Its stream ends: idle from now on.
        t1 = time.monotonic()
        busy.sendall(frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)))
        frames = read_until_closed(busy, 5)
        assert time.monotonic() - t1 >= 1.95
        assert goaway_error(frames) == NO_ERROR, frames
        assert health(d.addr) == SERVING
        for s in (silent, idle, busy):
            s.close()
        assert d.stop() == 0, d.output()


def test_idle_timeout_below_the_preface_timeout(tmp_path):
    """An --idle-timeout shorter than --preface-timeout means what it says:
    a connection that sent its preface and holds no stream is closed after
    the idle timeout, not when the preface deadline would have passed."""
    with rdzvtest.Daemon(tmp_path, ["--preface-timeout", "30s",
                                    "--idle-timeout", "1s"]) as d:
        t0 = time.monotonic()
        idle = h2_open(d.addr)
        frames = read_until_closed(idle, 20)
        took = time.monotonic() - t0
        print("idle closed after %.2f s" % took)
        assert 0.95 <= took < 20, took
        assert goaway_error(frames) == NO_ERROR, frames
        idle.close()
        assert d.stop() == 0, d.output()


def test_silent_connections_do_not_lock_out_new_clients(tmp_path):
    """--max-connections filled by connections that never speak: a new
    client closes the oldest of them to make room and is served at once.
    Filled by connections that each made a call: a new one is refused at
    once with a GOAWAY naming the limit (rdzvd warns, once, that it is
    full), a client is served once one of them closes, and rdzvd says how
    long it was full and how many connections it refused."""
    with rdzvtest.Daemon(tmp_path, ["--max-connections", "5",
                                    "--preface-timeout", "2s"]) as d:
        silent = [raw_connect(d.addr) for _ in range(5)]
        assert health(d.addr) == SERVING
        assert wait_closed(silent[0], 5), "the oldest silent one was kept"
        d.wait_line(r"closed to make room for a new connection: "
                    r"max-connections \(5\) reached")
        for s in silent:
            s.close()
        busy = []
        for _ in range(5):
            s = h2_open(d.addr)
            s.sendall(grpc_request("/rdzv.v1.Control/ListJobs",
                                   P.control.ListJobsRequest()))
            read_frames(s, lambda fs: any(f[0] == HEADERS for f in fs))
            busy.append(s)
        refused = 0
        for _ in range(3):
            late = raw_connect(d.addr)
            late.sendall(PREFACE + frame(SETTINGS, 0, 0))
            frames = read_until_closed(late, 5)
            assert goaway_error(frames) == ENHANCE_YOUR_CALM, frames
            assert b"max-connections (5) reached" in [
                f for f in frames if f[0] == GOAWAY][0][3]
            late.close()
            refused += 1
        d.wait_line(r"rdzvd: warning: max-connections \(5\) reached and every "
                    r"connection made an authenticated call: new connections "
                    r"are refused")
        busy.pop().close()
        rdzvtest.wait_for(lambda: health(d.addr) == SERVING, 10, 0.1,
                          what="a client served after one closed")
        m = d.wait_line(r"below max-connections again after (\d+\.\d+) s; "
                        r"(\d+) connections were refused meanwhile")
        # Ours, and any health probe of the wait above that came before
        # rdzvd had read the close (a busy machine).
        assert int(m.group(2)) >= refused, m.string
        assert float(m.group(1)) < 10, m.string
        assert sum("max-connections (5) reached and" in line
                   for line in d.lines) == 1, d.output()
        for s in busy:
            s.close()
        assert d.stop() == 0, d.output()


# --------------------------------------------------------- rapid reset

def reset_pairs(first, n):
    """|n| streams from |first| on, each opened (a request's HEADERS) and
    reset at once."""
    out = b""
    for sid in range(first, first + 2 * n, 2):
        out += grpc_request("/grpc.health.v1.Health/Check",
                            P.health.HealthCheckRequest(), stream=sid,
                            whole=False)
        out += frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
    return out


def test_rapid_reset_gets_enhance_your_calm(tmp_path):
    """A client that opens streams and resets them at once (Rapid Reset,
    CVE-2023-44487) gets GOAWAY ENHANCE_YOUR_CALM and its connection ends,
    long before nghttp2's own limit would answer INTERNAL_ERROR. A client
    that resets a few dozen streams keeps its connection, and other clients
    are served throughout."""
    with rdzvtest.Daemon(tmp_path) as d:
        calm = h2_open(d.addr)
        calm.sendall(reset_pairs(1, 50) + grpc_request(
            "/grpc.health.v1.Health/Check", P.health.HealthCheckRequest(),
            stream=101))
        frames, closed = read_frames(calm, lambda fs: any(
            f[0] == HEADERS and f[2] == 101 and f[1] & END_STREAM
            for f in fs))
        assert not closed and goaway_error(frames) is None, frames

        s = h2_open(d.addr)
        port = s.getsockname()[1]
        try:
            s.sendall(reset_pairs(1, 1200))
        except (ConnectionResetError, BrokenPipeError):
            pass    # rdzvd closed it while we were still sending
        frames = read_until_closed(s, 10)
        assert goaway_error(frames) == ENHANCE_YOUR_CALM, frames
        d.wait_line(r"connection from 127\.0\.0\.1:%d closed: the client "
                    r"reset more than \d+ streams at once \(rapid reset\): "
                    r"sent GOAWAY ENHANCE_YOUR_CALM" % port)
        assert health(d.addr) == SERVING
        calm.sendall(grpc_request("/grpc.health.v1.Health/Check",
                                  P.health.HealthCheckRequest(), stream=103))
        frames, closed = read_frames(calm, lambda fs: any(
            f[0] == HEADERS and f[2] == 103 and f[1] & END_STREAM
            for f in fs))
        assert not closed
        for x in (s, calm):
            x.close()
        assert d.stop() == 0, d.output()


# ------------------------------------------------- out of descriptors

NOFILE = 64
PAUSED = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) rdzvd: accept: .*; "
                    r"accepting again when a connection closes, or in "
                    r"(\d+) ms$")


def day_seconds(t):
    """Seconds since local midnight of the epoch time |t|, as rdzvd's log
    stamps (%H:%M:%S.mmm) count them."""
    tm = time.localtime(t)
    return tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec + (t % 1)


def stamp(m):
    """The time of a PAUSED line, in seconds since local midnight."""
    return (int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) +
            int(m.group(4)) / 1000)


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_accept_resumes_when_a_connection_closes(tmp_path):
    """rdzvd with RLIMIT_NOFILE at 64 and every descriptor taken by a
    connection: a new client waits in the backlog while accepting pauses
    (rdzvd's debug log gives the pause, the fallback timer's period). When
    one of those connections closes, the waiting client is served at once:
    sooner after the last failed accept than half that period, so the
    descriptor freed, not the timer, resumed accepting."""
    argv = ["/usr/bin/env", "-u", "JOURNAL_STREAM",      # keep log stamps
            "/bin/sh", "-c", 'ulimit -n %d && exec "$0" "$@"' % NOFILE,
            rdzvtest.build_path("daemon", "rdzvd"),
            "--db", os.path.join(str(tmp_path), "rdzv.db"),
            "--log-level", "debug", "--listen", "127.0.0.1:0",
            # At the limit: above it rdzvd would keep gRPC below it.
            "--max-connections", str(NOFILE)]
    with rdzvtest.Proc(argv) as d:
        addr = rdzvtest.listening(d)
        held = []
        while open_fds(d.pid) < NOFILE:
            held.append(h2_open(addr))      # each is accepted: SETTINGS
        assert len(held) > 10, "rdzvd itself holds %d descriptors" % (
            NOFILE - len(held))

        # A client past the limit: its connection waits in the backlog and
        # rdzvd's accept fails.
        mark = len(d.lines)
        waiting = raw_connect(addr)
        waiting.sendall(PREFACE + frame(SETTINGS, 0, 0))
        pause_s = int(d.wait_line(PAUSED.pattern, start=mark).group(5)) / 1000

        # One of rdzvd's connections closes: a descriptor is free.
        held_port = held[0].getsockname()[1]
        held.pop(0).close()
        frames, closed = read_frames(
            waiting, lambda fs: any(f[0] == SETTINGS and not f[1] & 1
                                    for f in fs), timeout=10)
        served = time.time()
        assert not closed

        # The last failed accept before that close armed the timer; it was
        # still far from firing when the client was served.
        closed_line = d.wait_line(
            r"connection from 127\.0\.0\.1:%d closed" % held_port,
            start=mark).string
        before = d.lines[mark:d.lines.index(closed_line, mark)]
        last = [m for m in map(PAUSED.match, before) if m][-1]
        since = day_seconds(served) - stamp(last)
        print("served %.3f s after the last failed accept" % since)
        assert 0 <= since < pause_s / 2, (
            "served %.3f s after the last failed accept; the fallback "
            "timer's period is %.3f s" % (since, pause_s))

        # And it is served for real: a health check on that connection.
        waiting.sendall(frame(SETTINGS, 1, 0) + grpc_request(
            "/grpc.health.v1.Health/Check", P.health.HealthCheckRequest()))
        frames, _ = read_frames(waiting, lambda fs: any(
            f[0] == HEADERS and f[2] == 1 and f[1] & END_STREAM for f in fs))
        end = [f for f in frames if f[0] == HEADERS and f[2] == 1][-1]
        assert has_grpc_status(end[3], 0), frames
        waiting.close()
        for s in held:
            s.close()
        assert d.stop() == 0, d.output()


def test_out_of_descriptors_is_warned_once_per_episode(tmp_path):
    """RLIMIT_NOFILE at 64 and every descriptor taken by a connection that
    never speaks: rdzvd warns once that accepting fails while a new client
    waits in the backlog, however often it tries again. Once the preface
    deadline has closed the silent connections the waiting client is
    served, and rdzvd says how long that lasted and how many accepts
    failed."""
    argv = ["/usr/bin/env", "-u", "JOURNAL_STREAM",
            "/bin/sh", "-c", 'ulimit -n %d && exec "$0" "$@"' % NOFILE,
            rdzvtest.build_path("daemon", "rdzvd"),
            "--db", os.path.join(str(tmp_path), "rdzv.db"),
            "--log-level", "debug", "--listen", "127.0.0.1:0",
            "--preface-timeout", "2s", "--max-connections", str(NOFILE)]
    with rdzvtest.Proc(argv) as d:
        addr = rdzvtest.listening(d)
        d.wait_line(r"rdzvd: open files: at most %d$" % NOFILE)
        held = []
        while open_fds(d.pid) < NOFILE:
            n = open_fds(d.pid)
            held.append(raw_connect(addr))
            rdzvtest.wait_for(lambda: open_fds(d.pid) > n, 5,
                              what="rdzvd to accept")
        mark = len(d.lines)
        waiting = raw_connect(addr)
        waiting.sendall(PREFACE + frame(SETTINGS, 0, 0))
        d.wait_line(r"rdzvd: warning: accept: Too many open files \(open files: at "
                    r"most %d\): new clients wait in the listen backlog" %
                    NOFILE, start=mark)
        frames, closed = read_frames(
            waiting, lambda fs: any(f[0] == SETTINGS and not f[1] & 1
                                    for f in fs), timeout=10)
        assert not closed
        m = d.wait_line(r"rdzvd: warning: accept: serving new clients again after "
                        r"(\d+\.\d+) s; (\d+) accepts failed meanwhile",
                        start=mark)
        episode = d.lines[mark:d.lines.index(m.string, mark)]
        print("\n".join(episode[-3:]) + "\n" + m.string)
        warned = [l for l in episode if "Too many open files (open" in l]
        retries = [l for l in episode if PAUSED.match(l)]
        assert len(warned) == 1, episode
        # Every failed accept is counted, and the debug log has each.
        assert int(m.group(2)) == len(retries) >= 2, (m.string, retries)
        assert 0.5 <= float(m.group(1)) < 10, m.string
        waiting.close()
        for s in held:
            s.close()
        assert d.stop() == 0, d.output()


def test_soft_descriptor_limit_is_raised_to_the_hard_one(tmp_path):
    """Started with a soft RLIMIT_NOFILE of 256 under a higher hard limit
    (a login shell's 1024 under 1048576, say): rdzvd raises the soft limit
    to the hard one and logs what is in force."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard <= 256:
        pytest.skip("the hard limit is %d: nothing to raise" % hard)
    with rdzvtest.Daemon(tmp_path, wrapper=[
            "/bin/sh", "-c", 'ulimit -Sn 256 && exec "$0" "$@"']) as d:
        # One line says it; a warning when it caps max-connections.
        d.wait_line(r"rdzvd: (warning: )?open files: at most %d \(raised "
                    r"from 256\)" % hard)
        d.wait_line(r"rdzvd: ready")
        said = [l for l in d.lines if "open files" in l or "open-file" in l]
        assert len(said) == 1, said
        if hard < 100000:       # max-connections' default
            assert re.search(r"rdzvd: warning: open files: at most %d \(raised "
                             r"from 256\), which leaves room for \d+ gRPC "
                             r"connections, not max-connections 100000: "
                             r"raise the limit \(LimitNOFILE= in the unit, "
                             r"ulimit -n\) or lower max-connections$" % hard,
                             said[0]), said
        with open("/proc/%d/limits" % d.pid) as f:
            limits = [l.split() for l in f if l.startswith("Max open files")]
        assert limits[0][3:5] == [str(hard), str(hard)], limits
        assert d.stop() == 0, d.output()



# ------------------------------------------------------ slow readers

def grpc_messages(data):
    """The gRPC messages (5-byte prefix, then the message) in |data|."""
    out = []
    while data:
        n = struct.unpack(">I", data[1:5])[0]
        out.append(data[5:5 + n])
        data = data[5 + n:]
    return out


def test_streams_not_read_end_with_resource_exhausted(tmp_path):
    """A connection that reads nothing: rdzvd queues what it sends until the
    connection holds OUT_CAP, then ends each stream whose next message does
    not fit with RESOURCE_EXHAUSTED (a Watch first, then a Join stream on
    the same connection) instead of queueing without limit. Another
    connection is not affected, and what was queued is delivered once the
    client reads."""
    with rdzvtest.Daemon(tmp_path) as d, rdzvnode.Control(d.addr) as ctl:
        s = raw_connect(d.addr)
        # No flow-control window: nothing rdzvd sends on a stream leaves
        # its queue. No HPACK table either, so every trailer carries
        # grpc-status as a literal that has_grpc_status() finds.
        s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(
            ">HIHI", SETTINGS_HEADER_TABLE_SIZE, 0,
            SETTINGS_INITIAL_WINDOW_SIZE, 0)))
        job = dict(min_nodes=2, max_nodes=64, last_call_ms=600000)
        s.sendall(grpc_request("/rdzv.v1.Rendezvous/Join", R.JoinRequest(
            rdzv_id="slow", min_nodes=2, max_nodes=64,
            last_call_timeout_ms=600000, hostname="slow-reader", nproc=1,
            advertise_addr="127.0.0.1", master_port=29500), stream=1) +
            grpc_request("/rdzv.v1.Control/Watch",
                         C.WatchRequest(rdzv_id="slow"), stream=3))

        # Every join sends the watcher the job with all its nodes, each
        # with 64 GPU results: about 10 KiB a node, 3 MiB for 24 joins.
        gpus = [dict(device=i, name="N" * 95, uuid="U%047d" % i)
                for i in range(64)]
        nodes = []
        for i in range(24):
            n = rdzvnode.Node(d.addr, name="n%d" % i)
            nodes.append(n)
            n.join("slow", gpus=gpus, **job)
        # The job fails: every node is sent `failed`; the reader's Join
        # stream finds its connection full.
        ctl.abort_job("slow", "enough")
        for n in nodes:
            n.wait_event("failed")
        # rdzvd still serves.
        assert ctl.get_job("slow").state == P.types.JOB_STATE_FAILED

        # Now read: open the windows and collect both streams to their end.
        big = 0x7FFFFFFF
        s.sendall(frame(SETTINGS, 1, 0) +
                  frame(SETTINGS, 0, 0, struct.pack(
                      ">HI", SETTINGS_INITIAL_WINDOW_SIZE, big)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", big - 65535)))

        def ended(fs, stream):
            return any(f[0] == HEADERS and f[2] == stream and
                       f[1] & END_STREAM for f in fs)
        frames, closed = read_frames(
            s, lambda fs: ended(fs, 1) and ended(fs, 3), timeout=20)
        s.close()
        assert not closed
        data = {1: b"", 3: b""}
        trailers = {}
        for f in frames:
            if f[0] == DATA:
                data[f[2]] += f[3]
            elif f[0] == HEADERS and f[1] & END_STREAM:
                trailers[f[2]] = f[3]
        for stream in (1, 3):
            assert has_grpc_status(trailers[stream], RESOURCE_EXHAUSTED), (
                stream, trailers)

        # The watcher got the jobs that fitted, then no more: at most the
        # cap and the one message that crossed it.
        watched = [C.WatchEvent.FromString(m) for m in grpc_messages(data[3])]
        print("watched %d, %d + %d bytes" % (len(watched), len(data[1]), len(data[3])))
        assert 0 < len(watched) < 24, len(watched)
        largest = max(len(m) + 5 for m in grpc_messages(data[3]))
        assert OUT_CAP <= len(data[1]) + len(data[3]) < OUT_CAP + largest
        # The Join stream got what it was sent before the connection
        # filled up, and not `failed`.
        events = [R.JoinEvent.FromString(m) for m in grpc_messages(data[1])]
        assert events[0].WhichOneof("event") == "accepted", events
        assert "failed" not in [e.WhichOneof("event") for e in events]
        for n in nodes:
            n.close()
        assert d.stop() == 0, d.output()
