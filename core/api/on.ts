/**
 * Registration of resource handlers: `on.create`, `on.update`, `on.delete`, `on.resume`,
 * `on.field`, `on.event`. Each takes a resource spec, optional options, and the function, and
 * returns the function unchanged (so one function can be registered several times).
 *
 * @example A create handler that reports to status
 * ```ts
 * import { on } from "./on.ts";
 * on.create("kopfexamples", ({ spec, logger }) => {
 *   logger.info(`Creating with ${JSON.stringify(spec)}`);
 *   return { message: "hello" }; // → status.create_fn
 * });
 * ```
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type {
  ActivityContext,
  AdmissionContext,
  ChangingContext,
  EventContext,
  FieldContext,
} from "../intents/contexts.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "../intents/filters.ts";
import {
  type Activity,
  type ActivityHandler,
  type ChangingHandler,
  defaultHandlerId,
  type HandlerFn,
  handlerId,
  type Reason,
  type WatchingHandler,
  type WebhookHandler,
  type WebhookKind,
} from "../intents/handlers.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import { type Operation, OPERATIONS } from "../structs/admission.ts";
import { type FieldSpec, parseField } from "../structs/dicts.ts";
import { index } from "./indexing.ts";
import { reconcile } from "./reconciling.ts";
import { daemon, timer } from "./spawning.ts";

/** Options every resource handler accepts. */
export interface HandlerOptions<C = never> {
  /** Handler id (default: the function name, plus `/field` for field filters). */
  readonly id?: string;
  /** The registry to add to. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Passed back to the handler as `param`. */
  readonly param?: unknown;
  /** Label filters: values, `PRESENT`, `ABSENT` or callbacks. */
  readonly labels?: MetaFilter;
  /** Annotation filters: values, `PRESENT`, `ABSENT` or callbacks. */
  readonly annotations?: MetaFilter;
  /** Whole-object filter callback. */
  readonly when?: WhenCallback<C>;
  /** A field (dotted string or path) the handler cares about. */
  readonly field?: FieldSpec;
  /** Value filter of `field`. */
  readonly value?: ValueFilter;
}

/** Options of resource-changing handlers. */
export interface ChangingOptions<C = never> extends HandlerOptions<C> {
  /** Treatment of arbitrary errors. @default "temporary" */
  readonly errors?: ErrorsMode;
  /** Overall timeout in seconds since the first attempt. */
  readonly timeout?: number;
  /** Maximum number of attempts. */
  readonly retries?: number;
  /** Seconds before retrying arbitrary errors. @default 60 */
  readonly backoff?: number;
}

/** Options of update and field handlers. */
export interface UpdateOptions<C = never> extends ChangingOptions<C> {
  /** Filter of the old value of `field`. */
  readonly old?: ValueFilter;
  /** Filter of the new value of `field`. */
  readonly new?: ValueFilter;
}

/** Options of delete handlers. */
export interface DeleteOptions<C = never> extends ChangingOptions<C> {
  /** Do not block deletion with a finalizer (best effort: may be missed). @default false */
  readonly optional?: boolean;
}

/** Options of resume handlers. */
export interface ResumeOptions<C = never> extends ChangingOptions<C> {
  /** Also resume objects already marked for deletion. @default false */
  readonly deleted?: boolean;
}

/** Options of field handlers (`field` is required). */
export interface FieldOptions<C = never> extends UpdateOptions<C> {
  /** The field to watch. */
  readonly field: FieldSpec;
}

