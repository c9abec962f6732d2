"""High availability on etcd (SPEC §14, docs/HA.md): rdzvd replicas on a
real etcd (Debian's etcd-server, started by the test on loopback ports with
a temporary data directory), real rdzv-agents with sleeping workers
(agent/worker.py), and failovers: kill -9 of the leader, a round forming
across one, a leader paused past its lease, an etcd member killed; and
what a standby answers. Every wait polls a condition with a deadline.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent"))

import etcdtest
import rdzvagent
import rdzvnode
import rdzvtest as rt

PB = rdzvnode.pb
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent", "worker.py")
CTL = rt.build_path("client", "ctl", "rdzvctl")
LEASE_S = 2          # the replicas' leader-lease in most tests
GRACE_S = 1.0

# The agents' own environment must not decide what is tested.
for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]
os.environ.pop("OMP_NUM_THREADS", None)


class Replica(rt.Proc):
    """One rdzvd replica on |etcd| under |prefix|, on a port fixed up front
    (the agents' --server list names it before it runs)."""

    def __init__(self, tmpdir, etcd, port, prefix="/rdzv-ha", lease_s=LEASE_S,
                 args=()):
        self.addr = "127.0.0.1:%d" % port
        self.store = "etcd://%s%s" % (etcd.endpoints, prefix)
        argv = [rt.build_path("daemon", "rdzvd"), "--store", self.store,
                "--listen", self.addr, "--http-listen", "127.0.0.1:0",
                "--leader-lease", "%ds" % lease_s, "--log-level", "debug"]
        super().__init__(argv + list(args), cwd=str(tmpdir))
        rt.listening(self)
        m = self.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):")
        self.http = "127.0.0.1:%s" % m.group(1)

    def wait_leading(self, timeout=15.0, start=0):
        return self.wait_line(r"election: leading with", timeout, start)

    def wait_standby(self, timeout=15.0):
        return self.wait_line(r"election: campaigning as", timeout)

    def readyz(self):
        try:
            with urllib.request.urlopen("http://%s/readyz" % self.http, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def info(self):
        with rdzvnode.Control(self.addr) as c:
            return c.server_info()

    def first_page_event(self):
        """The first server-sent event of the status page's /events:
        (event name, its data as JSON)."""
        name = None
        with urllib.request.urlopen("http://%s/events" % self.http, timeout=5) as r:
            for raw in r:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: ") and name is not None:
                    return name, json.loads(line[len("data: "):])
        raise AssertionError("no event from %s/events" % self.http)


etcd = etcdtest.fixture()


class HAJob(rdzvagent.AgentJob):
    """The agents of one job, told every replica (--server a,b), with
    worker.py as their workers; Control goes to whichever replica leads."""

    worker = WORKER

    def __init__(self, tmp_path, name, replicas):
        self.replicas = replicas
        super().__init__(tmp_path, name, daemon=replicas[0])

    def servers(self):
        return ",".join(r.addr for r in self.replicas)

    def agent(self, tag, nnodes="3", rank=0, mode="sleep"):
        argv = ["--nnodes", nnodes, "--nproc-per-node", "1",
                "--node-rank", str(rank), "--last-call", "1s",
                "--reconnect-grace", "%gs" % GRACE_S, "--stop-timeout", "2s",
                "--reconnect-timeout", "60s"]
        e = {"W_OUT": self.out, "W_TAG": tag, "W_MODE": mode,
             "W_STOP": self.stop_file, "TMPDIR": self.tmp}
        return self.start(tag, argv, e, server=self.servers())

    def use(self, replica):
        """Control through |replica| from now on."""
        self.ctl.close()
        self.daemon = replica
        self.ctl = rdzvnode.Control(replica.addr)


    def close(self, gentle=False, keep_daemon=True):
        super().close(gentle, keep_daemon=True)


@pytest.fixture
def pair(tmp_path, etcd):
    """Two replicas: the first leads, the second stands by."""
    ports = etcdtest.free_ports(2)
    reps = []
    try:
        a = Replica(tmp_path, etcd, ports[0])
        reps.append(a)
        a.wait_leading()
        b = Replica(tmp_path, etcd, ports[1])
        reps.append(b)
        b.wait_standby()
        yield reps
    finally:
        for r in reps:
            if r.p.poll() is None:
                r.signal(signal.SIGCONT)
                r.kill()


def all_connected(n):
    return lambda j: len(j.nodes) == n and all(x.connected for x in j.nodes)


def rounds(events):
    """The generations of the job's round events, in order."""
    return [e.generation for e in events if e.kind == "round"]


def assert_no_generation_twice(ctl):
    """No generation number of any job was handed out twice (SPEC §14)."""
    for job in ctl.list_jobs(all=True):
        gens = rounds(ctl.list_events(job.rdzv_id, limit=10000))
        assert len(gens) == len(set(gens)) and gens == sorted(gens), (job.rdzv_id, gens)


def assert_refused_uncommitted(node):
    """|node|'s Join, sent to a leader that could not commit it, ended
    UNAVAILABLE and brought nothing: not accepted, no assignment."""
    code, details = node.end(timeout=15)
    node.close()
    assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
    assert not node.kinds(), node.describe()


def three_running(job):
    for i, t in enumerate("abc"):
        job.agent(t, rank=i)
    g1, s1 = job.wait_world(3)
    pids = sorted(d["pid"] for d in s1.values())
    j = job.wait_job(all_connected(3), 10, "three nodes connected")
    return g1, pids, j


# -- the settings -----------------------------------------------------------------

def test_ha_settings(tmp_path):
    """--advertise and leader-lease: printed by --check-config, refused
    with the reason when they cannot work."""
    def check(*args):
        return subprocess.run([rt.build_path("daemon", "rdzvd"), "--db",
                               str(tmp_path / "x.db"), "--check-config"] + list(args),
                              capture_output=True, text=True, timeout=15)
    r = check("--advertise", "rdzv-1.example.org:29400", "--leader-lease", "3s")
    assert r.returncode == 0, r.stderr
    assert "advertise = rdzv-1.example.org:29400" in r.stdout.splitlines()
    assert "leader-lease = 3s" in r.stdout.splitlines()
    r = check()
    assert "advertise = " in r.stdout.splitlines() and "leader-lease = 5s" in r.stdout
    for args, needle in ((["--advertise", "rdzv-1"], "--advertise rdzv-1 is not HOST:PORT"),
                         (["--advertise", "unix:/run/x"], "is not HOST:PORT"),
                         (["--advertise", "h:0"], "is not HOST:PORT"),
                         (["--leader-lease", "2500ms"], "not whole seconds"),
                         (["--leader-lease", "1s"], "below the minimum of 2s")):
        r = check(*args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)


# -- what a standby answers -----------------------------------------------------

def test_standby_points_to_the_leader(pair, tmp_path):
    """A standby refuses Rendezvous and Control with UNAVAILABLE and the
    rdzv-leader trailer, says NOT_SERVING for them (SERVING for the
    process), /readyz 503; ServerInfo and rdzvctl server show the roles.
    When the leader goes, the standby's Health Watch turns SERVING."""
    a, b = pair
    ch = rdzvnode.channel(b.addr)
    try:
        ctl = rdzvnode.Control(b.addr)
        with pytest.raises(grpc.RpcError) as ei:
            ctl.list_jobs()
        e = ei.value
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        assert e.details() == "not the leader; the leader is %s" % a.addr, e.details()
        assert dict(e.trailing_metadata() or ())["rdzv-leader"] == a.addr
        # A Join too, before anything reaches the (empty) core.
        with rdzvnode.Node(b.addr) as n:
            n.join("standby-job", 1, 1, wait=False)
            code, details = n.end()
        assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
        assert a.addr in details, details

        check = ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=PB.health.HealthCheckRequest.SerializeToString,
                               response_deserializer=PB.health.HealthCheckResponse.FromString)
        st = PB.health.HealthCheckResponse
        for svc, want in (("rdzv.v1.Rendezvous", st.NOT_SERVING),
                          ("rdzv.v1.Control", st.NOT_SERVING),
                          ("", st.SERVING), ("grpc.health.v1.Health", st.SERVING)):
            got = check(PB.health.HealthCheckRequest(service=svc), timeout=5).status
            assert got == want, (svc, got)
        with rdzvnode.channel(a.addr) as ach:
            achk = ach.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=PB.health.HealthCheckRequest.SerializeToString,
                response_deserializer=PB.health.HealthCheckResponse.FromString)
            assert achk(PB.health.HealthCheckRequest(service="rdzv.v1.Control"),
                        timeout=5).status == st.SERVING

        assert a.readyz()[0] == 200
        code, text = b.readyz()
        assert code == 503 and "standby" in text and a.addr in text, (code, text)
        # The status page hears the role first: a standby's names the leader.
        assert a.first_page_event() == ("role", {"role": "leader", "leader": a.addr})
        assert b.first_page_event() == ("role", {"role": "standby", "leader": a.addr})

        ia, ib = a.info(), b.info()
        assert (ia.role, ia.leader, ia.advertise) == ("leader", a.addr, a.addr), ia
        assert (ib.role, ib.leader, ib.advertise) == ("standby", a.addr, b.addr), ib
        assert ib.store == b.store and list(ib.etcd_endpoints) == \
            b.store[len("etcd://"):].split("/")[0].split(","), ib
        out = subprocess.run([CTL, "--server", b.addr, "server"], capture_output=True,
                             text=True, timeout=15)
        assert out.returncode == 0, out.stderr
        lines = dict(l.split(None, 1) for l in out.stdout.splitlines() if " " in l)
        assert lines["role"].strip() == "standby", out.stdout
        assert lines["leader"].strip() == a.addr, out.stdout
        assert lines["store"].strip() == b.store, out.stdout
        js = json.loads(subprocess.run([CTL, "--server", b.addr, "server", "-o", "json"],
                                       capture_output=True, text=True, timeout=15).stdout)
        assert (js["role"], js["leader"]) == ("standby", a.addr), js

        # Health.Watch of the standby's Rendezvous: NOT_SERVING, then
        # SERVING once the leader is gone and it leads.
        watch = ch.unary_stream("/grpc.health.v1.Health/Watch",
                                request_serializer=PB.health.HealthCheckRequest.SerializeToString,
                                response_deserializer=PB.health.HealthCheckResponse.FromString)
        it = watch(PB.health.HealthCheckRequest(service="rdzv.v1.Rendezvous"), timeout=30)
        assert next(it).status == st.NOT_SERVING
        a.kill()
        assert next(it).status == st.SERVING
        it.cancel()
        b.wait_leading(timeout=5)
        assert b.readyz()[0] == 200
        assert b.info().role == "leader"
        ctl.close()
        # A clean exit of a replica that was a standby, then led (the
        # sanitizer build checks for leaks at exit).
        assert b.stop() == 0, b.output()
    finally:
        ch.close()


