/**
 * Naming conventions for the annotations the storages write, exactly as Kopf forms them, so that
 * state written by Python Kopf is found by us and vice versa.
 *
 * Terms: a *prefix* is the DNS-like part before `/` (`kopf.zalando.org`), a *name* is the part
 * after it, a *key* is the whole annotation key. Kubernetes limits names to 63 characters and
 * allows only `[-._a-zA-Z0-9]` in them.
 *
 * Two key formats exist, both written by default for smooth upgrades and rollbacks:
 * - **V2** (current): the name alone is limited to 63 characters; a longer handler id is cut and
 *   suffixed with a hash of the *original* id.
 * - **V1** (legacy, `v1: true`): the whole key including the prefix was limited to 63
 *   characters; the hash is of the *sanitised* id. Written only when it differs from V2.
 *
 * The hash suffix is `-` + the URL-safe-ish base64 (`+`→`-`, `/`→`.`) of a 4-byte BLAKE2b digest
 * of the UTF-8 id, with trailing `=`, `-`, `.` stripped. Lengths count code points, as in Python.
 *
 * Also here: the ReplicaSet-of-Deployment collision marker (`-ofDRS`), the `kopf-managed`
 * marker that makes a custom prefix recognisable to other Kopf operators, detection of other
 * operators' prefixes, and the essence clean-up helpers shared by both kinds of storages.
 * Not here: Kopf's warning about prefixes over 189 characters (no logging in this layer).
 * @module
 */

import { isMapping, type Mapping, resolve } from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import { blake2b } from "./_blake2b.ts";

/**
 * An object's essence: its body reduced to what counts for change detection (built by the
 * diff-base storages, cleaned of progress traces by the progress storages).
 */
export type Essence = Record<string, unknown>;

/** The prefix Kopf uses by default for all its annotations. */
export const DEFAULT_PREFIX = "kopf.zalando.org";

/** Kubernetes' limit on the name part of an annotation key. */
export const NAME_MAX_LENGTH = 63;

/** The annotation name that marks a prefix as belonging to a Kopf-based operator. */
export const MANAGED_MARKER = "kopf-managed";

/** Prefixes always treated as Kopf's (and their subdomains). */
export const KNOWN_PREFIXES: readonly string[] = Object.freeze([DEFAULT_PREFIX]);

/** Annotations dropped from every essence besides other operators' ones. */
export const IGNORED_ANNOTATIONS: readonly string[] = Object.freeze([
  "kubectl.kubernetes.io/last-applied-configuration",
]);

/** Options for {@linkcode AnnotationKeys}. */
export interface AnnotationKeysOptions {
  /**
   * The prefix of all keys (without the trailing slash); must not be empty.
   * @default {"kopf.zalando.org"}
   */
  readonly prefix?: string;
  /**
   * Whether to also produce the legacy V1 keys (when they differ from the V2 ones).
   * @default {true}
   */
  readonly v1?: boolean;
}

/**
 * Forms annotation keys for record keys (handler ids, fixed names) under one prefix.
 * @example Default keys for a handler id
 * ```ts
 * import { AnnotationKeys } from "./conventions.ts";
 * new AnnotationKeys().make("update_fn/spec.field"); // ["kopf.zalando.org/update_fn.spec.field"]
 * ```
 */
export class AnnotationKeys {
  /** The prefix without the trailing slash. */
  readonly prefix: string;
  /** Whether legacy V1 keys are produced too. */
  readonly v1: boolean;

  /**
   * Create a key former.
   * @param options The prefix and the V1 flag.
   * @throws {RangeError} If the prefix is empty.
   */
  constructor(options: AnnotationKeysOptions = {}) {
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.v1 = options.v1 ?? true;
    if (!this.prefix) throw new RangeError("Annotation storages must have a non-empty prefix");
  }

