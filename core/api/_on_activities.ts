/**
 * Registration of operator-level handlers (`on.startup`, `on.cleanup`, `on.login`, `on.probe`):
 * they belong to the operator, not to any resource.
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { ActivityContext } from "../intents/contexts.ts";
import {
  type Activity,
  type ActivityHandler,
  defaultHandlerId,
  type HandlerFn,
} from "../intents/handlers.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { OPTION_KEYS, registrationArgs } from "./_on_options.ts";

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

/**
 * A probe handler function (`on.probe`): its result is served as JSON by the liveness endpoint.
 * @typeParam R The result type.
 */
export type Probing<R = unknown> = (context: ActivityContext) => R | Promise<R>;

/** The signature of `on.startup`, `on.cleanup`, `on.login` and `on.probe`. */
export type ActivityRegistrar = (
  optionsOrFn: ActivityOptions | Activating,
  maybeFn?: Activating,
) => Activating;

/** The registration function of one activity. */
export function activityRegistrar(activity: Activity): ActivityRegistrar {
  const call = { name: `on.${activity}`, keys: OPTION_KEYS["on.startup"], resource: false };
  return (...args: unknown[]) => {
    const { options, fn } = registrationArgs<ActivityOptions, Activating>(call, args);
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
  };
}
