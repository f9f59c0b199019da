/**
 * The object store: objects by resource, namespace and name; one global integer
 * resourceVersion counter (like etcd's revision); a change log for watches, trimmed to a
 * compaction window; point-in-time reconstruction for consistent paginated lists; and every
 * object's version history for test assertions.
 *
 * Stored objects are never mutated: every write stores a fresh copy.
 * @module
 */

import { expired } from "./errors.ts";
import { clone, type KubeObject } from "./types.ts";

/** The type of a change (and of a watch event). */
export type ChangeType = "ADDED" | "MODIFIED" | "DELETED";

/** One write, as kept in the change log. */
export interface Change {
  /** The resourceVersion of the write. */
  readonly rv: number;
  /** What happened. */
  readonly type: ChangeType;
  /** The resource key (`group/plural`). */
  readonly key: string;
  /** Namespace (`""` for cluster-scoped objects). */
  readonly namespace: string;
  /** Object name. */
  readonly name: string;
  /** The object after the write (for deletions: its last state, with the deletion's version). */
  readonly object: KubeObject;
  /** The object before the write (absent for additions). */
  readonly previous: KubeObject | undefined;
}

/** One version of an object, as recorded for {@link Store.versions}. */
export interface ObjectVersion {
  /** The resourceVersion of this state. */
  readonly resourceVersion: number;
  /** How this state came about. */
  readonly type: ChangeType;
  /** When it was written (ms since the epoch). */
  readonly time: number;
  /** The object as stored (for deletions: its last state). */
  readonly object: KubeObject;
}

/** Options of {@link Store}. */
export interface StoreOptions {
  /** How many recent changes are kept for watches and consistent lists. @default 10000 */
  readonly compactionWindow?: number;
}

/** The in-memory object store. */
export class Store {
  #objects = new Map<string, Map<string, KubeObject>>();
  #log: Change[] = [];
  #rv = 1;
  #compactedRv = 1;
  #window: number;
  #versions = new Map<string, ObjectVersion[]>();
  #listeners = new Set<(change: Change) => void>();

  /**
   * Creates an empty store.
   *
   * @param options The compaction window.
   */
  constructor(options: StoreOptions = {}) {
    this.#window = Math.max(1, options.compactionWindow ?? 10_000);
  }

  /** The latest resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Changes at or before this version are compacted away. */
  get compactedVersion(): number {
    return this.#compactedRv;
  }

  /**
   * Reads one object (do not mutate it).
   *
   * @param key Resource key.
   * @param namespace Namespace, `""` for cluster-scoped.
   * @param name Name.
   * @returns The stored object, if any.
   */
  get(key: string, namespace: string, name: string): KubeObject | undefined {
    return this.#objects.get(key)?.get(`${namespace}/${name}`);
  }

  /**
   * Lists the objects of a resource in key order (namespace, then name).
   *
   * @param key Resource key.
   * @param namespace Only this namespace, or all when `undefined`.
   * @returns The stored objects (do not mutate them).
   */
  list(key: string, namespace?: string): KubeObject[] {
    const bucket = this.#objects.get(key);
    if (!bucket) return [];
    const prefix = namespace === undefined ? "" : `${namespace}/`;
    return [...bucket].filter(([id]) => id.startsWith(prefix)).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0
    ).map(([, object]) => object);
  }

  /**
   * Lists the objects as they were at a past resourceVersion, by undoing later changes.
   *
   * @param key Resource key.
   * @param namespace Only this namespace, or all when `undefined`.
   * @param rv The version to look at.
   * @returns The objects at that version, in key order.
   * @throws {ApiFailure} 410 Expired when the changes since then are compacted away.
   */
  listAt(key: string, namespace: string | undefined, rv: number): KubeObject[] {
    if (rv >= this.#rv) return this.list(key, namespace);
    if (rv < this.#compactedRv) {
      throw expired("The resourceVersion for the provided list is too old.");
    }
    const state = new Map<string, KubeObject>();
    for (const object of this.list(key, namespace)) {
      state.set(`${object.metadata?.namespace ?? ""}/${object.metadata?.name}`, object);
    }
    for (let i = this.#log.length - 1; i >= 0; i--) {
      const change = this.#log[i]!;
      if (change.rv <= rv) break;
      if (change.key !== key || (namespace !== undefined && change.namespace !== namespace)) {
        continue;
      }
      const id = `${change.namespace}/${change.name}`;
      if (change.previous) state.set(id, change.previous);
      else state.delete(id);
    }
    return [...state].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([, o]) => o);
  }

  /** Every stored object with its resource key. */
  *entries(): Generator<[key: string, object: KubeObject]> {
    for (const [key, bucket] of this.#objects) {
      for (const object of bucket.values()) yield [key, object];
    }
  }

  /**
   * Writes a change: stores (or removes) the object under a new resourceVersion, logs the
   * change and tells the subscribers.
   *
   * @param type What happens.
   * @param key Resource key.
   * @param object The new state (for deletions: the last state).
   * @returns The stored object, with its new resourceVersion.
   */
  write(type: ChangeType, key: string, object: KubeObject): KubeObject {
    const namespace = object.metadata?.namespace ?? "";
    const name = object.metadata?.name ?? "";
    const id = `${namespace}/${name}`;
    const bucket = this.#objects.get(key) ?? new Map<string, KubeObject>();
    this.#objects.set(key, bucket);
    const previous = bucket.get(id);
    const rv = ++this.#rv;
    const stored = clone(object);
    stored.metadata = { ...stored.metadata, resourceVersion: String(rv) };
    if (type === "DELETED") bucket.delete(id);
    else bucket.set(id, stored);
    const change: Change = { rv, type, key, namespace, name, object: stored, previous };
    this.#log.push(change);
    if (this.#log.length > this.#window) {
      const dropped = this.#log.splice(0, this.#log.length - this.#window);
      this.#compactedRv = Math.max(this.#compactedRv, dropped.at(-1)!.rv);
    }
    const history = this.#versions.get(`${key}/${id}`) ?? [];
    history.push({ resourceVersion: rv, type, time: Date.now(), object: stored });
    this.#versions.set(`${key}/${id}`, history);
    for (const listener of this.#listeners) listener(change);
    return stored;
  }

  /**
   * The logged changes after a resourceVersion.
   *
   * @param rv Changes with a greater version are returned.
   * @returns The changes, or `undefined` when some are compacted away.
   */
  since(rv: number): Change[] | undefined {
    if (rv < this.#compactedRv) return undefined;
    const start = this.#log.findIndex((c) => c.rv > rv);
    return start < 0 ? [] : this.#log.slice(start);
  }

  /**
   * Forgets all changes up to now, like etcd compaction at a fresh revision (the counter moves
   * on by one, as for etcd's marker write): every version handed out so far becomes 410 Gone
   * for watches and continue tokens.
   */
  compact(): void {
    this.#log = [];
    this.#compactedRv = ++this.#rv;
  }

  /**
   * Subscribes to changes.
   *
   * @param listener Called synchronously after each write.
   * @returns A function that unsubscribes.
   */
  subscribe(listener: (change: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Every recorded version of one object (including earlier incarnations of the same name).
   *
   * @param key Resource key.
   * @param namespace Namespace, `""` for cluster-scoped.
   * @param name Name.
   * @returns The versions, oldest first.
   */
  versions(key: string, namespace: string, name: string): ObjectVersion[] {
    return [...(this.#versions.get(`${key}/${namespace}/${name}`) ?? [])];
  }
}
