/**
 * What the tests of `deploy/` share (tests/deploy_test.ts, tests/deploy_sharded_test.ts,
 * tests/deploy_manifests_test.ts): the manifests read and applied with their cluster-scoped
 * objects named for the test, the permissions the operator uses and a wait until the
 * authorizer grants them, a kubeconfig of the ServiceAccount's token, the Deployment's
 * container, the operator run as that container would run it, and the permission errors in
 * its log.
 * @module
 */

import assert from "node:assert/strict";
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from "yaml";
import type { KubeClient } from "../core/client/client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { ApiError } from "../core/client/errors.ts";
import { NAMESPACED_PEERINGS } from "../core/engines/coordination/peering.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { type SpawnedOperator, spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

/** Deno.test options: the operator's subprocesses and sockets outlive a test's own checks. */
export const opts = { sanitizeOps: false, sanitizeResources: false };
/** The handlers the deployed operator runs. */
export const HANDLERS = "examples/01-minimal/example.ts";

/** Core v1 namespaces. */
export const NAMESPACES: ResourceRef = {
  group: "",
  version: "v1",
  plural: "namespaces",
  namespaced: false,
};

function rbac(plural: string, namespaced: boolean): ResourceRef {
  return { group: "rbac.authorization.k8s.io", version: "v1", plural, namespaced };
}

/** Where each kind of the manifests is created. */
export const RESOURCES: Readonly<Record<string, ResourceRef>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts", namespaced: true },
  ClusterRole: rbac("clusterroles", false),
  ClusterRoleBinding: rbac("clusterrolebindings", false),
  Role: rbac("roles", true),
  RoleBinding: rbac("rolebindings", true),
  KopfPeering: NAMESPACED_PEERINGS,
  NetworkPolicy: {
    group: "networking.k8s.io",
    version: "v1",
    plural: "networkpolicies",
    namespaced: true,
  },
  Deployment: { group: "apps", version: "v1", plural: "deployments", namespaced: true },
};

/** A rule of a Role or ClusterRole. */
export interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

/** Reads a multi-document manifest file. */
export async function manifests(path: string): Promise<KubeObject[]> {
  return parseAllDocuments(await Deno.readTextFile(path))
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((doc): doc is KubeObject => doc !== null);
}

/**
 * deploy/rbac.yaml rewritten for one test: the ClusterRole and ClusterRoleBinding renamed with
 * `suffix` (they are cluster-wide, tests share the cluster), the binding's subject moved to the
 * test's namespace, and each rule passed through `edit` (which may change or remove it).
 */
export async function rbacFor(
  namespace: string,
  suffix: string,
  edit: (kind: string, rule: Rule) => Rule | null = (_, rule) => rule,
): Promise<KubeObject[]> {
  const docs = await manifests("deploy/rbac.yaml");
  const clusterRoles = new Map<string, string>();
  for (const doc of docs) {
    if (doc.kind === "ClusterRole" || doc.kind === "ClusterRoleBinding") {
      const name = `${doc.metadata!.name}-${suffix}`;
      if (doc.kind === "ClusterRole") clusterRoles.set(doc.metadata!.name!, name);
      doc.metadata = { ...doc.metadata, name };
    }
  }
  for (const doc of docs) {
    if (Array.isArray(doc.rules)) {
      doc.rules = (doc.rules as Rule[]).flatMap((rule) => edit(doc.kind!, rule) ?? []);
    }
    if (doc.kind === "ClusterRoleBinding") {
      const roleRef = doc.roleRef as { name: string };
      roleRef.name = clusterRoles.get(roleRef.name) ??
        assert.fail(`no ClusterRole ${roleRef.name}`);
      for (const subject of doc.subjects as Subject[]) subject.namespace = namespace;
    }
  }
  return docs;
}

