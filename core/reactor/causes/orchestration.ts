/**
 * Orchestration: which (resource × namespace) streams run, started and stopped as resources
 * (CRDs) and namespaces appear and go away. Each stream feeds its own per-object queue.
 *
 * - Selectors are resolved against discovery (Kopf's ambiguity rules); unknown names are reported
 *   once and picked up when a matching CRD appears (`./resolving.ts`).
 * - Cluster-wide operators (`clusterwide`) watch each resource once, cluster-wide. Namespaced ones
 *   watch literal namespaces directly; glob patterns watch the Namespaces resource and follow it
 *   (`./namespace_following.ts`). Cluster-scoped resources are always watched cluster-wide.
 * - Sharded replicas (`sharding`): one stream per held shard per (resource × namespace), each
 *   with the shard's `shardSelector` and the same filter on this side; {@link
 *   Orchestrator.serveShards} starts and stops them as shards come and go, so a rebalance touches
 *   only the moving shards. Resources with index handlers get one more, unsharded stream that
 *   only indexes (indices hold all objects; handlers run on the owning replica only). Which
 *   streams should run is planned in `./planning.ts`; one stream runs in `./streaming.ts`.
 * - Resources that reconcile handlers cache (`shared`) are read from the cache's informers, not
 *   watched again: the streams are taps of the shared watch, filtered here (see `./sharing.ts`).
 * - After each burst of processing, memory is given back once the operator idles
 *   (`./idle_collecting.ts`).
 *
 * {@link Orchestrator.run} is a list of parts (`core/util/parts.ts`): the watch streams (started
 * and stopped by the plans), the namespace following, the CRD following and the idle collector,
 * stopped by the groups of {@link ORCHESTRATION_GROUPS}.
 * @module
 */

import { isRoutineSilence } from "../../client/watching.ts";
import type { Memo } from "../../intents/contexts.ts";
import { isLiteralNamespace } from "../../structs/namespaces.ts";
import { resourceName } from "../../structs/resources.ts";
import { FieldPathChecks } from "../../engines/runners/field_paths.ts";
import type { Index } from "../../engines/runners/indexing.ts";
import type { ResourceInventory } from "../../engines/observability/metrics.ts";
import { aborted, type Part, runningPart, runParts, type StopGroup } from "../../util/parts.ts";
import type { OperatorScope } from "../scope/scope.ts";
import { IdleCollector } from "./idle_collecting.ts";
import { followNamespaces } from "../streams/namespace_following.ts";
import { planStreams } from "./planning.ts";
import type { ObjectQueue } from "./queueing.ts";
import { ResourceResolver, type ServedResource } from "../streams/resolving.ts";
import { runStream, type StreamBookkeeping } from "./streaming.ts";

/** What the term tells its orchestrator besides the scope: whom to call back. */
export interface OrchestrationCallbacks {
  /** Called once every initially served stream has listed its objects. */
  readonly onReady?: (() => void) | undefined;
  /**
   * Called when a stream fails on its own (an unexpected error, not a stop): the operator must
   * stop then, not go on without the stream. Without it, the failure is not caught.
   */
  readonly onFailure?: ((error: unknown) => void) | undefined;
}

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

/** The stop groups of the orchestrator's own parts. */
export type OrchestrationGroup = "intake" | "streams" | "idle";

/**
 * The stop groups of {@link Orchestrator.run}'s parts, in their stop order. They all hear the
 * stop at once (the term's stop, as they always have: nothing here reads another part while it
 * stops), and the stop waits for them in this order:
 *
 * 1. `intake`: the namespace following and the CRD following end: nothing plans streams anymore
 *    (and no plan starts a stream once the term's signal aborted);
 * 2. `streams`: the watch streams (they hear the term's signal themselves), waited for until
 *    every one is `done`: their workers finished their cycles;
 * 3. `idle`: the idle collector, which has nothing left to wait for but a collection under way.
 */
export const ORCHESTRATION_GROUPS: readonly (StopGroup & { name: OrchestrationGroup })[] = [
  { name: "intake", told: "at once" },
  { name: "streams", told: "at once" },
  { name: "idle", told: "at once" },
];

interface Stream {
  readonly controller: AbortController;
  readonly done: Promise<void>;
  readonly resource: string;
}

/** Runs and re-plans the streams of one operator. */
export class Orchestrator {
  #scope: OperatorScope;
  #callbacks: OrchestrationCallbacks;
  #streams = new Map<string, Stream>();
  #queues = new Map<string, { queue: ObjectQueue; resource: string }>();
  #served = new Map<string, ServedResource>();
  #namespaces = new Set<string>();
  #resolver: ResourceResolver;
  #pendingListings = new Set<string>();
  #activity = new Map<string, number>();
  #idle: IdleCollector;
  #ready = false;
  /** The streams' bookkeeping: what each stream tells the orchestrator as it goes. */
  #books: StreamBookkeeping;
  #shards = new Set<number>();
  #planned = false;
  #fieldPaths = new FieldPathChecks();
  /** The own parts that run now (by name, in start order), and those that ended on their own. */
  #running = new Set<string>();
  #missing: string[] = [];

