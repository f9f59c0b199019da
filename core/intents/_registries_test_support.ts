/**
 * Shared scaffolding of the registries' unit tests (`registries*_test.ts`): the KopfExample
 * resource and its selector, object bodies and their essence, changing causes detected as the
 * reactor would, and a recording context builder for `matchChangingHandlers()`.
 * Not part of the public API.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import { type ChangingCause, detectChangingCause } from "./causes.ts";
import type { ChangingHandler } from "./handlers.ts";
import type { OperatorRegistry } from "./registries.ts";

/** The finalizer the causes are detected with. */
export const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

/** The selector the tests register their handlers for (KopfExamples by plural). */
export const SPEC = "kopfexamples";

/** The KopfExample resource, as discovery would describe it. */
export const KEX: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  namespaced: true,
  verbs: ["list", "watch", "patch"],
  shortNames: ["kex"],
  categories: [],
  subresources: ["status"],
  preferred: true,
};

/**
 * A KopfExample "ns/kex1" (uid "u1").
 * @param spec Its spec.
 * @param meta Metadata merged over the name, namespace and uid.
 */
export function obj(
  spec: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "kex1", namespace: "ns", uid: "u1", ...meta },
    spec,
  } as KubeObject;
}

/**
 * The essence of a body: its spec, labels and annotations (what the last-handled state keeps).
 * @param body The object.
 */
export function essence(body: KubeObject): Record<string, unknown> {
  const meta = body.metadata ?? {};
  const result: Record<string, unknown> = {};
  if (body.spec !== undefined) result.spec = body.spec;
  const m: Record<string, unknown> = {};
  if (meta.labels) m.labels = meta.labels;
  if (meta.annotations) m.annotations = meta.annotations;
  if (Object.keys(m).length) result.metadata = m;
  return result;
}

/**
 * A cause detected as the reactor would, from the old essence and the current body.
 * @param body The current object.
 * @param old The last-handled essence (`undefined`: never handled).
 * @param initial Whether it is the first sight of the object in this operator run.
 * @param deleted Whether the object is gone from the cluster.
 */
export function causeOf(
  body: KubeObject,
  old: Record<string, unknown> | undefined,
  initial = false,
  deleted = false,
): ChangingCause {
  return detectChangingCause({
    body,
    deleted,
    finalizer: FINALIZER,
    old,
    new: essence(body),
    initial,
  });
}

/** The ids of the handlers `contextFor` built a context for, in order (tests may empty it). */
export const contexts: string[] = [];

/**
 * A context builder for `matchChangingHandlers()` that records the handler's id in `contexts`.
 * @param h The handler.
 */
export const contextFor = (h: ChangingHandler) => {
  contexts.push(h.id);
  return { id: h.id, marker: "ctx" };
};

/**
 * The changing handlers a registry holds for KopfExamples, in declaration order.
 * @param registry The registry.
 */
export function changing(registry: OperatorRegistry): ChangingHandler[] {
  return registry.handlersFor(KEX).changing;
}

/**
 * The ids of handlers, in order.
 * @param handlers The handlers.
 */
export function ids(handlers: readonly { id: string }[]): string[] {
  return handlers.map((h) => h.id);
}
