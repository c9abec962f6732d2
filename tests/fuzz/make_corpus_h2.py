#!/usr/bin/python3
"""Captures the seed corpus of tests/fuzz/fuzz_h2_server.c: what grpcio
(a gRPC implementation this project did not write) sends to a real rdzvd.

Run once with Debian's python3 after a build (it starts build/daemon/rdzvd
and needs the generated Python protos, as the integration tests do):

    /usr/bin/python3 tests/fuzz/make_corpus_h2.py [BUILD_DIR]

Each scenario below runs on a channel of its own, so on one connection,
through a relay that forwards both directions and records what the client
sent. A recording becomes one or more seeds in the target's layout: byte 0
the flags (bit 0: the target sends the client preface, so the recording
is stored without it; bit 1: half-close after the input; bits 2-7: the
chunking), then the bytes. The files are committed; grpcio's bytes vary
from run to run (stream windows, PINGs), so regenerate only when the input
layout or the protocol changes. Inputs found by fuzzing are added next to
these by hand, named regress-*, and never regenerated.
"""

import os
import socket
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(HERE, "corpus", "h2_server")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Flag bytes (see the top of fuzz_h2_server.c).
WHOLE = 0x00
ADD_PREFACE = 0x01
HALF_CLOSE = 0x02
CHUNKS_7 = 0x07 << 2       # chunks of 1 to 28 bytes
CHUNKS_63 = 0x3f << 2      # chunks of 1 to 252 bytes


