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
 * Errors are yielded, not thrown, and retried with backoff and jitter.
 *
 * {@link objectEvents} folds a relist into the stream: unchanged objects are flagged and
 * objects that vanished while the watch was broken are reported as deleted.
 * @module
 */

import { backoffDelay, type BackoffOptions, sleep } from "../util/backoff.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { WatchingSettings } from "../settings/settings.ts";
import { withoutOperatorAnnotations } from "../settings/conventions.ts";
import type { KubeApi, ResourceRef } from "./api.ts";
import { ApiError } from "./errors.ts";
import type { ByteStream } from "./raw_stream.ts";

/** One event as the API server sends it on a watch stream. */
export interface RawWatchEvent {
  /** Event type. */
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  /** The object (a `Status` for ERROR). */
  readonly object: KubeObject;
}

/** What {@link watcher} yields. */
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
  | { readonly type: "skipped"; readonly reason: string };

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
 */
function malformation(event: RawWatchEvent | MalformedWatchLine): string | undefined {
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
 * Why a watch request was opened: the stream's first one (`initial`), after the previous one
 * ended normally (`end`: the server's or the client-side timeout), after `410 Gone` and a relist
 * (`gone`), after a silent stream was aborted (`stall`), or after a failure (`error`).
 */
export type WatchStartReason = "initial" | "end" | "gone" | "stall" | "error";

/** Options of {@link watcher}. */
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
  /** A stream silent for this long is considered stalled and reopened. @default 70000 */
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
  /** Backoff between failed attempts. */
  readonly backoff?: BackoffOptions | undefined;
  /** Page size of the initial and recovery lists (`0`: one request for all). @default 500 */
  readonly pageSize?: number | undefined;
  /** Stops the loop. */
  readonly signal?: AbortSignal | undefined;
}

/** The watch stream stayed silent past the inactivity timeout. */
export class WatchStalledError extends Error {
  /** @param ms The inactivity timeout that expired. */
  constructor(ms: number) {
    super(`Watch stream was silent for ${ms} ms (no events, no bookmarks); reconnecting`);
    this.name = "WatchStalledError";
  }
}

/** A watch request reached the client-side timeout (`clientTimeoutMs`). */
export class WatchClientTimeoutError extends Error {
  /** @param ms The client-side timeout that expired. */
  constructor(ms: number) {
    super(`Watch request reached the client-side timeout of ${ms} ms; resuming`);
    this.name = "WatchClientTimeoutError";
  }
}

/**
 * The watcher's options from `settings.watching` (all but the namespace, selectors and signal).
 * @param watching The settings.
 * @returns Timeouts and the reconnection pause, in the units {@link watcher} takes.
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
  };
}

/** Bytes of unparsed events a watch reader holds before it stops reading: 64 MiB. */
export const WATCH_BUFFER_BYTES = 64 * 1024 * 1024;

/** A `fetch` response's body as a {@link ByteStream}. */
function bytesOf(response: Response): ByteStream {
  const reader = response.body?.getReader();
  return {
    async read() {
      if (!reader) return null;
      const { value, done } = await reader.read();
      return done ? null : value;
    },
    close() {
      reader?.cancel().catch(() => {});
    },
  };
}

/**
 * Reads newline-delimited JSON events from a watch stream, aborting when silent for too long.
 *
 * The stream is read ahead of the consumer, independently of how fast events are processed:
 * the API server closes watchers that do not take their events quickly ("unresponsive
 * watcher"), so the socket is drained whenever the event loop gets to it. Up to `maxBuffered`
 * bytes of received, not yet parsed events are held; beyond that, reading pauses until the
 * consumer catches up (then the kernel's buffer fills, and the server may close the watch,
 * which is resumed from the last resourceVersion — better than unbounded memory). Lines are
 * split on bytes and each is decoded once; a partial line is the only copy kept across reads.
 *
 * @param source The watch body: bytes from {@link KubeApi.watchBytes}, or a `fetch` response.
 * @param inactivityMs Silence after which `controller` is aborted with a {@link WatchStalledError}.
 * @param controller Aborts the underlying request.
 * @param maxBuffered Bytes of unparsed events held at most (see above).
 * @returns Parsed events until the stream ends; a line that is not JSON as a
 *   {@link MalformedWatchLine} (the stream goes on).
 */
export async function* readWatchEvents(
  source: Response | ByteStream,
  inactivityMs: number,
  controller: AbortController,
  maxBuffered: number = WATCH_BUFFER_BYTES,
): AsyncGenerator<RawWatchEvent | MalformedWatchLine> {
  const body = source instanceof Response ? bytesOf(source) : source;
  // One timer that re-checks the time of the last read when it fires, rather than one cleared
  // and set again per read (thousands per second under load).
  let lastRead = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const silent = performance.now() - lastRead;
    if (silent >= inactivityMs) controller.abort(new WatchStalledError(inactivityMs));
    else timer = setTimeout(check, inactivityMs - silent);
  };

  const lines: string[] = [];
  let head = 0; // lines[head] is the next to parse
  let buffered = 0;
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  let resume: (() => void) | undefined;
  const decoder = new TextDecoder();
  const push = (bytes: Uint8Array) => {
    const line = decoder.decode(bytes).trim();
    if (!line) return;
    lines.push(line);
    buffered += line.length;
  };
  const pump = async () => {
    let partial: Uint8Array | undefined;
    try {
      for (;;) {
        while (buffered > maxBuffered) await new Promise<void>((r) => (resume = r));
        const bytes = await body.read();
        if (bytes === null) break;
        lastRead = performance.now();
        let data = bytes;
        if (partial) {
          data = new Uint8Array(partial.length + bytes.length);
          data.set(partial);
          data.set(bytes, partial.length);
          partial = undefined;
        }
        let start = 0;
        for (let lf = data.indexOf(0x0a); lf >= 0; lf = data.indexOf(0x0a, start)) {
          if (lf > start) push(data.subarray(start, lf));
          start = lf + 1;
        }
        // The reader may reuse its buffer: keep a copy of the incomplete line only.
        if (start < data.length) partial = data.slice(start);
        wake?.();
      }
      if (partial) push(partial);
    } catch (error) {
      failure = error;
    } finally {
      ended = true;
      wake?.();
    }
  };

  try {
    timer = setTimeout(check, inactivityMs);
    const pumping = pump();
    for (;;) {
      if (head < lines.length) {
        const line = lines[head]!;
        lines[head++] = "";
        buffered -= line.length;
        if (head > 4096 && head * 2 > lines.length) {
          lines.splice(0, head);
          head = 0;
        }
        if (resume && buffered <= maxBuffered) {
          resume();
          resume = undefined;
        }
        let event: RawWatchEvent | MalformedWatchLine;
        try {
          event = JSON.parse(line) as RawWatchEvent;
        } catch {
          event = new MalformedWatchLine(line.length);
        }
        yield event;
        continue;
      }
      if (ended) {
        await pumping;
        if (failure !== undefined) throw failure;
        return;
      }
      await new Promise<void>((r) => (wake = r));
      wake = undefined;
    }
  } catch (error) {
    // Aborted on purpose (a stall, the client-side timeout, a stop): say why, not "aborted".
    if (controller.signal.aborted) throw controller.signal.reason;
    throw error;
  } finally {
    clearTimeout(timer);
    body.close();
    resume?.();
  }
}

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
  const inactivityMs = options.inactivityTimeoutMs ?? 70_000;
  let resourceVersion: string | undefined;
  let failures = 0;
  let reason: WatchStartReason = "initial";
  const selectors = {
    namespace: options.namespace,
    labelSelector: options.labelSelector,
    fieldSelector: options.fieldSelector,
    shardSelector: options.shardSelector,
  };
  const accept = options.accept ?? (() => true);
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
            if (accept(object)) yield { type: "initApply", object };
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
          for await (const line of readWatchEvents(response, inactivityMs, controller)) {
            failures = 0;
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
                yield { type: "initApply", object: event.object };
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
                  yield { type: "apply", object: event.object, raw: event.type };
                }
                break;
              case "DELETED":
                if (version) resourceVersion = version;
                if (accept(event.object)) yield { type: "delete", object: event.object };
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

