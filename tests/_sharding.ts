/**
 * Shared pieces of the sharded-replica tests (tests/sharding_*_test.ts): sharded settings with
 * shortened Lease timings (lease 4 s, deadline 3 s, retry 0.5 s) and 8 shards instead of 32,
 * in-process replicas recording their handler runs, a wait for the shards to be balanced over the
 * live replicas, a watch of the test's own that records every version of the objects, and the
 * scale 1 → N → 1 scenario run both with the ShardedListAndWatch gate on and off.
 * @module
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { on } from "../core/api/on.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import type { MetricsEngine } from "../core/engines/observability/metrics.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { watcher } from "../core/client/watching.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

/** The number of shards of every test (the default is 32). */
export const SHARDS = 8;

/** One handler run of a {@link replica}. */
export interface Run {
  /** `create`, `update:<value>`, `delete` or `deleted-event`. */
  readonly handler: string;
  /** The object's name. */
  readonly name: string;
  /** The identity of the replica that ran it. */
  readonly replica: string;
}

/** Sharded settings with {@link SHARDS} shards and shortened Lease timings, no events posted. */
export function settings(namespace: string, identity: string): OperatorSettings {
  return createSettings({
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
  });
}

/**
 * Starts an in-process sharded replica watching `namespace` (its Leases there too) with the
 * handlers that `register` registers.
 * @param options `key`: the sharding key (`namespace` for `--shard-by namespace`); `namespaces`:
 *   the namespaces to serve, if not only `namespace`.
 */
export function shardedOperator(
  namespace: string,
  identity: string,
  register: (registry: OperatorRegistry) => void,
  options: { key?: "namespace"; namespaces?: string[] } = {},
): Promise<InProcessOperator> {
  const s = settings(namespace, identity);
  if (options.key) s.sharding.key = options.key;
  return startOperator(register, {
    namespaces: options.namespaces ?? [namespace],
    settings: s,
  });
}

/** A replica whose handlers record their runs in `runs`. */
export function replica(
  runs: Run[],
  namespace: string,
  identity: string,
  client?: KubeClient,
  metricsEngine?: MetricsEngine,
): Promise<InProcessOperator> {
  const record = (handler: string, name: string | undefined) =>
    runs.push({ handler, name: name ?? "", replica: identity });
  return startOperator((registry: OperatorRegistry) => {
    on.create("kopfexamples", { registry }, function create_fn({ name }) {
      record("create", name);
    });
    on.update("kopfexamples", { registry }, function update_fn({ name, spec }) {
      record(`update:${(spec as { value?: number }).value}`, name);
    });
    on.delete("kopfexamples", { registry }, function delete_fn({ name }) {
      record("delete", name);
    });
    on.event("kopfexamples", { registry }, function event_fn({ name, type }) {
      if (type === "DELETED") record("deleted-event", name);
    });
  }, {
    namespaces: [namespace],
    settings: settings(namespace, identity),
    ...(client ? { client } : {}),
    ...(metricsEngine ? { metricsEngine } : {}),
  });
}

/** A run of a {@link slowReplica}'s create handler: `finished` once its second is over. */
export interface SlowRun {
  readonly name: string;
  readonly replica: string;
  finished?: boolean;
}

/**
 * A replica whose create handler takes a second (so that a release or a stop finds it in flight;
 * well within settings.queueing.exitTimeout, so not cut), recording its runs in `runs`.
 */
export function slowReplica(
  runs: SlowRun[],
  namespace: string,
  identity: string,
): Promise<InProcessOperator> {
  return shardedOperator(namespace, identity, (registry) => {
    on.create("kopfexamples", { registry }, async function slow_fn({ name }) {
      const run: SlowRun = { name: name ?? "", replica: identity };
      runs.push(run);
      await sleep(1_000);
      run.finished = true;
    });
  });
}

/** Watch events of kopfexamples by type, from a replica's metrics. */
export async function watchEvents(engine: MetricsEngine, type: string): Promise<number> {
  const { text } = await engine.exposition();
  return text.split("\n")
    .filter((l) => l.startsWith("kopf_watch_events_total{") && l.includes(`type="${type}"`))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

/** A client of the shared plane (the example CRD applied) and a fresh namespace. */
export async function setup(prefix: string): Promise<{ client: KubeClient; namespace: string }> {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace(prefix);
  return { client, namespace };
}

/** A new client of the API server of a kubeconfig file (a private plane, the emulator). */
export async function connectTo(kubeconfig: string): Promise<KubeClient> {
  return new KubeClient(await loadKubeconfig({ paths: [kubeconfig] }));
}

/** Names `<prefix>-0` … `<prefix>-<count - 1>`. */
export function objectNames(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
}

/** Creates kopfexamples of these names (`spec.value` 0), 25 at a time. */
export async function createExamples(
  client: KubeClient,
  namespace: string,
  names: string[],
): Promise<void> {
  for (let i = 0; i < names.length; i += 25) {
    await Promise.all(
      names.slice(i, i + 25).map((name) =>
        client.api.create(KOPFEXAMPLES, {
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          metadata: { name },
          spec: { value: 0 },
        }, { namespace })
      ),
    );
  }
}

/** Waits until `replicas` live members hold all shards between them; returns the status. */
export async function balanced(
  client: KubeClient,
  namespace: string,
  replicas: number,
  timeoutMs = 60_000,
): Promise<Awaited<ReturnType<typeof readShardStatus>>> {
  return await eventually(
    async () => {
      const status = await readShardStatus(client.api, { name: "kopf", namespace });
      const holders = new Set(status.shards.map((s) => s.holder));
      return status.shards.length === SHARDS && !holders.has(undefined) &&
          holders.size === replicas && status.members.length === replicas
        ? status
        : undefined;
    },
    timeoutMs,
    `${replicas} replicas to hold all ${SHARDS} shards`,
  );
}

/** Waits until all `count` objects of the namespace are handled and persisted (a diff-base). */
export async function allPersisted(
  client: KubeClient,
  namespace: string,
  count: number,
): Promise<void> {
  await eventually(
    async () => {
      const { items } = await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace });
      const done = items.filter((o) =>
        (o.metadata?.annotations ?? {})["kopf.zalando.org/last-handled-configuration"]
      );
      return done.length === count;
    },
    30_000,
    "every object handled and persisted",
  );
}

