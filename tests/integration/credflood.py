"""A flood of complete gRPC calls whose rdzv-munge headers are random
credentials (written as munge_encode writes them, so that only munged can
tell they are no good), kept at |inflight| calls on each of |conns| raw
HTTP/2 connections from one thread: each answer is followed by a new call.
For the tests of rdzvd's decode queue (issue 43)."""

import base64
import os
import selectors
import socket
import struct
import threading

import h2raw


def random_cred():
    return "MUNGE:" + base64.b64encode(os.urandom(120)).decode() + ":"


def request(path, stream, body=b""):
    hdrs = h2raw.hpack_literal([(":method", "POST"), (":scheme", "http"),
                                (":path", path), (":authority", "localhost"),
                                ("content-type", "application/grpc"),
                                ("te", "trailers"), ("rdzv-munge", random_cred())])
    return (h2raw.frame(h2raw.HEADERS, h2raw.END_HEADERS, stream, hdrs) +
            h2raw.frame(h2raw.DATA, h2raw.END_STREAM, stream,
                        struct.pack(">BI", 0, len(body)) + body))


class Flood:
    def __init__(self, addr, conns, inflight, path="/rdzv.v1.Control/ListJobs"):
        self.addr, self.n, self.inflight, self.path = addr, conns, inflight, path
        self.stop = threading.Event()
        self.answered = 0
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)

    def _open(self, sel):
        s = h2raw.h2_open(self.addr)
        s.setblocking(False)
        st = {"buf": b"", "next": 1}
        out = b""
        for _ in range(self.inflight):
            out += request(self.path, st["next"])
            st["next"] += 2
        s.setblocking(True)
        s.sendall(out)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, st)
        self.opened += 1

    def _run(self):
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            try:
                self._open(sel)
            except OSError:
                pass
        while not self.stop.is_set():
            for key, _ in sel.select(0.1):
                s, st = key.fileobj, key.data
                try:
                    chunk = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(s)
                    s.close()
                    if not self.stop.is_set():
                        try:
                            self._open(sel)
                        except OSError:
                            pass
                    continue
                buf = st["buf"] + chunk
                out = b""
                while len(buf) >= 9:
                    n = buf[0] << 16 | buf[1] << 8 | buf[2]
                    if len(buf) < 9 + n:
                        break
                    ftype, flags, payload = buf[3], buf[4], buf[9:9 + n]
                    buf = buf[9 + n:]
                    if ((ftype == h2raw.HEADERS and flags & h2raw.END_STREAM) or
                            ftype == h2raw.RST_STREAM):
                        self.answered += 1
                        if st["next"] < (1 << 30):
                            out += request(self.path, st["next"])
                            st["next"] += 2
                    elif ftype == h2raw.PING and not flags & 1:
                        out += h2raw.frame(h2raw.PING, 1, 0, payload)
                st["buf"] = buf
                if out:
                    try:
                        s.setblocking(True)
                        s.settimeout(5)
                        s.sendall(out)
                        s.setblocking(False)
                    except OSError:
                        pass
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()