/** What {@link objectEvents} yields: one object changed or disappeared. */
export type ObjectEvent =
  | {
    readonly type: "apply";
    readonly object: KubeObject;
    /** Reported by the first listing. */
    readonly initial: boolean;
    /** The raw watch type; `null` when reported by a (re)listing. */
    readonly raw: "ADDED" | "MODIFIED" | null;
    /** Re-reported by a relist although unchanged since it was last seen. */
    readonly unchanged?: boolean;
  }
  | { readonly type: "delete"; readonly object: KubeObject };

function keyOf(object: KubeObject): string {
  return `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
}

/**
 * Turns watcher events into per-object events: objects a relist reports at an already seen
 * resourceVersion are flagged `unchanged` (so consumers can skip repeated work), and objects missing from a relist are reported as deleted, so no
 * change is lost across `410 Gone`. Errors and bookmarks are passed to `onOther` if given.
 *
 * @param events A {@link watcher} stream.
 * @param onOther Receives `error`, `bookmark`, `init` and `initDone` events.
 * @returns The stream of object events.
 */
export async function* objectEvents(
  events: AsyncIterable<WatcherEvent>,
  onOther?: (event: WatcherEvent) => void,
): AsyncGenerator<ObjectEvent> {
  // Only what is needed to recognise unchanged objects and to report vanished ones (a few
  // hundred bytes per object, not whole bodies: memory that grows with the cluster).
  const known = new Map<string, Seen>();
  // The same for all objects of one watch: remembered once, not per object.
  let apiVersion: string | undefined, kind: string | undefined;
  const remember = (object: KubeObject): string => {
    const key = keyOf(object);
    known.set(key, new Seen(object, known.get(key)));
    apiVersion = object.apiVersion;
    kind = object.kind;
    return key;
  };
  let seen: Set<string> | undefined;
  let firstList = true;
  for await (const event of events) {
    switch (event.type) {
      case "init":
        seen = new Set();
        onOther?.(event);
        break;
      case "initApply": {
        const before = known.get(keyOf(event.object));
        seen?.add(remember(event.object));
        const meta = event.object.metadata;
        const same = before !== undefined && before.resourceVersion === meta?.resourceVersion &&
          before.uid === meta?.uid;
        yield {
          type: "apply",
          object: event.object,
          initial: firstList,
          raw: null,
          ...(same ? { unchanged: true } : {}),
        };
        break;
      }
      case "initDone":
        for (const [key, last] of known) {
          if (!seen?.has(key)) {
            known.delete(key);
            yield { type: "delete", object: last.object(key, apiVersion, kind) };
          }
        }
        seen = undefined;
        firstList = false;
        onOther?.(event);
        break;
      case "apply":
        remember(event.object);
        yield { type: "apply", object: event.object, initial: false, raw: event.raw };
        break;
      case "delete":
        known.delete(keyOf(event.object));
        yield { type: "delete", object: event.object };
        break;
      default:
        onOther?.(event);
    }
  }
}

/**
 * What is remembered of a watched object: its identity and version, to recognise it unchanged
 * in a relist, and its labels, annotations (without the operators' own, see
 * {@link withoutOperatorAnnotations}) and finalizers, to report it as deleted should it vanish
 * while the watch was down. Name, namespace, apiVersion and kind come from elsewhere (the key,
 * the watch).
 */
class Seen {
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly annotations: Readonly<Record<string, string>> | undefined;
  readonly finalizers: string[] | undefined;

  /**
   * @param object The object as just seen.
   * @param before What was remembered of its previous version: its uid string is kept when
   * equal, as the first one is also the key of the object's memory in the reactor's queue.
   */
  constructor(object: KubeObject, before?: Seen) {
    const meta = object.metadata ?? {};
    this.uid = before?.uid === meta.uid ? before?.uid : meta.uid;
    this.resourceVersion = meta.resourceVersion;
    this.labels = meta.labels;
    this.annotations = meta.annotations && withoutOperatorAnnotations(meta.annotations);
    this.finalizers = meta.finalizers?.length ? meta.finalizers : undefined;
  }

  /** The object as last seen, for a deletion event. */
  object(key: string, apiVersion: string | undefined, kind: string | undefined): KubeObject {
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash), name = key.slice(slash + 1);
    return {
      apiVersion,
      kind,
      metadata: {
        name,
        ...(namespace ? { namespace } : {}),
        uid: this.uid,
        resourceVersion: this.resourceVersion,
        ...(this.labels ? { labels: this.labels } : {}),
        ...(this.annotations ? { annotations: this.annotations } : {}),
        ...(this.finalizers ? { finalizers: this.finalizers } : {}),
      },
    };
  }
}
