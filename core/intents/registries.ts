/**
 * The operator registry: every handler the author declared, with the resources it serves, and
 * the matching of handlers to an object's current cause and state.
 *
 * A default registry exists for the common case (`on.*` without `registry`); several operators
 * in one process use explicit registries.
 * @module
 */

import { reduce } from "../structs/diffs.ts";
import { resolve } from "../structs/dicts.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import type { ChangingCause } from "./causes.ts";
import { isDeletionRequested } from "./causes.ts";
import { matchMeta, matchValue, PRESENT, type WhenCallback } from "./filters.ts";
import type {
  Activity,
  ActivityHandler,
  ChangingHandler,
  IndexingHandler,
  Registration,
  ResourceHandler,
  SpawningHandler,
  WatchingHandler,
  WebhookHandler,
  WebhookKind,
} from "./handlers.ts";
import type { ReconcileRegistration, ReconcilingHandler } from "./reconciliation.ts";
import { matchesResource, type SelectorFields } from "./selectors.ts";

/** All handlers of one operator. */
export class OperatorRegistry {
  #registrations: Registration[] = [];
  #activities: ActivityHandler[] = [];
  #webhooks: Registration<WebhookHandler>[] = [];
  #reconcilers: ReconcileRegistration[] = [];

  /**
   * Adds an operator-level handler (startup, cleanup, login, probe).
   * @param handler The handler record.
   * @returns The handler.
   * @throws {Error} when another function has the same id for the same activity.
   */
  registerActivity(handler: ActivityHandler): ActivityHandler {
    const same = this.#activities.find((h) =>
      h.activity === handler.activity && h.id === handler.id
    );
    if (same && same.fn !== handler.fn) {
      throw new Error(
        `Duplicate ${handler.activity} handler id '${handler.id}'; give one of them a distinct id`,
      );
    }
    if (!same) this.#activities.push(handler);
    return handler;
  }

  /**
   * The operator-level handlers of one activity, in declaration order.
   * @param activity Which activity.
   * @returns The handlers.
   */
  activities(activity: Activity): ActivityHandler[] {
    return this.#activities.filter((h) => h.activity === activity);
  }

  /**
   * Adds a handler for the resources a selector names.
   * @param selector Which resources.
   * @param handler The handler record.
   * @returns The handler.
   * @throws {Error} when another function is registered with the same id for the same selector.
   */
  register<H extends ResourceHandler>(selector: SelectorFields, handler: H): H {
    const key = JSON.stringify(selector);
    for (const existing of this.#registrations) {
      if (JSON.stringify(existing.selector) !== key || existing.handler.kind !== handler.kind) {
        continue;
      }
      if (existing.handler.id !== handler.id) continue;
      if (
        existing.handler.fn === handler.fn && existing.handler.kind === "changing" &&
        handler.kind === "changing"
      ) {
        if (existing.handler.reason === handler.reason) return handler; // the same registration twice
        continue; // e.g. one function for create and resume: deduplicated at matching time
      }
      if (existing.handler.fn === handler.fn && existing.handler.kind !== "changing") {
        return handler; // the same twice
      }
      if (existing.handler.fn !== handler.fn) {
        throw new Error(
          `Duplicate handler id '${handler.id}'; give one of the handlers a distinct id`,
        );
      }
    }
    this.#registrations.push({ selector, handler });
    return handler;
  }

  /**
   * Adds an admission handler (on.validate, on.mutate). Kept apart from the resource handlers:
   * webhooks need no watching.
   * @param selector Which resources.
   * @param handler The handler record.
   * @returns The handler.
   * @throws {Error} when another function has the same id (ids are the webhooks' URL paths).
   */
  registerWebhook(selector: SelectorFields, handler: WebhookHandler): WebhookHandler {
    const same = this.#webhooks.find((r) => r.handler.id === handler.id);
    if (same && same.handler.fn !== handler.fn) {
      throw new Error(
        `Duplicate admission handler id '${handler.id}'; give one of them a distinct id`,
      );
    }
    if (!same) this.#webhooks.push({ selector, handler });
    return handler;
  }

  /**
   * The admission handlers with their selectors, in declaration order.
   * @param kind Only validating or only mutating ones; all when omitted.
   * @returns The registrations.
   */
  webhooks(kind?: WebhookKind): Registration<WebhookHandler>[] {
    return this.#webhooks.filter((r) => kind === undefined || r.handler.webhook === kind);
  }

  /**
   * Adds a reconcile handler (on.reconcile). Kept apart from the cause handlers: its own
   * controller runs it.
   * @param selector Which resources.
   * @param handler The handler record.
   * @returns The handler.
   * @throws {Error} when another function has the same id.
   */
  registerReconciler(selector: SelectorFields, handler: ReconcilingHandler): ReconcilingHandler {
    const same = this.#reconcilers.find((r) => r.handler.id === handler.id);
    if (same && same.handler.fn !== handler.fn) {
      throw new Error(
        `Duplicate reconcile handler id '${handler.id}'; give one of them a distinct id`,
      );
    }
    if (!same) this.#reconcilers.push({ selector, handler });
    return handler;
  }

  /**
   * The reconcile handlers with their selectors, in declaration order.
   * @returns The registrations.
   */
  reconcilers(): readonly ReconcileRegistration[] {
    return this.#reconcilers;
  }

  /** Every registration, in declaration order. */
  get registrations(): readonly Registration[] {
    return this.#registrations;
  }

  /**
   * The ids of all index handlers (the names of the indices).
   *
   * @returns The ids, in declaration order.
   */
  indexIds(): string[] {
    const ids = this.#registrations.filter((r) => r.handler.kind === "indexing").map((r) =>
      r.handler.id
    );
    return [...new Set(ids)];
  }

  /**
   * Lists the distinct selectors in use.
   *
   * @returns One entry per distinct selector, in declaration order.
   */
  selectors(): SelectorFields[] {
    const seen = new Map<string, SelectorFields>();
    for (const r of this.#registrations) seen.set(JSON.stringify(r.selector), r.selector);
    return [...seen.values()];
  }

  /**
   * The handlers serving a resolved resource.
   * @param resource A resource the selectors were resolved to.
   * @param served Which selectors (by JSON key) resolved to this resource.
   * @returns Its changing and watching handlers, in declaration order.
   */
  handlersFor(
    resource: Resource,
    served?: ReadonlySet<string>,
  ): {
    changing: ChangingHandler[];
    watching: WatchingHandler[];
    spawning: SpawningHandler[];
    indexing: IndexingHandler[];
  } {
    const indexing: IndexingHandler[] = [];
    const changing: ChangingHandler[] = [];
    const watching: WatchingHandler[] = [];
    const spawning: SpawningHandler[] = [];
    for (const { selector, handler } of this.#registrations) {
      const ok = served
        ? served.has(JSON.stringify(selector))
        : matchesResource(selector, resource);
      if (!ok) continue;
      if (handler.kind === "changing") changing.push(handler);
      else if (handler.kind === "spawning") spawning.push(handler);
      else if (handler.kind === "indexing") indexing.push(handler);
      else watching.push(handler);
    }
    return { changing, watching, spawning, indexing };
  }
}

