/**
 * One informer: the list+watch of one (resource, namespace, selectors), the store it keeps, and
 * the consumers it feeds (kube-rs' reflector with a shared stream, client-go's shared informer).
 *
 * Consumers come in two kinds:
 * - subscribers ({@link Informer.subscribe}) get each change of the store synchronously, with
 *   the previous object (the reconcile controllers' triggers);
 * - taps ({@link Informer.events}) get the watch stream itself, as {@link watcher} yields it, so
 *   that code written for a watch stream (the cause handlers' reactor, indices) reads the shared
 *   one instead of opening its own. A tap that joins late gets a listing of the store first, so
 *   every tap sees a complete, consistent stream: a listing, then changes, relists included.
 *   A tap may ask for a fresh one ({@link TapOptions.fresh}): the informer lists its scope from
 *   the API server once more and merges what is newer into the store before the tap's listing,
 *   so that the listing is as fresh as a list of its own (a store alone may lag the API server
 *   by the events in flight).
 *
 * Objects are stored after a transform (see {@link dropManagedFields}) and frozen; taps get
 * copies they may change.
 * @module
 */

import { nestedDeeperThan } from "../structs/dicts.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { KubeApi, ResourceRef } from "./api.ts";
import { watcher, type WatcherEvent, type WatcherOptions } from "./watching.ts";

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
  /** A server-side field selector. */
  readonly fieldSelector?: string | undefined;
}

/** Options of {@link Informer.list}. */
export interface CacheListOptions {
  /** Only objects in this namespace. */
  readonly namespace?: string | undefined;
  /** Only objects having all these labels with these values. */
  readonly labels?: Readonly<Record<string, string>> | undefined;
}

/** Options of {@link Informer.events}. */
export interface TapOptions {
  /** Only objects it accepts (judged by immutable fields: namespace, uid's shard). */
  readonly accept?: ((object: KubeObject) => boolean) | undefined;
  /** Ends the stream. */
  readonly signal?: AbortSignal | undefined;
  /**
   * When joining a running informer: a listing as fresh as a list from the API server. The
   * informer lists its scope once more (one paged list, shared by the taps joining meanwhile)
   * and merges what is newer into its store, and what is gone out of it, before the tap gets
   * the store as its listing; the other taps and the subscribers hear of those changes as of
   * watch events (whose late echoes are then skipped). Kopf lists at every start and resume of
   * a watch; this keeps that guarantee for a resume read from a shared cache. If the list
   * fails, the tap gets the store as it is (the error goes to the informer's `onError`).
   * Without it (the default), the store as it is, with no request.
   */
  readonly fresh?: boolean | undefined;
}

/** Where an informer lists and watches (kept by {@link Informer.run} for fresh listings). */
interface Source {
  readonly api: KubeApi;
  readonly options: WatcherOptions;
  readonly onError: ((error: Error) => void) | undefined;
}

/** One consumer of the watch stream. */
interface Tap {
  readonly accept: ((object: KubeObject) => boolean) | undefined;
  /** Events not yet consumed (`head` is the next one; the array is reset when drained). */
  buffer: (WatcherEvent | undefined)[];
  head: number;
  wake: (() => void) | undefined;
  /** Joined during a listing: waits for its end, then gets the whole store as a listing. */
  joining: boolean;
  closed: boolean;
}

/** The store and watch of one (resource, namespace, selectors). */
export class Informer {
  /** The resource held. */
  readonly resource: ResourceRef;
  /** The namespace and selectors held. */
  readonly scope: InformerScope;
  /** Resolves when the first listing is stored. */
  readonly ready: Promise<void>;
  readonly #objects = new Map<string, KubeObject>();
  readonly #subscribers = new Set<(event: CacheEvent) => void>();
  readonly #taps = new Set<Tap>();
  readonly #transform: CacheTransform;
  #markReady!: () => void;
  #isReady = false;
  /** The keys seen by the listing under way; `undefined` between listings. */
  #listing: Set<string> | undefined;
  /** The resourceVersion of the last listing or bookmark (for the listings given to taps). */
  #version = "";
  /** The API and options of {@link Informer.run}, once it runs. */
  #source: Source | undefined;
  /** Whether a fresh listing for late taps is being read. */
  #resyncing = false;
  /** Deletions the watch delivered while a fresh listing was read: key → their version. */
  #deletedMeanwhile: Map<string, bigint> | undefined;
  /**
   * Objects a fresh listing found gone before the watch said so: key → the listing's version.
   * The watch's late events of them (up to that version) are skipped.
   */
  readonly #tombstones = new Map<string, bigint>();

