#!/usr/bin/python3
"""A small DistributedDataParallel job for rdzv-agent's end-to-end tests.

Run as every worker of `rdzv-agent join ... -- python3 train_ddp.py`. It
uses nothing but what torchrun gives a worker (SPEC §5): it calls
init_process_group("gloo") from env://, trains a tiny model on a synthetic,
deterministic data set split by DistributedSampler, prints its loss per
epoch and leaves what the test checks as JSON files in $TRAIN_OUT, named
after the generation and the rank:

  env-gG-rR.json       the worker's rdzv/torchrun environment and pid,
                       written before init_process_group
  start-gG-rR.json     the same, written once init_process_group succeeded
  progress-gG-rR.json  the last epoch done and its loss (rewritten per epoch)
  final-gG-rR.json     losses, and a checksum of the final parameters
  sigterm-gG-rR.json   written when SIGTERM arrived (then it dies of it)
  peerloss-gG-rR.json  a collective failed: a peer went away

Each epoch is also a step reported to the agent's RDZV_PROGRESS socket
(docs/HEALTH.md), as rdzv.progress would, when the agent names one and
TRAIN_PROGRESS is not 0.

Settings (environment, inherited from the agent):

  TRAIN_OUT            the directory for the files above (required)
  TRAIN_TAG            a name for the agent, copied into the files
  TRAIN_EPOCHS         epochs to train (default 8); with TRAIN_STOP_FILE, the
                       least number of epochs
  TRAIN_STOP_FILE      train until this file exists (every rank stops after
                       the same epoch), for at most TRAIN_MAX_SECONDS
                       (default 90), after which it exits 3
  TRAIN_EPOCH_SECONDS  pause after each epoch (default 0), so that a
                       long-running job does not keep the CPUs busy
  TRAIN_FAIL_RANK      this global rank raises an exception after its first
                       epoch (exit status 1; @record writes the error file)
  TRAIN_FAIL_RESTARTS  only when TORCHELASTIC_RESTART_COUNT is one of these
                       comma-separated numbers (default: always)
  TRAIN_ON_PEER_LOSS   `exit` (default): a failed collective ends the worker
                       with status 1, as an ordinary DDP script does; `wait`:
                       the worker waits (at most 60 s, then exits 1) for its
                       agent to stop it, as a script that leaves recovery to
                       its agent does
"""

import ctypes
import datetime
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# The environment a worker gets from its agent (SPEC §5).
SPEC_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
    "OMP_NUM_THREADS", "RDZV_GENERATION", "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
)

OUT = os.environ["TRAIN_OUT"]
GEN = os.environ.get("RDZV_GENERATION", "0")
RANK = int(os.environ.get("RANK", "-1"))
T0 = time.monotonic()


def path(kind):
    return os.path.join(OUT, "%s-g%s-r%d.json" % (kind, GEN, RANK))


def write(kind, **fields):
    """Writes one result file whole (rename), so a test never reads half."""
    fields.update(pid=os.getpid(), rank=RANK, generation=int(GEN),
                  tag=os.environ.get("TRAIN_TAG", ""), time=time.time())
    tmp = path(kind) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(fields, f, sort_keys=True)
    os.rename(tmp, path(kind))


def report_step(step):
    """One progress datagram, "1 LOCAL_RANK STEP", to the agent; nothing
    when it names no socket or cannot take it."""
    where = os.environ.get("RDZV_PROGRESS", "")
    if not where or os.environ.get("TRAIN_PROGRESS") == "0":
        return
    addr = "\0" + where[1:] if where.startswith("@") else where
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.sendto(b"1 %d %d" % (int(os.environ.get("LOCAL_RANK", "0")),
                                   step), addr)
        except OSError:
            pass


def environment():
    return {k: os.environ[k] for k in SPEC_VARS if k in os.environ}


