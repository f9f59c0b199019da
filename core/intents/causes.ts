/**
 * Cause detection: why the resource-changing handlers of an object should run now.
 *
 * Order (as in Kopf): the object is gone → `gone`; deletion requested and our finalizer is
 * absent → `free`; deletion requested with our finalizer → `delete`; never handled (no diff-base)
 * → `create`; no essential change and first seen by this process → `resume`; no essential change
 * → `noop`; otherwise `update` (marked `initial` when first seen, so resume handlers join in).
 * @module
 */

import { type Diff, diff as computeDiff } from "../structs/diffs.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { CauseReason } from "./handlers.ts";

/** The detected cause and the data the handlers see. */
export interface ChangingCause {
  /** Why the handlers run. */
  readonly reason: CauseReason;
  /** First time this process sees the object (initial listing or first event). */
  readonly initial: boolean;
  /** The last handled essence (undefined if never handled). */
  readonly old: Record<string, unknown> | undefined;
  /** The current essence. */
  readonly new: Record<string, unknown>;
  /** The essential difference between `old` and `new`. */
  readonly diff: Diff;
}

/** What cause detection needs to know. */
export interface CauseInputs {
  /** The object as last seen. */
  readonly body: KubeObject;
  /** Whether the watch reported the object as deleted. */
  readonly deleted: boolean;
  /** The finalizer name the operator uses. */
  readonly finalizer: string;
  /** The last handled essence, from the diff-base storage. */
  readonly old: Record<string, unknown> | undefined;
  /** The current essence. */
  readonly new: Record<string, unknown>;
  /** Whether this process has not finished handling the object yet since it started. */
  readonly initial: boolean;
}

/** Whether deletion of the object was requested. */
export function isDeletionRequested(body: KubeObject): boolean {
  return Boolean(body.metadata?.deletionTimestamp);
}

/** Whether the object carries the given finalizer. */
export function hasFinalizer(body: KubeObject, finalizer: string): boolean {
  return body.metadata?.finalizers?.includes(finalizer) ?? false;
}

/**
 * Detects the cause for resource-changing handlers.
 * @param inputs The object, its stored essence and flags.
 * @returns The cause.
 */
export function detectChangingCause(inputs: CauseInputs): ChangingCause {
  const { body, old, initial } = inputs;
  const common = { initial, old, new: inputs.new };
  if (inputs.deleted) return { ...common, reason: "gone", diff: [] };
  if (isDeletionRequested(body)) {
    const reason = hasFinalizer(body, inputs.finalizer) ? "delete" : "free";
    return { ...common, reason, diff: [] };
  }
  if (old === undefined) {
    return { ...common, reason: "create", diff: computeDiff(undefined, inputs.new) };
  }
  const diff = computeDiff(old, inputs.new);
  if (diff.length === 0) return { ...common, reason: initial ? "resume" : "noop", diff };
  return { ...common, reason: "update", diff };
}
