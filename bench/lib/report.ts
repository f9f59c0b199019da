/**
 * The benchmark's result types and its Markdown report: absolute figures per contender (medians
 * over the repetitions), the ratios this framework ÷ Kopf, ÷ raw floor and ÷ each peer
 * (controller-runtime, client-node; in the same persistence mode where the peer ran in it), the
 * requests by verb, machine details, versions, and the issue's aims checked against the numbers.
 * @module
 */
import type { RequestSummary } from "./audit.ts";
import { median } from "./stats.ts";

/** One scenario of one contender in one repetition. */
export interface PhaseResult {
  readonly name: string;
  readonly startedAt: number;
  readonly completedAt: number;
  /** End of the measurement window (after the operator settled). */
  readonly windowEnd: number;
  /** Whether the scenario's condition was met before its timeout. */
  readonly complete: boolean;
  readonly metrics: Record<string, number>;
  readonly requests: RequestSummary;
  readonly handlerRuns: Record<string, number>;
  /** Whether `peakRssMiB` is the peak within this scenario (else since the process started). */
  readonly peakIsSincePhaseStart: boolean;
  /** Raw samples for the charts (e.g. `latency`: ms per object). */
  readonly samples?: Record<string, number[]>;
}

/** All scenarios of one contender in one repetition. */
export interface ContenderRun {
  readonly contender: string;
  /** The CRD variant (`status`, `plain`); results before variants existed: `plain`. */
  readonly variant?: string;
  readonly rep: number;
  /** The operator's RSS over the session: `[ms since the session started, MiB]`. */
  readonly rss?: Array<[number, number]>;
  readonly phases: Record<string, PhaseResult>;
  readonly error?: string | undefined;
}

/** The whole result file. */
export interface BenchResults {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly config: Record<string, unknown>;
  readonly machine: Record<string, string | number>;
  readonly versions: Record<string, string>;
  readonly contenders: readonly { id: string; label: string; userAgent: string }[];
  /** The CRD variants run, headline first (results before variants existed: none). */
  readonly variants?: readonly { id: string; label: string }[];
  readonly runs: readonly ContenderRun[];
  /** The result files this one merges (`bench/run.ts --merge`), each with its repetitions. */
  readonly mergedFrom?: readonly string[];
}

/** The CRD variants of a result file, headline first. */
export function variantsOf(results: BenchResults): readonly { id: string; label: string }[] {
  return results.variants ?? [{ id: "plain", label: "CRD without a status subresource" }];
}

/** The runs of one variant. */
export function runsOf(results: BenchResults, variant: string): ContenderRun[] {
  return results.runs.filter((r) => (r.variant ?? "plain") === variant);
}

type Better = "lower" | "higher" | "";

interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly phase: string;
  /** A metric key, or a function of the phase's metrics. */
  readonly value: string | ((m: Record<string, number>) => number);
  readonly digits: number;
  readonly better: Better;
}

const TS = "kopf-ts", PY = "kopf-py", RAW = "raw-floor";
/** The peers, with their column headings: each compared in the same persistence mode. */
const PEERS = [["controller-runtime", "Go"], ["client-node", "client-node"]] as const;

/** The run of a peer to compare one of ours with: `-status` with `-status` if it ran. */
function peerOf(ours: string, peer: string, ids: readonly string[]): string | undefined {
  const same = ours.endsWith("-status") ? `${peer}-status` : peer;
  return ids.includes(same) ? same : ids.includes(peer) ? peer : undefined;
}