def watch_sigterm():
    """Notes SIGTERM in a file, then dies of it as an untouched process
    would. The note is written by a thread woken through the wakeup fd:
    a Python-level handler would wait for the main thread, which may sit
    in a gloo collective for a long time."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: None)

    def run():
        while True:
            if signal.SIGTERM in os.read(r, 16):
                break
        try:
            write("sigterm")
        finally:
            # signal.signal() works in the main thread only; libc's does not
            # care which thread asks.
            ctypes.CDLL(None).signal(signal.SIGTERM, 0)  # SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            os._exit(143)
    threading.Thread(target=run, daemon=True).start()


def data():
    """The same 256 samples on every rank: y = X w + noise, fixed seed."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(256, 8, generator=g)
    w = torch.linspace(-1.0, 1.0, 8).unsqueeze(1)
    y = x @ w + 0.05 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def checksum(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def should_fail():
    if os.environ.get("TRAIN_FAIL_RANK", "") != str(RANK):
        return False
    which = os.environ.get("TRAIN_FAIL_RESTARTS", "")
    if not which:
        return True
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "") in which.split(",")


def train():
    epochs = int(os.environ.get("TRAIN_EPOCHS", "8"))
    stop_file = os.environ.get("TRAIN_STOP_FILE", "")
    max_seconds = float(os.environ.get("TRAIN_MAX_SECONDS", "90"))
    pause = float(os.environ.get("TRAIN_EPOCH_SECONDS", "0"))
    world = dist.get_world_size()

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ds = data()
    sampler = DistributedSampler(ds, num_replicas=world, rank=RANK,
                                 shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    losses = []
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
            n += 1
        epoch += 1
        if epoch == 1 and should_fail():
            raise RuntimeError("injected failure: rank %d, restart %s"
                               % (RANK, os.environ.get("TORCHELASTIC_RESTART_COUNT")))
        # One collective per epoch carries both the loss (the mean over
        # ranks, the same on every rank) and whether any rank wants to stop.
        stop = 0.0
        if stop_file and epoch >= epochs:
            stop = 1.0 if os.path.exists(stop_file) else 0.0
            if time.monotonic() - T0 > max_seconds:
                stop = 100.0
        t = torch.tensor([total / max(n, 1), stop], dtype=torch.float64)
        dist.all_reduce(t)
        mean = t[0].item() / world
        losses.append(mean)
        print("rank %d epoch %d loss %.6f" % (RANK, epoch, mean), flush=True)
        write("progress", epoch=epoch, loss=mean)
        report_step(epoch)
        if t[1].item() >= 100.0:
            print("rank %d: %s did not appear within %.0f s" % (RANK, stop_file, max_seconds),
                  file=sys.stderr, flush=True)
            sys.exit(3)
        if (stop_file and t[1].item() > 0) or (not stop_file and epoch >= epochs):
            break
        if pause > 0:
            time.sleep(pause)
    return model, losses


@record
def main():
    os.makedirs(OUT, exist_ok=True)
    watch_sigterm()
    write("env", env=environment())
    timeout = datetime.timedelta(seconds=float(os.environ.get("TRAIN_PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    write("start", env=environment(), world_size=dist.get_world_size(),
          pg_rank=dist.get_rank())
    try:
        model, losses = train()
        dist.barrier()
    except RuntimeError as e:
        if "injected failure" in str(e):
            raise
        write("peerloss", error=str(e))
        if os.environ.get("TRAIN_ON_PEER_LOSS", "exit") != "wait":
            raise
        print("rank %d: a collective failed (%s); waiting for the agent" % (RANK, e),
              file=sys.stderr, flush=True)
        time.sleep(60)
        sys.exit(1)
    write("final", losses=losses, checksum=checksum(model),
          world_size=dist.get_world_size())
    print("rank %d done: %d epochs, loss %.6f -> %.6f"
          % (RANK, len(losses), losses[0], losses[-1]), flush=True)
    dist.destroy_process_group()
    leave(0)     # before |model| is freed


def leave(code):
    """Ends the worker without freeing torch's objects. Freeing a DDP model
    frees its gloo process group, whose destructor (torch 1.13, Debian 12's)
    joins gloo's threads while holding the GIL; one of them may be freeing a
    tensor and waiting for the GIL: a deadlock, now and then, at the very
    end (pytorch/pytorch#56297, seen here in gdb)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # An exception keeps the frames, and the model, alive while we leave.
    try:
        main()
    except SystemExit as e:     # as Python exits: None is 0, text is 1
        leave(e.code if isinstance(e.code, int) else int(e.code is not None))
    except BaseException:
        traceback.print_exc()
        leave(1)
