/**
 * Adoption: all of the hierarchy functions at once, for the usual case of a parent's children.
 * @module
 */

import type { KubeObjectLike } from "../../core/structs/typed.ts";
import { label } from "./labels.ts";
import { harmonizeNaming, resolveName } from "./naming.ts";
import { adjustNamespace } from "./namespaces.ts";
import { collect, type KubeObjects, type NestedFields } from "./objects.ts";
import { appendOwnerReference, buildOwnerReference, requireOwner, requireUid } from "./owners.ts";

/**
 * Options of {@link adopt}: passed on to the functions that support them.
 *
 * @example Single child with the parent's exact name and labelled pods
 * ```ts
 * import type { AdoptOptions } from "../hierarchies.ts";
 *
 * const options: AdoptOptions = { strict: true, forced: true, nested: "spec.template" };
 * ```
 */
export interface AdoptOptions {
  /** Overwrite existing names, namespaces and labels. Default: `false`. */
  forced?: boolean | undefined;
  /** Use the owner's name as the exact name instead of a prefix. Default: `false`. */
  strict?: boolean | undefined;
  /** Also label these nested structures, if present. */
  nested?: NestedFields | null | undefined;
}

/**
 * Makes the objects children of `owner`: appends the owner reference (controller, blocking
 * owner deletion), then names them after the owner (see {@link harmonizeNaming}), puts them
 * into the owner's namespace (see {@link adjustNamespace}), and copies the owner's labels (see
 * {@link label}). `forced`, `strict` and `nested` are passed to the functions that support them.
 *
 * The owner defaults to the object being handled, as in Kopf: `adopt(child)` in a handler. It
 * is validated (uid and name) before any object is modified.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent, as read from the API (it must have `metadata.uid` and
 *   `metadata.name`); default: the object being handled, inside a handler.
 * @param options `forced`, `strict`, `nested`.
 * @throws {TypeError} If there is no owner (none given outside a handler), or it has no uid or
 *   no name, or an item is not a plain object, or has wrongly typed metadata.
 *
 * @example Adopt a Job and a Deployment
 * ```ts
 * import { adopt } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
 *
 * const parent: KubeObject = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: {
 *     name: "kopf-example-1",
 *     namespace: "default",
 *     uid: "4a15f2c2-d558-4b6e-8cf0-00585d823511",
 *     labels: { somelabel: "somevalue" },
 *   },
 * };
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: {} } }];
 * adopt(objs, parent, { strict: true, forced: true, nested: "spec.template" });
 * // each: metadata: {ownerReferences: [{controller: true, blockOwnerDeletion: true,
 * //   apiVersion: "kopf.dev/v1", kind: "KopfExample", name: "kopf-example-1", uid: "4a15…"}],
 * //   name: "kopf-example-1", namespace: "default", labels: {somelabel: "somevalue"}}
 * ```
 */
export function adopt(
  objs: KubeObjects,
  owner?: KubeObjectLike | null,
  options: AdoptOptions = {},
): void {
  owner = requireOwner(owner, "adopt");
  requireUid(buildOwnerReference(owner), "adopt");
  const name = resolveName(undefined, owner);
  const { forced, strict, nested } = options;
  const list = collect(objs); // flattened once: one-shot iterables serve all four steps
  collect(list, nested); // validate the nested fields too before modifying anything
  appendOwnerReference(list, owner);
  harmonizeNaming(list, name, { forced, strict });
  adjustNamespace(list, undefined, { owner, forced });
  label(list, undefined, { owner, forced, nested });
}