/** Where a manifest's object goes: the test's namespace if its kind is namespaced. */
function namespaceOf(doc: KubeObject, namespace: string): string | undefined {
  return RESOURCES[doc.kind!]?.namespaced ? namespace : undefined;
}

/** Creates the objects, or replaces them when they exist (what `kubectl apply` would do). */
export async function apply(
  client: KubeClient,
  docs: KubeObject[],
  namespace: string,
): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!] ?? assert.fail(`unexpected kind ${doc.kind}`);
    const ns = namespaceOf(doc, namespace);
    try {
      await client.api.create(resource, doc, { namespace: ns });
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409)) throw error;
      await client.api.replace(resource, doc.metadata!.name!, doc, { namespace: ns });
    }
  }
}

/** Deletes the cluster-scoped objects among the manifests (a missing one is fine). */
export async function deleteClusterScoped(client: KubeClient, docs: KubeObject[]): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!];
    if (!resource || resource.namespaced) continue;
    await client.api.delete(resource, doc.metadata!.name!).catch((error) => {
      if (!(error instanceof ApiError && error.code === 404)) throw error;
    });
  }
}

/** What a ServiceAccount may do, as the API server's authorizer answers it now. */
export interface Access {
  readonly verb: string;
  readonly group: string;
  readonly resource: string;
  /** For namespaced resources. */
  readonly namespaced?: boolean;
  /** For rules restricted by `resourceNames`: the object asked about. */
  readonly name?: string;
}

/** Every permission the operator uses in the tests here, and what `rbac.yaml` grants them. */
export const USED: readonly Access[] = [
  { verb: "list", group: "apiextensions.k8s.io", resource: "customresourcedefinitions" },
  { verb: "watch", group: "apiextensions.k8s.io", resource: "customresourcedefinitions" },
  // By name only (deploy/peering.yaml's object): the rule has `resourceNames`.
  ...["get", "list", "watch", "patch"].map((verb) => ({
    verb,
    group: "kopf.dev",
    resource: "kopfpeerings",
    namespaced: true,
    name: "default",
  })),
  ...["get", "list", "watch", "patch"].map((verb) => ({
    verb,
    group: "kopf.dev",
    resource: "kopfexamples",
    namespaced: true,
  })),
  { verb: "create", group: "", resource: "events", namespaced: true },
];

/**
 * Waits until the authorizer gives the ServiceAccount the expected answers (RBAC changes reach
 * the authorizer's cache a moment after they are stored), with SubjectAccessReviews.
 */
