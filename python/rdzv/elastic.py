"""In-process restart for rdzv-agent (docs/RECOVERY.md).

Wrap the training function, in every worker::

    import rdzv.elastic

    def train(state):
        model = state.setdefault("model", make_model())   # kept across rounds
        for step in range(state.get("step", 0), steps):
            rdzv.elastic.check()        # leave for a new round (optional)
            ...                          # a step with collectives
            state["step"] = step + 1

    rdzv.elastic.run(train, {}, backend="gloo")

``run`` initialises the default process group from the environment, calls
the function, and returns what it returns (after destroying the group).
Under ``rdzv-agent join --restart in-process`` (``RDZV_RESTART_SOCKET`` is
set) a function that raises does not end the process: the failure goes to
the agent, the process group is torn down (destroyed on gloo, aborted on
NCCL, whose destroy is collective and hangs with a dead peer), the worker
waits for its next assignment (rank, world size, master address and port,
restart count, generation: SPEC §5), sets the environment, initialises a
new process group and calls the function again. The function resumes from
its own state: what it keeps in the mutable arguments, an in-memory
snapshot, or its checkpoint. It must be restartable: no once-per-process
calls inside it.

A new round may also come while training goes well (a node taken in, or
lost with no collective of ours broken yet): ``check()`` raises
``Restart`` once an assignment is waiting, so the loop can leave between
steps; on NCCL the waiting collective is aborted. A worker that does not
take its assignment within the agent's ``--stop-timeout`` is killed and
started again as a new process, as without in-process restart.

Without ``RDZV_RESTART_SOCKET`` (plain torchrun, or rdzv-agent without
the flag) ``run`` calls the function once and lets exceptions through.
Only torch.distributed and the standard library are used; torch 1.13 (gloo)
and torch 2.x (gloo, NCCL) are supported.
"""

import datetime
import os
import socket
import sys
import threading
import time
import traceback

__all__ = ["run", "check", "restart_pending", "Restart", "generation"]


class Restart(Exception):
    """Raised by ``check()``: a new round is waiting for this worker."""


class _Link:
    """The worker's end of the agent's restart socket."""

    def __init__(self, where, local_rank, gen):
        addr = "\0" + where[1:] if where.startswith("@") else where
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(addr)
        self.cond = threading.Condition()
        self.pending = None        # (generation, {name: value})
        self.closed = False
        self.on_assign = None      # called from the reader thread
        self.send("hello 1 %d %d" % (local_rank, gen))
        t = threading.Thread(target=self._read, name="rdzv-elastic",
                             daemon=True)
        t.start()

    def send(self, line):
        line = line.replace("\n", " ")[:900]
        try:
            self.sock.sendall(line.encode("utf-8", "replace") + b"\n")
        except OSError:
            pass  # the agent is gone: it takes its workers with it

    def _read(self):
        f = self.sock.makefile("r", encoding="utf-8", errors="replace")
        try:
            while True:
                head = f.readline()
                if not head:
                    break
                parts = head.split()
                if len(parts) != 3 or parts[0] != "assign":
                    continue
                gen, n = int(parts[1]), int(parts[2])
                env = {}
                for _ in range(n):
                    name, _, value = f.readline().rstrip("\n").partition("=")
                    env[name] = value
                if f.readline().strip() != "end":
                    break
                with self.cond:
                    self.pending = (gen, env)
                    self.cond.notify_all()
                hook = self.on_assign
                if hook is not None:
                    hook()
        except (OSError, ValueError):
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def take(self, newer_than):
        """The next assignment of a generation above |newer_than|, waiting
        for it; None when the agent went away."""
        with self.cond:
            while not self.closed and (self.pending is None or
                                       self.pending[0] <= newer_than):
                self.cond.wait()
            if self.pending is None or self.pending[0] <= newer_than:
                return None
            return self.pending


_link = None
_gen = 0
_training = False


def generation():
    """The generation (round) this worker runs, from RDZV_GENERATION."""
    return _gen or int(os.environ.get("RDZV_GENERATION", "0") or 0)


def restart_pending():
    """True when the agent handed a newer assignment than the one run."""
    link = _link
    if link is None:
        return False
    with link.cond:
        return link.pending is not None and link.pending[0] > _gen


def check():
    """Raises ``Restart`` when a new round waits for this worker: call it
    between training steps."""
    if restart_pending():
        raise Restart("generation %d replaces %d" % (_link.pending[0], _gen))


