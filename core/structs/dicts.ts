/**
 * Field paths and plain-JSON helpers: read, write and remove nested fields of objects as they
 * come from the Kubernetes API, plus deep copy and deep equality with JSON semantics.
 *
 * Everything here is pure and works on plain objects (`JSON.parse` output or object literals).
 * Reads are "safe": a missing key or a non-object on the way means "absent" (`undefined`), never
 * an error, because bodies can be corrupted externally and the framework must carry on. Own
 * properties only: `"constructor"` or `"__proto__"` are ordinary keys here.
 *
 * Callers: diffs, patches, and the persistence storages in `core/settings/`.
 * @module
 */

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object (a "dict"). */
export interface JsonObject {
  /** Any field. */
  [key: string]: JsonValue;
}

/** A plain object with unknown values: bodies, essences, patches as seen by readers. */
export type Mapping = Readonly<Record<string, unknown>>;

/** A parsed field path: the keys from the root down; an empty path is the root itself. */
export type FieldPath = readonly string[];

/**
 * A field as users write it: `"spec.field"` (split by dots), an array of keys (for keys with
 * dots in them, like annotation names), or `null`/`undefined` for the root.
 */
export type FieldSpec = string | readonly string[] | null | undefined;

/**
 * Tell whether a value is a plain object (a JSON "dict"), not an array, null or scalar.
 * @param value Any value.
 * @returns `true` for plain objects.
 */
