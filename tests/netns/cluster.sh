#!/bin/sh
# A test network by hand (docs/TESTING.md): rdzvd and N nodes, each in its
# own network namespace on a bridge, 10.77.0.0/24 only inside.
#   tests/netns/cluster.sh up 3     # prints each host's address and namespace
#   ip netns exec rzcluster-n0 ...  # run anything on a host
#   tests/netns/cluster.sh down
# RZ_TAG names the network (default rzcluster), for several side by side.
set -eu
here=$(dirname "$0")
case ${1:-} in
up)	exec /usr/bin/python3 "$here/netns.py" up "${2:-3}" --tag "${RZ_TAG:-rzcluster}" ;;
down)	exec /usr/bin/python3 "$here/netns.py" down --tag "${RZ_TAG:-rzcluster}" ;;
list)	exec /usr/bin/python3 "$here/netns.py" list --tag "${RZ_TAG:-rzcluster}" ;;
*)	echo "usage: $0 up [N] | down | list" >&2; exit 2 ;;
esac
