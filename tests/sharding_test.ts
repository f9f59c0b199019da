/**
 * Sharded replicas against the real API server (feature gate ShardedListAndWatch on, as on the
 * suite's shared plane): every object handled by exactly one replica; scaling 1 → 3 → 1 while
 * objects are created and changed runs no completed handler twice, loses no change and causes no
 * deletion handling and no finalizer change (a watch of the test sees every version); sharding
 * by namespace and of cluster-scoped resources; the same on the emulator; `kopf shards`; and
 * managed webhooks kept while a replica leaves. The fallback with the gate off (also scaled
 * 1 → 2 → 1) runs on a private plane. What moves with a shard from one replica to the next
 * (handlers in flight, daemons, timers, a killed replica's work): tests/sharding_handover_test.ts.
 * Lease timings are shortened (lease 4 s, deadline 3 s, retry 0.5 s), and 8 shards instead of 32.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { on } from "../core/api/on.ts";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import type { Resource } from "../core/structs/resources.ts";
import { shardOfObject } from "../core/structs/shards.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { WebhookServer } from "../mod.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testNamespace,
} from "./_support.ts";
import {
  assertFinalizersAddedOnce,
  balanced,
  count,
  createExamples,
  observe,
  opts,
  replica,
  type Run,
  settings,
  setup,
  SHARDS,
  watchEvents,
} from "./_sharding.ts";

Deno.test(
  "3 sharded replicas over 300 objects: every create handler runs exactly once, each replica a share, the server sends each replica only its shards' events; kopf shards prints the holders (X-SCALE-10, X-SCALE-11, X-SCALE-20)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-300");
    using _ = client;
    const runs: Run[] = [];
    const engines = ["r1", "r2", "r3"].map(() => new MetricsEngine({ process: false }));
    const ops = await Promise.all(
      ["r1", "r2", "r3"].map((id, i) => replica(runs, namespace, id, undefined, engines[i])),
    );
    try {
      await balanced(client, namespace, 3);
      for (const op of ops) await op.waitForLog(/the API server filters the watches/);
      const names = Array.from({ length: 300 }, (_, i) => `o-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => count(runs, "create").size === 300, 120_000, "300 creations");
      await sleep(1_000); // a duplicate, if any, would show up now
      const creates = count(runs, "create");
      assert.deepEqual([...creates.values()].filter((n) => n !== 1), [], "exactly once each");
      const byReplica = new Map<string, number>();
      for (const run of runs) byReplica.set(run.replica, (byReplica.get(run.replica) ?? 0) + 1);
      assert.equal(byReplica.size, 3, `every replica handled a share: ${[...byReplica]}`);
      for (const engine of engines) {
        assert.ok(await watchEvents(engine, "ADDED") > 0);
        assert.equal(await watchEvents(engine, "FILTERED"), 0, "the server sent only ours");
      }

      const lines: string[] = [];
      const code = await main(["shards", "--lease-namespace", namespace], {
        write: (line) => lines.push(line),
        kubeconfig: await kubeconfigPath(),
      });
      assert.equal(code, 0, lines.join("\n"));
      const text = lines.join("\n");
      for (const id of ["r1", "r2", "r3"]) assert.match(text, new RegExp(`\\b${id}\\b`));
      assert.match(text, /shard\s+range\s+holder/i);
    } finally {
      await Promise.all(ops.map((op) => op.stop()));
    }
  },
);

/**
 * Scales 1 → `peak` → 1 replicas while 60 objects are created and changed, and asserts: no
 * completed handler ran twice, the last change of every object was handled, no deletion handling
 * and no finalizer changes because of the rebalances, every replica worked.
 * @param connect A client for each replica (a private plane); else the shared plane's.
 */
