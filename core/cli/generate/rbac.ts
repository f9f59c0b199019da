/**
 * `kopf generate rbac`: the permissions an operator needs, derived from its registry and its
 * run options, and the RBAC objects that grant exactly them.
 *
 * What the framework does, and hence what is granted:
 * - follows CustomResourceDefinitions (discovery): `list`, `watch` CRDs, cluster-wide;
 * - follows namespaces when namespace patterns have globs or negations: `list`, `watch`;
 * - per served resource: `list`, `watch` (every handler kind), plus `get`, `patch` for
 *   resource-changing handlers, daemons and timers (results, progress, finalizers), plus
 *   `patch` on `…/status` when the resource has that subresource;
 * - `create` Events where handled objects live (the credentials' namespace for cluster-scoped
 *   objects);
 * - peering unless standalone: `get`, `list`, `watch`, `patch` its peering objects, by name
 *   (the operator reads and watches only the one object, with a `metadata.name` field selector);
 * - Leases with leader election (`get`, `update` of its Lease by name; `create`) or shards
 *   (`get`, `list`, `create`, `update`, `delete`: their names are generated from a prefix);
 * - managed admission configurations (`get`, `patch` by name; `create`), only when the
 *   configuration's name is given (`settings.admission.managed` is set by a startup handler at
 *   run time, which this generator does not run) and there are webhook handlers of that kind;
 * - reconcile handlers: the reconciled resource (`list`, `watch`, `patch`, `…/status`), what they
 *   own (`list`, `watch`, `create`, `patch`: server-side apply) and watch (`list`, `watch`);
 * - what handler code declares with `declarePermissions()`.
 *
 * Namespaced permissions for literal namespaces go to a Role in each; cluster-wide operators
 * (`-A`) and namespace globs get a ClusterRole. `create` is never restricted by name:
 * Kubernetes' RBAC cannot (the name is not part of the request when it is authorized).
 * @module
 */

import { Document } from "yaml";
import type { OperatorRegistry } from "../../intents/registries.ts";
import { describeSelector, resolveSelector, type SelectorFields } from "../../intents/selectors.ts";
import { isLiteralNamespace, type NamespacePattern } from "../../structs/namespaces.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { Resource } from "../../structs/resources.ts";
import { declaredPermissions } from "../../api/permissions.ts";

/** The run options that change what the operator needs. */
export interface RbacOptions {
  /** Namespace patterns of `-n` (empty with `clusterwide`). */
  readonly namespaces: readonly NamespacePattern[];
  /** `-A`: cluster-wide. */
  readonly clusterwide: boolean;
  /** The name of the ServiceAccount, roles and bindings. */
  readonly name: string;
  /** The ServiceAccount's namespace (where the operator runs). */
  readonly accountNamespace: string;
  /** Peering off (`--standalone`; also implied by `shards`, as sharded replicas run without it). */
  readonly standalone: boolean;
  /** The Lease namespace with leader election or shards; `undefined`: no Leases. */
  readonly leases: string | undefined;
  /**
   * With `leases`: the shards' Leases (`--shards`; names made from a prefix, so not restricted
   * by name) instead of leader election's one Lease. @default false
   */
  readonly shards?: boolean;
  /** With `leases` and leader election: the Lease's name. @default "kopf-leader" */
  readonly leaseName?: string;
  /** The peering object's name (`--peering`). @default "default" */
  readonly peering?: string;
  /**
   * The name of the managed webhook configurations (`settings.admission.managed`); `undefined`:
   * the operator manages none, and gets no permission on webhook configurations.
   */
  readonly admissionManaged?: string | undefined;
}

/** Where a permission applies. */
export type Scope = { readonly cluster: true } | { readonly namespace: string };

/** One permission: verbs on one resource (or subresource), somewhere, for a reason. */
export interface Permission {
  /** API group (`""` for core). */
  readonly group: string;
  /** Plural, with `/subresource` if any. */
  readonly resource: string;
  /** Verbs, sorted. */
  readonly verbs: readonly string[];
  /** Only these objects (RBAC's `resourceNames`); absent: any object. */
  readonly resourceNames?: readonly string[];
  /** Cluster-wide, or one namespace. */
  readonly scope: Scope;
  /** Why the operator needs it (becomes a comment). */
  readonly reason: string;
}

