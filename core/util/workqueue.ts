/**
 * A work queue of keys with client-go's semantics (`k8s.io/client-go/util/workqueue`), for
 * level-based controllers: what is queued is a key ("this object needs a look"), never an event.
 *
 * - **Deduplicated while waiting**: a key added again before a worker took it stays queued once;
 *   for delayed adds, the earliest due time wins.
 * - **Never concurrent per key**: a key added while a worker processes it is queued again only
 *   when that worker is done.
 * - **Rate-limited retries**: {@link WorkQueue.addRateLimited} delays a key by its own exponential
 *   backoff (5 ms, 10 ms, … up to 1,000 s, reset by {@link WorkQueue.forget}) and by an overall
 *   token bucket across keys (10 per second, bursts of 100), whichever is longer — client-go's
 *   default controller rate limiter.
 * - **Bounded concurrency** across keys in {@link WorkQueue.run}.
 * - **Draining shutdown**: once stopped, no new key starts; keys in flight get a grace period, then
 *   their signal aborts.
 *
 * It knows nothing about Kubernetes; time comes from an injectable {@link QueueClock} so tests
 * run on a manual clock.
 * @module
 */

/** Where the queue reads time and sets timers (injectable for tests). */
export interface QueueClock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Calls `fn` after `ms` milliseconds; returns a handle for {@link QueueClock.clear}. */
  set(fn: () => void, ms: number): unknown;
  /** Cancels a timer set with {@link QueueClock.set}. */
  clear(handle: unknown): void;
}

/** The real clock: `performance.now()` and `setTimeout`. */
export const REAL_CLOCK: QueueClock = {
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, Math.max(0, ms)),
  clear: (handle) => clearTimeout(handle as number),
};

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** First per-key retry delay, doubled on each failure. @default 5 */
  readonly baseDelayMs?: number;
  /** Longest per-key retry delay. @default 1_000_000 (1,000 s) */
  readonly maxDelayMs?: number;
  /** Overall retry rate across keys (token bucket refill per second). @default 10 */
  readonly qps?: number;
  /** Overall retry burst (token bucket size). @default 100 */
  readonly burst?: number;
  /** Time source. @default REAL_CLOCK */
  readonly clock?: QueueClock;
}

/** Options of {@link WorkQueue.run}. */
export interface RunOptions {
  /** How many keys are processed at once. @default 1 */
  readonly concurrency?: number;
  /** Stops taking keys; in-flight ones get `graceMs` before their signal aborts. */
  readonly signal?: AbortSignal;
  /** Grace period for in-flight keys after the stop. @default 5000 */
  readonly graceMs?: number;
}

/** A key-deduplicating, rate-limited, delaying work queue (see the module description). */
export class WorkQueue<K> {
  readonly #ready = new Set<K>(); // queued, in order, each once
  readonly #processing = new Set<K>();
  readonly #again = new Set<K>(); // added while processing: re-queued when done
  readonly #delayed = new Map<K, { due: number; handle: unknown }>();
  readonly #failures = new Map<K, number>();
  readonly #getters: Array<(key: K | undefined) => void> = [];
  readonly #clock: QueueClock;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #qps: number;
  readonly #burst: number;
  #tokens: number;
  #refilledAt: number;
  #stopped = false;

  /**
   * Creates an empty queue.
   *
   * @param options Backoff, overall rate limit and clock.
   * @throws {RangeError} for a non-positive delay, rate or burst.
   */
  constructor(options: WorkQueueOptions = {}) {
    this.#clock = options.clock ?? REAL_CLOCK;
    this.#baseDelayMs = positive("baseDelayMs", options.baseDelayMs ?? 5);
    this.#maxDelayMs = positive("maxDelayMs", options.maxDelayMs ?? 1_000_000);
    this.#qps = positive("qps", options.qps ?? 10);
    this.#burst = positive("burst", options.burst ?? 100);
    this.#tokens = this.#burst;
    this.#refilledAt = this.#clock.now();
  }