/** Runs `kopf shards --lease-namespace <namespace>` against the shared plane. */
export async function kopfShards(namespace: string): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await main(["shards", "--lease-namespace", namespace], {
    write: (line) => lines.push(line),
    kubeconfig: await kubeconfigPath(),
  });
  return { code, lines };
}

/** What a watch of the namespace saw of every object's versions (the test's own stream). */
export interface Observed {
  /** Per object, whose create results were ever persisted (`status.create_fn.replica`). */
  readonly creates: Map<string, Set<string>>;
  /** Per `name value`, whose update results were ever persisted (`status.update_fn`). */
  readonly updates: Map<string, Set<string>>;
  /** Per object, its successive distinct finalizer lists (as JSON). */
  readonly finalizers: Map<string, string[]>;
  /** Relists after 410 Gone (each a possible gap in the versions seen: should stay 0). */
  gaps(): number;
  /** Ends the watch. */
  stop(): Promise<void>;
}

/** Watches the namespace's objects from now on, recording every version. */
export function observe(client: KubeClient, namespace: string): Observed {
  const controller = new AbortController();
  const creates = new Map<string, Set<string>>();
  const updates = new Map<string, Set<string>>();
  const finalizers = new Map<string, string[]>();
  const add = (map: Map<string, Set<string>>, key: string, value: string) =>
    map.set(key, (map.get(key) ?? new Set()).add(value));
  let gaps = 0;
  const done = (async () => {
    const stream = watcher(client.api, KOPFEXAMPLES, { namespace, signal: controller.signal });
    for await (const event of stream) {
      // A watch the server ended resumes from its last version and misses none; a relist may.
      if (event.type === "connected" && event.reason === "gone") gaps++;
      if (event.type !== "apply" && event.type !== "initApply") continue;
      const name = event.object.metadata?.name ?? "";
      const status = event.object.status as
        | { create_fn?: { replica?: string }; update_fn?: { replica?: string; value?: number } }
        | undefined;
      if (status?.create_fn?.replica) add(creates, name, status.create_fn.replica);
      if (status?.update_fn?.replica) {
        add(updates, `${name} ${status.update_fn.value}`, status.update_fn.replica);
      }
      const list = JSON.stringify(event.object.metadata?.finalizers ?? []);
      const seen = finalizers.get(name) ?? [];
      if (seen.at(-1) !== list) seen.push(list);
      finalizers.set(name, seen);
    }
  })().catch(() => {});
  return {
    creates,
    updates,
    finalizers,
    gaps: () => gaps,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

/**
 * Every object's finalizer was added once by its first handling and never touched again: a
 * rebalance (released and taken-over objects) changes no finalizer.
 */
export function assertFinalizersAddedOnce(observed: Observed, names: readonly string[]): void {
  assert.equal(observed.gaps(), 0, "the test's watch saw every version");
  const changed = names.map((name) => [name, observed.finalizers.get(name) ?? []] as const)
    .filter(([, lists]) => JSON.stringify(lists) !== JSON.stringify(["[]", `["${FINALIZER}"]`]));
  assert.deepEqual(changed, [], "finalizer lists other than [] → [finalizer]");
}

/** How many times `handler` ran, per object. */
export function count(runs: readonly Run[], handler: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const run of runs) {
    if (run.handler === handler) counts.set(run.name, (counts.get(run.name) ?? 0) + 1);
  }
  return counts;
}

/**
 * Scales 1 → `peak` → 1 replicas while 60 objects are created and changed, and asserts: no
 * completed handler ran twice, the last change of every object was handled, no deletion handling
 * and no finalizer changes because of the rebalances, every replica worked.
 * @param connect A client for each replica (a private plane); else the shared plane's.
 */
export async function scaleWhileChanging(
  client: KubeClient,
  namespace: string,
  peak: number,
  connect?: () => Promise<KubeClient>,
): Promise<void> {
  const runs: Run[] = [];
  const names = objectNames("s", 60);
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
