/**
 * Hierarchies: prepare children objects before they are created, so that they belong to their
 * parent — owner references (for Kubernetes' cascaded deletion), the parent's namespace, a name
 * derived from the parent's name, and the parent's labels (also on nested pod templates).
 *
 * A port of Kopf's `kopf.adopt()`, `kopf.label()`, `kopf.append_owner_reference()` & co. All
 * functions modify plain JSON objects ({@link KubeObject}) in place and return nothing; they
 * accept one object, or an array (any iterable, nested to any depth) of objects, where `null`
 * and `undefined` items are skipped. Nothing is sent to the API: create the children afterwards
 * with any client.
 *
 * The owner (the parent's body, as read from the API, with its `metadata.uid`) is optional, as
 * in Kopf: inside a resource handler (create, update, delete, resume, field, event, daemon,
 * timer, index, admission, and their sub-handlers) it defaults to the object being handled, so
 * `adopt(child)` is enough. Pass it explicitly for anything else (e.g. a grandparent); outside a
 * handler, functions that need an owner and get none throw a `TypeError`. Where Kopf reads the
 * handler's labels, name or namespace, the `owner` option names another object to read them from.
 *
 * @example Adopt a child in a creation handler
 * ```ts
 * import { adopt } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const parent: KubeObject = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: { name: "kopf-example-1", namespace: "default", uid: "6b93…", labels: { app: "x" } },
 * };
 * const pod: KubeObject = { apiVersion: "v1", kind: "Pod", spec: { containers: [] } };
 * adopt(pod, parent);
 * // pod.metadata: {ownerReferences: [{…, uid: "6b93…"}], generateName: "kopf-example-1-",
 * //                namespace: "default", labels: {app: "x"}}
 * ```
 * @module
 */

import { handledObject } from "../core/actions/handled_object.ts";
import { type FieldSpec, isMapping, parseField } from "../core/structs/dicts.ts";
import type { KubeObject, OwnerReference } from "../core/structs/objects.ts";

export type { FieldSpec } from "../core/structs/dicts.ts";
export type { KubeObject, ObjectMeta, OwnerReference } from "../core/structs/objects.ts";

/**
 * One object or several: an iterable (usually an array) of objects or of further iterables;
 * `null` and `undefined` items are skipped. As in Kopf, the type declares two levels of
 * nesting, while any depth works at runtime.
 *
 * @example One, several, nested
 * ```ts
 * import type { KubeObjects } from "./hierarchies.ts";
 *
 * const one: KubeObjects = { kind: "Job" };
 * const many: KubeObjects = [{ kind: "Job" }, [{ kind: "Deployment" }], null];
 * ```
 */
export type KubeObjects =
  | KubeObject
  | Iterable<KubeObject | Iterable<KubeObject | null | undefined> | null | undefined>;

/**
 * Nested structures that are treated like objects of their own (e.g. pod templates): one
 * dotted field (`"spec.template"`), or an array of fields, each dotted or as an array of keys.
 * As in Kopf, an array means several fields: `["spec", "template"]` is two fields, while
 * `[["spec", "template"]]` is one.
 *
 * @example Forms
 * ```ts
 * import type { NestedFields } from "./hierarchies.ts";
 *
 * const one: NestedFields = "spec.template";
 * const two: NestedFields = ["spec.template", "spec.jobTemplate.spec.template"];
 * const keys: NestedFields = [["spec", "template"]];
 * ```
 */
export type NestedFields = string | readonly FieldSpec[];

/**
 * Options of {@link buildOwnerReference} and {@link appendOwnerReference}.
 *
 * @example A non-controlling owner
 * ```ts
 * import type { OwnerReferenceOptions } from "./hierarchies.ts";
 *
 * const options: OwnerReferenceOptions = { controller: false, blockOwnerDeletion: false };
 * ```
 */
export interface OwnerReferenceOptions {
  /**
   * The `controller` flag: whether the owner is the managing controller of the child (only one
   * owner may be). `null` omits the field. Default: `true`.
   */
  controller?: boolean | null | undefined;
  /**
   * The `blockOwnerDeletion` flag: with foreground deletion, the owner stays until this child is
   * deleted. `null` omits the field. Default: `true`.
   */
  blockOwnerDeletion?: boolean | null | undefined;
}

