/**
 * Running one handler once and turning what happened into an outcome: success with a result,
 * a temporary failure with a delay, a permanent failure, or an ignored error.
 *
 * Retry limits and timeouts are checked before each attempt (as in Kopf); additionally, an
 * async handler still running when its timeout expires sees its `signal` aborted. Nothing here
 * sleeps: delays are data, realised by the worker that owns the object.
 * @module
 */

/** A failure that will be retried after `delay` seconds (default 60). */
export class TemporaryError extends Error {
  /** Seconds until the retry; `null` retries immediately. */
  readonly delay: number | null;

  /**
   * Creates a temporary failure; throw it from a handler to have it retried later.
   *
   * @param message What went wrong.
   * @param options `delay` in seconds (default 60; `null` = immediately) and `cause`.
   */
  constructor(message = "", options: { delay?: number | null; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "TemporaryError";
    this.delay = options.delay === undefined ? 60 : options.delay;
  }
}

/** A failure that is not retried: the handler is done (failed) for the current change. */
export class PermanentError extends Error {
  /**
   * Creates a permanent failure; throw it from a handler to stop retrying it.
   *
   * @param message What went wrong.
   * @param options `cause`.
   */
  constructor(message = "", options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "PermanentError";
  }
}

/** The handler's `timeout` passed since its first attempt. */
export class HandlerTimeoutError extends PermanentError {
  /**
   * Creates the error the framework reports when a handler's timeout has passed.
   *
   * @param message What timed out.
   * @param options `cause`: the last attempt's error, when the limit was foreseen after it.
   */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "HandlerTimeoutError";
  }
}

/** The handler's `retries` limit was reached. */
export class HandlerRetriesError extends PermanentError {
  /**
   * Creates the error the framework reports when a handler has used up its retries.
   *
   * @param message What ran out of retries.
   * @param options `cause`: the last attempt's error, when the limit was foreseen after it.
   */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "HandlerRetriesError";
  }
}

/**
 * A handler returned a value that cannot be stored in `status.<handler id>`: not representable
 * as JSON (a BigInt, a circular reference, a Map, NaN, …). A permanent failure: the handler is
 * recorded as failed and not retried, as if it had thrown a {@link PermanentError}.
 */
export class HandlerResultError extends PermanentError {
  /**
   * Creates the error the framework reports for a result that cannot be stored.
   *
   * @param message Which handler, and what in its result.
   */
  constructor(message: string) {
    super(message);
    this.name = "HandlerResultError";
  }
}

/** Internal: a parent handler's sub-handlers are unfinished; re-run the parent soon, quietly. */
export class HandlerChildrenRetry extends TemporaryError {
  /**
   * Creates the internal retry signal of a parent handler.
   *
   * @param delay Seconds until the next attempt.
   */
  constructor(delay: number | null) {
    super("Sub-handlers are not finished yet", { delay });
    this.name = "HandlerChildrenRetry";
  }
}

/** How arbitrary (non-Kopf) errors of a handler are treated. */
export const ErrorsMode = {
  /** Log and consider the handler done (as succeeded without a result). */
  IGNORED: "ignored",
  /** Retry after `backoff` seconds. The default for most handlers. */
  TEMPORARY: "temporary",
  /** Fail the handler for this change, no retries. */
  PERMANENT: "permanent",
} as const;

/** One of the {@link ErrorsMode} values. */
export type ErrorsMode = typeof ErrorsMode[keyof typeof ErrorsMode];

/** The default delay (seconds) before retrying arbitrary errors (`settings.execution.defaultBackoff`). */
export const DEFAULT_BACKOFF = 60;

/** The limits and error policy of a handler. */
export interface ExecutionPolicy {
  /** Handler id, for messages. */
  readonly id: string;
  /** Treatment of arbitrary errors. @default "temporary" */
  readonly errors?: ErrorsMode | undefined;
  /** Seconds since the first attempt after which the handler fails permanently. */
  readonly timeout?: number | undefined;
  /** Maximum number of attempts. */
  readonly retries?: number | undefined;
  /** Seconds to wait before retrying arbitrary errors. @default 60 */
  readonly backoff?: number | undefined;
}

/**
 * The policy with the operator-wide backoff for arbitrary errors filled in, as Kopf 1.45's
 * `settings.execution.default_backoff`: a handler's own `backoff` still wins, and
 * `TemporaryError`'s delay is unaffected.
 *
 * @param policy The handler's policy.
 * @param defaultBackoff `settings.execution.defaultBackoff` (undefined: {@link DEFAULT_BACKOFF}).
 * @returns The same policy when it has a backoff, else a copy with the default one.
 */
export function withDefaultBackoff(
  policy: ExecutionPolicy,
  defaultBackoff: number | undefined,
): ExecutionPolicy {
  if (policy.backoff !== undefined || defaultBackoff === undefined) return policy;
  const { id, errors, timeout, retries } = policy;
  return { id, errors, timeout, retries, backoff: defaultBackoff };
}

/** Per-handler history needed to enforce the limits. */
export interface AttemptState {
  /** When the first attempt started. */
  readonly started: Date;
  /** How many attempts were made before this one. */
  readonly retries: number;
}

