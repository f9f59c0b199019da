/**
 * Phase "handler selection" (steps 7–8, first half): the changing handlers that match the
 * cause and the object (filters included), their progress loaded from the object, records of
 * a superseded cause purged, and the due ones (not finished, not delayed) chosen by the
 * lifecycle. A cause no handler matches is completed at once.
 * @module
 */

import { ProgressState } from "../../../actions/progression.ts";
import { matchChangingHandlers } from "../../../intents/registries.ts";
import type { Reason } from "../../../intents/handlers.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { type CausationDeps, causeOf, filterContextOf } from "./causation.ts";
import { completeCause } from "./outcomes.ts";
import { type CycleEnd, type CycleState, VERBS } from "./state.ts";
import { nowOf, type ResourceScope } from "../../scope/scope.ts";

/** The operator's parts the phase uses. */
export type SelectionDeps = CausationDeps & Pick<ResourceScope, "lifecycle" | "spawning" | "now">;

/**
 * Selects the handlers of the cycle's cause; sets `cycle.handling`.
 * @param deps The handlers, what their filters see, the lifecycle and the clock.
 * @param cycle The cycle, its cause detected.
 * @returns The end of the cycle when no handler matches (the cause is complete), else undefined.
 */
export function selectHandlers(deps: SelectionDeps, cycle: CycleState): CycleEnd | undefined {
  const { body, logger } = cycle;
  const settings = deps.settings.persistence;
  const cause = causeOf(deps, cycle);
  const reason = cause.reason;
  // Ended by the causation phase already.
  if (reason === "noop" || reason === "free" || reason === "gone") return { delay: undefined };
  const handlers = matchChangingHandlers(
    deps.changing,
    cause,
    body,
    (h) => filterContextOf(deps, cycle, h),
  );
  if (handlers.length === 0) {
    completeCause(deps, cycle);
    cycle.memory.handledOnce = true;
    return { delay: undefined };
  }

  const now = nowOf(deps);
  const ids = handlers.map((h) => h.id);
  // Records of every handler are read: those of another cause (e.g. a creation interrupted by
  // deletion) are superseded and purged in this cycle's patch.
  const progress = ProgressState.load(
    settings.progressStorage,
    body,
    deps.changing.map((h) => h.id),
    now,
  );
  const superseded = deps.changing.filter((h) => {
    const purpose = progress.get(h.id)?.purpose;
    return purpose !== undefined && purpose !== reason;
  });
  if (superseded.length) {
    const purpose = progress.get(superseded[0]!.id)?.purpose ?? "";
    const verb = VERBS[purpose as Reason]?.[0] ?? purpose;
    logger.info(`${verb} is superseded by ${reason}: ${superseded.map((h) => h.id).join(", ")}`);
    for (const h of superseded) progress.purge(h.id);
  }
  const due = handlers.filter((h) => !progress.isFinished(h.id) && !progress.isDelayed(h.id, now));
  if (due.length && !ids.some((id) => progress.get(id))) {
    logger.debug(`${VERBS[reason][0]} is in progress for ${describe(body)}`);
  }
  const chosen = deps.lifecycle(
    due.map((h) => ({ id: h.id, retries: progress.get(h.id)?.retries ?? 0, handler: h })),
  );
  cycle.handling = { cause, reason, ids, progress, chosen: chosen.map((c) => c.handler) };
  return undefined;
}

function describe(body: KubeObject): string {
  const meta = body.metadata ?? {};
  return meta.namespace ? `${meta.namespace}/${meta.name}` : `${meta.name}`;
}
