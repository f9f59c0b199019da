/**
 * Diagnostic: what the API server spends on the writes and lists an operator makes, on the CRD
 * without a status subresource. It answers "why does the API server work harder for kopf-ts than
 * for the raw floor in the backlog" (docs/performance.md, round 6):
 *
 * - a merge patch of `status` alone (the raw floor's write) against one that also sets Kopf's
 *   `last-handled-configuration` annotation (kopf-ts's write with Kopf's annotations), each on
 *   `--count` fresh objects, 16 at a time;
 * - ten lists of those objects in one request against pages of 500 (`limit`, `continue`).
 *
 * The API server's and etcd's CPU seconds come from /proc, before and after each measurement;
 * the shapes alternate over `--reps` repetitions.
 *
 *   deno run -A bench/apiserver_cost.ts [--count 3000] [--reps 2]
 *
 * Without a running control plane (`$KOPF_TS_TEST_KUBECONFIG`) it starts one.
 * @module
 */
import { parseArgs } from "node:util";
import { createTestNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { Api, pool } from "./lib/kube.ts";
import { cpuSeconds, findProcesses } from "./lib/procs.ts";
import { CRD_VARIANTS } from "./lib/config.ts";
import { applyCrd, waitForCrd } from "./lib/setup.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "3000" },
    reps: { type: "string", default: "2" },
  },
});
const count = Number(values.count), reps = Number(values.reps);

const plane = await sharedControlPlane();
const api = new Api(plane);
await applyCrd(api, CRD_VARIANTS.find((v) => v.id === "plain")!);
await waitForCrd(api);
const planeDir = plane.kubeconfigPath.replace(/\/[^/]*$/, "");
const serverPids = [
  ...findProcesses(planeDir, "kube-apiserver"),
  ...findProcesses(planeDir, "etcd"),
];
if (serverPids.length === 0) throw new Error(`no kube-apiserver or etcd found for ${planeDir}`);
const client = Deno.createHttpClient({ caCerts: [plane.caPem] });
const headers = { Authorization: `Bearer ${plane.adminToken}` };

// What kopf-ts (and Kopf) store as the diff-base of a benchmark object: its essence.
const diffBase = JSON.stringify({
  spec: { duration: "1m", field: "value", items: ["item1", "item2"], value: 0 },
  metadata: { labels: { "bench.kopf.dev/object": "yes" } },
});
const status = () => ({ create_fn: { message: "hello", started: Date.now() } });
const shapes: Record<string, () => unknown> = {
  "status only (the raw floor)": () => ({ status: status() }),
  "status + diff-base annotation (kopf-ts, Kopf)": () => ({
    metadata: { annotations: { "kopf.zalando.org/last-handled-configuration": diffBase } },
    status: status(),
  }),
};

/** CPU seconds of the API server and etcd while `work` runs. */
async function serverCpu(work: () => Promise<void>): Promise<number> {
  const before = cpuSeconds(serverPids);
  await work();
  return cpuSeconds(serverPids) - before;
}

async function listAll(base: string, limit: number): Promise<number> {
  let items = 0, token = "";
  do {
    const query = new URLSearchParams();
    if (limit) query.set("limit", String(limit));
    if (token) query.set("continue", token);
    const response = await fetch(`${base}?${query}`, { client, headers });
    if (!response.ok) throw new Error(`list: HTTP ${response.status}`);
    const body = await response.json();
    items += body.items.length;
    token = body.metadata?.continue ?? "";
  } while (token);
  return items;
}

const results = new Map<string, number[]>();
const record = (name: string, value: number) =>
  results.set(name, [...(results.get(name) ?? []), value]);
const names = Array.from({ length: count }, (_, i) => `obj-${i}`);
for (let rep = 0; rep < reps; rep++) {
  const order = Object.entries(shapes);
  if (rep % 2) order.reverse();
  for (const [label, shape] of order) {
    const ns = await createTestNamespace(plane, "apiserver-cost");
    await pool(names, 16, (name) => api.create(ns, name));
    const base = `${plane.server}/apis/kopf.dev/v1/namespaces/${ns}/kopfexamples`;
    const cpu = await serverCpu(() =>
      pool(names, 16, async (name) => {
        const response = await fetch(`${base}/${name}`, {
          method: "PATCH",
          client,
          headers: { ...headers, "Content-Type": "application/merge-patch+json" },
          body: JSON.stringify(shape()),
        });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`patch ${name}: HTTP ${response.status}`);
      })
    );
    record(`patch: ${label}, ms per object`, (cpu / count) * 1000);
    if (label.startsWith("status + ")) {
      for (const limit of rep % 2 ? [500, 0] : [0, 500]) {
        const listed = await serverCpu(async () => {
          for (let i = 0; i < 10; i++) await listAll(base, limit);
        });
        record(`list of ${count}: ${limit ? "pages of 500" : "one request"}, ms`, listed * 100);
      }
    }
    await api.clear(ns);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`API server + etcd CPU, ${count} objects, ${reps} repetitions (median):`);
for (const [name, xs] of results) {
  console.log(`  ${name}: ${median(xs).toFixed(3)} (${xs.map((x) => x.toFixed(3)).join(", ")})`);
}
client.close();
Deno.exit(0);
