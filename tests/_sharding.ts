/**
 * What the tests of sharded replicas share (tests/sharding_test.ts,
 * tests/sharding_handover_test.ts): shortened lease timings and 8 shards, a replica run in the
 * test's process with its handlers' runs recorded, the watch events its metrics counted, a
 * namespace with the example CRD, objects created in bulk, a wait until every replica holds a
 * share, and a watch of the test that sees every version of the objects.
 * @module
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import type { MetricsEngine } from "../core/engines/observability/metrics.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { watcher } from "../core/client/watching.ts";
import type { KubeClient } from "../core/client/client.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

/** Test options: replicas keep timers and sockets past a test's body. */
export const opts = { sanitizeOps: false, sanitizeResources: false };
/** Shards per test (instead of the default 32). */
export const SHARDS = 8;

/** One handler run of a {@link replica}: `create`, `update:<value>`, `delete`, `deleted-event`. */
export interface Run {
  readonly handler: string;
  readonly name: string;
  readonly replica: string;
}

/** Sharded settings: {@link SHARDS} shards, lease 4 s, deadline 3 s, retry 0.5 s; no events. */
export function settings(namespace: string, identity: string) {
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
 * A replica whose create handler takes a second, recording its runs in `runs`: a release of its
 * shards or its graceful stop finds the handlers in flight and does not cut them (a second is
 * well within settings.queueing.exitTimeout).
 */
export function slowReplica(
  runs: SlowRun[],
  namespace: string,
  identity: string,
): Promise<InProcessOperator> {
  return startOperator((registry: OperatorRegistry) => {
    on.create("kopfexamples", { registry }, async function slow_fn({ name }) {
      const run: SlowRun = { name: name ?? "", replica: identity };
      runs.push(run);
      await sleep(1_000);
      run.finished = true;
    });
  }, { namespaces: [namespace], settings: settings(namespace, identity) });
}

/** Watch events of kopfexamples by type, from a replica's metrics. */
export async function watchEvents(engine: MetricsEngine, type: string): Promise<number> {
  const { text } = await engine.exposition();
  return text.split("\n")
    .filter((l) => l.startsWith("kopf_watch_events_total{") && l.includes(`type="${type}"`))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

/** A client of the shared plane with the example CRD applied, and a fresh namespace. */
export async function setup(prefix: string) {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace(prefix);
  return { client, namespace };
}

/** Creates kopfexamples of these names (`spec.value` 0), 25 at a time. */
export async function createExamples(client: KubeClient, namespace: string, names: string[]) {
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

/** Waits until `replicas` live members hold all shards between them. */
export async function balanced(
  client: KubeClient,
  namespace: string,
  replicas: number,
  timeoutMs = 60_000,
) {
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

/** Waits until `count` objects of the namespace are handled and their diff-base persisted. */
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
export function assertFinalizersAddedOnce(observed: Observed, names: readonly string[]) {
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
