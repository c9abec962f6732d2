#!/bin/sh
# The GPU check (SPEC §7) on the real GPUs of this machine, through
# the real libcuda: run it wherever a GPU is available (docs/GPU.md).
#
#   tests/gpu/run.sh [BUILD_DIR]      (default: build-gpu-real)
#
# It builds rdzv, then
#   1. rdzv-agent gpucheck --device all (each step's time per device) and
#      the same as JSON;
#   2. tests/unit/test_gpucheck against the real libcuda
#      (RDZV_GPUCHECK_REAL=1): every device passes, with sane values;
#   3. a one-node job on a private rdzvd with --nproc-per-node gpu and
#      --gpucheck strict, so every worker checks its GPU between fork
#      and exec before it runs;
#   4. the ptxas test when the CUDA toolkit is there.
# On a GPU machine without rdzv's build dependencies, BUILD_DIR may hold
# the programs built elsewhere, in the build folder's layout, with their
# libraries on LD_LIBRARY_PATH. Exit status 0 when all passed. RDZV_LIBCUDA may name the driver's
# libcuda.so.1 if it is not on the loader's path; RDZV_GPUCHECK_BYTES sets
# the buffer size (default 256 MiB).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu-real}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac

case ${RDZV_LIBCUDA:-} in
*fakecuda*)
	echo "RDZV_LIBCUDA=$RDZV_LIBCUDA is the stand-in; unset it" >&2
	exit 2
	;;
esac

if [ ! -f "$build/build.ninja" ] && [ -x "$build/client/agent/rdzv-agent" ]; then
	# A GPU machine without the build dependencies: the programs were
	# built elsewhere and copied into the build folder's layout.
	echo "using the programs in $build as they are"
else
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" "$root" -Dbench=false || exit 2
	fi
	ninja -C "$build" || exit 2
fi

agent=$build/client/agent/rdzv-agent
failed=""

step() {
	echo
	echo "== $*"
}

step "GPUs"
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L
	nvidia-smi --query-gpu=index,name,driver_version,memory.total \
	    --format=csv,noheader
else
	echo "(no nvidia-smi)"
fi

step "rdzv-agent gpucheck --device all"
"$agent" gpucheck --device all || failed="$failed gpucheck"
"$agent" gpucheck --device all -o json > "$build/gpucheck.json" ||
	failed="$failed gpucheck-json"
echo "(JSON in $build/gpucheck.json)"

step "test_gpucheck on the real libcuda"
RDZV_GPUCHECK_REAL=1 "$build/tests/unit/test_gpucheck" ||
	failed="$failed test_gpucheck"

step "one-node job: each worker checks its GPU before it runs"
tmp=$(mktemp -d)
"$build/daemon/rdzvd" --listen "unix:$tmp/rdzvd.sock" --db "$tmp/rdzv.db" \
    2> "$tmp/rdzvd.log" &
rdzvd=$!
trap 'kill $rdzvd 2>/dev/null; wait $rdzvd 2>/dev/null; rm -rf "$tmp"' EXIT
i=0
while [ ! -S "$tmp/rdzvd.sock" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
if "$agent" join --server "unix:$tmp/rdzvd.sock" --id gpu-smoke \
    --nnodes 1 --nproc-per-node gpu --gpucheck strict --tee \
    --log-level debug --log-dir "$tmp/logs" -- sh -c \
    'echo "rank $RANK of $WORLD_SIZE: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES LOCAL_RANK=$LOCAL_RANK"'
then
	:
else
	failed="$failed job"
	sed 's/^/rdzvd: /' "$tmp/rdzvd.log" | tail -20
fi

step "ptxas"
sh "$root/tests/integration/gpu/test_ptxas.sh" \
    "$build/tests/integration/gpu/gpucheck_dump_ptx" \
    "$root/lib/gpucheck_kernel.ptx"
case $? in
0|77) ;;
*) failed="$failed ptxas" ;;
esac

echo
if [ -n "$failed" ]; then
	echo "FAILED:$failed"
	exit 1
fi
echo "all passed"
