/**
 * The operator in a cluster for real: a node of our own (containerd + runc + the kubelet,
 * testing/plane/node.ts) registered to a control plane of this test, the operator's image built
 * by `kopf build --image` and imported into the node's containerd, and `deploy/` applied as a
 * user would — the RBAC that `kopf generate rbac` prints for the handlers, the peering object,
 * the Deployment of deploy/deployment.yaml with the image. The Pod must become Ready, handle a
 * created object (status and Events) with no 403 in its log; deleting the Pod must stop the
 * operator by SIGTERM, and the Deployment's next Pod must not repeat the finished handler.
 *
 * The node needs root, Debian's containerd/runc/CNI plugins, the kubelet and kube-scheduler
 * (`tools/kube-binaries.sh --node`) and network and mount namespaces of its own: run it as
 * `tools/netns.sh tools/deno.sh test -A --no-check=remote tests/incluster_test.ts` (tools/test.sh
 * does). Elsewhere it is skipped with the reason. The image is built by the test unless
 * `$KOPF_TS_TEST_IMAGE` names one already built (the namespace has no route to the registries,
 * so `tools/test.sh` builds it outside first).
 *
 * What differs from a user's cluster, in memory only (deploy/ is read, never written): the image
 * name, `imagePullPolicy: Never`, `hostNetwork: true` (no Pod network here), and
 * `KUBERNETES_SERVICE_HOST=127.0.0.1` / `KUBERNETES_SERVICE_PORT` in the container's environment
 * (no kube-proxy serves the `kubernetes` Service's cluster IP that the kubelet injects).
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import type { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { KubeClient as Client } from "../core/client/client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { nodeUnavailable, TestNode } from "../testing/plane/node.ts";
import { EVENTS, PODS } from "./_examples.ts";
import { applyCrds, eventually, kex, KOPFEXAMPLES, tempDir } from "./_support.ts";

const HANDLERS = "tests/fixtures/incluster_operator.ts";
const IMAGE = "kopf-incluster:test";
const opts = { sanitizeOps: false, sanitizeResources: false };

const RESOURCES: Readonly<Record<string, ResourceRef>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts", namespaced: true },
  ClusterRole: rbac("clusterroles", false),
  ClusterRoleBinding: rbac("clusterrolebindings", false),
  Role: rbac("roles", true),
  RoleBinding: rbac("rolebindings", true),
  KopfPeering: { group: "kopf.dev", version: "v1", plural: "kopfpeerings", namespaced: true },
  Deployment: { group: "apps", version: "v1", plural: "deployments", namespaced: true },
};

function rbac(plural: string, namespaced: boolean): ResourceRef {
  return { group: "rbac.authorization.k8s.io", version: "v1", plural, namespaced };
}

const unavailable = await nodeUnavailable();
if (unavailable) console.warn(`tests/incluster_test.ts skipped: ${unavailable}`);

function yamlDocs(text: string): KubeObject[] {
  return parseAllDocuments(text).map((d) => d.toJS() as KubeObject | null)
    .filter((d): d is KubeObject => d !== null);
}

async function kopf(args: string[]): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check=remote", "cli.ts", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  const stderr = new TextDecoder().decode(output.stderr);
  assert.ok(output.success, `kopf ${args.join(" ")} failed:\n${stderr}\n${stdout}`);
  return stdout + stderr;
}

async function apply(client: KubeClient, docs: KubeObject[], namespace: string): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!] ?? assert.fail(`unexpected kind ${doc.kind}`);
    await client.api.create(resource, doc, resource.namespaced ? { namespace } : {});
  }
}

/** deploy/deployment.yaml with what this node needs (see the module's comment). */
async function deployment(node: TestNode): Promise<KubeObject> {
  const [doc] = yamlDocs(await Deno.readTextFile("deploy/deployment.yaml"));
  assert.ok(doc?.kind === "Deployment", "deploy/deployment.yaml holds the Deployment first");
  const spec = (doc.spec as { template: { spec: Record<string, unknown> } }).template.spec;
  spec.hostNetwork = true;
  const containers = spec.containers as Array<Record<string, unknown>>;
  const container = containers[0]!;
  // deploy/ has only a liveness probe, so its Pod is Ready as soon as it runs; probe readiness
  // on the same endpoint, so that Ready means the kubelet reached the operator's health server.
  container.readinessProbe ??= {
    httpGet: { path: "/healthz", port: "liveness" },
    periodSeconds: 2,
    timeoutSeconds: 5,
  };
  container.image = IMAGE;
  container.imagePullPolicy = "Never";
  container.env = [
    ...(container.env as unknown[] ?? []),
    { name: "KUBERNETES_SERVICE_HOST", value: "127.0.0.1" },
    { name: "KUBERNETES_SERVICE_PORT", value: String(node.apiServerPort) },
  ];
  return doc;
}

