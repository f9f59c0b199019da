/**
 * Phase "patching" (step 10): the cycle's one patch applied — one request, plus one for
 * `/status` when it is a subresource (see docs/persistence.md#what-is-written-and-when). A 404
 * means the object is gone; a 409/422 of a finalizer-guarded JSON patch means someone else
 * changed the object, and their change arrives as the next event.
 *
 * A write the API server refuses (403) is kept in the object's memory and tried again first,
 * before anything else happens to the object.
 * @module
 */

import {
  type Application,
  applyPatch,
  rebasePatch,
  WriteRefusedError,
} from "../../../actions/application.ts";
import { extraEssenceFields } from "../../../intents/registries.ts";
import { deepEqual } from "../../../structs/dicts.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import type { Patch } from "../../../structs/patches.ts";
import type { CycleEnd, CycleResult, CycleState, ObjectEvent, ObjectMemory } from "./state.ts";
import type { ResourceScope } from "../../scope/scope.ts";

/** The operator's parts the phase uses. */
export type PatchingDeps = Pick<
  ResourceScope,
  "api" | "resource" | "signal" | "logger" | "settings" | "changing" | "spawning"
>;

/**
 * Writes the cycle's patch, if anything is in it.
 *
 * What it returns is the body the object's next cycle starts from. A daemon or timer may exit
 * at any point of the cycle that stopped it, even while this write is in flight: its wake-up
 * (`ObjectMemory.wake`) is folded into the object's worker and re-processes the body the cycle
 * ends with — the stored object after this write (or the event's body when nothing was
 * written), or a newer event's if one arrived meanwhile — never a body from before the write,
 * however many await ticks the cycle takes (see `ObjectQueue.wake` in `../queueing.ts`).
 * @param deps The API, the resource and what tells whether the written object needs a look.
 * @param cycle The cycle.
 * @param end When the next cycle is due.
 * @returns What the cycle came to: the stored object, the delay, whether a handler failed.
 */
export async function finishCycle(
  deps: PatchingDeps,
  cycle: CycleState,
  end: CycleEnd,
): Promise<CycleResult> {
  const { body, patch, memory, essence } = cycle;
  const { delay } = end;
  const done = (result: CycleResult): CycleResult =>
    cycle.failed ? { ...result, failed: true } : result;
  if (patch.isEmpty) return done({ delay });
  const logger = deps.logger.forObject(body, { local: true });
  let applied: Application;
  try {
    applied = await applyPatch(deps.api, deps.resource, body, patch, {
      signal: deps.signal,
      logger: deps.logger.forObject(body),
      requestLogger: logger,
    });
  } catch (error) {
    if (!(error instanceof WriteRefusedError)) throw error;
    return done(refusedWrite(deps, memory, body, error));
  }
  switch (applied.state) {
    case "applied":
      return done(
        settledAfter(deps, body, applied.body, delay, essence)
          ? { body: applied.body, delay, settled: true }
          : { body: applied.body, delay },
      );
    case "gone":
      logger.debug("Patching failed because the object is gone; nothing to do.");
      return done({});
    case "conflict":
      // Someone else changed the object meanwhile; their change arrives as a new event.
      logger.debug(
        `Patching conflicted with another change (${applied.error.reason}); waiting for it.`,
      );
      return done({});
    case "unchanged":
      return done({ delay });
  }
}

/**
 * A write the API server refused (403): one line says which permission is missing; what is left
 * to write is kept in memory and tried again after the object's error delays
 * (`settings.queueing.errorDelays`), before anything else happens to the object — so when the
 * permission is granted, the work lands; nothing is taken as done meanwhile.
 */
function refusedWrite(
  deps: Pick<ResourceScope, "settings" | "logger">,
  memory: ObjectMemory,
  body: KubeObject,
  error: WriteRefusedError,
): CycleResult {
  const tries = memory.unwritten?.tries ?? 0;
  const delays = deps.settings.queueing.errorDelays;
  const delay = delays.length ? delays[Math.min(tries, delays.length - 1)]! : 1;
  const repeated = memory.unwritten?.message === error.message;
  memory.unwritten = { patch: error.remainder, tries: tries + 1, message: error.message };
  const logger = deps.logger.forObject(body);
  const line = `${error.message}. The object stays due: retrying in ${delay}s.`;
  // The first refusal (and a different one) is an error; the same again only at debug level.
  if (repeated) logger.debug(line);
  else logger.error(line);
  return { body: error.written, delay, failed: true };
}

/**
 * Tries again the write that was refused in an earlier cycle, against the latest body; a
 * deletion drops it (there is nothing left to write to).
 *
 * Not `async` itself: without a kept write the cycle goes on with no extra tick.
 * @param deps The API, the resource, the settings (error delays) and the logger.
 * @param memory What is remembered about the object, with the refused write if any.
 * @param event The event being processed.
 * @returns The cycle's result: still refused (wait), or written (look again at the stored
 *   object); undefined when no refused write is kept, and the cycle goes on.
 */
export function retryRefusedWrite(
  deps: Pick<ResourceScope, "api" | "resource" | "signal" | "logger" | "settings">,
  memory: ObjectMemory,
  event: ObjectEvent,
): Promise<CycleResult> | undefined {
  const kept = memory.unwritten;
  if (!kept) return undefined;
  if (event.type === "DELETED") {
    memory.unwritten = undefined;
    return undefined;
  }
  return writeKept(deps, memory, event.body, kept.patch);
}

async function writeKept(
  deps: Pick<ResourceScope, "api" | "resource" | "signal" | "logger" | "settings">,
  memory: ObjectMemory,
  body: KubeObject,
  kept: Patch,
): Promise<CycleResult> {
  let applied: Application;
  try {
    applied = await applyPatch(deps.api, deps.resource, body, rebasePatch(kept, body), {
      signal: deps.signal,
      logger: deps.logger.forObject(body),
      requestLogger: deps.logger.forObject(body, { local: true }),
    });
  } catch (error) {
    if (!(error instanceof WriteRefusedError)) throw error;
    return refusedWrite(deps, memory, body, error);
  }
  memory.unwritten = undefined;
  if (applied.state === "gone") return {};
  deps.logger.forObject(body).info("The write refused earlier went through now.");
  // Look again at the stored object, as after any own write.
  return applied.state === "applied" ? { body: applied.body, delay: 0 } : { delay: 0 };
}

/**
 * Whether the object as stored after the cycle's own write needs no second look: nothing is
 * due, no daemon or timer watches the object, and it differs from the processed object only in
 * what cannot start a cause — its essence, finalizers and deletion mark are the same, so the
 * second look would detect nothing. Otherwise someone else changed the object between the
 * event and the write, and that change (whose own, older event will be skipped) must be seen.
 */
function settledAfter(
  deps: Pick<ResourceScope, "spawning" | "changing" | "settings">,
  before: KubeObject,
  after: KubeObject,
  delay: number | undefined,
  essence: Record<string, unknown>,
): boolean {
  if (delay !== undefined || deps.spawning.length > 0) return false;
  const was = before.metadata ?? {}, is = after.metadata ?? {};
  if (was.deletionTimestamp !== is.deletionTimestamp) return false;
  if (!deepEqual(was.finalizers ?? [], is.finalizers ?? [])) return false;
  const extraFields = extraEssenceFields(deps.changing);
  const storage = deps.settings.persistence.diffbaseStorage;
  return storage.quickSameEssence(before, after, extraFields) ||
    deepEqual(storage.build({ body: after, extraFields }), essence);
}
