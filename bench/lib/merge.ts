/**
 * Several result files of one benchmark as one: repetitions run on different occasions (each
 * with `--first-rep N`, so that the rotation of the contenders' order continues and the
 * repetitions' numbers differ) reported together, with medians and spreads over all of them.
 *
 * A repetition is still one unit: its contenders ran one after the other on one control plane,
 * so the spread of a ratio is taken within a repetition, as in a single run. What must agree
 * between the files: the sizes (`config`, except `reps`), the runtime and the peers' versions.
 * The framework's commit may differ (a run is still valid after a documentation change); the
 * merged report names each file's commit.
 * @module
 */
import type { BenchResults, ContenderRun } from "./results.ts";

/** One result file to merge: its name (for messages and the report) and its contents. */
export interface MergeSource {
  readonly name: string;
  readonly results: BenchResults;
}

/** Versions that may differ between the merged files (named per file in the report). */
const OWN_VERSIONS = new Set(["commit", "dirty"]);
/** Machine facts of one moment rather than of the machine (joined per file). */
const MOMENTS = new Set(["loadAvgAtStart", "loadAvgAtEnd", "otherApiServers"]);

/** Merges result files into one; throws an Error saying which file disagrees and how. */
export function mergeResults(sources: readonly MergeSource[]): BenchResults {
  if (sources.length < 2) throw new Error("--merge needs two result files or more");
  const [first, ...rest] = sources as [MergeSource, ...MergeSource[]];
  const sizes = (r: BenchResults) => {
    const { reps: _reps, ...others } = r.config;
    return others;
  };
  for (const source of rest) {
    const differing = differences(sizes(first.results), sizes(source.results));
    if (differing.length) {
      throw new Error(
        `${source.name}: other sizes than ${first.name} (${differing.join(", ")}): ` +
          `only repetitions of one configuration can be merged`,
      );
    }
    const versions = differences(first.results.versions, source.results.versions)
      .filter((key) => !OWN_VERSIONS.has(key));
    if (versions.length) {
      throw new Error(
        `${source.name}: other versions than ${first.name} (${versions.join(", ")}): ` +
          `the runtime and the peers must be the same in every repetition`,
      );
    }
  }

  const seen = new Map<string, string>();
  const runs: ContenderRun[] = [];
  for (const { name, results } of sources) {
    for (const run of results.runs) {
      const key = `${run.contender} [${run.variant ?? "plain"}] repetition ${run.rep}`;
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        throw new Error(
          `${name}: ${key} is in ${earlier} too: run later repetitions with --first-rep N`,
        );
      }
      seen.set(key, name);
      runs.push(run);
    }
  }
  runs.sort((a, b) => a.rep - b.rep);

  const contenders = unionBy(sources.map((s) => s.results.contenders), (c) => c.id);
  const variants = unionBy(
    sources.map((s) =>
      s.results.variants ?? [{ id: "plain", label: "CRD without a status subresource" }]
    ),
    (v) => v.id,
  );
  const reps = new Set(runs.map((r) => r.rep)).size;
  const perFile = (value: (r: BenchResults) => unknown) =>
    sources.map((s) => `${String(value(s.results) ?? "?")}`).join(" / ");

  const machine: Record<string, string | number> = { ...first.results.machine };
  for (const key of Object.keys(machine)) {
    const values = new Set(sources.map((s) => String(s.results.machine[key])));
    if (MOMENTS.has(key) || values.size > 1) machine[key] = perFile((r) => r.machine[key]);
  }
  const versions: Record<string, string> = { ...first.results.versions };
  for (const key of OWN_VERSIONS) {
    const values = new Set(sources.map((s) => s.results.versions[key]));
    if (values.size > 1) versions[key] = perFile((r) => r.versions[key]);
  }
  const byTime = [...sources].sort((a, b) =>
    a.results.startedAt.localeCompare(b.results.startedAt)
  );
  return {
    startedAt: byTime[0]!.results.startedAt,
    finishedAt: byTime.map((s) => s.results.finishedAt).sort().at(-1)!,
    config: { ...first.results.config, reps },
    machine,
    versions,
    contenders,
    variants,
    runs,
    mergedFrom: sources.map((s) => {
      const own = [...new Set(s.results.runs.map((r) => r.rep))].sort((a, b) => a - b);
      return `${s.name} (repetition${own.length > 1 ? "s" : ""} ${own.join(", ")})`;
    }),
  };
}

/** The keys whose values differ between two flat records (JSON-compared). */
function differences(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k])).sort();
}

/** The union of lists, in the order of first appearance, by a key. */
function unionBy<T>(lists: readonly (readonly T[])[], key: (item: T) => string): T[] {
  const out = new Map<string, T>();
  for (const list of lists) {
    for (const item of list) if (!out.has(key(item))) out.set(key(item), item);
  }
  return [...out.values()];
}
