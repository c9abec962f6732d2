"""gRPC server reflection (SPEC §15) seen from a generic client: grpcio with
the reflection messages compiled by grpc_tools at test time, and
google.protobuf's descriptor pool to rebuild rdzv's messages from what
rdzvd sends, as grpcurl does. No test here reads rdzv's .proto files.
"""

import fcntl
import importlib.util
import os
import subprocess
import sys

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import rdzvtest as rt

VERSIONS = ("v1", "v1alpha")
SERVICES = {"rdzv.v1.Rendezvous", "rdzv.v1.Control", "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"}
NOT_FOUND, INVALID_ARGUMENT = 5, 3


def reflection_modules():
    """The reflection protos compiled by grpc_tools into the build folder,
    loaded from their files (a package named grpc would shadow grpcio).
    v1alpha's file is the one the build makes from v1's."""
    out = rt.build_path("tests", "py-reflection")
    os.makedirs(out, exist_ok=True)
    srcs = ["grpc/reflection/%s/reflection.proto" % v for v in VERSIONS]
    mods = {}
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc",
                        "-I", os.path.join(rt.SOURCE_ROOT, "proto"),
                        "-I", rt.build_path("proto"),
                        "--python_out=" + out] + srcs, check=True)
        for v in VERSIONS:
            name = "rdzv_reflection_%s_pb2" % v
            if name not in sys.modules:
                spec = importlib.util.spec_from_file_location(name, os.path.join(
                    out, "grpc", "reflection", v, "reflection_pb2.py"))
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                sys.modules[name] = mod
            mods[v] = sys.modules[name]
    return mods


R = reflection_modules()


@pytest.fixture(scope="module")
def rdzvd(tmp_path_factory):
    with rt.Daemon(tmp_path_factory.mktemp("refl")) as d:
        yield d
        assert d.stop(15) == 0, d.output()


def ask(ch, version, *requests, timeout=10):
    """The answers to |requests|, asked in order on one stream."""
    pb = R[version]
    call = ch.stream_stream(
        "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version,
        request_serializer=pb.ServerReflectionRequest.SerializeToString,
        response_deserializer=pb.ServerReflectionResponse.FromString)
    return list(call(iter(requests), timeout=timeout))


def files_of(resp):
    assert resp.WhichOneof("message_response") == "file_descriptor_response", resp
    return [descriptor_pb2.FileDescriptorProto.FromString(b)
            for b in resp.file_descriptor_response.file_descriptor_proto]


def test_messages_match_grpcs_reflection_proto():
    """The field names and numbers of grpc/grpc's
    src/proto/grpc/reflection/v1/reflection.proto (v1alpha's are the
    same), which every reflection client is built from."""
    want = {
        "ServerReflectionRequest": {
            "host": 1, "file_by_filename": 3, "file_containing_symbol": 4,
            "file_containing_extension": 5,
            "all_extension_numbers_of_type": 6, "list_services": 7},
        "ExtensionRequest": {"containing_type": 1, "extension_number": 2},
        "ServerReflectionResponse": {
            "valid_host": 1, "original_request": 2,
            "file_descriptor_response": 4,
            "all_extension_numbers_response": 5,
            "list_services_response": 6, "error_response": 7},
        "FileDescriptorResponse": {"file_descriptor_proto": 1},
        "ExtensionNumberResponse": {"base_type_name": 1, "extension_number": 2},
        "ListServiceResponse": {"service": 1},
        "ServiceResponse": {"name": 1},
        "ErrorResponse": {"error_code": 1, "error_message": 2},
    }
    for v in VERSIONS:
        for msg, fields in want.items():
            d = R[v].DESCRIPTOR.message_types_by_name[msg]
            assert {f.name: f.number for f in d.fields} == fields, (v, msg)
        svc = R[v].DESCRIPTOR.services_by_name["ServerReflection"]
        m = svc.methods_by_name["ServerReflectionInfo"]
        assert m.client_streaming and m.server_streaming


