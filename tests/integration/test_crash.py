"""rdzvd killed with SIGKILL at random moments (SPEC §9, §4 rule 11).

Several runs each start rdzvd on the same database and port, set off a storm
of joins across many jobs plus random worker failures, leaves and lost
connections, and kill the daemon at a random moment. Clients record every
assignment they were sent. Because nothing is acknowledged before it is
durable, after every crash:

- the database passes `PRAGMA integrity_check`;
- every assignment any client received is in the `rounds`/`assignments`
  tables, with the values the client saw;
- no generation of a job was handed out twice: all assignments received for
  one (rdzv_id, generation) agree on the world, the master and the restart
  count, their group ranks are distinct and base ranks are the prefix sums
  of nproc in group-rank order.

The same runs go on an etcd store (a real etcd started by the test; skipped
with the reason when etcd is not installed), where "the database" is what
the etcd prefix holds: every received assignment is in a round of the
job's log that its record names, and no generation is recorded twice.

The seed is printed and may be set with RDZV_CRASH_SEED to replay a run.
Every loop is bounded in count and time.
"""

import os
import random
import sqlite3
import time

import grpc
import pytest

import etcdtest
import rdzvtest as rt
import storeetcd
from rdzvnode import Node, rpc_code

RUNS = int(os.environ.get("RDZV_CRASH_RUNS", "5"))
JOBS = 30
NODES_PER_JOB = 4
JOB_SETTINGS = dict(min_nodes=2, max_nodes=4, last_call_ms=150,
                    join_timeout_ms=600000, max_restarts=100000,
                    lease_ttl_ms=1500, reconnect_grace_ms=200)


def received(nodes):
    """(rdzv_id, generation, node_id) -> the assignment's values, from
    every stream of every node; a node that got two different assignments
    for one generation is an error by itself."""
    out = {}
    for n in nodes:
        for a in n.assignments():
            # Keyed by the job the node joined: Assignment.rdzv_id is
            # checked by test_rendezvous.py.
            key = (n.rdzv_id, a.generation, n.node_id)
            val = (a.group_rank, a.base_rank, a.local_world_size, a.world_size,
                   a.group_world_size, a.master_addr, a.master_port,
                   a.restart_count)
            assert out.get(key, val) == val, \
                "node %d got two assignments for %s generation %d: %s, %s" % (
                    n.node_id, n.rdzv_id, a.generation, out[key], val)
            out[key] = val
    return out


def check_rounds_consistent(got, seed):
    """No generation handed out twice with different contents."""
    rounds = {}
    for (rid, gen, node_id), v in got.items():
        rounds.setdefault((rid, gen), []).append((node_id, v))
    for (rid, gen), members in rounds.items():
        shared = {(v[3], v[4], v[5], v[6], v[7]) for _, v in members}
        assert len(shared) == 1, "seed %d: %s generation %d handed out with " \
            "different worlds: %s" % (seed, rid, gen, members)
        world, group_world = members[0][1][3], members[0][1][4]
        ranks = sorted((v[0], v[1], v[2]) for _, v in members)
        assert len({r[0] for r in ranks}) == len(ranks), \
            "seed %d: %s generation %d: a group rank given twice: %s" % (
                seed, rid, gen, members)
        assert len(ranks) <= group_world
        if len(ranks) == group_world:
            base = 0
            for i, (gr, br, nproc) in enumerate(ranks):
                assert (gr, br) == (i, base), (seed, rid, gen, ranks)
                base += nproc
            assert base == world, (seed, rid, gen, ranks, world)


