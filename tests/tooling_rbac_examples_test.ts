/**
 * `kopf generate rbac` proved on the real API server (RBAC on), for every example: the
 * generated manifests are applied, the example runs as that ServiceAccount (a token from the
 * TokenRequest API in a kubeconfig of its own) through a scenario that exercises its handlers,
 * and no permission error appears; `--verify` agrees. Then one rule is removed and `--verify`
 * names each of its permissions as missing (exit code 1).
 *
 * The examples run four at a time, each in its own namespace; the cluster-scoped objects get
 * names unique to the namespace and are deleted afterwards.
 */

import assert from "node:assert/strict";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { main } from "../core/cli/main.ts";
import type { ResourceRef } from "../core/client/api.ts";
import type { KubeClient } from "../core/client/client.ts";
import { ApiError } from "../core/client/errors.ts";
import { NAMESPACED_PEERINGS } from "../core/engines/coordination/peering.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { serviceAccountKubeconfig } from "./_deploy.ts";
import { PODS } from "./_examples.ts";
import { spawnDeno, type SpawnedOperator, spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  permissionErrors,
  sleep,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const rbac = (plural: string, namespaced: boolean): ResourceRef => ({
  group: "rbac.authorization.k8s.io",
  version: "v1",
  plural,
  namespaced,
});
const KINDS: Readonly<Record<string, ResourceRef>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts", namespaced: true },
  ClusterRole: rbac("clusterroles", false),
  ClusterRoleBinding: rbac("clusterrolebindings", false),
  Role: rbac("roles", true),
  RoleBinding: rbac("rolebindings", true),
};
const WEBHOOKS: ResourceRef = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  plural: "validatingwebhookconfigurations",
  namespaced: false,
};
const EVCS: ResourceRef = {
  group: "kopf.dev",
  version: "v1",
  plural: "ephemeralvolumeclaims",
  namespaced: true,
};
const KOPFAPPS: ResourceRef = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfapps",
  namespaced: true,
};
const CONFIGMAPS: ResourceRef = {
  group: "",
  version: "v1",
  plural: "configmaps",
  namespaced: true,
};
const PVCS: ResourceRef = {
  group: "",
  version: "v1",
  plural: "persistentvolumeclaims",
  namespaced: true,
};

interface Fixture {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly op: SpawnedOperator;
}

/** One example: how it is run and what is done to it. */
interface Case {
  readonly example: string;
  /** Extra options of both `kopf run` and `kopf generate rbac`. */
  readonly args?: readonly string[];
  /** Extra options of `kopf generate rbac` only. */
  readonly rbacArgs?: (namespace: string) => readonly string[];
  readonly env?: (namespace: string) => Record<string, string>;
  /** The line that says the operator is ready (default: watching kopfexamples). */
  readonly ready?: (namespace: string) => RegExp;
  /** Run as a script (it embeds the operator) instead of `kopf run`. */
  readonly script?: boolean;
  readonly scenario: (fx: Fixture) => Promise<void>;
}

async function exampleObject(fx: Fixture, extra: Partial<KubeObject> = {}): Promise<void> {
  const body = parseYaml(await Deno.readTextFile("examples/obj.yaml")) as KubeObject;
  await fx.client.api.create(KOPFEXAMPLES, {
    ...body,
    ...extra,
    metadata: { ...body.metadata, ...extra.metadata, name: "kex", namespace: fx.namespace },
  }, { namespace: fx.namespace });
}

/** Waits until the operator wrote something about the object (a log line with its prefix). */
async function handled(fx: Fixture, name = "kex"): Promise<void> {
  const prefix = `[${fx.namespace}/${name}]`;
  await fx.op.waitForLine(new RegExp(prefix.replace(/[[\]/]/g, "\\$&")), 30_000);
}

async function gone(fx: Fixture, resource: ResourceRef, name: string): Promise<void> {
  await eventually(
    async () => {
      try {
        await fx.client.api.get(resource, name, { namespace: fx.namespace });
        return false;
      } catch (error) {
        if (error instanceof ApiError && error.code === 404) return true;
        throw error;
      }
    },
    30_000,
    `${resource.plural}/${name} to be gone; output:\n${fx.op.lines.join("\n")}`,
  );
}

/** Create, update, delete: every verb the framework uses for a served object. */
async function lifecycle(fx: Fixture): Promise<void> {
  await exampleObject(fx);
  await handled(fx);
  await fx.client.api.patch(KOPFEXAMPLES, "kex", { spec: { field: "changed" } }, {
    namespace: fx.namespace,
  });
  await sleep(1000); // let the update handling happen (its errors would show below)
  await fx.client.api.delete(KOPFEXAMPLES, "kex", { namespace: fx.namespace });
  await gone(fx, KOPFEXAMPLES, "kex");
}

