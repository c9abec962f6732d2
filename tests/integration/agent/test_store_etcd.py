"""rdzvd on an etcd store (SPEC §14, §9): a real etcd (Debian's etcd-server,
started by the test on loopback ports with a temporary data directory), the
real rdzvd and real rdzv-agents with sleeping workers.

- rdzvd killed with SIGKILL and started again on the same etcd prefix: the
  jobs come back, the agents resume, their workers keep running, and no
  generation or restart is counted;
- ended jobs are deleted after `retention`, keys and all;
- `rdzvd --migrate-store` copies an SQLite database into an empty etcd
  prefix, and refuses a prefix that holds keys;
- the store settings are checked and printed like every other;
- TLS to etcd with a client certificate;
- a three-member etcd loses the member rdzvd talks to: commits go on.

Skipped, with the reason, when etcd is not installed.
"""

import os
import subprocess


import etcdtest
import rdzvnode
import rdzvtest as rt
from test_agent import PB, Job, alive

RDZVD = rt.build_path("daemon", "rdzvd")


etcd = etcdtest.fixture()


def keys(etcd, prefix):
    """The keys under |prefix| now."""
    out = etcd.ctl("get", "--prefix", "--keys-only", prefix)
    return [k for k in out.split("\n") if k]


def test_restart_on_etcd(tmp_path, etcd):
    """kill -9 of rdzvd on etcd, then a new rdzvd on the same prefix: the
    same workers keep running, the agents resume, the generation holds."""
    store = "etcd://%s/rdzv" % etcd.endpoints
    d = rt.Daemon(tmp_path, store=store)
    job = Job(tmp_path, "etcd-restart", daemon=d)
    try:
        job.agent("a", 1, "2", args=["--node-rank", "0"], mode="sleep")
        job.agent("b", 1, "2", args=["--node-rank", "1"], mode="sleep")
        g1, s1 = job.wait_world(2)
        pids = sorted(x["pid"] for x in s1.values())
        assert keys(etcd, "/rdzv/job/") == ["/rdzv/job/etcd-restart"]
        assert keys(etcd, "/rdzv/node/etcd-restart/"), "no node bucket"
        addr = job.daemon.addr
        job.daemon.kill()
        job.ctl.close()
        for t in "ab":
            job.agents[t].wait_line("lost rdzvd", timeout=10)
        job.daemon = rt.Daemon(tmp_path, listen=addr, store=store)
        job.ctl = rdzvnode.Control(job.daemon.addr)
        j = job.wait_job(lambda x: len(x.nodes) == 2 and
                         all(n.connected for n in x.nodes),
                         15, "both agents resumed")
        assert j.generation == g1 and j.restart_count == 0, j
        assert all(alive(p) for p in pids)
        for t in "ab":
            job.agents[t].wait_line("resumed as node id", timeout=5)
        job.daemon.wait_line(r"store etcd://\S+/rdzv: 1 job$", timeout=1)
        job.finish(g1)
        # Every event came through both daemons' commits, in order.
        seqs = [e.seq for e in job.ctl.list_events("etcd-restart")]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 4, seqs
    finally:
        job.close()


def test_retention_deletes_keys(tmp_path, etcd):
    """An ended job goes, with its record, node buckets and log, once
    `retention` has passed; a live job stays."""
    d = rt.Daemon(tmp_path, store="etcd://%s/ret" % etcd.endpoints,
                  args=["--retention", "1s"])
    try:
        done, live = rdzvnode.Node(d.addr, name="done"), rdzvnode.Node(d.addr, name="live")
        done.join("old", min_nodes=1, max_nodes=1)
        done.wait_assignment()
        live.join("young", min_nodes=2, max_nodes=2)
        live.wait_accepted()
        for sub in ("job/old", "node/old/", "log/old/"):
            assert keys(etcd, "/ret/" + sub), sub
        done.leave("finished")
        ctl = rdzvnode.Control(d.addr)
        rt.wait_for(lambda: not any(keys(etcd, "/ret/" + s) for s in
                                    ("job/old", "node/old/", "log/old/")),
                    15, 0.1, "the ended job's keys to go")
        assert [j.rdzv_id for j in ctl.list_jobs(all=True)] == ["young"]
        assert keys(etcd, "/ret/job/") == ["/ret/job/young"]
        ctl.close()
        done.close()
        live.close()
    finally:
        d.stop()


def migrate(src, dst):
    return subprocess.run([RDZVD, "--migrate-store", src, dst],
                          capture_output=True, text=True, timeout=60)


