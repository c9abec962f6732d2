#!/bin/sh
# The demo: builds rdzv, starts rdzvd on its embedded defaults
# (127.0.0.1:29400, the default database location) and talks to it.
# Until rdzv-agent exists this shows the daemon's health and server info
# through a standard gRPC client (Debian's python3-grpcio).
set -eu
cd "$(dirname "$0")/.."
deploy/install-deps.sh demo

build=${RDZV_BUILD:-build}
log=$(mktemp /tmp/rdzvd-demo.XXXXXX.log)
"$build/daemon/rdzvd" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT INT TERM

# Wait (bounded) until it is ready.
i=0
until grep -q "ready" "$log"; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
		cat "$log" >&2
		echo "demo: rdzvd did not start" >&2
		exit 1
	fi
	sleep 0.1
done
cat "$log"

RDZV_BUILD_ROOT="$PWD/$build" /usr/bin/python3 - <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import grpc
import rdzvtest
pb = rdzvtest.protos()
with grpc.insecure_channel("127.0.0.1:29400") as ch:
    check = ch.unary_unary("/grpc.health.v1.Health/Check",
        request_serializer=pb.health.HealthCheckRequest.SerializeToString,
        response_deserializer=pb.health.HealthCheckResponse.FromString)
    info = ch.unary_unary("/rdzv.v1.Control/ServerInfo",
        request_serializer=pb.control.ServerInfoRequest.SerializeToString,
        response_deserializer=pb.control.ServerInfoResponse.FromString)
    h = check(pb.health.HealthCheckRequest(), timeout=5)
    print("health:", pb.health.HealthCheckResponse.ServingStatus.Name(h.status))
    i = info(pb.control.ServerInfoRequest(), timeout=5)
    print("server: rdzvd %s, pid %d, database %s, you are %s" %
          (i.version, i.pid, i.database, i.identity))
    print("listening:", ", ".join(i.listeners))
PY
kill -TERM $pid
wait $pid
trap - EXIT INT TERM
tail -2 "$log"
rm -f "$log"
