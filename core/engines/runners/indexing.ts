/**
 * In-memory indices built by `index` handlers: each handler maps every matching object to
 * key→value pairs; the index collects, per key, the values of all objects (a {@link Store}).
 *
 * - A plain object (or a `Map`, for non-string keys such as tuples) is merged key by key;
 *   any other value is stored under the key `null`; `undefined`/`null` means "do not index":
 *   the object's earlier values stay as they are (as in Kopf). Null values in a mapping count.
 * - When an object is deleted or stops matching, all its values leave; empty stores vanish.
 * - Errors: ignored by default (stale values stay); a PermanentError removes the object's values
 *   and excludes it for good; a TemporaryError (or the "temporary" mode) removes them and
 *   excludes the object for the delay (`backoff`). Retry state is in memory only.
 * - Readiness: resource handlers wait until every indexed resource has been listed and indexed
 *   once (see {@link IndexingReadiness}).
 * @module
 */

import { type ErrorsMode, execute } from "../../actions/execution.ts";
import { withHandledObject } from "../../actions/handled_object.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import type { IndexingHandler } from "../../intents/handlers.ts";
import { matchesBodyFilters } from "../../intents/registries.ts";
import { isMapping } from "../../structs/dicts.ts";
import type { KubeObject } from "../../structs/objects.ts";

/** The values of one key of an index (never empty; unordered; not de-duplicated). */
export class Store implements Iterable<unknown> {
  #values: Map<string, unknown[]>; // by object key

  /**
   * Creates a store over the index's values of one key; indices create these, not users.
   *
   * @param values Values by object key (owned by the index).
   */
  constructor(values: Map<string, unknown[]>) {
    this.#values = values;
  }

