/**
 * One informer cache for the whole operator (X-REC-10), on the real control plane: a resource
 * that is reconciled (or owned) and also has cause handlers, raw-event handlers and an index is
 * listed and watched once; every kind of handler still gets its own semantics (raw event types,
 * one creation, the index filled, deletion seen); with namespace patterns the one cluster-wide
 * watch feeds each namespace's stream; a paused peer leaves the shared stream and rejoins it.
 */

import assert from "node:assert/strict";
import { index } from "../core/api/indexing.ts";
import { on } from "../core/api/on.ts";
import { reconcile } from "../core/api/reconciling.ts";
import type { KubeClient } from "../core/client/client.ts";
import { NAMESPACED_PEERINGS } from "../core/engines/coordination/peering.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  LAST_HANDLED,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function example(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec };
}

/** What the handlers of {@link setup} saw. */
interface Seen {
  readonly reconciled: Map<string, number>;
  readonly created: string[];
  readonly events: string[];
  readonly childEvents: string[];
  readonly managedFields: boolean[];
  indexed: () => string[];
}

/** Reconcile (owning a ConfigMap per example), on.create, on.event, an index, and on.event of ConfigMaps. */
function setup(seen: Seen): (registry: OperatorRegistry) => void {
  return (registry) => {
    reconcile("kopfexamples", { registry, owns: ["configmaps"] }, async (ctx) => {
      seen.reconciled.set(ctx.name!, (seen.reconciled.get(ctx.name!) ?? 0) + 1);
      await ctx.apply({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: `${ctx.name}-child`,
          namespace: ctx.namespace,
          ownerReferences: [{
            apiVersion: "kopf.dev/v1",
            kind: "KopfExample",
            name: ctx.name!,
            uid: ctx.uid!,
            controller: true,
          }],
        },
        data: { field: String(ctx.spec.field ?? "") },
      });
    });
    on.create("kopfexamples", { registry }, ({ name }) => {
      seen.created.push(name!);
    });
    on.event("kopfexamples", { registry }, ({ type, name, body }) => {
      seen.events.push(`${type}:${name}`);
      seen.managedFields.push(body.metadata?.managedFields !== undefined);
    });
    on.event("configmaps", { registry }, ({ type, name }) => {
      if (name?.endsWith("-child")) seen.childEvents.push(`${type}:${name}`);
    });
    index("kopfexamples", { registry }, function byName({ name }) {
      return { [name!]: name };
    });
    on.create("configmaps", { registry }, ({ indices, name }) => {
      if (name?.endsWith("-child")) seen.indexed = () => (indices.byName?.keys() ?? []).map(String);
    });
  };
}

function fresh(): Seen {
  return {
    reconciled: new Map(),
    created: [],
    events: [],
    childEvents: [],
    managedFields: [],
    indexed: () => [],
  };
}

function requests(op: InProcessOperator, resource: string) {
  const counters = op.client.counters;
  return {
    lists: counters.count({ verb: "list", resource }),
    watches: counters.count({ verb: "watch", resource }),
  };
}

async function exercise(client: KubeClient, namespace: string, seen: Seen): Promise<void> {
  await client.api.create(KOPFEXAMPLES, example("one", { field: "a" }), { namespace });
  await eventually(
    () => seen.childEvents.includes(`ADDED:one-child`),
    20_000,
    "the reconcile's child, seen by the ConfigMaps' event handler",
  );
  await eventually(() => seen.created.includes("one"), 20_000, "on.create");
  await client.api.patch(KOPFEXAMPLES, "one", { spec: { field: "b" } }, { namespace });
  await eventually(
    async () =>
      ((await client.api.get(CONFIGMAPS, "one-child", { namespace })).data as
        | Record<string, string>
        | undefined)?.field === "b",
    20_000,
    "the child follows the parent",
  );
  await client.api.delete(KOPFEXAMPLES, "one", { namespace });
  await eventually(() => seen.events.includes("DELETED:one"), 20_000, "the deletion");
}

