/**
 * Typed resource constants: a resource selector that also carries the type of its objects, so
 * that handlers registered with it infer `spec`, `status`, `body` and `patch` with no type
 * argument (`on.create(KopfExamples, ({ spec }) => …)`). `kopf generate types` emits one per CRD
 * version beside the types.
 * @module
 */

import type { TYPED, TypedObject } from "../structs/typed.ts";
import type { SelectorFields } from "./selectors.ts";

// What generated type modules need besides the constants (`kits/builtins.ts` imports them here).
export type { ObjectMeta } from "../structs/objects.ts";
export type { TypedObject } from "../structs/typed.ts";

/**
 * A resource selector (group, version, plural) that carries the type of its objects at the type
 * level. Any handler accepts it where it accepts a resource spec.
 *
 * @typeParam O The object type, a {@link TypedObject}.
 */
export interface TypedResource<O = TypedObject> extends SelectorFields {
  /** API group (`""` for core). */
  readonly group: string;
  /** API version. */
  readonly version: string;
  /** Plural name. */
  readonly plural: string;
  /** Type-level marker (never present at run time). */
  readonly [TYPED]?: O;
}

/**
 * A typed resource that is also a full reference: with the kind and the scope, it has what the
 * client needs to address the objects, so `client.api.get(Widgets, name, { namespace })`
 * returns a `Widget` (and `list`, `create`, `replace`, `patch` likewise). What
 * `kopf generate types` emits for every CRD version.
 *
 * @typeParam O The object type, a {@link TypedObject}.
 */
export interface TypedResourceRef<O = TypedObject> extends TypedResource<O> {
  /** Kind of the objects, e.g. `Widget`. */
  readonly kind: string;
  /** Whether the objects live in namespaces (the CRD's `scope: Namespaced`). */
  readonly namespaced: boolean;
}

/** The fields of {@link typedResource}'s full form (see {@link TypedResourceRef}). */
export interface TypedResourceFields {
  /** API group (`""` for core). */
  readonly group: string;
  /** API version. */
  readonly version: string;
  /** Plural name. */
  readonly plural: string;
  /** Kind of the objects. */
  readonly kind: string;
  /** Whether the objects live in namespaces. */
  readonly namespaced: boolean;
}

/**
 * Declares a typed resource constant. The full form (one object with the kind and the scope, as
 * `kopf generate types` writes it) makes a {@link TypedResourceRef}, which the client accepts
 * too; the short form (group, version, plural) is only for handlers.
 *
 * @typeParam O The object type.
 * @param reference Group, version, plural, kind and whether the objects are namespaced.
 * @returns A frozen reference to exactly that resource, typed with `O`.
 * @example A typed resource constant
 * ```ts
 * import { typedResource } from "./typed_resources.ts";
 * import type { TypedObject } from "../structs/typed.ts";
 * interface Greeting extends TypedObject<{ name: string }, { greeted?: boolean }> {}
 * export const Greetings = typedResource<Greeting>({
 *   group: "example.com",
 *   version: "v1",
 *   plural: "greetings",
 *   kind: "Greeting",
 *   namespaced: true,
 * });
 * ```
 */
export function typedResource<O extends TypedObject<unknown, unknown>>(
  reference: TypedResourceFields,
): TypedResourceRef<O>;
/**
 * Declares a typed resource constant for handlers only (the client also needs the kind and the
 * scope: use the full form).
 *
 * @typeParam O The object type.
 * @param group API group (`""` for core).
 * @param version API version.
 * @param plural Plural name.
 * @returns A selector for exactly that resource, typed with `O`.
 */
export function typedResource<O extends TypedObject<unknown, unknown>>(
  group: string,
  version: string,
  plural: string,
): TypedResource<O>;
export function typedResource<O extends TypedObject<unknown, unknown>>(
  groupOrReference: string | TypedResourceFields,
  version?: string,
  plural?: string,
): TypedResource<O> {
  if (typeof groupOrReference !== "string") {
    const { group, version, plural, kind, namespaced } = groupOrReference;
    const strings = { group, version, plural, kind } as Record<string, unknown>;
    const wrong = Object.keys(strings).filter((key) => typeof strings[key] !== "string");
    if (typeof namespaced !== "boolean") wrong.push("namespaced");
    if (wrong.length) {
      throw new TypeError(
        `typedResource() needs group, version, plural, kind (strings) and namespaced (a boolean); check ${
          wrong.join(", ")
        }`,
      );
    }
    return Object.freeze({ group, version, plural, kind, namespaced });
  }
  return Object.freeze({ group: groupOrReference, version: version!, plural: plural! });
}
