/**
 * Per-object serial workers: events are keyed by object (uid), each object has at most one
 * worker (`queue_worker.ts`: its events one at a time, a burst collapsed to the latest one, the
 * echoes of its own writes skipped), and different objects are processed concurrently
 * (optionally bounded). The queue starts and interrupts the workers, keeps each object's memory
 * from one worker to the next until the object is deleted (or forgettable), ends workers idle for
 * `settings.queueing.idleTimeout`, and counts the objects waiting for their first cycle.
 * @module
 */

import type { KubeObject } from "../../structs/objects.ts";
import { sleep } from "../../util/backoff.ts";
import type { Memo } from "../../intents/contexts.ts";
import type { Spawner } from "../../engines/runners/daemons.ts";
import type { ObjectEvent, ObjectMemory } from "./processing.ts";
import { ObjectWorker, type WorkerDeps, type WorkerQueue } from "./queue_worker.ts";

/**
 * What the queue needs: what its workers need ({@link WorkerDeps}: the operator's logger, its
 * limiter, admission gate and observer, and the stream's settings, cycle, stop signal and name),
 * and what only the queue uses — the stream's memos, and whether a memory can be forgotten.
 */
export type QueueDeps = WorkerDeps & {
  /** Creates the memo of an object seen for the first time (its memory is the queue's). */
  readonly createMemo: (body: KubeObject) => Memo;
  /**
   * Whether an object's memory holds nothing worth keeping once its worker exits idle (then it is
   * dropped, and made anew by the object's next event). Unset: memories are kept until deletion.
   */
  readonly forgettable?: ((memory: ObjectMemory) => boolean) | undefined;
};

/** The key of an object: its uid, or namespace/name when it has none. */
export function objectKey(body: KubeObject): string {
  const meta = body.metadata ?? {};
  return meta.uid ?? `${meta.namespace ?? ""}/${meta.name ?? ""}`;
}

/**
 * The memory of one object, kept by its queue. A class, not a literal with a `wake` closure: one
 * closure and its context per remembered object add up (~100 bytes each, 1 MiB per 10,000).
 */
class QueuedMemory implements ObjectMemory {
  readonly memo: Memo;
  handledOnce = false;
  spawner: Spawner | undefined;
  lastEssence: string | undefined;
  latest: KubeObject | undefined;
  readonly #queue: ObjectQueue;
  readonly #key: string;

  constructor(memo: Memo, queue: ObjectQueue, key: string) {
    this.memo = memo;
    this.#queue = queue;
    this.#key = key;
  }

  wake(): void {
    this.#queue.wake(this.#key);
  }
}

/** Routes object events to per-object workers. */
export class ObjectQueue implements WorkerQueue {
  /** The queue's collaborators. */
  readonly deps: QueueDeps;
  #workers = new Map<string, ObjectWorker>();
  #memories = new Map<string, ObjectMemory>();
  /** Workers waiting with nothing due, and since when (insertion order is idle order). */
  #idle = new Map<ObjectWorker, number>();
  #sweeper: ReturnType<typeof setInterval> | undefined;
  /** Workers not yet admitted to their first cycle (e.g. a listing's objects). */
  #unbegun = 0;
  /** Who waits for {@link room}: how few waiting workers they wait for. */
  #roomWaiters: { below: number; resolve: () => void }[] = [];

