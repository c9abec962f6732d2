"""The preload as a job setting (issue 45, docs/AGENT.md "Warm starts"):
the first agent's --preload creates the job with it, and an agent that
joins without the flag starts the fork server when rdzvd accepts it and
forks its worker from it; a node's own --preload wins for its node;
rdzvctl status shows the setting; a preload that is not a list of module
names is refused by rdzvd, naming the name."""

import json
import subprocess

import grpc
import pytest

import rdzvagent
import rdzvtest as rt
from rdzvnode import Node, RpcFailure

import test_preload as tp

RDZVCTL = rt.build_path("client", "ctl", "rdzvctl")


def ctl(addr, *args):
    cp = subprocess.run([RDZVCTL, "--server", addr] + list(args),
                        capture_output=True, text=True, timeout=30,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def test_job_preload_reaches_an_agent_without_the_flag(tmp_path, request):
    """Agent a creates the 2-node job with --preload torch; agent b has no
    --preload (nor RDZV_PRELOAD): told the job's preload in Accepted, it
    starts the fork server then, and its worker runs forked from it (torch
    imported before the script's first line, the agent its parent).
    rdzvctl status shows the setting, also after rdzvd restarted."""
    job = tp.job_for(tmp_path, request)
    try:
        a = job.agent("a", args=["--nnodes", "2"])
        a.wait_line("joined job %s" % job.id, 30)
        b = job.agent("b", preload=None, args=["--nnodes", "2"])
        b.wait_line("job %s preloads torch: starting the fork server"
                    % job.id, 30)
        for p in (a, b):
            assert p.wait(90) == 0, job.outputs()
        ws = [job.wfile(1, rank) for rank in (0, 1)]
        assert all(w["preloaded"] for w in ws), ws
        out_b = b.output()
        assert "torch imported in" in out_b, out_b
        tp.never_fell_back(out_b)
        tp.never_fell_back(a.output())
        # b's worker was forked by its own server: its cmdline is the
        # command's, as for --preload's workers.
        assert any(w["cmdline"] == ["/usr/bin/python3", job.script, "x",
                                    "y"] for w in ws), ws
        st = json.loads(ctl(job.daemon.addr, "-o", "json", "status",
                            job.id))
        assert st["settings"]["preload"] == "torch", st
        text = ctl(job.daemon.addr, "status", job.id)
        assert ", preload torch\n" in text, text
        # A restarted rdzvd has it from its database.
        assert job.daemon.stop() == 0, job.daemon.output()[-3000:]
        job.daemon = rt.Daemon(job.tmp)
        st = json.loads(ctl(job.daemon.addr, "-o", "json", "status",
                            job.id))
        assert st["settings"]["preload"] == "torch", st
    finally:
        job.close()


def test_node_flag_wins_for_its_node(tmp_path, request):
    """A node's own --preload wins for its node over the job's, said once:
    the job preloads torch (agent a's flag), agent b's --preload json forks
    b's worker from a server that imported json and not torch."""
    job = tp.job_for(tmp_path, request)
    try:
        a = job.agent("a", args=["--nnodes", "2"])
        a.wait_line("joined job %s" % job.id, 30)
        b = job.agent("b", preload="json", args=["--nnodes", "2"])
        for p in (a, b):
            assert p.wait(90) == 0, job.outputs()
        by_pre = sorted(job.wfile(1, rank)["preloaded"] for rank in (0, 1))
        assert by_pre == [False, True], by_pre
        out_b = b.output()
        said = ("job %s preloads torch; this node preloads json (--preload "
                "wins for its own node)" % job.id)
        assert out_b.count(said) == 1, out_b
        assert "json imported in" in out_b, out_b
        tp.never_fell_back(out_b)
        st = json.loads(ctl(job.daemon.addr, "-o", "json", "status",
                            job.id))
        assert st["settings"]["preload"] == "torch", st
    finally:
        job.close()


def test_job_preload_needs_a_python(tmp_path, request):
    """An agent without --preload whose workers are not a python starts
    them by exec, saying so once, in a job that preloads torch."""
    job = tp.job_for(tmp_path, request)
    try:
        a = job.agent("a", args=["--nnodes", "2"])
        a.wait_line("joined job %s" % job.id, 30)
        b = job.agent("b", preload=None, args=["--nnodes", "2"],
                      cmd=["/bin/sh", "-c", "exit 0"])
        for p in (a, b):
            assert p.wait(90) == 0, job.outputs()
        out_b = b.output()
        said = ("job %s preloads torch, but this node's workers are not a "
                "python (/bin/sh): they start by exec" % job.id)
        assert out_b.count(said) == 1, out_b
        assert "fork server" not in out_b, out_b
        # a's worker (whatever its rank) ran forked; b's wrote nothing.
        ws = list(job.files("w", 1).values())
        assert len(ws) == 1 and ws[0]["preloaded"], ws
    finally:
        job.close()


@pytest.mark.parametrize("preload,says", [
    ("torch,num-py", 'preload module name "num-py" is not a module name'),
    ("torch,,numpy", "module name 2 is empty"),
    ("torch..nn", '"torch..nn" is not a module name'),
])
def test_bad_preload_refused(tmp_path, preload, says):
    """rdzvd refuses a join whose preload is not a list of module names
    (INVALID_ARGUMENT, naming it), makes no job, and serves on."""
    d = rt.Daemon(str(tmp_path))
    try:
        n = Node(d.addr, name="h1")

        def ask(req):
            req.preload = preload

        with pytest.raises(RpcFailure) as e:
            n.join("badpre", min_nodes=1, max_nodes=1, extra=ask)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "job badpre: " in e.value.details(), e.value.details()
        assert says in e.value.details(), e.value.details()
        assert "(--preload)" in e.value.details(), e.value.details()
        assert "badpre" not in ctl(d.addr, "status", "-a")
        # The same join with a good preload is taken.
        good = Node(d.addr, name="h2")
        good.join("goodpre", min_nodes=1, max_nodes=1,
                  extra=lambda r: setattr(r, "preload", "numpy.linalg"))
        st = json.loads(ctl(d.addr, "-o", "json", "status", "goodpre"))
        assert st["settings"]["preload"] == "numpy.linalg", st
        n.close()
        good.close()
    finally:
        d.stop()
