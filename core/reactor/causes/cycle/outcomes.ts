/**
 * Phase "outcome application" (step 9): when every handler of the cause is finished, their
 * progress records go, "Creation is processed: N succeeded; M failed." is logged, and the cause
 * is completed — the new essence stored as the diff-base or, for a deletion, the finalizer
 * removed (unless daemons or timers still exit; their exit wakes the object up again).
 * Otherwise the changed progress is stored and the next cycle is due when the earliest retry is.
 * @module
 */

import { hasFinalizer } from "../../../intents/causes.ts";
import { causeOf } from "./causation.ts";
import { type CycleEnd, type CycleState, VERBS } from "./state.ts";
import { nowOf, type ResourceScope } from "../../scope/scope.ts";

/**
 * After all handlers of a cause are done: remember the essence, or release the object.
 * @param deps The settings (finalizer name, diff-base storage).
 * @param cycle The cycle, its cause detected.
 */
export function completeCause(deps: Pick<ResourceScope, "settings">, cycle: CycleState): void {
  const { spawner, body, patch, logger, essence } = cycle;
  const cause = causeOf(deps, cycle);
  const settings = deps.settings.persistence;
  if (cause.reason === "delete") {
    // Daemons and timers hold the object until they exited (or were abandoned); their exit
    // wakes the object up again.
    if (spawner?.holding) return;
    if (hasFinalizer(body, settings.finalizer)) {
      logger.debug("Removing the finalizer, thus allowing the actual deletion.");
      patch.removeFinalizer(body, settings.finalizer);
    }
    return;
  }
  if (cause.old === undefined || cause.diff.length > 0) {
    settings.diffbaseStorage.store({ body, patch, essence, warn: (m) => logger.warning(m) });
  }
}

/**
 * Applies the handlers' outcomes to the object's state in the cycle's patch.
 * @param deps The changing handlers, the settings and the clock.
 * @param cycle The cycle, its handlers selected and run.
 * @returns The end of the cycle: due again at the earliest retry, or not at all.
 */
export function applyOutcomes(
  deps: Pick<ResourceScope, "changing" | "settings" | "now">,
  cycle: CycleState,
): CycleEnd {
  const { handling, body, patch, logger, spawner } = cycle;
  if (!handling) return { delay: undefined };
  const { reason, ids, progress: state, chosen } = handling;
  const storage = deps.settings.persistence.progressStorage;
  if (state.allFinished(ids)) {
    const { succeeded, failed } = state.counts(ids);
    if (chosen.length) {
      logger.info(`${VERBS[reason][0]} is processed: ${succeeded} succeeded; ${failed} failed.`);
    }
    if (reason === "delete" && spawner?.holding) {
      // Daemons still exiting hold the object: the finished records stay until they exited, so
      // that the cycle their exit wakes up releases the object without running the handlers
      // again (the records go with the object).
      state.store(storage, body, patch);
      return { delay: undefined };
    }
    // As Kopf: the records of every changing handler go, not only of those matching now — a
    // field handler whose filter its own patch made stop matching leaves no stale record that a
    // later change would report as a superseded cause.
    for (const h of deps.changing) state.purge(h.id);
    state.store(storage, body, patch);
    completeCause(deps, cycle);
    cycle.memory.handledOnce = true;
    return { delay: undefined };
  }
  state.store(storage, body, patch);
  return { delay: state.nextDelay(ids, nowOf(deps)) };
}
