"""torchrun's rendezvous backend `rdzv`: `--rdzv-backend rdzv
--rdzv-endpoint rdzvd-host:29400` (docs/TORCHRUN.md).

The handler joins rdzvd through `rdzv-agent coproc` (rdzv.coproc), which
keeps the node's lease, so rdzvd decides the rounds: torch's group rank and
world size are rdzv's node rank and node count of the round. The store torch
gets is a TCPStore hosted by the round's group rank 0 on the port it
offered, new each round (pytorch#135712).

torch 2.6+ finds the backend through the entry point `torchrun.handlers`
(rdzv = rdzv.torchrun:handler); on torch 1.13, `python3 -m rdzv.torchrun
ARGS...` registers it and runs torch.distributed.run with ARGS.
"""

import atexit
import datetime
import logging
import os
import re
import socket
import sys
import time

_STARTED = time.time()  # before torch's import: bench/torchrun_bench.py's phases

from torch.distributed.elastic.rendezvous import (RendezvousClosedError,
                                                  RendezvousError,
                                                  RendezvousHandler,
                                                  RendezvousParameters)
from torch.distributed.elastic.rendezvous import api as rdzv_api

from rdzv.coproc import Coproc

log = logging.getLogger(__name__)

BACKEND = "rdzv"
DEFAULT_PORT = 29400

# --rdzv-conf keys that become rdzv-agent coproc options; durations are
# seconds as torch's are (a unit suffix also works: 500ms, 2m).
AGENT_KEYS = {
    "join_timeout": "--join-timeout",
    "last_call_timeout": "--last-call",
    "rejoin_timeout": "--rejoin-timeout",
    "lease_ttl": "--lease-ttl",
    "reconnect_grace": "--reconnect-grace",
    "reconnect_timeout": "--reconnect-timeout",
    "connect_timeout": "--connect-timeout",
    "node_rank": "--node-rank",
    "attempt": "--attempt",
    "advertise_addr": "--advertise-addr",
    "master_port": "--master-port",
    "tls_ca": "--tls-ca",
    "tls_cert": "--tls-cert",
    "tls_key": "--tls-key",
    "tls_server_name": "--tls-server-name",
    "log_level": "--log-level",
}
# Keys the handler itself reads, with their defaults.
HANDLER_KEYS = {
    "nproc_per_node": None,     # default: torchrun's --nproc-per-node
    "max_restarts": None,       # default: torchrun's --max-restarts
    "close_timeout": 30.0,      # s a successful node waits for the close
    "store_timeout": 300.0,     # s, the round's TCPStore operations
    "failure_grace": 2.0,       # s for rdzvd's news before a failure report
}
# What torch's own backends take that means nothing here.
IGNORED_KEYS = {"timeout", "read_timeout", "keep_alive_interval",
                "keep_alive_max_heartbeats", "is_host", "rank", "local_addr"}


def _phase(name, t=None):
    """With RDZV_BENCH_PHASES set (bench/torchrun_bench.py), the wall
    time of a phase of this torchrun's first start, in its environment,
    which its workers inherit and report."""
    if os.environ.get("RDZV_BENCH_PHASES"):
        os.environ.setdefault("RDZV_PHASE_" + name,
                              "%.6f" % (time.time() if t is None else t))


def _torchrun_args():
    """torchrun's own arguments (nproc_per_node, max_restarts) from this
    process's command line when it is torchrun's, else None. torch gives a
    rendezvous handler neither."""
    try:
        from torch.distributed.run import get_args_parser
        parser = get_args_parser()

        def error(msg):
            raise ValueError(msg)
        parser.error = error
        args, _ = parser.parse_known_args(sys.argv[1:])
        return args
    except (ValueError, SystemExit, ImportError):
        return None


