#!/bin/sh
# Spawn benchmark: how long rdzv-agent takes from an assignment's arrival
# to the exec of every worker. Starts a private rdzvd (bench/rdzvd.sh) and
# one agent with NPROC workers of /bin/false and the GPU check off: every
# generation fails at once, rdzvd forms the next round, and the agent logs
# (at debug level) "generation G: N workers exec'd in X ms after the
# assignment arrived". Prints the median and the maximum over ROUNDS
# generations. Target: below 5 ms for 8 workers. Builds nothing: build
# first (ninja -C BUILD_DIR).
#
#   bench/spawn.sh [BUILD_DIR] [ROUNDS] [NPROC]
#
# Defaults: build, 20, 8. Every wait is bounded; rdzvd is stopped and its
# directory removed on any exit.

set -eu

build=${1:-build}
rounds=${2:-20}
nproc=${3:-8}
agent=$build/client/agent/rdzv-agent

# shellcheck source=bench/rdzvd.sh
. "$(dirname "$0")/rdzvd.sh"
start_rdzvd spawn.sh "$build" "$agent"

# max_restarts R allows R failures: R + 1 generations, then the job fails
# and the agent exits 1, which is expected here.
rc=0
timeout $((rounds * 2 + 30)) "$agent" join --id spawn-bench \
    --server "$addr" --nproc-per-node "$nproc" --health-check off \
    --max-restarts $((rounds - 1)) --stop-timeout 1s \
    --log-dir "$tmp/logs" --log-level debug -- /bin/false \
    2>"$tmp/agent.log" || rc=$?
if [ "$rc" -ne 1 ]; then
	echo "spawn.sh: the agent exited $rc, not 1 (the job failing):" >&2
	tail -n 20 "$tmp/agent.log" >&2
	exit 1
fi

sed -n "s/.*generation [0-9]*: $nproc workers exec'd in \([0-9.]*\) ms.*/\1/p" \
    "$tmp/agent.log" | sort -n >"$tmp/ms"
n=$(wc -l <"$tmp/ms")
if [ "$n" -eq 0 ]; then
	echo "spawn.sh: no timing in the agent's log:" >&2
	tail -n 20 "$tmp/agent.log" >&2
	exit 1
fi
median=$(sed -n "$(((n + 1) / 2))p" "$tmp/ms")
max=$(tail -n 1 "$tmp/ms")
min=$(head -n 1 "$tmp/ms")
printf 'spawn: %d workers of /bin/false, %d generations\n' "$nproc" "$n"
printf '  assignment to every exec: median %s ms, min %s ms, max %s ms\n' \
    "$median" "$min" "$max"
