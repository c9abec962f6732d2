#!/bin/sh
# The benchmark targets of docs/PERFORMANCE.md, each run RUNS times against
# a fresh private rdzvd, with the median of each figure set against its
# target:
#
#   64 nodes          torch-c10d/rdzv (compare.sh)             at least 50x
#   10,000 nodes      last join to last assignment              within 1 s
#   (one job)         first connect to last assignment          within 3 s
#                     rdzvd's peak RSS per connected node       below 32 KiB
#   1,000 jobs x 8    first connect to last assignment          within 2 s
#   1,000 nodes,      grace end to the last survivor's new      within 1 s
#   100 closed        assignment (reconnect grace 0.5 s)
#
#   bench/targets.sh [BUILD_DIR] [RUNS]
#
# BUILD_DIR defaults to build, RUNS to 3. Figures, not a test: it always
# exits 0 once every run completed, and says "missed" where a median is
# past its target. Needs about 10,000 open files per process (rdzv-bench.sh
# raises the limit as far as the hard limit allows).

set -eu

build=${1:-build}
runs=${2:-3}
here=$(dirname "$0")
out=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-targets.XXXXXX")
trap 'rm -rf "$out"' EXIT

# The number of a "name: value ..." line.
figure() {
	sed -n "s/^$1:[ 	]*\\([0-9.]*\\).*/\\1/p" "$2" | head -n 1
}

median() {
	sort -n | awk '{ v[NR] = $1 }
	    END { if (NR == 0) print "?";
		  else if (NR % 2) print v[(NR + 1) / 2];
		  else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# row LABEL FILE-OF-VALUES OP LIMIT UNIT: one line of the summary.
row() {
	m=$(median <"$2")
	all=$(tr '\n' ' ' <"$2" | sed 's/ $//; s/ / \/ /g')
	verdict=$(awk -v m="$m" -v op="$3" -v lim="$4" 'BEGIN {
		if (m == "?") { print "no figure"; exit }
		ok = op == "<" ? m + 0 < lim + 0 : m + 0 >= lim + 0
		print ok ? "met" : "missed" }')
	printf '%-44s %10s %s   (%s %s %s; runs: %s)\n' "$1" "$m" "$5" \
	    "$verdict:" "$3" "$4" "$all"
}

# scenario NAME RDZV-BENCH-OPTIONS...: RUNS runs; the outputs are kept.
scenario() {
	name=$1
	shift
	i=1
	while [ "$i" -le "$runs" ]; do
		echo "== $name, run $i: rdzv-bench $*" >&2
		if ! "$here/rdzv-bench.sh" "$build" "$@" >"$out/$name.$i" 2>&1
		then
			cat "$out/$name.$i" >&2
			echo "targets.sh: $name run $i failed" >&2
			exit 1
		fi
		i=$((i + 1))
	done
}

# collect NAME FIGURE: the figure of every run of a scenario, one a line.
collect() {
	i=1
	while [ "$i" -le "$runs" ]; do
		figure "$2" "$out/$1.$i"
		i=$((i + 1))
	done
}

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$(uname -sr)"
echo "== compare.sh --nodes 64 --runs $runs" >&2
"$here/compare.sh" "$build" --nodes 64 --runs "$runs" >"$out/compare" ||
    echo "targets.sh: compare.sh failed or torch is missing" >&2
sed -n 's/^torch-c10d\/rdzv at 64 nodes: \([0-9.]*\)×$/\1/p' \
    "$out/compare" >"$out/ratio"

scenario big --nodes 10000
scenario jobs --nodes 8 --jobs 1000
scenario kill --nodes 1000 --kill 100 --grace 500ms

collect big "last join to last assignment" >"$out/v1"
collect big "first connect to last assignment" >"$out/v2"
collect big "daemon peak rss per node" >"$out/v3"
collect jobs "first connect to last assignment" >"$out/v4"
collect jobs "last join to last assignment" >"$out/v5"
collect kill "grace to last new assignment" >"$out/v6"

echo
cat "$out/compare"
echo
echo "medians of $runs runs:"
row "64 nodes: torch-c10d/rdzv" "$out/ratio" ">=" 50 "x"
row "10,000 nodes: last join to last assignment" "$out/v1" "<" 1000 ms
row "10,000 nodes: first connect to last assign." "$out/v2" "<" 3000 ms
row "10,000 nodes: rdzvd peak RSS per node" "$out/v3" "<" 32 KiB
row "1,000 jobs x 8: first connect to last assign." "$out/v4" "<" 2000 ms
row "1,000 jobs x 8: last join to last assignment" "$out/v5" "<" 2000 ms
row "100 of 1,000 closed: grace end to last new" "$out/v6" "<" 1000 ms
