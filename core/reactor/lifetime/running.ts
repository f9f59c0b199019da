/**
 * Running an operator: connect, check the cluster is reachable, start the Events poster and the
 * orchestration of watch streams, and stop everything in order when asked.
 *
 * Stop sequence: the stop signal aborts the watch streams and the handlers' signals; workers get
 * `settings.process.gracePeriod` seconds to finish their current cycle; queued Events are posted;
 * the term's other parts stop by their groups (`stopping.ts`); then the operator's own parts stop
 * (`parts.ts`): the liveness and metrics endpoints, then the connection; the cleanup handlers
 * run; then `operator()` resolves.
 *
 * The parts live beside: connecting and logging in (`connecting.ts`), metrics, tracing and the
 * liveness endpoint (`observing.ts`), leader election and sharding (`coordinating.ts`), one term
 * of service (`serving.ts`) and its stop sequence (`stopping.ts`).
 * @module
 */

import { Logger, type LogListener } from "../../actions/loggers.ts";
import type { Lifecycle } from "../../actions/lifecycles.ts";
import type { KubeClient } from "../../client/client.ts";
import { OperatorScope, withOperatorScope } from "../../client/current.ts";
import { runActivity } from "../../engines/runners/activities.ts";
import type { MetricsEngine } from "../../engines/observability/metrics.ts";
import type { OperatorPause } from "../../engines/coordination/peering.ts";
import { EventPoster } from "../../engines/observability/posting.ts";
import type { Activity } from "../../intents/handlers.ts";
import type { Memo } from "../../intents/contexts.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../../intents/registries.ts";
import { createSettings, type OperatorSettings } from "../../settings/settings.ts";
import type { NamespacePattern } from "../../structs/namespaces.ts";
import { activityIndices } from "./activity_indices.ts";
import { checkConnection, connect } from "./connecting.ts";
import { serveTerms, startCoordination } from "./coordinating.ts";
import { firstLine, OperatorStartError } from "./errors.ts";
import { endpointsPart, startObservation } from "./observing.ts";
import { disposedPart, runParts, type StopGroup } from "./parts.ts";
import type { OperatorStats, Orchestrator } from "../causes/orchestration.ts";
import { serveTerm, type ServingDeps } from "./serving.ts";
import { watchSelectors } from "../streams/watch_selectors.ts";

export { httpOptions } from "./connecting.ts";
export { OperatorStartError } from "./errors.ts";

