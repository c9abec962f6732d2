#!/usr/bin/python3
"""A crowded ephemeral port range, as on a busy training host (issue 44):
many outgoing connections held to one destination, and new ones made all
the time.

connect() looks for a source port in the even half of
net.ipv4.ip_local_port_range first, and a port it already uses for the same
destination does not do; bind(port 0) looks in the odd half. Once the even
half is held by connections to one destination, every new connection to it
takes a free odd port: the kind bind(0) hands out, so a port that was free
when it was read (bind 0, read, close) is soon some connection's source
port, and a store that binds it later fails with EADDRINUSE.

Run as a program it holds one connection per even port of the range plus
CHURN more, to a listener of its own on 127.0.0.1, and replaces the oldest
CHURN/10 of those every 10 ms (closed with a reset: no TIME_WAIT), until
stdin closes. It prints one line, "crowded HELD", once the range is
crowded. A child process accepts (and drops, as the other end closes)
the server ends, so each process holds at most one end of each connection.

    with Crowd() as c:   # in a test
        ...
"""

import os
import resource
import selectors
import socket
import struct
import subprocess
import sys
import time

CHURN = 3000            # odd ports held, and renewed every second


def port_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    return lo, hi


def evens(lo, hi):
    return sum(1 for p in range(lo, hi + 1) if p % 2 == lo % 2)


def needed():
    """The open files the crowd needs: one per even port, CHURN more."""
    lo, hi = port_range()
    return evens(lo, hi) + CHURN + 64


def accept_forever(lsock):
    """The server ends: accepted, and closed when the client resets."""
    sel = selectors.DefaultSelector()
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is lsock:
                while True:
                    try:
                        c, _ = lsock.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    sel.register(c, selectors.EVENT_READ)
                continue
            try:
                gone = s.recv(1) == b""
            except OSError:
                gone = True
            if gone:
                sel.unregister(s)
                s.close()


def connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.connect(addr)
    return s


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    lo, hi = port_range()
    want = evens(lo, hi) + CHURN
    if want + 64 > hard:
        sys.exit("portcrowd: %d connections need more than the open-file "
                 "limit of %d" % (want, hard))
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4096)
    addr = lsock.getsockname()
    pid = os.fork()
    if pid == 0:
        try:
            accept_forever(lsock)
        finally:
            os._exit(0)
    lsock.close()
    held = [connect(addr) for _ in range(want)]
    odd = [s for s in held if s.getsockname()[1] % 2 != lo % 2]
    print("crowded %d %d" % (len(held), len(odd)), flush=True)
    os.set_blocking(0, False)
    churn = odd[:]
    step = max(1, CHURN // 100)
    while True:
        try:
            if os.read(0, 4096) == b"":
                break
        except BlockingIOError:
            pass
        for s in churn[:step]:
            s.close()
        churn = churn[step:] + [connect(addr) for _ in range(step)]
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)


class Crowd:
    """portcrowd.py in a process of its own, for the length of a with."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline().split()
        if not line or line[0] != "crowded":
            self.p.kill()
            raise RuntimeError("portcrowd did not crowd the port range "
                               "(exit %s)" % self.p.wait(10))
        self.held, self.odd = int(line[1]), int(line[2])
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        try:
            self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)


if __name__ == "__main__":
    main()
