"""torchrun with the rdzv backend (python/rdzv, docs/TORCHRUN.md) and real
torch 1.13 through the real rdzvd and `rdzv-agent coproc`.

Each node is `python3 -m rdzv.torchrun --nnodes 2:3 --nproc-per-node 1
--rdzv-backend rdzv ...` running train_ddp.py (its files: test_torch.py's
top comment); the handler puts RDZV_GENERATION in the workers' environment,
so the files are named after rdzvd's generation. The last test stands in
for torch 2.x's agent, which is not installable here.

Timing: every node imports torch twice (torchrun, then its worker) on two
busy cores, so the jobs are three nodes of one worker, a few epochs, and
torchrun polls its workers every 0.5 s. Every wait is bounded.
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

pytest.importorskip("torch")

import rdzvtest as rt  # noqa: E402

# The package from this tree, ahead of any installed one; before anything
# imports the generated rdzv.v1 (rdzv/__init__.py extends the path).
sys.path.insert(0, os.path.join(rt.SOURCE_ROOT, "python"))

import rdzvagent  # noqa: E402
import rdzvnode  # noqa: E402
import test_torch as tt  # noqa: E402

PB = rdzvnode.pb
RDZVCTL = rt.build_path("client", "ctl", "rdzvctl")
CONF = "last_call_timeout=3,join_timeout=60,reconnect_grace=1,lease_ttl=10"


class TorchrunJob(tt.Job):
    """A job whose nodes are torchrun (python3 -m rdzv.torchrun)."""

    def agent(self, tag, nnodes="2:3", max_restarts=0, env=None, conf=CONF):
        argv = ["/usr/bin/python3", "-m", "rdzv.torchrun", "--nnodes", nnodes,
                "--nproc-per-node", "1", "--rdzv-backend", "rdzv",
                "--rdzv-endpoint", self.daemon.addr, "--rdzv-id", self.id,
                "--max-restarts", max_restarts, "--monitor-interval", "0.5",
                "--rdzv-conf", conf, tt.TRAIN]
        e = {"TRAIN_OUT": self.out, "TRAIN_TAG": tag, "TRAIN_EPOCHS": "3",
             "TRAIN_MAX_SECONDS": "120", "TRAIN_ON_PEER_LOSS": "exit",
             "TRAIN_STOP_FILE": "", "RDZV_AGENT": rdzvagent.AGENT,
             "PYTHONPATH": os.path.join(rt.SOURCE_ROOT, "python")}
        e.update(env or {})
        p = rt.Proc(argv, env=e)
        p.tag = tag
        self.agents[tag] = p
        return p

    def status_json(self):
        """`rdzvctl status ID -o json`, the operator's view."""
        r = subprocess.run([RDZVCTL, "--server", self.daemon.addr, "status",
                            self.id, "-o", "json"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def job(tmp_path, request):
    j = TorchrunJob(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def test_ddp_three_torchruns(job):
    """Three torchruns, 2:3 nodes: one round of three, DDP to the end, exit
    0, the job closed in rdzvd with world size 3 and no restart."""
    for t in "abc":
        job.agent(t)
    assert job.wait_exits(timeout=150) == {"a": 0, "b": 0, "c": 0}, job.outputs()
    gens = job.generations()
    assert len(gens) == 1, "more than one generation ran: %s" % gens
    gen = gens[0]
    start = job.wait_ranks("start", gen, 3)
    assert sorted(d["tag"] for d in start.values()) == ["a", "b", "c"]
    assert all(d["world_size"] == 3 for d in start.values())
    # torch's own environment, with rdzvd's generation beside it.
    for r, d in start.items():
        env = d["env"]
        assert env["RANK"] == str(r) and env["WORLD_SIZE"] == "3"
        assert env["TORCHELASTIC_RUN_ID"] == job.id
        assert env["RDZV_GENERATION"] == str(gen)
    final = tt.check_outcome(job, gen, 3)
    assert all(len(d["losses"]) == 3 for d in final.values())
    j = tt.check_closed(job, gen)
    assert j.world_size == 3 and j.restart_count == 0, j


def test_torchrun_killed(job):
    """kill -9 of one torchrun mid-training: the other two go on at world
    2 in a new round, then finish; the job closes in that round."""
    env = {"TRAIN_STOP_FILE": job.stop_file, "TRAIN_EPOCH_SECONDS": "0.2"}
    for t in "abc":
        job.agent(t, max_restarts=3, env=env)
    g1, start = job.wait_world(3, timeout=120)
    job.wait_epochs(g1, 3, 1)
    victim = next(d["tag"] for r, d in start.items() if r == 2)
    job.agents[victim].signal(signal.SIGKILL)
    g2, start2 = job.wait_world(2, after=g1, timeout=90)
    assert victim not in {d["tag"] for d in start2.values()}
    j = job.job()
    assert j.generation == g2 and j.world_size == 2, j
    job.wait_epochs(g2, 2, 1)
    job.stop_workers()
    survivors = sorted(set("abc") - {victim})
    assert job.wait_exits(survivors, timeout=90) == {t: 0 for t in survivors}, \
        job.outputs()
    tt.check_closed(job, g2)


def test_sigterm_to_torchrun_leaves(job):
    """SIGTERM to one torchrun alone (not its process group): torch skips
    the handler's shutdown(), the handler leaves at exit all the same, so
    rdzvd records a planned leave, not a lost node."""
    env = {"TRAIN_STOP_FILE": job.stop_file, "TRAIN_EPOCH_SECONDS": "0.2"}
    for t in "ab":
        job.agent(t, nnodes="1:2", max_restarts=3, env=env)
    g1, start = job.wait_world(2, timeout=120)
    job.wait_epochs(g1, 2, 1)
    victim = start[1]["tag"]
    job.agents[victim].signal(signal.SIGTERM)
    job.wait_exits([victim], timeout=60)
    survivor = start[0]["tag"]
    g2, _ = job.wait_world(1, after=g1, timeout=90)
    kinds = [e.kind for e in job.job().events]
    assert "left" in kinds and "lost" not in kinds, kinds
    job.wait_epochs(g2, 1, 1)
    job.stop_workers()
    assert job.wait_exits([survivor], timeout=90) == {survivor: 0}, job.outputs()
    tt.check_closed(job, g2)


def test_worker_failure_counts_one_restart(job):
    """A worker fails once with --max-restarts 1: one job-wide restart
    (rdzvctl status says 1), a new round of the same three, then success."""
    env = {"TRAIN_FAIL_RANK": "1", "TRAIN_FAIL_RESTARTS": "0"}
    for t in "abc":
        job.agent(t, max_restarts=1, env=env)
    assert job.wait_exits(timeout=200) == {"a": 0, "b": 0, "c": 0}, job.outputs()
    gens = job.generations()
    assert len(gens) == 2, gens
    final = tt.check_outcome(job, gens[-1], 3)
    assert len(final) == 3
    tt.check_closed(job, gens[-1])
    st = job.status_json()
    assert st["restart_count"] == 1 and st["state"] == "closed", st


# -- torch 2.x's calls, stood in for ----------------------------------------

class StandInRendezvousStoreInfo:
    """Stand-in for torch >= 2.4's RendezvousStoreInfo(master_addr,
    master_port) (torch 2.x is not installable here)."""

    def __init__(self, master_addr, master_port):
        self.master_addr, self.master_port = master_addr, master_port


class StandInRendezvousInfo:
    """Stand-in for torch >= 2.4's RendezvousInfo(store, rank, world_size,
    bootstrap_store_info)."""

    def __init__(self, store, rank, world_size, bootstrap_store_info):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.bootstrap_store_info = bootstrap_store_info


@pytest.fixture
def torch2_api(monkeypatch):
    """torch.distributed.elastic.rendezvous.api as torch 2.4+ has it."""
    from torch.distributed.elastic.rendezvous import api
    monkeypatch.setattr(api, "RendezvousInfo", StandInRendezvousInfo, raising=False)
    monkeypatch.setattr(api, "RendezvousStoreInfo", StandInRendezvousStoreInfo,
                        raising=False)
    monkeypatch.setenv("RDZV_AGENT", rdzvagent.AGENT)
    return api


def in_threads(fns, timeout=60):
    """Runs each fn on a thread of its own (torch's agents each call
    next_rendezvous() at once); their results, or the first exception."""
    res = [None] * len(fns)

    def run(i, fn):
        try:
            res[i] = ("ok", fn())
        except BaseException as e:  # noqa: B902 (handed back to the test)
            res[i] = ("err", e)
    ts = [threading.Thread(target=run, args=(i, f), daemon=True) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "next_rendezvous() did not return in %d s" % timeout
    for kind, v in res:
        if kind == "err":
            raise v
    return [v for _, v in res]


def test_torch2_rendezvous_info(tmp_path, request, torch2_api):
    """What torch 2.x's agent does with the handler, done by the test: the
    entry point's creator builds handlers, next_rendezvous() returns a
    RendezvousInfo whose bootstrap_store_info is the round's master, workers
    reach that TCPStore as clients (use_agent_store), num_nodes_waiting()
    sees a newer round without blocking, the next round's store is a new
    one, set_closed() closes the job, shutdown() leaves."""
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    import rdzv.torchrun as rtr

    daemon = rt.Daemon(tmp_path)
    ctl = rdzvnode.Control(daemon.addr)
    name = rdzvagent.job_name(request)
    creator = rtr.handler()     # torch 2.6: the entry point's factory
    try:
        def params():
            return RendezvousParameters(
                "rdzv", daemon.addr, name, 2, 3, last_call_timeout=1,
                join_timeout=30, reconnect_grace=1, nproc_per_node=2)
        hs = [creator(params()) for _ in range(2)]
        assert all(h.get_backend() == "rdzv" and h.use_agent_store for h in hs)
        infos = in_threads([h.next_rendezvous for h in hs])
        assert all(isinstance(i, StandInRendezvousInfo) for i in infos)
        assert sorted(i.rank for i in infos) == [0, 1]
        assert {i.world_size for i in infos} == {2}
        j = ctl.get_job(name)
        assert j.world_size == 4     # nproc_per_node 2 on each node
        boot = {(i.bootstrap_store_info.master_addr, i.bootstrap_store_info.master_port)
                for i in infos}
        assert len(boot) == 1
        addr, port1 = boot.pop()
        # A worker with TORCHELASTIC_USE_AGENT_STORE=True: a client of the
        # round's TCPStore at MASTER_ADDR:MASTER_PORT.
        worker = TCPStore(addr, port1, is_master=False,
                          timeout=datetime.timedelta(seconds=10))
        worker.set("from-worker", "1")
        r0 = next(i for i in infos if i.rank == 0)
        r1 = next(i for i in infos if i.rank == 1)
        # The agents' store as torch 2.x's agent uses it. Rank assignment
        # (_assign_worker_ranks): each agent sets its role info, group
        # rank 0 reads them all (multi_get on torch >= 2.2), sets every
        # agent's ranks (multi_set) and each agent reads its own.
        def multi_get(store, keys):
            f = getattr(store, "multi_get", None)
            return f(keys) if f is not None else [store.get(k) for k in keys]

        def multi_set(store, keys, values):
            f = getattr(store, "multi_set", None)
            if f is not None:
                return f(keys, values)
            for k, v in zip(keys, values):
                store.set(k, v)
        for i in infos:
            i.store.set("torchelastic/role_info/%d" % i.rank, "default:%d" % i.rank)
        assert multi_get(r0.store, ["torchelastic/role_info/%d" % k
                                    for k in range(2)]) == [b"default:0", b"default:1"]
        multi_set(r0.store, ["torchelastic/assigned_ranks/%d" % k for k in range(2)],
                  ["[%d, 4, %d, 4]" % (2 * k, 2 * k) for k in range(2)])
        assert r1.store.get("torchelastic/assigned_ranks/1") == b"[2, 4, 2, 4]"
        # The exit barrier (store_util.barrier): add to a counter, the
        # last one in sets a key, everyone waits for it.
        for i in infos:
            if i.store.add("torchelastic/_exit_barrier/num_members", 1) == 2:
                i.store.set("torchelastic/_exit_barrier/last_member", "<ignored>")
        for i in infos:
            i.store.wait(["torchelastic/_exit_barrier/last_member"],
                         datetime.timedelta(seconds=10))
        assert all(h.num_nodes_waiting() == 0 for h in hs)

        # A third node arrives: a newer round, seen without blocking.
        h3 = creator(params())
        t3 = threading.Thread(target=lambda: setattr(h3, "info", h3.next_rendezvous()),
                              daemon=True)
        t3.start()
        rt.wait_for(lambda: all(h.num_nodes_waiting() > 0 for h in hs), 30,
                    what="num_nodes_waiting() > 0 on both nodes")
        infos2 = in_threads([h.next_rendezvous for h in hs])
        t3.join(30)
        infos2.append(h3.info)
        assert sorted(i.rank for i in infos2) == [0, 1, 2]
        assert {i.world_size for i in infos2} == {3}
        port2 = infos2[0].bootstrap_store_info.master_port
        assert port2 != port1, "the new round reused the old round's store port"
        worker2 = TCPStore(addr, port2, is_master=False,
                           timeout=datetime.timedelta(seconds=10))
        assert worker2.add("fresh", 1) == 1
        assert all(h.num_nodes_waiting() == 0 for h in hs + [h3])

        # set_closed(): the job closes on rdzvd; is_closed() says so.
        assert not hs[0].is_closed()
        hs[0].set_closed()
        assert hs[0].is_closed()
        assert ctl.get_job(name).state == PB.types.JOB_STATE_CLOSING
        # shutdown() leaves: the job ends once every node has gone.
        for h in hs + [h3]:
            assert h.shutdown()
        rt.wait_for(lambda: ctl.get_job(name).state in (
            PB.types.JOB_STATE_CLOSED, PB.types.JOB_STATE_FAILED), 30,
            what="the job ended after every node left")
    finally:
        for h in locals().get("hs", []) + [locals().get("h3")]:
            if h is not None and h._coproc is not None:
                h._coproc.finish(5)
        ctl.close()
        daemon.stop()