  /**
   * An orchestrator with no stream running until `run()`.
   * @param scope The operator's parts (its indices and their readiness gate too).
   * @param callbacks Whom to tell that the streams listed, or that one failed.
   */
  constructor(scope: OperatorScope, callbacks: OrchestrationCallbacks = {}) {
    this.#scope = scope;
    this.#callbacks = callbacks;
    this.#resolver = new ResourceResolver(scope);
    this.#idle = new IdleCollector(scope, {
      busy: () => this.stats().workers > 0,
      behind: () => this.#behind(),
    });
    const readiness = scope.readiness;
    this.#books = {
      opened: (key, queue, resource) => void this.#queues.set(key, { queue, resource }),
      listed: (key) => {
        readiness.listed(key);
        if (this.#pendingListings.delete(key)) this.#checkReady();
      },
      alive: (key) => void this.#activity.set(key, performance.now()),
      paused: (key) => void this.#activity.delete(key),
      cycle: () => this.#idle.cycle(),
      closed: (key) => {
        this.#activity.delete(key);
        this.#queues.delete(key);
      },
    };
  }

  /** The operator's indices by name. */
  get indices(): Readonly<Record<string, Index>> {
    return this.#scope.indexers.indices;
  }

  /**
   * Resolves when every index listed and indexed its objects (Kopf's readiness gate: no handler
   * runs on a partial index), or when the signal aborts.
   * @param signal Stops waiting.
   */
  indexed(signal: AbortSignal): Promise<void> {
    return this.#scope.readiness.wait(signal);
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
   * Describes what of the orchestration should run and does not (the liveness endpoint answers
   * 503 with it): its own parts that ended on their own (`"The CRD following is not running:
   * …"`), and streams that showed no sign of life (events, bookmarks, reconnects) for longer
   * than twice the inactivity timeout — stuck beyond what their own watchdog repairs.
   * @returns A description, or undefined when all run and all streams are alive.
   */
  problems(): string | undefined {
    const limit = this.#scope.settings.watching.inactivityTimeout * 2000;
    const now = performance.now();
    const stale = [...this.#activity].filter(([, at]) => now - at > limit).map(([key]) => key);
    const problems = [
      ...this.#missing,
      ...stale.length
        ? [`Watch streams silent for over ${limit / 1000}s: ${stale.join(", ")}`]
        : [],
    ];
    return problems.length ? problems.join("; ") : undefined;
  }

  /**
   * The orchestrator's own parts that run now, by name, in start order (see
   * {@link ORCHESTRATION_GROUPS}): `"the watch streams"`, `"the namespace following"`, `"the CRD
   * following"`, `"the idle collector"` — each only when it is started at all.
   * @returns The names; empty before `run()` and after its stop.
   */
  running(): string[] {
    return [...this.#running];
  }

  /** Whether objects wait for their cycles: a listing's backlog, or events for their workers. */
  #behind(): boolean {
    for (const { queue } of this.#queues.values()) {
      if (queue.unbegun > 0 || queue.waiting > 0) return true;
    }
    return false;
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

  /**
   * Runs until the signal aborts; resolves after all streams drained. The resources are resolved
   * first; then its parts start in this order: the watch streams (the plans start and stop
   * them), the namespace following (for glob patterns; otherwise the first plan at once), the CRD
   * following (unless scanning is disabled), the idle collector (unless
   * `settings.process.idleGcDelay` and `pageOutDelay` are both null). They stop by {@link ORCHESTRATION_GROUPS}.
   * @throws the error a part failed with (told to `onFailure` when it failed), after the stop.
   */
  async run(): Promise<void> {
    const { client, signal, settings } = this.#scope;
    try {
      await this.#resolve();
    } catch (error) {
      if (signal.aborted) return; // stopped while discovering: nothing started yet
      throw error;
    }
    const patterns = this.#scope.namespaces;
    const followed = !this.#scope.clusterwide && patterns.some((p) => !isLiteralNamespace(p));
    // Without scanning, the patterns are not followed: only the literal names are served.
    if (!this.#scope.clusterwide && (!followed || settings.scanning.disabled)) {
      for (const ns of patterns.filter(isLiteralNamespace)) this.#namespaces.add(ns);
    }
    await runParts({
      signal,
      groups: ORCHESTRATION_GROUPS,
      onFailure: (error) => this.#callbacks.onFailure?.(error),
      onMissing: (why) => void this.#missing.push(why),
    }, async (parts) => {
      await parts.start(this.#streamsPart());
      if (followed && !settings.scanning.disabled) await parts.start(this.#namespacesPart());
      else this.#planNow();
      if (!settings.scanning.disabled) {
        client.discovery.onChange(() =>
          void this.#resolve().then(() => this.#replan(), (error) => {
            if (!signal.aborted) this.#scope.logger.error(`Cannot re-read the resources: ${error}`);
          })
        );
        await parts.start(this.#definitionsPart());
      }
      if (settings.process.idleGcDelay !== null || settings.process.pageOutDelay !== null) {
        await parts.start(this.#idlePart());
      }
      // Followed namespaces are not known yet: the first plan, once they are, checks readiness.
      if (this.#planned) this.#checkReady();
    });
  }

  /**
   * One of the orchestrator's own parts, listed by {@link Orchestrator.running} while it runs.
   * @param name What it is.
   * @param group Its stop group.
   * @param run Runs it until its signal aborts.
   * @returns The part.
   */
  #part(
    name: string,
    group: OrchestrationGroup,
    run: (signal: AbortSignal) => Promise<void>,
  ): Part {
    return runningPart(name, group, (signal) => {
      this.#running.add(name);
      return run(signal).finally(() => this.#running.delete(name));
    });
  }

  /**
   * The watch streams as a part: the plans start and stop them, and they hear the term's signal
   * themselves; at its stop, the part waits until every stream running then is `done`. (A run
   * that stops before the term, on a part's failure, tells the streams too.)
   */
  #streamsPart(): Part {
    return this.#part("the watch streams", "streams", async (signal) => {
      await aborted(signal);
      const streams = [...this.#streams.values()];
      for (const stream of streams) stream.controller.abort();
      await Promise.allSettled(streams.map((s) => s.done));
    });
  }

  /**
   * Following the namespaces that match the glob patterns, as a part. Without permission to
   * watch namespaces, the literal names are served instead: then the part has done what it
   * could, and stays until its stop (it is not reported as missing).
   */
  #namespacesPart(): Part {
    const { client, settings, logger, namespaces } = this.#scope;
    return this.#part("the namespace following", "intake", async (signal) => {
      await followNamespaces({ client, settings, logger, namespaces, signal }, {
        served: this.#namespaces,
        onKnown: () => this.#planNow(),
        onChange: () => void this.#replan(),
      });
      await aborted(signal);
    });
  }

  /**
   * Following the CRDs (the catalogue of resources is refreshed as they change), as a part. An
   * error that ends it is logged, and does not stop the operator: the part is then reported as
   * not running.
   */
  #definitionsPart(): Part {
    const { client, logger } = this.#scope;
    return this.#part(
      "the CRD following",
      "intake",
      (signal) =>
        client.discovery.followDefinitions(signal, (error, retryInMs) => {
          const message = `Watching CustomResourceDefinitions: ${error.message}; ` +
            `retrying in ${(retryInMs / 1000).toFixed(1)}s`;
          if (isRoutineSilence(error)) logger.info(message);
          else logger.warning(message);
        }).catch((error) => {
          if (!signal.aborted) logger.error(`Stopped following CRDs: ${error}`);
        }),
    );
  }

  /**
   * The idle collector as a part. When it ends by itself (the setting was turned off, or the
   * runtime offers no way to collect), it has nothing left to do: it stays until its stop.
   */
  #idlePart(): Part {
    return this.#part("the idle collector", "idle", async (signal) => {
      await this.#idle.run(signal);
      await aborted(signal);
    });
  }

  async #resolve(): Promise<void> {
    const resources = await this.#scope.client.discovery.resources(this.#scope.signal);
    this.#served = this.#resolver.resolve(resources);
    // Handlers filtering on a field their CRD's schema cannot hold: warned once per resource.
    await this.#fieldPaths.check(
      this.#scope,
      [...this.#served.values()].map(({ resource, selectors }) => ({
        resource,
        handlers: Object.values(this.#scope.registry.handlersFor(resource, selectors)).flat(),
      })),
    );
  }

  /** The first full plan: the namespaces are known; shard changes replan from now on. */
  #planNow(): void {
    this.#planned = true;
    this.#replan();
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
    const { registry } = this.#scope;
    const wanted = planStreams({
      served: this.#served,
      clusterwide: this.#scope.clusterwide,
      namespaces: this.#namespaces,
      shards: this.#scope.sharding ? this.#shards : undefined,
      indexed: (resource, selectors) =>
        registry.handlersFor(resource, selectors).indexing.length > 0,
    });
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
      if (this.#streams.has(key) || this.#scope.signal.aborted) continue;
      const controller = new AbortController();
      const signal = AbortSignal.any([controller.signal, this.#scope.signal]);
      if (!this.#ready) this.#pendingListings.add(key);
      if (
        target.role !== "process" &&
        registry.handlersFor(target.resource, target.selectors).indexing.length
      ) {
        this.#scope.readiness.expect(key);
      }
      const done = runStream(this.#scope, this.#books, key, target, signal);
      const onFailure = this.#callbacks.onFailure;
      if (onFailure) {
        done.catch((error) => {
          if (!signal.aborted) onFailure(error); // failed on its own, not stopped
        });
      }
      this.#streams.set(key, { controller, done, resource: resourceName(target.resource) });
    }
    this.#checkReady();
    this.#scope.readiness.check();
    return stopped;
  }

  #checkReady(): void {
    if (!this.#ready && this.#pendingListings.size === 0) {
      this.#ready = true;
      this.#callbacks.onReady?.();
    }
  }
}
