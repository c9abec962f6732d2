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


TEMPLATES = [os.path.join("slurm", t) for t in
             ("train.sbatch", "train-spare.sbatch", "train-elastic.sbatch")] + \
    [os.path.join("pbs", "train.pbs")]


@pytest.mark.parametrize("template", TEMPLATES)
def test_batch_templates(template):
    """Each batch template parses (and passes shellcheck where it is
    installed), says when to use it and that rdzv-agent must be on every
    node's PATH, and ends with rdzvctl wait, so the scheduler records the
    job's outcome rather than the worst task's exit status.
    tests/integration/test_slurm.py runs the Slurm ones on a real Slurm."""
    path = os.path.join(DEPLOY, template)
    r = subprocess.run(["bash", "-n", path], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r.stderr
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", path], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout
    with open(path) as f:
        text = f.read()
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
    assert lines[-1].startswith("exec rdzvctl wait "), lines[-1]
    assert "on every node's PATH" in text and "meson install" in text
    if template.startswith("slurm"):
        assert "When to use it" in text


# OpenPBS's pbsdsh as it parses its command line (OpenPBS is not in Debian):
# -c, -n, -s, -v and -o only, then "--" before the program; anything else,
# Torque's -h HOST included, is refused. It records each call and runs the
# task here, as PBS's MOM would on the host of line INDEX of $PBS_NODEFILE:
# with a clean environment (what the script passes with env is all the
# task gets, plus the test's W_* settings for its workers) and, where a UTS
# namespace can be had (root), under that host's name, so the agent finds
# its place in the node file itself; elsewhere RDZV_NODE_RANK stands in.
PBSDSH = r"""#!/bin/bash
index=""
while [ $# -gt 0 ]; do
	case $1 in
	-c|-n) [ $# -ge 2 ] || exit 2; echo "$1 $2" >> "$PBSDSH_LOG"
		[ "$1" = -n ] && index=$2; shift 2 ;;
	-s|-v|-o) shift ;;
	--) shift; break ;;
	*) echo "pbsdsh: invalid option $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || exit 2
echo "cmd $*" >> "$PBSDSH_LOG"
[ -n "$index" ] || exit 0
host=$(sed -n "$((index + 1))p" "$PBS_NODEFILE")
clean=(env -i W_OUT="$W_OUT" W_MODE=exit TMPDIR="$TMPDIR")
if unshare -u true 2>/dev/null; then
	exec unshare -u "${clean[@]}" /bin/sh -c 'hostname "$0" && exec "$@"' \
	    "$host" "$@"
fi
exec "${clean[@]}" RDZV_NODE_RANK="$index" "$@"
"""


def pbs_script(tmp_path, server, command):
    """deploy/pbs/train.pbs with the rdzvd address and the command
    substituted and the GPU option removed."""
    with open(os.path.join(DEPLOY, "pbs", "train.pbs")) as f:
        text = f.read()
    for old in ("rdzv.example.org:29400", "python3 train.py --epochs 100",
                "--nproc-per-node gpu "):
        assert old in text, old
    text = text.replace("rdzv.example.org:29400", server)
    text = text.replace("python3 train.py --epochs 100", command)
    text = text.replace("--nproc-per-node gpu ", "")
    path = tmp_path / "train.pbs"
    path.write_text(text)
    return str(path)


def test_pbs_script_runs_an_array_job_through_openpbs_pbsdsh(tmp_path):
    """deploy/pbs/train.pbs under a stand-in pbsdsh with only OpenPBS's
    options: one agent per distinct host of $PBS_NODEFILE, started by its
    line index (pbsdsh -n INDEX --), in an array job (PBS_JOBID
    4243[1].pbs01, which joins as 4243-1.pbs01). The three agents form the
    job with ranks in the node file's order, it closes, and the script's
    exit status is the job's (rdzvctl wait)."""
    import rdzvnode
    worker = os.path.join(rt.SOURCE_ROOT, "tests", "integration", "agent",
                          "worker.py")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pbsdsh").write_text(PBSDSH)
    (bindir / "pbsdsh").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    nodefile = tmp_path / "nodes"
    nodefile.write_text("gpu1\ngpu1\ngpu2\ngpu2\ngpu3\n")
    log = tmp_path / "log"
    d = rt.Daemon(tmp_path)
    try:
        script = pbs_script(tmp_path, d.addr, "/usr/bin/python3 " + worker)
        path = [str(bindir),
                os.path.dirname(rt.build_path("client", "agent", "rdzv-agent")),
                os.path.dirname(rt.build_path("client", "ctl", "rdzvctl")),
                os.environ.get("PATH", "/usr/bin:/bin")]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RDZV_", "SLURM_", "PBS_"))}
        env.update(PATH=":".join(path), HOME=str(tmp_path),
                   PBS_NODEFILE=str(nodefile), PBS_JOBID="4243[1].pbs01",
                   PBS_O_WORKDIR=str(tmp_path), PBSDSH_LOG=str(log),
                   W_OUT=str(out), TMPDIR=str(tmp_path),
                   RDZV_BUILD_ROOT=rt.BUILD_ROOT)
        r = subprocess.run(["bash", script], env=env, capture_output=True,
                           text=True, timeout=90, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "job 4243-1.pbs01 closed" in r.stdout, r.stdout + r.stderr
        lines = log.read_text().splitlines()
        assert sorted(l for l in lines if l.startswith("-n ")) == \
            ["-n 0", "-n 2", "-n 4"], lines
        cmds = [l for l in lines if l.startswith("cmd ")]
        assert len(cmds) == 3 and all("rdzv-agent join" in c for c in cmds), cmds
        with rdzvnode.Control(d.addr) as c:
            j = c.get_job("4243-1.pbs01")
        assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED, j
        assert j.settings.min_nodes == 3 and j.settings.rejoin_timeout_ms == 0, j
        hints = sorted(n.rank_hint for n in j.nodes)
        assert hints in ([0, 1, 2], [0, 2, 4]), j
        # Torque's form is refused by the stand-in, as by OpenPBS.
        bad = subprocess.run([str(bindir / "pbsdsh"), "-h", "gpu1", "true"],
                             env=env, capture_output=True, text=True, timeout=10)
        assert bad.returncode == 2 and "invalid option -h" in bad.stderr
    finally:
        d.stop()


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