def _wait_master(deadline):
    """Waits until the new master's store accepts connections, leaving
    for a newer round (Restart). A TCPStore client that finds nothing
    listening sleeps a whole second before it tries again (torch 1.13),
    and kept workers all re-initialise at the same moment, as do new
    processes: rank 0 starts the store, the others come a few
    milliseconds later instead of a second."""
    if os.environ.get("RANK", "0") == "0" or \
            not os.environ.get("MASTER_PORT"):
        return      # rank 0 starts the store; no master: init's error
    addr = (os.environ.get("MASTER_ADDR", ""),
            int(os.environ.get("MASTER_PORT", "0") or 0))
    while time.monotonic() < deadline:
        if restart_pending():
            raise Restart("a newer round came before the master's store")
        try:
            with socket.create_connection(addr, timeout=1.0):
                return
        except OSError:
            time.sleep(0.005)


_POLL_S = 0.05       # how often a blocked store call looks for a new round


def _timed_out(e):
    """Whether a store error is a timeout (torch 1.13: "Socket Timeout";
    2.x: DistStoreError "wait timeout after ...") rather than a broken
    connection."""
    return "timeout" in str(e).lower() or isinstance(e, TimeoutError)


def _interruptible(dist, inner):
    """|inner| as a store whose blocking calls give way to a newer round.

    init_process_group meets the other ranks through the store (gloo
    exchanges addresses, torch 1.13 adds a store-based barrier, NCCL its
    unique id at the first collective): a rank that died after the
    round's barrier would hold every other rank there until the timeout.
    Each call here first looks for a newer assignment and raises Restart,
    and waits only in slices of _POLL_S."""

    class _Store(dist.Store):
        abandoned = False

        def _fresh(self):
            if self.abandoned or restart_pending():
                raise Restart("a newer round came while generation %d met"
                              % _gen)

        def _wait(self, keys, timeout):
            limit = (timeout if timeout is not None
                     else inner.timeout).total_seconds()
            deadline = time.monotonic() + limit
            while True:
                self._fresh()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("rdzv.elastic: %.0f s waiting for "
                                       "the store keys %s" % (limit, keys))
                try:
                    inner.wait(keys, datetime.timedelta(
                        seconds=min(_POLL_S, left)))
                    return
                except (RuntimeError, OSError) as e:
                    if not _timed_out(e):
                        raise

        def set(self, key, value):
            self._fresh()
            return inner.set(key, value)

        def get(self, key):
            self._wait([key], None)
            return inner.get(key)

        def add(self, key, n):
            self._fresh()
            return inner.add(key, n)

        def compare_set(self, key, expected, desired):
            self._fresh()
            return inner.compare_set(key, expected, desired)

        def delete_key(self, key):
            return inner.delete_key(key)

        def num_keys(self):
            return inner.num_keys()

        def set_timeout(self, timeout):
            return inner.set_timeout(timeout)

        def wait(self, keys, timeout=None):
            self._wait(keys, timeout)

    return _Store()


def _connect(TCPStore, rank, timeout, deadline):
    """The round's TCPStore: rank 0 serves it, the others connect. A
    client's connect is tried in slices of a second, so that a master
    that died meanwhile (its port refuses, and torch retries for the
    whole timeout) or a newer round does not hold this rank. None when
    the master's store was not reached before |deadline|."""
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if rank == 0:
        return TCPStore(addr, port, None, True, timeout,
                        wait_for_workers=False)
    while True:
        _wait_master(deadline)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            store = TCPStore(addr, port, None, False, datetime.timedelta(
                seconds=min(1.0, left)), wait_for_workers=False)
            store.set_timeout(timeout)
            return store
        except (RuntimeError, OSError):
            if restart_pending():
                raise Restart("a newer round came before the master's "
                              "store answered")


def _absent(store, world):
    """The ranks of the round that did not arrive at its barrier."""
    return [r for r in range(world)
            if store.add("rdzv.elastic/here/%d" % r, 0) == 0]


def _late(world, absent, limit):
    """The barrier waited |limit| s in vain: the agent hears which ranks
    never came, so that rdzvd leaves their nodes out of the next round
    (SPEC §4 rule 17), then the round fails."""
    _link.send("absent %d %s" % (_gen, " ".join(str(r) for r in absent)))
    return RuntimeError("rdzv.elastic: %.0f s waiting for the %d ranks of "
                        "generation %d; %d never came (ranks %s)"
                        % (limit, world, _gen, len(absent),
                           ", ".join(str(r) for r in absent[:8]) +
                           (", ..." if len(absent) > 8 else "")))