/** Options of admission handlers (`on.validate`, `on.mutate`); never retried. */
export interface AdmissionOptions<C = never> extends HandlerOptions<C> {
  /** The operations to serve: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`. @default all */
  readonly operations?: readonly Operation[];
  /**
   * One operation to serve.
   * @deprecated Use `operations`.
   */
  readonly operation?: Operation;
  /**
   * The subresource to serve (`status`, `scale`, …); `"*"`: the body and every subresource.
   * @default the main body only
   */
  readonly subresource?: string | null;
  /** Keep the webhook in the managed configurations when the operator exits. @default false */
  readonly persistent?: boolean;
  /** The handler has side effects, which it skips when `dryrun` is true. @default false */
  readonly sideEffects?: boolean;
  /** Admit the request when the webhook fails or cannot be reached (`failurePolicy: Ignore`). @default false */
  readonly ignoreFailures?: boolean;
}

/** An admission handler function. */
export type Admitting<S, T> = (context: AdmissionContext<S, T>) => unknown;

/** A resource-changing handler function. */
export type Changing<S, T> = (context: ChangingContext<S, T>) => unknown;
/** A handler function with a `field`: its `old`, `new` and `diff` are the field's. */
export type FieldChanging<S, T> = (context: FieldContext<S, T>) => unknown;
/** An event-watching handler function. */
export type Eventing<S, T> = (context: EventContext<S, T>) => unknown;
/** The default type of `spec` and `status`. */
export type Default = Record<string, unknown>;

function split<F, O>(a: O | F, b: F | undefined): [O, F] {
  return b === undefined ? [{} as O, a as F] : [a as O, b];
}

function validate(options: UpdateOptions<unknown>): void {
  const hasField = options.field !== undefined && options.field !== null;
  if (
    !hasField &&
    (options.value !== undefined || options.old !== undefined || options.new !== undefined)
  ) {
    throw new TypeError("The value, old and new filters need a field");
  }
  if (options.value !== undefined && (options.old !== undefined || options.new !== undefined)) {
    throw new TypeError("The value filter and the old/new filters are mutually exclusive");
  }
  for (const filters of [options.labels, options.annotations]) {
    for (const [key, v] of Object.entries(filters ?? {})) {
      if (v === null || v === undefined) {
        throw new TypeError(`Filter '${key}': use PRESENT or ABSENT instead of null`);
      }
    }
  }
}

function registerChanging(
  spec: ResourceSpec,
  reason: Reason | undefined,
  options: UpdateOptions<unknown> & DeleteOptions<unknown> & ResumeOptions<unknown>,
  fn: HandlerFn<never>,
): void {
  validate(options);
  const field = options.field === undefined || options.field === null
    ? undefined
    : parseField(options.field);
  const handler: ChangingHandler = {
    kind: "changing",
    id: handlerId(options.id, fn, field),
    fn,
    param: options.param,
    labels: options.labels,
    annotations: options.annotations,
    when: options.when as ChangingHandler["when"],
    field,
    value: options.value,
    old: options.old,
    new: options.new,
    errors: options.errors,
    timeout: options.timeout,
    retries: options.retries,
    backoff: options.backoff,
    reason,
    fieldMustChange: reason === undefined || (reason === "update" && field !== undefined),
    optional: options.optional,
    deleted: options.deleted,
    requiresFinalizer: reason === "delete" && !options.optional,
  };
  (options.registry ?? getDefaultRegistry()).register(parseSelector(spec), handler);
}

function registerWebhook(
  kind: WebhookKind,
  spec: ResourceSpec,
  options: AdmissionOptions<unknown>,
  fn: HandlerFn<never>,
): void {
  validate(options);
  for (const key of ["errors", "timeout", "retries", "backoff"]) {
    if ((options as Record<string, unknown>)[key] !== undefined) {
      throw new TypeError(`Admission handlers are never retried: '${key}' is not accepted`);
    }
  }
  if (options.operation !== undefined && options.operations !== undefined) {
    throw new TypeError("Give either `operations` or the deprecated `operation`, not both");
  }
  const operations = options.operation !== undefined ? [options.operation] : options.operations;
  for (const operation of operations ?? []) {
    if (!OPERATIONS.includes(operation)) {
      throw new TypeError(`Unknown operation '${operation}'; use ${OPERATIONS.join(", ")}`);
    }
  }
  const field = options.field === undefined || options.field === null
    ? undefined
    : parseField(options.field);
  const handler: WebhookHandler = {
    kind: "webhook",
    webhook: kind,
    id: handlerId(options.id, fn, field),
    fn,
    param: options.param,
    labels: options.labels,
    annotations: options.annotations,
    when: options.when as WebhookHandler["when"],
    field,
    value: options.value,
    operations: operations?.length ? [...operations] : undefined,
    subresource: options.subresource ?? undefined,
    persistent: Boolean(options.persistent),
    sideEffects: Boolean(options.sideEffects),
    ignoreFailures: Boolean(options.ignoreFailures),
  };
  (options.registry ?? getDefaultRegistry()).registerWebhook(parseSelector(spec), handler);
}

