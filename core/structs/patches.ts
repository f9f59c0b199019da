/**
 * The patch accumulated during one processing cycle of one object, applied once at its end.
 *
 * A {@linkcode Patch} holds two things:
 *
 * - a JSON merge-patch body (RFC 7386) for everything the cycle wants to change: handler
 *   results in `status`, progress and diff-base annotations, user edits; `null` deletes a field;
 * - a list of JSON-patch operations (RFC 6902) for finalizers, because a merge patch can only
 *   replace the whole `metadata.finalizers` list and would drop other controllers' finalizers.
 *   Each removal is guarded by a `test` of the exact list element, each addition by a `test` of
 *   the whole list (or of its absence), so a concurrent change makes the request fail with 422
 *   instead of corrupting the list; the next cycle recomputes the operations.
 *
 * - transformation functions ({@linkcode Patch.fns}, Kopf 1.44's `patch.fns`) for changes that
 *   depend on the object's current state (list items, counters): they mutate a copy of the
 *   freshest known body, and the difference is sent as JSON-patch operations guarded by a `test`
 *   of `metadata.resourceVersion`.
 *
 * The patch does no I/O. {@linkcode Patch.toRequests} splits it into request bodies; whether the
 * status goes to the `/status` subresource is the caller's decision (it knows the resource).
 * @module
 */

// The package's ES module: its CommonJS entry would start the Node compatibility loader (MiBs).
// @ts-types="fast-json-patch"
import jsonpatch from "fast-json-patch/index.mjs";
import { type Diff, diff } from "./diffs.ts";
import { deepCopy, ensure, isMapping, type JsonObject, type JsonValue } from "./dicts.ts";

/** One JSON-patch (RFC 6902) operation, as sent to the API with `application/json-patch+json`. */
export type JsonPatchOp =
  | { readonly op: "add" | "replace" | "test"; readonly path: string; readonly value: JsonValue }
  | { readonly op: "remove"; readonly path: string }
  | { readonly op: "move" | "copy"; readonly from: string; readonly path: string };

/**
 * A transformation function for {@linkcode Patch.fns}: mutates the object's body in place (a deep
 * copy of the freshest known version). It may run more than once (after a conflict, against a
 * newer version), so it should look at the body before changing it.
 */
export type PatchFn = (body: JsonObject) => void;

/** The request bodies a patch turns into; `null` where there is nothing to send. */
export interface PatchRequests {
  /** Merge patch for the main endpoint (`application/merge-patch+json`). */
  readonly merge: JsonObject | null;
  /** Merge patch `{status: …}` for the `/status` subresource, if it is separate. */
  readonly statusMerge: JsonObject | null;
  /** JSON-patch operations for the main endpoint, to send after the merge patch. */
  readonly json: readonly JsonPatchOp[] | null;
}

/** Options for {@linkcode Patch.toRequests}. */
export interface PatchRequestsOptions {
  /** Whether the resource has a `status` subresource (status then goes to `/status`). */
  readonly statusSubresource: boolean;
  /**
   * If set, the JSON-patch operations start with a `test` of `/metadata/resourceVersion`, so
   * they apply only to exactly this version (take it from the merge-patch response).
   * @default {undefined}
   */
  readonly resourceVersion?: string;
}

/**
 * The top-level sections of a merge patch that are created on access and dropped when left
 * empty (as are `metadata.labels` and `metadata.annotations`, before them).
 */
const TOP_SECTIONS = ["metadata", "spec", "status"] as const;

/**
 * Whether a merge-patch body has anything left once the empty sections are pruned (as
 * `#pruned()` prunes them), without copying it: `metadata`, `spec` and `status` count only when
 * not empty, `metadata.labels` and `metadata.annotations` likewise.
 */
