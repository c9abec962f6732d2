"""What installing rdzv puts where, for test_install.py (`meson install`)
and test_package.py (the Debian packages): the one list of expected files,
by the directory each goes in. docs/INSTALL.md says why each is there.
"""

import json
import os
import re
import shutil
import subprocess
import sys

def _version():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "..", "meson.build")) as f:
        return re.search(r"version : '([^']+)'", f.read()).group(1)


VERSION = _version()

# (directory, path under it). The directories are meson's (prefix, bindir,
# ...), pythondir (the Python module folder) and two of ours: unitdir, where rdzvd.service goes, and sysusersdir.
EXPECTED = [
    ("sbindir", "rdzvd"),
    ("bindir", "rdzv-agent"),
    ("bindir", "rdzvctl"),
    ("unitdir", "rdzvd.service"),
    ("sysusersdir", "rdzv.conf"),
    ("sysconfdir", "rdzv/rdzvd.conf"),
    ("datadir", "doc/rdzvd/rdzvd.conf.example"),
    ("datadir", "bash-completion/completions/rdzv-agent"),
    ("datadir", "bash-completion/completions/rdzvctl"),
    ("mandir", "man1/rdzv-agent.1"),
    ("mandir", "man1/rdzvctl.1"),
    ("mandir", "man5/rdzvd.conf.5"),
    ("mandir", "man8/rdzvd.8"),
    # python/meson.build: the package and its metadata.
    ("pythondir", "rdzv/__init__.py"),
    ("pythondir", "rdzv/coproc.py"),
    ("pythondir", "rdzv/elastic.py"),
    ("pythondir", "rdzv/progress.py"),
    ("pythondir", "rdzv/torchrun.py"),
    ("pythondir", "rdzv-%s.dist-info/METADATA" % VERSION),
    ("pythondir", "rdzv-%s.dist-info/entry_points.txt" % VERSION),
    ("pythondir", "rdzv-%s.dist-info/top_level.txt" % VERSION),
    ("libexecdir", "rdzv/rdzv-drain"),
    # client/agent/meson.build: the workers' preload (masterwait.c).
    ("libdir", "rdzv/librdzv-masterwait.so"),
]


def build_dirs(build_root):
    """The install directories of a configured build, absolute, as
    deploy/meson.build chooses them."""
    out = subprocess.run(["meson", "introspect", build_root,
                          "--buildoptions"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    opts = {o["name"]: o["value"] for o in json.loads(out)}
    prefix = opts["prefix"]
    dirs = {"prefix": prefix}
    for d in ("bindir", "sbindir", "sysconfdir", "datadir", "mandir",
              "libexecdir", "libdir"):
        dirs[d] = os.path.join(prefix, opts[d])
    unitdir = opts.get("systemdsystemunitdir", "")
    if not unitdir:
        unitdir = os.path.join(prefix, "lib/systemd/system")
        if prefix == "/usr":
            r = subprocess.run(["pkg-config", "--variable=systemdsystemunitdir",
                                "systemd"], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                unitdir = r.stdout.strip()
    dirs["unitdir"] = unitdir
    dirs["sysusersdir"] = os.path.join(prefix, "lib/sysusers.d")
    dirs["pythondir"] = pythondir(build_root, opts)
    return dirs


def pythondir(build_root, opts):
    """Where python/meson.build puts the package: python.purelibdir if
    given; Debian's folders under /usr and /usr/local; else meson's
    choice for the prefix."""
    prefix = opts["prefix"]
    if opts.get("python.purelibdir"):
        return opts["python.purelibdir"]
    if prefix == "/usr":
        return "/usr/lib/python3/dist-packages"
    if prefix == "/usr/local":
        return "/usr/local/lib/python%d.%d/dist-packages" % sys.version_info[:2]
    out = subprocess.run(["meson", "introspect", build_root, "--installed"],
                         capture_output=True, text=True, check=True,
                         timeout=60).stdout
    for src, dest in json.loads(out).items():
        if src.endswith(os.path.join("python", "rdzv", "__init__.py")):
            return os.path.dirname(os.path.dirname(dest))
    raise AssertionError("python/rdzv is not installed by this build")


def expected_files(dirs):
    """The absolute paths of EXPECTED under |dirs|."""
    return {os.path.normpath(os.path.join(dirs[d], p)) for d, p in EXPECTED}


def files_under(root):
    """Every file and symlink under |root|, as absolute paths inside it."""
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add("/" + os.path.relpath(os.path.join(d, f), root))
    return out


MAN_PAGES = ("rdzvd.8", "rdzvd.conf.5", "rdzv-agent.1", "rdzvctl.1")


def man_pages_not_built(build_root):
    """Why the build has no man pages, or None when it has them."""
    built = [os.path.join(build_root, "docs", "man", p) for p in MAN_PAGES]
    if all(os.path.exists(p) for p in built):
        return None
    if shutil.which("scdoc") is None:
        return ("scdoc is missing, so the build made no man pages: "
                "deploy/install-deps.sh test installs it")
    return ("the build has no man pages: it was configured before scdoc "
            "was installed (meson setup --reconfigure %s)" % build_root)
