"""A real etcd for tests: one member or a cluster of three, on loopback ports
chosen free, with data in a temporary directory, cleartext or TLS.

    import etcdtest
    etcdtest.skip_unless_etcd()            # pytest skip with the reason
    with etcdtest.Etcd(tmpdir) as etcd:    # or Etcd(tmpdir, members=3)
        etcd.endpoints                     # "127.0.0.1:P" or "a:P,b:Q,c:R"
        etcd.ctl("put", "k", "v")          # etcdctl against the cluster
        etcd.kill(0)                       # SIGKILL one member

TLS: Etcd(tmpdir, tls=rdzvtest.make_certs(dir)) serves clients over TLS with
the server certificate (127.0.0.1/localhost); client_cert_auth=True also
requires a client certificate signed by the CA (the "client_cert" pair).
Members talk to each other in cleartext. Nothing here sleeps and hopes:
readiness is etcd's own "ready to serve client requests" line, waited for
with a deadline. Every member is killed when the object is closed.
"""

import os
import shutil
import socket
import subprocess

import rdzvtest

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


def missing():
    """Why etcd tests cannot run here (None when they can)."""
    for prog, pkg in ((ETCD, "etcd-server"), (ETCDCTL, "etcd-client")):
        if not os.access(prog, os.X_OK):
            return "%s is missing (Debian package %s; deploy/install-deps.sh test)" % (prog, pkg)
    return None


def skip_unless_etcd():
    """pytest.skip() with the reason when etcd or etcdctl is missing."""
    why = missing()
    if why:
        import pytest
        pytest.skip(why)


def fixture():
    """A pytest fixture |etcd|: a one-member etcd for one test, under the
    test's temporary directory; the test skips with the reason when etcd is
    missing. A test module takes it as `etcd = etcdtest.fixture()`."""
    import pytest

    @pytest.fixture
    def etcd(tmp_path):
        skip_unless_etcd()
        e = Etcd(tmp_path / "etcd")
        yield e
        e.close()
    return etcd


def free_ports(n):
    """|n| distinct loopback TCP ports free at the moment of asking. Another
    process may take one before etcd binds it: Etcd() retries then."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Member:
    """One etcd process of an Etcd cluster."""

    def __init__(self, name, client_port, peer_port, data_dir):
        self.name = name
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = data_dir
        self.endpoint = "127.0.0.1:%d" % client_port
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.p.poll() is None


class Etcd:
    """An etcd cluster of |members| (1 or 3) started under |tmpdir|."""

    def __init__(self, tmpdir, members=1, tls=None, client_cert_auth=False,
                 extra_args=(), ready_timeout=30.0, attempts=4):
        self.tmpdir = str(tmpdir)
        self.tls = tls
        self.client_cert_auth = client_cert_auth
        self.extra_args = list(extra_args)
        self.members = []
        why = missing()
        if why:
            raise RuntimeError(why)
        last = None
        for attempt in range(attempts):
            try:
                self._start(members, attempt, ready_timeout)
                return
            except TimeoutError as e:
                # A port taken between free_ports() and etcd's bind shows
                # as a member that exits before it is ready: try new ports.
                last = e
                self.close()
        raise last

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def endpoints(self):
        """The client endpoints, comma-separated, in member order."""
        return ",".join(m.endpoint for m in self.members)

    def _argv(self, m, cluster, state):
        url = "%s://127.0.0.1:%d" % (self.scheme, m.client_port)
        peer = "http://127.0.0.1:%d" % m.peer_port
        argv = [ETCD, "--name", m.name, "--data-dir", m.data_dir,
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster,
                "--initial-cluster-state", state,
                "--initial-cluster-token", "rdzv-test-%d" % os.getpid(),
                # Tests kill members: elections within a second or so.
                "--heartbeat-interval", "100", "--election-timeout", "1000"]
        if self.tls:
            argv += ["--cert-file", self.tls["server_cert"],
                     "--key-file", self.tls["server_key"]]
            if self.client_cert_auth:
                argv += ["--client-cert-auth",
                         "--trusted-ca-file", self.tls["ca"]]
        return argv + self.extra_args

    def _start(self, n, attempt, ready_timeout):
        ports = free_ports(2 * n)
        self.members = []
        for i in range(n):
            d = os.path.join(self.tmpdir, "etcd-%d-%d" % (attempt, i))
            os.makedirs(d, exist_ok=True)
            self.members.append(Member("m%d" % i, ports[2 * i], ports[2 * i + 1], d))
        cluster = ",".join("%s=http://127.0.0.1:%d" % (m.name, m.peer_port)
                           for m in self.members)
        for m in self.members:
            m.proc = rdzvtest.Proc(self._argv(m, cluster, "new"))
        for m in self.members:
            m.proc.wait_line(r"ready to serve client requests", ready_timeout)
        # Readiness of one member's client side does not mean the cluster
        # has a leader: wait until a write goes through.
        rdzvtest.wait_for(lambda: self.ctl_ok("put", "/etcdtest/ready", "1"),
                          ready_timeout, interval=0.1, what="etcd to accept a write")

    def ctl_argv(self, *args, endpoints=None):
        argv = [ETCDCTL, "--endpoints",
                endpoints or ",".join("%s://%s" % (self.scheme, m.endpoint)
                                      for m in self.members if m.alive()),
                "--dial-timeout", "2s", "--command-timeout", "5s"]
        if self.tls:
            argv += ["--cacert", self.tls["ca"]]
            if self.client_cert_auth:
                argv += ["--cert", self.tls["client_cert"],
                         "--key", self.tls["client_key"]]
        return argv + [str(a) for a in args]

    def ctl(self, *args, endpoints=None, input=None):
        """Runs etcdctl (API v3) against the live members; returns its
        stdout, raising CalledProcessError with its stderr on failure."""
        env = dict(os.environ, ETCDCTL_API="3")
        r = subprocess.run(self.ctl_argv(*args, endpoints=endpoints), env=env,
                           input=input, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout, r.stderr)
        return r.stdout

    def ctl_ok(self, *args):
        try:
            self.ctl(*args)
            return True
        except subprocess.CalledProcessError:
            return False

    def get(self, key):
        """The value of |key| as text, or None when it does not exist."""
        out = self.ctl("get", key, "--print-value-only")
        return out[:-1] if out.endswith("\n") else (out or None)

    def kill(self, i):
        """SIGKILLs member |i| (its data stays)."""
        m = self.members[i]
        if m.alive():
            m.proc.kill()

    def close(self):
        for m in self.members:
            if m.proc is not None and m.proc.p.poll() is None:
                m.proc.kill()
        for m in self.members:
            shutil.rmtree(m.data_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
