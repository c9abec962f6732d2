#!/bin/sh
# Packs what tests/gpu/run.sh needs into one folder that runs on a GPU
# machine without rdzv's build dependencies (docs/TESTING.md):
#
#   tests/gpu/pack.sh BUILD_DIR DEST
#
# DEST gets the programs in the build folder's layout (DEST/build), the
# shared libraries ldd lists for them except glibc's own (DEST/lib), the
# python package's metadata (DEST/build/python), and the sources run.sh
# uses (tests/gpu, bench, python/rdzv, the ptxas test and the PTX). Then,
# there:
#
#   sh DEST/run-gpu.sh          (OUT=DIR for the logs; PY=... for torch)
set -eu

build=${1:?usage: tests/gpu/pack.sh BUILD_DIR DEST}
dest=${2:?usage: tests/gpu/pack.sh BUILD_DIR DEST}
root=$(cd "$(dirname "$0")/../.." && pwd)

programs="daemon/rdzvd client/agent/rdzv-agent client/ctl/rdzvctl
bench/rdzv-bench tests/unit/test_gpucheck
tests/integration/gpu/gpucheck_dump_ptx"
mkdir -p "$dest/build/python" "$dest/lib"
for p in $programs; do
	mkdir -p "$dest/build/$(dirname "$p")"
	cp "$build/$p" "$dest/build/$p"
done
cp "$build/python/METADATA" "$build/python/entry_points.txt" \
    "$build/python/top_level.txt" "$dest/build/python/"

# Every library ldd resolves, but glibc's (the GPU machine has its own,
# newer one) and the dynamic loader.
for p in $programs; do
	ldd "$build/$p" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|\
	libresolv.so.*|ld-linux*) continue ;;
	esac
	cp -L "$lib" "$dest/lib/"
done

for f in tests/gpu/run.sh tests/gpu/nccl_worker.py \
    tests/integration/gpu/test_ptxas.sh lib/gpucheck/gpucheck_kernel.ptx; do
	mkdir -p "$dest/$(dirname "$f")"
	cp "$root/$f" "$dest/$f"
done
mkdir -p "$dest/bench" "$dest/python"
cp "$root"/bench/*.sh "$root"/bench/*.py "$dest/bench/"
cp -r "$root/python/rdzv" "$dest/python/"
find "$dest/python" -name __pycache__ -prune -exec rm -rf {} +

cat >"$dest/run-gpu.sh" <<'EOF'
#!/bin/sh
# tests/gpu/run.sh on the programs and libraries packed here.
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
exec sh "$here/tests/gpu/run.sh" "$here/build"
EOF
chmod +x "$dest/run-gpu.sh" "$dest/tests/gpu/run.sh"
echo "packed into $dest: $(ls "$dest/lib" | wc -l) libraries;" \
    "run sh $dest/run-gpu.sh"