async function pod(fx: Fixture, name = "rbac-pod"): Promise<void> {
  await fx.client.api.create(PODS, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: { app: "rbac-test" } },
    spec: { containers: [{ name: "main", image: "busybox" }] },
  }, { namespace: fx.namespace });
}

const watching = (plural: string) => (namespace: string) =>
  new RegExp(`Watching ${plural}\\b.* in ${namespace}$`);

const CASES: readonly Case[] = [
  { example: "01-minimal", scenario: lifecycle },
  {
    example: "02-children",
    scenario: async (fx) => {
      await exampleObject(fx);
      await eventually(
        async () => (await fx.client.api.list(PODS, { namespace: fx.namespace })).items.length > 0,
        30_000,
        `a child Pod; output:\n${fx.op.lines.join("\n")}`,
      );
    },
  },
  {
    example: "03-exceptions",
    scenario: async (fx) => {
      await exampleObject(fx);
      await fx.op.waitForLine(/Handler 'instant_failure_with_only_a_message' failed/, 30_000);
    },
  },
  { example: "04-events", scenario: lifecycle },
  { example: "05-handlers", scenario: lifecycle },
  {
    example: "06-peering",
    scenario: async (fx) => {
      await fx.op.waitForLine(/Starting with the peering priority/, 30_000);
      await lifecycle(fx);
    },
  },
  { example: "07-subhandlers", scenario: lifecycle },
  { example: "08-events", scenario: lifecycle },
  { example: "09-testing", scenario: lifecycle },
  {
    example: "10-builtins",
    env: () => ({ POD_KILL_DELAY: "1" }),
    ready: watching("pods"),
    scenario: async (fx) => {
      await pod(fx);
      await gone(fx, PODS, "rbac-pod"); // deleted by the operator
    },
  },
  { example: "11-filtering-handlers", scenario: lifecycle },
  {
    example: "12-embedded",
    script: true,
    env: (namespace) => ({ EXAMPLE_NAMESPACE: namespace }),
    args: ["--standalone"],
    scenario: async (fx) => {
      const code = await Promise.race([
        fx.op.exited,
        sleep(60_000).then(() => -1),
      ]);
      assert.equal(code, 0, fx.op.lines.join("\n"));
      assert.ok(fx.op.lines.some((l) => l.includes("The operator has stopped.")));
    },
  },
  {
    example: "13-hooks",
    env: () => ({ SERVE_DELAY_MAX: "1" }),
    ready: watching("pods"),
    scenario: async (fx) => {
      await pod(fx);
      await handled(fx, "rbac-pod");
    },
  },
  {
    example: "14-daemons",
    env: () => ({ DAEMON_PING_INTERVAL: "0.5" }),
    scenario: lifecycle,
  },
  { example: "15-timers", env: () => ({ TIMER_SCALE: "0.3" }), scenario: lifecycle },
  {
    example: "16-indexing",
    scenario: async (fx) => {
      await pod(fx);
      await lifecycle(fx);
    },
  },
  {
    example: "17-admission",
    env: (namespace) => ({
      WEBHOOK_PORT: String(freePort()),
      WEBHOOK_MANAGED: `${namespace}.kopf.dev`,
    }),
    // What the example's startup handler sets in settings.admission.managed.
    rbacArgs: (namespace) => ["--admission-managed", `${namespace}.kopf.dev`],
    ready: () => /Reconfiguring the validating webhook configuration/,
    scenario: async (fx) => {
      await eventually(
        async () => {
          try {
            await exampleObject(fx, { metadata: { labels: { admission: "on" } } });
            return true;
          } catch (error) {
            if (error instanceof ApiError && error.code === 403) return false; // not yet served
            throw error;
          }
        },
        30_000,
        "an object admitted by the webhooks",
      );
      // Its own configuration by name only: another one can be neither read nor patched.
      const user = `system:serviceaccount:${fx.namespace}:kopf-${fx.namespace}`;
      for (const verb of ["get", "patch"]) {
        const attributes = { verb, resource: "validatingwebhookconfigurations" };
        assert.ok(
          await allowed(fx.client, user, { ...attributes, name: `${fx.namespace}.kopf.dev` }),
        );
        assert.ok(!await allowed(fx.client, user, { ...attributes, name: "other.kopf.dev" }));
        assert.ok(
          !await allowed(fx.client, user, {
            ...attributes,
            resource: "mutatingwebhookconfigurations",
            name: "other.kopf.dev",
          }),
        );
      }
    },
  },
  {
    example: "18-walkthrough-evc",
    ready: watching("ephemeralvolumeclaims"),
    scenario: async (fx) => {
      const evc = parseYaml(
        await Deno.readTextFile("examples/18-walkthrough-evc/evc.yaml"),
      ) as KubeObject;
      const name = evc.metadata!.name!;
      await fx.client.api.create(EVCS, evc, { namespace: fx.namespace });
      await eventually(
        async () => (await fx.client.api.list(PVCS, { namespace: fx.namespace })).items.length,
        30_000,
        `the PVC; output:\n${fx.op.lines.join("\n")}`,
      );
      await fx.client.api.patch(EVCS, name, { metadata: { labels: { extra: "yes" } } }, {
        namespace: fx.namespace,
      });
      await eventually(
        async () => {
          const { items } = await fx.client.api.list(PVCS, { namespace: fx.namespace });
          return items.some((pvc) => pvc.metadata?.labels?.extra === "yes");
        },
        30_000,
        `the PVC relabelled; output:\n${fx.op.lines.join("\n")}`,
      );
    },
  },
  {
    example: "20-reconcile",
    ready: () => /Reconciling kopfapps/,
    scenario: async (fx) => {
      await fx.client.api.create(KOPFAPPS, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfApp",
        metadata: { name: "app" },
        spec: { message: "hi", replicas: 0 },
      }, { namespace: fx.namespace });
      const child = () =>
        fx.client.api.get(CONFIGMAPS, "app-config", { namespace: fx.namespace })
          .catch(() => undefined);
      await eventually(child, 30_000, `the child ConfigMap; output:\n${fx.op.lines.join("\n")}`);
      await fx.client.api.delete(CONFIGMAPS, "app-config", { namespace: fx.namespace });
      await sleep(500);
      await eventually(child, 30_000, `the child recreated; output:\n${fx.op.lines.join("\n")}`);
      await fx.client.api.delete(KOPFAPPS, "app", { namespace: fx.namespace });
      await gone(fx, KOPFAPPS, "app");
    },
  },
  { example: "99-all-at-once", scenario: lifecycle },
];

