/**
 * The list+watch loop: a stall-proof, self-healing stream of object events for one resource
 * in one namespace (or cluster-wide).
 *
 * Recovery is an explicit state machine (after kube-rs' watcher): list → watch from the list's
 * resourceVersion → on a normal end, resume from the last seen resourceVersion → on `410 Gone`,
 * relist. A watchdog aborts a stream that stays silent (no events, no bookmarks) for longer
 * than the inactivity timeout and resumes it: a half-dead TCP connection cannot stall us. An
 * optional client-side timeout ends each watch request after a fixed time; it is resumed from
 * the last seen resourceVersion like a stream the server ended.
 * Errors are yielded, not thrown, and retried with backoff and jitter. Objects nested deeper
 * than `maxDepth` are refused at this door (a `refused` event naming them; a deletion comes with
 * the object's metadata only).
 *
 * {@link objectEvents} folds a relist into the stream: unchanged objects are flagged and
 * objects that vanished while the watch was broken are reported as deleted.
 *
 * Beside the loop, re-exported here: the events' types (`watch_events.ts`), the options and the
 * timeouts' errors (`watch_options.ts`), the reading of a watch body (`watch_stream.ts`), and
 * {@link objectEvents} (`object_events.ts`).
 * @module
 */

import { backoffDelay, sleep } from "../util/backoff.ts";
import type { KubeApi, ResourceRef } from "./api.ts";
import { ApiError } from "./errors.ts";
import type { ByteStream } from "./raw_stream.ts";
import { nestedDeeperThan } from "../structs/dicts.ts";
import type { KubeObject } from "../structs/objects.ts";
import {
  malformation,
  type RawWatchEvent,
  refusedStandIn,
  tooDeepReason,
  type WatcherEvent,
  type WatchStartReason,
} from "./watch_events.ts";
import {
  WatchClientTimeoutError,
  type WatcherOptions,
  WatchStalledError,
} from "./watch_options.ts";
import { readWatchEvents } from "./watch_stream.ts";

// What moved beside the loop stays importable from here (importers, `mod.ts`).
export {
  MalformedWatchLine,
  type RawWatchEvent,
  refusedStandIn,
  type WatcherEvent,
  type WatchStartReason,
} from "./watch_events.ts";
export {
  isRoutineSilence,
  WatchClientTimeoutError,
  type WatcherOptions,
  watchingOptions,
  WatchStalledError,
} from "./watch_options.ts";
export {
  readWatchEvents,
  WATCH_BUFFER_BYTES,
  WATCH_LINE_BYTES,
  type WatchLineLimits,
  WatchLineTooLongError,
} from "./watch_stream.ts";
export { type ObjectEvent, objectEvents } from "./object_events.ts";

/** The annotation of the bookmark that ends the initial events of a streaming list. */
const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

function isGone(error: unknown): boolean {
  return error instanceof ApiError && (error.code === 410 || error.reason === "Expired");
}

/**
 * An endless list+watch stream of one resource that survives timeouts, stalls, 410 Gone and
 * network failures. Ends only when the signal aborts.
 *
 * Guarantees: after every `init`…`initDone` sequence the consumer has seen every object that
 * exists; later `apply`/`delete` events are in resourceVersion order. Caveat: objects deleted
 * while a relist was needed are not reported by this stage (see {@link objectEvents}).
 *
 * @param api Object operations to use.
 * @param resource The resource to watch.
 * @param options Namespace, selectors, timeouts, signal.
 * @returns The stream of watcher events.
 */
