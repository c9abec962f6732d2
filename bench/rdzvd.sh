# Sourced by the benchmark scripts: starts a private rdzvd on free loopback
# ports and a temporary database, and stops it on exit.
#
#   start_rdzvd NAME BUILD_DIR PROGRAM...
#
# checks that the programs exist, then sets $pid, $addr (the first listener),
# $servers ("--server A --server B ..." for every listener) and $tmp. The
# caller may set, before calling:
#
#   listen_addrs  how many loopback addresses rdzvd listens on (127.0.0.1,
#                 127.0.0.2, ...; default 1): more addresses, more source
#                 ports for tens of thousands of connections
#   rdzvd_args    more rdzvd options
#   nofile        the open files both processes need (default 65536)
#
# Every wait is bounded; on exit rdzvd gets SIGTERM (SIGKILL after 10 s) and
# $tmp is removed. stop_rdzvd stops it earlier (to start a fresh one).

pid=
tmp=
stop_rdzvd() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	pid=
	[ -z "$tmp" ] || rm -rf "$tmp"
	tmp=
}

# Raises the open-file limit of this shell (and so of rdzvd and the bench it
# starts) to $1: the hard limit too where allowed (root), else as far as the
# hard limit goes.
raise_nofile() {
	if [ "$(ulimit -H -n)" != unlimited ] &&
	    [ "$(ulimit -H -n)" -lt "$1" ]; then
		ulimit -H -n "$1" 2>/dev/null || true
	fi
	if [ "$(ulimit -H -n)" = unlimited ] ||
	    [ "$(ulimit -H -n)" -ge "$1" ]; then
		ulimit -n "$1"
	else
		ulimit -n "$(ulimit -H -n)"
	fi
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
	trap stop_rdzvd EXIT
	trap 'exit 130' INT TERM

	# rdzvd holds one descriptor per connection, and so does the bench.
	raise_nofile "${nofile:-65536}"
	k=${listen_addrs:-1}
	set --
	i=1
	while [ $i -le "$k" ]; do
		set -- "$@" --listen "127.0.0.$i:0"
		i=$((i + 1))
	done
	# The log exists before the loop below reads it: the background
	# job's redirection may open it only later.
	: >"$tmp/rdzvd.log"
	# shellcheck disable=SC2086 # rdzvd_args is a list of options
	"$build/daemon/rdzvd" "$@" --db "$tmp/rdzv.db" ${rdzvd_args:-} \
	    2>>"$tmp/rdzvd.log" &
	pid=$!

	# Up to 10 s for a "listening on 127.0.0.X:PORT" per address.
	i=0
	while [ $i -lt 100 ]; do
		n=$(grep -c 'listening on' "$tmp/rdzvd.log" || true)
		if [ "$n" -ge "$k" ]; then
			addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' \
			    "$tmp/rdzvd.log" | head -n 1)
			servers=$(sed -n \
			    's/.*listening on \([^ ]*\).*/--server \1/p' \
			    "$tmp/rdzvd.log" | tr '\n' ' ')
			return 0
		fi
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
