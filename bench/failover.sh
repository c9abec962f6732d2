#!/bin/sh
# The failover figure of SPEC §14: two rdzvd replicas on a private
# one-member etcd (Debian's etcd-server), N simulated nodes (rdzv-bench, one
# connection each) joined on the leader; the leader is killed (SIGKILL) and
# the figure is the time until every node has resumed its session on the
# new leader. The target: within the leader lease and 2 s more. Builds
# nothing: build first (ninja -C BUILD_DIR).
#
#   bench/failover.sh [BUILD_DIR] [--lease DURATION] [RDZV_BENCH_OPTIONS...]
#
# BUILD_DIR defaults to build, the lease (leader-lease) to 5s; without
# options 1,000 nodes join one job. Every wait is bounded; the replicas and
# etcd are killed and their directory removed on any exit.

set -eu

build=build
case ${1:-} in
-*|'') ;;
*) build=$1; shift ;;
esac
lease=5s
if [ "${1:-}" = --lease ]; then
	lease=${2:?--lease needs a duration}
	shift 2
fi
bench=$build/bench/rdzv-bench
for prog in "$build/daemon/rdzvd" "$bench"; do
	if [ ! -x "$prog" ]; then
		echo "failover.sh: $prog not found; build first (ninja -C $build)" >&2
		exit 1
	fi
done

. "$(dirname "$0")/rdzvd.sh"

pids=
cleanup() {
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	stop_etcd
	[ -z "$tmp" ] || rm -rf "$tmp"
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-failover.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT TERM
raise_nofile "${nofile:-65536}"
: >"$tmp/etcd.log"
start_etcd failover.sh

ports=$(/usr/bin/python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
list=
n=0
for port in $ports; do
	n=$((n + 1))
	: >"$tmp/rdzvd-$n.log"
	"$build/daemon/rdzvd" --listen "127.0.0.1:$port" --http-listen none \
	    --store "etcd://$etcd_addr/bench" --leader-lease "$lease" \
	    2>>"$tmp/rdzvd-$n.log" &
	pids="$pids $!"
	list=${list:+$list,}127.0.0.1:$port
	# The first leads, the second stands by: up to 10 s for each.
	want='election: leading'
	[ $n = 1 ] || want='election: campaigning'
	i=0
	while ! grep -q "$want" "$tmp/rdzvd-$n.log"; do
		if [ $i -ge 100 ]; then
			echo "failover.sh: replica $n did not start:" >&2
			cat "$tmp/rdzvd-$n.log" >&2
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
done

echo "two replicas ($list, leader-lease $lease) on etcd $etcd_addr; rdzv-bench --failover $*"
if ! timeout 300 "$bench" --server "$list" --failover --timeout 120 "$@"; then
	echo "failover.sh: rdzv-bench failed; the replicas' logs end:" >&2
	tail -n 20 "$tmp"/rdzvd-*.log >&2
	exit 1
fi
grep -h 'election: leading\|stepping down' "$tmp"/rdzvd-*.log | tail -n 3
