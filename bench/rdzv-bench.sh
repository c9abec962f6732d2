#!/bin/sh
# Runs rdzv-bench against a private rdzvd: starts rdzvd on a free loopback
# port and a temporary database, raises the open-file limit for both (one
# descriptor per simulated node on each side), runs rdzv-bench with the
# options given and prints its figures. Builds nothing: build first
# (ninja -C BUILD_DIR).
#
#   bench/rdzv-bench.sh [BUILD_DIR] [--addrs K] [--store sqlite|etcd|both]
#                       [RDZV_BENCH_OPTIONS...]
#
# BUILD_DIR defaults to build. --addrs K makes rdzvd listen on 127.0.0.1 to
# 127.0.0.K and spreads the nodes over them (more source ports than one
# address gives). --store etcd runs rdzvd on a private one-member etcd
# (Debian's etcd-server) instead of SQLite; --store both runs the same bench
# on SQLite, then on etcd, and prints the figures side by side. Each run
# ends with rdzvd's store line: its transactions and the bytes written (of
# its Txns on etcd, of its pages on SQLite). Without options: 1,000 nodes join one job. Examples:
#
#   bench/rdzv-bench.sh build --nodes 10000
#   bench/rdzv-bench.sh build --nodes 8 --jobs 1000
#   bench/rdzv-bench.sh build --store both --nodes 10000
#   bench/rdzv-bench.sh build --nodes 1000 --kill 100 --grace 500ms
#
# RDZV_BENCH_PERF="SUBCOMMAND OPTIONS" attaches perf to rdzvd for the run,
# e.g. "record -e cpu-clock -g -o FILE" (a profile without hardware
# counters) or "stat -e syscalls:sys_enter_* -o FILE" (system calls).
#
# Every wait is bounded; rdzvd is stopped and its directory removed on any
# exit.

set -eu

build=build
case ${1:-} in
-*|'') ;;
*) build=$1; shift ;;
esac
listen_addrs=1
if [ "${1:-}" = --addrs ]; then
	listen_addrs=${2:?--addrs needs a count}
	shift 2
fi
stores=sqlite
if [ "${1:-}" = --store ]; then
	stores=${2:?--store needs sqlite, etcd or both}
	shift 2
fi
case $stores in
sqlite|etcd) ;;
both) stores="sqlite etcd" ;;
*) echo "rdzv-bench.sh: --store $stores: sqlite, etcd or both" >&2; exit 2 ;;
esac
bench=$build/bench/rdzv-bench

. "$(dirname "$0")/rdzvd.sh"

# One run on one store; its output in $out_dir/STORE.
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-bench-out.XXXXXX")
trap 'stop_rdzvd; rm -rf "$out_dir"' EXIT
run_one() {
	rdzvd_store=$1
	shift
	start_rdzvd rdzv-bench.sh "$build" "$bench"
	trap 'stop_rdzvd; rm -rf "$out_dir"' EXIT
	echo "rdzvd on $rdzvd_store $servers(pid $pid); rdzv-bench $*"
	perf_pid=
	if [ -n "${RDZV_BENCH_PERF:-}" ]; then
		# perf attached to rdzvd for the whole run.
		# shellcheck disable=SC2086 # perf's subcommand and options
		perf $RDZV_BENCH_PERF -p "$pid" 2>/dev/null &
		perf_pid=$!
		sleep 0.5
	fi
	# shellcheck disable=SC2086 # $servers is a list of options
	if ! timeout 600 "$bench" $servers --daemon-pid "$pid" --timeout 300 \
	    "$@" >"$out_dir/$rdzvd_store"; then
		cat "$out_dir/$rdzvd_store"
		echo "rdzv-bench.sh: rdzv-bench failed; rdzvd's log ends:" >&2
		tail -n 20 "$tmp/rdzvd.log" >&2
		exit 1
	fi
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" || true
	fi
	stop_rdzvd
	echo "rdzvd: $store_line" >"$out_dir/$rdzvd_store.store"
}

for s in $stores; do
	run_one "$s" "$@"
done
if [ "$stores" = "sqlite etcd" ]; then
	# Side by side: each figure of the SQLite run, then the etcd run's.
	printf '%-36s %-28s %s\n' "" sqlite etcd
	paste -d '\t' "$out_dir/sqlite" "$out_dir/etcd" | awk -F '\t' '{
		i = index($1, ":"); j = index($2, ":")
		ka = substr($1, 1, i); va = substr($1, i + 1)
		kb = substr($2, 1, j); vb = substr($2, j + 1)
		sub(/^ +/, "", va); sub(/^ +/, "", vb)
		if (i > 0 && ka == kb)
			printf "%-36s %-28s %s\n", ka, va, vb
		else
			printf "%s | %s\n", $1, $2
	}'
	cat "$out_dir/sqlite.store" "$out_dir/etcd.store"
else
	cat "$out_dir/$stores" "$out_dir/$stores.store"
fi
