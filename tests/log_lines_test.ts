/**
 * The framework's own log lines around a creation, as Kopf's documentation shows them (LOG-17).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { applyCrds, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "a creation logs First appearance with the body (debug), progress and the handler's success (LOG-17)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("log-lines");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn() {
        return 1;
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "first" },
      spec: { field: "value" },
    }, { namespace });
    await op.waitForLog(/^Handler 'create_fn' succeeded\.$/);
    const first = op.logs.find((e) => e.message.startsWith("First appearance: "));
    assert.ok(first, "no First appearance line");
    assert.equal(first.level, "debug");
    const body = JSON.parse(first.message.slice("First appearance: ".length));
    assert.equal(body.metadata.name, "first");
    assert.deepEqual(body.spec, { field: "value" });
    const order = [
      "First appearance: ",
      "Creation is in progress",
      "Handler 'create_fn' succeeded.",
    ]
      .map((prefix) => op.logs.findIndex((e) => e.message.startsWith(prefix)));
    assert.ok(order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1]!)), `order ${order}`);
    // Only once: the object's later cycles are not first appearances.
    assert.equal(op.logs.filter((e) => e.message.startsWith("First appearance: ")).length, 1);
  },
);
