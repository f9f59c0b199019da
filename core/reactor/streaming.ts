/**
 * One watch stream of the orchestration (resource × namespace, and shard when sharded): its
 * events are indexed on the stream itself and queued to per-object workers that run the
 * processing cycles. Resources that the reconcile handlers cache are read from the shared
 * informers instead of a watch of their own (see `./sharing.ts`); sharded streams filter on this
 * side always and, when the server supports it, ask the server to filter too.
 * @module
 */

import type { Lifecycle } from "../actions/lifecycles.ts";
import { buildObjectReference, type Logger } from "../actions/loggers.ts";
import type { KubeClient } from "../client/client.ts";
import { isRoutineSilence, objectEvents, watcher, watchingOptions } from "../client/watching.ts";
import type { Memo } from "../intents/contexts.ts";
import type { OperatorRegistry } from "../intents/registries.ts";
import type { OperatorSettings } from "../settings/settings.ts";
import type { KubeObject } from "../structs/objects.ts";
import { Patch } from "../structs/patches.ts";
import { resourceName } from "../structs/resources.ts";
import {
  effectiveShardKey,
  type ShardKey,
  shardOfObject,
  shardSelector,
} from "../structs/shards.ts";
import type { AdmissionGate } from "../util/gate.ts";
import { Semaphore } from "../util/semaphore.ts";
import type { Indexers, IndexingReadiness } from "../engines/indexing.ts";
import type { OperatorObserver } from "../engines/observers.ts";
import { currentPosters } from "../engines/posting.ts";
import { type OperatorPause, pausable } from "../engines/peering.ts";
import type { StreamTarget } from "./planning.ts";
import { makeResourceContext, processEvent, type ProcessingDeps } from "./processing.ts";
import { objectKey, ObjectQueue } from "./queueing.ts";
import type { SharedInformers } from "./sharing.ts";
import { watchSelectors } from "./watch_selectors.ts";

/** How objects are split into shards (all replicas of an operator must agree). */
export interface ShardSpace {
  /** The number of virtual shards. */
  readonly count: number;
  /** What is hashed. */
  readonly key: ShardKey;
  /** Send `shardSelector` to the server (it supports sharded watches). */
  readonly serverSide: boolean;
}

/** The orchestrator's bookkeeping of its streams, told by each stream as it goes. */
export interface StreamBookkeeping {
  /** The stream's queue exists (for memos, stats and inventory). */
  opened(key: string, queue: ObjectQueue, resource: string): void;
  /** The stream listed its objects (every listing: the first, and after reconnects). */
  listed(key: string): void;
  /** The stream showed a sign of life (an event). */
  alive(key: string): void;
  /** The stream paused: its silence is no sign of trouble. */
  paused(key: string): void;
  /** A processing cycle begins. */
  cycle(): void;
  /** The stream stopped watching; its queue drains now. */
  closed(key: string): void;
}

/** What a stream needs. */
export interface StreamingDeps {
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
  /** Bounds concurrent processing across all streams. */
  readonly limiter?: Semaphore | undefined;
  /** Aborts the handlers and requests in flight at once (a lost leadership). */
  readonly halt?: AbortSignal | undefined;
  /** Peering's pause switch: while paused, the stream is closed and no cycle runs. */
  readonly paused?: OperatorPause | undefined;
  /** Observes cycles, handlers, queues and watch streams (metrics, traces). */
  readonly observer?: OperatorObserver | undefined;
  /** Sharded replicas: the shard space. */
  readonly sharding?: ShardSpace | undefined;
  /** The informer cache of the reconcile handlers: the resources it holds are read from it. */
  readonly shared?: SharedInformers | undefined;
  /** The operator's indexers (index handlers run on the stream). */
  readonly indexers: Indexers;
  /** The readiness gate of the indices (handlers wait for it). */
  readonly readiness: IndexingReadiness;
  /** Admits the cycles of all streams (settings.queueing.admissionLimit). */
  readonly gate: AdmissionGate | undefined;
  /** The orchestrator's bookkeeping. */
  readonly books: StreamBookkeeping;
}

