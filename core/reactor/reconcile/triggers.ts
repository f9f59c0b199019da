/**
 * Private helpers of the reconcile controller (`reconciling.ts`): which cache events trigger a
 * reconcile, and of which object.
 *
 * - {@link worthReconciling}: a change of a reconciled object, ignoring its bookkeeping metadata
 *   and the cause handlers' own writes ({@link bookkeepingOf}).
 * - {@link controllerOf}: the reconciled owner of an object of an `owns` resource.
 * - {@link isKey}: whether a `watches` map returned one key or several.
 * @module
 */

import type { CacheEvent } from "../../client/caching.ts";
import type { ObjectKey } from "../../intents/reconciliation.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { deepEqual, isMapping } from "../../structs/dicts.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { Resource } from "../../structs/resources.ts";

/** The cause handlers' bookkeeping on objects: not a reason to reconcile. */
export interface Bookkeeping {
  /** Annotation prefixes of the diff-base and progress storages (e.g. `kopf.zalando.org`). */
  readonly prefixes: readonly string[];
  /** The cause handlers' finalizer. */
  readonly finalizer: string;
}

/**
 * What the cause handlers write to objects for themselves, from the settings.
 *
 * @param settings The operator's settings (their persistence storages and finalizer).
 * @returns The annotation prefixes and the finalizer to disregard.
 */
export function bookkeepingOf(settings: OperatorSettings): Bookkeeping {
  const prefixes = new Set<string>();
  const walk = (storage: unknown) => {
    if (!storage || typeof storage !== "object") return;
    const { prefix, storages } = storage as { prefix?: unknown; storages?: unknown };
    if (typeof prefix === "string" && prefix) prefixes.add(prefix);
    if (Array.isArray(storages)) storages.forEach(walk);
  };
  walk(settings.persistence.diffbaseStorage);
  walk(settings.persistence.progressStorage);
  return { prefixes: [...prefixes], finalizer: settings.persistence.finalizer };
}

/**
 * Whether a change of a reconciled object is worth a reconcile.
 *
 * @param event The cache event of the reconciled object.
 * @param statusChanges Whether a change of the status alone counts.
 * @param bookkeeping What the cause handlers write for themselves (never counts).
 * @returns `true` for a new object (or a new uid) and for a change beyond the disregarded parts.
 */
export function worthReconciling(
  event: CacheEvent,
  statusChanges: boolean,
  bookkeeping: Bookkeeping,
): boolean {
  const old = event.old;
  if (!old || old.metadata?.uid !== event.object.metadata?.uid) return true;
  return !deepEqual(
    essence(old, statusChanges, bookkeeping),
    essence(event.object, statusChanges, bookkeeping),
  );
}

/** The object without what does not count as a change (see {@link worthReconciling}). */
function essence(object: KubeObject, withStatus: boolean, bookkeeping: Bookkeeping): unknown {
  const { resourceVersion: _rv, managedFields: _mf, generation: _g, ...meta } = object.metadata ??
    {};
  // The cause handlers' progress, diff-base and finalizer (a mixed operator writes them after
  // each cause) are theirs alone: no reconcile for them.
  if (meta.annotations) {
    meta.annotations = Object.fromEntries(
      Object.entries(meta.annotations).filter(([key]) =>
        !bookkeeping.prefixes.some((prefix) => key.startsWith(`${prefix}/`))
      ),
    );
  }
  if (meta.finalizers) meta.finalizers = meta.finalizers.filter((f) => f !== bookkeeping.finalizer);
  const { status, ...rest } = object;
  return { ...rest, metadata: meta, ...(withStatus ? { status } : {}) };
}

/**
 * The name of the reconciled object that is this object's controller, if any.
 *
 * @param object An object of an `owns` resource.
 * @param owner The reconciled resource.
 * @returns The name in its controller owner reference of that resource's kind, if any.
 */
export function controllerOf(object: KubeObject, owner: Resource): string | undefined {
  const apiVersion = owner.group ? `${owner.group}/${owner.version}` : owner.version;
  const group = owner.group;
  for (const ref of object.metadata?.ownerReferences ?? []) {
    if (!ref.controller || ref.kind !== owner.kind) continue;
    const refGroup = ref.apiVersion.includes("/") ? ref.apiVersion.split("/")[0] : "";
    if (ref.apiVersion === apiVersion || refGroup === group) return ref.name;
  }
  return undefined;
}

/**
 * Whether a `watches` map returned one key (rather than several).
 *
 * @param value What the map returned.
 * @returns Whether it is a single {@link ObjectKey}.
 */
export function isKey(value: unknown): value is ObjectKey {
  return isMapping(value) && typeof value.name === "string";
}
