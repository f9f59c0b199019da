/**
 * Kopf's diff format: what changed between two versions of an object's essence.
 *
 * A diff is a list of items `[op, path, old, new]`: `op` is `"add"`, `"change"` or `"remove"`,
 * `path` is the tuple of keys from the compared root, `old`/`new` are the values (`null` means
 * "absent"). Only objects are recursed into; lists and scalars are compared as whole values, so
 * appending to a list is one `change` of the entire list. A key holding `null` is the same as an
 * absent key, so `{a: null}` → `{}` is no change, and `null` → `{…}` is one `add` of the whole
 * subtree.
 *
 * The format is plain JSON (arrays, strings, values) and round-trips through `JSON.stringify` as
 * Kopf's tuples would. Item order: additions, then removals, then the common keys, each in key
 * order (Kopf's own order is arbitrary, so no one can rely on it).
 *
 * Callers: change detection in the reactor, field handlers (`reduce`), admission reviews, and the
 * patch-consistency check after patching (`scope: "left"`).
 * @module
 */

import {
  deepEqual,
  type FieldPath,
  type FieldSpec,
  isMapping,
  parseField,
  resolve,
} from "./dicts.ts";

/** What happened to a field. */
export type DiffOperation = "add" | "change" | "remove";

/** All diff operations, for validation and iteration. */
export const DIFF_OPERATIONS: readonly DiffOperation[] = Object.freeze(["add", "change", "remove"]);

/** One change: the operation, the field path, the old value and the new value (`null` = absent). */
export type DiffItem = readonly [op: DiffOperation, path: FieldPath, old: unknown, new: unknown];

/** A whole diff: a list of items. */
export type Diff = readonly DiffItem[];

/**
 * Which side's keys to look at when comparing objects: `"full"` sees additions and removals,
 * `"left"` only keys present on the old side, `"right"` only keys present on the new side.
 */
export type DiffScope = "full" | "left" | "right";

/** Options for {@linkcode diff}. */
export interface DiffOptions {
  /**
   * A path prefix for all produced items (as if `a` and `b` were at that path).
   * @default {[]}
   */
  readonly path?: FieldPath;
  /**
   * Which keys to compare in objects.
   * @default {"full"}
   */
  readonly scope?: DiffScope;
}

/** The empty diff. */
export const EMPTY_DIFF: Diff = Object.freeze([]);

/**
 * Compute the diff between two values (usually two essences of an object).
 * @param a The old value; `null`/`undefined` means absent.
 * @param b The new value; `null`/`undefined` means absent.
 * @param options Path prefix and scope.
 * @returns The list of changes; empty if the values are equal.
 * @example Changing one field and adding another
 * ```ts
 * import { diff } from "./diffs.ts";
 * diff({ spec: { size: 1 } }, { spec: { size: 2, extra: "x" } });
 * // [["add", ["spec", "extra"], null, "x"], ["change", ["spec", "size"], 1, 2]]
 * ```
 */
export function diff(a: unknown, b: unknown, options: DiffOptions = {}): Diff {
  const items: DiffItem[] = [];
  collect(items, a ?? null, b ?? null, [...(options.path ?? [])], options.scope ?? "full");
  return Object.freeze(items);
}

/**
 * Adds the changes between `a` and `b` (at `path`) to `items`. The path is one array for the
 * whole walk, pushed and popped, and copied only into the items; equal subtrees cost a walk
 * without allocations (this runs on every cycle: cause detection and the patch check).
 */
