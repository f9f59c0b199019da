/**
 * The operator in a cluster for real: a node of our own (containerd + runc + the kubelet,
 * testing/plane/node.ts) registered to a control plane of this test, the operator's image built
 * by `kopf build --image` and imported into the node's containerd, and `deploy/` applied as a
 * user would — the RBAC that `kopf generate rbac` prints for the handlers, the peering object,
 * the Deployments of deploy/deployment.yaml and deploy/sharded.yaml with the image. One plane and
 * one node serve all the proofs, one after the other, each in a namespace of its own:
 *
 * 1. Ready by the kubelet's probes, an object handled (status and Events), no 403 in the log;
 * 2. the Pod deleted: the operator stops by SIGTERM, the next Pod repeats no finished handler;
 * 5. the admission webhook served from the Pod at the node's address, in the webhook
 *    configuration it manages (RBAC by `kopf generate rbac --admission-managed`): a bad object
 *    is denied by the API server's call to the Pod, a good one admitted;
 * 3. leader election: two replicas, the leader's Pod removed by scaling to 1 (marked as the
 *    cheapest to delete), the standby takes over (the hand-over time is printed, not asserted);
 * 4. sharding: deploy/sharded.yaml at 1 replica, scaled to 3 and back to 1 through the scale
 *    subresource (as `kubectl scale` does) while objects are created: each handled exactly once,
 *    each replica's share read from its metrics endpoint, no finalizer touched;
 * 6. token rotation (opt-in, `KOPF_TS_TEST_TOKEN_ROTATION=1`, about 11 minutes): a projected
 *    service-account token of 600 s, the shortest the API server accepts; the kubelet writes a
 *    new one at about 80% of it, and the operator keeps working after the first has expired.
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
 * (no kube-proxy serves the `kubernetes` Service's cluster IP that the kubelet injects). With
 * several replicas on the one node, they share its network namespace, so a fixed port can be
 * bound by one of them only (and the scheduler refuses a second Pod that declares it): there the
 * endpoints listen on port 0 (a free port each), the declared ports and the probes are dropped,
 * and the test reads each replica's metrics port from its log line `Serving metrics at …`.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import type { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { KubeClient as Client } from "../core/client/client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { ApiError } from "../core/client/errors.ts";
import { watcher } from "../core/client/watching.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { nodeUnavailable, TestNode } from "../testing/plane/node.ts";
import { EVENTS, PODS } from "./_examples.ts";
import { applyCrds, eventually, FINALIZER, kex, KOPFEXAMPLES, sleep, tempDir } from "./_support.ts";

const HANDLERS = "tests/fixtures/incluster_operator.ts";
const IMAGE = "kopf-incluster:test";
const opts = { sanitizeOps: false, sanitizeResources: false };
const TOKEN_ROTATION = Deno.env.get("KOPF_TS_TEST_TOKEN_ROTATION") === "1";

const DEPLOYMENTS: ResourceRef = {
  group: "apps",
  version: "v1",
  plural: "deployments",
  namespaced: true,
};
const LEASES: ResourceRef = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  namespaced: true,
};
const VALIDATING: ResourceRef = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  plural: "validatingwebhookconfigurations",
  namespaced: false,
};

const RESOURCES: Readonly<Record<string, ResourceRef>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts", namespaced: true },
  ClusterRole: rbac("clusterroles", false),
  ClusterRoleBinding: rbac("clusterrolebindings", false),
  Role: rbac("roles", true),
  RoleBinding: rbac("rolebindings", true),
  KopfPeering: { group: "kopf.dev", version: "v1", plural: "kopfpeerings", namespaced: true },
  Deployment: DEPLOYMENTS,
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

async function kopf(args: string[], env: Record<string, string> = {}): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check=remote", "cli.ts", ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  const stderr = new TextDecoder().decode(output.stderr);
  assert.ok(output.success, `kopf ${args.join(" ")} failed:\n${stderr}\n${stdout}`);
  return stdout + stderr;
}

/**
 * Creates the objects; the cluster-scoped ones get the namespace appended to their names (each
 * proof's generated RBAC names its ClusterRole `kopf-operator`), and so do their references.
 */
async function apply(client: KubeClient, docs: KubeObject[], namespace: string): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!] ?? assert.fail(`unexpected kind ${doc.kind}`);
    if (!resource.namespaced) doc.metadata!.name = `${doc.metadata!.name}-${namespace}`;
    const ref = doc.roleRef as { kind: string; name: string } | undefined;
    if (ref?.kind === "ClusterRole") ref.name = `${ref.name}-${namespace}`;
    await client.api.create(resource, doc, resource.namespaced ? { namespace } : {});
  }
}