/** The handler registration functions; see {@link on}. */
export interface On {
  /**
   * Registers a creation handler: runs for an object that was never handled before (it has
   * no last-handled configuration yet).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  create<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: ChangingOptions<FieldContext<S, T>> & { readonly field: FieldSpec },
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T>;
  /**
   * Registers a creation handler: runs for an object that was never handled before (it has
   * no last-handled configuration yet).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  create<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: ChangingOptions<ChangingContext<S, T>> | Changing<S, T>,
    maybeFn?: Changing<S, T>,
  ): Changing<S, T>;
  /**
   * Registers an update handler: runs when the essence (spec, labels, annotations…) of a
   * handled object changed.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  update<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: UpdateOptions<FieldContext<S, T>> & { readonly field: FieldSpec },
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T>;
  /**
   * Registers an update handler: runs when the essence (spec, labels, annotations…) of a
   * handled object changed.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  update<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: UpdateOptions<ChangingContext<S, T>> | Changing<S, T>,
    maybeFn?: Changing<S, T>,
  ): Changing<S, T>;
  /**
   * Registers a deletion handler: runs when deletion is requested; unless `optional`, a
   * finalizer blocks the deletion until it has finished.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  delete<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: DeleteOptions<FieldContext<S, T>> & { readonly field: FieldSpec },
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T>;
  /**
   * Registers a deletion handler: runs when deletion is requested; unless `optional`, a
   * finalizer blocks the deletion until it has finished.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  delete<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: DeleteOptions<ChangingContext<S, T>> | Changing<S, T>,
    maybeFn?: Changing<S, T>,
  ): Changing<S, T>;
  /**
   * Registers a resuming handler: runs once per object and operator process for objects that
   * were already handled before (no change needed).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  resume<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: ResumeOptions<FieldContext<S, T>> & { readonly field: FieldSpec },
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T>;
  /**
   * Registers a resuming handler: runs once per object and operator process for objects that
   * were already handled before (no change needed).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  resume<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: ResumeOptions<ChangingContext<S, T>> | Changing<S, T>,
    maybeFn?: Changing<S, T>,
  ): Changing<S, T>;
  /**
   * Registers a field handler: runs when the given field changes (including its appearance at
   * creation); `old`, `new` and `diff` are the field's.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param options The options; `field` is required.
   * @param fn The handler function.
   * @returns The handler function, unchanged.
   * @throws {TypeError} when no field is given.
   */
  field<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: FieldOptions<FieldContext<S, T>>,
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T>;
  /**
   * Registers an event-watching handler: runs for every raw watch event (and every listed
   * object); its errors are logged and ignored, never retried.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  event<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: HandlerOptions<EventContext<S, T>> | Eventing<S, T>,
    maybeFn?: Eventing<S, T>,
  ): Eventing<S, T>;
  /**
   * Registers a validating admission handler: it runs when Kubernetes asks the operator's
   * webhook whether to admit a request; throwing rejects it (`AdmissionError` sets the message
   * and code), `warnings` reach the API client. Needs `settings.admission.server`.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   * @throws {TypeError} for retry options, unknown operations, or both `operation` and `operations`.
   */
  validate<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: AdmissionOptions<AdmissionContext<S, T>> | Admitting<S, T>,
    maybeFn?: Admitting<S, T>,
  ): Admitting<S, T>;
  /**
   * Registers a mutating admission handler: what it writes into `patch` is applied to the object
   * before it is stored (returned to Kubernetes as a JSON patch); throwing rejects the request.
   * Needs `settings.admission.server`.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   * @throws {TypeError} for retry options, unknown operations, or both `operation` and `operations`.
   */
  mutate<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: AdmissionOptions<AdmissionContext<S, T>> | Admitting<S, T>,
    maybeFn?: Admitting<S, T>,
  ): Admitting<S, T>;
  /**
   * Runs at operator start, before anything talks to the cluster; a permanent failure stops the operator.
   *
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  startup(optionsOrFn: ActivityOptions | Activating, maybeFn?: Activating): Activating;
  /**
   * Runs when the operator stops (by signal, error or request); not guaranteed to finish.
   *
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  cleanup(optionsOrFn: ActivityOptions | Activating, maybeFn?: Activating): Activating;
  /**
   * Provides cluster credentials: return a `ConnectionInfo` (or null to pass). Re-run when the
   * API server rejects the credentials (401). Without login handlers, the kubeconfig or the
   * in-cluster service account is used.
   *
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  login(optionsOrFn: ActivityOptions | Activating, maybeFn?: Activating): Activating;
  /**
   * Contributes its result (by id) to the liveness endpoint's JSON.
   *
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  probe(optionsOrFn: ActivityOptions | Activating, maybeFn?: Activating): Activating;
  /** The same function as the top-level {@link daemon} (Kopf has both spellings). */
  readonly daemon: typeof daemon;
  /** The same function as the top-level {@link timer} (Kopf has both spellings). */
  readonly timer: typeof timer;
  /** The same function as the top-level {@link index} (Kopf has both spellings). */
  readonly index: typeof index;
  /** Level-based reconciliation (not in Kopf): the same function as the top-level {@link reconcile}. */
  readonly reconcile: typeof reconcile;
}

