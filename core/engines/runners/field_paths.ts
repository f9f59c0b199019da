/**
 * The `field` filters of handlers, checked against the CRD's schema when the operator starts
 * serving a resource: a path the schema cannot hold (a typo such as `spec.colr`) is pruned by the
 * API server, so a handler filtering on it never runs, silently. Such a path is logged once as a
 * warning naming the handler. Built-in resources and CRDs the operator may not read (RBAC) are
 * skipped quietly; `x-kubernetes-preserve-unknown-fields` and `additionalProperties` hold any key.
 * The CRD is listed by name (the `list` the operator has anyway to follow CRDs), not read by `get`.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { CRD_RESOURCE } from "../../client/discovery.ts";
import type { FieldPath } from "../../structs/dicts.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import { closest } from "../../util/suggest.ts";

/** The parts of an OpenAPI v3 schema (a CRD's `openAPIV3Schema`) that decide field paths. */
export interface FieldSchema {
  /** `object`, `array`, `string`, `integer`, `number`, `boolean`. */
  readonly type?: string;
  /** The known fields of an object. */
  readonly properties?: Readonly<Record<string, FieldSchema>>;
  /** A map's values: any key is allowed (`true`: any value). */
  readonly additionalProperties?: boolean | FieldSchema;
  /** An array's items (not followed: a field path does not index into arrays). */
  readonly items?: FieldSchema;
  /** Any field is kept, known or not. */
  readonly "x-kubernetes-preserve-unknown-fields"?: boolean;
  /** An embedded object: `apiVersion`, `kind` and `metadata` are implied. */
  readonly "x-kubernetes-embedded-resource"?: boolean;
  /** An integer or a string. */
  readonly "x-kubernetes-int-or-string"?: boolean;
  /** Alternatives and conjunctions (their fields count as the node's). */
  readonly allOf?: readonly FieldSchema[];
  /** See `allOf`. */
  readonly anyOf?: readonly FieldSchema[];
  /** See `allOf`. */
  readonly oneOf?: readonly FieldSchema[];
}

/** The fields of `metadata` (ObjectMeta) that an object can have. */
const OBJECT_META = [
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
];

/**
 * Why a field path cannot exist in objects of a schema, or `undefined` when it can.
 *
 * @example
 * ```ts
 * import { fieldPathProblem } from "./field_paths.ts";
 * const schema = { type: "object", properties: { spec: { type: "object", properties: { size: { type: "integer" } } } } };
 * fieldPathProblem(schema, ["spec", "size"]); // undefined
 * fieldPathProblem(schema, ["spec", "sise"]); // "no field `sise` in `spec` (did you mean `size`?)"
 * ```
 *
 * @param schema The resource's schema (of the whole object).
 * @param path The field path.
 * @returns The reason, in words, or `undefined`.
 */
export function fieldPathProblem(schema: FieldSchema, path: FieldPath): string | undefined {
  return walk(schema, path, 0, true);
}

function walk(
  node: FieldSchema,
  path: FieldPath,
  depth: number,
  resource: boolean,
): string | undefined {
  if (depth >= path.length) return undefined;
  const key = path[depth]!;
  const where = depth === 0 ? "at the top level" : `in \`${path.slice(0, depth).join(".")}\``;
  const merged = merge(node);
  if (resource && key === "metadata") return metadataProblem(path, depth);
  if (resource && (key === "apiVersion" || key === "kind")) {
    return depth + 1 < path.length ? `\`${key}\` is a string, it has no fields` : undefined;
  }
  const child = merged.properties[key];
  if (child) return walk(child, path, depth + 1, Boolean(child["x-kubernetes-embedded-resource"]));
  if (merged.preserve) return undefined;
  if (merged.additional !== undefined) {
    return merged.additional === true ? undefined : walk(merged.additional, path, depth + 1, false);
  }
  const known = Object.keys(merged.properties);
  if (merged.scalar) {
    return `\`${path.slice(0, depth).join(".")}\` is ${merged.scalar}, it has no fields`;
  }
  if (!known.length && merged.type === undefined) return undefined; // nothing said: anything goes
  const meant = closest(key, resource ? [...known, "metadata", "apiVersion", "kind"] : known);
  return `no field \`${key}\` ${where}${meant ? ` (did you mean \`${meant}\`?)` : ""}`;
}

function metadataProblem(path: FieldPath, depth: number): string | undefined {
  const key = path[depth + 1];
  if (key === undefined || OBJECT_META.includes(key)) return undefined;
  const meant = closest(key, OBJECT_META);
  return `no field \`${key}\` in \`${path.slice(0, depth + 1).join(".")}\`` +
    (meant ? ` (did you mean \`${meant}\`?)` : "");
}

