"""rdzv on a real Slurm (slurmtest.py: munged, slurmctld and three slurmd
node names on localhost, private to this test), through `sbatch` of the
project's own templates in deploy/slurm with the rdzvd address and the
command substituted and the GPU lines removed. The workers are
agent/worker.py (no torch): each leaves its environment in a file and, in
"sleep" mode, runs until a stop file exists.

What must hold (issues 15 and 26): ranks follow SLURM_NODEID and Slurm
records COMPLETED; kill -9 of one agent with a hot spare is survived
(COMPLETED), without one the job fails within seconds (FAILED), and so does
kill -TERM of one agent (a clean leave), with elastic --nnodes
it goes on with fewer nodes (COMPLETED); scancel ends the rdzv
job within seconds; a requeue of a completed job runs it again and it
closes. There is no slurmdbd: the outcome is read with `scontrol show job`
(MinJobAge keeps finished jobs an hour).
"""

import glob
import json
import os
import signal
import subprocess
import time

import grpc
import pytest

import rdzvtest as rt
import rdzvnode
import slurmtest

why = slurmtest.missing()
if why:
    pytest.skip(why, allow_module_level=True)

PB = rdzvnode.pb
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "agent", "worker.py")
TEMPLATES = os.path.join(rt.SOURCE_ROOT, "deploy", "slurm")
BINDIRS = [os.path.dirname(rt.build_path("client", "agent", "rdzv-agent")),
           os.path.dirname(rt.build_path("client", "ctl", "rdzvctl"))]
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
         "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm")
    s = slurmtest.Slurm(tmp)
    d = None
    try:
        d = rt.Daemon(tmp)
        s.rdzvd = d
        s.ctl = rdzvnode.Control(d.addr)
        yield s
    finally:
        if d is not None:
            s.ctl.close()
            d.stop()
        s.stop()


