"""The Debian packages, built from this source tree, installed on this
machine, run, and purged.

dpkg-buildpackage builds rdzvd and rdzv-agent in a temporary copy of the
tree (tests and benchmarks off, as debian/rules says), and lintian checks
them. They are then installed with dpkg -i onto this machine's root as a
private overlay shows it: an overlayfs over / in a mount namespace of the
test's own, whose changes go to a tmpfs. dpkg, the maintainer scripts,
systemd-sysusers and the programs all run there, in a chroot, on the real
system's files, dpkg database and users; nothing they do reaches the real
root. A test that stops midway therefore leaves nothing to purge, and while
it runs no other rdzvd on this machine (other tests, other checkouts) finds
an /etc/rdzv/rdzvd.conf it did not expect. What the purge leaves is read
from the overlay's upper layer: every file the packages created or changed.

Needs root (dpkg -i, mounts), dpkg-buildpackage and the build dependencies
(deploy/install-deps.sh test installs them), and the right to mount (it
skips, saying so, in a container without CAP_SYS_ADMIN). It takes about
a minute on two cores, most of it the build (docs/TESTING.md).
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

import installed
import rdzvtest

PACKAGES = ["rdzvd", "rdzv-agent", "python3-rdzv"]

# The package's directories (debian/rules: prefix /usr, the unit in
# Debian 12's /lib/systemd/system).
DEB_DIRS = {
    "prefix": "/usr", "bindir": "/usr/bin", "sbindir": "/usr/sbin",
    "sysconfdir": "/etc", "datadir": "/usr/share",
    "mandir": "/usr/share/man", "unitdir": "/lib/systemd/system",
    "sysusersdir": "/usr/lib/sysusers.d",
    "pythondir": "/usr/lib/python3/dist-packages",
    "libexecdir": "/usr/libexec",
    # debhelper's meson build: lib/<multiarch triplet>.
    "libdir": "/usr/lib/" + subprocess.run(
        ["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
        text=True).stdout.strip(),
}

# Runs in the new mount namespace: an overlay of / with its upper layer on
# a tmpfs, the kernel's file systems, a private /run and /tmp, the packages
# on /mnt; then a chroot into it that lives until its stdin closes (when
# the test ends, however it ends).
SANDBOX = r'''
set -eu
t=$1 debs=$2
mount -t tmpfs -o mode=0700 rdzv-pkg-test "$t/layer"
mkdir "$t/layer/upper" "$t/layer/work"
mount -t overlay overlay \
    -o "lowerdir=/,upperdir=$t/layer/upper,workdir=$t/layer/work" "$t/root"
mount -t proc proc "$t/root/proc"
mount --rbind /dev "$t/root/dev"
mount --rbind /sys "$t/root/sys"
mount -t tmpfs tmpfs "$t/root/run"
mount -t tmpfs -o mode=1777 tmpfs "$t/root/tmp"
mount --bind "$debs" "$t/root/mnt"
echo ready
exec chroot "$t/root" /bin/sh -c 'read x; exit 0'
'''

# The environment of everything that runs in the sandbox.
SANDBOX_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "HOME": "/root", "DEBIAN_FRONTEND": "noninteractive"}


class Sandbox:
    """This machine's root through a private overlay (see the top)."""

    def __init__(self, tmp, debs):
        self.tmp = tmp
        for d in ("layer", "root"):
            os.mkdir(os.path.join(tmp, d))
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             SANDBOX, "sh", tmp, debs],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=SANDBOX_ENV)
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            err = self.holder.communicate(timeout=10)[1]
            raise OSError(err.strip() or "the sandbox did not start")
        self.upper = os.path.join(tmp, "layer", "upper")

    def argv(self, cmd, root=True):
        """nsenter into the sandbox's mount namespace (and, with |root|,
        its chroot) to run the shell command |cmd|."""
        return (["nsenter", "-t", str(self.holder.pid), "-m"] +
                (["-r", "-w"] if root else []) + ["sh", "-c", cmd])

    def run(self, cmd, check=True, root=True, timeout=120):
        r = subprocess.run(self.argv(cmd, root), capture_output=True,
                           text=True, timeout=timeout, env=SANDBOX_ENV,
                           stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, "%s: exit %d\n%s%s" % (
                cmd, r.returncode, r.stdout, r.stderr)
        return r

    def exists(self, path):
        return self.run("test -e %s || test -L %s" % (path, path),
                        check=False).returncode == 0

    def close(self):
        if self.holder.poll() is None:
            self.holder.stdin.close()
            try:
                self.holder.wait(10)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait(10)


def meson_version():
    with open(os.path.join(rdzvtest.SOURCE_ROOT, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


def copy_tree(dst):
    """The source tree as git knows it (tracked files and new ones it does
    not ignore), or all of it but build folders outside a git checkout."""
    src = rdzvtest.SOURCE_ROOT
    r = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached",
                        "--others", "--exclude-standard"],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [
            n for n in names if n.startswith("build") or n == ".git" or
            os.path.exists(os.path.join(d, n, "meson-private"))])
        return
    for rel in r.stdout.decode().split("\0"):
        if rel and os.path.lexists(os.path.join(src, rel)):
            os.makedirs(os.path.join(dst, os.path.dirname(rel)),
                        exist_ok=True)
            shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel),
                         follow_symlinks=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The .changes file of a build of this tree, with its .debs beside."""
    if shutil.which("dpkg-buildpackage") is None:
        pytest.skip("dpkg-buildpackage is missing: deploy/install-deps.sh "
                    "test installs dpkg-dev and debhelper")
    top = tmp_path_factory.mktemp("deb")
    src = top / "rdzv"
    copy_tree(str(src))
    with open(src / "debian" / "changelog") as f:
        version = re.match(r"rdzv \(([^)]+)\)", f.readline()).group(1)
    assert version == meson_version(), (
        "debian/changelog is at %s, meson.build at %s: add a changelog "
        "entry (dch -v %s)" % (version, meson_version(), meson_version()))
    r = subprocess.run(["dpkg-checkbuilddeps"], cwd=src, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip("build dependencies are missing (deploy/install-deps.sh "
                    "test installs them): " + r.stderr.strip())
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d"
               % min(os.cpu_count() or 1, 4))
    for k in list(env):
        if k.startswith(("RDZV_", "MESON", "ASAN_", "UBSAN_")):
            del env[k]
    r = subprocess.run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=src,
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    changes = glob.glob(str(top / "rdzv_*.changes"))
    assert len(changes) == 1, os.listdir(top)
    return changes[0]


def deb(changes, name):
    found = glob.glob(os.path.join(os.path.dirname(changes),
                                   "%s_*.deb" % name))
    assert len(found) == 1, found
    return found[0]


def test_lintian_is_clean(built):
    if shutil.which("lintian") is None:
        pytest.skip("lintian is missing: deploy/install-deps.sh test "
                    "installs it")
    # Each tag lintian still reports is explained and overridden in debian/
    # (debian/*.lintian-overrides), so any tag shown is new.
    r = subprocess.run(["lintian", "--pedantic", "--info",
                        "--tag-display-limit", "0", built],
                       capture_output=True, text=True, timeout=300)
    tags = [l for l in r.stdout.splitlines() if re.match(r"[EWIPX]: ", l)]
    assert not tags, "\n".join(tags)


def test_packages_hold_exactly_the_expected_files(built):
    files = set()
    for name in PACKAGES:
        out = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb(built, name)],
                             capture_output=True, check=True).stdout
        listing = subprocess.run(["tar", "-t"], input=out,
                                 capture_output=True, check=True).stdout
        files |= {"/" + os.path.normpath(p.decode()) for p in
                  listing.splitlines() if not p.endswith(b"/")}
    want = {p + ".gz" if "/man/man" in p else p
            for p in installed.expected_files(DEB_DIRS)}
    # What debhelper adds to every package, and the lintian overrides.
    for name in PACKAGES:
        want |= {"/usr/share/doc/%s/copyright" % name,
                 "/usr/share/doc/%s/changelog.gz" % name}
    want.add("/usr/share/lintian/overrides/rdzvd")
    assert files == want, ("missing: %s\nunexpected: %s"
                           % (sorted(want - files), sorted(files - want)))


def dpkg_excludes_man():
    for f in glob.glob("/etc/dpkg/dpkg.cfg.d/*"):
        with open(f, errors="replace") as h:
            if re.search(r"^path-exclude=?\s*/usr/share/man", h.read(),
                         re.M):
                return True
    return False


def host_has(path):
    return os.path.lexists(path)


def test_install_run_purge(built, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("dpkg -i and the overlay need root")
    for tool in ("unshare", "nsenter", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip("%s is missing (Debian: util-linux)" % tool)
    debs = tmp_path / "debs"
    debs.mkdir()
    for name in PACKAGES:
        shutil.copy(deb(built, name), debs)
    # Not under tmp_path: pytest keeps its last directories, and the
    # namespace's mount points need not outlive the test.
    tmp = tempfile.mkdtemp(prefix="rdzv-pkg-")
    try:
        sb = Sandbox(tmp, str(debs))
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip("cannot mount a private overlay of / (needs "
                    "CAP_SYS_ADMIN and overlayfs); installing on the real "
                    "root instead would hand every other rdzvd on this "
                    "machine /etc/rdzv/rdzvd.conf: %s" % e)
    daemon = None
    try:
        for name in PACKAGES:
            r = sb.run("dpkg-query -W -f '${db:Status-Status}' %s" % name,
                       check=False)
            if r.stdout.strip() not in ("", "not-installed"):
                pytest.skip("%s is installed on this machine already" % name)
        if sb.run("getent passwd rdzv", check=False).returncode == 0:
            pytest.skip("this machine has a user rdzv already")

        sb.run("dpkg -i /mnt/rdzvd_*.deb /mnt/rdzv-agent_*.deb "
               "/mnt/python3-rdzv_*.deb",
               timeout=300)

        # The user, the unit enabled (not started: no systemd runs here,
        # and --no-start would not start it), the config as a conffile.
        pw = sb.run("getent passwd rdzv").stdout.strip().split(":")
        assert pw[5] == "/var/lib/rdzv" and pw[6].endswith("nologin"), pw
        uid = int(pw[2])
        assert uid < 1000, "rdzv is not a system user: uid %d" % uid
        link = sb.run("readlink /etc/systemd/system/multi-user.target.wants/"
                      "rdzvd.service").stdout.strip()
        assert link == "/lib/systemd/system/rdzvd.service"
        unit = sb.run("cat /lib/systemd/system/rdzvd.service").stdout
        assert re.search(r"^ExecStart=/usr/sbin/rdzvd --config "
                         r"/etc/rdzv/rdzvd.conf$", unit, re.M)
        assert "/etc/rdzv/rdzvd.conf" in sb.run(
            "dpkg-query -W -f '${Conffiles}' rdzvd").stdout
        if sb.exists("/usr/bin/systemd-analyze"):
            r = sb.run("systemd-analyze verify "
                       "/lib/systemd/system/rdzvd.service", check=False)
            assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), \
                r.stdout + r.stderr

        # rdzvd as its user reads the installed config.
        as_rdzv = ("setpriv --reuid rdzv --regid rdzv --init-groups "
                   "--inh-caps=-all ")
        r = sb.run(as_rdzv + "/usr/sbin/rdzvd --check-config")
        assert "config = /etc/rdzv/rdzvd.conf" in r.stdout
        assert "listen = 127.0.0.1:29400" in r.stdout

        # The unit's command line in the foreground, as the unit runs it
        # (its state directory made as StateDirectory= would), on a free
        # port instead of the config's.
        sb.run("install -d -o rdzv -g rdzv -m 0750 /var/lib/rdzv")
        daemon = rdzvtest.Proc(sb.argv(
            "exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "
            "STATE_DIRECTORY=/var/lib/rdzv " + as_rdzv +
            "/usr/sbin/rdzvd --config /etc/rdzv/rdzvd.conf "
            "--listen 127.0.0.1:0"), env=SANDBOX_ENV)
        addr = rdzvtest.listening(daemon, timeout=30)
        daemon.wait_line(r"ready \(version")
        with open("/proc/%d/status" % daemon.pid) as f:
            uids = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
        assert int(uids) == uid, "rdzvd runs as uid %s, not rdzv" % uids
        assert "database /var/lib/rdzv/rdzv.db" in daemon.output()

        # A one-node job through the installed agent, as an ordinary user.
        assert sb.run("command -v rdzv-agent").stdout.strip() == \
            "/usr/bin/rdzv-agent"
        r = sb.run("setpriv --reuid nobody --regid nogroup --clear-groups "
                   "/usr/bin/rdzv-agent join --server %s --id pkg-test "
                   "--nnodes 1 -- /bin/true" % addr, timeout=60)
        assert "job pkg-test closed" in r.stderr, r.stderr
        r = sb.run("rdzvctl --server %s status --all" % addr)
        assert re.search(r"^pkg-test\s+closed\s", r.stdout, re.M), r.stdout

        # The man pages and the completions where their tools look (unless
        # this machine's dpkg leaves man pages out, as slim images do).
        for args, page in (("rdzvctl", "man1/rdzvctl.1.gz"),
                           ("rdzv-agent", "man1/rdzv-agent.1.gz"),
                           ("8 rdzvd", "man8/rdzvd.8.gz"),
                           ("5 rdzvd.conf", "man5/rdzvd.conf.5.gz")):
            if dpkg_excludes_man():
                break
            assert sb.run("man -w " + args).stdout.strip() == \
                "/usr/share/man/" + page
        assert sb.exists("/usr/share/bash-completion/completions/rdzvctl")

        # torch finds the backend by its entry point (python3-rdzv).
        r = sb.run("/usr/bin/python3 -c 'from importlib.metadata import "
                   "entry_points; print([e.value for e in entry_points("
                   "group=\"torchrun.handlers\") if e.name == \"rdzv\"])'")
        assert r.stdout.strip() == "['rdzv.torchrun:handler']", r.stdout

        daemon.signal(signal.SIGTERM)
        assert daemon.wait(30) == 0, daemon.output()
        daemon = None

        listed = sb.run("dpkg -L " + " ".join(PACKAGES)).stdout.split("\n")
        sb.run("dpkg --purge " + " ".join(PACKAGES), timeout=300)

        # Nothing of them is left: not a file they held, nor a directory
        # this machine did not have; not their user, group, database,
        # config, unit link or dpkg's records of them.
        for name in PACKAGES:
            r = sb.run("dpkg-query -W -f '${db:Status-Status}' %s" % name,
                       check=False)
            assert r.stdout.strip() in ("", "not-installed"), r.stdout
        left = [p for p in listed if p.strip() and sb.exists(p) and
                not (os.path.isdir(p) and host_has(p))]
        assert not left, "left after purge: %s" % left
        for what in ("passwd", "group"):
            assert sb.run("getent %s rdzv" % what,
                          check=False).returncode == 2, what
        for path in ("/etc/rdzv", "/var/lib/rdzv",
                     "/etc/systemd/system/multi-user.target.wants/"
                     "rdzvd.service"):
            assert not sb.exists(path), path

        # Every path the overlay took in since it was mounted: files the
        # packages made or changed. Nothing may be new but man-db's cache of
        # formatted pages (systemd-analyze verify looked at the pages of
        # Documentation=; man-db's daily job cleans it), and the account
        # files are as they were (their `-` backups are shadow's).
        found = sb.run("cd %s && find . -mindepth 1" % sb.upper,
                       root=False).stdout.split("\n")
        new = [p[1:] for p in found if p and not host_has(p[1:])
               and not p.startswith("./var/cache/man/")]
        assert not new, "new on this machine after purge: %s" % new
        for f in ("passwd", "group", "shadow", "gshadow"):
            if os.path.exists(os.path.join(sb.upper, "etc", f)):
                with open("/etc/" + f) as h:
                    assert sb.run("cat /etc/" + f).stdout == h.read(), f
    finally:
        if daemon is not None:
            daemon.kill()
        sb.close()
        # The mount points, empty once the namespace is gone.
        shutil.rmtree(tmp, ignore_errors=True)
