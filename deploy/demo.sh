#!/bin/bash
# The demo (README, Quick start): installs what is missing and builds rdzv,
# starts rdzvd on its embedded defaults (127.0.0.1:29400, its default
# database), then three rdzv-agent processes on this machine, as if on three
# nodes, with 2, 1 and 1 workers: one PyTorch DDP job (gloo on CPU,
# deploy/demo/train.py) in a world of 4. While it trains it shows
# the address of rdzvd's status page and `rdzvctl status` (when rdzvctl is
# built); it waits for the job to close,
# stops rdzvd, and removes what it made. It gives up after two minutes.
#
# Settings for tests (environment): RDZV_BUILD, the build directory (default
# build); RDZV_DEMO_NO_BUILD=1, use that build as it is; RDZV_DEMO_LISTEN and
# RDZV_DEMO_DB, another address and database than rdzvd's defaults;
# RDZV_DEMO_HTTP_LISTEN, another address for the status page than
# 127.0.0.1:29401. When something already listens on 29401 (another rdzvd,
# another demo), the status page takes a free port, and the demo prints
# where it is as soon as rdzvd is ready.
set -eu
cd "$(dirname "$0")/.."

build=${RDZV_BUILD:-build}
if [ -z "${RDZV_DEMO_NO_BUILD:-}" ]; then
	deploy/install-deps.sh demo
fi
rdzvd=$build/daemon/rdzvd
agent=$build/client/agent/rdzv-agent
ctl=$build/client/ctl/rdzvctl
for p in "$rdzvd" "$agent"; do
	if [ ! -x "$p" ]; then
		echo "demo: $p is not built; run deploy/install-deps.sh" >&2
		exit 1
	fi
done
if ! /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then
	echo "demo: PyTorch is missing; deploy/install-deps.sh demo installs" \
	    "python3-torch" >&2
	exit 1
fi

server=${RDZV_DEMO_LISTEN:-127.0.0.1:29400}
dargs=()
[ -n "${RDZV_DEMO_LISTEN:-}" ] && dargs+=(--listen "$RDZV_DEMO_LISTEN")
[ -n "${RDZV_DEMO_DB:-}" ] && dargs+=(--db "$RDZV_DEMO_DB")
if [ -n "${RDZV_DEMO_HTTP_LISTEN:-}" ]; then
	dargs+=(--http-listen "$RDZV_DEMO_HTTP_LISTEN")
elif (exec 3<>/dev/tcp/127.0.0.1/29401) 2>/dev/null; then
	echo "demo: port 29401 is taken; the status page gets a free port" >&2
	dargs+=(--http-listen 127.0.0.1:0)
fi
db=$("$rdzvd" "${dargs[@]}" --check-config | sed -n 's/^db = //p')
job=demo-$(date +%Y%m%d-%H%M%S)
work=$(mktemp -d /tmp/rdzv-demo.XXXXXX)
deadline=$((SECONDS + 120))
dpid=""
apids=()

bold="" plain=""
if [ -t 1 ]; then
	bold=$(printf '\033[1m') plain=$(printf '\033[0m')
fi
say() {
	printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"
}

