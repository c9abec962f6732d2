"""rdzv-agent join --preload (docs/AGENT.md "Warm starts"): workers forked
from a python that imported torch while the agent joined. What a fresh
`python3 script` gives a script (its argv, sys.path[0], __main__, stdio,
exit code, command line) it gets here too; the agent supervises the worker
as its own child (its pid, exit statuses and signals, the stop timeout);
`-m module` works; a preload that fails, a fork server that dies or a
request it cannot carry is said once and the workers start by exec; workers
due while it still imports wait for it, their GPU check's timeout intact. The agent tests of worker supervision
run a second time with --preload (meson's agent_preload).
"""

import os
import signal

import rdzvagent
import rdzvtest as rt

AGENT = rdzvagent.AGENT

# A worker that says what it sees, then exits with $P_EXIT, or (P_MODE
# sleep) sleeps until killed, ignoring SIGTERM with P_MODE stubborn.
SCRIPT = r'''
import sys
PRELOADED = "torch" in sys.modules
SLOWMOD = "slowmod" in sys.modules
import json, os, signal, time
out = os.path.join(os.environ["P_OUT"], "w-g%s-r%s.json" % (
    os.environ["RDZV_GENERATION"], os.environ["RANK"]))
with open(out + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "preloaded": PRELOADED,
               "slowmod": SLOWMOD,
               "argv": sys.argv, "path0": sys.path[0], "name": __name__,
               "generation": int(os.environ["RDZV_GENERATION"]),
               "rank": int(os.environ["RANK"]),
               "cmdline": open("/proc/self/cmdline", "rb").read()
               .rstrip(b"\0").decode().split("\0"),
               "omp": os.environ.get("OMP_NUM_THREADS"),
               "threads": sys.modules["torch"].get_num_threads()
               if PRELOADED else None}, f)
os.rename(out + ".tmp", out)
print("out of rank", os.environ["RANK"])
mode = os.environ.get("P_MODE", "exit")
if mode == "raise":
    raise ValueError("boom")
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode in ("sleep", "stubborn"):
    time.sleep(120)
sys.exit(int(os.environ.get("P_EXIT", "0")))
'''