interface PodStatus {
  phase?: string;
  conditions?: Array<{ type: string; status: string }>;
  containerStatuses?: Array<{ ready?: boolean; restartCount?: number }>;
}

async function readyPod(client: KubeClient, namespace: string, not?: string): Promise<KubeObject> {
  return await eventually(
    async () => {
      const pods = await client.api.list(PODS, {
        namespace,
        labelSelector: "app.kubernetes.io/name=kopf-operator",
      });
      return pods.items.find((pod) => {
        const status = pod.status as PodStatus | undefined;
        return pod.metadata?.name !== not && !pod.metadata?.deletionTimestamp &&
          status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      });
    },
    90_000,
    "the operator Pod to be Ready",
  );
}

/** The container's log lines, as the kubelet wrote them (CRI format: time, stream, tag, text). */
async function podLog(node: TestNode, namespace: string, pod: KubeObject): Promise<string[]> {
  const dir = `${node.podLogsDir}/${namespace}_${pod.metadata!.name}_${pod.metadata!.uid}/operator`;
  const lines: string[] = [];
  const files = [];
  for await (const entry of Deno.readDir(dir)) files.push(entry.name);
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(`${dir}/${file}`);
    lines.push(...text.split("\n").filter(Boolean).map((l) => l.split(" ").slice(3).join(" ")));
  }
  return lines;
}

/**
 * Follows a Pod's log until `stop()`: the kubelet removes the files soon after the Pod is
 * deleted, so the last lines of a stopping operator are only seen by reading along.
 */
function followLog(node: TestNode, namespace: string, pod: KubeObject) {
  let lines: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      // The kubelet removes the files when it removes the container: keep what was read.
      const read = await podLog(node, namespace, pod).catch(() => []);
      if (read.length >= lines.length) lines = read;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    get lines(): string[] {
      return lines;
    },
    async stop(): Promise<string[]> {
      running = false;
      await loop;
      return lines;
    },
  };
}

interface Handled {
  message?: string;
  pod?: string;
}

async function handledBy(client: KubeClient, namespace: string, name: string): Promise<Handled> {
  return await eventually(
    async () => {
      const obj = await client.api.get(KOPFEXAMPLES, name, { namespace });
      return (obj.status as Record<string, Handled> | undefined)?.["create_fn"];
    },
    60_000,
    `status.create_fn of ${name}`,
  );
}

async function eventsAbout(client: KubeClient, namespace: string, name: string) {
  return await eventually(
    async () => {
      const list = await client.api.list(EVENTS, {
        namespace,
        fieldSelector: `involvedObject.name=${name}`,
      });
      return list.items.length > 0 ? list.items.map((e) => String(e.message)) : undefined;
    },
    30_000,
    `Events about ${name}`,
  );
}

function permissionErrors(lines: readonly string[]): string[] {
  return lines.filter((l) => /\b403\b|forbidden/i.test(l));
}

