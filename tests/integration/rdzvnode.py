"""Simulated agents and an operator for rdzv's end-to-end tests, with grpcio.

A Node is one agent of one job: its own channel (so its own TCP connection:
grpcio would otherwise share one connection between channels with the same
target), a Join stream read by a background thread into a list of events,
and bounded waits on that list. Closing a Node's channel closes its
connection, which is what a crashed agent looks like to rdzvd.

Control wraps the operator's unary calls on a channel of its own.
"""

import threading
import time

import grpc

import rdzvtest as rt

pb = rt.protos()
R = pb.rendezvous
C = pb.control

# Each simulated node must have its own connection (see the top of the file).
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]


def channel(addr, creds=None, options=()):
    """A channel with a connection of its own."""
    opts = CHANNEL_OPTIONS + list(options)
    if creds is None:
        return grpc.insecure_channel(addr, options=opts)
    return grpc.secure_channel(addr, creds, options=opts)


def rpc_code(fn, *args, **kw):
    """Calls fn and returns (code, details, result): OK and the result, or
    the error's code and details."""
    try:
        return grpc.StatusCode.OK, "", fn(*args, **kw)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


class Node:
    """One simulated agent (see the top of the file)."""

    def __init__(self, addr, creds=None, name="node"):
        self.addr = addr
        self.creds = creds
        self.name = name
        self.channel = None
        self.call = None
        self.events = []          # (stream number, JoinEvent), every stream
        self.ends = {}            # stream number -> (code, details)
        self.stream = 0           # the current stream's number
        self.node_id = None
        self.session_id = None
        self.rdzv_id = None
        self.settings = None
        self._cv = threading.Condition()
        self._threads = []

    # -- streams

    def _open(self):
        if self.channel is None:
            self.channel = channel(self.addr, self.creds)
        return self.channel

    def _start(self, req, timeout):
        ch = self._open()
        join = ch.unary_stream(
            "/rdzv.v1.Rendezvous/Join",
            request_serializer=R.JoinRequest.SerializeToString,
            response_deserializer=R.JoinEvent.FromString)
        with self._cv:
            self.stream += 1
            n = self.stream
        call = join(req, timeout=timeout)
        self.call = call
        t = threading.Thread(target=self._read, args=(call, n), daemon=True,
                             name="%s-stream-%d" % (self.name, n))
        self._threads.append(t)
        t.start()
        return n

    def _read(self, call, n):
        code, details = grpc.StatusCode.OK, ""
        try:
            for ev in call:
                with self._cv:
                    self.events.append((n, ev))
                    if ev.WhichOneof("event") == "accepted" and n == self.stream:
                        self.node_id = ev.accepted.node_id
                        self.session_id = ev.accepted.session_id
                        self.settings = ev.accepted.settings
                    self._cv.notify_all()
        except grpc.RpcError as e:
            code, details = e.code(), e.details() or ""
        except ValueError as e:   # the channel was closed under the iterator
            code, details = grpc.StatusCode.CANCELLED, str(e)
        with self._cv:
            self.ends[n] = (code, details)
            self._cv.notify_all()

    def join(self, rdzv_id, min_nodes=0, max_nodes=0, last_call_ms=0,
             join_timeout_ms=0, max_restarts=0, lease_ttl_ms=0,
             reconnect_grace_ms=0, hostname=None, nproc=1, rank_hint=None,
             advertise_addr="127.0.0.1", master_port=29500, role="",
             wait=True, timeout=10.0, stream_timeout=None, extra=None,
             gpus=None, rejoin_timeout_ms=None):
        """Starts a Join stream. With |wait|, waits for `accepted` and
        returns it, or raises grpc.RpcError-like RpcFailure when the stream
        ends first. |gpus|: GPU check results the node joins with, as
        types.GpuResult messages or dicts of its fields (see gpu())."""
        self.rdzv_id = rdzv_id
        req = R.JoinRequest(
            rdzv_id=rdzv_id, min_nodes=min_nodes, max_nodes=max_nodes,
            last_call_timeout_ms=last_call_ms, join_timeout_ms=join_timeout_ms,
            max_restarts=max_restarts, lease_ttl_ms=lease_ttl_ms,
            reconnect_grace_ms=reconnect_grace_ms,
            hostname=hostname if hostname is not None else self.name,
            advertise_addr=advertise_addr, master_port=master_port,
            nproc=nproc, role=role, agent_version="rdzvnode.py")
        if rank_hint is not None:
            req.has_rank_hint = True
            req.rank_hint = rank_hint
        if rejoin_timeout_ms is not None:
            req.has_rejoin_timeout = True
            req.rejoin_timeout_ms = rejoin_timeout_ms
        for g in gpus or ():
            req.gpus.append(gpu(**g) if isinstance(g, dict) else g)
        if extra:
            extra(req)
        n = self._start(req, stream_timeout)
        if wait:
            return self.wait_accepted(n, timeout)
        return n

    def resume(self, generation, timeout=10.0, new_channel=True, wait=True):
        """A Join with our session_id on a new channel (a new connection),
        saying the workers run |generation|."""
        if new_channel and self.channel is not None:
            self.channel.close()
            self.channel = None
        req = R.JoinRequest(rdzv_id=self.rdzv_id or "", session_id=self.session_id,
                            generation=generation, hostname=self.name)
        n = self._start(req, None)
        if wait:
            return self.wait_accepted(n, timeout)
        return n

    def wait_accepted(self, n=None, timeout=10.0):
        ev = self.wait_event("accepted", stream=n, timeout=timeout)
        return ev

    def end(self, n=None, timeout=10.0):
        """Waits for stream |n| (default: the current one) to end; returns
        (code, details)."""
        n = n or self.stream
        deadline = time.monotonic() + timeout
        with self._cv:
            while n not in self.ends:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%s: stream %d did not end within %.1f s; "
                                       "events: %s" % (self.name, n, timeout,
                                                       self.describe()))
                self._cv.wait(min(left, 0.1))
            return self.ends[n]

    def ended(self, n=None):
        with self._cv:
            return (n or self.stream) in self.ends

    def describe(self):
        with self._cv:
            parts = []
            for n, ev in self.events:
                k = ev.WhichOneof("event")
                parts.append("#%d %s{%s}" % (n, k, str(getattr(ev, k)).replace("\n", " ").strip()))
            for n, e in sorted(self.ends.items()):
                parts.append("#%d end %s %r" % (n, e[0].name, e[1]))
            return "; ".join(parts) or "(none)"

    def wait_event(self, kind, pred=None, timeout=10.0, stream=None, start=0):
        """Waits for an event of |kind| ("accepted", "assignment", ...) on
        stream |stream| (default: the current one), at or after index
        |start| of self.events, for which pred(payload) is true; returns the
        payload. Raises RpcFailure when the stream ends first, TimeoutError
        after |timeout| seconds."""
        deadline = time.monotonic() + timeout
        with self._cv:
            n = stream or self.stream
            i = start
            while True:
                while i < len(self.events):
                    sn, ev = self.events[i]
                    i += 1
                    if sn != n or ev.WhichOneof("event") != kind:
                        continue
                    payload = getattr(ev, kind)
                    if pred is None or pred(payload):
                        return payload
                if n in self.ends:
                    raise RpcFailure(self.ends[n][0], self.ends[n][1],
                                     "%s: stream %d ended while waiting for %s; events: %s"
                                     % (self.name, n, kind, self.describe()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%s: no %s within %.1f s; events: %s"
                                       % (self.name, kind, timeout, self.describe()))
                self._cv.wait(min(left, 0.1))

    def wait_assignment(self, generation=None, after=None, timeout=10.0):
        """The first assignment of |generation|, or of a generation above
        |after|, or any."""
        def pred(a):
            if generation is not None:
                return a.generation == generation
            if after is not None:
                return a.generation > after
            return True
        return self.wait_event("assignment", pred, timeout)

    def mark(self):
        """An index for wait_event(start=...): events after now only."""
        with self._cv:
            return len(self.events)

    def kinds(self, n=None):
        with self._cv:
            n = n or self.stream
            return [ev.WhichOneof("event") for sn, ev in self.events if sn == n]

    def assignments(self):
        """Every assignment received, on any stream."""
        with self._cv:
            return [ev.assignment for _, ev in self.events
                    if ev.WhichOneof("event") == "assignment"]

    # -- unary calls

    def _unary(self, method, req_type, resp_type):
        return self._open().unary_unary(
            "/rdzv.v1.Rendezvous/" + method,
            request_serializer=req_type.SerializeToString,
            response_deserializer=resp_type.FromString)

    def report(self, generation, outcome="FAILED", exits=(), message="",
               session_id=None, timeout=10.0, gpus=None, nproc=0,
               master_port=0, cause=""):
        """Report(outcome) for |generation|; outcome is SUCCEEDED, FAILED or
        UPDATE. exits: (local_rank, exit_code, signal) tuples; gpus as for
        join(); nproc and master_port for UPDATE; cause "hang" for FAILED."""
        req = R.ReportRequest(
            session_id=self.session_id if session_id is None else session_id,
            generation=generation,
            outcome=R.Outcome.Value("OUTCOME_" + outcome),
            message=message, nproc=nproc, master_port=master_port,
            cause=cause)
        for g in gpus or ():
            req.gpus.append(gpu(**g) if isinstance(g, dict) else g)
        for lr, code, sig in exits:
            req.exits.add(local_rank=lr, exit_code=code, signal=sig)
        return self._unary("Report", R.ReportRequest, R.ReportResponse)(req, timeout=timeout)

    def progress(self, generation, step, session_id=None, timeout=10.0):
        """Progress: the node's workers of |generation| reached |step|."""
        req = R.ProgressRequest(
            session_id=self.session_id if session_id is None else session_id,
            generation=generation, step=step)
        return self._unary("Progress", R.ProgressRequest,
                           R.ProgressResponse)(req, timeout=timeout)

    def leave(self, reason="test", session_id=None, timeout=10.0):
        req = R.LeaveRequest(
            session_id=self.session_id if session_id is None else session_id,
            reason=reason)
        return self._unary("Leave", R.LeaveRequest, R.LeaveResponse)(req, timeout=timeout)

    def close(self):
        """Closes the channel: the stream is cancelled and the connection
        closed, as when the agent dies."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def gpu(device, ok=True, name="NVIDIA H100 80GB HBM3", uuid=None,
        failed_step="", error="", total_mem=85899345920):
    """A GpuResult for a simulated node: healthy unless failed_step/error
    say otherwise; uuid defaults to one derived from the device number."""
    return pb.types.GpuResult(
        device=device, ok=ok, name=name,
        uuid=uuid if uuid is not None else "GPU-%08x-0000-4000-8000-%012x" % (device, device),
        failed_step=failed_step, error=error, total_mem=total_mem)


class RpcFailure(Exception):
    """A Join stream ended where an event was expected."""

    def __init__(self, code, details, text):
        super().__init__(text)
        self.code_ = code
        self.details_ = details

    def code(self):
        return self.code_

    def details(self):
        return self.details_


class Control:
    """The operator's calls (rdzv.v1.Control) on a channel of its own."""

    def __init__(self, addr, creds=None):
        self.channel = channel(addr, creds)

    def _unary(self, method, req, resp_type, timeout):
        call = self.channel.unary_unary(
            "/rdzv.v1.Control/" + method,
            request_serializer=type(req).SerializeToString,
            response_deserializer=resp_type.FromString)
        return call(req, timeout=timeout)

    def list_jobs(self, all=False, timeout=10.0, page_size=0):
        """Every job, page after page (ListJobs is paged)."""
        jobs, token = [], ""
        for _ in range(100000):
            r = self._unary("ListJobs", C.ListJobsRequest(
                all=all, page_size=page_size, page_token=token),
                C.ListJobsResponse, timeout)
            jobs.extend(r.jobs)
            token = r.next_page_token
            if not token:
                return jobs
        raise AssertionError("ListJobs did not end")

    def get_job(self, rdzv_id, events=10, timeout=10.0):
        return self._unary("GetJob", C.GetJobRequest(rdzv_id=rdzv_id, events=events),
                           pb.types.Job, timeout)

    def close_job(self, rdzv_id, timeout=10.0):
        return self._unary("CloseJob", C.CloseJobRequest(rdzv_id=rdzv_id),
                           pb.types.Job, timeout)

    def abort_job(self, rdzv_id, reason="", timeout=10.0):
        return self._unary("AbortJob", C.AbortJobRequest(rdzv_id=rdzv_id, reason=reason),
                           pb.types.Job, timeout)

    def evict_node(self, rdzv_id, node_id, reason="", timeout=10.0):
        return self._unary("EvictNode", C.EvictNodeRequest(
            rdzv_id=rdzv_id, node_id=node_id, reason=reason), pb.types.Job, timeout)

    def list_events(self, rdzv_id, after_seq=0, limit=0, timeout=10.0):
        return self._unary("ListEvents", C.ListEventsRequest(
            rdzv_id=rdzv_id, after_seq=after_seq, limit=limit),
            C.ListEventsResponse, timeout).events

    def server_info(self, timeout=10.0):
        return self._unary("ServerInfo", C.ServerInfoRequest(),
                           C.ServerInfoResponse, timeout)

    def list_hosts(self, state=0, timeout=10.0):
        """{name: Host} of the hosts rdzvd remembers (docs/HEALTH.md)."""
        hosts = self._unary("ListHosts", C.ListHostsRequest(state=state),
                            C.ListHostsResponse, timeout).hosts
        return {h.name: h for h in hosts}

    def set_host(self, host, state, reason="", timeout=10.0):
        return self._unary("SetHost", C.SetHostRequest(
            host=host, state=state, reason=reason), pb.types.Host, timeout)

    def watch(self, rdzv_id="", all=False, timeout=30.0):
        """A Watch stream; iterate it for WatchEvents."""
        call = self.channel.unary_stream(
            "/rdzv.v1.Control/Watch",
            request_serializer=C.WatchRequest.SerializeToString,
            response_deserializer=C.WatchEvent.FromString)
        return call(C.WatchRequest(rdzv_id=rdzv_id, all=all), timeout=timeout)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stream_reader(it):
    """Reads a server stream in a thread; returns (items, cv, state) where
    state['end'] becomes the final code."""
    items, cv, state = [], threading.Condition(), {}

    def run():
        code = grpc.StatusCode.OK
        try:
            for x in it:
                with cv:
                    items.append(x)
                    cv.notify_all()
        except grpc.RpcError as e:
            code = e.code()
        except ValueError:
            code = grpc.StatusCode.CANCELLED
        with cv:
            state["end"] = code
            cv.notify_all()
    threading.Thread(target=run, daemon=True).start()
    return items, cv, state


def wait_item(items, cv, state, pred, timeout, what="item"):
    """Waits for an item of a stream_reader for which pred is true."""
    deadline = time.monotonic() + timeout
    i = 0
    with cv:
        while True:
            while i < len(items):
                if pred(items[i]):
                    return items[i]
                i += 1
            if "end" in state:
                raise RpcFailure(state["end"], "", "stream ended waiting for " + what)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %s within %.1f s (%d items)" % (what, timeout, len(items)))
            cv.wait(min(left, 0.1))