# -- failovers -------------------------------------------------------------------

def test_leader_killed_agents_resume_on_the_standby(pair, tmp_path, request):
    """A 3-node job running; kill -9 of the leader: the standby leads, every
    agent resumes there with its workers untouched (same pids, generation
    and restart count), within the lease and 2 s more plus the agents'
    retry; then the job closes normally."""
    a, b = pair
    job = HAJob(tmp_path, rdzvagent.job_name(request), [a, b])
    try:
        g1, pids, j1 = three_running(job)
        assert j1.restart_count == 0
        t0 = time.monotonic()
        a.kill()
        b.wait_leading(timeout=LEASE_S + 5)
        job.use(b)
        j = job.wait_job(all_connected(3), LEASE_S + 10, "every agent resumed on the standby")
        took = time.monotonic() - t0
        assert j.generation == g1 and j.restart_count == 0, j
        assert all(rdzvagent.alive(p, "worker.py") for p in pids)
        for t in "abc":
            job.agents[t].wait_line("resumed as node id", timeout=5)
        assert sorted({g for g, _ in job.files("env")}) == [g1]
        print("failover: every agent resumed %.2f s after kill -9 (lease %d s)"
              % (took, LEASE_S))
        job.finish(g1)
        assert_no_generation_twice(job.ctl)
    finally:
        job.close()


