"""rdzv-agent with real PyTorch: DDP training on gloo (CPU) through the real
rdzvd and rdzv-agent binaries (SPEC §4-§6).

Every worker runs train_ddp.py, which leaves JSON files per generation and
rank in a results directory (see its top comment); the tests assert on
those, on the agents' exit statuses and output, and on the job as rdzvd's
Control service shows it. Skipped only when torch cannot be imported.

Timing: each worker imports torch (1-3 s on two busy cores), so the jobs
are small (2 to 4 workers) and the agents run with short deadlines
(last call 1-3 s, reconnect grace 1 s, stop timeout 3 s). Every wait is
bounded.
"""

import json
import os
import signal
import time

import pytest

pytest.importorskip("torch")

import rdzvagent  # noqa: E402
import rdzvtest as rt  # noqa: E402
import rdzvnode  # noqa: E402

AGENT = rdzvagent.AGENT
TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_ddp.py")
PB = rdzvnode.pb
GRACE_S = 1.0

# SPEC §5: OMP_NUM_THREADS is set only where it is unset.
os.environ.pop("OMP_NUM_THREADS", None)


class Job(rdzvagent.AgentJob):
    """One job on a private rdzvd whose workers run train_ddp.py."""

    worker = TRAIN

    def agent(self, tag, nproc, nnodes, max_restarts=0, last_call="1s",
              env=None, args=(), grace=GRACE_S):
        """Starts rdzv-agent `tag` with |nproc| workers of train_ddp.py."""
        log_dir = os.path.join(self.tmp, "logs-" + tag)
        argv = ["--nnodes", nnodes, "--nproc-per-node", nproc,
                "--max-restarts", max_restarts, "--last-call", last_call,
                "--join-timeout", "60s", "--reconnect-grace", "%gs" % grace,
                "--lease-ttl", "10s", "--stop-timeout", "3s", "--tee",
                "--log-dir", log_dir] + list(args)
        e = {"TRAIN_OUT": self.out, "TRAIN_TAG": tag, "TRAIN_EPOCHS": "2",
             "TRAIN_STOP_FILE": self.stop_file, "TRAIN_EPOCH_SECONDS": "0.1",
             "TRAIN_MAX_SECONDS": "90", "TRAIN_ON_PEER_LOSS": "exit"}
        e.update(env or {})
        p = self.start(tag, argv, e)
        p.nproc, p.log_dir = nproc, log_dir
        return p

    def generations(self, kind="start"):
        return sorted({g for g, _ in self.files(kind)})

    def _poll(self, ok, timeout, what):
        """rt.wait_for(ok), but gives up at once when every agent has
        exited, and shows the agents' output on failure."""
        def cond():
            v = ok()
            if not v and self.agents and all(p.p.poll() is not None
                                             for p in self.agents.values()):
                v = ok()
                if not v:
                    raise AssertionError("every agent exited while waiting for %s\n%s"
                                         % (what(), self.outputs()))
            return v
        try:
            return rt.wait_for(cond, timeout, 0.1, "condition")
        except TimeoutError:
            raise AssertionError("timed out after %d s waiting for %s\n%s"
                                 % (timeout, what(), self.outputs()))

    def wait_ranks(self, kind, gen, world, timeout=60, what=None):
        """Waits until ranks 0..world-1 of |gen| each left a |kind| file."""
        def ok():
            got = self.by_rank(kind, gen)
            return got if sorted(got) == list(range(world)) else None
        return self._poll(ok, timeout, lambda: what or "%s files of ranks 0..%d in "
                          "generation %s; have %s" % (kind, world - 1, gen,
                                                      sorted(self.files(kind))))

    def wait_world(self, world, after=0, timeout=60):
        """Waits for a generation above |after| whose `world` ranks all
        started (init_process_group succeeded); returns (gen, start files)."""
        def ok():
            for g in self.generations():
                if g <= after:
                    continue
                got = self.by_rank("start", g)
                if sorted(got) == list(range(world)):
                    return g, got
            return None
        return self._poll(ok, timeout, lambda: "a generation above %d with %d started "
                          "workers; have %s" % (after, world, sorted(self.files("start"))))

    def wait_epochs(self, gen, world, epochs, timeout=60):
        """Waits until every rank of |gen| finished |epochs| epochs."""
        def ok():
            got = self.by_rank("progress", gen)
            return (sorted(got) == list(range(world)) and
                    all(d["epoch"] >= epochs for d in got.values()))
        self._poll(ok, timeout, lambda: "%d epochs on %d ranks of generation %d; have %s"
                   % (epochs, world, gen, self.by_rank("progress", gen)))

    def stop_training(self):
        self.stop_workers()

    def wait_exits(self, tags=None, timeout=60):
        return super().wait_exits(tags, timeout)