@pytest.mark.parametrize("version", VERSIONS)
def test_list_services_and_resolve_each(rdzvd, version):
    pb = R[version]
    with grpc.insecure_channel(rdzvd.addr) as ch:
        (resp,) = ask(ch, version, pb.ServerReflectionRequest(list_services=""))
        assert resp.WhichOneof("message_response") == "list_services_response"
        names = [s.name for s in resp.list_services_response.service]
        assert set(names) == SERVICES and len(names) == len(SERVICES)
        assert resp.original_request.WhichOneof("message_request") == \
            "list_services"
        # Every service listed is described by the file that defines it.
        answers = ask(ch, version, *[
            pb.ServerReflectionRequest(file_containing_symbol=n) for n in names])
        for name, a in zip(names, answers):
            fd = files_of(a)[0]
            assert name == fd.package + "." + name.rsplit(".", 1)[1]
            assert name.rsplit(".", 1)[1] in [s.name for s in fd.service]


@pytest.mark.parametrize("version", VERSIONS)
def test_symbol_and_file(rdzvd, version):
    pb = R[version]
    Q = pb.ServerReflectionRequest
    with grpc.insecure_channel(rdzvd.addr) as ch:
        by_symbol, by_file, method, field, enum = ask(
            ch, version,
            Q(file_containing_symbol="rdzv.v1.JoinRequest", host="h"),
            Q(file_by_filename="rdzv/v1/types.proto"),
            Q(file_containing_symbol="rdzv.v1.Control.Watch"),
            Q(file_containing_symbol="rdzv.v1.JoinRequest.hostname"),
            Q(file_containing_symbol="grpc.health.v1.HealthCheckResponse."
                                     "ServingStatus"))
        fds = files_of(by_symbol)
        assert fds[0].name == "rdzv/v1/rendezvous.proto"
        assert "JoinRequest" in [m.name for m in fds[0].message_type]
        # With what it imports: the answer stands on its own.
        assert [f.name for f in fds[1:]] == list(fds[0].dependency) == \
            ["rdzv/v1/types.proto"]
        assert by_symbol.original_request.file_containing_symbol == \
            "rdzv.v1.JoinRequest"
        assert by_symbol.valid_host == "h"
        (types,) = files_of(by_file)
        assert types.name == "rdzv/v1/types.proto" and types.package == "rdzv.v1"
        assert files_of(method)[0].name == "rdzv/v1/control.proto"
        assert files_of(field)[0].name == "rdzv/v1/rendezvous.proto"
        assert files_of(enum)[0].name == "grpc/health/v1/health.proto"


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_names_and_extensions(rdzvd, version):
    """Errors are answers: the stream goes on after them."""
    pb = R[version]
    Q = pb.ServerReflectionRequest
    with grpc.insecure_channel(rdzvd.addr) as ch:
        answers = ask(
            ch, version,
            Q(file_containing_symbol="rdzv.v1.NoSuchThing"),
            Q(file_by_filename="rdzv/v1/nope.proto"),
            Q(file_containing_extension=pb.ExtensionRequest(
                containing_type="rdzv.v1.Job", extension_number=100)),
            Q(all_extension_numbers_of_type="rdzv.v1.Job"),
            Q(all_extension_numbers_of_type="rdzv.v1.Nope"),
            Q(),
            Q(file_containing_symbol="x" * 5000),
            Q(file_containing_symbol="rdzv.v1.Job"))
        kinds = [a.WhichOneof("message_response") for a in answers]
        assert kinds == ["error_response"] * 3 + \
            ["all_extension_numbers_response"] + ["error_response"] * 3 + \
            ["file_descriptor_response"], kinds
        errs = [a.error_response for a in answers if a.HasField("error_response")]
        assert [e.error_code for e in errs] == \
            [NOT_FOUND] * 4 + [INVALID_ARGUMENT, NOT_FOUND]
        assert "rdzv.v1.NoSuchThing" in errs[0].error_message
        assert "rdzv/v1/nope.proto" in errs[1].error_message
        ext = answers[3].all_extension_numbers_response
        assert ext.base_type_name == "rdzv.v1.Job" and not ext.extension_number
        assert answers[6].original_request.file_containing_symbol == "x" * 5000