/** Any resource: only to validate the keys of the watch selectors at startup. */
const NAMESPACE_RESOURCE = {
  group: "",
  version: "v1",
  plural: "namespaces",
  singular: "namespace",
  kind: "Namespace",
  namespaced: false,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

/**
 * The stop groups of the operator's own parts, in their stop order, once its terms are over:
 * the liveness and metrics endpoints (they serve standbys and a stopping operator too), then the
 * connection (its pooled connections closed; the cleanup handlers run after it).
 */
const OPERATOR_GROUPS: readonly StopGroup[] = [
  { name: "endpoints", told: "in turn" },
  { name: "connection", told: "in turn" },
];

/** Options of {@link operator}. */
export interface OperatorOptions {
  /** The handlers. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Settings. @default createSettings() */
  readonly settings?: OperatorSettings;
  /** Operator memo, shallow-copied into each object's memo. @default {} */
  readonly memo?: Memo;
  /**
   * Namespaces to serve: names, glob patterns (`team-*`, `!kube-*`, comma lists) or regular
   * expressions (which must match the whole name). Ignored when `clusterwide`.
   */
  readonly namespaces?: readonly NamespacePattern[];
  /**
   * One namespace pattern to serve, as `namespaces: [namespace]`.
   * @deprecated Use `namespaces` (Kopf deprecated `namespace=` too); both at once are a TypeError.
   */
  readonly namespace?: NamespacePattern;
  /** Serve all namespaces with cluster-wide watches. @default true when no namespaces are given */
  readonly clusterwide?: boolean;
  /** A connected client; else one is created from `kubeconfig`/`context` or the environment. */
  readonly client?: KubeClient;
  /** Kubeconfig file(s), when no client is given. */
  readonly kubeconfig?: string | readonly string[];
  /** Kubeconfig context, when no client is given. */
  readonly context?: string;
  /** Handler ordering. @default the default lifecycle (asap) */
  readonly lifecycle?: Lifecycle;
  /**
   * Run without peering (`settings.peering.standalone`; applied before the startup handlers).
   * @default auto-detection: peering if the `default` peering object exists, else standalone
   */
  readonly standalone?: boolean;
  /** Peering object name; makes peering mandatory (wait paused until the object exists). */
  readonly peering?: string;
  /** Peering priority (`settings.peering.priority`). @default 0 */
  readonly priority?: number;
  /** This operator's identity in peering objects. @default `POD_ID` or `user@host/time/xyz` */
  readonly identity?: string;
  /** Extra log listeners (e.g. the testing runner's capture). */
  readonly listeners?: readonly LogListener[];
  /** Stops the operator. */
  readonly signal?: AbortSignal;
  /** Called when every served stream has listed its objects once. */
  readonly onReady?: () => void;
  /** Serve the liveness endpoint at this URL, e.g. `http://0.0.0.0:8080/healthz`. */
  readonly liveness?: string;
  /** Receives a function that reports what the operator holds in memory (tests, metrics). */
  readonly observe?: (stats: () => OperatorStats) => void;
  /**
   * Serve Prometheus metrics at this URL, e.g. `http://0.0.0.0:9090/metrics`
   * (`settings.metrics.endpoint`); the same host and port as `liveness` share one server.
   */
  readonly metrics?: string;
  /**
   * Collect the metrics into this engine (e.g. to read `engine.exposition()` in a program or
   * test without an endpoint); served at `metrics` if that is given too.
   */
  readonly metricsEngine?: MetricsEngine;
}

/** The namespace patterns to serve: `namespaces`, or the legacy singular `namespace`. */
function servedNamespaces(options: OperatorOptions): readonly NamespacePattern[] {
  if (options.namespace === undefined) return options.namespaces ?? [];
  if (options.namespaces?.length) {
    throw new TypeError("Either namespaces or namespace can be given, not both");
  }
  return [options.namespace];
}

/**
 * Runs an operator until `signal` aborts.
 *
 * @param options Registry, settings, namespaces, connection and signal.
 * @returns Resolves after a clean stop.
 * @throws {OperatorStartError} when the cluster cannot be reached or rejects the credentials.
 * @throws {LoginError} when the login handlers give no usable credentials (at start or later).
 * @throws {ConfigError} when no usable cluster configuration is found.
 * @throws {TypeError} when both `namespaces` and the deprecated `namespace` are given.
 */
export function operator(options: OperatorOptions = {}): Promise<void> {
  // Its handlers' `KubeClient.connect()` / `ctx.client` reach its own cluster (current.ts).
  const scope = new OperatorScope(options);
  return withOperatorScope(scope, () => runOperator(options, scope));
}

async function runOperator(options: OperatorOptions, scope: OperatorScope): Promise<void> {
  const namespaces = servedNamespaces(options);
  const settings = options.settings ?? createSettings();
  // Running out of credentials stops the operator as a stop request would, then fails it.
  const loginFailure = new AbortController();
  const signal = options.signal
    ? AbortSignal.any([options.signal, loginFailure.signal])
    : loginFailure.signal;
  const registry = options.registry ?? getDefaultRegistry();
  const memo = options.memo ?? {};
  const listeners: LogListener[] = [...(options.listeners ?? [])];
  const logger = new Logger(["kopf", "operator"], { listeners });
  // A watch stream or the webhook server failing on its own stops the operator as running out
  // of credentials does: as a stop request would, then it fails with the error (rather than
  // going on without them).
  // Why the operator stops after a fatal error: the liveness endpoint answers 503 with it
  // while the operator stops.
  let fatal: string | undefined;
  const fail = (error: unknown) => {
    if (signal.aborted) return;
    fatal = firstLine(error);
    logger.error(`The operator stops after a fatal error: ${fatal}`);
    loginFailure.abort(error);
  };
  // What of the current term's parts does not run (e.g. a webhook server that stopped).
  let termProblems: (() => string | undefined) | undefined;
  // The serving orchestrator, once there is one (the liveness endpoint serves standbys too).
  let current: Orchestrator | undefined;
  const indices = activityIndices(registry.indexIds(), () => current);
  const activity = (name: Activity) =>
    runActivity({
      handlers: registry.activities(name),
      activity: name,
      memo,
      settings,
      logger,
      signal,
      indices,
    });

  // Peering options as in Kopf: applied before the startup handlers, which may override them.
  const clusterwide = options.clusterwide ?? !namespaces.length;
  if (clusterwide) settings.peering.clusterwide = true;
  if (options.standalone !== undefined) settings.peering.standalone = options.standalone;
  if (options.priority !== undefined) settings.peering.priority = options.priority;
  if (options.peering !== undefined) {
    settings.peering.name = options.peering;
    settings.peering.mandatory = true;
  }
  if (options.metrics !== undefined) settings.metrics.endpoint = options.metrics;

  // Nothing talks to the cluster before the startup handlers succeed (they may change settings).
  try {
    await activity("startup");
    if (registry.webhooks().length && !settings.admission.server) {
      throw new OperatorStartError(
        "Admission handlers (on.validate/on.mutate) exist, but no webhook server is configured: " +
          "set settings.admission.server in a startup handler, e.g. new WebhookServer({ port: 9443 })",
      );
    }
    try {
      watchSelectors(settings.watching, NAMESPACE_RESOURCE); // the keys, before any stream opens
    } catch (error) {
      throw new OperatorStartError((error as Error).message, { cause: error });
    }
    // The terms are the operator's life: when they are over, whatever ended them (the
    // operator's stop, or a term that fails to start), the endpoints stop, then the connection.
    await runParts({ signal, groups: OPERATOR_GROUPS, until: "started" }, async (parts) => {
      const client = options.client ??
        await connect(options, settings, registry, memo, logger, signal, (error) => {
          if (loginFailure.signal.aborted) return;
          fatal = firstLine(error);
          logger.error(error.message);
          loginFailure.abort(error);
        }, indices);
      if (!options.client) await parts.start(disposedPart("the connection", "connection", client));
      scope.connection = client.http.connection;
      const observation = await startObservation(settings, options.metricsEngine, client);
      const { observer } = observation;
      const poster = new EventPoster(client.api, settings.posting, new Logger(["kopf", "posting"]));
      poster.observer = observer;
      listeners.push(poster.listener);
      await checkConnection(client, signal);
      const { sharding, leader } = await startCoordination(client, settings, logger, signal);
      // The liveness endpoint and the metrics serve standbys too: they read the current term.
      let currentPause: OperatorPause | undefined;
      // One term's parts: the terms differ only in their signals.
      const serving: ServingDeps = {
        client,
        registry,
        settings,
        logger,
        memo,
        namespaces,
        clusterwide,
        identity: options.identity,
        lifecycle: options.lifecycle,
        poster,
        observer,
        sharding,
        onReady: options.onReady,
        onFailure: fail,
        observe: options.observe,
        onPause: (pause) => currentPause = pause,
        onServing: (orchestrator) => current = orchestrator,
        onProblems: (problems) => termProblems = problems,
      };
      // While a fatal error stops the operator, the endpoints stay up and answer 503 with it.
      await parts.start(endpointsPart({
        observation,
        liveness: options.liveness,
        probes: registry.activities("probe"),
        memo,
        settings,
        logger,
        indices,
        client,
        current: () => current,
        pause: () => currentPause,
        problems: () => {
          const problems = [
            fatal && `The operator is stopping after a fatal error: ${fatal}`,
            termProblems?.(),
            current?.problems(),
          ].filter(Boolean);
          return problems.length ? problems.join("; ") : undefined;
        },
      }));
      await serveTerms(
        leader,
        settings,
        observer,
        signal,
        (s, halt) => serveTerm(serving, s, halt),
      );
      if (loginFailure.signal.aborted) throw loginFailure.signal.reason;
    });
  } finally {
    // Cleanup handlers run on every exit path, with a fresh signal: the operator's is aborted.
    const cleanup = registry.activities("cleanup");
    if (cleanup.length) {
      await runActivity({
        handlers: cleanup,
        activity: "cleanup",
        memo,
        settings,
        logger,
        indices,
        signal: AbortSignal.timeout(settings.process.gracePeriod * 1000),
      }).catch((error) =>
        logger.error(`Cleanup failed: ${error instanceof Error ? error.message : error}`)
      );
    }
    logger.info("Operator stopped.");
  }
}
