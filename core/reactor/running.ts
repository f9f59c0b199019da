/**
 * Running an operator: connect, check the cluster is reachable, start the Events poster and the
 * orchestration of watch streams, and stop everything in order when asked.
 *
 * Stop sequence: the stop signal aborts the watch streams and the handlers' signals; workers get
 * `settings.process.gracePeriod` seconds to finish their current cycle; queued Events are posted;
 * then `operator()` resolves.
 * @module
 */

import { getDefaultLifecycle, type Lifecycle } from "../actions/lifecycles.ts";
import { Logger, type LogListener } from "../actions/loggers.ts";
import { KubeClient } from "../client/client.ts";
import { ApiError, TransportError } from "../client/errors.ts";
import type { HttpClientOptions } from "../client/http.ts";
import { autoConfigure } from "../client/config.ts";
import type { ConnectionInfo, Credentials } from "../client/connection.ts";
import { LoginError, Vault, type VaultItem } from "../client/vault.ts";
import {
  type ConnectionFields,
  connectionInfo,
  isConnectionFields,
} from "../client/connection_fields.ts";
import { runActivity } from "../engines/activities.ts";
import { Index } from "../engines/indexing.ts";
import { startAdmission } from "../engines/admission.ts";
import { LeaderElector, leaseNamespace, replicaIdentity } from "../engines/leadership.ts";
import { detectShardedWatches, ShardCoordinator } from "../engines/sharding.ts";
import { detectIdentity, OperatorPause, startPeering } from "../engines/peering.ts";
import { EventPoster, withPoster } from "../engines/posting.ts";
import { endpointUrl, serveLiveness, serveMetrics } from "../engines/probing.ts";
import type { MetricsEngine } from "../engines/metrics.ts";
import { combineObservers, type OperatorObserver } from "../engines/observers.ts";
import { mayTrace } from "../util/tracing_presence.ts";
import type { Activity } from "../intents/handlers.ts";
import type { IndexView, Memo } from "../intents/contexts.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { createSettings, type OperatorSettings } from "../settings/settings.ts";
import type { NamespacePattern } from "../structs/namespaces.ts";
import { sleep } from "../util/backoff.ts";
import { Semaphore } from "../util/semaphore.ts";
import { type OperatorStats, Orchestrator } from "./orchestration.ts";
import { ReconcileControllers } from "./reconciling.ts";
import { SharedInformers } from "./sharing.ts";
import { watchSelectors } from "./watch_selectors.ts";

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

