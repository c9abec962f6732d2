"""The GPU check through rdzv-agent (SPEC §7), on the stand-in libcuda of
tests/fakecuda: the policies with a failing device, a device that fails
only when its worker starts, a hanging device, the agent never loading
libcuda itself, a node without any libcuda, and the options' older names
(--health-check, --health-timeout), which stay accepted.

Each agent gets its devices and faults through FAKECUDA_* variables
(tests/fakecuda/README.md) and a 1 MiB buffer (RDZV_GPUCHECK_BYTES). Every
wait is bounded.
"""

import glob
import json
import os
import re
import time

import pytest

import rdzvagent
import rdzvtest as rt

AGENT = rdzvagent.AGENT
FAKECUDA = rt.build_path("tests", "fakecuda", "libcuda.so.1")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuworker.py")

# The agents' own environment must not decide what is tested; and no
# loader path may lead to the stand-in except RDZV_LIBCUDA.
for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_", "FAKECUDA_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]
for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS"):
    os.environ.pop(k, None)


class Job(rdzvagent.AgentJob):
    """The agents of one job, each with its own stand-in devices."""

    worker = WORKER

    def __init__(self, tmp, name):
        super().__init__(tmp, name)
        self.state = os.path.join(self.tmp, "fakecuda-state")
        self.log = os.path.join(self.tmp, "fakecuda.log")
        os.makedirs(self.state)

    def agent(self, tag, args, nnodes="1", fake=None, mode="sleep"):
        """Starts an agent; |fake| is its FAKECUDA_* settings (None: no
        libcuda to find at all)."""
        argv = ["--nnodes", nnodes, "--last-call", "1s", "--stop-timeout", "2s",
                "--log-dir", os.path.join(self.tmp, "logs-" + tag),
                "--log-level", "debug"] + list(args)
        env = {"W_OUT": self.out, "W_TAG": tag, "W_STOP": self.stop_file,
               "W_MODE": mode, "TMPDIR": self.tmp, "RDZV_GPUCHECK_BYTES": "1MiB"}
        if fake is None:
            env["RDZV_LIBCUDA"] = os.path.join(self.tmp, "no", "libcuda.so.1")
        else:
            env.update({"RDZV_LIBCUDA": FAKECUDA, "FAKECUDA_STATE": self.state,
                        "FAKECUDA_LOG": self.log})
            env.update(fake)
        return self.start(tag, argv, env)

    def envs(self, gen=None):
        """{(generation, rank): worker file}."""
        return self.files("env", gen)

    def wait_world(self, world, after=0, timeout=30):
        """The first generation above |after| whose ranks 0..world-1 all
        started with WORLD_SIZE=world: (generation, {rank: file})."""
        def ok():
            for g in sorted({g for g, _ in self.envs()}):
                got = self.by_rank("env", g)
                if (g > after and sorted(got) == list(range(world)) and
                        all(d["env"]["WORLD_SIZE"] == str(world) for d in got.values())):
                    return g, got
            return None
        try:
            return rt.wait_for(ok, timeout, 0.05, "generation > %d with world %d"
                               % (after, world))
        except TimeoutError as e:
            raise AssertionError("%s; workers %s\n%s" % (e, sorted(self.envs()),
                                                         self.outputs()))

    def fake_calls(self):
        """The stand-in's log: [(pid, function, device, result)]."""
        try:
            with open(self.log) as f:
                return [(int(a), b, int(c), d) for a, b, c, d in
                        (line.split() for line in f)]
        except FileNotFoundError:
            return []

    def close(self):
        super().close(gentle=True)