@pytest.mark.parametrize("version", VERSIONS)
def test_oversized_questions_are_invalid(rdzvd, version):
    """A host of 3 MiB (every answer repeats it twice, which no message
    could hold): INVALID_ARGUMENT naming the problem, not INTERNAL; rdzvd
    serves on, and a host of 255 bytes is answered."""
    Q = R[version].ServerReflectionRequest
    with grpc.insecure_channel(rdzvd.addr) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            ask(ch, version, Q(list_services="", host="h" * (3 << 20)))
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
        assert "host is 3145728 bytes" in ei.value.details(), ei.value.details()
        answers = ask(ch, version, Q(list_services="", host="h" * 255))
        assert answers[0].valid_host == "h" * 255


def test_many_questions_on_one_stream(rdzvd):
    pb = R["v1"]
    names = ["rdzv.v1.JoinRequest", "rdzv.v1.Job", "rdzv.v1.Nope"] * 100
    with grpc.insecure_channel(rdzvd.addr) as ch:
        answers = ask(ch, "v1", *[pb.ServerReflectionRequest(
            file_containing_symbol=n) for n in names], timeout=30)
    assert [a.original_request.file_containing_symbol for a in answers] == names
    assert [a.WhichOneof("message_response") for a in answers] == \
        (["file_descriptor_response"] * 2 + ["error_response"]) * 100


def test_questions_wait_for_a_slow_reader(rdzvd):
    """A client that asks 400 questions at once and reads nothing for a
    while (its HTTP/2 window stays at 64 KiB) is answered in full once it
    reads: the questions behind the connection's output cap (1 MiB) wait
    for room instead of ending the stream (as on a busy machine, where a
    real client reads slower than rdzvd answers)."""
    import struct
    import time
    from h2raw import (DATA, END_STREAM, HEADERS, WINDOW_UPDATE, frame,
                       h2_open, has_grpc_status, hpack_literal, read_frames)
    pb = R["v1"]
    names = ["rdzv.v1.JoinRequest", "rdzv.v1.Job", "rdzv.v1.Nope",
             "rdzv.v1.Control"] * 100
    body = b"".join(
        struct.pack(">BI", 0, len(m)) + m for m in
        (pb.ServerReflectionRequest(file_containing_symbol=n)
         .SerializeToString() for n in names))
    s = h2_open(rdzvd.addr)
    try:
        hdrs = hpack_literal([
            (":method", "POST"), (":scheme", "http"),
            (":path", "/grpc.reflection.v1.ServerReflection/"
             "ServerReflectionInfo"), (":authority", "localhost"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        out = frame(HEADERS, 0x4, 1, hdrs)
        for i in range(0, len(body), 16384):
            chunk = body[i:i + 16384]
            out += frame(DATA, END_STREAM if i + 16384 >= len(body) else 0,
                         1, chunk)
        s.sendall(out)
        # Nothing read for a moment: rdzvd holds what the window refuses.
        time.sleep(1.0)
        s.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)) +
                  frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 30)))
        # The window opened above holds every answer: read to the end.
        frames, _ = read_frames(s, lambda fs: any(
            f[0] == HEADERS and f[2] == 1 and f[1] & END_STREAM
            for f in fs), timeout=60)
    finally:
        s.close()
    data = b"".join(f[3] for f in frames if f[0] == DATA and f[2] == 1)
    trailers = next((f[3] for f in frames if f[0] == HEADERS and
                     f[2] == 1 and f[1] & END_STREAM), None)
    assert trailers is not None, "no end of the stream within 60 s"
    answers = []
    while data:
        n = struct.unpack(">I", data[1:5])[0]
        answers.append(pb.ServerReflectionResponse.FromString(data[5:5 + n]))
        data = data[5 + n:]
    assert has_grpc_status(trailers, 0), (len(answers), trailers)
    total = sum(a.ByteSize() for a in answers)
    assert total > (1 << 20) + 65535, total     # more than the cap holds
    assert [a.original_request.file_containing_symbol for a in answers] \
        == names


