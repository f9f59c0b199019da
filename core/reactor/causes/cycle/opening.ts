/**
 * Opening a cycle's state once the raw-event handlers ran: the object's essence (built once per
 * cycle, after those handlers saw the object) and its spawner of daemons and timers.
 * @module
 */

import { extraEssenceFields } from "../../../intents/registries.ts";
import type { Patch } from "../../../structs/patches.ts";
import { type SpawnerDeps, spawnerOf } from "./spawning.ts";
import type { ResourceScope } from "../../scope/scope.ts";
import type { CycleState, ObjectEvent, ObjectMemory } from "./state.ts";

/** The operator's parts the cycle's state is made from. */
export type OpeningDeps = SpawnerDeps & Pick<ResourceScope, "changing">;

/**
 * Makes the state of a cycle.
 * @param deps The handlers, settings and what a spawner needs.
 * @param memory What is remembered about the object.
 * @param event The event being processed.
 * @param patch The cycle's patch (the raw-event handlers may have written into it already).
 * @returns The cycle's state, no cause detected and no handler chosen yet.
 */
export function openCycle(
  deps: OpeningDeps,
  memory: ObjectMemory,
  event: ObjectEvent,
  patch: Patch,
): CycleState {
  const { body } = event;
  const extraFields = extraEssenceFields(deps.changing);
  const essence = deps.settings.persistence.diffbaseStorage.build({ body, extraFields });
  const spawner = spawnerOf(deps, memory, body);
  return {
    memory,
    event,
    body,
    deleted: event.type === "DELETED",
    patch,
    logger: deps.logger.forObject(body),
    essence,
    spawner,
    failed: false,
  };
}
