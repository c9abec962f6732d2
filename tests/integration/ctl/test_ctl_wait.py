"""rdzvctl wait ID [--timeout D] [--attempt N] [--appear-timeout D |
--must-exist] (SPEC §8): blocks until the job ends on the Watch stream;
exit 0 when it closed, 1 when it failed (the reason on stderr) or --timeout
passed, 3 not found (it did not appear within --appear-timeout, or at once
with --must-exist; with --attempt, attempt N did not start), 5 rdzvd
unavailable. A wait started before the first join follows the job once it
appears. It keeps waiting across a restart of rdzvd. Simulated agents
(rdzvnode.Node) drive the job; every wait is bounded."""

import os
import signal
import subprocess
import re
import select
import time

import pytest

import rdzvtest as rt
from rdzvnode import Control, Node

import ctlharness as h

T = rt.protos().types


def start_wait(server, *args):
    """rdzvctl --server SERVER wait ARGS, running in the background."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RDZV_SERVER", "RDZVCTL_TEST_NOW_MS")}
    return subprocess.Popen([h.RDZVCTL, "--server", server, "wait"] +
                            [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL)


def finish(p, timeout):
    """(exit status, stdout, stderr) of a background wait, which must end
    within |timeout| seconds."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("rdzvctl wait still running after %g s:\n%s%s"
                             % (timeout, out, err))
    return p.returncode, out, err


class Two:
    """rdzvd and a job of two simulated nodes, running generation 1."""

    def __init__(self, tmp, rdzv_id, daemon=None):
        self.d = daemon or rt.Daemon(tmp)
        self.id = rdzv_id
        self.nodes = [Node(self.d.addr, name="host-%d" % i) for i in range(2)]
        for i, n in enumerate(self.nodes):
            n.join(rdzv_id, min_nodes=2, max_nodes=2, rank_hint=i,
                   lease_ttl_ms=60000, reconnect_grace_ms=60000)
        self.gen = self.nodes[0].wait_assignment(timeout=10).generation

    def close(self):
        for n in self.nodes:
            n.close()
        if self.d.p.poll() is None:
            self.d.stop()


@pytest.fixture
def two(tmp_path, request):
    t = Two(tmp_path, request.node.name.replace("_", "-")[:40])
    yield t
    t.close()


def blocked(p, what, secs=0.3):
    """The wait is still running |secs| after it started: it blocks rather
    than answering at once (a bounded look, not a sleep the test relies on
    for correctness: the outcome below is what is checked)."""
    try:
        p.wait(secs)
    except subprocess.TimeoutExpired:
        return
    raise AssertionError("rdzvctl wait ended early (%s): %s %s" % (
        what, p.returncode, p.communicate()))


def test_closed_job_exits_0(two):
    p = start_wait(two.d.addr, two.id)
    blocked(p, "the job is running")
    t0 = time.monotonic()
    for n in two.nodes:
        n.report(two.gen, "SUCCEEDED")
    rc, out, err = finish(p, 10)
    assert rc == 0, (rc, out, err)
    assert time.monotonic() - t0 < 5
    assert out == "job %s closed: every participant finished\n" % two.id, out
    # An ended job answers at once; -o json gives the job.
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "-o", "json"))
    assert '"state": "closed"' in cp.stdout, cp.stdout


def test_failed_job_exits_1_with_the_reason(two):
    p = start_wait(two.d.addr, two.id)
    blocked(p, "the job is running")
    with Control(two.d.addr) as c:
        c.abort_job(two.id, reason="bad data")
    rc, out, err = finish(p, 10)
    assert rc == 1, (rc, out, err)
    assert out == ""
    assert err.startswith("rdzvctl: job %s failed: aborted by " % two.id), err
    assert "bad data" in err, err


def test_timeout_exits_1_saying_the_job_runs(two):
    t0 = time.monotonic()
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--timeout", "700ms",
                       fixed=False), 1)
    assert 0.6 < time.monotonic() - t0 < 5
    assert "job %s has not ended within 700ms (it is running" % two.id in \
        cp.stderr, cp.stderr


def test_not_found_unavailable_and_usage(two):
    cp = h.check(h.ctl(two.d.addr, "wait", "nope", "--must-exist"), 3)
    assert cp.stderr == "rdzvctl: %s: job nope not found\n" % two.d.addr, \
        cp.stderr
    cp = h.check(h.ctl(two.d.addr, "wait", "nope", "--appear-timeout", "0"), 3)
    assert "job nope not found" in cp.stderr, cp.stderr
    cp = h.check(h.ctl("127.0.0.1:1", "--connect-timeout", "2", "wait", "x"), 5)
    assert "is rdzvd running?" in cp.stderr, cp.stderr
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--timeout", "soon"), 2)
    assert "--timeout soon" in cp.stderr, cp.stderr
    cp = h.check(h.ctl(two.d.addr, "wait"), 2)
    assert "missing arguments" in cp.stderr, cp.stderr
    cp = h.check(h.ctl(two.d.addr, "wait", "x", "--appear-timeout", "-1"), 2)
    assert "--appear-timeout -1: give a duration" in cp.stderr, cp.stderr


