#!/usr/bin/env bash
# Runs a command in network and mount namespaces of its own, for the test node
# (testing/plane/node.ts): only `lo`, up, with the node's address 192.0.2.10/32 beside 127.0.0.1
# (TEST-NET-1: documentation only, never routed; it exists only in this namespace, and the kubelet
# refuses a 127.x node address).
# Everything the command starts — control plane, containerd, kubelet, hostNetwork Pods — talks
# over this namespace's loopback and that address; nothing can reach any other host (there is no
# route), and the kubelet's mounts vanish with the mount namespace.
#
# Usage: tools/netns.sh COMMAND [ARGS...]
#   tools/netns.sh tools/deno.sh run -A tools/control_plane.ts start --node
#   tools/netns.sh tools/deno.sh test -A --no-check=remote tests/incluster_test.ts
#
# Needs root and util-linux's `unshare`, iproute2's `ip`. Exit code 3 when the namespace cannot be
# made (with one line saying why), else the command's.
set -euo pipefail
NODE_IP="${KOPF_TS_NODE_IP:-192.0.2.10}"

if [[ $# -eq 0 ]]; then
  echo "usage: tools/netns.sh COMMAND [ARGS...]" >&2
  exit 2
fi
if [[ "${1:-}" == --inside ]]; then
  shift
  ip link set lo up
  ip addr add "$NODE_IP/32" dev lo
  export KOPF_TS_NODE_IP="$NODE_IP"
  exec "$@"
fi
for tool in unshare ip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: tools/netns.sh needs \`$tool\` (util-linux, iproute2)" >&2
    exit 3
  fi
done
if [[ $(id -u) -ne 0 ]]; then
  echo "error: tools/netns.sh makes network and mount namespaces and needs root" >&2
  exit 3
fi
if ! unshare --net --mount true 2>/dev/null; then
  echo "error: cannot make network and mount namespaces here (unshare --net --mount failed)" >&2
  exit 3
fi
# --fork: the command is a child of unshare, which waits for it and passes on its exit code.
exec unshare --net --mount --propagation private --fork -- "$0" --inside "$@"