/** Whether the authorizer allows `user` a verb on an admission resource (SubjectAccessReview). */
async function allowed(
  client: KubeClient,
  user: string,
  attributes: { verb: string; resource: string; name: string },
): Promise<boolean> {
  const review = await client.http.json<{ status?: { allowed?: boolean } }>({
    method: "POST",
    path: "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    body: {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user,
        groups: ["system:serviceaccounts", "system:authenticated"],
        resourceAttributes: { group: "admissionregistration.k8s.io", ...attributes },
      },
    },
  });
  return review.status?.allowed === true;
}

/** `kopf generate rbac` in this process; returns the exit code and all it printed. */
async function kopf(args: readonly string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await main(["generate", "rbac", ...args], {
    write: (line) => lines.push(line),
    kubeconfig: await kubeconfigPath(),
  });
  return { code, out: lines.join("\n") };
}

/** Creates the objects, or replaces them when they exist (what `kubectl apply` does). */
async function apply(client: KubeClient, docs: readonly KubeObject[]): Promise<void> {
  for (const doc of docs) {
    const resource = KINDS[doc.kind!] ?? assert.fail(`unexpected kind ${doc.kind}`);
    const namespace = resource.namespaced ? doc.metadata?.namespace : undefined;
    try {
      await client.api.create(resource, doc, { namespace });
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409)) throw error;
      await client.api.replace(resource, doc.metadata!.name!, doc, { namespace });
    }
  }
}

interface Prepared {
  readonly test: Case;
  readonly namespace: string;
  readonly name: string;
  readonly args: readonly string[];
  readonly docs: KubeObject[];
}

/** Generates the RBAC of one example (one at a time: the modules load into this process). */
async function prepare(test: Case, dir: string): Promise<Prepared> {
  const namespace = await testNamespace(`rbac-${test.example.slice(0, 2)}`);
  const name = `kopf-${namespace}`;
  const file = `${dir}/${namespace}.yaml`;
  const args = [
    `examples/${test.example}/example.ts`,
    "-n",
    namespace,
    "--name",
    name,
    ...(test.args ?? []),
    ...(test.rbacArgs?.(namespace) ?? []),
  ];
  const { code, out } = await kopf([...args, "-o", file]);
  assert.equal(code, 0, out);
  const docs = parseAllDocuments(await Deno.readTextFile(file))
    .map((doc) => doc.toJS() as KubeObject).filter(Boolean);
  return { test, namespace, name, args, docs };
}

