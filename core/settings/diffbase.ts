/**
 * Diff-base storages: the last handled "essence" of an object, to diff new versions against.
 *
 * The essence is what counts as an essential change: the body without `apiVersion`, `kind`,
 * `status` and all of `metadata` except `labels` and `annotations`; minus the annotations of any
 * Kopf-based operator (prefixes `kopf.zalando.org`, its subdomains, and any prefix carrying a
 * `<prefix>/kopf-managed` marker) and `kubectl.kubernetes.io/last-applied-configuration`; plus
 * any extra fields handlers watch (e.g. `status.phase` for a field handler); minus configured
 * ignored fields; with empty stanzas dropped. Key order follows the body's, with `metadata`
 * moved after the other fields, as in Kopf.
 *
 * Formats are Kopf's, so objects handled by Python Kopf look handled to us and vice versa:
 * - {@linkcode AnnotationsDiffBaseStorage} (the default):
 *   `metadata.annotations["kopf.zalando.org/last-handled-configuration"]` = compact JSON of the
 *   essence as Python prints it (see `_pyjson.ts`) plus a trailing newline, like kubectl's own;
 * - {@linkcode StatusDiffBaseStorage}: `status.kopf.last-handled-configuration` = the same JSON
 *   without the newline.
 *
 * Not done here: deciding when to store (only after all handlers of a cause are done, and only
 * if the essence changed) — that is the reactor's job.
 * @module
 */

import {
  cherrypick,
  deepCopyWithout,
  deepEqual,
  ensure,
  type FieldPath,
  type FieldSpec,
  isMapping,
  type Mapping,
  parseField,
  remove,
  resolve,
} from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import { dumpCompact } from "./_pyjson.ts";
import { ANNOTATIONS_SIZE_LIMIT, annotationsExceed } from "./annotations_size.ts";
import {
  AnnotationKeys,
  type AnnotationKeysOptions,
  detectMarkedPrefixes,
  type Essence,
  isBookkeepingAnnotation,
  removeAnnotations,
  removeEmptyStanzas,
  storeMarker,
} from "./conventions.ts";

export type { Essence } from "./conventions.ts";
export { ANNOTATIONS_SIZE_LIMIT } from "./annotations_size.ts";

/** Top-level fields that are never part of an essence (labels and annotations are put back). */
const NON_ESSENTIAL: readonly string[] = Object.freeze([
  "apiVersion",
  "kind",
  "metadata",
  "status",
]);

/** Arguments of {@linkcode DiffBaseStorage.build}. */
export interface DiffBaseBuildArgs {
  /** The object. */
  readonly body: Mapping;
  /** Fields to keep although they would be dropped (e.g. `status.phase`). */
  readonly extraFields?: Iterable<FieldSpec>;
}

/** Arguments of {@linkcode DiffBaseStorage.fetch}. */
export interface DiffBaseFetchArgs {
  /** The object as last seen. */
  readonly body: Mapping;
}

/** Arguments of {@linkcode DiffBaseStorage.store}. */
export interface DiffBaseStoreArgs {
  /** The object as last seen. */
  readonly body: Mapping;
  /** The cycle's patch to write into. */
  readonly patch: Patch;
  /** The essence to store (as built by {@linkcode DiffBaseStorage.build}). */
  readonly essence: Essence;
  /** Where a storage reports a problem the operator should hear of (e.g. a size fallback). */
  readonly warn?: (message: string) => void;
}

/** Options common to all diff-base storages. */
export interface DiffBaseStorageOptions {
  /**
   * Fields removed from every essence, so their changes never count (e.g. `spec.replicas`).
   * @default {[]}
   */
  readonly ignoredFields?: Iterable<FieldSpec>;
}

/**
 * The interface of all diff-base storages; extend it for a custom one. `build` is usually
 * inherited as is; `fetch` and `store` define where the essence lives.
 */
export abstract class DiffBaseStorage {
  /** Fields removed from every essence. */
  readonly ignoredFields: readonly FieldSpec[];

  /**
   * Set up the common essence rules.
   * @param options The ignored fields.
   */
  constructor(options: DiffBaseStorageOptions = {}) {
    this.ignoredFields = Object.freeze([...(options.ignoredFields ?? [])]);
  }

