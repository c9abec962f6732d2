#!/usr/bin/python3
"""Writes the seed corpora of the client-side fuzz targets:
fuzz_h2_client.c (what a server sends on a connection), fuzz_agent.c (the
JoinEvents an agent receives, with its workers' ends) and fuzz_ctl.c (the
replies rdzvctl prints).

Run once with Debian's python3 after a build (it starts build/daemon/rdzvd
and needs the generated Python protos, as the integration tests do):

    /usr/bin/python3 tests/fuzz/make_corpus_client.py [BUILD_DIR]

The seeds are recorded from a real rdzvd answering grpcio: each scenario
runs its calls on one connection through a relay that keeps what rdzvd
sent (fuzz_h2_client), and the messages that came back are kept as they
were decoded (fuzz_agent, fuzz_ctl). What a real rdzvd does not send is
made by hand below: GOAWAY before any answer, PINGs, resets, HTTP errors,
big headers, bad messages; assignments that lie; strings with terminal
escapes. The files are committed; grpcio's and rdzvd's bytes vary from run
to run (windows, ids, times), so regenerate only when an input layout or
the protocol changes. Inputs found by fuzzing are added by hand, named
regress-*, and never regenerated.
"""

import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(HERE, "corpus")

# methods[] of fuzz_h2_client.c.
CHECK, JOIN, REPORT, LEAVE, GETJOB, LISTJOBS, WATCH, LISTEVENTS, \
    SERVERINFO, CLOSEJOB = range(10)
# Bits of its byte 0 above the number of calls.
CANCEL_SELF, CHAIN, FREE_CLIENT = 1 << 3, 2 << 3, 3 << 3
SMALL = 1 << 5
CLOSE_EARLY = 1 << 6
LATER = 1 << 7      # CHAIN's calls start from the loop

# fuzz_ctl.c's types.
CTL_JOB, CTL_LIST, CTL_WATCH, CTL_EVENTS, CTL_SERVER = range(5)
CTL_FIXED, CTL_ALL, CTL_ONE = 1 << 3, 1 << 4, 1 << 5


def u16(n):
    return struct.pack(">H", n)


def h2_input(methods, server_bytes, flags=0, chunking=0):
    assert 1 <= len(methods) <= 8
    return bytes([(len(methods) - 1) | flags, chunking]) + \
        bytes(methods) + server_bytes


# ------------------------------------------------------ fuzz_agent records

def ev(msg):
    """A JoinEvent record. The target's agent joins job-1: a recorded
    assignment gets that job id, as rdzvd would have sent it to that
    agent."""
    if msg.WhichOneof("event") == "assignment" and \
            msg.assignment.rdzv_id not in ("", "job-1", "job-2"):
        msg = type(msg).FromString(msg.SerializeToString())
        msg.assignment.rdzv_id = "job-1"
    b = msg.SerializeToString()
    return b"\x00" + u16(len(b)) + b


END_OK = b"\x01"


def end_exit1(rank=0):
    return bytes([0x01 | 1 << 2 | rank << 4])


END_KILLED = bytes([0x01 | 2 << 2])
END_NOEXEC = bytes([0x01 | 3 << 2])
SIGTERM, SIGINT, SIGHUP = b"\x02", bytes([0x02 | 1 << 2]), bytes([0x02 | 2 << 2])
EXECD = b"\x03"


def error_file(rank, text):
    body = ('{"message": {"message": %s, "extraInfo": {"py_callstack": '
            '"Traceback ..."}}, "timestamp": "1700000000"}'
            % __import__("json").dumps(text, ensure_ascii=False)).encode()
    return bytes([0x03 | 1 << 2 | rank << 4]) + u16(len(body)) + body


def agent_input(nproc, records, free_port=False, start_fails=False):
    b0 = (nproc - 1) | (8 if free_port else 0) | (16 if start_fails else 0)
    return bytes([b0]) + b"".join(records)


def agent_records(events):
    """The events of a Join stream as the agent sees them, with the
    workers doing what they would: exec'd after an assignment, stopped
    (then ended) after a stop."""
    out = []
    for e in events:
        out.append(ev(e))
        kind = e.WhichOneof("event")
        if kind == "assignment":
            out.append(EXECD)
        elif kind == "stop":
            out.append(END_OK)
    return out


# ------------------------------------------------------------ HTTP/2 frames