def join_two(addr, rdzv_id, extra=None):
    """Two simulated agents join |rdzv_id| (2:2); (nodes, generation)."""
    nodes = [Node(addr, name="late-%d" % i) for i in range(2)]
    for i, n in enumerate(nodes):
        n.join(rdzv_id, min_nodes=2, max_nodes=2, rank_hint=i, extra=extra)
    return nodes, nodes[0].wait_assignment(timeout=10).generation


@pytest.mark.parametrize("end", ["closes", "fails"])
def test_wait_before_the_first_join(tmp_path, end):
    """Right after sbatch no agent has joined: the wait waits for the job to
    appear, then follows it to its real outcome."""
    d = rt.Daemon(tmp_path)
    nodes = []
    try:
        p = start_wait(d.addr, "pending")
        blocked(p, "no agent joined yet", 0.5)
        nodes, gen = join_two(d.addr, "pending")
        blocked(p, "the job runs")
        if end == "closes":
            for n in nodes:
                n.report(gen, "SUCCEEDED")
        else:
            with Control(d.addr) as c:
                c.abort_job("pending", reason="bad data")
        rc, out, err = finish(p, 10)
        if end == "closes":
            assert rc == 0, (rc, out, err)
            assert out == "job pending closed: every participant finished\n"
        else:
            assert rc == 1, (rc, out, err)
            said, err = err.split("\n", 1)
            assert "job pending does not exist yet; waiting" in said, said
            assert err.startswith("rdzvctl: job pending failed: aborted by "), err
            assert "bad data" in err, err
    finally:
        for n in nodes:
            n.close()
        d.stop()


def test_wait_for_a_job_that_never_appears(two):
    """--appear-timeout bounds the wait for a job nobody joins: exit 3,
    saying so. --timeout, when sooner, gives its own exit 1."""
    t0 = time.monotonic()
    cp = h.check(h.ctl(two.d.addr, "wait", "never", "--appear-timeout",
                       "700ms", fixed=False), 3)
    assert 0.6 < time.monotonic() - t0 < 5
    assert cp.stdout == ""
    said, end = cp.stderr.splitlines()
    assert WAITING.fullmatch(said), said
    assert end == "rdzvctl: job never not found: no agent joined it " \
        "within 700ms", cp.stderr
    t0 = time.monotonic()
    cp = h.check(h.ctl(two.d.addr, "wait", "never", "--timeout", "700ms",
                       fixed=False), 1)
    assert 0.6 < time.monotonic() - t0 < 5
    said, end = cp.stderr.splitlines()
    assert WAITING.fullmatch(said), said
    assert end == "rdzvctl: job never has not ended within 700ms (no " \
        "agent has joined it yet)", cp.stderr


WAITING = re.compile(r"rdzvctl: job never does not exist yet; waiting for it "
                     r"to appear until \d\d:\d\d:\d\d \(--appear-timeout; "
                     r"--must-exist does not wait\)")


def test_wait_says_once_that_it_waits(two):
    """A plain `rdzvctl wait nosuchjob` (10 minutes to appear) says at once,
    once, on stderr, that it waits for the job to appear and until when:
    ten minutes from now, to the second."""
    t0 = time.time()
    p = start_wait(two.d.addr, "nosuch")
    try:
        ready, _, _ = select.select([p.stderr], [], [], 10)
        assert ready, "nothing on stderr within 10 s"
        line = p.stderr.readline().rstrip("\n")
        m = re.fullmatch(r"rdzvctl: job nosuch does not exist yet; waiting "
                         r"for it to appear until (\d\d):(\d\d):(\d\d) "
                         r"\(--appear-timeout; --must-exist does not wait\)",
                         line)
        assert m, line
        lt = time.localtime(t0 + 600)
        until = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
        want = lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec
        assert (until - want) % 86400 <= 3, (line, lt)
        blocked(p, "the job has not appeared", 0.5)
    finally:
        p.kill()
    rc, out, err = finish(p, 10)
    assert "does not exist yet" not in err, err     # said once, above


def attempt(n):
    """A Join's extra(): the scheduler's run |n| (a requeue's is above 1)."""
    def set_attempt(req):
        req.attempt = n
    return set_attempt


