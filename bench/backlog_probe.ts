/**
 * Diagnostic: the backlog scenario alone, repeated, contenders interleaved — for A/B work on the
 * operator's CPU per object and peak memory. N objects are created before the operator starts;
 * the probe times the operator from its start until every object is handled and reads its CPU
 * (utime + stime) and peak RSS (`VmHWM`) at that moment. Not part of the main benchmark.
 *
 *   deno run -A bench/backlog_probe.ts [--count 1000] [--reps 3] [--crd status|plain]
 *     [--variant NAME=CONTENDER[;ENV:VALUE...][;--v8flag,...]] [--deno-flag=--cpu-prof ...]
 *     [--logs DIR] [--restart] [--emulator]
 *
 * CONTENDER is `kopf-ts` (`kopf run bench/handlers/kopf_ts.ts`) or `raw-floor`; environment
 * entries select the handlers' options (e.g. `BENCH_PERSISTENCE:status`). Defaults: kopf-ts,
 * kopf-ts with the state in status, and the raw floor. Prints one JSON line per run and the
 * medians. `--restart` measures a restart instead: the operator handles the backlog first (not
 * measured) and is stopped; the measured one starts over the handled objects until it has handled
 * one new object (then settles as the backlog does). `--logs` keeps each operator's stdout and stderr (with `BENCH_MEMLOG:100`, its memory every 100 ms). Without a running control plane (`$KOPF_TS_TEST_KUBECONFIG`) it starts one; `--emulator`
 * serves the in-memory API server (kits/emulator) from the probe's own process instead.
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
import { applyCrd, waitForCrd, warmUp } from "./lib/setup.ts";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "../core/cli/generate/runtime_flags.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

interface Variant {
  readonly name: string;
  readonly contender: "kopf-ts" | "raw-floor";
  readonly v8Flags: string[];
  readonly env: Record<string, string>;
}

/** `name=contender;ENV:value;--flag1,--flag2`. */
function parseVariant(text: string): Variant {
  const eq = text.indexOf("=");
  const name = eq < 0 ? text : text.slice(0, eq);
  const [contender = "kopf-ts", ...rest] = (eq < 0 ? "kopf-ts" : text.slice(eq + 1)).split(";");
  if (contender !== "kopf-ts" && contender !== "raw-floor") {
    throw new Error(`unknown contender ${contender} (kopf-ts or raw-floor)`);
  }
  const v8Flags: string[] = [], env: Record<string, string> = {};
  for (const part of rest.filter(Boolean)) {
    if (part.startsWith("--")) v8Flags.push(...part.split(","));
    else {
      const colon = part.indexOf(":");
      env[part.slice(0, colon)] = part.slice(colon + 1);
    }
  }
  return { name, contender, v8Flags, env };
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "1000" },
    reps: { type: "string", default: "3" },
    crd: { type: "string", default: "status" },
    variant: { type: "string", multiple: true },
    "deno-flag": { type: "string", multiple: true },
    logs: { type: "string" },
    restart: { type: "boolean" },
    emulator: { type: "boolean" },
  },
});
const count = Number(values.count), reps = Number(values.reps);
const crd = CRD_VARIANTS.find((v) => v.id === values.crd);
if (!crd) throw new Error(`--crd: status or plain, not ${values.crd}`);
const variants = (values.variant ?? [
  "kopf-ts=kopf-ts",
  "status-first=kopf-ts;BENCH_PERSISTENCE:status",
  "floor=raw-floor",
]).map(parseVariant);

// --emulator: the in-memory API server in this process instead of a control plane (no etcd, no
// kube-apiserver: the operator's own CPU per object can be compared without a cluster).
const plane: ClusterAccess & { readonly kubeconfigPath: string } = values.emulator
  ? await (await import("../kits/emulator/mod.ts")).Emulator.start()
  : await sharedControlPlane();
const api = new Api(plane, crd.resource);
await applyCrd(api, crd);
await waitForCrd(api);
if (!values.emulator) await warmUp(api, await sharedControlPlane());

