#!/usr/bin/python3
"""A slow, lossy link for a kernel without sch_netem: relays Ethernet
frames between two interfaces of one namespace, delaying each by --delay
ms and dropping each with probability --loss.

    relay.py --delay 100 --loss 0.05 IFACE_A IFACE_B

It reads with AF_PACKET sockets (frames the kernel sends out of an
interface are skipped, so nothing loops) and holds at most --queue frames
(more are dropped, as a full router queue drops them). Checksum and
segmentation offloads must be off on every interface whose frames cross it
(netns.py does that): a frame read here is sent as it is. It ends on
SIGTERM or SIGINT. Standard library only."""

import argparse
import heapq
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.0, help="ms each way")
    ap.add_argument("--loss", type=float, default=0.0, help="0 to 1")
    ap.add_argument("--queue", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("a")
    ap.add_argument("b")
    o = ap.parse_args()
    if not 0 <= o.loss < 1 or o.delay < 0:
        sys.exit("relay.py: --loss must be in [0, 1) and --delay >= 0")
    rng = random.Random(o.seed)
    socks = {}
    for name in (o.a, o.b):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                          socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setblocking(False)
        socks[name] = s
    other = {socks[o.a]: socks[o.b], socks[o.b]: socks[o.a]}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    pending = []        # (due, seq, out socket, frame)
    seq = 0
    delay = o.delay / 1000.0
    print("relay %s <-> %s: %g ms, %g loss" % (o.a, o.b, o.delay, o.loss),
          flush=True)
    while not stop:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, out, frame = heapq.heappop(pending)
            try:
                out.send(frame)
            except OSError:
                pass            # the link is down: the frame is lost
        timeout = max(0.0, pending[0][0] - now) if pending else 0.5
        try:
            ready, _, _ = select.select(list(other), [], [], timeout)
        except InterruptedError:
            continue
        for s in ready:
            for _ in range(256):
                try:
                    frame, addr = s.recvfrom(65535)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                if rng.random() < o.loss or len(pending) >= o.queue:
                    continue
                seq += 1
                heapq.heappush(pending, (time.monotonic() + delay, seq,
                                         other[s], frame))


if __name__ == "__main__":
    main()
