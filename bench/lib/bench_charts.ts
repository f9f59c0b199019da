/**
 * The benchmark's charts (SVG, next to its tables): latency distributions per contender, RSS
 * over each session (through the bursts and the idle phase), writes per object per CRD variant.
 * @module
 */
import {
  downsample,
  groupedBarChart,
  lineChart,
  percentileCurve,
  type Row,
  toSvg,
} from "./charts.ts";
import { type BenchResults, runsOf, variantsOf } from "./results.ts";

const SHORT: Record<string, string> = { status: "status subresource", plain: "no subresource" };

/** Renders the charts of a result file; writes `<base>-<chart>.svg` and returns the paths. */
export async function writeCharts(results: BenchResults, base: string): Promise<string[]> {
  const label = (id: string) => results.contenders.find((c) => c.id === id)?.label ?? id;
  const variants = variantsOf(results);
  const paths: string[] = [];
  const write = async (name: string, svg: string) => {
    const path = `${base}-${name}.svg`;
    await Deno.writeTextFile(path, svg);
    paths.push(path);
  };

  // Latency: percentiles of creation → handler start, all repetitions together.
  const latency: Row[] = [];
  const scenarios: Array<[string, string]> = [
    ["create", `burst of ${results.config["createCount"]}`],
    ["steady", `${results.config["steadyRate"]}/s`],
    ...(results.config["steadyFastRate"]
      ? [["steady-fast", `${results.config["steadyFastRate"]}/s`] as [string, string]]
      : []),
  ];
  for (const variant of variants) {
    for (const [phase, title] of scenarios) {
      for (const c of results.contenders) {
        const samples = runsOf(results, variant.id)
          .filter((r) => r.contender === c.id)
          .flatMap((r) => r.phases[phase]?.samples?.["latency"] ?? []);
        for (const [p, ms] of percentileCurve(samples)) {
          latency.push({
            panel: `${SHORT[variant.id] ?? variant.id}: ${title}`,
            contender: label(c.id),
            percentile: p,
            ms: Math.max(1, ms),
          });
        }
      }
    }
  }
  if (latency.length) {
    await write(
      "latency",
      await toSvg(lineChart({
        values: latency,
        x: "percentile",
        y: "ms",
        color: "contender",
        column: "panel",
        yScale: "log",
        width: 220,
        title: "Creation → handler start: latency by percentile (ms, log scale)",
        xTitle: "percentile",
        yTitle: "ms",
      })),
    );
  }

  // RSS over the session of the first repetition (every scenario, idle included).
  const rss: Row[] = [];
  for (const variant of variants) {
    const runs = runsOf(results, variant.id);
    const firstRep = Math.min(...runs.map((r) => r.rep));
    for (const run of runs.filter((r) => r.rep === firstRep)) {
      for (const [ms, mib] of downsample(run.rss ?? [], 300)) {
        rss.push({
          panel: SHORT[variant.id] ?? variant.id,
          contender: label(run.contender),
          s: Math.round(ms / 100) / 10,
          MiB: mib,
        });
      }
    }
  }
  if (rss.length) {
    await write(
      "rss",
      await toSvg(lineChart({
        values: rss,
        x: "s",
        y: "MiB",
        color: "contender",
        column: "panel",
        width: 420,
        title: "Operator RSS over the session (create, steady, updates, idle, restart, …)",
        xTitle: "seconds since the session began",
        yTitle: "RSS, MiB",
      })),
    );
  }

  // Writes per object (or per change) by CRD variant.
  const writes: Row[] = [];
  const kinds: Array<[string, string, string]> = [
    ["create", "objects", "create"],
    ["updates", "changes", "update (per change)"],
    ["create-finalizers", "objects", "create, with a delete handler"],
  ];
  for (const variant of variants) {
    for (const c of results.contenders) {
      for (const [phase, per, title] of kinds) {
        const values = runsOf(results, variant.id)
          .filter((r) => r.contender === c.id && r.phases[phase])
          .map((r) => r.phases[phase]!.metrics["writes"]! / r.phases[phase]!.metrics[per]!);
        if (!values.length) continue;
        writes.push({
          panel: title,
          contender: label(c.id),
          variant: variant.label,
          writes: values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!,
        });
      }
    }
  }
  if (writes.length) {
    await write(
      "writes",
      await toSvg(groupedBarChart({
        values: writes,
        x: "contender",
        y: "writes",
        group: "variant",
        column: "panel",
        title: "API writes per object, by CRD variant (Events not counted)",
        yTitle: "writes per object",
      })),
    );
  }
  return paths;
}
