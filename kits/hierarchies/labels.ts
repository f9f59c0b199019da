/**
 * Labels: children get explicit labels or their parent's, also on nested pod templates.
 * @module
 */

import { handledObject } from "../../core/actions/handled_object.ts";
import { isMapping } from "../../core/structs/dicts.ts";
import type { KubeObjectLike } from "../../core/structs/typed.ts";
import {
  collect,
  type KubeObjects,
  mappingField,
  metadataField,
  metadataOf,
  type NestedFields,
  setKey,
} from "./objects.ts";

/**
 * Options of {@link label}.
 *
 * @example Copy the parent's labels, also into the pod template
 * ```ts
 * import type { LabelOptions } from "../hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", labels: { app: "demo" } } };
 * const options: LabelOptions = { owner: parent, nested: "spec.template", forced: true };
 * ```
 */
export interface LabelOptions {
  /**
   * Where to take the labels from when none are given explicitly (its `metadata.labels`).
   * Default: the object being handled, inside a handler.
   */
  owner?: KubeObjectLike | undefined;
  /** Overwrite labels that the objects already have. Default: `false` (existing values stay). */
  forced?: boolean | undefined;
  /** Also label these nested structures, if present (absent ones are not created). */
  nested?: NestedFields | null | undefined;
}

/**
 * Adds labels to every object (and to its `nested` structures that exist). Labels that an
 * object already has keep their values unless `forced`.
 *
 * Without explicit labels (`undefined` or `null`), the labels of `options.owner` are copied,
 * or (as in Kopf) those of the object being handled. An empty `{}` (or an owner without
 * labels) changes nothing. A `null` label value is stored as is (in a merge-patch, it removes
 * the label).
 *
 * @param objs The objects: one object or an iterable of them.
 * @param labels The labels to add; default: the owner's labels.
 * @param options The owner (for the default labels), `forced`, `nested`.
 * @throws {TypeError} If neither labels nor an owner are given outside a handler, or an item or
 *   nested structure
 *   is not a plain object, or its `metadata` / `metadata.labels` has a wrong type.
 *
 * @example Explicit labels, also for the pod template
 * ```ts
 * import { label } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
 *
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: {} } }];
 * label(objs, { label1: "value1" }, { nested: "spec.template" });
 * // [{kind: "Job", metadata: {labels: {label1: "value1"}}},
 * //  {kind: "Deployment", metadata: {labels: {label1: "value1"}},
 * //   spec: {template: {metadata: {labels: {label1: "value1"}}}}}]
 * ```
 *
 * @example The parent's labels, overwriting
 * ```ts
 * import { label } from "../hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", labels: { somelabel: "somevalue" } } };
 * const child = { kind: "Job", metadata: { labels: { somelabel: "other" } } };
 * label(child, undefined, { owner: parent, forced: true });
 * // child.metadata.labels: {somelabel: "somevalue"}
 * ```
 */
export function label(
  objs: KubeObjects,
  labels?: Readonly<Record<string, string | null>> | null,
  options: LabelOptions = {},
): void {
  let source: Readonly<Record<string, unknown>>;
  if (labels !== undefined && labels !== null) {
    source = labels;
  } else {
    const owner = options.owner ?? handledObject();
    if (owner === undefined) {
      throw new TypeError(
        "label(): pass the labels explicitly, or an owner to copy them from (or call it in a handler)",
      );
    }
    const ownLabels = metadataField(owner, "labels");
    source = isMapping(ownLabels) ? ownLabels : {};
  }
  const entries = Object.entries(source);
  const forced = options.forced ?? false;
  for (const obj of collect(objs, options.nested)) {
    if (entries.length === 0) continue;
    const meta = metadataOf(obj);
    const target = mappingField(meta, "labels");
    for (const [key, value] of entries) {
      if (forced || !Object.hasOwn(target, key)) setKey(target, key, value);
    }
  }
}
