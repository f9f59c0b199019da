/**
 * Idle garbage collection (`settings.process.idleGcDelay`): one full collection after each burst
 * of processing, once the operator has idled for the delay with no worker running, then the C
 * allocator's free pages returned (see core/util/memory.ts). The burst's spare kept-alive
 * connections are closed first. Once per burst, never a periodic chore of an idle operator.
 *
 * Within a long burst (a backlog), one full collection every `settings.process.burstGcCycles`
 * cycles: V8 lets its heap fill with the burst's garbage between its own major collections,
 * which made a backlog's peak grow with its size (docs/performance.md, round 8).
 *
 * The executable's resident pages (`settings.process.pageOutDelay`): given back as the operator
 * starts and once start-up is over, again after each idle collection, and while cycles run every
 * `settings.process.burstPageOutCycles` cycles (see `pageOutExecutable` in core/util/memory.ts).
 * @module
 */

import type { HttpClient } from "../../client/http.ts";
import { sleep } from "../../util/backoff.ts";
import {
  collectGarbage,
  pageOutExecutable,
  releaseMemory,
  trimAllocator,
} from "../../util/memory.ts";
import type { OperatorScope } from "../scope/scope.ts";

/** Kept-alive connections left open when a burst is over (Events, leases and the next cycles). */
const IDLE_CONNECTIONS_KEPT = 2;

/**
 * The shortest time between two page-outs while cycles run (`process.burstPageOutCycles`), in
 * ms: a page-out costs the code the burst runs read back in, so a flood of quick cycles (a
 * backlog's echoes of its own writes, thousands a second) must not page out every few
 * milliseconds.
 */
const BURST_PAGE_OUT_SPACING_MS = 2000;

/**
 * The operator's parts the idle collector uses: the settings (`process.idleGcDelay`,
 * `process.burstGcCycles`, `process.pageOutDelay` and `process.burstPageOutCycles`, read anew
 * each time), the logger, and the client whose spare idle connections are closed.
 */
export type IdleScope =
  & Pick<OperatorScope, "settings" | "logger">
  & { readonly client: { readonly http: Pick<HttpClient, "closeIdle"> } };

