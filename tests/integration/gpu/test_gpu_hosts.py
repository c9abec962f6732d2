"""Host memory, quarantine and the on-quarantine hook (docs/HEALTH.md) with
real rdzv-agents on the stand-in libcuda (tests/fakecuda), each agent
naming its host with --host as Slurm's node names would: a GPU that fails
its check on one host quarantines it (host-gpu-failure = quarantine), its
node is evicted and the hot spare takes its place, its next join (in
another job) is refused naming the reason, the hook runs with the host and
the reason as arguments, `rdzvctl hosts` and /metrics show it, and an
admin's clear lets it join again. Also: the hook never goes through a
shell, a hung hook is killed at its timeout while rdzvd serves on, and
only an admin acts on a host. Every wait is bounded.
"""

import http.client
import json
import os
import re
import signal
import stat
import subprocess
import time

import pytest

import rdzvagent
import rdzvnode
import rdzvtest as rt

PB = rdzvnode.pb
AGENT = rdzvagent.AGENT
CTL = rt.build_path("client", "ctl", "rdzvctl")
FAKECUDA = rt.build_path("tests", "fakecuda", "libcuda.so.1")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuworker.py")
QUARANTINED = PB.types.HOST_STATE_QUARANTINED
OK = PB.types.HOST_STATE_OK

for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_", "FAKECUDA_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]
for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS"):
    os.environ.pop(k, None)


def hook_script(tmp, name, body):
    """An executable shell script; the hook itself is run without a shell,
    and the script only records what it was given."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, stat.S_IRWXU)
    return path


def record_args(out):
    """Shell lines that write the hook's arguments, one a line, to args-N
    in |out|, N counting the runs (each run starts after the one before it
    ended in these tests): numbered, not named by the hook's pid, since
    pids wrap (at 32768 on a small host) and a name's digits change, so
    their order is not the runs' order. Written whole, then renamed, so
    that a reader never sees half of it. Counted by the shell itself, so
    that a hung hook gets to its sleep well within its 1 s timeout on a
    busy host."""
    return ('n=0; for f in %s/args-*; do [ -e "$f" ] && n=$((n + 1)); done\n'
            'printf "%%s\\n" "$@" > %s/.args-$n\n'
            'mv %s/.args-$n %s/args-$n\n' % (out, out, out, out))


def recording_hook(tmp):
    """A hook that records its arguments (record_args) and prints a line
    for rdzvd's log."""
    out = os.path.join(tmp, "hook")
    os.makedirs(out)
    return out, hook_script(tmp, "hook.sh",
                            record_args(out) + 'echo "drained $1"\n')


def hook_runs(out):
    """The arguments of each run record_args saw, in the runs' order."""
    runs = []
    names = [f for f in os.listdir(out) if f.startswith("args-")]
    for f in sorted(names, key=lambda f: int(f[len("args-"):])):
        with open(os.path.join(out, f)) as fp:
            runs.append(fp.read().split("\n")[:-1])
    return runs


def http_port(d):
    return int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        return c.getresponse().read().decode()
    finally:
        c.close()


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)),
                  text, re.M)
    assert m, "%s%s not in /metrics" % (name, labels)
    return float(m.group(1))


def ctl(d, *args):
    return subprocess.run([CTL, "--server", d.addr] + list(args),
                          capture_output=True, text=True, timeout=30)


class Job(rdzvagent.AgentJob):
    """Agents of one job on a shared rdzvd, each on the stand-in libcuda
    with a state directory of its own (its faults' after= counts)."""

    worker = WORKER

    def agent(self, tag, host, args=(), nnodes="2", fake=None):
        state = os.path.join(self.tmp, "fakecuda-" + tag)
        os.makedirs(state, exist_ok=True)
        argv = ["--host", host, "--nnodes", nnodes, "--last-call", "1s",
                "--stop-timeout", "2s", "--nproc-per-node", "gpu",
                "--log-dir", os.path.join(self.tmp, "logs-" + tag),
                "--log-level", "debug"] + list(args)
        env = {"W_OUT": self.out, "W_TAG": tag, "W_STOP": self.stop_file,
               "W_MODE": "sleep", "TMPDIR": self.tmp,
               "RDZV_GPUCHECK_BYTES": "1MiB", "RDZV_LIBCUDA": FAKECUDA,
               "FAKECUDA_STATE": state, "FAKECUDA_DEVICES": "2"}
        env.update(fake or {})
        return self.start(tag, argv, env)

    def close(self, gentle=True, keep_daemon=True):
        super().close(gentle, keep_daemon=keep_daemon)


