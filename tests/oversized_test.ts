/**
 * Objects too large for the diff-base annotation: the API server limits an object's annotations
 * to 262,144 bytes. With a large spec and kubectl's own last-applied copy of it, the diff-base
 * would not fit: it goes to the status instead, and the object is handled once, not forever.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "an object whose diff-base would overflow the annotations is handled once, its diff-base kept in status",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("oversized");
    const runs: string[] = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn() {
        runs.push("create");
        return "created";
      });
      on.update("kopfexamples", { registry }, function update_fn({ diff }) {
        runs.push(`update ${JSON.stringify(diff.map(([op, path]) => [op, path]))}`);
      });
    }, { namespaces: [namespace] });
    await op.ready;
    const spec = { blob: "x".repeat(150_000) };
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: {
        name: "big",
        // As `kubectl apply` leaves it: a second copy of the spec among the annotations.
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify(spec) },
      },
      spec,
    }, { namespace });
    await op.waitForLog(/^The diff-base \(\d+ characters\) would take the object's annotations/);
    const stored = await eventually(async () => {
      const obj = await client.api.get(KOPFEXAMPLES, "big", { namespace });
      const kopf = (obj.status as { kopf?: Record<string, string> } | undefined)?.kopf;
      return kopf?.["last-handled-configuration"] ? obj : undefined;
    });
    assert.equal((stored.status as { create_fn?: string }).create_fn, "created");
    const annotations = stored.metadata?.annotations ?? {};
    assert.equal("kopf.zalando.org/last-handled-configuration" in annotations, false);

    await client.api.patch(KOPFEXAMPLES, "big", { spec: { extra: 1 } }, { namespace });
    await eventually(() => runs.length >= 2 || undefined, 15_000, "the update handler");
    await new Promise((r) => setTimeout(r, 1_000)); // nothing else runs meanwhile
    assert.deepEqual(runs, ["create", 'update [["add",["spec","extra"]]]']);
    assert.equal(op.logs.filter((e) => e.level === "error").length, 0);
  },
);
