/**
 * The vocabulary of watch streams: the events as the API server sends them
 * ({@link RawWatchEvent}, with {@link MalformedWatchLine} and {@link malformation} for lines that
 * are not usable), and the events the list+watch loop yields ({@link WatcherEvent}).
 *
 * Re-exported by `watching.ts`, which importers use.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";

/** One event as the API server sends it on a watch stream. */
export interface RawWatchEvent {
  /** Event type. */
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  /** The object (a `Status` for ERROR). */
  readonly object: KubeObject;
}

/** What the list+watch loop (`watcher()` in `watching.ts`) yields. */
export type WatcherEvent =
  | { readonly type: "init" }
  | { readonly type: "initApply"; readonly object: KubeObject }
  | { readonly type: "initDone"; readonly resourceVersion: string }
  | { readonly type: "apply"; readonly object: KubeObject; readonly raw: "ADDED" | "MODIFIED" }
  | { readonly type: "delete"; readonly object: KubeObject }
  | { readonly type: "bookmark"; readonly resourceVersion: string }
  | {
    readonly type: "connected";
    readonly resourceVersion: string;
    /** Why this watch request was opened (what ended the previous one). */
    readonly reason: WatchStartReason;
  }
  | { readonly type: "error"; readonly error: Error; readonly retryInMs: number }
  /** A line of the stream that is not a usable event: ignored; the stream goes on. */
  | { readonly type: "skipped"; readonly reason: string }
  /**
   * An object nested deeper than `maxDepth`, not reported as it is: `object` is its stand-in
   * ({@link refusedStandIn}); the stream goes on.
   */
  | { readonly type: "refused"; readonly reason: string; readonly object: KubeObject };

/**
 * Why a watch request was opened: the stream's first one (`initial`), after the previous one
 * ended normally (`end`: the server's or the client-side timeout), after `410 Gone` and a relist
 * (`gone`), after a silent stream was aborted (`stall`), or after a failure (`error`).
 */
export type WatchStartReason = "initial" | "end" | "gone" | "stall" | "error";

/**
 * A line of a watch stream that is not valid JSON. Only its length is kept: watch streams can
 * carry secrets, which must not reach a log line.
 */
export class MalformedWatchLine {
  /** @param length The line's length in characters. */
  constructor(readonly length: number) {}
}

const EVENT_TYPES = new Set(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]);

/**
 * Why a line of a watch stream cannot be used (not JSON, an unknown type, no object, an object
 * without a name), if it cannot.
 *
 * @param event A parsed line of a watch stream.
 * @returns A description safe to log (no content of the line), or `undefined` when usable.
 */
export function malformation(event: RawWatchEvent | MalformedWatchLine): string | undefined {
  if (event instanceof MalformedWatchLine) {
    return `a line that is not JSON (${event.length} characters)`;
  }
  const raw = event as { type?: unknown; object?: unknown };
  if (typeof raw.type !== "string" || !EVENT_TYPES.has(raw.type)) {
    return `an event of unexpected type ${JSON.stringify(raw.type ?? null).slice(0, 40)}`;
  }
  const object = raw.object as KubeObject | undefined;
  if (typeof object !== "object" || object === null || Array.isArray(object)) {
    return `a ${raw.type} event without an object`;
  }
  if (raw.type === "ERROR" || raw.type === "BOOKMARK") return undefined;
  const meta = object.metadata;
  if (typeof meta !== "object" || meta === null || typeof meta.name !== "string" || !meta.name) {
    return `a ${raw.type} event with an object without metadata.name`;
  }
  return undefined;
}

/**
 * What is reported of an object refused for its depth: its `apiVersion`, `kind` and `metadata`
 * without `managedFields` — the only part of the metadata that can be nested as deep as the
 * object (it mirrors the object's fields); the rest of `ObjectMeta` is typed and shallow. Enough
 * to name the object in a log line and an Event, and to forget it when it is deleted.
 *
 * @param object The refused object.
 * @returns A new, shallow object; the original is not changed.
 */
export function refusedStandIn(object: KubeObject): KubeObject {
  const { managedFields: _, ...metadata } = object.metadata ?? {};
  return {
    ...(object.apiVersion !== undefined ? { apiVersion: object.apiVersion } : {}),
    ...(object.kind !== undefined ? { kind: object.kind } : {}),
    metadata,
  };
}

/**
 * The reason of a `refused` event (an object nested too deep): kind, namespace/name, limit.
 *
 * @param object The refused object.
 * @param maxDepth The limit it passed.
 * @returns A description safe to log (no content of the object).
 */
export function tooDeepReason(object: KubeObject, maxDepth: number): string {
  const meta = object.metadata ?? {};
  const name = [meta.namespace, meta.name].filter(Boolean).join("/");
  return `${object.kind ?? "an object"} ${JSON.stringify(name)} nested deeper than ${maxDepth} ` +
    `levels`;
}
