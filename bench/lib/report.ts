/**
 * The benchmark's Markdown report: absolute figures per contender (medians
 * over the repetitions), the ratios this framework ÷ Kopf, ÷ raw floor and ÷ each peer
 * (controller-runtime, client-node; in the same persistence mode where the peer ran in it), the
 * requests by verb, machine details, versions, and the aims checked against the numbers.
 * @module
 */
import type { RequestSummary } from "./audit.ts";
import { aims, peerAims } from "./report_aims.ts";
import {
  type Better,
  fmt,
  peerOf,
  PEERS,
  PY,
  ratio,
  RAW,
  repValues,
  type Row,
  TS,
  valueOf,
} from "./figures.ts";
import { type BenchResults, runsOf, variantsOf } from "./results.ts";
import { median } from "./stats.ts";

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
    const firstRep = Math.min(...runs.map((r) => r.rep));
    lines.push(
      `### Requests by verb and resource, ${variant.label} (repetition ${firstRep})`,
    );
    lines.push("");
    lines.push(`| Scenario | ${ids.map(label).join(" | ")} |`);
    lines.push(`| --- |${ids.map(() => " --- ").join("|")}|`);
    for (const phase of PHASES) {
      const cells = ids.map((id) => {
        const run = runs.find((r) => r.contender === id && r.rep === firstRep);
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
