/**
 * Level-based reconciliation, measured (`on.reconcile`, bench/handlers/reconcile_ts.ts): N
 * parents (KopfExamples) each owning one ConfigMap, on a private control plane with an audit log.
 *
 * 1. Create N parents with 48 requests in flight; time until every child exists, and the
 *    operator's requests per parent (writes, GETs, lists) from the audit log.
 * 2. Idle for 10 s: requests in that window (expected: none but the open watches).
 * 3. Delete all children at once (one deletecollection); time until all are back, and the
 *    requests per parent again.
 * 4. Delete one child at a time (`--single`, 20 by default, 0.2 s apart): the latency from the
 *    DELETE request to the recreated child's ADDED event on a watch of the bench's own (p50,
 *    p99, max), and the operator's requests per deletion.
 *
 *   tools/deno.sh run -A bench/reconcile.ts [--count 1000] [--single 20]
 *
 * Python Kopf has no level-based handlers (and cannot notice a deleted child): there is no
 * side-by-side contender. Figures are one run on this machine, not assertions.
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { ControlPlane } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog, summarize } from "./lib/audit.ts";
import { Api, pool } from "./lib/kube.ts";
import { cpuSeconds, memoryMiB, processTree } from "./lib/procs.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  args: Deno.args,
  options: { count: { type: "string" }, single: { type: "string" } },
});
const count = Number(values.count ?? 1000);
const singles = Math.min(Number(values.single ?? 20), count);
const log = (message: string) =>
  console.error(`[reconcile ${new Date().toISOString().slice(11, 19)}] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const work = await Deno.makeTempDir({ prefix: "kopf-bench-reconcile-" });
const auditPath = `${work}/audit.log`;
await Deno.writeTextFile(`${work}/audit-policy.yaml`, AUDIT_POLICY);
log("starting a control plane (with an audit log)");
await using plane = await ControlPlane.start({
  controllerManager: false,
  apiServerArgs: [
    `--audit-policy-file=${work}/audit-policy.yaml`,
    `--audit-log-path=${auditPath}`,
    "--audit-log-format=json",
    "--audit-log-mode=blocking",
    "--audit-log-maxsize=0",
    "--audit-log-maxbackup=0",
  ],
});
using api = new Api(plane);
const audit = new AuditLog(auditPath);
const crd = parseYaml(await Deno.readTextFile(`${ROOT}/crds/example.yaml`));
await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
const namespace = "rec-bench";
await api.request("POST", "/api/v1/namespaces", {
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: namespace },
});
for (let i = 0; i < 60; i++) {
  if ((await api.request("GET", api.path(namespace))).status === 200) break;
  await sleep(500);
}

const children = `/api/v1/namespaces/${namespace}/configmaps?labelSelector=bench%3Dchild`;
async function childCount(): Promise<number> {
  const { body } = await api.request("GET", children, undefined, { timeoutMs: 60_000 });
  return ((body as { items?: unknown[] }).items ?? []).length;
}
async function waitChildren(target: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (await childCount() < target) {
    if (Date.now() > deadline) throw new Error(`not all ${target} children in time`);
    await sleep(200);
  }
}

const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
  args: [
    ...["run", "-A", "cli.ts", "run", "bench/handlers/reconcile_ts.ts"],
    ...["-n", namespace, "--standalone", "-q"],
  ],
  cwd: ROOT,
  env: { KUBECONFIG: plane.kubeconfigPath },
  stdout: "null",
  stderr: "inherit",
}).spawn();

/**
 * Watches the children from `resourceVersion` on and resolves, per name, the next ADDED event
 * (when it arrived on this clock, `performance.now()`).
 */
