/**
 * The operator's scope: its parts, built once per term of service and read by everything the
 * term runs — the shared streams, the cause pipeline and the reconcile controllers — instead of
 * a bag of dependencies copied by hand at every step. A stream's per-resource scope adds the
 * resource and its handlers by kind.
 *
 * Functions take the whole scope only where they hand it on; a leaf takes a `Pick` of it (the
 * parts it reads), so a unit test passes a literal of those parts and nothing else.
 * @module
 */

import { getDefaultLifecycle, type Lifecycle } from "../../actions/lifecycles.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import type { KubeClient } from "../../client/client.ts";
import type { OperatorPause } from "../../engines/coordination/peering.ts";
import type { OperatorObserver } from "../../engines/observability/observers.ts";
import { Indexers, IndexingReadiness } from "../../engines/runners/indexing.ts";
import type {
  ChangingHandler,
  IndexingHandler,
  SpawningHandler,
  WatchingHandler,
} from "../../intents/handlers.ts";
import type { Memo } from "../../intents/contexts.ts";
import type { OperatorRegistry } from "../../intents/registries.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import type { NamespacePattern } from "../../structs/namespaces.ts";
import type { Resource } from "../../structs/resources.ts";
import type { ShardSpace } from "../../structs/shards.ts";
import { AdmissionGate } from "../../util/gate.ts";
import { Semaphore } from "../../util/semaphore.ts";
import { SharedInformers } from "../streams/sharing.ts";

/** The parts of one operator term, read-only, shared by everything the term runs. */
export interface OperatorScope {
  /** The connected client, given to handlers as `client`. */
  readonly client: KubeClient;
  /** Object operations (the client's, or a test's fake). */
  readonly api: KubeApi;
  /** The declared handlers. */
  readonly registry: OperatorRegistry;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** The operator's logger (object loggers derive from it). */
  readonly logger: Logger;
  /** The operator's memo (copied per object). */
  readonly memo: Memo;
  /** Which handlers run in a cycle (and which sub-handlers). */
  readonly lifecycle: Lifecycle;
  /** Observes cycles, handlers, queues and watch streams (metrics, traces). */
  readonly observer?: OperatorObserver | undefined;
  /** Peering's pause switch, when peering runs: while paused, nothing is processed. */
  readonly pause?: OperatorPause | undefined;
  /** Admits the cycles of all streams (`settings.queueing.admissionLimit`). */
  readonly gate?: AdmissionGate | undefined;
  /** Bounds concurrent processing across all streams (`settings.execution.maxWorkers`). */
  readonly limiter?: Semaphore | undefined;
  /** Namespace patterns (ignored when cluster-wide). */
  readonly namespaces: readonly NamespacePattern[];
  /** Watch cluster-wide. */
  readonly clusterwide: boolean;
  /** Sharded replicas: the shard space; which shards are served comes later. */
  readonly sharding?: ShardSpace | undefined;
  /**
   * The informer cache of the reconcile handlers (when there are any): the resources it holds
   * are read from it by the streams too. Its owner (the term) disposes it.
   */
  readonly shared?: SharedInformers | undefined;
  /** The operator's indexers (index handlers run on the streams). */
  readonly indexers: Indexers;
  /** Opens when every indexed stream listed and indexed its objects; handlers wait for it. */
  readonly readiness: IndexingReadiness;
  /** Stops the term. */
  readonly signal: AbortSignal;
  /**
   * Aborts the handlers and requests in flight at once, with no time to finish (a lost
   * leadership); `signal` aborts too.
   */
  readonly halt?: AbortSignal | undefined;
  /**
   * The wall clock of progress records (attempts started and stopped, retries delayed); the
   * real time without it. Tests inject a fixed one.
   */
  readonly now?: (() => Date) | undefined;
}