  /**
   * Compute the essence of an object (see the module description for the exact rules).
   * @param args The body and the extra fields to keep.
   * @returns A new essence, sharing nothing with the body.
   */
  build({ body, extraFields }: DiffBaseBuildArgs): Essence {
    // Metadata (with its managed fields) and status are the bulk of a body: not copied at all.
    const essence: Essence = deepCopyWithout(body, NON_ESSENTIAL);
    cherrypick(body, essence, ["metadata.labels", "metadata.annotations"]);

    const annotations = resolve(essence, "metadata.annotations");
    if (isMapping(annotations)) {
      const keys = Object.keys(annotations);
      const foreign = detectMarkedPrefixes(keys);
      for (const key of keys) if (isBookkeepingAnnotation(key, foreign)) delete annotations[key];
    }

    cherrypick(body, essence, extraFields);
    removeEmptyStanzas(essence);
    for (const field of this.ignoredFields) {
      if (parseField(field).length) remove(essence, field);
    }
    this.clean(essence, body);
    return essence;
  }

  /**
   * Removes this storage's own traces from an essence built with the common rules (e.g. its
   * annotation). Storages override this rather than {@link build}: then the essence is built
   * once for several storages, and compared cheaply ({@link quickSameEssence}).
   * @param _essence The essence, changed in place.
   * @param _body The object it was built from.
   */
  clean(_essence: Essence, _body: Mapping): void {}

  /**
   * The annotations that {@link clean} removes from an object's essence (besides the common
   * rules'), for {@link quickSameEssence}.
   * @param _body The object.
   * @returns Annotation keys.
   */
  droppedAnnotations(_body: Mapping): readonly string[] {
    return [];
  }

  /**
   * Whether two versions of one object certainly have the same essence, told without building
   * either: the same fields outside `metadata` and `status` — taken as given when
   * `metadata.generation` is the same (the API server raises it for every change outside
   * `metadata`; status changes through a `/status` subresource do not count, and status is not
   * in the essence), compared otherwise (a CRD without a status subresource raises it for status
   * changes too) — the same labels, and the same annotations apart from those every essence
   * drops. `false` means "not known": build both and compare. Storages that change how essences
   * are built answer `false` always.
   *
   * @param a One version of the object.
   * @param b Another version.
   * @param extraFields The extra fields kept in the essence (then nothing is told cheaply).
   * @returns `true` only when the essences are certainly equal.
   */
  quickSameEssence(
    a: Mapping,
    b: Mapping,
    extraFields: Iterable<FieldSpec> | undefined = undefined,
  ): boolean {
    if (!this.keepsCommonRules()) return false;
    if (extraFields && (Array.isArray(extraFields) ? extraFields : [...extraFields]).length) {
      return false;
    }
    const ma = isMapping(a["metadata"]) ? a["metadata"] : {};
    const mb = isMapping(b["metadata"]) ? b["metadata"] : {};
    const ga = ma["generation"], gb = mb["generation"];
    if ((typeof ga !== "number" || ga !== gb) && !sameOutsideMetadata(a, b)) return false;
    if (!deepEqual(ma["labels"] ?? {}, mb["labels"] ?? {})) return false;
    return sameEssentialAnnotations(
      essentialAnnotations(ma["annotations"], this.droppedAnnotations(a)),
      essentialAnnotations(mb["annotations"], this.droppedAnnotations(b)),
    );
  }

  /** Whether this storage builds essences with the common rules alone (build not overridden). */
  protected keepsCommonRules(): boolean {
    return this.build === DiffBaseStorage.prototype.build;
  }

  /**
   * Read the stored essence, or `null` if there is none.
   *
   * @param args The object as last seen.
   * @returns The stored essence, or `null`.
   */
  abstract fetch(args: DiffBaseFetchArgs): Essence | null;

  /**
   * Whether an essence may be stored on the object, told cheaply (without parsing it): `false`
   * only when {@link fetch} would certainly return `null`. The default asks `fetch`; storages
   * override it with a look at where they store.
   *
   * @param args The object as last seen.
   * @returns `false` when no essence is stored.
   */
  mayHold(args: DiffBaseFetchArgs): boolean {
    return this.fetch(args) !== null;
  }

