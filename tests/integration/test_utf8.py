"""proto3 strings are UTF-8 (issue 12, defect 3). rdzvd refuses a string
that is not, with INVALID_ARGUMENT naming the field, and cuts its own
texts (reasons, events) only between characters, so that a strict decoder
(grpcio here, as a Go client would) decodes every event and job after
reports and hostnames full of multi-byte characters."""

import grpc

import rdzvtest as rt
from rdzvnode import Control, Node, R, channel, rpc_code

# Byte-cut at 64, 140 or 255 bytes, these leave half a character behind.
LONG_NAME = "узел-" + "ж" * 120             # 250 bytes
LONG_MESSAGE = "x" + "ж" * 150               # 301 bytes, an odd offset


def raw_call(addr, method, stream, req, bad):
    """Sends |req| with its placeholder string's bytes replaced by |bad|
    (the same length, so the framing stays right): grpcio itself would not
    serialize a string that is not UTF-8. Returns (code, details)."""
    data = req.SerializeToString()
    placeholder = b"P" * len(bad)
    assert data.count(placeholder) == 1
    data = data.replace(placeholder, bad)
    with channel(addr) as ch:
        kind = ch.unary_stream if stream else ch.unary_unary
        call = kind(method, request_serializer=lambda b: b,
                    response_deserializer=lambda b: b)

        def run():
            r = call(data, timeout=5)
            return list(r) if stream else r
        code, details, _ = rpc_code(run)
    return code, details


def test_invalid_utf8_is_refused_naming_the_field(tmp_path):
    bad = b"\xd0ok\xff"
    with rt.Daemon(tmp_path) as d:
        code, details = raw_call(d.addr, "/rdzv.v1.Rendezvous/Join", True,
                                 R.JoinRequest(rdzv_id="u8", hostname="PPPP",
                                               nproc=1), bad)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
        assert "JoinRequest.hostname" in details and "UTF-8" in details

        n = Node(d.addr, name="n1")
        n.join("u8", min_nodes=1, max_nodes=1, max_restarts=5)
        gen = n.wait_assignment().generation
        code, details = raw_call(
            d.addr, "/rdzv.v1.Rendezvous/Report", False,
            R.ReportRequest(session_id=n.session_id, generation=gen,
                            outcome=R.Outcome.Value("OUTCOME_FAILED"),
                            message="PPPP"), bad)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
        assert "ReportRequest.message" in details
        # Nothing of the refused report counted; the daemon serves on.
        ctl = Control(d.addr)
        assert ctl.get_job("u8").restart_count == 0
        n.close()
        ctl.channel.close()
        assert d.stop() == 0


def test_multibyte_texts_decode_everywhere(tmp_path):
    with rt.Daemon(tmp_path) as d:
        ctl = Control(d.addr)
        a, b = Node(d.addr, name=LONG_NAME), Node(d.addr, name="б" + LONG_NAME)
        a.join("mb", min_nodes=2, max_nodes=2, max_restarts=5, lease_ttl_ms=1000,
               reconnect_grace_ms=5000)
        b.join("mb")
        gen = a.wait_assignment().generation
        b.wait_assignment(gen)
        # A failure report with a long multi-byte message, then a lost node
        # with a long multi-byte hostname: both end up in cut reasons.
        a.report(gen, "FAILED", exits=[(0, 1, 0)], message=LONG_MESSAGE)
        gen2 = a.wait_assignment(after=gen).generation
        b.close()
        a.wait_event("stop", lambda e: e.generation == gen2, timeout=10)

        job = ctl.get_job("mb", events=1000)            # decodes, or raises
        # b's connection closed within the reconnect grace of a's failure
        # report: lost at once, and part of that failure (rule 14), not a
        # second restart.
        assert job.restart_count == 1, job
        texts = [job.reason] + [e.message for e in job.events] + \
            [n.hostname for n in job.nodes]
        assert any("ж" in t for t in texts)
        for t in texts:
            t.encode("utf-8")                           # whole characters
        ctl.list_jobs(all=True)
        ctl.list_events("mb", limit=1000)
        # Every event of a's Join stream was decoded by grpcio.
        assert a.ends.get(a.stream) is None, a.ends
        assert any(e.WhichOneof("event") == "assignment" for _, e in a.events)
        a.close()
        ctl.channel.close()
        assert d.stop() == 0
