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

import { SilentLogger } from "../../actions/loggers.ts";
import { isDeletionRequested } from "../../intents/causes.ts";
import { matchesBodyFilters, usesCallbacks } from "../../intents/registries.ts";
import type { KubeObject } from "../../structs/objects.ts";
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

/** The logger of {@link needsNoCycle}'s scratch cycles: they log nothing. */
const SILENT = new SilentLogger();

/**
 * An object the stream's queue does not know (no worker, no memory) whose cycle would do
 * nothing — no handler due, nothing to write — needs no worker at all: so it is on every
 * restart for each object handled before and unchanged since (in Kopf, a cycle each, a resume
 * that runs nothing), and so is the watch's echo of the operator's own write once the object's
 * worker has idled out (after a backlog, thousands of them: the watch that follows a held
 * listing replays every write made meanwhile). This tells it by running the cycle's own
 * synchronous phases (3–7, up to the choice of handlers) on a scratch memory, silently; whatever
 * they would write or run sends the object to the queue as usual, where its cycle runs from the
 * start. The object's memory is not kept — as the queue forgets the memory of an idle object
 * that holds nothing.
 *
 * A cycle does not depend on the event's type but for a deletion (which always goes to the
 * queue), so one answer serves a listed object and a watch event alike. Only for streams whose
 * cycles depend on nothing but the object: none when the resource has raw-event handlers (they
 * see every event), resume handlers (every object first seen is resumed), daemons or timers
 * (spawned for every object), or callback filters (user code, which would then run once more
 * for objects that go on to the queue).
 * @param deps The stream's scope.
 * @returns The predicate, or `undefined` when every object event must go to the queue.
 */
export function needsNoCycle(deps: ResourceScope): ((body: KubeObject) => boolean) | undefined {
  if (deps.watching.length || deps.spawning.length) return undefined;
  if (deps.changing.some((h) => h.reason === "resume" || usesCallbacks(h))) return undefined;
  const storage = deps.settings.persistence.diffbaseStorage;
  return (body) => {
    try {
      // A new object (no diff-base) that some handler's filters match has its creation handled,
      // or at least its diff-base stored: never quiet — told without building its essence (a
      // backlog's objects are all new).
      if (
        !storage.mayHold({ body }) && !isDeletionRequested(body) &&
        deps.changing.some((h) => matchesBodyFilters(h, body, () => undefined))
      ) return false;
      const memory: ObjectMemory = { memo: {}, handledOnce: false, wake: () => {} };
      const cycle = {
        ...openCycle(deps, memory, { type: null, body }, new Patch()),
        logger: SILENT,
      };
      const end = endUnhandled(deps, cycle) ?? toggleFinalizer(deps, cycle) ??
        adjustSpawned(deps, cycle) ?? detectCause(deps, cycle) ?? selectHandlers(deps, cycle);
      return end !== undefined && end.delay === undefined && cycle.patch.isEmpty;
    } catch {
      return false; // e.g. a stored state that is not JSON: the real cycle fails and retries it
    }
  };
}