  /**
   * Write the essence into the patch.
   *
   * @param args The object as last seen, the patch, and the essence to store.
   */
  abstract store(args: DiffBaseStoreArgs): void;
}

/** Options for {@linkcode AnnotationsDiffBaseStorage}. */
export interface AnnotationsDiffBaseStorageOptions
  extends DiffBaseStorageOptions, AnnotationKeysOptions {
  /**
   * The record key (the annotation name before shortening).
   * @default {"last-handled-configuration"}
   */
  readonly key?: string;
  /**
   * Where the essence goes when the annotation would take the object's annotations over the
   * API server's limit (262,144 bytes of keys and values), so that a large object is still
   * handled once and its changes detected; `null` sends it anyway (the API server then rejects
   * the patch, as with Kopf). Not in Kopf.
   * @default {new StatusDiffBaseStorage()}
   */
  readonly overflow?: StatusDiffBaseStorage | null;
}

/**
 * The essence as compact JSON in an annotation (Kopf's default).
 * @example The default annotation
 * ```ts
 * import { AnnotationsDiffBaseStorage } from "./diffbase.ts";
 * import { Patch } from "../structs/patches.ts";
 * const storage = new AnnotationsDiffBaseStorage();
 * const body = { kind: "KopfExample", metadata: { name: "x" }, spec: { size: 1 } };
 * const patch = new Patch();
 * storage.store({ body, patch, essence: storage.build({ body }) });
 * patch.annotations["kopf.zalando.org/last-handled-configuration"]; // '{"spec":{"size":1}}\n'
 * ```
 */
export class AnnotationsDiffBaseStorage extends DiffBaseStorage {
  /** The key former (prefix, V1 flag). */
  readonly keys: AnnotationKeys;
  /** The record key. */
  readonly key: string;

  /**
   * Create the storage.
   * @param options Prefix, key, V1 keys, ignored fields.
   * @throws {RangeError} If the prefix is empty.
   */
  constructor(options: AnnotationsDiffBaseStorageOptions = {}) {
    super(options);
    this.keys = new AnnotationKeys(options);
    this.key = options.key ?? "last-handled-configuration";
    this.overflow = options.overflow === undefined ? new StatusDiffBaseStorage() : options.overflow;
  }

  /** Where the essence goes when the annotation would be too large (see the options). */
  readonly overflow: StatusDiffBaseStorage | null;

  /** The annotations prefix. */
  get prefix(): string {
    return this.keys.prefix;
  }

  /**
   * The common essence, minus this storage's own annotations.
   *
   * @param args The object and the extra fields to keep.
   * @returns A new essence, sharing nothing with the body.
   */
  override clean(essence: Essence, body: Mapping): void {
    removeAnnotations(essence, this.keys.make(this.key, body));
    removeEmptyStanzas(essence);
  }

  /**
   * This storage's own annotation keys.
   * @param body The object.
   * @returns The keys.
   */
  override droppedAnnotations(body: Mapping): readonly string[] {
    return this.keys.make(this.key, body);
  }

  /**
   * Parse the first key version that holds an essence (V2, then V1).
   * @param args The object as last seen.
   * @returns The stored essence, or `null`.
   * @throws {SyntaxError} If the annotation is not JSON (as Kopf, rather than re-creating).
   */
  fetch({ body }: DiffBaseFetchArgs): Essence | null {
    for (const fullKey of this.keys.make(this.key, body)) {
      const encoded = resolve(body, ["metadata", "annotations", fullKey]);
      const decoded: unknown = typeof encoded === "string" ? JSON.parse(encoded) : null;
      if (isMapping(decoded)) return decoded;
    }
    return this.overflow?.fetch({ body }) ?? null;
  }

  /**
   * Whether any key version holds a string (or the overflow storage may hold an essence).
   * @param args The object as last seen.
   * @returns `false` when no essence is stored.
   */
  override mayHold({ body }: DiffBaseFetchArgs): boolean {
    for (const fullKey of this.keys.make(this.key, body)) {
      if (typeof resolve(body, ["metadata", "annotations", fullKey]) === "string") return true;
    }
    return this.overflow?.mayHold({ body }) ?? false;
  }

