/**
 * The shared informer cache: one list+watch per (resource, namespace, label selector), each
 * writing into an in-memory store that handlers read with no request to the API server
 * (kube-rs' reflector, client-go's shared informers).
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
 *   controller can decide what is worth a look. Relists are folded in by `objectEvents()`:
 *   unchanged objects are not re-announced; objects gone meanwhile are announced as deleted.
 *
 * Caveat: a cache may lag behind the API server; it is eventually consistent, like any informer.
 * Only the reconcile controller uses it so far; the cause handlers keep their own watch streams.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import { resourceName } from "../structs/resources.ts";
import type { KubeApi, ResourceRef } from "./api.ts";
import { objectEvents, watcher, type WatcherEvent, type WatcherOptions } from "./watching.ts";

/** A function that slims an object before it is cached; it may return the same object. */
export type CacheTransform = (object: KubeObject) => KubeObject;

/** The annotation `kubectl apply` (client-side) keeps the whole last applied object in. */
export const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * The default cache transform: drops `metadata.managedFields` and the kubectl last-applied
 * annotation (often the largest parts of an object, and never read by the operator).
 *
 * @param object The object as received.
 * @returns The object without those fields (a shallow copy when something was dropped).
 */
export function dropManagedFields(object: KubeObject): KubeObject {
  const meta = object.metadata;
  if (!meta) return object;
  const annotated = meta.annotations !== undefined && LAST_APPLIED_ANNOTATION in meta.annotations;
  if (meta.managedFields === undefined && !annotated) return object;
  const { managedFields: _dropped, ...rest } = meta;
  if (annotated) {
    const { [LAST_APPLIED_ANNOTATION]: _applied, ...annotations } = meta.annotations!;
    rest.annotations = annotations;
  }
  return { ...object, metadata: rest };
}

/** One change of a cached object. */
export interface CacheEvent {
  /** `apply`: created or changed; `delete`: gone. */
  readonly type: "apply" | "delete";
  /** The object (after the transform). */
  readonly object: KubeObject;
  /** The object as cached before this change; `undefined` when it was not cached. */
  readonly old: KubeObject | undefined;
}

/** Which objects one informer holds. */
export interface InformerScope {
  /** One namespace; omitted: cluster-wide (and cluster-scoped resources). */
  readonly namespace?: string | undefined;
  /** A server-side label selector. */
  readonly labelSelector?: string | undefined;
}

/** Options of {@link InformerCache}. */
export interface InformerCacheOptions {
  /** Applied to every object before it is stored; `false`: none. @default dropManagedFields */
  readonly transform?: CacheTransform | false;
  /** Watch timeouts and backoff (namespace, selector and signal are set per informer). */
  readonly watching?: WatcherOptions;
  /** Receives watch errors (they are retried by the watcher). */
  readonly onError?: (error: Error, resource: ResourceRef) => void;
}

/** Options of {@link InformerCache.list}. */
export interface CacheListOptions {
  /** Only objects in this namespace. */
  readonly namespace?: string | undefined;
  /** Only objects having all these labels with these values. */
  readonly labels?: Readonly<Record<string, string>> | undefined;
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

/** The store and watch of one (resource, namespace, selector). */
export class Informer {
  /** The resource held. */
  readonly resource: ResourceRef;
  /** The namespace and selector held. */
  readonly scope: InformerScope;
  /** Resolves when the first listing is stored. */
  readonly ready: Promise<void>;
  readonly #objects = new Map<string, KubeObject>();
  readonly #subscribers = new Set<(event: CacheEvent) => void>();
  readonly #transform: CacheTransform;
  #markReady!: () => void;
  #isReady = false;

