/**
 * The client-side rate limit of `http.ts`: a token bucket that lets `burst` requests go out at
 * once and `qps` per second sustained. Every attempt of a request (retries too) takes a token.
 * @module
 */

import { sleep } from "../util/backoff.ts";

/** Waits until a request may go out under a rate of `qps` per second with bursts of `burst`. */
export class RequestThrottle {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #refilledAt: number;

  /**
   * A full bucket: the first `burst` requests go out at once.
   *
   * @param qps Sustained requests per second; 0 (or less): unlimited.
   * @param burst Requests that may go out at once. @default max(1, qps)
   * @param now The clock, in milliseconds (tests replace it). @default performance.now()
   */
  constructor(qps: number, burst?: number, now: () => number = () => performance.now()) {
    this.#qps = qps;
    this.#burst = burst ?? Math.max(1, qps);
    this.#now = now;
    this.#tokens = this.#burst;
    this.#refilledAt = now();
  }

  /**
   * Waits until a request may go out, and takes its token: at once while tokens are left, else
   * for as long as the refill of the missing part of a token takes (again if the clock says it
   * is not there yet).
   *
   * @param signal Ends the wait early.
   * @throws the signal's reason when it aborts while the wait sleeps.
   */
  async wait(signal?: AbortSignal): Promise<void> {
    const qps = this.#qps;
    if (qps <= 0) return;
    for (;;) {
      const now = this.#now();
      this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#refilledAt) / 1000) * qps);
      this.#refilledAt = now;
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      await sleep(((1 - this.#tokens) / qps) * 1000, signal);
    }
  }
}
