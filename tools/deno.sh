#!/usr/bin/env bash
# Runs the pinned Deno, installing it from the npm registry into a cache outside the repo first.
# Usage: tools/deno.sh <deno arguments...>
#
# The install is verified as a lockfile would: the platform package's tarball (`@deno/<platform>`,
# which holds the `deno` binary; the `deno` wrapper package only links to it and is not needed)
# is fetched with `npm pack`, its sha512 compared with the integrity pinned below (from
# `npm view @deno/<platform>@VERSION dist.integrity`), and only then unpacked. A mismatch stops
# here and installs nothing. The cache is trusted afterwards, as an npm node_modules is.
#
# Environment: KOPF_TS_CACHE (cache directory), KOPF_TS_DENO_INTEGRITY (replaces the pinned
# integrity: for tests of the verification, or a platform not listed).
set -euo pipefail
DENO_VERSION="2.9.6"
declare -A INTEGRITY=(
  [linux-x64-glibc]="sha512-3md4TKLCuzsLDmfOoC5KN7NAZaxSVkMgm64vg6foD00JBADCpYS2/5QqXfzgnP5ZQz3iLP9vBQJtEgc116OAoQ=="
  [linux-arm64-glibc]="sha512-poqhoH9B3nYloigEMPT5t8HY+wBeiuea1An5Q7fqgJzP0SYmWsoS/oUnWO/pEiA4ofzIBy1Elt/in58xKtxEoQ=="
  [darwin-x64]="sha512-tPi3CWPRdjW1MaWlvWjORE7Ass5SADdWdj1BF1Q1PEdzi+5u/mC5YhmZzniMiPr81PpaFeqjXaLAsfb8lFsZ0Q=="
  [darwin-arm64]="sha512-V8uO1Aolrl/yvdMb5lOtgtigs8YuZBjrOrgviVMiYkQ0swymFfzkae1wZak4Xi24t7vf7d/eiMb/7ryjjVm+tg=="
)
CACHE="${KOPF_TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-ts}"
dir="$CACHE/deno-$DENO_VERSION-verified"
deno="$dir/deno"

if [[ ! -x "$deno" ]]; then
  case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) platform=linux-x64-glibc ;;
    Linux/aarch64 | Linux/arm64) platform=linux-arm64-glibc ;;
    Darwin/x86_64) platform=darwin-x64 ;;
    Darwin/arm64) platform=darwin-arm64 ;;
    *) platform="" ;;
  esac
  expected="${KOPF_TS_DENO_INTEGRITY:-${INTEGRITY[$platform]:-}}"
  if [[ -z "$platform" || -z "$expected" ]]; then
    echo "error: no pinned Deno package for $(uname -s)/$(uname -m); set KOPF_TS_DENO_INTEGRITY to the sha512 integrity of its @deno package" >&2
    exit 2
  fi
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "error: Deno is installed from the npm registry and needs Node.js with npm on PATH" >&2
    exit 2
  fi
  package="@deno/$platform@$DENO_VERSION"
  mkdir -p "$CACHE"
  # Unpacked in a directory of its own and moved into place at once: concurrent first runs
  # do not see a half-written binary.
  tmp="$(mktemp -d "$CACHE/.deno-install.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "[deno] installing $package from npm into $dir" >&2
  (cd "$tmp" && npm pack "$package" --silent --pack-destination "$tmp" >/dev/null)
  tarball=("$tmp"/*.tgz)
  actual="$(node -e '
    const data = require("fs").readFileSync(process.argv[1]);
    process.stdout.write("sha512-" + require("crypto").createHash("sha512").update(data).digest("base64"));
  ' "${tarball[0]}")"
  if [[ "$actual" != "$expected" ]]; then
    echo "error: integrity mismatch for $package: expected $expected, got $actual; nothing installed" >&2
    exit 3
  fi
  mkdir "$tmp/out"
  tar -xzf "${tarball[0]}" -C "$tmp/out" package/deno
  mv "$tmp/out/package" "$tmp/deno-dir"
  "$tmp/deno-dir/deno" --version >/dev/null
  # Another first run may have finished meanwhile: then its (equally verified) copy stays.
  mv -T "$tmp/deno-dir" "$dir" 2>/dev/null || true
  rm -rf "$tmp"
  trap - EXIT
fi
# KOPF_TS_DENO_PRIVATE=NAME: run a copy of the verified executable of its own (made once, a copy,
# not a link) that no other process of the checkout maps — as an operator's binary in its
# container is. The benchmark runs its Deno operators so: pages that another process maps too
# cannot be paged out (settings.process.pageOutDelay), and the harness itself runs on `deno`.
if [[ -n "${KOPF_TS_DENO_PRIVATE:-}" ]]; then
  if [[ ! "$KOPF_TS_DENO_PRIVATE" =~ ^[A-Za-z0-9_-]+$ ]]; then
    echo "error: KOPF_TS_DENO_PRIVATE must be a plain name (letters, digits, - and _)" >&2
    exit 2
  fi
  private="$dir/private-$KOPF_TS_DENO_PRIVATE/deno"
  # The same size as the verified one: made by this script from it (no whole-file compare at
  # every start, which the benchmark would count as the operator's CPU).
  if [[ ! -x "$private" || "$(stat -c %s "$private")" != "$(stat -c %s "$deno")" ]]; then
    mkdir -p "$(dirname "$private")"
    cp "$deno" "$private.tmp.$$" && chmod 755 "$private.tmp.$$" && mv -f "$private.tmp.$$" "$private"
  fi
  deno="$private"
fi
exec "$deno" "$@"
