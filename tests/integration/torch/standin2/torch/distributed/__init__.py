"""torch.distributed, stood in for: TCPStore as one process's dict."""

import datetime
import itertools
import threading

_servers = {}
_ports = itertools.count(40000)
_lock = threading.Lock()


class Store:
    pass


class TCPStore(Store):
    """TCPStore(host_name, port, world_size=None, is_master=False,
    timeout=timedelta(seconds=300), wait_for_workers=True, ...): a server
    (is_master, port 0 picks one) or a client of one in this process."""

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=datetime.timedelta(seconds=300),
                 wait_for_workers=True, multi_tenant=False,
                 master_listen_fd=None, use_libuv=True):
        with _lock:
            if is_master:
                port = port or next(_ports)
                _servers[port] = ({}, threading.Condition())
            if port not in _servers:
                raise RuntimeError("connect to %s:%s refused" % (host_name, port))
            self._data, self._cond = _servers[port]
        self.host, self.port, self._timeout = host_name, port, timeout

    def set(self, key, value):
        with self._cond:
            self._data[key] = value if isinstance(value, bytes) else str(value).encode()
            self._cond.notify_all()

    def get(self, key):
        with self._cond:
            if not self._cond.wait_for(lambda: key in self._data,
                                       self._timeout.total_seconds()):
                raise RuntimeError("timeout waiting for %s" % key)
            return self._data[key]

    def add(self, key, n):
        with self._cond:
            v = int(self._data.get(key, b"0")) + n
            self._data[key] = str(v).encode()
            self._cond.notify_all()
            return v

    def multi_get(self, keys):
        return [self.get(k) for k in keys]

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self.set(k, v)
