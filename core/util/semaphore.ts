/**
 * A counting semaphore with abortable acquisition, for bounding concurrency.
 * @module
 */

/** Limits how many holders run at once. */
export class Semaphore {
  #free: number;
  #waiters: Array<() => void> = [];

  /** @param limit How many may hold it at once (at least 1). */
  constructor(limit: number) {
    this.#free = Math.max(1, limit);
  }

  /**
   * Waits for a free slot.
   * @param signal Cancels the wait (rejects with its reason).
   */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", cancel);
        resolve();
      };
      const cancel = () => {
        this.#waiters = this.#waiters.filter((w) => w !== grant);
        reject(signal?.reason);
      };
      this.#waiters.push(grant);
      signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  /** Frees a slot, handing it to the longest waiter if any. */
  release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#free++;
  }
}
