"""Who may hold rdzvd's gRPC connections (issue 36, item 2): with the
open-file limit at 256, a crowd of sockets that send only the HTTP/2
preface and of health watchers, from a few addresses, shuts nobody out:
a running job's agents keep their connections, a new job of another
client forms while the crowd goes on, the health watchers past
max-health-watchers are refused with a message naming it, and a
connection past max-connections-per-address from an address whose
connections all made calls is told so in a GOAWAY. Every wait is
bounded."""

import socket
import threading
import time

import grpc
import pytest

import rdzvtest as rt
from h2raw import (GOAWAY, HEADERS, PREFACE, SETTINGS, frame, grpc_request,
                   has_grpc_status, read_frames, read_until_closed)
from rdzvnode import Node
from test_http_limits import limited

P = rt.protos()
WATCH = "/grpc.health.v1.Health/Watch"
LIST = "/rdzv.v1.Control/ListJobs"
PER_ADDR, WATCHERS = 20, 16


def connect_from(src, addr, preface=True, block=True):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(10)
    s.connect((host, int(port)))
    if preface:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return s


def call_on(s, path, msg):
    """Starts a call on a raw connection past its preface; the frames of
    its first reply headers (or the close)."""
    s.sendall(frame(SETTINGS, 1, 0) + grpc_request(path, msg))
    frames, _ = read_frames(s, lambda fs: any(f[0] in (HEADERS, GOAWAY)
                                              for f in fs))
    return frames


def test_a_crowd_from_a_few_addresses_shuts_nobody_out(tmp_path):
    d = limited(tmp_path, 256, "--max-connections-per-address", str(PER_ADDR),
                "--max-health-watchers", str(WATCHERS),
                "--unauthenticated-idle-timeout", "2s")
    cap = int(d.wait_line(r"room for (\d+) gRPC connections").group(1))
    with d:
        # A running job, before the crowd.
        a1, a2 = Node(d.addr, name="a1"), Node(d.addr, name="a2")
        a1.join("running", min_nodes=2, max_nodes=2)
        a2.join("running", min_nodes=2, max_nodes=2)
        gen = a1.wait_assignment().generation
        a2.wait_assignment()

        # Health watchers from two addresses: 16 are served, the rest told.
        watchers, refused = [], []
        for i in range(2 * 12):
            s = connect_from("127.0.0.%d" % (20 + i % 2), d.addr)
            frames = call_on(s, WATCH, P.health.HealthCheckRequest())
            if any(f[0] == HEADERS and has_grpc_status(f[3], 8) for f in frames):
                refused.append(s)
            else:
                watchers.append(s)
        assert len(watchers) == WATCHERS and len(refused) == 24 - WATCHERS
        with grpc.insecure_channel(d.addr) as ch:
            watch = ch.unary_stream(
                WATCH, request_serializer=P.health.HealthCheckRequest.SerializeToString,
                response_deserializer=P.health.HealthCheckResponse.FromString)
            with pytest.raises(grpc.RpcError) as e:
                list(watch(P.health.HealthCheckRequest(), timeout=10))
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max-health-watchers (%d)" % WATCHERS in e.value.details()

        # The crowd: preface-only sockets from ten addresses, refilled as
        # rdzvd closes them, well past the cap.
        stop, crowd, opened = threading.Event(), [], [0]

        def flood():
            i = 0
            while not stop.is_set():
                try:
                    crowd.append(connect_from("127.0.0.%d" % (2 + i % 10), d.addr))
                    opened[0] += 1
                except OSError:
                    pass
                i += 1
                if opened[0] % 50 == 0:
                    time.sleep(0.01)

        t = threading.Thread(target=flood, daemon=True)
        t.start()
        try:
            rt.wait_for(lambda: opened[0] >= 2 * cap, 30, 0.05, "the crowd")
            # Health probes (a new connection each, no credential) are
            # answered meanwhile, 20 of 20 (issue 43).
            probes_ok = 0
            for _ in range(20):
                with grpc.insecure_channel(d.addr) as pch:
                    check = pch.unary_unary(
                        "/grpc.health.v1.Health/Check",
                        request_serializer=P.health.HealthCheckRequest.SerializeToString,
                        response_deserializer=P.health.HealthCheckResponse.FromString)
                    try:
                        check(P.health.HealthCheckRequest(), timeout=5)
                        probes_ok += 1
                    except grpc.RpcError as e:
                        print("probe failed: %s %s" % (e.code(), e.details()))
            assert probes_ok == 20, probes_ok
            # A new job of another client forms meanwhile.
            t0 = time.monotonic()
            with Node(d.addr, name="b1") as b1, Node(d.addr, name="b2") as b2:
                b1.join("new", min_nodes=2, max_nodes=2)
                b2.join("new", min_nodes=2, max_nodes=2)
                b1.wait_assignment()
                b2.wait_assignment()
                formed = time.monotonic() - t0
            # The running job's agents kept their connections: a report
            # goes through and both hear the new round.
            a1.report(gen, "UPDATE", nproc=2)
            a1.wait_assignment(after=gen)
            a2.wait_assignment(after=gen)
        finally:
            stop.set()
            t.join(10)
        print("the crowd opened %d connections (cap %d); the new job formed in "
              "%.2f s" % (opened[0], cap, formed))
        assert formed < 10
        log = d.output()
        assert "closed to make room for a new connection: max-connections (%d) " \
            "reached" % cap in log or "closed to make room for a new connection: " \
            "max-connections-per-address (%d) reached" % PER_ADDR in log

        # An address whose connections all made calls: the next is told.
        proven = []
        for i in range(PER_ADDR):
            s = connect_from("127.0.0.40", d.addr)
            frames = call_on(s, LIST, P.control.ListJobsRequest())
            assert any(f[0] == HEADERS for f in frames), frames
            proven.append(s)
        s = connect_from("127.0.0.40", d.addr, preface=False)
        frames = read_until_closed(s, 10)
        goaway = [f for f in frames if f[0] == GOAWAY]
        assert goaway, frames
        assert b"max-connections-per-address (%d) reached" % PER_ADDR in goaway[0][3]
        d.wait_line(r"connection from 127\.0\.0\.40:\d+ refused: rdzvd: too many "
                    r"connections from 127\.0\.0\.40", 5)
        for s in proven + watchers + refused + crowd:
            s.close()
        for n in (a1, a2):
            n.close()
        assert d.stop() == 0, d.output()[-3000:]
