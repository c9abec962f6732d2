# Sourced by the benchmark scripts: starts a private rdzvd on free loopback
# ports and a temporary database (or a private etcd: rdzvd_store=etcd), and
# stops it on exit.
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
#   rdzvd_store   sqlite (default) or etcd: a one-member etcd (Debian's
#                 etcd-server) on free loopback ports with its data in
#                 $tmp, and rdzvd on --store etcd://127.0.0.1:PORT/bench
#
# stop_rdzvd prints rdzvd's store line ("store ...: N transactions, M bytes
# written") into $store_line before it removes $tmp.
# Every wait is bounded; on exit rdzvd gets SIGTERM (SIGKILL after 10 s) and
# $tmp is removed. stop_rdzvd stops it earlier (to start a fresh one).

pid=
tmp=
etcd_pid=
store_line=
stop_etcd() {
	if [ -n "$etcd_pid" ]; then
		kill -KILL "$etcd_pid" 2>/dev/null || true
		wait "$etcd_pid" 2>/dev/null || true
	fi
	etcd_pid=
}

# A one-member etcd under $tmp on two free loopback ports; sets $etcd_addr.
start_etcd() {
	if [ ! -x /usr/bin/etcd ]; then
		echo "$1: /usr/bin/etcd not found (Debian package etcd-server)" >&2
		exit 1
	fi
	set -- $(/usr/bin/python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
	etcd_addr=127.0.0.1:$1
	/usr/bin/etcd --name bench --data-dir "$tmp/etcd" \
	    --listen-client-urls "http://$etcd_addr" \
	    --advertise-client-urls "http://$etcd_addr" \
	    --listen-peer-urls "http://127.0.0.1:$2" \
	    --initial-advertise-peer-urls "http://127.0.0.1:$2" \
	    --initial-cluster "bench=http://127.0.0.1:$2" \
	    >"$tmp/etcd.log" 2>&1 &
	etcd_pid=$!
	i=0
	while ! grep -q 'ready to serve client requests' "$tmp/etcd.log"; do
		if [ $i -ge 300 ] || ! kill -0 "$etcd_pid" 2>/dev/null; then
			echo "etcd did not start within 30 s:" >&2
			tail -n 20 "$tmp/etcd.log" >&2
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
}

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
	stop_etcd
	[ -z "$tmp" ] || store_line=$(sed -n 's/.*rdzvd: \(store .* written\).*/\1/p' \
	    "$tmp/rdzvd.log" | tail -n 1)
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
	where="--db $tmp/rdzv.db"
	if [ "${rdzvd_store:-sqlite}" = etcd ]; then
		start_etcd "$name"
		where="--store etcd://$etcd_addr/bench"
	fi
	# RDZVD_WRAP runs rdzvd under a tool, e.g. "valgrind --tool=callgrind
	# --callgrind-out-file=FILE" (docs/PERFORMANCE.md).
	# Every simulated node connects from loopback: no limit per source
	# address (max-connections-per-address, docs/SECURITY.md).
	# shellcheck disable=SC2086 # rdzvd_args and where are lists of options
	${RDZVD_WRAP:-} "$build/daemon/rdzvd" "$@" $where \
	    --max-connections-per-address 0 ${rdzvd_args:-} \
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
