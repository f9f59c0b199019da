/**
 * Diagnostic: the per-event path alone — the operator is started on an empty namespace first,
 * then objects are created (a burst through 16 connections, or a steady rate), so that the CPU
 * measured is the events' and not the start-up's. Prints, per contender and repetition, the
 * operator's CPU during the phase (until every object is handled, plus `--settle` seconds), and
 * the creation → handler-start latencies (p50, p99; the same clock). Contenders interleaved and
 * rotated, as in `backlog_probe.ts`; `--deno-flag=--cpu-prof` (with `--cpu-prof-dir=DIR`) for
 * profiles. Not part of the main benchmark.
 *
 *   deno run -A bench/event_probe.ts [--count 1000] [--rate 0] [--reps 3] [--crd plain|status]
 *     [--only kopf-ts,kopf-ts-status,raw-floor] [--worst N] [--handlers FILE] [--kopf-flags "..."] [--mark]
 *     [--settle 2] [--deno-flag=--cpu-prof ...]
 *
 * `kopf-ts-status` is kopf-ts with its state in status (`BENCH_PERSISTENCE=status`). `--settle S`:
 * the seconds after the last object is handled that still count (default 2). `--rate 0` is the
 * burst; `--rate 100` creates 100 objects per second (`--count` in all).
 * `--kopf-flags "..."` replaces the Deno and V8 flags kopf-ts runs with (those of a built
 * operator, `core/cli/generate/runtime_flags.ts`; `""`: none). `--mark` sends the operator SIGUSR2 as the phase begins and ends (for a `--handlers` file that
 * prints counters on it). `--worst N` prints the N longest latencies with when (ms into the phase) the create was sent.
 * Without a running control plane (`$KOPF_TS_TEST_KUBECONFIG`) it starts one.
 * @module
 */
import { parseArgs } from "node:util";
import { createTestNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { Api, Observer, pool } from "./lib/kube.ts";
import { cpuSeconds, processTree } from "./lib/procs.ts";
import { CRD_VARIANTS } from "./lib/config.ts";
import { applyCrd, waitForCrd, warmUp } from "./lib/setup.ts";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "../core/cli/generate/runtime_flags.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "1000" },
    rate: { type: "string", default: "0" },
    reps: { type: "string", default: "3" },
    crd: { type: "string", default: "plain" },
    only: { type: "string", default: "kopf-ts,raw-floor" },
    "deno-flag": { type: "string", multiple: true },
    worst: { type: "string" },
    settle: { type: "string", default: "2" },
    handlers: { type: "string", default: "bench/handlers/kopf_ts.ts" },
    mark: { type: "boolean" },
    "kopf-flags": { type: "string" },
  },
});
const count = Number(values.count), rate = Number(values.rate), reps = Number(values.reps);
const crd = CRD_VARIANTS.find((v) => v.id === values.crd);
if (!crd) throw new Error(`--crd: status or plain, not ${values.crd}`);
const contenders = values.only.split(",");

const plane = await sharedControlPlane();
const api = new Api(plane, crd.resource);
await applyCrd(api, crd);
await waitForCrd(api);
await warmUp(api, plane);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
const median = (xs: number[]) => quantile(xs, 0.5);
const rows: { contender: string; cpuS: number; handledS: number; p50: number; p99: number }[] = [];
for (let rep = 0; rep < reps; rep++) {
  const order = contenders.map((_, i) => contenders[(i + rep) % contenders.length]!);
  for (const contender of order) {
    const ns = await createTestNamespace(plane, `events-${contender}`);
    const observer = new Observer(api, ns);
    await observer.start();
    const kopf = contender === "kopf-ts" || contender === "kopf-ts-status";
    const script = kopf
      ? [
        ...(values["kopf-flags"] === undefined
          ? [...RUNTIME_DENO_FLAGS, `--v8-flags=${RUNTIME_V8_FLAGS.join(",")}`]
          : values["kopf-flags"].split(" ").filter(Boolean)),
        ...(values["deno-flag"] ?? []),
        ...["cli.ts", "run", values.handlers, "-n", ns, "--standalone", "-q"],
      ]
      : [...(values["deno-flag"] ?? []), "bench/handlers/raw_floor.ts", "-n", ns];
    const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
      args: ["run", "-A", ...script],
      cwd: ROOT,
      env: {
        KUBECONFIG: plane.kubeconfigPath,
        BENCH_PLURAL: crd.resource.plural,
        ...(crd.statusSubresource ? { BENCH_STATUS_SUBRESOURCE: "1" } : {}),
        ...(contender === "kopf-ts-status" ? { BENCH_PERSISTENCE: "status" } : {}),
      },
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    // Ready: one object created and handled (then excluded from the figures).
    await api.create(ns, "warm");
    await observer.waitUntil(() => observer.countHandled(["warm"]) === 1, 60_000);
    await new Promise((r) => setTimeout(r, 1_000));
    const pids = processTree(child.pid);
    const cpu0 = cpuSeconds(pids);
    if (values.mark) child.kill("SIGUSR2");
    const names = Array.from({ length: count }, (_, i) => `obj-${i}`);
    const sent = new Map<string, number>();
    const t0 = Date.now();
    if (rate > 0) {
      const creations: Promise<void>[] = [];
      for (let i = 0; i < count; i++) {
        const due = t0 + (i * 1000) / rate;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        sent.set(names[i]!, Date.now());
        creations.push(api.create(ns, names[i]!));
      }
      await Promise.all(creations);
    } else {
      await pool(names, 16, (name) => {
        sent.set(name, Date.now());
        return api.create(ns, name);
      });
    }
    await observer.waitUntil(() => observer.countHandled(names) === names.length, 300_000);
    const handledS = (Date.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, Number(values.settle) * 1000));
    const cpuS = cpuSeconds(pids) - cpu0;
    if (values.mark) {
      child.kill("SIGUSR2");
      await new Promise((r) => setTimeout(r, 200));
    }
    const lat = names.map((n) => observer.get(n).createStarted! - sent.get(n)!);
    if (values.worst) {
      const worst = names.map((n, i) => ({ i, at: sent.get(n)! - t0, ms: lat[i]! }))
        .sort((a, b) => b.ms - a.ms).slice(0, Number(values.worst));
      console.log(`${contender} worst: ${worst.map((w) => `${w.ms}ms@${w.at}`).join(" ")}`);
    }
    child.kill("SIGTERM");
    await child.status;
    await observer.stop();
    await api.clear(ns);
    const row = {
      contender,
      cpuS: Math.round(cpuS * 100) / 100,
      handledS,
      p50: quantile(lat, 0.5),
      p99: quantile(lat, 0.99),
    };
    console.log(JSON.stringify(row));
    rows.push(row);
  }
}
console.table(contenders.map((c) => {
  const mine = rows.filter((r) => r.contender === c);
  return {
    contender: c,
    cpuS: median(mine.map((r) => r.cpuS)),
    handledS: median(mine.map((r) => r.handledS)),
    p50: median(mine.map((r) => r.p50)),
    p99: median(mine.map((r) => r.p99)),
  };
}));
Deno.exit(0);
