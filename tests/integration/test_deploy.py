"""The files in deploy/ are what operators copy: they must parse, and the
demo must run."""

import os
import re
import shutil
import socket
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


# OpenPBS's qstat -f for one job, as it prints a running subjob of an
# array (OpenPBS is not in Debian): "Job Id:", then one attribute a line,
# long values continued on lines that start with a tab. run_count is the
# job's run, from $QSTAT_RUN_COUNT; a later continuation line that starts
# with run_count must not be taken for it. Its calls go to $PBSDSH_LOG.
QSTAT = r"""#!/bin/bash
echo "qstat $*" >> "$PBSDSH_LOG"
[ "$1" = -f ] && [ $# -eq 2 ] || { echo "usage: qstat -f JOBID" >&2; exit 2; }
[ "$2" = "$PBS_JOBID" ] || { echo "qstat: Unknown Job Id $2" >&2; exit 153; }
cat <<END
Job Id: $2
    Job_Name = train
    Job_Owner = user@login01
    job_state = R
    queue = workq
    server = pbs01
    exec_host = gpu1/0*64+gpu2/0*64+gpu3/0*64
    Rerunable = True
    Resource_List.select = 3:ncpus=64:ngpus=8
    Resource_List.walltime = 24:00:00
    session_id = 4242
    comment = Job run at Mon Nov 23 at 17:00 on (gpu1:ncpus=64:ngpus=8)
    run_count = $QSTAT_RUN_COUNT
    array_id = 4243[].pbs01
    array_index = 1
    Variable_List = PBS_O_HOME=/home/user,PBS_O_LOGNAME=user,PBS_O_X=a,
END
printf '\trun_count = 7,PBS_O_WORKDIR=/home/user\n'
"""


class PbsJob:
    """deploy/pbs/train.pbs run as PBS would run it, with the stand-in
    pbsdsh (and qstat, when |qstat|) first in PATH and a node file of
    three hosts, five slots."""

    def __init__(self, tmp_path, daemon, qstat=False):
        self.tmp = tmp_path
        self.bindir = tmp_path / "bin"
        self.bindir.mkdir()
        (self.bindir / "pbsdsh").write_text(PBSDSH)
        (self.bindir / "pbsdsh").chmod(0o755)
        if qstat:
            (self.bindir / "qstat").write_text(QSTAT)
            (self.bindir / "qstat").chmod(0o755)
        out = tmp_path / "out"
        out.mkdir()
        nodefile = tmp_path / "nodes"
        nodefile.write_text("gpu1\ngpu1\ngpu2\ngpu2\ngpu3\n")
        self.log = tmp_path / "log"
        worker = os.path.join(rt.SOURCE_ROOT, "tests", "integration", "agent",
                              "worker.py")
        self.script = pbs_script(tmp_path, daemon.addr,
                                 "/usr/bin/python3 " + worker)
        path = [str(self.bindir),
                os.path.dirname(rt.build_path("client", "agent", "rdzv-agent")),
                os.path.dirname(rt.build_path("client", "ctl", "rdzvctl")),
                os.environ.get("PATH", "/usr/bin:/bin")]
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("RDZV_", "SLURM_", "PBS_", "QSTAT_"))}
        self.env.update(PATH=":".join(path), HOME=str(tmp_path),
                        PBS_NODEFILE=str(nodefile), PBS_JOBID="4243[1].pbs01",
                        PBS_O_WORKDIR=str(tmp_path), PBSDSH_LOG=str(self.log),
                        W_OUT=str(out), TMPDIR=str(tmp_path),
                        RDZV_BUILD_ROOT=rt.BUILD_ROOT)

    def run(self, **env):
        """Runs the script to its end: CompletedProcess (text)."""
        if self.log.exists():
            self.log.unlink()
        return subprocess.run(["bash", self.script], env=dict(self.env, **env),
                              capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)

    def calls(self):
        return self.log.read_text().splitlines() if self.log.exists() else []