// Kept on the global object so that handler modules importing another copy of the library
// (e.g. a published version while the CLI runs from a checkout) still register in the same place.
const DEFAULT_KEY = Symbol.for("kopf.defaultRegistry");
type WithDefault = { [DEFAULT_KEY]?: OperatorRegistry };

/**
 * The registry used by `on.*` when no `registry` option is given (created on first use).
 *
 * @returns The default registry of this process.
 */
export function getDefaultRegistry(): OperatorRegistry {
  const holder = globalThis as WithDefault;
  return holder[DEFAULT_KEY] ??= new OperatorRegistry();
}

/**
 * Replaces the default registry.
 * @param registry The new default registry.
 */
export function setDefaultRegistry(registry: OperatorRegistry): void {
  (globalThis as WithDefault)[DEFAULT_KEY] = registry;
}

const withCallbacks = new WeakMap<object, boolean>();

/**
 * Whether a handler has any callback filter (`when`, a callable value, old/new or label or
 * annotation filter), i.e. whether its filters need a context at all and run user code.
 * @param handler The handler.
 * @returns `true` if any of its filters is a function.
 */
export function usesCallbacks(
  handler: ResourceHandler | WebhookHandler | ReconcilingHandler,
): boolean {
  let uses = withCallbacks.get(handler);
  if (uses === undefined) {
    const h = handler as Partial<Record<"when" | "value" | "old" | "new", unknown>>;
    uses = [h.when, h.value, h.old, h.new].some((f) => typeof f === "function") ||
      [handler.labels, handler.annotations].some((filters) =>
        Object.values(filters ?? {}).some((f) => typeof f === "function")
      );
    withCallbacks.set(handler, uses);
  }
  return uses;
}