  /**
   * Write the essence under all key versions, plus the prefix marker for custom prefixes.
   *
   * @param args The object as last seen, the patch, and the essence to store.
   */
  store({ body, patch, essence, warn }: DiffBaseStoreArgs): void {
    const encoded = `${dumpCompact(essence)}\n`;
    const keys = this.keys.make(this.key, body);
    const overflow = this.overflow;
    if (overflow && annotationsExceed(body, patch, new Map(keys.map((k) => [k, encoded])))) {
      // Only one place may hold an essence, or a stale annotation would be read first.
      for (const fullKey of keys) {
        if (resolve(body, ["metadata", "annotations", fullKey]) !== undefined) {
          ensure(patch.body, ["metadata", "annotations", fullKey], null);
        }
      }
      overflow.store({ body, patch, essence });
      warn?.(
        `The diff-base (${encoded.length} characters) would take the object's annotations over ` +
          `the API server's limit of ${ANNOTATIONS_SIZE_LIMIT} bytes; it is kept in ` +
          `${overflow.field.join(".")} instead (the CRD's schema must keep that field).`,
      );
      return;
    }
    for (const fullKey of keys) ensure(patch.body, ["metadata", "annotations", fullKey], encoded);
    if (overflow && resolve(body, overflow.field) !== undefined) {
      ensure(patch.body, overflow.field, null); // back from an overflow: one place only
    }
    storeMarker(this.prefix, patch, body);
  }
}

/** Options for {@linkcode StatusDiffBaseStorage}. */
export interface StatusDiffBaseStorageOptions extends DiffBaseStorageOptions {
  /**
   * The name substituted for `{name}` in the field template.
   * @default {"kopf"}
   */
  readonly name?: string;
  /**
   * Where the essence lives; a string may contain `{name}`.
   * @default {"status.{name}.last-handled-configuration"}
   */
  readonly field?: FieldSpec;
}

/**
 * The essence as a JSON string in the status (a string, so merge patches replace it whole).
 * Caveat: structural CRD schemas prune unknown status fields.
 */
export class StatusDiffBaseStorage extends DiffBaseStorage {
  /** The parsed field. */
  readonly field: FieldPath;

  /**
   * Create the storage.
   * @param options Name, field template, ignored fields.
   */
  constructor(options: StatusDiffBaseStorageOptions = {}) {
    super(options);
    const field = options.field ?? "status.{name}.last-handled-configuration";
    const name = options.name ?? "kopf";
    this.field = parseField(typeof field === "string" ? field.replaceAll("{name}", name) : field);
  }

  /**
   * The common essence, minus this storage's own field (if extra fields brought it in).
   *
   * @param args The object and the extra fields to keep.
   * @returns A new essence, sharing nothing with the body.
   */
  override clean(essence: Essence): void {
    if (this.field.length) remove(essence, this.field);
  }

  /**
   * Parse the stored JSON string; a missing or non-string field counts as absent.
   * @param args The object as last seen.
   * @returns The stored essence, or `null`.
   * @throws {SyntaxError} If the string is not JSON.
   */
  fetch({ body }: DiffBaseFetchArgs): Essence | null {
    const encoded = resolve(body, this.field);
    const decoded: unknown = typeof encoded === "string" ? JSON.parse(encoded) : null;
    return isMapping(decoded) ? decoded : null;
  }

  /**
   * Whether the field holds a string.
   * @param args The object as last seen.
   * @returns `false` when no essence is stored.
   */
  override mayHold({ body }: DiffBaseFetchArgs): boolean {
    return typeof resolve(body, this.field) === "string";
  }

  /**
   * Write the essence as a compact JSON string (no trailing newline).
   *
   * @param args The object as last seen, the patch, and the essence to store.
   */
  store({ patch, essence }: DiffBaseStoreArgs): void {
    ensure(patch.body, this.field, dumpCompact(essence));
  }
}

/** Several storages as one: reads from the first that has an essence, writes to all. */
export class MultiDiffBaseStorage extends DiffBaseStorage {
  /** The storages, in reading priority. */
  readonly storages: readonly DiffBaseStorage[];

