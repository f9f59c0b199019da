/**
 * What tests/incluster_test.ts uses around its proofs: the resources it applies, `deploy/`
 * read and made to fit the one test node (free ports, `imagePullPolicy: Never`), the Pods' logs
 * followed as the kubelet writes them, and waits for what a proof looks at (an object handled,
 * its Events, a replica's metrics, the finalizers a watch saw, a token's claims).
 * @module
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import type { KubeClient } from "../core/client/client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { watcher } from "../core/client/watching.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { TestNode } from "../testing/plane/node.ts";
import { listEvents, PODS } from "./_examples.ts";
import { eventually, kex, KOPFEXAMPLES, sleep } from "./_support.ts";

export const HANDLERS = "tests/fixtures/incluster_operator.ts";
export const IMAGE = "kopf-incluster:test";
export const opts = { sanitizeOps: false, sanitizeResources: false };
export const TOKEN_ROTATION = Deno.env.get("KOPF_TS_TEST_TOKEN_ROTATION") === "1";

export const DEPLOYMENTS: ResourceRef = {
  group: "apps",
  version: "v1",
  plural: "deployments",
  namespaced: true,
};
export const LEASES: ResourceRef = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  namespaced: true,
};
export const VALIDATING: ResourceRef = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  plural: "validatingwebhookconfigurations",
  namespaced: false,
};

export const RESOURCES: Readonly<Record<string, ResourceRef>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts", namespaced: true },
  ClusterRole: rbac("clusterroles", false),
  ClusterRoleBinding: rbac("clusterrolebindings", false),
  Role: rbac("roles", true),
  RoleBinding: rbac("rolebindings", true),
  KopfPeering: { group: "kopf.dev", version: "v1", plural: "kopfpeerings", namespaced: true },
  Deployment: DEPLOYMENTS,
};

export function rbac(plural: string, namespaced: boolean): ResourceRef {
  return { group: "rbac.authorization.k8s.io", version: "v1", plural, namespaced };
}

export function yamlDocs(text: string): KubeObject[] {
  return parseAllDocuments(text).map((d) => d.toJS() as KubeObject | null)
    .filter((d): d is KubeObject => d !== null);
}

export async function kopf(args: string[], env: Record<string, string> = {}): Promise<string> {
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
export async function apply(
  client: KubeClient,
  docs: KubeObject[],
  namespace: string,
): Promise<void> {
  for (const doc of docs) {
    const resource = RESOURCES[doc.kind!] ?? assert.fail(`unexpected kind ${doc.kind}`);
    if (!resource.namespaced) doc.metadata!.name = `${doc.metadata!.name}-${namespace}`;
    const ref = doc.roleRef as { kind: string; name: string } | undefined;
    if (ref?.kind === "ClusterRole") ref.name = `${ref.name}-${namespace}`;
    await client.api.create(resource, doc, resource.namespaced ? { namespace } : {});
  }
}

/** The RBAC `kopf generate rbac` prints for the handlers, applied into the namespace. */
export async function applyRbac(
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

export interface Container {
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

export interface PodSpec {
  hostNetwork?: boolean;
  containers: Container[];
  volumes?: unknown[];
  automountServiceAccountToken?: boolean;
}

export function podSpecOf(doc: KubeObject): PodSpec {
  return (doc.spec as { template: { spec: PodSpec } }).template.spec;
}

/** A Deployment of a deploy/ file with what this node needs (see the module's comment). */
export async function deploymentFrom(path: string, node: TestNode): Promise<KubeObject> {
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
export function onFreePorts(doc: KubeObject, replicas: number): KubeObject {
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

export interface PodStatus {
  phase?: string;
  hostIP?: string;
  conditions?: Array<{ type: string; status: string }>;
  containerStatuses?: Array<{ ready?: boolean; restartCount?: number }>;
}

export async function podsOf(client: KubeClient, namespace: string): Promise<KubeObject[]> {
  const { items } = await client.api.list(PODS, { namespace });
  return items.filter((pod) => !pod.metadata?.deletionTimestamp);
}

export function isReady(pod: KubeObject): boolean {
  const status = pod.status as PodStatus | undefined;
  return status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

export async function readyPods(
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
export async function removeDeployment(client: KubeClient, namespace: string, name: string) {
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
export class PodLogs {
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

export interface Handled {
  message?: string;
  pod?: string;
}

export async function handledBy(
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

export async function eventsAbout(client: KubeClient, namespace: string, name: string) {
  return await eventually(
    async () => {
      const events = await listEvents(client, namespace, { name });
      return events.length > 0 ? events.map((e) => e.message) : undefined;
    },
    30_000,
    `Events about ${name}`,
  );
}

/** The port a replica's metrics endpoint bound, from its log line `Serving metrics at …`. */
export function metricsPort(lines: readonly string[]): number | undefined {
  for (const line of lines) {
    const match = line.match(/Serving metrics at http:\/\/[^/]*:(\d+)\//);
    if (match) return Number(match[1]);
  }
  return undefined;
}

/** `kopf_handler_runs_total` of a handler that succeeded, from a replica's metrics endpoint. */
export async function handlerRuns(port: number, handler: string): Promise<number> {
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
export function creating(client: KubeClient, namespace: string, prefix: string, everyMs = 300) {
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
export function watchFinalizers(client: KubeClient, namespace: string) {
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
export function jwtClaims(token: string): { exp: number; iat: number } {
  const part = token.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/");
  return JSON.parse(atob(part.padEnd(part.length + (4 - part.length % 4) % 4, "=")));
}