function hasContent(body: JsonObject, depth: number): boolean {
  for (const key in body) {
    const value = body[key];
    const section = depth === 0
      ? key === "metadata" || key === "spec" || key === "status"
      : key === "labels" || key === "annotations";
    if (!section || !isMapping(value)) return true;
    if (
      depth === 0 && key === "metadata"
        ? hasContent(value as JsonObject, 1)
        : Object.keys(value).length > 0
    ) {
      return true;
    }
  }
  return false;
}

/**
 * An accumulating patch for one object and one processing cycle.
 * @example Writing into sections
 * ```ts
 * import { Patch } from "./patches.ts";
 * const patch = new Patch();
 * patch.status["create_fn"] = { message: "done" };
 * patch.annotations["example.com/obsolete"] = null;
 * patch.toRequests({ statusSubresource: true });
 * // merge: {metadata: {annotations: {"example.com/obsolete": null}}},
 * // statusMerge: {status: {create_fn: {message: "done"}}}, json: null
 * ```
 */
export class Patch {
  #body: JsonObject;
  #ops: JsonPatchOp[] = [];
  /** The finalizers list as it will be after the ops so far; `undefined` until first used. */
  #finalizers: string[] | null | undefined = undefined;

  /**
   * Transformation functions, applied in order to a copy of the freshest known body after the
   * merge patch; their changes are sent as JSON-patch operations guarded by the body's
   * `resourceVersion` (on a conflict, re-applied to the re-read object). As Kopf's `patch.fns`.
   * @example Appending to a list, which a merge patch cannot do
   * ```ts
   * import { Patch } from "./patches.ts";
   * const patch = new Patch();
   * patch.fns.push((body) => {
   *   const spec = (body.spec ??= {}) as { items?: string[] };
   *   if (!spec.items?.includes("x")) (spec.items ??= []).push("x");
   * });
   * ```
   */
  readonly fns: PatchFn[] = [];

  /**
   * Create a patch, optionally with some initial merge-patch content (deep-copied).
   * @param init The initial merge-patch body.
   */
  constructor(init: JsonObject = {}) {
    this.#body = deepCopy(init);
  }

  /** The whole merge-patch body, live and mutable. Sections may be empty objects. */
  get body(): JsonObject {
    return this.#body;
  }

  /** The `metadata` section of the merge patch (created on access). */
  get metadata(): JsonObject {
    return this.#section("metadata");
  }

  /** The `metadata.labels` section (created on access); `null` values delete labels. */
  get labels(): Record<string, string | null> {
    return this.#section("metadata", "labels") as Record<string, string | null>;
  }

  /** The `metadata.annotations` section (created on access); `null` values delete them. */
  get annotations(): Record<string, string | null> {
    return this.#section("metadata", "annotations") as Record<string, string | null>;
  }

  /** The `spec` section of the merge patch (created on access). */
  get spec(): JsonObject {
    return this.#section("spec");
  }

  /** The `status` section of the merge patch (created on access). */
  get status(): JsonObject {
    return this.#section("status");
  }

  /** The finalizer JSON-patch operations recorded so far (without any resourceVersion test). */
  get jsonOps(): readonly JsonPatchOp[] {
    return this.#ops;
  }

  /** Whether there is nothing to send: no merge-patch content and no JSON-patch operations. */
  get isEmpty(): boolean {
    return this.#ops.length === 0 && this.fns.length === 0 && !hasContent(this.#body, 0);
  }

  /**
   * Add a finalizer unless the object (as amended by earlier calls) already has it.
   * @param body The object as last seen, for its current `metadata.finalizers`.
   * @param name The finalizer.
   */
  addFinalizer(body: unknown, name: string): void {
    const current = this.#currentFinalizers(body);
    if (current?.includes(name)) return;
    if (current === null) {
      this.#ops.push({ op: "test", path: "/metadata/finalizers", value: null });
      this.#ops.push({ op: "add", path: "/metadata/finalizers", value: [name] });
      this.#finalizers = [name];
    } else {
      this.#ops.push({ op: "test", path: "/metadata/finalizers", value: [...current] });
      this.#ops.push({ op: "add", path: "/metadata/finalizers/-", value: name });
      current.push(name);
    }
  }