async function prove(client: KubeClient, p: Prepared, dir: string): Promise<void> {
  const { test, namespace, name } = p;
  await apply(client, p.docs);
  await eventually(
    async () => (await kopf([...p.args, "--verify"])).code === 0,
    30_000,
    `${test.example}: --verify`,
  );
  const kubeconfig = `${dir}/${namespace}.kubeconfig`;
  await serviceAccountKubeconfig(client, namespace, name, kubeconfig);
  if (test.example === "06-peering") {
    await client.api.create(NAMESPACED_PEERINGS, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfPeering",
      metadata: { name: "default" },
    }, { namespace });
  }
  const env = { KUBECONFIG: kubeconfig, ...test.env?.(namespace) };
  const op = test.script
    ? await spawnDeno([`examples/${test.example}/example.ts`], env)
    : await spawnOperator(
      [`examples/${test.example}/example.ts`, "--verbose", "-n", namespace, ...(test.args ?? [])],
      env,
    );
  try {
    if (!test.script) {
      await op.waitForLine((test.ready ?? watching("kopfexamples"))(namespace), 60_000);
    }
    await test.scenario({ client, namespace, op });
  } finally {
    const code = await op.stop();
    if (!test.script) assert.equal(code, 0, `${test.example}:\n${op.lines.join("\n")}`);
  }
  assert.deepEqual(permissionErrors(op.lines), [], `${test.example}:\n${op.lines.join("\n")}`);

  // One rule less: --verify names each of its permissions.
  const role = p.docs.find((d) => d.kind === "Role") ??
    p.docs.find((d) => d.kind === "ClusterRole")!;
  const rules = role.rules as Array<
    { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }
  >;
  const removed = rules.at(-1)!;
  // One missing permission per verb and (for a rule restricted by name) per name.
  const expected = removed.verbs.length * (removed.resourceNames?.length ?? 1);
  await apply(client, [{ ...role, rules: rules.slice(0, -1) }]);
  const [group] = removed.apiGroups;
  const [resource] = removed.resources;
  const what = group ? `${resource}.${group}` : String(resource);
  // The authorizer's cache takes the changed Role a moment later, and while it does, answers
  // may be mixed (seen under load: more permissions missing than the rule had): wait until the
  // answer is the settled one, then check it names exactly that rule.
  const missingOf = (out: string) => out.split("\n").filter((line) => line.startsWith("missing: "));
  let last = "";
  const said = await eventually(
    async () => {
      const result = await kopf([...p.args, "--verify"]);
      last = result.out;
      return result.code === 1 && missingOf(result.out).length === expected && result.out;
    },
    60_000,
    `${test.example}: --verify to fail naming the removed rule's ${expected} permissions`,
  ).catch((error) => {
    throw new Error(`${error.message}; last answer:\n${last}`);
  });
  for (const verb of removed.verbs) {
    assert.match(said, new RegExp(`^missing: ${verb} ${what.replace(".", "\\.")} `, "m"), said);
  }
  assert.equal(missingOf(said).length, expected, said);
}

Deno.test(
  "kopf generate rbac: every example runs as its generated ServiceAccount with no 403, and --verify names a removed rule (X-TOOL-03, X-TOOL-04)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    await applyCrds(client, "crds/peering.yaml");
    await applyCrds(client, "examples/18-walkthrough-evc/crd.yaml");
    await applyCrds(client, "examples/20-reconcile/crd.yaml");
    await using dir = await tempDir("kopf-rbac-");
    const prepared: Prepared[] = [];
    try {
      for (const test of CASES) prepared.push(await prepare(test, dir.path));
      const failures: string[] = [];
      for (let i = 0; i < prepared.length; i += 4) {
        const batch = prepared.slice(i, i + 4);
        const results = await Promise.allSettled(batch.map((p) => prove(client, p, dir.path)));
        results.forEach((result, j) => {
          if (result.status === "rejected") {
            failures.push(`${batch[j]!.test.example}: ${result.reason?.stack ?? result.reason}`);
          }
        });
      }
      assert.deepEqual(failures, []);
    } finally {
      const plane = await sharedControlPlane();
      for (const p of prepared) {
        for (const doc of p.docs) {
          if (doc.kind === "ClusterRole" || doc.kind === "ClusterRoleBinding") {
            await client.api.delete(KINDS[doc.kind]!, doc.metadata!.name!).catch(() => {});
          }
        }
        await client.api.delete(WEBHOOKS, `${p.namespace}.kopf.dev`).catch(() => {});
        await deleteNamespace(plane, p.namespace).catch(() => {});
      }
    }
  },
);