/**
 * Options of {@link label}.
 *
 * @example Copy the parent's labels, also into the pod template
 * ```ts
 * import type { LabelOptions } from "./hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", labels: { app: "demo" } } };
 * const options: LabelOptions = { owner: parent, nested: "spec.template", forced: true };
 * ```
 */
export interface LabelOptions {
  /**
   * Where to take the labels from when none are given explicitly (its `metadata.labels`).
   * Default: the object being handled, inside a handler.
   */
  owner?: KubeObject | undefined;
  /** Overwrite labels that the objects already have. Default: `false` (existing values stay). */
  forced?: boolean | undefined;
  /** Also label these nested structures, if present (absent ones are not created). */
  nested?: NestedFields | null | undefined;
}

/**
 * Options of {@link harmonizeNaming}.
 *
 * @example Exactly the parent's name, even if the child has one
 * ```ts
 * import type { NamingOptions } from "./hierarchies.ts";
 *
 * const parent = { metadata: { name: "p" } };
 * const options: NamingOptions = { owner: parent, strict: true, forced: true };
 * ```
 */
export interface NamingOptions {
  /**
   * Where to take the name from when none is given explicitly (its `metadata.name`).
   * Default: the object being handled, inside a handler.
   */
  owner?: KubeObject | undefined;
  /**
   * Rename objects that already have a `name` or `generateName`. Default: `false` (they keep
   * theirs).
   */
  forced?: boolean | undefined;
  /**
   * Use the name as the exact `metadata.name`. Default: `false`: use it as a prefix,
   * `metadata.generateName: "<name>-"`, so that the API server appends a random suffix.
   */
  strict?: boolean | undefined;
}

/**
 * Options of {@link adjustNamespace}.
 *
 * @example Move into the parent's namespace unconditionally
 * ```ts
 * import type { NamespaceOptions } from "./hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", namespace: "team-a" } };
 * const options: NamespaceOptions = { owner: parent, forced: true };
 * ```
 */
export interface NamespaceOptions {
  /**
   * Where to take the namespace from when none is given explicitly (its `metadata.namespace`).
   * Default: the object being handled, inside a handler.
   */
  owner?: KubeObject | undefined;
  /** Overwrite the namespace that objects already have. Default: `false`. */
  forced?: boolean | undefined;
}

/**
 * Options of {@link adopt}: passed on to the functions that support them.
 *
 * @example Single child with the parent's exact name and labelled pods
 * ```ts
 * import type { AdoptOptions } from "./hierarchies.ts";
 *
 * const options: AdoptOptions = { strict: true, forced: true, nested: "spec.template" };
 * ```
 */
export interface AdoptOptions {
  /** Overwrite existing names, namespaces and labels. Default: `false`. */
  forced?: boolean | undefined;
  /** Use the owner's name as the exact name instead of a prefix. Default: `false`. */
  strict?: boolean | undefined;
  /** Also label these nested structures, if present. */
  nested?: NestedFields | null | undefined;
}

/**
 * Builds the owner reference that links children to `body` as their parent — for
 * `metadata.ownerReferences` of the children, see Kubernetes' garbage collection. As in Kopf,
 * fields that `body` lacks (e.g. `uid` before it is created) are omitted rather than invented,
 * hence the partial type; the API server rejects incomplete references.
 *
 * @param body The owner (parent) object, usually as read from the API.
 * @param options The `controller` and `blockOwnerDeletion` flags (both `true` by default).
 * @returns `{controller, blockOwnerDeletion, apiVersion, kind, name, uid}` — a new object.
 *
 * @example Reference a parent
 * ```ts
 * import { buildOwnerReference } from "./hierarchies.ts";
 *
 * const parent = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: { name: "kopf-example-1", uid: "6b931859-5d50-4b5c-956b-ea2fed0d1058" },
 * };
 * const ref = buildOwnerReference(parent, { blockOwnerDeletion: false });
 * // {controller: true, blockOwnerDeletion: false, apiVersion: "kopf.dev/v1",
 * //  kind: "KopfExample", name: "kopf-example-1", uid: "6b931859-…"}
 * ```
 */
export function buildOwnerReference(
  body: KubeObject,
  options: OwnerReferenceOptions = {},
): Partial<OwnerReference> {
  const meta = isMapping(body.metadata) ? body.metadata : {};
  const fields: Record<string, unknown> = {
    controller: options.controller === undefined ? true : options.controller,
    blockOwnerDeletion: options.blockOwnerDeletion === undefined
      ? true
      : options.blockOwnerDeletion,
    apiVersion: body.apiVersion,
    kind: body.kind,
    name: meta.name,
    uid: meta.uid,
  };
  const ref: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) ref[key] = value;
  }
  return ref as Partial<OwnerReference>;
}

