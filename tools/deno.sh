#!/usr/bin/env bash
# Runs the pinned Deno, installing it from the npm registry into a cache outside the repo first.
# Usage: tools/deno.sh <deno arguments...>
set -euo pipefail
DENO_VERSION="2.9.6"
CACHE="${KOPF_TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-ts}"
dir="$CACHE/deno-$DENO_VERSION"
deno="$dir/node_modules/.bin/deno"
if [[ ! -x "$deno" ]]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "error: Deno is installed from the npm registry and needs Node.js with npm on PATH" >&2
    exit 2
  fi
  mkdir -p "$dir"
  echo "[deno] installing deno@$DENO_VERSION from npm into $dir" >&2
  (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error "deno@$DENO_VERSION" >&2)
  "$deno" --version >/dev/null
fi
exec "$deno" "$@"