/** Options of operator-level handlers (startup, cleanup, login, probe). */
export interface ActivityOptions {
  /** Handler id (default: the function name). */
  readonly id?: string;
  /** The registry to add to. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Passed back as `param`. */
  readonly param?: unknown;
  /** Treatment of arbitrary errors. @default "temporary" */
  readonly errors?: ErrorsMode;
  /** Overall timeout in seconds since the first attempt. */
  readonly timeout?: number;
  /** Maximum number of attempts. */
  readonly retries?: number;
  /** Seconds before retrying arbitrary errors. @default 60 */
  readonly backoff?: number;
}

/** An operator-level handler function. */
export type Activating = (context: ActivityContext) => unknown;

function registerActivity(
  activity: Activity,
  optionsOrFn: ActivityOptions | Activating,
  maybeFn?: Activating,
): Activating {
  const [options, fn] = split<Activating, ActivityOptions>(optionsOrFn, maybeFn);
  const handler: ActivityHandler = {
    kind: "activity",
    activity,
    id: options.id ?? defaultHandlerId(fn as HandlerFn<never>),
    fn: fn as HandlerFn<never>,
    param: options.param,
    errors: options.errors,
    timeout: options.timeout,
    retries: options.retries,
    backoff: options.backoff,
  };
  (options.registry ?? getDefaultRegistry()).registerActivity(handler);
  return fn;
}

/**
 * The registration function of one reason. Its signature is the broadest of the overloads in
 * {@link On}: the types of the context matter to callers, not to the registration.
 */
