"""rdzvd's transport-level behaviour seen from a gRPC implementation this
project did not write (Debian's grpcio): Health and ServerInfo over
cleartext loopback, TLS, mTLS and unix sockets; command line and config
file handling (SPEC §10, §11, §13)."""

import grp
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess

import grpc
import pytest

import rdzvnode
import rdzvtest as rt

pb = rt.protos()
RDZVD = rt.build_path("daemon", "rdzvd")


def health_check(channel, service="", timeout=5):
    call = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=pb.health.HealthCheckRequest.SerializeToString,
        response_deserializer=pb.health.HealthCheckResponse.FromString)
    return call(pb.health.HealthCheckRequest(service=service), timeout=timeout)


def server_info(channel, timeout=5):
    call = channel.unary_unary(
        "/rdzv.v1.Control/ServerInfo",
        request_serializer=pb.control.ServerInfoRequest.SerializeToString,
        response_deserializer=pb.control.ServerInfoResponse.FromString)
    return call(pb.control.ServerInfoRequest(), timeout=timeout)


SERVING = pb.health.HealthCheckResponse.SERVING
NOT_SERVING = pb.health.HealthCheckResponse.NOT_SERVING


def test_cleartext_health_and_server_info(tmp_path):
    with rt.Daemon(tmp_path) as d:
        with grpc.insecure_channel(d.addr) as ch:
            assert health_check(ch).status == SERVING
            assert health_check(ch, "rdzv.v1.Rendezvous").status == SERVING
            with pytest.raises(grpc.RpcError) as e:
                health_check(ch, "no.such.Service")
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            assert "no.such.Service" in e.value.details()

            info = server_info(ch)
            assert info.version
            assert info.identity == "anonymous"
            assert info.pid == d.pid
            assert info.database == d.db
            assert info.connections >= 1
            assert any(l.startswith("127.0.0.1:%d" % d.port) for l in info.listeners)
        assert d.stop() == 0


