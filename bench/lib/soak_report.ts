/**
 * The soak's results (bench/soak.ts): the samples, the summary computed from them and the
 * ledger, the results file, and its chart (bench/lib/charts.ts).
 * @module
 */
import { lineChart, type Row, toSvg } from "./charts.ts";
import type { Ledger } from "./soak_ledger.ts";

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

/** What one soak run measured and counted, for {@link soakResults}. */
export interface SoakOutcome {
  readonly started: Date;
  readonly finishedAt: string;
  readonly config: SoakResults["config"];
  readonly machine: Record<string, string | number>;
  readonly versions: Record<string, string>;
  readonly samples: SoakSample[];
  readonly ledger: Ledger;
  /** Live objects not reflecting their last spec, and objects stuck in deletion. */
  readonly stale: number;
  readonly stuck: number;
  readonly skippedTicks: number;
  /** The operator's CPU seconds at the last sample. */
  readonly cpuSecondsTotal: number;
  /** The operator's API requests over the run (all, and without Events). */
  readonly requestsTotal: number;
  readonly requestsNoEvents: number;
  readonly operatorExitMs: number;
  readonly operatorExitCode: number | null;
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

/** The results file's content: the samples and the summary of a soak run. */
export function soakResults(o: SoakOutcome): SoakResults {
  const { ledger, samples } = o;
  const latencies = [...ledger.latencies].sort((a, b) => a - b);
  const warm = samples.filter((s) => s.t >= o.config.warmupMinutes * 60);
  const rssSlope = slope(warm.map((s) => [s.t, s.rssMiB] as const));
  const atWarmup = warm[0]?.rssMiB ?? NaN;
  const span = (warm.at(-1)?.t ?? 0) - (warm[0]?.t ?? 0);
  const fittedStart = warm.length
    ? warm.reduce((s, x) => s + x.rssMiB, 0) / warm.length -
      rssSlope * (warm.reduce((s, x) => s + x.t, 0) / warm.length - (warm[0]?.t ?? 0))
    : NaN;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const busySamples = samples.slice(1);
  return {
    startedAt: o.started.toISOString(),
    finishedAt: o.finishedAt,
    config: o.config,
    machine: o.machine,
    versions: o.versions,
    samples,
    summary: {
      changes: { ...ledger.counts, total: ledger.changes },
      runs: ledger.totalRuns,
      lost: ledger.lost,
      duplicated: ledger.duplicated,
      unexpected: ledger.unexpected,
      stale: o.stale,
      stuck: o.stuck,
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
        secondsTotal: Math.round(o.cpuSecondsTotal * 10) / 10,
      },
      requests: {
        total: o.requestsTotal,
        noEvents: o.requestsNoEvents,
        perChange: Math.round((o.requestsTotal / Math.max(1, ledger.changes)) * 100) / 100,
        perChangeNoEvents: Math.round((o.requestsNoEvents / Math.max(1, ledger.changes)) * 100) /
          100,
      },
      skippedTicks: o.skippedTicks,
      load: {
        mean1: Math.round(mean(samples.map((s) => s.load1)) * 100) / 100,
        max1: Math.max(...samples.map((s) => s.load1)),
        machineMeanPct: Math.round(mean(busySamples.map((s) => s.machinePct)) * 10) / 10,
      },
      operatorExitMs: o.operatorExitMs,
      operatorExitCode: o.operatorExitCode,
    },
  };
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

/**
 * Writes the results file and its chart beside it (`.svg`).
 * @returns The chart's path.
 */
export async function writeSoakResults(outPath: string, results: SoakResults): Promise<string> {
  await Deno.mkdir(outPath.replace(/\/[^/]*$/, ""), { recursive: true });
  await Deno.writeTextFile(outPath, JSON.stringify(results, null, 2) + "\n");
  const svgPath = outPath.replace(/\.json$/, "") + ".svg";
  await Deno.writeTextFile(svgPath, await soakChartSvg(results));
  return svgPath;
}
