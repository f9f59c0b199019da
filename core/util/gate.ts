/**
 * An admission gate: at most `limit` holders are admitted at once, and a holder counts only
 * while it is not away. The operator admits its processing cycles through one, so that a burst
 * cannot start thousands of cycles that would only queue at the API server holding their memory,
 * while cycles whose handlers are slow stop counting ({@link AdmissionGate.slow}).
 * @module
 */

interface Waiter {
  readonly grant: () => void;
  readonly cancel: (reason: unknown) => void;
  readonly signal: AbortSignal | undefined;
  cancelled: boolean;
}

interface Slow {
  readonly since: number;
  away: boolean;
}

/** Admits holders up to a limit; holders that are away do not count. */
export class AdmissionGate {
  #limit: number;
  #busy = 0;
  #waiters: Waiter[] = [];
  #bySignal = new Map<AbortSignal, Set<Waiter>>();
  #head = 0;
  #patience: number;
  #slow = new Set<Slow>();
  #sweeper: ReturnType<typeof setInterval> | undefined;

  /**
   * @param limit How many may be admitted and present at once (at least 1).
   * @param patienceMs How long work run through {@link slow} counts before it goes away.
   */
  constructor(limit: number, patienceMs = 100) {
    this.#limit = Math.max(1, limit);
    this.#patience = patienceMs;
  }

  /** Holders admitted and not away. */
  get busy(): number {
    return this.#busy;
  }

  /** Holders waiting for admission (cancelled waits may still count until their turn). */
  get waiting(): number {
    return this.#waiters.length - this.#head;
  }

  /**
   * Admits the caller: at once (`undefined`, nothing to await) when fewer than the limit are
   * busy and nobody waits, else a promise resolved when it is the caller's turn (first come,
   * first served), or rejected with the signal's reason if it aborts first.
   * @param signal Cancels the wait.
   * @returns `undefined` when admitted at once, else the wait.
   */
  enter(signal?: AbortSignal): Promise<void> | undefined {
    if (this.#busy < this.#limit && this.waiting === 0) {
      this.#busy++;
      return undefined;
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { grant: resolve, cancel: reject, cancelled: false, signal };
      if (signal) this.#watch(signal).add(waiter);
      this.#waiters.push(waiter);
      this.#admit(); // those ahead may all have been cancelled
    });
  }

  /**
   * The waiters that a signal cancels. One listener per signal, not one per waiter: a backlog
   * puts thousands of waiters in line, and adding or removing each listener costs time in
   * proportion to the listeners the signal already has.
   */
  #watch(signal: AbortSignal): Set<Waiter> {
    let waiters = this.#bySignal.get(signal);
    if (!waiters) {
      const set = waiters = new Set();
      this.#bySignal.set(signal, set);
      signal.addEventListener("abort", () => {
        this.#bySignal.delete(signal);
        for (const waiter of set) {
          waiter.cancelled = true;
          waiter.cancel(signal.reason);
        }
        this.#admit(); // cancelled ones may have been first in line
      }, { once: true });
    }
    return waiters;
  }

  /** The admitted caller is done: the next waiter, if any, is admitted. */
  leave(): void {
    this.#busy--;
    this.#admit();
  }

  /**
   * Runs `fn` with the admitted caller not counted (e.g. while a handler runs), and counts it
   * again afterwards without waiting: it was admitted once, and finishing is what frees slots.
   * @param fn The work done away.
   * @returns What `fn` returned.
   */
  async away<T>(fn: () => Promise<T>): Promise<T> {
    this.leave();
    try {
      return await fn();
    } finally {
      this.#busy++;
    }
  }

  /**
   * Runs work that may be slow (a handler): it counts while it is quick, and stops counting
   * once it has run for the patience (checked a few times per patience, by one timer for all),
   * so that slow work never holds up the others; when it ends, it counts again, without
   * waiting. Quick work thus stays bounded by the limit, slow work is not bounded by it.
   * @param fn The work.
   * @returns What `fn` returned.
   */
  async slow<T>(fn: () => Promise<T>): Promise<T> {
    const entry: Slow = { since: performance.now(), away: false };
    this.#slow.add(entry);
    this.#sweeper ??= setInterval(() => this.#sweep(), this.#patience / 4);
    try {
      return await fn();
    } finally {
      this.#slow.delete(entry);
      if (entry.away) this.#busy++;
    }
  }

  #sweep(): void {
    // The timer stops at the first sweep with nothing to watch (not whenever the set empties:
    // quick work empties it all the time, and timers are not free).
    if (this.#slow.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
      return;
    }
    const cutoff = performance.now() - this.#patience;
    for (const entry of this.#slow) {
      if (entry.away || entry.since > cutoff) continue;
      entry.away = true;
      this.leave();
    }
  }

  #admit(): void {
    while (this.#busy < this.#limit && this.#head < this.#waiters.length) {
      const next = this.#waiters[this.#head]!;
      this.#head++;
      if (next.cancelled) continue;
      if (next.signal) this.#bySignal.get(next.signal)?.delete(next);
      this.#busy++;
      next.grant();
    }
    // Compact now and then, so that a long queue's consumed head does not pile up.
    if (this.#head > 1024 && this.#head * 2 > this.#waiters.length) {
      this.#waiters = this.#waiters.slice(this.#head);
      this.#head = 0;
    }
  }
}
