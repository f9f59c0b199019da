/**
 * Running an operator: connect, check the cluster is reachable, start the Events poster and the
 * orchestration of watch streams, and stop everything in order when asked.
 *
 * The operator is a list of parts (`core/util/parts.ts`): the connection, the liveness and
 * metrics endpoints, the terms of service. Stop sequence: the stop signal aborts the watch
 * streams and the handlers' signals; workers get `settings.process.gracePeriod` seconds to finish
 * their current cycle; queued Events are posted; the term's other parts stop by their groups
 * (`stopping.ts`); then the operator's groups stop in turn: the endpoints, then the connection;
 * the cleanup handlers run; then `operator()` resolves.
 *
 * The parts live beside: connecting and logging in (`connecting.ts`), metrics, tracing and the
 * liveness endpoint (`observing.ts`), leader election and sharding (`coordinating.ts`), one term
 * of service (`serving.ts`) and its stop sequence (`stopping.ts`).
 * @module
 */

import { NAMESPACES_RESOURCE } from "../../client/discovery.ts";
import { Logger, type LogListener } from "../../actions/loggers.ts";
import type { Lifecycle } from "../../actions/lifecycles.ts";
import type { KubeClient } from "../../client/client.ts";
import { OperatorScope, withOperatorScope } from "../../client/current.ts";
import { runActivity } from "../../engines/runners/activities.ts";
import type { MetricsEngine } from "../../engines/observability/metrics.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import type { OperatorPause } from "../../engines/coordination/peering.ts";
import { EventPoster } from "../../engines/observability/posting.ts";
import type { Activity } from "../../intents/handlers.ts";
import type { IndexView, Memo } from "../../intents/contexts.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../../intents/registries.ts";
import { createSettings, type OperatorSettings } from "../../settings/settings.ts";
import type { NamespacePattern } from "../../structs/namespaces.ts";
import { activityIndices } from "./activity_indices.ts";
import { checkConnection, connect } from "./connecting.ts";
import { type Sharding, startCoordination, termsPart } from "./coordinating.ts";
import { firstLine, OperatorStartError } from "./errors.ts";
import { endpointParts, type Observation, startObservation } from "./observing.ts";
import {
  disposedPart,
  type Part,
  type PartsStarter,
  runParts,
  type StopGroup,
} from "../../util/parts.ts";
import type { OperatorStats, Orchestrator } from "../causes/orchestration.ts";
import { serveTerm, type ServingDeps } from "./serving.ts";
import { watchSelectors } from "../streams/watch_selectors.ts";

export { httpOptions } from "./connecting.ts";
export { OperatorStartError } from "./errors.ts";

/**
 * The stop groups of the operator's own parts, in their stop order: the terms of service, told at
 * once (the current term stops by its own groups, `stopping.ts`); then the liveness and metrics
 * endpoints, in turn (they serve standbys and a stopping operator too); then the connection and
 * the metrics engine that counts its requests (pooled connections closed; the cleanup handlers
 * run after it).
 */