/** The RBAC `kopf generate rbac` prints for the handlers, applied into the namespace. */
async function applyRbac(
  client: KubeClient,
  namespace: string,
  options: string[] = [],
  env: Record<string, string> = {},
): Promise<void> {
  const text = await kopf([
    "generate",
    "rbac",
    HANDLERS,
    "-n",
    namespace,
    "--crd",
    "crds/example.yaml",
    "--crd",
    "crds/peering.yaml",
    ...options,
  ], env);
  await apply(client, yamlDocs(text.slice(text.indexOf("---"))), namespace);
}

interface Container {
  name: string;
  image?: string;
  imagePullPolicy?: string;
  args?: string[];
  env?: unknown[];
  ports?: unknown[];
  livenessProbe?: unknown;
  readinessProbe?: unknown;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

interface PodSpec {
  hostNetwork?: boolean;
  containers: Container[];
  volumes?: unknown[];
  automountServiceAccountToken?: boolean;
}

function podSpecOf(doc: KubeObject): PodSpec {
  return (doc.spec as { template: { spec: PodSpec } }).template.spec;
}

/** A Deployment of a deploy/ file with what this node needs (see the module's comment). */
async function deploymentFrom(path: string, node: TestNode): Promise<KubeObject> {
  const doc = yamlDocs(await Deno.readTextFile(path)).find((d) => d.kind === "Deployment");
  assert.ok(doc, `${path} holds a Deployment`);
  const spec = podSpecOf(doc);
  spec.hostNetwork = true;
  const container = spec.containers[0]!;
  container.image = IMAGE;
  container.imagePullPolicy = "Never";
  container.env = [
    ...(container.env ?? []),
    { name: "KUBERNETES_SERVICE_HOST", value: "127.0.0.1" },
    { name: "KUBERNETES_SERVICE_PORT", value: String(node.apiServerPort) },
  ];
  return doc;
}

/**
 * Several replicas on one node share its network namespace: the endpoints on free ports, no
 * declared ports (the scheduler would refuse a second Pod declaring the same host port), no
 * probes (they would need a fixed port).
 */
function onFreePorts(doc: KubeObject, replicas: number): KubeObject {
  (doc.spec as { replicas: number }).replicas = replicas;
  const container = podSpecOf(doc).containers[0]!;
  delete container.ports;
  delete container.livenessProbe;
  delete container.readinessProbe;
  container.args = [
    ...(container.args ?? []).filter((a) => !/^--(liveness|metrics)=/.test(a)),
    "--liveness=http://0.0.0.0:0/healthz",
    "--metrics=http://0.0.0.0:0/metrics",
  ];
  return doc;
}

interface PodStatus {
  phase?: string;
  hostIP?: string;
  conditions?: Array<{ type: string; status: string }>;
  containerStatuses?: Array<{ ready?: boolean; restartCount?: number }>;
}

async function podsOf(client: KubeClient, namespace: string): Promise<KubeObject[]> {
  const { items } = await client.api.list(PODS, { namespace });
  return items.filter((pod) => !pod.metadata?.deletionTimestamp);
}

function isReady(pod: KubeObject): boolean {
  const status = pod.status as PodStatus | undefined;
  return status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

async function readyPods(
  client: KubeClient,
  namespace: string,
  count: number,
  not: readonly string[] = [],
): Promise<KubeObject[]> {
  return await eventually(
    async () => {
      const ready = (await podsOf(client, namespace))
        .filter((pod) => isReady(pod) && !not.includes(pod.metadata!.name!));
      return ready.length === count ? ready : undefined;
    },
    120_000,
    `${count} Ready operator Pod(s) in ${namespace}`,
  );
}

/** Deletes the proof's Deployment and waits until its Pods are gone (their ports are free). */
async function removeDeployment(client: KubeClient, namespace: string, name: string) {
  await client.api.delete(DEPLOYMENTS, name, { namespace, propagationPolicy: "Background" })
    .catch(() => {});
  await eventually(
    async () => (await client.api.list(PODS, { namespace })).items.length === 0,
    90_000,
    `the Pods of ${namespace} to be gone`,
  ).catch((error) => console.warn(String(error))); // the next proof then says what it lacks
}

/**
 * Follows the containers' logs of all Pods, as the kubelet writes them (CRI format: time,
 * stream, tag, text): the kubelet removes a Pod's files soon after the Pod is deleted, so the
 * last lines of a stopping operator are only seen by reading along.
 */
class PodLogs {
  readonly #node: TestNode;
  /** Every log file seen, open: the kubelet removes a Pod's logs with the Pod, but an open file
   * can still be read to its end, so a stopping operator's last lines are never lost. */
  readonly #files = new Map<
    string,
    { dir: string; index: number; file: Deno.FsFile; decoder: TextDecoder; text: string }
  >();
  readonly #byDir = new Map<string, string[]>();
  #running = true;
  readonly #loop: Promise<void>;

  constructor(node: TestNode) {
    this.#node = node;
    this.#loop = (async () => {
      while (this.#running) {
        await this.#read();
        await sleep(100);
      }
      await this.#read();
      for (const { file } of this.#files.values()) file.close();
    })();
  }

  async #read(): Promise<void> {
    const root = this.#node.podLogsDir;
    const dirs: string[] = [];
    try {
      for await (const entry of Deno.readDir(root)) if (entry.isDirectory) dirs.push(entry.name);
    } catch {
      // not there yet
    }
    for (const dir of dirs) {
      try {
        for await (const entry of Deno.readDir(`${root}/${dir}/operator`)) {
          const path = `${root}/${dir}/operator/${entry.name}`;
          if (this.#files.has(path)) continue;
          const file = await Deno.open(path, { read: true });
          this.#files.set(path, {
            dir,
            index: parseInt(entry.name),
            file,
            decoder: new TextDecoder(),
            text: "",
          });
        }
      } catch {
        // removed with its Pod: its files, if opened, are still read below
      }
    }
    const buffer = new Uint8Array(64 * 1024);
    const changed = new Set<string>();
    for (const entry of this.#files.values()) {
      for (let n = await entry.file.read(buffer); n; n = await entry.file.read(buffer)) {
        entry.text += entry.decoder.decode(buffer.subarray(0, n), { stream: true });
        changed.add(entry.dir);
      }
    }
    for (const dir of changed) {
      const texts = [...this.#files.values()].filter((f) => f.dir === dir)
        .sort((a, b) => a.index - b.index).map((f) => f.text);
      this.#byDir.set(
        dir,
        texts.join("").split("\n").filter(Boolean).map((l) => l.split(" ").slice(3).join(" ")),
      );
    }
  }

  /** Each Pod's lines in the namespace, by Pod name. */
  inNamespace(namespace: string): Map<string, string[]> {
    const pods = new Map<string, string[]>();
    for (const [dir, lines] of this.#byDir) {
      const [ns, pod] = dir.split("_");
      if (ns === namespace && pod) pods.set(pod, [...(pods.get(pod) ?? []), ...lines]);
    }
    return pods;
  }

  /** One Pod's lines. */
  of(namespace: string, pod: string): string[] {
    return this.inNamespace(namespace).get(pod) ?? [];
  }

  /** Everything read, for a failure's report. */
  dump(namespace?: string): string {
    return [...this.#byDir].filter(([dir]) => !namespace || dir.startsWith(`${namespace}_`))
      .map(([dir, lines]) => `----- ${dir} -----\n${lines.slice(-60).join("\n")}`).join("\n");
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
  }
}