def _local_world_size(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        pass
    from torch.distributed.run import determine_local_world_size
    return determine_local_world_size(value)


def _seconds(v, key):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError("--rdzv-conf %s=%r: expected seconds" % (key, v))


class RdzvRendezvousHandler(RendezvousHandler):
    """A node of job |params.run_id| on rdzvd. The coprocess starts at the
    first next_rendezvous(), so building a handler costs nothing."""

    def __init__(self, params):
        self._run_id = params.run_id
        conf = dict(params.config)
        targs = _torchrun_args()
        nproc = conf.pop("nproc_per_node", None)
        if nproc is None:
            nproc = targs.nproc_per_node if targs is not None else 1
        max_restarts = conf.pop("max_restarts", None)
        if max_restarts is None:
            max_restarts = targs.max_restarts if targs is not None else 0
        self.nproc = _local_world_size(nproc)
        self.max_restarts = int(max_restarts)
        self.close_timeout = _seconds(conf.pop("close_timeout", 30), "close_timeout")
        self.store_timeout = _seconds(conf.pop("store_timeout", 300), "store_timeout")
        self.failure_grace = _seconds(conf.pop("failure_grace", 2), "failure_grace")
        args = ["--id", params.run_id,
                "--nnodes", "%d:%d" % (params.min_nodes, params.max_nodes),
                "--nproc-per-node", str(self.nproc),
                "--max-restarts", str(self.max_restarts)]
        endpoint = (params.endpoint or "").strip()
        if endpoint:
            args += ["--server", self._servers(endpoint)]
        local_addr = getattr(params, "local_addr", None)   # torch 2.x
        if local_addr and "advertise_addr" not in conf:
            args += ["--advertise-addr", local_addr]
        for key, value in sorted(conf.items()):
            if key in AGENT_KEYS:
                args += [AGENT_KEYS[key], str(value)]
            elif key not in IGNORED_KEYS:
                raise ValueError("--rdzv-conf %s: not a setting of the rdzv "
                                 "backend; see docs/TORCHRUN.md" % key)
        self.args = args
        self._coproc = None
        self._handed = None     # the assignment torch has now
        self._tcp = None        # its store, hosted or reached
        self._reported = set()  # (outcome, generation) sent
        self._closed = False

    @staticmethod
    def _servers(endpoint):
        """torch's HOST[:PORT] (rdzv's: a comma-separated list), with
        rdzvd's port where none is given."""
        out = []
        for s in (x.strip() for x in endpoint.split(",")):
            if s.startswith("unix:") or re.fullmatch(r"(\[.*\]|[^:]*):\d+", s):
                out.append(s)
            elif s.startswith("["):
                out.append("%s:%d" % (s, DEFAULT_PORT))
            elif ":" in s:
                out.append("[%s]:%d" % (s, DEFAULT_PORT))     # a bare IPv6
            else:
                out.append("%s:%d" % (s, DEFAULT_PORT))
        return ",".join(out)

    # -- RendezvousHandler

    def get_backend(self):
        return BACKEND

    def get_run_id(self):
        return self._run_id

    @property
    def use_agent_store(self):
        """torch 2.4+: workers reach the round's TCPStore as clients at
        MASTER_ADDR:MASTER_PORT (bootstrap_store_info)."""
        return True

    def next_rendezvous(self):
        _phase("rendezvous")
        c = self._start()
        if self._handed is not None:
            self._maybe_report_failure(c)
        after = self._handed["generation"] if self._handed else 0
        while True:
            kind, a = c.wait(lambda: (c.ended and ("ended", c.ended)) or (
                c.latest and c.latest["generation"] > after and ("round", c.latest)))
            if kind == "ended":
                self._ended(a)
            store = self._round_store(c, a)
            if store is not None:
                break
            after = a["generation"]     # a newer round came meanwhile
        self._handed = a
        _phase("joined", c.joined_at)
        _phase("assigned", c.assigned_at)
        _phase("store")
        log.info("generation %d: node %d of %d, store %s:%d %s",
                 a["generation"], a["group_rank"], a["group_world_size"],
                 a["master_addr"], a["master_port"],
                 "hosted here" if a["group_rank"] == 0 else "reached")
        os.environ["RDZV_GENERATION"] = str(a["generation"])
        os.environ["RDZV_RESTART_COUNT"] = str(a["restart_count"])
        rank, world = a["group_rank"], a["group_world_size"]
        info = getattr(rdzv_api, "RendezvousInfo", None)
        store_info = getattr(rdzv_api, "RendezvousStoreInfo", None)
        if info is not None and store_info is not None:     # torch >= 2.4
            return info(store, rank, world,
                        store_info(a["master_addr"], a["master_port"]))
        return store, rank, world

    def is_closed(self):
        if self._closed:
            return True
        c = self._coproc
        return c is not None and c.ended is not None

    def set_closed(self):
        """Closes the job on rdzvd: no new rounds, the running workers
        finish (rdzvctl close)."""
        c = self._start()
        with c.cond:
            c.close_reply = None
        c.send(cmd="close")
        r = c.wait(lambda: c.close_reply or c.ended, 15)
        if r is not None and r.get("event") == "closed" and not r.get("ok"):
            raise RendezvousError("closing job %s: %s" % (self._run_id, r.get("message")))
        self._closed = True

    def num_nodes_waiting(self):
        """Non-zero when rdzvd has a newer round for this node, stopped the
        current one, or failed the job: torch then restarts its workers
        and asks next_rendezvous()."""
        c, h = self._coproc, self._handed
        if c is None or h is None:
            return 0
        with c.cond:
            if c.latest is not None and c.latest["generation"] > h["generation"]:
                return 1
            if c.stopped >= h["generation"]:
                return 1
            if c.ended is not None and c.ended.get("status") != 0:
                return 1
        return 0

    def shutdown(self):
        """Leaves the job, unless this node's workers succeeded: then it
        waits (close_timeout) for the job to close, which keeps the
        round's store up for the other nodes' exit barrier."""
        c = self._coproc
        if c is None:
            return True
        h = self._handed
        if h is not None and ("succeeded", h["generation"]) in self._reported:
            c.wait(lambda: c.ended, self.close_timeout)
        if c.ended is None:
            c.send(cmd="leave", reason="torchrun on %s is done" % socket.gethostname())
            c.wait(lambda: c.ended or c.p.poll() is not None, 10)
        c.finish(10)
        self._tcp = None
        return True

    # -- the rest

    def _start(self):
        if self._coproc is None:
            self._coproc = Coproc(self.args)
            _phase("coproc")
            atexit.register(self._at_exit)
        return self._coproc

    def _at_exit(self):
        """torchrun stopped by a signal skips shutdown() (it would close a
        c10d rendezvous for good); leaving is what a signal means here, so
        the others' next round is a planned change, not a lost node."""
        c = self._coproc
        if c is None or c.p.poll() is not None or c.ended is not None:
            return
        c.send(cmd="leave", reason="torchrun on %s is exiting" % socket.gethostname())
        c.wait(lambda: c.ended or c.p.poll() is not None, 5)
        c.finish(5)

    def _ended(self, ev):
        msg = "job %s: %s" % (self._run_id, ev.get("message", ""))
        if ev.get("status") == 0:
            raise RendezvousClosedError(msg)
        raise RendezvousError(msg)

    def _maybe_report_failure(self, c):
        """torch asks again with no news from rdzvd: its workers failed.
        rdzvd's news (a newer round, a stop, the end) may be on its way,
        since a lost peer also fails the workers; it gets failure_grace."""
        g = self._handed["generation"]
        news = c.wait(lambda: c.ended or c.stopped >= g or
                      c.latest["generation"] > g, self.failure_grace)
        if news or ("failed", g) in self._reported:
            return
        self.report("failed", "the workers of %s failed" % socket.gethostname())

    def report(self, outcome, message=""):
        """Reports the outcome of this node's workers in the current
        generation to rdzvd ("succeeded" or "failed"), once."""
        if self._handed is None or self._coproc is None:
            return
        g = self._handed["generation"]
        if (outcome, g) in self._reported:
            return
        self._reported.add((outcome, g))
        self._coproc.send(cmd="report", generation=g, outcome=outcome,
                          message=message[:200])

    def _round_store(self, c, a):
        """The store of round |a|: hosted here when this node is group rank
        0, else reached as a client. None when a newer round came while
        waiting for the host."""
        from torch.distributed import PrefixStore, TCPStore
        self._tcp = None    # the previous round's; its port may come back
        timeout = datetime.timedelta(seconds=self.store_timeout)
        addr, port = a["master_addr"], a["master_port"]
        if a["group_rank"] == 0:
            try:
                tcp = TCPStore(addr, port, is_master=True, timeout=timeout,
                               wait_for_workers=False)
            except (RuntimeError, OSError) as e:
                if "Address already in use" not in str(e):
                    raise RendezvousError("generation %d: cannot host the round's "
                                          "store on port %d: %s" % (a["generation"], port, e))
                # Taken after all (docs/AGENT.md, "The master port"): the
                # agent offers a new port and rdzvd re-rounds without
                # counting a restart; the loop above waits for that round.
                log.warning("generation %d: master port %d is taken on this "
                            "host; asking for a new round on another port",
                            a["generation"], port)
                c.send(cmd="port_taken", generation=a["generation"])
                return None
        else:
            tcp = None
            while tcp is None:
                try:
                    # Every node hears of the round at once, the host too:
                    # a TCPStore client that finds no listener yet sleeps
                    # a second before it tries again (torch 1.13), so it
                    # is made once a plain connect succeeds, tried every
                    # few milliseconds.
                    if not _listening(addr, port):
                        raise OSError("not yet listening")
                    tcp = TCPStore(addr, port, is_master=False,
                                   timeout=datetime.timedelta(seconds=5))
                except (RuntimeError, OSError):     # 1.13: TimeoutError
                    with c.cond:
                        if c.ended is not None:
                            self._ended(c.ended)
                        if c.latest["generation"] > a["generation"]:
                            return None
                    time.sleep(0.005)
            tcp.set_timeout(timeout)
        self._tcp = tcp
        return PrefixStore("rdzv/%s/%d/" % (self._run_id, a["generation"]), tcp)


def _listening(addr, port):
    """Whether something accepts connections at addr:port now."""
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """The creator torch's registry calls for --rdzv-backend rdzv."""
    _watch_outcomes()
    return RdzvRendezvousHandler(params)


def handler():
    """The `torchrun.handlers` entry point: a factory of the creator."""
    return create_handler


def register():
    """Registers the backend with torch's registry (torch 1.13 has no
    entry points); registering twice is harmless."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry
    try:
        rendezvous_handler_registry.register(BACKEND, create_handler)
    except ValueError:
        pass    # already there


def _watch_outcomes():
    """torch tells a rendezvous handler nothing of its workers' outcome;
    its agent's exit barrier, which it runs once they all ended, is where
    it is known. The handler reports it there, before the barrier."""
    from torch.distributed.elastic.agent.server import api
    agent = getattr(api, "SimpleElasticAgent", None)
    barrier = getattr(agent, "_exit_barrier", None)
    if barrier is None or getattr(barrier, "_rdzv", False):
        return

    def _exit_barrier(self, *args, **kwargs):
        group = getattr(self, "_worker_group", None)
        h = getattr(getattr(group, "spec", None), "rdzv_handler", None)
        if isinstance(h, RdzvRendezvousHandler):
            state = getattr(group.state, "name", str(group.state))
            if state == "SUCCEEDED":
                h.report("succeeded")
            elif state in ("FAILED", "UNHEALTHY"):
                h.report("failed", "the workers of %s failed with no restart "
                         "left on this node" % socket.gethostname())
        return barrier(self, *args, **kwargs)
    _exit_barrier._rdzv = True
    agent._exit_barrier = _exit_barrier


# -- the launcher for torch 1.13 --------------------------------------------

def _repair_std():
    """torch 1.13 on Python 3.11: Std.from_str("0") is None (iterating an
    IntFlag skips zero and alias members), and torch.distributed.run
    crashes at its --redirects/--tee defaults. Std(int(v)) is right."""
    from torch.distributed.elastic.multiprocessing import api as mp_api
    std = mp_api.Std
    if std.from_str("0") is not None:
        return

    def from_str(cls, vm):
        if re.fullmatch(r"\d", vm):
            return cls(int(vm))
        if re.fullmatch(r"(\d:\d)(,\d:\d)*", vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError("%s does not match: <0-3> or <local_rank>:<0-3>,..." % vm)
    std.from_str = classmethod(from_str)


def _underscore_flags(argv, parser):
    """torch 1.13's torch.distributed.run takes --nproc_per_node, not
    torch 2.x's --nproc-per-node: the launcher takes both, up to the
    training script."""
    takes = {}
    for action in parser._actions:
        for s in action.option_strings:
            takes[s] = action.nargs != 0
    out = list(argv)
    i = 0
    while i < len(out):
        tok = out[i]
        if tok == "--" or not tok.startswith("-"):
            break
        name, eq, value = tok.partition("=")
        if name.startswith("--") and name not in takes:
            alt = "--" + name[2:].replace("-", "_")
            if alt in takes:
                name = alt
                out[i] = name + eq + value
        i += 1
        if takes.get(name) and not eq:
            i += 1      # its value
    return out


def main(argv=None, started=None):
    """`python3 -m rdzv.torchrun ARGS...`: torch.distributed.run with ARGS
    and the rdzv backend registered."""
    from torch.distributed import run
    _phase("started", started or _STARTED)
    _phase("imported")
    argv = list(sys.argv[1:] if argv is None else argv)
    _repair_std()
    register()
    argv = _underscore_flags(argv, run.get_args_parser())
    # The handler reads --nproc_per_node and --max_restarts from here.
    sys.argv = [sys.argv[0]] + argv
    run.main(argv)


if __name__ == "__main__":
    # The package's module, not a second copy of it as __main__: torch's
    # registry and the exit barrier's hook must see one handler class.
    from rdzv.torchrun import main as _main
    _main(started=_STARTED)     # this copy's: before torch was imported
