/**
 * Everything long-lived that the operator starts and stops, in one shape: a {@link Part} is
 * started with a stop signal and answers when it is ready and when it has finished (after the
 * signal, its cleanup done). Parts belong to named {@link StopGroup}s; {@link runParts} starts
 * them in the order they are given and stops them group by group in the groups' order, whatever
 * ends them: a stop request, a failing part, or a start that fails half-way.
 *
 * Stopping has two steps. When the stop comes, every group that is told {@link StopGroup.told}
 * `"at once"` hears it together (its parts stop concurrently); then the groups are waited for in
 * their order, and a group told `"in turn"` hears the stop only when the previous groups have
 * finished (it must outlive them: e.g. the informer cache that the workers read).
 *
 * After controller-runtime's `Runnable` (one `Start(ctx)` for the whole manager) and its stop
 * order; the groups are the operator's own (docs/architecture.md, "Parts and stop groups").
 * @module
 */

import { sleep } from "./backoff.ts";
import { firstLine } from "./errors.ts";

/** A started part: when it serves, and when it has stopped. */
export interface Started {
  /** Resolves when the part serves (e.g. listens); rejects if it cannot start. */
  readonly ready: Promise<void>;
  /**
   * Resolves when the part has stopped and cleaned up (after its stop signal); rejects if it
   * fails. Settling while it should run names the part as not running (see `onMissing`).
   */
  readonly finished: Promise<void>;
}

/** Something long-lived that the operator starts and stops. */
export interface Part {
  /** What the part is, in a sentence: "the webhook server" (in `onMissing`'s messages). */
  readonly name: string;
  /** The stop group it stops with (one of the groups given to {@link runParts}). */
  readonly group: string;
  /**
   * Starts the part.
   * @param signal Aborts when the part should stop (see {@link StopGroup.told}).
   * @returns When it is ready, and when it has finished.
   */
  start(signal: AbortSignal): Started;
}

/** Parts that stop together, at one step of the stop order. */
export interface StopGroup {
  /** The group's name: `intake`, `workers`, `coordination`, … */
  readonly name: string;
  /**
   * When its parts hear the stop: `"at once"` when the stop comes (they stop concurrently with
   * the other such groups), or `"in turn"` once the groups before it have finished.
   */
  readonly told: "at once" | "in turn";
  /**
   * How long the stop waits for the group's parts, in milliseconds, read when the stop comes;
   * then it goes on without them (they were told, and stop in the background).
   * @default no limit
   */
  readonly deadline?: () => number;
}

/** How {@link runParts} runs the parts, and whom it tells. */
export interface RunPartsOptions {
  /** Ends the run: the operator's stop, or a lost Lease. */
  readonly signal: AbortSignal;
  /** The stop groups, in their stop order. */
  readonly groups: readonly StopGroup[];
  /** Told once when a part fails (its `finished` rejects) after all parts have started. */
  readonly onFailure?: (error: unknown) => void;
  /** Told why when a part stops on its own (resolves or rejects) while the run should go on. */
  readonly onMissing?: (why: string) => void;
  /** Told when the stop begins after a clean start (not after a failed start). */
  readonly onStopping?: () => void;
}

/** Starts the parts of a run, one after the other; given to the `starting` function of runParts. */
export interface PartsStarter {
  /** The run's stop signal: the given signal, or a start that failed. Parts told "at once" get it. */
  readonly signal: AbortSignal;
  /**
   * Starts a part and waits until it is ready.
   * @param part The part, in one of the run's groups.
   * @throws what the part's `ready` rejects with (the run then stops what had started).
   */
  start(part: Part): Promise<void>;
}

/**
 * Starts parts (in the order `starting` starts them), waits until the signal aborts or a part
 * fails, then stops them group by group. A start that fails half-way stops what had started, in
 * the same order, and throws the start's error.
 * @param options The signal, the groups in stop order, and whom to tell.
 * @param starting Starts the parts, in order (it may build the next parts from the previous).
 * @returns Resolves after all groups have stopped.
 * @throws the start's error, or the first error a part failed with (after the whole stop).
 */
export async function runParts(
  options: RunPartsOptions,
  starting: (parts: PartsStarter) => Promise<void>,
): Promise<void> {
  const run = new PartsRun(options);
  try {
    await starting(run);
  } catch (error) {
    await run.stop().catch(() => {}); // the start's error is the one to tell
    throw error;
  }
  await run.serve();
  options.onStopping?.();
  await run.stop();
}

