/**
 * Declared permissions: the API access that handler code makes on its own (creating children,
 * deleting Pods…), which the framework cannot see. `kopf generate rbac` adds them to what it
 * derives from the handlers, as kubebuilder's RBAC markers do for Go operators.
 *
 * @example A create handler that makes Pods
 * ```ts
 * import { declarePermissions } from "./permissions.ts";
 * declarePermissions(["", "v1", "pods"], ["create"]);
 * ```
 * @module
 */

import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { parseSelector, type ResourceSpec, type SelectorFields } from "../intents/selectors.ts";
import type { TypedResource } from "../intents/typed_resources.ts";

/** The verbs of RBAC rules for resources. */
export type RbacVerb =
  | "get"
  | "list"
  | "watch"
  | "create"
  | "update"
  | "patch"
  | "delete"
  | "deletecollection";

const VERBS: readonly RbacVerb[] = [
  "get",
  "list",
  "watch",
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
];

/** One declaration of {@link declarePermissions}. */
export interface DeclaredPermission {
  /** The resource(s), as a handler would name them. */
  readonly selector: SelectorFields;
  /** The verbs used. */
  readonly verbs: readonly RbacVerb[];
  /** A subresource (`status`, `scale`, …), if the access is to it. */
  readonly subresource: string | undefined;
  /** Why, for the comment of the generated rule. */
  readonly reason: string | undefined;
}

/** Options of {@link declarePermissions}. */
export interface DeclarePermissionsOptions {
  /** The subresource accessed (`status`, `scale`, `log`, …). */
  readonly subresource?: string;
  /** Why the handlers need it (becomes a comment in the generated RBAC). */
  readonly reason?: string;
  /** The registry to declare into. @default the default registry */
  readonly registry?: OperatorRegistry;
}

const declared = new WeakMap<OperatorRegistry, DeclaredPermission[]>();

/**
 * Declares that handler code uses these verbs on these resources by itself (beyond what the
 * framework does for the handlers: watching, patching, posting Events), so that
 * `kopf generate rbac` grants them. Has no effect at run time.
 *
 * @param spec The resource(s), as for handlers: a name, `[group, version, plural]`, selector
 *   fields or a typed resource constant.
 * @param verbs The verbs used.
 * @param options Subresource, reason, registry.
 * @throws {TypeError} for an unknown verb or no verbs.
 * @example Children Pods
 * ```ts
 * import { declarePermissions } from "./permissions.ts";
 * declarePermissions(["", "v1", "pods"], ["create", "delete"], { reason: "children of kopfexamples" });
 * ```
 */
export function declarePermissions(
  spec: ResourceSpec | TypedResource<unknown>,
  verbs: readonly RbacVerb[],
  options: DeclarePermissionsOptions = {},
): void {
  if (!verbs.length) throw new TypeError("declarePermissions() needs at least one verb");
  for (const verb of verbs) {
    if (!VERBS.includes(verb)) {
      throw new TypeError(`Unknown verb '${verb}'; use ${VERBS.join(", ")}`);
    }
  }
  const registry = options.registry ?? getDefaultRegistry();
  const list = declared.get(registry) ?? [];
  list.push({
    selector: parseSelector(spec),
    verbs: [...verbs],
    subresource: options.subresource,
    reason: options.reason,
  });
  declared.set(registry, list);
}

/**
 * The permissions declared into a registry.
 *
 * @param registry The registry.
 * @returns The declarations, in order.
 */
export function declaredPermissions(registry: OperatorRegistry): readonly DeclaredPermission[] {
  return declared.get(registry) ?? [];
}