function collect(
  items: DiffItem[],
  a: unknown,
  b: unknown,
  path: string[],
  scope: DiffScope,
): void {
  if (a === b) return;
  if (a === null) {
    items.push(item("add", path, null, b));
  } else if (b === null) {
    items.push(item("remove", path, a, null));
  } else if (isMapping(a) && isMapping(b)) {
    if (scope !== "left") {
      for (const key in b) {
        if (Object.hasOwn(a, key) || !Object.hasOwn(b, key)) continue;
        path.push(key);
        collect(items, null, b[key] ?? null, path, scope);
        path.pop();
      }
    }
    if (scope !== "right") {
      for (const key in a) {
        if (Object.hasOwn(b, key) || !Object.hasOwn(a, key)) continue;
        path.push(key);
        collect(items, a[key] ?? null, null, path, scope);
        path.pop();
      }
    }
    for (const key in a) {
      if (!Object.hasOwn(b, key) || !Object.hasOwn(a, key)) continue;
      path.push(key);
      collect(items, a[key] ?? null, b[key] ?? null, path, scope);
      path.pop();
    }
  } else if (!deepEqual(a, b)) {
    items.push(item("change", path, a, b));
  }
}

function item(op: DiffOperation, path: readonly string[], old: unknown, new_: unknown): DiffItem {
  return Object.freeze([op, Object.freeze([...path]), old, new_] as const);
}

/**
 * Narrow a diff to one field, with paths re-rooted at that field (for field handlers).
 *
 * Items inside the field keep their tail path; items outside are dropped; and an item for a
 * parent of the field (e.g. the whole `spec` added) is replaced by the diff of the field's own
 * old and new values within it.
 * @param d The full diff.
 * @param field The field to narrow to; the root returns the diff as is.
 * @returns The narrowed diff.
 * @example A field handler on `spec.size`
 * ```ts
 * import { diff, reduce } from "./diffs.ts";
 * reduce(diff(null, { spec: { size: 1 } }), "spec.size"); // [["add", [], null, 1]]
 * ```
 */
export function reduce(d: Diff, field: FieldSpec): Diff {
  const path = parseField(field);
  const result: DiffItem[] = [];
  for (const [op, itemPath, old, new_] of d) {
    if (path.length === 0) {
      result.push(item(op, itemPath, old, new_));
    } else if (startsWith(itemPath, path)) {
      result.push(item(op, Object.freeze(itemPath.slice(path.length)), old, new_));
    } else if (startsWith(path, itemPath)) {
      const tail = path.slice(itemPath.length);
      result.push(...diff(resolve(old, tail) ?? null, resolve(new_, tail) ?? null));
    }
  }
  return Object.freeze(result);
}

function startsWith(path: FieldPath, prefix: FieldPath): boolean {
  return prefix.length <= path.length && prefix.every((key, i) => path[i] === key);
}

/**
 * Convert a diff to plain JSON: `[[op, [keys…], old, new], …]`, absent values as `null`.
 * @param d The diff.
 * @returns A fresh JSON-serialisable array.
 */
export function diffToJson(d: Diff): unknown[][] {
  return d.map(([op, path, old, new_]) => [op, [...path], old ?? null, new_ ?? null]);
}

/**
 * Parse and validate a diff from its JSON form (e.g. from `JSON.parse` of a stored diff).
 * @param json The parsed JSON.
 * @returns The diff.
 * @throws {TypeError} If the structure is not a list of `[op, [keys…], old, new]` items.
 */
export function diffFromJson(json: unknown): Diff {
  if (!Array.isArray(json)) throw new TypeError("A diff must be a list of items");
  return Object.freeze(json.map((entry: unknown, i): DiffItem => {
    if (!Array.isArray(entry) || entry.length !== 4) {
      throw new TypeError(`Diff item #${i} must be a list of 4 elements`);
    }
    const [op, path, old, new_] = entry as [unknown, unknown, unknown, unknown];
    if (!DIFF_OPERATIONS.includes(op as DiffOperation)) {
      throw new TypeError(`Diff item #${i} has an unknown operation ${JSON.stringify(op)}`);
    }
    if (!Array.isArray(path) || !path.every((key) => typeof key === "string")) {
      throw new TypeError(`Diff item #${i} must have a list of strings as its path`);
    }
    return item(op as DiffOperation, Object.freeze([...path]), old ?? null, new_ ?? null);
  }));
}