def test_pbs_script_runs_an_array_job_through_openpbs_pbsdsh(tmp_path):
    """deploy/pbs/train.pbs under a stand-in pbsdsh with only OpenPBS's
    options: one agent per distinct host of $PBS_NODEFILE, started by its
    line index (pbsdsh -n INDEX --), in an array job (PBS_JOBID
    4243[1].pbs01, which joins as 4243-1.pbs01). The three agents form the
    job with ranks in the node file's order, it closes, and the script's
    exit status is the job's (rdzvctl wait). No qstat here: attempt 1."""
    import rdzvnode
    d = rt.Daemon(tmp_path)
    try:
        pbs = PbsJob(tmp_path, d)
        r = pbs.run()
        assert r.returncode == 0, r.stdout + r.stderr
        assert "job 4243-1.pbs01 closed" in r.stdout, r.stdout + r.stderr
        lines = pbs.calls()
        assert sorted(l for l in lines if l.startswith("-n ")) == \
            ["-n 0", "-n 2", "-n 4"], lines
        cmds = [l for l in lines if l.startswith("cmd ")]
        assert len(cmds) == 3 and all("rdzv-agent join" in c for c in cmds), cmds
        assert all("RDZV_ATTEMPT=1 " in c for c in cmds), cmds
        with rdzvnode.Control(d.addr) as c:
            j = c.get_job("4243-1.pbs01")
        assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED, j
        assert j.attempt == 1, j
        assert j.settings.min_nodes == 3 and j.settings.rejoin_timeout_ms == 0, j
        hints = sorted(n.rank_hint for n in j.nodes)
        assert hints in ([0, 1, 2], [0, 2, 4]), j
        # Torque's form is refused by the stand-in, as by OpenPBS.
        bad = subprocess.run([str(pbs.bindir / "pbsdsh"), "-h", "gpu1", "true"],
                             env=pbs.env, capture_output=True, text=True,
                             timeout=10)
        assert bad.returncode == 2 and "invalid option -h" in bad.stderr
    finally:
        d.stop()


def test_pbs_script_requeued_run_is_a_new_attempt(tmp_path):
    """PBS exports no run count: train.pbs reads the job's run_count from
    qstat -f (a stand-in printing OpenPBS's format) and gives it to every
    agent (RDZV_ATTEMPT) and to rdzvctl wait --attempt. The first run
    closes the job as attempt 1; a requeued run (run_count = 2) reopens the
    closed job as attempt 2 with real agents, and it closes again. A run
    whose agents never join (run_count = 3, pbsdsh failing) does not take
    attempt 2's "closed" for its own: rdzvctl wait exits 3."""
    import rdzvnode
    d = rt.Daemon(tmp_path)
    try:
        pbs = PbsJob(tmp_path, d, qstat=True)
        r = pbs.run(QSTAT_RUN_COUNT="1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "qstat -f 4243[1].pbs01" in pbs.calls(), pbs.calls()
        with rdzvnode.Control(d.addr) as c:
            j = c.get_job("4243-1.pbs01")
        assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED and j.attempt == 1, j

        r = pbs.run(QSTAT_RUN_COUNT="2")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "job 4243-1.pbs01 closed" in r.stdout, r.stdout + r.stderr
        cmds = [l for l in pbs.calls() if l.startswith("cmd ")]
        assert len(cmds) == 3 and all("RDZV_ATTEMPT=2 " in c for c in cmds), cmds
        with rdzvnode.Control(d.addr) as c:
            j = c.get_job("4243-1.pbs01", events=50)
        assert j.state == rdzvnode.pb.types.JOB_STATE_CLOSED and j.attempt == 2, j
        assert len(j.nodes) == 3 and all(
            n.state == rdzvnode.pb.types.NODE_STATE_SUCCEEDED for n in j.nodes), j
        assert any(e.kind == "reopened" and "attempt 2" in e.message
                   for e in j.events), j.events

        # This run's agents never start: its wait must not exit 0.
        (pbs.bindir / "pbsdsh").write_text("#!/bin/sh\nexit 1\n")
        r = pbs.run(QSTAT_RUN_COUNT="3")
        assert r.returncode == 3, r.stdout + r.stderr
        assert "job 4243-1.pbs01 has no attempt 3: its attempt 2 closed" in \
            r.stderr, r.stderr
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
    job trains on 4 ranks, closes, and nothing is left behind. Port 29401,
    the status page's default, is taken (by this test, if nobody else has
    it): the demo says so and prints the free port the page got."""
    pytest.importorskip("torch")
    squat = socket.socket()
    try:
        squat.bind(("127.0.0.1", 29401))
        squat.listen(1)
    except OSError:
        squat.close()
        squat = None        # someone else's: taken all the same
    db = tmp_path / "demo.db"
    marker = "DEMO_TEST_RUN=%d" % os.getpid()
    env = dict(os.environ, RDZV_BUILD=rt.BUILD_ROOT, RDZV_DEMO_NO_BUILD="1",
               RDZV_DEMO_LISTEN="127.0.0.1:%d" % _free_port(), RDZV_DEMO_DB=str(db))
    env[marker.split("=")[0]] = marker.split("=")[1]
    env.pop("OMP_NUM_THREADS", None)
    try:
        r = subprocess.run([os.path.join(DEPLOY, "demo.sh")], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=150)
    finally:
        if squat is not None:
            squat.close()
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "demo: port 29401 is taken; the status page gets a free port" \
        in r.stderr, out
    pages = re.findall(r"==> status page: http://127\.0\.0\.1:(\d+)/#job=demo-",
                       r.stdout)
    assert len(pages) == 2 and len(set(pages)) == 1, out
    assert int(pages[0]) != 29401, out
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