/**
 * Whether the filters that do not depend on the cause (labels, annotations, when, field value)
 * pass.
 *
 * @param handler The handler whose filters to check.
 * @param body The object.
 * @param contextOf Builds the context that callback filters receive; called only for handlers
 *   that have callback filters (building it for every handler and event is measurable).
 * @returns Whether the handler's filters match.
 */
export function matchesBodyFilters(
  handler: ResourceHandler | WebhookHandler | ReconcilingHandler,
  body: KubeObject,
  contextOf: () => unknown,
): boolean {
  const context = usesCallbacks(handler) ? contextOf() : undefined;
  if (!matchMeta(handler.labels, body.metadata?.labels, context)) return false;
  if (!matchMeta(handler.annotations, body.metadata?.annotations, context)) return false;
  if (handler.field && !(handler.kind === "changing" && handler.fieldMustChange)) {
    if (
      !matchValue(
        handler.value === undefined ? PRESENT : handler.value,
        resolve(body, handler.field),
        context,
      )
    ) return false;
  }
  if (handler.when && !(handler.when as WhenCallback<unknown>)(context)) return false;
  return true;
}

/**
 * Selects the changing handlers for a cause (before progress: finished handlers are filtered
 * later). One function registered for several reasons (e.g. create and resume) appears once.
 *
 * @param handlers The resource's changing handlers.
 * @param cause The detected cause.
 * @param body The object.
 * @param contextFor Builds the filter context for a handler (lazily, per handler).
 * @returns The matching handlers, in declaration order.
 */
export function matchChangingHandlers(
  handlers: readonly ChangingHandler[],
  cause: ChangingCause,
  body: KubeObject,
  contextFor: (handler: ChangingHandler) => unknown,
): ChangingHandler[] {
  const selected: ChangingHandler[] = [];
  const seen = new Set<string>();
  for (const handler of handlers) {
    if (!reasonMatches(handler, cause, body)) continue;
    if (!matchesChangingFilters(handler, cause, body, () => contextFor(handler))) continue;
    if (seen.has(handler.id)) continue;
    seen.add(handler.id);
    selected.push(handler);
  }
  return selected;
}

/**
 * Whether a changing handler's filters pass for a cause, whatever its reason: the field change
 * with its `value`/`old`/`new` filters (when the field must change), then the body filters.
 * Sub-handlers are matched with this alone (their parent already matched the reason).
 *
 * @param handler The handler.
 * @param cause The detected cause.
 * @param body The object.
 * @param contextOf Builds the filter context; called only if the handler has callback filters.
 * @returns Whether the handler's filters match.
 */
export function matchesChangingFilters(
  handler: ChangingHandler,
  cause: ChangingCause,
  body: KubeObject,
  contextOf: () => unknown,
): boolean {
  let context: { value: unknown } | undefined; // built once, shared by all the filters
  const once = () => (context ??= { value: contextOf() }).value;
  if (handler.field && handler.fieldMustChange && !fieldChangeMatches(handler, cause, once)) {
    return false;
  }
  return matchesBodyFilters(handler, body, once);
}

