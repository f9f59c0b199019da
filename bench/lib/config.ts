/**
 * The benchmark's sizes (quick, full, huge) and its two CRD variants.
 * @module
 */
import { type BenchResource, KOPFEXAMPLES } from "./kube.ts";

/** Sizes and timings of one benchmark run. */
export interface Config {
  readonly variant: "quick" | "full" | "huge";
  /** Objects in the create scenario. */
  readonly createCount: number;
  /** Objects created with a delete handler, then deleted (the finalizer scenarios). */
  readonly deleteCount: number;
  /** Steady load: objects per second and seconds. */
  readonly steadyRate: number;
  readonly steadySeconds: number;
  /** A second, faster steady load after it, for as many seconds (0 = none). */
  readonly steadyFastRate: number;
  /** Updates: objects × changes each. */
  readonly updateObjects: number;
  readonly updateChanges: number;
  /** Objects created before the operator starts (throughput without the harness creating). */
  readonly backlogCount: number;
  /** Handled objects watched in the idle and restart scenarios. */
  readonly idleCount: number;
  /** Idle: how long the operator idles before the measurement window, and the window. */
  readonly idleSettleMs: number;
  readonly idleWindowMs: number;
  /** Concurrent creations/deletions by the harness. */
  readonly concurrency: number;
  /** After a scenario completes: wait at least this long, then until the operator is quiet. */
  readonly settleMinMs: number;
  readonly settleQuietMs: number;
  readonly settleMaxMs: number;
  readonly reps: number;
  /** RSS samples of the operator over its whole session, every this many ms (0 = none). */
  readonly rssSampleMs: number;
}

export const QUICK: Config = {
  variant: "quick",
  createCount: 1_000,
  deleteCount: 1_000,
  steadyRate: 100,
  steadySeconds: 7,
  steadyFastRate: 200,
  updateObjects: 100,
  updateChanges: 10,
  backlogCount: 1_000,
  idleCount: 1_000,
  idleSettleMs: 30_000,
  idleWindowMs: 5_000,
  concurrency: 16,
  // Our Events are aggregated in 5-second windows: a scenario's last batch can come up to 5 s
  // after its last handler, and must be counted in that scenario, not the next one.
  settleMinMs: 5_500,
  settleQuietMs: 1_500,
  settleMaxMs: 20_000,
  reps: 1,
  rssSampleMs: 250,
};

export const FULL: Config = {
  ...QUICK,
  variant: "full",
  // The 10,000 variant of the create scenario; it also fills the namespace for idle and restart.
  createCount: 10_000,
  steadySeconds: 20,
  backlogCount: 5_000,
  idleCount: 10_000,
};

/** 50,000 objects: time, peak and idle RSS, API server CPU for whoever finishes. */
export const HUGE: Config = {
  ...FULL,
  variant: "huge",
  createCount: 50_000,
  backlogCount: 10_000,
  idleCount: 50_000,
  settleMaxMs: 60_000,
};

/**
 * The scenario groups, each in its own namespace: `main` (startup, create, steady, updates, fill,
 * idle, restart), `finalizers` (create with a delete handler, delete), `backlog`.
 */
export const SCENARIO_GROUPS = ["main", "finalizers", "backlog"] as const;

/** One of {@link SCENARIO_GROUPS}. */
export type ScenarioGroup = typeof SCENARIO_GROUPS[number];

/** One CRD variant: the resource, its manifest, and whether status is a subresource. */
export interface CrdVariant {
  readonly id: "status" | "plain";
  readonly label: string;
  readonly resource: BenchResource;
  /** The manifest, relative to the repository root. */
  readonly manifest: string;
  readonly statusSubresource: boolean;
}

/** Both variants; the one with a status subresource (what real CRDs have) is the headline. */
export const CRD_VARIANTS: readonly CrdVariant[] = [{
  id: "status",
  label: "CRD with a status subresource",
  resource: { plural: "kopfstatusexamples", kind: "KopfStatusExample" },
  manifest: "crds/example-status.yaml",
  statusSubresource: true,
}, {
  id: "plain",
  label: "CRD without a status subresource",
  resource: KOPFEXAMPLES,
  manifest: "crds/example.yaml",
  statusSubresource: false,
}];
