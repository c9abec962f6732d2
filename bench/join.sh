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
bench=$build/bench/rdzv-join-bench

. "$(dirname "$0")/rdzvd.sh"
start_rdzvd join.sh "$build" "$bench"

echo "rdzvd $addr (pid $pid), $nodes agents joining one job (min = max = $nodes)"
if ! timeout 300 "$bench" --server "$addr" --daemon-pid "$pid" \
    --nodes "$nodes" --timeout 240; then
	echo "join.sh: rdzv-join-bench failed; rdzvd's log ends:" >&2
	tail -n 20 "$tmp/rdzvd.log" >&2
	exit 1
fi