/** The operator could not start: the cluster is unreachable, or credentials are rejected. */
export class OperatorStartError extends Error {
  /**
   * Creates the error.
   *
   * @param message One line saying what is wrong and what to check.
   * @param options The cause.
   */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "OperatorStartError";
  }
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
export async function operator(options: OperatorOptions = {}): Promise<void> {
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
  const fail = (error: unknown) => {
    if (signal.aborted) return;
    logger.error(`The operator stops after a fatal error: ${firstLine(error)}`);
    loginFailure.abort(error);
  };
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
    const client = options.client ??
      await connect(options, settings, registry, memo, logger, signal, (error) => {
        if (loginFailure.signal.aborted) return;
        logger.error(error.message);
        loginFailure.abort(error);
      }, indices);
    const ownClient = !options.client;
    // Observation is set up only as far as asked for: without metrics and traces, none at all.
    const metricsUrl = settings.metrics.endpoint;
    if (metricsUrl) endpointUrl(metricsUrl, "metrics");
    const engine = options.metricsEngine ??
      (metricsUrl
        // Loaded only when served: prom-client costs every other operator ~10 MiB.
        ? new (await import("../engines/metrics.ts")).MetricsEngine({
          process: settings.metrics.process,
        })
        : undefined);
    engine?.attachClient(client.counters, new URL(client.http.connection.server).host);
    const observers: OperatorObserver[] = [];
    if (mayTrace()) {
      const { tracingEnabled, TracingObserver } = await import("../engines/tracing.ts");
      if (tracingEnabled()) observers.push(new TracingObserver());
    }
    if (engine) observers.push(engine);
    const observer = observers.length ? combineObservers(observers) : undefined;
    const poster = new EventPoster(client.api, settings.posting, new Logger(["kopf", "posting"]));
    poster.observer = observer;
    listeners.push(poster.listener);
    try {
      await checkConnection(client, signal);
      if (settings.leadership.enabled && settings.sharding.enabled) {
        throw new OperatorStartError(
          "Leader election and sharding are mutually exclusive: sharded replicas are all active",
        );
      }
      const sharding = settings.sharding.enabled
        ? await startSharding(client, settings, logger.child(["kopf", "sharding"]), signal)
        : undefined;
      const leader = settings.leadership.enabled
        ? new LeaderElector({
          api: client.api,
          settings: settings.leadership,
          namespace: leaseNamespace(
            settings.leadership.namespace,
            client.http.connection.namespace,
          ),
          identity: settings.leadership.identity ?? replicaIdentity(),
          logger: logger.child(["kopf", "leadership"]),
        })
        : undefined;
      // The liveness endpoint serves standbys too (else the kubelet restarts them).
      let currentPause: OperatorPause | undefined;
      // So do the metrics: a standby reports its API requests and leader_election_master_status.
      engine?.attach({
        inventory: () => current?.inventory() ?? [],
        paused: () => currentPause?.paused ?? false,
        indices: () =>
          Object.fromEntries(
            Object.entries(current?.indices ?? {}).map(([name, index]) => [name, index.size]),
          ),
      });
      const renderMetrics = async () => {
        const { text, contentType } = await engine!.exposition();
        return new Response(text, { headers: { "Content-Type": contentType } });
      };
      const metricsShared = Boolean(
        engine && metricsUrl && options.liveness && sameServer(options.liveness, metricsUrl),
      );
      const liveness = options.liveness
        ? serveLiveness({
          url: options.liveness,
          handlers: registry.activities("probe"),
          memo,
          settings,
          logger,
          problems: () => current?.problems(),
          indices,
          signal,
          ...(metricsShared ? { routes: { [new URL(metricsUrl!).pathname]: renderMetrics } } : {}),
        })
        : undefined;
      const metricsServer = engine && metricsUrl && !metricsShared
        ? serveMetrics({ url: metricsUrl, render: renderMetrics, signal })
        : undefined;
      if (metricsUrl) {
        const url = new URL(metricsUrl);
        url.port = String(metricsServer?.port ?? liveness?.port ?? url.port);
        logger.info(`Serving metrics at ${url.href}`);
      }
      const leaseLabels = { name: settings.leadership.name };
      if (leader) observer?.state("leader", 0, leaseLabels);
      const serve = async (signal: AbortSignal, halt?: AbortSignal): Promise<void> => {
        const pause = new OperatorPause();
        currentPause = pause;
        const peeringStop = new AbortController();
        let peered: Promise<void> | undefined;
        let coordinator: ShardCoordinator | undefined;
        let shared: SharedInformers | undefined;
        try {
          const peering = await startPeering({
            api: client.api,
            settings: settings.peering,
            watching: settings.watching,
            identity: options.identity ?? detectIdentity(),
            namespaces,
            pause,
            logger: logger.child(["kopf", "peering"]),
            signal: AbortSignal.any([signal, peeringStop.signal]),
            exitTimeout: settings.process.gracePeriod,
          }).catch((error) => {
            if (signal.aborted) throw error;
            throw new OperatorStartError(`Cannot start peering: ${firstLine(error)}`, {
              cause: error,
            });
          });
          peered = peering?.finished;
          const posting = poster.run(signal);
          // One informer cache for the reconcile handlers and whatever else reads their resources.
          shared = registry.reconcilers().length
            ? new SharedInformers({
              client,
              registrations: registry.reconcilers(),
              settings,
              logger,
              namespaces,
              clusterwide,
            })
            : undefined;
          const orchestrator = new Orchestrator({
            client,
            registry,
            settings,
            logger,
            lifecycle: options.lifecycle ?? getDefaultLifecycle(),
            memo,
            namespaces,
            clusterwide,
            limiter: settings.execution.maxWorkers
              ? new Semaphore(settings.execution.maxWorkers)
              : undefined,
            signal,
            onReady: options.onReady,
            onFailure: fail,
            ...(peering ? { paused: pause } : {}),
            observer,
            ...(sharding ? { sharding: sharding.space } : {}),
            shared,
            halt,
          });
          current = orchestrator;
          // Level-based reconcile handlers run beside the reactor, over the shared cache.
          const reconcilers = shared
            ? new ReconcileControllers({
              client,
              registrations: registry.reconcilers(),
              settings,
              logger,
              memo,
              namespaces,
              clusterwide,
              indices: orchestrator.indices,
              indexed: (s: AbortSignal) => orchestrator.indexed(s),
              ...(peering ? { pause } : {}),
              ...(sharding ? { sharding: sharding.space } : {}),
              shared,
              signal,
            })
            : undefined;
          if (sharding) {
            coordinator = new ShardCoordinator({
              ...sharding.deps,
              serve: (shards) => {
                observer?.state("shards_owned", shards.size, { name: settings.sharding.name });
                return Promise.all([
                  orchestrator.serveShards(shards),
                  reconcilers?.serveShards(shards),
                ]).then(() => {});
              },
              signal,
            });
            await coordinator.join(); // the first fair share is served from the first listing
          }
          options.observe?.(() => orchestrator.stats());
          const admission = registry.webhooks().length
            ? startAdmission({
              client,
              registry,
              settings,
              logger,
              memo,
              memoOf: (uid: string) => orchestrator.memoOf(uid),
              indices: orchestrator.indices,
              signal,
            })
            : undefined;
          await admission?.ready.catch((error) => {
            if (signal.aborted) return;
            throw new OperatorStartError(`Cannot serve the admission webhooks: ${error}`, {
              cause: error,
            });
          });
          const running = withPoster(
            poster,
            () => Promise.all([orchestrator.run(), reconcilers?.run()]).then(() => {}),
          );
          const stopped = new Promise<void>((resolve) => {
            if (signal.aborted) resolve();
            signal.addEventListener("abort", () => resolve(), { once: true });
          });
          // A failing orchestration (or webhook server) ends the operator too, after a stop.
          await Promise.race([stopped, running, ...(admission ? [admission.finished] : [])])
            .catch(fail);
          logger.info("Stop requested; finishing the current cycles.");
          // The grace period's timer is cleared once done: it would keep the process alive.
          const graced = new AbortController();
          await Promise.race([
            running,
            sleep(settings.process.gracePeriod * 1000, graced.signal).catch(() => {}),
          ]).finally(() => graced.abort());
          await posting;
          await admission?.finished; // the managed webhook configurations are cleaned up by now
        } finally {
          await coordinator?.finished; // the shards' work stopped; their Leases are released
          await shared?.[Symbol.asyncDispose](); // the cache's watches end with their readers
          // Our peering entries are removed only after the streams stopped.
          peeringStop.abort();
          await peered;
        }
      };
      try {
        // Standby → leading → (on a lost Lease: exit, or standby again) until stopped.
        for (;;) {
          if (leader && !(await leader.acquire(signal))) break;
          if (leader) observer?.state("leader", 1, leaseLabels);
          try {
            // A lost Lease aborts the handlers in flight at once: no time to finish them.
            await serve(leader ? AbortSignal.any([signal, leader.lost]) : signal, leader?.lost);
          } finally {
            await leader?.release();
            if (leader) observer?.state("leader", 0, leaseLabels);
          }
          if (!leader?.lost.aborted || signal.aborted) break;
          if (settings.leadership.onLost === "exit") throw leader.lost.reason;
        }
      } finally {
        await liveness?.finished;
        await metricsServer?.finished;
        engine?.close();
      }
      if (loginFailure.signal.aborted) throw loginFailure.signal.reason;
    } finally {
      if (ownClient) client[Symbol.dispose]();
    }
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

/**
 * Prepares sharded replicas: resolves the Leases' namespace and this replica's identity, detects
 * whether the API server filters by `shardSelector`, says so in one line, and turns peering off
 * (replicas of equal priority would pause each other; the shard Leases coordinate them instead).
 */
async function startSharding(
  client: KubeClient,
  settings: OperatorSettings,
  logger: Logger,
  signal: AbortSignal,
) {
  const s = settings.sharding;
  const namespace = leaseNamespace(s.namespace, client.http.connection.namespace);
  const identity = s.identity ?? replicaIdentity();
  let serverSide = false;
  if (s.serverSide === "auto") {
    try {
      serverSide = await detectShardedWatches(client.api, namespace, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new OperatorStartError(
        `Cannot list Leases in ${namespace} for sharding: ${firstLine(error)}`,
        { cause: error },
      );
    }
  }
  logger.info(
    `Sharding: ${s.shards} shards by ${s.key}, Leases ${namespace}/${s.name}-*, as ${identity}; ` +
      (serverSide
        ? "the API server filters the watches (shardSelector)"
        : "the API server does not filter by shardSelector (Kubernetes < 1.36 or the " +
          "ShardedListAndWatch gate is off): each held shard's watch receives all objects and " +
          "keeps its own here; fewer shards (--shard-count = replicas) cost less"),
  );
  if (!settings.peering.standalone) {
    logger.info("Peering is off for sharded replicas: the shard Leases coordinate them.");
    settings.peering.standalone = true;
  }
  return {
    space: { count: s.shards, key: s.key, serverSide },
    deps: { api: client.api, settings: s, namespace, identity, logger },
  };
}

/**
 * The HTTP client's options from the operator's settings: timeouts, the retry schedule of
 * `settings.networking.errorBackoffs` (its length is the number of retries), the rate limit, and
 * API traffic logged at debug level (shown with `--debug` only).
 * @param settings The operator's settings.
 * @param traffic Where each answer is logged at debug level.
 * @returns Options for `KubeClient`/`HttpClient`.
 */
export function httpOptions(settings: OperatorSettings, traffic: Logger): HttpClientOptions {
  return {
    timeoutMs: settings.networking.requestTimeout * 1000,
    // Watches fall back from their own connect timeout to this one, then to timeoutMs.
    ...(settings.networking.connectTimeout === null
      ? {}
      : { connectTimeoutMs: settings.networking.connectTimeout * 1000 }),
    retries: settings.networking.errorBackoffs.length,
    backoff: { delaysMs: settings.networking.errorBackoffs.map((s) => s * 1000), jitter: 0.2 },
    qps: settings.networking.qps,
    burst: settings.networking.burst,
    maxConnections: settings.networking.maxConnections,
    // The line is built only when it is shown (this runs for every request).
    onResponse: (r) => {
      if (traffic.isEnabledFor("debug")) {
        traffic.debug(`${r.method} ${r.path} → ${r.code || "no answer"} in ${r.ms} ms`);
      }
    },
  };
}

/**
 * The indices as activity handlers get them, as in Kopf: every declared index from the start,
 * by name — empty before the first listing and live, so that one kept by a startup handler
 * fills up later (it reads the serving orchestrator's index, or an empty one while there is none).
 * @param ids The index handler ids.
 * @param current The serving orchestrator, if any.
 * @returns Views by index name.
 */
function activityIndices(
  ids: readonly string[],
  current: () => Orchestrator | undefined,
): Record<string, IndexView> {
  const empty = new Index();
  return Object.fromEntries(ids.map((id) => {
    const live = () => current()?.indices[id] ?? empty;
    const view = new Proxy(empty, {
      get: (_, key) => {
        const index = live();
        const value = Reflect.get(index, key, index);
        return typeof value === "function" ? value.bind(index) : value;
      },
      has: (_, key) => Reflect.has(live(), key),
    });
    return [id, view];
  }));
}

/** Connects with the login handlers' credentials, or the kubeconfig / in-cluster account. */
async function connect(
  options: OperatorOptions,
  settings: OperatorSettings,
  registry: OperatorRegistry,
  memo: Memo,
  logger: Logger,
  signal: AbortSignal,
  onLoginFailure: (error: LoginError) => void,
  indices?: Readonly<Record<string, IndexView>>,
): Promise<KubeClient> {
  const http = httpOptions(settings, logger.child(["kopf", "client"]));
  const handlers = registry.activities("login");
  if (handlers.length === 0) {
    // Kopf logs in with the kubeconfig / in-cluster account through a built-in login handler,
    // and logs the same lines around it.
    logger.info("Initial authentication has been initiated.");
    const paths = options.kubeconfig === undefined
      ? []
      : ([] as string[]).concat(options.kubeconfig);
    const connection = await autoConfigure({
      ...(paths.length ? { paths } : {}),
      ...(options.context ? { context: options.context } : {}),
    });
    logger.info("Initial authentication has finished.");
    const credentials: Credentials = {
      headers: (s) => connection.credentials.headers(s),
      invalidate: async () => {
        logger.info("Re-authentication has been initiated.");
        const renewed = await connection.credentials.invalidate();
        if (renewed) logger.info("Re-authentication has finished.");
        else {
          logger.warning(
            `Re-authentication has failed: the credentials from ${connection.source} cannot be renewed.`,
          );
        }
        return renewed;
      },
    };
    return new KubeClient({ ...connection, credentials }, http);
  }
  const login = async (initial: boolean): Promise<VaultItem[]> => {
    const what = initial ? "Initial authentication" : "Re-authentication";
    logger.info(`${what} has been initiated.`);
    const results = await runActivity({
      handlers,
      activity: "login",
      memo,
      settings,
      logger,
      signal,
      indices,
    });
    // Every handler's credentials go to the vault (a handler may also return a list of them).
    const items: VaultItem[] = [];
    for (const [id, result] of results) {
      const infos = Array.isArray(result) ? result : [result];
      infos.forEach((info: unknown, i) => {
        const key = infos.length > 1 ? `${id}#${i}` : id;
        if (isConnectionInfo(info)) items.push({ key, info });
        else if (isConnectionFields(info)) items.push({ key, info: fromFields(info, key) });
      });
    }
    if (items.length) logger.info(`${what} has finished.`);
    else logger.warning(`${what} has failed: no login handler returned credentials.`);
    return items;
  };
  const initial = await login(true);
  const first = initial.toSorted((a, b) => (b.info.priority ?? 0) - (a.info.priority ?? 0))[0]
    ?.info;
  if (!first) {
    throw new LoginError("No login handler returned connection info (a ConnectionInfo object)");
  }
  const vault = new Vault(initial, {
    relogin: () => login(false),
    onFailure: onLoginFailure,
  });
  // The server and TLS are those of the first login; the vault varies the credentials.
  return new KubeClient({ ...first, credentials: vault }, http);
}

/** Kopf's flat fields (`{ server, token, caData, … }`) as connection info. */
function fromFields(fields: ConnectionFields, key: string): ConnectionInfo {
  try {
    return { ...connectionInfo(fields), source: `login handler '${key}'` };
  } catch (error) {
    throw new LoginError(
      `Login handler '${key}' returned unusable connection info: ${firstLine(error)}`,
      {
        cause: error,
      },
    );
  }
}

function isConnectionInfo(value: unknown): value is ConnectionInfo {
  return Boolean(
    value && typeof value === "object" && "server" in value && "credentials" in value,
  );
}

/** Whether two endpoint URLs name the same host and (fixed) port, so one server serves both. */
function sameServer(a: string, b: string): boolean {
  const x = new URL(a);
  const y = new URL(b);
  return x.host === y.host && x.port !== "0" && x.port !== "" && x.pathname !== y.pathname;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}

async function checkConnection(client: KubeClient, signal: AbortSignal): Promise<void> {
  try {
    await client.http.json({ path: "/version", signal, retries: 2 });
    // /version is open to anonymous users: check the credentials with a cheap authorised call.
    await client.http.json({ path: "/api", signal, retries: 2 });
  } catch (error) {
    if (signal.aborted) throw error;
    if (error instanceof TransportError) {
      throw new OperatorStartError(error.message, { cause: error });
    }
    if (error instanceof ApiError && (error.code === 401 || error.code === 403)) {
      throw new OperatorStartError(
        `The API server at ${client.http.connection.server} rejected the credentials from ${client.http.connection.source}: ${error.message}`,
        { cause: error },
      );
    }
    throw error;
  }
}
