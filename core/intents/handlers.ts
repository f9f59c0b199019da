/**
 * Handler records: what the operator author declared, as data. Created by the registration API
 * (`on.*`), matched by the registry, executed by the reactor.
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { Operation } from "../structs/admission.ts";
import { type FieldPath, type FieldSpec, parseField } from "../structs/dicts.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "./filters.ts";
import type { SelectorFields } from "./selectors.ts";

/** Why resource-changing handlers run (handler-facing reasons). */
export type Reason = "create" | "update" | "delete" | "resume";

/** All causes the framework detects, including internal ones. */
export type CauseReason = Reason | "noop" | "free" | "gone";

/**
 * A handler function: takes one context object, returns a result (or a promise of one).
 * The context type defaults to `never` so that functions typed for any context are accepted.
 */
export type HandlerFn<C = never> = (context: C) => unknown;

/**
 * A handler's id: unique within a registry; the function's name by default, `parent/child` for
 * sub-handlers, `name/field.path` for field handlers. It keys the handler's progress and result.
 */
export type HandlerId = string;

/** Options shared by all resource handlers. */
export interface BaseHandler {
  /** Unique id within the registry (default: the function name). */
  readonly id: HandlerId;
  /** The function to call. */
  readonly fn: HandlerFn;
  /** Passed back as `param`. */
  readonly param: unknown;
  /** Label filters. */
  readonly labels?: MetaFilter | undefined;
  /** Annotation filters. */
  readonly annotations?: MetaFilter | undefined;
  /** Whole-object callback filter. */
  readonly when?: WhenCallback | undefined;
  /** Field the handler is interested in. */
  readonly field?: FieldPath | undefined;
  /** Value filter of `field` (default: PRESENT for non-update handlers). */
  readonly value?: ValueFilter | undefined;
}

/** The filters a resource handler's options may give (`on.*`, daemons, timers, sub-handlers…). */
export interface FilterOptions {
  /** Label filters. */
  readonly labels?: MetaFilter | undefined;
  /** Annotation filters. */
  readonly annotations?: MetaFilter | undefined;
  /** Whole-object callback filter. */
  readonly when?: WhenCallback | undefined;
  /** The field, as a dotted path or a list of keys. */
  readonly field?: FieldSpec;
  /** Value filter of `field`. */
  readonly value?: ValueFilter | undefined;
}

/**
 * The filter fields of a handler record, from its options (the field parsed into a path).
 * @param options The handler's options.
 * @returns Labels, annotations, `when`, field and value, for spreading into the record.
 */
export function handlerFilters(
  options: FilterOptions,
): Pick<BaseHandler, "labels" | "annotations" | "when" | "field" | "value"> {
  const field = options.field;
  return {
    labels: options.labels,
    annotations: options.annotations,
    when: options.when,
    field: field === undefined || field === null ? undefined : parseField(field),
    value: options.value,
  };
}

/** Options of handlers that are retried and persisted. */
export interface RetriedHandler extends BaseHandler {
  /** Treatment of arbitrary errors. */
  readonly errors?: ErrorsMode | undefined;
  /** Overall timeout in seconds. */
  readonly timeout?: number | undefined;
  /** Maximum attempts. */
  readonly retries?: number | undefined;
  /** Delay before retrying arbitrary errors, seconds. */
  readonly backoff?: number | undefined;
}

/** A resource-changing handler: on.create/update/delete/resume/field and sub-handlers. */
export interface ChangingHandler extends RetriedHandler {
  /** Discriminator. */
  readonly kind: "changing";
  /** The reason it serves; `undefined` for field handlers (any reason, field must change). */
  readonly reason: Reason | undefined;
  /** Fire only when `field` actually changed (field handlers, update handlers with a field). */
  readonly fieldMustChange: boolean;
  /** Old-value filter (update/field handlers). */
  readonly old?: ValueFilter | undefined;
  /** New-value filter (update/field handlers). */
  readonly new?: ValueFilter | undefined;
  /** Delete handlers: do not require a finalizer. */
  readonly optional?: boolean | undefined;
  /** Resume handlers: also for objects being deleted. */
  readonly deleted?: boolean | undefined;
  /** Whether the handler needs the finalizer (non-optional delete handlers). */
  readonly requiresFinalizer: boolean;
}

/** A raw-event handler: on.event. */
export interface WatchingHandler extends BaseHandler {
  /** Discriminator. */
  readonly kind: "watching";
}

/** A daemon or timer: a per-object background task. */
export interface SpawningHandler extends RetriedHandler {
  /** Discriminator. */
  readonly kind: "spawning";
  /** Which kind of task. */
  readonly spawn: "daemon" | "timer";
  /** Seconds to wait after the object appears (or the operator starts) before the first run. */
  readonly initialDelay?: number | undefined;
  /** Daemons: seconds between the stop signal and the cancellation. */
  readonly cancellationBackoff?: number | undefined;
  /** Daemons: seconds after the cancellation before the task is abandoned (none: wait forever). */
  readonly cancellationTimeout?: number | undefined;
  /** Daemons: how often an exiting daemon without a timeout is re-checked (seconds). */
  readonly cancellationPolling?: number | undefined;
  /** Timers: seconds between runs. */
  readonly interval?: number | undefined;
  /** Timers: align runs to a fixed grid instead of counting from the end of the last run. */
  readonly sharp?: boolean | undefined;
  /** Timers: run only after the object has been unchanged for this many seconds. */
  readonly idle?: number | undefined;
}

