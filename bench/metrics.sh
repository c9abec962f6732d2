#!/bin/sh
# What a Prometheus scrape costs rdzvd with many jobs: starts a private rdzvd
# (bench/rdzvd.sh) with its HTTP listener, lets rdzv-bench make JOBS jobs of
# NODES nodes each, then fetches /metrics SCRAPES times and prints rdzvd's
# CPU time per scrape (from /proc, so the client's own work is not in it),
# the slowest scrape as the client saw it (an upper bound of how long one
# scrape holds rdzvd's event loop), and the exposition's size. The status
# page's first /events answer (at most 1,000 jobs, as JSON) is measured the same
# way. Figures, not a timed test.
#
#   bench/metrics.sh [BUILD_DIR] [JOBS] [NODES] [SCRAPES]
#
# Defaults: build, 1000 jobs, 4 nodes each, 200 scrapes.

set -eu

build=${1:-build}
jobs=${2:-1000}
nodes=${3:-4}
scrapes=${4:-200}
bench=$build/bench/rdzv-bench

rdzvd_args="--http-listen 127.0.0.1:0"
. "$(dirname "$0")/rdzvd.sh"
start_rdzvd metrics.sh "$build" "$bench"

http=$(sed -n 's/.*serving HTTP on \([^ ]*\):.*/\1/p' "$tmp/rdzvd.log" |
    head -n 1)
if [ -z "$http" ]; then
	echo "metrics.sh: rdzvd serves no HTTP:" >&2
	cat "$tmp/rdzvd.log" >&2
	exit 1
fi
echo "rdzvd $servers(pid $pid), HTTP on $http"
# shellcheck disable=SC2086 # $servers is a list of options
timeout 600 "$bench" $servers --jobs "$jobs" --nodes "$nodes" \
    --timeout 300 >"$tmp/bench.out"
grep -E "^(jobs|nodes per job|first connect)" "$tmp/bench.out" || true

hz=$(getconf CLK_TCK)

/usr/bin/python3 - "$http" "$scrapes" "$pid" "$hz" <<'PY'
import sys, time, urllib.request

http, n, pid, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def cpu():
    with open("/proc/%s/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / hz    # utime, stime

def fetch(path, until=None):
    t = time.monotonic()
    with urllib.request.urlopen("http://%s%s" % (http, path), timeout=30) as r:
        if until is None:
            body = r.read()
        else:
            body = b""
            while body.count(until) < jobs_held:
                line = r.readline()
                if not line:
                    break
                body += line
    return time.monotonic() - t, body

text = fetch("/metrics")[1].decode()
jobs_held = sum(int(float(l.split()[-1])) for l in text.splitlines()
                if l.startswith("rdzvd_jobs{"))
# A first answer holds at most 1,000 jobs (docs/RDZVD.md, "Limits").
jobs_held = min(jobs_held, 1000)
print("jobs held:             %d" % jobs_held)
print("exposition:            %d bytes, %d lines" % (len(text),
      text.count("\n")))
c0, worst = cpu(), 0
for _ in range(n):
    worst = max(worst, fetch("/metrics")[0])
c1 = cpu()
print("rdzvd CPU per scrape:  %.3f ms (%d scrapes)" % ((c1 - c0) / n * 1e3, n))
print("slowest scrape (wall): %.3f ms" % (worst * 1e3))
k = 20
c0, worst = cpu(), 0
for _ in range(k):
    worst = max(worst, fetch("/events", until=b"event: job")[0])
c1 = cpu()
print("rdzvd CPU per /events snapshot (at most 1,000 jobs): %.3f ms (%d times)"
      % ((c1 - c0) / k * 1e3, k))
print("slowest /events snapshot (wall): %.3f ms" % (worst * 1e3))
PY
