"""auth = munge (docs/SECURITY.md) with a real munged started here (its own
key, socket and state, stopped by pid) and real rdzvd, rdzv-agent and
rdzvctl run as other uids through setpriv: a job belongs to the uid that
created it, another uid's abort and join are refused, the owner's and an
admin-group member's abort go through, rdzvctl names owners by user name;
a credential replayed with a raw client (grpcio, the header rdzvctl sent),
an expired one, one made for another call, and none at all are refused; munged stopped on
the client's or on rdzvd's side gives an error naming its socket; mTLS and
MUNGE together. Every wait is bounded."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import types
from concurrent import futures

import grpc
import pytest

import mungetest as mt
import rdzvtest as rt

why = mt.missing()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

T = rt.protos().types
C = rt.protos().control
H = rt.protos().health
AGENT = rt.build_path("client", "agent", "rdzv-agent")
CTL = rt.build_path("client", "ctl", "rdzvctl")
LIST = "/rdzv.v1.Control/ListJobs"


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
                "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
            del env[k]
    return env


class Site:
    """A directory every uid may use, one munged and what the test starts;
    close() stops it all by pid."""

    def __init__(self):
        self.dir = mt.workdir()
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.out)
        os.chmod(self.out, 0o777)
        self.procs = []
        self.munged = [mt.Munged(self.dir)]
        self.daemon = None

    def rdzvd(self, *args, munged=None, env=None):
        m = munged or self.munged[0]
        self.daemon = rt.Daemon(self.dir, ["--auth", "munge", "--munge-socket", m.socket,
                                           "--http-listen", "none"] + list(args), env=env)
        self.procs.append(self.daemon)
        return self.daemon

    def ctl(self, user, *args, socket=None, tls=()):
        argv = mt.as_user(user, [CTL, "--server", self.daemon.addr, "--auth", "munge",
                                 "--munge-socket", socket or self.munged[0].socket]
                          + list(tls) + list(args))
        return subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              env=clean_env())

    def agent(self, user, rdzv_id, socket=None, tls=()):
        marker = os.path.join(self.out, "%s-%s" % (rdzv_id, user[0]))
        logs = os.path.join(self.out, "logs-%s-%s" % (rdzv_id, user[0]))
        argv = mt.as_user(user, [
            AGENT, "join", "--id", rdzv_id, "--server", self.daemon.addr,
            "--nnodes", "1:2", "--nproc-per-node", "1", "--last-call", "1s",
            "--stop-timeout", "2s", "--log-dir", logs, "--auth", "munge",
            "--munge-socket", socket or self.munged[0].socket] + list(tls) + [
            "--", "/bin/sh", "-c", "touch %s; exec sleep 300" % marker])
        p = rt.Proc(argv, env={k: "" for k in os.environ if k.startswith(
            ("RDZV_", "SLURM_", "PBS_")) and k not in ("RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT")})
        p.marker = marker
        self.procs.append(p)
        return p

    def close(self):
        """Stops everything; rdzvd must exit 0 (a sanitizer build's
        findings make it fail)."""
        rcs = {}
        for p in reversed(self.procs):
            rcs[p] = p.stop(5)
        for m in self.munged:
            m.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.daemon is not None and self.daemon in rcs:
            assert rcs[self.daemon] == 0, self.daemon.output()[-3000:]


@pytest.fixture
def site():
    s = Site()
    try:
        yield s
    finally:
        s.close()


def running(agent, what):
    rt.wait_for(lambda: os.path.exists(agent.marker) or agent.p.poll() is not None,
                30, 0.05, "the worker of %s" % what)
    assert os.path.exists(agent.marker), agent.output()


def test_owners_by_uid_and_admin_group(site):
    site.rdzvd("--admin-group", mt.ADMIN_GROUP)
    a1 = site.agent(mt.USER_A, "j1")
    a2 = site.agent(mt.USER_A, "j2")
    running(a1, "j1")
    running(a2, "j2")

    # rdzvctl names the owner by its user name.
    r = site.ctl(mt.USER_B, "status", "j1", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["owner"] == "daemon"
    r = site.ctl(mt.USER_B, "status")
    assert r.returncode == 0 and "daemon" in r.stdout, r.stdout + r.stderr
    r = site.ctl(mt.USER_B, "server")
    assert r.returncode == 0 and re.search(r"you are\s+nobody$", r.stdout, re.M), r.stdout

    # Another uid may neither join nor abort the job.
    b = site.agent(mt.USER_B, "j1")
    assert b.wait(30) != 0
    assert "belongs to daemon; nobody may not join it" in b.output(), b.output()
    r = site.ctl(mt.USER_B, "abort", "j1", "--reason", "not mine")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "job j1 belongs to daemon; nobody may not abort it" in r.stderr
    assert a1.p.poll() is None

    # A member of admin-group may (the group is the credential's gid).
    r = site.ctl(mt.ADMIN, "abort", "j1", "--reason", "admin")
    assert r.returncode == 0, r.stderr
    assert a1.wait(30) == 1
    assert "aborted by bin: admin" in a1.output()

    # The owner may.
    r = site.ctl(mt.USER_A, "abort", "j2", "--reason", "mine")
    assert r.returncode == 0, r.stderr
    assert a2.wait(30) == 1
    assert "aborted by daemon: mine" in a2.output()


class Capture(grpc.GenericRpcHandler):
    """A gRPC server that keeps each call's method, rdzv-munge header and
    request bytes, and refuses it: what a client sent, byte for byte."""

    def __init__(self):
        self.creds = []
        self.got = threading.Event()

    def service(self, details):
        cred = dict(details.invocation_metadata).get("rdzv-munge")

        def keep(body, ctx):
            self.creds.append((details.method, cred, body))
            self.got.set()
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "captured")
        return grpc.unary_unary_rpc_method_handler(keep)


def capture(site, user, *args):
    """`rdzvctl ARGS` of |user| sent to a server of our own: (method,
    rdzv-munge credential, request bytes) of its first call."""
    cap = Capture()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=(cap,))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        argv = mt.as_user(user, [CTL, "--server", "127.0.0.1:%d" % port, "--auth",
                                 "munge", "--munge-socket", site.munged[0].socket]
                          + list(args))
        subprocess.run(argv, capture_output=True, timeout=30, env=clean_env())
        assert cap.got.wait(10)
    finally:
        srv.stop(0)
    return cap.creds[0]


def test_replayed_missing_and_misdirected_credentials(site):
    d = site.rdzvd()
    # The header rdzvctl sends, caught by a server of our own.
    method, cred, body = capture(site, mt.USER_A, "status")
    assert method == LIST and cred.startswith("MUNGE:")

    ch = grpc.insecure_channel(d.addr)
    list_jobs = ch.unary_unary(LIST, request_serializer=C.ListJobsRequest.SerializeToString,
                               response_deserializer=C.ListJobsResponse.FromString)
    # Once, with the request it was made for: it is good.
    list_jobs(C.ListJobsRequest.FromString(body), metadata=[("rdzv-munge", cred)],
              timeout=10)
    # Twice: munged has seen it.
    with pytest.raises(grpc.RpcError) as e:
        list_jobs(C.ListJobsRequest.FromString(body), metadata=[("rdzv-munge", cred)],
                  timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "replayed" in e.value.details()

    # None: the message says what to do.
    with pytest.raises(grpc.RpcError) as e:
        list_jobs(C.ListJobsRequest(), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "--auth munge" in e.value.details()

    # A credential made for another call, or for none.
    for payload in (["-s", "/rdzv.v1.Control/GetJob"], ["-n"]):
        other = subprocess.run(mt.as_user(mt.USER_A, ["munge", "-S", site.munged[0].socket]
                                          + payload), capture_output=True, text=True,
                               check=True).stdout.strip()
        with pytest.raises(grpc.RpcError) as e:
            list_jobs(C.ListJobsRequest(), metadata=[("rdzv-munge", other)], timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "another call" in e.value.details()

    # Expired: a time to live of 1 s, used 3 s later (munged's clock decides).
    made = time.monotonic()
    old = subprocess.run(mt.as_user(mt.USER_A, ["munge", "-S", site.munged[0].socket,
                                                "-t", "1", "-s", LIST]),
                         capture_output=True, text=True, check=True).stdout.strip()
    time.sleep(max(0.0, made + 3 - time.monotonic()))
    with pytest.raises(grpc.RpcError) as e:
        list_jobs(C.ListJobsRequest(), metadata=[("rdzv-munge", old)], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "MUNGE credential expired" in e.value.details()

    # Garbage.
    with pytest.raises(grpc.RpcError) as e:
        list_jobs(C.ListJobsRequest(), metadata=[("rdzv-munge", "MUNGE:nonsense:")],
                  timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "invalid MUNGE credential" in e.value.details()

    # Probes need none.
    check = ch.unary_unary("/grpc.health.v1.Health/Check",
                           request_serializer=H.HealthCheckRequest.SerializeToString,
                           response_deserializer=H.HealthCheckResponse.FromString)
    assert check(H.HealthCheckRequest(), timeout=10).status == 1
    ch.close()
    # rdzvd served on through all of it.
    r = site.ctl(mt.USER_B, "status")
    assert r.returncode == 0, r.stderr


def test_munged_stopped_on_the_client_side(site):
    site.rdzvd()
    sock = site.munged[0].socket
    site.munged[0].stop()
    r = site.ctl(mt.USER_A, "status")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "cannot get a MUNGE credential from munged at %s" % sock in r.stderr
    a = site.agent(mt.USER_A, "j1")
    assert a.wait(30) != 0
    assert "cannot get a MUNGE credential from munged at %s" % sock in a.output()
    assert not os.path.exists(a.marker)


def test_munged_stopped_on_rdzvd_side(site):
    # Two munged with one key, as on two nodes: rdzvd's and the clients'.
    theirs = mt.Munged(site.dir, "munge-rdzvd", key=site.munged[0].key)
    site.munged.append(theirs)
    d = site.rdzvd(munged=theirs)
    assert site.ctl(mt.USER_A, "status").returncode == 0
    a = site.agent(mt.USER_A, "j1")
    running(a, "j1")

    # Hung: the call ends when rdzvd stops waiting, and rdzvd serves on.
    theirs.proc.signal(signal.SIGSTOP)
    try:
        r = site.ctl(mt.USER_A, "status")
    finally:
        theirs.proc.signal(signal.SIGCONT)
    assert r.returncode == 5, r.stdout + r.stderr
    assert "munged at %s did not answer within" % theirs.socket in r.stderr
    assert site.ctl(mt.USER_A, "status").returncode == 0

    # Gone.
    mark = d.mark()
    theirs.stop()
    r = site.ctl(mt.USER_A, "status")
    assert r.returncode == 5, r.stdout + r.stderr
    assert "rdzvd cannot decode MUNGE credentials: munged at %s" % theirs.socket in r.stderr
    assert "is rdzvd running" not in r.stderr
    d.wait_line(r"auth: rdzvd cannot decode MUNGE credentials: munged at %s"
                % re.escape(theirs.socket), 10, mark)
    # Never anonymous instead: the job is untouched, its agent runs on.
    r = site.ctl(mt.USER_A, "abort", "j1")
    assert r.returncode == 5, r.stdout + r.stderr
    assert a.p.poll() is None
    # A new agent hears why it cannot join.
    b = site.agent(mt.USER_A, "j2")
    b.wait_line(r"rdzvd cannot decode MUNGE credentials: munged at %s"
                % re.escape(theirs.socket), 20)
    assert not os.path.exists(b.marker)


def test_mtls_and_munge(site):
    certs = rt.make_certs(site.dir)
    for k in ("ca", "client_cert", "client_key"):
        os.chmod(certs[k], 0o644)
    site.rdzvd("--tls-cert", certs["server_cert"], "--tls-key", certs["server_key"],
               "--tls-ca", certs["ca"])
    tls = ["--tls-ca", certs["ca"], "--tls-cert", certs["client_cert"],
           "--tls-key", certs["client_key"]]
    a = site.agent(mt.USER_A, "j1", tls=tls)
    running(a, "j1")
    # The credential's uid is the identity, not the certificate's subject.
    r = site.ctl(mt.USER_B, "status", "j1", "-o", "json", tls=tls)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["owner"] == "daemon"
    r = site.ctl(mt.USER_B, "abort", "j1", tls=tls)
    assert r.returncode == 4 and "nobody may not abort" in r.stderr, r.stderr
    # The certificate still gates the connection.
    r = site.ctl(mt.USER_A, "status", tls=["--tls-ca", certs["ca"]])
    assert r.returncode != 0
    assert a.p.poll() is None
    r = site.ctl(mt.USER_A, "abort", "j1", "--reason", "done", tls=tls)
    assert r.returncode == 0, r.stderr
    assert a.wait(30) == 1


def test_slurm_job_owner_check(site):
    import slurmtest as st
    if st.missing() is not None:
        pytest.skip(st.missing())
    slurm = st.Slurm(site.dir)
    try:
        # Other uids reach Slurm's munged, as on a cluster.
        os.chmod(os.path.join(slurm.dir, "munge"), 0o755)
        sock = slurm.munge_socket
        # User A's Slurm job, held so that it stays in the queue.
        r = subprocess.run(mt.as_user(mt.USER_A, [
            "sbatch", "--parsable", "--hold", "--chdir", "/tmp", "--wrap", "sleep 60"]),
            env=slurm.env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        job = r.stdout.strip().split(";")[0]
        site.rdzvd("--slurm-job-owner", "check", munged=types.SimpleNamespace(socket=sock),
                   env={"SLURM_CONF": slurm.conf})

        b = site.agent(mt.USER_B, job, socket=sock)
        assert b.wait(30) != 0
        assert "job %s is Slurm job %s of daemon; nobody may not join it" % (
            job, job) in b.output(), b.output()
        none = site.agent(mt.USER_A, "999999", socket=sock)
        assert none.wait(30) != 0
        assert "Slurm has no job 999999" in none.output(), none.output()

        a = site.agent(mt.USER_A, job, socket=sock)
        running(a, job)
        # Ids that are not numbers are anybody's, as before.
        free = site.agent(mt.USER_B, "not-slurm", socket=sock)
        running(free, "not-slurm")
        r = site.ctl(mt.USER_A, "status", job, "-o", "json", socket=sock)
        assert r.returncode == 0 and json.loads(r.stdout)["owner"] == "daemon", r.stderr
    finally:
        slurm.stop()
