#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module proxy into a
# version-keyed cache outside the repository, and reuses them when already present.
#
# Usage: tools/kube-binaries.sh            # build if missing, print the bin directory
#        tools/kube-binaries.sh --node     # also kubelet and kube-scheduler (testing/plane/node.ts)
#        KOPF_TS_CACHE=/some/dir tools/kube-binaries.sh
#
# Needs: Go >= 1.26 on PATH and the Go module proxy. Nothing is downloaded from anywhere else.
set -euo pipefail

K8S_VERSION="${KOPF_TS_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${KOPF_TS_ETCD_VERSION:-v3.6.16}"
CACHE="${KOPF_TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-ts}"
BIN="$CACHE/kube/$K8S_VERSION-etcd-$ETCD_VERSION/bin"
NODE=""
case "${1:-}" in
  "") ;;
  --node) NODE=1 ;;
  *) echo "usage: tools/kube-binaries.sh [--node]" >&2; exit 2 ;;
esac

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/etcd" && -x "$BIN/kube-controller-manager" ]] &&
  [[ -z "$NODE" || (-x "$BIN/kubelet" && -x "$BIN/kube-scheduler") ]]; then
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: the test control plane is built from source and needs a Go toolchain (>= 1.26) on PATH" \
    "and the Go module proxy; install Go from https://go.dev/dl or your package manager" >&2
  exit 2
fi

log() { echo "[kube-binaries] $*" >&2; }

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOCACHE="${GOCACHE:-$CACHE/go/build}"
work="$CACHE/kube/work-$K8S_VERSION-$ETCD_VERSION"
mkdir -p "$work/kube" "$work/etcd" "$BIN"

minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
staging="v0.${K8S_VERSION#v1.}"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build_kube() { # commands of k8s.io/kubernetes/cmd, built from the wrapper module
  local cmd
  for cmd in "$@"; do
    log "building $cmd (a cold build takes about 5 minutes on 2 cores)"
    go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldflags" \
      -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"
  done
}

node_missing=""
[[ -n "$NODE" && (! -x "$BIN/kubelet" || ! -x "$BIN/kube-scheduler") ]] && node_missing=1
if [[ ! -x "$BIN/kube-apiserver" || ! -x "$BIN/kube-controller-manager" ]] ||
  [[ -n "$node_missing" && ! -f "$work/kube/go.mod" ]]; then
  log "preparing wrapper module for k8s.io/kubernetes@$K8S_VERSION"
  cd "$work/kube"
  rm -f go.mod go.sum # a failed earlier attempt must not pin anything
  go mod init kopf-ts.invalid/kubebin >/dev/null 2>&1
  if ! modfile="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')" \
    || [[ -z "$modfile" ]]; then
    echo "error: cannot download k8s.io/kubernetes@$K8S_VERSION from the Go module proxy ($(go env GOPROXY))" >&2
    exit 2
  fi
  # Staging modules are required at v0.0.0 and must point at their published v0.X.Y twins.
  for mod in $(awk '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// { print $1 }' "$modfile"); do
    go mod edit -replace="$mod=$mod@$staging"
  done
  godebug="$(awk '$1 == "godebug" { print $2 }' "$modfile")"
  [[ -n "$godebug" ]] && go mod edit -godebug="$godebug"
  log "resolving modules (first run downloads a few hundred MB)"
  go get "k8s.io/kubernetes@$K8S_VERSION" >&2
  # Versions pinned here too: a bare package path means @upgrade, which would pull the newest
  # k8s.io/kubernetes while the staging modules stay at this version (and then fail to build).
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" >&2
  for cmd in kube-apiserver kube-controller-manager; do
    [[ -x "$BIN/$cmd" ]] || build_kube "$cmd"
  done
fi

if [[ -n "$node_missing" ]]; then
  # The node's two: the kubelet needs one more module (k8s.io/cri-streaming), which `go get`
  # resolves at the version k8s.io/kubernetes requires.
  cd "$work/kube"
  go get -tool "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" >&2
  build_kube kubelet kube-scheduler
fi

if [[ ! -x "$BIN/etcd" ]]; then
  log "building etcd $ETCD_VERSION"
  cd "$work/etcd"
  [[ -f go.mod ]] || go mod init kopf-ts.invalid/etcdbin >/dev/null 2>&1
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
  mv "$BIN/etcd.tmp" "$BIN/etcd"
fi

echo "$BIN"