def alive(pid):
    """Whether |pid| is a running train_ddp.py (not a reused pid, not a zombie)."""
    return rdzvagent.alive(pid, "train_ddp.py")


def kill_worker(pid):
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def job(tmp_path, request):
    j = Job(tmp_path, rdzvagent.job_name(request))
    yield j
    j.close()


def check_outcome(j, gen, world):
    """The end of a successful job: every rank of |gen| finished with the
    same model, and the loss fell."""
    final = j.wait_ranks("final", gen, world, timeout=30)
    sums = {d["checksum"] for d in final.values()}
    assert len(sums) == 1, "the models differ between ranks: %s" % final
    for r, d in final.items():
        assert d["world_size"] == world
        assert d["losses"][-1] < d["losses"][0] / 2, "rank %d: loss did not fall: %s" % (
            r, d["losses"])
    return final


def check_closed(j, gen):
    job = j.wait_job(lambda x: x.state == PB.types.JOB_STATE_CLOSED, 15, "job closed")
    assert job.generation == gen
    return job


# -- 1 and 2: three agents with 2, 1 and 1 workers -------------------------

@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """One job of three agents with 2, 1 and 1 workers that trains six
    epochs and ends; shared by the tests of its outcome and environment."""
    j = Job(tmp_path_factory.mktemp("ddp"), "ddp-4")
    try:
        for tag, nproc in (("a", 2), ("b", 1), ("c", 1)):
            j.agent(tag, nproc, "3", max_restarts=2,
                    env={"TRAIN_EPOCHS": "6", "TRAIN_STOP_FILE": "",
                         "TRAIN_EPOCH_SECONDS": "0"})
        exits = j.wait_exits(timeout=120)
        j.result = {"exits": exits, "job": j.job()}
        yield j
    finally:
        j.close()


def test_ddp_three_agents(ddp_run):
    j = ddp_run
    assert j.result["exits"] == {"a": 0, "b": 0, "c": 0}, j.outputs()
    gens = j.generations()
    assert len(gens) == 1, "more than one generation ran: %s\n%s" % (gens, j.outputs())
    gen = gens[0]
    start = j.wait_ranks("start", gen, 4)
    assert sorted(d["pg_rank"] for d in start.values()) == [0, 1, 2, 3]
    assert all(d["world_size"] == 4 for d in start.values())
    assert sorted(d["tag"] for d in start.values()) == ["a", "a", "b", "c"]
    final = check_outcome(j, gen, 4)
    assert all(len(d["losses"]) == 6 for d in final.values())
    job = j.result["job"]
    assert job.state == PB.types.JOB_STATE_CLOSED, job
    assert job.generation == gen and job.restart_count == 0 and job.world_size == 4
    # --tee: the agents print their workers' lines, prefixed by the rank.
    for t, p in j.agents.items():
        for r, d in start.items():
            if d["tag"] == t:
                assert "[rank %d]: rank %d epoch 6 loss" % (r, r) in p.output(), p.output()


