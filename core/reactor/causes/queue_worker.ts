/**
 * One object's serial worker (`queueing.ts` starts one per object): it processes its object's
 * events strictly one at a time, and a burst of events collapses to the latest one.
 *
 * Read-your-writes: after a cycle patched the object, the worker continues from the object as
 * stored by that patch; when the watch later echoes that same version (or an older one), the
 * echo is skipped. Delays (retries, the next handler) wait in memory, interrupted by new events.
 * Unexpected errors are throttled per object with `settings.queueing.errorDelays`. What the
 * worker needs of its queue is {@link WorkerQueue}.
 * @module
 */

import type { QueueingSettings } from "../../settings/settings.ts";
import { sleep } from "../../util/backoff.ts";
import type { Semaphore } from "../../util/semaphore.ts";
import type { OperatorScope } from "../scope/scope.ts";
import type { CycleResult, ObjectEvent, ObjectMemory } from "./processing.ts";

/**
 * What a worker's cycles need: the operator's logger, its limiter, admission gate and observer
 * (from the scope), and what is the stream's own — its settings, its cycle, its stop signal and
 * its name.
 */
export type WorkerDeps = Pick<OperatorScope, "logger" | "limiter" | "gate" | "observer"> & {
  /** `settings.queueing` (read live). */
  readonly settings: QueueingSettings;
  /** Processes one event; the queue guarantees one call at a time per object. */
  readonly process: (memory: ObjectMemory, event: ObjectEvent) => Promise<CycleResult>;
  /** Stops the workers (the stream's signal). */
  readonly signal: AbortSignal;
  /** Bounds concurrent processing of this queue's objects (`settings.queueing.workerLimit`). */
  readonly streamLimiter?: Semaphore | undefined;
  /** The queue's name for the observer (the resource). @default "" */
  readonly name?: string | undefined;
};

/**
 * What a worker needs of its queue (`ObjectQueue` in `queueing.ts`): the collaborators, the
 * count of workers not yet begun, and the bookkeeping of idle workers.
 */
export interface WorkerQueue {
  /** The collaborators of the worker's cycles. */
  readonly deps: WorkerDeps;
  /**
   * A worker begins to wait for its first cycle (+1), or stops waiting (-1).
   * @param change +1 or -1.
   */
  countUnbegun(change: 1 | -1): void;
  /**
   * A worker waits with nothing due: the queue interrupts it once idle for
   * `settings.queueing.idleTimeout`.
   * @param worker The worker.
   */
  idle(worker: ObjectWorker): void;
  /**
   * A worker stopped waiting.
   * @param worker The worker.
   */
  busy(worker: ObjectWorker): void;
}

/** Compares two resourceVersions when both are numeric (etcd); otherwise only equality counts. */
function notNewer(candidate: string | undefined, known: string | undefined): boolean {
  if (!candidate || !known) return false;
  if (candidate === known) return true;
  // Decimal numbers without leading zeros: the shorter is smaller, else the order of the text.
  if (/^[1-9]\d*$/.test(candidate) && /^[1-9]\d*$/.test(known)) {
    return candidate.length < known.length ||
      (candidate.length === known.length && candidate < known);
  }
  return false;
}

/** An event older than (or as old as) what was processed, and not one that must be processed. */
function isStale(event: ObjectEvent, processed: string | undefined): boolean {
  return !event.forced && event.type !== "DELETED" &&
    notNewer(event.body.metadata?.resourceVersion, processed);
}

/**
 * One object's worker: processes the object's events one at a time until the queue stops, the
 * object is gone, or the worker is idle. The queue starts it with the object's first event (or
 * the first after the previous worker exited) and hands it the later ones
 * ({@link ObjectWorker.push}).
 */
