/**
 * What an `on.reconcile` handler receives, on the real control plane: `memo` kept per object
 * across reconciles (a copy of the operator's memo, dropped with the object), `indices` with an
 * index handler's view (complete already at the first reconcile after start), `logger` bound to
 * the object, `signal` aborted when the operator stops; and the cached bodies without
 * `managedFields` and the last-applied annotation by default, with them when
 * `settings.caching.dropManagedFields` is off.
 */

import assert from "node:assert/strict";
import { index } from "../core/api/indexing.ts";
import { reconcile } from "../core/api/reconciling.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** What one reconcile saw. */
interface Seen {
  readonly name: string;
  readonly count: number;
  readonly greeting: unknown;
  readonly gold: string[];
  readonly viaKwarg: boolean;
  readonly aborted: boolean;
}

Deno.test(
  "on.reconcile context: memo kept per object across reconciles, indices complete from the first reconcile, logger bound to the object, signal aborted at the stop (X-REC-01)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-ctx");
    // Existing before the start: the first reconciles must already see both in the index.
    await client.api.create(KOPFEXAMPLES, kex("gold-1", { tier: "gold" }), { namespace });
    await client.api.create(KOPFEXAMPLES, kex("gold-2", { tier: "gold" }), { namespace });
    const seen: Seen[] = [];
    let slow: { started: boolean; abortedAtEntry?: boolean; aborted?: boolean } = {
      started: false,
    };
    const op = await startOperator((registry) => {
      index("kopfexamples", { registry }, function byTier({ name, spec }) {
        return typeof spec.tier === "string" ? { [spec.tier]: name } : null;
      });
      reconcile("kopfexamples", { registry }, async (ctx) => {
        if (ctx.name === "slow") {
          slow = { started: true, abortedAtEntry: ctx.signal.aborted };
          await new Promise((resolve) => {
            ctx.signal.addEventListener("abort", resolve, { once: true });
            setTimeout(resolve, 60_000);
          });
          slow.aborted = ctx.signal.aborted;
          return;
        }
        const count = ((ctx.memo.count as number | undefined) ?? 0) + 1;
        ctx.memo.count = count;
        const greeting = ctx.memo.greeting;
        ctx.memo.greeting = `changed by ${ctx.name}`; // must not leak into other objects' memos
        const view = ctx.indices.byTier;
        seen.push({
          name: ctx.name,
          count,
          greeting,
          gold: [...(view?.get("gold") ?? [])].map(String).sort(),
          viaKwarg: (ctx as unknown as Record<string, unknown>).byTier === view,
          aborted: ctx.signal.aborted,
        });
        ctx.logger.info(`Seen ${count} time(s).`);
      });
    }, {
      namespaces: [namespace],
      memo: { greeting: "hello" },
      settings: createSettings({
        posting: { enabled: false },
        process: { gracePeriod: 1 },
      }),
    });
    let stopped = false;
    try {
      await op.ready;
      await eventually(() => seen.length === 2, 20_000, "the two existing objects");
      for (const first of seen) {
        assert.deepEqual(first.gold, ["gold-1", "gold-2"], `${first.name}: the index, complete`);
        assert.equal(first.viaKwarg, true, "ctx.byTier is ctx.indices.byTier");
        assert.equal(first.count, 1);
        assert.equal(first.greeting, "hello", "a copy of the operator's memo");
        assert.equal(first.aborted, false);
      }

      // gold-1 twice more: its memo counts on; gold-2's stays at one.
      for (const poke of ["1", "2"]) {
        await client.api.patch(KOPFEXAMPLES, "gold-1", { metadata: { labels: { poke } } }, {
          namespace,
        });
        await eventually(() => seen.filter((s) => s.name === "gold-1").length === Number(poke) + 1);
      }
      const ofGold1 = seen.filter((s) => s.name === "gold-1");
      assert.deepEqual(ofGold1.map((s) => s.count), [1, 2, 3]);
      assert.deepEqual(ofGold1.map((s) => s.greeting), [
        "hello",
        "changed by gold-1",
        "changed by gold-1",
      ]);
      // A third object joins the index; gold-2's next reconcile sees it, with its own memo.
      await client.api.create(KOPFEXAMPLES, kex("gold-3", { tier: "gold" }), { namespace });
      await eventually(() => seen.some((s) => s.name === "gold-3"), 20_000, "gold-3");
      await client.api.patch(KOPFEXAMPLES, "gold-2", { metadata: { labels: { poke: "1" } } }, {
        namespace,
      });
      await eventually(() => seen.filter((s) => s.name === "gold-2").length === 2);
      const gold2 = seen.filter((s) => s.name === "gold-2").at(-1)!;
      assert.deepEqual(gold2.gold, ["gold-1", "gold-2", "gold-3"]);
      assert.equal(gold2.count, 2);
      assert.equal(seen.find((s) => s.name === "gold-3")?.greeting, "hello");

      // Deleted and created again: a fresh memo.
      await client.api.delete(KOPFEXAMPLES, "gold-3", { namespace });
      await eventually(
        () => client.api.get(KOPFEXAMPLES, "gold-3", { namespace }).then(() => false, () => true),
      );
      await sleep(500); // the cache sees the deletion
      await client.api.create(KOPFEXAMPLES, kex("gold-3", { tier: "gold" }), { namespace });
      await eventually(() => seen.filter((s) => s.name === "gold-3").length === 2);
      assert.equal(
        seen.filter((s) => s.name === "gold-3")[1]!.count,
        1,
        "a new object, a new memo",
      );

      // The logger: messages carry the object.
      const logged = op.logs.filter((e) => e.message === "Seen 3 time(s).");
      assert.equal(logged.length, 1);
      assert.equal(logged[0]!.level, "info");
      assert.equal(logged[0]!.object?.kind, "KopfExample");
      assert.equal(logged[0]!.object?.name, "gold-1");
      assert.equal(logged[0]!.object?.namespace, namespace);

      // The signal: not aborted while running, aborted when the operator stops (after the grace).
      await client.api.create(KOPFEXAMPLES, kex("slow"), { namespace });
      await eventually(() => slow.started, 20_000, "the slow reconcile");
      assert.equal(slow.abortedAtEntry, false);
      assert.equal(slow.aborted, undefined, "still running");
      await op.stop();
      stopped = true;
      assert.equal(slow.aborted, true, "the reconcile saw its signal abort, and the stop waited");
    } finally {
      if (!stopped) await op.stop();
    }
  },
);

