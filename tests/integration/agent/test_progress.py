"""Worker progress and hung workers (docs/HEALTH.md), end to end: real
rdzvd and rdzv-agent processes whose workers are a small training loop
(pworker.py, no torch) calling rdzv.progress(step) from python/rdzv.

- A worker that stops reporting (a sleep in its loop) is found within the
  hang timeout + 2 s: its node is reported FAILED with cause hang (an event
  of kind "hang", in rdzvctl status too), its stacks reach its stderr log
  through faulthandler, the job restarts once, job-wide, and completes.
- With py-spy on PATH the stacks come from `py-spy dump` instead.
- A slow worker's node shows as a straggler in `rdzvctl status ID` (text
  and JSON) and in the status page's job data.
- Steps are in memory only: they never commit, and after an rdzvd restart
  the resumed agent sends its latest again; the hang timeout is stored.
- Rendezvous.Progress is fenced by session and generation; Report's cause
  is "hang" or nothing.
- rdzv.progress is a no-op without RDZV_PROGRESS.
"""

import http.client
import json
import os
import re
import socket
import subprocess

import pytest

import rdzvagent
import rdzvnode
import rdzvtest as rt

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "pworker.py")
PYDIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "python"))
CTL = rt.build_path("client", "ctl", "rdzvctl")
PB = rdzvnode.pb

for k in list(os.environ):
    if k.startswith(("RDZV_", "SLURM_", "PBS_")) and k not in (
            "RDZV_BUILD_ROOT", "RDZV_SOURCE_ROOT"):
        del os.environ[k]


class Job(rdzvagent.AgentJob):
    worker = WORKER

    def agent(self, tag, rank, args=(), env=None, nnodes=2):
        argv = ["--nnodes", nnodes, "--node-rank", rank, "--last-call", "1s",
                "--stop-timeout", "2s", "--tee",
                "--log-dir", os.path.join(self.tmp, "logs-" + tag)]
        e = {"W_OUT": self.out, "W_STOP": self.stop_file, "TMPDIR": self.tmp,
             "PYTHONPATH": PYDIR}
        e.update(env or {})
        return self.start(tag, argv + list(args), e)


def ctl(daemon, *args):
    r = subprocess.run([CTL, "--server", daemon.addr] + list(args),
                       capture_output=True, text=True, timeout=15)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_hang_detected_and_restarted(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    try:
        env = {"P_HANG_RANK": "1", "P_HANG_AT": "5", "P_STEPS": "20"}
        # The job's setting is the first joiner's; the other asks for
        # none and gets the job's.
        j.agent("a", 0, ["--hang-timeout", "3s", "--max-restarts", "1"], env)
        j.wait_job(lambda x: True, 15, "job created by agent a")
        j.agent("b", 1, [], env)
        hung = rt.wait_for(lambda: j.files("hang").get((1, 1)), 30, 0.05,
                           "rank 1 hanging in generation 1\n" + j.outputs())
        # Detected within the hang timeout + 2 s of the last report.
        jb = j.wait_job(lambda x: any(e.kind == "hang" for e in x.events),
                        20, "a hang event")
        ev = [e for e in jb.events if e.kind == "hang"]
        assert len(ev) == 1, ev
        took = ev[0].time_unix_ms / 1000.0 - hung["last_report"]
        assert 2.95 <= took <= 5.0, (took, ev[0])
        assert ev[0].generation == 1
        assert re.search(r"hung in generation 1: no worker made progress "
                         r"for \d+\.\d s since step 5 \(hang timeout 3\.0 s\)",
                         ev[0].message), ev[0].message
        assert jb.settings.hang_timeout_ms == 3000
        # One restart, job-wide: generation 2 runs both ranks again and
        # completes.
        assert j.wait_exits(timeout=40) == {"a": 0, "b": 0}, j.outputs()
        jb = j.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                        "job closed")
        assert jb.restart_count == 1 and jb.generation == 2, jb
        assert sorted(j.files("done", 2)) == [(2, 0), (2, 1)]
        assert sorted(j.files("env")) == [(1, 0), (1, 1), (2, 0), (2, 1)]
        # The hung worker's stacks, from faulthandler (registered by
        # rdzv.progress), in its stderr log of generation 1.
        with open(os.path.join(j.tmp, "logs-b", "1", "0", "stderr.log")) as f:
            err = f.read()
        assert "most recent call first" in err and "pworker.py" in err, err
        agent_b = j.agents["b"].output()
        assert "hung: no worker made progress" in agent_b, agent_b
        assert "SIGUSR1" in agent_b, agent_b
        # rdzvctl shows the setting and the event.
        out = ctl(j.daemon, "status", j.id)
        assert "hang timeout 3s" in out, out
        assert re.search(r"\bhang\b.*hung in generation 1", out), out
    finally:
        j.close()


