"""Shared helpers for rdzv's end-to-end tests.

Run with Debian's /usr/bin/python3 (grpcio, protobuf, pytest). meson passes
RDZV_BUILD_ROOT and RDZV_SOURCE_ROOT. Nothing here sleeps and hopes: every
wait polls a condition with a deadline.
"""

import fcntl
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SOURCE_ROOT = os.environ.get(
    "RDZV_SOURCE_ROOT",
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_ROOT = os.environ.get("RDZV_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build"))

PROTOS = [
    "rdzv/v1/types.proto",
    "rdzv/v1/rendezvous.proto",
    "rdzv/v1/control.proto",
    "grpc/health/v1/health.proto",
]


def build_path(*parts):
    """Path of a built program or file under the build directory."""
    return os.path.join(BUILD_ROOT, *parts)


def _generate_protos():
    """Generates Python modules from proto/ into the build directory (never
    into the source tree), once per build, under a file lock so parallel
    tests do not race."""
    out = build_path("tests", "py")
    os.makedirs(out, exist_ok=True)
    stamp = os.path.join(out, ".stamp")
    srcs = [os.path.join(SOURCE_ROOT, "proto", p) for p in PROTOS]
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        newest = max(os.path.getmtime(s) for s in srcs)
        if not os.path.exists(stamp) or os.path.getmtime(stamp) < newest:
            subprocess.run(
                [sys.executable, "-m", "grpc_tools.protoc",
                 "-I", os.path.join(SOURCE_ROOT, "proto"),
                 "--python_out=" + out] + srcs,
                check=True)
            with open(stamp, "w"):
                pass
    if out not in sys.path:
        sys.path.insert(0, out)
    # The generated modules are rdzv.v1; python/rdzv (this tree's or an
    # installed python3-rdzv) is the package rdzv, whose __init__ adds every
    # rdzv folder on sys.path to its own. One imported before this folder
    # was on sys.path gets it here.
    pkg = sys.modules.get("rdzv")
    gen = os.path.join(out, "rdzv")
    if pkg is not None and hasattr(pkg, "__path__") and gen not in list(pkg.__path__):
        pkg.__path__.append(gen)


def protos():
    """Returns a namespace with the generated message modules:
    types, rendezvous, control, health."""
    _generate_protos()
    import importlib.util
    from rdzv.v1 import types_pb2, rendezvous_pb2, control_pb2
    # grpc/health/v1 would shadow grpcio's own "grpc" package: load the
    # generated module from its file instead.
    path = build_path("tests", "py", "grpc", "health", "v1", "health_pb2.py")
    name = "rdzv_health_pb2"
    health_pb2 = sys.modules.get(name)
    if health_pb2 is None:
        spec = importlib.util.spec_from_file_location(name, path)
        health_pb2 = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(health_pb2)
        sys.modules[name] = health_pb2

    class NS:
        types = types_pb2
        rendezvous = rendezvous_pb2
        control = control_pb2
        health = health_pb2
    return NS


