/**
 * Namespaces: children go into their parent's namespace.
 * @module
 */

import { handledObject } from "../../core/actions/handled_object.ts";
import { isMapping } from "../../core/structs/dicts.ts";
import type { KubeObjectLike } from "../../core/structs/typed.ts";
import { absent, collect, type KubeObjects, metadataField, metadataOf } from "./objects.ts";

/**
 * Options of {@link adjustNamespace}.
 *
 * @example Move into the parent's namespace unconditionally
 * ```ts
 * import type { NamespaceOptions } from "../hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", namespace: "team-a" } };
 * const options: NamespaceOptions = { owner: parent, forced: true };
 * ```
 */
export interface NamespaceOptions {
  /**
   * Where to take the namespace from when none is given explicitly (its `metadata.namespace`).
   * Default: the object being handled, inside a handler.
   */
  owner?: KubeObjectLike | undefined;
  /** Overwrite the namespace that objects already have. Default: `false`. */
  forced?: boolean | undefined;
}

/**
 * Puts every object into `namespace` (by default, the owner's namespace), unless the object
 * has a namespace already and `forced` is not set. With a cluster-scoped owner (no namespace)
 * and `forced`, the objects' namespaces are removed — aligned with the owner, as in Kopf;
 * without `forced`, nothing changes.
 *
 * @param objs The objects: one object or an iterable of them.
 * @param namespace The namespace; `undefined`/`null`: `metadata.namespace` of `options.owner`
 *   or of the object being handled.
 * @param options The owner (for the default namespace), `forced`.
 * @throws {TypeError} If neither a namespace nor an owner are given outside a handler, or an
 *   item is not a plain
 *   object, or its `metadata` has a wrong type.
 *
 * @example Explicit, or the parent's namespace
 * ```ts
 * import { adjustNamespace } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
 *
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Job", metadata: { namespace: "other" } }];
 * adjustNamespace(objs, "team-a");
 * // namespaces: "team-a", "other"
 *
 * const parent = { metadata: { name: "p", namespace: "default" } };
 * adjustNamespace(objs, undefined, { owner: parent, forced: true });
 * // namespaces: "default", "default"
 * ```
 */
export function adjustNamespace(
  objs: KubeObjects,
  namespace?: string | null,
  options: NamespaceOptions = {},
): void {
  let real: unknown = namespace;
  if (absent(namespace)) {
    const owner = options.owner ?? handledObject();
    if (owner === undefined) {
      throw new TypeError(
        "adjustNamespace(): pass the namespace explicitly, or an owner to take it from (or call it in a handler)",
      );
    }
    real = metadataField(owner, "namespace");
  }
  const forced = options.forced ?? false;
  for (const obj of collect(objs)) {
    const existing = isMapping(obj.metadata) ? obj.metadata.namespace : undefined;
    if (!forced && !absent(existing)) continue;
    if (absent(real)) {
      if (isMapping(obj.metadata)) delete obj.metadata.namespace;
    } else {
      metadataOf(obj).namespace = real;
    }
  }
}
