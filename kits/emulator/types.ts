/**
 * Shapes shared by the emulator's modules: JSON values, objects as stored, resource definitions.
 * The emulator reads Kubernetes semantics on its own and imports nothing from `core/`.
 * @module
 */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** An owner reference of an object's metadata. */
export interface OwnerReference {
  /** API version of the owner, e.g. `v1` or `apps/v1`. */
  apiVersion: string;
  /** Kind of the owner. */
  kind: string;
  /** Name of the owner. */
  name: string;
  /** UID of the owner; the garbage collector matches by it. */
  uid: string;
  /** Whether this dependent blocks a foreground deletion of its owner. */
  blockOwnerDeletion?: boolean;
  /** Whether the owner is the managing controller. */
  controller?: boolean;
}

/** The metadata fields the emulator reads or writes. */
export interface ObjectMeta {
  /** Object name (unique per resource and namespace). */
  name?: string;
  /** Prefix for a server-generated name. */
  generateName?: string;
  /** Namespace of namespaced objects. */
  namespace?: string;
  /** Server-assigned unique id. */
  uid?: string;
  /** Opaque version of this state (an integer here). */
  resourceVersion?: string;
  /** Incremented on changes of the desired state. */
  generation?: number;
  /** RFC 3339 creation time. */
  creationTimestamp?: string;
  /** RFC 3339 time the deletion was requested. */
  deletionTimestamp?: string;
  /** Grace period of the pending deletion. */
  deletionGracePeriodSeconds?: number;
  /** Labels. */
  labels?: Record<string, string>;
  /** Annotations. */
  annotations?: Record<string, string>;
  /** Finalizers that block the deletion. */
  finalizers?: string[];
  /** Owners, for garbage collection. */
  ownerReferences?: OwnerReference[];
  /** Any other field. */
  [key: string]: unknown;
}

/** A Kubernetes object as the emulator stores and serves it. */
export interface KubeObject {
  /** `group/version`, or `v1` for the core group. */
  apiVersion?: string;
  /** The kind. */
  kind?: string;
  /** Standard metadata. */
  metadata?: ObjectMeta;
  /** Any other field (spec, status, data, …). */
  [key: string]: unknown;
}

/** A printer column of a resource (from a CRD's `additionalPrinterColumns`). */
export interface PrinterColumn {
  /** Column title. */
  name: string;
  /** OpenAPI type: string, integer, number, boolean, date. */
  type: string;
  /** Simple JSONPath such as `.spec.duration`. */
  jsonPath: string;
  /** Hidden unless wide output (priority > 0). */
  priority?: number;
  /** Column help. */
  description?: string;
}

/** One resource the emulator serves. */
export interface ResourceDef {
  /** API group, `""` for core. */
  group: string;
  /** Served versions, preferred first. */
  versions: string[];
  /** Plural name (the URL segment). */
  plural: string;
  /** Singular name. */
  singular: string;
  /** Kind of the objects. */
  kind: string;
  /** Kind of lists. */
  listKind: string;
  /** Namespaced or cluster-scoped. */
  namespaced: boolean;
  /** Short names for kubectl. */
  shortNames: string[];
  /** Categories such as `all`. */
  categories: string[];
  /** Subresources served (only `status` has behaviour; others are listed in discovery). */
  subresources: string[];
  /** Whether `metadata.generation` is maintained. */
  generation: boolean;
  /** A custom resource (defined by the CRD of this name). */
  crd?: string;
  /** Printer columns for tables, per version. */
  columns?: Record<string, PrinterColumn[]>;
  /** Structural schema (openAPIV3Schema) per version, for pruning unknown fields. */
  schemas?: Record<string, JsonObject | undefined>;
  /** Whether DELETE answers with the object instead of a `Status` (e.g. pods). */
  returnsObjectOnDelete?: boolean;
  /** Storage key when another resource's objects are served (e.g. events.k8s.io Events). */
  storage?: string;
  /** Conversions between the served form and the stored form. */
  convert?: {
    readonly in: (object: KubeObject) => KubeObject;
    readonly out: (object: KubeObject) => KubeObject;
  };
}

/** The key of a resource's objects in storage: `group/plural`. */
export function resourceKey(def: Pick<ResourceDef, "group" | "plural" | "storage">): string {
  return def.storage ?? `${def.group}/${def.plural}`;
}

/** `group/version` or just `version` for the core group. */
export function groupVersion(group: string, version: string): string {
  return group ? `${group}/${version}` : version;
}

/** A deep copy of a JSON-compatible value. */
export function clone<T>(value: T): T {
  return value === undefined ? value : structuredClone(value);
}

/** Whether two JSON-compatible values are deeply equal (key order ignored). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const ka = Object.keys(ra).filter((k) => ra[k] !== undefined);
  const kb = Object.keys(rb).filter((k) => rb[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => deepEqual(ra[k], rb[k]));
}

/** Whether a value is a plain JSON object (not an array, not null). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The current time as Kubernetes writes it: RFC 3339 with seconds precision. */
export function nowTimestamp(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}
