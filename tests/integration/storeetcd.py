"""What an rdzvd etcd store holds, read from outside with etcdctl and the
messages of proto/rdzv/store/v1/store.proto (docs/STORE.md, "The etcd
layout"), for tests that check it as test_crash.py checks the SQLite
tables.

    s = storeetcd.read(etcd, "/rdzv")
    s.jobs       {rdzv_id: Job}
    s.rounds     {(rdzv_id, generation): [Round, ...]} (as many as recorded)
    s.orphans    keys of versions no job record names (an interrupted turn)
"""

import base64
import fcntl
import json
import os
import subprocess
import sys

import rdzvtest as rt

PROTO = "rdzv/store/v1/store.proto"


def pb():
    """The generated module of store.proto (into the build directory)."""
    out = rt.build_path("tests", "py-store")
    os.makedirs(out, exist_ok=True)
    src = os.path.join(rt.SOURCE_ROOT, "proto", PROTO)
    stamp = os.path.join(out, ".stamp")
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(stamp) or os.path.getmtime(stamp) < os.path.getmtime(src):
            subprocess.run([sys.executable, "-m", "grpc_tools.protoc",
                            "-I", os.path.join(rt.SOURCE_ROOT, "proto"),
                            "--python_out=" + out, src], check=True)
            open(stamp, "w").close()
    if out not in sys.path:
        sys.path.insert(0, out)
    from rdzv.store.v1 import store_pb2
    return store_pb2


def kvs(etcd, prefix):
    """[(key, value bytes)] under |prefix|, in key order."""
    out = etcd.ctl("get", "--prefix", prefix, "-w", "json")
    res = json.loads(out)
    return [(base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")))
            for kv in res.get("kvs", [])]


class Store:
    def __init__(self):
        self.jobs = {}
        self.rounds = {}
        self.orphans = []


def read(etcd, prefix):
    P = pb()
    s = Store()
    for k, v in kvs(etcd, prefix + "/job/"):
        j = P.Job()
        j.ParseFromString(v)
        s.jobs[j.rdzv_id] = j
    for k, v in kvs(etcd, prefix + "/log/"):
        rid, wver, _chunk = k[len(prefix) + 5:].split("/")
        j = s.jobs.get(rid)
        if j is None or int(wver, 16) > j.wver:
            s.orphans.append(k)
            continue
        log = P.Log()
        log.ParseFromString(v)
        for r in log.rounds:
            s.rounds.setdefault((rid, r.generation), []).append(r)
    return s
