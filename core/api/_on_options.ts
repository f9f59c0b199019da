/**
 * The options of resource handlers (`on.create` … `on.event`), the handler function types, and
 * the argument handling that every `on.*` registration shares.
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { ChangingContext, EventContext, FieldContext } from "../intents/contexts.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "../intents/filters.ts";
import type { OperatorRegistry } from "../intents/registries.ts";
import type { FieldSpec } from "../structs/dicts.ts";

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

/** A resource-changing handler function. */
export type Changing<S, T> = (context: ChangingContext<S, T>) => unknown;
/** A handler function with a `field`: its `old`, `new` and `diff` are the field's. */
export type FieldChanging<S, T> = (context: FieldContext<S, T>) => unknown;
/** An event-watching handler function. */
export type Eventing<S, T> = (context: EventContext<S, T>) => unknown;
/** The default type of `spec` and `status`. */
export type Default = Record<string, unknown>;

/** `(options, fn)` or just `(fn)`: the options and the function, either way. */
export function splitArgs<F, O>(a: O | F, b: F | undefined): [O, F] {
  return b === undefined ? [{} as O, a as F] : [a as O, b];
}

/** Rejects filter combinations that could never match, at registration rather than at runtime. */
export function validateFilters(options: UpdateOptions<unknown>): void {
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