/** What the idle collector asks of the orchestrator, and what tests replace. */
export interface IdleHooks {
  /** Whether a worker runs now: no collection in the middle of a cycle. */
  readonly busy: () => boolean;
  /**
   * Whether objects wait for their cycles now (a listing's backlog, events waiting for their
   * workers): page-outs within a burst happen only then. @default always
   */
  readonly behind?: () => boolean;
  /** One full garbage collection within a burst. @default collectGarbage("major") */
  readonly collect?: () => unknown;
  /** Gives the executable's resident pages back. @default pageOutExecutable */
  readonly pageOut?: () => number | null;
  /**
   * Gives the C allocator's free pages back, with each page-out at start-up and within a burst
   * (after an idle collection, `releaseMemory` has trimmed already). @default trimAllocator
   */
  readonly trim?: () => boolean;
  /** The clock for the spacing of page-outs while cycles run. @default performance.now */
  readonly now?: () => number;
}

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
  /** Cycles since the last page-out within the burst (`process.burstPageOutCycles`). */
  #sincePagedOut = 0;
  /** When the executable's pages last went back (`performance.now()`), or -Infinity. */
  #pagedOutAt = -Infinity;
  /** The clock (`performance.now()`; a test's own). */
  #now: () => number;
  /** Whether objects wait for their cycles now (a backlog): page-outs within a burst only then. */
  #behind: () => boolean;
  /** One full garbage collection. */
  #collect: () => unknown;
  /** Gives the executable's resident pages back: the bytes advised, or null when not possible. */
  #pageOut: () => number | null;
  /** Gives the C allocator's free pages back: false when not possible. */
  #trim: () => boolean;

  /**
   * A collector that runs once `run()` is called.
   * @param scope The operator's parts it uses.
   * @param hooks What it asks and calls: whether a worker runs (`busy`), whether objects wait
   *   (`behind`), and the collection, page-out, trim and clock that tests replace.
   */
  constructor(scope: IdleScope, hooks: IdleHooks) {
    this.#scope = scope;
    this.#busy = hooks.busy;
    this.#collect = hooks.collect ?? (() => collectGarbage("major"));
    this.#pageOut = hooks.pageOut ?? pageOutExecutable;
    this.#trim = hooks.trim ?? trimAllocator;
    this.#now = hooks.now ?? (() => performance.now());
    this.#behind = hooks.behind ?? (() => true);
  }

  /**
   * Notes that a processing cycle begins: the burst goes on. Every `process.burstGcCycles`
   * cycles, one full garbage collection (a pause of a few milliseconds); every
   * `process.burstPageOutCycles` cycles, where the page-out is on and objects wait for their
   * cycles (a backlog), the executable's pages go back, but not within 2 s of the last page-out.
   */
  cycle(): void {
    this.#cycles++;
    this.#lastCycleAt = performance.now();
    const { burstGcCycles, burstPageOutCycles, pageOutDelay } = this.#scope.settings.process;
    if (burstGcCycles && ++this.#sinceCollected >= burstGcCycles) {
      this.#sinceCollected = 0;
      void this.#collect();
    }
    if (
      burstPageOutCycles && pageOutDelay !== null && ++this.#sincePagedOut >= burstPageOutCycles &&
      this.#now() - this.#pagedOutAt >= BURST_PAGE_OUT_SPACING_MS
    ) {
      // Only while objects wait anyway (a backlog): the code read back in after a page-out
      // stalls the next cycles for tens of milliseconds, which a steady load would see in its
      // latencies every few seconds. Not behind: counted anew, checked again that much later.
      if (this.#behind()) this.#pagedOut(`${this.#sincePagedOut} cycles`);
      else this.#sincePagedOut = 0;
    }
  }

  /**
   * Gives the executable's pages back once start-up is over (`process.pageOutDelay` after this
   * starts), and collects after each burst until the signal aborts, or until `idleGcDelay` is
   * turned off, or for good when the runtime offers no way to collect.
   * @param signal Stops it (a collection under way is finished first).
   */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.all([this.#pageOutAfterStart(signal), this.#collectAfterBursts(signal)]);
  }

  /**
   * The pages only start-up used go back: at once (the modules are loaded) and once start-up is
   * over (`process.pageOutDelay`: the kubeconfig, discovery, the first requests).
   */
  async #pageOutAfterStart(signal: AbortSignal): Promise<void> {
    const delay = this.#scope.settings.process.pageOutDelay;
    if (delay === null) return;
    // The runtime's own start (its snapshot, relocations) and the module graph's loading are
    // over: their pages go at once, before a backlog's first cycles add their own.
    this.#pagedOut("the modules loaded");
    try {
      await sleep(delay * 1000, signal);
    } catch {
      return; // stopped
    }
    if (this.#scope.settings.process.pageOutDelay !== null) this.#pagedOut("start-up");
  }

  /**
   * Gives the executable's pages back and, unless just done (`trim` false), the C allocator's
   * free pages, with a DEBUG line; nothing where not possible.
   */
  #pagedOut(after: string, trim = true): void {
    this.#sincePagedOut = 0;
    this.#pagedOutAt = this.#now();
    const advised = this.#pageOut();
    const trimmed = trim && this.#trim();
    if (advised === null) return;
    this.#scope.logger.debug(
      `Paged out the executable after ${after} (${(advised / 2 ** 20).toFixed(0)} MiB advised` +
        `${trimmed ? ", allocator trimmed" : ""})`,
    );
  }

  async #collectAfterBursts(signal: AbortSignal): Promise<void> {
    const { settings, logger } = this.#scope;
    if (settings.process.idleGcDelay === null) return;
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
      if (settings.process.pageOutDelay !== null) this.#pagedOut(`${cycles} cycles`, false);
      const ms = (performance.now() - t0).toFixed(0);
      logger.debug(
        `Collected garbage after ${cycles} cycles and ${delayMs / 1000}s idle ` +
          `(${ms} ms${trimmed ? ", allocator trimmed" : ""}, ${closed} idle connections closed)`,
      );
    }
  }
}
