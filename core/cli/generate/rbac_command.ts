/**
 * The command line of `kopf generate rbac`: loads the handler modules into a fresh registry,
 * resolves their resources (from `--crd` files, else from the cluster's discovery), and prints
 * the RBAC manifests — or, with `--verify`, asks the API server whether the ServiceAccount (or,
 * with `--self`, the current credentials) has each permission, and names every missing one.
 * @module
 */

import { KubeClient } from "../../client/client.ts";
import { ApiError } from "../../client/errors.ts";
import {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "../../intents/registries.ts";
import { createSettings } from "../../settings/settings.ts";
import type { Resource } from "../../structs/resources.ts";
import { loadModule } from "../loading.ts";
import { applyScalingOptions, SCALING_OPTIONS } from "../scaling.ts";
import { commandLine, type ToolingIo, UsageError } from "./_io.ts";
import {
  type Permission,
  rbacDocuments,
  type RbacOptions,
  renderYaml,
  requiredPermissions,
  resourcesOfCrds,
  UnresolvedSelectorError,
} from "./rbac.ts";
import { readCrdFiles } from "./types.ts";

const USAGE = `Usage: kopf generate rbac [OPTIONS] [FILES]...

Prints a ServiceAccount, a ClusterRole/Roles and their bindings with exactly the permissions the
operator made of FILES and -m modules needs when run with the same -n/-A/--standalone/
--leader-elect options (see docs/tooling.md). Handler code declares its own API calls with
declarePermissions().

Options:
  -m, --module MODULE         Import a module; repeatable.
  -n, --namespace PATTERN     The namespaces served (as for kopf run); repeatable.
  -A, --all-namespaces        Cluster-wide (the default without -n).
      --standalone            No peering.
      --name NAME             Name of the ServiceAccount, roles and bindings (default: kopf-operator).
      --account-namespace NS  The ServiceAccount's namespace (default: the first -n namespace,
                              else default).
  -P, --peering NAME          The peering object's name, as for kopf run (default: default);
                              the peering rules are restricted to it.
      --admission-managed NAME
                              The operator manages its webhook configurations under NAME
                              (what its startup handler sets in settings.admission.managed,
                              which is not known without running it): grant get/patch on
                              them by name, and create (not restrictable by name). Without
                              it, no permission on webhook configurations is granted.
      --crd FILE              Resolve resources from these CRD files instead of the cluster; repeatable.
  -o, --output FILE           Write to FILE instead of standard output.
      --verify                Ask the cluster whether the ServiceAccount has every permission
                              (SubjectAccessReview); print each missing one; exit 1 if any.
      --self                  With --verify: check the current credentials instead
                              (SelfSubjectAccessReview).
      --kubeconfig PATH       Kubeconfig file.
      --context NAME          Kubeconfig context.
  -h, --help                  Show this help.
Leader election and shards (Leases): --leader-elect, --shards, --lease-name, --lease-namespace.
`;

const OPTIONS = {
  module: { type: "string", short: "m", multiple: true },
  namespace: { type: "string", short: "n", multiple: true },
  "all-namespaces": { type: "boolean", short: "A" },
  standalone: { type: "boolean" },
  name: { type: "string" },
  "account-namespace": { type: "string" },
  peering: { type: "string", short: "P" },
  "admission-managed": { type: "string" },
  crd: { type: "string", multiple: true },
  output: { type: "string", short: "o" },
  verify: { type: "boolean" },
  self: { type: "boolean" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  ...SCALING_OPTIONS,
} as const;

/**
 * Runs `kopf generate rbac`.
 *
 * @param args The arguments after `rbac`.
 * @param io Output channels.
 * @returns The exit code (1 when `--verify` finds missing permissions).
 */
export async function rbacCommand(args: readonly string[], io: ToolingIo): Promise<number> {
  const parsed = commandLine(
    args,
    { name: "kopf generate rbac", usage: USAGE, options: OPTIONS },
    io,
  );
  if (!parsed) return 0;
  const o = parsed.values;
  const namespaces = o.namespace ?? [];
  if (o["all-namespaces"] && namespaces.length) {
    throw new UsageError("--namespace and --all-namespaces are mutually exclusive");
  }
  if (o.self && !o.verify) throw new UsageError("--self needs --verify");
  if (!parsed.positionals.length && !o.module?.length) {
    throw new UsageError(
      "Nothing to derive from: give handler files or -m modules (see kopf generate rbac --help)",
    );
  }
  const settings = createSettings();
  const invalid = applyScalingOptions(o, settings);
  if (invalid) throw new UsageError(invalid);
  const literal = namespaces.find((ns) => !/[,*?!]/.test(ns));
  const accountNamespace = o["account-namespace"] ?? literal ?? "default";
  const leasing = settings.leadership.enabled || settings.sharding.enabled;
  const options: RbacOptions = {
    namespaces,
    clusterwide: o["all-namespaces"] ?? !namespaces.length,
    name: o.name ?? "kopf-operator",
    accountNamespace,
    standalone: o.standalone ?? false,
    leases: leasing
      ? (settings.leadership.enabled
        ? settings.leadership.namespace
        : settings.sharding.namespace) ??
        accountNamespace
      : undefined,
    shards: settings.sharding.enabled && !settings.leadership.enabled,
    leaseName: settings.leadership.name,
    peering: o.peering ?? "default",
    admissionManaged: o["admission-managed"],
  };
  if (
    o["admission-managed"] !== undefined &&
    !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(o["admission-managed"])
  ) {
    throw new UsageError(
      `--admission-managed ${
        JSON.stringify(o["admission-managed"])
      } is not a valid object name (a DNS subdomain, e.g. auto.kopf.dev)`,
    );
  }

  const registry = await loadRegistry([
    ...parsed.positionals.map((p) => [p, false] as const),
    ...(o.module ?? []).map((m) => [m, true] as const),
  ]);
  const kubeconfig = o.kubeconfig ?? io.kubeconfig;
  const connect = () =>
    KubeClient.connect({
      ...(kubeconfig ? { kubeconfig } : {}),
      ...(o.context ? { context: o.context } : {}),
    });

  let catalogue: Resource[];
  if (o.crd?.length) catalogue = resourcesOfCrds(await readCrdFiles(o.crd));
  else {
    try {
      using client = await connect();
      catalogue = await client.discovery.resources();
    } catch (error) {
      throw new UsageError(
        `Cannot resolve the handlers' resources without a cluster (${
          error instanceof Error ? error.message : error
        }); give --crd FILE or a reachable --kubeconfig`,
      );
    }
  }
  let permissions: Permission[];
  try {
    permissions = requiredPermissions(registry, catalogue, options);
  } catch (error) {
    if (!(error instanceof UnresolvedSelectorError)) throw error;
    const source = o.crd?.length
      ? "in the --crd files (without --crd, the cluster's resources are used)"
      : "in the cluster";
    throw new UsageError(`${error.message} ${source}`);
  }

  if (o.verify) {
    using client = await connect();
    const user = o.self ? undefined : `system:serviceaccount:${accountNamespace}:${options.name}`;
    const missing = await verify(client, permissions, user);
    for (const line of missing) io.print(`missing: ${line}`);
    const who = user ?? "the current credentials";
    const total = permissions.reduce(
      (n, p) => n + p.verbs.length * (p.resourceNames?.length ?? 1),
      0,
    );
    io.print(
      missing.length
        ? `${missing.length} of ${total} permissions are missing for ${who}.`
        : `All ${total} permissions are granted to ${who}.`,
    );
    return missing.length ? 1 : 0;
  }

  const note = unmanagedWebhooksNote(registry, options);
  const text = renderYaml(rbacDocuments(permissions, options), [
    `Generated by \`kopf generate rbac ${args.join(" ")}\`.`,
    "Exactly what the operator uses; generate again when its handlers or options change.",
    ...(note ? ["", ...note] : []),
  ]);
  if (o.output) {
    await Deno.writeTextFile(o.output, text);
    io.print(`Wrote ${permissions.length} rules for ${options.name} to ${o.output}.`);
    if (note) io.print(note.join(" "));
  } else io.output(text);
  return 0;
}

/** The note for admission handlers without `--admission-managed`, or undefined. */
function unmanagedWebhooksNote(
  registry: OperatorRegistry,
  options: RbacOptions,
): string[] | undefined {
  if (options.admissionManaged !== undefined) return undefined;
  if (!registry.webhooks("validating").length && !registry.webhooks("mutating").length) {
    return undefined;
  }
  return [
    "The handlers include admission webhooks, but no permission on webhook configurations is",
    "granted: if a startup handler sets settings.admission.managed, generate again with",
    "--admission-managed NAME (that name).",
  ];
}

/** Imports the modules into a fresh default registry (restored afterwards) and returns it. */
async function loadRegistry(
  targets: ReadonlyArray<readonly [string, boolean]>,
): Promise<OperatorRegistry> {
  const previous = getDefaultRegistry();
  const registry = new OperatorRegistry();
  setDefaultRegistry(registry);
  try {
    for (const [target, isModule] of targets) {
      try {
        await loadModule(target, isModule, true);
      } catch (error) {
        throw new UsageError(
          `Cannot load handlers from ${target}: ${
            error instanceof Error ? error.message.split("\n")[0] : error
          }`,
        );
      }
    }
  } finally {
    setDefaultRegistry(previous);
  }
  return registry;
}

/** One line per missing (verb, resource, scope), as the API server's authorizer answers now. */
async function verify(
  client: KubeClient,
  permissions: readonly Permission[],
  user: string | undefined,
): Promise<string[]> {
  const missing: string[] = [];
  const checks = permissions.flatMap((p) =>
    p.verbs.flatMap((verb) => (p.resourceNames ?? [undefined]).map((name) => ({ p, verb, name })))
  );
  const answers = await Promise.all(checks.map(async ({ p, verb, name }) => {
    const [resource, subresource] = p.resource.split("/");
    const attributes = {
      verb,
      group: p.group,
      resource,
      ...(subresource ? { subresource } : {}),
      ...(name !== undefined ? { name } : {}),
      ...("namespace" in p.scope ? { namespace: p.scope.namespace } : {}),
    };
    const namespace = user?.split(":")[2];
    const review = await client.http.json<{ status?: { allowed?: boolean } }>({
      method: "POST",
      path: user
        ? "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        : "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
      body: {
        apiVersion: "authorization.k8s.io/v1",
        kind: user ? "SubjectAccessReview" : "SelfSubjectAccessReview",
        spec: {
          resourceAttributes: attributes,
          ...(user
            ? {
              user,
              groups: [
                "system:serviceaccounts",
                `system:serviceaccounts:${namespace}`,
                "system:authenticated",
              ],
            }
            : {}),
        },
      },
    });
    return review.status?.allowed === true;
  })).catch((error) => {
    // Not served: an API server without authorization (the embedded emulator grants everything).
    if (error instanceof ApiError && error.code === 404) {
      throw new UsageError(
        `--verify: the API server at ${client.http.connection.server} has no authorization API ` +
          "(authorization.k8s.io/v1 is not served, as on the embedded emulator, which grants " +
          "every request): verify against a real cluster",
      );
    }
    throw error;
  });
  checks.forEach(({ p, verb, name }, i) => {
    if (answers[i]) return;
    const what = (p.group ? `${p.resource}.${p.group}` : p.resource) +
      (name !== undefined ? ` named ${name}` : "");
    const where = "namespace" in p.scope ? `in namespace ${p.scope.namespace}` : "cluster-wide";
    missing.push(`${verb} ${what} ${where} (${p.reason})`);
  });
  return missing;
}
