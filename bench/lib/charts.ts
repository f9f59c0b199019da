/**
 * Charts as SVG, rendered headless with Vega-Lite (compiled to Vega, rendered without a
 * browser or canvas: text is measured by estimate). Reusable by any long run in bench/ (the
 * benchmark, soaks): give it rows of plain data, get an SVG string.
 *
 *   import { lineChart, toSvg } from "./lib/charts.ts";
 *   const svg = await toSvg(lineChart({ values, x: "s", y: "MiB", color: "who", title: "RSS" }));
 * @module
 */
import * as vega from "npm:vega@6.4.0";
import * as vegaLite from "npm:vega-lite@6.5.0";

/** A Vega-Lite specification (kept loose: the library validates it). */
export type Spec = Record<string, unknown>;

/** One row of data. */
export type Row = Record<string, string | number | null>;

/** Renders a Vega-Lite specification to an SVG document. */
export async function toSvg(spec: Spec): Promise<string> {
  const compiled = vegaLite.compile({
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    background: "white",
    config: { font: "sans-serif", view: { stroke: "#ddd" }, axis: { labelFontSize: 11 } },
    ...spec,
  } as vegaLite.TopLevelSpec);
  const view = new vega.View(vega.parse(compiled.spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Options of {@link lineChart}. */
export interface LineChartOptions {
  readonly values: readonly Row[];
  readonly x: string;
  readonly y: string;
  /** The field that tells the lines apart. */
  readonly color: string;
  readonly title: string;
  readonly xTitle?: string;
  readonly yTitle?: string;
  /** A field to split into small charts side by side. */
  readonly column?: string;
  readonly yScale?: "linear" | "log";
  readonly width?: number;
  readonly height?: number;
}

/** Lines of `y` over `x`, one per `color`, optionally one small chart per `column`. */
export function lineChart(o: LineChartOptions): Spec {
  const encoding = {
    x: { field: o.x, type: "quantitative", title: o.xTitle ?? o.x },
    y: {
      field: o.y,
      type: "quantitative",
      title: o.yTitle ?? o.y,
      scale: { type: o.yScale ?? "linear" },
    },
    color: {
      field: o.color,
      type: "nominal",
      title: null,
      legend: { orient: "bottom", labelLimit: 0, columns: 4 },
    },
  };
  const unit = {
    width: o.width ?? 320,
    height: o.height ?? 220,
    mark: { type: "line", strokeWidth: 1.5, interpolate: "monotone" },
    encoding,
  };
  return o.column
    ? {
      title: o.title,
      data: { values: o.values },
      facet: {
        column: {
          field: o.column,
          type: "nominal",
          title: null,
          sort: appearance(o.values, o.column),
        },
      },
      spec: unit,
      resolve: { scale: { x: "independent", y: "independent" } },
    }
    : { title: o.title, data: { values: o.values }, ...unit };
}

/** Options of {@link groupedBarChart}. */
export interface BarChartOptions {
  readonly values: readonly Row[];
  /** The categories along the axis. */
  readonly x: string;
  readonly y: string;
  /** Bars side by side within a category. */
  readonly group: string;
  readonly title: string;
  readonly yTitle?: string;
  /** A field to split into small charts side by side. */
  readonly column?: string;
  readonly width?: number;
  readonly height?: number;
}

/** Bars of `y` per `x`, grouped by `group`, with the value printed above each bar. */
export function groupedBarChart(o: BarChartOptions): Spec {
  const unit = {
    width: o.width ?? 200,
    height: o.height ?? 200,
    encoding: {
      x: {
        field: o.x,
        type: "nominal",
        title: null,
        sort: appearance(o.values, o.x),
        axis: { labelAngle: -30, labelLimit: 0 },
      },
      xOffset: { field: o.group },
      y: { field: o.y, type: "quantitative", title: o.yTitle ?? o.y },
      color: {
        field: o.group,
        type: "nominal",
        title: null,
        legend: { orient: "bottom", labelLimit: 0 },
      },
    },
    layer: [
      { mark: "bar" },
      {
        mark: { type: "text", dy: -5, fontSize: 10 },
        encoding: { text: { field: o.y, type: "quantitative", format: ".2~f" } },
      },
    ],
  };
  return o.column
    ? {
      title: o.title,
      data: { values: o.values },
      facet: {
        column: {
          field: o.column,
          type: "nominal",
          title: null,
          sort: appearance(o.values, o.column),
        },
      },
      spec: unit,
    }
    : { title: o.title, data: { values: o.values }, ...unit };
}

/** The distinct values of a field in order of appearance (small charts in the data's order). */
function appearance(values: readonly Row[], field: string): Array<string | number | null> {
  return [...new Set(values.map((row) => row[field] ?? null))];
}

/** Percentiles 0, 1, …, 100 of `values` (nearest rank): a distribution in 101 points. */
export function percentileCurve(values: readonly number[]): Array<[number, number]> {
  if (!values.length) return [];
  const sorted = [...values].sort((a, b) => a - b);
  return Array.from({ length: 101 }, (_, p) => {
    const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
    return [p, sorted[Math.min(sorted.length - 1, rank - 1)]!];
  });
}

/** At most `points` points of a series: the largest `y` of each of equal slices of it. */
export function downsample(
  series: ReadonlyArray<readonly [number, number]>,
  points: number,
): Array<[number, number]> {
  if (series.length <= points) return series.map(([x, y]) => [x, y]);
  const out: Array<[number, number]> = [];
  const step = series.length / points;
  for (let i = 0; i < points; i++) {
    const slice = series.slice(Math.floor(i * step), Math.floor((i + 1) * step));
    let best = slice[0]!;
    for (const point of slice) if (point[1] > best[1]) best = point;
    out.push([best[0], best[1]]);
  }
  return out;
}
