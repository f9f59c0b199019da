/**
 * One watch stream of the orchestration (resource × namespace, and shard when sharded): its
 * events are indexed on the stream itself and queued to per-object workers that run the
 * processing cycles. Resources that the reconcile handlers cache are read from the shared
 * informers instead of a watch of their own (see `./sharing.ts`); sharded streams filter on this
 * side always and, when the server supports it, ask the server to filter too. The stream is a
 * chain of small stages (`./stream_stages.ts`); {@link runStream} wires them.
 * @module
 */

import { objectEvents } from "../../client/watching.ts";
import { Patch } from "../../structs/patches.ts";
import { resourceName } from "../../structs/resources.ts";
import { Semaphore } from "../../util/semaphore.ts";
import { handlerContext } from "../scope/context.ts";
import { type OperatorScope, type ResourceScope, resourceScope } from "../scope/scope.ts";
import type { StreamTarget } from "./planning.ts";
import { needsNoCycle, processEvent } from "./processing.ts";
import { ObjectQueue } from "./queueing.ts";
import {
  closeStream,
  cycleRunner,
  forgettable,
  indexer,
  listingBrake,
  noticer,
  pausedSource,
  queueRouter,
  shallowCopy,
  shardFilter,
  type StreamBookkeeping,
  watchReporter,
  watchSource,
} from "./stream_stages.ts";

export type { StreamBookkeeping } from "./stream_stages.ts";

/**
 * Runs one stream until its signal aborts, then stops its objects' work (see below).
 * @param scope The operator's parts.
 * @param books The orchestrator's bookkeeping, told as the stream goes.
 * @param key The stream's key in the plan.
 * @param target What it watches and does.
 * @param signal Stops the stream.
 * @returns Resolves when the stream's queue drained and its daemons and timers exited.
 */
export async function runStream(
  scope: OperatorScope,
  books: StreamBookkeeping,
  key: string,
  target: StreamTarget,
  signal: AbortSignal,
): Promise<void> {
  const { resource, namespace, selectors, shard, role } = target;
  const { settings, logger, observer } = scope;
  const name = resourceName(resource);
  const all = scope.registry.handlersFor(resource, selectors);
  const handlers = role === "process" ? { ...all, indexing: [] } : all;
  // A stopping operator (or a released shard) stops its watch and starts no new cycle at once,
  // but the cycles in flight may finish and persist their progress (within
  // settings.queueing.exitTimeout) before their requests and handlers are aborted: the next
  // start (or the shard's next holder) then repeats nothing. The fault suite found a handler
  // whose result was lost to a stop right after it ran, and ran it again after the restart.
  const work = new AbortController();
  const halt = scope.halt;
  const workSignal = role === "index"
    ? signal
    : halt
    ? AbortSignal.any([work.signal, halt])
    : work.signal;
  const processing = resourceScope(scope, resource, handlers, workSignal);
  const queue = streamQueue(processing, books, name, signal);
  books.opened(key, queue, name);
  const label = name + (namespace ? ` in ${namespace}` : "") +
    (shard === undefined ? "" : ` (shard ${shard})`);
  logger.debug(`Watching ${label}`);

  // The stages, from the watch to the queue.
  const source = watchSource(
    { api: scope.api, watching: settings.watching, shared: scope.shared, observer },
    resource,
    namespace,
    shardFilter(scope.sharding, shard, resource.namespaced),
    name,
  );
  // A pause closes the stream and stops the daemons; a resume relists (which reports what
  // changed or vanished meanwhile) and the daemons' exits wake their objects to respawn them.
  const stream = pausedSource(scope.pause, signal, source, () => {
    books.paused(key); // a paused stream is not a stuck one
    for (const memory of queue.memories()) memory.spawner?.pauseAll();
  });
  const report = watchReporter({ books, key, logger, observer, name, label });
  const notice = noticer({ books, key, observer, name });
  const indexMemo = shallowCopy(scope.memo);
  const index = indexer({
    indexers: scope.indexers,
    handlers: handlers.indexing,
    logger,
    context: (handler, object, log) =>
      handlerContext(processing, {
        body: object,
        memo: indexMemo,
        patch: new Patch(),
        logger: log,
        param: handler.param,
      }),
  });
  const route = queueRouter(queue, role, handlers.watching.length > 0, needsNoCycle(processing));
  // Not for a streaming list: its objects come over a watch, which must be read on.
  const brake = role === "index" || settings.watching.initialStreaming
    ? undefined
    : listingBrake(queue, settings.queueing.listingBacklog, signal);
  try {
    for await (const event of objectEvents(stream, report)) {
      notice(event);
      if (index) await index(event);
      route(event);
      const held = brake?.(event);
      if (held) await held;
    }
  } finally {
    await closeStream(books, key, queue, settings, work);
  }
}

/** The stream's queue: one serial worker per object, each running the processing cycles. */
function streamQueue(
  scope: ResourceScope,
  books: StreamBookkeeping,
  name: string,
  signal: AbortSignal,
): ObjectQueue {
  const { settings, observer, pause, gate } = scope;
  return new ObjectQueue({
    settings: settings.queueing,
    process: cycleRunner(
      { paused: pause, gate, books, observer, name, signal },
      (memory, event) => processEvent(scope, memory, event),
    ),
    createMemo: () => shallowCopy(scope.memo),
    forgettable: forgettable(scope.memo, scope.changing.some((h) => h.reason === "resume")),
    logger: scope.logger,
    signal,
    limiter: scope.limiter,
    gate,
    ...(settings.queueing.workerLimit
      ? { streamLimiter: new Semaphore(settings.queueing.workerLimit) }
      : {}),
    observer,
    name,
  });
}