def test_worker_env(ddp_run):
    """SPEC §5 on every rank: the values follow from each node's group
    rank and nproc; init_process_group("gloo", env://) succeeded with them."""
    j = ddp_run
    gen = j.generations("env")[0]
    env = j.wait_ranks("env", gen, 4)
    started = j.by_rank("start", gen)
    nproc = {t: p.nproc for t, p in j.agents.items()}
    group = {}
    for d in env.values():
        group.setdefault(d["tag"], set()).add(d["env"]["GROUP_RANK"])
    assert all(len(v) == 1 for v in group.values()), group
    group = {t: int(v.pop()) for t, v in group.items()}
    assert sorted(group.values()) == [0, 1, 2], group
    order = sorted(group, key=group.get)
    base = {t: sum(nproc[u] for u in order[:order.index(t)]) for t in order}
    ports = set()
    for rank, d in env.items():
        e, t = d["env"], d["tag"]
        local = rank - base[t]
        want = {
            "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": str(nproc[t]), "GROUP_RANK": str(group[t]),
            "GROUP_WORLD_SIZE": "3", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": "4",
            "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1",
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "2",
            "TORCHELASTIC_RUN_ID": j.id, "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCHELASTIC_ERROR_FILE": os.path.join(
                j.agents[t].log_dir, str(gen), str(local), "error.json"),
            "RDZV_GENERATION": str(gen),
        }
        if nproc[t] > 1:
            want["OMP_NUM_THREADS"] = "1"
        got = {k: v for k, v in e.items() if k != "MASTER_PORT"}
        assert got == want, "rank %d (agent %s)" % (rank, t)
        assert 0 <= local < nproc[t]
        ports.add(e["MASTER_PORT"])
        # The rest of the agent's environment is inherited (TRAIN_TAG).
        assert t in nproc
        assert started[rank]["pg_rank"] == rank and started[rank]["world_size"] == 4
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    assert j.result["job"].generation == gen


# -- 3: scale-up ------------------------------------------------------------

def test_scale_up(job):
    """A 2:3 job runs on two agents; a third joins: every worker restarts in
    a world of 3 on a new master port, and no restart is counted."""
    job.agent("a", 1, "2:3")
    job.agent("b", 1, "2:3")
    g1, s1 = job.wait_world(2)
    job.wait_epochs(g1, 2, 2)
    job.agent("c", 1, "2:3")
    g2, s2 = job.wait_world(3, after=g1)
    for d in s2.values():
        assert d["env"]["WORLD_SIZE"] == "3" and d["env"]["GROUP_WORLD_SIZE"] == "3"
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "0", d
    assert {d["env"]["MASTER_PORT"] for d in s2.values()} != \
        {d["env"]["MASTER_PORT"] for d in s1.values()}, (s1, s2)
    assert len({d["env"]["MASTER_PORT"] for d in s2.values()}) == 1
    # The workers of the first round were stopped, none survives.
    for d in s1.values():
        rt.wait_for(lambda: not alive(d["pid"]), 10, 0.1, "worker %d gone" % d["pid"])
    job.wait_epochs(g2, 3, 2)
    job.stop_training()
    assert job.wait_exits(timeout=60) == {"a": 0, "b": 0, "c": 0}, job.outputs()
    check_outcome(job, g2, 3)
    j = check_closed(job, g2)
    assert j.restart_count == 0


# -- 4: node loss -----------------------------------------------------------

# When a peer dies, gloo fails the collective at once, and an ordinary DDP
# script then exits 1: a worker failure (SPEC §4 rule 6) reported by every
# surviving node while the lost node's reconnect grace still runs. The
# "ordinary" variant runs such workers, with rdzv's default reconnect grace
# (3 s); the "waiting" variant runs workers that leave recovery to their
# agent (they wait to be stopped), which shows the node loss alone.
PEER_LOSS = [pytest.param(("exit", 3.0), id="ordinary"),
             pytest.param(("wait", GRACE_S), id="waiting")]


def start_three(job, max_restarts, peer_loss=("exit", GRACE_S)):
    """Three agents of a 2:3 job with one worker each, training."""
    for t in ("a", "b", "c"):
        job.agent(t, 1, "2:3", max_restarts=max_restarts, last_call="3s",
                  env={"TRAIN_ON_PEER_LOSS": peer_loss[0]}, grace=peer_loss[1])
    g1, s1 = job.wait_world(3)
    job.wait_epochs(g1, 3, 2)
    return g1, s1


