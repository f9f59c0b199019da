/**
 * Orchestration: which (resource × namespace) streams run, started and stopped as resources
 * (CRDs) and namespaces appear and go away. Each stream feeds its own per-object queue.
 *
 * - Selectors are resolved against discovery (Kopf's ambiguity rules); unknown names are reported
 *   once and picked up when a matching CRD appears.
 * - Cluster-wide operators (`clusterwide`) watch each resource once, cluster-wide. Namespaced ones
 *   watch literal namespaces directly; glob patterns watch the Namespaces resource and follow it.
 *   Cluster-scoped resources are always watched cluster-wide.
 * - Sharded replicas (`sharding`): one stream per held shard per (resource × namespace), each
 *   with the shard's `shardSelector` and the same filter on this side; {@link
 *   Orchestrator.serveShards} starts and stops them as shards come and go, so a rebalance touches
 *   only the moving shards. Resources with index handlers get one more, unsharded stream that
 *   only indexes (indices hold all objects; handlers run on the owning replica only).
 * - Resources that reconcile handlers cache (`shared`) are read from the cache's informers, not
 *   watched again: the streams are taps of the shared watch, filtered here (see `./sharing.ts`).
 * @module
 */

import type { Lifecycle } from "../actions/lifecycles.ts";
import type { Logger } from "../actions/loggers.ts";
import type { KubeClient } from "../client/client.ts";
import { ApiError } from "../client/errors.ts";
import { objectEvents, watcher, watchingOptions } from "../client/watching.ts";
import type { Memo } from "../intents/contexts.ts";
import type { OperatorRegistry } from "../intents/registries.ts";
import { describeSelector, resolveSelector } from "../intents/selectors.ts";
import type { OperatorSettings } from "../settings/settings.ts";
import {
  isLiteralNamespace,
  matchAnyNamespace,
  type NamespacePattern,
} from "../structs/namespaces.ts";
import { type Resource, resourceName } from "../structs/resources.ts";
import { sleep } from "../util/backoff.ts";
import { releaseMemory } from "../util/memory.ts";
import { AdmissionGate } from "../util/gate.ts";
import { Semaphore } from "../util/semaphore.ts";
import { type Index, Indexers, IndexingReadiness } from "../engines/indexing.ts";
import { type OperatorPause, pausable } from "../engines/peering.ts";
import type { ResourceInventory } from "../engines/metrics.ts";
import type { OperatorObserver } from "../engines/observers.ts";
import type { KubeObject } from "../structs/objects.ts";
import { Patch } from "../structs/patches.ts";
import {
  effectiveShardKey,
  type ShardKey,
  shardOfObject,
  shardSelector,
} from "../structs/shards.ts";
import { makeResourceContext, processEvent, type ProcessingDeps } from "./processing.ts";
import { objectKey, ObjectQueue } from "./queueing.ts";
import type { SharedInformers } from "./sharing.ts";
import { watchSelectors } from "./watch_selectors.ts";

/** What orchestration needs. */
export interface OrchestrationDeps {
  /** The cluster connection. */
  readonly client: KubeClient;
  /** The declared handlers. */
  readonly registry: OperatorRegistry;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** Handler ordering. */
  readonly lifecycle: Lifecycle;
  /** Operator memo (copied per object). */
  readonly memo: Memo;
  /** Namespace patterns (ignored when cluster-wide). */
  readonly namespaces: readonly NamespacePattern[];
  /** Watch cluster-wide. */
  readonly clusterwide: boolean;
  /** Bounds concurrent processing across all streams. */
  readonly limiter?: Semaphore | undefined;
  /** Stops everything. */
  readonly signal: AbortSignal;
  /**
   * Aborts the handlers and requests in flight at once, with no time to finish (a lost
   * leadership: another replica may lead soon); `signal` must abort too.
   */
  readonly halt?: AbortSignal | undefined;
  /** Called once every initially served stream has listed its objects. */
  readonly onReady?: (() => void) | undefined;
  /** Peering's pause switch: while paused, resource streams are closed and no cycle runs. */
  readonly paused?: OperatorPause | undefined;
  /** Observes cycles, handlers, queues and watch streams (metrics, traces). */
  readonly observer?: OperatorObserver | undefined;
  /** Sharded replicas: the shard space; which shards are served comes by `serveShards()`. */
  readonly sharding?: ShardSpace | undefined;
  /** The informer cache of the reconcile handlers: the resources it holds are read from it. */
  readonly shared?: SharedInformers | undefined;
}

