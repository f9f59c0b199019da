/**
 * One processing cycle of one object: raw-event handlers, finalizer management, cause
 * detection, the due resource-changing handlers, progress and diff-base bookkeeping — all
 * collected into one patch, applied once at the end.
 *
 * The cycle returns the object as stored after its own write and the time until the next
 * cycle is due (a retry or the next handler), so the per-object worker can continue at once
 * from its own write instead of waiting for the watch to echo it back, and can sleep in memory
 * instead of "touching" the object to wake itself up.
 * @module
 */

import {
  type Application,
  applyPatch,
  rebasePatch,
  WriteRefusedError,
} from "../actions/application.ts";
import { execute, type Outcome, withDefaultBackoff } from "../actions/execution.ts";
import { withHandledObject } from "../actions/handled_object.ts";
import { deliverResult, reportOutcome, storableOutcome } from "../actions/outcomes.ts";
import type { Lifecycle } from "../actions/lifecycles.ts";
import type { Logger } from "../actions/loggers.ts";
import { ProgressState } from "../actions/progression.ts";
import type { KubeApi } from "../client/api.ts";
import type { KubeClient } from "../client/client.ts";
import { detectChangingCause, hasFinalizer, isDeletionRequested } from "../intents/causes.ts";
import type { ChangingCause } from "../intents/causes.ts";
import type { EventContext, IndexView, Memo, ResourceContext } from "../intents/contexts.ts";
import type {
  ChangingHandler,
  Reason,
  SpawningHandler,
  WatchingHandler,
} from "../intents/handlers.ts";
import {
  changingFilterContext,
  extraEssenceFields,
  matchChangingHandlers,
  matchesBodyFilters,
  requiresFinalizer,
} from "../intents/registries.ts";
import type { OperatorSettings } from "../settings/settings.ts";
import { deepEqual } from "../structs/dicts.ts";
import { type KubeObject, objectFields } from "../structs/objects.ts";
import { Patch } from "../structs/patches.ts";
import type { Resource } from "../structs/resources.ts";
import { invokeChanging, type SubhandlerScope } from "./subhandling.ts";
import { Spawner } from "../engines/daemons.ts";
import type { HandlerInfo, OperatorObserver } from "../engines/observers.ts";
import { resourceName } from "../structs/resources.ts";
import type { AdmissionGate } from "../util/gate.ts";

/** What the cycle needs from the operator. */
export interface ProcessingDeps {
  /** Object operations. */
  readonly api: KubeApi;
  /** The operator's client, given to handlers as `client`. */
  readonly client: KubeClient;
  /** The resource being processed. */
  readonly resource: Resource;
  /** Its resource-changing handlers. */
  readonly changing: readonly ChangingHandler[];
  /** Its raw-event handlers. */
  readonly watching: readonly WatchingHandler[];
  /** Its daemons and timers. */
  readonly spawning: readonly SpawningHandler[];
  /** The operator's indices by name. */
  readonly indices?: Readonly<Record<string, IndexView>> | undefined;
  /** Opens when all indexed resources were listed and indexed; handlers wait for it. */
  readonly readiness?: { wait(signal: AbortSignal): Promise<void> } | undefined;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** The operator's logger (object loggers derive from it). */
  readonly logger: Logger;
  /** Which handlers run in a cycle. */
  readonly lifecycle: Lifecycle;
  /** Aborted on operator shutdown. */
  readonly signal: AbortSignal;
  /** Observes handler runs (metrics, traces). */
  readonly observer?: OperatorObserver | undefined;
  /** Peering's pause switch: nothing is spawned while paused. */
  readonly paused?: { readonly paused: boolean } | undefined;
  /** The gate that admitted this cycle: its handlers run away from it (not counted). */
  readonly gate?: AdmissionGate | undefined;
}