def test_migrate_sqlite_to_etcd(tmp_path, etcd):
    """An SQLite database copied into etcd: the job, its nodes, its
    generation and its whole event history; a second copy is refused."""
    db = os.path.join(str(tmp_path), "rdzv.db")
    d = rt.Daemon(tmp_path, db=db)
    nodes = [rdzvnode.Node(d.addr, name="n%d" % i) for i in range(3)]
    for n in nodes:
        n.join("moving", min_nodes=3, max_nodes=3)
    for n in nodes:
        n.wait_assignment()
    ctl = rdzvnode.Control(d.addr)
    before = ctl.get_job("moving", events=100)
    events = [(e.seq, e.kind, e.message) for e in
              ctl.list_events("moving")]
    ctl.close()
    for n in nodes:
        n.close()
    assert d.stop() == 0

    store = "etcd://%s/moved" % etcd.endpoints
    r = migrate("sqlite:" + db, store)
    assert r.returncode == 0, r.stderr
    assert "copied 1 jobs, 3 nodes and %d events" % len(events) in r.stdout, r.stdout
    r = migrate(db, store)
    assert r.returncode == 1 and "is not empty" in r.stderr, r.stderr
    r = migrate(db, "etcd://%s" % etcd.endpoints)
    assert r.returncode == 2 and "no key prefix" in r.stderr, r.stderr
    none = os.path.join(str(tmp_path), "none.db")
    r = migrate(none, "etcd://%s/other" % etcd.endpoints)
    assert r.returncode == 1 and "no database at " + none in r.stderr, r.stderr
    assert not os.path.exists(none)

    d = rt.Daemon(tmp_path, store=store)
    try:
        ctl = rdzvnode.Control(d.addr)
        after = ctl.get_job("moving", events=100)
        assert after.generation == before.generation == 1
        assert after.state == before.state and after.world_size == 3
        assert sorted(n.node_id for n in after.nodes) == \
            sorted(n.node_id for n in before.nodes)
        assert [(e.seq, e.kind, e.message) for e in
                ctl.list_events("moving")] == events
        # The nodes resume there with their sessions.
        n = rdzvnode.Node(d.addr, name="n0")
        n.session_id = nodes[0].session_id
        n.rdzv_id = "moving"
        n.resume(1)
        ctl.close()
        n.close()
    finally:
        d.stop()


def check_config(*args):
    return subprocess.run([RDZVD, "--check-config", "--config", "/dev/null"]
                          + list(args), capture_output=True, text=True,
                          timeout=10)


