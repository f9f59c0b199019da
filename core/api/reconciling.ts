/**
 * Registration of level-based reconcile handlers: `on.reconcile` (also exported as `reconcile`).
 * See docs/reconcile.md for when to use them instead of cause handlers.
 *
 * @example A parent that owns a ConfigMap
 * ```ts
 * import { reconcile } from "./reconciling.ts";
 * reconcile("kopfexamples", { owns: ["configmaps"] }, async (ctx) => {
 *   await ctx.apply({
 *     apiVersion: "v1",
 *     kind: "ConfigMap",
 *     metadata: {
 *       name: `${ctx.name}-settings`,
 *       ownerReferences: [{
 *         apiVersion: "kopf.dev/v1", kind: "KopfExample", name: ctx.name!, uid: ctx.uid!,
 *         controller: true, blockOwnerDeletion: true,
 *       }],
 *     },
 *     data: { field: String(ctx.spec.field ?? "") },
 *   });
 * });
 * ```
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import { defaultHandlerId, handlerFilters, type HandlerFn } from "../intents/handlers.ts";
import type {
  ObjectKey,
  ReconcileContext,
  ReconcileResult,
  ReconcilingHandler,
} from "../intents/reconciliation.ts";
import { getDefaultRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import type { KubeObject } from "../structs/objects.ts";
import { type HandlerOptions, OPTION_KEYS, registrationArgs } from "./_on_options.ts";

/** A relation to watch besides ownership (see {@link ReconcileOptions.watches}). */
export interface WatchesEntry {
  /** The resource to watch (a name, `[group, version, name]` or selector fields). */
  readonly resource: ResourceSpec;
  /** The objects to reconcile when one of the watched objects changes or goes. */
  readonly map: (object: KubeObject) => Iterable<ObjectKey> | ObjectKey | null | undefined;
}

/** Options of {@link reconcile}. */
export interface ReconcileOptions<C = never> extends HandlerOptions<C> {
  /**
   * Resources the reconciled objects own: a change or deletion of an object whose controller
   * owner reference points to a reconciled object reconciles that object.
   * @default []
   */
  readonly owns?: readonly ResourceSpec[];
  /** Other relations: changes of these objects reconcile the objects `map` names. @default [] */
  readonly watches?: readonly WatchesEntry[];
  /**
   * Handle deletion: a finalizer (`true`: `reconcile.kopf.dev/<id>`, or a name) is added before
   * the first reconcile; a deleted object is reconciled with `ctx.deleting` until the handler
   * returns without error, then the finalizer goes. Without it, deletion is not seen.
   * @default false
   */
  readonly finalizer?: boolean | string;
  /** Reconcile every object every this many seconds, changed or not. @default none */
  readonly resync?: number;
  /** Also reconcile when only `status` changed. @default false */
  readonly statusChanges?: boolean;
  /** The field manager of `ctx.apply`. @default "kopf" */
  readonly fieldManager?: string;
  /** How many objects are reconciled at once (one object is never reconciled twice at once). @default 4 */
  readonly concurrency?: number;
  /** Treatment of arbitrary errors. @default "temporary" (retried with backoff 5 ms → 1,000 s) */
  readonly errors?: ErrorsMode;
  /** Seconds before retrying arbitrary errors. @default exponential backoff per object */
  readonly backoff?: number;
  /** Attempts before giving up until the next trigger. @default unlimited */
  readonly retries?: number;
}

/** A reconcile handler function. */
export type Reconciling<S, T> = (
  context: ReconcileContext<S, T>,
) => ReconcileResult | Promise<ReconcileResult>;

/**
 * Registers a level-based reconcile handler: "make the world match this object". It runs for
 * every object at start, after every change of the object (but its status), of the objects it
 * `owns`, of the objects `watches` relate to it, and every `resync` seconds; never twice at
 * once for one object; a burst of changes coalesces into few runs. Return `{ requeueAfter }` to
 * be called again later. Children are best stated with `ctx.apply` (server-side apply) and
 * read with `ctx.cache` (no API request).
 *
 * @param spec The resource(s) to reconcile.
 * @param optionsOrFn The options, or the function when there are no options.
 * @param maybeFn The function, when options are given.
 * @returns The function, unchanged.
 * @throws {TypeError} for a non-positive `resync` or `concurrency`, or a `watches` entry without `map`.
 */
export function reconcile<S = Record<string, unknown>, T = Record<string, unknown>>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: ReconcileOptions<ReconcileContext<S, T>> | Reconciling<S, T>,
  maybeFn?: Reconciling<S, T>,
): Reconciling<S, T> {
  const { options, fn } = registrationArgs<ReconcileOptions<unknown>, Reconciling<S, T>>(
    { name: "on.reconcile", keys: OPTION_KEYS["on.reconcile"], resource: true },
    [spec, optionsOrFn, maybeFn, ...[...arguments].slice(3)],
  );
  if (options.resync !== undefined && !(options.resync > 0)) {
    throw new TypeError(
      `on.reconcile(): resync must be a positive number of seconds, got ${options.resync}`,
    );
  }
  const concurrency = options.concurrency ?? 4;
  if (!(concurrency >= 1)) {
    throw new TypeError(`on.reconcile(): concurrency must be at least 1, got ${concurrency}`);
  }
  for (const entry of options.watches ?? []) {
    if (typeof entry?.map !== "function") {
      throw new TypeError("on.reconcile(): each watches entry needs a resource and a map function");
    }
  }
  const filters = handlerFilters(options);
  const id = options.id ?? defaultHandlerId(fn as HandlerFn<never>, filters.field);
  const finalizer = options.finalizer === true
    ? `reconcile.kopf.dev/${id.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 63)}`
    : typeof options.finalizer === "string" && options.finalizer
    ? options.finalizer
    : undefined;
  const handler: ReconcilingHandler = {
    kind: "reconciling",
    id,
    fn: fn as HandlerFn<never>,
    param: options.param,
    ...filters,
    errors: options.errors,
    backoff: options.backoff,
    retries: options.retries,
    owns: (options.owns ?? []).map(parseSelector),
    watches: (options.watches ?? []).map((w) => ({
      selector: parseSelector(w.resource),
      map: w.map,
    })),
    finalizer,
    resync: options.resync,
    statusChanges: Boolean(options.statusChanges),
    fieldManager: options.fieldManager ?? "kopf",
    concurrency,
  };
  (options.registry ?? getDefaultRegistry()).registerReconciler(parseSelector(spec), handler);
  return fn;
}
