#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs Deno (npm), builds the control plane
# binaries (Go module proxy; cached outside the repo), starts ONE control plane for the run,
# runs the static checks and every test, stops the control plane, and prints
# "N passed, N failed" as its last line.
#
# Usage: tools/test.sh [deno test filter/paths...]
set -uo pipefail
cd "$(dirname "$0")/.."
DENO=tools/deno.sh
export NO_COLOR=1

passed=0
failed=0
check() { # name, command...
  local name=$1; shift
  if "$@" >/tmp/kopf-ts-check.$$ 2>&1; then
    passed=$((passed + 1)); echo "check $name ... ok"
  else
    failed=$((failed + 1)); echo "check $name ... FAILED"; tail -n 30 /tmp/kopf-ts-check.$$
  fi
  rm -f /tmp/kopf-ts-check.$$
}

$DENO --version | head -1 || { echo "0 passed, 1 failed"; exit 1; }
if ! bin="$(tools/kube-binaries.sh)"; then
  echo "error: could not build the test control plane (see above)"
  echo "0 passed, 1 failed"; exit 1
fi
export KOPF_TS_KUBE_BIN="$bin"

# Prometheus and promtool (Debian's `prometheus` package) for the metrics tests: installed when
# missing and apt-get can be used, bounded in time; otherwise those tests say why they skip.
if ! command -v prometheus >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 &&
  [[ $(id -u) -eq 0 ]] && { [[ $# -eq 0 ]] || [[ "$*" == *metrics* ]]; }; then
  echo "[test] installing Debian's prometheus package (for tests/metrics_test.ts)"
  { timeout 300 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 600 \
      apt-get install -y -q --no-install-recommends prometheus; } >/tmp/kopf-ts-apt.$$ 2>&1 ||
    { echo "[test] could not install prometheus; the PromQL test will skip:"; tail -n 5 /tmp/kopf-ts-apt.$$; }
  rm -f /tmp/kopf-ts-apt.$$
fi

# The test node (tests/incluster_test.ts, testing/plane/node.ts): Debian's containerd, runc and CNI
# plugins, and the kubelet and kube-scheduler built like the control plane (cached). Bounded in
# time; when any of it fails, the node test says why it skips.
node_tests=""
if [[ $# -eq 0 || "$*" == *incluster* ]] && [[ $(uname -s) == Linux && $(id -u) -eq 0 ]]; then
  node_tests=1
  if ! command -v containerd >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 ||
    [[ ! -x /usr/lib/cni/loopback && ! -x /opt/cni/bin/loopback ]]; then
    if command -v apt-get >/dev/null 2>&1; then
      echo "[test] installing Debian's containerd, runc, containernetworking-plugins (for the test node)"
      { timeout 300 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 600 \
          apt-get install -y -q --no-install-recommends containerd runc containernetworking-plugins; } \
        >/tmp/kopf-ts-apt.$$ 2>&1 ||
        { echo "[test] could not install containerd/runc; the node test will skip:"; tail -n 5 /tmp/kopf-ts-apt.$$; }
      rm -f /tmp/kopf-ts-apt.$$
    fi
  fi
  if ! timeout 1200 tools/kube-binaries.sh --node >/tmp/kopf-ts-node-build.$$ 2>&1; then
    echo "[test] could not build the kubelet and kube-scheduler; the node test will skip:"
    tail -n 5 /tmp/kopf-ts-node-build.$$
  fi
  rm -f /tmp/kopf-ts-node-build.$$
fi

if [[ $# -eq 0 ]]; then
  check fmt $DENO fmt --check
  check lint $DENO lint
  check types $DENO check mod.ts client.ts tuning.ts cli.ts testing/mod.ts bench/*.ts bench/lib/*.ts bench/handlers/*.ts
  check layers $DENO run -A tools/check_layers.ts
  check doc-lint $DENO doc --lint mod.ts client.ts tuning.ts testing/mod.ts core/engines/observability/metrics.ts
  # The JSDoc examples (```ts blocks, @example) of every module, type-checked (about 5 s warm).
  check doc-examples $DENO check --doc $(grep -rlE --include='*.ts' '@example|^ *\* ```' \
    mod.ts client.ts tuning.ts cli.ts core kits testing | grep -v '_test\.ts$')
  check publish-dry-run $DENO publish --dry-run --allow-dirty
fi

run=$(mktemp -d)
$DENO run -A tools/control_plane.ts start --env-file "$run/env" >"$run/plane.log" 2>&1 &
plane=$!
cleanup() { kill -TERM "$plane" 2>/dev/null; wait "$plane" 2>/dev/null; rm -rf "$run"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 240); do
  [[ -s "$run/env" ]] && break
  kill -0 "$plane" 2>/dev/null || break
  sleep 0.5
done
if [[ ! -s "$run/env" ]]; then
  echo "error: the test control plane did not start:"; tail -n 40 "$run/plane.log"
  echo "$passed passed, $((failed + 1)) failed"; exit 1
fi
# shellcheck disable=SC1091
source "$run/env"

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(core kits testing tests examples)
existing=()
for t in "${targets[@]}"; do [[ -e "${t%%=*}" || "$t" == --* ]] && existing+=("$t"); done
$DENO test -A --no-check=remote "${existing[@]}" 2>&1 | tee "$run/test.log"
summary=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$run/test.log" | tail -n 1)
tp=$(sed -E 's/.*\| ([0-9]+) passed.*/\1/' <<<"$summary")
tf=$(sed -E 's/.*passed[^|]*\| ([0-9]+) failed.*/\1/' <<<"$summary")
if [[ -z "$summary" ]]; then tp=0; tf=1; echo "error: deno test printed no summary"; fi
passed=$((passed + tp)); failed=$((failed + tf))

# The node test runs in network and mount namespaces of its own (tools/netns.sh), with a control
# plane of its own there; the image is built here first, where the package registries are reached.
if [[ -n "$node_tests" ]]; then
  echo "[test] tests/incluster_test.ts on a node of its own (tools/netns.sh)"
  if $DENO run -A --no-check=remote cli.ts build --image --tag kopf-incluster:test \
    tests/fixtures/incluster_operator.ts -o "$run/incluster.oci.tar" >"$run/image.log" 2>&1; then
    tail -n 1 "$run/image.log"
    env -u KOPF_TS_TEST_KUBECONFIG -u KOPF_TS_TEST_ETCD_URL KOPF_TS_TEST_IMAGE="$run/incluster.oci.tar" \
      timeout "$([[ "${KOPF_TS_TEST_TOKEN_ROTATION:-}" == 1 ]] && echo 1800 || echo 900)" \
      tools/netns.sh $DENO test -A --no-check=remote tests/incluster_test.ts 2>&1 |
      tee "$run/node.log"
    summary=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$run/node.log" | tail -n 1)
    if [[ -n "$summary" ]]; then
      passed=$((passed + $(sed -E 's/.*\| ([0-9]+) passed.*/\1/' <<<"$summary")))
      failed=$((failed + $(sed -E 's/.*passed[^|]*\| ([0-9]+) failed.*/\1/' <<<"$summary")))
    else
      echo "[test] the node test did not run (see above)"
      grep -q "cannot make network and mount namespaces\|needs root\|needs \`" "$run/node.log" ||
        failed=$((failed + 1))
    fi
  else
    echo "error: kopf build --image failed:"; tail -n 20 "$run/image.log"
    failed=$((failed + 1))
  fi
fi
echo
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