  /**
   * Remove every occurrence of a finalizer, each guarded by a `test` of that exact element.
   * @param body The object as last seen, for its current `metadata.finalizers`.
   * @param name The finalizer.
   */
  removeFinalizer(body: unknown, name: string): void {
    const current = this.#currentFinalizers(body);
    for (let i = current?.indexOf(name) ?? -1; current && i >= 0; i = current.indexOf(name)) {
      this.#ops.push({ op: "test", path: `/metadata/finalizers/${i}`, value: name });
      this.#ops.push({ op: "remove", path: `/metadata/finalizers/${i}` });
      current.splice(i, 1);
    }
  }

  /**
   * Split the patch into request bodies: the merge patch (with `status` separated if the resource
   * has a status subresource) and the finalizer JSON-patch operations. Empty sections created by
   * the accessors are left out; nothing is shared with the patch (all deep copies). A whole-status
   * deletion (`status: null`) goes to `/status` too (Kopf would silently drop it).
   * @param options The status-subresource flag and an optional resourceVersion guard.
   * @returns The bodies to send, in order: merge, then statusMerge, then json.
   */
  toRequests(options: PatchRequestsOptions): PatchRequests {
    const merge = this.#pruned();
    let statusMerge: JsonObject | null = null;
    if (options.statusSubresource && Object.hasOwn(merge, "status")) {
      statusMerge = { status: merge["status"]! };
      delete merge["status"];
    }
    const guard: JsonPatchOp[] = options.resourceVersion === undefined ? [] : [
      { op: "test", path: "/metadata/resourceVersion", value: options.resourceVersion },
    ];
    return {
      merge: Object.keys(merge).length ? merge : null,
      statusMerge,
      json: this.#ops.length ? [...guard, ...deepCopy(this.#ops)] : null,
    };
  }

  /**
   * Express the whole patch as JSON-patch operations against a given body: the merge patch is
   * applied to a copy, the finalizer changes after it, and the two states are compared. Used for
   * mutating admission responses, where only JSON patches are allowed. No `test` operations.
   * @param body The object the operations will apply to.
   * @returns The operations; empty if the patch changes nothing in this body.
   */
  toJsonPatch(body: JsonObject): JsonPatchOp[] {
    const target = deepCopy(body);
    mergeInto(target, this.#pruned());
    if (this.#finalizers) ensure(target, ["metadata", "finalizers"], [...this.#finalizers]);
    for (const fn of this.fns) fn(target);
    return jsonpatch.compare(body, target) as JsonPatchOp[];
  }

  /**
   * The JSON-patch operations of {@linkcode Patch.fns} against a body: the functions mutate a
   * deep copy of it in order, and the copy is compared with it. No `test` operations.
   * @param body The freshest known object.
   * @returns The operations; empty when there are no functions or they change nothing.
   */
  fnsAsJsonPatch(body: JsonObject): JsonPatchOp[] {
    if (this.fns.length === 0) return [];
    const target = deepCopy(body);
    for (const fn of this.fns) fn(target);
    return jsonpatch.compare(body, target) as JsonPatchOp[];
  }

  /** Forget everything: merge-patch content, finalizer operations, transformation functions. */
  clear(): void {
    this.#body = {};
    this.#ops = [];
    this.#finalizers = undefined;
    this.fns.length = 0;
  }

  /**
   * The merge-patch body in JSON form, for `JSON.stringify`.
   *
   * @returns A deep copy with empty sections dropped.
   */
  toJSON(): JsonObject {
    return this.#pruned();
  }

  #section(...path: string[]): JsonObject {
    let current: JsonObject = this.#body;
    for (const key of path) {
      if (!Object.hasOwn(current, key)) current[key] = {};
      const next = current[key];
      if (!isMapping(next)) {
        throw new TypeError(`The patch has a non-object at ${path.join(".")}; cannot use it`);
      }
      current = next as JsonObject;
    }
    return current;
  }

  #currentFinalizers(body: unknown): string[] | null {
    if (this.#finalizers === undefined) {
      const meta = isMapping(body) ? body["metadata"] : undefined;
      const list = isMapping(meta) ? meta["finalizers"] : undefined;
      this.#finalizers = Array.isArray(list) ? list.map(String) : null;
    }
    return this.#finalizers;
  }

