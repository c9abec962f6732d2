"""rdzvctl's output, compared with golden files (tests/integration/ctl/golden):
the job list and each job in detail, as text and JSON, for a job in every
state (waiting, running, closing, closed, failed; running with a failure
held), with nodes of different sizes and failed GPUs. Simulated agents (rdzvnode.Node) drive the states
through one private rdzvd; ctlharness.py explains what keeps the output
the same on every run."""

import json

import pytest

import rdzvtest as rt
from rdzvnode import Control, Node, gpu

import ctlharness as h

T = rt.protos().types

H100 = "NVIDIA H100 80GB HBM3"


def healthy(n):
    return [gpu(i, name=H100) for i in range(n)]


def with_failed(n, bad, step, error):
    return [gpu(i, name=H100) if i != bad else
            gpu(i, ok=False, name=H100, failed_step=step, error=error)
            for i in range(n)]


class World:
    """One rdzvd with a job in each state, and a few more. Jobs and nodes
    are made one after the other, each step awaited, so node ids and events
    come in the same order on every run."""

    def __init__(self, tmp):
        self.d = rt.Daemon(tmp)
        self.nodes = []
        self.control = Control(self.d.addr)
        self.outputs = {}
        try:
            self.build()
        except BaseException:
            self.close()
            raise

    def node(self, rdzv_id, host, addr, nproc, gpus=(), rank=None, **job):
        n = Node(self.d.addr, name=host)
        self.nodes.append(n)
        n.join(rdzv_id, hostname=host, advertise_addr=addr, master_port=29500,
               nproc=nproc, gpus=list(gpus), rank_hint=rank, **job)
        return n

    def build(self):
        self.build_held()
        # waiting: 2 of min 3 nodes; one GPU of the second failed its check.
        job = dict(min_nodes=3, max_nodes=4, max_restarts=2)
        self.node("llm-waiting", "gpu-a01", "10.0.1.1", 4, healthy(4), 0, **job)
        self.node("llm-waiting", "gpu-a02", "10.0.1.2", 2,
                  with_failed(3, 1, "alloc", "CUDA_ERROR_OUT_OF_MEMORY"), 1, **job)

        # running: 4 + 2 + 1 workers (a CPU-only node), and a spare.
        job = dict(min_nodes=2, max_nodes=3, max_restarts=3)
        b1 = self.node("llm-running", "gpu-b01", "10.0.2.1", 4, healthy(4), 0, **job)
        self.node("llm-running", "gpu-b02", "10.0.2.2", 2,
                  with_failed(3, 2, "verify", "mismatch at element 17"), 1, **job)
        self.node("llm-running", "cpu-b03", "10.0.2.3", 1, (), 2, **job)
        b1.wait_assignment(generation=1)
        self.node("llm-running", "gpu-b04", "10.0.2.4", 2, healthy(2), None, **job)
        h.wait_job(self.control, "llm-running", lambda j: j.spares == 1)

        # closing: an operator closed it with rdzvctl close.
        job = dict(min_nodes=2, max_nodes=2)
        c1 = self.node("llm-closing", "gpu-c01", "10.0.3.1", 2, healthy(2), 0, **job)
        self.node("llm-closing", "gpu-c02", "10.0.3.2", 1,
                  with_failed(2, 0, "kernel", "CUDA_ERROR_LAUNCH_FAILED"), 1, **job)
        c1.wait_assignment(generation=1)
        self.outputs["close"] = h.check(h.ctl(self.d.addr, "close", "llm-closing")).stdout

        # closed: both nodes' workers succeeded.
        d1 = self.node("llm-closed", "gpu-d01", "10.0.4.1", 2, healthy(2), 0, **job)
        d2 = self.node("llm-closed", "gpu-d02", "10.0.4.2", 2, healthy(2), 1, **job)
        g = d1.wait_assignment(generation=1).generation
        d2.wait_assignment(generation=1)
        d1.report(g, "SUCCEEDED")
        d2.report(g, "SUCCEEDED")
        for n in (d1, d2):
            n.wait_event("closed")
        h.wait_disconnected(self.control, "llm-closed")

        # failed: a worker failed and max_restarts is 0.
        e1 = self.node("llm-failed", "gpu-e01", "10.0.5.1", 2, healthy(2), 0, **job)
        e2 = self.node("llm-failed", "gpu-e02", "10.0.5.2", 3,
                       with_failed(4, 3, "copy_back", "CUDA_ERROR_ECC_UNCORRECTABLE"), 1,
                       **job)
        g = e1.wait_assignment(generation=1).generation
        e2.wait_assignment(generation=1)
        e2.report(g, "FAILED", exits=[(0, 0, 0), (1, 1, 0), (2, -1, 15)],
                  message="RuntimeError: CUDA error: an illegal memory access was encountered")
        for n in (e1, e2):
            n.wait_event("failed")
        h.wait_disconnected(self.control, "llm-failed")

        # waiting with min_nodes reached: the last call runs.
        job = dict(min_nodes=2, max_nodes=4)
        self.node("llm-lastcall", "gpu-f01", "10.0.6.1", 8, healthy(8), 0, **job)
        self.node("llm-lastcall", "gpu-f02", "10.0.6.2", 8, healthy(8), 1, **job)
        h.wait_job(self.control, "llm-lastcall", lambda j: j.last_call_in_ms >= 0)

        # running, and a node waits for the next round: two nodes left after
        # the first round, then another arrived (it would start a round at
        # once if it filled max_nodes).
        job = dict(min_nodes=1, max_nodes=3)
        g1 = self.node("llm-growing", "gpu-g01", "10.0.7.1", 2, healthy(2), 0, **job)
        gone = [self.node("llm-growing", host, addr, 2, healthy(2), rank, **job)
                for host, addr, rank in (("gpu-g02", "10.0.7.2", 1),
                                         ("gpu-g03", "10.0.7.3", 2))]
        g1.wait_assignment(generation=1)
        for n in gone:
            n.leave("drained for maintenance")
            n.close()
        g1.wait_event("assignment", lambda a: a.group_world_size == 1)
        self.node("llm-growing", "gpu-g04", "10.0.7.4", 4, healthy(4), 3, **job)
        h.wait_job(self.control, "llm-growing",
                   lambda j: j.waiting == 1 and sum(n.connected for n in j.nodes) == 2)

    def build_held(self):
        """running, a failure held: rdzvd restarted, one node resumed and
        reported a worker failure while the other has not come back within
        its (long) lease. A closed connection would not do: a failure
        report makes its node lost at once (SPEC §4 rule 14). First, as
        the restart ends every stream."""
        job = dict(min_nodes=2, max_nodes=2, max_restarts=1,
                   lease_ttl_ms=600000)
        k1 = self.node("llm-held", "gpu-k01", "10.0.8.1", 4, healthy(4), 0, **job)
        k2 = self.node("llm-held", "gpu-k02", "10.0.8.2", 4, healthy(4), 1, **job)
        g = k1.wait_assignment(generation=1).generation
        k2.wait_assignment(generation=1)
        addr, db, tmp = self.d.addr, self.d.db, self.d.tmpdir
        self.control.close()
        self.d.stop()
        self.d = rt.Daemon(tmp, listen=addr, db=db)
        self.control = Control(self.d.addr)
        k1.resume(g)
        k1.report(g, "FAILED", exits=[(0, 1, 0)],
                  message="RuntimeError: Connection closed by peer")
        h.wait_job(self.control, "llm-held", lambda j: j.held_failure != "")

    def close(self):
        for n in self.nodes:
            n.close()
        self.control.close()
        self.d.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("ctl-golden"))
    yield w
    w.close()