@pytest.mark.parametrize("peer_loss", PEER_LOSS)
def test_node_lost_restarts(job, peer_loss):
    """kill -9 of one agent of three (--max-restarts 1): the other two get a
    new round within reconnect_grace + 2 s, restart count 1, and train on.
    One lost node is one failure, however its peers' workers react."""
    grace = peer_loss[1]
    g1, s1 = start_three(job, 1, peer_loss)
    c_pids = [d["pid"] for d in s1.values() if d["tag"] == "c"]
    t0 = time.monotonic()
    job.agents["c"].kill()
    j = job.wait_job(lambda x: x.generation > g1, grace + 2, "a new generation within "
                     "reconnect_grace + 2 s")
    took = time.monotonic() - t0
    for pid in c_pids:
        rt.wait_for(lambda: not alive(pid), 5, 0.05, "the lost agent's worker %d gone" % pid)
    # The round that follows the loss: two nodes, one restart.
    j = job.wait_job(lambda x: x.state != PB.types.JOB_STATE_RUNNING or x.world_size == 2,
                     grace + 2, "a round of the two nodes left")
    assert (j.state, j.restart_count, j.world_size) == \
        (PB.types.JOB_STATE_RUNNING, 1, 2), \
        "want a running round of 2 nodes after 1 restart, have %s after %d (%s)\n%s\n%s" % (
            PB.types.JobState.Name(j.state), j.restart_count, j.reason,
            "\n".join("  %d %s %s" % (e.generation, e.kind, e.message) for e in j.events),
            job.outputs())
    g2, s2 = job.wait_world(2, after=g1)
    assert g2 == j.generation
    assert sorted(d["tag"] for d in s2.values()) == ["a", "b"]
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "1", d
        assert d["env"]["WORLD_SIZE"] == "2"
    job.wait_epochs(g2, 2, 3)
    job.stop_training()
    exits = job.wait_exits(["a", "b"], timeout=60)
    assert exits == {"a": 0, "b": 0}, job.outputs()
    check_outcome(job, g2, 2)
    j = check_closed(job, g2)
    lost = [n for n in j.nodes if n.state == PB.types.NODE_STATE_LOST]
    assert len(lost) == 1, j
    print("new round %.2f s after kill -9" % took)


@pytest.mark.parametrize("peer_loss", PEER_LOSS)
def test_node_lost_fails_job(job, peer_loss):
    """The same with --max-restarts 0: the job fails naming the lost node
    (SPEC §4 rule 5), and the other agents exit 1 with that reason."""
    g1, s1 = start_three(job, 0, peer_loss)
    job.agents["c"].kill()
    j = job.wait_job(lambda x: x.state == PB.types.JOB_STATE_FAILED, peer_loss[1] + 5,
                     "the job failed")
    lost = [n for n in j.nodes if n.state == PB.types.NODE_STATE_LOST]
    assert len(lost) == 1, "want the job failed for a lost node, have: %s\n%s" % (
        j.reason, "\n".join("  %d %s %s" % (e.generation, e.kind, e.message)
                            for e in j.events))
    assert "(node %d) was lost" % lost[0].node_id in j.reason, j.reason
    assert "exceeds max_restarts 0" in j.reason, j.reason
    exits = job.wait_exits(["a", "b"], timeout=30)
    assert exits == {"a": 1, "b": 1}, job.outputs()
    for t in ("a", "b"):
        assert "(node %d) was lost" % lost[0].node_id in job.agents[t].output(), \
            job.agents[t].output()
    for d in s1.values():
        rt.wait_for(lambda: not alive(d["pid"]), 10, 0.1, "worker %d gone" % d["pid"])


# -- 5: worker failure ------------------------------------------------------

def test_worker_failure(job):
    """A worker exits 1 (--max-restarts 1): every node restarts with
    TORCHELASTIC_RESTART_COUNT=1; it fails again, before any step, four
    times (rule 18): the job fails and every agent exits 1 printing the
    reason, the error file's message included.
    Rank 0 waits for its agent when its peer goes (TRAIN_ON_PEER_LOSS=wait):
    otherwise its own gloo error ("Connection closed by peer") races rank
    1's report, and whichever rdzvd hears first names the failure."""
    env = {"TRAIN_FAIL_RANK": "1", "TRAIN_STOP_FILE": "", "TRAIN_EPOCHS": "50",
           "TRAIN_ON_PEER_LOSS": "wait"}
    job.agent("a", 1, "2", max_restarts=1, env=env)
    job.agent("b", 1, "2", max_restarts=1, env=env)
    g1, s1 = job.wait_world(2)
    g2, s2 = job.wait_world(2, after=g1)
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "1", d
    assert {d["tag"] for d in s2.values()} == {"a", "b"}
    assert {d["pid"] for d in s2.values()}.isdisjoint(d["pid"] for d in s1.values())
    exits = job.wait_exits(timeout=60)
    assert exits == {"a": 1, "b": 1}, job.outputs()
    j = job.job()
    assert j.state == PB.types.JOB_STATE_FAILED and j.restart_count == 2, j
    assert "injected failure: rank 1, restart 1" in j.reason, j.reason
    assert "exceeds max_restarts 1" in j.reason, j.reason
    for p in job.agents.values():
        assert "exceeds max_restarts 1" in p.output(), p.output()
    # It fails before any step each time: the three rounds after the
    # counted failure are that failure again (rule 18), the fourth counts.
    assert job.generations() == [g1, g2, g2 + 1, g2 + 2, g2 + 3]
    assert [e.kind for e in j.events].count("repeat") == 3, j.events
    # The failing worker's error file is where TORCHELASTIC_ERROR_FILE said.
    err = s2[1]["env"]["TORCHELASTIC_ERROR_FILE"]
    with open(err) as f:
        assert "injected failure" in json.load(f)["message"]["message"]