def test_hang_dumped_by_pyspy(tmp_path, request):
    """With py-spy on PATH the agent runs `py-spy dump --pid PID` for each
    worker into py-spy.txt beside its logs (here a stand-in py-spy that
    says how it was called), and sends no SIGUSR1."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "py-spy").write_text("#!/bin/sh\necho \"stand-in py-spy: $*\"\n")
    (fake / "py-spy").chmod(0o755)
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    port = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    j = Job(tmp_path, rdzvagent.job_name(request), daemon=d)
    try:
        env = {"P_HANG_RANK": "0", "P_HANG_AT": "2", "P_STEPS": "5",
               "PATH": "%s:%s" % (fake, os.environ["PATH"])}
        j.agent("a", 0, ["--hang-timeout", "2s", "--max-restarts", "1"], env,
                nnodes=1)
        assert j.wait_exits(timeout=40) == {"a": 0}, j.outputs()
        jb = j.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15,
                        "job closed")
        assert jb.restart_count == 1 and [e.kind for e in jb.events
                                          ].count("hang") == 1, jb
        pid = j.files("env", 1)[(1, 0)]["pid"]
        logs = os.path.join(j.tmp, "logs-a", "1", "0")
        with open(os.path.join(logs, "py-spy.txt")) as f:
            assert f.read() == "stand-in py-spy: dump --pid %d\n" % pid
        with open(os.path.join(logs, "stderr.log")) as f:
            assert "most recent call first" not in f.read()
        assert "py-spy dump --pid %d" % pid in j.agents["a"].output()
        assert metric(port, "rdzvd_hangs_total") == 1
        # rdzvd's journal has the hang.
        d.wait_line(r"job %s: hang: node \S+ \(node 1\) hung in "
                    r"generation 1" % re.escape(j.id), timeout=5)
    finally:
        j.close()


def test_step_and_setting_survive_rdzvd_restart(tmp_path, request):
    """rdzvd keeps steps in memory only: after kill -9 and a restart on the
    same database the resumed agent sends its latest step again at once
    (here the worker makes no further progress to send), and the job's hang
    timeout comes back from the store."""
    j = Job(tmp_path, rdzvagent.job_name(request))
    try:
        j.agent("a", 0, ["--hang-timeout", "60s"],
                {"P_FOREVER": "1", "P_STEP_S": "60"}, nnodes=1)
        j.wait_job(lambda x: len(x.nodes) == 1 and x.nodes[0].has_step, 30,
                   "step 0 at rdzvd")
        addr, db = j.daemon.addr, j.daemon.db
        j.daemon.kill()
        j.ctl.close()
        j.agents["a"].wait_line("lost rdzvd", timeout=10)
        j.daemon = rt.Daemon(j.tmp, listen=addr, db=db)
        j.ctl = rdzvnode.Control(j.daemon.addr)
        jb = j.wait_job(lambda x: len(x.nodes) == 1 and x.nodes[0].connected
                        and x.nodes[0].has_step, 15,
                        "the step back after the resume")
        assert jb.nodes[0].step == 0 and jb.has_lead_step, jb
        assert jb.settings.hang_timeout_ms == 60000, jb.settings
    finally:
        j.close()


def metric(port, name):
    """One unlabelled sample of rdzvd's /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "no %s in /metrics" % name
    return float(m.group(1))


