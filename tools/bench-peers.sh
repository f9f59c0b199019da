#!/usr/bin/env bash
# Builds the benchmark's peer contenders (bench/peers/, docs/performance.md "Peers") into a
# cache outside the repository, keyed by a hash of their pinned sources, and reuses them when
# already there. Prints the path of what was asked for on stdout.
#
# Usage: tools/bench-peers.sh controller-runtime   # prints the Go binary's path
#        tools/bench-peers.sh client-node          # prints the directory holding node_modules
#        KOPF_TS_CACHE=/some/dir tools/bench-peers.sh …
#
# controller-runtime: Go (>= 1.26) on PATH and the Go module proxy, versions from
# bench/peers/controller_runtime/go.mod and go.sum (GOTOOLCHAIN=local: nothing but modules is
# downloaded). client-node: Node.js with npm on PATH and the npm registry; `npm ci` of
# bench/peers/client_node/package-lock.json (no install scripts).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${KOPF_TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-ts}"
log() { echo "[bench-peers] $*" >&2; }
key() { cat "$@" | sha256sum | cut -c1-12; }

case "${1:-}" in
  controller-runtime)
    src="$ROOT/bench/peers/controller_runtime"
    version="$(awk '$1 == "sigs.k8s.io/controller-runtime" { print $2 }' "$src/go.mod")"
    dir="$CACHE/bench-peers/controller-runtime-$version-$(key "$src/go.mod" "$src/go.sum" "$src/main.go")"
    bin="$dir/controller-runtime-peer"
    if [[ ! -x "$bin" ]]; then
      if ! command -v go >/dev/null 2>&1; then
        echo "error: the controller-runtime contender is built from source and needs a Go" \
          "toolchain (>= 1.26) on PATH and the Go module proxy; install Go from https://go.dev/dl" >&2
        exit 2
      fi
      export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0
      export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOCACHE="${GOCACHE:-$CACHE/go/build}"
      log "building the controller-runtime peer ($version; a cold build takes a few minutes)"
      mkdir -p "$dir"
      (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .) >&2
      mv "$bin.tmp" "$bin"
    fi
    echo "$bin"
    ;;
  client-node)
    src="$ROOT/bench/peers/client_node"
    version="$(sed -n 's/.*"@kubernetes\/client-node": "\([^"]*\)".*/\1/p' "$src/package.json")"
    dir="$CACHE/bench-peers/client-node-$version-$(key "$src/package.json" "$src/package-lock.json")"
    if [[ ! -f "$dir/node_modules/@kubernetes/client-node/package.json" ]]; then
      if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
        echo "error: the client-node contender needs Node.js with npm on PATH" >&2
        exit 2
      fi
      log "installing @kubernetes/client-node $version"
      rm -rf "$dir" && mkdir -p "$dir"
      cp "$src/package.json" "$src/package-lock.json" "$dir/"
      (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund) >&2
    fi
    echo "$dir"
    ;;
  *)
    echo "usage: tools/bench-peers.sh controller-runtime|client-node" >&2
    exit 2
    ;;
esac
