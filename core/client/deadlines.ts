/**
 * Deadlines of the requests in flight, cheaply: one AbortController per request, aborted when
 * the caller's signal aborts (one listener per caller's signal, not per request) or when its
 * time is up (one timer sweeping all long deadlines; short ones get a timer of their own).
 *
 * What it replaces, per request: `AbortSignal.timeout()` (a timer) and `AbortSignal.any()` (a
 * dependent signal registered on the caller's — the operator's — signal, where every listener
 * added makes the next addition slower while thousands of requests share it).
 * @module
 */

/** One request's signal, and the end of its deadline. */
export interface Deadline {
  /** Aborts on the caller's signal (with its reason) or when time is up (`TimeoutError`). */
  readonly signal: AbortSignal;
  /** The request is done: nothing will abort it any more. */
  close(): void;
}

/** Deadlines shorter than this get a timer of their own (a sweep would be too coarse). */
const SHORT_MS = 2_000;
/** How often the long deadlines are checked. */
const SWEEP_MS = 250;

/** The deadlines of one client's requests. */
export class Deadlines {
  #byParent = new Map<AbortSignal, Set<AbortController>>();
  #due = new Map<AbortController, number>();
  #sweeper: ReturnType<typeof setInterval> | undefined;

  /**
   * Starts one request's deadline.
   * @param parent The caller's signal, if any.
   * @param timeoutMs The time the request may take; 0 or less: no limit.
   * @returns The request's signal and the function that ends the deadline.
   */
  open(parent: AbortSignal | undefined, timeoutMs: number): Deadline {
    const controller = new AbortController();
    if (parent?.aborted) {
      controller.abort(parent.reason);
      return { signal: controller.signal, close: () => {} };
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (timeoutMs > 0 && timeoutMs < SHORT_MS) {
      timer = setTimeout(() => controller.abort(timedOut()), timeoutMs);
    } else if (timeoutMs > 0) {
      this.#due.set(controller, performance.now() + timeoutMs);
      this.#sweeper ??= setInterval(() => this.#sweep(), SWEEP_MS);
    }
    if (parent) this.#follow(parent).add(controller);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      this.#due.delete(controller);
      if (parent) this.#unfollow(parent, controller);
    };
    return { signal: controller.signal, close };
  }

  /** Ends every deadline's timer (e.g. when the client is disposed). */
  stop(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
    this.#due.clear();
  }

  #follow(parent: AbortSignal): Set<AbortController> {
    let children = this.#byParent.get(parent);
    if (!children) {
      const set = children = new Set();
      const onAbort = () => {
        this.#byParent.delete(parent);
        for (const child of set) child.abort(parent.reason);
      };
      // Kept with the set, so that the last request of this parent removes it again.
      FOLLOWERS.set(set, onAbort);
      this.#byParent.set(parent, set);
      parent.addEventListener("abort", onAbort, { once: true });
    }
    return children;
  }

  #unfollow(parent: AbortSignal, controller: AbortController): void {
    const set = this.#byParent.get(parent);
    if (!set) return;
    set.delete(controller);
    if (set.size > 0) return;
    // No request of this parent in flight: no listener left behind on a short-lived signal.
    this.#byParent.delete(parent);
    const onAbort = FOLLOWERS.get(set);
    if (onAbort) parent.removeEventListener("abort", onAbort);
  }

  #sweep(): void {
    if (this.#due.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
      return;
    }
    const now = performance.now();
    for (const [controller, due] of this.#due) {
      if (due > now) continue;
      this.#due.delete(controller);
      controller.abort(timedOut());
    }
  }
}

const FOLLOWERS = new WeakMap<Set<AbortController>, () => void>();

/** The reason `AbortSignal.timeout()` gives, so that callers tell timeouts apart the same way. */
function timedOut(): DOMException {
  return new DOMException("Signal timed out.", "TimeoutError");
}
