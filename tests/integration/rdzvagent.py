"""One job run by real rdzv-agent processes on a private rdzvd, for the
tests of tests/integration/{agent,torch,gpu}: starting agents, the files
their workers leave (<kind>-g<generation>-r<rank>.json with "generation",
"rank" and "pid"), the job as Control shows it, and a close() that ends
every process it started."""

import glob
import json
import os
import re
import signal
import subprocess
import time

import grpc

import rdzvnode
import rdzvtest as rt

AGENT = rt.build_path("client", "agent", "rdzv-agent")

# The agent tests run a second time with the workers forked from a
# preloaded python (`--preload`, docs/AGENT.md), under meson's
# agent_preload entry: RDZVTEST_PRELOAD names the modules.
PRELOAD = os.environ.get("RDZVTEST_PRELOAD", "")


def preload_args():
    """--preload MODULES in the preload run, else nothing."""
    return ["--preload", PRELOAD] if PRELOAD else []


def check_preloaded(output):
    """In the preload run, that an agent started no worker by exec (its
    fork server failed, was not ready in time or could not take one: the
    test would have proven nothing about preloaded workers)."""
    if PRELOAD:
        assert "the ordinary way" not in output, output


def job_name(request):
    """A valid rdzv_id from the test's name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", request.node.name).strip("-")[:60]


def alive(pid, cmd=None):
    """Whether |pid| runs (not a zombie) and, given |cmd|, its command
    line holds it (the pid was not reused)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            line = f.read()
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and (cmd is None or cmd.encode() in line)


def children(pid):
    """The processes |pid| started, a line each with state and kernel wait
    channel: whether a worker that should have ended still runs, and where
    it sits."""
    lines = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != pid:
                continue
            with open(d + "/wchan") as f:
                wchan = f.read()
            with open(d + "/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        lines.append("  %s %s %s %s" % (d[6:], fields[0], wchan or "-", cmd))
    return "processes of agent %d:\n%s" % (pid, "\n".join(lines) or "  none")


class AgentJob:
    """A private rdzvd, the agents of one job on it, and the workers'
    files under self.out. Subclasses say how an agent is started."""

    worker = None           # the worker script; set by subclasses
    env_kind = "env"        # the file every worker leaves, with its pid

    def __init__(self, tmp_path, name, daemon=None):
        self.tmp = str(tmp_path)
        self.id = name
        self.out = os.path.join(self.tmp, "out")
        self.stop_file = os.path.join(self.tmp, "stop")
        os.makedirs(self.out)
        self.daemon = daemon or rt.Daemon(self.tmp)
        self.ctl = rdzvnode.Control(self.daemon.addr)
        self.agents = {}

    def start(self, tag, args, env, server=None, wrapper=()):
        """rdzv-agent join --id ID --server S ARGS -- python3 WORKER, under
        |wrapper| (a command line that execs it) if given."""
        argv = list(wrapper) + [AGENT, "join", "--id", self.id, "--server",
                                server or self.daemon.addr]
        argv += [str(a) for a in args] + preload_args()
        argv += ["--", "/usr/bin/python3", self.worker]
        p = rt.Proc(argv, env=env)
        p.tag = tag
        self.agents[tag] = p
        return p

    # -- the workers' files

    def files(self, kind, gen=None):
        """{(generation, rank): data} of the workers' |kind| files."""
        res = {}
        pat = "%s-g%s-r*.json" % (kind, "*" if gen is None else gen)
        for f in glob.glob(os.path.join(self.out, pat)):
            with open(f) as fp:
                d = json.load(fp)
            res[(d["generation"], d["rank"])] = d
        return res

    def by_rank(self, kind, gen):
        got = {r: d for (g, r), d in self.files(kind, gen).items()}
        # A worker that says whether it found torch imported before its
        # first line (worker.py, which never imports it) must have been
        # forked from the preloaded server in the preload run, and never
        # otherwise.
        for d in got.values():
            if "preloaded" in d:
                assert d["preloaded"] == ("torch" in PRELOAD.split(",")), d
        return got

    def wait_world(self, world, after=0, timeout=30):
        """The first generation above |after| whose ranks 0..world-1 all
        started: (generation, {rank: env file})."""
        def ok():
            for g in sorted({g for g, _ in self.files("env")}):
                got = self.by_rank("env", g)
                if g > after and sorted(got) == list(range(world)):
                    return g, got
            return None
        return rt.wait_for(ok, timeout, 0.05, "a generation above %d with %d "
                           "workers; have %s\n%s"
                           % (after, world, sorted(self.files("env")),
                              self.outputs()))

    def stop_workers(self):
        with open(self.stop_file, "w"):
            pass

    def finish(self, generation, timeout=30):
        """The workers end, every agent exits 0, and the job closes in
        |generation|, the only one whose workers ran, with no restart
        counted: a job that went through whatever the test did to it
        untouched. Returns the closed job."""
        self.stop_workers()
        assert self.wait_exits(timeout=timeout) == {t: 0 for t in self.agents}, \
            self.outputs()
        assert sorted({g for g, _ in self.files("env")}) == [generation]
        j = self.wait_job(lambda x: x.state == rdzvnode.pb.types.JOB_STATE_CLOSED,
                          15, "job closed")
        assert j.generation == generation and j.restart_count == 0, j
        return j

    # -- the agents and the job

    def job(self):
        return self.ctl.get_job(self.id, events=50)

    def wait_job(self, pred, timeout=30, what="job state"):
        last = {}

        def ok():
            try:
                last["job"] = self.job()
            except grpc.RpcError as e:
                # Not created yet, or a read that waited for a slow commit
                # past its deadline (docs/RDZVD.md): ask again.
                if e.code() not in (grpc.StatusCode.NOT_FOUND,
                                    grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                return None
            return last["job"] if pred(last["job"]) else None
        try:
            return rt.wait_for(ok, timeout, 0.05, what)
        except TimeoutError as e:
            raise AssertionError("%s; job:\n%s\n%s" % (e, last.get("job"),
                                                       self.outputs()))

    def wait_exits(self, tags=None, timeout=20):
        """Exit statuses of the agents |tags| (default all)."""
        res = {}
        deadline = time.monotonic() + timeout
        for t in tags or sorted(self.agents):
            try:
                res[t] = self.agents[t].wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError("agent %s did not exit within %d s:\n%s\n%s"
                                     % (t, timeout, children(self.agents[t].p.pid),
                                        self.outputs()))
        return res

    def outputs(self):
        return "\n".join("---- agent %s (exit %s)\n%s" % (t, p.p.poll(), p.output()[-4000:])
                         for t, p in sorted(self.agents.items()))

    def close(self, gentle=False, keep_daemon=False):
        """Ends the agents (SIGTERM first when |gentle|), then any worker
        still running, the Control channel and, unless |keep_daemon| (it
        serves other jobs too), rdzvd."""
        for p in self.agents.values():
            check_preloaded(p.output())
        self.stop_workers()
        for p in self.agents.values():
            if p.p.poll() is None:
                p.signal(signal.SIGTERM if gentle else signal.SIGKILL)
        for p in self.agents.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.signal(signal.SIGKILL)
                p.wait(10)
        # The workers die with their agent (PR_SET_PDEATHSIG); make sure.
        for d in self.files(self.env_kind).values():
            if alive(d["pid"], os.path.basename(self.worker)):
                os.kill(d["pid"], signal.SIGKILL)
        self.ctl.close()
        if not keep_daemon:
            self.daemon.stop()
