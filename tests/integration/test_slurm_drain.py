"""The on-quarantine hook on a real Slurm (slurmtest.py's private cluster of
three node names on localhost, one for the module, with one rdzvd whose
on-quarantine is deploy/slurm/rdzv-drain):

- deploy/slurm/train-spare.sbatch on three nodes, each agent on the
  stand-in libcuda with two devices, and device 1 of node n2 failing its
  check. rdzvd (host-gpu-failure = quarantine) quarantines host n2 and
  refuses its join, the job runs on n1 and n3, the node n2 ends DRAINED
  with the gist of the reason first in `sinfo -R`, and Slurm records the
  job COMPLETED.
- A quarantined host that Slurm schedules again (resumed by hand before
  `rdzvctl host clear`) in a three-node fixed job (deploy/slurm/train.sbatch):
  its join is refused and the job fails within seconds naming the host,
  instead of its other nodes waiting out the join timeout; Slurm records
  FAILED; `rdzvctl host clear` reminds that the drain stands.
- `rdzvctl host quarantine` of a node Slurm does not know: the drain fails,
  and rdzvctl says so and exits 1; a second quarantine with a new reason
  updates Slurm's reason.

Each test starts from nodes idle in Slurm and hosts ok in rdzvd.
"""

import os
import re
import stat
import subprocess
import time

import pytest

import rdzvnode
import rdzvtest as rt
import slurmtest

why = slurmtest.missing()
if why:
    pytest.skip(why, allow_module_level=True)

import test_slurm  # noqa: E402 (after the skip: it needs Slurm too)

PB = rdzvnode.pb
DRAIN = os.path.join(rt.SOURCE_ROOT, "deploy", "slurm", "rdzv-drain")
FAKECUDA = rt.build_path("tests", "fakecuda", "libcuda.so.1")
AGENT = rt.build_path("client", "agent", "rdzv-agent")
CTL = rt.build_path("client", "ctl", "rdzvctl")


def agent_shim(d):
    """An rdzv-agent first on PATH that runs the real one on two stand-in
    GPUs per node, device 1 of node n2 failing its check."""
    os.makedirs(d)
    path = os.path.join(d, "rdzv-agent")
    with open(path, "w") as f:
        f.write("""#!/bin/sh
export RDZV_LIBCUDA=%s FAKECUDA_DEVICES=2 RDZV_GPUCHECK_BYTES=1MiB
export RDZV_NPROC_PER_NODE=gpu
if [ "$SLURMD_NODENAME" = n2 ]; then
	export FAKECUDA_FAIL=1:alloc:CUDA_ERROR_ECC_UNCORRECTABLE
fi
exec %s "$@"
""" % (FAKECUDA, AGENT))
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP |
             stat.S_IROTH | stat.S_IXOTH)
    return d


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm")
    s = slurmtest.Slurm(tmp)
    d = None
    try:
        d = rt.Daemon(tmp, ["--http-listen", "none",
                            "--admin", "anonymous",
                            "--host-gpu-failure", "quarantine",
                            "--on-quarantine", DRAIN,
                            "--on-quarantine-timeout", "20s"],
                      env={"SLURM_CONF": s.conf})
        s.rdzvd = d
        s.ctl = rdzvnode.Control(d.addr)
        yield s
    finally:
        if d is not None:
            s.ctl.close()
            d.stop()
        s.stop()


def ctl(cluster, *args):
    return subprocess.run([CTL, "--server", cluster.rdzvd.addr] + list(args),
                          capture_output=True, text=True, timeout=30)


def node_state(cluster, node):
    return cluster.run("sinfo", "-h", "-N", "-n", node, "-o",
                       "%T").stdout.strip()


@pytest.fixture
def cluster(slurm):
    """The module's Slurm with every host ok in rdzvd and every node idle
    in Slurm (an earlier test may have drained one)."""
    for n in slurmtest.NODES:
        ctl(slurm, "host", "clear", n, "--reason", "next test")
        if node_state(slurm, n) != "idle":
            slurm.run("scontrol", "update", "NodeName=" + n, "State=RESUME",
                      check=False)
    rt.wait_for(lambda: all(node_state(slurm, n) == "idle"
                            for n in slurmtest.NODES), 30, 0.2,
                "idle nodes")
    return slurm


def sinfo_reasons(cluster):
    """{node: reason} of `sinfo -R`, the reason in full."""
    out = cluster.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout
    return dict(l.split("|", 1) for l in out.splitlines() if "|" in l)


