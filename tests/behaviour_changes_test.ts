/**
 * Subtle behaviours (features.md §32) of changes, checked end to end against a real API server
 * the way a user would check them: what update and field handlers get (old/new/diff, also at
 * creation), which changes are not essential (status-only), what handling a change costs (the
 * requests the operator made, by its own client's counters), a change made while a handler runs,
 * and objects that match no handler (no writes, no logs) until they start matching (a creation).
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { Diff } from "../core/structs/diffs.ts";
import { eventually, KOPFEXAMPLES, LAST_HANDLED, sleep, testClient } from "./_support.ts";
import {
  example,
  exampleNamespace,
  logged,
  opts,
  progressOf,
  read,
  readWhen,
  requestsSince,
  startReady,
  statusOf,
} from "./_behaviour.ts";

Deno.test(
  "SUB-10/SUB-13/SUB-15: update and field handlers get old/new/diff; status-only changes are ignored",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "diffs");
    const updates: Array<{ old: unknown; new: unknown; diff: Diff }> = [];
    const fields: Array<{ reason: string; old: unknown; new: unknown; diff: Diff }> = [];
    const growing: unknown[] = [];
    await using op = await startReady(namespace, (registry) => {
      on.update("kopfexamples", { registry, id: "update_fn" }, (c) => {
        updates.push({ old: c.old, new: c.new, diff: c.diff });
      });
      on.field("kopfexamples", { registry, id: "field_fn", field: "spec.field" }, (c) => {
        fields.push({ reason: c.reason, old: c.old, new: c.new, diff: c.diff });
      });
      on.field(
        "kopfexamples",
        { registry, id: "growing_fn", field: "spec.size", new: (v) => Number(v) > 1 },
        (c) => {
          growing.push(c.new);
        },
      );
    });
    await client.api.create(KOPFEXAMPLES, example("a", { field: "a", size: 1 }), { namespace });
    await eventually(() => fields.length === 1, 10_000, "the field handler at creation");
    assert.deepEqual(fields[0], {
      reason: "create",
      old: undefined,
      new: "a",
      diff: [["add", [], null, "a"]],
    });
    await eventually(async () =>
      (await read(client, namespace, "a")).metadata?.annotations?.[LAST_HANDLED]
    );
    assert.equal(updates.length, 0, "no update handler at creation");

    await client.api.patch(KOPFEXAMPLES, "a", { spec: { field: "b" } }, { namespace });
    await eventually(() => updates.length === 1 && fields.length === 2, 10_000, "the update");
    assert.deepEqual(updates[0], {
      old: { spec: { field: "a", size: 1 } },
      new: { spec: { field: "b", size: 1 } },
      diff: [["change", ["spec", "field"], "a", "b"]],
    });
    assert.deepEqual(fields[1], {
      reason: "update",
      old: "a",
      new: "b",
      diff: [["change", [], "a", "b"]],
    });

    // A status-only change is not essential: nothing runs, nothing is written.
    const before = op.client.counters.snapshot();
    await client.api.patch(KOPFEXAMPLES, "a", { status: { external: "x" } }, { namespace });
    await sleep(1_500);
    assert.equal(updates.length, 1);
    assert.equal(fields.length, 2);
    assert.equal(requestsSince(op, before).writes, 0);

    // Another field changes: the update handler runs, the field handler does not; the value
    // filter of the other field handler passes only for the new value.
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    await eventually(() => updates.length === 2 && growing.length === 1, 10_000, "2nd update");
    assert.deepEqual(updates[1]!.diff, [["change", ["spec", "size"], 1, 2]]);
    assert.deepEqual(growing, [2]);
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 1 } }, { namespace });
    await eventually(() => updates.length === 3, 10_000, "3rd update");
    await sleep(500);
    assert.equal(fields.length, 2, "the field handler only runs when its field changes");
    assert.deepEqual(growing, [2], "the new= filter rejects the shrinking change");
  },
);

Deno.test(
  "SUB-06: an update handler on a change costs exactly one write",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "updwrite");
    await using op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ created: true }));
      on.update("kopfexamples", { registry, id: "update_fn" }, ({ spec }) => ({ size: spec.size }));
    });
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
    await sleep(500);
    const before = op.client.counters.snapshot();
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    const updated = await readWhen(client, namespace, "a", (body) => statusOf(body).update_fn);
    await sleep(1_000);
    const used = requestsSince(op, before);
    assert.equal(used.writes, 1, used.all);
    assert.equal(used.reads, 0, used.all);
    assert.deepEqual(statusOf(updated).update_fn, { size: 2 });
    assert.equal(updated.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"size":2}}\n');
    assert.equal(progressOf(updated, "update_fn"), undefined);
  },
);

Deno.test(
  "SUB-31: a change made while a handler runs is handled afterwards (not lost behind our write)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "racing");
    const updates: Diff[] = [];
    await using _op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, async ({ name }) => {
        // A user changes the spec while the handler runs (after the operator read the object).
        await client.api.patch(KOPFEXAMPLES, name!, { spec: { size: 2 } }, { namespace });
        return { created: true };
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, ({ diff }) => {
        updates.push(diff);
      });
    });
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
    await eventually(() => updates.length > 0, 10_000, "the update handler for the racing change");
    assert.deepEqual(updates, [[["change", ["spec", "size"], 1, 2]]]);
    const body = await read(client, namespace, "a");
    assert.equal(body.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"size":2}}\n');
  },
);

Deno.test(
  "FLT-17/SUB-14: an object matching no handler costs zero writes; when it starts matching, it is created",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "stealth");
    const created: string[] = [];
    const updated: string[] = [];
    await using op = await startReady(namespace, (registry) => {
      on.create(
        "kopfexamples",
        { registry, id: "create_fn", labels: { mine: "yes" } },
        ({ name }) => {
          created.push(name!);
        },
      );
      on.update(
        "kopfexamples",
        { registry, id: "update_fn", labels: { mine: "yes" } },
        ({ name }) => {
          updated.push(name!);
        },
      );
      on.delete("kopfexamples", { registry, id: "delete_fn", labels: { mine: "yes" } }, () => {});
    });
    const before = op.client.counters.snapshot();
    const stranger = await client.api.create(KOPFEXAMPLES, example("stranger"), { namespace });
    await client.api.create(KOPFEXAMPLES, example("mine", {}, { labels: { mine: "yes" } }), {
      namespace,
    });
    await eventually(async () =>
      (await read(client, namespace, "mine")).metadata?.annotations?.[LAST_HANDLED]
    );
    await sleep(1_000);
    const after = await read(client, namespace, "stranger");
    assert.equal(
      after.metadata?.resourceVersion,
      stranger.metadata?.resourceVersion,
      `the stranger was written to: ${JSON.stringify(after.metadata?.annotations)}`,
    );
    assert.equal(after.metadata?.annotations, undefined, "no state on the stranger");
    assert.equal(after.metadata?.finalizers, undefined, "no finalizer on the stranger");
    const used = requestsSince(op, before);
    assert.equal(used.writes, 2, `finalizer + diff-base of 'mine' only: ${used.all}`);
    assert.equal(logged(op, /stranger/).length, 0);
    assert.ok(!op.logs.some((e) => e.object?.name === "stranger"), "no logs about the stranger");

    // It starts matching: that is a creation, not an update.
    await client.api.patch(KOPFEXAMPLES, "stranger", { metadata: { labels: { mine: "yes" } } }, {
      namespace,
    });
    await eventually(() => created.includes("stranger"), 10_000, "the creation");
    await sleep(500);
    assert.deepEqual(created.sort(), ["mine", "stranger"]);
    assert.deepEqual(updated, []);
  },
);
