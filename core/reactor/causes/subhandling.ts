/**
 * Invoking resource-changing handlers with their full context, including sub-handlers.
 *
 * A sub-handler (declared with `context.subhandler()` or run by `context.execute()`) is a handler
 * of its own: id `parent/child`, its own progress record, retries and errors. The parent is
 * re-invoked in later cycles until all its sub-handlers are finished (a quiet internal retry),
 * so the parent must be deterministic; finished sub-handlers are not run again.
 * @module
 */

import {
  ErrorsMode,
  execute as executeOnce,
  HandlerChildrenRetry,
  PermanentError,
  withDefaultBackoff,
} from "../../actions/execution.ts";
import type { Lifecycle } from "../../actions/lifecycles.ts";
import type { HandlerProgress, ProgressState } from "../../actions/progression.ts";
import type { ChangingCause } from "../../intents/causes.ts";
import type {
  ChangingContext,
  ExecuteOptions,
  ResourceContext,
  SubhandlerOptions,
} from "../../intents/contexts.ts";
import {
  type ChangingHandler,
  defaultHandlerId,
  handlerFilters,
  type Reason,
} from "../../intents/handlers.ts";
import { reduce } from "../../structs/diffs.ts";
import { resolve } from "../../structs/dicts.ts";
import {
  changingFilterContext,
  matchChangingHandlers,
  matchesChangingFilters,
} from "../../intents/registries.ts";
import { deliverResult, reportOutcome, storableOutcome } from "../../actions/outcomes.ts";
import { type ContextParts, type ContextScope, handlerContext } from "../scope/context.ts";

/** Where sub-handlers of the running handler are tracked. */
export interface SubhandlerScope {
  /** The object's progress (sub-handler records live beside the parent's). */
  readonly state: ProgressState;
  /** Which sub-handlers run in a cycle. */
  readonly lifecycle: Lifecycle;
  /** Ids of the sub-handlers seen in this invocation (recorded as the parent's `subrefs`). */
  readonly childIds: string[];
}

/** The parts of the changing context known before invocation. */
export interface ChangingInputs {
  /** The operator's parts the context shows. */
  readonly scope: ContextScope;
  /** The object, its memo, the cycle's patch, the logger, the param and the attempt's signal. */
  readonly parts: ContextParts;
  /** Why. */
  readonly reason: Reason;
  /** The detected cause. */
  readonly cause: ChangingCause;
  /** The handler's progress. */
  readonly progress: HandlerProgress;
}

/**
 * Calls a changing handler with its context, then runs its declared sub-handlers.
 * @param handler The handler.
 * @param inputs Context parts.
 * @param scope Sub-handler tracking.
 * @returns The handler's result.
 * @throws {HandlerChildrenRetry} while sub-handlers are unfinished.
 */
export async function invokeChanging(
  handler: ChangingHandler,
  inputs: ChangingInputs,
  scope: SubhandlerScope,
): Promise<unknown> {
  const declared: ChangingHandler[] = [];
  let executed = false;
  const context: ChangingContext = handlerContext<
    Record<never, never>,
    Omit<ChangingContext, keyof ResourceContext>
  >(inputs.scope, inputs.parts, {}, {
    ...causeFields(handler, inputs),
    execute: async (fns, options = {}) => {
      const sources = [fns, options.handlers, options.registry].filter((x) => x !== undefined);
      if (sources.length > 1) {
        throw new TypeError("execute() takes only one of fns, handlers and registry");
      }
      const children = fns !== undefined
        ? functionChildren(handler, fns)
        : options.handlers !== undefined || options.registry !== undefined
        ? recordChildren(handler, inputs, options)
        : (executed = true, declared.splice(0));
      const lifecycle = options.lifecycle ?? scope.lifecycle;
      await runChildren(handler, inputs, { ...scope, lifecycle }, children, context.signal);
    },
    subhandler: (fn, options = {}) => {
      validateSubhandler(handler, options);
      const id = options.id ?? defaultHandlerId(fn as ChangingHandler["fn"]);
      declared.push(subhandlerRecord(handler, id, fn as ChangingHandler["fn"], options));
    },
  });
  const result = await (handler.fn as (c: ChangingContext) => unknown)(context);
  if (declared.length || (!executed && scope.childIds.length)) {
    await runChildren(handler, inputs, scope, declared.splice(0), context.signal);
  }
  return result;
}

type SubFn = (context: ChangingContext) => unknown;

/** `execute({ id: fn })` or `execute([fn, …])`: plain functions, no options. */
function functionChildren(
  parent: ChangingHandler,
  fns: Readonly<Record<string, SubFn>> | readonly SubFn[],
): ChangingHandler[] {
  const entries: Array<[string, SubFn]> = Array.isArray(fns)
    ? (fns as readonly SubFn[]).map((fn) => [defaultHandlerId(fn as ChangingHandler["fn"]), fn])
    : Object.entries(fns as Readonly<Record<string, SubFn>>);
  return entries.map(([id, fn]) => subhandlerRecord(parent, id, fn as ChangingHandler["fn"], {}));
}

/**
 * `execute(undefined, { handlers })` or `{ registry }`: complete handler records, matched to the
 * cause like top-level handlers (as Kopf's sub-registries are). Their ids are used as they are,
 * not prefixed with the parent's (as in Kopf, so that state written by Kopf is found).
 */
