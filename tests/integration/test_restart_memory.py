"""What a restart of rdzvd used to forget (issue 42; docs/STORE.md): each
case restarts rdzvd (SQLite, the same database and port) at the point that
matters and shows the outcome a run without the restart has.

- rank-policy stable: survivors keep their group ranks in the round after
  a restart that came between the loss and that round.
- A join sent again with the same join token after a restart (its answer
  was lost) gets the node the first attempt made: no second node.
- A fixed allocation's refused host still fails its job at once: a
  refusal kept for a job with no node yet, and a job's refusal count.
- `rdzvctl hosts` shows how the on-quarantine command's last run ended.
- A node's last progress step and last-seen time (the progress
  checkpoint), also after kill -9."""

import os
import signal
import sqlite3
import time

import pytest

import etcdtest
import rdzvtest as rt
from rdzvnode import Control, Node, R

etcd = etcdtest.fixture()

STABLE = 2          # RankPolicy.RANK_POLICY_STABLE


@pytest.fixture(params=["sqlite", "etcd"])
def store(request, tmp_path):
    """The store a case runs on: None (SQLite, the test's database) or an
    etcd spec (a private one-member etcd)."""
    if request.param == "sqlite":
        return None
    e = request.getfixturevalue("etcd")
    return "etcd://%s/rdzv" % e.endpoints


def start(tmp_path, store, args=()):
    return rt.Daemon(tmp_path, args=args, store=store)


def restart(d, kill=False, args=()):
    """Stops rdzvd (SIGTERM, or kill -9) and starts it again on the same
    store and port, with |args|. On etcd always SIGTERM: the killed
    leader's lease would hold the election for its whole time."""
    port = d.port
    if kill and d.store is None:
        d.signal(signal.SIGKILL)
        d.wait(10)
    d.stop()
    return rt.Daemon(d.tmpdir, args=args, db=d.db, store=d.store,
                     listen="127.0.0.1:%d" % port)


def stable(req):
    req.rank_policy = STABLE


def ranks(nodes, generation):
    return {n.name: n.wait_assignment(generation=generation).group_rank
            for n in nodes}


def test_stable_ranks_survive_a_restart(tmp_path, store):
    """a, b, c hold ranks 0, 1, 2 of a 3:3 job; b leaves, and the job waits
    for a third node. rdzvd restarts (kill -9), a and c resume, d joins:
    with the previous ranks kept, a keeps 0 and c keeps 2, d takes b's 1
    (in arrival order c would have moved to 1)."""
    d = start(tmp_path, store)
    nodes = [Node(d.addr, name=x) for x in ("a", "b", "c", "d")]
    a, b, c, dd = nodes
    try:
        for n in (a, b, c):
            n.join("stable", min_nodes=3, max_nodes=3, extra=stable,
                   lease_ttl_ms=30000, reconnect_grace_ms=30000)
        assert ranks((a, b, c), 1) == {"a": 0, "b": 1, "c": 2}
        b.leave()
        rt.wait_for(lambda: Control(d.addr).get_job("stable").participants
                    == 0 or Control(d.addr).get_job("stable").world_size == 0,
                    10, what="round 1 over after b left")
        d = restart(d, kill=True)
        for n in (a, c):
            n.resume(1)
        dd.join("stable", min_nodes=3, max_nodes=3, extra=stable)
        got = {n.name: n.wait_assignment(after=1, timeout=20).group_rank
               for n in (a, c, dd)}
        assert got == {"a": 0, "c": 2, "d": 1}, got
    finally:
        for n in nodes:
            n.close()
        d.stop()


def test_a_join_sent_again_after_a_restart_gets_its_node(tmp_path, store):
    """A join is committed and answered, but its answer is lost: rdzvd
    restarts (kill -9) and the agent sends the join again with the same
    token. It gets the node the first attempt made, and when the second
    node joins the round has two nodes, no spare and no ghost."""
    d = start(tmp_path, store)
    token = os.urandom(16)

    def with_token(req):
        req.join_token = token

    first, again, other = (Node(d.addr, name=x) for x in
                           ("h1", "h1", "h2"))
    try:
        acc = first.join("tok", min_nodes=2, max_nodes=3,
                         last_call_ms=500, extra=with_token)
        d = restart(d, kill=True)
        first.close()
        acc2 = again.join("tok", min_nodes=2, max_nodes=3,
                          last_call_ms=500, extra=with_token, timeout=20)
        assert acc2.node_id == acc.node_id, (acc, acc2)
        other.join("tok", min_nodes=2, max_nodes=3, last_call_ms=500)
        a = again.wait_assignment(generation=1, timeout=20)
        assert a.world_size == 2, a
        job = Control(d.addr).get_job("tok")
        assert len(job.nodes) == 2 and job.spares == 0, job
    finally:
        for n in (first, again, other):
            n.close()
        d.stop()


QUARANTINED = 3     # HostState.HOST_STATE_QUARANTINED
ADMIN = ["--admin", "anonymous"]
FAILED_JOB = 5      # JobState.JOB_STATE_FAILED


def fixed(alloc):
    def extra(req):
        req.allocation_nodes = alloc
    return extra


