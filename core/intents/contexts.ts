/**
 * The context objects handlers receive: one object with every Kopf keyword argument that applies
 * to the handler kind, plus an `AbortSignal`. Generic over the spec and status types.
 * @module
 */

import type { Lifecycle } from "../actions/lifecycles.ts";
import type { Logger } from "../actions/loggers.ts";
import type { KubeClient } from "../client/client.ts";
import type { OperatorSettings } from "../settings/settings.ts";
import type { Headers, Operation, SSLPeer, UserInfo } from "../structs/admission.ts";
import type { Diff } from "../structs/diffs.ts";
import type { Annotations, KubeObject, Labels, ObjectMeta } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import type { StorableResult } from "../structs/results.ts";
import type {
  BodyOf,
  DiffOf,
  EssenceOf,
  IsTypedObject,
  PatchOf,
  SpecOf,
  StatusOf,
} from "../structs/typed.ts";
import type { MetaFilter, ValueFilter, WhenCallback } from "./filters.ts";
import type { ChangingHandler, Reason } from "./handlers.ts";
import type { OperatorRegistry } from "./registries.ts";

/** A read-only view of one in-memory index (see the `index` handlers). */
export interface IndexView {
  /** Number of keys. */
  readonly size: number;
  /**
   * The values under a key (any JSON value; tuples as arrays), if any.
   *
   * @param key The key (any JSON value; tuples as arrays).
   * @returns The values, or `undefined` when the key has none.
   */
  get(
    key: unknown,
  ): Iterable<unknown> & { readonly size: number; toArray(): unknown[] } | undefined;
  /**
   * Whether a key has values.
   *
   * @param key The key (any JSON value; tuples as arrays).
   * @returns Whether it has values.
   */
  has(key: unknown): boolean;
  /**
   * The keys.
   *
   * @returns The keys.
   */
  keys(): unknown[];
}

/** Free-form per-object (or operator) memory, kept in memory only. */
export type Memo = Record<string, unknown>;

/**
 * What every resource handler receives.
 *
 * @typeParam Spec The type of `spec`, or a typed object (see `TypedObject`), which then also
 *   types `status`, `body`, `patch.spec`/`patch.status`, and `old`/`new`/`diff` of changes.
 * @typeParam Status The type of `status` (ignored when `Spec` is a typed object).
 */
export interface ResourceContext<Spec = Record<string, unknown>, Status = Record<string, unknown>> {
  /** The whole object, as last seen (treat as read-only). */
  readonly body: BodyOf<Spec>;
  /** `body.spec` (an empty object when absent). */
  readonly spec: SpecOf<Spec>;
  /** `body.metadata`. */
  readonly meta: ObjectMeta;
  /** `body.status` (an empty object when absent). */
  readonly status: StatusOf<Spec, Status>;
  /** `metadata.name` (a string, as Kopf 1.45 types it: stored objects always have one). */
  readonly name: string;
  /** `metadata.namespace` (undefined for cluster-scoped objects). */
  readonly namespace: string | undefined;
  /** `metadata.uid` (a string, as Kopf 1.45 types it: stored objects always have one). */
  readonly uid: string;
  /** `metadata.labels` (empty when absent). */
  readonly labels: Labels;
  /** `metadata.annotations` (empty when absent). */
  readonly annotations: Annotations;
  /** The resource actually served (as discovered). */
  readonly resource: Resource;
  /** Changes to apply to the object after the handler, merged into the cycle's one patch. */
  readonly patch: PatchOf<Spec, Status>;
  /** The object's logger: messages are prefixed and (info and above) posted as Events. */
  readonly logger: Logger;
  /** The object's in-memory memo (a shallow copy of the operator's memo at first sight). */
  readonly memo: Memo;
  /** The `param` given at registration. */
  readonly param: unknown;
  /** The operator's settings. */
  readonly settings: OperatorSettings;
  /** Aborted when the operator stops (or the handler's timeout passes). */
  readonly signal: AbortSignal;
  /** The operator's indices by name (also available as top-level properties, as in Kopf). */
  readonly indices: Readonly<Record<string, IndexView>>;
  /**
   * The operator's own client: the cluster it watches, with its credentials (`--embedded`,
   * `--kubeconfig`, `--context`, login handlers), rate limit and request metrics. Use it to
   * create and read children. It is shared: do not dispose it.
   */
  readonly client: KubeClient;
}

/** What on.event handlers receive. */
export interface EventContext<Spec = Record<string, unknown>, Status = Record<string, unknown>>
  extends ResourceContext<Spec, Status> {
  /** The raw event; `type` is `null` for objects reported by a (re)listing. */
  readonly event: {
    readonly type: "ADDED" | "MODIFIED" | "DELETED" | null;
    readonly object: KubeObject;
  };
  /** The event type (`null` for listings). */
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | null;
}

