/**
 * Registration of watch-driven resource handlers: the changing ones (`on.create`, `on.update`,
 * `on.delete`, `on.resume`, `on.field`) and the event-watching one (`on.event`).
 * @module
 */

import type { EventContext, FieldContext } from "../intents/contexts.ts";
import {
  type ChangingHandler,
  handlerFilters,
  type HandlerFn,
  handlerId,
  type Reason,
  type WatchingHandler,
} from "../intents/handlers.ts";
import { getDefaultRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import type { StorableResult } from "../structs/results.ts";
import type { FieldPathOf, FieldValueOf } from "../structs/typed.ts";
import {
  type Default,
  type DeleteOptions,
  type Eventing,
  type FieldChanging,
  type FieldOptions,
  type HandlerOptions,
  OPTION_KEYS,
  registrationArgs,
  type ResumeOptions,
  type TypedValueOptions,
  type UpdateOptions,
  validateFilters,
} from "./_on_options.ts";

/** Registers a changing handler; without a reason, it is a field handler (`on.field`). */
export function registerChanging(
  spec: ResourceSpec,
  reason: Reason | undefined,
  options: UpdateOptions<unknown> & DeleteOptions<unknown> & ResumeOptions<unknown>,
  fn: HandlerFn<never>,
): void {
  validateFilters(options);
  const filters = handlerFilters(options);
  const field = filters.field;
  const handler: ChangingHandler = {
    kind: "changing",
    id: handlerId(options.id, fn, field),
    fn,
    param: options.param,
    ...filters,
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

/** `on.field`: a changing handler of no particular reason, run when its field changes. */
export function registerField<
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
): FieldChanging<S, T, FieldValueOf<S, P>, R> {
  const checked = registrationArgs<FieldOptions<unknown>, HandlerFn<never>>(
    { name: "on.field", keys: OPTION_KEYS["on.field"], resource: true },
    [spec, options, fn, ...[...arguments].slice(3)],
  );
  if (checked.options.field === undefined || checked.options.field === null) {
    throw new TypeError("on.field() needs a field");
  }
  registerChanging(spec, undefined, checked.options, checked.fn);
  return checked.fn as FieldChanging<S, T, FieldValueOf<S, P>, R>;
}

/** `on.event`: runs for every raw watch event; errors are logged and ignored. */
export function registerEvent<S = Default, T = Default, R = unknown>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: HandlerOptions<EventContext<S, T>> | Eventing<S, T, StorableResult<R>>,
  maybeFn?: Eventing<S, T, StorableResult<R>>,
): Eventing<S, T, R> {
  const { options, fn } = registrationArgs<HandlerOptions<EventContext<S, T>>, Eventing<S, T, R>>(
    { name: "on.event", keys: OPTION_KEYS["on.event"], resource: true },
    [spec, optionsOrFn, maybeFn, ...[...arguments].slice(3)],
  );
  validateFilters(options as HandlerOptions<unknown>);
  const filters = handlerFilters(options);
  const handler: WatchingHandler = {
    kind: "watching",
    id: handlerId(options.id, fn as HandlerFn<never>, filters.field),
    fn: fn as HandlerFn<never>,
    param: options.param,
    ...filters,
  };
  (options.registry ?? getDefaultRegistry()).register(parseSelector(spec), handler);
  return fn;
}
