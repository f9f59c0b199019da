/**
 * One watch stream of the orchestration (resource × namespace, and shard when sharded): its
 * events are indexed on the stream itself and queued to per-object workers that run the
 * processing cycles. Resources that the reconcile handlers cache are read from the shared
 * informers instead of a watch of their own (see `./sharing.ts`); sharded streams filter on this
 * side always and, when the server supports it, ask the server to filter too. The stream is a
 * chain of small stages (`./stream_stages.ts`); {@link runStream} wires them.
 * @module
 */

import type { Lifecycle } from "../../actions/lifecycles.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { objectEvents } from "../../client/watching.ts";
import type { Memo } from "../../intents/contexts.ts";
import type { OperatorRegistry } from "../../intents/registries.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { Patch } from "../../structs/patches.ts";
import { resourceName } from "../../structs/resources.ts";
import type { AdmissionGate } from "../../util/gate.ts";
import { Semaphore } from "../../util/semaphore.ts";
import type { Indexers, IndexingReadiness } from "../../engines/runners/indexing.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import type { OperatorPause } from "../../engines/coordination/peering.ts";
import type { StreamTarget } from "./planning.ts";
import { makeResourceContext, processEvent, type ProcessingDeps } from "./processing.ts";
import { ObjectQueue } from "./queueing.ts";
import type { SharedInformers } from "../streams/sharing.ts";
import {
  closeStream,
  cycleRunner,
  forgettable,
  indexer,
  noticer,
  pausedSource,
  queueRouter,
  shallowCopy,
  shardFilter,
  type ShardSpace,
  type StreamBookkeeping,
  watchReporter,
  watchSource,
} from "./stream_stages.ts";

export type { ShardSpace, StreamBookkeeping } from "./stream_stages.ts";

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
  const processing = processingOf(deps, resource, handlers, workSignal);
  const queue = streamQueue(deps, processing, handlers, name, signal);
  books.opened(key, queue, name);
  const label = name + (namespace ? ` in ${namespace}` : "") +
    (shard === undefined ? "" : ` (shard ${shard})`);
  logger.debug(`Watching ${label}`);

  // The stages, from the watch to the queue.
  const source = watchSource(
    { api: deps.client.api, watching: settings.watching, shared: deps.shared, observer },
    resource,
    namespace,
    shardFilter(deps.sharding, shard, resource.namespaced),
    name,
  );
  // A pause closes the stream and stops the daemons; a resume relists (which reports what
  // changed or vanished meanwhile) and the daemons' exits wake their objects to respawn them.
  const stream = pausedSource(deps.paused, signal, source, () => {
    books.paused(key); // a paused stream is not a stuck one
    for (const memory of queue.memories()) memory.spawner?.pauseAll();
  });
  const report = watchReporter({ books, key, logger, observer, name, label });
  const notice = noticer({ books, key, observer, name });
  const indexMemory = { memo: shallowCopy(deps.memo), handledOnce: true, wake: () => {} };
  const index = indexer({
    indexers: deps.indexers,
    handlers: handlers.indexing,
    logger,
    context: (handler, object, log) =>
      makeResourceContext(processing, indexMemory, object, new Patch(), log, handler.param),
  });
  const route = queueRouter(queue, role, handlers.watching.length > 0);
  try {
    for await (const event of objectEvents(stream, report)) {
      notice(event);
      if (index) await index(event);
      route(event);
    }
  } finally {
    await closeStream(books, key, queue, settings, work);
  }
}

/** The stream's handlers (`OperatorRegistry.handlersFor`). */
type StreamHandlers = ReturnType<OperatorRegistry["handlersFor"]>;

/** What the processing cycles of the stream's objects use. */
function processingOf(
  deps: StreamingDeps,
  resource: StreamTarget["resource"],
  handlers: StreamHandlers,
  signal: AbortSignal,
): ProcessingDeps {
  return {
    api: deps.client.api,
    client: deps.client,
    resource,
    changing: handlers.changing,
    watching: handlers.watching,
    spawning: handlers.spawning,
    indices: deps.indexers.indices,
    readiness: deps.readiness,
    settings: deps.settings,
    logger: deps.logger,
    lifecycle: deps.lifecycle,
    signal,
    observer: deps.observer,
    paused: deps.paused,
    gate: deps.gate,
  };
}

/** The stream's queue: one serial worker per object, each running the processing cycles. */
function streamQueue(
  deps: StreamingDeps,
  processing: ProcessingDeps,
  handlers: StreamHandlers,
  name: string,
  signal: AbortSignal,
): ObjectQueue {
  const { settings, observer } = deps;
  return new ObjectQueue({
    settings: settings.queueing,
    process: cycleRunner(
      { paused: deps.paused, gate: deps.gate, books: deps.books, observer, name, signal },
      (memory, event) => processEvent(processing, memory, event),
    ),
    createMemo: () => shallowCopy(deps.memo),
    forgettable: forgettable(deps.memo, handlers.changing.some((h) => h.reason === "resume")),
    logger: deps.logger,
    signal,
    limiter: deps.limiter,
    gate: deps.gate,
    ...(settings.queueing.workerLimit
      ? { streamLimiter: new Semaphore(settings.queueing.workerLimit) }
      : {}),
    observer,
    name,
  });
}
