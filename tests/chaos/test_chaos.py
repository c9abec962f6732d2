"""A short chaos soak in the suite (docs/RELIABILITY.md): one seed, the
SQLite configuration, 1.5 minutes with a few faults, judged by check.py.
It passes only with no violation; and every namespace and process the run
made is gone when it ends (checked here as well as by the run itself).
Needs root and network namespaces: skipped with the reason otherwise."""

import glob
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "netns"))

import netns  # noqa: E402

LAST = re.compile(r"^chaos: (\d+) faults, (\d+) violations, (\d+) jobs, "
                  r"seed (\d+)$")
SEED = int(os.environ.get("RDZV_CHAOS_SEED", "3"))


def ours(out):
    """Processes whose environment names this run's folder."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if ("CHAOS_OUT=%s/workers" % out).encode() in env:
            found.append(int(d[6:]))
    return found


def test_short_soak(tmp_path):
    why = netns.usable()
    if why:
        pytest.skip(why)
    out = str(tmp_path / "run")
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "chaos.py"),
                          "--minutes", "1.5", "--seed", str(SEED),
                          "--config", "sqlite", "--out", out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        stdout, stderr = p.communicate(timeout=280)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    # The run's namespaces are named after its process (netns.Net's tag);
    # another run beside this one has its own.
    mine = re.compile(r"rz%d[a-z]-" % p.pid)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    lines = r.stdout.splitlines()
    m = LAST.match(lines[-1]) if lines else None
    assert m, r.stdout[-4000:] + r.stderr[-4000:]
    faults, violations, jobs = int(m.group(1)), int(m.group(2)), int(m.group(3))
    print(r.stdout)
    assert (faults >= 2, jobs, int(m.group(4))) == (True, 3, SEED), r.stdout
    assert violations == 0 and r.returncode == 0, r.stdout[-6000:]
    # The run's history holds steps of every job, and its own cleanup
    # found nothing left.
    with open(os.path.join(out, "history.jsonl")) as f:
        text = f.read()
    for job in ("elastic", "plain", "torchrun"):
        assert '"job": "%s", "pid"' % job in text or \
            '"job": "%s"' % job in text
    assert '"namespaces": [], "processes": []' in text
    left = [ns for ns in netns.namespaces() if mine.match(ns)]
    assert left == [], "namespaces left behind: %s" % left
    assert ours(out) == [], "processes left behind"
