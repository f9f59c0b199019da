/**
 * What a level-based reconcile handler is (`on.reconcile`) and what it receives: the handler
 * record with its triggers (the object, the objects it owns, other watched relations, periodic
 * resync), and the context with the cache reader and server-side apply.
 *
 * Kept apart from the cause handlers' records: reconcile handlers are run by their own
 * controller (`core/reactor/reconcile/reconciling.ts`), not by the reactor's cause detection.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { KubeObjectLike } from "../structs/typed.ts";
import type { ResourceContext } from "./contexts.ts";
import type { RetriedHandler } from "./handlers.ts";
import type { SelectorFields } from "./selectors.ts";

/** Which object to reconcile: a namespace (none for cluster-scoped) and a name. */
export interface ObjectKey {
  /** The namespace; omitted for cluster-scoped objects. */
  readonly namespace?: string | undefined;
  /** The name. */
  readonly name: string;
}

/** A relation other than ownership: objects of `selector` whose changes enqueue `map(obj)`. */
export interface WatchedRelation {
  /** Which resources to watch. */
  readonly selector: SelectorFields;
  /** The objects to reconcile when one of these changes or goes. */
  readonly map: (object: KubeObject) => Iterable<ObjectKey> | ObjectKey | null | undefined;
}

/** An `on.reconcile` handler. */
export interface ReconcilingHandler extends RetriedHandler {
  /** Discriminator. */
  readonly kind: "reconciling";
  /** Resources whose objects, owned by a reconciled object (controller reference), enqueue it. */
  readonly owns: readonly SelectorFields[];
  /** Other relations. */
  readonly watches: readonly WatchedRelation[];
  /** The finalizer name when deletion is handled; `undefined`: deletion is not seen. */
  readonly finalizer: string | undefined;
  /** Seconds between periodic reconciles of every object; `undefined`: none. */
  readonly resync: number | undefined;
  /** Also reconcile when only the status changed. */
  readonly statusChanges: boolean;
  /** The field manager of `ctx.apply`. */
  readonly fieldManager: string;
  /** How many objects are reconciled at once. */
  readonly concurrency: number;
}

/** A handler with the selector of the resources it reconciles. */
export interface ReconcileRegistration {
  /** Which resources. */
  readonly selector: SelectorFields;
  /** The handler. */
  readonly handler: ReconcilingHandler;
}

/** Options of `ctx.apply`. */
export interface ReconcileApplyOptions {
  /** The field manager. @default the handler's `fieldManager` */
  readonly fieldManager?: string;
  /**
   * Take over fields other managers own (a controller owns what it states about its children).
   * @default true
   */
  readonly force?: boolean;
  /** Apply to a subresource, e.g. `status`. */
  readonly subresource?: string;
}

/** Read access to the operator's informer cache: no request to the API server. */
export interface CacheReader {
  /**
   * One cached object.
   *
   * @param resource A resource name (`configmaps`, `deployments.apps`, `kopfexamples.kopf.dev`).
   * @param name The object's name.
   * @param namespace Its namespace (default: the reconciled object's).
   * @returns The frozen object, or `undefined`.
   * @throws {CacheMissError} when nothing caches that resource (add it to `owns` or `watches`).
   */
  get<T extends KubeObjectLike = KubeObject>(
    resource: string,
    name: string,
    namespace?: string,
  ): T | undefined;
  /**
   * Cached objects.
   *
   * @param resource A resource name, as for {@link CacheReader.get}.
   * @param options Namespace (default: the reconciled object's; `null`: all) and labels.
   * @returns Frozen objects.
   * @throws {CacheMissError} when nothing caches that resource.
   */
  list<T extends KubeObjectLike = KubeObject>(
    resource: string,
    options?: {
      readonly namespace?: string | null;
      readonly labels?: Readonly<Record<string, string>>;
    },
  ): T[];
}

/** What `on.reconcile` handlers receive. */
export interface ReconcileContext<Spec = Record<string, unknown>, Status = Record<string, unknown>>
  extends ResourceContext<Spec, Status> {
  /**
   * The object is being deleted (only seen with `finalizer: true`, or while other finalizers
   * hold it): clean up; the finalizer goes when the handler returns without error.
   */
  readonly deleting: boolean;
  /** Rate-limited retries since the last success (0 normally). */
  readonly retry: number;
  /** The informer cache: the reconciled resource, the owned and the watched ones. */
  readonly cache: CacheReader;
  /**
   * Server-side apply of a child (or of this object's status with `subresource: "status"`):
   * states the fields this operator owns. When the cache already shows every stated field with
   * the same value (and the same was applied last time), nothing is sent.
   *
   * @param object The applied configuration: `apiVersion`, `kind`, `metadata.name` and the
   *   fields to own; the namespace defaults to the reconciled object's.
   * @param options Field manager, force, subresource.
   * @returns The object as stored (or as cached, when nothing was sent).
   * @throws {ApplyConflictError} when other managers own stated fields and `force` is false.
   */
  apply(object: KubeObjectLike, options?: ReconcileApplyOptions): Promise<KubeObject>;
}

/** What a reconcile handler may return: nothing, or when to look again. */
export type ReconcileResult = void | undefined | {
  /** Seconds until the object is reconciled again (unless a change comes first). */
  readonly requeueAfter?: number;
};
