/**
 * The liveness endpoint (`--liveness http://0.0.0.0:8080/healthz`): answers with the results of
 * the probe handlers as JSON (reused for 10 seconds), and fails (503) when the operator is not
 * healthy — some watch stream has been silent (no events, no bookmarks, no successful reconnect)
 * for too long, which means it is stuck in a way its own watchdog could not repair.
 *
 * Also the metrics endpoint (`--metrics http://0.0.0.0:9090/metrics`), on a server of its own or
 * on the liveness server when both URLs name the same host and port.
 *
 * Both are served by `serveHttp` with {@link PROBE_HTTP_LIMITS}: their requests are GETs, so
 * bodies and headers are capped small, and slow or idle clients are cut off.
 * @module
 */

import type { KubeClient } from "../../client/client.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { IndexView, Memo } from "../../intents/contexts.ts";
import type { ActivityHandler } from "../../intents/handlers.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { runActivity } from "../runners/activities.ts";
import { type HttpServerLimits, serveHttp } from "../../util/http_server.ts";

/**
 * The limits of the liveness and metrics servers: probes and scrapes are small GETs from a few
 * clients (the kubelet, Prometheus), so bodies, headers and connections are capped small.
 */
export const PROBE_HTTP_LIMITS: Readonly<Required<HttpServerLimits>> = Object.freeze({
  maxConnections: 32,
  maxHeaderBytes: 64 * 1024,
  maxBodyBytes: 16 * 1024,
  maxBufferedBytes: 2 << 20,
  headerTimeout: 10,
  bodyTimeout: 10,
  idleTimeout: 90,
  writeTimeout: 30,
});

/** What the liveness endpoint needs. */
export interface LivenessOptions {
  /** Where to listen, e.g. `http://0.0.0.0:8080/healthz` (only the path is served). */
  readonly url: string;
  /** Probe handlers. */
  readonly handlers: readonly ActivityHandler[];
  /** Operator memo. */
  readonly memo: Memo;
  /** Settings. */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** Describes unhealthy parts (e.g. stale streams), or returns undefined when healthy. */
  readonly problems: () => string | undefined;
  /** Stops the server. */
  readonly signal: AbortSignal;
  /** The operator's indices, passed to probe handlers. */
  readonly indices?: Readonly<Record<string, IndexView>> | undefined;
  /** The operator's client, passed to probe handlers. */
  readonly client?: KubeClient | undefined;
  /**
   * How long (seconds) the probe handlers' results are reused for further requests, as in Kopf:
   * liveness checks may come often, and probes may be costly. Failures are not reused.
   * @default 10
   */
  readonly maxAge?: number;
  /** Further paths served by the same server (e.g. the metrics endpoint on the same port). */
  readonly routes?: Readonly<Record<string, () => Promise<Response>>>;
  /** Connection, size and time limits. @default PROBE_HTTP_LIMITS */
  readonly limits?: HttpServerLimits;
}

/** A running liveness endpoint. */
export interface LivenessServer {
  /** The port actually bound (useful with port 0). */
  readonly port: number;
  /** Resolves when the server has shut down. */
  readonly finished: Promise<void>;
}

/**
 * Starts the liveness endpoint.
 * @param options URL, probe handlers, health check, signal.
 * @returns The bound port and a promise of shutdown.
 * @throws {TypeError} for a URL that is not `http://host:port/path`.
 */
export function serveLiveness(options: LivenessOptions): LivenessServer {
  const url = new URL(options.url);
  if (url.protocol !== "http:") {
    throw new TypeError(`The liveness URL must be http://host:port/path, got ${options.url}`);
  }
  const path = url.pathname || "/";
  const maxAgeMs = (options.maxAge ?? 10) * 1000;
  let cached: { at: number; results: Record<string, unknown> } | undefined;
  let probing: Promise<Record<string, unknown>> | undefined;
  // Concurrent requests share one run of the probe handlers.
  const probe = () =>
    probing ??= runActivity({
      handlers: options.handlers,
      activity: "probe",
      memo: options.memo,
      settings: options.settings,
      logger: options.logger,
      indices: options.indices,
      client: options.client,
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(10_000)]),
    }).then((results) => {
      cached = { at: performance.now(), results: Object.fromEntries(results) };
      return cached.results;
    }).finally(() => (probing = undefined));
  const server = serveHttp({
    hostname: url.hostname,
    port: Number(url.port || 80),
    signal: options.signal,
    ...PROBE_HTTP_LIMITS,
    ...options.limits,
  }, async (request) => {
    const requested = new URL(request.url).pathname;
    const route = options.routes?.[requested];
    if (route && requested !== path) return await route();
    if (requested !== path) return new Response("Not found\n", { status: 404 });
    const problems = options.problems();
    if (problems) {
      return Response.json({ error: problems }, { status: 503 });
    }
    try {
      const fresh = cached && performance.now() - cached.at < maxAgeMs;
      return Response.json(fresh ? cached!.results : await probe());
    } catch (error) {
      return Response.json({ error: String(error instanceof Error ? error.message : error) }, {
        status: 500,
      });
    }
  });
  return { port: server.port, finished: server.finished };
}

/** What the metrics endpoint needs. */
export interface MetricsEndpointOptions {
  /** Where to listen, e.g. `http://0.0.0.0:9090/metrics` (only the path is served). */
  readonly url: string;
  /** Renders the exposition. */
  readonly render: () => Promise<Response>;
  /** Stops the server. */
  readonly signal: AbortSignal;
  /** Connection, size and time limits. @default PROBE_HTTP_LIMITS */
  readonly limits?: HttpServerLimits;
}

/**
 * Parses an endpoint URL.
 * @param url The URL, e.g. `http://0.0.0.0:9090/metrics`.
 * @param what What it is for, for the error message.
 * @returns The URL.
 * @throws {TypeError} for anything but `http://host:port/path`.
 */
export function endpointUrl(url: string, what: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`The ${what} URL must be http://host:port/path, got ${url}`);
  }
  if (parsed.protocol !== "http:") {
    throw new TypeError(`The ${what} URL must be http://host:port/path, got ${url}`);
  }
  return parsed;
}

/**
 * Starts the metrics endpoint on a server of its own.
 * @param options URL, renderer, signal.
 * @returns The bound port and a promise of shutdown.
 * @throws {TypeError} for a URL that is not `http://host:port/path`.
 */
export function serveMetrics(options: MetricsEndpointOptions): LivenessServer {
  const url = endpointUrl(options.url, "metrics");
  const path = url.pathname || "/";
  const server = serveHttp({
    hostname: url.hostname,
    port: Number(url.port || 80),
    signal: options.signal,
    ...PROBE_HTTP_LIMITS,
    ...options.limits,
  }, async (request) => {
    if (new URL(request.url).pathname !== path) return new Response("Not found\n", { status: 404 });
    return await options.render();
  });
  return { port: server.port, finished: server.finished };
}