Deno.test({
  name: "incluster: deploy/ on a real node — Ready by its probes, handles an object with " +
    "status and Events, no 403; a deleted Pod stops by SIGTERM and its successor repeats nothing",
  ignore: unavailable !== undefined,
  ...opts,
  async fn() {
    await using dir = await tempDir("kopf-incluster-");
    let image = Deno.env.get("KOPF_TS_TEST_IMAGE");
    if (!image) {
      image = `${dir.path}/operator.oci.tar`;
      await kopf(["build", "--image", "--tag", IMAGE, HANDLERS, "-o", image]);
    }
    await using plane = await ControlPlane.start({ handleSignals: false });
    await using node = await TestNode.start(plane, { handleSignals: false });
    const followers: ReturnType<typeof followLog>[] = [];
    try {
      await node.importImage(image);
      const client = new Client(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
      await applyCrds(client, "crds/example.yaml");
      await applyCrds(client, "crds/peering.yaml");
      const namespace = await createTestNamespace(plane, "incluster");

      // As a user would: the RBAC generated for the handlers, the peering object, the Deployment.
      const rbacYaml = await kopf([
        "generate",
        "rbac",
        HANDLERS,
        "-n",
        namespace,
        "--crd",
        "crds/example.yaml",
        "--crd",
        "crds/peering.yaml",
      ]);
      await apply(client, yamlDocs(rbacYaml.slice(rbacYaml.indexOf("---"))), namespace);
      await apply(client, yamlDocs(await Deno.readTextFile("deploy/peering.yaml")), namespace);
      await apply(client, [await deployment(node)], namespace);

      // Proof 1: Ready, the object handled (status, Event), no permission error.
      const first = await readyPod(client, namespace);
      const firstName = first.metadata!.name!;
      const firstLog = followLog(node, namespace, first);
      followers.push(firstLog);
      assert.equal((first.status as PodStatus).containerStatuses?.[0]?.restartCount, 0);
      await client.api.create(KOPFEXAMPLES, kex("kex-1", { field: "value" }), { namespace });
      assert.deepEqual(await handledBy(client, namespace, "kex-1"), {
        message: "hello world",
        pod: firstName,
      });
      const events = await eventsAbout(client, namespace, "kex-1");
      assert.ok(events.includes(`create_fn in ${firstName}`), events.join(" | "));

      // Proof 2: the Pod deleted — SIGTERM, a graceful stop; the next Pod repeats nothing.
      await client.api.delete(PODS, firstName, { namespace });
      const second = await readyPod(client, namespace, firstName);
      const secondLog = followLog(node, namespace, second);
      followers.push(secondLog);
      const stopped = await eventually(
        () => firstLog.lines.includes("Operator stopped.") && firstLog.lines,
        30_000,
        "the first operator's graceful stop",
      ).catch(() => firstLog.lines);
      assert.ok(stopped.some((l) => l.includes("Operator stopped.")), stopped.join("\n"));
      await client.api.create(KOPFEXAMPLES, kex("kex-2", { field: "value" }), { namespace });
      const secondName = second.metadata!.name!;
      assert.deepEqual(await handledBy(client, namespace, "kex-2"), {
        message: "hello world",
        pod: secondName,
      });
      const later = await secondLog.stop();
      assert.deepEqual(later.filter((l) => l.includes("handles kex-1")), [], later.join("\n"));
      assert.deepEqual((await handledBy(client, namespace, "kex-1")).pod, firstName);

      const log = [...(await firstLog.stop()), ...later];
      assert.ok(log.some((l) => l.includes(`create_fn handles kex-1 in ${firstName}`)));
      assert.deepEqual(permissionErrors(log), [], "no permission errors in the operators' logs");
    } catch (error) {
      console.error(node.logs(40));
      for (const follower of followers) {
        console.error(`----- operator log -----\n${(await follower.stop()).join("\n")}`);
      }
      throw error;
    } finally {
      for (const follower of followers) await follower.stop();
    }
  },
});
