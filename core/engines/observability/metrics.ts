/**
 * The metrics engine: Prometheus metric families of one operator, fed by the observation points
 * (it implements {@link OperatorObserver}), by the client's request counters, and at scrape time
 * by what the operator holds (objects, workers, daemons, indices, the pause). The exposition is
 * written by `prom-client`; this file only names, labels and fills the families.
 *
 * Families are named after controller-runtime and client-go where a counterpart exists, so that
 * dashboards and alerts made for Go operators work; the rest are `kopf_*`. The full list with
 * meanings is in docs/observability.md. Labels are bounded: resources, handler ids, outcomes,
 * reasons, verbs and codes — never object names or uids.
 * @module
 */

import client from "prom-client";
import type { Outcome } from "../../actions/execution.ts";
import type { RequestCounters, RequestKey, Verb } from "../../client/counters.ts";
import { authorExposition } from "./metrics_custom.ts";
import {
  type CycleInfo,
  type CycleSummary,
  type HandlerInfo,
  type OperatorObserver,
  outcomeLabel,
} from "./observers.ts";

/** Buckets (seconds) of the duration histograms: 5 ms to 1 minute. */
export const DURATION_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
];

/** What the operator holds for one resource, read at scrape time. */
export interface ResourceInventory {
  /** The resource, `plural.version.group`. */
  readonly resource: string;
  /** Watch streams running (one per namespace, or one cluster-wide). */
  readonly streams: number;
  /** Objects remembered. */
  readonly objects: number;
  /** Per-object workers running now. */
  readonly workers: number;
  /** Objects with an event waiting for their worker. */
  readonly pending: number;
  /** Daemons running or stopping. */
  readonly daemons: number;
  /** Timers running or stopping. */
  readonly timers: number;
}

/** Where the scrape-time gauges come from; all optional. */
export interface MetricsSources {
  /** Per-resource holdings. */
  readonly inventory?: () => readonly ResourceInventory[];
  /** Whether peering has paused the operator now. */
  readonly paused?: () => boolean;
  /** Index sizes by index name (number of keys). */
  readonly indices?: () => Readonly<Record<string, number>>;
}

/** The HTTP method of a Kubernetes verb (client-go's `method` label). */
const METHODS: Readonly<Record<Verb, string>> = {
  get: "GET",
  list: "GET",
  watch: "GET",
  discovery: "GET",
  create: "POST",
  update: "PUT",
  patch: "PATCH",
  delete: "DELETE",
  deletecollection: "DELETE",
  other: "OTHER",
};

/** Process metrics taken from prom-client's default collectors (the rest are Node-specific). */
const PROCESS_METRICS = [
  "process_cpu_user_seconds_total",
  "process_cpu_system_seconds_total",
  "process_cpu_seconds_total",
  "process_start_time_seconds",
  "process_resident_memory_bytes",
  "process_virtual_memory_bytes",
  "process_heap_bytes",
  "process_open_fds",
  "process_max_fds",
  "nodejs_eventloop_lag_seconds",
  "nodejs_heap_size_total_bytes",
  "nodejs_heap_size_used_bytes",
  "nodejs_external_memory_bytes",
];

/** Names of {@link OperatorObserver.state} values that have a controller-runtime counterpart. */
const STATE_FAMILIES: Readonly<Record<string, { name: string; help: string }>> = {
  leader: {
    name: "leader_election_master_status",
    help: "Whether this replica is the leader (1) or not (0), per lease name.",
  },
};

/** Options of {@link MetricsEngine}. */
export interface MetricsEngineOptions {
  /** Buckets (seconds) of the duration histograms. @default DURATION_BUCKETS */
  readonly buckets?: readonly number[];
  /** Include process metrics (CPU, memory, file descriptors, event loop lag). @default true */
  readonly process?: boolean;
}

/** The metric families of one operator; an {@link OperatorObserver} that fills them. */
export class MetricsEngine implements OperatorObserver {
  /** The operator's own families (the authors' metrics are in a process-wide registry). */
  readonly registry: client.Registry = new client.Registry();
  #sources: MetricsSources = {};
  #states = new Map<string, client.Gauge>();
  #unlisten: (() => void)[] = [];