/** What one attempt came to. */
export type Outcome =
  | { readonly kind: "success"; readonly result: unknown }
  | { readonly kind: "ignored"; readonly error: Error }
  | { readonly kind: "temporary"; readonly error: Error; readonly delay: number | null }
  | { readonly kind: "permanent"; readonly error: Error };

/** Whether an outcome finishes the handler for this change (no more attempts). */
export function isFinal(outcome: Outcome): boolean {
  return outcome.kind !== "temporary";
}

/**
 * Checks the limits, runs one attempt, and classifies the result.
 *
 * @param policy The handler's limits and error mode.
 * @param state When it started and how many attempts were made.
 * @param attempt Runs the handler; receives a signal aborted when the timeout passes.
 * @param now The current time (injectable for tests).
 * @param parent A signal the attempt's signal also follows (e.g. the operator's shutdown):
 *   without a timeout, the attempt gets this very signal — no combined signal is built.
 * @returns The outcome; never throws for handler errors.
 */
export async function execute(
  policy: ExecutionPolicy,
  state: AttemptState,
  attempt: (signal: AbortSignal) => unknown,
  now: Date = new Date(),
  parent?: AbortSignal,
): Promise<Outcome> {
  const elapsed = (now.getTime() - state.started.getTime()) / 1000;
  if (policy.timeout !== undefined && elapsed > policy.timeout) {
    return {
      kind: "permanent",
      error: new HandlerTimeoutError(
        `Handler '${policy.id}' has timed out after ${pythonDuration(elapsed)}.`,
      ),
    };
  }
  if (policy.retries !== undefined && state.retries >= policy.retries) {
    return {
      kind: "permanent",
      error: new HandlerRetriesError(
        `Handler '${policy.id}' has exceeded ${state.retries} retries.`,
      ),
    };
  }
  // Only a timeout aborts the attempt's own controller; without one, none is needed.
  const controller = policy.timeout !== undefined || parent === undefined
    ? new AbortController()
    : undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (policy.timeout !== undefined) {
    const left = Math.max(0, policy.timeout - elapsed) * 1000;
    timer = setTimeout(
      () => controller!.abort(new HandlerTimeoutError(`Handler '${policy.id}' has timed out`)),
      left,
    );
  }
  const signal = controller === undefined
    ? parent!
    : parent === undefined
    ? controller.signal
    : AbortSignal.any([controller.signal, parent]);
  try {
    const result = await attempt(signal);
    // A handler that ignored its aborted signal and finished late has still timed out.
    if (controller?.signal.aborted && controller.signal.reason instanceof HandlerTimeoutError) {
      return { kind: "permanent", error: controller.signal.reason };
    }
    return { kind: "success", result };
  } catch (thrown) {
    const error = thrown instanceof Error ? thrown : new Error(String(thrown));
    const reason = controller?.signal.aborted ? controller.signal.reason as Error : error;
    return lookAhead(policy, state, elapsed, classify(policy, reason));
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Kopf's look-ahead of the limits: a failed attempt after which the next one would exceed the
 * retries or the timeout ends the handler now, instead of after another backoff.
 */
function lookAhead(
  policy: ExecutionPolicy,
  state: AttemptState,
  elapsed: number,
  outcome: Outcome,
): Outcome {
  if (outcome.kind !== "temporary" || outcome.error instanceof HandlerChildrenRetry) return outcome;
  const { error } = outcome;
  const timeout = policy.timeout !== undefined &&
    elapsed + (outcome.delay ?? 0) >= policy.timeout;
  const retries = policy.retries !== undefined && state.retries + 1 >= policy.retries;
  if (!timeout && !retries) return outcome;
  const what = error.message || `${error.name}()`;
  const ours = error instanceof TemporaryError;
  const id = `Handler '${policy.id}'`;
  const message = ours
    ? timeout
      ? `${id} failed temporarily but will time out after ${policy.timeout} seconds: ${what}`
      : `${id} failed temporarily but will exceed ${policy.retries} retries: ${what}`
    : timeout
    ? `${id} failed with an exception and will stop now ` +
      `(it would time out in ${policy.timeout} seconds on the next attempt): ${what}`
    : `${id} failed with an exception and will stop now ` +
      `(it would exceed ${policy.retries} retries on the next attempt): ${what}`;
  const ErrorClass = timeout ? HandlerTimeoutError : HandlerRetriesError;
  return { kind: "permanent", error: new ErrorClass(message, { cause: error }) };
}

function classify(policy: ExecutionPolicy, error: Error): Outcome {
  if (error instanceof PermanentError) return { kind: "permanent", error };
  if (error instanceof TemporaryError) return { kind: "temporary", error, delay: error.delay };
  switch (policy.errors ?? ErrorsMode.TEMPORARY) {
    case ErrorsMode.IGNORED:
      return { kind: "ignored", error };
    case ErrorsMode.PERMANENT:
      return { kind: "permanent", error };
    case ErrorsMode.TEMPORARY:
      return { kind: "temporary", error, delay: policy.backoff ?? DEFAULT_BACKOFF };
  }
}

/** A duration as Python prints a timedelta (`0:01:05.250000`), for Kopf's wording. */
function pythonDuration(seconds: number): string {
  const micros = Math.round(seconds * 1e6);
  const s = Math.floor(micros / 1e6);
  const fraction = micros % 1e6;
  const hh = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return `${hh}:${mm}:${ss}` + (fraction ? `.${String(fraction).padStart(6, "0")}` : "");
}