@pytest.fixture
def job(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def node_of(job_pb, nproc):
    nodes = [n for n in job_pb.nodes if n.nproc == nproc]
    assert len(nodes) == 1, job_pb
    return nodes[0]


def gpu_map(node):
    return {g.device: g for g in node.gpus}


FOUR_DEV2_OOM = {"FAKECUDA_DEVICES": "4",
                 "FAKECUDA_FAIL": "2:alloc:CUDA_ERROR_OUT_OF_MEMORY"}


def test_exclude_heterogeneous(job):
    """Device 2 of 4 fails: the node joins with 3 workers on devices 0, 1
    and 3 beside a 1-worker node; the round has world size 4."""
    a = job.agent("a", ["--nproc-per-node", "gpu", "--gpucheck", "exclude"],
                  nnodes="2", fake=FOUR_DEV2_OOM)
    job.agent("b", ["--nproc-per-node", "1"], nnodes="2")
    gen, ws = job.wait_world(4)
    a_workers = {d["env"]["LOCAL_RANK"]: d["env"] for d in ws.values() if d["tag"] == "a"}
    b_workers = [d["env"] for d in ws.values() if d["tag"] == "b"]
    assert sorted(a_workers) == ["0", "1", "2"], ws
    assert len(b_workers) == 1
    for e in a_workers.values():
        assert e["LOCAL_WORLD_SIZE"] == "3"
        assert e["CUDA_VISIBLE_DEVICES"] == "0,1,3"
    assert b_workers[0]["LOCAL_WORLD_SIZE"] == "1"
    a.wait_line(r"GPU check failed: device 2 \(FakeCUDA GPU 2, GPU-[0-9a-f-]+\): "
                r"alloc failed: CUDA_ERROR_OUT_OF_MEMORY", timeout=5)

    j = job.wait_job(lambda j: j.world_size == 4 and len(j.nodes) == 2 and
                     any(len(n.gpus) == 4 for n in j.nodes), 10,
                     "the round and node A's four GPU results")
    na = node_of(j, 3)
    node_of(j, 1)
    g = gpu_map(na)
    assert sorted(g) == [0, 1, 2, 3], na
    assert not g[2].ok and g[2].failed_step == "alloc"
    assert g[2].error == "CUDA_ERROR_OUT_OF_MEMORY"
    assert g[2].name == "FakeCUDA GPU 2"
    for d in (0, 1, 3):
        assert g[d].ok and g[d].failed_step == "" and g[d].total_mem == 80 << 30
        assert g[d].name == "FakeCUDA GPU %d" % d
        assert g[d].uuid == "GPU-fa4ec0da-0000-4000-8000-%012x" % d
    assert (na.gpus_healthy, na.gpus_total) == (3, 4), na


def test_strict_does_not_join(job):
    """Under strict, a failed GPU keeps the node out: exit 1 naming the
    device, the step and the error; rdzvd never hears of the node."""
    a = job.agent("a", ["--nproc-per-node", "gpu", "--gpucheck", "strict"],
                  fake=FOUR_DEV2_OOM)
    rc = a.wait(20)
    out = a.output()
    assert rc == 1, out
    assert re.search(r"device 2 \(FakeCUDA GPU 2, [^)]*\): alloc failed: "
                     r"CUDA_ERROR_OUT_OF_MEMORY", out), out
    assert "strict" in out, out
    assert job.envs() == {}
    assert [j.rdzv_id for j in job.ctl.list_jobs(all=True)] == [], out


def test_warn_runs_all(job):
    """Under warn the failed GPU is reported and all four workers run.
    (The policy under its older option name, --health-check.)"""
    a = job.agent("a", ["--nproc-per-node", "gpu", "--health-check", "warn"],
                  fake=FOUR_DEV2_OOM)
    gen, ws = job.wait_world(4)
    for d in ws.values():
        assert d["env"]["LOCAL_WORLD_SIZE"] == "4"
    a.wait_line(r"device 2 .*alloc failed: CUDA_ERROR_OUT_OF_MEMORY", timeout=5)
    j = job.wait_job(lambda j: len(j.nodes) == 1 and len(j.nodes[0].gpus) == 4 and
                     any(not g.ok for g in j.nodes[0].gpus), 10,
                     "the node's GPU results with device 2 failed")
    g = gpu_map(j.nodes[0])
    assert not g[2].ok and g[2].failed_step == "alloc" and \
        g[2].error == "CUDA_ERROR_OUT_OF_MEMORY", j.nodes[0]
    assert all(g[d].ok for d in (0, 1, 3)), j.nodes[0]
    assert j.nodes[0].nproc == 4


def test_fails_when_worker_starts(job):
    """Device 2 passes the probe before the join but fails its check in
    its worker: the agent reports it, offers one worker fewer, and a new
    round forms with the world one smaller."""
    fake = {"FAKECUDA_DEVICES": "4",
            "FAKECUDA_FAIL": "2:alloc:CUDA_ERROR_ECC_UNCORRECTABLE:after=1"}
    a = job.agent("a", ["--nproc-per-node", "gpu"], nnodes="2", fake=fake)
    job.agent("b", ["--nproc-per-node", "1"], nnodes="2")
    # The first round has all five workers (it may already be superseded
    # when we look: its event stays).
    job.wait_job(lambda j: any(
        e.kind == "round" and e.generation == 1 and "world size 5" in e.message
        for e in j.events), 20, "a first round of world size 5")
    a.wait_line(r"GPU check failed: device 2 .*alloc failed: "
                r"CUDA_ERROR_ECC_UNCORRECTABLE", timeout=15)
    gen, ws = job.wait_world(4, after=1)
    a_envs = [d["env"] for d in ws.values() if d["tag"] == "a"]
    assert len(a_envs) == 3
    for e in a_envs:
        assert e["LOCAL_WORLD_SIZE"] == "3" and e["CUDA_VISIBLE_DEVICES"] == "0,1,3", e
    j = job.wait_job(lambda j: j.generation == gen and j.world_size == 4, 10,
                     "the smaller round")
    na = node_of(j, 3)
    g = gpu_map(na)
    assert not g[2].ok and g[2].failed_step == "alloc", na
    assert g[2].error == "CUDA_ERROR_ECC_UNCORRECTABLE"
    # A GPU leaving is a change of membership, not a failure.
    assert j.restart_count == 0, j
    # Device 2 was checked twice: by a probe child, then by its worker,
    # each a process of its own.
    checks = [c for c in job.fake_calls() if c[1] == "cuDevicePrimaryCtxRetain" and c[2] == 2]
    assert len(checks) == 2 and checks[0][0] != checks[1][0], checks
    assert a.pid not in (checks[0][0], checks[1][0])


def test_strict_worker_failure_leaves(job):
    """Under strict, a GPU that fails when its worker starts makes the node
    leave the job: the agent exits 1 naming the device, step and error."""
    fake = {"FAKECUDA_DEVICES": "2",
            "FAKECUDA_FAIL": "1:kernel:CUDA_ERROR_LAUNCH_FAILED:after=1"}
    a = job.agent("a", ["--nproc-per-node", "gpu", "--gpucheck", "strict"],
                  fake=fake)
    rc = a.wait(30)
    out = a.output()
    assert rc == 1, out
    assert re.search(r"device 1 \(FakeCUDA GPU 1, [^)]*\): kernel failed: "
                     r"CUDA_ERROR_LAUNCH_FAILED", out), out
    j = job.wait_job(lambda j: len(j.nodes) == 1 and len(j.nodes[0].gpus) == 2, 10,
                     "the node's GPU results")
    assert not gpu_map(j.nodes[0])[1].ok, j


def test_strict_leave_fails_a_fixed_job_at_once(job):
    """A node that leaves for its GPU (strict) is a departure like any
    other (rule 13): in a fixed 2-node job with --rejoin-timeout 0 the job
    fails within seconds, naming the node and the GPU check, and the other
    agent exits 1 rather than idling for the join timeout."""
    fake = {"FAKECUDA_DEVICES": "2",
            "FAKECUDA_FAIL": "1:kernel:CUDA_ERROR_LAUNCH_FAILED:after=1"}
    fixed = ["--rejoin-timeout", "0"]
    b = job.agent("b", ["--nproc-per-node", "1", "--gpucheck", "off",
                        "--node-rank", "1"] + fixed, nnodes="2")
    a = job.agent("a", ["--nproc-per-node", "gpu", "--gpucheck", "strict",
                        "--node-rank", "0"] + fixed, nnodes="2", fake=fake)
    assert a.wait(30) == 1, a.output()
    t0 = time.monotonic()
    assert b.wait(15) == 1, job.outputs()
    assert time.monotonic() - t0 < 10
    j = job.wait_job(lambda j: j.state == rt.protos().types.JOB_STATE_FAILED,
                     10, "the job failed")
    assert re.search(r"\(node \d+\) left \(GPU check failed: device 1 ",
                     j.reason), j.reason
    assert "rejoin_timeout is 0" in j.reason, j.reason


def test_hang_killed(job):
    """Device 1 hangs in its kernel: the check is killed after
    --gpucheck-timeout and counts as failed; the node joins with device 0.
    (The timeout under its older option name, --health-timeout.)"""
    fake = {"FAKECUDA_DEVICES": "2", "FAKECUDA_HANG": "1"}
    t0 = time.monotonic()
    a = job.agent("a", ["--nproc-per-node", "gpu", "--health-timeout", "1500ms"],
                  fake=fake)
    gen, ws = job.wait_world(1)
    took = time.monotonic() - t0
    assert ws[0]["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert 1.5 <= took < 15, took
    a.wait_line(r"device 1 \(FakeCUDA GPU 1, [^)]*\): kernel failed: "
                r"timeout after 1500 ms", timeout=5)
    j = job.wait_job(lambda j: len(j.nodes) == 1 and len(j.nodes[0].gpus) == 2, 10,
                     "the node's GPU results")
    g = gpu_map(j.nodes[0])
    assert g[0].ok and not g[1].ok, j.nodes[0]
    assert g[1].failed_step == "kernel" and g[1].error == "timeout after 1500 ms"
    # The hung process is gone, killed and reaped.
    hung = [c[0] for c in job.fake_calls() if c[3] == "HANG"]
    assert len(hung) == 1, job.fake_calls()
    rt.wait_for(lambda: not rdzvagent.alive(hung[0]), 5, what="the hung check to be gone")


def test_hang_in_worker_killed(job):
    """Device 1 passes the probe, then hangs in its worker's check: the
    agent kills that worker after --gpucheck-timeout, leaves the GPU out
    and runs on with one worker fewer."""
    fake = {"FAKECUDA_DEVICES": "2", "FAKECUDA_HANG": "1:kernel:after=1"}
    a = job.agent("a", ["--nproc-per-node", "gpu", "--gpucheck-timeout", "1500ms"],
                  fake=fake)
    job.wait_job(lambda j: any(
        e.kind == "round" and e.generation == 1 and "world size 2" in e.message
        for e in j.events), 20, "a first round of world size 2")
    gen, ws = job.wait_world(1, after=1, timeout=30)
    assert ws[0]["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    a.wait_line(r"GPU check failed: device 1\b.*timeout", timeout=5)
    j = job.wait_job(lambda j: j.generation == gen and j.world_size == 1 and
                     len(j.nodes) == 1 and len(j.nodes[0].gpus) == 2, 10,
                     "the smaller round with both GPU results")
    g = gpu_map(j.nodes[0])
    assert g[0].ok and not g[1].ok and "timeout" in g[1].error, j.nodes[0]
    hung = [c[0] for c in job.fake_calls() if c[3] == "HANG"]
    assert len(hung) == 1, job.fake_calls()
    rt.wait_for(lambda: not rdzvagent.alive(hung[0]), 5, what="the hung worker to be gone")


def preload_servers(agent):
    """The fork servers (--preload) among |agent|'s children."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(d + "/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if ppid == agent and len(argv) > 2 and argv[1] == b"-c":
            found.append(int(d[6:]))
    return found


def test_agent_never_maps_libcuda(job):
    """The agent forks its checks; libcuda is never in its own address
    space, while the checks did run (in other processes)."""
    a = job.agent("a", ["--nproc-per-node", "gpu"], fake={"FAKECUDA_DEVICES": "2"})
    gen, ws = job.wait_world(2)
    with open("/proc/%d/maps" % a.pid) as f:
        maps = f.read()
    assert "libcuda" not in maps and "fakecuda" not in maps, maps
    calls = job.fake_calls()
    pids = {c[0] for c in calls if c[1] == "cuInit"}
    # A count, two probes and two workers' checks: five processes.
    assert len(pids) == 5, calls
    assert a.pid not in pids
    worker_pids = {d["pid"] for d in ws.values()}
    if not rdzvagent.PRELOAD:
        # The workers' checks ran in the workers themselves (before exec).
        assert worker_pids <= pids, (worker_pids, pids)
    else:
        # Forked from the preloaded python, which must never load libcuda,
        # each worker ran its check in a process of its own (rdzv-agent
        # gpucheck-worker) before its script.
        assert not worker_pids & pids, (worker_pids, pids)
        servers = preload_servers(a.pid)
        assert len(servers) == 1, servers
        with open("/proc/%d/maps" % servers[0]) as f:
            maps = f.read()
        assert "libcuda" not in maps and "fakecuda" not in maps, maps


def test_no_libcuda_gpucheck(tmp_path):
    """Without any libcuda, gpucheck says so and exits non-zero."""
    for env in ({}, {"RDZV_LIBCUDA": str(tmp_path / "libcuda.so.1")}):
        p = rt.Proc([AGENT, "gpucheck"], env=env)
        rc = p.wait(15)
        out = p.output()
        assert rc == 1, out
        assert "cannot load libcuda" in out and "libcuda.so.1" in out, out


def test_no_libcuda_auto_one_worker(job):
    """--nproc-per-node auto on a node without libcuda: one worker, with a
    notice, and the job runs."""
    a = job.agent("a", ["--nproc-per-node", "auto"], fake=None, mode="exit")
    rc = a.wait(30)
    out = a.output()
    assert rc == 0, out
    assert re.search(r"no GPU found \(cannot load libcuda: [^)]*\): "
                     r"--nproc-per-node auto runs one worker", out), out
    ws = job.envs()
    assert len(ws) == 1, ws
    e = list(ws.values())[0]["env"]
    assert e["WORLD_SIZE"] == "1" and e["LOCAL_WORLD_SIZE"] == "1"


def test_gpucheck_cli(tmp_path):
    """rdzv-agent gpucheck by hand: the table and JSON, exit statuses."""
    env = {"RDZV_LIBCUDA": FAKECUDA, "FAKECUDA_DEVICES": "3",
           "FAKECUDA_MISMATCH": "1:3"}
    p = rt.Proc([AGENT, "gpucheck", "--bytes", "1MiB"], env=env)
    assert p.wait(20) == 1
    out = p.output()
    assert "device 1 (FakeCUDA GPU 1, GPU-fa4ec0da-0000-4000-8000-000000000001): "
    "verify failed: mismatch at element 3 (1 wrong)" in out, out
    assert re.search(r"^  verify +[0-9.]+ ms  FAILED$", out, re.M), out
    assert "2 of 3 devices passed" in out, out

    p = rt.Proc([AGENT, "gpucheck", "--device", "2", "-o", "json", "--bytes", "64KiB"],
                env=env)
    assert p.wait(20) == 0
    d = json.loads("\n".join(p.out_lines))
    assert (d["passed"], d["failed"], d["bytes"]) == (1, 0, 65536)
    dev = d["devices"][0]
    assert dev["device"] == 2 and dev["ok"] and dev["name"] == "FakeCUDA GPU 2"
    assert [s["name"] for s in dev["steps"]][:3] == ["libcuda", "cuInit", "driver_version"]
    assert all(isinstance(s["elapsed_us"], int) for s in dev["steps"])
    assert "failed_step" not in dev

    p = rt.Proc([AGENT, "gpucheck", "--device", "3"], env=env)
    assert p.wait(20) == 2
    assert "--device 3: this node has 3 GPUs (0 to 2)" in p.output()
    p = rt.Proc([AGENT, "gpucheck", "--device", "x"], env=env)
    assert p.wait(20) == 2
    p = rt.Proc([AGENT, "gpucheck"], env={"RDZV_LIBCUDA": FAKECUDA,
                                          "FAKECUDA_DEVICES": "0"})
    assert p.wait(20) == 1
    assert "libcuda found no GPU" in p.output()


def test_option_names(tmp_path):
    """The GPU check's options under their names and their older names
    (--health-check, --health-timeout, RDZV_HEALTH_CHECK, ...): each is
    read, an error names the option or variable as it was given, and of
    the two variables the new one wins."""
    def run(args, env=None):
        p = rt.Proc([AGENT] + args, env=dict(env or {}, TMPDIR=str(tmp_path)))
        return p.wait(15), p.output()

    join = ["join", "--id", "x", "--server", "unix:" + str(tmp_path / "none")]
    for flag in ("--gpucheck", "--health-check"):
        rc, out = run(join + [flag, "sometimes", "--", "true"])
        assert rc == 2, out
        assert "%s sometimes: expected off, warn, exclude or strict" % flag in out, out
    for flag in ("--gpucheck-timeout", "--health-timeout"):
        rc, out = run(join + [flag, "soon", "--", "true"])
        assert rc == 2 and "%s soon: expected a duration" % flag in out, out
    for var in ("RDZV_GPUCHECK", "RDZV_HEALTH_CHECK"):
        rc, out = run(join + ["--", "true"], env={var: "sometimes"})
        assert rc == 2 and "%s=sometimes: expected off" % var in out, out
    for var in ("RDZV_GPUCHECK_TIMEOUT", "RDZV_HEALTH_TIMEOUT"):
        rc, out = run(join + ["--", "true"], env={var: "soon"})
        assert rc == 2 and "%s=soon: expected a duration" % var in out, out
    rc, out = run(join + ["--", "true"], env={"RDZV_GPUCHECK": "sometimes",
                                              "RDZV_HEALTH_CHECK": "off"})
    assert rc == 2 and "RDZV_GPUCHECK=sometimes" in out, out
    # A valid older variable is used: strict on a node without libcuda
    # refuses to run (exit 1), where the default for a fixed count, off,
    # would try to join (and fail to reach rdzvd: exit 3).
    rc, out = run(join + ["--connect-timeout", "100ms", "--", "true"],
                  env={"RDZV_HEALTH_CHECK": "strict",
                       "RDZV_LIBCUDA": str(tmp_path / "libcuda.so.1")})
    assert rc == 1 and "--health-check strict: no GPU found" in out, out

    for flag in ("--gpucheck-timeout", "--health-timeout"):
        rc, out = run(["gpucheck", flag, "soon"])
        assert rc == 2 and "gpucheck: %s soon: not a duration" % flag in out, out
    rc, out = run(["gpucheck", "--help"])
    assert rc == 0 and "--gpucheck-timeout" in out and "--health-timeout" in out, out


STUB = "/usr/local/cuda/lib64/stubs/libcuda.so"


def exports(path):
    import subprocess
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if " T " in line}


@pytest.mark.skipif(not os.path.exists(STUB), reason="no CUDA toolkit stub libcuda")
def test_fakecuda_exports_real_names():
    """Every entry point of the stand-in is one the real libcuda exports
    (the toolkit's stub carries the driver's symbol table), and the old-ABI
    names the check must not use are absent from it."""
    fake, real = exports(FAKECUDA), exports(STUB)
    assert fake and fake <= real, sorted(fake - real)
    for old in ("cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH",
                "cuMemGetInfo", "cuDeviceTotalMem", "cuDevicePrimaryCtxRelease"):
        assert old in real and old not in fake, old
        assert old + "_v2" in fake, old