def page_job(port, job_id):
    """The status page's data for one job: the Job of its /events
    stream's first answer, with the proto's field names."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(("GET /events?job=%s HTTP/1.1\r\nHost: x\r\n"
                   "Accept: text/event-stream\r\n\r\n" % job_id).encode())
        buf = b""
        while True:
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk
            for line in buf.split(b"\n"):
                if line.startswith(b"data: ") and b'"nodes"' in line:
                    return json.loads(line[6:])["job"]
    finally:
        s.close()


def test_straggler(tmp_path, request):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0",
                             "--straggler-steps", "5",
                             "--straggler-seconds", "0"])
    port = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    j = Job(tmp_path, rdzvagent.job_name(request), daemon=d)
    try:
        env = {"P_FOREVER": "1", "P_STEP_S": "0.05", "P_SLOW_RANK": "1",
               "P_SLOW_S": "1"}
        j.agent("a", 0, [], env)
        j.agent("b", 1, [], env)

        jb = j.wait_job(lambda x: x.stragglers == 1 and
                        [n.straggler for n in x.nodes].count(True) == 1,
                        30, "a straggler")
        fast = max(jb.nodes, key=lambda n: n.step)
        slow = min(jb.nodes, key=lambda n: n.step)
        assert slow.straggler and not fast.straggler
        assert slow.steps_behind > 5 and jb.lead_step == fast.step
        assert slow.group_rank == 1 and fast.group_rank == 0

        out = ctl(d, "status", j.id)
        assert re.search(r"^progress +leading step \d+, 1 straggler$", out,
                         re.M), out
        assert re.search(r"STEP", out), out
        rows = [l for l in out.splitlines() if "STRAGGLER" in l]
        assert len(rows) == 1 and " 1 " in rows[0], out
        doc = json.loads(ctl(d, "status", j.id, "-o", "json"))
        assert doc["stragglers"] == 1 and doc["lead_step"] >= 6, doc
        flags = {n["group_rank"]: n["progress"]["straggler"]
                 for n in doc["nodes"]}
        assert flags == {0: False, 1: True}, doc["nodes"]

        assert metric(port, "rdzvd_stragglers") == 1
        page = page_job(port, j.id)
        assert page["stragglers"] >= 1, page
        marked = {n["group_rank"]: n["straggler"] for n in page["nodes"]
                  if n["has_step"]}
        assert marked.get(1) is True and marked.get(0) is False, page
    finally:
        j.close()


def test_progress_without_agent(tmp_path):
    """Outside rdzv-agent rdzv.progress does nothing and raises nothing;
    a bad step is refused."""
    env = {k: v for k, v in os.environ.items() if k != "RDZV_PROGRESS"}
    env["PYTHONPATH"] = PYDIR
    r = subprocess.run(["/usr/bin/python3", "-c",
                        "import rdzv\nfor i in range(3): rdzv.progress(i)\n"
                        "try:\n  rdzv.progress(-1)\nexcept ValueError:\n"
                        "  print('refused')\n"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == "refused\n", r


def test_progress_call(tmp_path):
    """Rendezvous.Progress through gRPC (rdzvnode, no agent): steps never
    commit (rdzvd's transaction count stands still), a generation that is
    not the node's is refused, so is a cause other than hang."""
    import grpc
    d = rt.Daemon(tmp_path)
    ctl_ = rdzvnode.Control(d.addr)
    a, b = rdzvnode.Node(d.addr, name="a"), rdzvnode.Node(d.addr, name="b")
    try:
        for n in (a, b):
            n.join("steps", min_nodes=2, max_nodes=2, nproc=1)
        gen = a.wait_assignment().generation
        before = ctl_.server_info().transactions
        for step in range(50):
            a.progress(gen, step)
            b.progress(gen, step // 2)
        assert ctl_.server_info().transactions == before
        job = ctl_.get_job("steps")
        steps = sorted((n.hostname, n.step, n.has_step) for n in job.nodes)
        assert steps == [("a", 49, True), ("b", 24, True)], steps
        assert job.has_lead_step and job.lead_step == 49
        # Fenced: another generation, an unknown session.
        code, msg, _ = rdzvnode.rpc_code(a.progress, gen + 1, 50)
        assert code == grpc.StatusCode.FAILED_PRECONDITION, msg
        assert "generation 2 does not run on node 1" in msg, msg
        code, _, _ = rdzvnode.rpc_code(a.progress, gen, 50,
                                       session_id=b"x" * 16)
        assert code == grpc.StatusCode.NOT_FOUND
        code, msg, _ = rdzvnode.rpc_code(a.report, gen, "FAILED",
                                         cause="bored")
        assert code == grpc.StatusCode.INVALID_ARGUMENT, msg
        assert "unknown cause 'bored'" in msg, msg
        # Whether a node's workers are starting goes with an update only
        # (rule 17), and is no failure.
        code, msg, _ = rdzvnode.rpc_code(a.report, gen, "FAILED",
                                         cause="starting")
        assert code == grpc.StatusCode.INVALID_ARGUMENT, msg
        assert "unknown cause 'starting'" in msg, msg
        assert "\"starting\" or \"started\" with an update" in msg, msg
        for cause in ("starting", "starting", "started"):
            assert a.report(gen, "UPDATE", cause=cause).restart_count == 0
        # A hang report: an event of its own, a failure like any other.
        a.report(gen, "FAILED", cause="hang", message="no progress")
        job = ctl_.get_job("steps", events=50)
        hang = [e for e in job.events if e.kind == "hang"]
        assert len(hang) == 1 and "node a (node 1) hung in generation 1: " \
            "no progress" in hang[0].message, job.events
        assert job.state == PB.types.JOB_STATE_FAILED  # max_restarts 0
        for n in (a, b):
            n.close()
        # A clean exit (under ASan: nothing leaked).
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        a.close()
        b.close()
        ctl_.close()
        d.stop()
