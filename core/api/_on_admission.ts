/**
 * Registration of admission handlers (`on.validate`, `on.mutate`), served by the operator's
 * webhook server.
 * @module
 */

import type { AdmissionContext } from "../intents/contexts.ts";
import {
  handlerFilters,
  type HandlerFn,
  handlerId,
  type WebhookHandler,
  type WebhookKind,
} from "../intents/handlers.ts";
import { getDefaultRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";
import { type Operation, OPERATIONS } from "../structs/admission.ts";
import {
  type Default,
  type HandlerOptions,
  OPTION_KEYS,
  registrationArgs,
  validateFilters,
} from "./_on_options.ts";

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

/** The signature of `on.validate` and `on.mutate`. */
export type AdmissionRegistrar = <S = Default, T = Default>(
  spec: ResourceSpec | TypedResource<S>,
  optionsOrFn: AdmissionOptions<AdmissionContext<S, T>> | Admitting<S, T>,
  maybeFn?: Admitting<S, T>,
) => Admitting<S, T>;

/** The registration function of one webhook kind. */
export function admissionRegistrar(kind: WebhookKind): AdmissionRegistrar {
  const call = {
    name: kind === "validating" ? "on.validate" : "on.mutate",
    keys: OPTION_KEYS["on.validate"],
    resource: true,
    refused: Object.fromEntries(
      ["errors", "timeout", "retries", "backoff"].map((key) => [
        key,
        `Admission handlers are never retried: '${key}' is not accepted`,
      ]),
    ),
  };
  return (<S, T>(...args: unknown[]): Admitting<S, T> => {
    const { options, fn } = registrationArgs<AdmissionOptions<unknown>, HandlerFn<never>>(
      call,
      args,
    );
    registerWebhook(kind, args[0] as ResourceSpec, options, fn);
    return fn as Admitting<S, T>;
  }) as AdmissionRegistrar;
}

function registerWebhook(
  kind: WebhookKind,
  spec: ResourceSpec,
  options: AdmissionOptions<unknown>,
  fn: HandlerFn<never>,
): void {
  validateFilters(options);
  if (options.operation !== undefined && options.operations !== undefined) {
    throw new TypeError("Give either `operations` or the deprecated `operation`, not both");
  }
  const operations = options.operation !== undefined ? [options.operation] : options.operations;
  for (const operation of operations ?? []) {
    if (!OPERATIONS.includes(operation)) {
      throw new TypeError(`Unknown operation '${operation}'; use ${OPERATIONS.join(", ")}`);
    }
  }
  const filters = handlerFilters(options);
  const handler: WebhookHandler = {
    kind: "webhook",
    webhook: kind,
    id: handlerId(options.id, fn, filters.field),
    fn,
    param: options.param,
    ...filters,
    operations: operations?.length ? [...operations] : undefined,
    subresource: options.subresource ?? undefined,
    persistent: Boolean(options.persistent),
    sideEffects: Boolean(options.sideEffects),
    ignoreFailures: Boolean(options.ignoreFailures),
  };
  (options.registry ?? getDefaultRegistry()).registerWebhook(parseSelector(spec), handler);
}
