"""Training progress for rdzv-agent (docs/HEALTH.md).

Call ``rdzv.progress(step)`` once per training step, in every worker::

    import rdzv
    for step in range(start, steps):
        train_one_step()
        rdzv.progress(step)

Each call sends one datagram, ``1 LOCAL_RANK STEP``, to the unix datagram
socket that the agent names in ``RDZV_PROGRESS`` (a path, or ``@name`` for
an abstract socket). It never blocks and never raises for a missing or busy
agent: progress is advice, training goes on. Without ``RDZV_PROGRESS`` (not
started by rdzv-agent) it does nothing. Only the standard library is used.

On its first call it also registers faulthandler for SIGUSR1, unless the
program has its own SIGUSR1 handler, so that a worker the agent finds hung
writes every thread's stack to its stderr log before it is stopped.
"""

import os
import socket
import threading

__all__ = ["progress"]

_lock = threading.Lock()
_ready = False
_sock = None
_addr = None
_rank = 0


def _faulthandler():
    import faulthandler
    import signal

    try:
        if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None):
            faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):
        pass  # no SIGUSR1 here, or stderr is not a file: no dump


def _setup():
    global _ready, _sock, _addr, _rank
    _ready = True
    where = os.environ.get("RDZV_PROGRESS", "")
    if not where:
        return
    try:
        _rank = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        _rank = 0
    _addr = "\0" + where[1:] if where.startswith("@") else where
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setblocking(False)
    _sock = s
    _faulthandler()


def progress(step):
    """Tells the agent that this worker reached training step ``step``
    (an int from 0). A step equal to the last one is not progress."""
    step = int(step)
    if step < 0 or step >= 1 << 64:
        raise ValueError("rdzv.progress: step must be from 0 to 2**64-1, "
                         "not %d" % step)
    with _lock:
        if not _ready:
            _setup()
        if _sock is None:
            return
        try:
            _sock.sendto(b"1 %d %d" % (_rank, step), _addr)
        except OSError:
            pass  # the agent is gone or its queue is full
