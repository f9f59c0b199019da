/**
 * Persistence in `status` first: the framework's own state (handler progress and the diff-base)
 * is written only under `status.kopf`, while Kopf's annotations are still read (and cleared once
 * the state moved), so objects handled before — by Kopf or by this framework's default — keep
 * their state.
 *
 * Why: on a CRD with a status subresource, the handlers' results go to `/status` while the
 * annotations go to the object itself, so with the default storages a handled create or update
 * costs two writes; with both in `status` it costs one. The price is interoperability: Python
 * Kopf's default progress storage reads status as a fallback, but its default diff-base storage
 * reads only the annotation, so a Python Kopf operator with default settings that takes over
 * such objects sees no diff-base and handles them as new, unless it is configured with Kopf's
 * `MultiDiffBaseStorage([StatusDiffBaseStorage(), AnnotationsDiffBaseStorage()])` (see
 * docs/persistence.md). Opt-in; the default stays Kopf's.
 *
 * The CRD's schema must keep `status.kopf` (`x-kubernetes-preserve-unknown-fields: true` on
 * `status`, or the fields declared), or the state is pruned away by the API server.
 * @module
 */

import { ensure, resolve } from "../structs/dicts.ts";
import type { AnnotationKeysOptions } from "./conventions.ts";
import {
  AnnotationsDiffBaseStorage,
  type DiffBaseStoreArgs,
  MultiDiffBaseStorage,
  StatusDiffBaseStorage,
  type StatusDiffBaseStorageOptions,
} from "./diffbase.ts";
import {
  AnnotationsProgressStorage,
  MultiProgressStorage,
  type SmartProgressStorageOptions,
  StatusProgressStorage,
} from "./progress.ts";

/** Annotations that are read and purged, never written (migration from Kopf's default). */
class LegacyAnnotationsProgressStorage extends AnnotationsProgressStorage {
  override store(): void {}
  override touch(): void {}
}

/**
 * Handler progress under `status.kopf.progress.<id>`; records in Kopf's annotations are read
 * when status has none, and purged with the status records.
 *
 * @example Keep the framework's state in status (with {@linkcode StatusFirstDiffBaseStorage})
 * ```ts
 * import { on, StatusFirstDiffBaseStorage, StatusFirstProgressStorage } from "@kopf/ts";
 * on.startup(function configure({ settings }) {
 *   settings.persistence.progressStorage = new StatusFirstProgressStorage();
 *   settings.persistence.diffbaseStorage = new StatusFirstDiffBaseStorage();
 * });
 * ```
 */
export class StatusFirstProgressStorage extends MultiProgressStorage {
  /**
   * Create the storage.
   * @param options The status field templates and the annotations' prefix (to migrate from).
   */
  constructor(options: SmartProgressStorageOptions = {}) {
    super([new StatusProgressStorage(options), new LegacyAnnotationsProgressStorage(options)]);
  }
}

/** Options for {@linkcode StatusFirstDiffBaseStorage}. */
export interface StatusFirstDiffBaseStorageOptions
  extends StatusDiffBaseStorageOptions, AnnotationKeysOptions {
  /**
   * The record key of the annotation migrated from.
   * @default {"last-handled-configuration"}
   */
  readonly key?: string;
}

/**
 * The diff-base under `status.kopf.last-handled-configuration` (a JSON string); Kopf's
 * `last-handled-configuration` annotation is read when status has none, and removed (in the same
 * patch) the first time the essence is stored in status, so that only one place holds it.
 */
export class StatusFirstDiffBaseStorage extends MultiDiffBaseStorage {
  /** Where the essence is written. */
  readonly status: StatusDiffBaseStorage;
  /** Where it is read from when status has none (Kopf's default place). */
  readonly annotations: AnnotationsDiffBaseStorage;

  /**
   * Create the storage.
   * @param options The status field, the annotations' prefix and key, ignored fields.
   * @throws {RangeError} If the annotations' prefix is empty.
   */
  constructor(options: StatusFirstDiffBaseStorageOptions = {}) {
    const status = new StatusDiffBaseStorage(options);
    const annotations = new AnnotationsDiffBaseStorage({ ...options, overflow: null });
    super([status, annotations]);
    this.status = status;
    this.annotations = annotations;
  }

  /**
   * Write the essence to status, and remove a migrated annotation if the object has one.
   *
   * @param args The object as last seen, the patch, and the essence to store.
   */
  override store({ body, patch, essence }: DiffBaseStoreArgs): void {
    this.status.store({ body, patch, essence });
    for (const key of this.annotations.keys.make(this.annotations.key, body)) {
      const field = ["metadata", "annotations", key];
      if (resolve(body, field) !== undefined) ensure(patch.body, field, null);
    }
  }
}
