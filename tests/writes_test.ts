/**
 * API-friendliness, measured: the writes the operator makes for common cases, counted by its own
 * client against the real API server.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "a create handler with a result costs exactly one write (no status subresource)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("onewrite");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn() {
        return { message: "hello" };
      });
    }, { namespaces: [namespace] });
    await op.ready;
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "a" },
      spec: {},
    }, {
      namespace,
    });
    const done = await eventually(async () => {
      const obj = await client.api.get(KOPFEXAMPLES, "a", { namespace });
      return (obj.status as { create_fn?: unknown } | undefined)?.create_fn ? obj : undefined;
    });
    assert.deepEqual(done.status, { create_fn: { message: "hello" } });
    await sleep(1500); // let any extra cycle (there should be none) happen
    const used = op.client.counters.since(before);
    assert.equal(used.writes({ resource: "kopfexamples" }), 1, JSON.stringify(used.entries()));
    assert.equal(
      used.count({ verb: ["get", "list"], resource: "kopfexamples" }),
      0,
      "no extra reads",
    );
    assert.equal(
      used.count({ verb: "create", resource: "events" }),
      0,
      "no Events from log messages by default (settings.posting.loggers, as in Kopf 1.44+)",
    );
  },
);
