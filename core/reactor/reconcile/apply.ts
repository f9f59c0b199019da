/**
 * Private helpers of the reconcile controller: deciding that a write would change nothing, so
 * that a reconcile of an object already in its desired state sends no request at all.
 *
 * - {@link contains}: whether a stored object already has every field an applied configuration
 *   states, with the same values (server defaults on top are fine).
 * - {@link mergedEquals}: whether a merge patch would leave an object as it is.
 * @module
 */

import { deepEqual, isMapping } from "../../structs/dicts.ts";

/**
 * Whether `actual` has every field of `desired` with the same value. Maps may have more keys;
 * lists must have the same length, item by item contained; an empty map is contained in a
 * missing one (the API server drops empty maps).
 *
 * @param actual The stored value.
 * @param desired The stated value.
 * @returns Whether applying `desired` would change nothing it states.
 */
export function contains(actual: unknown, desired: unknown): boolean {
  if (isMapping(desired)) {
    if (actual === undefined && Object.keys(desired).length === 0) return true;
    if (!isMapping(actual)) return false;
    return Object.entries(desired).every(([key, value]) => contains(actual[key], value));
  }
  if (Array.isArray(desired)) {
    return Array.isArray(actual) && actual.length === desired.length &&
      desired.every((value, i) => contains(actual[i], value));
  }
  return actual === desired;
}

/**
 * The first path where `actual` does not contain `desired` (for debug logs).
 *
 * @param actual The stored value.
 * @param desired The stated value.
 * @param path The path so far.
 * @returns A dotted path, or `undefined` when `actual` contains `desired`.
 */
export function firstDifference(actual: unknown, desired: unknown, path = ""): string | undefined {
  if (contains(actual, desired)) return undefined;
  if (isMapping(desired) && isMapping(actual)) {
    for (const [key, value] of Object.entries(desired)) {
      const found = firstDifference(actual[key], value, `${path}.${key}`);
      if (found) return found;
    }
  }
  if (Array.isArray(desired) && Array.isArray(actual) && actual.length === desired.length) {
    for (const [i, value] of desired.entries()) {
      const found = firstDifference(actual[i], value, `${path}[${i}]`);
      if (found) return found;
    }
  }
  return path || ".";
}

/**
 * Whether a JSON merge patch (RFC 7386) leaves an object unchanged.
 *
 * @param target The object.
 * @param patch The merge patch.
 * @returns `true` when applying it would change nothing.
 */
export function mergedEquals(target: unknown, patch: unknown): boolean {
  if (!isMapping(patch)) return deepEqual(target, patch);
  const current = isMapping(target) ? target : undefined;
  for (const [key, value] of Object.entries(patch)) {
    const before = current?.[key];
    if (value === null) {
      if (before !== undefined) return false;
    } else if (isMapping(value)) {
      // An empty map creates the key when missing; otherwise it changes nothing.
      if (before === undefined && Object.keys(value).length) return false;
      if (before !== undefined && !mergedEquals(before, value)) return false;
    } else if (!deepEqual(before, value)) return false;
  }
  return true;
}
