/**
 * Idle garbage collection (`settings.process.idleGcDelay`): one full collection after each burst
 * of processing, once the operator has idled for the delay with no worker running, then the C
 * allocator's free pages returned (see core/util/memory.ts). The burst's spare kept-alive
 * connections are closed first. Once per burst, never a periodic chore of an idle operator.
 *
 * Within a long burst (a backlog), one full collection every `settings.process.burstGcCycles`
 * cycles: V8 lets its heap fill with the burst's garbage between its own major collections,
 * which made a backlog's peak grow with its size (docs/performance.md, round 8).
 * @module
 */

import type { HttpClient } from "../../client/http.ts";
import { sleep } from "../../util/backoff.ts";
import { collectGarbage, releaseMemory } from "../../util/memory.ts";
import type { OperatorScope } from "../scope/scope.ts";

/** Kept-alive connections left open when a burst is over (Events, leases and the next cycles). */
const IDLE_CONNECTIONS_KEPT = 2;

/**
 * The operator's parts the idle collector uses: the settings (`process.idleGcDelay` and
 * `process.burstGcCycles`, read anew each time), the logger, and the client whose spare idle connections are closed.
 */
export type IdleScope =
  & Pick<OperatorScope, "settings" | "logger">
  & { readonly client: { readonly http: Pick<HttpClient, "closeIdle"> } };

/**
 * Collects garbage once after each burst of processing cycles, when the operator idles. The
 * orchestrator runs it as one of its parts (`the idle collector`, in its stop group `idle`).
 */
export class IdleCollector {
  #scope: IdleScope;
  /** Whether a worker runs now: no collection in the middle of a cycle. */
  #busy: () => boolean;
  /** Processing cycles since the last collection, and when the last one began. */
  #cycles = 0;
  #lastCycleAt = 0;
  /** Cycles since the last collection within the burst (`process.burstGcCycles`). */
  #sinceCollected = 0;
  /** One full garbage collection. */
  #collect: () => unknown;

  /**
   * A collector that runs once `run()` is called.
   * @param scope The operator's parts it uses.
   * @param busy Whether a worker runs now: no collection in the middle of a cycle.
   * @param collect One full garbage collection within a burst. @default collectGarbage
   */
  constructor(
    scope: IdleScope,
    busy: () => boolean,
    collect: () => unknown = () => collectGarbage("major"),
  ) {
    this.#scope = scope;
    this.#busy = busy;
    this.#collect = collect;
  }

  /**
   * Notes that a processing cycle begins: the burst goes on. Every `process.burstGcCycles`
   * cycles, one full garbage collection (a pause of a few milliseconds).
   */
  cycle(): void {
    this.#cycles++;
    this.#lastCycleAt = performance.now();
    const every = this.#scope.settings.process.burstGcCycles;
    if (every && ++this.#sinceCollected >= every) {
      this.#sinceCollected = 0;
      void this.#collect();
    }
  }

  /**
   * Collects after each burst until the signal aborts, or until the setting is turned off, or
   * for good when the runtime offers no way to collect.
   * @param signal Stops it (a collection under way is finished first).
   */
  async run(signal: AbortSignal): Promise<void> {
    const { settings, logger } = this.#scope;
    while (!signal.aborted) {
      const delayMs = (settings.process.idleGcDelay ?? 0) * 1000;
      // Nothing processed since the last collection: check again a whole delay later (a cheap
      // timer, not a busy loop); otherwise, when the delay after the last cycle is up.
      const idleMs = performance.now() - this.#lastCycleAt;
      const waitMs = this.#cycles === 0 ? delayMs : Math.max(delayMs - idleMs, 100);
      try {
        await sleep(waitMs, signal);
      } catch {
        return; // stopped
      }
      if (settings.process.idleGcDelay === null) return;
      if (this.#cycles === 0 || performance.now() - this.#lastCycleAt < delayMs) continue;
      if (this.#busy()) continue;
      const cycles = this.#cycles;
      this.#cycles = 0;
      const t0 = performance.now();
      // The burst's spare connections first: their buffers are then garbage to collect.
      const closed = this.#scope.client.http.closeIdle(IDLE_CONNECTIONS_KEPT);
      const { collected, trimmed } = await releaseMemory();
      if (!collected && !trimmed) return; // the runtime offers no way: never try again
      const ms = (performance.now() - t0).toFixed(0);
      logger.debug(
        `Collected garbage after ${cycles} cycles and ${delayMs / 1000}s idle ` +
          `(${ms} ms${trimmed ? ", allocator trimmed" : ""}, ${closed} idle connections closed)`,
      );
    }
  }
}
