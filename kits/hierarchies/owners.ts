/**
 * Owner references: children point to their parent, so that Kubernetes deletes them with it.
 * @module
 */

import { handledObject } from "../../core/actions/handled_object.ts";
import { isMapping } from "../../core/structs/dicts.ts";
import type { OwnerReference } from "../../core/structs/objects.ts";
import type { KubeObjectLike } from "../../core/structs/typed.ts";
import { absent, collect, describe, type KubeObjects, metadataOf } from "./objects.ts";

/**
 * Options of {@link buildOwnerReference} and {@link appendOwnerReference}.
 *
 * @example A non-controlling owner
 * ```ts
 * import type { OwnerReferenceOptions } from "../hierarchies.ts";
 *
 * const options: OwnerReferenceOptions = { controller: false, blockOwnerDeletion: false };
 * ```
 */
export interface OwnerReferenceOptions {
  /**
   * The `controller` flag: whether the owner is the managing controller of the child (only one
   * owner may be). `null` omits the field. Default: `true`.
   */
  controller?: boolean | null | undefined;
  /**
   * The `blockOwnerDeletion` flag: with foreground deletion, the owner stays until this child is
   * deleted. `null` omits the field. Default: `true`.
   */
  blockOwnerDeletion?: boolean | null | undefined;
}

/**
 * Builds the owner reference that links children to `body` as their parent — for
 * `metadata.ownerReferences` of the children, see Kubernetes' garbage collection. As in Kopf,
 * fields that `body` lacks (e.g. `uid` before it is created) are omitted rather than invented,
 * hence the partial type; the API server rejects incomplete references.
 *
 * @param body The owner (parent) object, usually as read from the API.
 * @param options The `controller` and `blockOwnerDeletion` flags (both `true` by default).
 * @returns `{controller, blockOwnerDeletion, apiVersion, kind, name, uid}` — a new object.
 *
 * @example Reference a parent
 * ```ts
 * import { buildOwnerReference } from "../hierarchies.ts";
 *
 * const parent = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: { name: "kopf-example-1", uid: "6b931859-5d50-4b5c-956b-ea2fed0d1058" },
 * };
 * const ref = buildOwnerReference(parent, { blockOwnerDeletion: false });
 * // {controller: true, blockOwnerDeletion: false, apiVersion: "kopf.dev/v1",
 * //  kind: "KopfExample", name: "kopf-example-1", uid: "6b931859-…"}
 * ```
 */
export function buildOwnerReference(
  body: KubeObjectLike,
  options: OwnerReferenceOptions = {},
): Partial<OwnerReference> {
  const meta = isMapping(body.metadata) ? body.metadata : {};
  const fields: Record<string, unknown> = {
    controller: options.controller === undefined ? true : options.controller,
    blockOwnerDeletion: options.blockOwnerDeletion === undefined
      ? true
      : options.blockOwnerDeletion,
    apiVersion: body.apiVersion,
    kind: body.kind,
    name: meta.name,
    uid: meta.uid,
  };
  const ref: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) ref[key] = value;
  }
  return ref as Partial<OwnerReference>;
}

/**
 * Appends an owner reference to `owner` to every object, unless the object already has a
 * reference with the owner's uid (then it stays as it is, even if its flags differ): calling
 * it again is harmless. Each object gets its own copy of the reference.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent, as read from the API (it must have `metadata.uid`); default: the
 *   object being handled, inside a handler.
 * @param options The `controller` and `blockOwnerDeletion` flags (both `true` by default).
 * @throws {TypeError} If there is no owner (none given outside a handler) or it has no
 *   `metadata.uid`, or an item is not a plain object, or its `metadata` /
 *   `metadata.ownerReferences` has a wrong type.
 *
 * @example Own several children
 * ```ts
 * import { appendOwnerReference } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
 *
 * const parent = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p", uid: "123" } };
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
 * appendOwnerReference(objs, parent);
 * appendOwnerReference(objs, parent); // no duplicates
 * appendOwnerReference(objs, { ...parent, metadata: { name: "q", uid: "456" } }, {
 *   controller: false,
 * });
 * ```
 */
export function appendOwnerReference(
  objs: KubeObjects,
  owner?: KubeObjectLike | null,
  options: OwnerReferenceOptions = {},
): void {
  const ref = buildOwnerReference(requireOwner(owner, "appendOwnerReference"), options);
  const uid = requireUid(ref, "append");
  for (const obj of collect(objs)) {
    const refs = ownerReferencesOf(obj, true);
    if (!refs.some((existing) => isMapping(existing) && existing.uid === uid)) {
      refs.push({ ...ref });
    }
  }
}

/**
 * Removes the references to `owner` (matched by its uid) from every object, if there are any;
 * the array itself is modified in place. Objects without references are left untouched.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent (it must have `metadata.uid`); default: the object being handled,
 *   inside a handler.
 * @throws {TypeError} If there is no owner (none given outside a handler) or it has no
 *   `metadata.uid`, or an item is not a plain object, or its `metadata` /
 *   `metadata.ownerReferences` has a wrong type.
 *
 * @example Orphan a child
 * ```ts
 * import { appendOwnerReference, removeOwnerReference } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
 *
 * const parent = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p", uid: "123" } };
 * const child: KubeObject = { kind: "Job" };
 * appendOwnerReference(child, parent);
 * removeOwnerReference(child, parent);
 * // child.metadata.ownerReferences: []
 * ```
 */
export function removeOwnerReference(objs: KubeObjects, owner?: KubeObjectLike | null): void {
  const ref = buildOwnerReference(requireOwner(owner, "removeOwnerReference"));
  const uid = requireUid(ref, "remove");
  for (const obj of collect(objs)) {
    const refs = ownerReferencesOf(obj, false);
    if (refs === undefined) continue;
    const kept = refs.filter((ref) => !(isMapping(ref) && ref.uid === uid));
    if (kept.length !== refs.length) refs.splice(0, refs.length, ...kept);
  }
}

/** `metadata.ownerReferences`, created as `[]` if absent and `create` is set. */
function ownerReferencesOf(obj: Record<string, unknown>, create: true): unknown[];
function ownerReferencesOf(obj: Record<string, unknown>, create: false): unknown[] | undefined;
function ownerReferencesOf(obj: Record<string, unknown>, create: boolean): unknown[] | undefined {
  if (!create && absent(obj.metadata)) return undefined;
  const meta = metadataOf(obj);
  const refs = meta.ownerReferences;
  if (absent(refs)) {
    if (!create) return undefined;
    const fresh: unknown[] = [];
    meta.ownerReferences = fresh;
    return fresh;
  }
  if (!Array.isArray(refs)) {
    throw new TypeError(`The field ownerReferences is not an array: ${describe(refs)}`);
  }
  return refs;
}

/** The explicit owner, else the object being handled (Kopf's implicit owner). */
export function requireOwner(
  owner: KubeObjectLike | null | undefined,
  what: string,
): KubeObjectLike {
  const real = owner ?? handledObject();
  if (real !== undefined) return real;
  throw new TypeError(
    `${what}(): pass the owner explicitly, or call it in a handler (its object is the default)`,
  );
}

/** The reference's uid: without one, the API server would reject or mismatch the reference. */
export function requireUid(ref: Partial<OwnerReference>, what: string): string {
  if (typeof ref.uid === "string" && ref.uid !== "") return ref.uid;
  throw new TypeError(
    `Cannot ${what} an owner reference: the owner has no metadata.uid (read it from the API)`,
  );
}