/** An index handler: maps objects to key→value pairs of an in-memory index. */
export interface IndexingHandler extends RetriedHandler {
  /** Discriminator. */
  readonly kind: "indexing";
}

/** Operator-level activities. */
export type Activity = "startup" | "cleanup" | "login" | "probe";

/** An operator-level handler: on.startup/cleanup/login/probe. */
export interface ActivityHandler {
  /** Discriminator. */
  readonly kind: "activity";
  /** Which activity. */
  readonly activity: Activity;
  /** Unique id (default: the function name). */
  readonly id: string;
  /** The function to call. */
  readonly fn: HandlerFn;
  /** Passed back as `param`. */
  readonly param: unknown;
  /** Treatment of arbitrary errors. */
  readonly errors?: ErrorsMode | undefined;
  /** Overall timeout in seconds. */
  readonly timeout?: number | undefined;
  /** Maximum attempts. */
  readonly retries?: number | undefined;
  /** Delay before retrying arbitrary errors, seconds. */
  readonly backoff?: number | undefined;
}

/** Which kind of admission webhook a handler serves. */
export type WebhookKind = "validating" | "mutating";

/** An admission handler: on.validate / on.mutate. Never retried; runs once per review. */
export interface WebhookHandler extends BaseHandler {
  /** Discriminator. */
  readonly kind: "webhook";
  /** Validating or mutating. */
  readonly webhook: WebhookKind;
  /** The operations it serves; `undefined`: all. */
  readonly operations?: readonly Operation[] | undefined;
  /** `undefined`: the main body only; `"*"`: the body and all subresources; else one subresource. */
  readonly subresource?: string | undefined;
  /** Keep its entry in the managed configurations when the operator exits. */
  readonly persistent: boolean;
  /** The handler has side effects (skipped in dry runs): `sideEffects: NoneOnDryRun`. */
  readonly sideEffects: boolean;
  /** `failurePolicy: Ignore` instead of `Fail`. */
  readonly ignoreFailures: boolean;
}

/** Any handler bound to a resource. */
export type ResourceHandler = ChangingHandler | WatchingHandler | SpawningHandler | IndexingHandler;

/** A handler together with the selector of the resources it serves. */
export interface Registration<H extends ResourceHandler | WebhookHandler = ResourceHandler> {
  /** Which resources. */
  readonly selector: SelectorFields;
  /** The handler. */
  readonly handler: H;
}

/**
 * The id of a handler, by Kopf's rule: the explicit id or else the function's name (anonymous
 * functions get a source-based id), then `/field.path` appended when the handler has a field
 * (whether the id is explicit or derived), then `parent/` prefixed for sub-handlers. State
 * written by Kopf (status keys, progress annotations) is found only with the same ids.
 *
 * @example
 * ```ts
 * import { handlerId } from "./handlers.ts";
 * handlerId(undefined, function field_fn() {}, ["spec", "field"]); // "field_fn/spec.field"
 * handlerId("explicit", () => {}, ["spec", "field"]); // "explicit/spec.field"
 * ```
 *
 * @param id The explicit id, if given.
 * @param fn The function.
 * @param field Its field, if the id gets it (Kopf: changing, event, daemon, timer and
 *   admission handlers, but neither sub-handlers nor indices).
 * @param prefix The parent handler's id, for sub-handlers.
 * @returns The id.
 */
export function handlerId(
  id: string | undefined,
  fn: HandlerFn,
  field?: FieldPath,
  prefix?: string,
): string {
  let real = id ?? functionId(fn);
  if (field && field.length) real += `/${field.join(".")}`;
  return prefix ? `${prefix}/${real}` : real;
}

/**
 * The id of a handler without an explicit id: {@link handlerId} of the function's name.
 *
 * @param fn The function.
 * @param field Its field, if any.
 * @param prefix The parent handler's id, for sub-handlers.
 * @returns The id.
 */
export function defaultHandlerId(fn: HandlerFn, field?: FieldPath, prefix?: string): string {
  return handlerId(undefined, fn, field, prefix);
}

function functionId(fn: HandlerFn): string {
  return fn.name && fn.name !== "anonymous" ? fn.name.replace(/^bound /, "") : anonymousId(fn);
}

function anonymousId(fn: HandlerFn): string {
  // A stable id for the same source text: anonymous handlers keep their progress across restarts
  // as long as their code does not change.
  let hash = 0;
  for (const char of fn.toString()) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return `lambda-${hash.toString(16)}`;
}