export class ObjectWorker {
  /** The latest event not yet taken (a burst collapses to it). */
  pending: ObjectEvent | undefined;
  /** When the pending event (from outside) arrived, for the observer's wait time. */
  pendingSince: number | undefined;
  #wake: (() => void) | undefined;
  /** Settles when the worker exits (then it has left the count of workers not yet begun). */
  done: Promise<void>;

  /**
   * Starts the worker at once: it counts as not yet begun until admitted to its first cycle.
   * @param key The object's key.
   * @param memory The object's memory, kept by the queue across workers.
   * @param queue The queue it belongs to.
   * @param first The event it starts with.
   */
  constructor(
    readonly key: string,
    readonly memory: ObjectMemory,
    readonly queue: WorkerQueue,
    first: ObjectEvent,
  ) {
    this.pending = first;
    if (queue.deps.observer) this.pendingSince = performance.now();
    queue.countUnbegun(+1);
    this.done = this.#run().finally(() => this.#begin());
  }

  /** Set once the object's DELETED event was processed: its memory can go. */
  gone = false;

  /** Whether the worker was admitted to its first cycle (or exited before that). */
  #begun = false;

  /** The worker was admitted to its first cycle, or exits: it no longer waits to begin. */
  #begin(): void {
    if (this.#begun) return;
    this.#begun = true;
    this.queue.countUnbegun(-1);
  }

  /** The resourceVersion the last cycle left the object at. */
  #processed: string | undefined;

