"""The files in deploy/ are what operators copy: they must parse, and the
demo must run."""

import os
import re
import shutil
import subprocess

import pytest

import rdzvtest as rt

RDZVD = rt.build_path("daemon", "rdzvd")
DEPLOY = os.path.join(rt.SOURCE_ROOT, "deploy")


def test_example_config_parses():
    r = subprocess.run([RDZVD, "--config", os.path.join(DEPLOY, "rdzvd.conf.example"),
                        "--check-config"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert "listen = 127.0.0.1:29400" in r.stdout
    assert "listen = unix:/run/rdzv/rdzvd.sock" in r.stdout
    assert "log-level = info" in r.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed")
def test_systemd_unit_verifies(tmp_path):
    # The unit as the build made it from deploy/systemd/rdzvd.service.in.
    # verify insists that ExecStart exists: point it at the built binary.
    # Its man pages are not installed here (tests/packaging/test_install.py
    # verifies the installed unit with them).
    with open(rt.build_path("deploy", "rdzvd.service")) as f:
        unit = re.sub(r"^ExecStart=\S+", "ExecStart=" + RDZVD, f.read(),
                      flags=re.M)
    path = tmp_path / "rdzvd.service"
    path.write_text(unit)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)],
                       capture_output=True, text=True, timeout=60)
    # verify exits 0 on unknown keys and bad values; it only prints them.
    problems = [l for l in r.stderr.splitlines() if "rdzvd.service" in l]
    assert r.returncode == 0 and not problems, r.stderr
    assert "Type=notify" in unit


def test_demo_script_parses():
    r = subprocess.run(["bash", "-n", os.path.join(DEPLOY, "demo.sh")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["/usr/bin/python3", "-c",
                        "import ast, sys; ast.parse(open(sys.argv[1]).read())",
                        os.path.join(DEPLOY, "demo", "train.py")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr


# OpenPBS's pbsdsh as it parses its command line (OpenPBS is not in Debian):
# -c, -n, -s, -v and -o only, then "--" before the program. It records each
# call and runs nothing.
PBSDSH = r"""#!/bin/sh
while [ $# -gt 0 ]; do
	case $1 in
	-c|-n) [ $# -ge 2 ] || exit 2; echo "$1 $2" >> "$PBSDSH_LOG"; shift 2 ;;
	-s|-v|-o) shift ;;
	--) shift; break ;;
	*) echo "pbsdsh: invalid option $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || exit 2
echo "cmd $*" >> "$PBSDSH_LOG"
"""


def test_pbs_script_starts_one_agent_per_host(tmp_path):
    """deploy/pbs/train.pbs starts one agent per distinct host of
    $PBS_NODEFILE, by its line index, in the form OpenPBS and PBS Pro
    accept (pbsdsh -n INDEX -- PROGRAM; -h is Torque's alone)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pbsdsh").write_text(PBSDSH)
    (bindir / "pbsdsh").chmod(0o755)
    nodefile = tmp_path / "nodes"
    nodefile.write_text("gpu1\ngpu1\ngpu2\ngpu2\ngpu3\n")
    log = tmp_path / "log"
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]),
               PBS_NODEFILE=str(nodefile), PBS_JOBID="4243[1].pbs01",
               PBS_O_WORKDIR=str(tmp_path), PBSDSH_LOG=str(log),
               RDZV_SERVER="127.0.0.1:1")
    r = subprocess.run(["bash", os.path.join(DEPLOY, "pbs", "train.pbs")],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert sorted(l for l in lines if l.startswith("-n ")) == \
        ["-n 0", "-n 2", "-n 4"], lines
    cmds = [l for l in lines if l.startswith("cmd ")]
    assert len(cmds) == 3 and all("rdzv-agent join" in c for c in cmds), cmds


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_with(marker):
    """Pids of processes whose environment holds |marker|."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_demo_runs(tmp_path):
    """deploy/demo.sh end to end, on the built programs, with another port
    and database than rdzvd's defaults (other tests may run beside it): the
    job trains on 4 ranks, closes, and nothing is left behind."""
    pytest.importorskip("torch")
    db = tmp_path / "demo.db"
    marker = "DEMO_TEST_RUN=%d" % os.getpid()
    env = dict(os.environ, RDZV_BUILD=rt.BUILD_ROOT, RDZV_DEMO_NO_BUILD="1",
               RDZV_DEMO_LISTEN="127.0.0.1:%d" % _free_port(), RDZV_DEMO_DB=str(db))
    env[marker.split("=")[0]] = marker.split("=")[1]
    env.pop("OMP_NUM_THREADS", None)
    r = subprocess.run([os.path.join(DEPLOY, "demo.sh")], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=150)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for rank in range(4):
        assert "rank %d of 4 started" % rank in out, out
    assert "epoch 20/20" in out, out
    sums = set(re.findall(r"done; parameters sha256 ([0-9a-f]+)", out))
    assert len(sums) == 1 and out.count("done; parameters sha256") == 4, out
    assert re.search(r"the database says: job demo-\S+ closed, generation 1, 0 restarts",
                     out), out
    assert not db.exists()
    # Its output filters (sed, tee) end right after the agents they read.
    rt.wait_for(lambda: _processes_with(marker) == [], 5, 0.1,
                "every process of the demo gone: %s" % _processes_with(marker))
