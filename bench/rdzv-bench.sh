#!/bin/sh
# Runs rdzv-bench against a private rdzvd: starts rdzvd on a free loopback
# port and a temporary database, raises the open-file limit for both (one
# descriptor per simulated node on each side), runs rdzv-bench with the
# options given and prints its figures. Builds nothing: build first
# (ninja -C BUILD_DIR).
#
#   bench/rdzv-bench.sh [BUILD_DIR] [--addrs K] [RDZV_BENCH_OPTIONS...]
#
# BUILD_DIR defaults to build. --addrs K makes rdzvd listen on 127.0.0.1 to
# 127.0.0.K and spreads the nodes over them (more source ports than one
# address gives). Without options: 1,000 nodes join one job. Examples:
#
#   bench/rdzv-bench.sh build --nodes 10000
#   bench/rdzv-bench.sh build --nodes 8 --jobs 1000
#   bench/rdzv-bench.sh build --nodes 1000 --kill 100 --grace 500ms
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
bench=$build/bench/rdzv-bench

. "$(dirname "$0")/rdzvd.sh"
start_rdzvd rdzv-bench.sh "$build" "$bench"

echo "rdzvd $servers(pid $pid); rdzv-bench $*"
# shellcheck disable=SC2086 # $servers is a list of options
if ! timeout 600 "$bench" $servers --daemon-pid "$pid" --timeout 300 "$@"
then
	echo "rdzv-bench.sh: rdzv-bench failed; rdzvd's log ends:" >&2
	tail -n 20 "$tmp/rdzvd.log" >&2
	exit 1
fi