function rows(config: Record<string, unknown>): Row[] {
  const n = config["createCount"], rate = config["steadyRate"], secs = config["steadySeconds"];
  const u = config["updateObjects"], c = config["updateChanges"];
  // Idle and restart run over everything namespace A holds: at least idleCount (a fill tops it
  // up), more when the create and steady scenarios alone exceed it.
  const fast = Number(config["steadyFastRate"] ?? 0); // results before it existed had none
  const idle = Math.max(
    Number(config["idleCount"]),
    Number(n) + Math.round(Number(rate) * Number(secs)) + Math.round(fast * Number(secs)),
  );
  const d = config["deleteCount"] ?? n; // results before deleteCount existed used createCount
  const perObject = (m: Record<string, number>) => m["writes"]! / m["objects"]!;
  const idleSecs = Number(config["idleSettleMs"] ?? 0) / 1000;
  const idleTotal = idleSecs + Number(config["idleWindowMs"] ?? 0) / 1000;
  const create = `Create ${n}`;
  const steady = `Steady ${rate}/s × ${secs} s`;
  const steadyFast = `Steady ${fast}/s × ${secs} s`;
  const updates = `Updates ${u} × ${c}, then 1 × 10`;
  const idleS = `Idle, ${idle} objects`;
  const restart = `Restart over ${idle}`;
  const del = `Delete ${d} (finalizers)`;
  const backlog = `Backlog ${config["backlogCount"]} (created before start)`;
  const r = (
    scenario: string,
    metric: string,
    phase: string,
    value: Row["value"],
    digits: number,
    better: Better,
  ): Row => ({ scenario, metric, phase, value, digits, better });
  /** The rows of a steady load (the scenario `steady` or `steady-fast`). */
  const steadyRows = (scenario: string, phase: string): Row[] => [
    r(scenario, "achieved creation rate, /s", phase, "rate", 1, ""),
    r(scenario, "creation → handler start p50, ms", phase, "latency.p50", 1, "lower"),
    r(scenario, "creation → handler start p95, ms", phase, "latency.p95", 1, "lower"),
    r(scenario, "creation → handler start p99, ms", phase, "latency.p99", 1, "lower"),
    r(scenario, "writes per object", phase, perObject, 2, "lower"),
    r(scenario, "Event posts", phase, "events", 0, "lower"),
    r(scenario, "operator CPU, s", phase, "cpuS", 2, "lower"),
    r(scenario, "API server CPU, s", phase, "apiserverCpuS", 2, "lower"),
    r(scenario, "watch reconnects", phase, "watches", 0, "lower"),
  ];
  return [
    r("Startup", "first object handled after start, s", "startup", "readyS", 2, "lower"),
    r(create, "time until all handled, s", "create", "durationS", 2, "lower"),
    r(create, "objects/s", "create", "throughput", 1, "higher"),
    r(create, "(harness: creating them took, s)", "create", "creationS", 2, ""),
    r(create, "writes per object", "create", perObject, 2, "lower"),
    r(create, "Event posts", "create", "events", 0, "lower"),
    r(create, "handler runs", "create", "runs.create", 0, ""),
    r(create, "creation → handler start p50, ms", "create", "latency.p50", 0, "lower"),
    r(create, "creation → handler start p99, ms", "create", "latency.p99", 0, "lower"),
    r(create, "operator CPU, s", "create", "cpuS", 2, "lower"),
    r(create, "operator peak RSS, MiB", "create", "peakRssMiB", 1, "lower"),
    r(create, "API server CPU, s", "create", "apiserverCpuS", 2, "lower"),
    r(create, "watch reconnects", "create", "watches", 0, "lower"),
    ...steadyRows(steady, "steady"),
    ...steadyRows(steadyFast, "steady-fast"),
    r(updates, `time until all ${u} × ${c} handled, s`, "updates", "durationS", 2, "lower"),
    r(updates, "handler runs", "updates", "runs.update", 0, ""),
    r(updates, "writes per change", "updates", (m) => m["writes"]! / m["changes"]!, 2, "lower"),
    r(updates, "Event posts", "updates", "events", 0, "lower"),
    r(updates, "change → handler start p50, ms", "updates", "latency.p50", 0, "lower"),
    r(updates, "change → handler start p99, ms", "updates", "latency.p99", 0, "lower"),
    r(updates, "one object alone, 10 changes: p50, ms", "updates", "single.p50", 0, "lower"),
    r(updates, "operator CPU, s", "updates", "cpuS", 2, "lower"),
    r("Fill (bulk create)", "objects/s", "fill", "throughput", 1, "higher"),
    r("Fill (bulk create)", "writes per object", "fill", perObject, 2, "lower"),
    r(idleS, "operator RSS right after the load, MiB", "idle", "rssAfterLoadMiB", 1, "lower"),
    r(idleS, `operator RSS after ${idleSecs} s idle, MiB`, "idle", "idleRssMiB", 1, "lower"),
    r(idleS, `operator CPU over those ${idleTotal} s, s`, "idle", "cpuS", 2, "lower"),
    r(idleS, `requests over those ${idleTotal} s`, "idle", "requests", 0, "lower"),
    r(restart, "new object handled after start, s", "restart", "readyS", 2, "lower"),
    r(restart, "writes to the old objects", "restart", "writes", 0, "lower"),
    r(restart, "handler runs on the old objects", "restart", "runs.old", 0, "lower"),
    r(restart, "Event posts", "restart", "events", 0, "lower"),
    r(restart, "operator CPU, s", "restart", "cpuS", 2, "lower"),
    r(restart, "operator peak RSS, MiB", "restart", "peakRssMiB", 1, "lower"),
    r(
      `Create ${d} with a delete handler`,
      "writes per object",
      "create-finalizers",
      perObject,
      2,
      "lower",
    ),
    r(
      `Create ${d} with a delete handler`,
      "Event posts",
      "create-finalizers",
      "events",
      0,
      "lower",
    ),
    r(del, "time until all gone, s", "delete", "durationS", 2, "lower"),
    r(del, "writes per object", "delete", perObject, 2, "lower"),
    r(del, "Event posts", "delete", "events", 0, "lower"),
    r(del, "handler runs", "delete", "runs.delete", 0, ""),
    r(del, "operator CPU, s", "delete", "cpuS", 2, "lower"),
    r(backlog, "time from start until all handled, s", "backlog", "durationS", 2, "lower"),
    r(backlog, "objects/s", "backlog", "throughput", 1, "higher"),
    r(backlog, "writes per object", "backlog", perObject, 2, "lower"),
    r(backlog, "Event posts", "backlog", "events", 0, "lower"),
    r(backlog, "operator CPU, s", "backlog", "cpuS", 2, "lower"),
    r(backlog, "operator peak RSS, MiB", "backlog", "peakRssMiB", 1, "lower"),
    r(backlog, "API server CPU, s", "backlog", "apiserverCpuS", 2, "lower"),
    r(backlog, "watch reconnects", "backlog", (m) => Math.max(0, m["watches"]! - 1), 0, "lower"),
    r("Noise", "other processes' CPU in Create, s", "create", "otherCpuS", 2, ""),
    r("Noise", "other processes' CPU in Backlog, s", "backlog", "otherCpuS", 2, ""),
    r("Noise", "other processes' CPU in Steady, s", "steady", "otherCpuS", 2, ""),
    r("Noise", "harness's own CPU in Steady, s", "steady", "harnessCpuS", 2, ""),
  ];
}

