// An idle object's memory is dropped when it holds nothing worth keeping (idle RSS per object),
// and kept when it does: a memo with something in it, resume handlers that already ran, daemons.
// Real API server; the operator's own stats count the objects it remembers.
import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { applyCrds, eventually, kex, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** Workers exit after 0.3 s without events. */
const settings = () =>
  createSettings({ posting: { aggregationWindow: 0.2 }, queueing: { idleTimeout: 0.3 } });

Deno.test(
  "an idle object whose memory holds nothing is forgotten and made anew by its next event; a memo that holds something is kept (SUB-31, MEMO-02)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("forget");
    const runs: string[] = [];
    const counts: number[] = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function created({ name, memo }) {
        runs.push(`create ${name}`);
        if (name === "keeper") memo.count = 1;
      });
      on.update("kopfexamples", { registry }, function updated({ name, memo }) {
        runs.push(`update ${name}`);
        if (name === "keeper") counts.push(memo.count = (memo.count as number) + 1);
        else assert.deepEqual({ ...memo }, { base: 1 }, "a fresh copy of the operator's memo");
      });
    }, { namespaces: [namespace], settings: settings(), memo: { base: 1 } });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("plain", { v: 1 }), { namespace });
    await client.api.create(KOPFEXAMPLES, kex("keeper", { v: 1 }), { namespace });
    await eventually(() => runs.length === 2, 15_000, "both created");
    const idle = (what: string) =>
      eventually(() => op.stats().workers === 0 && op.stats().objects === 1, 15_000, what);
    await idle("the plain object forgotten, the keeper kept");

    for (const v of [2, 3]) {
      await client.api.patch(KOPFEXAMPLES, "plain", { spec: { v } }, { namespace });
      await client.api.patch(KOPFEXAMPLES, "keeper", { spec: { v } }, { namespace });
      await eventually(() => counts.length === v - 1, 15_000, `update ${v} of keeper`);
      await eventually(
        () => runs.filter((r) => r === "update plain").length === v - 1,
        15_000,
        `update ${v} of plain`,
      );
      await idle(`idle again after update ${v}`);
    }
    assert.deepEqual(counts, [2, 3], "the keeper's memo lived through its idle periods");
    assert.deepEqual(runs.filter((r) => r.startsWith("create")).sort(), [
      "create keeper",
      "create plain",
    ], "nothing created twice: the state is in the objects");
  },
);

Deno.test(
  "with resume handlers, an object's memory stays once it resumed: later updates do not resume it again (SUB-31, HK-CHG-08)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("forget-resume");
    const register = (runs: string[]) => (registry: OperatorRegistry) => {
      on.create("kopfexamples", { registry }, function created({ name }) {
        runs.push(`create ${name}`);
      });
      on.update("kopfexamples", { registry }, function updated({ name }) {
        runs.push(`update ${name}`);
      });
      on.resume("kopfexamples", { registry }, function resumed({ name }) {
        runs.push(`resume ${name}`);
      });
    };
    // A first operator creates the object's state; the second one resumes it.
    const first: string[] = [];
    {
      await using op = await startOperator(register(first), {
        namespaces: [namespace],
        settings: settings(),
      });
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("r", { v: 1 }), { namespace });
      await eventually(() => first.includes("create r"), 15_000, "created");
      await eventually(() => op.stats().workers === 0, 15_000, "idle");
    }
    const runs: string[] = [];
    await using op = await startOperator(register(runs), {
      namespaces: [namespace],
      settings: settings(),
    });
    await eventually(() => runs.includes("resume r"), 15_000, "resumed");
    await eventually(() => op.stats().workers === 0, 15_000, "idle after resuming");
    assert.equal(op.stats().objects, 1, "kept: a new memory would resume the object again");
    await client.api.patch(KOPFEXAMPLES, "r", { spec: { v: 2 } }, { namespace });
    await eventually(() => runs.includes("update r"), 15_000, "updated");
    await eventually(() => op.stats().workers === 0, 15_000, "idle after the update");
    assert.deepEqual(runs, ["resume r", "update r"]);
  },
);
