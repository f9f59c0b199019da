/**
 * Phase "execution" (step 8, second half): the chosen handlers run one after another, one
 * attempt each, with the operator's default backoff, observed (metrics, traces) and away from
 * the admission gate. Each outcome is recorded in the progress, logged, and its result
 * delivered into the cycle's patch (`status.<id>`).
 * @module
 */

import { execute, withDefaultBackoff } from "../../../actions/execution.ts";
import { withHandledObject } from "../../../actions/handled_object.ts";
import { deliverResult, reportOutcome, storableOutcome } from "../../../actions/outcomes.ts";
import { invokeChanging, type SubhandlerScope } from "../subhandling.ts";
import type { ContextScope } from "../../scope/context.ts";
import { nowOf, type ResourceScope } from "../../scope/scope.ts";
import { handlerInfo } from "./context.ts";
import type { CycleState } from "./state.ts";

/** The operator's parts the phase uses. */
export type ExecutionDeps =
  & ContextScope
  & Pick<ResourceScope, "lifecycle" | "observer" | "gate" | "now">;

/**
 * Runs the handlers chosen for the cycle (none when no handler was selected); marks the cycle
 * failed if one of them failed, temporarily or permanently.
 * @param deps What the handlers' contexts show, the lifecycle of sub-handlers, the observer,
 *   the gate and the clock.
 * @param cycle The cycle, its handlers selected.
 */
export async function executeHandlers(deps: ExecutionDeps, cycle: CycleState): Promise<void> {
  const { handling, memory, body, patch, logger } = cycle;
  if (!handling) return;
  const { cause, reason, progress: state, chosen } = handling;
  for (const handler of chosen) {
    if (deps.signal.aborted) break;
    const progress = state.begin(handler.id, reason, nowOf(deps));
    const subhandlers: SubhandlerScope = { state, lifecycle: deps.lifecycle, childIds: [] };
    // The attempt's signal follows the operator's (it is the operator's without a timeout).
    const attempt = () =>
      execute(
        withDefaultBackoff(handler, deps.settings.execution.defaultBackoff),
        progress,
        (signal) =>
          withHandledObject({ body }, () =>
            invokeChanging(handler, {
              scope: deps,
              parts: { body, memo: memory.memo, patch, logger, param: handler.param, signal },
              reason,
              cause,
              progress,
            }, subhandlers)),
        deps.now?.(),
        deps.signal,
      );
    const observed = () =>
      deps.observer
        ? deps.observer.handler(
          handlerInfo(deps, body, handler.id, "change", progress.retries, reason),
          attempt,
        )
        : attempt();
    // A result that cannot be stored fails its handler now, not the cycle's write later.
    const outcome = storableOutcome(
      handler.id,
      deps.gate ? await deps.gate.slow(observed) : await observed(),
    );
    if (
      (outcome.kind === "temporary" && outcome.error.name !== "HandlerChildrenRetry") ||
      outcome.kind === "permanent"
    ) cycle.failed = true;
    state.record(handler.id, outcome, nowOf(deps), subhandlers.childIds);
    reportOutcome(logger, handler.id, outcome);
    deliverResult(patch, handler.id, outcome);
  }
}