interface Handled {
  message?: string;
  pod?: string;
}

async function handledBy(
  client: KubeClient,
  namespace: string,
  name: string,
  timeoutMs = 60_000,
): Promise<Handled> {
  return await eventually(
    async () => {
      const obj = await client.api.get(KOPFEXAMPLES, name, { namespace });
      return (obj.status as Record<string, Handled> | undefined)?.["create_fn"];
    },
    timeoutMs,
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
  // The text only, not the timestamp (`[… 03:14:49,403]` once matched "403"): a refused
  // request says "Forbidden" (the status, the server's "… is forbidden: …"), a refused write
  // "Permission missing: …".
  return lines.filter((l) =>
    /\b403 Forbidden\b|forbidden|Permission missing/i.test(l.replace(/^\[[^\]]*\]/, ""))
  );
}

/** The port a replica's metrics endpoint bound, from its log line `Serving metrics at …`. */
function metricsPort(lines: readonly string[]): number | undefined {
  for (const line of lines) {
    const match = line.match(/Serving metrics at http:\/\/[^/]*:(\d+)\//);
    if (match) return Number(match[1]);
  }
  return undefined;
}

/** `kopf_handler_runs_total` of a handler that succeeded, from a replica's metrics endpoint. */
async function handlerRuns(port: number, handler: string): Promise<number> {
  const host = Deno.env.get("KOPF_TS_NODE_IP") ?? "127.0.0.1";
  const response = await fetch(`http://${host}:${port}/metrics`);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("kopf_handler_runs_total{")) continue;
    if (!line.includes(`handler="${handler}"`) || !line.includes(`outcome="success"`)) continue;
    total += Number(line.split(" ").at(-1));
  }
  return total;
}

