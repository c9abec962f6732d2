"""MUNGE replay records shared by rdzvd's replicas on etcd (issue 42;
docs/SECURITY.md): a credential used at the leader is refused at the
replica that leads after a failover, even though munged restarted in
between (munged's own replay cache lives in its memory, and each replica
kept its own record before). A real munged, a private etcd, two real
replicas; every wait is bounded."""

import grpc
import pytest

import etcdtest
import mungetest as mt
import rdzvtest as rt
from test_ha import Replica
from test_munge import C, LIST, Site, capture

why = mt.missing()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")
etcd = etcdtest.fixture()


def list_jobs(addr, cred, body):
    ch = grpc.insecure_channel(addr)
    try:
        call = ch.unary_unary(
            LIST, request_serializer=C.ListJobsRequest.SerializeToString,
            response_deserializer=C.ListJobsResponse.FromString)
        return call(C.ListJobsRequest.FromString(body),
                    metadata=[("rdzv-munge", cred)], timeout=10)
    finally:
        ch.close()


def test_a_credential_used_at_one_replica_is_refused_at_the_next(etcd):
    site = Site()
    reps = []
    try:
        ports = etcdtest.free_ports(2)
        args = ["--auth", "munge", "--munge-socket", site.munged[0].socket]
        a = Replica(site.dir, etcd, ports[0], args=args)
        reps.append(a)
        a.wait_leading()
        b = Replica(site.dir, etcd, ports[1], args=args)
        reps.append(b)
        b.wait_standby()
        method, cred, body = capture(site, mt.USER_A, "status")
        assert method == LIST
        list_jobs(a.addr, cred, body)           # good once, at the leader
        # munged forgets what it decoded; the leader goes.
        site.munged[0].restart()
        a.kill()
        b.wait_leading(timeout=20)

        def refused():
            try:
                list_jobs(b.addr, cred, body)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    return None             # not serving yet
                return e
            return "accepted"
        got = rt.wait_for(refused, 20, 0.1, "the new leader's answer")
        assert got != "accepted", "the replayed credential was accepted"
        assert got.code() == grpc.StatusCode.UNAUTHENTICATED, got
        assert "replayed" in got.details(), got.details()
    finally:
        for r in reps:
            if r.p.poll() is None:
                r.kill()
        site.close()
