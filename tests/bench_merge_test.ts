/**
 * `bench/run.ts --merge`: repetitions run at different times reported as one run's (medians
 * over all, the spread of a ratio within each repetition), and files that are not repetitions
 * of one configuration refused with the reason. Pure logic on result files: no cluster.
 */
import assert from "node:assert/strict";
import { mergeResults } from "../bench/lib/merge.ts";
import { renderMarkdown } from "../bench/lib/report.ts";
import type { BenchResults, ContenderRun } from "../bench/lib/results.ts";

const CONFIG = {
  variant: "quick",
  createCount: 1000,
  deleteCount: 1000,
  steadyRate: 100,
  steadySeconds: 7,
  steadyFastRate: 200,
  updateObjects: 100,
  updateChanges: 10,
  backlogCount: 1000,
  idleCount: 1000,
  idleSettleMs: 30000,
  idleWindowMs: 5000,
  concurrency: 16,
  reps: 1,
};

function run(contender: string, rep: number, cpuS: number): ContenderRun {
  return {
    contender,
    variant: "plain",
    rep,
    rss: [[0, 50], [1000, 60 + rep]],
    phases: {
      backlog: {
        name: "backlog",
        startedAt: 0,
        completedAt: 1000,
        windowEnd: 1000,
        complete: true,
        metrics: { cpuS, throughput: 100 * rep, peakRssMiB: 60 + rep, objects: 1000 },
        requests: {
          total: 1000,
          byVerb: { patch: 1000 },
          byVerbResource: { "patch kopfexamples": 1000 },
          writes: 1000,
          events: 0,
          conflicts: 0,
          errors: 0,
        },
        handlerRuns: {},
        peakIsSincePhaseStart: true,
      },
    },
  };
}

function results(
  runs: ContenderRun[],
  overrides: { commit?: string; deno?: string; config?: Record<string, unknown> } = {},
): BenchResults {
  const first = Math.min(...runs.map((r) => r.rep));
  return {
    startedAt: `2026-11-2${first}T10:00:00.000Z`,
    finishedAt: `2026-11-2${first}T10:30:00.000Z`,
    config: { ...CONFIG, ...overrides.config },
    machine: { nproc: 2, cpuModel: "test", memoryGiB: 8, kernel: "6", loadAvgAtStart: first },
    versions: {
      deno: overrides.deno ?? "2.9.6",
      kubernetes: "v1.36.3",
      kopfTs: "0.1.0",
      commit: overrides.commit ?? "abc1234",
      dirty: "no",
    },
    contenders: ["kopf-ts", "controller-runtime"].map((id) => ({ id, label: id, userAgent: id })),
    variants: [{ id: "plain", label: "CRD without a status subresource" }],
    runs,
  };
}

Deno.test("bench --merge: repetitions of separate runs reported together, spread per repetition", () => {
  // Run A: repetition 1; run B (--first-rep 2 --reps 2): repetitions 2 and 3.
  const a = results([run("kopf-ts", 1, 1.0), run("controller-runtime", 1, 2.0)]);
  const b = results(
    [
      run("controller-runtime", 2, 2.0),
      run("kopf-ts", 2, 1.5),
      run("kopf-ts", 3, 1.2),
      run("controller-runtime", 3, 4.0),
    ],
    { commit: "def5678", config: { reps: 2 } },
  );
  const merged = mergeResults([{ name: "a.json", results: a }, { name: "b.json", results: b }]);
  assert.deepEqual(merged.config["reps"], 3);
  assert.deepEqual(merged.runs.map((r) => r.rep), [1, 1, 2, 2, 3, 3]);
  assert.deepEqual(merged.startedAt, a.startedAt);
  assert.deepEqual(merged.finishedAt, b.finishedAt);
  assert.deepEqual(merged.versions["commit"], "abc1234 / def5678");
  assert.deepEqual(merged.machine["loadAvgAtStart"], "1 / 2");
  assert.deepEqual(merged.mergedFrom, ["a.json (repetition 1)", "b.json (repetitions 2, 3)"]);

  const markdown = renderMarkdown(merged);
  assert.ok(markdown.includes("3 repetition(s)"), markdown);
  assert.ok(markdown.includes("merged from 2 runs: a.json (repetition 1); b.json"), markdown);
  // Backlog CPU: kopf-ts 1.0, 1.5, 1.2 (median 1.2); Go 2.0, 2.0, 4.0 (median 2.0) → 0.60×,
  // and within the repetitions 0.50, 0.75, 0.30.
  const cpuRow = markdown.split("\n").find((l) =>
    l.includes("operator CPU") && l.includes("0.60×")
  );
  assert.ok(cpuRow, `no backlog CPU row with the merged ratio:\n${markdown}`);
  assert.ok(cpuRow.includes("0.60× (0.30–0.75)"), cpuRow);
});

Deno.test("bench --merge: refuses files that are not repetitions of one configuration", () => {
  const a = results([run("kopf-ts", 1, 1), run("controller-runtime", 1, 2)]);
  const again = results([run("kopf-ts", 1, 1), run("controller-runtime", 1, 2)]);
  const bigger = results([run("kopf-ts", 2, 1)], { config: { createCount: 10000 } });
  const otherDeno = results([run("kopf-ts", 2, 1)], { deno: "2.9.7" });
  const merge = (b: BenchResults) =>
    mergeResults([{ name: "a.json", results: a }, { name: "b.json", results: b }]);
  assert.throws(
    () => merge(again),
    (e: Error) => e.message.includes("kopf-ts [plain] repetition 1 is in a.json too"),
  );
  assert.throws(() => merge(again), (e: Error) => e.message.includes("--first-rep"));
  assert.throws(
    () => merge(bigger),
    (e: Error) => e.message.includes("other sizes than a.json (createCount)"),
  );
  assert.throws(
    () => merge(otherDeno),
    (e: Error) => e.message.includes("other versions than a.json (deno)"),
  );
  assert.throws(
    () => mergeResults([{ name: "a.json", results: a }]),
    (e: Error) => e.message.includes("two result files"),
  );
});