/** What the operator remembers about one object between cycles (in memory only). */
export interface ObjectMemory {
  /** The object's memo. */
  readonly memo: Memo;
  /** The object was fully handled by this process at least once (resume is done). */
  handledOnce: boolean;
  /** The object's daemons and timers, once it has any. */
  spawner?: Spawner | undefined;
  /** The essence seen in the previous cycle (to tell timers about essential changes). */
  lastEssence?: string | undefined;
  /** Re-processes the object soon with its latest body (e.g. when a daemon exited). */
  wake(): void;
  /** The latest known body (kept by the queue). */
  latest?: KubeObject | undefined;
  /**
   * A write the API server refused (403), kept to be tried again before anything else happens
   * to the object: what is left to write, how many times it was refused, the last message.
   */
  unwritten?:
    | { readonly patch: Patch; readonly tries: number; readonly message: string }
    | undefined;
}

/** One event to process. */
export interface ObjectEvent {
  /** Raw type; `null` for objects from a (re)listing. */
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | null;
  /** Process even if this version was processed already (internal wake-ups). */
  readonly forced?: boolean;
  /**
   * Not a watch event but the operator's own re-look (after its write, after a delay, on a
   * wake-up): raw-event handlers are not called for it, so their results cannot loop.
   */
  readonly internal?: boolean;
  /** The object. */
  readonly body: KubeObject;
}

/** What a cycle came to. */
export interface CycleResult {
  /** The object as stored after our write, if we wrote. */
  readonly body?: KubeObject | undefined;
  /** Seconds until another cycle is due even without new events; undefined: none. */
  readonly delay?: number | undefined;
  /** A handler failed in this cycle, temporarily or permanently (for metrics). */
  readonly failed?: boolean | undefined;
  /**
   * The stored object after our write needs no second look: it differs from the processed one
   * only by this cycle's own changes (as far as causes go).
   */
  readonly settled?: boolean | undefined;
}

const VERBS: Readonly<Record<Reason, [string, string]>> = {
  create: ["Creation", "creation"],
  update: ["Updating", "update"],
  delete: ["Deletion", "deletion"],
  resume: ["Resuming", "resuming"],
};

/**
 * Processes one event of one object.
 * @param deps The operator's parts.
 * @param memory What is remembered about the object.
 * @param event The event (the latest of a coalesced burst).
 * @returns The stored object after our write and the delay until the next due cycle.
 */
