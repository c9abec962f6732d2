"""rdzvctl status --watch (SPEC §8): piped, one flushed line per change,
seen within a second of the change; -o json, one JSON document per line;
on a terminal, redrawn in place; it ends cleanly on SIGINT and with exit 5
when rdzvd goes away."""

import json
import os
import pty
import select
import signal
import subprocess
import time

import rdzvtest as rt
from rdzvnode import Control, Node

import ctlharness as h


def watch(addr, *args):
    env = dict(os.environ, TZ="UTC")
    env.pop("RDZVCTL_TEST_NOW_MS", None)
    return rt.Proc([h.RDZVCTL, "--server", addr, "status"] + list(args) + ["--watch"],
                   env=env)


def test_piped_watch_shows_membership_changes_within_a_second(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr, name="host-a") as a, \
            Node(d.addr, name="host-b") as b, Node(d.addr, name="host-c") as c:
        a.join("w1", min_nodes=2, max_nodes=3, last_call_ms=60000, nproc=2)
        with watch(d.addr, "w1") as one, watch(d.addr) as every:
            # The current state first.
            one.wait_line(r"^\d\d:\d\d:\d\d w1 waiting gen 0 nodes 1 of 2:3")
            one.wait_line(r" w1 node 1 host-a participant nproc 2$")
            every.wait_line(r" w1 waiting gen 0 nodes 1 of 2:3")

            # A join: seen by both within a second.
            mark_one, mark_every = len(one.lines), len(every.lines)
            t0 = time.monotonic()
            b.join("w1", nproc=1)
            one.wait_line(r" w1 node 2 host-b participant nproc 1$", timeout=1.0,
                          start=mark_one)
            every.wait_line(r" w1 waiting gen 0 nodes 2 of 2:3", timeout=1.0,
                            start=mark_every)
            assert h.elapsed(t0) < 1.0

            # max_nodes completes the round at once: new ranks show.
            mark_one = len(one.lines)
            t0 = time.monotonic()
            c.join("w1", nproc=4)
            one.wait_line(r" w1 running gen 1 nodes 3 of 2:3 world 7 ", timeout=1.0,
                          start=mark_one)
            one.wait_line(r" w1 node 3 host-c participant group rank 2 ranks 3-6 nproc 4$",
                          timeout=1.0, start=mark_one)
            assert h.elapsed(t0) < 1.0
            a.wait_assignment(generation=1)

            # An eviction: the node's new state, then the new round.
            mark_one, mark_every = len(one.lines), len(every.lines)
            t0 = time.monotonic()
            h.check(h.ctl(d.addr, "evict", "w1", "host-b", fixed=False))
            one.wait_line(r" w1 node 2 host-b evicted ", timeout=1.0, start=mark_one)
            one.wait_line(r" w1 running gen 2 nodes 2 of 2:3 world 6 ", timeout=1.0,
                          start=mark_one)
            every.wait_line(r" w1 running gen 2 nodes 2 of 2:3 world 6 ", timeout=1.0,
                            start=mark_every)
            assert h.elapsed(t0) < 1.0

            # One line per change: no line repeats its predecessor's news.
            node_lines = [l.split(" ", 1)[1] for l in one.out_lines]
            assert len(node_lines) == len(set(node_lines)), one.output()

            # SIGINT ends a watch quietly with 0.
            one.signal(signal.SIGINT)
            assert one.wait(5) == 0
            assert one.err_lines == []
            every.signal(signal.SIGTERM)
            assert every.wait(5) == 0


def test_json_watch_is_one_document_per_line(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr, name="host-a") as a, \
            Node(d.addr, name="host-b") as b:
        a.join("wj", min_nodes=2, max_nodes=2, nproc=2)
        with watch(d.addr, "wj", "-o", "json") as w:
            w.wait_line(r'^\{"job":')
            b.join("wj", nproc=1)
            w.wait_line(r'"state":"running"', timeout=2.0)
            w.signal(signal.SIGINT)
            assert w.wait(5) == 0
        docs = [json.loads(l) for l in w.out_lines]
        assert docs[0]["job"]["id"] == "wj" and docs[0]["removed"] is False
        assert docs[-1]["job"]["state"] == "running"
        assert [n["hostname"] for n in docs[-1]["job"]["nodes"]] == ["host-a", "host-b"]


def test_terminal_watch_redraws_in_place(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr, name="host-a") as a, \
            Node(d.addr, name="host-b") as b:
        a.join("wt", min_nodes=2, max_nodes=2, nproc=2)
        master, slave = pty.openpty()
        env = dict(os.environ, TZ="UTC")
        p = subprocess.Popen([h.RDZVCTL, "--server", d.addr, "status", "wt", "--watch"],
                             stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                             env=env, start_new_session=True)
        os.close(slave)
        buf = b""

        def read_until(needles, timeout, start=0):
            """Reads until each of |needles| was drawn after |start|."""
            nonlocal buf
            deadline = time.monotonic() + timeout
            while not all(n in buf[start:] for n in needles):
                left = deadline - time.monotonic()
                assert left > 0, "no %r on the terminal; got %r" % (needles, buf[-2000:])
                r, _, _ = select.select([master], [], [], left)
                if r:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:
                        chunk = b""
                    assert chunk, "terminal closed; got %r" % buf[-2000:]
                    buf += chunk

        try:
            read_until([b"host-a", b"connected\x1b[K"], 5)
            # Drawn from the top of the screen, lines cleared to their end.
            assert buf.startswith(b"\x1b[H\x1b[2J"), buf[:40]
            assert b"\x1b[K" in buf
            assert b"waiting" in buf
            start = len(buf)
            b.join("wt", nproc=1)
            read_until([b"generation 1, world size 3", b"host-b"], 2, start)
            redraw = buf[start:]
            # The change is a redraw of the screen, not lines appended.
            assert redraw.count(b"\x1b[H") >= 1
            assert b"host-b" in redraw
            p.send_signal(signal.SIGINT)
            assert p.wait(5) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(5)
            os.close(master)


def test_watch_of_an_unknown_job_is_not_found(tmp_path):
    with rt.Daemon(tmp_path) as d:
        cp = h.ctl(d.addr, "status", "nope", "--watch", timeout=10)
        h.check(cp, 3)
        assert "job nope not found" in cp.stderr


def test_watch_ends_with_5_when_rdzvd_goes_away(tmp_path):
    d = rt.Daemon(tmp_path)
    try:
        with Node(d.addr, name="host-a") as a:
            a.join("wg", min_nodes=2, max_nodes=2)
            with watch(d.addr) as w:
                w.wait_line(r" wg waiting ")
                d.stop()
                assert w.wait(10) == 5
                assert any(d.addr in l for l in w.err_lines), w.output()
    finally:
        d.stop()