  /** Number of values. */
  get size(): number {
    let n = 0;
    for (const list of this.#values.values()) n += list.length;
    return n;
  }

  /** The values, in no particular order. */
  *[Symbol.iterator](): Iterator<unknown> {
    for (const list of this.#values.values()) yield* list;
  }

  /**
   * The values as an array.
   *
   * @returns A new array of the values.
   */
  toArray(): unknown[] {
    return [...this];
  }
}

function keyText(key: unknown): string {
  return JSON.stringify(key === undefined ? null : key);
}

/** A read-only mapping from keys (any JSON value; tuples as arrays) to {@link Store}s. */
export class Index {
  // key text → (object key → values)
  #data = new Map<string, Map<string, unknown[]>>();
  #keys = new Map<string, unknown>();

  /** Number of keys. */
  get size(): number {
    return this.#data.size;
  }

  /**
   * The store of a key, if it has values.
   *
   * @param key The key (any JSON value; tuples as arrays).
   * @returns The store, or `undefined` when the key has no values.
   */
  get(key: unknown): Store | undefined {
    const values = this.#data.get(keyText(key));
    return values ? new Store(values) : undefined;
  }

  /**
   * Whether a key has values.
   *
   * @param key The key (any JSON value; tuples as arrays).
   * @returns Whether it has values.
   */
  has(key: unknown): boolean {
    return this.#data.has(keyText(key));
  }

  /**
   * The keys.
   *
   * @returns A new array of the keys.
   */
  keys(): unknown[] {
    return [...this.#keys.values()];
  }

  /**
   * Key and store pairs.
   *
   * @returns A new array of `[key, store]` pairs.
   */
  entries(): Array<[unknown, Store]> {
    return [...this.#data].map(([text, values]) => [this.#keys.get(text), new Store(values)]);
  }

  /**
   * Internal: replaces everything one object contributes.
   *
   * @param objectKey The object (its uid or namespace/name).
   * @param pairs Its new key and value pairs.
   */
  replace(objectKey: string, pairs: ReadonlyArray<readonly [unknown, unknown]>): void {
    this.remove(objectKey);
    for (const [key, value] of pairs) {
      const text = keyText(key);
      let byObject = this.#data.get(text);
      if (!byObject) {
        byObject = new Map();
        this.#data.set(text, byObject);
        this.#keys.set(text, key === undefined ? null : key);
      }
      const list = byObject.get(objectKey) ?? [];
      list.push(value);
      byObject.set(objectKey, list);
    }
  }

  /**
   * Internal: removes everything one object contributes.
   *
   * @param objectKey The object (its uid or namespace/name).
   */
  remove(objectKey: string): void {
    for (const [text, byObject] of this.#data) {
      if (byObject.delete(objectKey) && byObject.size === 0) {
        this.#data.delete(text);
        this.#keys.delete(text);
      }
    }
  }
}

/**
 * Turns an index handler's result into key→value pairs.
 *
 * @param result What the index handler returned.
 * @returns The pairs, or `undefined` for "do not index" (the earlier values are kept).
 */
export function indexPairs(result: unknown): Array<readonly [unknown, unknown]> | undefined {
  if (result === undefined || result === null) return undefined;
  if (result instanceof Map) return [...result.entries()];
  if (
    isMapping(result) &&
    (Object.getPrototypeOf(result) === Object.prototype || Object.getPrototypeOf(result) === null)
  ) {
    return Object.entries(result);
  }
  return [[null, result]];
}

/** The indices of one operator, by handler id, with per-object error exclusions. */
export class Indexers {
  /** The indices by name (handler id), as handlers receive them. */
  readonly indices: Readonly<Record<string, Index>>;
  #excluded = new Map<string, number>(); // `${id} ${object}` → until (ms; Infinity = forever)

  /** @param ids The index handler ids. */
  constructor(ids: readonly string[]) {
    this.indices = Object.fromEntries(ids.map((id) => [id, new Index()]));
  }

  /**
   * Re-indexes one object with the resource's index handlers.
   * @param handlers The resource's index handlers.
   * @param objectKey The object's key (uid).
   * @param body The object; `deleted` removes it from every index.
   * @param deleted Whether the object is gone.
   * @param context Builds the handler context.
   * @param logger The object's logger.
   */
  async index(
    handlers: readonly IndexingHandler[],
    objectKey: string,
    body: KubeObject,
    deleted: boolean,
    context: (handler: IndexingHandler) => ResourceContext,
    logger: Logger,
  ): Promise<void> {
    for (const handler of handlers) {
      const index = this.indices[handler.id]!;
      const exclusion = `${handler.id} ${objectKey}`;
      const ctx = context(handler);
      if (deleted || !matchesBodyFilters(handler, body, () => ctx)) {
        index.remove(objectKey);
        this.#excluded.delete(exclusion);
        continue;
      }
      const until = this.#excluded.get(exclusion);
      if (until !== undefined && until > Date.now()) continue;
      const outcome = await execute(
        { ...handler, errors: handler.errors ?? ("ignored" as ErrorsMode) },
        { started: new Date(), retries: 0 },
        () =>
          withHandledObject({ body }, () => (handler.fn as (c: ResourceContext) => unknown)(ctx)),
      );
      switch (outcome.kind) {
        case "success": {
          this.#excluded.delete(exclusion);
          const pairs = indexPairs(outcome.result);
          if (pairs) index.replace(objectKey, pairs);
          break;
        }
        case "ignored":
          logger.exception(
            `Indexing handler '${handler.id}' failed; keeping the previous values.`,
            outcome.error,
          );
          break;
        case "temporary":
          index.remove(objectKey);
          this.#excluded.set(exclusion, Date.now() + (outcome.delay ?? 0) * 1000);
          logger.error(
            `Indexing handler '${handler.id}' failed temporarily: ${outcome.error.message}`,
          );
          break;
        case "permanent":
          index.remove(objectKey);
          this.#excluded.set(exclusion, Infinity);
          logger.error(
            `Indexing handler '${handler.id}' failed permanently: ${outcome.error.message}`,
          );
          break;
      }
    }
  }
}

/** A gate that opens when every indexed stream has listed (and indexed) its objects once. */
export class IndexingReadiness {
  #pending = new Set<string>();
  #open = false;
  #waiters: Array<() => void> = [];

  /** Whether the gate is open. */
  get ready(): boolean {
    return this.#open;
  }

  /** Registers a stream that must list before the gate opens. */
  expect(stream: string): void {
    if (!this.#open) this.#pending.add(stream);
  }

  /** Marks a stream as listed and indexed; opens the gate when none is pending. */
  listed(stream: string): void {
    this.#pending.delete(stream);
    this.check();
  }

  /** Opens the gate when nothing is pending (call once all streams are registered). */
  check(): void {
    if (this.#open || this.#pending.size) return;
    this.#open = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves when the gate is open (or the signal aborts). */
  wait(signal: AbortSignal): Promise<void> {
    if (this.#open || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#waiters.push(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