def test_describe_and_call_without_protos(rdzvd):
    """What grpcurl does: fetch the file of a service, rebuild its messages
    from the descriptors alone and call a method with them."""
    pb = R["v1"]
    pool = descriptor_pool.DescriptorPool()
    with grpc.insecure_channel(rdzvd.addr) as ch:
        (resp,) = ask(ch, "v1", pb.ServerReflectionRequest(
            file_containing_symbol="rdzv.v1.Control"))
        for fd in reversed(files_of(resp)):
            pool.Add(fd)
        control = pool.FindServiceByName("rdzv.v1.Control")
        watch = control.methods_by_name["Watch"]
        assert watch.server_streaming and not watch.client_streaming
        job = pool.FindMessageTypeByName("rdzv.v1.Job")
        assert "rdzv_id" in job.fields_by_name

        info = control.methods_by_name["ServerInfo"]
        factory = message_factory.MessageFactory(pool)
        Req = factory.GetPrototype(info.input_type)
        Rep = factory.GetPrototype(info.output_type)
        call = ch.unary_unary("/rdzv.v1.Control/ServerInfo",
                              request_serializer=Req.SerializeToString,
                              response_deserializer=Rep.FromString)
        rep = call(Req(), timeout=5)
        assert rep.pid == rdzvd.pid and rep.identity == "anonymous"


def test_client_that_does_not_read_is_cut_off(rdzvd):
    """Questions asked much faster than their answers are read: once the
    connection's output is full and 1024 more questions wait for room, the
    call ends with RESOURCE_EXHAUSTED instead of holding every answer."""
    import struct
    from h2raw import (DATA, END_STREAM, HEADERS, WINDOW_UPDATE, frame,
                       grpc_request, has_grpc_status, raw_connect,
                       read_frames, PREFACE, SETTINGS)
    pb = R["v1"]
    q = pb.ServerReflectionRequest(
        file_containing_symbol="rdzv.v1.Control").SerializeToString()
    body = (struct.pack(">BI", 0, len(q)) + q) * 3000
    s = raw_connect(rdzvd.addr, rcvbuf=4096)
    # HTTP/2 flow control lets everything through: only the socket holds
    # the answers back.
    big = (1 << 31) - 1
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, big)) +
              frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", big - 65535)) +
              grpc_request(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        pb.ServerReflectionRequest(), whole=False))
    for i in range(0, len(body), 16384):
        last = i + 16384 >= len(body)
        s.sendall(frame(DATA, END_STREAM if last else 0, 1, body[i:i + 16384]))
    frames, _ = read_frames(
        s, lambda fs: any(f[0] == HEADERS and f[2] == 1 and f[1] & END_STREAM
                          for f in fs), timeout=30)
    s.close()
    mine = [f for f in frames if f[2] == 1]
    trailers = [f for f in mine if f[0] == HEADERS and f[1] & END_STREAM]
    assert has_grpc_status(trailers[0][3], 8), trailers
    data = b"".join(f[3] for f in mine if f[0] == DATA)
    answers = 0
    while len(data) >= 5:
        data = data[5 + struct.unpack(">I", data[1:5])[0]:]
        answers += 1
    assert answers < 3000 - 1024, answers
    with grpc.insecure_channel(rdzvd.addr) as ch:
        (resp,) = ask(ch, "v1", pb.ServerReflectionRequest(list_services=""))
        assert len(resp.list_services_response.service) == len(SERVICES)
