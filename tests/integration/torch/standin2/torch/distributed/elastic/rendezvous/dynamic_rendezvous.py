"""DynamicRendezvousHandler with torch 2.x's from_backend() signature:
local_addr comes before timeout. The node's description is a dataclass
ordered by (fqdn, pid, local_id), and ranks come from sorting the
participants of the state as the backend holds it (pickled, so every
node's description is a copy), as in torch: a RendezvousTimeout passed
where local_addr is becomes the address, two copies of it are unequal, and
the sort fails as on torch 2.11 ("'<' not supported between instances of
'RendezvousTimeout' and 'RendezvousTimeout'")."""

import dataclasses
import datetime
import itertools
import os
import pickle
import socket
import threading

from .api import RendezvousInfo, RendezvousStoreInfo


class RendezvousTimeout:
    """Not orderable, as torch's is not."""

    def __init__(self, join=None, last_call=None, close=None, heartbeat=None):
        self.join = join or datetime.timedelta(seconds=600)
        self.last_call = last_call
        self.close = close
        self.heartbeat = heartbeat


@dataclasses.dataclass(eq=True, order=True, frozen=True)
class _NodeDesc:
    addr: str
    pid: int
    local_id: int


_ids = itertools.count()
_rounds = {}
_lock = threading.Condition()


class DynamicRendezvousHandler:
    @classmethod
    def from_backend(cls, run_id, store, backend, min_nodes, max_nodes,
                     local_addr=None, timeout=None, keep_alive_interval=5,
                     keep_alive_max_attempt=3):
        node = _NodeDesc(local_addr or socket.getfqdn(), os.getpid(), next(_ids))
        return cls(node, run_id, store, max_nodes, timeout or RendezvousTimeout())

    def __init__(self, node, run_id, store, max_nodes, timeout):
        self._node, self._run_id, self._store = node, run_id, store
        self._max, self._timeout = max_nodes, timeout

    def next_rendezvous(self):
        with _lock:
            nodes = _rounds.setdefault(self._run_id, [])
            nodes.append(pickle.loads(pickle.dumps(self._node)))
            _lock.notify_all()
            if not _lock.wait_for(lambda: len(nodes) >= self._max,
                                  self._timeout.join.total_seconds()):
                raise RuntimeError("RendezvousTimeoutError")
            rank = [(n.pid, n.local_id) for n in sorted(nodes)].index(
                (self._node.pid, self._node.local_id))
        return RendezvousInfo(self._store, rank, len(nodes),
                              RendezvousStoreInfo("127.0.0.1", self._store.port))
