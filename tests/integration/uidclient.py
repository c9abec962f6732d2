"""A client for rdzvd's unix socket that a test runs as another uid (under
setpriv): it cannot use rdzvtest, whose proto generation writes into the
build directory, so it imports the modules rdzvtest generated from their
folder, given as its first argument.

usage: uidclient.py PYDIR SOCKET OTHER_JOB OWN_JOB

Prints one JSON object: the identity rdzvd gave it, and the status code
(and message) of CloseJob and AbortJob of OTHER_JOB, a job another uid
made, and of AbortJob of OWN_JOB, which it makes by joining it.
"""

import json
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from rdzv.v1 import control_pb2 as C  # noqa: E402
from rdzv.v1 import rendezvous_pb2 as R  # noqa: E402
from rdzv.v1 import types_pb2 as T  # noqa: E402


def main():
    sock, other, own = sys.argv[2:5]
    out = {}
    with grpc.insecure_channel("unix:" + sock) as ch:
        def control(name, req, reply):
            call = ch.unary_unary("/rdzv.v1.Control/" + name,
                                  request_serializer=type(req).SerializeToString,
                                  response_deserializer=reply.FromString)
            try:
                return "OK", call(req, timeout=10)
            except grpc.RpcError as e:
                return e.code().name, e.details()

        code, info = control("ServerInfo", C.ServerInfoRequest(),
                             C.ServerInfoResponse)
        out["identity"] = info.identity if code == "OK" else code
        out["close_other"] = control("CloseJob", C.CloseJobRequest(
            rdzv_id=other), T.Job)
        out["abort_other"] = control("AbortJob", C.AbortJobRequest(
            rdzv_id=other, reason="not mine"), T.Job)
        join = ch.unary_stream("/rdzv.v1.Rendezvous/Join",
                               request_serializer=R.JoinRequest.SerializeToString,
                               response_deserializer=R.JoinEvent.FromString)
        stream = join(R.JoinRequest(
            rdzv_id=own, min_nodes=2, max_nodes=2, hostname="nobody-node",
            advertise_addr="127.0.0.1", master_port=29500, nproc=1),
            timeout=30)
        out["join_own"] = next(stream).WhichOneof("event")
        out["abort_own"] = control("AbortJob", C.AbortJobRequest(
            rdzv_id=own, reason="done"), T.Job)
        stream.cancel()
    # Messages as text: a reply is a Job, an error a string.
    print(json.dumps({k: [v[0], v[1] if isinstance(v[1], str) else ""]
                      if isinstance(v, tuple) else v
                      for k, v in out.items()}))


if __name__ == "__main__":
    main()