@pytest.fixture
def daemon(tmp_path):
    out, hook = recording_hook(str(tmp_path))
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0",
                             "--host-gpu-failure", "quarantine",
                             "--admin", "anonymous",
                             "--on-quarantine", hook,
                             "--on-quarantine-timeout", "10s"])
    d.http = http_port(d)
    d.hook_out = out
    yield d
    assert d.stop() == 0, d.output()[-3000:]


def test_failed_gpu_quarantines_host_and_the_spare_takes_over(daemon, tmp_path,
                                                              request):
    """Hosts n1 and n2 train (two GPUs each), n3 waits as the spare. Device
    1 of n2 passes the checks before its join and in generation 1, and
    fails in generation 2 (after a worker of n1 is killed): host n2 is
    quarantined, its node evicted, and generation 3 runs on n1 and the
    spare n3. n2's join to another job is refused naming the reason; the
    hook ran once with n2 and the reason; rdzvctl hosts, -o json and
    /metrics show it; once an admin clears n2 it joins again."""
    name = rdzvagent.job_name(request)
    job = Job(tmp_path / "a", name, daemon=daemon)
    other = Job(tmp_path / "b", name + "-other", daemon=daemon)
    try:
        job.agent("n1", "n1", ["--max-restarts", "3"])
        n2 = job.agent("n2", "n2", ["--max-restarts", "3"], fake={
            "FAKECUDA_FAIL": "1:alloc:CUDA_ERROR_ECC_UNCORRECTABLE:after=2"})
        g1, ws = job.wait_world(4)
        job.agent("n3", "n3", ["--max-restarts", "3"])
        job.wait_job(lambda j: any(n.state == PB.types.NODE_STATE_SPARE
                                   for n in j.nodes), 20, "n3 a spare")
        # A worker of n1 killed: generation 2, where n2's device 1 fails.
        victim = [d for d in ws.values() if d["tag"] == "n1"][0]
        os.kill(victim["pid"], signal.SIGKILL)
        n2.wait_line(r"GPU check failed: device 1 .*alloc failed: "
                     r"CUDA_ERROR_ECC_UNCORRECTABLE", timeout=30)
        j = job.wait_job(lambda j: j.generation > 2 and
                         j.state == PB.types.JOB_STATE_RUNNING and
                         sorted(n.hostname for n in j.nodes if
                                n.state == PB.types.NODE_STATE_PARTICIPANT)
                         == ["n1", "n3"], 30, "a round on n1 and the spare n3")
        g3, ws3 = job.wait_world(4, after=j.generation - 1)
        assert sorted({d["tag"] for d in ws3.values()}) == ["n1", "n3"]
        # The kill counted once; the eviction is no failure.
        assert j.restart_count == 1, j
        evicted = [n for n in j.nodes if n.hostname == "n2"]
        assert evicted and all(n.state == PB.types.NODE_STATE_EVICTED
                               for n in evicted), j
        kinds = [(e.kind, e.message) for e in j.events]
        assert any(k == "host" and "host n2 quarantined: GPU check failed on "
                   "device 1 (alloc: CUDA_ERROR_ECC_UNCORRECTABLE)" in m
                   for k, m in kinds), kinds
        assert any(k == "evicted" and "host n2 quarantined" in m
                   for k, m in kinds), kinds
        assert job.agents["n2"].wait(20) == 4, job.outputs()

        # The record.
        h = job.ctl.list_hosts()
        assert h["n2"].state == QUARANTINED, h
        assert "GPU check failed on device 1 (alloc: CUDA_ERROR_ECC_" \
            "UNCORRECTABLE) in job %s" % name in h["n2"].reason
        assert [(g.device, g.ok) for g in h["n2"].gpus] == [(0, True), (1, False)]
        # Healthy hosts have no record: nothing was held against them.
        assert sorted(h) == ["n2"], h

        # Another job: n2 is refused, naming the host and the reason.
        o2 = other.agent("n2", "n2", nnodes="1")
        assert o2.wait(20) == 4, o2.output()
        assert re.search(r"host n2 is quarantined since .*GPU check failed "
                         r"on device 1 .*rdzvctl host clear n2", o2.output()), \
            o2.output()

        # The hook ran once, with the host and the reason as arguments.
        rt.wait_for(lambda: hook_runs(daemon.hook_out), 15, 0.05, "the hook")
        runs = hook_runs(daemon.hook_out)
        assert len(runs) == 1 and runs[0][0] == "n2" and \
            runs[0][1].startswith("GPU check failed on device 1"), runs
        daemon.wait_line(r"on-quarantine for host n2 exited 0: drained n2",
                         timeout=10)

        # rdzvctl and /metrics.
        r = ctl(daemon, "hosts")
        assert r.returncode == 0, r.stderr
        line = [l for l in r.stdout.splitlines() if l.startswith("n2 ")]
        assert line and "quarantined" in line[0] and "1/2" in line[0] and \
            "GPU check failed" in line[0], r.stdout
        assert r.stdout.splitlines()[0].split() == [
            "HOST", "STATE", "SINCE", "CRASHES", "GPUS", "HOOK", "REASON"], \
            r.stdout
        assert "exited 0" in line[0], r.stdout
        r = ctl(daemon, "hosts", "--state", "quarantined", "-o", "json")
        assert r.returncode == 0, r.stderr
        hosts = json.loads(r.stdout)["hosts"]
        assert [x["name"] for x in hosts] == ["n2"], hosts
        assert hosts[0]["state"] == "quarantined"
        assert hosts[0]["gpus"][1]["error"] == "CUDA_ERROR_ECC_UNCORRECTABLE"
        assert hosts[0]["hook"]["state"] == "exited" and \
            hosts[0]["hook"]["exit_code"] == 0 and \
            hosts[0]["hook"]["output"] == "drained n2", hosts[0]["hook"]
        m = metrics(daemon.http)
        assert metric(m, "rdzvd_hosts", '{state="quarantined"}') == 1
        assert metric(m, "rdzvd_hosts", '{state="ok"}') == 0
        assert metric(m, "rdzvd_quarantine_hook_runs_total") == 1
        assert metric(m, "rdzvd_quarantine_hook_failures_total") == 0

        # Cleared by an admin, n2 joins again.
        r = ctl(daemon, "host", "clear", "n2", "--reason", "GPU replaced")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == "host n2: ok: cleared by anonymous: " \
            "GPU replaced", r.stdout
        # What the hook did is not undone by the clear: a reminder.
        assert lines[1].startswith("note: rdzvd's on-quarantine command "
                                   "ran for n2 (exited 0: drained n2)"), \
            r.stdout
        assert "scontrol update NodeName=n2 State=RESUME" in lines[1]
        o3 = other.agent("n2b", "n2", nnodes="1",
                         fake={"FAKECUDA_DEVICES": "1"})
        other.wait_world(1)
        assert o3.p.poll() is None
        assert len(hook_runs(daemon.hook_out)) == 1
    finally:
        other.close()
        job.close()


