#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_grpc_message.c.

Run once with Debian's python3 after a build (it needs the generated Python
protos, made under the build directory by tests/integration/rdzvtest.py):

    /usr/bin/python3 tests/fuzz/make_corpus.py [BUILD_DIR]

The files are committed; run it again only when the input layout or the
request types change. Layout of each file (see the fuzz target's comment):
byte 0 the request type, byte 1 the chunking (0: one piece), then the bytes
of a request stream. Inputs found by fuzzing are added next to these by
hand, named crash-* or regress-*, and never regenerated.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(HERE, "corpus", "grpc_message")

# The order of requests[] in fuzz_grpc_message.c.
TYPES = ["join", "report", "leave", "list_jobs", "get_job", "watch",
         "close_job", "abort_job", "evict_node", "list_events",
         "server_info", "health_check"]
MAX = 64 * 1024


def frame(body, flag=0, length=None):
    """A length-prefixed gRPC message; |length| overrides the prefix."""
    n = len(body) if length is None else length
    return struct.pack(">BI", flag, n) + body


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SOURCE_ROOT, "build")
    os.environ["RDZV_BUILD_ROOT"] = os.path.abspath(build)
    os.environ["RDZV_SOURCE_ROOT"] = SOURCE_ROOT
    sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "integration"))
    import rdzvtest
    pb = rdzvtest.protos()
    r, c, t, h = pb.rendezvous, pb.control, pb.types, pb.health

    gpu = t.GpuResult(device=0, uuid="GPU-1234", name="H100", ok=True,
                      total_mem=80 << 30,
                      steps=[t.GpuStep(name="alloc", elapsed_us=120),
                             t.GpuStep(name="copy", elapsed_us=4000)])
    bad_gpu = t.GpuResult(device=1, ok=False, failed_step="memcpy",
                          error="CUDA_ERROR_ECC_UNCORRECTABLE")
    samples = {
        "join": [
            r.JoinRequest(rdzv_id="job-1", min_nodes=2, max_nodes=4,
                          hostname="node7", nproc=8, master_port=29500,
                          role="trainer", gpus=[gpu, bad_gpu],
                          agent_version="0.1.0"),
            r.JoinRequest(rdzv_id="job-1", session_id=b"\x01" * 16,
                          generation=3, has_rank_hint=True, rank_hint=0,
                          advertise_addr="[::1]"),
            r.JoinRequest(),
        ],
        "report": [
            r.ReportRequest(session_id=b"\x02" * 16, generation=2,
                            outcome=r.OUTCOME_FAILED,
                            exits=[r.WorkerExit(local_rank=1, exit_code=-1,
                                                signal=9)],
                            message="RuntimeError: CUDA out of memory"),
            r.ReportRequest(outcome=r.OUTCOME_UPDATE, gpus=[gpu]),
        ],
        "leave": [r.LeaveRequest(session_id=b"\x03" * 16, reason="drain")],
        "list_jobs": [c.ListJobsRequest(all=True), c.ListJobsRequest()],
        "get_job": [c.GetJobRequest(rdzv_id="job-1", events=10)],
        "watch": [c.WatchRequest(rdzv_id="", all=True)],
        "close_job": [c.CloseJobRequest(rdzv_id="job-1")],
        "abort_job": [c.AbortJobRequest(rdzv_id="job-1", reason="operator \u2713")],
        "evict_node": [c.EvictNodeRequest(rdzv_id="job-1", node_id=7,
                                          reason="bad GPU")],
        "list_events": [c.ListEventsRequest(rdzv_id="job-1", after_seq=100,
                                            limit=50)],
        "server_info": [c.ServerInfoRequest()],
        "health_check": [h.HealthCheckRequest(service="rdzv.v1.Rendezvous"),
                         h.HealthCheckRequest()],
    }

    files = {}

    def add(name, type_name, mode, stream):
        files[name] = bytes([TYPES.index(type_name), mode]) + stream

    for tname in TYPES:
        msgs = [m.SerializeToString() for m in samples[tname]]
        one = frame(msgs[0])
        add("%s-whole" % tname, tname, 0, one)
        add("%s-bytewise" % tname, tname, 0x40, one)   # chunks of 1 byte
        add("%s-chunks" % tname, tname, 7, b"".join(frame(m) for m in msgs) * 2)
        add("%s-truncated" % tname, tname, 0, one[:len(one) // 2 + 3])

    # Several messages, empty ones between, in one chunk and split.
    j = samples["join"][0].SerializeToString()
    add("multi-empty-whole", "join", 0, frame(b"") + frame(j) + frame(b"") * 3)
    add("multi-empty-split", "join", 3, frame(b"") + frame(j) + frame(b"") * 3)
    # Prefixes alone, and a prefix split from its body.
    add("prefix-only", "health_check", 0, frame(b"", length=10))
    add("prefix-split", "get_job", 0x42,
        frame(samples["get_job"][0].SerializeToString()))
    # The size limit: exactly it (announced, body short) and one over it.
    add("size-at-limit", "report", 0, frame(b"\x2a" * 64, length=MAX))
    add("size-over-limit", "report", 0, frame(b"", length=MAX + 1))
    add("size-huge", "join", 1, frame(b"\xff" * 8, length=0xFFFFFFFF))
    add("size-over-after-good", "leave", 0,
        frame(samples["leave"][0].SerializeToString()) + frame(b"", length=MAX + 1))
    # Compressed flag, and a flag that is neither 0 nor 1.
    add("compressed", "watch", 0, frame(b"\x08\x01", flag=1))
    add("flag-garbage", "watch", 5, frame(b"\x08\x01", flag=0x80))
    add("compressed-after-good", "list_jobs", 0,
        frame(b"\x08\x01") + frame(b"\x08\x01", flag=1))
    # Framed bytes that are not a valid message of the type.
    add("pb-bad-wiretype", "join", 0, frame(b"\x0f\x01"))
    add("pb-truncated-varint", "list_events", 0, frame(b"\x10\xff\xff"))
    add("pb-truncated-string", "get_job", 0, frame(b"\x0a\x10abc"))
    add("pb-long-varint", "evict_node", 0, frame(b"\x10" + b"\xff" * 11))
    add("pb-unknown-fields", "server_info", 0,
        frame(b"\x08\x01\x12\x03abc\x1d\x00\x00\x80\x3f\x21" + b"\x00" * 8))
    add("pb-repeated-unpacked", "report", 0,
        frame(b"\x22\x04\x08\x01\x10\x02" * 3))
    add("pb-field-zero", "close_job", 0, frame(b"\x00\x01"))
    add("pb-group", "abort_job", 0, frame(b"\x0b\x08\x01\x0c"))
    add("pb-bad-utf8", "health_check", 0, frame(b"\x0a\x02\xc3\x28"))
    add("pb-nested-bad", "join", 0, frame(b"\x82\x01\x03\x0a\x05a"))
    add("garbage", "join", 9, bytes(range(256)))
    add("empty-stream", "health_check", 0, b"")
    # Bodies that are also timeout and grpc-message slices.
    add("timeout-ms", "health_check", 0, b"100m")
    add("timeout-hours", "health_check", 0, b"99999999H")
    add("timeout-nanos", "health_check", 0, b"1000001n")
    add("timeout-nine-digits", "health_check", 0, b"123456789S")
    add("message-escapes", "health_check", 0,
        b"caf%C3%A9 %E2%9C%93 100%25 %zz %4 %")
    add("message-raw-utf8", "health_check", 0, "h\u00e9llo\n\t%".encode())

    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