# Leaves nothing behind: agents and rdzvd still running are stopped (their
# workers die with their agent), the database is removed if the demo made
# it, and the scratch directory goes.
made_db=""
made_dir=""
[ -e "$db" ] || made_db=1
[ -d "$(dirname "$db")" ] || made_dir=1
cleanup() {
	trap - EXIT INT TERM
	for p in "${apids[@]}" $dpid; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${apids[@]}" $dpid; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
	done
	if [ -n "$made_db" ]; then
		rm -f "$db" "$db-wal" "$db-shm" "$db.lock"
		[ -z "$made_dir" ] || rmdir "$(dirname "$db")" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits (at most until the demo's deadline) for a line matching $2 in file
# $1; fails if process $3 is given and exits first.
wait_line() {
	until grep -q -- "$2" "$1" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			echo "demo: gave up waiting for '$2'" >&2
			return 1
		fi
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
}

say "rdzvd on ${server}, database $db"
"$rdzvd" "${dargs[@]}" 2> >(tee "$work/rdzvd.log" | sed -u 's/^/rdzvd | /') &
dpid=$!
if ! wait_line "$work/rdzvd.log" "ready" "$dpid"; then
	echo "demo: rdzvd did not start (is another rdzvd using $server?)" >&2
	exit 1
fi
status_page() {
	sed -n 's/.*serving HTTP on [^ ]*: status page \([^,]*\),.*/\1/p' \
	    "$work/rdzvd.log" | head -n 1
}
page=$(status_page)
if [ -n "$page" ]; then
	say "status page: ${page}#job=$job"
fi

say "three agents join job $job: node0 with 2 workers, node1 and node2 with 1"
# Each agent would run on its own node, started by the batch system
# (srun --ntasks-per-node=1 rdzv-agent join ...); here they share this
# machine. --node-rank orders them as a scheduler's node index would.
touch "$work/agents.log"
node=0
for nproc in 2 1 1; do
	name=node$node
	"$agent" join --id "$job" --server "$server" --nnodes 3 \
	    --nproc-per-node $nproc --node-rank $node --last-call 10s \
	    --join-timeout 60s --stop-timeout 5s --tee --log-dir "$work/$name" \
	    -- /usr/bin/python3 deploy/demo/train.py \
	    > >(sed -u "s/^/$name | /" | tee -a "$work/agents.log") 2>&1 &
	apids+=($!)
	node=$((node + 1))
done

# Once the job trains, the operator's view: the status page (live in a
# browser while the job trains) and rdzvctl.
if wait_line "$work/agents.log" "epoch  3/"; then
	if [ -n "$page" ]; then
		say "status page: ${page}#job=$job (open it while the job trains;" \
		    "metrics at ${page}metrics)"
	else
		say "(rdzvd serves no status page: see its log above)"
	fi
	if [ -x "$ctl" ]; then
		say "rdzvctl status (while it trains)"
		"$ctl" --server "$server" status || true
		say "rdzvctl status $job"
		"$ctl" --server "$server" status "$job" || true
	else
		say "($ctl is not built: no rdzvctl status)"
	fi
fi

# Every agent exits when the job has ended: 0 when it closed.
for p in "${apids[@]}"; do
	while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
		sleep 0.2
	done
done
failed=0
node=0
for p in "${apids[@]}"; do
	if kill -0 "$p" 2>/dev/null; then
		echo "demo: node$node's agent is still running after two minutes" >&2
		failed=1
	elif wait "$p"; then
		:
	else
		echo "demo: node$node's agent exited $?" >&2
		failed=1
	fi
	node=$((node + 1))
done
apids=()
if [ $failed -eq 0 ]; then
	say "every agent exited 0: the job succeeded"
	if [ -x "$ctl" ]; then
		"$ctl" --server "$server" status "$job" || true
	fi
fi

say "stopping rdzvd"
kill -TERM "$dpid"
for _ in $(seq 100); do
	kill -0 "$dpid" 2>/dev/null || break
	sleep 0.1
done
if wait "$dpid"; then
	dpid=""
else
	echo "demo: rdzvd exited $?" >&2
	dpid=""
	failed=1
fi

# What rdzvd wrote to its database (sqlite3 from Python's standard library;
# docs/STORE.md has more queries).
/usr/bin/python3 - "$db" "$job" <<'PY' || failed=1
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
row = db.execute("SELECT state, generation, restart_count, reason FROM jobs "
                 "WHERE rdzv_id = ?", (sys.argv[2],)).fetchone()
if row is None:
    sys.exit("demo: job %s is not in the database" % sys.argv[2])
print("\nthe database says: job %s %s, generation %d, %d restarts (%s)"
      % (sys.argv[2], row[0], row[1], row[2], row[3]))
sys.exit(0 if row[0] == "closed" else 1)
PY

if [ $failed -ne 0 ]; then
	say "the demo failed; see the messages above"
	exit 1
fi
say "done: three agents, one job, a world of 4 workers, closed"
