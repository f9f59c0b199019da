/**
 * A handler result that cannot be stored in status (not JSON) fails that handler, once, with its
 * name and what is wrong — instead of failing the object's cycle again and again.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "handler results: BigInt, circular, Map and NaN results fail their handlers permanently, once each, by name; a good result is stored",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("results");
    const calls: Record<string, number> = {};
    const count = (id: string) => calls[id] = (calls[id] ?? 0) + 1;
    // Short backoffs: a handler retried by mistake would be called again within the wait.
    const settings = createSettings({ posting: { aggregationWindow: 0.2 } });
    settings.execution.defaultBackoff = 0.2;
    await using op = await startOperator((registry) => {
      // @ts-expect-error: a BigInt result is a compile error too; this proves the run-time check
      on.create("kopfexamples", { registry, backoff: 0.2 }, function big_fn() {
        count("big_fn");
        return { count: 10n };
      });
      on.create("kopfexamples", { registry, backoff: 0.2 }, function loop_fn() {
        count("loop_fn");
        const circular: Record<string, unknown> = { a: 1 };
        circular.self = circular;
        return circular as Record<string, never>;
      });
      // @ts-expect-error: a Map result is a compile error too; this proves the run-time check
      on.create("kopfexamples", { registry, backoff: 0.2 }, function map_fn() {
        count("map_fn");
        return { seen: new Map([["a", 1]]) };
      });
      on.create("kopfexamples", { registry, backoff: 0.2 }, function nan_fn() {
        count("nan_fn");
        return { ratio: NaN };
      });
      on.create("kopfexamples", { registry }, function good_fn() {
        count("good_fn");
        return { message: "stored" };
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("one"), { namespace });
    await op.waitForLog(/Creation is processed: 1 succeeded; 4 failed\./);
    const status = await eventually(
      async () => (await client.api.get(KOPFEXAMPLES, "one", { namespace })).status,
    );
    assert.deepEqual(status, { good_fn: { message: "stored" } });
    await sleep(1_500); // several backoffs: nothing runs again
    assert.deepEqual(calls, { big_fn: 1, loop_fn: 1, map_fn: 1, nan_fn: 1, good_fn: 1 });
    const lines = op.logs.map((e) => e.message);
    const expected: Array<[string, string]> = [
      ["big_fn", "BigInt at .count"],
      ["loop_fn", "a circular reference at .self"],
      ["map_fn", "a Map at .seen"],
      ["nan_fn", "NaN at .ratio"],
    ];
    for (const [id, problem] of expected) {
      const prefix =
        `Handler '${id}' returned a value that cannot be stored in status: ${problem}.`;
      assert.equal(
        lines.filter((l) => l.startsWith(prefix)).length,
        1,
        `${prefix}\n${lines.join("\n")}`,
      );
    }
    assert.equal(lines.filter((l) => l.includes("Unexpected error")).length, 0, lines.join("\n"));
  },
);
