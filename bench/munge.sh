#!/bin/sh
# The cost of auth = munge (docs/SECURITY.md): ListJobs calls per second
# against a private rdzvd without authentication and then against one with
# auth = munge, each call of the second with a fresh MUNGE credential from
# a private munged (its own key, socket and state under the temporary
# directory), in the same shapes, one table. Builds nothing: build first.
# munged wants root for its private key.
#
#   bench/munge.sh [BUILD_DIR] [SECONDS_PER_CASE]  (whole seconds)
#
# Every wait is bounded; munged and rdzvd are stopped by pid on any exit.

set -eu

build=${1:-build}
secs=${2:-3}
bench=$build/bench/grpc-bench

for p in munged mungekey; do
	if ! command -v $p >/dev/null 2>&1 && [ ! -x /usr/sbin/$p ]; then
		echo "munge.sh: $p not found (Debian package munge)" >&2
		exit 1
	fi
done
PATH=$PATH:/usr/sbin

. "$(dirname "$0")/rdzvd.sh"

mdir=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-munge-bench.XXXXXX")
mpid=
stop_munged() {
	[ -z "$mpid" ] || kill -TERM "$mpid" 2>/dev/null || true
	[ -z "$mpid" ] || wait "$mpid" 2>/dev/null || true
	rm -rf "$mdir"
}
cleanup() {
	stop_rdzvd
	stop_munged
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sock=$mdir/munge.sock
mungekey --create --keyfile "$mdir/munge.key"
chmod 400 "$mdir/munge.key"
munged --foreground --force --socket "$sock" --key-file "$mdir/munge.key" \
    --pid-file "$mdir/munged.pid" --log-file "$mdir/munged.log" \
    --seed-file "$mdir/seed" 2>"$mdir/munged.err" &
mpid=$!
i=0
while [ ! -S "$sock" ]; do
	if [ $i -ge 100 ] || ! kill -0 "$mpid" 2>/dev/null; then
		echo "munge.sh: munged did not start within 10 s:" >&2
		cat "$mdir/munged.err" "$mdir/munged.log" >&2 2>/dev/null || true
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done

# One case against the running rdzvd: its calls/s, or "failed".
calls_per_s() {
	if ! timeout $((secs + 60)) "$bench" --server "$addr" --list-jobs \
	    --seconds "$secs" "$@" >"$tmp/out" 2>"$tmp/err"; then
		echo "failed: $(tail -n 1 "$tmp/err")" >&2
		echo 0
		return 0
	fi
	sed -n 's/^calls\/s: *//p' "$tmp/out"
}

cases="1:1 1:32 16:4"
rdzvd_args="--http-listen none"
start_rdzvd munge.sh "$build" "$bench"
trap cleanup EXIT
plain=""
for c in $cases; do
	plain="$plain $(calls_per_s --conns "${c%%:*}" --inflight "${c##*:}")"
done
stop_rdzvd

rdzvd_args="--http-listen none --auth munge --munge-socket $sock"
start_rdzvd munge.sh "$build" "$bench"
trap cleanup EXIT
munge=""
for c in $cases; do
	munge="$munge $(calls_per_s --conns "${c%%:*}" --inflight "${c##*:}" \
	    --munge-socket "$sock")"
done

echo "ListJobs unary calls, $secs s per case, $(nproc) CPUs;" \
    "munge: a fresh credential per call"
printf '%-22s %12s %12s %8s\n' case "none calls/s" "munge calls/s" ratio
set -- $munge
for c in $cases; do
	m=$1
	shift
	p=$(echo $plain | cut -d' ' -f1)
	plain=$(echo $plain | cut -s -d' ' -f2-)
	printf '%-22s %12s %12s %8s\n' \
	    "${c%%:*} conns, ${c##*:} in flight" "$p" "$m" \
	    "$(awk -v p="$p" -v m="$m" 'BEGIN { if (m > 0) printf "%.1fx", p / m; else print "-" }')"
done