DATA, HEADERS, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 5, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED = 1, 1, 4, 8


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_int(n, prefix_bits, first=0):
    top = (1 << prefix_bits) - 1
    if n < top:
        return bytes([first | n])
    out = [first | top]
    n -= top
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, names as literals, no
    Huffman: what any HPACK decoder must take."""
    out = b""
    for k, v in headers:
        k = k.encode() if isinstance(k, str) else k
        v = v.encode() if isinstance(v, str) else v
        out += b"\x00" + hpack_int(len(k), 7) + k + hpack_int(len(v), 7) + v
    return out


def headers(stream, hs, end_stream=False, max_frame=16384):
    """A HEADERS frame, with CONTINUATION frames when the block is big."""
    block = hpack(hs)
    first, rest = block[:max_frame], block[max_frame:]
    flags = END_STREAM if end_stream else 0
    if not rest:
        return frame(HEADERS, flags | END_HEADERS, stream, first)
    out = frame(HEADERS, flags, stream, first)
    while rest:
        chunk, rest = rest[:max_frame], rest[max_frame:]
        out += frame(CONTINUATION, 0 if rest else END_HEADERS, stream, chunk)
    return out


def grpc_msg(b, compressed=0, length=None):
    return struct.pack(">BI", compressed, len(b) if length is None else length) + b


SERVER_START = frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)) + \
    frame(SETTINGS, ACK, 0, b"")
RESPONSE = [(":status", "200"), ("content-type", "application/grpc")]
OK_TRAILERS = [("grpc-status", "0")]


def reply(stream, *msgs, status="0", message=None, extra=()):
    """A whole gRPC response on |stream|: headers, messages, trailers."""
    out = headers(stream, RESPONSE + list(extra))
    for m in msgs:
        out += frame(DATA, 0, stream, grpc_msg(m))
    tr = [("grpc-status", status)]
    if message is not None:
        tr.append(("grpc-message", message))
    return out + headers(stream, tr, end_stream=True)


def trailers_only(stream, status, message):
    return headers(stream, [(":status", "200"),
                            ("content-type", "application/grpc"),
                            ("grpc-status", str(status)),
                            ("grpc-message", message)], end_stream=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SOURCE_ROOT, "build")
    os.environ["RDZV_BUILD_ROOT"] = os.path.abspath(build)
    os.environ["RDZV_SOURCE_ROOT"] = SOURCE_ROOT
    sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "integration"))
    sys.path.insert(0, HERE)
    import grpc
    import rdzvtest as rt
    import rdzvnode
    from make_corpus_h2 import Relay
    pb = rt.protos()
    R, C, T, H = pb.rendezvous, pb.control, pb.types, pb.health
    Node, Control, gpu = rdzvnode.Node, rdzvnode.Control, rdzvnode.gpu

    h2, agent, ctl = {}, {}, {}

    def unary(ch, path, req, resp):
        fn = ch.unary_unary(path, request_serializer=type(req).SerializeToString,
                            response_deserializer=resp.FromString)
        try:
            return fn(req, timeout=10)
        except grpc.RpcError as e:
            return e

    def stream_events(node):
        with node._cv:
            return [e for _, e in node.events]

    hostile = "\x1b[31mRED\x1b]0;pwned\x07\nfake\r\u009b2J\x7f"
    tmp = rt.tmpdir()
    with rt.Daemon(tmp, args=["--keepalive", "200ms"]) as d:
        relay = Relay(d.addr, record="server")
        ops = Control(d.addr)

        def record(name, methods, modes=((0, 0),)):
            data = relay.take()
            for flags, chunking in modes:
                suffix = ""
                if chunking:
                    suffix += "-chunks%d" % (4 * chunking)
                for bit, word in ((CANCEL_SELF, "cancel"), (CHAIN, "chain"),
                                  (FREE_CLIENT, "free")):
                    if flags & (3 << 3) == bit:
                        suffix += "-" + word
                if flags & SMALL:
                    suffix += "-small"
                if flags & CLOSE_EARLY:
                    suffix += "-close"
                if flags & LATER:
                    suffix += "-later"
                h2[name + suffix] = h2_input(methods, data, flags, chunking)
            return data

        # Health/Check, as the agent's session starts.
        with rdzvnode.channel(relay.addr) as ch:
            unary(ch, "/grpc.health.v1.Health/Check",
                  H.HealthCheckRequest(service="rdzv.v1.Rendezvous"),
                  H.HealthCheckResponse)
        record("health-check", [CHECK], [(0, 0), (0, 3), (FREE_CLIENT, 0),
                                         (CHAIN | LATER | CLOSE_EARLY, 0)])

        # A job of one node: accepted, the assignment, the workers succeed
        # and the node reports it, the operator closes the job.
        n1 = Node(relay.addr, name="node1")
        n1.join("job-closed", min_nodes=1, max_nodes=1, nproc=2,
                last_call_ms=100, gpus=[gpu(0), gpu(1)])
        a = n1.wait_assignment()
        n1.report(a.generation, "SUCCEEDED", exits=[(0, 0, 0), (1, 0, 0)])
        ops.close_job("job-closed")
        n1.wait_event("closed")
        n1.end()
        events = stream_events(n1)
        n1.close()
        record("join-closed", [JOIN, REPORT], [(0, 0), (0, 7), (CANCEL_SELF, 0),
                                               (CHAIN, 63), (CLOSE_EARLY, 0),
                                               (CHAIN | LATER, 0)])
        recs = [ev(events[0]), ev(events[1]), EXECD, END_OK] + \
            [ev(e) for e in events[2:]]
        agent["join-closed"] = agent_input(2, recs)
        agent["join-closed-free-port"] = agent_input(2, recs, free_port=True)
        agent["join-closed-start-fails"] = agent_input(2, recs, start_fails=True)

        # Two nodes; the other's workers fail, rdzvd stops generation 1,
        # forms generation 2, and the operator aborts the job.
        n1 = Node(relay.addr, name="node1")
        n2 = Node(d.addr, name="node2")
        n1.join("job-restart", min_nodes=2, max_nodes=2, nproc=1,
                max_restarts=2, last_call_ms=100)
        n2.join("job-restart", min_nodes=2, max_nodes=2, nproc=1,
                max_restarts=2, last_call_ms=100)
        a1 = n1.wait_assignment()
        n2.wait_assignment()
        n2.report(a1.generation, "FAILED", exits=[(0, 1, 0)],
                  message="RuntimeError: CUDA error: an illegal memory access")
        n1.wait_assignment(after=a1.generation)
        ops.abort_job("job-restart", reason="operator: bad data")
        n1.wait_event("failed")
        n1.end()
        events = stream_events(n1)
        n1.close()
        n2.close()
        record("join-restart-abort", [JOIN], [(0, 0), (0, 1), (SMALL, 0)])
        agent["join-restart-abort"] = agent_input(1, agent_records(events))
        # The same, but this node's workers are the ones that fail.
        recs = []
        for e in events:
            recs.append(ev(e))
            if e.WhichOneof("event") == "assignment":
                recs += [EXECD, error_file(0, "RuntimeError: CUDA error: an "
                                           "illegal memory access"),
                         end_exit1(0)]
        agent["join-restart-own-failure"] = agent_input(1, recs)
        agent["join-restart-killed"] = agent_input(
            1, [ev(events[0]), ev(events[1]), EXECD, END_KILLED] +
            [ev(e) for e in events[2:]])
        agent["join-restart-noexec"] = agent_input(
            1, [ev(events[0]), ev(events[1]), END_NOEXEC] +
            [ev(e) for e in events[2:]])

        # A node with a failed GPU, evicted by the operator.
        n1 = Node(relay.addr, name="node1")
        acc = n1.join("job-evict", min_nodes=1, max_nodes=1, nproc=4,
                      last_call_ms=100,
                      gpus=[gpu(0), gpu(1), gpu(2, ok=False,
                                                  failed_step="memcpy",
                                                  error="CUDA_ERROR_ECC_UNCORRECTABLE"),
                            gpu(3)])
        n1.wait_assignment()
        ops.evict_node("job-evict", acc.node_id, reason="bad GPU 2")
        n1.wait_event("evicted")
        n1.end()
        events = stream_events(n1)
        n1.close()
        record("join-evicted", [JOIN], [(0, 0), (0, 15)])
        agent["join-evicted"] = agent_input(4, agent_records(events))

        # Waiting for a second node that never comes: the join timeout.
        n1 = Node(relay.addr, name="node1")
        n1.join("job-timeout", min_nodes=2, max_nodes=3, nproc=8,
                join_timeout_ms=1000)
        n1.wait_event("failed")
        n1.end()
        events = stream_events(n1)
        n1.close()
        record("join-waiting-timeout", [JOIN])
        agent["join-waiting-timeout"] = agent_input(8, agent_records(events))

        # A node whose hostname is made to drive a terminal; it stays
        # waiting (min 2) until the end of the scenario.
        nh = Node(d.addr, name="hostile")
        nh.join("job-hostile", min_nodes=2, max_nodes=2, nproc=1,
                hostname=hostile, role="trainer", gpus=[gpu(
                    0, ok=False, failed_step="alloc\x1b[2J",
                    error="out of memory \x1b]0;title\x07")])

        # Join, then the operator's calls on the same connection, then the
        # node leaves: the agent and rdzvctl's calls side by side.
        n1 = Node(relay.addr, name="node1")
        n1.join("job-control", min_nodes=1, max_nodes=2, nproc=2,
                last_call_ms=100)
        n1.wait_assignment()
        ch = n1.channel
        unary(ch, "/rdzv.v1.Control/GetJob",
              C.GetJobRequest(rdzv_id="job-control", events=10), T.Job)
        unary(ch, "/rdzv.v1.Control/ListJobs", C.ListJobsRequest(all=True),
              C.ListJobsResponse)
        unary(ch, "/rdzv.v1.Control/ListEvents",
              C.ListEventsRequest(rdzv_id="job-control", limit=5),
              C.ListEventsResponse)
        unary(ch, "/rdzv.v1.Control/ServerInfo", C.ServerInfoRequest(),
              C.ServerInfoResponse)
        n1.leave("drain")
        try:
            n1.end(timeout=5)
        except TimeoutError:
            pass
        events = stream_events(n1)
        n1.close()
        record("join-control-leave", [JOIN, GETJOB, LISTJOBS, LISTEVENTS,
                                      SERVERINFO, LEAVE],
               [(0, 0), (0, 63), (CANCEL_SELF, 0), (FREE_CLIENT, 0),
                (CHAIN, 0)])
        agent["join-then-signal"] = agent_input(
            2, agent_records(events[:2]) + [SIGTERM, END_OK])

        # Waiting, then rdzvd PINGs the silent connection (keepalive).
        n1 = Node(relay.addr, name="node1")
        n1.join("job-ping", min_nodes=3, max_nodes=3, nproc=1)
        time.sleep(0.7)
        events = stream_events(n1)
        n1.close()
        record("join-waiting-pings", [JOIN], [(0, 0), (0, 2)])
        agent["join-waiting-sighup"] = agent_input(
            1, agent_records(events) + [SIGHUP])

        # rdzvctl's replies, each on a connection of its own.
        def control(name, method, path, req, resp, modes=((0, 0),)):
            with rdzvnode.channel(relay.addr) as ch:
                r = unary(ch, "/rdzv.v1.Control/" + path, req, resp)
            record(name, [method], modes)
            return r

        for jid in ("job-restart", "job-evict", "job-closed", "job-hostile",
                    "job-timeout"):
            job = control("get-" + jid, GETJOB, "GetJob",
                          C.GetJobRequest(rdzv_id=jid, events=20), T.Job,
                          [(0, 0), (SMALL, 0)])
            b = job.SerializeToString()
            ctl[jid] = bytes([CTL_JOB]) + b
            ctl[jid + "-fixed"] = bytes([CTL_JOB | CTL_FIXED]) + b
        control("get-missing", GETJOB, "GetJob",
                C.GetJobRequest(rdzv_id="no-such-job"), T.Job)
        control("get-bad-id", GETJOB, "GetJob",
                C.GetJobRequest(rdzv_id="bad id/\u2713"), T.Job)
        control("unknown-method", GETJOB, "NoSuchMethod",
                C.GetJobRequest(rdzv_id="x"), T.Job)
        jobs = control("list-jobs-all", LISTJOBS, "ListJobs",
                       C.ListJobsRequest(all=True), C.ListJobsResponse,
                       [(0, 0), (SMALL, 0), (0, 31)])
        b = jobs.SerializeToString()
        ctl["list-all"] = bytes([CTL_LIST | CTL_ALL]) + b
        ctl["list-all-fixed"] = bytes([CTL_LIST | CTL_ALL | CTL_FIXED]) + b
        jobs = control("list-jobs", LISTJOBS, "ListJobs", C.ListJobsRequest(),
                       C.ListJobsResponse)
        ctl["list-active"] = bytes([CTL_LIST]) + jobs.SerializeToString()
        ctl["list-empty"] = bytes([CTL_LIST])
        evs = control("list-events", LISTEVENTS, "ListEvents",
                      C.ListEventsRequest(rdzv_id="job-restart", limit=50),
                      C.ListEventsResponse)
        ctl["events"] = bytes([CTL_EVENTS]) + evs.SerializeToString()
        ctl["events-fixed"] = bytes([CTL_EVENTS | CTL_FIXED]) + \
            evs.SerializeToString()
        info = control("server-info", SERVERINFO, "ServerInfo",
                       C.ServerInfoRequest(), C.ServerInfoResponse)
        ctl["server-info"] = bytes([CTL_SERVER]) + info.SerializeToString()
        ctl["server-info-fixed"] = bytes([CTL_SERVER | CTL_FIXED]) + \
            info.SerializeToString()
        job = control("close-job", CLOSEJOB, "CloseJob",
                      C.CloseJobRequest(rdzv_id="job-hostile"), T.Job)
        ctl["close-hostile"] = bytes([CTL_JOB]) + job.SerializeToString()
        nh.wait_event("closed")
        nh.close()

        # Watch: the current jobs, then a job as nodes join it.
        def watch(name, req, one):
            with rdzvnode.channel(relay.addr) as ch:
                fn = ch.unary_stream("/rdzv.v1.Control/Watch",
                                     request_serializer=C.WatchRequest.SerializeToString,
                                     response_deserializer=C.WatchEvent.FromString)
                call = fn(req, timeout=10)
                items, cv, state = rdzvnode.stream_reader(call)
                time.sleep(0.3)
                w1 = Node(d.addr, name="watched-1")
                w2 = Node(d.addr, name="watched-2")
                w1.join(req.rdzv_id or "job-watch-all", min_nodes=2,
                        max_nodes=2, nproc=2, last_call_ms=100)
                w2.join(req.rdzv_id or "job-watch-all", min_nodes=2,
                        max_nodes=2, nproc=2, last_call_ms=100)
                w1.wait_assignment()
                ops.close_job(req.rdzv_id or "job-watch-all")
                time.sleep(0.5)
                call.cancel()
                w1.close()
                w2.close()
                with cv:
                    got = list(items)
            record(name, [WATCH], [(0, 0), (CANCEL_SELF, 0), (0, 5)])
            body = b"".join(u16(len(m.SerializeToString())) +
                            m.SerializeToString() for m in got)
            flags = CTL_WATCH | (CTL_ONE if one else CTL_ALL)
            ctl[name] = bytes([flags]) + body
            ctl[name + "-fixed"] = bytes([flags | CTL_FIXED]) + body
            ctl[name + "-removed"] = bytes([flags]) + body + b"".join(
                u16(len(x)) + x for x in
                [C.WatchEvent(job=got[0].job, removed=True).SerializeToString()]
                if got)

        watch("watch-all", C.WatchRequest(all=True), False)
        watch("watch-one", C.WatchRequest(rdzv_id="job-watch-one"), True)
        d.stop()

    # rdzvd going away: GOAWAY while a node waits.
    tmp2 = rt.tmpdir()
    with rt.Daemon(tmp2, args=["--shutdown-timeout", "300ms"]) as d2:
        relay2 = Relay(d2.addr, record="server")
        n1 = Node(relay2.addr, name="node1")
        n1.join("job-goaway", min_nodes=2, max_nodes=2, nproc=1)
        d2.stop()
        try:
            n1.end(timeout=5)
        except TimeoutError:
            pass
        n1.close()
        data = relay2.take()
        h2["join-goaway"] = h2_input([JOIN], data)
        h2["join-goaway-chain"] = h2_input([JOIN], data, CHAIN)

    # -------------------------------------------------- made by hand: h2
    js = R.JoinEvent(accepted=R.Accepted(node_id=1, session_id=b"\x01" * 16,
                                         attempt=1)).SerializeToString()
    asg = R.JoinEvent(assignment=T.Assignment(
        generation=1, group_rank=0, group_world_size=1, base_rank=0,
        local_world_size=1, world_size=1, master_addr="10.0.0.1",
        master_port=29500, rdzv_id="job-1")).SerializeToString()
    hc = H.HealthCheckResponse(status=1).SerializeToString()
    big_job = T.Job(rdzv_id="job-big", owner="uid:1000", reason="x" * 3000,
                    nodes=[T.Node(node_id=i, hostname="node%d" % i,
                                  nproc=8, group_rank=i, base_rank=8 * i)
                           for i in range(64)]).SerializeToString()
    h2.update({
        "hand-settings-only": h2_input([JOIN], SERVER_START),
        "hand-goaway-first": h2_input([JOIN, GETJOB], SERVER_START + frame(
            GOAWAY, 0, 0, struct.pack(">II", 0, 0))),
        "hand-goaway-after-1": h2_input([JOIN, GETJOB, CHECK], SERVER_START +
            frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0) + b"going away") +
            headers(1, RESPONSE) + frame(DATA, 0, 1, grpc_msg(js)) +
            headers(1, OK_TRAILERS, end_stream=True), CHAIN),
        "hand-goaway-error": h2_input([CHECK], SERVER_START + frame(
            GOAWAY, 0, 0, struct.pack(">II", 0, 11) + b"calm down")),
        "hand-ping": h2_input([CHECK], SERVER_START +
            frame(PING, 0, 0, b"12345678") + reply(1, hc)),
        "hand-ping-ack": h2_input([CHECK], SERVER_START +
            frame(PING, ACK, 0, b"\x00" * 8) + reply(1, hc)),
        "hand-rst-refused": h2_input([JOIN, CHECK], SERVER_START +
            frame(RST_STREAM, 0, 1, struct.pack(">I", 7)) +
            frame(RST_STREAM, 0, 3, struct.pack(">I", 11))),
        "hand-rst-after-data": h2_input([JOIN], SERVER_START +
            headers(1, RESPONSE) + frame(DATA, 0, 1, grpc_msg(js)) +
            frame(RST_STREAM, 0, 1, struct.pack(">I", 2))),
        "hand-http-404": h2_input([GETJOB], SERVER_START +
            headers(1, [(":status", "404")], end_stream=True)),
        "hand-http-503-body": h2_input([GETJOB], SERVER_START +
            headers(1, [(":status", "503"), ("content-type", "text/plain")]) +
            frame(DATA, END_STREAM, 1, b"overloaded")),
        "hand-not-grpc": h2_input([GETJOB], SERVER_START +
            headers(1, [(":status", "200"), ("content-type", "text/html")]) +
            frame(DATA, END_STREAM, 1, b"<html></html>")),
        "hand-trailers-only": h2_input([GETJOB, LISTJOBS], SERVER_START +
            trailers_only(1, 5, "job%20no-such-job%3A%20not%20found") +
            trailers_only(3, 7, "uid:1000%20may%20not%20%E2%9C%93")),
        "hand-grpc-status-bad": h2_input([GETJOB, CHECK], SERVER_START +
            reply(1, status="abc") + reply(3, hc, status="9999")),
        "hand-no-grpc-status": h2_input([CHECK], SERVER_START +
            headers(1, RESPONSE) + frame(DATA, 0, 1, grpc_msg(hc)) +
            headers(1, [("x-other", "1")], end_stream=True)),
        "hand-ended-inside-message": h2_input([GETJOB], SERVER_START +
            headers(1, RESPONSE) + frame(DATA, 0, 1, grpc_msg(b"\x0a\x05job-1",
                                                           length=100)) +
            headers(1, OK_TRAILERS, end_stream=True)),
        "hand-compressed": h2_input([CHECK], SERVER_START +
            headers(1, RESPONSE + [("grpc-encoding", "gzip")]) +
            frame(DATA, 0, 1, grpc_msg(hc, compressed=1)) +
            headers(1, OK_TRAILERS, end_stream=True)),
        "hand-bad-protobuf": h2_input([GETJOB], SERVER_START +
            reply(1, b"\x0a\xff\xff\xff\xff\x0f")),
        "hand-bad-utf8": h2_input([GETJOB], SERVER_START +
            reply(1, T.Job(rdzv_id="job-1").SerializeToString() +
                  b"\x22\x02\xd0\x41")),
        "hand-big-reply-small-limit": h2_input([GETJOB], SERVER_START +
            reply(1, big_job), SMALL),
        "hand-big-reply": h2_input([GETJOB], SERVER_START + reply(1, big_job),
                                   0, 40),
        "hand-big-headers": h2_input([GETJOB], SERVER_START +
            headers(1, RESPONSE + [("x-big", "a" * 8000)]) +
            frame(DATA, 0, 1, grpc_msg(big_job)) +
            headers(1, OK_TRAILERS + [("x-big-trailer", "b" * 20000)],
                    end_stream=True, max_frame=4096)),
        "hand-big-grpc-message": h2_input([CHECK], SERVER_START +
            trailers_only(1, 13, "%E2%9C%93" * 3000)),
        "hand-padded-data": h2_input([JOIN], SERVER_START +
            headers(1, RESPONSE) +
            frame(DATA, PADDED, 1, bytes([10]) + grpc_msg(js) + b"\x00" * 10) +
            frame(DATA, 0, 1, grpc_msg(asg)[:7]) +
            frame(DATA, 0, 1, grpc_msg(asg)[7:]) +
            frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 65536)) +
            frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 65536)) +
            headers(1, OK_TRAILERS, end_stream=True)),
        "hand-two-streams": h2_input([JOIN, WATCH], SERVER_START +
            headers(1, RESPONSE) + headers(3, RESPONSE) +
            frame(DATA, 0, 3, grpc_msg(C.WatchEvent(job=T.Job(
                rdzv_id="job-1")).SerializeToString())) +
            frame(DATA, 0, 1, grpc_msg(js) + grpc_msg(asg)) +
            headers(3, [("grpc-status", "1"), ("grpc-message", "x")],
                    end_stream=True), CANCEL_SELF),
        "hand-push-promise": h2_input([JOIN], SERVER_START +
            frame(PUSH_PROMISE, END_HEADERS, 1, struct.pack(">I", 2) +
                  hpack([(":method", "GET"), (":path", "/")]))),
        "hand-unknown-frame": h2_input([CHECK], SERVER_START +
            frame(0xfa, 0, 0, b"hello") + reply(1, hc)),
        "hand-idle-stream": h2_input([CHECK], SERVER_START + reply(5, hc) +
            reply(2, hc)),
        "hand-settings-odd": h2_input([CHECK, JOIN], frame(SETTINGS, 0, 0,
            struct.pack(">HIHIHIHI", 1, 0, 3, 1, 4, 2 ** 31 - 1, 5, 16384)) +
            reply(1, hc)),
        "hand-close-early": h2_input([JOIN, REPORT, LEAVE], SERVER_START +
            headers(1, RESPONSE) + frame(DATA, 0, 1, grpc_msg(js)),
            CLOSE_EARLY | FREE_CLIENT),
    })

    # ----------------------------------------------- made by hand: agent
    def accepted(node_id=1, session=b"\x01" * 16, resumed=False):
        return R.JoinEvent(accepted=R.Accepted(
            node_id=node_id, session_id=session, resumed=resumed, attempt=1,
            settings=T.JobSettings(min_nodes=1, max_nodes=2)))

    def assignment(gen, n=1, base=0, world=1, group=0, groups=1, job="job-1",
                   addr="10.0.0.1"):
        return R.JoinEvent(assignment=T.Assignment(
            generation=gen, group_rank=group, group_world_size=groups,
            base_rank=base, local_world_size=n, world_size=world,
            master_addr=addr, master_port=29500, rdzv_id=job,
            restart_count=0, max_restarts=3))

    def stop(gen, why="a node failed"):
        return R.JoinEvent(stop=R.Stop(generation=gen, reason=why))

    closed = R.JoinEvent(closed=R.Closed(reason="closed by uid:1000"))
    agent.update({
        "lie-too-many-workers": agent_input(1, [ev(accepted()),
            ev(assignment(1, n=40, world=40))]),
        "lie-ranks-outside-world": agent_input(2, [ev(accepted()),
            ev(assignment(1, n=2, base=3, world=4))]),
        "lie-group-rank": agent_input(1, [ev(accepted()),
            ev(assignment(1, group=2, groups=2))]),
        "lie-generation-back": agent_input(1, [ev(accepted()),
            ev(assignment(5)), EXECD, ev(assignment(4))]),
        "lie-other-job": agent_input(1, [ev(accepted()),
            ev(assignment(1, job="job-2"))]),
        "no-worker": agent_input(2, [ev(accepted()), ev(assignment(1, n=0)),
                                     ev(assignment(2, n=1, world=1))]),
        "new-generation-while-running": agent_input(4, [ev(accepted()),
            ev(assignment(1, n=4, world=8)), EXECD,
            ev(assignment(2, n=2, world=2)), END_OK, EXECD, END_OK, ev(closed)]),
        "stop-future-generation": agent_input(1, [ev(accepted()),
            ev(assignment(1)), EXECD, ev(stop(7, "generation 7")), END_OK,
            ev(assignment(8)), ev(closed)]),
        "same-generation-twice": agent_input(1, [ev(accepted()),
            ev(assignment(3)), ev(assignment(3)), EXECD, END_OK]),
        "assignment-before-accepted": agent_input(1, [ev(assignment(1)),
            ev(accepted())]),
        "accepted-twice-resumed": agent_input(1, [ev(accepted()),
            ev(assignment(1)), EXECD,
            ev(accepted(resumed=True, session=b"\x02" * 40)),
            ev(assignment(1)), end_exit1(0)]),
        "unknown-event": agent_input(1, [ev(accepted()), b"\x00\x00\x00",
                                         b"\x00\x00\x03\xfa\x01\x00"]),
        "long-reasons": agent_input(1, [ev(accepted()), ev(R.JoinEvent(
            waiting=R.Waiting(state=1, participants=1, min_nodes=2,
                              max_nodes=2, reason="\u0436" * 1000))),
            ev(R.JoinEvent(failed=R.Failed(reason=hostile * 100)))]),
        "error-file-long": agent_input(2, [ev(accepted()),
            ev(assignment(1, n=2, world=2)), EXECD,
            error_file(1, "ValueError: " + "x" * 400), end_exit1(1),
            ev(closed)]),
        "error-file-multibyte": agent_input(1, [ev(accepted()),
            ev(assignment(1)), EXECD,
            error_file(0, "RuntimeError: \u0436\u2713 \U0001f525"),
            end_exit1(0)]),
        "signals": agent_input(3, [ev(accepted()),
            ev(assignment(1, n=3, world=3)), SIGINT, SIGTERM, END_KILLED]),
    })

    # ------------------------------------------------- made by hand: ctl
    odd_node = T.Node(node_id=2 ** 64 - 1, hostname=hostile,
                      advertise_addr="::1", group_rank=0,
                      base_rank=2 ** 32 - 1, nproc=2 ** 32 - 1,
                      gpus_healthy=1, gpus_total=8, connected=False,
                      last_seen_unix_ms=-5,
                      gpus=[T.GpuResult(device=7, ok=False,
                                        name="\u009b31m", uuid="",
                                        failed_step="", error="\x00\x1b")])
    odd = T.Job(rdzv_id="job-odd", state=1, owner=hostile, reason=hostile,
                held_failure="node \u2713 failed\n", participants=0,
                waiting=2 ** 32 - 1, generation=2 ** 64 - 1,
                master_addr="fe80::1%eth0", master_port=70000,
                settings=T.JobSettings(min_nodes=2 ** 32 - 1,
                                       max_nodes=2 ** 31,
                                       last_call_timeout_ms=2 ** 32 - 1),
                last_call_in_ms=2 ** 62, join_timeout_in_ms=-1,
                created_unix_ms=-(2 ** 63), ended_unix_ms=2 ** 63 - 1,
                nodes=[odd_node],
                events=[T.Event(seq=1, time_unix_ms=2 ** 62, kind="\x07",
                                message="\r" * 10)])
    ctl.update({
        "hand-odd-job": bytes([CTL_JOB]) + odd.SerializeToString(),
        "hand-odd-job-fixed": bytes([CTL_JOB | CTL_FIXED]) +
            odd.SerializeToString(),
        "hand-odd-list": bytes([CTL_LIST]) + C.ListJobsResponse(
            jobs=[odd, T.Job(rdzv_id="job-2", state=2)]).SerializeToString(),
        "hand-watch-removed": bytes([CTL_WATCH | CTL_ALL]) + b"".join(
            u16(len(x)) + x for x in [
                C.WatchEvent(job=odd).SerializeToString(),
                C.WatchEvent(job=T.Job(rdzv_id="job-odd", state=3,
                                       nodes=[odd_node])).SerializeToString(),
                C.WatchEvent(job=odd, removed=True).SerializeToString(),
                C.WatchEvent().SerializeToString()]),
        "hand-bad-utf8": bytes([CTL_JOB]) + b"\x0a\x02\xff\xfe",
        "hand-server-odd": bytes([CTL_SERVER]) + C.ServerInfoResponse(
            version=hostile, listeners=["unix:/run/\x1b[2J", ""],
            identity="\u202eevil", uptime_ms=2 ** 64 - 1,
            started_unix_ms=-1).SerializeToString(),
    })

    for sub, files in (("h2_client", h2), ("agent", agent), ("ctl", ctl)):
        out = os.path.join(CORPUS, sub)
        os.makedirs(out, exist_ok=True)
        for name, data in sorted(files.items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        print("%d files in %s" % (len(files), out))


if __name__ == "__main__":
    main()