async function scaleWhileChanging(
  client: KubeClient,
  namespace: string,
  peak: number,
  connect?: () => Promise<KubeClient>,
) {
  const runs: Run[] = [];
  const names = Array.from({ length: 60 }, (_, i) => `s-${i}`);
  const values = new Map<string, number>();
  const observed = observe(client, namespace);
  const start = async (id: string) =>
    replica(runs, namespace, id, connect ? await connect() : undefined);
  const first = await start("a");
  const others: InProcessOperator[] = [];
  try {
    await balanced(client, namespace, 1);
    await createExamples(client, namespace, names.slice(0, 30));
    let changing = true;
    const changer = (async () => {
      for (let round = 1; changing; round++) {
        for (const name of names.slice(0, 30)) {
          await client.api.patch(KOPFEXAMPLES, name, { spec: { value: round } }, { namespace });
          values.set(name, round);
        }
        await sleep(300);
      }
    })();
    for (const id of ["b", "c", "d"].slice(0, peak - 1)) others.push(await start(id));
    await balanced(client, namespace, peak);
    await createExamples(client, namespace, names.slice(30));
    // Holding shards is not yet working on them (a new replica lists its shards first): each
    // replica handles something before the scale-down, or the test would prove nothing of it.
    const ids = ["b", "c", "d"].slice(0, peak - 1);
    await eventually(
      () => ids.every((id) => runs.some((r) => r.replica === id)),
      30_000,
      "every new replica at work",
    );
    for (const op of others) await op.stop();
    await balanced(client, namespace, 1);
    changing = false;
    await changer;

    await eventually(() => count(runs, "create").size === 60, 60_000, "60 creations");
    await eventually(
      () =>
        names.slice(0, 30).every((name) =>
          runs.some((r) => r.name === name && r.handler === `update:${values.get(name)}`)
        ),
      60_000,
      "the last change of every object to be handled",
    );
    await sleep(1_000);
    assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
    const updates = new Map<string, number>();
    for (const r of runs.filter((r) => r.handler.startsWith("update:"))) {
      const key = `${r.name} ${r.handler}`;
      updates.set(key, (updates.get(key) ?? 0) + 1);
    }
    assert.deepEqual([...updates].filter(([, n]) => n > 1), [], "no update handled twice");
    assert.deepEqual(
      runs.filter((r) => r.handler === "delete" || r.handler === "deleted-event"),
      [],
    );
    const objects = (await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace })).items;
    assert.equal(objects.length, 60);
    assert.ok(objects.every((o) => !o.metadata?.deletionTimestamp));
    assertFinalizersAddedOnce(observed, names);
    assert.equal(new Set(runs.map((r) => r.replica)).size, peak, "every replica worked");
  } finally {
    for (const op of others) await op.stop();
    await first.stop();
    await observed.stop();
  }
}

Deno.test(
  "scaling 1 → 3 → 1 while objects are created and changed: no completed handler runs twice, no change is lost, no deletion handling, no finalizer changes (X-SCALE-12, X-SCALE-13)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-scale");
    using _ = client;
    await scaleWhileChanging(client, namespace, 3);
  },
);