/** What filter callbacks of changing handlers get on top of the resource context. */
export interface ChangingFilterExtras {
  /** The detected cause's reason (during the finalizer decision also `noop`, `free`, `gone`). */
  readonly reason: ChangingCause["reason"];
  /** Essential changes (relative to the handler's field, if any). */
  readonly diff: ChangingCause["diff"];
  /** The last handled essence (or the old field value). */
  readonly old: unknown;
  /** The current essence (or the new field value). */
  readonly new: unknown;
}

/**
 * The context filter callbacks (`when`, callback values) of a changing handler receive: its
 * resource context plus the cause, as Kopf passes all keyword arguments to filters. Only the
 * attempt's own values (`retry`, `started`, `runtime`) are missing: no attempt exists yet.
 *
 * @param base The handler's resource context.
 * @param cause The detected cause.
 * @param handler The handler (its field narrows `diff`, `old` and `new`).
 * @returns The filter context.
 */
export function changingFilterContext<B extends object>(
  base: B,
  cause: ChangingCause,
  handler: ChangingHandler,
): B & ChangingFilterExtras {
  const field = handler.field;
  return {
    ...base,
    reason: cause.reason,
    diff: field ? reduce(cause.diff, field) : cause.diff,
    old: field ? resolve(cause.old, field) : cause.old,
    new: field ? resolve(cause.new, field) : cause.new,
  };
}

function reasonMatches(handler: ChangingHandler, cause: ChangingCause, body: KubeObject): boolean {
  const reason = cause.reason;
  if (reason === "noop" || reason === "free" || reason === "gone") return false;
  if (handler.reason === undefined) return reason === "create" || reason === "update";
  if (handler.reason === "resume") {
    // Resume handlers mix into the first update of this process; with `deleted`, also into
    // the first deletion cycle of an object that was already being deleted at start.
    if (reason === "delete") return Boolean(handler.deleted && cause.initial);
    const resumable = reason === "resume" || (reason === "update" && cause.initial);
    return resumable && (handler.deleted || !isDeletionRequested(body));
  }
  return handler.reason === reason;
}

function fieldChangeMatches(
  handler: ChangingHandler,
  cause: ChangingCause,
  contextOf: () => unknown,
): boolean {
  const field = handler.field!;
  if (reduce(cause.diff, field).length === 0) return false;
  const oldValue = resolve(cause.old, field);
  const newValue = resolve(cause.new, field);
  const context = usesCallbacks(handler) ? contextOf() : undefined;
  if (handler.value !== undefined) {
    return matchValue(handler.value, oldValue, context) ||
      matchValue(handler.value, newValue, context);
  }
  if (handler.old !== undefined && !matchValue(handler.old, oldValue, context)) return false;
  if (handler.new !== undefined && !matchValue(handler.new, newValue, context)) return false;
  return true;
}

/**
 * Whether any handler needing the finalizer (non-optional delete handlers) matches the object.
 * @param handlers The resource's changing handlers.
 * @param body The object.
 * @param contextFor Builds the filter context for a handler.
 * @returns Whether the finalizer should be on the object.
 */
export function requiresFinalizer(
  handlers: readonly ChangingHandler[],
  body: KubeObject,
  contextFor: (handler: ChangingHandler) => unknown,
): boolean {
  return handlers.some((h) =>
    h.requiresFinalizer && matchesBodyFilters(h, body, () => contextFor(h))
  );
}

/**
 * Fields outside the essence that handlers watch (e.g. `status.phase`), to keep in the essence.
 * @param handlers The resource's changing handlers.
 * @returns Field paths under `status` or `metadata` that field handlers use.
 */
export function extraEssenceFields(handlers: readonly ChangingHandler[]): string[][] {
  // Asked once per processing cycle, for the same handler list of a stream every time.
  let fields = EXTRA_FIELDS.get(handlers);
  if (!fields) {
    fields = handlers.filter((h) =>
      h.field && (h.field[0] === "status" || h.field[0] === "metadata")
    )
      .map((h) => [...h.field!]);
    EXTRA_FIELDS.set(handlers, fields);
  }
  return fields;
}

const EXTRA_FIELDS = new WeakMap<readonly ChangingHandler[], string[][]>();
