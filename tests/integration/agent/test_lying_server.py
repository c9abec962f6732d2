"""rdzv-agent does not trust the server's numbers (issue 12, defect 5). A
fake rdzvd written here with grpcio answers the agent's Join with an
assignment that cannot be right for what the agent offered: more workers
than it offered, ranks outside the world, a group rank outside the group,
a master port past 65535, a master address longer than the agent can pass
on, a generation that goes back. The agent must refuse it as a protocol error
(exit 6, naming what was wrong) without starting a worker for it."""

import concurrent.futures
import glob
import os
import queue
import threading

import grpc
import pytest

import rdzvnode
import rdzvtest as rt

AGENT = rt.build_path("client", "agent", "rdzv-agent")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
R = rdzvnode.R
T = rdzvnode.pb.types
EXIT_PROTOCOL = 6   # exitcodes.h


def assignment(**kw):
    a = dict(rdzv_id="liar", generation=1, group_rank=0, group_world_size=1,
             base_rank=0, local_world_size=1, world_size=1,
             master_addr="127.0.0.1", master_port=29500)
    a.update(kw)
    return R.JoinEvent(assignment=T.Assignment(**a))


class LyingServer:
    """rdzv.v1.Rendezvous (and Health, which the agent asks first) on a
    free loopback port: Join answers Accepted,
    then the events of |script|, then holds the stream until the test
    ends; Report and Leave answer OK."""

    def __init__(self, script):
        self.script = script
        self.joins = queue.Queue()
        self.done = threading.Event()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(8))
        handlers = {
            "Join": grpc.unary_stream_rpc_method_handler(
                self.join, request_deserializer=R.JoinRequest.FromString,
                response_serializer=R.JoinEvent.SerializeToString),
            "Report": grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: R.ReportResponse(),
                request_deserializer=R.ReportRequest.FromString,
                response_serializer=R.ReportResponse.SerializeToString),
            "Leave": grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: R.LeaveResponse(),
                request_deserializer=R.LeaveRequest.FromString,
                response_serializer=R.LeaveResponse.SerializeToString),
        }
        H = rdzvnode.pb.health
        health = {"Check": grpc.unary_unary_rpc_method_handler(
            lambda req, ctx: H.HealthCheckResponse(
                status=H.HealthCheckResponse.SERVING),
            request_deserializer=H.HealthCheckRequest.FromString,
            response_serializer=H.HealthCheckResponse.SerializeToString)}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("rdzv.v1.Rendezvous", handlers),
             grpc.method_handlers_generic_handler("grpc.health.v1.Health", health)))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def join(self, req, ctx):
        self.joins.put(req)
        yield R.JoinEvent(accepted=R.Accepted(
            node_id=1, session_id=b"s" * 16, attempt=1,
            settings=T.JobSettings(min_nodes=1, max_nodes=1,
                                   last_call_timeout_ms=1000,
                                   join_timeout_ms=60000, lease_ttl_ms=15000,
                                   reconnect_grace_ms=3000)))
        for ev in self.script:
            yield ev
        self.done.wait(30)

    def stop(self):
        self.done.set()
        self.server.stop(0)


CASES = {
    "too_many_workers": ([assignment(local_world_size=40, world_size=40)],
                         "40 workers"),
    "ranks_past_the_world": ([assignment(base_rank=3, world_size=2)],
                             "world"),
    "group_rank_outside_the_group": ([assignment(group_rank=2, group_world_size=2,
                                                 world_size=2)],
                                     "group"),
    "master_port_past_65535": ([assignment(master_port=70000)],
                               "master port 70000 is not a TCP port"),
    "master_port_zero": ([assignment(master_port=0)], "master port 0"),
    "master_addr_too_long": ([assignment(master_addr="m" * 300)],
                             "master address of 300 bytes"),
    "master_addr_empty": ([assignment(master_addr="")],
                          "master address of 0 bytes"),
    "generation_goes_back": ([assignment(generation=5),
                              assignment(generation=4)],
                             "generation 4"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_impossible_assignment_is_a_protocol_error(tmp_path, case):
    script, needle = CASES[case]
    srv = LyingServer(script)
    out = str(tmp_path / "out")
    os.makedirs(out)
    try:
        env = {"W_OUT": out, "W_MODE": "sleep", "W_STOP": str(tmp_path / "stop"),
               "TMPDIR": str(tmp_path)}
        with rt.Proc([AGENT, "join", "--id", "liar", "--server",
                      "127.0.0.1:%d" % srv.port, "--nproc-per-node", "1",
                      "--stop-timeout", "2s", "--", "/usr/bin/python3", WORKER],
                     env=env) as p:
            rc = p.wait(30)
            out_text = p.output()
        assert rc == EXIT_PROTOCOL, out_text
        assert "protocol error" in out_text and needle in out_text, out_text
        started = glob.glob(os.path.join(out, "env-g*-r*.json"))
        if case == "generation_goes_back":
            # Generation 5 was sound and ran; 4 never did.
            assert all("-g5-" in f for f in started), started
        else:
            assert started == [], started
    finally:
        srv.stop()
