"""auth = munge under hostile conditions (issue 36), with a real munged,
rdzvd, rdzv-agent and rdzvctl run as other uids: a hung squeue
(slurm-job-owner = check) holds up only the calls that need its answer,
not other users' calls nor another Slurm job's join; a credential is bound
to the exact request it was made for (a captured `abort jobE` credential is
no good for jobA) and is refused when replayed after munged restarted and
forgot it. Every wait is bounded."""

import os
import statistics
import threading
import time
from concurrent import futures

import grpc
import pytest

import mungetest as mt
import rdzvtest as rt
from test_munge import Site, capture, running

why = mt.missing()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

C = rt.protos().control
R = rt.protos().rendezvous
JOIN = "/rdzv.v1.Rendezvous/Join"
ABORT = "/rdzv.v1.Control/AbortJob"

# squeue as slurmctld down makes it: job 4242 hangs; any other job is
# nobody's. Each run is logged, to count them.
FAKE_SQUEUE = """#!/bin/sh
echo "$5" >> %(log)s
case "$5" in
4242) exec sleep 20 ;;
*) echo "65534 nobody" ;;
esac
"""


@pytest.fixture
def site():
    s = Site()
    try:
        yield s
    finally:
        s.close()


def timed_ctl(site, user, *args):
    t = time.monotonic()
    r = site.ctl(user, *args)
    return time.monotonic() - t, r


def test_hung_squeue_holds_up_only_its_own_job(site):
    fake = os.path.join(site.dir, "bin")
    os.makedirs(fake)
    log = os.path.join(site.dir, "squeue.log")
    with open(os.path.join(fake, "squeue"), "w") as f:
        f.write(FAKE_SQUEUE % {"log": log})
    os.chmod(os.path.join(fake, "squeue"), 0o755)
    d = site.rdzvd("--slurm-job-owner", "check",
                   env={"PATH": fake + ":" + os.environ["PATH"]})
    # User B's normal latency, before.
    before = []
    for _ in range(3):
        took, r = timed_ctl(site, mt.USER_B, "status")
        assert r.returncode == 0, r.stderr
        before.append(took)
    normal = statistics.median(before)

    # User A's agents of Slurm job 4242 retry their Join while squeue hangs.
    ch = grpc.insecure_channel(d.addr)
    join = ch.unary_stream(JOIN, request_serializer=R.JoinRequest.SerializeToString,
                           response_deserializer=R.JoinEvent.FromString)
    stop = threading.Event()
    refusals = []

    def storm(i):
        while not stop.is_set():
            req = R.JoinRequest(rdzv_id="4242", min_nodes=1, max_nodes=2, nproc=1,
                                hostname="storm%d" % i)
            body = req.SerializeToString()
            cred = mt.cred(mt.USER_A, site.munged[0].socket, JOIN, body)
            try:
                for _ in join(req, metadata=[("rdzv-munge", cred)], timeout=15):
                    pass
            except grpc.RpcError as e:
                refusals.append((e.code(), e.details()))

    pool = futures.ThreadPoolExecutor(max_workers=12)
    for i in range(12):
        pool.submit(storm, i)
    try:
        rt.wait_for(lambda: os.path.exists(log), 10, 0.05, "squeue's first run")
        # User B's calls go through as fast as before; so does B's own Slurm
        # job, whose owner squeue tells at once.
        b = site.agent(mt.USER_B, "5151")
        during = []
        for _ in range(3):
            took, r = timed_ctl(site, mt.USER_B, "status")
            assert r.returncode == 0, r.stderr
            during.append(took)
        running(b, "5151")
        print("user B status before %s s, during the storm %s s" % (
            [round(t, 3) for t in before], [round(t, 3) for t in during]))
        assert max(during) < max(1.5, 4 * normal), (before, during)
        # The storm's calls end naming squeue, once squeue's deadline passed.
        rt.wait_for(lambda: len(refusals) >= 12, 15, 0.1, "the storm's refusals")
    finally:
        stop.set()
        pool.shutdown(wait=True)
        ch.close()
    for code, details in refusals:
        assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
        assert "rdzvd cannot ask Slurm who owns job 4242" in details, details
        assert "squeue did not answer within" in details, details
    # One squeue at a time for job 4242, however many agents asked.
    with open(log) as f:
        runs = [line.strip() for line in f]
    assert runs.count("4242") <= 4, runs
    assert runs.count("5151") == 1, runs
    # B's job is B's; A may not join it.
    r = site.ctl(mt.USER_B, "status", "5151")
    assert r.returncode == 0, r.stderr


def test_credential_bound_to_its_request_and_remembered(site):
    d = site.rdzvd()
    ja = site.agent(mt.USER_A, "jA")
    je = site.agent(mt.USER_A, "jE")
    running(ja, "jA")
    running(je, "jE")

    # rdzvctl's `abort jE`, captured by a server of our own.
    method, cred, body = capture(site, mt.USER_A, "abort", "jE", "--reason",
                                 "captured")
    assert method == ABORT and cred.startswith("MUNGE:")

    ch = grpc.insecure_channel(d.addr)
    abort = ch.unary_unary(ABORT, request_serializer=lambda b: b,
                           response_deserializer=lambda b: b)
    # Rewritten for jA: refused, and jA runs on.
    other = C.AbortJobRequest.FromString(body)
    assert other.rdzv_id == "jE"
    other.rdzv_id = "jA"
    with pytest.raises(grpc.RpcError) as e:
        abort(other.SerializeToString(), metadata=[("rdzv-munge", cred)], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "MUNGE credential made for another request" in e.value.details()
    assert ja.p.poll() is None

    # munged restarts and forgets what it decoded; rdzvd remembers each
    # credential until it expires, even one it refused: the exact request
    # is refused too.
    site.munged[0].restart()
    with pytest.raises(grpc.RpcError) as e:
        abort(body, metadata=[("rdzv-munge", cred)], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "rdzvd has seen it before" in e.value.details()
    assert je.p.poll() is None and ja.p.poll() is None
    # A fresh credential is good once.
    fresh = mt.cred(mt.USER_A, site.munged[0].socket, "/rdzv.v1.Control/ListJobs")
    list_jobs = ch.unary_unary("/rdzv.v1.Control/ListJobs", request_serializer=lambda b: b,
                               response_deserializer=C.ListJobsResponse.FromString)
    list_jobs(b"", metadata=[("rdzv-munge", fresh)], timeout=10)
    with pytest.raises(grpc.RpcError) as e:
        list_jobs(b"", metadata=[("rdzv-munge", fresh)], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "replayed" in e.value.details()
    ch.close()
    r = site.ctl(mt.USER_A, "abort", "jE", "--reason", "mine")
    assert r.returncode == 0, r.stderr
    assert je.wait(30) == 1
    assert ja.p.poll() is None