  /**
   * Combine storages.
   * @param storages The storages, in reading priority.
   */
  constructor(storages: readonly DiffBaseStorage[]) {
    super();
    this.storages = Object.freeze([...storages]);
  }

  /** Whether every storage builds with the common rules alone. */
  protected override keepsCommonRules(): boolean {
    return this.build === MultiDiffBaseStorage.prototype.build &&
      this.storages.every((storage) => storage.build === DiffBaseStorage.prototype.build);
  }

  /**
   * Every storage's own annotation keys.
   * @param body The object.
   * @returns The keys.
   */
  override droppedAnnotations(body: Mapping): readonly string[] {
    return this.storages.flatMap((storage) => storage.droppedAnnotations(body));
  }

  /**
   * The common essence, then cleaned by every storage in turn (each sees it as a body).
   *
   * @param args The object and the extra fields to keep.
   * @returns A new essence, sharing nothing with the body.
   */
  override build(args: DiffBaseBuildArgs): Essence {
    const extraFields = [...(args.extraFields ?? [])];
    return this.storages.reduce((essence, storage, i) => {
      if (storage.build !== DiffBaseStorage.prototype.build) {
        return storage.build({ body: essence, extraFields });
      }
      // The common rules are idempotent: rebuilding the essence with them for every storage (a
      // cycle's biggest cost) comes down to dropping the stanzas that the previous storage
      // emptied, then this storage's ignored fields and own traces.
      if (i > 0) removeEmptyStanzas(essence);
      for (const field of storage.ignoredFields) {
        if (parseField(field).length) remove(essence, field);
      }
      storage.clean(essence, essence);
      return essence;
    }, super.build({ body: args.body, extraFields }));
  }

  /**
   * The first essence found, in storage order.
   *
   * @param args The object as last seen.
   * @returns The stored essence, or `null`.
   */
  fetch(args: DiffBaseFetchArgs): Essence | null {
    for (const storage of this.storages) {
      const essence = storage.fetch(args);
      if (essence !== null) return essence;
    }
    return null;
  }

  /**
   * Whether any of the storages may hold an essence.
   * @param args The object as last seen.
   * @returns `false` when no essence is stored.
   */
  override mayHold(args: DiffBaseFetchArgs): boolean {
    return this.storages.some((storage) => storage.mayHold(args));
  }

  /**
   * Store in every storage.
   *
   * @param args The object as last seen, the patch, and the essence to store.
   */
  store(args: DiffBaseStoreArgs): void {
    for (const storage of this.storages) storage.store(args);
  }
}

/**
 * The annotations an essence keeps: not operators' (marked prefixes), not the ignored ones,
 * not those a storage drops.
 */
function essentialAnnotations(
  annotations: unknown,
  dropped: readonly string[],
): Map<string, unknown> {
  const kept = new Map<string, unknown>();
  if (!isMapping(annotations)) return kept;
  const keys = Object.keys(annotations);
  const foreign = detectMarkedPrefixes(keys);
  for (const key of keys) {
    if (isBookkeepingAnnotation(key, foreign) || dropped.includes(key)) continue;
    kept.set(key, annotations[key]);
  }
  return kept;
}

/** Whether two bodies have equal top-level fields, apart from those no essence holds. */
function sameOutsideMetadata(a: Mapping, b: Mapping): boolean {
  const essential = (body: Mapping, key: string) =>
    Object.hasOwn(body, key) && !NON_ESSENTIAL.includes(key);
  const value = (body: Mapping, key: string) => Object.hasOwn(body, key) ? body[key] ?? null : null;
  for (const key in a) {
    if (essential(a, key) && !deepEqual(a[key] ?? null, value(b, key))) return false;
  }
  // Keys only `b` has (the common ones were compared above): absent and null are the same.
  for (const key in b) {
    if (essential(b, key) && !Object.hasOwn(a, key) && b[key] != null) return false;
  }
  return true;
}

/** Whether two sets of essential annotations are the same. */
function sameEssentialAnnotations(a: Map<string, unknown>, b: Map<string, unknown>): boolean {
  if (a.size !== b.size) return false;
  for (const [key, value] of a) if (b.get(key) !== value) return false;
  return true;
}
