/**
 * The soak: a steady churn of creates, patches and deletes over a few hundred objects on a real
 * control plane for N minutes, with the operator (`kopf run bench/handlers/soak_ts.ts`) as a
 * separate process. Reports its RSS and CPU every 10 s, accounts for every handler run (each
 * change must be handled exactly once: none lost, none twice), and counts the operator's API
 * requests from the API server's audit log. The operator logs at its default level (so it
 * posts Events, as deployed operators do). See docs/reliability.md.
 *
 *   deno run -A bench/soak.ts --minutes 60                  # the record
 *   deno run -A bench/soak.ts --minutes 5                   # a quick look
 *   deno run -A bench/soak.ts --chart results.json          # re-render the chart of a run
 *
 * Options: `--objects 300` (slots), `--rate 4` (changes per second), `--warmup 5` (minutes
 * before the RSS slope is measured; default min(5, minutes / 5)), `--out FILE` (default
 * `bench/results/<time>-soak-<N>m.json`, with the chart beside it as `.svg`).
 *
 * The churn: every tick one slot that has no unhandled change gets one: an empty slot a new
 * object (a fresh name), a filled one a patch of `spec.value` (90%) or a deletion (10%). A
 * change waits for its handler run before its object changes again, so every change maps to
 * exactly one expected run. It is a measurement, not a test: nothing here asserts a timing.
 * @module
 */
import { parseArgs } from "node:util";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog } from "./lib/audit.ts";
import { lineChart, type Row, toSvg } from "./lib/charts.ts";
import { Api, type BenchObject } from "./lib/kube.ts";
import {
  cpuSeconds,
  findProcesses,
  loadAverage,
  machineBusySeconds,
  memoryMiB,
  processTree,
} from "./lib/procs.ts";
import { CRD_VARIANTS } from "./lib/config.ts";
import { applyCrd, waitForCrd } from "./lib/setup.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const SAMPLE_MS = 10_000;
const OPERATOR_AGENT = "kopf-ts";

/** One sample, every 10 s. */
export interface SoakSample {
  /** Seconds since the operator started. */
  readonly t: number;
  /** The operator's resident memory (its process tree), MiB. */
  readonly rssMiB: number;
  /** The operator's CPU use since the last sample, % of one core. */
  readonly cpuPct: number;
  /** The machine's CPU use since the last sample, % of all cores. */
  readonly machinePct: number;
  /** 1-minute load average. */
  readonly load1: number;
  /** Changes made so far, handler runs so far, changes not handled yet. */
  readonly changes: number;
  readonly runs: number;
  readonly pending: number;
  /** The operator's API requests in this sample's window (all, and without Events). */
  readonly requests: number;
  readonly requestsNoEvents: number;
}

/** The results file of one soak. */
export interface SoakResults {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly config: {
    minutes: number;
    objects: number;
    rate: number;
    warmupMinutes: number;
  };
  readonly machine: Record<string, string | number>;
  readonly versions: Record<string, string>;
  readonly samples: SoakSample[];
  readonly summary: {
    changes: { create: number; update: number; delete: number; total: number };
    runs: number;
    /** Changes that never got their handler run (after the drain). */
    lost: number;
    /** Extra runs of changes that were already handled. */
    duplicated: number;
    /** Runs that match no change the harness made. */
    unexpected: number;
    /** Live objects whose status does not reflect their last spec at the end. */
    stale: number;
    /** Objects still present with a deletionTimestamp at the end (stuck finalizers). */
    stuck: number;
    /** Change → handler run latency, ms: median, p95, p99, max. */
    latencyMs: { p50: number; p95: number; p99: number; max: number };
    rss: {
      atWarmupMiB: number;
      atEndMiB: number;
      peakMiB: number;
      /** The least-squares slope after the warm-up, over the rest of the run, in % of RSS. */
      slopePct: number;
    };
    cpu: { meanPct: number; secondsTotal: number };
    requests: { total: number; noEvents: number; perChange: number; perChangeNoEvents: number };
    /** Ticks without a slot free of unhandled changes (the operator fell behind). */
    skippedTicks: number;
    load: { mean1: number; max1: number; machineMeanPct: number };
    operatorExitMs: number;
    operatorExitCode: number | null;
  };
}

