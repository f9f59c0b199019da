/**
 * Observation points: the few places where the reactor and the engines tell the outside what
 * happens — a processing cycle, a handler run, the per-object queue, watch streams, Events. The
 * metrics engine (`metrics.ts`) and the tracer (`tracing.ts`) implement {@link OperatorObserver};
 * the reactor calls it and knows nothing of Prometheus or OpenTelemetry.
 *
 * Label-like fields are bounded by design: resources, handler ids, outcomes and reasons only.
 * Object names and uids are passed for traces (span attributes), never used as metric labels.
 * @module
 */

import type { Outcome } from "../../actions/execution.ts";

/** What a processing cycle is about. */
export interface CycleInfo {
  /** The resource, as `plural.version.group` (e.g. `kopfexamples.v1.kopf.dev`). */
  readonly resource: string;
  /** The object's namespace (traces only). */
  readonly namespace?: string | undefined;
  /** The object's name (traces only). */
  readonly name?: string | undefined;
  /** The object's uid (traces only). */
  readonly uid?: string | undefined;
  /** The raw event type that started the cycle; `null` for a listing or an internal re-look. */
  readonly event?: string | null | undefined;
}

/** What a cycle came to, as far as observers care. */
export interface CycleSummary {
  /** Seconds until the next cycle is due without events (a retry, the next handler). */
  readonly delay?: number | undefined;
  /** A handler failed in this cycle (temporarily or permanently). */
  readonly failed?: boolean | undefined;
}

/** The kinds of handlers whose runs are observed. */
export type HandlerKind = "change" | "event" | "daemon" | "timer";

/** What one handler run is about. */
export interface HandlerInfo extends CycleInfo {
  /** The handler id. */
  readonly handler: string;
  /** The kind of handler. */
  readonly kind: HandlerKind;
  /** The cause (`create`, `update`, `delete`, `resume`) for resource-changing handlers. */
  readonly cause?: string | undefined;
  /** How many attempts were made before this one. */
  readonly retry: number;
}

/**
 * How a handler run ended, as a bounded label: `success`, `temporary` (will be retried),
 * `permanent`, `timeout`, `retries-exceeded`, `ignored` (errors ignored by policy), or `waiting`
 * (a parent whose sub-handlers are unfinished is re-run soon; not a failure).
 */
export type OutcomeLabel =
  | "success"
  | "temporary"
  | "permanent"
  | "timeout"
  | "retries-exceeded"
  | "ignored"
  | "waiting";

/**
 * The label of an outcome.
 * @param outcome What a handler run came to.
 * @returns The bounded label.
 */
export function outcomeLabel(outcome: Outcome): OutcomeLabel {
  switch (outcome.kind) {
    case "success":
      return "success";
    case "ignored":
      return "ignored";
    case "temporary":
      return outcome.error.name === "HandlerChildrenRetry" ? "waiting" : "temporary";
    case "permanent":
      return outcome.error.name === "HandlerTimeoutError"
        ? "timeout"
        : outcome.error.name === "HandlerRetriesError"
        ? "retries-exceeded"
        : "permanent";
  }
}

/**
 * Receives what the operator does. Every method has a do-nothing default in
 * {@link NULL_OBSERVER}; {@link combineObservers} fans out to several.
 *
 * The wrapping methods (`cycle`, `handler`) run the work inside them, so that an implementation
 * can time it and make it the active trace span (API requests made inside become its children).
 */
export interface OperatorObserver {
  /** Runs one processing cycle of one object. */
  cycle<R extends CycleSummary>(info: CycleInfo, run: () => Promise<R>): Promise<R>;
  /** Runs one attempt of one handler. */
  handler(info: HandlerInfo, run: () => Promise<Outcome>): Promise<Outcome>;
  /** An event for an object was queued (`queue`: the queue's name, the resource). */
  queued(queue: string): void;
  /** An object's worker took its event from the queue after `seconds` of waiting. */
  dequeued(queue: string, seconds: number): void;
  /** An object is due again without a new event (a retry, a delay, an unexpected error). */
  retried(queue: string): void;
  /** A watch stream delivered an event (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `LISTED`). */
  watchEvent(resource: string, type: string): void;
  /** A watch request was opened, and why (see `WatchStartReason`). */
  watchConnected(resource: string, reason: string): void;
  /** A Kubernetes Event was posted (`Normal`, `Warning`); `count` messages folded into it. */
  eventPosted(type: string, count: number): void;
  /** Messages were not posted as Events (rate limit per object). */
  eventsDropped(count: number): void;
  /**
   * A state of the operator as a number, for parts that come and go with features (e.g. leader
   * election: `observer.state("leader", 1)`; shards: `observer.state("shards_owned", 3)`); see
   * docs/observability.md for the names the metrics engine exposes.
   */
  state(name: string, value: number, labels?: Readonly<Record<string, string>>): void;
}

/** The observer that observes nothing (the default when metrics and traces are off). */
export const NULL_OBSERVER: OperatorObserver = Object.freeze({
  cycle: <R extends CycleSummary>(_info: CycleInfo, run: () => Promise<R>): Promise<R> => run(),
  handler: (_info: HandlerInfo, run: () => Promise<Outcome>): Promise<Outcome> => run(),
  queued: () => {},
  dequeued: () => {},
  retried: () => {},
  watchEvent: () => {},
  watchConnected: () => {},
  eventPosted: () => {},
  eventsDropped: () => {},
  state: () => {},
});

/**
 * One observer that passes everything to several (the first one wraps outermost).
 * @param observers The observers; none gives {@link NULL_OBSERVER}, one gives itself.
 * @returns The combined observer.
 */
export function combineObservers(observers: readonly OperatorObserver[]): OperatorObserver {
  if (observers.length === 0) return NULL_OBSERVER;
  if (observers.length === 1) return observers[0]!;
  const each = (call: (o: OperatorObserver) => void) => {
    for (const o of observers) call(o);
  };
  return {
    cycle: <R extends CycleSummary>(info: CycleInfo, run: () => Promise<R>): Promise<R> =>
      observers.reduceRight<() => Promise<R>>((inner, o) => () => o.cycle(info, inner), run)(),
    handler: (info: HandlerInfo, run: () => Promise<Outcome>): Promise<Outcome> =>
      observers.reduceRight<() => Promise<Outcome>>(
        (inner, o) => () => o.handler(info, inner),
        run,
      )(),
    queued: (queue) => each((o) => o.queued(queue)),
    dequeued: (queue, seconds) => each((o) => o.dequeued(queue, seconds)),
    retried: (queue) => each((o) => o.retried(queue)),
    watchEvent: (resource, type) => each((o) => o.watchEvent(resource, type)),
    watchConnected: (resource, reason) => each((o) => o.watchConnected(resource, reason)),
    eventPosted: (type, count) => each((o) => o.eventPosted(type, count)),
    eventsDropped: (count) => each((o) => o.eventsDropped(count)),
    state: (name, value, labels) => each((o) => o.state(name, value, labels)),
  };
}