  /** How many running workers hold their object's last body (diagnostics, tests). */
  get heldBodies(): number {
    let held = 0;
    for (const worker of this.#workers.values()) if (worker.holdsBody) held++;
    return held;
  }

  /** How many objects wait for their first cycle (a listing's backlog). */
  get unbegun(): number {
    return this.#unbegun;
  }

  /**
   * A worker begins to wait for its first cycle (+1), or stops waiting (-1).
   * @param change +1 or -1.
   */
  countUnbegun(change: 1 | -1): void {
    this.#unbegun += change;
    if (change > 0 || !this.#roomWaiters.length) return;
    const ready = this.#roomWaiters.filter((w) => this.#unbegun < w.below);
    if (!ready.length) return;
    this.#roomWaiters = this.#roomWaiters.filter((w) => this.#unbegun >= w.below);
    for (const waiter of ready) waiter.resolve();
  }

  /**
   * Waits while `limit` or more objects wait for their first cycle, until half as many do (so a
   * listing reads on in runs, not object by object), or the signal aborts.
   * @param limit How many waiting objects are too many.
   * @param signal Ends the wait early.
   * @returns Undefined when there is room now; else a promise that resolves when there is.
   */
  room(limit: number, signal: AbortSignal): Promise<void> | undefined {
    if (this.#unbegun < limit || signal.aborted) return undefined;
    return new Promise<void>((resolve) => {
      const waiter = {
        below: Math.max(1, Math.ceil(limit / 2)),
        resolve: () => {
          signal.removeEventListener("abort", done);
          resolve();
        },
      };
      const done = () => {
        this.#roomWaiters = this.#roomWaiters.filter((w) => w !== waiter);
        resolve();
      };
      signal.addEventListener("abort", done, { once: true });
      this.#roomWaiters.push(waiter);
    });
  }

  /**
   * A worker waits with nothing due: it exits once idle for `settings.queueing.idleTimeout`.
   * @param worker The worker.
   */
  idle(worker: ObjectWorker): void {
    this.#idle.set(worker, performance.now());
    // Swept a few times per timeout: idle workers exit up to a quarter of it late.
    const every = Math.max(10, (this.deps.settings.idleTimeout * 1000) / 4);
    this.#sweeper ??= setInterval(() => this.#sweep(), every);
  }

  /**
   * A worker stopped waiting.
   * @param worker The worker.
   */
  busy(worker: ObjectWorker): void {
    this.#idle.delete(worker);
  }

  #sweep(): void {
    if (this.#idle.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
      return;
    }
    const cutoff = performance.now() - this.deps.settings.idleTimeout * 1000;
    for (const [worker, since] of this.#idle) {
      if (since > cutoff) break; // the rest went idle later
      this.#idle.delete(worker);
      worker.interrupt();
    }
  }

  /**
   * A queue with no workers yet; it interrupts them all when `deps.signal` aborts.
   * @param deps What the workers need.
   */
  constructor(deps: QueueDeps) {
    this.deps = deps;
    deps.signal.addEventListener("abort", () => {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
      for (const worker of this.#workers.values()) worker.interrupt();
    }, { once: true });
  }

  /**
   * Queues an event for its object, starting a worker if none runs.
   * @param event The event.
   */
  push(event: ObjectEvent): void {
    const key = objectKey(event.body);
    if (!event.internal) this.deps.observer?.queued(this.deps.name ?? "");
    const worker = this.#workers.get(key);
    if (worker) {
      worker.push(event);
      return;
    }
    let memory = this.#memories.get(key);
    if (!memory) {
      memory = new QueuedMemory(this.deps.createMemo(event.body), this, key);
      this.#memories.set(key, memory);
    }
    const started = new ObjectWorker(key, memory, this, event);
    this.#workers.set(key, started);
    started.done.finally(() => {
      if (this.#workers.get(key) === started) this.#workers.delete(key);
      if (started.gone || started.pending?.type === "DELETED") this.#memories.delete(key);
      else if (!started.pending && !started.woken && this.deps.forgettable?.(memory)) {
        this.#memories.delete(key);
      }
      if (started.pending && !this.deps.signal.aborted) {
        // An event arrived as the worker was exiting: start a new one for it.
        const again = started.pending;
        started.pending = undefined;
        this.push(again);
      } else if (started.woken && !started.gone) {
        // A wake-up came as the worker was exiting: its last cycle's body is the latest.
        started.woken = false;
        this.wake(key);
      }
    });
  }

  /**
   * Re-processes a remembered object soon with its latest body (see {@link ObjectMemory.wake}):
   * while its worker runs, in the worker's next iteration, with the body the cycle running now
   * ends with (never a body taken before that cycle's write); else with the body its last cycle
   * ended with.
   * @param key The object's key.
   */
  wake(key: string): void {
    if (this.deps.signal.aborted) return;
    const worker = this.#workers.get(key);
    if (worker) {
      worker.wake();
      return;
    }
    const memory = this.#memories.get(key);
    const body = memory?.latest;
    if (!memory || !body) return;
    this.push({ type: "MODIFIED", body, forced: true, internal: true });
  }

  /**
   * The memory of one remembered object.
   * @param key The object's key (its uid; see {@link objectKey}).
   * @returns The memory, or `undefined` for an object not seen (or already forgotten).
   */
  memory(key: string): ObjectMemory | undefined {
    return this.#memories.get(key);
  }

  /** The memories of all remembered objects. */
  memories(): ObjectMemory[] {
    return [...this.#memories.values()];
  }

  /** Number of objects remembered (for tests of memory growth). */
  get size(): number {
    return this.#memories.size;
  }

  /** Number of running workers. */
  get active(): number {
    return this.#workers.size;
  }

  /** Number of objects whose event waits for their worker (a burst counts once). */
  get waiting(): number {
    let n = 0;
    for (const worker of this.#workers.values()) if (worker.pending || worker.woken) n++;
    return n;
  }

  /**
   * Waits for all workers to finish (after the signal aborted), at most `timeoutSeconds`.
   * @param timeoutSeconds Upper bound.
   */
  async drain(timeoutSeconds: number): Promise<void> {
    const all = Promise.allSettled([...this.#workers.values()].map((w) => w.done));
    const timeout = new AbortController();
    await Promise.race([all, sleep(timeoutSeconds * 1000, timeout.signal).catch(() => {})]);
    timeout.abort();
  }
}