/** Creates objects one after the other until stopped; returns their names. */
function creating(client: KubeClient, namespace: string, prefix: string, everyMs = 300) {
  const names: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const name = `${prefix}-${names.length}`;
      await client.api.create(KOPFEXAMPLES, kex(name, { field: "value" }), { namespace });
      names.push(name);
      await sleep(everyMs);
    }
  })();
  return {
    names,
    async stop(): Promise<string[]> {
      running = false;
      await loop;
      return names;
    },
  };
}

/** Per object, its successive distinct finalizer lists (JSON), as a watch of the test saw them. */
function watchFinalizers(client: KubeClient, namespace: string) {
  const controller = new AbortController();
  const finalizers = new Map<string, string[]>();
  let gaps = 0;
  const done = (async () => {
    const stream = watcher(client.api, KOPFEXAMPLES, { namespace, signal: controller.signal });
    for await (const event of stream) {
      if (event.type === "connected" && event.reason === "gone") gaps++;
      if (event.type !== "apply" && event.type !== "initApply") continue;
      const name = event.object.metadata?.name ?? "";
      const list = JSON.stringify(event.object.metadata?.finalizers ?? []);
      const seen = finalizers.get(name) ?? [];
      if (seen.at(-1) !== list) seen.push(list);
      finalizers.set(name, seen);
    }
  })().catch(() => {});
  return {
    finalizers,
    gaps: () => gaps,
    async stop() {
      controller.abort();
      await done;
    },
  };
}

/** The payload of a JWT (the service-account token), unverified. */
function jwtClaims(token: string): { exp: number; iat: number } {
  const part = token.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/");
  return JSON.parse(atob(part.padEnd(part.length + (4 - part.length % 4) % 4, "=")));
}

