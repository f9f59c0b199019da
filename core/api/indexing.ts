/**
 * Registration of index handlers: in-memory indices over watched objects, passed to every
 * resource handler by name (and in `indices`), complete before any resource handler runs.
 *
 * @example Pods by namespace, and looking them up from another handler
 * ```ts
 * import { index } from "./indexing.ts";
 * import { on } from "./on.ts";
 * index("pods", function podsByNamespace({ namespace, name }) {
 *   return { [namespace ?? ""]: name };
 * });
 * on.create("kopfexamples", ({ indices, namespace }) => {
 *   const pods = indices.podsByNamespace?.get(namespace)?.toArray() ?? [];
 *   return { pods };
 * });
 * ```
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { ResourceContext } from "../intents/contexts.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "../intents/filters.ts";
import {
  defaultHandlerId,
  handlerFilters,
  type HandlerFn,
  type IndexingHandler,
} from "../intents/handlers.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import type { FieldSpec } from "../structs/dicts.ts";
import { OPTION_KEYS, registrationArgs } from "./_on_options.ts";

/** Options of index handlers. */
export interface IndexOptions {
  /** The index name (default: the function name). */
  readonly id?: string;
  /** The registry to add to. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Passed back as `param`. */
  readonly param?: unknown;
  /** Label filters; objects that stop matching leave the index. */
  readonly labels?: MetaFilter;
  /** Annotation filters. */
  readonly annotations?: MetaFilter;
  /** Whole-object callback filter. */
  readonly when?: WhenCallback<ResourceContext>;
  /** A field the handler depends on. */
  readonly field?: FieldSpec;
  /** Value filter of `field` (default: present). */
  readonly value?: ValueFilter;
  /** Treatment of arbitrary errors. @default "ignored" */
  readonly errors?: ErrorsMode;
  /** Seconds an object is excluded after a temporary failure. @default 60 */
  readonly backoff?: number;
}

/**
 * An index handler function: returns `{key: value}` (or a Map), a value (key `null`), or nothing.
 * @typeParam S The spec type, or a typed object (see `TypedObject`).
 * @typeParam T The status type (ignored when `S` is a typed object).
 */
export type Indexing<S = Record<string, unknown>, T = Record<string, unknown>> = (
  context: ResourceContext<S, T>,
) => unknown;

/**
 * Registers an index handler.
 * @typeParam S The spec type, or a typed object (see `TypedObject`).
 * @typeParam T The status type (ignored when `S` is a typed object).
 * @param spec The resource(s) to index, or a typed resource constant.
 * @param optionsOrFn The options, or the function when there are no options.
 * @param maybeFn The function, when options are given.
 * @returns The function, unchanged.
 */
export function index<S = Record<string, unknown>, T = Record<string, unknown>>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: IndexOptions | Indexing<S, T>,
  maybeFn?: Indexing<S, T>,
): Indexing<S, T> {
  const { options, fn } = registrationArgs<IndexOptions, Indexing<S, T>>(
    { name: "on.index", keys: OPTION_KEYS["on.index"], resource: true },
    [spec, optionsOrFn, maybeFn, ...[...arguments].slice(3)],
  );
  const handler: IndexingHandler = {
    kind: "indexing",
    id: options.id ?? defaultHandlerId(fn as HandlerFn<never>),
    fn: fn as HandlerFn<never>,
    param: options.param,
    ...handlerFilters(options),
    errors: options.errors ?? "ignored",
    backoff: options.backoff,
  };
  (options.registry ?? getDefaultRegistry()).register(parseSelector(spec), handler);
  return fn;
}