_SAID_S = 0.5        # how long rank 0 waits for the others to hear it
_LATE = 1 << 40      # taken from the arrival count when rank 0 says late


def _barrier(store, rank, world, deadline, limit):
    """Waits until every rank of the round arrived, leaving for a newer
    round (Restart). At the deadline rank 0, whose store this is, decides
    which ranks never came and tells the others through the store before
    it leaves: every rank that came then reports the same absent ranks
    (rule 17: a round formed after a failure does not count them again).
    Were each rank to decide alone, rank 0's leaving would close its store
    under the others, and their report would be a broken connection, an
    ordinary failure that counts. The others decide alone only when rank 0
    says nothing for _SAID_S past the deadline."""
    while True:
        arrived = store.add("rdzv.elastic/arrived", 0)
        if arrived >= world:
            return
        if rank != 0 and arrived < 0:       # rank 0 said: late
            absent = [int(r) for r in
                      store.get("rdzv.elastic/absent").decode().split()]
            store.add("rdzv.elastic/heard", 1)
            raise _late(world, absent, limit)
        if restart_pending():
            raise Restart("a newer round came before this one started")
        now = time.monotonic()
        if rank == 0 and now > deadline:
            absent = _absent(store, world)
            store.set("rdzv.elastic/absent",
                      " ".join(str(r) for r in absent))
            # The count itself says it (one key to poll), and stays below
            # 0 for a rank that arrives after: nobody starts a group that
            # rank 0 left.
            store.add("rdzv.elastic/arrived", -_LATE)
            others = world - len(absent) - 1
            until = now + _SAID_S
            while store.add("rdzv.elastic/heard", 0) < others and \
                    time.monotonic() < until:
                time.sleep(0.005)
            raise _late(world, absent, limit)
        if rank != 0 and now > deadline + _SAID_S:
            raise _late(world, _absent(store, world), limit)
        time.sleep(0.005)


def _init(dist, backend, init_kwargs):
    """init_process_group for the round in the environment, through a
    store made here, once every rank of the round arrived at it. A newer
    assignment (a member of this round died before or while it started)
    raises Restart at any point of the meeting, the process group's own
    setup included: a kept worker never blocks in a round that cannot
    complete (SPEC §4 rule 15). A barrier that times out names the ranks
    that never came."""
    from torch.distributed import TCPStore
    timeout = init_kwargs.get("timeout", datetime.timedelta(minutes=30))
    limit = timeout.total_seconds()
    deadline = time.monotonic() + limit
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = _connect(TCPStore, rank, timeout, deadline)
    if store is None:
        raise _late(world, [0], limit)      # the master's node never came
    store.add("rdzv.elastic/here/%d" % rank, 1)
    store.add("rdzv.elastic/arrived", 1)
    _barrier(store, rank, world, deadline, limit)
    kw = {k: v for k, v in init_kwargs.items() if k != "init_method"}
    _start_group(dist, backend, store, rank, world, kw)


_LEAVE_S = 0.2       # an init that a newer round found still running


def _fresh_group_names(dist):
    """torch names each process group from a per-process counter (the
    store prefix of its keys), which destroying the default group sets to
    0 again. An init left behind was never destroyed: its counter would
    name this round's group differently from a peer's, and both would
    wait on each other's keys. Every rank starts a round's default group
    from 0, as after a destroy (torch 1.13: _group_count; 2.x:
    _world.group_count)."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    if world is not None and hasattr(world, "group_count"):
        world.group_count = 0
    elif hasattr(c10d, "_group_count"):
        c10d._group_count = 0


def _start_group(dist, backend, store, rank, world, kw):
    """init_process_group for the round, in a thread of its own that this
    one waits for while no newer round comes.

    gloo connects every pair of ranks inside init_process_group, in C++,
    and waits there, for the whole timeout, for a peer that died after
    the round's barrier: no Python code runs meanwhile to notice a new
    round, and a store that gives way cannot help once every address is
    known. So the init runs beside: when a newer assignment is pending and
    the init has not ended within _LEAVE_S, this worker leaves it behind (a
    daemon thread whose store now refuses everything, blocked until its
    timeout) and takes the new round. (Should such an init still
    complete, it did so with every peer it waited for alive: the default
    group it leaves fails its first collective, which is a failure of the
    round, counted as any other.)"""
    wrapped = _interruptible(dist, store)
    box = {}
    _fresh_group_names(dist)

    def body():
        try:
            dist.init_process_group(backend, store=wrapped, rank=rank,
                                    world_size=world, **kw)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    before = _tcp_sockets()
    t = threading.Thread(target=body, name="rdzv-elastic-init", daemon=True)
    t.start()
    while t.is_alive():
        t.join(_POLL_S)
        if t.is_alive() and restart_pending():
            t.join(_LEAVE_S)
            if t.is_alive():
                wrapped.abandoned = True
                _hang_up(before)
                raise Restart("a member of generation %d died while its "
                              "process group connected" % _gen)
    if "error" in box:
        # Not raise box["error"]: its traceback holds this frame, which
        # holds the box: a cycle that keeps the frames of
        # init_process_group alive, and with them a process group that
        # its own Restart ended after it connected (torch 1.13 meets at a
        # store barrier after that). Only the cyclic collector would free
        # it, at some later time: meanwhile its connections stay open,
        # and a peer that finished its own init waits on them in its
        # first collective until the collective timeout.
        e = box.pop("error")
        try:
            raise e
        finally:
            del e
    if restart_pending():
        raise Restart("a newer round came while generation %d met" % _gen)


def _tcp_sockets():
    """This process's sockets: {fd: inode}, from /proc/self/fd."""
    got = {}
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                got[int(fd)] = link
    except OSError:
        pass
    return got