def wait_for(cond, timeout, interval=0.02, what="condition"):
    """Polls cond() until it returns a true value, which is returned; raises
    TimeoutError naming |what| after |timeout| seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Proc:
    """A program under test. Its stdout and stderr are collected by reader
    threads (merged into .lines) so a test can wait for a line. Its stdin
    is /dev/null unless |stdin| says otherwise (subprocess.PIPE)."""

    def __init__(self, argv, env=None, cwd=None, stdin=subprocess.DEVNULL):
        self.argv = [str(a) for a in argv]
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        self.p = subprocess.Popen(
            self.argv, stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=full_env, cwd=cwd,
            start_new_session=True)
        self.pid = self.p.pid
        self.lines = []
        self.out_lines = []
        self.err_lines = []
        self._cv = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read, args=(self.p.stdout, self.out_lines), daemon=True),
            threading.Thread(target=self._read, args=(self.p.stderr, self.err_lines), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, f, dest):
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                dest.append(line)
                self.lines.append(line)
                self._cv.notify_all()
        f.close()

    def wait_line(self, pattern, timeout=10.0, start=0):
        """Waits for an output line (stdout or stderr) matching the regular
        expression |pattern| at or after index |start|; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cv:
            i = start
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or (self.p.poll() is not None and i >= len(self.lines)
                                 and not any(t.is_alive() for t in self._threads)):
                    raise TimeoutError(
                        "no line matching %r from %s within %.1f s (exit %s); output:\n%s"
                        % (pattern, os.path.basename(self.argv[0]), timeout,
                           self.p.poll(), "\n".join(self.lines[-40:])))
                self._cv.wait(min(left, 0.1))

    def mark(self):
        """The index of the next line, for wait_line's |start|."""
        with self._cv:
            return len(self.lines)

    def output(self):
        with self._cv:
            return "\n".join(self.lines)

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout=10.0):
        """Waits for exit; returns the exit status (negative for a signal)."""
        rc = self.p.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=2)
        return rc

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after |timeout|; returns the exit status."""
        if self.p.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                return self.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
        return self.wait(timeout)

    def kill(self):
        self.signal(signal.SIGKILL)
        return self.wait(10)

    def rss_kib(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS for pid %d" % self.pid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.signal(signal.SIGKILL)
            self.wait(10)


def quiet_ports(n):
    """|n| distinct loopback ports that nothing listens on, below
    net.ipv4.ip_local_port_range: the kernel gives the range's ports to
    outgoing connections (any test's, on a busy machine), which could take
    one between this check and the daemon's bind. Another test may still
    pick the same port by chance: a caller that can tries again then."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    ports = []
    while len(ports) < n:
        port = rng.randrange(max(1024, low - 20000), low)
        if port in ports:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        ports.append(port)
    return ports


def listening(proc, timeout=10.0):
    """Waits for 'listening on HOST:PORT' and returns 'HOST:PORT' (for IPv6,
    '[ADDR]:PORT'; for unix sockets 'unix:PATH')."""
    m = proc.wait_line(r"listening on (\S+)", timeout)
    return m.group(1)


class Daemon(Proc):
    """rdzvd on a private port and database (or |store|, a --store spec such
    as an etcd prefix). Extra arguments are appended; |wrapper| is a command
    line rdzvd runs under (it must exec rdzvd)."""

    def __init__(self, tmpdir, args=(), listen="127.0.0.1:0", env=None, db=None,
                 wrapper=(), store=None):
        self.tmpdir = str(tmpdir)
        self.db = db or os.path.join(self.tmpdir, "rdzv.db")
        self.store = store
        where = ["--store", store] if store else ["--db", self.db]
        argv = list(wrapper) + [build_path("daemon", "rdzvd")] + where + [
            "--log-level", "debug"]
        if listen:
            argv += ["--listen", listen]
        argv += list(args)
        super().__init__(argv, env=env)
        self.addr = listening(self)

    @property
    def port(self):
        return int(self.addr.rsplit(":", 1)[1])


def make_certs(d):
    """Makes a CA, a server certificate for 127.0.0.1/localhost and a client
    certificate (CN=node-7,O=rdzv-test) under directory |d| with the openssl
    CLI. Returns a dict of paths: ca, ca_key, server_cert, server_key,
    client_cert, client_key, other_ca (an unrelated CA)."""
    d = str(d)
    p = {k: os.path.join(d, v) for k, v in {
        "ca": "ca.pem", "ca_key": "ca.key",
        "server_cert": "server.pem", "server_key": "server.key",
        "client_cert": "client.pem", "client_key": "client.key",
        "other_ca": "other-ca.pem", "other_ca_key": "other-ca.key",
    }.items()}

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for ca, key, cn in ((p["ca"], p["ca_key"], "rdzv test CA"),
                        (p["other_ca"], p["other_ca_key"], "unrelated CA")):
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key, "-out", ca, "-days", "2", "-subj", "/CN=" + cn)

    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n")
    cext = os.path.join(d, "client.ext")
    with open(cext, "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for cert, key, subj, extfile in (
            (p["server_cert"], p["server_key"], "/CN=localhost", ext),
            (p["client_cert"], p["client_key"], "/O=rdzv-test/CN=node-7", cext)):
        csr = cert + ".csr"
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", csr, "-subj", subj)
        ossl("x509", "-req", "-in", csr, "-CA", p["ca"], "-CAkey", p["ca_key"],
             "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", extfile)
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tmpdir():
    """A fresh temporary directory for a test outside pytest's fixtures."""
    return tempfile.mkdtemp(prefix="rdzv-test-")


def copy_for_others(d, *paths):
    """Copies of |paths| (files or folders) into directory |d|, which every
    uid may enter: for a program a test runs as another uid, since the
    checkout itself may be in a folder only its owner can enter (a clone
    under `mktemp -d`). Returns the copies' paths."""
    import shutil
    os.chmod(d, 0o755)
    out = []
    for p in paths:
        dst = os.path.join(d, os.path.basename(p.rstrip("/")))
        if os.path.isdir(p):
            shutil.copytree(p, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(p, dst)
        out.append(dst)
    return out
