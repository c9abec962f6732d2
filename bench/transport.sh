#!/bin/sh
# Transport benchmark: starts a private rdzvd on a free loopback port and a
# temporary database, runs grpc-bench against it in three shapes (1
# connection with 1 and 32 calls in flight, 64 connections) and prints a
# table. Builds nothing: build first (ninja -C BUILD_DIR).
#
#   bench/transport.sh [BUILD_DIR] [SECONDS_PER_CASE]
#
# BUILD_DIR defaults to build, SECONDS_PER_CASE to 3. Every wait is bounded;
# rdzvd is stopped with SIGTERM and its directory removed on any exit.

set -eu

build=${1:-build}
secs=${2:-3}
bench=$build/bench/grpc-bench

. "$(dirname "$0")/rdzvd.sh"
start_rdzvd transport.sh "$build" "$bench"

# One case: prints a table row from grpc-bench's "name: value" lines.
run_case() {
	label=$1
	shift
	if ! timeout $((secs + 60)) "$bench" --server "$addr" \
	    --server-pid "$pid" --seconds "$secs" "$@" >"$tmp/out" \
	    2>"$tmp/err"; then
		printf '%-22s failed: %s\n' "$label" "$(tail -n 1 "$tmp/err")"
		return 0
	fi
	awk -v label="$label" -F ':[ \t]+' '
		{ v[$1] = $2 }
		END {
			sub(/ us$/, "", v["latency mean"])
			sub(/ us$/, "", v["latency p50"])
			sub(/ us$/, "", v["latency p99"])
			sub(/ us$/, "", v["server cpu/call"])
			printf "%-22s %10s %10s %8s %8s %12s\n", label,
			    v["calls/s"], v["latency mean"], v["latency p50"],
			    v["latency p99"], v["server cpu/call"]
		}' "$tmp/out"
}

echo "rdzvd $addr (pid $pid), $secs s per case, Health/Check unary calls"
printf '%-22s %10s %10s %8s %8s %12s\n' case calls/s "mean us" "p50 us" \
    "p99 us" "srv cpu us"
run_case "1 conn, 1 in flight" --conns 1 --inflight 1
run_case "1 conn, 32 in flight" --conns 1 --inflight 32
run_case "64 conns, 1 in flight" --conns 64 --inflight 1
