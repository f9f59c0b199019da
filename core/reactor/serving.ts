/**
 * One term of service: from joining the peers (or the shard Leases) to a clean stop. The
 * operator serves one term, or with leader election one per won Lease (`coordinating.ts`).
 *
 * A term starts peering, the Events poster, the shared informer cache (for reconcile handlers),
 * the orchestration of watch streams, the reconcile controllers, the shard coordinator and the
 * webhook server; then it stops them in order (`stopping.ts`) and leaves the peers last.
 * @module
 */

import { getDefaultLifecycle, type Lifecycle } from "../actions/lifecycles.ts";
import type { Logger } from "../actions/loggers.ts";
import type { KubeClient } from "../client/client.ts";
import { startAdmission } from "../engines/admission.ts";
import type { OperatorObserver } from "../engines/observers.ts";
import { detectIdentity, OperatorPause, startPeering } from "../engines/peering.ts";
import { type EventPoster, withPoster } from "../engines/posting.ts";
import { ShardCoordinator } from "../engines/sharding.ts";
import type { Memo } from "../intents/contexts.ts";
import type { OperatorRegistry } from "../intents/registries.ts";
import type { OperatorSettings } from "../settings/settings.ts";
import type { NamespacePattern } from "../structs/namespaces.ts";
import { Semaphore } from "../util/semaphore.ts";
import type { Sharding } from "./coordinating.ts";
import { firstLine, OperatorStartError } from "./errors.ts";
import { type OperatorStats, Orchestrator } from "./orchestration.ts";
import { ReconcileControllers } from "./reconciling.ts";
import { SharedInformers } from "./sharing.ts";
import { stopInOrder } from "./stopping.ts";

/** What a term of service needs: the operator's parts, and where to tell what it runs. */
export interface ServingDeps {
  /** The connected client. */
  readonly client: KubeClient;
  /** The handlers. */
  readonly registry: OperatorRegistry;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** Operator memo. */
  readonly memo: Memo;
  /** The namespace patterns to serve. */
  readonly namespaces: readonly NamespacePattern[];
  /** Serve all namespaces with cluster-wide watches. */
  readonly clusterwide: boolean;
  /** This operator's identity in peering objects. @default detected anew each term */
  readonly identity: string | undefined;
  /** Handler ordering. @default the default lifecycle, as of each term */
  readonly lifecycle: Lifecycle | undefined;
  /** The Events poster (run for the term; its queue is posted at the stop). */
  readonly poster: EventPoster;
  /** What the orchestration reports to, if observed. */
  readonly observer: OperatorObserver | undefined;
  /** The sharding setup, if sharded. */
  readonly sharding: Sharding | undefined;
  /** Called when every served stream has listed its objects once. */
  readonly onReady: (() => void) | undefined;
  /** Stops the operator with an error (a failing stream or webhook server). */
  readonly onFailure: (error: unknown) => void;
  /** Receives what the term's orchestrator holds in memory. */
  readonly observe: ((stats: () => OperatorStats) => void) | undefined;
  /** Told the term's pause switch as the term starts (liveness and metrics read it). */
  readonly onPause: (pause: OperatorPause) => void;
  /** Told the term's orchestrator once it exists (liveness, metrics, activities' indices). */
  readonly onServing: (orchestrator: Orchestrator) => void;
}

/**
 * Serves one term until its signal aborts, then stops it in order.
 * @param deps The operator's parts.
 * @param signal Ends the term: the operator's stop, or a lost Lease.
 * @param halt Aborts on a lost Lease: the handlers in flight are aborted at once.
 * @returns Resolves after a clean stop of the term.
 * @throws {OperatorStartError} when peering or the webhook server cannot start.
 */
export async function serveTerm(
  deps: ServingDeps,
  signal: AbortSignal,
  halt?: AbortSignal,
): Promise<void> {
  const { client, registry, settings, logger, memo, namespaces, clusterwide, sharding } = deps;
  const pause = new OperatorPause();
  deps.onPause(pause);
  const peeringStop = new AbortController();
  let peered: Promise<void> | undefined;
  let coordinator: ShardCoordinator | undefined;
  let shared: SharedInformers | undefined;
  try {
    const peering = await startPeering({
      api: client.api,
      settings: settings.peering,
      watching: settings.watching,
      identity: deps.identity ?? detectIdentity(),
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
    const posting = deps.poster.run(signal);
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
      lifecycle: deps.lifecycle ?? getDefaultLifecycle(),
      memo,
      namespaces,
      clusterwide,
      limiter: settings.execution.maxWorkers
        ? new Semaphore(settings.execution.maxWorkers)
        : undefined,
      signal,
      onReady: deps.onReady,
      onFailure: deps.onFailure,
      ...(peering ? { paused: pause } : {}),
      observer: deps.observer,
      ...(sharding ? { sharding: sharding.space } : {}),
      shared,
      halt,
    });
    deps.onServing(orchestrator);
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
          deps.observer?.state("shards_owned", shards.size, { name: settings.sharding.name });
          return Promise.all([
            orchestrator.serveShards(shards),
            reconcilers?.serveShards(shards),
          ]).then(() => {});
        },
        signal,
      });
      await coordinator.join(); // the first fair share is served from the first listing
    }
    deps.observe?.(() => orchestrator.stats());
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
      deps.poster,
      () => Promise.all([orchestrator.run(), reconcilers?.run()]).then(() => {}),
    );
    await stopInOrder({
      signal,
      running,
      posting,
      admission,
      settings,
      logger,
      onFailure: deps.onFailure,
    });
  } finally {
    await coordinator?.finished; // the shards' work stopped; their Leases are released
    await shared?.[Symbol.asyncDispose](); // the cache's watches end with their readers
    // Our peering entries are removed only after the streams stopped.
    peeringStop.abort();
    await peered;
  }
}
