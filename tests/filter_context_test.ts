/**
 * What filter callbacks of resource-changing handlers and sub-handlers see, and the old/new
 * filters of sub-handlers, on the real control plane.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { ChangingContext } from "../core/intents/contexts.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

type Status = Record<string, unknown> | undefined;

Deno.test(
  "when= callbacks of changing handlers and sub-handlers get the handler's full context (FLT-15)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("when");
    const seen: Array<Record<string, unknown>> = [];
    const record = (ctx: ChangingContext) => {
      seen.push({
        reason: ctx.reason,
        diff: ctx.diff,
        old: ctx.old,
        new: ctx.new,
        spec: ctx.spec,
        name: ctx.meta.name,
        memo: typeof ctx.memo,
        logger: typeof ctx.logger?.info,
        param: ctx.param,
      });
    };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", {
        registry,
        param: "parent",
        when: (ctx) => {
          record(ctx);
          return ctx.reason === "create" && ctx.spec.size === 1;
        },
      }, function created({ subhandler }) {
        subhandler(function child() {
          return "ran";
        }, {
          param: "child",
          when: (ctx) => {
            record(ctx);
            return ctx.reason === "create";
          },
        });
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "w" },
      spec: { size: 1 },
    }, { namespace });
    const status = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "w", { namespace });
        return (o.status as Status)?.["created/child"];
      },
      15_000,
      "the sub-handler's result",
    );
    assert.equal(status, "ran");
    const parent = seen.find((s) => s.param === "parent" && s.reason === "create");
    const child = seen.find((s) => s.param === "child");
    for (const ctx of [parent, child]) {
      assert.ok(ctx, `seen: ${JSON.stringify(seen)}`);
      assert.equal(ctx.old, undefined);
      assert.deepEqual((ctx.new as { spec: unknown }).spec, { size: 1 });
      assert.deepEqual(ctx.diff, [["add", [], null, ctx.new]]);
      assert.deepEqual(ctx.spec, { size: 1 });
      assert.equal(ctx.name, "w");
      assert.equal(ctx.memo, "object");
      assert.equal(ctx.logger, "function");
    }
  },
);

Deno.test(
  "sub-handlers filter by old and new field values under update handlers, and only there (HK-SUB-09)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("subold");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function created({ subhandler }) {
        try {
          subhandler(() => {}, { field: "spec.size", old: 1 });
          return "accepted";
        } catch (error) {
          return `${(error as Error).name}: ${(error as Error).message}`;
        }
      });
      on.update("kopfexamples", { registry }, function updated({ subhandler }) {
        subhandler(() => "1→2", { id: "grew", field: "spec.size", old: 1, new: 2 });
        subhandler(() => "from 5", { id: "from5", field: "spec.size", old: 5 });
        subhandler(() => "other", { id: "other", field: "spec.other" });
        subhandler(() => "to 2", { id: "to2", field: "spec.size", new: (v: unknown) => v === 2 });
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "s" },
      spec: { size: 1, other: "same" },
    }, { namespace });
    const created = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "s", { namespace });
        return (o.status as Status)?.created;
      },
      15_000,
      "the create handler's result",
    );
    assert.match(String(created), /^TypeError: .*update or field parent handler/);

    await client.api.patch(KOPFEXAMPLES, "s", { spec: { size: 2 } }, { namespace });
    const status = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "s", { namespace });
        const s = o.status as Status;
        return s?.["updated/grew"] && s?.["updated/to2"] ? s : undefined;
      },
      15_000,
      "the matching sub-handlers' results",
    );
    assert.equal(status["updated/grew"], "1→2");
    assert.equal(status["updated/to2"], "to 2");
    assert.equal(status["updated/from5"], undefined, "old=5 does not match 1");
    assert.equal(status["updated/other"], undefined, "spec.other did not change");
  },
);
