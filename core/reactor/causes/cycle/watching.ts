/**
 * Phase "watching" (step 2): the raw-event handlers (`on.event`) run for every event from the
 * watch, deleted objects included. Their errors are logged and ignored; their results go into
 * the cycle's patch.
 * @module
 */

import type { Outcome } from "../../../actions/execution.ts";
import { withHandledObject } from "../../../actions/handled_object.ts";
import { deliverResult, storableOutcome } from "../../../actions/outcomes.ts";
import type { EventContext } from "../../../intents/contexts.ts";
import { matchesBodyFilters } from "../../../intents/registries.ts";
import { type ContextScope, handlerContext } from "../../scope/context.ts";
import type { ResourceScope } from "../../scope/scope.ts";
import { handlerInfo } from "./context.ts";
import type { CycleState } from "./state.ts";

/** The operator's parts the phase uses. */
export type WatchingDeps =
  & ContextScope
  & Pick<ResourceScope, "watching" | "logger" | "observer" | "gate">;

/**
 * Runs the raw-event handlers whose filters match the event's object, one after another.
 * @param deps The handlers and what their contexts show.
 * @param cycle The object's memory, the event and the cycle's patch (the rest of the cycle's
 *   state is made after this phase: the handlers see the object first).
 */
export async function runWatchingHandlers(
  deps: WatchingDeps,
  cycle: Pick<CycleState, "memory" | "event" | "patch">,
): Promise<void> {
  const { memory, event, patch } = cycle;
  if (deps.watching.length === 0) return;
  const logger = deps.logger.forObject(event.body, { local: true });
  for (const handler of deps.watching) {
    const context: EventContext = handlerContext(
      deps,
      { body: event.body, memo: memory.memo, patch, logger, param: handler.param },
      {},
      { event: { type: event.type, object: event.body }, type: event.type },
    );
    if (!matchesBodyFilters(handler, event.body, () => context)) continue;
    const run = async (): Promise<Outcome> => {
      try {
        const result = await withHandledObject(
          { body: event.body },
          () => (handler.fn as (c: EventContext) => unknown)(context),
        );
        return { kind: "success", result };
      } catch (error) {
        return {
          kind: "ignored",
          error: error instanceof Error ? error : new Error(String(error)),
        };
      }
    };
    const observed = () =>
      deps.observer
        ? deps.observer.handler(handlerInfo(deps, event.body, handler.id, "event", 0), run)
        : run();
    const outcome = storableOutcome(
      handler.id,
      deps.gate ? await deps.gate.slow(observed) : await observed(),
    );
    if (outcome.kind === "success") deliverResult(patch, handler.id, outcome);
    else if (outcome.kind === "permanent") logger.error(outcome.error.message);
    else if (outcome.kind === "ignored") {
      logger.exception(
        `Handler '${handler.id}' failed with an exception and will ignore it: ${
          outcome.error.message || `${outcome.error.name}()`
        }`,
        outcome.error,
      );
    }
  }
}
