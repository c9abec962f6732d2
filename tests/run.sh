#!/bin/sh
# The whole test suite, as CI runs it: installs what is missing, builds, runs
# every test in the default build and again under AddressSanitizer and
# UndefinedBehaviorSanitizer, and ends with "N passed, N failed".
# Set RDZV_NO_SANITIZE=1 to skip the sanitizer build while iterating.
set -u
cd "$(dirname "$0")/.."
RDZV_MESON_OPTIONS=-Dwerror=true deploy/install-deps.sh test || exit 1

# setup DIR OPTIONS...: configures DIR, or sets OPTIONS on an existing one.
# Warnings are errors here (-Dwerror=true), not in the project's defaults,
# so that packagers' and users' own builds do not break on a newer compiler.
setup() {
	dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

setup build -Dwerror=true || exit 1
builds="build"
if [ -z "${RDZV_NO_SANITIZE:-}" ]; then
	setup build-asan -Dwerror=true -Db_sanitize=address,undefined \
	    -Db_lundef=false -Dbench=false || exit 1
	builds="$builds build-asan"
fi

rc=0
release_failed=
# Optimized builds as packagers make them, with gcc and with clang: built
# only, not tested (-O3 finds warnings -O2 does not). -Dtests=false still
# builds every program and benchmark; the tests run in the builds above.
for cc in gcc clang; do
	command -v "$cc" >/dev/null || { echo "== no $cc: release build skipped"; continue; }
	echo "== release build with $cc"
	if [ ! -f "build-release-$cc/build.ninja" ]; then
		CC=$cc meson setup "build-release-$cc" --buildtype=release \
		    -Dwerror=true -Dtests=false >/dev/null ||
		    { release_failed="$release_failed $cc"; continue; }
	fi
	ninja -C "build-release-$cc" >"build-release-$cc.log" 2>&1 ||
	    release_failed="$release_failed $cc"
done
export release_failed

for b in $builds; do
	echo "== meson test in $b"
	meson test -C "$b" --print-errorlogs --num-processes 2 || rc=1
done

# Count results from meson's own logs (one JSON object per test).
/usr/bin/python3 - $builds <<'PY' || rc=1
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
failures = []
# A release build that failed counts as a failed test, its log's end shown.
for cc in os.environ.get("release_failed", "").split():
    counts["failed"] += 1
    try:
        log = open("build-release-%s.log" % cc).read().splitlines()[-40:]
    except OSError:
        log = ["(meson setup failed)"]
    failures.append(("build-release-" + cc, {"name": "release build", "result": "FAIL", "duration": 0, "stdout": "\n".join(log)}))
for b in sys.argv[1:]:
    try:
        lines = open(b + "/meson-logs/testlog.json").read().splitlines()
    except OSError:
        counts["failed"] += 1
        continue
    for line in lines:
        t = json.loads(line)
        if t["result"] in ("OK", "EXPECTEDFAIL"):
            counts["passed"] += 1
        elif t["result"] == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
            failures.append((b, t))
# A log shows only its end: repeat each failure's last lines just above the
# count, so whoever reads the tail sees what failed and why.
for b, t in failures:
    print("== FAILED %s / %s: %s after %.1f s" % (b, t["name"], t["result"], t["duration"]))
    print("\n".join((t.get("stdout") or "").splitlines()[-40:]))
line = "%d passed, %d failed" % (counts["passed"], counts["failed"])
if counts["skipped"]:
    line += ", %d skipped" % counts["skipped"]
print(line)
sys.exit(1 if counts["failed"] else 0)
PY
exit $rc
