/**
 * Descriptions of API resources (what discovery reports) and the URL paths that address them.
 * No I/O: the client layer fills these from discovery; the reactor matches selectors on them.
 * @module
 */

/** One API resource as served by the API server, e.g. `kopfexamples.v1.kopf.dev`. */
export interface Resource {
  /** API group; `""` for the core group. */
  readonly group: string;
  /** API version within the group, e.g. `v1`. */
  readonly version: string;
  /** Plural name used in URLs, e.g. `kopfexamples`. */
  readonly plural: string;
  /** Kind of the objects, e.g. `KopfExample`. */
  readonly kind: string;
  /** Singular name, e.g. `kopfexample` (may be empty in old discovery data). */
  readonly singular: string;
  /** Whether objects live in namespaces. */
  readonly namespaced: boolean;
  /** Verbs the resource supports, e.g. `list`, `watch`, `patch`. */
  readonly verbs: readonly string[];
  /** Short names, e.g. `kex`. */
  readonly shortNames: readonly string[];
  /** Categories, e.g. `all`. */
  readonly categories: readonly string[];
  /** Subresources such as `status` and `scale`. */
  readonly subresources: readonly string[];
  /** Whether this version is the preferred one of its group. */
  readonly preferred: boolean;
}

/**
 * The `apiVersion` of a resource's objects: `v1` for the core group, else `group/version`.
 * @param resource The resource.
 * @returns The `apiVersion` string.
 */
export function apiVersionOf(resource: Pick<Resource, "group" | "version">): string {
  return resource.group ? `${resource.group}/${resource.version}` : resource.version;
}

/**
 * A short human name such as `kopfexamples.v1.kopf.dev` or `pods.v1`.
 * @param resource The resource.
 * @returns The name, as used in logs.
 */
export function resourceName(resource: Pick<Resource, "group" | "version" | "plural">): string {
  return [resource.plural, resource.version, resource.group].filter(Boolean).join(".");
}

/** Which objects (or object) of a resource a path addresses. */
export interface PathOptions {
  /** Namespace; omitted for cluster-scoped resources or cluster-wide lists. */
  readonly namespace?: string | undefined;
  /** Object name; omitted for collections. */
  readonly name?: string | undefined;
  /** Subresource such as `status`; requires a name. */
  readonly subresource?: string | undefined;
}

/**
 * Builds the URL path of a collection, an object, or an object's subresource.
 *
 * @param resource The resource.
 * @param options Namespace, name, subresource.
 * @returns A path such as `/apis/kopf.dev/v1/namespaces/ns/kopfexamples/x/status`.
 * @throws {RangeError} when a subresource is given without a name.
 */
export function resourcePath(
  resource: Pick<Resource, "group" | "version" | "plural" | "namespaced">,
  options: PathOptions = {},
): string {
  const base = resource.group
    ? `/apis/${resource.group}/${resource.version}`
    : `/api/${resource.version}`;
  const ns = resource.namespaced && options.namespace
    ? `/namespaces/${encodeURIComponent(options.namespace)}`
    : "";
  let path = `${base}${ns}/${resource.plural}`;
  if (options.name !== undefined) path += `/${encodeURIComponent(options.name)}`;
  if (options.subresource !== undefined) {
    if (options.name === undefined) throw new RangeError("A subresource path needs an object name");
    path += `/${options.subresource}`;
  }
  return path;
}