def test_store_settings(tmp_path):
    """--store, --db and the etcd TLS files: printed, and bad values
    refused with a message naming the problem."""
    r = check_config("--store", "etcd://127.0.0.1:2379,10.0.0.2:2379/rdzv/")
    assert r.returncode == 0, r.stderr
    assert "store = etcd://127.0.0.1:2379,10.0.0.2:2379/rdzv/\n" in r.stdout
    r = check_config("--db", "/tmp/x.db")
    assert "store = sqlite:/tmp/x.db\n" in r.stdout and "db = /tmp/x.db\n" in r.stdout
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    for args, msg in [
            (["--store", "etcd://127.0.0.1:2379"], "no key prefix"),
            (["--store", "etcd:///rdzv"], "no endpoints"),
            (["--store", "etcd://host/rdzv"], "is not HOST:PORT"),
            (["--store", "etcd://a:1,,b:2/rdzv"], "an empty etcd endpoint"),
            (["--store", "etcd://a:1/r dzv"], "printable ASCII"),
            (["--store", "sqlite:"], "no database path"),
            (["--store", "etcd:a:1/x"], "etcd://HOST:PORT"),
            (["--store", "etcd://a:1/x", "--db", "/tmp/y.db"], "give one of them"),
            (["--db", "/tmp/y.db", "--etcd-ca", str(ca)], "for an etcd store"),
            (["--store", "etcd://a:1/x", "--etcd-cert", str(ca)], "go together"),
            (["--store", "etcd://a:1/x", "--etcd-ca", str(tmp_path / "none")],
             "No such file")]:
        r = check_config(*args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    # A flag for one of db and store overrides the file's other; both in
    # the file must agree.
    conf = tmp_path / "rdzvd.conf"
    conf.write_text("db = /tmp/in-file.db\n")
    r = subprocess.run([RDZVD, "--check-config", "--config", str(conf),
                        "--store", "etcd://a:1/x"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0 and "store = etcd://a:1/x\n" in r.stdout, r.stderr
    conf.write_text("db = /tmp/in-file.db\nstore = etcd://a:1/x\n")
    r = subprocess.run([RDZVD, "--check-config", "--config", str(conf)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "give one of them" in r.stderr, r.stderr
    r = subprocess.run([RDZVD, "--check-config", "--config", str(conf),
                        "--db", "/tmp/flag.db"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0 and "store = sqlite:/tmp/flag.db\n" in r.stdout, r.stderr
    r = check_config("--store", "etcd://a:1/x", "--etcd-ca", str(ca),
                     "--etcd-cert", str(ca), "--etcd-key", str(ca))
    assert r.returncode == 0, r.stderr
    assert "etcd-ca = %s\n" % ca in r.stdout
    # An etcd nobody serves: a clear error at start, naming the store.
    p = rt.Proc([RDZVD, "--config", "/dev/null", "--listen", "127.0.0.1:0",
                 "--store", "etcd://127.0.0.1:1/rdzv"])
    assert p.wait(30) != 0
    assert "etcd://127.0.0.1:1/rdzv" in p.output(), p.output()


def test_etcd_tls(tmp_path):
    """rdzvd on an etcd that wants TLS and client certificates: with
    --etcd-ca, --etcd-cert and --etcd-key it serves; without the client
    certificate it does not start, and says why."""
    etcdtest.skip_unless_etcd()
    os.makedirs(str(tmp_path / "certs"))
    certs = rt.make_certs(tmp_path / "certs")
    with etcdtest.Etcd(tmp_path / "etcd", tls=certs, client_cert_auth=True) as e:
        store = "etcd://%s/tls" % e.endpoints
        d = rt.Daemon(tmp_path, store=store, args=[
            "--etcd-ca", certs["ca"], "--etcd-cert", certs["client_cert"],
            "--etcd-key", certs["client_key"]])
        try:
            n = rdzvnode.Node(d.addr, name="t")
            n.join("over-tls", min_nodes=1, max_nodes=1)
            n.wait_assignment()
            n.close()
            assert keys(e, "/tls/job/") == ["/tls/job/over-tls"]
        finally:
            d.stop()
        p = rt.Proc([RDZVD, "--config", "/dev/null", "--listen", "127.0.0.1:0",
                     "--store", store, "--etcd-ca", certs["ca"]])
        assert p.wait(30) != 0
        assert store in p.output(), p.output()


def test_etcd_member_killed(tmp_path):
    """rdzvd on a three-member etcd: the member it talks to is killed, and
    the next commit goes to another member; nothing is lost."""
    etcdtest.skip_unless_etcd()
    with etcdtest.Etcd(tmp_path / "etcd", members=3) as e:
        store = "etcd://%s/three" % e.endpoints
        d = rt.Daemon(tmp_path, store=store)
        try:
            a = rdzvnode.Node(d.addr, name="a")
            a.join("before", min_nodes=1, max_nodes=1)
            a.wait_assignment()
            e.kill(0)
            b = rdzvnode.Node(d.addr, name="b")
            b.join("after", min_nodes=1, max_nodes=1)
            b.wait_assignment(timeout=20)
            assert sorted(keys(e, "/three/job/")) == ["/three/job/after",
                                                       "/three/job/before"]
            a.close()
            b.close()
        finally:
            d.stop()
        # A restart on the two members left finds both jobs.
        d = rt.Daemon(tmp_path, store=store)
        try:
            ctl = rdzvnode.Control(d.addr)
            assert sorted(j.rdzv_id for j in ctl.list_jobs()) == ["after", "before"]
            ctl.close()
        finally:
            d.stop()


def etcd_revision(etcd):
    """etcd's current revision: every write moves it on."""
    import json
    out = etcd.ctl("endpoint", "status", "-w", "json")
    return json.loads(out)[0]["Status"]["header"]["revision"]


def test_keepalives_never_write(tmp_path, etcd):
    """SPEC §14: keepalives never write to etcd. rdzvd PINGs its agents every
    100 ms and they answer, the agents PING rdzvd, and rdzvd renews its
    leader lease: while the nodes' last_seen moves on by a second or more,
    etcd's revision and rdzvd's transaction count stand still."""
    store = "etcd://%s/rdzv" % etcd.endpoints
    d = rt.Daemon(tmp_path, store=store, args=["--keepalive", "100ms"])
    job = Job(tmp_path, "etcd-keepalive", daemon=d)
    try:
        job.agent("a", 1, "2", args=["--node-rank", "0"], mode="sleep")
        job.agent("b", 1, "2", args=["--node-rank", "1"], mode="sleep")
        job.wait_world(2)
        # The round's commit and the agents' first reports are behind us
        # once both nodes report healthy GPUs (or none) and nothing waits.
        job.wait_job(lambda x: x.state == PB.types.JOB_STATE_RUNNING and
                     all(n.connected for n in x.nodes), 10, "running")
        rev0 = etcd_revision(etcd)
        txns0 = job.ctl.server_info().transactions
        seen0 = {n.node_id: n.last_seen_unix_ms
                 for n in job.ctl.get_job("etcd-keepalive").nodes}
        job.wait_job(lambda x: all(n.last_seen_unix_ms >= seen0[n.node_id] +
                                   1500 for n in x.nodes), 15,
                     "last_seen to move on 1.5 s with the keepalives")
        assert etcd_revision(etcd) == rev0
        assert job.ctl.server_info().transactions == txns0
    finally:
        job.close()