/** What the scope is built from: the parts given; the rest is made from them. */
export interface ScopeParts {
  /** The connected client. */
  readonly client: KubeClient;
  /** Object operations. @default client.api */
  readonly api?: KubeApi | undefined;
  /** The declared handlers. */
  readonly registry: OperatorRegistry;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** The operator's logger. */
  readonly logger: Logger;
  /** The operator's memo. */
  readonly memo: Memo;
  /** Handler ordering. @default the default lifecycle, as of now */
  readonly lifecycle?: Lifecycle | undefined;
  /** The observer, if observed. */
  readonly observer?: OperatorObserver | undefined;
  /** Peering's pause switch, when peering runs. */
  readonly pause?: OperatorPause | undefined;
  /** Namespace patterns. */
  readonly namespaces: readonly NamespacePattern[];
  /** Watch cluster-wide. */
  readonly clusterwide: boolean;
  /** The shard space, if sharded. */
  readonly sharding?: ShardSpace | undefined;
  /** Stops the term. */
  readonly signal: AbortSignal;
  /** Aborts the work in flight at once (a lost leadership). */
  readonly halt?: AbortSignal | undefined;
  /** The wall clock of progress records. @default the real time */
  readonly now?: (() => Date) | undefined;
}

/**
 * Builds the scope of one term: the given parts, and what is made from them once — the
 * limiter and the admission gate (from the settings), the indexers and their readiness gate
 * (from the registry), and the shared informer cache when there are reconcile handlers (not
 * started: informers start on first use; the caller disposes it).
 * @param parts The operator's parts.
 * @returns The scope.
 */
export function operatorScope(parts: ScopeParts): OperatorScope {
  const { settings, registry } = parts;
  const scope: OperatorScope = {
    client: parts.client,
    api: parts.api ?? parts.client.api,
    registry,
    settings,
    logger: parts.logger,
    memo: parts.memo,
    lifecycle: parts.lifecycle ?? getDefaultLifecycle(),
    observer: parts.observer,
    pause: parts.pause,
    gate: settings.queueing.admissionLimit
      ? new AdmissionGate(settings.queueing.admissionLimit)
      : undefined,
    limiter: settings.execution.maxWorkers
      ? new Semaphore(settings.execution.maxWorkers)
      : undefined,
    namespaces: parts.namespaces,
    clusterwide: parts.clusterwide,
    sharding: parts.sharding,
    indexers: new Indexers(registry.indexIds()),
    readiness: new IndexingReadiness(),
    signal: parts.signal,
    halt: parts.halt,
    now: parts.now,
  };
  const registrations = registry.reconcilers();
  if (!registrations.length) return scope;
  return { ...scope, shared: new SharedInformers(scope) };
}

/** The handlers of one resource, by kind (`OperatorRegistry.handlersFor`). */
export interface ResourceHandlers {
  /** Resource-changing handlers. */
  readonly changing: readonly ChangingHandler[];
  /** Raw-event handlers. */
  readonly watching: readonly WatchingHandler[];
  /** Daemons and timers. */
  readonly spawning: readonly SpawningHandler[];
  /** Index handlers. */
  readonly indexing: readonly IndexingHandler[];
}

/** The scope of one stream: the operator's, with its resource and that resource's handlers. */
export interface ResourceScope extends OperatorScope, ResourceHandlers {
  /** The resource being processed. */
  readonly resource: Resource;
}

/**
 * The scope of one stream's objects.
 * @param scope The operator's scope.
 * @param resource The stream's resource.
 * @param handlers Its handlers by kind.
 * @param signal Stops the stream's work (its handlers and requests); the scope's without it.
 * @returns The per-resource scope.
 */
export function resourceScope(
  scope: OperatorScope,
  resource: Resource,
  handlers: ResourceHandlers,
  signal: AbortSignal = scope.signal,
): ResourceScope {
  return {
    ...scope,
    resource,
    changing: handlers.changing,
    watching: handlers.watching,
    spawning: handlers.spawning,
    indexing: handlers.indexing,
    signal,
  };
}

/**
 * The wall-clock time for progress records: the injected clock's, else the real one.
 * @param scope The optional clock.
 * @returns The current time.
 */
export function nowOf(scope: Pick<OperatorScope, "now">): Date {
  return scope.now ? scope.now() : new Date();
}