const CRDS = { group: "apiextensions.k8s.io", plural: "customresourcedefinitions" };
const PEERINGS = { group: "kopf.dev", namespaced: "kopfpeerings", cluster: "clusterkopfpeerings" };
const LEASES = { group: "coordination.k8s.io", plural: "leases" };
const ADMISSION = "admissionregistration.k8s.io";
const VERB_ORDER = [
  "get",
  "list",
  "watch",
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
];

/** A selector that resolved to nothing. */
export class UnresolvedSelectorError extends Error {
  override name = "UnresolvedSelectorError";
}

/**
 * Derives the permissions of an operator.
 *
 * @param registry Its handlers (after loading its modules).
 * @param catalogue The resources to resolve selectors against (discovery or CRD files).
 * @param options Its run options.
 * @returns The permissions, merged per (group, resource, scope).
 * @throws {UnresolvedSelectorError} for a selector that matches no resource in the catalogue.
 */
export function requiredPermissions(
  registry: OperatorRegistry,
  catalogue: readonly Resource[],
  options: RbacOptions,
): Permission[] {
  const out = new Map<string, { p: Permission; verbs: Set<string>; reasons: Set<string> }>();
  const add = (
    group: string,
    resource: string,
    verbs: readonly string[],
    scope: Scope,
    reason: string,
    resourceNames?: readonly string[],
  ) => {
    const key = JSON.stringify([group, resource, scope, resourceNames ?? null]);
    const entry = out.get(key) ?? {
      p: { group, resource, verbs: [], scope, reason, ...(resourceNames ? { resourceNames } : {}) },
      verbs: new Set(),
      reasons: new Set(),
    };
    for (const verb of verbs) entry.verbs.add(verb);
    entry.reasons.add(reason);
    out.set(key, entry);
  };
  const literal = options.namespaces.filter(isLiteralNamespace);
  const globs = !options.clusterwide && literal.length < options.namespaces.length;
  const wide = options.clusterwide || globs || !options.namespaces.length;
  const scopesOf = (namespaced: boolean): Scope[] =>
    !namespaced || wide ? [{ cluster: true }] : literal.map((namespace) => ({ namespace }));
  const resolve = (selector: SelectorFields): Resource[] => {
    const { resources, ambiguous } = resolveSelector(selector, catalogue);
    if (ambiguous?.length) {
      throw new UnresolvedSelectorError(
        `${describeSelector(selector)} is ambiguous: ${
          ambiguous.map((r) => `${r.plural}.${r.group}`).join(", ")
        }`,
      );
    }
    if (!resources.length) {
      throw new UnresolvedSelectorError(`No resource matches ${describeSelector(selector)}`);
    }
    // As the operator serves them: the preferred version when none is given.
    const preferred = selector.version === undefined
      ? resources.filter((r) =>
        r.preferred || !resources.some((o) => o.preferred && sameKind(o, r))
      )
      : resources;
    return preferred;
  };

  add(
    CRDS.group,
    CRDS.plural,
    ["list", "watch"],
    { cluster: true },
    "discovery: follow CustomResourceDefinitions",
  );
  if (globs) {
    add(
      "",
      "namespaces",
      ["list", "watch"],
      { cluster: true },
      "follow namespaces matching the -n patterns",
    );
  }

  let eventsNamespaced = false;
  let eventsClusterScoped = false;
  for (const selector of registry.selectors()) {
    for (const resource of resolve(selector)) {
      const handlers = registry.handlersFor(resource);
      const writes = handlers.changing.length > 0 || handlers.spawning.length > 0;
      const kinds = [
        handlers.changing.length ? "changing handlers" : "",
        handlers.spawning.length ? "daemons/timers" : "",
        handlers.watching.length ? "event handlers" : "",
        handlers.indexing.length ? "indices" : "",
      ].filter(Boolean).join(", ");
      const verbs = writes ? ["get", "list", "watch", "patch"] : ["list", "watch"];
      for (const scope of scopesOf(resource.namespaced)) {
        add(resource.group, resource.plural, verbs, scope, `served: ${kinds}`);
        if (writes && resource.subresources.includes("status")) {
          add(
            resource.group,
            `${resource.plural}/status`,
            ["patch"],
            scope,
            "served: handler results and progress in status",
          );
        }
      }
      if (resource.namespaced) eventsNamespaced = true;
      else eventsClusterScoped = true;
    }
  }
  // Level-based reconcile handlers: the reconciled resource (patches, finalizers, status) and,
  // read through the shared cache, what they own (created and changed by server-side apply)
  // and watch.
  for (const { selector, handler } of registry.reconcilers()) {
    for (const resource of resolve(selector)) {
      for (const scope of scopesOf(resource.namespaced)) {
        add(resource.group, resource.plural, ["list", "watch", "patch"], scope, "reconciled");
        if (resource.subresources.includes("status")) {
          add(resource.group, `${resource.plural}/status`, ["patch"], scope, "reconciled: status");
        }
      }
      if (resource.namespaced) eventsNamespaced = true;
      else eventsClusterScoped = true;
    }
    for (const owned of handler.owns) {
      for (const resource of resolve(owned)) {
        for (const scope of scopesOf(resource.namespaced)) {
          add(
            resource.group,
            resource.plural,
            ["list", "watch", "create", "patch"],
            scope,
            "owned by reconciled objects (server-side apply)",
          );
          if (resource.subresources.includes("status")) {
            add(resource.group, `${resource.plural}/status`, ["patch"], scope, "owned: status");
          }
        }
      }
    }
    for (const watched of handler.watches) {
      for (const resource of resolve(watched.selector)) {
        for (const scope of scopesOf(resource.namespaced)) {
          add(resource.group, resource.plural, ["list", "watch"], scope, "watched by reconcile");
        }
      }
    }
  }
  if (eventsNamespaced) {
    for (const scope of scopesOf(true)) {
      add("", "events", ["create"], scope, "Events about handled objects");
    }
  }
  if (eventsClusterScoped) {
    add(
      "",
      "events",
      ["create"],
      { namespace: options.accountNamespace },
      "Events about handled cluster-scoped objects",
    );
  }

  // Sharded replicas run without peering (they are all active; startCoordination turns it off).
  if (!options.standalone && !(options.leases !== undefined && options.shards)) {
    // The operator gets and watches (field selector `metadata.name=`) its one peering object,
    // and patches its own entry into it: all by name.
    const peering = [options.peering ?? "default"];
    const verbs = ["get", "list", "watch", "patch"];
    if (options.clusterwide || !options.namespaces.length) {
      add(
        PEERINGS.group,
        PEERINGS.cluster,
        verbs,
        { cluster: true },
        "peering of cluster-wide operators (the peering object by name)",
        peering,
      );
    } else {
      for (const scope of scopesOf(true)) {
        add(
          PEERINGS.group,
          PEERINGS.namespaced,
          verbs,
          scope,
          "peering in the served namespaces (the peering object by name)",
          peering,
        );
      }
    }
  }
  if (options.leases !== undefined) {
    const scope = { namespace: options.leases };
    if (options.shards) {
      add(
        LEASES.group,
        LEASES.plural,
        ["get", "list", "create", "update", "delete"],
        scope,
        "shard and membership Leases (names made from a prefix: not restrictable by name)",
      );
    } else {
      add(
        LEASES.group,
        LEASES.plural,
        ["get", "update"],
        scope,
        "leader election: its Lease, by name",
        [options.leaseName ?? "kopf-leader"],
      );
      add(
        LEASES.group,
        LEASES.plural,
        ["create"],
        scope,
        "leader election: create its Lease when absent (create cannot be restricted by name)",
      );
    }
  }
  if (options.admissionManaged !== undefined) {
    for (const kind of ["validating", "mutating"] as const) {
      if (!registry.webhooks(kind).length) continue;
      const resource = `${kind}webhookconfigurations`;
      add(
        ADMISSION,
        resource,
        ["get", "patch"],
        { cluster: true },
        "managed admission webhook configuration (settings.admission.managed), by name",
        [options.admissionManaged],
      );
      add(
        ADMISSION,
        resource,
        ["create"],
        { cluster: true },
        "managed admission webhook configuration: create it when absent (create cannot be " +
          "restricted by name: this allows creating any webhook configuration)",
      );
    }
  }
  for (const declared of declaredPermissions(registry)) {
    for (const resource of resolve(declared.selector)) {
      const plural = declared.subresource
        ? `${resource.plural}/${declared.subresource}`
        : resource.plural;
      for (const scope of scopesOf(resource.namespaced)) {
        add(
          resource.group,
          plural,
          declared.verbs,
          scope,
          declared.reason ?? "declared by the handlers' code",
        );
      }
    }
  }

  return [...out.values()].map(({ p, verbs, reasons }) => ({
    ...p,
    verbs: [...verbs].sort((a, b) => VERB_ORDER.indexOf(a) - VERB_ORDER.indexOf(b)),
    reason: [...reasons].join("; "),
  }));
}

