/**
 * Shapes of Kubernetes objects as plain JSON: just enough typing for the fields the framework
 * reads, with everything else kept as `unknown`.
 * @module
 */

import { isMapping } from "./dicts.ts";

/** An object's labels as handlers see them (`context.labels`): names to values, read-only. */
export type Labels = Readonly<Record<string, string>>;

/** An object's annotations as handlers see them (`context.annotations`), read-only. */
export type Annotations = Readonly<Record<string, string>>;

/** An owner reference in `metadata.ownerReferences`. */
export interface OwnerReference {
  /** API version of the owner. */
  apiVersion: string;
  /** Kind of the owner. */
  kind: string;
  /** Name of the owner. */
  name: string;
  /** UID of the owner. */
  uid: string;
  /** Whether the owner is the managing controller. */
  controller?: boolean;
  /** Whether the owner cannot be deleted before this object (foreground deletion). */
  blockOwnerDeletion?: boolean;
}

/** The standard `metadata` of an object. */
export interface ObjectMeta {
  /** Object name. */
  name?: string;
  /** Prefix for server-generated names. */
  generateName?: string;
  /** Namespace of namespaced objects. */
  namespace?: string;
  /** Unique id assigned by the server. */
  uid?: string;
  /** Opaque version for optimistic concurrency and watch resumption. */
  resourceVersion?: string;
  /** Incremented on every change of the spec (not of status or metadata). */
  generation?: number;
  /** Creation time, RFC 3339. */
  creationTimestamp?: string;
  /** Set when deletion was requested; the object waits for its finalizers. */
  deletionTimestamp?: string;
  /** Labels. */
  labels?: Record<string, string>;
  /** Annotations. */
  annotations?: Record<string, string>;
  /** Finalizers blocking deletion. */
  finalizers?: string[];
  /** Owners of this object. */
  ownerReferences?: OwnerReference[];
  /** Any other metadata field. */
  [field: string]: unknown;
}

/** Any Kubernetes object as JSON. */
export interface KubeObject {
  /** `group/version` or `v1`. */
  apiVersion?: string;
  /** Kind of the object. */
  kind?: string;
  /** Standard metadata. */
  metadata?: ObjectMeta;
  /** Any other top-level field (spec, status, data…). */
  [field: string]: unknown;
}

/** The parts of an object's body that every handler's context carries as fields of their own. */
export interface ObjectFields {
  /** The whole body. */
  readonly body: KubeObject;
  /** `spec`, or `{}` when it is absent or not a mapping. */
  readonly spec: Record<string, unknown>;
  /** `metadata` (`{}` when absent). */
  readonly meta: ObjectMeta;
  /** `status`, or `{}` when it is absent or not a mapping. */
  readonly status: Record<string, unknown>;
  /** `metadata.name`. */
  readonly name: string;
  /** `metadata.namespace` (none for cluster-scoped objects). */
  readonly namespace: string | undefined;
  /** `metadata.uid`. */
  readonly uid: string;
  /** `metadata.labels`, `{}` when absent. */
  readonly labels: Labels;
  /** `metadata.annotations`, `{}` when absent. */
  readonly annotations: Annotations;
}

/**
 * The fields of a handler's context that come from the object's body.
 * @param body The object.
 * @returns Its body, spec, meta, status, name, namespace, uid, labels and annotations.
 */
export function objectFields(body: KubeObject): ObjectFields {
  const meta = body.metadata ?? {};
  return {
    body,
    spec: isMapping(body["spec"]) ? body["spec"] : {},
    meta,
    status: isMapping(body["status"]) ? body["status"] : {},
    // Objects from the API server always have both (only hand-made bodies in tests may not).
    name: meta.name as string,
    namespace: meta.namespace,
    uid: meta.uid as string,
    labels: meta.labels ?? {},
    annotations: meta.annotations ?? {},
  };
}

/** A list answer (`…List` kind). */
export interface KubeList<T = KubeObject> {
  /** `…List` kind. */
  kind?: string;
  /** `group/version`. */
  apiVersion?: string;
  /** List metadata: resourceVersion of the snapshot and the pagination token. */
  metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  /** The objects. */
  items: T[];
}
