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
import type { Part } from "./parts.ts";

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

/** What {@link serveEndpoints} needs. */
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
  /** Stops the servers: when the operator's terms are over, whatever ended them. */
  readonly signal: AbortSignal;
  /** The serving orchestrator, if any (none while standing by). */
  readonly current: () => Orchestrator | undefined;
  /** The current term's pause switch, if any. */
  readonly pause: () => OperatorPause | undefined;
  /**
   * What should run and does not (stale streams, a stopped webhook server, a fatal error being
   * handled), or undefined when healthy: the liveness endpoint answers 503 with it.
   */
  readonly problems: () => string | undefined;
}

/** The running liveness and metrics endpoints. */
export interface Endpoints {
  /** Resolves when the servers have shut down (after the signal) and the engine is closed. */
  stopped(): Promise<void>;
}

/**
 * Serves the liveness endpoint and the metrics; one server serves both when they share the host
 * and a fixed port. Both serve standbys too: else the kubelet restarts them, and a standby
 * reports its API requests and `leader_election_master_status`.
 * @param deps URLs, engine, probe handlers, what is served now, and the signal.
 * @returns What waits for the servers to stop.
 */
export function serveEndpoints(deps: EndpointsDeps): Endpoints {
  const { metricsUrl, engine } = deps.observation;
  engine?.attach({
    inventory: () => deps.current()?.inventory() ?? [],
    paused: () => deps.pause()?.paused ?? false,
    indices: () =>
      Object.fromEntries(
        Object.entries(deps.current()?.indices ?? {}).map(([name, index]) => [name, index.size]),
      ),
  });
  const render = engine && (async () => {
    const { text, contentType } = await engine.exposition();
    return new Response(text, { headers: { "Content-Type": contentType } });
  });
  const routes = render && metricsUrl && deps.liveness && sameServer(deps.liveness, metricsUrl)
    ? { [new URL(metricsUrl).pathname]: render }
    : undefined;
  const liveness = deps.liveness
    ? serveLiveness({
      url: deps.liveness,
      handlers: deps.probes,
      memo: deps.memo,
      settings: deps.settings,
      logger: deps.logger,
      problems: deps.problems,
      indices: deps.indices,
      client: deps.client,
      signal: deps.signal,
      ...(routes ? { routes } : {}),
    })
    : undefined;
  const metricsServer = render && metricsUrl && !routes
    ? serveMetrics({ url: metricsUrl, render, signal: deps.signal })
    : undefined;
  if (metricsUrl) {
    const url = new URL(metricsUrl);
    url.port = String(metricsServer?.port ?? liveness?.port ?? url.port);
    deps.logger.info(`Serving metrics at ${url.href}`);
  }
  return {
    stopped: async () => {
      await liveness?.finished;
      await metricsServer?.finished;
      engine?.close();
    },
  };
}

/**
 * The liveness and metrics endpoints as a part (`parts.ts`): serving at once, finished when the
 * servers have shut down after the part's stop signal and the engine is closed.
 * @param deps URLs, engine, probe handlers and what is served now (the signal is the part's).
 * @returns The part, in the `endpoints` stop group.
 */
export function endpointsPart(deps: Omit<EndpointsDeps, "signal">): Part {
  return {
    name: "the liveness and metrics endpoints",
    group: "endpoints",
    start: (signal) => ({
      ready: Promise.resolve(),
      finished: serveEndpoints({ ...deps, signal }).stopped(),
    }),
  };
}

/** Whether two endpoint URLs name the same host and (fixed) port, so one server serves both. */
function sameServer(a: string, b: string): boolean {
  const x = new URL(a);
  const y = new URL(b);
  return x.host === y.host && x.port !== "0" && x.port !== "" && x.pathname !== y.pathname;
}
