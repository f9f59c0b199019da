/**
 * Lifecycles: which of the handlers that are due run in this processing cycle.
 *
 * A lifecycle receives the handlers that are not finished and not delayed, in registration
 * order, with their retry counts, and returns the subset to run now. The default, {@link asap},
 * runs one handler per cycle, preferring the fewest retries, so one failing handler never
 * blocks the others and each handler's outcome is persisted before the next one starts.
 * @module
 */

/** What a lifecycle knows about a due handler. */
export interface LifecycleCandidate {
  /** Handler id. */
  readonly id: string;
  /** Attempts made so far. */
  readonly retries: number;
}

/** Chooses which due handlers run in this cycle. */
export type Lifecycle = <T extends LifecycleCandidate>(handlers: readonly T[]) => readonly T[];

/**
 * Runs every due handler in one cycle, in registration order.
 *
 * @param handlers The due handlers, in registration order.
 * @returns All of them.
 */
export function allAtOnce<T extends LifecycleCandidate>(handlers: readonly T[]): readonly T[] {
  return handlers;
}

/**
 * Runs the first due handler only.
 *
 * @param handlers The due handlers, in registration order.
 * @returns The first one, or none.
 */
export function oneByOne<T extends LifecycleCandidate>(handlers: readonly T[]): readonly T[] {
  return handlers.slice(0, 1);
}

/**
 * Runs every due handler, in random order.
 *
 * @param handlers The due handlers, in registration order.
 * @returns All of them, shuffled (a new array).
 */
export function shuffled<T extends LifecycleCandidate>(handlers: readonly T[]): readonly T[] {
  const copy = [...handlers];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

/**
 * Runs one random due handler.
 *
 * @param handlers The due handlers, in registration order.
 * @returns One of them, or none.
 */
export function randomized<T extends LifecycleCandidate>(handlers: readonly T[]): readonly T[] {
  return shuffled(handlers).slice(0, 1);
}

/**
 * The default: one handler per cycle, the one with the fewest retries (ties: registration order).
 *
 * @param handlers The due handlers, in registration order.
 * @returns The chosen one, or none.
 */
export function asap<T extends LifecycleCandidate>(handlers: readonly T[]): readonly T[] {
  let best: T | undefined;
  for (const handler of handlers) if (!best || handler.retries < best.retries) best = handler;
  return best ? [best] : [];
}

let defaultLifecycle: Lifecycle = asap;

/**
 * The lifecycle used when none is given.
 *
 * @returns The current default ({@link asap} unless replaced).
 */
export function getDefaultLifecycle(): Lifecycle {
  return defaultLifecycle;
}

/**
 * Replaces the lifecycle used when none is given.
 * @param lifecycle The new default; `undefined` restores {@link asap}.
 */
export function setDefaultLifecycle(lifecycle: Lifecycle | undefined): void {
  defaultLifecycle = lifecycle ?? asap;
}