function changingRegistrar<R extends "create" | "update" | "delete" | "resume">(
  reason: R,
): On[R] {
  const register = (
    spec: ResourceSpec,
    optionsOrFn: ChangingOptions<never> | HandlerFn<never>,
    maybeFn?: HandlerFn<never>,
  ): HandlerFn<never> => {
    const [options, fn] = split<HandlerFn<never>, ChangingOptions<never>>(optionsOrFn, maybeFn);
    registerChanging(spec, reason, options as ChangingOptions<unknown>, fn);
    return fn;
  };
  return register as unknown as On[R];
}

/**
 * Handler registration functions. Each returns the function it was given.
 */
export const on: On = {
  create: changingRegistrar("create"),
  update: changingRegistrar("update"),
  delete: changingRegistrar("delete"),
  resume: changingRegistrar("resume"),
  /** Runs when a field changes (including its appearance at creation); `old`/`new`/`diff` are the field's. */
  field<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    options: FieldOptions<FieldContext<S, T>>,
    fn: FieldChanging<S, T>,
  ): FieldChanging<S, T> {
    if (options.field === undefined || options.field === null) {
      throw new TypeError("on.field() needs a field");
    }
    registerChanging(spec, undefined, options as FieldOptions<unknown>, fn as HandlerFn<never>);
    return fn;
  },
  /** Runs for every raw watch event (and every listed object); errors are logged and ignored. */
  event<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: HandlerOptions<EventContext<S, T>> | Eventing<S, T>,
    maybeFn?: Eventing<S, T>,
  ): Eventing<S, T> {
    const [options, fn] = split<Eventing<S, T>, HandlerOptions<EventContext<S, T>>>(
      optionsOrFn,
      maybeFn,
    );
    validate(options as HandlerOptions<unknown>);
    const field = options.field === undefined || options.field === null
      ? undefined
      : parseField(options.field);
    const handler: WatchingHandler = {
      kind: "watching",
      id: handlerId(options.id, fn as HandlerFn<never>, field),
      fn: fn as HandlerFn<never>,
      param: options.param,
      labels: options.labels,
      annotations: options.annotations,
      when: options.when as WatchingHandler["when"],
      field,
      value: options.value,
    };
    (options.registry ?? getDefaultRegistry()).register(parseSelector(spec), handler);
    return fn;
  },
  /** Runs when Kubernetes asks whether to admit a request; throwing rejects it. */
  validate<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: AdmissionOptions<AdmissionContext<S, T>> | Admitting<S, T>,
    maybeFn?: Admitting<S, T>,
  ): Admitting<S, T> {
    const [options, fn] = split<Admitting<S, T>, AdmissionOptions<AdmissionContext<S, T>>>(
      optionsOrFn,
      maybeFn,
    );
    registerWebhook(
      "validating",
      spec,
      options as AdmissionOptions<unknown>,
      fn as HandlerFn<never>,
    );
    return fn;
  },
  /** Runs when Kubernetes asks to mutate a request; changes go through `patch`. */
  mutate<S = Default, T = Default>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: AdmissionOptions<AdmissionContext<S, T>> | Admitting<S, T>,
    maybeFn?: Admitting<S, T>,
  ): Admitting<S, T> {
    const [options, fn] = split<Admitting<S, T>, AdmissionOptions<AdmissionContext<S, T>>>(
      optionsOrFn,
      maybeFn,
    );
    registerWebhook(
      "mutating",
      spec,
      options as AdmissionOptions<unknown>,
      fn as HandlerFn<never>,
    );
    return fn;
  },
  startup: (optionsOrFn, maybeFn) => registerActivity("startup", optionsOrFn, maybeFn),
  cleanup: (optionsOrFn, maybeFn) => registerActivity("cleanup", optionsOrFn, maybeFn),
  login: (optionsOrFn, maybeFn) => registerActivity("login", optionsOrFn, maybeFn),
  probe: (optionsOrFn, maybeFn) => registerActivity("probe", optionsOrFn, maybeFn),
  daemon,
  timer,
  index,
  reconcile,
};