class Job(rdzvagent.AgentJob):
    env_kind = "w"

    def __init__(self, tmp_path, name):
        super().__init__(tmp_path, name)
        self.script = self.worker = os.path.join(self.tmp, "pworker.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)

    def agent(self, tag, preload="torch", cmd=None, nproc=1, env=None,
              args=()):
        argv = [AGENT, "join", "--id", self.id, "--server", self.daemon.addr,
                "--nproc-per-node", str(nproc), "--last-call", "1s",
                "--stop-timeout", "1s", "--tee", "--log-dir",
                os.path.join(self.tmp, "logs-" + tag)] + list(args)
        if preload:
            argv += ["--preload", preload]
        argv += ["--"] + (cmd or ["/usr/bin/python3", self.script, "x", "y"])
        e = {"P_OUT": self.out, "TMPDIR": self.tmp}
        e.update(env or {})
        p = rt.Proc(argv, env=e)
        self.agents[tag] = p
        return p

    def wfile(self, gen, rank=0, timeout=60):
        return rt.wait_for(lambda: self.files("w", gen).get((gen, rank)),
                           timeout, 0.05, "worker g%d r%d\n%s"
                           % (gen, rank, self.outputs()))


def never_fell_back(out):
    """No worker of this agent started by exec."""
    assert "the ordinary way" not in out, out


def job_for(tmp_path, request):
    return Job(tmp_path, rdzvagent.job_name(request))


def servers(agent_pid):
    """The fork servers among |agent_pid|'s children (`python -c ...`)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if ppid == agent_pid and len(argv) > 2 and argv[1] == b"-c":
            found.append(int(pid))
    return found


def test_usage(tmp_path):
    """--preload needs a python command and module names."""
    for argv, want in (
            (["--preload", "torch", "--", "/bin/true"],
             "the workers' command must be a python"),
            (["--preload", "torch;rm", "--", "/usr/bin/python3", "x.py"],
             "--preload torch;rm: expected module names"),
            (["--preload", "", "--", "/usr/bin/python3", "x.py"],
             "expected module names")):
        p = rt.Proc([AGENT, "join", "--id", "x"] + argv)
        assert p.wait(10) == 2, p.output()
        assert want in p.output(), p.output()
    p = rt.Proc([AGENT, "join", "--id", "x", "--", "/bin/true"],
                env={"RDZV_PRELOAD": "torch"})
    assert p.wait(10) == 2 and "--preload torch" in p.output(), p.output()


def test_script_as_python_runs_it(tmp_path, request):
    """A preloaded worker sees what `python3 script x y` gives it, its exit
    code is the agent's to report, and the agent is its parent."""
    job = job_for(tmp_path, request)
    try:
        a = job.agent("a", nproc=2, env={"P_EXIT": "3"})
        assert a.wait(60) == 1, a.output()
        out = a.output()
        for rank in (0, 1):
            w = job.wfile(1, rank)
            assert w["preloaded"], w
            assert w["argv"] == [job.script, "x", "y"], w
            assert w["path0"] == os.path.dirname(job.script), w
            assert w["name"] == "__main__", w
            assert w["cmdline"] == ["/usr/bin/python3", job.script, "x",
                                    "y"], w
            # OMP_NUM_THREADS=1 with two workers, as torchrun sets it,
            # and torch (loaded before it was set) agrees.
            assert w["omp"] == "1" and w["threads"] == 1, w
            assert "[rank %d]: out of rank %d" % (rank, rank) in out, out
            assert rt.read(os.path.join(job.tmp, "logs-a", "1", str(rank),
                                        "stdout.log")) == \
                b"out of rank %d\n" % rank
        assert "exited with code 3" in out, out
        assert "torch imported in" in out, out
        never_fell_back(out)
    finally:
        job.close()


def test_uncaught_exception_as_python(tmp_path, request):
    """An exception out of the script: python3's traceback, from the
    script's own frame, and exit status 1."""
    job = job_for(tmp_path, request)
    try:
        a = job.agent("a", env={"P_MODE": "raise"})
        assert a.wait(60) == 1, a.output()
        assert job.wfile(1)["preloaded"]
        err = rt.read(os.path.join(job.tmp, "logs-a", "1", "0",
                                   "stderr.log")).decode()
        line = SCRIPT.splitlines().index('    raise ValueError("boom")') + 1
        assert err == ('Traceback (most recent call last):\n'
                       '  File "%s", line %d, in <module>\n'
                       '    raise ValueError("boom")\n'
                       'ValueError: boom\n' % (job.script, line)), err
        assert "exited with code 1" in a.output(), a.output()
    finally:
        job.close()


def test_module_and_stop_timeout(tmp_path, request):
    """`python3 -m module`; a worker that ignores SIGTERM is killed at the
    stop timeout, and the agent reports the signal of a worker killed from
    outside; both as for an exec'd worker."""
    job = job_for(tmp_path, request)
    try:
        cmd = ["/usr/bin/python3", "-m", "pworker", "z"]
        a = job.agent("a", cmd=cmd, env={"P_MODE": "stubborn",
                                         "PYTHONPATH": job.tmp},
                      args=["--max-restarts", "1"])
        w = job.wfile(1)
        assert w["preloaded"] and w["argv"] == [job.script, "z"], w
        assert w["name"] == "__main__", w
        # Killed from outside: the agent sees the signal (its child).
        os.kill(w["pid"], signal.SIGKILL)
        rt.wait_for(lambda: "was killed by SIGKILL" in a.output(), 20, 0.05,
                    "the agent reporting SIGKILL\n" + a.output())
        w2 = job.wfile(2)
        assert w2["preloaded"] and w2["pid"] != w["pid"], w2
        # SIGTERM to the agent: the worker ignores it, SIGKILL follows.
        a.signal(signal.SIGTERM)
        assert a.wait(20) == 128 + signal.SIGTERM, a.output()
        assert "still running 1.0 s after SIGTERM: SIGKILL" in a.output(), \
            a.output()
        assert not rdzvagent.alive(w2["pid"]), w2
        never_fell_back(a.output())
    finally:
        job.close()


def test_failed_preload_falls_back(tmp_path, request):
    """A module that does not import: said once, workers start by exec."""
    job = job_for(tmp_path, request)
    try:
        a = job.agent("a", preload="torch,no_such_module_here", nproc=2)
        assert a.wait(60) == 0, a.output()
        out = a.output()
        assert out.count("workers start the ordinary way") == 1, out
        assert "its preload failed: ModuleNotFoundError" in out, out
        for rank in (0, 1):
            w = job.wfile(1, rank)
            assert not w["preloaded"], w
    finally:
        job.close()


def test_server_death_falls_back(tmp_path, request):
    """The fork server killed under a running job: said once; the next
    generation's worker starts by exec; the running one was not touched."""
    job = job_for(tmp_path, request)
    try:
        a = job.agent("a", env={"P_MODE": "sleep"},
                      args=["--max-restarts", "1"])
        w = job.wfile(1)
        assert w["preloaded"], w
        srv = servers(a.pid)
        assert len(srv) == 1, srv
        os.kill(srv[0], signal.SIGKILL)
        rt.wait_for(lambda: "workers start the ordinary way" in a.output(),
                    20, 0.05, "the agent saying the server died\n" +
                    a.output())
        assert rdzvagent.alive(w["pid"]), w
        os.kill(w["pid"], signal.SIGKILL)
        w2 = job.wfile(2)
        assert not w2["preloaded"], w2
        assert a.output().count("workers start the ordinary way") == 1
        a.signal(signal.SIGTERM)
        assert a.wait(20) == 128 + signal.SIGTERM, a.output()
    finally:
        job.close()


def test_non_utf8_environment_starts_by_exec(tmp_path, request):
    """An environment the server's socket cannot carry (JSON is UTF-8):
    that worker starts by exec, said, and the server stays."""
    job = job_for(tmp_path, request)
    try:
        a = job.agent("a", env={"P_ODD": "caf\udce9"})
        assert a.wait(60) == 0, a.output()
        w = job.wfile(1)
        assert not w["preloaded"], w
        out = a.output()
        assert "is not UTF-8: it starts the ordinary way" in out, out
        assert "workers start the ordinary way" not in out, out
    finally:
        job.close()


def test_slow_import_then_gpu_check(tmp_path, request):
    """Workers due while the server still imports (a module that takes
    1.2 s; no torch, whose import time varies with the load) wait for it,
    then run their GPU check (the stand-in libcuda) with its whole
    --gpucheck-timeout of 1 s counted from their start, not from before
    the wait, and pass it."""
    job = job_for(tmp_path, request)
    try:
        with open(os.path.join(job.tmp, "slowmod.py"), "w") as f:
            f.write("import time\ntime.sleep(1.2)\n")
        state = os.path.join(job.tmp, "fakecuda-state")
        os.makedirs(state)
        a = job.agent("a", preload="slowmod", args=[
            "--gpucheck", "exclude", "--gpucheck-timeout", "1s"],
            env={"PYTHONPATH": job.tmp,
                 "RDZV_LIBCUDA": rt.build_path("tests", "fakecuda",
                                               "libcuda.so.1"),
                 "FAKECUDA_STATE": state, "FAKECUDA_DEVICES": "1",
                 "RDZV_GPUCHECK_BYTES": "1MiB"})
        assert a.wait(60) == 0, a.output()
        w = job.wfile(1)
        out = a.output()
        assert w["slowmod"], "%s\n%s" % (w, out)
        assert "GPU check failed" not in out, out
        assert "slowmod imported in" in out, out
        never_fell_back(out)
    finally:
        job.close()
