/**
 * Subtle behaviours (features.md §32) of deletion and finalizers, checked end to end against a
 * real API server the way a user would check them: a deletion that arrives while the creation is
 * still retrying (the creation is superseded), when our finalizer is added (in a cycle of its own)
 * or not at all (optional delete handlers), and other controllers' finalizers added or released
 * concurrently with ours; the object's finalizers and progress records, the operator's log, and
 * the requests the operator made (its own client's counters).
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeApi } from "../core/client/api.ts";
import type { KubeClient } from "../core/client/client.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { eventually, FINALIZER, KOPFEXAMPLES, sleep, testClient } from "./_support.ts";
import {
  example,
  exampleNamespace,
  exists,
  logged,
  opts,
  OTHER_FINALIZER,
  progressOf,
  read,
  readWhen,
  requestsSince,
  retryingCreation,
  startReady,
  statusOf,
} from "./_behaviour.ts";

/** Removes a finalizer from a KopfExample (a JSON patch guarded by a test of its index). */
async function removeFinalizer(api: KubeApi, namespace: string, name: string, finalizer: string) {
  const body = await api.get(KOPFEXAMPLES, name, { namespace });
  const index = body.metadata?.finalizers?.indexOf(finalizer) ?? -1;
  if (index < 0) return;
  await api.patch(KOPFEXAMPLES, name, [
    { op: "test", path: `/metadata/finalizers/${index}`, value: finalizer },
    { op: "remove", path: `/metadata/finalizers/${index}` },
  ], { namespace, type: "json" });
}

/** Waits until our finalizer is removed from a KopfExample that another one keeps; returns it. */
async function withoutOurFinalizer(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<KubeObject> {
  return await readWhen(
    client,
    namespace,
    name,
    (body) => !body.metadata?.finalizers?.includes(FINALIZER),
    15_000,
    "our finalizer to be removed",
  );
}

Deno.test(
  "SUB-04: deletion during creation retries: the delete handler runs, creation is superseded",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "supersede");
    const calls = { create: 0, delete: 0 };
    await using op = await startReady(namespace, retryingCreation(calls));
    // Another controller's finalizer keeps the object visible after ours is gone.
    await client.api.create(
      KOPFEXAMPLES,
      example("a", {}, { finalizers: [OTHER_FINALIZER] }),
      { namespace },
    );
    await eventually(async () => progressOf(await read(client, namespace, "a"), "create_fn"));
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    const released = await withoutOurFinalizer(client, namespace, "a");
    const creates = calls.create;
    assert.equal(calls.delete, 1);
    assert.deepEqual(released.metadata?.finalizers, [OTHER_FINALIZER]);
    assert.equal(progressOf(released, "delete_fn"), undefined, "deletion records are purged");
    assert.equal(
      progressOf(released, "create_fn"),
      undefined,
      "the creation record is superseded and purged",
    );
    assert.ok(logged(op, /superseded/i).length >= 1, "the superseding is logged");
    await sleep(2_500); // past the creation's retry delay
    assert.equal(calls.create, creates, "creation is not retried during deletion");
    await removeFinalizer(client.api, namespace, "a", OTHER_FINALIZER);
    await eventually(async () => !(await exists(client, namespace, "a")));
  },
);

Deno.test(
  "SUB-04: deletion during creation retries: the delete handler runs and the object goes",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "delcreate");
    const calls = { create: 0, delete: 0 };
    await using op = await startReady(namespace, retryingCreation(calls));
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    await eventually(async () => progressOf(await read(client, namespace, "a"), "create_fn"));
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
    const creates = calls.create;
    assert.equal(calls.delete, 1);
    assert.ok(creates >= 1);
    await op.waitForLog(/^Deletion is processed: 1 succeeded; 0 failed\.$/);
    await sleep(2_500); // past the creation's retry delay: nothing runs for the gone object
    assert.deepEqual(calls, { create: creates, delete: 1 });
  },
);