/**
 * Runs one stream until its signal aborts, then stops its objects' work (see below).
 * @param deps Collaborators.
 * @param key The stream's key in the plan.
 * @param target What it watches and does.
 * @param signal Stops the stream.
 * @returns Resolves when the stream's queue drained and its daemons and timers exited.
 */
export async function runStream(
  deps: StreamingDeps,
  key: string,
  target: StreamTarget,
  signal: AbortSignal,
): Promise<void> {
  const { resource, namespace, selectors, shard, role } = target;
  const { settings, logger, observer, books } = deps;
  const name = resourceName(resource);
  const all = deps.registry.handlersFor(resource, selectors);
  const handlers = role === "process" ? { ...all, indexing: [] } : all;
  // A stopping operator (or a released shard) stops its watch and starts no new cycle at once,
  // but the cycles in flight may finish and persist their progress (within
  // settings.queueing.exitTimeout) before their requests and handlers are aborted: the next
  // start (or the shard's next holder) then repeats nothing. The fault suite found a handler
  // whose result was lost to a stop right after it ran, and ran it again after the restart.
  const work = new AbortController();
  const halt = deps.halt;
  const workSignal = role === "index"
    ? signal
    : halt
    ? AbortSignal.any([work.signal, halt])
    : work.signal;
  const processing: ProcessingDeps = {
    api: deps.client.api,
    client: deps.client,
    resource,
    changing: handlers.changing,
    watching: handlers.watching,
    spawning: handlers.spawning,
    indices: deps.indexers.indices,
    readiness: deps.readiness,
    settings,
    logger,
    lifecycle: deps.lifecycle,
    signal: workSignal,
    observer,
    paused: deps.paused,
    gate: deps.gate,
  };
  const queue: ObjectQueue = new ObjectQueue({
    settings: settings.queueing,
    process: async (memory, event) => {
      // Paused by peering: cycles (retries, daemon wake-ups) wait for the resume, not counted
      // by the admission gate meanwhile.
      const paused = deps.paused;
      if (paused?.paused) {
        const resumed = () => paused.resumed(signal);
        await (deps.gate ? deps.gate.away(resumed) : resumed());
      }
      if (signal.aborted) throw signal.reason;
      books.cycle();
      if (!observer) return processEvent(processing, memory, event);
      const meta = event.body.metadata ?? {};
      return observer.cycle({
        resource: name,
        namespace: meta.namespace,
        name: meta.name,
        uid: meta.uid,
        event: event.internal ? null : event.type,
      }, () => processEvent(processing, memory, event));
    },
    createMemo: () => shallowCopy(deps.memo),
    // Kept: daemons and timers, a memo that holds something, and — with resume handlers — that
    // resuming is done (a new memory would resume the object again).
    forgettable: (memory) =>
      !memory.spawner && !memory.latest && sameMemo(memory.memo, deps.memo) &&
      !(memory.handledOnce && handlers.changing.some((h) => h.reason === "resume")),
    logger,
    signal,
    limiter: deps.limiter,
    gate: deps.gate,
    ...(settings.queueing.workerLimit
      ? { streamLimiter: new Semaphore(settings.queueing.workerLimit) }
      : {}),
    observer,
    name,
  });
  books.opened(key, queue, name);
  const indexMemory = { memo: shallowCopy(deps.memo), handledOnce: true, wake: () => {} };
  const where = (namespace ? ` in ${namespace}` : "") +
    (shard === undefined ? "" : ` (shard ${shard})`);
  logger.debug(`Watching ${resourceName(resource)}${where}`);
  const sharding = shard === undefined ? undefined : deps.sharding;
  const shardKey = sharding && effectiveShardKey(sharding.key, resource.namespaced);
  const accept = sharding && shardKey
    ? (object: KubeObject) => shardOfObject(object, shardKey, sharding.count) === shard
    : undefined;
  // A resource the reconcile handlers cache is read from its informer: one list+watch for all.
  const shared = deps.shared?.holds(resource) ? deps.shared : undefined;
  // A pause closes the stream and stops the daemons; a resume relists (which reports what
  // changed or vanished meanwhile) and the daemons' exits wake their objects to respawn them.
  const open = (period: AbortSignal) =>
    shared
      ? shared.events(resource, namespace, { accept, signal: period })
      : watcher(deps.client.api, resource, {
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
    books.paused(key); // a paused stream is not a stuck one
    for (const memory of queue.memories()) memory.spawner?.pauseAll();
  };
  // Without peering, no extra generator layer between the watch and the queue.
  const stream = deps.paused ? pausable(deps.paused, signal, open, { onPause }) : open(signal);
  try {
    for await (
      const event of objectEvents(stream, (other) => {
        // Signs of life besides objects' events: a quiet but healthy stream is not a stuck one.
        if (other.type === "connected" || other.type === "bookmark" || other.type === "initDone") {
          books.alive(key);
        }
        if (other.type === "initDone") books.listed(key);
        if (other.type === "error") {
          const message = `Watching ${resourceName(resource)}${where}: ${other.error.message}`;
          if (isRoutineSilence(other.error)) logger.info(message);
          else logger.warning(message);
        }
        if (other.type === "refused") refuse(logger, other.object, other.reason);
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
      books.alive(key);
      observer?.watchEvent(
        name,
        event.type === "delete" ? "DELETED" : event.raw === null ? "LISTED" : event.raw,
      );
      if (handlers.indexing.length) {
        // Indexed on the stream itself, so the readiness gate opens only when all are indexed.
        await deps.indexers.index(
          handlers.indexing,
          objectKey(event.object),
          event.object,
          event.type === "delete",
          (handler) =>
            makeResourceContext(
              processing,
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
    books.closed(key);
    // Daemons and timers get the grace period to exit, then are abandoned; none outlives us.
    const spawners = queue.memories().map((m) => m.spawner?.stopAll(settings.process.gracePeriod));
    try {
      await Promise.all([queue.drain(settings.queueing.exitTimeout), ...spawners]);
    } finally {
      work.abort();
    }
  }
}

/**
 * Reports an object refused for its depth (`settings.watching.maxDepth`): one error line, and a
 * Warning Event on the object whatever `settings.posting.loggers` says (the object's author may
 * not read the operator's log), so the line itself is not posted again.
 */
function refuse(logger: Logger, object: KubeObject, reason: string): void {
  const message = `Refused ${reason} (settings.watching.maxDepth); no handler runs for it ` +
    "until it is changed to fit or deleted.";
  logger.forObject(object, { local: true }).error(message);
  for (const poster of currentPosters()) {
    if (!poster.acceptsExplicit("warning")) continue;
    poster.enqueue({
      ref: buildObjectReference(object),
      type: "Warning",
      reason: "ObjectTooDeep",
      message,
    });
  }
}

/**
 * The object's memo is what a new shallow copy of the operator's memo would be: same class, same
 * own properties with the same values (nothing was stored in it, or only what it started with).
 */
function sameMemo(memo: Memo, base: Memo): boolean {
  if (Object.getPrototypeOf(memo) !== Object.getPrototypeOf(base)) return false;
  const keys = Reflect.ownKeys(memo);
  if (keys.length !== Reflect.ownKeys(base).length) return false;
  return keys.every((key) =>
    Object.hasOwn(base, key) && memo[key as string] === base[key as string]
  );
}

/** A shallow copy that keeps the memo's class (custom memo objects keep their methods). */
function shallowCopy(memo: Memo): Memo {
  return Object.assign(Object.create(Object.getPrototypeOf(memo)), memo);
}