def test_unknown_method_is_unimplemented(tmp_path):
    with rt.Daemon(tmp_path) as d, grpc.insecure_channel(d.addr) as ch:
        call = ch.unary_unary("/rdzv.v1.Control/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as e:
            call(b"", timeout=5)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert health_check(ch).status == SERVING


def test_tls(tmp_path):
    c = rt.make_certs(tmp_path)
    args = ["--tls-cert", c["server_cert"], "--tls-key", c["server_key"]]
    with rt.Daemon(tmp_path, args) as d:
        creds = grpc.ssl_channel_credentials(root_certificates=rt.read(c["ca"]))
        with grpc.secure_channel(d.addr, creds) as ch:
            assert health_check(ch).status == SERVING
            assert server_info(ch).identity == "anonymous"
        # A client that trusts another CA cannot talk to it.
        bad = grpc.ssl_channel_credentials(root_certificates=rt.read(c["other_ca"]))
        with grpc.secure_channel(d.addr, bad) as ch:
            with pytest.raises(grpc.RpcError) as e:
                health_check(ch, timeout=3)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        # Cleartext to a TLS listener fails; the daemon keeps serving.
        with grpc.insecure_channel(d.addr) as ch:
            with pytest.raises(grpc.RpcError):
                health_check(ch, timeout=3)
        with grpc.secure_channel(d.addr, creds) as ch:
            assert health_check(ch).status == SERVING


def test_mtls_identity_is_certificate_subject(tmp_path):
    c = rt.make_certs(tmp_path)
    args = ["--tls-cert", c["server_cert"], "--tls-key", c["server_key"],
            "--tls-ca", c["ca"]]
    with rt.Daemon(tmp_path, args) as d:
        creds = grpc.ssl_channel_credentials(
            root_certificates=rt.read(c["ca"]),
            private_key=rt.read(c["client_key"]),
            certificate_chain=rt.read(c["client_cert"]))
        with grpc.secure_channel(d.addr, creds) as ch:
            info = server_info(ch)
            assert info.identity == "CN=node-7,O=rdzv-test"
            assert any("(mTLS)" in l for l in info.listeners)
        # Without a client certificate the handshake is refused.
        nocert = grpc.ssl_channel_credentials(root_certificates=rt.read(c["ca"]))
        with grpc.secure_channel(d.addr, nocert) as ch:
            with pytest.raises(grpc.RpcError) as e:
                health_check(ch, timeout=3)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_unix_socket_identity_is_uid(tmp_path):
    sock = os.path.join(str(tmp_path), "rdzvd.sock")
    with rt.Daemon(tmp_path, listen="unix:" + sock) as d:
        assert d.addr == "unix:" + sock
        with grpc.insecure_channel("unix:" + sock) as ch:
            assert server_info(ch).identity == "uid:%d" % os.getuid()


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def nobody_connects(sock):
    """Whether uid 65534 may connect to the unix socket |sock|."""
    r = subprocess.run(NOBODY + [
        "/usr/bin/python3", "-c", "import socket, sys; "
        "socket.socket(socket.AF_UNIX).connect(sys.argv[1])", sock],
        capture_output=True, text=True, timeout=20)
    return r.returncode == 0


@pytest.mark.parametrize("perms", ["mode", "group"])
def test_unix_socket_mode_and_group_let_another_uid_in(tmp_path, perms):
    """The unix socket's mode follows the umask (0755 here) unless
    unix-mode says otherwise: with 0666, or 0660 and unix-group nogroup,
    another uid (nobody, under setpriv) connects and is uid:65534. It gets
    PERMISSION_DENIED closing or aborting a job uid 0 made, and OK aborting
    its own (SPEC §11). The socket's directory is one nobody may enter."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client as uid 65534 (setpriv)")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to run a client as another uid")
    group = grp.getgrgid(65534).gr_name
    args, mode = ((["--unix-mode", "0666"], 0o666) if perms == "mode" else
                  (["--unix-mode", "0660", "--unix-group", group], 0o660))
    umask = ["/bin/sh", "-c", 'umask 022 && exec "$0" "$@"']
    scratch = rt.tmpdir()
    try:
        os.chmod(scratch, 0o755)
        sock = os.path.join(scratch, "rdzvd.sock")
        with rt.Daemon(tmp_path, listen="unix:" + sock, wrapper=umask) as d:
            assert stat.S_IMODE(os.stat(sock).st_mode) == 0o755
            assert not nobody_connects(sock)
            assert d.stop() == 0
        with rt.Daemon(tmp_path, args, listen="unix:" + sock,
                       wrapper=umask) as d:
            st = os.stat(sock)
            assert stat.S_IMODE(st.st_mode) == mode
            d.wait_line(r"listening on unix:%s \(mode %04o, group %s\)" % (
                re.escape(sock), mode, group if perms == "group" else
                grp.getgrgid(0).gr_name))
            root = rdzvnode.Node("unix:" + sock, name="root-node")
            root.join("root-job", min_nodes=2, max_nodes=2)
            client, pydir = rt.copy_for_others(scratch, os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "uidclient.py"),
                rt.build_path("tests", "py"))
            r = subprocess.run(NOBODY + [
                "/usr/bin/python3", client, pydir, sock, "root-job",
                "own-job"],
                capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            print(out)
            assert out["identity"] == "uid:65534"
            for action in ("close_other", "abort_other"):
                code, details = out[action]
                assert code == "PERMISSION_DENIED", out
                assert "belongs to uid:0" in details, out
            assert out["join_own"] == "accepted", out
            assert out["abort_own"] == ["OK", ""], out
            with rdzvnode.Control("unix:" + sock) as ctl:
                assert ctl.get_job("root-job").state == \
                    pb.types.JOB_STATE_WAITING
                own = ctl.get_job("own-job")
                assert own.state == pb.types.JOB_STATE_FAILED
                assert own.owner == "uid:65534"
            root.close()
            assert d.stop() == 0, d.output()
    finally:
        shutil.rmtree(scratch)


def test_systemd_readiness_and_stopping(tmp_path):
    """As a Type=notify service: READY=1 once it serves, STOPPING=1 on
    SIGTERM, on the datagram socket systemd names in NOTIFY_SOCKET."""
    with open(rt.build_path("buildconf.h")) as f:
        if "HAVE_LIBSYSTEMD 1" not in f.read():
            pytest.skip("built without libsystemd: no readiness notification")
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sd:
        sd.bind(path)
        sd.settimeout(10)
        with rt.Daemon(tmp_path, env={"NOTIFY_SOCKET": path}) as d:
            assert b"READY=1" in sd.recv(4096).split(b"\n")
            with grpc.insecure_channel(d.addr) as ch:
                assert health_check(ch).status == SERVING
            d.signal(signal.SIGTERM)
            assert b"STOPPING=1" in sd.recv(4096).split(b"\n")
            assert d.wait() == 0


def test_health_watch_sees_shutdown(tmp_path):
    d = rt.Daemon(tmp_path)
    with d, grpc.insecure_channel(d.addr) as ch:
        watch = ch.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=pb.health.HealthCheckRequest.SerializeToString,
            response_deserializer=pb.health.HealthCheckResponse.FromString)
        it = watch(pb.health.HealthCheckRequest(service=""), timeout=20)
        assert next(it).status == SERVING
        d.signal(signal.SIGTERM)
        assert next(it).status == NOT_SERVING
        with pytest.raises(grpc.RpcError) as e:
            next(it)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert d.wait(10) == 0
        assert "shutting down" in d.output()


def run(*args, **kw):
    return subprocess.run([RDZVD] + list(args), capture_output=True, text=True,
                          timeout=20, **kw)


def test_cleartext_on_network_address_needs_insecure():
    r = run("--listen", "0.0.0.0:29400", "--check-config")
    assert r.returncode == 2
    assert "--listen 0.0.0.0:29400" in r.stderr and "--insecure" in r.stderr
    r = run("--listen", "0.0.0.0:29400", "--insecure", "--check-config")
    assert r.returncode == 0, r.stderr
    assert "listen = 0.0.0.0:29400" in r.stdout


def test_config_file_and_flag_precedence(tmp_path):
    conf = tmp_path / "rdzvd.conf"
    conf.write_text("# comment\nlisten = 127.0.0.1:4000\nlog-level = debug\n"
                    "admin = CN=ops\nmax-message = 8M\nretention = 2d\n")
    r = run("--config", str(conf), "--check-config")
    assert r.returncode == 0, r.stderr
    assert "listen = 127.0.0.1:4000" in r.stdout
    assert "max-message = 8388608" in r.stdout
    assert "retention = 172800s" in r.stdout
    assert "admin = CN=ops" in r.stdout
    r = run("--config", str(conf), "--listen", "unix:/tmp/x.sock",
            "--log-level", "warn", "--check-config")
    assert r.returncode == 0, r.stderr
    assert "listen = unix:/tmp/x.sock" in r.stdout
    assert "127.0.0.1:4000" not in r.stdout
    assert "log-level = warn" in r.stdout
    r = run("--config", str(conf), "--unix-mode", "660", "--unix-group", "0",
            "--preface-timeout", "5s", "--idle-timeout", "1h", "--check-config")
    assert r.returncode == 0, r.stderr
    for line in ("unix-mode = 0660", "unix-group = 0",
                 "preface-timeout = 5000ms", "idle-timeout = 3600000ms"):
        assert line in r.stdout.splitlines(), r.stdout


@pytest.mark.parametrize("text,needle", [
    ("listne = 1.2.3.4\n", "unknown setting 'listne'"),
    ("max-streams = lots\n", "max-streams: invalid value 'lots'"),
    ("listen = [::1\n", "missing ']'"),
    ("[section]\nlisten = 127.0.0.1\n", "sections are not used"),
    # Values that would work against their purpose are out of bounds.
    ("keepalive = 0\n", "keepalive: 0 is below the minimum of 100ms"),
    ("keepalive = 1ms\n", "keepalive: 1ms is below the minimum of 100ms"),
    ("max-message = 5G\n", "max-message: 5G is above the maximum of 2147483647 bytes"),
    ("max-join-timeout = 49d\n", "max-join-timeout: 49d is above the maximum"),
    ("max-jobs-per-identity = 0\n", "max-jobs-per-identity: invalid value '0'"),
    ("preface-timeout = 100ms\n", "preface-timeout: 100ms is below the minimum of 1s"),
    ("idle-timeout = 30d\n", "idle-timeout: 30d is above the maximum of 604800s"),
    ("unix-mode = 0500\n", "unix-mode: 0500 is below the minimum of 0600"),
    ("unix-mode = 01777\n", "unix-mode: 01777 is above the maximum of 0777"),
    ("unix-mode = rw\n", "unix-mode: invalid value 'rw'"),
    ("unix-group = no-such-group\n", "unix-group: no group 'no-such-group'"),
    ("leader-lease = 1s\n", "leader-lease: 1s is below the minimum of 2s"),
    ("leader-lease = 1h\n", "leader-lease: 1h is above the maximum of 600s"),
])
def test_bad_config_file_names_the_problem(tmp_path, text, needle):
    conf = tmp_path / "rdzvd.conf"
    conf.write_text("log-level = info\n" + text)
    r = run("--config", str(conf), "--check-config")
    assert r.returncode == 2
    assert needle in r.stderr
    assert str(conf) + ":" in r.stderr


def test_bad_command_line():
    r = run("--no-such-flag")
    assert r.returncode == 2 and r.stderr == (
        "rdzvd: unknown option '--no-such-flag'; see 'rdzvd --help'\n"), r.stderr
    r = run("--config", "/nonexistent/rdzvd.conf", "--check-config")
    assert r.returncode == 2 and "/nonexistent/rdzvd.conf" in r.stderr
    r = run("--tls-cert", "/nonexistent.pem", "--check-config")
    assert r.returncode == 2 and "--tls-key" in r.stderr


def test_bad_tls_files_refuse_to_start(tmp_path):
    c = rt.make_certs(tmp_path)
    r = run("--listen", "127.0.0.1:0", "--db", str(tmp_path / "x.db"),
            "--tls-cert", c["server_cert"], "--tls-key", str(tmp_path / "missing.key"))
    assert r.returncode != 0
    assert "missing.key" in r.stderr


def test_database_in_a_directory_rdzvd_cannot_write(tmp_path):
    """A database rdzvd may write, with its lock file, in a directory it
    may not write: SQLite cannot make the write-ahead log beside it, and
    rdzvd says so, naming the directory, rather than that the database
    "cannot be read" and should be moved aside. Needs root (to run rdzvd
    as nobody over a root-owned directory)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run rdzvd as nobody")
    with rt.Daemon(tmp_path) as d:
        assert d.stop() == 0
    scratch = rt.tmpdir()
    try:
        os.chmod(scratch, 0o755)
        db = os.path.join(scratch, "rdzv.db")
        shutil.copy(d.db, db)
        open(db + ".lock", "w").close()
        for f in (db, db + ".lock"):
            os.chown(f, 65534, 65534)
            os.chmod(f, 0o600)
        r = subprocess.run(NOBODY + [RDZVD, "--db", db, "--listen",
                                     "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=20)
    finally:
        shutil.rmtree(scratch)
    assert r.returncode != 0, r.stderr
    assert "its directory %s is not writable by rdzvd (uid 65534)" % scratch \
        in r.stderr, r.stderr
    assert "cannot be read" not in r.stderr and "move it aside" not in r.stderr
    assert "ready (" not in r.stderr, r.stderr


def test_read_only_database_is_refused_at_start(tmp_path):
    """A database rdzvd may read but not write is refused before rdzvd
    reports ready, with a message that names it; otherwise rdzvd would
    look ready and die at its first commit (a crash loop under systemd).
    As root, whom file modes do not stop, rdzvd runs as nobody over a
    root-owned file in a directory nobody may write (for its lock file)."""
    with rt.Daemon(tmp_path) as d:
        assert d.stop() == 0
    db = d.db
    prefix, scratch = [], None
    if os.geteuid() == 0:
        scratch = rt.tmpdir()
        os.chmod(scratch, 0o777)
        db = os.path.join(scratch, "rdzv.db")
        shutil.copy(d.db, db)
        os.chmod(db, 0o644)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        os.chmod(db, 0o444)
    try:
        r = subprocess.run(prefix + [RDZVD, "--db", db, "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=20)
    finally:
        if scratch:
            shutil.rmtree(scratch)
    assert r.returncode != 0, r.stderr
    assert "read-only" in r.stderr and db in r.stderr, r.stderr
    assert "ready (" not in r.stderr, r.stderr
