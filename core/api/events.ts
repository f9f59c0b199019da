/**
 * Posting Kubernetes Events explicitly from handlers: `event`, `info`, `warn`, `exception`.
 * Events may be about any object (with apiVersion, kind, metadata.name/uid/namespace). They go
 * through the operator's aggregated, rate-limited poster and obey `settings.posting.enabled`;
 * as in Kopf, `info`, `warn` and `exception` also obey `settings.posting.level` (as `info`,
 * `warning` and `error`), while `event` posts at any level. They are posted whether or not
 * `settings.posting.loggers` is on. Events about Events are silently skipped.
 *
 * @example
 * ```ts
 * import { info } from "./events.ts";
 * import { on } from "./on.ts";
 * on.create("kopfexamples", ({ body }) => {
 *   info(body, { reason: "SomeReason", message: "Some message" });
 * });
 * ```
 * @module
 */

import { buildObjectReference } from "../actions/loggers.ts";
import { currentPosters } from "../engines/observability/posting.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { KubeObjectLike } from "../structs/typed.ts";
import type { LogLevel } from "../settings/settings.ts";

/** What an explicit Event says. */
export interface EventMessage {
  /** CamelCase reason without spaces, e.g. `SomeReason`. */
  readonly reason: string;
  /** Human-readable message. @default "" */
  readonly message?: string;
  /**
   * Retry delays (seconds) if posting fails, one retry each (a number: one retry); as Kopf
   * 1.45's `backoffs=`. @default settings.posting.defaultBackoffs
   */
  readonly backoffs?: number | readonly number[];
}

/**
 * Posts an Event of any type about one or several objects.
 * @param objects The object(s) the Event is about.
 * @param options Type, reason and message.
 */
export function event(
  objects: KubeObjectLike | readonly KubeObjectLike[],
  options: EventMessage & { readonly type: string },
): void {
  post(objects, options, undefined);
}

function post(
  objects: KubeObjectLike | readonly KubeObjectLike[],
  options: EventMessage & { readonly type: string },
  level: LogLevel | undefined,
): void {
  const list = Array.isArray(objects) ? objects as readonly KubeObject[] : [objects as KubeObject];
  for (const poster of currentPosters()) {
    if (level !== undefined && !poster.acceptsExplicit(level)) continue;
    for (const object of list) {
      poster.enqueue({
        ref: buildObjectReference(object),
        type: options.type,
        reason: options.reason,
        message: options.message ?? "",
        backoffs: options.backoffs,
      });
    }
  }
}

/**
 * Posts a `Normal` Event.
 * @param objects The object(s).
 * @param options Reason and message.
 */
export function info(
  objects: KubeObjectLike | readonly KubeObjectLike[],
  options: EventMessage,
): void {
  post(objects, { ...options, type: "Normal" }, "info");
}

/**
 * Posts a `Warning` Event.
 * @param objects The object(s).
 * @param options Reason and message.
 */
export function warn(
  objects: KubeObjectLike | readonly KubeObjectLike[],
  options: EventMessage,
): void {
  post(objects, { ...options, type: "Warning" }, "warning");
}

/**
 * Posts an `Error` Event about an error; the reason defaults to the error's name and the
 * message is followed by the error's message.
 * @param objects The object(s).
 * @param options The error, and optionally reason and message.
 */
export function exception(
  objects: KubeObjectLike | readonly KubeObjectLike[],
  options: { readonly error?: unknown; readonly reason?: string; readonly message?: string } = {},
): void {
  const error = options.error;
  const name = error instanceof Error ? error.name : "Error";
  const detail = error instanceof Error ? error.message : error === undefined ? "" : String(error);
  const message = [options.message, detail].filter(Boolean).join(" ");
  post(objects, { type: "Error", reason: options.reason || name, message }, "error");
}