  /**
   * Creates an informer; {@link Informer.run} starts its watch.
   *
   * @param resource The resource.
   * @param scope The namespace and label selector.
   * @param transform Applied to each object before it is stored.
   */
  constructor(resource: ResourceRef, scope: InformerScope, transform: CacheTransform) {
    this.resource = resource;
    this.scope = scope;
    this.#transform = transform;
    this.ready = new Promise((resolve) => this.#markReady = resolve);
  }

  /** Whether the first listing is stored. */
  get isReady(): boolean {
    return this.#isReady;
  }

  /** Number of cached objects. */
  get size(): number {
    return this.#objects.size;
  }

  /**
   * One cached object.
   *
   * @param name Its name.
   * @param namespace Its namespace (none for cluster-scoped objects).
   * @returns The frozen object, or `undefined`.
   */
  get(name: string, namespace?: string): KubeObject | undefined {
    return this.#objects.get(`${namespace ?? ""}/${name}`);
  }

  /**
   * The cached objects, optionally filtered.
   *
   * @param options Namespace and labels to match.
   * @returns Frozen objects, in no particular order.
   */
  list(options: CacheListOptions = {}): KubeObject[] {
    const result: KubeObject[] = [];
    for (const object of this.#objects.values()) {
      if (options.namespace !== undefined && object.metadata?.namespace !== options.namespace) {
        continue;
      }
      const labels = object.metadata?.labels ?? {};
      if (options.labels && Object.entries(options.labels).some(([k, v]) => labels[k] !== v)) {
        continue;
      }
      result.push(object);
    }
    return result;
  }

  /**
   * Receives every change from now on.
   *
   * @param fn Called synchronously for each change.
   * @returns A function that unsubscribes.
   */
  subscribe(fn: (event: CacheEvent) => void): () => void {
    this.#subscribers.add(fn);
    return () => this.#subscribers.delete(fn);
  }

  /**
   * Stores an object the operator itself just wrote (read-your-writes), when newer than the
   * cached one; subscribers hear of it as of any change.
   *
   * @param object The object as the API server returned it.
   */
  observe(object: KubeObject): void {
    this.#apply(structuredClone(object)); // the caller keeps its copy mutable
  }

  /**
   * Runs the list+watch until the signal aborts.
   *
   * @param api Object operations.
   * @param options Watch options and the signal.
   * @param onError Receives watch errors.
   */
  async run(
    api: KubeApi,
    options: WatcherOptions,
    onError?: (error: Error) => void,
  ): Promise<void> {
    const onOther = (event: WatcherEvent) => {
      if (event.type === "initDone" && !this.#isReady) {
        this.#isReady = true;
        this.#markReady();
      } else if (event.type === "error") onError?.(event.error);
      else if (event.type === "skipped") onError?.(new Error(`ignored ${event.reason}`));
    };
    const stream = watcher(api, this.resource, {
      ...options,
      namespace: this.scope.namespace,
      labelSelector: this.scope.labelSelector,
    });
    for await (const event of objectEvents(stream, onOther)) {
      if (event.type === "delete") this.#delete(event.object);
      else if (!event.unchanged) this.#apply(event.object);
    }
  }

  #apply(raw: KubeObject): void {
    const key = keyOf(raw);
    const old = this.#objects.get(key);
    if (old && old.metadata?.uid === raw.metadata?.uid && !isNewer(raw, old)) return;
    const object = deepFreeze(this.#transform(raw));
    this.#objects.set(key, object);
    this.#emit({ type: "apply", object, old });
  }

  #delete(raw: KubeObject): void {
    const key = keyOf(raw);
    const old = this.#objects.get(key);
    if (old && old.metadata?.uid !== raw.metadata?.uid && raw.metadata?.uid) return; // a newer one
    this.#objects.delete(key);
    this.#emit({ type: "delete", object: old ?? deepFreeze(this.#transform(raw)), old });
  }

  #emit(event: CacheEvent): void {
    for (const fn of this.#subscribers) fn(event);
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
    const key = `${resourceName(resource)}|${namespace ?? ""}|${scope.labelSelector ?? ""}`;
    let informer = this.#informers.get(key);
    if (informer) return informer;
    const transform = this.#options.transform === false
      ? (o: KubeObject) => o
      : this.#options.transform ?? dropManagedFields;
    informer = new Informer(resource, { namespace, labelSelector: scope.labelSelector }, transform);
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
  get<T extends KubeObject = KubeObject>(
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
  list<T extends KubeObject = KubeObject>(
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
      if (informer.scope.labelSelector) continue;
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

function keyOf(object: KubeObject): string {
  return `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
}

/**
 * Whether `a` is a later version than `b`. resourceVersions are opaque, but the API server's are
 * numbers (etcd revisions); compared numerically when both are, else any difference counts.
 */
export function isNewer(a: KubeObject, b: KubeObject): boolean {
  const va = a.metadata?.resourceVersion ?? "";
  const vb = b.metadata?.resourceVersion ?? "";
  if (/^\d+$/.test(va) && /^\d+$/.test(vb)) return BigInt(va) > BigInt(vb);
  return va !== vb;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