const log = (message: string) =>
  console.error(`[soak ${new Date().toISOString().slice(11, 19)}] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Change {
  readonly kind: "create" | "update" | "delete";
  readonly name: string;
  readonly value: number;
  readonly slot: number;
  readonly at: number;
}

interface Slot {
  name: string | undefined;
  incarnation: number;
  value: number;
  pending: string | undefined;
}

/** The ledger: changes made, handler runs seen, their matching. */
class Ledger {
  readonly expected = new Map<string, Change>();
  readonly runs = new Map<string, number>();
  readonly latencies: number[] = [];
  readonly slots: Slot[];
  counts = { create: 0, update: 0, delete: 0 };
  totalRuns = 0;
  duplicated = 0;
  unexpected = 0;
  #offset = 0;
  #rest = "";
  #polling: Promise<void> = Promise.resolve();
  readonly #path: string;

  constructor(path: string, objects: number) {
    this.#path = path;
    this.slots = Array.from({ length: objects }, () => ({
      name: undefined,
      incarnation: 0,
      value: 0,
      pending: undefined,
    }));
  }

  get pending(): number {
    return this.slots.filter((s) => s.pending).length;
  }

  get changes(): number {
    return this.counts.create + this.counts.update + this.counts.delete;
  }

  expect(change: Change): void {
    const key = `${change.kind} ${change.name} ${change.value}`;
    this.expected.set(key, change);
    this.slots[change.slot]!.pending = key;
    this.counts[change.kind]++;
  }

  /** Reads the runs appended to the run log since the last call (one reader at a time). */
  poll(): Promise<void> {
    this.#polling = this.#polling.then(() => this.#read());
    return this.#polling;
  }

  async #read(): Promise<void> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.#path, { read: true });
    } catch {
      return;
    }
    try {
      await file.seek(this.#offset, Deno.SeekMode.Start);
      const buffer = new Uint8Array(1 << 16);
      for (;;) {
        const n = await file.read(buffer);
        if (n === null || n === 0) break;
        this.#offset += n;
        this.#rest += new TextDecoder().decode(buffer.subarray(0, n));
        const lines = this.#rest.split("\n");
        this.#rest = lines.pop() ?? "";
        for (const line of lines) if (line) this.#run(line);
      }
    } finally {
      file.close();
    }
  }

  #run(line: string): void {
    const [kind, name, value, ms] = line.split(" ");
    const key = `${kind} ${name} ${value}`;
    this.totalRuns++;
    const count = (this.runs.get(key) ?? 0) + 1;
    this.runs.set(key, count);
    const change = this.expected.get(key);
    if (!change) {
      this.unexpected++;
      log(`unexpected run: ${line}`);
      return;
    }
    if (count > 1) {
      this.duplicated++;
      log(`duplicated run: ${line}`);
      return;
    }
    this.latencies.push(Number(ms) - change.at);
    const slot = this.slots[change.slot]!;
    if (slot.pending === key) slot.pending = undefined;
  }

  get lost(): number {
    let lost = 0;
    for (const key of this.expected.keys()) if (!this.runs.has(key)) lost++;
    return lost;
  }
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Least-squares slope of y over x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0, den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function commandOutput(cmd: string[]): Promise<string> {
  try {
    const output = await new Deno.Command(cmd[0]!, {
      args: cmd.slice(1),
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(30_000),
    }).output();
    return new TextDecoder().decode(output.stdout).trim();
  } catch {
    return "unknown";
  }
}

/** Renders the chart of a soak's results (RSS, CPU, requests over time; bench/lib/charts.ts). */
export async function soakChartSvg(results: SoakResults): Promise<string> {
  const minutes = (s: SoakSample) => Math.round((s.t / 60) * 100) / 100;
  const samples = results.samples;
  const rows: Row[] = [];
  const add = (panel: string, series: string, values: Array<[number, number]>) => {
    for (const [x, y] of values) rows.push({ panel, series, minutes: x, value: y });
  };
  add("RSS (MiB)", "operator RSS", samples.map((s) => [minutes(s), s.rssMiB]));
  add("CPU (%)", "operator, % of a core", samples.map((s) => [minutes(s), s.cpuPct]));
  add("CPU (%)", "machine, % of all cores", samples.map((s) => [minutes(s), s.machinePct]));
  add("requests / 10 s", "operator requests", samples.map((s) => [minutes(s), s.requests]));
  add(
    "requests / 10 s",
    "changes",
    samples.map((s, i) => [minutes(s), s.changes - (samples[i - 1]?.changes ?? 0)]),
  );
  return await toSvg(lineChart({
    values: rows,
    x: "minutes",
    y: "value",
    color: "series",
    column: "panel",
    title: `Soak: ${results.config.minutes} min, ${results.config.objects} objects, ` +
      `${results.config.rate} changes/s (${results.startedAt.slice(0, 10)}); warm-up ` +
      `${results.config.warmupMinutes} min`,
    xTitle: "minutes",
    yTitle: "",
  }));
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      minutes: { type: "string", default: "5" },
      objects: { type: "string", default: "300" },
      rate: { type: "string", default: "4" },
      warmup: { type: "string" },
      out: { type: "string" },
      chart: { type: "string" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "Usage: deno run -A bench/soak.ts [--minutes 5] [--objects 300] [--rate 4] " +
        "[--warmup MIN] [--out FILE.json] [--keep]\n       deno run -A bench/soak.ts --chart FILE.json",
    );
    return 0;
  }
  if (values.chart) {
    const results = JSON.parse(await Deno.readTextFile(values.chart)) as SoakResults;
    const svgPath = values.chart.replace(/\.json$/, "") + ".svg";
    await Deno.writeTextFile(svgPath, await soakChartSvg(results));
    log(`chart: ${svgPath}`);
    return 0;
  }
  const minutes = Number(values.minutes), objects = Number(values.objects);
  const rate = Number(values.rate);
  const warmupMinutes = values.warmup ? Number(values.warmup) : Math.min(5, minutes / 5);
  for (const [name, value] of [["minutes", minutes], ["objects", objects], ["rate", rate]]) {
    if (!(Number(value) > 0)) throw new RangeError(`--${name} must be a positive number`);
  }
  const started = new Date();
  const stamp = started.toISOString().replace(/[:.]/g, "-").replace(/-\d\d\dZ$/, "Z");
  const outPath = values.out ?? `${ROOT}/bench/results/${stamp}-soak-${minutes}m.json`;

  log("warming the Deno module cache");
  await commandOutput([`${ROOT}/tools/deno.sh`, "cache", "cli.ts", "bench/handlers/soak_ts.ts"]);
  const work = await Deno.makeTempDir({
    dir: await Deno.stat("/dev/shm").then(() => "/dev/shm").catch(() => undefined),
    prefix: "kopf-soak-",
  });
  const auditPath = `${work}/audit.log`;
  await Deno.writeTextFile(`${work}/audit-policy.yaml`, AUDIT_POLICY);
  log(`work directory: ${work}`);

  let operator: Deno.ChildProcess | undefined;
  let plane: ControlPlane | undefined;
  const stopAll = async () => {
    try {
      operator?.kill("SIGKILL");
    } catch { /* gone */ }
    await operator?.status;
    await plane?.stop();
    if (!values.keep) await Deno.remove(work, { recursive: true }).catch(() => {});
  };
  const onSignal = () => {
    log("interrupted: stopping everything");
    globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());
    stopAll().finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);

  try {
    log("starting the control plane (with an audit log)");
    plane = await ControlPlane.start({
      controllerManager: false,
      handleSignals: false,
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
    await applyCrd(api, CRD_VARIANTS.find((v) => v.id === "plain") ?? CRD_VARIANTS[0]!);
    await waitForCrd(api);
    const warmNs = await createTestNamespace(plane, "soak-warmup");
    for (let i = 0; i < 3; i++) {
      await api.create(warmNs, `warmup-${i}`);
      await api.delete(warmNs, `warmup-${i}`);
    }
    const ns = await createTestNamespace(plane, "soak");
    const audit = new AuditLog(auditPath);
    const otherApiServers = findProcesses("--etcd-servers", "kube-apiserver").length - 1;
    const versionInfo = (await api.request("GET", "/version")).body as { gitVersion?: string };

    const runlog = `${work}/runs.log`;
    const ledger = new Ledger(runlog, objects);
    log(`starting the operator in namespace ${ns}`);
    operator = new Deno.Command("/bin/sh", {
      args: [
        "-c",
        'log=$1; shift; exec "$@" >>"$log" 2>&1',
        "sh",
        `${work}/operator.log`,
        `${ROOT}/tools/deno.sh`,
        ...["run", "-A", "cli.ts", "run", "bench/handlers/soak_ts.ts"],
        ...["-n", ns, "--standalone"],
      ],
      cwd: ROOT,
      env: { KUBECONFIG: plane.kubeconfigPath, SOAK_RUNLOG: runlog, NO_COLOR: "1" },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    const operatorPid = operator.pid;
    const t0 = Date.now();

    // Sampling, every 10 s.
    const samples: SoakSample[] = [];
    let lastCpu = 0, lastBusy = machineBusySeconds(), lastAt = t0;
    let requestsTotal = 0, requestsNoEvents = 0;
    const sample = async () => {
      await ledger.poll();
      await audit.poll();
      let requests = 0, noEvents = 0;
      for (const record of audit.records) {
        if (!record.userAgent.startsWith(OPERATOR_AGENT)) continue;
        requests++;
        if (record.resource !== "events") noEvents++;
      }
      audit.records.length = 0; // counted: keep the memory of a long run flat
      requestsTotal += requests;
      requestsNoEvents += noEvents;
      const pids = processTree(operatorPid);
      const now = Date.now(), cpu = cpuSeconds(pids), busy = machineBusySeconds();
      const wall = (now - lastAt) / 1000;
      samples.push({
        t: Math.round((now - t0) / 100) / 10,
        rssMiB: Math.round(memoryMiB(pids, "VmRSS") * 10) / 10,
        cpuPct: Math.round(((cpu - lastCpu) / wall) * 1000) / 10,
        machinePct: Math.round(((busy - lastBusy) / wall / navigator.hardwareConcurrency) * 1000) /
          10,
        load1: loadAverage(),
        changes: ledger.changes,
        runs: ledger.totalRuns,
        pending: ledger.pending,
        requests,
        requestsNoEvents: noEvents,
      });
      lastCpu = cpu;
      lastBusy = busy;
      lastAt = now;
    };
    const sampler = setInterval(
      () => void sample().catch((e) => log(`sample failed: ${e}`)),
      SAMPLE_MS,
    );

    // The churn.
    let incarnations = 0, skippedTicks = 0, failures = 0;
    const change = async (index: number) => {
      const slot = ledger.slots[index]!;
      const at = Date.now();
      try {
        if (slot.name === undefined) {
          slot.name = `o${index}-${++incarnations}`;
          slot.value = 0;
          ledger.expect({ kind: "create", name: slot.name, value: 0, slot: index, at });
          await api.create(ns, slot.name);
        } else if (Math.random() < 0.1) {
          const name = slot.name;
          ledger.expect({ kind: "delete", name, value: slot.value, slot: index, at });
          slot.name = undefined;
          await api.delete(ns, name);
        } else {
          slot.value++;
          ledger.expect({ kind: "update", name: slot.name, value: slot.value, slot: index, at });
          await api.setValue(ns, slot.name, slot.value);
        }
      } catch (error) {
        failures++;
        log(`change failed (the harness's request, not the operator): ${error}`);
      }
    };
    const deadline = t0 + minutes * 60_000;
    const tickMs = 1000 / rate;
    let nextTick = Date.now(), lastReport = t0;
    while (Date.now() < deadline) {
      await ledger.poll();
      const free = ledger.slots.flatMap((s, i) => (s.pending ? [] : [i]));
      // Fill every slot first (as fast as the rate allows), then churn at random.
      const empty = free.filter((i) =>
        ledger.slots[i]!.name === undefined && ledger.slots[i]!.incarnation === 0
      );
      if (free.length === 0) {
        skippedTicks++;
      } else {
        const index = empty[0] ?? free[Math.floor(Math.random() * free.length)]!;
        ledger.slots[index]!.incarnation++;
        await change(index);
      }
      if (Date.now() - lastReport >= 60_000) {
        lastReport = Date.now();
        const last = samples.at(-1);
        log(
          `${Math.round((Date.now() - t0) / 60_000)} min: ${ledger.changes} changes, ` +
            `${ledger.totalRuns} runs, ${ledger.pending} pending, RSS ${last?.rssMiB} MiB, ` +
            `CPU ${last?.cpuPct}%, load ${loadAverage()}`,
        );
      }
      nextTick += empty.length > 1 ? tickMs / 5 : tickMs; // fill at 5× the rate
      await sleep(Math.max(0, nextTick - Date.now()));
    }

    log(`churn done: ${ledger.changes} changes; waiting for the last ones to be handled`);
    const drainUntil = Date.now() + 120_000;
    while (ledger.pending > 0 && Date.now() < drainUntil) {
      await sleep(250);
      await ledger.poll();
    }
    await sleep(10_000); // late duplicates would show up here
    clearInterval(sampler);
    await sample();

    // The end state as the API server holds it.
    const listed = await api.request("GET", api.path(ns));
    const items = (listed.body as { items?: BenchObject[] }).items ?? [];
    let stale = 0, stuck = 0;
    for (const item of items) {
      if (item.metadata.deletionTimestamp) {
        stuck++;
        continue;
      }
      const status = item.status as
        | { update_fn?: { value?: unknown }; create_fn?: { value?: unknown } }
        | undefined;
      const handled = status?.update_fn?.value ?? status?.create_fn?.value;
      if (handled !== item.spec?.["value"]) stale++;
    }

    log("stopping the operator (SIGTERM)");
    const stopAt = Date.now();
    operator.kill("SIGTERM");
    const timer = setTimeout(() => operator?.kill("SIGKILL"), 30_000);
    const status = await operator.status;
    clearTimeout(timer);
    const operatorExitMs = Date.now() - stopAt;
    operator = undefined;

    const latencies = [...ledger.latencies].sort((a, b) => a - b);
    const warm = samples.filter((s) => s.t >= warmupMinutes * 60);
    const rssSlope = slope(warm.map((s) => [s.t, s.rssMiB] as const));
    const atWarmup = warm[0]?.rssMiB ?? NaN;
    const span = (warm.at(-1)?.t ?? 0) - (warm[0]?.t ?? 0);
    const fittedStart = warm.length
      ? warm.reduce((s, x) => s + x.rssMiB, 0) / warm.length -
        rssSlope * (warm.reduce((s, x) => s + x.t, 0) / warm.length - (warm[0]?.t ?? 0))
      : NaN;
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const busySamples = samples.slice(1);
    const results: SoakResults = {
      startedAt: started.toISOString(),
      finishedAt: new Date().toISOString(),
      config: { minutes, objects, rate, warmupMinutes },
      machine: {
        nproc: navigator.hardwareConcurrency,
        kernel: Deno.osRelease(),
        otherApiServers,
        harnessFailures: failures,
      },
      versions: {
        deno: Deno.version.deno,
        kubernetes: versionInfo.gitVersion ?? "unknown",
        commit: await commandOutput(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
      },
      samples,
      summary: {
        changes: { ...ledger.counts, total: ledger.changes },
        runs: ledger.totalRuns,
        lost: ledger.lost,
        duplicated: ledger.duplicated,
        unexpected: ledger.unexpected,
        stale,
        stuck,
        latencyMs: {
          p50: percentile(latencies, 50),
          p95: percentile(latencies, 95),
          p99: percentile(latencies, 99),
          max: latencies.at(-1) ?? NaN,
        },
        rss: {
          atWarmupMiB: atWarmup,
          atEndMiB: samples.at(-1)?.rssMiB ?? NaN,
          peakMiB: Math.max(...samples.map((s) => s.rssMiB)),
          slopePct: Math.round(((rssSlope * span) / fittedStart) * 1000) / 10,
        },
        cpu: {
          meanPct: Math.round(mean(busySamples.map((s) => s.cpuPct)) * 10) / 10,
          secondsTotal: Math.round(lastCpu * 10) / 10,
        },
        requests: {
          total: requestsTotal,
          noEvents: requestsNoEvents,
          perChange: Math.round((requestsTotal / Math.max(1, ledger.changes)) * 100) / 100,
          perChangeNoEvents: Math.round((requestsNoEvents / Math.max(1, ledger.changes)) * 100) /
            100,
        },
        skippedTicks,
        load: {
          mean1: Math.round(mean(samples.map((s) => s.load1)) * 100) / 100,
          max1: Math.max(...samples.map((s) => s.load1)),
          machineMeanPct: Math.round(mean(busySamples.map((s) => s.machinePct)) * 10) / 10,
        },
        operatorExitMs,
        operatorExitCode: status.code,
      },
    };
    await Deno.mkdir(outPath.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.writeTextFile(outPath, JSON.stringify(results, null, 2) + "\n");
    const svgPath = outPath.replace(/\.json$/, "") + ".svg";
    await Deno.writeTextFile(svgPath, await soakChartSvg(results));
    console.log(JSON.stringify(results.summary, null, 2));
    log(`results: ${outPath}, chart: ${svgPath}`);
    if (results.summary.lost || results.summary.duplicated || results.summary.unexpected) {
      log(
        `operator log tail:\n${
          (await Deno.readTextFile(`${work}/operator.log`).catch(() => "")).split("\n").slice(-30)
            .join("\n")
        }`,
      );
    }
    const clean = !results.summary.lost && !results.summary.duplicated &&
      !results.summary.unexpected && !stale && !stuck;
    return clean ? 0 : 1;
  } finally {
    await stopAll();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

if (import.meta.main) Deno.exit(await main());