/** What resource-changing handlers (create, update, delete, resume, field, sub-handlers) receive. */
export interface ChangingContext<Spec = Record<string, unknown>, Status = Record<string, unknown>>
  extends ResourceContext<Spec, Status> {
  /** Why the handler runs. */
  readonly reason: Reason;
  /** Essential changes since the last handled state (relative to `field` for field handlers). */
  readonly diff: DiffOf<Spec>;
  /** The last handled essence (or the old field value); `undefined` when none. */
  readonly old: OldNewOf<Spec>;
  /** The current essence (or the new field value); `undefined` when none. */
  readonly new: OldNewOf<Spec>;
  /** Attempts made before this one (0 on the first). */
  readonly retry: number;
  /** When the first attempt started. */
  readonly started: Date;
  /** Seconds since the first attempt. */
  readonly runtime: number;
  /**
   * Runs sub-handlers as part of this handler: each is tracked, retried and persisted on its own
   * (ids `parent/child`); this handler is re-invoked until all of them are finished.
   * Without `fns`, `handlers` or `registry`, runs the ones declared with
   * {@link ChangingContext.subhandler}.
   *
   * @typeParam R The sub-handlers' results by id or position, inferred: each must be JSON (see
   *   `StorableResult`).
   * @param fns Sub-handlers by id, or a list of functions (ids: their names).
   * @param options Handler records or a registry instead of `fns`, and the lifecycle.
   * @returns Resolves when this cycle's sub-handlers ran.
   * @throws {TypeError} when more than one of `fns`, `handlers`, `registry` is given.
   * @throws An internal retry signal while sub-handlers are unfinished (let it propagate).
   */
  execute<
    R extends Readonly<Record<string, unknown>> | readonly unknown[] = Readonly<
      Record<string, unknown>
    >,
  >(
    fns?: {
      readonly [K in keyof R]: (context: ChangingContext<Spec, Status>) => StorableResult<R[K]>;
    },
    options?: ExecuteOptions,
  ): Promise<void>;
  /**
   * Declares a sub-handler (run after this handler returns, or by `execute()`).
   *
   * @typeParam R The sub-handler's result, inferred: it must be JSON (see `StorableResult`).
   * @param fn The sub-handler function; it gets the same kind of context.
   * @param options Id, error mode, timeout, retries, backoff, param, and filters.
   * @throws {TypeError} for `value`/`old`/`new` without `field`, `value` with `old`/`new`, or
   *   `old`/`new` when this handler is not an update or field handler.
   */
  subhandler<R = unknown>(
    fn: (context: ChangingContext<Spec, Status>) => StorableResult<R>,
    options?: SubhandlerOptions,
  ): void;
}

/**
 * `old`/`new` of resource-changing handlers: the essence of a typed object (handlers with a
 * `field` get {@link FieldContext}, whose values are the field's), else `unknown`.
 */
export type OldNewOf<S> = IsTypedObject<S> extends true ? EssenceOf<S> | undefined : unknown;

/**
 * What handlers with a `field` receive (`on.field`, and `on.create/update/delete/resume` with
 * the `field` option): `old`, `new` and `diff` are the field's. `old` and `new` have the field's
 * type when a typed resource names the field by a dotted path (`{ field: "spec.color" }` of
 * `Widgets`: `string | undefined`), else `unknown`.
 *
 * @typeParam Value The type of `old` and `new` (see `FieldValueOf`).
 */
export interface FieldContext<
  Spec = Record<string, unknown>,
  Status = Record<string, unknown>,
  Value = unknown,
> extends Omit<ChangingContext<Spec, Status>, "old" | "new" | "diff"> {
  /** The field's changes since the last handled state. */
  readonly diff: Diff;
  /** The old value of the field; `undefined` when it had none. */
  readonly old: Value;
  /** The new value of the field; `undefined` when it has none. */
  readonly new: Value;
}

