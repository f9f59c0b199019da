/**
 * Phase "causation" (steps 6–7): what happened to the object since it was last handled — the
 * cause (`create`, `update`, `delete`, `resume`, `noop`, `free`, `gone`), detected from the
 * object's essence, its diff-base and the operator's memory of it (see
 * docs/persistence.md#change-detection). Objects no changing handler's filters match get no
 * state at all ("stealth"); `noop`, `free` and `gone` end the cycle.
 * @module
 */

import { detectChangingCause, isDeletionRequested } from "../../../intents/causes.ts";
import type { ChangingCause } from "../../../intents/causes.ts";
import type { ResourceContext } from "../../../intents/contexts.ts";
import type { ChangingHandler } from "../../../intents/handlers.ts";
import {
  changingFilterContext,
  type ChangingFilterExtras,
  matchesBodyFilters,
} from "../../../intents/registries.ts";
import { type ContextScope, handlerContext } from "../../scope/context.ts";
import type { ResourceScope } from "../../scope/scope.ts";
import type { CycleEnd, CycleState } from "./state.ts";

/** The operator's parts the phase uses. */
export type CausationDeps = ContextScope & Pick<ResourceScope, "changing">;

/**
 * The cycle's cause, detected once, when first needed: by a filter callback (filters see the
 * cause, as in Kopf, also when the finalizer is decided), else after the finalizer step.
 * @param deps The settings (finalizer name, diff-base storage).
 * @param cycle The object, its essence and memory; the cause is kept in it.
 * @returns The cause.
 */
export function causeOf(deps: Pick<ResourceScope, "settings">, cycle: CycleState): ChangingCause {
  const settings = deps.settings.persistence;
  const { body } = cycle;
  return cycle.cause ??= detectChangingCause({
    body,
    deleted: cycle.deleted,
    finalizer: settings.finalizer,
    old: (settings.diffbaseStorage.fetch({ body }) ?? undefined) as
      | Record<string, unknown>
      | undefined,
    new: cycle.essence,
    initial: !cycle.memory.handledOnce,
  });
}

/**
 * What a changing handler's filter callbacks see: the resource context plus the cause.
 * @param deps What the context shows.
 * @param cycle The cycle.
 * @param handler The handler being filtered.
 * @returns The filter context.
 */
export function filterContextOf(
  deps: ContextScope,
  cycle: CycleState,
  handler: ChangingHandler,
): ResourceContext & ChangingFilterExtras {
  return changingFilterContext(
    handlerContext(deps, {
      body: cycle.body,
      memo: cycle.memory.memo,
      patch: cycle.patch,
      logger: cycle.logger,
      param: handler.param,
    }),
    causeOf(deps, cycle),
    handler,
  );
}

/**
 * Detects the cause; ends the cycle when there is nothing to handle.
 * @param deps The changing handlers and what their filters see.
 * @param cycle The cycle; its cause is set.
 * @returns The end of the cycle (stealth, `noop`, `free`, `gone`), or undefined to go on.
 */
export function detectCause(deps: CausationDeps, cycle: CycleState): CycleEnd | undefined {
  const { body, logger } = cycle;
  // Stealth: objects that no changing handler's filters match get no state at all (no
  // diff-base, no progress, no logs); when they start matching, they are created (FLT-17).
  if (
    !isDeletionRequested(body) &&
    !deps.changing.some((h) => matchesBodyFilters(h, body, () => filterContextOf(deps, cycle, h)))
  ) {
    return { delay: undefined };
  }
  const cause = causeOf(deps, cycle);
  // Old Kopf's debug line for a newly created object; the body is serialised only when shown.
  if (cause.reason === "create" && logger.isEnabledFor("debug")) {
    logger.debug(`First appearance: ${JSON.stringify(body)}`);
  }
  if (cause.reason === "noop" || cause.reason === "free" || cause.reason === "gone") {
    cycle.memory.handledOnce = true;
    return { delay: undefined };
  }
  return undefined;
}