/**
 * Appends an owner reference to `owner` to every object, unless the object already has a
 * reference with the owner's uid (then it stays as it is, even if its flags differ): calling
 * it again is harmless. Each object gets its own copy of the reference.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent, as read from the API (it must have `metadata.uid`); default: the
 *   object being handled, inside a handler.
 * @param options The `controller` and `blockOwnerDeletion` flags (both `true` by default).
 * @throws {TypeError} If there is no owner (none given outside a handler) or it has no
 *   `metadata.uid`, or an item is not a plain object, or its `metadata` /
 *   `metadata.ownerReferences` has a wrong type.
 *
 * @example Own several children
 * ```ts
 * import { appendOwnerReference } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const parent = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p", uid: "123" } };
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment" }];
 * appendOwnerReference(objs, parent);
 * appendOwnerReference(objs, parent); // no duplicates
 * appendOwnerReference(objs, { ...parent, metadata: { name: "q", uid: "456" } }, {
 *   controller: false,
 * });
 * ```
 */
export function appendOwnerReference(
  objs: KubeObjects,
  owner?: KubeObject | null,
  options: OwnerReferenceOptions = {},
): void {
  const ref = buildOwnerReference(requireOwner(owner, "appendOwnerReference"), options);
  const uid = requireUid(ref, "append");
  for (const obj of collect(objs)) {
    const refs = ownerReferencesOf(obj, true);
    if (!refs.some((existing) => isMapping(existing) && existing.uid === uid)) {
      refs.push({ ...ref });
    }
  }
}

/**
 * Removes the references to `owner` (matched by its uid) from every object, if there are any;
 * the array itself is modified in place. Objects without references are left untouched.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent (it must have `metadata.uid`); default: the object being handled,
 *   inside a handler.
 * @throws {TypeError} If there is no owner (none given outside a handler) or it has no
 *   `metadata.uid`, or an item is not a plain object, or its `metadata` /
 *   `metadata.ownerReferences` has a wrong type.
 *
 * @example Orphan a child
 * ```ts
 * import { appendOwnerReference, removeOwnerReference } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const parent = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p", uid: "123" } };
 * const child: KubeObject = { kind: "Job" };
 * appendOwnerReference(child, parent);
 * removeOwnerReference(child, parent);
 * // child.metadata.ownerReferences: []
 * ```
 */
export function removeOwnerReference(objs: KubeObjects, owner?: KubeObject | null): void {
  const ref = buildOwnerReference(requireOwner(owner, "removeOwnerReference"));
  const uid = requireUid(ref, "remove");
  for (const obj of collect(objs)) {
    const refs = ownerReferencesOf(obj, false);
    if (refs === undefined) continue;
    const kept = refs.filter((ref) => !(isMapping(ref) && ref.uid === uid));
    if (kept.length !== refs.length) refs.splice(0, refs.length, ...kept);
  }
}

/**
 * Adds labels to every object (and to its `nested` structures that exist). Labels that an
 * object already has keep their values unless `forced`.
 *
 * Without explicit labels (`undefined` or `null`), the labels of `options.owner` are copied,
 * or (as in Kopf) those of the object being handled. An empty `{}` (or an owner without
 * labels) changes nothing. A `null` label value is stored as is (in a merge-patch, it removes
 * the label).
 *
 * @param objs The objects: one object or an iterable of them.
 * @param labels The labels to add; default: the owner's labels.
 * @param options The owner (for the default labels), `forced`, `nested`.
 * @throws {TypeError} If neither labels nor an owner are given outside a handler, or an item or
 *   nested structure
 *   is not a plain object, or its `metadata` / `metadata.labels` has a wrong type.
 *
 * @example Explicit labels, also for the pod template
 * ```ts
 * import { label } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: {} } }];
 * label(objs, { label1: "value1" }, { nested: "spec.template" });
 * // [{kind: "Job", metadata: {labels: {label1: "value1"}}},
 * //  {kind: "Deployment", metadata: {labels: {label1: "value1"}},
 * //   spec: {template: {metadata: {labels: {label1: "value1"}}}}}]
 * ```
 *
 * @example The parent's labels, overwriting
 * ```ts
 * import { label } from "./hierarchies.ts";
 *
 * const parent = { metadata: { name: "p", labels: { somelabel: "somevalue" } } };
 * const child = { kind: "Job", metadata: { labels: { somelabel: "other" } } };
 * label(child, undefined, { owner: parent, forced: true });
 * // child.metadata.labels: {somelabel: "somevalue"}
 * ```
 */
