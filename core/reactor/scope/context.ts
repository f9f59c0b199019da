/**
 * The one builder of handler contexts: resource-changing handlers and their sub-handlers,
 * raw-event handlers, daemons and timers, index handlers and reconcile handlers all get the
 * object's fields and the same operator parts from {@link handlerContext}; each kind adds its
 * own fields on top.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { Memo, ResourceContext } from "../../intents/contexts.ts";
import { type KubeObject, objectFields } from "../../structs/objects.ts";
import type { Patch } from "../../structs/patches.ts";
import type { ResourceScope } from "./scope.ts";

/** The operator's parts a handler context shows. */
export type ContextScope = Pick<
  ResourceScope,
  "resource" | "settings" | "signal" | "indexers" | "client"
>;

/** What a handler context shows of the object and of the handler's run. */
export interface ContextParts {
  /** The object. */
  readonly body: KubeObject;
  /** The object's memo. */
  readonly memo: Memo;
  /** Collects the handler's changes to the object, given to handlers as `patch`. */
  readonly patch: Patch;
  /** The handler's logger. */
  readonly logger: Logger;
  /** The handler's `param`. */
  readonly param: unknown;
  /** The attempt's signal, followed with the scope's; the scope's without it. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Builds a handler's context: the object's fields, the resource, `patch`, `logger`, `memo`,
 * `param`, `settings`, `signal`, `indices`, `client`, then the kind's own fields; the indices
 * also by their names, winning over the names before them (as in Kopf); last the fields that
 * win over the indices' names.
 * @param scope The operator's parts the context shows.
 * @param parts The object, its memo, the handler's patch, logger, param and signal.
 * @param own The kind's own fields that an index of the same name hides (reconcile's).
 * @param over The kind's own fields that hide an index of the same name (a cause's).
 * @returns The context.
 */
export function handlerContext<
  Own extends object = Record<never, never>,
  Over extends object = Record<never, never>,
>(
  scope: ContextScope,
  parts: ContextParts,
  own?: Own,
  over?: Over,
): ResourceContext & Own & Over {
  const signal = parts.signal ?? scope.signal;
  const indices = scope.indexers.indices;
  return {
    ...objectFields(parts.body),
    resource: scope.resource,
    patch: parts.patch,
    logger: parts.logger,
    memo: parts.memo,
    param: parts.param,
    settings: scope.settings,
    signal: signal === scope.signal ? signal : AbortSignal.any([signal, scope.signal]),
    indices,
    client: scope.client,
    ...own,
    // As in Kopf, indices are also passed by their names and win over built-in names.
    ...indices,
    ...over,
  } as ResourceContext & Own & Over;
}
