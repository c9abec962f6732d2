#!/bin/sh
# Installs the Debian 12 packages rdzv needs that are missing, then
# configures and builds it with meson into ./build (or $RDZV_BUILD).
# Usage: deploy/install-deps.sh [build|test|demo]
set -eu
cd "$(dirname "$0")/.."
what=${1:-build}

pkgs="gcc pkg-config meson ninja-build protobuf-c-compiler libprotobuf-c-dev
libevent-dev libnghttp2-dev libssl-dev libsqlite3-dev libjansson-dev
libinih-dev libsystemd-dev libmunge-dev openssl scdoc"
case $what in
test) pkgs="$pkgs python3-grpcio python3-grpc-tools python3-protobuf
python3-pytest python3-cryptography python3-torch sqlite3 fiu-utils curl clang libclang-rt-14-dev valgrind
dpkg-dev debhelper fakeroot lintian bash-completion man-db systemd
prometheus chromium chromium-driver python3-selenium slurm-wlm munge
etcd-server etcd-client
iproute2 nftables ethtool stress-ng" ;;
demo) pkgs="$pkgs python3-torch" ;;
esac

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "rdzv: installing:$missing" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $missing >&2
fi

# RDZV_MESON_OPTIONS: options for a new build folder (tests/run.sh sets
# -Dwerror=true, so that its first build is the one it tests).
build=${RDZV_BUILD:-build}
if [ ! -f "$build/build.ninja" ]; then
	# shellcheck disable=SC2086
	meson setup "$build" ${RDZV_MESON_OPTIONS:-} >&2
fi
ninja -C "$build" >&2