/** A row's value in each repetition of the contender, by repetition. */
function repValues(
  results: BenchResults,
  variant: string,
  contender: string,
  row: Row,
): Map<number, number> {
  const values = new Map<number, number>();
  for (const run of runsOf(results, variant)) {
    if (run.contender !== contender) continue;
    const phase = run.phases[row.phase];
    if (!phase) continue;
    const m = phase.metrics;
    const v = typeof row.value === "string"
      ? (m[row.value] ?? (row.value.startsWith("runs.") ? 0 : NaN))
      : row.value(m);
    values.set(run.rep, v);
  }
  return values;
}

/** The median of one metric of a contender's phase in a variant (for the aims' checks). */
function metricOf(
  results: BenchResults,
  variant: string,
): (id: string, phase: string, key: Row["value"]) => number {
  return (id, phase, key) =>
    valueOf(results, variant, id, {
      scenario: "",
      metric: "",
      phase,
      value: key,
      digits: 0,
      better: "",
    });
}

/** The median of a row's value over the contender's repetitions (NaN if never measured). */
function valueOf(results: BenchResults, variant: string, contender: string, row: Row): number {
  return median([...repValues(results, variant, contender, row).values()]);
}

/**
 * The ratio of two contenders' medians; with several repetitions also the spread of the ratio
 * within one repetition (each repetition's ratio: the contenders ran one after the other then),
 * e.g. `0.65× (0.61–0.70)`.
 */
