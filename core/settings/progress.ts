/**
 * Progress storages: where each handler's state lives between processing cycles of an object.
 *
 * A record per handler (started, retries, delays, outcome…) is read from the object's body and
 * written into the cycle's {@linkcode Patch}; storages never do I/O. Records are transient: the
 * caller purges them once all handlers of a cause are done. Each handler's record is atomic and
 * independent of the others, so several operators with distinct handler ids can share a place.
 *
 * Formats are Kopf's, so state is shared both ways with Python Kopf operators:
 * - {@linkcode AnnotationsProgressStorage}: `metadata.annotations["kopf.zalando.org/<id>"]` =
 *   compact JSON of the record with `null` fields omitted (see `conventions.ts` for the keys);
 * - {@linkcode StatusProgressStorage}: `status.kopf.progress.<id>` = the record as an object;
 * - {@linkcode SmartProgressStorage} (the default): reads annotations then status, writes only
 *   annotations, purges both — the end of Kopf's migration from status to annotations.
 *
 * Timestamps are ISO 8601 in UTC; current Kopf (checked: 1.45.2) writes
 * `2020-02-14T16:58:25.396364+00:00`, older versions wrote no offset; {@linkcode parseTimestamp}
 * reads both.
 * @module
 */

import {
  deepCopy,
  ensure,
  type FieldPath,
  type FieldSpec,
  has,
  isMapping,
  type Mapping,
  parseField,
  remove,
  resolve,
} from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import { dumpCompact } from "./_pyjson.ts";
import { orderRecord, type ProgressRecord } from "./_records.ts";
import {
  AnnotationKeys,
  type AnnotationKeysOptions,
  type Essence,
  removeAnnotations,
  removeEmptyStanzas,
  storeMarker,
} from "./conventions.ts";

export { formatTimestamp, parseTimestamp, type ProgressRecord } from "./_records.ts";

/** Arguments of {@linkcode ProgressStorage.fetch}. */
export interface ProgressFetchArgs {
  /** The record key: a handler id. */
  readonly key: string;
  /** The object as last seen. */
  readonly body: Mapping;
}

/** Arguments of {@linkcode ProgressStorage.store}. */
export interface ProgressStoreArgs extends ProgressFetchArgs {
  /** The record to store; `null` fields mean "not set". */
  readonly record: ProgressRecord;
  /** The cycle's patch to write into. */
  readonly patch: Patch;
}

/** Arguments of {@linkcode ProgressStorage.purge}. */
export interface ProgressPurgeArgs extends ProgressFetchArgs {
  /** The cycle's patch to write into. */
  readonly patch: Patch;
}

/** Arguments of {@linkcode ProgressStorage.touch}. */
export interface ProgressTouchArgs {
  /** The object as last seen. */
  readonly body: Mapping;
  /** The patch to write into. */
  readonly patch: Patch;
  /** The dummy value to set (any always-changing string), or `null` to remove the dummy. */
  readonly value: string | null;
}

/**
 * The interface of all progress storages; extend it for a custom one (e.g. an external store).
 *
 * Guarantees expected by the framework: `fetch` returns what an earlier `store` wrote (once the
 * patch is applied); `purge` makes the record absent; `touch` makes an unchanged object change
 * (to wake its own watch) or removes that dummy change; `clear` removes the storage's own traces
 * from an essence, so progress never looks like an essential change.
 */
export abstract class ProgressStorage {
  /**
   * Read a handler's record from the object, or `null` if there is none.
   *
   * @param args The record key (a handler id) and the object as last seen.
   * @returns The record, or `null`.
   */
  abstract fetch(args: ProgressFetchArgs): ProgressRecord | null;
  /**
   * Write a handler's record into the patch.
   *
   * @param args The record key, the record, the object as last seen, and the patch.
   */
  abstract store(args: ProgressStoreArgs): void;
  /**
   * Remove a handler's record via the patch (and cancel a pending write of it).
   *
   * @param args The record key, the object as last seen, and the patch.
   */
  abstract purge(args: ProgressPurgeArgs): void;
  /**
   * Set or remove a dummy field via the patch, to provoke a watch event.
   *
   * @param args The object as last seen, the patch, and the dummy value (or `null`).
   */
  abstract touch(args: ProgressTouchArgs): void;
  /**
   * Remove this storage's own fields from an essence.
   * @param essence The essence; not modified.
   * @returns A cleaned copy.
   */
  clear(essence: Essence): Essence {
    return deepCopy(essence);
  }
  /** Persist anything batched by `store`/`purge` (for storages that batch); a no-op here. */
  flush(): void {}
}

/** Options for {@linkcode AnnotationsProgressStorage}. */
export interface AnnotationsProgressStorageOptions extends AnnotationKeysOptions {
  /**
   * Store `null` fields too (they are omitted by default).
   * @default {false}
   */
  readonly verbose?: boolean;
  /**
   * The record key of the dummy annotation used by `touch` (dashed, not dotted).
   * @default {"touch-dummy"}
   */
  readonly touchKey?: string;
}

