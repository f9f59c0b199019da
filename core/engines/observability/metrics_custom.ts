/**
 * Operator authors' own metrics: counters, gauges and histograms in one process-wide registry,
 * served on every operator's metrics endpoint after the operator's own families.
 *
 * Declaring the same metric again (same name, kind and labels) returns the first one, so that
 * handler files can be imported again (the testing runner does) without errors.
 *
 * Kept here in a few lines rather than in `prom-client`: handler files declare their metrics
 * when they are imported, and loading `prom-client` (a CommonJS package, with Node's module
 * loader behind it) costs every operator about 10 MiB of memory, metrics endpoint or not. The
 * operator's own families (`metrics.ts`) still use `prom-client`, loaded only when served.
 * @module
 */

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

/** One declared metric: its series by label values, and how to write them out. */
interface Family {
  readonly kind: Kind;
  readonly labels: string;
  readonly metric: CounterMetric | GaugeMetric | HistogramMetric;
  /** The family in the text format (version 0.0.4), ending with a newline. */
  render(): string;
}

// On the global object, so that two copies of the library in one process share one registry.
const KEY = Symbol.for("kopf.metrics.authors");
type Holder = { [KEY]?: Map<string, Family> };

function declared(): Map<string, Family> {
  return (globalThis as Holder)[KEY] ??= new Map();
}

/**
 * The authors' metrics in the Prometheus text format (version 0.0.4), in declaration order.
 * @returns The families, or an empty string when none is declared.
 */
export function authorExposition(): string {
  return [...declared().values()].map((family) => family.render()).join("\n");
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function declare<M extends CounterMetric | GaugeMetric | HistogramMetric>(
  kind: Kind,
  options: MetricOptions,
  make: (labelNames: readonly string[]) => { metric: M; render: () => string },
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
  const families = declared();
  const labels = labelNames.join(",");
  const earlier = families.get(options.name);
  if (earlier) {
    if (earlier.kind === kind && earlier.labels === labels) return earlier.metric as M;
    throw new TypeError(
      `Metric '${options.name}' is already declared as a ${earlier.kind} with labels [${earlier.labels}]; use another name`,
    );
  }
  const { metric, render } = make(labelNames);
  families.set(options.name, { kind, labels, metric, render });
  return metric;
}

/** Label values as the series' key and as text (`{a="x",b="y"}`), checked against the names. */
function series(
  name: string,
  labelNames: readonly string[],
  labels: MetricLabels | undefined,
): string {
  const given = labels ?? {};
  for (const key of Object.keys(given)) {
    if (!labelNames.includes(key)) {
      throw new TypeError(`Metric '${name}' has no label '${key}' (declared: [${labelNames}])`);
    }
  }
  const parts = labelNames.filter((l) => given[l] !== undefined).map((l) =>
    `${l}="${String(given[l]).replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`
  );
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** A number as the text format writes it. */
function num(value: number): string {
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return Number.isNaN(value) ? "NaN" : String(value);
}

function header(options: MetricOptions, kind: Kind): string {
  const help = options.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
  return `# HELP ${options.name} ${help}\n# TYPE ${options.name} ${kind}\n`;
}

/** Counters and gauges: one value per series (a label-less one shows 0 before any change). */
function scalar(options: MetricOptions, kind: "counter" | "gauge", labelNames: readonly string[]) {
  const values = new Map<string, number>();
  if (labelNames.length === 0) values.set("", 0);
  const add = (value: number, labels: MetricLabels | undefined) => {
    const key = series(options.name, labelNames, labels);
    values.set(key, (values.get(key) ?? 0) + value);
  };
  const set = (value: number, labels: MetricLabels | undefined) =>
    values.set(series(options.name, labelNames, labels), value);
  const render = () => {
    let text = header(options, kind);
    for (const [key, value] of values) text += `${options.name}${key} ${num(value)}\n`;
    return text;
  };
  return { add, set, render };
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
    const { add, render } = scalar(options, "counter", labelNames);
    const inc = (value = 1, labels?: MetricLabels) => {
      if (value < 0) throw new TypeError(`Counter '${options.name}' cannot decrease`);
      add(value, labels);
    };
    return { metric: { inc }, render };
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
    const { add, set, render } = scalar(options, "gauge", labelNames);
    return {
      metric: {
        set: (value, labels) => void set(value, labels),
        inc: (value = 1, labels) => add(value, labels),
        dec: (value = 1, labels) => add(-value, labels),
      },
      render,
    };
  });
}

/** The default buckets (seconds) of authors' histograms: 5 ms to 1 minute. */
const HISTOGRAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

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
    const bounds = [...(options.buckets ?? HISTOGRAM_BUCKETS)].sort((a, b) => a - b);
    const all = new Map<string, { counts: number[]; sum: number; count: number }>();
    const observe = (value: number, labels?: MetricLabels) => {
      const key = series(options.name, labelNames, labels);
      let data = all.get(key);
      if (!data) all.set(key, data = { counts: bounds.map(() => 0), sum: 0, count: 0 });
      for (let i = 0; i < bounds.length; i++) if (value <= bounds[i]!) data.counts[i]!++;
      data.sum += value;
      data.count++;
    };
    const render = () => {
      let text = header(options, "histogram");
      for (const [key, data] of all) {
        const inner = key ? key.slice(1, -1) + "," : "";
        bounds.forEach((bound, i) => {
          text += `${options.name}_bucket{${inner}le="${num(bound)}"} ${data.counts[i]}\n`;
        });
        text += `${options.name}_bucket{${inner}le="+Inf"} ${data.count}\n`;
        text += `${options.name}_sum${key} ${num(data.sum)}\n`;
        text += `${options.name}_count${key} ${data.count}\n`;
      }
      return text;
    };
    const startTimer = (labels?: MetricLabels) => {
      const began = performance.now();
      return () => {
        const seconds = (performance.now() - began) / 1000;
        observe(seconds, labels);
        return seconds;
      };
    };
    return { metric: { observe, startTimer }, render };
  });
}