function watchChildren(resourceVersion: string, signal: AbortSignal) {
  const waiters = new Map<string, (at: number) => void>();
  const running = (async () => {
    const response = await api.stream(
      `${children}&watch=true&resourceVersion=${resourceVersion}&timeoutSeconds=600`,
      signal,
    );
    if (!response.ok || !response.body) throw new Error(`watch: HTTP ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    signal.addEventListener("abort", () => void reader.cancel().catch(() => {}), { once: true });
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: "" }));
      if (done) return;
      buffer += value;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        const event = JSON.parse(line) as { type: string; object: { metadata: { name: string } } };
        if (event.type !== "ADDED") continue;
        const name = event.object.metadata.name;
        waiters.get(name)?.(performance.now());
        waiters.delete(name);
      }
    }
  })();
  return {
    running,
    added: (name: string) => new Promise<number>((resolve) => waiters.set(name, resolve)),
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

interface Phase {
  readonly phase: string;
  readonly seconds: number;
  readonly perParent: Record<string, number>;
  readonly total: number;
}
const phases: Phase[] = [];
async function measure(phase: string, action: () => Promise<void>): Promise<void> {
  const from = Date.now();
  const t0 = performance.now();
  await action();
  const seconds = (performance.now() - t0) / 1000;
  await sleep(2_000); // requests that follow the last child (none expected) are counted too
  await audit.poll();
  const records = audit.select("kopf-ts", from, Date.now(), (r) => r.verb !== "watch");
  const summary = summarize(records);
  const perParent = Object.fromEntries(
    Object.entries(summary.byVerbResource).map(([key, n]) => [key, n / count]),
  );
  phases.push({ phase, seconds, perParent, total: summary.total });
  log(`${phase}: ${seconds.toFixed(1)} s, ${JSON.stringify(summary.byVerbResource)}`);
}

try {
  // Warm-up: the operator lists and watches; one parent and its child.
  await api.create(namespace, "warm-up");
  await waitChildren(1, 120_000);
  await api.request("DELETE", api.path(namespace, "warm-up"));
  await api.request("DELETE", `/api/v1/namespaces/${namespace}/configmaps/warm-up-child`);
  await sleep(2_000);
  const cpu0 = cpuSeconds(processTree(child.pid));

  await measure(`create ${count} parents`, async () => {
    await pool(
      Array.from({ length: count }, (_, i) => `p${i}`),
      48,
      (n) => api.create(namespace, n),
    );
    await waitChildren(count, 600_000);
  });
  const idleFrom = Date.now();
  await sleep(10_000);
  await audit.poll();
  const idle = audit.select("kopf-ts", idleFrom, Date.now(), (r) => r.verb !== "watch").length;
  await measure(`delete all ${count} children at once`, async () => {
    await api.request("DELETE", children, undefined, { timeoutMs: 120_000 });
    await sleep(500);
    await waitChildren(count, 600_000);
  });

  // One child at a time: from the DELETE to the recreated child on a watch.
  const listed = await api.request("GET", children);
  const rv = (listed.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const stopWatch = new AbortController();
  const watch = watchChildren(rv, stopWatch.signal);
  const latencies: number[] = [];
  const singleFrom = Date.now();
  for (let i = 0; i < singles; i++) {
    const name = `p${i}-child`;
    const added = watch.added(name);
    const t0 = performance.now();
    const { status } = await api.request(
      "DELETE",
      `/api/v1/namespaces/${namespace}/configmaps/${name}`,
    );
    if (status !== 200) throw new Error(`delete ${name}: HTTP ${status}`);
    const at = await Promise.race([
      added,
      sleep(60_000).then(() => Promise.reject(new Error(`${name} not recreated in 60 s`))),
    ]);
    latencies.push(at - t0);
    await sleep(200);
  }
  stopWatch.abort();
  await watch.running.catch(() => {});
  await sleep(2_000);
  await audit.poll();
  const singleSummary = summarize(
    audit.select("kopf-ts", singleFrom, Date.now(), (r) => r.verb !== "watch"),
  );
  const sorted = [...latencies].sort((a, b) => a - b);
  const single = {
    deletions: singles,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1)!,
    latenciesMs: latencies,
    perDeletion: Object.fromEntries(
      Object.entries(singleSummary.byVerbResource).map(([key, n]) => [key, n / singles]),
    ),
  };
  log(`single deletions: p50 ${single.p50Ms.toFixed(0)} ms, p99 ${single.p99Ms.toFixed(0)} ms`);
  const cpu = cpuSeconds(processTree(child.pid)) - cpu0;
  const peak = memoryMiB(processTree(child.pid), "VmHWM");

  const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+/, "");
  const result = { count, phases, idleRequests: idle, single, cpuSeconds: cpu, peakRssMiB: peak };
  await Deno.writeTextFile(
    `${ROOT}/bench/results/${stamp}-reconcile.json`,
    JSON.stringify(result, null, 2) + "\n",
  );
  const fmt = (p: Record<string, number>) =>
    Object.entries(p).sort().map(([k, v]) => `${k}: ${v.toFixed(2)}`).join(", ") || "none";
  const markdown = [
    `Reconcile: ${count} parents each owning one ConfigMap (on.reconcile with owns, ` +
    `server-side apply); one run on this machine; operator CPU ${cpu.toFixed(1)} s, ` +
    `peak RSS ${peak.toFixed(0)} MiB.`,
    "",
    "| phase | until all children exist, s | operator requests per parent (audit log, watches excluded) |",
    "| --- | ---: | --- |",
    ...phases.map((p) => `| ${p.phase} | ${p.seconds.toFixed(1)} | ${fmt(p.perParent)} |`),
    `| idle 10 s after the creation | — | ${idle} requests in all |`,
    "",
    `Deleting one child at a time (${singles} deletions, 0.2 s apart), from the DELETE request ` +
    `to the recreated child's ADDED event on a watch: p50 ${single.p50Ms.toFixed(0)} ms, ` +
    `p99 ${single.p99Ms.toFixed(0)} ms, max ${single.maxMs.toFixed(0)} ms; operator requests ` +
    `per deletion: ${fmt(single.perDeletion)}.`,
  ].join("\n");
  await Deno.writeTextFile(`${ROOT}/bench/results/${stamp}-reconcile.md`, markdown + "\n");
  console.log(markdown);
} finally {
  child.kill("SIGTERM");
  await child.status;
  await Deno.remove(work, { recursive: true }).catch(() => {});
}