def test_quarantined_host_is_drained(cluster, tmp_path, monkeypatch):
    shim = agent_shim(str(tmp_path / "shim"))
    monkeypatch.setattr(test_slurm, "BINDIRS", [shim] + test_slurm.BINDIRS)
    r = test_slurm.Run(cluster, tmp_path / "run", "train-spare.sbatch", 3)
    try:
        gen, w = r.wait_world(4, timeout=90)
        nodes = sorted({e["SLURMD_NODENAME"] for e in w.values()})
        assert nodes == ["n1", "n3"], w
        assert all(e["LOCAL_WORLD_SIZE"] == "2" for e in w.values()), w
        h = cluster.ctl.list_hosts()
        assert h["n2"].state == PB.types.HOST_STATE_QUARANTINED, h
        reason = h["n2"].reason
        assert reason.startswith("GPU check failed on device 1 (alloc: "
                                 "CUDA_ERROR_ECC_UNCORRECTABLE) in job %s"
                                 % r.id), reason

        def drained_reason():
            return sinfo_reasons(cluster).get("n2")
        try:
            got = rt.wait_for(drained_reason, 30, 0.2, "n2 in sinfo -R")
        except TimeoutError as e:
            raise AssertionError("%s\nsinfo -R:\n%s\nrdzvd:\n%s" % (
                e, cluster.run("sinfo", "-R").stdout,
                cluster.rdzvd.output()[-3000:]))
        # The gist first, so that the default column shows it.
        assert got == "GPU1 ECC_UNCORRECTABLE (rdzv)", (got, reason)
        cluster.rdzvd.wait_line(r"on-quarantine for host n2 exited 0: "
                                r"drained Slurm node n2", timeout=10)

        r.stop_workers()
        sj = r.wait_slurm(60)
        assert sj["JobState"] == "COMPLETED", (sj, r.output())
        assert r.job().state == PB.types.JOB_STATE_CLOSED
        # With the job gone from it, the node is drained, not draining.
        state = rt.wait_for(lambda: cluster.run(
            "sinfo", "-h", "-N", "-n", "n2", "-o", "%T").stdout.strip()
            if "drained" in cluster.run("sinfo", "-h", "-N", "-n", "n2",
                                        "-o", "%T").stdout else None,
            30, 0.2, "n2 drained")
        assert state == "drained", state
        # sinfo -R as an operator reads it (the reason cut at 20 columns).
        out = cluster.run("sinfo", "-R").stdout
        assert re.search(r"^GPU1 ECC_UNCORRECTAB\s+root\s+\S+\s+n2$", out,
                         re.M), out
    finally:
        r.cancel()


def test_quarantined_host_fails_a_fixed_job_at_once(cluster, tmp_path):
    """n3 is quarantined (and drained), then resumed in Slurm by hand while
    rdzvd still refuses it: a three-node train.sbatch lands on it, its
    agent is refused (exit 4), and the job fails within 5 s of its
    creation naming n3 and the reason, where its other nodes used to wait
    the join timeout; the refusal is an event of the job; Slurm records
    FAILED. Clearing n3 reminds that the drain is rdzvd's to leave."""
    r = ctl(cluster, "host", "quarantine", "n3", "--reason", "bad DIMM")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "on-quarantine: %s n3 exited 0: drained Slurm node n3: bad DIMM " \
        "(rdzv)" % DRAIN in r.stdout, r.stdout
    assert node_state(cluster, "n3") == "drained"
    cluster.run("scontrol", "update", "NodeName=n3", "State=RESUME")

    t0 = time.monotonic()
    run = test_slurm.Run(cluster, tmp_path / "run", "train.sbatch", 3)
    try:
        j = run.wait_job(lambda x: x.state == PB.types.JOB_STATE_FAILED, 30,
                         "the job failed")
        took = time.monotonic() - t0
        assert "a join from host n3 was refused: host n3 is quarantined " \
            "since" in j.reason, j.reason
        assert "quarantined by anonymous: bad DIMM" in j.reason, j.reason
        assert "2 of the allocation's 3 nodes can join, fewer than min 3" \
            in j.reason, j.reason
        assert j.ended_unix_ms - j.created_unix_ms < 5000, j
        assert any(e.kind == "refused" and "host n3" in e.message
                   for e in j.events), j.events
        sj = run.wait_slurm(60)
        assert sj["JobState"] == "FAILED", (sj, run.output())
        print("fixed job with a quarantined host: failed %.0f ms after its "
              "creation, %.1f s after sbatch" % (
                  j.ended_unix_ms - j.created_unix_ms, took))
    finally:
        run.cancel()

    r = ctl(cluster, "host", "clear", "n3", "--reason", "DIMM replaced")
    assert r.returncode == 0, r.stderr
    assert "scontrol update NodeName=n3 State=RESUME" in r.stdout, r.stdout


def test_quarantine_of_a_node_slurm_does_not_know(cluster):
    """The drain fails (Slurm: Invalid node name specified): the host is
    quarantined in rdzvd, and rdzvctl prints the hook's failure and exits
    1; `rdzvctl hosts` shows it. A second quarantine of a drained node with
    a new reason updates Slurm's reason."""
    t0 = time.monotonic()
    r = ctl(cluster, "host", "quarantine", "n9", "--reason", "no such node")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert time.monotonic() - t0 < 10
    assert r.stdout.startswith("host n9: quarantined: quarantined by "
                               "anonymous: no such node"), r.stdout
    assert "host n9 is quarantined in rdzvd, but its on-quarantine command " \
        "failed (exited 1: " in r.stderr, r.stderr
    assert "Invalid node name specified" in r.stderr, r.stderr
    r = ctl(cluster, "hosts")
    line = [l for l in r.stdout.splitlines() if l.startswith("n9 ")]
    assert line and "exited 1" in line[0], r.stdout

    r = ctl(cluster, "host", "quarantine", "n1", "--reason", "fan")
    assert r.returncode == 0, r.stderr
    assert sinfo_reasons(cluster).get("n1") == "fan (rdzv)"
    r = ctl(cluster, "host", "quarantine", "n1", "--reason", "fan and PSU")
    assert r.returncode == 0, r.stderr
    assert sinfo_reasons(cluster).get("n1") == "fan and PSU (rdzv)"
