#!/bin/sh
# Everything rdzv does with a GPU and today's torch, on the real GPUs of
# this machine, in one run of a few minutes (docs/GPU.md, docs/TESTING.md):
#
#   tests/gpu/run.sh [BUILD_DIR]      (default: build-gpu-real)
#
#   1. rdzv-agent gpucheck --device all, twice (the first is the cold one
#      on a fresh machine), each step's time, and the JSON;
#   2. tests/unit/test_gpucheck against the real libcuda
#      (RDZV_GPUCHECK_REAL=1): every device passes, the probes' and two
#      in-process checks' step times;
#   3. what a worker's own check adds before its exec: a one-node job of
#      one worker per GPU under --gpucheck strict and under off, the
#      agent's "workers exec'd in X ms after the assignment arrived";
#   4. an NCCL job through the agent (--nproc-per-node gpu --gpucheck
#      strict, tests/gpu/nccl_worker.py): all_reduce and DDP steps, torch
#      2.x's TORCH_NCCL_ASYNC_ERROR_HANDLING and no deprecation warning;
#   5. torchrun with the rdzv backend found through its entry point
#      (rdzv-VERSION.dist-info on PYTHONPATH): two torchruns on gloo;
#   6. bench/recovery.py: gloo on this torch, NCCL with a GPU per node;
#   7. the benches against torch, short: compare.sh at 8 nodes, one run;
#      torchrun_bench.py at 8 nodes;
#   8. the ptxas test when the CUDA toolkit is there.
#
# PY (default python3) is the interpreter with torch. Every log goes to
# one folder, $OUT when set (the GPU machine's result folder), else
# BUILD_DIR/gpu-logs; summary.txt there has each part's verdict and time.
# On a GPU machine without rdzv's build dependencies, BUILD_DIR holds the
# programs built elsewhere in the build folder's layout, with their
# libraries on LD_LIBRARY_PATH (tests/gpu/pack.sh makes such a folder).
# RDZV_LIBCUDA may name the driver's libcuda.so.1 if it is not on the
# loader's path; RDZV_GPUCHECK_BYTES sets the buffer size (default 256 MiB).
# Exit status 0 when all passed.
set -u

# The parts that are more than one command run as `run.sh --sub NAME ARGS`
# under timeout(1), with $agent, $server, $logs, $pylib, $PY and $root
# exported by the main run.

# A job of one node, one worker per GPU; prints the agent's exec time.
job() {
	"$agent" join --server "$server" --id "$1" --nnodes 1 \
	    --nproc-per-node gpu --gpucheck "$2" --tee --log-level debug \
	    --log-dir "$logs/$1" -- sh -c \
	    'echo "rank $RANK of $WORLD_SIZE: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
}
# Two torchruns, the backend from the entry point (not rdzv.torchrun).
torchruns() {
	out=$logs/torchrun-out
	mkdir -p "$out"
	for n in 0 1; do
		BENCH_OUT=$out PYTHONPATH=$pylib RDZV_AGENT=$agent \
		    "$PY" -m torch.distributed.run --nnodes 2 \
		    --nproc-per-node 1 --rdzv-backend rdzv \
		    --rdzv-endpoint "$server" --rdzv-id torchrun-smoke \
		    --rdzv-conf last_call_timeout=1 \
		    "$root/bench/torchrun_worker.py" >"$logs/torchrun-$n.log" 2>&1 &
		eval "p$n=\$!"
	done
	wait "$p0"
	r0=$?
	wait "$p1"
	r1=$?
	tail -n 5 "$logs/torchrun-0.log" "$logs/torchrun-1.log"
	ls "$out"
	[ $r0 -eq 0 ] && [ $r1 -eq 0 ] && [ -f "$out/0.json" ] && [ -f "$out/1.json" ]
}
if [ "${1:-}" = --sub ]; then
	shift
	"$@"
	exit $?
fi

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu-real}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
PY=${PY:-python3}

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
		meson setup "$build" "$root" || exit 2
	fi
	ninja -C "$build" || exit 2
fi

logs=${OUT:-$build/gpu-logs}
mkdir -p "$logs" || exit 2
summary=$logs/summary.txt
: >"$summary"
agent=$build/client/agent/rdzv-agent
failed=""
tmp=$(mktemp -d)
rdzvd=
trap '[ -n "$rdzvd" ] && kill $rdzvd 2>/dev/null; rm -rf "$tmp"' EXIT

now_ms() {
	date +%s%3N
}

# part NAME LIMIT_S CMD...: runs CMD with a time limit, its output on the
# terminal and in $logs/NAME.log, and notes the verdict in summary.txt.
part() {
	name=$1 limit=$2
	shift 2
	echo
	echo "== $name: $*"
	t0=$(now_ms)
	timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1
	rc=$?
	cat "$logs/$name.log"
	verdict=passed
	[ $rc -eq 0 ] || { verdict="FAILED (exit $rc)"; failed="$failed $name"; }
	[ $rc -eq 124 ] && verdict="FAILED (over ${limit} s)"
	printf '%-22s %-22s %s s\n' "$name" "$verdict" \
	    "$(awk -v ms=$(( $(now_ms) - t0 )) 'BEGIN { printf "%.1f", ms / 1000 }')" \
	    >>"$summary"
	return $rc
}

