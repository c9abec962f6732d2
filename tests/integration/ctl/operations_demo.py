#!/usr/bin/python3
"""Runs the cases of docs/OPERATIONS.md for real and prints what an operator
sees: a private rdzvd, four rdzv-agents (each in a UTS namespace of its own,
so each has its own hostname: needs root and unshare), one of them on a
node whose GPU 2 fails its check (the test suite's stand-in libcuda with a
fault), and rdzvctl's output at each step.

    RDZV_BUILD_ROOT=$PWD/build /usr/bin/python3 tests/integration/ctl/operations_demo.py

Not a test: it waits like an operator would, and prints a transcript.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import rdzvtest as rt  # noqa: E402

RDZVCTL = rt.build_path("client", "ctl", "rdzvctl")
AGENT = rt.build_path("client", "agent", "rdzv-agent")
LIBCUDA = rt.build_path("tests", "fakecuda", "libcuda.so.1")
WORKER = os.path.join(HERE, "ctlworker.py")
JOB = "train-7"


def say(text=""):
    print(text, flush=True)


def ctl(*args, show=True):
    cp = subprocess.run([RDZVCTL] + list(args), capture_output=True, text=True)
    if show:
        say("$ rdzvctl " + " ".join(a if " " not in a else '"%s"' % a for a in args))
        out = cp.stdout + cp.stderr
        say(out.rstrip("\n"))
        if cp.returncode:
            say("$ echo $?\n%d" % cp.returncode)
        say()
    return cp


def main():
    tmp = tempfile.mkdtemp(prefix="rdzv-ops-")
    out, stop = os.path.join(tmp, "out"), os.path.join(tmp, "stop")
    os.makedirs(out)
    daemon = rt.Daemon(tmp, listen="127.0.0.1:0")
    os.environ["RDZV_SERVER"] = daemon.addr
    agents = {}

    def agent(host, fault=None):
        env = {"W_OUT": out, "W_STOP": stop, "RDZV_LIBCUDA": LIBCUDA,
               "FAKECUDA_DEVICES": "4", "FAKECUDA_FAIL": fault or ""}
        argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                AGENT, "join", "--id", JOB, "--nnodes", "3:4", "--nproc-per-node", "gpu",
                "--node-rank", host[-1:], "--stop-timeout", "5s",
                "--log-dir", os.path.join(tmp, "logs-" + host),
                "--", "/usr/bin/python3", WORKER]
        agents[host] = rt.Proc(argv, env=env)
        return agents[host]

    def job():
        import rdzvnode
        with rdzvnode.Control(daemon.addr) as c:
            return c.get_job(JOB)

    try:
        say("## A job stuck waiting for nodes\n")
        agent("gpu-node-01")
        agent("gpu-node-02")
        rt.wait_for(lambda: len(job().nodes) == 2 if _exists(daemon) else False, 20,
                    what="two nodes")
        time.sleep(3)
        ctl("status")
        ctl("status", JOB)
        watch = rt.Proc([RDZVCTL, "status", JOB, "--watch"])
        watch.wait_line(" node 2 ")
        mark = len(watch.lines)

        say("## A node with a bad GPU joins\n")
        agent("gpu-node-03", fault="2:copy_back:CUDA_ERROR_ECC_UNCORRECTABLE")
        agent("gpu-node-04")
        rt.wait_for(lambda: job().generation == 1, 30, what="round 1")
        rt.wait_for(lambda: len([f for f in os.listdir(out) if f.startswith("start-g1-")])
                    == 15, 30, what="15 workers")
        time.sleep(2)
        say("$ rdzvctl status %s --watch | cat     # in another terminal, meanwhile" % JOB)
        say("\n".join(watch.lines[mark:]))
        say()
        ctl("status", JOB)
        ctl("status", JOB, "-o", "json", show=False)
        say("## Evicting the node\n")
        node3 = [n for n in job().nodes if n.hostname == "gpu-node-03"][0]
        mark = len(watch.lines)
        ctl("evict", JOB, "gpu-node-03", "--reason", "GPU 2 uncorrectable ECC errors; host drained")
        rc = agents["gpu-node-03"].wait(20)
        say("# on gpu-node-03, rdzv-agent's last lines (exit status %d):" % rc)
        say("\n".join(agents["gpu-node-03"].lines[-3:]))
        say()
        rt.wait_for(lambda: job().generation == 2, 30, what="round 2")
        rt.wait_for(lambda: len([f for f in os.listdir(out) if f.startswith("start-g2-")])
                    == 12, 30, what="12 workers")
        time.sleep(1)
        say("$ rdzvctl status %s --watch | cat     # still running" % JOB)
        say("\n".join(watch.lines[mark:]))
        say()
        ctl("status", JOB)
        ctl("events", JOB)
        ctl("evict", JOB, str(node3.node_id))
        ctl("status", "nope")
        say("## Closing\n")
        ctl("close", JOB)
        open(stop, "w").close()
        for h in ("gpu-node-01", "gpu-node-02", "gpu-node-04"):
            agents[h].wait(30)
        ctl("status", "--all")
        ctl("server")
        watch.signal(signal.SIGINT)
        watch.wait(5)
    finally:
        for p in agents.values():
            if p.p.poll() is None:
                p.signal(signal.SIGKILL)
                p.wait(10)
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _exists(daemon):
    try:
        import rdzvnode
        with rdzvnode.Control(daemon.addr) as c:
            c.get_job(JOB)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    main()
