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
import { EventPoster, withPoster } from "../engines/posting.ts";
import type { Memo } from "../intents/contexts.ts";
import { getDefaultRegistry, type OperatorRegistry } from "../intents/registries.ts";
import { createSettings, type OperatorSettings } from "../settings/settings.ts";
import { sleep } from "../util/backoff.ts";
import { Semaphore } from "../util/semaphore.ts";
import { Orchestrator } from "./orchestration.ts";

/** Options of {@link operator}. */
export interface OperatorOptions {
  /** The handlers. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Settings. @default createSettings() */
  readonly settings?: OperatorSettings;
  /** Operator memo, shallow-copied into each object's memo. @default {} */
  readonly memo?: Memo;
  /** Namespace patterns to serve (globs, negations). Ignored when `clusterwide`. */
  readonly namespaces?: readonly string[];
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
  /** Run without peering (peering is not implemented yet: always standalone). */
  readonly standalone?: boolean;
  /** Peering name (accepted; peering is not implemented yet). */
  readonly peering?: string;
  /** Operator priority for peering (accepted; peering is not implemented yet). */
  readonly priority?: number;
  /** Extra log listeners (e.g. the testing runner's capture). */
  readonly listeners?: readonly LogListener[];
  /** Stops the operator. */
  readonly signal?: AbortSignal;
  /** Called when every served stream has listed its objects once. */
  readonly onReady?: () => void;
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

/**
 * Runs an operator until `signal` aborts.
 *
 * @param options Registry, settings, namespaces, connection and signal.
 * @returns Resolves after a clean stop.
 * @throws {OperatorStartError} when the cluster cannot be reached or rejects the credentials.
 * @throws {ConfigError} when no usable cluster configuration is found.
 */
export async function operator(options: OperatorOptions = {}): Promise<void> {
  const settings = options.settings ?? createSettings();
  const signal = options.signal ?? new AbortController().signal;
  const client = options.client ?? await KubeClient.connect({
    ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}),
    ...(options.context ? { context: options.context } : {}),
    timeoutMs: settings.networking.requestTimeout * 1000,
    retries: settings.networking.errorBackoffs.length,
    backoff: { initialMs: (settings.networking.errorBackoffs[0] ?? 1) * 1000, maxMs: 30_000 },
    qps: settings.networking.qps,
    burst: settings.networking.burst,
  });
  const ownClient = !options.client;
  const listeners: LogListener[] = [...(options.listeners ?? [])];
  const logger = new Logger(["kopf", "operator"], { listeners });
  const poster = new EventPoster(client.api, settings.posting, new Logger(["kopf", "posting"]));
  listeners.push(poster.listener);
  try {
    await checkConnection(client, signal);
    if (!options.standalone) {
      logger.info("Peering is not implemented yet: running in standalone mode.");
    }
    const stop = new AbortController();
    const stopAll = AbortSignal.any([signal, stop.signal]);
    const posting = poster.run(stopAll);
    const orchestrator = new Orchestrator({
      client,
      registry: options.registry ?? getDefaultRegistry(),
      settings,
      logger,
      lifecycle: options.lifecycle ?? getDefaultLifecycle(),
      memo: options.memo ?? {},
      namespaces: options.namespaces ?? [],
      clusterwide: options.clusterwide ?? !(options.namespaces?.length),
      limiter: settings.execution.maxWorkers
        ? new Semaphore(settings.execution.maxWorkers)
        : undefined,
      signal: stopAll,
      onReady: options.onReady,
    });
    const running = withPoster(poster, () => orchestrator.run());
    await new Promise<void>((resolve) =>
      stopAll.addEventListener("abort", () => resolve(), { once: true })
    );
    logger.info("Stop requested; finishing the current cycles.");
    await Promise.race([running, sleep(settings.process.gracePeriod * 1000)]);
    await posting;
    logger.info("Operator stopped.");
  } finally {
    if (ownClient) client[Symbol.dispose]();
  }
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