JOBS = ["llm-held", "llm-waiting", "llm-running", "llm-closing", "llm-closed",
        "llm-failed", "llm-lastcall", "llm-growing"]


def test_job_list(world):
    out = h.check(h.ctl(world.d.addr, "status")).stdout
    h.golden("status.txt", out)
    # Ended jobs only with --all.
    assert "llm-closed" not in out and "llm-failed" not in out
    out = h.check(h.ctl(world.d.addr, "status", "--all")).stdout
    h.golden("status-all.txt", out)
    for j in JOBS:
        assert j in out


def test_job_list_json(world):
    out = h.check(h.ctl(world.d.addr, "status", "--all", "-o", "json")).stdout
    h.golden("status-all.json", out)
    doc = json.loads(out)
    assert [j["id"] for j in doc["jobs"]] == JOBS
    assert [j["state"] for j in doc["jobs"]] == [
        "running", "waiting", "running", "closing", "closed", "failed", "waiting",
        "running"]
    assert "nodes" not in doc["jobs"][1]        # the list has summaries only


@pytest.mark.parametrize("job", JOBS)
def test_job_detail(world, job):
    out = h.check(h.ctl(world.d.addr, "status", job)).stdout
    h.golden(job + ".txt", out)


@pytest.mark.parametrize("job", JOBS)
def test_job_detail_json(world, job):
    out = h.check(h.ctl(world.d.addr, "status", job, "-o", "json")).stdout
    h.golden(job + ".json", out)
    doc = json.loads(out)
    pbjob = world.control.get_job(job)
    assert doc["id"] == job
    assert doc["state"] == T.JobState.Name(pbjob.state)[len("JOB_STATE_"):].lower()
    assert [n["node_id"] for n in doc["nodes"]] == [n.node_id for n in pbjob.nodes]
    for n, pn in zip(doc["nodes"], pbjob.nodes):
        assert n["nproc"] == pn.nproc
        assert n["gpus"]["total"] == pn.gpus_total
        assert len(n["gpus"]["devices"]) == len(pn.gpus)


