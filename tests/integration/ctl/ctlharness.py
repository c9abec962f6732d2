"""Shared pieces of rdzvctl's tests: running the real rdzvctl against a
private rdzvd, a fixed clock for golden output, golden files, and client
certificates for permission tests.

Golden output: RDZVCTL_TEST_NOW_MS makes rdzvctl take every instant rdzvd
sends as 90 s before that "now" and every remaining time as its full
timeout (docs/RDZVCTL.md), and TZ=UTC fixes the clock's rendering; the
tests fix hostnames, addresses and ports, and start a fresh rdzvd so node
ids are the same on every run. RDZV_UPDATE_GOLDEN=1 rewrites the files
instead of comparing (then review the diff).
"""

import difflib
import os
import subprocess
import time

import rdzvtest as rt

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
RDZVCTL = rt.build_path("client", "ctl", "rdzvctl")
AGENT = rt.build_path("client", "agent", "rdzv-agent")

# 2024-01-01 00:01:30 UTC: rdzvd's instants show as 00:00:00, 1m30s ago.
FIXED_NOW_MS = 1704067290000


def fixed_env():
    return {"TZ": "UTC", "RDZVCTL_TEST_NOW_MS": str(FIXED_NOW_MS)}


def ctl(server, *args, env=None, timeout=30, fixed=True, tls=None):
    """Runs rdzvctl --server SERVER ARGS; returns CompletedProcess (text).
    |tls|: a dict with ca, cert, key paths for --tls-*."""
    full_env = dict(os.environ)
    for k in ("RDZV_SERVER", "RDZV_TLS_CA", "RDZV_TLS_CERT", "RDZV_TLS_KEY",
              "RDZVCTL_TEST_NOW_MS"):
        full_env.pop(k, None)
    if fixed:
        full_env.update(fixed_env())
    if env:
        full_env.update(env)
    argv = [RDZVCTL]
    if server is not None:
        argv += ["--server", server]
    if tls:
        argv += ["--tls-ca", tls["ca"]]
        if tls.get("cert"):
            argv += ["--tls-cert", tls["cert"], "--tls-key", tls["key"]]
    argv += [str(a) for a in args]
    return subprocess.run(argv, capture_output=True, text=True, env=full_env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def check(cp, code=0):
    """Asserts rdzvctl's exit status, showing its output when it differs."""
    assert cp.returncode == code, "exit %d (wanted %d)\nstdout:\n%s\nstderr:\n%s" % (
        cp.returncode, code, cp.stdout, cp.stderr)
    return cp


def golden(name, text):
    """Compares |text| with golden/NAME, or writes it with
    RDZV_UPDATE_GOLDEN=1."""
    path = os.path.join(GOLDEN, name)
    if os.environ.get("RDZV_UPDATE_GOLDEN") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return
    assert os.path.exists(path), "no golden file %s (RDZV_UPDATE_GOLDEN=1 makes it)" % path
    with open(path) as f:
        want = f.read()
    if text != want:
        diff = "".join(difflib.unified_diff(
            want.splitlines(True), text.splitlines(True),
            "golden/" + name, "rdzvctl output"))
        raise AssertionError("output differs from golden/%s:\n%s" % (name, diff))


def client_cert(certs, d, cn):
    """A client certificate CN=|cn| signed by make_certs' CA; returns a dict
    with ca, cert, key paths (for ctl(tls=...)) and grpc credentials."""
    import grpc
    key, csr, crt = (os.path.join(str(d), cn + ext) for ext in (".key", ".csr", ".pem"))
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn],
                 ["x509", "-req", "-in", csr, "-CA", certs["ca"], "-CAkey", certs["ca_key"],
                  "-CAcreateserial", "-out", crt, "-days", "2",
                  "-extfile", os.path.join(str(d), "client.ext")]):
        subprocess.run(["openssl"] + args, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return {"ca": certs["ca"], "cert": crt, "key": key, "identity": "CN=" + cn,
            "creds": grpc.ssl_channel_credentials(
                root_certificates=rt.read(certs["ca"]), private_key=rt.read(key),
                certificate_chain=rt.read(crt))}


def wait_disconnected(control, rdzv_id, timeout=10):
    """Waits until rdzvd shows no node of the job as connected (streams of
    an ended job close just after the end is sent)."""
    def done():
        job = control.get_job(rdzv_id)
        return all(not n.connected for n in job.nodes) and job
    return rt.wait_for(done, timeout, what="the nodes of %s to disconnect" % rdzv_id)


def wait_job(control, rdzv_id, pred, timeout=10, what="job state"):
    return rt.wait_for(lambda: (lambda j: pred(j) and j)(control.get_job(rdzv_id)),
                       timeout, what=what)


def elapsed(t0):
    return time.monotonic() - t0
