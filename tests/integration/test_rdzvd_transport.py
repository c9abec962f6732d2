"""rdzvd's side of the transport, through raw HTTP/2 (h2raw.py) and grpcio:
why it closes a connection (its debug log says), how it accepts again after
running out of descriptors, and what a stream that is not read costs it.

Every wait is bounded; nothing sleeps and hopes.
"""

import os
import re
import ssl
import time

import pytest

from h2raw import (PREFACE, HEADERS, SETTINGS, END_STREAM, frame,
                   grpc_request, raw_connect, read_frames, wait_closed,
                   h2_open, has_grpc_status)
import rdzvtest

P = rdzvtest.protos()


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
            "--log-level", "debug", "--listen", "127.0.0.1:0"]
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


