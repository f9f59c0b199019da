/**
 * The stages of one watch stream (`runStream()` in `streaming.ts` chains them), each a small
 * function over only the parts it uses, so that each is tested alone (`stream_stages_test.ts`):
 *
 * ```
 * watchSource      the watch, or a tap of the shared informer; the shard's filter
 *  → pausedSource  closed while peering pauses the operator, relisted on resume
 *  → objectEvents  one apply/delete per object change (client/object_events.ts)
 *      └ watchReporter   bookkeeping, log lines and metrics of the other events
 *  → noticer       bookkeeping and metrics of each object event
 *  → indexer       index handlers, on the stream itself
 *  → queueRouter   to the object's worker (ObjectQueue), or not at all
 *      → cycleRunner     waits out a pause, then one processing cycle (observed)
 *  → listingBrake  a listing reads on only as its objects begin to be processed
 * closeStream      on exit: daemons and timers stopped, the queue drained
 * ```
 *
 * The per-object stages are plain functions called one after the other in one loop, not
 * generator layers: an event passes them without a promise or an iterator result per stage.
 * @module
 */

import { buildObjectReference, type Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import {
  type ObjectEvent as WatchedEvent,
  watcher,
  type WatcherEvent,
  watchingOptions,
} from "../../client/watching.ts";
import { isRoutineSilence } from "../../client/watch_options.ts";
import type { IndexingHandler } from "../../intents/handlers.ts";
import type { Memo, ResourceContext } from "../../intents/contexts.ts";
import type { OperatorSettings, WatchingSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { Resource } from "../../structs/resources.ts";
import { sleep } from "../../util/backoff.ts";
import {
  effectiveShardKey,
  shardOfObject,
  shardSelector,
  type ShardSpace,
} from "../../structs/shards.ts";
import type { AdmissionGate } from "../../util/gate.ts";
import type { Indexers } from "../../engines/runners/indexing.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import { currentPosters } from "../../engines/observability/posting.ts";
import { type OperatorPause, pausable } from "../../engines/coordination/peering.ts";
import type { StreamRole } from "./planning.ts";
import type { CycleResult, ObjectEvent as QueuedEvent, ObjectMemory } from "./processing.ts";
import { objectKey, type ObjectQueue } from "./queueing.ts";
import type { SharedInformers } from "../streams/sharing.ts";
import { watchSelectors } from "../streams/watch_selectors.ts";

export type { ShardSpace };

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

/** One shard's filter of a stream. */
export interface ShardFilter {
  /** Whether an object is the shard's (judged by an immutable field: uid or namespace). */
  readonly accept: (object: KubeObject) => boolean;
  /** The server-side selector, if the server filters too (`ShardSpace.serverSide`). */
  readonly selector: string | undefined;
}

/**
 * The filter of a sharded stream.
 * @param sharding The shard space, if the operator is sharded.
 * @param shard The stream's shard, if any.
 * @param namespaced Whether the resource is namespaced (cluster-scoped ones hash the uid).
 * @returns The filter, or `undefined` when the stream is not sharded.
 */
export function shardFilter(
  sharding: ShardSpace | undefined,
  shard: number | undefined,
  namespaced: boolean,
): ShardFilter | undefined {
  if (!sharding || shard === undefined) return undefined;
  const key = effectiveShardKey(sharding.key, namespaced);
  const count = sharding.count;
  return {
    accept: (object) => shardOfObject(object, key, count) === shard,
    selector: sharding.serverSide ? shardSelector([shard], count, key) : undefined,
  };
}

/** What {@link watchSource} uses. */
export interface SourceParts {
  /** Object operations (for a watch of the stream's own). */
  readonly api: KubeApi;
  /** `settings.watching`. */
  readonly watching: WatchingSettings;
  /** The informer cache of the reconcile handlers, if any. */
  readonly shared?: SharedInformers | undefined;
  /** Counts what the server sent for other shards (type FILTERED). */
  readonly observer?: OperatorObserver | undefined;
}

/**
 * The stream's source: a resource the reconcile handlers cache is read from its informer (one
 * list+watch for all; after a pause, the informer lists once more for a fresh start, as a watch
 * of one's own would); others get a watch of their own. A sharded watch asks the server to filter
 * if it can and filters on this side always (older servers ignore the selector); what the server
 * sent for other shards counts as type FILTERED in the metrics.
 * @param parts What it uses.
 * @param resource The watched resource.
 * @param namespace The watched namespace, or `undefined` for cluster-wide.
 * @param filter The shard's filter, if sharded.
 * @param name The resource's name in the metrics.
 * @returns Opens the stream for a period (until the signal aborts; `resumed`: after a pause).
 */
export function watchSource(
  parts: SourceParts,
  resource: Resource,
  namespace: string | undefined,
  filter: ShardFilter | undefined,
  name: string,
): (period: AbortSignal, resumed?: boolean) => AsyncIterable<WatcherEvent> {
  const { api, watching, observer } = parts;
  const accept = filter?.accept;
  const shared = parts.shared?.holds(resource) ? parts.shared : undefined;
  if (shared) {
    return (period, resumed) =>
      shared.events(resource, namespace, { accept, signal: period, fresh: resumed });
  }
  const sharded = accept
    ? {
      ...(filter.selector !== undefined ? { shardSelector: filter.selector } : {}),
      accept: (object: KubeObject) => {
        if (accept(object)) return true;
        observer?.watchEvent(name, "FILTERED");
        return false;
      },
    }
    : {};
  return (period) =>
    watcher(api, resource, {
      namespace,
      ...watchingOptions(watching),
      ...watchSelectors(watching, resource),
      ...sharded,
      signal: period,
    });
}

/**
 * The source, closed while peering pauses the operator: a resume relists, which reports what
 * changed or vanished meanwhile. Without peering, no extra generator layer.
 * @param paused Peering's pause switch, if any.
 * @param signal Stops the stream.
 * @param open The source.
 * @param onPause Called when a pause closes the stream.
 * @returns The stream.
 */
export function pausedSource(
  paused: OperatorPause | undefined,
  signal: AbortSignal,
  open: (period: AbortSignal, resumed: boolean) => AsyncIterable<WatcherEvent>,
  onPause: () => void,
): AsyncIterable<WatcherEvent> {
  return paused ? pausable(paused, signal, open, { onPause }) : open(signal, false);
}

/** What {@link watchReporter} and {@link noticer} use. */
export interface ReportParts {
  /** The orchestrator's bookkeeping. */
  readonly books: Pick<StreamBookkeeping, "alive" | "listed">;
  /** The stream's key in the plan. */
  readonly key: string;
  /** Where the log lines go. */
  readonly logger: Logger;
  /** Watch metrics. */
  readonly observer?: OperatorObserver | undefined;
  /** The resource's name in the metrics. */
  readonly name: string;
  /** The stream in log lines, e.g. `kopfexamples.kopf.dev in ns1 (shard 3)`. */
  readonly label: string;
}

/**
 * Reports the stream's events that are not object changes (`objectEvents()`'s `onOther`): signs
 * of life for the bookkeeping (a quiet but healthy stream is not a stuck one), the listings, log
 * lines for failures (a first silence at INFO, the rest at WARNING), skipped lines and refused
 * objects, and the watch metrics.
 * @param parts What it uses.
 * @returns The reporter.
 */
export function watchReporter(parts: ReportParts): (event: WatcherEvent) => void {
  const { books, key, logger, observer, name, label } = parts;
  return (event) => {
    switch (event.type) {
      case "connected":
        books.alive(key);
        observer?.watchConnected(name, event.reason);
        break;
      case "bookmark":
        books.alive(key);
        observer?.watchEvent(name, "BOOKMARK");
        break;
      case "initDone":
        books.alive(key);
        books.listed(key);
        break;
      case "error": {
        const message = `Watching ${label}: ${event.error.message}`;
        if (isRoutineSilence(event.error)) logger.info(message);
        else logger.warning(message);
        break;
      }
      case "refused":
        refuse(logger, event.object, event.reason);
        break;
      case "skipped":
        logger.warning(`Watching ${label}: ignored ${event.reason}; the stream goes on`);
        break;
    }
  };
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
 * Notices each object event: a sign of life, and the watch metric by type (LISTED for what a
 * listing reports).
 * @param parts What it uses.
 * @returns The stage.
 */
export function noticer(
  parts: Pick<ReportParts, "books" | "key" | "observer" | "name">,
): (event: WatchedEvent) => void {
  const { books, key, observer, name } = parts;
  return (event) => {
    books.alive(key);
    observer?.watchEvent(
      name,
      event.type === "delete" ? "DELETED" : event.raw === null ? "LISTED" : event.raw,
    );
  };
}

/** What {@link indexer} uses. */
export interface IndexParts {
  /** The operator's indexers. */
  readonly indexers: Pick<Indexers, "index">;
  /** The stream's index handlers. */
  readonly handlers: readonly IndexingHandler[];
  /** The operator's logger (an object's logger is made from it). */
  readonly logger: Logger;
  /** The context of an index handler for an object. */
  readonly context: (
    handler: IndexingHandler,
    object: KubeObject,
    logger: Logger,
  ) => ResourceContext;
}

/**
 * Runs the index handlers on the stream itself, before the event is queued, so that the
 * readiness gate of the indices opens only when all objects are indexed.
 * @param parts What it uses.
 * @returns The stage, or `undefined` when the stream has no index handlers.
 */
export function indexer(parts: IndexParts): ((event: WatchedEvent) => Promise<void>) | undefined {
  const { indexers, handlers, logger, context } = parts;
  if (!handlers.length) return undefined;
  return (event) => {
    const object = event.object;
    return indexers.index(
      handlers,
      objectKey(object),
      object,
      event.type === "delete",
      (handler) => context(handler, object, logger.forObject(object, { local: true })),
      logger.forObject(object, { local: true }),
    );
  };
}

/**
 * Queues an object event to the object's worker. A stream that only indexes (the shard's own
 * stream handles its objects) queues nothing. Unchanged objects of a relist matter only to
 * raw-event handlers (they see every listing, as in Kopf): queued as forced events of no type
 * if there are any; for the rest, a relist repeats no work. A listed or watched object the queue
 * does not know and whose cycle would do nothing (`quiet`: `needsNoCycle` in `processing.ts`) is
 * not queued either: an object handled before and unchanged since, or the watch's late echo of
 * the operator's own write.
 * @param queue The stream's queue.
 * @param role What the stream does with its objects.
 * @param rawHandlers Whether the stream has event-watching handlers (`on.event`).
 * @param quiet Tells an object whose cycle would do nothing, if the stream can tell.
 * @returns The stage.
 */
export function queueRouter(
  queue: Pick<ObjectQueue, "push" | "memory">,
  role: StreamRole,
  rawHandlers: boolean,
  quiet?: ((body: KubeObject) => boolean) | undefined,
): (event: WatchedEvent) => void {
  if (role === "index") return () => {};
  return (event) => {
    if (event.type === "delete") queue.push({ type: "DELETED", body: event.object });
    else if (event.unchanged) {
      if (rawHandlers) queue.push({ type: null, body: event.object, forced: true });
    } else if (!quiet || queue.memory(objectKey(event.object)) || !quiet(event.object)) {
      queue.push({ type: event.raw, body: event.object });
    }
  };
}

/** How long a listing is held up by {@link listingBrake} in all, at most, in milliseconds. */
export const LISTING_HOLD_MS = 45_000;

/**
 * Holds a listing back while too many of the stream's objects wait for their first cycle
 * (`settings.queueing.listingBacklog`): the listing's next page is then requested only as the
 * objects are processed, so a backlog of thousands of objects is not in memory all at once.
 * Only listed objects wait, never watch events (a watch must be read on, or the API server
 * drops it). A listing is held up for {@link LISTING_HOLD_MS} in all at most, after which it
 * reads on: the continue tokens of its pages must not expire (etcd compacts every 5 minutes),
 * and the watch that follows starts from the listing's resourceVersion, which the API server's
 * watch cache keeps for at least 75 seconds (older: `410 Gone` and a relist). A held listing's
 * watch replays what changed meanwhile (mostly the operator's own writes, skipped as echoes);
 * the API server may end that first watch early, and the watcher resumes it (one request).
 * @param queue The stream's queue (how many of its objects wait, and waiting for fewer).
 * @param limit `settings.queueing.listingBacklog`: null turns the brake off.
 * @param signal Ends the wait.
 * @param now The clock (milliseconds). @default performance.now
 * @returns The stage, or `undefined` when off or when the stream queues nothing.
 */
export function listingBrake(
  queue: Pick<ObjectQueue, "room">,
  limit: number | null,
  signal: AbortSignal,
  now: () => number = () => performance.now(),
): ((event: WatchedEvent) => Promise<void> | undefined) | undefined {
  if (!limit || limit <= 0) return undefined;
  let held = 0; // this listing's hold so far
  return (event) => {
    if (event.type === "delete" || event.raw !== null) {
      held = 0; // a watch event: the listing is over; the next one starts afresh
      return undefined;
    }
    if (held >= LISTING_HOLD_MS) return undefined;
    const wait = queue.room(limit, signal);
    if (!wait) return undefined;
    const since = now();
    const timer = new AbortController();
    return Promise.race([
      wait,
      sleep(LISTING_HOLD_MS - held, timer.signal).catch(() => {}),
    ]).finally(() => {
      timer.abort();
      held += now() - since;
    });
  };
}

/** What {@link cycleRunner} uses. */
export interface CycleParts {
  /** Peering's pause switch, if any. */
  readonly paused?: OperatorPause | undefined;
  /** Admits the cycles of all streams, if limited. */
  readonly gate?: AdmissionGate | undefined;
  /** Counts the cycles. */
  readonly books: Pick<StreamBookkeeping, "cycle">;
  /** Observes the cycles, if anything observes. */
  readonly observer?: OperatorObserver | undefined;
  /** The resource's name for the observer. */
  readonly name: string;
  /** Stops the stream: no cycle starts after it aborts. */
  readonly signal: AbortSignal;
}

/**
 * The queue's `process`: while peering pauses the operator, a cycle (a retry, a daemon's
 * wake-up) waits for the resume, not counted by the admission gate meanwhile; then it runs,
 * counted and observed.
 * @param parts What it uses.
 * @param process One processing cycle.
 * @returns The queue's `process`.
 */
export function cycleRunner(
  parts: CycleParts,
  process: (memory: ObjectMemory, event: QueuedEvent) => Promise<CycleResult>,
): (memory: ObjectMemory, event: QueuedEvent) => Promise<CycleResult> {
  const { paused, gate, books, observer, name, signal } = parts;
  return async (memory, event) => {
    if (paused?.paused) {
      const resumed = () => paused.resumed(signal);
      await (gate ? gate.away(resumed) : resumed());
    }
    if (signal.aborted) throw signal.reason;
    books.cycle();
    if (!observer) return process(memory, event);
    const meta = event.body.metadata ?? {};
    return observer.cycle({
      resource: name,
      namespace: meta.namespace,
      name: meta.name,
      uid: meta.uid,
      event: event.internal ? null : event.type,
    }, () => process(memory, event));
  };
}

/**
 * Which objects' memories the queue may forget when their worker goes idle: not those with
 * daemons or timers, a memo that holds something, or — with resume handlers — that resuming is
 * done (a new memory would resume the object again).
 * @param memo The operator's memo (each object's starts as a shallow copy).
 * @param resumes Whether the stream has resume handlers.
 * @returns The queue's `forgettable`.
 */
export function forgettable(memo: Memo, resumes: boolean): (memory: ObjectMemory) => boolean {
  return (memory) =>
    !memory.spawner && !memory.latest && sameMemo(memory.memo, memo) &&
    !(resumes && memory.handledOnce);
}

/**
 * On the stream's exit: the bookkeeping is told, daemons and timers get the grace period to exit
 * (then are abandoned; none outlives the stream), the queue drains within the exit timeout, and
 * then the work in flight is aborted.
 * @param books The orchestrator's bookkeeping.
 * @param key The stream's key.
 * @param queue The stream's queue.
 * @param settings `process.gracePeriod` and `queueing.exitTimeout`.
 * @param work Aborts the cycles' requests and handlers.
 */
export async function closeStream(
  books: Pick<StreamBookkeeping, "closed">,
  key: string,
  queue: Pick<ObjectQueue, "memories" | "drain">,
  settings: Pick<OperatorSettings, "process" | "queueing">,
  work: AbortController,
): Promise<void> {
  books.closed(key);
  const spawners = queue.memories().map((m) => m.spawner?.stopAll(settings.process.gracePeriod));
  try {
    await Promise.all([queue.drain(settings.queueing.exitTimeout), ...spawners]);
  } finally {
    work.abort();
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

/**
 * A shallow copy that keeps the memo's class (custom memo objects keep their methods).
 * @param memo The operator's memo.
 * @returns The copy.
 */
export function shallowCopy(memo: Memo): Memo {
  return Object.assign(Object.create(Object.getPrototypeOf(memo)), memo);
}
