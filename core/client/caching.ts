/**
 * The shared informer cache: one list+watch per (resource, namespace, selectors), each writing
 * into an in-memory store that handlers read with no request to the API server (kube-rs'
 * reflector, client-go's shared informers). The informers themselves: `./informer.ts`.
 *
 * - One writer, many readers: only the informer's watch (and the operator's own writes, see
 *   {@link InformerCache.observe}) change a store; readers get frozen objects.
 * - Read-your-writes: an object returned by the operator's own write is stored at once when it
 *   is newer than the cached one, so the next read sees it before the watch echoes it; the echo
 *   (same resourceVersion) and anything older are then ignored.
 * - A transform runs on every object before it is stored. The default one drops
 *   `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
 *   annotation: memory the operator never reads. Pass `transform: false` to keep objects whole.
 * - Subscribers get every change (`apply`/`delete`) with the previous cached object, so that a
 *   controller can decide what is worth a look: unchanged objects of a relist are not
 *   re-announced; objects gone meanwhile are announced as deleted.
 * - Taps get the watch stream itself (`Informer.events()`): the cause handlers' reactor and the
 *   indices read a cached resource from its informer instead of watching it once more.
 *
 * Caveat: a cache may lag behind the API server; it is eventually consistent, like any informer.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { KubeObjectLike } from "../structs/typed.ts";
import { resourceName } from "../structs/resources.ts";
import type { KubeApi, ResourceRef } from "./api.ts";
import {
  type CacheListOptions,
  type CacheTransform,
  dropManagedFields,
  Informer,
  type InformerScope,
  keyOf,
} from "./informer.ts";
import type { WatcherOptions } from "./watching.ts";

export {
  type CacheEvent,
  type CacheListOptions,
  type CacheTransform,
  dropManagedFields,
  Informer,
  type InformerScope,
  isNewer,
  LAST_APPLIED_ANNOTATION,
  type TapOptions,
} from "./informer.ts";

/** Options of {@link InformerCache}. */
export interface InformerCacheOptions {
  /** Applied to every object before it is stored; `false`: none. @default dropManagedFields */
  readonly transform?: CacheTransform | false;
  /** Watch timeouts and backoff (namespace, selector and signal are set per informer). */
  readonly watching?: WatcherOptions;
  /** Receives watch errors (they are retried by the watcher). */
  readonly onError?: (error: Error, resource: ResourceRef) => void;
}

/** The cache could not answer: nothing caches that resource (in that namespace). */
export class CacheMissError extends Error {
  /**
   * Creates the error.
   *
   * @param what The resource (and namespace) asked for.
   */
  constructor(what: string) {
    super(
      `Nothing caches ${what}: add the resource to the reconcile handler's owns or watches ` +
        `(or read it from the API server with the client)`,
    );
    this.name = "CacheMissError";
  }
}

/**
 * The operator's shared cache: informers started on first use, one per (resource, namespace,
 * selector), read synchronously. Dispose it (or abort its signal) to stop every watch.
 *
 * @example Reading ConfigMaps with no API request
 * ```ts ignore
 * const cache = new InformerCache(client.api);
 * await cache.informer(CONFIGMAPS, { namespace: "default" }).ready;
 * const cm = cache.get(CONFIGMAPS, "settings", { namespace: "default" });
 * await cache[Symbol.asyncDispose]();
 * ```
 */
export class InformerCache implements AsyncDisposable {
  readonly #api: KubeApi;
  readonly #options: InformerCacheOptions;
  readonly #informers = new Map<string, Informer>();
  readonly #runs: Promise<void>[] = [];
  readonly #stop = new AbortController();

  /**
   * Creates an empty cache.
   *
   * @param api Object operations (its counters count the cache's list and watch requests).
   * @param options The transform, watch options and error receiver.
   */
  constructor(api: KubeApi, options: InformerCacheOptions = {}) {
    this.#api = api;
    this.#options = options;
  }