Deno.test(
  "on.reconcile cache transform: bodies and cached children lack managedFields and the last-applied annotation by default, keep them with settings.caching.dropManagedFields = false (X-REC-10)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-mf");
    const lastApplied = "kubectl.kubernetes.io/last-applied-configuration";
    const parent: KubeObject = {
      ...kex("mf"),
      metadata: { name: "mf", annotations: { [lastApplied]: "{}" } },
    };
    await client.api.create(KOPFEXAMPLES, parent, { namespace });
    await client.api.create(CONFIGMAPS, {
      metadata: { name: "mf-child", annotations: { [lastApplied]: "{}" } },
      data: { a: "b" },
    }, { namespace });
    type View = { body: boolean; annotation: boolean; child: boolean; childAnnotation: boolean };
    const views: Record<string, View> = {};
    const run = (tag: string, caching: { dropManagedFields?: boolean }) =>
      startOperator(
        (registry) =>
          reconcile("kopfexamples", { registry, owns: ["configmaps"] }, (ctx) => {
            const child = ctx.cache.get("configmaps", `${ctx.name}-child`);
            views[tag] = {
              body: ctx.body.metadata?.managedFields !== undefined,
              annotation: lastApplied in (ctx.annotations ?? {}),
              child: child?.metadata?.managedFields !== undefined,
              childAnnotation: lastApplied in (child?.metadata?.annotations ?? {}),
            };
          }),
        {
          namespaces: [namespace],
          settings: createSettings({ posting: { enabled: false }, caching }),
        },
      );
    await using dropping = await run("default", {}); // the default settings
    await using keeping = await run("kept", { dropManagedFields: false });
    await Promise.all([dropping.ready, keeping.ready]);
    await eventually(() => views.default && views.kept, 20_000, "both operators' reconciles");
    assert.deepEqual(views, {
      default: { body: false, annotation: false, child: false, childAnnotation: false },
      kept: { body: true, annotation: true, child: true, childAnnotation: true },
    });
    // The objects themselves have both (kube-apiserver always writes managedFields).
    const live = await client.api.get(KOPFEXAMPLES, "mf", { namespace });
    assert.ok(Array.isArray(live.metadata?.managedFields));
    assert.ok(lastApplied in (live.metadata?.annotations ?? {}));
  },
);