export async function* watcher(
  api: KubeApi,
  resource: ResourceRef,
  options: WatcherOptions = {},
): AsyncGenerator<WatcherEvent> {
  const signal = options.signal;
  const inactivityMs = options.inactivityTimeoutMs ?? 90_000;
  let resourceVersion: string | undefined;
  let failures = 0;
  let reason: WatchStartReason = "initial";
  let silent = false; // the last request went silent, and nothing came since
  const selectors = {
    namespace: options.namespace,
    labelSelector: options.labelSelector,
    fieldSelector: options.fieldSelector,
    shardSelector: options.shardSelector,
  };
  const accept = options.accept ?? (() => true);
  // Objects nested too deep for the framework's recursive copies and diffs are refused here, at
  // the door: measured without recursion, and only when a limit is set.
  const maxDepth = options.maxDepth;
  const tooDeep = maxDepth === undefined
    ? () => false
    : (object: KubeObject) => nestedDeeperThan(object, maxDepth);
  const refused = (object: KubeObject): WatcherEvent => ({
    type: "refused",
    reason: tooDeepReason(object, maxDepth ?? Infinity),
    object: refusedStandIn(object),
  });
  while (!signal?.aborted) {
    try {
      // A streaming list: the objects arrive as the watch's first events (see below).
      let streaming = false;
      if (resourceVersion === undefined && options.initialStreaming) {
        yield { type: "init" };
        streaming = true;
      } else if (resourceVersion === undefined) {
        yield { type: "init" };
        let listedVersion = "";
        for await (
          const page of api.listPages(resource, { ...selectors, limit: options.pageSize, signal })
        ) {
          for (const object of page.items) {
            if (!accept(object)) continue;
            yield tooDeep(object) ? refused(object) : { type: "initApply", object };
          }
          listedVersion = page.metadata?.resourceVersion ?? listedVersion;
        }
        resourceVersion = listedVersion;
        yield { type: "initDone", resourceVersion };
      }
      const controller = new AbortController();
      const stop = () => controller.abort(signal?.reason);
      signal?.addEventListener("abort", stop, { once: true });
      // Also guards the connection phase: a server that accepts but never answers is a stall.
      const connectTimer = setTimeout(
        () => controller.abort(new WatchStalledError(inactivityMs)),
        inactivityMs,
      );
      const clientMs = options.clientTimeoutMs;
      const clientTimer = clientMs
        ? setTimeout(() => controller.abort(new WatchClientTimeoutError(clientMs)), clientMs)
        : undefined;
      try {
        let response: ByteStream;
        try {
          response = await api.watchBytes(resource, {
            ...selectors,
            ...(streaming ? { sendInitialEvents: true } : { resourceVersion }),
            allowBookmarks: true,
            timeoutSeconds: options.serverTimeoutSeconds === null
              ? undefined
              : options.serverTimeoutSeconds ?? 300,
            connectTimeoutMs: options.connectTimeoutMs,
            signal: controller.signal,
          });
        } catch (error) {
          // Timing out before any answer is a failure (retried at once), not a normal end.
          const reason = controller.signal.reason;
          if (reason instanceof WatchStalledError || reason instanceof WatchClientTimeoutError) {
            throw reason;
          }
          throw error;
        } finally {
          clearTimeout(connectTimer);
        }
        yield { type: "connected", resourceVersion: resourceVersion ?? "", reason };
        reason = "end";
        try {
          const events = readWatchEvents(response, inactivityMs, controller, undefined, {
            maxLineBytes: options.maxLineBytes,
            resource: resource.group ? `${resource.plural}.${resource.group}` : resource.plural,
          });
          for await (const line of events) {
            failures = 0;
            silent = false;
            const problem = malformation(line);
            if (problem) {
              yield { type: "skipped", reason: problem };
              continue;
            }
            const event = line as RawWatchEvent;
            const version = event.object?.metadata?.resourceVersion;
            if (streaming) {
              // Until the bookmark that ends them, the objects' own versions are not a position.
              const ended = event.type === "BOOKMARK" &&
                event.object?.metadata?.annotations?.[INITIAL_EVENTS_END] === "true";
              if (event.type === "ADDED" && accept(event.object)) {
                yield tooDeep(event.object)
                  ? refused(event.object)
                  : { type: "initApply", object: event.object };
              } else if (ended && version) {
                resourceVersion = version;
                streaming = false;
                yield { type: "initDone", resourceVersion };
              }
              if (event.type !== "ERROR") continue;
            }
            switch (event.type) {
              case "ADDED":
              case "MODIFIED":
                if (version) resourceVersion = version;
                if (accept(event.object)) {
                  yield tooDeep(event.object)
                    ? refused(event.object)
                    : { type: "apply", object: event.object, raw: event.type };
                }
                break;
              case "DELETED":
                if (version) resourceVersion = version;
                if (accept(event.object)) {
                  // Even refused, a deletion is reported, so that consumers forget the object.
                  const object = tooDeep(event.object)
                    ? refusedStandIn(event.object)
                    : event.object;
                  yield { type: "delete", object };
                }
                break;
              case "BOOKMARK":
                if (version) resourceVersion = version;
                yield { type: "bookmark", resourceVersion: resourceVersion ?? "" };
                break;
              case "ERROR": {
                const status = event.object as { code?: number; reason?: string; message?: string };
                throw new ApiError({
                  code: status.code ?? 500,
                  reason: status.reason ?? "InternalError",
                  message: status.message ?? "watch error",
                  request: {
                    method: "GET",
                    path: `watch ${resource.plural}`,
                    server: api.http.connection.server,
                  },
                });
              }
            }
          }
        } catch (error) {
          // Silent after the server had answered: told apart from a request never answered.
          if (error instanceof WatchStalledError && !error.connected && !signal?.aborted) {
            const repeated = silent;
            silent = true;
            throw new WatchStalledError(error.ms, { connected: true, repeated });
          }
          // The request lived as long as allowed: resume from the last version, as after a
          // server-side timeout.
          if (!(error instanceof WatchClientTimeoutError) || signal?.aborted) throw error;
        }
      } finally {
        clearTimeout(clientTimer);
        signal?.removeEventListener("abort", stop);
      }

      // The server (timeoutSeconds) or the client-side timeout ended the stream: resume after a
      // short pause.
      await sleep(options.reconnectBackoffMs ?? 100, signal).catch(() => {});
    } catch (error) {
      if (signal?.aborted) return;
      if (isGone(error)) {
        resourceVersion = undefined; // relist immediately: the history we need is compacted away
        reason = "gone";
        continue;
      }
      reason = error instanceof WatchStalledError || error instanceof WatchClientTimeoutError
        ? "stall"
        : "error";
      // A stall (or no answer within the client-side timeout) reconnects at once; a 429 waits as
      // long as the server asks; others back off.
      const retryInMs =
        error instanceof WatchStalledError || error instanceof WatchClientTimeoutError
          ? 0
          : error instanceof ApiError && error.retryAfterMs !== undefined
          ? (failures++, error.retryAfterMs)
          : backoffDelay(failures++, options.backoff);
      yield {
        type: "error",
        error: error instanceof Error ? error : new Error(String(error)),
        retryInMs,
      };
      try {
        await sleep(retryInMs, signal);
      } catch {
        return;
      }
    }
  }
}
