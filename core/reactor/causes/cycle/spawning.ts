/**
 * Phase "spawning" (step 5): the object's daemons and timers are started for the matching
 * handlers and stopped for the others — only once the finalizer protects them (step 4), and
 * also while deletion is requested. See docs/daemons.md.
 * @module
 */

import { Spawner } from "../../../engines/runners/daemons.ts";
import { isDeletionRequested } from "../../../intents/causes.ts";
import type { ResourceContext } from "../../../intents/contexts.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { Patch } from "../../../structs/patches.ts";
import { type ContextScope, handlerContext } from "../../scope/context.ts";
import type { ResourceScope } from "../../scope/scope.ts";
import type { CycleState, ObjectMemory } from "./state.ts";

/** The operator's parts a spawner is made of. */
export type SpawnerDeps =
  & ContextScope
  & Pick<ResourceScope, "spawning" | "api" | "pause" | "logger" | "observer">;

/**
 * The object's spawner of daemons and timers, made on first need and kept in its memory.
 * @param deps The daemons and timers and what they need.
 * @param memory What is remembered about the object.
 * @param body The object.
 * @returns The spawner; undefined if the resource has no daemons or timers.
 */
export function spawnerOf(
  deps: SpawnerDeps,
  memory: ObjectMemory,
  body: KubeObject,
): Spawner | undefined {
  if (deps.spawning.length === 0) return undefined;
  const spawner: Spawner = memory.spawner ??= new Spawner({
    api: deps.api,
    resource: deps.resource,
    settings: deps.settings.background,
    execution: deps.settings.execution,
    paused: deps.pause,
    logger: deps.logger.forObject(body),
    context: (handler, signal): ResourceContext =>
      handlerContext(deps, {
        body: spawner.body,
        memo: memory.memo,
        patch: new Patch(),
        logger: deps.logger.forObject(body),
        param: handler.param,
        signal,
      }),
    wake: () => memory.wake(),
    signal: deps.signal,
    observer: deps.observer,
  });
  return spawner;
}

/**
 * Spawns and stops the object's daemons and timers to match the object; timers learn whether
 * the essence changed since the previous cycle (for `idle`). Never ends the cycle.
 * @param deps The daemons and timers.
 * @param cycle The object, its essence and spawner.
 * @returns Nothing: the cycle goes on.
 */
export function adjustSpawned(
  deps: Pick<ResourceScope, "spawning">,
  cycle: CycleState,
): undefined {
  const { spawner, memory, body } = cycle;
  if (!spawner) return;
  const text = JSON.stringify(cycle.essence);
  const changed = memory.lastEssence !== undefined && memory.lastEssence !== text;
  memory.lastEssence = text;
  spawner.adjust(deps.spawning, body, { deleted: isDeletionRequested(body), changed });
}