export function label(
  objs: KubeObjects,
  labels?: Readonly<Record<string, string | null>> | null,
  options: LabelOptions = {},
): void {
  let source: Readonly<Record<string, unknown>>;
  if (labels !== undefined && labels !== null) {
    source = labels;
  } else {
    const owner = options.owner ?? handledObject();
    if (owner === undefined) {
      throw new TypeError(
        "label(): pass the labels explicitly, or an owner to copy them from (or call it in a handler)",
      );
    }
    const ownLabels = metadataField(owner, "labels");
    source = isMapping(ownLabels) ? ownLabels : {};
  }
  const entries = Object.entries(source);
  const forced = options.forced ?? false;
  for (const obj of collect(objs, options.nested)) {
    if (entries.length === 0) continue;
    const meta = metadataOf(obj);
    const target = mappingField(meta, "labels");
    for (const [key, value] of entries) {
      if (forced || !Object.hasOwn(target, key)) setKey(target, key, value);
    }
  }
}

/**
 * Names every object after `name` (by default, the owner's name): as a prefix
 * (`metadata.generateName: "<name>-"`, the API server appends a random suffix; the usual way
 * for several children of one kind), or with `strict`, exactly (`metadata.name`; for a single
 * child). The other of the two fields is removed. Objects that already have a `name` or a
 * `generateName` keep it, unless `forced`.
 *
 * @param objs The objects: one object or an iterable of them.
 * @param name The name or prefix; `undefined`/`null`: `metadata.name` of `options.owner` or of
 *   the object being handled.
 * @param options The owner (for the default name), `forced`, `strict`.
 * @throws {TypeError} If no name can be found (neither given nor in the owner), or an item is
 *   not a plain object, or its `metadata` has a wrong type.
 *
 * @example Prefix or exact name
 * ```ts
 * import { harmonizeNaming } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const many: KubeObject[] = [{ kind: "Job" }, { kind: "Job", metadata: { name: "mine" } }];
 * harmonizeNaming(many, "some-name");
 * // [{kind: "Job", metadata: {generateName: "some-name-"}},
 * //  {kind: "Job", metadata: {name: "mine"}}]
 *
 * const parent = { metadata: { name: "kopf-example-1" } };
 * const single: KubeObject = { kind: "Service", metadata: { generateName: "svc-" } };
 * harmonizeNaming(single, undefined, { owner: parent, strict: true, forced: true });
 * // {kind: "Service", metadata: {name: "kopf-example-1"}}
 * ```
 */
export function harmonizeNaming(
  objs: KubeObjects,
  name?: string | null,
  options: NamingOptions = {},
): void {
  const real = resolveName(name, options.owner ?? handledObject());
  const strict = options.strict ?? false;
  const forced = options.forced ?? false;
  for (const obj of collect(objs)) {
    const existing = isMapping(obj.metadata) ? obj.metadata : {};
    const nameless = absent(existing.name) && absent(existing.generateName);
    if (!forced && !nameless) continue;
    const meta = metadataOf(obj);
    if (strict) {
      meta.name = real;
      delete meta.generateName;
    } else {
      meta.generateName = `${real}-`;
      delete meta.name;
    }
  }
}

/**
 * Puts every object into `namespace` (by default, the owner's namespace), unless the object
 * has a namespace already and `forced` is not set. With a cluster-scoped owner (no namespace)
 * and `forced`, the objects' namespaces are removed — aligned with the owner, as in Kopf;
 * without `forced`, nothing changes.
 *
 * @param objs The objects: one object or an iterable of them.
 * @param namespace The namespace; `undefined`/`null`: `metadata.namespace` of `options.owner`
 *   or of the object being handled.
 * @param options The owner (for the default namespace), `forced`.
 * @throws {TypeError} If neither a namespace nor an owner are given outside a handler, or an
 *   item is not a plain
 *   object, or its `metadata` has a wrong type.
 *
 * @example Explicit, or the parent's namespace
 * ```ts
 * import { adjustNamespace } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Job", metadata: { namespace: "other" } }];
 * adjustNamespace(objs, "team-a");
 * // namespaces: "team-a", "other"
 *
 * const parent = { metadata: { name: "p", namespace: "default" } };
 * adjustNamespace(objs, undefined, { owner: parent, forced: true });
 * // namespaces: "default", "default"
 * ```
 */
