/**
 * Shapes of Kubernetes objects as plain JSON: just enough typing for the fields the framework
 * reads, with everything else kept as `unknown`.
 * @module
 */

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

/** A list answer (`…List` kind). */
export interface KubeList<T extends KubeObject = KubeObject> {
  /** `…List` kind. */
  kind?: string;
  /** `group/version`. */
  apiVersion?: string;
  /** List metadata: resourceVersion of the snapshot and the pagination token. */
  metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  /** The objects. */
  items: T[];
}
