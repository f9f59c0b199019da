/**
 * Deletion: preconditions (uid, resourceVersion → 409), finalizers and `deletionTimestamp`,
 * propagation policies (`Orphan` and `Foreground` add their finalizers; the garbage collector
 * in `controllers.ts` completes them), namespaces (always go through `Terminating`) and CRDs
 * (cleaned up before they go), and delete-collection.
 * @module
 */

import type { Cluster } from "./cluster.ts";
import { ApiFailure, forbidden } from "./errors.ts";
import { CRDS, NAMESPACES } from "./registry.ts";
import {
  clone,
  isObject,
  type KubeObject,
  nowTimestamp,
  type ResourceDef,
  resourceKey,
} from "./types.ts";

/** The body (or query) of a DELETE request. */
export interface DeleteOptions {
  /** `Orphan`, `Background` (default) or `Foreground`. */
  readonly propagationPolicy?: string;
  /** Deprecated form of `propagationPolicy: Orphan`. */
  readonly orphanDependents?: boolean;
  /** Delete only if the object still has this uid / resourceVersion. */
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
  /** Accepted and ignored: deletion is immediate unless finalizers block it. */
  readonly gracePeriodSeconds?: number;
}

/** The finalizer the API server adds to a CRD being deleted until its objects are gone. */
export const CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io";
/** The finalizer of a `Foreground` deletion. */
export const FOREGROUND = "foregroundDeletion";
/** The finalizer of an `Orphan` deletion. */
export const ORPHAN = "orphan";

const UNDELETABLE_NAMESPACES = new Set(["default", "kube-system", "kube-public"]);

/** What a deletion did. */
export interface Deletion {
  /** The object's last state (or its state while finalizers block the deletion). */
  readonly object: KubeObject;
  /** Whether the object is gone from storage. */
  readonly gone: boolean;
}

/**
 * Deletes an object, or marks it with a deletionTimestamp while finalizers block it.
 *
 * @param cluster The cluster.
 * @param def The object's resource.
 * @param namespace The object's namespace (`""` for cluster-scoped).
 * @param name The object's name.
 * @param options Preconditions and propagation policy.
 * @returns The object and whether it is gone.
 * @throws {ApiFailure} 404 when missing, 409 when a precondition fails, 403 for protected
 *   namespaces.
 */
export function deleteObject(
  cluster: Cluster,
  def: ResourceDef,
  namespace: string,
  name: string,
  options: DeleteOptions = {},
): Deletion {
  const policies = ["Foreground", "Background", "Orphan"];
  if (options.propagationPolicy !== undefined && !policies.includes(options.propagationPolicy)) {
    const message = `Unsupported value: "${options.propagationPolicy}": supported values: ` +
      `"Foreground", "Background", "Orphan", "nil"`;
    throw new ApiFailure(
      422,
      "Invalid",
      `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: ${message}`,
      {
        group: "meta.k8s.io",
        kind: "DeleteOptions",
        causes: [{ reason: "FieldValueNotSupported", message, field: "propagationPolicy" }],
      },
    );
  }
  const old = cluster.get(def, namespace, name);
  const meta = old.metadata ?? {};
  const pre = options.preconditions ?? {};
  const failed = (what: string, wanted: string, actual: string | undefined, tail: string) =>
    new ApiFailure(
      409,
      "Conflict",
      `Operation cannot be fulfilled on ${def.kind} "${name}": the ${what} in the precondition ` +
        `(${wanted}) does not match the ${what} in record (${actual}). ${tail}`,
      { name, ...(def.group ? { group: def.group } : {}), kind: def.kind },
    );
  if (pre.uid && pre.uid !== meta.uid) {
    throw failed("UID", pre.uid, meta.uid, "The object might have been deleted and then recreated");
  }
  if (pre.resourceVersion && pre.resourceVersion !== meta.resourceVersion) {
    throw failed(
      "ResourceVersion",
      pre.resourceVersion,
      meta.resourceVersion,
      "The object might have been modified",
    );
  }
  if (def === NAMESPACES && UNDELETABLE_NAMESPACES.has(name)) {
    throw forbidden(def, name, "this namespace may not be deleted");
  }
  const policy = options.propagationPolicy ??
    (options.orphanDependents === true ? "Orphan" : undefined);
  const finalizers = [...(meta.finalizers ?? [])];
  const add = (finalizer: string) => {
    if (!finalizers.includes(finalizer)) finalizers.push(finalizer);
  };
  if (policy === "Orphan") add(ORPHAN);
  if (policy === "Foreground") add(FOREGROUND);
  if (def === CRDS) add(CRD_CLEANUP);
  const key = resourceKey(def);
  if (finalizers.length === 0 && def !== NAMESPACES) {
    const object = cluster.store.write("DELETED", key, old);
    cluster.schedule();
    return { object, gone: true };
  }
  const next = clone(old);
  const nextMeta = next.metadata = { ...next.metadata, finalizers };
  if (!meta.deletionTimestamp) {
    nextMeta.deletionTimestamp = nowTimestamp();
    if (def !== CRDS) {
      // CRDs are marked by their own storage: no grace period, no generation bump.
      nextMeta.deletionGracePeriodSeconds = 0;
      if (nextMeta.generation) nextMeta.generation += 1;
    }
    if (def === NAMESPACES) {
      next.status = { ...(next.status as Record<string, unknown>), phase: "Terminating" };
    }
    if (def === CRDS) {
      const status = isObject(next.status) ? next.status : {};
      const conditions = Array.isArray(status.conditions) ? status.conditions : [];
      next.status = {
        ...status,
        conditions: [...conditions, {
          type: "Terminating",
          status: "True",
          lastTransitionTime: nowTimestamp(),
          reason: "InstanceDeletionPending",
          message: "CustomResourceDefinition marked for deletion; CustomResource deletion will " +
            "begin soon",
        }],
      };
    }
  }
  const object = cluster.commit(def, old, next);
  return { object, gone: !cluster.store.get(key, meta.namespace ?? "", name) };
}

/**
 * Deletes every object of a resource in a namespace that matches the selectors.
 *
 * @param cluster The cluster.
 * @param def The resource.
 * @param namespace The namespace, or `undefined` for all.
 * @param selectors Label and field selectors.
 * @param options Preconditions are not applied; the propagation policy is.
 * @returns The objects deleted or marked for deletion.
 */
export function deleteCollection(
  cluster: Cluster,
  def: ResourceDef,
  namespace: string | undefined,
  selectors: { labelSelector?: string | null; fieldSelector?: string | null },
  options: DeleteOptions = {},
): KubeObject[] {
  const { items } = cluster.list(def, namespace, selectors);
  const deleted: KubeObject[] = [];
  for (const item of items) {
    const { preconditions: _p, ...rest } = options;
    deleted.push(
      deleteObject(cluster, def, item.metadata?.namespace ?? "", item.metadata?.name ?? "", rest)
        .object,
    );
  }
  return deleted;
}
