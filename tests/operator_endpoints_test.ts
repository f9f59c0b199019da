/**
 * The operator's own endpoints as parts (issue 29): a liveness or metrics server that stops by
 * itself while the operator runs is not silent — one ERROR line names it, and `/healthz` (while
 * the liveness server still runs) answers 503 naming it; the operator's stop stays clean.
 *
 * A server stops by itself when its listener goes away; the test closes the metrics server's
 * listener under it (found by wrapping `Deno.listen` while the operator starts). In-process,
 * against the shared control plane.
 */

import assert from "node:assert/strict";
import { on } from "../mod.ts";
import { startOperator } from "./_operator.ts";
import { applyCrdsFile, eventually, testNamespace } from "./_support.ts";
import { closeMetricsListener, freePort, recordingListeners } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "a metrics server that stops by itself is named: one ERROR line, and /healthz answers 503 naming it",
  opts,
  async () => {
    await applyCrdsFile("crds/example.yaml");
    const ns = await testNamespace("endpoints");
    const healthz = `http://127.0.0.1:${freePort()}/healthz`;
    const { result: op, listeners } = await recordingListeners(async () => {
      const op = await startOperator((registry) => {
        on.create("kopfexamples", { registry }, function created() {});
      }, { namespaces: [ns], liveness: healthz, metrics: "http://127.0.0.1:0/metrics" });
      await op.ready;
      return op;
    });
    try {
      const line = await op.waitForLog(/^Serving metrics at /);
      const metrics = line.message.replace(/^Serving metrics at /, "");
      await closeMetricsListener(metrics, healthz, listeners); // it stops by itself

      const error = await eventually(
        () => op.logs.find((e) => /metrics endpoint/.test(e.message)),
        20_000,
        "a log line naming the metrics endpoint",
      );
      assert.equal(error.level, "error");
      assert.equal(error.message, "The metrics endpoint is not running: it exited");
      const answer = await eventually(
        async () => {
          const response = await fetch(healthz);
          const body = await response.text();
          return response.status === 503 ? body : undefined;
        },
        20_000,
        "/healthz answering 503",
      );
      assert.match(answer, /The metrics endpoint is not running: it exited/);
      assert.equal(
        op.logs.filter((e) => /metrics endpoint/.test(e.message)).length,
        1,
        "one line names it",
      );
    } finally {
      await op.stop(); // a missing endpoint does not fail the operator: the stop is clean
    }
    assert.ok(op.logs.some((e) => /Operator stopped/.test(e.message)));
  },
);