/**
 * Progress records as compact-JSON annotations, one per handler (and per key version).
 * @example The annotation written for a handler
 * ```ts
 * import { AnnotationsProgressStorage } from "./progress.ts";
 * import { Patch } from "../structs/patches.ts";
 * const patch = new Patch();
 * new AnnotationsProgressStorage().store({ key: "create_fn", record: { retries: 1 }, body: {}, patch });
 * patch.annotations["kopf.zalando.org/create_fn"]; // '{"retries":1}'
 * ```
 */
export class AnnotationsProgressStorage extends ProgressStorage {
  /** The key former (prefix, V1 flag). */
  readonly keys: AnnotationKeys;
  /** Whether `null` fields are stored. */
  readonly verbose: boolean;
  /** The record key of the touch dummy. */
  readonly touchKey: string;

  /**
   * Create the storage.
   * @param options Prefix, V1 keys, verbosity, touch key.
   * @throws {RangeError} If the prefix is empty.
   */
  constructor(options: AnnotationsProgressStorageOptions = {}) {
    super();
    this.keys = new AnnotationKeys(options);
    this.verbose = options.verbose ?? false;
    this.touchKey = options.touchKey ?? "touch-dummy";
  }

  /** The annotations prefix. */
  get prefix(): string {
    return this.keys.prefix;
  }

  /**
   * Read the first key version that holds a record (V2, then V1).
   * @param args The record key (a handler id) and the object as last seen.
   * @returns The record, or `null`.
   * @throws {SyntaxError} If the annotation is not JSON.
   */
  fetch({ key, body }: ProgressFetchArgs): ProgressRecord | null {
    for (const fullKey of this.keys.make(key, body)) {
      const encoded = resolve(body, ["metadata", "annotations", fullKey]);
      const decoded: unknown = typeof encoded === "string" ? JSON.parse(encoded) : null;
      if (isMapping(decoded)) return decoded as ProgressRecord;
    }
    return null;
  }

  /**
   * Write the record under all key versions, plus the prefix marker for custom prefixes.
   *
   * @param args The record key, the record, the object as last seen, and the patch.
   */
  store({ key, record, body, patch }: ProgressStoreArgs): void {
    const fields = Object.entries(orderRecord(record)).filter(([, v]) =>
      this.verbose || v !== null
    );
    const encoded = dumpCompact(Object.fromEntries(fields));
    for (const fullKey of this.keys.make(key, body)) {
      ensure(patch.body, ["metadata", "annotations", fullKey], encoded);
    }
    storeMarker(this.prefix, patch, body);
  }

  /**
   * Null the record's annotations that exist, and drop pending writes of those that do not.
   *
   * @param args The record key, the object as last seen, and the patch.
   */
  purge({ key, body, patch }: ProgressPurgeArgs): void {
    for (const fullKey of this.keys.make(key, body)) {
      purgeField(body, patch, ["metadata", "annotations", fullKey]);
    }
  }

  /**
   * Set the touch dummy to `value` (or remove it for `null`) if it differs from the body.
   *
   * @param args The object as last seen, the patch, and the dummy value (or `null`).
   */
  touch({ body, patch, value }: ProgressTouchArgs): void {
    for (const fullKey of this.keys.make(this.touchKey, body)) {
      const field = ["metadata", "annotations", fullKey];
      if ((resolve(body, field) ?? null) !== value) {
        ensure(patch.body, field, value);
        storeMarker(this.prefix, patch, body);
      }
    }
  }

  /**
   * Remove all annotations of this prefix from the essence (progress is not an essential change).
   *
   * @param essence The essence; not modified.
   * @returns A cleaned copy.
   */
  override clear(essence: Essence): Essence {
    const cleaned = super.clear(essence);
    const annotations = resolve(cleaned, "metadata.annotations");
    const keys = isMapping(annotations) ? Object.keys(annotations) : [];
    removeAnnotations(cleaned, keys.filter((k) => k.startsWith(`${this.prefix}/`)));
    removeEmptyStanzas(cleaned);
    return cleaned;
  }
}

/** Options for {@linkcode StatusProgressStorage}. */
export interface StatusProgressStorageOptions {
  /**
   * The name substituted for `{name}` in the field templates.
   * @default {"kopf"}
   */
  readonly name?: string;
  /**
   * Where the records live; a string may contain `{name}`.
   * @default {"status.{name}.progress"}
   */
  readonly field?: FieldSpec;
  /**
   * Where the touch dummy lives; a string may contain `{name}`.
   * @default {"status.{name}.dummy"}
   */
  readonly touchField?: FieldSpec;
}

/**
 * Progress records as objects under `status.kopf.progress.<id>` (Kopf's legacy default).
 *
 * Caveat: CRDs with structural schemas prune unknown status fields unless the schema has
 * `x-kubernetes-preserve-unknown-fields: true`, so the records may silently vanish.
 */
export class StatusProgressStorage extends ProgressStorage {
  /** The parsed field of the records. */
  readonly field: FieldPath;
  /** The parsed field of the touch dummy. */
  readonly touchField: FieldPath;

