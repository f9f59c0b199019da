/**
 * One processing cycle of one object: raw-event handlers, finalizer management, cause
 * detection, the due resource-changing handlers, progress and diff-base bookkeeping — all
 * collected into one patch, applied once at the end.
 *
 * The cycle returns the object as stored after its own write and the time until the next
 * cycle is due (a retry or the next handler), so the per-object worker can continue at once
 * from its own write instead of waiting for the watch to echo it back, and can sleep in memory
 * instead of "touching" the object to wake itself up.
 *
 * The cycle is a list of phases, one small module each in `./cycle/` (see
 * docs/architecture.md, "One cycle"): every phase is a function of the parts of the stream's
 * scope it uses and of the one cycle state; a phase that ends the cycle returns when the next one is due.
 * @module
 */

import { Patch } from "../../structs/patches.ts";
import { detectCause } from "./cycle/causation.ts";
import { executeHandlers } from "./cycle/execution.ts";
import { endUnhandled, toggleFinalizer } from "./cycle/finalizers.ts";
import { openCycle } from "./cycle/opening.ts";
import { applyOutcomes } from "./cycle/outcomes.ts";
import { finishCycle, retryRefusedWrite } from "./cycle/patching.ts";
import { selectHandlers } from "./cycle/selection.ts";
import { adjustSpawned } from "./cycle/spawning.ts";
import type { CycleResult, ObjectEvent, ObjectMemory } from "./cycle/state.ts";
import { runWatchingHandlers } from "./cycle/watching.ts";
import type { ResourceScope } from "../scope/scope.ts";

export type { CycleResult, ObjectEvent, ObjectMemory } from "./cycle/state.ts";

/**
 * Processes one event of one object.
 * @param deps The stream's scope: the operator's parts, the resource and its handlers.
 * @param memory What is remembered about the object.
 * @param event The event (the latest of a coalesced burst).
 * @returns The stored object after our write and the delay until the next due cycle.
 */
export async function processEvent(
  deps: ResourceScope,
  memory: ObjectMemory,
  event: ObjectEvent,
): Promise<CycleResult> {
  // 1. No resource handler runs before every index is complete (indexing itself is done
  // earlier, on the stream, so that this gate can open).
  await deps.readiness?.wait(deps.signal);
  if (deps.signal.aborted) return {};
  // A write the API server refused earlier goes first, before anything else happens.
  const retried = retryRefusedWrite(deps, memory, event);
  if (retried) return await retried;
  // 2. Raw-event handlers, for watch events only (not for the operator's own re-looks).
  const patch = new Patch();
  if (!event.internal) await runWatchingHandlers(deps, { memory, event, patch });
  const cycle = openCycle(deps, memory, event, patch);
  // 3.–7. Each of these phases may end the cycle; its patch is written all the same.
  const end = endUnhandled(deps, cycle) ?? // gone, or no changing handlers, daemons, timers
    toggleFinalizer(deps, cycle) ?? // a cycle of its own
    adjustSpawned(deps, cycle) ?? // daemons and timers
    detectCause(deps, cycle) ?? // stealth, noop, free, gone
    selectHandlers(deps, cycle); // no handler matches: the cause is complete
  if (end) return await finishCycle(deps, cycle, end);
  // 8.–10. Run the chosen handlers, apply their outcomes, write the one patch.
  await executeHandlers(deps, cycle);
  return await finishCycle(deps, cycle, applyOutcomes(deps, cycle));
}