def _hang_up(before):
    """Shuts down the connected TCP sockets opened since |before|: those
    of an init left behind. Its peers that finished their side of the
    process group wait in their first collective for this rank, over a
    connection that the init left behind keeps open; they see it close
    and leave for the new round too. (shutdown, not close: the
    descriptors stay the init's own, and none is reused under it.)"""
    for fd, link in _tcp_sockets().items():
        if before.get(fd) == link:
            continue
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.family in (socket.AF_INET, socket.AF_INET6) and \
                    s.type == socket.SOCK_STREAM:
                s.getpeername()         # connected ones only
                s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            s.close()


def _abort(dist):
    """Tears the default process group down without waiting for peers."""
    if not dist.is_initialized():
        return
    backend = str(dist.get_backend())
    if backend == "nccl":
        # NCCL's destroy is collective: abort, which is not (torch >= 2.5:
        # _abort_process_group; older: the backend's own abort()).
        abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
        try:
            if abort is not None:
                abort()
            else:
                import torch
                pg = dist.distributed_c10d._get_default_group()
                pg._get_backend(torch.device("cuda")).abort()
        except Exception as e:  # noqa: BLE001 - tear down whatever is left
            print("rdzv.elastic: abort: %s" % e, file=sys.stderr)
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001
        print("rdzv.elastic: destroy_process_group: %s" % e, file=sys.stderr)


def _abort_from_reader(dist):
    """A new round while training: break a waiting NCCL collective. (A gloo
    collective cannot be aborted; check() or a peer's exit ends it.)"""
    if _training and dist.is_initialized() and \
            str(dist.get_backend()) == "nccl":
        _abort(dist)


def run(fn, *args, backend=None, init_kwargs=None, **kwargs):
    """Runs ``fn(*args, **kwargs)`` with the default process group set up,
    again in this process after every new round (see the module's
    documentation); returns what its last call returned."""
    global _link, _gen, _training
    import torch.distributed as dist

    if backend is None:
        import torch
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    init_kwargs = dict(init_kwargs or {})
    _gen = int(os.environ.get("RDZV_GENERATION", "0") or 0)
    where = os.environ.get("RDZV_RESTART_SOCKET", "")
    if not where:
        _wait_master(time.monotonic() + 60)
        dist.init_process_group(backend, **init_kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    _link = _Link(where, int(os.environ.get("LOCAL_RANK", "0")), _gen)
    _link.on_assign = lambda: _abort_from_reader(dist)
    while True:
        failure = None
        try:
            _init(dist, backend, init_kwargs)
            _training = True
            try:
                result = fn(*args, **kwargs)
            finally:
                _training = False
            if dist.is_initialized():
                dist.destroy_process_group()
            return result
        except Restart:
            pass
        except Exception as e:  # noqa: BLE001 - any failure may be a peer's
            if not restart_pending():
                failure = "%s: %s" % (type(e).__name__, e)
                traceback.print_exc()
        _training = False
        if failure is not None:
            print("rdzv.elastic: generation %d failed (%s); waiting for the "
                  "next round" % (_gen, failure), file=sys.stderr, flush=True)
            _link.send("failed %d %s" % (_gen, failure))
        _abort(dist)
        got = _link.take(_gen)
        if got is None:
            raise SystemExit("rdzv.elastic: the agent went away")
        _gen, env = got
        os.environ.update(env)
        _link.send("took %d" % _gen)
