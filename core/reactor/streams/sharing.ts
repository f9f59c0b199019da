/**
 * One informer cache for the whole operator: the reconcile controllers keep their objects in it,
 * and the cause handlers' reactor and the indices read those resources from the same informers
 * instead of watching them once more. So a resource that is both reconciled (or owned, or
 * watched by a reconcile handler) and handled by cause handlers or indexed is listed and watched
 * once, whatever reads it.
 *
 * Resources that no reconcile handler needs are not cached: the reactor watches them itself, as
 * Kopf does, and keeps no copy of their objects (an operator of cause handlers only holds no
 * more in memory than before).
 *
 * What is the same and what is not, for the cause handlers of a cached resource:
 * - the events are the watch's: raw types (`ADDED`/`MODIFIED`/`DELETED`) for `on.event`,
 *   relists folded the same way (unchanged objects flagged, vanished ones deleted);
 * - a stream that starts with the operator gets the informer's store as its listing (the
 *   informer listed at the operator's start, as Kopf's watch would); a stream resumed after
 *   peering's pause gets a fresh one: the informer lists once more and merges it into its store
 *   (`fresh` of `Informer.events`), as fresh as the list Kopf sends at a resume (the store
 *   alone may lag the API server by the events in flight, and a peer acted meanwhile);
 * - bodies come after the cache's transform: with `settings.caching.dropManagedFields` (the
 *   default) they have no `metadata.managedFields` and no kubectl last-applied annotation;
 * - with namespace patterns, the cache watches cluster-wide (as the reconcile controllers do) and
 *   each namespace's stream is filtered here; with sharded replicas, the shards' streams are
 *   filtered here too (the cache holds every object, as reconcile handlers may read any).
 * @module
 */

import { type Informer, InformerCache, type InformerScope } from "../../client/caching.ts";
import { isRoutineSilence, type WatcherEvent, watchingOptions } from "../../client/watching.ts";
import { matchesResource, type SelectorFields } from "../../intents/selectors.ts";
import { isLiteralNamespace } from "../../structs/namespaces.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import type { OperatorScope } from "../scope/scope.ts";
import { watchSelectors } from "./watch_selectors.ts";

/**
 * The operator's parts the shared cache uses: the client, the registry (what its reconcile
 * handlers reconcile, own and watch is cached), the settings (caching, watching), the logger,
 * the namespace patterns and whether to watch cluster-wide.
 */
export type SharingScope = Pick<
  OperatorScope,
  "client" | "registry" | "settings" | "logger" | "namespaces" | "clusterwide"
>;

/** Options of {@link SharedInformers.events}. */
export interface SharedStreamOptions {
  /** One more filter (e.g. a shard's). */
  readonly accept?: ((object: KubeObject) => boolean) | undefined;
  /** Ends the stream. */
  readonly signal: AbortSignal;
  /** Joining a running informer: list once more first (see `TapOptions.fresh`). */
  readonly fresh?: boolean | undefined;
}

/** The operator's informer cache and what it holds. */
export class SharedInformers implements AsyncDisposable {
  /** The cache. */
  readonly cache: InformerCache;
  readonly #scope: SharingScope;
  readonly #selectors: readonly SelectorFields[];

  /** @param scope The operator's parts it uses. */
  constructor(scope: SharingScope) {
    this.#scope = scope;
    const logger = scope.logger.child(["kopf", "cache"]);
    this.cache = new InformerCache(scope.client.api, {
      ...(scope.settings.caching.dropManagedFields ? {} : { transform: false as const }),
      watching: watchingOptions(scope.settings.watching),
      onError: (error, resource) => {
        const message = `Watching ${resourceName(resource)} failed: ${error.message}`;
        if (isRoutineSilence(error)) logger.info(message);
        else logger.warning(message);
      },
    });
    this.#selectors = scope.registry.reconcilers().flatMap(({ selector, handler }) => [
      selector,
      ...handler.owns,
      ...handler.watches.map((w) => w.selector),
    ]);
  }

  /**
   * Whether the cache holds a resource: a reconcile handler reconciles, owns or watches it.
   * @param resource The resource.
   * @returns `true` when its objects are (or will be) cached.
   */
  holds(resource: Resource): boolean {
    return this.#selectors.some((selector) => matchesResource(selector, resource));
  }

  /**
   * The informers' scopes of a resource: one per literal namespace, else cluster-wide; the
   * watch settings' label and field selectors apply.
   * @param resource The resource.
   * @returns The scopes.
   */
  scopes(resource: Resource): InformerScope[] {
    const selectors = watchSelectors(this.#scope.settings.watching, resource);
    return this.#literal() && resource.namespaced
      ? (this.#scope.namespaces as string[]).map((namespace) => ({ namespace, ...selectors }))
      : [{ ...selectors }];
  }

  /**
   * The informers of a resource (started on first use).
   * @param resource The resource.
   * @returns One per scope.
   */
  informers(resource: Resource): Informer[] {
    return this.scopes(resource).map((scope) => this.cache.informer(resource, scope));
  }

  /**
   * The watch stream of a cached resource in one namespace, read from its informer: what the
   * reactor would get from a watch of its own (see `Informer.events`); with `fresh`, joining a
   * running informer, it begins with a fresh listing (one list request).
   * @param resource A resource the cache {@link holds}.
   * @param namespace The namespace; `undefined`: all (cluster-wide, cluster-scoped resources).
   * @param options A filter of one's own and the signal that ends the stream.
   * @returns The events.
   */
  events(
    resource: Resource,
    namespace: string | undefined,
    options: SharedStreamOptions,
  ): AsyncGenerator<WatcherEvent> {
    const selectors = watchSelectors(this.#scope.settings.watching, resource);
    const literal = this.#literal() && resource.namespaced;
    const scope: InformerScope = literal ? { namespace, ...selectors } : { ...selectors };
    const narrow = !literal && resource.namespaced && namespace !== undefined;
    const accept = options.accept;
    const filter = narrow || accept
      ? (object: KubeObject) =>
        (!narrow || object.metadata?.namespace === namespace) && (!accept || accept(object))
      : undefined;
    return this.cache.informer(resource, scope).events({
      accept: filter,
      signal: options.signal,
      fresh: options.fresh,
    });
  }

  /** Stops every informer. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.cache[Symbol.asyncDispose]();
  }

  /** Literal namespaces only: one informer per namespace (else cluster-wide, filtered here). */
  #literal(): boolean {
    const { clusterwide, namespaces } = this.#scope;
    return !clusterwide && namespaces.length > 0 && namespaces.every(isLiteralNamespace);
  }
}
