/**
 * Retry delays: exponential growth with full-range jitter, and `Retry-After` parsing.
 *
 * Pure arithmetic; the sleeping is done by callers with {@link sleep}. Jitter spreads
 * retries of many clients so a recovering API server is not hit by a synchronised wave.
 * @module
 */

/** How retry delays grow. */
export interface BackoffOptions {
  /** Delay before the first retry, in milliseconds. @default 200 */
  readonly initialMs?: number;
  /** Upper bound of any single delay, in milliseconds. @default 30000 */
  readonly maxMs?: number;
  /** Growth factor per attempt. @default 2 */
  readonly factor?: number;
  /** Fraction of the delay that is randomised (0 = none, 1 = anywhere in [0, delay]). @default 0.5 */
  readonly jitter?: number;
  /** Source of randomness in [0, 1), injectable for tests. @default Math.random */
  readonly random?: () => number;
  /** An explicit schedule in milliseconds (the last one repeats); overrides the growth. */
  readonly delaysMs?: readonly number[];
}

/**
 * The delay before retry number `attempt` (0-based), in milliseconds.
 *
 * @param attempt How many retries were made already.
 * @param options Growth parameters.
 * @returns A delay in `[base * (1 - jitter), base]`, where base = min(max, initial * factor^attempt).
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const initial = options.initialMs ?? 200;
  const max = options.maxMs ?? 30_000;
  const factor = options.factor ?? 2;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5));
  const random = options.random ?? Math.random;
  const schedule = options.delaysMs;
  const base = schedule?.length
    ? schedule[Math.min(Math.max(0, attempt), schedule.length - 1)]!
    : Math.min(max, initial * factor ** Math.max(0, attempt));
  return base * (1 - jitter * random());
}

/**
 * Parses an HTTP `Retry-After` header: delta-seconds or an HTTP date.
 *
 * @param value The header value, if any.
 * @param now The current time in epoch milliseconds.
 * @returns Milliseconds to wait, or `undefined` when absent or unparseable.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Waits for `ms` milliseconds, or until the signal aborts (then rejects with its reason).
 *
 * @param ms Milliseconds to wait; negative values are treated as zero.
 * @param signal Cancels the wait.
 * @returns A promise resolving after the delay.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