  /**
   * Create the storage.
   * @param options Name and field templates.
   */
  constructor(options: StatusProgressStorageOptions = {}) {
    super();
    const name = options.name ?? "kopf";
    this.field = templateField(options.field ?? "status.{name}.progress", name);
    this.touchField = templateField(options.touchField ?? "status.{name}.dummy", name);
  }

  /**
   * Read the record at `<field>.<key>`; corrupted (non-object) containers count as absent.
   *
   * @param args The record key (a handler id) and the object as last seen.
   * @returns The record, or `null`.
   */
  fetch({ key, body }: ProgressFetchArgs): ProgressRecord | null {
    const record = resolve(body, [...this.field, key]);
    return isMapping(record) ? record as ProgressRecord : null;
  }

  /**
   * Write the whole record, `null` fields included (they delete stale fields in a merge).
   *
   * @param args The record key, the record, the object as last seen, and the patch.
   */
  store({ key, record, patch }: ProgressStoreArgs): void {
    ensure(patch.body, [...this.field, key], { ...orderRecord(record) });
  }

  /**
   * Null the record if it exists, and drop a pending write of it if not.
   *
   * @param args The record key, the object as last seen, and the patch.
   */
  purge({ key, body, patch }: ProgressPurgeArgs): void {
    purgeField(body, patch, [...this.field, key]);
  }

  /**
   * Set the dummy field to `value` (or remove it for `null`) if it differs from the body.
   *
   * @param args The object as last seen, the patch, and the dummy value (or `null`).
   */
  touch({ body, patch, value }: ProgressTouchArgs): void {
    if ((resolve(body, this.touchField) ?? null) !== value) {
      ensure(patch.body, this.touchField, value);
    }
  }

  /**
   * Remove the records' field from the essence.
   *
   * @param essence The essence; not modified.
   * @returns A cleaned copy.
   */
  override clear(essence: Essence): Essence {
    const cleaned = super.clear(essence);
    if (this.field.length) remove(cleaned, this.field);
    removeEmptyStanzas(cleaned);
    return cleaned;
  }
}

/** A status storage that only reads and purges: it never writes records or touches. */
class ReadOnlyStatusProgressStorage extends StatusProgressStorage {
  override store(): void {}
  override touch(): void {}
}

/** Several storages as one: reads from the first that has a record, writes to all. */
export class MultiProgressStorage extends ProgressStorage {
  /** The storages, in reading priority. */
  readonly storages: readonly ProgressStorage[];

  /**
   * Combine storages.
   * @param storages The storages, in reading priority.
   */
  constructor(storages: readonly ProgressStorage[]) {
    super();
    this.storages = Object.freeze([...storages]);
  }

  /**
   * The first record found, in storage order.
   *
   * @param args The record key (a handler id) and the object as last seen.
   * @returns The record, or `null`.
   */
  fetch(args: ProgressFetchArgs): ProgressRecord | null {
    for (const storage of this.storages) {
      const record = storage.fetch(args);
      if (record !== null) return record;
    }
    return null;
  }

  /**
   * Store in every storage.
   *
   * @param args The record key, the record, the object as last seen, and the patch.
   */
  store(args: ProgressStoreArgs): void {
    for (const storage of this.storages) storage.store(args);
  }

  /**
   * Purge from every storage.
   *
   * @param args The record key, the object as last seen, and the patch.
   */
  purge(args: ProgressPurgeArgs): void {
    for (const storage of this.storages) storage.purge(args);
  }

  /**
   * Touch in every storage.
   *
   * @param args The object as last seen, the patch, and the dummy value (or `null`).
   */
  touch(args: ProgressTouchArgs): void {
    for (const storage of this.storages) storage.touch(args);
  }

  /**
   * Let every storage clean the essence in turn.
   *
   * @param essence The essence; not modified.
   * @returns A cleaned copy.
   */
  override clear(essence: Essence): Essence {
    return this.storages.reduce((current, storage) => storage.clear(current), essence);
  }

  /** Flush every storage. */
  override flush(): void {
    for (const storage of this.storages) storage.flush();
  }
}

/** Options for {@linkcode SmartProgressStorage}: those of both underlying storages. */
export interface SmartProgressStorageOptions
  extends AnnotationsProgressStorageOptions, StatusProgressStorageOptions {}

/**
 * The default: annotations first, then the legacy status records (read and purged, never
 * written), so objects handled by older Kopf versions keep their state.
 */
export class SmartProgressStorage extends MultiProgressStorage {
  /**
   * Create the default storage.
   * @param options Options of the annotations and status storages.
   */
  constructor(options: SmartProgressStorageOptions = {}) {
    super([new AnnotationsProgressStorage(options), new ReadOnlyStatusProgressStorage(options)]);
  }
}

/** Kopf's purge rule: null a field present in the body; else drop a pending write of it. */
function purgeField(body: Mapping, patch: Patch, field: FieldPath): void {
  if (has(body, field)) ensure(patch.body, field, null);
  else if (has(patch.body, field)) remove(patch.body, field);
}

function templateField(field: FieldSpec, name: string): FieldPath {
  return parseField(typeof field === "string" ? field.replaceAll("{name}", name) : field);
}