# The rdzv package with its dist-info, as installed: torchrun 2.x finds
# the backend through the entry point.
pylib=$tmp/pylib
mkdir -p "$pylib"
cp -r "$root/python/rdzv" "$pylib/"
version=$(sed -n 's/^Version: //p' "$build/python/METADATA" 2>/dev/null)
dist=$pylib/rdzv-${version:-0}.dist-info
mkdir -p "$dist"
cp "$build/python/METADATA" "$build/python/entry_points.txt" \
    "$build/python/top_level.txt" "$dist/" 2>/dev/null ||
	echo "no $build/python/METADATA: torchrun's entry point is missing"

{
	echo "== GPUs"
	nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
	nvidia-smi --query-gpu=index,name,driver_version,memory.total \
	    --format=csv,noheader 2>/dev/null
	"$PY" -c 'import torch; print("torch", torch.__version__, "cuda",
torch.version.cuda, "devices", torch.cuda.device_count())' 2>&1
} | tee "$logs/machine.log"

part gpucheck-cold 60 "$agent" gpucheck --device all
part gpucheck-warm 60 "$agent" gpucheck --device all
part gpucheck-json 60 sh -c '"$1" gpucheck --device all -o json >"$2/gpucheck.json"' \
    sh "$agent" "$logs"
part test_gpucheck 120 env RDZV_GPUCHECK_REAL=1 "$build/tests/unit/test_gpucheck"

# One rdzvd for the jobs, on a free loopback port.
"$build/daemon/rdzvd" --listen 127.0.0.1:0 --http-listen none \
    --db "$tmp/rdzv.db" 2>"$logs/rdzvd.log" &
rdzvd=$!
i=0
while ! grep -q "listening on" "$logs/rdzvd.log" && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
server=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$logs/rdzvd.log" | head -n 1)
echo "rdzvd on $server"

export agent server logs pylib PY root
part job-gpucheck-off 60 "$self" --sub job exec-off off
part job-gpucheck-strict 60 "$self" --sub job exec-strict strict
off=$(sed -n "s/.*exec'd in \([0-9.]*\) ms.*/\1/p" "$logs/job-gpucheck-off.log")
strict=$(sed -n "s/.*exec'd in \([0-9.]*\) ms.*/\1/p" "$logs/job-gpucheck-strict.log")
echo "assignment to exec: ${off:-?} ms unchecked, ${strict:-?} ms with each" \
    "worker's own check" | tee -a "$summary"

part nccl-job 180 "$agent" join --server "$server" --id nccl --nnodes 1 \
    --nproc-per-node gpu --gpucheck strict --tee --log-dir "$logs/nccl" \
    -- "$PY" "$root/tests/gpu/nccl_worker.py"
if grep -q "NCCL_ASYNC_ERROR_HANDLING is deprecated" "$logs/nccl-job.log"; then
	echo "nccl-job: torch warned of NCCL_ASYNC_ERROR_HANDLING" | tee -a "$summary"
	failed="$failed nccl-deprecated"
fi
grep -q '"allreduce_ok": true' "$logs/nccl-job.log" ||
	failed="$failed nccl-allreduce"

part torchrun-entry-point 120 "$self" --sub torchruns

# Recovery from kill -9 of a node (docs/RECOVERY.md) on this machine's
# torch: on gloo always (the torch 2.x side of in-process restart), and on
# NCCL where there is a GPU per node (NCCL refuses two ranks of one
# communicator on one GPU).
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)
part recovery-gloo 240 env RDZV_BUILD_ROOT="$build" PYTHONPATH="$pylib" \
    RDZV_AGENT="$agent" "$PY" "$root/bench/recovery.py" --nodes 4 \
    --modes agent-inproc,agent,torchrun-rdzv --runs 2 --python "$PY"
if [ "${gpus:-0}" -ge 2 ]; then
	n=$(( gpus < 4 ? gpus : 4 ))
	part recovery-nccl 240 env RDZV_BUILD_ROOT="$build" \
	    PYTHONPATH="$pylib" RDZV_AGENT="$agent" "$PY" \
	    "$root/bench/recovery.py" --nodes "$n" --gpus "$n" \
	    --modes agent-inproc,agent --runs 2 --backend nccl --python "$PY"
else
	echo "recovery-nccl          skipped (${gpus:-0} GPU: NCCL needs one per node)" \
	    >>"$summary"
fi

part compare 120 "$root/bench/compare.sh" "$build" --nodes 8 --runs 1 \
    --python "$PY"
part torchrun-bench 180 "$PY" "$root/bench/torchrun_bench.py" \
    --build "$build" --nodes 8 --python "$PY" --timeout 120

part ptxas 60 sh -c 'sh "$1/tests/integration/gpu/test_ptxas.sh" \
    "$2/tests/integration/gpu/gpucheck_dump_ptx" \
    "$1/lib/gpucheck/gpucheck_kernel.ptx"; rc=$?; [ $rc -eq 77 ] && exit 0; exit $rc' \
    sh "$root" "$build"

echo
cat "$summary"
if [ -n "$failed" ]; then
	echo "FAILED:$failed" | tee -a "$summary"
	exit 1
fi
echo "all passed" | tee -a "$summary"
