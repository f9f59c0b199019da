/**
 * Per-handler progress across processing cycles: started, retries, delays, final outcomes.
 *
 * Read from the object through a progress storage at the start of a cycle, updated with the
 * cycle's outcomes, and written into the cycle's single patch — only for records that changed.
 * Records are transient: when every handler of a cause is finished, they are purged.
 * @module
 */

import {
  formatTimestamp,
  parseTimestamp,
  type ProgressRecord,
  type ProgressStorage,
} from "../settings/progress.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { Patch } from "../structs/patches.ts";
import type { Outcome } from "./execution.ts";

/** The in-memory state of one handler. */
export interface HandlerProgress {
  /** When the first attempt started. */
  readonly started: Date;
  /** When it finished. */
  readonly stopped?: Date | undefined;
  /** When it may run next. */
  readonly delayed?: Date | undefined;
  /** The reason it runs for. */
  readonly purpose?: string | undefined;
  /** Attempts made so far. */
  readonly retries: number;
  /** Succeeded (or ignored its error). */
  readonly success: boolean;
  /** Failed permanently. */
  readonly failure: boolean;
  /** Message of the last error. */
  readonly message?: string | undefined;
  /** Sub-handler ids (all levels), for purging. */
  readonly subrefs?: readonly string[] | undefined;
}

function fromRecord(record: ProgressRecord, now: Date): HandlerProgress {
  return {
    started: parseTimestamp(record.started) ?? now,
    stopped: parseTimestamp(record.stopped) ?? undefined,
    delayed: parseTimestamp(record.delayed) ?? undefined,
    purpose: record.purpose ?? undefined,
    retries: record.retries ?? 0,
    success: record.success ?? false,
    failure: record.failure ?? false,
    message: record.message ?? undefined,
    subrefs: record.subrefs ?? undefined,
  };
}

function toRecord(p: HandlerProgress): ProgressRecord {
  return {
    started: formatTimestamp(p.started),
    stopped: p.stopped ? formatTimestamp(p.stopped) : null,
    delayed: p.delayed ? formatTimestamp(p.delayed) : null,
    purpose: p.purpose ?? null,
    retries: p.retries,
    success: p.success,
    failure: p.failure,
    message: p.message ?? null,
    subrefs: p.subrefs && p.subrefs.length ? [...p.subrefs].sort() : null,
  };
}

/** Progress of a set of handlers of one object. */
export class ProgressState {
  #states = new Map<string, HandlerProgress>();
  #fetched = new Set<string>();
  #changed = new Set<string>();
  #purged = new Set<string>();
  #storage: ProgressStorage | undefined;
  #body: KubeObject = {};
  #now = new Date();

  /**
   * Reads the records of the given handlers from the object.
   * @param storage Where records live.
   * @param body The object.
   * @param ids Handler ids to read.
   * @param now The current time (for records without `started`).
   * @returns The state.
   */
  static load(
    storage: ProgressStorage,
    body: KubeObject,
    ids: Iterable<string>,
    now: Date = new Date(),
  ): ProgressState {
    const state = new ProgressState();
    state.#storage = storage;
    state.#body = body;
    state.#now = now;
    for (const id of ids) state.#fetch(id);
    return state;
  }

