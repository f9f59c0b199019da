/**
 * Diagnostic: the idle RSS of `kopf run` over N freshly handled objects under different process
 * settings (V8 flags, allocator environment), one fresh namespace per variant, on one control
 * plane. Not part of the main benchmark; it answers "where does the idle RSS come from, and can a
 * flag take it down" (docs/performance.md, the RSS aim).
 *
 *   deno run -A bench/rss_probe.ts [--count 10000] [--idle 30]
 *     [--variant NAME=V8FLAGS;ENV:VAL;+DENOFLAG ...]
 *     [--handlers FILE] [--logs DIR] [--deno-flag=--cpu-prof ...] [--smaps] [--emulator]
 *
 * A variant's `BENCH_HEAPSNAP:FILE` or `BENCH_MALLOCINFO:FILE` (bench/handlers/_memlog.ts) makes
 * the probe signal the operator for a heap snapshot or glibc's malloc_info after the idle phase.
 * Without a running control plane (`$KOPF_TS_TEST_KUBECONFIG`) it starts one; `--emulator` serves
 * the in-memory API server (kits/emulator) from the probe's own process instead.
 * @module
 */
import { parseArgs } from "node:util";
import {
  type ClusterAccess,
  createTestNamespace,
  sharedControlPlane,
} from "../testing/control_plane.ts";
import { Api, Observer, pool } from "./lib/kube.ts";
import { cpuSeconds, memoryMiB, processTree } from "./lib/procs.ts";
import { CRD_VARIANTS } from "./lib/config.ts";
import { applyCrd, waitForCrd } from "./lib/setup.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

interface Variant {
  readonly name: string;
  readonly v8Flags: string[];
  readonly env: Record<string, string>;
  readonly denoFlags: string[];
}

/**
 * `name=--flag1,--flag2;ENV:value;+--deno-flag`: V8 flags, environment and `deno run` flags of
 * one variant.
 */
function parseVariant(text: string): Variant {
  const [name, rest = ""] = text.split("=", 2).length === 2
    ? [text.slice(0, text.indexOf("=")), text.slice(text.indexOf("=") + 1)]
    : [text, ""];
  const v8Flags: string[] = [], env: Record<string, string> = {}, denoFlags: string[] = [];
  for (const part of rest.split(";").filter(Boolean)) {
    if (part.startsWith("+")) denoFlags.push(part.slice(1));
    else if (part.startsWith("--")) v8Flags.push(...part.split(","));
    else {
      const [k, v = ""] = part.split(":");
      env[k!] = v;
    }
  }
  return { name: name!, v8Flags, env, denoFlags };
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "10000" },
    idle: { type: "string", default: "30" },
    variant: { type: "string", multiple: true },
    handlers: { type: "string", default: "bench/handlers/kopf_ts.ts" },
    logs: { type: "string" },
    "deno-flag": { type: "string", multiple: true },
    smaps: { type: "boolean", default: false },
    emulator: { type: "boolean", default: false },
  },
});
const count = Number(values.count), idleS = Number(values.idle);
const variants = (values.variant ?? ["default"]).map(parseVariant);

// --emulator: the in-memory API server in this process instead of a control plane.
const plane: ClusterAccess & { readonly kubeconfigPath: string } = values.emulator
  ? await (await import("../kits/emulator/mod.ts")).Emulator.start()
  : await sharedControlPlane();
const api = new Api(plane);
const kubeconfig = plane.kubeconfigPath;
await applyCrd(api, CRD_VARIANTS.find((v) => v.id === "plain")!);
await waitForCrd(api);

/** Resident MiB per kind of mapping (`--smaps`): where the idle RSS sits. */
function smapsSummary(pid: number): string {
  const text = Deno.readTextFileSync(`/proc/${pid}/smaps`);
  const byKind = new Map<string, number>();
  let kind = "";
  for (const line of text.split("\n")) {
    const head = line.match(/^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/);
    if (head) {
      const name = head[2]!.trim();
      // The executable by segment: machine code (r-x) against read-only data (r--) and the rest.
      kind = name === ""
        ? "[anon]"
        : `${name.replace(/^.*\//, "")}${name.startsWith("/") ? ` ${head[1]}` : ""}`;
    } else if (line.startsWith("Rss:")) {
      byKind.set(kind, (byKind.get(kind) ?? 0) + Number(line.split(/\s+/)[1]) / 1024);
    }
  }
  return [...byKind].sort((a, b) => b[1] - a[1]).slice(0, 10)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`).join(" | ");
}

const results: Record<string, unknown>[] = [];
for (const variant of variants) {
  const ns = await createTestNamespace(plane, `rss-${variant.name}`);
  const names = Array.from({ length: count }, (_, i) => `obj-${i}`);
  await pool(names, 16, (name) => api.create(ns, name));
  const observer = new Observer(api, ns);
  await observer.start();
  const args = [
    "run",
    "-A",
    ...(variant.v8Flags.length ? [`--v8-flags=${variant.v8Flags.join(",")}`] : []),
    ...(values["deno-flag"] ?? []),
    ...variant.denoFlags,
    "cli.ts",
    "run",
    values.handlers,
    ...["-n", ns, "--standalone", "-q", ...(values.logs ? ["--debug"] : [])],
  ];
  const t0 = Date.now();
  const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
    args,
    cwd: ROOT,
    env: { KUBECONFIG: kubeconfig, ...variant.env },
    stdout: values.logs ? "piped" : "null",
    stderr: values.logs ? "piped" : "null",
  }).spawn();
  if (values.logs) {
    const open = (suffix: string) =>
      Deno.open(`${values.logs}/${variant.name}.${suffix}`, {
        create: true,
        write: true,
        truncate: true,
      });
    void child.stdout.pipeTo((await open("out")).writable);
    void child.stderr.pipeTo((await open("err")).writable);
  }
  await observer.waitUntil(() => observer.countHandled(names) === names.length, 300_000);
  const handledS = (Date.now() - t0) / 1000;
  const pids = () => processTree(child.pid);
  const cpuS = cpuSeconds(pids());
  const afterLoad = memoryMiB(pids(), "VmRSS");
  const peak = memoryMiB(pids(), "VmHWM");
  await new Promise((r) => setTimeout(r, idleS * 1000));
  let idle = 0;
  for (let i = 0; i < 20; i++) {
    idle = Math.max(idle, memoryMiB(pids(), "VmRSS"));
    await new Promise((r) => setTimeout(r, 250));
  }
  if (values.smaps) { for (const pid of pids()) console.log(smapsSummary(pid)); }
  if (variant.env["BENCH_HEAPSNAP"]) {
    for (const pid of pids()) Deno.kill(pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 8000));
  }
  if (variant.env["BENCH_MALLOCINFO"]) {
    for (const pid of pids()) Deno.kill(pid, "SIGWINCH");
    await new Promise((r) => setTimeout(r, 1000));
    for (const pid of pids()) console.log("after trim:", smapsSummary(pid));
  }
  child.kill("SIGTERM");
  await child.status;
  await observer.stop();
  await api.clear(ns);
  const row = { variant: variant.name, handledS, cpuS, peak, afterLoad, idle };
  console.log(JSON.stringify(row));
  results.push(row);
}
console.table(results);
Deno.exit(0);
