/**
 * Operator authors' own Prometheus metrics: `metrics.counter()`, `metrics.gauge()`,
 * `metrics.histogram()`. They are served on the operator's metrics endpoint
 * (`kopf run --metrics URL`) after the framework's own families; see docs/observability.md.
 * @module
 */

import {
  counter,
  type CounterMetric,
  gauge,
  type GaugeMetric,
  histogram,
  type HistogramMetric,
  type HistogramOptions,
  type MetricOptions,
} from "../engines/observability/metrics_custom.ts";

/** The declarations of authors' metrics. */
export interface Metrics {
  /** Declares a counter (see {@link counter}). */
  counter(options: MetricOptions): CounterMetric;
  /** Declares a gauge (see {@link gauge}). */
  gauge(options: MetricOptions): GaugeMetric;
  /** Declares a histogram (see {@link histogram}). */
  histogram(options: HistogramOptions): HistogramMetric;
}

/**
 * Declares metrics of the operator's own, served with the framework's on the metrics endpoint.
 * Declaring the same metric again (same name, kind and labels) returns the first one.
 *
 * @example Counting what handlers did
 * ```ts
 * import { metrics, on } from "@kopf/ts";
 * const backups = metrics.counter({
 *   name: "myop_backups_total",
 *   help: "Backups taken, by result.",
 *   labelNames: ["result"],
 * });
 * on.create("kopfexamples", () => {
 *   backups.inc(1, { result: "ok" });
 * });
 * ```
 */
export const metrics: Metrics = { counter, gauge, histogram };
