"""`meson install --destdir` of this build: exactly the expected files, the
unit with this prefix's paths (and systemd-analyze verify content with it),
and a config file that is there already kept.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

import installed
import rdzvtest


def meson_install(destdir):
    r = subprocess.run(["meson", "install", "-C", rdzvtest.BUILD_ROOT,
                        "--no-rebuild", "--destdir", str(destdir)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def dirs():
    why = installed.man_pages_not_built(rdzvtest.BUILD_ROOT)
    if why:
        pytest.skip(why)
    return installed.build_dirs(rdzvtest.BUILD_ROOT)


@pytest.fixture(scope="module")
def destdir(dirs, tmp_path_factory):
    d = tmp_path_factory.mktemp("destdir")
    meson_install(d)
    return d


def test_installs_exactly_the_expected_files(dirs, destdir):
    got = installed.files_under(str(destdir))
    want = installed.expected_files(dirs)
    assert got == want, ("missing: %s\nunexpected: %s"
                         % (sorted(want - got), sorted(got - want)))
    for path in ("sbindir", "rdzvd"), ("bindir", "rdzv-agent"), \
            ("bindir", "rdzvctl"):
        p = str(destdir) + os.path.join(dirs[path[0]], path[1])
        assert os.access(p, os.X_OK), p
    # The config in place is the example.
    conf = str(destdir) + os.path.join(dirs["sysconfdir"], "rdzv/rdzvd.conf")
    with open(conf) as f, open(os.path.join(
            rdzvtest.SOURCE_ROOT, "deploy", "rdzvd.conf.example")) as g:
        assert f.read() == g.read()


def test_unit_has_the_paths_of_the_prefix(dirs, destdir):
    unit = str(destdir) + os.path.join(dirs["unitdir"], "rdzvd.service")
    with open(unit) as f:
        text = f.read()
    assert not re.search(r"@[A-Z_]+@", text), \
        "a placeholder was left in rdzvd.service"
    exec_start = re.findall(r"^ExecStart=(.*)$", text, re.M)
    assert exec_start == ["%s/rdzvd --config %s/rdzv/rdzvd.conf" % (
        dirs["sbindir"], dirs["sysconfdir"])]
    assert re.search(r"^User=rdzv$", text, re.M)
    assert re.search(r"^StateDirectory=rdzv$", text, re.M)
    # The unit's user is the one sysusers.d creates.
    users = str(destdir) + os.path.join(dirs["sysusersdir"], "rdzv.conf")
    with open(users) as f:
        assert re.search(r"^u rdzv ", f.read(), re.M)


def test_systemd_analyze_verify(dirs, destdir, tmp_path):
    sa = shutil.which("systemd-analyze")
    if sa is None:
        pytest.skip("systemd-analyze is missing (Debian: systemd)")
    # verify checks that ExecStart= can be run and that the man pages of
    # Documentation= exist: point both at the files in DESTDIR. Nothing
    # else of the unit changes.
    with open(str(destdir) + os.path.join(dirs["unitdir"],
                                          "rdzvd.service")) as f:
        text = f.read()
    text = text.replace("ExecStart=" + dirs["sbindir"],
                        "ExecStart=" + str(destdir) + dirs["sbindir"])
    unit = tmp_path / "rdzvd.service"
    unit.write_text(text)
    env = dict(os.environ, MANPATH=str(destdir) + dirs["mandir"])
    r = subprocess.run([sa, "verify", str(unit)], capture_output=True,
                       text=True, timeout=60, env=env)
    if r.returncode != 0 and "Failed to" in r.stderr and \
            "rdzvd.service" not in r.stderr:
        pytest.skip("systemd-analyze cannot run here: " + r.stderr.strip())
    # verify exits 0 on unknown keys and bad values; it must say nothing.
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), \
        r.stdout + r.stderr


def test_an_existing_config_is_kept(dirs, tmp_path):
    conf = str(tmp_path) + os.path.join(dirs["sysconfdir"], "rdzv/rdzvd.conf")
    os.makedirs(os.path.dirname(conf))
    with open(conf, "w") as f:
        f.write("# the site's own\nlisten = 0.0.0.0:29400\ninsecure = true\n")
    meson_install(tmp_path)
    with open(conf) as f:
        assert f.read().startswith("# the site's own\n")
    # Everything else is installed as usual.
    assert installed.files_under(str(tmp_path)) == \
        installed.expected_files(dirs)


# Run by Debian's python3 with only the installed tree's module folder
# added: the entry point torch 2.6+ loads, its factory, the creator, and
# torch's own registry (as torch 2.6 registers out-of-tree backends).
ENTRY_POINT_CHECK = r'''
import json, sys
site = sys.argv[1]
sys.path.insert(0, site)
from importlib.metadata import entry_points, version
eps = [e for e in entry_points(group="torchrun.handlers") if e.name == "rdzv"]
assert len(eps) == 1, eps
import rdzv
assert rdzv.__file__.startswith(site), rdzv.__file__
creator = eps[0].load()()
from torch.distributed.elastic.rendezvous import (RendezvousParameters,
    rendezvous_handler_registry as registry)
params = RendezvousParameters("rdzv", "rdzvd.example:29400", "job-7", 2, 4,
                              join_timeout=5, last_call_timeout=1,
                              nproc_per_node=3)
h = creator(params)
registry.register("rdzv", creator)
h2 = registry.create_handler(params)
try:
    creator(RendezvousParameters("rdzv", "h", "j", 1, 1, no_such_key=1))
    bad = None
except ValueError as e:
    bad = str(e)
print(json.dumps({"value": eps[0].value, "version": version("rdzv"),
                  "backend": h.get_backend(), "run_id": h.get_run_id(),
                  "args": h.args, "registry": type(h2).__name__,
                  "bad": bad}))
'''


def test_entry_point_from_the_installed_tree(dirs, destdir, tmp_path):
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        pytest.skip("torch cannot be imported by /usr/bin/python3 "
                    "(Debian: python3-torch)")
    site = str(destdir) + dirs["pythondir"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(["/usr/bin/python3", "-c", ENTRY_POINT_CHECK, site],
                       capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["value"] == "rdzv.torchrun:handler"
    assert got["version"] == installed.VERSION
    assert got["backend"] == "rdzv" and got["run_id"] == "job-7"
    assert got["registry"] == "RdzvRendezvousHandler"
    args = got["args"]
    for flag, value in (("--id", "job-7"), ("--nnodes", "2:4"),
                        ("--nproc-per-node", "3"),
                        ("--server", "rdzvd.example:29400"),
                        ("--join-timeout", "5"), ("--last-call", "1")):
        assert args[args.index(flag) + 1] == value, args
    assert "no_such_key" in got["bad"], got["bad"]
