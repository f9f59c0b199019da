/**
 * Patch algorithms: JSON merge patch (RFC 7386), JSON patch (RFC 6902, with `test` failures as
 * 422), and a simplified strategic merge patch (see {@link strategicMergePatch}).
 *
 * The `/status` rules and resourceVersion preconditions are applied afterwards, by the update
 * path in `objects.ts`, to the object a patch produces.
 * @module
 */

// The package's ES module: its CommonJS entry would start the Node compatibility loader (MiBs).
// @ts-types="fast-json-patch"
import jsonpatch from "fast-json-patch/index.mjs";
import { ApiFailure, badRequest } from "./errors.ts";
import { clone, isObject, type KubeObject } from "./types.ts";

/** The patch flavours, by content type. */
export type PatchKind = "merge" | "json" | "strategic";

/** Content types of the supported patch flavours. */
export const PATCH_TYPES: Readonly<Record<string, PatchKind>> = {
  "application/merge-patch+json": "merge",
  "application/json-patch+json": "json",
  "application/strategic-merge-patch+json": "strategic",
};

/**
 * Applies an RFC 7386 JSON merge patch: objects merge recursively, `null` deletes, anything
 * else (arrays included) replaces.
 *
 * @param target The current value (not mutated).
 * @param patch The merge patch.
 * @returns The patched value.
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/**
 * Applies an RFC 6902 JSON patch.
 *
 * @param target The current object (not mutated).
 * @param patch The list of operations.
 * @returns The patched object.
 * @throws {ApiFailure} 400 for a malformed patch, 422 when an operation fails (e.g. `test`).
 */
export function jsonPatch(target: KubeObject, patch: unknown): KubeObject {
  if (!Array.isArray(patch)) {
    throw badRequest(
      "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
    );
  }
  try {
    // As the real API server (evanphx/json-patch): `test` with `null` passes for a missing path.
    let result: unknown = clone(target);
    for (const op of patch as jsonpatch.Operation[]) {
      if (op.op === "test" && op.value === null) {
        let found: unknown;
        try {
          found = jsonpatch.getValueByPointer(result, op.path);
        } catch {
          found = undefined;
        }
        if (found !== undefined && found !== null) throw new Error(`test failed at ${op.path}`);
        continue;
      }
      result = jsonpatch.applyOperation(result, op, true, true).newDocument;
    }
    if (!isObject(result)) throw new Error("the patched document is not an object");
    return result as KubeObject;
  } catch (error) {
    if (error instanceof ApiFailure) throw error;
    throw new ApiFailure(
      422,
      "Invalid",
      "the server rejected our request due to an error in our request",
      {},
    );
  }
}

/** List fields merged by a key in strategic merge patches (the common built-in ones). */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  env: "name",
  imagePullSecrets: "name",
  conditions: "type",
  ownerReferences: "uid",
  hostAliases: "ip",
  topologySpreadConstraints: "topologyKey",
};

/** Lists of simple values merged as sets in strategic merge patches. */
const SET_LISTS: ReadonlySet<string> = new Set(["finalizers"]);

const DELETE = Symbol("delete");

/**
 * Applies a strategic merge patch, simplified: it behaves as a JSON merge patch, except that
 * the common keyed lists of built-in types (`containers`, `env`, `volumes`, `conditions`,
 * `ports`, …) merge by their key, `metadata.finalizers` merges as a set, and the directives
 * `$patch: replace|delete`, `$deleteFromPrimitiveList/…`, `$retainKeys` and
 * `$setElementOrder/…` (ignored) are understood. Other lists are replaced, as in a merge patch;
 * the API server would consult each type's patch strategy instead.
 *
 * @param target The current value (not mutated).
 * @param patch The strategic merge patch.
 * @returns The patched value.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  const result = smp(target, patch);
  return result === DELETE ? {} : result;
}

function smp(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const directive = patch.$patch;
  if (directive === "delete") return DELETE;
  const body = Object.fromEntries(Object.entries(patch).filter(([k]) => k !== "$patch"));
  if (directive === "replace") return smp(undefined, body);
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(body)) {
    if (key.startsWith("$setElementOrder/") || key === "$retainKeys") continue;
    if (key.startsWith("$deleteFromPrimitiveList/")) {
      const list = key.slice("$deleteFromPrimitiveList/".length);
      const drop = Array.isArray(value) ? value : [];
      if (Array.isArray(result[list])) {
        result[list] = (result[list] as unknown[]).filter((v) => !drop.includes(v));
      }
      continue;
    }
    if (value === null) {
      delete result[key];
      continue;
    }
    const merged = Array.isArray(value)
      ? mergeList(key, result[key], value)
      : smp(result[key], value);
    if (merged === DELETE) delete result[key];
    else result[key] = merged;
  }
  if (Array.isArray(body.$retainKeys)) {
    const keep = new Set(body.$retainKeys as unknown[]);
    for (const key of Object.keys(result)) if (!keep.has(key)) delete result[key];
  }
  return result;
}

function mergeList(field: string, target: unknown, patch: unknown[]): unknown {
  const current = Array.isArray(target) ? target : [];
  if (SET_LISTS.has(field)) {
    return [...patch, ...current.filter((v) => !patch.includes(v))];
  }
  const sample = [...current, ...patch].find(isObject);
  let key = MERGE_KEYS[field];
  if (field === "ports" && sample) key = "containerPort" in sample ? "containerPort" : "port";
  if (!key || !patch.every(isObject)) return clone(patch);
  const result: unknown[] = [...current];
  for (const item of patch as Array<Record<string, unknown>>) {
    const index = result.findIndex((r) => isObject(r) && r[key!] === item[key!]);
    const merged = smp(index >= 0 ? result[index] : undefined, item);
    if (merged === DELETE) {
      if (index >= 0) result.splice(index, 1);
    } else if (index >= 0) {
      result[index] = merged;
    } else {
      result.push(merged);
    }
  }
  return result;
}