/** How objects are split into shards (all replicas of an operator must agree). */
export interface ShardSpace {
  /** The number of virtual shards. */
  readonly count: number;
  /** What is hashed. */
  readonly key: ShardKey;
  /** Send `shardSelector` to the server (it supports sharded watches). */
  readonly serverSide: boolean;
}

/** What a stream does with its objects: everything, only handling, or only indexing. */
type StreamRole = "full" | "process" | "index";

/** What an operator holds in memory. */
export interface OperatorStats {
  /** Running watch streams (resource × namespace). */
  readonly streams: number;
  /** Objects remembered (memos, progress of resume, daemons). */
  readonly objects: number;
  /** Per-object workers running now. */
  readonly workers: number;
  /** Daemon and timer tasks running or stopping. */
  readonly tasks: number;
}

/** Kept-alive connections left open when a burst is over (Events, leases and the next cycles). */
const IDLE_CONNECTIONS_KEPT = 2;

const NAMESPACES: Resource = {
  group: "",
  version: "v1",
  plural: "namespaces",
  singular: "namespace",
  kind: "Namespace",
  namespaced: false,
  verbs: ["list", "watch"],
  shortNames: ["ns"],
  categories: [],
  subresources: [],
  preferred: true,
};

interface Stream {
  readonly controller: AbortController;
  readonly done: Promise<void>;
  readonly resource: string;
}

/** Runs and re-plans the streams of one operator. */
export class Orchestrator {
  #deps: OrchestrationDeps;
  #streams = new Map<string, Stream>();
  #queues = new Map<string, { queue: ObjectQueue; resource: string }>();
  #served = new Map<string, { resource: Resource; selectors: Set<string> }>();
  #namespaces = new Set<string>();
  #reported = new Set<string>();
  #pendingListings = new Set<string>();
  #activity = new Map<string, number>();
  /** Processing cycles since the last idle garbage collection, and when the last one began. */
  #cycles = 0;
  #lastCycleAt = 0;
  #ready = false;
  #indexers: Indexers;
  #readiness = new IndexingReadiness();
  /** Admits the cycles of all streams (settings.queueing.admissionLimit). */
  readonly #gate: AdmissionGate | undefined;
  #shards = new Set<number>();
  #planned = false;

  /** @param deps Collaborators. */
  constructor(deps: OrchestrationDeps) {
    this.#deps = deps;
    this.#indexers = new Indexers(deps.registry.indexIds());
    const limit = deps.settings.queueing.admissionLimit;
    this.#gate = limit ? new AdmissionGate(limit) : undefined;
  }

  /** The operator's indices by name. */
  get indices(): Readonly<Record<string, Index>> {
    return this.#indexers.indices;
  }

  /**
   * Resolves when every index listed and indexed its objects (Kopf's readiness gate: no handler
   * runs on a partial index), or when the signal aborts.
   * @param signal Stops waiting.
   */
  indexed(signal: AbortSignal): Promise<void> {
    return this.#readiness.wait(signal);
  }

  /**
   * The memo of an object the operator holds in memory (for admission reviews of changes).
   * @param uid The object's uid.
   * @returns Its memo, or `undefined` when the object is not known here.
   */
  memoOf(uid: string): Memo | undefined {
    for (const { queue } of this.#queues.values()) {
      const memory = queue.memory(uid);
      if (memory) return memory.memo;
    }
    return undefined;
  }