  /** Keys waiting (ready or delayed), not counting those being processed. */
  get length(): number {
    let delayedOnly = 0;
    for (const key of this.#delayed.keys()) if (!this.#ready.has(key)) delayedOnly++;
    return this.#ready.size + delayedOnly;
  }

  /** Keys being processed now. */
  get processing(): number {
    return this.#processing.size;
  }

  /** Whether the queue was stopped (adds are ignored). */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Queues a key now. Ignored when the key is already queued (deduplication), and postponed until
   * the running worker is done when the key is being processed.
   *
   * @param key The key.
   */
  add(key: K): void {
    if (this.#stopped) return;
    this.#cancelDelay(key);
    if (this.#processing.has(key)) {
      this.#again.add(key);
      return;
    }
    if (this.#ready.has(key)) return;
    this.#ready.add(key);
    this.#wake();
  }

  /**
   * Queues a key after a delay; when it is already waiting with an earlier due time (or is
   * ready), nothing changes.
   *
   * @param key The key.
   * @param ms The delay in milliseconds; 0 or less is {@link WorkQueue.add}.
   */
  addAfter(key: K, ms: number): void {
    if (this.#stopped) return;
    if (!(ms > 0)) return this.add(key);
    if (this.#ready.has(key) || this.#again.has(key)) return;
    const due = this.#clock.now() + ms;
    const waiting = this.#delayed.get(key);
    if (waiting && waiting.due <= due) return;
    if (waiting) this.#clock.clear(waiting.handle);
    const handle = this.#clock.set(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    this.#delayed.set(key, { due, handle });
  }

  /**
   * Queues a key after its retry delay: the longer of its own exponential backoff (which grows
   * with each call until {@link WorkQueue.forget}) and the overall token bucket's wait.
   *
   * @param key The key.
   * @returns The delay chosen, in milliseconds.
   */
  addRateLimited(key: K): number {
    const delay = this.nextDelay(key);
    this.addAfter(key, delay);
    return delay;
  }

  /**
   * The next retry delay of a key (and counts the failure): what {@link WorkQueue.addRateLimited}
   * waits.
   *
   * @param key The key.
   * @returns Milliseconds.
   */
  nextDelay(key: K): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    const own = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** Math.min(failures, 60));
    return Math.max(own, this.#bucketDelay());
  }

  /**
   * Resets a key's backoff (after a success).
   *
   * @param key The key.
   */
  forget(key: K): void {
    this.#failures.delete(key);
  }

  /**
   * How many rate-limited retries a key had since its last {@link WorkQueue.forget}.
   *
   * @param key The key.
   * @returns The count.
   */
  retries(key: K): number {
    return this.#failures.get(key) ?? 0;
  }

  /**
   * Takes the next ready key and marks it as being processed; call {@link WorkQueue.done} after.
   *
   * @param signal Stops waiting (resolves `undefined`).
   * @returns The key, or `undefined` when the queue stopped or the signal aborted.
   */
  get(signal?: AbortSignal): Promise<K | undefined> {
    const key = this.#take();
    if (key !== undefined || this.#stopped || signal?.aborted) return Promise.resolve(key);
    return new Promise((resolve) => {
      const getter = (k: K | undefined) => {
        signal?.removeEventListener("abort", cancel);
        resolve(k);
      };
      const cancel = () => {
        const at = this.#getters.indexOf(getter);
        if (at >= 0) this.#getters.splice(at, 1);
        resolve(undefined);
      };
      signal?.addEventListener("abort", cancel, { once: true });
      this.#getters.push(getter);
    });
  }

  /**
   * Marks a key as processed; if it was added meanwhile, it is queued again now.
   *
   * @param key The key from {@link WorkQueue.get}.
   */
  done(key: K): void {
    this.#processing.delete(key);
    if (this.#again.delete(key) && !this.#stopped) {
      this.#ready.add(key);
      this.#wake();
    }
  }

  /** Stops the queue: adds are ignored, delayed keys dropped, waiting getters get `undefined`. */
  stop(): void {
    this.#stopped = true;
    for (const { handle } of this.#delayed.values()) this.#clock.clear(handle);
    this.#delayed.clear();
    this.#ready.clear();
    this.#again.clear();
    for (const getter of this.#getters.splice(0)) getter(undefined);
  }

  /**
   * Processes keys until the signal aborts, at most `concurrency` at once, never one key twice at
   * once. The worker's own bookkeeping (`forget`, `addAfter`, `addRateLimited`) decides what
   * happens next; an error thrown by the worker is a rate-limited retry.
   *
   * Guarantees: after the stop, no key starts; keys in flight get `graceMs`, then the signal
   * they were given aborts; the promise resolves when every worker returned.
   *
   * @param worker Processes one key.
   * @param options Concurrency, stop signal and grace period.
   * @returns Resolves when stopped and drained.
   */
  async run(
    worker: (key: K, signal: AbortSignal) => Promise<void>,
    options: RunOptions = {},
  ): Promise<void> {
    const concurrency = Math.max(1, options.concurrency ?? 1);
    const cancel = new AbortController();
    const stop = options.signal;
    const onStop = () => {
      this.stop();
      // The grace period runs on real time: it bounds a real shutdown.
      const timer = setTimeout(
        () => cancel.abort(stop?.reason),
        options.graceMs ?? 5000,
      );
      finished.finally(() => clearTimeout(timer));
    };
    const loop = async () => {
      for (;;) {
        const key = await this.get();
        if (key === undefined) return;
        try {
          await worker(key, cancel.signal);
        } catch {
          this.addRateLimited(key);
        } finally {
          this.done(key);
        }
      }
    };
    const finished = Promise.all(Array.from({ length: concurrency }, loop)).then(() => {});
    if (stop?.aborted) onStop();
    else stop?.addEventListener("abort", onStop, { once: true });
    await finished;
    stop?.removeEventListener("abort", onStop);
  }

  #take(): K | undefined {
    const first = this.#ready.values().next();
    if (first.done) return undefined;
    this.#ready.delete(first.value);
    this.#processing.add(first.value);
    return first.value;
  }

  #wake(): void {
    while (this.#getters.length && this.#ready.size) {
      const key = this.#take()!;
      this.#getters.shift()!(key);
    }
  }

  #cancelDelay(key: K): void {
    const waiting = this.#delayed.get(key);
    if (!waiting) return;
    this.#clock.clear(waiting.handle);
    this.#delayed.delete(key);
  }

  #bucketDelay(): number {
    const now = this.#clock.now();
    this.#tokens = Math.min(
      this.#burst,
      this.#tokens + (now - this.#refilledAt) * this.#qps / 1000,
    );
    this.#refilledAt = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : -this.#tokens / this.#qps * 1000;
  }
}

function positive(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`WorkQueue option ${name} must be a positive number, got ${value}`);
  }
  return value;
}