  /**
   * The merge-patch body with its empty sections dropped, for reading only: the values are the
   * patch's own (only the root and `metadata` are copies), so it costs next to nothing. Modify
   * neither it nor the patch while it is in use.
   * @returns The pruned body, sharing its values with the patch.
   */
  view(): JsonObject {
    return this.#pruned(false);
  }

  #pruned(deep = true): JsonObject {
    const copy = deep ? deepCopy(this.#body) : { ...this.#body };
    const meta = copy["metadata"];
    if (isMapping(meta)) {
      const metadata: JsonObject = deep ? meta as JsonObject : { ...meta as JsonObject };
      if (isEmptyMapping(metadata["labels"])) delete metadata["labels"];
      if (isEmptyMapping(metadata["annotations"])) delete metadata["annotations"];
      copy["metadata"] = metadata;
    }
    for (const section of TOP_SECTIONS) if (isEmptyMapping(copy[section])) delete copy[section];
    return copy;
  }
}

/** An object without keys. */
function isEmptyMapping(value: unknown): boolean {
  if (!isMapping(value)) return false;
  for (const key in value) if (Object.hasOwn(value, key)) return false;
  return true;
}

/**
 * Fields that the API server legitimately drops when they are sent empty: an empty object or list
 * there is not an inconsistency (as in Kopf).
 */
const EMPTY_WHEN_DROPPED = new Set([
  "metadata.finalizers",
  "metadata.labels",
  "metadata.annotations",
]);

/**
 * What a merge patch asked for but the stored object does not have: the fields of the patch
 * (and only those) compared with the object the API server returned for it.
 *
 * A field patched to `null` is consistent when it is absent from the result. Empty finalizers,
 * labels and annotations are ignored when absent from the result. The walk visits only the
 * patch's own keys, so it costs about as much as the patch is large.
 *
 * The typical cause of a mismatch under `status` is a CRD schema that prunes unknown fields.
 * @param merge The merge-patch body that was sent (e.g. {@linkcode Patch.toJSON}).
 * @param result The object as returned by the API server.
 * @returns The mismatches in Kopf's diff format, `[op, path, sent, stored]`; empty if consistent.
 * @example A status field pruned by the schema
 * ```ts
 * import { inconsistencies } from "./patches.ts";
 * inconsistencies({ status: { fn: { x: 1 } } }, { status: {} });
 * // [["remove", ["status", "fn"], { x: 1 }, null]]
 * ```
 */
export function inconsistencies(merge: JsonObject, result: unknown): Diff {
  return diff(merge, result, { scope: "left" }).filter(([, path, sent, stored]) =>
    !isEmpty(sent) || !isEmpty(stored) || !EMPTY_WHEN_DROPPED.has(path.join("."))
  );
}

function isEmpty(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (Array.isArray(value)) return value.length === 0;
  return isMapping(value) && Object.keys(value).length === 0;
}

/** Apply a merge patch (RFC 7386) to a target object in place. */
function mergeInto(target: Record<string, unknown>, patch: JsonObject): void {
  for (const [key, value] of Object.entries(patch)) {
    const existing = Object.hasOwn(target, key) ? target[key] : undefined;
    if (value === null) {
      delete target[key];
    } else if (isMapping(value)) {
      if (!isMapping(existing)) ensure(target, [key], {});
      mergeInto(target[key] as Record<string, unknown>, value as JsonObject);
    } else {
      ensure(target, [key], deepCopy(value));
    }
  }
}