Deno.test(
  "SUB-20: with a delete handler, the finalizer is added in a cycle of its own before any handler",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "finadd");
    const seen: Array<string[] | undefined> = [];
    await using op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ meta }) => {
        seen.push(meta.finalizers ? [...meta.finalizers] : undefined);
        return { done: true };
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {});
    });
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await readWhen(client, namespace, "a", (body) => statusOf(body).create_fn);
    await sleep(1_000);
    assert.deepEqual(seen, [[FINALIZER]], "the handler ran once, with the finalizer in place");
    assert.deepEqual(handled.metadata?.finalizers, [FINALIZER]);
    const used = requestsSince(op, before);
    assert.equal(used.writes, 2, `one write for the finalizer, one for the handler: ${used.all}`);
    assert.equal(used.reads, 0, used.all);
    const order = op.logs.map((e) => e.message).filter((m) =>
      /Adding the finalizer|Handler 'create_fn' succeeded/.test(m)
    );
    assert.deepEqual(order, [
      "Adding the finalizer, thus preventing the actual deletion.",
      "Handler 'create_fn' succeeded.",
    ]);
  },
);

Deno.test(
  "SUB-22: an optional delete handler adds no finalizer; deletion is not blocked",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "finopt");
    await using op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ done: true }));
      on.delete("kopfexamples", { registry, id: "delete_fn", optional: true }, () => {});
    });
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await readWhen(client, namespace, "a", (body) => statusOf(body).create_fn);
    assert.equal(handled.metadata?.finalizers, undefined);
    assert.equal(requestsSince(op, before).writes, 1);
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    assert.equal(await exists(client, namespace, "a"), false, "deleted at once");
  },
);

Deno.test(
  "SUB-21: another controller's finalizer added concurrently is kept; deletion waits for it",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "finother");
    const calls = { delete: 0 };
    await using _op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, async ({ name }) => {
        // Another controller adds its finalizer in front of ours while our cycle runs (after
        // the operator read the object, before it writes its outcome).
        await client.api.patch(KOPFEXAMPLES, name!, [
          { op: "add", path: "/metadata/finalizers/0", value: OTHER_FINALIZER },
        ], { namespace, type: "json" });
        return { done: true };
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.delete++;
      });
    });
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await readWhen(client, namespace, "a", (body) => statusOf(body).create_fn);
    assert.deepEqual(handled.metadata?.finalizers, [OTHER_FINALIZER, FINALIZER]);

    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    const released = await withoutOurFinalizer(client, namespace, "a");
    assert.equal(calls.delete, 1);
    assert.deepEqual(released.metadata?.finalizers, [OTHER_FINALIZER], "only ours is removed");
    assert.ok(released.metadata?.deletionTimestamp);
    await sleep(1_000);
    assert.ok(await exists(client, namespace, "a"), "the object waits for the other finalizer");
    assert.equal(calls.delete, 1, "the delete handler is not repeated while waiting");
    await removeFinalizer(client.api, namespace, "a", OTHER_FINALIZER);
    await eventually(async () => !(await exists(client, namespace, "a")));
  },
);

/**
 * Another controller (first in the finalizers list) releases the object while our delete handler
 * runs. Returns how many times our delete handler ran.
 */
async function releaseRace(): Promise<number> {
  using client = await testClient();
  const namespace = await exampleNamespace(client, "finrace");
  const calls = { delete: 0 };
  await using op = await startReady(namespace, (registry) => {
    on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ done: true }));
    on.delete("kopfexamples", { registry, id: "delete_fn" }, async ({ name }) => {
      calls.delete++;
      if (calls.delete === 1) await removeFinalizer(client.api, namespace, name!, OTHER_FINALIZER);
    });
  });
  await client.api.create(
    KOPFEXAMPLES,
    example("a", {}, { finalizers: [OTHER_FINALIZER] }),
    { namespace },
  );
  await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
  assert.deepEqual((await read(client, namespace, "a")).metadata?.finalizers, [
    OTHER_FINALIZER,
    FINALIZER,
  ]);
  await client.api.delete(KOPFEXAMPLES, "a", { namespace });
  // Gone: our finalizer was removed, and the other one was not put back.
  await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
  await op.waitForLog(/^Deletion is processed: 1 succeeded; 0 failed\.$/);
  return calls.delete;
}

Deno.test(
  "SUB-21: another controller releasing its finalizer during our deletion is not undone",
  opts,
  async () => {
    const runs = await releaseRace();
    assert.ok(runs >= 1 && runs <= 2, `the delete handler ran ${runs} times`);
  },
);

Deno.test(
  "SUB-21: a succeeded delete handler is not re-run when its finalizer removal conflicts",
  opts,
  async () => {
    assert.equal(await releaseRace(), 1);
  },
);
