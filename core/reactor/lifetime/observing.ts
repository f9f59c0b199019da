/**
 * How the operator can be observed: the metrics engine and tracing it reports to (set up only as
 * far as asked for), and the liveness and metrics endpoints, which serve standbys too.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import type { MetricsEngine } from "../../engines/observability/metrics.ts";
import { combineObservers, type OperatorObserver } from "../../engines/observability/observers.ts";
import type { OperatorPause } from "../../engines/coordination/peering.ts";
import { endpointUrl, serveLiveness, serveMetrics } from "../../engines/observability/probing.ts";
import type { IndexView, Memo } from "../../intents/contexts.ts";
import type { ActivityHandler } from "../../intents/handlers.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { mayTrace } from "../../util/tracing_presence.ts";
import type { Orchestrator } from "../causes/orchestration.ts";
import { aborted, type Part } from "../../util/parts.ts";

/** What the operator reports to. */
export interface Observation {
  /** Where to serve the metrics (`settings.metrics.endpoint`), or null for nowhere. */
  readonly metricsUrl: string | null;
  /** The given metrics engine, or one made to serve `metricsUrl`; else undefined. */
  readonly engine: MetricsEngine | undefined;
  /** The engine and/or tracing as one observer; undefined when there is neither. */
  readonly observer: OperatorObserver | undefined;
}

/**
 * Sets up observation only as far as asked for: without metrics and traces, none at all.
 * @param settings The operator's settings (`settings.metrics`).
 * @param given A metrics engine to collect into, if any (`OperatorOptions.metricsEngine`).
 * @param client The client, whose API requests the engine counts.
 * @returns The metrics URL, the engine and the observer.
 * @throws {TypeError} for a metrics URL that is not `http://host:port/path`.
 */
export async function startObservation(
  settings: OperatorSettings,
  given: MetricsEngine | undefined,
  client: KubeClient,
): Promise<Observation> {
  const metricsUrl = settings.metrics.endpoint;
  if (metricsUrl) endpointUrl(metricsUrl, "metrics");
  const engine = given ??
    (metricsUrl
      // Loaded only when served: prom-client costs every other operator ~10 MiB.
      ? new (await import("../../engines/observability/metrics.ts")).MetricsEngine({
        process: settings.metrics.process,
      })
      : undefined);
  engine?.attachClient(client.counters, new URL(client.http.connection.server).host);
  const observers: OperatorObserver[] = [];
  if (mayTrace()) {
    const { tracingEnabled, TracingObserver } = await import(
      "../../engines/observability/tracing.ts"
    );
    if (tracingEnabled()) observers.push(new TracingObserver());
  }
  if (engine) observers.push(engine);
  const observer = observers.length ? combineObservers(observers) : undefined;
  return { metricsUrl, engine, observer };
}

/** What {@link endpointParts} needs. */
export interface EndpointsDeps {
  /** The metrics URL and engine. */
  readonly observation: Observation;
  /** Where to serve the liveness endpoint, if anywhere. */
  readonly liveness: string | undefined;
  /** The probe handlers. */
  readonly probes: readonly ActivityHandler[];
  /** Operator memo, for the probe handlers. */
  readonly memo: Memo;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** The indices, for the probe handlers. */
  readonly indices: Readonly<Record<string, IndexView>>;
  /** The operator's client, for the probe handlers. */
  readonly client?: KubeClient | undefined;
  /** The serving orchestrator, if any (none while standing by). */
  readonly current: () => Orchestrator | undefined;
  /** The current term's pause switch, if any. */
  readonly pause: () => OperatorPause | undefined;
  /**
   * What should run and does not (stale streams, a stopped webhook server or endpoint, a fatal
   * error being handled), or undefined when healthy: the liveness endpoint answers 503 with it.
   */
  readonly problems: () => string | undefined;
}