def test_waiting_job_says_what_it_waits_for(world):
    out = h.check(h.ctl(world.d.addr, "status", "llm-waiting")).stdout
    assert "2 of min 3 nodes joined" in out
    assert "the job fails in 10m unless 1 more joins (join timeout)" in out


def test_last_call_and_next_round_say_when(world):
    out = h.check(h.ctl(world.d.addr, "status", "llm-lastcall")).stdout
    assert ("2 of min 2 nodes joined; the round completes in 30s (last call) "
            "or when 4 have joined") in out
    out = h.check(h.ctl(world.d.addr, "status", "llm-growing")).stdout
    assert "a new round takes in 1 waiting node in 30s (last call)" in out
    out = h.check(h.ctl(world.d.addr, "status")).stdout
    assert "round completes in 30s (last call)" in out
    assert "1 waiting node joins in 30s" in out


def test_held_failure_says_what_it_waits_for(world):
    k1, k2 = (n.node_id for n in world.control.get_job("llm-held").nodes)
    out = h.check(h.ctl(world.d.addr, "status", "llm-held")).stdout
    assert ("held      waits for gpu-k02 (node %d) to resume or be lost: node "
            "gpu-k01 (node %d) reported" % (k2, k1)) in out, out
    assert "reported a worker failure in generation 1: RuntimeError" in out
    out = h.check(h.ctl(world.d.addr, "status")).stdout
    assert "a failure waits for an away node" in out
    doc = json.loads(h.check(h.ctl(world.d.addr, "status", "llm-held", "-o",
                                   "json")).stdout)
    assert doc["held_failure"] == world.control.get_job("llm-held").held_failure
    assert "RuntimeError" in doc["held_failure"]
    doc = json.loads(h.check(h.ctl(world.d.addr, "status", "llm-growing", "-o",
                                   "json")).stdout)
    assert doc["held_failure"] is None


def test_failed_gpus_are_listed(world):
    out = h.check(h.ctl(world.d.addr, "status", "llm-running")).stdout
    section = out.split("failed GPUs\n", 1)[1].split("\n\n", 1)[0]
    rows = section.splitlines()[1:]
    assert len(rows) == 1, section
    assert rows[0].split() == ["6", "gpu-b02", "2", "NVIDIA", "H100", "80GB", "HBM3",
                               "GPU-00000002-0000-4000-8000-000000000002", "verify",
                               "mismatch", "at", "element", "17"]


def test_close_output(world):
    h.golden("close.txt", world.outputs["close"])


def test_events(world):
    out = h.check(h.ctl(world.d.addr, "events", "llm-failed")).stdout
    h.golden("events-llm-failed.txt", out)
    out = h.check(h.ctl(world.d.addr, "events", "llm-failed", "--after", "3",
                        "--limit", "2", "-o", "json")).stdout
    doc = json.loads(out)
    assert [e["seq"] for e in doc["events"]] == [4, 5]
