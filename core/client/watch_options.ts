/**
 * What the list+watch loop (`watcher()` in `watching.ts`) takes: {@link WatcherOptions}, built
 * from the operator's settings by {@link watchingOptions}, and the errors its timeouts abort a
 * watch request with ({@link WatchStalledError}, {@link WatchClientTimeoutError}).
 *
 * Re-exported by `watching.ts`, which importers use.
 * @module
 */

import type { BackoffOptions } from "../util/backoff.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { WatchingSettings } from "../settings/settings.ts";

/** Options of the list+watch loop (`watcher()` in `watching.ts`). */
export interface WatcherOptions {
  /** Namespace to watch; omitted = cluster-wide (or cluster-scoped resources). */
  readonly namespace?: string | undefined;
  /** Server-side label selector. */
  readonly labelSelector?: string | undefined;
  /** Server-side field selector. */
  readonly fieldSelector?: string | undefined;
  /**
   * Server-side shard selector (`shardSelector`, Kubernetes 1.36+); servers without sharded
   * watches ignore it and send everything, so pair it with `accept`.
   */
  readonly shardSelector?: string | undefined;
  /**
   * Client-side filter: objects it rejects are not reported, as if the server had filtered them
   * (it must judge by immutable fields, e.g. the uid's shard).
   */
  readonly accept?: ((object: KubeObject) => boolean) | undefined;
  /**
   * Start with a streaming list (`sendInitialEvents`) instead of a paged list: the objects come
   * as the watch's first events, up to the bookmark that ends them. @default false
   */
  readonly initialStreaming?: boolean | undefined;
  /**
   * Server closes each watch request after this many seconds; we then resume. `null`: none is
   * sent (the server's own default). @default 300
   */
  readonly serverTimeoutSeconds?: number | null | undefined;
  /** A stream silent for this long is considered stalled and reopened. @default 90000 */
  readonly inactivityTimeoutMs?: number | undefined;
  /** Pause before reopening a stream the server ended normally. @default 100 */
  readonly reconnectBackoffMs?: number | undefined;
  /**
   * Longest wait for a watch request's response headers (see `HttpRequest.connectTimeoutMs`);
   * unset: the client's connect timeout, else its request timeout.
   */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * Longest duration of one watch request, connecting included; then it is closed from this side
   * and resumed from the last seen resourceVersion (no relist, no event lost). Unset: no limit.
   */
  readonly clientTimeoutMs?: number | undefined;
  /**
   * Longest watch event (one line of the stream) in bytes; a longer one closes the stream with
   * a `WatchLineTooLongError`, reported as an error and retried with backoff.
   * @default 16 MiB (`WATCH_LINE_BYTES`)
   */
  readonly maxLineBytes?: number | undefined;
  /**
   * Objects nested deeper than this many levels are not reported as they are: an addition or
   * change is replaced by a `refused` event that carries the object's identity
   * (`refusedStandIn()` in `watch_events.ts`), a deletion is reported with that stand-in as its object.
   * Unset: no limit.
   */
  readonly maxDepth?: number | undefined;
  /** Backoff between failed attempts. */
  readonly backoff?: BackoffOptions | undefined;
  /** Page size of the initial and recovery lists (`0`: one request for all). @default 500 */
  readonly pageSize?: number | undefined;
  /** Stops the loop. */
  readonly signal?: AbortSignal | undefined;
}

/** The watch stream stayed silent past the inactivity timeout. */
export class WatchStalledError extends Error {
  /** The inactivity timeout that expired, in milliseconds. */
  readonly ms: number;
  /**
   * Whether the API server had answered the request (the stream was open, then silent). Normal
   * for a resource that nothing changes: kube-apiserver sends a bookmark only when the
   * resource's version has moved on since the last one. `false`: the request got no answer.
   */
  readonly connected: boolean;
  /** Whether the stream's previous request went silent too, with nothing received since. */
  readonly repeated: boolean;
  /**
   * Creates the error of a silent watch stream or request.
   *
   * @param ms The inactivity timeout that expired.
   * @param options `connected`: the server had answered before the silence; `repeated`: the
   *   previous request of the stream went silent too, with nothing received since.
   */
  constructor(
    ms: number,
    options: { readonly connected?: boolean; readonly repeated?: boolean } = {},
  ) {
    super(
      options.connected
        ? `Watch stream was silent for ${ms} ms (no events, no bookmarks: nothing changed, or ` +
          "the connection was lost); reconnecting"
        : `Watch request was silent for ${ms} ms (no answer from the API server); reconnecting`,
    );
    this.name = "WatchStalledError";
    this.ms = ms;
    this.connected = options.connected ?? false;
    this.repeated = options.repeated ?? false;
  }
}

/**
 * Whether a watch failure is worth an INFO line only, not a WARNING: a stream the server had
 * answered went silent past the inactivity timeout once (a bookmark late or lost). Silence again
 * right after, a request never answered, and every other failure are warnings.
 * @param error The failure of a watch request (a watcher's `error` event).
 * @returns `true` for a first silence of an answered stream.
 */
export function isRoutineSilence(error: unknown): boolean {
  return error instanceof WatchStalledError && error.connected && !error.repeated;
}

/** A watch request reached the client-side timeout (`clientTimeoutMs`). */
export class WatchClientTimeoutError extends Error {
  /**
   * Creates the error of a watch request ended by the client-side timeout.
   *
   * @param ms The client-side timeout that expired.
   */
  constructor(ms: number) {
    super(`Watch request reached the client-side timeout of ${ms} ms; resuming`);
    this.name = "WatchClientTimeoutError";
  }
}

/**
 * The watcher's options from `settings.watching` (all but the namespace, selectors and signal).
 * @param watching The settings.
 * @returns Timeouts, the reconnection pause and limits, in the units `watcher()` takes.
 */
export function watchingOptions(watching: WatchingSettings): WatcherOptions {
  const ms = (seconds: number | null) => seconds === null ? undefined : seconds * 1000;
  return {
    serverTimeoutSeconds: watching.serverTimeout,
    inactivityTimeoutMs: watching.inactivityTimeout * 1000,
    reconnectBackoffMs: watching.reconnectBackoff * 1000,
    connectTimeoutMs: ms(watching.connectTimeout),
    clientTimeoutMs: ms(watching.clientTimeout),
    ...(watching.initialStreaming ? { initialStreaming: true } : {}),
    ...(watching.chunkSize === 500 ? {} : { pageSize: watching.chunkSize ?? 0 }),
    ...(Number.isFinite(watching.maxDepth) ? { maxDepth: watching.maxDepth } : {}),
  };
}
