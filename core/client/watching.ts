/**
 * The list+watch loop: a stall-proof, self-healing stream of object events for one resource
 * in one namespace (or cluster-wide).
 *
 * Recovery is an explicit state machine (after kube-rs' watcher; its state, inputs and pure step
 * function are in `watch_machine.ts`, this is its driver): list → watch from the list's
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

import { sleep } from "../util/backoff.ts";
import type { KubeApi, ResourceRef, WatchOptions } from "./api.ts";
import type { ByteStream } from "./raw_stream.ts";
import type { WatcherEvent } from "./watch_events.ts";
import {
  CONNECTED,
  ENDED,
  INITIAL_WATCH_STATE,
  LISTED,
  READ,
  START,
  watchRules,
  watchStep,
} from "./watch_machine.ts";
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

/**
 * An endless list+watch stream of one resource that survives timeouts, stalls, 410 Gone and
 * network failures. Ends only when the signal aborts.
 *
 * Guarantees: after every `init`…`initDone` sequence the consumer has seen every object that
 * exists; later `apply`/`delete` events are in resourceVersion order. Caveat: objects deleted
 * while a relist was needed are not reported by this stage (see {@link objectEvents}).
 *
 * This is the state machine's driver: it sends the requests, runs the timers and sleeps, and
 * feeds what happens to {@link watchStep} (`watch_machine.ts`), which decides the rest.
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
  const rules = watchRules(options, {
    method: "GET",
    path: `watch ${resource.plural}`,
    server: api.http.connection.server,
  });
  const selectors = {
    namespace: options.namespace,
    labelSelector: options.labelSelector,
    fieldSelector: options.fieldSelector,
    shardSelector: options.shardSelector,
  };
  const query: WatchOptions = {
    ...selectors,
    allowBookmarks: true,
    timeoutSeconds: options.serverTimeoutSeconds === null
      ? undefined
      : options.serverTimeoutSeconds ?? 300,
    connectTimeoutMs: options.connectTimeoutMs,
  };
  const limits = {
    maxLineBytes: options.maxLineBytes,
    resource: resource.group ? `${resource.plural}.${resource.group}` : resource.plural,
  };
  let step = watchStep(INITIAL_WATCH_STATE, START, rules);
  while (!signal?.aborted) {
    try {
      const { emit, action } = step;
      if (Array.isArray(emit)) { for (const event of emit) yield event; }
      else if (emit) yield emit as WatcherEvent;
      if (action.type === "wait") {
        await sleep(action.ms, signal);
        step = watchStep(step.state, START, rules);
      } else if (action.type === "list") {
        const pages = api.listPages(resource, { ...selectors, limit: options.pageSize, signal });
        for await (const page of pages) {
          step = watchStep(step.state, { type: "page", page }, rules);
          for (const event of step.emit as readonly WatcherEvent[]) yield event;
        }
        step = watchStep(step.state, LISTED, rules);
      } else if (action.type === "watch") {
        using request = new WatchRequest(signal, options.clientTimeoutMs);
        const response = await request.send(api, resource, {
          ...query,
          ...(action.sendInitialEvents
            ? { sendInitialEvents: true }
            : { resourceVersion: action.resourceVersion }),
        }, inactivityMs);
        step = watchStep(step.state, CONNECTED, rules);
        yield step.emit as WatcherEvent;
        const lines = readWatchEvents(
          response,
          inactivityMs,
          request.controller,
          undefined,
          limits,
        );
        for await (const line of lines) {
          step = watchStep(step.state, { type: "line", line }, rules);
          if (step.action !== READ) break; // an ERROR event: its outcome is yielded after
          if (step.emit) yield step.emit as WatcherEvent;
        }
        if (step.action === READ) step = watchStep(step.state, ENDED, rules);
      }
    } catch (error) {
      if (signal?.aborted) return;
      step = watchStep(step.state, { type: "failed", error }, rules);
    }
  }
}

/**
 * One watch request's abort controller: aborted with the watcher's signal, and by the
 * client-side timeout (the request's whole life, connecting included); disposed when the request
 * is over.
 */
class WatchRequest implements Disposable {
  readonly controller = new AbortController();
  readonly #signal: AbortSignal | undefined;
  readonly #stop = () => this.controller.abort(this.#signal?.reason);
  readonly #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(signal: AbortSignal | undefined, clientMs: number | undefined) {
    this.#signal = signal;
    signal?.addEventListener("abort", this.#stop, { once: true });
    this.#timer = clientMs
      ? setTimeout(() => this.controller.abort(new WatchClientTimeoutError(clientMs)), clientMs)
      : undefined;
  }

  /**
   * Sends the request; a server that accepts but never answers within the inactivity timeout
   * is a stall. Timing out before any answer is a failure (retried at once), not a normal end:
   * it rejects with the timeout's error.
   */
  async send(
    api: KubeApi,
    resource: ResourceRef,
    query: WatchOptions,
    inactivityMs: number,
  ): Promise<ByteStream> {
    const controller = this.controller;
    const timer = setTimeout(
      () => controller.abort(new WatchStalledError(inactivityMs)),
      inactivityMs,
    );
    try {
      return await api.watchBytes(resource, { ...query, signal: controller.signal });
    } catch (error) {
      const reason = controller.signal.reason;
      if (reason instanceof WatchStalledError || reason instanceof WatchClientTimeoutError) {
        throw reason;
      }
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  [Symbol.dispose](): void {
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener("abort", this.#stop);
  }
}