interface Merged {
  readonly properties: Record<string, FieldSchema>;
  readonly preserve: boolean;
  readonly additional: true | FieldSchema | undefined;
  readonly type: string | undefined;
  /** "a string", "an array"…: when the node cannot have fields. */
  readonly scalar: string | undefined;
}

/** The node with its allOf/anyOf/oneOf alternatives folded in (any of them may hold a key). */
function merge(node: FieldSchema): Merged {
  const properties: Record<string, FieldSchema> = {};
  let preserve = false;
  let additional: true | FieldSchema | undefined;
  let type: string | undefined;
  let intOrString = false;
  for (const part of [node, ...(node.allOf ?? []), ...(node.anyOf ?? []), ...(node.oneOf ?? [])]) {
    Object.assign(properties, part.properties ?? {});
    preserve ||= Boolean(part["x-kubernetes-preserve-unknown-fields"]);
    if (part.additionalProperties === true) additional = true;
    else if (part.additionalProperties && additional === undefined) {
      additional = part.additionalProperties;
    }
    type ??= part.type;
    intOrString ||= Boolean(part["x-kubernetes-int-or-string"]);
  }
  const scalar = intOrString
    ? "an integer or a string"
    : type === undefined || type === "object"
    ? undefined
    : `${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`;
  return { properties, preserve, additional, type, scalar };
}

/** A handler as far as the check needs it. */
export interface FieldFiltered {
  /** The handler's id, for the message. */
  readonly id: string;
  /** Its field filter, if any. */
  readonly field?: FieldPath | undefined;
}

/** What the check needs. */
export interface FieldCheckDeps {
  /** To read the CRD. */
  readonly client: KubeClient;
  /** Where the warnings go. */
  readonly logger: Logger;
  /** Stops the reading. */
  readonly signal: AbortSignal;
}

/**
 * Reads the resource's CRD and warns once for each handler whose `field` cannot exist in its
 * objects. Never throws: a built-in resource (no dot in its group), a CRD the operator cannot
 * read, or one without a schema is skipped quietly. Nothing is read when no handler has a field.
 *
 * @param deps The client, logger and signal.
 * @param resource The resource being served.
 * @param handlers Its handlers.
 * @returns Resolves when checked.
 */
export async function checkFieldPaths(
  deps: FieldCheckDeps,
  resource: Resource,
  handlers: readonly FieldFiltered[],
): Promise<void> {
  const filtered = handlers.filter((h) => h.field?.length);
  if (!filtered.length || !resource.group.includes(".")) return;
  let schema: FieldSchema | undefined;
  try {
    // A list by name, not a get: operators may list and watch CRDs (to follow them), not get.
    const { items } = await deps.client.api.list(CRD_RESOURCE, {
      fieldSelector: `metadata.name=${resource.plural}.${resource.group}`,
      signal: deps.signal,
    });
    const crd = items[0] as {
      spec?: { versions?: { name: string; schema?: { openAPIV3Schema?: FieldSchema } }[] };
    } | undefined;
    schema = crd?.spec?.versions?.find((v) => v.name === resource.version)?.schema
      ?.openAPIV3Schema;
  } catch {
    return; // not readable (RBAC), not a CRD, or stopping: nothing to check against
  }
  if (!schema) return;
  const seen = new Set<string>();
  for (const handler of filtered) {
    const field = handler.field!.join(".");
    if (seen.has(`${handler.id}\0${field}`)) continue;
    seen.add(`${handler.id}\0${field}`);
    const problem = fieldPathProblem(schema, handler.field!);
    if (problem === undefined) continue;
    deps.logger.warning(
      `Handler '${handler.id}' filters on field '${field}', which objects of ` +
        `${resourceName(resource)} cannot have by their CRD's schema: ${problem}. The API ` +
        `server drops unknown fields, so this filter never sees a value there.`,
    );
  }
}

/** {@link checkFieldPaths} once per resource (an operator re-resolves on every CRD change). */
export class FieldPathChecks {
  #checked = new Set<string>();

  /**
   * Checks the resources not checked before.
   * @param deps The client, logger and signal.
   * @param served The served resources with their handlers.
   * @returns Resolves when checked.
   */
  async check(
    deps: FieldCheckDeps,
    served: Iterable<{ readonly resource: Resource; readonly handlers: readonly FieldFiltered[] }>,
  ): Promise<void> {
    const checks: Promise<void>[] = [];
    for (const { resource, handlers } of served) {
      const name = resourceName(resource);
      if (this.#checked.has(name)) continue;
      this.#checked.add(name);
      checks.push(checkFieldPaths(deps, resource, handlers));
    }
    await Promise.all(checks);
  }
}
