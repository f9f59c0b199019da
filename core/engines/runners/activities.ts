/**
 * Operator-level activities: running all handlers of one activity (startup, cleanup, login,
 * probe) with their retries, timeouts and errors, and collecting their results by handler id.
 *
 * Unlike resource handlers, activity retries wait in the activity itself (there is no object to
 * persist progress on): an arbitrary error waits `backoff`, a TemporaryError its `delay`.
 * A permanent failure of any handler ends the activity with an {@link ActivityError}.
 * @module
 */

import type { KubeClient } from "../../client/client.ts";
import { execute, isFinal, type Outcome, withDefaultBackoff } from "../../actions/execution.ts";
import type { Logger } from "../../actions/loggers.ts";
import { reportOutcome, storableOutcome } from "../../actions/outcomes.ts";
import type { ActivityContext, IndexView, Memo } from "../../intents/contexts.ts";
import type { Activity, ActivityHandler } from "../../intents/handlers.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { sleep } from "../../util/backoff.ts";

/** One or more handlers of an activity failed permanently. */
export class ActivityError extends Error {
  /** The failed handlers' errors, by handler id. */
  readonly outcomes: ReadonlyMap<string, Error>;

  /**
   * Creates the error from the failed handlers' outcomes; the message lists each of them.
   *
   * @param activity Which activity failed.
   * @param outcomes The failed handlers' errors, by id.
   */
  constructor(activity: Activity, outcomes: ReadonlyMap<string, Error>) {
    const list = [...outcomes].map(([id, e]) => `'${id}': ${e.message || e.name}`).join("; ");
    super(`The ${activity} activity failed: ${list}`);
    this.name = "ActivityError";
    this.outcomes = outcomes;
  }
}

/** What running an activity needs. */
export interface ActivityDeps {
  /** The activity's handlers. */
  readonly handlers: readonly ActivityHandler[];
  /** Which activity. */
  readonly activity: Activity;
  /** Operator memo. */
  readonly memo: Memo;
  /** Settings. */
  readonly settings: OperatorSettings;
  /** The operator logger. */
  readonly logger: Logger;
  /** Stops waiting and retrying. */
  readonly signal: AbortSignal;
  /** The operator's indices, if it has any yet. */
  readonly indices?: Readonly<Record<string, IndexView>> | undefined;
  /** The operator's client, once it has connected (probe handlers get it). */
  readonly client?: KubeClient | undefined;
}

/**
 * Runs every handler of an activity until each has succeeded (or failed permanently).
 * @param deps Handlers, memo, settings, logger, signal.
 * @returns Results by handler id (successful handlers only).
 * @throws {ActivityError} when a handler fails permanently.
 */
export async function runActivity(deps: ActivityDeps): Promise<Map<string, unknown>> {
  const results = new Map<string, unknown>();
  const failures = new Map<string, Error>();
  const logger = deps.logger.child(["kopf", "activities", deps.activity]);
  await Promise.all(deps.handlers.map(async (handler) => {
    const started = new Date();
    for (let retries = 0; !deps.signal.aborted; retries++) {
      const policy = withDefaultBackoff(handler, deps.settings.execution?.defaultBackoff);
      const attempt: Outcome = await execute(policy, { started, retries }, (signal) => {
        const context: ActivityContext = {
          logger,
          memo: deps.memo,
          settings: deps.settings,
          param: handler.param,
          retry: retries,
          started,
          runtime: (Date.now() - started.getTime()) / 1000,
          signal: AbortSignal.any([signal, deps.signal]),
          activity: deps.activity,
          indices: deps.indices ?? {},
          client: deps.client,
          ...deps.indices,
        };
        return (handler.fn as (c: ActivityContext) => unknown)(context);
      });
      // A probe's result is served as JSON: one that JSON cannot carry fails the probe, named.
      const outcome = deps.activity === "probe"
        ? storableOutcome(handler.id, attempt, "served as JSON by the liveness endpoint")
        : attempt;
      if (deps.activity !== "probe" || outcome.kind !== "success") {
        reportOutcome(logger, handler.id, outcome);
      }
      if (outcome.kind === "success") results.set(handler.id, outcome.result);
      if (outcome.kind === "permanent") failures.set(handler.id, outcome.error);
      if (isFinal(outcome) || deps.activity === "probe") return; // probes answer now, never wait

      if (outcome.kind === "temporary") {
        await sleep((outcome.delay ?? 0) * 1000, deps.signal).catch(() => {});
      }
    }
  }));
  if (failures.size) throw new ActivityError(deps.activity, failures);
  return results;
}