export async function awaitAccess(
  client: KubeClient,
  namespace: string,
  account: string,
  checks: readonly Access[],
  allowed: boolean,
): Promise<void> {
  for (const check of checks) {
    await eventually(
      async () => {
        const review = await client.http.json<{ status?: { allowed?: boolean } }>({
          method: "POST",
          path: "/apis/authorization.k8s.io/v1/subjectaccessreviews",
          body: {
            apiVersion: "authorization.k8s.io/v1",
            kind: "SubjectAccessReview",
            spec: {
              user: `system:serviceaccount:${namespace}:${account}`,
              groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`],
              resourceAttributes: {
                verb: check.verb,
                group: check.group,
                resource: check.resource,
                ...(check.namespaced ? { namespace } : {}),
                ...(check.name ? { name: check.name } : {}),
              },
            },
          },
        });
        return (review.status?.allowed ?? false) === allowed;
      },
      15_000,
      `${check.verb} ${check.resource} to be ${allowed ? "allowed" : "denied"}`,
    );
  }
}

/** A kubeconfig that authenticates with a fresh token of the ServiceAccount (TokenRequest API). */
export async function serviceAccountKubeconfig(
  client: KubeClient,
  namespace: string,
  account: string,
  path: string,
): Promise<void> {
  const request = await client.http.json<{ status?: { token?: string } }>({
    method: "POST",
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${account}/token`,
    body: {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 },
    },
  });
  const token = request.status?.token ?? assert.fail("TokenRequest returned no token");
  const admin = parseYaml(
    await Deno.readTextFile((await sharedControlPlane()).kubeconfigPath),
  ) as { clusters: Array<{ name: string; cluster: unknown }> };
  const cluster = admin.clusters[0] ?? assert.fail("the admin kubeconfig has no cluster");
  await Deno.writeTextFile(
    path,
    stringifyYaml({
      apiVersion: "v1",
      kind: "Config",
      clusters: [cluster],
      users: [{ name: account, user: { token } }],
      contexts: [{ name: account, context: { cluster: cluster.name, user: account, namespace } }],
      "current-context": account,
    }),
  );
}

/** The operator container of deploy/deployment.yaml. */
export interface Container {
  image: string;
  args: string[];
  env: Array<{ name: string; valueFrom?: { fieldRef?: { fieldPath?: string } } }>;
  livenessProbe: { httpGet: { path: string; port: string | number } };
  ports: Array<{ name?: string; containerPort: number }>;
}

/** The Deployment of deploy/deployment.yaml. */
export async function deployment(): Promise<KubeObject> {
  const [doc] = await manifests("deploy/deployment.yaml");
  return doc ?? assert.fail("deploy/deployment.yaml is empty");
}

/** The operator's container of a Deployment. */
export function containerOf(deployment: KubeObject): Container {
  const template = (deployment.spec as { template: { spec: { containers: Container[] } } })
    .template;
  return template.spec.containers[0] ?? assert.fail("no container in the Deployment");
}

/** A free TCP port on 127.0.0.1 (for the liveness endpoint). */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Runs `kopf run` the way the Deployment's Pod would: the container's arguments (with
 * `$(POD_NAMESPACE)` expanded and the liveness endpoint moved to a free local port), `POD_ID`
 * set to a Pod-like name, and the ServiceAccount's kubeconfig instead of the in-cluster one.
 */
export async function runAsPod(
  namespace: string,
  kubeconfig: string,
  podId: string,
): Promise<{ op: SpawnedOperator; liveness: string }> {
  const container = containerOf(await deployment());
  const port = freePort();
  let liveness = "";
  const args = container.args.map((arg) => {
    const expanded = arg.replaceAll("$(POD_NAMESPACE)", namespace);
    const option = ["--liveness=", "--metrics="].find((o) => expanded.startsWith(o));
    if (!option) return expanded;
    const url = new URL(expanded.slice(option.length));
    url.hostname = "127.0.0.1";
    url.port = String(port); // both on one server, as in the Pod
    if (option === "--liveness=") liveness = url.href;
    return `${option}${url.href}`;
  });
  assert.ok(liveness, `no --liveness in the container's arguments: ${container.args}`);
  // The second file turns on settings.posting.loggers (off by default, as in Kopf 1.44+), so that
  // the handler's log messages are posted as Events with the ServiceAccount's token.
  const op = await spawnOperator([
    HANDLERS,
    "tests/fixtures/post_log_messages.ts",
    "--verbose",
    ...args,
  ], {
    KUBECONFIG: kubeconfig,
    POD_ID: podId,
  });
  return { op, liveness };
}

/** A client, the CRDs, a namespace of the test and a directory for its kubeconfig; disposed together. */
export async function setup(prefix: string) {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  await applyCrds(client, "crds/peering.yaml");
  const namespace = await testNamespace(prefix);
  const dir = await tempDir("kopf-deploy-");
  return {
    client,
    namespace,
    kubeconfig: `${dir.path}/kubeconfig`,
    async [Symbol.asyncDispose]() {
      await deleteNamespace(await sharedControlPlane(), namespace).catch(() => {});
      await dir[Symbol.asyncDispose]();
      client[Symbol.dispose]();
    },
  };
}

/** Creates a KopfExample in the namespace. */
export async function createObject(client: KubeClient, namespace: string, name: string) {
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name },
    spec: { field: "value" },
  }, { namespace });
}