Deno.test(
  "one informer cache: a reconciled resource with cause, event and index handlers is listed and watched once, each handler kind keeping its semantics (X-REC-10)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("share");
    await client.api.create(KOPFEXAMPLES, example("early"), { namespace });
    const seen = fresh();
    await using op = await startOperator(setup(seen), { namespaces: [namespace] });
    await op.ready;
    await eventually(() => seen.reconciled.get("early"), 20_000, "early reconciled");
    await eventually(() => seen.created.includes("early"), 20_000, "early created");
    await exercise(client, namespace, seen);
    await sleep(500); // repeated runs, if any, would come now
    assert.deepEqual(seen.created.sort(), ["early", "one"], "on.create ran once per object");
    assert.deepEqual(
      seen.events.filter((e) => e.endsWith(":one"))[0],
      "ADDED:one",
      "on.event gets the raw types",
    );
    assert.ok(seen.events.includes("MODIFIED:one"), seen.events.join(", "));
    assert.ok(seen.events.includes("null:early"), "a listed object's event has no type");
    assert.ok(seen.managedFields.every((present) => !present), "bodies come slimmed by the cache");
    assert.deepEqual(
      seen.indexed(),
      ["early"],
      "the index: early in it, one gone with its deletion",
    );
    // The cause handlers' bookkeeping (here a Kopf annotation) is no reason to reconcile.
    const before = seen.reconciled.get("early") ?? 0;
    await client.api.patch(KOPFEXAMPLES, "early", {
      metadata: { annotations: { "kopf.zalando.org/touched": "yes" } },
    }, { namespace });
    await sleep(1_000);
    assert.equal(seen.reconciled.get("early"), before, "no reconcile for bookkeeping");
    await client.api.patch(KOPFEXAMPLES, "early", {
      metadata: { annotations: { team: "blue" } },
    }, { namespace });
    await eventually(() => seen.reconciled.get("early")! > before, 20_000, "a user annotation");
    for (const resource of ["kopfexamples", "configmaps"]) {
      assert.deepEqual(
        requests(op, resource),
        { lists: 1, watches: 1 },
        `${resource}: one list and one watch for the reconcile, cause, event and index handlers`,
      );
    }
  },
);

Deno.test(
  "one informer cache with namespace patterns: one cluster-wide watch feeds each matching namespace's stream, and nothing of other namespaces reaches the handlers (X-REC-10)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    // A prefix of this run only: the pattern must match these two namespaces and no other
    // (earlier runs on a shared plane leave `sharepat-…` namespaces behind, some Terminating).
    const run = `sharepat${crypto.randomUUID().slice(0, 6)}`;
    const first = await testNamespace(run);
    const second = await testNamespace(run);
    const other = await testNamespace("shareother");
    const prefix = first.slice(0, first.lastIndexOf("-"));
    const seen = fresh();
    // One list request whatever the plane holds: the cluster-wide list is not paged here
    // (chunkSize null), since other tests' objects of this resource may fill many pages.
    await using op = await startOperator(setup(seen), {
      namespaces: [`${prefix}-*`],
      settings: createSettings({
        posting: { aggregationWindow: 0.2 },
        watching: { chunkSize: null },
      }),
    });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("outside"), { namespace: other });
    await exercise(client, first, seen);
    await client.api.create(KOPFEXAMPLES, example("two"), { namespace: second });
    await eventually(() => seen.created.includes("two"), 20_000, "the second namespace");
    await sleep(500);
    assert.ok(!seen.created.includes("outside") && !seen.reconciled.has("outside"));
    assert.ok(!seen.events.some((e) => e.endsWith(":outside")), "nothing of other namespaces");
    assert.deepEqual(requests(op, "kopfexamples"), { lists: 1, watches: 1 });
  },
);

Deno.test(
  "one informer cache under peering: a paused operator's cause handlers leave the shared stream and rejoin it at the resume with nothing repeated (X-REC-10, PEER-01)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    await applyCrds(client, "crds/peering.yaml");
    const namespace = await testNamespace("sharepeer");
    await client.api.create(NAMESPACED_PEERINGS, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfPeering",
      metadata: { name: "default" },
    }, { namespace });
    const peered = (seen: Seen, identity: string, priority: number) =>
      startOperator(setup(seen), {
        namespaces: [namespace],
        standalone: false,
        priority,
        identity,
        settings: createSettings({ posting: { enabled: false }, peering: { lifetime: 4 } }),
      });
    const low = fresh();
    await using lowOp = await peered(low, "low", 10);
    await lowOp.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    await eventually(() => low.created.includes("a"), 30_000, "low creates a");
    const listedBefore = requests(lowOp, "kopfexamples").lists;
    const high = fresh();
    const highOp = await peered(high, "high", 20);
    try {
      await lowOp.waitForLog(/Pausing operations in favour of high/);
      await highOp.ready;
      await client.api.create(KOPFEXAMPLES, example("b"), { namespace });
      await eventually(() => high.created.includes("b"), 30_000, "high creates b");
      // high's handling of b is stored (its diff-base) before it goes: stopped mid-cycle, b
      // would be rightly created again by low.
      await eventually(
        async () => {
          const stored = await client.api.get(KOPFEXAMPLES, "b", { namespace });
          return stored.metadata?.annotations?.[LAST_HANDLED] !== undefined;
        },
        30_000,
        "b's diff-base stored",
      );
    } finally {
      await highOp.stop();
    }
    await lowOp.waitForLog(/Resuming operations after the pause/);
    await client.api.create(KOPFEXAMPLES, example("c"), { namespace });
    await eventually(() => low.created.includes("c"), 30_000, "the resumed low creates c");
    await sleep(500);
    assert.deepEqual(low.created.sort(), ["a", "c"], "a not again, b handled by high already");
    assert.ok(low.indexed().includes("b"), "the index followed the resume's listing");
    // The resume's listing is fresh (listed once more, as Kopf relists), not the store alone.
    assert.ok(requests(lowOp, "kopfexamples").lists > listedBefore, "listed at the resume");
  },
);
