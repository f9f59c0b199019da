/**
 * Handler filters: labels and annotations (values, presence markers, per-value callbacks),
 * field values, and whole-object `when` callbacks, plus the callback combinators.
 *
 * All criteria are AND-ed. Filters only read; they never change the object.
 * @module
 */

import { deepEqual, type FieldPath, resolve } from "../structs/dicts.ts";

/** Marker: the label, annotation or field must be present (any value, even empty). */
export const PRESENT: unique symbol = Symbol.for("kopf.PRESENT");
/** Marker: the label, annotation or field must be absent. */
export const ABSENT: unique symbol = Symbol.for("kopf.ABSENT");

/**
 * A check of one value: `(value, context) => boolean`; `value` is `undefined` when absent.
 * The context type defaults to `never` so that callbacks typed for any context are accepted.
 */
export type ValueCallback<C = never> = (value: unknown, context: C) => boolean;
/** A check of the whole object and its context. */
export type WhenCallback<C = never> = (context: C) => boolean;

/** What a label, annotation or field value is compared with. */
export type ValueFilter =
  | string
  | number
  | boolean
  | null
  | typeof PRESENT
  | typeof ABSENT
  | ValueCallback
  | object;

/** Label or annotation filters by key. */
export type MetaFilter = Readonly<
  Record<string, string | typeof PRESENT | typeof ABSENT | ValueCallback>
>;

/**
 * Whether one value passes a filter.
 *
 * @param filter A literal (deep-equal), PRESENT, ABSENT or a callback.
 * @param value The actual value; `undefined` (or `null`) means absent.
 * @param context Passed to callbacks.
 * @returns Whether it matches.
 */
export function matchValue(filter: ValueFilter, value: unknown, context: unknown): boolean {
  const absent = value === undefined || value === null;
  if (filter === PRESENT) return !absent;
  if (filter === ABSENT) return absent;
  if (typeof filter === "function") {
    return Boolean((filter as ValueCallback<unknown>)(absent ? undefined : value, context));
  }
  return !absent && deepEqual(filter, value);
}

/**
 * Whether a mapping (labels or annotations) passes all key filters.
 * @param filters Filters by key.
 * @param mapping The object's labels or annotations.
 * @param context Passed to callbacks.
 * @returns Whether every filter matches.
 */
export function matchMeta(
  filters: MetaFilter | undefined,
  mapping: Readonly<Record<string, string>> | undefined,
  context: unknown,
): boolean {
  if (!filters) return true;
  for (const [key, filter] of Object.entries(filters)) {
    const value = mapping && Object.hasOwn(mapping, key) ? mapping[key] : undefined;
    if (!matchValue(filter, value, context)) return false;
  }
  return true;
}

/**
 * Whether a field of an object passes a value filter.
 * @param field The dotted path.
 * @param filter The value filter; `undefined` means PRESENT.
 * @param body The object (or essence).
 * @param context Passed to callbacks.
 * @returns Whether it matches.
 */
export function matchField(
  field: FieldPath,
  filter: ValueFilter | undefined,
  body: unknown,
  context: unknown,
): boolean {
  return matchValue(filter === undefined ? PRESENT : filter, resolve(body, field), context);
}

/**
 * Inverts a callback: passes when it returns false.
 *
 * @param fn The callback.
 * @returns The inverted callback.
 */
export function not_<A extends unknown[]>(fn: (...args: A) => boolean): (...args: A) => boolean {
  return (...args: A) => !fn(...args);
}

/**
 * Combines callbacks: passes when all of them return true.
 *
 * @param fns The callbacks.
 * @returns The combined callback.
 */
export function all_<A extends unknown[]>(
  fns: ReadonlyArray<(...args: A) => boolean>,
): (...args: A) => boolean {
  return (...args: A) => fns.every((fn) => fn(...args));
}

/**
 * Combines callbacks: passes when at least one of them returns true.
 *
 * @param fns The callbacks.
 * @returns The combined callback.
 */
export function any_<A extends unknown[]>(
  fns: ReadonlyArray<(...args: A) => boolean>,
): (...args: A) => boolean {
  return (...args: A) => fns.some((fn) => fn(...args));
}

/**
 * Combines callbacks: passes when none of them returns true.
 *
 * @param fns The callbacks.
 * @returns The combined callback.
 */
export function none_<A extends unknown[]>(
  fns: ReadonlyArray<(...args: A) => boolean>,
): (...args: A) => boolean {
  return (...args: A) => !fns.some((fn) => fn(...args));
}
