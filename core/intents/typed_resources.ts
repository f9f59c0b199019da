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
 * Declares a typed resource constant.
 *
 * @typeParam O The object type.
 * @param group API group (`""` for core).
 * @param version API version.
 * @param plural Plural name.
 * @returns A selector for exactly that resource, typed with `O`.
 * @example A typed resource constant
 * ```ts
 * import { typedResource } from "./typed_resources.ts";
 * import type { TypedObject } from "../structs/typed.ts";
 * interface Greeting extends TypedObject<{ name: string }, { greeted?: boolean }> {}
 * export const Greetings = typedResource<Greeting>("example.com", "v1", "greetings");
 * ```
 */
export function typedResource<O extends TypedObject<unknown, unknown>>(
  group: string,
  version: string,
  plural: string,
): TypedResource<O> {
  return Object.freeze({ group, version, plural });
}