const OPERATOR_GROUPS: readonly StopGroup[] = [
  { name: "terms", told: "at once" },
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

/**
 * Runs the operator, step by step: its startup handlers and checks, then its terms of service
 * (`serveOperator`), and whatever ends them, its cleanup handlers.
 */
async function runOperator(options: OperatorOptions, scope: OperatorScope): Promise<void> {
  const run = prepareRun(options);
  applyPeeringOptions(run);
  // Nothing talks to the cluster before the startup handlers succeed (they may change settings).
  try {
    await runActivities(run, "startup", run.signal);
    checkStartup(run);
    await serveOperator(run, scope);
  } finally {
    await cleanup(run);
  }
}

/**
 * The operator's life after its startup handlers, as a list of parts: the connection, the
 * endpoints, the terms of service (with the checks and setup between them), run until the
 * operator's stop or until the terms are over; then they stop in the groups' order.
 *
 * An endpoint that stops by itself meanwhile is logged and named by the liveness endpoint (503);
 * a part that fails stops the operator with its error, as a failing watch stream does.
 */
async function serveOperator(run: OperatorRun, scope: OperatorScope): Promise<void> {
  const { settings, logger, signal } = run;
  // The terms are the operator's life: when they are over by themselves (a term that fails to
  // start, a lost Lease that exits), the endpoints stop, then the connection.
  const over = new AbortController();
  await runParts({
    signal: AbortSignal.any([signal, over.signal]),
    groups: OPERATOR_GROUPS,
    onMissing: (why) => {
      run.missing.push(why);
      logger.error(why);
    },
    // The terms' own error is the operator's (thrown once they stopped), not a fatal error more.
    onFailure: (error) => {
      if (!over.signal.aborted) failOperator(run, error);
    },
  }, async (parts) => {
    const client = await connectClient(run, parts);
    scope.connection = client.http.connection;
    const observation = await startObservation(settings, run.options.metricsEngine, client);
    const poster = startPoster(run, client, observation.observer);
    await checkConnection(client, signal);
    const { sharding, leader } = await startCoordination(client, settings, logger, signal);
    // While a fatal error stops the operator, the endpoints stay up and answer 503 with it.
    for (const part of operatorEndpoints(run, observation, client)) await parts.start(part);
    const serving = servingDeps(run, client, poster, observation.observer, sharding);
    const serve = (s: AbortSignal, halt?: AbortSignal) => serveTerm(serving, s, halt);
    await parts.start(termsPart(leader, settings, observation.observer, serve, () => over.abort()));
  });
  if (run.failure.signal.aborted) throw run.failure.signal.reason;
}

/** One run of the operator: what its steps share, and what they learn as it goes. */
interface OperatorRun {
  readonly options: OperatorOptions;
  readonly namespaces: readonly NamespacePattern[];
  readonly clusterwide: boolean;
  readonly settings: OperatorSettings;
  readonly registry: OperatorRegistry;
  readonly memo: Memo;
  /** The operator's log listeners (the Events poster's is added once it runs). */
  readonly listeners: LogListener[];
  readonly logger: Logger;
  /** Running out of credentials or a fatal error: stops the operator, then fails it. */
  readonly failure: AbortController;
  /** The operator's stop: the given signal or `failure`. */
  readonly signal: AbortSignal;
  readonly indices: Record<string, IndexView>;
  /** Why the operator stops after a fatal error: the liveness endpoint answers 503 with it. */
  fatal: string | undefined;
  /** What of the current term's parts does not run (e.g. a webhook server that stopped). */
  termProblems: (() => string | undefined) | undefined;
  /** What of the operator's own parts stopped by itself (e.g. the metrics endpoint). */
  readonly missing: string[];
  /** The serving orchestrator, once there is one (the liveness endpoint serves standbys too). */
  current: Orchestrator | undefined;
  /** The current term's pause (the liveness endpoint and the metrics serve standbys too). */
  pause: OperatorPause | undefined;
}

/** The run's shared parts, from the options and their defaults; nothing started yet. */
function prepareRun(options: OperatorOptions): OperatorRun {
  const namespaces = servedNamespaces(options);
  const settings = options.settings ?? createSettings();
  // Running out of credentials stops the operator as a stop request would, then fails it.
  const failure = new AbortController();
  const signal = options.signal
    ? AbortSignal.any([options.signal, failure.signal])
    : failure.signal;
  const registry = options.registry ?? getDefaultRegistry();
  const listeners: LogListener[] = [...(options.listeners ?? [])];
  const run: OperatorRun = {
    options,
    namespaces,
    clusterwide: options.clusterwide ?? !namespaces.length,
    settings,
    registry,
    memo: options.memo ?? {},
    listeners,
    logger: new Logger(["kopf", "operator"], { listeners }),
    failure,
    signal,
    indices: activityIndices(registry.indexIds(), () => run.current),
    fatal: undefined,
    termProblems: undefined,
    missing: [],
    current: undefined,
    pause: undefined,
  };
  return run;
}

/** Peering options as in Kopf: applied before the startup handlers, which may override them. */
function applyPeeringOptions({ options, settings, clusterwide }: OperatorRun): void {
  if (clusterwide) settings.peering.clusterwide = true;
  if (options.standalone !== undefined) settings.peering.standalone = options.standalone;
  if (options.priority !== undefined) settings.peering.priority = options.priority;
  if (options.peering !== undefined) {
    settings.peering.name = options.peering;
    settings.peering.mandatory = true;
  }
  if (options.metrics !== undefined) settings.metrics.endpoint = options.metrics;
}

/** Runs the handlers of an activity (startup, cleanup) with the operator's memo and indices. */
function runActivities(
  run: OperatorRun,
  activity: Activity,
  signal: AbortSignal,
): Promise<Map<string, unknown>> {
  const { registry, memo, settings, logger, indices } = run;
  const handlers = registry.activities(activity);
  return runActivity({ handlers, activity, memo, settings, logger, signal, indices });
}

/** What the startup handlers left must be usable before anything talks to the cluster. */
function checkStartup({ registry, settings }: OperatorRun): void {
  if (registry.webhooks().length && !settings.admission.server) {
    throw new OperatorStartError(
      "Admission handlers (on.validate/on.mutate) exist, but no webhook server is configured: " +
        "set settings.admission.server in a startup handler, e.g. new WebhookServer({ port: 9443 })",
    );
  }
  try {
    watchSelectors(settings.watching, NAMESPACES_RESOURCE); // the keys, before any stream opens
  } catch (error) {
    throw new OperatorStartError((error as Error).message, { cause: error });
  }
}

/**
 * The given client, or a connection made by the login handlers (a part: its pooled connections
 * close after the endpoints). Running out of credentials later stops the operator, then fails it.
 */
async function connectClient(run: OperatorRun, parts: PartsStarter): Promise<KubeClient> {
  const { options, settings, registry, memo, logger, signal, failure } = run;
  if (options.client) return options.client;
  const client = await connect(options, settings, registry, memo, logger, signal, (error) => {
    if (failure.signal.aborted) return;
    run.fatal = firstLine(error);
    logger.error(error.message);
    failure.abort(error);
  }, run.indices);
  await parts.start(disposedPart("the connection", "connection", client));
  return client;
}

/** The Events poster, fed by the operator's log listeners (it runs with each term). */
function startPoster(
  run: OperatorRun,
  client: KubeClient,
  observer: OperatorObserver | undefined,
): EventPoster {
  const poster = new EventPoster(client.api, run.settings.posting, new Logger(["kopf", "posting"]));
  poster.observer = observer;
  run.listeners.push(poster.listener);
  return poster;
}

/**
 * The liveness and metrics endpoints: they read the current term, why the operator stops, and
 * which of the operator's own parts stopped by itself.
 */
function operatorEndpoints(
  run: OperatorRun,
  observation: Observation,
  client: KubeClient,
): Part[] {
  const { options, registry, memo, settings, logger, indices } = run;
  return endpointParts({
    observation,
    liveness: options.liveness,
    probes: registry.activities("probe"),
    memo,
    settings,
    logger,
    indices,
    client,
    current: () => run.current,
    pause: () => run.pause,
    problems: () => {
      const problems = [
        run.fatal && `The operator is stopping after a fatal error: ${run.fatal}`,
        ...run.missing,
        run.termProblems?.(),
        run.current?.problems(),
      ].filter(Boolean);
      return problems.length ? problems.join("; ") : undefined;
    },
  });
}

/** One term's parts: the terms differ only in their signals. */
function servingDeps(
  run: OperatorRun,
  client: KubeClient,
  poster: EventPoster,
  observer: OperatorObserver | undefined,
  sharding: Sharding | undefined,
): ServingDeps {
  const { options, registry, settings, logger, memo, namespaces, clusterwide } = run;
  return {
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
    onFailure: (error) => failOperator(run, error),
    observe: options.observe,
    onPause: (pause) => run.pause = pause,
    onServing: (orchestrator) => run.current = orchestrator,
    onProblems: (problems) => run.termProblems = problems,
  };
}

/**
 * A watch stream, the webhook server or an endpoint failing on its own stops the operator as
 * running out of credentials does: as a stop request would, then it fails with the error
 * (rather than going on without them).
 */
function failOperator(run: OperatorRun, error: unknown): void {
  if (run.signal.aborted) return;
  run.fatal = firstLine(error);
  run.logger.error(`The operator stops after a fatal error: ${run.fatal}`);
  run.failure.abort(error);
}

/** Cleanup handlers run on every exit path, with a fresh signal: the operator's is aborted. */
async function cleanup(run: OperatorRun): Promise<void> {
  const { registry, settings, logger } = run;
  if (registry.activities("cleanup").length) {
    await runActivities(run, "cleanup", AbortSignal.timeout(settings.process.gracePeriod * 1000))
      .catch((error) =>
        logger.error(`Cleanup failed: ${error instanceof Error ? error.message : error}`)
      );
  }
  logger.info("Operator stopped.");
}
