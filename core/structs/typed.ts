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

import type { FieldSpec } from "./dicts.ts";
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

/**
 * Any Kubernetes object, typed or not: a {@link KubeObject}, or an interface without an index
 * signature — a generated `Widget`, a built-in `Pod` — which `KubeObject` does not accept. The
 * client and the hierarchy functions take it wherever they take an object.
 */
export type KubeObjectLike = KubeObject | TypedObject<unknown, unknown>;

/**
 * The object type that a resource reference carries: the type argument of a typed resource
 * constant (`Widgets` → `Widget`), else {@link KubeObject}.
 *
 * @typeParam R A resource reference (a typed resource constant, or any `{ group, version, … }`).
 */
export type ObjectOf<R> = R extends { readonly [TYPED]?: infer O }
  ? unknown extends O ? KubeObject : O extends object ? O : KubeObject
  : KubeObject;

/**
 * The dotted paths into a type, as field handlers name fields (`"spec.color"`): every key of
 * every nested object, to a depth of 10; a map (index signature) or an untyped value accepts
 * any key below it (`"metadata.labels.${string}"`). Arrays are leaves (Kopf resolves fields
 * through objects only), and keys with a dot cannot be written dotted (use the array form).
 */
export type DottedPath<T, D extends number = 10> = [D] extends [never] ? never
  : unknown extends T ? string
  : T extends readonly unknown[] ? never
  : T extends object ? {
      [K in keyof T & string]-?: K extends `${string}.${string}` ? never
        :
          | `${K}`
          | `${K}.${DottedPath<NonNullable<T[K]>, [never, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9][D]>}`;
    }[keyof T & string]
  : never;

/**
 * The type of the value at a dotted path (see {@link DottedPath}): `unknown` for paths the type
 * does not describe. Optional fields on the way make the value possibly `undefined`.
 */
export type DottedValue<T, P extends string> = unknown extends T ? unknown
  : P extends `${infer H}.${infer R}`
    ? H extends keyof NonNullable<T>
      ? DottedValue<NonNullable<T>[H], R> | (undefined extends T ? undefined : never)
    : unknown
  : P extends keyof NonNullable<T> ? NonNullable<T>[P] | (undefined extends T ? undefined : never)
  : unknown;

/**
 * The field paths that field handlers of a typed object can watch: the dotted paths into the
 * object's essence (`spec…`, `metadata.labels…`, `metadata.annotations…`, other top-level
 * fields; not `status`, which no change of the essence includes), or the array form (unchecked).
 * Any field spec for objects that are not typed.
 */
export type FieldPathOf<S> = IsTypedObject<S> extends true
  ? DottedPath<EssenceOf<S>> | readonly string[]
  : FieldSpec;

/**
 * The type of a field handler's `old` and `new`: the type of the field at `P` in a typed
 * object's essence (or `undefined`: the field may be absent), `unknown` for untyped objects,
 * array-form paths and paths that are not one literal.
 */
export type FieldValueOf<S, P> = IsTypedObject<S> extends true
  ? P extends string
    ? [FieldPathOf<S>] extends [P] ? unknown : DottedValue<EssenceOf<S>, P> | undefined
  : unknown
  : unknown;