class Relay:
    """Accepts connections on 127.0.0.1 and forwards each to |upstream|,
    keeping what each client sent (or, with record="server", what the
    server answered: make_corpus_client.py), in the order the connections
    came."""

    def __init__(self, upstream, record="client"):
        host, port = upstream.rsplit(":", 1)
        self.record = record
        self.upstream = (host, int(port))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.recordings = []
        self.cv = threading.Condition()
        self.open = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.upstream)
            rec = bytearray()
            with self.cv:
                self.recordings.append(rec)
                self.open += 1
            server = self.record == "server"
            threading.Thread(target=self._pump,
                             args=(c, u, None if server else rec),
                             daemon=True).start()
            threading.Thread(target=self._pump,
                             args=(u, c, rec if server else None),
                             daemon=True).start()

    def _pump(self, src, dst, rec):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if rec is not None:
                    with self.cv:
                        rec += data
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if rec is not None:
            with self.cv:
                self.open -= 1
                self.cv.notify_all()

    def take(self, timeout=10.0):
        """The recording of the connection(s) that have ended since the
        last take, concatenated (a scenario uses one)."""
        with self.cv:
            if not self.cv.wait_for(lambda: self.open == 0, timeout):
                raise TimeoutError("a relayed connection did not end")
            data = b"".join(bytes(r) for r in self.recordings)
            self.recordings = []
        return data


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SOURCE_ROOT, "build")
    os.environ["RDZV_BUILD_ROOT"] = os.path.abspath(build)
    os.environ["RDZV_SOURCE_ROOT"] = SOURCE_ROOT
    sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "integration"))
    import grpc
    import rdzvtest as rt
    import rdzvnode
    pb = rt.protos()
    R, C, T, H = pb.rendezvous, pb.control, pb.types, pb.health

    def unary(ch, path, req, resp, **kw):
        fn = ch.unary_unary(path, request_serializer=type(req).SerializeToString,
                            response_deserializer=resp.FromString)
        try:
            return fn(req, timeout=5, **kw)
        except grpc.RpcError as e:
            return e

    def stream_first(ch, path, req, resp, n=1, **kw):
        """Starts a server stream, reads n messages, cancels it."""
        fn = ch.unary_stream(path, request_serializer=type(req).SerializeToString,
                             response_deserializer=resp.FromString)
        call = fn(req, timeout=5, **kw)
        got = []
        try:
            for m in call:
                got.append(m)
                if len(got) >= n:
                    break
        except grpc.RpcError:
            pass
        call.cancel()
        return got

    gpu = T.GpuResult(device=0, uuid="GPU-1234", name="H100", ok=True,
                      total_mem=80 << 30,
                      steps=[T.GpuStep(name="alloc", elapsed_us=120)])
    join_req = R.JoinRequest(rdzv_id="job-1", min_nodes=1, max_nodes=1,
                             hostname="node7",
                             nproc=2, master_port=29500,
                             advertise_addr="127.0.0.1", gpus=[gpu],
                             agent_version="0.1.0")

    def s_health(ch):
        unary(ch, "/grpc.health.v1.Health/Check", H.HealthCheckRequest(),
              H.HealthCheckResponse)

    def s_health_unknown(ch):
        unary(ch, "/grpc.health.v1.Health/Check",
              H.HealthCheckRequest(service="no.such.Service"),
              H.HealthCheckResponse)

    def s_health_watch(ch):
        stream_first(ch, "/grpc.health.v1.Health/Watch",
                     H.HealthCheckRequest(service="rdzv.v1.Rendezvous"),
                     H.HealthCheckResponse)

    def s_server_info(ch):
        unary(ch, "/rdzv.v1.Control/ServerInfo", C.ServerInfoRequest(),
              C.ServerInfoResponse)

    def s_list_jobs(ch):
        unary(ch, "/rdzv.v1.Control/ListJobs", C.ListJobsRequest(all=True),
              C.ListJobsResponse)

    def s_get_job_missing(ch):
        unary(ch, "/rdzv.v1.Control/GetJob", C.GetJobRequest(rdzv_id="nope"),
              T.Job)

    def s_bad_id(ch):
        unary(ch, "/rdzv.v1.Control/GetJob",
              C.GetJobRequest(rdzv_id="bad id/\u2713"), T.Job)

    def s_bad_path(ch):
        fn = ch.unary_unary("/rdzv.v1.Control/NoSuchMethod")
        try:
            fn(b"", timeout=5)
        except grpc.RpcError:
            pass

    def s_huge_header(ch):
        unary(ch, "/grpc.health.v1.Health/Check", H.HealthCheckRequest(),
              H.HealthCheckResponse, metadata=[("x-big", "a" * 8000)])

    def s_header_over_limit(ch):
        unary(ch, "/grpc.health.v1.Health/Check", H.HealthCheckRequest(),
              H.HealthCheckResponse, metadata=[("x-big", "b" * 20000)])

    def s_compressed(ch):
        unary(ch, "/rdzv.v1.Control/ServerInfo", C.ServerInfoRequest(),
              C.ServerInfoResponse, compression=grpc.Compression.Gzip)

    def s_many(ch):
        futs = [ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=H.HealthCheckRequest.SerializeToString,
                               response_deserializer=H.HealthCheckResponse.FromString
                               ).future(H.HealthCheckRequest(), timeout=5)
                for _ in range(8)]
        for f in futs:
            f.exception()

    def s_join(ch):
        # Accepted, then the assignment of the round it forms alone.
        stream_first(ch, "/rdzv.v1.Rendezvous/Join", join_req, R.JoinEvent, n=2)

    def s_join_control(ch):
        # A node joins; on the same connection an operator looks at its job,
        # the node reports and leaves, and the job is closed.
        fn = ch.unary_stream("/rdzv.v1.Rendezvous/Join",
                             request_serializer=R.JoinRequest.SerializeToString,
                             response_deserializer=R.JoinEvent.FromString)
        call = fn(join_req, timeout=5)
        it = iter(call)
        acc = next(it)
        sid = acc.accepted.session_id
        next(it)
        unary(ch, "/rdzv.v1.Control/GetJob",
              C.GetJobRequest(rdzv_id="job-1", events=10), T.Job)
        unary(ch, "/rdzv.v1.Control/ListJobs", C.ListJobsRequest(), C.ListJobsResponse)
        unary(ch, "/rdzv.v1.Control/ListEvents",
              C.ListEventsRequest(rdzv_id="job-1", after_seq=0, limit=5),
              C.ListEventsResponse)
        unary(ch, "/rdzv.v1.Rendezvous/Report",
              R.ReportRequest(session_id=sid, generation=1,
                              outcome=R.OUTCOME_UPDATE, nproc=4),
              R.ReportResponse)
        unary(ch, "/rdzv.v1.Rendezvous/Leave",
              R.LeaveRequest(session_id=sid, reason="drain"), R.LeaveResponse)
        unary(ch, "/rdzv.v1.Control/CloseJob", C.CloseJobRequest(rdzv_id="job-1"),
              T.Job)
        call.cancel()

    def s_join_fail(ch):
        fn = ch.unary_stream("/rdzv.v1.Rendezvous/Join",
                             request_serializer=R.JoinRequest.SerializeToString,
                             response_deserializer=R.JoinEvent.FromString)
        req = R.JoinRequest()
        req.CopyFrom(join_req)
        req.rdzv_id = "job-2"
        call = fn(req, timeout=5)
        it = iter(call)
        sid = next(it).accepted.session_id
        next(it)
        unary(ch, "/rdzv.v1.Rendezvous/Report",
              R.ReportRequest(session_id=sid, generation=1,
                              outcome=R.OUTCOME_FAILED,
                              exits=[R.WorkerExit(local_rank=1, exit_code=1)],
                              message="RuntimeError: CUDA out of memory"),
              R.ReportResponse)
        unary(ch, "/rdzv.v1.Control/EvictNode",
              C.EvictNodeRequest(rdzv_id="job-2", node_id=1, reason="bad GPU"),
              T.Job)
        unary(ch, "/rdzv.v1.Control/AbortJob",
              C.AbortJobRequest(rdzv_id="job-2", reason="operator"), T.Job)
        call.cancel()

    def s_watch(ch):
        fn = ch.unary_stream("/rdzv.v1.Rendezvous/Join",
                             request_serializer=R.JoinRequest.SerializeToString,
                             response_deserializer=R.JoinEvent.FromString)
        req = R.JoinRequest()
        req.CopyFrom(join_req)
        req.rdzv_id = "job-3"
        call = fn(req, timeout=5)
        next(iter(call))
        stream_first(ch, "/rdzv.v1.Control/Watch", C.WatchRequest(all=True),
                     C.WatchEvent)
        stream_first(ch, "/rdzv.v1.Control/Watch", C.WatchRequest(rdzv_id="job-3"),
                     C.WatchEvent)
        call.cancel()

    scenarios = [
        ("health-check", s_health, [WHOLE, ADD_PREFACE, CHUNKS_7 | ADD_PREFACE]),
        ("health-unknown", s_health_unknown, [ADD_PREFACE]),
        ("health-watch", s_health_watch, [WHOLE, ADD_PREFACE | HALF_CLOSE]),
        ("server-info", s_server_info, [ADD_PREFACE]),
        ("list-jobs", s_list_jobs, [WHOLE]),
        ("get-job-missing", s_get_job_missing, [ADD_PREFACE]),
        ("bad-rdzv-id", s_bad_id, [WHOLE]),
        ("bad-path", s_bad_path, [ADD_PREFACE, HALF_CLOSE]),
        ("huge-header", s_huge_header, [ADD_PREFACE]),
        ("header-over-limit", s_header_over_limit, [WHOLE]),
        ("compressed", s_compressed, [ADD_PREFACE]),
        ("many-calls", s_many, [WHOLE, ADD_PREFACE | HALF_CLOSE]),
        ("join", s_join, [WHOLE, ADD_PREFACE, CHUNKS_7 | ADD_PREFACE,
                          ADD_PREFACE | HALF_CLOSE]),
        ("join-control", s_join_control, [ADD_PREFACE, WHOLE | HALF_CLOSE,
                                          CHUNKS_63 | ADD_PREFACE]),
        ("join-fail-evict-abort", s_join_fail, [ADD_PREFACE,
                                                CHUNKS_63 | ADD_PREFACE]),
        ("watch", s_watch, [WHOLE, ADD_PREFACE, CHUNKS_63 | ADD_PREFACE]),
    ]

    files = {}
    tmp = rt.tmpdir()
    with rt.Daemon(tmp) as d:
        relay = Relay(d.addr)
        for name, fn, modes in scenarios:
            with rdzvnode.channel(relay.addr) as ch:
                fn(ch)
            data = relay.take()
            assert data.startswith(PREFACE), name
            for flags in modes:
                body = data[len(PREFACE):] if flags & ADD_PREFACE else data
                suffix = {WHOLE: "", ADD_PREFACE: "-p", HALF_CLOSE: "-hc",
                          ADD_PREFACE | HALF_CLOSE: "-p-hc"}.get(
                              flags, "-chunks%d%s" % (4 * (flags >> 2),
                                                      "-p" if flags & 1 else ""))
                files[name + suffix] = bytes([flags]) + body
        d.stop()

    # By hand: the preface alone, nothing at all, HTTP/1.1 instead of
    # HTTP/2, and the preface followed by garbage.
    files["preface-only"] = bytes([ADD_PREFACE])
    files["empty"] = bytes([WHOLE])
    files["http1"] = bytes([WHOLE]) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    files["preface-garbage"] = bytes([ADD_PREFACE]) + bytes(range(256))

    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
