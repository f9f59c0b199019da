/**
 * The figures of a result file as the report and its aims read them: a row of the table (a
 * scenario's metric), its value per repetition and its median, ratios, and number formats.
 * @module
 */
import { type BenchResults, runsOf } from "./results.ts";
import { median } from "./stats.ts";

/** Which way a figure is better. */
export type Better = "lower" | "higher" | "";

/** One row of the report's table: a scenario's metric. */
export interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly phase: string;
  /** A metric key, or a function of the phase's metrics. */
  readonly value: string | ((m: Record<string, number>) => number);
  readonly digits: number;
  readonly better: Better;
}

/** The contenders the report compares by name. */
export const TS = "kopf-ts", PY = "kopf-py", RAW = "raw-floor";
/** The peers, with their column headings: each compared in the same persistence mode. */
export const PEERS = [["controller-runtime", "Go"], ["client-node", "client-node"]] as const;

/** The run of a peer to compare one of ours with: `-status` with `-status` if it ran. */
export function peerOf(ours: string, peer: string, ids: readonly string[]): string | undefined {
  const same = ours.endsWith("-status") ? `${peer}-status` : peer;
  return ids.includes(same) ? same : ids.includes(peer) ? peer : undefined;
}

/** A row's value in each repetition of the contender, by repetition. */
export function repValues(
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
export function metricOf(
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
export function valueOf(
  results: BenchResults,
  variant: string,
  contender: string,
  row: Row,
): number {
  return median([...repValues(results, variant, contender, row).values()]);
}

/** A number with `digits` decimals (en-US grouping); `—` when not measured. */
export function fmt(value: number, digits: number): string {
  if (!Number.isFinite(value)) return "—";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** `a ÷ b` as `0.65×` (`—` when not measured, `=` for 0 ÷ 0). */
export function ratio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b)) return "—";
  if (b === 0) return a === 0 ? "=" : "—";
  const r = a / b;
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`;
}