export function adjustNamespace(
  objs: KubeObjects,
  namespace?: string | null,
  options: NamespaceOptions = {},
): void {
  let real: unknown = namespace;
  if (absent(namespace)) {
    const owner = options.owner ?? handledObject();
    if (owner === undefined) {
      throw new TypeError(
        "adjustNamespace(): pass the namespace explicitly, or an owner to take it from (or call it in a handler)",
      );
    }
    real = metadataField(owner, "namespace");
  }
  const forced = options.forced ?? false;
  for (const obj of collect(objs)) {
    const existing = isMapping(obj.metadata) ? obj.metadata.namespace : undefined;
    if (!forced && !absent(existing)) continue;
    if (absent(real)) {
      if (isMapping(obj.metadata)) delete obj.metadata.namespace;
    } else {
      metadataOf(obj).namespace = real;
    }
  }
}

/**
 * Makes the objects children of `owner`: appends the owner reference (controller, blocking
 * owner deletion), then names them after the owner (see {@link harmonizeNaming}), puts them
 * into the owner's namespace (see {@link adjustNamespace}), and copies the owner's labels (see
 * {@link label}). `forced`, `strict` and `nested` are passed to the functions that support them.
 *
 * The owner defaults to the object being handled, as in Kopf: `adopt(child)` in a handler. It
 * is validated (uid and name) before any object is modified.
 *
 * @param objs The children: one object or an iterable of them.
 * @param owner The parent, as read from the API (it must have `metadata.uid` and
 *   `metadata.name`); default: the object being handled, inside a handler.
 * @param options `forced`, `strict`, `nested`.
 * @throws {TypeError} If there is no owner (none given outside a handler), or it has no uid or
 *   no name, or an item is not a plain object, or has wrongly typed metadata.
 *
 * @example Adopt a Job and a Deployment
 * ```ts
 * import { adopt } from "./hierarchies.ts";
 * import type { KubeObject } from "../core/structs/objects.ts";
 *
 * const parent: KubeObject = {
 *   apiVersion: "kopf.dev/v1",
 *   kind: "KopfExample",
 *   metadata: {
 *     name: "kopf-example-1",
 *     namespace: "default",
 *     uid: "4a15f2c2-d558-4b6e-8cf0-00585d823511",
 *     labels: { somelabel: "somevalue" },
 *   },
 * };
 * const objs: KubeObject[] = [{ kind: "Job" }, { kind: "Deployment", spec: { template: {} } }];
 * adopt(objs, parent, { strict: true, forced: true, nested: "spec.template" });
 * // each: metadata: {ownerReferences: [{controller: true, blockOwnerDeletion: true,
 * //   apiVersion: "kopf.dev/v1", kind: "KopfExample", name: "kopf-example-1", uid: "4a15…"}],
 * //   name: "kopf-example-1", namespace: "default", labels: {somelabel: "somevalue"}}
 * ```
 */
export function adopt(
  objs: KubeObjects,
  owner?: KubeObject | null,
  options: AdoptOptions = {},
): void {
  owner = requireOwner(owner, "adopt");
  requireUid(buildOwnerReference(owner), "adopt");
  const name = resolveName(undefined, owner);
  const { forced, strict, nested } = options;
  const list = collect(objs); // flattened once: one-shot iterables serve all four steps
  collect(list, nested); // validate the nested fields too before modifying anything
  appendOwnerReference(list, owner);
  harmonizeNaming(list, name, { forced, strict });
  adjustNamespace(list, undefined, { owner, forced });
  label(list, undefined, { owner, forced, nested });
}

/** Flattens the objects (and their nested structures) into a list, validating the items. */
function collect(
  objs: KubeObjects | null | undefined,
  nested?: NestedFields | null,
): Record<string, unknown>[] {
  const fields: readonly FieldSpec[] = typeof nested === "string" ? [nested] : nested ?? [];
  const found: Record<string, unknown>[] = [];
  walk(objs, fields, found);
  return found;
}

