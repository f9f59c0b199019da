/**
 * Phases around the finalizer (steps 3–4): whether the object needs handling at all, and the
 * finalizer added or removed in a cycle of its own, before any handler runs (as in Kopf).
 * @module
 */

import { hasFinalizer, isDeletionRequested } from "../../../intents/causes.ts";
import { requiresFinalizer } from "../../../intents/registries.ts";
import { type CausationDeps, filterContextOf } from "./causation.ts";
import type { CycleEnd, CycleState } from "./state.ts";
import type { ResourceScope } from "../../scope/scope.ts";

/**
 * Step 3: the object is gone (its daemons and timers are told to stop), or nothing but
 * raw-event handlers serve its resource — then the cycle only writes what those produced. As in
 * Kopf, a finalizer left by another version of the operator is removed, or the object could
 * never be deleted (PST-54).
 * @param deps The handlers and the finalizer's name.
 * @param cycle The cycle.
 * @returns The end of the cycle, or undefined to go on.
 */
export function endUnhandled(
  deps: Pick<ResourceScope, "changing" | "spawning" | "settings">,
  cycle: CycleState,
): CycleEnd | undefined {
  const { body, deleted, spawner, patch, logger } = cycle;
  const finalizer = deps.settings.persistence.finalizer;
  if (deleted) spawner?.adjust(deps.spawning, body, { deleted: true, changed: false });
  if ((deps.changing.length === 0 && !spawner) || deleted) {
    if (!deleted && hasFinalizer(body, finalizer)) {
      logger.debug("Removing the finalizer, as there are no handlers requiring it.");
      patch.removeFinalizer(body, finalizer);
    }
    return { delay: undefined };
  }
  return undefined;
}

/**
 * Step 4 (only while no deletion is requested): the finalizer is added when a non-optional
 * delete handler, a daemon or a timer matches the object, and removed when none does. That
 * write is the whole cycle; the next one starts at once from the written object.
 * @param deps The handlers, what their filters see, and the finalizer's name.
 * @param cycle The cycle.
 * @returns The end of the cycle (due again at once), or undefined to go on.
 */
export function toggleFinalizer(
  deps: CausationDeps & Pick<ResourceScope, "spawning">,
  cycle: CycleState,
): CycleEnd | undefined {
  const { body, spawner, patch, logger } = cycle;
  const finalizer = deps.settings.persistence.finalizer;
  const needed = requiresFinalizer(deps.changing, body, (h) => filterContextOf(deps, cycle, h)) ||
    Boolean(spawner?.wants(deps.spawning, body));
  const present = hasFinalizer(body, finalizer);
  if (isDeletionRequested(body) || needed === present) return undefined;
  if (needed) {
    logger.debug("Adding the finalizer, thus preventing the actual deletion.");
    patch.addFinalizer(body, finalizer);
  } else {
    logger.debug("Removing the finalizer, as there are no handlers requiring it.");
    patch.removeFinalizer(body, finalizer);
  }
  return { delay: 0 };
}