class Run:
    """One sbatch of a template: its own output directory, stop file and
    environment (PATH with the built programs, HOME for the worker logs)."""

    def __init__(self, cluster, tmp_path, template, nodes, mode="sleep"):
        self.c = cluster
        self.dir = str(tmp_path)
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.out)
        self.stop_file = os.path.join(self.dir, "stop")
        self.script = os.path.join(self.dir, template)
        with open(os.path.join(TEMPLATES, template)) as f:
            text = f.read()
        assert "rdzv.example.org:29400" in text and \
            "python3 train.py --epochs 100" in text, template
        text = text.replace("rdzv.example.org:29400", cluster.rdzvd.addr)
        text = text.replace("python3 train.py --epochs 100",
                            "/usr/bin/python3 " + WORKER)
        # No GPUs here, and one CPU per node.
        text = "\n".join(l for l in text.splitlines()
                         if "--gpus-per-node" not in l and
                         "--cpus-per-task" not in l) + "\n"
        with open(self.script, "w") as f:
            f.write(text)
        self.env = {
            "PATH": ":".join(BINDIRS + [os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": self.dir, "W_OUT": self.out, "W_MODE": mode,
            "W_STOP": self.stop_file, "TMPDIR": self.dir,
        }
        self.id = cluster.sbatch(self.script, "--nodes=%d" % nodes,
                                 "--output=%s/slurm-%%j.out" % self.dir,
                                 "--chdir=%s" % self.dir, env=self.env)

    def output(self):
        try:
            with open(os.path.join(self.dir, "slurm-%s.out" % self.id),
                      errors="replace") as f:
                return f.read()
        except OSError:
            return "(no output yet)"

    def job(self):
        return self.c.ctl.get_job(self.id, events=50)

    def job_or_none(self):
        """The rdzv job, or None before its first agent joined."""
        try:
            return self.job()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return None

    def wait_job(self, pred, timeout, what):
        last = {}

        def ok():
            last["job"] = self.job_or_none()
            return last["job"] if last["job"] is not None and \
                pred(last["job"]) else None
        try:
            return rt.wait_for(ok, timeout, 0.1, what)
        except TimeoutError as e:
            raise AssertionError("%s\nrdzv job: %s\nslurm job: %s\noutput:\n%s" % (
                e, last.get("job"), self.c.job(self.id), self.output()))

    def workers(self, gen):
        """{rank: environment} of the workers of generation |gen|."""
        res = {}
        for f in glob.glob(os.path.join(self.out, "env-g%d-r*.json" % gen)):
            with open(f) as fp:
                d = json.load(fp)
            res[d["rank"]] = d["env"]
        return res

    def wait_world(self, world, after=0, timeout=60):
        """A generation above |after| whose |world| workers all started."""
        def ok():
            j = self.job_or_none()
            if j is not None and j.generation > after and j.state == PB.types.JOB_STATE_RUNNING:
                w = self.workers(j.generation)
                if sorted(w) == list(range(world)):
                    return j.generation, w
            return None
        try:
            return rt.wait_for(ok, timeout, 0.1, "generation above %d with %d "
                               "workers" % (after, world))
        except TimeoutError as e:
            raise AssertionError("%s\nslurm job: %s\noutput:\n%s" % (
                e, self.c.job(self.id), self.output()))

    def agent_pid(self, node_id):
        """The rdzv-agent that srun started on Slurm node SLURM_NODEID."""
        want = [b"SLURM_JOB_ID=%s" % self.id.encode(),
                b"SLURM_NODEID=%d" % node_id]
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
                if not argv[0].endswith(b"rdzv-agent"):
                    continue
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if all(w in env for w in want):
                return int(pid)
        return None

    def stop_workers(self):
        with open(self.stop_file, "w"):
            pass

    def wait_slurm(self, timeout=60):
        return self.c.wait_state(self.id, ENDED, timeout)

    def cancel(self):
        self.stop_workers()
        self.c.run("scancel", self.id, check=False)


@pytest.fixture
def runs(cluster):
    made = []

    def make(*args, **kw):
        r = Run(cluster, *args, **kw)
        made.append(r)
        return r
    yield make
    for r in made:
        r.cancel()
    for r in made:
        try:
            r.wait_slurm(30)
        except AssertionError:
            pass


def test_ranks_follow_slurm_nodeid_and_the_job_completes(cluster, runs, tmp_path):
    """train.sbatch on three nodes: group ranks equal SLURM_NODEID, the
    agents asked for rejoin_timeout 0, the job closes, Slurm records
    COMPLETED with exit code 0."""
    r = runs(tmp_path, "train.sbatch", 3)
    gen, w = r.wait_world(3)
    for rank, env in w.items():
        assert env["GROUP_RANK"] == env["SLURM_NODEID"] == str(rank), env
        assert env["WORLD_SIZE"] == "3" and env["TORCHELASTIC_RUN_ID"] == r.id
    j = r.job()
    assert j.settings.rejoin_timeout_ms == 0 and j.settings.min_nodes == 3, j
    assert sorted((n.rank_hint, n.group_rank) for n in j.nodes) == \
        [(0, 0), (1, 1), (2, 2)], j
    r.stop_workers()
    sj = r.wait_slurm()
    assert sj["JobState"] == "COMPLETED" and sj["ExitCode"] == "0:0", \
        (sj, r.output())
    assert r.job().state == PB.types.JOB_STATE_CLOSED
    assert "job %s closed" % r.id in r.output(), r.output()


def test_kill_9_with_a_hot_spare_is_survived(cluster, runs, tmp_path):
    """train-spare.sbatch on three nodes (two training nodes and a spare):
    kill -9 of a training node's agent; the spare takes its place at once,
    training finishes, and Slurm records COMPLETED although srun saw a
    task killed."""
    r = runs(tmp_path, "train-spare.sbatch", 3)
    gen, w = r.wait_world(2)
    j = r.wait_job(lambda x: len(x.nodes) == 3, 20, "the spare joined")
    assert j.settings.min_nodes == 2 and j.settings.max_nodes == 2, j
    spare = [n for n in j.nodes if n.state == PB.types.NODE_STATE_SPARE]
    assert len(spare) == 1, j
    # The spare is the highest SLURM_NODEID, whoever joined first.
    assert spare[0].rank_hint == 2, j
    victim = [n for n in j.nodes if n.state == PB.types.NODE_STATE_PARTICIPANT
              and n.rank_hint != spare[0].rank_hint][0]
    pid = r.agent_pid(victim.rank_hint)
    assert pid is not None, "no agent for node %d" % victim.rank_hint
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    gen2, w2 = r.wait_world(2, after=gen, timeout=30)
    assert time.monotonic() - t0 < 20
    nodeids = sorted(e["SLURM_NODEID"] for e in w2.values())
    assert str(spare[0].rank_hint) in nodeids, w2
    assert all(e["TORCHELASTIC_RESTART_COUNT"] == "1" for e in w2.values()), w2
    r.stop_workers()
    sj = r.wait_slurm()
    assert sj["JobState"] == "COMPLETED" and sj["ExitCode"] == "0:0", \
        (sj, r.output())
    j = r.job()
    assert j.state == PB.types.JOB_STATE_CLOSED and j.restart_count == 1, j


def test_kill_9_without_a_spare_fails_within_seconds(cluster, runs, tmp_path):
    """train.sbatch: kill -9 of one agent fails the job within seconds (not
    the join timeout's ten minutes), naming the lost node; every other
    agent exits and Slurm records FAILED."""
    r = runs(tmp_path, "train.sbatch", 3)
    gen, w = r.wait_world(3)
    pid = r.agent_pid(1)
    assert pid is not None
    node = [n for n in r.job().nodes if n.rank_hint == 1][0]
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    j = r.wait_job(lambda x: x.state == PB.types.JOB_STATE_FAILED, 20,
                   "the job failed")
    assert time.monotonic() - t0 < 15
    assert "(node %d) was lost" % node.node_id in j.reason, j.reason
    assert "rejoin_timeout is 0" in j.reason, j.reason
    sj = r.wait_slurm(30)
    assert time.monotonic() - t0 < 30
    assert sj["JobState"] == "FAILED" and sj["ExitCode"] == "1:0", \
        (sj, r.output())
    assert "failed: node" in r.output(), r.output()


def test_kill_term_of_one_agent_fails_a_fixed_job_within_seconds(
        cluster, runs, tmp_path):
    """train.sbatch: kill -TERM of one agent (what a scancel of its step
    or a strict GPU check amounts to: a clean leave) fails the job within
    seconds, naming the node that left, rather than holding the allocation
    for the join timeout; Slurm records FAILED."""
    r = runs(tmp_path, "train.sbatch", 3)
    gen, w = r.wait_world(3)
    pid = r.agent_pid(2)
    assert pid is not None
    node = [n for n in r.job().nodes if n.rank_hint == 2][0]
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    j = r.wait_job(lambda x: x.state == PB.types.JOB_STATE_FAILED, 20,
                   "the job failed")
    assert time.monotonic() - t0 < 10
    assert "(node %d) left (" % node.node_id in j.reason, j.reason
    assert "rejoin_timeout is 0" in j.reason, j.reason
    assert j.restart_count == 0, j
    sj = r.wait_slurm(30)
    assert time.monotonic() - t0 < 30
    assert sj["JobState"] == "FAILED" and sj["ExitCode"] == "1:0", \
        (sj, r.output())
    assert "left (" in r.output(), r.output()


def test_kill_9_in_the_elastic_template_goes_on_with_fewer(cluster, runs,
                                                          tmp_path):
    """train-elastic.sbatch on three nodes (--nnodes 1:3): kill -9 of one
    agent; the other two restart their workers at once with world size 2,
    training finishes, Slurm records COMPLETED."""
    r = runs(tmp_path, "train-elastic.sbatch", 3)
    gen, w = r.wait_world(3)
    j = r.job()
    assert (j.settings.min_nodes, j.settings.max_nodes) == (1, 3), j
    pid = r.agent_pid(2)
    assert pid is not None
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    gen2, w2 = r.wait_world(2, after=gen, timeout=30)
    assert time.monotonic() - t0 < 20
    assert sorted(e["SLURM_NODEID"] for e in w2.values()) == ["0", "1"], w2
    assert all(e["WORLD_SIZE"] == "2" for e in w2.values()), w2
    r.stop_workers()
    sj = r.wait_slurm()
    assert sj["JobState"] == "COMPLETED" and sj["ExitCode"] == "0:0", \
        (sj, r.output())


def test_scancel_ends_the_rdzv_job_within_seconds(cluster, runs, tmp_path):
    """scancel: every agent gets SIGTERM and leaves; `rdzvctl status`
    shows the job ended ('cancelled: every node left') within seconds,
    not 'waiting' until its join timeout."""
    r = runs(tmp_path, "train.sbatch", 3)
    r.wait_world(3)
    t0 = time.monotonic()
    cluster.run("scancel", r.id)

    def ended():
        cp = subprocess.run([os.path.join(BINDIRS[1], "rdzvctl"), "--server",
                             cluster.rdzvd.addr, "status", r.id, "-o", "json"],
                            capture_output=True, text=True, timeout=20)
        assert cp.returncode == 0, cp.stderr
        j = json.loads(cp.stdout)
        return j if j["state"] == "failed" else None
    j = rt.wait_for(ended, 15, 0.2, "rdzvctl status shows the job ended")
    assert time.monotonic() - t0 < 15
    assert j["reason"] == "cancelled: every node left", j
    assert r.wait_slurm(30)["JobState"] == "CANCELLED"


def test_requeue_of_a_completed_job_runs_again_and_closes(cluster, runs, tmp_path):
    """scontrol requeue of a completed job runs it again under the same id
    with SLURM_RESTART_COUNT=1: the agents reopen the closed rdzv job as
    attempt 2, it closes, and Slurm records COMPLETED again."""
    r = runs(tmp_path, "train.sbatch", 3, mode="exit")
    sj = r.wait_slurm()
    assert sj["JobState"] == "COMPLETED", (sj, r.output())
    assert r.job().attempt == 1
    cluster.run("scontrol", "requeue", r.id)
    # A requeued job waits for its begin time; start it now.
    cluster.run("scontrol", "update", "JobId=%s" % r.id, "StartTime=now",
                check=False)
    j = r.wait_job(lambda x: x.attempt == 2 and
                   x.state == PB.types.JOB_STATE_CLOSED, 90,
                   "attempt 2 closed")
    assert any(e.kind == "reopened" and "after a requeue" in e.message
               for e in j.events), j
    sj = cluster.wait_state(r.id, ("COMPLETED", "FAILED"), 60)
    assert sj["JobState"] == "COMPLETED" and sj["Restarts"] == "1", \
        (sj, r.output())
    restarts = {e["TORCHELASTIC_RUN_ID"] for g in (1, 2, 3)
                for e in r.workers(g).values()
                if e.get("SLURM_RESTART_COUNT") == "1"}
    assert restarts == {r.id}, restarts
