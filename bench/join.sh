#!/bin/sh
# Rendezvous benchmark: starts a private rdzvd on a free loopback port and a
# temporary database, lets N simulated agents (default 1000) join one job
# with rdzv-join-bench and prints its figures: last join to last assignment,
# first connect to last assignment, the daemon's CPU time and the SQLite
# transactions it committed. Builds nothing: build first (ninja -C BUILD_DIR).
#
#   bench/join.sh [BUILD_DIR] [NODES]
#
# BUILD_DIR defaults to build, NODES to 1000. Every wait is bounded; rdzvd is
# stopped with SIGTERM and its directory removed on any exit.

set -eu

build=${1:-build}
nodes=${2:-1000}
rdzvd=$build/daemon/rdzvd
bench=$build/bench/rdzv-join-bench

for prog in "$rdzvd" "$bench"; do
	if [ ! -x "$prog" ]; then
		echo "join.sh: $prog not found; build first (ninja -C $build)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-join-bench.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		# Up to 10 s for a graceful stop, then SIGKILL.
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# rdzvd holds one descriptor per agent: give it the hard limit.
ulimit -n "$(ulimit -H -n)" 2>/dev/null || true

"$rdzvd" --listen 127.0.0.1:0 --db "$tmp/rdzv.db" 2>"$tmp/rdzvd.log" &
pid=$!

# Wait up to 10 s for "listening on 127.0.0.1:PORT".
addr=
i=0
while [ $i -lt 100 ]; do
	addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$tmp/rdzvd.log" |
	    head -n 1)
	[ -n "$addr" ] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "join.sh: rdzvd exited:" >&2
		cat "$tmp/rdzvd.log" >&2
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done
if [ -z "$addr" ]; then
	echo "join.sh: rdzvd did not listen within 10 s:" >&2
	cat "$tmp/rdzvd.log" >&2
	exit 1
fi

echo "rdzvd $addr (pid $pid), $nodes agents joining one job (min = max = $nodes)"
if ! timeout 300 "$bench" --server "$addr" --daemon-pid "$pid" \
    --nodes "$nodes" --timeout 240; then
	echo "join.sh: rdzv-join-bench failed; rdzvd's log ends:" >&2
	tail -n 20 "$tmp/rdzvd.log" >&2
	exit 1
fi