function ratioCell(
  results: BenchResults,
  variant: string,
  row: Row,
  ours: string,
  other: string,
): string {
  const a = repValues(results, variant, ours, row), b = repValues(results, variant, other, row);
  const cell = ratio(median([...a.values()]), median([...b.values()]));
  const each = [...a].flatMap(([rep, v]) => {
    const w = b.get(rep);
    return w !== undefined && Number.isFinite(v) && Number.isFinite(w) && w !== 0 ? [v / w] : [];
  });
  if (each.length < 2 || cell === "—" || cell === "=") return cell;
  const lo = Math.min(...each), hi = Math.max(...each);
  const f = (r: number) => (r >= 10 ? r.toFixed(0) : r.toFixed(2));
  return lo === hi ? cell : `${cell} (${f(lo)}–${f(hi)})`;
}

function incomplete(
  results: BenchResults,
  variant: string,
  contender: string,
  phase: string,
): boolean {
  return runsOf(results, variant).some((r) =>
    r.contender === contender && r.phases[phase] !== undefined && !r.phases[phase]!.complete
  );
}

function fmt(value: number, digits: number): string {
  if (!Number.isFinite(value)) return "—";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function ratio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b)) return "—";
  if (b === 0) return a === 0 ? "=" : "—";
  const r = a / b;
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`;
}

function verbs(summary: RequestSummary | undefined): string {
  if (!summary) return "—";
  const entries = Object.entries(summary.byVerbResource).sort((a, b) => b[1] - a[1]);
  return entries.map(([k, v]) => `${k} ${v}`).join(", ") || "none";
}

const PHASES = [
  "startup",
  "create",
  "steady",
  "steady-fast",
  "updates",
  "fill",
  "idle",
  "restart",
  "create-finalizers",
  "delete",
  "backlog",
];

/** Renders the Markdown report: one table per CRD variant, headline first. */
export function renderMarkdown(results: BenchResults): string {
  const label = (id: string) => results.contenders.find((c) => c.id === id)?.label ?? id;
  const config = results.config;
  const reps = Number(config["reps"] ?? 1);
  const lines: string[] = [];
  const peerNames = PEERS.filter(([id]) => results.contenders.some((c) => c.id === id))
    .map(([id]) => ` vs ${id}`).join("");
  lines.push(
    `# Benchmark: kopf-ts vs Python Kopf vs raw floor${peerNames} (${config["variant"]})`,
  );
  lines.push("");
  lines.push(
    `Run ${results.startedAt} → ${results.finishedAt}; ${reps} repetition(s), ` +
      `figures are medians over the repetitions` +
      (reps > 1
        ? ` (ratios: of the medians, and in parentheses the lowest and highest ratio within ` +
          `one repetition)`
        : "") +
      `. One control plane for all contenders` +
      (results.mergedFrom
        ? ` of a repetition (merged from ${results.mergedFrom.length} runs: ` +
          `${results.mergedFrom.join("; ")})`
        : "") +
      `; requests counted from the API server's audit log.`,
  );
  lines.push("");
  const m = results.machine, v = results.versions;
  lines.push(
    `Machine: ${m["nproc"]} CPUs (${m["cpuModel"]}), ${m["memoryGiB"]} GiB RAM, Linux ` +
      `${m["kernel"]}; shared by etcd, kube-apiserver, the harness and the operator` +
      (Number(m["otherApiServers"] ?? 0) > 0
        ? ` — and by ${m["otherApiServers"]} other control plane(s) running meanwhile (noise)`
        : "") +
      (m["loadAvgAtStart"] !== undefined
        ? `; 1-minute load average ${m["loadAvgAtStart"]} at the start, ${
          m["loadAvgAtEnd"]
        } at the end`
        : "") +
      ".",
  );
  lines.push(
    `Versions: kopf-ts ${v["kopfTs"]} (commit ${v["commit"]}${
      v["dirty"] === "yes" ? ", dirty" : ""
    }), ` +
      `Deno ${v["deno"]}; ` +
      (v["python"] && v["python"] !== "-"
        ? `${v["kopfPython"]} on ${v["python"]}`
        : "Python Kopf not run") +
      (v["controllerRuntime"] ? `; ${v["controllerRuntime"]} (${v["go"]})` : "") +
      (v["clientNode"] ? `; @kubernetes/client-node ${v["clientNode"]} on Node ${v["node"]}` : "") +
      `; Kubernetes ${v["kubernetes"]}.`,
  );
  lines.push("");
  for (const variant of variantsOf(results)) {
    const runs = runsOf(results, variant.id);
    const ids = results.contenders.map((c) => c.id).filter((id) =>
      runs.some((r) => r.contender === id)
    );
    if (!ids.length) continue;
    const has = (id: string) => ids.includes(id);
    const ours = ids.filter((id) => id.startsWith(TS));
    lines.push(`## ${variant.label}`);
    lines.push("");
    const header = ["Scenario", "Metric", ...ids.map(label)];
    for (const id of ours) {
      if (has(PY)) header.push(`${label(id)} ÷ Kopf`);
      if (has(RAW)) header.push(`${label(id)} ÷ raw`);
      for (const [peer, heading] of PEERS) {
        const other = peerOf(id, peer, ids);
        if (other) {
          header.push(`${label(id)} ÷ ${heading}${other === peer ? "" : ", state in status"}`);
        }
      }
    }
    lines.push(`| ${header.join(" | ")} |`);
    lines.push(`|${header.map((_, i) => (i < 2 ? " --- " : " ---: ")).join("|")}|`);
    let last = "";
    for (const row of rows(config)) {
      const values = ids.map((id) => valueOf(results, variant.id, id, row));
      if (values.every((x) => !Number.isFinite(x))) continue;
      const cells = ids.map((id, i) =>
        fmt(values[i]!, row.digits) + (incomplete(results, variant.id, id, row.phase) ? " ⚠" : "")
      );
      const noise = row.scenario === "Noise";
      const vs = (id: string, other: string) =>
        noise ? "" : ratioCell(results, variant.id, row, id, other);
      for (const id of ours) {
        if (has(PY)) cells.push(vs(id, PY));
        if (has(RAW)) cells.push(vs(id, RAW));
        for (const [peer] of PEERS) {
          const other = peerOf(id, peer, ids);
          if (other) cells.push(vs(id, other));
        }
      }
      const scenario = row.scenario === last ? "" : `**${row.scenario}**`;
      last = row.scenario;
      lines.push(`| ${scenario} | ${row.metric}${arrow(row.better)} | ${cells.join(" | ")} |`);
    }
    lines.push("");
    lines.push(`### Requests by verb and resource, ${variant.label} (repetition 1)`);
    lines.push("");
    lines.push(`| Scenario | ${ids.map(label).join(" | ")} |`);
    lines.push(`| --- |${ids.map(() => " --- ").join("|")}|`);
    for (const phase of PHASES) {
      const cells = ids.map((id) => {
        const run = runs.find((r) => r.contender === id && r.rep === 1);
        return verbs(run?.phases[phase]?.requests);
      });
      if (cells.every((c) => c === "—")) continue;
      lines.push(`| ${phase} | ${cells.join(" | ")} |`);
    }
    lines.push("");
  }
  lines.push(
    "↓ lower is better, ↑ higher is better. ⚠ = the scenario did not complete within its " +
      'timeout. "Writes" are create/update/patch/delete requests to anything but Events ' +
      "(a patch of `/status` is a write of its own); Event posts are counted separately. " +
      "Latencies are from the harness sending the create (or patch) request to the " +
      "handler's first line (same clock).",
  );
  lines.push("");
  const errors = results.runs.filter((r) => r.error);
  if (errors.length) {
    lines.push("## Failures");
    lines.push("");
    for (const r of errors) {
      lines.push(
        `- ${label(r.contender)} [${r.variant ?? "plain"}] (repetition ${r.rep}): ` +
          `${r.error?.split("\n")[0]}`,
      );
    }
    lines.push("");
  }
  lines.push(...aims(results, label));
  lines.push(...peerAims(results, label));
  return lines.join("\n") + "\n";
}