def test_leader_killed_while_a_round_forms(pair, tmp_path, request):
    """Two of three nodes joined when the leader dies; the third joins the
    new leader: one round, one generation."""
    a, b = pair
    job = HAJob(tmp_path, rdzvagent.job_name(request), [a, b])
    try:
        job.agent("a", rank=0)
        job.agent("b", rank=1)
        job.wait_job(lambda x: len(x.nodes) == 2 and all(n.connected for n in x.nodes),
                     15, "two nodes joined")
        a.kill()
        b.wait_leading(timeout=LEASE_S + 5)
        job.use(b)
        job.wait_job(all_connected(2), LEASE_S + 10, "both resumed on the standby")
        job.agent("c", rank=2)
        g1, s1 = job.wait_world(3)
        assert g1 == 1, g1
        j = job.wait_job(all_connected(3), 10, "three connected")
        assert j.generation == 1 and j.restart_count == 0, j
        assert rounds(job.ctl.list_events(job.id, limit=1000)) == [1]
        job.finish(g1)
    finally:
        job.close()


def test_paused_leader_does_not_write(pair, tmp_path, request):
    """SIGSTOP of the leader for longer than its lease: the standby leads;
    SIGCONT: the old leader writes nothing (its fenced Txn fails or it
    learns first that its lease is gone), steps down, and its agents end up
    on the new leader. No generation of any job is handed out twice."""
    a, b = pair
    job = HAJob(tmp_path, rdzvagent.job_name(request), [a, b])
    try:
        g1, pids, _ = three_running(job)
        txns = a.info().transactions
        hch = rdzvnode.channel(a.addr)
        health = hch.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=PB.health.HealthCheckRequest.SerializeToString,
            response_deserializer=PB.health.HealthCheckResponse.FromString)(
                PB.health.HealthCheckRequest(service="rdzv.v1.Control"), timeout=60)
        st = PB.health.HealthCheckResponse
        assert next(health).status == st.SERVING
        mark = len(a.lines)
        a.signal(signal.SIGSTOP)
        late = rdzvnode.Node(a.addr, name="late")
        try:
            # A join that reaches the paused leader: it has to commit the
            # new job before it may answer, and must not be able to.
            late.join("joined-while-paused", 1, 1, wait=False)
            # The standby leads only once the paused leader's lease ended.
            b.wait_leading(timeout=LEASE_S + 5)
            job.use(b)
        finally:
            a.signal(signal.SIGCONT)
        assert_refused_uncommitted(late)
        m = a.wait_line(r"stepping down: (.*)", timeout=15, start=mark)
        print("the paused leader stepped down:", m.group(1))
        # Its Health watchers hear that it serves Control no more.
        assert next(health).status == st.NOT_SERVING
        health.cancel()
        hch.close()
        info = rt.wait_for(lambda: (lambda i: i if i.leader == b.addr else None)(a.info()),
                           10, 0.05, "the old leader to know the new one")
        assert info.role == "standby", info
        assert info.transactions == txns, (txns, info)
        with pytest.raises(grpc.RpcError) as ei:
            job.ctl.get_job("joined-while-paused")
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        assert not any("election: leading" in l for l in a.lines[mark:]), a.output()
        j = job.wait_job(all_connected(3), 15, "three on the new leader")
        assert j.generation == g1 and j.restart_count == 0, j
        assert all(rdzvagent.alive(p, "worker.py") for p in pids)
        # Its last words named the replica after it: each agent went
        # straight there.
        for t in "abc":
            job.agents[t].wait_line(r"following leader hint %s from rdzvd at %s"
                                    % (re.escape(b.addr), re.escape(a.addr)), 5)
        # A second job on the new leader, to have more than one job's
        # events to check.
        with rdzvnode.Node(b.addr, name="extra") as n:
            n.join("extra-job", min_nodes=1, max_nodes=1)
            n.wait_assignment(generation=1)
        assert_no_generation_twice(job.ctl)
        job.finish(g1)
        # The deposed leader exits cleanly (no leak of what it dropped),
        # and SIGTERM of the new one revokes its lease on the way.
        assert a.stop() == 0, a.output()
        assert b.stop() == 0, b.output()
    finally:
        a.signal(signal.SIGCONT)
        job.close()