export async function processEvent(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  event: ObjectEvent,
): Promise<CycleResult> {
  const { body } = event;
  const patch = new Patch();
  const deleted = event.type === "DELETED";
  const logger = deps.logger.forObject(body);
  // No resource handler runs before every index is complete (indexing itself is done earlier,
  // on the stream, so that this gate can open).
  await deps.readiness?.wait(deps.signal);
  if (deps.signal.aborted) return {};
  if (memory.unwritten) {
    if (deleted) memory.unwritten = undefined;
    else return await retryRefusedWrite(deps, memory, body);
  }

  if (!event.internal) await runWatchingHandlers(deps, memory, event, patch);
  const settings = deps.settings.persistence;
  const extra = extraEssenceFields(deps.changing);
  const essence = settings.diffbaseStorage.build({ body, extraFields: extra });
  const spawner = spawnerOf(deps, memory, body);
  if (deleted) spawner?.adjust(deps.spawning, body, { deleted: true, changed: false });
  if ((deps.changing.length === 0 && !spawner) || deleted) {
    // Only watching handlers: nothing needs the finalizer. As in Kopf, one left by another
    // version of the operator is removed, or the object could never be deleted (PST-54).
    if (!deleted && hasFinalizer(body, settings.finalizer)) {
      logger.debug("Removing the finalizer, as there are no handlers requiring it.");
      patch.removeFinalizer(body, settings.finalizer);
    }
    return await finish(deps, memory, body, patch, undefined, essence);
  }

  // The cause is detected when first needed: by a filter callback (they see the cause, as in
  // Kopf, also when deciding on the finalizer), or after the finalizer cycle below.
  let detected: ChangingCause | undefined;
  const detect = (): ChangingCause =>
    detected ??= detectChangingCause({
      body,
      deleted,
      finalizer: settings.finalizer,
      old: (settings.diffbaseStorage.fetch({ body }) ?? undefined) as
        | Record<string, unknown>
        | undefined,
      new: essence,
      initial: !memory.handledOnce,
    });
  const filterContext = (handler: ChangingHandler) =>
    changingFilterContext(
      makeResourceContext(deps, memory, body, patch, logger, handler.param),
      detect(),
      handler,
    );

  // The finalizer is added or removed in a cycle of its own, before any handler runs.
  const needed = requiresFinalizer(deps.changing, body, filterContext) ||
    Boolean(spawner?.wants(deps.spawning, body));
  const present = hasFinalizer(body, settings.finalizer);
  if (!isDeletionRequested(body) && needed !== present) {
    if (needed) {
      logger.debug("Adding the finalizer, thus preventing the actual deletion.");
      patch.addFinalizer(body, settings.finalizer);
    } else {
      logger.debug("Removing the finalizer, as there are no handlers requiring it.");
      patch.removeFinalizer(body, settings.finalizer);
    }
    return await finish(deps, memory, body, patch, 0, essence);
  }
  // Daemons and timers start only once the finalizer protects them (the cycle above).
  if (spawner) adjustSpawned(spawner, deps, memory, body, essence);

  // Stealth: objects that no changing handler's filters match get no state at all (no
  // diff-base, no progress, no logs); when they start matching, they are created (FLT-17).
  if (
    !isDeletionRequested(body) &&
    !deps.changing.some((h) => matchesBodyFilters(h, body, () => filterContext(h)))
  ) {
    return await finish(deps, memory, body, patch, undefined, essence);
  }

  const cause = detect();
  // Old Kopf's debug line for a newly created object; the body is serialised only when shown.
  if (cause.reason === "create" && logger.isEnabledFor("debug")) {
    logger.debug(`First appearance: ${JSON.stringify(body)}`);
  }
  if (cause.reason === "noop" || cause.reason === "free" || cause.reason === "gone") {
    memory.handledOnce = true;
    return await finish(deps, memory, body, patch, undefined, essence);
  }
  const reason = cause.reason;
  const handlers = matchChangingHandlers(deps.changing, cause, body, filterContext);
  if (handlers.length === 0) {
    completeCause(spawner, deps, cause, body, patch, logger, essence);
    memory.handledOnce = true;
    return await finish(deps, memory, body, patch, undefined, essence);
  }

  const now = new Date();
  const ids = handlers.map((h) => h.id);
  // Records of every handler are read: those of another cause (e.g. a creation interrupted by
  // deletion) are superseded and purged in this cycle's patch.
  const state = ProgressState.load(
    settings.progressStorage,
    body,
    deps.changing.map((h) => h.id),
    now,
  );
  const superseded = deps.changing.filter((h) => {
    const purpose = state.get(h.id)?.purpose;
    return purpose !== undefined && purpose !== reason;
  });
  if (superseded.length) {
    const purpose = state.get(superseded[0]!.id)?.purpose ?? "";
    const verb = VERBS[purpose as Reason]?.[0] ?? purpose;
    logger.info(`${verb} is superseded by ${reason}: ${superseded.map((h) => h.id).join(", ")}`);
    for (const h of superseded) state.purge(h.id);
  }
  const due = handlers.filter((h) => !state.isFinished(h.id) && !state.isDelayed(h.id, now));
  if (due.length && !ids.some((id) => state.get(id))) {
    logger.debug(`${VERBS[reason][0]} is in progress for ${describe(body)}`);
  }
  const chosen = deps.lifecycle(
    due.map((h) => ({ id: h.id, retries: state.get(h.id)?.retries ?? 0, handler: h })),
  );
  let anyFailed = false;
  for (const { handler } of chosen) {
    if (deps.signal.aborted) break;
    const progress = state.begin(handler.id, reason, new Date());
    const scope: SubhandlerScope = { state, lifecycle: deps.lifecycle, childIds: [] };
    // The attempt's signal follows the operator's (it is the operator's without a timeout).
    const attempt = () =>
      execute(
        withDefaultBackoff(handler, deps.settings.execution.defaultBackoff),
        progress,
        (signal) =>
          withHandledObject({ body }, () =>
            invokeChanging(handler, {
              ...makeResourceContext(deps, memory, body, patch, logger, handler.param, signal),
              reason,
              cause,
              progress,
            }, scope)),
        undefined,
        deps.signal,
      );
    const observed = () =>
      deps.observer
        ? deps.observer.handler(
          handlerInfo(deps, body, handler.id, "change", progress.retries, reason),
          attempt,
        )
        : attempt();
    // A result that cannot be stored fails its handler now, not the cycle's write later.
    const outcome = storableOutcome(
      handler.id,
      deps.gate ? await deps.gate.slow(observed) : await observed(),
    );
    if (
      (outcome.kind === "temporary" && outcome.error.name !== "HandlerChildrenRetry") ||
      outcome.kind === "permanent"
    ) anyFailed = true;
    state.record(handler.id, outcome, new Date(), scope.childIds);
    reportOutcome(logger, handler.id, outcome);
    deliverResult(patch, handler.id, outcome);
  }

  if (state.allFinished(ids)) {
    const { succeeded, failed } = state.counts(ids);
    if (chosen.length) {
      logger.info(`${VERBS[reason][0]} is processed: ${succeeded} succeeded; ${failed} failed.`);
    }
    if (reason === "delete" && spawner?.holding) {
      // Daemons still exiting hold the object: the finished records stay until they exited, so
      // that the cycle their exit wakes up releases the object without running the handlers
      // again (the records go with the object).
      state.store(settings.progressStorage, body, patch);
      return failedIf(anyFailed, await finish(deps, memory, body, patch, undefined, essence));
    }
    // As Kopf: the records of every changing handler go, not only of those matching now — a
    // field handler whose filter its own patch made stop matching leaves no stale record that a
    // later change would report as a superseded cause.
    for (const h of deps.changing) state.purge(h.id);
    state.store(settings.progressStorage, body, patch);
    completeCause(spawner, deps, cause, body, patch, logger, essence);
    memory.handledOnce = true;
    return failedIf(anyFailed, await finish(deps, memory, body, patch, undefined, essence));
  }
  state.store(settings.progressStorage, body, patch);
  return failedIf(
    anyFailed,
    await finish(deps, memory, body, patch, state.nextDelay(ids, new Date()), essence),
  );
}

