#!/usr/bin/env bash
# A fake exec credential plugin for config_credentials_test.ts.
#
# Counts its runs in $TEST_PLUGIN_STATE/count (so tests can tell a cached token from a re-run),
# saves KUBERNETES_EXEC_INFO and its arguments there, and prints an ExecCredential of the
# apiVersion it was asked for. $TEST_PLUGIN_MODE, or the file $TEST_PLUGIN_STATE/mode when it
# exists (so a test can switch modes between runs), selects the answer:
#   ok (default): token "token-<count>" expiring in 2100;  noexpiry: no expirationTimestamp;
#   expired: a timestamp in the past;  fail: exit 3 with two lines on stderr;
#   badjson: text that is not JSON;  cert: a client certificate instead of a token.
set -euo pipefail
state="${TEST_PLUGIN_STATE:?TEST_PLUGIN_STATE must name a directory}"
count=$(($(cat "$state/count" 2>/dev/null || echo 0) + 1))
echo "$count" >"$state/count"
printf '%s' "${KUBERNETES_EXEC_INFO:-}" >"$state/exec_info"
printf '%s\n' "$@" >"$state/args"
mode="${TEST_PLUGIN_MODE:-ok}"
if [[ -f "$state/mode" ]]; then mode="$(cat "$state/mode")"; fi
api="$(printf '%s' "${KUBERNETES_EXEC_INFO:-}" | sed -n 's/.*"apiVersion":"\([^"]*\)".*/\1/p')"
head="\"apiVersion\":\"$api\",\"kind\":\"ExecCredential\""
case "$mode" in
  fail)
    echo "error: you must be logged in to the server (run 'fake-login' first)" >&2
    echo "a second line that should not appear" >&2
    exit 3
    ;;
  badjson) echo "this is not JSON" ;;
  cert) echo "{$head,\"status\":{\"clientCertificateData\":\"x\",\"clientKeyData\":\"y\"}}" ;;
  expired) echo "{$head,\"status\":{\"token\":\"token-$count\",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"}}" ;;
  noexpiry) echo "{$head,\"status\":{\"token\":\"token-$count\"}}" ;;
  *) echo "{$head,\"status\":{\"token\":\"token-$count\",\"expirationTimestamp\":\"2100-01-01T00:00:00Z\"}}" ;;
esac