def test_hook_gets_arguments_not_a_shell_and_is_killed_at_its_timeout(tmp_path):
    """An admin quarantines hosts by hand: the hook gets the host and the
    reason as they are, shell syntax and all, and runs none of it; a hook
    that hangs is killed at on-quarantine-timeout and logged, while rdzvd
    answers calls throughout; a non-admin may not act on a host."""
    out, _ = recording_hook(str(tmp_path))
    hook = hook_script(str(tmp_path), "slow.sh",
                       record_args(out) +
                       'case "$1" in hang*) echo going to sleep; '
                       'exec sleep 60;; esac\n')
    d = rt.Daemon(tmp_path, ["--admin", "anonymous", "--on-quarantine", hook,
                             "--on-quarantine-timeout", "1s",
                             "--http-listen", "none"])
    try:
        evil = "x;touch %s/pwned-host" % tmp_path
        reason = "$(touch %s/pwned-1) `touch %s/pwned-2` \"q\" 'r'\\" % (
            tmp_path, tmp_path)
        r = ctl(d, "host", "quarantine", evil, "--reason", reason)
        assert r.returncode == 0, r.stderr
        # rdzvctl waited for the hook and says what it did.
        assert r.stdout.splitlines()[1] == "on-quarantine: %s %s exited " \
            "0" % (hook, evil), r.stdout
        rt.wait_for(lambda: hook_runs(out), 10, 0.05, "the hook")
        assert hook_runs(out) == [[evil, "quarantined by anonymous: " + reason]]
        assert not [f for f in os.listdir(str(tmp_path)) if "pwned" in f]

        t0 = time.monotonic()
        p = subprocess.Popen([CTL, "--server", d.addr, "host", "quarantine",
                              "hang1", "--reason", "test"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        # rdzvd serves while the hook sleeps (and rdzvctl waits for it).
        with rdzvnode.Control(d.addr) as c:
            assert c.server_info().version
            rt.wait_for(lambda: "hang1" in c.list_hosts() and
                        c.list_hosts()["hang1"].hook.state ==
                        PB.types.HOOK_RUN_STATE_RUNNING, 10, 0.05,
                        "hang1's hook running")
            assert c.list_hosts()["hang1"].state == QUARANTINED
            assert p.poll() is None
        stdout, stderr = p.communicate(timeout=15)
        # The hook was killed at its timeout: the quarantine stands, and
        # rdzvctl says the scheduler was not told (exit 1).
        assert p.returncode == 1, (p.returncode, stdout, stderr)
        assert stdout.startswith("host hang1: quarantined: "), stdout
        assert "host hang1 is quarantined in rdzvd, but its on-quarantine " \
            "command failed (killed: going to sleep)" in stderr, stderr
        d.wait_line(r"on-quarantine for host hang1 was killed after 1000 ms: "
                    r"going to sleep", timeout=15)
        assert time.monotonic() - t0 < 10
        # What a client sent is printed escaped, as everywhere in rdzvctl.
        r = ctl(d, "host", "quarantine", "esc", "--reason", "a\x1b]0;t\x07b\nc")
        assert r.returncode == 0 and "\x1b" not in r.stdout, r.stdout
        r = ctl(d, "hosts")
        assert r.returncode == 0
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout, r.stdout
        assert "a\\e]0;t\\x07b\\nc" in r.stdout, r.stdout
        # A second quarantine with the same reason runs nothing; a new
        # reason runs the hook again, so that the scheduler's follows.
        rt.wait_for(lambda: len(hook_runs(out)) == 3, 10, 0.05, "esc's hook")
        d.wait_line(r"on-quarantine for host esc exited 0", timeout=10)
        r = ctl(d, "host", "quarantine", "esc", "--reason",
                "a\x1b]0;t\x07b\nc")
        assert r.returncode == 0, r.stderr
        assert len(hook_runs(out)) == 3
        r = ctl(d, "host", "quarantine", "esc", "--reason", "again")
        assert r.returncode == 0, r.stderr
        # rdzvctl waited for that run: it has ended, its record is there.
        assert r.stdout.splitlines()[1] == "on-quarantine: %s esc exited " \
            "0" % hook, r.stdout
        assert len(hook_runs(out)) == 4
        assert hook_runs(out)[3] == ["esc", "quarantined by anonymous: again"]
    finally:
        d.stop()

    d = rt.Daemon(tmp_path / "plain", ["--http-listen", "none"])
    try:
        r = ctl(d, "host", "quarantine", "n9", "--reason", "x")
        assert r.returncode == 4, (r.returncode, r.stderr)
        assert "anonymous may not quarantine host n9 (only an admin may)" in \
            r.stderr, r.stderr
        r = ctl(d, "hosts")
        assert r.returncode == 0 and "no host is recorded" in r.stdout, r.stdout
        r = ctl(d, "host", "reboot", "n9")
        assert r.returncode == 2, r.stderr
    finally:
        d.stop()


def test_settings(tmp_path):
    """The host-* and on-quarantine settings: defaults, bounds, a hook that
    is not there, all refused at start naming the setting."""
    def check(*args):
        return subprocess.run([rt.build_path("daemon", "rdzvd"), "--config",
                               "/dev/null", "--check-config"] + list(args),
                              capture_output=True, text=True, timeout=20)
    r = check()
    assert r.returncode == 0, r.stderr
    for line in ("host-gpu-failure = suspect", "host-suspect-crashes = 2",
                 "host-quarantine-crashes = 0", "host-crash-window = 3600000ms",
                 "on-quarantine = ", "on-quarantine-timeout = 60000ms"):
        assert line + "\n" in r.stdout, (line, r.stdout)
    r = check("--host-gpu-failure", "quarantine", "--host-quarantine-crashes",
              "3", "--host-crash-window", "30m", "--on-quarantine",
              "/bin/true")
    assert r.returncode == 0, r.stderr
    assert "host-gpu-failure = quarantine\n" in r.stdout
    assert "host-crash-window = 1800000ms\n" in r.stdout
    for args, msg in [
            (["--host-gpu-failure", "drain"],
             "--host-gpu-failure: invalid value 'drain'"),
            (["--host-quarantine-crashes", "65"],
             "--host-quarantine-crashes: 65 is above the maximum of 64"),
            (["--host-crash-window", "0"], "host-crash-window"),
            (["--on-quarantine", str(tmp_path / "missing")],
             "--on-quarantine %s: No such file or directory"
             % (tmp_path / "missing"))]:
        r = check(*args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