  /** The running informers. */
  get informers(): readonly Informer[] {
    return [...this.#informers.values()];
  }

  /**
   * The informer of a resource in a scope: the running one, or a new one started now.
   *
   * @param resource The resource.
   * @param scope Namespace and label selector.
   * @returns The informer (await its `ready` for the first listing).
   */
  informer(resource: ResourceRef, scope: InformerScope = {}): Informer {
    const namespace = resource.namespaced ? scope.namespace : undefined;
    const { labelSelector, fieldSelector } = scope;
    const key = `${resourceName(resource)}|${namespace ?? ""}|${labelSelector ?? ""}|${
      fieldSelector ?? ""
    }`;
    let informer = this.#informers.get(key);
    if (informer) return informer;
    const transform = this.#options.transform === false
      ? (o: KubeObject) => o
      : this.#options.transform ?? dropManagedFields;
    informer = new Informer(resource, { namespace, labelSelector, fieldSelector }, transform);
    this.#informers.set(key, informer);
    const onError = this.#options.onError;
    this.#runs.push(
      informer.run(
        this.#api,
        { ...this.#options.watching, signal: this.#stop.signal },
        onError ? (error) => onError(error, resource) : undefined,
      ).catch((error) => {
        if (!this.#stop.signal.aborted) onError?.(error, resource);
      }),
    );
    return informer;
  }

  /**
   * One object from the cache, with no API request.
   *
   * @param resource The resource.
   * @param name The object's name.
   * @param options The namespace (for namespaced resources).
   * @returns The frozen object, or `undefined` when the cache does not have it.
   * @throws {CacheMissError} when no informer holds that resource in that namespace.
   */
  get<T extends KubeObjectLike = KubeObject>(
    resource: ResourceRef,
    name: string,
    options: { readonly namespace?: string | undefined } = {},
  ): T | undefined {
    const namespace = resource.namespaced ? options.namespace : undefined;
    for (const informer of this.#covering(resource, namespace)) {
      const found = informer.get(name, namespace);
      if (found) return found as T;
    }
    return undefined;
  }

  /**
   * Cached objects of a resource, with no API request.
   *
   * @param resource The resource.
   * @param options Namespace and labels to match.
   * @returns Frozen objects (each once, even if several informers hold it).
   * @throws {CacheMissError} when no informer holds that resource in that namespace.
   */
  list<T extends KubeObjectLike = KubeObject>(
    resource: ResourceRef,
    options: CacheListOptions = {},
  ): T[] {
    const namespace = resource.namespaced ? options.namespace : undefined;
    const seen = new Map<string, KubeObject>();
    for (const informer of this.#covering(resource, namespace)) {
      for (const object of informer.list({ ...options, namespace })) {
        seen.set(keyOf(object), object);
      }
    }
    return [...seen.values()] as T[];
  }

  /**
   * Stores an object the operator just wrote in every informer holding it (read-your-writes).
   *
   * @param resource Its resource.
   * @param object The object as the API server returned it.
   */
  observe(resource: ResourceRef, object: KubeObject): void {
    const namespace = resource.namespaced ? object.metadata?.namespace : undefined;
    for (const informer of this.#informers.values()) {
      if (resourceName(informer.resource) !== resourceName(resource)) continue;
      if (informer.scope.namespace !== undefined && informer.scope.namespace !== namespace) {
        continue;
      }
      // A selector-limited informer cannot tell whether the object still matches: leave it to
      // its watch.
      if (informer.scope.labelSelector || informer.scope.fieldSelector) continue;
      informer.observe(object);
    }
  }

  /** Stops every watch and waits for them to end. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#runs);
  }

  #covering(resource: ResourceRef, namespace: string | undefined): Informer[] {
    const found = [...this.#informers.values()].filter((i) =>
      resourceName(i.resource) === resourceName(resource) &&
      (i.scope.namespace === undefined || i.scope.namespace === namespace)
    );
    if (!found.length) {
      const where = namespace === undefined ? "" : ` in namespace ${namespace}`;
      throw new CacheMissError(`${resourceName(resource)}${where}`);
    }
    return found;
  }
}