function recordChildren(
  parent: ChangingHandler,
  inputs: ChangingInputs,
  options: ExecuteOptions,
): ChangingHandler[] {
  const { scope, parts, cause } = inputs;
  const all = options.handlers ??
    options.registry!.handlersFor(scope.resource).changing.filter((h) => h.fn !== parent.fn);
  const matching = matchChangingHandlers(
    all,
    cause,
    parts.body,
    (h) => changingFilterContext(handlerContext(scope, { ...parts, param: h.param }), cause, h),
  );
  return matching.map((h) => ({ ...h, requiresFinalizer: false }));
}

/** Kopf's rules for sub-handler filters, checked when the sub-handler is declared. */
function validateSubhandler(parent: ChangingHandler, options: SubhandlerOptions): void {
  const { field, value, old, new: new_ } = options;
  const hasOldNew = old !== undefined || new_ !== undefined;
  if ((field === undefined || field === null) && (value !== undefined || hasOldNew)) {
    throw new TypeError("The value, old and new filters of a sub-handler need a field");
  }
  if (value !== undefined && hasOldNew) {
    throw new TypeError("The value filter and the old/new filters are mutually exclusive");
  }
  if (hasOldNew && !changesFields(parent)) {
    throw new TypeError(
      `The old/new filters need an update or field parent handler; '${parent.id}' is not one`,
    );
  }
}

// Update and field handlers (and their sub-handlers) react to changes of fields; their
// sub-handlers with a field run only when that field changed (as in Kopf).
function changesFields(handler: ChangingHandler): boolean {
  return handler.reason === undefined || handler.reason === "update";
}

/** The changing context's own fields: the cause (narrowed to the handler's field) and progress. */
function causeFields(
  handler: ChangingHandler,
  inputs: ChangingInputs,
): Omit<ChangingContext, keyof ResourceContext | "execute" | "subhandler"> {
  const { cause, progress } = inputs;
  const field = handler.field;
  const now = Date.now();
  return {
    reason: inputs.reason,
    diff: field ? reduce(cause.diff, field) : cause.diff,
    old: field ? resolve(cause.old, field) : cause.old,
    new: field ? resolve(cause.new, field) : cause.new,
    retry: progress.retries,
    started: progress.started,
    runtime: (now - progress.started.getTime()) / 1000,
  };
}

/** The handler record of a function sub-handler (declared, or given to `execute()`). */
function subhandlerRecord(
  parent: ChangingHandler,
  id: string,
  fn: ChangingHandler["fn"],
  options: SubhandlerOptions,
): ChangingHandler {
  const filters = handlerFilters(options);
  return {
    kind: "changing",
    id: `${parent.id}/${id}`,
    fn,
    param: options.param,
    reason: parent.reason,
    fieldMustChange: filters.field !== undefined && changesFields(parent),
    requiresFinalizer: false,
    errors: options.errors ?? ErrorsMode.TEMPORARY,
    timeout: options.timeout,
    retries: options.retries,
    backoff: options.backoff,
    ...filters,
    old: options.old,
    new: options.new,
  };
}

async function runChildren(
  parent: ChangingHandler,
  inputs: ChangingInputs,
  scope: SubhandlerScope,
  records: readonly ChangingHandler[],
  parentSignal: AbortSignal,
): Promise<void> {
  const { state } = scope;
  scope.childIds.push(...records.map((h) => h.id));
  const now = new Date();
  // Sub-handlers whose filters do not match the object are skipped (and do not block the parent).
  // Their filter callbacks get the parent's context with their own param, diff, old and new.
  const { scope: context, parts, cause } = inputs;
  const matching = records.filter((h) =>
    matchesChangingFilters(
      h,
      cause,
      parts.body,
      () => changingFilterContext(handlerContext(context, { ...parts, param: h.param }), cause, h),
    )
  );
  const due = matching.filter((h) => !state.isFinished(h.id) && !state.isDelayed(h.id, now));
  const chosen = scope.lifecycle(
    due.map((h) => ({ id: h.id, retries: state.get(h.id)?.retries ?? 0, handler: h })),
  );
  for (const { handler } of chosen) {
    const progress = state.begin(handler.id, inputs.reason, new Date());
    const nested: SubhandlerScope = { state, lifecycle: scope.lifecycle, childIds: [] };
    // The attempt's signal follows the parent's (it is the parent's without a timeout).
    const outcome = storableOutcome(
      handler.id,
      await executeOnce(
        withDefaultBackoff(handler, context.settings.execution?.defaultBackoff),
        progress,
        (signal) =>
          invokeChanging(
            handler,
            // As in Kopf, a sub-handler's param is its own (undefined without one).
            { ...inputs, parts: { ...parts, signal, param: handler.param }, progress },
            nested,
          ),
        undefined,
        parentSignal,
      ),
    );
    state.record(handler.id, outcome, new Date(), nested.childIds);
    scope.childIds.push(...nested.childIds);
    reportOutcome(parts.logger, handler.id, outcome);
    deliverResult(parts.patch, handler.id, outcome);
  }
  const ids = matching.map((h) => h.id);
  if (!state.allFinished(ids)) {
    throw new HandlerChildrenRetry(state.nextDelay(ids, new Date()) ?? 0);
  }
  const { failed } = state.counts(ids);
  if (failed) {
    throw new PermanentError(`${failed} sub-handler(s) of '${parent.id}' failed permanently`);
  }
}