/**
 * The liveness and metrics endpoints as parts (`core/util/parts.ts`), each server its own part so
 * that one which stops by itself is named (`"The metrics endpoint is not running: …"`): the
 * liveness endpoint (it serves the metrics too when both URLs name the same host and a fixed
 * port: one server, one part), the metrics endpoint on a server of its own, and the metrics
 * engine (fed by the term's orchestrator and the client's counters). Each server part is ready
 * once it listens (it throws at its start when it cannot bind) and finished once its server has
 * shut down. They serve standbys too: else the kubelet restarts them, and a standby reports its
 * API requests and `leader_election_master_status`.
 * @param deps URLs, engine, probe handlers and what is served now.
 * @returns The parts, in start order: the servers in the `endpoints` stop group, the engine in
 *   the `connection` group (it stops counting the connection's requests after the servers that
 *   render it stopped).
 */
export function endpointParts(deps: EndpointsDeps): Part[] {
  const { metricsUrl, engine } = deps.observation;
  const render = engine && (async () => {
    const { text, contentType } = await engine.exposition();
    return new Response(text, { headers: { "Content-Type": contentType } });
  });
  const served = render && metricsUrl ? { url: metricsUrl, render } : undefined;
  const shared = served && deps.liveness && sameServer(deps.liveness, served.url);
  const parts: Part[] = [];
  if (engine) parts.push(enginePart(engine, deps));
  if (deps.liveness) parts.push(livenessPart(deps, deps.liveness, shared ? served : undefined));
  if (served && !shared) parts.push(metricsPart(deps, served));
  return parts;
}

/** The metrics to serve: where, and how to render them. */
interface ServedMetrics {
  readonly url: string;
  readonly render: () => Promise<Response>;
}

/** The metrics engine as a part: fed from its start, closed at its stop. */
function enginePart(engine: MetricsEngine, deps: EndpointsDeps): Part {
  return {
    name: "the metrics engine",
    group: "connection",
    start: (signal) => {
      engine.attach({
        inventory: () => deps.current()?.inventory() ?? [],
        paused: () => deps.pause()?.paused ?? false,
        indices: () =>
          Object.fromEntries(
            Object.entries(deps.current()?.indices ?? {}).map(([name, i]) => [name, i.size]),
          ),
      });
      return { ready: Promise.resolve(), finished: aborted(signal).then(() => engine.close()) };
    },
  };
}

/** The liveness endpoint's server as a part; with `metrics`, it serves them on its port too. */
function livenessPart(deps: EndpointsDeps, url: string, metrics: ServedMetrics | undefined): Part {
  return {
    name: metrics ? "the liveness and metrics endpoints" : "the liveness endpoint",
    group: "endpoints",
    start: (signal) => {
      const server = serveLiveness({
        url,
        handlers: deps.probes,
        memo: deps.memo,
        settings: deps.settings,
        logger: deps.logger,
        problems: deps.problems,
        indices: deps.indices,
        client: deps.client,
        signal,
        ...(metrics ? { routes: { [new URL(metrics.url).pathname]: metrics.render } } : {}),
      });
      if (metrics) tellMetricsUrl(deps.logger, metrics.url, server.port);
      return { ready: Promise.resolve(), finished: server.finished };
    },
  };
}

/** The metrics endpoint's own server as a part. */
function metricsPart(deps: EndpointsDeps, metrics: ServedMetrics): Part {
  return {
    name: "the metrics endpoint",
    group: "endpoints",
    start: (signal) => {
      const server = serveMetrics({ url: metrics.url, render: metrics.render, signal });
      tellMetricsUrl(deps.logger, metrics.url, server.port);
      return { ready: Promise.resolve(), finished: server.finished };
    },
  };
}

/** Logs where the metrics are served, with the port actually bound (for port 0). */
function tellMetricsUrl(logger: Logger, metricsUrl: string, port: number): void {
  const url = new URL(metricsUrl);
  url.port = String(port);
  logger.info(`Serving metrics at ${url.href}`);
}

/** Whether two endpoint URLs name the same host and (fixed) port, so one server serves both. */
function sameServer(a: string, b: string): boolean {
  const x = new URL(a);
  const y = new URL(b);
  return x.host === y.host && x.port !== "0" && x.port !== "" && x.pathname !== y.pathname;
}
