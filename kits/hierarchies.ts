/**
 * Hierarchies: prepare children objects before they are created, so that they belong to their
 * parent — owner references (for Kubernetes' cascaded deletion), the parent's namespace, a name
 * derived from the parent's name, and the parent's labels (also on nested pod templates).
 *
 * A port of Kopf's `kopf.adopt()`, `kopf.label()`, `kopf.append_owner_reference()` & co. All
 * functions modify plain JSON objects ({@link KubeObject}) in place and return nothing; they
 * accept one object, or an array (any iterable, nested to any depth) of objects, where `null`
 * and `undefined` items are skipped. Nothing is sent to the API: create the children afterwards
 * with any client.
 *
 * The owner (the parent's body, as read from the API, with its `metadata.uid`) is optional, as
 * in Kopf: inside a resource handler (create, update, delete, resume, field, event, daemon,
 * timer, index, admission, and their sub-handlers) it defaults to the object being handled, so
 * `adopt(child)` is enough. Pass it explicitly for anything else (e.g. a grandparent); outside a
 * handler, functions that need an owner and get none throw a `TypeError`. Where Kopf reads the
 * handler's labels, name or namespace, the `owner` option names another object to read them from.
 *
 * @example Adopt a child in a creation handler
 * ```ts
 * import { adopt } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const parent: KubeObject = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: { name: "kopf-example-1", namespace: "default", uid: "6b93…", labels: { app: "x" } },
 * };
 * const pod: KubeObject = { apiVersion: "v1", kind: "Pod", spec: { containers: [] } };
 * adopt(pod, parent);
 * // pod.metadata: {ownerReferences: [{…, uid: "6b93…"}], generateName: "kopf-example-1-",
 * //                namespace: "default", labels: {app: "x"}}
 * ```
 * @module
 */

export type { FieldSpec } from "../core/structs/dicts.ts";
export type { KubeObject, ObjectMeta, OwnerReference } from "../core/structs/objects.ts";
export type { KubeObjectLike } from "../core/structs/typed.ts";
export { adopt, type AdoptOptions } from "./hierarchies/adopting.ts";
export { label, type LabelOptions } from "./hierarchies/labels.ts";
export { harmonizeNaming, type NamingOptions } from "./hierarchies/naming.ts";
export { adjustNamespace, type NamespaceOptions } from "./hierarchies/namespaces.ts";
export type { KubeObjects, NestedFields } from "./hierarchies/objects.ts";
export {
  appendOwnerReference,
  buildOwnerReference,
  type OwnerReferenceOptions,
  removeOwnerReference,
} from "./hierarchies/owners.ts";
