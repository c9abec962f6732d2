#!/usr/bin/python3
"""Runs a unit test against a real etcd: starts a one-member etcd on free
loopback ports with a temporary data directory (tests/integration/
etcdtest.py), gives the test its endpoint in RDZV_TEST_ETCD, and stops etcd
when the test ends. Exits 77 (meson's "skipped") with the reason when etcd
is not installed.

    with_etcd.py TEST [ARGS...]
"""

import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import etcdtest  # noqa: E402


def main():
    # meson ends a test that runs past its timeout with SIGTERM: leave
    # through the with-blocks, so that etcd is stopped and its folder goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    why = etcdtest.missing()
    if why:
        print("SKIP: " + why)
        return 77
    with tempfile.TemporaryDirectory(prefix="rdzv-etcd-") as tmp:
        with etcdtest.Etcd(tmp) as etcd:
            env = dict(os.environ, RDZV_TEST_ETCD=etcd.endpoints)
            return subprocess.run(sys.argv[1:], env=env, timeout=600).returncode


if __name__ == "__main__":
    sys.exit(main())
