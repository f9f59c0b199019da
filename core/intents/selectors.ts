/**
 * Resource selectors: how handlers name the resources they serve, and how those names are
 * resolved against discovery, with Kopf's rules (any name form, dotted `plural.group`,
 * `group/version`, categories, EVERYTHING, core v1 priority, ambiguity refusal).
 * @module
 */

import type { Resource } from "../structs/resources.ts";

/** Marker selecting every resource (of a group/version, or of the cluster). */
export const EVERYTHING: unique symbol = Symbol.for("kopf.EVERYTHING");

/** Explicit selector fields; all given fields must match. */
export interface SelectorFields {
  /** API group (`""` for core). */
  readonly group?: string;
  /** API version; when omitted, only preferred versions are served. */
  readonly version?: string;
  /** Any name form: plural, singular, kind or short name. */
  readonly name?: string;
  /** Kind, e.g. `KopfExample`. */
  readonly kind?: string;
  /** Plural, e.g. `kopfexamples`. */
  readonly plural?: string;
  /** Singular, e.g. `kopfexample`. */
  readonly singular?: string;
  /** Short name, e.g. `kex`. */
  readonly shortcut?: string;
  /** Category, e.g. `all`. */
  readonly category?: string;
  /** Every resource (of the group/version if given). */
  readonly everything?: boolean;
}

/**
 * How a handler names its resource:
 * - `"kopfexamples"` (any name form), `"deployments.apps"`, `"pods.v1"`, `"kopfexamples.v1.kopf.dev"`;
 * - `["kopf.dev", "kopfexamples"]`, `["kopf.dev/v1", "kopfexamples"]`, `["v1", "pods"]`,
 *   `["kopf.dev", "v1", "kopfexamples"]`;
 * - `{ group, version, kind, plural, singular, shortcut, category }`;
 * - `EVERYTHING`, or `["apps", "v1", EVERYTHING]`.
 */
export type ResourceSpec =
  | string
  | typeof EVERYTHING
  | readonly (string | typeof EVERYTHING)[]
  | SelectorFields;

const VERSION = /^v\d+(?:(?:alpha|beta)\d+)?$/;

/**
 * Normalises any {@link ResourceSpec} into selector fields.
 * @param spec The handler's resource spec.
 * @returns The selector.
 * @throws {TypeError} for empty or over-long specs.
 */
export function parseSelector(spec: ResourceSpec): SelectorFields {
  if (spec === EVERYTHING) return { everything: true };
  if (typeof spec === "string") return parseName(spec);
  if (!Array.isArray(spec)) {
    // A full typed resource reference (`typedResource({…, namespaced})`) also says the scope,
    // which is not a selector field.
    const { namespaced: _, ...fields } = spec as SelectorFields & { namespaced?: unknown };
    return fields;
  }
  const parts = spec as readonly (string | typeof EVERYTHING)[];
  const last = parts[parts.length - 1];
  const named = last === EVERYTHING
    ? { everything: true }
    : typeof last === "string"
    ? { name: last }
    : undefined;
  if (!named || parts.length === 0 || parts.length > 3) {
    throw new TypeError(
      `A resource spec needs 1 to 3 parts ending with a name or EVERYTHING, got ${parts.length}`,
    );
  }
  const [a, b] = parts.slice(0, -1) as string[];
  if (parts.length === 1) return typeof last === "string" ? parseName(last) : named;
  if (parts.length === 3) return { group: a === "v1" ? "" : a!, version: b!, ...named };
  if (a === "v1") return { group: "", version: "v1", ...named };
  if (a!.includes("/")) {
    const [group, version] = a!.split("/", 2) as [string, string];
    return { group, version, ...named };
  }
  return { group: a!, ...named };
}

function parseName(text: string): SelectorFields {
  if (!text) throw new TypeError("A resource name must not be empty");
  if (text.includes("/")) {
    throw new TypeError(
      `Resource "${text}": give the group/version and the name separately, e.g. ["kopf.dev/v1", "kopfexamples"]`,
    );
  }
  const [name, ...rest] = text.split(".");
  if (rest.length === 0) return { name: name! };
  if (VERSION.test(rest[0]!)) {
    return {
      name: name!,
      version: rest[0]!,
      group: rest.length === 1 ? "" : rest.slice(1).join("."),
    };
  }
  return { name: name!, group: rest.join(".") };
}

/** Whether the selector names a specific resource (so ambiguity matters). */
export function isSpecific(selector: SelectorFields): boolean {
  return !selector.everything && !selector.category &&
    [selector.name, selector.kind, selector.plural, selector.singular, selector.shortcut].some((
      x,
    ) => x !== undefined);
}

/**
 * Whether a resource matches a selector (before the ambiguity rules).
 * @param selector The selector.
 * @param resource A discovered resource.
 * @returns Whether it matches.
 */
export function matchesResource(selector: SelectorFields, resource: Resource): boolean {
  if (selector.group !== undefined && selector.group !== resource.group) return false;
  if (
    selector.version !== undefined ? selector.version !== resource.version : !resource.preferred
  ) return false;
  if (selector.kind !== undefined && selector.kind !== resource.kind) return false;
  if (selector.plural !== undefined && selector.plural !== resource.plural) return false;
  if (selector.singular !== undefined && selector.singular !== resource.singular) return false;
  if (selector.shortcut !== undefined && !resource.shortNames.includes(selector.shortcut)) {
    return false;
  }
  if (selector.category !== undefined && !resource.categories.includes(selector.category)) {
    return false;
  }
  if (selector.name !== undefined) {
    const n = selector.name;
    const names = [resource.plural, resource.singular, resource.kind, ...resource.shortNames];
    if (!names.includes(n) && resource.kind.toLowerCase() !== n.toLowerCase()) return false;
  }
  if (selector.everything && isEventsResource(resource)) return false;
  return true;
}

function isEventsResource(resource: Resource): boolean {
  return resource.plural === "events" &&
    (resource.group === "" || resource.group === "events.k8s.io");
}

/** The outcome of resolving one selector. */
export interface Resolution {
  /** Resources to serve. */
  readonly resources: Resource[];
  /** Set when a specific name matched several groups: nothing is served. */
  readonly ambiguous?: Resource[];
}

/**
 * Resolves a selector against the discovered resources with Kopf's rules: core v1 wins over
 * other groups; a specific name matching several other groups is ambiguous and serves nothing;
 * categories and EVERYTHING may match many. Only watchable resources are returned.
 *
 * @param selector The selector.
 * @param resources Discovered resources.
 * @returns What to serve (and what was ambiguous).
 */
export function resolveSelector(
  selector: SelectorFields,
  resources: readonly Resource[],
): Resolution {
  const watchable = (r: Resource) =>
    r.verbs.length === 0 || (r.verbs.includes("list") && r.verbs.includes("watch"));
  const found = resources.filter((r) => watchable(r) && matchesResource(selector, r));
  if (!isSpecific(selector)) return { resources: found };
  const groups = new Set(found.map((r) => r.group));
  if (groups.size <= 1) return { resources: found };
  const core = found.filter((r) => r.group === "");
  if (core.length) return { resources: core };
  return { resources: [], ambiguous: found };
}

/** A short text naming a selector, for messages. */
export function describeSelector(selector: SelectorFields): string {
  if (selector.everything) {
    return `EVERYTHING${selector.group !== undefined ? ` in ${selector.group || "v1"}` : ""}`;
  }
  const parts = Object.entries(selector).filter(([, v]) => v !== undefined).map(([k, v]) =>
    `${k}=${JSON.stringify(v)}`
  );
  return parts.join(" ");
}