  /** Reads a record lazily (sub-handlers are discovered while their parent runs). */
  #fetch(id: string): HandlerProgress | undefined {
    if (!this.#fetched.has(id) && this.#storage) {
      this.#fetched.add(id);
      const record = this.#storage.fetch({ key: id, body: this.#body });
      if (record && !this.#states.has(id) && !this.#purged.has(id)) {
        this.#states.set(id, fromRecord(record, this.#now));
      }
    }
    return this.#states.get(id);
  }

  /** The state of a handler, if it has started. */
  get(id: string): HandlerProgress | undefined {
    return this.#fetch(id);
  }

  /** Ids with a state. */
  ids(): string[] {
    return [...this.#states.keys()];
  }

  /** Whether the handler finished (succeeded or failed permanently). */
  isFinished(id: string): boolean {
    const s = this.#fetch(id);
    return Boolean(s && (s.success || s.failure));
  }

  /** Whether the handler is waiting for its retry time. */
  isDelayed(id: string, now: Date = new Date()): boolean {
    const delayed = this.#fetch(id)?.delayed;
    return Boolean(delayed && delayed.getTime() > now.getTime());
  }

  /**
   * Ensures a handler has a state (first attempt now) and returns it.
   * @param id Handler id.
   * @param purpose The reason it runs for.
   * @param now The current time.
   * @returns Its state.
   */
  begin(id: string, purpose: string, now: Date = new Date()): HandlerProgress {
    let s = this.#fetch(id);
    if (!s) {
      s = { started: now, retries: 0, success: false, failure: false, purpose };
      this.#states.set(id, s);
      this.#changed.add(id);
    }
    return s;
  }

  /**
   * Records the outcome of an attempt.
   * @param id Handler id.
   * @param outcome What happened.
   * @param now The current time.
   * @param subrefs Sub-handler ids started by this handler.
   */
  record(id: string, outcome: Outcome, now: Date = new Date(), subrefs?: readonly string[]): void {
    const s = this.#fetch(id) ?? { started: now, retries: 0, success: false, failure: false };
    const retries = s.retries + 1;
    const refs = subrefs?.length ? [...new Set([...(s.subrefs ?? []), ...subrefs])] : s.subrefs;
    let next: HandlerProgress;
    switch (outcome.kind) {
      case "success":
      case "ignored":
        next = {
          ...s,
          retries,
          success: true,
          stopped: now,
          delayed: undefined,
          message: undefined,
          subrefs: refs,
        };
        if (outcome.kind === "ignored") next = { ...next, message: outcome.error.message };
        break;
      case "permanent":
        next = {
          ...s,
          retries,
          failure: true,
          stopped: now,
          delayed: undefined,
          message: outcome.error.message,
          subrefs: refs,
        };
        break;
      case "temporary": {
        const delay = outcome.delay ?? 0;
        next = {
          ...s,
          retries,
          delayed: new Date(now.getTime() + delay * 1000),
          message: outcome.error.message,
          subrefs: refs,
        };
        break;
      }
    }
    this.#states.set(id, next);
    this.#changed.add(id);
    this.#purged.delete(id);
  }

  /**
   * Seconds until the earliest delayed handler among `ids` is due (0 if one is due now).
   * @returns `undefined` when none is delayed or pending.
   */
  nextDelay(ids: Iterable<string>, now: Date = new Date()): number | undefined {
    let best: number | undefined;
    for (const id of ids) {
      if (this.isFinished(id)) continue;
      const delayed = this.#states.get(id)?.delayed;
      const wait = delayed ? Math.max(0, (delayed.getTime() - now.getTime()) / 1000) : 0;
      best = best === undefined ? wait : Math.min(best, wait);
    }
    return best;
  }

  /** Whether all given handlers finished. */
  allFinished(ids: Iterable<string>): boolean {
    for (const id of ids) if (!this.isFinished(id)) return false;
    return true;
  }

  /** Counts of succeeded and failed handlers among `ids`. */
  counts(ids: Iterable<string>): { succeeded: number; failed: number } {
    let succeeded = 0;
    let failed = 0;
    for (const id of ids) {
      const s = this.#states.get(id);
      if (s?.success) succeeded++;
      else if (s?.failure) failed++;
    }
    return { succeeded, failed };
  }

  /** Forgets a handler and its sub-handlers, to be purged from the object. */
  purge(id: string): void {
    const refs = this.#fetch(id)?.subrefs ?? [];
    for (const key of [id, ...refs]) {
      this.#states.delete(key);
      this.#changed.delete(key);
      this.#purged.add(key);
    }
  }

  /**
   * Writes changed records and purges into the patch.
   * @param storage Where records live.
   * @param body The object as last seen.
   * @param patch The cycle's patch.
   */
  store(storage: ProgressStorage, body: KubeObject, patch: Patch): void {
    for (const id of this.#purged) {
      if (storage.fetch({ key: id, body })) storage.purge({ key: id, body, patch });
    }
    for (const id of this.#changed) {
      storage.store({ key: id, record: toRecord(this.#states.get(id)!), body, patch });
    }
    this.#changed.clear();
    this.#purged.clear();
  }
}
