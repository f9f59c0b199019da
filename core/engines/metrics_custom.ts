/**
 * Operator authors' own metrics: counters, gauges and histograms in one process-wide registry,
 * served on every operator's metrics endpoint after the operator's own families.
 *
 * Declaring the same metric again (same name, kind and labels) returns the first one, so that
 * handler files can be imported again (the testing runner does) without errors.
 * @module
 */

import client from "prom-client";

/** Label values of one series: every declared label name, each a string or number. */
export type MetricLabels = Readonly<Record<string, string | number>>;

/** What every author metric is declared with. */
export interface MetricOptions {
  /** Prometheus name: letters, digits, `_` and `:`, not starting with a digit. */
  readonly name: string;
  /** One line saying what it counts or measures. */
  readonly help: string;
  /** Label names; keep their values bounded (never object names or uids). @default [] */
  readonly labelNames?: readonly string[];
}

/** Options of a histogram. */
export interface HistogramOptions extends MetricOptions {
  /** Upper bounds of the buckets. @default 5 ms … 60 s */
  readonly buckets?: readonly number[];
}

/** A monotonically increasing count. */
export interface CounterMetric {
  /**
   * Adds to the count.
   * @param value How much (not negative). @default 1
   * @param labels The series.
   */
  inc(value?: number, labels?: MetricLabels): void;
}

/** A value that goes up and down. */
export interface GaugeMetric {
  /**
   * Sets the value.
   * @param value The new value.
   * @param labels The series.
   */
  set(value: number, labels?: MetricLabels): void;
  /**
   * Adds to the value.
   * @param value How much. @default 1
   * @param labels The series.
   */
  inc(value?: number, labels?: MetricLabels): void;
  /**
   * Subtracts from the value.
   * @param value How much. @default 1
   * @param labels The series.
   */
  dec(value?: number, labels?: MetricLabels): void;
}

/** A distribution of observed values (e.g. durations in seconds). */
export interface HistogramMetric {
  /**
   * Records one observation.
   * @param value The observed value.
   * @param labels The series.
   */
  observe(value: number, labels?: MetricLabels): void;
  /**
   * Starts timing; the returned function records the seconds elapsed and returns them.
   * @param labels The series.
   * @returns The stop function.
   */
  startTimer(labels?: MetricLabels): () => number;
}

type Kind = "counter" | "gauge" | "histogram";
interface Declared {
  readonly kind: Kind;
  readonly labels: string;
  readonly metric: CounterMetric | GaugeMetric | HistogramMetric;
}

// On the global object, so that two copies of the library in one process share one registry.
const KEY = Symbol.for("kopf.metrics.authors");
type Holder = { [KEY]?: { registry: client.Registry; declared: Map<string, Declared> } };

function shared(): { registry: client.Registry; declared: Map<string, Declared> } {
  return (globalThis as Holder)[KEY] ??= { registry: new client.Registry(), declared: new Map() };
}

/**
 * The process-wide registry of the authors' metrics (served by every metrics endpoint).
 * @returns The registry.
 */
export function authorRegistry(): client.Registry {
  return shared().registry;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function declare<M extends CounterMetric | GaugeMetric | HistogramMetric>(
  kind: Kind,
  options: MetricOptions,
  make: (labelNames: string[]) => M,
): M {
  const labelNames = [...(options.labelNames ?? [])];
  if (!NAME.test(options.name)) {
    throw new TypeError(
      `Metric name '${options.name}' is not a Prometheus name: use letters, digits, _ and :, not starting with a digit`,
    );
  }
  const badLabel = labelNames.find((l) => !LABEL.test(l) || l.startsWith("__"));
  if (badLabel !== undefined) {
    throw new TypeError(
      `Label name '${badLabel}' of metric '${options.name}' is not a Prometheus label name: use letters, digits and _, not starting with a digit or __`,
    );
  }
  const { declared } = shared();
  const labels = labelNames.join(",");
  const earlier = declared.get(options.name);
  if (earlier) {
    if (earlier.kind === kind && earlier.labels === labels) return earlier.metric as M;
    throw new TypeError(
      `Metric '${options.name}' is already declared as a ${earlier.kind} with labels [${earlier.labels}]; use another name`,
    );
  }
  const metric = make(labelNames);
  declared.set(options.name, { kind, labels, metric });
  return metric;
}

function plain(labels: MetricLabels | undefined): Record<string, string | number> {
  return { ...labels };
}

/**
 * Declares a counter.
 * @param options Name, help and label names.
 * @returns The counter.
 * @throws {TypeError} for a name or label name Prometheus does not accept, or a name already
 *   declared as another kind of metric or with other labels.
 * @example Counting what a handler did
 * ```ts
 * import { metrics } from "@kopf/ts";
 * const created = metrics.counter({
 *   name: "myop_children_created_total",
 *   help: "Child objects created by the operator.",
 *   labelNames: ["kind"],
 * });
 * created.inc(1, { kind: "Pod" });
 * ```
 */
export function counter(options: MetricOptions): CounterMetric {
  return declare("counter", options, (labelNames) => {
    const c = new client.Counter({
      name: options.name,
      help: options.help,
      labelNames,
      registers: [authorRegistry()],
    });
    return { inc: (value = 1, labels) => c.inc(plain(labels), value) };
  });
}

/**
 * Declares a gauge.
 * @param options Name, help and label names.
 * @returns The gauge.
 * @throws {TypeError} as for {@link counter}.
 * @example A value that goes up and down
 * ```ts
 * import { metrics } from "@kopf/ts";
 * const backlog = metrics.gauge({ name: "myop_backlog", help: "Jobs waiting." });
 * backlog.set(3);
 * backlog.dec();
 * ```
 */
export function gauge(options: MetricOptions): GaugeMetric {
  return declare("gauge", options, (labelNames) => {
    const g = new client.Gauge({
      name: options.name,
      help: options.help,
      labelNames,
      registers: [authorRegistry()],
    });
    return {
      set: (value, labels) => g.set(plain(labels), value),
      inc: (value = 1, labels) => g.inc(plain(labels), value),
      dec: (value = 1, labels) => g.dec(plain(labels), value),
    };
  });
}

/**
 * Declares a histogram.
 * @param options Name, help, label names and buckets.
 * @returns The histogram.
 * @throws {TypeError} as for {@link counter}.
 * @example Timing calls to an external system
 * ```ts
 * import { metrics } from "@kopf/ts";
 * const calls = metrics.histogram({
 *   name: "myop_backend_call_seconds",
 *   help: "Calls to the backend.",
 *   buckets: [0.1, 0.5, 1, 5],
 * });
 * const stop = calls.startTimer();
 * // … call the backend …
 * stop();
 * ```
 */
export function histogram(options: HistogramOptions): HistogramMetric {
  return declare("histogram", options, (labelNames) => {
    const h = new client.Histogram({
      name: options.name,
      help: options.help,
      labelNames,
      registers: [authorRegistry()],
      ...(options.buckets ? { buckets: [...options.buckets] } : {
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      }),
    });
    return {
      observe: (value, labels) => h.observe(plain(labels), value),
      startTimer: (labels) => h.startTimer(plain(labels)),
    };
  });
}