def test_etcd_member_killed_rdzvd_serves_on(tmp_path, request):
    """A three-member etcd; one member killed (the one rdzvd talks to
    first): the leader keeps leading, its job keeps running, and new
    rounds still commit."""
    etcdtest.skip_unless_etcd()
    with etcdtest.Etcd(tmp_path / "etcd", members=3) as etcd:
        a = Replica(tmp_path, etcd, etcdtest.free_ports(1)[0], lease_s=5)
        job = HAJob(tmp_path, rdzvagent.job_name(request), [a])
        try:
            a.wait_leading()
            g1, pids, _ = three_running(job)
            mark = len(a.lines)
            etcd.kill(0)
            with rdzvnode.Node(a.addr, name="after") as n:
                n.join("after-kill", min_nodes=1, max_nodes=1)
                n.wait_assignment(generation=1, timeout=20)
            j = job.wait_job(all_connected(3), 10, "the job still connected")
            assert j.generation == g1 and j.restart_count == 0, j
            assert a.info().role == "leader"
            assert not any("stepping down" in l for l in a.lines[mark:]), a.output()
            job.finish(g1)
        finally:
            job.close()
            a.kill()


def test_deposed_leader_cannot_commit(pair, tmp_path, etcd):
    """The leader's key deleted behind its back (its lease still alive)
    while a join waits for it: the commit of that join is fenced (its Txn
    compares the key's create_revision) and fails, or the election's watch
    tells first; either way the leader steps down without answering, the
    join ends UNAVAILABLE and the new leader has no such job. (The join
    and the deletion both wait while the leader is paused; the commit runs
    before the election's Range returns, so mostly the fence decides.)"""
    a, b = pair
    keys = etcd.ctl("get", "--prefix", "/rdzv-ha/leader/").split("\n")
    mine = [keys[i] for i in range(0, len(keys) - 1, 2)
            if keys[i + 1].split(" ")[0] == a.addr]
    assert len(mine) == 1, keys
    # A job running on the leader, and an operator watching it.
    node = rdzvnode.Node(a.addr, name="runner")
    node.join("running", 1, 1, lease_ttl_ms=60000)
    node.wait_assignment(generation=1)
    ctl = rdzvnode.Control(a.addr)
    watch = ctl.watch("running")
    assert next(watch).job.state == PB.types.JOB_STATE_RUNNING
    mark = len(a.lines)
    late = rdzvnode.Node(a.addr, name="late")
    # Its connection up first: grpcio sends the join at once, not after
    # the paused server's SETTINGS.
    info = late._open().unary_unary(
        "/rdzv.v1.Control/ServerInfo",
        request_serializer=PB.control.ServerInfoRequest.SerializeToString,
        response_deserializer=PB.control.ServerInfoResponse.FromString)
    assert info(PB.control.ServerInfoRequest(), timeout=5).role == "leader"
    # Paused for a moment (well inside its lease), so that the join and the
    # news of the deletion are both waiting when it runs again (etcdctl
    # takes longer than the join's bytes to arrive).
    a.signal(signal.SIGSTOP)
    try:
        late.join("joined-after-delete", 1, 1, wait=False)
        # An action answered only once committed: it must not be.
        closing = ctl.channel.unary_unary(
            "/rdzv.v1.Control/CloseJob",
            request_serializer=PB.control.CloseJobRequest.SerializeToString,
            response_deserializer=PB.types.Job.FromString).future(
                PB.control.CloseJobRequest(rdzv_id="running"), timeout=30)
        etcd.ctl("del", mine[0])
    finally:
        a.signal(signal.SIGCONT)
    assert_refused_uncommitted(late)
    with pytest.raises(grpc.RpcError) as ei:
        closing.result(timeout=15)
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
    # The Watch and the node's Join end too, naming the replica after it
    # as the leader.
    with pytest.raises(grpc.RpcError) as ei:
        for _ in watch:
            pass
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
    assert dict(ei.value.trailing_metadata() or ())["rdzv-leader"] == b.addr
    assert node.end(timeout=15)[0] == grpc.StatusCode.UNAVAILABLE
    node.close()
    ctl.close()
    m = a.wait_line(r"stepping down: (.*)", timeout=10, start=mark)
    print("the deposed leader stepped down:", m.group(1))
    assert "leader key" in m.group(1), m.group(1)
    b.wait_leading(timeout=10)
    with rdzvnode.Control(b.addr) as c:
        with pytest.raises(grpc.RpcError) as ei:
            c.get_job("joined-after-delete")
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        # Not closed: the close was never committed.
        assert c.get_job("running").state == PB.types.JOB_STATE_RUNNING