/** One run's parts and groups. */
class PartsRun implements PartsStarter {
  readonly #options: RunPartsOptions;
  readonly #ended = new AbortController();
  readonly #turns = new Map<string, AbortController>();
  readonly #started: { part: Part; finished: Promise<void> }[] = [];
  readonly signal: AbortSignal;

  constructor(options: RunPartsOptions) {
    this.#options = options;
    this.signal = AbortSignal.any([options.signal, this.#ended.signal]);
    for (const group of options.groups) {
      if (this.#turns.has(group.name)) throw new RangeError(`Stop group ${group.name} twice`);
      this.#turns.set(group.name, new AbortController());
    }
  }

  async start(part: Part): Promise<void> {
    const group = this.#options.groups.find((g) => g.name === part.group);
    const turn = this.#turns.get(part.group);
    if (!group || !turn) throw new RangeError(`${part.name}: no stop group ${part.group}`);
    const started = part.start(group.told === "at once" ? this.signal : turn.signal);
    this.#started.push({ part, finished: started.finished });
    // A part that ends while the run should go on is named (the liveness endpoint reports it).
    const ended = (why: string) => {
      if (!this.signal.aborted) {
        this.#options.onMissing?.(`${capitalized(part.name)} is not running: ${why}`);
      }
    };
    started.finished.then(() => ended("it exited"), (error) => ended(firstLine(error)));
    await started.ready;
  }

  /** Waits until the signal aborts or a part fails (which is told to `onFailure`). */
  async serve(): Promise<void> {
    const stopped = new Promise<void>((resolve) => {
      if (this.signal.aborted) resolve();
      this.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    const never = new Promise<never>(() => {});
    await Promise.race([stopped, ...this.#started.map((s) => s.finished.then(() => never))])
      .catch((error) => this.#options.onFailure?.(error));
  }

  /**
   * Stops the groups in order: the "at once" groups hear the stop together, each "in turn"
   * group when the groups before it have finished.
   * @throws the first error a part failed with, after all groups stopped.
   */
  async stop(): Promise<void> {
    this.#ended.abort();
    let failure: { error: unknown } | undefined;
    for (const group of this.#options.groups) {
      this.#turns.get(group.name)!.abort();
      const finished = Promise.all(
        this.#started.filter((s) => s.part.group === group.name).map((s) => s.finished),
      ).then(() => {});
      // The deadline's timer is cleared once done: it would keep the process alive.
      const timer = new AbortController();
      const waited = group.deadline
        ? Promise.race([finished, sleep(group.deadline(), timer.signal).catch(() => {})])
        : finished;
      await waited.catch((error) => failure ??= { error }).finally(() => timer.abort());
    }
    if (failure) throw failure.error;
  }
}

/** The sentence's first letter in upper case: "the webhook server" → "The webhook server". */
function capitalized(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/**
 * A part that is a resource to dispose of when its stop comes (e.g. a cache started by its
 * readers, or a client's connection pool): ready at once, finished when disposed.
 * @param name What it is.
 * @param group Its stop group.
 * @param resource What to dispose of.
 * @returns The part.
 */
export function disposedPart(
  name: string,
  group: string,
  resource: AsyncDisposable | Disposable,
): Part {
  return {
    name,
    group,
    start: (signal) => ({
      ready: Promise.resolve(),
      finished: aborted(signal).then(() =>
        Symbol.asyncDispose in resource
          ? resource[Symbol.asyncDispose]()
          : resource[Symbol.dispose]()
      ),
    }),
  };
}

/**
 * A part that runs as one promise until its signal aborts (e.g. `poster.run(signal)`): ready at
 * once, finished when the promise settles.
 * @param name What it is.
 * @param group Its stop group.
 * @param run Runs the part until the signal aborts.
 * @returns The part.
 */
export function runningPart(
  name: string,
  group: string,
  run: (signal: AbortSignal) => Promise<void>,
): Part {
  return { name, group, start: (signal) => ({ ready: Promise.resolve(), finished: run(signal) }) };
}

/**
 * Resolves when the signal aborts.
 * @param signal The signal.
 * @returns A promise that never rejects.
 */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
