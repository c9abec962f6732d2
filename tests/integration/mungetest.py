"""A private munged for the tests: its own key, socket, state and log under
a directory of the test's, started and stopped by pid. A second munged may
share the first one's key (as every node of a cluster does), so that a test
can stop the daemon side's munged and keep the clients'.

Also the users the MUNGE tests act as (setpriv), and skip() for a machine
where the tests cannot run."""

import hashlib
import os
import shutil
import subprocess
import tempfile

import rdzvtest as rt

# Two users and an admin who belongs to ADMIN_GROUP through the gid the
# credential carries (setpriv --regid). Debian's base system has them all.
USER_A = ("daemon", 1, 1)
USER_B = ("nobody", 65534, 65534)
ADMIN = ("bin", 2, 50)
ADMIN_GROUP = "staff"


def missing():
    """Why the MUNGE tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: munged with a private key, setpriv to other uids"
    for p in ("munged", "mungekey", "munge", "setpriv"):
        if shutil.which(p) is None and not os.path.exists("/usr/sbin/" + p):
            return "%s is not installed (Debian's munge, util-linux)" % p
    out = subprocess.run([rt.build_path("daemon", "rdzvd"), "--help"],
                         capture_output=True, text=True).stdout
    if "--auth" not in out:
        return "rdzvd has no --auth"
    r = subprocess.run([rt.build_path("daemon", "rdzvd"), "--config", "/dev/null",
                        "--auth", "munge", "--check-config"],
                       capture_output=True, text=True)
    if "built without MUNGE" in r.stderr:
        return "rdzvd was built without MUNGE (libmunge-dev)"
    return None


def which(p):
    return shutil.which(p) or "/usr/sbin/" + p


def workdir():
    """A directory every uid may traverse (pytest's tmp_path is root's
    alone), removed by the caller."""
    d = tempfile.mkdtemp(prefix="rdzv-munge-")
    os.chmod(d, 0o755)
    return d


class Munged:
    """munged on DIR/NAME/munge.sock with the key |key| (a new one when
    None). stop() ends it by pid."""

    def __init__(self, d, name="munge", key=None):
        self.dir = os.path.join(d, name)
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "munge.sock")
        self.key = key or os.path.join(self.dir, "munge.key")
        if key is None:
            subprocess.run([which("mungekey"), "--create", "--keyfile", self.key],
                           check=True, capture_output=True)
            os.chmod(self.key, 0o400)
        self.start()

    def start(self):
        self.proc = rt.Proc([which("munged"), "--foreground", "--force",
                             "--socket", self.socket, "--key-file", self.key,
                             "--pid-file", os.path.join(self.dir, "munged.pid"),
                             "--log-file", os.path.join(self.dir, "munged.log"),
                             "--seed-file", os.path.join(self.dir, "seed")])
        rt.wait_for(lambda: os.path.exists(self.socket) or self.proc.p.poll() is not None,
                    10, 0.05, "munged's socket")
        if self.proc.p.poll() is not None:
            raise RuntimeError("munged exited %s:\n%s" % (self.proc.p.returncode,
                                                          self.proc.output()))

    def restart(self):
        """Stops munged and starts it again on the same socket and key: its
        replay cache, which lives in its memory, is gone."""
        self.stop()
        self.start()

    def stop(self):
        self.proc.stop()
        # munged removes its socket as it exits; a killed one leaves it.
        if os.path.exists(self.socket):
            os.unlink(self.socket)


def as_user(user, argv):
    """argv run as |user| (name, uid, gid) with no supplementary groups."""
    _, uid, gid = user
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups"] + [
        str(a) for a in argv]


def payload(path, body=b""):
    """What rdzv's clients put in a credential's payload (credbind.h):
    the method's path and a SHA-256 digest of the request's bytes."""
    return "%s sha256=%s" % (path, hashlib.sha256(body).hexdigest())


def cred(user, socket, path, body=b""):
    """A credential of |user| bound to one request, from the munge tool."""
    return subprocess.run(as_user(user, [which("munge"), "-S", socket, "-s",
                                         payload(path, body)]),
                          capture_output=True, text=True, check=True).stdout.strip()