function arrow(better: Better): string {
  return better === "lower" ? " ↓" : better === "higher" ? " ↑" : "";
}

function aims(results: BenchResults, label: (id: string) => string): string[] {
  const config = results.config;
  const out: string[] = ["## Aims of issue #12", ""];
  const verdict = (value: number, ok: (v: number) => boolean) =>
    !Number.isFinite(value) ? "not measured" : ok(value) ? "**met**" : "**not met**";
  const perObject = (m: Record<string, number>) => m["writes"]! / m["objects"]!;
  const cpuPerObject = (m: Record<string, number>) => m["cpuS"]! / m["objects"]!;
  for (const variant of variantsOf(results)) {
    const get = metricOf(results, variant.id);
    const ours = results.contenders.map((c) => c.id).filter((id) =>
      id.startsWith(TS) && runsOf(results, variant.id).some((r) => r.contender === id)
    );
    if (!ours.length) continue;
    out.push(`${variant.label}:`);
    out.push("");
    for (const id of ours) {
      const who = label(id);
      const writes = get(id, "create", perObject);
      out.push(
        `- ${who}: writes per handled create: ${fmt(writes, 2)} (Kopf ` +
          `${fmt(get(PY, "create", perObject), 2)}, raw floor ${
            fmt(get(RAW, "create", perObject), 2)
          }).`,
      );
      const closures = get(id, "create", "watches") +
        get(id, "backlog", (m) => Math.max(0, m["watches"]! - 1));
      out.push(
        `- ${who}: watch closures in the create burst (${config["createCount"]}) and the ` +
          `backlog: ${fmt(closures, 0)} — ${verdict(closures, (x) => x === 0)}.`,
      );
      const peak = Math.max(get(id, "create", "peakRssMiB"), get(id, "backlog", "peakRssMiB"));
      const kopfPeak = Math.max(get(PY, "create", "peakRssMiB"), get(PY, "backlog", "peakRssMiB"));
      out.push(
        `- ${who}: peak RSS in the create burst and backlog ≤ 0.8× Kopf's: ` +
          `${ratio(peak, kopfPeak)} (${fmt(peak, 0)} vs ${fmt(kopfPeak, 0)} MiB) — ` +
          `${verdict(peak / kopfPeak, (x) => x <= 0.8)}.`,
      );
      const idle = get(id, "idle", "idleRssMiB"), kopfIdle = get(PY, "idle", "idleRssMiB");
      out.push(
        `- ${who}: idle RSS over ${fmt(get(id, "idle", "objects"), 0)} handled objects ≤ 0.3× ` +
          `Kopf's: ${ratio(idle, kopfIdle)} (${fmt(idle, 0)} vs ${fmt(kopfIdle, 0)} MiB) — ` +
          `${verdict(idle / kopfIdle, (x) => x <= 0.3)}.`,
      );
      const cpu = get(id, "backlog", cpuPerObject), rawCpu = get(RAW, "backlog", cpuPerObject);
      out.push(
        `- ${who}: CPU per object in the backlog ≤ 1.3× the raw floor: ${ratio(cpu, rawCpu)} — ` +
          `${verdict(cpu / rawCpu, (x) => x <= 1.3)}.`,
      );
      const tput = get(id, "backlog", "throughput"), rawTput = get(RAW, "backlog", "throughput");
      out.push(
        `- ${who}: backlog throughput ≥ 0.9× the raw floor: ${ratio(tput, rawTput)} — ` +
          `${verdict(tput / rawTput, (x) => x >= 0.9)} (Kopf: ${
            ratio(get(PY, "backlog", "throughput"), rawTput)
          } the floor).`,
      );
    }
    out.push("");
  }
  return out;
}

