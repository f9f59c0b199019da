/**
 * The parts of a handler's context that every resource handler of a cycle shares, and what the
 * observer (metrics, traces) is told about a handler run.
 * @module
 */

import type { Logger } from "../../../actions/loggers.ts";
import type { HandlerInfo } from "../../../engines/observability/observers.ts";
import type { ResourceContext } from "../../../intents/contexts.ts";
import { type KubeObject, objectFields } from "../../../structs/objects.ts";
import type { Patch } from "../../../structs/patches.ts";
import { resourceName } from "../../../structs/resources.ts";
import type { ObjectMemory, ProcessingDeps } from "./state.ts";

/** The operator's parts a handler context is made of. */
export type ContextDeps = Pick<
  ProcessingDeps,
  "resource" | "settings" | "signal" | "indices" | "client"
>;

/**
 * Builds the part of the context shared by all resource handlers.
 * @param deps The operator's parts the context shows.
 * @param memory What is remembered about the object (its memo).
 * @param body The object.
 * @param patch The cycle's patch, given to handlers as `patch`.
 * @param logger The handler's logger.
 * @param param The handler's `param`.
 * @param signal The attempt's signal; the operator's without it.
 * @returns The context.
 */
export function makeResourceContext(
  deps: ContextDeps,
  memory: ObjectMemory,
  body: KubeObject,
  patch: Patch,
  logger: Logger,
  param: unknown,
  signal: AbortSignal = deps.signal,
): ResourceContext {
  return {
    ...objectFields(body),
    resource: deps.resource,
    patch,
    logger,
    memo: memory.memo,
    param,
    settings: deps.settings,
    signal: signal === deps.signal ? signal : AbortSignal.any([signal, deps.signal]),
    indices: deps.indices ?? {},
    client: deps.client,
    // As in Kopf, indices are also passed by their names and win over built-in names.
    ...deps.indices,
  };
}

/**
 * What the observer gets to know about a handler run.
 * @param deps The resource.
 * @param body The object.
 * @param id The handler's id.
 * @param kind The handler's kind.
 * @param retry The attempt's retry number.
 * @param cause The cause's reason, for resource-changing handlers.
 * @returns The description.
 */
export function handlerInfo(
  deps: Pick<ProcessingDeps, "resource">,
  body: KubeObject,
  id: string,
  kind: HandlerInfo["kind"],
  retry: number,
  cause?: string,
): HandlerInfo {
  const meta = body.metadata ?? {};
  return {
    resource: resourceName(deps.resource),
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    handler: id,
    kind,
    retry,
    cause,
  };
}
