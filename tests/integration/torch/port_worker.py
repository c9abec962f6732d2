#!/usr/bin/python3
"""The worker of test_master_port.py: every round, rank 0 opens the round's
store on MASTER_ADDR:MASTER_PORT and the other ranks reach it; each leaves
round-gG-rR.json (generation, rank, port, restart count, pid) in $PW_OUT
once the whole world met there. Until $PW_ROUNDS restarts have been
counted the round then fails on purpose (every rank, so that the
generation fails once); after that the worker exits 0.

  PW_MODE=process   no torch: rank 0 waits $PW_BIND_DELAY seconds (the
                    time torch takes to import), then binds [::]:MASTER_PORT with
                    SO_REUSEADDR and listens, as torch's TCPStore does, and
                    exits 1 with the error if it cannot; the others connect
                    and wait for its word. Every round is a new process.
  PW_MODE=inproc    real torch under rdzv.elastic (--restart in-process):
                    the round's TCPStore and gloo group come from
                    rdzv.elastic, and an all_reduce checks them; a failure
                    raises and the process takes the next round.
"""

import json
import os
import socket
import sys
import time

OUT = os.environ["PW_OUT"]
ROUNDS = int(os.environ["PW_ROUNDS"])


def record(**kw):
    gen, rank = int(os.environ["RDZV_GENERATION"]), int(os.environ["RANK"])
    d = dict(kw, generation=gen, rank=rank, pid=os.getpid(),
             port=int(os.environ["MASTER_PORT"]),
             restart=int(os.environ["TORCHELASTIC_RESTART_COUNT"]))
    path = os.path.join(OUT, "round-g%d-r%d.json" % (gen, rank))
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.rename(path + ".tmp", path)
    return d["restart"] < ROUNDS


def store_process():
    """The round's store as torch makes it, without torch. Rank 0 records
    once it listens, the others once they reached it; rank 0 leaves only
    after every other rank said it recorded, so that no failure stops a
    rank before it did."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"])
    if rank == 0:
        time.sleep(float(os.environ.get("PW_BIND_DELAY", "0")))
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            s.bind(("::", port))
            s.listen(64)
        except OSError as e:
            print("failed to bind to [::]:%d (errno: %d - %s)"
                  % (port, e.errno, e.strerror), file=sys.stderr, flush=True)
            sys.exit(1)
        again = record()
        # A peer says hello first, as torch's store clients do: a
        # connection that closes without a word is a probe (the agent's
        # librdzv-masterwait.so, docs/RECOVERY.md), not a rank.
        peers = []
        while len(peers) < world - 1:
            p = s.accept()[0]
            p.settimeout(30)
            try:
                if p.recv(1) == b"h":
                    peers.append(p)
                    continue
            except OSError:
                pass
            p.close()
        for p in peers:
            p.sendall(b"k")
        for p in peers:
            p.settimeout(30)
            p.recv(1)
        return again
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((os.environ["MASTER_ADDR"], port),
                                          timeout=30) as c:
                c.sendall(b"h")
                if c.recv(1) == b"k":
                    again = record()
                    c.sendall(b"r")
                    return again
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("rank %s: no store at port %d" % (os.environ["RANK"],
                                                       port))
        time.sleep(0.01)


if os.environ["PW_MODE"] == "process":
    sys.exit(1 if store_process() else 0)

import rdzv.elastic  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def train():
    t = torch.ones(1)
    dist.all_reduce(t)
    assert int(t.item()) == dist.get_world_size()
    again = record(world=int(t.item()))
    dist.barrier()      # both recorded before either fails
    if again:
        raise RuntimeError("injected failure")


rdzv.elastic.run(train, backend="gloo")
