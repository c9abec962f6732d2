"""The on-quarantine hook on a real Slurm (slurmtest.py's private cluster of
three node names on localhost): deploy/slurm/train-spare.sbatch on three
nodes, each agent on the stand-in libcuda with two devices, and device 1 of
node n2 failing its check. rdzvd (host-gpu-failure = quarantine,
on-quarantine = deploy/slurm/rdzv-drain) quarantines host n2 and refuses
its join, the job runs on n1 and n3, the node n2 ends DRAINED with the
reason in `sinfo -R`, and Slurm records the job COMPLETED.
"""

import os
import re
import stat

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


@pytest.fixture
def cluster(tmp_path):
    s = slurmtest.Slurm(tmp_path)
    d = None
    try:
        d = rt.Daemon(tmp_path, ["--http-listen", "none",
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
            out = cluster.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout
            rows = dict(l.split("|", 1) for l in out.splitlines() if "|" in l)
            return rows.get("n2")
        try:
            got = rt.wait_for(drained_reason, 30, 0.2, "n2 in sinfo -R")
        except TimeoutError as e:
            raise AssertionError("%s\nsinfo -R:\n%s\nrdzvd:\n%s" % (
                e, cluster.run("sinfo", "-R").stdout,
                cluster.rdzvd.output()[-3000:]))
        assert got == "rdzv: " + reason[:200], (got, reason)
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
        assert re.search(r"^rdzv: GPU check fail\s+root\s+\S+\s+n2$", out,
                         re.M), out
    finally:
        r.cancel()
