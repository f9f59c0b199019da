/**
 * What the observer (metrics, traces) is told about a handler run. (The handlers' contexts are
 * built by the one builder, `handlerContext()` in `../../scope/context.ts`.)
 * @module
 */

import type { HandlerInfo } from "../../../engines/observability/observers.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { resourceName } from "../../../structs/resources.ts";
import type { ResourceScope } from "../../scope/scope.ts";

/**
 * What the observer gets to know about a handler run.
 * @param scope The resource.
 * @param body The object.
 * @param id The handler's id.
 * @param kind The handler's kind.
 * @param retry The attempt's retry number.
 * @param cause The cause's reason, for resource-changing handlers.
 * @returns The description.
 */
export function handlerInfo(
  scope: Pick<ResourceScope, "resource">,
  body: KubeObject,
  id: string,
  kind: HandlerInfo["kind"],
  retry: number,
  cause?: string,
): HandlerInfo {
  const meta = body.metadata ?? {};
  return {
    resource: resourceName(scope.resource),
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    handler: id,
    kind,
    retry,
    cause,
  };
}
