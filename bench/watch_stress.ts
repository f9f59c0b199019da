/**
 * A diagnostic beside the benchmark: does the API server drop an operator's watch during a burst
 * of creations?
 *
 * The API server's watch cache gives each watcher a small buffer; when a watcher does not take
 * its events fast enough, the cache closes it ("Forcing … watcher close due to
 * unresponsiveness", logged at `--v=2` and above). The operator then has to open a new watch
 * (and, after a longer stall, relist). This script starts its own control plane with `--v=3`,
 * and for each contender: starts the operator on a fresh namespace, creates N objects
 * (48 requests in flight), waits until all are handled, and counts the forced closures of
 * watches on that namespace in the API server's log.
 *
 *   tools/deno.sh run -A bench/watch_stress.ts [--count 3000] [--only kopf-ts,raw-floor,kopf-py]
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { ControlPlane } from "../testing/control_plane.ts";
import { Api, pool } from "./lib/kube.ts";
import { cpuSeconds, processTree } from "./lib/procs.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  args: Deno.args,
  options: { count: { type: "string" }, only: { type: "string" } },
});
const count = Number(values.count ?? 3000);
const only = values.only?.split(",").map((s) => s.trim());

const log = (message: string) =>
  console.error(`[watch-stress ${new Date().toISOString().slice(11, 19)}] ${message}`);

async function pythonKopf(): Promise<string | undefined> {
  const out = await new Deno.Command(`${ROOT}/tools/python-kopf.sh`, {
    stdout: "piped",
    stderr: "inherit",
  }).output().catch(() => undefined);
  return out?.success ? new TextDecoder().decode(out.stdout).trim().split("\n").pop() : undefined;
}

const venv = !only || only.includes("kopf-py") ? await pythonKopf() : undefined;
const contenders: Record<string, (ns: string) => string[]> = {
  "kopf-ts": (ns) => [
    `${ROOT}/tools/deno.sh`,
    ...["run", "-A", "cli.ts", "run", "bench/handlers/kopf_ts.ts", "-n", ns, "--standalone", "-q"],
  ],
  ...(venv
    ? {
      "kopf-py": (ns: string) => [
        `${venv}/bin/kopf`,
        ...["run", "--standalone", "-n", ns, "-q", "bench/handlers/kopf_py.py"],
      ],
    }
    : {}),
  "raw-floor": (ns) => [
    `${ROOT}/tools/deno.sh`,
    ...["run", "-A", "bench/handlers/raw_floor.ts", "-n", ns],
  ],
};

log("starting a control plane (kube-apiserver --v=3)");
await using plane = await ControlPlane.start({
  controllerManager: false,
  apiServerArgs: ["--v=3"],
});
using api = new Api(plane);
const crd = parseYaml(await Deno.readTextFile(`${ROOT}/crds/example.yaml`));
await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
const apiServerLog = `${plane.dir}/kube-apiserver.log`;

function forcedClosures(namespace: string): number {
  const key = `/kopfexamples/${namespace}/`;
  return Deno.readTextFileSync(apiServerLog).split("\n")
    .filter((line) => line.includes("Forcing") && line.includes(key)).length;
}

async function handledCount(namespace: string): Promise<number> {
  const { body } = await api.request("GET", api.path(namespace), undefined, { timeoutMs: 60_000 });
  const items = (body as { items?: { status?: { create_fn?: unknown } }[] }).items ?? [];
  return items.filter((item) => item.status?.create_fn).length;
}

const rows: string[] = [];
const results: Record<string, unknown>[] = [];
for (const [id, command] of Object.entries(contenders)) {
  if (only && !only.includes(id)) continue;
  const namespace = `ws-${id}-${Date.now() % 100_000}`;
  await api.request("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  // The first write of a freshly installed custom resource is slow in the API server itself.
  await api.create(namespace, "warm-up").catch(() => {});
  const [program, ...args] = command(namespace);
  const operator = new Deno.Command(program!, {
    args,
    cwd: ROOT,
    env: { KUBECONFIG: plane.kubeconfigPath },
    stdout: "null",
    stderr: "null",
  }).spawn();
  const deadline = Date.now() + 60_000;
  while (await handledCount(namespace) < 1 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  log(`${id}: creating ${count} objects`);
  const cpuBefore = cpuSeconds(processTree(operator.pid));
  const started = performance.now();
  await pool(
    Array.from({ length: count }, (_, i) => `o${i}`),
    48,
    (name) => api.create(namespace, name),
  );
  const created = performance.now();
  while (await handledCount(namespace) < count + 1 && Date.now() < deadline + 300_000) {
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const handled = performance.now();
  const cpu = cpuSeconds(processTree(operator.pid)) - cpuBefore;
  operator.kill("SIGTERM");
  await operator.status;
  const closures = forcedClosures(namespace);
  const result = {
    id,
    count,
    createSeconds: (created - started) / 1000,
    handledSeconds: (handled - started) / 1000,
    operatorCpuSeconds: cpu,
    forcedWatchClosures: closures,
  };
  results.push(result);
  log(`${id}: ${JSON.stringify(result)}`);
  rows.push(
    `| ${id} | ${result.createSeconds.toFixed(2)} | ${result.handledSeconds.toFixed(2)} | ` +
      `${cpu.toFixed(2)} | ${closures} |`,
  );
}

const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+/, "");
await Deno.writeTextFile(
  `${ROOT}/bench/results/${stamp}-watch-stress.json`,
  JSON.stringify({ count, results }, null, 2) + "\n",
);
console.log(
  [
    `Watch stress: ${count} objects created with 48 requests in flight while the operator runs.`,
    "",
    "| contender | creating, s | all handled, s | operator CPU, s | forced watch closures |",
    "| --- | ---: | ---: | ---: | ---: |",
    ...rows,
  ].join("\n"),
);