function sameKind(a: Resource, b: Resource): boolean {
  return a.group === b.group && a.plural === b.plural;
}

/**
 * The RBAC objects granting the permissions: a ServiceAccount, a ClusterRole with its
 * ClusterRoleBinding for cluster-wide permissions, a Role with its RoleBinding per namespace.
 *
 * @param permissions What to grant.
 * @param options The names and the ServiceAccount's namespace.
 * @returns The objects, as YAML documents with a comment per rule.
 */
export function rbacDocuments(
  permissions: readonly Permission[],
  options: Pick<RbacOptions, "name" | "accountNamespace">,
): Document[] {
  const subject = {
    kind: "ServiceAccount",
    name: options.name,
    namespace: options.accountNamespace,
  };
  const docs: Document[] = [];
  const push = (object: KubeObject, rules?: readonly Permission[]) => {
    const doc = new Document(object);
    rules?.forEach((rule, i) => {
      const node = doc.getIn(["rules", i], true) as { commentBefore?: string } | undefined;
      if (node) node.commentBefore = ` ${rule.reason}`;
      for (const key of ["apiGroups", "resources", "resourceNames", "verbs"]) {
        const list = doc.getIn(["rules", i, key], true) as { flow?: boolean } | undefined;
        if (list) list.flow = true;
      }
    });
    docs.push(doc);
  };
  const rules = (list: readonly Permission[]) =>
    list.map((p) => ({
      apiGroups: [p.group],
      resources: [p.resource],
      ...(p.resourceNames ? { resourceNames: [...p.resourceNames] } : {}),
      verbs: [...p.verbs],
    }));
  push({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: options.name, namespace: options.accountNamespace },
  });
  const cluster = permissions.filter((p) => "cluster" in p.scope);
  if (cluster.length) {
    push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: options.name },
      rules: rules(cluster),
    }, cluster);
    push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: options.name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: options.name },
      subjects: [subject],
    });
  }
  const namespaces = [
    ...new Set(permissions.flatMap((p) => "namespace" in p.scope ? [p.scope.namespace] : [])),
  ];
  for (const namespace of namespaces) {
    const here = permissions.filter((p) =>
      "namespace" in p.scope && p.scope.namespace === namespace
    );
    push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: options.name, namespace },
      rules: rules(here),
    }, here);
    push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: options.name, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: options.name },
      subjects: [subject],
    });
  }
  return docs;
}