  /**
   * All keys for a record key, V2 first, then V1 if enabled and different.
   * @param key The record key, e.g. a handler id.
   * @param body The object, if known: ReplicaSets owned by Deployments get marked keys.
   * @returns One or two full annotation keys.
   */
  make(key: string, body?: Mapping): string[] {
    const marked = body === undefined ? key : markKey(key, body);
    let keys = this.#made.get(marked);
    if (keys === undefined) {
      const v2 = makeV2Key(this.prefix, marked);
      const v1 = this.v1 ? makeV1Key(this.prefix, marked) : v2;
      keys = Object.freeze(v1 === v2 ? [v2] : [v2, v1]);
      if (this.#made.size >= MADE_KEYS_MAX) this.#made.clear();
      this.#made.set(marked, keys);
    }
    return [...keys];
  }

  /** Keys already formed, by marked record key (the same few on every object and cycle). */
  readonly #made = new Map<string, readonly string[]>();
}

/** Bounds {@linkcode AnnotationKeys}' memory of formed keys (record keys are handler ids). */
const MADE_KEYS_MAX = 4096;

/**
 * Append `-ofDRS` to record keys of ReplicaSets owned by Deployments: Kubernetes copies a
 * Deployment's annotations down to its ReplicaSets, which would otherwise overwrite their state.
 * @param key The record key.
 * @param body The object.
 * @returns The key, marked if needed.
 */
export function markKey(key: string, body: Mapping): string {
  if (body["kind"] !== "ReplicaSet") return key;
  const owners = resolve(body, "metadata.ownerReferences");
  const ownedByDeployment = Array.isArray(owners) &&
    owners.some((owner) => isMapping(owner) && owner["kind"] === "Deployment");
  return body["kind"] === "ReplicaSet" && ownedByDeployment ? `${key}-ofDRS` : key;
}

/**
 * Replace the characters not allowed in annotation names: `/` → `.`, `<` and `>` → `_`.
 * @param key The record key.
 * @returns The sanitised key.
 */
export function makeSafeKey(key: string): string {
  return key.replaceAll("/", ".").replaceAll("<", "_").replaceAll(">", "_");
}

/**
 * The hash suffix Kopf appends to shortened keys, e.g. `-Y5BiSA` for `abc`.
 * @param key The text to hash (UTF-8).
 * @returns `-` plus up to 6 base64 characters.
 */
export function makeSuffix(key: string): string {
  const digest = blake2b(new TextEncoder().encode(key), 4);
  const base64 = btoa(String.fromCharCode(...digest)).replaceAll("+", "-").replaceAll("/", ".");
  return `-${base64}`.replace(/[=.-]+$/, "");
}

/**
 * The legacy V1 key: the whole key, prefix included, fits into 63 characters.
 * @param prefix The prefix without the slash.
 * @param key The (marked) record key.
 * @returns The full annotation key.
 */
export function makeV1Key(prefix: string, key: string): string {
  const head = prefix ? `${prefix}/` : "";
  const safe = [...makeSafeKey(key)];
  const room = NAME_MAX_LENGTH - length(head);
  const suffix = safe.length <= room ? "" : makeSuffix(safe.join(""));
  return head + pySliceTo(safe, room - length(suffix)) + suffix;
}

/**
 * The V2 key: only the name part is limited to 63 characters.
 * @param prefix The prefix without the slash.
 * @param key The (marked) record key.
 * @returns The full annotation key.
 */
export function makeV2Key(prefix: string, key: string): string {
  const head = prefix ? `${prefix}/` : "";
  const suffix = length(key) > NAME_MAX_LENGTH ? makeSuffix(key) : "";
  const limit = Math.max(0, NAME_MAX_LENGTH - length(suffix));
  return head + [...makeSafeKey(key)].slice(0, limit).join("") + suffix;
}

/**
 * Find the prefixes that belong to Kopf-based operators among annotation keys: those with a
 * `<prefix>/kopf-managed` marker, `kopf.zalando.org` itself, and its subdomains.
 * @param keys Annotation keys.
 * @returns The detected prefixes.
 */
export function detectMarkedPrefixes(keys: Iterable<string>): Set<string> {
  const prefixes = new Set<string>();
  for (const key of keys) {
    const slash = key.indexOf("/");
    if (slash < 0) continue;
    const prefix = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const known = KNOWN_PREFIXES.some((p) => prefix === p || prefix.endsWith(`.${p}`));
    if (name === MANAGED_MARKER || known) prefixes.add(prefix);
  }
  return prefixes;
}

/**
 * Whether an annotation is operators' bookkeeping rather than the object's own: under one of
 * Kopf-based operators' `prefixes` ({@link detectMarkedPrefixes} of the object's keys) or one
 * of {@link IGNORED_ANNOTATIONS}. Neither counts in an essence.
 * @param key The annotation key.
 * @param prefixes The operators' prefixes among the object's annotation keys.
 */
export function isBookkeepingAnnotation(key: string, prefixes: ReadonlySet<string>): boolean {
  const slash = key.indexOf("/");
  return (slash >= 0 && prefixes.has(key.slice(0, slash))) || IGNORED_ANNOTATIONS.includes(key);
}

/**
 * The annotations without operators' bookkeeping ({@link isBookkeepingAnnotation}), e.g. for a
 * slim copy kept in memory.
 * @param annotations An object's annotations.
 * @returns The same object when nothing is dropped (no copy), a copy without the dropped ones,
 * or `undefined` when nothing is left.
 */
export function withoutOperatorAnnotations(
  annotations: Readonly<Record<string, string>>,
): Readonly<Record<string, string>> | undefined {
  const keys = Object.keys(annotations);
  const prefixes = detectMarkedPrefixes(keys);
  const kept = keys.filter((key) => !isBookkeepingAnnotation(key, prefixes));
  if (kept.length === 0) return undefined;
  if (kept.length === keys.length) return annotations;
  return Object.fromEntries(kept.map((key) => [key, annotations[key]!]));
}

/**
 * Put the `<prefix>/kopf-managed: "yes"` marker into the patch unless the prefix is Kopf's own
 * (`kopf.…`) or the marker is already in the body or the patch.
 * @param prefix The storage's prefix.
 * @param patch Where to write.
 * @param body The object as last seen.
 */
export function storeMarker(prefix: string, patch: Patch, body: Mapping): void {
  if (!prefix || prefix.startsWith("kopf.")) return;
  const marker = `${prefix}/${MANAGED_MARKER}`;
  const inBody = resolve(body, ["metadata", "annotations", marker]) !== undefined;
  const inPatch = resolve(patch.body, ["metadata", "annotations", marker]) !== undefined;
  if (!inBody && !inPatch) patch.annotations[marker] = "yes";
}

/**
 * Drop the given annotations from an essence (in place), keeping the order of the others.
 * @param essence The essence to clean.
 * @param keys The annotation keys to drop.
 */
export function removeAnnotations(essence: Essence, keys: Iterable<string>): void {
  const annotations = resolve(essence, "metadata.annotations");
  if (!isMapping(annotations)) return;
  for (const key of keys) delete annotations[key];
}

/**
 * Drop empty `metadata.annotations`, `metadata.labels`, `metadata` and `status` (in place).
 * @param essence The essence to clean.
 */
export function removeEmptyStanzas(essence: Essence): void {
  // Direct property checks rather than `resolve`/`remove` by dotted paths: this runs twice for
  // every essence built (every cycle, every listed object of a restart).
  const metadata = essence["metadata"];
  if (isMapping(metadata)) {
    for (const key of ["annotations", "labels"]) {
      const value = metadata[key];
      if (value !== undefined && isEmpty(value)) delete metadata[key];
    }
  }
  for (const key of ["metadata", "status"]) {
    const value = essence[key];
    if (value !== undefined && isEmpty(value)) delete essence[key];
  }
}

/** Python's truthiness of a JSON value, negated: `null`, `{}`, `[]`, `""`, `0`, `false`. */
function isEmpty(value: unknown): boolean {
  if (isMapping(value)) return Object.keys(value).length === 0;
  if (Array.isArray(value)) return value.length === 0;
  return !value;
}

function length(text: string): number {
  return [...text].length;
}

/** Python's `chars[:stop]`: a negative stop counts from the end. */
function pySliceTo(chars: readonly string[], stop: number): string {
  return chars.slice(0, stop < 0 ? Math.max(0, chars.length + stop) : stop).join("");
}