def refused_join(addr, job, host, alloc, min_nodes):
    with Node(addr, name=host) as n:
        try:
            n.join(job, min_nodes=min_nodes, max_nodes=alloc,
                   rejoin_timeout_ms=0, extra=fixed(alloc))
        except Exception as e:          # RpcFailure
            assert "quarantined" in str(e), e
            return
        raise AssertionError("the join of %s was not refused" % host)


def job_state(addr, job):
    try:
        return Control(addr).get_job(job)
    except Exception:
        return None


def test_a_kept_refusal_fails_a_fixed_job_after_a_restart(tmp_path, store):
    """A quarantined host's join is refused before its job has a node, and
    kept for the job. rdzvd restarts; the job's first node then joins and
    the 3-node fixed allocation (rejoin_timeout 0), less the refused node,
    cannot make min 3: the job fails at once, naming the host, instead of
    waiting out its join timeout."""
    d = start(tmp_path, store, args=ADMIN)
    try:
        assert Control(d.addr).set_host("bad", QUARANTINED, "ECC").state \
            == QUARANTINED
        refused_join(d.addr, "fixed", "bad", 3, 3)
        d = restart(d, args=ADMIN)
        with Node(d.addr, name="good1") as n:
            n.join("fixed", min_nodes=3, max_nodes=3, rejoin_timeout_ms=0,
                   extra=fixed(3), wait=False)
            rt.wait_for(lambda: getattr(job_state(d.addr, "fixed"), "state",
                                        0) == FAILED_JOB, 10,
                        what="the fixed job failed at once")
        assert "bad" in job_state(d.addr, "fixed").reason
    finally:
        d.stop()


def test_refusal_counts_survive_a_restart(tmp_path, store):
    """A 4-node fixed allocation of min 3: one refused host leaves 3 that
    can join, and the job waits. rdzvd restarts; a second host is refused,
    and with the first counted still, 2 are left: the job fails at once."""
    d = start(tmp_path, store, args=ADMIN)
    good = Node(d.addr, name="good1")
    try:
        for h in ("bad1", "bad2"):
            Control(d.addr).set_host(h, QUARANTINED, "ECC")
        good.join("count", min_nodes=3, max_nodes=4, rejoin_timeout_ms=0,
                  extra=fixed(4))
        refused_join(d.addr, "count", "bad1", 4, 3)
        assert job_state(d.addr, "count").state != FAILED_JOB
        d = restart(d, args=ADMIN)
        good.resume(0, wait=False)
        refused_join(d.addr, "count", "bad2", 4, 3)
        rt.wait_for(lambda: job_state(d.addr, "count").state == FAILED_JOB,
                    10, what="the job failed at the second refusal")
    finally:
        good.close()
        d.stop()


EXITED = 3          # HookRunState.HOOK_RUN_STATE_EXITED


def test_the_hooks_outcome_survives_a_restart(tmp_path, store):
    """The on-quarantine command runs for a quarantined host and exits 3;
    after a restart `rdzvctl hosts` still shows how it ended (HOOK
    "exited 3") and the last line it wrote."""
    hook = os.path.join(str(tmp_path), "hook.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho \"drained $1\"\nexit 3\n")
    os.chmod(hook, 0o755)
    args = ADMIN + ["--on-quarantine", hook]
    d = start(tmp_path, store, args=args)

    def hook_of(addr):
        h = Control(addr).list_hosts().get("bad")
        return h.hook if h is not None and h.HasField("hook") else None

    try:
        Control(d.addr).set_host("bad", QUARANTINED, "ECC")
        rt.wait_for(lambda: getattr(hook_of(d.addr), "state", 0) == EXITED,
                    20, what="the hook's run ended")
        d = restart(d, args=args)
        h = hook_of(d.addr)
        assert h is not None and h.state == EXITED and h.exit_code == 3 \
            and h.output == "drained bad" and h.ended_unix_ms > 0, h
        cp = rt.subprocess.run([rt.build_path("client", "ctl", "rdzvctl"),
                                "--server", d.addr, "hosts"],
                               capture_output=True, text=True, timeout=30)
        line = [x for x in cp.stdout.splitlines() if x.startswith("bad ")]
        assert line and "exited 3" in line[0], cp.stdout
    finally:
        d.stop()


def saved_step(db):
    """The step column of the one node in the database (None: not yet)."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        rows = con.execute("SELECT step FROM nodes").fetchall()
    finally:
        con.close()
    return rows[0][0] if rows else None


def test_progress_and_last_seen_survive_a_kill(tmp_path):
    """A node's workers report step 42. Within the progress checkpoint
    (5 s) the step is in the database; rdzvd is killed (kill -9) and
    started again: GetJob shows the node at step 42, and when it was last
    seen (before the kill), where a restart used to start from nothing."""
    d = rt.Daemon(tmp_path)
    n = Node(d.addr, name="p1")
    try:
        n.join("prog", min_nodes=1, max_nodes=1)
        g = n.wait_assignment().generation
        n.progress(g, 42)
        rt.wait_for(lambda: saved_step(d.db) == 42, 15,
                    what="the checkpoint wrote the step")
        t_kill = int(time.time() * 1000)
        d = restart(d, kill=True)
        node = Control(d.addr).get_job("prog").nodes[0]
        assert node.has_step and node.step == 42, node
        assert 0 < node.last_seen_unix_ms <= t_kill, (node, t_kill)
        assert node.step_unix_ms > 0, node
    finally:
        n.close()
        d.stop()
