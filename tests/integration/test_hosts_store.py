"""Host records survive (docs/HEALTH.md, docs/STORE.md "Hosts"): an rdzvd
restart on its SQLite database, and a failover between two replicas on a
real etcd (kill -9 of the leader). Crashed workers reported through the
real Report RPC count against their host across jobs and restarts; a
quarantined host stays refused by whoever serves next. Every wait is
bounded.
"""

import signal

import grpc
import pytest

import etcdtest
import rdzvnode
import rdzvtest as rt
from test_ha import Replica

PB = rdzvnode.pb
OK = PB.types.HOST_STATE_OK
SUSPECT = PB.types.HOST_STATE_SUSPECT
QUARANTINED = PB.types.HOST_STATE_QUARANTINED
SIGSEGV = 11

etcd = etcdtest.fixture()


def crash_once(addr, job, host):
    """A one-node job on |host| whose worker dies of SIGSEGV."""
    with rdzvnode.Node(addr, name=host) as n:
        n.join(job, min_nodes=1, max_nodes=1)
        a = n.wait_assignment()
        n.report(a.generation, "FAILED", exits=[(0, -1, SIGSEGV)],
                 message="Segmentation fault")


def refused(addr, job, host):
    """The details of a refused join of |host|."""
    with rdzvnode.Node(addr, name=host) as n:
        with pytest.raises(rdzvnode.RpcFailure) as e:
            n.join(job, min_nodes=1, max_nodes=1)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION, e.value
        return e.value.details()


def check_records(ctl):
    h = ctl.list_hosts()
    assert h["flaky"].state == SUSPECT and h["flaky"].crashes == 2 and \
        h["flaky"].recent_crashes == 2, h["flaky"]
    assert "2 worker crashes within 3600 s" in h["flaky"].reason
    assert h["bad"].state == QUARANTINED, h["bad"]
    assert h["bad"].reason == "quarantined by anonymous: ECC errors"
    return h


def test_records_survive_a_restart(tmp_path):
    args = ["--admin", "anonymous", "--http-listen", "none",
            "--host-quarantine-crashes", "3"]
    d = rt.Daemon(tmp_path, args)
    try:
        crash_once(d.addr, "j1", "flaky")
        crash_once(d.addr, "j2", "flaky")
        with rdzvnode.Control(d.addr) as c:
            c.set_host("bad", QUARANTINED, "ECC errors")
            before = check_records(c)
    finally:
        assert d.stop() == 0
    d = rt.Daemon(tmp_path, args)
    try:
        with rdzvnode.Control(d.addr) as c:
            after = check_records(c)
            for name in ("flaky", "bad"):
                assert after[name].since_unix_ms == before[name].since_unix_ms
        assert "host bad is quarantined" in refused(d.addr, "j3", "bad")
        # The third crash within the hour counts with the two before the
        # restart: quarantined.
        crash_once(d.addr, "j4", "flaky")
        with rdzvnode.Control(d.addr) as c:
            assert c.list_hosts()["flaky"].state == QUARANTINED
        assert "3 worker crashes within 3600 s" in \
            refused(d.addr, "j5", "flaky")
    finally:
        assert d.stop() == 0


def test_records_survive_a_failover(tmp_path, etcd):
    ports = etcdtest.free_ports(2)
    args = ["--admin", "anonymous"]
    reps = []
    try:
        a = Replica(tmp_path, etcd, ports[0], args=args)
        reps.append(a)
        a.wait_leading()
        b = Replica(tmp_path, etcd, ports[1], args=args)
        reps.append(b)
        b.wait_standby()
        crash_once(a.addr, "j1", "flaky")
        crash_once(a.addr, "j2", "flaky")
        with rdzvnode.Control(a.addr) as c:
            c.set_host("bad", QUARANTINED, "ECC errors")
            check_records(c)
        a.kill()
        b.wait_leading(timeout=15)
        with rdzvnode.Control(b.addr) as c:
            rt.wait_for(lambda: _answers(c), 15, 0.1, "the new leader")
            check_records(c)
        assert "host bad is quarantined" in refused(b.addr, "j3", "bad")
    finally:
        for r in reps:
            if r.p.poll() is None:
                r.signal(signal.SIGCONT)
                r.kill()


def _answers(c):
    try:
        c.list_hosts()
        return True
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.UNAVAILABLE:
            raise
        return False
