/**
 * The Events poster: turns explicit `event()` calls (and, with `settings.posting.loggers`, object
 * log messages) into core/v1 Events, aggregated and rate-limited so that a noisy handler cannot
 * flood the API server.
 *
 * Messages are queued; a batch is posted shortly after the first message arrives, then at most
 * once per aggregation window. Within a batch, identical messages about one object become one
 * Event with a count, and at most `maxPerObjectPerWindow` Events per object are posted; the rest
 * are summarised in one Warning. Posting failures are logged and dropped, never retried forever.
 * Differs from Kopf, which posts every message as its own Event.
 * @module
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { postEvent } from "../../client/events.ts";
import type { KubeApi } from "../../client/api.ts";
import {
  isAtLeast,
  type LogEntry,
  type Logger,
  type LogListener,
  type ObjectRef,
} from "../../actions/loggers.ts";
import type { LogLevel, PostingSettings } from "../../settings/settings.ts";
import { sleep } from "../../util/backoff.ts";
import type { OperatorObserver } from "./observers.ts";

/** One Event to post. */
export interface PendingEvent {
  /** The object it is about. */
  readonly ref: ObjectRef;
  /** Event type: `Normal`, `Warning` (Kopf also uses `Error`, `Debug`, `Fatal`). */
  readonly type: string;
  /** CamelCase reason. */
  readonly reason: string;
  /** Message (cut in the middle above 1024 characters). */
  readonly message: string;
  /** From a log message (retried with `settings.posting.loggingBackoffs`), not an explicit call. */
  readonly logging?: boolean | undefined;
  /** Retry delays (seconds) given by the explicit call; else the settings' ones. */
  readonly backoffs?: number | readonly number[] | undefined;
}

const TYPES: Readonly<Record<LogLevel, string>> = {
  debug: "Debug",
  info: "Normal",
  warning: "Warning",
  error: "Error",
  critical: "Fatal",
};

const MAX_MESSAGE = 1024;

/** Events posted at once per batch. */
const POST_CONCURRENCY = 4;

/** Shortens a message by cutting its middle, as Kopf does for the API server's limit. */
export function shortenMessage(message: string): string {
  if (message.length <= MAX_MESSAGE) return message;
  const half = Math.floor((MAX_MESSAGE - 3) / 2);
  return `${message.slice(0, half)}...${message.slice(message.length - (MAX_MESSAGE - 3 - half))}`;
}

/** Queues and posts Events for one operator. */
export class EventPoster {
  #api: KubeApi;
  #settings: PostingSettings;
  #logger: Logger | undefined;
  #queue: PendingEvent[] = [];
  #wake: (() => void) | undefined;
  #lastBatch = -Infinity;
  /** Observes posted and dropped Events (metrics); set by the operator. */
  observer: OperatorObserver | undefined;

  /**
   * @param api Where to post.
   * @param settings `settings.posting` (read live, so startup handlers may change it).
   * @param logger Where to report posting failures (never posted as Events themselves).
   */
  constructor(api: KubeApi, settings: PostingSettings, logger?: Logger) {
    this.#api = api;
    this.#settings = settings;
    this.#logger = logger;
  }

