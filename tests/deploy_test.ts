/**
 * The deployment manifests of `deploy/` against the real API server (RBAC on): the operator runs
 * as the ServiceAccount of `deploy/rbac.yaml` — with a token from the TokenRequest API in a
 * kubeconfig of its own — with the arguments and environment of `deploy/deployment.yaml`, and
 * peers in the KopfPeering of `deploy/peering.yaml`. It must handle an object, post Events,
 * keep its peering entry and answer the liveness probe, with no permission error. Then, with
 * one rule removed at a time, it must report a clear permission error: the rules are needed and
 * the test can fail. The Deployment itself is created too: its ReplicaSet makes a Pod (the test
 * plane has no kubelet, so it never runs), which the ServiceAccount admission accepts.
 *
 * Cluster-scoped objects (the ClusterRole and its binding) get names unique to the test and are
 * deleted in `finally`; everything else lives in the test's namespace.
 */

import assert from "node:assert/strict";
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from "yaml";
import type { KubeClient } from "../core/client/client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { ApiError } from "../core/client/errors.ts";
import { NAMESPACED_PEERINGS, parsePeers } from "../core/engines/coordination/peering.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { EVENTS, PODS, waitFor } from "./_examples.ts";
import { type SpawnedOperator, spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const HANDLERS = "examples/01-minimal/example.ts";

const NAMESPACES: ResourceRef = {
  group: "",
  version: "v1",
  plural: "namespaces",
  namespaced: false,
};

function rbac(plural: string, namespaced: boolean): ResourceRef {
  return { group: "rbac.authorization.k8s.io", version: "v1", plural, namespaced };
}

/** Where each kind of the manifests is created. */
const RESOURCES: Readonly<Record<string, ResourceRef>> = {
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

interface Rule {
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
async function manifests(path: string): Promise<KubeObject[]> {
  return parseAllDocuments(await Deno.readTextFile(path))
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((doc): doc is KubeObject => doc !== null);
}

/**
 * deploy/rbac.yaml rewritten for one test: the ClusterRole and ClusterRoleBinding renamed with
 * `suffix` (they are cluster-wide, tests share the cluster), the binding's subject moved to the
 * test's namespace, and each rule passed through `edit` (which may change or remove it).
 */
async function rbacFor(
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

function namespaceOf(doc: KubeObject, namespace: string): string | undefined {
  return RESOURCES[doc.kind!]?.namespaced ? namespace : undefined;
}

/** Creates the objects, or replaces them when they exist (what `kubectl apply` would do). */
async function apply(client: KubeClient, docs: KubeObject[], namespace: string): Promise<void> {
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
async function deleteClusterScoped(client: KubeClient, docs: KubeObject[]): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!];
    if (!resource || resource.namespaced) continue;
    await client.api.delete(resource, doc.metadata!.name!).catch((error) => {
      if (!(error instanceof ApiError && error.code === 404)) throw error;
    });
  }
}

/** What a ServiceAccount may do, as the API server's authorizer answers it now. */
interface Access {
  readonly verb: string;
  readonly group: string;
  readonly resource: string;
  /** For namespaced resources. */
  readonly namespaced?: boolean;
  /** For rules restricted by `resourceNames`: the object asked about. */
  readonly name?: string;
}

/** Every permission the operator uses in the tests here, and what `rbac.yaml` grants them. */
const USED: readonly Access[] = [
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
async function awaitAccess(
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
async function serviceAccountKubeconfig(
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
interface Container {
  image: string;
  args: string[];
  env: Array<{ name: string; valueFrom?: { fieldRef?: { fieldPath?: string } } }>;
  livenessProbe: { httpGet: { path: string; port: string | number } };
  ports: Array<{ name?: string; containerPort: number }>;
}

async function deployment(): Promise<KubeObject> {
  const [doc] = await manifests("deploy/deployment.yaml");
  return doc ?? assert.fail("deploy/deployment.yaml is empty");
}

function containerOf(deployment: KubeObject): Container {
  const template = (deployment.spec as { template: { spec: { containers: Container[] } } })
    .template;
  return template.spec.containers[0] ?? assert.fail("no container in the Deployment");
}

/** A free TCP port on 127.0.0.1 (for the liveness endpoint). */
function freePort(): number {
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
async function runAsPod(
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

async function setup(prefix: string) {
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

/** Lines that show a permission problem. */
function permissionErrors(lines: readonly string[]): string[] {
  // The timestamp is left out: its milliseconds can read "403" too.
  return lines.filter((line) => /\b403\b|forbidden/i.test(line.replace(/^\[[^\]]*\]/, "")));
}

async function createObject(client: KubeClient, namespace: string, name: string) {
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name },
    spec: { field: "value" },
  }, { namespace });
}

Deno.test(
  "deploy/: the operator runs as the ServiceAccount of rbac.yaml with the Deployment's arguments, with no permission error (DEP-02, DEP-04, DEP-07)",
  opts,
  async () => {
    await using fx = await setup("deploy");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    try {
      await apply(client, rbacDocs, namespace);
      await apply(client, await manifests("deploy/peering.yaml"), namespace);
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      await awaitAccess(client, namespace, account, USED, true);
      await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);

      const podId = "kopf-operator-7d9f8c6b5-x2x4q";
      const { op, liveness } = await runAsPod(namespace, fx.kubeconfig, podId);
      try {
        await waitFor(op, new RegExp(`Watching kopfexamples\\b.* in ${namespace}$`), 30_000);
        await createObject(client, namespace, "kex-1");
        const handled = await eventually(
          async () => {
            const object = await client.api.get(KOPFEXAMPLES, "kex-1", { namespace });
            return (object.status as { create_fn?: { message?: string } } | undefined)?.create_fn;
          },
          30_000,
          `status.create_fn of kex-1; output:\n${op.lines.join("\n")}`,
        );
        assert.deepEqual(handled, { message: "hello world" });

        // The Events of the handling, posted with the ServiceAccount's token.
        const events = await eventually(
          async () => {
            const { items } = await client.api.list(EVENTS, {
              namespace,
              fieldSelector: "involvedObject.name=kex-1",
            });
            const messages = items.map((e) => String(e.message));
            // Both from one batch, which is posted a few at a time: wait for each.
            return messages.some((m) => /Handler 'create_fn' succeeded/.test(m)) &&
              messages.some((m) => m.startsWith("And here we are!")) && messages;
          },
          30_000,
          `Events about kex-1; output:\n${op.lines.join("\n")}`,
        );
        assert.ok(events.some((m) => m.startsWith("And here we are!")), events.join("\n"));

        // The peering entry, keyed by POD_ID, is there and kept alive.
        const peering = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
        const peers = parsePeers(peering.status);
        assert.deepEqual(peers.map((p) => p.identity), [podId]);

        // The liveness endpoint of --liveness, at the path the probe asks.
        const container = containerOf(await deployment());
        assert.equal(new URL(liveness).pathname, container.livenessProbe.httpGet.path);
        const response = await fetch(liveness);
        await response.body?.cancel();
        assert.equal(response.status, 200);
      } finally {
        const code = await op.stop();
        if (Deno.env.get("DUMP_LINES")) console.log(op.lines.join("\n"));
        assert.equal(code, 0, op.lines.join("\n"));
      }
      assert.deepEqual(permissionErrors(op.lines), [], op.lines.join("\n"));
      // The exit removed the entry: the peering object was patched to the end.
      const after = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
      assert.deepEqual(parsePeers(after.status), []);
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);

Deno.test(
  "deploy/: the Deployment has one replica, Recreate, POD_ID from the Pod's name, and its Pod is admitted with the ServiceAccount (DEP-02, DEP-07)",
  opts,
  async () => {
    await using fx = await setup("deploy-pod");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    try {
      await apply(client, rbacDocs, namespace);
      const manifest = await deployment();
      const spec = manifest.spec as {
        replicas: number;
        strategy: { type: string };
        template: { spec: { serviceAccountName: string } };
      };
      assert.equal(spec.replicas, 1);
      assert.equal(spec.strategy.type, "Recreate");
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      assert.equal(spec.template.spec.serviceAccountName, account);
      const container = containerOf(manifest);
      const podId = container.env.find((e) => e.name === "POD_ID");
      assert.equal(podId?.valueFrom?.fieldRef?.fieldPath, "metadata.name");
      const port = container.livenessProbe.httpGet.port;
      const named = container.ports.find((p) => p.name === port || p.containerPort === port);
      const liveness = container.args.find((a) => a.startsWith("--liveness="));
      assert.ok(named && liveness, "the probe's port is a declared port of --liveness");
      assert.equal(new URL(liveness.slice("--liveness=".length)).port, String(named.containerPort));

      // Stored as it is; kube-controller-manager makes a ReplicaSet and a Pod of it.
      await apply(client, [manifest], namespace);
      const pods = await eventually(
        async () => {
          const { items } = await client.api.list(PODS, {
            namespace,
            labelSelector: "app.kubernetes.io/name=kopf-operator",
          });
          return items.length > 0 && items;
        },
        30_000,
        "the Deployment's Pod",
      );
      assert.equal(pods.length, 1);
      const pod = pods[0]!;
      assert.equal((pod.spec as { serviceAccountName?: string }).serviceAccountName, account);
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);

/** One rule (or verb) removed from rbac.yaml, and what the operator must then say. */
interface Removal {
  readonly what: string;
  readonly edit: (kind: string, rule: Rule) => Rule | null;
  /** Creates an object first, for errors that only handling provokes. */
  readonly needsObject?: boolean;
  /** A permission of the removed rule, to wait until the authorizer knows it is gone. */
  readonly check: Access;
  readonly expect: RegExp;
}

/** Removes the Role's rule for `resource`, or with `verb` only that verb of it. */
function without(resource: string, verb?: string): (kind: string, rule: Rule) => Rule | null {
  return (kind, rule) => {
    if (kind !== "Role" || !rule.resources?.includes(resource)) return rule;
    return verb ? { ...rule, verbs: rule.verbs?.filter((v) => v !== verb) ?? [] } : null;
  };
}

const REMOVALS: readonly Removal[] = [
  {
    what: "the served resource",
    edit: without("kopfexamples"),
    check: USED.find((a) => a.resource === "kopfexamples")!,
    expect: /Watching kopfexamples.*forbidden.*cannot list resource "kopfexamples"/,
  },
  {
    what: "patch on the served resource",
    edit: without("kopfexamples", "patch"),
    needsObject: true,
    check: USED.find((a) => a.resource === "kopfexamples" && a.verb === "patch")!,
    expect: /forbidden.*cannot patch resource "kopfexamples"/,
  },
  {
    what: "patch on kopfpeerings",
    edit: without("kopfpeerings", "patch"),
    check: USED.find((a) => a.resource === "kopfpeerings" && a.verb === "patch")!,
    expect: /forbidden.*cannot patch resource "kopfpeerings"/,
  },
  {
    what: "events",
    edit: without("events"),
    needsObject: true,
    check: USED.find((a) => a.resource === "events")!,
    expect: /Failed to post an Event.*forbidden.*cannot create resource "events"/,
  },
  {
    what: "customresourcedefinitions",
    edit: (kind, rule) =>
      kind === "ClusterRole" && rule.resources?.includes("customresourcedefinitions") ? null : rule,
    check: USED.find((a) => a.resource === "customresourcedefinitions")!,
    expect:
      /Watching CustomResourceDefinitions.*forbidden.*cannot list resource "customresourcedefinitions"/,
  },
  {
    what: "kopfpeerings",
    edit: without("kopfpeerings"),
    check: USED.find((a) => a.resource === "kopfpeerings")!,
    expect: /peering object.*forbidden.*cannot get resource "kopfpeerings"/,
  },
];

Deno.test(
  "deploy/: without one rule of rbac.yaml the operator reports a clear permission error (DEP-04)",
  opts,
  async () => {
    await using fx = await setup("deploy-neg");
    const { client, namespace } = fx;
    const all = await rbacFor(namespace, namespace);
    const account = all.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
    try {
      await apply(client, await manifests("deploy/peering.yaml"), namespace);
      for (const [i, removal] of REMOVALS.entries()) {
        await apply(client, await rbacFor(namespace, namespace, removal.edit), namespace);
        await awaitAccess(client, namespace, account, [removal.check], false);
        const kept = USED.filter((a) =>
          removal.edit(a.namespaced ? "Role" : "ClusterRole", {
            resources: [a.resource],
            verbs: [a.verb],
          })?.verbs?.includes(
            a.verb,
          )
        );
        assert.ok(kept.length < USED.length && !kept.includes(removal.check));
        await awaitAccess(client, namespace, account, kept, true);
        if (i === 0) await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);
        const { op } = await runAsPod(namespace, fx.kubeconfig, `kopf-operator-${i}`);
        try {
          if (removal.needsObject) await createObject(client, namespace, `kex-${i}`);
          await waitFor(op, removal.expect, 30_000).catch((error) => {
            throw new Error(`Without ${removal.what}: ${error.message}`);
          });
        } finally {
          await op.stop();
          if (Deno.env.get("DUMP_LINES")) console.log(op.lines.join("\n"));
        }
      }
    } finally {
      await deleteClusterScoped(client, all);
    }
  },
);

Deno.test(
  "deploy/sharded.yaml: two replicas with its arguments, as the ServiceAccount of rbac.yaml with its Lease Role, split the shards and handle objects with no permission error; the API server accepts its Deployment of 3 replicas (X-SCALE-30)",
  opts,
  async () => {
    await using fx = await setup("deploy-shards");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    const sharded = await manifests("deploy/sharded.yaml");
    try {
      await apply(client, [...rbacDocs, ...sharded], namespace);
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      const leases = ["get", "list", "create", "update", "delete"].map((verb) => ({
        verb,
        group: "coordination.k8s.io",
        resource: "leases",
        namespaced: true,
      }));
      await awaitAccess(client, namespace, account, [...USED, ...leases], true);
      await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);

      const manifest = sharded.find((d) => d.kind === "Deployment")!;
      assert.equal((manifest.spec as { replicas: number }).replicas, 3);
      const container = containerOf(manifest);
      assert.ok(container.env.some((e) => e.name === "POD_NAME"));
      const args = container.args
        .map((arg) => arg.replaceAll("$(POD_NAMESPACE)", namespace))
        .filter((arg) => !arg.startsWith("--liveness="))
        .map((arg) => (arg.startsWith("--shard-count=") ? "--shard-count=4" : arg));
      assert.ok(args.includes("--shards"), `no --shards in ${args}`);
      const spawn = (pod: string) =>
        spawnOperator(["tests/_scaling_operator.ts", "--verbose", ...args], {
          KUBECONFIG: fx.kubeconfig,
          POD_NAME: pod,
          REPLICA: pod,
          KOPF_TEST_LEASE: "4,3,0.5",
        });
      const ops = [await spawn("kopf-operator-sharded-a"), await spawn("kopf-operator-sharded-b")];
      try {
        await eventually(
          async () => {
            const status = await readShardStatus(client.api, { name: "kopf", namespace });
            const holders = new Set(status.shards.map((s) => s.holder));
            return status.shards.length === 4 && !holders.has(undefined) && holders.size === 2;
          },
          60_000,
          `two replicas holding all 4 shards; output:\n${ops.flatMap((o) => o.lines).join("\n")}`,
        );
        for (const name of ["kex-1", "kex-2", "kex-3", "kex-4"]) {
          await createObject(client, namespace, name);
        }
        await eventually(
          () => ops.flatMap((o) => o.lines).filter((l) => l.startsWith("RUN create ")).length === 4,
          30_000,
          "4 creations",
        );
      } finally {
        for (const op of ops) assert.equal(await op.stop(), 0, op.lines.join("\n"));
      }
      const lines = ops.flatMap((o) => o.lines);
      assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));
      // Without --standalone: sharded replicas turn peering off (they would pause each other).
      assert.equal(lines.filter((l) => /Peering is off for sharded replicas/.test(l)).length, 2);
      assert.deepEqual(lines.filter((l) => /peering/i.test(l) && !/Peering is off/.test(l)), []);
      // Both left: their shards are released and their memberships deleted.
      const after = await readShardStatus(client.api, { name: "kopf", namespace });
      assert.deepEqual(after.members, []);
      assert.ok(after.shards.every((s) => s.holder === undefined));
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);

/** The Pod-level and container-level security settings of a Deployment of deploy/. */
interface Secured {
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    seccompProfile?: { type?: string };
  };
  containers: Array<{
    securityContext?: {
      readOnlyRootFilesystem?: boolean;
      allowPrivilegeEscalation?: boolean;
      capabilities?: { drop?: string[] };
    };
    volumeMounts?: Array<{ name: string; mountPath: string }>;
  }>;
  volumes?: Array<{ name: string; emptyDir?: unknown }>;
}

const DEPLOYMENTS = ["deploy/deployment.yaml", "deploy/sharded.yaml"];

/** An HTTP probe of a container. */
interface Probe {
  httpGet: { path: string; port: string | number };
}

async function deploymentsOf(path: string): Promise<KubeObject[]> {
  return (await manifests(path)).filter((doc) => doc.kind === "Deployment");
}

Deno.test(
  "deploy/: every manifest parses; the Deployments run as non-root with RuntimeDefault seccomp, a read-only root, no privilege escalation, no capabilities, and a writable /tmp",
  async () => {
    for await (const entry of Deno.readDir("deploy")) {
      if (!entry.name.endsWith(".yaml")) continue;
      const docs = await manifests(`deploy/${entry.name}`);
      assert.ok(docs.length > 0, `deploy/${entry.name} has no object`);
      for (const doc of docs) assert.ok(doc.apiVersion && doc.kind, `deploy/${entry.name}`);
    }
    for (const path of DEPLOYMENTS) {
      const [manifest] = await deploymentsOf(path);
      const pod = (manifest?.spec as { template: { spec: Secured } }).template.spec;
      assert.equal(pod.securityContext?.runAsNonRoot, true, path);
      assert.equal(pod.securityContext?.seccompProfile?.type, "RuntimeDefault", path);
      for (const container of pod.containers) {
        const sc = container.securityContext;
        assert.equal(sc?.readOnlyRootFilesystem, true, path);
        assert.equal(sc?.allowPrivilegeEscalation, false, path);
        assert.deepEqual(sc?.capabilities?.drop, ["ALL"], path);
        const tmp = container.volumeMounts?.find((m) => m.mountPath === "/tmp");
        assert.ok(tmp, `${path}: no writable /tmp`);
        assert.ok(pod.volumes?.find((v) => v.name === tmp.name)?.emptyDir, path);
        // Ready by the liveness endpoint (tests/incluster_test.ts: the kubelet probes it).
        const probes = container as { livenessProbe?: Probe; readinessProbe?: Probe };
        assert.ok(probes.livenessProbe?.httpGet, path);
        assert.deepEqual(probes.readinessProbe?.httpGet, probes.livenessProbe.httpGet, path);
      }
    }
    // rbac.yaml: nothing on webhook configurations (the Deployment serves no webhooks), the
    // peering object by name, nothing but `create` on Events.
    const rules = (await manifests("deploy/rbac.yaml")).flatMap((doc) =>
      (doc.rules ?? []) as Array<Rule & { resourceNames?: string[] }>
    );
    assert.deepEqual(
      rules.filter((r) => r.apiGroups?.includes("admissionregistration.k8s.io")),
      [],
    );
    assert.ok(
      rules.filter((r) => r.resources?.some((x) => /peerings$/.test(x))).every((r) =>
        r.resourceNames?.length
      ),
    );
    assert.deepEqual(rules.filter((r) => r.resources?.includes("events")).map((r) => r.verbs), [[
      "create",
    ]]);
    const [policy] = await manifests("deploy/networkpolicy.yaml");
    const spec = policy!.spec as {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: Array<{ ports: Array<{ port: number }> }>;
    };
    const [deployment] = await deploymentsOf("deploy/deployment.yaml");
    const labels =
      (deployment!.spec as { template: { metadata: { labels: Record<string, string> } } })
        .template.metadata.labels;
    for (const [key, value] of Object.entries(spec.podSelector.matchLabels)) {
      assert.equal(labels[key], value, "the NetworkPolicy selects the Deployment's Pods");
    }
    assert.deepEqual(spec.policyTypes, ["Ingress"]);
    assert.deepEqual(spec.ingress.map((rule) => rule.ports.map((p) => p.port)), [[9443], [8080]]);
  },
);

Deno.test(
  "deploy/: the NetworkPolicy and the Deployments pass a server-side dry-run apply, and their Pods are admitted where Pod Security enforces `restricted` (one setting less is refused)",
  opts,
  async () => {
    await using fx = await setup("deploy-psa");
    const { client, namespace } = fx;
    await client.api.patch(NAMESPACES, namespace, {
      metadata: { labels: { "pod-security.kubernetes.io/enforce": "restricted" } },
    });
    const account = (await manifests("deploy/rbac.yaml")).find((d) => d.kind === "ServiceAccount")!;
    await apply(client, [account], namespace);
    const apply1 = async (object: KubeObject, plural: string, group: string) => {
      const base = group ? `/apis/${group}` : "/api/v1";
      const name = object.metadata!.name!;
      return await client.http.json<KubeObject>({
        method: "PATCH",
        path: `${base}/namespaces/${namespace}/${plural}/${name}`,
        query: { dryRun: "All", fieldManager: "kopf-deploy-test", force: true },
        contentType: "application/apply-patch+yaml",
        body: object,
      });
    };
    const [policy] = await manifests("deploy/networkpolicy.yaml");
    const applied = await apply1(policy!, "networkpolicies", "networking.k8s.io/v1");
    assert.equal(applied.kind, "NetworkPolicy");
    for (const path of DEPLOYMENTS) {
      for (const manifest of await deploymentsOf(path)) {
        const result = await apply1(manifest, "deployments", "apps/v1");
        assert.equal(result.kind, "Deployment", path);
        // Pod Security admission checks Pods (for Deployments it only warns): the template's Pod.
        const template =
          (manifest.spec as { template: { metadata: KubeObject["metadata"]; spec: Secured } })
            .template;
        const pod = {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { ...template.metadata, name: `${manifest.metadata!.name}-pod` },
          spec: template.spec,
        };
        const admitted = await apply1(pod as KubeObject, "pods", "");
        assert.equal(admitted.kind, "Pod", path);
        // The check can fail: without the seccomp profile, `restricted` refuses the Pod.
        const weaker = structuredClone(pod);
        delete weaker.spec.securityContext?.seccompProfile;
        await assert.rejects(
          () => apply1(weaker as KubeObject, "pods", ""),
          (error: unknown) =>
            error instanceof ApiError && error.code === 403 && /seccompProfile/.test(error.message),
          `${path}: a Pod without seccompProfile was admitted under restricted`,
        );
      }
    }
  },
);
