/**
 * The benchmark's result files: what one run of `bench/run.ts` writes (the figures of every
 * scenario of every contender in every repetition), and how they are read.
 * @module
 */
import type { RequestSummary } from "./audit.ts";

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
