"""`rdzv-agent coproc` (docs/AGENT.md) through the real rdzvd, driven by
the test as a launcher would drive it: JSON lines on its stdin and stdout.
No torch here; tests/integration/torch/test_torchrun.py runs torchrun on it.
"""

import json
import socket
import signal
import subprocess

import pytest

import rdzvagent
import rdzvnode
import rdzvtest as rt

AGENT = rdzvagent.AGENT
PB = rdzvnode.pb


class Coproc(rt.Proc):
    """One `rdzv-agent coproc`; its stdout lines parsed as JSON."""

    def __init__(self, addr, job, *args):
        super().__init__([AGENT, "coproc", "--id", job, "--server", addr,
                          "--reconnect-grace", "1s"] + list(args),
                         stdin=subprocess.PIPE)

    def send(self, line):
        self.p.stdin.write((line if isinstance(line, str) else json.dumps(line)).encode()
                           + b"\n")
        self.p.stdin.flush()

    def events(self):
        out = []
        with self._cv:
            lines = list(self.out_lines)
        for line in lines:
            out.append(json.loads(line))     # stdout is JSON, nothing else
        return out

    def wait_event(self, kind, pred=lambda e: True, timeout=20):
        def ok():
            for e in self.events():
                if e["event"] == kind and pred(e):
                    return e
            return None
        try:
            return rt.wait_for(ok, timeout, 0.02, "a %s event" % kind)
        except TimeoutError:
            raise AssertionError("no %s event within %d s:\n%s"
                                 % (kind, timeout, self.output()))


@pytest.fixture
def daemon(tmp_path):
    d = rt.Daemon(tmp_path)
    yield d
    d.stop()


@pytest.fixture
def ctl(daemon):
    c = rdzvnode.Control(daemon.addr)
    yield c
    c.close()


@pytest.fixture
def procs():
    ps = []
    yield ps
    for p in ps:
        if p.p.poll() is None:
            p.kill()


def start(procs, daemon, job, *args):
    p = Coproc(daemon.addr, job, *args)
    procs.append(p)
    return p


def test_round_report_and_close(daemon, ctl, procs):
    """Two nodes of 2 and 1 workers: each gets its assignment as a JSON
    line, a failed report is one job-wide restart and a new round, a next
    round's master port is new, and succeeded reports close the job."""
    a = start(procs, daemon, "co-1", "--nnodes", "2", "--nproc-per-node", "2",
              "--node-rank", "0", "--max-restarts", "1")
    b = start(procs, daemon, "co-1", "--nnodes", "2", "--node-rank", "1",
              "--max-restarts", "1")
    assert a.wait_event("joined")["node_id"] > 0
    ga = a.wait_event("assignment")
    gb = b.wait_event("assignment")
    assert (ga["group_rank"], ga["base_rank"], ga["local_world_size"]) == (0, 0, 2)
    assert (gb["group_rank"], gb["base_rank"], gb["local_world_size"]) == (1, 2, 1)
    assert ga["world_size"] == gb["world_size"] == 3
    assert ga["master_port"] == gb["master_port"] > 0
    assert ga["master_addr"] == "127.0.0.1"
    g1 = ga["generation"]

    b.send({"cmd": "report", "generation": g1, "outcome": "failed",
            "message": "worker 0 failed"})
    a2 = a.wait_event("assignment", lambda e: e["generation"] > g1)
    b.wait_event("assignment", lambda e: e["generation"] > g1)
    assert a2["restart_count"] == 1
    assert a2["master_port"] != ga["master_port"], "the new round reused the master port"
    j = ctl.get_job("co-1")
    assert j.restart_count == 1 and j.generation == a2["generation"]

    for p in (a, b):
        p.send({"cmd": "report", "generation": a2["generation"],
                "outcome": "succeeded"})
    for p in (a, b):
        e = p.wait_event("ended")
        assert e["status"] == 0 and "closed" in e["message"]
        assert p.wait(10) == 0
    assert ctl.get_job("co-1").state == PB.types.JOB_STATE_CLOSED


def test_bad_commands_answered(daemon, procs):
    """A bad line gets an error line and the node goes on."""
    a = start(procs, daemon, "co-2", "--nnodes", "1")
    g = a.wait_event("assignment")["generation"]
    for line, what in (("not json", "not a JSON object"),
                       ({"x": 1}, "no \"cmd\""),
                       ({"cmd": "dance"}, "unknown command"),
                       ({"cmd": "report", "generation": g}, "needs"),
                       ({"cmd": "report", "generation": g + 5, "outcome": "failed"},
                        "not one this node was assigned"),
                       ({"cmd": "report", "generation": g, "outcome": "maybe"},
                        "succeeded")):
        n = len([e for e in a.events() if e["event"] == "error"])
        a.send(line)
        a.wait_event("error", lambda e, n=n: len(
            [x for x in a.events() if x["event"] == "error"]) > n)
        errs = [x for x in a.events() if x["event"] == "error"]
        assert what in errs[-1]["message"], (line, errs[-1])
    assert a.p.poll() is None
    a.send({"cmd": "leave", "reason": "done here"})
    assert a.wait(10) == 0
    assert "leaving job co-2: done here" in a.output()


