/**
 * The list+watch loop's state machine (after kube-rs' `watcher`): the state of one watcher
 * ({@link WatchState}), what happens to it ({@link WatchInput}), and the pure
 * {@link watchStep} that turns a state and an input into the next state, the events to yield and
 * what to do next ({@link WatchStep}). The requests, timers and sleeps are the driver's
 * (`watcher()` in `watching.ts`); nothing here does I/O or reads a clock, so every transition is
 * tested without a network and without time (`watch_machine_test.ts`).
 *
 * ```
 * idle ── start ─┬─ no position ──→ listing ── page… ── listed ──→ connecting
 *                ├─ no position, streaming list ──────────────────→ connecting
 *                └─ a position ───────────────────────────────────→ connecting
 * connecting ── connected ──→ watching ── line… (each event moves the position)
 * watching ── ended (server's or client-side timeout) ──→ idle, wait the reconnection pause
 * any ── failed: 410 Gone ──→ start again at once without a position (relist)
 *        failed: silence  ──→ idle, retry at once      (an `error` event)
 *        failed: other    ──→ idle, wait the backoff   (an `error` event)
 * ```
 * @module
 */

import { backoffDelay, type BackoffOptions } from "../util/backoff.ts";
import { nestedDeeperThan } from "../structs/dicts.ts";
import type { KubeObject } from "../structs/objects.ts";
import { ApiError, type RequestInfo } from "./errors.ts";
import {
  malformation,
  type MalformedWatchLine,
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

/** The annotation of the bookmark that ends the initial events of a streaming list. */
const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

/**
 * Where a watcher is: `idle` between requests (a `start` input chooses the next), `listing` (a
 * paged list is being read), `connecting` (a watch request is sent, not answered yet),
 * `watching` (its stream is being read).
 */
export type WatchPhase = "idle" | "listing" | "connecting" | "watching";

/**
 * The whole state of one watcher. One shape for every phase (fields a phase does not use keep
 * their neutral values), so that the hot path handles one hidden class.
 */
export interface WatchState {
  /** What the watcher does now. */
  readonly phase: WatchPhase;
  /** The position to watch from; `undefined`: none yet or lost (`410 Gone`), a list is due. */
  readonly resourceVersion: string | undefined;
  /** While listing: the resourceVersion of the pages read so far (the last one's). */
  readonly listedVersion: string;
  /** The open watch is a streaming list whose initial events have not ended yet. */
  readonly streaming: boolean;
  /** Why the next watch request opens (what ended the previous one). */
  readonly reason: WatchStartReason;
  /** Failed attempts since a line of a stream last arrived: the backoff's exponent. */
  readonly failures: number;
  /** The last watch request went silent, and nothing arrived since. */
  readonly silent: boolean;
}

/** A new watcher's state: idle, no position, the first request to come. */
export const INITIAL_WATCH_STATE: WatchState = {
  phase: "idle",
  resourceVersion: undefined,
  listedVersion: "",
  streaming: false,
  reason: "initial",
  failures: 0,
  silent: false,
};

/** One page of a list, as far as a watcher reads it. */
export interface WatchPage {
  /** The objects. */
  readonly items: readonly KubeObject[];
  /** The list's metadata: the resourceVersion of its snapshot. */
  readonly metadata?: { readonly resourceVersion?: string | undefined } | undefined;
}

/** What happens to a watcher: the driver's requests report back with these. */
export type WatchInput =
  /** Idle: open the next request (first, after a wait, or after a relist became due). */
  | { readonly type: "start" }
  /** Listing: one page arrived. */
  | { readonly type: "page"; readonly page: WatchPage }
  /** Listing: the last page arrived. */
  | { readonly type: "listed" }
  /** Connecting: the server answered the watch request; its stream opens. */
  | { readonly type: "connected" }
  /** Watching: one line of the stream (parsed, or not JSON). */
  | { readonly type: "line"; readonly line: RawWatchEvent | MalformedWatchLine }
  /** Watching: the stream ended normally (the server's timeout). */
  | { readonly type: "ended" }
  /** A request failed: thrown, aborted by a timeout (not by the watcher's own signal). */
  | { readonly type: "failed"; readonly error: unknown };

/** What the driver does after a step. */
export type WatchAction =
  /** Go on with the request in progress: read the next page or line. */
  | { readonly type: "read" }
  /** Send a paged list (with the watch's selectors), then feed its pages and `listed`. */
  | { readonly type: "list" }
  /**
   * Send a watch request from `resourceVersion`, or as a streaming list (`sendInitialEvents`);
   * then feed `connected`, its lines and `ended` (or `failed`).
   */
  | {
    readonly type: "watch";
    readonly resourceVersion: string | undefined;
    readonly sendInitialEvents: boolean;
  }
  /** Wait this long, then feed `start`. */
  | { readonly type: "wait"; readonly ms: number };

/** The outcome of one step. */
export interface WatchStep {
  /** The watcher's new state. */
  readonly state: WatchState;
  /**
   * Events to yield before the action, in order: one event as it is (no array per line of a
   * stream), several (a page of a list) as an array, or none.
   */
  readonly emit: WatcherEvent | readonly WatcherEvent[] | undefined;
  /** What to do next. */
  readonly action: WatchAction;
}

/** What the steps of one watcher take from its options; fixed for the watcher's life. */
export interface WatchRules {
  /** Start with a streaming list (`sendInitialEvents`) rather than a paged list. */
  readonly initialStreaming: boolean;
  /** Client-side filter: objects it rejects are not reported. */
  readonly accept: ((object: KubeObject) => boolean) | undefined;
  /** Objects nested deeper are refused (`refused` events); unset: no limit. */
  readonly maxDepth: number | undefined;
  /** The pause before reopening a stream that ended normally, in milliseconds. */
  readonly reconnectBackoffMs: number;
  /** Backoff between failed attempts (its `random` is the jitter's source). */
  readonly backoff: BackoffOptions | undefined;
  /** The watch request, named in the error of an `ERROR` event. */
  readonly request: RequestInfo;
}

/** The input `start` (one object for all). */
export const START: WatchInput = { type: "start" };
/** The input `listed`. */
export const LISTED: WatchInput = { type: "listed" };
/** The input `connected`. */
export const CONNECTED: WatchInput = { type: "connected" };
/** The input `ended`. */
export const ENDED: WatchInput = { type: "ended" };
/** The action `read` (one object for all: compare by identity). */
export const READ: WatchAction = { type: "read" };
const LIST: WatchAction = { type: "list" };
const INIT: WatcherEvent = { type: "init" };

/**
 * One transition of a watcher: pure (no I/O, no clock; the jitter comes from
 * `rules.backoff.random`, the filter from `rules.accept`).
 *
 * @param state The watcher's state.
 * @param input What happened.
 * @param rules The watcher's options.
 * @returns The new state, the events to yield, and the next action.
 */
export function watchStep(state: WatchState, input: WatchInput, rules: WatchRules): WatchStep {
  switch (input.type) {
    case "start":
      return begin(state, rules);
    case "page": {
      const events: WatcherEvent[] = [];
      for (const object of input.page.items) {
        if (rules.accept && !rules.accept(object)) continue;
        events.push(
          tooDeep(object, rules) ? refused(object, rules) : { type: "initApply", object },
        );
      }
      const listedVersion = input.page.metadata?.resourceVersion ?? state.listedVersion;
      return { state: { ...state, listedVersion }, emit: events, action: READ };
    }
    case "listed": {
      const resourceVersion = state.listedVersion;
      return {
        state: { ...state, phase: "connecting", resourceVersion, listedVersion: "" },
        emit: { type: "initDone", resourceVersion },
        action: { type: "watch", resourceVersion, sendInitialEvents: false },
      };
    }
    case "connected":
      return {
        state: { ...state, phase: "watching", reason: "end" },
        emit: {
          type: "connected",
          resourceVersion: state.resourceVersion ?? "",
          reason: state.reason,
        },
        action: READ,
      };
    case "line":
      return received(state, input.line, rules);
    case "ended":
      return rest(state, rules);
    case "failed":
      return failed(state, input.error, rules);
  }
}

/** `start`: list, stream the list, or watch from the position. */
function begin(state: WatchState, rules: WatchRules): WatchStep {
  if (state.resourceVersion !== undefined) {
    return {
      state: { ...state, phase: "connecting", streaming: false },
      emit: undefined,
      action: {
        type: "watch",
        resourceVersion: state.resourceVersion,
        sendInitialEvents: false,
      },
    };
  }
  if (rules.initialStreaming) {
    // The objects arrive as the watch's first events, up to the bookmark that ends them.
    return {
      state: { ...state, phase: "connecting", streaming: true },
      emit: INIT,
      action: { type: "watch", resourceVersion: undefined, sendInitialEvents: true },
    };
  }
  return {
    state: { ...state, phase: "listing", streaming: false, listedVersion: "" },
    emit: INIT,
    action: LIST,
  };
}

/** A line of the stream: the hot path (one state and one step per event, no array). */
function received(
  state: WatchState,
  line: RawWatchEvent | MalformedWatchLine,
  rules: WatchRules,
): WatchStep {
  const problem = malformation(line);
  if (problem) {
    return moved(state, state.resourceVersion, state.streaming, {
      type: "skipped",
      reason: problem,
    });
  }
  const event = line as RawWatchEvent;
  const version = event.object?.metadata?.resourceVersion;
  const accept = rules.accept;
  if (state.streaming) {
    // Until the bookmark that ends them, the objects' own versions are not a position.
    if (event.type === "ADDED") {
      if (accept && !accept(event.object)) return moved(state, state.resourceVersion, true);
      const emit: WatcherEvent = tooDeep(event.object, rules)
        ? refused(event.object, rules)
        : { type: "initApply", object: event.object };
      return moved(state, state.resourceVersion, true, emit);
    }
    if (
      event.type === "BOOKMARK" && version &&
      event.object?.metadata?.annotations?.[INITIAL_EVENTS_END] === "true"
    ) {
      return moved(state, version, false, { type: "initDone", resourceVersion: version });
    }
    if (event.type !== "ERROR") return moved(state, state.resourceVersion, true);
  }
  switch (event.type) {
    case "ADDED":
    case "MODIFIED": {
      const position = version || state.resourceVersion;
      if (accept && !accept(event.object)) return moved(state, position, false);
      return moved(
        state,
        position,
        false,
        tooDeep(event.object, rules)
          ? refused(event.object, rules)
          : { type: "apply", object: event.object, raw: event.type },
      );
    }
    case "DELETED": {
      const position = version || state.resourceVersion;
      if (accept && !accept(event.object)) return moved(state, position, false);
      // Even refused, a deletion is reported, so that consumers forget the object.
      const object = tooDeep(event.object, rules) ? refusedStandIn(event.object) : event.object;
      return moved(state, position, false, { type: "delete", object });
    }
    case "BOOKMARK": {
      const position = version || state.resourceVersion;
      return moved(state, position, false, { type: "bookmark", resourceVersion: position ?? "" });
    }
    case "ERROR": {
      const status = event.object as { code?: number; reason?: string; message?: string };
      const error = new ApiError({
        code: status.code ?? 500,
        reason: status.reason ?? "InternalError",
        message: status.message ?? "watch error",
        request: rules.request,
      });
      return failed(moved(state, state.resourceVersion, state.streaming).state, error, rules);
    }
  }
}

/**
 * A line arrived: the failures and the silence are over; the position and the streaming flag
 * are as given. The state object is reused when nothing changed.
 */
function moved(
  state: WatchState,
  resourceVersion: string | undefined,
  streaming: boolean,
  emit?: WatcherEvent,
): WatchStep {
  const next = state.resourceVersion === resourceVersion && state.streaming === streaming &&
      state.failures === 0 && !state.silent
    ? state
    : {
      phase: state.phase,
      resourceVersion,
      listedVersion: state.listedVersion,
      streaming,
      reason: state.reason,
      failures: 0,
      silent: false,
    };
  return { state: next, emit, action: READ };
}

/** The stream ended normally (or at the client-side timeout): resume after a short pause. */
function rest(state: WatchState, rules: WatchRules): WatchStep {
  return {
    state: { ...state, phase: "idle" },
    emit: undefined,
    action: { type: "wait", ms: rules.reconnectBackoffMs },
  };
}

/** A request failed: relist at once, resume, or retry after a backoff. */
function failed(state: WatchState, error: unknown, rules: WatchRules): WatchStep {
  if (state.phase === "watching") {
    // The request lived as long as allowed: resume from the last version, as after a
    // server-side timeout.
    if (error instanceof WatchClientTimeoutError) return rest(state, rules);
    // Silent after the server had answered: told apart from a request never answered.
    if (error instanceof WatchStalledError && !error.connected) {
      return retry(
        { ...state, silent: true },
        new WatchStalledError(error.ms, { connected: true, repeated: state.silent }),
        rules,
      );
    }
  }
  if (error instanceof ApiError && (error.code === 410 || error.reason === "Expired")) {
    // Relist immediately: the history we need is compacted away. Not reported as an error.
    return begin({ ...state, phase: "idle", resourceVersion: undefined, reason: "gone" }, rules);
  }
  return retry(state, error, rules);
}

/** Report the failure and retry: at once after a silence, as asked by a 429, else backoff. */
function retry(state: WatchState, error: unknown, rules: WatchRules): WatchStep {
  const stall = error instanceof WatchStalledError || error instanceof WatchClientTimeoutError;
  const retryInMs = stall
    ? 0
    : error instanceof ApiError && error.retryAfterMs !== undefined
    ? error.retryAfterMs
    : backoffDelay(state.failures, rules.backoff);
  return {
    state: {
      ...state,
      phase: "idle",
      reason: stall ? "stall" : "error",
      failures: stall ? state.failures : state.failures + 1,
    },
    emit: {
      type: "error",
      error: error instanceof Error ? error : new Error(String(error)),
      retryInMs,
    },
    action: { type: "wait", ms: retryInMs },
  };
}

function tooDeep(object: KubeObject, rules: WatchRules): boolean {
  return rules.maxDepth !== undefined && nestedDeeperThan(object, rules.maxDepth);
}

function refused(object: KubeObject, rules: WatchRules): WatcherEvent {
  return {
    type: "refused",
    reason: tooDeepReason(object, rules.maxDepth ?? Infinity),
    object: refusedStandIn(object),
  };
}

/**
 * What the steps of a watcher take from its options.
 * @param options The watcher's options.
 * @param request The watch request, named in the errors of `ERROR` events.
 * @returns The rules, with their defaults.
 */
export function watchRules(options: WatcherOptions, request: RequestInfo): WatchRules {
  return {
    initialStreaming: options.initialStreaming ?? false,
    accept: options.accept,
    maxDepth: options.maxDepth,
    reconnectBackoffMs: options.reconnectBackoffMs ?? 100,
    backoff: options.backoff,
    request,
  };
}
