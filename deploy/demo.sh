#!/bin/sh
# The demo: builds rdzv, starts rdzvd on its embedded defaults
# (127.0.0.1:29400, the default database location), and runs one job's
# rendezvous on it. Until rdzv-agent exists the three agents are simulated
# with a standard gRPC client (Debian's python3-grpcio).
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
# Three agents with 2, 1 and 1 workers join one job; each gets its place,
# reports success, and the job closes. (Simulated agents over Debian's
# grpcio until rdzv-agent exists.)
import sys, time
sys.path.insert(0, "tests/integration")
import rdzvnode
addr = "127.0.0.1:29400"
ctl = rdzvnode.Control(addr)
info = ctl.server_info()
print("rdzvd %s, database %s, you are %s" % (info.version, info.database, info.identity))
job = "demo-%d" % int(time.time())
nodes = [rdzvnode.Node(addr, name="node%d" % i) for i in range(3)]
for i, (n, nproc) in enumerate(zip(nodes, (2, 1, 1))):
    n.join(job, min_nodes=3, max_nodes=3, nproc=nproc, rank_hint=i,
           last_call_ms=1000)
    print("node%d joined with %d workers" % (i, nproc))
for n in nodes:
    a = n.wait_assignment(timeout=10)
    print("%s: generation %d, group rank %d of %d, ranks %d..%d of %d, master %s:%d"
          % (n.name, a.generation, a.group_rank, a.group_world_size, a.base_rank,
             a.base_rank + a.local_world_size - 1, a.world_size, a.master_addr,
             a.master_port))
for n in nodes:
    n.report(a.generation, "SUCCEEDED")
for n in nodes:
    n.wait_event("closed", timeout=10)
j = ctl.get_job(job, events=20)
print("job %s: %s" % (job, rdzvnode.pb.types.JobState.Name(j.state)))
for e in j.events:
    print("  %-10s %s" % (e.kind, e.message))
for n in nodes:
    n.close()
PY
kill -TERM $pid
wait $pid
trap - EXIT INT TERM
tail -2 "$log"
rm -f "$log"