/**
 * The aims of issue 31 against controller-runtime (same persistence mode) and the raw floor,
 * per CRD variant and kopf-ts contender: only those this run measured.
 */
function peerAims(results: BenchResults, label: (id: string) => string): string[] {
  const GO = "controller-runtime";
  const size = Number(results.config["createCount"]);
  const out: string[] = [`## Aims of issue 31 (against controller-runtime and the floor)`, ""];
  const mark = (ok: boolean | undefined) =>
    ok === undefined ? "not measured" : ok ? "**met**" : "**not met**";
  let any = false;
  for (const variant of variantsOf(results)) {
    const runs = runsOf(results, variant.id);
    const ids = results.contenders.map((c) => c.id).filter((id) =>
      runs.some((r) => r.contender === id)
    );
    const get = metricOf(results, variant.id);
    for (const id of ids.filter((i) => i.startsWith(TS))) {
      const go = peerOf(id, GO, ids);
      if (!go) continue;
      any = true;
      out.push(`${variant.label}, ${label(id)} vs ${label(go)}:`);
      out.push("");
      const line = (
        aim: string,
        pairs: Array<[string, number, number]>,
        ok: (r: number) => boolean,
      ) => {
        const measured = pairs.filter(([, a, b]) => Number.isFinite(a) && Number.isFinite(b) && b);
        if (!measured.length) return;
        const all = measured.every(([, a, b]) => ok(a / b));
        out.push(
          `- ${aim}: ${measured.map(([what, a, b]) => `${what} ${ratio(a, b)}`).join(", ")} — ${
            mark(all)
          }.`,
        );
      };
      const peakCap = size >= 10_000 ? 0.8 : 1.2;
      line(
        `peak RSS ≤ ${peakCap}× Go's`,
        ["create", "backlog", "restart"].map((
          p,
        ) => [p, get(id, p, "peakRssMiB"), get(go, p, "peakRssMiB")]),
        (r) => r <= peakCap,
      );
      line("idle RSS ≤ 0.5× Go's", [[
        "idle",
        get(id, "idle", "idleRssMiB"),
        get(go, "idle", "idleRssMiB"),
      ]], (r) => r <= 0.5);
      line(
        "throughput ≥ 1.1× Go's",
        ["create", "backlog"].map((p) => [p, get(id, p, "throughput"), get(go, p, "throughput")]),
        (r) => r >= 1.1,
      );
      const cpuPhases = ["create", "steady", "steady-fast", "updates", "restart", "backlog"];
      line(
        "operator CPU ≤ 0.5× Go's",
        cpuPhases.map((p) => [p, get(id, p, "cpuS"), get(go, p, "cpuS")]),
        (r) => r <= 0.5,
      );
      if (ids.includes(RAW)) {
        line(
          "backlog throughput ≥ 0.9× the floor's",
          [["backlog", get(id, "backlog", "throughput"), get(RAW, "backlog", "throughput")]],
          (r) => r >= 0.9,
        );
        line(
          "operator CPU ≤ 1.3× the floor's",
          cpuPhases.map((p) => [p, get(id, p, "cpuS"), get(RAW, p, "cpuS")]),
          (r) => r <= 1.3,
        );
      }
      for (const phase of ["steady", "steady-fast"]) {
        const p99 = get(id, phase, "latency.p99");
        line(
          `${
            phase === "steady" ? results.config["steadyRate"] : results.config["steadyFastRate"]
          }/s: p99 ≤ Go's`,
          [["p99", p99, get(go, phase, "latency.p99")]],
          (r) => r <= 1,
        );
        if (ids.includes(RAW)) {
          line(
            `${
              phase === "steady" ? results.config["steadyRate"] : results.config["steadyFastRate"]
            }/s: p99 ≤ 2× the floor's`,
            [["p99", p99, get(RAW, phase, "latency.p99")]],
            (r) => r <= 2,
          );
        }
      }
      out.push("");
    }
  }
  return any ? out : [];
}