  /** A log listener that queues qualifying object messages. */
  readonly listener: LogListener = Object.assign((entry: LogEntry): void => {
    if (!entry.object || !this.#accepts(entry.level, entry.local ?? false)) return;
    this.enqueue({
      ref: entry.object,
      type: TYPES[entry.level],
      reason: "Logging",
      message: entry.message,
      logging: true,
    });
  }, { accepts: (level: LogLevel, local: boolean): boolean => this.#accepts(level, local) });

  /**
   * Whether a log message of this level and locality can become an Event: only with
   * `settings.posting.loggers` (off by default, as in Kopf 1.44+). Settings are read live.
   */
  #accepts(level: LogLevel, local: boolean): boolean {
    return !local && this.#settings.enabled && this.#settings.loggers &&
      isAtLeast(level, this.#settings.level);
  }

  /**
   * Whether an explicit Event of this level is posted: `settings.posting.enabled` and
   * `settings.posting.level` (as Kopf's `info`/`warn`/`exception`; read live).
   * @param level The Event's level (`info` for Normal, `warning`, `error`).
   * @returns Whether to enqueue it.
   */
  acceptsExplicit(level: LogLevel): boolean {
    return this.#settings.enabled && isAtLeast(level, this.#settings.level);
  }

  /**
   * Queues an Event. Events about Events are dropped (they would multiply without end).
   * @param event What to post.
   */
  enqueue(event: PendingEvent): void {
    if (!this.#settings.enabled) return;
    if (
      event.ref.kind === "Event" &&
      (event.ref.apiVersion === "v1" || event.ref.apiVersion === "events.k8s.io/v1")
    ) return;
    this.#queue.push(event);
    this.#wake?.();
  }

  /** Number of queued Events. */
  get pending(): number {
    return this.#queue.length;
  }

  /**
   * Posts batches until aborted, then posts what is left.
   * @param signal Stops the loop.
   */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (this.#queue.length === 0) {
        await new Promise<void>((resolve) => {
          // Removed again on wake-up: this loop waits here once per batch, for as long as the
          // operator runs, and must not pile listeners up on the operator's signal.
          const done = () => {
            signal.removeEventListener("abort", done);
            resolve();
          };
          this.#wake = done;
          signal.addEventListener("abort", done, { once: true });
        });
        this.#wake = undefined;
        if (signal.aborted) break;
      }
      const windowMs = this.#settings.aggregationWindow * 1000;
      const wait = Math.max(200, this.#lastBatch + windowMs - performance.now());
      try {
        await sleep(wait, signal);
      } catch {
        break;
      }
      await this.flush();
    }
    await this.flush();
  }

  /** Posts everything queued now, aggregated. */
  async flush(): Promise<void> {
    const batch = this.#queue.splice(0);
    if (batch.length === 0) return;
    this.#lastBatch = performance.now();
    const groups = new Map<string, { event: PendingEvent; count: number }>();
    for (const event of batch) {
      const key = JSON.stringify([
        event.ref.uid ?? event.ref.name,
        event.type,
        event.reason,
        event.message,
      ]);
      const group = groups.get(key);
      if (group) group.count++;
      else groups.set(key, { event, count: 1 });
    }
    const perObject = new Map<string, number>();
    const suppressed = new Map<string, { ref: ObjectRef; count: number }>();
    const posts: (() => Promise<void>)[] = [];
    for (const { event, count } of groups.values()) {
      const objectKey = event.ref.uid ?? `${event.ref.namespace}/${event.ref.name}`;
      const n = (perObject.get(objectKey) ?? 0) + 1;
      perObject.set(objectKey, n);
      if (n > this.#settings.maxPerObjectPerWindow) {
        const s = suppressed.get(objectKey) ?? { ref: event.ref, count: 0 };
        s.count += count;
        suppressed.set(objectKey, s);
        continue;
      }
      posts.push(() => this.#post(event, count));
    }
    for (const { ref, count } of suppressed.values()) {
      this.observer?.eventsDropped(count);
      const message =
        `${count} more messages were not posted as Events (rate limit); see the operator's log`;
      posts.push(() =>
        this.#post({ ref, type: "Warning", reason: "Throttled", message, logging: true }, 1)
      );
    }
    // A few at a time: a window's batch (one or two Events per object handled in it) released
    // at once would compete with the operator's own patches for the API server.
    let next = 0;
    const lane = async () => {
      while (next < posts.length) await posts[next++]!();
    };
    await Promise.all(Array.from({ length: Math.min(POST_CONCURRENCY, posts.length) }, lane));
  }

  async #post(event: PendingEvent, count: number): Promise<void> {
    // As Kopf 1.45: explicit Events retry with the call's or settings.posting.defaultBackoffs,
    // those of log messages with the shorter settings.posting.loggingBackoffs.
    const backoffs = event.backoffs ??
      (event.logging ? this.#settings.loggingBackoffs : this.#settings.defaultBackoffs);
    try {
      await postEvent(this.#api, {
        apiVersion: event.ref.apiVersion,
        kind: event.ref.kind,
        metadata: { ...event.ref },
      }, {
        type: event.type as "Normal",
        reason: event.reason,
        message: shortenMessage(event.message),
        count,
      }, {
        component: this.#settings.reportingComponent,
        instance: this.#settings.reportingInstance,
        namePrefix: this.#settings.eventNamePrefix,
        ...(backoffs === undefined
          ? {}
          : { backoffs: typeof backoffs === "number" ? [backoffs] : backoffs }),
      });
      this.observer?.eventPosted(event.type, count);
    } catch (error) {
      this.#logger?.warning(
        `Failed to post an Event about ${event.ref.namespace ?? ""}/${event.ref.name}: ${error}`,
      );
    }
  }
}

// The poster of the operator whose code is running (handlers, filters), so that `event()` and
// friends post through the right operator even with several operators in one process. Kept on
// the global object so that a second copy of the library shares it.
const CONTEXT_KEY = Symbol.for("kopf.posters");
type PosterGlobals = {
  [CONTEXT_KEY]?: { current: AsyncLocalStorage<EventPoster>; active: Set<EventPoster> };
};

function posterGlobals(): { current: AsyncLocalStorage<EventPoster>; active: Set<EventPoster> } {
  const holder = globalThis as PosterGlobals;
  return holder[CONTEXT_KEY] ??= {
    current: new AsyncLocalStorage<EventPoster>(),
    active: new Set(),
  };
}

/**
 * Runs `fn` with `poster` as the current operator's poster (inherited by all async work it starts).
 * @param poster The operator's poster.
 * @param fn The operator's work.
 * @returns What `fn` returns.
 */
export async function withPoster<T>(poster: EventPoster, fn: () => Promise<T>): Promise<T> {
  const globals = posterGlobals();
  globals.active.add(poster);
  try {
    return await globals.current.run(poster, fn);
  } finally {
    globals.active.delete(poster);
  }
}

/**
 * The posters to use for an explicit event: the current operator's, else every running one.
 * @returns Zero or more posters.
 */
export function currentPosters(): EventPoster[] {
  const globals = posterGlobals();
  const current = globals.current.getStore();
  return current ? [current] : [...globals.active];
}
