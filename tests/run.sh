#!/bin/sh
# The whole test suite, as CI runs it: installs what is missing, builds, runs
# every test in the default build and again under AddressSanitizer and
# UndefinedBehaviorSanitizer, and ends with "N passed, N failed".
# Set RDZV_NO_SANITIZE=1 to skip the sanitizer build while iterating.
set -u
cd "$(dirname "$0")/.."
deploy/install-deps.sh test || exit 1

builds="build"
if [ -z "${RDZV_NO_SANITIZE:-}" ]; then
	if [ ! -f build-asan/build.ninja ]; then
		meson setup build-asan -Db_sanitize=address,undefined \
		    -Db_lundef=false -Dbench=false >/dev/null || exit 1
	fi
	builds="$builds build-asan"
fi

rc=0
for b in $builds; do
	echo "== meson test in $b"
	meson test -C "$b" --print-errorlogs --num-processes 2 || rc=1
done

# Count results from meson's own logs (one JSON object per test).
/usr/bin/python3 - $builds <<'PY' || rc=1
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
failures = []
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