  readonly #reconciles: client.Counter<"controller" | "result">;
  readonly #reconcileErrors: client.Counter<"controller">;
  readonly #reconcileTime: client.Histogram<"controller">;
  readonly #activeWorkers: client.Gauge<"controller">;
  readonly #depth: client.Gauge<"name">;
  readonly #adds: client.Counter<"name">;
  readonly #queueDuration: client.Histogram<"name">;
  readonly #retries: client.Counter<"name">;
  readonly #requests: client.Counter<"code" | "method" | "host" | "verb" | "resource">;
  readonly #requestDuration: client.Histogram<"method" | "host" | "verb" | "resource">;
  readonly #handlerRuns: client.Counter<"resource" | "handler" | "kind" | "outcome">;
  readonly #handlerRetries: client.Counter<"resource" | "handler" | "kind">;
  readonly #handlerDuration: client.Histogram<"resource" | "handler" | "kind">;
  readonly #objects: client.Gauge<"resource">;
  readonly #streams: client.Gauge<"resource">;
  readonly #daemons: client.Gauge<"resource">;
  readonly #timers: client.Gauge<"resource">;
  readonly #watchConnections: client.Counter<"resource" | "reason">;
  readonly #watchEvents: client.Counter<"resource" | "type">;
  readonly #eventsPosted: client.Counter<"type">;
  readonly #eventsFolded: client.Counter;
  readonly #eventsDropped: client.Counter;
  readonly #paused: client.Gauge;
  readonly #indexSize: client.Gauge<"index">;