export function isMapping(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Parse a field specification into a path.
 * @param field `"a.b.c"`, `["a", "b.c"]`, or `null`/`undefined` for the root.
 * @returns The path as a frozen array of keys.
 * @example Dotted and array forms
 * ```ts
 * import { parseField } from "./dicts.ts";
 * parseField("spec.size"); // ["spec", "size"]
 * parseField(["metadata", "annotations", "example.com/x"]);
 * ```
 */
export function parseField(field: FieldSpec): FieldPath {
  if (field === null || field === undefined) return EMPTY_PATH;
  if (typeof field === "string") return parseDotted(field);
  // A frozen path cannot change any more: it is its own copy.
  return Object.isFrozen(field) ? field : Object.freeze([...field]);
}

const EMPTY_PATH: FieldPath = Object.freeze([]);

/** Parsed dotted fields: the same few field names are parsed on every object and cycle. */
const dottedPaths = new Map<string, FieldPath>();
const DOTTED_PATHS_MAX = 4096;

function parseDotted(field: string): FieldPath {
  let path = dottedPaths.get(field);
  if (path === undefined) {
    path = Object.freeze(field.split("."));
    if (dottedPaths.size >= DOTTED_PATHS_MAX) dottedPaths.clear();
    dottedPaths.set(field, path);
  }
  return path;
}

/**
 * Read a nested field.
 * @param obj The object to read from (anything; non-objects have no fields).
 * @param field The field to read.
 * @returns The value (which may be `null`), or `undefined` if the key is absent or some parent
 *   on the way is not an object.
 */
export function resolve(obj: unknown, field: FieldSpec): unknown {
  // Not parseField(): an array path is only read here, so it needs no frozen copy.
  const path: readonly string[] = field === null || field === undefined
    ? EMPTY_PATH
    : typeof field === "string"
    ? parseDotted(field)
    : field;
  let current: unknown = obj;
  for (let i = 0; i < path.length; i++) {
    const key = path[i]!;
    if (!isMapping(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

/**
 * Tell whether a nested field is present (even if its value is `null`).
 * @param obj The object to inspect.
 * @param field The field to look for; the root is always present.
 * @returns `true` if every key on the path exists.
 */
export function has(obj: unknown, field: FieldSpec): boolean {
  return resolve(obj, field) !== undefined;
}

/**
 * Set a nested field, creating missing parents as empty objects.
 * @param obj The object to modify in place.
 * @param field The field to set; must not be the root.
 * @param value The value to store (as is, not copied).
 * @throws {RangeError} If the path is empty.
 * @throws {TypeError} If an existing parent on the way is not an object.
 */
export function ensure(obj: Record<string, unknown>, field: FieldSpec, value: unknown): void {
  // Not parseField(): the path is only read here (as in resolve), so it needs no frozen copy.
  const path: readonly string[] = field === null || field === undefined
    ? EMPTY_PATH
    : typeof field === "string"
    ? parseDotted(field)
    : field;
  if (path.length === 0) {
    throw new RangeError("Cannot set the root of an object; provide a specific field");
  }
  let current: Record<string, unknown> = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i]!;
    if (!Object.hasOwn(current, key)) assign(current, key, {});
    const next = current[key];
    if (!isMapping(next)) {
      throw new TypeError(`Cannot set a field inside a non-object at ${JSON.stringify(key)}`);
    }
    current = next;
  }
  assign(current, path[path.length - 1]!, value);
}

/**
 * Remove a nested field and every parent that becomes empty because of it.
 *
 * Removing an absent field is not an error (the goal is achieved), and neither is a path that
 * runs through a non-object. Parents that were already empty are left alone unless the removal
 * went through them.
 * @param obj The object to modify in place.
 * @param field The field to remove; must not be the root.
 * @throws {RangeError} If the path is empty.
 */
export function remove(obj: Record<string, unknown>, field: FieldSpec): void {
  const path = parseField(field);
  if (path.length === 0) {
    throw new RangeError("Cannot remove the root of an object; provide a specific field");
  }
  removePath(obj, path);
}

function removePath(obj: Record<string, unknown>, path: FieldPath): void {
  const [key, ...rest] = path as [string, ...string[]];
  if (!Object.hasOwn(obj, key)) return;
  if (rest.length === 0) {
    delete obj[key];
    return;
  }
  const child = obj[key];
  if (!isMapping(child)) return;
  removePath(child, rest);
  if (Object.keys(child).length === 0) delete obj[key];
}

/**
 * Copy the listed fields from one object into another (deep copies), skipping absent ones.
 * @param src Where to read from.
 * @param dst Where to write to (in place).
 * @param fields Which fields to copy; `null`/`undefined` copies nothing.
 * @throws {TypeError} If a parent in `dst` on the way is not an object.
 */
export function cherrypick(
  src: unknown,
  dst: Record<string, unknown>,
  fields: Iterable<FieldSpec> | null | undefined,
): void {
  for (const field of fields ?? []) {
    const value = resolve(src, field);
    if (value !== undefined) ensure(dst, field, deepCopy(value));
  }
}

/**
 * Deep-copy a JSON-like value: plain objects and arrays are copied, everything else is shared.
 * @typeParam T The type of the value.
 * @param value The value to copy.
 * @returns An independent copy with the same key order.
 */
export function deepCopy<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item) => deepCopy(item)) as T;
  if (isMapping(value)) {
    const copy: Record<string, unknown> = {};
    for (const key of Object.keys(value)) assign(copy, key, deepCopy(value[key]));
    return copy as T;
  }
  return value;
}

/**
 * A deep copy of a mapping without some of its top-level keys (which are not copied at all).
 * @param value The mapping.
 * @param omit Top-level keys to leave out.
 * @returns A new plain object: like `deepCopy` of `{...value}` with `omit` deleted afterwards.
 * @example Everything but metadata and status
 * ```ts
 * import { deepCopyWithout } from "./dicts.ts";
 * deepCopyWithout({ metadata: { name: "x" }, spec: { a: [1] } }, ["metadata", "status"]);
 * // → { spec: { a: [1] } }
 * ```
 */
export function deepCopyWithout(value: Mapping, omit: readonly string[]): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (!omit.includes(key)) assign(copy, key, deepCopy(value[key]));
  }
  return copy;
}