def test_close_command(daemon, ctl, procs):
    a = start(procs, daemon, "co-3", "--nnodes", "1")
    a.wait_event("assignment")
    a.send({"cmd": "close"})
    assert a.wait_event("closed")["ok"] is True
    assert ctl.get_job("co-3").state == PB.types.JOB_STATE_CLOSING


def test_end_of_stdin_is_a_lost_node(daemon, ctl, procs):
    """The launcher killed: stdin ends, the node goes without a Leave and
    rdzvd counts it lost (a restart), unlike a signal (a planned Leave)."""
    a = start(procs, daemon, "co-4", "--nnodes", "1:2", "--max-restarts", "3",
              "--last-call", "1s")
    b = start(procs, daemon, "co-4", "--nnodes", "1:2", "--max-restarts", "3",
              "--last-call", "1s")
    g = a.wait_event("assignment", lambda e: e["group_world_size"] == 2)["generation"]
    b.wait_event("assignment", lambda e: e["generation"] == g)
    b.p.stdin.close()
    assert b.wait(10) != 0
    a2 = a.wait_event("assignment", lambda e: e["generation"] > g, timeout=30)
    assert a2["group_world_size"] == 1 and a2["restart_count"] == 1
    # A signal: a planned Leave, no restart counted.
    c = start(procs, daemon, "co-4", "--nnodes", "1:2")
    g3 = a.wait_event("assignment", lambda e: e["generation"] > a2["generation"],
                      timeout=30)["generation"]
    assert c.wait_event("assignment")["generation"] == g3
    c.signal(signal.SIGTERM)
    assert c.wait(10) == 128 + signal.SIGTERM
    a4 = a.wait_event("assignment", lambda e: e["generation"] > g3, timeout=30)
    assert a4["group_world_size"] == 1 and a4["restart_count"] == 1


@pytest.mark.parametrize("args, what", [
    (["--nproc-per-node", "gpu"], "must be the number"),
    (["--", "/bin/true"], "runs no command"),
    (["--nnodes", "3:2"], "MIN is larger than MAX"),
])
def test_usage_errors(daemon, args, what):
    r = subprocess.run([AGENT, "coproc", "--id", "co-5", "--server", daemon.addr] + args,
                       stdin=subprocess.PIPE, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and what in r.stderr, r.stderr
    assert r.stdout == ""


def test_master_port_taken(daemon, ctl, procs):
    """The master port the node of group rank 0 offered is taken before
    the round forms (something listens on it): coproc hands the launcher
    no assignment of that round, offers a new port, and the job re-rounds
    with no restart counted. A launcher whose store cannot bind after all
    says port_taken: the same again."""
    a = start(procs, daemon, "co-port", "--nnodes", "2", "--node-rank", "0",
              "--verbose")
    a.wait_event("joined")
    taken = int(a.wait_line(r"master port (\d+)", 15).group(1))
    squatter = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("::", taken))
    squatter.listen(1)
    try:
        b = start(procs, daemon, "co-port", "--nnodes", "2", "--node-rank", "1")
        ga = a.wait_event("assignment")
        b.wait_event("assignment", lambda e: e["generation"] == ga["generation"])
    finally:
        squatter.close()
    assert ga["generation"] == 2 and ga["restart_count"] == 0, ga
    assert ga["master_port"] != taken, ga
    assert [e["generation"] for e in a.events() if e["event"] == "assignment"] == [2]
    a.wait_line(r"generation 1: master port %d is taken on this host" % taken, 5)

    a.send({"cmd": "port_taken", "generation": 2})
    a3 = a.wait_event("assignment", lambda e: e["generation"] == 3)
    assert a3["restart_count"] == 0 and a3["master_port"] != ga["master_port"]
    a.wait_line(r"generation 2: the launcher cannot bind its master port "
                r"\(taken on this host\); offering port %d" % a3["master_port"], 5)
    j = ctl.get_job("co-port", events=50)
    assert j.restart_count == 0 and j.generation == 3, j
    assert len([e for e in j.events if e.kind == "master_port"]) == 2, j.events

    a.send({"cmd": "port_taken", "generation": 2})
    a.wait_event("error", lambda e: "not the one this node was assigned last"
                 in e["message"])
