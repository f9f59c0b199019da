/**
 * The API server's limit on an object's annotations (keys and values, in bytes), and a cheap
 * check of whether a patch would take an object over it (the diff-base storage then keeps its
 * essence elsewhere).
 * @module
 */

import { isMapping, type Mapping, resolve } from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";

/** Kubernetes' limit on the total size of an object's annotations: keys and values, in bytes. */
export const ANNOTATIONS_SIZE_LIMIT = 262_144;

/**
 * Whether the annotations of `body`, changed by the patch and by `extra`, exceed
 * {@link ANNOTATIONS_SIZE_LIMIT}. Cheap for ordinary objects: bytes are counted only when an
 * upper bound of the characters could exceed the limit (UTF-8 takes at most 3 bytes per UTF-16
 * unit).
 * @param body The object as it is.
 * @param patch The patch to be sent (its annotations replace the body's).
 * @param extra Annotations to be added beside the patch's.
 * @returns Whether the patched annotations would be over the limit.
 */
export function annotationsExceed(
  body: Mapping,
  patch: Patch,
  extra: ReadonlyMap<string, string>,
): boolean {
  const current = resolve(body, ["metadata", "annotations"]);
  const patched = resolve(patch.body, ["metadata", "annotations"]);
  // An upper bound first (replaced values counted twice), without building anything.
  let bound = 0;
  for (const source of [current, patched]) {
    if (!isMapping(source)) continue;
    for (const k in source) {
      const v = source[k];
      if (typeof v === "string") bound += k.length + v.length;
    }
  }
  for (const [k, v] of extra) bound += k.length + v.length;
  if (bound * 3 <= ANNOTATIONS_SIZE_LIMIT) return false;
  const entries: Array<[string, unknown]> = [];
  if (isMapping(current)) {
    for (const [k, v] of Object.entries(current)) {
      if (!extra.has(k) && !(isMapping(patched) && k in patched)) entries.push([k, v]);
    }
  }
  if (isMapping(patched)) {
    for (const [k, v] of Object.entries(patched)) if (!extra.has(k)) entries.push([k, v]);
  }
  entries.push(...extra);
  const encoder = new TextEncoder();
  let bytes = 0;
  for (const [k, v] of entries) {
    if (typeof v === "string") bytes += encoder.encode(k).length + encoder.encode(v).length;
  }
  return bytes > ANNOTATIONS_SIZE_LIMIT;
}
