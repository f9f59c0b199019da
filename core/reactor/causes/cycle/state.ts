/**
 * What one processing cycle works with besides the stream's scope (`ResourceScope` in
 * `../../scope/scope.ts`): what is remembered about the object between cycles
 * ({@link ObjectMemory}), the event, and the cycle's own state ({@link CycleState}) that the
 * phases read and fill in turn.
 *
 * Each phase of the cycle is a function of a `Pick` of the resource scope (only the parts it
 * uses, so a test passes a small literal) and the one {@link CycleState}.
 * @module
 */

import type { Logger } from "../../../actions/loggers.ts";
import type { ProgressState } from "../../../actions/progression.ts";
import type { Spawner } from "../../../engines/runners/daemons.ts";
import type { ChangingCause } from "../../../intents/causes.ts";
import type { Memo } from "../../../intents/contexts.ts";
import type { ChangingHandler, Reason } from "../../../intents/handlers.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import type { Patch } from "../../../structs/patches.ts";

/** What the operator remembers about one object between cycles (in memory only). */
export interface ObjectMemory {
  /** The object's memo. */
  readonly memo: Memo;
  /** The object was fully handled by this process at least once (resume is done). */
  handledOnce: boolean;
  /** The object's daemons and timers, once it has any. */
  spawner?: Spawner | undefined;
  /** The essence seen in the previous cycle (to tell timers about essential changes). */
  lastEssence?: string | undefined;
  /**
   * Re-processes the object soon with its latest body (e.g. when a daemon exited): while a cycle
   * runs, the body that cycle ends with (after its write), never one from before it.
   */
  wake(): void;
  /** The latest known body (kept by the queue). */
  latest?: KubeObject | undefined;
  /**
   * A write the API server refused (403), kept to be tried again before anything else happens
   * to the object: what is left to write, how many times it was refused, the last message.
   */
  unwritten?:
    | { readonly patch: Patch; readonly tries: number; readonly message: string }
    | undefined;
}

/** One event to process. */
export interface ObjectEvent {
  /** Raw type; `null` for objects from a (re)listing. */
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | null;
  /** Process even if this version was processed already (internal wake-ups). */
  readonly forced?: boolean;
  /**
   * Not a watch event but the operator's own re-look (after its write, after a delay, on a
   * wake-up): raw-event handlers are not called for it, so their results cannot loop.
   */
  readonly internal?: boolean;
  /** The object. */
  readonly body: KubeObject;
}

/** What a cycle came to. */
export interface CycleResult {
  /** The object as stored after our write, if we wrote. */
  readonly body?: KubeObject | undefined;
  /** Seconds until another cycle is due even without new events; undefined: none. */
  readonly delay?: number | undefined;
  /** A handler failed in this cycle, temporarily or permanently (for metrics). */
  readonly failed?: boolean | undefined;
  /**
   * The stored object after our write needs no second look: it differs from the processed one
   * only by this cycle's own changes (as far as causes go).
   */
  readonly settled?: boolean | undefined;
}

/**
 * A phase ended the cycle early: what was collected so far is written, and another cycle is
 * due after `delay` seconds (0: at once, from the written object; undefined: none).
 */
export interface CycleEnd {
  /** Seconds until the next cycle is due; undefined: none. */
  readonly delay: number | undefined;
}

/** The handlers chosen for this cycle's cause, and their progress. */
export interface Handling {
  /** The cause being handled. */
  readonly cause: ChangingCause;
  /** Its reason (never `noop`, `free` or `gone`). */
  readonly reason: Reason;
  /** The ids of every handler matching the cause (finished, delayed or due). */
  readonly ids: readonly string[];
  /** The progress records of every changing handler, as loaded and updated in this cycle. */
  readonly progress: ProgressState;
  /** The due handlers the lifecycle chose to run in this cycle. */
  readonly chosen: readonly ChangingHandler[];
}

/** The state of one cycle, read and filled by its phases in turn. */
export interface CycleState {
  /** What is remembered about the object. */
  readonly memory: ObjectMemory;
  /** The event being processed. */
  readonly event: ObjectEvent;
  /** The object (the event's body). */
  readonly body: KubeObject;
  /** The event says the object is gone. */
  readonly deleted: boolean;
  /** Everything the cycle writes, applied once at its end. */
  readonly patch: Patch;
  /** The object's logger. */
  readonly logger: Logger;
  /** The object's essence now (what a change of is a cause), built once per cycle. */
  readonly essence: Record<string, unknown>;
  /** The object's daemons and timers, if the resource has any. */
  readonly spawner: Spawner | undefined;
  /** The cause, once detected (when first needed: by a filter, or after the finalizer). */
  cause?: ChangingCause | undefined;
  /** The handlers chosen for the cause, once selected. */
  handling?: Handling | undefined;
  /** A handler failed in this cycle, temporarily or permanently (for metrics). */
  failed: boolean;
}

/** How the cycle's reasons are named in log lines: `[Title, noun]`. */
export const VERBS: Readonly<Record<Reason, readonly [string, string]>> = {
  create: ["Creation", "creation"],
  update: ["Updating", "update"],
  delete: ["Deletion", "deletion"],
  resume: ["Resuming", "resuming"],
};
