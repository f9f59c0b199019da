/**
 * Registration of handlers: `on.create`, `on.update`, `on.delete`, `on.resume`, `on.field`,
 * `on.event`, the admission handlers `on.validate`, `on.mutate`, and the operator-level
 * `on.startup`, `on.cleanup`, `on.login`, `on.probe`. Each takes (a resource spec,) optional
 * options, and the function, and returns the function unchanged (so one function can be
 * registered several times). The registrations themselves live in `_on_resources.ts`,
 * `_on_admission.ts` and `_on_activities.ts`; this module gives them their typed signatures.
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

import type {
  AdmissionContext,
  ChangingContext,
  EventContext,
  FieldContext,
} from "../intents/contexts.ts";
import type { HandlerFn } from "../intents/handlers.ts";
import type { ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import type { StorableResult } from "../structs/results.ts";
import type { FieldPathOf, FieldValueOf } from "../structs/typed.ts";
import {
  type Activating,
  type ActivityOptions,
  activityRegistrar,
  type Probing,
} from "./_on_activities.ts";
import { type AdmissionOptions, admissionRegistrar, type Admitting } from "./_on_admission.ts";
import {
  type Changing,
  type ChangingOptions,
  type Default,
  type DeleteOptions,
  type Eventing,
  type FieldChanging,
  type FieldOptions,
  type HandlerOptions,
  OPTION_KEYS,
  registrationArgs,
  type ResumeOptions,
  type TypedValueOption,
  type TypedValueOptions,
  type UpdateOptions,
} from "./_on_options.ts";
import { registerChanging, registerEvent, registerField } from "./_on_resources.ts";
import { index } from "./indexing.ts";
import { reconcile } from "./reconciling.ts";
import { daemon, timer } from "./spawning.ts";

export type { Activating, ActivityOptions, Probing } from "./_on_activities.ts";
export type { AdmissionOptions, Admitting } from "./_on_admission.ts";
export type {
  Changing,
  ChangingOptions,
  Default,
  DeleteOptions,
  Eventing,
  FieldChanging,
  FieldOptions,
  HandlerOptions,
  ResumeOptions,
  TypedValueFilter,
  TypedValueOption,
  TypedValueOptions,
  UpdateOptions,
} from "./_on_options.ts";

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
  create<
    S = Default,
    T = Default,
    const P extends FieldPathOf<S> = FieldPathOf<S>,
    R = unknown,
  >(
    spec: ResourceSpec | TypedResource<S>,
    options:
      & Omit<ChangingOptions<FieldContext<S, T, FieldValueOf<S, P>>>, "value">
      & { readonly field: P }
      & TypedValueOption<FieldValueOf<S, P>>,
    fn: FieldChanging<S, T, FieldValueOf<S, P>, StorableResult<R>>,
  ): FieldChanging<S, T, FieldValueOf<S, P>, R>;
  /**
   * Registers a creation handler: runs for an object that was never handled before (it has
   * no last-handled configuration yet).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  create<S = Default, T = Default, R = unknown>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: ChangingOptions<ChangingContext<S, T>> | Changing<S, T, StorableResult<R>>,
    maybeFn?: Changing<S, T, StorableResult<R>>,
  ): Changing<S, T, R>;
  /**
   * Registers an update handler: runs when the essence (spec, labels, annotations…) of a
   * handled object changed.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  update<
    S = Default,
    T = Default,
    const P extends FieldPathOf<S> = FieldPathOf<S>,
    R = unknown,
  >(
    spec: ResourceSpec | TypedResource<S>,
    options:
      & Omit<UpdateOptions<FieldContext<S, T, FieldValueOf<S, P>>>, "value" | "old" | "new">
      & { readonly field: P }
      & TypedValueOptions<FieldValueOf<S, P>>,
    fn: FieldChanging<S, T, FieldValueOf<S, P>, StorableResult<R>>,
  ): FieldChanging<S, T, FieldValueOf<S, P>, R>;
  /**
   * Registers an update handler: runs when the essence (spec, labels, annotations…) of a
   * handled object changed.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  update<S = Default, T = Default, R = unknown>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: UpdateOptions<ChangingContext<S, T>> | Changing<S, T, StorableResult<R>>,
    maybeFn?: Changing<S, T, StorableResult<R>>,
  ): Changing<S, T, R>;
  /**
   * Registers a deletion handler: runs when deletion is requested; unless `optional`, a
   * finalizer blocks the deletion until it has finished.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  delete<
    S = Default,
    T = Default,
    const P extends FieldPathOf<S> = FieldPathOf<S>,
    R = unknown,
  >(
    spec: ResourceSpec | TypedResource<S>,
    options:
      & Omit<DeleteOptions<FieldContext<S, T, FieldValueOf<S, P>>>, "value">
      & { readonly field: P }
      & TypedValueOption<FieldValueOf<S, P>>,
    fn: FieldChanging<S, T, FieldValueOf<S, P>, StorableResult<R>>,
  ): FieldChanging<S, T, FieldValueOf<S, P>, R>;
  /**
   * Registers a deletion handler: runs when deletion is requested; unless `optional`, a
   * finalizer blocks the deletion until it has finished.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  delete<S = Default, T = Default, R = unknown>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: DeleteOptions<ChangingContext<S, T>> | Changing<S, T, StorableResult<R>>,
    maybeFn?: Changing<S, T, StorableResult<R>>,
  ): Changing<S, T, R>;
  /**
   * Registers a resuming handler: runs once per object and operator process for objects that
   * were already handled before (no change needed).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  resume<
    S = Default,
    T = Default,
    const P extends FieldPathOf<S> = FieldPathOf<S>,
    R = unknown,
  >(
    spec: ResourceSpec | TypedResource<S>,
    options:
      & Omit<ResumeOptions<FieldContext<S, T, FieldValueOf<S, P>>>, "value">
      & { readonly field: P }
      & TypedValueOption<FieldValueOf<S, P>>,
    fn: FieldChanging<S, T, FieldValueOf<S, P>, StorableResult<R>>,
  ): FieldChanging<S, T, FieldValueOf<S, P>, R>;
  /**
   * Registers a resuming handler: runs once per object and operator process for objects that
   * were already handled before (no change needed).
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  resume<S = Default, T = Default, R = unknown>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: ResumeOptions<ChangingContext<S, T>> | Changing<S, T, StorableResult<R>>,
    maybeFn?: Changing<S, T, StorableResult<R>>,
  ): Changing<S, T, R>;
  /**
   * Registers a field handler: runs when the given field changes (including its appearance at
   * creation); `old`, `new` and `diff` are the field's. With a typed resource (`Widgets`), a
   * dotted `field` must be a path of the object's essence (a misspelt one is a type error), and
   * `old`/`new` have the field's type.
   *
   * @typeParam S The object type (from a typed resource), or the spec type.
   * @typeParam T The status type (for a spec type `S`).
   * @typeParam P The field path, inferred from `options.field`.
   * @typeParam R The handler's result, inferred: it must be JSON (see `StorableResult`).
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param options The options; `field` is required.
   * @param fn The handler function.
   * @returns The handler function, unchanged.
   * @throws {TypeError} when no field is given.
   */
  field<
    S = Default,
    T = Default,
    const P extends FieldPathOf<S> = FieldPathOf<S>,
    R = unknown,
  >(
    spec: ResourceSpec | TypedResource<S>,
    options:
      & Omit<FieldOptions<FieldContext<S, T, FieldValueOf<S, P>>>, "value" | "old" | "new">
      & { readonly field: P }
      & TypedValueOptions<FieldValueOf<S, P>>,
    fn: FieldChanging<S, T, FieldValueOf<S, P>, StorableResult<R>>,
  ): FieldChanging<S, T, FieldValueOf<S, P>, R>;
  /**
   * Registers an event-watching handler: runs for every raw watch event (and every listed
   * object); its errors are logged and ignored, never retried.
   *
   * @param spec The resource(s): a name, `[group, version, name]`, selector fields or `EVERYTHING`.
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  event<S = Default, T = Default, R = unknown>(
    spec: ResourceSpec | TypedResource<S>,
    optionsOrFn: HandlerOptions<EventContext<S, T>> | Eventing<S, T, StorableResult<R>>,
    maybeFn?: Eventing<S, T, StorableResult<R>>,
  ): Eventing<S, T, R>;
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
   * Contributes its result (by id) to the liveness endpoint's JSON: a JSON value (a result that
   * JSON cannot carry — a BigInt, a Map, a function — is a compile error where its type is known,
   * and fails the probe with the handler's name at run time).
   *
   * @param optionsOrFn The options, or the handler function when there are no options.
   * @param maybeFn The handler function, when options are given.
   * @returns The handler function, unchanged.
   */
  probe<R = unknown>(
    optionsOrFn: ActivityOptions | Probing<StorableResult<R>>,
    maybeFn?: Probing<StorableResult<R>>,
  ): Probing<R>;
  /** The same function as the top-level {@link daemon} (Kopf has both spellings). */
  readonly daemon: typeof daemon;
  /** The same function as the top-level {@link timer} (Kopf has both spellings). */
  readonly timer: typeof timer;
  /** The same function as the top-level {@link index} (Kopf has both spellings). */
  readonly index: typeof index;
  /** Level-based reconciliation (not in Kopf): the same function as the top-level {@link reconcile}. */
  readonly reconcile: typeof reconcile;
}

/**
 * The registration function of one reason. Its signature is the broadest of the overloads in
 * {@link On}: the types of the context matter to callers, not to the registration.
 */
function changingRegistrar<R extends "create" | "update" | "delete" | "resume">(
  reason: R,
): On[R] {
  const name = `on.${reason}` as const;
  const call = { name, keys: OPTION_KEYS[name], resource: true };
  const register = (...args: unknown[]): HandlerFn<never> => {
    const { options, fn } = registrationArgs<ChangingOptions<unknown>, HandlerFn<never>>(
      call,
      args,
    );
    registerChanging(args[0] as ResourceSpec, reason, options, fn);
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
  field: registerField,
  event: registerEvent,
  validate: admissionRegistrar("validating"),
  mutate: admissionRegistrar("mutating"),
  startup: activityRegistrar("startup"),
  cleanup: activityRegistrar("cleanup"),
  login: activityRegistrar("login"),
  probe: activityRegistrar("probe") as On["probe"],
  daemon,
  timer,
  index,
  reconcile,
};
