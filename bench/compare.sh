#!/bin/sh
# rdzv against torch's own c10d rendezvous, in one run: the same N-node
# rendezvous (min = max = N, every node its own connection) through rdzv
# (rdzv-bench against a fresh rdzvd each time) and through torch's
# DynamicRendezvousHandler with the c10d backend (bench/torch_rdzv.py: N
# handlers as threads of one python process, each with its own TCPStore
# client), alternating, RUNS times each. Both figures are the time from the
# first node starting to connect to the last node holding its rank. Prints a
# table, the medians and, last, one line:
#
#   torch-c10d/rdzv at N nodes: R×
#
# A torch run whose every handler gives up at torch's join timeout (600 s)
# counts as 600 s ("600000+" in the table) and the ratio is then a lower
# bound ("≥R×").
#
#   bench/compare.sh [BUILD_DIR] [--nodes N] [--runs RUNS] [--python PY]
#
# BUILD_DIR defaults to build, N to 64, RUNS to 5, PY (the interpreter with
# torch, of any version: torch_rdzv.py runs on 1.13 and 2.x) to
# /usr/bin/python3, Debian's.
# Exits 3 when torch cannot be imported. Every wait is bounded; rdzvd is
# stopped and its directory removed on any exit. Builds nothing: build
# first (ninja -C BUILD_DIR).

set -eu

build=build
case ${1:-} in
-*|'') ;;
*) build=$1; shift ;;
esac
nodes=64
runs=5
python=/usr/bin/python3
while [ $# -gt 0 ]; do
	case $1 in
	--nodes) nodes=${2:?--nodes needs a count}; shift 2 ;;
	--runs) runs=${2:?--runs needs a count}; shift 2 ;;
	--python) python=${2:?--python needs a program}; shift 2 ;;
	*)
		echo "usage: bench/compare.sh [BUILD_DIR] [--nodes N]" \
		    "[--runs RUNS] [--python PY]" >&2
		exit 2
		;;
	esac
done
case $nodes$runs in
*[!0-9]*)
	echo "compare.sh: --nodes and --runs take whole numbers" >&2
	exit 2
	;;
esac
if [ "$nodes" -lt 1 ] || [ "$runs" -lt 1 ]; then
	echo "compare.sh: --nodes and --runs must be at least 1" >&2
	exit 2
fi

here=$(dirname "$0")
bench=$build/bench/rdzv-bench
# Where torch is, without the seconds of importing it (torch_rdzv.py exits
# 3 when the import itself fails).
if ! "$python" -c 'import importlib.util, sys
sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; then
	echo "compare.sh: $python has no torch" \
	    "(Debian: apt-get install python3-torch)" >&2
	exit 3
fi

. "$here/rdzvd.sh"
results=$(mktemp "${TMPDIR:-/tmp}/rdzv-compare.XXXXXX")
crashes=$(mktemp "${TMPDIR:-/tmp}/rdzv-compare.XXXXXX")
trap 'stop_rdzvd; rm -f "$results" "$crashes"' EXIT

# The value of a "name: value ms" line of a benchmark's output.
figure() {
	sed -n "s/^$1:[ 	]*\\([0-9.]*\\).*/\\1/p" | head -n 1
}

# One rdzv run against a fresh rdzvd: prints "ms ms_after_last_join".
run_rdzv() {
	start_rdzvd compare.sh "$build" "$bench"
	# shellcheck disable=SC2086 # $servers is a list of options
	if ! out=$(timeout 300 "$bench" $servers --daemon-pid "$pid" \
	    --nodes "$nodes" --timeout 240 2>&1); then
		echo "compare.sh: rdzv-bench failed:" >&2
		echo "$out" >&2
		tail -n 20 "$tmp/rdzvd.log" >&2
		exit 1
	fi
	stop_rdzvd
	t=$(echo "$out" | figure "first connect to last assignment")
	j=$(echo "$out" | figure "last join to last assignment")
	echo "$t ${j:-?}"
}

# One torch run: prints "ms". CPython 3.11 now and then dies of SIGSEGV in
# inspect.stack(), which torch's rendezvous calls on every step from every
# handler thread: such a run is repeated (up to twice) and counted in
# $crashes, since the crash is the interpreter's, not the rendezvous'.
run_torch() {
	for attempt in 1 2 3; do
		rc=0
		out=$(timeout 900 "$python" "$here/torch_rdzv.py" \
		    --nodes "$nodes" --timeout 800 2>&1) || rc=$?
		[ "$rc" -gt 128 ] && [ "$rc" -lt 160 ] && [ "$attempt" -lt 3 ] ||
		    break
		echo "compare.sh: torch_rdzv.py died of signal $((rc - 128));" \
		    "repeating the run" >&2
		echo x >>"$crashes"
	done
	# Every handler gave up at torch's join timeout (600 s): the
	# rendezvous took longer than that, which counts as 600 s with a
	# "+", a lower bound.
	if [ "$rc" -eq 1 ] && echo "$out" |
	    grep -q "handlers failed, the first: RendezvousTimeoutError"; then
		echo "compare.sh: torch's rendezvous hit its 600 s join" \
		    "timeout" >&2
		echo "600000+"
		return
	fi
	if [ "$rc" -ne 0 ]; then
		echo "compare.sh: torch_rdzv.py failed (exit $rc):" >&2
		echo "$out" | tail -n 20 >&2
		[ "$rc" -eq 3 ] && exit 3
		exit 1
	fi
	echo "$out" | figure "first connect to last assignment"
}

median() {
	sort -n | awk '{ v[NR] = $1 }
	    END { if (NR % 2) print v[(NR + 1) / 2];
		  else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "$nodes nodes, min = max = $nodes, each its own connection;" \
    "$runs runs of each, alternating"
echo "time: first node connecting to the last node holding its rank"
printf '%-6s %10s %22s %16s\n' run "rdzv ms" "(after the last join)" \
    "torch-c10d ms"
i=1
while [ "$i" -le "$runs" ]; do
	# Alternate which goes first, so neither always runs on a machine
	# the other has just warmed (or loaded).
	if [ $((i % 2)) -eq 1 ]; then
		r=$(run_rdzv)
		t=$(run_torch)
	else
		t=$(run_torch)
		r=$(run_rdzv)
	fi
	echo "$r $t" >>"$results"
	set -- $r
	printf '%-6s %10s %22s %16s\n' "$i" "$1" "$2" "$t"
	i=$((i + 1))
done

rm_=$(awk '{ print $1 }' "$results" | median)
rc_=$(awk '$2 != "?" { print $2 }' "$results" | median)
tm_=$(awk '{ sub(/\+$/, "", $3); print $3 }' "$results" | median)
timeouts=$(awk '$3 ~ /\+$/' "$results" | wc -l)
printf '%-6s %10s %22s %16s\n' median "$rm_" "$rc_" "$tm_"
n=$(wc -l <"$crashes")
[ "$n" -eq 0 ] ||
    echo "torch runs repeated after the interpreter crashed: $n"
ratio=$(awk -v t="$tm_" -v r="$rm_" 'BEGIN {
	if (r <= 0) { print "inf"; exit }
	x = t / r
	if (x >= 10) printf "%d\n", x + 0.5; else printf "%.1f\n", x }')
if [ "$timeouts" -eq 0 ]; then
	echo "torch-c10d/rdzv at $nodes nodes: ${ratio}×"
else
	# A median that counts timed-out runs as 600 s is a lower bound.
	echo "torch runs that hit the join timeout (counted as 600 s):" \
	    "$timeouts of $runs"
	echo "torch-c10d/rdzv at $nodes nodes: ≥${ratio}×"
fi