Deno.test({
  name: "incluster: deploy/ on a real node — one plane and node for the proofs: Ready by its " +
    "probes and SIGTERM; the admission webhook in a Pod; leader election; sharding scaled " +
    "1 → 3 → 1; token rotation (opt-in)",
  ignore: unavailable !== undefined,
  ...opts,
  async fn(t) {
    await using dir = await tempDir("kopf-incluster-");
    let image = Deno.env.get("KOPF_TS_TEST_IMAGE");
    if (!image) {
      image = `${dir.path}/operator.oci.tar`;
      await kopf(["build", "--image", "--tag", IMAGE, HANDLERS, "-o", image]);
    }
    await using plane = await ControlPlane.start({ handleSignals: false });
    await using node = await TestNode.start(plane, { handleSignals: false });
    const logs = new PodLogs(node);
    const started = performance.now();
    const took: string[] = [];
    const timed = (name: string, fn: () => Promise<void>) => async () => {
      const at = performance.now();
      try {
        await fn();
      } finally {
        took.push(`${name} ${((performance.now() - at) / 1000).toFixed(0)} s`);
      }
    };
    try {
      await node.importImage(image);
      using client = new Client(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
      await applyCrds(client, "crds/example.yaml");
      await applyCrds(client, "crds/peering.yaml");
      const report = async (namespace: string, error: unknown) => {
        console.error(node.logs(30));
        console.error(logs.dump(namespace));
        const pods = await client.api.list(PODS, { namespace }).catch(() => ({ items: [] }));
        console.error(JSON.stringify(pods.items.map((p) => [p.metadata?.name, p.status])));
        throw error;
      };
      took.push(`setup ${((performance.now() - started) / 1000).toFixed(0)} s`);

      await t.step(
        "1, 2: Ready by its probes, an object handled with status and Events, no 403; the Pod " +
          "deleted stops by SIGTERM and its successor repeats nothing",
        timed("proofs 1, 2", async () => {
          const namespace = await createTestNamespace(plane, "incluster");
          try {
            // As a user would: the RBAC generated for the handlers, the peering object, the
            // Deployment (with its liveness and readiness probes).
            await applyRbac(client, namespace);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            await apply(
              client,
              [await deploymentFrom("deploy/deployment.yaml", node)],
              namespace,
            );

            // Proof 1: Ready, the object handled (status, Event), no permission error.
            const [first] = await readyPods(client, namespace, 1);
            const firstName = first!.metadata!.name!;
            assert.equal((first!.status as PodStatus).containerStatuses?.[0]?.restartCount, 0);
            await client.api.create(KOPFEXAMPLES, kex("kex-1", { field: "value" }), { namespace });
            assert.deepEqual(await handledBy(client, namespace, "kex-1"), {
              message: "hello world",
              pod: firstName,
            });
            const events = await eventsAbout(client, namespace, "kex-1");
            assert.ok(events.includes(`create_fn in ${firstName}`), events.join(" | "));

            // Proof 2: the Pod deleted — SIGTERM, a graceful stop; the next Pod repeats nothing.
            await client.api.delete(PODS, firstName, { namespace });
            const [second] = await readyPods(client, namespace, 1, [firstName]);
            const secondName = second!.metadata!.name!;
            await eventually(
              () => logs.of(namespace, firstName).some((l) => l.endsWith("Operator stopped.")),
              30_000,
              "the first operator's graceful stop",
            ).catch(() => {});
            const firstLog = logs.of(namespace, firstName);
            assert.ok(firstLog.some((l) => l.endsWith("Operator stopped.")), firstLog.join("\n"));
            await client.api.create(KOPFEXAMPLES, kex("kex-2", { field: "value" }), { namespace });
            assert.deepEqual(await handledBy(client, namespace, "kex-2"), {
              message: "hello world",
              pod: secondName,
            });
            const later = logs.of(namespace, secondName);
            assert.deepEqual(
              later.filter((l) => l.includes("handles kex-1")),
              [],
              later.join("\n"),
            );
            assert.deepEqual((await handledBy(client, namespace, "kex-1")).pod, firstName);
            assert.ok(firstLog.some((l) => l.includes(`create_fn handles kex-1 in ${firstName}`)));
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      );

      await t.step(
        "5: the admission webhook served from the Pod at the node's address, in the webhook " +
          "configuration it manages: a bad object denied, a good one admitted",
        timed("proof 5", async () => {
          const namespace = await createTestNamespace(plane, "incluster-webhook");
          const managed = `${namespace}.kopf.dev`;
          try {
            // The startup handler enables the webhook when WEBHOOK_HOST is set: so for the
            // generator too, which imports the handlers.
            await applyRbac(client, namespace, ["--admission-managed", managed], {
              WEBHOOK_HOST: "192.0.2.1",
            });
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = await deploymentFrom("deploy/deployment.yaml", node);
            const container = podSpecOf(doc).containers[0]!;
            container.env = [
              ...(container.env ?? []),
              { name: "WEBHOOK_HOST", valueFrom: { fieldRef: { fieldPath: "status.hostIP" } } },
              { name: "WEBHOOK_MANAGED", value: managed },
            ];
            await apply(client, [doc], namespace);
            const [pod] = await readyPods(client, namespace, 1);
            const podName = pod!.metadata!.name!;
            const hostIp = (pod!.status as PodStatus).hostIP!;
            assert.equal(hostIp, Deno.env.get("KOPF_TS_NODE_IP"));

            // The configuration it manages points the API server at the Pod: the node's address.
            const configuration = await eventually(
              () => client.api.get(VALIDATING, managed),
              60_000,
              `the ValidatingWebhookConfiguration ${managed}`,
            );
            const webhooks = configuration.webhooks as Array<
              { name: string; clientConfig: { url?: string; caBundle?: string } }
            >;
            assert.equal(webhooks.length, 1, JSON.stringify(webhooks));
            const url = new URL(webhooks[0]!.clientConfig.url!);
            assert.equal(url.host, `${hostIp}:9443`);
            assert.ok(webhooks[0]!.clientConfig.caBundle, "the generated CA as the caBundle");

            const labels = { "kopf.dev/incluster-webhook": "yes" };
            const denial = await eventually(
              async () => {
                try {
                  await client.api.create(KOPFEXAMPLES, kex("bad", { field: "bad" }, labels), {
                    namespace,
                  });
                  assert.fail("the bad object was admitted");
                } catch (error) {
                  // Until the server listens, the call fails (failurePolicy: Fail): try again.
                  if (error instanceof ApiError && /denied the request/.test(error.message)) {
                    return error;
                  }
                  throw error;
                }
              },
              30_000,
              "the webhook's denial",
            );
            assert.match(denial.message, new RegExp(`spec.field 'bad' is refused by ${podName}`));
            await client.api.create(KOPFEXAMPLES, kex("good", { field: "good" }, labels), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "good")).pod, podName);
            await assert.rejects(client.api.get(KOPFEXAMPLES, "bad", { namespace }), /not found/i);
            const lines = logs.of(namespace, podName);
            assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));

            // A graceful stop removes the (non-persistent) webhook from the configuration.
            await removeDeployment(client, namespace, "kopf-operator");
            const after = await client.api.get(VALIDATING, managed).catch(() => ({ webhooks: [] }));
            assert.deepEqual(after.webhooks ?? [], []);
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
            await client.api.delete(VALIDATING, managed).catch(() => {});
          }
        }),
      );

      await t.step(
        "3: leader election — two replicas, one leads; scaled to 1, its Pod goes, the standby takes over " +
          "and handles a new object",
        timed("proof 3", async () => {
          const namespace = await createTestNamespace(plane, "incluster-leader");
          try {
            await applyRbac(client, namespace, ["--leader-elect"]);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = onFreePorts(await deploymentFrom("deploy/deployment.yaml", node), 2);
            podSpecOf(doc).containers[0]!.args!.push("--leader-elect");
            await apply(client, [doc], namespace);
            const pods = (await readyPods(client, namespace, 2)).map((p) => p.metadata!.name!);
            const holder = async () => {
              const lease = await client.api.get(LEASES, "kopf-leader", { namespace });
              const identity = (lease.spec as { holderIdentity?: string }).holderIdentity ?? "";
              return pods.find((pod) => identity.startsWith(pod));
            };
            const leader = await eventually(holder, 60_000, "a leader among the two Pods");
            const standby = pods.find((pod) => pod !== leader)!;
            await client.api.create(KOPFEXAMPLES, kex("kex-l1", { field: "value" }), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "kex-l1")).pod, leader);

            // The leader's Pod removed: SIGTERM, the Lease released, the standby takes it at its
            // next attempt; then an object is created for it. Deleting the Pod alone would let
            // the ReplicaSet start a replacement that can win the released Lease before the
            // standby's next attempt (both are right, but only one proves the standby): so the
            // Deployment is scaled to 1 with the leader marked as the cheapest Pod to remove
            // (`controller.kubernetes.io/pod-deletion-cost`), as `kubectl annotate` + `kubectl
            // scale` would — the ReplicaSet deletes the leader's Pod and starts none.
            await client.api.patch(PODS, leader, {
              metadata: { annotations: { "controller.kubernetes.io/pod-deletion-cost": "-1000" } },
            }, { namespace });
            const deleted = performance.now();
            await client.api.patch(DEPLOYMENTS, "kopf-operator", { spec: { replicas: 1 } }, {
              namespace,
              subresource: "scale",
            });
            await eventually(
              async () =>
                (await client.api.list(PODS, { namespace })).items.every((p) =>
                  p.metadata?.name !== leader || p.metadata?.deletionTimestamp
                ),
              30_000,
              "the ReplicaSet's deletion of the leader's Pod",
            );
            await eventually(
              async () => (await holder()) === standby,
              60_000,
              "the standby's hold of the Lease",
            );
            const movedAt = performance.now();
            await client.api.create(KOPFEXAMPLES, kex("kex-l2", { field: "value" }), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "kex-l2")).pod, standby);
            const handledAt = performance.now();
            console.log(
              `leader hand-over after kubectl delete pod: the Lease held by the standby after ` +
                `${((movedAt - deleted) / 1000).toFixed(1)} s; an object created then handled by ` +
                `it ${((handledAt - movedAt) / 1000).toFixed(1)} s later`,
            );
            const standbyLog = logs.of(namespace, standby);
            assert.ok(!standbyLog.some((l) => l.includes("handles kex-l1")), standbyLog.join("\n"));
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      );

      await t.step(
        "4: sharding — deploy/sharded.yaml at 1 replica, scaled to 3 and back to 1 while objects " +
          "are created: each handled once, each replica's share in its metrics, no finalizer " +
          "touched",
        timed("proof 4", async () => {
          const namespace = await createTestNamespace(plane, "incluster-shards");
          const observed = watchFinalizers(client, namespace);
          const name = "kopf-operator-sharded";
          const scale = (replicas: number) =>
            client.api.patch(DEPLOYMENTS, name, { spec: { replicas } }, {
              namespace,
              subresource: "scale",
            });
          const shardsHeldBy = async (pods: readonly string[]) => {
            const status = await readShardStatus(client.api, { name: "kopf", namespace });
            const holders = status.shards.map((s) => pods.find((p) => s.holder?.startsWith(p)));
            return status.shards.length === 32 && holders.every(Boolean) &&
              new Set(holders).size === pods.length;
          };
          try {
            // deploy/rbac.yaml's part generated for the handlers, then sharded.yaml as it is
            // documented: its Role for the Leases and the Deployment.
            await applyRbac(client, namespace);
            const docs = yamlDocs(await Deno.readTextFile("deploy/sharded.yaml"));
            await apply(client, docs.filter((d) => d.kind !== "Deployment"), namespace);
            await apply(
              client,
              [onFreePorts(await deploymentFrom("deploy/sharded.yaml", node), 1)],
              namespace,
            );
            const [one] = await readyPods(client, namespace, 1);
            const first = one!.metadata!.name!;
            await eventually(() => shardsHeldBy([first]), 60_000, "all shards held by one");
            const names: string[] = [];
            for (let i = 0; i < 5; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`a-${i}`, { field: "value" }), {
                namespace,
              });
              names.push(`a-${i}`);
            }

            // 1 → 3 (as `kubectl scale --replicas 3` does) while objects are created.
            let creator = creating(client, namespace, "b");
            await scale(3);
            const three = (await readyPods(client, namespace, 3)).map((p) => p.metadata!.name!);
            await eventually(() => shardsHeldBy(three), 90_000, "the shards split among three");
            names.push(...await creator.stop());
            const batch: string[] = [];
            for (let i = 0; i < 45; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`c-${i}`, { field: "value" }), {
                namespace,
              });
              batch.push(`c-${i}`);
            }
            names.push(...batch);
            const handled = new Map<string, string>();
            for (const object of names) {
              handled.set(object, (await handledBy(client, namespace, object)).pod ?? "");
            }
            // Each replica's share from its metrics endpoint: what it ran is what it persisted.
            const shares: string[] = [];
            for (const pod of three) {
              const port = await eventually(
                () => metricsPort(logs.of(namespace, pod)),
                30_000,
                `the metrics port of ${pod}`,
              );
              const runs = await handlerRuns(port, "create_fn");
              const persisted = [...handled.values()].filter((p) => p === pod).length;
              assert.equal(runs, persisted, `${pod}: create_fn runs in its metrics`);
              assert.ok(batch.some((o) => handled.get(o) === pod), `${pod} had no share`);
              shares.push(`${pod.slice(-5)} ${runs}`);
            }
            console.log(`sharding: create_fn runs per replica at 3 replicas: ${shares.join(", ")}`);

            // 3 → 1 while objects are created.
            creator = creating(client, namespace, "d");
            await scale(1);
            const [last] = await eventually(
              async () => {
                const pods = await client.api.list(PODS, { namespace });
                return pods.items.length === 1 ? pods.items : undefined;
              },
              90_000,
              "one replica left",
            );
            await eventually(
              () => shardsHeldBy([last!.metadata!.name!]),
              60_000,
              "all shards held by the one left",
            );
            names.push(...await creator.stop());
            for (let i = 0; i < 5; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`e-${i}`, { field: "value" }), {
                namespace,
              });
              names.push(`e-${i}`);
            }
            for (const object of names) await handledBy(client, namespace, object);

            // Exactly once: one `create_fn handles` line per object in all replicas' logs (read
            // along: the last lines may come a moment later than the status).
            const notOnce = () => {
              const runs = new Map<string, number>();
              for (const lines of logs.inNamespace(namespace).values()) {
                for (const line of lines) {
                  const match = line.match(/create_fn handles (\S+) in /);
                  if (match) runs.set(match[1]!, (runs.get(match[1]!) ?? 0) + 1);
                }
              }
              return names.filter((object) => runs.get(object) !== 1)
                .map((object) => `${object}: ${runs.get(object) ?? 0}`);
            };
            await eventually(() => notOnce().length === 0, 5_000).catch(() => {});
            assert.deepEqual(notOnce(), [], "create_fn ran once per object");
            assert.ok(
              names.some((n) => n.startsWith("b-")) && names.some((n) => n.startsWith("d-")),
            );
            // Finalizers: added by the first handling, never removed or re-added by a rebalance.
            await observed.stop();
            assert.equal(observed.gaps(), 0, "the test's watch saw every version");
            const changed = names.map((n) => [n, observed.finalizers.get(n) ?? []] as const)
              .filter(([, lists]) =>
                JSON.stringify(lists) !== JSON.stringify(["[]", `["${FINALIZER}"]`])
              );
            assert.deepEqual(changed, [], "finalizer lists other than [] → [finalizer]");
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
            assert.ok(
              !all.some((l) => l.includes("delete_fn handles")),
              "no deletion handling on a rebalance",
            );
          } catch (error) {
            await report(namespace, error);
          } finally {
            await observed.stop();
            await removeDeployment(client, namespace, name);
          }
        }),
      );

      await t.step({
        name: "6: token rotation — the kubelet refreshes a projected token of 600 s and the " +
          "operator keeps working after the first one expired (opt-in: " +
          "KOPF_TS_TEST_TOKEN_ROTATION=1, about 11 minutes)",
        ignore: !TOKEN_ROTATION,
        fn: timed("proof 6", async () => {
          const namespace = await createTestNamespace(plane, "incluster-token");
          try {
            await applyRbac(client, namespace);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = await deploymentFrom("deploy/deployment.yaml", node);
            const spec = podSpecOf(doc);
            // The volume the ServiceAccount admission would add, with the shortest lifetime
            // the API server accepts (600 s: Pod validation's floor, no flag lowers it).
            spec.automountServiceAccountToken = false;
            spec.volumes = [...(spec.volumes ?? []), {
              name: "short-token",
              projected: {
                sources: [
                  { serviceAccountToken: { path: "token", expirationSeconds: 600 } },
                  {
                    configMap: {
                      name: "kube-root-ca.crt",
                      items: [{ key: "ca.crt", path: "ca.crt" }],
                    },
                  },
                  {
                    downwardAPI: {
                      items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }],
                    },
                  },
                ],
              },
            }];
            const container = spec.containers[0]!;
            container.volumeMounts = [...(container.volumeMounts ?? []), {
              name: "short-token",
              mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
              readOnly: true,
            }];
            await apply(client, [doc], namespace);
            const [pod] = await readyPods(client, namespace, 1);
            const podName = pod!.metadata!.name!;
            const file = `${node.dir}/kubelet/pods/${pod!.metadata!.uid}/volumes/` +
              "kubernetes.io~projected/short-token/token";
            const firstToken = await Deno.readTextFile(file);
            const { exp, iat } = jwtClaims(firstToken);
            assert.equal(exp - iat, 600);
            await client.api.create(KOPFEXAMPLES, kex("t-1", { field: "value" }), { namespace });
            assert.equal((await handledBy(client, namespace, "t-1")).pod, podName);

            // The kubelet writes a new token at about 80% of the lifetime (480 s, less a jitter
            // of up to 10 s).
            const secondToken = await eventually(
              async () => {
                const token = await Deno.readTextFile(file);
                return token !== firstToken && token;
              },
              (exp - Date.now() / 1000) * 1000,
              "the kubelet's new token",
            );
            assert.ok(jwtClaims(secondToken).exp > exp);
            // Past the first token's expiry and the API server's leeway (60 s), it is refused;
            // the operator's requests after that must carry the new one.
            await sleep(Math.max(0, (exp + 65) * 1000 - Date.now()));
            const review = await client.api.create(
              {
                group: "authentication.k8s.io",
                version: "v1",
                plural: "tokenreviews",
                namespaced: false,
              },
              {
                apiVersion: "authentication.k8s.io/v1",
                kind: "TokenReview",
                spec: { token: firstToken },
              },
            );
            assert.equal(
              (review.status as { authenticated?: boolean }).authenticated ?? false,
              false,
            );
            await client.api.create(KOPFEXAMPLES, kex("t-2", { field: "value" }), { namespace });
            assert.equal((await handledBy(client, namespace, "t-2")).pod, podName);
            const lines = logs.of(namespace, podName);
            assert.deepEqual(
              lines.filter((l) => /\b401\b|unauthorized/i.test(l)),
              [],
              "no request refused for an expired token",
            );
            assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      });
    } finally {
      await logs.stop();
      console.log(`incluster: ${took.join(", ")}`);
    }
  },
});