/** Marks a cycle's result as failed (for metrics), keeping it as it is otherwise. */
function failedIf(failed: boolean, result: CycleResult): CycleResult {
  return failed ? { ...result, failed } : result;
}

/** What the observer gets to know about a handler run. */
function handlerInfo(
  deps: ProcessingDeps,
  body: KubeObject,
  id: string,
  kind: HandlerInfo["kind"],
  retry: number,
  cause?: string,
): HandlerInfo {
  const meta = body.metadata ?? {};
  return {
    resource: resourceName(deps.resource),
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    handler: id,
    kind,
    retry,
    cause,
  };
}

/** After all handlers of a cause are done: remember the essence, or release the object. */
function completeCause(
  spawner: Spawner | undefined,
  deps: ProcessingDeps,
  cause: ChangingCause,
  body: KubeObject,
  patch: Patch,
  logger: Logger,
  essence: Record<string, unknown>,
): void {
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

async function runWatchingHandlers(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  event: ObjectEvent,
  patch: Patch,
): Promise<void> {
  if (deps.watching.length === 0) return;
  const logger = deps.logger.forObject(event.body, { local: true });
  for (const handler of deps.watching) {
    const context: EventContext = {
      ...makeResourceContext(deps, memory, event.body, patch, logger, handler.param),
      event: { type: event.type, object: event.body },
      type: event.type,
    };
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

/** Builds the part of the context shared by all resource handlers. */
export function makeResourceContext(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  body: KubeObject,
  patch: Patch,
  logger: Logger,
  param: unknown,
  signal: AbortSignal = deps.signal,
): ResourceContext {
  return {
    ...objectFields(body),
    resource: deps.resource,
    patch,
    logger,
    memo: memory.memo,
    param,
    settings: deps.settings,
    signal: signal === deps.signal ? signal : AbortSignal.any([signal, deps.signal]),
    indices: deps.indices ?? {},
    client: deps.client,
    // As in Kopf, indices are also passed by their names and win over built-in names.
    ...deps.indices,
  };
}

async function finish(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  body: KubeObject,
  patch: Patch,
  delay: number | undefined,
  essence: Record<string, unknown>,
): Promise<CycleResult> {
  if (patch.isEmpty) return { delay };
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
    return refusedWrite(deps, memory, body, error);
  }
  switch (applied.state) {
    case "applied":
      return settledAfter(deps, body, applied.body, delay, essence)
        ? { body: applied.body, delay, settled: true }
        : { body: applied.body, delay };
    case "gone":
      logger.debug("Patching failed because the object is gone; nothing to do.");
      return {};
    case "conflict":
      // Someone else changed the object meanwhile; their change arrives as a new event.
      logger.debug(
        `Patching conflicted with another change (${applied.error.reason}); waiting for it.`,
      );
      return {};
    case "unchanged":
      return { delay };
  }
}

/**
 * A write the API server refused (403): one line says which permission is missing; what is left
 * to write is kept in memory and tried again after the object's error delays
 * (`settings.queueing.errorDelays`), before anything else happens to the object — so when the
 * permission is granted, the work lands; nothing is taken as done meanwhile.
 */
function refusedWrite(
  deps: ProcessingDeps,
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
 * Tries again the write that was refused in an earlier cycle, against the latest body.
 * @returns The cycle's result: still refused (wait), or written (look again at the stored object).
 */
async function retryRefusedWrite(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  body: KubeObject,
): Promise<CycleResult> {
  const kept = memory.unwritten!;
  let applied: Application;
  try {
    applied = await applyPatch(deps.api, deps.resource, body, rebasePatch(kept.patch, body), {
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
  deps: ProcessingDeps,
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

function describe(body: KubeObject): string {
  const meta = body.metadata ?? {};
  return meta.namespace ? `${meta.namespace}/${meta.name}` : `${meta.name}`;
}

/** The object's spawner of daemons and timers, if the resource has any. */
function spawnerOf(
  deps: ProcessingDeps,
  memory: ObjectMemory,
  body: KubeObject,
): Spawner | undefined {
  if (deps.spawning.length === 0) return undefined;
  const spawner: Spawner = memory.spawner ??= new Spawner({
    api: deps.api,
    resource: deps.resource,
    settings: deps.settings.background,
    execution: deps.settings.execution,
    paused: deps.paused,
    logger: deps.logger.forObject(body),
    context: (handler, signal): ResourceContext =>
      makeResourceContext(
        deps,
        memory,
        spawner.body,
        new Patch(),
        deps.logger.forObject(body),
        handler.param,
        signal,
      ),
    wake: () => memory.wake(),
    signal: deps.signal,
    observer: deps.observer,
  });
  return spawner;
}

/** Spawns and stops the object's daemons and timers to match the object. */
function adjustSpawned(
  spawner: Spawner,
  deps: ProcessingDeps,
  memory: ObjectMemory,
  body: KubeObject,
  essence: Record<string, unknown>,
): void {
  const text = JSON.stringify(essence);
  const changed = memory.lastEssence !== undefined && memory.lastEssence !== text;
  memory.lastEssence = text;
  spawner.adjust(deps.spawning, body, { deleted: isDeletionRequested(body), changed });
}
