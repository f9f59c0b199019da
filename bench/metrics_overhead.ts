/**
 * The cost of metrics: the benchmark's operator (bench/handlers/kopf_ts.ts) over the same number
 * of objects with `--metrics` off and on (scraped every second, as a busy Prometheus would),
 * alternating, on one private control plane. Reports operator CPU seconds per 1,000 handled
 * objects and peak RSS for each, and the ratio on/off.
 *
 *   tools/deno.sh run -A bench/metrics_overhead.ts [--count 1000] [--reps 2]
 *
 * Figures are one run on this machine, not assertions.
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { ControlPlane } from "../testing/control_plane.ts";
import { Api, pool } from "./lib/kube.ts";
import { cpuSeconds, memoryMiB, processTree } from "./lib/procs.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  args: Deno.args,
  options: { count: { type: "string" }, reps: { type: "string" } },
});
const count = Number(values.count ?? 1000);
const reps = Number(values.reps ?? 2);
const log = (message: string) =>
  console.error(`[metrics-overhead ${new Date().toISOString().slice(11, 19)}] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

log("starting a control plane");
await using plane = await ControlPlane.start({ controllerManager: false });
using api = new Api(plane);
const crd = parseYaml(await Deno.readTextFile(`${ROOT}/crds/example.yaml`));
await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);

async function handled(namespace: string): Promise<number> {
  const { body } = await api.request("GET", api.path(namespace), undefined, { timeoutMs: 60_000 });
  const items = (body as { items?: { status?: { create_fn?: unknown } }[] }).items ?? [];
  return items.filter((item) => item.status?.create_fn).length;
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

interface Run {
  readonly metrics: boolean;
  readonly cpuPer1000: number;
  readonly peakRssMiB: number;
  readonly scrapes: number;
}
const runs: Run[] = [];
for (let rep = 0; rep < reps; rep++) {
  for (const metrics of rep % 2 ? [true, false] : [false, true]) {
    const namespace = `mo-${rep}-${metrics ? "on" : "off"}`;
    await api.request("POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace },
    });
    const port = freePort();
    const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
      args: [
        ...["run", "-A", "cli.ts", "run", "bench/handlers/kopf_ts.ts"],
        ...["-n", namespace, "--standalone", "-q"],
        ...(metrics ? ["--metrics", `http://127.0.0.1:${port}/metrics`] : []),
      ],
      cwd: ROOT,
      env: { KUBECONFIG: plane.kubeconfigPath, BENCH_NO_EVENTS: "1" },
      stdout: "null",
      stderr: "null",
    }).spawn();
    await api.create(namespace, "warm-up");
    while (await handled(namespace) < 1) await sleep(200);
    let scrapes = 0;
    let scraping = metrics;
    const scraper = (async () => {
      while (scraping) {
        await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()).then(() => scrapes++)
          .catch(() => {});
        await sleep(1_000);
      }
    })();
    const cpu0 = cpuSeconds(processTree(child.pid));
    await pool(
      Array.from({ length: count }, (_, i) => `o${i}`),
      48,
      (n) => api.create(namespace, n),
    );
    while (await handled(namespace) < count + 1) await sleep(300);
    await sleep(1_000);
    const cpu = cpuSeconds(processTree(child.pid)) - cpu0;
    const peak = memoryMiB(processTree(child.pid), "VmHWM");
    scraping = false;
    await scraper;
    child.kill("SIGTERM");
    await child.status;
    const run = { metrics, cpuPer1000: (cpu / count) * 1000, peakRssMiB: peak, scrapes };
    runs.push(run);
    log(JSON.stringify(run));
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const off = runs.filter((r) => !r.metrics), on = runs.filter((r) => r.metrics);
const cpuOff = mean(off.map((r) => r.cpuPer1000)), cpuOn = mean(on.map((r) => r.cpuPer1000));
const rssOff = mean(off.map((r) => r.peakRssMiB)), rssOn = mean(on.map((r) => r.peakRssMiB));
const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+/, "");
await Deno.writeTextFile(
  `${ROOT}/bench/results/${stamp}-metrics-overhead.json`,
  JSON.stringify({ count, reps, runs }, null, 2) + "\n",
);
const markdown = [
  `Metrics overhead: ${count} objects per run, ${reps} run(s) each way, alternating; metrics ` +
  `scraped every second while on; one run on this machine.`,
  "",
  "| metrics | operator CPU s per 1,000 objects | peak RSS, MiB |",
  "| --- | ---: | ---: |",
  `| off | ${cpuOff.toFixed(2)} | ${rssOff.toFixed(0)} |`,
  `| on | ${cpuOn.toFixed(2)} | ${rssOn.toFixed(0)} |`,
  `| on / off | ${(cpuOn / cpuOff).toFixed(2)}x | ${(rssOn / rssOff).toFixed(2)}x |`,
].join("\n");
await Deno.writeTextFile(`${ROOT}/bench/results/${stamp}-metrics-overhead.md`, markdown + "\n");
console.log(markdown);