def check_db(db, got, seed):
    """The database is sound and holds every received assignment."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        dup = con.execute("SELECT rdzv_id, generation, COUNT(*) FROM rounds "
                          "GROUP BY rdzv_id, generation HAVING COUNT(*) > 1").fetchall()
        assert dup == [], dup
        rounds = {(r[0], r[1]): r[2:] for r in con.execute(
            "SELECT rdzv_id, generation, world_size, master_addr, master_port, "
            "restart_count FROM rounds")}
        assigns = {(r[0], r[1], r[2]): r[3:] for r in con.execute(
            "SELECT rdzv_id, generation, node_id, group_rank, base_rank, nproc "
            "FROM assignments")}
        # A round's assignments are consistent in the database too.
        per_round = {}
        for (rid, gen, nid), (gr, br, nproc) in assigns.items():
            assert (rid, gen) in rounds, (rid, gen, "assignment without a round")
            per_round.setdefault((rid, gen), []).append((gr, br, nproc))
        for key, ranks in per_round.items():
            ranks.sort()
            base = 0
            for i, (gr, br, nproc) in enumerate(ranks):
                assert (gr, br) == (i, base), ("seed %d: db round" % seed, key, ranks)
                base += nproc
            assert base == rounds[key][0], ("seed %d: db world size" % seed, key)
        # Generations of a job grow without gaps ... a crash may lose a round
        # nobody was sent, so only uniqueness matters; the PRIMARY KEY and
        # the check above hold that.
        missing = []
        for (rid, gen, nid), v in got.items():
            gr, br, nproc, world, _gw, maddr, mport, rc = v
            r = rounds.get((rid, gen))
            a = assigns.get((rid, gen, nid))
            if r is None or a is None or tuple(r) != (world, maddr, mport, rc) \
                    or tuple(a) != (gr, br, nproc):
                missing.append(((rid, gen, nid), v, r, a))
        assert missing == [], "seed %d: %d received assignments are not in the " \
            "database as received, e.g. %s" % (seed, len(missing), missing[:5])
        return len(rounds)
    finally:
        con.close()


def check_etcd(etcd, prefix, got, seed):
    """What the etcd prefix holds is sound and has every received
    assignment (check_db's checks on the etcd layout)."""
    st = storeetcd.read(etcd, prefix)
    for (rid, gen), rs in st.rounds.items():
        assert len(rs) == 1, "seed %d: %s generation %d recorded %d times" % (
            seed, rid, gen, len(rs))
        j = st.jobs[rid]
        assert gen <= j.generation, ("seed %d: a round above the job's "
                                     "generation" % seed, rid, gen, j.generation)
        ranks = sorted((m.group_rank, m.base_rank, m.nproc) for m in rs[0].members)
        base = 0
        for i, (gr, br, nproc) in enumerate(ranks):
            assert (gr, br) == (i, base), ("seed %d: etcd round" % seed, rid, gen, ranks)
            base += nproc
        assert base == rs[0].world_size, ("seed %d: world size" % seed, rid, gen)
    missing = []
    for (rid, gen, nid), v in got.items():
        gr, br, nproc, world, _gw, maddr, mport, rc = v
        rs = st.rounds.get((rid, gen))
        m = None
        if rs:
            r = rs[0]
            m = [x for x in r.members if x.node_id == nid]
        if not rs or not m or (r.world_size, r.master_addr, r.master_port,
                                r.restart_count) != (world, maddr, mport, rc) or \
                (m[0].group_rank, m[0].base_rank, m[0].nproc) != (gr, br, nproc):
            missing.append(((rid, gen, nid), v))
    assert missing == [], "seed %d: %d received assignments are not in etcd " \
        "as received, e.g. %s" % (seed, len(missing), missing[:5])
    return len(st.rounds)


class Storm:
    """The clients of one run."""

    def __init__(self, addr, rng, run):
        self.addr = addr
        self.rng = rng
        self.run = run
        self.nodes = []
        self.live = []
        self.count = 0
        self.actions = {"join": 0, "fail": 0, "leave": 0, "lose": 0}

    def join(self, job):
        self.count += 1
        n = Node(self.addr, name="r%d-%s-%d" % (self.run, job, self.count))
        nproc = self.rng.choice((1, 1, 2, 4))
        # Joins are not waited for: the storm keeps going.
        n.join(job, nproc=nproc, rank_hint=self.rng.randrange(8),
               advertise_addr="127.0.%d.%d" % (self.run, self.count % 250),
               master_port=20000 + self.count, wait=False, **JOB_SETTINGS)
        self.nodes.append(n)
        self.live.append(n)
        self.actions["join"] += 1

    def act(self):
        """One random action on a live node."""
        if not self.live:
            return
        n = self.rng.choice(self.live)
        r = self.rng.random()
        if r < 0.45:
            a = n.assignments()
            if a and n.session_id is not None:
                self.actions["fail"] += 1
                rpc_code(n.report, a[-1].generation, "FAILED", exits=[(0, 1, 0)],
                         message="crash test", timeout=2)
        elif r < 0.65:
            if n.session_id is not None:
                self.actions["leave"] += 1
                rpc_code(n.leave, "crash test", timeout=2)
                self.live.remove(n)
        elif r < 0.85:
            self.actions["lose"] += 1
            n.close()
            self.live.remove(n)
        else:
            self.join("crash-j%02d" % self.rng.randrange(JOBS))

    def close(self):
        for n in self.nodes:
            n.close()


@pytest.mark.parametrize("backend", ["sqlite", "etcd"])
def test_sigkill_during_join_storms(tmp_path, backend):
    seed = int(os.environ.get("RDZV_CRASH_SEED", str(random.SystemRandom().randrange(1 << 31))))
    print("crash test seed %d (RDZV_CRASH_SEED=%d to replay)" % (seed, seed))
    rng = random.Random(seed)
    db = os.path.join(str(tmp_path), "rdzv.db")
    etcd = store = None
    if backend == "etcd":
        etcdtest.skip_unless_etcd()
        etcd = etcdtest.Etcd(tmp_path / "etcd")
        store = "etcd://%s/crash" % etcd.endpoints
    try:
        run_storms(tmp_path, rng, seed, db, etcd, store)
    finally:
        if etcd is not None:
            etcd.close()


def check(db, etcd, got, seed):
    if etcd is not None:
        return check_etcd(etcd, "/crash", got, seed)
    return check_db(db, got, seed)


def run_storms(tmp_path, rng, seed, db, etcd, store):
    port = 0
    got = {}
    total_rounds = 0
    for run in range(RUNS):
        d = rt.Daemon(tmp_path, listen="127.0.0.1:%d" % port, db=db, store=store)
        port = d.port
        storm = Storm(d.addr, rng, run)
        try:
            # Every job gets NODES_PER_JOB new nodes, in random order.
            order = ["crash-j%02d" % j for j in range(JOBS)] * NODES_PER_JOB
            rng.shuffle(order)
            kill_after = rng.uniform(0.1, 3.0)
            t0 = time.monotonic()
            i = 0
            steps = 0
            while time.monotonic() - t0 < kill_after and steps < 10000:
                steps += 1
                if i < len(order):
                    storm.join(order[i])
                    i += 1
                else:
                    storm.act()
                    time.sleep(0.01)
            d.kill()
            # Streams end once the connection is gone; what they got is final.
            for n in storm.nodes:
                n.close()
            this = received(storm.nodes)
            for k, v in this.items():
                assert got.get(k, v) == v, ("seed %d: generation handed out twice" % seed,
                                            k, got[k], v)
            got.update(this)
            check_rounds_consistent(got, seed)
            total_rounds = check(db, etcd, got, seed)
            print("run %d: killed after %.2f s, %d nodes, actions %s, %d assignments "
                  "received in all, %d rounds in the db" % (
                      run, kill_after, len(storm.nodes), storm.actions, len(got),
                      total_rounds))
        finally:
            storm.close()
            if d.p.poll() is None:
                d.kill()

    # The daemon comes back once more on what the last crash left, and a
    # clean stop leaves a sound database.
    d = rt.Daemon(tmp_path, listen="127.0.0.1:%d" % port, db=db, store=store)
    with d:
        n = Node(d.addr, name="after")
        code, details, _ = rpc_code(lambda: n.join("crash-after", min_nodes=1, max_nodes=1))
        assert code == grpc.StatusCode.OK, (code, details)
        n.wait_assignment(timeout=10)
        n.close()
        assert d.stop() == 0, d.output()[-4000:]
    check(db, etcd, got, seed)
    assert len(got) > 0, "seed %d: no client received any assignment" % seed