Deno.test(
  "the fallback with the ShardedListAndWatch gate off: the server ignores shardSelector, the replicas filter by the same hash (counted as FILTERED watch events); each create handler runs exactly once; scaling 1 → 2 → 1 while objects are created and changed runs nothing twice, loses no change, touches no finalizer (X-SCALE-15)",
  opts,
  async () => {
    await using plane = await ControlPlane.start({
      controllerManager: false,
      featureGates: { ShardedListAndWatch: false },
    });
    const connect = async () =>
      new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
    using client = await connect();
    await applyCrds(client, "crds/example.yaml");
    const namespace = "default";
    const runs: Run[] = [];
    const engines = [new MetricsEngine({ process: false }), new MetricsEngine({ process: false })];
    const ops = [
      await replica(runs, namespace, "f1", await connect(), engines[0]),
      await replica(runs, namespace, "f2", await connect(), engines[1]),
    ];
    try {
      for (const op of ops) await op.waitForLog(/does not filter by shardSelector/);
      await balanced(client, namespace, 2);
      const names = Array.from({ length: 20 }, (_, i) => `f-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => count(runs, "create").size === 20, 60_000, "20 creations");
      await sleep(1_000);
      assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
      assert.equal(new Set(runs.map((r) => r.replica)).size, 2, "both replicas handled a share");
      // Each object reaches all 4 shard watches of each replica; at most one keeps it.
      for (const engine of engines) {
        const filtered = await watchEvents(engine, "FILTERED");
        assert.ok(filtered >= 3 * names.length, `FILTERED ${filtered}`);
      }
    } finally {
      for (const op of ops) await op.stop();
    }
    // Rebalancing with client-side filtering only: the same guarantees.
    await scaleWhileChanging(client, await createTestNamespace(plane, "shard-off"), 2, connect);
  },
);

Deno.test(
  "--shard-by namespace: all objects of a namespace go to one replica; each handled once (X-SCALE-18)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-ns");
    using _ = client;
    const namespaces = [namespace];
    for (let i = 0; i < 5; i++) namespaces.push(await testNamespace("shard-ns"));
    const seen: Array<{ namespace: string; name: string; replica: string }> = [];
    const start = (identity: string) => {
      const s = settings(namespace, identity);
      s.sharding.key = "namespace";
      return startOperator((registry: OperatorRegistry) => {
        on.create("kopfexamples", { registry }, function create_fn({ name, namespace }) {
          seen.push({ namespace: namespace ?? "", name: name ?? "", replica: identity });
        });
      }, { namespaces, settings: s });
    };
    const ops = [await start("na"), await start("nb")];
    try {
      await balanced(client, namespace, 2);
      for (const ns of namespaces) await createExamples(client, ns, ["x", "y", "z"]);
      await eventually(() => seen.length >= 3 * namespaces.length, 60_000, "all creations");
      await sleep(1_000);
      assert.equal(seen.length, 3 * namespaces.length, "each object once");
      for (const ns of namespaces) {
        const replicas = new Set(seen.filter((s) => s.namespace === ns).map((s) => s.replica));
        assert.equal(replicas.size, 1, `${ns} handled by ${[...replicas]}`);
      }
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "on the emulator: two sharded replicas with server-side filtering split the objects, each handled once, none filtered on the client (X-SCALE-40)",
  opts,
  async () => {
    await using emulator = await Emulator.start();
    const connect = async () =>
      new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    using client = await connect();
    await applyCrds(client, "crds/example.yaml");
    const runs: Run[] = [];
    const engines = [new MetricsEngine({ process: false }), new MetricsEngine({ process: false })];
    const ops = [
      await replica(runs, "default", "e1", await connect(), engines[0]),
      await replica(runs, "default", "e2", await connect(), engines[1]),
    ];
    try {
      for (const op of ops) await op.waitForLog(/the API server filters the watches/);
      await balanced(client, "default", 2);
      await createExamples(client, "default", Array.from({ length: 20 }, (_, i) => `e-${i}`));
      await eventually(() => count(runs, "create").size === 20, 30_000, "20 creations");
      await sleep(500);
      assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
      assert.equal(new Set(runs.map((r) => r.replica)).size, 2, "both replicas handled a share");
      // Objects created once the shards' streams run certainly arrive through their watches
      // (the first ones may come with the streams' first listing instead).
      await createExamples(client, "default", Array.from({ length: 20 }, (_, i) => `f-${i}`));
      await eventually(() => count(runs, "create").size === 40, 30_000, "40 creations");
      for (const engine of engines) {
        assert.ok(await watchEvents(engine, "ADDED") > 0);
        assert.equal(await watchEvents(engine, "FILTERED"), 0, "the server sent only ours");
      }
    } finally {
      for (const op of ops) await op.stop();
    }
    // Its directory (the kubeconfig with the token) goes when it stops: nothing left in /tmp.
    const dir = emulator.kubeconfigPath.replace(/\/kubeconfig$/, "");
    await emulator.stop();
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, `${dir} is left behind`);
  },
);

const SHARDCLUSTERS: Resource = {
  group: "sharding.kopf.dev",
  version: "v1",
  plural: "shardclusters",
  singular: "shardcluster",
  kind: "ShardCluster",
  namespaced: false,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

Deno.test(
  "cluster-scoped resources are sharded by uid: each object handled once, by the holder of its shard (X-SCALE-16)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-cluster");
    using _ = client;
    await applyCrdObjects(client, [{
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "shardclusters.sharding.kopf.dev" },
      spec: {
        group: "sharding.kopf.dev",
        scope: "Cluster",
        names: { plural: "shardclusters", singular: "shardcluster", kind: "ShardCluster" },
        versions: [{
          name: "v1",
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
          },
        }],
      },
    }]);
    const seen: Array<{ name: string; replica: string }> = [];
    const start = (identity: string) => {
      const s = settings(namespace, identity);
      s.sharding.key = "namespace"; // ignored for cluster-scoped resources: always by uid
      return startOperator((registry: OperatorRegistry) => {
        on.create("shardclusters.v1.sharding.kopf.dev", { registry }, function create_fn({ name }) {
          if (name?.startsWith(`${namespace}-`)) seen.push({ name, replica: identity });
        });
      }, { namespaces: [namespace], settings: s });
    };
    const ops = [await start("ca"), await start("cb")];
    const names = Array.from({ length: 8 }, (_, i) => `${namespace}-${i}`);
    try {
      const status = await balanced(client, namespace, 2);
      const created: KubeObject[] = [];
      for (const name of names) {
        created.push(
          await client.api.create(SHARDCLUSTERS, {
            apiVersion: "sharding.kopf.dev/v1",
            kind: "ShardCluster",
            metadata: { name },
          }),
        );
      }
      await eventually(() => seen.length >= names.length, 60_000, "all creations");
      await sleep(1_000);
      assert.equal(seen.length, names.length, "each object once");
      const holders = new Map(status.shards.map((s) => [s.shard, s.holder]));
      for (const object of created) {
        const shard = shardOfObject(object, "uid", SHARDS);
        const handler = seen.find((s) => s.name === object.metadata?.name)?.replica;
        assert.equal(handler, holders.get(shard), `${object.metadata?.name} in shard ${shard}`);
      }
    } finally {
      for (const op of ops) await op.stop();
      for (const name of names) await client.api.delete(SHARDCLUSTERS, name).catch(() => {});
    }
  },
);

Deno.test(
  "kopf shards where no sharded operator runs: exit 1 and says where it looked",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-none");
    using _ = client;
    const lines: string[] = [];
    const code = await main(["shards", "--lease-namespace", namespace], {
      write: (line) => lines.push(line),
      kubeconfig: await kubeconfigPath(),
    });
    assert.equal(code, 1);
    assert.deepEqual(lines, [
      `error: No shard Leases 'kopf-*' in namespace ${namespace}: is kopf run --shards running there?`,
    ]);
  },
);

Deno.test(
  "admission webhooks: a sharded replica leaving does not remove them from the managed configuration, since the other replicas serve them (X-SCALE-22)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-adm");
    using _ = client;
    const managed = `${namespace}.kopf.dev`;
    const s = settings(namespace, "wa");
    s.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    s.admission.managed = managed;
    const op = await startOperator((registry: OperatorRegistry) => {
      on.validate("kopfexamples", {
        registry,
        labels: { "shard-adm": namespace }, // matches no object: the API is not slowed
        ignoreFailures: true,
      }, function check() {});
    }, { namespaces: [namespace], settings: s });
    const webhooks = async () => {
      const config = await client.api.get(WEBHOOK_CONFIGURATIONS.validating, managed)
        .catch(() => undefined) as { webhooks?: Array<{ name: string }> } | undefined;
      return (config?.webhooks ?? []).map((w) => w.name);
    };
    try {
      await eventually(async () => (await webhooks()).length === 1, 30_000, "the webhook");
      await op.stop();
      assert.ok(op.logs.some((e) => /Leaving the webhooks in .* as they are/.test(e.message)));
      assert.deepEqual(await webhooks(), [`check.${managed}`], "kept for the other replicas");
    } finally {
      await op.stop();
      for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
        await client.api.delete(resource, managed).catch(() => {});
      }
    }
  },
);
