#!/bin/sh
# The GPU check's kernel (lib/gpucheck/gpucheck_kernel.ptx), as embedded in the
# binaries, must assemble with the CUDA toolkit's ptxas for every GPU
# architecture that ptxas supports, sm_70 (Volta) and sm_90 (Hopper) named
# explicitly. The driver JIT-compiles the same text on a GPU node; ptxas is
# the closest check of it on a machine without one.
#
# usage: test_ptxas.sh DUMP_PTX SOURCE_PTX
# Exits 77 (skipped) when no ptxas is found ($PTXAS, PATH, /usr/local/cuda).
set -eu

dump=$1
source=$2

ptxas=${PTXAS:-}
if [ -z "$ptxas" ]; then
	ptxas=$(command -v ptxas 2>/dev/null || true)
fi
if [ -z "$ptxas" ] && [ -x /usr/local/cuda/bin/ptxas ]; then
	ptxas=/usr/local/cuda/bin/ptxas
fi
if [ -z "$ptxas" ]; then
	echo "no ptxas (set PTXAS, or install the CUDA toolkit): skipped"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$dump" > "$tmp/kernel.ptx"
if ! cmp -s "$tmp/kernel.ptx" "$source"; then
	echo "FAIL: the embedded PTX differs from $source"
	diff "$source" "$tmp/kernel.ptx" | head -20
	exit 1
fi

echo "$("$ptxas" --version | tail -1)"
# The architectures this ptxas knows, from its --help.
archs=$("$ptxas" --help | sed -n '/--gpu-name/,/Default value/p' |
	grep -o "'sm_[0-9a-z]*'" | tr -d "'" | sort -u)
if [ -z "$archs" ]; then
	echo "FAIL: no sm_ architectures in '$ptxas --help'"
	exit 1
fi

failed=0
assemble() {
	if "$ptxas" -arch="$1" "$tmp/kernel.ptx" -o "$tmp/$1.cubin" \
	    > "$tmp/$1.log" 2>&1 && grep -q rdzv_check "$tmp/$1.cubin"; then
		echo "ok   $1"
	else
		echo "FAIL $1:"
		sed 's/^/     /' "$tmp/$1.log"
		failed=1
	fi
}

for a in sm_70 sm_90; do
	if echo "$archs" | grep -qx "$a"; then
		assemble "$a"
	else
		# CUDA 13 dropped Maxwell, Pascal and Volta (sm_50 to sm_72)
		# from its tools; drivers still JIT the PTX for them.
		echo "skip $a: this ptxas does not support it"
	fi
done
for a in $archs; do
	case $a in sm_70|sm_90) continue ;; esac
	assemble "$a"
done
exit $failed
