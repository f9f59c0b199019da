/**
 * The operator's machinery below handler authoring (`@kopf/ts/tuning`): for tuning it, extending
 * it, and looking inside.
 *
 * Handler code needs none of this (it is all in `@kopf/ts`). Here are:
 *
 * - the work queue of keys with client-go's semantics that `on.reconcile()` runs on
 *   ({@link WorkQueue}), with an injectable clock ({@link QueueClock}) — usable for controllers
 *   of your own;
 * - the observer interface through which the reactor reports cycles, handler runs, queues and
 *   watch streams ({@link OperatorObserver}); the metrics engine (`@kopf/ts/metrics`) and the
 *   tracer implement it; a handler attempt's {@link Outcome};
 * - the handler records an `OperatorRegistry` holds ({@link ChangingHandler}, {@link Registration},
 *   {@link ReconcilingHandler}, …): what `on.*()` registers, for code that reads a registry or
 *   fills one by hand.
 *
 * @example A work queue on a manual clock
 * ```ts
 * import { type QueueClock, WorkQueue } from "./tuning.ts";
 *
 * const clock: QueueClock = { now: () => 0, set: () => 0, clear: () => {} };
 * const queue = new WorkQueue<string>({ clock });
 * queue.add("default/web");
 * const delay = queue.addRateLimited("default/db"); // 5 ms: its first retry
 * ```
 * @module
 */

export {
  type QueueClock,
  type RunOptions,
  WorkQueue,
  type WorkQueueOptions,
} from "./core/util/workqueue.ts";
export {
  combineObservers,
  type CycleInfo,
  type CycleSummary,
  type HandlerInfo,
  type HandlerKind,
  NULL_OBSERVER,
  type OperatorObserver,
  type OutcomeLabel,
  outcomeLabel,
} from "./core/engines/observability/observers.ts";
export type { Outcome } from "./core/actions/execution.ts";
export type {
  ActivityHandler,
  BaseHandler,
  ChangingHandler,
  HandlerFn,
  IndexingHandler,
  Registration,
  ResourceHandler,
  RetriedHandler,
  SpawningHandler,
  WatchingHandler,
  WebhookHandler,
  WebhookKind,
} from "./core/intents/handlers.ts";
export type {
  ReconcileRegistration,
  ReconcilingHandler,
  WatchedRelation,
} from "./core/intents/reconciliation.ts";