function walk(
  objs: unknown,
  nested: readonly FieldSpec[],
  found: Record<string, unknown>[],
): void {
  if (objs === null || objs === undefined) return;
  if (isMapping(objs)) {
    found.push(objs);
    for (const field of nested) {
      const sub = resolveNested(objs, field);
      if (sub !== undefined) found.push(sub);
    }
    return;
  }
  if (typeof objs === "object" && Symbol.iterator in objs) {
    for (const item of objs as Iterable<unknown>) walk(item, nested, found);
    return;
  }
  throw new TypeError(`Not a Kubernetes object (a plain object expected): ${describe(objs)}`);
}

/** A nested structure if present; absent ones give `undefined`, non-objects an error. */
function resolveNested(
  obj: Record<string, unknown>,
  field: FieldSpec,
): Record<string, unknown> | undefined {
  const path = parseField(field);
  let current: unknown = obj;
  for (const [index, key] of path.entries()) {
    if (!isMapping(current)) {
      const where = path.slice(0, index).join(".");
      throw new TypeError(`The nested field ${where} is not an object: ${describe(current)}`);
    }
    if (!Object.hasOwn(current, key) || current[key] === undefined) return undefined;
    current = current[key];
  }
  if (!isMapping(current)) {
    throw new TypeError(
      `The nested field ${path.join(".")} is not an object: ${describe(current)}`,
    );
  }
  return current;
}

/** The object's metadata, created if absent. */
function metadataOf(obj: Record<string, unknown>): Record<string, unknown> {
  return mappingField(obj, "metadata");
}

/** A field that must hold an object; created as `{}` if absent (`undefined` or `null`). */
function mappingField(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const value = Object.hasOwn(obj, key) ? obj[key] : undefined;
  if (absent(value)) {
    const fresh: Record<string, unknown> = {};
    setKey(obj, key, fresh);
    return fresh;
  }
  if (!isMapping(value)) {
    throw new TypeError(`The field ${key} is not an object: ${describe(value)}`);
  }
  return value;
}

/** `metadata.ownerReferences`, created as `[]` if absent and `create` is set. */
function ownerReferencesOf(obj: Record<string, unknown>, create: true): unknown[];
function ownerReferencesOf(obj: Record<string, unknown>, create: false): unknown[] | undefined;
function ownerReferencesOf(obj: Record<string, unknown>, create: boolean): unknown[] | undefined {
  if (!create && absent(obj.metadata)) return undefined;
  const meta = metadataOf(obj);
  const refs = meta.ownerReferences;
  if (absent(refs)) {
    if (!create) return undefined;
    const fresh: unknown[] = [];
    meta.ownerReferences = fresh;
    return fresh;
  }
  if (!Array.isArray(refs)) {
    throw new TypeError(`The field ownerReferences is not an array: ${describe(refs)}`);
  }
  return refs;
}

/** A field of the owner's metadata, or `undefined`. */
function metadataField(owner: KubeObject, key: string): unknown {
  const meta = owner.metadata;
  return isMapping(meta) && Object.hasOwn(meta, key) ? meta[key] : undefined;
}

function resolveName(name: string | null | undefined, owner: KubeObject | undefined): string {
  if (!absent(name)) return name;
  const guessed = owner === undefined ? undefined : metadataField(owner, "name");
  if (typeof guessed === "string") return guessed;
  throw new TypeError(
    owner === undefined
      ? "harmonizeNaming(): pass the name explicitly, or an owner to take it from (or call it in a handler)"
      : "The name must be set explicitly: the owner has no metadata.name",
  );
}

/** The explicit owner, else the object being handled (Kopf's implicit owner). */
function requireOwner(owner: KubeObject | null | undefined, what: string): KubeObject {
  const real = owner ?? handledObject();
  if (real !== undefined) return real;
  throw new TypeError(
    `${what}(): pass the owner explicitly, or call it in a handler (its object is the default)`,
  );
}

function requireUid(ref: Partial<OwnerReference>, what: string): string {
  if (typeof ref.uid === "string" && ref.uid !== "") return ref.uid;
  throw new TypeError(
    `Cannot ${what} an owner reference: the owner has no metadata.uid (read it from the API)`,
  );
}

function absent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

/** Sets an own key, even `__proto__`, without touching the prototype. */
function setKey(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return `an instance of ${value.constructor?.name ?? "Object"}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}
