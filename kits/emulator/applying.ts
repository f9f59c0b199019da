/**
 * Server-side apply (`application/apply-patch+yaml`), a documented subset of kube-apiserver's
 * field-ownership semantics (structured-merge-diff):
 *
 * - Each applier (`fieldManager`) owns the leaf fields it stated; applying again merges the
 *   stated fields into the object and removes the fields the same manager stated before and no
 *   longer states (unless another applier owns them too).
 * - Stating a field another applier owns with a different value is a 409 `Conflict` with one
 *   `FieldManagerConflict` cause per field, unless `force=true`, which takes the field over.
 * - Applying to a missing object creates it.
 *
 * Differences from kube-apiserver (also in docs/emulator.md): lists are atomic (kube-apiserver
 * merges keyed lists such as `containers` by `name`); only appliers own fields — ordinary
 * writes (create, update, merge/JSON patch) record no manager, so they never conflict with an
 * apply; ownership is kept inside the emulator and `metadata.managedFields` is not shown.
 * @module
 */

import { ApiFailure } from "./errors.ts";
import { clone, deepEqual, isObject, type KubeObject } from "./types.ts";

/** Fields that identify an object rather than belong to anyone. */
const IDENTITY = new Set([
  ".apiVersion",
  ".kind",
  ".metadata.name",
  ".metadata.namespace",
  ".metadata.resourceVersion",
  ".metadata.uid",
]);

/** The leaf paths of a value, as `.a.b` strings; lists and empty objects are leaves. */
export function leafPaths(value: unknown, prefix = ""): string[] {
  if (!isObject(value) || (Object.keys(value).length === 0 && prefix)) {
    return prefix ? [prefix] : [];
  }
  return Object.entries(value).flatMap(([key, child]) => leafPaths(child, `${prefix}.${key}`));
}

function at(object: unknown, path: string): unknown {
  let value = object;
  for (const key of path.slice(1).split(".")) {
    if (!isObject(value)) return undefined;
    value = value[key];
  }
  return value;
}

function remove(object: Record<string, unknown>, path: string): void {
  const keys = path.slice(1).split(".");
  const parents: Record<string, unknown>[] = [];
  let value: unknown = object;
  for (const key of keys.slice(0, -1)) {
    if (!isObject(value)) return;
    parents.push(value);
    value = value[key];
  }
  if (!isObject(value)) return;
  delete value[keys.at(-1)!];
  // Drop maps the removal emptied, as structured-merge-diff does.
  for (let i = parents.length - 1; i >= 0; i--) {
    const child = parents[i]![keys[i]!];
    if (isObject(child) && Object.keys(child).length === 0) delete parents[i]![keys[i]!];
  }
}

function merge(target: unknown, applied: unknown): unknown {
  if (!isObject(applied) || !isObject(target)) return clone(applied);
  const result: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(applied)) result[key] = merge(result[key], value);
  return result;
}

/** Who owns which fields of which object (by uid): managers to leaf paths. */
export class FieldOwnership {
  readonly #owners = new Map<string, Map<string, Set<string>>>();

  /**
   * The state after applying `applied` as `manager` to `current`, and the ownership to record.
   *
   * @param current The stored object (`undefined`: it is created).
   * @param applied The applied configuration.
   * @param manager The field manager.
   * @param force Take conflicting fields over.
   * @param scope Only leaf paths under this prefix count (`.status` for the status subresource).
   * @returns The new object and a function recording the ownership once it is stored.
   * @throws {ApiFailure} 409 Conflict listing the fields other managers own with other values.
   */
  apply(
    current: KubeObject | undefined,
    applied: KubeObject,
    manager: string,
    force: boolean,
    scope = "",
  ): { object: KubeObject; commit: (uid: string) => void } {
    const paths = new Set(
      leafPaths(applied).filter((p) => !IDENTITY.has(p) && (p + ".").startsWith(scope + ".")),
    );
    const owners = new Map(
      [...(this.#owners.get(current?.metadata?.uid ?? "") ?? [])].map(([m, s]) => [m, new Set(s)]),
    );
    const conflicts: Array<{ field: string; manager: string }> = [];
    for (const [other, owned] of owners) {
      if (other === manager) continue;
      for (const path of paths) {
        const overlapping = [...owned].filter((o) =>
          o === path || o.startsWith(path + ".") || path.startsWith(o + ".")
        );
        for (const o of overlapping) {
          if (deepEqual(at(current, o), at(applied, o))) continue; // same value: shared owners
          if (force) owned.delete(o);
          else conflicts.push({ field: o, manager: other });
        }
      }
    }
    if (conflicts.length) throw conflictFailure(conflicts);
    let object = merge(clone(current ?? {}), applied) as KubeObject;
    const before = owners.get(manager) ?? new Set<string>();
    for (const path of before) {
      if (paths.has(path) || [...paths].some((p) => p.startsWith(path + "."))) continue;
      const shared = [...owners].some(([m, owned]) => m !== manager && owned.has(path));
      if (!shared) remove(object as Record<string, unknown>, path);
    }
    owners.set(manager, paths);
    for (const [m, owned] of owners) if (!owned.size) owners.delete(m);
    object = object as KubeObject;
    return { object, commit: (uid) => this.#owners.set(uid, owners) };
  }
}

function conflictFailure(conflicts: Array<{ field: string; manager: string }>): ApiFailure {
  const describe = (c: { field: string; manager: string }) =>
    `conflict with "${c.manager}": ${c.field}`;
  const plural = conflicts.length === 1 ? "conflict" : "conflicts";
  return new ApiFailure(
    409,
    "Conflict",
    `Apply failed with ${conflicts.length} ${plural}: ${conflicts.map(describe).join(", ")}`,
    {
      causes: conflicts.map((c) => ({
        reason: "FieldManagerConflict",
        message: `conflict with "${c.manager}"`,
        field: c.field,
      })),
    },
  );
}