/**
 * Renders documents as one multi-document YAML text with a header comment.
 *
 * @param docs The documents.
 * @param header The header comment's lines.
 * @returns The YAML text.
 */
export function renderYaml(docs: readonly Document[], header: readonly string[]): string {
  return header.map((line) => `# ${line}`.trimEnd()).join("\n") + "\n" +
    docs.map((doc) => `---\n${doc.toString({ lineWidth: 0, flowCollectionPadding: false })}`).join(
      "",
    );
}

/**
 * The resources that CRDs define, as discovery would report them (for resolving selectors
 * without a cluster).
 *
 * @param crds CustomResourceDefinition objects.
 * @returns One resource per served version; the storage version is the preferred one.
 */
export function resourcesOfCrds(crds: readonly KubeObject[]): Resource[] {
  return crds.flatMap((crd) => {
    const spec = crd.spec as {
      group: string;
      scope?: string;
      names: {
        kind: string;
        plural: string;
        singular?: string;
        shortNames?: string[];
        categories?: string[];
      };
      versions?: Array<
        {
          name: string;
          served?: boolean;
          storage?: boolean;
          subresources?: Record<string, unknown>;
        }
      >;
    };
    return (spec.versions ?? []).filter((v) => v.served !== false).map((v) => ({
      group: spec.group,
      version: v.name,
      plural: spec.names.plural,
      kind: spec.names.kind,
      singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
      namespaced: spec.scope !== "Cluster",
      verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
      shortNames: spec.names.shortNames ?? [],
      categories: spec.names.categories ?? [],
      subresources: Object.keys(v.subresources ?? {}),
      preferred: v.storage === true,
    }));
  });
}