  /**
   * Creates an informer; {@link Informer.run} starts its watch.
   *
   * @param resource The resource.
   * @param scope The namespace and selectors.
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

  /** Number of taps reading the watch stream now. */
  get taps(): number {
    return this.#taps.size;
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
   * The watch stream, shared: a listing (of the store when joining a running informer), then
   * every change and relist, as {@link watcher} yields them, with the transformed objects. Wrap
   * it in `objectEvents()` as a watch stream of one's own. Objects are copies the consumer may
   * change; events wait in memory until consumed.
   *
   * @param options A filter and a signal that ends the stream.
   * @returns The events, until the signal aborts or the informer stops.
   */
  async *events(options: TapOptions = {}): AsyncGenerator<WatcherEvent> {
    const { signal } = options;
    if (signal?.aborted) return;
    const tap: Tap = {
      accept: options.accept,
      buffer: [],
      head: 0,
      wake: undefined,
      joining: false,
      closed: false,
    };
    // Before the first listing, the tap gets it live; during one, it waits for its end.
    if (this.#listing) tap.joining = true;
    else if (this.#isReady && options.fresh && this.#source) {
      tap.joining = true;
      this.#resync(this.#source);
    } else if (this.#isReady) this.#replay(tap);
    const onAbort = () => {
      tap.closed = true;
      tap.wake?.();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    this.#taps.add(tap);
    try {
      for (;;) {
        while (tap.head < tap.buffer.length && !tap.closed) {
          const event = tap.buffer[tap.head]!;
          tap.buffer[tap.head++] = undefined; // let it go at once
          yield "object" in event ? { ...event, object: structuredClone(event.object) } : event;
        }
        if (tap.closed) return;
        tap.buffer = [];
        tap.head = 0;
        await new Promise<void>((resolve) => tap.wake = resolve);
        tap.wake = undefined;
      }
    } finally {
      this.#taps.delete(tap);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Stores an object the operator itself just wrote (read-your-writes), when newer than the
   * cached one; subscribers and taps hear of it as of any change (its watch echo is then
   * skipped).
   *
   * @param object The object as the API server returned it.
   */
  observe(object: KubeObject): void {
    const old = this.#objects.get(keyOf(object));
    const stored = this.#apply(structuredClone(object)); // the caller keeps its copy mutable
    // As the watch would have said it (its echo is skipped now): a creation is ADDED.
    const raw = old && old.metadata?.uid === object.metadata?.uid ? "MODIFIED" : "ADDED";
    if (stored) this.#forward({ type: "apply", object: stored, raw }, stored);
  }

  /**
   * Runs the list+watch until the signal aborts; the taps end with it.
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
    this.#source = { api, options, onError };
    const stream = watcher(api, this.resource, {
      ...options,
      namespace: this.scope.namespace,
      labelSelector: this.scope.labelSelector,
      fieldSelector: this.scope.fieldSelector,
    });
    try {
      for await (const event of stream) this.#receive(event, onError);
    } finally {
      for (const tap of this.#taps) {
        tap.closed = true;
        tap.wake?.();
      }
    }
  }

  #receive(event: WatcherEvent, onError?: (error: Error) => void): void {
    switch (event.type) {
      case "init":
        this.#listing = new Set();
        this.#tombstones.clear(); // the relist says what is gone
        this.#forward(event);
        break;
      case "initApply": {
        const key = keyOf(event.object);
        this.#listing?.add(key);
        // Taps get every listed object, changed or not: their own relist folding
        // (objectEvents) tells which are unchanged.
        const stored = this.#apply(event.object) ?? this.#objects.get(key)!;
        this.#forward({ type: "initApply", object: stored }, stored);
        break;
      }
      case "initDone": {
        // Objects missing from a relist went while the watch was down.
        for (const [key, object] of this.#objects) {
          if (this.#listing?.has(key)) continue;
          this.#objects.delete(key);
          this.#emit({ type: "delete", object, old: object });
          this.#forward({ type: "delete", object }, object);
        }
        this.#listing = undefined;
        this.#version = event.resourceVersion;
        this.#forward(event);
        for (const tap of this.#taps) {
          if (!tap.joining) continue;
          tap.joining = false;
          this.#replay(tap);
        }
        if (!this.#isReady) {
          this.#isReady = true;
          this.#markReady();
        }
        break;
      }
      case "apply": {
        if (this.#buried(event.object)) break;
        const stored = this.#apply(event.object);
        if (stored) this.#forward({ type: "apply", object: stored, raw: event.raw }, stored);
        break;
      }
      case "delete": {
        if (this.#buried(event.object)) {
          this.#tombstones.delete(keyOf(event.object)); // the watch caught up with the listing
          break;
        }
        if (this.#deletedMeanwhile) {
          const version = numericVersion(event.object);
          if (version !== undefined) this.#deletedMeanwhile.set(keyOf(event.object), version);
        }
        const gone = this.#delete(event.object);
        if (gone) this.#forward({ type: "delete", object: gone }, gone);
        break;
      }
      case "bookmark":
        this.#version = event.resourceVersion;
        this.#forward(event);
        break;
      case "error":
        onError?.(event.error);
        this.#forward(event);
        break;
      case "refused":
        // An object refused for its depth still exists: a relist does not drop it.
        this.#listing?.add(keyOf(event.object));
        onError?.(new Error(`refused ${event.reason}`));
        this.#forward(event);
        break;
      case "skipped":
        onError?.(new Error(`ignored ${event.reason}`));
        this.#forward(event);
        break;
      default:
        this.#forward(event);
    }
  }

  /** Stores a newer object; returns it (as stored), or `undefined` when it was not newer. */
  #apply(raw: KubeObject): KubeObject | undefined {
    const key = keyOf(raw);
    const old = this.#objects.get(key);
    if (old && old.metadata?.uid === raw.metadata?.uid && !isNewer(raw, old)) return undefined;
    const object = deepFreeze(this.#transform(raw));
    this.#objects.set(key, object);
    this.#emit({ type: "apply", object, old });
    return object;
  }

  /** Forgets a deleted object; returns its last state, or `undefined` when a newer one is kept. */
  #delete(raw: KubeObject): KubeObject | undefined {
    const key = keyOf(raw);
    const old = this.#objects.get(key);
    if (old && old.metadata?.uid !== raw.metadata?.uid && raw.metadata?.uid) return undefined;
    this.#objects.delete(key);
    const object = deepFreeze(this.#transform(raw));
    this.#emit({ type: "delete", object: old ?? object, old });
    return object;
  }

  #emit(event: CacheEvent): void {
    for (const fn of this.#subscribers) fn(event);
  }

  #forward(event: WatcherEvent, object?: KubeObject): void {
    for (const tap of this.#taps) {
      if (tap.joining || tap.closed) continue;
      if (object && tap.accept && !tap.accept(object)) continue;
      tap.buffer.push(event);
      tap.wake?.();
    }
  }

  /**
   * Reads a fresh listing for the joining taps (one at a time), merged into the store page by
   * page, then gives them the store.
   */
  #resync(source: Source): void {
    if (this.#resyncing) return;
    this.#resyncing = true;
    const deleted = this.#deletedMeanwhile = new Map();
    (async () => {
      try {
        const { api, options } = source;
        const listed = new Set<string>();
        let at: bigint | undefined;
        const pages = api.listPages(this.resource, {
          ...this.scope,
          limit: options.pageSize,
          signal: options.signal,
        });
        for await (const page of pages) {
          if (this.#listing) return; // a relist under way says it all
          const version = page.metadata?.resourceVersion ?? "";
          if (!/^\d+$/.test(version)) return; // nothing can be ordered: the store as it is
          at ??= BigInt(version);
          for (const object of page.items) {
            listed.add(keyOf(object));
            // Too deep to take: present all the same (the watch refused it too).
            if (options.maxDepth !== undefined && nestedDeeperThan(object, options.maxDepth)) {
              continue;
            }
            this.#merge(object, deleted);
          }
        }
        if (at !== undefined && !this.#listing) this.#dropUnlisted(listed, at);
      } catch (error) {
        if (!source.options.signal?.aborted) {
          source.onError?.(error instanceof Error ? error : new Error(String(error)));
        }
      } finally {
        this.#resyncing = false;
        this.#deletedMeanwhile = undefined;
        // During a relist, the joining taps get its listing at its end.
        if (!this.#listing) {
          for (const tap of this.#taps) {
            if (!tap.joining) continue;
            tap.joining = false;
            this.#replay(tap);
          }
        }
      }
    })();
  }

  /**
   * Merges one object of a fresh listing into the store: stored (and told as a watch event
   * would) when newer than the stored one and not deleted by the watch since it was listed.
   */
  #merge(object: KubeObject, deletedMeanwhile: ReadonlyMap<string, bigint>): void {
    const version = numericVersion(object);
    if (version === undefined) return;
    const key = keyOf(object);
    const deletedAt = deletedMeanwhile.get(key);
    if (deletedAt !== undefined && deletedAt >= version) return;
    const old = this.#objects.get(key);
    if (old && !((numericVersion(old) ?? version) < version)) return;
    const stored = this.#apply(object);
    if (!stored) return;
    const raw = old && old.metadata?.uid === object.metadata?.uid ? "MODIFIED" : "ADDED";
    this.#forward({ type: "apply", object: stored, raw }, stored);
  }

  /**
   * After a fresh listing: deletes the stored objects it had to have (stored at or before its
   * version) but did not — gone while their deletion was still on its way.
   */
  #dropUnlisted(listed: ReadonlySet<string>, at: bigint): void {
    for (const [key, object] of this.#objects) {
      if (listed.has(key)) continue;
      const version = numericVersion(object);
      if (version === undefined || version > at) continue; // stored after the listing
      this.#objects.delete(key);
      this.#tombstones.set(key, at);
      this.#emit({ type: "delete", object, old: object });
      this.#forward({ type: "delete", object }, object);
    }
  }

  /** Whether a watch event is older than a fresh listing that found its object gone. */
  #buried(object: KubeObject): boolean {
    if (this.#tombstones.size === 0) return false;
    const key = keyOf(object);
    const at = this.#tombstones.get(key);
    if (at === undefined) return false;
    const version = numericVersion(object);
    if (version !== undefined && version <= at) return true;
    this.#tombstones.delete(key); // a later object of that name
    return false;
  }

  /** Gives a tap the whole store as one listing. */
  #replay(tap: Tap): void {
    tap.buffer.push({ type: "init" });
    for (const object of this.#objects.values()) {
      if (!tap.accept || tap.accept(object)) tap.buffer.push({ type: "initApply", object });
    }
    tap.buffer.push({ type: "initDone", resourceVersion: this.#version });
    tap.wake?.();
  }
}

/** The key of an object in a store: `namespace/name`. */
export function keyOf(object: KubeObject): string {
  return `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
}

/**
 * Whether `a` is a later version than `b`. resourceVersions are opaque, but the API server's are
 * numbers (etcd revisions); compared numerically when both are, else any difference counts.
 *
 * @param a One version of an object.
 * @param b Another version of it.
 * @returns Whether `a` is later.
 */
export function isNewer(a: KubeObject, b: KubeObject): boolean {
  const va = a.metadata?.resourceVersion ?? "";
  const vb = b.metadata?.resourceVersion ?? "";
  if (/^\d+$/.test(va) && /^\d+$/.test(vb)) return BigInt(va) > BigInt(vb);
  return va !== vb;
}

/** An object's resourceVersion as a number, when it is one. */
function numericVersion(object: KubeObject): bigint | undefined {
  const version = object.metadata?.resourceVersion ?? "";
  return /^\d+$/.test(version) ? BigInt(version) : undefined;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
