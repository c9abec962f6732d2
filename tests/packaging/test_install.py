"""`meson install --destdir` of this build: exactly the expected files, the
unit with this prefix's paths (and systemd-analyze verify content with it),
and a config file that is there already kept.
"""

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
