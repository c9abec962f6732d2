"""Disk faults under a join storm, injected with libfiu (Debian's
fiu-utils): fsync and fdatasync failing, writes failing, and a full disk
(ENOSPC). Whichever commit meets the fault, rdzvd must exit non-zero
rather than answer from memory the disk does not hold (SPEC §9); after a
restart on the same file, the database passes integrity_check and holds
every assignment any client received, and rdzvd serves again.

The faults are switched on with fiu-ctrl once the storm is running, so
rdzvd's start (its lock file, its schema) is not what fails."""

import os
import random
import shutil
import subprocess
import time

import grpc
import pytest

import rdzvtest as rt
from rdzvnode import Node, rpc_code
from test_crash import JOBS, NODES_PER_JOB, Storm, check_db, \
    check_rounds_consistent, received

EIO, ENOSPC = 5, 28
FAULTS = {
    "fsync": ["posix/io/sync/fsync", "posix/io/sync/fdatasync"],
    "write": ["posix/io/rw/pwrite", "posix/io/rw/write"],
    "enospc": ["posix/io/rw/pwrite", "posix/io/rw/write"],
}

def asan_build():
    """Whether rdzvd carries AddressSanitizer: libfiu's preloaded library
    and ASan's interceptors do not mix (rdzvd dies at start)."""
    with open(rt.build_path("daemon", "rdzvd"), "rb") as f:
        return b"__asan_init" in f.read()


pytestmark = [
    pytest.mark.skipif(
        shutil.which("fiu-run") is None or shutil.which("fiu-ctrl") is None,
        reason="libfiu's fiu-run and fiu-ctrl are missing "
               "(deploy/install-deps.sh test installs fiu-utils)"),
    pytest.mark.skipif(asan_build(), reason="libfiu's preload and "
                       "AddressSanitizer do not mix; the default build runs it"),
]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_disk_fault_during_join_storm(tmp_path, fault):
    seed = random.SystemRandom().randrange(1 << 31)
    print("fault %s, seed %d" % (fault, seed))
    rng = random.Random(seed)
    db = os.path.join(str(tmp_path), "rdzv.db")
    ctrl = os.path.join(str(tmp_path), "fiu-ctrl")
    d = rt.Daemon(tmp_path, db=db, wrapper=["fiu-run", "-x", "-f", ctrl])
    storm = Storm(d.addr, rng, 1)
    try:
        order = ["fault-j%02d" % j for j in range(JOBS)] * NODES_PER_JOB
        rng.shuffle(order)
        # Half the storm before the fault, the rest while it bites.
        for job in order[:len(order) // 2]:
            storm.join(job)
        rt.wait_for(lambda: any(n.assignments() for n in storm.nodes), 10,
                    what="an assignment before the fault")
        errno = ENOSPC if fault == "enospc" else EIO
        for name in FAULTS[fault]:
            subprocess.run(["fiu-ctrl", "-f", ctrl, "-c",
                            "enable name=%s,failinfo=%d" % (name, errno),
                            str(d.pid)], check=True, timeout=10)
        i = len(order) // 2
        deadline = time.monotonic() + 20
        while d.p.poll() is None and time.monotonic() < deadline:
            if i < len(order):
                storm.join(order[i])
                i += 1
            else:
                storm.act()
                time.sleep(0.01)
        rc = d.wait(10)
        assert rc not in (0, None), "rdzvd went on after a %s fault" % fault
        failed = [l for l in d.lines if "commit failed" in l]
        assert failed, d.output()[-3000:]
        print("rdzvd exited %d: %s" % (rc, failed[0]))
    finally:
        storm.close()
        if d.p.poll() is None:
            d.kill()

    got = received(storm.nodes)
    check_rounds_consistent(got, seed)
    check_db(db, got, seed)
    assert got, "no client received an assignment before the fault"
    print("%d assignments received, all in the database" % len(got))

    # rdzvd comes back on the same file, without faults, and serves.
    with rt.Daemon(tmp_path, db=db) as d2:
        n = Node(d2.addr, name="after")
        code, details, _ = rpc_code(lambda: n.join("fault-after", min_nodes=1,
                                                   max_nodes=1))
        assert code == grpc.StatusCode.OK, (code, details)
        n.wait_assignment(timeout=10)
        n.close()
        assert d2.stop() == 0
    check_db(db, got, seed)
