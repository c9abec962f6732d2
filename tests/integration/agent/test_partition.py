"""A network partition, in network namespaces this test makes (SPEC §4
rules 5 and 11): rdzvd and agents a and c run in one namespace, agent b in
another, joined by a veth pair; nothing touches this machine's own
network. b is cut off past its lease: rdzvd ends it and the spare c takes
its place, and b's agent, which has not heard rdzvd for the lease either,
stops its workers (fencing). When the link heals, b's resume is refused and
it joins again as a new node (a spare) without moving the job's
generation."""

import os
import subprocess
import uuid

import pytest

import rdzvagent
import rdzvnode
import rdzvtest as rt
from test_agent import Job

PB = rdzvnode.pb
SERVER_IP, CLIENT_IP = "10.213.0.1", "10.213.0.2"


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True,
                          timeout=10, check=check)


@pytest.fixture
def nets():
    """Two network namespaces joined by a veth pair: (server ns, client
    ns, the client's end of the link)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = uuid.uuid4().hex[:6]
    srv, cli = "rdzv-s" + tag, "rdzv-c" + tag
    if ip("netns", "add", srv, check=False).returncode != 0:
        pytest.skip("cannot make a network namespace here")
    try:
        ip("netns", "add", cli)
        ip("link", "add", "rz" + tag + "s", "netns", srv, "type", "veth",
           "peer", "name", "rz" + tag + "c", "netns", cli)
        for ns, dev, addr in ((srv, "rz" + tag + "s", SERVER_IP),
                              (cli, "rz" + tag + "c", CLIENT_IP)):
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", addr + "/30", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        yield srv, cli, "rz" + tag + "c"
    finally:
        ip("netns", "del", cli, check=False)
        ip("netns", "del", srv, check=False)


def states(job):
    return sorted((n.hostname, PB.types.NodeState.Name(n.state)) for n in job.nodes)


def test_partitioned_node_is_replaced_and_refused_on_healing(tmp_path, request, nets):
    srv, cli, cli_dev = nets
    sock = os.path.join(str(tmp_path), "rdzvd.sock")
    d = rt.Daemon(tmp_path, listen="unix:" + sock,
                  args=["--listen", SERVER_IP + ":0", "--insecure"],
                  wrapper=["ip", "netns", "exec", srv])
    tcp = d.wait_line(r"listening on (%s:\d+)" % SERVER_IP.replace(".", r"\.")).group(1)
    job = Job(tmp_path, rdzvagent.job_name(request), daemon=d)
    try:
        common = ["--max-restarts", "1", "--lease-ttl", "2s",
                  "--reconnect-timeout", "60s"]
        for tag, ns in (("a", srv), ("b", cli)):
            job.agent(tag, nnodes="2:2", mode="sleep", server=tcp,
                      wrapper=["ip", "netns", "exec", ns],
                      args=common + ["--node-rank", "0" if tag == "a" else "1"])
        gen1, ranks = job.wait_world(2)
        assert {ranks[0]["tag"], ranks[1]["tag"]} == {"a", "b"}
        b_pid = ranks[1]["pid"] if ranks[1]["tag"] == "b" else ranks[0]["pid"]
        job.agent("c", nnodes="2:2", mode="sleep", server=tcp,
                  wrapper=["ip", "netns", "exec", srv], args=common)
        job.wait_job(lambda j: sum(n.state == PB.types.NODE_STATE_SPARE
                                   for n in j.nodes) == 1, what="c a spare")

        # Cut b off: its packets go nowhere, nothing closes its connection.
        ip("-n", cli, "link", "set", cli_dev, "down")
        gen2, ranks = job.wait_world(2, after=gen1, timeout=30)
        assert {ranks[0]["tag"], ranks[1]["tag"]} == {"a", "c"}
        j = job.wait_job(lambda j: j.generation == gen2)
        assert j.restart_count == 1, j
        # b has not heard rdzvd for the lease either: its ranks may have
        # been given away (they were), so its agent stops its workers
        # (fencing) without waiting for the link.
        rt.wait_for(lambda: not rdzvagent.alive(b_pid, "worker.py"), 10,
                    what="b's workers fenced\n" + job.outputs())
        assert any("(fencing)" in l for l in job.agents["b"].lines), \
            job.outputs()

        # Heal: b's agent finds its node gone and joins again, as a spare
        # of the running round.
        ip("-n", cli, "link", "set", cli_dev, "up")
        j = job.wait_job(lambda j: any(
            n.hostname and n.state == PB.types.NODE_STATE_SPARE for n in j.nodes)
            and sum(n.state == PB.types.NODE_STATE_LOST for n in j.nodes) == 1,
            timeout=40, what="b back as a spare")
        assert j.generation == gen2, states(j)
        assert job.agents["b"].p.poll() is None, job.outputs()
        assert any("refused" in l or "lost" in l for l in job.agents["b"].lines), \
            job.outputs()
    finally:
        job.close()
