/**
 * The command line of `kopf generate rbac`: loads the handler modules into a fresh registry,
 * resolves their resources (from `--crd` files, else from the cluster's discovery), and prints
 * the RBAC manifests — or, with `--verify`, asks the API server whether the ServiceAccount (or,
 * with `--self`, the current credentials) has each permission, and names every missing one.
 * @module
 */

import { parseArgs } from "node:util";
import { KubeClient } from "../../client/client.ts";
import {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "../../intents/registries.ts";
import { createSettings } from "../../settings/settings.ts";
import type { Resource } from "../../structs/resources.ts";
import { loadModule } from "../cli.ts";
import { applyScalingOptions, SCALING_OPTIONS } from "../cli_scaling.ts";
import { type ToolingIo, UsageError } from "./commands.ts";
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
      --no-admission          No permissions for managing admission webhook configurations.
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
  "no-admission": { type: "boolean" },
  crd: { type: "string", multiple: true },
  output: { type: "string", short: "o" },
  verify: { type: "boolean" },
  self: { type: "boolean" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  help: { type: "boolean", short: "h" },
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
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], allowPositionals: true, options: OPTIONS });
  } catch (error) {
    throw new UsageError(
      `${error instanceof Error ? error.message : error} (see kopf generate rbac --help)`,
    );
  }
  const o = parsed.values;
  if (o.help) {
    io.output(USAGE);
    return 0;
  }
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
    admission: !o["no-admission"],
  };

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
    const total = permissions.reduce((n, p) => n + p.verbs.length, 0);
    io.print(
      missing.length
        ? `${missing.length} of ${total} permissions are missing for ${who}.`
        : `All ${total} permissions are granted to ${who}.`,
    );
    return missing.length ? 1 : 0;
  }

  const text = renderYaml(rbacDocuments(permissions, options), [
    `Generated by \`kopf generate rbac ${args.join(" ")}\`.`,
    "Exactly what the operator uses; generate again when its handlers or options change.",
  ]);
  if (o.output) {
    await Deno.writeTextFile(o.output, text);
    io.print(`Wrote ${permissions.length} rules for ${options.name} to ${o.output}.`);
  } else io.output(text);
  return 0;
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
  const checks = permissions.flatMap((p) => p.verbs.map((verb) => ({ p, verb })));
  const answers = await Promise.all(checks.map(async ({ p, verb }) => {
    const [resource, subresource] = p.resource.split("/");
    const attributes = {
      verb,
      group: p.group,
      resource,
      ...(subresource ? { subresource } : {}),
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
  }));
  checks.forEach(({ p, verb }, i) => {
    if (answers[i]) return;
    const what = p.group ? `${p.resource}.${p.group}` : p.resource;
    const where = "namespace" in p.scope ? `in namespace ${p.scope.namespace}` : "cluster-wide";
    missing.push(`${verb} ${what} ${where} (${p.reason})`);
  });
  return missing;
}