const runs: {
  variant: string;
  handledS: number;
  cpuS: number;
  cpuSettledS: number;
  peakMiB: number;
}[] = [];
for (let rep = 0; rep < reps; rep++) {
  // Rotate the order so that no variant always runs first (or right after a heavy one).
  const order = variants.map((_, i) => variants[(i + rep) % variants.length]!);
  for (const variant of order) {
    const ns = await createTestNamespace(plane, `backlog-${variant.name}`);
    const names = Array.from({ length: count }, (_, i) => `obj-${i}`);
    await pool(names, 16, (name) => api.create(ns, name));
    const observer = new Observer(api, ns);
    await observer.start();
    const script = variant.contender === "kopf-ts"
      ? ["cli.ts", "run", "bench/handlers/kopf_ts.ts", "-n", ns, "--standalone", "-q"]
      : ["bench/handlers/raw_floor.ts", "-n", ns];
    // kopf-ts with the V8 flags its binary carries, unless the variant names its own (and its
    // Deno flags).
    const v8Flags = variant.v8Flags.length || variant.contender !== "kopf-ts"
      ? variant.v8Flags
      : RUNTIME_V8_FLAGS;
    const args = [
      "run",
      "-A",
      // PROBE_CODE_CACHE:1 runs kopf-ts with Deno's V8 code cache (without --no-code-cache).
      ...(variant.contender === "kopf-ts" && !variant.env["PROBE_CODE_CACHE"]
        ? RUNTIME_DENO_FLAGS
        : []),
      ...(v8Flags.length ? [`--v8-flags=${v8Flags.join(",")}`] : []),
      ...(values["deno-flag"] ?? []),
      ...script,
    ];
    const spawn = async (suffix: string) => {
      const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
        args,
        cwd: ROOT,
        env: {
          KUBECONFIG: plane.kubeconfigPath,
          // A copy of `deno` of its own, as in bench/lib/session.ts (PROBE_SHARED_DENO:1: the
          // harness's own executable, whose pages the operator cannot page out).
          ...(variant.env["PROBE_SHARED_DENO"] ? {} : { KOPF_TS_DENO_PRIVATE: "bench-operator" }),
          BENCH_PLURAL: crd.resource.plural,
          ...(crd.statusSubresource ? { BENCH_STATUS_SUBRESOURCE: "1" } : {}),
          ...variant.env,
        },
        stdout: values.logs ? "piped" : "null",
        stderr: values.logs ? "piped" : "null",
      }).spawn();
      if (values.logs) {
        // stdout too: V8's --trace-gc writes there.
        for (const [stream, ext] of [[child.stdout, "out"], [child.stderr, "err"]] as const) {
          const file = await Deno.open(`${values.logs}/${variant.name}-${rep}${suffix}.${ext}`, {
            create: true,
            write: true,
            truncate: true,
          });
          void stream.pipeTo(file.writable);
        }
      }
      return child;
    };
    // --restart: the operator handles the backlog first (not measured) and is stopped; the
    // measured run starts over the handled objects and handles one new object.
    if (values.restart) {
      const first = await spawn("-first");
      await observer.waitUntil(() => observer.countHandled(names) === names.length, 300_000);
      await new Promise((r) => setTimeout(r, 2_000));
      first.kill("SIGTERM");
      await first.status;
    }
    const t0 = Date.now();
    const child = await spawn("");
    if (values.restart) {
      await api.create(ns, "obj-new");
      await observer.waitUntil(() => observer.countHandled(["obj-new"]) === 1, 300_000);
    }
    await observer.waitUntil(() => observer.countHandled(names) === names.length, 300_000);
    const handledS = (Date.now() - t0) / 1000;
    const pids = processTree(child.pid);
    const row = {
      variant: variant.name,
      handledS,
      cpuS: cpuSeconds(pids),
      peakMiB: memoryMiB(pids, "VmHWM"),
      // What the main benchmark counts too: its window ends after a settling of ~7 s.
      cpuSettledS: NaN,
    };
    await new Promise((r) => setTimeout(r, 7_000));
    row.cpuSettledS = cpuSeconds(pids);
    child.kill("SIGTERM");
    await child.status;
    await observer.stop();
    await api.clear(ns);
    console.log(JSON.stringify(row));
    runs.push(row);
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
console.table(variants.map((v) => {
  const mine = runs.filter((r) => r.variant === v.name);
  return {
    variant: v.name,
    handledS: median(mine.map((r) => r.handledS)),
    objectsPerS: Math.round(count / median(mine.map((r) => r.handledS))),
    cpuS: median(mine.map((r) => r.cpuS)),
    cpuSettledS: median(mine.map((r) => r.cpuSettledS)),
    peakMiB: median(mine.map((r) => r.peakMiB)),
  };
}));
Deno.exit(0);