# -- 6: a planned leave -----------------------------------------------------

def test_sigterm_leaves(job):
    """SIGTERM to one agent of a 2:3 job: its workers get SIGTERM, it leaves
    and exits 143; the job re-rounds without it; no restart is counted,
    though the other workers fail when theirs go (ordinary workers)."""
    g1, s1 = start_three(job, 0)
    c = job.agents["c"]
    c_rank = [r for r, d in s1.items() if d["tag"] == "c"][0]
    c.signal(signal.SIGTERM)
    assert c.wait(15) == 143, c.output()
    term = job.by_rank("sigterm", g1)
    assert c_rank in term and term[c_rank]["pid"] == s1[c_rank]["pid"], term
    g2, s2 = job.wait_world(2, after=g1)
    assert sorted(d["tag"] for d in s2.values()) == ["a", "b"]
    for d in s2.values():
        assert d["env"]["TORCHELASTIC_RESTART_COUNT"] == "0", d
    j = job.job()
    assert j.restart_count == 0 and j.world_size == 2, j
    left = [n for n in j.nodes if n.state == PB.types.NODE_STATE_LEFT]
    assert len(left) == 1, j
    job.wait_epochs(g2, 2, 3)
    job.stop_training()
    assert job.wait_exits(["a", "b"], timeout=60) == {"a": 0, "b": 0}, job.outputs()
    check_outcome(job, g2, 2)
    assert check_closed(job, g2).restart_count == 0


# -- 7: rdzvd crashes -------------------------------------------------------

def test_rdzvd_killed(job):
    """kill -9 of rdzvd while the job trains, then a restart on the same
    database and port: the same workers train on, the agents resume."""
    job.agent("a", 1, "2")
    job.agent("b", 1, "2")
    g1, s1 = job.wait_world(2)
    job.wait_epochs(g1, 2, 2)
    pids = sorted(d["pid"] for d in s1.values())
    addr, db = job.daemon.addr, job.daemon.db
    job.daemon.kill()
    down = time.monotonic()
    before = {r: d["epoch"] for r, d in job.by_rank("progress", g1).items()}
    # Training goes on without rdzvd; it stays away for 2 s, long enough
    # for the agents to have retried and backed off.
    job.wait_epochs(g1, 2, max(before.values()) + 3)
    rt.wait_for(lambda: time.monotonic() - down >= 2, 3, 0.1, "2 s without rdzvd")
    for t in ("a", "b"):
        job.agents[t].wait_line("lost rdzvd", 5)
    job.ctl.close()
    job.daemon = rt.Daemon(job.tmp, listen=addr, db=db)
    job.ctl = rdzvnode.Control(job.daemon.addr)
    j = job.wait_job(lambda x: len(x.nodes) == 2 and all(n.connected for n in x.nodes),
                     20, "both agents resumed")
    for t in ("a", "b"):
        job.agents[t].wait_line("resumed as node id", 5)
    assert j.generation == g1 and j.restart_count == 0, j
    assert all(alive(p) for p in pids)
    after = {r: d["epoch"] for r, d in job.by_rank("progress", g1).items()}
    job.wait_epochs(g1, 2, max(after.values()) + 2)
    job.stop_training()
    assert job.wait_exits(timeout=60) == {"a": 0, "b": 0}, job.outputs()
    assert job.generations() == [g1]
    final = check_outcome(job, g1, 2)
    assert sorted(d["pid"] for d in final.values()) == pids
    check_closed(job, g1)