  /**
   * A later event of the object: it replaces the pending one and ends a wait — unless it is the
   * watch's echo of the worker's own write, or older.
   * @param event The event.
   */
  push(event: ObjectEvent): void {
    // The watch's echo of our own write (or anything older): nothing new, not even a wake-up.
    if (isStale(event, this.#processed)) return;
    if (this.queue.deps.observer) this.pendingSince ??= performance.now();
    this.pending = event;
    this.#wake?.();
  }

  /**
   * A wake-up (a daemon or timer exited) is due: folded into the worker's next iteration, which
   * takes the body known then — after the cycle running now, if any — not a body chosen now.
   */
  woken = false;

  /** Asks for a wake-up (see {@link woken}). */
  wake(): void {
    if (this.queue.deps.observer) this.pendingSince ??= performance.now();
    this.woken = true;
    this.#wake?.();
  }

  /** Ends a wait at once (the queue calls it for all workers when the operator stops). */
  interrupt(): void {
    this.#wake?.();
  }

  /**
   * Waits for a new event: at most `seconds` when something is due then (a timer of its own),
   * else until the queue finds it idle for longer than `settings.queueing.idleTimeout` (one
   * sweep for all idle workers: a timer per idle worker adds up over thousands of objects).
   * No listener on the operator's signal per wait: the queue interrupts all workers at once.
   * @returns Whether an event came.
   */
  async #waitForEvent(seconds: number | undefined): Promise<boolean> {
    if (this.pending || this.woken) return true;
    if (this.queue.deps.signal.aborted) return false;
    await new Promise<void>((resolve) => {
      if (seconds === undefined) {
        this.#wake = resolve;
        this.queue.idle(this);
        return;
      }
      const timer = setTimeout(resolve, seconds * 1000);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = undefined;
    this.queue.busy(this);
    return Boolean(this.pending) || this.woken;
  }

  /**
   * Kopf's batch window: waits until no newer event arrived for `seconds`; each newer event (it
   * replaces the pending one) starts the wait anew. Ends at once when the queue stops.
   */
  async #batch(seconds: number): Promise<void> {
    const { signal } = this.queue.deps;
    for (;;) {
      const seen = this.pending;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, seconds * 1000);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
      if (signal.aborted || this.pending === seen) return;
    }
  }

  /**
   * The worker's loop: wait for something to do, be admitted, take the latest event, run its
   * cycle, and go on from what the cycle left; exits when the queue stops, when the worker is
   * idle (see `QueueDeps.forgettable`), or when the object is gone.
   */
  async #run(): Promise<void> {
    const { deps } = this.queue;
    while (!deps.signal.aborted) {
      if (!this.pending && !await this.#awaitWork()) break; // stopped, or idle: it exits
      // Kopf's batching: an event from outside (an object's first one too, unless a cycle is
      // retried after an error) waits until no newer one came for the window.
      if (deps.settings.kopfBatching && !this.pending?.internal && !this.woken && !this.#errors) {
        await this.#batch(deps.settings.batchWindow || KOPF_BATCH_WINDOW);
        if (deps.signal.aborted) break;
      }
      // No wait at all when admitted at once: a new object's first event is taken in this turn.
      const admission = deps.gate?.enter(deps.signal);
      if (admission && !await admission.then(() => true, () => false)) break; // the queue stops
      this.#begin();
      const event = this.#takeEvent();
      if (!event) {
        deps.gate?.leave(); // nothing new to process after all
        continue;
      }
      const result = await this.#cycle(event);
      if (result && !this.#settle(event, result)) break; // the object is gone
    }
  }

  /** The event the last cycle ended with (its written object, if it wrote): re-processed when due. */
  #current: ObjectEvent | undefined;

  /** Whether the worker holds a body of its object (the last cycle's, or an event pending). */
  get holdsBody(): boolean {
    return this.#current !== undefined || this.pending !== undefined;
  }
  /** Seconds until `#current` must be re-processed without events (a delayed handler), if ever. */
  #dueIn: number | undefined;
  /** Unexpected errors in a row (the index into `settings.queueing.errorDelays`). */
  #errors = 0;

  /**
   * With no event pending: waits for one, a wake-up, or the due time of a delayed handler (which
   * pends `#current` again), then lets a burst collapse to its latest event.
   * @returns false when the worker should exit: the queue stops, or it is idle.
   */
  async #awaitWork(): Promise<boolean> {
    const { deps } = this.queue;
    // Nothing due and nothing that can wake it (no daemons or timers): its last body is not
    // needed while it waits — the next event brings its own. Idle workers of a listing (all of
    // them, for the idle timeout) held one whole object each: on a restart over 6,000 handled
    // objects, 8 MiB of peak and 7% of the CPU (bench/backlog_probe.ts --restart).
    if (this.#dueIn === undefined && !this.memory.spawner) this.#current = undefined;
    const arrived = await this.#waitForEvent(this.#dueIn);
    if (deps.signal.aborted) return false;
    if (!arrived) {
      if (this.#dueIn === undefined || !this.#current) return false; // idle (see forgettable)
      this.pending = { ...this.#current, internal: true, forced: true }; // a delayed handler is due
      deps.observer?.retried(deps.name ?? "");
    } else if (deps.settings.kopfBatching) {
      // Batched in #run, as every event from outside.
    } else if (deps.settings.batchWindow > 0) {
      // Opt-in batching: wait, so a burst collapses to its latest event.
      await sleep(deps.settings.batchWindow * 1000, deps.signal).catch(() => {});
    } else {
      // One macrotask only: events already read from the stream in the same chunk land
      // first, so a burst still collapses without delaying a lone change.
      await nextMacrotask();
    }
    return true;
  }

  /**
   * Takes the latest event, a wake-up folded in.
   * @returns The event to process, or undefined when there is nothing new (a stale echo).
   */
  #takeEvent(): ObjectEvent | undefined {
    const { deps } = this.queue;
    if (this.woken) {
      // A wake-up re-processes the body the object has now, after the previous cycle (its
      // write included) — unless a newer event waits, which is processed instead.
      this.woken = false;
      const body = this.#current?.body ?? this.memory.latest;
      if (body && (!this.pending || isStale(this.pending, this.#processed))) {
        this.pending = { type: "MODIFIED", body, forced: true, internal: true };
      }
    }
    const event = this.pending;
    this.pending = undefined;
    if (!event) return undefined;
    if (this.pendingSince !== undefined) {
      deps.observer?.dequeued(deps.name ?? "", (performance.now() - this.pendingSince) / 1000);
      this.pendingSince = undefined;
    }
    if (event !== this.#current && isStale(event, this.#processed)) return undefined;
    return event;
  }

  /**
   * Runs one cycle within the limiters, then leaves the gate. An unexpected error is logged,
   * the event pends again (unless a newer one came), and the worker waits the next error delay.
   * @returns The cycle's result, or undefined after an error.
   */
  async #cycle(event: ObjectEvent): Promise<CycleResult | undefined> {
    const { deps } = this.queue;
    let result: CycleResult;
    try {
      try {
        await deps.streamLimiter?.acquire(deps.signal);
        try {
          await deps.limiter?.acquire(deps.signal);
          try {
            result = await deps.process(this.memory, event);
          } finally {
            deps.limiter?.release();
          }
        } finally {
          deps.streamLimiter?.release();
        }
      } finally {
        deps.gate?.leave();
      }
      this.#errors = 0;
      return result;
    } catch (error) {
      if (deps.signal.aborted) return undefined; // the loop ends
      const delays = deps.settings.errorDelays;
      const delay = delays.length ? delays[Math.min(this.#errors, delays.length - 1)]! : 0;
      this.#errors++;
      deps.logger.forObject(event.body, { local: true }).exception(
        `Unexpected error while processing; retrying in ${delay}s.`,
        error,
      );
      this.pending ??= event;
      deps.observer?.retried(deps.name ?? "");
      await sleep(delay * 1000, deps.signal).catch(() => {});
      return undefined;
    }
  }

  /**
   * Goes on from what a cycle left: the object as its write stored it, the delay until it is
   * due again, and one more look at once after a write (or when due now).
   * @returns false when the object is gone (its DELETED event processed): the worker exits.
   */
  #settle(event: ObjectEvent, result: CycleResult): boolean {
    if (event.type === "DELETED") {
      this.gone = true;
      return false;
    }
    // A write that changed nothing returns the same resourceVersion: nothing new to look at.
    const wrote = result.body !== undefined &&
      result.body.metadata?.resourceVersion !== event.body.metadata?.resourceVersion;
    const current: ObjectEvent = result.body
      ? { type: "MODIFIED", body: result.body, internal: true }
      : event;
    this.#current = current;
    // Kept only for wake-ups by daemons and timers while no worker runs (a running worker
    // wakes up with its own latest body); other objects need no body in memory.
    if (this.memory.spawner) this.memory.latest = current.body;
    this.#processed = current.body.metadata?.resourceVersion ?? this.#processed;
    this.#dueIn = result.delay;
    // After our own write, look at the stored object once more: it may contain someone else's
    // change made while the cycle ran, whose own watch event is older and will be skipped.
    // Without an essential change this cycle makes no request at all.
    // (An event that arrived during the cycle is older than our write when not newer: the
    // stored object already includes it.)
    const arrived = this.pending; // may have been set during the cycle
    const stale = arrived && notNewer(arrived.body.metadata?.resourceVersion, this.#processed);
    if ((this.#dueIn === 0 || (wrote && !result.settled)) && (!arrived || stale)) {
      this.pending = { ...current, internal: true, forced: true };
    }
    return true;
  }
}

/** Kopf's default batch window (seconds), used by `kopfBatching` when `batchWindow` is 0. */
const KOPF_BATCH_WINDOW = 0.1;

let tick: Promise<void> | undefined;

/**
 * The next macrotask, one for everyone who asks in the same turn: `setImmediate`, which runs once
 * the microtasks (the rest of the chunk's events) are done. Not `setTimeout(0)`: Deno's timers
 * wait at least 1 ms (2-3 ms on a busy machine), added to every change of a waiting object.
 */
function nextMacrotask(): Promise<void> {
  return tick ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      tick = undefined;
      resolve();
    })
  );
}
