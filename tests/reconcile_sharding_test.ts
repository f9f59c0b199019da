/**
 * `on.reconcile` with sharded replicas on the real API server (ShardedListAndWatch on, as on the
 * suite's shared plane): an object is reconciled only by the holder of its shard, and an owned
 * object's change goes to its owner's holder; when a replica leaves, the one taking its shards
 * over reconciles their objects at once (no change needed). A cause handler of the same resource
 * reads the shared cache's stream, filtered by shard: each creation handled once, by the holder.
 * Lease timings shortened as in
 * tests/_sharding.ts.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { reconcile } from "../core/api/reconciling.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { shardOfObject } from "../core/structs/shards.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const SHARDS = 8;

interface Run {
  readonly name: string;
  readonly replica: string;
  readonly at: number;
}

/**
 * A sharded replica whose reconcile handler records its runs and keeps one owned ConfigMap; its
 * creation handler (a cause handler of the same resource, so reading the shared cache's stream
 * filtered by shard) records its runs too.
 */
function replica(
  runs: Run[],
  namespace: string,
  identity: string,
  created: Run[] = [],
): Promise<InProcessOperator> {
  return startOperator((registry) => {
    on.create("kopfexamples", { registry }, function record({ name }) {
      created.push({ name: name!, replica: identity, at: Date.now() });
    });
    reconcile(
      "kopfexamples",
      { registry, owns: ["configmaps"] },
      async function keep_child({ name, uid, spec, cache, apply }) {
        runs.push({ name, replica: identity, at: Date.now() });
        const data = { value: String((spec as { value?: number }).value ?? 0) };
        const current = cache.get("configmaps", `${name}-child`);
        if (current && JSON.stringify(current.data) === JSON.stringify(data)) return;
        await apply({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: {
            name: `${name}-child`,
            ownerReferences: [{
              apiVersion: "kopf.dev/v1",
              kind: "KopfExample",
              name,
              uid,
              controller: true,
            }],
          },
          data,
        });
      },
    );
  }, {
    namespaces: [namespace],
    settings: createSettings({
      posting: { enabled: false },
      sharding: {
        enabled: true,
        shards: SHARDS,
        namespace,
        identity,
        leaseDuration: 4,
        renewDeadline: 3,
        retryPeriod: 0.5,
      },
    }),
  });
}

Deno.test(
  "on.reconcile with sharded replicas: each object reconciled only by its shard's holder, an owned object's change goes to its owner's holder, a leaving replica's objects are reconciled by the next holder at once (X-REC-07)",
  opts,
  async () => {
    const client = await testClient();
    using _ = client;
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-shard");
    const runs: Run[] = [];
    const created: Run[] = [];
    const [a, b] = await Promise.all([
      replica(runs, namespace, "a", created),
      replica(runs, namespace, "b", created),
    ]);
    let bStopped = false;
    try {
      const holders = await eventually(
        async () => {
          const status = await readShardStatus(client.api, { name: "kopf", namespace });
          const held = new Set(status.shards.map((s) => s.holder));
          return status.shards.length === SHARDS && held.size === 2 && !held.has(undefined)
            ? new Map(status.shards.map((s) => [s.shard, s.holder!]))
            : undefined;
        },
        60_000,
        "two replicas to split the shards",
      );
      const names = Array.from({ length: 24 }, (_, i) => `r-${i}`);
      await Promise.all(names.map((name) =>
        client.api.create(KOPFEXAMPLES, {
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          metadata: { name },
          spec: { value: 1 },
        }, { namespace })
      ));
      const objects = (await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace })).items;
      const holderOf = new Map(
        objects.map((o) => [o.metadata!.name!, holders.get(shardOfObject(o, "uid", SHARDS))!]),
      );
      assert.ok(new Set(holderOf.values()).size === 2, "both replicas hold some of the objects");
      await eventually(
        async () => {
          const children = (await client.api.list<KubeObject>(CONFIGMAPS, { namespace })).items;
          return children.filter((c) => c.metadata?.name?.endsWith("-child")).length ===
            names.length;
        },
        60_000,
        "a child for every object",
      );

      // An owned object's change (its deletion) triggers only its owner's holder.
      const victim = names[0]!;
      const before = runs.length;
      await client.api.delete(CONFIGMAPS, `${victim}-child`, { namespace });
      await eventually(
        () => client.api.get(CONFIGMAPS, `${victim}-child`, { namespace }).catch(() => undefined),
        30_000,
        "the deleted child to be recreated",
      );
      await sleep(1_000);
      const rerun = runs.slice(before).filter((r) => r.name === victim);
      assert.ok(rerun.length >= 1, "the owner was reconciled after its child went");
      assert.deepEqual(
        [...new Set(rerun.map((r) => r.replica))],
        [holderOf.get(victim)],
        "only its holder",
      );
      for (const run of runs) {
        assert.equal(run.replica, holderOf.get(run.name), `${run.name} only by its holder`);
      }
      // The cause handler: each object created once, by its holder; each replica listed the
      // resource once for its reconcile handler and its shards' streams together.
      await eventually(() => created.length >= names.length, 30_000, "every creation handled");
      assert.deepEqual(created.map((r) => r.name).sort(), [...names].sort(), "once each");
      for (const run of created) {
        assert.equal(run.replica, holderOf.get(run.name), `${run.name} created by its holder`);
      }
      for (const op of [a, b]) {
        assert.equal(op.client.counters.count({ verb: "list", resource: "kopfexamples" }), 1);
      }

      // b leaves: a takes b's shards over and reconciles their objects with no change made.
      const leaving = names.filter((name) => holderOf.get(name) === "b");
      const stoppedAt = Date.now();
      await b.stop();
      bStopped = true;
      await eventually(
        () =>
          leaving.every((name) =>
            runs.some((r) => r.name === name && r.replica === "a" && r.at >= stoppedAt)
          ),
        60_000,
        "a to reconcile every object of b's shards",
      );
    } finally {
      if (!bStopped) await b.stop();
      await a.stop();
    }
  },
);