def test_attempt_an_earlier_attempts_end_does_not_count(two):
    """A requeued batch job keeps its id. Its attempt 1 closed; a wait for
    attempt 2 whose agents never joined exits 3 saying so, not 0 with the
    earlier run's "closed". Once attempt 2 joins, the wait blocks until it
    ends, and a later attempt counts for an earlier --attempt."""
    for n in two.nodes:
        n.report(two.gen, "SUCCEEDED")
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", "1"))
    assert "job %s closed" % two.id in cp.stdout, cp.stdout
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", "2",
                       "--must-exist"), 3)
    assert cp.stdout == "", cp.stdout
    assert ("rdzvctl: job %s has no attempt 2: its attempt 1 closed "
            "(every participant finished) and no later one started\n"
            % two.id) == cp.stderr, cp.stderr
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", "2",
                       "--appear-timeout", "300ms"), 3)
    assert ("rdzvctl: job %s (attempt 2) does not exist yet; waiting for "
            "it to appear until " % two.id) in cp.stderr, cp.stderr
    assert cp.stderr.endswith(
        "rdzvctl: job %s has no attempt 2: its attempt 1 closed "
        "(every participant finished) and no later one started within "
        "300ms\n" % two.id), cp.stderr
    # Without --must-exist a wait for attempt 2 waits for it to appear.
    early = start_wait(two.d.addr, two.id, "--attempt", 2)
    blocked(early, "attempt 2 has not joined yet")

    # The requeued run joins as attempt 2 and reopens the closed job.
    again = [Node(two.d.addr, name="host-%d" % i) for i in range(2)]
    two.nodes += again
    for i, n in enumerate(again):
        acc = n.join(two.id, min_nodes=2, max_nodes=2, rank_hint=i,
                     extra=attempt(2))
        assert acc.attempt == 2, acc
    gen = again[0].wait_assignment(timeout=10).generation
    waits = [early] + [start_wait(two.d.addr, two.id, "--attempt", a)
                       for a in (2, 1)]
    for p in waits:
        blocked(p, "attempt 2 runs")
    for n in again:
        n.report(gen, "SUCCEEDED")
    for p in waits:
        rc, out, err = finish(p, 10)
        assert rc == 0, (rc, out, err)
        assert out == "job %s closed: every participant finished\n" % two.id
    cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", "2", "-o",
                       "json"))
    assert '"attempt": 2' in cp.stdout, cp.stdout
    h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", "3",
                  "--must-exist"), 3)


def test_attempt_a_running_earlier_attempt_that_fails(two):
    """A wait for attempt 2 started while attempt 1 still runs follows it;
    when attempt 1 fails, that is not attempt 2's outcome: exit 3, naming
    what became of attempt 1, rather than 1 (--must-exist: at once;
    otherwise once attempt 2 has not appeared within --appear-timeout,
    counted from attempt 1's end)."""
    slow = start_wait(two.d.addr, two.id, "--attempt", 2, "--appear-timeout",
                      "1s")
    p = start_wait(two.d.addr, two.id, "--attempt", 2, "--must-exist")
    blocked(p, "attempt 1 runs")
    with Control(two.d.addr) as c:
        c.abort_job(two.id, reason="requeued")
    rc, out, err = finish(p, 10)
    assert rc == 3, (rc, out, err)
    assert out == ""
    assert err.startswith("rdzvctl: job %s has no attempt 2: its attempt 1 "
                          "failed (aborted by " % two.id), err
    blocked(slow, "attempt 2 may still appear", 0.5)
    rc, out, err = finish(slow, 10)
    assert rc == 3, (rc, out, err)
    assert err.endswith("and no later one started within 1s\n"), err


def test_attempt_usage(two):
    for bad in ("0", "x", "-1", "1.5", "4294967296", ""):
        cp = h.check(h.ctl(two.d.addr, "wait", two.id, "--attempt", bad), 2)
        assert "wait: --attempt %s: give the scheduler's run of the job, a " \
            "number from 1" % bad in cp.stderr, cp.stderr


def test_waits_across_a_restart_of_rdzvd(tmp_path):
    """rdzvd is killed and started again on the same port and database while
    a wait runs: the wait follows the job again and ends with it."""
    d = rt.Daemon(tmp_path)
    t = Two(tmp_path, "restart", daemon=d)
    try:
        p = start_wait(d.addr, t.id)
        blocked(p, "the job is running")
        d.kill()
        d.wait()
        d2 = rt.Daemon(tmp_path, listen=d.addr, db=d.db)
        t.d = d2
        blocked(p, "rdzvd is back, the job still runs", 0.5)
        # The agents resume with their generation and succeed.
        for n in t.nodes:
            n.resume(t.gen)
            n.report(t.gen, "SUCCEEDED")
        rc, out, err = finish(p, 15)
        assert rc == 0, (rc, out, err)
        assert "closed" in out, out
    finally:
        t.close()
