/**
 * Registration of daemons and timers: per-object background tasks.
 *
 * @example A daemon and a timer
 * ```ts
 * import { daemon, timer } from "./spawning.ts";
 * daemon("kopfexamples", { cancellationTimeout: 5 }, async function monitor({ stopped, sleep, logger }) {
 *   while (!stopped.aborted) {
 *     logger.info("Checking something");
 *     await sleep(10);
 *   }
 * });
 * timer("kopfexamples", { interval: 60, idle: 10 }, function ping({ spec }) {
 *   return { seen: spec }; // → status.ping
 * });
 * ```
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { SpawnedContext } from "../engines/runners/daemons.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "../intents/filters.ts";
import {
  handlerFilters,
  type HandlerFn,
  handlerId,
  type SpawningHandler,
} from "../intents/handlers.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import type { FieldSpec } from "../structs/dicts.ts";
import type { StorableResult } from "../structs/results.ts";
import { OPTION_KEYS, registrationArgs } from "./_on_options.ts";

/** Options shared by daemons and timers. */
export interface SpawningOptions {
  /** Handler id (default: the function name). */
  readonly id?: string;
  /** The registry to add to. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Passed back as `param`. */
  readonly param?: unknown;
  /** Label filters; the task stops when they stop matching and restarts when they match again. */
  readonly labels?: MetaFilter;
  /** Annotation filters. */
  readonly annotations?: MetaFilter;
  /** Whole-object callback filter (re-evaluated on every event). */
  readonly when?: WhenCallback<SpawnedContext>;
  /** A field the task depends on (dotted or a path). */
  readonly field?: FieldSpec;
  /** Value filter of `field` (default: present). */
  readonly value?: ValueFilter;
  /** Treatment of arbitrary errors. @default "temporary" */
  readonly errors?: ErrorsMode;
  /** Overall timeout in seconds since the first attempt. */
  readonly timeout?: number;
  /** Maximum number of attempts. */
  readonly retries?: number;
  /** Seconds before retrying arbitrary errors. @default 60 */
  readonly backoff?: number;
  /** Seconds to wait after the object appears (or the operator starts) before the first run. */
  readonly initialDelay?: number;
}

/** Options of daemons. */
export interface DaemonOptions extends SpawningOptions {
  /** Seconds between the stop signal and the cancellation (`signal` abort). */
  readonly cancellationBackoff?: number;
  /** Seconds after the cancellation before the daemon is abandoned; none: wait forever. */
  readonly cancellationTimeout?: number;
  /** How often an exiting daemon without a timeout is re-checked, seconds. @default 60 */
  readonly cancellationPolling?: number;
}

/** Options of timers. */
export interface TimerOptions extends SpawningOptions {
  /** Seconds between runs (counted from the end of the previous run unless `sharp`). */
  readonly interval?: number;
  /** Align runs to a fixed grid of `interval` seconds. @default false */
  readonly sharp?: boolean;
  /** Run only after the object has been unchanged (essentially) for this many seconds. */
  readonly idle?: number;
}

/**
 * A daemon or timer function.
 * @typeParam S The spec type, or a typed object (see `TypedObject`).
 * @typeParam T The status type (ignored when `S` is a typed object).
 * @typeParam R Its result (stored in `status.<id>`); registrations check it is JSON (see
 *   `StorableResult`).
 */
export type Spawned<S = Record<string, unknown>, T = Record<string, unknown>, R = unknown> = (
  context: SpawnedContext<S, T>,
) => R;

function register(
  spawn: "daemon" | "timer",
  spec: ResourceSpec,
  options: DaemonOptions & TimerOptions,
  fn: Spawned<never, never>,
): void {
  if (spawn === "timer" && options.interval !== undefined && !(options.interval > 0)) {
    throw new RangeError(`A timer's interval must be positive, got ${options.interval}`);
  }
  const filters = handlerFilters(options);
  const handler: SpawningHandler = {
    kind: "spawning",
    spawn,
    id: handlerId(options.id, fn as HandlerFn<never>, filters.field),
    fn: fn as HandlerFn<never>,
    param: options.param,
    ...filters,
    errors: options.errors,
    timeout: options.timeout,
    retries: options.retries,
    backoff: options.backoff,
    initialDelay: options.initialDelay,
    cancellationBackoff: options.cancellationBackoff,
    cancellationTimeout: options.cancellationTimeout,
    cancellationPolling: options.cancellationPolling,
    interval: options.interval,
    sharp: options.sharp,
    idle: options.idle,
  };
  (options.registry ?? getDefaultRegistry()).register(parseSelector(spec), handler);
}

/**
 * Registers a daemon: a long-running function per object, started when the object appears (or
 * the operator starts) and stopped when it is deleted, stops matching, or the operator exits.
 * @typeParam S The spec type, or a typed object (see `TypedObject`).
 * @typeParam T The status type (ignored when `S` is a typed object).
 * @typeParam R The function's result, inferred: it must be JSON (see `StorableResult`).
 * @param spec The resource(s), or a typed resource constant.
 * @param optionsOrFn The options, or the function when there are no options.
 * @param maybeFn The function, when options are given.
 * @returns The function, unchanged.
 */
export function daemon<S = Record<string, unknown>, T = Record<string, unknown>, R = unknown>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: DaemonOptions | Spawned<S, T, StorableResult<R>>,
  maybeFn?: Spawned<S, T, StorableResult<R>>,
): Spawned<S, T, R> {
  const { options, fn } = registrationArgs<DaemonOptions, Spawned<S, T, R>>(
    { name: "on.daemon", keys: OPTION_KEYS["on.daemon"], resource: true },
    [spec, optionsOrFn, maybeFn, ...[...arguments].slice(3)],
  );
  register("daemon", spec, options, fn as Spawned<never, never>);
  return fn;
}

/**
 * Registers a timer: a function run periodically per object (`interval`), optionally only when
 * the object has been unchanged for a while (`idle`); without both, it runs once.
 * @typeParam S The spec type, or a typed object (see `TypedObject`).
 * @typeParam T The status type (ignored when `S` is a typed object).
 * @typeParam R The function's result, inferred: it must be JSON (see `StorableResult`).
 * @param spec The resource(s), or a typed resource constant.
 * @param optionsOrFn The options, or the function when there are no options.
 * @param maybeFn The function, when options are given.
 * @returns The function, unchanged.
 */
export function timer<S = Record<string, unknown>, T = Record<string, unknown>, R = unknown>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: TimerOptions | Spawned<S, T, StorableResult<R>>,
  maybeFn?: Spawned<S, T, StorableResult<R>>,
): Spawned<S, T, R> {
  const { options, fn } = registrationArgs<TimerOptions, Spawned<S, T, R>>(
    { name: "on.timer", keys: OPTION_KEYS["on.timer"], resource: true },
    [spec, optionsOrFn, maybeFn, ...[...arguments].slice(3)],
  );
  register("timer", spec, options, fn as Spawned<never, never>);
  return fn;
}
