#!/bin/sh
# The chaos soak (docs/RELIABILITY.md): three jobs on a cluster of network
# namespaces, a seeded nemesis, a history and its checker.
#   tests/chaos/run.sh --minutes M --seed S [--config etcd|sqlite] [--out DIR]
# Root only. The last line is `chaos: F faults, V violations, J jobs, seed
# S`; the exit status is 0 only with no violation. RDZV_BUILD_ROOT names
# the build (default build/ of this checkout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export RDZV_BUILD_ROOT="${RDZV_BUILD_ROOT:-$here/../../build}"
exec /usr/bin/python3 "$here/chaos.py" "$@"
