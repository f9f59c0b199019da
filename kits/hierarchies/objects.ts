/**
 * The objects that the hierarchy functions accept (one, or nested iterables of them), their
 * flattening, and safe access to their metadata.
 * @module
 */

import { type FieldSpec, isMapping, parseField } from "../../core/structs/dicts.ts";
import type { KubeObjectLike } from "../../core/structs/typed.ts";

/**
 * One object or several: an iterable (usually an array) of objects or of further iterables;
 * `null` and `undefined` items are skipped. As in Kopf, the type declares two levels of
 * nesting, while any depth works at runtime.
 *
 * @example One, several, nested
 * ```ts
 * import type { KubeObjects } from "../hierarchies.ts";
 *
 * const one: KubeObjects = { kind: "Job" };
 * const many: KubeObjects = [{ kind: "Job" }, [{ kind: "Deployment" }], null];
 * ```
 */
export type KubeObjects =
  | KubeObjectLike
  | Iterable<KubeObjectLike | Iterable<KubeObjectLike | null | undefined> | null | undefined>;

/**
 * Nested structures that are treated like objects of their own (e.g. pod templates): one
 * dotted field (`"spec.template"`), or an array of fields, each dotted or as an array of keys.
 * As in Kopf, an array means several fields: `["spec", "template"]` is two fields, while
 * `[["spec", "template"]]` is one.
 *
 * @example Forms
 * ```ts
 * import type { NestedFields } from "../hierarchies.ts";
 *
 * const one: NestedFields = "spec.template";
 * const two: NestedFields = ["spec.template", "spec.jobTemplate.spec.template"];
 * const keys: NestedFields = [["spec", "template"]];
 * ```
 */
export type NestedFields = string | readonly FieldSpec[];

/** Flattens the objects (and their nested structures) into a list, validating the items. */
export function collect(
  objs: KubeObjects | null | undefined,
  nested?: NestedFields | null,
): Record<string, unknown>[] {
  const fields: readonly FieldSpec[] = typeof nested === "string" ? [nested] : nested ?? [];
  const found: Record<string, unknown>[] = [];
  walk(objs, fields, found);
  return found;
}

function walk(
  objs: unknown,
  nested: readonly FieldSpec[],
  found: Record<string, unknown>[],
): void {
  if (objs === null || objs === undefined) return;
  if (isMapping(objs)) {
    found.push(objs);
    for (const field of nested) {
      const sub = resolveNested(objs, field);
      if (sub !== undefined) found.push(sub);
    }
    return;
  }
  if (typeof objs === "object" && Symbol.iterator in objs) {
    for (const item of objs as Iterable<unknown>) walk(item, nested, found);
    return;
  }
  throw new TypeError(`Not a Kubernetes object (a plain object expected): ${describe(objs)}`);
}

/** A nested structure if present; absent ones give `undefined`, non-objects an error. */
function resolveNested(
  obj: Record<string, unknown>,
  field: FieldSpec,
): Record<string, unknown> | undefined {
  const path = parseField(field);
  let current: unknown = obj;
  for (const [index, key] of path.entries()) {
    if (!isMapping(current)) {
      const where = path.slice(0, index).join(".");
      throw new TypeError(`The nested field ${where} is not an object: ${describe(current)}`);
    }
    if (!Object.hasOwn(current, key) || current[key] === undefined) return undefined;
    current = current[key];
  }
  if (!isMapping(current)) {
    throw new TypeError(
      `The nested field ${path.join(".")} is not an object: ${describe(current)}`,
    );
  }
  return current;
}

/** The object's metadata, created if absent. */
export function metadataOf(obj: Record<string, unknown>): Record<string, unknown> {
  return mappingField(obj, "metadata");
}

/** A field that must hold an object; created as `{}` if absent (`undefined` or `null`). */
export function mappingField(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const value = Object.hasOwn(obj, key) ? obj[key] : undefined;
  if (absent(value)) {
    const fresh: Record<string, unknown> = {};
    setKey(obj, key, fresh);
    return fresh;
  }
  if (!isMapping(value)) {
    throw new TypeError(`The field ${key} is not an object: ${describe(value)}`);
  }
  return value;
}

/** A field of the owner's metadata, or `undefined`. */
export function metadataField(owner: KubeObjectLike, key: string): unknown {
  const meta = owner.metadata;
  return isMapping(meta) && Object.hasOwn(meta, key) ? meta[key] : undefined;
}

/** Kubernetes treats `null` and absent fields alike. */
export function absent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

/** Sets an own key, even `__proto__`, without touching the prototype. */
export function setKey(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A short description of an unexpected value, for error messages. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return `an instance of ${value.constructor?.name ?? "Object"}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}