/** What admission handlers (on.validate, on.mutate) receive. */
export interface AdmissionContext<Spec = Record<string, unknown>, Status = Record<string, unknown>>
  extends Omit<ResourceContext<Spec, Status>, "name" | "uid" | "client"> {
  /**
   * The operator's own client (see {@link ResourceContext.client}); `undefined` only when a
   * review function built by `createWebhookFn()` without a client runs outside an operator.
   */
  readonly client: KubeClient | undefined;
  /** `metadata.name`; undefined when a creation asks the server to generate it (`generateName`). */
  readonly name: string | undefined;
  /** `metadata.uid`; undefined for a creation (the server assigns it later). */
  readonly uid: string | undefined;
  /** Whether the API request is a dry run: skip side effects. */
  readonly dryrun: boolean;
  /** The subresource under review (`status`, `scale`, …); `undefined` for the main body. */
  readonly subresource: string | undefined;
  /** Append strings to return them to the API client as warnings. */
  readonly warnings: string[];
  /** Who makes the API request, as Kubernetes sends it. */
  readonly userinfo: UserInfo;
  /** The HTTP headers of the review request (from the API server, not from the user). */
  readonly headers: Headers;
  /** The API server's verified TLS client certificate; `null` when none. */
  readonly sslpeer: SSLPeer;
  /** What is done: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`. */
  readonly operation: Operation | undefined;
  /** The old object (UPDATE, DELETE), else `undefined`. */
  readonly old: BodyOf<Spec> | undefined;
  /** The new object (CREATE, UPDATE), else `undefined`. */
  readonly new: BodyOf<Spec> | undefined;
  /** The changes from `old` to `new`. */
  readonly diff: Diff;
}

/** What else `execute()` runs, and how (Kopf's `handlers=`, `registry=`, `lifecycle=`). */
export interface ExecuteOptions {
  /**
   * Handler records to run as sub-handlers (e.g. `registry.handlersFor(resource).changing`).
   * As in Kopf, they are matched to the cause like top-level handlers (reason, field, filters);
   * their ids get the parent's prefix (`parent/<id>`).
   */
  readonly handlers?: readonly ChangingHandler[];
  /**
   * A registry whose resource-changing handlers for this resource run as sub-handlers, matched
   * like `handlers` (the parent's own function is left out). Register into it with
   * `on.create(…, { registry })` etc.
   */
  readonly registry?: OperatorRegistry;
  /** Which due sub-handlers run in each cycle (also for theirs). @default the operator's */
  readonly lifecycle?: Lifecycle;
}

/** Options of sub-handlers. */
export interface SubhandlerOptions {
  /** Sub-handler id (default: the function name). */
  readonly id?: string;
  /** Treatment of arbitrary errors. */
  readonly errors?: "ignored" | "temporary" | "permanent";
  /** Overall timeout, seconds. */
  readonly timeout?: number;
  /** Maximum attempts. */
  readonly retries?: number;
  /** Delay before retrying arbitrary errors, seconds. */
  readonly backoff?: number;
  /** Passed back as `param`. */
  readonly param?: unknown;
  /** Label filters (values, PRESENT, ABSENT, callbacks). */
  readonly labels?: MetaFilter;
  /** Annotation filters. */
  readonly annotations?: MetaFilter;
  /** Whole-object callback filter. */
  readonly when?: WhenCallback<ChangingContext>;
  /**
   * A field the sub-handler cares about (dotted or a path, from the object's root). Under an
   * update or field handler, the sub-handler runs only when this field changed.
   */
  readonly field?: string | readonly string[];
  /** Value filter of `field` (default: present). */
  readonly value?: ValueFilter;
  /**
   * Filter of the old value of `field`; only when the parent is an update or field handler
   * (otherwise `subhandler()` throws a TypeError), and not together with `value`.
   */
  readonly old?: ValueFilter;
  /** Filter of the new value of `field`; the same rules as for `old`. */
  readonly new?: ValueFilter;
}

/** What operator-level handlers (startup, cleanup, login, probe) receive. */
export interface ActivityContext {
  /** The activity's logger (messages are not posted as Events). */
  readonly logger: Logger;
  /** The operator's memo. */
  readonly memo: Memo;
  /** The operator's settings (startup handlers may change them). */
  readonly settings: OperatorSettings;
  /** The `param` given at registration. */
  readonly param: unknown;
  /** Attempts made before this one (0 on the first). */
  readonly retry: number;
  /** When the first attempt started. */
  readonly started: Date;
  /** Seconds since the first attempt. */
  readonly runtime: number;
  /** Aborted when the operator stops (or the handler's timeout passes). */
  readonly signal: AbortSignal;
  /** Which activity runs. */
  readonly activity: "startup" | "cleanup" | "login" | "probe";
  /**
   * The operator's indices by name (also as top-level properties): every declared index, as in
   * Kopf. Empty for startup and login handlers, which run before anything is watched (but live:
   * one kept fills up later); not guaranteed to be complete for probes and cleanup handlers.
   */
  readonly indices: Readonly<Record<string, IndexView>>;
  /**
   * The operator's own client (see {@link ResourceContext.client}); `undefined` for startup and
   * login handlers, which run before the operator has connected, and for cleanup handlers, which
   * run after it has disconnected (`KubeClient.connect()` still reaches the operator's cluster).
   */
  readonly client?: KubeClient | undefined;
}