  /**
   * Describes streams that showed no sign of life (events, bookmarks, reconnects) for longer
   * than twice the inactivity timeout — stuck beyond what their own watchdog repairs.
   * @returns A description, or undefined when all streams are alive.
   */
  problems(): string | undefined {
    const limit = this.#deps.settings.watching.inactivityTimeout * 2000;
    const now = performance.now();
    const stale = [...this.#activity].filter(([, at]) => now - at > limit).map(([key]) => key);
    return stale.length
      ? `Watch streams silent for over ${limit / 1000}s: ${stale.join(", ")}`
      : undefined;
  }

  /**
   * What the operator holds in memory right now (for tests of bookkeeping and for metrics).
   * @returns Counts of streams, remembered objects, running workers and daemon/timer tasks.
   */
  stats(): OperatorStats {
    let objects = 0;
    let workers = 0;
    let tasks = 0;
    for (const { queue } of this.#queues.values()) {
      objects += queue.size;
      workers += queue.active;
      for (const memory of queue.memories()) tasks += memory.spawner?.size ?? 0;
    }
    return { streams: this.#streams.size, objects, workers, tasks };
  }

  /**
   * What the operator holds per resource (for metrics; reads every remembered object).
   * @returns One entry per served resource.
   */
  inventory(): ResourceInventory[] {
    const held = new Map<string, {
      resource: string;
      streams: number;
      objects: number;
      workers: number;
      pending: number;
      daemons: number;
      timers: number;
    }>();
    const entry = (resource: string) => {
      let e = held.get(resource);
      if (!e) {
        e = { resource, streams: 0, objects: 0, workers: 0, pending: 0, daemons: 0, timers: 0 };
        held.set(resource, e);
      }
      return e;
    };
    for (const stream of this.#streams.values()) entry(stream.resource).streams++;
    for (const { queue, resource } of this.#queues.values()) {
      const e = entry(resource);
      e.objects += queue.size;
      e.workers += queue.active;
      e.pending += queue.waiting;
      for (const memory of queue.memories()) {
        const counts = memory.spawner?.counts();
        if (!counts) continue;
        e.daemons += counts.daemons;
        e.timers += counts.timers;
      }
    }
    return [...held.values()];
  }

  /** Runs until the signal aborts; resolves after all streams drained. */
  async run(): Promise<void> {
    const { client, signal, settings } = this.#deps;
    const tasks: Promise<unknown>[] = [];
    try {
      await this.#resolve();
    } catch (error) {
      if (signal.aborted) return; // stopped while discovering: nothing started yet
      throw error;
    }
    const patterns = this.#deps.namespaces;
    const followNamespaces = !this.#deps.clusterwide &&
      patterns.some((p) => !isLiteralNamespace(p));
    if (!this.#deps.clusterwide && !followNamespaces) {
      for (const ns of patterns.filter(isLiteralNamespace)) this.#namespaces.add(ns);
    }
    if (followNamespaces && !settings.scanning.disabled) tasks.push(this.#followNamespaces());
    else this.#planNow();
    if (!settings.scanning.disabled) {
      client.discovery.onChange(() =>
        void this.#resolve().then(() => this.#replan(), (error) => {
          if (!signal.aborted) this.#deps.logger.error(`Cannot re-read the resources: ${error}`);
        })
      );
      tasks.push(
        client.discovery.followDefinitions(signal, (error, retryInMs) => {
          this.#deps.logger.warning(
            `Watching CustomResourceDefinitions: ${error.message}; ` +
              `retrying in ${(retryInMs / 1000).toFixed(1)}s`,
          );
        }).catch((error) => {
          if (!signal.aborted) this.#deps.logger.error(`Stopped following CRDs: ${error}`);
        }),
      );
    }
    if (settings.process.idleGcDelay !== null) tasks.push(this.#collectWhenIdle());
    this.#checkReady();
    await new Promise<void>((resolve) =>
      signal.addEventListener("abort", () => resolve(), { once: true })
    );
    await Promise.allSettled([...tasks, ...[...this.#streams.values()].map((s) => s.done)]);
  }

  /**
   * One full garbage collection after each burst of processing, once the operator has idled for
   * `settings.process.idleGcDelay` seconds with no worker running, and the C allocator's free
   * pages returned (see core/util/memory.ts); the burst's spare idle connections are closed first.
   */
  async #collectWhenIdle(): Promise<void> {
    const { signal, settings, logger } = this.#deps;
    while (!signal.aborted) {
      const delayMs = (settings.process.idleGcDelay ?? 0) * 1000;
      // Nothing processed since the last collection: check again a whole delay later (a cheap
      // timer, not a busy loop); otherwise, when the delay after the last cycle is up.
      const idleMs = performance.now() - this.#lastCycleAt;
      const waitMs = this.#cycles === 0 ? delayMs : Math.max(delayMs - idleMs, 100);
      try {
        await sleep(waitMs, signal);
      } catch {
        return; // stopped
      }
      if (settings.process.idleGcDelay === null) return;
      if (this.#cycles === 0 || performance.now() - this.#lastCycleAt < delayMs) continue;
      if (this.stats().workers > 0) continue;
      const cycles = this.#cycles;
      this.#cycles = 0;
      const t0 = performance.now();
      // The burst's spare connections first: their buffers are then garbage to collect.
      const closed = this.#deps.client.http.closeIdle(IDLE_CONNECTIONS_KEPT);
      const { collected, trimmed } = await releaseMemory();
      if (!collected && !trimmed) return; // the runtime offers no way: never try again
      const ms = (performance.now() - t0).toFixed(0);
      logger.debug(
        `Collected garbage after ${cycles} cycles and ${delayMs / 1000}s idle ` +
          `(${ms} ms${trimmed ? ", allocator trimmed" : ""}, ${closed} idle connections closed)`,
      );
    }
  }

  async #resolve(): Promise<void> {
    const resources = await this.#deps.client.discovery.resources(this.#deps.signal);
    const served = new Map<string, { resource: Resource; selectors: Set<string> }>();
    for (const selector of this.#deps.registry.selectors()) {
      const key = JSON.stringify(selector);
      const { resources: found, ambiguous } = resolveSelector(selector, resources);
      if (ambiguous && !this.#reported.has(`a:${key}`)) {
        this.#reported.add(`a:${key}`);
        const names = ambiguous.map(resourceName).join(", ");
        this.#deps.logger.warning(
          `Ambiguous resource selector ${
            describeSelector(selector)
          } matches ${names}; serving none of them: specify the group`,
        );
      } else if (found.length === 0 && !ambiguous && !this.#reported.has(`u:${key}`)) {
        this.#reported.add(`u:${key}`);
        this.#deps.logger.error(
          `No resource matches ${
            describeSelector(selector)
          }: is its CRD installed? Its handlers will start when it appears`,
        );
      }
      for (const resource of found) {
        const id = resourceName(resource);
        const entry = served.get(id) ?? { resource, selectors: new Set() };
        entry.selectors.add(key);
        served.set(id, entry);
        this.#reported.delete(`u:${key}`);
      }
    }
    this.#served = served;
  }

  /** The first full plan: the namespaces are known; shard changes replan from now on. */
  #planNow(): void {
    this.#planned = true;
    this.#replan();
  }

  async #followNamespaces(): Promise<void> {
    const { client, signal, logger, settings } = this.#deps;
    const options = {
      ...watchingOptions(settings.watching),
      ...watchSelectors(settings.watching, NAMESPACES), // only if a key selects namespaces
      signal,
    };
    try {
      for await (
        const event of objectEvents(watcher(client.api, NAMESPACES, options), (e) => {
          if (e.type === "initDone") this.#planNow();
          if (e.type === "error" && e.error instanceof ApiError && e.error.code === 403) {
            throw e.error;
          }
        })
      ) {
        const name = event.object.metadata?.name ?? "";
        if (!matchAnyNamespace(this.#deps.namespaces, name)) continue;
        const terminating =
          (event.object.status as { phase?: string } | undefined)?.phase === "Terminating";
        if (event.type === "delete" || terminating) this.#namespaces.delete(name);
        else this.#namespaces.add(name);
        this.#replan();
      }
    } catch (error) {
      if (signal.aborted) return;
      logger.warning(
        `Cannot watch namespaces (${error}); serving only the literal namespace names given`,
      );
      for (const ns of this.#deps.namespaces) if (isLiteralNamespace(ns)) this.#namespaces.add(ns);
      this.#planNow();
    }
  }

  /**
   * Serves exactly these shards from now on (sharded replicas only): streams of new shards
   * start; those of dropped shards stop at once (their handlers, daemons and timers get their
   * stop signals). Objects of dropped shards are released, not deleted: no handler runs for them.
   * @param shards The shards this replica holds now.
   * @returns Resolves when the dropped shards' work has finished (or its grace period passed).
   */
  async serveShards(shards: ReadonlySet<number>): Promise<void> {
    this.#shards = new Set(shards);
    // Before run() has planned the streams, nothing runs yet; planning now, with no resources
    // resolved, would open the readiness gates with no index listed.
    if (!this.#planned) return;
    await Promise.all(this.#replan());
  }

  /**
   * Starts streams that should run and stops those that should not.
   * @returns The ends of the streams it stopped.
   */
  #replan(): Promise<void>[] {
    const wanted = new Map<
      string,
      {
        resource: Resource;
        namespace: string | undefined;
        selectors: Set<string>;
        shard: number | undefined;
        role: StreamRole;
      }
    >();
    const sharding = this.#deps.sharding;
    for (const [id, { resource, selectors }] of this.#served) {
      const namespaces = this.#deps.clusterwide || !resource.namespaced
        ? [undefined]
        : [...this.#namespaces];
      const indexed = this.#deps.registry.handlersFor(resource, selectors).indexing.length > 0;
      for (const namespace of namespaces) {
        const base = `${id}@${namespace ?? "*"}`;
        if (!sharding) {
          wanted.set(base, { resource, namespace, selectors, shard: undefined, role: "full" });
          continue;
        }
        if (indexed) {
          wanted.set(`${base}#index`, {
            resource,
            namespace,
            selectors,
            shard: undefined,
            role: "index",
          });
        }
        for (const shard of this.#shards) {
          wanted.set(`${base}#${shard}`, {
            resource,
            namespace,
            selectors,
            shard,
            role: "process",
          });
        }
      }
    }
    const stopped: Promise<void>[] = [];
    for (const [key, stream] of this.#streams) {
      if (!wanted.has(key)) {
        stream.controller.abort();
        stopped.push(stream.done);
        this.#streams.delete(key);
        this.#activity.delete(key);
        this.#pendingListings.delete(key);
      }
    }
    for (const [key, target] of wanted) {
      if (this.#streams.has(key) || this.#deps.signal.aborted) continue;
      const controller = new AbortController();
      const signal = AbortSignal.any([controller.signal, this.#deps.signal]);
      if (!this.#ready) this.#pendingListings.add(key);
      if (
        target.role !== "process" &&
        this.#deps.registry.handlersFor(target.resource, target.selectors).indexing.length
      ) {
        this.#readiness.expect(key);
      }
      const done = this.#stream(key, target, signal);
      this.#streams.set(key, { controller, done, resource: resourceName(target.resource) });
    }
    this.#checkReady();
    this.#readiness.check();
    return stopped;
  }

  #checkReady(): void {
    if (!this.#ready && this.#pendingListings.size === 0) {
      this.#ready = true;
      this.#deps.onReady?.();
    }
  }

  async #stream(
    key: string,
    target: {
      resource: Resource;
      namespace: string | undefined;
      selectors: Set<string>;
      shard: number | undefined;
      role: StreamRole;
    },
    signal: AbortSignal,
  ): Promise<void> {
    const { resource, namespace, selectors, shard, role } = target;
    const { settings, logger, observer } = this.#deps;
    const name = resourceName(resource);
    const all = this.#deps.registry.handlersFor(resource, selectors);
    const handlers = role === "process" ? { ...all, indexing: [] } : all;
    // A stopping operator (or a released shard) stops its watch and starts no new cycle at once,
    // but the cycles in flight may finish and persist their progress (within
    // settings.queueing.exitTimeout) before their requests and handlers are aborted: the next
    // start (or the shard's next holder) then repeats nothing. The fault suite found a handler
    // whose result was lost to a stop right after it ran, and ran it again after the restart.
    const work = new AbortController();
    const halt = this.#deps.halt;
    const workSignal = role === "index"
      ? signal
      : halt
      ? AbortSignal.any([work.signal, halt])
      : work.signal;
    const deps: ProcessingDeps = {
      api: this.#deps.client.api,
      resource,
      changing: handlers.changing,
      watching: handlers.watching,
      spawning: handlers.spawning,
      indices: this.#indexers.indices,
      readiness: this.#readiness,
      settings,
      logger,
      lifecycle: this.#deps.lifecycle,
      signal: workSignal,
      observer,
      paused: this.#deps.paused,
      gate: this.#gate,
    };
    const queue: ObjectQueue = new ObjectQueue({
      settings: settings.queueing,
      process: async (memory, event) => {
        // Paused by peering: cycles (retries, daemon wake-ups) wait for the resume, not counted
        // by the admission gate meanwhile.
        const paused = this.#deps.paused;
        if (paused?.paused) {
          const resumed = () => paused.resumed(signal);
          await (this.#gate ? this.#gate.away(resumed) : resumed());
        }
        if (signal.aborted) throw signal.reason;
        this.#cycles++;
        this.#lastCycleAt = performance.now();
        if (!observer) return processEvent(deps, memory, event);
        const meta = event.body.metadata ?? {};
        return observer.cycle({
          resource: name,
          namespace: meta.namespace,
          name: meta.name,
          uid: meta.uid,
          event: event.internal ? null : event.type,
        }, () => processEvent(deps, memory, event));
      },
      createMemory: (_body, wake) => ({
        memo: shallowCopy(this.#deps.memo),
        handledOnce: false,
        wake,
      }),
      logger,
      signal,
      limiter: this.#deps.limiter,
      gate: this.#gate,
      ...(settings.queueing.workerLimit
        ? { streamLimiter: new Semaphore(settings.queueing.workerLimit) }
        : {}),
      observer,
      name,
    });
    this.#queues.set(key, { queue, resource: name });
    const indexMemory = { memo: shallowCopy(this.#deps.memo), handledOnce: true, wake: () => {} };
    const where = (namespace ? ` in ${namespace}` : "") +
      (shard === undefined ? "" : ` (shard ${shard})`);
    logger.debug(`Watching ${resourceName(resource)}${where}`);
    const sharding = shard === undefined ? undefined : this.#deps.sharding;
    const shardKey = sharding && effectiveShardKey(sharding.key, resource.namespaced);
    const accept = sharding && shardKey
      ? (object: KubeObject) => shardOfObject(object, shardKey, sharding.count) === shard
      : undefined;
    // A resource the reconcile handlers cache is read from its informer: one list+watch for all.
    const shared = this.#deps.shared?.holds(resource) ? this.#deps.shared : undefined;
    // A pause closes the stream and stops the daemons; a resume relists (which reports what
    // changed or vanished meanwhile) and the daemons' exits wake their objects to respawn them.
    const open = (period: AbortSignal) =>
      shared
        ? shared.events(resource, namespace, { accept, signal: period })
        : watcher(this.#deps.client.api, resource, {
          namespace,
          ...watchingOptions(settings.watching),
          ...watchSelectors(settings.watching, resource),
          ...(sharding && shardKey && shard !== undefined
            ? {
              // The server filters if it can; this side filters always (older servers ignore it).
              ...(sharding.serverSide
                ? { shardSelector: shardSelector([shard], sharding.count, shardKey) }
                : {}),
              // What the server sent for other shards counts as type FILTERED in the metrics.
              accept: (object: KubeObject) => {
                if (accept!(object)) return true;
                observer?.watchEvent(name, "FILTERED");
                return false;
              },
            }
            : {}),
          signal: period,
        });
    const onPause = () => {
      this.#activity.delete(key); // a paused stream is not a stuck one
      for (const memory of queue.memories()) memory.spawner?.pauseAll();
    };
    // Without peering, no extra generator layer between the watch and the queue.
    const stream = this.#deps.paused
      ? pausable(this.#deps.paused, signal, open, { onPause })
      : open(signal);
    try {
      for await (
        const event of objectEvents(stream, (other) => {
          if (other.type === "initDone") this.#readiness.listed(key);
          if (other.type === "initDone" && this.#pendingListings.delete(key)) this.#checkReady();
          if (other.type === "error") {
            logger.warning(`Watching ${resourceName(resource)}${where}: ${other.error.message}`);
          }
          if (other.type === "skipped") {
            logger.warning(
              `Watching ${resourceName(resource)}${where}: ignored ${other.reason}; ` +
                "the stream goes on",
            );
          }
          if (other.type === "connected") observer?.watchConnected(name, other.reason);
          if (other.type === "bookmark") observer?.watchEvent(name, "BOOKMARK");
        })
      ) {
        this.#activity.set(key, performance.now());
        observer?.watchEvent(
          name,
          event.type === "delete" ? "DELETED" : event.raw === null ? "LISTED" : event.raw,
        );
        if (handlers.indexing.length) {
          // Indexed on the stream itself, so the readiness gate opens only when all are indexed.
          await this.#indexers.index(
            handlers.indexing,
            objectKey(event.object),
            event.object,
            event.type === "delete",
            (handler) =>
              makeResourceContext(
                deps,
                indexMemory,
                event.object,
                new Patch(),
                logger.forObject(event.object, { local: true }),
                handler.param,
              ),
            logger.forObject(event.object, { local: true }),
          );
        }
        if (role === "index") continue; // handled by the shard's own stream
        // Unchanged objects of a relist matter only to raw-event handlers (they see every
        // listing, as in Kopf); for the rest, a relist repeats no work.
        if (event.type === "apply" && event.unchanged) {
          if (handlers.watching.length) {
            queue.push({ type: null, body: event.object, forced: true });
          }
          continue;
        }
        queue.push({ type: event.type === "delete" ? "DELETED" : event.raw, body: event.object });
      }
    } finally {
      this.#activity.delete(key);
      this.#queues.delete(key);
      // Daemons and timers get the grace period to exit, then are abandoned; none outlives us.
      const spawners = queue.memories().map((m) =>
        m.spawner?.stopAll(settings.process.gracePeriod)
      );
      try {
        await Promise.all([queue.drain(settings.queueing.exitTimeout), ...spawners]);
      } finally {
        work.abort();
      }
    }
  }
}

/** A shallow copy that keeps the memo's class (custom memo objects keep their methods). */
function shallowCopy(memo: Memo): Memo {
  return Object.assign(Object.create(Object.getPrototypeOf(memo)), memo);
}
