# Sourced by the benchmark scripts: starts a private rdzvd on a free loopback
# port and a temporary database, and stops it on exit.
#
#   start_rdzvd NAME BUILD_DIR PROGRAM...
#
# checks that the programs exist, then sets $pid, $addr and $tmp. Every
# wait is bounded; on exit rdzvd gets SIGTERM (SIGKILL after 10 s) and $tmp
# is removed.

pid=
tmp=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
}

start_rdzvd() {
	name=$1 build=$2
	shift 2
	for prog in "$build/daemon/rdzvd" "$@"; do
		if [ ! -x "$prog" ]; then
			echo "$name: $prog not found; build first" \
			    "(ninja -C $build)" >&2
			exit 1
		fi
	done
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdzv-bench.XXXXXX")
	trap cleanup EXIT
	trap 'exit 130' INT TERM

	# rdzvd holds one descriptor per connection: give it the hard limit.
	ulimit -n "$(ulimit -H -n)" 2>/dev/null || true
	"$build/daemon/rdzvd" --listen 127.0.0.1:0 --db "$tmp/rdzv.db" \
	    2>"$tmp/rdzvd.log" &
	pid=$!

	# Up to 10 s for "listening on 127.0.0.1:PORT".
	addr=
	i=0
	while [ $i -lt 100 ]; do
		addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' \
		    "$tmp/rdzvd.log" | head -n 1)
		[ -n "$addr" ] && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "$name: rdzvd exited:" >&2
			cat "$tmp/rdzvd.log" >&2
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "$name: rdzvd did not listen within 10 s:" >&2
	cat "$tmp/rdzvd.log" >&2
	exit 1
}
