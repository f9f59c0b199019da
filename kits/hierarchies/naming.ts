/**
 * Naming: children are named after their parent, as a prefix or exactly.
 * @module
 */

import { handledObject } from "../../core/actions/handled_object.ts";
import { isMapping } from "../../core/structs/dicts.ts";
import type { KubeObjectLike } from "../../core/structs/typed.ts";
import { absent, collect, type KubeObjects, metadataField, metadataOf } from "./objects.ts";

/**
 * Options of {@link harmonizeNaming}.
 *
 * @example Exactly the parent's name, even if the child has one
 * ```ts
 * import type { NamingOptions } from "../hierarchies.ts";
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
  owner?: KubeObjectLike | undefined;
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
 * import { harmonizeNaming } from "../hierarchies.ts";
 * import type { KubeObject } from "../../core/structs/objects.ts";
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

/** The explicit name, else the owner's `metadata.name`; there must be one of them. */
export function resolveName(
  name: string | null | undefined,
  owner: KubeObjectLike | undefined,
): string {
  if (!absent(name)) return name;
  const guessed = owner === undefined ? undefined : metadataField(owner, "name");
  if (typeof guessed === "string") return guessed;
  throw new TypeError(
    owner === undefined
      ? "harmonizeNaming(): pass the name explicitly, or an owner to take it from (or call it in a handler)"
      : "The name must be set explicitly: the owner has no metadata.name",
  );
}