  /**
   * Creates the families in a registry of their own.
   * @param options Buckets and whether to include process metrics.
   */
  constructor(options: MetricsEngineOptions = {}) {
    const registers = [this.registry];
    const buckets = [...(options.buckets ?? DURATION_BUCKETS)];
    const counter = <L extends string>(name: string, help: string, labelNames: L[]) =>
      new client.Counter<L>({ name, help, labelNames, registers });
    const gauge = <L extends string>(name: string, help: string, labelNames: L[]) =>
      new client.Gauge<L>({ name, help, labelNames, registers });
    const histogram = <L extends string>(name: string, help: string, labelNames: L[]) =>
      new client.Histogram<L>({ name, help, labelNames, buckets, registers });

    this.#reconciles = counter(
      "controller_runtime_reconcile_total",
      "Processing cycles per resource, by result (success, error, requeue, requeue_after).",
      ["controller", "result"],
    );
    this.#reconcileErrors = counter(
      "controller_runtime_reconcile_errors_total",
      "Processing cycles in which a handler failed or the cycle itself failed.",
      ["controller"],
    );
    this.#reconcileTime = histogram(
      "controller_runtime_reconcile_time_seconds",
      "Duration of processing cycles (handlers and the cycle's patch).",
      ["controller"],
    );
    this.#activeWorkers = gauge(
      "controller_runtime_active_workers",
      "Per-object workers running now.",
      ["controller"],
    );
    this.#depth = gauge(
      "workqueue_depth",
      "Objects with an event waiting for their worker.",
      ["name"],
    );
    this.#adds = counter("workqueue_adds_total", "Events queued for objects.", ["name"]);
    this.#queueDuration = histogram(
      "workqueue_queue_duration_seconds",
      "Time an event waited in the queue before its object's cycle started.",
      ["name"],
    );
    this.#retries = counter(
      "workqueue_retries_total",
      "Objects due again without a new event: handler retries and delays, unexpected errors.",
      ["name"],
    );
    this.#requests = counter(
      "rest_client_requests_total",
      "API requests by status code (<error> when no answer came), HTTP method, host, " +
        "Kubernetes verb and resource.",
      ["code", "method", "host", "verb", "resource"],
    );
    this.#requestDuration = histogram(
      "rest_client_request_duration_seconds",
      "API request latency until the answer's headers (for watches: until the stream opened).",
      ["method", "host", "verb", "resource"],
    );
    this.#handlerRuns = counter(
      "kopf_handler_runs_total",
      "Handler runs by resource, handler id, kind and outcome.",
      ["resource", "handler", "kind", "outcome"],
    );
    this.#handlerRetries = counter(
      "kopf_handler_retries_total",
      "Handler runs that were retries of an earlier failed attempt.",
      ["resource", "handler", "kind"],
    );
    this.#handlerDuration = histogram(
      "kopf_handler_duration_seconds",
      "Duration of handler runs (daemons: of the whole run).",
      ["resource", "handler", "kind"],
    );
    this.#objects = gauge("kopf_objects", "Objects the operator remembers.", ["resource"]);
    this.#streams = gauge("kopf_watch_streams", "Watch streams running.", ["resource"]);
    this.#daemons = gauge("kopf_daemons_running", "Daemons running or stopping.", ["resource"]);
    this.#timers = gauge("kopf_timers_running", "Timers running or stopping.", ["resource"]);
    this.#watchConnections = counter(
      "kopf_watch_connections_total",
      "Watch requests opened, by reason (initial, end, gone, stall, error).",
      ["resource", "reason"],
    );
    this.#watchEvents = counter(
      "kopf_watch_events_total",
      "Watch events received (LISTED for objects reported by a listing).",
      ["resource", "type"],
    );
    this.#eventsPosted = counter(
      "kopf_k8s_events_posted_total",
      "Kubernetes Events posted, by type.",
      ["type"],
    );
    this.#eventsFolded = new client.Counter({
      name: "kopf_k8s_events_aggregated_total",
      help: "Log messages folded into an Event posted for an identical message.",
      registers,
    });
    this.#eventsDropped = new client.Counter({
      name: "kopf_k8s_events_dropped_total",
      help: "Log messages not posted as Events (the per-object rate limit).",
      registers,
    });
    this.#paused = new client.Gauge({
      name: "kopf_paused",
      help: "Whether peering has paused this operator (1) or not (0).",
      registers,
    });
    this.#indexSize = gauge("kopf_index_keys", "Keys in each in-memory index.", ["index"]);
    if (options.process ?? true) this.#addProcessMetrics();
  }

  #addProcessMetrics(): void {
    const scratch = new client.Registry();
    client.collectDefaultMetrics({ register: scratch });
    for (const name of PROCESS_METRICS) {
      const metric = scratch.getSingleMetric(name);
      if (metric) this.registry.registerMetric(metric);
    }
  }

  /**
   * Counts the client's requests from now on (and those made before, without durations).
   * @param counters The client's request counters.
   * @param host The API server's host (client-go's `host` label).
   */
  attachClient(counters: RequestCounters, host: string): void {
    for (const entry of counters.entries()) {
      this.#requests.inc(this.#requestLabels(entry, host), entry.count);
    }
    this.#unlisten.push(counters.listen((key, seconds) => {
      this.#requests.inc(this.#requestLabels(key, host));
      this.#requestDuration.observe({
        method: METHODS[key.verb],
        host,
        verb: key.verb,
        resource: key.resource,
      }, seconds);
    }));
  }

  #requestLabels(key: RequestKey, host: string) {
    return {
      code: key.code ? String(key.code) : "<error>",
      method: METHODS[key.verb],
      host,
      verb: key.verb,
      resource: key.resource,
    };
  }

  /**
   * Sets where the scrape-time gauges come from (replacing earlier sources).
   * @param sources Inventory, pause and index sizes.
   */
  attach(sources: MetricsSources): void {
    this.#sources = sources;
  }

  /**
   * The exposition of the operator's families and the authors' metrics.
   * @returns The Prometheus text format (version 0.0.4) and its content type.
   */
  async exposition(): Promise<{ text: string; contentType: string }> {
    this.#refresh();
    const own = await this.registry.metrics();
    const authors = authorExposition();
    return {
      text: authors ? `${own.trimEnd()}\n\n${authors}` : own,
      contentType: this.registry.contentType,
    };
  }

  /** Stops listening to the client's counters. */
  close(): void {
    for (const unlisten of this.#unlisten.splice(0)) unlisten();
  }

  #refresh(): void {
    const inventory = this.#sources.inventory?.() ?? [];
    for (const gauge of [this.#objects, this.#streams, this.#daemons, this.#timers]) gauge.reset();
    this.#activeWorkers.reset();
    this.#depth.reset();
    for (const held of inventory) {
      const resource = held.resource;
      this.#objects.set({ resource }, held.objects);
      this.#streams.set({ resource }, held.streams);
      this.#daemons.set({ resource }, held.daemons);
      this.#timers.set({ resource }, held.timers);
      this.#activeWorkers.set({ controller: resource }, held.workers);
      this.#depth.set({ name: resource }, held.pending);
    }
    this.#paused.set(this.#sources.paused?.() ? 1 : 0);
    this.#indexSize.reset();
    for (const [index, size] of Object.entries(this.#sources.indices?.() ?? {})) {
      this.#indexSize.set({ index }, size);
    }
  }

  // --- OperatorObserver ---

  /** Times a cycle and counts it by result. */
  async cycle<R extends CycleSummary>(info: CycleInfo, run: () => Promise<R>): Promise<R> {
    const controller = info.resource;
    const began = performance.now();
    let result: R;
    try {
      result = await run();
    } catch (error) {
      this.#reconcileTime.observe({ controller }, (performance.now() - began) / 1000);
      this.#reconciles.inc({ controller, result: "error" });
      this.#reconcileErrors.inc({ controller });
      throw error;
    }
    this.#reconcileTime.observe({ controller }, (performance.now() - began) / 1000);
    const label = result.failed
      ? "error"
      : result.delay === undefined
      ? "success"
      : result.delay > 0
      ? "requeue_after"
      : "requeue";
    this.#reconciles.inc({ controller, result: label });
    if (result.failed) this.#reconcileErrors.inc({ controller });
    return result;
  }

  /** Times a handler run and counts it by outcome. */
  async handler(info: HandlerInfo, run: () => Promise<Outcome>): Promise<Outcome> {
    const began = performance.now();
    const outcome = await run();
    const labels = { resource: info.resource, handler: info.handler, kind: info.kind };
    this.#handlerDuration.observe(labels, (performance.now() - began) / 1000);
    this.#handlerRuns.inc({ ...labels, outcome: outcomeLabel(outcome) });
    if (info.retry > 0) this.#handlerRetries.inc(labels);
    return outcome;
  }

  /** Counts a queued event. */
  queued(queue: string): void {
    this.#adds.inc({ name: queue });
  }

  /** Records how long an event waited. */
  dequeued(queue: string, seconds: number): void {
    this.#queueDuration.observe({ name: queue }, seconds);
  }

  /** Counts an object due again without a new event. */
  retried(queue: string): void {
    this.#retries.inc({ name: queue });
  }

  /** Counts a watch event. */
  watchEvent(resource: string, type: string): void {
    this.#watchEvents.inc({ resource, type });
  }

  /** Counts an opened watch request. */
  watchConnected(resource: string, reason: string): void {
    this.#watchConnections.inc({ resource, reason });
  }

  /** Counts a posted Event and the messages folded into it. */
  eventPosted(type: string, count: number): void {
    this.#eventsPosted.inc({ type });
    if (count > 1) this.#eventsFolded.inc(count - 1);
  }

  /** Counts messages not posted. */
  eventsDropped(count: number): void {
    this.#eventsDropped.inc(count);
  }

  /** Sets a state gauge (`leader` → `leader_election_master_status`, else `kopf_<name>`). */
  state(name: string, value: number, labels: Readonly<Record<string, string>> = {}): void {
    let gauge = this.#states.get(name);
    if (!gauge) {
      if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name)) {
        throw new TypeError(
          `A state name must be a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*), got '${name}'`,
        );
      }
      const known = STATE_FAMILIES[name];
      gauge = new client.Gauge({
        name: known?.name ?? `kopf_${name}`,
        help: known?.help ?? `Operator state '${name}'.`,
        labelNames: Object.keys(labels),
        registers: [this.registry],
      });
      this.#states.set(name, gauge);
    }
    gauge.set(labels, value);
  }
}
