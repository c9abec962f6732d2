#!/usr/bin/python3
"""The same rendezvous as rdzv-bench, through torch's own c10d rendezvous.

N DynamicRendezvousHandlers with the c10d backend (what torchrun runs with
--rdzv-backend c10d) join one rendezvous (min = max = N) as threads of this
process, each with its own TCPStore client; the store is served by torch's
TCPStore in this process, as torchrun's agent on the first node serves it.
The time is taken from just before the handlers start (each then connects
its store client, builds its handler and calls next_rendezvous()) to the
last handler returning from next_rendezvous() with its rank, the same span
as rdzv-bench's "first connect to last assignment".

Settings fair to torch: join timeout 600 s (its default); last call 1 s,
which never applies, as the round completes the moment the N-th node joins
(min = max); keep-alive every 5 s (from_backend's fixed value; a shorter
interval only adds compare-and-set traffic while nodes wait).

Prints "name: value" lines like rdzv-bench: nodes, ranks (checked to be a
permutation of 0..N-1), "first connect to last assignment: X ms" and the
spread of the handlers' own times. Exits 1 with the first error when a
handler fails or the run passes --timeout.

Works with torch 1.13 and 2.x: the timeout goes to from_backend() by name
(torch 2.x added local_addr before it) and next_rendezvous()'s result is a
tuple or, since torch 2.4, a RendezvousInfo.
"""

import argparse
import datetime
import logging
import os
import sys
import threading
import time


def rank_world(info):
    """(rank, world size) of what next_rendezvous() returned: a tuple
    (store, rank, world_size) up to torch 2.3, a RendezvousInfo since."""
    if hasattr(info, "rank"):
        return info.rank, info.world_size
    _, rank, world = info
    return rank, world


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds before giving up (default 600)")
    ap.add_argument("--id", default="torch-bench-%d" % os.getpid())
    args = ap.parse_args()
    if args.nodes < 1:
        ap.error("--nodes must be at least 1")

    try:
        from torch.distributed import TCPStore
        from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend \
            import C10dRendezvousBackend
        from torch.distributed.elastic.rendezvous.dynamic_rendezvous import \
            DynamicRendezvousHandler, RendezvousTimeout
    except ImportError as e:
        print("torch_rdzv.py: cannot import torch's rendezvous: %s" % e,
              file=sys.stderr)
        return 3
    # torch logs every join at INFO; the figures are what we print.
    logging.getLogger("torch.distributed").setLevel(logging.WARNING)

    n = args.nodes
    store_timeout = datetime.timedelta(seconds=args.timeout)
    server = TCPStore("127.0.0.1", 0, None, True, store_timeout, False)
    rdzv_timeout = RendezvousTimeout(
        join=datetime.timedelta(seconds=600),
        last_call=datetime.timedelta(seconds=1),
        close=datetime.timedelta(seconds=30),
        heartbeat=datetime.timedelta(seconds=5))

    results = [None] * n     # (rank, world, seconds) or an exception
    handlers = []
    lock = threading.Lock()
    done = threading.Event()
    finished = [0]

    def node(i):
        t0 = time.monotonic()
        try:
            store = TCPStore("127.0.0.1", server.port, None, False,
                             store_timeout)
            backend = C10dRendezvousBackend(store, args.id)
            # timeout by name: torch 2.x put local_addr before it (a
            # RendezvousTimeout there becomes the node's "address", and
            # sorting the participants then compares two of them).
            h = DynamicRendezvousHandler.from_backend(
                args.id, store, backend, n, n, timeout=rdzv_timeout)
            with lock:
                handlers.append(h)
            rank, world = rank_world(h.next_rendezvous())
            results[i] = (rank, world, time.monotonic() - t0,
                          time.monotonic())
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e
        with lock:
            finished[0] += 1
            if finished[0] == n:
                done.set()

    threads = [threading.Thread(target=node, args=(i,), daemon=True)
               for i in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    if not done.wait(args.timeout):
        ok = sum(1 for r in results if isinstance(r, tuple))
        print("torch_rdzv.py: gave up after %.0f s: %d of %d handlers "
              "returned" % (args.timeout, ok, n), file=sys.stderr)
        os._exit(1)
    errors = [r for r in results if isinstance(r, Exception)]
    if errors:
        print("torch_rdzv.py: %d of %d handlers failed, the first: %r"
              % (len(errors), n, errors[0]), file=sys.stderr)
        os._exit(1)
    end = max(r[3] for r in results)
    ranks = sorted(r[0] for r in results)
    worlds = {r[1] for r in results}
    if ranks != list(range(n)) or worlds != {n}:
        print("torch_rdzv.py: inconsistent ranks %s / world sizes %s"
              % (ranks, sorted(worlds)), file=sys.stderr)
        os._exit(1)
    own = sorted(r[2] * 1000 for r in results)

    def pct(p):
        return own[min(n - 1, max(0, int(-(-p * n // 1)) - 1))]

    print("backend:               torch %s c10d (TCPStore)"
          % __import__("torch").__version__)
    print("nodes:                 %d" % n)
    print("assigned:              %d" % n)
    print("world size:            %d" % n)
    print("handler p50/p90/p99/max: %.1f / %.1f / %.1f / %.1f ms"
          % (pct(0.5), pct(0.9), pct(0.99), own[-1]))
    print("first connect to last assignment: %.1f ms"
          % ((end - start) * 1000))
    sys.stdout.flush()
    # The handlers' keep-alive threads would run on; nothing to wait for.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
