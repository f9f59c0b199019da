/**
 * Typed objects: how a handler learns the shape of its resource from one type name.
 *
 * `kopf generate types` emits, per CRD version, an interface that extends
 * {@link TypedObject} (e.g. `interface KopfExample extends TypedObject<KopfExampleSpec,
 * KopfExampleStatus>`). Handlers accept such a type where they accept a spec type
 * (`on.create<KopfExample>(…)`); the helpers below tell the two apart by the {@link TYPED}
 * marker, which only object types declare, so old code that passes a spec type keeps working.
 * @module
 */

import type { Diff, DiffOperation } from "./diffs.ts";
import type { Patch } from "./patches.ts";
import type { KubeObject, ObjectMeta } from "./objects.ts";

/**
 * The marker key of typed objects and typed resources. Only a type-level marker: no object
 * carries it at run time.
 */
export const TYPED: unique symbol = Symbol.for("kopf.typed");

/** The spec and status types a {@link TypedObject} declares under its {@link TYPED} marker. */
export interface TypedShape<Spec, Status> {
  /** The type of `spec`. */
  readonly spec: Spec;
  /** The type of `status`. */
  readonly status: Status;
}

/**
 * A Kubernetes object whose `spec` and `status` have known types: what `kopf generate types`
 * emits for each CRD version. Give it to handlers as their only type argument, or let a typed
 * resource constant carry it.
 *
 * @typeParam Spec The type of `spec`.
 * @typeParam Status The type of `status`.
 * @example A hand-written typed object
 * ```ts
 * import type { TypedObject } from "./typed.ts";
 * interface Greeting extends TypedObject<{ name: string }, { greeted?: boolean }> {
 *   apiVersion: "example.com/v1";
 *   kind: "Greeting";
 * }
 * const hello: Greeting = { apiVersion: "example.com/v1", kind: "Greeting", spec: { name: "x" } };
 * ```
 */
export interface TypedObject<Spec = Record<string, unknown>, Status = Record<string, unknown>> {
  /** `group/version` or `v1`. */
  apiVersion?: string;
  /** Kind of the object. */
  kind?: string;
  /** Standard metadata. */
  metadata?: ObjectMeta;
  /** The object's spec. */
  spec?: Spec;
  /** The object's status. */
  status?: Status;
  /** Type-level marker (never present at run time). */
  readonly [TYPED]?: TypedShape<Spec, Status>;
}

/** Whether `S` is a typed object (declares the {@link TYPED} marker) rather than a spec type. */
export type IsTypedObject<S> = [S] extends [never] ? false
  : typeof TYPED extends keyof S ? true
  : false;

/** The spec type of a handler's type argument: the object's spec, or the argument itself. */
export type SpecOf<S> = IsTypedObject<S> extends true
  ? S extends { readonly [TYPED]?: TypedShape<infer X, unknown> } ? X : never
  : S;

/** The status type of a handler's type arguments: the object's status, or `T`. */
export type StatusOf<S, T> = IsTypedObject<S> extends true
  ? S extends { readonly [TYPED]?: TypedShape<unknown, infer X> } ? X : never
  : T;

/** The type of `body` for a handler's type argument: the typed object, or any object. */
export type BodyOf<S> = IsTypedObject<S> extends true ? S & KubeObject : KubeObject;

/**
 * A JSON merge patch (RFC 7386) of a value of type `T`: every field optional, `null` deletes it,
 * nested objects patched the same way; arrays and scalars are replaced whole.
 */
export type MergePatch<T> = T extends readonly unknown[] ? T
  : T extends object ? { -readonly [K in keyof T]?: MergePatch<T[K]> | null }
  : T;

/**
 * The essence of a typed object, as `old`/`new` of resource-changing handlers show it: the
 * object without `status` and with only labels and annotations of `metadata`.
 */
export type EssenceOf<S> = IsTypedObject<S> extends true ?
    & Omit<S, "status" | "metadata" | typeof TYPED>
    & { metadata?: Pick<ObjectMeta, "labels" | "annotations"> }
  : unknown;

/**
 * A diff of a typed object's essence: each item's path starts at a top-level field of the
 * essence (`spec`, `metadata`, …) or is empty (the whole essence), so a misspelt field in a
 * comparison with `path[0]` is a type error.
 */
export type DiffOf<S> = IsTypedObject<S> extends true ? readonly (readonly [
    op: DiffOperation,
    path: readonly [] | readonly [Extract<keyof EssenceOf<S>, string>, ...string[]],
    old: unknown,
    new: unknown,
  ])[]
  : Diff;

/**
 * The patch of a typed object's handler: `spec` and `status` are merge patches of their types,
 * so writing a field the schema does not have is a type error.
 */
export type TypedPatch<Spec, Status> = Omit<Patch, "spec" | "status"> & {
  /** The `spec` section of the merge patch (created on access). */
  readonly spec: MergePatch<Spec>;
  /** The `status` section of the merge patch (created on access). */
  readonly status: MergePatch<Status>;
};

/** The type of `patch` for a handler's type arguments: typed for typed objects. */
export type PatchOf<S, T> = IsTypedObject<S> extends true ? TypedPatch<SpecOf<S>, StatusOf<S, T>>
  : Patch;