def test_restarted_replica_leads_at_once(tmp_path, etcd):
    """kill -9 of the only replica, then the same replica started again
    (what systemd's Restart= does): it revokes the lease its earlier self
    left at its address and leads at once, not when that lease would have
    expired (leader-lease 10 s here), with the job it had."""
    port = etcdtest.free_ports(1)[0]
    a = Replica(tmp_path, etcd, port, lease_s=10)
    try:
        a.wait_leading()
        with rdzvnode.Node(a.addr, name="n") as n:
            n.join("before-restart", 1, 1)
            n.wait_assignment(generation=1)
        a.kill()
        t0 = time.monotonic()
        a = Replica(tmp_path, etcd, port, lease_s=10)
        a.wait_leading(timeout=5)
        took = time.monotonic() - t0
        assert took < 5, took
        a.wait_line(r"election: revoking lease [0-9a-f]+ of an earlier rdzvd at "
                    + a.addr.replace(".", r"\."), timeout=1)
        with rdzvnode.Control(a.addr) as c:
            assert c.get_job("before-restart").generation == 1
    finally:
        a.kill()


def etcd_revision(etcd):
    return json.loads(etcd.ctl("get", "/rdzv-ha/none", "-w", "json"))["header"]["revision"]


def test_two_replicas_with_one_advertise_address(tmp_path, etcd):
    """Two live replicas given the same --advertise (a configuration
    mistake): neither revokes the other's key (they would campaign against
    each other without end, issue 21). The key created first leads, the
    other stands by, both log an error naming the clash (the address and
    both instances), and etcd's revision stands still but for the odd
    write over a few seconds."""
    ports = etcdtest.free_ports(2)
    shared = "127.0.0.1:%d" % ports[0]
    reps = []
    try:
        a = Replica(tmp_path, etcd, ports[0], args=["--advertise", shared])
        reps.append(a)
        a.wait_leading()
        b = Replica(tmp_path, etcd, ports[1], args=["--advertise", shared])
        reps.append(b)
        b.wait_standby()
        clash = (r"election: another rdzvd \(instance ([0-9a-f]{16}), pid (\d+) "
                 r"on this host\) campaigns with our advertised address "
                 + re.escape(shared) + r" \(we are instance ([0-9a-f]{16}), "
                 r"pid (\d+)\)")
        mb = b.wait_line(clash, timeout=10)
        ma = a.wait_line(clash, timeout=10)
        assert mb.group(2) == str(a.p.pid) and mb.group(4) == str(b.p.pid), mb.group(0)
        assert ma.group(2) == str(b.p.pid) and ma.group(4) == str(a.p.pid), ma.group(0)
        assert mb.group(1) == ma.group(3) and ma.group(1) == mb.group(3)
        assert "this replica stands by behind it" in b.wait_line(clash).string
        mark_a, mark_b = len(a.lines), len(b.lines)
        rev0 = etcd_revision(etcd)
        time.sleep(3)       # the window over which the revision is measured
        rev1 = etcd_revision(etcd)
        assert rev1 - rev0 <= 3, (rev0, rev1, a.output()[-3000:], b.output()[-3000:])
        assert a.info().role == "leader"
        assert not any("stepping down" in l or "revoking lease" in l
                       for l in a.lines[mark_a:] + b.lines[mark_b:])
        assert not any("election: leading with" in l for l in b.lines), b.output()
        keys = etcd.ctl("get", "--prefix", "/rdzv-ha/leader/").split("\n")
        values = [keys[i + 1] for i in range(0, len(keys) - 1, 2)]
        assert len(values) == 2 and all(v.startswith(shared + " instance=")
                                        for v in values), values
    finally:
        for r in reps:
            if r.p.poll() is None:
                r.kill()