/**
 * Tell whether a value is nested deeper than `limit` levels of objects and arrays (the value
 * itself is level 1 if it is an object or array; scalars are level 0). Any depth can be
 * measured: the walk recurses a few hundred levels at most and goes on with a stack of its own
 * below, whereas the recursive helpers here (`deepCopy`, `deepEqual`, the diffs) overflow the
 * stack some thousands of levels down — and the API server stores objects nested up to 10,000
 * levels deep (a field with `x-kubernetes-preserve-unknown-fields`). It stops at the first level
 * past the limit. Cheaper than a `deepCopy` of the same value (bench/depth_check.ts).
 * @param value Any JSON-like value.
 * @param limit The greatest depth allowed.
 * @returns `true` if some object or array lies deeper than `limit` levels.
 * @example A value three levels deep
 * ```ts
 * import { nestedDeeperThan } from "./dicts.ts";
 * nestedDeeperThan({ a: { b: [1] } }, 2); // true
 * nestedDeeperThan({ a: { b: [1] } }, 3); // false
 * ```
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (limit < 1) return true;
  return deeperThan(value, limit, RECURSION_FRAMES);
}

/** How deep {@link nestedDeeperThan} recurses before it goes on with a stack of its own. */
const RECURSION_FRAMES = 256;

/** Whether `value` (at level 1) has objects below level `allowed`; recursing `frames` more. */
function deeperThan(value: object, allowed: number, frames: number): boolean {
  if (frames === 0) return deeperThanIteratively(value, allowed);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const child = value[i];
      if (typeof child !== "object" || child === null) continue;
      if (allowed <= 1 || deeperThan(child, allowed - 1, frames - 1)) return true;
    }
    return false;
  }
  for (const key in value) {
    const child = (value as Record<string, unknown>)[key];
    if (typeof child !== "object" || child === null || !Object.hasOwn(value, key)) continue;
    if (allowed <= 1 || deeperThan(child, allowed - 1, frames - 1)) return true;
  }
  return false;
}

/** {@link deeperThan} without recursion: two parallel stacks of objects and their levels. */
function deeperThanIteratively(value: object, allowed: number): boolean {
  const values: object[] = [value];
  const levels: number[] = [1];
  let top = 1;
  while (top > 0) {
    const item = values[--top]!;
    const level = levels[top]!;
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) {
        const child = item[i];
        if (typeof child !== "object" || child === null) continue;
        if (level >= allowed) return true;
        values[top] = child;
        levels[top++] = level + 1;
      }
    } else {
      for (const key in item) {
        const child = (item as Record<string, unknown>)[key];
        if (typeof child !== "object" || child === null || !Object.hasOwn(item, key)) continue;
        if (level >= allowed) return true;
        values[top] = child;
        levels[top++] = level + 1;
      }
    }
  }
  return false;
}

/**
 * Compare two JSON-like values structurally: key order does not matter, array order does,
 * keys holding `undefined` count as absent (as in `JSON.stringify`), `null` is a value.
 * @param a One value.
 * @param b Another value.
 * @returns `true` if they are equal as JSON.
 */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (isMapping(a) && isMapping(b)) {
    // Counted in place, without key arrays: this runs on every cycle's bodies and patches.
    let defined = 0;
    for (const key in a) {
      const value = a[key];
      if (value === undefined || !Object.hasOwn(a, key)) continue;
      if (!Object.hasOwn(b, key) || !deepEqual(value, b[key])) return false;
      defined++;
    }
    for (const key in b) {
      if (b[key] !== undefined && Object.hasOwn(b, key) && --defined < 0) return false;
    }
    return defined === 0;
  }
  return Number.isNaN(a) && Number.isNaN(b);
}

/** Assign an own property, even for keys like `__proto__` that plain assignment would misread. */
function assign(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(obj, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    obj[key] = value;
  }
}

/**
 * Applies a JSON merge patch (RFC 7386) to `target` in place: `null` removes a key, an object
 * merges into the object there (or replaces a non-object), anything else replaces the value.
 * @param target The object to change.
 * @param merge The merge patch.
 */
export function mergeInto(target: JsonObject, merge: JsonObject): void {
  for (const [key, value] of Object.entries(merge)) {
    if (value === null) delete target[key];
    else if (typeof value === "object" && !Array.isArray(value)) {
      const current = target[key];
      const next = current && typeof current === "object" && !Array.isArray(current)
        ? current as JsonObject
        : {};
      mergeInto(next, value as JsonObject);
      target[key] = next;
    } else target[key] = value;
  }
}
